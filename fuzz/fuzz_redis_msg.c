/* fuzz_redis_msg.c -- pub/sub messages as the Redis backend receives them:
 * simba__redis_on_msg() with (a) replies parsed by hiredis from the raw input, or (b) a
 * "message" on one of the backend's own channels whose payload is the input (first byte
 * picks the form and the channel). The backend is real (simba_redis_open towards a closed
 * port; an observer and a contender watch mutex "m"), so pushed events go through the core.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"
#include <assert.h>
#include <stdlib.h>
#include "fuzz_common.h"

static simba_loop *loop;
static simba_backend *be;
static simba__redis *r;
static simba_service *obs, *con;

static void setup(void) {
    simba_redis_desc d;
    if (loop) return;
    memset(&d, 0, sizeof d);
    d.host = "127.0.0.1";
    d.port = 1; /* nothing listens: no traffic, the channels exist all the same */
    d.reconnect_min_ms = d.reconnect_max_ms = 100000;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || simba_redis_open(loop, &d, &be) != SIMBA_OK) abort();
    r = (simba__redis *)simba_backend_impl(be);
    fuzz_watch_m(loop, be, &obs, &con);
}

static redisReply *str(const char *s, size_t len) {
    redisReply *x = (redisReply *)calloc(1, sizeof *x);
    x->type = REDIS_REPLY_STRING;
    x->str = (char *)malloc(len + 1);
    memcpy(x->str, s, len);
    x->str[len] = 0;
    x->len = len;
    return x;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    setup();
    if (size == 0) return 0;
    if (data[0] & 1) {
        redisReader *rd = redisReaderCreate();
        void *reply = NULL;
        int n = 0;
        if (huge_count(data + 1, size - 1)) {
            redisReaderFree(rd);
            return 0;
        }
        redisReaderFeed(rd, (const char *)data + 1, size - 1);
        while (n++ < 16 && redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
            simba__redis_on_msg(NULL, reply, r);
            freeReplyObject(reply);
            reply = NULL;
        }
        redisReaderFree(rd);
    } else {
        static const char *const chans[] = {"simba:{m}:ev:0", "simba:{m}:wk:0:me", "simba:{x}:ev:0", "simba:{m}:ev:1"};
        const char *chan = chans[(data[0] >> 1) & 3];
        redisReply *x = (redisReply *)calloc(1, sizeof *x), **e = (redisReply **)malloc(3 * sizeof *e);
        e[0] = str((data[0] & 0x40) ? "pmessage" : "message", (data[0] & 0x40) ? 8 : 7);
        e[1] = str(chan, strlen(chan));
        e[2] = str((const char *)data + 1, size - 1);
        x->type = REDIS_REPLY_ARRAY;
        x->elements = 3;
        x->element = e;
        simba__redis_on_msg(NULL, x, r);
        freeReplyObject(x); /* frees the elements, their strings and the array */
    }
    simba_poll(loop); /* pushed events reach the observer and the contender */
    return 0;
}
