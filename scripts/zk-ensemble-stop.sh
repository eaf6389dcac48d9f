#!/usr/bin/env bash
# zk-ensemble-stop.sh DIR [N] -- stop the ensemble that zk-ensemble-start.sh started in DIR,
# or only member N, by PID (zk-stop.sh for each: SIGTERM, SIGKILL after 10 s). Data stays.
# A member that was SIGSTOPped is continued first, so that it can stop.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then echo "usage: $0 DIR [1|2|3]" >&2; exit 2; fi
DIR=$1
case "${2:-}" in '') MEMBERS="1 2 3" ;; 1|2|3) MEMBERS=$2 ;; *) echo "zk-ensemble-stop: member must be 1, 2 or 3" >&2; exit 2 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
for i in $MEMBERS; do
    f=$DIR/zk$i/zk.pid
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    case "$pid" in ''|*[!0-9]*) ;; *) grep -q QuorumPeerMain "/proc/$pid/cmdline" 2>/dev/null && kill -CONT "$pid" 2>/dev/null ;; esac
    bash "$HERE/zk-stop.sh" "$DIR/zk$i"
done
