/* redis_cluster_declare.c -- declares a key prefix as never used on a Redis Cluster, so that the
 * bench's first grant in a slot does not wait a data-loss quarantine (see simba_redis.h, DATA
 * LOSS: the marker is one per slot there).
 *
 *   redis_cluster_declare PORT PREFIX     (PORT: any node of the cluster, on 127.0.0.1)
 *
 * Sets "<PREFIX>{<tag>}:alive" = 0 for every one of the 16384 slots, pipelined to each slot's
 * primary (CLUSTER SLOTS), which is true of a prefix nobody has used. Exits 0 when every
 * slot answered OK, 1 otherwise (and says which node failed).
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    static char tags[16384][SIMBA__RCL_TAG];
    struct timeval tv = {2, 0};
    redisContext *c;
    redisReply *x;
    size_t i;
    int s, done = 0, port;
    if (argc != 3 || (port = atoi(argv[1])) <= 0 || port > 65535 || strlen(argv[2]) > 64) {
        fprintf(stderr, "usage: redis_cluster_declare PORT PREFIX\n");
        return 2;
    }
    c = redisConnectWithTimeout("127.0.0.1", port, tv);
    x = c && !c->err ? (redisReply *)redisCommand(c, "CLUSTER SLOTS") : NULL;
    if (c) redisFree(c);
    if (!x || x->type != REDIS_REPLY_ARRAY) {
        fprintf(stderr, "redis_cluster_declare: no CLUSTER SLOTS from 127.0.0.1:%d\n", port);
        if (x) freeReplyObject(x);
        return 1;
    }
    simba__rcl_tags_fill(tags);
    for (i = 0; i < x->elements; i++) {
        redisReply *e = x->element[i], *y;
        int a = (int)e->element[0]->integer, z = (int)e->element[1]->integer;
        int np = (int)e->element[2]->element[1]->integer;
        c = redisConnectWithTimeout("127.0.0.1", np, tv);
        if (!c || c->err) {
            fprintf(stderr, "redis_cluster_declare: cannot connect to the primary on %d\n", np);
            if (c) redisFree(c);
            break;
        }
        for (s = a; s <= z; s++) redisAppendCommand(c, "SET %s{%s}:alive 0", argv[2], tags[s]);
        for (s = a; s <= z; s++) {
            if (redisGetReply(c, (void **)&y) != REDIS_OK || !y) break;
            if (y->type == REDIS_REPLY_STATUS) done++;
            freeReplyObject(y);
        }
        redisFree(c);
    }
    freeReplyObject(x);
    if (done != 16384) {
        fprintf(stderr, "redis_cluster_declare: %d of 16384 slots declared\n", done);
        return 1;
    }
    printf("redis_cluster_declare: prefix %s declared on 16384 slots\n", argv[2]);
    return 0;
}
