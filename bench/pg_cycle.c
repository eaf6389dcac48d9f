/* pg_cycle.c -- PostgreSQL backend costs next to the raw statement round trip, one run.
 *
 *   pg_cycle [SECONDS_PER_MEASURE (default 3)] [PORT (default $SIMBA_PG_PORT or 5440)] [MUTEXES]
 *
 * raw statement    one blocking libpq client (PQexecParams) calling the acquire function as
 *                  a renewal: the floor cost of one statement round trip from one client
 * backend          acquire + release straight through the backend (two statements per
 *                  cycle, driven by simba_poll): what the backend itself costs
 * locker (W1)      simba_locker_lock + simba_locker_unlock through the core: what an
 *                  application sees. Target: >= 0.85 of half the raw statement rate.
 * W4 (MUTEXES > 0)  one loop and backend own MUTEXES mutexes at ttl 10 s / transition 5 s;
 *                  this process's CPU (user + system) over 30 s of renewals, in % of a core
 *                  (target <= 2 % for 10,000)
 * Server: 127.0.0.1:PORT, user postgres, password simba (scripts/pg-start.sh).
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_pg.h"

#include <poll.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}
static int die(const char *what, const char *msg) {
    fprintf(stderr, "pg_cycle: %s: %s\n", what, msg);
    return 1;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, long n, double p) {
    long i;
    if (n <= 0) return 0;
    i = (long)(p * (double)(n - 1) + 0.5);
    return v[i];
}
static void drive(simba_loop *loop, int max_ms) {
    struct pollfd p[8];
    int cnt = simba_fds(loop, p, 8);
    if (cnt < 0 || cnt > 8) cnt = 0;
    (void)poll(p, (nfds_t)cnt, max_ms);
    (void)simba_poll(loop);
}
static int cycle_req(simba_loop *loop, simba_backend *be, simba_req *req, simba_op op) {
    double end = now_us() + 5e6;
    memset(req, 0, sizeof *req);
    req->op = op;
    req->mutex = "bench-raw";
    req->contender = "me";
    req->ttl_ms = 10000;
    req->transition_ms = 5000;
    req->live_ms = 16000;
    req->sent_at = simba_now(loop);
    /* No service behind it: the core only marks it done, which is all we time here. */
    if (simba__pg_vt.submit(simba_backend_impl(be), req) != SIMBA_OK) return -1;
    while (!req->done_ && now_us() < end) drive(loop, 5);
    return req->done_ ? 0 : -1;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 3.0;
    const char *pe = getenv("SIMBA_PG_PORT");
    int port = argc > 2 ? atoi(argv[2]) : (pe && *pe ? atoi(pe) : 5440);
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_pg_desc d;
    simba_req req;
    double t0, t, *lat, raw_rate, be_rate, lk_rate;
    long n, cap = 2000000;
    char table[64], ci[200], sql[300];
    PGconn *c;
    if (secs <= 0) secs = 3.0;
    lat = (double *)malloc((size_t)cap * sizeof *lat);
    if (!lat) return die("malloc", "out of memory");
    snprintf(table, sizeof table, "bench_%d", (int)getpid());
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return die("loop", "failed");
    memset(&d, 0, sizeof d);
    d.hostaddr = "127.0.0.1";
    d.port = port;
    d.user = "postgres";
    d.password = "simba";
    d.table = table;
    if (simba_pg_open(loop, &d, &be) != SIMBA_OK) return die("open", simba_loop_errmsg(loop));
    if (cycle_req(loop, be, &req, SIMBA_OP_READ) != 0) return die("first read", simba_backend_errmsg(be));
    printf("PostgreSQL on 127.0.0.1:%d, %.0f s per measure\n", port, secs);

    /* raw statement: the acquire function as a renewal, one blocking client */
    snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres", port);
    c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK) return die("raw connect", PQerrorMessage(c));
    snprintf(sql, sizeof sql, "SELECT " SIMBA__PG_COLS " FROM \"%s_acq\"('bench-rawstmt', 'me', 10000, 5000, 16000, true, 'none')", table);
    t0 = now_us();
    for (n = 0; (t = now_us()) - t0 < secs * 1e6 && n < cap; n++) {
        PGresult *r = PQexecParams(c, sql, 0, NULL, NULL, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) return die("raw statement", PQresultErrorMessage(r));
        PQclear(r);
        lat[n] = now_us() - t;
    }
    raw_rate = (double)n / ((t - t0) / 1e6);
    qsort(lat, (size_t)n, sizeof *lat, cmp_d);
    printf("  raw statement (blocking)     %8.0f stmts/s   p50 %6.1f us  p99 %6.1f us  (%ld)\n", raw_rate,
           pct(lat, n, 0.50), pct(lat, n, 0.99), n);
    PQfinish(c);

    /* backend: acquire + release through the vt */
    t0 = now_us();
    for (n = 0; (t = now_us()) - t0 < secs * 1e6 && n < cap; n++) {
        if (cycle_req(loop, be, &req, SIMBA_OP_ACQUIRE) != 0) return die("acquire", simba_backend_errmsg(be));
        if (cycle_req(loop, be, &req, SIMBA_OP_RELEASE) != 0) return die("release", simba_backend_errmsg(be));
        lat[n] = now_us() - t;
    }
    be_rate = (double)n / ((t - t0) / 1e6);
    qsort(lat, (size_t)n, sizeof *lat, cmp_d);
    printf("  backend acquire+release      %8.0f cycles/s  p50 %6.1f us  p99 %6.1f us  (%ld)\n", be_rate,
           pct(lat, n, 0.50), pct(lat, n, 0.99), n);

    /* W1: locker through the core */
    {
        simba_locker *lk = NULL;
        simba_locker_desc kd;
        memset(&kd, 0, sizeof kd);
        kd.mutex = "bench-locker";
        kd.contender_id = "me";
        kd.ttl_ms = 10000;
        kd.transition_ms = 5000;
        if (simba_locker_new(loop, be, &kd, &lk) != SIMBA_OK) return die("locker", "new failed");
        t0 = now_us();
        for (n = 0; (t = now_us()) - t0 < secs * 1e6 && n < cap; n++) {
            simba_result r = simba_locker_lock(lk, 5000);
            if (r != SIMBA_OK) return die("locker lock", simba_strerror(r));
            r = simba_locker_unlock(lk);
            if (r != SIMBA_OK) return die("locker unlock", simba_strerror(r));
            lat[n] = now_us() - t;
        }
        lk_rate = (double)n / ((t - t0) / 1e6);
        qsort(lat, (size_t)n, sizeof *lat, cmp_d);
        printf("  W1 locker lock+unlock (core) %8.0f cycles/s  p50 %6.1f us  p99 %6.1f us  (%ld)\n", lk_rate,
               pct(lat, n, 0.50), pct(lat, n, 0.99), n);
        simba_locker_free(lk);
    }
    printf("  W1 / (raw / 2) = %.2f (target >= 0.85); backend cycle / (raw / 2) = %.2f\n", lk_rate / (raw_rate / 2),
           be_rate / (raw_rate / 2));
    if (argc > 3 && atoi(argv[3]) > 0) {
        int nm = atoi(argv[3]), i, owned = 0;
        simba_service **sv = (simba_service **)calloc((size_t)nm, sizeof *sv);
        struct rusage ru0, ru1;
        double w0, cpu;
        char m[32];
        if (!sv) return die("calloc", "out of memory");
        for (i = 0; i < nm; i++) {
            simba_contend_desc cd;
            memset(&cd, 0, sizeof cd);
            snprintf(m, sizeof m, "w4-%d", i);
            cd.mutex = m;
            cd.contender_id = "me";
            cd.ttl_ms = 10000;
            cd.transition_ms = 5000;
            if (simba_contend(loop, be, &cd, &sv[i]) != SIMBA_OK || simba_start(sv[i]) != SIMBA_OK) return die("w4", "contend failed");
        }
        t0 = now_us();
        while (owned < nm && now_us() - t0 < 60e6) {
            simba_wait(loop, 50);
            for (owned = 0, i = 0; i < nm; i++) owned += simba_is_owner(sv[i]);
        }
        printf("  W4 %d mutexes owned after %.1f s\n", owned, (now_us() - t0) / 1e6);
        getrusage(RUSAGE_SELF, &ru0);
        w0 = now_us();
        while (now_us() - w0 < 30e6) simba_wait(loop, 1000);
        getrusage(RUSAGE_SELF, &ru1);
        cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6 +
              (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
        for (owned = 0, i = 0; i < nm; i++) owned += simba_is_owner(sv[i]);
        printf("  W4 %d mutexes at ttl 10 s: client CPU %.2f %% of a core over %.0f s; still owned %d\n", nm,
               100.0 * cpu / (now_us() - w0), (now_us() - w0) / 1e6, owned);
        for (i = 0; i < nm; i++) simba_service_free(sv[i]);
        free(sv);
    }
    simba_backend_free(be);
    simba_loop_free(loop);
    free(lat);
    return 0;
}
