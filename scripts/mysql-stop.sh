#!/bin/sh
# mysql-stop.sh DIR [--keep] -- stop the MariaDB server started by mysql-start.sh PORT DIR, by
# the PID in DIR/mysql.pid (SIGTERM: a clean shutdown), wait until it has exited, then remove
# its data (DIR/data), unless --keep: a restart with mysql-start.sh then finds its rows.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $# -eq 2 ] && [ "$2" != --keep ]; }; then
    echo "usage: $0 DIR [--keep]" >&2
    exit 2
fi
DIR=$1
KEEP=${2:-}
PIDFILE=$DIR/mysql.pid
remove_data() { [ "$KEEP" = --keep ] || rm -rf "$DIR/data"; }
if [ ! -s "$PIDFILE" ]; then
    remove_data
    echo "mysql-stop: no pidfile $PIDFILE; no server was running"
    exit 0
fi
PID=$(cat "$PIDFILE")
case $PID in
    ''|*[!0-9]*) echo "mysql-stop: bad pid in $PIDFILE" >&2; exit 1 ;;
esac
if ! kill -0 "$PID" 2>/dev/null; then
    rm -f "$PIDFILE"
    remove_data
    echo "mysql-stop: pid $PID is not running"
    exit 0
fi
# A stopped (SIGSTOP) server cannot act on a signal until it continues.
kill -CONT "$PID" 2>/dev/null || true
kill -TERM "$PID"
i=0
while kill -0 "$PID" 2>/dev/null; do
    if [ $i -ge 400 ]; then   # 20 s, then SIGKILL (InnoDB recovers at the next start)
        echo "mysql-stop: pid $PID ignored SIGTERM for 20 s, sending SIGKILL" >&2
        kill -KILL "$PID" 2>/dev/null || true
        sleep 0.5
        break
    fi
    sleep 0.05
    i=$((i + 1))
done
if kill -0 "$PID" 2>/dev/null; then
    echo "mysql-stop: pid $PID still running" >&2
    exit 1
fi
rm -f "$PIDFILE"
remove_data
echo "mysql-stop: mariadbd pid $PID stopped${KEEP:+ (data kept in $DIR/data)}"
