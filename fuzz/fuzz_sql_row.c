/* fuzz_sql_row.c -- whatever is stored in the mutex table: the row of mutex "m" gets
 * fuzzed values (owner_id as text or blob of any bytes and length, times and fence as
 * integers or text or real), then simba_sql_read() reads it and a contender and an
 * observer on the same backend try to acquire / read it (the conditional UPDATE runs over
 * the odd values). Another process, an older version or a hand edit could leave such a row.
 * Invariants: read answers OK or an error, the owner it copies is NUL-terminated within
 * the buffer; nothing crashes. */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"
#include <assert.h>
#include <stdlib.h>

static simba_loop *loop;
static simba_backend *be;
static sqlite3 *db;
static simba_service *con, *obs;

static void setup(void) {
    simba_sql_desc d;
    simba_contend_desc cd;
    simba_observe_desc od;
    if (loop) return;
    memset(&d, 0, sizeof d);
    d.path = ":memory:";
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || simba_sql_open(loop, &d, &be) != SIMBA_OK) abort();
    db = ((simba__sql *)simba_backend_impl(be))->db;
    memset(&cd, 0, sizeof cd);
    cd.mutex = "m";
    cd.contender_id = "me";
    cd.ttl_ms = 1000;
    cd.transition_ms = 500;
    memset(&od, 0, sizeof od);
    od.mutex = "m";
    if (simba_contend(loop, be, &cd, &con) != SIMBA_OK || simba_start(con) != SIMBA_OK ||
        simba_observe(loop, be, &od, &obs) != SIMBA_OK || simba_start(obs) != SIMBA_OK)
        abort();
    simba_poll(loop); /* creates the row */
}

static int64_t i64(const unsigned char **p, size_t *left) {
    uint64_t v = 0;
    size_t i;
    for (i = 0; i < 8 && *left; i++, (*p)++, (*left)--) v = v << 8 | **p;
    return (int64_t)v;
}

static void bind_val(sqlite3_stmt *st, int col, const unsigned char **p, size_t *left) {
    unsigned kind = *left ? **p : 0;
    if (*left) (*p)++, (*left)--;
    switch (kind & 3) {
    case 0: sqlite3_bind_int64(st, col, i64(p, left)); break;
    case 1: sqlite3_bind_double(st, col, (double)i64(p, left) / 7.0); break;
    case 2: sqlite3_bind_text(st, col, "12x", -1, SQLITE_STATIC); break;
    default: sqlite3_bind_null(st, col); break; /* NOT NULL: the UPDATE fails, fine */
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    sqlite3_stmt *st = NULL;
    const unsigned char *p = data;
    size_t left = size, olen;
    simba_reply rep;
    char owner[SIMBA_ID_MAX + 1];
    int i;
    setup();
    if (sqlite3_prepare_v2(db,
                           "UPDATE simba_mutex SET owner_id = ?1, acquired_at = ?2, ttl_at = ?3,"
                           " transition_at = ?4, fence = ?5 WHERE mutex = 'm'",
                           -1, &st, NULL) != SQLITE_OK)
        abort();
    olen = left ? *p % 200 : 0;
    if (left) p++, left--;
    if (olen > left) olen = left;
    if (olen && (p[0] & 1)) sqlite3_bind_blob(st, 1, p, (int)olen, SQLITE_TRANSIENT);
    else sqlite3_bind_text(st, 1, (const char *)p, (int)olen, SQLITE_TRANSIENT);
    p += olen;
    left -= olen;
    for (i = 2; i <= 5; i++) bind_val(st, i, &p, &left);
    sqlite3_step(st);
    sqlite3_finalize(st);

    memset(owner, 'x', sizeof owner);
    if (simba_sql_read(be, "m", &rep, owner, sizeof owner) == SIMBA_OK) {
        assert(memchr(owner, 0, sizeof owner) != NULL);
    }
    for (i = 0; i < 3; i++) simba_poll(loop);
    simba_is_owner(con);
    return 0;
}
