# cli_lib.sh -- the checks tests/test_cli.sh and tests/test_elect.sh share (sourced; both set
# PASS, FAIL and the work directory W first).
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
check() { # check DESC CMD...: passes when the command succeeds
    local d=$1; shift
    if "$@"; then ok "$d"; else bad "$d"; fi
}
# expect_rc DESC WANT CMD...: runs CMD (stdout to $W/out, stderr to $W/err), checks its status
expect_rc() {
    local d=$1 want=$2 rc; shift 2
    "$@" >"$W/out" 2>"$W/err"; rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$d (exit $rc)"; else bad "$d: exit $rc, want $want; stderr: $(head -c 300 "$W/err")"; fi
}
err_has() { grep -q -- "$1" "$W/err"; }
out_has() { grep -q -- "$1" "$W/out"; }
# wait_for DEADLINE_S CMD...: polls CMD until it succeeds or the deadline passes
wait_for() {
    local end=$((SECONDS + $1)); shift
    while ! "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.05; done
    return 0
}
alive() { kill -0 "$1" 2>/dev/null; }
