# mk/sim.mk -- the unit tests of the simulator's pure parts (its event heap
# and arrival generator) link their objects from lab/.
SIM_OBJ   := $(BUILD)/obj/lab/sim_heap.o $(BUILD)/obj/lab/sim_arrival.o
SIM_TESTS := $(filter $(BUILD)/tests/test_sim_%,$(TESTS))
$(SIM_TESTS): $(SIM_OBJ)
$(SIM_TESTS): override LDFLAGS += $(SIM_OBJ)
