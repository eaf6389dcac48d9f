/* test_redis_cluster.c -- simba_redis.h on a real Redis Cluster.
 *
 * Needs the loopback cluster of scripts/redis-cluster-start.sh on $SIMBA_CLUSTER_PORT..+5
 * (default 6600; 3 primaries, 3 replicas). Starts and stops by itself one standalone
 * redis-server on $SIMBA_CLUSTER_PLAIN_PORT (default 6606) for the configuration-error
 * cases. A cluster that cannot be reached fails the run. Run: build/test_redis_cluster [filter]
 */
/* Not on tests/fixture.h: its one or two loops run through simba_wait (the blocking driver these cases exercise). */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"
#include "check.h"

#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

static int seed_port = 6600, plain_port = 6606;
static char prefix[64];
static int slot_port[16384]; /* the primary serving each slot (test side's own view) */
static char plain_dir[256];

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- blocking inspection, test side only -------------------------------------------------- */

static redisContext *raw_connect(int port) {
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && c->err) {
        fprintf(stderr, "  raw connect to %d: %s\n", port, c->errstr);
        redisFree(c);
        return NULL;
    }
    if (c) redisSetTimeout(c, tv);
    return c;
}

/* Runs a command; returns the reply (caller frees) or NULL. */
static redisReply *raw(int port, const char *fmt, ...) {
    redisContext *c = raw_connect(port);
    redisReply *x = NULL;
    va_list ap;
    if (!c) return NULL;
    va_start(ap, fmt);
    x = (redisReply *)redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return x;
}

static int raw_ok(int port, const char *what, redisReply *x) {
    int ok = x && x->type != REDIS_REPLY_ERROR;
    if (!ok) fprintf(stderr, "  raw %d %s: %s\n", port, what, x ? x->str : "no reply");
    if (x) freeReplyObject(x);
    return ok;
}

/* Reads the slot map from the seed (CLUSTER SLOTS). 1 when all 16384 slots are served. */
static int read_map(void) {
    redisReply *x = raw(seed_port, "CLUSTER SLOTS");
    size_t i;
    int s, n = 0;
    for (s = 0; s < 16384; s++) slot_port[s] = 0;
    if (!x || x->type != REDIS_REPLY_ARRAY) {
        if (x) freeReplyObject(x);
        return 0;
    }
    for (i = 0; i < x->elements; i++) {
        redisReply *e = x->element[i];
        for (s = (int)e->element[0]->integer; s <= (int)e->element[1]->integer; s++) {
            slot_port[s] = (int)e->element[2]->element[1]->integer;
            n++;
        }
    }
    freeReplyObject(x);
    return n == 16384;
}

/* The primary ports, in the order first seen over the slots. */
static int primaries(int out[3]) {
    int s, k = 0, j;
    for (s = 0; s < 16384; s++) {
        for (j = 0; j < k && out[j] != slot_port[s]; j++) {
        }
        if (j == k && k < 3 && slot_port[s]) out[k++] = slot_port[s];
    }
    return k;
}

static int name_slot(const char *name) { return (int)(simba__rcl_crc16(name, strlen(name)) & 16383); }

/* The server's own idea of the slot must match ours (CLUSTER KEYSLOT of a real key). */
static int server_slot(const char *name) {
    redisReply *x = raw(seed_port, "CLUSTER KEYSLOT %s{%s}:owner", prefix, name);
    int s = x && x->type == REDIS_REPLY_INTEGER ? (int)x->integer : -1;
    if (x) freeReplyObject(x);
    return s;
}

static char tags[16384][SIMBA__RCL_TAG];

/* A name new to the store: its slot's data-loss marker for this prefix says "never used"
   (true), so the first grant does not wait a quarantine. */
static int declare(const char *name) {
    int s = name_slot(name), p = slot_port[s];
    return raw_ok(p, "SET marker", raw(p, "SET %s{%s}:alive 0", prefix, tags[s]));
}

/* Without a declaration the first grant of a slot waits one quarantine (ttl + transition):
   the marker is per slot, not per name, so a second name of the same slot does not. */
static int tag_slot_ok(void) {
    int s;
    for (s = 0; s < 16384; s++)
        if (!tags[s][0] || name_slot(tags[s]) != s) return 0;
    return 1;
}

/* Names of the form <tag><i>, `per` on each primary. */
static int pick_names(const char *tag, int per, char names[][32], int prim[3]) {
    int count[3] = {0, 0, 0}, n = 0, i, j;
    for (i = 0; i < 100000 && n < 3 * per; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%s%d", tag, i);
        for (j = 0; j < 3; j++)
            if (slot_port[name_slot(nm)] == prim[j] && count[j] < per) {
                count[j]++;
                memcpy(names[n++], nm, sizeof nm);
            }
    }
    return n;
}

/* ---- the loop side ------------------------------------------------------------------------ */

static int error_logs;
static char last_error[512];
static void log_hook(void *u, simba_log_level lv, const char *msg) {
    (void)u;
    if (lv >= SIMBA_LOG_ERROR) {
        error_logs++;
        snprintf(last_error, sizeof last_error, "%s", msg);
    }
}

static simba_loop *new_loop(void) {
    simba_loop_desc ld;
    simba_loop *l = NULL;
    memset(&ld, 0, sizeof ld);
    ld.log = log_hook;
    ld.log_level = SIMBA_LOG_WARN;
    if (simba_loop_new(&ld, &l) != SIMBA_OK) return NULL;
    return l;
}

static simba_backend *open_be(simba_loop *l, int port, int cluster) {
    simba_redis_desc d;
    simba_backend *be = NULL;
    memset(&d, 0, sizeof d);
    d.port = port;
    d.prefix = prefix;
    d.max_lease_ms = 6000; /* the longest lease here (4 s + 2 s), the same in every process */
    d.cluster = cluster;
    d.connect_timeout_ms = 3000;
    d.command_timeout_ms = 3000;
    if (simba_redis_open(l, &d, &be) != SIMBA_OK) return NULL;
    return be;
}

typedef struct ctr {
    int acquired, released, saw_owner;
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
static void c_own(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    if (st->after && st->after->id[0]) ((ctr *)u)->saw_owner++;
}

static simba_service *contend(simba_loop *l, simba_backend *be, const char *name, int64_t ttl, int64_t tr, ctr *c) {
    simba_contend_desc d;
    simba_service *s = NULL;
    memset(&d, 0, sizeof d);
    d.mutex = name;
    d.ttl_ms = ttl;
    d.transition_ms = tr;
    d.on_acquired = c_acq;
    d.on_released = c_rel;
    d.on_owner = c_own;
    d.user_data = c;
    if (simba_contend(l, be, &d, &s) != SIMBA_OK || simba_start(s) != SIMBA_OK) return NULL;
    return s;
}

/* Drives both loops until cond() holds or the deadline passes; 1 when it held. */
static int drive(simba_loop *a, simba_loop *b, int (*cond)(void *), void *u, int64_t ms) {
    int64_t end = mono_ms() + ms;
    while (mono_ms() < end) {
        if (cond(u)) return 1;
        if (a) simba_wait(a, b ? 5 : 20);
        if (b) simba_wait(b, a ? 5 : 20);
    }
    return cond(u);
}

#define NN 9
typedef struct world {
    ctr a[NN], b[NN];
    simba_service *sa[NN], *sb[NN];
    int n;
} world;
static int all_a_own(void *u) {
    world *w = (world *)u;
    int i;
    for (i = 0; i < w->n; i++)
        if (!simba_is_owner(w->sa[i])) return 0;
    return 1;
}
static int all_b_own(void *u) {
    world *w = (world *)u;
    int i;
    for (i = 0; i < w->n; i++)
        if (!simba_is_owner(w->sb[i])) return 0;
    return 1;
}
static int all_b_saw(void *u) {
    world *w = (world *)u;
    int i;
    for (i = 0; i < w->n; i++)
        if (!w->b[i].saw_owner) return 0;
    return 1;
}
/* hiredis 0.14 keeps no callback record for the sharded (un)subscribes: the subscriber
   connections of every node have none after a run of them. */
static int invalid_records(simba_backend *be) {
    simba__rcluster *rc = (simba__rcluster *)be->impl;
    int i, n = 0;
    for (i = 0; i < rc->nnodes; i++) {
        redisAsyncContext *ac = rc->nodes[i]->sub.ac;
        redisCallback *cb;
        if (ac)
            for (cb = ac->sub.invalid.head; cb; cb = cb->next) n++;
    }
    return n;
}

static int never(void *u) {
    (void)u;
    return 0;
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* Our CRC16 slot is the server's, and the one-slot layout holds for every key of a name. */
TEST(slot_of_name_matches_server) {
    const char *names[] = {"a", "orders-leader", "job-42", "x.y_z", "123456789"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof *names; i++) CHECK_EQ(name_slot(names[i]), server_slot(names[i]));
    CHECK_EQ(simba__rcl_crc16("123456789", 9), 0x31C3); /* the CRC16/XMODEM check value */
    CHECK(tag_slot_ok());
}

/* Names on all three primaries are owned through one seed; a release hands each to the
   waiting process by a sharded push, long before its timer (ttl + transition = 15 s). */
TEST(spread_owned_and_handed_over_with_push) {
    static world w;
    int prim[3], i, per_port[3] = {0, 0, 0};
    char names[NN][32];
    simba_loop *la = new_loop(), *lb = new_loop();
    simba_backend *ba, *bb;
    int64_t t0, took;
    REQUIRE(la && lb);
    REQUIRE(read_map() && primaries(prim) == 3);
    memset(&w, 0, sizeof w);
    w.n = pick_names("spread", 3, names, prim);
    REQUIRE(w.n == NN);
    for (i = 0; i < NN; i++) {
        int j;
        REQUIRE(declare(names[i]));
        for (j = 0; j < 3; j++) per_port[j] += slot_port[name_slot(names[i])] == prim[j];
    }
    CHECK(per_port[0] == 3 && per_port[1] == 3 && per_port[2] == 3);
    ba = open_be(la, seed_port, 1);
    bb = open_be(lb, seed_port + 1, 1); /* another seed: a primary or a replica, either works */
    REQUIRE(ba && bb);
    for (i = 0; i < NN; i++) REQUIRE((w.sa[i] = contend(la, ba, names[i], 4000, 2000, &w.a[i])) != NULL);
    CHECK(drive(la, lb, all_a_own, &w, 15000));
    for (i = 0; i < NN; i++) REQUIRE((w.sb[i] = contend(lb, bb, names[i], 4000, 2000, &w.b[i])) != NULL);
    /* B has asked once (it saw A as the owner): it is queued on every mutex. */
    CHECK(drive(la, lb, all_b_saw, &w, 15000));
    t0 = mono_ms();
    for (i = 0; i < NN; i++) CHECK_RC(simba_stop(w.sa[i]), SIMBA_OK);
    CHECK(drive(la, lb, all_b_own, &w, 12000));
    took = mono_ms() - t0;
    fprintf(stderr, "  handoff of %d names on 3 primaries: %lld ms\n", NN, (long long)took);
    CHECK(took < 3000); /* the timer would be >= 4 s away: this was the push */
    for (i = 0; i < NN; i++) {
        CHECK_EQ(w.a[i].acquired, 1);
        CHECK_EQ(w.a[i].released, 1);
        CHECK_EQ(w.b[i].acquired, 1);
        CHECK(w.b[i].fence > w.a[i].fence);
    }
    for (i = 0; i < NN; i++) {
        simba_stop(w.sb[i]);
    }
    drive(la, lb, never, NULL, 300);
    CHECK_EQ(invalid_records(ba), 0);
    CHECK_EQ(invalid_records(bb), 0);
    for (i = 0; i < NN; i++) {
        simba_service_free(w.sa[i]);
        simba_service_free(w.sb[i]);
    }
    CHECK_RC(simba_backend_free(ba), SIMBA_OK);
    CHECK_RC(simba_backend_free(bb), SIMBA_OK);
    CHECK_RC(simba_loop_free(la), SIMBA_OK);
    CHECK_RC(simba_loop_free(lb), SIMBA_OK);
}

static int node_id(int port, char *out, size_t cap) {
    redisReply *x = raw(port, "CLUSTER MYID");
    int ok = x && x->type == REDIS_REPLY_STRING;
    if (ok) snprintf(out, cap, "%s", x->str);
    if (x) freeReplyObject(x);
    return ok;
}

/* Moves one slot from port `from` to port `to` as redis-cli --cluster reshard does. */
static int move_slot(int slot, int from, int to, const int prim[3]) {
    char idf[64], idt[64];
    int i, moved = 0;
    if (!node_id(from, idf, sizeof idf) || !node_id(to, idt, sizeof idt)) return 0;
    if (!raw_ok(to, "IMPORTING", raw(to, "CLUSTER SETSLOT %d IMPORTING %s", slot, idf))) return 0;
    if (!raw_ok(from, "MIGRATING", raw(from, "CLUSTER SETSLOT %d MIGRATING %s", slot, idt))) return 0;
    for (;;) {
        redisReply *k = raw(from, "CLUSTER GETKEYSINSLOT %d 100", slot);
        size_t j;
        if (!k || k->type != REDIS_REPLY_ARRAY) {
            if (k) freeReplyObject(k);
            return 0;
        }
        if (k->elements == 0) {
            freeReplyObject(k);
            break;
        }
        for (j = 0; j < k->elements; j++) {
            if (!raw_ok(from, "MIGRATE", raw(from, "MIGRATE 127.0.0.1 %d %s 0 5000", to, k->element[j]->str))) {
                freeReplyObject(k);
                return 0;
            }
            moved++;
        }
        freeReplyObject(k);
    }
    for (i = 0; i < 3; i++)
        if (!raw_ok(prim[i], "SETSLOT NODE", raw(prim[i], "CLUSTER SETSLOT %d NODE %s", slot, idt))) return 0;
    fprintf(stderr, "  slot %d: %d keys moved %d -> %d\n", slot, moved, from, to);
    return 1;
}

typedef struct one {
    simba_service *s;
    ctr c;
} one;
static int one_owns(void *u) { return simba_is_owner(((one *)u)->s); }

/* The owner's renewals follow the slot to its new primary (MOVED): it stays owner, with the
   same fence, across more than one ttl; the next owner gets it there with a higher fence. */
TEST(moved_after_slot_migration) {
    int prim[3], slot, from, to, i;
    char names[3][32];
    one a, b;
    simba_loop *la = new_loop(), *lb = new_loop();
    simba_backend *ba, *bb;
    uint64_t fa;
    REQUIRE(la && lb);
    REQUIRE(read_map() && primaries(prim) == 3);
    REQUIRE(pick_names("moved", 1, names, prim) == 3);
    slot = name_slot(names[0]);
    from = slot_port[slot];
    to = from == prim[0] ? prim[1] : prim[0];
    REQUIRE(declare(names[0]));
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    ba = open_be(la, seed_port, 1);
    bb = open_be(lb, seed_port, 1);
    REQUIRE(ba && bb);
    REQUIRE((a.s = contend(la, ba, names[0], 1000, 500, &a.c)) != NULL);
    REQUIRE(drive(la, lb, one_owns, &a, 10000));
    fa = simba_fence(a.s);
    REQUIRE(move_slot(slot, from, to, prim));
    /* Three ttls: every renewal now meets MOVED on the old primary and follows it. */
    drive(la, lb, never, NULL, 3000);
    CHECK(simba_is_owner(a.s));
    CHECK_EQ(a.c.released, 0);
    CHECK(simba_fence(a.s) == fa);
    {
        redisReply *x = raw(to, "GET %s{%s}:owner", prefix, names[0]);
        CHECK(x && x->type == REDIS_REPLY_STRING && strstr(x->str, simba_service_contender_id(a.s)));
        if (x) freeReplyObject(x);
    }
    REQUIRE((b.s = contend(lb, bb, names[0], 1000, 500, &b.c)) != NULL);
    drive(la, lb, never, NULL, 300);
    CHECK_RC(simba_stop(a.s), SIMBA_OK);
    /* the migrated marker names the source's run_id: B's grant waits one quarantine (6 s) */
    CHECK(drive(la, lb, one_owns, &b, 10000));
    CHECK(simba_fence(b.s) > fa);
    CHECK_EQ(a.c.acquired, 1);
    simba_stop(b.s);
    drive(la, lb, never, NULL, 200);
    simba_service_free(a.s);
    simba_service_free(b.s);
    CHECK_RC(simba_backend_free(ba), SIMBA_OK);
    CHECK_RC(simba_backend_free(bb), SIMBA_OK);
    CHECK_RC(simba_loop_free(la), SIMBA_OK);
    CHECK_RC(simba_loop_free(lb), SIMBA_OK);
    /* put the slot back, so a second run sees the layout redis-cli made */
    for (i = 0; i < 3 && read_map(); i++) {
    }
    CHECK(move_slot(slot, to, from, prim));
}

/* >>fenced A fenced write goes to its slot's primary, and follows the slot when it moves
   (MOVED) as requests do. */
typedef struct fw_ans {
    int done;
    simba_result rc;
    char err[320];
} fw_ans;
static void fw_cb(simba_result rc, const simba_redis_value *v, const char *errmsg, void *user) {
    fw_ans *w = (fw_ans *)user;
    (void)v;
    w->done = 1;
    w->rc = rc;
    snprintf(w->err, sizeof w->err, "%s", errmsg ? errmsg : "");
}
static int fw_done(void *u) { return ((fw_ans *)u)->done; }
static simba_result fw_set(simba_loop *l, simba_backend *be, const char *name, uint64_t fence, const char *key,
                           const char *value) {
    fw_ans w;
    const char *argv[3];
    argv[0] = "SET";
    argv[1] = key;
    argv[2] = value;
    memset(&w, 0, sizeof w);
    if (simba_redis_fenced(be, name, fence, 3, argv, fw_cb, &w) != SIMBA_OK) return SIMBA_EINVAL;
    if (!drive(l, NULL, fw_done, &w, 5000)) return SIMBA_ETIMEDOUT;
    if (w.rc != SIMBA_OK) fprintf(stderr, "  fenced SET %s: %s\n", key, w.err);
    return w.rc;
}
static int raw_is(int port, const char *key, const char *want) {
    redisReply *x = raw(port, "GET %s", key);
    int ok = x && x->type == REDIS_REPLY_STRING && strcmp(x->str, want) == 0;
    if (x) freeReplyObject(x);
    return ok;
}

TEST(fenced_write_follows_its_slot) {
    int prim[3], slot, from, to;
    char names[3][32], key[96];
    one a;
    simba_loop *la = new_loop();
    simba_backend *ba;
    uint64_t fa;
    REQUIRE(la);
    REQUIRE(read_map() && primaries(prim) == 3);
    REQUIRE(pick_names("fenced", 1, names, prim) == 3);
    slot = name_slot(names[1]);
    from = slot_port[slot];
    to = from == prim[0] ? prim[1] : prim[0];
    REQUIRE(declare(names[1]));
    snprintf(key, sizeof key, "app:{%s}:k", names[1]);
    memset(&a, 0, sizeof a);
    ba = open_be(la, seed_port, 1);
    REQUIRE(ba);
    REQUIRE((a.s = contend(la, ba, names[1], 4000, 2000, &a.c)) != NULL);
    REQUIRE(drive(la, NULL, one_owns, &a, 10000));
    fa = simba_fence(a.s);
    CHECK_RC(fw_set(la, ba, names[1], fa, key, "1"), SIMBA_OK);
    CHECK(raw_is(from, key, "1"));
    CHECK_RC(fw_set(la, ba, names[1], fa + 1, key, "future"), SIMBA_EFENCE);
    REQUIRE(move_slot(slot, from, to, prim));
    /* at once, before any renewal learns of it: the write meets MOVED and follows it */
    CHECK_RC(fw_set(la, ba, names[1], fa, key, "2"), SIMBA_OK);
    CHECK(raw_is(to, key, "2"));
    CHECK(simba_is_owner(a.s));
    simba_stop(a.s);
    drive(la, NULL, never, NULL, 200);
    simba_service_free(a.s);
    CHECK_RC(simba_backend_free(ba), SIMBA_OK);
    CHECK_RC(simba_loop_free(la), SIMBA_OK);
    CHECK(read_map());
    CHECK(move_slot(slot, to, from, prim));
}

/* One blocking lock attempt with a short ttl (a locker waits up to one ttl for an answer). */
static simba_result lock_once(simba_loop *l, simba_backend *be, const char *name, int64_t timeout_ms) {
    simba_locker_desc d;
    simba_locker *lk = NULL;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.mutex = name;
    d.ttl_ms = 1000;
    d.transition_ms = 500;
    if ((rc = simba_locker_new(l, be, &d, &lk)) != SIMBA_OK) return rc;
    rc = simba_locker_lock(lk, timeout_ms);
    if (rc != SIMBA_ECLOSED) simba_locker_free(lk);
    return rc;
}

/* A cluster desc on a standalone server: a clear error, every time, logged. */
TEST(cluster_desc_on_plain_server_is_an_error) {
    simba_loop *l = new_loop();
    simba_backend *be;
    simba_result rc;
    int before = error_logs;
    REQUIRE(l);
    REQUIRE((be = open_be(l, plain_port, 1)) != NULL);
    rc = lock_once(l, be, "plain-x", 1500);
    CHECK(rc != SIMBA_OK);
    fprintf(stderr, "  lock: %s; backend: %s\n", simba_strerror(rc), simba_backend_errmsg(be));
    CHECK(strstr(simba_backend_errmsg(be), "not a Redis Cluster node") != NULL);
    CHECK(error_logs > before && strstr(last_error, "simba_redis_desc.cluster"));
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
}

/* A standalone desc on a cluster node: MOVED is a configuration error (logged once), not
   a retry loop that pretends all is well. */
TEST(plain_desc_on_cluster_says_moved) {
    int prim[3], i;
    char names[3][32];
    simba_loop *l = new_loop();
    simba_backend *be;
    simba_result rc;
    int before = error_logs;
    REQUIRE(l);
    REQUIRE(read_map() && primaries(prim) == 3);
    REQUIRE(pick_names("plainmv", 1, names, prim) == 3);
    for (i = 0; i < 3 && slot_port[name_slot(names[i])] == prim[0]; i++) {
    }
    REQUIRE(i < 3);
    REQUIRE((be = open_be(l, prim[0], 0)) != NULL);
    rc = lock_once(l, be, names[i], 1500);
    CHECK(rc != SIMBA_OK);
    fprintf(stderr, "  lock: %s; backend: %s\n", simba_strerror(rc), simba_backend_errmsg(be));
    CHECK(strstr(simba_backend_errmsg(be), "simba_redis_desc.cluster = 1") != NULL);
    CHECK_EQ(error_logs - before, 1);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
}

int main(int argc, char **argv) {
    const char *e = getenv("SIMBA_CLUSTER_PORT");
    const char *scripts = getenv("SIMBA_SCRIPTS");
    char cmd[600];
    int plain_up;
    if (e && *e) seed_port = atoi(e);
    e = getenv("SIMBA_CLUSTER_PLAIN_PORT");
    plain_port = e && *e ? atoi(e) : seed_port + 6;
    if (!scripts || !*scripts) scripts = "scripts";
    check__filter = argc > 1 ? argv[1] : NULL;
    snprintf(prefix, sizeof prefix, "tcl%d.%lld:", (int)getpid(), (long long)(mono_ms() % 1000000));
    simba__rcl_tags_fill(tags);
    if (!read_map()) {
        fprintf(stderr, "test_redis_cluster: no complete Redis Cluster answers on 127.0.0.1:%d "
                        "(scripts/redis-cluster-start.sh)\n", seed_port);
        check__failed++;
        return check_report("redis_cluster");
    }
    snprintf(plain_dir, sizeof plain_dir, "build/redis-cluster-plain-%d", plain_port);
    snprintf(cmd, sizeof cmd, "sh %s/redis-start.sh %d %s >/dev/null", scripts, plain_port, plain_dir);
    plain_up = system(cmd) == 0;
    RUN(slot_of_name_matches_server);
    RUN(spread_owned_and_handed_over_with_push);
    RUN(moved_after_slot_migration);
    RUN(fenced_write_follows_its_slot);
    if (plain_up) {
        RUN(cluster_desc_on_plain_server_is_an_error);
    } else {
        fprintf(stderr, "test_redis_cluster: could not start redis-server on port %d\n", plain_port);
        check__failed++;
    }
    RUN(plain_desc_on_cluster_says_moved);
    if (plain_up) {
        snprintf(cmd, sizeof cmd, "sh %s/redis-stop.sh %s >/dev/null", scripts, plain_dir);
        if (system(cmd) != 0) fprintf(stderr, "test_redis_cluster: could not stop the server on %d\n", plain_port);
    }
    return check_report("redis_cluster");
}
