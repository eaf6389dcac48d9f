#!/usr/bin/env bash
# test_zk_ensemble.sh -- the ZooKeeper part of make test-scale: the shared kit on
# a 3-node ensemble (scripts/zk-ensemble-start.sh in build/zk-ensemble, ports from
# SIMBA_ZK_ENSEMBLE_BASE, default 2272..2280), then the fault harness on an ensemble of its
# own (tests/fault_zk_ensemble.sh, FAULT_ZK_ENSEMBLE_BASE default 2281..2289) for
# ZK_ENSEMBLE_FAULT_SECONDS (default 60), then an owner whose server is cut off from a frozen
# leader (tests/fault_zk_isolated.sh, 2290..2298, about 25 s). About 3 minutes. Every server
# is stopped by PID. Ends with "zk-ensemble: N passed, N failed"; exit 0 only if all passed.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
DIR=$PWD/$B/zk-ensemble
PASS=0
FAIL=0
trap 'bash scripts/zk-ensemble-stop.sh "$DIR" >/dev/null 2>&1' EXIT
rm -rf "$DIR"
if bash scripts/zk-ensemble-start.sh "$DIR"; then
    if SIMBA_ZK_HOSTS=$(cat "$DIR/hosts") "$B/kit_zk"; then PASS=$((PASS + 1)); else FAIL=$((FAIL + 1)); fi
else
    echo "zk-ensemble: the ensemble did not start"
    FAIL=$((FAIL + 1))
fi
bash scripts/zk-ensemble-stop.sh "$DIR"
if bash tests/fault_zk_ensemble.sh "${ZK_ENSEMBLE_FAULT_SECONDS:-60}"; then PASS=$((PASS + 1)); else FAIL=$((FAIL + 1)); fi
if bash tests/fault_zk_isolated.sh; then PASS=$((PASS + 1)); else FAIL=$((FAIL + 1)); fi
echo "zk-ensemble: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
