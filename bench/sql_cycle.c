/* sql_cycle.c -- acquire+release cycles per second on SQLite, next to a raw UPDATE loop on
 * the same file, in one run.
 *
 *   sql_cycle [SECONDS_PER_MEASURE (default 2)] [DB_PATH (default: a temp file)]
 *
 * Each measure gets SECONDS in total, split into 5 interleaved rounds (raw, backend, locker,
 * raw, ...) so that load from elsewhere on the machine hits all three alike; the median
 * round of each is printed.
 *
 * raw     one autocommit "UPDATE ... SET version = version + 1 WHERE mutex = ?" per op,
 *         same connection settings as the backend (WAL, synchronous=NORMAL): the floor
 *         cost of one write transaction.
 * backend acquire + release through the backend's executor (two write transactions, each
 *         one UPDATE ... RETURNING for the acquire, one UPDATE for the release
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

#define ROUNDS 5

static double median(double *v) {
    int i, j;
    for (i = 1; i < ROUNDS; i++)
        for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return v[ROUNDS / 2];
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
    double t0, t, raw_rate, be_rate, lk_rate, raw[ROUNDS], bec[ROUNDS], lkc[ROUNDS];
    simba_locker *lk = NULL;
    simba_locker_desc kd;
    int round;
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
    memset(&kd, 0, sizeof kd);
    kd.mutex = "bench-locker";
    kd.contender_id = "me";
    kd.ttl_ms = 10000;
    kd.transition_ms = 5000;
    if (simba_locker_new(loop, be, &kd, &lk) != SIMBA_OK) return die("locker", "new failed");

    /* Interleaved rounds, so that load from elsewhere hits all three alike; medians. */
    for (round = 0; round < ROUNDS; round++) {
        double slice = secs / ROUNDS;
        simba__sql *s = (simba__sql *)simba_backend_impl(be);
        t0 = now_s();
        for (n = 0; (t = now_s()) - t0 < slice; n++) {
            if (sqlite3_step(st) != SQLITE_DONE) return die("raw step", sqlite3_errmsg(db));
            sqlite3_reset(st);
        }
        raw[round] = (double)n / (t - t0);

        t0 = now_s();
        for (n = 0; (t = now_s()) - t0 < slice; n++) {
            if (simba__sql_exec(s, SIMBA_OP_ACQUIRE, "bench", "me", 10000, 5000, 1, &rep) || rep.rc != SIMBA_OK ||
                strcmp(rep.owner, "me") != 0)
                return die("acquire", rep.errmsg ? rep.errmsg : "not acquired");
            if (simba__sql_exec(s, SIMBA_OP_RELEASE, "bench", "me", 0, 0, 0, &rep) || rep.rc != SIMBA_OK ||
                (rep.owner && rep.owner[0]))
                return die("release", rep.errmsg ? rep.errmsg : "not released");
        }
        bec[round] = (double)n / (t - t0);

        t0 = now_s();
        for (n = 0; (t = now_s()) - t0 < slice; n++) {
            simba_result r = simba_locker_lock(lk, 5000);
            if (r != SIMBA_OK) return die("locker lock", simba_strerror(r));
            r = simba_locker_unlock(lk);
            if (r != SIMBA_OK) return die("locker unlock", simba_strerror(r));
        }
        lkc[round] = (double)n / (t - t0);
    }
    simba_locker_free(lk);
    sqlite3_finalize(st);
    sqlite3_close(db);
    raw_rate = median(raw);
    be_rate = median(bec);
    lk_rate = median(lkc);

    printf("sql_cycle: sqlite %s, %s, %.1f s per measure in %d interleaved rounds, medians\n", sqlite3_libversion(),
           tmp ? "temp file" : path, secs, ROUNDS);
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
