#!/bin/sh
# redis-cluster-stop.sh DIR -- stop every node started by redis-cluster-start.sh DIR, each by the
# PID in DIR/<port>/redis.pid (redis-stop.sh), and wait until they have exited.
set -u
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
rc=0
for d in "$1"/*/; do
    [ -s "$d/redis.pid" ] || continue
    "$HERE/redis-stop.sh" "${d%/}" || rc=1
done
exit $rc
