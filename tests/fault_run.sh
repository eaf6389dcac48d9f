#!/usr/bin/env bash
# fault_run.sh -- the fault harness: several mp_worker processes contend for one mutex on one
# backend while faults are injected; then an inspector checks that the mutex is free, and
# mp_check checks every log (overlaps, fences, acting while not owner, leaks) and writes the
# history in Porcupine's JSON shape to $FAULT_DIR/history.json.
# FAULT_MODE=sem or rw runs the same faults on a semaphore or a read-write lock (below).
#
#   tests/fault_run.sh sql|redis|zk|pg|mysql|redis-cluster|redis-sentinel SECONDS
#
# Starts its own server (redis-server / ZooKeeper, on its own loopback port, data under
# $FAULT_DIR; PostgreSQL's in a private directory under /tmp, see scripts/pg-start.sh; MariaDB's
# under $FAULT_DIR/mysql, see scripts/mysql-start.sh) and
# stops it, and every process it started, by PID on exit. Builds nothing: the binaries come
# from build/ (make rel-bins). Environment:
#   FAULT_DIR        work dir (default build/rel-<backend>), wiped first
#   FAULT_WORKERS    contenders (default 4; 8 with FAULT_MODE sem or rw)
#   FAULT_REDIS_PORT (default 6392)   FAULT_ZK_PORT (default 2193)   FAULT_PG_PORT (default 5442)
#   FAULT_MYSQL_PORT (default 3395)
#   FAULT_SEED       seed of bash's $RANDOM (default: the pid)
#   FAULT_TTL=600 FAULT_TRANSITION=400 (sql, redis)   FAULT_ZK_SESSION=2000 (zk, >= 1000)
#   FAULT_LIST       the faults to inject instead of the backend's list (names below, with _
#                    for -), e.g. FAULT_LIST=gc_pause
#   FAULT_MODE       mutex (default); sem: a semaphore of FAULT_PERMITS (default 2), 8 workers
#                    by default, mp_check counts the holders at every moment (never more than
#                    the permits, a moment with all of them held); rw: a read-write lock,
#                    8 workers by default of which FAULT_WRITERS (default 2) are writers and
#                    the rest readers: never a writer with anyone, readers together at some
#                    moment, every writer's turn. Fences: unique, and above every grant
#                    logged more than one lease earlier (mp_check --order-window-ms).
#                    The owner a fault picks (gc-pause, kill-owner, ...) is any holder.
# Faults, round robin over the backend's list (each with random parameters):
#   all:   gc-pause   the owner is SIGSTOPped past its lease, then SIGCONTed
#          kill-owner the owner is SIGKILLed (a new worker takes its place)
#   sql:   db-locked  another process holds the file in an exclusive transaction
#   redis: server-stop (SIGSTOP/SIGCONT), server-restart (down longer than a lease: the
#          server keeps no data), client-kill (CLIENT KILL TYPE normal|pubsub),
#          partition (the owner's own TCP proxy is SIGSTOPped), conn-reset (it closes all),
#          flushall (FLUSHALL while an owner holds), restart-nopersist (the server is
#          restarted at once, its data lost, while an owner holds: far shorter than a lease)
#   zk:    server-stop, server-restart (data kept), partition longer than the session
#          (the session expires on the server while the owner runs), conn-reset
#   pg:    server-stop (postmaster and every backend process SIGSTOPped), server-restart
#          (data kept), client-kill (pg_terminate_backend of every simba connection),
#          partition, conn-reset, server-crash (SIGQUIT while an owner holds, restarted at
#          once: crash recovery, the crash quarantine)
#   mysql: as pg: server-stop (mariadbd SIGSTOPped), server-restart, client-kill (KILL of
#          every connection to the database simba, doorbells included), partition,
#          conn-reset, server-crash (SIGKILL while an owner holds, restarted at once: InnoDB
#          recovery, the MEMORY loss marker empty: the crash quarantine); every other
#          worker on two request connections (simba_mysql_desc.connections)
#   sql, pg, mysql (not in the default lists; FAULT_LIST=delete_rows): delete-rows (another
#          program deletes every row of the mutex and queue tables while an owner holds, every
#          half second for 3-5 s: DELETE, on pg and mysql TRUNCATE one time in three)
#   redis-cluster (3 primaries + 3 replicas on FAULT_CLUSTER_PORT..+5, default
#          6620, workers seeded at its first port): kill-primary (the mutex's primary is
#          SIGKILLed, a replica takes over, the old one rejoins as a replica), move-slot (the
#          mutex's slot migrates to another primary while contending)
#   redis-sentinel (scripts/redis-sentinel-start.sh: primary FAULT_SENTINEL_REDIS_PORT
#          (default 6660), replica +1, sentinels FAULT_SENTINEL_PORT.. (default 26610); workers
#          find the primary through the sentinels; FAULT_WAIT_REPLICAS=N sets wait_replicas):
#          sen-kill-primary (SIGKILLed, the replica is promoted, the old one comes back as its
#          replica), sen-partition (the primary is SIGSTOPped: shorter than down-after, or long
#          enough for a failover, after which it resumes as a stale primary until demoted),
#          sen-failover (SENTINEL FAILOVER while an owner holds: the replica is promoted, the
#          primary demoted, nothing lost)
# The last line is the checker's verdict; exit 0 only if it passed.
set -u
cd "$(dirname "$0")/.."
BACKEND=${1:-}
SECS=${2:-}
case "$BACKEND" in sql|redis|zk|pg|mysql|redis-cluster|redis-sentinel) ;; *) echo "usage: $0 sql|redis|zk|pg|mysql|redis-cluster|redis-sentinel SECONDS" >&2; exit 2 ;; esac
case "$SECS" in ''|*[!0-9]*) echo "usage: $0 sql|redis|zk|pg|mysql|redis-cluster|redis-sentinel SECONDS" >&2; exit 2 ;; esac
WB=$BACKEND # mp_worker's backend
[ "$BACKEND" = redis-cluster ] && WB=redis
[ "$BACKEND" = redis-sentinel ] && WB=redis
SRP=${FAULT_SENTINEL_REDIS_PORT:-6660}
SSP=${FAULT_SENTINEL_PORT:-26610}
SENS="127.0.0.1:$SSP,127.0.0.1:$((SSP + 1)),127.0.0.1:$((SSP + 2))"
SWAIT=${FAULT_WAIT_REPLICAS:-0}
CPORT=${FAULT_CLUSTER_PORT:-6620}
B=build
WORKER=$B/mp_worker
CHECK=$B/mp_check
SQLHOLD=$B/fault_sqlhold
PROXY=$B/fault_proxy
for b in "$WORKER" "$CHECK" "$SQLHOLD" "$PROXY"; do
    [ -x "$b" ] || { echo "fault_run: $b missing (make rel-bins)" >&2; exit 2; }
done
MODE=${FAULT_MODE:-mutex}
PERMITS=${FAULT_PERMITS:-2}
WRITERS=${FAULT_WRITERS:-2}
case "$MODE" in mutex | sem | rw) ;; *) echo "fault_run: FAULT_MODE=$MODE: mutex, sem or rw" >&2; exit 2 ;; esac
case "$MODE" in
mutex) DIR=${FAULT_DIR:-$B/rel-$BACKEND}; N=${FAULT_WORKERS:-4} ;;
*) DIR=${FAULT_DIR:-$B/rel-$BACKEND-$MODE}; N=${FAULT_WORKERS:-8} ;;
esac
if [ "$MODE" = rw ] && { [ "$WRITERS" -lt 1 ] || [ "$WRITERS" -ge "$N" ]; }; then
    echo "fault_run: FAULT_WRITERS=$WRITERS: 1..$((N - 1)) of $N workers" >&2
    exit 2
fi
RPORT=${FAULT_REDIS_PORT:-6392}
ZPORT=${FAULT_ZK_PORT:-2193}
PPORT=${FAULT_PG_PORT:-5442}
MPORT=${FAULT_MYSQL_PORT:-3395}
MYSQL() { mariadb --no-defaults -h 127.0.0.1 -P "$MPORT" -uroot -psimba simba "$@"; }
RANDOM=${FAULT_SEED:-$$}
# a PostgreSQL cluster an interrupted run left behind is removed with its pointer
[ -s "$DIR/pg/datadir" ] && sh scripts/pg-stop.sh "$DIR/pg" >/dev/null 2>&1
[ -s "$DIR/mysql/mysql.pid" ] && sh scripts/mysql-stop.sh "$DIR/mysql" >/dev/null 2>&1
rm -rf "$DIR"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
FAULTS=$DIR/faults.log
: >"$FAULTS"
MUTEX="fault-$BACKEND-$$"
[ "$MODE" = mutex ] || MUTEX="fault-$BACKEND-$MODE-$$"
# mode_args SLOT: a semaphore's permits, or a reader's --shared (the last WRITERS slots write)
mode_args() {
    case "$MODE" in
    sem) echo "--permits $PERMITS" ;;
    rw) [ "$1" -lt $((N - WRITERS)) ] && echo "--shared 1" ;;
    esac
}

# Timing. sql/redis: the lease is ttl + transition. zk: the lease is the session (the
# request's ttl only sets the renew margin, ttl/3).
TTL=${FAULT_TTL:-600}
TRANSITION=${FAULT_TRANSITION:-400}
ZK_SESSION=${FAULT_ZK_SESSION:-2000}
if [ "$BACKEND" = zk ]; then LEASE=$ZK_SESSION; else LEASE=$((TTL + TRANSITION)); fi

FAULT_NAME=fault_run
OWNER_WAIT_MS=4000
. tests/fault_lib.sh

SERVER_PID=""
declare -a W_PID W_LOG P_PID P_PORT
NLOG=0

server_start() {
    case "$BACKEND" in
    redis)
        sh scripts/redis-start.sh "$RPORT" "$DIR/redis" ${1:-} >>"$DIR/server.log" 2>&1 || return 1
        SERVER_PID=$(cat "$DIR/redis/redis.pid") ;;
    zk)
        bash scripts/zk-start.sh "$ZPORT" "$DIR/zk" >>"$DIR/server.log" 2>&1 || return 1
        SERVER_PID=$(cat "$DIR/zk/zk.pid") ;;
    pg)
        sh scripts/pg-start.sh "$PPORT" "$DIR/pg" >>"$DIR/server.log" 2>&1 || return 1
        SERVER_PID=$(cat "$DIR/pg/postgres.pid") ;;
    mysql)
        sh scripts/mysql-start.sh "$MPORT" "$DIR/mysql" >>"$DIR/server.log" 2>&1 || return 1
        SERVER_PID=$(cat "$DIR/mysql/mysql.pid") ;;
    redis-cluster)
        SIMBA_CLUSTER_PORT=$CPORT sh scripts/redis-cluster-start.sh "$DIR/cluster" >>"$DIR/server.log" 2>&1 || return 1 ;;
    redis-sentinel)
        SIMBA_SENTINEL_REDIS_PORT=$SRP SIMBA_SENTINEL_PORT=$SSP sh scripts/redis-sentinel-start.sh "$DIR/sentinel" >>"$DIR/server.log" 2>&1 || return 1
        s_settled $((SRP + 1)) >/dev/null || return 1 ;; # the replica in sync
    esac
    return 0
}
# pg_signal SIG: the postmaster and each of its children (one process per connection)
pg_signal() {
    [ -n "$SERVER_PID" ] || return 0
    kill -"$1" "$SERVER_PID" 2>/dev/null
    for c in $(ps -o pid= --ppid "$SERVER_PID" 2>/dev/null); do kill -"$1" "$c" 2>/dev/null; done
}
# server_stop [--keep]: pg removes its data directory unless --keep (a restart keeps the rows)
server_stop() {
    case "$BACKEND" in
    redis) [ -f "$DIR/redis/redis.pid" ] && sh scripts/redis-stop.sh "$DIR/redis" >>"$DIR/server.log" 2>&1 ;;
    zk) [ -f "$DIR/zk/zk.pid" ] && { kill -CONT "$SERVER_PID" 2>/dev/null; bash scripts/zk-stop.sh "$DIR/zk" >>"$DIR/server.log" 2>&1; } ;;
    pg) [ -s "$DIR/pg/datadir" ] && { pg_signal CONT; sh scripts/pg-stop.sh "$DIR/pg" ${1:-} >>"$DIR/server.log" 2>&1; } ;;
    mysql) [ -s "$DIR/mysql/mysql.pid" ] && sh scripts/mysql-stop.sh "$DIR/mysql" ${1:-} >>"$DIR/server.log" 2>&1 ;;
    redis-cluster) [ -d "$DIR/cluster" ] && sh scripts/redis-cluster-stop.sh "$DIR/cluster" >>"$DIR/server.log" 2>&1 ;;
    redis-sentinel) [ -d "$DIR/sentinel" ] && { for f in "$DIR"/sentinel/p*/redis.pid; do [ -s "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null; done
        sh scripts/redis-sentinel-stop.sh "$DIR/sentinel" >>"$DIR/server.log" 2>&1; } ;;
    esac
    SERVER_PID=""
}

cleanup() {
    local p
    for p in "${W_PID[@]:-}" "${P_PID[@]:-}" $SERVER_PID; do
        [ -n "$p" ] && kill -CONT "$p" 2>/dev/null
    done
    for p in "${W_PID[@]:-}" "${P_PID[@]:-}"; do
        [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
    done
    server_stop
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

proxy_start() { # proxy_start SLOT TARGET_PORT
    local i=$1 f=$DIR/proxy$1.port t
    rm -f "$f"
    "$PROXY" "$2" "$f" 2>>"$DIR/proxy.err" &
    P_PID[$i]=$!
    t=0
    while [ ! -s "$f" ]; do
        t=$((t + 1))
        [ $t -gt 100 ] && { echo "fault_run: proxy $i did not start" >&2; return 1; }
        sleep 0.02
    done
    P_PORT[$i]=$(cat "$f")
}

worker_start() { # worker_start SLOT
    local i=$1 args
    NLOG=$((NLOG + 1))
    W_LOG[$i]=$DIR/w$i-$NLOG.log
    case "$BACKEND" in
    sql) args=(--path "$DIR/locks.db") ;;
    redis) args=(--port "${P_PORT[$i]}" --prefix "rel:") ;;
    zk) args=(--hosts "127.0.0.1:${P_PORT[$i]}" --root /simba-rel --session-ms "$ZK_SESSION") ;;
    pg) args=(--pg-port "${P_PORT[$i]}" --pg-table rel_mutex --pg-user postgres --pg-password simba) ;;
    mysql) args=(--my-port "${P_PORT[$i]}" --my-table rel_mutex --my-user root --my-password simba --my-connections $((1 + i % 2))) ;;
    redis-cluster) args=(--port "$CPORT" --prefix "rel:" --cluster 1) ;;
    redis-sentinel) args=(--sentinels "$SENS" --master-name simba --prefix "rel:" --wait-replicas "$SWAIT") ;;
    esac
    # shellcheck disable=SC2046 # mode_args is a list of options
    "$WORKER" --backend "$WB" "${args[@]}" $(mode_args "$i") --mutex "$MUTEX" --duration-ms $(((SECS + 120) * 1000)) \
        --ttl-ms "$TTL" --transition-ms "$TRANSITION" --hold-ms "$(rnd 800 2500)" --rest-ms "$(rnd 200 800)" \
        --log "${W_LOG[$i]}" 2>>"$DIR/w$i.err" &
    W_PID[$i]=$!
}


# ---- faults (gc-pause and kill-owner: fault_lib.sh) ---------------------------------------
f_db_locked() {
    local ms
    if [ $((RANDOM % 2)) = 0 ]; then ms=$(rnd 50 $((TTL / 2))); else ms=$(rnd $((LEASE)) $((LEASE * 2))); fi
    note db-locked "exclusive transaction for ${ms} ms"
    "$SQLHOLD" "$DIR/locks.db" "$ms" || echo "fault_run: fault_sqlhold failed" >&2
}
f_server_stop() {
    local ms
    if [ "$BACKEND" = zk ]; then ms=$(rnd 300 $((ZK_SESSION * 2))); else ms=$(rnd 200 2500); fi
    if [ "$BACKEND" = pg ]; then pg_signal STOP; else kill -STOP "$SERVER_PID"; fi &&
        note server-stop "server pid $SERVER_PID frozen ${ms} ms"
    sleep_ms "$ms"
    if [ "$BACKEND" = pg ]; then pg_signal CONT; else kill -CONT "$SERVER_PID"; fi
}
f_server_restart() {
    local ms
    # redis keeps no data here: it stays down longer than any lease, as a real deployment
    # without persistence must (otherwise a restart hands out a held mutex)
    if [ "$BACKEND" = zk ]; then ms=$(rnd 200 $((ZK_SESSION * 2))); else ms=$((LEASE + $(rnd 100 800))); fi
    note server-restart "down ${ms} ms"
    server_stop --keep
    sleep_ms "$ms"
    server_start --restart || { echo "fault_run: server did not come back" >&2; return 1; }
}
f_server_crash() {
    # pg: immediate shutdown (SIGQUIT: no shutdown checkpoint, crash recovery at the next
    # start) while an owner holds, and back at once: asynchronous commits of the last moments
    # may be lost, and the crash quarantine must keep a second owner out (mysql: SIGKILL)
    local s t0 t
    s=$(wait_owner 4000) || { echo "fault_run: no owner for server-crash"; return; }
    if [ "$BACKEND" = mysql ]; then
        note server-crash "owner slot $s holds; mariadbd SIGKILL, restarted at once"
        kill -CONT "$SERVER_PID" 2>/dev/null
        kill -KILL "$SERVER_PID" 2>/dev/null
    else
        note server-crash "owner slot $s holds; postmaster SIGQUIT, restarted at once"
        pg_signal CONT
        kill -QUIT "$SERVER_PID" 2>/dev/null
    fi
    t0=$(now_ms)
    t0=${t0%.*}
    while kill -0 "$SERVER_PID" 2>/dev/null; do
        t=$(now_ms)
        [ $((${t%.*} - t0)) -lt 10000 ] || break
        sleep 0.05
    done
    server_start --restart || { echo "fault_run: server did not come back" >&2; return 1; }
}
f_delete_rows() {
    local s k n sqlq
    s=$(wait_owner 4000) || { echo "fault_run: no owner for delete-rows"; return; }
    n=$(rnd 6 10)
    note delete-rows "owner slot $s holds; every row deleted $n times, 500 ms apart"
    for ((k = 0; k < n; k++)); do
        if [ "$BACKEND" = pg ]; then
            sqlq="DELETE FROM rel_mutex; DELETE FROM rel_mutex_q"
            [ $((RANDOM % 3)) = 0 ] && sqlq="TRUNCATE rel_mutex, rel_mutex_q"
            PGPASSWORD=simba psql -q -h 127.0.0.1 -p "$PPORT" -U postgres -d postgres -c "$sqlq" >/dev/null 2>>"$DIR/delete.err"
        elif [ "$BACKEND" = mysql ]; then
            sqlq="DELETE FROM rel_mutex; DELETE FROM rel_mutex_q"
            [ $((RANDOM % 3)) = 0 ] && sqlq="TRUNCATE rel_mutex; TRUNCATE rel_mutex_q"
            MYSQL -e "$sqlq" >/dev/null 2>>"$DIR/delete.err"
        else
            sqlite3 -cmd ".timeout 2000" "$DIR/locks.db" "DELETE FROM simba_mutex; DELETE FROM simba_mutex_wait" >/dev/null 2>>"$DIR/delete.err"
        fi
        sleep 0.5
    done
}
f_restart_nopersist() {
    local s
    s=$(wait_owner 4000) || { echo "fault_run: no owner for restart-nopersist"; return; }
    note restart-nopersist "owner slot $s holds; server restarted at once, data lost"
    server_stop
    server_start --restart || { echo "fault_run: server did not come back" >&2; return 1; }
}
f_flushall() {
    local s
    s=$(wait_owner 4000) || { echo "fault_run: no owner for flushall"; return; }
    redis-cli -p "$RPORT" FLUSHALL >/dev/null 2>&1
    # waiters try at once, as a release push or their timers may make them do at any time
    redis-cli -p "$RPORT" PUBLISH "rel:{$MUTEX}:ev:0" released >/dev/null 2>&1
    note flushall "owner slot $s holds; FLUSHALL, waiters woken"
}
f_forged_wake() {
    # every waiter's wake channel gets a release nobody sent: it only makes waiters ask
    local ch n=0
    for ch in $(redis-cli -p "$RPORT" PUBSUB CHANNELS "rel:{$MUTEX}:wk:*" 2>/dev/null); do
        redis-cli -p "$RPORT" PUBLISH "$ch" "released forged" >/dev/null 2>&1 && n=$((n + 1))
    done
    note forged-wake "forged release on $n wake channels"
}
f_client_kill() {
    local t=normal
    if [ "$BACKEND" = pg ]; then
        PGPASSWORD=simba psql -q -h 127.0.0.1 -p "$PPORT" -U postgres -d postgres -Atc \
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'simba'" >/dev/null 2>&1
        note client-kill "pg_terminate_backend of every simba connection"
        return
    fi
    if [ "$BACKEND" = mysql ]; then
        MYSQL -N -e "SELECT CONCAT('KILL ', ID, ';') FROM information_schema.PROCESSLIST WHERE DB = 'simba'
            AND ID <> CONNECTION_ID()" 2>/dev/null | MYSQL >/dev/null 2>&1
        note client-kill "KILL of every connection to the database simba"
        return
    fi
    [ $((RANDOM % 3)) = 0 ] && t=pubsub
    redis-cli -p "$RPORT" CLIENT KILL TYPE "$t" >/dev/null 2>&1
    note client-kill "CLIENT KILL TYPE $t"
}
f_partition() {
    local s p ms
    s=$(wait_owner 4000) || { echo "fault_run: no owner for partition"; return; }
    p=${P_PID[$s]}
    if [ "$BACKEND" = zk ]; then ms=$(rnd $((ZK_SESSION + 500)) $((ZK_SESSION * 2))); else ms=$(rnd 300 2500); fi
    kill -STOP "$p" && note partition "owner slot $s cut off ${ms} ms"
    sleep_ms "$ms"
    kill -CONT "$p"
}
f_conn_reset() {
    local s
    s=$(owner_slot)
    [ -z "$s" ] && s=$((RANDOM % N))
    kill -USR1 "${P_PID[$s]}" && note conn-reset "slot $s connections closed"
}

# redis-cluster: the primary serving the mutex's slot (its port), asked of any live node
c_slot() { local p; for ((p = CPORT; p < CPORT + 6; p++)); do redis-cli -p "$p" CLUSTER KEYSLOT "rel:{$MUTEX}:owner" 2>/dev/null && return; done; }
c_primary() { # c_primary SLOT
    local p
    for ((p = CPORT; p < CPORT + 6; p++)); do
        redis-cli -p "$p" CLUSTER NODES 2>/dev/null | awk -v s="$1" '$3 ~ /master/ && $3 !~ /fail/ {
            for (i = 9; i <= NF; i++) { n = split($i, r, "-"); if (n == 1) r[2] = r[1];
                if ($i !~ /^\[/ && s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) { split($2, a, "[:@]"); print a[2]; f = 1; exit } } }
            END { exit !f }' && return 0
    done
}
f_kill_primary() {
    local slot port pid end np
    slot=$(c_slot)
    port=$(c_primary "$slot" | head -1)
    [ -n "$port" ] || { echo "fault_run: no primary for slot $slot"; return; }
    pid=$(cat "$DIR/cluster/$port/redis.pid" 2>/dev/null)
    [ -n "$pid" ] || return
    kill -KILL "$pid" && note kill-primary "primary $port (pid $pid) of slot $slot killed"
    # a replica takes over (node timeout 1 s + election), then the old one comes back as a replica
    end=$(($(date +%s) + 20))
    while [ "$(date +%s)" -lt "$end" ]; do
        np=$(c_primary "$slot" | head -1)
        [ -n "$np" ] && [ "$np" != "$port" ] && break
        sleep 0.1
    done
    echo "fault_run: slot $slot now on ${np:-nobody}"
    SIMBA_CLUSTER_PORT=$CPORT sh scripts/redis-cluster-start.sh "$DIR/cluster" --restart-node "$port" >>"$DIR/server.log" 2>&1 ||
        echo "fault_run: node $port did not come back" | tee -a "$DIR/unexpected"
}
f_move_slot() {
    local slot from to p k ids idt
    slot=$(c_slot)
    from=$(c_primary "$slot" | head -1)
    for ((p = CPORT; p < CPORT + 6; p++)); do
        [ "$p" != "$from" ] && redis-cli -p "$p" ROLE 2>/dev/null | head -1 | grep -q master && { to=$p; break; }
    done
    [ -n "$from" ] && [ -n "${to:-}" ] || { echo "fault_run: no slot move ($from -> ${to:-})"; return; }
    ids=$(redis-cli -p "$from" CLUSTER MYID)
    idt=$(redis-cli -p "$to" CLUSTER MYID)
    redis-cli -p "$to" CLUSTER SETSLOT "$slot" IMPORTING "$ids" >/dev/null
    redis-cli -p "$from" CLUSTER SETSLOT "$slot" MIGRATING "$idt" >/dev/null
    note move-slot "slot $slot from $from to $to"
    while k=$(redis-cli -p "$from" CLUSTER GETKEYSINSLOT "$slot" 100) && [ -n "$k" ]; do
        for key in $k; do redis-cli -p "$from" MIGRATE 127.0.0.1 "$to" "$key" 0 5000 >/dev/null; done
    done
    for ((p = CPORT; p < CPORT + 6; p++)); do
        redis-cli -p "$p" ROLE 2>/dev/null | head -1 | grep -q master &&
            redis-cli -p "$p" CLUSTER SETSLOT "$slot" NODE "$idt" >/dev/null
    done
}

# redis-sentinel: the primary the sentinels name now (its port), and its pid
s_primary() { local i; for i in 0 1 2; do redis-cli -p $((SSP + i)) SENTINEL get-master-addr-by-name simba 2>/dev/null | sed -n 2p && return; done; }
s_pid() { cat "$DIR/sentinel/p$1/redis.pid" 2>/dev/null; }
# s_settled OLD: up to 20 s until the sentinels name a primary that answers ROLE master and OLD
# is its replica again, in sync (or still the primary): the next fault meets a whole setup
s_settled() {
    local end=$(($(date +%s) + 20)) np
    while [ "$(date +%s)" -lt "$end" ]; do
        np=$(s_primary)
        if [ -n "$np" ] && redis-cli -p "$np" ROLE 2>/dev/null | head -1 | grep -q master; then
            [ "$np" = "$1" ] && { echo "$np"; return 0; }
            [ "$(redis-cli -p "$1" ROLE 2>/dev/null | sed -n '1p;4p' | tr '\n' ' ')" = "slave connected " ] && { echo "$np"; return 0; }
        fi
        sleep 0.1
    done
    echo "${np:-nobody}"
    return 1
}
f_sen_kill_primary() {
    local port pid end np
    port=$(s_primary)
    pid=$(s_pid "$port")
    [ -n "$pid" ] || { echo "fault_run: no primary to kill"; return; }
    kill -KILL "$pid" && note sen-kill-primary "primary $port (pid $pid) killed"
    end=$(($(date +%s) + 20))
    while [ "$(date +%s)" -lt "$end" ]; do # down-after 1 s, then the election
        np=$(s_primary)
        [ -n "$np" ] && [ "$np" != "$port" ] && break
        sleep 0.1
    done
    echo "fault_run: the sentinels name ${np:-nobody}"
    sh scripts/redis-start.sh "$port" "$DIR/sentinel/p$port" --restart --repl-diskless-sync-delay 0 --replicaof 127.0.0.1 "${np:-0}" >>"$DIR/server.log" 2>&1 &&
        s_settled "$port" >/dev/null || echo "fault_run: $port did not come back as a replica" | tee -a "$DIR/unexpected"
}
f_sen_partition() {
    local port pid ms np
    port=$(s_primary)
    pid=$(s_pid "$port")
    [ -n "$pid" ] || { echo "fault_run: no primary to cut off"; return; }
    if [ $((RANDOM % 3)) = 0 ]; then ms=$(rnd 200 800); else ms=$(rnd 3000 6000); fi
    kill -STOP "$pid" && note sen-partition "primary $port (pid $pid) cut off ${ms} ms"
    sleep_ms "$ms"
    kill -CONT "$pid"
    np=$(s_settled "$port") || echo "fault_run: after the partition the sentinels name $np, $port not its replica" | tee -a "$DIR/unexpected"
    echo "fault_run: primary now $np"
}
f_sen_failover() {
    local port np end
    port=$(s_primary)
    redis-cli -p "$SSP" SENTINEL FAILOVER simba >/dev/null 2>&1 && note sen-failover "SENTINEL FAILOVER of primary $port"
    end=$(($(date +%s) + 20))
    while [ "$(date +%s)" -lt "$end" ]; do
        np=$(s_primary)
        [ -n "$np" ] && [ "$np" != "$port" ] && break
        sleep 0.1
    done
    s_settled "$port" >/dev/null || echo "fault_run: after SENTINEL FAILOVER $port is not a replica of ${np:-nobody}" | tee -a "$DIR/unexpected"
    echo "fault_run: primary now ${np:-nobody}"
}

case "$BACKEND" in
redis-cluster) LIST=(kill_primary gc_pause move_slot kill_owner move_slot gc_pause) ;;
redis-sentinel) LIST=(sen_kill_primary gc_pause sen_partition kill_owner sen_failover sen_partition gc_pause) ;;
sql) LIST=(gc_pause db_locked kill_owner db_locked) ;;
redis) LIST=(flushall gc_pause restart_nopersist server_stop client_kill kill_owner partition flushall server_restart
    restart_nopersist conn_reset forged_wake) ;;
zk) LIST=(gc_pause partition server_stop kill_owner conn_reset server_restart) ;;
pg) LIST=(gc_pause server_stop client_kill kill_owner partition server_restart conn_reset server_crash) ;;
mysql) LIST=(gc_pause server_stop client_kill kill_owner partition server_restart conn_reset server_crash) ;;
esac
if [ -n "${FAULT_LIST:-}" ]; then # to hunt one fault's bug: e.g. FAULT_LIST="gc_pause kill_owner"
    read -r -a LIST <<<"$FAULT_LIST"
    for f in "${LIST[@]}"; do
        declare -F "f_$f" >/dev/null || { echo "fault_run: no fault named $f" >&2; exit 2; }
    done
fi

# ---- the run ------------------------------------------------------------------------------
server_start || { echo "fault_run: could not start the $BACKEND server (see $DIR/server.log)"; exit 1; }
for ((i = 0; i < N; i++)); do
    case "$BACKEND" in
    redis) proxy_start "$i" "$RPORT" || exit 1 ;;
    zk) proxy_start "$i" "$ZPORT" || exit 1 ;;
    pg) proxy_start "$i" "$PPORT" || exit 1 ;;
    mysql) proxy_start "$i" "$MPORT" || exit 1 ;;
    esac
    worker_start "$i"
done
T0=$(date +%s)
QUIET=$((LEASE / 1000 + 3)) # no fault in the last seconds: killed owners' leases run out
MODE_NOTE=""
[ "$MODE" = sem ] && MODE_NOTE=", a semaphore of $PERMITS"
[ "$MODE" = rw ] && MODE_NOTE=", a read-write lock: $((N - WRITERS)) readers, $WRITERS writers"
echo "fault_run: $BACKEND, $N workers${MODE_NOTE}, ${SECS}s, lease ${LEASE} ms, mutex $MUTEX, dir $DIR"
fault_loop "$SECS" "$QUIET"
workers_stop
# the inspector: the mutex must be free now (direct connection, no proxy)
case "$BACKEND" in
sql) IARGS=(--path "$DIR/locks.db") ;;
redis) IARGS=(--port "$RPORT" --prefix "rel:") ;;
zk) IARGS=(--hosts "127.0.0.1:$ZPORT" --root /simba-rel --session-ms "$ZK_SESSION") ;;
pg) IARGS=(--pg-port "$PPORT" --pg-table rel_mutex --pg-user postgres --pg-password simba) ;;
mysql) IARGS=(--my-port "$MPORT" --my-table rel_mutex --my-user root --my-password simba) ;;
redis-cluster) IARGS=(--port "$CPORT" --prefix "rel:" --cluster 1) ;;
redis-sentinel) IARGS=(--sentinels "$SENS" --master-name simba --prefix "rel:") ;;
esac
# a semaphore's inspector holds every permit at once; a read-write lock's is a writer
[ "$MODE" = sem ] && IARGS+=(--permits "$PERMITS")
timeout 30 "$WORKER" --backend "$WB" "${IARGS[@]}" --mutex "$MUTEX" --ttl-ms "$TTL" \
    --transition-ms "$TRANSITION" --inspect-ms $((LEASE + 3000)) --log "$DIR/inspect.log" 2>>"$DIR/inspect.err"
cat "$DIR/inspect.err"
for p in "${P_PID[@]:-}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
P_PID=()
server_stop
grep -h 'mp_worker' "$DIR"/w*.err | grep -v ' 0 violations' | head -5
UNEXPECTED=0
[ -s "$DIR/unexpected" ] && UNEXPECTED=1
case "$MODE" in
mutex) CARGS=() ;;
sem) CARGS=(--permits "$PERMITS" --min-concurrent "$PERMITS" --order-window-ms "$LEASE") ;;
rw) CARGS=(--min-concurrent 2 --min-exclusive "$WRITERS" --order-window-ms "$LEASE") ;;
esac
"$CHECK" --porcupine "$DIR/history.json" --min-ownerships 5 --min-contenders 2 --need-inspect "${CARGS[@]}" "$DIR"/w*-*.log "$DIR/inspect.log" "$FAULTS"
RC=$?
[ "$UNEXPECTED" = 1 ] && { echo "fault_run: unexpected worker exits:"; cat "$DIR/unexpected"; RC=1; }
[ "$STUCK" = 1 ] && RC=1
if [ "$BACKEND" = sql ] && ! grep -q "integrity ok" "$DIR/inspect.err"; then
    echo "fault_run: the database file is damaged, or was not checked"
    RC=1
fi
WHAT=$BACKEND
[ "$MODE" = mutex ] || WHAT="$BACKEND $MODE"
if [ $RC = 0 ]; then
    echo "fault_run: $WHAT PASS"
    echo "fault_run $WHAT: 1 passed, 0 failed"
else
    echo "fault_run: $WHAT FAIL (logs in $DIR)"
    echo "fault_run $WHAT: 0 passed, 1 failed"
fi
exit $RC
