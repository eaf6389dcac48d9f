#!/bin/sh
# mp_test.sh -- several contender processes on one mutex, then the overlap/fence check.
# Default backend: one SQLite file in a temp dir.
#
#   tests/mp_test.sh [WORKER_BIN CHECK_BIN]
#
# Builds nothing: the binaries come from the arguments or from $MP_WORKER / $MP_CHECK
# (default build/mp_worker, build/mp_check). Tunables (environment):
#   MP_WORKERS=4  MP_SECONDS=20  MP_TTL=500  MP_TRANSITION=300  MP_HOLD=200  MP_REST=600
#   MP_MIN_OWNERSHIPS (default 10)  MP_KEEP=1 keeps the temp dir
#   MP_BACKEND=sql (default) | redis | zk (the worker must be built with that backend) and
#   MP_BACKEND_ARGS, e.g. "--port 6390" or "--hosts 127.0.0.1:2191" (sql: "--path" is set)
# Exit status: the checker's (0 = no overlap, no fence violation), 1 on setup failure.
set -u

WORKER=${1:-${MP_WORKER:-build/mp_worker}}
CHECK=${2:-${MP_CHECK:-build/mp_check}}
N=${MP_WORKERS:-4}
SECONDS_RUN=${MP_SECONDS:-20}
TTL=${MP_TTL:-500}
TRANSITION=${MP_TRANSITION:-300}
HOLD=${MP_HOLD:-200}
REST=${MP_REST:-600}
MIN_OWN=${MP_MIN_OWNERSHIPS:-10}
BACKEND=${MP_BACKEND:-sql}

for b in "$WORKER" "$CHECK"; do
    if [ ! -x "$b" ]; then
        echo "mp_test: $b is not an executable (give WORKER_BIN CHECK_BIN or set MP_WORKER/MP_CHECK)" >&2
        exit 1
    fi
done

DIR=$(mktemp -d "${TMPDIR:-/tmp}/simba_mp.XXXXXX") || exit 1
PIDS=""

cleanup() {
    for p in $PIDS; do
        kill -KILL "$p" 2>/dev/null
    done
    for p in $PIDS; do
        wait "$p" 2>/dev/null
    done
    PIDS=""
    if [ "${MP_KEEP:-0}" = 1 ]; then
        echo "mp_test: kept $DIR" >&2
    else
        rm -rf "$DIR"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

BARGS=${MP_BACKEND_ARGS:-}
if [ "$BACKEND" = sql ]; then
    set -- --path "$DIR/mp.db"
    WHERE="$DIR/mp.db"
else
    set --
    WHERE="$BACKEND $BARGS"
fi
MUTEX="mp-leader-$$-$(date +%s)" # fresh on a server that outlives the run

echo "mp_test: $N workers x ${SECONDS_RUN}s on $WHERE (ttl $TTL, transition $TRANSITION, hold $HOLD, rest $REST)"
i=0
while [ "$i" -lt "$N" ]; do
    # shellcheck disable=SC2086 # BARGS is a list of options
    "$WORKER" --backend "$BACKEND" "$@" $BARGS --mutex "$MUTEX" --duration-ms $((SECONDS_RUN * 1000)) \
        --ttl-ms "$TTL" --transition-ms "$TRANSITION" --hold-ms "$HOLD" --rest-ms "$REST" \
        --log "$DIR/worker$i.log" 2>"$DIR/worker$i.err" &
    PIDS="$PIDS $!"
    i=$((i + 1))
done

# Workers end by themselves after the duration; a bounded wait guards against a hang.
DEADLINE=$(($(date +%s) + SECONDS_RUN + 15))
FAILED=0
for p in $PIDS; do
    while kill -0 "$p" 2>/dev/null; do
        if [ "$(date +%s)" -ge "$DEADLINE" ]; then
            echo "mp_test: worker $p did not finish in time, killing it" >&2
            kill -KILL "$p" 2>/dev/null
            FAILED=1
            break
        fi
        sleep 0.2
    done
    if ! wait "$p"; then
        echo "mp_test: worker $p exited with failure" >&2
        FAILED=1
    fi
done
PIDS=""
cat "$DIR"/worker*.err >&2

"$CHECK" --min-ownerships "$MIN_OWN" --min-contenders 2 "$DIR"/worker*.log
RC=$?
if [ "$RC" -eq 0 ] && [ "$FAILED" -ne 0 ]; then
    RC=1
fi
if [ "$RC" -eq 0 ]; then
    echo "mp_test: PASS"
    echo "mp_test: 1 passed, 0 failed"
else
    echo "mp_test: FAIL"
    echo "mp_test: 0 passed, 1 failed"
fi
exit "$RC"
