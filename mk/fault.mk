# mk/fault.mk -- the fault tests' tools, and `make soak` (not a test).
#
#   make soak [SOAK_S=600]   mixed traffic through several floodgate serve
#                            processes, Redis restarted every minute and a
#                            SIGHUP reload every 30 s (tests/fault/soak.sh)
#
# tests/fault/faultproxy.c, a TCP proxy whose faults are switched while it
# runs, tests/fault/faultcheck.c, the catalogue's driver of the library
# and of serve, and tests/fault/nomem.c, an LD_PRELOAD library that fails
# every allocation for a while, are built into $(BUILD)/fault/ by
# `make all`.

FAULT_PROXY := $(BUILD)/fault/faultproxy
FAULT_CHECK := $(BUILD)/fault/faultcheck
FAULT_NOMEM := $(BUILD)/fault/nomem.so
SOAK_S      ?= 600

.PHONY: soak

all: $(FAULT_PROXY) $(FAULT_CHECK) $(FAULT_NOMEM)

# An LD_PRELOAD library, without the sanitizers (whose allocator it would
# have to come before).
$(FAULT_NOMEM): tests/fault/nomem.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -O1 -Wall -Wextra -Werror -fPIC -shared $< -o $@

$(FAULT_PROXY): $(BUILD)/obj/tests/fault/faultproxy.o
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LDLIBS) -o $@

$(FAULT_CHECK): $(BUILD)/obj/tests/fault/faultcheck.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@

soak: deps all
	BUILD=$(realpath $(BUILD)) FLOODGATE=$(realpath $(BIN)) SOAK_S=$(SOAK_S) \
	    bash tests/fault/soak.sh
.PRECIOUS: $(BUILD)/obj/tests/fault/%.o
