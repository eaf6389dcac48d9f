# suite_lib.sh -- sourced by tests/run.sh and tests/test_reliability.sh (bash).
#
# tally NAME LOG RC T0: counts one finished suite into PASS / FAIL / FAILED and prints its
# result. The suite's own last "N passed, N failed" line counts; a program without one
# counts as one test, passed if it exited 0. EXTRA_GREP (a regex) picks further lines of the
# log to show on success.
tally() {
    local name=$1 log=$2 rc=$3 t0=$4 line p f
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    if [ -n "$line" ]; then
        p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
        f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
        [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    elif [ "$rc" -eq 0 ]; then p=1 f=0; else p=0 f=1; fi
    PASS=$((PASS + p))
    FAIL=$((FAIL + f))
    [ -n "${EXTRA_GREP:-}" ] && grep -E "$EXTRA_GREP" "$log" | sed 's/^/   /'
    if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ]; then
        FAILED="$FAILED $name"
        echo "   FAILED (exit $rc) after $(( $(date +%s) - t0 ))s; log $log:"
        grep -E 'FAIL|OVERLAP|FENCE|ACTS|LEAKED|error|Error|ERROR' "$log" | head -40 | sed 's/^/   | /'
        # the figures around a failure are what explain it (CI keeps only this output)
        echo "   last lines of the log:"
        tail -n 30 "$log" | sed 's/^/   : /'
    else
        echo "   ${line:-ok} ($(( $(date +%s) - t0 ))s)"
    fi
}
