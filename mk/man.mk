# mk/man.mk -- the manual pages, written in scdoc (man/*.scd), built into
# $(BUILD)/man/ by `make man`. `make all` does not build them, so that the
# default build needs no scdoc; tests/integration/man_synopsis.sh renders
# the sources itself.
#
# man/NAME.SECTION.scd becomes $(BUILD)/man/NAME.SECTION. The date in each
# page is that of the last commit that changed man/ (SOURCE_DATE_EPOCH, as
# scdoc reads it), so that two builds of one revision give the same pages;
# outside a git checkout scdoc uses today's.

MAN_PAGES := $(BUILD)/man/floodgate.1 $(BUILD)/man/floodgate-check.1 \
             $(BUILD)/man/floodgate-serve.1 $(BUILD)/man/floodgate-lab.1 \
             $(BUILD)/man/floodgate.ini.5 $(BUILD)/man/libfloodgate.3
MAN_DATE  := $(shell git log -1 --format=%ct -- man 2>/dev/null)

.PHONY: man
man: $(MAN_PAGES)

# scdoc writes what it parsed before an error: the page appears only whole.
$(BUILD)/man/%: man/%.scd mk/man.mk
	@command -v scdoc >/dev/null || { echo "the man pages are built with" \
	    "scdoc, which is missing (apt-get install scdoc)" >&2; exit 1; }
	@mkdir -p $(@D)
	$(if $(MAN_DATE),SOURCE_DATE_EPOCH=$(MAN_DATE) )scdoc < $< > $@.tmp || \
	    { rm -f $@.tmp; exit 1; }
	mv $@.tmp $@
