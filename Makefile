# floodgate -- build, test, benchmark.
#
#   make          build/libfloodgate.a and build/floodgate
#   make test     every test (unit, then integration against real servers)
#   make asan     the tests again under AddressSanitizer and UBSan
#   make bench    the benchmark tables (not a test)
#   make demo     the eight-server scalper experiment
#
# Sources are found by directory: src/ is the library, cli/ serve/ lab/ the
# binary, tests/unit/test_*.c one test program each, tests/integration/*.sh
# one integration test each, bench/*.c one benchmark each. An area may add
# its own rules in mk/<area>.mk.

CC       ?= cc
BUILD    ?= build
# One spelling for one folder: BUILD=$PWD/build is build, so the object
# files' recorded header dependencies match whichever way it was given.
override BUILD := $(patsubst $(CURDIR)/%,%,$(abspath $(BUILD)))
CFLAGS   ?= -O2 -g
# Warnings are errors here; a distribution building with another compiler
# may turn that off with WERROR= (make WERROR= all).
WERROR   ?= -Werror
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -Iinclude \
            -MMD -MP
override LDLIBS += -lhiredis -lhttp_parser -levent -levent_pthreads -linih -lpthread -lm

LIB_SRC   := $(sort $(wildcard src/*.c))
BIN_SRC   := $(sort $(wildcard cli/*.c serve/*.c lab/*.c))
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
BIN_OBJ   := $(BIN_SRC:%.c=$(BUILD)/obj/%.o)
TESTS     := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
BENCHES   := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

LIB := $(BUILD)/libfloodgate.a
BIN := $(BUILD)/floodgate

.PHONY: all test unit asan bench demo deps clean format
# Keep object files of test and bench programs between runs.
.SECONDARY:
.DEFAULT_GOAL := all

all: $(LIB) $(BIN) $(TESTS) $(BENCHES)

# Layers: cli/, serve/ and lab/ see only include/floodgate.h (and their own
# folders); the library, its tests and benchmarks see src/ too.
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/src/%.o $(BUILD)/obj/tests/%.o $(BUILD)/obj/bench/%.o: \
    override CFLAGS += -Isrc

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(BIN): $(BIN_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $(BIN_OBJ) $(LIB) $(LDLIBS) -o $@

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@

deps:
	@scripts/bootstrap

# Unit tests first (fast, no servers), then the integration scripts, each
# given the binary's path. Every program prints "N passed, N failed" last.
test: deps all
	@BUILD=$(BUILD) scripts/run-tests $(TESTS) -- $(sort $(wildcard tests/integration/*.sh))

unit: all
	@BUILD=$(BUILD) scripts/run-tests $(TESTS) --

asan:
	@scripts/bootstrap
	$(MAKE) BUILD=build-asan \
	    CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	    LDFLAGS="-fsanitize=address,undefined" test

bench: deps all
	@BUILD=$(BUILD) scripts/run-bench

demo:
	@scripts/bootstrap demo
	@$(MAKE) --no-print-directory all
	@scripts/demo

format:
	clang-format -i $(LIB_SRC) $(BIN_SRC) $(TEST_SRC) $(BENCH_SRC) \
	    $(wildcard include/*.h src/*.h cli/*.h serve/*.h lab/*.h tests/*.h)

# The default build, make asan's and make fuzz's, and the BUILD given when
# it is a folder of its own inside the tree (never the tree, a folder
# above it or outside it, nor a source folder or file).
SOURCE_TOP := .git .ci src include cli serve lab tests docs man mk scripts \
               examples bench Makefile README.md floodgate.pc.in \
               .clang-format .gitignore
CLEAN_BUILD  = $(if $(filter /% . .. ../%,$(BUILD))$(filter $(SOURCE_TOP),\
                 $(firstword $(subst /, ,$(BUILD)))),,$(BUILD))
clean:
	rm -rf build build-asan build-fuzz $(CLEAN_BUILD)

-include mk/*.mk
-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
