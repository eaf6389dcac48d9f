#!/bin/sh
# redis-stop.sh DIR -- stop the redis-server started by redis-start.sh PORT DIR, by the PID in
# DIR/redis.pid, and wait until it has exited.
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
PIDFILE=$1/redis.pid
if [ ! -s "$PIDFILE" ]; then
    echo "redis-stop: no pidfile $PIDFILE" >&2
    exit 1
fi
PID=$(cat "$PIDFILE")
case $PID in
    ''|*[!0-9]*) echo "redis-stop: bad pid in $PIDFILE" >&2; exit 1 ;;
esac
if ! kill -0 "$PID" 2>/dev/null; then
    echo "redis-stop: pid $PID is not running" >&2
    rm -f "$PIDFILE"
    exit 0
fi
# A stopped (SIGSTOP) server cannot act on SIGTERM until it continues.
kill -CONT "$PID" 2>/dev/null || true
kill -TERM "$PID"
i=0
while kill -0 "$PID" 2>/dev/null; do
    if [ $i -ge 100 ]; then   # 5 s, then force
        echo "redis-stop: pid $PID ignored SIGTERM for 5 s, sending SIGKILL" >&2
        kill -KILL "$PID" 2>/dev/null || true
        sleep 0.1
        break
    fi
    sleep 0.05
    i=$((i + 1))
done
if kill -0 "$PID" 2>/dev/null; then
    echo "redis-stop: pid $PID still running" >&2
    exit 1
fi
rm -f "$PIDFILE"
echo "redis-stop: redis-server pid $PID stopped"
