/* fuzz_mysql_row.c -- whatever a MariaDB server (or a hand-edited table, or another version
 * of the procedures) answers as text: the input becomes one row of 0..12 columns (split at
 * '\n'; a column "\x01" is SQL NULL).
 * simba__my_parse_row() reads it as a request's answer (owner, ttl, transition, held, fence,
 * first_in_line, server ms, value in hex). Invariants: 0 or -1, and -1 leaves a
 * NUL-terminated message; a refusal (quarantine, max_lease_ms, another N) names nobody and
 * says why, a quarantine lasts 0..SIMBA_MAX_MS; otherwise an owner is a valid contender id
 * copied NUL-terminated into the buffer, its durations are in range (transition_left >=
 * ttl_left, both <= SIMBA_MAX_MS, held >= 0) and its fence > 0, nobody means fence 0, and a
 * value is at most SIMBA_VALUE_MAX bytes in the caller's buffer.
 * The same row is an inspection row for simba__my_view_row() (name, owner, fence, acquired,
 * held, ttl, transition, value, waiters, their ids) and, with 12 columns, its holdings
 * ("id fence shared acquired held ttl tr x<hex>" ...) and permits for
 * simba__my_view_holders(). Invariants: 0 or -1; on 0 the name, owner and waiter ids are
 * NUL-terminated within their arrays, a value is at most SIMBA_VALUE_MAX bytes in its slot,
 * the holders fit the SIMBA__MY_VIEW_HOLDERS the backend keeps, each with an id, and a name
 * with holders has an owner (the holder that frees first).
 * simba__my_unhex() reads the first column as a value: 0 with strlen / 2 bytes (at most
 * SIMBA_VALUE_MAX), or -1 with a message. Nothing crashes.
 * Not here: the schema check's row (simba__my_version: a number and two "1" flags read from
 * a MYSQL_RES) and the doorbell's (a "0" / "1" compared): nothing in them parses further. */
#define SIMBA_IMPLEMENTATION
#include "../simba_mysql.h"
#include <assert.h>

#define COLS 12
static simba_view_holder hs[SIMBA__MY_VIEW_HOLDERS];
static unsigned char hs_vals[SIMBA__MY_VIEW_HOLDERS * SIMBA_VALUE_MAX];

static int terminated(const char *s, size_t cap, size_t max) {
    const char *z = (const char *)memchr(s, 0, cap);
    return z && (size_t)(z - s) <= max;
}

static void answer(unsigned n, char **vals) {
    char owner[SIMBA_ID_MAX + 1], err[256];
    unsigned char val[SIMBA_VALUE_MAX];
    simba_reply rep;
    int rc;
    memset(owner, 'x', sizeof owner);
    err[0] = 0;
    rc = simba__my_parse_row(n, vals, &rep, owner, val, err, sizeof err);
    assert(rc == 0 || rc == -1);
    if (rc != 0) { assert(memchr(err, 0, sizeof err) && err[0]); return; }
    if (rep.rc != SIMBA_OK && rep.rc != SIMBA_EFENCE) { /* a refusal: nobody, and why */
        assert((rep.rc == SIMBA_EBACKEND || rep.rc == SIMBA_ECONFLICT) && rep.errmsg == err && err[0]);
        assert(memchr(err, 0, sizeof err) && !rep.owner && rep.fence == 0 && rep.held_ms == -1);
        assert(rep.quarantine_ms >= 0 && rep.quarantine_ms <= SIMBA_MAX_MS);
        return;
    }
    assert(rep.first_in_line == 0 || rep.first_in_line == 1);
    assert(rep.value_len <= SIMBA_VALUE_MAX && (rep.value_len == 0 || rep.value == val));
    if (!rep.owner) { assert(rep.fence == 0 && rep.held_ms == -1 && rep.value_len == 0); return; }
    assert(rep.owner == owner && memchr(owner, 0, sizeof owner) && simba_id_check(owner) == SIMBA_OK);
    assert(rep.transition_left_ms >= rep.ttl_left_ms && rep.held_ms >= 0 && rep.fence > 0);
    assert(rep.ttl_left_ms <= SIMBA_MAX_MS && rep.transition_left_ms <= SIMBA_MAX_MS && rep.held_ms <= SIMBA_MAX_MS);
}

static void view(unsigned n, char **vals) {
    simba_view v;
    unsigned char vb[SIMBA_VALUE_MAX];
    char err[256];
    int i, k;
    err[0] = 0;
    if (simba__my_view_row(n, vals, &v, vb, err, sizeof err) != 0) return; /* the caller words it */
    assert(terminated(v.mutex, sizeof v.mutex, SIMBA_NAME_MAX) && terminated(v.owner, sizeof v.owner, SIMBA_ID_MAX));
    assert(v.value_len <= SIMBA_VALUE_MAX && (v.value_len == 0 ? !v.value : v.value == vb && v.owner[0]));
    for (k = 0; k < SIMBA_VIEW_WAITERS; k++) assert(terminated(v.waiter[k], sizeof v.waiter[k], SIMBA_ID_MAX));
    if (n < 10) assert(v.waiters == -1);
    if (n < 12 || simba__my_view_holders(vals, &v, hs, hs_vals, err, sizeof err) != 0) return;
    assert(v.holders >= 0 && v.holders <= SIMBA__MY_VIEW_HOLDERS && (v.holders ? v.holder == hs : !v.holder));
    assert(v.holders == 0 ? v.permits == 0 : v.owner[0] != 0);
    assert(terminated(v.owner, sizeof v.owner, SIMBA_ID_MAX) && v.value_len <= SIMBA_VALUE_MAX);
    for (i = 0; i < v.holders; i++) {
        const simba_view_holder *h = &hs[i];
        assert(h->id[0] && terminated(h->id, sizeof h->id, SIMBA_ID_MAX) && (h->shared == 0 || h->shared == 1));
        assert(h->value_len <= SIMBA_VALUE_MAX && (h->value_len == 0 ? !h->value : h->value != NULL));
        /* a holding's value stays in its own slot of the backend's buffer */
        if (h->value && h->value != vb) assert(h->value == hs_vals + (size_t)i * SIMBA_VALUE_MAX);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char *buf = (char *)malloc(size + 1), *vals[COLS], err[256];
    unsigned char val[SIMBA_VALUE_MAX];
    unsigned n = 0;
    size_t i, start = 0, len;
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    for (i = 0; i <= size && n < COLS; i++) {
        if (i == size || buf[i] == '\n') {
            buf[i] = 0;
            vals[n++] = strcmp(buf + start, "\x01") == 0 ? NULL : buf + start;
            start = i + 1;
        }
    }
    err[0] = 0;
    if (simba__my_unhex(vals[0], val, &len, err, sizeof err) == 0)
        assert(len <= SIMBA_VALUE_MAX && len == (vals[0] ? strlen(vals[0]) / 2 : 0));
    else
        assert(len == 0 && err[0] && memchr(err, 0, sizeof err));
    answer(n, vals);
    view(n, vals);
    free(buf);
    return 0;
}
