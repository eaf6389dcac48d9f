#!/bin/bash
# bench.sh -- run every benchmark workload (called by `make bench` after the build) and print
# ONE markdown table, with the machine and versions on top. Starts its own redis-server,
# ZooKeeper, PostgreSQL and MariaDB on loopback ports of its own, stops them (by PID) on exit,
# whatever happens.
# Programs' diagnostics go to build/bench-logs/; the table is also saved to
# build/bench-results.md and, after a full run (no BENCH_ONLY), written into the end of
# bench/README.md. See bench/README.md for what each figure means.
#   BENCH_ONLY="w1 w3"      run only some workloads (w1 w2 w2s w3 w4 w5; w2 includes w2s)
#   BENCH_BACKENDS="sqlite redis"   W2 shared's backends (default: sqlite redis zk pg)
#   BENCH_REDIS_PORT=6395 BENCH_ZK_PORT=2195 BENCH_PG_PORT=5445 BENCH_MYSQL_PORT=3395   the servers' ports
#   BENCH_CLUSTER_PORT=6680   W1/W2's Redis Cluster (3 primaries + 3 replicas on
#                             ..+5, scripts/redis-cluster-start.sh), next to the single node
set -u
cd "$(dirname "$0")/.."
B=build
BIN=$B/bench
LOGS=$B/bench-logs
ROWS=$B/bench-rows.md
OUT=$B/bench-results.md
REDIS_PORT=${BENCH_REDIS_PORT:-6395}
ZK_PORT=${BENCH_ZK_PORT:-2195}
PG_PORT=${BENCH_PG_PORT:-5445}
MYSQL_PORT=${BENCH_MYSQL_PORT:-3395}
MYSQL_DIR=$PWD/$B/bench-mysql
CLUSTER_PORT=${BENCH_CLUSTER_PORT:-6680}
CLUSTER_DIR=$PWD/$B/bench-cluster
CLUSTER_STARTED=0
REDIS_DIR=$PWD/$B/bench-redis
ZK_DIR=$PWD/$B/bench-zk
PG_DIR=$PWD/$B/bench-pg
SQL_DIR=$PWD/$B/bench-sql
ONLY=${BENCH_ONLY:-w1 w2 w3 w4 w5}
T0=$(date +%s)

mkdir -p "$LOGS"
rm -rf "$SQL_DIR" "$ZK_DIR/data"
mkdir -p "$SQL_DIR"
: >"$ROWS"

ZK_STARTER=""
PG_STARTED=0
# kill -CONT to PID and its direct children (W5 stops PostgreSQL's backends with the postmaster)
cont_tree() {
    local c
    kill -CONT "$1" 2>/dev/null
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill -CONT "$c" 2>/dev/null; done
}
cleanup() {
    # A SIGSTOPped server (W5) must be continued before it can act on SIGTERM.
    if [ -s "$REDIS_DIR/redis.pid" ]; then
        kill -CONT "$(cat "$REDIS_DIR/redis.pid")" 2>/dev/null
        sh scripts/redis-stop.sh "$REDIS_DIR" >>"$LOGS/servers.log" 2>&1
    fi
    if [ -n "$ZK_STARTER" ]; then wait "$ZK_STARTER" 2>/dev/null; fi
    if [ -s "$ZK_DIR/zk.pid" ]; then
        kill -CONT "$(cat "$ZK_DIR/zk.pid")" 2>/dev/null
        bash scripts/zk-stop.sh "$ZK_DIR" >>"$LOGS/servers.log" 2>&1
    fi
    if [ $CLUSTER_STARTED = 1 ]; then sh scripts/redis-cluster-stop.sh "$CLUSTER_DIR" >>"$LOGS/servers.log" 2>&1; fi
    if [ $PG_STARTED = 1 ] && [ -s "$PG_DIR/datadir" ]; then
        [ -s "$PG_DIR/postgres.pid" ] && cont_tree "$(cat "$PG_DIR/postgres.pid")"
        sh scripts/pg-stop.sh "$PG_DIR" >>"$LOGS/servers.log" 2>&1
    fi
    if [ -s "$MYSQL_DIR/mysql.pid" ]; then sh scripts/mysql-stop.sh "$MYSQL_DIR" >>"$LOGS/servers.log" 2>&1; fi
    if [ -n "$TMPFS_DIR" ]; then rm -rf "$TMPFS_DIR"; fi
}
TMPFS_DIR=""
trap cleanup EXIT
trap 'exit 130' INT TERM

want() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# run LOGNAME CMD...: the program's table rows (lines starting with "| ") are kept, the
# rest goes to the log; a failed program leaves a row that says so.
run() {
    local name=$1 t=$(date +%s) rc
    shift
    printf '%-28s' "$name" >&2
    "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.log"
    rc=$?
    grep '^| ' "$LOGS/$name.out" >>"$ROWS"
    if [ $rc -ne 0 ]; then
        echo "| $name | | **failed** (exit $rc) | see $LOGS/$name.log | | | | |" >>"$ROWS"
        echo "FAILED (exit $rc, $(( $(date +%s) - t )) s): $(tail -n 3 "$LOGS/$name.log" | tr '\n' ' ')" >&2
    else
        echo "ok ($(( $(date +%s) - t )) s)" >&2
    fi
}

need_redis=0
need_zk=0
need_pg=0
need_mysql=0
if want w1 || want w2 || want w2s || want w3 || want w4 || want w5; then need_redis=1; need_zk=1; need_pg=1; fi
if want w1 || want w2 || want w3 || want w4; then need_mysql=1; fi
if [ "$ONLY" = w2s ]; then # W2 shared alone: only its backends' servers
    need_redis=0 need_zk=0 need_pg=0 need_mysql=0
    for be in ${BENCH_BACKENDS:-sqlite redis zk pg}; do
        case $be in redis) need_redis=1 ;; zk) need_zk=1 ;; pg) need_pg=1 ;; esac
    done
fi

# ZooKeeper takes a few seconds to come up: start it first, in the background.
if [ $need_zk = 1 ]; then
    bash scripts/zk-start.sh "$ZK_PORT" "$ZK_DIR" >"$LOGS/zk-start.log" 2>&1 &
    ZK_STARTER=$!
fi
if [ $need_redis = 1 ]; then
    if ! sh scripts/redis-start.sh "$REDIS_PORT" "$REDIS_DIR" >"$LOGS/redis-start.log" 2>&1; then
        echo "bench: could not start redis-server on $REDIS_PORT:" >&2
        cat "$LOGS/redis-start.log" >&2
        exit 1
    fi
fi
if [ $need_pg = 1 ]; then
    # a fresh cluster each run (pg-start.sh would reuse an old data directory and its rows)
    if [ -s "$PG_DIR/datadir" ]; then sh scripts/pg-stop.sh "$PG_DIR" >>"$LOGS/servers.log" 2>&1; fi
    rm -rf "$PG_DIR"
    PG_STARTED=1
    if ! sh scripts/pg-start.sh "$PG_PORT" "$PG_DIR" >"$LOGS/pg-start.log" 2>&1; then
        echo "bench: could not start PostgreSQL on $PG_PORT:" >&2
        cat "$LOGS/pg-start.log" >&2
        exit 1
    fi
fi

if [ $need_mysql = 1 ]; then
    # a fresh server each run (its data directory is removed when it stops)
    if [ -s "$MYSQL_DIR/mysql.pid" ]; then sh scripts/mysql-stop.sh "$MYSQL_DIR" >>"$LOGS/servers.log" 2>&1; fi
    rm -rf "$MYSQL_DIR"
    if ! sh scripts/mysql-start.sh "$MYSQL_PORT" "$MYSQL_DIR" >"$LOGS/mysql-start.log" 2>&1; then
        echo "bench: could not start MariaDB on $MYSQL_PORT:" >&2
        cat "$LOGS/mysql-start.log" >&2
        exit 1
    fi
fi

# W1/W2 on a Redis Cluster next to the single node (a new prefix declared on every slot)
if want w1 || want w2; then
    rm -rf "$CLUSTER_DIR"
    CLUSTER_STARTED=1
    if ! SIMBA_CLUSTER_PORT=$CLUSTER_PORT sh scripts/redis-cluster-start.sh "$CLUSTER_DIR" >"$LOGS/cluster-start.log" 2>&1 ||
        ! $BIN/redis_cluster_declare "$CLUSTER_PORT" bench: >>"$LOGS/cluster-start.log" 2>&1; then
        echo "bench: could not start the Redis Cluster on $CLUSTER_PORT:" >&2
        cat "$LOGS/cluster-start.log" >&2
        exit 1
    fi
fi
RP="--redis-port $REDIS_PORT"
CP="--cluster-port $CLUSTER_PORT"
ZP="--zk 127.0.0.1:$ZK_PORT --zk-session-ms 2000"
SP="--sql $SQL_DIR/bench.db"
PP="--pg-port $PG_PORT"
MP="--mysql-port $MYSQL_PORT"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# Wait for ZooKeeper before measuring anything: a starting JVM eats CPU.
if [ $need_zk = 1 ]; then
    if ! wait "$ZK_STARTER"; then
        ZK_STARTER=""
        echo "bench: could not start ZooKeeper on $ZK_PORT:" >&2
        cat "$LOGS/zk-start.log" >&2
        exit 1
    fi
    ZK_STARTER=""
fi
if want w4; then
    run w4_poll $BIN/w4_scale --part poll --sizes 1000,10000,100000
fi
if want w1; then
    run w1_memory $BIN/w1_cycle --backend memory --secs 6
    run w1_sqlite $BIN/w1_cycle --backend sqlite --secs 6 $SP
    run w1_redis $BIN/w1_cycle --backend redis --secs 6 $RP
    run w1_redis_cluster $BIN/w1_cycle --backend redis-cluster --secs 6 $CP
    run w1_zk $BIN/w1_cycle --backend zk --secs 6 $ZP
    run w1_pg $BIN/w1_cycle --backend pg --secs 6 $PP
    run w1_mysql $BIN/w1_cycle --backend mysql --secs 6 $MP
fi
if want w2; then
    # Default timing (ttl 10 s / transition 6 s; a 2 s ZooKeeper session) as a new
    # user runs it. No pause: 4 processes re-contend at once after each 5 ms hold (fairness:
    # Jain, longest wait). Pause: 8 processes, hold 50 ms, 310 ms after each unlock (ideal
    # 20 acquisitions/s). Locker: 2 processes blocked in simba_locker_lock(), hold 100 ms,
    # 20 ms after each confirmed unlock: unlock -> the other's lock returns. Yield: 2 processes,
    # hold 20 ms, then simba_yield(), 6 s; then the same releasing, 6 s, its reference.
    # (The memory store lives inside one process: no cross-process W2 for it.)
    for be in redis redis-cluster sqlite zk pg mysql; do
        case $be in redis) O=$RP ;; redis-cluster) O=$CP ;; sqlite) O="--sql $SQL_DIR/w2-%s.db" ;; zk) O=$ZP ;; pg) O=$PP ;; mysql) O=$MP ;; esac
        run w2_${be}_nopause $BIN/w2_handoff --backend $be --secs 10 --procs 4 --hold-ms 5 --rest-ms 0 \
            --label "W2 no pause (4 procs, hold 5 ms)" ${O//%s/nopause}
        run w2_${be}_pause $BIN/w2_handoff --backend $be --secs 10 --procs 8 --hold-ms 50 --rest-ms 310 \
            --label "W2 pause (8 procs, hold 50 ms, pause 310 ms)" ${O//%s/pause}
        run w2_${be}_locker $BIN/w2_handoff --backend $be --part locker --secs 6 --procs 2 --hold-ms 100 --rest-ms 20 \
            --label "Locker handoff (2 procs, default timing)" ${O//%s/locker}
        run w2_${be}_yield $BIN/w2_handoff --backend $be --part yield --secs 6 --procs 2 --hold-ms 20 \
            --label "Yield handoff (2 procs, hold 20 ms, default timing)" ${O//%s/yield}
    done
fi
if want w2 || want w2s; then
    # A semaphore of 2 and a read-write lock (6 readers, 2 writers) with 8 processes that
    # hold 5 ms and ask again at once, after the mutex with the same processes: the figures
    # are read as ratios against that mutex, measured on the same backend in the same run.
    for be in ${BENCH_BACKENDS:-sqlite redis zk pg}; do
        case $be in redis) O=$RP ;; sqlite) O="--sql $SQL_DIR/w2-shared.db" ;; zk) O=$ZP ;; pg) O=$PP ;; esac
        run w2_${be}_shared $BIN/w2_shared --backend $be --secs 6 --procs 8 --permits 2 --writers 2 --hold-ms 5 --rest-ms 0 \
            --label "W2 shared (8 procs, hold 5 ms)" $O
    done
fi
if want w3; then
    run w3_redis $BIN/w3_failover --backend redis --runs 5 --ttl-ms 2000 --transition-ms 1000 $RP
    run w3_sqlite $BIN/w3_failover --backend sqlite --runs 5 --ttl-ms 2000 --transition-ms 1000 $SP
    run w3_zk $BIN/w3_failover --backend zk --runs 5 $ZP
    run w3_pg $BIN/w3_failover --backend pg --runs 5 --ttl-ms 2000 --transition-ms 1000 $PP
    run w3_mysql $BIN/w3_failover --backend mysql --runs 5 --ttl-ms 2000 --transition-ms 1000 $MP
fi
# W4 and W5 measure how long one simba_poll takes. On a 2-core machine the server shares the
# cores with the bench, and a poll that the scheduler interrupts to run the server reads as a
# long poll (W4 Redis: 4.6 ms with 0.6 ms of its own CPU). For these two the servers are moved
# to the last CPU and the bench runs on the others, as a server on its own host would be
# (BENCH_PIN=0 runs them unpinned). The figures of W1-W3 stay those of a shared machine.
PIN=""
server_pids() {
    local f p
    for f in "$REDIS_DIR/redis.pid" "$ZK_DIR/zk.pid" "$CLUSTER_DIR"/*/redis.pid "$MYSQL_DIR/mysql.pid"; do
        [ -s "$f" ] && cat "$f"
    done
    if [ -s "$PG_DIR/postgres.pid" ]; then
        p=$(cat "$PG_DIR/postgres.pid")
        echo "$p"
        ps -o pid= --ppid "$p" 2>/dev/null
    fi
}
pin_servers() {
    local n last p
    n=$(nproc 2>/dev/null || echo 1)
    if [ "${BENCH_PIN:-1}" = 0 ] || [ "$n" -lt 2 ] || ! command -v taskset >/dev/null; then return 0; fi
    last=$((n - 1))
    for p in $(server_pids); do taskset -a -cp "$last" "$p" >/dev/null 2>&1; done
    PIN="taskset -c 0-$((last - 1))"
    echo "bench: W4/W5 with the servers on CPU $last and the bench on CPU 0-$((last - 1))" >&2
}
unpin_servers() {
    local p
    [ -n "$PIN" ] || return 0
    for p in $(server_pids); do taskset -a -cp "0-$(($(nproc) - 1))" "$p" >/dev/null 2>&1; done
    PIN=""
}
if want w4 || want w5; then pin_servers; fi
if want w4; then
    run w4_memory $PIN $BIN/w4_scale --part steady --backend memory --mutexes 10000 --secs 20 --ttl-ms 10000
    run w4_sqlite $PIN $BIN/w4_scale --part steady --backend sqlite --mutexes 10000 --secs 20 --ttl-ms 10000 --sql "$SQL_DIR/w4.db"
    # the configuration for a loop that must never wait for the disk: the loop never
    # checkpoints (checkpoint = -1), a thread of the application does (simba_sql_checkpoint)
    run w4_sqlite_ckpt $PIN $BIN/w4_scale --part steady --backend sqlite --mutexes 10000 --secs 20 --ttl-ms 10000 --sql "$SQL_DIR/w4.db" \
        --sql-checkpoint -1 --sql-checkpointer-ms 1000
    # the same with the file on a tmpfs (memory: no disk under any write), as a lock file
    # may well live (/run/lock): what is left is simba's and SQLite's own CPU
    for d in /dev/shm /run/lock /run; do
        if [ "$(stat -f -c %T "$d" 2>/dev/null)" = tmpfs ] && [ -w "$d" ]; then TMPFS_DIR=$(mktemp -d "$d/simba-bench.XXXXXX") && break; fi
    done
    if [ -n "$TMPFS_DIR" ]; then
        run w4_sqlite_tmpfs $PIN $BIN/w4_scale --part steady --backend sqlite --mutexes 10000 --secs 20 --ttl-ms 10000 --sql "$TMPFS_DIR/w4.db" \
            --sql-checkpoint -1 --sql-checkpointer-ms 1000 --label "sqlite on tmpfs, checkpoints in a thread"
        rm -rf "$TMPFS_DIR"
        TMPFS_DIR=""
    else
        echo "w4_sqlite_tmpfs: no writable tmpfs (/dev/shm, /run/lock, /run): row not measured" >&2
    fi
    # The networked backends, with the server's own counters and CPU
    run w4_redis $PIN $BIN/w4_scale --part steady --backend redis --mutexes 10000 --secs 20 --ttl-ms 10000 $RP \
        --server-pid "$(cat "$REDIS_DIR/redis.pid")"
    # zk: the lease is the session: owners hold 2/3 of it, so 15 s matches the other rows' 10 s ttl
    run w4_zk $PIN $BIN/w4_scale --part steady --backend zk --mutexes 10000 --secs 20 --ttl-ms 10000 --zk-session-ms 15000 $ZP \
        --server-pid "$(cat "$ZK_DIR/zk.pid")" --own-timeout-s 60
    run w4_pg $PIN $BIN/w4_scale --part steady --backend pg --mutexes 10000 --secs 20 --ttl-ms 10000 $PP \
        --server-pid "$(cat "$PG_DIR/postgres.pid")" --with-children 1 --own-timeout-s 180
    # one command at a time per connection: 10,000 names on 8 request connections, 1,000 on one
    run w4_mysql $PIN $BIN/w4_scale --part steady --backend mysql --mutexes 10000 --secs 20 --ttl-ms 10000 $MP \
        --mysql-connections 8 --label "mysql, 8 connections" \
        --server-pid "$(cat "$MYSQL_DIR/mysql.pid")" --own-timeout-s 180
    run w4_mysql_1k $PIN $BIN/w4_scale --part steady --backend mysql --mutexes 1000 --secs 20 --ttl-ms 10000 $MP \
        --server-pid "$(cat "$MYSQL_DIR/mysql.pid")" --own-timeout-s 60
fi
if want w5; then
    run w5_redis $PIN $BIN/w5_stall --backend redis --server-pid "$(cat "$REDIS_DIR/redis.pid")" --stop-s 5 $RP
    run w5_zk $PIN $BIN/w5_stall --backend zk --server-pid "$(cat "$ZK_DIR/zk.pid")" --stop-s 5 $ZP
    # the postmaster and its backends (each connection is served by a child process)
    run w5_pg $PIN $BIN/w5_stall --backend pg --server-pid "$(cat "$PG_DIR/postgres.pid")" --with-children 1 --stop-s 5 $PP
fi

PINNED=$PIN
unpin_servers

# ---- the table -----------------------------------------------------------------------------
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
gccv=$(${CC:-cc} --version 2>/dev/null | head -n1)
libs=$($BIN/w1_cycle --versions 2>/dev/null)
redisv=$(redis-server --version 2>/dev/null | grep -o 'v=[0-9.]*' | cut -d= -f2)
zkv=$(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null)
pgv=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
pgv=$("$pgv/postgres" --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -n 1)
myv=$(PATH=$PATH:/usr/sbin mariadbd --version 2>/dev/null | grep -o 'Ver [0-9][0-9.]*' | cut -d' ' -f2)
{
    echo "### simba benchmarks ($(date -u '+%Y-%m-%d'), \`make bench\`, $(( $(date +%s) - T0 )) s)"
    echo
    echo "- machine: $(nproc) CPUs ($cpu), Linux $(uname -r), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM;" \
         "load average (1/5/15 min) at start $LOAD0, at end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- compiler: $gccv, -O2"
    echo "- libraries: $libs"
    echo "- servers (loopback, started by this run): redis-server $redisv (port $REDIS_PORT, no persistence)," \
         "ZooKeeper $zkv standalone (port $ZK_PORT, tickTime 500 ms), PostgreSQL $pgv (port $PG_PORT, default durability), MariaDB $myv (port $MYSQL_PORT, default durability); SQLite files under $B/bench-sql (WAL, synchronous=NORMAL)"
    if [ -n "$PINNED" ]; then
        echo "- W4 and W5 ran with every server on CPU $(($(nproc) - 1)) and the bench on the others (\`$PINNED\`); W1-W3 unpinned"
    else
        echo "- every workload unpinned: servers and bench share the CPUs"
    fi
    echo
    echo "| workload | backend | figure | simba | limit / reference (same run) | simba / limit | target | verdict |"
    echo "|---|---|---|---|---|---|---|---|"
    cat "$ROWS"
} | tee "$OUT"
# A full run is the latest full table: it replaces the one at the end of bench/README.md.
if [ -z "${BENCH_ONLY:-}" ] && grep -q '^<!-- bench-table' bench/README.md; then
    awk -v out="$OUT" '
        /^<!-- bench-table/ { print; while ((getline l < out) > 0) print l; skip = 1; next }
        /^<!-- end bench-table/ { skip = 0 }
        !skip' bench/README.md >"$B/bench-readme.md" && mv "$B/bench-readme.md" bench/README.md
    echo "bench: the table is now at the end of bench/README.md" >&2
fi
if grep -q '\*\*failed\*\*' "$ROWS"; then exit 1; fi
exit 0
