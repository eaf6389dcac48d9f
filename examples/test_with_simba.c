/* test_with_simba.c -- how to unit-test leader-gated code with simba: in one process, with
 * no server and no sleeps, in milliseconds. docs/testing.md walks through it; `make test`
 * builds and runs it.
 *
 * The pieces:
 *   - an injected clock (simba_loop_desc.now_ms) that the test moves by hand, and an
 *     injected random source (simba_loop_desc.random), so every run is the same;
 *   - SQLite's ":memory:" database, one per process, with test_clock = 1 so that leases are
 *     counted in that injected clock, exactly;
 *   - one loop and one backend per instance of the application, as separate processes would
 *     have, all on the one clock;
 *   - simba_sql_simulate_crash() for "this instance died without releasing";
 *   - a sleep hook (simba_loop_desc.sleep) that moves the injected clock where a blocking
 *     call would wait, so simba_locker_lock() runs in test time too.
 *
 * The application under test is tiny: each instance contends for "report-job" and, on every
 * tick while it leads, writes one record, with its fence, to a store that rejects a fence
 * older than one it has seen (as a database row with a version check would).
 */
#define SIMBA_IMPLEMENTATION
#include "simba_sql.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- the application under test --------------------------------------------------------- */

typedef struct store { /* the protected resource */
    uint64_t last_fence;
    int writes, stale_rejected;
    char last_writer[24]; /* as app.id */
} store;

typedef struct app {
    char id[24];
    simba_loop *loop;
    simba_backend *be;
    simba_service *svc;
    store *out;
    int jobs, acquired, released;
    int alive; /* the test stops ticking a crashed instance */
} app;

static void became_leader(simba_service *svc, const simba_state *st, void *u) {
    (void)svc;
    (void)st;
    ((app *)u)->acquired++;
}
static void lost_leadership(simba_service *svc, const simba_state *st, void *u) {
    (void)svc;
    (void)st;
    ((app *)u)->released++;
}

/* One tick of an instance: simba's poll, then the job, only while this instance leads. */
static void app_tick(app *a) {
    simba_poll(a->loop);
    if (!simba_is_owner(a->svc)) return;
    a->jobs++;
    if (simba_fence(a->svc) < a->out->last_fence) { /* a stale leader: the store says no */
        a->out->stale_rejected++;
        return;
    }
    a->out->last_fence = simba_fence(a->svc);
    a->out->writes++;
    memcpy(a->out->last_writer, a->id, sizeof a->out->last_writer);
}

/* ---- the test ----------------------------------------------------------------------------- */

static int64_t now_ms = 1000000; /* the injected clock, shared by every instance */
static int64_t test_clock(void *user) {
    (void)user;
    return now_ms;
}
static void test_sleep(void *user, int64_t ms) { /* a blocking call waits: time passes */
    (void)user;
    now_ms += ms;
}
static uint32_t seed = 12345; /* the injected random source: the same jitter in every run */
static uint32_t test_random(void *user) {
    (void)user;
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    return seed;
}

static int failures, checks;
#define EXPECT(cond)                                                                         \
    do {                                                                                     \
        checks++;                                                                            \
        if (!(cond)) {                                                                       \
            failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                  \
        }                                                                                    \
    } while (0)

enum { N = 3, TTL = 1000, TRANSITION = 500, JITTER_MAX = 100, MIN_RETRY = 50, TICK = 10 };

static app apps[N];
static store out;

static int leaders(void) {
    int i, n = 0;
    for (i = 0; i < N; i++) n += apps[i].alive && simba_is_owner(apps[i].svc);
    return n;
}
static app *leader(void) {
    int i;
    for (i = 0; i < N; i++)
        if (apps[i].alive && simba_is_owner(apps[i].svc)) return &apps[i];
    return NULL;
}

/* Ticks every live instance and moves the clock TICK ms, for ms milliseconds of test time
   or until stop() holds. Checks at every tick that there is never more than one leader. */
static int run(int64_t ms, int (*stop)(void)) {
    int64_t end = now_ms + ms;
    for (;;) {
        int i;
        for (i = 0; i < N; i++)
            if (apps[i].alive) app_tick(&apps[i]);
        EXPECT(leaders() <= 1);
        if (stop && stop()) return 1;
        if (now_ms >= end) return 0;
        now_ms += TICK;
    }
}
static int one_leader(void) { return leaders() == 1; }

static void start_app(app *a, int i) {
    simba_loop_desc ld;
    simba_sql_desc sd;
    simba_contend_desc cd;
    memset(a, 0, sizeof *a);
    snprintf(a->id, sizeof a->id, "instance-%d", i);
    a->out = &out;
    a->alive = 1;
    memset(&ld, 0, sizeof ld);
    ld.now_ms = test_clock;
    ld.random = test_random;
    memset(&sd, 0, sizeof sd);
    sd.path = ":memory:"; /* one database for the whole process */
    sd.test_clock = 1;    /* leases in the injected clock */
    memset(&cd, 0, sizeof cd);
    cd.mutex = "report-job";
    cd.contender_id = a->id;
    cd.ttl_ms = TTL;
    cd.transition_ms = TRANSITION;
    cd.jitter_min_ms = 0;
    cd.jitter_max_ms = JITTER_MAX;
    cd.min_retry_ms = MIN_RETRY;
    cd.on_acquired = became_leader;
    cd.on_released = lost_leadership;
    cd.user_data = a;
    EXPECT(simba_loop_new(&ld, &a->loop) == SIMBA_OK);
    EXPECT(simba_sql_open(a->loop, &sd, &a->be) == SIMBA_OK);
    EXPECT(simba_contend(a->loop, a->be, &cd, &a->svc) == SIMBA_OK);
    EXPECT(simba_start(a->svc) == SIMBA_OK);
}

int main(void) {
    struct timespec t0, t1;
    int64_t start = now_ms, crash_at, lease_end, stop_at;
    app *first, *second, *third;
    uint64_t fence1, fence2;
    simba_view row;
    int i, jobs_before;
    setvbuf(stdout, NULL, _IOLBF, 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < N; i++) start_app(&apps[i], i);

    /* 1. One leader among three, and only the leader's job runs. */
    EXPECT(run(1000, one_leader));
    first = leader();
    if (!first) return fprintf(stderr, "FAIL: no leader\n"), 1;
    fence1 = simba_fence(first->svc);
    run(3000, NULL); /* three seconds of renewals */
    EXPECT(leader() == first);
    EXPECT(simba_fence(first->svc) == fence1);
    EXPECT(first->acquired == 1 && first->released == 0);
    for (i = 0; i < N; i++)
        if (&apps[i] != first) EXPECT(apps[i].jobs == 0 && apps[i].acquired == 0);
    EXPECT(first->jobs >= 3000 / TICK && out.writes == first->jobs);
    printf("leader %s, fence %llu, ran its job %d times in 3 s; the others 0\n", first->id,
           (unsigned long long)fence1, first->jobs);

    /* 2. The leader crashes: no release. Another takes over exactly when the lease in the
          database ends (its last renewal + ttl + transition), within the jitter, and not
          one millisecond sooner. */
    EXPECT(simba_inspect_wait(apps[first == &apps[0] ? 1 : 0].be, "report-job", &row, 1000) == SIMBA_OK);
    crash_at = now_ms;
    lease_end = crash_at + row.transition_left_ms;
    EXPECT(simba_sql_simulate_crash(first->be) == SIMBA_OK);
    first->alive = 0; /* a dead process neither polls nor runs its job */
    jobs_before = out.writes;
    EXPECT(run(TTL + TRANSITION + JITTER_MAX + 2 * MIN_RETRY + TICK, one_leader));
    second = leader();
    if (!second) return fprintf(stderr, "FAIL: nobody took over\n"), 1;
    fence2 = simba_fence(second->svc);
    printf("%s crashed at +%lld ms; its lease ended at +%lld; %s leads from +%lld (fence %llu)\n", first->id,
           (long long)(crash_at - start), (long long)(lease_end - start), second->id, (long long)(now_ms - start),
           (unsigned long long)fence2);
    EXPECT(now_ms > lease_end);
    EXPECT(now_ms <= lease_end + JITTER_MAX + MIN_RETRY + TICK);
    EXPECT(fence2 > fence1);
    /* nobody wrote while the dead leader's lease lasted: the one new write is the new
       leader's, in the tick it took over */
    EXPECT(out.writes == jobs_before + 1 && strcmp(out.last_writer, second->id) == 0);
    run(500, NULL);
    EXPECT(out.writes > jobs_before && strcmp(out.last_writer, second->id) == 0);
    EXPECT(simba_loop_free(first->loop) == SIMBA_OK); /* the release never reaches the database */

    /* 3. A leader that stops hands over at once: the clock does not need to move. */
    EXPECT(simba_stop(second->svc) == SIMBA_OK);
    stop_at = now_ms;
    for (i = 0; i < 5 && leaders() != 1; i++) run(0, NULL); /* ticks only */
    third = leader();
    EXPECT(third != NULL && third != second && third != first);
    EXPECT(now_ms == stop_at);
    EXPECT(second->released == 1);
    if (third) {
        EXPECT(simba_fence(third->svc) > fence2);
        printf("%s stopped at +%lld ms; %s leads at +%lld ms (fence %llu)\n", second->id, (long long)(stop_at - start),
               third->id, (long long)(now_ms - start), (unsigned long long)simba_fence(third->svc));
    }
    EXPECT(out.stale_rejected == 0);

    /* 4. A blocking Locker in test time: its holder crashes, and simba_locker_lock(30 s) of
          another instance returns when the lease in the database ends, in milliseconds. */
    {
        simba_loop *hl, *wl;
        simba_backend *hb, *wb;
        simba_locker *holder, *waiter;
        simba_loop_desc ld;
        simba_sql_desc sd;
        simba_locker_desc kd;
        int64_t asked;
        memset(&ld, 0, sizeof ld);
        ld.now_ms = test_clock;
        ld.random = test_random;
        ld.sleep = test_sleep;
        memset(&sd, 0, sizeof sd);
        sd.path = ":memory:";
        sd.test_clock = 1;
        memset(&kd, 0, sizeof kd);
        kd.mutex = "nightly-export";
        kd.ttl_ms = TTL;
        kd.transition_ms = TRANSITION;
        EXPECT(simba_loop_new(&ld, &hl) == SIMBA_OK && simba_sql_open(hl, &sd, &hb) == SIMBA_OK);
        EXPECT(simba_loop_new(&ld, &wl) == SIMBA_OK && simba_sql_open(wl, &sd, &wb) == SIMBA_OK);
        EXPECT(simba_locker_new(hl, hb, &kd, &holder) == SIMBA_OK && simba_locker_new(wl, wb, &kd, &waiter) == SIMBA_OK);
        EXPECT(simba_locker_lock(holder, 0) == SIMBA_OK);
        EXPECT(simba_sql_simulate_crash(hb) == SIMBA_OK);
        asked = now_ms;
        EXPECT(simba_locker_lock(waiter, 30000) == SIMBA_OK);
        EXPECT(now_ms - asked >= TTL + TRANSITION && now_ms - asked < 30000);
        printf("a holder crashed: another's simba_locker_lock(30 s) returned after %lld ms of test time\n",
               (long long)(now_ms - asked));
        EXPECT(simba_locker_unlock_wait(waiter, 1000) == SIMBA_OK);
        EXPECT(simba_loop_free(wl) == SIMBA_OK);
        EXPECT(simba_loop_free(hl) == SIMBA_OK);
    }

    for (i = 0; i < N; i++)
        if (apps[i].alive) EXPECT(simba_loop_free(apps[i].loop) == SIMBA_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("test_with_simba: %lld ms of test time in %.1f ms of real time, no sleeps\n", (long long)(now_ms - start),
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    printf("%d of %d checks held\n", checks - failures, checks);
    printf("test_with_simba: %d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
    return failures ? 1 : 0;
}
