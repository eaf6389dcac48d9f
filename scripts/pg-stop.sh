#!/bin/sh
# pg-stop.sh DIR -- stop the PostgreSQL cluster started by pg-start.sh PORT DIR, by the PID in
# DIR/postgres.pid (SIGINT: fast shutdown, clients cut off), and wait until it has exited.
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
PIDFILE=$1/postgres.pid
if [ ! -s "$PIDFILE" ]; then
    echo "pg-stop: no pidfile $PIDFILE" >&2
    exit 1
fi
PID=$(cat "$PIDFILE")
case $PID in
    ''|*[!0-9]*) echo "pg-stop: bad pid in $PIDFILE" >&2; exit 1 ;;
esac
if ! kill -0 "$PID" 2>/dev/null; then
    echo "pg-stop: pid $PID is not running" >&2
    rm -f "$PIDFILE"
    exit 0
fi
# A stopped (SIGSTOP) server cannot act on a signal until it continues.
kill -CONT "$PID" 2>/dev/null || true
kill -INT "$PID"
i=0
while kill -0 "$PID" 2>/dev/null; do
    if [ $i -ge 200 ]; then   # 10 s, then immediate shutdown
        echo "pg-stop: pid $PID ignored SIGINT for 10 s, sending SIGQUIT" >&2
        kill -QUIT "$PID" 2>/dev/null || true
        sleep 0.5
        break
    fi
    sleep 0.05
    i=$((i + 1))
done
if kill -0 "$PID" 2>/dev/null; then
    echo "pg-stop: pid $PID still running" >&2
    exit 1
fi
rm -f "$PIDFILE"
echo "pg-stop: postgres pid $PID stopped"
