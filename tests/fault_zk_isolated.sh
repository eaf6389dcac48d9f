#!/usr/bin/env bash
# fault_zk_isolated.sh -- an owner whose server is cut off from the leader (found
# by CI): on a 3-node ensemble, owner A talks only to follower C; the leader and the other
# follower are SIGSTOPped for 4.5 s (longer than the 4 s session). C keeps answering reads
# for up to syncLimit x tickTime (2.5 s here) before it notices; the leader, when continued,
# expires A's session at once (it last heard of A before the freeze) and waiter B (or A on a
# new session) takes the mutex. A must stop believing by freeze + T/2 (+ a little): its renewals must be confirmed
# through the leader, never by C's own view. Then mp_check checks both logs (overlaps,
# acts while not owner). A client that trusted C's own view would renew through C during
# the freeze and own until 3.5 s or more after it.
# Ports: FAULT_ZK_ISOLATED_BASE (default 2290: 2290..2298). Builds nothing (make rel-bins).
# Starts and stops its own ensemble and workers, by PID. Ends with "N passed, N failed".
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
cd "$(dirname "$0")/.."
B=build
for b in $B/mp_worker $B/mp_check; do
    [ -x "$b" ] || { echo "fault_zk_isolated: $b missing (make rel-bins)" >&2; exit 2; }
done
DIR=${FAULT_DIR:-$B/rel-zk-isolated}
rm -rf "$DIR"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
export SIMBA_ZK_ENSEMBLE_BASE=${FAULT_ZK_ISOLATED_BASE:-2290} SIMBA_ZK_ENSEMBLE_LOG=1
BASE=$SIMBA_ZK_ENSEMBLE_BASE
ENS=$DIR/ensemble
SESSION=4000
FREEZE=4500
LIMIT=$((SESSION / 2 + 300)) # T/2, and time for the last answer to come back on a loaded machine
PA="" PB="" PL="" PF=""
cleanup() {
    local p
    for p in $PL $PF; do kill -CONT "$p" 2>/dev/null; done
    for p in $PA $PB; do kill -KILL "$p" 2>/dev/null; done
    [ -d "$ENS" ] && bash scripts/zk-ensemble-stop.sh "$ENS" >>"$DIR/server.log" 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
now_ms() { "$B/mp_check" --now; }
cport() { echo $((BASE + 3 * ($1 - 1))); }
fourlw() { { exec 3<>"/dev/tcp/127.0.0.1/$(cport "$1")" && printf '%s' "$2" >&3 && timeout 2 cat <&3; } 2>/dev/null || true; }
fail() { echo "fault_zk_isolated: $*"; echo "fault_zk_isolated: FAIL (logs in $DIR)"; echo "fault_zk_isolated: 0 passed, 1 failed"; exit 1; }
wait_line() { # wait_line FILE PATTERN MS
    local end=$(($(date +%s%N) / 1000000 + $3))
    until grep -q "$2" "$1" 2>/dev/null; do
        [ $(($(date +%s%N) / 1000000)) -ge "$end" ] && return 1
        sleep 0.05
    done
}

bash scripts/zk-ensemble-start.sh "$ENS" >>"$DIR/server.log" 2>&1 || fail "the ensemble did not start (see $DIR/server.log)"
L="" C="" F=""
for i in 1 2 3; do [ "$(fourlw "$i" srvr | sed -n 's/^Mode: //p')" = leader ] && L=$i; done
[ -n "$L" ] || fail "no leader"
for i in 1 2 3; do [ "$i" = "$L" ] && continue; if [ -z "$C" ]; then C=$i; else F=$i; fi; done
echo "fault_zk_isolated: leader $L, A's server $C (isolated), other follower $F"
M="isolated-$$"
# ttl 6000: the owner renews every second or so, so that a renewal falls inside the freeze
W="--backend zk --root /simba-iso --session-ms $SESSION --mutex $M --duration-ms 40000 --ttl-ms 6000 --transition-ms 400 --zk-log 1"
# shellcheck disable=SC2086
$B/mp_worker $W --hosts "127.0.0.1:$(cport "$C")" --hold-ms 30000 --rest-ms 200 --log "$DIR/a.log" 2>"$DIR/a.err" &
PA=$!
wait_line "$DIR/a.log" " acquired " 10000 || fail "A did not acquire"
# shellcheck disable=SC2086
$B/mp_worker $W --hosts "127.0.0.1:$(cport "$L"),127.0.0.1:$(cport "$F")" --hold-ms 1000 --rest-ms 200 --log "$DIR/b.log" 2>"$DIR/b.err" &
PB=$!
# B has a session (its first ask follows at once); the verdict does not depend on B being
# queued before the freeze, only on A's step-down and on mp_check
wait_line "$DIR/b.err" "session establishment complete" 10000 || fail "B did not connect"
PL=$(cat "$ENS/zk$L/zk.pid")
PF=$(cat "$ENS/zk$F/zk.pid")
T0=$(now_ms)
kill -STOP "$PL" "$PF" || fail "could not stop the members"
echo "0 - 0 fault:freeze $T0" >"$DIR/faults.log"
sleep "$(awk -v m=$FREEZE 'BEGIN { printf "%.3f", m / 1000 }')"
kill -CONT "$PL" "$PF"
# someone owns again after the freeze (B, or A on a new session: either may win)
end=$(($(date +%s%N) / 1000000 + 30000))
until [ "$(cat "$DIR/a.log" "$DIR/b.log" 2>/dev/null | grep -c ' acquired ')" -ge 2 ]; do
    [ $(($(date +%s%N) / 1000000)) -ge "$end" ] && fail "nobody acquired again within 30 s of the freeze"
    sleep 0.05
done
sleep 1
kill -TERM "$PA" "$PB"
wait "$PA" "$PB"
PA="" PB=""
bash scripts/zk-ensemble-stop.sh "$ENS" >>"$DIR/server.log" 2>&1
# A's first ownership ends (released, or its lease end) within LIMIT of the freeze
END=$(awk '$4 == "released" { print $5; exit }' "$DIR/a.log")
[ -n "$END" ] || fail "A never stepped down"
LATE=$(awk -v e="$END" -v t="$T0" 'BEGIN { printf "%d", e - t }')
echo "fault_zk_isolated: A stepped down ${LATE} ms after the freeze (limit ${LIMIT} ms: T/2 + 300)"
"$B/mp_check" --min-ownerships 2 "$DIR/a.log" "$DIR/b.log" "$DIR/faults.log" || fail "mp_check failed"
[ "$LATE" -le "$LIMIT" ] || fail "A believed it owned ${LATE} ms into the freeze: confirmed by its cut-off server"
echo "fault_zk_isolated: PASS"
echo "fault_zk_isolated: 1 passed, 0 failed"
