/* sql_cycle.c -- acquire+release cycles per second on SQLite, next to a raw UPDATE loop on
 * the same file, in one run.
 *
 *   sql_cycle [SECONDS_PER_MEASURE (default 2)] [DB_PATH (default: a temp file)]
 *
 * raw     one autocommit "UPDATE ... SET version = version + 1 WHERE mutex = ?" per op,
 *         same connection settings as the backend (WAL, synchronous=NORMAL): the floor
 *         cost of one write transaction.
 * backend acquire + release through the backend's executor (two write transactions, each
 *         BEGIN IMMEDIATE / INSERT OR IGNORE / UPDATE / SELECT / COMMIT or the release
 *         equivalent): what the SQL itself costs.
 * locker  simba_locker_lock + simba_locker_unlock through the core on the same backend:
 *         what an application sees, including the loop and the service state machine.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int die(const char *what, const char *msg) {
    fprintf(stderr, "sql_cycle: %s: %s\n", what, msg);
    return 1;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    char dir[256], path[300];
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_sql_desc d;
    simba_loop_desc ld;
    simba_reply rep;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    double t0, t, raw_rate, be_rate, lk_rate;
    long n;
    char err[512];
    int tmp = argc <= 2;

    if (secs <= 0) secs = 2.0;
    if (tmp) {
        snprintf(dir, sizeof dir, "%s/simba_bench_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir)) return die("mkdtemp", "failed");
        snprintf(path, sizeof path, "%s/bench.db", dir);
    } else {
        snprintf(path, sizeof path, "%s", argv[2]);
    }

    memset(&ld, 0, sizeof ld);
    if (simba_loop_new(&ld, &loop) != SIMBA_OK) return die("loop", "failed");
    memset(&d, 0, sizeof d);
    d.path = path;
    d.errbuf = err;
    d.errbuf_cap = sizeof err;
    if (simba_sql_open(loop, &d, &be) != SIMBA_OK) return die("open", err);

    /* raw: a second connection with the backend's settings */
    if (sqlite3_open(path, &db) != SQLITE_OK) return die("raw open", sqlite3_errmsg(db));
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, NULL);
    sqlite3_exec(db, "INSERT OR IGNORE INTO simba_mutex (mutex) VALUES ('raw')", NULL, NULL, NULL);
    if (sqlite3_prepare_v2(db, "UPDATE simba_mutex SET version = version + 1 WHERE mutex = ?1", -1, &st, NULL) !=
        SQLITE_OK)
        return die("raw prepare", sqlite3_errmsg(db));
    sqlite3_bind_text(st, 1, "raw", -1, SQLITE_STATIC);
    t0 = now_s();
    for (n = 0; (t = now_s()) - t0 < secs; n++) {
        if (sqlite3_step(st) != SQLITE_DONE) return die("raw step", sqlite3_errmsg(db));
        sqlite3_reset(st);
    }
    raw_rate = (double)n / (t - t0);
    sqlite3_finalize(st);
    sqlite3_close(db);

    /* backend executor: acquire + release */
    t0 = now_s();
    for (n = 0; (t = now_s()) - t0 < secs; n++) {
        simba__sql *s = (simba__sql *)simba_backend_impl(be);
        if (simba__sql_exec(s, SIMBA_OP_ACQUIRE, "bench", "me", 10000, 5000, &rep) || rep.rc != SIMBA_OK ||
            strcmp(rep.owner, "me") != 0)
            return die("acquire", rep.errmsg ? rep.errmsg : "not acquired");
        if (simba__sql_exec(s, SIMBA_OP_RELEASE, "bench", "me", 0, 0, &rep) || rep.rc != SIMBA_OK || rep.owner[0])
            return die("release", rep.errmsg ? rep.errmsg : "not released");
    }
    be_rate = (double)n / (t - t0);

    /* through the core */
    {
        simba_locker *lk = NULL;
        simba_locker_desc kd;
        memset(&kd, 0, sizeof kd);
        kd.mutex = "bench-locker";
        kd.contender_id = "me";
        kd.ttl_ms = 10000;
        kd.transition_ms = 5000;
        if (simba_locker_new(loop, be, &kd, &lk) != SIMBA_OK) return die("locker", "new failed");
        t0 = now_s();
        for (n = 0; (t = now_s()) - t0 < secs; n++) {
            simba_result r = simba_locker_lock(lk, 5000);
            if (r != SIMBA_OK) return die("locker lock", simba_strerror(r));
            r = simba_locker_unlock(lk);
            if (r != SIMBA_OK) return die("locker unlock", simba_strerror(r));
        }
        lk_rate = (double)n / (t - t0);
        simba_locker_free(lk);
    }

    printf("sql_cycle: sqlite %s, %s, %.1f s per measure\n", sqlite3_libversion(), tmp ? "temp file" : path, secs);
    printf("  raw UPDATE (autocommit)        %9.0f ops/s\n", raw_rate);
    printf("  backend acquire+release        %9.0f cycles/s  (one cycle costs %.1f raw UPDATEs)\n", be_rate,
           raw_rate / be_rate);
    printf("  locker lock+unlock (core)      %9.0f cycles/s  (one cycle costs %.1f raw UPDATEs)\n", lk_rate,
           raw_rate / lk_rate);
    simba_loop_free(loop);
    if (tmp) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "sql_cycle: could not remove %s\n", dir);
    }
    return 0;
}
