#!/usr/bin/env bash
# floodgate bench: runs the programs of the bench/ folder beside the
# binary, in name order, each under a "== NAME" heading; a failing one
# makes the exit status 1; no folder is a clear error. The real benchmarks
# take a minute and are not tests: a copy of the binary runs stand-ins.
. "$(dirname "$0")/../serve/lib.sh"

"$FLOODGATE" bench --help >"$T/help" 2>&1
expect_eq "--help exits 0" "$?" 0
check "--help shows the synopsis" grep -q '^usage: floodgate bench$' "$T/help"
"$FLOODGATE" bench extra >/dev/null 2>"$T/extra"
expect_eq "an argument exits 2" "$?" 2
check "an argument: says so" grep -q "unexpected argument 'extra'" "$T/extra"
"$FLOODGATE" --help | grep -q '^  bench '
expect_eq "floodgate --help lists bench" "$?" 0

mkdir -p "$T/bin"
cp "$FLOODGATE" "$T/bin/floodgate"
"$T/bin/floodgate" bench >"$T/none.out" 2>"$T/none.err"
expect_eq "no bench folder: exits 1" "$?" 1
check "no bench folder: names it" grep -q "no benchmark programs in $T/bin/bench" "$T/none.err"

mkdir -p "$T/bin/bench"
printf '#!/bin/sh\necho "b ran"\n' >"$T/bin/bench/b"
printf '#!/bin/sh\necho "a ran"\n' >"$T/bin/bench/a"
printf 'not a program\n' >"$T/bin/bench/notes.txt"
chmod +x "$T/bin/bench/a" "$T/bin/bench/b"
"$T/bin/floodgate" bench >"$T/ok.out" 2>"$T/ok.err"
expect_eq "two programs: exits 0" "$?" 0
expect_eq "two programs: in name order, each under its heading" \
    "$(grep -v '^$' "$T/ok.out" | tr '\n' '|')" "== a|a ran|== b|b ran|"

# The first in name order fails: the ones after it still run.
printf '#!/bin/sh\necho "0 broke"\nexit 3\n' >"$T/bin/bench/0"
chmod +x "$T/bin/bench/0"
"$T/bin/floodgate" bench >"$T/bad.out" 2>"$T/bad.err"
expect_eq "a failing program: exits 1" "$?" 1
check "a failing program: named with its status" grep -q "floodgate bench: 0 failed (3)" "$T/bad.err"
expect_eq "a failing program: it ran first, the others after it" \
    "$(grep -v '^$' "$T/bad.out" | tr '\n' '|')" "== 0|0 broke|== a|a ran|== b|b ran|"
finish
