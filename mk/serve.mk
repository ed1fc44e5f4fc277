# mk/serve.mk -- build rules of `floodgate serve` beyond the defaults.
#
# The unit tests of the daemon's pure parts (tests/unit/test_serve_*.c) link
# the serve objects they test; the integration scripts use a small load
# generator, tests/serve/fgload.c (libevent's HTTP client), a mutation
# fuzzer of the HTTP layer, tests/serve/fgfuzz.c, and a client that
# pipelines without reading, tests/serve/fggreedy.c, all built here.

SERVE_PURE     := config keys headers metrics log fallback bearer
SERVE_PURE_OBJ := $(SERVE_PURE:%=$(BUILD)/obj/serve/%.o)
SERVE_TESTS    := $(filter $(BUILD)/tests/test_serve_%,$(TESTS))
SERVE_FGLOAD   := $(BUILD)/tests/serve/fgload
SERVE_FGFUZZ   := $(BUILD)/tests/serve/fgfuzz
SERVE_FGGREEDY := $(BUILD)/tests/serve/fggreedy

$(SERVE_TESTS): $(SERVE_PURE_OBJ)
$(SERVE_TESTS): override LDFLAGS += $(SERVE_PURE_OBJ)

all: $(SERVE_FGLOAD) $(SERVE_FGFUZZ) $(SERVE_FGGREEDY)

$(SERVE_FGLOAD): $(BUILD)/obj/tests/serve/fgload.o
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LDLIBS) -o $@

$(SERVE_FGFUZZ): $(BUILD)/obj/tests/serve/fgfuzz.o
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LDLIBS) -o $@

$(SERVE_FGGREEDY): $(BUILD)/obj/tests/serve/fggreedy.o
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LDLIBS) -o $@
