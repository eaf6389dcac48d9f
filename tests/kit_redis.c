/* kit_redis.c -- the shared backend kit (tests/kit.c) on Redis.
 *
 * Every open() is a new backend with its own connections (command + subscriber) to the
 * server on 127.0.0.1:$SIMBA_REDIS_PORT (default 6390), as separate processes would have.
 * Keys carry a per-run prefix so that leftovers of earlier runs never interfere. A server
 * that cannot be reached makes the cases fail (the check below fails loudly first).
 * The new prefix is declared as never used (its data-loss marker set to "since 0"), which
 * is true, so that its first acquisition does not wait a quarantine on any server.
 * SIMBA_REDIS_CLUSTER=1 runs the kit on a Redis Cluster seeded at 127.0.0.1:$SIMBA_CLUSTER_PORT
 * (default 6600, scripts/redis-cluster-start.sh): the kit's names spread over the primaries;
 * the data-loss marker is one per slot there, and the new prefix is declared on all 16384.
 * SIMBA_REDIS_SENTINELS="ip:port,ip:port,..." (and SIMBA_REDIS_MASTER, default "simba") runs
 * it behind Redis Sentinel (scripts/redis-sentinel-start.sh): every backend finds the primary
 * through the sentinels; the prefix is declared on the primary they name.
 */
#define SIMBA_IMPLEMENTATION
#define SIMBA_REDIS_TEST_FAULTS
#include "../simba_redis.h"
#include "kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct kit_redis_cfg {
    int port, cluster;
    char prefix[64];
    const char *sentinels[9]; /* Sentinel mode: NULL-terminated "ip:port" list, else empty */
    const char *master;
} kit_redis_cfg;

static simba_result open_redis(simba_loop *loop, void *ctx, simba_backend **out) {
    kit_redis_cfg *cfg = (kit_redis_cfg *)ctx;
    simba_redis_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.port = cfg->port;
    d.prefix = cfg->prefix;
    d.cluster = cfg->cluster;
    if (cfg->sentinels[0]) {
        d.sentinels = cfg->sentinels;
        d.master_name = cfg->master;
    }
    rc = simba_redis_open(loop, &d, out);
    if (rc != SIMBA_OK) fprintf(stderr, "kit_redis: open port %d: %s\n", cfg->port, simba_strerror(rc));
    return rc;
}

/* The store stops answering this backend: its command traffic is held, as a hung server
   holds it (each Cluster node's alike); the requests time out, nothing fails at once. */
static void mute_redis(simba_backend *be, int on) {
    void *impl;
    int i;
    if (!be) return; /* "the store as a whole": only a muted handle, freed with its process */
    impl = simba_backend_impl(be);
    if (simba_backend_vt_get(be) == &simba__redis_vt) {
        ((simba__redis *)impl)->test_mute = on;
        return;
    }
    for (i = 0; i < ((simba__rcluster *)impl)->nnodes; i++) ((simba__rcluster *)impl)->nodes[i]->test_mute = on;
}

/* Between cases: the server must still answer (a blocking check, test side only). */
static void between(void *ctx) {
    kit_redis_cfg *cfg = (kit_redis_cfg *)ctx;
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", cfg->port, tv);
    redisReply *x = NULL;
    if (c && !c->err) x = (redisReply *)redisCommand(c, "PING");
    if (!x || x->type != REDIS_REPLY_STATUS)
        fprintf(stderr, "kit_redis: server on port %d does not answer PING\n", cfg->port);
    if (x) freeReplyObject(x);
    if (c) redisFree(c);
}

/* >>fenced The kit's data: "<prefix>app{<name>}:<key>", a string in the mutex's slot, written
   with SET through simba_redis_fenced and read back with a plain GET. */
static void fw_key(const kit_redis_cfg *cfg, const char *name, const char *key, char *out, size_t cap) {
    snprintf(out, cap, "%sapp{%s}:%s", cfg->prefix, name, key);
}

typedef struct fw_wait {
    int done;
    simba_result rc;
    char err[512];
} fw_wait;

static void fw_done(simba_result rc, const simba_redis_value *reply, const char *errmsg, void *user) {
    fw_wait *w = (fw_wait *)user;
    w->done = 1;
    w->rc = rc;
    if (rc == SIMBA_OK && (!reply || reply->type != SIMBA_REDIS_STATUS || strcmp(reply->str, "OK") != 0)) {
        w->rc = SIMBA_EBACKEND; /* SET answers +OK: anything else is a wrong reply */
        snprintf(w->err, sizeof w->err, "SET answered type %d, not +OK", reply ? reply->type : -1);
    } else if (errmsg) {
        snprintf(w->err, sizeof w->err, "%s", errmsg);
    }
}

static simba_result fenced_write(simba_loop *loop, simba_backend *be, void *ctx, const char *name, uint64_t fence,
                                 const char *key, const char *value, char *err, size_t errcap) {
    char k[512];
    const char *argv[3];
    fw_wait w;
    simba_result rc;
    int i;
    fw_key((const kit_redis_cfg *)ctx, name, key, k, sizeof k);
    argv[0] = "SET";
    argv[1] = k;
    argv[2] = value;
    memset(&w, 0, sizeof w);
    rc = simba_redis_fenced(be, name, fence, 3, argv, fw_done, &w);
    if (rc != SIMBA_OK) {
        snprintf(err, errcap, "%s", simba_loop_errmsg(loop));
        return rc;
    }
    for (i = 0; i < 500 && !w.done; i++) simba_wait(loop, 20);
    if (!w.done) {
        snprintf(err, errcap, "simba_redis_fenced: not answered in 10 s");
        return SIMBA_ETIMEDOUT;
    }
    snprintf(err, errcap, "%s", w.err);
    return w.rc;
}

/* A blocking GET on the server that holds key: a Cluster's MOVED is followed. */
static int fenced_read(simba_loop *loop, simba_backend *be, void *ctx, const char *name, const char *key, char *out,
                       size_t cap, char *err, size_t errcap) {
    const kit_redis_cfg *cfg = (const kit_redis_cfg *)ctx;
    struct timeval tv = {1, 0};
    char k[512], host[64] = "127.0.0.1";
    int port = cfg->port, hop;
    (void)loop;
    (void)be;
    fw_key(cfg, name, key, k, sizeof k);
    for (hop = 0; hop < 3; hop++) {
        redisContext *c = redisConnectWithTimeout(host, port, tv);
        redisReply *x = c && !c->err ? (redisReply *)redisCommand(c, "GET %s", k) : NULL;
        int rc = -1;
        const char *colon;
        if (c) redisFree(c);
        if (x && x->type == REDIS_REPLY_ERROR && strncmp(x->str, "MOVED ", 6) == 0 && (colon = strrchr(x->str, ':')) &&
            strchr(x->str + 6, ' ')) {
            const char *h = strchr(x->str + 6, ' ') + 1;
            snprintf(host, sizeof host, "%.*s", (int)(colon - h), h);
            port = atoi(colon + 1);
            freeReplyObject(x);
            continue;
        }
        if (x && x->type == REDIS_REPLY_STRING) snprintf(out, cap, "%s", x->str), rc = 0;
        else if (x && x->type == REDIS_REPLY_NIL) out[0] = 0, rc = 0;
        else snprintf(err, errcap, "GET %s on %s:%d: %s", k, host, port, x && x->type == REDIS_REPLY_ERROR ? x->str : "no answer");
        if (x) freeReplyObject(x);
        return rc;
    }
    snprintf(err, errcap, "GET %s: too many redirections", k);
    return -1;
}

/* Cluster: "<prefix>{<tag>}:alive" = 0 for every slot, pipelined to the slot's primary. */
static int declare_cluster(const kit_redis_cfg *cfg) {
    static char tags[16384][SIMBA__RCL_TAG];
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", cfg->port, tv);
    redisReply *x = c && !c->err ? (redisReply *)redisCommand(c, "CLUSTER SLOTS") : NULL;
    size_t i;
    int s, done = 0;
    if (c) redisFree(c);
    if (!x || x->type != REDIS_REPLY_ARRAY) {
        if (x) freeReplyObject(x);
        return 0;
    }
    simba__rcl_tags_fill(tags);
    for (i = 0; i < x->elements; i++) {
        redisReply *e = x->element[i], *y;
        int a = (int)e->element[0]->integer, z = (int)e->element[1]->integer, ok = 1;
        c = redisConnectWithTimeout("127.0.0.1", (int)e->element[2]->element[1]->integer, tv);
        if (!c || c->err) {
            if (c) redisFree(c);
            break;
        }
        for (s = a; s <= z; s++) redisAppendCommand(c, "SET %s{%s}:alive 0", cfg->prefix, tags[s]);
        for (s = a; s <= z; s++) {
            if (redisGetReply(c, (void **)&y) != REDIS_OK || !y) { ok = 0; break; }
            if (y->type == REDIS_REPLY_STATUS) done++;
            freeReplyObject(y);
        }
        redisFree(c);
        if (!ok) break;
    }
    freeReplyObject(x);
    return done == 16384;
}

/* Sentinel: the primary's port as the sentinels name it now (test side, blocking); 0 if none. */
static int sentinel_primary(const kit_redis_cfg *cfg) {
    struct timeval tv = {1, 0};
    int i, port = 0;
    for (i = 0; cfg->sentinels[i] && !port; i++) {
        char host[64];
        const char *colon = strrchr(cfg->sentinels[i], ':');
        redisContext *c;
        redisReply *x;
        if (!colon || (size_t)(colon - cfg->sentinels[i]) >= sizeof host) continue;
        memcpy(host, cfg->sentinels[i], (size_t)(colon - cfg->sentinels[i]));
        host[colon - cfg->sentinels[i]] = 0;
        c = redisConnectWithTimeout(host, atoi(colon + 1), tv);
        x = c && !c->err ? (redisReply *)redisCommand(c, "SENTINEL get-master-addr-by-name %s", cfg->master) : NULL;
        if (x && x->type == REDIS_REPLY_ARRAY && x->elements == 2 && x->element[1]->type == REDIS_REPLY_STRING)
            port = atoi(x->element[1]->str);
        if (x) freeReplyObject(x);
        if (c) redisFree(c);
    }
    return port;
}

int main(int argc, char **argv) {
    static char senbuf[512];
    kit_redis_cfg cfg;
    kit_backend kb;
    struct timespec ts;
    const char *e = getenv("SIMBA_REDIS_PORT");
    memset(&cfg, 0, sizeof cfg);
    cfg.port = e && *e ? atoi(e) : 6390;
    e = getenv("SIMBA_REDIS_CLUSTER");
    cfg.cluster = e && strcmp(e, "1") == 0;
    if (cfg.cluster) {
        e = getenv("SIMBA_CLUSTER_PORT");
        cfg.port = e && *e ? atoi(e) : 6600;
    }
    e = getenv("SIMBA_REDIS_SENTINELS");
    if (e && *e) {
        char *tok, *save = NULL;
        int n = 0;
        snprintf(senbuf, sizeof senbuf, "%s", e);
        for (tok = strtok_r(senbuf, ",", &save); tok && n < 8; tok = strtok_r(NULL, ",", &save)) cfg.sentinels[n++] = tok;
        e = getenv("SIMBA_REDIS_MASTER");
        cfg.master = e && *e ? e : "simba";
        cfg.port = sentinel_primary(&cfg);
        if (!cfg.port) {
            fprintf(stderr, "kit_redis: the sentinels %s name no primary for %s\n", getenv("SIMBA_REDIS_SENTINELS"), cfg.master);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(cfg.prefix, sizeof cfg.prefix, "kit%d.%ld:", (int)getpid(), (long)(ts.tv_nsec / 1000));
    between(&cfg);
    if (cfg.cluster && !declare_cluster(&cfg)) fprintf(stderr, "kit_redis: cannot declare the prefix %s on every slot\n", cfg.prefix);
    if (!cfg.cluster) {
        struct timeval tv = {1, 0};
        redisContext *c = redisConnectWithTimeout("127.0.0.1", cfg.port, tv);
        redisReply *x = c && !c->err ? (redisReply *)redisCommand(c, "SET %salive 0", cfg.prefix) : NULL;
        if (!x || x->type != REDIS_REPLY_STATUS) fprintf(stderr, "kit_redis: cannot declare the prefix %s\n", cfg.prefix);
        if (x) freeReplyObject(x);
        if (c) redisFree(c);
    }
    memset(&kb, 0, sizeof kb);
    kb.name = cfg.cluster ? "redis-cluster" : cfg.sentinels[0] ? "redis-sentinel" : "redis";
    kb.open = open_redis;
    kb.ctx = &cfg;
    kb.ttl_ms = 2000;
    kb.transition_ms = 1000;
    kb.between = between;
    kb.mute = mute_redis;
    kb.fence_by_time = 1;
    kb.fenced_write = fenced_write;
    kb.fenced_read = fenced_read;
    return kit_run(&kb, argc, argv);
}
