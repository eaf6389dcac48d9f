#!/bin/sh
# pg-stop.sh DIR [--keep] -- stop the PostgreSQL cluster started by pg-start.sh PORT DIR, by the
# PID in DIR/postgres.pid (SIGINT: fast shutdown, clients cut off), wait until it has exited,
# then remove its private data directory (named in DIR/datadir), unless --keep: a restart with
# pg-start.sh then finds its rows. The server's log is copied to DIR/postgres.log first.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $# -eq 2 ] && [ "$2" != --keep ]; }; then
    echo "usage: $0 DIR [--keep]" >&2
    exit 2
fi
DIR=$1
KEEP=${2:-}
PIDFILE=$DIR/postgres.pid
PD=""
[ -s "$DIR/datadir" ] && PD=$(cat "$DIR/datadir")
# remove_data: the data directory goes unless --keep; a path not made by pg-start.sh is left.
remove_data() {
    [ -n "$PD" ] || return 0
    [ -f "$PD/postgres.log" ] && cp "$PD/postgres.log" "$DIR/postgres.log" 2>/dev/null || true
    [ "$KEEP" = --keep ] && return 0
    case $PD in
        /tmp/simba-pg-*|/var/tmp/simba-pg-*) rm -rf "$PD" ;;
        *) echo "pg-stop: $DIR/datadir names $PD, not a directory pg-start.sh makes; left in place" >&2 ;;
    esac
    rm -f "$DIR/datadir"
}
PID=""
if [ -s "$PIDFILE" ]; then
    PID=$(cat "$PIDFILE")
elif [ -n "$PD" ] && [ -s "$PD/data/postmaster.pid" ]; then
    PID=$(head -n 1 "$PD/data/postmaster.pid")
elif [ -n "$PD" ]; then
    remove_data
    echo "pg-stop: no server was running; data directory $PD removed"
    exit 0
else
    echo "pg-stop: no pidfile $PIDFILE" >&2
    exit 1
fi
case $PID in
    ''|*[!0-9]*) echo "pg-stop: bad pid in $PIDFILE" >&2; exit 1 ;;
esac
if ! kill -0 "$PID" 2>/dev/null; then
    echo "pg-stop: pid $PID is not running" >&2
    rm -f "$PIDFILE"
    remove_data
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
remove_data
echo "pg-stop: postgres pid $PID stopped${KEEP:+ (data kept in $PD)}"
