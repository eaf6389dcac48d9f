/* fuzz_sql_push.c -- whatever reaches a SQLite backend's datagram socket (any process of the
 * host may send to it): the input becomes one datagram sent to the backend's own address and
 * read by simba__sql_wake_recv(), which parses a wake-up ("simba-sql-wake <mutex> <id>") or
 * an owner announcement ("simba-sql-owner <mutex> <5 numbers> <id length> <id><value>").
 * The first byte picks the form: the rest as is, or after the owner's or the wake-up's tag.
 * The backend is real (a database in memory): "other" holds mutex "m", "me" waits for it and
 * an observer follows it, so the events go through the core.
 * Invariants: an owner event names a valid mutex and contender with a fence > 0 and carries
 * the datagram's last bytes as its value (at most SIMBA_VALUE_MAX); a wake-up names a valid
 * mutex and contender; a datagram never grants ("other" stays owner, "me" never is); nothing
 * crashes. */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"
#include <assert.h>
#include <stdlib.h>

static simba_loop *loop;
static simba_backend *be;
static simba__sql *sq;
static simba_service *other, *me, *obs;

static simba_service *contender(const char *id, int64_t ttl_ms) {
    simba_contend_desc cd;
    simba_service *s = NULL;
    memset(&cd, 0, sizeof cd);
    cd.mutex = "m";
    cd.contender_id = id;
    cd.ttl_ms = ttl_ms;
    cd.transition_ms = 500;
    if (simba_contend(loop, be, &cd, &s) != SIMBA_OK || simba_start(s) != SIMBA_OK) abort();
    return s;
}

static void setup(void) {
    simba_sql_desc d;
    simba_observe_desc od;
    int i;
    if (loop) return;
    memset(&d, 0, sizeof d);
    d.path = ":memory:";
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || simba_sql_open(loop, &d, &be) != SIMBA_OK) abort();
    sq = (simba__sql *)simba_backend_impl(be);
    if (sq->wake_fd < 0) abort(); /* Linux: every backend that may write has its socket */
    other = contender("other", 60000); /* renewed by each input's poll: it holds for the run */
    for (i = 0; i < 100 && !simba_is_owner(other); i++) simba_wait(loop, 10);
    if (!simba_is_owner(other)) abort();
    me = contender("me", 1000);
    memset(&od, 0, sizeof od);
    od.mutex = "m";
    if (simba_observe(loop, be, &od, &obs) != SIMBA_OK || simba_start(obs) != SIMBA_OK) abort();
    for (i = 0; i < 5; i++) simba_poll(loop);
}

/* The events queued by one receive: each checked against the datagram (msg, len as read). */
static void check_events(const simba__ev *ev, const char *msg, size_t len) {
    for (; ev; ev = ev->next) {
        assert(ev->be == be && !ev->all_mutexes && simba_name_check(ev->mutex) == SIMBA_OK);
        if (ev->kind == SIMBA_EV_RELEASED) {
            assert(!ev->all_contenders && simba_id_check(ev->contender) == SIMBA_OK);
            continue;
        }
        assert(ev->kind == SIMBA_EV_OWNER && ev->all_contenders);
        assert(simba_id_check(ev->owner) == SIMBA_OK && ev->rep.fence > 0);
        assert(ev->rep.value_len <= SIMBA_VALUE_MAX && ev->rep.value_len < len);
        assert(memcmp(ev->value, msg + len - ev->rep.value_len, ev->rep.value_len) == 0);
        assert(ev->rep.holders >= 1 && ev->rep.holders <= SIMBA_PERMITS_MAX);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static const char *const tags[] = {"", SIMBA__SQL_OWN_TAG " ", SIMBA__SQL_WAKE_TAG " ", ""};
    char msg[SIMBA__SQL_OWN_MAX + 64];
    const char *tag;
    size_t len, tlen;
    simba__ev *before;
    setup();
    if (size == 0) return 0;
    tag = tags[data[0] & 3];
    tlen = strlen(tag);
    len = size - 1 > sizeof msg - tlen ? sizeof msg - tlen : size - 1;
    memcpy(msg, tag, tlen);
    memcpy(msg + tlen, data + 1, len);
    len += tlen;
    if (len == 0) return 0;
    before = loop->ev_tail;
    if (simba__sql_dgram_send(sq, sq->wake_addr, msg, len) != 1) abort();
    simba__sql_wake_recv(sq);
    /* recv keeps SIMBA__SQL_OWN_MAX bytes of a longer datagram */
    check_events(before ? before->next : loop->ev_head, msg, len < SIMBA__SQL_OWN_MAX ? len : SIMBA__SQL_OWN_MAX);
    simba_poll(loop); /* the events reach "me" and the observer */
    assert(simba_is_owner(other) && !simba_is_owner(me));
    return 0;
}
