#!/bin/sh
# readme_blocks.sh -- the first ten minutes of a new user, as a test (run by `make test`).
#   1. every ```c block of README.md and docs/*.md builds as C99 and as C++11, with gcc and clang (when
#      installed), -Wall -Wextra -Wpedantic -Werror, no feature macros on the command line
#      (the README says the implementation include first is enough); a block with main()
#      is linked, the others compiled; the leader block is examples/readme.c, byte for byte;
#      a docs/ block with main() also runs and must exit 0;
#   2. a system header included before the implementation under -std=c99 stops the build
#      with simba.h's own #error, which says what to do;
#   3. Ctrl-C releases the lock: the README's leader, stopped with SIGINT, exits 0 at once
#      and a second one leads within 3 s (the lease would hold it for 16 s), with a greater
#      fence; the same for SIGTERM and for examples/leader_demo; the examples' output
#      reaches a redirected file line by line.
#   sh tests/readme_blocks.sh [BUILD_DIR]     (default build; needs build/leader_demo,
#                                              build/tick_loop, build/poll_loop)
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
D=$B/readme_blocks # not $B/readme: that is the example binary
CC=${CC:-cc}
CXX=${CXX:-c++}
WARN="-Wall -Wextra -Wpedantic -Werror"
INC="-I. -I/usr/include/zookeeper $(pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql) $(pkg-config --cflags libmariadb 2>/dev/null || echo -I/usr/include/mariadb)"
LIBS="-lsqlite3 -lhiredis -lzookeeper_mt -lpthread"
PASS=0
FAIL=0
PIDS=""
rm -rf "$D"
mkdir -p "$D/run"

ok() { PASS=$((PASS + 1)); echo "  ok $1"; }
bad() { FAIL=$((FAIL + 1)); echo "  FAIL $1"; [ -f "$D/err" ] && sed 's/^/    | /' "$D/err" | head -20; }
cleanup() { for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done; }
trap cleanup EXIT

# wait_for SECONDS FILE REGEX: until FILE has a line matching REGEX (every 50 ms)
wait_for() {
    end=$(($(date +%s) + $1 + 1))
    until grep -qE "$3" "$2" 2>/dev/null; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.05
    done
}
# wait_exit SECONDS PID: waits for the child PID, killing it after SECONDS; its exit status
# goes to $st ("killed after N s" when it had to be killed)
wait_exit() {
    (sleep "$1"; kill -KILL "$2" 2>/dev/null) &
    killer=$!
    wait "$2"
    st=$?
    if kill -0 "$killer" 2>/dev/null; then kill "$killer" 2>/dev/null; else st="killed after $1 s"; fi
    wait "$killer" 2>/dev/null
}
now_ms() { date +%s%3N; }

# ---- 1. every C block builds ------------------------------------------------------------
awk -v dir="$D" '
    /^```c[ \t]*$/ { n++; f = sprintf("%s/block%d.c", dir, n); inb = 1; printf "" > f; next }
    /^```/ && inb { inb = 0; close(f); next }
    inb { print > f }' README.md
NBLOCKS=$(ls "$D"/block*.c 2>/dev/null | wc -l)
if [ "$NBLOCKS" -ge 2 ]; then ok "README has $NBLOCKS C blocks"; else bad "README has $NBLOCKS C blocks, expected at least 2"; fi
COMPILERS="$CC:c:c99 $CXX:c++:c++11"
command -v clang >/dev/null && COMPILERS="$COMPILERS clang:c:c99"
command -v clang++ >/dev/null && COMPILERS="$COMPILERS clang++:c++:c++11"
LEADER=""
for f in "$D"/block*.c; do
    b=$(basename "$f" .c)
    for c in $COMPILERS; do
        cc=${c%%:*} rest=${c#*:}
        lang=${rest%%:*} std=${rest#*:}
        if grep -q 'int main' "$f"; then
            set -- -o "$D/${b}_$cc" "$f" $LIBS
            [ -z "$LEADER" ] && [ "$cc" = "$CC" ] && LEADER=$D/${b}_$cc
        else
            set -- -c -o "$D/${b}_$cc.o" "$f"
        fi
        if $cc -std="$std" $WARN $INC -x "$lang" "$@" >"$D/err" 2>&1; then ok "$b builds with $cc -std=$std"
        else bad "$b does not build with $cc -std=$std"; fi
    done
done
rm -f "$D/err"
if grep -l 'int main' "$D"/block*.c | head -n 1 | xargs -r cmp -s examples/readme.c; then ok "the README's leader is examples/readme.c"
else bad "the README's leader block differs from examples/readme.c"; fi

# ---- 1b. every ```c block of docs/*.md builds the same way; a block with main() runs ------
for md in docs/*.md; do
    page=$(basename "$md" .md)
    awk -v dir="$D" -v page="$page" '
        /^```c[ \t]*$/ { n++; f = sprintf("%s/doc_%s_%d.c", dir, page, n); inb = 1; printf "" > f; next }
        /^```/ && inb { inb = 0; close(f); next }
        inb { print > f }' "$md"
done
for f in "$D"/doc_*.c; do
    [ -f "$f" ] || continue
    b=$(basename "$f" .c)
    for c in $COMPILERS; do
        cc=${c%%:*} rest=${c#*:}
        lang=${rest%%:*} std=${rest#*:}
        if grep -q 'int main' "$f"; then set -- -o "$D/${b}_$cc" "$f" $LIBS -lpq
        else set -- -c -o "$D/${b}_$cc.o" "$f"; fi
        if $cc -std="$std" $WARN $INC -x "$lang" "$@" >"$D/err" 2>&1; then ok "$b builds with $cc -std=$std"
        else bad "$b does not build with $cc -std=$std"; fi
    done
    if grep -q 'int main' "$f"; then
        if (cd "$D/run" && timeout 20 "$OLDPWD/$D/${b}_$CC") >"$D/err" 2>&1; then ok "$b runs: $(tail -n 1 "$D/err")"
        else bad "$b: exit status $?"; fi
    fi
done
rm -f "$D/err"

# ---- 2. a system header first under -std=c99: simba.h's own #error ------------------------
printf '#include <stdio.h>\n#define SIMBA_IMPLEMENTATION\n#include "simba.h"\n' >"$D/sysfirst.c"
if $CC -std=c99 $WARN -I. -c -o "$D/sysfirst.o" "$D/sysfirst.c" >"$D/sysfirst.err" 2>&1; then
    bad "a system header before the implementation under -std=c99 compiled (expected the #error)"
elif [ "$(grep -m1 'error' "$D/sysfirst.err" | grep -c 'simba.h needs POSIX 2008.*-D_POSIX_C_SOURCE=200809L')" -eq 1 ]; then
    ok "a system header first under -std=c99: the first error is simba.h's, saying what to do"
else
    bad "a system header first under -std=c99: the first error is not simba.h's #error"; sed 's/^/    | /' "$D/sysfirst.err" | head -5
fi
printf '#define SIMBA_IMPLEMENTATION\n#include "simba.h"\n#include <stdio.h>\n' >"$D/simbafirst.c"
if $CC -std=c99 $WARN -I. -c -o "$D/simbafirst.o" "$D/simbafirst.c" >"$D/err" 2>&1; then ok "simba.h first under -std=c99 builds"
else bad "simba.h first under -std=c99 does not build"; fi
rm -f "$D/err"

# ---- 3. Ctrl-C releases the lock ----------------------------------------------------------
# leader_handoff NAME SIGNAL CMD...: CMD (run in $D/run, output to a file) leads; SIGNAL makes
# it exit 0 within 3 s; a second CMD then leads within 3 s, with a greater fence. Each run
# has ROUND=1 or 2 in its environment (the two must be different contenders).
leader_handoff() {
    name=$1 sig=$2
    shift 2
    (cd "$D/run" && ROUND=1 exec "$@" >"$name.1" 2>&1) &
    p=$!
    PIDS="$PIDS $p"
    if ! wait_for 10 "$D/run/$name.1" 'leader, fence|LEADER'; then bad "$name: did not lead within 10 s"; kill -KILL "$p"; return; fi
    kill -"$sig" "$p"
    wait_exit 3 "$p"
    if [ "$st" = 0 ]; then ok "$name: SIG$sig ends it with status 0"; else bad "$name: SIG$sig: exit status $st"; kill -KILL "$p" 2>/dev/null; fi
    t0=$(now_ms)
    (cd "$D/run" && ROUND=2 exec "$@" >"$name.2" 2>&1) &
    p=$!
    PIDS="$PIDS $p"
    if wait_for 3 "$D/run/$name.2" 'leader, fence|LEADER'; then
        ok "$name: the next process leads $(($(now_ms) - t0)) ms after SIG$sig (lease 16 s)"
        f1=$(grep -oE 'fence[ =][0-9]+' "$D/run/$name.1" | tail -n 1 | grep -oE '[0-9]+')
        f2=$(grep -oE 'fence[ =][0-9]+' "$D/run/$name.2" | head -n 1 | grep -oE '[0-9]+')
        if [ -n "$f1" ] && [ -n "$f2" ] && [ "$f2" -gt "$f1" ]; then ok "$name: fence $f1 then $f2"
        else bad "$name: fences '$f1' then '$f2'"; fi
    else
        bad "$name: the next process did not lead within 3 s of SIG$sig"
    fi
    kill -TERM "$p"
    wait_exit 3 "$p"
    [ "$st" = 0 ] || bad "$name: second process: SIGTERM: exit status $st"
}
if [ -n "$LEADER" ] && [ -x "$LEADER" ]; then
    LEADER=$(cd "$(dirname "$LEADER")" && pwd)/$(basename "$LEADER")
    leader_handoff readme_int INT "$LEADER"
    rm -f "$D/run/locks.db"*
    leader_handoff readme_term TERM "$LEADER"
else
    bad "no README leader binary to run"
fi
if [ -x "$B/leader_demo" ]; then
    DEMO=$(cd "$B" && pwd)/leader_demo
    export DEMO
    leader_handoff leader_demo INT sh -c 'exec "$DEMO" --db demo.db --name "round$ROUND" --ttl-ms 10000 --transition-ms 6000'

else
    bad "$B/leader_demo is not built"
fi
# the tick and poll examples stop and free on SIGINT; their lines reach a file as they happen
for ex in tick_loop poll_loop; do
    if [ ! -x "$B/$ex" ]; then bad "$B/$ex is not built"; continue; fi
    "$B/$ex" 60 >"$D/run/$ex.out" 2>&1 </dev/null &
    p=$!
    PIDS="$PIDS $p"
    if wait_for 5 "$D/run/$ex.out" 'leader now|acquired'; then ok "$ex: its first line is in the file while it runs"
    else bad "$ex: no line in its output file within 5 s"; fi
    kill -INT "$p"
    wait_exit 3 "$p"
    if [ "$st" = 0 ]; then ok "$ex: SIGINT ends it with status 0"; else bad "$ex: SIGINT: exit status $st"; kill -KILL "$p" 2>/dev/null; fi
done

echo "readme: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
