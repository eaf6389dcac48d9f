/* fault_sqlhold.c -- holds a SQLite database file locked: BEGIN EXCLUSIVE, wait, ROLLBACK.
 *
 *   fault_sqlhold FILE HOLD_MS
 *
 * While it holds the lock every other connection gets SQLITE_BUSY (simba_sql retries from
 * the loop and backs off; it must never block the poll and never let a lease overrun).
 * Takes the lock within 2 s or exits 1; exit 0 after holding it HOLD_MS.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void nap(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    sqlite3 *db;
    long hold;
    char *err = NULL;
    int rc;
    if (argc != 3 || (hold = atol(argv[2])) < 0) {
        fprintf(stderr, "usage: fault_sqlhold FILE HOLD_MS\n");
        return 2;
    }
    if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "fault_sqlhold: open %s: %s\n", argv[1], sqlite3_errmsg(db));
        sqlite3_close(db);
        return 1;
    }
    sqlite3_busy_timeout(db, 2000); /* the deadline for taking the lock */
    rc = sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, &err);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "fault_sqlhold: BEGIN EXCLUSIVE: %s\n", err ? err : sqlite3_errstr(rc));
        sqlite3_free(err);
        sqlite3_close(db);
        return 1;
    }
    nap(hold); /* the fault itself: the lock is held this long */
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    return 0;
}
