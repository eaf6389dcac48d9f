#!/usr/bin/env bash
# test_cli.sh -- the simba command-line tool as a user runs it: real processes on a real
# SQLite file, redis-server and ZooKeeper (started here on their own loopback ports, stopped
# by PID on exit), the fault proxy for partitions. Prints "N passed, N failed"; exit 0 only
# if every check passed. A server that cannot be started fails the run.
#   SIMBA_CLI_REDIS_PORT (6430)  SIMBA_CLI_ZK_PORT (2221)  SIMBA_CLI_DEAD_PORT (6434, nothing
#   listens there)  SIMBA_CLI_MUTE_PORT (6435, a listener that accepts and never answers)
#   SIMBA_CLI_FRESH_PORT (RPORT + 6): an undeclared redis-server for section fresh (init)
#   SIMBA_BIN (build/simba)  FAULT_PROXY (build/fault_proxy)
#   SIMBA_CLI_ONLY="usage connect sqlite readonly redis fresh zk signals elect stats partition pg mysql permits matrix"
#   runs some sections only (matrix: tests/cli_matrix.sh, every command on every primitive and
#   backend under ASan; SIMBA_ASAN_BIN, default build/asan/simba; SIMBA_CLI_MATRIX="sqlite redis
#   zk pg mysql" runs it on some backends only).
#   SIMBA_CLI_PG_PORT (5447): PostgreSQL for section pg (scripts/pg-start.sh; password simba).
#   SIMBA_CLI_MYSQL_PORT (3447): MariaDB for section mysql and the matrix (scripts/mysql-start.sh).
set -u
cd "$(dirname "$0")/.."
SIMBA=${SIMBA_BIN:-build/simba}
PROXY=${FAULT_PROXY:-build/fault_proxy}
RPORT=${SIMBA_CLI_REDIS_PORT:-6430}
ZPORT=${SIMBA_CLI_ZK_PORT:-2221}
DEAD=${SIMBA_CLI_DEAD_PORT:-6434}
MUTE=${SIMBA_CLI_MUTE_PORT:-6435}
ONLY=${SIMBA_CLI_ONLY:-usage connect sqlite readonly redis fresh zk signals elect stats partition pg mysql permits matrix}
FPORT=${SIMBA_CLI_FRESH_PORT:-$((RPORT + 6))}
PGPORT_CLI=${SIMBA_CLI_PG_PORT:-5447}
MYPORT_CLI=${SIMBA_CLI_MYSQL_PORT:-3447}
want() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
W=$(mktemp -d "${TMPDIR:-/tmp}/simba-cli.XXXXXX")
PASS=0
FAIL=0
T0=$SECONDS
unset SIMBA_URL SIMBA_REDIS_PASSWORD SIMBA_REDIS_USERNAME

PIDS=()
# commands that a broken tool failed to stop: their process groups (pid = pgid)
cleanup_groups() {
    local p
    for p in "$W"/*.pg "$W"/*.pg.*; do
        [ -s "$p" ] || continue
        p=$(cat "$p")
        case $p in ''|*[!0-9]*) continue ;; esac
        # only a live group that simba started (a pid may have been reused since)
        grep -qa SIMBA_MUTEX= "/proc/$p/environ" 2>/dev/null && kill -KILL -- "-$p" 2>/dev/null
    done
}
cleanup() {
    local p
    for p in "${PIDS[@]}"; do # only our own children still running (pids get reused)
        [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$$" ] || continue
        kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
    done
    cleanup_groups
    [ -f "$W/redis/redis.pid" ] && sh scripts/redis-stop.sh "$W/redis" >/dev/null 2>&1
    [ -f "$W/redis-fresh/redis.pid" ] && sh scripts/redis-stop.sh "$W/redis-fresh" >/dev/null 2>&1
    [ -f "$W/zk/zk.pid" ] && bash scripts/zk-stop.sh "$W/zk" >/dev/null 2>&1
    [ -s "$W/pg/datadir" ] && sh scripts/pg-stop.sh "$W/pg" >/dev/null 2>&1
    [ -s "$W/mysql/mysql.pid" ] && sh scripts/mysql-stop.sh "$W/mysql" >/dev/null 2>&1
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. tests/cli_lib.sh
now_ns() { date +%s%N; }
json_fence() { sed -n 's/.*"fence":\([0-9]*\).*/\1/p' "$1"; }
# wait_exit PID DEADLINE_S: waits for a background job, sets RC (124 when it did not end)
wait_exit() {
    if wait_for "$2" eval "! alive $1"; then wait "$1"; RC=$?; else RC=124; kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null; fi
}

[ -x "$SIMBA" ] || { echo "FAIL $SIMBA not built (make $SIMBA)"; echo "0 passed, 1 failed"; exit 1; }
[ -x "$PROXY" ] || { echo "FAIL $PROXY not built (make $PROXY)"; echo "0 passed, 1 failed"; exit 1; }

if ! sh scripts/redis-start.sh "$RPORT" "$W/redis" >"$W/redis.log" 2>&1; then
    echo "FAIL redis-server on $RPORT: $(tail -3 "$W/redis.log")"; echo "0 passed, 1 failed"; exit 1
fi
if ! bash scripts/zk-start.sh "$ZPORT" "$W/zk" >"$W/zk.log" 2>&1; then
    echo "FAIL ZooKeeper on $ZPORT: $(tail -3 "$W/zk.log")"; echo "0 passed, 1 failed"; exit 1
fi
SQL=sqlite:$W/locks.db
RED=redis://127.0.0.1:$RPORT/2
ZK=zk://127.0.0.1:$ZPORT/simba-cli
FAST="--ttl 1 --transition 0.8"

# ---- usage, URLs, options -----------------------------------------------------------------
if want usage; then
expect_rc "help lists exit statuses" 0 "$SIMBA" --help
check "help documents 75 and 76" grep -q "76 lease lost" "$W/out"
check "help lists --version" grep -q -- "--version" "$W/out"
# every option --help lists has its entry in OPTIONS of the manual page
"$SIMBA" --help | sed -n '/^options:/,/^[^ o]/p' | grep -oE '^  (-[a-z], )?--[a-z-]+' | sed 's/.*--//' > "$W/help-opts"
sed -n '/^\.SH OPTIONS/,/^\.SH EXIT/p' docs/simba.1 | grep -A1 '^\.TP' | sed -n 's/^\.B[IR]* .*\\-\\-\([a-z\\-]*\).*/\1/p' | sed 's/\\//g' > "$W/man-opts"
missing=$(grep -vxFf "$W/man-opts" "$W/help-opts" | tr '\n' ' ')
check "every option of --help ($(wc -l < "$W/help-opts")) is in simba.1 OPTIONS${missing:+ (missing: $missing)}" \
    eval '[ -z "$missing" ] && [ "$(wc -l < "$W/help-opts")" -ge 25 ]'
expect_rc "--version" 0 "$SIMBA" --version
check "  prints simba and simba.h's version" grep -qx "simba $(sed -n 's/^#define SIMBA_VERSION "\(.*\)"/\1/p' simba.h)" "$W/out"
expect_rc "no URL is a usage error" 64 "$SIMBA" get x
check "  and names SIMBA_URL" err_has SIMBA_URL
expect_rc "unknown scheme" 64 "$SIMBA" -u foo:bar get x
check "  names the scheme" err_has "unknown scheme 'foo'"
expect_rc "empty sqlite path" 64 "$SIMBA" -u sqlite: get x
check "  names PATH" err_has "PATH is empty"
expect_rc "redis port out of range" 64 "$SIMBA" -u redis://127.0.0.1:70000 get x
check "  names the port" err_has "port 70000"
expect_rc "redis password in URL refused" 64 "$SIMBA" -u redis://u:secret@127.0.0.1:$RPORT get x
check "  points to SIMBA_REDIS_PASSWORD" err_has SIMBA_REDIS_PASSWORD
expect_rc "redis DB not a number" 64 "$SIMBA" -u redis://127.0.0.1:$RPORT/x get x
check "  names DB" err_has "DB"
expect_rc "zk without port" 64 "$SIMBA" -u zk://127.0.0.1 get x
check "  names HOST:PORT" err_has "HOST:PORT"
expect_rc "zk root with trailing slash" 64 "$SIMBA" -u zk://127.0.0.1:$ZPORT/a/ get x
check "  names ROOT" err_has "ROOT"
expect_rc "bad mutex name" 64 "$SIMBA" -u "$SQL" get "a b"
expect_rc "release without --fence refused" 64 "$SIMBA" -u "$SQL" release x
check "  says --fence is required" err_has "fence N is required"
expect_rc "run without a command" 64 "$SIMBA" -u "$SQL" run x
expect_rc "unknown option" 64 "$SIMBA" -u "$SQL" run x --frobnicate -- true
check "  names the option" err_has "frobnicate"
expect_rc "-n with -w" 64 "$SIMBA" -u "$SQL" run x -n -w 1 -- true
expect_rc "grace not shorter than transition" 64 "$SIMBA" -u "$SQL" run x --transition 1 --grace 1 -- true
check "  explains why" err_has "transition window"
expect_rc "bad signal name" 64 "$SIMBA" -u "$SQL" run x -s FOO -- true
expect_rc "--permits 0 refused" 64 "$SIMBA" -u "$SQL" run x --permits 0 -- true
check "  names the range" err_has "permits: 0 is out of range (1..1024)"
expect_rc "--permits 1025 refused" 64 "$SIMBA" -u "$SQL" run x --permits 1025 -- true
expect_rc "--permits not a number" 64 "$SIMBA" -u "$SQL" run x --permits two -- true
expect_rc "--shared with --permits 2 refused" 64 "$SIMBA" -u "$SQL" run x --shared --permits 2 -- true
check "  says why" err_has "shared with --permits 2"
expect_rc "--permits is for run and elect" 64 "$SIMBA" -u "$SQL" get x --permits 2
check "  says so" err_has "are for run and elect"
expect_rc "get: unreachable redis is a backend error" 69 "$SIMBA" -u redis://127.0.0.1:$DEAD get x
expect_rc "run -w 1: unreachable redis is a backend error" 69 "$SIMBA" -u redis://127.0.0.1:$DEAD run x -w 1 -- true
check "  and says the backend could not be reached, with its words" err_has "could not be reached: .*refused"
expect_rc "get: missing sqlite file is a backend error" 69 "$SIMBA" -u "sqlite:$W/nonexistent.db" get x
check "  the file was not created" test ! -e "$W/nonexistent.db"
expect_rc "checkpoint: missing sqlite file is a backend error" 69 "$SIMBA" -u "sqlite:$W/nonexistent.db" checkpoint
check "  the file was not created" test ! -e "$W/nonexistent.db"
expect_rc "checkpoint: for SQLite only" 64 "$SIMBA" -u "$RED" checkpoint
expect_rc "checkpoint: takes no NAME" 64 "$SIMBA" -u "$SQL" checkpoint x
expect_rc "--every is for checkpoint" 64 "$SIMBA" -u "$SQL" get x --every 1
expect_rc "get: wrong redis password is a backend error" 69 env SIMBA_REDIS_PASSWORD=wrong "$SIMBA" -u "redis://127.0.0.1:$RPORT" get x
fi

# ---- a backend that does not answer: run and elect end (--connect-timeout) -------------------
# elapsed_ok MS LO HI: MS within [LO, HI]
elapsed_ok() { [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
# takeover_suite BE URL: two processes on one name, a second one waiting: a released owner is
# followed within a round trip and the wake-up; a SIGKILLed one after its lease (ttl 1 s,
# transition 0.8 s), never before its transition window
to_pair() { # M: a holder that waits for $W/to-go, and a waiter that writes when it ran; TO_HP, TO_WP
    rm -f "$W/to-go" "$W/to-held" "$W/to-ran"
    "$SIMBA" run "$1" --ttl 1 --transition 0.8 -- sh -c 'echo $$ > "$0.pg"; touch "$0"; while [ ! -e "$1" ]; do sleep 0.02; done' \
        "$W/to-held" "$W/to-go" >>"$W/bg.log" 2>&1 &
    TO_HP=$!; PIDS+=("$TO_HP")
    wait_for 10 test -e "$W/to-held" || true
    "$SIMBA" run "$1" --ttl 1 --transition 0.8 -w 20 -- sh -c 'date +%s%N > "$0"' "$W/to-ran" >>"$W/bg.log" 2>&1 &
    TO_WP=$!; PIDS+=("$TO_WP")
    sleep 1.5 # the waiter in line, the holder renewing
}
takeover_suite() {
    local be=$1 m="takeover-$1" t1 t2
    export SIMBA_URL=$2
    to_pair "$m"
    t1=$(now_ns); touch "$W/to-go"
    wait_exit "$TO_WP" 10
    t2=$(( ($(cat "$W/to-ran" 2>/dev/null || echo 0) - t1) / 1000000 ))
    check "$be: a released lock reaches the waiting process in $t2 ms (a round trip and the wake-up)" elapsed_ok "$t2" 0 700
    wait_exit "$TO_HP" 10
    to_pair "$m"
    t1=$(now_ns); kill -KILL "$TO_HP"; kill -KILL "$(cat "$W/to-held.pg" 2>/dev/null)" 2>/dev/null
    wait_exit "$TO_WP" 15
    t2=$(( ($(cat "$W/to-ran" 2>/dev/null || echo 0) - t1) / 1000000 ))
    check "$be: a SIGKILLed owner is followed after its lease, in $t2 ms (not before the 0.8 s window; at most ttl + transition + jitter)" \
        elapsed_ok "$t2" 800 4500
    touch "$W/to-go"
}
if want connect; then
echo "== connect"
# a listener that accepts every connection and never writes a byte (nor closes)
perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $ARGV[0], Listen => 64, ReuseAddr => 1)
    or die "listen $ARGV[0]: $!\n"; open(F, ">", $ARGV[1]) or die; print F "up\n"; close F; while ($c = $s->accept) { push @held, $c }' \
    "$MUTE" "$W/mute.up" 2>"$W/mute.err" &
MP=$!; PIDS+=("$MP")
wait_for 5 test -s "$W/mute.up" || bad "the silent listener on $MUTE did not start: $(cat "$W/mute.err")"
# the default (30 s), in the background while the rest runs
t0=$(now_ns)
"$SIMBA" -u "redis://127.0.0.1:$MUTE" run cx -- touch "$W/cx-ran" >/dev/null 2>"$W/cx-default.err" &
dp=$!; PIDS+=("$dp")
for be in redis zk pg; do
    case $be in
        redis) dead="redis://127.0.0.1:$DEAD"; mute="redis://127.0.0.1:$MUTE" ;;
        zk) dead="zk://127.0.0.1:$DEAD"; mute="zk://127.0.0.1:$MUTE" ;;
        pg) dead="postgres://127.0.0.1:$DEAD"; mute="postgres://127.0.0.1:$MUTE" ;;
    esac
    for c in run elect; do
        t1=$(now_ns)
        expect_rc "$be: $c --connect-timeout 1, nothing listens" 69 "$SIMBA" -u "$dead" "$c" cx --connect-timeout 1 -- touch "$W/cx-ran"
        t2=$(( ($(now_ns) - t1) / 1000000 ))
        check "  gave up after about 1 s ($t2 ms) and says why" eval 'elapsed_ok $t2 900 3000 && err_has "no answer from the backend for 1.* s (--connect-timeout 1): .*"'
        t1=$(now_ns)
        expect_rc "$be: $c --connect-timeout 1, a server that never answers" 69 "$SIMBA" -u "$mute" "$c" cx --connect-timeout 1 -- touch "$W/cx-ran"
        t2=$(( ($(now_ns) - t1) / 1000000 ))
        check "  gave up after about 1 s ($t2 ms) and says so" eval 'elapsed_ok $t2 900 3000 && err_has "no answer from the backend for 1.* s (--connect-timeout 1)"'
    done
done
t1=$(now_ns)
expect_rc "-w 1 bounds the wait before --connect-timeout 10 (silent server)" 69 "$SIMBA" -u "redis://127.0.0.1:$MUTE" run cx -w 1 --connect-timeout 10 -- touch "$W/cx-ran"
t2=$(( ($(now_ns) - t1) / 1000000 ))
check "  gave up after about 1 s ($t2 ms)" elapsed_ok $t2 900 3000
t1=$(now_ns)
expect_rc "--connect-timeout 1 ends a -w 10 (nothing listens)" 69 "$SIMBA" -u "zk://127.0.0.1:$DEAD" run cx -w 10 --connect-timeout 1 -- touch "$W/cx-ran"
t2=$(( ($(now_ns) - t1) / 1000000 ))
check "  gave up after about 1 s ($t2 ms)" elapsed_ok $t2 900 3000
expect_rc "--connect-timeout is for run and elect" 64 "$SIMBA" -u "$SQL" get cx --connect-timeout 1
expect_rc "--connect-timeout takes seconds" 64 "$SIMBA" -u "$SQL" run cx --connect-timeout x -- true
check "help documents --connect-timeout and its default" eval '"$SIMBA" --help | grep -q -- "--connect-timeout SEC" && "$SIMBA" --help | grep -q "default 30"'
wait_exit $dp 45
t2=$(( ($(now_ns) - t0) / 1000000 ))
check "default: run gives up on a silent server after 30 s (exit $RC, $t2 ms)" eval 'test $RC -eq 69 && elapsed_ok $t2 29500 36000'
check "  saying so" grep -q "no answer from the backend for 30 s (--connect-timeout 30)" "$W/cx-default.err"
check "no command ran against an unreachable backend" test ! -e "$W/cx-ran"
kill -TERM $MP 2>/dev/null; wait $MP 2>/dev/null
fi

# ---- per backend ---------------------------------------------------------------------------

# no_overlap FILE N: every hold of the intervals file is S..E of one process, holds do not
# overlap in time, and fences strictly increase from one hold to the next.
no_overlap() {
    # fences compared as decimal strings: awk's numbers are doubles, exact only below 2^53,
    # and a fence is any 64-bit number (today's backends stay below 2^53)
    sort -k2,2n "$1" | awk -v want="$2" '
        function gt(a, b) { return length(a) != length(b) ? length(a) > length(b) : (a "") > (b "") }
        $1 == "S" { if (open) { print "OVERLAP: " $0 " starts inside " opid; bad = 1 }
                    if ($2 <= lastend) { print "OVERLAP: starts before the previous end"; bad = 1 }
                    if (n && !gt($3, lastf)) { print "FENCE: " $3 " after " lastf; bad = 1 }
                    open = 1; opid = $4; lastf = $3 ""; n++ }
        $1 == "E" { if (!open || $4 != opid) { print "OVERLAP: end of " $4 " while " opid " holds"; bad = 1 }
                    open = 0; lastend = $2 }
        END { if (n != want) { print "holds: " n ", want " want; bad = 1 } exit bad }'
}

# denied_suite BE URL VAR: with a wrong password in VAR, every command exits 77 at once with
# the server's words; run and elect do not wait for --connect-timeout
denied_suite() {
    local be=$1 url=$2 var=$3 c t1 t2
    for c in "get x" "get x --json" "ls" "ls --json" "watch x" "release x --fence 1" "run x -- true" "run x -n -- true" \
        "elect x -- true"; do
        t1=$(now_ns)
        expect_rc "$be: $c with a wrong password" 77 env "$var=wrong" timeout 20 "$SIMBA" -u "$url" $c
        t2=$(( ($(now_ns) - t1) / 1000000 ))
        check "  at once ($t2 ms), and says it was denied" eval 'elapsed_ok $t2 0 3000 && err_has "denied"'
    done
}

HOLD='echo "S $(date +%s%N) $SIMBA_FENCE $$" >> "$0"; sleep 0.15; echo "E $(date +%s%N) $SIMBA_FENCE $$" >> "$0"'

backend_suite() {
    local be=$1 url=$2 m="job-$1" hp pid pids f f2 RC
    echo "== $be ($url)"
    export SIMBA_URL=$url

    expect_rc "$be: run exits with the command's status" 7 "$SIMBA" run "$m" $FAST -- sh -c 'exit 7'
    expect_rc "$be: command killed by a signal -> 128+N" 137 "$SIMBA" run "$m" $FAST -- sh -c 'kill -KILL $$'
    expect_rc "$be: command not found -> 127" 127 "$SIMBA" run "$m" $FAST -- /nonexistent/cmd
    expect_rc "$be: get on a free mutex exits 1" 1 "$SIMBA" get "$m"

    # a holder: its environment, get, -n, -w, release --fence
    rm -f "$W/env" "$W/go"
    "$SIMBA" run "$m" $FAST -- sh -c 'echo "$SIMBA_MUTEX $SIMBA_FENCE" > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' "$W/env" "$W/go" >>"$W/bg.log" 2>&1 &
    hp=$!; PIDS+=("$hp")
    if wait_for 10 test -s "$W/env"; then ok "$be: holder runs its command"; else bad "$be: holder never ran"; fi
    read -r hm hf < "$W/env"
    check "$be: SIMBA_MUTEX is the name" test "$hm" = "$m"
    expect_rc "$be: get --json while held" 0 "$SIMBA" get "$m" --json
    f=$(json_fence "$W/out")
    check "$be: get shows the holder's SIMBA_FENCE ($hf)" test -n "$hf" -a "$f" = "$hf"
    check "$be: get shows an owner" grep -q '"owner":"' "$W/out"
    expect_rc "$be: -n while held" 75 "$SIMBA" run "$m" -n -- true
    check "  names the holder" err_has "held by"
    expect_rc "$be: -w 0 while held (as -n)" 75 "$SIMBA" run "$m" -w 0 -- true
    local t1=$SECONDS
    expect_rc "$be: -w 1 while held" 75 "$SIMBA" run "$m" -w 1 -- true
    check "$be: -w waited about 1 s (not more than 3)" test $((SECONDS - t1)) -le 3
    # a backend that answers "held" is reachable: --connect-timeout does not end the wait
    rm -f "$W/cx-$be"
    "$SIMBA" run "$m" $FAST --connect-timeout 0.5 -- sh -c 'echo $SIMBA_FENCE > "$0"' "$W/cx-$be" >"$W/cx-$be.err" 2>&1 &
    pid=$!; PIDS+=("$pid")
    sleep 2
    check "$be: a waiter with --connect-timeout 0.5 still waits for the holder after 2 s" alive $pid
    expect_rc "$be: ls lists it" 0 "$SIMBA" ls
    check "$be: ls shows the name and fence" grep -q "^$m .* $hf " "$W/out"
    expect_rc "$be: release with a wrong fence" 1 "$SIMBA" release "$m" --fence $((hf + 1))
    check "$be: holder still holds after the refused release" alive $hp
    expect_rc "$be: still owned after the refused release" 0 "$SIMBA" get "$m" --json
    check "  with the same fence" test "$(json_fence "$W/out")" = "$hf"
    touch "$W/go"
    wait_exit $hp 10
    check "$be: holder exits 0 when its command does (got $RC)" test "$RC" -eq 0
    wait_exit $pid 10
    check "$be:   and that waiter then ran its command (exit $RC, $(head -c 200 "$W/cx-$be.err"))" test "$RC" -eq 0 -a -s "$W/cx-$be"
    expect_rc "$be: released on exit (get exits 1)" 1 "$SIMBA" get "$m"

    # forced release of a stuck owner: its lease ends, its command is signalled (76)
    "$SIMBA" run "$m" $FAST -- sh -c 'echo $$ > "$0.pg"; echo $SIMBA_FENCE > "$0"; exec sleep 30' "$W/stuck-$be" >>"$W/bg.log" 2>&1 &
    hp=$!; PIDS+=("$hp")
    wait_for 10 test -s "$W/stuck-$be" || true
    f=$(cat "$W/stuck-$be" 2>/dev/null)
    expect_rc "$be: release --fence of the holder's fence" 0 "$SIMBA" release "$m" --fence "$f"
    wait_exit $hp 10
    check "$be: the forced-out holder exits 76 (got $RC)" test "$RC" -eq 76
    check "$be: the forced-out holder's command is gone" eval '! kill -0 $(cat "$W/stuck-$be.pg") 2>/dev/null'
    expect_rc "$be: a new run gets it after the forced release" 0 "$SIMBA" run "$m" -w 10 $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"' "$W/next"
    f2=$(cat "$W/next" 2>/dev/null)
    check "$be: with a greater fence ($f2 > $f)" test -n "$f2" -a "${f2:-0}" -gt "${f:-0}"

    # watch: a line per owner change, exit 0 on INT
    "$SIMBA" watch "$m" --refresh 0.2 > "$W/watch" 2>"$W/watch.err" &
    pid=$!; PIDS+=("$pid")
    sleep 0.5
    "$SIMBA" run "$m" $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; sleep 0.8' "$W/w1"
    "$SIMBA" run "$m" $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; sleep 0.8' "$W/w2"
    # the last change it reports: free again after the second run
    wait_for 5 eval 'tail -1 "$W/watch" | grep -q "owner=- "' || true
    kill -INT $pid
    wait_exit $pid 5
    check "$be: watch exits 0 on INT (got $RC)" test "$RC" -eq 0
    check "$be: watch saw the first owner (fence $(cat "$W/w1"))" grep -q "fence=$(cat "$W/w1") " "$W/watch"
    check "$be: watch saw the second owner (fence $(cat "$W/w2"))" grep -q "fence=$(cat "$W/w2") " "$W/watch"
    check "$be: watch saw the mutex free after the second run" eval 'tail -1 "$W/watch" | grep -q "owner=- "'
    "$SIMBA" get "$m" --json > "$W/wget" 2>/dev/null
    f=$(json_fence "$W/wget")
    check "$be: watch shows the stored fence of the free mutex, as get does ($(tail -1 "$W/watch" | grep -o 'fence=[0-9]*'), get: $f)" \
        eval 'tail -1 "$W/watch" | grep -q "owner=- fence=$f$"'

    # two (three) simba run on one name never overlap; fences increase hold to hold
    : > "$W/iv-$be"
    pids=""
    for w in 1 2 3; do
        ( for k in 1 2 3; do "$SIMBA" run "$m" $FAST -- sh -c "$HOLD" "$W/iv-$be" || echo "run failed: $?" >> "$W/iv-$be.err"; done ) >>"$W/bg.log" 2>&1 &
        pids="$pids $!"; PIDS+=("$!")
    done
    for pid in $pids; do wait_exit $pid 60; done
    check "$be: 9 runs by 3 processes all succeeded" test ! -s "$W/iv-$be.err"
    if no_overlap "$W/iv-$be" 9 > "$W/chk" 2>&1; then ok "$be: holds never overlap, fences increase (9 holds)"; else bad "$be: intervals: $(cat "$W/chk")"; fi
    unset SIMBA_URL
}

# ---- semaphores and read-write locks: simba run --permits N / --shared ----------------------
permits_suite() {
    local be=$1 url=$2 m="sem-$1" rw="rw-$1" p1 p2 f1 f2
    echo "== $be permits ($url)"
    export SIMBA_URL=$url
    rm -f "$W/s1" "$W/s2" "$W/sgo"
    "$SIMBA" run --permits 2 "$m" $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' "$W/s1" "$W/sgo" >>"$W/bg.log" 2>&1 &
    p1=$!; PIDS+=("$p1")
    "$SIMBA" run --permits 2 "$m" $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' "$W/s2" "$W/sgo" >>"$W/bg.log" 2>&1 &
    p2=$!; PIDS+=("$p2")
    if wait_for 10 eval 'test -s "$W/s1" -a -s "$W/s2"'; then ok "$be: two runs of --permits 2 hold at once"; else bad "$be: two runs of --permits 2 did not both run"; fi
    f1=$(cat "$W/s1" 2>/dev/null); f2=$(cat "$W/s2" 2>/dev/null)
    check "$be: each with its own SIMBA_FENCE ($f1, $f2)" test -n "$f1" -a -n "$f2" -a "$f1" != "$f2"
    expect_rc "$be: a third, -n, finds both permits held" 75 "$SIMBA" run --permits 2 "$m" -n -- true
    expect_rc "$be: another N is refused with words" 64 "$SIMBA" run --permits 3 "$m" -w 5 -- true
    check "  naming both" err_has "permits 3 asked, the name has 2"
    expect_rc "$be: get lists both holders" 0 "$SIMBA" get "$m"
    check "  of 2 permits" grep -q "^holders: 2 of 2 permits" "$W/out"
    expect_rc "$be: get --json" 0 "$SIMBA" get "$m" --json
    check "  has both fences" eval 'grep -q "\"fence\":$f1" "$W/out" && grep -q "\"fence\":$f2" "$W/out" && grep -q "\"permits\":2" "$W/out"'
    expect_rc "$be: ls" 0 "$SIMBA" ls
    check "  shows the first to free and +1" grep -q "^$m .*+1 " "$W/out"
    touch "$W/sgo"
    wait_exit $p1 10
    check "$be: first holder exits 0 (got $RC)" test "$RC" -eq 0
    wait_exit $p2 10
    check "$be: second holder exits 0 (got $RC)" test "$RC" -eq 0

    # readers together; a writer waits for them, and a reader after the writer waits for it
    rm -f "$W/r1" "$W/r2" "$W/wr" "$W/r3" "$W/rgo" "$W/wgo"
    "$SIMBA" run --shared "$rw" $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' "$W/r1" "$W/rgo" >>"$W/bg.log" 2>&1 &
    p1=$!; PIDS+=("$p1")
    "$SIMBA" run --shared "$rw" $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' "$W/r2" "$W/rgo" >>"$W/bg.log" 2>&1 &
    p2=$!; PIDS+=("$p2")
    if wait_for 10 eval 'test -s "$W/r1" -a -s "$W/r2"'; then ok "$be: two readers hold at once"; else bad "$be: two readers did not both run"; fi
    expect_rc "$be: a writer, -n, finds readers holding" 75 "$SIMBA" run "$rw" -n -- true
    "$SIMBA" run "$rw" $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' "$W/wr" "$W/wgo" >>"$W/bg.log" 2>&1 &
    local pw=$!; PIDS+=("$pw")
    sleep 1
    "$SIMBA" run --shared "$rw" $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"' "$W/r3" >>"$W/bg.log" 2>&1 &
    local p3=$!; PIDS+=("$p3")
    sleep 2
    check "$be: the writer waits while readers hold" test ! -s "$W/wr"
    check "$be: a reader that came after the waiting writer waits too" test ! -s "$W/r3"
    touch "$W/rgo"
    if wait_for 10 test -s "$W/wr"; then ok "$be: the writer runs once the readers are done"; else bad "$be: the writer never ran"; fi
    sleep 0.5
    check "$be: the later reader still waits for the writer" test ! -s "$W/r3"
    touch "$W/wgo"
    if wait_for 10 test -s "$W/r3"; then ok "$be: then the later reader runs"; else bad "$be: the later reader never ran"; fi
    check "$be: fences in grant order (reader $(cat "$W/r1"), writer $(cat "$W/wr"), reader $(cat "$W/r3"))" \
        eval 'test "$(cat "$W/wr")" -gt "$(cat "$W/r1")" -a "$(cat "$W/wr")" -gt "$(cat "$W/r2")" -a "$(cat "$W/r3")" -gt "$(cat "$W/wr")"'
    for pid in $p1 $p2 $pw $p3; do wait_exit $pid 10; done
    unset SIMBA_URL
}

if want sqlite; then backend_suite sqlite "$SQL"; takeover_suite sqlite "$SQL"; fi
want permits && permits_suite sqlite "$SQL"
if want sqlite; then
    # a loop that never checkpoints (checkpoint = -1) leaves it to this command
    "$SIMBA" -u "$SQL" run ck -- true >/dev/null 2>&1
    expect_rc "checkpoint: once" 0 "$SIMBA" -u "$SQL" checkpoint
    check "  says what it copied" grep -Eq "^([0-9]+ of [0-9]+ WAL frames in the database|not in WAL mode: nothing to copy)$" "$W/out"
    "$SIMBA" -u "$SQL" checkpoint --every 0.1 -v >"$W/ck.out" 2>&1 &
    CK=$!
    check "checkpoint --every: repeats" wait_for 10 eval '[ "$(grep -c "WAL frames" "$W/ck.out")" -ge 3 ]'
    kill -TERM "$CK"
    wait_exit "$CK" 10
    check "  and ends on TERM with status 0" [ "$RC" -eq 0 ]
fi
# ---- SQLite files this user may not write: inspection reads, errors name the access ----------
# File modes bind root only through another user: as root the reader runs as nobody.
if want readonly; then
echo "== readonly"
if [ "$(id -u)" -eq 0 ]; then OTHER="runuser -u nobody --"; NOREAD=600; else OTHER=""; NOREAD=000; fi
chmod 711 "$W"
mkdir -p "$W/ro/db"
cp "$SIMBA" "$W/ro/simba"
chmod 755 "$W/ro" "$W/ro/simba"
RO=sqlite:$W/ro/db/locks.db
"$SIMBA" -u "$RO" run ro $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"' "$W/ro/fence" >/dev/null 2>&1
f=$(cat "$W/ro/fence" 2>/dev/null)
[ "$(id -u)" -eq 0 ] || chmod 555 "$W/ro/db"
chmod $NOREAD "$W/ro/db/locks.db"
expect_rc "readonly: get on a file it may not read" 69 $OTHER "$W/ro/simba" -u "$RO" get ro
check "  names the file and the access" err_has "$W/ro/db/locks.db: no read access for uid [0-9]* (Permission denied; owner uid [0-9]*, mode 0$NOREAD)"
expect_rc "readonly: run on a file it may not read" 69 $OTHER "$W/ro/simba" -u "$RO" run ro -w 1 -- true
check "  names the file and the access" err_has "$W/ro/db/locks.db: no read or write access for uid [0-9]* (Permission denied; owner uid [0-9]*, mode 0$NOREAD)"
chmod 444 "$W/ro/db/locks.db"
check "readonly: no -wal file is left (nobody has the database open)" test ! -e "$W/ro/db/locks.db-wal"
expect_rc "readonly: get on a file it may only read (nobody owns it)" 1 $OTHER "$W/ro/simba" -u "$RO" get ro
check "  shows the stored fence ($f)" grep -q "^fence: $f$" "$W/out"
expect_rc "readonly: ls on a file it may only read" 0 $OTHER "$W/ro/simba" -u "$RO" ls
check "  lists it with its fence" grep -q "^ro .* $f " "$W/out"
check "  and writes nothing there" test ! -e "$W/ro/db/locks.db-wal"
# watch never contends: it follows the name on a file it may only read (read anew each --refresh)
$OTHER "$W/ro/simba" -u "$RO" watch ro --refresh 0.2 >"$W/ro/watch" 2>"$W/ro/watch.err" &
wp=$!; PIDS+=("$wp")
check "readonly: watch prints the free name at start, with its stored fence ($f)" wait_for 5 grep -q " ro owner=- fence=$f$" "$W/ro/watch"
if [ "$(id -u)" -eq 0 ]; then
    chmod 644 "$W/ro/db/locks.db"
    "$SIMBA" -u "$RO" run ro $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; sleep 1' "$W/ro/wfence" >>"$W/bg.log" 2>&1
    chmod 444 "$W/ro/db/locks.db"
    check "readonly: watch saw the owner a writer put there (fence $(cat "$W/ro/wfence" 2>/dev/null))" \
        wait_for 5 grep -q " ro owner=.* fence=$(cat "$W/ro/wfence" 2>/dev/null) " "$W/ro/watch"
    f=$(cat "$W/ro/wfence" 2>/dev/null)
fi
# TERM to simba itself (as nobody it runs under runuser, which would report the signal)
wc=$(pgrep -P $wp -x simba | head -n 1)
kill -TERM "${wc:-$wp}" 2>/dev/null; wait_exit $wp 5
check "readonly: watch ends 0 on TERM (got $RC; $(head -c 200 "$W/ro/watch.err"))" test "$RC" -eq 0
expect_rc "readonly: release on a file it may only read" 69 $OTHER "$W/ro/simba" -u "$RO" release ro --fence "${f:-0}"
check "  says it is read-only and why" err_has "readonly database ([0-9]*): $W/ro/db/locks.db: no write access for uid"
expect_rc "readonly: run on a file it may only read" 69 $OTHER "$W/ro/simba" -u "$RO" run ro -w 1 -- true
check "  names the file and the access" err_has "$W/ro/db/locks.db: no write access for uid"
if [ "$(id -u)" -eq 0 ]; then
    # a holder writes (its -wal and -shm exist): the reader reads through them
    chmod 644 "$W/ro/db/locks.db"
    rm -f "$W/ro/go"
    "$SIMBA" -u "$RO" run ro $FAST -- sh -c 'echo $SIMBA_FENCE > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' "$W/ro/fence2" "$W/ro/go" >>"$W/bg.log" 2>&1 &
    hp=$!; PIDS+=("$hp")
    wait_for 10 test -s "$W/ro/fence2" || true
    expect_rc "readonly: get while a holder writes" 0 $OTHER "$W/ro/simba" -u "$RO" get ro --json
    check "  shows the holder's fence ($(cat "$W/ro/fence2" 2>/dev/null))" test "$(json_fence "$W/out")" = "$(cat "$W/ro/fence2" 2>/dev/null)"
    touch "$W/ro/go"; wait_exit $hp 10
fi
chmod 755 "$W/ro/db"; chmod 644 "$W/ro/db/locks.db"
fi

want redis && backend_suite redis "$RED"
want zk && backend_suite zk "$ZK"
want permits && permits_suite zk "$ZK"

# ---- a new Redis server: the quarantine said in words, init, the lease bound ---------------
if want fresh; then
    # --restart: nothing declares this server empty, as with a redis-server a user starts
    if ! sh scripts/redis-start.sh "$FPORT" "$W/redis-fresh" --restart >"$W/redis-fresh.log" 2>&1; then
        bad "redis-server on $FPORT: $(tail -3 "$W/redis-fresh.log")"
    else
        FR=redis://127.0.0.1:$FPORT
        expect_rc "fresh: an undeclared server waits a quarantine (-w 2: the backend refused every ask)" 69 "$SIMBA" -u "$FR" run q -w 2 -- true
        check "  and says why" err_has "data-loss quarantine"
        check "  with the causes" err_has "first use"
        expect_rc "fresh: init refused once simba keys exist" 1 "$SIMBA" -u "$FR" init
        check "  names a key" err_has "holds simba keys (db 0 key simba:alive)"
        redis-cli -p "$FPORT" FLUSHALL >/dev/null
        expect_rc "fresh: init of an empty server" 0 "$SIMBA" -u "$FR" init
        check "  says so" grep -q "declared empty: simba:fresh = " "$W/out"
        rid=$(redis-cli -p "$FPORT" INFO server | tr -d '\r' | sed -n 's/^run_id://p')
        check "  in every db (db 15)" [ "$(redis-cli -p "$FPORT" -n 15 GET simba:fresh)" = "$rid" ]
        t0=$(now_ns)
        expect_rc "fresh: after init the first lock waits no quarantine" 0 "$SIMBA" -u "$FR" run q -- true
        check "  (under 3 s: $(( ($(now_ns) - t0) / 1000000 )) ms)" [ $(( ($(now_ns) - t0) / 1000000 )) -lt 3000 ]
        expect_rc "fresh: get --json" 1 "$SIMBA" -u "$FR" get q --json
        check "  shows the backend's max_lease_ms" grep -q '"max_lease_ms":60000' "$W/out"
        expect_rc "fresh: run --ttl over max_lease_ms is a usage error" 64 "$SIMBA" -u "$FR" run q --ttl 100 -- true
        check "  with the reason" err_has "ttl_ms + transition_ms = 106000 exceeds the redis backend's max_lease_ms = 60000"
        expect_rc "fresh: init --force over existing keys" 0 "$SIMBA" -u "$FR" init --force
        check "  says it was forced" grep -q "forced over existing simba keys" "$W/out"
        expect_rc "init: for Redis only" 64 "$SIMBA" -u "$SQL" init
        expect_rc "init: takes no NAME" 64 "$SIMBA" -u "$FR" init q
        expect_rc "--force is for init" 64 "$SIMBA" -u "$FR" get q --force
        expect_rc "init: unreachable redis is a backend error" 69 "$SIMBA" -u redis://127.0.0.1:$DEAD init
        sh scripts/redis-stop.sh "$W/redis-fresh" >/dev/null 2>&1
    fi
fi

# ---- PostgreSQL: its URL, then the same suite ---------------------------------------------
PGU="postgres://postgres@127.0.0.1:$PGPORT_CLI/postgres?table=cli_locks"
pg_up() { # starts PostgreSQL once (sections pg and matrix)
    [ -s "$W/pg/datadir" ] && return 0
    sh scripts/pg-start.sh "$PGPORT_CLI" "$W/pg" >"$W/pg.log" 2>&1 && return 0
    bad "PostgreSQL on $PGPORT_CLI: $(tail -3 "$W/pg.log")"; return 1
}
if want pg; then
    if pg_up; then
        export PGPASSWORD=simba
        expect_rc "pg: password in the URL refused" 64 "$SIMBA" -u "postgres://postgres:simba@127.0.0.1:$PGPORT_CLI" get x
        check "  points to PGPASSWORD" err_has PGPASSWORD
        expect_rc "pg: host name refused (no resolver in the loop)" 64 "$SIMBA" -u "postgres://localhost:$PGPORT_CLI" get x
        check "  says numeric" err_has numeric
        expect_rc "pg: port out of range" 64 "$SIMBA" -u "postgresql://127.0.0.1:70000" get x
        expect_rc "pg: unknown parameter" 64 "$SIMBA" -u "postgres://127.0.0.1:$PGPORT_CLI/postgres?sslmod=x" get x
        check "  names the known ones" err_has "table, hostaddr, sslmode"
        expect_rc "pg: a bad sslmode" 64 "$SIMBA" -u "postgres://127.0.0.1:$PGPORT_CLI/postgres?table=t&sslmode=x" get x
        check "  names the modes" err_has "verify-full"
        expect_rc "pg: get before the table exists exits 1" 1 "$SIMBA" -u "$PGU" get x
        expect_rc "pg: wrong password is a refusal" 77 env PGPASSWORD=wrong "$SIMBA" -u "$PGU" get x
        check "  the error line names the user, not the password" eval 'err_has "postgres://postgres@127.0.0.1:$PGPORT_CLI/" && ! err_has wrong'
        denied_suite pg "$PGU" PGPASSWORD
        expect_rc "pg: run -n, nothing listens" 69 "$SIMBA" -u "postgres://127.0.0.1:$DEAD" run x -n -- true
        check "  says the backend could not be reached, not a timeout" eval 'err_has "could not be reached" && ! err_has "timed out"' 
        expect_rc "pg: unreachable server is a backend error" 69 "$SIMBA" -u "postgres://127.0.0.1:$DEAD" get x
        backend_suite pg "$PGU"
        takeover_suite pg "$PGU"
        PGPASSWORD=simba psql -h 127.0.0.1 -p "$PGPORT_CLI" -U postgres -qXc "CREATE ROLE cli_nogrant LOGIN PASSWORD 'nogrant'" postgres >/dev/null 2>&1
        expect_rc "pg: get as a role without grants on the table" 77 env PGPASSWORD=nogrant "$SIMBA" -u "postgres://cli_nogrant@127.0.0.1:$PGPORT_CLI/postgres?table=cli_locks" get x
        check "  says the server's words" err_has "permission denied"
        t1=$(now_ns)
        expect_rc "pg: run as a role that may not create its tables" 77 env PGPASSWORD=nogrant "$SIMBA" -u "postgres://cli_nogrant@127.0.0.1:$PGPORT_CLI/postgres?table=cli_nogrant" run x -- true
        t2=$(( ($(now_ns) - t1) / 1000000 ))
        check "  at once ($t2 ms), with the server's words" eval 'elapsed_ok $t2 0 3000 && err_has "permission denied"'
        check "pg: the table of the URL holds the rows" test "$(PGPASSWORD=simba psql -h 127.0.0.1 -p "$PGPORT_CLI" -U postgres -Atc 'SELECT count(*) FROM cli_locks' postgres 2>/dev/null)" -ge 1
        unset PGPASSWORD
    fi
fi

# ---- MySQL / MariaDB: its URL, a refusal at once, then the same suite -------------------------
MYU="mysql://root@127.0.0.1:$MYPORT_CLI/simba?table=cli_locks"
my_up() { # starts MariaDB once (sections mysql and matrix)
    [ -s "$W/mysql/mysql.pid" ] && return 0
    sh scripts/mysql-start.sh "$MYPORT_CLI" "$W/mysql" >"$W/mysql.log" 2>&1 && return 0
    bad "MariaDB on $MYPORT_CLI: $(tail -3 "$W/mysql.log")"; return 1
}
my_sql() { mariadb --no-defaults -h 127.0.0.1 -P "$MYPORT_CLI" -uroot -psimba -N -B -e "$1" simba 2>/dev/null; }
if want mysql; then
    if my_up; then
        export MYSQL_PWD=simba
        expect_rc "mysql: host name refused (no resolver in the loop)" 64 "$SIMBA" -u "mysql://root@localhost:$MYPORT_CLI/simba" get x
        check "  says numeric" err_has numeric
        expect_rc "mysql: no /DB" 64 "$SIMBA" -u "mysql://root@127.0.0.1:$MYPORT_CLI" get x
        expect_rc "mysql: port out of range" 64 "$SIMBA" -u "mysql://127.0.0.1:70000/simba" get x
        expect_rc "mysql: unknown parameter" 64 "$SIMBA" -u "mysql://127.0.0.1:$MYPORT_CLI/simba?tabel=x" get x
        expect_rc "mysql: a bad table name" 64 "$SIMBA" -u "mysql://root@127.0.0.1:$MYPORT_CLI/simba?table=a-b" get x
        expect_rc "mysql: init is for Redis" 64 "$SIMBA" -u "$MYU" init
        check "  says MySQL needs no declaration" err_has "MySQL"
        expect_rc "mysql: get before the table exists exits 1" 1 "$SIMBA" -u "$MYU" get x
        expect_rc "mysql: the password in the URL" 1 env -u MYSQL_PWD "$SIMBA" -u "mysql://root:simba@127.0.0.1:$MYPORT_CLI/simba?table=cli_locks" get x
        expect_rc "mysql: wrong password is a refusal" 77 env MYSQL_PWD=wrong "$SIMBA" -u "$MYU" get x
        check "  the error line names the user, not the password" eval 'err_has "mysql://root@127.0.0.1:$MYPORT_CLI/" && err_has "Access denied" && ! err_has wrong'
        denied_suite mysql "$MYU" MYSQL_PWD
        expect_rc "mysql: an unknown database is a refusal" 77 "$SIMBA" -u "mysql://root@127.0.0.1:$MYPORT_CLI/nodb" get x
        check "  says the server's words" err_has "Unknown database"
        expect_rc "mysql: run -n, nothing listens" 69 "$SIMBA" -u "mysql://127.0.0.1:$DEAD/simba" run x -n -- true
        expect_rc "mysql: run with the password from MYSQL_PWD" 0 "$SIMBA" -u "$MYU" run x -- true
        my_sql "CREATE USER IF NOT EXISTS cli_nogrant@'%' IDENTIFIED BY 'nogrant'" >/dev/null
        t1=$(now_ns)
        expect_rc "mysql: run as a user without grants" 77 env MYSQL_PWD=nogrant "$SIMBA" -u "mysql://cli_nogrant@127.0.0.1:$MYPORT_CLI/simba" run x -- true
        t2=$(( ($(now_ns) - t1) / 1000000 ))
        check "  at once ($t2 ms), with the server's words" eval 'elapsed_ok $t2 0 3000 && err_has "Access denied"'
        check "mysql: the table of the URL holds the rows" test "$(my_sql 'SELECT COUNT(*) FROM cli_locks')" -ge 1
        MYS="mysql://root@localhost/simba?table=cli_locks&socket=$(cd "$W/mysql" && pwd)/sock"
        expect_rc "mysql: run over the unix socket" 0 "$SIMBA" -u "$MYS" run sock -- true
        expect_rc "mysql: get over the unix socket" 1 "$SIMBA" -u "$MYS" get sock
        check "  shows the stored fence of that run" eval 'out_has "owner: -" && out_has "fence: [1-9]"'
        expect_rc "mysql: a relative socket path refused" 64 "$SIMBA" -u "mysql://root@localhost/simba?socket=sock" get x
        expect_rc "mysql: socket= with a numeric HOST refused" 64 "$SIMBA" -u "mysql://root@127.0.0.1/simba?socket=/tmp/s" get x
        check "  says localhost" err_has localhost
        expect_rc "mysql: run on three request connections" 0 "$SIMBA" -u "$MYU&connections=3" run pool -- true
        expect_rc "mysql: get on three request connections" 1 "$SIMBA" -u "$MYU&connections=3" get pool
        check "  shows the stored fence of that run" eval 'out_has "owner: -" && out_has "fence: [1-9]"'
        expect_rc "mysql: connections=0 refused" 64 "$SIMBA" -u "$MYU&connections=0" get x
        check "  names the range" err_has "connections must be 1..64"
        expect_rc "mysql: connections=65 refused" 64 "$SIMBA" -u "$MYU&connections=65" get x
        expect_rc "mysql: connections=x refused" 64 "$SIMBA" -u "$MYU&connections=x" get x
        takeover_suite mysql "$MYU"
        unset SIMBA_URL
        unset MYSQL_PWD
    fi
fi

# ---- signals (SQLite) ------------------------------------------------------------------------
if want signals; then
echo "== signals"
export SIMBA_URL=$SQL
rm -f "$W/sig" "$W/ready"
"$SIMBA" run sigs $FAST -- sh -c 'for s in USR1 USR2 HUP INT QUIT; do trap "echo $s >> $0" $s; done; trap "echo TERM >> $0; exit 9" TERM
    echo $$ > $1.pg; echo ready > $1; while :; do sleep 0.05; done' "$W/sig" "$W/ready" >>"$W/bg.log" 2>&1 &
pid=$!; PIDS+=("$pid")
wait_for 10 test -s "$W/ready" || true
kill -USR1 $pid
check "USR1 to simba reaches the command" wait_for 5 grep -q USR1 "$W/sig"
for s in HUP USR2 INT QUIT; do
    kill -$s $pid
    check "$s to simba reaches the command" wait_for 5 grep -q "^$s" "$W/sig"
done
check "simba survives forwarded signals" alive $pid
kill -TERM $pid
wait_exit $pid 10
check "TERM reaches the command, simba exits with its status 9 (got $RC)" test "$RC" -eq 9
expect_rc "released after the signalled command exits" 1 "$SIMBA" get sigs
# a signal while still waiting for the lock: no command yet, simba exits 128+N
rm -f "$W/go"
"$SIMBA" run sigs $FAST -- sh -c 'while [ ! -e "$0" ]; do sleep 0.05; done' "$W/go" >>"$W/bg.log" 2>&1 &
hp=$!; PIDS+=("$hp")
wait_for 10 eval '"$SIMBA" get sigs >/dev/null 2>&1' || true
"$SIMBA" run sigs -- sh -c 'echo ran > "$0"' "$W/nope" >>"$W/bg.log" 2>&1 &
pid=$!; PIDS+=("$pid")
sleep 0.5
kill -INT $pid
wait_exit $pid 5
check "INT while waiting: simba exits 130 (got $RC)" test "$RC" -eq 130
check "  and never ran the command" test ! -e "$W/nope"
touch "$W/go"; wait_exit $hp 10
# a run forced out by release --fence while its command takes its grace to end: it leaves,
# and never takes the name again on the way out (the store keeps the forced-out fence)
rm -f "$W/fo" "$W/fo.out"
"$SIMBA" run forced --ttl 1 --transition 3 --grace 2 -- sh -c 'echo $$ > $0.pg; trap "sleep 1.5; exit 0" TERM; echo $SIMBA_FENCE > $0; while :; do sleep 0.05; done' "$W/fo" >>"$W/bg.log" 2>&1 &
pid=$!; PIDS+=("$pid")
wait_for 10 test -s "$W/fo" || true
f=$(cat "$W/fo" 2>/dev/null)
expect_rc "release --fence of a running command" 0 "$SIMBA" release forced --fence "${f:-0}"
for i in 1 2 3 4 5 6 7 8; do "$SIMBA" get forced --json >>"$W/fo.out" 2>&1; sleep 0.2; done
wait_exit $pid 10
check "  the forced-out run exits 76 (got $RC)" test "$RC" -eq 76
"$SIMBA" get forced --json >>"$W/fo.out" 2>&1
check "  it never took the name again while its command ended (fence stays $f)" \
    eval '! grep -q "\"fence\":$((f + 1))" "$W/fo.out" && tail -n 1 "$W/fo.out" | grep -q "\"owner\":null,\"fence\":$f,"'
# from a terminal (script(1) gives one): the command is the foreground job and may read it
printf 'hello\n' | timeout 20 script -qec "$SIMBA -u $SQL run tty $FAST -- sh -c 'echo \$\$ > $W/tty.pg; read x; echo got:\$x; exit 5'; echo simba-rc=\$?" /dev/null > "$W/tty" 2>&1
check "a command run from a terminal reads it" grep -q "got:hello" "$W/tty"
check "  simba exits with its status and the shell gets the terminal back" grep -q "simba-rc=5" "$W/tty"
grep -q "simba-rc=" "$W/tty" || cleanup_groups   # a stuck command must not outlive the test
fi

# ---- elect ----------------------------------------------------------------------------------
if want elect; then
echo "== elect"
: > "$W/leaders"
LEAD='echo $$ > "$0.pg.$$"; echo "$SIMBA_FENCE $$" >> "$0"; exec sleep 30'
"$SIMBA" elect boss $FAST -- sh -c "$LEAD" "$W/leaders" >>"$W/bg.log" 2>&1 &
e1=$!; PIDS+=("$e1")
wait_for 10 test -s "$W/leaders" || true
"$SIMBA" elect boss $FAST -- sh -c "$LEAD" "$W/leaders" >>"$W/bg.log" 2>&1 &
e2=$!; PIDS+=("$e2")
sleep 0.5
check "elect: one leader while both run" test "$(wc -l < "$W/leaders")" -eq 1
kill -TERM $e1
wait_exit $e1 10
check "elect: TERM stops the leader's command; elect exits with its status 143 (got $RC)" test "$RC" -eq 143
check "elect: the other takes over" wait_for 10 eval 'test $(wc -l < "$W/leaders") -eq 2'
f=$(sed -n 2p "$W/leaders" | cut -d' ' -f1)
"$SIMBA" release boss --fence "$f" >/dev/null 2>&1
check "elect: after losing leadership it leads again (new command, new fence)" wait_for 10 eval 'test $(wc -l < "$W/leaders") -eq 3'
check "elect: fences increase" test "$(cut -d' ' -f1 "$W/leaders" | sort -n | tr '\n' ' ')" = "$(cut -d' ' -f1 "$W/leaders" | tr '\n' ' ')"
check "elect: the old command was stopped" eval '! kill -0 $(sed -n 2p "$W/leaders" | cut -d" " -f2) 2>/dev/null'
check "elect: still running without --once" alive $e2
f=$(sed -n 3p "$W/leaders" | cut -d' ' -f1)
kill -TERM $e2; wait_exit $e2 10
"$SIMBA" elect boss --once $FAST -- sh -c "$LEAD" "$W/leaders" >>"$W/bg.log" 2>&1 &
e3=$!; PIDS+=("$e3")
wait_for 10 eval 'test $(wc -l < "$W/leaders") -eq 4' || true
f=$(sed -n 4p "$W/leaders" | cut -d' ' -f1)
"$SIMBA" release boss --fence "$f" >/dev/null 2>&1
wait_exit $e3 10
check "elect --once: exits 76 when leadership is lost (got $RC)" test "$RC" -eq 76
unset SIMBA_URL
fi

# ---- statistics: simba get asks the simba run that holds the mutex --------------------------
# json_num FILE KEY: the number after "KEY": in the stats object of a get --json line
json_num() { sed -n 's/.*"stats":{.*"'"$2"'":\(-\{0,1\}[0-9]*\).*/\1/p' "$1"; }
# stored_fence FILE: the fence get read from storage (the first "fence" of the line)
stored_fence() { sed -n 's/^{"mutex":"[^"]*","owner":"[^"]*","fence":\([0-9]*\).*/\1/p' "$1"; }
if want stats; then
echo "== stats"
export SIMBA_URL=$SQL
rm -f "$W"/st-*
# the command asks twice, 0.3 s apart, and records what else it sees
"$SIMBA" run st-a $FAST --stats-file "$W/st-a.prom" -- sh -c '
    S=$0; D=$1
    echo "$SIMBA_FENCE" > "$D/st-fence"; echo "$SIMBA_STATS_SOCKET" > "$D/st-sock"
    stat -c %a "$SIMBA_STATS_SOCKET" > "$D/st-mode"; stat -c %a "$(dirname "$SIMBA_STATS_SOCKET")" > "$D/st-dmode"
    "$S" get st-a --json > "$D/st-j1"; sleep 0.3; "$S" get st-a --json > "$D/st-j2"
    "$S" get st-a > "$D/st-text"
    "$S" get st-other --json > "$D/st-other"; echo $? > "$D/st-other.rc"
    "$S" get st-other --stats "$SIMBA_STATS_SOCKET" > /dev/null 2> "$D/st-wrong.err"; echo $? > "$D/st-wrong.rc"
    "$S" -u "$2" get st-a --stats "$SIMBA_STATS_SOCKET" > /dev/null 2> "$D/st-wrongbe.err"; echo $? > "$D/st-wrongbe.rc"
    exit 3' "$SIMBA" "$W" "$RED" >>"$W/bg.log" 2>&1
RC=$?
check "stats: run exits with the command's status (got $RC)" test "$RC" -eq 3
check "stats: the command gets SIMBA_STATS_SOCKET" test -s "$W/st-sock"
check "stats: socket mode 600, its directory 700 ($(cat "$W/st-mode" "$W/st-dmode" 2>/dev/null | tr '\n' ' '))" \
    test "$(cat "$W/st-mode" 2>/dev/null)" = 600 -a "$(cat "$W/st-dmode" 2>/dev/null)" = 700
check "stats: get --json inside run shows acquisitions 1" test "$(json_num "$W/st-j1" acquisitions)" = 1
check "stats:   owner true, releases 0" grep -q '"owner":true,.*"releases":0' "$W/st-j1"
f=$(cat "$W/st-fence" 2>/dev/null)
check "stats:   the holder's fence is SIMBA_FENCE ($f) and the stored one" \
    test -n "$f" -a "$(json_num "$W/st-j1" fence)" = "$f" -a "$(stored_fence "$W/st-j1")" = "$f"
h1=$(json_num "$W/st-j1" held_ms); h2=$(json_num "$W/st-j2" held_ms)
check "stats:   the hold time grows ($h1 ms, then $h2 ms; 0.3 s apart)" test -n "$h1" -a -n "$h2" -a "${h2:-0}" -ge $(( ${h1:-0} + 250 ))
check "stats: plain get shows them too" grep -q "^  acquisitions: 1$" "$W/st-text"
check "stats: get of another mutex leaves them out (exit 1, no stats)" \
    eval 'test "$(cat "$W/st-other.rc")" = 1 && ! grep -q stats "$W/st-other"'
check "stats: --stats SOCKET of another mutex is refused (exit 64)" test "$(cat "$W/st-wrong.rc" 2>/dev/null)" = 64
check "stats:   with words" grep -q "belongs to mutex 'st-a', not 'st-other'" "$W/st-wrong.err"
check "stats: --stats SOCKET with another backend is refused (exit 64)" test "$(cat "$W/st-wrongbe.rc" 2>/dev/null)" = 64
check "stats:   with words" grep -q "holds 'st-a' on sqlite:.* not on redis://" "$W/st-wrongbe.err"
s=$(cat "$W/st-sock" 2>/dev/null)
check "stats: the socket and its directory are gone after exit" test -n "$s" -a ! -e "$s" -a ! -e "$(dirname "${s:-/nonexistent/x}")"
expect_rc "stats: --stats with a socket nobody serves" 69 "$SIMBA" get st-a --stats "$s"
check "  says why" err_has "No such file"
check "stats: --stats-file has the Prometheus counters" grep -q '^simba_acquisitions_total{mutex="st-a",contender=".*"} 1$' "$W/st-a.prom"
check "stats:   the release at exit" grep -q '^simba_releases_total{.*reason="stopped"} 1$' "$W/st-a.prom"
check "stats:   and the exit status" grep -q '^simba_exit_status{.*} 3$' "$W/st-a.prom"
check "stats: no temporary file left" eval '! ls "$W"/st-a.prom.tmp.* >/dev/null 2>&1'
# elect: the statistics span leaderships (a forced release is a step-down, then a new term)
: > "$W/st-e"
"$SIMBA" elect st-e $FAST -- sh -c 'echo $$ > "$1.pg.$$"; "$0" get st-e --json >> "$1"; exec sleep 30' "$SIMBA" "$W/st-e" >>"$W/bg.log" 2>&1 &
e1=$!; PIDS+=("$e1")
wait_for 10 test -s "$W/st-e" || true
f=$(stored_fence "$W/st-e")
"$SIMBA" release st-e --fence "${f:-0}" >/dev/null 2>&1
wait_for 10 eval 'test $(wc -l < "$W/st-e") -ge 2' || true
sed -n 2p "$W/st-e" > "$W/st-e2"
check "stats: elect's second term sees acquisitions 2" test "$(json_num "$W/st-e2" acquisitions)" = 2
check "stats:   one step-down, one release" test "$(json_num "$W/st-e2" step_downs)" = 1 -a "$(json_num "$W/st-e2" releases)" = 1
check "stats:   the release reason is refused (the renewal found another state)" grep -q '"refused":1' "$W/st-e2"
check "stats:   and the new fence" test -n "$f" -a "$(json_num "$W/st-e2" fence)" -gt "${f:-0}"
kill -TERM $e1; wait_exit $e1 10
# on Redis: the same, through its own URL
SIMBA_URL=$RED "$SIMBA" run st-r $FAST -- sh -c '"$0" get st-r --json > "$1"' "$SIMBA" "$W/st-r" >>"$W/bg.log" 2>&1
check "stats: on redis too (acquisitions 1, owner true)" eval 'test "$(json_num "$W/st-r" acquisitions)" = 1 && grep -q "\"owner\":true" "$W/st-r"'
# the socket never holds up renewals: 200 clients while the lease (1 s) is renewed
"$SIMBA" run st-b $FAST -- sh -c 'i=0; while [ $i -lt 200 ]; do "$0" get st-b --json > /dev/null || exit 9; i=$((i+1)); done; "$0" get st-b --json > "$1"' "$SIMBA" "$W/st-b" >>"$W/bg.log" 2>&1
RC=$?
check "stats: 200 gets during a run (exit $RC), $(json_num "$W/st-b" renewals) renewals, none failed, still acquisitions 1" \
    eval 'test $RC -eq 0 && test "$(json_num "$W/st-b" renewals)" -ge 1 && test "$(json_num "$W/st-b" renewals_failed)" = 0 && test "$(json_num "$W/st-b" acquisitions)" = 1'
# a stopped holder: get gives up within its 2 s and says so, and the holder carries on
rm -f "$W/st-s" "$W/st-s.go"
"$SIMBA" run st-s -- sh -c 'echo "$SIMBA_STATS_SOCKET" > "$0"; while [ ! -e "$0.go" ]; do sleep 0.05; done' "$W/st-s" >>"$W/bg.log" 2>&1 &
hp=$!; PIDS+=("$hp")
wait_for 10 test -s "$W/st-s" || true
kill -STOP $hp
t1=$(now_ns)
expect_rc "stats: --stats of a stopped holder" 69 "$SIMBA" get st-s --stats "$(cat "$W/st-s")"
t2=$(( ($(now_ns) - t1) / 1000000 ))
check "  says it got no answer" err_has "no answer within 2 s"
check "  gave up after about 2 s ($t2 ms)" test $t2 -ge 1900 -a $t2 -le 5000
pids=""; t1=$(now_ns)
for k in $(seq 24); do "$SIMBA" get st-s --stats "$(cat "$W/st-s")" >/dev/null 2>&1 & pids="$pids $!"; done
for pid in $pids; do wait_exit $pid 8; [ $RC -eq 124 ] && break; done
t2=$(( ($(now_ns) - t1) / 1000000 ))
check "stats: 24 gets at once on a stopped holder (its backlog full) all give up ($t2 ms)" test $RC -ne 124 -a $t2 -le 6000
kill -CONT $hp
expect_rc "stats: the holder answers again after CONT" 0 "$SIMBA" get st-s --stats "$(cat "$W/st-s")" --json
check "  with its statistics" grep -q '"acquisitions":1' "$W/out"
touch "$W/st-s.go"; wait_exit $hp 10
check "stats: the stopped holder still exits 0 (got $RC)" test "$RC" -eq 0
expect_rc "stats: --stats-file in a missing directory is refused before anything runs" 64 "$SIMBA" run st-c --stats-file "$W/nodir/x.prom" -- touch "$W/st-c-ran"
check "  names the directory" err_has "cannot write in directory '$W/nodir'"
check "  and the command did not run" test ! -e "$W/st-c-ran"
expect_rc "stats: --stats is for get" 64 "$SIMBA" ls --stats "$W/x"
expect_rc "stats: --stats-file is for run and elect" 64 "$SIMBA" get st-c --stats-file "$W/x"
check "stats: help documents SIMBA_STATS_SOCKET and --stats-file" eval '"$SIMBA" --help | grep -q SIMBA_STATS_SOCKET && "$SIMBA" --help | grep -q -- "--stats-file FILE"'
expect_rc "stats: --no-stats-socket: no SIMBA_STATS_SOCKET" 0 env SIMBA_STATS_SOCKET=/nonexistent "$SIMBA" run st-c --no-stats-socket $FAST -- sh -c 'test -z "${SIMBA_STATS_SOCKET:-}"'
unset SIMBA_URL
fi

# ---- partition: the holder's command dies before anyone else can take the lock -------------
# part BE URL_VIA_PROXY URL_DIRECT TARGET_PORT
part() {
    local be=$1 pport pp hp bp RC tk tb
    echo "== partition $be"
    rm -f "$W/pport" "$W/hb-$be" "$W/b-$be"
    "$PROXY" "$4" "$W/pport" 2>/dev/null &
    pp=$!; PIDS+=("$pp")
    wait_for 5 test -s "$W/pport" || { bad "$be: fault proxy did not start"; return; }
    pport=$(cat "$W/pport")
    "$SIMBA" -u "${2//PPORT/$pport}" run part $FAST --stats-file "$W/part-$be.prom" -- sh -c 'echo $$ > "$0.pg"; trap "echo T $(date +%s%N) >> $0; exit 0" TERM
        while :; do echo H $(date +%s%N) >> $0; sleep 0.02; done' "$W/hb-$be" >"$W/part-$be.err" 2>&1 &
    hp=$!; PIDS+=("$hp")
    wait_for 10 test -s "$W/hb-$be" || { bad "$be: holder via the proxy never ran"; return; }
    "$SIMBA" -u "$3" run part -w 20 $FAST -- sh -c 'date +%s%N > "$0"' "$W/b-$be" >>"$W/bg.log" 2>&1 &
    bp=$!; PIDS+=("$bp")
    sleep 0.3
    kill -STOP $pp
    wait_exit $hp 15
    check "$be: partitioned holder exits 76 (got $RC)" test "$RC" -eq 76
    check "$be: partitioned holder's command is gone" eval '! kill -0 $(cat "$W/hb-$be.pg") 2>/dev/null'
    check "$be: its --stats-file counts one step-down ($(grep -o 'reason="[a-z]*"} 1' "$W/part-$be.prom" 2>/dev/null | tr '\n' ' ')) and exit 76" \
        eval 'grep -q "^simba_step_downs_total{.*} 1$" "$W/part-$be.prom" && grep -q "^simba_exit_status{.*} 76$" "$W/part-$be.prom"'
    cleanup_groups
    wait_exit $bp 20
    check "$be: the other run gets the lock (got $RC)" test "$RC" -eq 0
    tk=$(tail -1 "$W/hb-$be" | cut -d' ' -f2)
    tb=$(cat "$W/b-$be" 2>/dev/null)
    check "$be: holder's command ended before the other's began ($(( (${tb:-0} - ${tk:-0}) / 1000000 )) ms between)" test -n "$tb" -a -n "$tk" -a "${tb:-0}" -gt "${tk:-0}"
    kill -CONT $pp; kill -TERM $pp; wait $pp 2>/dev/null
}
# part_wait BE URL_VIA_PROXY URL_DIRECT TARGET_PORT: a waiter whose backend stops answering
# ends with 69 after --connect-timeout, while the holder (connected directly) carries on
part_wait() {
    local be=$1 pport pp hp wp t1 t2
    echo "== partition of a waiter $be"
    rm -f "$W/pport" "$W/pw-$be" "$W/pw-$be.go" "$W/pw-$be.ran"
    "$PROXY" "$4" "$W/pport" 2>/dev/null &
    pp=$!; PIDS+=("$pp")
    wait_for 5 test -s "$W/pport" || { bad "$be: fault proxy did not start"; return; }
    pport=$(cat "$W/pport")
    "$SIMBA" -u "$3" run pw $FAST -- sh -c 'echo up > "$0"; while [ ! -e "$0.go" ]; do sleep 0.05; done' "$W/pw-$be" >>"$W/bg.log" 2>&1 &
    hp=$!; PIDS+=("$hp")
    wait_for 10 test -s "$W/pw-$be" || { bad "$be: holder never ran"; return; }
    "$SIMBA" -u "${2//PPORT/$pport}" run pw $FAST --connect-timeout 2 -- touch "$W/pw-$be.ran" >/dev/null 2>"$W/pw-$be.err" &
    wp=$!; PIDS+=("$wp")
    sleep 1
    kill -STOP $pp
    t1=$(now_ns)
    wait_exit $wp 30
    t2=$(( ($(now_ns) - t1) / 1000000 ))
    check "$be: the waiter cut off from its backend exits 69 (got $RC, $t2 ms after the cut)" test "$RC" -eq 69
    check "  says why ($(tail -1 "$W/pw-$be.err"))" grep -q "no answer from the backend for 2.* s (--connect-timeout 2)" "$W/pw-$be.err"
    check "  never ran its command" test ! -e "$W/pw-$be.ran"
    check "$be: the holder still runs" alive $hp
    touch "$W/pw-$be.go"
    wait_exit $hp 10
    check "$be: and exits 0 (got $RC)" test "$RC" -eq 0
    kill -CONT $pp; kill -TERM $pp; wait $pp 2>/dev/null
}
if want partition; then
    part redis "redis://127.0.0.1:PPORT" "redis://127.0.0.1:$RPORT" "$RPORT"
    part zk "zk://127.0.0.1:PPORT/simba-cli" "$ZK" "$ZPORT"
    part_wait redis "redis://127.0.0.1:PPORT" "redis://127.0.0.1:$RPORT" "$RPORT"
    part_wait zk "zk://127.0.0.1:PPORT/simba-cli" "$ZK" "$ZPORT"
fi

# ---- every command on every primitive and backend, under ASan and valgrind ------------------
if want matrix; then
    . tests/cli_matrix.sh
    mx_want() { case " ${SIMBA_CLI_MATRIX:-sqlite redis zk pg mysql} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
    mx_want sqlite && matrix_suite sqlite "$SQL"
    mx_want redis && matrix_suite redis "$RED"
    mx_want zk && matrix_suite zk "$ZK"
    if mx_want pg && pg_up; then export PGPASSWORD=simba; matrix_suite pg "$PGU"; unset PGPASSWORD; fi
    if mx_want mysql && my_up; then export MYSQL_PWD=simba; matrix_suite mysql "$MYU"; unset MYSQL_PWD; fi
fi

echo "test_cli took $((SECONDS - T0)) s"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
