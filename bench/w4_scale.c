/* w4_scale.c -- W4, scale: many mutexes in one process and one loop.
 *
 *   w4_scale --part steady --backend memory|sqlite [--mutexes 10000] [--secs 20]
 *            [--ttl-ms 10000] [--transition-ms 6000] [--sql FILE]
 *   w4_scale --part poll [--sizes 1000,10000,100000]
 *
 * steady: --mutexes mutexes, 2 contenders each (ids "a" and "b"), all services on one loop
 *   and one backend, started at once; the loop is driven like an application's (poll(2) on
 *   simba_fds() up to the delay simba_poll asked for, then simba_poll). Once every mutex has
 *   an owner, the measure window starts half a renewal period later and lasts --secs
 *   (default 20 s = 3 renewal periods at ttl 10 s, whose owners renew every ttl - ttl/3):
 *     CPU       getrusage(RUSAGE_SELF) user + system over the window / wall time of the
 *               window, in % of one core (everything the process did: simba and backend)
 *     memory    every allocation of the loop goes through a counting allocator given in
 *               simba_loop_desc (alloc/free); bytes per service = (live bytes in steady
 *               state - live bytes with the backend open and no service) / services.
 *               The memory store's own allocations (the "server") are counted apart
 *               (SIMBA_MALLOC/SIMBA_FREE are defined to counting functions here), and for
 *               SQLite sqlite3_memory_used() is reported (page cache etc.).
 *     poll      the longest single simba_poll call in the window.
 * poll: the cost of one simba_poll at 1k / 10k / 100k services (contenders on distinct
 *   mutexes of the memory backend, all owners), on an injected clock (loop and store) so that
 *   exactly the wanted timers are due; durations are real (CLOCK_MONOTONIC):
 *     idle      a poll with nothing due: p50 and p99 over 20,000 polls
 *     per due   the services were started at staggered injected times, so their renewals
 *               fall evenly over a 10 s window; the clock then advances so that about 100
 *               renewals are due per poll, through the whole window (every service renews
 *               once); per due event = total time of those polls / n, the median of 5 such
 *               passes (each renewal schedules the next one a window later). Each
 *               event is a complete renewal: timer pop, request through the memory store,
 *               completion, timer push.
 *   The heap makes a due event O(log n) and an idle poll O(1): from 1k to 100k services
 *   the idle poll should stay flat and the per-event cost grow by a small factor (log n and
 *   caches), far from the 100x of an O(n) scan. Verdicts: idle within 2x of the smallest
 *   case; per-event growth geometrically closer to the growth of log2 n than to that of n
 *   (ratio < sqrt(log2 growth x n growth)): a bigger heap and working set also cost cache
 *   misses, which is not what the O() is about.
 */
#include <stddef.h>
static void *store_alloc(size_t n);
static void store_free(void *p);
#define SIMBA_MALLOC(sz) store_alloc(sz)
#define SIMBA_FREE(p) store_free(p)
#define SIMBA_IMPLEMENTATION
#include "bench.h"

#include <math.h>

#define PROG "w4_scale"

/* ---- counting allocators --------------------------------------------------------------- */

typedef union hdr {
    size_t n;
    long double align; /* C99 has no max_align_t */
} hdr;

static long long store_live;
static void *store_alloc(size_t n) {
    hdr *h = (hdr *)malloc(sizeof(hdr) + n);
    if (!h) return NULL;
    h->n = n;
    store_live += (long long)n;
    return h + 1;
}
static void store_free(void *p) {
    hdr *h;
    if (!p) return;
    h = (hdr *)p - 1;
    store_live -= (long long)h->n;
    free(h);
}

static long long loop_live, loop_allocs;
static void *loop_alloc(void *u, size_t n) {
    hdr *h = (hdr *)malloc(sizeof(hdr) + n);
    (void)u;
    if (!h) return NULL;
    h->n = n;
    loop_live += (long long)n;
    loop_allocs++;
    return h + 1;
}
static void loop_free(void *u, void *p) {
    hdr *h;
    (void)u;
    if (!p) return;
    h = (hdr *)p - 1;
    loop_live -= (long long)h->n;
    free(h);
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- steady state ---------------------------------------------------------------------- */

static long owners;
static void on_acq(simba_service *s, const simba_state *st, void *u) {
    (void)s; (void)st; (void)u;
    owners++;
}
static void on_rel(simba_service *s, const simba_state *st, void *u) {
    (void)s; (void)st; (void)u;
    owners--;
}

static int steady(void) {
    const char *backend = b_opt("backend", "memory");
    long nm = (long)b_optf("mutexes", 10000), i, nsvc = 2 * nm, polls = 0;
    double secs = b_optf("secs", 20), ttl = b_optf("ttl-ms", 10000), transition = b_optf("transition-ms", 6000);
    double t, t_owned, w0, w1, c0, c1, maxpoll = 0, poll_us, renew_period_ms;
    long long live0, live_ss, store0 = 0, allocs0;
    simba_loop_desc ld;
    simba_loop *loop;
    simba_memstore *store = NULL;
    simba_backend *be;
    simba_service **svcs;
    simba_result rc;
    int64_t wait = 0;
    memset(&ld, 0, sizeof ld);
    ld.alloc = loop_alloc;
    ld.free = loop_free;
    if (simba_loop_new(&ld, &loop) != SIMBA_OK) b_die(PROG, "loop");
    if (strcmp(backend, "sqlite") == 0) {
        const char *path = b_opt("sql", "build/bench-sql/w4.db");
        char side[600];
        remove(path);
        snprintf(side, sizeof side, "%s-wal", path);
        remove(side);
        snprintf(side, sizeof side, "%s-shm", path);
        remove(side);
    }
    if ((rc = b_open(loop, backend, &store, &be)) != SIMBA_OK) b_die(PROG, "open %s: %s", backend, simba_strerror(rc));
    live0 = loop_live;
    store0 = store_live;
    svcs = (simba_service **)malloc((size_t)nsvc * sizeof *svcs);
    if (!svcs) b_die(PROG, "malloc");
    for (i = 0; i < nsvc; i++) {
        simba_contend_desc cd;
        char name[32];
        snprintf(name, sizeof name, "w4-m%06ld", i / 2);
        memset(&cd, 0, sizeof cd);
        cd.mutex = name;
        cd.contender_id = i % 2 ? "b" : "a";
        cd.ttl_ms = (int64_t)ttl;
        cd.transition_ms = (int64_t)transition;
        cd.on_acquired = on_acq;
        cd.on_released = on_rel;
        if (simba_contend(loop, be, &cd, &svcs[i]) != SIMBA_OK || simba_start(svcs[i]) != SIMBA_OK)
            b_die(PROG, "contend %ld: %s", i, simba_loop_errmsg(loop));
    }
    t = b_now_us();
    while (owners < nm) {
        if (b_now_us() - t > 120e6) b_die(PROG, "%s: only %ld of %ld mutexes owned after 120 s", backend, owners, nm);
        wait = b_tick(loop, wait, &poll_us);
        if (wait < 0) b_die(PROG, "simba_poll: %s", simba_strerror((int)wait));
    }
    t_owned = b_now_us();
    fprintf(stderr, "%s %s: %ld mutexes owned after %.2f s\n", PROG, backend, nm, (t_owned - t) / 1e6);
    /* Owners renew every ttl - margin (margin = ttl / 3): start half a period later so that
       a window of whole periods holds each renewal burst exactly once. */
    renew_period_ms = ttl - ttl / 3;
    w0 = t_owned + renew_period_ms * 500;
    while ((t = b_now_us()) < w0) {
        int64_t cap = (int64_t)((w0 - t) / 1000) + 1;
        wait = b_tick(loop, wait < cap ? wait : cap, &poll_us);
    }
    c0 = cpu_s();
    allocs0 = loop_allocs;
    w0 = b_now_us();
    w1 = w0 + secs * 1e6;
    while ((t = b_now_us()) < w1) {
        int64_t cap = (int64_t)((w1 - t) / 1000) + 1;
        wait = b_tick(loop, wait < cap ? wait : cap, &poll_us);
        if (wait < 0) b_die(PROG, "simba_poll: %s", simba_strerror((int)wait));
        if (poll_us > maxpoll) maxpoll = poll_us;
        polls++;
    }
    c1 = cpu_s();
    w1 = b_now_us();
    live_ss = loop_live;
    {
        double cpu_pct = 100 * (c1 - c0) / ((w1 - w0) / 1e6);
        double per_svc = (double)(live_ss - live0) / (double)nsvc;
        const char *w = b_fmt("W4 scale (%ld mutexes × 2, one loop)", nm);
        const char *timing = b_fmt("ttl %.0f / transition %.0f ms, %.0f s window", ttl, transition, (w1 - w0) / 1e6);
        b_row(w, backend, "steady-state CPU", b_fmt("%.2f %% of a core", cpu_pct), timing, "", "≤ 2 %",
              b_verdict_max(cpu_pct, 2, "pts"));
        b_row(w, backend, "core memory per service (loop allocator)", b_fmt("%.0f B", per_svc),
              strcmp(backend, "memory") == 0
                  ? b_fmt("store (server side): %.0f B per mutex", (double)(store_live - store0) / (double)nm)
                  : b_fmt("sqlite3_memory_used: %s B in all", b_num((double)sqlite3_memory_used())),
              "", "≤ 1 KiB", b_verdict_max(per_svc, 1024, "B"));
        b_row(w, backend, "longest simba_poll in the window", b_fmt("%.2f ms", maxpoll / 1000),
              b_fmt("%ld polls; %lld loop allocations in the window", polls, loop_allocs - allocs0), "", "", "");
    }
    simba_loop_free(loop);
    if (store) simba_memstore_free(store);
    free(svcs);
    return 0;
}

/* ---- poll cost -------------------------------------------------------------------------- */

#define PASSES 5
static int64_t fake_ms;
static int64_t fake_now(void *u) {
    (void)u;
    return fake_ms;
}

static void poll_cost(long n, double *idle_p50, double *idle_p99, double *per_event, long *events) {
    const int64_t T0 = 1000000, W = 10000, TTL = 30000, K = 100;
    simba_loop_desc ld;
    simba_memstore_desc md;
    simba_loop *loop;
    simba_memstore *store;
    simba_backend *be;
    long i, idle_n = 20000, renewed = 0;
    int64_t step, end, start;
    double pass[PASSES];
    int k;
    b_samples idle = {0};
    memset(&ld, 0, sizeof ld);
    ld.now_ms = fake_now;
    memset(&md, 0, sizeof md);
    md.now_ms = fake_now;
    fake_ms = T0;
    if (simba_loop_new(&ld, &loop) != SIMBA_OK || simba_memstore_new(&md, &store) != SIMBA_OK ||
        simba_memory_open(loop, store, &be) != SIMBA_OK)
        b_die(PROG, "poll: setup");
    owners = 0;
    for (i = 0; i < n; i++) {
        simba_contend_desc cd;
        simba_service *s;
        char name[32];
        snprintf(name, sizeof name, "p%07ld", i);
        memset(&cd, 0, sizeof cd);
        cd.mutex = name;
        cd.contender_id = "a";
        cd.ttl_ms = TTL;
        cd.transition_ms = 6000;
        cd.on_acquired = on_acq;
        fake_ms = T0 + (int64_t)((double)i * (double)W / (double)n);
        if (simba_contend(loop, be, &cd, &s) != SIMBA_OK || simba_start(s) != SIMBA_OK) b_die(PROG, "poll: contend");
        simba_poll(loop);
    }
    if (owners != n) b_die(PROG, "poll: %ld of %ld owned", owners, n);
    /* idle: all renewals are >= 10 s away */
    fake_ms = T0 + W + 100;
    for (i = 0; i < idle_n; i++) {
        double a = b_now_us();
        simba_poll(loop);
        b_add(&idle, b_now_us() - a);
    }
    b_sort(&idle);
    *idle_p50 = b_pct(&idle, 0.5);
    *idle_p99 = b_pct(&idle, 0.99);
    /* due: renewals at start + TTL - TTL/3 spread over [T0 + 20 s, T0 + 30 s); each renewal
       schedules the next one TTL - TTL/3 later, so every pass over a window of that length
       renews every service once. The median pass counts (the machine may be shared). */
    step = W * K / n;
    if (step < 1) step = 1;
    start = T0 + TTL - TTL / 3;
    for (k = 0; k < PASSES; k++) {
        double total = 0;
        end = start + (TTL - TTL / 3);
        for (fake_ms = start; fake_ms < end; fake_ms += step) {
            double a = b_now_us();
            simba_poll(loop);
            total += b_now_us() - a;
        }
        pass[k] = total;
        start = end;
    }
    /* every service renewed exactly once (a renewal keeps ownership: no callback), which
       the store confirms: each lease now ends after the window */
    for (i = 0; i < n; i += n / 10 > 0 ? n / 10 : 1) {
        char name[32], ob[SIMBA_ID_MAX + 1];
        simba_reply rep;
        snprintf(name, sizeof name, "p%07ld", i);
        if (simba_memstore_read(store, name, &rep, ob, sizeof ob) != SIMBA_OK || rep.ttl_left_ms < TTL - (TTL - TTL / 3) - W)
            b_die(PROG, "poll: %s was not renewed in the window", name);
    }
    renewed = n;
    *per_event = b_median_of(pass, PASSES) / (double)renewed;
    *events = renewed;
    free(idle.v);
    simba_loop_free(loop);
    simba_memstore_free(store);
}

static int poll_part(void) {
    const char *sizes = b_opt("sizes", "1000,10000,100000");
    long n[8];
    int k = 0, i;
    double im[8], ip[8], pe[8];
    long ev[8];
    const char *p = sizes;
    while (*p && k < 8) {
        n[k++] = atol(p);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    for (i = 0; i < k; i++) {
        poll_cost(n[i], &im[i], &ip[i], &pe[i], &ev[i]);
        fprintf(stderr, "%s poll n=%ld: idle p50 %.2f us p99 %.2f us, per due event %.3f us\n", PROG, n[i], im[i], ip[i], pe[i]);
    }
    for (i = 0; i < k; i++) {
        const char *w = "W4 poll cost (memory, injected clock)";
        double lg = log2((double)n[i]) / log2((double)n[0]);
        b_row(w, "memory", b_fmt("simba_poll, nothing due, %s services", b_num((double)n[i])),
              b_fmt("%.2f µs p50, %.2f µs p99", im[i], ip[i]), i ? b_fmt("%.2fx the %s case", im[i] / im[0], b_num((double)n[0])) : "", "",
              i ? "flat (O(1))" : "", i ? (im[i] / im[0] < 2 ? "met" : "**missed**: grows with n") : "");
        b_row(w, "memory", b_fmt("per due event (renewal), %s services", b_num((double)n[i])), b_fmt("%.3f µs", pe[i]),
              i ? b_fmt("%.2fx the %s case (n ×%.0f; log2 n ×%.2f)", pe[i] / pe[0], b_num((double)n[0]), (double)n[i] / (double)n[0], lg)
                : "",
              "", i ? "O(log n), not O(n)" : "",
              i ? (pe[i] / pe[0] < sqrt(lg * (double)n[i] / (double)n[0]) ? "met" : "**missed**: closer to O(n) than to O(log n)") : "");
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *part;
    b_argc = argc;
    b_argv = argv;
    part = b_opt("part", "steady");
    if (strcmp(part, "poll") == 0) return poll_part();
    return steady();
}
