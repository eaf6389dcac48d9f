#!/usr/bin/env bash
# mp_check_test.sh -- mp_check on small hand-written logs of mutexes (with a fenced resource's
# answers), semaphores and read-write locks: every rule it enforces must pass a good log and
# fail the same log with one violation planted; the Porcupine history must be valid JSON.
#
#   tests/mp_check_test.sh [CHECK_BIN]     (default build/mp_check)
#
# Log lines: <pid> <contender> <fence> acquired|acquired:shared|released|work <ms> (mp_worker.c).
set -u
CHECK=${1:-build/mp_check}
[ -x "$CHECK" ] || { echo "mp_check_test: $CHECK missing (make build/mp_check)" >&2; exit 2; }
PASS=0
FAIL=0

# expect ok|fail NAME MP_CHECK-OPTIONS... < LOG
expect() {
    local want=$1 name=$2 out rc got
    shift 2
    out=$("$CHECK" "$@" - 2>&1)
    rc=$?
    got=ok
    [ $rc = 0 ] || got=fail
    if [ "$got" = "$want" ]; then
        PASS=$((PASS + 1))
        echo "ok   $name ($want)"
        [ "$want" = fail ] && echo "$out" | grep -E -m1 "OVERLAP|FENCE|STALE|ACTS|FAIL:" | sed 's/^/     /'
    else
        FAIL=$((FAIL + 1))
        echo "FAIL $name: wanted $want, mp_check said $got:"
        echo "$out" | sed 's/^/     /'
    fi
}

# A mutex with a fenced resource: a, then b, then c; each writes while it owns.
MUTEX='1 a 10 acquired 1000
1 a 10 work 1100
1 a 10 wrote 1100
1 a 10 released 1500
2 b 11 acquired 1501
2 b 11 work 1600
2 b 11 wrote 1600
2 b 11 released 2000
3 c 12 acquired 2001
3 c 12 work 2100
3 c 12 wrote 2100
3 c 12 released 2500'
expect ok mutex_one_holder_at_a_time --min-contenders 3 <<<"$MUTEX"
expect fail mutex_two_holders_overlap <<<"$MUTEX
4 d 13 acquired 1700
4 d 13 released 1800"
expect fail mutex_fence_goes_backwards <<<"$MUTEX
4 d 9 acquired 2600
4 d 9 released 2700"
expect fail mutex_fence_repeated <<<"$MUTEX
4 d 12 acquired 2600
4 d 12 released 2700"
# a resumed a (paused past its lease) writes with fence 10 after b wrote 11: refused is safe,
# accepted is the stale write the fence exists to stop
PAUSED='1 a 10 acquired 1000
1 a 10 work 1100
1 a 10 wrote 1100
1 a 10 released 1500 1500
2 b 11 acquired 1501
2 b 11 work 1600
2 b 11 wrote 1600
2 b 11 released 2000'
expect ok mutex_stale_write_refused <<<"$PAUSED
1 a 10 refused 1700"
expect fail mutex_stale_write_accepted <<<"$PAUSED
1 a 10 wrote 1700"
# a write after b's grant but before b's first write is accepted (the resource orders it
# before b's): no violation
expect ok mutex_stale_write_before_the_next_write <<<"$PAUSED
1 a 10 wrote 1550"
# b was granted the same fence as a: the resource cannot tell them apart
expect fail mutex_fence_not_above_lets_a_stale_write_through <<<'1 a 10 acquired 1000
1 a 10 wrote 1100
1 a 10 released 1500 1500
2 b 10 acquired 1501
1 a 10 wrote 1550
2 b 10 wrote 1600
2 b 10 released 2000'
PJ=$(mktemp)
if "$CHECK" --porcupine "$PJ" - <<<"$PAUSED" >/dev/null 2>&1 &&
    python3 -c 'import json,sys; h=json.load(open(sys.argv[1])); assert len(h)==6 and {"ClientId","Input","Call","Output","Return"} <= set(h[0]); assert [o["Output"]["fence"] for o in h if o["Input"]["op"]=="acquire"]==[10,11]' "$PJ"; then
    PASS=$((PASS + 1)); echo "ok   porcupine_history_is_json (ok)"
else
    FAIL=$((FAIL + 1)); echo "FAIL porcupine_history_is_json:"; sed 's/^/     /' "$PJ"
fi
rm -f "$PJ"

# A semaphore of 2: a and b hold together, c after a, d after b; fences in grant order.
SEM='1 a 10 acquired 1000
2 b 11 acquired 1001
1 a 10 work 1100
2 b 11 work 1100
1 a 10 released 1500
3 c 12 acquired 1501
2 b 11 released 1600
4 d 13 acquired 1601
3 c 12 released 2000
4 d 13 released 2000'
S=(--permits 2 --order-window-ms 600 --min-concurrent 2)
expect ok sem_two_holders "${S[@]}" <<<"$SEM"
expect fail sem_three_holders "${S[@]}" <<<"$SEM
5 e 14 acquired 1200
5 e 14 released 1300"
expect fail sem_worker_claims_a_permit_not_granted "${S[@]}" <<<"$SEM
5 e 14 work 1200"
expect fail sem_one_at_a_time "${S[@]}" <<<'1 a 10 acquired 1000
1 a 10 released 1500
2 b 11 acquired 1501
2 b 11 released 2000'
# b logs its grant before a's although a was granted first: inside the window, no violation
expect ok sem_grants_logged_out_of_order "${S[@]}" <<<'1 a 11 acquired 1000
2 b 10 acquired 1001
1 a 11 released 1500
2 b 10 released 1500'
expect fail sem_fence_below_an_earlier_grant "${S[@]}" <<<"$SEM
5 e 9 acquired 2100
5 e 9 released 2200"
expect fail sem_fence_repeated "${S[@]}" <<<"$SEM
5 e 13 acquired 2100
5 e 13 released 2200"

# A read-write lock: readers a and b together, writer w after both, reader c after w.
RW='1 a 10 acquired:shared 1000
2 b 11 acquired:shared 1002
1 a 10 work 1100
2 b 11 work 1100
1 a 10 released 1500
2 b 11 released 1510
9 w 12 acquired 1511
9 w 12 work 1600
9 w 12 released 1900
3 c 13 acquired:shared 1901
3 c 13 released 2200'
R=(--order-window-ms 300 --min-concurrent 2 --min-exclusive 1)
expect ok rw_readers_together_writer_alone "${R[@]}" <<<"$RW"
expect fail rw_writer_with_a_reader "${R[@]}" <<<"$RW
4 d 14 acquired:shared 1700
4 d 14 released 1750"
expect fail rw_two_writers "${R[@]}" <<<"$RW
8 v 14 acquired 1800
8 v 14 released 1850"
expect fail rw_reader_works_without_a_grant "${R[@]}" <<<"$RW
4 d 9 work 1700"
expect fail rw_no_writer "${R[@]}" <<<'1 a 10 acquired:shared 1000
2 b 11 acquired:shared 1002
1 a 10 released 1500
2 b 11 released 1510'

echo "mp_check_test: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
