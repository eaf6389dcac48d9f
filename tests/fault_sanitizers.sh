#!/usr/bin/env bash
# fault_sanitizers.sh tsan|valgrind -- runs test programs under ThreadSanitizer or valgrind
# (make tsan / make valgrind-all build what is needed first). Starts redis-server
# (127.0.0.1:16394, the Redis test makes its private second server on 16395), ZooKeeper
# (127.0.0.1:12195) and PostgreSQL (127.0.0.1:15446, the PostgreSQL test makes its private
# second server on 15447; ports away from the other suites and benches) under build/rel-san
# when a program needs them, and stops them by PID.
# One line per program (clean, or how many reports), then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
MODE=${1:-}
B=build
DIR=$PWD/$B/rel-san
LOGS=$B/logs
mkdir -p "$DIR" "$LOGS"
export SIMBA_REDIS_PORT=16394 SIMBA_REDIS_PORT2=16395 SIMBA_ZK_PORT=12195 SIMBA_ZK_DIR=$DIR/zk
export SIMBA_PG_PORT=15446 SIMBA_PG_PORT2=15447 SIMBA_PG_DIR2=$DIR/pg2
PASS=0
FAIL=0
REDIS_UP=0
ZK_UP=0
PG_UP=0

cleanup() {
    [ "$REDIS_UP" = 1 ] && sh scripts/redis-stop.sh "$DIR/redis" >/dev/null 2>&1
    [ "$ZK_UP" = 1 ] && bash scripts/zk-stop.sh "$DIR/zk" >/dev/null 2>&1
    [ "$PG_UP" = 1 ] && sh scripts/pg-stop.sh "$DIR/pg" >/dev/null 2>&1
    # the PostgreSQL test's private server, if a timeout cut the test short (data under /tmp)
    [ -s "$DIR/pg2/datadir" ] && sh scripts/pg-stop.sh "$DIR/pg2" >/dev/null 2>&1
    REDIS_UP=0
    ZK_UP=0
    PG_UP=0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_redis() {
    [ "$REDIS_UP" = 1 ] && return 0
    sh scripts/redis-start.sh 16394 "$DIR/redis" >"$LOGS/san_redis.log" 2>&1 && REDIS_UP=1
}
need_zk() {
    [ "$ZK_UP" = 1 ] && return 0
    rm -rf "$DIR/zk"
    bash scripts/zk-start.sh 12195 "$DIR/zk" >"$LOGS/san_zk.log" 2>&1 && ZK_UP=1
}

need_pg() {
    [ "$PG_UP" = 1 ] && return 0
    sh scripts/pg-start.sh 15446 "$DIR/pg" >"$LOGS/san_pg.log" 2>&1 && PG_UP=1
}

# one NAME LIMIT_S CMD...: runs it, counts sanitizer reports in its log
one() {
    local name=$1 limit=$2 log=$LOGS/san_${MODE}_$1.log rc n line
    shift 2
    timeout -k 10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    if [ "$MODE" = tsan ]; then
        n=$(grep -c 'WARNING: ThreadSanitizer' "$log")
    else
        n=$(grep -E '== ERROR SUMMARY: [0-9]+' "$log" | grep -oE 'SUMMARY: [0-9]+' | awk '{s += $2} END {print s + 0}')
        n=$((n + $(grep -c 'definitely lost: [1-9]' "$log")))
    fi
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    if [ "$n" -eq 0 ] && [ "$rc" -eq 0 ]; then
        echo "$name: clean under $MODE (${line:-exit 0})"
        PASS=$((PASS + 1))
    else
        echo "$name: $n $MODE reports, exit $rc (${line:-no summary}); log $log"
        grep -E -A3 'WARNING: ThreadSanitizer|Invalid|uninitialised|definitely lost|FAIL' "$log" | head -24 | sed 's/^/   | /'
        FAIL=$((FAIL + 1))
    fi
}

case "$MODE" in
tsan)
    # second_deadlock_stack: better reports; the tests fork children, TSan follows them
    export TSAN_OPTIONS="second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
    one test_core 300 $B/tsan/test_core
    one kit_memory 300 $B/tsan/kit_memory
    if need_zk; then
        one test_zk 600 $B/tsan/test_zk
        one kit_zk 600 $B/tsan/kit_zk
    else
        echo "ZooKeeper did not start (see $LOGS/san_zk.log)"
        FAIL=$((FAIL + 1))
    fi
    ;;
valgrind)
    VG="valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite --trace-children=no"
    export SIMBA_POLL_LIMIT_US=200000 # polls are slower under valgrind
    one test_core 600 $VG $B/test_core
    one kit_memory 600 $VG $B/kit_memory
    one test_sql 600 $VG $B/test_sql
    one kit_sql 600 $VG $B/kit_sql
    one badinput 600 env BADINPUT_NO_FORK=1 $VG $B/badinput
    if need_redis; then
        one test_redis 900 $VG $B/test_redis
        one kit_redis 900 $VG $B/kit_redis
    else
        echo "redis-server did not start"
        FAIL=$((FAIL + 1))
    fi
    if need_zk; then
        one test_zk 900 $VG $B/test_zk
        one kit_zk 900 $VG $B/kit_zk
    else
        echo "ZooKeeper did not start"
        FAIL=$((FAIL + 1))
    fi
    if need_pg; then
        one test_pg 1500 env SIMBA_PG_MANY=200 $VG $B/test_pg
        one kit_pg 1200 $VG $B/kit_pg
    else
        echo "PostgreSQL did not start (see $LOGS/san_pg.log)"
        FAIL=$((FAIL + 1))
    fi
    ;;
*)
    echo "usage: $0 tsan|valgrind" >&2
    exit 2
    ;;
esac
echo "$MODE: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
