# mk/decision.mk -- fg_decision gained reset_us and retry_after_us after its
# existing fields. tests/unit/test_serve_headers.c (owned by the serve HTTP
# layer) still fills decisions with positional initializers of the six old
# fields, which -Wextra reports as missing initializers (the new fields are
# zero, which that test does not read). Until it names its fields (or adds
# the two zeros), that one object is built without the warning. Delete this
# file when it does.
$(BUILD)/obj/tests/unit/test_serve_headers.o: \
    override CFLAGS += -Wno-missing-field-initializers
