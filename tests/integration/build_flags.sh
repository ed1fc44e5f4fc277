#!/usr/bin/env bash
# build_flags.sh -- a packager's build: every target (library, binary,
# unit tests, benchmarks) built from this tree with Debian's
# dpkg-buildflags, hardening and link-time optimisation on (Ubuntu's
# default), into a temp folder; -Werror holds there too, so a warning
# only LTO's whole-program view raises fails it. The binary it built
# then decides 2 allowed and 1 refused for 2/s, and its test_limiter
# passes. About 60 s on 2 cores.
FG_TEST_BOUND=${FG_TEST_BOUND:-300}
. "$(dirname "$0")/../serve/lib.sh"
cd "$(dirname "$0")/../.."

if ! command -v dpkg-buildflags >/dev/null; then
    bad "dpkg-buildflags missing (dpkg-dev; scripts/bootstrap installs it)"
    finish
fi
eval "$(DEB_BUILD_MAINT_OPTIONS='hardening=+all optimize=+lto' dpkg-buildflags --export=sh)"
check "dpkg-buildflags asks for LTO ($CFLAGS)" grep -q -- '-flto' <<<"$CFLAGS"
B=$T/b
make -s -j2 BUILD="$B" CFLAGS="$CFLAGS" CPPFLAGS="$CPPFLAGS" \
    LDFLAGS="$LDFLAGS" all >"$T/make.log" 2>&1
rc=$?
check "make all with dpkg-buildflags (LTO, hardening) builds" [ "$rc" = 0 ]
[ "$rc" = 0 ] || grep -E 'error|warning' "$T/make.log" | head -20
out=$("$B/floodgate" check --limit 2/s --key a --count 3 2>&1 | tail -n 1)
expect_eq "its floodgate decides" "$out" "allowed=2 limited=1"
"$B/tests/test_limiter" >"$T/unit.log" 2>&1
urc=$?
check "its test_limiter passes ($(tail -n 1 "$T/unit.log"))" [ "$urc" = 0 ]
finish
