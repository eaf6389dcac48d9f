#!/bin/sh
# redis-sentinel-stop.sh DIR -- stop the servers and sentinels of redis-sentinel-start.sh DIR,
# each by the PID in its pidfile (redis-stop.sh).
set -u
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
rc=0
for d in "$1"/s*/ "$1"/p*/; do
    [ -s "$d/redis.pid" ] || continue
    "$HERE/redis-stop.sh" "${d%/}" >/dev/null || rc=1
done
exit $rc
