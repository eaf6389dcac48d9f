/* fenced_sqlite.c -- a fenced write on SQLite: the protected data lives in the lock's own
 * database file, and a write commits only while this process's fence holds a live lease.
 *
 *     ./fenced_sqlite [DB]        (default: fenced.db)
 *
 * It locks the mutex "orders", then adds rows to the application's table orders, each in
 * one transaction: BEGIN IMMEDIATE, simba_sql_check_fence, INSERT, COMMIT. The write lock
 * that BEGIN IMMEDIATE takes keeps every grant out until the COMMIT, so a write either lands
 * before any later owner is granted or not at all, however long this process pauses between
 * "I hold the lock" and its write. After the unlock, a write with the old fence is refused
 * (SIMBA_EFENCE, with the reason in words) and nothing is written. Exit 0 when all of that held.
 */
#define SIMBA_IMPLEMENTATION
#include "simba_sql.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* One order, written only if fence still holds the lock: SIMBA_OK, SIMBA_EFENCE, or another error. */
static simba_result add_order(sqlite3 *db, uint64_t fence, const char *item) {
    char err[256];
    sqlite3_stmt *st = NULL;
    simba_result rc;
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return SIMBA_EBUSY;
    rc = simba_sql_check_fence(db, NULL, "orders", fence, err, sizeof err);
    if (rc == SIMBA_OK) {
        if (sqlite3_prepare_v2(db, "INSERT INTO orders (item, fence) VALUES (?1, ?2)", -1, &st, NULL) != SQLITE_OK ||
            sqlite3_bind_text(st, 1, item, -1, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_bind_int64(st, 2, (sqlite3_int64)fence) != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
            rc = SIMBA_EBACKEND;
        sqlite3_finalize(st);
    } else {
        fprintf(stderr, "write of %s refused: %s\n", item, err);
    }
    sqlite3_exec(db, rc == SIMBA_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "fenced.db";
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_locker *lk = NULL;
    simba_sql_desc sd;
    simba_locker_desc ld;
    sqlite3 *db = NULL;
    uint64_t fence;
    int i, ok = 1;
    char item[32];

    memset(&sd, 0, sizeof sd);
    memset(&ld, 0, sizeof ld);
    sd.path = path;
    ld.mutex = "orders";
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || simba_sql_open(loop, &sd, &be) != SIMBA_OK ||
        simba_locker_new(loop, be, &ld, &lk) != SIMBA_OK) {
        fprintf(stderr, "setup: %s\n", loop ? simba_loop_errmsg(loop) : "no loop");
        return 1;
    }
    /* the application's connection and data, in the lock's own file */
    if (sqlite3_open(path, &db) != SQLITE_OK || sqlite3_busy_timeout(db, 2000) != SQLITE_OK ||
        sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, fence INTEGER)",
                     NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
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
        if (add_order(db, fence, item) != SIMBA_OK) ok = 0;
    }
    printf("wrote 3 orders under fence %llu\n", (unsigned long long)fence);
    simba_locker_unlock_wait(lk, 2000);
    /* a process that still believes it holds the lock: its write is refused */
    if (add_order(db, fence, "late") != SIMBA_EFENCE) ok = 0;
    printf("%s\n", ok ? "the write after the unlock was refused: ok" : "FAILED");
    sqlite3_close(db);
    simba_locker_free(lk);
    simba_loop_free(loop);
    return ok ? 0 : 1;
}
