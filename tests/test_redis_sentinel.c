/* test_redis_sentinel.c -- simba_redis.h behind Redis Sentinel.
 *
 * Starts its own primary ($SIMBA_SENTINEL_REDIS_PORT, default 6650), replica (+1) and three
 * sentinels ($SIMBA_SENTINEL_PORT.., default 26600) with scripts/redis-sentinel-start.sh under
 * build/redis-sentinel, kills the primary, and stops everything by PID at the end. A setup
 * that does not start fails the run. Run: build/test_redis_sentinel [filter]
 */
/* Not on tests/fixture.h: its one loop runs through simba_wait (the blocking driver this case exercises). */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"
#include "check.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static int rport = 6650, sport = 26600;
static char prefix[64], dir[256], sen[3][32];
static const char *sentinels[4];
static const char *scripts = "scripts";

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int raw_set(int port, const char *key, const char *val) {
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *x = c && !c->err ? (redisReply *)redisCommand(c, "SET %s %s", key, val) : NULL;
    int ok = x && x->type == REDIS_REPLY_STATUS;
    if (x) freeReplyObject(x);
    if (c) redisFree(c);
    return ok;
}

static simba_loop *new_loop(void) {
    simba_loop_desc ld;
    simba_loop *l = NULL;
    memset(&ld, 0, sizeof ld);
    return simba_loop_new(&ld, &l) == SIMBA_OK ? l : NULL;
}

static int wait_n; /* desc.wait_replicas of the next open_be */

static simba_result open_be(simba_loop *l, const char *master, simba_backend **be) {
    simba_redis_desc d;
    memset(&d, 0, sizeof d);
    d.wait_replicas = wait_n;
    d.sentinels = sentinels;
    d.master_name = master;
    d.prefix = prefix;
    d.max_lease_ms = 1500; /* every lease here: a failover quarantines one lease */
    d.connect_timeout_ms = 2000;
    d.command_timeout_ms = 1000;
    d.reconnect_max_ms = 500;
    return simba_redis_open(l, &d, be);
}

typedef struct ctr {
    int acquired, released;
    uint64_t fence;
} ctr;
static void c_acq(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    ((ctr *)u)->acquired++;
    ((ctr *)u)->fence = st->after->fence;
}
static void c_rel(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    (void)st;
    ((ctr *)u)->released++;
}

static int primary_port(simba_backend *be) { return ((simba__redis *)be->impl)->port; }

TEST(desc_checks) {
    simba_loop *l = new_loop();
    simba_backend *be = NULL;
    static const char *bad[] = {"localhost:26379", NULL};
    static const char *noport[] = {"127.0.0.1", NULL};
    simba_redis_desc d;
    REQUIRE(l);
    memset(&d, 0, sizeof d);
    d.sentinels = sentinels;
    CHECK_RC(simba_redis_open(l, &d, &be), SIMBA_EINVAL); /* no master_name */
    d.master_name = "simba";
    d.sentinels = bad;
    CHECK_RC(simba_redis_open(l, &d, &be), SIMBA_EINVAL); /* a name would resolve blocking */
    d.sentinels = noport;
    CHECK_RC(simba_redis_open(l, &d, &be), SIMBA_EINVAL);
    d.sentinels = sentinels;
    d.cluster = 1;
    CHECK_RC(simba_redis_open(l, &d, &be), SIMBA_EINVAL);
    d.cluster = 0;
    d.sentinels = NULL;
    CHECK_RC(simba_redis_open(l, &d, &be), SIMBA_EINVAL); /* master_name without sentinels */
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
}

/* A master name the sentinels do not monitor: a clear error, no connection to anything. */
TEST(unknown_master_name) {
    simba_loop *l = new_loop();
    simba_backend *be = NULL;
    simba_locker_desc d;
    simba_locker *lk = NULL;
    REQUIRE(l);
    REQUIRE(open_be(l, "nosuchmaster", &be) == SIMBA_OK);
    memset(&d, 0, sizeof d);
    d.mutex = "sen-unknown";
    d.ttl_ms = 1000;
    d.transition_ms = 500;
    REQUIRE(simba_locker_new(l, be, &d, &lk) == SIMBA_OK);
    CHECK(simba_locker_lock(lk, 1500) != SIMBA_OK);
    fprintf(stderr, "  backend: %s\n", simba_backend_errmsg(be));
    CHECK(strstr(simba_backend_errmsg(be), "does not name a primary") != NULL);
    simba_locker_free(lk);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
}

static long pid_of(int port) {
    char path[300];
    long pid = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/p%d/redis.pid", dir, port);
    f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%ld", &pid) != 1) pid = 0;
    fclose(f);
    return pid;
}

static simba_result lock_try(simba_loop *l, simba_backend *be, const char *name, int64_t timeout_ms, simba_locker **out) {
    simba_locker_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.mutex = name;
    d.ttl_ms = 1000;
    d.transition_ms = 500;
    if ((rc = simba_locker_new(l, be, &d, out)) != SIMBA_OK) return rc;
    return simba_locker_lock(*out, timeout_ms);
}

/* wait_replicas = 1: a grant counts once the replica has it; with the replica frozen it
   does not count (and says why), and once the replica is back it does. */
TEST(wait_replicas_counts_grants) {
    simba_loop *l = new_loop();
    simba_backend *be = NULL;
    simba_locker *a = NULL, *b = NULL;
    long rpid = pid_of(rport + 1);
    REQUIRE(l && rpid > 0);
    wait_n = 1;
    REQUIRE(open_be(l, "simba", &be) == SIMBA_OK);
    wait_n = 0;
    CHECK_RC(lock_try(l, be, "sen-wait-a", 5000, &a), SIMBA_OK);
    REQUIRE(kill((pid_t)rpid, SIGSTOP) == 0);
    CHECK(lock_try(l, be, "sen-wait-b", 1500, &b) != SIMBA_OK);
    fprintf(stderr, "  replica frozen: %s\n", simba_backend_errmsg(be));
    CHECK(strstr(simba_backend_errmsg(be), "acknowledged by 0 of 1 replicas") != NULL);
    CHECK(!simba_locker_is_owner(b));
    kill((pid_t)rpid, SIGCONT);
    CHECK_RC(simba_locker_lock(b, 8000), SIMBA_OK);
    CHECK(simba_locker_is_owner(a) && simba_locker_is_owner(b));
    simba_locker_free(a);
    simba_locker_free(b);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
}

/* The owner's primary is SIGKILLed: the sentinels promote the replica, +switch-master moves
   the backend there, the new primary's run_id quarantines one lease, and the mutex is owned
   again with a larger fence. */
TEST(failover_followed) {
    simba_loop *l = new_loop();
    simba_backend *be = NULL;
    simba_contend_desc d;
    simba_service *s = NULL;
    ctr c;
    char key[128], path[300], cmd[400];
    int64_t end, t_kill;
    uint64_t f1;
    FILE *f;
    long pid = 0;
    REQUIRE(l);
    (void)key;
    REQUIRE(open_be(l, "simba", &be) == SIMBA_OK);
    memset(&d, 0, sizeof d);
    memset(&c, 0, sizeof c);
    d.mutex = "sen-failover";
    d.ttl_ms = 1000;
    d.transition_ms = 500;
    d.on_acquired = c_acq;
    d.on_released = c_rel;
    d.user_data = &c;
    REQUIRE(simba_contend(l, be, &d, &s) == SIMBA_OK && simba_start(s) == SIMBA_OK);
    for (end = mono_ms() + 10000; mono_ms() < end && !simba_is_owner(s);) simba_wait(l, 50);
    REQUIRE(simba_is_owner(s));
    CHECK_EQ(primary_port(be), rport);
    f1 = simba_fence(s);
    snprintf(path, sizeof path, "%s/p%d/redis.pid", dir, rport);
    f = fopen(path, "r");
    REQUIRE(f && fscanf(f, "%ld", &pid) == 1 && pid > 0);
    fclose(f);
    CHECK(kill((pid_t)pid, SIGKILL) == 0);
    t_kill = mono_ms();
    /* down after 1 s, then the election: a few seconds on a loaded machine */
    for (end = mono_ms() + 40000; mono_ms() < end && !(c.acquired >= 2 && simba_is_owner(s));) simba_wait(l, 50);
    fprintf(stderr, "  owned again %lld ms after the kill, on port %d (released %d)\n",
            (long long)(mono_ms() - t_kill), primary_port(be), c.released);
    CHECK(c.acquired >= 2 && simba_is_owner(s));
    CHECK_EQ(primary_port(be), rport + 1);
    CHECK(c.released >= 1);
    CHECK(simba_fence(s) > f1);
    simba_stop(s);
    for (end = mono_ms() + 2000; mono_ms() < end;) simba_wait(l, 50);
    simba_service_free(s);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
    (void)cmd;
}

int main(int argc, char **argv) {
    const char *e = getenv("SIMBA_SENTINEL_REDIS_PORT");
    char cmd[600];
    int i, up;
    if (e && *e) rport = atoi(e);
    e = getenv("SIMBA_SENTINEL_PORT");
    if (e && *e) sport = atoi(e);
    e = getenv("SIMBA_SCRIPTS");
    if (e && *e) scripts = e;
    check__filter = argc > 1 ? argv[1] : NULL;
    snprintf(prefix, sizeof prefix, "tsen%d.%lld:", (int)getpid(), (long long)(mono_ms() % 1000000));
    for (i = 0; i < 3; i++) {
        snprintf(sen[i], sizeof sen[i], "127.0.0.1:%d", sport + i);
        sentinels[i] = sen[i];
    }
    sentinels[3] = NULL;
    snprintf(dir, sizeof dir, "build/redis-sentinel-%d", rport);
    snprintf(cmd, sizeof cmd, "SIMBA_SENTINEL_REDIS_PORT=%d SIMBA_SENTINEL_PORT=%d sh %s/redis-sentinel-start.sh %s",
             rport, sport, scripts, dir);
    up = system(cmd) == 0;
    if (!up) {
        fprintf(stderr, "test_redis_sentinel: the primary, replica and sentinels did not start\n");
        check__failed++;
    } else {
        char key[128];
        snprintf(key, sizeof key, "%salive", prefix);
        if (!raw_set(rport, key, "0")) /* a new prefix: no quarantine for its first grant */
            fprintf(stderr, "test_redis_sentinel: cannot declare the prefix\n");
        RUN(desc_checks);
        RUN(unknown_master_name);
        RUN(wait_replicas_counts_grants);
        RUN(failover_followed);
    }
    snprintf(cmd, sizeof cmd, "sh %s/redis-sentinel-stop.sh %s", scripts, dir);
    if (system(cmd) != 0) fprintf(stderr, "test_redis_sentinel: could not stop every server\n");
    return check_report("redis_sentinel");
}
