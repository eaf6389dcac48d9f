#!/bin/sh
# mp_test.sh -- several contender processes on one SQLite file, then the overlap/fence check.
#
#   scripts/mp_test.sh [WORKER_BIN CHECK_BIN]
#
# Builds nothing: the binaries come from the arguments or from $MP_WORKER / $MP_CHECK
# (default build/mp_worker, build/mp_check). Tunables (environment):
#   MP_WORKERS=4  MP_SECONDS=20  MP_TTL=500  MP_TRANSITION=300  MP_HOLD=200  MP_REST=600
#   MP_MIN_OWNERSHIPS (default 10)  MP_KEEP=1 keeps the temp dir
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

echo "mp_test: $N workers x ${SECONDS_RUN}s on $DIR/mp.db (ttl $TTL, transition $TRANSITION, hold $HOLD, rest $REST)"
i=0
while [ "$i" -lt "$N" ]; do
    "$WORKER" --backend sql --path "$DIR/mp.db" --mutex mp-leader --duration-ms $((SECONDS_RUN * 1000)) \
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
echo "mp_test: $([ "$RC" -eq 0 ] && echo PASS || echo FAIL)"
exit "$RC"
