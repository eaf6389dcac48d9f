/* w2_shared.c -- W2 on a semaphore and a read-write lock, beside the mutex of the same run.
 *
 *   w2_shared --backend sqlite|redis|zk|pg [--secs 6] [--procs 8] [--permits 2] [--writers 2]
 *             [--hold-ms 5] [--rest-ms 0] [--ttl-ms 10000] [--transition-ms 6000]
 *             [--label TEXT] [backend options as in bench.h]
 *
 * Three runs one after the other on one backend, each with --procs processes that hold for
 * --hold-ms, release (simba_stop, confirmed), rest --rest-ms and ask again (simba_start):
 *   mutex      every process on a mutex: the reference the other two are read against;
 *   semaphore  every process on a semaphore of --permits: acquisitions/s (ideal: permits
 *              times the mutex's), Jain fairness over the per-process counts (target
 *              >= 0.99) and handoff p50 / p99, a release to another process's acquisition
 *              of the permit it freed (each acquisition takes the oldest release not yet
 *              taken), beside the mutex's (target: p50 within the mutex's p50..p99);
 *   read-write --writers writers and the rest readers of one read-write lock: the readers'
 *              acquisitions/s against the mutex's, and a writer's longest wait (ask ->
 *              acquire) against the mutex's longest wait.
 * The workers log, with CLOCK_MONOTONIC in us (system-wide on Linux):
 *     S <us>  asks (simba_start)   A <us>  inside on_acquired   R <us>  just before simba_stop
 * and the parent merges them by time. "holders over the limit" counts moments where the
 * logs show more holders than the mode allows (must be 0; a hold is [A, R], and R comes
 * before the release reaches the store).
 */
#define SIMBA_IMPLEMENTATION
#include "bench.h"

#define PROG "w2_shared"
#define MAXP 16

typedef struct ev {
    double t;
    char kind;
    int proc;
} ev;

static ev *evs;
static long nev, capev;
static void log_ev(char kind, double t) {
    if (nev == capev) {
        long cap = capev ? capev * 2 : 4096;
        ev *v = (ev *)realloc(evs, (size_t)cap * sizeof *v);
        if (!v) b_die(PROG, "out of memory");
        evs = v;
        capev = cap;
    }
    evs[nev].t = t;
    evs[nev].kind = kind;
    evs[nev].proc = 0;
    nev++;
}

/* ---- worker --------------------------------------------------------------------------- */

static double acq_us;
static int owner;
static void on_acq(simba_service *s, const simba_state *st, void *u) {
    (void)s; (void)st; (void)u;
    acq_us = b_now_us();
    owner = 1;
    log_ev('A', acq_us);
}
static void on_rel(simba_service *s, const simba_state *st, void *u) {
    (void)s; (void)st; (void)u;
    owner = 0;
}

static int worker(void) {
    const char *backend = b_opt("backend", "redis");
    double start = b_optf("start-us", 0), end = b_optf("end-us", 0), hold_us = b_optf("hold-ms", 5) * 1000;
    double rest_us = b_optf("rest-ms", 0) * 1000, rest_until = 0;
    simba_loop *loop;
    simba_memstore *store = NULL;
    simba_backend *be;
    simba_service *svc;
    simba_contend_desc cd;
    simba_result rc;
    long i;
    int restart = 0;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) b_die(PROG, "loop");
    if ((rc = b_open(loop, backend, &store, &be)) != SIMBA_OK) b_die(PROG, "open %s: %s", backend, simba_strerror(rc));
    memset(&cd, 0, sizeof cd);
    cd.mutex = b_opt("mutex", "w2-shared");
    cd.contender_id = b_opt("id", "w2s");
    cd.ttl_ms = (int64_t)b_optf("ttl-ms", 10000);
    cd.transition_ms = (int64_t)b_optf("transition-ms", 6000);
    cd.permits = (int)b_optf("worker-permits", 0);
    cd.shared = (int)b_optf("worker-shared", 0);
    cd.on_acquired = on_acq;
    cd.on_released = on_rel;
    if (simba_contend(loop, be, &cd, &svc) != SIMBA_OK) b_die(PROG, "contend: %s", simba_loop_errmsg(loop));
    while (b_now_us() < start) simba_wait(loop, (int64_t)((start - b_now_us()) / 1000) + 1);
    log_ev('S', b_now_us());
    if (simba_start(svc) != SIMBA_OK) b_die(PROG, "start: %s", simba_loop_errmsg(loop));
    for (;;) {
        double now = b_now_us(), wait_ms;
        if (now >= end) break;
        if (owner && now - acq_us >= hold_us) {
            log_ev('R', b_now_us());
            owner = 0;
            simba_stop(svc);
            restart = 1;
        }
        if (restart == 1 && simba_service_status(svc) == SIMBA_INITIAL) {
            restart = 2;
            rest_until = now + rest_us;
        }
        if (restart == 2 && now >= rest_until) {
            restart = 0;
            log_ev('S', b_now_us());
            simba_start(svc);
        }
        wait_ms = (end - now) / 1000;
        if (owner && (acq_us + hold_us - now) / 1000 < wait_ms) wait_ms = (acq_us + hold_us - now) / 1000;
        if (restart == 2 && (rest_until - now) / 1000 < wait_ms) wait_ms = (rest_until - now) / 1000;
        if ((rc = simba_wait(loop, (int64_t)(wait_ms + 0.999))) != SIMBA_OK) b_die(PROG, "simba_wait: %s", simba_strerror(rc));
    }
    if (simba_service_status(svc) == SIMBA_RUNNING) simba_stop(svc);
    if (owner) log_ev('R', b_now_us());
    b_wait_until(loop, b_is_initial, svc, b_now_us() + 3e6);
    for (i = 0; i < nev; i++) printf("%c %.1f\n", evs[i].kind, evs[i].t);
    printf("END\n");
    fflush(stdout);
    simba_loop_free(loop);
    if (store) simba_memstore_free(store);
    return 0;
}

/* ---- parent ---------------------------------------------------------------------------- */

static int ev_cmp(const void *a, const void *b) {
    const ev *x = (const ev *)a, *y = (const ev *)b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->kind == 'R' ? -1 : y->kind == 'R'; /* a release sorts before an acquire at the same us */
}

/* Runs procs workers on one name from start to end, each with its permits and shared
   (shared[i]), and merges their events into evs[], sorted by time. */
static void run_workers(int argc, char **argv, int procs, const char *mutex, int permits, const int *shared,
                        double start, double end) {
    pid_t pids[MAXP];
    int fds[MAXP], i;
    for (i = 0; i < procs; i++) {
        char *args[48];
        int a = 0, j;
        char id[32], st[64], en[64], pm[16];
        snprintf(id, sizeof id, "w2s-p%d", i);
        snprintf(st, sizeof st, "%.0f", start);
        snprintf(en, sizeof en, "%.0f", end);
        snprintf(pm, sizeof pm, "%d", permits);
        args[a++] = (char *)PROG;
        args[a++] = (char *)"--worker";
        args[a++] = (char *)"1";
        args[a++] = (char *)"--id";
        args[a++] = id;
        args[a++] = (char *)"--mutex";
        args[a++] = (char *)mutex;
        args[a++] = (char *)"--start-us";
        args[a++] = st;
        args[a++] = (char *)"--end-us";
        args[a++] = en;
        args[a++] = (char *)"--worker-permits";
        args[a++] = pm;
        args[a++] = (char *)"--worker-shared";
        args[a++] = (char *)(shared[i] ? "1" : "0");
        for (j = 1; j < argc && a < 46; j++) args[a++] = argv[j]; /* backend and timing options */
        args[a] = NULL;
        pids[i] = b_spawn(args, &fds[i]);
        if (pids[i] < 0) b_die(PROG, "spawn failed");
    }
    nev = 0;
    for (i = 0; i < procs; i++) {
        char line[128];
        while (b_read_line(fds[i], line, sizeof line, end + 15e6) > 0) {
            if (strcmp(line, "END") == 0) break;
            log_ev(line[0], atof(line + 2));
            evs[nev - 1].proc = i;
        }
        close(fds[i]);
        if (b_reap(pids[i], b_now_us() + 5e6) != 0) fprintf(stderr, "%s: worker %d did not exit cleanly\n", PROG, i);
    }
    qsort(evs, (size_t)nev, sizeof *evs, ev_cmp);
}

typedef struct figures {
    long acqs, count[MAXP], self, over, reader_acqs, writer_acqs, most, most_readers;
    double rate, reader_rate, jain, longest, writer_longest, p50, p99;
    b_samples gaps;
} figures;

/* The figures of one run from evs[]: holders are counted over [A, R]; a handoff pairs each
   acquisition with the oldest release not yet taken by another acquisition. */
static void analyse(figures *f, int procs, int permits, const int *shared, double secs, double end) {
    double asked[MAXP], rel[4096];
    int holding[MAXP], nhold = 0, nwriters = 0, i;
    long k, rhead = 0, rtail = 0;
    int relp[4096];
    memset(f, 0, sizeof *f);
    for (i = 0; i < procs; i++) {
        asked[i] = -1;
        holding[i] = 0;
    }
    for (k = 0; k < nev; k++) {
        int p = evs[k].proc;
        if (evs[k].kind == 'S') {
            asked[p] = evs[k].t;
        } else if (evs[k].kind == 'R') {
            if (holding[p]) {
                holding[p] = 0;
                nhold--;
                if (!shared[p]) nwriters--;
            }
            if (rtail - rhead < 4096) {
                rel[rtail % 4096] = evs[k].t;
                relp[rtail % 4096] = p;
                rtail++;
            }
        } else if (evs[k].kind == 'A') {
            double wait = asked[p] >= 0 ? evs[k].t - asked[p] : 0;
            f->acqs++;
            f->count[p]++;
            if (shared[p]) f->reader_acqs++;
            else f->writer_acqs++;
            if (wait > f->longest) f->longest = wait;
            if (!shared[p] && wait > f->writer_longest) f->writer_longest = wait;
            asked[p] = -1;
            holding[p] = 1;
            nhold++;
            if (!shared[p]) nwriters++;
            if (nhold > permits && (permits > 1 || nwriters > 0)) f->over++;
            if (nhold > f->most) f->most = nhold;
            if (nhold - nwriters > f->most_readers) f->most_readers = nhold - nwriters;
            if (rhead < rtail) {
                if (relp[rhead % 4096] != p) b_add(&f->gaps, evs[k].t - rel[rhead % 4096]);
                else f->self++;
                rhead++;
            }
        }
    }
    /* a process still waiting at the end has waited since it asked */
    for (i = 0; i < procs; i++)
        if (asked[i] >= 0) {
            if (end - asked[i] > f->longest) f->longest = end - asked[i];
            if (!shared[i] && end - asked[i] > f->writer_longest) f->writer_longest = end - asked[i];
        }
    {
        double sum = 0, sq = 0;
        for (i = 0; i < procs; i++) {
            sum += f->count[i];
            sq += (double)f->count[i] * f->count[i];
        }
        f->jain = sq > 0 ? sum * sum / (procs * sq) : 0;
    }
    f->rate = f->acqs / secs;
    f->reader_rate = f->reader_acqs / secs;
    b_sort(&f->gaps);
    f->p50 = f->gaps.n ? b_pct(&f->gaps, 0.5) / 1000 : -1;
    f->p99 = f->gaps.n ? b_pct(&f->gaps, 0.99) / 1000 : -1;
    fprintf(stderr, "%s: %ld acquisitions (%ld by readers), %ld handoffs, %ld re-acquired by the releaser, %ld over the limit\n",
            PROG, f->acqs, f->reader_acqs, f->gaps.n, f->self, f->over);
}

static void counts_of(const figures *f, int procs, char *out, size_t cap) {
    int i, off = 0;
    out[0] = 0;
    for (i = 0; i < procs && off < (int)cap - 16; i++)
        off += snprintf(out + off, cap - (size_t)off, "%s%ld", i ? " / " : "", f->count[i]);
}

int main(int argc, char **argv) {
    const char *backend;
    double secs, start;
    int procs, permits, writers, i, none[MAXP], rw[MAXP];
    figures mx, sm, wr;
    char name[96], counts[256], label[160];
    b_argc = argc;
    b_argv = argv;
    if (b_opt("worker", NULL)) return worker();
    backend = b_opt("backend", "redis");
    secs = b_optf("secs", 6);
    procs = (int)b_optf("procs", 8);
    permits = (int)b_optf("permits", 2);
    writers = (int)b_optf("writers", 2);
    if (procs < 2 || procs > MAXP) b_die(PROG, "--procs must be 2..%d", MAXP);
    if (permits < 2 || permits >= procs) b_die(PROG, "--permits must be 2..procs-1");
    if (writers < 1 || writers >= procs) b_die(PROG, "--writers must be 1..procs-1");
    for (i = 0; i < procs; i++) {
        none[i] = 0;
        rw[i] = i < procs - writers; /* the last --writers processes write */
    }
    /* a copy: b_fmt's buffers are reused */
    snprintf(label, sizeof label, "%s",
             b_opt("label", b_fmt("W2 shared (%d procs, hold %s ms, pause %s ms)", procs, b_opt("hold-ms", "5"), b_opt("rest-ms", "0"))));

    snprintf(name, sizeof name, "w2s-mutex-%s-%ld", backend, (long)getpid());
    start = b_now_us() + 1.5e6;
    run_workers(argc, argv, procs, name, 1, none, start, start + secs * 1e6);
    analyse(&mx, procs, 1, none, secs, start + secs * 1e6);

    snprintf(name, sizeof name, "w2s-sem-%s-%ld", backend, (long)getpid());
    start = b_now_us() + 1.5e6;
    run_workers(argc, argv, procs, name, permits, none, start, start + secs * 1e6);
    analyse(&sm, procs, permits, none, secs, start + secs * 1e6);

    snprintf(name, sizeof name, "w2s-rw-%s-%ld", backend, (long)getpid());
    start = b_now_us() + 1.5e6;
    run_workers(argc, argv, procs, name, 1, rw, start, start + secs * 1e6);
    analyse(&wr, procs, 1, rw, secs, start + secs * 1e6);

    counts_of(&mx, procs, counts, sizeof counts);
    b_row(label, backend, "mutex: acquisitions/s, Jain", b_fmt("%.1f /s, Jain %.3f", mx.rate, mx.jain), b_fmt("counts %s", counts),
          "", "", "");
    b_row(label, backend, "mutex: handoff release → next acquire p50 / p99",
          mx.gaps.n ? b_fmt("%.3f / %.3f ms", mx.p50, mx.p99) : "n/a (no handoff)",
          b_fmt("%ld handoffs, %ld re-acquired by the releaser, %ld over the limit", mx.gaps.n, mx.self, mx.over), "", "", "");
    counts_of(&sm, procs, counts, sizeof counts);
    b_row(label, backend, b_fmt("semaphore of %d: acquisitions/s", permits), b_fmt("%.1f", sm.rate),
          b_fmt("mutex %.1f; at most %ld holders at once", mx.rate, sm.most),
          mx.rate > 0 ? b_fmt("%.2f × mutex", sm.rate / mx.rate) : "", b_fmt("%d holders at once", permits),
          sm.most == permits ? "met" : "**missed**");
    b_row(label, backend, b_fmt("semaphore of %d: Jain fairness", permits), b_fmt("%.3f", sm.jain), b_fmt("counts %s", counts),
          "", "≥ 0.99", b_verdict_min(sm.jain, 0.99, ""));
    b_row(label, backend, b_fmt("semaphore of %d: handoff release → next acquire p50 / p99", permits),
          sm.gaps.n ? b_fmt("%.3f / %.3f ms", sm.p50, sm.p99) : "n/a (no handoff)",
          b_fmt("mutex %.3f / %.3f ms; %ld handoffs, %ld over the limit", mx.p50, mx.p99, sm.gaps.n, sm.over),
          sm.gaps.n && mx.p50 > 0 ? b_fmt("%.2f × mutex p50", sm.p50 / mx.p50) : "", "p50 ≤ the mutex's p99",
          sm.gaps.n && mx.gaps.n ? b_verdict_max(sm.p50, mx.p99, "ms") : "**missed**: no handoff");
    b_row(label, backend, b_fmt("read-write (%d readers, %d writers): readers' acquisitions/s", procs - writers, writers),
          b_fmt("%.1f", wr.reader_rate),
          b_fmt("mutex %.1f (all %d procs); writers %.1f /s; at most %ld readers at once", mx.rate, procs, wr.writer_acqs / secs,
                wr.most_readers),
          mx.rate > 0 ? b_fmt("%.2f × mutex", wr.reader_rate / mx.rate) : "", "readers together", wr.most_readers > 1 ? "met" : "**missed**");
    b_row(label, backend, "read-write: a writer's longest wait (ask → acquire, or → end of run)",
          b_fmt("%.1f ms", wr.writer_longest / 1000),
          b_fmt("mutex's longest wait %.1f ms; %ld over the limit", mx.longest / 1000, wr.over),
          mx.longest > 0 ? b_fmt("%.2f × mutex", wr.writer_longest / mx.longest) : "", "", "");
    free(mx.gaps.v);
    free(sm.gaps.v);
    free(wr.gaps.v);
    return mx.over || sm.over || wr.over ? 2 : 0;
}
