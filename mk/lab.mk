# mk/lab.mk -- the lab's web page, embedded into the binary.
#
# Every file of lab/web/ becomes a byte array in $(BUILD)/gen/lab_assets.c
# (od and sed only, present everywhere), listed in fg__lab_assets[] with its
# URL path and content type; lab/web.c serves them.

LAB_WEB      := $(sort $(wildcard lab/web/*.html lab/web/*.css lab/web/*.js lab/web/*.svg))
LAB_ASSETS_C := $(BUILD)/gen/lab_assets.c
LAB_ASSETS_O := $(BUILD)/obj/gen/lab_assets.o

BIN_OBJ += $(LAB_ASSETS_O)
$(BIN): $(LAB_ASSETS_O)

$(LAB_ASSETS_C): $(LAB_WEB) mk/lab.mk
	@mkdir -p $(@D)
	@{ echo '/* generated from lab/web/ by mk/lab.mk: do not edit */'; \
	  echo '#include "lab.h"'; \
	  i=0; for f in $(LAB_WEB); do \
	    echo "static const unsigned char a$$i[] = {"; \
	    od -An -v -tx1 "$$f" | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	    echo "};"; i=$$((i+1)); \
	  done; \
	  echo 'const fg__lab_asset fg__lab_assets[] = {'; \
	  i=0; for f in $(LAB_WEB); do \
	    case "$$f" in \
	      *.html) t='text/html; charset=utf-8';; \
	      *.css) t='text/css; charset=utf-8';; \
	      *.js) t='text/javascript; charset=utf-8';; \
	      *) t='image/svg+xml';; \
	    esac; \
	    echo "    {\"/$${f#lab/web/}\", \"$$t\", a$$i, sizeof a$$i},"; \
	    i=$$((i+1)); \
	  done; \
	  echo '};'; \
	  echo "const size_t fg__lab_nassets = $$i;"; \
	} > $@.tmp && mv $@.tmp $@

$(LAB_ASSETS_O): $(LAB_ASSETS_C)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Ilab -c $< -o $@

# The unit tests of the lab's pure parts and process helpers link
# lab/proc.o and lab/bound.o.
LAB_TESTS := $(filter $(BUILD)/tests/test_lab_%,$(TESTS))
LAB_TEST_OBJ := $(BUILD)/obj/lab/proc.o $(BUILD)/obj/lab/bound.o
$(LAB_TESTS): $(LAB_TEST_OBJ)
$(LAB_TESTS): override LDFLAGS += $(LAB_TEST_OBJ)
