/* w4_scale.c -- W4, scale: many mutexes in one process and one loop.
 *
 *   w4_scale --part steady --backend memory|sqlite|redis|zk|pg|mysql [--mutexes 10000] [--secs 20]
 *            [--ttl-ms 10000] [--transition-ms 6000] [--sql FILE] [--redis-port P]
 *            [--zk HOST:PORT] [--pg-port P] [--mysql-port P [--mysql-connections N]]
 *            [--server-pid PID [--with-children 1]] [--label TEXT]   (the backend column)
 *            [--sql-checkpoint -1]   (SQLite: no automatic WAL checkpoint in the loop)
 *            [--sql-checkpointer-ms MS]   (SQLite: a thread runs simba_sql_checkpoint every MS)
 *            [--sql-checkpointer-cpu other|same]   (that thread: on a CPU the loop is not
 *                                                   pinned to, if there is one; or with it)
 *            [--own-timeout-s 120]
 *            [--mxfast0 1]   (glibc: mallopt(M_MXFAST, 0) first, no fastbins; see below)
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
 *     poll      the longest single simba_poll call in the window (target <= 1 ms), and
 *               that poll's own CPU time (CLOCK_THREAD_CPUTIME_ID) next to the most CPU
 *               time any poll took: wall time above CPU time is the OS running others
 *               (or a system call blocking, e.g. an fsync inside a SQLite commit).
 *     requests  ACQUIREs the loop sent per second (simba_loop_stats attempts).
 *     server    the store's own count over the window, per second: Redis INFO commandstats
 *               calls (and usec), ZooKeeper srvr "Received", PostgreSQL pg_stat_database
 *               xact_commit (database postgres; the side connection's own reads add ~0.1/s),
 *               SQLite write transactions (a VFS shim counts the WAL write lock); the server's
 *               CPU (Redis INFO cpu, else /proc of --server-pid and with --with-children its
 *               children); next to one round trip measured just before the window (PING,
 *               zoo_exists, SELECT 1; SQLite: one autocommit UPDATE on a side table).
 * --mxfast0: libzookeeper_mt's I/O thread frees the buffers the loop's thread allocated for
 *   each call; glibc parks such small chunks in the arena's fastbins, and a later allocation
 *   of the loop's thread that finds no fitting chunk merges all of them first, inside a
 *   zoo_a* call. With fastbins off there is none of it: a run with --mxfast0 1 shows what a
 *   ZooKeeper poll costs without that merge.
 * SQLite on a disk: the longest poll is reported as measured, not held to 1 ms (a page the
 *   kernel dropped is read back inside a poll: the disk's time, not simba's); on a tmpfs,
 *   with checkpoint = -1 and a checkpoint thread, it is held to the target.
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
#define _GNU_SOURCE /* sched_setaffinity and CPU_SET for the checkpoint thread */
#include <stddef.h>
static void *store_alloc(size_t n);
static void store_free(void *p);
#define SIMBA_MALLOC(sz) store_alloc(sz)
#define SIMBA_FREE(p) store_free(p)
#define SIMBA_IMPLEMENTATION
#include "bench.h"

#include <math.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/vfs.h>

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

/* 1 when the directory of the database file is on a tmpfs (Linux statfs magic). */
static int on_tmpfs(const char *file) {
    char dir[4096];
    struct statfs sf;
    const char *slash = strrchr(file, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - file) : 1, slash ? file : ".");
    if (!dir[0]) snprintf(dir, sizeof dir, "/");
    return statfs(dir, &sf) == 0 && sf.f_type == 0x01021994; /* TMPFS_MAGIC */
}

/* ---- SQLite: checkpoints off the loop ---------------------------------------------------- */

/* What an application that opens SQLite with checkpoint = -1 does: a thread of its own
   copies the WAL into the database (simba_sql_checkpoint) every --sql-checkpointer-ms, so
   the fsyncs never happen in the loop's thread. Its CPU counts in the process's. */
#include <pthread.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
static struct {
    const char *path;
    int every_ms;
    volatile int stop;
    pthread_t th;
    long calls, busy, errors, most_frames;
    double most_us;
    int other_cpu; /* 1: moved to CPUs the loop is not pinned to */
} ckpt;

/* The checkpoint thread takes the fsyncs and the copying off the loop's core. scripts/
   bench.sh pins the whole process (threads inherit it) to the CPUs other than the servers'
   (on 2 CPUs: one): left there, the thread shares the loop's only core, and each
   checkpoint's CPU preempts the loop's polls (CFS' wakeup granularity, ~1 ms), which is
   not how an application would place it, nor how the OS places it unpinned. So it moves
   to the CPUs outside the process's mask, when there are any (the servers are idle while
   SQLite runs). Returns 1 when it moved. */
static int ckpt_other_cpu(void) {
    cpu_set_t mine, other;
    long i, n = sysconf(_SC_NPROCESSORS_ONLN);
    int any = 0;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) return 0;
    CPU_ZERO(&other);
    for (i = 0; i < n && i < CPU_SETSIZE; i++)
        if (!CPU_ISSET(i, &mine)) {
            CPU_SET(i, &other);
            any = 1;
        }
    return any && sched_setaffinity(0, sizeof other, &other) == 0;
}

static void *ckpt_main(void *arg) {
    (void)arg;
    if (strcmp(b_opt("sql-checkpointer-cpu", "other"), "other") == 0) ckpt.other_cpu = ckpt_other_cpu();
    while (!ckpt.stop) {
        int frames = 0, copied = 0;
        double t0 = b_now_us(), us;
        simba_result rc = simba_sql_checkpoint(ckpt.path, &frames, &copied, NULL, 0);
        us = b_now_us() - t0;
        ckpt.calls++;
        if (rc == SIMBA_EBUSY) ckpt.busy++;
        else if (rc != SIMBA_OK) ckpt.errors++;
        if (rc == SIMBA_OK && frames > ckpt.most_frames) ckpt.most_frames = frames;
        if (us > ckpt.most_us) ckpt.most_us = us;
        poll(NULL, 0, ckpt.every_ms);
    }
    return NULL;
}

/* ---- server-side cost (steady part) ------------------------------------------------------ */

/* CPU seconds of a process (and its direct children: PostgreSQL's backends) from /proc. */
static double proc_cpu_s(long pid, int with_children) {
    char path[300], buf[1024], *p;
    unsigned long ut, st;
    long ppid;
    double sum = 0, tick = (double)sysconf(_SC_CLK_TCK);
    struct dirent *e;
    DIR *d;
    FILE *f;
    if (pid <= 0 || !(d = opendir("/proc"))) return 0;
    while ((e = readdir(d))) {
        long this_pid;
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        this_pid = atol(e->d_name);
        if (this_pid != pid && !with_children) continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        /* after "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
        if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')) &&
            sscanf(p + 1, " %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ppid, &ut, &st) == 3 &&
            (this_pid == pid || ppid == pid))
            sum += (double)(ut + st) / tick;
        fclose(f);
    }
    closedir(d);
    return sum;
}

/* SQLite write transactions: a shim over the default VFS counts the WAL write lock (shm
   lock slot 0, exclusive) each time it is taken, in every connection of this process. */
static long long sql_writes;
static sqlite3_vfs shim_vfs, *real_vfs;
static const sqlite3_io_methods *shim_orig[4];
static sqlite3_io_methods shim_meth[4];
static int shim_n;
static int shim_lock(sqlite3_file *f, int ofst, int n, int flags, int k) {
    int rc = shim_orig[k]->xShmLock(f, ofst, n, flags);
    if (rc == SQLITE_OK && ofst == 0 && flags == (SQLITE_SHM_LOCK | SQLITE_SHM_EXCLUSIVE)) sql_writes++;
    return rc;
}
static int shim_lock0(sqlite3_file *f, int o, int n, int fl) { return shim_lock(f, o, n, fl, 0); }
static int shim_lock1(sqlite3_file *f, int o, int n, int fl) { return shim_lock(f, o, n, fl, 1); }
static int shim_lock2(sqlite3_file *f, int o, int n, int fl) { return shim_lock(f, o, n, fl, 2); }
static int shim_lock3(sqlite3_file *f, int o, int n, int fl) { return shim_lock(f, o, n, fl, 3); }
static int shim_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
    int rc = real_vfs->xOpen(real_vfs, name, f, flags, out), k;
    (void)v;
    if (rc != SQLITE_OK || !f->pMethods || f->pMethods->iVersion < 2 || !f->pMethods->xShmLock) return rc;
    for (k = 0; k < shim_n && shim_orig[k] != f->pMethods; k++) {
    }
    if (k == shim_n) {
        int (*locks[4])(sqlite3_file *, int, int, int) = {shim_lock0, shim_lock1, shim_lock2, shim_lock3};
        if (shim_n == 4) return rc; /* a fifth kind of file goes uncounted */
        shim_orig[k] = f->pMethods;
        shim_meth[k] = *f->pMethods;
        shim_meth[k].xShmLock = locks[k];
        shim_n++;
    }
    f->pMethods = &shim_meth[k];
    return rc;
}
static void shim_install(void) {
    real_vfs = sqlite3_vfs_find(NULL);
    if (!real_vfs) b_die(PROG, "no default sqlite VFS");
    shim_vfs = *real_vfs;
    shim_vfs.zName = "w4count";
    shim_vfs.xOpen = shim_open;
    if (sqlite3_vfs_register(&shim_vfs, 1) != SQLITE_OK) b_die(PROG, "sqlite3_vfs_register failed");
}

/* One sample of the server's counters. */
typedef struct srv_sample {
    double reqs;    /* redis: commands; zk: packets received; pg: committed transactions; sqlite: write transactions */
    double srv_cpu; /* server process CPU seconds (redis INFO cpu, else /proc) */
    double extra;   /* redis: usec inside commands */
} srv_sample;

static double info_field(const char *s, const char *key) {
    const char *p = strstr(s, key);
    return p ? atof(p + strlen(key)) : 0;
}

static int zk_srvr(char *out, int cap) {
    const char *hp = b_opt("zk", "127.0.0.1:2195"), *colon = strrchr(hp, ':');
    struct sockaddr_in a;
    int fd, n = 0;
    double end = b_now_us() + 3e6;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(colon ? colon + 1 : "2195"));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, "srvr", 4) != 4) {
        close(fd);
        return -1;
    }
    while (n < cap - 1 && b_now_us() < end) {
        ssize_t r = read(fd, out + n, (size_t)(cap - 1 - n));
        if (r <= 0) break;
        n += (int)r;
    }
    close(fd);
    out[n] = 0;
    return n > 0 ? 0 : -1;
}

static redisContext *srv_redis;
static PGconn *srv_pg;

static void srv_setup(const char *backend) {
    if (strcmp(backend, "redis") == 0) {
        srv_redis = redisConnect("127.0.0.1", atoi(b_opt("redis-port", "6395")));
        if (!srv_redis || srv_redis->err) b_die(PROG, "redis side connection failed");
    } else if (strcmp(backend, "pg") == 0) {
        char ci[200];
        snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres",
                 atoi(b_opt("pg-port", "5445")));
        srv_pg = PQconnectdb(ci);
        if (PQstatus(srv_pg) != CONNECTION_OK) b_die(PROG, "pg side connection: %s", PQerrorMessage(srv_pg));
    }
}

static srv_sample srv_take(const char *backend) {
    srv_sample s;
    long pid = (long)b_optf("server-pid", 0);
    memset(&s, 0, sizeof s);
    if (strcmp(backend, "redis") == 0) {
        redisReply *r = (redisReply *)redisCommand(srv_redis, "INFO commandstats");
        const char *p;
        if (!r || r->type != REDIS_REPLY_STRING) b_die(PROG, "INFO commandstats failed");
        for (p = r->str; (p = strstr(p, "cmdstat_")); p++) {
            const char *c = strstr(p, "calls="), *u = strstr(p, "usec=");
            if (c) s.reqs += atof(c + 6);
            if (u) s.extra += atof(u + 5);
        }
        freeReplyObject(r);
        r = (redisReply *)redisCommand(srv_redis, "INFO cpu");
        if (!r || r->type != REDIS_REPLY_STRING) b_die(PROG, "INFO cpu failed");
        s.srv_cpu = info_field(r->str, "used_cpu_sys:") + info_field(r->str, "used_cpu_user:");
        freeReplyObject(r);
        return s;
    }
    if (strcmp(backend, "zk") == 0) {
        char buf[2048];
        if (zk_srvr(buf, sizeof buf) != 0) b_die(PROG, "zk srvr failed");
        s.reqs = info_field(buf, "Received: ");
    } else if (strcmp(backend, "pg") == 0) {
        PGresult *r = PQexec(srv_pg, "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'");
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) b_die(PROG, "pg_stat_database: %s", PQerrorMessage(srv_pg));
        s.reqs = atof(PQgetvalue(r, 0, 0));
        PQclear(r);
    } else if (strcmp(backend, "sqlite") == 0) {
        s.reqs = (double)sql_writes;
    }
    s.srv_cpu = proc_cpu_s(pid, b_optf("with-children", 0) > 0);
    return s;
}

/* What one round trip (one write on SQLite) costs, measured in the same run: p50 of 200. */
static double one_op_us(const char *backend) {
    b_samples s = {0};
    double r;
    int i;
    sqlite3 *db = NULL;
    zhandle_t *zh = NULL;
    if (strcmp(backend, "zk") == 0) {
        double end = b_now_us() + 10e6;
        zh = zookeeper_init(b_opt("zk", "127.0.0.1:2195"), NULL, 2000, NULL, NULL, 0);
        while (zh && zoo_state(zh) != ZOO_CONNECTED_STATE && b_now_us() < end) b_sleep_ms(5);
        if (!zh || zoo_state(zh) != ZOO_CONNECTED_STATE) b_die(PROG, "zk side session not connected");
    }
    if (strcmp(backend, "sqlite") == 0) {
        if (sqlite3_open(b_opt("sql", "build/bench-sql/w4.db"), &db) != SQLITE_OK) b_die(PROG, "sqlite side open");
        sqlite3_exec(db, "PRAGMA synchronous=NORMAL; CREATE TABLE IF NOT EXISTS w4_raw (k INTEGER PRIMARY KEY, v INTEGER);"
                         "INSERT OR IGNORE INTO w4_raw VALUES (1, 0);", NULL, NULL, NULL);
    }
    for (i = 0; i < 200; i++) {
        double a = b_now_us();
        if (srv_redis) {
            redisReply *rr = (redisReply *)redisCommand(srv_redis, "PING");
            if (!rr) b_die(PROG, "PING failed");
            freeReplyObject(rr);
        } else if (srv_pg) {
            PGresult *pr = PQexec(srv_pg, "SELECT 1");
            PQclear(pr);
        } else if (db) {
            if (sqlite3_exec(db, "UPDATE w4_raw SET v = v + 1 WHERE k = 1", NULL, NULL, NULL) != SQLITE_OK)
                b_die(PROG, "sqlite raw update: %s", sqlite3_errmsg(db));
        } else if (zh) {
            struct Stat st;
            if (zoo_exists(zh, "/", 0, &st) != ZOK) b_die(PROG, "zoo_exists failed");
        } else {
            break;
        }
        b_add(&s, b_now_us() - a);
    }
    if (db) sqlite3_close(db);
    if (zh) zookeeper_close(zh);
    b_sort(&s);
    r = b_pct(&s, 0.5);
    free(s.v);
    return r;
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
    const char *backend = b_opt("backend", "memory"), *label = b_opt("label", backend);
    long nm = (long)b_optf("mutexes", 10000), i, nsvc = 2 * nm, polls = 0, waited = 0;
    double own_s = b_optf("own-timeout-s", 120); /* every mutex owned within this, or the run fails */
    double secs = b_optf("secs", 20), ttl = b_optf("ttl-ms", 10000), transition = b_optf("transition-ms", 6000);
    double t, t_owned, w0, w1, c0, c1, maxpoll = 0, maxpoll_cpu = 0, maxcpu = 0, poll_us, renew_period_ms, ref_us = 0;
    srv_sample sv0, sv1;
    simba_stats st0, st1;
    simba_zk_stats zs0, zs1; /* zk: how many renewals one session check answered */
    long long live0, live_ss, store0 = 0, allocs0;
    simba_loop_desc ld;
    simba_loop *loop;
    simba_memstore *store = NULL;
    simba_backend *be;
    simba_service **svcs;
    simba_result rc;
    int64_t wait = 0;
    if (b_optf("mxfast0", 0) > 0) {
#ifdef __GLIBC__
        if (mallopt(M_MXFAST, 0) != 1) b_die(PROG, "mallopt(M_MXFAST, 0) refused");
        static char fl[64]; /* b_fmt's buffers rotate: the label must outlive many cells */
        snprintf(fl, sizeof fl, "%s, glibc fastbins off", backend);
        label = b_opt("label", fl);
#else
        b_die(PROG, "--mxfast0 needs glibc");
#endif
    }
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
    if (strcmp(backend, "sqlite") == 0) shim_install();
    if ((rc = b_open(loop, backend, &store, &be)) != SIMBA_OK) b_die(PROG, "open %s: %s", backend, simba_strerror(rc));
    ckpt.every_ms = (int)b_optf("sql-checkpointer-ms", 0);
    if (strcmp(b_opt("sql-checkpointer-cpu", "other"), "other") != 0 && strcmp(b_opt("sql-checkpointer-cpu", "other"), "same") != 0)
        b_die(PROG, "--sql-checkpointer-cpu is other or same, not %s", b_opt("sql-checkpointer-cpu", "other"));
    if (strcmp(backend, "sqlite") == 0 && ckpt.every_ms > 0) {
        ckpt.path = b_opt("sql", "build/bench-sql/w4.db");
        label = b_opt("label", "sqlite, checkpoints in a thread");
        if (pthread_create(&ckpt.th, NULL, ckpt_main, NULL) != 0) b_die(PROG, "pthread_create");
    }
    srv_setup(backend);
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
    while (owners < nm && b_now_us() - t < own_s * 1e6) {
        wait = b_tick(loop, wait, &poll_us);
        if (wait < 0) b_die(PROG, "simba_poll: %s", simba_strerror((int)wait));
    }
    t_owned = b_now_us();
    fprintf(stderr, "%s %s: %ld of %ld mutexes owned after %.2f s\n", PROG, backend, owners, nm, (t_owned - t) / 1e6);
    /* A start-up that does not finish is a result too: say so, then measure what there is. */
    b_row(b_fmt("W4 scale (%ld mutexes × 2, one loop)", nm), label, "every mutex owned after start (all services at once)",
          owners < nm ? b_fmt("only %ld of %ld after %.0f s", owners, nm, own_s) : b_fmt("%.2f s", (t_owned - t) / 1e6),
          owners < nm ? "the window below is not steady state" : "", "", b_fmt("≤ %.0f s (--own-timeout-s)", own_s),
          owners < nm ? "**missed**" : "met");
    /* Owners renew every ttl - margin (margin = ttl / 3): start half a period later so that
       a window of whole periods holds each renewal burst exactly once. */
    renew_period_ms = ttl - ttl / 3;
    w0 = t_owned + renew_period_ms * 500;
    while ((t = b_now_us()) < w0) {
        int64_t cap = (int64_t)((w0 - t) / 1000) + 1;
        wait = b_tick(loop, wait < cap ? wait : cap, &poll_us);
    }
    ref_us = one_op_us(backend);
    st0.size = sizeof st0;
    simba_loop_stats(loop, &st0);
    sv0 = srv_take(backend);
    memset(&zs0, 0, sizeof zs0);
    memset(&zs1, 0, sizeof zs1);
    if (strcmp(backend, "zk") == 0) simba_zk_stats_get(be, &zs0);
    c0 = cpu_s();
    allocs0 = loop_allocs;
    w0 = b_now_us();
    w1 = w0 + secs * 1e6;
    while ((t = b_now_us()) < w1) {
        int64_t cap = (int64_t)((w1 - t) / 1000) + 1;
        wait = b_tick(loop, wait < cap ? wait : cap, &poll_us);
        if (wait < 0) b_die(PROG, "simba_poll: %s", simba_strerror((int)wait));
        if (poll_us > maxpoll) {
            maxpoll = poll_us;
            maxpoll_cpu = b_last_poll_cpu_us;
        }
        if (b_last_poll_cpu_us > maxcpu) maxcpu = b_last_poll_cpu_us;
        if (b_last_poll_waits > 0) waited++;
        polls++;
    }
    c1 = cpu_s();
    if (ckpt.path) {
        ckpt.stop = 1;
        pthread_join(ckpt.th, NULL);
    }
    if (strcmp(backend, "zk") == 0) simba_zk_stats_get(be, &zs1);
    w1 = b_now_us();
    sv1 = srv_take(backend);
    st1.size = sizeof st1;
    simba_loop_stats(loop, &st1);
    live_ss = loop_live;
    {
        double cpu_pct = 100 * (c1 - c0) / ((w1 - w0) / 1e6);
        double per_svc = (double)(live_ss - live0) / (double)nsvc;
        char w[96]; /* b_fmt's buffers rotate: the label must outlive many cells */
        snprintf(w, sizeof w, "W4 scale (%ld mutexes × 2, one loop)", nm);
        const char *timing = b_fmt("ttl %.0f / transition %.0f ms, %.0f s window", ttl, transition, (w1 - w0) / 1e6);
        b_row(w, label, "steady-state CPU", b_fmt("%.2f %% of a core", cpu_pct), timing, "", "≤ 2 %",
              b_verdict_max(cpu_pct, 2, "pts"));
        b_row(w, label, "core memory per service (loop allocator)", b_fmt("%.0f B", per_svc),
              strcmp(backend, "memory") == 0
                  ? b_fmt("store (server side): %.0f B per mutex", (double)(store_live - store0) / (double)nm)
                  : strcmp(backend, "sqlite") == 0 ? b_fmt("sqlite3_memory_used: %s B in all", b_num((double)sqlite3_memory_used()))
                                                   : "(backend allocations through the loop allocator count too)",
              "", "≤ 1 KiB", b_verdict_max(per_svc, 1024, "B"));
        /* SQLite's automatic checkpoint (checkpoint = 0) copies the WAL and fsyncs inside the
           commit that crosses 1,000 pages, and on a disk a poll may read back a page the
           kernel dropped: both the storage's time, measured and not held to the target.
           On a tmpfs with checkpoint = -1 (and a checkpoint thread) the target holds. */
        int sqlite_measured = strcmp(backend, "sqlite") == 0 &&
                              (atoi(b_opt("sql-checkpoint", "0")) == 0 || !on_tmpfs(b_opt("sql", "")));
        b_row(w, label, "longest simba_poll in the window", b_fmt("%.2f ms", maxpoll / 1000),
              b_fmt("%ld polls; %lld loop allocations in the window", polls, loop_allocs - allocs0), "",
              sqlite_measured ? "none on a disk or with SQLite's own checkpoint (≤ 1 ms: tmpfs, checkpoint = -1 and a "
                                "checkpoint thread)"
                              : "≤ 1 ms",
              sqlite_measured ? "measured" : b_verdict_max(maxpoll / 1000, 1, "ms"));
        /* Wall time includes time the OS ran others: the thread's CPU time tells the poll's own work. */
        b_row(w, label, "simba_poll's own CPU time (CLOCK_THREAD_CPUTIME_ID)",
              b_fmt("%.2f ms in the longest poll; %.2f ms at most in any poll", maxpoll_cpu / 1000, maxcpu / 1000),
              b_fmt("%ld of %ld polls waited in the kernel (a voluntary context switch: I/O, a lock, an fsync); "
                    "wall time minus CPU time in the others: the OS ran something else", waited, polls),
              "", "", "");
        {
            double win = (w1 - w0) / 1e6, att = (double)(st1.attempts - st0.attempts) / win;
            double reqs = (sv1.reqs - sv0.reqs) / win, scpu = 100 * (sv1.srv_cpu - sv0.srv_cpu) / win;
            const char *what = "", *ref = "", *cost = "";
            if (strcmp(backend, "redis") == 0) {
                what = "commands/s (INFO commandstats)";
                ref = b_fmt("PING round trip p50 %.0f µs; %.1f µs inside commands per s", ref_us, (sv1.extra - sv0.extra) / win);
            } else if (strcmp(backend, "zk") == 0) {
                what = "packets received/s (srvr)";
                ref = b_fmt("zoo_exists round trip p50 %.0f µs", ref_us);
            } else if (strcmp(backend, "pg") == 0) {
                what = "xact_commit/s (pg_stat_database)";
                ref = b_fmt("SELECT 1 round trip p50 %.0f µs", ref_us);
            } else if (strcmp(backend, "sqlite") == 0) {
                what = "write transactions/s (WAL write lock taken)";
                ref = b_fmt("one autocommit UPDATE p50 %.0f µs (%.1f %% of a core at this rate)", ref_us, reqs * ref_us / 1e4);
            }
            b_row(w, label, "requests/s sent by the loop (ACQUIRE, renewals included)", b_fmt("%.0f", att),
                  b_fmt("%.3f per mutex per s", att / (double)nm), "", "", "");
            if (*what) {
                cost = strcmp(backend, "sqlite") == 0 ? "(in this process: counted in its CPU above)"
                       : b_optf("server-pid", 0) > 0 || strcmp(backend, "redis") == 0 ? b_fmt("server CPU %.2f %% of a core", scpu)
                                                                                      : "server CPU: not measured (no --server-pid)";
                b_row(w, label, b_fmt("server-side cost: %s", what), b_fmt("%.0f", reqs), ref, "", cost, "");
            }
            if (ckpt.path)
                b_row(w, label, b_fmt("WAL checkpoints off the loop (a thread, every %d ms, %s; the loop: checkpoint = %s)",
                                        ckpt.every_ms, ckpt.other_cpu ? "on a CPU the loop is not pinned to" : "on the loop's CPUs",
                                        b_opt("sql-checkpoint", "0")),
                      b_fmt("WAL at most %ld frames", ckpt.most_frames),
                      b_fmt("%ld checkpoints (%ld busy, %ld failed), the longest %.2f ms, from the start of the run",
                            ckpt.calls, ckpt.busy, ckpt.errors, ckpt.most_us / 1000),
                      "", "", ckpt.errors ? "**failed**" : "");
            if (strcmp(backend, "zk") == 0)
                b_row(w, label, "requests answered by a session check (no listing)",
                      b_fmt("%.0f of %.0f per s", (double)(zs1.checked - zs0.checked) / win,
                            (double)(zs1.requests - zs0.requests) / win),
                      b_fmt("%.1f session checks/s; %.0f ZooKeeper calls/s in all", (double)(zs1.session_checks - zs0.session_checks) / win,
                            (double)(zs1.zk_calls - zs0.zk_calls) / win),
                      "", "", "");
        }
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
        if (simba__memstore_read(store, name, &rep, ob, sizeof ob) != SIMBA_OK || rep.ttl_left_ms < TTL - (TTL - TTL / 3) - W)
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
