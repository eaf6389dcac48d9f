/* test_scale.c -- 10,000 services on one loop (5,000 mutexes x 2 contenders, "a" and "b")
 * renew and hand over correctly with batching in place, on SQLite (a file in a
 * mkdtemp() directory) and on Redis (127.0.0.1:$SIMBA_SCALE_REDIS_PORT, default 6470; a
 * server that cannot be reached fails the case). Behaviour, not timings: every wait has a
 * deadline far above what the work needs.
 *
 *   all a's own -> b's queue behind them -> two renewal periods: nobody else is granted,
 *   every owner renewed -> half the a's stop: exactly their b's take over with a higher
 *   fence -> the other half still own, nobody ever saw two owners of one mutex.
 *
 *   test_scale [sql|redis]   (no argument: both)
 */
/* Not on tests/fixture.h: one loop of 10,000 services through simba_wait, recorded per pair of contenders. */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"
#include "../simba_redis.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define M 5000          /* mutexes */
#define TTL 3000        /* renewals every 1.5-2 s: a stall of a second still renews in time */
#define TRANSITION 1500

typedef struct pair {
    simba_service *svc[2]; /* a, b */
    int acquired[2], released[2];
    uint64_t fence[2];
    simba_reason why[2];
} pair;

static pair pairs[M];
static int overlaps;

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int side_of(pair *p, simba_service *s) { return p->svc[1] == s; }

/* Two owners of one mutex at once, as the process itself believes: must never happen. */
static void on_acquired(simba_service *s, const simba_state *st, void *u) {
    pair *p = (pair *)u;
    int k = side_of(p, s);
    p->acquired[k]++;
    p->fence[k] = st->after->fence;
    if (simba_is_owner(p->svc[!k])) overlaps++;
}
static void on_released(simba_service *s, const simba_state *st, void *u) {
    pair *p = (pair *)u;
    int k = side_of(p, s);
    p->released[k]++;
    p->why[k] = st->reason;
}

static int count_owners(int k, int from, int step) {
    int i, n = 0;
    for (i = from; i < M; i += step) n += simba_is_owner(pairs[i].svc[k]);
    return n;
}

/* Drives the loop as an application does until want services of side k own (every
   step-th from from), or the deadline; returns how many own. */
static int drive_until_owned(simba_loop *loop, int k, int from, int step, int want, int64_t deadline_ms) {
    int64_t end = mono_ms() + deadline_ms;
    int n = 0;
    while (mono_ms() < end) {
        if (simba_wait(loop, 50) != SIMBA_OK) break;
        if ((n = count_owners(k, from, step)) >= want) break;
    }
    return n;
}
static void drive_for(simba_loop *loop, int64_t ms) {
    int64_t end = mono_ms() + ms;
    while (mono_ms() < end)
        if (simba_wait(loop, end - mono_ms()) != SIMBA_OK) break;
}

/* Batching on Redis (a standalone backend): how often its command connection wrote (see
   simba__rconn.writes); 0 for any other backend. */
static int is_redis(simba_backend *be) { return simba_backend_vt_get(be) == &simba__redis_vt; }
static uint64_t redis_writes(simba_backend *be) {
    return is_redis(be) ? ((simba__redis *)simba_backend_impl(be))->cmd.writes : 0;
}

static void scale_case(const char *what, simba_loop *loop, simba_backend *be) {
    int i, k, n;
    simba_stats st;
    uint64_t renewals0, writes0;
    memset(pairs, 0, sizeof pairs);
    overlaps = 0;
    for (i = 0; i < M; i++)
        for (k = 0; k < 2; k++) {
            simba_contend_desc d;
            char name[32];
            memset(&d, 0, sizeof d);
            snprintf(name, sizeof name, "scale-%05d", i);
            d.mutex = name;
            d.contender_id = k ? "b" : "a";
            d.ttl_ms = TTL;
            d.transition_ms = TRANSITION;
            d.on_acquired = on_acquired;
            d.on_released = on_released;
            d.user_data = &pairs[i];
            REQUIRE(simba_contend(loop, be, &d, &pairs[i].svc[k]) == SIMBA_OK);
        }
    for (i = 0; i < M; i++) CHECK_RC(simba_start(pairs[i].svc[0]), SIMBA_OK);
    n = drive_until_owned(loop, 0, 0, 1, M, 60000);
    fprintf(stderr, "  %s: %d of %d a's own\n", what, n, M);
    REQUIRE(n == M);
    for (i = 0; i < M; i++) CHECK_RC(simba_start(pairs[i].svc[1]), SIMBA_OK);
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(simba_loop_stats(loop, &st), SIMBA_OK);
    renewals0 = st.renewals;
    writes0 = redis_writes(be);
    /* Two renewal periods with every b queued behind its a. */
    drive_for(loop, 2 * (TTL - TTL / 3) + 1500);
    CHECK_RC(simba_loop_stats(loop, &st), SIMBA_OK);
    fprintf(stderr, "  %s: %llu renewals in two periods, %llu failed, %llu step-downs\n", what,
            (unsigned long long)(st.renewals - renewals0), (unsigned long long)st.renewals_failed,
            (unsigned long long)st.step_downs);
    if (is_redis(be)) {
        /* Renewals due in one poll leave in one write, not one write each: the renewal grid
           puts hundreds in each poll, so far fewer writes than renewals. */
        uint64_t w = redis_writes(be) - writes0;
        fprintf(stderr, "  %s: those renewals went out in %llu writes\n", what, (unsigned long long)w);
        CHECK(w > 0);
        CHECK(w * 10 < st.renewals - renewals0);
    }
    CHECK(st.renewals - renewals0 >= (uint64_t)M * 2);
    CHECK_EQ(st.renewals_failed, 0);
    CHECK_EQ(st.step_downs, 0);
    CHECK_EQ(count_owners(0, 0, 1), M);
    for (i = 0; i < M; i++) {
        CHECK_EQ(pairs[i].acquired[0], 1);
        CHECK_EQ(pairs[i].released[0], 0);
        CHECK_EQ(pairs[i].acquired[1], 0);
    }
    /* Half the a's stop: their b's, queued at the head, take over (pushed, not timed). */
    for (i = 0; i < M; i += 2) CHECK_RC(simba_stop(pairs[i].svc[0]), SIMBA_OK);
    n = drive_until_owned(loop, 1, 0, 2, M / 2, 30000);
    fprintf(stderr, "  %s: %d of %d b's took over\n", what, n, M / 2);
    CHECK_EQ(n, M / 2);
    drive_for(loop, 500);
    for (i = 0; i < M; i++) {
        int handed = i % 2 == 0;
        CHECK_EQ(simba_is_owner(pairs[i].svc[0]), !handed);
        CHECK_EQ(simba_is_owner(pairs[i].svc[1]), handed);
        CHECK_EQ(pairs[i].released[0], handed);
        if (handed) {
            CHECK_EQ(pairs[i].why[0], SIMBA_REASON_STOPPED);
            CHECK_EQ(pairs[i].acquired[1], 1);
            CHECK(pairs[i].fence[1] > pairs[i].fence[0]);
        } else {
            CHECK_EQ(pairs[i].acquired[1], 0);
        }
    }
    CHECK_EQ(overlaps, 0);
}

static simba_loop *newloop(void) {
    simba_loop *loop = NULL;
    simba_loop_desc d;
    memset(&d, 0, sizeof d);
    return simba_loop_new(&d, &loop) == SIMBA_OK ? loop : NULL;
}

TEST(sql_file_ten_thousand_services_renew_and_hand_over) {
    char dir[] = "/tmp/simba_scale.XXXXXX", path[96];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_sql_desc d;
    REQUIRE(loop != NULL);
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/scale.db", dir);
    memset(&d, 0, sizeof d);
    d.path = path;
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    scale_case("sqlite", loop, be);
    fprintf(stderr, "  sqlite: %llu requests in %llu batched write transactions\n",
            (unsigned long long)((simba__sql *)simba_backend_impl(be))->batched,
            (unsigned long long)((simba__sql *)simba_backend_impl(be))->batches);
    CHECK(((simba__sql *)simba_backend_impl(be))->batches > 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    {
        char f[128];
        snprintf(f, sizeof f, "%s/scale.db", dir); unlink(f);
        snprintf(f, sizeof f, "%s/scale.db-wal", dir); unlink(f);
        snprintf(f, sizeof f, "%s/scale.db-shm", dir); unlink(f);
        rmdir(dir);
    }
}

TEST(redis_ten_thousand_services_renew_and_hand_over) {
    const char *e = getenv("SIMBA_SCALE_REDIS_PORT");
    int port = e && *e ? atoi(e) : 6470;
    char prefix[64];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_redis_desc d;
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *x;
    REQUIRE(loop != NULL);
    snprintf(prefix, sizeof prefix, "scale%d.%lld:", (int)getpid(), (long long)mono_ms());
    /* A prefix never used before holds no lease: declared so (no data-loss quarantine). */
    x = c && !c->err ? (redisReply *)redisCommand(c, "SET %salive 0", prefix) : NULL;
    if (!x) fprintf(stderr, "  redis-server on 127.0.0.1:%d cannot be reached\n", port);
    REQUIRE(x != NULL && x->type == REDIS_REPLY_STATUS);
    freeReplyObject(x);
    memset(&d, 0, sizeof d);
    d.port = port;
    d.prefix = prefix;
    REQUIRE(simba_redis_open(loop, &d, &be) == SIMBA_OK);
    scale_case("redis", loop, be);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    x = (redisReply *)redisCommand(c, "EVAL %s 0 %s", "local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1] .. '*')) do n = n + redis.call('DEL', k) end return n", prefix);
    if (x) freeReplyObject(x);
    redisFree(c);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || strcmp(only, "sql") == 0) RUN(sql_file_ten_thousand_services_renew_and_hand_over);
    if (!only || strcmp(only, "redis") == 0) RUN(redis_ten_thousand_services_renew_and_hand_over);
    return check_report("scale");
}
