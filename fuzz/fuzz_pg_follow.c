/* fuzz_pg_follow.c -- whatever arrives on a PostgreSQL table's follow channel (any session
 * that may NOTIFY there can send it): the input, up to its first NUL, is the payload that
 * simba__pg_follow_recv() parses, an owner announcement
 * "O <fence> <ttl> <transition> <held> <holders> <contender> <mutex> x<hex value>".
 * The backend is real (simba_pg_open towards a closed port: it never connects); a contender
 * and an observer follow mutex "m", so the events go through the core.
 * Invariants: an announcement that raises an event has a valid mutex and contender, a
 * fence > 0, holders in 1..SIMBA_PERMITS_MAX, and its value is exactly the hex digits after
 * the last 'x' (two per byte, nothing else, at most SIMBA_VALUE_MAX bytes); a payload with
 * anything else there raises nothing; a push never makes the contender owner; nothing
 * crashes. */
#define SIMBA_IMPLEMENTATION
#include "../simba_pg.h"
#include <assert.h>
#include <stdlib.h>
#include "fuzz_common.h"

static simba_loop *loop;
static simba_backend *be;
static simba__pg *pg;
static simba_service *obs, *con;

static void setup(void) {
    simba_pg_desc d;
    if (loop) return;
    memset(&d, 0, sizeof d);
    d.hostaddr = "127.0.0.1";
    d.port = 1; /* nothing listens: no traffic */
    d.reconnect_min_ms = d.reconnect_max_ms = 100000;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || simba_pg_open(loop, &d, &be) != SIMBA_OK) abort();
    pg = (simba__pg *)simba_backend_impl(be);
    fuzz_watch_m(loop, be, &obs, &con);
}

/* 1 when s[0..n) is n/2 bytes of strict hex equal to v. */
static int hex_is(const char *s, size_t n, const unsigned char *v, size_t len) {
    size_t i;
    if (n != 2 * len) return 0;
    for (i = 0; i < len; i++) {
        int hi = simba__pg_nibble(s[2 * i]), lo = simba__pg_nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0 || (hi << 4 | lo) != v[i]) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char buf[4096];
    const char *x;
    simba__ev *before, *ev;
    setup();
    if (size >= sizeof buf) size = sizeof buf - 1;
    memcpy(buf, data, size);
    buf[size] = 0;
    before = loop->ev_tail;
    simba__pg_follow_recv(pg, buf);
    ev = before ? before->next : loop->ev_head;
    if (ev) {
        assert(!ev->next && ev->kind == SIMBA_EV_OWNER && !ev->all_mutexes && ev->all_contenders);
        assert(simba_name_check(ev->mutex) == SIMBA_OK && simba_id_check(ev->owner) == SIMBA_OK);
        assert(ev->rep.fence > 0 && ev->rep.holders >= 1 && ev->rep.holders <= SIMBA_PERMITS_MAX);
        x = strrchr(buf, 'x');
        assert(x && hex_is(x + 1, strlen(x + 1), ev->value, ev->rep.value_len));
    }
    simba_poll(loop); /* the event reaches the contender and the observer */
    assert(!simba_is_owner(con));
    return 0;
}
