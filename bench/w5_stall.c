/* w5_stall.c -- W5, poll stall: the server is SIGSTOPped for 5 s while an owner and a
 * waiter run; the longest single simba_poll call.
 *
 *   w5_stall --backend redis|zk|pg --server-pid PID [--with-children 1] [--stop-s 5]
 *            [--before-s 1] [--after-s 4] [--ttl-ms 2000] [--transition-ms 1000]
 *            [--zk-session-ms 2000] [--pg-port P]
 *
 * --with-children 1: the server's direct children are stopped and continued with it
 * (PostgreSQL: the postmaster's backends serve the connections, each its own process).
 *
 * One process, one loop, two backends (two connections, as two processes would have): an
 * owner contender and a waiter contender on one mutex. The loop is an application's:
 * poll(2) on simba_fds() up to the delay simba_poll() asked for, then simba_poll(); every
 * simba_poll call is timed (CLOCK_MONOTONIC). Phases: --before-s healthy, then SIGSTOP to
 * the server for --stop-s, then SIGCONT and --after-s more. The server is always continued
 * on exit (atexit and signal handlers), and scripts/bench.sh continues it too.
 * Also reported: whether the owner stepped down while the server was stopped, and how long
 * after SIGCONT a contender owned the mutex again.
 */
#define SIMBA_IMPLEMENTATION
#include "bench.h"

#include <dirent.h>

#define PROG "w5_stall"

static pid_t server;
static pid_t kids[512];
static int nkids;
static void cont_server(void) {
    int i;
    if (server > 0) kill(server, SIGCONT);
    for (i = 0; i < nkids; i++) kill(kids[i], SIGCONT);
}

/* The server's direct children, from /proc/PID/stat (field 4 is the parent's pid). */
static void find_children(void) {
    char path[300], buf[512], *p;
    struct dirent *e;
    DIR *d = opendir("/proc");
    FILE *f;
    if (!d) return;
    while ((e = readdir(d)) && nkids < (int)(sizeof kids / sizeof kids[0])) {
        long ppid = 0;
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')) && sscanf(p + 1, " %*c %ld", &ppid) == 1 &&
            ppid == (long)server)
            kids[nkids++] = (pid_t)atol(e->d_name);
        fclose(f);
    }
    closedir(d);
}
static void on_signal(int sig) {
    cont_server();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int owners, stepdowns;
static double last_acq;
static void on_acq(simba_service *s, const simba_state *st, void *u) {
    (void)s; (void)st; (void)u;
    owners++;
    last_acq = b_now_us();
}
static void on_rel(simba_service *s, const simba_state *st, void *u) {
    (void)s; (void)st; (void)u;
    owners--;
    stepdowns++;
}

typedef struct phase {
    const char *name;
    double max_us, sum_us;
    long n, over_1ms;
} phase;

static int64_t run_phase(simba_loop *loop, phase *ph, double until, int64_t wait) {
    double t, d;
    while ((t = b_now_us()) < until) {
        int64_t cap = (int64_t)((until - t) / 1000) + 1;
        wait = b_tick(loop, wait < cap ? wait : cap, &d);
        if (wait < 0) b_die(PROG, "simba_poll: %s", simba_strerror((int)wait));
        ph->n++;
        ph->sum_us += d;
        if (d > ph->max_us) ph->max_us = d;
        if (d > 1000) ph->over_1ms++;
    }
    return wait;
}

int main(int argc, char **argv) {
    const char *backend;
    simba_loop *loop;
    simba_memstore *store = NULL;
    simba_backend *be[2];
    simba_service *svc[2];
    simba_result rc;
    phase ph[3] = {{"before", 0, 0, 0, 0}, {"stopped", 0, 0, 0, 0}, {"after", 0, 0, 0, 0}};
    double t, t_stop, t_cont, recovered = -1;
    int64_t wait = 0;
    int i, stepdowns_stopped;
    char mutex[64];
    b_argc = argc;
    b_argv = argv;
    backend = b_opt("backend", "redis");
    server = (pid_t)atol(b_opt("server-pid", "0"));
    if (server <= 0 || kill(server, 0) != 0) b_die(PROG, "--server-pid must name the running server");
    atexit(cont_server);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) b_die(PROG, "loop");
    snprintf(mutex, sizeof mutex, "w5-%s-%ld", backend, (long)getpid());
    for (i = 0; i < 2; i++) {
        simba_contend_desc cd;
        if ((rc = b_open(loop, backend, &store, &be[i])) != SIMBA_OK) b_die(PROG, "open: %s", simba_strerror(rc));
        memset(&cd, 0, sizeof cd);
        cd.mutex = mutex;
        cd.contender_id = i ? "w5-waiter" : "w5-owner";
        cd.ttl_ms = (int64_t)b_optf("ttl-ms", 2000);
        cd.transition_ms = (int64_t)b_optf("transition-ms", 1000);
        cd.on_acquired = on_acq;
        cd.on_released = on_rel;
        if (simba_contend(loop, be[i], &cd, &svc[i]) != SIMBA_OK) b_die(PROG, "contend: %s", simba_loop_errmsg(loop));
    }
    /* the owner first, then the waiter joins */
    if (simba_start(svc[0]) != SIMBA_OK) b_die(PROG, "start");
    if (b_wait_until(loop, b_is_owner, svc[0], b_now_us() + 10e6) != 0) b_die(PROG, "%s: owner did not acquire", backend);
    if (simba_start(svc[1]) != SIMBA_OK) b_die(PROG, "start");
    stepdowns = 0;
    t = b_now_us();
    wait = run_phase(loop, &ph[0], t + b_optf("before-s", 1) * 1e6, 0);
    if (b_optf("with-children", 0) > 0) find_children();
    if (kill(server, SIGSTOP) != 0) b_die(PROG, "SIGSTOP %ld failed", (long)server);
    for (i = 0; i < nkids; i++) kill(kids[i], SIGSTOP);
    fprintf(stderr, "%s %s: stopped %ld and %d children\n", PROG, backend, (long)server, nkids);
    t_stop = b_now_us();
    wait = run_phase(loop, &ph[1], t_stop + b_optf("stop-s", 5) * 1e6, wait);
    stepdowns_stopped = stepdowns;
    cont_server();
    t_cont = b_now_us();
    last_acq = 0;
    wait = run_phase(loop, &ph[2], t_cont + b_optf("after-s", 4) * 1e6, wait);
    if (last_acq > 0) recovered = (last_acq - t_cont) / 1000;
    for (i = 0; i < 3; i++)
        fprintf(stderr, "%s %s %-8s %6ld polls, mean %.1f us, max %.1f us, %ld over 1 ms\n", PROG, backend, ph[i].name, ph[i].n,
                ph[i].n ? ph[i].sum_us / (double)ph[i].n : 0.0, ph[i].max_us, ph[i].over_1ms);
    {
        const char *w = "W5 poll stall (server SIGSTOPped 5 s)";
        double mx = ph[0].max_us;
        long over = 0, n = 0;
        for (i = 0; i < 3; i++) {
            if (ph[i].max_us > mx) mx = ph[i].max_us;
            over += ph[i].over_1ms;
            n += ph[i].n;
        }
        b_row(w, backend, "longest simba_poll (owner + waiter running)", b_fmt("%.3f ms", mx / 1000),
              b_fmt("healthy %.3f / stopped %.3f / after SIGCONT %.3f ms; %ld of %ld polls > 1 ms", ph[0].max_us / 1000,
                    ph[1].max_us / 1000, ph[2].max_us / 1000, over, n),
              "", "≤ 1 ms", b_verdict_max(mx / 1000, 1, "ms"));
        b_row(w, backend, "while stopped / after SIGCONT",
              b_fmt("owner stepped down: %s", stepdowns_stopped ? "yes" : "no"),
              recovered >= 0 ? b_fmt("owned again %.0f ms after SIGCONT", recovered)
                             : (owners > 0 ? "owner kept the mutex throughout" : "no owner by the end"),
              "", "", "");
    }
    simba_loop_free(loop);
    return 0;
}
