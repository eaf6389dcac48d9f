/* mp_worker.c -- one contender process for the multi-process test (scripts/mp_test.sh).
 *
 *   mp_worker --backend sql --path FILE --mutex M --duration-ms N --ttl-ms T
 *             --transition-ms X --log FILE [--hold-ms H] [--rest-ms R] [--id ID]
 *
 * Contends for M for N ms and appends one line per event to the log:
 *     <pid> <contender> <fence> acquired|released <CLOCK_MONOTONIC ms, 3 decimals>
 * CLOCK_MONOTONIC is system-wide on Linux, so lines of different processes compare.
 * "acquired" is written inside on_acquired, "released" inside on_released: the interval
 * between them is when this process believed it owned M, which is what must never overlap
 * another process's interval.
 * With --hold-ms H it gives the mutex up after holding it H ms (stop, then start again
 * after R ms, default 1000) so that ownership changes hands. On SIGTERM/SIGINT or at the
 * end it stops, waits for the release, and exits 0; exit 1 on a usage or backend error.
 *
 * Backends: "sql" always; "redis" when built with -DSIMBA_HAVE_REDIS (-lhiredis), "zk" with
 * -DSIMBA_HAVE_ZK (-I/usr/include/zookeeper -DTHREADED -lzookeeper_mt), each with its own
 * options (see the backends[] table; a new backend is one more row).
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"
#ifdef SIMBA_HAVE_REDIS
#include "../simba_redis.h"
#endif
#ifdef SIMBA_HAVE_ZK
#include "../simba_zk.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- options ------------------------------------------------------------------------ */

static struct {
    const char *backend, *mutex, *log, *id;
    int64_t duration_ms, ttl_ms, transition_ms, hold_ms, rest_ms;
    /* sql */
    const char *sql_path, *sql_table;
#ifdef SIMBA_HAVE_REDIS
    const char *redis_host, *redis_prefix;
    int64_t redis_port;
#endif
#ifdef SIMBA_HAVE_ZK
    const char *zk_hosts, *zk_root;
    int64_t zk_session_ms;
#endif
} opt;

static int parse_ms(const char *s, int64_t *out) {
    char *end;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > SIMBA_MAX_MS) return 0;
    *out = v;
    return 1;
}

/* ---- backends ----------------------------------------------------------------------- */

typedef struct worker_backend {
    const char *name;
    const char *usage;
    /* Takes a backend option (key without "--"); 1 if consumed, 0 if unknown, -1 bad. */
    int (*option)(const char *key, const char *val);
    simba_result (*open)(simba_loop *loop, simba_backend **out, char *err, size_t cap);
} worker_backend;

static int sql_option(const char *key, const char *val) {
    if (strcmp(key, "path") == 0) opt.sql_path = val;
    else if (strcmp(key, "table") == 0) opt.sql_table = val;
    else return 0;
    return 1;
}

static simba_result sql_open(simba_loop *loop, simba_backend **out, char *err, size_t cap) {
    simba_sql_desc d;
    if (!opt.sql_path) {
        snprintf(err, cap, "--path is required for --backend sql");
        return SIMBA_EINVAL;
    }
    memset(&d, 0, sizeof d);
    d.path = opt.sql_path;
    d.table = opt.sql_table;
    d.errbuf = err;
    d.errbuf_cap = cap;
    return simba_sql_open(loop, &d, out);
}

#ifdef SIMBA_HAVE_REDIS
static int redis_option(const char *key, const char *val) {
    if (strcmp(key, "host") == 0) opt.redis_host = val;
    else if (strcmp(key, "prefix") == 0) opt.redis_prefix = val;
    else if (strcmp(key, "port") == 0) return parse_ms(val, &opt.redis_port) && opt.redis_port < 65536 ? 1 : -1;
    else return 0;
    return 1;
}

static simba_result redis_open(simba_loop *loop, simba_backend **out, char *err, size_t cap) {
    simba_redis_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.host = opt.redis_host;
    d.port = (int)opt.redis_port;
    d.prefix = opt.redis_prefix;
    rc = simba_redis_open(loop, &d, out);
    if (rc != SIMBA_OK) snprintf(err, cap, "%s", simba_strerror(rc));
    return rc;
}
#endif

#ifdef SIMBA_HAVE_ZK
static int zk_option(const char *key, const char *val) {
    if (strcmp(key, "hosts") == 0) opt.zk_hosts = val;
    else if (strcmp(key, "root") == 0) opt.zk_root = val;
    else if (strcmp(key, "session-ms") == 0) return parse_ms(val, &opt.zk_session_ms) && opt.zk_session_ms < 1000000 ? 1 : -1;
    else return 0;
    return 1;
}

static simba_result zk_open(simba_loop *loop, simba_backend **out, char *err, size_t cap) {
    simba_zk_desc d;
    simba_result rc;
    if (!opt.zk_hosts) {
        snprintf(err, cap, "--hosts is required for --backend zk");
        return SIMBA_EINVAL;
    }
    memset(&d, 0, sizeof d);
    d.hosts = opt.zk_hosts;
    d.root = opt.zk_root;
    d.session_timeout_ms = (int)opt.zk_session_ms;
    rc = simba_zk_open(loop, &d, out);
    if (rc != SIMBA_OK) snprintf(err, cap, "%s", simba_strerror(rc));
    return rc;
}
#endif

static const worker_backend backends[] = {
    {"sql", "--path FILE [--table NAME]", sql_option, sql_open},
#ifdef SIMBA_HAVE_REDIS
    {"redis", "[--host 127.0.0.1] [--port 6379] [--prefix simba:]", redis_option, redis_open},
#endif
#ifdef SIMBA_HAVE_ZK
    {"zk", "--hosts H:P[,...] [--root /simba] [--session-ms N]", zk_option, zk_open},
#endif
};
#define NBACKENDS (sizeof backends / sizeof backends[0])

/* ---- the worker --------------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

static int logfd = -1;
static char contender[SIMBA_ID_MAX + 1];
static int64_t acquired_at = -1; /* loop ms of the current ownership, -1 when none */
static int n_acquired, n_released;

static void log_event(uint64_t fence, const char *what) {
    struct timespec ts;
    char line[SIMBA_ID_MAX + 128];
    int n;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    n = snprintf(line, sizeof line, "%ld %s %llu %s %lld.%03ld\n", (long)getpid(), contender, (unsigned long long)fence,
                 what, (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, (long)(ts.tv_nsec / 1000 % 1000));
    /* one write(2) per line on an O_APPEND descriptor: lines of several writers never mix */
    if (write(logfd, line, (size_t)n) != n) perror("mp_worker: log write");
}

static void on_acquired(simba_service *svc, const simba_state *st, void *u) {
    (void)u;
    log_event(st->after ? st->after->fence : simba_fence(svc), "acquired");
    acquired_at = simba_now((simba_loop *)u);
    n_acquired++;
}

static void on_released(simba_service *svc, const simba_state *st, void *u) {
    (void)svc;
    (void)u;
    log_event(st->before ? st->before->fence : 0, "released");
    acquired_at = -1;
    n_released++;
}

static void usage(void) {
    size_t i;
    fprintf(stderr,
            "usage: mp_worker --backend NAME --mutex M --duration-ms N --ttl-ms T --transition-ms X\n"
            "                 --log FILE [--hold-ms H] [--rest-ms R] [--id ID] BACKEND-OPTIONS\n");
    for (i = 0; i < NBACKENDS; i++) fprintf(stderr, "  --backend %s %s\n", backends[i].name, backends[i].usage);
}

int main(int argc, char **argv) {
    const worker_backend *wb = NULL;
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_loop_desc ld;
    simba_contend_desc cd;
    char err[512];
    int i, rc = 1, stopping = 0;
    int64_t t_end, rest_until = -1;
    size_t k;

    opt.rest_ms = 1000;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (strncmp(a, "--", 2) != 0 || !v) {
            fprintf(stderr, "mp_worker: bad argument %s\n", a);
            usage();
            return 1;
        }
        a += 2;
        i++;
        if (strcmp(a, "backend") == 0) opt.backend = v;
        else if (strcmp(a, "mutex") == 0) opt.mutex = v;
        else if (strcmp(a, "log") == 0) opt.log = v;
        else if (strcmp(a, "id") == 0) opt.id = v;
        else if (strcmp(a, "duration-ms") == 0) ok = parse_ms(v, &opt.duration_ms);
        else if (strcmp(a, "ttl-ms") == 0) ok = parse_ms(v, &opt.ttl_ms);
        else if (strcmp(a, "transition-ms") == 0) ok = parse_ms(v, &opt.transition_ms);
        else if (strcmp(a, "hold-ms") == 0) ok = parse_ms(v, &opt.hold_ms);
        else if (strcmp(a, "rest-ms") == 0) ok = parse_ms(v, &opt.rest_ms);
        else {
            int used = 0;
            for (k = 0; k < NBACKENDS && !used; k++) used = backends[k].option(a, v);
            ok = used > 0; /* 0: nobody knows it, -1: a bad value */
        }
        if (!ok) {
            fprintf(stderr, "mp_worker: bad option --%s %s\n", a, v);
            usage();
            return 1;
        }
    }
    if (!opt.backend || !opt.mutex || !opt.log || opt.duration_ms <= 0 || opt.ttl_ms <= 0) {
        usage();
        return 1;
    }
    for (k = 0; k < NBACKENDS; k++)
        if (strcmp(backends[k].name, opt.backend) == 0) wb = &backends[k];
    if (!wb) {
        fprintf(stderr, "mp_worker: backend %s is not built in\n", opt.backend);
        return 1;
    }
    logfd = open(opt.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (logfd < 0) {
        perror(opt.log);
        return 1;
    }
    {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal; /* no SA_RESTART: the wait returns at once */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
    }

    memset(&ld, 0, sizeof ld);
    if (simba_loop_new(&ld, &loop) != SIMBA_OK) goto out;
    err[0] = 0;
    if (wb->open(loop, &be, err, sizeof err) != SIMBA_OK) {
        fprintf(stderr, "mp_worker: open %s backend: %s\n", wb->name, err);
        goto out;
    }
    if (opt.id) snprintf(contender, sizeof contender, "%s", opt.id);
    else if (simba_contender_id_host(loop, contender, sizeof contender) != SIMBA_OK) goto out;
    memset(&cd, 0, sizeof cd);
    cd.mutex = opt.mutex;
    cd.contender_id = contender;
    cd.ttl_ms = opt.ttl_ms;
    cd.transition_ms = opt.transition_ms;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    cd.user_data = loop;
    if (simba_contend(loop, be, &cd, &svc) != SIMBA_OK || simba_start(svc) != SIMBA_OK) {
        fprintf(stderr, "mp_worker: contend %s failed\n", opt.mutex);
        goto out;
    }
    t_end = simba_now(loop) + opt.duration_ms;
    for (;;) {
        int64_t now = simba_now(loop), wake = t_end;
        simba_status status = simba_service_status(svc);
        if (stop_signal || now >= t_end) {
            if (status == SIMBA_RUNNING && simba_stop(svc) != SIMBA_OK) break;
            if (status == SIMBA_INITIAL || now >= t_end + 5000) break; /* released (or gave up) */
            wake = now + 50;
        } else if (stopping) {
            if (status == SIMBA_INITIAL) {
                stopping = 0;
                rest_until = now + opt.rest_ms;
                wake = rest_until;
            }
        } else if (rest_until >= 0) {
            if (now >= rest_until) {
                rest_until = -1;
                if (simba_start(svc) != SIMBA_OK) break;
            } else if (rest_until < wake) {
                wake = rest_until;
            }
        } else if (opt.hold_ms > 0 && acquired_at >= 0) {
            if (now >= acquired_at + opt.hold_ms) {
                if (simba_stop(svc) != SIMBA_OK) break;
                stopping = 1;
            } else if (acquired_at + opt.hold_ms < wake) {
                wake = acquired_at + opt.hold_ms;
            }
        }
        if (stopping) wake = now + 10;
        if (simba_wait(loop, wake > now ? wake - now : 0) != SIMBA_OK && !stop_signal) {
            fprintf(stderr, "mp_worker: simba_wait failed\n");
            break;
        }
    }
    rc = simba_service_status(svc) == SIMBA_INITIAL ? 0 : 1;
    fprintf(stderr, "mp_worker %ld (%s): %d acquired, %d released%s\n", (long)getpid(), contender, n_acquired,
            n_released, rc ? ", did not stop cleanly" : "");
out:
    if (loop) simba_loop_free(loop);
    if (logfd >= 0) close(logfd);
    return rc;
}
