/* fault_fence.c -- the fenced write against a paused owner, several processes, one store.
 *
 *   fault_fence pg|mysql|sql [rounds]   (pg: the server on 127.0.0.1:$SIMBA_PG_PORT, default 5440;
 *                                       mysql: MariaDB on 127.0.0.1:$SIMBA_MYSQL_PORT, default 3390)
 *
 * Each round forks two writer processes, A and B, that contend for one mutex and, whenever
 * they have been granted a fence, write rows (writer, fence) into a log table of the
 * application's in the lock's own database, each write through the fenced write (PostgreSQL:
 * BEGIN, simba_pg_check_fence, INSERT, COMMIT; MySQL: START TRANSACTION,
 * simba_mysql_check_fence, INSERT, COMMIT; SQLite: BEGIN IMMEDIATE, simba_sql_check_fence,
 * INSERT, COMMIT). A writer keeps writing with the last fence it was granted whatever its
 * loop has told it since: it is the owner that believes it still owns.
 *   1. A owns and writes; B waits in line.
 *   2. A is SIGSTOPped past its lease: on a request (SIGUSR1) it stops itself between two
 *      writes, after checking nothing, as an owner paused between "I am the owner" and its
 *      write; in the external rounds (PostgreSQL, MySQL) the driver SIGSTOPs it wherever it
 *      is, in a transaction too, whose row lock the server's idle_in_transaction_session_timeout
 *      (MariaDB: idle_transaction_timeout) then ends.
 *   3. B is granted and writes. 4. A is resumed (SIGCONT) and at once writes again, with
 *      its old fence, for a second: every one of those writes must be refused.
 * Then the stored rows are read in commit order (a serial key taken inside the write's
 * transaction, which holds the lock every grant waits for): no row of a fence may follow a
 * row of a greater fence. Prints attempted / accepted / refused writes per phase and exits 0
 * only with 0 stale writes accepted, every resumed write refused, and the rows in order.
 * FAULT_FENCE_UNCHECKED=1 is the control: the same writes without the check, which must fail.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"
#include "../simba_pg.h"
#include "../simba_mysql.h"

#include <errno.h>
#include <stdarg.h>
#include <libpq-fe.h>
#include <mysql.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TTL 600
#define TR 300

static int use_pg, use_my; /* neither: sql */
static int unchecked; /* FAULT_FENCE_UNCHECKED=1: the control, the same writes without the check */
static int pg_port, my_port;
static char db_path[300];  /* sql */
static char table[64];     /* pg: the simba table of this run; sql: the default */
static char log_table[80]; /* the application's rows */

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the application's connection and its fenced write ---------------------------------- */

typedef struct app {
    PGconn *pg;
    MYSQL *my;
    sqlite3 *sq;
} app;

/* MySQL: a connection to the test server's database simba (NULL and a message when not) */
static MYSQL *my_connect(void) {
    MYSQL *c = mysql_init(NULL);
    unsigned int to = 3;
    if (!c) return NULL;
    mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &to);
    if (!mysql_real_connect(c, "127.0.0.1", "root", "simba", "simba", (unsigned)my_port, NULL, 0)) {
        fprintf(stderr, "fault_fence: server on port %d: %s\n", my_port, mysql_error(c));
        mysql_close(c);
        return NULL;
    }
    return c;
}

static int my_ok(MYSQL *c, const char *sql) {
    MYSQL_RES *r;
    if (mysql_query(c, sql) != 0) return 0;
    r = mysql_store_result(c);
    if (r) mysql_free_result(r);
    return 1;
}

/* One fenced write on MySQL (see fenced_write). */
static simba_result my_fenced_write(app *a, const char *name, const char *writer, uint64_t fence, int round, char *err,
                                    size_t cap) {
    char sql[200];
    simba_result rc;
    if (!my_ok(a->my, "START TRANSACTION")) {
        snprintf(err, cap, "START TRANSACTION: %s", mysql_error(a->my));
        mysql_close(a->my); /* the server may have ended the session: a new one next time */
        a->my = NULL;
        return SIMBA_ECONN;
    }
    rc = unchecked ? SIMBA_OK : simba_mysql_check_fence(a->my, table, name, fence, err, cap);
    snprintf(sql, sizeof sql, "INSERT INTO `%s` (writer, fence, round) VALUES ('%c', %llu, %d)", log_table, writer[0],
             (unsigned long long)fence, round);
    if (rc == SIMBA_OK && !my_ok(a->my, sql)) rc = SIMBA_EBACKEND;
    if (rc == SIMBA_OK && !my_ok(a->my, "COMMIT")) rc = SIMBA_EBACKEND;
    if (rc != SIMBA_OK) {
        if (rc == SIMBA_EBACKEND) snprintf(err, cap, "%s", mysql_error(a->my));
        if (!my_ok(a->my, "ROLLBACK")) {
            mysql_close(a->my);
            a->my = NULL;
        }
    }
    return rc;
}

static int pg_ok(PGconn *c, const char *sql, int n, const char *const *v) {
    PGresult *r = PQexecParams(c, sql, n, NULL, v, NULL, NULL, 0);
    int ok = r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
    PQclear(r);
    return ok;
}

static int app_open(app *a) {
    memset(a, 0, sizeof *a);
    if (use_pg) {
        char ci[200];
        snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres connect_timeout=3",
                 pg_port);
        a->pg = PQconnectdb(ci);
        /* a writer stopped inside its transaction holds the mutex row: the server ends it */
        if (PQstatus(a->pg) != CONNECTION_OK || !pg_ok(a->pg, "SET idle_in_transaction_session_timeout = 1000", 0, NULL)) {
            fprintf(stderr, "fault_fence: app connection: %s", PQerrorMessage(a->pg));
            PQfinish(a->pg);
            a->pg = NULL;
            return -1;
        }
        return 0;
    }
    if (use_my) {
        a->my = my_connect();
        /* a writer stopped inside its transaction holds the mutex row: the server ends it */
        if (a->my && !my_ok(a->my, "SET SESSION idle_transaction_timeout = 1")) {
            fprintf(stderr, "fault_fence: app connection: %s\n", mysql_error(a->my));
            mysql_close(a->my);
            a->my = NULL;
        }
        return a->my ? 0 : -1;
    }
    if (sqlite3_open_v2(db_path, &a->sq, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        fprintf(stderr, "fault_fence: open %s: %s\n", db_path, sqlite3_errmsg(a->sq));
        sqlite3_close(a->sq);
        a->sq = NULL;
        return -1;
    }
    sqlite3_busy_timeout(a->sq, 3000);
    return 0;
}

static void app_close(app *a) {
    if (a->pg) PQfinish(a->pg);
    if (a->my) mysql_close(a->my);
    if (a->sq) sqlite3_close(a->sq);
    memset(a, 0, sizeof *a);
}

/* One fenced write of (writer, fence, round): SIMBA_OK committed, SIMBA_EFENCE refused by
   the check, anything else failed (nothing committed either way but SIMBA_OK). */
static simba_result fenced_write(app *a, const char *name, const char *writer, uint64_t fence, int round, char *err,
                                 size_t cap) {
    char sql[200], fs[24], rs[16];
    simba_result rc;
    snprintf(fs, sizeof fs, "%llu", (unsigned long long)fence);
    snprintf(rs, sizeof rs, "%d", round);
    if (use_pg) {
        const char *v[3];
        if (!a->pg && app_open(a) != 0) return SIMBA_ECONN;
        if (!pg_ok(a->pg, "BEGIN", 0, NULL)) {
            snprintf(err, cap, "BEGIN: %s", PQerrorMessage(a->pg));
            app_close(a); /* the server may have ended the session: a new one next time */
            return SIMBA_ECONN;
        }
        rc = unchecked ? SIMBA_OK : simba_pg_check_fence(a->pg, NULL, table, name, fence, err, cap);
        v[0] = writer;
        v[1] = fs;
        v[2] = rs;
        snprintf(sql, sizeof sql, "INSERT INTO \"%s\" (writer, fence, round) VALUES ($1, $2, $3)", log_table);
        if (rc == SIMBA_OK && !pg_ok(a->pg, sql, 3, v)) rc = SIMBA_EBACKEND;
        if (rc == SIMBA_OK && !pg_ok(a->pg, "COMMIT", 0, NULL)) rc = SIMBA_EBACKEND;
        if (rc != SIMBA_OK) {
            if (rc == SIMBA_EBACKEND) snprintf(err, cap, "%s", PQerrorMessage(a->pg));
            if (!pg_ok(a->pg, "ROLLBACK", 0, NULL) || PQstatus(a->pg) != CONNECTION_OK) app_close(a);
        }
        return rc;
    }
    if (use_my) {
        if (!a->my && app_open(a) != 0) return SIMBA_ECONN;
        return my_fenced_write(a, name, writer, fence, round, err, cap);
    }
    if (sqlite3_exec(a->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, cap, "BEGIN IMMEDIATE: %s", sqlite3_errmsg(a->sq));
        return SIMBA_EBUSY;
    }
    rc = unchecked ? SIMBA_OK : simba_sql_check_fence(a->sq, NULL, name, fence, err, cap);
    if (rc == SIMBA_OK) {
        sqlite3_stmt *st = NULL;
        snprintf(sql, sizeof sql, "INSERT INTO \"%s\" (writer, fence, round) VALUES (?1, ?2, ?3)", log_table);
        if (sqlite3_prepare_v2(a->sq, sql, -1, &st, NULL) != SQLITE_OK || sqlite3_bind_text(st, 1, writer, -1, SQLITE_STATIC) ||
            sqlite3_bind_int64(st, 2, (sqlite3_int64)fence) || sqlite3_bind_int(st, 3, round) || sqlite3_step(st) != SQLITE_DONE) {
            snprintf(err, cap, "INSERT: %s", sqlite3_errmsg(a->sq));
            rc = SIMBA_EBACKEND;
        }
        sqlite3_finalize(st);
    }
    if (sqlite3_exec(a->sq, rc == SIMBA_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK && rc == SIMBA_OK) {
        snprintf(err, cap, "COMMIT: %s", sqlite3_errmsg(a->sq));
        rc = SIMBA_EBACKEND;
    }
    return rc;
}

/* ---- a writer process ----------------------------------------------------------------------- */

static volatile sig_atomic_t w_pause, w_term, w_cont;
static void on_usr1(int sig) { (void)sig; w_pause = 1; }
static void on_term(int sig) { (void)sig; w_term = 1; }
static void on_cont(int sig) { (void)sig; w_cont = 1; }

typedef struct writer {
    uint64_t fence;   /* the last fence granted: kept whatever the loop says since */
    int out;          /* pipe to the driver */
} writer;

static void say(int fd, const char *fmt, ...) {
    char b[200];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n > 0 && write(fd, b, (size_t)n) < 0) {}
}

static void on_acquired(simba_service *svc, const simba_state *st, void *u) {
    writer *w = (writer *)u;
    (void)st;
    w->fence = simba_fence(svc);
    say(w->out, "acq %llu\n", (unsigned long long)w->fence);
}

static simba_result open_backend(simba_loop *loop, simba_backend **be) {
    if (use_pg) {
        simba_pg_desc d;
        memset(&d, 0, sizeof d);
        d.hostaddr = "127.0.0.1";
        d.port = pg_port;
        d.user = "postgres";
        d.password = "simba";
        d.table = table;
        return simba_pg_open(loop, &d, be);
    } else if (use_my) {
        simba_mysql_desc d;
        memset(&d, 0, sizeof d);
        d.host = "127.0.0.1";
        d.port = my_port;
        d.user = "root";
        d.password = "simba";
        d.db = "simba";
        d.table = table;
        return simba_mysql_open(loop, &d, be);
    } else {
        simba_sql_desc d;
        memset(&d, 0, sizeof d);
        d.path = db_path;
        return simba_sql_open(loop, &d, be);
    }
}

/* phase 0: before a stop, 1: after the resume (SIGCONT) */
static int writer_main(const char *name, const char *id, int round, int out) {
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_contend_desc cd;
    writer w;
    app a;
    long att[2] = {0, 0}, acc[2] = {0, 0}, ref[2] = {0, 0}, fail[2] = {0, 0};
    int phase = 0;
    char err[512], last_fail[512] = "";
    signal(SIGUSR1, on_usr1);
    signal(SIGTERM, on_term);
    signal(SIGCONT, on_cont);
    memset(&w, 0, sizeof w);
    w.out = out;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || open_backend(loop, &be) != SIMBA_OK || app_open(&a) != 0) {
        say(out, "error cannot open: %s\n", loop ? simba_loop_errmsg(loop) : "no loop");
        return 1;
    }
    memset(&cd, 0, sizeof cd);
    cd.mutex = name;
    cd.contender_id = id;
    cd.ttl_ms = TTL;
    cd.transition_ms = TR;
    cd.on_acquired = on_acquired;
    cd.user_data = &w;
    if (simba_contend(loop, be, &cd, &svc) != SIMBA_OK || simba_start(svc) != SIMBA_OK) {
        say(out, "error contend: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    while (!w_term) {
        struct pollfd fds[8];
        int n = simba_fds(loop, fds, 8);
        int64_t wait = simba_poll(loop);
        if (wait > 5 || wait < 0) wait = 5;
        poll(fds, (nfds_t)(n > 0 ? (n < 8 ? n : 8) : 0), (int)wait);
        simba_poll(loop);
        if (w_pause) { /* stop here, between two writes, checking nothing first */
            w_pause = 0;
            say(out, "stopping\n");
            raise(SIGSTOP);
        }
        /* resumed (either stop): the writes from here on are the stale owner's */
        if (w_cont) phase = 1;
        if (w.fence == 0) continue;
        att[phase]++;
        err[0] = 0;
        switch (fenced_write(&a, name, id, w.fence, round, err, sizeof err)) {
        case SIMBA_OK: acc[phase]++; break;
        case SIMBA_EFENCE: ref[phase]++; break;
        default: fail[phase]++; snprintf(last_fail, sizeof last_fail, "%s", err); break;
        }
        if (phase == 1 && att[1] == 1) say(out, "resumed-write %s\n", err[0] ? err : "accepted");
    }
    say(out, "counts %ld %ld %ld %ld %ld %ld %ld %ld\n", att[0], acc[0], ref[0], fail[0], att[1], acc[1], ref[1], fail[1]);
    if (last_fail[0]) say(out, "lastfail %s\n", last_fail);
    simba_stop(svc);
    simba_stop_wait(svc, 2000);
    app_close(&a);
    simba_loop_free(loop);
    return 0;
}

/* ---- the driver ------------------------------------------------------------------------------ */

typedef struct child {
    pid_t pid;
    int fd;
    char buf[4096];
    size_t len;
    int eof;
} child;

static int spawn(child *c, const char *name, const char *id, int round) {
    int p[2];
    memset(c, 0, sizeof *c);
    if (pipe(p) != 0) return -1;
    c->pid = fork();
    if (c->pid < 0) return -1;
    if (c->pid == 0) {
        close(p[0]);
        _exit(writer_main(name, id, round, p[1]));
    }
    close(p[1]);
    c->fd = p[0];
    return 0;
}

/* Reads what the children said, for up to ms. */
static void pump(child *cs, int n, int ms) {
    int64_t end = mono_ms() + ms;
    do {
        struct pollfd fds[2];
        int i, k = 0, map[2];
        for (i = 0; i < n; i++)
            if (!cs[i].eof) {
                fds[k].fd = cs[i].fd;
                fds[k].events = POLLIN;
                map[k++] = i;
            }
        if (k == 0) return;
        if (poll(fds, (nfds_t)k, (int)(end - mono_ms() > 0 ? end - mono_ms() : 0)) <= 0) continue;
        for (i = 0; i < k; i++)
            if (fds[i].revents) {
                child *c = &cs[map[i]];
                ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
                if (r <= 0) c->eof = 1;
                else c->len += (size_t)r;
                c->buf[c->len] = 0;
            }
    } while (mono_ms() < end);
}

static int said(const child *c, const char *what) { return strstr(c->buf, what) != NULL; }

/* Waits until the child said what (or ms pass). */
static int wait_said(child *cs, int n, int i, const char *what, int ms) {
    int64_t end = mono_ms() + ms;
    while (!said(&cs[i], what) && mono_ms() < end) pump(cs, n, 20);
    return said(&cs[i], what);
}

static uint64_t acq_fence(const child *c) {
    const char *p = strstr(c->buf, "acq ");
    return p ? strtoull(p + 4, NULL, 10) : 0;
}

/* ---- the stored rows ---- */
typedef struct rows {
    long n, out_of_order, stale_after_later, a_rows, b_rows;
} rows;

static void check_pg_rows(int round, uint64_t fa, rows *rs) {
    char ci[200], sql[200], rn[16];
    const char *v[1];
    PGconn *c;
    PGresult *r;
    int i;
    long long maxf = 0;
    memset(rs, 0, sizeof *rs);
    rs->n = -1;
    snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres", pg_port);
    c = PQconnectdb(ci);
    snprintf(sql, sizeof sql, "SELECT writer, fence FROM \"%s\" WHERE round = $1 ORDER BY seq", log_table);
    snprintf(rn, sizeof rn, "%d", round);
    v[0] = rn;
    r = PQexecParams(c, sql, 1, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        rs->n = PQntuples(r);
        for (i = 0; i < PQntuples(r); i++) {
            long long f = atoll(PQgetvalue(r, i, 1));
            if (f < maxf) rs->out_of_order++;
            if ((uint64_t)f == fa && (uint64_t)maxf > fa) rs->stale_after_later++;
            if (f > maxf) maxf = f;
            if (PQgetvalue(r, i, 0)[0] == 'A') rs->a_rows++; else rs->b_rows++;
        }
    } else {
        fprintf(stderr, "fault_fence: reading rows: %s", PQerrorMessage(c));
    }
    PQclear(r);
    PQfinish(c);
}

static void check_my_rows(int round, uint64_t fa, rows *rs) {
    char sql[200];
    MYSQL *c = my_connect();
    MYSQL_RES *r = NULL;
    MYSQL_ROW row;
    long long maxf = 0;
    memset(rs, 0, sizeof *rs);
    rs->n = -1;
    snprintf(sql, sizeof sql, "SELECT writer, fence FROM `%s` WHERE round = %d ORDER BY seq", log_table, round);
    if (c && mysql_query(c, sql) == 0 && (r = mysql_store_result(c)) != NULL) {
        rs->n = 0;
        while ((row = mysql_fetch_row(r)) != NULL) {
            long long f = atoll(row[1]);
            rs->n++;
            if (f < maxf) rs->out_of_order++;
            if ((uint64_t)f == fa && (uint64_t)maxf > fa) rs->stale_after_later++;
            if (f > maxf) maxf = f;
            if (row[0][0] == 'A') rs->a_rows++; else rs->b_rows++;
        }
    } else if (c) {
        fprintf(stderr, "fault_fence: reading rows: %s\n", mysql_error(c));
    }
    if (r) mysql_free_result(r);
    if (c) mysql_close(c);
}

static void check_sql_rows(int round, uint64_t fa, rows *rs) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char sql[200];
    long long maxf = 0;
    memset(rs, 0, sizeof *rs);
    rs->n = -1;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return;
    snprintf(sql, sizeof sql, "SELECT writer, fence FROM \"%s\" WHERE round = ?1 ORDER BY seq", log_table);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_bind_int(st, 1, round) == SQLITE_OK) {
        rs->n = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            long long f = sqlite3_column_int64(st, 1);
            rs->n++;
            if (f < maxf) rs->out_of_order++;
            if ((uint64_t)f == fa && (uint64_t)maxf > fa) rs->stale_after_later++;
            if (f > maxf) maxf = f;
            if (((const char *)sqlite3_column_text(st, 0))[0] == 'A') rs->a_rows++; else rs->b_rows++;
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

typedef struct counts {
    long att[2], acc[2], ref[2], fail[2];
} counts;

static int parse_counts(const child *c, counts *k) {
    const char *p = strstr(c->buf, "counts ");
    memset(k, 0, sizeof *k);
    return p && sscanf(p, "counts %ld %ld %ld %ld %ld %ld %ld %ld", &k->att[0], &k->acc[0], &k->ref[0], &k->fail[0],
                       &k->att[1], &k->acc[1], &k->ref[1], &k->fail[1]) == 8;
}

/* One round; 0 when every property held. external: the driver SIGSTOPs A wherever it is. */
static int round_run(int round, int external, long tot[5]) {
    child cs[2];
    char name[64];
    uint64_t fa, fb;
    counts ka, kb;
    rows rs;
    int st, ok = 1, i;
    const char *resumed;
    snprintf(name, sizeof name, "fence-%d-%d", (int)getpid(), round);
    if (spawn(&cs[0], name, "A", round) != 0) return 1;
    if (!wait_said(cs, 1, 0, "acq ", 10000)) {
        fprintf(stderr, "round %d: A never owned: %s\n", round, cs[0].buf);
        kill(cs[0].pid, SIGKILL);
        waitpid(cs[0].pid, &st, 0);
        return 1;
    }
    fa = acq_fence(&cs[0]);
    if (spawn(&cs[1], name, "B", round) != 0) return 1;
    pump(cs, 2, 400); /* A writes; B waits in line */
    if (external) {
        kill(cs[0].pid, SIGSTOP);
    } else {
        kill(cs[0].pid, SIGUSR1);
    }
    waitpid(cs[0].pid, &st, WUNTRACED);
    if (!WIFSTOPPED(st)) ok = 0;
    /* past A's lease: B is granted and writes (PostgreSQL, external: after the server ended
       a transaction A was stopped in) */
    if (!wait_said(cs, 2, 1, "acq ", TTL + TR + 6000)) {
        fprintf(stderr, "round %d: B never owned while A was stopped\n", round);
        ok = 0;
    }
    fb = acq_fence(&cs[1]);
    pump(cs, 2, 300);
    kill(cs[0].pid, SIGCONT);
    pump(cs, 2, 1000); /* A writes with its old fence */
    kill(cs[0].pid, SIGTERM);
    kill(cs[1].pid, SIGTERM);
    for (i = 0; i < 2; i++) {
        int64_t end = mono_ms() + 5000;
        while (!cs[i].eof && mono_ms() < end) pump(cs, 2, 50);
        waitpid(cs[i].pid, &st, 0);
        close(cs[i].fd);
    }
    if (!parse_counts(&cs[0], &ka) || !parse_counts(&cs[1], &kb)) {
        fprintf(stderr, "round %d: no counts: A said:\n%s\nB said:\n%s\n", round, cs[0].buf, cs[1].buf);
        return 1;
    }
    if (use_pg) check_pg_rows(round, fa, &rs);
    else if (use_my) check_my_rows(round, fa, &rs);
    else check_sql_rows(round, fa, &rs);
    resumed = strstr(cs[0].buf, "resumed-write ");
    printf("round %d (%s stop): A fence %llu, B fence %llu\n", round, external ? "external" : "self",
           (unsigned long long)fa, (unsigned long long)fb);
    printf("  A before the stop: attempted %ld, accepted %ld, refused %ld, failed %ld\n", ka.att[0], ka.acc[0], ka.ref[0],
           ka.fail[0]);
    printf("  A after the resume: attempted %ld, accepted %ld, refused %ld, failed %ld\n", ka.att[1], ka.acc[1],
           ka.ref[1], ka.fail[1]);
    printf("  B: attempted %ld, accepted %ld, refused %ld, failed %ld\n", kb.att[0] + kb.att[1], kb.acc[0] + kb.acc[1],
           kb.ref[0] + kb.ref[1], kb.fail[0] + kb.fail[1]);
    if (resumed) printf("  A's first write after the resume: %.*s\n", (int)strcspn(resumed + 14, "\n"), resumed + 14);
    printf("  stored rows: %ld (A %ld, B %ld), out of fence order %ld, A's after B's %ld\n", rs.n, rs.a_rows, rs.b_rows,
           rs.out_of_order, rs.stale_after_later);
    if (!(fb > fa)) ok = 0;
    if (ka.att[1] == 0 || ka.acc[1] != 0) ok = 0;        /* every write after the resume refused */
    if (kb.acc[0] + kb.acc[1] == 0) ok = 0;               /* the later owner wrote */
    if (rs.n < 0 || rs.out_of_order || rs.stale_after_later) ok = 0;
    if (rs.a_rows != ka.acc[0] + ka.acc[1] || rs.b_rows != kb.acc[0] + kb.acc[1]) ok = 0; /* what was said landed */
    tot[0] += ka.att[0] + ka.att[1] + kb.att[0] + kb.att[1];
    tot[1] += ka.acc[0] + ka.acc[1] + kb.acc[0] + kb.acc[1];
    tot[2] += ka.ref[0] + ka.ref[1] + kb.ref[0] + kb.ref[1];
    tot[3] += rs.out_of_order; /* a row below an earlier row's fence: a stale write that landed */
    tot[4] += ka.fail[0] + ka.fail[1] + kb.fail[0] + kb.fail[1];
    if (!ok) printf("  FAILED\n");
    return ok ? 0 : 1;
}

static int setup(void) {
    char sql[300];
    if (use_pg) {
        char ci[200];
        PGconn *c;
        int ok;
        snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres", pg_port);
        c = PQconnectdb(ci);
        snprintf(sql, sizeof sql, "CREATE TABLE \"%s\" (seq bigserial PRIMARY KEY, writer text, fence bigint, round int)",
                 log_table);
        ok = PQstatus(c) == CONNECTION_OK && pg_ok(c, sql, 0, NULL);
        if (!ok) fprintf(stderr, "fault_fence: server on port %d: %s", pg_port, PQerrorMessage(c));
        PQfinish(c);
        return ok ? 0 : -1;
    } else if (use_my) {
        MYSQL *c = my_connect();
        int ok;
        snprintf(sql, sizeof sql, "CREATE TABLE `%s` (seq BIGINT AUTO_INCREMENT PRIMARY KEY, writer VARCHAR(8), fence BIGINT,"
                 " round INT) ENGINE=InnoDB", log_table);
        ok = c && my_ok(c, sql);
        if (c && !ok) fprintf(stderr, "fault_fence: %s: %s\n", sql, mysql_error(c));
        if (c) mysql_close(c);
        return ok ? 0 : -1;
    } else {
        sqlite3 *db = NULL;
        int rc;
        snprintf(sql, sizeof sql, "CREATE TABLE \"%s\" (seq INTEGER PRIMARY KEY AUTOINCREMENT, writer TEXT, fence INTEGER,"
                 " round INTEGER)", log_table);
        rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK) fprintf(stderr, "fault_fence: %s: %s\n", db_path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return rc == SQLITE_OK ? 0 : -1;
    }
}

int main(int argc, char **argv) {
    char dir[256];
    const char *e;
    int rounds, r, fails = 0;
    long tot[5] = {0, 0, 0, 0, 0};
    int64_t t0 = mono_ms();
    if (argc < 2 || (strcmp(argv[1], "pg") != 0 && strcmp(argv[1], "mysql") != 0 && strcmp(argv[1], "sql") != 0)) {
        fprintf(stderr, "usage: %s pg|mysql|sql [rounds]\n", argv[0]);
        return 2;
    }
    use_pg = strcmp(argv[1], "pg") == 0;
    use_my = strcmp(argv[1], "mysql") == 0;
    unchecked = getenv("FAULT_FENCE_UNCHECKED") && strcmp(getenv("FAULT_FENCE_UNCHECKED"), "1") == 0;
    rounds = argc > 2 ? atoi(argv[2]) : use_pg || use_my ? 4 : 3;
    if (rounds < 1) rounds = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (use_pg) {
        e = getenv("SIMBA_PG_PORT");
        pg_port = e && *e ? atoi(e) : 5440;
        snprintf(table, sizeof table, "fence_%d", (int)getpid());
    } else if (use_my) {
        e = getenv("SIMBA_MYSQL_PORT");
        my_port = e && *e ? atoi(e) : 3390;
        snprintf(table, sizeof table, "fence_%d", (int)getpid());
    } else {
        snprintf(dir, sizeof dir, "%s/simba_fence_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
        snprintf(db_path, sizeof db_path, "%s/fence.db", dir);
        snprintf(table, sizeof table, "simba_mutex");
    }
    snprintf(log_table, sizeof log_table, "%s_app_log", use_pg || use_my ? table : "app");
    if (setup() != 0) return 1;
    for (r = 1; r <= rounds; r++)
        fails += round_run(r, (use_pg || use_my) && r % 2 == 0, tot);
    printf("fault_fence %s: rounds %d passed, %d failed; writes attempted %ld, accepted %ld, refused by the fence %ld, failed "
           "otherwise %ld; stale writes accepted %ld (%.1f s)\n", argv[1], rounds - fails, fails, tot[0], tot[1], tot[2], tot[4],
           tot[3], (mono_ms() - t0) / 1000.0);
    if (!use_pg && !use_my && !getenv("SIMBA_KEEP_TMP")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "fault_fence: could not remove %s\n", dir);
    }
    return fails ? 1 : 0;
}
