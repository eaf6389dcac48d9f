/* Release reasons and statistics: one test per reason a contender (or a Locker) loses
   ownership, and the counters of simba_service_stats()/simba_loop_stats(), on the in-memory
   backend with an injected clock and random source so that every figure is exact. */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"
#include "check.h"

#include <stdlib.h>

#include "fixture.h"

static simba_service *contender_ex(proc *p, const char *mutex, const char *id, rec *r, int step_down_on_disconnect) {
    return contend_rec(p, mutex, id, 1000, 600, r, step_down_on_disconnect);
}
static simba_service *contender(proc *p, const char *mutex, const char *id, rec *r) { return contender_ex(p, mutex, id, r, 0); }

static simba_stats stats_of(const simba_service *s) {
    simba_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(simba_service_stats(s, &st), SIMBA_OK);
    return st;
}
static simba_stats loop_stats_of(const simba_loop *l) {
    simba_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(simba_loop_stats(l, &st), SIMBA_OK);
    return st;
}

/* ---- reasons ---------------------------------------------------------------------------- */

TEST(reason_names) {
    CHECK_STR(simba_reason_str(SIMBA_REASON_NONE), "none");
    CHECK_STR(simba_reason_str(SIMBA_REASON_STOPPED), "stopped");
    CHECK_STR(simba_reason_str(SIMBA_REASON_UNLOCKED), "unlocked");
    CHECK_STR(simba_reason_str(SIMBA_REASON_LAPSED), "lapsed");
    CHECK_STR(simba_reason_str(SIMBA_REASON_REFUSED), "refused");
    CHECK_STR(simba_reason_str(SIMBA_REASON_SESSION), "session");
    CHECK_STR(simba_reason_str(SIMBA_REASON_CONNECTION), "connection");
    CHECK_STR(simba_reason_str(SIMBA_REASON_YIELDED), "yielded");
    CHECK_STR(simba_reason_str(SIMBA_REASON_COUNT_), "unknown");
    CHECK_STR(simba_reason_str(-1), "unknown");
    CHECK(SIMBA_REASON_COUNT_ <= SIMBA_REASON_SLOTS);
}

TEST(reason_stopped_and_no_reason_outside_release) {
    proc p;
    rec r = {0};
    simba_service *s;
    simba_stats st;
    store_new();
    proc_open(&p);
    s = contender(&p, "m", "a", &r);
    r.acquired_reason = r.owner_reason = (simba_reason)99;
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(r.acquired == 1);
    CHECK_EQ(r.acquired_reason, SIMBA_REASON_NONE);
    CHECK(r.owner_changes >= 1);
    CHECK_EQ(r.owner_reason, SIMBA_REASON_NONE);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(r.released, 1);
    CHECK_EQ(r.released_reason, SIMBA_REASON_STOPPED);
    st = stats_of(s);
    CHECK_EQ(st.releases, 1);
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_STOPPED], 1);
    CHECK_EQ(st.step_downs, 0); /* the user asked for it */
    CHECK_EQ(st.owned, 0);
    /* a restart that wins again and is stopped again: still "stopped", never a leftover */
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(r.acquired, 2);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(r.released_reason, SIMBA_REASON_STOPPED);
    CHECK_EQ(stats_of(s).releases_by_reason[SIMBA_REASON_STOPPED], 2);
    proc_close(&p);
    store_free();
}

static int lost_calls;
static simba_reason lost_reason;
static void on_lost(simba_locker *lk, void *u) {
    (void)u;
    lost_calls++;
    lost_reason = simba_locker_last_reason(lk); /* readable inside on_lost */
}

static simba_locker *locker(proc *p, const char *mutex) {
    simba_locker_desc d = {0};
    simba_locker *lk = NULL;
    d.mutex = mutex;
    d.contender_id = "lk";
    d.ttl_ms = 1000;
    d.transition_ms = 600;
    d.on_lost = on_lost;
    CHECK_RC(simba_locker_new(p->loop, p->be, &d, &lk), SIMBA_OK);
    return lk;
}

TEST(reason_unlocked_for_a_locker) {
    proc p;
    simba_locker *lk;
    simba_stats st;
    store_new();
    proc_open(&p);
    lk = locker(&p, "job");
    CHECK_EQ(simba_locker_last_reason(lk), SIMBA_REASON_NONE);
    CHECK_RC(simba_locker_try(lk), SIMBA_EAGAIN);
    settle(&p, 1);
    CHECK_RC(simba_locker_try(lk), SIMBA_OK);
    lost_calls = 0;
    CHECK_RC(simba_locker_unlock(lk), SIMBA_OK);
    settle(&p, 1);
    CHECK_EQ(lost_calls, 0); /* an unlock is not a loss */
    CHECK_EQ(simba_locker_last_reason(lk), SIMBA_REASON_UNLOCKED);
    st = stats_of(simba_locker_service(lk));
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_UNLOCKED], 1);
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_STOPPED], 0);
    CHECK_EQ(st.step_downs, 0);
    CHECK(simba_locker_service(NULL) == NULL);
    CHECK_EQ(simba_locker_last_reason(NULL), SIMBA_REASON_NONE);
    CHECK_RC(simba_locker_free(lk), SIMBA_OK);
    proc_close(&p);
    store_free();
}

/* The server stops answering: the lease lapses locally. The Locker's on_lost hears it too. */
TEST(reason_lapsed_when_the_server_hangs) {
    proc p;
    rec r = {0};
    simba_service *s;
    simba_locker *lk;
    simba_memory_fault f = {0};
    simba_stats st;
    int64_t lease_end;
    store_new();
    proc_open(&p);
    s = contender(&p, "m", "a", &r);
    lk = locker(&p, "job");
    CHECK_RC(simba_start(s), SIMBA_OK);
    CHECK_RC(simba_locker_try(lk), SIMBA_EAGAIN);
    settle(&p, 1);
    REQUIRE(r.acquired == 1 && simba_locker_is_owner(lk));
    lease_end = fake_now + 1000;
    f.hang = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    lost_calls = 0;
    advance(&p, 1, 1500, 5);
    CHECK_EQ(r.released, 1);
    CHECK_EQ(r.released_reason, SIMBA_REASON_LAPSED);
    CHECK(r.released_at <= lease_end);
    CHECK_EQ(lost_calls, 1);
    CHECK_EQ(lost_reason, SIMBA_REASON_LAPSED);
    st = stats_of(s);
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_LAPSED], 1);
    CHECK_EQ(st.step_downs, 1);
    CHECK_EQ(st.errors, 0); /* no answer at all is not an error answer */
    f.hang = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_RC(simba_locker_free(lk), SIMBA_OK);
    proc_close(&p);
    store_free();
}

/* The server answers every renewal with an error: lapsed, and the errors are counted. */
TEST(reason_lapsed_when_renewals_fail) {
    proc p;
    rec r = {0};
    simba_service *s;
    simba_memory_fault f = {0};
    simba_stats st;
    store_new();
    proc_open(&p);
    s = contender(&p, "m", "a", &r);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(r.acquired == 1);
    f.fail = 1;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    advance(&p, 1, 1200, 5);
    CHECK_EQ(r.released, 1);
    CHECK_EQ(r.released_reason, SIMBA_REASON_LAPSED);
    st = stats_of(s);
    CHECK(st.errors >= 2); /* an owner retries at least twice before its lease ends */
    CHECK(st.renewals_failed >= 2);
    CHECK_EQ(st.renewals, 0);
    CHECK_EQ(st.last_error, SIMBA_EBACKEND);
    CHECK_STR(st.last_error_msg, "memory backend: injected failure");
    CHECK(st.last_error_at > fake_now - 1200 && st.last_error_at <= fake_now);
    f.fail = 0;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    proc_close(&p);
    store_free();
}

/* The store's clock jumps ahead: it sees a's lease over and grants b; a's next renewal is
   answered with owner b. */
TEST(reason_refused_when_the_server_names_another_owner) {
    proc p[2];
    rec ra = {0}, rb = {0};
    simba_service *a, *b;
    simba_stats st;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = contender(&p[0], "m", "a", &ra);
    b = contender(&p[1], "m", "b", &rb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    REQUIRE(ra.acquired == 1);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 2);
    store_skew = 5000;
    CHECK_RC(simba_memory_fault_set(p[0].be, &(simba_memory_fault){.hang = 1}), SIMBA_OK);
    CHECK_RC(simba_stop(b), SIMBA_OK); /* b asks again at once after its restart */
    settle(p, 2);
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 2);
    REQUIRE(rb.acquired == 1);
    CHECK_EQ(ra.released, 0);
    CHECK_RC(simba_memory_fault_set(p[0].be, &(simba_memory_fault){0}), SIMBA_OK);
    advance(p, 1, 700, 5); /* a's renewal goes out (at ttl - margin) and is refused */
    CHECK_EQ(ra.released, 1);
    CHECK_EQ(ra.released_reason, SIMBA_REASON_REFUSED);
    CHECK(ra.released_at < ra.acquired_at + 1000); /* before its own lease lapsed */
    st = stats_of(a);
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_REFUSED], 1);
    CHECK_EQ(st.renewals_failed, 1);
    CHECK_EQ(st.step_downs, 1);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

/* Another process with the same contender id starts a new tenure on the server (new fence):
   the old tenure's next renewal comes back with that fence, which ends the old one. */
TEST(reason_refused_when_the_server_replaced_the_tenure) {
    proc p[2];
    rec ra = {0}, rb = {0};
    simba_service *a, *twin;
    uint64_t f1;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = contender(&p[0], "m", "a", &ra);
    twin = contender(&p[1], "m", "a", &rb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 1);
    REQUIRE(ra.acquired == 1);
    f1 = simba_fence(a);
    CHECK_RC(simba_start(twin), SIMBA_OK); /* not a renewal: the store starts a new tenure */
    settle(p, 2);
    REQUIRE(rb.acquired == 1);
    CHECK(simba_fence(twin) > f1);
    CHECK_RC(simba_stop(twin), SIMBA_OK); /* the twin leaves; its release empties the record */
    settle(p, 2);
    CHECK_RC(simba_start(twin), SIMBA_OK);
    settle(p, 2);
    CHECK_RC(simba_service_free(twin), SIMBA_OK);
    settle(p, 2);
    /* a's renewal finds the record empty; the store grants it as a new tenure (new fence),
       so the tenure a's user was told of has ended: released, then acquired again */
    advance(p, 1, 700, 5);
    CHECK_EQ(ra.released, 1);
    CHECK_EQ(ra.acquired, 2);
    CHECK_EQ(ra.released_reason, SIMBA_REASON_REFUSED);
    CHECK_EQ(stats_of(a).releases_by_reason[SIMBA_REASON_REFUSED], 1);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

TEST(reason_session_and_connection_from_backend_events) {
    proc p;
    rec r = {0};
    simba_service *s;
    simba_stats st;
    store_new();
    proc_open(&p);
    s = contender_ex(&p, "m", "a", &r, 1); /* steps down on SIMBA_EV_DISCONNECTED */
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(r.acquired == 1);
    simba_backend_event(p.be, SIMBA_EV_LOST, NULL, NULL, NULL);
    settle(&p, 1);
    CHECK_EQ(r.released, 1);
    CHECK_EQ(r.released_reason, SIMBA_REASON_SESSION);
    CHECK_EQ(r.acquired, 2); /* it re-contends at once and wins again (new fence) */
    simba_backend_event(p.be, SIMBA_EV_DISCONNECTED, "m", NULL, NULL);
    settle(&p, 1);
    CHECK_EQ(r.released, 2);
    CHECK_EQ(r.released_reason, SIMBA_REASON_CONNECTION);
    st = stats_of(s);
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_SESSION], 1);
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_CONNECTION], 1);
    CHECK_EQ(st.step_downs, 2);
    /* a disconnect for another mutex or a non-owner changes nothing */
    simba_backend_event(p.be, SIMBA_EV_DISCONNECTED, "other", NULL, NULL);
    settle(&p, 1);
    CHECK_EQ(r.released, 2);
    proc_close(&p);
    store_free();
}

/* ---- statistics ----------------------------------------------------------------------- */

TEST(stats_count_acquisitions_renewals_and_hold_time) {
    proc p;
    rec r = {0};
    simba_service *s;
    simba_stats st;
    int64_t t0;
    store_new();
    proc_open(&p);
    s = contender(&p, "m", "a", &r);
    st = stats_of(s);
    CHECK_EQ(st.version, SIMBA_STATS_VERSION);
    CHECK_EQ(st.size, sizeof st);
    CHECK_EQ(st.services, 1);
    CHECK_EQ(st.attempts, 0);
    CHECK_EQ(st.last_error, SIMBA_OK);
    t0 = fake_now;
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    REQUIRE(r.acquired == 1);
    advance(&p, 1, 10000, 5);
    st = stats_of(s);
    CHECK_EQ(st.acquisitions, 1);
    CHECK_EQ(st.owned, 1);
    CHECK_EQ(st.held_ms, fake_now - t0);
    CHECK_EQ(st.held_total_ms, fake_now - t0);
    CHECK(st.renewals >= 13); /* every ~667 ms for 10 s */
    CHECK_EQ(st.renewals, st.attempts - 1); /* all but the first attempt renewed */
    CHECK_EQ(st.renewals_failed, 0);
    CHECK_EQ(st.waits, 1);
    CHECK_EQ(st.wait_total_ms, 0); /* a free mutex is won in the poll that starts */
    CHECK_EQ(st.waiting_ms, 0);
    CHECK_EQ(st.releases, 0);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    settle(&p, 1);
    fake_now += 500;
    st = stats_of(s);
    CHECK_EQ(st.owned, 0);
    CHECK_EQ(st.held_ms, 0);
    CHECK_EQ(st.held_total_ms, 10000);
    CHECK_EQ(st.waiting_ms, 0); /* a stopped service waits for nothing */
    proc_close(&p);
    store_free();
}

TEST(stats_measure_the_wait_to_acquire) {
    proc p[2];
    rec ra = {0}, rb = {0};
    simba_service *a, *b;
    simba_stats st;
    int64_t b_start;
    store_new();
    proc_open(&p[0]);
    proc_open(&p[1]);
    a = contender(&p[0], "m", "a", &ra);
    b = contender(&p[1], "m", "b", &rb);
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 2);
    b_start = fake_now;
    CHECK_RC(simba_start(b), SIMBA_OK);
    settle(p, 2);
    advance(p, 2, 3000, 5);
    st = stats_of(b);
    CHECK_EQ(st.waits, 0);
    CHECK_EQ(st.waiting_ms, 3000);
    CHECK_RC(simba_stop(a), SIMBA_OK); /* the release is pushed to b, which wins at once */
    settle(p, 2);
    REQUIRE(rb.acquired == 1);
    st = stats_of(b);
    CHECK_EQ(st.waits, 1);
    CHECK_EQ(st.wait_total_ms, fake_now - b_start);
    CHECK_EQ(st.wait_max_ms, fake_now - b_start);
    CHECK_EQ(st.waiting_ms, 0);
    /* a restarts: it waits behind b, until b's lease lapses under a hang */
    CHECK_RC(simba_start(a), SIMBA_OK);
    settle(p, 2);
    CHECK_RC(simba_memory_fault_set(p[1].be, &(simba_memory_fault){.hang = 1}), SIMBA_OK);
    advance(p, 2, 4000, 5);
    REQUIRE(ra.acquired == 2);
    st = stats_of(a);
    CHECK_EQ(st.waits, 2);
    CHECK(st.wait_max_ms >= 1600); /* b's ttl + transition at least */
    CHECK_EQ(st.wait_total_ms, st.wait_max_ms); /* the first wait took no time */
    /* b stepped down and is waiting again, from its step-down on */
    st = stats_of(b);
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_LAPSED], 1);
    CHECK_EQ(st.waiting_ms, fake_now - rb.released_at);
    CHECK_RC(simba_memory_fault_set(p[1].be, &(simba_memory_fault){0}), SIMBA_OK);
    proc_close(&p[0]);
    proc_close(&p[1]);
    store_free();
}

TEST(loop_stats_total_every_service_freed_ones_included) {
    proc p;
    rec r1 = {0}, r2 = {0};
    simba_service *s1, *s2, *obs;
    simba_observe_desc od = {0};
    simba_stats st, s1st;
    store_new();
    proc_open(&p);
    s1 = contender(&p, "m1", "a", &r1);
    s2 = contender(&p, "m2", "a", &r2);
    od.mutex = "m1";
    CHECK_RC(simba_observe(p.loop, p.be, &od, &obs), SIMBA_OK);
    CHECK_RC(simba_start(s1), SIMBA_OK);
    CHECK_RC(simba_start(s2), SIMBA_OK);
    CHECK_RC(simba_start(obs), SIMBA_OK);
    advance(&p, 1, 2000, 5);
    st = loop_stats_of(p.loop);
    CHECK_EQ(st.services, 3);
    CHECK_EQ(st.owned, 2);
    CHECK_EQ(st.acquisitions, 2);
    CHECK_EQ(st.held_ms, 4000);
    s1st = stats_of(s1);
    CHECK_EQ(stats_of(obs).acquisitions, 0);
    CHECK(stats_of(obs).attempts >= 2); /* an observer's reads */
    CHECK_EQ(st.attempts, s1st.attempts + stats_of(s2).attempts + stats_of(obs).attempts);
    CHECK_EQ(st.renewals, s1st.renewals + stats_of(s2).renewals);
    CHECK_RC(simba_service_free(s1), SIMBA_OK); /* stops and releases: counted on the loop */
    settle(&p, 1);
    st = loop_stats_of(p.loop);
    CHECK_EQ(st.services, 2);
    CHECK_EQ(st.owned, 1);
    CHECK_EQ(st.acquisitions, 2);
    CHECK_EQ(st.releases, 1); /* counted though a freed service hears no callback */
    CHECK_EQ(st.releases_by_reason[SIMBA_REASON_STOPPED], 1);
    CHECK_EQ(st.held_total_ms, 4000);
    CHECK(st.attempts >= s1st.attempts);
    CHECK_EQ(st.held_ms, 2000);
    proc_close(&p);
    store_free();
}

/* in_flight: a request sent and not yet answered counts 1 until its answer is handled. */
TEST(stats_in_flight_until_answered) {
    proc p;
    rec r = {0};
    simba_service *s;
    simba_memory_fault f = {0};
    store_new();
    proc_open(&p);
    s = contender(&p, "m", "a", &r);
    f.delay_ms = 50;
    CHECK_RC(simba_memory_fault_set(p.be, &f), SIMBA_OK);
    CHECK_EQ(stats_of(s).in_flight, 0);
    CHECK_RC(simba_start(s), SIMBA_OK);
    advance(&p, 1, 10, 1);
    CHECK_EQ(stats_of(s).in_flight, 1);
    CHECK_EQ(loop_stats_of(p.loop).in_flight, 1);
    CHECK_EQ(r.acquired, 0);
    advance(&p, 1, 100, 5);
    CHECK_EQ(r.acquired, 1);
    CHECK_EQ(stats_of(s).in_flight, 0);
    CHECK_EQ(loop_stats_of(p.loop).in_flight, 0);
    proc_close(&p);
    store_free();
}

TEST(stats_size_protocol_and_arguments) {
    proc p;
    rec r = {0};
    simba_service *s;
    simba_stats st;
    unsigned char *raw = (unsigned char *)&st;
    size_t i, prefix = offsetof(simba_stats, acquisitions);
    store_new();
    proc_open(&p);
    s = contender(&p, "m", "a", &r);
    CHECK_RC(simba_start(s), SIMBA_OK);
    settle(&p, 1);
    /* an older caller's smaller struct: only its prefix is written */
    memset(&st, 0xAB, sizeof st);
    st.size = (uint32_t)prefix;
    CHECK_RC(simba_service_stats(s, &st), SIMBA_OK);
    CHECK_EQ(st.size, prefix);
    CHECK_EQ(st.version, SIMBA_STATS_VERSION);
    CHECK_EQ(st.services, 1);
    CHECK_EQ(st.owned, 1);
    for (i = prefix; i < sizeof st; i++) CHECK(raw[i] == 0xAB);
    /* a newer caller's bigger struct: filled up to what this build knows */
    memset(&st, 0, sizeof st);
    st.size = (uint32_t)sizeof st + 64;
    CHECK_RC(simba_service_stats(s, &st), SIMBA_OK);
    CHECK_EQ(st.size, sizeof st);
    st.size = (uint32_t)offsetof(simba_stats, owned) - 1;
    CHECK_RC(simba_service_stats(s, &st), SIMBA_EINVAL);
    st.size = 0;
    CHECK_RC(simba_loop_stats(p.loop, &st), SIMBA_EINVAL);
    st.size = sizeof st;
    CHECK_RC(simba_service_stats(NULL, &st), SIMBA_EINVAL);
    CHECK_RC(simba_service_stats(s, NULL), SIMBA_EINVAL);
    CHECK_RC(simba_loop_stats(NULL, &st), SIMBA_EINVAL);
    CHECK_RC(simba_loop_stats(p.loop, NULL), SIMBA_EINVAL);
    proc_close(&p);
    store_free();
}

/* Counting and reading statistics costs no allocation in steady state. */
TEST(steady_state_polling_and_stats_allocate_nothing) {
    proc p;
    simba_service *s[50];
    simba_stats st;
    int i, k;
    size_t before;
    store_new();
    proc_open(&p);
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
    for (k = 0; k < 10; k++) {
        advance(&p, 1, 1000, 10);
        for (i = 0; i < 50; i++) {
            st.size = sizeof st;
            CHECK_RC(simba_service_stats(s[i], &st), SIMBA_OK);
        }
        st.size = sizeof st;
        CHECK_RC(simba_loop_stats(p.loop, &st), SIMBA_OK);
    }
    CHECK_EQ(allocs, before);
    CHECK_EQ(st.owned, 50);
    CHECK(st.renewals > 1000);
    proc_close(&p);
    store_free();
}

int main(int argc, char **argv) {
    check__filter = argc > 1 ? argv[1] : NULL;
    RUN(reason_names);
    RUN(reason_stopped_and_no_reason_outside_release);
    RUN(reason_unlocked_for_a_locker);
    RUN(reason_lapsed_when_the_server_hangs);
    RUN(reason_lapsed_when_renewals_fail);
    RUN(reason_refused_when_the_server_names_another_owner);
    RUN(reason_refused_when_the_server_replaced_the_tenure);
    RUN(reason_session_and_connection_from_backend_events);
    RUN(stats_count_acquisitions_renewals_and_hold_time);
    RUN(stats_measure_the_wait_to_acquire);
    RUN(loop_stats_total_every_service_freed_ones_included);
    RUN(stats_size_protocol_and_arguments);
    RUN(stats_in_flight_until_answered);
    RUN(steady_state_polling_and_stats_allocate_nothing);
    return check_report("stats");
}
