/* fuzz_sql_row.c -- whatever is stored in the mutex table: the row of mutex "m" gets
 * fuzzed values (owner_id as text or blob of any bytes and length, times and fence as
 * integers or text or real), then simba__sql_read() reads it and a contender and an
 * observer on the same backend try to acquire / read it (the conditional UPDATE runs over
 * the odd values). Another process, an older version or a hand edit could leave such a row.
 * A row of the wait queue gets fuzzed values too (contender, seq, expiry, wake address) and
 * the mutex row a fuzzed waiters count, ahead of the contender, which then queues or wins.
 * Invariants: read answers OK or an error, the owner it copies is NUL-terminated within
 * the buffer; a queue row never becomes owner; nothing crashes. */
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
    int64_t version_before = -1;
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

    /* a queue row ahead of "me" (seq and expiry fuzzed), and a fuzzed waiters count */
    sqlite3_exec(db, "DELETE FROM simba_mutex_wait", NULL, NULL, NULL);
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO simba_mutex_wait (mutex, contender, seq, expires_at, wake)"
                                   " VALUES ('m', ?1, ?2, ?3, ?4)", -1, &st, NULL) !=
        SQLITE_OK)
        abort();
    olen = left ? *p % 140 : 0;
    if (left) p++, left--;
    if (olen > left) olen = left;
    if (olen && (p[0] & 1)) sqlite3_bind_blob(st, 1, p, (int)olen, SQLITE_TRANSIENT);
    else sqlite3_bind_text(st, 1, (const char *)p, (int)olen, SQLITE_TRANSIENT);
    p += olen;
    left -= olen;
    for (i = 2; i <= 3; i++) bind_val(st, i, &p, &left);
    olen = left ? *p % 120 : 0;
    if (left) p++, left--;
    if (olen > left) olen = left;
    sqlite3_bind_text(st, 4, (const char *)p, (int)olen, SQLITE_TRANSIENT);
    p += olen;
    left -= olen;
    sqlite3_step(st);
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "UPDATE simba_mutex SET waiters = ?1 WHERE mutex = 'm'", -1, &st, NULL) != SQLITE_OK) abort();
    bind_val(st, 1, &p, &left);
    sqlite3_step(st);
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT version FROM simba_mutex WHERE mutex = 'm'", -1, &st, NULL) != SQLITE_OK) abort();
    if (sqlite3_step(st) == SQLITE_ROW) version_before = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);

    memset(owner, 'x', sizeof owner);
    if (simba__sql_read(be, "m", &rep, owner, sizeof owner) == SIMBA_OK) {
        assert(memchr(owner, 0, sizeof owner) != NULL);
    }
    for (i = 0; i < 3; i++) simba_poll(loop);
    simba_is_owner(con);
    /* whoever owns now is "me", nobody, or the fuzzed owner: never the queue row alone */
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM simba_mutex m JOIN simba_mutex_wait w ON w.mutex = m.mutex"
                               " WHERE m.mutex = 'm' AND m.owner_id = w.contender AND m.owner_id <> 'me'"
                               " AND m.version <> ?1",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, version_before);
        if (sqlite3_step(st) == SQLITE_ROW) assert(sqlite3_column_int64(st, 0) == 0);
        sqlite3_finalize(st);
    }
    return 0;
}
