#!/bin/sh
# redis-sentinel-start.sh DIR -- a primary ($SIMBA_SENTINEL_REDIS_PORT, default 6650), its
# replica (port + 1) and three sentinels ($SIMBA_SENTINEL_PORT .. +2, default 26600) watching
# it as master "simba" (down after 1 s, quorum 2), all on loopback under DIR, no persistence.
# Ready when every sentinel names the primary and knows the replica and the other sentinels.
# Stop with redis-sentinel-stop.sh DIR (by PID).
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
DIR=$1
RP=${SIMBA_SENTINEL_REDIS_PORT:-6650}
SP=${SIMBA_SENTINEL_PORT:-26600}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
fail() {
    echo "redis-sentinel-start: $*" >&2
    sh "$HERE/redis-sentinel-stop.sh" "$DIR" >&2 || true
    exit 1
}
# a full sync starts at once (redis' default waits 5 s for more replicas to share it)
sh "$HERE/redis-start.sh" "$RP" "$DIR/p$RP" --repl-diskless-sync-delay 0 >/dev/null || fail "primary $RP did not start"
sh "$HERE/redis-start.sh" "$((RP + 1))" "$DIR/p$((RP + 1))" --repl-diskless-sync-delay 0 --replicaof 127.0.0.1 "$RP" >/dev/null ||
    fail "replica $((RP + 1)) did not start"
i=0
while [ $i -lt 3 ]; do
    P=$((SP + i))
    mkdir -p "$DIR/s$P"
    rm -f "$DIR/s$P/redis.pid"
    cat >"$DIR/s$P/sentinel.conf" <<EOC
port $P
bind 127.0.0.1
daemonize yes
pidfile $DIR/s$P/redis.pid
logfile $DIR/s$P/sentinel.log
dir $DIR/s$P
sentinel monitor simba 127.0.0.1 $RP 2
sentinel down-after-milliseconds simba 1000
sentinel failover-timeout simba 5000
sentinel parallel-syncs simba 1
EOC
    redis-server "$DIR/s$P/sentinel.conf" --sentinel || fail "sentinel $P did not start"
    i=$((i + 1))
done
# every sentinel sees the replica and two other sentinels (30 s deadline)
k=0
until [ "$(for i in 0 1 2; do redis-cli -p $((SP + i)) SENTINEL master simba 2>/dev/null | tr -d '\r' |
    awk 'p == "num-slaves" && $0 == "1" {a++} p == "num-other-sentinels" && $0 == "2" {a++} {p = $0} END {print a + 0}'; done |
    awk '{s += $1} END {print s}')" = 6 ]; do
    k=$((k + 1))
    [ $k -ge 300 ] && fail "sentinels did not discover the replica and each other within 30 s"
    sleep 0.1
done
echo "redis-sentinel-start: primary $RP, replica $((RP + 1)), sentinels $SP..$((SP + 2)) ready (master name simba)"
