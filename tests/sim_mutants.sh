#!/bin/sh
# sim_mutants.sh -- proof that the simulator finds protocol bugs: each mutation below is
# applied alone to a copy of the headers, the simulator is built against it, and its default
# batch (tests/sim.c, 100,000 seeds, stopping at the first violation) must catch it. Prints
# the seed and the first violated invariant of each; exits 1 if a mutant survives or a
# mutation no longer applies (the code it targets changed: update the mutation).
#   SIM_MUTANT_SEEDS=N   seeds per mutant (default 100000, the default batch)
set -u
cd "$(dirname "$0")/.."
SEEDS=${SIM_MUTANT_SEEDS:-100000}
CC=${CC:-cc}
T=$(mktemp -d "${TMPDIR:-/tmp}/simba-mutants.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tests"
cp tests/sim.c "$T/tests/"
FAILED=0

# mutate NAME FILE FROM TO [FROM TO ...]: each FROM (literal text) must occur exactly once in
# FILE; the pairs make one mutant together.
mutate() {
    name=$1 file=$2
    shift 2
    rm -f "$T/simba.h" "$T/simba_memory.h" "$T/sim"
    cp simba.h simba_memory.h "$T/"
    while [ $# -ge 2 ]; do
        if ! FROM=$1 TO=$2 perl -0pi -e '$n = s/\Q$ENV{FROM}\E/$ENV{TO}/g; END { exit($n == 1 ? 0 : 1) }' "$T/$file"; then
            echo "mutant $name: its text is not (exactly once) in $file: update tests/sim_mutants.sh"
            FAILED=$((FAILED + 1))
            return
        fi
        shift 2
    done
    # unoptimised: each mutant is caught within a few hundred seeds (under a second either
    # way), and -O2 would spend three more seconds compiling each one
    if ! $CC -std=c99 -D_POSIX_C_SOURCE=200809L -O0 -o "$T/sim" "$T/tests/sim.c" -lpthread 2>"$T/cc.log"; then
        echo "mutant $name: does not compile:"; cat "$T/cc.log"
        FAILED=$((FAILED + 1))
        return
    fi
    t0=$(date +%s)
    "$T/sim" --seeds "$SEEDS" --stop >"$T/out" 2>"$T/err"
    rc=$?
    first=$(grep -m1 '^VIOLATION' "$T/err")
    if [ $rc -eq 1 ] && [ -n "$first" ]; then
        echo "mutant $name: caught in $(( $(date +%s) - t0 ))s by $first"
    else
        echo "mutant $name: NOT caught in $SEEDS seeds (exit $rc)"
        tail -3 "$T/err"
        FAILED=$((FAILED + 1))
    fi
}

mutate lease-from-answer simba.h \
    'simba__owner_from_reply(&nv, rep, mine ? sent_at : now, now);' \
    'simba__owner_from_reply(&nv, rep, now, now);'
mutate step-down-at-transition-end simba.h \
    's->lease_end = nv.ttl_at;' \
    's->lease_end = nv.transition_at;'
mutate late-grant-accepted simba.h \
    'simba__owner_from_reply(&nv, rep, mine ? sent_at : now, now);' \
    'simba__owner_from_reply(&nv, rep, mine && simba__add(sent_at, rep->ttl_left_ms) > now ? sent_at : now, now);'
mutate fence-reused-after-data-loss simba_memory.h \
    'st->fence_floor = st->fence_max;' \
    'st->fence_floor = 0;'
mutate fair-queue-ignored simba_memory.h \
    'turn = e->nw == 0 || i == 0;' \
    'turn = 1;'
mutate no-data-loss-quarantine simba_memory.h \
    'return now < simba__add(st->lost_at,' \
    'return 0 && now < simba__add(st->lost_at,'
# An owner that believes 2 s past its local lease end (simba_is_owner and the lapse check);
# then the same with the step's guard gone, so that its loop asks to be polled at once,
# forever: the seed's bounds must name it.
mutate late-step-down simba.h \
    'simba_now(s->loop) < s->lease_end;' \
    'simba_now(s->loop) < s->lease_end + 2000;' \
    '(s->flags & SIMBA__F_OWNER) && now >= s->lease_end) {' \
    '(s->flags & SIMBA__F_OWNER) && now >= s->lease_end + 2000) {'
mutate late-step-down-polled-at-once simba.h \
    'simba_now(s->loop) < s->lease_end;' \
    'simba_now(s->loop) < s->lease_end + 2000;' \
    '(s->flags & SIMBA__F_OWNER) && now >= s->lease_end) {' \
    '(s->flags & SIMBA__F_OWNER) && now >= s->lease_end + 2000) {' \
    'return at <= s->stepped_at && s->stepped_at == s->loop->now ? SIMBA__NEVER : at;' \
    'return at;'
mutate is-owner-ignores-the-clock simba.h \
    '== SIMBA__F_OWNER &&
           simba_now(s->loop) < s->lease_end;' \
    '== SIMBA__F_OWNER;'
mutate work-after-lapse simba.h \
    'if (!simba_is_owner(sc->svc)) return; /* lease lapsed' \
    'if (0) return; /* lease lapsed'
mutate older-fence-renewal-owned simba.h \
    '(s->flags & SIMBA__F_OWNER) && rep->fence < s->own_fence) {' \
    '(s->flags & SIMBA__F_OWNER) && rep->fence < s->own_fence && 0) {'
mutate dead-waiters-never-dropped simba_memory.h \
    'if (e->w[i].expires < now) simba__mwait_remove(e, i); else i++;' \
    'i++;'
mutate waiter-stops-asking simba.h \
    'return simba__add(now, simba__max(s->free_retry, s->tp->v.min_retry));' \
    'return SIMBA__NEVER;'

mutate lapse-unreported-by-unlock simba.h \
    'lapsed = was == SIMBA__LK_HELD && !simba_locker_is_owner(lk) && !(lk->svc->flags & SIMBA__F_YIELDING);' \
    'lapsed = 0;'
mutate owner-while-yielding simba.h \
    's->flags |= SIMBA__F_YIELD | SIMBA__F_YIELDING;' \
    's->flags |= SIMBA__F_YIELD;'
mutate view-goes-back-a-fence simba.h \
    'if (nv->id[0] && (nv->fence < s->seen_fence || (s->ended_fence && nv->fence <= s->ended_fence)) &&
        strcmp(nv->id, s->id) != 0 && !(s->flags & SIMBA__F_MANY)) {' \
    'if (0) {'
mutate grant-keeps-old-value simba_memory.h \
    '(a renewal keeps it) */
        e->value_len = r->value_len;
        if (r->value_len) memcpy(e->value, r->value, r->value_len);' \
    '(a renewal keeps it) */'
# The rule itself (simba__grantable) is the checker's too: these plant wrong facts in the store.
mutate readers-overtake-a-waiting-writer simba_memory.h \
    'writer_ahead |= !e->w[i].shared && !SIMBA__MPLANT(e);' \
    'writer_ahead |= 0;'
mutate semaphore-ignores-its-holders simba_memory.h \
    'return simba__grantable(e->permits, simba__mholders(e, now),' \
    'return simba__grantable(e->permits, e->permits > 1 ? 0 : simba__mholders(e, now),'
mutate writer-with-readers simba_memory.h \
    '(!simba__mlive(e, now) && turn && e->nh == 0)' \
    '(!simba__mlive(e, now) && turn)'

if [ $FAILED -ne 0 ]; then
    echo "sim_mutants: $FAILED mutant(s) not caught"
    exit 1
fi
echo "sim_mutants: every mutant caught"
