/* bench.h -- helpers shared by the bench programs (not part of the library).
 *
 * Every bench program includes this file once, in its single translation unit, after
 * defining SIMBA_IMPLEMENTATION; it pulls in the four networked/file backends. Programs print their
 * figures as markdown table rows (lines starting with "| ") on stdout; everything else goes
 * to stderr. scripts/bench.sh collects the rows into one table.
 *
 * Row columns: workload | backend | figure | simba | limit measured in the same run |
 *              simba / limit | target | verdict
 */
#ifndef SIMBA_BENCH_H
#define SIMBA_BENCH_H

#include "../simba_sql.h"
#include "../simba_memory.h"
#include "../simba_redis.h"
#include "../simba_zk.h"
#include "../simba_pg.h"
#include "../simba_mysql.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Not every program uses every helper (the format attribute sits on a separate
   declaration, which gcc allows before a definition, clang only as a prototype). */
#if defined(__GNUC__)
#define B_FN static __attribute__((unused))
#define B_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define B_FN static
#define B_PRINTF(a, b)
#endif

/* ---- time ---------------------------------------------------------------------------- */

B_FN double b_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

B_FN void b_sleep_ms(double ms) {
    struct timespec ts;
    if (ms <= 0) return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- samples ------------------------------------------------------------------------- */

typedef struct b_samples {
    double *v;
    long n, cap;
} b_samples;

B_FN void b_add(b_samples *s, double x) {
    if (s->n == s->cap) {
        long cap = s->cap ? s->cap * 2 : 1024;
        double *v = (double *)realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return; /* a lost sample is better than a crash in a bench */
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
}

B_FN int b_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

B_FN void b_sort(b_samples *s) {
    if (s->n > 1) qsort(s->v, (size_t)s->n, sizeof *s->v, b_cmp);
}

/* Nearest-rank percentile of sorted samples, p in [0, 1]. */
B_FN double b_pct(const b_samples *s, double p) {
    long i;
    if (s->n <= 0) return 0;
    i = (long)(p * (double)s->n + 0.999999) - 1;
    if (i < 0) i = 0;
    if (i >= s->n) i = s->n - 1;
    return s->v[i];
}

B_FN double b_median_of(double *v, int n) {
    b_samples s;
    s.v = v;
    s.n = n;
    s.cap = n;
    b_sort(&s);
    if (n <= 0) return 0;
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- output -------------------------------------------------------------------------- */

B_FN void b_row(const char *workload, const char *backend, const char *figure, const char *simba,
                  const char *limit, const char *ratio, const char *target, const char *verdict) {
    printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", workload, backend, figure, simba, limit ? limit : "",
           ratio ? ratio : "", target ? target : "", verdict ? verdict : "");
    fflush(stdout);
}

/* snprintf into one of a few rotating static buffers: for building row cells inline. */
B_FN B_PRINTF(1, 2) const char *b_fmt(const char *fmt, ...);
B_FN const char *b_fmt(const char *fmt, ...) {
    static char bufs[16][256];
    static int next;
    char *b = bufs[next++ % 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof bufs[0], fmt, ap);
    va_end(ap);
    return b;
}

/* Thousands separators for rates: 12345.6 -> "12,346". */
B_FN const char *b_num(double x) {
    char raw[64], *out;
    static char bufs[16][64];
    static int next;
    int len, i, j, lead;
    out = bufs[next++ % 16];
    snprintf(raw, sizeof raw, "%.0f", x);
    len = (int)strlen(raw);
    lead = raw[0] == '-' ? 1 : 0;
    for (i = 0, j = 0; i < len && j < 60; i++) {
        if (i > lead && (len - i) % 3 == 0) out[j++] = ',';
        out[j++] = raw[i];
    }
    out[j] = 0;
    return out;
}

/* Verdicts: "met" or "missed by ...". */
/* "12.3", "0.0889", "2960": three significant digits without an exponent. */
B_FN const char *b_short(double d) {
    return d >= 100 || d <= -100 ? b_fmt("%.0f", d) : b_fmt("%.3g", d);
}
B_FN const char *b_verdict_max(double value, double limit, const char *unit) {
    if (value <= limit) return "met";
    return b_fmt("**missed** by %s%s%s", b_short(value - limit), *unit ? " " : "", unit);
}
B_FN const char *b_verdict_min(double value, double floor, const char *unit) {
    if (value >= floor) return "met";
    return b_fmt("**missed** by %s%s%s", b_short(floor - value), *unit ? " " : "", unit);
}

#if defined(__GNUC__)
B_FN B_PRINTF(2, 3) __attribute__((noreturn)) void b_die(const char *prog, const char *fmt, ...);
#endif
B_FN void b_die(const char *prog, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- options ------------------------------------------------------------------------- */

/* Every program takes --key value pairs; b_opt returns the value or def. */
static int b_argc;
static char **b_argv;
B_FN const char *b_opt(const char *key, const char *def) {
    int i;
    for (i = 1; i + 1 < b_argc; i++)
        if (b_argv[i][0] == '-' && b_argv[i][1] == '-' && strcmp(b_argv[i] + 2, key) == 0) return b_argv[i + 1];
    return def;
}
B_FN double b_optf(const char *key, double def) {
    const char *v = b_opt(key, NULL);
    return v ? atof(v) : def;
}

/* ---- backends ------------------------------------------------------------------------ */

/* Opens the backend named by --backend (memory, sqlite, redis, zk, pg, mysql) with the options
   --sql PATH, --redis-port P, --zk HOST:PORT, --zk-session-ms T, --pg-port P (127.0.0.1,
   user postgres, password simba: scripts/pg-start.sh), --mysql-port P (127.0.0.1, user root,
   password simba, database simba: scripts/mysql-start.sh; --mysql-connections N, its request
   connections). A memory backend needs a store:
   *store is created on first use and shared by later calls. */
B_FN simba_result b_open(simba_loop *loop, const char *name, simba_memstore **store, simba_backend **out) {
    if (strcmp(name, "memory") == 0) {
        if (!*store && simba_memstore_new(NULL, store) != SIMBA_OK) return SIMBA_ENOMEM;
        return simba_memory_open(loop, *store, out);
    }
    if (strcmp(name, "sqlite") == 0) {
        simba_sql_desc d;
        static char err[512];
        memset(&d, 0, sizeof d);
        d.path = b_opt("sql", "build/bench-sql/bench.db");
        d.checkpoint = atoi(b_opt("sql-checkpoint", "0")); /* -1: no automatic WAL checkpoint */
        d.errbuf = err;
        d.errbuf_cap = sizeof err;
        return simba_sql_open(loop, &d, out);
    }
    if (strcmp(name, "redis") == 0) {
        simba_redis_desc d;
        memset(&d, 0, sizeof d);
        d.host = "127.0.0.1";
        d.port = atoi(b_opt("redis-port", "6395"));
        d.prefix = "bench:";
        return simba_redis_open(loop, &d, out);
    }
    if (strcmp(name, "zk") == 0) {
        simba_zk_desc d;
        zoo_set_debug_level((ZooLogLevel)0); /* the client library logs to stderr by default */
        memset(&d, 0, sizeof d);
        d.hosts = b_opt("zk", "127.0.0.1:2195");
        d.session_timeout_ms = atoi(b_opt("zk-session-ms", "2000"));
        d.root = "/simba_bench";
        return simba_zk_open(loop, &d, out);
    }
    if (strcmp(name, "pg") == 0) {
        simba_pg_desc d;
        memset(&d, 0, sizeof d);
        d.hostaddr = "127.0.0.1";
        d.port = atoi(b_opt("pg-port", "5445"));
        d.user = "postgres";
        d.password = "simba";
        d.dbname = "postgres";
        d.table = "simba_bench";
        return simba_pg_open(loop, &d, out);
    }
    if (strcmp(name, "mysql") == 0) {
        simba_mysql_desc d;
        memset(&d, 0, sizeof d);
        d.host = "127.0.0.1";
        d.port = atoi(b_opt("mysql-port", "3395"));
        d.user = "root";
        d.password = "simba";
        d.db = "simba";
        d.table = "simba_bench";
        d.connections = atoi(b_opt("mysql-connections", "0"));
        return simba_mysql_open(loop, &d, out);
    }
    return SIMBA_EINVAL;
}

/* redis-benchmark -c 1 -n n --csv <command> against 127.0.0.1:port: returns requests/s (0 on
   failure) and the p50 latency in *p50_us. */
B_FN double b_redis_benchmark(int port, long n, const char *command, double *p50_us) {
    char cmd[512], line[1024];
    double rps = 0;
    FILE *f;
    snprintf(cmd, sizeof cmd, "redis-benchmark -h 127.0.0.1 -p %d -c 1 -n %ld --csv %s 2>/dev/null", port, n, command);
    f = popen(cmd, "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        /* "<command>","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",... */
        char *q;
        int k;
        if (line[0] != '"' || strncmp(line, "\"test\"", 6) == 0) continue;
        q = strstr(line, "\",\"");
        if (!q) continue;
        rps = atof(q + 3);
        for (k = 0, q += 3; k < 3 && q; k++) {
            q = strstr(q, "\",\"");
            if (q) q += 3;
        }
        if (q && p50_us) *p50_us = atof(q) * 1000.0;
    }
    if (pclose(f) != 0) return 0;
    return rps;
}

/* Drives the loop the way an application with nothing else to do would: simba_wait, which
   poll(2)s simba's descriptors up to the next deadline. Stops when done(arg) is true;
   returns 0, or -1 once deadline_us (CLOCK_MONOTONIC, us) has passed. */
B_FN int b_wait_until(simba_loop *loop, int (*done)(void *), void *arg, double deadline_us) {
    while (!done(arg)) {
        double left = deadline_us - b_now_us();
        simba_result rc;
        if (left <= 0) return -1;
        rc = simba_wait(loop, (int64_t)(left / 1000) + 1);
        if (rc != SIMBA_OK) {
            fprintf(stderr, "simba_wait: %s (%s)\n", simba_strerror(rc), simba_loop_errmsg(loop));
            return -1;
        }
    }
    return 0;
}

/* One turn of an application's event loop: poll(2) on simba_fds() for up to wait_ms (or sleep
   when there is no descriptor), then one simba_poll(), whose duration goes to *poll_us.
   Returns what simba_poll returned: the ms until it wants to be called again. */
/* The calling thread's CPU time in µs: next to a poll's wall time it tells the poll's own
   work from the time the OS had the thread descheduled. */
B_FN double b_thread_cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}
static double b_last_poll_cpu_us; /* CPU time of the last simba_poll in b_tick */
static long b_last_poll_waits;    /* voluntary context switches of the calling thread in it:
                                     > 0 when it waited in the kernel (a lock, I/O, an fsync) */
#ifndef RUSAGE_THREAD
#define RUSAGE_THREAD 1 /* Linux; <sys/resource.h> names it only with _GNU_SOURCE */
#endif
static long b_thread_vcsw(void) {
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
}

B_FN int64_t b_tick(simba_loop *loop, int64_t wait_ms, double *poll_us) {
    struct pollfd p[16];
    int n = simba_fds(loop, p, 16);
    double t, c;
    int64_t w;
    if (n < 0) n = 0;
    if (n > 16) n = 16;
    if (wait_ms > 0) {
        if (n > 0) {
            if (poll(p, (nfds_t)n, (int)wait_ms) < 0 && errno != EINTR) perror("poll");
        } else {
            b_sleep_ms((double)wait_ms);
        }
    }
    b_last_poll_waits = b_thread_vcsw();
    c = b_thread_cpu_us();
    t = b_now_us();
    w = simba_poll(loop);
    *poll_us = b_now_us() - t;
    b_last_poll_cpu_us = b_thread_cpu_us() - c;
    b_last_poll_waits = b_thread_vcsw() - b_last_poll_waits;
    return w;
}

B_FN int b_is_owner(void *svc) { return simba_is_owner((simba_service *)svc); }
B_FN int b_is_initial(void *svc) { return simba_service_status((simba_service *)svc) == SIMBA_INITIAL; }

/* Spawns this program again (argv[0]) with the given arguments; stdout of the child goes to
   the write end of a pipe whose read end is returned in *rfd (when rfd is not NULL). */
B_FN pid_t b_spawn(char *const args[], int *rfd) {
    int p[2] = {-1, -1};
    pid_t pid;
    if (rfd && pipe(p) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (rfd) {
            dup2(p[1], 1);
            close(p[0]);
            close(p[1]);
        }
        execv("/proc/self/exe", args);
        _exit(127);
    }
    if (rfd) {
        close(p[1]);
        *rfd = p[0];
    }
    return pid;
}

/* Reads one line from fd with a deadline (CLOCK_MONOTONIC us). Returns its length, 0 on EOF,
   -1 on timeout or error. */
B_FN int b_read_line(int fd, char *buf, int cap, double deadline_us) {
    int n = 0;
    while (n < cap - 1) {
        struct pollfd p;
        double left = deadline_us - b_now_us();
        char c;
        ssize_t r;
        if (left <= 0) return -1;
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, (int)(left / 1000) + 1) <= 0) continue;
        r = read(fd, &c, 1);
        if (r == 0) break;
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (c == '\n') break;
        buf[n++] = c;
    }
    buf[n] = 0;
    return n;
}

/* Waits for a child with a deadline; SIGKILL if it is not gone by then. Returns its status. */
B_FN int b_reap(pid_t pid, double deadline_us) {
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0) return -1;
        if (b_now_us() > deadline_us) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        b_sleep_ms(5);
    }
}

#endif
