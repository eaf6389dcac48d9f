#!/usr/bin/env bash
# fault_zk_ensemble.sh SECONDS -- the fault harness on a 3-node ZooKeeper ensemble:
# mp_worker processes contend for one mutex through the full connect string while members
# of the ensemble fail; then an inspector checks that the mutex is free, and mp_check checks
# every log (overlaps, fence regressions, acting while not owner, leaked locks).
#
# Starts its own ensemble (scripts/zk-ensemble-start.sh, ports from FAULT_ZK_ENSEMBLE_BASE,
# default 2281: 2281..2289) and stops it, and every process it started, by PID on exit.
# Builds nothing: build/mp_worker and build/mp_check come from make rel-bins. Environment:
#   FAULT_DIR (default build/rel-zk-ensemble, wiped first)  FAULT_WORKERS (default 4)
#   FAULT_SEED (bash $RANDOM)  FAULT_ZK_SESSION (default 4000: a leader election on
#   loopback takes 1-3 s, so sessions usually survive one; longer outages expire them)
# Faults, round robin (each member that is killed is started again afterwards):
#   kill-leader      the member in Mode: leader is SIGKILLed, down for 0.5-3 s
#   kill-follower    the follower most workers are connected to (srvr/cons) is SIGKILLed
#   lose-quorum      two members are SIGSTOPped for 1-2 sessions (the third has no
#                    quorum: it drops its clients), then continued
#   gc-pause         the owner worker is SIGSTOPped past its lease, then continued
#   kill-owner       the owner worker is SIGKILLed (a new worker takes its place)
# The last line is the checker's verdict; exit 0 only if it passed.
set -u
cd "$(dirname "$0")/.."
SECS=${1:-}
case "$SECS" in ''|*[!0-9]*) echo "usage: $0 SECONDS" >&2; exit 2 ;; esac
B=build
WORKER=$B/mp_worker
CHECK=$B/mp_check
for b in "$WORKER" "$CHECK"; do
    [ -x "$b" ] || { echo "fault_zk_ensemble: $b missing (make rel-bins)" >&2; exit 2; }
done
DIR=${FAULT_DIR:-$B/rel-zk-ensemble}
N=${FAULT_WORKERS:-4}
export SIMBA_ZK_ENSEMBLE_BASE=${FAULT_ZK_ENSEMBLE_BASE:-2281}
BASE=$SIMBA_ZK_ENSEMBLE_BASE
RANDOM=${FAULT_SEED:-$$}
ZK_SESSION=${FAULT_ZK_SESSION:-4000}
LEASE=$ZK_SESSION
TTL=600
TRANSITION=400
rm -rf "$DIR"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
ENS=$DIR/ensemble
FAULTS=$DIR/faults.log
: >"$FAULTS"
MUTEX="fault-zkens-$$"
# what explains a verdict: the members log elections and session expiries (wall clock, in
# ensemble/zkN/zk.out), the workers their client library's connects (monotonic ms, in wN.err);
# clock.log pairs the two clocks
export SIMBA_ZK_ENSEMBLE_LOG=1

FAULT_NAME=fault_zk_ensemble
OWNER_WAIT_MS=6000
. tests/fault_lib.sh
cport() { echo $((BASE + 3 * ($1 - 1))); }
mpid() { cat "$ENS/zk$1/zk.pid" 2>/dev/null; }
fourlw() { # fourlw MEMBER WORD: the member's answer, or nothing
    { exec 3<>"/dev/tcp/127.0.0.1/$(cport "$1")" && printf '%s' "$2" >&3 && timeout 2 cat <&3; } 2>/dev/null || true
}
mode() { fourlw "$1" srvr | sed -n 's/^Mode: //p'; }

declare -a W_PID W_LOG
NLOG=0

cleanup() {
    local p i
    for p in "${W_PID[@]:-}"; do [ -n "$p" ] && kill -CONT "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
    for i in 1 2 3; do p=$(mpid "$i"); [ -n "$p" ] && kill -CONT "$p" 2>/dev/null; done
    [ -d "$ENS" ] && bash scripts/zk-ensemble-stop.sh "$ENS" >>"$DIR/server.log" 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

worker_start() { # worker_start SLOT
    local i=$1
    NLOG=$((NLOG + 1))
    W_LOG[$i]=$DIR/w$i-$NLOG.log
    "$WORKER" --backend zk --hosts "$HOSTS" --root /simba-ens --session-ms "$ZK_SESSION" --mutex "$MUTEX" \
        --duration-ms $(((SECS + 120) * 1000)) --ttl-ms "$TTL" --transition-ms "$TRANSITION" \
        --hold-ms "$(rnd 800 2500)" --rest-ms "$(rnd 200 800)" --log "${W_LOG[$i]}" --zk-log 1 2>>"$DIR/w$i.err" &
    W_PID[$i]=$!
}
# member_restart MEMBER: start a killed member again (it rejoins the quorum)
member_restart() {
    rm -f "$ENS/zk$1/zk.pid"
    bash scripts/zk-ensemble-start.sh "$ENS" "$1" >>"$DIR/server.log" 2>&1 ||
        echo "fault_zk_ensemble: member $1 did not rejoin (see $DIR/server.log)" | tee -a "$DIR/unexpected"
}
member_kill() { # member_kill MEMBER DOWN_MS WHAT
    local p
    p=$(mpid "$1")
    [ -n "$p" ] || return 1
    kill -KILL "$p" 2>/dev/null || return 1
    wait_gone "$p" 5000
    note "$3" "member $1 (pid $p, port $(cport "$1")) killed, down $2 ms"
    sleep_ms "$2"
    member_restart "$1"
}

f_kill_leader() {
    local i
    for i in 1 2 3; do
        if [ "$(mode "$i")" = leader ]; then member_kill "$i" "$(rnd 500 3000)" kill-leader; return; fi
    done
    echo "fault_zk_ensemble: no leader found for kill-leader"
}
f_kill_follower() {
    local i best="" bestn=-1 n
    for i in 1 2 3; do
        [ "$(mode "$i")" = follower ] || continue
        n=$(fourlw "$i" cons | grep -c '/127.0.0.1:')
        if [ "$n" -gt "$bestn" ]; then best=$i; bestn=$n; fi
    done
    [ -n "$best" ] || { echo "fault_zk_ensemble: no follower found for kill-follower"; return; }
    member_kill "$best" "$(rnd 500 3000)" kill-follower
    echo "fault_zk_ensemble: (member $best served $bestn client connections)"
}
f_lose_quorum() {
    local a b ms pa pb
    a=$(rnd 1 3)
    b=$((a % 3 + 1))
    pa=$(mpid "$a")
    pb=$(mpid "$b")
    [ -n "$pa" ] && [ -n "$pb" ] || return
    ms=$(rnd "$ZK_SESSION" $((ZK_SESSION * 2)))
    kill -STOP "$pa" "$pb" && note lose-quorum "members $a and $b (pids $pa $pb) frozen ${ms} ms: no quorum"
    sleep_ms "$ms"
    kill -CONT "$pa" "$pb"
}
LIST=(kill_leader gc_pause kill_follower lose_quorum kill_owner)

# ---- the run ------------------------------------------------------------------------------
bash scripts/zk-ensemble-start.sh "$ENS" >>"$DIR/server.log" 2>&1 ||
    { echo "fault_zk_ensemble: could not start the ensemble (see $DIR/server.log)"; exit 1; }
HOSTS=$(cat "$ENS/hosts")
echo "monotonic $(now_ms) wall $(date +%T.%N)" >"$DIR/clock.log"
for ((i = 0; i < N; i++)); do worker_start "$i"; done
T0=$(date +%s)
QUIET=$((LEASE / 1000 + 4)) # no fault in the last seconds: every lease runs out or renews
echo "fault_zk_ensemble: $N workers, ${SECS}s, session ${ZK_SESSION} ms, ensemble $HOSTS, mutex $MUTEX, dir $DIR"
fault_loop "$SECS" "$QUIET"
workers_stop
timeout 30 "$WORKER" --backend zk --hosts "$HOSTS" --root /simba-ens --session-ms "$ZK_SESSION" --mutex "$MUTEX" \
    --ttl-ms "$TTL" --transition-ms "$TRANSITION" --inspect-ms $((LEASE + 3000)) --log "$DIR/inspect.log" \
    2>>"$DIR/inspect.err"
cat "$DIR/inspect.err"
bash scripts/zk-ensemble-stop.sh "$ENS" >>"$DIR/server.log" 2>&1
grep -h 'mp_worker' "$DIR"/w*.err | grep -v ' 0 violations' | head -5
UNEXPECTED=0
[ -s "$DIR/unexpected" ] && UNEXPECTED=1
"$CHECK" --min-ownerships 5 --min-contenders 2 --need-inspect "$DIR"/w*-*.log "$DIR/inspect.log" "$FAULTS"
RC=$?
[ "$UNEXPECTED" = 1 ] && { echo "fault_zk_ensemble: unexpected:"; cat "$DIR/unexpected"; RC=1; }
[ "$STUCK" = 1 ] && RC=1
if [ $RC = 0 ]; then
    echo "fault_zk_ensemble: PASS"
    echo "fault_zk_ensemble: 1 passed, 0 failed"
else
    echo "fault_zk_ensemble: FAIL (logs in $DIR)"
    echo "fault_zk_ensemble: 0 passed, 1 failed"
fi
exit $RC
