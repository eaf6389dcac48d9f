#!/usr/bin/env bash
# zk-stop.sh DIR -- stop the ZooKeeper that zk-start.sh started in DIR (by its PID) and wait
# until it is gone. SIGTERM first, SIGKILL after 10 s. The data in DIR stays (for restarts).
# Callers may run it with sh: it needs bash (/dev/tcp, SECONDS).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 DIR" >&2; exit 2; fi
PIDF=$1/zk.pid
if [ ! -f "$PIDF" ]; then echo "zk-stop: no $PIDF (not running?)" >&2; exit 0; fi
PID=$(cat "$PIDF")
case "$PID" in ''|*[!0-9]*) echo "zk-stop: bad pid file $PIDF" >&2; rm -f "$PIDF"; exit 1 ;; esac
# Only signal it if it is really our java (a stale pid file may name a reused pid).
if kill -0 "$PID" 2>/dev/null && grep -q QuorumPeerMain "/proc/$PID/cmdline" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while kill -0 "$PID" 2>/dev/null; do
        if [ $SECONDS -ge $deadline ]; then kill -KILL "$PID" 2>/dev/null || true; fi
        sleep 0.1
    done
fi
rm -f "$PIDF"
echo "zookeeper stopped (pid $PID)"
