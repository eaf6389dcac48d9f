/*
 * simba_sql.h v0.1.0 -- SQL (SQLite) backend for simba, stb-style single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file; the same macro instantiates simba.h,
 * which this header includes itself. Link with -lsqlite3.
 *
 *     simba_backend *be;
 *     simba_sql_desc d = {0};
 *     d.path = "locks.db";
 *     if (simba_sql_open(loop, &d, &be) != SIMBA_OK) ...
 *     simba_contend(loop, be, &cdesc, &svc);      // as with any backend
 *
 * HOW IT WORKS
 *   One row per mutex in one table (default "simba_mutex"):
 *       mutex (primary key), acquired_at, ttl_at, transition_at, owner_id, fence, version
 *   Times are the database's clock in ms since the epoch, so every process on the file shares
 *   one clock; replies carry only remaining durations computed by the database.
 *   Acquire-or-renew is one conditional UPDATE in one short write transaction: anyone may take
 *   the row once transition_at < now (the lease is fully over), the owner may renew while
 *   transition_at >= now. acquired_at and fence change only when the owner changes; a new
 *   owner gets fence + 1, and release never resets the fence, so fences strictly increase
 *   from one ownership to the next. The UPDATE returns the row it wrote (RETURNING), so a
 *   renewal or a win is one autocommit statement. The row is created on first use (INSERT OR
 *   IGNORE, then the UPDATE again: two creators cannot race). Release clears the row only
 *   for its owner.
 *
 * NEVER BLOCKS THE POLL
 *   The connection runs with busy_timeout 0, WAL journal, synchronous=NORMAL. A request that
 *   finds the database locked (SQLITE_BUSY / SQLITE_LOCKED) is kept and retried every
 *   busy_retry_ms from the loop (the backend's deadline), and fails with SIMBA_EBUSY once it
 *   has waited busy_max_ms (default: ttl/2 for acquire, 1000 ms otherwise), so that the core
 *   backs off instead of waiting. Requests are executed in submission order. The statements
 *   are short local transactions: executing them inside submit() is the design.
 *   Several processes on one file, and several backends (connections) in one process, work.
 *
 * CLOCK AND ROWS
 *   "The database's clock" is, for SQLite, the wall clock of the host running each process:
 *   all processes on one file must share a host (SQLite itself does not support network
 *   file systems). A forward step of that clock shortens every lease in real time, by the
 *   size of the step, and the owner's monotonic step-down cannot see it; keep the clock
 *   slewed (NTP does), not stepped. Never delete rows: the row keeps the fence, and a
 *   recreated row would start again at 1.
 *
 * SAFETY OF INPUT
 *   Names reach SQL only as bound parameters. The table name cannot be bound: it must match
 *   [A-Za-z_][A-Za-z0-9_]{0,63} and not start with "sqlite_", and it is quoted besides.
 *
 * THREADS
 *   One backend is one sqlite3 connection, used only from its loop's thread.
 *
 * LICENSE: MIT, see the end of this file.
 */
#ifndef SIMBA_SQL_H
#define SIMBA_SQL_H

#include "simba.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIMBA_SQL_TABLE_MAX 64

typedef struct simba_sql_desc {
    const char *path;      /* required: database file, created if missing */
    const char *table;     /* NULL or "" -> "simba_mutex" */
    int64_t busy_retry_ms; /* 0 -> 5: retry interval while the database is locked */
    int64_t busy_max_ms;   /* 0 -> acquire: ttl/2, release/read: 1000. Then SIMBA_EBUSY */
    /* Optional: receives sqlite's message when simba_sql_open() fails (always
       NUL-terminated when errbuf_cap > 0). The same message also goes to the loop's log. */
    char *errbuf;
    size_t errbuf_cap;
} simba_sql_desc;

/* Opens the database (creating file and table if needed) and registers a backend on loop.
   SIMBA_EINVAL for bad arguments (NULL, empty path, bad table name), SIMBA_EBACKEND when
   sqlite cannot open or set up the database (nothing is leaked), SIMBA_ENOMEM.
   If the database is merely locked at open, setup finishes on the first request instead. */
SIMBA_API simba_result simba_sql_open(simba_loop *loop, const simba_sql_desc *desc, simba_backend **out);

/* Synchronous, non-blocking inspection of one mutex as the database sees it (tools, tests).
   be must come from simba_sql_open(). Fills *out like a READ reply (owner copied into
   owner_buf, "" when nobody). SIMBA_EBUSY when the database is locked right now. */
SIMBA_API simba_result simba_sql_read(simba_backend *be, const char *mutex, simba_reply *out, char *owner_buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_SQL_H */

/* ===================================================================================== */

#ifdef SIMBA_IMPLEMENTATION
#ifndef SIMBA_SQL_IMPLEMENTATION_DONE
#define SIMBA_SQL_IMPLEMENTATION_DONE

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* ---- all SQL text lives here ----------------------------------------------------------
 * {T} is replaced by the validated, quoted table name; every value is a bound parameter:
 *   ?1 mutex   ?2 contender   ?3 ttl_ms   ?4 ttl_ms + transition_ms
 * A networked SQL engine would add a second simba__sql_text; the places where SQLite's
 * dialect is used are marked [sqlite]. */

/* [sqlite] Database time in ms since the epoch. SQLite 3.40 lacks the 'subsec' modifier
   (3.42), so milliseconds come from julianday. SQLite evaluates 'now' once per
   sqlite3_step(): every use of NOW inside one statement sees the same instant
   (tests/test_sql.c checks this). */
#define SIMBA__SQLITE_NOW "CAST((julianday('now') - 2440587.5) * 86400000.0 + 0.5 AS INTEGER)"

typedef struct simba__sql_text {
    const char *dialect;
    const char *setup[4]; /* once per connection, in order; NULL ends the list */
    const char *create_row; /* ?1: the row of a mutex, if it does not exist yet */
    const char *acquire;    /* ?1 ?2 ?3 ?4 -> the row as READ gives it, if we won or renewed */
    const char *release;    /* ?1 ?2 */
    const char *read;       /* ?1 -> owner_id, ttl_left, transition_left, held, fence */
} simba__sql_text;

#define SIMBA__SQL_NOW SIMBA__SQLITE_NOW
/* Still the owner's lease: the owner may renew, nobody else may take it. */
#define SIMBA__SQL_OWNS "(owner_id = ?2 AND transition_at >= " SIMBA__SQL_NOW ")"

static const simba__sql_text simba__sqlite_text = {
    "sqlite",
    {
        /* [sqlite] WAL: readers never block the writer and the writer never blocks them. */
        "PRAGMA journal_mode=WAL",
        /* [sqlite] with WAL, NORMAL loses at most the last commits on power loss, never
           consistency; a lease outlives such a loss anyway. */
        "PRAGMA synchronous=NORMAL",
        /* [sqlite] WITHOUT ROWID: the primary key is the table. */
        "CREATE TABLE IF NOT EXISTS {T} ("
        " mutex TEXT NOT NULL PRIMARY KEY,"
        " acquired_at INTEGER NOT NULL DEFAULT 0,"
        " ttl_at INTEGER NOT NULL DEFAULT 0,"
        " transition_at INTEGER NOT NULL DEFAULT 0,"
        " owner_id TEXT NOT NULL DEFAULT '',"
        " fence INTEGER NOT NULL DEFAULT 0,"
        " version INTEGER NOT NULL DEFAULT 0"
        ") WITHOUT ROWID",
        NULL},
    /* [sqlite] INSERT OR IGNORE (MySQL: INSERT IGNORE, PostgreSQL: ON CONFLICT DO NOTHING). */
    "INSERT OR IGNORE INTO {T} (mutex) VALUES (?1)",
    /* The whole mutual exclusion, one autocommit statement: the hot path (renewal, or a
       free row) is a single write transaction. SET expressions see the row as it was before
       the UPDATE; RETURNING sees it after, at the same NOW. [sqlite] RETURNING (3.35+;
       PostgreSQL has it too, MySQL would read the row back in the same transaction). */
    "UPDATE {T} SET"
    " fence = CASE WHEN " SIMBA__SQL_OWNS " THEN fence ELSE fence + 1 END,"
    " acquired_at = CASE WHEN " SIMBA__SQL_OWNS " THEN acquired_at ELSE " SIMBA__SQL_NOW " END,"
    " owner_id = ?2,"
    " ttl_at = " SIMBA__SQL_NOW " + ?3,"
    " transition_at = " SIMBA__SQL_NOW " + ?4,"
    " version = version + 1"
    " WHERE mutex = ?1 AND (transition_at < " SIMBA__SQL_NOW " OR " SIMBA__SQL_OWNS ")"
    " RETURNING owner_id, ttl_at - " SIMBA__SQL_NOW ", transition_at - " SIMBA__SQL_NOW ", "
    SIMBA__SQL_NOW " - acquired_at, fence",
    /* No time condition: while owner_id is still ours nobody else has taken the row, so
       clearing it is always right. The fence stays. */
    "UPDATE {T} SET owner_id = '', acquired_at = 0, ttl_at = 0, transition_at = 0,"
    " version = version + 1 WHERE mutex = ?1 AND owner_id = ?2",
    "SELECT owner_id, ttl_at - " SIMBA__SQL_NOW ", transition_at - " SIMBA__SQL_NOW ", "
    SIMBA__SQL_NOW " - acquired_at, fence FROM {T} WHERE mutex = ?1",
};

enum { SIMBA__SQL_CREATE_ROW, SIMBA__SQL_ACQUIRE, SIMBA__SQL_RELEASE, SIMBA__SQL_READ, SIMBA__SQL_NSTMT };

#define SIMBA__SQL_MAGIC 0x53514c31u /* "SQL1": simba_sql_read() checks it */
#define SIMBA__SQL_BUSY 1            /* internal: database locked, nothing changed */

typedef struct simba__sql {
    uint32_t magic;
    simba_loop *loop;
    simba_backend *be;
    sqlite3 *db;
    const simba__sql_text *text;
    char table[SIMBA_SQL_TABLE_MAX + 1];
    int64_t retry_ms, busy_max_ms;
    int ready; /* setup done and statements prepared */
    sqlite3_stmt *st[SIMBA__SQL_NSTMT];
    simba_req *head, *tail; /* requests waiting for the lock, in submission order */
    int64_t next_try;
    char err[512];
    char owner[SIMBA_ID_MAX + 1];
} simba__sql;

static int simba__sql_table_ok(const char *t) {
    size_t i, n = strlen(t);
    if (n == 0 || n > SIMBA_SQL_TABLE_MAX) return 0;
    if (!((t[0] >= 'A' && t[0] <= 'Z') || (t[0] >= 'a' && t[0] <= 'z') || t[0] == '_')) return 0;
    for (i = 1; i < n; i++) {
        char c = t[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    /* sqlite_ names are reserved by SQLite itself */
    if (n >= 7 && (t[0] | 32) == 's' && (t[1] | 32) == 'q' && (t[2] | 32) == 'l' && (t[3] | 32) == 'i' &&
        (t[4] | 32) == 't' && (t[5] | 32) == 'e' && t[6] == '_')
        return 0;
    return 1;
}

/* Replaces each {T} of src by the quoted table name. 0 when it does not fit. */
static int simba__sql_expand(const simba__sql *s, const char *src, char *dst, size_t cap) {
    size_t o = 0, tl = strlen(s->table);
    while (*src) {
        if (src[0] == '{' && src[1] == 'T' && src[2] == '}') {
            if (o + tl + 2 >= cap) return 0;
            dst[o++] = '"';
            memcpy(dst + o, s->table, tl);
            o += tl;
            dst[o++] = '"';
            src += 3;
        } else {
            if (o + 1 >= cap) return 0;
            dst[o++] = *src++;
        }
    }
    dst[o] = 0;
    return 1;
}

static int simba__sql_is_busy(int rc) {
    rc &= 0xff;
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

static void simba__sql_seterr(simba__sql *s, const char *what, int rc) {
    snprintf(s->err, sizeof s->err, "sqlite %s: %s (%d)", what, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc), rc);
}

/* Setup statements and prepared statements; once per connection. Returns SQLITE_OK,
   a busy code (try later) or another error (message in s->err). */
static int simba__sql_setup(simba__sql *s) {
    char sql[2048];
    int i, rc;
    const char *src[SIMBA__SQL_NSTMT];
    if (s->ready) return SQLITE_OK;
    for (i = 0; i < 4 && s->text->setup[i]; i++) {
        if (!simba__sql_expand(s, s->text->setup[i], sql, sizeof sql)) {
            snprintf(s->err, sizeof s->err, "sqlite setup: statement too long");
            return SQLITE_ERROR;
        }
        rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            simba__sql_seterr(s, "setup", rc);
            return rc;
        }
    }
    src[SIMBA__SQL_CREATE_ROW] = s->text->create_row;
    src[SIMBA__SQL_ACQUIRE] = s->text->acquire;
    src[SIMBA__SQL_RELEASE] = s->text->release;
    src[SIMBA__SQL_READ] = s->text->read;
    for (i = 0; i < SIMBA__SQL_NSTMT; i++) {
        if (s->st[i]) continue;
        if (!simba__sql_expand(s, src[i], sql, sizeof sql)) {
            snprintf(s->err, sizeof s->err, "sqlite prepare: statement too long");
            return SQLITE_ERROR;
        }
        rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
        if (rc != SQLITE_OK) {
            simba__sql_seterr(s, "prepare", rc);
            return rc;
        }
    }
    s->ready = 1;
    return SQLITE_OK;
}

/* Steps a statement that returns no row, and resets it. */
static int simba__sql_run(simba__sql *s, int which) {
    sqlite3_stmt *st = s->st[which];
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Steps a bound statement that yields at most one row (owner_id, ttl_left, transition_left,
   held, fence) into rep (owner into s->owner), and resets it; *got says whether a row came. */
static int simba__sql_row(simba__sql *s, int which, simba_reply *rep, int *got) {
    sqlite3_stmt *st = s->st[which];
    int rc;
    *got = 0;
    s->owner[0] = 0;
    rep->owner = s->owner;
    rep->ttl_left_ms = 0;
    rep->transition_left_ms = 0;
    rep->held_ms = -1;
    rep->fence = 0;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *o = sqlite3_column_text(st, 0);
        int olen = sqlite3_column_bytes(st, 0);
        int64_t tr_left = sqlite3_column_int64(st, 2);
        if (o && olen > 0 && tr_left >= 0) {
            if (olen > SIMBA_ID_MAX) {
                sqlite3_reset(st);
                snprintf(s->err, sizeof s->err, "sqlite read: owner id in the table is longer than %d bytes", SIMBA_ID_MAX);
                return SQLITE_MISMATCH;
            }
            memcpy(s->owner, o, (size_t)olen);
            s->owner[olen] = 0;
            rep->ttl_left_ms = sqlite3_column_int64(st, 1);
            rep->transition_left_ms = tr_left;
            rep->held_ms = sqlite3_column_int64(st, 3);
            rep->fence = (uint64_t)sqlite3_column_int64(st, 4);
        }
        *got = 1;
        rc = sqlite3_step(st); /* primary key: no second row */
    }
    if (rc != SQLITE_DONE) {
        simba__sql_seterr(s, which == SIMBA__SQL_READ ? "read" : "acquire", rc);
        sqlite3_reset(st);
        return rc;
    }
    sqlite3_reset(st);
    return SQLITE_OK;
}

static int simba__sql_read_row(simba__sql *s, const char *mutex, simba_reply *rep) {
    int got;
    sqlite3_bind_text(s->st[SIMBA__SQL_READ], 1, mutex, -1, SQLITE_STATIC);
    return simba__sql_row(s, SIMBA__SQL_READ, rep, &got);
}

static int simba__sql_acquire_row(simba__sql *s, const char *mutex, const char *contender, int64_t ttl_ms,
                                  int64_t transition_ms, simba_reply *rep, int *got) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_ACQUIRE];
    sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ttl_ms);
    sqlite3_bind_int64(st, 4, ttl_ms + transition_ms);
    return simba__sql_row(s, SIMBA__SQL_ACQUIRE, rep, got);
}

/* Executes one request. Returns SIMBA__SQL_BUSY when the database was locked (nothing
   changed: try again later); otherwise 0 with *rep filled (rep->owner, rep->errmsg point
   into s until the next call). */
static int simba__sql_exec(simba__sql *s, simba_op op, const char *mutex, const char *contender,
                           int64_t ttl_ms, int64_t transition_ms, int expect_win, simba_reply *rep) {
    int rc;
    memset(rep, 0, sizeof *rep);
    rep->held_ms = -1;
    rc = simba__sql_setup(s);
    if (rc != SQLITE_OK) goto fail;
    if (op == SIMBA_OP_READ) {
        rc = simba__sql_read_row(s, mutex, rep);
        if (rc != SQLITE_OK) goto fail;
        rep->rc = SIMBA_OK;
        return 0;
    }
    if (op == SIMBA_OP_ACQUIRE) {
        /* Hot path: one UPDATE ... RETURNING (renewal, or a free row). A waiter reads first:
           while someone else's lease lasts the UPDATE could not succeed, and a read is
           cheaper than a write. Only a row that does not exist yet costs an INSERT and a
           second try. Each statement is atomic on its own: reads only inform, the UPDATE
           decides. */
        int got = 0;
        if (!expect_win) {
            int exists;
            sqlite3_bind_text(s->st[SIMBA__SQL_READ], 1, mutex, -1, SQLITE_STATIC);
            rc = simba__sql_row(s, SIMBA__SQL_READ, rep, &exists);
            if (rc != SQLITE_OK) goto fail;
            if (exists && s->owner[0] && strcmp(s->owner, contender) != 0) { /* held by another */
                rep->rc = SIMBA_OK;
                return 0;
            }
        }
        rc = simba__sql_acquire_row(s, mutex, contender, ttl_ms, transition_ms, rep, &got);
        if (rc != SQLITE_OK) goto fail;
        if (!got) {
            /* Lost (the usual case for a waiter: a read, no second write) or no row yet. */
            int exists;
            sqlite3_bind_text(s->st[SIMBA__SQL_READ], 1, mutex, -1, SQLITE_STATIC);
            rc = simba__sql_row(s, SIMBA__SQL_READ, rep, &exists);
            if (rc != SQLITE_OK) goto fail;
            if (!exists) {
                sqlite3_bind_text(s->st[SIMBA__SQL_CREATE_ROW], 1, mutex, -1, SQLITE_STATIC);
                rc = simba__sql_run(s, SIMBA__SQL_CREATE_ROW);
                if (rc != SQLITE_OK) {
                    simba__sql_seterr(s, "insert", rc);
                    goto fail;
                }
                rc = simba__sql_acquire_row(s, mutex, contender, ttl_ms, transition_ms, rep, &got);
                if (rc != SQLITE_OK) goto fail;
                if (!got && (rc = simba__sql_read_row(s, mutex, rep)) != SQLITE_OK) goto fail;
            }
        }
    } else {
        sqlite3_stmt *st = s->st[SIMBA__SQL_RELEASE];
        sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
        rc = simba__sql_run(s, SIMBA__SQL_RELEASE);
        if (rc != SQLITE_OK) {
            simba__sql_seterr(s, "release", rc);
            goto fail;
        }
        /* Released: nobody owns it now. Not ours: say who does. */
        if (sqlite3_changes(s->db) == 0 && (rc = simba__sql_read_row(s, mutex, rep)) != SQLITE_OK) goto fail;
    }
    rep->rc = SIMBA_OK;
    return 0;
fail:
    if (simba__sql_is_busy(rc)) return SIMBA__SQL_BUSY;
    memset(rep, 0, sizeof *rep);
    rep->held_ms = -1;
    rep->rc = SIMBA_EBACKEND;
    rep->errmsg = s->err;
    return 0;
}

static int64_t simba__sql_busy_limit(const simba__sql *s, const simba_req *r) {
    int64_t lim;
    if (s->busy_max_ms > 0) return s->busy_max_ms;
    lim = r->op == SIMBA_OP_ACQUIRE ? r->ttl_ms / 2 : 1000;
    return lim < s->retry_ms ? s->retry_ms : lim;
}

/* Runs queued requests in order until the queue is empty or the database is locked. */
static void simba__sql_drain(simba__sql *s, int64_t now) {
    while (s->head) {
        simba_req *r = s->head;
        simba_reply rep;
        if (simba__sql_exec(s, r->op, r->mutex, r->contender, r->ttl_ms, r->transition_ms, r->expect_win, &rep) == SIMBA__SQL_BUSY) {
            int64_t waited = now - r->sent_at;
            if (waited < simba__sql_busy_limit(s, r)) {
                s->next_try = now + s->retry_ms;
                return;
            }
            memset(&rep, 0, sizeof rep);
            rep.held_ms = -1;
            rep.rc = SIMBA_EBUSY;
            {
                char last[sizeof s->err];
                memcpy(last, s->err, sizeof last);
                snprintf(s->err, sizeof s->err, "database locked, gave up after %lld ms (%.400s)",
                         (long long)waited, last);
            }
            rep.errmsg = s->err;
        }
        s->head = r->next_;
        if (!s->head) s->tail = NULL;
        r->next_ = NULL;
        simba_req_done(r, &rep);
    }
    s->next_try = INT64_MAX;
}

static simba_result simba__sql_submit(void *impl, simba_req *req) {
    simba__sql *s = (simba__sql *)impl;
    int64_t now;
    if (!s || !req || !req->mutex || simba_name_check(req->mutex) != SIMBA_OK) return SIMBA_EINVAL;
    switch (req->op) {
    case SIMBA_OP_ACQUIRE:
        if (req->ttl_ms <= 0 || req->ttl_ms > SIMBA_MAX_MS || req->transition_ms < 0 ||
            req->transition_ms > SIMBA_MAX_MS)
            return SIMBA_EINVAL;
        /* fall through */
    case SIMBA_OP_RELEASE:
        if (!req->contender || simba_id_check(req->contender) != SIMBA_OK) return SIMBA_EINVAL;
        break;
    case SIMBA_OP_READ:
        break;
    default:
        return SIMBA_EINVAL;
    }
    req->next_ = NULL;
    if (s->tail) s->tail->next_ = req;
    else s->head = req;
    s->tail = req;
    now = simba_now(s->loop);
    /* Behind a request that waits for the lock, a new one waits its turn (order). */
    if (s->head == req || now >= s->next_try) simba__sql_drain(s, now);
    return SIMBA_OK;
}

static void simba__sql_process(void *impl, const struct pollfd *ready, int n, int64_t now) {
    simba__sql *s = (simba__sql *)impl;
    (void)ready;
    (void)n;
    if (s->head && now >= s->next_try) simba__sql_drain(s, now);
}

static int64_t simba__sql_deadline(void *impl) {
    simba__sql *s = (simba__sql *)impl;
    return s->head ? s->next_try : INT64_MAX;
}

static void simba__sql_close(simba__sql *s) {
    int i;
    for (i = 0; i < SIMBA__SQL_NSTMT; i++) {
        if (s->st[i]) sqlite3_finalize(s->st[i]);
        s->st[i] = NULL;
    }
    if (s->db) sqlite3_close(s->db);
    s->db = NULL;
    s->magic = 0;
    simba_free(s->loop, s);
}

static void simba__sql_destroy(void *impl) {
    simba__sql *s = (simba__sql *)impl;
    while (s->head) {
        simba_req *r = s->head;
        simba_reply rep;
        s->head = r->next_;
        r->next_ = NULL;
        memset(&rep, 0, sizeof rep);
        rep.held_ms = -1;
        rep.rc = SIMBA_ECLOSED;
        simba_req_done(r, &rep);
    }
    s->tail = NULL;
    simba__sql_close(s);
}

static const simba_backend_vt simba__sql_vt = {
    "sql",
    simba__sql_submit,
    NULL, /* no descriptors: every request completes in submit() or at a deadline */
    simba__sql_process,
    simba__sql_deadline,
    NULL,
    NULL,
    simba__sql_destroy,
};

static void simba__sql_errout(const simba_sql_desc *desc, const char *msg) {
    if (desc && desc->errbuf && desc->errbuf_cap > 0) snprintf(desc->errbuf, desc->errbuf_cap, "%s", msg);
}

SIMBA_API simba_result simba_sql_open(simba_loop *loop, const simba_sql_desc *desc, simba_backend **out) {
    simba__sql *s;
    const char *table;
    int rc;
    simba_result r;
    if (out) *out = NULL;
    if (desc) simba__sql_errout(desc, "");
    if (!loop || !desc || !out) return SIMBA_EINVAL;
    if (!desc->path || !desc->path[0]) {
        simba__sql_errout(desc, "simba_sql_open: no path");
        return SIMBA_EINVAL;
    }
    table = desc->table && desc->table[0] ? desc->table : "simba_mutex";
    if (!simba__sql_table_ok(table)) {
        simba__sql_errout(desc, "simba_sql_open: bad table name");
        return SIMBA_EINVAL;
    }
    if (desc->busy_retry_ms < 0 || desc->busy_retry_ms > SIMBA_MAX_MS || desc->busy_max_ms < 0 ||
        desc->busy_max_ms > SIMBA_MAX_MS)
        return SIMBA_EINVAL;
    s = (simba__sql *)simba_alloc(loop, sizeof *s);
    if (!s) return SIMBA_ENOMEM;
    memset(s, 0, sizeof *s);
    s->magic = SIMBA__SQL_MAGIC;
    s->loop = loop;
    s->text = &simba__sqlite_text;
    memcpy(s->table, table, strlen(table) + 1);
    s->retry_ms = desc->busy_retry_ms > 0 ? desc->busy_retry_ms : 5;
    s->busy_max_ms = desc->busy_max_ms;
    s->next_try = INT64_MAX;
    /* [sqlite] NOMUTEX: a loop is single-threaded, so the connection needs no lock of its own. */
    rc = sqlite3_open_v2(desc->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_extended_result_codes(s->db, 1);
        rc = sqlite3_busy_timeout(s->db, 0);
    }
    if (rc == SQLITE_OK) {
        rc = simba__sql_setup(s);
        /* Locked by someone else right now: the first request finishes the setup. */
        if (simba__sql_is_busy(rc)) rc = SQLITE_OK;
    } else {
        simba__sql_seterr(s, "open", rc);
    }
    if (rc != SQLITE_OK) {
        char msg[sizeof s->err + 64];
        snprintf(msg, sizeof msg, "simba_sql_open(%s): %s", desc->path, s->err);
        simba_log(loop, SIMBA_LOG_ERROR, "%s", msg);
        simba__sql_errout(desc, msg);
        simba__sql_close(s);
        return SIMBA_EBACKEND;
    }
    r = simba_backend_new(loop, &simba__sql_vt, s, &s->be);
    if (r != SIMBA_OK) {
        simba__sql_close(s);
        return r;
    }
    *out = s->be;
    return SIMBA_OK;
}

SIMBA_API simba_result simba_sql_read(simba_backend *be, const char *mutex, simba_reply *out, char *owner_buf, size_t cap) {
    simba__sql *s;
    simba_reply rep;
    size_t n;
    if (!be || !out || !owner_buf || cap == 0 || !mutex || simba_name_check(mutex) != SIMBA_OK) return SIMBA_EINVAL;
    if (simba_backend_vt_get(be) != &simba__sql_vt) return SIMBA_EINVAL; /* not a SQL backend */
    s = (simba__sql *)simba_backend_impl(be);
    if (!s || s->magic != SIMBA__SQL_MAGIC) return SIMBA_EINVAL;
    if (simba__sql_exec(s, SIMBA_OP_READ, mutex, "", 0, 0, 0, &rep) == SIMBA__SQL_BUSY) return SIMBA_EBUSY;
    *out = rep;
    owner_buf[0] = 0;
    out->owner = owner_buf;
    if (rep.rc != SIMBA_OK) return rep.rc;
    n = strlen(s->owner);
    if (n >= cap) return SIMBA_EINVAL;
    memcpy(owner_buf, s->owner, n + 1);
    return SIMBA_OK;
}

#endif /* SIMBA_SQL_IMPLEMENTATION_DONE */
#endif /* SIMBA_IMPLEMENTATION */

/*
 * MIT License
 *
 * Copyright (c) 2026 the simba authors
 *
 * Permission is hereby granted, free of charge, to any person obtaining a copy of this
 * software and associated documentation files (the "Software"), to deal in the Software
 * without restriction, including without limitation the rights to use, copy, modify, merge,
 * publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
 * to whom the Software is furnished to do so, subject to the following conditions:
 *
 * The above copyright notice and this permission notice shall be included in all copies or
 * substantial portions of the Software.
 *
 * THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
 * INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR
 * PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
 * FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
 * OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
 * DEALINGS IN THE SOFTWARE.
 */
