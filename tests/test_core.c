/* Core unit tests: the protocol on the in-memory backend with an injected clock and random
   source, so every timing is exact and the suite runs in well under a second. */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"
#include "check.h"

#include <poll.h>
#include <stdlib.h>

#include "fixture.h"

static int lk_lost_calls;
static void lk_lost_count(simba_locker *lk, void *u) { (void)lk; (void)u; lk_lost_calls++; }
static void noop_work(simba_scheduler *sc, void *u) { (void)sc; (void)u; }

static simba_service *contender(proc *p, const char *mutex, const char *id, int64_t ttl, int64_t tr, rec *c) {
    return contend_rec(p, mutex, id, ttl, tr, c, 0);
}

/* ---- owner model ---------------------------------------------------------------------- */

/* The timer heap (4-ary, times kept in its slots): after any mix of arming, moving earlier or
   later and taking out, timers leave it in time order, each queued one exactly once, and
   every slot's time is its timer's. */
TEST(timer_heap_keeps_time_order_under_moves_and_removals) {
    enum { N = 3000 };
    simba_loop *l;
    static simba__timer t[N];
    int64_t last = INT64_MIN;
    int i, popped = 0, queued = 0;
    uint64_t x = 88172645463325252ull;
    CHECK_RC(simba_loop_new(NULL, &l), SIMBA_OK);
    for (i = 0; i < N; i++) CHECK(simba__timer_init(l, &t[i], SIMBA__T_SCHED));
    for (i = 0; i < 8 * N; i++) {
        int k, op;
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        k = (int)(x % N);
        op = (int)((x >> 20) % 4);
        simba__timer_set(l, &t[k], op == 3 ? SIMBA__NEVER : (int64_t)((x >> 24) % 100000));
    }
    for (i = 0; i < l->heap_n; i++) {
        CHECK_EQ(l->heap[i].at, l->heap[i].t->at);
        CHECK_EQ(l->heap[i].t->idx, i);
    }
    for (i = 0; i < N; i++) queued += t[i].idx >= 0;
    while (l->heap_n > 0) {
        simba__timer *top = l->heap[0].t;
        CHECK(top->at >= last);
        last = top->at;
        simba__heap_remove(l, top);
        CHECK_EQ(top->idx, -1);
        popped++;
    }
    CHECK_EQ(popped, queued);
    for (i = 0; i < N; i++) simba__timer_fini(l, &t[i]);
    simba_loop_free(l);
}

TEST(owner_predicates) {
    simba_owner o;
    memset(&o, 0, sizeof o);
    CHECK(!simba_owner_in_lease(&o, 0));
    CHECK(!simba_owner_in_ttl(&o, 0));
    strcpy(o.id, "a");
    o.ttl_at = 100;
    o.transition_at = 200;
    CHECK(simba_owner_in_ttl(&o, 99));
    CHECK(!simba_owner_in_ttl(&o, 100)); /* strict */
    CHECK(!simba_owner_in_transition(&o, 99));
    CHECK(simba_owner_in_transition(&o, 100));
    CHECK(simba_owner_in_transition(&o, 200)); /* inclusive */
    CHECK(simba_owner_in_lease(&o, 200));
    CHECK(!simba_owner_in_lease(&o, 201));
    CHECK(simba_owner_is(&o, "a"));
    CHECK(!simba_owner_is(&o, "b"));
    CHECK(!simba_owner_is(&o, NULL));
    o.id[0] = 0; /* a blank id with a future window is nobody */
    CHECK(!simba_owner_in_lease(&o, 150));
    CHECK(!simba_owner_is(&o, ""));
    CHECK(!simba_owner_in_lease(NULL, 0));
}

TEST(names_and_ids) {
    char longname[SIMBA_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname);
    longname[SIMBA_NAME_MAX] = 0;
    CHECK_RC(simba_name_check(longname), SIMBA_OK);
    longname[SIMBA_NAME_MAX] = 'a';
    longname[SIMBA_NAME_MAX + 1] = 0;
    CHECK_RC(simba_name_check(longname), SIMBA_EINVAL);
    CHECK_RC(simba_name_check("orders-leader.v2:eu@x+y=z,1_"), SIMBA_OK);
    CHECK_RC(simba_name_check(NULL), SIMBA_EINVAL);
    CHECK_RC(simba_name_check(""), SIMBA_EINVAL);
    CHECK_RC(simba_name_check("a b"), SIMBA_EINVAL);
    CHECK_RC(simba_name_check("a'b"), SIMBA_EINVAL);
    CHECK_RC(simba_name_check("x;drop table"), SIMBA_EINVAL);
    CHECK_RC(simba_name_check("{x}"), SIMBA_EINVAL);
    CHECK_RC(simba_name_check("m/n"), SIMBA_EINVAL);
    CHECK_RC(simba_name_check("."), SIMBA_EINVAL);
    CHECK_RC(simba_name_check(".."), SIMBA_EINVAL);
    CHECK_RC(simba_name_check("a\nb"), SIMBA_EINVAL);
    CHECK_RC(simba_id_check("3:41234@10.0.0.5"), SIMBA_OK);
    CHECK_RC(simba_id_check(""), SIMBA_EINVAL);
    CHECK_RC(simba_id_check("a b"), SIMBA_EINVAL);
    CHECK_RC(simba_id_check("a\x7f"), SIMBA_EINVAL);
    CHECK_RC(simba_id_check(NULL), SIMBA_EINVAL);
    CHECK_STR(simba_strerror(SIMBA_EINVAL), "invalid argument");
    CHECK_STR(simba_strerror(12345), "unknown error");
}

TEST(contender_ids) {
    simba_loop *l;
    char a[SIMBA_ID_MAX + 1], b[SIMBA_ID_MAX + 1], small[4];
    unsigned long long ca, cb;
    long pa;
    int i;
    CHECK_RC(simba_loop_new(NULL, &l), SIMBA_OK);
    CHECK_RC(simba_contender_id_host(l, a, sizeof a), SIMBA_OK);
    CHECK_RC(simba_contender_id_host(l, b, sizeof b), SIMBA_OK);
    CHECK(sscanf(a, "%llu:%ld@", &ca, &pa) == 2);
    CHECK(sscanf(b, "%llu:", &cb) == 1);
    CHECK_EQ(cb, ca + 1);
    CHECK_EQ(pa, (long)getpid());
    CHECK(strchr(a, '@') && strchr(a, '@')[1]);
    CHECK_RC(simba_id_check(a), SIMBA_OK);
    CHECK_RC(simba_contender_id_host(l, small, sizeof small), SIMBA_EINVAL);
    CHECK_RC(simba_contender_id_random(l, a, sizeof a), SIMBA_OK);
    CHECK_RC(simba_contender_id_random(l, b, sizeof b), SIMBA_OK);
    CHECK_EQ(strlen(a), 32);
    for (i = 0; i < 32; i++) CHECK(strchr("0123456789abcdef", a[i]) != NULL);
    CHECK(strcmp(a, b) != 0);
    CHECK_RC(simba_contender_id_random(l, small, sizeof small), SIMBA_EINVAL);
    CHECK_RC(simba_contender_id_random(NULL, a, sizeof a), SIMBA_EINVAL);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
}

/* ---- timing ------------------------------------------------------------------------------ */

/* Where a renewal due at `at` is sent: down to the renewal grid (a power of two of ms, at
   most margin / 16 and 128), so that owners renew together. */
static int64_t renew_grid(int64_t at, int64_t grid) { return at - at % grid; }

TEST(owner_renews_at_ttl_minus_margin) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_reply r;
    int64_t t0, at;
    store_new();
    proc_open(&p);
    s = contender(&p, "renew", "a", 900, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    t0 = fake_now;
    settle(&p, 1);
    CHECK_EQ(c.acquired, 1);
    CHECK(simba_is_owner(s));
    CHECK_EQ(s->lease_end, t0 + 900);
    /* default margin ttl/3, then down to the renewal grid: 16 ms (300 / 16, a power of two) */
    at = renew_grid(t0 + 900 - 300, 16);
    CHECK_EQ(s->next_try, at);
    CHECK(at > t0 + 900 - 300 - 16);
    fake_now = at - 1;
    settle(&p, 1);
    CHECK_RC(simba__memstore_read(store, "renew", &r, NULL, 0), SIMBA_OK);
    CHECK_EQ(r.ttl_left_ms, 900 - (at - 1 - t0)); /* not renewed yet */
    fake_now = at;
    settle(&p, 1);
    CHECK_RC(simba__memstore_read(store, "renew", &r, NULL, 0), SIMBA_OK);
    CHECK_EQ(r.ttl_left_ms, 900); /* renewed exactly then */
    CHECK_EQ(r.held_ms, at - t0); /* acquired_at kept */
    CHECK_EQ(s->lease_end, at + 900);
    advance(&p, 1, 10000, 50);
    CHECK_EQ(c.acquired, 1); /* renewals are silent */
    CHECK_EQ(c.released, 0);
    CHECK_EQ(c.owner_changes, 1);
    proc_close(&p);
    store_free();
}

/* The memory backend's vt, declaring a session-derived lease (as ZooKeeper's does). */
static simba_backend_vt session_vt;
static void declare_session_lease(proc *p) {
    session_vt = *simba_backend_vt_get(p->be);
    session_vt.lease = SIMBA_LEASE_SESSION;
    p->be->vt = &session_vt;
}

TEST(renew_margin_capped_by_granted_session_lease) {
    proc p;
    rec c = {0};
    simba_service *s;
    int64_t t0;
    store_new();
    proc_open(&p);
    declare_session_lease(&p);
    s = contender(&p, "cap", "a", 9000, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    t0 = fake_now;
    /* the session grants only 1200 ms (less than ttl_ms): renew at half of it, not at
       lease_end - 3000 (which would be in the past and renew continuously) */
    simba__learn(s, &(simba_reply){.owner = "a", .ttl_left_ms = 1200, .transition_left_ms = 1800, .fence = s->own_fence}, t0);
    CHECK_EQ(s->lease_end, t0 + 1200);
    CHECK_EQ(s->next_try, renew_grid(t0 + 600, 32)); /* margin 600: a grid of 32 ms */
    proc_close(&p);
    store_free();
}

TEST(asked_lease_grant_clamped_to_what_was_asked) {
    proc p;
    rec c = {0};
    simba_service *s;
    int64_t t0;
    store_new();
    proc_open(&p);
    CHECK_EQ(simba_backend_vt_get(p.be)->lease, SIMBA_LEASE_ASKED);
    s = contender(&p, "clamp", "a", 900, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    t0 = fake_now;
    /* a grant ten times longer than asked: the owner believes only what it asked for */
    simba__learn(s, &(simba_reply){.owner = "a", .ttl_left_ms = 9000, .transition_left_ms = 15000, .fence = s->own_fence}, t0);
    CHECK_EQ(s->lease_end, t0 + 900);
    CHECK_EQ(s->view.ttl_at, t0 + 900);
    CHECK_EQ(s->view.transition_at, t0 + 900 + 600);
    CHECK_EQ(s->next_try, renew_grid(t0 + 600, 16)); /* margin 300: a grid of 16 ms */
    /* a session lease is taken as granted */
    declare_session_lease(&p);
    simba__learn(s, &(simba_reply){.owner = "a", .ttl_left_ms = 9000, .transition_left_ms = 15000, .fence = s->own_fence}, t0);
    CHECK_EQ(s->lease_end, t0 + 9000);
    CHECK_EQ(s->view.transition_at, t0 + 15000);
    proc_close(&p);
    store_free();
}

/* SIMBA_EV_DISCONNECTED steps down only the owners whose desc asks for it. */
TEST(disconnect_steps_down_only_owners_that_ask) {
    proc p;
    rec keep = {0}, drop = {0};
    simba_service *k, *d;
    simba_contend_desc cd = {0};
    simba_locker_desc ld = {0};
    simba_scheduler_desc sd = {0};
    simba_locker *lk;
    simba_scheduler *sc;
    simba_memory_fault f = {0};
    int64_t t0;
    store_new();
    proc_open(&p);
    k = contender(&p, "disc-keep", "a", 900, 600, &keep);
    cd.mutex = "disc-drop";
    cd.contender_id = "a";
    cd.ttl_ms = 900;
    cd.transition_ms = 600;
    cd.on_acquired = on_acq;
    cd.on_released = on_rel;
    cd.user_data = &drop;
    cd.step_down_on_disconnect = 1;
    CHECK_RC(simba_contend(p.loop, p.be, &cd, &d), SIMBA_OK);
    ld.mutex = "disc-locker";
    ld.ttl_ms = 900;
    ld.on_lost = lk_lost_count;
    ld.step_down_on_disconnect = 1;
    CHECK_RC(simba_locker_new(p.loop, p.be, &ld, &lk), SIMBA_OK);
    sd.mutex = "disc-sched";
    sd.ttl_ms = 900;
    sd.period_ms = 100;
    sd.work = noop_work;
    sd.step_down_on_disconnect = 1;
    CHECK_RC(simba_scheduler_new(p.loop, p.be, &sd, &sc), SIMBA_OK);
    CHECK_RC(simba_start(k), SIMBA_OK);
    CHECK_RC(simba_start(d), SIMBA_OK);
    CHECK_RC(simba_scheduler_start(sc), SIMBA_OK);
    CHECK_RC(simba_locker_lock(lk, 0), SIMBA_OK);
    settle(&p, 1);
    CHECK(simba_is_owner(k) && simba_is_owner(d) && simba_scheduler_is_owner(sc));
    t0 = fake_now;
    lk_lost_calls = 0;
    f.fail = 1; /* the server is out of reach: nobody gets it back at once */
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    simba_backend_event(p.be, SIMBA_EV_DISCONNECTED, NULL, NULL, NULL);
    settle(&p, 1);
    CHECK_EQ(fake_now, t0);
    CHECK_EQ(drop.released, 1);
    CHECK_EQ(drop.reason, SIMBA_REASON_CONNECTION);
    CHECK(!simba_is_owner(d));
    CHECK_EQ(lk_lost_calls, 1);
    CHECK(!simba_locker_is_owner(lk));
    CHECK(!simba_scheduler_is_owner(sc));
    CHECK_EQ(keep.released, 0); /* keeps its lease: the server may still hold it */
    CHECK(simba_is_owner(k));
    f.fail = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_scheduler_free(sc), SIMBA_OK);
    CHECK_RC(simba_locker_unlock(lk), SIMBA_ELOST); /* the lock was lost before the unlock */
    CHECK_EQ(simba_locker_last_reason(lk), SIMBA_REASON_CONNECTION);
    CHECK_RC(simba_locker_free(lk), SIMBA_OK);
    proc_close(&p);
    store_free();
}

TEST(non_owner_jitter_bounds) {
    proc p[2];
    rec ca = {0}, cb = {0};
    simba_service *a, *b;
    int64_t t0;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = contender(&p[0], "jit", "a", 1000, 600, &ca);
    b = contender(&p[1], "jit", "b", 1000, 600, &cb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    t0 = fake_now;
    fake_rand_value = 0; /* lowest jitter: jitter_min = -200 */
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 2);
    CHECK_EQ(b->view.transition_at, t0 + 1600);
    CHECK_EQ(b->next_try, t0 + 1600 + 1); /* b asked and is first in line: lease end */
    CHECK_STR(b->view.id, "a");
    simba__learn(b, &(simba_reply){.owner = "a", .ttl_left_ms = 1000, .transition_left_ms = 1600, .fence = a->own_fence}, fake_now);
    CHECK_EQ(b->next_try, t0 + 1600 - 200);
    /* highest jitter: (2^64-1) mod 1200 above jitter_min, i.e. just below jitter_max */
    fake_rand_value = 0xffffffffu;
    simba__learn(b, &(simba_reply){.owner = "a", .ttl_left_ms = 1000, .transition_left_ms = 1600, .fence = a->own_fence}, fake_now);
    CHECK_EQ(b->next_try, t0 + 1600 - 200 + (int64_t)(UINT64_MAX % 1200u));
    CHECK(b->next_try < t0 + 1600 + 1000);
    /* the head of the line tries right at lease end, no jitter */
    simba__learn(b, &(simba_reply){.owner = "a", .ttl_left_ms = 1000, .transition_left_ms = 1600, .fence = a->own_fence, .first_in_line = 1},
                 fake_now);
    CHECK_EQ(b->next_try, t0 + 1600 + 1);
    /* an attempt inside the window never retries sooner than min_retry (no spinning) */
    fake_rand_value = 0;
    simba__learn(b, &(simba_reply){.owner = "a", .ttl_left_ms = 10, .transition_left_ms = 20, .fence = a->own_fence}, fake_now);
    CHECK_EQ(b->next_try, fake_now + 50);
    CHECK_EQ(cb.acquired, 0);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
    fake_rand_value = 0;
}

TEST(forged_announcement_delays_at_most_one_lease) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_reply forged = {0};
    store_new();
    proc_open(&p);
    s = contender(&p, "forged", "a", 1000, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    forged.owner = "ghost";
    forged.ttl_left_ms = 1000000000; /* eleven days */
    forged.transition_left_ms = 1000000000;
    forged.fence = 99;
    simba_stop(s);
    settle(&p, 1);
    CHECK_RC(simba_start(s), SIMBA_OK);
    simba_backend_event(p.be, SIMBA_EV_OWNER, "forged", NULL, &forged);
    fake_rand_value = 0;
    settle(&p, 1);
    /* the store says nobody owns it, so s owns it; but a waiter that believed the forged
       announcement would wait at most ttl + transition + jitter_max */
    simba__learn(s, &(simba_reply){.owner = "ghost", .ttl_left_ms = 1000000000, .transition_left_ms = 1000000000}, fake_now);
    CHECK(s->next_try <= fake_now + 1000 + 600 + 1000);
    /* malformed owner ids from a backend never reach the user */
    simba_backend_event(p.be, SIMBA_EV_OWNER, "forged", NULL, &(simba_reply){.owner = "bad id"});
    settle(&p, 1);
    CHECK(strcmp(s->view.id, "bad id") != 0);
    proc_close(&p);
    store_free();
}

TEST(transition_zero_jitter_and_no_owner_at_once) {
    proc p;
    rec c = {0};
    simba_service *s;
    store_new();
    proc_open(&p);
    s = contender(&p, "tz", "a", 1000, 0, &c);
    CHECK_EQ(s->tp->v.jmin, 0);
    CHECK_EQ(s->tp->v.jmax, 1000);
    CHECK_RC(simba_start(s), SIMBA_OK);
    CHECK_EQ(s->next_try, fake_now); /* nobody known: at once */
    fake_rand_value = 0;
    simba__learn(s, &(simba_reply){.owner = "zz", .ttl_left_ms = 500, .transition_left_ms = 500}, fake_now);
    CHECK_EQ(s->next_try, fake_now + 500); /* jitter 0 at the low end */
    simba__learn(s, &(simba_reply){.owner = NULL}, fake_now);
    CHECK_EQ(s->next_try, fake_now); /* nobody: at once */
    simba__learn(s, &(simba_reply){.owner = NULL}, fake_now);
    CHECK_EQ(s->next_try, fake_now + 50); /* but not twice in a row */
    proc_close(&p);
    store_free();
}

TEST(backoff_after_errors_is_bounded) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_memory_fault f = {0};
    int i;
    int64_t prev_backoff = 0;
    store_new();
    proc_open(&p);
    s = contender(&p, "bo", "a", 1000, 500, &c);
    f.fail = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    for (i = 0; i < 12; i++) {
        settle(&p, 1);
        CHECK(s->backoff >= prev_backoff);
        CHECK(s->backoff >= 100 && s->backoff <= 5000);
        CHECK(s->next_try >= fake_now + s->backoff / 2 && s->next_try <= fake_now + s->backoff);
        prev_backoff = s->backoff;
        fake_now = s->next_try;
    }
    CHECK_EQ(s->backoff, 5000);
    CHECK(strstr(simba_backend_errmsg(p.be), "injected") != NULL);
    f.fail = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(c.acquired, 1);
    CHECK_EQ(s->backoff, 0);
    proc_close(&p);
    store_free();
}

/* ---- one duration limit, the backend's lease bound, the data-loss quarantine ------------------- */

/* Every duration is checked against SIMBA_MAX_MS the same way, with words naming the field,
   the value and the bound; a backend's max_lease_ms refuses a longer lease at creation. */
TEST(one_duration_limit_and_the_backends_lease_bound) {
    proc p;
    simba_contend_desc d;
    simba_locker_desc ld;
    simba_scheduler_desc sd;
    simba_service *s = NULL;
    simba_locker *lk = NULL;
    simba_scheduler *sc = NULL;
    store_new();
    proc_open(&p);
    memset(&d, 0, sizeof d);
    d.mutex = "dur";
    d.contender_id = "a";
    d.ttl_ms = SIMBA_MAX_MS + 1;
    d.transition_ms = 0;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "ttl_ms = 1099511627777") != NULL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "SIMBA_MAX_MS") != NULL);
    d.ttl_ms = SIMBA_MAX_MS; /* the bound itself is accepted, the lease too */
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_service_free(s), SIMBA_OK);
    d.transition_ms = 1; /* but not a lease over it */
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "ttl_ms + transition_ms") != NULL);
    CHECK_RC(simba_backend_set_max_lease(p.be, -1), SIMBA_EINVAL);
    CHECK_RC(simba_backend_set_max_lease(p.be, SIMBA_MAX_MS + 1), SIMBA_EINVAL);
    CHECK_EQ(simba_backend_max_lease(p.be), 0);
    CHECK_RC(simba_backend_set_max_lease(p.be, 5000), SIMBA_OK);
    CHECK_EQ(simba_backend_max_lease(p.be), 5000);
    d.ttl_ms = 3000;
    d.transition_ms = 2000;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_service_free(s), SIMBA_OK);
    d.transition_ms = 2001;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "simba_contend: ttl_ms + transition_ms = 5001 exceeds") != NULL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "max_lease_ms = 5000") != NULL);
    d.ttl_ms = d.transition_ms = 0; /* the defaults (16 s) are over this bound too */
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_EINVAL);
    memset(&ld, 0, sizeof ld);
    ld.mutex = "dur";
    ld.ttl_ms = 4000;
    ld.transition_ms = 1001;
    CHECK_RC(simba_locker_new(p.loop, p.be, &ld, &lk), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "simba_locker_new: ttl_ms + transition_ms = 5001") != NULL);
    ld.transition_ms = 1000;
    CHECK_RC(simba_locker_new(p.loop, p.be, &ld, &lk), SIMBA_OK);
    CHECK_RC(simba_locker_lock(lk, SIMBA_MAX_MS + 1), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "simba_locker_lock: timeout_ms = 1099511627777") != NULL);
    CHECK_RC(simba_locker_unlock_wait(lk, INT64_MAX), SIMBA_EINVAL);
    CHECK_RC(simba_wait(p.loop, SIMBA_MAX_MS + 1), SIMBA_EINVAL);
    CHECK_RC(simba_locker_free(lk), SIMBA_OK);
    CHECK_RC(simba_lock(p.loop, p.be, "dur", (int64_t)1 << 62, &lk), SIMBA_EINVAL); /* default lease: over the bound */
    CHECK(strstr(simba_loop_errmsg(p.loop), "simba_lock: timeout_ms") != NULL);
    memset(&sd, 0, sizeof sd);
    sd.mutex = "sched";
    sd.ttl_ms = 3000;
    sd.transition_ms = 2000;
    sd.work = noop_work;
    sd.period_ms = SIMBA_MAX_MS + 1;
    CHECK_RC(simba_scheduler_new(p.loop, p.be, &sd, &sc), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "period_ms = 1099511627777") != NULL);
    sd.period_ms = SIMBA_MAX_MS;
    sd.initial_delay_ms = SIMBA_MAX_MS + 1;
    CHECK_RC(simba_scheduler_new(p.loop, p.be, &sd, &sc), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "initial_delay_ms") != NULL);
    sd.initial_delay_ms = 0;
    sd.transition_ms = 2001;
    CHECK_RC(simba_scheduler_new(p.loop, p.be, &sd, &sc), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "simba_scheduler_new: ttl_ms + transition_ms = 5001") != NULL);
    sd.transition_ms = 2000;
    CHECK_RC(simba_scheduler_new(p.loop, p.be, &sd, &sc), SIMBA_OK);
    CHECK_RC(simba_scheduler_free(sc), SIMBA_OK);
    proc_close(&p);
    store_free();
}

/* A backend in its data-loss quarantine: every new grant is refused with the time left. */
static int64_t quar_end;
static simba_result (*quar_mem_submit)(void *, simba_req *);
static simba_result quar_submit(void *impl, simba_req *r) {
    if (r->op == SIMBA_OP_ACQUIRE && !r->renew && fake_now < quar_end) {
        simba_reply rep;
        memset(&rep, 0, sizeof rep);
        rep.rc = SIMBA_EBACKEND;
        rep.errmsg = "test: the marker was missing (first use)";
        rep.held_ms = -1;
        rep.quarantine_ms = quar_end - fake_now;
        simba_req_done(r, &rep);
        return SIMBA_OK;
    }
    return quar_mem_submit(impl, r);
}
static int quar_events;
static simba_service_event quar_last;
static void quar_on_event(simba_service *s, const simba_service_event *ev, void *u) {
    (void)s;
    (void)u;
    quar_events++;
    quar_last = *ev;
}
static int warn_quarantine_logs;
static void quar_log(void *u, simba_log_level lv, const char *msg) {
    (void)u;
    if (lv == SIMBA_LOG_WARN && strstr(msg, "no grant for") && strstr(msg, "first use")) warn_quarantine_logs++;
}

/* The quarantine is an event, not a silent wait: on_event once with when grants resume and
   the backend's words, a WARN, the stats; and the grant comes right at its end, not on the
   error backoff (which would overshoot it by up to backoff_max). */
TEST(quarantine_is_an_event_and_the_grant_comes_at_its_end) {
    proc p;
    rec c = {0};
    simba_contend_desc d;
    simba_service *s = NULL;
    simba_loop_desc ld;
    static simba_backend_vt spy;
    simba_stats st;
    int64_t t0;
    store_new();
    memset(&ld, 0, sizeof ld);
    ld.now_ms = fake_clock;
    ld.random = fake_rand;
    ld.log = quar_log;
    ld.log_level = SIMBA_LOG_WARN;
    ld.poll_budget_us = 3600000000;
    CHECK_RC(simba_loop_new(&ld, &p.loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p.loop, store, &p.be), SIMBA_OK);
    spy = *simba_backend_vt_get(p.be);
    quar_mem_submit = spy.submit;
    spy.submit = quar_submit;
    p.be->vt = &spy;
    t0 = fake_now;
    quar_end = t0 + 16000;
    quar_events = warn_quarantine_logs = 0;
    memset(&d, 0, sizeof d);
    d.mutex = "q";
    d.contender_id = "a";
    d.ttl_ms = 10000;
    d.transition_ms = 6000;
    d.on_acquired = on_acq;
    d.on_released = on_rel;
    d.on_event = quar_on_event;
    d.user_data = &c;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(quar_events, 1);
    CHECK_EQ(quar_last.type, SIMBA_EVENT_QUARANTINE);
    CHECK_EQ(quar_last.until, quar_end);
    CHECK_EQ(quar_last.left_ms, 16000);
    CHECK(quar_last.msg && strstr(quar_last.msg, "first use") != NULL);
    CHECK_EQ(warn_quarantine_logs, 1);
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(simba_service_stats(s, &st), SIMBA_OK);
    CHECK_EQ(st.version, 3);
    CHECK_EQ(st.quarantines, 1);
    CHECK_EQ(st.quarantine_left_ms, 16000);
    /* no ask inside the quarantine, and no second event */
    advance(&p, 1, 15999, 1000);
    CHECK_EQ(c.acquired, 0);
    CHECK_EQ(quar_events, 1);
    CHECK_EQ((int)st.attempts, 1);
    CHECK_RC(simba_service_stats(s, &st), SIMBA_OK);
    CHECK_EQ((int)st.attempts, 1);
    CHECK_EQ(st.quarantine_left_ms, 1);
    /* granted right after it: within min_retry (50 ms) of its end */
    WAIT_FOR_SIM(&p, 1, c.acquired == 1, 1000);
    CHECK_EQ(c.acquired, 1);
    CHECK(c.acquired_at > quar_end && c.acquired_at <= quar_end + 51);
    CHECK_RC(simba_service_stats(s, &st), SIMBA_OK);
    CHECK_EQ(st.quarantines, 1);
    CHECK_EQ(st.quarantine_left_ms, 0);
    CHECK_EQ(quar_events, 1);
    CHECK_RC(simba_loop_stats(p.loop, &st), SIMBA_OK);
    CHECK_EQ(st.quarantines, 1);
    proc_close(&p);
    store_free();
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

TEST(illegal_lifecycle_calls) {
    proc p;
    rec c = {0};
    simba_service *s, *s2;
    simba_contend_desc d = {0};
    store_new();
    proc_open(&p);
    s = contender(&p, "life", "a", 1000, 500, &c);
    CHECK_EQ(simba_service_status(s), SIMBA_INITIAL);
    CHECK_RC(simba_stop(s), SIMBA_ESTATE);
    CHECK_RC(simba_start(s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_ESTATE);
    settle(&p, 1);
    CHECK_EQ(c.acquired, 1);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    CHECK(!simba_is_owner(s));
    CHECK_EQ(simba_fence(s), 0);
    CHECK_RC(simba_stop(s), SIMBA_ESTATE);
    CHECK_RC(simba_start(s), SIMBA_ESTATE); /* still STOPPING until the release is answered */
    CHECK_EQ(simba_service_status(s), SIMBA_STOPPING);
    CHECK_EQ(c.released, 0); /* callbacks only inside the poll */
    settle(&p, 1);
    CHECK_EQ(c.released, 1);
    CHECK_EQ(simba_service_status(s), SIMBA_INITIAL);
    CHECK_RC(simba_start(s), SIMBA_OK); /* restart, same id */
    settle(&p, 1);
    CHECK_EQ(c.acquired, 2);
    CHECK_STR(simba_service_contender_id(s), "a");
    /* duplicate contender id on the same mutex and backend */
    d.mutex = "life";
    d.contender_id = "a";
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EEXIST);
    CHECK(s2 == NULL);
    /* bad arguments */
    CHECK_RC(simba_start(NULL), SIMBA_EINVAL);
    CHECK_RC(simba_stop(NULL), SIMBA_EINVAL);
    CHECK_RC(simba_service_free(NULL), SIMBA_EINVAL);
    CHECK_RC(simba_contend(NULL, p.be, &d, &s2), SIMBA_EINVAL);
    CHECK_RC(simba_contend(p.loop, NULL, &d, &s2), SIMBA_EINVAL);
    CHECK_RC(simba_contend(p.loop, p.be, NULL, &s2), SIMBA_EINVAL);
    CHECK_RC(simba_contend(p.loop, p.be, &d, NULL), SIMBA_EINVAL);
    d.contender_id = "b";
    d.ttl_ms = -1;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    d.ttl_ms = 0;
    d.transition_ms = 5;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "ttl_ms") != NULL);
    d.ttl_ms = 10;
    d.transition_ms = -1;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    d.transition_ms = SIMBA_MAX_MS + 1;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    d.transition_ms = 0;
    d.ttl_ms = INT64_MAX;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    d.ttl_ms = 100;
    d.renew_margin_ms = 100;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    d.renew_margin_ms = 0;
    d.jitter_min_ms = 10;
    d.jitter_max_ms = 10;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    d.jitter_min_ms = d.jitter_max_ms = 0;
    d.backoff_min_ms = 200;
    d.backoff_max_ms = 100;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    d.backoff_min_ms = d.backoff_max_ms = 0;
    d.mutex = "bad name";
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    d.mutex = "ok";
    d.contender_id = "bad id";
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s2), SIMBA_EINVAL);
    /* nothing above disturbed the owner */
    CHECK(simba_is_owner(s));
    CHECK_EQ(c.acquired, 2);
    CHECK_RC(simba_service_free(s), SIMBA_OK);
    settle(&p, 1);
    {
        simba_reply r;
        CHECK_RC(simba__memstore_read(store, "life", &r, NULL, 0), SIMBA_OK);
        CHECK(r.owner == NULL); /* free released it */
    }
    proc_close(&p);
    store_free();
}

TEST(defaults_and_zero_desc) {
    proc p;
    simba_service *s;
    simba_contend_desc d = {0};
    store_new();
    proc_open(&p);
    d.mutex = "defaults";
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_OK);
    CHECK_EQ(s->tp->v.ttl, 10000);
    CHECK_EQ(s->tp->v.transition, 6000);
    CHECK_EQ(s->tp->v.renew_margin, 3333);
    CHECK_EQ(s->tp->v.jmin, -200);
    CHECK_EQ(s->tp->v.jmax, 1000);
    CHECK_EQ(s->tp->v.min_retry, 50);
    CHECK(simba_id_check(simba_service_contender_id(s)) == SIMBA_OK);
    CHECK(strchr(simba_service_contender_id(s), '@') != NULL);
    proc_close(&p);
    store_free();
}

static simba_loop *cb_loop;
static int cb_poll_rc, cb_wait_rc;
static void acq_tries_poll(simba_service *s, const simba_state *st, void *u) {
    (void)st;
    (void)u;
    cb_poll_rc = (int)simba_poll(cb_loop);
    cb_wait_rc = simba_wait(cb_loop, 0);
    CHECK_RC(simba_stop(s), SIMBA_OK); /* deferred until dispatch returns */
    CHECK_EQ(simba_service_status(s), SIMBA_STOPPING);
}

TEST(poll_from_callback_refused_stop_deferred) {
    proc p;
    simba_service *s;
    simba_contend_desc d = {0};
    rec c = {0};
    store_new();
    proc_open(&p);
    cb_loop = p.loop;
    d.mutex = "cb";
    d.contender_id = "a";
    d.ttl_ms = 1000;
    d.on_acquired = acq_tries_poll;
    d.on_released = on_rel;
    d.user_data = &c;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(cb_poll_rc, SIMBA_ECALLBACK);
    CHECK_EQ(cb_wait_rc, SIMBA_ECALLBACK);
    CHECK_EQ(c.released, 1);
    CHECK_EQ(simba_service_status(s), SIMBA_INITIAL);
    proc_close(&p);
    store_free();
}

static void acq_frees_self(simba_service *s, const simba_state *st, void *u) {
    (void)st;
    ++*(int *)u;
    CHECK_RC(simba_service_free(s), SIMBA_OK);
}

TEST(free_from_callback_deferred) {
    proc p;
    simba_service *s;
    simba_contend_desc d = {0};
    int n = 0;
    simba_reply r;
    store_new();
    proc_open(&p);
    d.mutex = "cbfree";
    d.contender_id = "a";
    d.ttl_ms = 1000;
    d.on_acquired = acq_frees_self;
    d.user_data = &n;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(n, 1);
    CHECK_RC(simba__memstore_read(store, "cbfree", &r, NULL, 0), SIMBA_OK);
    CHECK(r.owner == NULL);
    CHECK(p.loop->services == NULL);
    proc_close(&p);
    store_free();
}

TEST(stale_acquire_after_stop_is_released) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_memory_fault f = {0};
    simba_reply r;
    store_new();
    proc_open(&p);
    s = contender(&p, "stale", "a", 1000, 500, &c);
    f.delay_ms = 100;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1); /* acquire in flight */
    CHECK_RC(simba_stop(s), SIMBA_OK);
    advance(&p, 1, 300, 10);
    CHECK_EQ(c.acquired, 0); /* the late grant never reached the user */
    CHECK_EQ(c.released, 0);
    CHECK_EQ(simba_service_status(s), SIMBA_INITIAL);
    CHECK_RC(simba__memstore_read(store, "stale", &r, NULL, 0), SIMBA_OK);
    CHECK(r.owner == NULL); /* and was released */
    proc_close(&p);
    store_free();
}

/* ---- lease safety ------------------------------------------------------------------------- */

TEST(hung_backend_owner_steps_down_before_anyone_wins) {
    proc p[2];
    rec ca = {0}, cb = {0};
    simba_service *a, *b;
    simba_memory_fault f = {0};
    int64_t t_renewal_sent, deadline;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = contender(&p[0], "safe", "a", 1000, 600, &ca);
    b = contender(&p[1], "safe", "b", 1000, 600, &cb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 2);
    REQUIRE(ca.acquired == 1);
    /* a's server stops answering: its renewals hang */
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    deadline = a->lease_end;
    t_renewal_sent = a->next_try;
    advance(p, 2, 5000, 5);
    CHECK(t_renewal_sent < deadline);
    CHECK_EQ(ca.released, 1);
    CHECK(ca.released_at <= deadline); /* by its local deadline */
    CHECK_EQ(cb.acquired, 1);
    CHECK(cb.acquired_at > ca.released_at);
    CHECK(cb.acquired_at >= ca.released_at + 600); /* the transition window separates them */
    CHECK(!simba_is_owner(a));
    CHECK(simba_is_owner(b));
    CHECK(cb.last_fence > ca.last_fence);
    /* a late answer to the hung renewal must not make a believe it owns again */
    f.hang = 0;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    advance(p, 2, 3000, 5);
    CHECK_EQ(ca.acquired, 1);
    CHECK(simba_is_owner(b));
    CHECK_STR(a->view.id, "b");
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

/* A renewal that is confirmed only after the owner stepped down locally ends that tenure:
   the next on_acquired is a new ownership with a greater fence (late writes of the old
   tenure stay rejectable). */
TEST(reacquire_after_local_step_down_gets_new_fence) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_memory_fault f = {0};
    uint64_t f1;
    store_new();
    proc_open(&p);
    s = contender(&p, "refence", "a", 1000, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(c.acquired == 1);
    f1 = c.last_fence;
    f.delay_ms = 500; /* the renewal (sent at ttl - 333) is answered after the local ttl_at */
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 1000, 5);
    CHECK_EQ(c.released, 1);
    f.delay_ms = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 2000, 5);
    CHECK_EQ(c.acquired, 2);
    CHECK(c.last_fence > f1);
    CHECK(simba_is_owner(s));
    CHECK_EQ(simba_fence(s), c.last_fence);
    proc_close(&p);
    store_free();
}

/* simba_memory_check_fence judges by the store's clock to the millisecond, as a grant does:
   the fence holds through the last ms of the transition window and not one ms more; its
   write runs only when it holds. */
static void count_write(void *u) { (*(int *)u)++; }
TEST(memory_fence_check_ends_with_the_lease_by_the_store_clock) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_reply r;
    char owner[SIMBA_ID_MAX + 1], err[256];
    int writes = 0;
    uint64_t f;
    store_new();
    proc_open(&p);
    s = contender(&p, "fenced", "a", 1000, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(c.acquired == 1);
    f = c.last_fence;
    CHECK_RC(simba_memory_check_fence(store, "fenced", f, count_write, &writes, err, sizeof err), SIMBA_OK);
    CHECK_EQ(writes, 1);
    CHECK_STR(err, "");
    /* the process stands still: its lease runs out on the store's clock */
    CHECK_RC(simba__memstore_read(store, "fenced", &r, owner, sizeof owner), SIMBA_OK);
    fake_now += r.transition_left_ms;
    CHECK_RC(simba_memory_check_fence(store, "fenced", f, count_write, &writes, err, sizeof err), SIMBA_OK);
    CHECK_EQ(writes, 2);
    fake_now += 1;
    CHECK_RC(simba_memory_check_fence(store, "fenced", f, count_write, &writes, err, sizeof err), SIMBA_EFENCE);
    CHECK_EQ(writes, 2);
    CHECK(strstr(err, "is over (ended 1 ms ago") != NULL);
    /* the process wakes: the core steps down, asks again and gets a new tenure */
    advance(&p, 1, 100, 5);
    CHECK_EQ(c.acquired, 2);
    CHECK(c.last_fence > f);
    CHECK_RC(simba_memory_check_fence(store, "fenced", f, count_write, &writes, err, sizeof err), SIMBA_EFENCE);
    CHECK(strstr(err, "moved on") != NULL);
    CHECK_RC(simba_memory_check_fence(store, "fenced", c.last_fence, NULL, NULL, NULL, 0), SIMBA_OK);
    CHECK_EQ(writes, 2);
    proc_close(&p);
    store_free();
}

/* A store that forgot its records grants nobody until the leases it gave before the loss
   have ended: the owner steps down inside its own ttl first, and the next owner's fence is
   above every earlier one even though the records (and their fences) are gone. */
TEST(store_data_loss_quarantines_grants_and_keeps_fences_growing) {
    proc p[2];
    rec a = {0}, b = {0};
    simba_service *sa, *sb;
    uint64_t f1;
    int64_t lost_at, b_at = 0;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    sa = contender(&p[0], "forget", "a", 1000, 600, &a);
    sb = contender(&p[1], "forget", "b", 1000, 600, &b);
    CHECK_RC(simba_start(sa), SIMBA_OK);
    settle(p, 2);
    CHECK_RC(simba_start(sb), SIMBA_OK);
    settle(p, 2);
    REQUIRE(a.acquired == 1);
    f1 = a.last_fence;
    advance(p, 2, 500, 5);
    CHECK_RC(simba_memstore_lose(store), SIMBA_OK);
    lost_at = fake_now;
    while (fake_now < lost_at + 4000) {
        advance(p, 2, 1, 1);
        CHECK(!(simba_is_owner(sa) && simba_is_owner(sb)));
        if (!b_at && b.acquired) b_at = fake_now;
    }
    CHECK_EQ(a.released, 1);
    CHECK_EQ(a.reason, SIMBA_REASON_LAPSED);
    CHECK(a.released_at <= lost_at + 1000);
    CHECK_EQ(b.acquired, 1);
    CHECK(b_at >= lost_at + 1600);
    CHECK(b.last_fence > f1);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

/* A store that loses its latest writes (a crash with asynchronous commits, a promoted
   replica) can come back with an older record of the owner, from a tenure that ended: its
   renewal then answers with that tenure's lower fence. The owner steps down rather than own
   it with a fence it has gone past, and its next ownership's fence is above both (the
   simulator's pg crash and redis failover reach this: tests/sim.c). */
TEST(renewal_answered_with_an_older_fence_is_not_ownership) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_memory_fault f = {0};
    simba__mentry *e;
    uint64_t f1, f2;
    int64_t acq;
    store_new();
    proc_open(&p);
    s = contender(&p, "goback", "a", 1000, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(c.acquired == 1);
    f1 = c.last_fence;
    e = (simba__mentry *)simba__hfind(&store->entries, "goback");
    REQUIRE(e != NULL);
    acq = e->acquired_at;
    f.delay_ms = 500; /* a renewal answered late: the tenure lapses, the next ask gets a new fence */
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 1000, 5);
    f.delay_ms = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 2000, 5);
    REQUIRE(c.acquired == 2);
    f2 = c.last_fence;
    REQUIRE(f2 > f1);
    /* the store loses its latest writes and comes back with the first tenure's record */
    CHECK_RC(simba_memstore_lose(store), SIMBA_OK);
    simba__copy(e->owner, sizeof e->owner, "a");
    e->fence = f1;
    e->acquired_at = acq;
    e->ttl_at = fake_now + 1000;
    e->transition_at = fake_now + 1600;
    advance(&p, 1, 1000, 5);
    CHECK_EQ(c.released, 2);
    CHECK_EQ(c.reason, SIMBA_REASON_REFUSED);
    CHECK(c.last_fence >= f2);
    advance(&p, 1, 8000, 5);
    CHECK_EQ(c.acquired, 3);
    CHECK(c.last_fence > f2);
    CHECK(simba_is_owner(s));
    proc_close(&p);
    store_free();
}

TEST(is_owner_checks_time_even_without_poll) {
    proc p;
    rec c = {0};
    simba_service *s;
    store_new();
    proc_open(&p);
    s = contender(&p, "stall", "a", 1000, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    CHECK(simba_is_owner(s));
    fake_now += 1000; /* the caller's tick stalled: no poll ran */
    CHECK(!simba_is_owner(s));
    CHECK_EQ(simba_fence(s), 0);
    proc_close(&p);
    store_free();
}

TEST(late_grant_after_local_lapse_is_not_ownership) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_memory_fault f = {0};
    store_new();
    proc_open(&p);
    s = contender(&p, "late", "a", 1000, 600, &c);
    f.delay_ms = 1200; /* the answer comes after the lease it grants has ended locally */
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    advance(&p, 1, 1250, 10);
    CHECK_EQ(c.acquired, 0);
    CHECK(!simba_is_owner(s));
    proc_close(&p);
    store_free();
}

/* ---- notification, push, fences, observers ------------------------------------------------- */

TEST(release_push_wakes_head_waiter_at_once) {
    proc p[3];
    rec ca = {0}, cb = {0}, cc = {0};
    simba_service *a, *b, *cs;
    int64_t t;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    proc_open(&p[2]);
    a = contender(&p[0], "push", "a", 10000, 6000, &ca);
    b = contender(&p[1], "push", "b", 10000, 6000, &cb);
    cs = contender(&p[2], "push", "c", 10000, 6000, &cc);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 3);
    fake_now += 10;
    CHECK_RC(simba_start(cs), SIMBA_OK);
    settle(p, 3);
    CHECK(b->next_try > fake_now + 10000);
    fake_now += 100;
    t = fake_now;
    CHECK_RC(simba_stop(a), SIMBA_OK);
    settle(p, 3);
    CHECK_EQ(ca.released, 1);
    CHECK_EQ(cb.acquired, 1); /* b was first in line: woken by the push, no timer */
    CHECK_EQ(cb.acquired_at, t);
    CHECK_EQ(cc.acquired, 0); /* only one waiter is woken */
    CHECK(cb.last_fence == ca.last_fence + 1);
    proc_close(&p[0]);
    proc_close(&p[1]);
    proc_close(&p[2]);
    store_free();
}

/* req->deferrable marks a waiter's own timer asks: SIMBA_DEFER_ROUTINE while it expects no
   win (another owner's lease, as it knows it, still runs), SIMBA_DEFER_TAKEOVER at the lease
   end it knows. Never a first ask (its arrival is its place in line), a renewal, a release,
   or the ask a push woke (a handoff). */
typedef struct { char who; int renew, deferrable, op; } ask_seen;
static ask_seen asks[256];
static int nasks;
static simba_result (*defer_mem_submit)(void *, simba_req *);
static simba_result defer_submit(void *impl, simba_req *r) {
    if (nasks < 256) {
        asks[nasks].who = r->contender[0];
        asks[nasks].renew = r->renew;
        asks[nasks].deferrable = r->deferrable;
        asks[nasks].op = (int)r->op;
        nasks++;
    }
    return defer_mem_submit(impl, r);
}
static int asks_of(char who, int op, int deferrable) {
    int i, n = 0;
    for (i = 0; i < nasks; i++) n += asks[i].who == who && asks[i].op == op && asks[i].deferrable == deferrable;
    return n;
}
/* Starts owner o (on p[0]), then waiter w (on p[1]): their first asks are never held. */
static void start_owner_then_waiter(proc *p, simba_service *o, simba_service *w) {
    int n0 = nasks;
    CHECK_RC(simba_start(o), SIMBA_OK);
    settle(p, 1);
    CHECK_RC(simba_start(w), SIMBA_OK);
    settle(p, 2);
    CHECK_EQ(nasks, n0 + 2);
    CHECK(asks[n0].who == simba_service_contender_id(o)[0] && asks[n0 + 1].who == simba_service_contender_id(w)[0]);
    CHECK(asks[n0].deferrable == SIMBA_DEFER_NO && !asks[n0].renew);
    CHECK(asks[n0 + 1].deferrable == SIMBA_DEFER_NO && !asks[n0 + 1].renew);
}
TEST(only_a_waiters_timer_asks_are_deferrable) {
    static simba_backend_vt spy;
    proc p[2];
    rec ca = {0}, cb = {0}, cx = {0}, cy = {0};
    simba_service *a, *b, *x, *y;
    int i;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    spy = *simba_backend_vt_get(p[1].be);
    defer_mem_submit = spy.submit;
    spy.submit = defer_submit;
    p[0].be->vt = &spy;
    p[1].be->vt = &spy;
    nasks = 0;
    /* a's lease (6 s) outlasts b's own ttl + transition + jitter, which bounds b's sleep:
       b re-asks while a's lease runs, expecting no win */
    a = contender(&p[0], "defer", "a", 4000, 2000, &ca);
    b = contender(&p[1], "defer", "b", 1000, 500, &cb);
    start_owner_then_waiter(p, a, b); /* a wins, b joins the line */
    /* y waits on x's equal lease: it asks at the lease end it knows (x may have died) */
    x = contender(&p[0], "defer-end", "x", 1000, 500, &cx);
    y = contender(&p[1], "defer-end", "y", 1000, 500, &cy);
    start_owner_then_waiter(p, x, y);
    /* a and x renew, b re-asks on its timer expecting no win, y at the lease ends it knows */
    advance(p, 2, 12000, 10);
    CHECK(simba_is_owner(a) && simba_is_owner(x));
    CHECK_EQ(ca.released + cx.released, 0);
    for (i = 4; i < nasks; i++) {
        CHECK(asks[i].op == SIMBA_OP_ACQUIRE);
        if (asks[i].who == 'a' || asks[i].who == 'x') CHECK(asks[i].renew && !asks[i].deferrable);
        else if (asks[i].who == 'b') CHECK(!asks[i].renew && asks[i].deferrable == SIMBA_DEFER_ROUTINE);
        else CHECK(!asks[i].renew && asks[i].deferrable == SIMBA_DEFER_TAKEOVER);
    }
    CHECK(asks_of('a', SIMBA_OP_ACQUIRE, SIMBA_DEFER_NO) >= 3);
    CHECK(asks_of('b', SIMBA_OP_ACQUIRE, SIMBA_DEFER_ROUTINE) >= 4);
    CHECK(asks_of('y', SIMBA_OP_ACQUIRE, SIMBA_DEFER_TAKEOVER) >= 5);
    CHECK(nasks < 256); /* none went unseen */
    /* a's release is pushed to b: b's ask is a handoff, not deferrable */
    nasks = 0;
    CHECK_RC(simba_stop(a), SIMBA_OK);
    settle(p, 2);
    CHECK_EQ(cb.acquired, 1);
    CHECK_EQ(asks_of('a', SIMBA_OP_RELEASE, 0), 1);
    CHECK_EQ(asks_of('b', SIMBA_OP_ACQUIRE, SIMBA_DEFER_NO), 1);
    CHECK_EQ(asks_of('b', SIMBA_OP_ACQUIRE, SIMBA_DEFER_ROUTINE) + asks_of('b', SIMBA_OP_ACQUIRE, SIMBA_DEFER_TAKEOVER), 0);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

static void obs_cb(simba_service *s, const simba_state *st, void *u) {
    char *log = (char *)u;
    (void)s;
    strcat(log, st->after->id[0] ? st->after->id : "-");
    strcat(log, ",");
}

TEST(observer_sees_every_owner_change_and_fences_grow) {
    proc p[3];
    rec ca = {0}, cb = {0};
    simba_service *a, *b, *o;
    simba_observe_desc od = {0};
    char log[256] = "";
    uint64_t f1, f2, f3;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    proc_open(&p[2]);
    od.mutex = "obs";
    od.on_owner = obs_cb;
    od.user_data = log;
    CHECK_RC(simba_observe(p[2].loop, p[2].be, &od, &o), SIMBA_OK);
    CHECK_RC(simba_start(o), SIMBA_OK);
    settle(p, 3);
    a = contender(&p[0], "obs", "a", 1000, 500, &ca);
    b = contender(&p[1], "obs", "b", 1000, 500, &cb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 3);
    f1 = ca.last_fence;
    advance(p, 3, 3000, 10); /* renewals keep the fence */
    CHECK_EQ(simba_fence(a), f1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 3);
    CHECK_RC(simba_stop(a), SIMBA_OK);
    settle(p, 3);
    f2 = cb.last_fence;
    CHECK(f2 > f1);
    CHECK_RC(simba_stop(b), SIMBA_OK);
    settle(p, 3);
    advance(p, 3, 100, 10);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 3);
    f3 = ca.last_fence;
    CHECK(f3 > f2);
    CHECK_STR(log, "a,-,b,-,a,");
    CHECK_STR(o->view.id, "a");
    CHECK_EQ(o->view.fence, f3);
    proc_close(&p[0]);
    proc_close(&p[1]);
    proc_close(&p[2]);
    store_free();
}

/* ---- ten contenders, 30 simulated seconds ----------------------------------------------------- */

static int owners_now, invariant_broken, total_acq;
static void inv_acq(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    (void)st;
    (void)u;
    owners_now++;
    total_acq++;
    if (owners_now != 1) invariant_broken++;
}
static void inv_rel(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    (void)st;
    (void)u;
    owners_now--;
    if (owners_now != 0) invariant_broken++;
}

TEST(ten_contenders_thirty_seconds) {
    proc p[10];
    simba_service *s[10];
    int i, k;
    char id[16];
    simba_reply r;
    char who[SIMBA_ID_MAX + 1];
    store_new();
    owners_now = invariant_broken = total_acq = 0;
    srand(7);
    for (i = 0; i < 10; i++) {
        simba_contend_desc d = {0};
        proc_open(&p[i]);
        snprintf(id, sizeof id, "c%d", i);
        d.mutex = "multi";
        d.contender_id = id;
        d.ttl_ms = 500;
        d.transition_ms = 300;
        d.on_acquired = inv_acq;
        d.on_released = inv_rel;
        CHECK_RC(simba_contend(p[i].loop, p[i].be, &d, &s[i]), SIMBA_OK);
        CHECK_RC(simba_start(s[i]), SIMBA_OK);
    }
    /* 30 s with churn: now and then the owner stops (handoff) or its server hangs for a
       while (step-down by deadline, takeover after the window). */
    for (k = 0; k < 300; k++) {
        advance(p, 10, 100, 7);
        for (i = 0; i < 10; i++) {
            if (simba_is_owner(s[i]) && rand() % 10 == 0) {
                if (rand() % 2) {
                    CHECK_RC(simba_stop(s[i]), SIMBA_OK);
                } else {
                    simba_memory_fault f = {0};
                    f.hang = 1;
                    CHECK_RC(simba_memory_fault_set(p[i].be, &f), SIMBA_OK);
                }
            } else if (simba_service_status(s[i]) == SIMBA_INITIAL && rand() % 5 == 0) {
                CHECK_RC(simba_start(s[i]), SIMBA_OK);
            } else if (p[i].loop && rand() % 20 == 0) {
                simba_memory_fault f = {0};
                CHECK_RC(simba_memory_fault_set(p[i].be, &f), SIMBA_OK);
            }
        }
    }
    CHECK_EQ(invariant_broken, 0);
    CHECK(total_acq > 10); /* the churn really handed over many times */
    /* the end: exactly one owner, and the store agrees */
    for (i = 0; i < 10; i++) {
        simba_memory_fault f = {0};
        CHECK_RC(simba_memory_fault_set(p[i].be, &f), SIMBA_OK);
    }
    advance(p, 10, 100, 7); /* pending stops finish */
    for (i = 0; i < 10; i++)
        if (simba_service_status(s[i]) == SIMBA_INITIAL) CHECK_RC(simba_start(s[i]), SIMBA_OK);
    advance(p, 10, 3000, 7);
    CHECK_EQ(owners_now, 1);
    CHECK_RC(simba__memstore_read(store, "multi", &r, who, sizeof who), SIMBA_OK);
    for (k = 0, i = 0; i < 10; i++) {
        if (simba_is_owner(s[i])) {
            k++;
            CHECK_STR(simba_service_contender_id(s[i]), who);
        }
        CHECK_STR(s[i]->view.id, who); /* everyone agrees */
        CHECK_EQ(simba_service_status(s[i]), SIMBA_RUNNING);
    }
    CHECK_EQ(k, 1);
    fprintf(stderr, "  %d acquisitions in 30 simulated seconds\n", total_acq);
    for (i = 9; i >= 0; i--) proc_close(&p[i]);
    store_free();
}

/* ---- fairness: the wait queue ------------------------------------------------------------ */

static char fair_log[64];
static void fair_acq(simba_service *s, const simba_state *st, void *u) {
    (void)st;
    (void)u;
    strcat(fair_log, simba_service_contender_id(s));
}

static simba_service *fair_contender(proc *p, const char *mutex, const char *id) {
    simba_contend_desc d = {0};
    simba_service *s = NULL;
    d.mutex = mutex;
    d.contender_id = id;
    d.ttl_ms = 1000;
    d.transition_ms = 600;
    d.on_acquired = fair_acq;
    CHECK_RC(simba_contend(p->loop, p->be, &d, &s), SIMBA_OK);
    return s;
}

TEST(queued_waiters_acquire_in_arrival_order) {
    proc p[4];
    simba_service *s[4];
    int i, k;
    store_new();
    fair_log[0] = 0;
    for (i = 0; i < 4; i++) proc_open(&p[i]);
    /* Arrival order is the reverse of polling order (1, 2, 3 = "z", "y", "x" polled last to
       first), so that a free mutex taken by whoever asks first would show a wrong order. */
    s[0] = fair_contender(&p[0], "fifo", "o");
    s[3] = fair_contender(&p[3], "fifo", "x");
    s[2] = fair_contender(&p[2], "fifo", "y");
    s[1] = fair_contender(&p[1], "fifo", "z");
    CHECK_RC(simba_start(s[0]), SIMBA_OK);
    settle(p, 4);
    for (i = 3; i >= 1; i--) {
        fake_now += 5;
        CHECK_RC(simba_start(s[i]), SIMBA_OK);
        settle(p, 4);
    }
    CHECK_STR(fair_log, "o");
    /* Each owner releases in turn; the next one is always the oldest waiter. */
    for (k = 0; k < 3; k++) {
        for (i = 0; i < 4; i++)
            if (simba_is_owner(s[i])) break;
        REQUIRE(i < 4);
        fake_now += 10;
        CHECK_RC(simba_stop(s[i]), SIMBA_OK);
        settle(p, 4);
    }
    CHECK_STR(fair_log, "oxyz");
    for (i = 0; i < 4; i++) proc_close(&p[i]);
    store_free();
}

TEST(releaser_asking_again_at_once_goes_to_the_back) {
    proc p[3];
    simba_service *a, *b, *c;
    int k;
    store_new();
    fair_log[0] = 0;
    for (k = 0; k < 3; k++) proc_open(&p[k]);
    a = fair_contender(&p[0], "back", "a");
    b = fair_contender(&p[1], "back", "b");
    c = fair_contender(&p[2], "back", "c");
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 3);
    fake_now += 5;
    CHECK_RC(simba_start(c), SIMBA_OK);
    settle(p, 3);
    /* a releases and asks again before anyone else runs: it joins the line behind c. */
    for (k = 0; k < 3; k++) {
        simba_service *owner = simba_is_owner(a) ? a : simba_is_owner(b) ? b : c;
        fake_now += 10;
        CHECK_RC(simba_stop(owner), SIMBA_OK);
        settle(p, 1);
        settle(p + 1, 2); /* only now do b and c get to run */
        while (simba_service_status(owner) != SIMBA_INITIAL) settle(p, 3);
        CHECK_RC(simba_start(owner), SIMBA_OK);
        settle(p, 3);
    }
    CHECK_STR(fair_log, "abca");
    for (k = 0; k < 3; k++) proc_close(&p[k]);
    store_free();
}

TEST(waiter_keeps_its_place_through_other_tenures) {
    proc p[4];
    simba_service *a, *b, *c, *d;
    int64_t t0;
    int k;
    store_new();
    fair_log[0] = 0;
    for (k = 0; k < 4; k++) proc_open(&p[k]);
    a = fair_contender(&p[0], "place", "a");
    b = fair_contender(&p[1], "place", "b");
    c = fair_contender(&p[2], "place", "c");
    d = fair_contender(&p[3], "place", "d");
    fake_rand_value = 367; /* (367 << 32 | 367) % 1200 = 1199: jitter max - 1, waiters sleep longest */
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 4);
    fake_now += 5;
    t0 = fake_now;
    CHECK_RC(simba_start(c), SIMBA_OK); /* c: second in line, place lasts t0 + live_ms */
    settle(p, 4);
    advance(p, 4, 1500, 5);
    CHECK_RC(simba_stop(a), SIMBA_OK); /* b takes over; the owner push moves c's timer */
    settle(p, 4);
    CHECK_STR(fair_log, "ab");
    CHECK(c->next_try <= c->asked_at + 1000 + 600 + 1000); /* c asks again before its place lapses */
    fake_now += 100;
    CHECK_RC(simba_start(d), SIMBA_OK); /* d: behind c */
    settle(p, 4);
    advance(p, 4, t0 + 3700 - fake_now, 5); /* b renews past c's first live_ms */
    CHECK_RC(simba_stop(b), SIMBA_OK);
    settle(p, 4);
    CHECK_STR(fair_log, "abc"); /* c, not d: c never lost its place */
    fake_rand_value = 0;
    for (k = 0; k < 4; k++) proc_close(&p[k]);
    store_free();
}

TEST(dead_head_waiter_blocks_no_longer_than_its_liveness) {
    proc p[3]; /* p[2] is the head waiter whose process stops running */
    simba_service *a, *c, *dead;
    simba_stats st;
    int64_t joined, live;
    store_new();
    fair_log[0] = 0;
    proc_open(&p[0]);
    proc_open(&p[1]);
    proc_open(&p[2]);
    a = fair_contender(&p[0], "deadhead", "a");
    c = fair_contender(&p[1], "deadhead", "c");
    dead = fair_contender(&p[2], "deadhead", "d");
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    joined = fake_now;
    CHECK_RC(simba_start(dead), SIMBA_OK);
    settle(p + 2, 1); /* d asks once: first in line; its process is never polled again */
    live = dead->req.live_ms;
    CHECK_EQ(live, 1000 + 600 + 1000 + 1000); /* ttl + transition + jitter max + 1 s */
    fake_now += 5;
    CHECK_RC(simba_start(c), SIMBA_OK);
    settle(p, 2);
    fake_now += 100;
    CHECK_RC(simba_stop(a), SIMBA_OK); /* the push goes to d, which never answers */
    advance(p, 2, joined + live - fake_now, 5);
    CHECK_STR(fair_log, "a"); /* the mutex stays kept for d while d's place lasts */
    advance(p, 2, SIMBA__FREE_RETRY_MAX + 10, 5);
    CHECK_STR(fair_log, "ac");
    CHECK(c->held_since > joined + live);
    CHECK(c->held_since <= joined + live + SIMBA__FREE_RETRY_MAX + 1);
    /* c asked at doubling intervals meanwhile, never in a tight loop */
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(simba_service_stats(c, &st), SIMBA_OK);
    CHECK(st.attempts < 15);
    proc_close(&p[0]);
    proc_close(&p[1]);
    proc_close(&p[2]);
    store_free();
}

/* ---- locker and scheduler ---------------------------------------------------------------------- */

TEST(locker_lock_timeout_try_unlock) {
    proc p[2];
    simba_locker *a, *b;
    simba_locker_desc d = {0};
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    d.mutex = "job-42";
    d.ttl_ms = 1000;
    d.transition_ms = 500;
    CHECK_RC(simba_locker_new(p[0].loop, p[0].be, &d, &a), SIMBA_OK);
    CHECK_RC(simba_locker_new(p[1].loop, p[1].be, &d, &b), SIMBA_OK);
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK); /* the memory backend answers at once */
    CHECK(simba_locker_is_owner(a));
    CHECK(simba_locker_fence(a) > 0);
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_ESTATE); /* not reentrant */
    CHECK_RC(simba_locker_lock(b, 0), SIMBA_ETIMEDOUT);
    CHECK(!simba_locker_is_owner(b));
    CHECK_RC(simba_locker_try(b), SIMBA_EAGAIN);
    settle(p, 2);
    CHECK_RC(simba_locker_try(b), SIMBA_EAGAIN);
    CHECK_RC(simba_locker_unlock(a), SIMBA_OK);
    CHECK_RC(simba_locker_unlock(a), SIMBA_ESTATE);
    settle(p, 2); /* the release is pushed to b, first in line */
    CHECK_RC(simba_locker_try(b), SIMBA_OK);
    CHECK(simba_locker_is_owner(b));
    CHECK(simba_locker_fence(b) > 0);
    CHECK_RC(simba_locker_free(b), SIMBA_OK);
    CHECK_RC(simba_locker_free(a), SIMBA_OK);
    CHECK_RC(simba_locker_new(p[0].loop, p[0].be, NULL, &a), SIMBA_EINVAL);
    CHECK_RC(simba_locker_lock(NULL, 0), SIMBA_EINVAL);
    {
        simba_locker *lk;
        CHECK_RC(simba_lock(p[0].loop, p[0].be, "shorthand", 100, &lk), SIMBA_OK);
        CHECK_RC(simba_unlock(lk), SIMBA_OK);
        CHECK_RC(simba_lock(p[0].loop, p[0].be, "bad name", 100, &lk), SIMBA_EINVAL);
        CHECK(lk == NULL);
    }
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

/* Unlock hands the release to the backend at once (a process that unlocks and then
   sleeps or exits does not keep the mutex for a lease); unlock_wait waits for its answer. */
TEST(locker_unlock_sends_release_at_once) {
    proc p[2];
    simba_locker *a, *b;
    simba_locker_desc d = {0};
    simba_memory_fault f = {0};
    simba_reply r;
    char who[SIMBA_ID_MAX + 1];
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    d.mutex = "unlock-now";
    CHECK_RC(simba_locker_new(p[0].loop, p[0].be, &d, &a), SIMBA_OK);
    CHECK_RC(simba_locker_new(p[1].loop, p[1].be, &d, &b), SIMBA_OK);
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    CHECK_RC(simba_locker_try(b), SIMBA_EAGAIN);
    settle(p + 1, 1); /* b is queued behind a */
    CHECK_RC(simba_locker_unlock(a), SIMBA_OK);
    /* no poll of a's loop: the store already has the release */
    CHECK_RC(simba__memstore_read(store, "unlock-now", &r, who, sizeof who), SIMBA_OK);
    CHECK(r.owner == NULL || r.owner[0] == 0);
    CHECK(!simba_locker_is_owner(a));
    CHECK_EQ(simba_locker_last_reason(a), SIMBA_REASON_UNLOCKED);
    settle(p + 1, 1); /* the push reaches b, the head of the line */
    CHECK_RC(simba_locker_try(b), SIMBA_OK);
    /* unlock_wait: confirmed by the backend; nothing going out: OK at once */
    CHECK_RC(simba_locker_unlock_wait(b, -1), SIMBA_OK);
    CHECK_EQ(simba_service_status(simba_locker_service(b)), SIMBA_INITIAL);
    CHECK_RC(simba_locker_unlock_wait(b, 0), SIMBA_OK);
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    /* a hung backend never confirms: timeout 0 returns at once */
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    CHECK_RC(simba_locker_unlock_wait(a, 0), SIMBA_ETIMEDOUT);
    CHECK(!simba_locker_is_owner(a));
    f.hang = 0;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    CHECK_RC(simba_locker_unlock_wait(a, -1), SIMBA_OK); /* the pending release is answered */
    /* a failing backend: the release's error is reported */
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    f.fail = 1;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    CHECK_RC(simba_locker_unlock_wait(a, -1), SIMBA_EBACKEND);
    CHECK(strstr(simba_loop_errmsg(p[0].loop), "release") != NULL);
    f.fail = 0;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    CHECK_RC(simba_locker_unlock_wait(NULL, 0), SIMBA_EINVAL);
    CHECK_RC(simba_locker_free(a), SIMBA_OK);
    CHECK_RC(simba_locker_free(b), SIMBA_OK);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

/* A lock that timed out leaves the wait queue at once, without another poll: a caller that
   gives up and goes to sleep must not hold the head of the line for its liveness bound. */
TEST(locker_timeout_leaves_the_queue_at_once) {
    proc p[3];
    simba_locker *a, *b, *c;
    simba_locker_desc d = {0};
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    proc_open(&p[2]);
    d.mutex = "give-up";
    CHECK_RC(simba_locker_new(p[0].loop, p[0].be, &d, &a), SIMBA_OK);
    CHECK_RC(simba_locker_new(p[1].loop, p[1].be, &d, &b), SIMBA_OK);
    CHECK_RC(simba_locker_new(p[2].loop, p[2].be, &d, &c), SIMBA_OK);
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    CHECK_RC(simba_locker_lock(b, 0), SIMBA_ETIMEDOUT); /* b queued, then gave up */
    CHECK_RC(simba_locker_try(c), SIMBA_EAGAIN);
    settle(p + 2, 1); /* c queued behind b's place, if b still had one */
    CHECK_RC(simba_locker_unlock(a), SIMBA_OK);
    settle(p + 2, 1); /* b's loop never runs again */
    CHECK_RC(simba_locker_try(c), SIMBA_OK);
    CHECK_RC(simba_locker_free(c), SIMBA_OK);
    CHECK_RC(simba_locker_free(b), SIMBA_OK);
    CHECK_RC(simba_locker_free(a), SIMBA_OK);
    proc_close(&p[0]);
    proc_close(&p[1]);
    proc_close(&p[2]);
    store_free();
}

static simba_result unlock_wait_rc = SIMBA_OK;
static simba_locker *unlock_wait_lk;
static void unlock_wait_from_cb(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    (void)st;
    (void)u;
    unlock_wait_rc = simba_locker_unlock_wait(unlock_wait_lk, 0);
}

TEST(locker_unlock_wait_refused_from_callback) {
    proc p;
    simba_locker_desc d = {0};
    simba_contend_desc cd = {0};
    simba_service *obs;
    store_new();
    proc_open(&p);
    d.mutex = "unlock-cb";
    CHECK_RC(simba_locker_new(p.loop, p.be, &d, &unlock_wait_lk), SIMBA_OK);
    cd.mutex = "unlock-cb-other";
    cd.on_acquired = unlock_wait_from_cb;
    CHECK_RC(simba_contend(p.loop, p.be, &cd, &obs), SIMBA_OK);
    CHECK_RC(simba_locker_lock(unlock_wait_lk, 0), SIMBA_OK);
    CHECK_RC(simba_start(obs), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(unlock_wait_rc, SIMBA_ECALLBACK);
    CHECK(simba_locker_is_owner(unlock_wait_lk)); /* refused: nothing changed */
    CHECK_RC(simba_locker_free(unlock_wait_lk), SIMBA_OK);
    proc_close(&p);
    store_free();
}

static int lost_calls;
static void lk_lost(simba_locker *lk, void *u) {
    (void)u;
    lost_calls++;
    CHECK(!simba_locker_is_owner(lk));
}

TEST(locker_reports_lost_lock) {
    proc p;
    simba_locker *a;
    simba_locker_desc d = {0};
    simba_memory_fault f = {0};
    store_new();
    proc_open(&p);
    d.mutex = "lost";
    d.ttl_ms = 1000;
    d.transition_ms = 500;
    d.on_lost = lk_lost;
    CHECK_RC(simba_locker_new(p.loop, p.be, &d, &a), SIMBA_OK);
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 1100, 10);
    CHECK_EQ(lost_calls, 1);
    CHECK(!simba_locker_is_owner(a));
    CHECK_RC(simba_locker_try(a), SIMBA_ESTATE);
    CHECK_RC(simba_locker_unlock(a), SIMBA_ELOST); /* lost before the unlock: it says so */
    CHECK_EQ(simba_locker_last_reason(a), SIMBA_REASON_LAPSED);
    CHECK_EQ(lost_calls, 1); /* on_lost already told, not again */
    f.hang = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_locker_free(a), SIMBA_OK);
    proc_close(&p);
    store_free();
}

typedef struct work_log {
    int runs, runs_not_leader;
    int64_t at[64];
    uint64_t fence[64];
    simba_scheduler **self;
} work_log;
static void work_fn(simba_scheduler *sc, void *u) {
    work_log *w = (work_log *)u;
    if (!simba_scheduler_is_owner(sc)) w->runs_not_leader++;
    if (w->runs < 64) w->at[w->runs] = fake_now;
    if (w->runs < 64) w->fence[w->runs] = simba_scheduler_fence(sc);
    w->runs++;
}

TEST(scheduler_runs_only_while_owner) {
    proc p[2];
    simba_scheduler *sa, *sb;
    simba_scheduler_desc d = {0};
    work_log wa = {0}, wb = {0};
    simba_memory_fault f = {0};
    int runs;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    d.mutex = "sched";
    d.ttl_ms = 1000;
    d.transition_ms = 500;
    d.strategy = SIMBA_FIXED_RATE;
    d.initial_delay_ms = 100;
    d.period_ms = 200;
    d.work = work_fn;
    d.user_data = &wa;
    CHECK_RC(simba_scheduler_new(p[0].loop, p[0].be, &d, &sa), SIMBA_OK);
    d.user_data = &wb;
    CHECK_RC(simba_scheduler_new(p[1].loop, p[1].be, &d, &sb), SIMBA_OK);
    CHECK(!simba_scheduler_running(sa));
    CHECK_RC(simba_scheduler_start(sa), SIMBA_OK);
    CHECK_RC(simba_scheduler_start(sa), SIMBA_ESTATE);
    settle(p, 2);
    CHECK_RC(simba_scheduler_start(sb), SIMBA_OK);
    CHECK(simba_scheduler_running(sa));
    advance(p, 2, 1000, 5);
    CHECK_EQ(wa.runs, 5); /* at +100, 300, 500, 700, 900 */
    CHECK_EQ(wa.at[1] - wa.at[0], 200);
    CHECK_EQ(wb.runs, 0);
    /* a loses its server: its work stops by its lease deadline, b takes over later */
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    advance(p, 2, 4000, 5);
    runs = wa.runs;
    CHECK(simba_scheduler_is_owner(sb));
    CHECK(wb.runs > 0);
    advance(p, 2, 1000, 5);
    CHECK_EQ(wa.runs, runs); /* no work without ownership */
    CHECK_EQ(wa.runs_not_leader, 0);
    CHECK_EQ(wb.runs_not_leader, 0);
    /* Work sees its tenure's fence; the next leader's is greater */
    {
        simba_reply r;
        CHECK_RC(simba__memstore_read(store, "sched", &r, NULL, 0), SIMBA_OK);
        CHECK(wa.fence[0] > 0);
        CHECK_EQ(wa.fence[4], wa.fence[0]);
        CHECK(wb.fence[0] > wa.fence[0]);
        CHECK_EQ(wb.fence[0], r.fence);
        CHECK_EQ(simba_scheduler_fence(sb), r.fence);
        CHECK_EQ(simba_scheduler_fence(sa), 0);
        CHECK_EQ(simba_scheduler_fence(NULL), 0);
    }
    /* stop: the work stops at once */
    CHECK_RC(simba_scheduler_stop(sb), SIMBA_OK);
    CHECK_RC(simba_scheduler_stop(sb), SIMBA_ESTATE);
    runs = wb.runs;
    advance(p, 2, 1000, 5);
    CHECK_EQ(wb.runs, runs);
    CHECK(!simba_scheduler_running(sb));
    /* bad descs */
    d.period_ms = 0;
    CHECK_RC(simba_scheduler_new(p[0].loop, p[0].be, &d, &sb), SIMBA_EINVAL);
    d.period_ms = 10;
    d.work = NULL;
    CHECK_RC(simba_scheduler_new(p[0].loop, p[0].be, &d, &sb), SIMBA_EINVAL);
    CHECK_RC(simba_scheduler_free(sa), SIMBA_OK);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

TEST(scheduler_fixed_delay) {
    proc p;
    simba_scheduler *sc;
    simba_scheduler_desc d = {0};
    work_log w = {0};
    store_new();
    proc_open(&p);
    d.mutex = "fd";
    d.ttl_ms = 1000;
    d.transition_ms = 500;
    d.strategy = SIMBA_FIXED_DELAY;
    d.initial_delay_ms = 0;
    d.period_ms = 300;
    d.work = work_fn;
    d.user_data = &w;
    CHECK_RC(simba_scheduler_new(p.loop, p.be, &d, &sc), SIMBA_OK);
    CHECK_RC(simba_scheduler_start(sc), SIMBA_OK);
    advance(&p, 1, 1000, 5);
    CHECK_EQ(w.runs, 4); /* 0, 300, 600, 900 */
    CHECK_EQ(w.at[3] - w.at[0], 900);
    CHECK_RC(simba_scheduler_free(sc), SIMBA_OK);
    proc_close(&p);
    store_free();
}

/* ---- loop mechanics ------------------------------------------------------------------------------ */


TEST(steady_state_polling_allocates_nothing) {
    simba_loop_desc ld = {0};
    proc p;
    simba_service *s[50];
    int i;
    size_t before;
    store_new();
    ld.now_ms = fake_clock;
    ld.alloc = count_alloc;
    ld.free = count_free;
    CHECK_RC(simba_loop_new(&ld, &p.loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p.loop, store, &p.be), SIMBA_OK);
    for (i = 0; i < 50; i++) {
        char name[16];
        simba_contend_desc d = {0};
        snprintf(name, sizeof name, "m%d", i);
        d.mutex = name;
        d.ttl_ms = 300;
        d.transition_ms = 100;
        CHECK_RC(simba_contend(p.loop, p.be, &d, &s[i]), SIMBA_OK);
        CHECK_RC(simba_start(s[i]), SIMBA_OK);
    }
    advance(&p, 1, 1000, 10);
    before = allocs;
    advance(&p, 1, 10000, 10); /* ~1600 renewals */
    CHECK_EQ(allocs, before);
    for (i = 0; i < 50; i++) CHECK(simba_is_owner(s[i]));
    CHECK_RC(simba_loop_free(p.loop), SIMBA_OK);
    store_free();
    CHECK_RC(simba_loop_new(&(simba_loop_desc){.alloc = count_alloc}, &p.loop), SIMBA_EINVAL); /* both or neither */
}

TEST(poll_yields_when_many_timers_fall_due) {
    proc p;
    static simba_service *s[5000];
    int i, polls = 0, owners = 0;
    int64_t worst = 0;
    simba_loop_desc ld;
    store_new();
    memset(&ld, 0, sizeof ld); /* proc_open's loop without its budget override: the default */
    ld.now_ms = fake_clock;
    ld.random = fake_rand;
    CHECK_RC(simba_loop_new(&ld, &p.loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p.loop, store, &p.be), SIMBA_OK);
    for (i = 0; i < 5000; i++) {
        char name[16];
        simba_contend_desc d = {0};
        snprintf(name, sizeof name, "herd%d", i);
        d.mutex = name;
        d.ttl_ms = 1000;
        CHECK_RC(simba_contend(p.loop, p.be, &d, &s[i]), SIMBA_OK);
        CHECK_RC(simba_start(s[i]), SIMBA_OK); /* all due at the same instant */
    }
    while (owners < 5000 && polls < 100000) {
        int64_t t0 = simba__real_us(), w = simba_poll(p.loop), dt = simba__real_us() - t0;
        if (dt > worst) worst = dt;
        polls++;
        for (owners = 0, i = 0; i < 5000; i++) owners += simba_is_owner(s[i]);
        if (owners < 5000) CHECK_EQ(w, 0); /* work left: call again at once */
    }
    CHECK_EQ(owners, 5000);
    CHECK(polls > 1); /* the work was spread over several polls */
    CHECK(worst < 50000);
    fprintf(stderr, "  5000 simultaneous starts: %d polls, longest %lld us\n", polls, (long long)worst);
    proc_close(&p);
    store_free();
}

/* The count bound is exact: 10,000 owners started together renew together (a constant
   random source gives every one the same jitter), yet no poll submits more than the
   budget's steps; every renewal still happens in time and nobody loses ownership. */
static int herd_submits;
static simba_result (*mem_submit)(void *, simba_req *);
static simba_result count_submit(void *impl, simba_req *r) { herd_submits++; return mem_submit(impl, r); }
TEST(poll_budget_bounds_every_poll_of_a_renewal_herd) {
    enum { N = 10000, MAX = 100 };
    static simba_service *s[N];
    static simba_backend_vt spy;
    simba_loop_desc d;
    simba_stats st;
    proc p;
    rec c = {0};
    int i, owners = 0, worst = 0, cut = 0;
    int64_t end;
    store_new();
    memset(&d, 0, sizeof d);
    d.now_ms = fake_clock;
    d.random = fake_rand;
    d.poll_max_steps = MAX;
    d.poll_budget_us = 3600000000; /* time never cuts: the count alone decides */
    CHECK_RC(simba_loop_new(&d, &p.loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p.loop, store, &p.be), SIMBA_OK);
    spy = *simba_backend_vt_get(p.be);
    mem_submit = spy.submit;
    spy.submit = count_submit;
    p.be->vt = &spy;
    for (i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "herd%d", i);
        s[i] = contender(&p, name, NULL, 1000, 500, &c);
        CHECK_RC(simba_start(s[i]), SIMBA_OK);
    }
    end = fake_now + 5000; /* 7 renewal periods of 667 ms */
    while (fake_now < end) {
        int64_t w;
        herd_submits = 0;
        w = simba_poll(p.loop);
        CHECK(w >= 0);
        CHECK(herd_submits <= MAX);
        if (herd_submits > worst) worst = herd_submits;
        if (w == 0) { cut++; continue; } /* work left: called again at once, same instant */
        fake_now += w < 10 ? w : 10;
    }
    for (i = 0; i < N; i++) owners += simba_is_owner(s[i]);
    CHECK_EQ(owners, N);
    CHECK_EQ(c.acquired, N);
    CHECK_EQ(c.released, 0);
    CHECK_EQ(worst, MAX); /* the bound was reached: the herd needed many polls */
    CHECK(cut >= 7 * (N / MAX));
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(simba_loop_stats(p.loop, &st), SIMBA_OK);
    CHECK(st.renewals >= (uint64_t)N * 7);
    CHECK_EQ(st.renewals_failed, 0);
    CHECK_EQ(st.step_downs, 0);
    CHECK_RC(simba_loop_free(p.loop), SIMBA_OK);
    store_free();
    {
        simba_loop *l = NULL;
        d.poll_max_steps = -1;
        CHECK_RC(simba_loop_new(&d, &l), SIMBA_EINVAL);
        d.poll_max_steps = 0;
        d.poll_budget_us = -1;
        CHECK_RC(simba_loop_new(&d, &l), SIMBA_EINVAL);
    }
}

/* Renewals spread: 10,000 owners granted at one instant (a seeded random source, so the
   draws are fixed) never put more than 3 % of their renewals into 10 ms of the loop clock, in
   the first renewal burst or later; and every renewal is sent at or before ttl_at - margin.
   Renewals are aligned down to a grid (here 32 ms: margin 1000 / 16, rounded down to a power
   of two) so that those of one step go out in one poll: the density is counted per step
   (3 % x 3.2 = 9.6 % of the owners at most), and every renewal must fall on the grid. */
#define SPREAD_GRID 32
static int spread_slot[2000];
static int spread_late, spread_off_grid;
static uint32_t spread_state = 2463534242u;
static uint32_t spread_rand(void *u) {
    (void)u;
    spread_state ^= spread_state << 13;
    spread_state ^= spread_state >> 17;
    spread_state ^= spread_state << 5;
    return spread_state;
}
static int64_t spread_t0;
static simba_result spread_submit(void *impl, simba_req *r) {
    if (r->renew) {
        simba_service *sv = r->svc_;
        int64_t k = (fake_now - spread_t0) / SPREAD_GRID;
        if (k >= 0 && k < 2000) spread_slot[k]++;
        if (fake_now % SPREAD_GRID != 0) spread_off_grid++;
        if (fake_now > sv->lease_end - sv->tp->v.renew_margin) spread_late++;
    }
    return mem_submit(impl, r);
}
TEST(renewals_of_owners_started_together_spread) {
    enum { N = 10000 };
    static simba_service *s[N];
    static simba_backend_vt spy;
    simba_loop_desc d;
    proc p;
    rec c = {0};
    int i, busiest = 0, total = 0;
    store_new();
    memset(&d, 0, sizeof d);
    d.now_ms = fake_clock;
    d.random = spread_rand;
    d.poll_budget_us = 3600000000;
    CHECK_RC(simba_loop_new(&d, &p.loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p.loop, store, &p.be), SIMBA_OK);
    spy = *simba_backend_vt_get(p.be);
    mem_submit = spy.submit;
    spy.submit = spread_submit;
    p.be->vt = &spy;
    for (i = 0; i < N; i++) {
        char name[24];
        snprintf(name, sizeof name, "spread%d", i);
        s[i] = contender(&p, name, NULL, 3000, 1000, &c);
        CHECK_RC(simba_start(s[i]), SIMBA_OK);
    }
    settle(&p, 1);
    CHECK_EQ(c.acquired, N); /* every lease began at the same instant */
    spread_t0 = fake_now;
    while (fake_now < spread_t0 + 10000) { /* 5 renewal periods of 2 s */
        int64_t w = simba_poll(p.loop);
        CHECK(w >= 0);
        fake_now += w < 1 ? 0 : w < 5 ? w : 5;
    }
    for (i = 0; i < 2000; i++) {
        total += spread_slot[i];
        if (spread_slot[i] > busiest) busiest = spread_slot[i];
    }
    CHECK(total >= 4 * N);
    CHECK(busiest <= N * 3 * SPREAD_GRID / 1000);
    CHECK_EQ(spread_late, 0);
    CHECK_EQ(spread_off_grid, 0);
    CHECK_EQ(c.released, 0);
    fprintf(stderr, "  %d renewals, busiest %d ms step: %d\n", total, SPREAD_GRID, busiest);
    CHECK_RC(simba_loop_free(p.loop), SIMBA_OK);
    store_free();
}

/* Memory per service stays under 1 KiB (the W4 target), measured as W4 does: live bytes
   through the loop's allocator, 2 contenders per mutex, owners renewing, over services. */
static long long live_bytes;
static void *live_alloc(void *u, size_t n) { /* a 16-byte header keeps malloc's alignment */
    size_t *p = (size_t *)malloc(n + 16);
    (void)u;
    if (!p) return NULL;
    *p = n;
    live_bytes += (long long)n;
    return (char *)p + 16;
}
static void live_free(void *u, void *q) {
    (void)u;
    if (!q) return;
    q = (char *)q - 16;
    live_bytes -= (long long)*(size_t *)q;
    free(q);
}
/* A service keeps another contender's id from an answer in a buffer allocated at its first
   such answer. If that allocation fails, the answer counts as a failed request (ENOMEM, the
   core backs off and asks again); once memory is back the owner is learnt; nothing leaks. */
static int live_refuse;
static void *refusing_alloc(void *u, size_t n) { return live_refuse ? NULL : live_alloc(u, n); }
/* A fresh store and a process on the injected clock whose loop allocates through alloc and
   live_free (live_bytes counts what is held). */
static int counted_proc_open(proc *p, void *(*alloc)(void *, size_t)) {
    simba_loop_desc d;
    store_new();
    memset(&d, 0, sizeof d);
    d.now_ms = fake_clock;
    d.random = fake_rand;
    d.alloc = alloc;
    d.free = live_free;
    return simba_loop_new(&d, &p->loop) == SIMBA_OK && simba_memory_open(p->loop, store, &p->be) == SIMBA_OK;
}
TEST(other_owner_kept_without_a_fixed_buffer_and_out_of_memory_backs_off) {
    simba_stats st;
    proc p;
    rec ca = {0}, cb = {0};
    simba_service *a, *b;
    simba_owner o;
    REQUIRE(counted_proc_open(&p, refusing_alloc));
    a = contender(&p, "other", "a-rather-long-contender-id-0123456789", 3000, 1000, &ca);
    b = contender(&p, "other", "b", 3000, 1000, &cb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(&p, 1);
    CHECK(simba_is_owner(a));
    live_refuse = 1;
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(&p, 1);
    live_refuse = 0;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(simba_service_stats(b, &st), SIMBA_OK);
    CHECK_EQ(st.errors, 1);
    CHECK_EQ(st.last_error, SIMBA_ENOMEM);
    CHECK(!simba_is_owner(b));
    advance(&p, 1, 2000, 50); /* the backoff, then b asks again */
    CHECK_RC(simba_owner_get(b, &o), SIMBA_OK);
    CHECK_STR(o.id, "a-rather-long-contender-id-0123456789");
    CHECK(simba_is_owner(a));
    CHECK(!simba_is_owner(b));
    CHECK_RC(simba_loop_free(p.loop), SIMBA_OK);
    CHECK_EQ(live_bytes, 0);
    store_free();
}

TEST(memory_per_service_under_a_kibibyte) {
    enum { M = 2000 };
    static simba_service *s[2 * M];
    proc p;
    long long base;
    int i, owners = 0;
    REQUIRE(counted_proc_open(&p, live_alloc));
    settle(&p, 1);
    base = live_bytes;
    for (i = 0; i < 2 * M; i++) {
        char name[24];
        simba_contend_desc cd = {0};
        snprintf(name, sizeof name, "w4-m%06d", i / 2);
        cd.mutex = name;
        cd.contender_id = i % 2 ? "b" : "a";
        CHECK_RC(simba_contend(p.loop, p.be, &cd, &s[i]), SIMBA_OK);
        CHECK_RC(simba_start(s[i]), SIMBA_OK);
    }
    advance(&p, 1, 30000, 100); /* renewals and waiters' attempts in steady state */
    for (i = 0; i < 2 * M; i++) owners += simba_is_owner(s[i]);
    CHECK_EQ(owners, M);
    fprintf(stderr, "  %lld B per service\n", (live_bytes - base) / (2 * M));
    CHECK((live_bytes - base) / (2 * M) <= 1024);
    CHECK_RC(simba_loop_free(p.loop), SIMBA_OK);
    CHECK_EQ(live_bytes, 0);
    store_free();
}

/* A stop while a renewal is in flight: the renewal's answer sends the release, and the
   release's answer may be handled before the stop's own timer step (a poll's budget ends
   between them). on_released still fires exactly once. */
TEST(stop_during_renewal_fires_on_released_once_whatever_the_budget) {
    simba_loop_desc d;
    simba_memory_fault f;
    proc p;
    rec c = {0};
    simba_service *s;
    int64_t t0;
    int i;
    store_new();
    memset(&d, 0, sizeof d);
    d.now_ms = fake_clock;
    d.random = fake_rand;
    d.poll_max_steps = 1; /* one completion or timer per poll */
    CHECK_RC(simba_loop_new(&d, &p.loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p.loop, store, &p.be), SIMBA_OK);
    s = contender(&p, "stopx", "a", 900, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    t0 = fake_now;
    settle(&p, 1);
    CHECK_EQ(c.acquired, 1);
    memset(&f, 0, sizeof f);
    f.delay_ms = 100;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    fake_now = t0 + 600;
    settle(&p, 1); /* the renewal is sent, its answer held back */
    CHECK(s->flags & SIMBA__F_INFLIGHT);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    f.delay_ms = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    for (i = 0; i < 20; i++) CHECK(simba_poll(p.loop) >= 0);
    CHECK_EQ(simba_service_status(s), SIMBA_INITIAL);
    CHECK_EQ(c.released, 1);
    CHECK_EQ(c.reason, SIMBA_REASON_STOPPED);
    proc_close(&p);
    store_free();
}

TEST(fds_and_wait) {
    proc p;
    struct pollfd fds[4];
    int n;
    store_new();
    proc_open(&p);
    n = simba_fds(p.loop, fds, 4);
    CHECK_EQ(n, 1);
    CHECK(fds[0].events & POLLIN);
    CHECK_EQ(simba_fds(p.loop, NULL, 0), 1); /* asks for room */
    CHECK_EQ(simba_fds(p.loop, NULL, 2), SIMBA_EINVAL);
    CHECK_EQ(simba_poll(p.loop), SIMBA_MAX_WAIT_MS); /* nothing to do */
    CHECK_RC(simba_wait(p.loop, 0), SIMBA_OK);
    CHECK_EQ(simba_poll_ready(p.loop, fds, 1), SIMBA_MAX_WAIT_MS);
    CHECK_EQ(simba_poll_ready(p.loop, NULL, 1), SIMBA_EINVAL);
    CHECK_EQ(simba_poll(NULL), SIMBA_EINVAL);
    CHECK_RC(simba_wait(NULL, 0), SIMBA_EINVAL);
    CHECK_RC(simba_loop_free(NULL), SIMBA_EINVAL);
    CHECK_RC(simba_memstore_free(store), SIMBA_EBUSY); /* a client is open */
    CHECK_RC(simba_backend_free(p.be), SIMBA_OK);
    proc_close(&p);
    store_free();
}

/* A vt says its size; the core refuses one whose layout it does not know. */
TEST(backend_vt_of_unknown_size_refused) {
    proc p;
    simba_backend_vt vt;
    simba_backend *b2 = NULL;
    store_new();
    proc_open(&p);
    vt = *simba_backend_vt_get(p.be);
    CHECK_EQ(vt.size, sizeof(simba_backend_vt));
    vt.size = 0;
    CHECK_RC(simba_backend_new(p.loop, &vt, NULL, &b2), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "size") != NULL);
    vt.size = sizeof(simba_backend_vt) + 8; /* a later, larger layout */
    CHECK_RC(simba_backend_new(p.loop, &vt, NULL, &b2), SIMBA_EINVAL);
    CHECK(b2 == NULL);
    proc_close(&p);
    store_free();
}

/* The process flags: one call per poll with readiness or TICK, FLUSH after a dispatch. */
static unsigned seen_flags[16];
static int seen_n;
static void (*mem_process)(void *, const struct pollfd *, int, int64_t, unsigned);
static void spy_process(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    if (seen_n < 16) seen_flags[seen_n++] = flags;
    CHECK((flags & SIMBA_PROCESS_IO) ? ready != NULL && n > 0 : ready == NULL);
    mem_process(impl, ready, n, now, flags);
}
TEST(process_called_with_explicit_flags) {
    proc p;
    rec c = {0};
    simba_service *s;
    static simba_backend_vt spy;
    int i, io = 0, flush = 0;
    store_new();
    proc_open(&p);
    spy = *simba_backend_vt_get(p.be);
    mem_process = spy.process;
    spy.process = spy_process;
    p.be->vt = &spy;
    s = contender(&p, "flags", "a", 900, 600, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    seen_n = 0;
    CHECK(simba_poll(p.loop) >= 0); /* the memory backend has its pipe: readiness given */
    CHECK_EQ(c.acquired, 1);
    for (i = 0; i < seen_n; i++) {
        if (seen_flags[i] == SIMBA_PROCESS_IO) io++;
        else if (seen_flags[i] == SIMBA_PROCESS_FLUSH) flush++;
        else CHECK(0);
    }
    CHECK_EQ(io, 1);
    CHECK(flush >= 1); /* the acquire's answer was dispatched: a flush followed */
    CHECK_EQ(seen_flags[0], SIMBA_PROCESS_IO);
    proc_close(&p);
    store_free();
}

TEST(backend_free_refused_while_used) {
    proc p;
    rec c = {0};
    simba_service *s;
    store_new();
    proc_open(&p);
    s = contender(&p, "busy", "a", 1000, 500, &c);
    CHECK_RC(simba_backend_free(p.be), SIMBA_EBUSY);
    CHECK_RC(simba_service_free(s), SIMBA_OK);
    CHECK_RC(simba_backend_free(p.be), SIMBA_OK);
    proc_close(&p);
    store_free();
}

/* Right after the caller freed the last service (an owner, its release still
   to go out), freeing the backend succeeds; the backend goes once the release is done. */
TEST(backend_free_after_last_service_free_is_deferred) {
    proc p;
    rec c = {0};
    simba_service *s, *t;
    simba_locker *lk;
    simba_locker_desc ld = {0};
    simba_reply r;
    simba_memory_fault f = {0};
    store_new();
    proc_open(&p);
    s = contender(&p, "bf", "a", 1000, 500, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(c.acquired == 1);
    ld.mutex = "bf2";
    CHECK_RC(simba_locker_new(p.loop, p.be, &ld, &lk), SIMBA_OK);
    CHECK_RC(simba_service_free(s), SIMBA_OK);
    CHECK_RC(simba_backend_free(p.be), SIMBA_EBUSY); /* the locker is the caller's */
    CHECK_RC(simba_locker_free(lk), SIMBA_OK);
    CHECK_RC(simba_backend_free(p.be), SIMBA_OK); /* the release has not gone out yet */
    CHECK(p.loop->backends == p.be);
    CHECK_RC(simba_backend_free(p.be), SIMBA_EINVAL); /* once */
    CHECK_RC(simba_contend(p.loop, p.be, &(simba_contend_desc){.mutex = "late"}, &t), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "freed") != NULL);
    settle(&p, 1);
    CHECK(p.loop->backends == NULL);
    CHECK_RC(simba__memstore_read(store, "bf", &r, NULL, 0), SIMBA_OK);
    CHECK(r.owner == NULL); /* released before the backend went */
    CHECK_RC(simba_memstore_free(store), SIMBA_OK); /* its client is closed */
    store = NULL;
    CHECK_RC(simba_loop_free(p.loop), SIMBA_OK);
    /* a silent server: the deferred backend is closed with the loop at the latest */
    store_new();
    proc_open(&p);
    s = contender(&p, "bf", "a", 1000, 500, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_service_free(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_RC(simba_backend_free(p.be), SIMBA_OK);
    settle(&p, 1);
    CHECK(p.loop->backends == p.be); /* still waiting for the release's answer */
    proc_close(&p);
    store_free();
}

/* ---- teardown that blocking callers survive ---------------------------------------------- */

/* The set-up of the teardown cases: another loop owns "m"; on loop 0 a locker blocks on "m"
   while a contender for "x" on the same loop acts from its on_acquired. Real clock: the
   locker's wait is a real poll(2). */
typedef struct teardown {
    simba_loop *loop;
    simba_locker *lk;
    int frees_loop, unlocks, calls;
    simba_result free_rc;
} teardown;
static void td_acq(simba_service *s, const simba_state *st, void *u) {
    teardown *t = (teardown *)u;
    (void)s;
    (void)st;
    t->calls++;
    if (t->unlocks) t->free_rc = simba_locker_unlock(t->lk);
    else t->free_rc = t->frees_loop ? simba_loop_free(t->loop) : simba_locker_free(t->lk);
}
static void td_setup(simba_memstore **st, simba_loop *l[2], simba_backend *be[2], teardown *t, simba_service **x) {
    simba_service *owner;
    simba_contend_desc d = {0};
    simba_locker_desc ld = {0};
    int i;
    CHECK_RC(simba_memstore_new(NULL, st), SIMBA_OK);
    for (i = 0; i < 2; i++) {
        CHECK_RC(simba_loop_new(NULL, &l[i]), SIMBA_OK);
        CHECK_RC(simba_memory_open(l[i], *st, &be[i]), SIMBA_OK);
    }
    d.mutex = "m";
    d.contender_id = "other";
    CHECK_RC(simba_contend(l[1], be[1], &d, &owner), SIMBA_OK);
    CHECK_RC(simba_start(owner), SIMBA_OK);
    for (i = 0; i < 100 && !simba_is_owner(owner); i++) simba_wait(l[1], 10);
    CHECK(simba_is_owner(owner));
    ld.mutex = "m";
    ld.contender_id = "locker";
    CHECK_RC(simba_locker_new(l[0], be[0], &ld, &t->lk), SIMBA_OK);
    t->loop = l[0];
    memset(&d, 0, sizeof d);
    d.mutex = "x";
    d.contender_id = "x";
    d.on_acquired = td_acq;
    d.user_data = t;
    CHECK_RC(simba_contend(l[0], be[0], &d, x), SIMBA_OK);
    CHECK_RC(simba_start(*x), SIMBA_OK);
}

/* The poll that carries out a deferred loop free says so (SIMBA_ECLOSED), and
   the blocked locker returns at once without touching the freed loop (ASan build). */
TEST(loop_freed_from_callback_while_locker_blocks) {
    simba_memstore *st;
    simba_loop *l[2];
    simba_backend *be[2];
    simba_service *x;
    teardown t;
    int64_t t0;
    memset(&t, 0, sizeof t);
    t.frees_loop = 1;
    td_setup(&st, l, be, &t, &x);
    t0 = check__wall() * 1000;
    CHECK_RC(simba_locker_lock(t.lk, 300), SIMBA_ECLOSED);
    CHECK(check__wall() * 1000 - t0 < 250); /* at once, not at the timeout */
    CHECK_EQ(t.calls, 1);
    CHECK_RC(t.free_rc, SIMBA_OK);
    CHECK_RC(simba_loop_free(l[1]), SIMBA_OK);
    CHECK_RC(simba_memstore_free(st), SIMBA_OK);
}

/* The shorthand too: simba_lock hands out no locker when its loop went away. */
TEST(loop_freed_from_callback_while_simba_lock_blocks) {
    simba_memstore *st;
    simba_loop *l[2];
    simba_backend *be[2];
    simba_service *x;
    simba_locker *lk = (simba_locker *)&lk;
    teardown t;
    memset(&t, 0, sizeof t);
    t.frees_loop = 1;
    td_setup(&st, l, be, &t, &x);
    CHECK_RC(simba_locker_free(t.lk), SIMBA_OK);
    CHECK_RC(simba_lock(l[0], be[0], "m", 300, &lk), SIMBA_ECLOSED);
    CHECK(lk == NULL);
    CHECK_EQ(t.calls, 1);
    CHECK_RC(simba_loop_free(l[1]), SIMBA_OK);
    CHECK_RC(simba_memstore_free(st), SIMBA_OK);
}

/* An application loop of the form `while (simba_poll(loop) >= 0)` ends when a callback
   freed the loop. */
static void acq_frees_loop(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    (void)st;
    CHECK_RC(simba_loop_free((simba_loop *)u), SIMBA_OK);
}
TEST(poll_that_frees_the_loop_returns_eclosed) {
    simba_memstore *st;
    simba_loop *l;
    simba_backend *be;
    simba_service *s;
    simba_contend_desc d = {0};
    int64_t r;
    int polls = 0;
    CHECK_RC(simba_memstore_new(NULL, &st), SIMBA_OK);
    CHECK_RC(simba_loop_new(NULL, &l), SIMBA_OK);
    CHECK_RC(simba_memory_open(l, st, &be), SIMBA_OK);
    d.mutex = "p";
    d.on_acquired = acq_frees_loop;
    d.user_data = l;
    CHECK_RC(simba_contend(l, be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    while ((r = simba_poll(l)) >= 0 && polls < 1000) polls++;
    CHECK_EQ(r, SIMBA_ECLOSED);
    CHECK(polls < 1000);
    /* the same through simba_wait */
    CHECK_RC(simba_loop_new(NULL, &l), SIMBA_OK);
    CHECK_RC(simba_memory_open(l, st, &be), SIMBA_OK);
    d.user_data = l;
    CHECK_RC(simba_contend(l, be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    polls = 0;
    while ((r = simba_wait(l, 10)) == SIMBA_OK && polls < 100) polls++;
    CHECK_EQ(r, SIMBA_ECLOSED);
    CHECK_RC(simba_memstore_free(st), SIMBA_OK);
}

/* A locker freed from a callback while its lock blocks is freed when the lock
   returns (SIMBA_ECLOSED); its contender is released in the store. */
TEST(locker_freed_from_callback_while_it_blocks) {
    simba_memstore *st;
    simba_loop *l[2];
    simba_backend *be[2];
    simba_service *x;
    simba_reply r;
    char who[SIMBA_ID_MAX + 1];
    teardown t;
    int i;
    memset(&t, 0, sizeof t);
    td_setup(&st, l, be, &t, &x);
    CHECK_RC(simba_locker_lock(t.lk, 300), SIMBA_ECLOSED);
    CHECK_EQ(t.calls, 1);
    CHECK_RC(t.free_rc, SIMBA_OK);
    CHECK(l[0]->lockers == NULL);
    /* the loop lives on: x owns "x"; the freed locker's contender leaves "m" alone */
    CHECK(simba_is_owner(x));
    for (i = 0; i < 20; i++) simba_wait(l[0], 5);
    CHECK_RC(simba__memstore_read(st, "m", &r, who, sizeof who), SIMBA_OK);
    CHECK_STR(who, "other");
    CHECK_RC(simba_loop_free(l[0]), SIMBA_OK);
    CHECK_RC(simba_loop_free(l[1]), SIMBA_OK);
    CHECK_RC(simba_memstore_free(st), SIMBA_OK);
}

/* An unlock from a callback ends the blocked lock (SIMBA_ESTATE) instead of being undone by
   it; the locker stays usable. */
TEST(locker_unlocked_from_callback_while_it_blocks) {
    simba_memstore *st;
    simba_loop *l[2];
    simba_backend *be[2];
    simba_service *x;
    teardown t;
    memset(&t, 0, sizeof t);
    t.unlocks = 1;
    td_setup(&st, l, be, &t, &x);
    CHECK_RC(simba_locker_lock(t.lk, 300), SIMBA_ESTATE);
    CHECK_EQ(t.calls, 1);
    CHECK_RC(t.free_rc, SIMBA_OK);
    CHECK(strstr(simba_loop_errmsg(l[0]), "unlocked") != NULL);
    CHECK_RC(simba_locker_lock(t.lk, 0), SIMBA_ETIMEDOUT); /* "other" still holds it */
    CHECK_RC(simba_locker_free(t.lk), SIMBA_OK);
    CHECK_RC(simba_loop_free(l[0]), SIMBA_OK);
    CHECK_RC(simba_loop_free(l[1]), SIMBA_OK);
    CHECK_RC(simba_memstore_free(st), SIMBA_OK);
}

/* Two loops on two threads share one store, on the real clock. */
typedef struct thr {
    simba_memstore *st;
    int acquired;
    simba_service *svc;
} thr;
static void thr_acq(simba_service *s, const simba_state *st, void *u) { (void)s; (void)st; ((thr *)u)->acquired++; }
static void *thr_main(void *u) {
    thr *t = (thr *)u;
    simba_loop *l;
    simba_backend *be;
    simba_contend_desc d = {0};
    int64_t end;
    simba_loop_new(NULL, &l);
    simba_memory_open(l, t->st, &be);
    d.mutex = "threads";
    d.ttl_ms = 200;
    d.transition_ms = 100;
    d.on_acquired = thr_acq;
    d.user_data = t;
    simba_contend(l, be, &d, &t->svc);
    simba_start(t->svc);
    end = simba_now(l) + 600;
    while (simba_now(l) < end) simba_wait(l, end - simba_now(l));
    simba_loop_free(l);
    return NULL;
}
TEST(loops_on_threads_share_a_store) {
    simba_memstore *st;
    thr a = {0}, b = {0};
    pthread_t ta, tb;
    CHECK_RC(simba_memstore_new(NULL, &st), SIMBA_OK);
    a.st = b.st = st;
    pthread_create(&ta, NULL, thr_main, &a);
    pthread_create(&tb, NULL, thr_main, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.acquired + b.acquired >= 1);
    CHECK_RC(simba_memstore_free(st), SIMBA_OK);
}


/* ---- a clean stop hands over --------------------------------------------------------------- */

/* The store's owner of mutex now ("" = nobody). */
static const char *stored_owner(const char *mutex) {
    static char who[SIMBA_ID_MAX + 1];
    simba_reply r;
    who[0] = 0;
    CHECK_RC(simba__memstore_read(store, mutex, &r, who, sizeof who), SIMBA_OK);
    return who;
}

static int renewal_in_flight(const simba_service *s) {
    simba_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    return simba_service_stats(s, &st) == SIMBA_OK && st.in_flight == 1 && st.acquisitions == 1 && st.attempts >= 2;
}

/* A process that exits (simba_loop_free, or simba_stop then simba_loop_free) while its
   owner's renewal is in flight still releases: the release goes behind the renewal and
   the waiter leads at once, not after the rest of the lease. */
static void free_during_renewal(int stop_first) {
    proc p[2];
    rec ca = {0}, cb = {0};
    simba_service *a, *b;
    simba_memory_fault f = {0};
    int64_t t_free;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = contender(&p[0], "exit-in-flight", "a", 2000, 1000, &ca);
    b = contender(&p[1], "exit-in-flight", "b", 2000, 1000, &cb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    CHECK_EQ(ca.acquired, 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p + 1, 1); /* b is queued behind a */
    f.delay_ms = 5;   /* a's link: a request is 5 ms in transit */
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    WAIT_FOR_SIM(p, 2, renewal_in_flight(a), 3000);
    REQUIRE(renewal_in_flight(a));
    t_free = fake_now;
    if (stop_first) CHECK_RC(simba_stop(a), SIMBA_OK);
    CHECK_RC(simba_loop_free(p[0].loop), SIMBA_OK);
    CHECK(stored_owner("exit-in-flight")[0] == 0); /* released behind the renewal */
    WAIT_FOR_SIM(p + 1, 1, cb.acquired == 1, 5000);
    CHECK_EQ(cb.acquired, 1);
    fprintf(stderr, "  the waiter led %lld ms after the owner's loop was freed\n", (long long)(cb.acquired_at - t_free));
    CHECK(cb.acquired_at - t_free <= 5);
    proc_close(&p[1]);
    store_free();
}
TEST(loop_free_with_renewal_in_flight_hands_over_at_once) { free_during_renewal(0); }
TEST(stop_then_loop_free_with_renewal_in_flight_hands_over_at_once) { free_during_renewal(1); }

/* A stop while the renewal is in flight: on_released fires at the next poll and the
   release goes right after it, behind the renewal (5 ms in transit), not after the
   renewal's answer has come back (10 ms). */
TEST(stop_sends_release_behind_a_renewal_in_flight) {
    proc p;
    rec c = {0};
    simba_service *s;
    simba_memory_fault f = {0};
    int64_t t_stop;
    store_new();
    proc_open(&p);
    s = contender(&p, "stop-behind", "a", 2000, 1000, &c);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(c.acquired, 1);
    f.delay_ms = 5;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    WAIT_FOR_SIM(&p, 1, renewal_in_flight(s), 3000);
    REQUIRE(renewal_in_flight(s));
    t_stop = fake_now;
    CHECK_RC(simba_stop(s), SIMBA_OK);
    CHECK_EQ(c.released, 0); /* callbacks come from the poll */
    settle(&p, 1);
    CHECK_EQ(c.released, 1); /* on_released first, then the release goes out */
    WAIT_FOR_SIM(&p, 1, stored_owner("stop-behind")[0] == 0, 100);
    CHECK(stored_owner("stop-behind")[0] == 0);
    fprintf(stderr, "  the store was free %lld ms after the stop\n", (long long)(fake_now - t_stop));
    CHECK(fake_now - t_stop <= 5);
    WAIT_FOR_SIM(&p, 1, simba_service_status(s) == SIMBA_INITIAL, 100);
    CHECK_EQ(simba_service_status(s), SIMBA_INITIAL);
    CHECK_EQ(c.released, 1);
    proc_close(&p);
    store_free();
}

static simba_result stop_wait_cb_rc = SIMBA_OK;
static void stop_wait_from_cb(simba_service *s, const simba_state *st, void *u) {
    (void)st;
    (void)u;
    stop_wait_cb_rc = simba_stop_wait(s, 0);
}

TEST(stop_wait_confirms_the_release) {
    proc p;
    rec c = {0};
    simba_service *s, *t;
    simba_memory_fault f = {0};
    simba_contend_desc cd = {0};
    store_new();
    proc_open(&p);
    s = contender(&p, "stop-wait", "a", 2000, 1000, &c);
    CHECK_RC(simba_stop_wait(s, 0), SIMBA_OK); /* INITIAL: nothing to wait for */
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(c.acquired, 1);
    CHECK_RC(simba_stop_wait(s, -1), SIMBA_OK);
    CHECK_EQ(simba_service_status(s), SIMBA_INITIAL);
    CHECK_EQ(c.released, 1); /* its dispatch ran inside the wait */
    CHECK(stored_owner("stop-wait")[0] == 0);
    /* a hung backend never confirms: timeout 0 returns at once */
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_stop_wait(s, 0), SIMBA_ETIMEDOUT);
    CHECK(strstr(simba_loop_errmsg(p.loop), "stop-wait") != NULL);
    CHECK_EQ(simba_service_status(s), SIMBA_STOPPING);
    f.hang = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_stop_wait(s, -1), SIMBA_OK); /* the release already out is answered */
    /* a failing backend: the release's error */
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    f.fail = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_stop_wait(s, -1), SIMBA_EBACKEND);
    f.fail = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    /* refused from a callback */
    cd.mutex = "stop-wait-other";
    cd.on_acquired = stop_wait_from_cb;
    CHECK_RC(simba_contend(p.loop, p.be, &cd, &t), SIMBA_OK);
    CHECK_RC(simba_start(t), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(stop_wait_cb_rc, SIMBA_ECALLBACK);
    CHECK(simba_is_owner(t));
    CHECK_RC(simba_stop_wait(NULL, 0), SIMBA_EINVAL);
    proc_close(&p);
    store_free();
}

static void lk_locked_count(simba_locker *lk, void *u) {
    (void)lk;
    (*(int *)u)++;
}

/* simba_loop_close: every contender, locker and scheduler releases, confirmed, then the loop
   is gone; the waiters of another process lead at once. */
TEST(loop_close_releases_everything_then_frees) {
    proc p[2];
    rec ca = {0}, cb = {0}, cs = {0};
    simba_service *a, *b, *s2;
    simba_locker *lk, *lk2;
    simba_scheduler *sc;
    simba_scheduler_desc sd = {0};
    simba_locker_desc ld = {0};
    simba_memory_fault f = {0};
    int locked = 0;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = contender(&p[0], "close-c", "a", 2000, 1000, &ca);
    b = contender(&p[1], "close-c", "b", 2000, 1000, &cb);
    ld.mutex = "close-l";
    CHECK_RC(simba_locker_new(p[0].loop, p[0].be, &ld, &lk), SIMBA_OK);
    ld.on_locked = lk_locked_count;
    ld.user_data = &locked;
    CHECK_RC(simba_locker_new(p[1].loop, p[1].be, &ld, &lk2), SIMBA_OK);
    sd.mutex = "close-s";
    sd.period_ms = 100;
    sd.work = noop_work;
    CHECK_RC(simba_scheduler_new(p[0].loop, p[0].be, &sd, &sc), SIMBA_OK);
    s2 = contender(&p[1], "close-s", "s2", 2000, 1000, &cs);
    CHECK_RC(simba_start(a), SIMBA_OK);
    CHECK_RC(simba_scheduler_start(sc), SIMBA_OK);
    CHECK_RC(simba_locker_lock(lk, 0), SIMBA_OK);
    settle(p, 1);
    CHECK_EQ(ca.acquired, 1);
    CHECK(simba_scheduler_is_owner(sc));
    CHECK_RC(simba_start(b), SIMBA_OK);
    CHECK_RC(simba_start(s2), SIMBA_OK);
    CHECK_RC(simba_locker_try(lk2), SIMBA_EAGAIN);
    settle(p + 1, 1);
    CHECK_RC(simba_loop_close(p[0].loop, 1000), SIMBA_OK);
    CHECK_EQ(ca.released, 1); /* the user heard it, inside the close */
    CHECK(stored_owner("close-c")[0] == 0 || strcmp(stored_owner("close-c"), "b") == 0);
    settle(p + 1, 1);
    CHECK_EQ(cb.acquired, 1);
    CHECK_EQ(cs.acquired, 1);
    CHECK(simba_locker_is_owner(lk2));
    CHECK_EQ(locked, 1); /* on_locked: the pending try became held, from the poll */
    /* a hung backend: ETIMEDOUT, and the loop is freed all the same */
    proc_open(&p[0]);
    a = contender(&p[0], "close-h", "a", 2000, 1000, &ca);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    CHECK_RC(simba_loop_close(p[0].loop, 0), SIMBA_ETIMEDOUT);
    CHECK_RC(simba_loop_close(NULL, 0), SIMBA_EINVAL);
    CHECK_RC(simba_locker_free(lk2), SIMBA_OK);
    proc_close(&p[1]);
    store_free();
}

/* A test clock that blocking calls advance: simba_loop_desc.sleep stands where poll(2)
   would wait, so every blocking form runs in simulated time. */
static int64_t sleeps, slept_ms;
static void fake_sleep(void *u, int64_t ms) {
    (void)u;
    sleeps++;
    slept_ms += ms;
    fake_now += ms;
}
static void proc_open_sleeping(proc *p) {
    simba_loop_desc d;
    memset(&d, 0, sizeof d);
    d.now_ms = fake_clock;
    d.random = fake_rand;
    d.sleep = fake_sleep;
    d.poll_budget_us = 3600000000;
    CHECK_RC(simba_loop_new(&d, &p->loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p->loop, store, &p->be), SIMBA_OK);
}
static int64_t real_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* With a sleep hook, simba_locker_lock(30 s) behind a holder that dies returns when the
   holder's lease ends by the test clock, in milliseconds of real time; the _wait forms and
   simba_loop_close against a store that does not answer time out by the same clock. */
TEST(blocking_calls_run_in_simulated_time_with_a_sleep_hook) {
    proc p[2];
    simba_locker *holder, *lk;
    simba_locker_desc ld = {0};
    simba_memory_fault f = {0};
    simba_view v;
    rec cr = {0};
    simba_service *s;
    int64_t real0, sim0;
    store_new();
    proc_open(&p[0]);
    proc_open_sleeping(&p[1]);
    ld.mutex = "sleep-l";
    ld.ttl_ms = 10000;
    ld.transition_ms = 6000;
    CHECK_RC(simba_locker_new(p[0].loop, p[0].be, &ld, &holder), SIMBA_OK);
    CHECK_RC(simba_locker_new(p[1].loop, p[1].be, &ld, &lk), SIMBA_OK);
    CHECK_RC(simba_locker_lock(holder, 0), SIMBA_OK);
    /* the holder's process dies: its loop is never polled again */
    sleeps = slept_ms = 0;
    real0 = real_ms();
    sim0 = fake_now;
    CHECK_RC(simba_locker_lock(lk, 30000), SIMBA_OK);
    CHECK(real_ms() - real0 < 1000);
    CHECK(fake_now - sim0 >= 16000); /* ttl + transition of the dead holder */
    CHECK(fake_now - sim0 < 30000);
    CHECK(sleeps > 0 && slept_ms == fake_now - sim0);
    CHECK(simba_locker_is_owner(lk));
    CHECK_RC(simba_locker_unlock_wait(lk, 1000), SIMBA_OK);
    /* a store that does not answer: every _wait form times out by the test clock */
    s = contender(&p[1], "sleep-c", "c", 2000, 1000, &cr);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(p + 1, 1);
    CHECK_EQ(cr.acquired, 1);
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p[1].be, &f), SIMBA_OK);
    sim0 = fake_now;
    CHECK_RC(simba_inspect_wait(p[1].be, "sleep-c", &v, 500), SIMBA_ETIMEDOUT);
    CHECK(fake_now - sim0 >= 500 && fake_now - sim0 < 600);
    sim0 = fake_now;
    CHECK_RC(simba_stop_wait(s, 700), SIMBA_ETIMEDOUT);
    CHECK(fake_now - sim0 >= 700 && fake_now - sim0 < 800);
    sim0 = fake_now;
    CHECK_RC(simba_loop_close(p[1].loop, 1000), SIMBA_ETIMEDOUT);
    CHECK(fake_now - sim0 >= 1000 && fake_now - sim0 < 1100);
    CHECK(real_ms() - real0 < 1000);
    CHECK_RC(simba_locker_free(holder), SIMBA_OK);
    proc_close(&p[0]);
    store_free();
}

/* Without a log hook, WARN goes to stderr once per cause (a data-loss quarantine refuses
   every attempt: one line; the lapse: one line); a loop with a hook hears every one of them
   and writes nothing to stderr. */
static int hooked_warns;
static void count_warns(void *u, simba_log_level lv, const char *msg) {
    (void)u;
    (void)msg;
    hooked_warns += lv >= SIMBA_LOG_WARN;
}
static int lines_with(const char *text, const char *what) {
    int n = 0;
    const char *c;
    for (c = strstr(text, what); c; c = strstr(c + 1, what)) n++;
    return n;
}
static void lose_and_lapse(proc *p, const char *mutex) {
    rec r = {0};
    simba_service *s = contender(p, mutex, "a", 1000, 600, &r);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(p, 1);
    CHECK_EQ(r.acquired, 1);
    CHECK_RC(simba_memstore_lose(store), SIMBA_OK);
    advance(p, 1, 4000, 5);
    CHECK_EQ(r.released, 1);
    CHECK_EQ(r.acquired, 2); /* granted again once the quarantine is over */
}
TEST(warnings_go_to_stderr_once_per_cause_without_a_log_hook) {
    proc p;
    simba_loop_desc d;
    char out[4096];
    size_t n;
    FILE *cap = tmpfile();
    int saved = dup(2);
    REQUIRE(cap && saved >= 0);
    fflush(stderr);
    dup2(fileno(cap), 2);
    store_new();
    proc_open(&p);
    lose_and_lapse(&p, "loud");
    proc_close(&p);
    memset(&d, 0, sizeof d);
    d.now_ms = fake_clock;
    d.random = fake_rand;
    d.log = count_warns;
    CHECK_RC(simba_loop_new(&d, &p.loop), SIMBA_OK);
    CHECK_RC(simba_memory_open(p.loop, store, &p.be), SIMBA_OK);
    hooked_warns = 0;
    lose_and_lapse(&p, "hooked");
    proc_close(&p);
    store_free();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(cap);
    n = fread(out, 1, sizeof out - 1, cap);
    out[n] = 0;
    fclose(cap);
    CHECK_EQ(lines_with(out, "simba: warning: memory: acquire on mutex loud: memory store: data-loss quarantine"), 1);
    CHECK_EQ(lines_with(out, "simba: warning: mutex loud: lease not renewed in time, stepping down"), 1);
    CHECK_EQ(lines_with(out, "simba: "), 2);
    CHECK(strstr(out, "hooked") == NULL);
    CHECK(hooked_warns >= 3); /* the hook hears every attempt the quarantine refused */
    if (check__cur_failed) fprintf(stderr, "  stderr was:\n%s", out);
}

/* A Locker frozen past its lease and unlocked before the next poll learns it: the unlock
   says SIMBA_ELOST, the reason is "lapsed", and on_lost fires from the next poll, once. */
TEST(unlock_after_lapse_reports_lost) {
    proc p;
    simba_locker *a;
    simba_locker_desc d = {0};
    simba_stats st;
    store_new();
    proc_open(&p);
    d.mutex = "frozen";
    d.ttl_ms = 3000;
    d.transition_ms = 1000;
    d.on_lost = lk_lost_count;
    lk_lost_calls = 0;
    CHECK_RC(simba_locker_new(p.loop, p.be, &d, &a), SIMBA_OK);
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    fake_now += 5000; /* frozen: no poll ran */
    CHECK_RC(simba_locker_unlock(a), SIMBA_ELOST);
    CHECK(strstr(simba_loop_errmsg(p.loop), "lapsed") != NULL);
    CHECK_EQ(simba_locker_last_reason(a), SIMBA_REASON_LAPSED);
    CHECK_EQ(lk_lost_calls, 0); /* callbacks come from the poll */
    settle(&p, 1);
    CHECK_EQ(lk_lost_calls, 1);
    settle(&p, 1);
    CHECK_EQ(lk_lost_calls, 1);
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(simba_service_stats(simba_locker_service(a), &st), SIMBA_OK);
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_LAPSED], 1);
    /* the same through unlock_wait, which drives the loop: on_lost inside it */
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    fake_now += 5000;
    CHECK_RC(simba_locker_unlock_wait(a, -1), SIMBA_ELOST);
    CHECK_EQ(lk_lost_calls, 2);
    /* a lock unlocked in time is not lost */
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    fake_now += 100;
    CHECK_RC(simba_locker_unlock(a), SIMBA_OK);
    CHECK_EQ(simba_locker_last_reason(a), SIMBA_REASON_UNLOCKED);
    settle(&p, 1);
    CHECK_EQ(lk_lost_calls, 2);
    CHECK_RC(simba_locker_free(a), SIMBA_OK);
    proc_close(&p);
    store_free();
}

/* on_locked: called from the poll when a pending try becomes held; not for a blocking lock,
   which returns instead. */
TEST(locker_on_locked_from_the_poll) {
    proc p[2];
    simba_locker *a, *b;
    simba_locker_desc d = {0};
    int locked = 0;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    d.mutex = "on-locked";
    d.on_locked = lk_locked_count;
    d.user_data = &locked;
    CHECK_RC(simba_locker_new(p[0].loop, p[0].be, &d, &a), SIMBA_OK);
    CHECK_RC(simba_locker_new(p[1].loop, p[1].be, &d, &b), SIMBA_OK);
    CHECK_RC(simba_locker_lock(a, 0), SIMBA_OK);
    CHECK_EQ(locked, 0);
    CHECK_RC(simba_locker_try(b), SIMBA_EAGAIN);
    settle(p + 1, 1);
    CHECK_EQ(locked, 0);
    CHECK_RC(simba_locker_unlock(a), SIMBA_OK);
    CHECK_EQ(locked, 0);
    settle(p + 1, 1); /* the push reaches b: its try becomes held */
    CHECK_EQ(locked, 1);
    CHECK(simba_locker_is_owner(b));
    CHECK_RC(simba_locker_try(b), SIMBA_OK);
    settle(p + 1, 1);
    CHECK_EQ(locked, 1); /* once per acquisition */
    CHECK_RC(simba_locker_free(a), SIMBA_OK);
    CHECK_RC(simba_locker_free(b), SIMBA_OK);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}


/* ---- leadership value, proclaim, yield, at-risk ------------------------------------------ */

typedef struct evrec {
    int kept, yield_failed, value_failed, at_risk;
    int64_t at_risk_left, at_risk_at;
    int released_at_risk; /* on_at_risk calls seen when on_released came */
} evrec;
static evrec evr;
static void ev_count(simba_service *s, const simba_service_event *ev, void *u) {
    (void)s;
    (void)u;
    if (ev->type == SIMBA_EVENT_YIELD_KEPT) evr.kept++;
    if (ev->type == SIMBA_EVENT_YIELD_FAILED) evr.yield_failed++;
    if (ev->type == SIMBA_EVENT_VALUE_FAILED) evr.value_failed++;
}
static void at_risk_count(simba_service *s, int64_t left, void *u) {
    (void)u;
    CHECK(simba_is_owner(s));
    evr.at_risk++;
    evr.at_risk_left = left;
    evr.at_risk_at = fake_now;
}
static void rel_after_risk(simba_service *s, const simba_state *st, void *u) {
    evr.released_at_risk = evr.at_risk;
    on_rel(s, st, u);
}
/* A contender with a value, the event and at-risk recorders (not started). */
static simba_service *valued(proc *p, const char *mutex, const char *id, const char *value, size_t len, int64_t ttl, int64_t tr,
                             rec *r) {
    simba_contend_desc d;
    simba_service *s = NULL;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    d.contender_id = id;
    d.ttl_ms = ttl;
    d.transition_ms = tr;
    d.on_acquired = on_acq;
    d.on_released = rel_after_risk;
    d.on_owner = on_own;
    d.on_event = ev_count;
    d.on_at_risk = at_risk_count;
    d.user_data = r;
    d.value = value;
    d.value_len = len;
    CHECK_RC(simba_contend(p->loop, p->be, &d, &s), SIMBA_OK);
    return s;
}
static int value_is(const simba_owner *o, const char *v, size_t n) { return o->value_len == n && memcmp(o->value, v, n) == 0; }

TEST(value_goes_with_the_grant_and_proclaim_keeps_fence_and_lease) {
    proc p[2];
    rec ca = {0}, cb = {0};
    simba_service *a, *b;
    simba_owner o;
    uint64_t fence;
    int64_t lease_end, acquired_at;
    int changes;
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = valued(&p[0], "val", "a", "10.0.0.1:80\0x", 13, 3000, 1000, &ca);
    b = valued(&p[1], "val", "b", "b-addr", 6, 3000, 1000, &cb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 2);
    REQUIRE(simba_is_owner(a));
    CHECK_RC(simba_owner_get(a, &o), SIMBA_OK);
    CHECK(value_is(&o, "10.0.0.1:80\0x", 13));
    CHECK_RC(simba_owner_get(b, &o), SIMBA_OK); /* the waiter learns it with the owner */
    CHECK_STR(o.id, "a");
    CHECK(value_is(&o, "10.0.0.1:80\0x", 13));
    CHECK(value_is(&cb.last_after, "10.0.0.1:80\0x", 13));
    /* renewals keep it */
    advance(p, 2, 5000, 50);
    CHECK_RC(simba_owner_get(b, &o), SIMBA_OK);
    CHECK(value_is(&o, "10.0.0.1:80\0x", 13));
    /* proclaim: same fence, same acquired_at, the lease not extended */
    fence = simba_fence(a);
    lease_end = a->lease_end;
    CHECK_RC(simba_owner_get(a, &o), SIMBA_OK);
    acquired_at = o.acquired_at;
    changes = ca.owner_changes;
    CHECK_RC(simba_set_value(a, "\xff\xfe\x00new", 6), SIMBA_OK);
    settle(p, 2);
    CHECK_EQ(simba_fence(a), fence);
    CHECK_EQ(a->lease_end, lease_end);
    CHECK_EQ(ca.owner_changes, changes + 1); /* the owner's own on_owner */
    CHECK(value_is(&ca.last_after, "\xff\xfe\x00new", 6));
    CHECK_EQ(ca.last_after.fence, fence);
    CHECK_EQ(ca.last_after.acquired_at, acquired_at);
    CHECK_EQ(ca.acquired, 1);
    CHECK_EQ(ca.released, 0);
    /* the waiter sees it at its next ask (memory pushes it to the watching client) */
    WAIT_FOR_SIM(p, 2, value_is(&cb.last_after, "\xff\xfe\x00new", 6), 5000);
    CHECK(value_is(&cb.last_after, "\xff\xfe\x00new", 6));
    CHECK_EQ(cb.last_after.fence, fence);
    /* cleared by the release; the next owner's own value replaces it */
    CHECK_RC(simba_stop(a), SIMBA_OK);
    WAIT_FOR_SIM(p, 2, simba_is_owner(b), 5000);
    REQUIRE(simba_is_owner(b));
    CHECK_RC(simba_owner_get(b, &o), SIMBA_OK);
    CHECK(value_is(&o, "b-addr", 6));
    CHECK(cb.last_fence > fence);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

TEST(set_value_and_yield_refused_with_words) {
    proc p;
    rec ca = {0}, cb = {0};
    simba_service *a, *b;
    char big[SIMBA_VALUE_MAX + 1];
    memset(big, 'v', sizeof big);
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p);
    a = valued(&p, "val", "a", NULL, 0, 3000, 1000, &ca);
    b = valued(&p, "val", "b", NULL, 0, 3000, 1000, &cb);
    /* not running, then not the owner: no fence of its own holds */
    CHECK_RC(simba_set_value(a, "x", 1), SIMBA_EFENCE);
    CHECK(strstr(simba_loop_errmsg(p.loop), "does not own mutex val") != NULL);
    CHECK_RC(simba_yield(a), SIMBA_EFENCE);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(&p, 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(simba_is_owner(a));
    CHECK_RC(simba_set_value(b, "x", 1), SIMBA_EFENCE);
    CHECK_RC(simba_yield(b), SIMBA_EFENCE);
    /* the size limit, named with the length */
    CHECK_RC(simba_set_value(a, big, SIMBA_VALUE_MAX + 1), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "len 1025 is above SIMBA_VALUE_MAX (1024 bytes)") != NULL);
    CHECK_RC(simba_set_value(a, NULL, 3), SIMBA_EINVAL);
    CHECK_RC(simba_set_value(a, big, SIMBA_VALUE_MAX), SIMBA_OK);
    /* a second yield while one is under way */
    CHECK_RC(simba_yield(a), SIMBA_OK);
    CHECK_RC(simba_yield(a), SIMBA_ESTATE);
    CHECK(strstr(simba_loop_errmsg(p.loop), "already under way") != NULL);
    {
        simba_contend_desc d;
        simba_service *c = NULL;
        memset(&d, 0, sizeof d);
        d.mutex = "val2";
        d.value = big;
        d.value_len = SIMBA_VALUE_MAX + 1;
        CHECK_RC(simba_contend(p.loop, p.be, &d, &c), SIMBA_EINVAL);
        CHECK(strstr(simba_loop_errmsg(p.loop), "simba_contend: value_len 1025 is above SIMBA_VALUE_MAX") != NULL);
        CHECK(c == NULL);
        d.at_risk_ms = -1;
        d.value_len = 1;
        CHECK_RC(simba_contend(p.loop, p.be, &d, &c), SIMBA_EINVAL);
        CHECK(strstr(simba_loop_errmsg(p.loop), "at_risk_ms") != NULL);
    }
    proc_close(&p);
    store_free();
}

/* The store forgot the record: the proclaim is refused atomically and the owner learns it
   lost its fence, as a refused renewal tells it. */
TEST(set_value_refused_by_the_store_ends_the_tenure) {
    proc p;
    rec ca = {0};
    simba_service *a;
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p);
    a = valued(&p, "val", "a", "one", 3, 3000, 1000, &ca);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(simba_is_owner(a));
    CHECK_RC(simba_memstore_lose(store), SIMBA_OK);
    CHECK_RC(simba_set_value(a, "two", 3), SIMBA_OK);
    settle(&p, 1);
    CHECK(!simba_is_owner(a));
    CHECK_EQ(ca.released, 1);
    CHECK_EQ(ca.released_reason, SIMBA_REASON_REFUSED);
    proc_close(&p);
    store_free();
}

TEST(yield_passes_to_the_head_waiter_which_is_pushed) {
    proc p[3];
    rec ca = {0}, cb = {0}, cc = {0};
    simba_service *a, *b, *c;
    simba_owner o;
    uint64_t fa;
    int64_t t0;
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    proc_open(&p[2]);
    a = valued(&p[0], "y", "a", "A", 1, 3000, 1000, &ca);
    b = valued(&p[1], "y", "b", "B", 1, 3000, 1000, &cb);
    c = valued(&p[2], "y", "c", "C", 1, 3000, 1000, &cc);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 2);
    CHECK_RC(simba_start(c), SIMBA_OK);
    settle(p, 3);
    REQUIRE(simba_is_owner(a));
    fa = simba_fence(a);
    t0 = fake_now;
    CHECK_RC(simba_yield(a), SIMBA_OK);
    settle(p, 3); /* no time passes: the push alone hands over */
    CHECK_EQ(fake_now, t0);
    CHECK(!simba_is_owner(a));
    CHECK_EQ(ca.released, 1);
    CHECK_EQ(ca.released_reason, SIMBA_REASON_YIELDED);
    CHECK_STR(simba_reason_str(SIMBA_REASON_YIELDED), "yielded");
    CHECK(simba_is_owner(b)); /* the oldest waiter, not c */
    CHECK(!simba_is_owner(c));
    CHECK(cb.last_fence > fa);
    CHECK_RC(simba_owner_get(c, &o), SIMBA_OK);
    CHECK_STR(o.id, "b");
    CHECK(value_is(&o, "B", 1));
    CHECK_EQ(evr.kept, 0);
    /* a is queued behind c: when b yields, c wins, not a */
    advance(p, 3, 200, 10);
    CHECK(!simba_is_owner(a));
    CHECK_RC(simba_yield(b), SIMBA_OK);
    settle(p, 3);
    CHECK(simba_is_owner(c));
    CHECK(!simba_is_owner(a));
    CHECK_RC(simba_yield(c), SIMBA_OK);
    settle(p, 3);
    CHECK(simba_is_owner(a));
    CHECK_EQ(ca.acquired, 2);
    {
        simba_stats sts;
        memset(&sts, 0, sizeof sts);
        sts.size = sizeof sts;
        CHECK_RC(simba_service_stats(a, &sts), SIMBA_OK);
        CHECK_EQ(sts.releases_by_reason[SIMBA_REASON_YIELDED], 1);
        CHECK_EQ(sts.step_downs, 0); /* asked for, as a stop is */
    }
    CHECK_EQ(cb.released_reason, SIMBA_REASON_YIELDED);
    CHECK_EQ(cc.released_reason, SIMBA_REASON_YIELDED);
    proc_close(&p[0]);
    proc_close(&p[1]);
    proc_close(&p[2]);
    store_free();
}

/* A release pushed while the owner's yield is in flight is not lost: once the yield's
   answer makes it a waiter, the push makes it ask at once, not at the new owner's lease end
   (on MySQL the next owner's release can ring before the yield's answer is read). */
static uint64_t attempts_of(const simba_service *s) {
    simba_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    return simba_service_stats(s, &st) == SIMBA_OK ? st.attempts : 0;
}
TEST(release_pushed_while_a_yield_is_in_flight_wakes_the_yielder) {
    proc p[2];
    rec ca = {0}, cb = {0};
    simba_service *a, *b;
    simba_memory_fault f;
    uint64_t asked;
    int64_t t0;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = contender(&p[0], "yield-push", "a", 3000, 1000, &ca);
    b = contender(&p[1], "yield-push", "b", 3000, 1000, &cb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 2);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 2);
    REQUIRE(simba_is_owner(a) && !simba_is_owner(b));
    memset(&f, 0, sizeof f);
    f.hang = 1; /* a's yield stays in flight */
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    CHECK_RC(simba_yield(a), SIMBA_OK);
    settle(p, 2);
    CHECK(!simba_is_owner(b));
    simba_backend_event(p[0].be, SIMBA_EV_RELEASED, "yield-push", NULL, NULL);
    settle(p, 2);
    asked = attempts_of(a);
    t0 = fake_now;
    f.hang = 0;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    settle(p, 2); /* no time passes */
    CHECK_EQ(fake_now, t0);
    CHECK(simba_is_owner(b));
    CHECK(!simba_is_owner(a));
    CHECK_EQ(ca.released_reason, SIMBA_REASON_YIELDED);
    CHECK(attempts_of(a) > asked); /* woken by the push it got while it still owned */
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

TEST(yield_without_waiter_keeps_fence_and_lease) {
    proc p;
    rec ca = {0};
    simba_service *a;
    uint64_t fence;
    int64_t lease_end;
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p);
    a = valued(&p, "y", "a", "A", 1, 3000, 1000, &ca);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(simba_is_owner(a));
    fence = simba_fence(a);
    lease_end = a->lease_end;
    CHECK_RC(simba_yield(a), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(evr.kept, 1);
    CHECK(simba_is_owner(a));
    CHECK_EQ(simba_fence(a), fence);
    CHECK_EQ(a->lease_end, lease_end);
    CHECK_EQ(ca.released, 0);
    /* a failing store: the yield fails, ownership unchanged as far as a knows */
    {
        simba_memory_fault f = {0};
        f.fail = 1;
        CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
        CHECK_RC(simba_yield(a), SIMBA_OK);
        CHECK(!simba_is_owner(a)); /* the store may pass it on from now */
        CHECK_EQ(simba_fence(a), 0);
        settle(&p, 1);
        CHECK_EQ(evr.yield_failed, 1);
        CHECK(!simba_is_owner(a)); /* it may have passed before the answer was lost */
        f.fail = 0;
        CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
        WAIT_FOR_SIM(&p, 1, simba_is_owner(a), 1000); /* a renewal, at once, confirms it */
        CHECK(simba_is_owner(a));
        CHECK_EQ(simba_fence(a), fence);
        CHECK(fake_now < lease_end);
        CHECK_EQ(ca.released, 0);
        CHECK_EQ(ca.acquired, 1);
    }
    proc_close(&p);
    store_free();
}

/* The store stops answering: on_at_risk once, at_risk_ms (half the margin) before the local
   lease ends, then on_released (lapsed) at its end. */
TEST(at_risk_fires_once_before_a_hung_lease_lapses) {
    proc p;
    rec ca = {0};
    simba_service *a;
    simba_memory_fault f = {0};
    int64_t lease_end;
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p);
    a = valued(&p, "risk", "a", NULL, 0, 3000, 1000, &ca); /* margin 1000: at risk at 500 left */
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(simba_is_owner(a));
    advance(&p, 1, 4000, 10); /* healthy renewals: no warning */
    CHECK_EQ(evr.at_risk, 0);
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    lease_end = a->lease_end;
    advance(&p, 1, 4000, 10);
    CHECK_EQ(evr.at_risk, 1);
    CHECK_EQ(evr.at_risk_left, 500);
    CHECK_EQ(evr.at_risk_at, lease_end - 500);
    CHECK_EQ(ca.released, 1);
    CHECK_EQ(ca.released_reason, SIMBA_REASON_LAPSED);
    CHECK_EQ(evr.released_at_risk, 1); /* the warning came first */
    CHECK_EQ(ca.released_at, lease_end);
    proc_close(&p);
    store_free();
}

/* Renewals that fail (answered with errors) warn too, once per tenure; a tenure whose renewal
   recovers is not warned again, and the next tenure may be. */
TEST(at_risk_once_per_tenure_when_renewals_fail) {
    proc p;
    rec ca = {0};
    simba_service *a;
    simba_contend_desc d;
    simba_memory_fault f = {0};
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p);
    memset(&d, 0, sizeof d);
    d.mutex = "risk";
    d.contender_id = "a";
    d.ttl_ms = 3000;
    d.transition_ms = 1000;
    d.on_acquired = on_acq;
    d.on_released = rel_after_risk;
    d.on_at_risk = at_risk_count;
    d.at_risk_ms = 900;
    d.user_data = &ca;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &a), SIMBA_OK);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(simba_is_owner(a));
    f.fail = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    WAIT_FOR_SIM(&p, 1, evr.at_risk == 1, 3000);
    CHECK_EQ(evr.at_risk, 1);
    CHECK_EQ(evr.at_risk_left, 900);
    CHECK(simba_is_owner(a));
    f.fail = 0; /* the next retry renews: same tenure, no second warning */
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 600, 10);
    CHECK(simba_is_owner(a));
    CHECK_EQ(ca.released, 0);
    f.fail = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 4000, 10);
    CHECK_EQ(evr.at_risk, 1);
    CHECK_EQ(ca.released, 1);
    f.fail = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    WAIT_FOR_SIM(&p, 1, simba_is_owner(a), 10000);
    REQUIRE(simba_is_owner(a));
    f.fail = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 4000, 10);
    CHECK_EQ(evr.at_risk, 2); /* the new tenure's */
    CHECK_EQ(ca.released, 2);
    proc_close(&p);
    store_free();
}


/* Pushes overtake answers: an owner with a fence below one already shown is old news, and an
   observer never goes back to a contender that no longer leads (nor to its value). */
TEST(observer_never_goes_back_to_an_older_fence) {
    proc p[3];
    rec ca = {0}, cb = {0}, co = {0};
    simba_service *a, *b, *obs;
    simba_observe_desc od;
    simba_owner o;
    uint64_t fa;
    int changes;
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    proc_open(&p[2]);
    memset(&od, 0, sizeof od);
    od.mutex = "back";
    od.on_owner = on_own;
    od.user_data = &co;
    CHECK_RC(simba_observe(p[2].loop, p[2].be, &od, &obs), SIMBA_OK);
    CHECK_RC(simba_start(obs), SIMBA_OK);
    a = valued(&p[0], "back", "a", "A", 1, 3000, 1000, &ca);
    b = valued(&p[1], "back", "b", "B", 1, 3000, 1000, &cb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 3);
    REQUIRE(simba_is_owner(a));
    fa = simba_fence(a);
    CHECK_RC(simba_stop(a), SIMBA_OK);
    settle(p, 3);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 3);
    REQUIRE(simba_is_owner(b));
    WAIT_FOR_SIM(p, 3, strcmp(co.last_after.id, "b") == 0, 2000);
    CHECK(value_is(&co.last_after, "B", 1));
    changes = co.owner_changes;
    /* a late push of a's tenure */
    simba_backend_event(p[2].be, SIMBA_EV_OWNER, "back", NULL,
                        &(simba_reply){.owner = "a", .ttl_left_ms = 3000, .transition_left_ms = 4000, .fence = fa,
                                       .value = (const unsigned char *)"A", .value_len = 1});
    settle(p, 3);
    CHECK_EQ(co.owner_changes, changes);
    CHECK_RC(simba_owner_get(obs, &o), SIMBA_OK);
    CHECK_STR(o.id, "b");
    CHECK(value_is(&o, "B", 1));
    /* "nobody" is not a contender's value: shown; a's tenure still is not */
    simba_backend_event(p[2].be, SIMBA_EV_OWNER, "back", NULL, &(simba_reply){.owner = NULL});
    settle(p, 3);
    CHECK_EQ(co.last_after.id[0], 0);
    simba_backend_event(p[2].be, SIMBA_EV_OWNER, "back", NULL,
                        &(simba_reply){.owner = "a", .ttl_left_ms = 3000, .transition_left_ms = 4000, .fence = fa,
                                       .value = (const unsigned char *)"A", .value_len = 1});
    settle(p, 3);
    CHECK(strcmp(co.last_after.id, "a") != 0);
    proc_close(&p[0]);
    proc_close(&p[1]);
    proc_close(&p[2]);
    store_free();
}


/* A proclaim on every poll never starves the renewals: a due renewal goes first. */
TEST(proclaims_never_starve_renewals) {
    proc p;
    rec ca = {0};
    simba_service *a;
    simba_memory_fault f = {0};
    int i;
    char v[16];
    memset(&evr, 0, sizeof evr);
    store_new();
    proc_open(&p);
    f.delay_ms = 5; /* every answer takes a while: a proclaim is always in flight */
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    a = valued(&p, "storm", "a", "v", 1, 1000, 500, &ca);
    CHECK_RC(simba_start(a), SIMBA_OK);
    WAIT_FOR_SIM(&p, 1, simba_is_owner(a), 100);
    REQUIRE(simba_is_owner(a));
    for (i = 0; i < 1000; i++) {
        snprintf(v, sizeof v, "v%d", i);
        if (simba_is_owner(a)) CHECK_RC(simba_set_value(a, v, strlen(v)), SIMBA_OK);
        advance(&p, 1, 5, 5);
    }
    CHECK(simba_is_owner(a));
    CHECK_EQ(ca.released, 0);
    CHECK_EQ(evr.at_risk, 0);
    proc_close(&p);
    store_free();
}

static int lk_risk_calls;
static int64_t lk_risk_left;
static void lk_at_risk(simba_locker *lk, int64_t left, void *u) {
    (void)u;
    CHECK(simba_locker_is_owner(lk));
    lk_risk_calls++;
    lk_risk_left = left;
}
TEST(locker_and_scheduler_take_a_value_and_the_locker_warns) {
    proc p[2];
    simba_locker *lk;
    simba_locker_desc ld;
    simba_scheduler *sc;
    simba_scheduler_desc sd;
    simba_service *obs;
    simba_observe_desc od;
    rec co = {0};
    simba_memory_fault f = {0};
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    memset(&od, 0, sizeof od);
    od.mutex = "lk";
    od.on_owner = on_own;
    od.user_data = &co;
    CHECK_RC(simba_observe(p[1].loop, p[1].be, &od, &obs), SIMBA_OK);
    CHECK_RC(simba_start(obs), SIMBA_OK);
    memset(&ld, 0, sizeof ld);
    ld.mutex = "lk";
    ld.contender_id = "locker";
    ld.ttl_ms = 3000;
    ld.transition_ms = 1000;
    ld.value = "job-7";
    ld.value_len = 5;
    ld.on_at_risk = lk_at_risk;
    CHECK_RC(simba_locker_new(p[0].loop, p[0].be, &ld, &lk), SIMBA_OK);
    CHECK_RC(simba_locker_try(lk), SIMBA_EAGAIN);
    settle(p, 2);
    CHECK_RC(simba_locker_try(lk), SIMBA_OK);
    WAIT_FOR_SIM(p, 2, value_is(&co.last_after, "job-7", 5), 3000);
    CHECK(value_is(&co.last_after, "job-7", 5));
    CHECK_STR(co.last_after.id, "locker");
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    advance(p, 2, 4000, 10);
    CHECK_EQ(lk_risk_calls, 1);
    CHECK_EQ(lk_risk_left, 500);
    CHECK(!simba_locker_is_owner(lk));
    CHECK_RC(simba_locker_free(lk), SIMBA_OK);
    memset(&sd, 0, sizeof sd);
    sd.mutex = "sc";
    sd.contender_id = "sched";
    sd.period_ms = 100;
    sd.work = noop_work;
    sd.value = "\x01\x00\x02";
    sd.value_len = 3;
    CHECK_RC(simba_scheduler_new(p[1].loop, p[1].be, &sd, &sc), SIMBA_OK);
    CHECK_RC(simba_scheduler_start(sc), SIMBA_OK);
    settle(p, 2);
    CHECK(simba_scheduler_is_owner(sc));
    {
        simba_view v;
        CHECK_RC(simba_inspect_wait(p[1].be, "sc", &v, 1000), SIMBA_OK);
        CHECK_STR(v.owner, "sched");
        CHECK_EQ(v.value_len, 3);
        CHECK(v.value && memcmp(v.value, "\x01\x00\x02", 3) == 0);
    }
    sd.value_len = SIMBA_VALUE_MAX + 1;
    sd.mutex = "sc2";
    {
        simba_scheduler *bad = NULL;
        CHECK_RC(simba_scheduler_new(p[1].loop, p[1].be, &sd, &bad), SIMBA_EINVAL);
        CHECK(strstr(simba_loop_errmsg(p[1].loop), "simba_scheduler_new: value_len 1025") != NULL);
    }
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

/* ---- semaphores and read-write locks ------------------------------------------------------ */

static simba_service *sem_rec(proc *p, const char *mutex, const char *id, int permits, int shared, const char *value, rec *r) {
    simba_contend_desc d;
    simba_service *s = NULL;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    d.contender_id = id;
    d.ttl_ms = 3000;
    d.transition_ms = 1000;
    d.on_acquired = on_acq;
    d.on_released = on_rel;
    d.user_data = r;
    d.permits = permits;
    d.shared = shared;
    d.value = value;
    d.value_len = value ? strlen(value) : 0;
    CHECK_RC(simba_contend(p->loop, p->be, &d, &s), SIMBA_OK);
    return s;
}

TEST(permits_and_shared_checked_with_words) {
    proc p;
    simba_contend_desc d;
    simba_locker_desc ld;
    simba_service *s = NULL;
    simba_locker *lk = NULL;
    store_new();
    proc_open(&p);
    memset(&d, 0, sizeof d);
    d.mutex = "sem";
    d.contender_id = "a";
    d.permits = -1;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "simba_contend: permits -1 is out of range") != NULL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "SIMBA_PERMITS_MAX = 1024") != NULL);
    d.permits = SIMBA_PERMITS_MAX + 1;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "permits 1025 is out of range") != NULL);
    d.permits = 3;
    d.shared = 1;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "shared 1 with permits 3") != NULL);
    d.permits = 0;
    d.shared = 2;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "shared 2 must be 0") != NULL);
    CHECK(s == NULL);
    memset(&ld, 0, sizeof ld);
    ld.mutex = "sem";
    ld.permits = -5;
    CHECK_RC(simba_locker_new(p.loop, p.be, &ld, &lk), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "simba_locker_new: permits -5") != NULL);
    ld.permits = SIMBA_PERMITS_MAX;
    CHECK_RC(simba_locker_new(p.loop, p.be, &ld, &lk), SIMBA_OK);
    d.permits = 1;
    d.shared = 1;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_OK);
    simba_locker_free(lk);
    simba_service_free(s);
    proc_close(&p);
    store_free();
}

/* A waiter times its ask by the holder whose permit frees first: a dead holder's permit is
   taken right at the end of its lease, while the other holder renews on. */
TEST(semaphore_waiter_takes_a_dead_holders_permit_at_its_lease_end) {
    proc p[3];
    rec ca = {0}, cb = {0}, cc = {0};
    simba_service *a, *b, *c;
    simba_memory_fault f = {0};
    simba__mentry *e;
    int64_t a_end;
    int k;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    proc_open(&p[2]);
    a = sem_rec(&p[0], "sem", "a", 2, 0, NULL, &ca);
    b = sem_rec(&p[1], "sem", "b", 2, 0, NULL, &cb);
    c = sem_rec(&p[2], "sem", "c", 2, 0, NULL, &cc);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 3);
    advance(p, 3, 700, 10);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 3);
    REQUIRE(simba_is_owner(a) && simba_is_owner(b));
    CHECK(simba_fence(b) > simba_fence(a));
    advance(p, 3, 2500, 10);
    /* a's process freezes: nothing it sends reaches the store any more */
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    e = (simba__mentry *)simba__hfind(&store->entries, "sem");
    REQUIRE(e != NULL);
    k = simba__mhold_find(e, "a");
    REQUIRE(k >= 0);
    a_end = e->hs[k].transition_at;
    advance(p, 3, 100, 10);
    CHECK_RC(simba_start(c), SIMBA_OK);
    settle(p, 3);
    CHECK(!simba_is_owner(c));
    WAIT_FOR_SIM(p, 3, cc.acquired == 1, 10000);
    CHECK_EQ(cc.acquired, 1);
    CHECK_EQ(fake_now, a_end + 1);
    CHECK(simba_is_owner(b));
    CHECK(cc.last_fence > simba_fence(b));
    f.hang = 0;
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    proc_close(&p[0]);
    proc_close(&p[1]);
    proc_close(&p[2]);
    store_free();
}

/* A writer's release is pushed to every reader it frees at the head of the line, at once;
   the writer behind them, and the reader behind that writer, wait. */
TEST(writer_release_pushes_every_reader_it_frees) {
    proc p[5];
    rec cw = {0}, c1 = {0}, c2 = {0}, cw2 = {0}, c3 = {0};
    simba_service *w, *r1, *r2, *w2, *r3;
    int64_t t0;
    int i;
    store_new();
    for (i = 0; i < 5; i++) proc_open(&p[i]);
    w = sem_rec(&p[0], "rw", "w", 0, 0, NULL, &cw);
    r1 = sem_rec(&p[1], "rw", "r1", 0, 1, NULL, &c1);
    r2 = sem_rec(&p[2], "rw", "r2", 0, 1, NULL, &c2);
    w2 = sem_rec(&p[3], "rw", "w2", 0, 0, NULL, &cw2);
    r3 = sem_rec(&p[4], "rw", "r3", 0, 1, NULL, &c3);
    CHECK_RC(simba_start(w), SIMBA_OK);
    settle(p, 5);
    CHECK_RC(simba_start(r1), SIMBA_OK);
    settle(p, 5);
    CHECK_RC(simba_start(r2), SIMBA_OK);
    settle(p, 5);
    CHECK_RC(simba_start(w2), SIMBA_OK);
    settle(p, 5);
    CHECK_RC(simba_start(r3), SIMBA_OK);
    settle(p, 5);
    advance(p, 5, 200, 10);
    REQUIRE(simba_is_owner(w));
    CHECK(!simba_is_owner(r1) && !simba_is_owner(r2) && !simba_is_owner(w2) && !simba_is_owner(r3));
    t0 = fake_now;
    CHECK_RC(simba_stop(w), SIMBA_OK);
    settle(p, 5);
    CHECK_EQ(fake_now, t0);
    CHECK(simba_is_owner(r1) && simba_is_owner(r2));
    CHECK(!simba_is_owner(w2) && !simba_is_owner(r3));
    CHECK(c2.last_fence > c1.last_fence && c1.last_fence > cw.last_fence);
    advance(p, 5, 5000, 10); /* across renewals: the line stays as it is */
    CHECK(simba_is_owner(r1) && simba_is_owner(r2) && !simba_is_owner(w2) && !simba_is_owner(r3));
    CHECK_RC(simba_stop(r1), SIMBA_OK);
    settle(p, 5);
    CHECK(!simba_is_owner(w2));
    t0 = fake_now;
    CHECK_RC(simba_stop(r2), SIMBA_OK);
    settle(p, 5);
    CHECK(simba_is_owner(w2) && !simba_is_owner(r3));
    CHECK_RC(simba_stop(w2), SIMBA_OK);
    settle(p, 5);
    CHECK(simba_is_owner(r3));
    CHECK(c3.last_fence > cw2.last_fence && cw2.last_fence > c2.last_fence);
    for (i = 0; i < 5; i++) proc_close(&p[i]);
    store_free();
}

static simba_view sem_view;
static simba_result sem_view_rc = SIMBA_EAGAIN;
static void sem_view_cb(const simba_view *v, simba_result rc, void *u) {
    (void)u;
    (void)v;
    sem_view_rc = rc;
}
static const simba_view_holder *sem_holder(const simba_view *v, const char *id) {
    int i;
    for (i = 0; i < v->holders && v->holder; i++)
        if (strcmp(v->holder[i].id, id) == 0) return &v->holder[i];
    return NULL;
}

/* The store lists each holder with its own fence, lease and value; an operator frees one
   of them by its fence, and only that one. */
TEST(holders_listed_each_with_its_value_and_one_force_released) {
    proc p[4];
    rec ca = {0}, cb = {0}, cc = {0}, cd = {0};
    simba_service *a, *b, *c, *d;
    const simba_view_holder *h;
    int i;
    store_new();
    for (i = 0; i < 4; i++) proc_open(&p[i]);
    a = sem_rec(&p[0], "pool", "a", 3, 0, "A", &ca);
    b = sem_rec(&p[1], "pool", "b", 3, 0, "BB", &cb);
    c = sem_rec(&p[2], "pool", "c", 3, 0, "CCC", &cc);
    d = sem_rec(&p[3], "pool", "d", 3, 0, NULL, &cd);
    CHECK_RC(simba_start(a), SIMBA_OK);
    advance(p, 4, 100, 10);
    CHECK_RC(simba_start(b), SIMBA_OK);
    advance(p, 4, 100, 10);
    CHECK_RC(simba_start(c), SIMBA_OK);
    advance(p, 4, 100, 10);
    CHECK_RC(simba_start(d), SIMBA_OK);
    advance(p, 4, 100, 10);
    REQUIRE(simba_is_owner(a) && simba_is_owner(b) && simba_is_owner(c) && !simba_is_owner(d));
    CHECK_RC(simba_inspect(p[3].be, "pool", &sem_view, sem_view_cb, NULL), SIMBA_OK);
    settle(p, 4);
    CHECK_RC(sem_view_rc, SIMBA_OK);
    CHECK_EQ(sem_view.holders, 3);
    CHECK_EQ(sem_view.permits, 3);
    CHECK_EQ(sem_view.waiters, 1);
    CHECK_STR(sem_view.waiter[0], "d");
    CHECK_STR(sem_view.owner, "a"); /* the one whose permit frees first */
    REQUIRE((h = sem_holder(&sem_view, "b")) != NULL);
    CHECK_EQ(h->fence, simba_fence(b));
    CHECK(h->value_len == 2 && memcmp(h->value, "BB", 2) == 0);
    CHECK(h->ttl_left_ms > 0 && h->transition_left_ms == h->ttl_left_ms + 1000);
    CHECK(!h->shared);
    REQUIRE((h = sem_holder(&sem_view, "c")) != NULL);
    CHECK(h->value_len == 3 && memcmp(h->value, "CCC", 3) == 0);
    CHECK(sem_view.holder[0].fence < sem_view.holder[1].fence && sem_view.holder[1].fence < sem_view.holder[2].fence);
    /* b is freed by its fence: d gets the permit, pushed; a and c hold on */
    sem_view_rc = SIMBA_EAGAIN;
    CHECK_RC(simba_force_release(p[3].be, "pool", simba_fence(b), sem_view_cb, NULL), SIMBA_OK);
    settle(p, 4);
    CHECK_RC(sem_view_rc, SIMBA_OK);
    CHECK(simba_is_owner(d));
    advance(p, 4, 3000, 10); /* b learns at its renewal */
    CHECK(!simba_is_owner(b));
    CHECK_EQ(cb.reason, SIMBA_REASON_REFUSED);
    CHECK(simba_is_owner(a) && simba_is_owner(c) && simba_is_owner(d));
    sem_view_rc = SIMBA_EAGAIN;
    CHECK_RC(simba_force_release(p[3].be, "pool", cb.last_fence, sem_view_cb, NULL), SIMBA_OK);
    settle(p, 4);
    CHECK_RC(sem_view_rc, SIMBA_EFENCE);
    for (i = 0; i < 4; i++) proc_close(&p[i]);
    store_free();
}

/* A holder of a semaphore proclaims its own value (the others keep theirs) and yields its own
   permit: the oldest waiter gets it, pushed, and the yielder waits behind. */
TEST(semaphore_holder_proclaims_and_yields_its_own_permit) {
    proc p[3];
    rec ca = {0}, cb = {0}, cc = {0};
    simba_service *a, *b, *c;
    const simba_view_holder *h;
    int i;
    store_new();
    for (i = 0; i < 3; i++) proc_open(&p[i]);
    a = sem_rec(&p[0], "pair", "a", 2, 0, "A", &ca);
    b = sem_rec(&p[1], "pair", "b", 2, 0, "B", &cb);
    c = sem_rec(&p[2], "pair", "c", 2, 0, "C", &cc);
    CHECK_RC(simba_start(a), SIMBA_OK);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 3);
    CHECK_RC(simba_start(c), SIMBA_OK);
    settle(p, 3);
    REQUIRE(simba_is_owner(a) && simba_is_owner(b) && !simba_is_owner(c));
    CHECK_RC(simba_set_value(b, "B2", 2), SIMBA_OK);
    settle(p, 3);
    sem_view_rc = SIMBA_EAGAIN;
    CHECK_RC(simba_inspect(p[2].be, "pair", &sem_view, sem_view_cb, NULL), SIMBA_OK);
    settle(p, 3);
    CHECK_RC(sem_view_rc, SIMBA_OK);
    REQUIRE((h = sem_holder(&sem_view, "b")) != NULL);
    CHECK(h->value_len == 2 && memcmp(h->value, "B2", 2) == 0);
    CHECK_EQ(h->fence, simba_fence(b));
    REQUIRE((h = sem_holder(&sem_view, "a")) != NULL);
    CHECK(h->value_len == 1 && memcmp(h->value, "A", 1) == 0);
    CHECK_RC(simba_yield(a), SIMBA_OK);
    settle(p, 3); /* no time passes: the push alone hands the permit over */
    CHECK(!simba_is_owner(a) && simba_is_owner(b) && simba_is_owner(c));
    CHECK_EQ(ca.released, 1);
    CHECK_EQ(ca.reason, SIMBA_REASON_YIELDED);
    CHECK(cc.last_fence > cb.last_fence);
    CHECK_RC(simba_stop(b), SIMBA_OK);
    settle(p, 3);
    CHECK(simba_is_owner(a)); /* a waited behind, and b's permit is its now */
    for (i = 0; i < 3; i++) proc_close(&p[i]);
    store_free();
}

/* A reader's id back as a writer (the process restarted with a configured id while the
   store still lists it as a reader) holds neither beside the other readers nor as a reader:
   its old holding ends and it waits as any writer does. */
TEST(reader_id_back_as_writer_waits_for_the_readers) {
    proc p[3];
    rec cx = {0}, cy = {0}, cw = {0};
    simba_service *x, *y, *w;
    simba_memory_fault f = {0};
    int i;
    store_new();
    for (i = 0; i < 3; i++) proc_open(&p[i]);
    x = sem_rec(&p[0], "rw", "x", 0, 1, NULL, &cx);
    y = sem_rec(&p[1], "rw", "y", 0, 1, NULL, &cy);
    CHECK_RC(simba_start(x), SIMBA_OK);
    CHECK_RC(simba_start(y), SIMBA_OK);
    settle(p, 3);
    REQUIRE(simba_is_owner(x) && simba_is_owner(y));
    f.hang = 1; /* x's process dies: its release never reaches the store */
    CHECK_RC(simba_memory_fault_set(p[0].be, &f), SIMBA_OK);
    proc_close(&p[0]);
    w = sem_rec(&p[2], "rw", "x", 0, 0, NULL, &cw);
    CHECK_RC(simba_start(w), SIMBA_OK);
    settle(p + 1, 2);
    CHECK(!simba_is_owner(w));
    advance(p + 1, 2, 6000, 10); /* across y's renewals */
    CHECK(!simba_is_owner(w) && simba_is_owner(y));
    CHECK_RC(simba_stop(y), SIMBA_OK);
    settle(p + 1, 2);
    CHECK(simba_is_owner(w));
    CHECK(cw.last_fence > cy.last_fence);
    proc_close(&p[1]);
    proc_close(&p[2]);
    store_free();
}

/* ---- a backend's own call (simba_backend_call) ------------------------------------------ */

typedef struct call_seen {
    int calls, freed, inner_rc;
    simba_result rc;
    char err[128];
    simba_loop *loop;
} call_seen;
static simba_result call_fail_at_once(void *impl, simba_req *req) {
    (void)impl;
    CHECK(req->op == SIMBA_OP_CALL && req->fence == 7 && strcmp(req->mutex, "job") == 0);
    simba_req_fail(req, SIMBA_EFENCE, "fence 7 moved on");
    return SIMBA_OK;
}
static simba_result call_keep(void *impl, simba_req *req) {
    (void)impl;
    (void)req; /* never answered: the loop goes first */
    return SIMBA_OK;
}
static simba_result call_refuse(void *impl, simba_req *req) {
    (void)impl;
    (void)req;
    return SIMBA_EBACKEND;
}
static void call_done(simba_req *req, simba_result rc, const char *errmsg, void *user) {
    call_seen *c = (call_seen *)user;
    if (!req) { c->freed++; return; }
    c->calls++;
    c->rc = rc;
    snprintf(c->err, sizeof c->err, "%s", errmsg ? errmsg : "");
    CHECK(simba_req_call_user(req) == user);
    c->inner_rc = simba_poll(c->loop) < 0 ? SIMBA_ECALLBACK : SIMBA_OK; /* from a callback: refused */
}

/* An answer given inside start comes from the next poll, as a callback; a loop freed first
   lets the backend free its part, and calls nothing else. */
TEST(backend_call_answers_from_the_poll) {
    proc p;
    call_seen c;
    store_new();
    proc_open(&p);
    memset(&c, 0, sizeof c);
    c.loop = p.loop;
    CHECK_RC(simba_backend_call(p.be, "job", 7, call_fail_at_once, call_done, &c), SIMBA_OK);
    CHECK_EQ(c.calls, 0);
    simba_poll(p.loop);
    CHECK_EQ(c.calls, 1);
    CHECK_RC(c.rc, SIMBA_EFENCE);
    CHECK_STR(c.err, "fence 7 moved on");
    CHECK_RC(c.inner_rc, SIMBA_ECALLBACK);
    /* start refuses: the core fails the call, through the poll all the same */
    CHECK_RC(simba_backend_call(p.be, "job", 7, call_refuse, call_done, &c), SIMBA_OK);
    simba_poll(p.loop);
    CHECK_EQ(c.calls, 2);
    CHECK_RC(c.rc, SIMBA_EBACKEND);
    /* refused before anything starts: no callback ever */
    CHECK_RC(simba_backend_call(p.be, "", 7, call_keep, call_done, &c), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(p.loop), "name") != NULL);
    CHECK_RC(simba_backend_call(p.be, "job", 7, NULL, call_done, &c), SIMBA_EINVAL);
    CHECK_RC(simba_backend_call(p.be, "job", 7, call_keep, call_done, &c), SIMBA_OK);
    simba_poll(p.loop);
    CHECK_EQ(c.calls, 2);
    proc_close(&p);
    CHECK_EQ(c.calls, 2);
    CHECK_EQ(c.freed, 1);
    store_free();
}

/* The core announces each grant and each new value of its contender once (vt->announce),
   with the owner record, never a renewal nor a kept yield; the stores that push by
   themselves leave the hook NULL. */
static int ann_n;
static char ann_owner[SIMBA_ID_MAX + 1], ann_value[16];
static uint64_t ann_fence;
static int64_t ann_ttl;
static void ann_spy(void *impl, const char *mutex, const simba_reply *o) {
    (void)impl;
    CHECK_STR(mutex, "ann");
    ann_n++;
    snprintf(ann_owner, sizeof ann_owner, "%s", o->owner);
    snprintf(ann_value, sizeof ann_value, "%.*s", (int)o->value_len, o->value ? (const char *)o->value : "");
    ann_fence = o->fence;
    ann_ttl = o->ttl_left_ms;
}
TEST(grant_and_value_announced_once_each) {
    proc p;
    simba_contend_desc d;
    simba_service *s = NULL;
    store_new();
    proc_open(&p);
    p.be->announce = ann_spy;
    ann_n = 0;
    memset(&d, 0, sizeof d);
    d.mutex = "ann";
    d.contender_id = "a";
    d.ttl_ms = 3000;
    d.transition_ms = 1000;
    d.value = "v1";
    d.value_len = 2;
    CHECK_RC(simba_contend(p.loop, p.be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    CHECK(simba_is_owner(s));
    CHECK_EQ(ann_n, 1);
    CHECK_STR(ann_owner, "a");
    CHECK_STR(ann_value, "v1");
    CHECK_EQ(ann_fence, simba_fence(s));
    CHECK(ann_ttl > 0 && ann_ttl <= 3000);
    advance(&p, 1, 10000, 100); /* renewals */
    CHECK(simba_is_owner(s));
    CHECK_EQ(ann_n, 1);
    CHECK_RC(simba_set_value(s, "v2", 2), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(ann_n, 2);
    CHECK_STR(ann_value, "v2");
    CHECK_RC(simba_yield(s), SIMBA_OK); /* nobody waits: kept */
    settle(&p, 1);
    CHECK(simba_is_owner(s));
    CHECK_EQ(ann_n, 2);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(ann_n, 2);
    proc_close(&p);
    store_free();
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(owner_predicates);
    RUN(timer_heap_keeps_time_order_under_moves_and_removals);
    RUN(names_and_ids);
    RUN(contender_ids);
    RUN(owner_renews_at_ttl_minus_margin);
    RUN(renew_margin_capped_by_granted_session_lease);
    RUN(asked_lease_grant_clamped_to_what_was_asked);
    RUN(disconnect_steps_down_only_owners_that_ask);
    RUN(non_owner_jitter_bounds);
    RUN(forged_announcement_delays_at_most_one_lease);
    RUN(transition_zero_jitter_and_no_owner_at_once);
    RUN(backoff_after_errors_is_bounded);
    RUN(one_duration_limit_and_the_backends_lease_bound);
    RUN(quarantine_is_an_event_and_the_grant_comes_at_its_end);
    RUN(illegal_lifecycle_calls);
    RUN(defaults_and_zero_desc);
    RUN(poll_from_callback_refused_stop_deferred);
    RUN(free_from_callback_deferred);
    RUN(stale_acquire_after_stop_is_released);
    RUN(hung_backend_owner_steps_down_before_anyone_wins);
    RUN(is_owner_checks_time_even_without_poll);
    RUN(memory_fence_check_ends_with_the_lease_by_the_store_clock);
    RUN(store_data_loss_quarantines_grants_and_keeps_fences_growing);
    RUN(renewal_answered_with_an_older_fence_is_not_ownership);
    RUN(late_grant_after_local_lapse_is_not_ownership);
    RUN(reacquire_after_local_step_down_gets_new_fence);
    RUN(release_push_wakes_head_waiter_at_once);
    RUN(only_a_waiters_timer_asks_are_deferrable);
    RUN(queued_waiters_acquire_in_arrival_order);
    RUN(releaser_asking_again_at_once_goes_to_the_back);
    RUN(dead_head_waiter_blocks_no_longer_than_its_liveness);
    RUN(waiter_keeps_its_place_through_other_tenures);
    RUN(observer_sees_every_owner_change_and_fences_grow);
    RUN(ten_contenders_thirty_seconds);
    RUN(locker_lock_timeout_try_unlock);
    RUN(locker_unlock_sends_release_at_once);
    RUN(locker_unlock_wait_refused_from_callback);
    RUN(locker_timeout_leaves_the_queue_at_once);
    RUN(locker_reports_lost_lock);
    RUN(scheduler_runs_only_while_owner);
    RUN(scheduler_fixed_delay);
    RUN(steady_state_polling_allocates_nothing);
    RUN(poll_yields_when_many_timers_fall_due);
    RUN(poll_budget_bounds_every_poll_of_a_renewal_herd);
    RUN(renewals_of_owners_started_together_spread);
    RUN(other_owner_kept_without_a_fixed_buffer_and_out_of_memory_backs_off);
    RUN(memory_per_service_under_a_kibibyte);
    RUN(stop_during_renewal_fires_on_released_once_whatever_the_budget);
    RUN(fds_and_wait);
    RUN(backend_vt_of_unknown_size_refused);
    RUN(process_called_with_explicit_flags);
    RUN(backend_free_refused_while_used);
    RUN(backend_free_after_last_service_free_is_deferred);
    RUN(loops_on_threads_share_a_store);
    RUN(loop_freed_from_callback_while_locker_blocks);
    RUN(loop_freed_from_callback_while_simba_lock_blocks);
    RUN(poll_that_frees_the_loop_returns_eclosed);
    RUN(locker_freed_from_callback_while_it_blocks);
    RUN(locker_unlocked_from_callback_while_it_blocks);
    RUN(loop_free_with_renewal_in_flight_hands_over_at_once);
    RUN(stop_then_loop_free_with_renewal_in_flight_hands_over_at_once);
    RUN(stop_sends_release_behind_a_renewal_in_flight);
    RUN(stop_wait_confirms_the_release);
    RUN(loop_close_releases_everything_then_frees);
    RUN(blocking_calls_run_in_simulated_time_with_a_sleep_hook);
    RUN(warnings_go_to_stderr_once_per_cause_without_a_log_hook);
    RUN(unlock_after_lapse_reports_lost);
    RUN(locker_on_locked_from_the_poll);
    RUN(value_goes_with_the_grant_and_proclaim_keeps_fence_and_lease);
    RUN(set_value_and_yield_refused_with_words);
    RUN(set_value_refused_by_the_store_ends_the_tenure);
    RUN(yield_passes_to_the_head_waiter_which_is_pushed);
    RUN(release_pushed_while_a_yield_is_in_flight_wakes_the_yielder);
    RUN(yield_without_waiter_keeps_fence_and_lease);
    RUN(at_risk_fires_once_before_a_hung_lease_lapses);
    RUN(at_risk_once_per_tenure_when_renewals_fail);
    RUN(locker_and_scheduler_take_a_value_and_the_locker_warns);
    RUN(observer_never_goes_back_to_an_older_fence);
    RUN(proclaims_never_starve_renewals);
    RUN(permits_and_shared_checked_with_words);
    RUN(semaphore_waiter_takes_a_dead_holders_permit_at_its_lease_end);
    RUN(writer_release_pushes_every_reader_it_frees);
    RUN(holders_listed_each_with_its_value_and_one_force_released);
    RUN(semaphore_holder_proclaims_and_yields_its_own_permit);
    RUN(reader_id_back_as_writer_waits_for_the_readers);
    RUN(backend_call_answers_from_the_poll);
    RUN(grant_and_value_announced_once_each);
    return check_report("core");
}
