#!/bin/sh
# redis-cluster-start.sh DIR [redis-server options...] -- start a loopback Redis Cluster of 3
# primaries and 3 replicas (one each) on ports $SIMBA_CLUSTER_PORT .. +5 (default 6600; the
# cluster bus uses port + 10000), data under DIR/<port>/, no persistence unless the options
# say otherwise, and wait until every node reports cluster_state:ok with all 16384 slots.
# Stop it with redis-cluster-stop.sh DIR (by the PIDs in DIR/<port>/redis.pid).
# redis-cluster-start.sh DIR --restart-node PORT starts one node of that cluster again (its
# nodes.conf kept: it rejoins, a failed-over primary as a replica) and waits for its PING.
# cluster-node-timeout is $SIMBA_CLUSTER_NODE_TIMEOUT ms (default 1000) so that a killed
# primary's replica takes over in a few seconds; cluster-require-full-coverage is no, so
# the other shards keep serving while one shard fails over.
set -eu
[ -n "${SIMBA_CLUSTER_TRACE:-}" ] && set -x
if [ $# -lt 1 ]; then
    echo "usage: $0 DIR [redis-server options...]" >&2
    exit 2
fi
DIR=$1
shift
BASE=${SIMBA_CLUSTER_PORT:-6600}
NT=${SIMBA_CLUSTER_NODE_TIMEOUT:-1000}
case $BASE in ''|*[!0-9]*) echo "redis-cluster-start: bad port '$BASE'" >&2; exit 2 ;; esac
if [ "$BASE" -gt 55530 ]; then echo "redis-cluster-start: port $BASE too high (bus = port + 10000)" >&2; exit 2; fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
start_node() { # start_node PORT [options]
    P=$1
    shift
    redis-server --port "$P" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
        --pidfile "$DIR/$P/redis.pid" --dir "$DIR/$P" --logfile "$DIR/$P/redis.log" \
        --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$NT" \
        --cluster-require-full-coverage no --cluster-replica-validity-factor 0 "$@"
}
if [ "${1:-}" = --restart-node ]; then
    P=${2:-}
    case $P in ''|*[!0-9]*) echo "redis-cluster-start: bad port '$P'" >&2; exit 2 ;; esac
    [ -f "$DIR/$P/nodes.conf" ] || { echo "redis-cluster-start: no node $P under $DIR" >&2; exit 1; }
    shift 2
    rm -f "$DIR/$P/redis.pid"
    start_node "$P" "$@"
    k=0
    until [ "$(redis-cli -p "$P" ping 2>/dev/null)" = PONG ] && [ -s "$DIR/$P/redis.pid" ]; do
        k=$((k + 1))
        [ $k -ge 100 ] && { echo "redis-cluster-start: node $P did not answer PING within 5 s" >&2; exit 1; }
        sleep 0.05
    done
    echo "redis-cluster-start: node $P pid $(cat "$DIR/$P/redis.pid") back"
    exit 0
fi
NODES=""
i=0
while [ $i -lt 6 ]; do
    P=$((BASE + i))
    if redis-cli -p "$P" ping >/dev/null 2>&1; then
        echo "redis-cluster-start: something already answers on port $P" >&2
        "$HERE/redis-cluster-stop.sh" "$DIR" >/dev/null 2>&1 || true
        exit 1
    fi
    mkdir -p "$DIR/$P"
    rm -f "$DIR/$P/nodes.conf" "$DIR/$P/redis.pid"
    start_node "$P" "$@"
    NODES="$NODES 127.0.0.1:$P"
    i=$((i + 1))
done
fail() {
    echo "redis-cluster-start: $*" >&2
    for d in "$DIR"/*/redis.log; do [ -f "$d" ] && { echo "== $d" >&2; tail -n 5 "$d" >&2; }; done
    "$HERE/redis-cluster-stop.sh" "$DIR" >&2 || true
    exit 1
}
# Every node answers PING (5 s deadline).
for N in $NODES; do
    P=${N#127.0.0.1:}
    k=0
    until [ "$(redis-cli -p "$P" ping 2>/dev/null)" = PONG ] && [ -s "$DIR/$P/redis.pid" ]; do
        k=$((k + 1))
        [ $k -ge 100 ] && fail "node $P did not answer PING within 5 s"
        sleep 0.05
    done
done
# shellcheck disable=SC2086
redis-cli --cluster create $NODES --cluster-replicas 1 --cluster-yes >"$DIR/create.log" 2>&1 ||
    fail "redis-cli --cluster create failed (see $DIR/create.log)"
# Every node sees the whole cluster as ok (30 s deadline: gossip on a loaded machine).
k=0
while :; do
    ok=0
    for N in $NODES; do
        P=${N#127.0.0.1:}
        if redis-cli -p "$P" cluster info 2>/dev/null | tr -d '\r' | grep -q '^cluster_state:ok' &&
            redis-cli -p "$P" cluster info 2>/dev/null | tr -d '\r' | grep -q '^cluster_slots_ok:16384'; then
            ok=$((ok + 1))
        fi
    done
    [ $ok -eq 6 ] && break
    k=$((k + 1))
    [ $k -ge 300 ] && fail "cluster not ok on every node within 30 s ($ok of 6)"
    sleep 0.1
done
# Replicas must be attached, or a killed primary has nobody to take over (30 s deadline).
k=0
until [ "$(for N in $NODES; do redis-cli -p "${N#127.0.0.1:}" role 2>/dev/null | head -n 1; done | grep -c '^master$' || true)" = 3 ] &&
    [ "$(for N in $NODES; do redis-cli -p "${N#127.0.0.1:}" info replication 2>/dev/null | tr -d '\r' | grep -c '^master_link_status:up' || true; done | awk '{s += $1} END {print s + 0}')" = 3 ]; do
    k=$((k + 1))
    [ $k -ge 300 ] && fail "replicas not in sync within 30 s"
    sleep 0.1
done
echo "redis-cluster-start: 3 primaries + 3 replicas ready on 127.0.0.1:$BASE..$((BASE + 5))"
