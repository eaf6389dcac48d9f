/* fixture.h -- what the tests share: recorder callbacks and a contend helper for any
   backend; and, unless FIXTURE_REAL_TIME is defined (kit.c: real backends, real time), the
   simulated world of the core's tests: processes (a loop and a memory backend each) on one
   store, an injected clock and random source so that every timing is exact, and a wait-for
   with a deadline in simulated time. Include after the simba headers and check.h;
   FIXTURE_REAL_TIME users define FIXTURE_NOW() (the time the recorders note).
   FIXTURE_DRIVER (the backend tests: real servers, real time; implies FIXTURE_REAL_TIME): the
   monotonic clock, a driver that runs several loops from one poll(2) over their descriptors,
   timing every simba_poll call, and a recorder of wall time in its place; its users define
   drv_loop_desc (each new loop's desc) instead of FIXTURE_NOW(). FIXTURE_DRIVER_ONLY as
   well: the driver without that recorder, its contend helpers and WAIT_FOR (for a file that
   keeps a recorder of its own and says why). Driver functions are static inline: each file
   uses some of them. */
#ifndef SIMBA_TEST_FIXTURE_H
#define SIMBA_TEST_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#if defined(FIXTURE_DRIVER) && !defined(FIXTURE_REAL_TIME)
#define FIXTURE_REAL_TIME
#endif

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

#ifndef FIXTURE_DRIVER
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
#endif /* !FIXTURE_DRIVER */

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

#ifdef FIXTURE_DRIVER
/* ---- the real-time driver: loops on real backends, one poll(2) over all of them ------- */

#include <poll.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

static inline int64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
static inline int64_t mono_ms(void) { return mono_us() / 1000; }

#define DRV_MAX 16
typedef struct drv {
    simba_loop *l[DRV_MAX]; /* NULL: a slot drv_close emptied, which drv_attach fills again */
    int64_t wait[DRV_MAX];
    int n;
    int use_ready;       /* hand our poll(2) results in with simba_poll_ready */
    int64_t max_poll_us; /* longest single simba_poll call, wall time (printed) */
    check_polls pc;      /* what the "never blocks" checks look at */
    long polls;
} drv;

/* Defined by the test file: the loop desc of every loop drv_add makes (log, random). */
static void drv_loop_desc(simba_loop_desc *ld);

/* Drive a loop made elsewhere too; 0, or -1 when the driver is full. */
static inline int drv_attach(drv *d, simba_loop *l) {
    int i;
    for (i = 0; i < d->n && d->l[i]; i++) {
    }
    if (i == DRV_MAX) return -1;
    d->l[i] = l;
    d->wait[i] = 0;
    if (i == d->n) d->n++;
    return 0;
}

/* A new loop, driven by d (NULL when it cannot be made or d is full). */
static inline simba_loop *drv_add(drv *d) {
    simba_loop *l = NULL;
    simba_loop_desc ld;
    memset(&ld, 0, sizeof ld);
    drv_loop_desc(&ld);
    if (simba_loop_new(&ld, &l) != SIMBA_OK) return NULL;
    if (drv_attach(d, l) != 0) {
        simba_loop_free(l);
        return NULL;
    }
    return l;
}

static inline void drv_once(drv *d, int64_t max_ms) {
    struct pollfd p[64];
    int cnt = 0, i;
    int64_t wait = max_ms;
    for (i = 0; i < d->n; i++) {
        int k;
        if (!d->l[i]) continue;
        k = simba_fds(d->l[i], p + cnt, 64 - cnt);
        if (k > 64 - cnt) k = 64 - cnt;
        if (k > 0) cnt += k;
        if (d->wait[i] < wait) wait = d->wait[i];
    }
    if (wait < 0) wait = 0;
    if (poll(p, (nfds_t)cnt, (int)wait) < 0)
        for (i = 0; i < cnt; i++) p[i].revents = 0;
    for (i = 0; i < d->n; i++) {
        int64_t t0, dt, w;
        check_cost c0;
        if (!d->l[i]) continue;
        c0 = check_polls_begin();
        t0 = mono_us();
        w = d->use_ready ? simba_poll_ready(d->l[i], p, cnt) : simba_poll(d->l[i]);
        dt = mono_us() - t0;
        check_polls_end(&d->pc, c0);
        if (dt > d->max_poll_us) d->max_poll_us = dt;
        d->polls++;
        d->wait[i] = w < 0 ? 10 : w;
    }
}

/* Drive the loops until cond holds or ms of wall time passed; the caller then CHECKs cond. */
#define DRV_WAIT_FOR(d, cond, ms)                                                           \
    do {                                                                                    \
        int64_t wf__end = mono_ms() + (ms);                                                 \
        while (!(cond) && mono_ms() < wf__end) drv_once((d), 20);                           \
    } while (0)

/* After a call from outside the poll (stop, start): the waits we cached are stale. */
static inline void drv_kick(drv *d) {
    int i;
    for (i = 0; i < d->n; i++) d->wait[i] = 0;
}

static inline void drv_run(drv *d, int64_t ms) {
    int64_t end = mono_ms() + ms;
    while (mono_ms() < end) drv_once(d, end - mono_ms());
}

/* The pid a server start script wrote to dir/file, or -1. */
static inline pid_t server_pid(const char *dir, const char *file) {
    char path[512];
    FILE *f;
    long pid = -1;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    f = fopen(path, "r");
    if (!f) return -1;
    if (fscanf(f, "%ld", &pid) != 1) pid = -1;
    fclose(f);
    return (pid_t)pid;
}

/* Frees one loop of d and stops driving it; its slot is reused. */
static inline void drv_close(drv *d, simba_loop *l) {
    int i;
    for (i = 0; i < d->n; i++)
        if (d->l[i] == l) d->l[i] = NULL;
    while (d->n > 0 && !d->l[d->n - 1]) d->n--;
    simba_loop_free(l);
}

static inline void drv_free(drv *d) {
    int i;
    for (i = 0; i < d->n; i++)
        if (d->l[i]) simba_loop_free(d->l[i]);
    d->n = 0;
}

#ifndef FIXTURE_DRIVER_ONLY
#define WAIT_FOR(d, cond, ms) DRV_WAIT_FOR(d, cond, ms)

/* The driver's recorder: wall time in µs and the order of acquisitions (the cases compare
   them across processes); it asserts nothing itself, the cases check what it noted. */
typedef struct rec {
    int acq, rel;
    int64_t acq_us, rel_us;
    uint64_t fence;
    simba_reason reason;
    int order; /* position in a handoff sequence */
} rec;

static int acq_seq;
static void on_acq(simba_service *s, const simba_state *st, void *u) {
    rec *r = (rec *)u;
    (void)s;
    r->acq++;
    r->acq_us = mono_us();
    r->fence = st->after->fence;
    r->order = ++acq_seq;
}
static void on_rel(simba_service *s, const simba_state *st, void *u) {
    rec *r = (rec *)u;
    (void)s;
    r->rel++;
    r->rel_us = mono_us();
    r->reason = st->reason;
}

/* A started contender recording into r, or NULL. */
static simba_service *contend_ex(simba_loop *l, simba_backend *be, const char *mutex, const char *id, int64_t ttl,
                                 int64_t tr, rec *r, int step_down_on_disconnect) {
    simba_contend_desc cd;
    simba_service *s = NULL;
    memset(&cd, 0, sizeof cd);
    cd.mutex = mutex;
    cd.contender_id = id;
    cd.ttl_ms = ttl;
    cd.transition_ms = tr;
    cd.on_acquired = on_acq;
    cd.on_released = on_rel;
    cd.user_data = r;
    cd.step_down_on_disconnect = step_down_on_disconnect;
    if (simba_contend(l, be, &cd, &s) != SIMBA_OK) return NULL;
    if (simba_start(s) != SIMBA_OK) return NULL;
    return s;
}
static simba_service *contend(simba_loop *l, simba_backend *be, const char *mutex, const char *id, int64_t ttl,
                              int64_t tr, rec *r) {
    return contend_ex(l, be, mutex, id, ttl, tr, r, 0);
}

/* The owner id a service sees, "" when it cannot tell. */
static const char *viewed_owner(simba_service *s) {
    static simba_owner o;
    if (simba_owner_get(s, &o) != SIMBA_OK) return "";
    return o.id;
}
#endif /* !FIXTURE_DRIVER_ONLY */
#endif /* FIXTURE_DRIVER */

#endif /* SIMBA_TEST_FIXTURE_H */
