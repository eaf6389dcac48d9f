#!/bin/sh
# test_install.sh -- `make install` and discovery, as a user of the library meets them:
#   1. one version: SIMBA_VERSION in simba.h, every header's title line, CHANGELOG.md's
#      latest release, the pkg-config files and the CMake package agree;
#   2. pkg-config after `make install DESTDIR=<stage> PREFIX=/usr/local` (staged, as a
#      distribution package is built) and after `make install PREFIX=<tmp>`;
#   3. CMake from the source tree (add_subdirectory) and from a tarball (FetchContent);
#   4. CMake find_package after install (a real prefix and the relocated stage), with the
#      version check refusing an incompatible request;
#   5. the README's Install snippets build as written;
#   an adapter (libuv) included as <simba/adapters/simba_libuv.h> from the installed tree;
#   6. `make uninstall` removes every file it installed.
# Each consumer (tests/install/*.c) is compiled with -Wall -Wextra -Wpedantic -Werror, linked
# against the real sqlite3, hiredis and zookeeper_mt, and run. Needs cmake and pkg-config.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
MAKE=${MAKE:-make}
CC=${CC:-cc}
T=$(mktemp -d "${TMPDIR:-/tmp}/simba-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "  ok $1"; }
bad() { FAIL=$((FAIL + 1)); echo "  FAIL $1"; }
check() { name=$1; shift; if "$@" >"$T/out" 2>&1; then ok "$name"; else bad "$name"; sed 's/^/    /' "$T/out" | tail -20; fi; }
for tool in cmake pkg-config "$CC"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "test_install: $tool is missing (make deps installs it)"; exit 1; }
done
WARN="-std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Werror"

# ---- 1. one version ---------------------------------------------------------------------
V=$(sed -n 's/^#define SIMBA_VERSION "\(.*\)"/\1/p' simba.h)
echo "== version $V"
echo "$V" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+$' && ok "SIMBA_VERSION is x.y.z" || bad "SIMBA_VERSION '$V' is not x.y.z"
for h in simba.h simba_memory.h simba_sql.h simba_redis.h simba_zk.h simba_pg.h; do
    sed -n 2p "$h" | grep -q "^ \* $h v$V -- " && ok "$h title line says v$V" || bad "$h title line: $(sed -n 2p "$h")"
done
# simba.h's list of headers names every header and adapter there is
for h in simba*.h adapters/simba_*.h; do
    sed -n '/^ \* THE HEADERS/,/^ \*$/p' simba.h | grep -q "${h#adapters/}" && ok "simba.h's list of headers names $h" || bad "simba.h's list of headers omits $h"
done
CL=$(sed -n 's/^## \[\{0,1\}\([0-9][0-9.]*\)\]\{0,1\}.*/\1/p' CHANGELOG.md | head -1)
[ "$CL" = "$V" ] && ok "CHANGELOG.md's latest release is $V" || bad "CHANGELOG.md's latest release is '$CL', simba.h says $V"

# ---- 2. staged install + pkg-config -------------------------------------------------------
STAGE=$T/stage
echo "== make install DESTDIR=$STAGE PREFIX=/usr/local"
check "make install (staged)" $MAKE -s install DESTDIR="$STAGE" PREFIX=/usr/local
for f in include/simba/simba.h include/simba/simba_memory.h include/simba/simba_sql.h include/simba/simba_redis.h include/simba/simba_zk.h include/simba/simba_pg.h \
         include/simba/adapters/simba_libuv.h include/simba/adapters/simba_libev.h include/simba/adapters/simba_libevent.h \
         share/pkgconfig/simba.pc share/pkgconfig/simba-sqlite.pc share/pkgconfig/simba-redis.pc share/pkgconfig/simba-zk.pc share/pkgconfig/simba-pg.pc \
         share/pkgconfig/simba-libuv.pc share/pkgconfig/simba-libev.pc share/pkgconfig/simba-libevent.pc \
         share/cmake/simba/simbaConfig.cmake share/cmake/simba/simbaConfigVersion.cmake share/cmake/simba/simbaTargets.cmake; do
    [ -f "$STAGE/usr/local/$f" ] || bad "staged file $f missing"
done
if [ -f tools/simba.c ]; then
    [ -x "$STAGE/usr/local/bin/simba" ] && ok "the simba tool is installed" || bad "bin/simba missing though tools/simba.c exists"
    check "the installed simba tool answers --help" "$STAGE/usr/local/bin/simba" --help
    [ -f "$STAGE/usr/local/share/man/man1/simba.1" ] && ok "the manual page simba(1) is installed" || bad "share/man/man1/simba.1 missing"
    if command -v man >/dev/null 2>&1; then
        check "man -l renders the installed simba(1)" sh -c 'MANWIDTH=80 man -l "$1" 2>&1 | grep -q "simba - run a command under a distributed lock"' _ "$STAGE/usr/local/share/man/man1/simba.1"
    else
        bad "man is missing (make deps installs man-db)"
    fi
fi
cmp -s simba.h "$STAGE/usr/local/include/simba/simba.h" && ok "headers installed unchanged" || bad "installed simba.h differs"
cmp -s adapters/simba_libuv.h "$STAGE/usr/local/include/simba/adapters/simba_libuv.h" && ok "adapters installed under include/simba/adapters" || bad "installed adapters/simba_libuv.h missing or differs"
grep -q '^prefix=/usr/local$' "$STAGE/usr/local/share/pkgconfig/simba.pc" && ok "simba.pc names the final prefix, not the stage" || bad "simba.pc prefix"
PC="pkg-config --define-variable=prefix=$STAGE/usr/local"
export PKG_CONFIG_PATH="$STAGE/usr/local/share/pkgconfig"
for p in simba simba-sqlite simba-redis simba-zk simba-pg simba-libuv simba-libev simba-libevent; do
    [ "$($PC --modversion $p 2>&1)" = "$V" ] && ok "pkg-config --modversion $p = $V" || bad "pkg-config --modversion $p: $($PC --modversion $p 2>&1)"
done
$PC --print-requires simba-sqlite | grep -q '^sqlite3' && ok "simba-sqlite Requires sqlite3" || bad "simba-sqlite Requires"
$PC --print-requires simba-redis | grep -q '^hiredis' && ok "simba-redis Requires hiredis" || bad "simba-redis Requires"
PGF=$($PC --cflags --libs simba-pg)
case "$PGF" in *-I/usr/include/postgresql*-lpq*) ok "simba-pg gives $PGF" ;; *) bad "simba-pg flags: $PGF" ;; esac
ZKF=$($PC --cflags --libs simba-zk)
case "$ZKF" in *-I/usr/include/zookeeper*-DTHREADED*-lzookeeper_mt*) ok "simba-zk gives $ZKF" ;; *) bad "simba-zk flags: $ZKF" ;; esac
# shellcheck disable=SC2046
check "pkg-config (staged): build consumer_core" $CC $WARN -o "$T/pc_core" tests/install/consumer_core.c $($PC --cflags --libs simba)
check "pkg-config (staged): run consumer_core" "$T/pc_core"
# shellcheck disable=SC2046
check "pkg-config (staged): build consumer_all" $CC $WARN -o "$T/pc_all" tests/install/consumer_all.c $($PC --cflags --libs simba-sqlite simba-redis simba-zk simba-pg)
check "pkg-config (staged): run consumer_all" "$T/pc_all" "$T/pc.db"
# shellcheck disable=SC2046
check "pkg-config (staged): build consumer_libuv (#include <simba/adapters/simba_libuv.h>)" $CC $WARN -o "$T/pc_uv" tests/install/consumer_libuv.c $($PC --cflags --libs simba-libuv)
check "pkg-config (staged): run consumer_libuv" "$T/pc_uv"
# the other adapters: their installed header compiles from the path their .pc file gives
for a in libev libevent; do
    printf '#define SIMBA_IMPLEMENTATION\n#include <simba.h>\n#include <simba/adapters/simba_%s.h>\nint main(void) { return 0; }\n' "$a" > "$T/inc_$a.c"
    # shellcheck disable=SC2046
    check "pkg-config (staged): <simba/adapters/simba_$a.h> compiles and links with simba-$a" $CC $WARN -Wno-unused-function -o "$T/inc_$a" "$T/inc_$a.c" $($PC --cflags --libs simba-$a)
done

# ---- 3. CMake from the source tree ----------------------------------------------------------
echo "== cmake add_subdirectory"
check "cmake configure (add_subdirectory)" cmake -S tests/install -B "$T/sub" -DSIMBA_SOURCE_DIR="$ROOT" -DCMAKE_C_COMPILER="$CC"
grep -q "consumer: simba $V from the source tree" "$T/out" && ok "CMake (source tree) says version $V" || bad "CMake (source tree) version: $(grep 'consumer:' "$T/out")"
check "cmake build (add_subdirectory)" cmake --build "$T/sub"
check "cmake (add_subdirectory): run consumer_core" "$T/sub/consumer_core"
check "cmake (add_subdirectory): run consumer_all" "$T/sub/consumer_all" "$T/sub.db"
check "cmake (add_subdirectory): run consumer_libuv (simba::libuv)" "$T/sub/consumer_libuv"

# FetchContent from a release-style tarball of the files a user's checkout has
tar -czf "$T/simba-src.tar.gz" -C "$ROOT" --transform 's|^|simba/|' CMakeLists.txt cmake simba.h simba_memory.h simba_sql.h simba_redis.h simba_zk.h simba_pg.h
check "cmake configure (FetchContent)" cmake -S tests/install -B "$T/fetch" -DSIMBA_FETCH_URL="file://$T/simba-src.tar.gz" -DCMAKE_C_COMPILER="$CC"
grep -q "consumer: simba $V from FetchContent" "$T/out" && ok "CMake (FetchContent) says version $V" || bad "CMake (FetchContent) version: $(grep 'consumer:' "$T/out")"
check "cmake build (FetchContent)" cmake --build "$T/fetch"
check "cmake (FetchContent): run consumer_all" "$T/fetch/consumer_all" "$T/fetch.db"

# ---- 4. install into a prefix; pkg-config and CMake find_package ------------------------------
P=$T/prefix
echo "== make install PREFIX=$P"
check "make install (prefix)" $MAKE -s install PREFIX="$P"
export PKG_CONFIG_PATH="$P/share/pkgconfig"
# shellcheck disable=SC2046
check "pkg-config (prefix): build consumer_all" $CC $WARN -o "$T/pp_all" tests/install/consumer_all.c $(pkg-config --cflags --libs simba-sqlite simba-redis simba-zk simba-pg)
check "pkg-config (prefix): run consumer_all" "$T/pp_all" "$T/pp.db"
check "cmake configure (find_package, prefix)" cmake -S tests/install -B "$T/fp" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC"
grep -q "found simba $V in $P/share/cmake/simba" "$T/out" && ok "find_package found simba $V in the prefix" || bad "find_package did not report simba $V in $P"
check "cmake build (find_package, prefix)" cmake --build "$T/fp"
check "cmake (find_package, prefix): run consumer_core" "$T/fp/consumer_core"
check "cmake (find_package, prefix): run consumer_all" "$T/fp/consumer_all" "$T/fp.db"
check "cmake (find_package, prefix): run consumer_libuv (simba::libuv)" "$T/fp/consumer_libuv"
check "cmake configure (find_package, relocated stage)" cmake -S tests/install -B "$T/fs" -DCMAKE_PREFIX_PATH="$STAGE/usr/local" -DCMAKE_C_COMPILER="$CC"
check "cmake build (find_package, relocated stage)" cmake --build "$T/fs"
check "cmake (find_package, relocated stage): run consumer_core" "$T/fs/consumer_core"
MAJ=${V%%.*}
REST=${V#*.}
MIN=${REST%%.*}
for want in "$((MAJ + 1)).0" "$MAJ.$((MIN + 1))"; do
    if cmake -S tests/install -B "$T/fv" -DCMAKE_PREFIX_PATH="$P" -DSIMBA_WANT_VERSION="$want" >"$T/out" 2>&1; then
        bad "find_package(simba $want) accepted $V"
    else
        grep -q "with requested version \"$want\"" "$T/out" && ok "find_package(simba $want) refuses $V" || { bad "find_package(simba $want) failed for another reason"; tail -5 "$T/out"; }
    fi
    rm -rf "$T/fv"
done
if cmake -S tests/install -B "$T/fc" -DCMAKE_PREFIX_PATH="$P" -DSIMBA_WANT_VERSION="$V" >/dev/null 2>&1; then
    ok "find_package(simba $V) (exact) accepted"
else
    bad "find_package(simba $V) refused"
fi

# ---- the README's Install snippets, as written ----------------------------------------------------
echo "== README snippets"
snippet() { awk -v m="<!-- test_install: $1 -->" '$0 == m { f = 1; next } f == 1 && /^```/ { f = 2; next } f == 2 && /^```/ { exit } f == 2 { print }' README.md; }
for s in pkg-config find_package add_subdirectory; do
    mkdir -p "$T/readme-$s"
    cp tests/install/app_sqlite.c "$T/readme-$s/app.c"
    snippet "$s" >"$T/readme-$s/snippet"
    [ -s "$T/readme-$s/snippet" ] || bad "README has no '$s' snippet"
done
check "README pkg-config line builds app" sh -c 'cd "$1" && . ./snippet' _ "$T/readme-pkg-config"
check "README pkg-config app runs" "$T/readme-pkg-config/app" "$T/readme-pc.db"
cp "$T/readme-find_package/snippet" "$T/readme-find_package/CMakeLists.txt"
check "README find_package snippet configures" cmake -S "$T/readme-find_package" -B "$T/readme-find_package/build" -DCMAKE_PREFIX_PATH="$P"
check "README find_package snippet builds" cmake --build "$T/readme-find_package/build"
check "README find_package app runs" "$T/readme-find_package/build/app" "$T/readme-fp.db"
cp "$T/readme-add_subdirectory/snippet" "$T/readme-add_subdirectory/CMakeLists.txt"
ln -s "$ROOT" "$T/readme-add_subdirectory/simba"
check "README add_subdirectory snippet configures" cmake -S "$T/readme-add_subdirectory" -B "$T/readme-add_subdirectory/build"
check "README add_subdirectory snippet builds" cmake --build "$T/readme-add_subdirectory/build"
check "README add_subdirectory app runs" "$T/readme-add_subdirectory/build/app" "$T/readme-as.db"

# ---- 6. uninstall ------------------------------------------------------------------------------
echo "== make uninstall"
check "make uninstall (prefix)" $MAKE -s uninstall PREFIX="$P"
left=$(find "$P" -type f | sed "s|^$P/||")
[ -z "$left" ] && ok "uninstall left no file in the prefix" || bad "uninstall left: $left"
check "make uninstall (staged)" $MAKE -s uninstall DESTDIR="$STAGE" PREFIX=/usr/local
left=$(find "$STAGE" -type f | sed "s|^$STAGE/||")
[ -z "$left" ] && ok "uninstall left no file in the stage" || bad "uninstall left: $left"

echo "install: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
