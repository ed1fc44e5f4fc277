# mk/install.mk -- the shared library, and `make install` / `make uninstall`.
#
#   make install [PREFIX=/usr/local] [DESTDIR=]   make uninstall (the same)
#
# libfloodgate.so is built from its own objects, $(BUILD)/pic/src/*.o
# (-fPIC, -fvisibility=hidden), so that the binary and the tests' static
# library stay as they were; the installed libfloodgate.a is made of the
# same objects, so that it links into a shared object too (a server's
# module, a language's extension). Hidden visibility by default, with include/floodgate.h
# pushing default visibility around its declarations, exports exactly the
# public fg_ calls; the fg__ functions shared between the library's files
# stay internal. The man pages are installed when mk/man.mk defines
# MAN_PAGES (and its `man` target), each by its suffix.

PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR       ?= $(PREFIX)/share/man
DOCDIR       ?= $(PREFIX)/share/doc/floodgate
INSTALL      ?= install

# The package's version is the header's FG_VERSION (floodgate.pc's). The
# library's file is libfloodgate.so.ABI.0.0 and its soname
# libfloodgate.so.ABI. ABI changes whenever a program built against the old
# header could not run on the new library: a public struct changed size or
# layout, a function was removed or its signature changed, an enum's or a
# macro's value changed (adding a function or an error code does not). 1: fg_set_req and fg_local_ask grew (refunds say when their
# units were taken). 2: fg_set_req grew again (a set that waited for a
# failed probe). 3: fg_set_result (and so fg_set_req) grew: 'waited'.
FG_SO_VERSION := $(shell sed -n 's/^\#define FG_VERSION "\(.*\)"/\1/p' \
                   include/floodgate.h)
FG_ABI        := 3
FG_SONAME     := libfloodgate.so.$(FG_ABI)
SO            := $(BUILD)/libfloodgate.so.$(FG_ABI).0.0
PIC_OBJ       := $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
PIC_LIB       := $(BUILD)/pic/libfloodgate.a
# What the library itself links (see floodgate.pc.in); the binary needs more.
SO_LDLIBS     := -lhiredis -levent -lpthread

# README.md and docs/*.md go to DOCDIR and DOCDIR/docs, where the man
# pages send their readers.
DOC_PAGES    := $(sort $(wildcard docs/*.md))
INSTALL_DOCS := examples/gatepass.ini examples/nginx-auth-request.conf \
                examples/floodgate.service examples/hello.c \
                examples/hello_async.c

.PHONY: install uninstall

# The loader's cache is rebuilt for an install into the system (no
# DESTDIR) by root; whoever installed where the loader does not look (not
# root, or a PREFIX of one's own) is told how programs find the library.
LDCONFIG = @if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
	    echo ldconfig; ldconfig; fi
LDNOTE = @if [ -z "$(DESTDIR)" ] && ! ldconfig -p 2>/dev/null | \
	    grep -qF '=> $(LIBDIR)/$(FG_SONAME)'; then \
	    echo "note: the loader does not search $(LIBDIR); a program finds" \
	         "$(FG_SONAME) there with LD_LIBRARY_PATH=$(LIBDIR)" \
	         "or when linked with -Wl,-rpath,$(LIBDIR)"; fi

# make cannot name a file whose path holds a space: such a PREFIX or
# DESTDIR is refused before anything is written or removed.
INSTALL_VARS := DESTDIR PREFIX BINDIR LIBDIR INCLUDEDIR PKGCONFIGDIR \
                MANDIR DOCDIR
INSTALL_SPACED = $(strip $(foreach v,$(INSTALL_VARS),$(if $(word 2,x$($(v))x),$(v))))
INSTALL_CHECK = $(if $(INSTALL_SPACED),$(error $(INSTALL_SPACED): a path \
                  with a space or tab cannot be installed to; choose another))

all: $(SO)

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Isrc -fPIC -fvisibility=hidden -c $< -o $@

# -z defs: a library that forgets a dependency fails here, not in the
# programs that link it.
$(SO): $(PIC_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(FG_SONAME) -Wl,-z,defs \
	    $(PIC_OBJ) $(SO_LDLIBS) -o $@

$(PIC_LIB): $(PIC_OBJ)
	rm -f $@
	$(AR) rcs $@ $(PIC_OBJ)

# The .pc carries PREFIX and LIBDIR (relative to ${prefix} when under it,
# for pkg-config --define-prefix), so it is written at each install.
install: $(PIC_LIB) $(SO) $(BIN)
	$(INSTALL_CHECK)
	$(if $(MAN_PAGES),$(MAKE) --no-print-directory BUILD=$(BUILD) man)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) \
	    $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(DOCDIR) \
	    $(DESTDIR)$(DOCDIR)/docs
	$(INSTALL) -m 755 $(BIN) $(DESTDIR)$(BINDIR)/floodgate
	$(INSTALL) -m 644 $(PIC_LIB) $(DESTDIR)$(LIBDIR)/libfloodgate.a
	$(INSTALL) -m 644 $(SO) $(DESTDIR)$(LIBDIR)/$(notdir $(SO))
	ln -sf $(notdir $(SO)) $(DESTDIR)$(LIBDIR)/$(FG_SONAME)
	ln -sf $(FG_SONAME) $(DESTDIR)$(LIBDIR)/libfloodgate.so
	$(INSTALL) -m 644 include/floodgate.h $(DESTDIR)$(INCLUDEDIR)/floodgate.h
	sed -e 's|@PREFIX@|$(PREFIX)|' \
	    -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' \
	    -e 's|@VERSION@|$(FG_SO_VERSION)|' \
	    floodgate.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/floodgate.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/floodgate.pc
	$(INSTALL) -m 644 $(filter-out %.service,$(INSTALL_DOCS)) README.md \
	    $(DESTDIR)$(DOCDIR)
	$(INSTALL) -m 644 $(DOC_PAGES) $(DESTDIR)$(DOCDIR)/docs
	sed 's|/usr/local/bin/floodgate|$(BINDIR)/floodgate|' \
	    examples/floodgate.service >$(DESTDIR)$(DOCDIR)/floodgate.service
	chmod 644 $(DESTDIR)$(DOCDIR)/floodgate.service
	@for p in $(MAN_PAGES); do \
	    d=$(DESTDIR)$(MANDIR)/man$${p##*.}; \
	    echo "$(INSTALL) -D -m 644 $$p $$d/$${p##*/}"; \
	    $(INSTALL) -D -m 644 "$$p" "$$d/$${p##*/}" || exit 1; \
	done
	$(LDCONFIG)
	$(LDNOTE)

uninstall:
	$(INSTALL_CHECK)
	rm -f $(DESTDIR)$(BINDIR)/floodgate \
	    $(DESTDIR)$(LIBDIR)/libfloodgate.a \
	    $(DESTDIR)$(LIBDIR)/$(notdir $(SO)) \
	    $(DESTDIR)$(LIBDIR)/$(FG_SONAME) \
	    $(DESTDIR)$(LIBDIR)/libfloodgate.so \
	    $(DESTDIR)$(INCLUDEDIR)/floodgate.h \
	    $(DESTDIR)$(PKGCONFIGDIR)/floodgate.pc \
	    $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(INSTALL_DOCS)) README.md \
	        $(DOC_PAGES))
	@for p in $(MAN_PAGES); do \
	    f=$(DESTDIR)$(MANDIR)/man$${p##*.}/$${p##*/}; \
	    echo "rm -f $$f"; rm -f "$$f"; \
	done
	[ ! -d $(DESTDIR)$(DOCDIR)/docs ] || rmdir --ignore-fail-on-non-empty $(DESTDIR)$(DOCDIR)/docs
	[ ! -d $(DESTDIR)$(DOCDIR) ] || rmdir --ignore-fail-on-non-empty $(DESTDIR)$(DOCDIR)
	$(LDCONFIG)


-include $(shell find $(BUILD)/pic -name '*.d' 2>/dev/null)
