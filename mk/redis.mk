# mk/redis.mk -- programs the Redis store's integration tests and benchmark
# drive (tests/redis/*.c -> $(BUILD)/redis/*), built by `make all`.

REDIS_TOOL_SRC := $(sort $(wildcard tests/redis/*.c))
REDIS_TOOLS    := $(REDIS_TOOL_SRC:tests/redis/%.c=$(BUILD)/redis/%)

all: $(REDIS_TOOLS)

$(BUILD)/redis/%: $(BUILD)/obj/tests/redis/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@
.PRECIOUS: $(BUILD)/obj/tests/redis/%.o
