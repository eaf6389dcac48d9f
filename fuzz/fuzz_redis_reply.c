/* fuzz_redis_reply.c -- what a Redis server sends back to a script call: the bytes go
 * through hiredis' reply parser (as they would off the socket), then simba__redis_parse()
 * builds a simba_reply from each reply; every reply that parses is then pushed into the
 * core as an owner announcement (observer and contender on the memory backend), so absurd
 * durations and fences from a server reach the core's time arithmetic too.
 * Invariants: an accepted reply has an owner of at most SIMBA_ID_MAX bytes, fence 0 when
 * nobody owns, transition_left >= ttl_left. */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"
#include "../simba_memory.h"
#include <assert.h>
#include <stdlib.h>
#include "fuzz_common.h"

static simba_memstore *st;
static simba_loop *loop;
static simba_backend *be;
static simba_service *obs, *con;

static void setup(void) {
    if (loop) return;
    if (simba_memstore_new(NULL, &st) != SIMBA_OK || simba_loop_new(NULL, &loop) != SIMBA_OK ||
        simba_memory_open(loop, st, &be) != SIMBA_OK)
        abort();
    fuzz_watch_m(loop, be, &obs, &con);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    redisReader *rd;
    void *reply = NULL;
    int n = 0;
    setup();
    if (huge_count(data, size)) return 0;
    rd = redisReaderCreate();
    if (!rd) return 0;
    redisReaderFeed(rd, (const char *)data, size);
    while (n++ < 16 && redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
        simba_reply rep;
        memset(&rep, 0, sizeof rep);
        if (simba__redis_parse((const redisReply *)reply, &rep) == 0) {
            assert(rep.owner != NULL);
            assert(strlen(rep.owner) <= SIMBA_ID_MAX);
            assert(rep.owner[0] || rep.fence == 0);
            assert(rep.transition_left_ms >= rep.ttl_left_ms);
            rep.rc = SIMBA_OK;
            simba_backend_event(be, SIMBA_EV_OWNER, "m", NULL, &rep);
            simba_poll(loop);
        }
        freeReplyObject(reply);
        reply = NULL;
    }
    redisReaderFree(rd);
    return 0;
}
