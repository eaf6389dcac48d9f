#!/usr/bin/env bash
# test_elect.sh -- leadership values across processes, as a user runs them. On each backend
# (SQLite, Redis, ZooKeeper, PostgreSQL: servers started here on loopback ports, stopped by PID
# on exit) three `simba elect --value` processes contend and an observer (`simba watch --json`)
# follows the leader's value while the leader is SIGKILLed, asked to `simba yield`, stopped
# with TERM; then a yield with nobody waiting. From the observer's record: every change seen,
# in order, each value with its owner, fences increasing, and never the value of a process
# that no longer leads once the new leader was seen; from the commands' own record: each got
# its value and fence, and a yield or a stop ends one leader's command before the next one
# starts. Section values (SQLite) checks the
# command line: the default value, bytes shown safely, limits, --yield-on.
# Prints "N passed, N failed"; exit 0 only if every check passed.
#   SIMBA_ELECT_REDIS_PORT (SIMBA_CLI_REDIS_PORT + 2, 6432)  SIMBA_ELECT_ZK_PORT
#   (SIMBA_CLI_ZK_PORT + 2, 2223)  SIMBA_ELECT_PG_PORT (SIMBA_CLI_PG_PORT + 2, 5449)
#   SIMBA_BIN (build/simba)  SIMBA_ELECT_ONLY="values sqlite redis zk pg" runs some sections.
set -u
cd "$(dirname "$0")/.."
SIMBA=${SIMBA_BIN:-build/simba}
RPORT=${SIMBA_ELECT_REDIS_PORT:-$(( ${SIMBA_CLI_REDIS_PORT:-6430} + 2 ))}
ZPORT=${SIMBA_ELECT_ZK_PORT:-$(( ${SIMBA_CLI_ZK_PORT:-2221} + 2 ))}
PPORT=${SIMBA_ELECT_PG_PORT:-$(( ${SIMBA_CLI_PG_PORT:-5447} + 2 ))}
ONLY=${SIMBA_ELECT_ONLY:-values sqlite redis zk pg}
want() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
W=$(mktemp -d "${TMPDIR:-/tmp}/simba-elect.XXXXXX")
PASS=0
FAIL=0
unset SIMBA_URL SIMBA_STATS_SOCKET XDG_RUNTIME_DIR
# the holders' statistics sockets live under $W: simba yield finds them there
export TMPDIR=$W
FAST="--ttl 1 --transition 0.8"

PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do # only our own children still running (pids get reused)
        [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$$" ] || continue
        kill -KILL "$p" 2>/dev/null
    done
    for p in "$W"/*.cmds; do # commands whose simba was killed: their groups (pid = pgid)
        [ -s "$p" ] || continue
        for p in $(awk -F'|' '{ print $3 }' "$p"); do
            grep -qa SIMBA_MUTEX= "/proc/$p/environ" 2>/dev/null && kill -KILL -- "-$p" 2>/dev/null
        done
    done
    [ -f "$W/redis/redis.pid" ] && sh scripts/redis-stop.sh "$W/redis" >/dev/null 2>&1
    [ -f "$W/zk/zk.pid" ] && bash scripts/zk-stop.sh "$W/zk" >/dev/null 2>&1
    [ -s "$W/pg/datadir" ] && sh scripts/pg-stop.sh "$W/pg" >/dev/null 2>&1
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. tests/cli_lib.sh
wait_exit() { # wait_exit PID DEADLINE_S: waits for a background job, sets RC (124 if it did not end)
    if wait_for "$2" eval "! alive $1"; then wait "$1"; RC=$?; else RC=124; kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null; fi
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

[ -x "$SIMBA" ] || { echo "FAIL $SIMBA not built (make $SIMBA)"; echo "0 passed, 1 failed"; exit 1; }

# record FILE: the leaders a watch --json saw, "owner fence value" (value as its JSON text),
# one line per change: repeated reports of one tenure collapse into one line
record() {
    sed -n 's/.*"owner":"\([^"]*\)","fence":\([0-9]*\),.*,"value":\(.*\)}$/\1 \2 \3/p' "$1" | awk '$0 != last { print; last = $0 }'
}
owners() { record "$1" | cut -d' ' -f1 | tr '\n' ' '; }
# cmd_line FILE N: line N of a commands file, "value|fence|pid|start" as each leader's command
# saw it (start: ns since 1970); FILE.ends holds "pid end" of the commands that were stopped
cmd_line() { sed -n "$2p" "$1"; }
# ended_before FILE N M: the command of line N ended before the one of line M started
ended_before() {
    local pid start end
    pid=$(cmd_line "$1" "$2" | cut -d'|' -f3)
    start=$(cmd_line "$1" "$3" | cut -d'|' -f4)
    end=$(sed -n "s/^$pid //p" "$1.ends")
    [ -n "$end" ] && [ -n "$start" ] && [ "$end" -lt "$start" ]
}

# elect_cycle BE URL: the multi-process scenario on one backend
elect_cycle() {
    local be=$1 url=$2 m=lead-$1 cmds=$W/$1.cmds watchf=$W/$1.watch wp a b c t0 t1 f1 f2 f3 f4 seq
    echo "== $be: three elect --value, an observer, SIGKILL, yield, TERM"
    : > "$cmds"
    : > "$cmds.ends"
    # the values: B's has a space, quotes and a non-ASCII letter (JSON and the environment
    # carry them exactly)
    local va="host-a:7001" vb='host "b" Zürich:7002' vc="host-c:7003"
    local ja='"host-a:7001"' jb='"host \"b\" Zürich:7002"' jc='"host-c:7003"'
    # each command records what it got, then runs until stopped
    local lead='echo "$SIMBA_VALUE|$SIMBA_FENCE|$$|$(date +%s%N)" >> "$0"
        trap "echo \"$$ \$(date +%s%N)\" >> $0.ends; exit 0" TERM; sleep 60 & wait $!'
    "$SIMBA" -u "$url" elect "$m" --id "A-$be" --value "$va" $FAST -- sh -c "$lead" "$cmds" >>"$W/$be.log" 2>&1 &
    a=$!; PIDS+=("$a")
    wait_for 10 eval 'test $(wc -l < "$cmds") -ge 1' || bad "$be: A did not lead in 10 s: $(tail -3 "$W/$be.log")"
    # the observer's first line is the leader it finds: it is following from then on
    "$SIMBA" -u "$url" watch "$m" --json --refresh 0.2 > "$watchf" 2>"$W/$be.watch.err" &
    wp=$!; PIDS+=("$wp")
    wait_for 10 test -s "$watchf" || bad "$be: the observer printed nothing in 10 s: $(head -c 300 "$W/$be.watch.err")"
    "$SIMBA" -u "$url" elect "$m" --id "B-$be" --value "$vb" $FAST -- sh -c "$lead" "$cmds" >>"$W/$be.log" 2>&1 &
    b=$!; PIDS+=("$b")
    wait_for 5 eval '"$SIMBA" -u "$url" get "$m" --json 2>/dev/null | grep -q "\"next\":\[\"B-$be\"\]"' || sleep 1
    "$SIMBA" -u "$url" elect "$m" --id "C-$be" --value "$vc" $FAST -- sh -c "$lead" "$cmds" >>"$W/$be.log" 2>&1 &
    c=$!; PIDS+=("$c")
    wait_for 5 eval '"$SIMBA" -u "$url" get "$m" --json 2>/dev/null | grep -q "\"next\":\[\"B-$be\",\"C-$be\"\]"' || sleep 1
    check "$be: A leads, its command got SIMBA_VALUE" test "$(cmd_line "$cmds" 1 | cut -d'|' -f1)" = "$va"
    f1=$(cmd_line "$cmds" 1 | cut -d'|' -f2)
    expect_rc "$be: get shows the leader's value" 0 "$SIMBA" -u "$url" get "$m" --json
    check "  in JSON" out_has "\"owner\":\"A-$be\",.*\"value\":$ja"
    expect_rc "$be: get (text)" 0 "$SIMBA" -u "$url" get "$m"
    check "  value: \"$va\"" out_has "^value: $ja\$"

    # 1. the leader dies without a word: its lease runs out, the oldest waiter takes over
    kill -KILL "$a"; wait "$a" 2>/dev/null
    kill -KILL -- "-$(cmd_line "$cmds" 1 | cut -d'|' -f3)" 2>/dev/null # its host is gone with it
    check "$be: after SIGKILL of A, B leads with its value" wait_for 15 eval 'test "$(cmd_line "$cmds" 2 | cut -d"|" -f1)" = "$vb"'
    f2=$(cmd_line "$cmds" 2 | cut -d'|' -f2)
    check "  the observer saw it" wait_for 10 eval 'test "$(owners "$watchf")" = "A-$be B-$be "'

    # 2. simba yield: B stops its command, then hands the lock to C and queues behind it
    t0=$(now_ms)
    expect_rc "$be: simba yield passes the lead on" 0 "$SIMBA" -u "$url" yield "$m"
    check "  and says so" out_has "yielded $m (fence $f2): passed"
    check "$be: C leads with its value" wait_for 10 eval 'test "$(cmd_line "$cmds" 3 | cut -d"|" -f1)" = "$vc"'
    t1=$(now_ms)
    echo "   $be: yield to the next leader's command: $((t1 - t0)) ms"
    f3=$(cmd_line "$cmds" 3 | cut -d'|' -f2)
    check "  B's command was stopped" eval '! alive $(cmd_line "$cmds" 2 | cut -d"|" -f3)'
    check "  before C's command started" ended_before "$cmds" 2 3
    check "  B still contends" alive "$b"
    check "  the observer saw it" wait_for 10 eval 'test "$(owners "$watchf")" = "A-$be B-$be C-$be "'

    # 3. a clean stop: C releases, B (queued behind it) leads again
    kill -TERM "$c"
    wait_exit "$c" 10
    check "$be: TERM reaches C's command, elect exits with its status (0, got $RC)" test "$RC" -eq 0
    check "$be: B leads again" wait_for 10 eval 'test "$(cmd_line "$cmds" 4 | cut -d"|" -f1)" = "$vb"'
    check "  after C's command ended" ended_before "$cmds" 3 4
    f4=$(cmd_line "$cmds" 4 | cut -d'|' -f2)
    check "  the observer saw it" wait_for 10 eval 'test "$(owners "$watchf")" = "A-$be B-$be C-$be B-$be "'

    # 4. a yield with nobody waiting keeps the lead: the store's queue is read first, the
    # command runs on
    expect_rc "$be: simba yield with nobody waiting: kept" 1 "$SIMBA" -u "$url" yield "$m"
    check "  and says so" out_has "kept $m (fence $f4): nobody waits"
    local bp
    bp=$(cmd_line "$cmds" 4 | cut -d'|' -f3)
    check "  B's command runs on, never signalled" eval 'alive $bp && test $(wc -l < "$cmds") -eq 4 && ! grep -q "^$bp " "$cmds.ends"'
    kill -TERM "$b"
    wait_exit "$b" 10
    check "$be: the observer sees nobody after the last leader stopped" wait_for 10 eval 'tail -1 "$watchf" | grep -q "\"owner\":null,.*\"value\":null}"'
    expect_rc "$be: simba yield with no local holder" 1 "$SIMBA" -u "$url" yield "$m"
    check "  says so" err_has "no simba run or elect"
    kill -TERM "$wp"
    wait_exit "$wp" 10

    # the observer's record
    seq=$(record "$watchf")
    printf '%s\n' "$seq" | sed "s/^/   $be observer: /"
    check "$be: every change seen, in order (A B C B); no leader reported again once its successor was" test "$(owners "$watchf")" = "A-$be B-$be C-$be B-$be "
    check "$be: each value reported with its own leader" test "$(printf '%s\n' "$seq" | A="A-$be $ja" B="B-$be $jb" C="C-$be $jc" awk '
        { split($0, w, " "); k = w[1] " " substr($0, length(w[1]) + length(w[2]) + 3) }
        k != ENVIRON["A"] && k != ENVIRON["B"] && k != ENVIRON["C"] { bad++ } END { print bad + 0 }')" = 0
    check "$be: fences as the commands got them ($f1 $f2 $f3 $f4), strictly increasing" \
        test "$(printf '%s\n' "$seq" | cut -d' ' -f2 | tr '\n' ' ')" = "$f1 $f2 $f3 $f4 " -a "$f1" -lt "$f2" -a "$f2" -lt "$f3" -a "$f3" -lt "$f4"
    check "$be: no line of nobody carries a value" test "$(grep -c '"owner":null' "$watchf")" = "$(grep -c '"owner":null,.*"value":null}$' "$watchf")"
}

# ---- values on the command line (SQLite) ------------------------------------------------------
if want values; then
echo "== values"
SQL=sqlite:$W/values.db
expect_rc "run: the default value is HOST:PID of simba" 0 "$SIMBA" -u "$SQL" run v1 $FAST -- sh -c 'echo "$SIMBA_VALUE"; echo "$(hostname):$PPID"'
check "  in SIMBA_VALUE" test "$(sed -n 1p "$W/out")" = "$(sed -n 2p "$W/out")"
# bytes that are not printable or not UTF-8: shown escaped, JSON exact
"$SIMBA" -u "$SQL" run v2 --value "$(printf 'a\033[31m\tb\\\377\001"')" $FAST -- sh -c 'echo go > "$0"; exec sleep 30' "$W/v2.go" >>"$W/values.log" 2>&1 &
vp=$!; PIDS+=("$vp")
wait_for 10 test -s "$W/v2.go" || bad "values: run v2 did not start"
expect_rc "get shows a value with control and non-UTF-8 bytes" 0 "$SIMBA" -u "$SQL" get v2
check "  escaped: value: \"a\\x1b[31m\\tb\\\\\\xff\\x01\\\"\"" out_has '^value: "a\\x1b\[31m\\tb\\\\\\xff\\x01\\""$'
check "  no raw escape byte reaches the terminal" eval '! grep -q "$(printf "\033")" "$W/out"'
expect_rc "get --json: not UTF-8, so value null and the bytes in value_base64" 0 "$SIMBA" -u "$SQL" get v2 --json
check "  value_base64 is exact" out_has "\"value\":null,\"value_base64\":\"$(printf 'a\033[31m\tb\\\377\001"' | base64)\""
kill -TERM $vp; wait_exit $vp 10
"$SIMBA" -u "$SQL" run v3 --value "$(printf 'line1\nü\302\205"\\')" $FAST -- sh -c 'echo go > "$0"; exec sleep 30' "$W/v3.go" >>"$W/values.log" 2>&1 &
vp=$!; PIDS+=("$vp")
wait_for 10 test -s "$W/v3.go" || bad "values: run v3 did not start"
expect_rc "get --json: a UTF-8 value with a newline, a C1 control, a quote" 0 "$SIMBA" -u "$SQL" get v3 --json
check "  JSON-escaped" out_has '"value":"line1\\nü\\u0085\\"\\\\"'
expect_rc "get (text)" 0 "$SIMBA" -u "$SQL" get v3
check "  one line, escaped" out_has '^value: "line1\\nü\\xc2\\x85\\"\\\\"$'
timeout -s INT 3 "$SIMBA" -u "$SQL" watch v3 >"$W/out" 2>"$W/err"
check "watch prints the value the same way, last on the line" out_has ' owner=[^ ]* fence=[0-9]* ttl_left_ms=-\{0,1\}[0-9]* value="line1\\nü\\xc2\\x85\\"\\\\"$'
kill -TERM $vp; wait_exit $vp 10
big=$(head -c 1024 /dev/zero | tr '\0' x)
expect_rc "--value of 1024 bytes (SIMBA_VALUE_MAX) is taken" 0 "$SIMBA" -u "$SQL" run v4 --value "$big" $FAST -- sh -c 'test ${#SIMBA_VALUE} -eq 1024'
expect_rc "--value of 1025 bytes is refused" 64 "$SIMBA" -u "$SQL" run v4 --value "${big}x" $FAST -- true
check "  naming the length and the limit" err_has "1025 bytes is over the limit of 1024"
expect_rc "--value is for run and elect" 64 "$SIMBA" -u "$SQL" get v4 --value x
expect_rc "--yield-on is for elect" 64 "$SIMBA" -u "$SQL" run v4 --yield-on USR1 -- true
expect_rc "--yield-on TERM is refused (it stops simba)" 64 "$SIMBA" -u "$SQL" elect v4 --yield-on TERM -- true
check "  saying which signals" err_has "HUP, USR1 or USR2"
expect_rc "yield: --stats names a socket that does not answer" 69 "$SIMBA" -u "$SQL" yield v4 --stats "$W/nope.sock"
# --yield-on: the signal hands over instead of reaching the command
: > "$W/yo.cmds"
LEAD='echo "$SIMBA_VALUE|$SIMBA_FENCE|$$" >> "$0"; trap "echo USR1 >> $0.sig" USR1; while :; do sleep 0.05; done'
"$SIMBA" -u "$SQL" elect yo --value one --yield-on USR1 $FAST -- sh -c "$LEAD" "$W/yo.cmds" >>"$W/values.log" 2>&1 &
y1=$!; PIDS+=("$y1")
wait_for 10 eval 'test $(wc -l < "$W/yo.cmds") -ge 1' || true
"$SIMBA" -u "$SQL" elect yo --value two --yield-on USR1 $FAST -- sh -c "$LEAD" "$W/yo.cmds" >>"$W/values.log" 2>&1 &
y2=$!; PIDS+=("$y2")
sleep 0.5
kill -USR1 $y1
check "elect --yield-on USR1: the signal passes the lead on" wait_for 10 eval 'test "$(sed -n 2p "$W/yo.cmds" | cut -d"|" -f1)" = two'
check "  the signal did not reach the command" test ! -e "$W/yo.cmds.sig"
check "  the yielder still contends" alive $y1
kill -TERM $y2; wait_exit $y2 10
check "  and leads again when the other stops" wait_for 10 eval 'test "$(sed -n 3p "$W/yo.cmds" | cut -d"|" -f1)" = one'
kill -TERM $y1; wait_exit $y1 10
# run: a yield with nobody waiting changes nothing; with a waiter it stops the command and
# run exits 76
"$SIMBA" -u "$SQL" run ry $FAST -- sh -c 'echo "$SIMBA_STATS_SOCKET $$" > "$0"; exec sleep 30' "$W/ry.go" >>"$W/values.log" 2>&1 &
rp=$!; PIDS+=("$rp")
wait_for 10 test -s "$W/ry.go" || true
# the socket's text protocol: a client that says nothing gets the statistics all the same
t0=$(now_ms)
check "the stats socket answers a client that sends no request" test "$(perl -MIO::Socket::UNIX -e '
    my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "$ARGV[0]: $!\n"; print scalar <$s>' "$(cut -d' ' -f1 "$W/ry.go")")" = "simba-stats 1"
check "  within a second ($(( $(now_ms) - t0 )) ms)" test $(( $(now_ms) - t0 )) -lt 1000
expect_rc "yield to a simba run with nobody waiting: kept" 1 "$SIMBA" -u "$SQL" yield ry
sleep 0.3
check "  the run and its command go on" eval 'alive $rp && alive $(cut -d" " -f2 "$W/ry.go")'
"$SIMBA" -u "$SQL" run ry $FAST -- sh -c 'echo second > "$0"' "$W/ry.second" >>"$W/values.log" 2>&1 &
rp2=$!; PIDS+=("$rp2")
wait_for 5 eval '"$SIMBA" -u "$SQL" get ry --json 2>/dev/null | grep -q "\"waiters\":1"' || sleep 1
expect_rc "yield to a simba run" 0 "$SIMBA" -u "$SQL" yield ry
wait_exit $rp 10
check "  run exits 76 (got $RC)" test "$RC" -eq 76
check "  the waiter ran its command" wait_for 10 test -s "$W/ry.second"
wait_exit $rp2 10
fi

# ---- the multi-process scenario on every backend ---------------------------------------------
if want sqlite; then
    elect_cycle sqlite "sqlite:$W/elect.db"
fi
if want redis; then
    if sh scripts/redis-start.sh "$RPORT" "$W/redis" >"$W/redis.log" 2>&1; then
        "$SIMBA" -u "redis://127.0.0.1:$RPORT" init >/dev/null 2>&1 # a new server: no quarantine
        elect_cycle redis "redis://127.0.0.1:$RPORT/3"
    else
        bad "redis-server on $RPORT: $(tail -3 "$W/redis.log")"
    fi
fi
if want zk; then
    if bash scripts/zk-start.sh "$ZPORT" "$W/zk" >"$W/zk.log" 2>&1; then
        elect_cycle zk "zk://127.0.0.1:$ZPORT/simba-elect"
    else
        bad "ZooKeeper on $ZPORT: $(tail -3 "$W/zk.log")"
    fi
fi
if want pg; then
    if sh scripts/pg-start.sh "$PPORT" "$W/pg" >"$W/pg.log" 2>&1; then
        export PGPASSWORD=simba
        elect_cycle pg "postgres://postgres@127.0.0.1:$PPORT/postgres?table=elect_locks"
        unset PGPASSWORD
    else
        bad "PostgreSQL on $PPORT: $(tail -3 "$W/pg.log")"
    fi
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
