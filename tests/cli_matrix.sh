# cli_matrix.sh -- every command of the tool on every primitive, under AddressSanitizer, each
# printed field checked against the holders' own SIMBA_FENCE and ids and, on SQLite,
# PostgreSQL and MySQL, against the rows the store holds. SIMBA_CLI_VALGRIND=1 runs get and get --json
# under valgrind too (build/simba; about 10 s a run on a loaded VM). Sourced by
# tests/test_cli.sh (section matrix): uses its W, PIDS, ok/bad/check/expect_rc, wait_for,
# wait_exit.   matrix_suite BE URL     BE: sqlite redis zk pg mysql
ASIMBA=${SIMBA_ASAN_BIN:-build/asan/simba}
# every ASan or UBSan report lands in a file of its own: a report in any process fails the run
export ASAN_OPTIONS="log_path=$W/asan:exitcode=86:detect_leaks=1"
export UBSAN_OPTIONS="log_path=$W/asan:halt_on_error=1:print_stacktrace=1"
# short leases: a forced-out holder learns it at its next renewal
MX_LEASE="--ttl 2 --transition 1.5"

# mx_hold NAME ID FILE GO ARGS...: a background run (or elect, in ARGS) of NAME as ID that
# writes its fence to FILE and holds until GO exists; its pid in MX_PID
mx_hold() {
    local name=$1 id=$2 file=$3 go=$4 cmd=run
    shift 4
    if [ "${1:-}" = elect ]; then cmd=elect; shift; fi
    rm -f "$file"
    "$ASIMBA" $cmd "$name" --id "$id" $MX_LEASE "$@" -- sh -c 'echo $SIMBA_FENCE > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' \
        "$file" "$go" >>"$W/bg.log" 2>&1 &
    MX_PID=$!; PIDS+=("$MX_PID")
}
# mx_store BE NAME: "ID FENCE" per live holding of NAME as the store keeps it, sorted by ID
# (SQLite, PostgreSQL and MySQL: their rows; other stores print nothing and are checked through
# the holders' own SIMBA_FENCE)
mx_store() {
    case $1 in
        sqlite) sqlite3 "${SQL#sqlite:}" "SELECT owner_id, fence FROM simba_mutex WHERE mutex = '$2' AND owner_id <> ''
                 UNION ALL SELECT contender, fence FROM simba_mutex_hold WHERE mutex = '$2'" 2>/dev/null ;;
        pg) psql -h 127.0.0.1 -p "$PGPORT_CLI" -U postgres -XAtF' ' -c "SELECT owner, fence FROM cli_locks WHERE name = '$2' AND owner <> ''
                 UNION ALL SELECT contender, fence FROM cli_locks_hold WHERE name = '$2'" postgres 2>/dev/null ;;
        mysql) my_sql "SELECT owner, fence FROM cli_locks WHERE name = '$2' AND owner <> '' AND transition_ms >= FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000)
                 UNION ALL SELECT contender, fence FROM cli_locks_hold WHERE name = '$2' AND transition_ms >= FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000)" | tr '\t' ' ' ;;
    esac | tr '|' ' ' | sort
}
# mx_store_is BE NAME "ID FENCE;ID FENCE": the store holds exactly these (where it can be read)
mx_store_is() {
    local got want
    case $1 in sqlite|pg|mysql) ;; *) return 0 ;; esac
    got=$(mx_store "$1" "$2" | tr '\n' ';')
    want=$(printf '%s' "$3" | tr ';' '\n' | sort | tr '\n' ';')
    [ "$got" = "$want" ] || { echo "  store: '$got', want '$want'"; return 1; }
}
# mx_json_holders FILE: "ID FENCE SHARED" per holder of get --json's "holders" array, sorted
mx_json_holders() {
    sed -n 's/.*"holders":\[\([^]]*\)\].*/\1/p' "$1" | tr '}' '\n' |
        sed -n 's/.*"id":"\([^"]*\)","fence":\([0-9]*\),"shared":\([a-z]*\).*/\1 \2 \3/p' | sort
}
# mx_ls_entry NAME: NAME's object of ls --json's array (in $W/out)
mx_ls_entry() { sed 's/},{"mutex"/}\n{"mutex"/g; s/^\[//' "$W/out" | grep "^{\"mutex\":\"$1\","; }
# mx_text_holders FILE: "ID FENCE[ reader]" per holder line of get's text, sorted
mx_text_holders() { sed -n 's/^  \([^ ]*\) fence \([0-9]*\)\( reader\)\{0,1\}.*/\1 \2\3/p' "$1" | sort; }
mx_valgrind() { # mx_valgrind DESC ARGS...: build/simba ARGS under valgrind, no error
    local d=$1; shift
    [ "${SIMBA_CLI_VALGRIND:-0}" = 1 ] || return 0
    if valgrind -q --error-exitcode=99 "$SIMBA" "$@" >"$W/vg.out" 2>"$W/vg.err"; [ $? -ne 99 ]; then ok "$d"
    else bad "$d: $(grep -m3 'Invalid\|uninitialised\|==[0-9]*== ' "$W/vg.err" | tr '\n' ' ')"; fi
}
mx_no_reports() { # no ASan or UBSan report from any process so far
    if ls "$W"/asan.* >/dev/null 2>&1; then bad "$1: $(grep -h 'ERROR\|runtime error' "$W"/asan.* | head -c 300)"
        mkdir -p "$W/asan-seen"; mv "$W"/asan.* "$W/asan-seen/"
    else ok "$1"; fi
}

matrix_suite() {
    local be=$1 url=$2 m="mx-m-$1" s="mx-s-$1" rw="mx-rw-$1" v="mx-v-$1" fa fb fw fr1 fr2 p1 p2 pw pid f
    echo "== $be matrix ($url)"
    export SIMBA_URL=$url
    rm -f "$W"/mx-*

    # a mutex with a value: get, get --json, ls, ls --json, watch, release --fence, run
    mx_hold "$m" "ma-$be" "$W/mx-ma" "$W/mx-mgo" --value "left:1"
    p1=$MX_PID
    wait_for 15 test -s "$W/mx-ma" || bad "$be: mutex holder never ran"
    fa=$(cat "$W/mx-ma" 2>/dev/null)
    expect_rc "$be matrix: get on a held mutex" 0 "$ASIMBA" get "$m"
    check "  owner, fence and value are the holder's (ma-$be, $fa, left:1)" \
        eval 'grep -qx "owner: ma-$be" "$W/out" && grep -qx "fence: $fa" "$W/out" && grep -qx "value: \"left:1\"" "$W/out"'
    check "  the store holds the same" mx_store_is "$be" "$m" "ma-$be $fa"
    check "  a lease left within the ttl" eval 'l=$(sed -n "s/^ttl_left_ms: //p" "$W/out"); [ -z "$l" -a "$be" = zk ] || [ "${l:-0}" -gt 0 -a "${l:-0}" -le 2000 ]'
    expect_rc "$be matrix: get --json" 0 "$ASIMBA" get "$m" --json
    check "  owner, fence, value" grep -q "\"owner\":\"ma-$be\",\"fence\":$fa,.*\"value\":\"left:1\"" "$W/out"
    expect_rc "$be matrix: ls" 0 "$ASIMBA" ls
    check "  the mutex, its owner and fence" grep -Eq "^$m +ma-$be +$fa " "$W/out"
    expect_rc "$be matrix: ls --json" 0 "$ASIMBA" ls --json
    check "  the mutex, its owner and fence" grep -q "{\"mutex\":\"$m\",\"owner\":\"ma-$be\",\"fence\":$fa," "$W/out"
    "$ASIMBA" watch "$m" --refresh 0.3 >"$W/mx-watch" 2>"$W/mx-watch.err" &
    pid=$!; PIDS+=("$pid")
    check "$be matrix: watch shows the owner, fence and value" wait_for 10 grep -qs " $m owner=ma-$be fence=$fa .*value=\"left:1\"" "$W/mx-watch"
    expect_rc "$be matrix: run -n on a held mutex" 75 "$ASIMBA" run "$m" -n -- true
    check "  names the holder" err_has "ma-$be"
    expect_rc "$be matrix: release --fence of another fence" 1 "$ASIMBA" release "$m" --fence $((fa + 1))
    check "  the store still holds it" mx_store_is "$be" "$m" "ma-$be $fa"
    expect_rc "$be matrix: release --fence $fa" 0 "$ASIMBA" release "$m" --fence "$fa"
    wait_exit "$p1" 15
    check "  the forced-out holder exits 76 (got $RC)" test "$RC" -eq 76
    check "  the store holds nobody" mx_store_is "$be" "$m" ""
    f=$fa; [ "$be" = zk ] && f=0
    if wait_for 10 grep -qs " $m owner=- fence=$f$" "$W/mx-watch"; then ok "$be matrix: watch then shows it free with the stored fence ($f)"
    else bad "$be matrix: watch then shows it free with the stored fence ($f): $(tail -n 3 "$W/mx-watch" | tr '\n' '|')"; fi
    expect_rc "$be matrix: run on the freed mutex" 0 "$ASIMBA" run "$m" $MX_LEASE -- sh -c 'echo $SIMBA_FENCE > "$0"; sleep 1' "$W/mx-mb"
    fb=$(cat "$W/mx-mb" 2>/dev/null)
    check "  with a greater fence ($fb > $fa)" test "${fb:-0}" -gt "${fa:-0}"
    check "$be matrix: watch saw that run (fence $fb)" wait_for 10 grep -qs " $m owner=.* fence=$fb " "$W/mx-watch"
    kill -TERM "$pid"; wait_exit "$pid" 10
    check "$be matrix: watch ends 0 on TERM (got $RC)" test "$RC" -eq 0
    # a free name's fence: the last one its store keeps (ZooKeeper keeps none: no owner node)
    f=$fb; [ "$be" = zk ] && f=0
    expect_rc "$be matrix: get on the free mutex" 1 "$ASIMBA" get "$m" --json
    check "  nobody, the stored fence ($f), no value" grep -q "\"owner\":null,\"fence\":$f,.*\"value\":null" "$W/out"

    # a semaphore of 2 with two holders
    mx_hold "$s" "sa-$be" "$W/mx-sa" "$W/mx-sgo" --permits 2; p1=$MX_PID
    mx_hold "$s" "sb-$be" "$W/mx-sb" "$W/mx-sgo" --permits 2; p2=$MX_PID
    wait_for 15 eval 'test -s "$W/mx-sa" -a -s "$W/mx-sb"' || bad "$be: semaphore holders never both ran"
    fa=$(cat "$W/mx-sa" 2>/dev/null); fb=$(cat "$W/mx-sb" 2>/dev/null)
    mx_valgrind "$be matrix: valgrind get on a semaphore" get "$s"
    mx_valgrind "$be matrix: valgrind get --json on a semaphore" get "$s" --json
    expect_rc "$be matrix: get on a semaphore" 0 "$ASIMBA" get "$s"
    check "  2 of 2 permits, both holders with their fences ($fa, $fb)" \
        eval 'grep -qx "holders: 2 of 2 permits" "$W/out" && [ "$(mx_text_holders "$W/out" | tr "\n" ";")" = "$(printf "sa-%s %s\nsb-%s %s\n" $be $fa $be $fb | sort | tr "\n" ";")" ]'
    check "  the store holds the same" mx_store_is "$be" "$s" "sa-$be $fa;sb-$be $fb"
    expect_rc "$be matrix: get --json on a semaphore" 0 "$ASIMBA" get "$s" --json
    check "  permits 2, both holders" \
        eval 'grep -q "\"permits\":2" "$W/out" && [ "$(mx_json_holders "$W/out" | tr "\n" ";")" = "$(printf "sa-%s %s false\nsb-%s %s false\n" $be $fa $be $fb | sort | tr "\n" ";")" ]'
    expect_rc "$be matrix: ls" 0 "$ASIMBA" ls
    check "  the first to free and +1" grep -Eq "^$s +s[ab]-$be\+1 +($fa|$fb) " "$W/out"
    expect_rc "$be matrix: ls --json" 0 "$ASIMBA" ls --json
    check "  permits 2, both holders with their fences" \
        eval 'mx_ls_entry "$s" >"$W/mx-ls" && grep -q "\"permits\":2" "$W/mx-ls" && [ "$(mx_json_holders "$W/mx-ls" | tr "\n" ";")" = "$(printf "sa-%s %s false\nsb-%s %s false\n" $be $fa $be $fb | sort | tr "\n" ";")" ]'
    expect_rc "$be matrix: run -n finds both permits held" 75 "$ASIMBA" run "$s" --permits 2 -n -- true
    expect_rc "$be matrix: release --fence $fb of one holder" 0 "$ASIMBA" release "$s" --fence "$fb"
    wait_exit "$p2" 15
    check "  that holder exits 76 (got $RC)" test "$RC" -eq 76
    expect_rc "$be matrix: get then shows the other alone" 0 "$ASIMBA" get "$s" --json
    check "  1 holder (sa-$be $fa)" eval '[ "$(mx_json_holders "$W/out" | tr "\n" ";")" = "sa-$be $fa false;" ]'
    check "  the store holds the same" mx_store_is "$be" "$s" "sa-$be $fa"
    touch "$W/mx-sgo"; wait_exit "$p1" 15

    # a read-write lock: two readers, a writer waiting, then the writer
    mx_hold "$rw" "ra-$be" "$W/mx-ra" "$W/mx-rgo" --shared; p1=$MX_PID
    mx_hold "$rw" "rb-$be" "$W/mx-rb" "$W/mx-rgo" --shared; p2=$MX_PID
    wait_for 15 eval 'test -s "$W/mx-ra" -a -s "$W/mx-rb"' || bad "$be: readers never both ran"
    fr1=$(cat "$W/mx-ra" 2>/dev/null); fr2=$(cat "$W/mx-rb" 2>/dev/null)
    mx_hold "$rw" "wa-$be" "$W/mx-wa" "$W/mx-wgo"; pw=$MX_PID
    wait_for 10 eval '"$ASIMBA" get "$rw" --json 2>/dev/null | grep -q "\"waiters\":1"' || true
    mx_valgrind "$be matrix: valgrind get on a read-write lock" get "$rw"
    mx_valgrind "$be matrix: valgrind get --json on a read-write lock" get "$rw" --json
    expect_rc "$be matrix: get on two readers" 0 "$ASIMBA" get "$rw"
    check "  both readers with their fences ($fr1, $fr2)" \
        eval '[ "$(mx_text_holders "$W/out" | tr "\n" ";")" = "$(printf "ra-%s %s reader\nrb-%s %s reader\n" $be $fr1 $be $fr2 | sort | tr "\n" ";")" ]'
    check "  and the writer waiting" grep -q "^waiters: 1 (wa-$be)" "$W/out"
    check "  the store holds the readers" mx_store_is "$be" "$rw" "ra-$be $fr1;rb-$be $fr2"
    expect_rc "$be matrix: get --json on two readers" 0 "$ASIMBA" get "$rw" --json
    check "  both shared, the writer next" \
        eval '[ "$(mx_json_holders "$W/out" | tr "\n" ";")" = "$(printf "ra-%s %s true\nrb-%s %s true\n" $be $fr1 $be $fr2 | sort | tr "\n" ";")" ] && grep -q "\"waiters\":1,\"next\":\[\"wa-$be\"\]" "$W/out"'
    expect_rc "$be matrix: ls" 0 "$ASIMBA" ls
    check "  a reader and +1" grep -Eq "^$rw +r[ab]-$be\+1 +($fr1|$fr2) " "$W/out"
    expect_rc "$be matrix: ls --json" 0 "$ASIMBA" ls --json
    check "  both readers with their fences" \
        eval 'mx_ls_entry "$rw" >"$W/mx-ls" && [ "$(mx_json_holders "$W/mx-ls" | tr "\n" ";")" = "$(printf "ra-%s %s true\nrb-%s %s true\n" $be $fr1 $be $fr2 | sort | tr "\n" ";")" ]'
    touch "$W/mx-rgo"
    wait_for 15 test -s "$W/mx-wa" || bad "$be: the writer never ran"
    fw=$(cat "$W/mx-wa" 2>/dev/null)
    expect_rc "$be matrix: get on the writer" 0 "$ASIMBA" get "$rw" --json
    check "  the writer and its fence ($fw, above both readers')" \
        eval 'grep -q "\"owner\":\"wa-$be\",\"fence\":$fw," "$W/out" && [ "${fw:-0}" -gt "$fr1" -a "${fw:-0}" -gt "$fr2" ]'
    check "  the store holds the writer" mx_store_is "$be" "$rw" "wa-$be $fw"
    expect_rc "$be matrix: ls" 0 "$ASIMBA" ls
    check "  the writer alone" grep -Eq "^$rw +wa-$be +$fw " "$W/out"
    touch "$W/mx-wgo"
    for pid in $p1 $p2 $pw; do wait_exit "$pid" 15; done

    # a name with a value: elect, a second elector waiting, yield, watch of the handover
    "$ASIMBA" watch "$v" --json --refresh 0.3 >"$W/mx-vwatch" 2>>"$W/bg.log" &
    pid=$!; PIDS+=("$pid")
    wait_for 10 test -s "$W/mx-vwatch" || true # its first line: the name nobody owns yet
    mx_hold "$v" "ea-$be" "$W/mx-ea" "$W/mx-ego" elect --value "10.0.0.1:80" --once; p1=$MX_PID
    wait_for 15 test -s "$W/mx-ea" || bad "$be: the first elector never led"
    mx_hold "$v" "eb-$be" "$W/mx-eb" "$W/mx-ego" elect --value "10.0.0.2:80"; p2=$MX_PID
    wait_for 10 eval '"$ASIMBA" get "$v" --json 2>/dev/null | grep -q "\"waiters\":1"' || true
    fa=$(cat "$W/mx-ea" 2>/dev/null)
    expect_rc "$be matrix: get on the leader" 0 "$ASIMBA" get "$v"
    check "  its id, fence and value" eval 'grep -qx "owner: ea-$be" "$W/out" && grep -qx "fence: $fa" "$W/out" && grep -qx "value: \"10.0.0.1:80\"" "$W/out"'
    expect_rc "$be matrix: yield" 0 "$ASIMBA" yield "$v"
    wait_exit "$p1" 15
    check "  the yielder (--once) exits 76 (got $RC)" test "$RC" -eq 76
    wait_for 15 test -s "$W/mx-eb" || bad "$be: the second elector never led"
    fb=$(cat "$W/mx-eb" 2>/dev/null)
    expect_rc "$be matrix: get --json after the yield" 0 "$ASIMBA" get "$v" --json
    check "  the new leader, its fence ($fb > $fa) and value" \
        eval 'grep -q "\"owner\":\"eb-$be\",\"fence\":$fb,.*\"value\":\"10.0.0.2:80\"" "$W/out" && [ "${fb:-0}" -gt "${fa:-0}" ]'
    check "  the store holds the same" mx_store_is "$be" "$v" "eb-$be $fb"
    check "$be matrix: watch --json saw both leaders with their values" wait_for 10 eval \
        'grep -q "\"owner\":\"ea-$be\",\"fence\":$fa,.*\"value\":\"10.0.0.1:80\"" "$W/mx-vwatch" && grep -q "\"owner\":\"eb-$be\",\"fence\":$fb,.*\"value\":\"10.0.0.2:80\"" "$W/mx-vwatch"'
    check "$be matrix: watch --json began with the name nobody owned yet" eval 'head -n 1 "$W/mx-vwatch" | grep -q "\"mutex\":\"$v\",\"owner\":null,"'
    touch "$W/mx-ego"; wait_exit "$p2" 15
    check "  the leader's command ends, elect exits 0 (got $RC)" test "$RC" -eq 0
    kill -TERM "$pid"; wait_exit "$pid" 10
    mx_no_reports "$be matrix: no ASan or UBSan report from any command"
    unset SIMBA_URL
}
