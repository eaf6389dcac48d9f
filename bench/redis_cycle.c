/* redis_cycle.c -- Redis backend costs, next to redis-benchmark on the same server, one run.
 *
 *   redis_cycle [SECONDS_PER_MEASURE (default 3)] [PORT (default $SIMBA_REDIS_PORT or 6390)]
 *
 * redis-benchmark  redis-benchmark -p PORT -c 1 -n 100000 EVALSHA <read script sha> 1 <key>:
 *                  the floor cost of one script round trip from one client
 * backend          acquire + release straight through the backend (two EVALSHA round trips
 *                  per cycle, driven by simba_poll): what the backend itself costs
 * locker           simba_locker_lock + simba_locker_unlock through the core: what an
 *                  application sees
 * handoff          4 contenders, each its own loop + backend (own connections) in this
 *                  process; the owner holds ~5 ms and stops; gap = its stop call to the next
 *                  owner's on_acquired (pushed wake-up; every timer is >= 16 s away)
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"

#include <poll.h>
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
    fprintf(stderr, "redis_cycle: %s: %s\n", what, msg);
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

/* One poll(2) over every loop's descriptors (up to max_ms), then simba_poll on each. */
static void drive(simba_loop **loops, int n, int max_ms) {
    struct pollfd p[32];
    int cnt = 0, i, wait = max_ms;
    for (i = 0; i < n; i++) {
        int k = simba_fds(loops[i], p + cnt, 32 - cnt);
        if (k > 32 - cnt) k = 32 - cnt;
        if (k > 0) cnt += k;
    }
    if (poll(p, (nfds_t)cnt, wait) < 0) cnt = 0;
    for (i = 0; i < n; i++) {
        int64_t w = simba_poll(loops[i]);
        (void)w;
    }
}

static int cycle_req(simba_loop *loop, simba_backend *be, simba_req *req, simba_op op) {
    double end = now_us() + 5e6;
    memset(req, 0, sizeof *req);
    req->op = op;
    req->mutex = "bench-raw";
    req->contender = "me";
    req->ttl_ms = 10000;
    req->transition_ms = 5000;
    req->sent_at = simba_now(loop);
    /* No service behind it: the core only marks it done, which is all we time here. */
    if (simba__redis_vt.submit(simba_backend_impl(be), req) != SIMBA_OK) return -1;
    while (!req->done_ && now_us() < end) drive(&loop, 1, 5);
    return req->done_ ? 0 : -1;
}

/* ---- handoff ---- */
typedef struct hsvc {
    simba_service *s;
    double acq_us;
    int owner, restart;
} hsvc;
static double last_stop_us;
static double *gaps;
static long ngaps, capgaps;
static void h_acq(simba_service *s, const simba_state *st, void *u) {
    hsvc *h = (hsvc *)u;
    (void)s;
    (void)st;
    h->owner = 1;
    h->acq_us = now_us();
    if (last_stop_us > 0 && ngaps < capgaps) gaps[ngaps++] = h->acq_us - last_stop_us;
    if (getenv("BENCH_DEBUG") && last_stop_us > 0 && h->acq_us - last_stop_us > 2000)
        fprintf(stderr, "slow handoff %.0f us to %s\n", h->acq_us - last_stop_us, simba_service_contender_id(s));
    last_stop_us = 0;
}
static void h_rel(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    (void)st;
    ((hsvc *)u)->owner = 0;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 3.0;
    const char *pe = getenv("SIMBA_REDIS_PORT");
    int port = argc > 2 ? atoi(argv[2]) : (pe && *pe ? atoi(pe) : 6390);
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_redis_desc d;
    simba_req req;
    double t0, t, *lat, rb_rate = 0, be_rate, lk_rate, rb_p50 = 0;
    long n, cap = 2000000;
    char sha[41], cmd[512], line[512];
    FILE *f;
    if (secs <= 0) secs = 3.0;
    lat = (double *)malloc((size_t)cap * sizeof *lat);
    if (!lat) return die("malloc", "out of memory");
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return die("loop", "failed");
    memset(&d, 0, sizeof d);
    d.port = port;
    d.prefix = "bench:";
    if (simba_redis_open(loop, &d, &be) != SIMBA_OK) return die("open", "failed");

    /* backend: acquire + release, straight through the vt */
    if (cycle_req(loop, be, &req, SIMBA_OP_READ) != 0) return die("connect", simba_backend_errmsg(be));
    memcpy(sha, ((simba__redis *)simba_backend_impl(be))->sha[SIMBA__RS_READ], sizeof sha);
    t0 = now_us();
    for (n = 0; (t = now_us()) - t0 < secs * 1e6 && n < cap; n++) {
        if (cycle_req(loop, be, &req, SIMBA_OP_ACQUIRE) || cycle_req(loop, be, &req, SIMBA_OP_RELEASE))
            return die("cycle", simba_backend_errmsg(be));
        lat[n] = now_us() - t;
    }
    be_rate = (double)n / ((t - t0) / 1e6);
    qsort(lat, (size_t)n, sizeof *lat, cmp_d);
    printf("redis_cycle: 127.0.0.1:%d, %.1f s per measure\n", port, secs);
    printf("  backend acquire+release      %8.0f cycles/s  p50 %6.1f us  p99 %6.1f us  (%ld cycles)\n", be_rate,
           pct(lat, n, 0.50), pct(lat, n, 0.99), n);

    /* locker through the core */
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
            lat[n] = now_us() - t; /* lock+unlock; the release's round trip lands in the next lock */
        }
        lk_rate = (double)n / ((t - t0) / 1e6);
        qsort(lat, (size_t)n, sizeof *lat, cmp_d);
        printf("  locker lock+unlock (core)    %8.0f cycles/s  p50 %6.1f us  p99 %6.1f us  (%ld cycles)\n", lk_rate,
               pct(lat, n, 0.50), pct(lat, n, 0.99), n);
        simba_locker_free(lk);
    }

    /* redis-benchmark on the same server, same run */
    snprintf(cmd, sizeof cmd,
             "redis-benchmark -p %d -c 1 -n 100000 -q EVALSHA %s 1 bench:{rb}:owner 2>/dev/null", port, sha);
    f = popen(cmd, "r");
    if (f) {
        /* -q prints progress separated by \r, then "...: N requests per second, p50=X msec" */
        while (fgets(line, sizeof line, f)) {
            char *seg = strrchr(line, '\r') ? strrchr(line, '\r') + 1 : line;
            char *p = strstr(seg, " requests per second");
            char *q = strstr(seg, "p50=");
            if (p) {
                while (p > seg && p[-1] != ' ') p--;
                rb_rate = atof(p);
            }
            if (q) rb_p50 = atof(q + 4) * 1000.0;
        }
        pclose(f);
    }
    if (rb_rate > 0)
        printf("  redis-benchmark EVALSHA 1 key %8.0f req/s     p50 %6.1f us  (-c 1 -n 100000, read script)\n",
               rb_rate, rb_p50);
    else
        printf("  redis-benchmark              not available (%s)\n", cmd);
    if (rb_rate > 0)
        printf("  one backend cycle = %.2f script round trips; one locker cycle = %.2f\n", rb_rate / be_rate,
               rb_rate / lk_rate);
    simba_loop_free(loop);

    /* handoff gap with 4 contenders */
    {
        simba_loop *loops[4];
        simba_backend *bes[4];
        hsvc hs[4];
        int i;
        capgaps = 100000;
        gaps = (double *)malloc((size_t)capgaps * sizeof *gaps);
        if (!gaps) return die("malloc", "out of memory");
        memset(hs, 0, sizeof hs);
        for (i = 0; i < 4; i++) {
            simba_contend_desc cd;
            char id[16];
            if (simba_loop_new(NULL, &loops[i]) != SIMBA_OK || simba_redis_open(loops[i], &d, &bes[i]) != SIMBA_OK)
                return die("handoff", "open failed");
            snprintf(id, sizeof id, "h%d", i);
            memset(&cd, 0, sizeof cd);
            cd.mutex = "bench-handoff";
            cd.contender_id = id;
            cd.ttl_ms = 10000;
            cd.transition_ms = 6000;
            cd.on_acquired = h_acq;
            cd.on_released = h_rel;
            cd.user_data = &hs[i];
            if (simba_contend(loops[i], bes[i], &cd, &hs[i].s) != SIMBA_OK || simba_start(hs[i].s) != SIMBA_OK)
                return die("handoff", "contend failed");
        }
        t0 = now_us();
        while (now_us() - t0 < secs * 1e6) {
            drive(loops, 4, 1);
            for (i = 0; i < 4; i++) {
                if (hs[i].owner && now_us() - hs[i].acq_us >= 5000) {
                    last_stop_us = now_us();
                    hs[i].owner = 0;
                    simba_stop(hs[i].s);
                    simba_poll(loops[i]); /* put the release on the wire now */
                    hs[i].restart = 1;
                }
                if (hs[i].restart && simba_service_status(hs[i].s) == SIMBA_INITIAL) {
                    hs[i].restart = 0;
                    simba_start(hs[i].s);
                }
            }
        }
        qsort(gaps, (size_t)ngaps, sizeof *gaps, cmp_d);
        printf("  handoff gap, 4 contenders    p50 %6.1f us  p99 %6.1f us  max %6.1f us  (%ld handoffs, hold 5 ms)\n",
               pct(gaps, ngaps, 0.50), pct(gaps, ngaps, 0.99), ngaps ? gaps[ngaps - 1] : 0.0, ngaps);
        for (i = 0; i < 4; i++) simba_loop_free(loops[i]);
        free(gaps);
    }
    free(lat);
    return 0;
}
