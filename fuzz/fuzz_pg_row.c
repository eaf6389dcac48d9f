/* fuzz_pg_row.c -- whatever a server (or a hand-edited table, or an older version of the
 * functions) answers: the input becomes one answer row of 0..8 text columns (split at '\n';
 * a column "\x01" is SQL NULL), and simba__pg_parse_row() turns it into a reply.
 * Invariants: it answers 0 or -1 with a NUL-terminated message; on 0 an owner is a valid
 * contender id copied NUL-terminated into the buffer, its durations are in range
 * (transition_left >= ttl_left, held >= 0, fence > 0), nobody means fence 0, and the
 * server's clock (7th column) is a positive ms count; nothing crashes.
 * The same input, whole, is also a release's NOTIFY payload for simba__pg_parse_push():
 * a hint names a valid contender and mutex, a grant also a fence > 0, a ttl in
 * 1..SIMBA_MAX_MS, a transition in 0..SIMBA_MAX_MS and a server time > 0. */
#define SIMBA_IMPLEMENTATION
#include "../simba_pg.h"
#include <assert.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char buf[4096], owner[SIMBA_ID_MAX + 1], err[256];
    unsigned char val[SIMBA_VALUE_MAX];
    const char *vals[8];
    simba_reply rep;
    simba__pg_grant g;
    int64_t server_ms = -1;
    int n = 0, rc;
    size_t i, start = 0;
    if (size >= sizeof buf) size = sizeof buf - 1;
    memcpy(buf, data, size);
    buf[size] = 0;
    rc = simba__pg_parse_push(buf, &g);
    assert(rc >= 0 && rc <= 2);
    if (rc != 0) {
        assert(memchr(g.id, 0, sizeof g.id) && simba_id_check(g.id) == SIMBA_OK);
        assert(memchr(g.mutex, 0, sizeof g.mutex) && simba_name_check(g.mutex) == SIMBA_OK);
    }
    if (rc == 2) assert(g.fence > 0 && g.ttl > 0 && g.ttl <= SIMBA_MAX_MS && g.tr >= 0 && g.tr <= SIMBA_MAX_MS && g.start > 0);
    for (i = 0; i <= size && n < 8; i++) {
        if (i == size || buf[i] == '\n') {
            buf[i] = 0;
            vals[n++] = strcmp(buf + start, "\x01") == 0 ? NULL : buf + start;
            start = i + 1;
        }
    }
    memset(owner, 'x', sizeof owner);
    err[0] = 0;
    rc = simba__pg_parse_row(n, vals, &rep, &server_ms, owner, val, err, sizeof err);
    assert(rc == 0 || rc == -1);
    if (rc != 0) {
        assert(memchr(err, 0, sizeof err) && err[0]);
        return 0;
    }
    assert(server_ms > 0);
    /* SIMBA_EFENCE: a proclaim or yield whose fence no longer holds; the row says who holds it */
    /* a refusal (the crash quarantine, another max_lease_ms, another N of permits): nobody, and a message */
    if (rep.rc != SIMBA_OK && rep.rc != SIMBA_EFENCE) {
        assert((rep.rc == SIMBA_EBACKEND || rep.rc == SIMBA_ECONFLICT) && rep.errmsg == err && err[0] && memchr(err, 0, sizeof err));
        assert(!rep.owner && rep.fence == 0 && rep.held_ms == -1);
        return 0;
    }
    assert(rep.first_in_line == 0 || rep.first_in_line == 1);
    assert(rep.value_len <= SIMBA_VALUE_MAX && (rep.value_len == 0 || rep.value == val));
    if (rep.owner) {
        assert(rep.owner == owner);
        assert(memchr(owner, 0, sizeof owner));
        assert(simba_id_check(owner) == SIMBA_OK);
        assert(rep.transition_left_ms >= rep.ttl_left_ms && rep.held_ms >= 0 && rep.fence > 0);
        assert(rep.ttl_left_ms <= SIMBA_MAX_MS && rep.transition_left_ms <= SIMBA_MAX_MS);
    } else {
        assert(rep.fence == 0 && rep.held_ms == -1);
    }
    return 0;
}
