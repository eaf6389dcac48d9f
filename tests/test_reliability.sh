#!/usr/bin/env bash
# test_reliability.sh -- the reliability suite, run by tests/run.sh as its last
# group, or alone: bash tests/test_reliability.sh
#   1. bad input: build/badinput and its ASan+UBSan build
#   2. the fault harness, short: tests/fault_run.sh on sql, redis, zk, pg and mysql (each starts
#      its own server on its own loopback port -- redis 6392, ZooKeeper 2193, PostgreSQL 5442,
#      MariaDB 3395 (FAULT_MYSQL_PORT) -- under
#      build/rel-*, and stops it by PID)
#   3. the fault harness on a semaphore (8 workers, 2 permits) and a read-write lock (6 readers,
#      2 writers) on sql and zk, short (FAULT_MODE=sem|rw; the other backends by hand: see the
#      header of tests/fault_run.sh), after tests/mp_check_test.sh has shown that mp_check
#      fails each planted violation
#   4. a short fuzz run of every libFuzzer target (clang, installed by scripts/install-deps.sh)
# Builds only through make targets of mk/reliability.mk. Prints "N passed, N failed" last.
# Tunables: REL_SQL_SECONDS=20 REL_REDIS_SECONDS=25 REL_ZK_SECONDS=20 REL_PG_SECONDS=25 (not in a full run: the private copy runs it) REL_MYSQL_SECONDS=20 REL_SEM_SECONDS=12 REL_FUZZ_SECONDS=5
set -u
cd "$(dirname "$0")/.."
. tests/suite_lib.sh
B=build
LOGS=$B/logs
mkdir -p "$LOGS"
PASS=0
FAIL=0
FAILED=""
T0=$(date +%s)
CHILD=""

cleanup() { # fault_run.sh stops its own servers; here only a suite still running
    if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
        kill -TERM "$CHILD" 2>/dev/null
        sleep 1
        kill -KILL "$CHILD" 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# step NAME LIMIT_S CMD...: one suite with a time limit, tallied by tests/suite_lib.sh.
step() {
    local name=$1 limit=$2 t=$(date +%s) rc
    shift 2
    echo "== $name: $*"
    timeout -k 30 "$limit" "$@" >"$LOGS/rel_$name.log" 2>&1 &
    CHILD=$!
    wait "$CHILD"
    rc=$?
    CHILD=""
    EXTRA_GREP='^mp_check: (faults|ownerships|permits)|runs in' tally "$name" "$LOGS/rel_$name.log" "$rc" "$t"
}

echo "== build: make rel-bins"
if ! make --no-print-directory -j"$(nproc)" rel-bins >"$LOGS/rel_build.log" 2>&1; then
    echo "   build failed, see $LOGS/rel_build.log"
    tail -20 "$LOGS/rel_build.log"
    echo "reliability: 0 passed, 1 failed"
    exit 1
fi
HAVE_FUZZ=0
if make --no-print-directory -j"$(nproc)" fuzz-bins >"$LOGS/rel_fuzz_build.log" 2>&1; then
    HAVE_FUZZ=1
else # clang comes with scripts/install-deps.sh: a fuzz build that fails is a failure
    echo "   fuzz build failed, see $LOGS/rel_fuzz_build.log"
    FAIL=$((FAIL + 1))
    FAILED="$FAILED fuzz_build"
fi

step badinput 120 $B/badinput
step asan_badinput 300 $B/asan/badinput
step fault_sql $((${REL_SQL_SECONDS:-20} + 60)) bash tests/fault_run.sh sql "${REL_SQL_SECONDS:-20}"
step fault_redis $((${REL_REDIS_SECONDS:-25} + 90)) bash tests/fault_run.sh redis "${REL_REDIS_SECONDS:-25}"
step fault_forged 60 make --no-print-directory fault-forged
step fault_zk $((${REL_ZK_SECONDS:-20} + 150)) bash tests/fault_run.sh zk "${REL_ZK_SECONDS:-20}"
# a full run (tests/run.sh, SIMBA_FULL_RUN=1) runs the pg fault harness from the private copy
if [ "${SIMBA_FULL_RUN:-0}" != 1 ]; then
    step fault_pg $((${REL_PG_SECONDS:-25} + 90)) bash tests/fault_run.sh pg "${REL_PG_SECONDS:-25}"
fi
step fault_mysql $((${REL_MYSQL_SECONDS:-20} + 60)) bash tests/fault_run.sh mysql "${REL_MYSQL_SECONDS:-20}"
step mp_check_test 30 bash tests/mp_check_test.sh $B/mp_check
FAULT_MODE=sem step fault_sql_sem $((${REL_SEM_SECONDS:-12} + 60)) bash tests/fault_run.sh sql "${REL_SEM_SECONDS:-12}"
FAULT_MODE=rw step fault_sql_rw $((${REL_SEM_SECONDS:-12} + 60)) bash tests/fault_run.sh sql "${REL_SEM_SECONDS:-12}"
FAULT_MODE=sem step fault_zk_sem $((${REL_SEM_SECONDS:-12} + 150)) bash tests/fault_run.sh zk "${REL_SEM_SECONDS:-12}"
FAULT_MODE=rw step fault_zk_rw $((${REL_SEM_SECONDS:-12} + 150)) bash tests/fault_run.sh zk "${REL_SEM_SECONDS:-12}"
if [ "$HAVE_FUZZ" = 1 ]; then
    for t in fuzz_names fuzz_redis_reply fuzz_redis_msg fuzz_zk_node fuzz_sql_row fuzz_sql_push fuzz_pg_row fuzz_pg_follow fuzz_mysql_row; do
        step "$t" $((${REL_FUZZ_SECONDS:-5} + 70)) sh fuzz/run.sh "$B/fuzz/$t" "fuzz/corpus/$t" "${REL_FUZZ_SECONDS:-5}"
    done
else
    echo "== fuzz: not run: the fuzz build failed (counted above), see $LOGS/rel_fuzz_build.log"
fi

echo "reliability took $(($(date +%s) - T0))s${FAILED:+; failed:$FAILED}"
echo "reliability: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
