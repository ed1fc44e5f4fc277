#!/usr/bin/env bash
# The man pages (man/*.scd) render, and say what the binary's --help says.
#
# The rule, for each command:
#   - its usage is the line of `floodgate ... --help` that starts with
#     "usage: ", with the indented lines right after it, "usage: " removed
#     and every run of blanks and newlines made one space;
#   - a page's SYNOPSIS forms are its SYNOPSIS section split at blank
#     lines, each form's blanks and newlines made one space: once from the
#     .scd source, with scdoc's '*' (bold) and '\' (escape) removed (a
#     SYNOPSIS uses them only as markup), and once from the page as
#     `man -l` renders it, 1000 columns wide so that no line is broken;
#   - the usage of check, serve and lab is the first form of
#     floodgate-check(1), floodgate-serve(1) and floodgate-lab(1), in both;
#     the usage of floodgate itself, bench and version is one of the forms
#     of floodgate(1), in both;
#   - every --option token of a command's --help appears in its page's
#     source as a whole token.
# Each page must also go through scdoc with no error nor message, and, when
# man is installed, through `man --warnings -l` with none. The pages are
# rendered into the temp folder: this test needs no `make man`.
. "$(dirname "$0")/../serve/lib.sh"

MAN_SRC="$(dirname "$0")/../../man"
PAGES="floodgate.1 floodgate-check.1 floodgate-serve.1 floodgate-lab.1
       floodgate.ini.5 libfloodgate.3"

# Blanks and newlines to one space; one form per input paragraph.
forms() { awk 'BEGIN { RS = "" } { gsub(/[ \t\n]+/, " "); sub(/^ /, "");
                                  sub(/ $/, ""); print }'; }

# usage ARGS...: the usage of `floodgate ARGS --help`, one line.
usage() {
    "$FLOODGATE" "$@" --help 2>/dev/null |
        awk '/^usage: / && !u { u = 1; sub(/^usage: /, ""); print; next }
             u && /^[ \t]/ { print; next }
             u { exit }' | forms
}

# src_forms PAGE: the SYNOPSIS forms of man/PAGE.scd.
src_forms() {
    awk '/^# SYNOPSIS$/ { s = 1; next } /^# / { s = 0 } s' \
        "$MAN_SRC/$1.scd" | tr -d '*\\' | forms
}

# man_forms PAGE: the SYNOPSIS forms of the page as man renders it (any
# overstrike formatting removed).
man_forms() {
    MANWIDTH=1000 MAN_KEEP_FORMATTING= man -l "$T/$1" 2>/dev/null |
        sed 's/.\x08//g' |
        awk '/^SYNOPSIS$/ { s = 1; next } /^[^ \t]/ { s = 0 } s' | forms
}

HAVE_MAN=0
if command -v man >/dev/null 2>&1; then
    HAVE_MAN=1
else
    echo "skip: man is not installed: pages not formatted, rendered SYNOPSIS not compared"
fi

if ! command -v scdoc >/dev/null 2>&1; then
    bad "scdoc is not installed (scripts/bootstrap installs it)"
    finish
fi

for p in $PAGES; do
    if [ ! -f "$MAN_SRC/$p.scd" ]; then
        bad "man/$p.scd exists"
        continue
    fi
    scdoc <"$MAN_SRC/$p.scd" >"$T/$p" 2>"$T/$p.scdoc"
    rc=$?
    check "$p: scdoc renders it without an error or a message (exit $rc)" \
        test "$rc" -eq 0 -a ! -s "$T/$p.scdoc"
    [ -s "$T/$p.scdoc" ] && sed 's/^/    scdoc: /' "$T/$p.scdoc"
    if [ "$HAVE_MAN" = 1 ]; then
        MANWIDTH=80 man --warnings -l "$T/$p" >"$T/$p.txt" 2>"$T/$p.man"
        rc=$?
        check "$p: man -l formats it without a warning (exit $rc)" \
            test "$rc" -eq 0 -a -s "$T/$p.txt" -a ! -s "$T/$p.man"
        [ -s "$T/$p.man" ] && sed 's/^/    man: /' "$T/$p.man" | head -5
    fi
done

# same NAME GOT WANT: GOT equals WANT, both printed when not.
same() {
    if [ "$2" = "$3" ]; then ok "$1"; else
        bad "$1"; echo "    --help: '$3'"; echo "    page:   '$2'"
    fi
}
# among NAME FORMS WANT: WANT is one line of FORMS.
among() {
    if [ -n "$3" ] && printf '%s\n' "$2" | grep -Fxq -- "$3"; then ok "$1"; else
        bad "$1"; echo "    --help: '$3'"
        printf '%s\n' "$2" | sed 's/^/    page:   /'
    fi
}

for cmd in check serve lab; do
    want=$(usage "$cmd")
    check "floodgate $cmd --help has a usage" test -n "$want"
    same "floodgate-$cmd(1) SYNOPSIS (source) is the usage of --help" \
        "$(src_forms "floodgate-$cmd.1" | head -n 1)" "$want"
    [ "$HAVE_MAN" = 1 ] &&
        same "floodgate-$cmd(1) SYNOPSIS (rendered) is the usage of --help" \
            "$(man_forms "floodgate-$cmd.1" | head -n 1)" "$want"
done

src_top=$(src_forms floodgate.1)
man_top=$([ "$HAVE_MAN" = 1 ] && man_forms floodgate.1)
for cmd in "" bench version; do
    want=$(usage $cmd)
    among "floodgate(1) SYNOPSIS (source) has the usage of floodgate${cmd:+ $cmd} --help" \
        "$src_top" "$want"
    [ "$HAVE_MAN" = 1 ] &&
        among "floodgate(1) SYNOPSIS (rendered) has the usage of floodgate${cmd:+ $cmd} --help" \
            "$man_top" "$want"
done

# Every --option of each command's --help, in its page.
for pair in ":floodgate.1" "check:floodgate-check.1" "serve:floodgate-serve.1" \
    "lab:floodgate-lab.1" "bench:floodgate.1" "version:floodgate.1"; do
    cmd=${pair%%:*} page=${pair#*:}
    opts=$("$FLOODGATE" $cmd --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*' | sort -u)
    missing=""
    for o in $opts; do
        grep -qE -- "(^|[^a-z-])$o([^a-z-]|\$)" "$MAN_SRC/$page.scd" ||
            missing="$missing $o"
    done
    n=$(echo $opts | wc -w)
    expect_eq "${page%.*}(${page##*.}) names the $n --options of floodgate${cmd:+ $cmd} --help" \
        "${missing# }" ""
done

finish
