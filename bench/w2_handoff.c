/* w2_handoff.c -- W2, handoff: 4 contender processes on one mutex, each holds it 5 ms and
 * releases it, then contends again.
 *
 *   w2_handoff --backend sqlite|redis|redis-cluster|zk|pg|mysql [--secs 6] [--procs 4] [--hold-ms 5] [--rest-ms 0]
 *              [--ttl-ms 10000] [--transition-ms 6000] [--part contend|locker|yield|advisory|notify|notify-write|getlock]
 *              [--label TEXT] [backend options as in bench.h]
 *
 * Figures printed for every run: acquisitions/s against the ideal
 * (min(1000 / hold, procs * 1000 / (hold + rest))); Jain fairness over the per-process
 * acquisition counts ((sum x)^2 / (n * sum x^2), 1 = all equal); the longest wait (from a
 * process asking, "S", to its acquisition, or to the end of the run if it never got it);
 * handoff p50 / p99. Targets are printed next to the figures: Redis and SQLite
 * Jain >= 0.99 and longest wait <= 40 ms without a pause; with a pause (8 processes, hold
 * 50 ms, pause 310 ms) >= 19.5 acquisitions/s on every backend and SQLite handoff p50 <= 1 ms.
 *
 * --part locker: the same with the blocking Locker (simba_locker_lock(lk, -1), hold, then
 * simba_locker_unlock() + simba_locker_unlock_wait(), rest, lock again): the handoff gap is
 * what a user blocked in simba_locker_lock() sees after another process unlocks. Targets:
 * p50 <= 0.5 ms Redis, <= 1 ms SQLite. On PostgreSQL the run is followed by its reference:
 * the same processes and timing on pg_advisory_lock() (--part advisory, blocking libpq,
 * the waiter blocked inside the server), the bar its target is set against, and by a second one: a bare
 * pg_notify() from the holder to the next process's LISTEN (--part notify), the floor under
 * any handoff that wakes its waiter by NOTIFY, as simba_pg's does, and by a third: one
 * statement that updates one row by its key and sends the same pg_notify(), with
 * synchronous_commit off as simba_pg's session has it (--part notify-write): a release that
 * writes the grant to a table before it wakes the waiter, with nothing else to do. Both are
 * prepared statements, as simba_pg's are: sent as text, parsing and planning would dominate
 * the reference (a bare pg_notify() also takes a transaction id and writes a commit record).
 * On MySQL the Locker run is followed by the same processes and timing on GET_LOCK() /
 * RELEASE_LOCK() (--part getlock, a blocking Connector/C client, the waiter blocked inside
 * the server). Target: simba's p50 within 3x GET_LOCK's.
 *
 * --part yield: the same contenders, but a holder whose hold is over calls simba_yield()
 * instead of simba_stop() (it stays queued, behind the others; --rest-ms does not apply);
 * the gap runs from the yield call ("R") to another process's on_acquired. A yield that finds
 * nobody waiting keeps the mutex: logged as an acquisition by the yielder ("kept"), it holds
 * again. The run is followed by its reference, the same processes and timing releasing
 * (--part contend with --rest-ms 0): the row gives the yield p50 over the release p50, and the
 * target is the issue's bar, the yield p50 within the release's spread (<= its p99).
 *
 * The parent spawns --procs copies of itself (worker mode), each with its own loop, backend
 * and connection, all contending for one mutex from one common start time for --secs. A
 * worker drives its loop with simba_wait() (up to the end of its hold when it owns) and logs,
 * with CLOCK_MONOTONIC in us (system-wide on Linux, so the processes' logs merge):
 *     A <us>   inside on_acquired
 *     R <us>   just before simba_stop() of a holder whose 5 ms are over
 * After the release is confirmed (status INITIAL) it rests --rest-ms (default 0) and calls
 * simba_start() again to queue up. With rest 0 the releaser races the waiter its release
 * woke: that run shows fairness (who gets the mutex next). A rest of a few holds keeps the
 * releaser out of that race: that run shows the pure handoff gap.
 * redis-cluster: a cluster seeded at 127.0.0.1:--cluster-port (default 6680), its
 * prefix declared with bench/redis_cluster_declare; targets and PING as for redis (the seed).
 * For Redis the parent then measures the PING round trip p50 (blocking hiredis), back to back
 * and after 5 ms of sleep (a handoff comes after 5 ms of quiet; on a VM, waking a sleeping
 * process costs several times a busy round trip): the gap is reported in those units.
 * The parent merges the logs by time. gap = an acquisition by another process minus the
 * release just before it; acquisitions/s = acquisitions / secs. A release followed by the
 * releaser's own re-acquisition (it re-contends at once, and the backend may let it win
 * again) is counted apart as "re-acquired by the releaser", not as a handoff. Two acquisitions with no
 * release between them would be two owners at once: counted as "overlaps" (must be 0).
 */
#define SIMBA_IMPLEMENTATION
#include "bench.h"

#include <hiredis/hiredis.h>

#define PROG "w2_handoff"
#define MAXP 16

/* ---- worker --------------------------------------------------------------------------- */

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
        if (!v) return;
        evs = v;
        capev = cap;
    }
    evs[nev].t = t;
    evs[nev].kind = kind;
    evs[nev].proc = 0;
    nev++;
}

/* A worker's log, for the parent to merge: one "<kind> <us>" line per event, then END. */
static void print_events(void) {
    long i;
    for (i = 0; i < nev; i++) printf("%c %.1f\n", evs[i].kind, evs[i].t);
    printf("END\n");
    fflush(stdout);
}

/* The references' blocking libpq connection (what: the mode, for the error). */
static PGconn *ref_connect(const char *what) {
    char conninfo[256];
    PGconn *c;
    snprintf(conninfo, sizeof conninfo, "hostaddr=127.0.0.1 port=%s user=postgres password=simba dbname=postgres",
             b_opt("pg-port", "5445"));
    c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) b_die(PROG, "%s: %s", what, PQerrorMessage(c));
    return c;
}

/* The cluster backend (bench.h's b_open knows the standalone one). */
static simba_result w2_open(simba_loop *loop, const char *backend, simba_memstore **store, simba_backend **out) {
    simba_redis_desc d;
    if (strcmp(backend, "redis-cluster") != 0) return b_open(loop, backend, store, out);
    memset(&d, 0, sizeof d);
    d.host = "127.0.0.1";
    d.port = atoi(b_opt("cluster-port", "6680"));
    d.prefix = "bench:";
    d.cluster = 1;
    return simba_redis_open(loop, &d, out);
}

static double acq_us;
static int owner, yielding; /* yielding: simba_yield called, outcome not known yet */
static void on_acq(simba_service *s, const simba_state *st, void *u) {
    (void)s; (void)st; (void)u;
    acq_us = b_now_us();
    owner = 1;
    yielding = 0;
    log_ev('A', acq_us);
}
static void on_rel(simba_service *s, const simba_state *st, void *u) {
    (void)s; (void)st; (void)u;
    owner = 0;
    yielding = 0;
}

/* Locker mode: lock (blocking), hold, unlock and wait for the confirmation, rest, again. */
static int worker_locker(void) {
    const char *backend = b_opt("backend", "redis");
    double start = b_optf("start-us", 0), end = b_optf("end-us", 0), hold_ms = b_optf("hold-ms", 5);
    double rest_ms = b_optf("rest-ms", 0);
    simba_loop *loop;
    simba_memstore *store = NULL;
    simba_backend *be;
    simba_locker *lk;
    simba_locker_desc d;
    simba_result rc;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) b_die(PROG, "loop");
    if ((rc = w2_open(loop, backend, &store, &be)) != SIMBA_OK) b_die(PROG, "open %s: %s", backend, simba_strerror(rc));
    memset(&d, 0, sizeof d);
    d.mutex = b_opt("mutex", "w2-handoff");
    d.contender_id = b_opt("id", "w2");
    d.ttl_ms = (int64_t)b_optf("ttl-ms", 10000);
    d.transition_ms = (int64_t)b_optf("transition-ms", 6000);
    if (simba_locker_new(loop, be, &d, &lk) != SIMBA_OK) b_die(PROG, "locker: %s", simba_loop_errmsg(loop));
    while (b_now_us() < start) simba_wait(loop, (int64_t)((start - b_now_us()) / 1000) + 1);
    while (b_now_us() < end) {
        int64_t left = (int64_t)((end - b_now_us()) / 1000);
        log_ev('S', b_now_us());
        rc = simba_locker_lock(lk, left > 0 ? left : 0);
        if (rc == SIMBA_ETIMEDOUT) break;
        if (rc != SIMBA_OK) b_die(PROG, "lock: %s", simba_loop_errmsg(loop));
        log_ev('A', b_now_us());
        /* hold: keep the loop running (renewals) */
        {
            double until = b_now_us() + hold_ms * 1000;
            while (b_now_us() < until) simba_wait(loop, (int64_t)((until - b_now_us()) / 1000 + 0.999));
        }
        log_ev('R', b_now_us());
        if ((rc = simba_locker_unlock_wait(lk, 5000)) != SIMBA_OK) b_die(PROG, "unlock_wait: %s", simba_loop_errmsg(loop));
        {
            double until = b_now_us() + rest_ms * 1000;
            while (b_now_us() < until) simba_wait(loop, (int64_t)((until - b_now_us()) / 1000 + 0.999));
        }
    }
    print_events();
    simba_locker_free(lk);
    simba_loop_free(loop);
    if (store) simba_memstore_free(store);
    return 0;
}

/* Advisory mode (pg, the Locker run's reference): the same loop on PostgreSQL's own
   session-level advisory lock, with a blocking libpq connection: pg_advisory_lock() waits
   inside the server and the unlock of one process lets the other's statement return. */
static int worker_advisory(void) {
    double start = b_optf("start-us", 0), end = b_optf("end-us", 0), hold_ms = b_optf("hold-ms", 5);
    double rest_ms = b_optf("rest-ms", 0);
    PGconn *c = ref_connect("advisory");
    while (b_now_us() < start) b_sleep_ms((start - b_now_us()) / 1000 + 1);
    while (b_now_us() < end) {
        PGresult *r;
        char q[96];
        int64_t left = (int64_t)((end - b_now_us()) / 1000);
        log_ev('S', b_now_us());
        /* give up at the end of the run: a lock_timeout leaves the last waiter unblocked */
        snprintf(q, sizeof q, "SET lock_timeout = %lld", (long long)(left > 1 ? left : 1));
        PQclear(PQexec(c, q));
        r = PQexec(c, "SELECT pg_advisory_lock(7308604897068483426)");
        if (PQresultStatus(r) != PGRES_TUPLES_OK) { PQclear(r); break; }
        PQclear(r);
        log_ev('A', b_now_us());
        b_sleep_ms(hold_ms);
        log_ev('R', b_now_us());
        PQclear(PQexec(c, "SELECT pg_advisory_unlock(7308604897068483426)"));
        b_sleep_ms(rest_ms);
    }
    PQfinish(c);
    print_events();
    return 0;
}

/* GET_LOCK mode (mysql, the Locker run's reference): the same loop on the server's named lock,
   with a blocking Connector/C connection: GET_LOCK() waits inside the server and the
   RELEASE_LOCK() of one process lets the other's statement return. */
static int worker_getlock(void) {
    double start = b_optf("start-us", 0), end = b_optf("end-us", 0), hold_ms = b_optf("hold-ms", 5);
    double rest_ms = b_optf("rest-ms", 0);
    MYSQL *c = mysql_init(NULL);
    if (!c || !mysql_real_connect(c, "127.0.0.1", "root", "simba", "simba", (unsigned)atoi(b_opt("mysql-port", "3395")), NULL, 0))
        b_die(PROG, "getlock: %s", c ? mysql_error(c) : "out of memory");
    while (b_now_us() < start) b_sleep_ms((start - b_now_us()) / 1000 + 1);
    while (b_now_us() < end) {
        char q[96];
        MYSQL_RES *res;
        MYSQL_ROW row;
        int got;
        log_ev('S', b_now_us());
        /* give up at the end of the run: the last waiter is not left blocked */
        snprintf(q, sizeof q, "SELECT GET_LOCK('simba-bench-getlock', %.3f)", (end - b_now_us()) / 1e6 + 0.001);
        if (mysql_query(c, q) || !(res = mysql_store_result(c))) b_die(PROG, "getlock: %s", mysql_error(c));
        row = mysql_fetch_row(res);
        got = row && row[0] && strcmp(row[0], "1") == 0;
        mysql_free_result(res);
        if (!got) break;
        log_ev('A', b_now_us());
        b_sleep_ms(hold_ms);
        log_ev('R', b_now_us());
        if (mysql_query(c, "DO RELEASE_LOCK('simba-bench-getlock')")) b_die(PROG, "release_lock: %s", mysql_error(c));
        b_sleep_ms(rest_ms);
    }
    mysql_close(c);
    print_events();
    return 0;
}

/* NOTIFY mode (pg, the Locker run's second reference): the smallest push PostgreSQL has, with
   the same processes and timing. A token goes round: its holder holds hold-ms, then sends
   pg_notify() to the next process's channel (a transaction of its own, nothing else in it),
   rests rest-ms; the next process holds from the moment it reads the notification. The floor
   under any handoff that wakes its waiter with LISTEN/NOTIFY: the notifying commit and the
   listener's delivery of it (a transaction on each side), where the advisory unlock wakes a
   waiter blocked in the server. With write (the third reference), the statement also updates
   the holder's own row: a release that writes its grant, and does nothing else, first. */
static int worker_notify(int write) {
    double start = b_optf("start-us", 0), end = b_optf("end-us", 0), hold_ms = b_optf("hold-ms", 5);
    double rest_ms = b_optf("rest-ms", 0);
    int procs = (int)b_optf("procs", 4), me = atoi(b_opt("id", "w2-p0") + 4), holder = me == 0;
    char q[256], chan[96], id[16];
    const char *params[2];
    PGresult *r;
    PGconn *c = ref_connect("notify");
    if (write) { /* one row per process, so that no process waits for another's row lock */
        PQclear(PQexec(c, "BEGIN; SELECT pg_advisory_xact_lock(7308604897068483427);"
                          "CREATE TABLE IF NOT EXISTS w2_notify_write (id int PRIMARY KEY, v bigint NOT NULL); COMMIT"));
        snprintf(q, sizeof q, "INSERT INTO w2_notify_write VALUES (%d, 0) ON CONFLICT (id) DO NOTHING", me);
        PQclear(PQexec(c, q));
        PQclear(PQexec(c, "SET synchronous_commit = off"));
    }
    /* prepared once, as simba_pg's statements are: a handoff neither parses nor plans */
    r = write ? PQprepare(c, "w2n", "WITH u AS (UPDATE w2_notify_write SET v = v + 1 WHERE id = $2::int RETURNING v) "
                                    "SELECT pg_notify($1, '') FROM u", 2, NULL)
              : PQprepare(c, "w2n", "SELECT pg_notify($1, '')", 1, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) b_die(PROG, "notify: prepare: %s", PQerrorMessage(c));
    PQclear(r);
    snprintf(chan, sizeof chan, "w2n_%d_%s", (me + 1) % procs, b_opt("mutex", "m"));
    snprintf(id, sizeof id, "%d", me);
    params[0] = chan;
    params[1] = id;
    snprintf(q, sizeof q, "LISTEN \"w2n_%d_%s\"", me, b_opt("mutex", "m"));
    PQclear(PQexec(c, q));
    while (b_now_us() < start) b_sleep_ms((start - b_now_us()) / 1000 + 1);
    if (holder) log_ev('A', b_now_us());
    while (b_now_us() < end) {
        if (holder) {
            b_sleep_ms(hold_ms);
            log_ev('R', b_now_us());
            r = PQexecPrepared(c, "w2n", write ? 2 : 1, params, NULL, NULL, 0);
            if (PQresultStatus(r) != PGRES_TUPLES_OK) b_die(PROG, "notify: %s", PQerrorMessage(c));
            PQclear(r);
            holder = 0;
            b_sleep_ms(rest_ms);
        } else {
            struct pollfd pf;
            PGnotify *n;
            pf.fd = PQsocket(c);
            pf.events = POLLIN;
            pf.revents = 0;
            if (poll(&pf, 1, 50) > 0 && !PQconsumeInput(c)) break;
            while ((n = PQnotifies(c)) != NULL) {
                if (!holder) log_ev('A', b_now_us());
                holder = 1;
                PQfreemem(n);
            }
        }
    }
    PQfinish(c);
    print_events();
    return 0;
}

static int worker(int yield) {
    const char *backend = b_opt("backend", "redis");
    double start = b_optf("start-us", 0), end = b_optf("end-us", 0), hold_us = b_optf("hold-ms", 5) * 1000;
    double rest_us = b_optf("rest-ms", 0) * 1000, rest_until = 0;
    simba_loop *loop;
    simba_memstore *store = NULL;
    simba_backend *be;
    simba_service *svc;
    simba_contend_desc cd;
    simba_result rc;
    int restart = 0;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) b_die(PROG, "loop");
    if ((rc = w2_open(loop, backend, &store, &be)) != SIMBA_OK) b_die(PROG, "open %s: %s", backend, simba_strerror(rc));
    memset(&cd, 0, sizeof cd);
    cd.mutex = b_opt("mutex", "w2-handoff");
    cd.contender_id = b_opt("id", "w2");
    cd.ttl_ms = (int64_t)b_optf("ttl-ms", 10000);
    cd.transition_ms = (int64_t)b_optf("transition-ms", 6000);
    cd.on_acquired = on_acq;
    cd.on_released = on_rel;
    if (simba_contend(loop, be, &cd, &svc) != SIMBA_OK) b_die(PROG, "contend: %s", simba_loop_errmsg(loop));
    /* connect meanwhile: the loop runs while we wait for the common start */
    while (b_now_us() < start) simba_wait(loop, (int64_t)((start - b_now_us()) / 1000) + 1);
    log_ev('S', b_now_us());
    if (simba_start(svc) != SIMBA_OK) b_die(PROG, "start");
    for (;;) {
        double now = b_now_us(), wait_ms;
        if (now >= end) break;
        if (yielding && simba_is_owner(svc)) { /* kept (nobody waited), or a failed yield settled */
            acq_us = b_now_us();
            owner = 1;
            yielding = 0;
            log_ev('A', acq_us);
        }
        if (owner && now - acq_us >= hold_us) {
            log_ev('R', b_now_us());
            owner = 0;
            if (yield) {
                log_ev('S', b_now_us()); /* the yielder queues again in the same operation */
                yielding = 1;
                if ((rc = simba_yield(svc)) != SIMBA_OK) b_die(PROG, "simba_yield: %s", simba_loop_errmsg(loop));
            } else {
                simba_stop(svc);
                restart = 1;
            }
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
        if (owner) {
            double left = (acq_us + hold_us - now) / 1000;
            if (left < wait_ms) wait_ms = left;
        }
        if (restart == 2) {
            double left = (rest_until - now) / 1000;
            if (left < wait_ms) wait_ms = left;
        }
        /* round up: waking a hair late costs a hold of 5.x ms, waking early a busy loop */
        if ((rc = simba_wait(loop, (int64_t)(wait_ms + 0.999))) != SIMBA_OK) b_die(PROG, "simba_wait: %s", simba_strerror(rc));
    }
    if (simba_service_status(svc) == SIMBA_RUNNING) simba_stop(svc);
    if (owner || yielding) log_ev('R', b_now_us());
    b_wait_until(loop, b_is_initial, svc, b_now_us() + 3e6);
    print_events();
    simba_loop_free(loop);
    if (store) simba_memstore_free(store);
    return 0;
}

/* ---- parent ---------------------------------------------------------------------------- */

/* The round trip a handoff is made of. A handoff follows 5 ms of quiet, and on a virtual
   machine a process (and its vCPU) that slept costs much more to wake than one that is
   busy: measure both, with a plain blocking hiredis PING, p50. */
static int ping_rtt(double *hot_us, double *cold_us) {
    int cl = strcmp(b_opt("backend", "redis"), "redis-cluster") == 0;
    redisContext *c = redisConnect("127.0.0.1", atoi(cl ? b_opt("cluster-port", "6680") : b_opt("redis-port", "6395")));
    b_samples hot = {0}, cold = {0};
    int i;
    if (!c || c->err) {
        if (c) redisFree(c);
        return -1;
    }
    for (i = 0; i < 2200; i++) {
        double t;
        redisReply *r;
        if (i >= 2000) b_sleep_ms(5);
        t = b_now_us();
        r = (redisReply *)redisCommand(c, "PING");
        if (!r) break;
        freeReplyObject(r);
        b_add(i >= 2000 ? &cold : &hot, b_now_us() - t);
    }
    redisFree(c);
    if (i < 2200) return -1;
    b_sort(&hot);
    b_sort(&cold);
    *hot_us = b_pct(&hot, 0.5);
    *cold_us = b_pct(&cold, 0.5);
    free(hot.v);
    free(cold.v);
    return 0;
}

static int ev_cmp(const void *a, const void *b) {
    const ev *x = (const ev *)a, *y = (const ev *)b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->kind == 'R' ? -1 : y->kind == 'R'; /* a release sorts before an acquire at the same us */
}

/* Runs procs workers (with extra arguments) from start to end and merges their events into
   evs[], sorted by time. */
static void run_workers(int argc, char **argv, int procs, const char *mutex, double start, double end, const char *part) {
    pid_t pids[MAXP];
    int fds[MAXP], i;
    for (i = 0; i < procs; i++) {
        char *args[44];
        int a = 0, j;
        char id[32], st[64], en[64];
        snprintf(id, sizeof id, "w2-p%d", i);
        snprintf(st, sizeof st, "%.0f", start);
        snprintf(en, sizeof en, "%.0f", end);
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
        if (part) { /* b_opt takes the first occurrence: this one wins over argv's */
            args[a++] = (char *)"--part";
            args[a++] = (char *)part;
        }
        for (j = 1; j < argc && a < 42; j++) args[a++] = argv[j]; /* backend and timing options */
        args[a] = NULL;
        pids[i] = b_spawn(args, &fds[i]);
        if (pids[i] < 0) b_die(PROG, "spawn failed");
    }
    /* collect: each worker prints its events at the end */
    nev = 0;
    for (i = 0; i < procs; i++) {
        char line[128];
        int n;
        while ((n = b_read_line(fds[i], line, sizeof line, end + 15e6)) > 0) {
            if (strcmp(line, "END") == 0) break;
            log_ev(line[0], atof(line + 2));
            evs[nev - 1].proc = i;
        }
        close(fds[i]);
        if (b_reap(pids[i], b_now_us() + 5e6) != 0) fprintf(stderr, "%s: worker %d did not exit cleanly\n", PROG, i);
    }
    qsort(evs, (size_t)nev, sizeof *evs, ev_cmp);
}

/* The references: for PostgreSQL's Locker handoff, the same processes and timing on
   pg_advisory_lock (part "advisory", see worker_advisory) or on a bare pg_notify (part
   "notify", worker_notify); for the yield, a release (part "contend"). Returns the release ->
   other's acquire p50 in us (p99 in *p99 if not NULL), or -1. */
static double ref_pct(int argc, char **argv, int procs, double secs, const char *part, const char *mutex, long *n,
                      double *p99) {
    double start = b_now_us() + 1.0e6, end = start + secs * 1e6, p50;
    b_samples g = {0};
    long k;
    run_workers(argc, argv, procs, mutex, start, end, part);
    for (k = 1; k < nev; k++) {
        long q = k - 1;
        if (evs[k].kind != 'A') continue;
        while (q >= 0 && evs[q].kind == 'S') q--;
        if (q >= 0 && evs[q].kind == 'R' && evs[q].proc != evs[k].proc) b_add(&g, evs[k].t - evs[q].t);
    }
    *n = g.n;
    if (!g.n) return -1;
    b_sort(&g);
    p50 = b_pct(&g, 0.5);
    if (p99) *p99 = b_pct(&g, 0.99);
    free(g.v);
    return p50;
}

int main(int argc, char **argv) {
    const char *backend;
    double secs, start, end;
    int procs, i, overlaps = 0;
    long acqs = 0, self = 0, k, count[MAXP];
    double asked[MAXP], longest = 0, jain = 0;
    b_samples gaps = {0};
    char mutex[64];
    b_argc = argc;
    b_argv = argv;
    if (b_opt("worker", NULL))
        return strcmp(b_opt("part", "contend"), "locker") == 0     ? worker_locker()
               : strcmp(b_opt("part", "contend"), "advisory") == 0 ? worker_advisory()
               : strcmp(b_opt("part", "contend"), "notify") == 0   ? worker_notify(0)
               : strcmp(b_opt("part", "contend"), "notify-write") == 0 ? worker_notify(1)
               : strcmp(b_opt("part", "contend"), "getlock") == 0 ? worker_getlock()
               : strcmp(b_opt("part", "contend"), "yield") == 0    ? worker(1)
                                                                   : worker(0);
    backend = b_opt("backend", "redis");
    secs = b_optf("secs", 6);
    procs = (int)b_optf("procs", 4);
    if (procs < 2 || procs > MAXP) b_die(PROG, "--procs must be 2..%d", MAXP);
    snprintf(mutex, sizeof mutex, "w2-%s-%ld", backend, (long)getpid());
    start = b_now_us() + 1.5e6;
    end = start + secs * 1e6;
    run_workers(argc, argv, procs, mutex, start, end, NULL);
    if (getenv("BENCH_DEBUG"))
        for (k = 0; k < nev; k++) fprintf(stderr, "%c p%d %.3f ms\n", evs[k].kind, evs[k].proc, (evs[k].t - start) / 1000);
    for (i = 0; i < procs; i++) { count[i] = 0; asked[i] = -1; }
    for (k = 0; k < nev; k++) {
        int pr = evs[k].proc;
        if (evs[k].kind == 'S') { asked[pr] = evs[k].t; continue; }
        if (evs[k].kind != 'A') continue;
        acqs++;
        count[pr]++;
        if (asked[pr] >= 0 && evs[k].t - asked[pr] > longest) longest = evs[k].t - asked[pr];
        asked[pr] = -1;
        /* the last event before this acquire that is not an 'S' */
        {
            long q = k - 1;
            while (q >= 0 && evs[q].kind == 'S') q--;
            if (q >= 0 && evs[q].kind == 'R') {
                if (evs[q].proc != pr) b_add(&gaps, evs[k].t - evs[q].t);
                else self++;
            } else if (q >= 0) {
                overlaps++;
            }
        }
    }
    /* a process still waiting at the end has waited since it asked */
    for (i = 0; i < procs; i++)
        if (asked[i] >= 0 && end - asked[i] > longest) longest = end - asked[i];
    {
        double sum = 0, sq = 0;
        for (i = 0; i < procs; i++) { sum += count[i]; sq += (double)count[i] * count[i]; }
        jain = sq > 0 ? sum * sum / (procs * sq) : 0;
    }
    b_sort(&gaps);
    fprintf(stderr, "%s %s: %ld acquisitions, %ld handoffs to another process, %ld re-acquired by the releaser, %d overlaps\n",
            PROG, backend, acqs, gaps.n, self, overlaps);
    {
        int locker = strcmp(b_opt("part", "contend"), "locker") == 0, yield = strcmp(b_opt("part", "contend"), "yield") == 0;
        int sq = strcmp(backend, "sqlite") == 0, rd = strncmp(backend, "redis", 5) == 0;
        int pg = strcmp(backend, "pg") == 0; /* the targets as on Redis */
        int my = strcmp(backend, "mysql") == 0;
        double hold = b_optf("hold-ms", 5), rest = b_optf("rest-ms", 0);
        double ideal = 1000.0 / hold, per = procs * 1000.0 / (hold + rest);
        double p50 = b_pct(&gaps, 0.5) / 1000, p99 = b_pct(&gaps, 0.99) / 1000, rate = (double)acqs / secs;
        const char *w = b_opt("label", NULL);
        const char *timing = strcmp(backend, "zk") == 0
                                 ? b_fmt("session timeout %s ms", b_opt("zk-session-ms", "2000"))
                                 : b_fmt("ttl %s / transition %s ms", b_opt("ttl-ms", "10000"), b_opt("transition-ms", "6000"));
        char counts[256];
        int off = 0;
        if (per < ideal) ideal = per;
        if (!w) w = yield ? b_fmt("W2 yield (%d procs, hold %.0f ms)", procs, hold)
                          : b_fmt("W2 %s (%d procs, hold %.0f ms, %s %.0f ms)", locker ? "Locker handoff" : "handoff", procs,
                                  hold, "pause", rest);
        counts[0] = 0;
        for (i = 0; i < procs && off < (int)sizeof counts - 16; i++)
            off += snprintf(counts + off, sizeof counts - (size_t)off, "%s%ld", i ? " / " : "", count[i]);
        if (yield) {
            /* the reference: the same processes and timing, each releasing and asking again at once */
            char *rargv[48];
            int ra;
            long nrel = 0;
            double rp99 = -1, rp50;
            for (ra = 0; ra < argc && ra < 44; ra++) rargv[ra] = argv[ra];
            rargv[ra++] = (char *)"--rest-ms"; /* b_opt takes the first: only if argv has none */
            rargv[ra++] = (char *)"0";
            rargv[ra] = NULL;
            rp50 = ref_pct(ra, rargv, procs, secs, "contend", b_fmt("%s-release", mutex), &nrel, &rp99);
            b_row(w, backend, "yield → other's on_acquired p50 / p99",
                  gaps.n ? b_fmt("%.3f / %.3f ms", p50, p99) : "n/a (no handoff to another process)",
                  b_fmt("%ld handoffs, %ld kept by the yielder, %d overlaps; %s; same processes and timing, release → "
                        "next acquire p50 / p99 %s (%ld handoffs)",
                        gaps.n, self, overlaps, timing, rp50 >= 0 ? b_fmt("%.3f / %.3f ms", rp50 / 1000, rp99 / 1000) : "n/a", nrel),
                  rp50 > 0 && gaps.n ? b_fmt("%.2f × release", p50 * 1000 / rp50) : "", "p50 ≤ release p99",
                  gaps.n && rp50 >= 0 ? b_verdict_max(p50, rp99 / 1000, "ms") : "**missed**: no handoff");
        } else if (locker) {
            double tgt = rd || pg ? 0.5 : sq ? 1 : 0, adv = -1, ntf = -1, ntw = -1;
            long nadv = 0, nntf = 0, nntw = 0;
            if (pg) adv = ref_pct(argc, argv, procs, secs, "advisory", "advisory", &nadv, NULL);
            if (pg) ntf = ref_pct(argc, argv, procs, secs, "notify", "notify", &nntf, NULL);
            if (pg) ntw = ref_pct(argc, argv, procs, secs, "notify-write", "notify-write", &nntw, NULL);
            if (my) {
                double glp99 = -1, gl = ref_pct(argc, argv, procs, secs, "getlock", "getlock", &nadv, &glp99);
                b_row(w, backend, "Locker handoff unlock → other's lock returns p50 / p99",
                      gaps.n ? b_fmt("%.3f / %.3f ms", p50, p99) : "n/a (no handoff to another process)",
                      gl >= 0 ? b_fmt("%ld handoffs; %s; same processes and timing: GET_LOCK p50 / p99 %.3f / %.3f ms (%ld handoffs)",
                                      gaps.n, timing, gl / 1000, glp99 / 1000, nadv)
                              : b_fmt("%ld handoffs; %s; GET_LOCK: no handoff", gaps.n, timing),
                      gl > 0 && gaps.n ? b_fmt("%.1f × GET_LOCK", p50 * 1000 / gl) : "", "p50 ≤ 3 × GET_LOCK",
                      gl > 0 && gaps.n ? b_verdict_max(p50, 3 * gl / 1000, "ms") : "**missed**: no handoff");
            } else            b_row(w, backend, "Locker handoff unlock → other's lock returns p50 / p99",
                  gaps.n ? b_fmt("%.3f / %.3f ms", p50, p99) : "n/a (no handoff to another process)",
                  adv >= 0 ? b_fmt("%ld handoffs; %s; same processes and timing: pg_advisory_lock p50 %.3f ms (%ld handoffs), "
                                   "a bare pg_notify to a listener p50 %.3f ms (%ld), the same in one statement with "
                                   "an UPDATE of one row p50 %.3f ms (%ld)",
                                   gaps.n, timing, adv / 1000, nadv, ntf / 1000, nntf, ntw / 1000, nntw)
                           : b_fmt("%ld handoffs; %s", gaps.n, timing),
                  adv > 0 && gaps.n ? b_fmt("%.1f × advisory", p50 * 1000 / adv) : "", tgt > 0 ? b_fmt("p50 ≤ %.1f ms", tgt) : "(none)",
                  tgt > 0 ? (gaps.n ? b_verdict_max(p50, tgt, "ms") : "**missed**: no handoff") : "");
        } else {
            int pause = rest > 0;
            b_row(w, backend, "acquisitions/s", b_fmt("%.1f", rate), b_fmt("ideal %.1f", ideal), b_fmt("%.0f %%", 100 * rate / ideal),
                  pause ? "≥ 19.5" : "", pause ? b_verdict_min(rate, 19.5, "/s") : "");
            b_row(w, backend, "Jain fairness over per-process acquisitions", b_fmt("%.3f", jain), b_fmt("counts %s", counts), "",
                  !pause && (rd || sq || pg || my) ? "≥ 0.99" : "", !pause && (rd || sq || pg || my) ? b_verdict_min(jain, 0.99, "") : "");
            b_row(w, backend, "longest wait (ask → acquire, or → end of run)", b_fmt("%.1f ms", longest / 1000), timing, "",
                  !pause && (rd || sq || pg || my) ? "≤ 40 ms" : "", !pause && (rd || sq || pg || my) ? b_verdict_max(longest / 1000, 40, "ms") : "");
            if (rd) {
                double hot = 0, cold = 0;
                int ok = ping_rtt(&hot, &cold) == 0;
                b_row(w, backend, "handoff release → next acquire p50 / p99",
                      gaps.n ? b_fmt("%.3f / %.3f ms", p50, p99) : "n/a (no handoff to another process)",
                      ok ? b_fmt("PING p50 %.3f ms back-to-back, %.3f ms after 5 ms idle", hot / 1000, cold / 1000) : "",
                      ok && gaps.n ? b_fmt("%.1f idle round trips", p50 * 1000 / cold) : "", "",
                      b_fmt("%ld handoffs, %ld re-acquired by the releaser, %d overlaps", gaps.n, self, overlaps));
            } else {
                b_row(w, backend, "handoff release → next acquire p50 / p99",
                      gaps.n ? b_fmt("%.3f / %.3f ms", p50, p99) : "n/a (no handoff to another process)",
                      b_fmt("%ld handoffs, %ld re-acquired by the releaser, %d overlaps", gaps.n, self, overlaps), "",
                      pause && sq ? "p50 ≤ 1 ms" : "",
                      pause && sq ? (gaps.n ? b_verdict_max(p50, 1, "ms") : "**missed**: no handoff") : "");
            }
        }
    }
    if (overlaps) return 2;
    return 0;
}
