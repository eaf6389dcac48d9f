#!/usr/bin/env bash
# test_private_checkout.sh -- the PostgreSQL suites run from a copy of the tree under a
# directory only its owner may enter (mode 0700, as /root is, or any mktemp -d): a server that
# runs as another user (postgres) must keep its files where that user can reach them.
# Copies the tracked files (git ls-files; the whole tree but build/ outside git) and the
# binaries make built, then runs there the pg group of tests/run.sh and a short fault
# harness on pg, and checks that no data directory, socket or server of theirs is left (one
# that was there before it started, another run's, is not its own and is named, not counted).
#   SIMBA_PRIVATE_PG_PORT (5456; its test's private server on +1, the TLS one on +20), SIMBA_PRIVATE_FAULT_PG_PORT
#   (5458), SIMBA_PRIVATE_FAULT_SECONDS (15). Prints "N passed, N failed" last.
set -u
cd "$(dirname "$0")/.."
SRC=$PWD
B=build
PORT=${SIMBA_PRIVATE_PG_PORT:-5456}
FPORT=${SIMBA_PRIVATE_FAULT_PG_PORT:-5458}
FSECS=${SIMBA_PRIVATE_FAULT_SECONDS:-15}
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }

BINS="test_pg kit_pg kit_diff_pg asan/test_pg fault_proxy mp_worker mp_check fault_sqlhold fault_fence fenced_pg fenced_pg_cxx test_pg_tls simba"
make --no-print-directory $(for b in $BINS; do printf '%s/%s ' "$B" "$b"; done) >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
for b in $BINS; do
    [ -x "$B/$b" ] || { echo "private_checkout: $B/$b missing (make all rel-bins)" >&2; echo "0 passed, 1 failed"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/simba-private.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
chmod 700 "$T"
C=$T/simba
mkdir -p "$C/$B/asan"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$C"
else
    tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C "$C"
fi
for b in $BINS; do cp -p "$B/$b" "$C/$B/$b"; done
# what another run left on these ports before this one started (a run killed halfway)
leftovers() { ls -d /tmp/simba-pg-"$1".* /var/tmp/simba-pg-"$1".* /tmp/.s.PGSQL."$1" 2>/dev/null; }
BEFORE=$(for p in "$PORT" $((PORT + 1)) "$FPORT"; do leftovers "$p"; done)
[ -n "$BEFORE" ] && echo "note: left by another run before this one, not counted: $(echo $BEFORE)"
check_mode() { [ "$(stat -c %a "$T")" = 700 ]; }
if check_mode; then ok "the copy is under $T, mode 700"; else bad "$T is not mode 700"; fi

# the pg group of tests/run.sh, every path and port its own
(cd "$C" && env SIMBA_TEST_ONLY=pg SIMBA_PG_PORT="$PORT" SIMBA_PG_DIR="$C/$B/pg" \
    SIMBA_PG_PORT2=$((PORT + 1)) SIMBA_PG_DIR2="$C/$B/pg-test-$((PORT + 1))" \
    SIMBA_SCRIPTS=scripts SIMBA_FAULT_PROXY="$B/fault_proxy" bash tests/run.sh) >"$T/pg.log" 2>&1
rc=$?
grep -E '^(==|   [^|:]|total)' "$T/pg.log" | sed 's/^/   | /'
line=$(grep -E '^total: [0-9]+ passed, [0-9]+ failed' "$T/pg.log")
if [ $rc = 0 ] && [ -n "$line" ]; then ok "pg group from the copy: ${line#total: }"
else bad "pg group from the copy (exit $rc): ${line:-no total}"; tail -n 40 "$T/pg.log" | sed 's/^/   : /'; fi

# the fault harness on pg (starts, crashes, restarts and stops its own server)
(cd "$C" && env FAULT_PG_PORT="$FPORT" bash tests/fault_run.sh pg "$FSECS") >"$T/fault.log" 2>&1
rc=$?
if [ $rc = 0 ]; then ok "fault harness on pg from the copy: $(grep -E '^mp_check:' "$T/fault.log" | tail -n 1)"
else bad "fault harness on pg from the copy (exit $rc)"; tail -n 30 "$T/fault.log" | sed 's/^/   : /'; fi

# nothing of theirs left: data directories, sockets, servers
for p in "$PORT" $((PORT + 1)) "$FPORT"; do
    left=$(leftovers "$p" | grep -vxF -e "${BEFORE:-/nonexistent}")
    if [ -z "$left" ]; then ok "port $p: no data directory or socket left"; else bad "port $p left: $left"; fi
    if pg_isready -q -h 127.0.0.1 -p "$p" -t 1 2>/dev/null; then bad "port $p: a server still answers"; fi
done
echo "private_checkout: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
