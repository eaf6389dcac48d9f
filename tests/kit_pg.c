/* kit_pg.c -- the shared backend kit (tests/kit.c) on PostgreSQL.
 *
 * Every open() is a new backend with its own connection to the server on
 * 127.0.0.1:$SIMBA_PG_PORT (default 5440, started by scripts/pg-start.sh), as separate
 * processes would have. The table carries a per-run name so that leftovers of earlier runs
 * never interfere. A server that cannot be reached makes the cases fail (checked first).
 * mute: another session holds the table's ACCESS EXCLUSIVE lock in a transaction that does
 * not end: every statement of the backends waits for it, unanswered.
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

int main(int argc, char **argv) {
    kit_pg_cfg cfg;
    kit_backend kb;
    struct timespec ts;
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
    cfg_now = &cfg;
    return kit_run(&kb, argc, argv);
}
