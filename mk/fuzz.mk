# mk/fuzz.mk -- libFuzzer targets (tests/fuzz/*.c), not part of `make all`.
#
#   make fuzz              build every target, run each FUZZ_S seconds
#   make fuzz FUZZ_S=5     the short run of CI
#   make fuzz-build        build them only
#
# Built with Debian's clang and libclang-rt-14-dev into $(FUZZ_BUILD), the
# library and serve sources compiled again there with coverage and the
# sanitizers (ASan, UBSan that stops at the first report). Each target
# starts from its seeds in tests/fuzz/<target>/, read only; what it finds
# goes to $(FUZZ_BUILD)/corpus/<target>/, and a crash's input to
# $(FUZZ_BUILD)/crash/<target>/. A crash, a leak or a sanitizer report
# fails the run.

FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_S       ?= 60
FUZZ_ARGS    ?=
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -O1 -g -fno-omit-frame-pointer $(FUZZ_SAN) \
                -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude -MMD -MP

FUZZ_SRC     := $(sort $(wildcard tests/fuzz/*.c))
FUZZ_NAMES   := $(FUZZ_SRC:tests/fuzz/%.c=%)
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
# The daemon's objects but its main(): the targets drive serve/ directly.
FUZZ_SRV_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,\
                $(filter-out serve/main.c,$(wildcard serve/*.c)))
FUZZ_LIB     := $(FUZZ_BUILD)/libfloodgate.a
FUZZ_SRV     := $(FUZZ_BUILD)/libserve.a

.PHONY: fuzz fuzz-build

fuzz-build: $(FUZZ_BINS)

# Coverage for the code under test; libFuzzer's main only in the targets.
$(FUZZ_BUILD)/obj/src/%.o: src/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -Isrc -c $< -o $@

$(FUZZ_BUILD)/obj/serve/%.o: serve/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/obj/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -Isrc -Iserve \
	    -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_SRV): $(FUZZ_SRV_OBJ)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_BINS): $(FUZZ_BUILD)/%: $(FUZZ_BUILD)/obj/tests/fuzz/%.o $(FUZZ_SRV) \
    $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $< $(FUZZ_SRV) $(FUZZ_LIB) \
	    $(LDLIBS) -o $@

# One target after the other, each for FUZZ_S seconds (libFuzzer exits
# non-zero on a crash, a leak or a sanitizer report, and make stops).
fuzz: fuzz-build
	@for t in $(FUZZ_NAMES); do \
	    mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/crash/$$t; \
	    dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
	    echo "fuzz $$t: $(FUZZ_S) s"; \
	    $(FUZZ_BUILD)/$$t -max_total_time=$(FUZZ_S) -timeout=10 \
	        -print_final_stats=1 -detect_leaks=1 $$dict \
	        -artifact_prefix=$(FUZZ_BUILD)/crash/$$t/ $(FUZZ_ARGS) \
	        $(FUZZ_BUILD)/corpus/$$t tests/fuzz/$$t \
	        >$(FUZZ_BUILD)/$$t.log 2>&1; \
	    rc=$$?; \
	    grep -E '^(Done|stat::number_of_executed_units)' \
	        $(FUZZ_BUILD)/$$t.log | sed "s/^/  $$t: /"; \
	    if [ $$rc -ne 0 ]; then \
	        echo "FAIL  fuzz $$t (exit $$rc):"; \
	        tail -n 60 $(FUZZ_BUILD)/$$t.log; exit 1; \
	    fi; \
	done; echo "fuzz: every target ran $(FUZZ_S) s without a finding"

.PRECIOUS: $(FUZZ_BUILD)/obj/%.o
-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
