/* redis_script_cost.c -- the server's time per acquire and release script, uncontended.
 *
 *   redis_script_cost PORT [CYCLES (20000)]
 *
 * One blocking client runs acquire + release of one mutex CYCLES times with the scripts
 * compiled into simba_redis.h, and prints the wall time per cycle and the server's own
 * usec_per_call of EVALSHA (INFO commandstats, reset first). The server figure hardly
 * depends on the client's scheduling: build it against two versions of the header to
 * compare their scripts on a loaded machine.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *load(redisContext *c, const char *script, char *sha) {
    redisReply *x = (redisReply *)redisCommand(c, "SCRIPT LOAD %s", script);
    if (!x || x->type != REDIS_REPLY_STRING) return NULL;
    snprintf(sha, 41, "%s", x->str);
    freeReplyObject(x);
    return sha;
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 0;
    long cycles = argc > 2 ? atol(argv[2]) : 20000, i;
    char sa[41], sr[41], p[64], k[6][128], ow[160], ev[160], wk[160];
    struct timeval tv = {2, 0};
    redisContext *c;
    redisReply *x;
    double t0, t1, usec = -1;
    if (port <= 0 || port > 65535 || cycles <= 0) {
        fprintf(stderr, "usage: %s PORT [CYCLES]\n", argv[0]);
        return 2;
    }
    c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) return fprintf(stderr, "redis_script_cost: cannot connect to %d\n", port), 1;
    if (!load(c, simba__redis_lua[0][SIMBA__RS_ACQUIRE], sa) || !load(c, simba__redis_lua[0][SIMBA__RS_RELEASE], sr))
        return fprintf(stderr, "redis_script_cost: SCRIPT LOAD failed\n"), 1;
    snprintf(p, sizeof p, "cost%d:", (int)getpid());
    snprintf(k[0], sizeof k[0], "%s{m}:owner", p);
    snprintf(k[1], sizeof k[1], "%s{m}:fence", p);
    snprintf(k[2], sizeof k[2], "%s{m}:queue", p);
    snprintf(k[3], sizeof k[3], "%s{m}:qexp", p);
    snprintf(k[4], sizeof k[4], "%salive", p);
    snprintf(k[5], sizeof k[5], "%s", SIMBA__REDIS_FRESH_KEY);
    snprintf(ow, sizeof ow, "%s{m}:ow:0", p);
    snprintf(ev, sizeof ev, "%s{m}:ev:0", p);
    snprintf(wk, sizeof wk, "%s{m}:wk:0:", p);
    /* a prefix declared unused: no data-loss quarantine */
    freeReplyObject(redisCommand(c, "SET %s 0", k[4]));
    freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));
    t0 = now_s();
    for (i = 0; i < cycles; i++) {
        /* ARGV as simba_redis sends them (an older script ignores the ones it lacks) */
        x = (redisReply *)redisCommand(c, "EVALSHA %s 6 %s %s %s %s %s %s C 10000 16000 %s 18000 0 16000 %s 0 %s", sa, k[0], k[1],
                                       k[2], k[3], k[4], k[5], ow, "", wk);
        if (!x || x->type != REDIS_REPLY_ARRAY) return fprintf(stderr, "redis_script_cost: acquire: %s\n", x ? x->str : c->errstr), 1;
        freeReplyObject(x);
        x = (redisReply *)redisCommand(c, "EVALSHA %s 4 %s %s %s %s C %s %s 0", sr, k[0], k[1], k[2], k[3], ev, wk);
        if (!x || x->type != REDIS_REPLY_ARRAY) return fprintf(stderr, "redis_script_cost: release: %s\n", x ? x->str : c->errstr), 1;
        freeReplyObject(x);
    }
    t1 = now_s();
    x = (redisReply *)redisCommand(c, "INFO commandstats");
    if (x && x->type == REDIS_REPLY_STRING) {
        const char *s = strstr(x->str, "cmdstat_evalsha:");
        const char *u = s ? strstr(s, "usec_per_call=") : NULL;
        if (u) usec = atof(u + 14);
    }
    if (x) freeReplyObject(x);
    freeReplyObject(redisCommand(c, "DEL %s %s", k[1], k[4]));
    printf("redis_script_cost: %ld cycles, %.1f us per cycle (wall), server %.2f us per script call\n", cycles,
           (t1 - t0) * 1e6 / (double)cycles, usec);
    redisFree(c);
    return 0;
}
