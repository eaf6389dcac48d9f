/* kit_redis.c -- the shared backend kit (tests/kit.c) on Redis.
 *
 * Every open() is a new backend with its own connections (command + subscriber) to the
 * server on 127.0.0.1:$SIMBA_REDIS_PORT (default 6390), as separate processes would have.
 * Keys carry a per-run prefix so that leftovers of earlier runs never interfere. A server
 * that cannot be reached makes the cases fail (the check below fails loudly first).
 * The new prefix is declared as never used (its data-loss marker set to "since 0"), which
 * is true, so that its first acquisition does not wait a quarantine on any server.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"
#include "kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct kit_redis_cfg {
    int port;
    char prefix[64];
} kit_redis_cfg;

static simba_result open_redis(simba_loop *loop, void *ctx, simba_backend **out) {
    kit_redis_cfg *cfg = (kit_redis_cfg *)ctx;
    simba_redis_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.port = cfg->port;
    d.prefix = cfg->prefix;
    rc = simba_redis_open(loop, &d, out);
    if (rc != SIMBA_OK) fprintf(stderr, "kit_redis: open port %d: %s\n", cfg->port, simba_strerror(rc));
    return rc;
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

int main(int argc, char **argv) {
    kit_redis_cfg cfg;
    kit_backend kb;
    struct timespec ts;
    const char *e = getenv("SIMBA_REDIS_PORT");
    memset(&cfg, 0, sizeof cfg);
    cfg.port = e && *e ? atoi(e) : 6390;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(cfg.prefix, sizeof cfg.prefix, "kit%d.%ld:", (int)getpid(), (long)(ts.tv_nsec / 1000));
    between(&cfg);
    {
        struct timeval tv = {1, 0};
        redisContext *c = redisConnectWithTimeout("127.0.0.1", cfg.port, tv);
        redisReply *x = c && !c->err ? (redisReply *)redisCommand(c, "SET %salive 0", cfg.prefix) : NULL;
        if (!x || x->type != REDIS_REPLY_STATUS) fprintf(stderr, "kit_redis: cannot declare the prefix %s\n", cfg.prefix);
        if (x) freeReplyObject(x);
        if (c) redisFree(c);
    }
    memset(&kb, 0, sizeof kb);
    kb.name = "redis";
    kb.open = open_redis;
    kb.ctx = &cfg;
    kb.ttl_ms = 2000;
    kb.transition_ms = 1000;
    kb.between = between;
    return kit_run(&kb, argc, argv);
}
