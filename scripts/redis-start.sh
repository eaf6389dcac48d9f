#!/bin/sh
# redis-start.sh PORT DIR [--restart] [redis-server options...] -- start a throwaway redis-server
# on 127.0.0.1:PORT (no persistence unless options say otherwise), pidfile DIR/redis.pid, and
# wait until it answers PING. Fails loudly otherwise.
# A first start declares the new server empty (key simba:fresh = its run_id in every db), so
# that simba_redis grants at once instead of waiting out a data-loss quarantine; --restart
# (a server on this port may have granted leases moments ago) declares nothing.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 PORT DIR [--restart] [redis-server options...]" >&2
    exit 2
fi
PORT=$1
DIR=$2
shift 2
FRESH=1
if [ "${1:-}" = --restart ]; then FRESH=0; shift; fi
case $PORT in
    ''|*[!0-9]*) echo "redis-start: bad port '$PORT'" >&2; exit 2 ;;
esac
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "redis-start: redis-server not found, installing it with apt-get" >&2
    if [ "$(id -u)" -ne 0 ]; then
        echo "redis-start: need root to install redis-server" >&2
        exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server >&2 ||
        { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server >&2; }
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
if redis-cli -p "$PORT" ping >/dev/null 2>&1; then
    echo "redis-start: something already answers on port $PORT" >&2
    exit 1
fi
rm -f "$DIR/redis.pid"
# The server keeps running after the daemonize fork; stop it with redis-stop.sh DIR.
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$DIR/redis.pid" --dir "$DIR" --logfile "$DIR/redis.log" "$@"
i=0
while [ $i -lt 100 ]; do   # 100 x 0.05 s = 5 s deadline
    if [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = "PONG" ] && [ -s "$DIR/redis.pid" ]; then
        if [ $FRESH = 1 ]; then
            RID=$(redis-cli -p "$PORT" INFO server | tr -d '\r' | sed -n 's/^run_id://p')
            db=0
            while [ $db -lt 16 ]; do printf 'SELECT %d\nSET simba:fresh %s\n' $db "$RID"; db=$((db + 1)); done |
                redis-cli -p "$PORT" >/dev/null
        fi
        echo "redis-start: redis-server pid $(cat "$DIR/redis.pid") ready on 127.0.0.1:$PORT"
        exit 0
    fi
    sleep 0.05
    i=$((i + 1))
done
echo "redis-start: redis-server on port $PORT did not answer PING within 5 s" >&2
[ -f "$DIR/redis.log" ] && tail -n 20 "$DIR/redis.log" >&2
if [ -s "$DIR/redis.pid" ]; then kill "$(cat "$DIR/redis.pid")" 2>/dev/null || true; fi
exit 1
