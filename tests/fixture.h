/* fixture.h -- what the tests share: recorder callbacks and a contend helper for any
   backend; and, unless FIXTURE_REAL_TIME is defined (kit.c: real backends, real time), the
   simulated world of the core's tests: processes (a loop and a memory backend each) on one
   store, an injected clock and random source so that every timing is exact, and a wait-for
   with a deadline in simulated time. Include after the simba headers and check.h;
   FIXTURE_REAL_TIME users define FIXTURE_NOW() (the time the recorders note). */
#ifndef SIMBA_TEST_FIXTURE_H
#define SIMBA_TEST_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#ifndef FIXTURE_REAL_TIME
/* ---- the injected clock and random source -------------------------------------------- */

static int64_t fake_now = 1000000;
static int64_t store_skew;        /* the store's clock runs this far ahead of the loops' */
static uint32_t fake_rand_value;  /* every draw of the loops' random source */
static int64_t fake_clock(void *u) { (void)u; return fake_now; }
static int64_t store_clock(void *u) { (void)u; return fake_now + store_skew; }
static uint32_t fake_rand(void *u) { (void)u; return fake_rand_value; }

/* Allocations through the loops' allocator (steady-state tests read allocs). */
static size_t allocs;
static void *count_alloc(void *u, size_t n) { (void)u; allocs++; return malloc(n); }
static void count_free(void *u, void *p) { (void)u; free(p); }

#define FIXTURE_NOW() fake_now
#endif /* !FIXTURE_REAL_TIME */

/* ---- recorder callbacks ----------------------------------------------------------------- */

typedef struct rec {
    int acquired, released, owner_changes;
    uint64_t last_fence;                /* of the latest on_acquired */
    int64_t acquired_at, released_at;   /* simulated time of the latest one */
    simba_reason reason;                /* of the latest on_released */
    simba_reason acquired_reason, owner_reason, released_reason;
    simba_owner last_after;             /* of the latest on_owner */
} rec;

static void on_acq(simba_service *s, const simba_state *st, void *u) {
    rec *r = (rec *)u;
    r->acquired++;
    r->acquired_at = FIXTURE_NOW();
    r->last_fence = st->after->fence;
    r->acquired_reason = st->reason;
    CHECK(simba_owner_is(st->after, simba_service_contender_id(s)));
    CHECK(simba_is_owner(s));
}
static void on_rel(simba_service *s, const simba_state *st, void *u) {
    rec *r = (rec *)u;
    r->released++;
    r->released_at = FIXTURE_NOW();
    r->reason = r->released_reason = st->reason;
    CHECK(simba_owner_is(st->before, simba_service_contender_id(s)));
    CHECK(!simba_is_owner(s));
}
static void on_own(simba_service *s, const simba_state *st, void *u) {
    rec *r = (rec *)u;
    (void)s;
    r->owner_changes++;
    r->owner_reason = st->reason;
    r->last_after = *st->after;
}

/* A contender recording into r (not started). */
static simba_service *contend_on(simba_loop *loop, simba_backend *be, const char *mutex, const char *id, int64_t ttl,
                                 int64_t tr, rec *r, int step_down_on_disconnect) {
    simba_contend_desc d;
    simba_service *s = NULL;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    d.contender_id = id;
    d.ttl_ms = ttl;
    d.transition_ms = tr;
    d.on_acquired = on_acq;
    d.on_released = on_rel;
    d.on_owner = on_own;
    d.user_data = r;
    d.step_down_on_disconnect = step_down_on_disconnect;
    CHECK_RC(simba_contend(loop, be, &d, &s), SIMBA_OK);
    return s;
}

#ifndef FIXTURE_REAL_TIME
/* ---- processes on one store ------------------------------------------------------------ */

typedef struct proc {
    simba_loop *loop;
    simba_backend *be;
} proc;

static simba_memstore *store;

static void store_new(void) {
    simba_memstore_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.now_ms = store_clock;
    store_skew = 0;
    CHECK_RC(simba_memstore_new(&sd, &store), SIMBA_OK);
}
static void store_free(void) { CHECK_RC(simba_memstore_free(store), SIMBA_OK); store = NULL; }

static void proc_open(proc *p) {
    simba_loop_desc d;
    memset(&d, 0, sizeof d);
    d.now_ms = fake_clock;
    d.random = fake_rand;
    d.alloc = count_alloc;
    d.free = count_free;
    /* exact tests: the poll's real-time budget never cuts (under valgrind one step can take
       longer than the default 500 µs); tests of the budget set their own loops */
    d.poll_budget_us = 3600000000;
    CHECK_RC(simba_loop_new(&d, &p->loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p->loop, store, &p->be), SIMBA_OK);
}
static void proc_close(proc *p) { CHECK_RC(simba_loop_free(p->loop), SIMBA_OK); }

/* Poll every loop until nothing more happens at this instant. */
static void settle(proc *ps, int n) {
    int round, i;
    for (round = 0; round < 8; round++)
        for (i = 0; i < n; i++) CHECK(simba_poll(ps[i].loop) >= 0);
}
/* Advance simulated time in steps of at most `step` ms, polling at every loop's deadline. */
static void advance(proc *ps, int n, int64_t ms, int64_t step) {
    int64_t end = fake_now + ms;
    while (fake_now < end) {
        int64_t next = end;
        int i;
        for (i = 0; i < n; i++) {
            int64_t w = simba_poll(ps[i].loop);
            CHECK(w >= 0);
            if (fake_now + w < next) next = fake_now + w;
        }
        if (next - fake_now > step) next = fake_now + step;
        if (next <= fake_now) next = fake_now + 1;
        fake_now = next;
        settle(ps, n);
    }
}
/* Advance in 1 ms steps until cond holds or max_ms of simulated time passed; the caller
   then CHECKs cond itself. */
#define WAIT_FOR_SIM(ps, n, cond, max_ms)                                        \
    do {                                                                         \
        int64_t wait_end_ = fake_now + (max_ms);                                 \
        settle((ps), (n));                                                       \
        while (!(cond) && fake_now < wait_end_) advance((ps), (n), 1, 1);        \
    } while (0)

static simba_service *contend_rec(proc *p, const char *mutex, const char *id, int64_t ttl, int64_t tr, rec *r,
                                  int step_down_on_disconnect) {
    return contend_on(p->loop, p->be, mutex, id, ttl, tr, r, step_down_on_disconnect);
}
#endif /* !FIXTURE_REAL_TIME */

#endif /* SIMBA_TEST_FIXTURE_H */
