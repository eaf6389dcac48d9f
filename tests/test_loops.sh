#!/bin/bash
# test_loops.sh -- event-loop hooks and adapters against a real redis-server that
# this script starts on 127.0.0.1:${SIMBA_LOOPS_REDIS_PORT:-6500} and stops by its PID.
# Runs tests/test_hooks.c (memory, SQLite, Redis) and tests/loops_check.c once per adapter
# (libuv, libev, libevent) and per example driver (epoll, io_uring; io_uring says SKIPPED only
# where the kernel refuses it), then each example briefly. Usage: bash tests/test_loops.sh [build-dir]
set -u
B=${1:-build}
PORT=${SIMBA_LOOPS_REDIS_PORT:-6500}
cd "$(dirname "$0")/.."
make -s "$B/test_hooks" "$B/loops_uv" "$B/loops_ev" "$B/loops_event" "$B/loops_epoll" "$B/loops_uring" \
    "$B/loop_epoll" "$B/loop_iouring" "$B/loop_libuv" "$B/loop_libev" "$B/loop_libevent" \
    "$B/asan/test_hooks" "$B/asan/loops_uv" || { echo "loops: build FAILED"; exit 1; }
DIR=$(mktemp -d /tmp/simba_loops.XXXXXX)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" >"$DIR/redis.log" 2>&1 &
RPID=$!
cleanup() { kill -CONT "$RPID" 2>/dev/null; kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT
up=0
for _ in $(seq 1 100); do
    if redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; then up=1; break; fi
    sleep 0.05
done
if [ "$up" != 1 ]; then echo "loops: redis-server on port $PORT did not start (FAILED)"; cat "$DIR/redis.log"; exit 1; fi
# This server is new and empty: say so (as scripts/redis-start.sh does), so the first grant
# on it does not wait one data-loss quarantine.
RID=$(redis-cli -p "$PORT" info server | tr -d '\r' | sed -n 's/^run_id://p')
redis-cli -p "$PORT" set simba:fresh "$RID" >/dev/null
fail=0 npass=0 nfail=0
check() { if "$@"; then npass=$((npass + 1)); else nfail=$((nfail + 1)); fail=1; fi; }
check env SIMBA_HOOKS_REDIS_PORT="$PORT" timeout 120 "$B/test_hooks"
check env SIMBA_HOOKS_REDIS_PORT="$PORT" timeout 300 "$B/asan/test_hooks"
check timeout 120 "$B/asan/loops_uv" "$PORT" "$RPID"
for a in uv ev event epoll uring; do
    check timeout 60 "$B/loops_$a" "$PORT" "$RPID"
done
for e in loop_libuv loop_libev loop_libevent loop_epoll loop_iouring; do
    out=$(timeout 30 "$B/$e" "$PORT" 1 2>&1); rc=$?
    echo "$out"
    if [ "$rc" != 0 ]; then echo "$e: FAILED (exit $rc)"; fail=1; nfail=$((nfail + 1)); continue; fi
    case "$out" in
        *SKIPPED*) ;;
        *acquired*released*) echo "$e: ok"; npass=$((npass + 1)) ;;
        *) echo "$e: FAILED (no acquire/release)"; fail=1; nfail=$((nfail + 1)) ;;
    esac
done
echo "loops: $npass passed, $nfail failed"
exit "$fail"
