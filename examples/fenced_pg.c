/* fenced_pg.c -- a fenced write on PostgreSQL: the protected data lives in the lock's own
 * database, and a write commits only while this process's fence holds a live lease.
 *
 *     ./fenced_pg 'hostaddr=127.0.0.1 port=5432 user=app password=secret dbname=app'
 *
 * It locks the mutex "orders", then adds rows to the application's table orders, each in one
 * transaction on a connection of its own: BEGIN, simba_pg_check_fence (the SQL function
 * simba_check_fence, which share-locks the mutex's row: no grant commits before this
 * transaction ends), INSERT, COMMIT. After the unlock, a write with the old fence is refused
 * (SIMBA_EFENCE, the server's words in errbuf; the transaction is rolled back) and nothing
 * is written. The same from a shell:
 *     psql -c "BEGIN; SELECT simba_check_fence('orders', $SIMBA_FENCE); INSERT ...; COMMIT"
 * or, in autocommit, with the check inside the write's own statement (never a SELECT of it
 * alone before a separate write: its lock would end with that statement):
 *     psql -c "INSERT INTO orders SELECT ... WHERE simba_check_fence('orders', $SIMBA_FENCE)"
 * Exit 0 when all of that held. The backend needs a numeric hostaddr (it never resolves).
 */
#define SIMBA_IMPLEMENTATION
#include "simba_pg.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

static int exec_ok(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok) fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* One order, written only if fence still holds the lock: SIMBA_OK, SIMBA_EFENCE, or another error. */
static simba_result add_order(PGconn *c, uint64_t fence, const char *item) {
    char err[512], fs[24];
    const char *vals[2];
    simba_result rc;
    PGresult *r;
    if (!exec_ok(c, "BEGIN")) return SIMBA_EBACKEND;
    rc = simba_pg_check_fence(c, NULL, NULL, "orders", fence, err, sizeof err);
    if (rc == SIMBA_OK) {
        snprintf(fs, sizeof fs, "%llu", (unsigned long long)fence);
        vals[0] = item;
        vals[1] = fs;
        r = PQexecParams(c, "INSERT INTO orders (item, fence) VALUES ($1, $2)", 2, NULL, vals, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) rc = SIMBA_EBACKEND;
        PQclear(r);
    } else {
        fprintf(stderr, "write of %s refused: %s\n", item, err);
    }
    exec_ok(c, rc == SIMBA_OK ? "COMMIT" : "ROLLBACK");
    return rc;
}

int main(int argc, char **argv) {
    const char *conninfo = argc > 1 ? argv[1] : "hostaddr=127.0.0.1 port=5432";
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_locker *lk = NULL;
    simba_pg_desc pd;
    simba_locker_desc ld;
    PGconn *app;
    uint64_t fence;
    int i, ok = 1;
    char item[32];

    memset(&pd, 0, sizeof pd);
    memset(&ld, 0, sizeof ld);
    pd.conninfo = conninfo;
    ld.mutex = "orders";
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || simba_pg_open(loop, &pd, &be) != SIMBA_OK ||
        simba_locker_new(loop, be, &ld, &lk) != SIMBA_OK) {
        fprintf(stderr, "setup: %s\n", loop ? simba_loop_errmsg(loop) : "no loop");
        return 1;
    }
    /* the application's own connection and data, in the lock's database */
    app = PQconnectdb(conninfo);
    if (PQstatus(app) != CONNECTION_OK || !exec_ok(app, "SET client_min_messages = warning") ||
        !exec_ok(app, "CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, item text, fence bigint)")) {
        fprintf(stderr, "connect: %s", PQerrorMessage(app));
        return 1;
    }
    if (simba_locker_lock(lk, 10000) != SIMBA_OK) {
        fprintf(stderr, "lock: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    fence = simba_locker_fence(lk);
    printf("holding \"orders\" with fence %llu\n", (unsigned long long)fence);
    for (i = 0; i < 3; i++) {
        snprintf(item, sizeof item, "item-%d", i);
        if (add_order(app, fence, item) != SIMBA_OK) ok = 0;
    }
    printf("wrote 3 orders under fence %llu\n", (unsigned long long)fence);
    simba_locker_unlock_wait(lk, 2000);
    /* a process that still believes it holds the lock: its write is refused */
    if (add_order(app, fence, "late") != SIMBA_EFENCE) ok = 0;
    printf("%s\n", ok ? "the write after the unlock was refused: ok" : "FAILED");
    PQfinish(app);
    simba_locker_free(lk);
    simba_loop_free(loop);
    return ok ? 0 : 1;
}
