#!/usr/bin/env bash
# install.sh -- the installed copy: `make install DESTDIR=... PREFIX=/usr`
# into a temp folder, then what a user of it sees. The files and links are
# where they belong; libfloodgate.so.3 exports the fg_ API and nothing else
# (nm -D: every function floodgate.h declares, no fg__); floodgate.h
# compiles as C++; the installed examples/hello.c and hello_async.c build
# with pkg-config against the shared library (ldd: the installed .so) and
# the static one (--static, the .a), and each decides 3 allowed then 1
# refused for 3/s against a real redis-server started here on a free
# loopback port (and hello.c in memory); the installed floodgate.service
# passes systemd-analyze verify; `make uninstall` leaves no file behind.
# A build with sanitizers builds the examples with them too. About 10 s.
FG_TEST_BOUND=${FG_TEST_BOUND:-120}
. "$(dirname "$0")/../serve/lib.sh"
cd "$(dirname "$0")/../.."
REPO=$PWD
BUILD=$(realpath -m "$BUILD")

for tool in redis-server redis-cli ss pkg-config cc g++ nm readelf ldd \
    systemd-analyze; do
    if ! command -v "$tool" >/dev/null; then
        bad "$tool missing (scripts/bootstrap installs it)"
        finish
    fi
done


ROOT=$T/root
LIBDIR=$ROOT/usr/lib
DOC=$ROOT/usr/share/doc/floodgate

# ---- make install ----------------------------------------------------------

if timeout 50 make -C "$REPO" --no-print-directory BUILD="$BUILD" install \
    DESTDIR="$ROOT" PREFIX=/usr >"$T/install.log" 2>&1; then
    ok
else
    bad "make install (exit $?):"
    tail -n 20 "$T/install.log"
    echo "$pass passed, $fail failed"
    exit 1
fi

for f in usr/bin/floodgate usr/lib/libfloodgate.a \
    usr/lib/libfloodgate.so.3.0.0 usr/include/floodgate.h \
    usr/lib/pkgconfig/floodgate.pc; do
    check "installed $f" test -f "$ROOT/$f" -a ! -L "$ROOT/$f"
done
check "bin/floodgate is executable" test -x "$ROOT/usr/bin/floodgate"
check "libfloodgate.so.3 -> libfloodgate.so.3.0.0" \
    test "$(readlink "$LIBDIR/libfloodgate.so.3")" = libfloodgate.so.3.0.0
check "libfloodgate.so -> libfloodgate.so.3" \
    test "$(readlink "$LIBDIR/libfloodgate.so")" = libfloodgate.so.3
for f in gatepass.ini nginx-auth-request.conf floodgate.service hello.c \
    hello_async.c README.md $(cd "$REPO" && echo docs/*.md); do
    check "installed share/doc/floodgate/$f" test -f "$DOC/$f"
done
check "the man pages' docs/lab.md is installed" test -f "$DOC/docs/lab.md"
# The README's listing is examples/hello.c, its opening comment aside.
check "the README shows examples/hello.c as it is" \
    cmp -s <(sed -n '/^```c$/,/^```$/p' "$REPO/README.md" | sed '1d;$d') \
    <(sed -n '/^#include <floodgate.h>/,$p' "$REPO/examples/hello.c")
mode=$(stat -c %a "$LIBDIR/libfloodgate.so.3.0.0")
check "the shared library is mode 644 ($mode)" test "$mode" = 644
check "the installed unit runs /usr/bin/floodgate" \
    grep -q '^ExecStart=/usr/bin/floodgate serve ' "$DOC/floodgate.service"
check "the installed binary runs" \
    sh -c "'$ROOT/usr/bin/floodgate' version | grep -q floodgate"

# The man pages, when mk/man.mk builds them: man/NAME.N.scd is installed as
# share/man/manN/NAME.N, and nothing else is there.
if [ -f mk/man.mk ]; then
    want=0
    for src in man/*.scd; do
        [ -e "$src" ] || continue
        page=$(basename "$src" .scd)
        want=$((want + 1))
        check "man page $page" test -f "$ROOT/usr/share/man/man${page##*.}/$page"
    done
    have=$(find "$ROOT/usr/share/man" -type f 2>/dev/null | wc -l)
    check "man pages: $have installed, $want sources" test "$have" -eq "$want"
fi

# ---- the shared library's symbols -----------------------------------------

SO=$LIBDIR/libfloodgate.so.3.0.0
check "soname libfloodgate.so.3" \
    sh -c "readelf -d '$SO' | grep -q 'Library soname: \[libfloodgate.so.3\]'"
nm -D --defined-only "$SO" | awk '{print $NF}' | sort -u >"$T/exported"
grep -oE '\bfg_[a-z0-9_]+ *\(' "$ROOT/usr/include/floodgate.h" |
    tr -d ' (' | sort -u >"$T/declared"
foreign=$(grep -v '^fg_' "$T/exported")
internal=$(grep '^fg__' "$T/exported")
check "exported symbols are all fg_ (not: $(echo $foreign))" test -z "$foreign"
check "no fg__ symbol exported (exported: $(echo $internal))" test -z "$internal"
missing=$(comm -23 "$T/declared" "$T/exported")
extra=$(comm -13 "$T/declared" "$T/exported")
check "every function of floodgate.h exported (missing: $(echo $missing))" \
    test -z "$missing" -a -s "$T/declared"
check "only floodgate.h's functions exported (extra: $(echo $extra))" \
    test -z "$extra"
echo "libfloodgate.so.3: $(wc -l <"$T/exported") symbols exported," \
    "$(wc -l <"$T/declared") functions declared"

# ---- the header as C++ ------------------------------------------------------

check "floodgate.h compiles as C++ (-Wall -Wextra -Werror -pedantic)" \
    g++ -fsyntax-only -x c++ -std=c++11 -Wall -Wextra -Werror -pedantic \
    "$ROOT/usr/include/floodgate.h"
check "floodgate.h compiles as C99 (-Wall -Wextra -Werror -pedantic)" \
    cc -fsyntax-only -x c -std=c99 -Wall -Wextra -Werror -pedantic \
    "$ROOT/usr/include/floodgate.h"
# Its macros too, under C++'s stricter warnings.
printf '#include <floodgate.h>\nunsigned long long max_count() { return FG_MAX_COUNT; }\n' >"$T/macros.cc"
check "its macros compile as C++ (-Wold-style-cast)" \
    g++ -fsyntax-only -std=c++11 -Wall -Wextra -Werror -pedantic \
    -Wold-style-cast -I"$ROOT/usr/include" "$T/macros.cc"

# ---- the examples, built with pkg-config -----------------------------------

export PKG_CONFIG_PATH=$LIBDIR/pkgconfig PKG_CONFIG_SYSROOT_DIR=$ROOT
check "pkg-config finds floodgate 0.1.0" \
    test "$(pkg-config --modversion floodgate 2>&1)" = 0.1.0
check "pkg-config --cflags points into DESTDIR" \
    sh -c "pkg-config --cflags floodgate | grep -q -- '-I$ROOT/usr/include'"
# floodgate.h includes only the C library: a program gets no hiredis
# include path nor its -D_FILE_OFFSET_BITS from floodgate.
cf=$(echo $(pkg-config --cflags floodgate))
check "pkg-config --cflags is floodgate's alone ($cf)" \
    test "$cf" = "-I$ROOT/usr/include"

# A library built with sanitizers (make asan) needs them in the program too.
SAN=
if nm "$LIBDIR/libfloodgate.a" 2>/dev/null | grep -q '__asan_'; then
    SAN="-fsanitize=address,undefined"
    echo "the library is built with sanitizers: examples built with $SAN"
fi
CC_FLAGS="-std=c11 -Wall -Wextra -Werror -O1 -g $SAN"

# build NAME SOURCE static|shared PKG...: $T/NAME from SOURCE.
build() {
    local name=$1 src=$2 kind=$3
    shift 3
    local cflags libs
    cflags=$(pkg-config --cflags floodgate "$@") || return 1
    if [ "$kind" = static ]; then
        # The .a, whatever else the folder holds: -l:libfloodgate.a.
        libs=$(pkg-config --static --libs floodgate "$@") || return 1
        libs=${libs/-lfloodgate/-l:libfloodgate.a}
    else
        libs=$(pkg-config --libs floodgate "$@") || return 1
    fi
    # shellcheck disable=SC2086
    cc $CC_FLAGS $cflags "$src" $libs -o "$T/$name" 2>"$T/$name.cc.log" ||
        { cat "$T/$name.cc.log"; return 1; }
}
for kind in shared static; do
    check "hello.c builds ($kind)" \
        build "hello_$kind" "$DOC/hello.c" "$kind"
    check "hello_async.c builds ($kind)" \
        build "hello_async_$kind" "$DOC/hello_async.c" "$kind" libevent
done

# docs/library.md's first listing, as a main(), builds with the flags above.
lib_md=$(sed -n '/^```c$/,/^```$/p' "$REPO/docs/library.md" |
    sed '1d;/^```$/,$d')
{
    echo '#include <stdio.h>'
    echo '#include <string.h>'
    grep '^#include' <<<"$lib_md"
    echo 'int main(void) {'
    grep -v '^#include' <<<"$lib_md"
    echo 'return 0; }'
} >"$T/library_md.c"
check "docs/library.md's first listing builds" \
    build library_md "$T/library_md.c" shared

# ldd: the shared builds load the installed .so (by its soname), the static
# builds none.
for p in hello_shared hello_async_shared; do
    check "$p needs libfloodgate.so.3" \
        sh -c "readelf -d '$T/$p' | grep -q 'Shared library: \[libfloodgate.so.3\]'"
    check "$p loads $LIBDIR/libfloodgate.so.3" \
        sh -c "LD_LIBRARY_PATH='$LIBDIR' ldd '$T/$p' |
               grep -q '^[[:space:]]*libfloodgate.so.3 => $LIBDIR/libfloodgate.so.3 '"
done
for p in hello_static hello_async_static; do
    check "$p links no libfloodgate.so" \
        sh -c "! ldd '$T/$p' | grep -q libfloodgate"
    check "$p holds fg_check" \
        sh -c "nm '$T/$p' | grep -q ' T fg_check$'"
done
# The static library links into a shared object (a server's module, a
# language's extension): position-independent, its internals hidden.
printf '#include <floodgate.h>\nint plugin_check(fg_limiter *l) { fg_decision d; return fg_check(l, "k", 1, 1, &d); }\n' >"$T/plugin.c"
check "libfloodgate.a links into a shared object" \
    sh -c "cc $SAN -shared -fPIC $(pkg-config --cflags floodgate) '$T/plugin.c' '$LIBDIR/libfloodgate.a' -lhiredis -levent -lpthread -Wl,-z,defs -o '$T/plugin.so' 2>'$T/plugin.err'"
[ -s "$T/plugin.err" ] && head -3 "$T/plugin.err"
check "the shared object exports none of its fg__ internals" \
    sh -c "! nm -D --defined-only '$T/plugin.so' | grep -q ' fg__'"
# The .pc names its folders from \${prefix}: an unpacked tree is found
# with --define-prefix, no sysroot needed.
check "floodgate.pc: libdir and includedir under \${prefix}" \
    sh -c "grep -qx 'libdir=\\\${prefix}/lib' '$LIBDIR/pkgconfig/floodgate.pc' &&
           grep -qx 'includedir=\\\${prefix}/include' '$LIBDIR/pkgconfig/floodgate.pc'"
dp=$(PKG_CONFIG_SYSROOT_DIR= pkg-config --define-prefix --cflags --libs floodgate 2>&1)
check "pkg-config --define-prefix finds the tree ($dp)" \
    test "$(echo $dp)" = "-I$ROOT/usr/include -L$ROOT/usr/lib -lfloodgate"

# ---- the examples against a real Redis -------------------------------------

start_redis || bad "redis-server did not start"
PORT=$RPORT

# decides NAME URL: 3 allowed (2, 1, 0 left) then one refused, with a wait
# of at most a third of a second, all by the store, nothing on stderr.
decides() {
    local name=$1 url=$2 out rc
    out=$(cd "$T" && LD_LIBRARY_PATH=$LIBDIR timeout 10 "./$name" "$url" \
        2>"$T/$name.err")
    rc=$?
    local want='^allowed remaining=2 retry_after_ms=0 source=store
allowed remaining=1 retry_after_ms=0 source=store
allowed remaining=0 retry_after_ms=0 source=store
limited remaining=0 retry_after_ms=([1-9][0-9]?|[12][0-9][0-9]|3[0-3][0-9]) source=store$'
    if [ "$rc" -ne 0 ] || [ -s "$T/$name.err" ] ||
        ! [[ $out =~ $want ]]; then
        echo "$name $url: exit $rc, output:"
        echo "$out"
        cat "$T/$name.err"
        return 1
    fi
}
n=0
for p in hello_shared hello_static hello_async_shared hello_async_static; do
    n=$((n + 1))
    check "$p: 3 allowed, then refused, on Redis" \
        decides "$p" "redis://127.0.0.1:$PORT?prefix=t$n:"
    keys=$(redis-cli -p "$PORT" --scan --pattern "t$n:*" | wc -l)
    check "$p counted in Redis ($keys keys under t$n:)" test "$keys" -gt 0
done
check "hello_shared: 3 allowed, then refused, in memory" \
    decides hello_shared memory

# ---- the systemd unit ------------------------------------------------------

# systemd-analyze verify asks that ExecStart's binary exist: a copy of the
# installed unit runs the binary installed in DESTDIR. Verify exits 0 on
# warnings (an unknown key, a bad value), so any output fails too.
mkdir -p "$T/unit"
sed "s|=/usr/bin/floodgate |=$ROOT/usr/bin/floodgate |" \
    "$DOC/floodgate.service" >"$T/unit/floodgate.service"
# Its Documentation= pages are looked up among the installed ones, when
# there are man pages to install.
man=--man=no
[ -d "$ROOT/usr/share/man" ] && man=--man=yes
verify=$(cd "$T/unit" && MANPATH=$ROOT/usr/share/man timeout 20 \
    systemd-analyze verify "$man" floodgate.service 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [ -z "$verify" ]; then
    ok
elif echo "$verify" | grep -qiE 'failed to (connect|initialize|set up)|bus|permission denied|not booted'; then
    echo "systemd-analyze cannot run here: $verify"
    bad "systemd-analyze verify could not run (not a verdict on the unit)"
else
    bad "systemd-analyze verify floodgate.service (exit $rc): $verify"
fi

# ---- make uninstall ---------------------------------------------------------

if timeout 30 make -C "$REPO" --no-print-directory BUILD="$BUILD" uninstall \
    DESTDIR="$ROOT" PREFIX=/usr >"$T/uninstall.log" 2>&1; then
    ok
else
    bad "make uninstall:"
    tail -n 20 "$T/uninstall.log"
fi
left=$(find "$ROOT" ! -type d)
check "make uninstall leaves no file (left: $(echo $left))" test -z "$left"

# A path with a space is refused before anything is written or removed
# (make would split it, and uninstall remove what the words name).
mkdir -p "$T/sp"
echo keep >"$T/sp/data"
for target in install uninstall; do
    timeout 50 make -C "$REPO" --no-print-directory BUILD="$BUILD" "$target" \
        PREFIX="$T/sp/data x" >"$T/sp.log" 2>&1
    rc=$?
    check "make $target PREFIX with a space: refused (exit $rc)" test "$rc" -ne 0
    check "make $target PREFIX with a space: says why" \
        grep -q 'PREFIX.*a path with a space' "$T/sp.log"
    check "make $target PREFIX with a space: nothing written or removed" \
        test "$(cd "$T/sp" && ls)" = data -a "$(cat "$T/sp/data")" = keep
done
check "make install PREFIX with a space: nothing in the source tree" \
    test ! -e "$REPO/x"

finish
