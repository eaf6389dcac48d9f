#!/bin/sh
# test_redis_ha.sh [--full] -- Redis Cluster and Sentinel suites: starts a
# loopback cluster (scripts/redis-cluster-start.sh, ports $SIMBA_CLUSTER_PORT..+5, default
# 6600; the tests' standalone server on $SIMBA_CLUSTER_PLAIN_PORT, default 6606) under
# build/redis-cluster, runs build/test_redis_cluster and build/test_redis_sentinel (which
# starts its own primary, replica and sentinels: 6650/6651, 26600..26602) and the shared kit
# behind Sentinel (its own setup: $SIMBA_KIT_SENTINEL_REDIS_PORT, default 6652/6653, sentinels
# $SIMBA_KIT_SENTINEL_PORT.., default 26603..26605; about 45 s); --full adds their ASan builds
# and the shared kit on the cluster (about 90 s more). Stops every server by PID and ends
# with "cluster: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
export SIMBA_CLUSTER_PORT=${SIMBA_CLUSTER_PORT:-6600}
export SIMBA_CLUSTER_PLAIN_PORT=${SIMBA_CLUSTER_PLAIN_PORT:-$((SIMBA_CLUSTER_PORT + 6))}
DIR=${SIMBA_CLUSTER_DIR:-$PWD/$B/redis-cluster}
P=0
F=0
KSP=${SIMBA_KIT_SENTINEL_PORT:-26603}
KSDIR=$PWD/$B/redis-sentinel-kit
trap 'sh scripts/redis-cluster-stop.sh "$DIR" >/dev/null 2>&1; sh scripts/redis-sentinel-stop.sh "$KSDIR" >/dev/null 2>&1' EXIT
trap 'exit 130' INT TERM
if ! sh scripts/redis-cluster-start.sh "$DIR"; then
    echo "cluster: 0 passed, 1 failed (the cluster did not start)"
    exit 1
fi
# one suite: its closing "N passed, N failed" line counts; no such line counts as a failure
suite() {
    out=$("$@" 2>&1)
    rc=$?
    echo "$out"
    line=$(echo "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -1)
    p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
    f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
    [ -z "$line" ] && p=0 f=1
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    P=$((P + p))
    F=$((F + f))
}
suite "$B/test_redis_cluster"
suite "$B/test_redis_sentinel"
# the shared kit behind Sentinel: every backend finds the primary through the sentinels
if SIMBA_SENTINEL_REDIS_PORT=${SIMBA_KIT_SENTINEL_REDIS_PORT:-6652} SIMBA_SENTINEL_PORT=$KSP \
    sh scripts/redis-sentinel-start.sh "$KSDIR"; then
    suite env SIMBA_REDIS_SENTINELS="127.0.0.1:$KSP,127.0.0.1:$((KSP + 1)),127.0.0.1:$((KSP + 2))" "$B/kit_redis"
    sh scripts/redis-sentinel-stop.sh "$KSDIR" >/dev/null 2>&1
else
    echo "cluster: the sentinel setup for the kit did not start"
    F=$((F + 1))
fi
if [ "${1:-}" = --full ]; then
    suite "$B/asan/test_redis_cluster"
    suite "$B/asan/test_redis_sentinel"
    suite env SIMBA_REDIS_CLUSTER=1 "$B/kit_redis"
fi
echo "cluster: $P passed, $F failed"
[ "$F" -eq 0 ]
