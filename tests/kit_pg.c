/* kit_pg.c -- the shared backend kit (tests/kit.c) on PostgreSQL.
 *
 * Every open() is a new backend with its own connection to the server on
 * 127.0.0.1:$SIMBA_PG_PORT (default 5440, started by scripts/pg-start.sh), as separate
 * processes would have. The table carries a per-run name so that leftovers of earlier runs
 * never interfere. A server that cannot be reached makes the cases fail (checked first).
 * mute: another session holds the table's ACCESS EXCLUSIVE lock in a transaction that does
 * not end: every statement of the backends waits for it, unanswered.
 * The fenced write is the application's own connection: BEGIN, simba_pg_check_fence, an
 * upsert into a table of its own in the same database, COMMIT (ROLLBACK when refused).
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_pg.h"
#include "kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct kit_pg_cfg {
    int port;
    char table[64];
    PGconn *app; /* the application's connection (fenced writes) */
} kit_pg_cfg;

static simba_result open_pg(simba_loop *loop, void *ctx, simba_backend **out) {
    kit_pg_cfg *cfg = (kit_pg_cfg *)ctx;
    simba_pg_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.hostaddr = "127.0.0.1";
    d.port = cfg->port;
    d.user = "postgres";
    d.password = "simba";
    d.dbname = "postgres";
    d.table = cfg->table;
    rc = simba_pg_open(loop, &d, out);
    if (rc != SIMBA_OK) fprintf(stderr, "kit_pg: open port %d: %s\n", cfg->port, simba_strerror(rc));
    return rc;
}

static kit_pg_cfg *cfg_now;
static PGconn *mute_conn;
static int muted_pid; /* the server session of the backend muted, 0: none known */

/* The whole table is locked (every backend's statements wait). mute(NULL, 0): the muted
   backend's process is gone; its statements already sent (a release) die with its server
   session, as a killed client's would once the server noticed, before the others go on. */
static void mute_pg(simba_backend *be, int on) {
    char ci[160], sql[160];
    PGresult *r = NULL;
    if (on && be && be->impl && ((simba__pg *)be->impl)->conn) muted_pid = PQbackendPID(((simba__pg *)be->impl)->conn);
    if (!on && !be && mute_conn && muted_pid > 0) {
        snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d, 5000)", muted_pid);
        PQclear(PQexec(mute_conn, sql));
    }
    if (!on) muted_pid = 0;
    if (on && !mute_conn) {
        snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres connect_timeout=2",
                 cfg_now->port);
        snprintf(sql, sizeof sql, "BEGIN; LOCK TABLE \"%s\" IN ACCESS EXCLUSIVE MODE", cfg_now->table);
        mute_conn = PQconnectdb(ci);
        if (PQstatus(mute_conn) == CONNECTION_OK) r = PQexec(mute_conn, sql);
        if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) fprintf(stderr, "kit_pg: mute: %s\n", PQerrorMessage(mute_conn));
        PQclear(r);
    } else if (!on && mute_conn) {
        PQclear(PQexec(mute_conn, "ROLLBACK"));
        PQfinish(mute_conn);
        mute_conn = NULL;
    }
}

/* Between cases: the server must still answer (a blocking check, test side only). */
static void between(void *ctx) {
    kit_pg_cfg *cfg = (kit_pg_cfg *)ctx;
    char ci[160];
    PGconn *c;
    PGresult *r = NULL;
    snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres connect_timeout=2",
             cfg->port);
    c = PQconnectdb(ci);
    if (PQstatus(c) == CONNECTION_OK) r = PQexec(c, "SELECT 1");
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "kit_pg: server on port %d does not answer: %s\n", cfg->port, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

/* One statement on the application's connection: 0, or -1 with err. */
static int app_exec(PGconn *c, const char *sql, int n, const char *const *vals, char *out, size_t cap, char *err,
                    size_t errcap) {
    PGresult *r = PQexecParams(c, sql, n, NULL, vals, NULL, NULL, 0);
    int ok = r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
    if (!ok) snprintf(err, errcap, "%s: %s", sql, PQerrorMessage(c));
    if (ok && out) snprintf(out, cap, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    return ok ? 0 : -1;
}

/* The application's connection, made once (blocking: test side), with its data table. */
static PGconn *app_conn(kit_pg_cfg *cfg, char *err, size_t errcap) {
    char ci[160], sql[200];
    if (cfg->app) return cfg->app;
    snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres connect_timeout=2",
             cfg->port);
    cfg->app = PQconnectdb(ci);
    snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS \"%s_app\" (name text, key text, value text, fence bigint,"
             " PRIMARY KEY (name, key))", cfg->table);
    if (PQstatus(cfg->app) != CONNECTION_OK || app_exec(cfg->app, "SET client_min_messages = warning", 0, NULL, NULL, 0, err, errcap) ||
        app_exec(cfg->app, sql, 0, NULL, NULL, 0, err, errcap)) {
        if (PQstatus(cfg->app) != CONNECTION_OK) snprintf(err, errcap, "app connection: %s", PQerrorMessage(cfg->app));
        PQfinish(cfg->app);
        cfg->app = NULL;
    }
    return cfg->app;
}

static simba_result fenced_write(simba_loop *loop, simba_backend *be, void *ctx, const char *name, uint64_t fence,
                                 const char *key, const char *value, char *err, size_t errcap) {
    kit_pg_cfg *cfg = (kit_pg_cfg *)ctx;
    PGconn *c = app_conn(cfg, err, errcap);
    char sql[240], fs[24];
    const char *vals[4];
    simba_result rc;
    char e2[200];
    (void)loop;
    (void)be;
    if (!c) return SIMBA_EBACKEND;
    if (app_exec(c, "BEGIN", 0, NULL, NULL, 0, err, errcap)) return SIMBA_EBACKEND;
    rc = simba_pg_check_fence(c, NULL, cfg->table, name, fence, err, errcap);
    if (rc == SIMBA_OK) {
        snprintf(sql, sizeof sql, "INSERT INTO \"%s_app\" VALUES ($1, $2, $3, $4) ON CONFLICT (name, key) DO UPDATE"
                 " SET value = EXCLUDED.value, fence = EXCLUDED.fence", cfg->table);
        snprintf(fs, sizeof fs, "%llu", (unsigned long long)fence);
        vals[0] = name;
        vals[1] = key;
        vals[2] = value;
        vals[3] = fs;
        if (app_exec(c, sql, 4, vals, NULL, 0, err, errcap)) rc = SIMBA_EBACKEND;
    }
    if (app_exec(c, rc == SIMBA_OK ? "COMMIT" : "ROLLBACK", 0, NULL, NULL, 0, e2, sizeof e2) && rc == SIMBA_OK) {
        snprintf(err, errcap, "%s", e2);
        rc = SIMBA_EBACKEND;
    }
    return rc;
}

static int fenced_read(simba_loop *loop, simba_backend *be, void *ctx, const char *name, const char *key, char *out,
                       size_t cap, char *err, size_t errcap) {
    kit_pg_cfg *cfg = (kit_pg_cfg *)ctx;
    PGconn *c = app_conn(cfg, err, errcap);
    char sql[160];
    const char *vals[2];
    (void)loop;
    (void)be;
    if (!c) return -1;
    snprintf(sql, sizeof sql, "SELECT value FROM \"%s_app\" WHERE name = $1 AND key = $2", cfg->table);
    vals[0] = name;
    vals[1] = key;
    return app_exec(c, sql, 2, vals, out, cap, err, errcap);
}

int main(int argc, char **argv) {
    kit_pg_cfg cfg;
    kit_backend kb;
    struct timespec ts;
    int rc;
    const char *e = getenv("SIMBA_PG_PORT");
    memset(&cfg, 0, sizeof cfg);
    cfg.port = e && *e ? atoi(e) : 5440;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(cfg.table, sizeof cfg.table, "kit_%d_%ld", (int)getpid(), (long)(ts.tv_nsec / 1000));
    between(&cfg);
    memset(&kb, 0, sizeof kb);
    kb.name = "postgres";
    kb.open = open_pg;
    kb.ctx = &cfg;
    kb.ttl_ms = 2000;
    kb.transition_ms = 1000;
    kb.between = between;
    kb.mute = mute_pg;
    kb.mute_all = 1;
    cfg_now = &cfg;
    kb.fenced_write = fenced_write;
    kb.fenced_read = fenced_read;
    rc = kit_run(&kb, argc, argv);
    PQfinish(cfg.app);
    return rc;
}
