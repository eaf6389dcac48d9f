/* mp_worker.c -- one contender process for the multi-process test (tests/mp_test.sh).
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
 * Acting as owner (the fault harness, tests/fault_run.sh): the worker drives the loop with
 * its own poll(2) + simba_poll() and, right after every poll, asks simba_is_owner(). While
 * that says yes it "works": a line
 *     <pid> <contender> <fence> work <ms>
 * at most every --work-ms (default 20; 0 = never), and always after a gap of more than 100
 * ms between polls (a pause: SIGSTOP). mp_check verifies that every work line lies inside
 * this contender's own ownership and nobody else's. Right after each poll the worker also
 * compares simba_is_owner() with what the callbacks told it, and logs
 *     <pid> <contender> <fence> violation:owner-not-told <ms>   owner, but no on_acquired
 *     <pid> <contender> <fence> violation:told-after-lapse <ms> on_acquired without
 *         on_released although the lease had ended before the poll began and the poll
 *         finished its work (it did not return 0, "call again at once")
 *     <pid> <contender> <fence> violation:fence-changed <ms>    simba_fence() moved within
 *         one ownership
 * A "released" line carries a sixth field: the end of the local lease as last known (the
 * ownership cannot have been used after it, since simba_is_owner() checks the time); for
 * a process frozen past its lease, that is when its ownership really ended.
 *
 * With --fenced-file F every work line is followed by a write of the fence to F, a fenced
 * resource shared by every worker: it keeps the highest fence written and refuses a lower
 * one; the worker logs "wrote" (accepted) or "refused". The log's times come from the
 * CLOCK_MONOTONIC system call, not libc's, so a worker whose clocks libfaketime runs fast or
 * slow still logs on the common clock (a "released" line's lease end is converted to it).
 *
 * Semaphores and read-write locks: --permits N (N > 1: one of at most N holders) and
 * --shared 1 (a reader) go to the contend desc; a reader writes "acquired:shared" instead of
 * "acquired", so that mp_check knows which holders may share.
 *
 * Inspector (--inspect-ms N): contends with the id "inspector-<pid>" after every worker
 * has stopped and waits up to N ms to own the mutex (with --permits N: N contenders
 * "inspector-<pid>-<k>" must all hold at once, every permit back; a read-write lock's
 * inspector is a writer, alone only when nobody holds); appends "inspect-free" (owned it,
 * then released) or "inspect-leaked" (someone still holds it: the owner id it saw is
 * printed) to the log, and exits 0 or 3.
 *
 * Backends: "sql" always; "redis" when built with -DSIMBA_HAVE_REDIS (-lhiredis), "zk" with
 * -DSIMBA_HAVE_ZK (-I/usr/include/zookeeper -DTHREADED -lzookeeper_mt), "pg" with
 * -DSIMBA_HAVE_PG (-I/usr/include/postgresql -lpq), "mysql" with -DSIMBA_HAVE_MYSQL
 * (pkg-config libmariadb), each with its own
 * options (see the backends[] table; a new backend is one more row).
 */
#define _DEFAULT_SOURCE /* syscall(2), flock(2) */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"
#ifdef SIMBA_HAVE_REDIS
#include "../simba_redis.h"
#endif
#ifdef SIMBA_HAVE_ZK
#include "../simba_zk.h"
#endif
#ifdef SIMBA_HAVE_PG
#include "../simba_pg.h"
#endif
#ifdef SIMBA_HAVE_MYSQL
#include "../simba_mysql.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- options ------------------------------------------------------------------------ */

static struct {
    const char *backend, *mutex, *log, *id;
    const char *fenced_file; /* --fenced-file: every work line is also a write there */
    int64_t duration_ms, ttl_ms, transition_ms, hold_ms, rest_ms, work_ms, inspect_ms;
    int64_t permits, shared;
    /* sql */
    const char *sql_path, *sql_table;
#ifdef SIMBA_HAVE_REDIS
    const char *redis_host, *redis_prefix;
    int64_t redis_port;
    int64_t redis_cluster; /* --cluster 1: a Redis Cluster seeded at host:port */
    char *redis_sentinels; /* --sentinels ip:port,...: behind Sentinel, with --master-name */
    const char *redis_master;
    int64_t redis_wait_replicas; /* --wait-replicas N: desc.wait_replicas */
#endif
#ifdef SIMBA_HAVE_ZK
    const char *zk_hosts, *zk_root;
    int64_t zk_session_ms;
    int zk_log; /* the client library's INFO lines on stderr, stamped with CLOCK_MONOTONIC ms */
#endif
#ifdef SIMBA_HAVE_PG
    const char *pg_host, *pg_table, *pg_user, *pg_password;
    int64_t pg_port;
#endif
#ifdef SIMBA_HAVE_MYSQL
    const char *my_host, *my_table, *my_user, *my_password, *my_db;
    int64_t my_port, my_connections;
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
    else if (strcmp(key, "cluster") == 0) return parse_ms(val, &opt.redis_cluster) && opt.redis_cluster <= 1 ? 1 : -1;
    else if (strcmp(key, "sentinels") == 0) opt.redis_sentinels = (char *)val; /* argv: split in place */
    else if (strcmp(key, "master-name") == 0) opt.redis_master = val;
    else if (strcmp(key, "wait-replicas") == 0) return parse_ms(val, &opt.redis_wait_replicas) && opt.redis_wait_replicas < 100 ? 1 : -1;
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
    d.max_lease_ms = opt.ttl_ms + opt.transition_ms; /* the quarantine after a loss: one lease */
    d.cluster = (int)opt.redis_cluster;
    d.wait_replicas = (int)opt.redis_wait_replicas;
    if (opt.redis_sentinels) {
        static const char *sen[9];
        char *save = NULL, *tok;
        int n = 0;
        for (tok = strtok_r(opt.redis_sentinels, ",", &save); tok && n < 8; tok = strtok_r(NULL, ",", &save)) sen[n++] = tok;
        d.sentinels = sen;
        d.master_name = opt.redis_master ? opt.redis_master : "simba";
    }
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
    else if (strcmp(key, "zk-log") == 0) opt.zk_log = strcmp(val, "0") != 0;
    else return 0;
    return 1;
}

/* Which server each session talked to, and when: what a fault run needs to explain a verdict.
   Called on the client library's threads; one fprintf is one line. */
static void zk_log_line(const char *message) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(stderr, "zk %.3f %s\n", (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6, message);
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
    if (opt.zk_log) {
        zoo_set_debug_level(ZOO_LOG_LEVEL_INFO);
        d.zk_log = zk_log_line;
    }
    rc = simba_zk_open(loop, &d, out);
    if (rc != SIMBA_OK) snprintf(err, cap, "%s", simba_strerror(rc));
    return rc;
}
#endif

#ifdef SIMBA_HAVE_PG
/* Prefixed names: the first backend that knows an option takes it (sql has --table, redis --port). */
static int pg_option(const char *key, const char *val) {
    if (strcmp(key, "pg-host") == 0) opt.pg_host = val;
    else if (strcmp(key, "pg-table") == 0) opt.pg_table = val;
    else if (strcmp(key, "pg-user") == 0) opt.pg_user = val;
    else if (strcmp(key, "pg-password") == 0) opt.pg_password = val;
    else if (strcmp(key, "pg-port") == 0) return parse_ms(val, &opt.pg_port) && opt.pg_port < 65536 ? 1 : -1;
    else return 0;
    return 1;
}

static simba_result pg_open(simba_loop *loop, simba_backend **out, char *err, size_t cap) {
    simba_pg_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.hostaddr = opt.pg_host ? opt.pg_host : "127.0.0.1";
    d.port = (int)opt.pg_port;
    d.table = opt.pg_table;
    d.user = opt.pg_user;
    d.password = opt.pg_password;
    d.dbname = "postgres";
    d.max_lease_ms = opt.ttl_ms + opt.transition_ms; /* the quarantine after a crash: one lease */
    rc = simba_pg_open(loop, &d, out);
    if (rc != SIMBA_OK) snprintf(err, cap, "%s: %s", simba_strerror(rc), simba_loop_errmsg(loop));
    return rc;
}
#endif

#ifdef SIMBA_HAVE_MYSQL
static int my_option(const char *key, const char *val) {
    if (strcmp(key, "my-host") == 0) opt.my_host = val;
    else if (strcmp(key, "my-table") == 0) opt.my_table = val;
    else if (strcmp(key, "my-user") == 0) opt.my_user = val;
    else if (strcmp(key, "my-password") == 0) opt.my_password = val;
    else if (strcmp(key, "my-db") == 0) opt.my_db = val;
    else if (strcmp(key, "my-port") == 0) return parse_ms(val, &opt.my_port) && opt.my_port < 65536 ? 1 : -1;
    else if (strcmp(key, "my-connections") == 0)
        return parse_ms(val, &opt.my_connections) && opt.my_connections <= SIMBA_MYSQL_CONNECTIONS_MAX ? 1 : -1;
    else return 0;
    return 1;
}

static simba_result my_open(simba_loop *loop, simba_backend **out, char *err, size_t cap) {
    simba_mysql_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.host = opt.my_host ? opt.my_host : "127.0.0.1";
    d.port = (int)opt.my_port;
    d.connections = (int)opt.my_connections;
    d.table = opt.my_table;
    d.user = opt.my_user;
    d.password = opt.my_password;
    d.db = opt.my_db ? opt.my_db : "simba";
    d.max_lease_ms = opt.ttl_ms + opt.transition_ms; /* the quarantine after a crash: one lease */
    rc = simba_mysql_open(loop, &d, out);
    if (rc != SIMBA_OK) snprintf(err, cap, "%s: %s", simba_strerror(rc), simba_loop_errmsg(loop));
    return rc;
}
#endif

static const worker_backend backends[] = {
    {"sql", "--path FILE [--table NAME]", sql_option, sql_open},
#ifdef SIMBA_HAVE_REDIS
    {"redis", "[--host 127.0.0.1] [--port 6379] [--prefix simba:] [--cluster 1] [--sentinels IP:P,... [--master-name simba]] [--wait-replicas N]", redis_option, redis_open},
#endif
#ifdef SIMBA_HAVE_ZK
    {"zk", "--hosts H:P[,...] [--root /simba] [--session-ms N] [--zk-log 1]", zk_option, zk_open},
#endif
#ifdef SIMBA_HAVE_PG
    {"pg", "[--pg-host 127.0.0.1] [--pg-port 5432] [--pg-table simba_mutex] [--pg-user U] [--pg-password P]", pg_option, pg_open},
#endif
#ifdef SIMBA_HAVE_MYSQL
    {"mysql", "[--my-host 127.0.0.1] [--my-port 3306] [--my-table simba_mutex] [--my-user U] [--my-password P] [--my-db simba] [--my-connections N]",
     my_option, my_open},
#endif
};
#define NBACKENDS (sizeof backends / sizeof backends[0])

/* ---- the worker --------------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

static int logfd = -1;
static char contender[SIMBA_ID_MAX + 1];
static int64_t acquired_at = -1; /* loop ms of the current ownership, -1 when none */
static int n_acquired, n_released, n_work, n_violations;
static int told;              /* on_acquired seen, on_released not yet */
static uint64_t told_fence;   /* fence of the told ownership */
static int64_t lease_end = -1; /* local lease end of the told ownership, as last seen */

/* The log's clock: CLOCK_MONOTONIC read by the system call itself, so that a worker run
   under libfaketime (its loop's clock fast or slow) still logs on the machine's common clock. */
static int64_t mono_ms(double *frac) {
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    if (frac) *frac = (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The loop's clock minus the log's (0 unless libfaketime shifts or scales the loop's). */
static int64_t loop_skew_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - mono_ms(NULL);
}

/* extra < 0: no sixth field */
static void log_event2(uint64_t fence, const char *what, int64_t extra) {
    double t;
    char line[SIMBA_ID_MAX + 160];
    int n;
    mono_ms(&t);
    if (extra >= 0) extra -= loop_skew_ms(); /* a lease end on the loop's clock, logged on the log's */
    if (extra >= 0)
        n = snprintf(line, sizeof line, "%ld %s %llu %s %.3f %lld\n", (long)getpid(), contender,
                     (unsigned long long)fence, what, t, (long long)extra);
    else
        n = snprintf(line, sizeof line, "%ld %s %llu %s %.3f\n", (long)getpid(), contender, (unsigned long long)fence,
                     what, t);
    /* one write(2) per line on an O_APPEND descriptor: lines of several writers never mix */
    if (write(logfd, line, (size_t)n) != n) perror("mp_worker: log write");
}
static void log_event(uint64_t fence, const char *what) { log_event2(fence, what, -1); }

/* The fenced resource (--fenced-file): a file holding the highest fence written, shared by
   every worker; a write with a lower fence is refused. The line is logged under the file's
   lock, so the log's order of "wrote"/"refused" is the resource's order. */
static void fenced_write(uint64_t fence) {
    char buf[32];
    unsigned long long top = 0;
    ssize_t n;
    int fd = open(opt.fenced_file, O_RDWR | O_CREAT, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        perror("mp_worker: fenced file");
        if (fd >= 0) close(fd);
        return;
    }
    n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    if (n > 0) top = strtoull(buf, NULL, 10);
    if (fence < top) {
        log_event(fence, "refused");
    } else {
        n = snprintf(buf, sizeof buf, "%llu\n", (unsigned long long)fence);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) perror("mp_worker: fenced write");
        log_event(fence, "wrote");
    }
    close(fd); /* drops the lock */
}

static void on_acquired(simba_service *svc, const simba_state *st, void *u) {
    uint64_t f = st->after ? st->after->fence : simba_fence(svc);
    log_event(f, opt.shared ? "acquired:shared" : "acquired");
    acquired_at = simba_now((simba_loop *)u);
    told = 1;
    told_fence = f;
    lease_end = st->after ? st->after->ttl_at : -1;
    n_acquired++;
}

static void on_released(simba_service *svc, const simba_state *st, void *u) {
    int64_t now = simba_now((simba_loop *)u), end = now;
    (void)svc;
    /* The view before the step-down is our own lease when it still names us. */
    if (st->before && strcmp(st->before->id, contender) == 0 && st->before->fence == told_fence &&
        st->before->ttl_at > lease_end)
        lease_end = st->before->ttl_at;
    if (lease_end >= 0 && lease_end < end) end = lease_end;
    log_event2(st->before ? st->before->fence : 0, "released", end);
    acquired_at = -1;
    told = 0;
    lease_end = -1;
    n_released++;
}

static void usage(void) {
    size_t i;
    fprintf(stderr,
            "usage: mp_worker --backend NAME --mutex M --duration-ms N --ttl-ms T --transition-ms X\n"
            "                 --log FILE [--hold-ms H] [--rest-ms R] [--id ID] [--work-ms W]\n"
            "                 [--inspect-ms N] [--permits N] [--shared 0|1] [--fenced-file F]\n"
            "                 BACKEND-OPTIONS\n");
    for (i = 0; i < NBACKENDS; i++) fprintf(stderr, "  --backend %s %s\n", backends[i].name, backends[i].usage);
}

/* Waits up to ms on the loop's descriptors (EINTR ends the wait early: a signal). */
static void wait_fds(simba_loop *loop, int64_t ms) {
    struct pollfd pfd[16];
    int n = simba_fds(loop, pfd, 16);
    if (n < 0) n = 0;
    if (n > 16) n = 16;
    if (ms > 1000) ms = 1000;
    if (ms < 0) ms = 0;
    if (poll(pfd, (nfds_t)n, (int)ms) < 0 && errno != EINTR) perror("mp_worker: poll");
}

/* After every poll: act as owner only if simba_is_owner() says so, and check it against the
   callbacks. more: the poll left work for the next (it returned 0: its budget ran out, a
   step-down may be among what waits), so a lapse it did not report is not yet a violation. */
static void after_poll(simba_service *svc, int64_t poll_began, int64_t gap, int more) {
    static int64_t last_work = -1;
    /* one read: the fence is 0 once the lease has ended, which may fall between two calls */
    uint64_t f = simba_fence(svc);
    int own = f != 0;
    int64_t now = mono_ms(NULL);
    if (own) {
        simba_owner o;
        if (simba_owner_get(svc, &o) == SIMBA_OK && strcmp(o.id, contender) == 0 && o.ttl_at > lease_end)
            lease_end = o.ttl_at;
        if (!told) {
            log_event(f, "violation:owner-not-told");
            n_violations++;
        } else if (f != told_fence) {
            log_event(f, "violation:fence-changed");
            n_violations++;
        }
        if (opt.work_ms > 0 && (last_work < 0 || now - last_work >= opt.work_ms || gap > 100)) {
            log_event(f, "work");
            if (opt.fenced_file) fenced_write(f);
            last_work = now;
            n_work++;
        }
    } else if (told && lease_end >= 0 && lease_end < poll_began && !more) {
        /* The lease had ended before this poll began: the poll had to step down. */
        log_event(told_fence, "violation:told-after-lapse");
        n_violations++;
    }
}

/* After every worker wrote the file (and its WAL) through simba_sql.h's VFS, which pads
   WAL appends: the file, read through SQLite's own default VFS, must be intact. The
   harness fails the run unless it reads "integrity ok". */
static void sql_integrity(void) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    const char *v = NULL;
    int rc = sqlite3_open_v2(opt.sql_path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) v = (const char *)sqlite3_column_text(st, 0);
    if (v && strcmp(v, "ok") == 0) fprintf(stderr, "mp_worker inspect: %s: integrity ok\n", opt.sql_path);
    else fprintf(stderr, "mp_worker inspect: %s: integrity FAILED: %s\n", opt.sql_path, v ? v : sqlite3_errmsg(db));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* The name is free when every permit can be held at once: a semaphore's N inspectors all
   hold together, a mutex's or a read-write lock's one (a writer) holds. */
#define INSPECT_MAX 16
static int inspect(simba_loop *loop, simba_backend *be) {
    simba_service *svc[INSPECT_MAX];
    simba_contend_desc cd;
    simba_owner o;
    char ids[INSPECT_MAX][SIMBA_ID_MAX + 1];
    char seen[SIMBA_ID_MAX + 1] = "";
    uint64_t seen_fence = 0;
    int64_t t0 = simba_now(loop), deadline = t0 + opt.inspect_ms;
    int got = 0, k, n = opt.permits > 1 ? (int)opt.permits : 1, busy;
    if (n > INSPECT_MAX) {
        fprintf(stderr, "mp_worker inspect: --permits %d is above the inspector's %d\n", n, INSPECT_MAX);
        return 1;
    }
    snprintf(contender, sizeof contender, "inspector-%ld", (long)getpid());
    for (k = 0; k < n; k++) {
        if (n > 1) snprintf(ids[k], sizeof ids[k], "inspector-%ld-%d", (long)getpid(), k);
        else snprintf(ids[k], sizeof ids[k], "%s", contender);
        memset(&cd, 0, sizeof cd);
        cd.mutex = opt.mutex;
        cd.contender_id = ids[k];
        cd.ttl_ms = opt.ttl_ms;
        cd.transition_ms = opt.transition_ms;
        cd.permits = (int)opt.permits;
        if (simba_contend(loop, be, &cd, &svc[k]) != SIMBA_OK || simba_start(svc[k]) != SIMBA_OK) return 1;
    }
    while (simba_now(loop) < deadline && !stop_signal) {
        int64_t w = simba_poll(loop);
        int holding = 0;
        for (k = 0; k < n; k++) {
            holding += simba_is_owner(svc[k]);
            if (simba_owner_get(svc[k], &o) == SIMBA_OK && o.id[0] && strncmp(o.id, "inspector-", 10) != 0) {
                snprintf(seen, sizeof seen, "%s", o.id);
                seen_fence = o.fence;
            }
        }
        if (holding == n) {
            got = 1;
            break;
        }
        wait_fds(loop, w < 0 ? 10 : w > 50 ? 50 : w);
    }
    if (got) {
        log_event(simba_fence(svc[0]), "inspect-free");
        fprintf(stderr, "mp_worker inspect: %s is free (%d permit%s held after %lld ms%s%s)\n", opt.mutex, n,
                n > 1 ? "s" : "", (long long)(simba_now(loop) - t0), seen[0] ? "; earlier holder seen: " : "", seen);
    } else {
        log_event(seen_fence, "inspect-leaked");
        fprintf(stderr, "mp_worker inspect: %s still held after %lld ms by %s (fence %llu)\n", opt.mutex,
                (long long)opt.inspect_ms, seen[0] ? seen : "(unknown)", (unsigned long long)seen_fence);
    }
    /* give it back, bounded */
    for (k = 0; k < n; k++) simba_stop(svc[k]);
    deadline = simba_now(loop) + 3000;
    do {
        int64_t w = simba_poll(loop);
        busy = 0;
        for (k = 0; k < n; k++) busy |= simba_service_status(svc[k]) != SIMBA_INITIAL;
        if (busy) wait_fds(loop, w < 0 ? 10 : w > 50 ? 50 : w);
    } while (busy && simba_now(loop) < deadline);
    return got ? 0 : 3;
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
    int64_t t_end, rest_until = -1, last_poll, t0_loop, t0_log;
    size_t k;

    opt.rest_ms = 1000;
    opt.work_ms = 20;
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
        else if (strcmp(a, "work-ms") == 0) ok = parse_ms(v, &opt.work_ms);
        else if (strcmp(a, "inspect-ms") == 0) ok = parse_ms(v, &opt.inspect_ms);
        else if (strcmp(a, "fenced-file") == 0) opt.fenced_file = v;
        else if (strcmp(a, "permits") == 0) ok = parse_ms(v, &opt.permits) && opt.permits <= SIMBA_PERMITS_MAX;
        else if (strcmp(a, "shared") == 0) ok = parse_ms(v, &opt.shared) && opt.shared <= 1;
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
    if (!opt.backend || !opt.mutex || !opt.log || (opt.duration_ms <= 0 && opt.inspect_ms <= 0) || opt.ttl_ms <= 0) {
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
    if (opt.inspect_ms > 0) {
        rc = inspect(loop, be);
        if (strcmp(wb->name, "sql") == 0) sql_integrity();
        goto out;
    }
    if (opt.id) snprintf(contender, sizeof contender, "%s", opt.id);
    else if (simba_contender_id_host(loop, contender, sizeof contender) != SIMBA_OK) goto out;
    memset(&cd, 0, sizeof cd);
    cd.mutex = opt.mutex;
    cd.contender_id = contender;
    cd.ttl_ms = opt.ttl_ms;
    cd.transition_ms = opt.transition_ms;
    cd.permits = (int)opt.permits;
    cd.shared = (int)opt.shared;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    cd.user_data = loop;
    if (simba_contend(loop, be, &cd, &svc) != SIMBA_OK || simba_start(svc) != SIMBA_OK) {
        fprintf(stderr, "mp_worker: contend %s failed\n", opt.mutex);
        goto out;
    }
    t0_loop = simba_now(loop);
    t0_log = mono_ms(NULL);
    t_end = t0_loop + opt.duration_ms;
    last_poll = simba_now(loop);
    for (;;) {
        int64_t now = simba_now(loop), wake = t_end, w, began;
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
        began = simba_now(loop);
        w = simba_poll(loop);
        if (w < 0) {
            fprintf(stderr, "mp_worker: simba_poll failed: %s\n", simba_strerror((int)w));
            break;
        }
        after_poll(svc, began, began - last_poll, w == 0);
        last_poll = simba_now(loop);
        if (stop_signal) continue;
        now = simba_now(loop);
        if (wake > now + w) wake = now + w;
        /* an owner works (and so polls) at least every work_ms */
        if (told && opt.work_ms > 0 && now + opt.work_ms < wake) wake = now + opt.work_ms;
        wait_fds(loop, wake - now);
    }
    rc = simba_service_status(svc) == SIMBA_INITIAL ? 0 : 1;
    fprintf(stderr, "mp_worker %ld (%s): %d acquired, %d released, %d work, %d violations%s\n", (long)getpid(),
            contender, n_acquired, n_released, n_work, n_violations, rc ? ", did not stop cleanly" : "");
    /* the loop's clock against the machine's: how fast libfaketime really ran it (x1.000 unfaked) */
    t0_loop = simba_now(loop) - t0_loop;
    t0_log = mono_ms(NULL) - t0_log;
    fprintf(stderr, "mp_worker %ld (%s): loop clock %lld ms in %lld ms of the machine's, x%.3f\n", (long)getpid(),
            contender, (long long)t0_loop, (long long)t0_log, t0_log > 0 ? (double)t0_loop / (double)t0_log : 1.0);
out:
    if (loop) simba_loop_free(loop);
    if (logfd >= 0) close(logfd);
    return rc;
}
