#!/bin/sh
# run.sh BIN CORPUS SECONDS -- one libFuzzer run, bounded in time. New inputs go to a scratch
# copy under build/fuzz/ (fuzz/corpus stays small and is only read); a crash is written as
# build/fuzz/<target>-crash-* and makes the run fail. Prints "<target>: N passed, N failed".
set -u
BIN=$1 CORPUS=$2 SECS=$3
T=$(basename "$BIN")
WORK=$(dirname "$BIN")/$T-work
mkdir -p "$WORK"
LOG=$(dirname "$BIN")/$T.log
# -timeout: one input taking > 10 s is a hang; the outer timeout bounds the whole run
timeout $((SECS + 60)) "$BIN" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$(dirname "$BIN")/$T-" "$WORK" "$CORPUS" >"$LOG" 2>&1
RC=$?
EXECS=$(grep -E '^stat::number_of_executed_units' "$LOG" | awk '{print $2}')
COV=$(grep -oE 'cov: [0-9]+' "$LOG" | tail -1)
if [ "$RC" -eq 0 ]; then
    echo "$T: ${EXECS:-?} runs in ${SECS}s, ${COV:-cov ?}, no crash"
    echo "$T: 1 passed, 0 failed"
else
    echo "$T: FAILED (exit $RC), log $LOG:"
    grep -E 'ERROR|SUMMARY|runtime error|Assertion|Test unit written' "$LOG" | head -10
    echo "$T: 0 passed, 1 failed"
fi
exit "$RC"
