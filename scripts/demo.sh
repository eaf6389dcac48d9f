#!/bin/sh
# demo.sh -- three leader_demo processes on one SQLite file; the leader is SIGKILLed and
# another takes over. Prints the merged timeline and the measured failover time.
#
#   scripts/demo.sh [LEADER_DEMO_BIN]     (default $DEMO_BIN or build/leader_demo)
#   scripts/demo.sh --deps                what the demo needs to build: a C compiler ($CC,
#                                         else cc) and SQLite's header and library; nothing
#                                         when they work, else apt-get as root, else the
#                                         packages to install and exit 1
#
# ttl 2000 ms, transition 1000 ms: a killed leader's lease ends at most ttl + transition
# after its last renewal, and a follower tries within its jitter [-200, 1000) ms after that.
# Exits by itself in well under 30 s and removes everything it created.
set -u

# demo_deps: compiles and links a one-line SQLite program, the demo's only need
demo_deps() {
    cc=${CC:-cc}
    t=$(mktemp -d "${TMPDIR:-/tmp}/simba_deps.XXXXXX") || exit 1
    printf '#include <sqlite3.h>\nint main(void) { return sqlite3_libversion_number() > 0 ? 0 : 1; }\n' >"$t/d.c"
    if "$cc" -o "$t/d" "$t/d.c" -lsqlite3 >"$t/err" 2>&1; then rm -rf "$t"; return 0; fi
    echo "demo: '$cc' cannot build a SQLite program: $(head -n 1 "$t/err")" >&2
    rm -rf "$t"
    pkgs="libsqlite3-dev"
    command -v "$cc" >/dev/null 2>&1 || pkgs="gcc libc6-dev $pkgs"
    if [ "$(id -u)" -ne 0 ]; then
        echo "demo: install these packages (as root: apt-get install $pkgs), then run make demo again" >&2
        exit 1
    fi
    echo "demo: installing $pkgs"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs || exit 1
}
if [ "${1:-}" = --deps ]; then demo_deps; exit 0; fi

DEMO=${1:-${DEMO_BIN:-build/leader_demo}}
TTL=2000
TRANSITION=${DEMO_TRANSITION:-1000}
JITTER_MAX=1000
NAMES="alice bob carol"

if [ ! -x "$DEMO" ]; then
    echo "demo: $DEMO is not an executable (build it with 'make demo' or give its path)" >&2
    exit 1
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/simba_demo.XXXXXX") || exit 1
PIDS=""

cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    PIDS=""
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_ms() { "$DEMO" --clock; }
# seconds since $T0 for a monotonic ms value
rel() { awk -v t="$1" -v t0="$T0" 'BEGIN { printf "+%.3fs", (t - t0) / 1000 }'; }
# the current leader: the process whose last LEADER/stepped-down line is LEADER
leader() {
    for n in $NAMES; do
        last=$(grep -E ' (LEADER|stepped down) ' "$DIR/$n.log" 2>/dev/null | tail -n 1)
        case "$last" in *" LEADER "*) echo "$n"; return 0 ;; esac
    done
    return 1
}
pid_of() { cat "$DIR/$1.pid"; }
# wait_until SECONDS COMMAND...: run COMMAND every 50 ms until it succeeds or time is up
wait_until() {
    limit=$1
    shift
    end=$(($(date +%s) + limit))
    until "$@"; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.05
    done
}

T0=$(now_ms)
echo "demo: 3 processes on $DIR/demo.db, ttl $TTL ms, transition $TRANSITION ms"
for n in $NAMES; do
    "$DEMO" --db "$DIR/demo.db" --name "$n" --ttl-ms "$TTL" --transition-ms "$TRANSITION" \
        >"$DIR/$n.log" 2>"$DIR/$n.err" &
    echo $! >"$DIR/$n.pid"
    PIDS="$PIDS $!"
done

if ! wait_until 10 leader >/dev/null; then
    echo "demo: nobody became leader within 10 s" >&2
    cat "$DIR"/*.err >&2
    exit 1
fi
FIRST=$(leader)
echo "demo: $FIRST leads; letting it renew for a while"
sleep 3.5

OLD=$(leader)
KILL_AT=$(now_ms)
kill -KILL "$(pid_of "$OLD")"
echo "demo: *** SIGKILL $OLD at $(rel "$KILL_AT") ***"
echo "$KILL_AT  --:--:--.---  $OLD    *** killed with SIGKILL ***" >"$DIR/kill.log"

# a LEADER line from another process, later than the kill
new_leader_line() {
    for n in $NAMES; do
        [ "$n" = "$OLD" ] && continue
        awk -v k="$KILL_AT" '$4 == "LEADER" && $1 > k { print; exit }' "$DIR/$n.log"
    done | sort -n | head -n 1 | grep .
}
if ! wait_until 12 new_leader_line >/dev/null; then
    echo "demo: nobody took over within 12 s" >&2
    exit 1
fi
LINE=$(new_leader_line)
NEW_AT=$(echo "$LINE" | awk '{ print $1 }')
NEW=$(echo "$LINE" | awk '{ print $3 }')
FAILOVER=$(awk -v a="$NEW_AT" -v k="$KILL_AT" 'BEGIN { printf "%d", a - k }')
BOUND=$((TTL + TRANSITION + JITTER_MAX))

sleep 2
# the others step down cleanly (SIGTERM): release, then exit
for n in $NAMES; do
    [ "$n" = "$OLD" ] && continue
    kill -TERM "$(pid_of "$n")" 2>/dev/null
done
for p in $PIDS; do
    wait "$p" 2>/dev/null
done
PIDS=""

echo
echo "timeline (time since start, wall clock, process, event):"
sort -n "$DIR"/*.log | while read -r t wall who what; do
    printf "  %s  %s  %-6s %s\n" "$(rel "$t")" "$wall" "$who" "$what"
done
echo
echo "demo: $OLD was killed at $(rel "$KILL_AT"); $NEW took over $FAILOVER ms later"
echo "demo: bound ttl + transition + jitter max = $TTL + $TRANSITION + $JITTER_MAX = $BOUND ms (counted from the last renewal)"
if [ "$FAILOVER" -le "$BOUND" ]; then
    echo "demo: OK"
    exit 0
fi
echo "demo: FAIL: failover took longer than the bound"
exit 1
