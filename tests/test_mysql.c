/* test_mysql.c -- MySQL/MariaDB-specific tests of simba_mysql.h against a real MariaDB server.
 *
 * The server: 127.0.0.1:$SIMBA_MYSQL_PORT (default 3390, user root, password simba, database
 * simba), started beforehand with scripts/mysql-start.sh. A test that cannot reach it fails;
 * nothing is skipped. The test's own statements (KILL, DELETE, DROP TABLE, the version row)
 * go through a blocking connection of its own, as an operator's or another program's would.
 * The restart case starts, stops and restarts a private server on $SIMBA_MYSQL_PORT + 1 (data
 * in $SIMBA_MYSQL_DIR2, default build/mysql-test) with scripts/mysql-start.sh / mysql-stop.sh.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_mysql.h"
#include "check.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int port, port2; /* the shared server; a private one this program starts and restarts */
static char dir2[300];
static char table[64]; /* unique per run: leftovers never interfere */

typedef struct rec {
    int acquired, released, quarantines;
    uint64_t fence;
} rec;

static void on_acq(simba_service *s, const simba_state *st, void *u) {
    (void)st;
    ((rec *)u)->acquired++;
    ((rec *)u)->fence = simba_fence(s);
}
static void on_rel(simba_service *s, const simba_state *st, void *u) {
    (void)s;
    (void)st;
    ((rec *)u)->released++;
}
static void on_ev(simba_service *s, const simba_service_event *ev, void *u) {
    (void)s;
    if (ev->type == SIMBA_EVENT_QUARANTINE) ((rec *)u)->quarantines++;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Drives the loops until cond or ms pass; the value of cond. */
#define UNTIL(cond, ms, ...)                                                                      \
    do {                                                                                          \
        simba_loop *ls_[] = {__VA_ARGS__};                                                        \
        int64_t end_ = now_ms() + (ms);                                                           \
        size_t i_;                                                                                \
        while (!(cond) && now_ms() < end_)                                                        \
            for (i_ = 0; i_ < sizeof ls_ / sizeof ls_[0]; i_++) simba_wait(ls_[i_], 5);          \
    } while (0)

static int pool; /* the backends' request connections (0: the default, one) */

static simba_result open_on(int on_port, simba_loop *loop, const char *tbl, int64_t max_lease, simba_backend **be) {
    simba_mysql_desc d;
    memset(&d, 0, sizeof d);
    d.connections = pool;
    d.host = "127.0.0.1";
    d.port = on_port;
    d.user = "root";
    d.password = "simba";
    d.db = "simba";
    d.table = tbl;
    d.max_lease_ms = max_lease;
    return simba_mysql_open(loop, &d, be);
}
static simba_result open_be(simba_loop *loop, const char *tbl, int64_t max_lease, simba_backend **be) {
    return open_on(port, loop, tbl, max_lease, be);
}

static int64_t lease_ms = 1000; /* the contenders' ttl (transition: half of it) */

static simba_service *contend(simba_loop *loop, simba_backend *be, const char *mutex, const char *id, rec *r) {
    simba_contend_desc d;
    simba_service *s = NULL;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    d.contender_id = id;
    d.ttl_ms = lease_ms;
    d.transition_ms = lease_ms / 2;
    d.on_acquired = on_acq;
    d.on_released = on_rel;
    d.on_event = on_ev;
    d.user_data = r;
    if (simba_contend(loop, be, &d, &s) != SIMBA_OK || simba_start(s) != SIMBA_OK) return NULL;
    return s;
}

/* One statement on a blocking connection of the test's own; 0, or -1 (printed). */
static int sql(const char *fmt, ...) {
    char q[600];
    va_list ap;
    MYSQL *c = mysql_init(NULL);
    int rc = -1;
    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    if (c && mysql_real_connect(c, "127.0.0.1", "root", "simba", "simba", (unsigned)port, NULL, 0) && mysql_query(c, q) == 0) {
        MYSQL_RES *r = mysql_store_result(c);
        if (r) mysql_free_result(r);
        rc = 0;
    } else fprintf(stderr, "  sql: %s: %s\n", q, c ? mysql_error(c) : "no memory");
    if (c) mysql_close(c);
    return rc;
}

static int sql_row(char *out, size_t cap, const char *q);

/* id waits in line for name on tbl with be's doorbell in its queue row: a release rings it. */
static int in_line(simba_backend *be, const char *tbl, const char *name, const char *id) {
    const simba__my *m = (const simba__my *)be->impl;
    char q[400], out[160];
    snprintf(q, sizeof q, "SELECT bell FROM `%s_q` WHERE name = '%s' AND contender = '%s'", tbl, name, id);
    return m->bell[0] && sql_row(out, sizeof out, q) == 0 && strcmp(out, m->bell) == 0;
}

TEST(bad_input_is_refused_in_words) {
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_mysql_desc d;
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    memset(&d, 0, sizeof d);
    d.host = "localhost";
    d.db = "simba";
    CHECK_RC(simba_mysql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "numeric") != NULL);
    d.host = "127.0.0.1";
    d.db = NULL;
    CHECK_RC(simba_mysql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "db") != NULL);
    d.db = "simba";
    d.table = "bad`name";
    CHECK_RC(simba_mysql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "table") != NULL);
    d.table = NULL;
    d.unix_socket = "relative/sock";
    d.host = NULL;
    CHECK_RC(simba_mysql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK_RC(simba_mysql_open(NULL, &d, &be), SIMBA_EINVAL);
    CHECK(be == NULL);
    CHECK_RC(simba_mysql_check_fence(NULL, NULL, "x", 1, NULL, 0), SIMBA_EINVAL);
    simba_loop_free(loop);
}

/* The server kills the backend's connection (KILL): the backend connects anew and the owner's
   next renewal finds its row: it keeps the mutex and its fence. */
TEST(killed_connection_reconnects_and_owner_keeps_the_fence) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *s;
    rec r = {0};
    uint64_t f;
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    REQUIRE(open_be(loop, table, 0, &be) == SIMBA_OK);
    lease_ms = 4000; /* room for a reconnect and setup on a loaded machine before the local ttl */
    s = contend(loop, be, "kill-me", "a", &r);
    lease_ms = 1000;
    REQUIRE(s);
    UNTIL(r.acquired == 1, 5000, loop);
    REQUIRE(r.acquired == 1);
    UNTIL(strcmp(simba_mysql_push(be), "doorbell") == 0, 2000, loop);
    CHECK_STR(simba_mysql_push(be), "doorbell");
    f = simba_fence(s);
    CHECK(sql("KILL CONNECTION %lu", mysql_thread_id(((simba__my *)be->impl)->c[0].my)) == 0);
    UNTIL(0, 6000, loop); /* two renewals' worth */
    CHECK(simba_is_owner(s));
    CHECK(simba_fence(s) == f);
    CHECK(r.released == 0);
    simba_loop_free(loop);
}

/* A backend of three request connections: names spread over them, each name on one; one
   connection killed reconnects alone while the owners on it and on the others keep their
   mutexes and fences; a release reaches a waiter of another pooled backend by its doorbell. */
TEST(pool_spreads_names_and_one_killed_connection_reconnects_alone) {
    enum { N = 12 };
    simba_loop *loop, *lb;
    simba_backend *be, *bb;
    simba_service *s[N], *w;
    rec r[N], rw;
    uint64_t f[N];
    char name[N][32];
    int i, used[3] = {0, 0, 0}, ok;
    int64_t t;
    simba__my *p;
    memset(r, 0, sizeof r);
    memset(&rw, 0, sizeof rw);
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK && simba_loop_new(NULL, &lb) == SIMBA_OK);
    pool = 3;
    ok = open_be(loop, table, 0, &be) == SIMBA_OK && open_be(lb, table, 0, &bb) == SIMBA_OK;
    pool = 0;
    REQUIRE(ok);
    p = (simba__my *)be->impl;
    CHECK(p->nc == 3);
    lease_ms = 4000; /* room for a reconnect and setup on a loaded machine before the local ttl */
    for (i = 0, ok = 1; i < N; i++) {
        snprintf(name[i], sizeof name[i], "pool-%d", i);
        used[simba__my_route(p, name[i]) - p->c]++;
        ok = ok && (s[i] = contend(loop, be, name[i], "a", &r[i])) != NULL;
    }
    lease_ms = 1000;
    REQUIRE(ok);
    CHECK(used[0] > 0 && used[1] > 0 && used[2] > 0); /* FNV-1a of these twelve names */
    UNTIL(r[0].acquired && r[1].acquired && r[2].acquired && r[3].acquired && r[4].acquired && r[5].acquired &&
          r[6].acquired && r[7].acquired && r[8].acquired && r[9].acquired && r[10].acquired && r[11].acquired, 8000, loop);
    for (i = 0; i < N; i++) {
        CHECK(r[i].acquired == 1);
        f[i] = simba_fence(s[i]);
    }
    for (i = 0; i < 3; i++) CHECK(p->c[i].state == SIMBA__MY_READY && p->c[i].my != NULL);
    CHECK(mysql_thread_id(p->c[0].my) != mysql_thread_id(p->c[1].my) && mysql_thread_id(p->c[1].my) != mysql_thread_id(p->c[2].my));
    CHECK(sql("KILL CONNECTION %lu", mysql_thread_id(p->c[1].my)) == 0);
    UNTIL(p->c[1].state != SIMBA__MY_READY, 2000, loop);
    CHECK(p->c[0].state == SIMBA__MY_READY && p->c[2].state == SIMBA__MY_READY); /* the others go on */
    UNTIL(0, 6000, loop); /* two renewals' worth */
    for (i = 0; i < N; i++) {
        CHECK(simba_is_owner(s[i]));
        CHECK(simba_fence(s[i]) == f[i]);
        CHECK(r[i].released == 0);
    }
    CHECK(p->c[1].state == SIMBA__MY_READY);
    /* a waiter in another pooled process, rung at the release */
    REQUIRE((w = contend(lb, bb, name[5], "b", &rw)) != NULL);
    UNTIL(strcmp(simba_mysql_push(bb), "doorbell") == 0, 3000, loop, lb);
    UNTIL(in_line(bb, table, name[5], "b"), 3000, loop, lb);
    CHECK(in_line(bb, table, name[5], "b"));
    t = now_ms();
    CHECK(simba_stop(s[5]) == SIMBA_OK);
    UNTIL(rw.acquired == 1, 3000, loop, lb);
    fprintf(stderr, "  (the pooled waiter owned %lld ms after the release was asked)\n", (long long)(now_ms() - t));
    CHECK(rw.acquired == 1 && now_ms() - t < 400);
    CHECK(simba_fence(w) == f[5] + 1);
    simba_loop_free(loop);
    simba_loop_free(lb);
}

/* Rows deleted under a live lease: the owner finds its row gone at its next renewal and steps
   down; nobody is granted until max_lease_ms has passed; the next fence is above the old. */
TEST(deleted_rows_quarantine_and_fences_go_on) {
    simba_loop *la, *lb;
    simba_backend *ba, *bb;
    simba_service *a, *b;
    rec ra = {0}, rb = {0};
    int64_t t;
    char t4[80];
    snprintf(t4, sizeof t4, "%s_x", table); /* a table of its own: its max_lease_ms */
    REQUIRE(simba_loop_new(NULL, &la) == SIMBA_OK && simba_loop_new(NULL, &lb) == SIMBA_OK);
    REQUIRE(open_be(la, t4, 3000, &ba) == SIMBA_OK && open_be(lb, t4, 3000, &bb) == SIMBA_OK);
    a = contend(la, ba, "deleted", "a", &ra);
    REQUIRE(a);
    UNTIL(ra.acquired == 1, 5000, la);
    REQUIRE(ra.acquired == 1);
    CHECK(sql("DELETE FROM `%s` WHERE name = 'deleted'", t4) == 0);
    t = now_ms();
    UNTIL(ra.released == 1, 3000, la);
    CHECK(ra.released == 1);
    CHECK(simba_stop(a) == SIMBA_OK);
    b = contend(lb, bb, "deleted", "b", &rb);
    REQUIRE(b);
    UNTIL(rb.acquired == 1, 8000, la, lb);
    CHECK(rb.acquired == 1);
    CHECK(rb.quarantines >= 1);
    CHECK(now_ms() - t >= 2500); /* the quarantine: max_lease_ms from the delete */
    CHECK(rb.fence > ra.fence);
    simba_loop_free(la);
    simba_loop_free(lb);
}

/* The table truncated under a live lease (TRUNCATE fires no trigger): the first grant that
   finds the table's sentinel row gone quarantines and raises the floor, as rows deleted do. */
TEST(truncated_table_quarantines_and_fences_go_on) {
    simba_loop *la, *lb;
    simba_backend *ba, *bb;
    simba_service *a, *b;
    rec ra = {0}, rb = {0};
    int64_t t;
    char t5[80];
    snprintf(t5, sizeof t5, "%s_t", table);
    REQUIRE(simba_loop_new(NULL, &la) == SIMBA_OK && simba_loop_new(NULL, &lb) == SIMBA_OK);
    REQUIRE(open_be(la, t5, 3000, &ba) == SIMBA_OK && open_be(lb, t5, 3000, &bb) == SIMBA_OK);
    a = contend(la, ba, "truncated", "a", &ra);
    REQUIRE(a);
    UNTIL(ra.acquired == 1, 5000, la);
    REQUIRE(ra.acquired == 1);
    CHECK(sql("TRUNCATE TABLE `%s`", t5) == 0);
    t = now_ms();
    UNTIL(ra.released == 1, 3000, la);
    CHECK(ra.released == 1);
    CHECK(simba_stop(a) == SIMBA_OK);
    b = contend(lb, bb, "truncated", "b", &rb);
    REQUIRE(b);
    UNTIL(rb.acquired == 1, 8000, la, lb);
    CHECK(rb.acquired == 1);
    CHECK(rb.quarantines >= 1);
    CHECK(now_ms() - t >= 2500); /* the quarantine: max_lease_ms from the truncation */
    CHECK(rb.fence > ra.fence);
    simba_loop_free(la);
    simba_loop_free(lb);
}

/* A dropped table: the next setup makes it anew and restarts the marker; fences go on above
   every earlier one. */
TEST(dropped_table_is_made_anew_with_higher_fences) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *s;
    rec r1 = {0}, r2 = {0};
    char t2[80];
    snprintf(t2, sizeof t2, "%s_d", table);
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    REQUIRE(open_be(loop, t2, 2000, &be) == SIMBA_OK);
    s = contend(loop, be, "dropped", "a", &r1);
    REQUIRE(s);
    UNTIL(r1.acquired == 1, 5000, loop);
    REQUIRE(r1.acquired == 1);
    CHECK(simba_stop(s) == SIMBA_OK);
    UNTIL(r1.released == 1, 3000, loop);
    simba_loop_free(loop);
    CHECK(sql("DROP TABLE `%s`", t2) == 0);
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    REQUIRE(open_be(loop, t2, 2000, &be) == SIMBA_OK);
    s = contend(loop, be, "dropped", "a", &r2);
    REQUIRE(s);
    UNTIL(r2.acquired == 1, 8000, loop);
    CHECK(r2.acquired == 1);
    CHECK(r2.fence > r1.fence);
    simba_loop_free(loop);
}

/* Several processes set a new table up at once: the setup lock orders them, and none finds
   objects missing afterwards (information_schema skips a table that another creator's DDL
   holds, so each checks before it lets the lock go). Three rounds, a new table each. */
static int setup_warnings;
static void count_warnings(void *u, simba_log_level level, const char *msg) {
    (void)u;
    if (level >= SIMBA_LOG_WARN) {
        setup_warnings++;
        fprintf(stderr, "  log: %s\n", msg);
    }
}
TEST(first_setup_by_several_processes_at_once) {
    int round, i, ready;
    for (round = 0; round < 3; round++) {
        simba_loop *l[4];
        simba_backend *b[4];
        simba_loop_desc ld;
        char t[80];
        int64_t end = now_ms() + 8000;
        memset(&ld, 0, sizeof ld);
        ld.log = count_warnings;
        ld.log_level = SIMBA_LOG_WARN;
        snprintf(t, sizeof t, "%s_s%d", table, round);
        setup_warnings = 0;
        for (i = 0; i < 4; i++) REQUIRE(simba_loop_new(&ld, &l[i]) == SIMBA_OK && open_be(l[i], t, 0, &b[i]) == SIMBA_OK);
        do {
            for (i = 0, ready = 0; i < 4; i++) {
                simba_wait(l[i], 5);
                ready += ((simba__my *)b[i]->impl)->c[0].state == SIMBA__MY_READY;
            }
        } while (ready < 4 && now_ms() < end);
        CHECK_EQ(ready, 4);
        CHECK_EQ(setup_warnings, 0);
        for (i = 0; i < 4; i++) simba_loop_free(l[i]);
    }
}

/* Another schema version in the version row: the setup refuses it, naming both versions. */
TEST(another_schema_version_is_refused_naming_both) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *s;
    rec r = {0};
    char t3[80];
    const char *msg;
    snprintf(t3, sizeof t3, "%s_v", table);
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    REQUIRE(open_be(loop, t3, 0, &be) == SIMBA_OK);
    s = contend(loop, be, "versioned", "a", &r);
    UNTIL(r.acquired == 1, 5000, loop);
    REQUIRE(r.acquired == 1);
    simba_loop_free(loop);
    CHECK(sql("UPDATE `%s_meta` SET v = 7 WHERE k = 'version'", t3) == 0);
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    REQUIRE(open_be(loop, t3, 0, &be) == SIMBA_OK);
    s = contend(loop, be, "versioned", "a", &r);
    UNTIL(strstr(simba_backend_errmsg(be), "version") != NULL, 3000, loop);
    msg = simba_backend_errmsg(be);
    fprintf(stderr, "  (%s)\n", msg);
    CHECK(strstr(msg, "schema version 7") != NULL);
    CHECK(strstr(msg, "version 1") != NULL);
    CHECK(r.acquired == 1 && !simba_is_owner(s));
    simba_loop_free(loop);
}

/* A wrong password and a database that does not exist are refusals, not outages: requests
   fail at once with SIMBA_EDENIED and the server's words. */
TEST(refused_login_and_unknown_database_are_denied_at_once) {
    static const char *const pw[] = {"wrong", "simba"}, *const db[] = {"simba", "simba_no_such_db"}, *const words[] = {"Access denied", "Unknown database"};
    int i;
    for (i = 0; i < 2; i++) {
        simba_loop *loop;
        simba_backend *be;
        simba_mysql_desc d;
        simba_view v;
        int64_t t = now_ms();
        REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
        memset(&d, 0, sizeof d);
        d.host = "127.0.0.1";
        d.port = port;
        d.user = "root";
        d.password = pw[i];
        d.db = db[i];
        d.table = table;
        REQUIRE(simba_mysql_open(loop, &d, &be) == SIMBA_OK);
        CHECK_RC(simba_inspect_wait(be, "denied", &v, 5000), SIMBA_EDENIED);
        CHECK(strstr(simba_backend_errmsg(be), words[i]) != NULL);
        CHECK(now_ms() - t < 2000);
        fprintf(stderr, "  (%s, %lld ms)\n", simba_backend_errmsg(be), (long long)(now_ms() - t));
        simba_loop_free(loop);
    }
}

/* simba_force_release of a holding of a semaphore frees that holding, not the others. */
TEST(force_release_frees_one_holding_of_a_semaphore) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *s[2] = {NULL, NULL};
    rec r[2];
    simba_view v;
    int i;
    memset(r, 0, sizeof r);
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    REQUIRE(open_be(loop, table, 0, &be) == SIMBA_OK);
    for (i = 0; i < 2; i++) {
        simba_contend_desc d;
        memset(&d, 0, sizeof d);
        d.mutex = "forced-sem";
        d.contender_id = i ? "b" : "a";
        d.ttl_ms = 5000;
        d.transition_ms = 2000;
        d.permits = 2;
        d.on_acquired = on_acq;
        d.on_released = on_rel;
        d.user_data = &r[i];
        REQUIRE(simba_contend(loop, be, &d, &s[i]) == SIMBA_OK && simba_start(s[i]) == SIMBA_OK);
    }
    UNTIL(r[0].acquired && r[1].acquired, 5000, loop);
    REQUIRE(r[0].acquired && r[1].acquired);
    CHECK_RC(simba_force_release_wait(be, "forced-sem", r[1].fence, 5000), SIMBA_OK);
    CHECK_RC(simba_inspect_wait(be, "forced-sem", &v, 5000), SIMBA_OK);
    CHECK(v.holders == 1 && v.holder && v.holder[0].fence == r[0].fence);
    simba_loop_free(loop);
}

/* Two processes on one name: a (on da, else TCP) owns, b waits in line, its doorbell parked. */
typedef struct pair {
    simba_loop *la, *lb;
    simba_backend *ba, *bb;
    simba_service *a, *b;
    rec ra, rb;
} pair;

static int pair_open(pair *p, const simba_mysql_desc *da, const char *name) {
    memset(p, 0, sizeof *p);
    if (simba_loop_new(NULL, &p->la) != SIMBA_OK || simba_loop_new(NULL, &p->lb) != SIMBA_OK) return 0;
    if ((da ? simba_mysql_open(p->la, da, &p->ba) : open_be(p->la, table, 0, &p->ba)) != SIMBA_OK ||
        open_be(p->lb, table, 0, &p->bb) != SIMBA_OK || !(p->a = contend(p->la, p->ba, name, "a", &p->ra)))
        return 0;
    UNTIL(p->ra.acquired == 1, 5000, p->la);
    if (p->ra.acquired != 1 || !(p->b = contend(p->lb, p->bb, name, "b", &p->rb))) return 0;
    UNTIL(strcmp(simba_mysql_push(p->bb), "doorbell") == 0, 3000, p->la, p->lb);
    UNTIL(in_line(p->bb, table, name, "b"), 3000, p->la, p->lb);
    return in_line(p->bb, table, name, "b");
}

static void pair_free(pair *p) {
    simba_loop_free(p->la);
    simba_loop_free(p->lb);
}

/* from stops; ms until to (its n-th acquisition) owns, -1 not within 3 s. Then until from's
   release is answered (INITIAL, so it may start again): the ring can make to the owner before
   from's loop has read that answer. */
static int64_t pair_hand_over(pair *p, simba_service *from, rec *to, int n) {
    int64_t t = now_ms(), ms;
    if (simba_stop(from) != SIMBA_OK) return -1;
    UNTIL(to->acquired == n, 3000, p->la, p->lb);
    ms = now_ms() - t;
    UNTIL(simba_service_status(from) == SIMBA_INITIAL, 3000, p->la, p->lb);
    return to->acquired == n && simba_service_status(from) == SIMBA_INITIAL ? ms : -1;
}

/* A release reaches the waiter by its doorbell: it owns within a round trip or two, not at
   its timer (the lease's end, over a second away). Then its doorbell is killed (KILL
   CONNECTION): the backend says "timers" until it has parked a new one. */
TEST(release_rings_the_waiters_doorbell_and_a_killed_one_comes_back) {
    pair p;
    int64_t ms;
    REQUIRE(pair_open(&p, NULL, "bell"));
    ms = pair_hand_over(&p, p.a, &p.rb, 1);
    fprintf(stderr, "  (the waiter owned %lld ms after the release was asked, %llu doorbell rings heard)\n", (long long)ms,
            (unsigned long long)((simba__my *)p.bb->impl)->wakes);
    CHECK(ms >= 0 && ms < 400);
    CHECK(((simba__my *)p.bb->impl)->wakes >= 1);
    CHECK(sql("KILL CONNECTION %lu", (unsigned long)mysql_thread_id(((simba__my *)p.bb->impl)->bmy)) == 0);
    UNTIL(strcmp(simba_mysql_push(p.bb), "timers") == 0, 1000, p.lb);
    CHECK_STR(simba_mysql_push(p.bb), "timers");
    UNTIL(strcmp(simba_mysql_push(p.bb), "doorbell") == 0, 6000, p.lb);
    CHECK_STR(simba_mysql_push(p.bb), "doorbell");
    CHECK(simba_is_owner(p.b));
    pair_free(&p);
}

/* Over the server's unix socket (SIMBA_MYSQL_DIR/sock, as scripts/mysql-start.sh makes it):
   the backend sets up, owns, parks its doorbell there, and is rung at a release by a backend
   on TCP, and the other way round. */
TEST(unix_socket_contends_and_is_rung) {
    pair p;
    simba_mysql_desc d;
    const char *dir = getenv("SIMBA_MYSQL_DIR") ? getenv("SIMBA_MYSQL_DIR") : "build/mysql";
    char cwd[300], path[700];
    int64_t ms;
    cwd[0] = 0;
    REQUIRE(dir[0] == '/' || getcwd(cwd, sizeof cwd) != NULL); /* the backend takes an absolute path */
    snprintf(path, sizeof path, "%s%s%s/sock", cwd, cwd[0] ? "/" : "", dir);
    memset(&d, 0, sizeof d);
    d.unix_socket = path;
    d.user = "root";
    d.password = "simba";
    d.db = "simba";
    d.table = table;
    REQUIRE(pair_open(&p, &d, "unix-socket"));
    CHECK(pair_hand_over(&p, p.a, &p.rb, 1) >= 0);
    CHECK(simba_start(p.a) == SIMBA_OK);
    UNTIL(strcmp(simba_mysql_push(p.ba), "doorbell") == 0, 3000, p.la, p.lb);
    CHECK_STR(simba_mysql_push(p.ba), "doorbell");
    UNTIL(in_line(p.ba, table, "unix-socket", "a"), 3000, p.la, p.lb);
    CHECK(in_line(p.ba, table, "unix-socket", "a"));
    ms = pair_hand_over(&p, p.b, &p.ra, 2);
    fprintf(stderr, "  (the waiter on the unix socket owned %lld ms after the release was asked)\n", (long long)ms);
    CHECK(ms >= 0 && ms < 400);
    CHECK_EQ(p.ra.fence, p.rb.fence + 1);
    pair_free(&p);
}

/* A hand-over grants the head waiter the next fence; the waiter, rung, asks and is answered
   that grant: the fence it owns is the releaser's + 1 (no second tenure), and the store's
   row says the same. */
TEST(hand_over_grant_is_the_fence_the_waiter_owns) {
    pair p;
    simba_view v;
    REQUIRE(pair_open(&p, NULL, "handover-fence"));
    REQUIRE(pair_hand_over(&p, p.a, &p.rb, 1) >= 0);
    CHECK_EQ(p.rb.fence, p.ra.fence + 1);
    CHECK_RC(simba_inspect_wait(p.bb, "handover-fence", &v, 5000), SIMBA_OK);
    CHECK_STR(v.owner, "b");
    CHECK_EQ(v.fence, p.rb.fence);
    pair_free(&p);
}

/* simba_loop_free sends a release queued behind a statement in flight, but waits
   SIMBA__MY_SETTLE_MS (1 s) at most: here the table is write-locked by another session, so the
   owner's renewal and the release behind it are never answered. */
TEST(free_behind_a_hung_statement_keeps_its_bound) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *s;
    simba__my *bm;
    rec r;
    MYSQL *c = mysql_init(NULL);
    char q[200];
    int64_t t;
    memset(&r, 0, sizeof r);
    REQUIRE(c && mysql_real_connect(c, "127.0.0.1", "root", "simba", "simba", (unsigned)port, NULL, 0));
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK && open_be(loop, table, 0, &be) == SIMBA_OK);
    REQUIRE((s = contend(loop, be, "hung-free", "a", &r)) != NULL);
    UNTIL(r.acquired == 1, 5000, loop);
    REQUIRE(r.acquired == 1);
    snprintf(q, sizeof q, "LOCK TABLES `%s` WRITE, `%s_q` WRITE", table, table);
    REQUIRE(mysql_query(c, q) == 0);
    bm = (simba__my *)be->impl;
    UNTIL(bm->c[0].cur != NULL, 3000, loop); /* the renewal, stuck behind the lock */
    CHECK(bm->c[0].cur != NULL);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    simba_poll(loop);
    t = now_ms();
    simba_loop_free(loop);
    t = now_ms() - t;
    fprintf(stderr, "  simba_loop_free behind a hung renewal took %lld ms\n", (long long)t);
    CHECK(t >= SIMBA__MY_SETTLE_MS - 50); /* it did wait for the answer */
    CHECK(t < SIMBA__MY_SETTLE_MS + 1000);
    CHECK(mysql_query(c, "UNLOCK TABLES") == 0);
    mysql_close(c);
}

/* A ring finds the doorbell by the lock its session holds ('simba-door:<token>'), never by the
   connection id alone: a ring that names another connection's id (as a reused id would) with
   a token no doorbell holds interrupts nothing, and a ring with a live doorbell's token
   interrupts that doorbell whatever id it names. */
static MYSQL *side(void) {
    MYSQL *c = mysql_init(NULL);
    if (c && !mysql_real_connect(c, "127.0.0.1", "root", "simba", "simba", (unsigned)port, NULL, 0)) {
        fprintf(stderr, "  side: %s\n", mysql_error(c));
        mysql_close(c);
        return NULL;
    }
    return c;
}

TEST(ring_interrupts_only_the_doorbell_that_holds_its_token) {
    pair p;
    MYSQL *holder = side(), *blocked = side();
    const char *q = "SELECT GET_LOCK('simba-test-unrelated', 10)";
    char pq[200], out[40];
    uint64_t wakes;
    int64_t t;
    MYSQL_RES *res;
    MYSQL_ROW row;
    REQUIRE(holder && blocked);
    REQUIRE(mysql_query(holder, "DO GET_LOCK('simba-test-unrelated', 1)") == 0);
    REQUIRE(pair_open(&p, NULL, "ring-token"));
    REQUIRE(mysql_send_query(blocked, q, (unsigned long)strlen(q)) == 0); /* parked, as a doorbell is */
    snprintf(pq, sizeof pq, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %lu AND INFO LIKE 'SELECT GET_LOCK%%'",
             mysql_thread_id(blocked));
    UNTIL(sql_row(out, sizeof out, pq) == 0 && strcmp(out, "1") == 0, 3000, p.la, p.lb);
    CHECK_STR(out, "1");
    wakes = ((simba__my *)p.bb->impl)->wakes;
    /* another connection's id with a token nobody holds: nothing is interrupted */
    CHECK(sql("CALL `%s_bell`('%lu:00000000000000000000000000000000')", table, mysql_thread_id(blocked)) == 0);
    UNTIL(0, 300, p.la, p.lb);
    CHECK(mysql_query(holder, "DO RELEASE_LOCK('simba-test-unrelated')") == 0);
    t = now_ms();
    CHECK(mysql_read_query_result(blocked) == 0); /* not 1317, "interrupted" */
    res = mysql_store_result(blocked);
    row = res ? mysql_fetch_row(res) : NULL;
    CHECK(row && row[0] && strcmp(row[0], "1") == 0); /* it waited, and got the lock at its release */
    if (res) mysql_free_result(res);
    CHECK(now_ms() - t < 2000);
    CHECK(((simba__my *)p.bb->impl)->wakes == wakes);
    /* that same id with the waiter's token: the waiter's doorbell rings */
    CHECK(sql("CALL `%s_bell`('%lu:%s')", table, mysql_thread_id(blocked), ((simba__my *)p.bb->impl)->token) == 0);
    UNTIL(((simba__my *)p.bb->impl)->wakes > wakes, 2000, p.la, p.lb);
    CHECK(((simba__my *)p.bb->impl)->wakes > wakes);
    mysql_close(holder);
    mysql_close(blocked);
    pair_free(&p);
}

/* The doorbell waits on a lock its backend's request connection holds: when that session is
   killed the lock comes free, the doorbell closes ("timers"), the backend reconnects and takes
   the lock again, and the doorbell parks anew; so when the session lives but lets the lock
   go. Then it rings at the next release. */
TEST(doorbell_parks_again_after_its_request_session_is_killed) {
    pair p;
    simba__my *bm;
    char q[128];
    int i, ok;
    int64_t ms;
    lease_ms = 3000; /* the waiter's timed ask comes long after a ring */
    ok = pair_open(&p, NULL, "bell-relock");
    lease_ms = 1000;
    REQUIRE(ok);
    bm = (simba__my *)p.bb->impl;
    for (i = 0; i < 2; i++) {
        if (i == 0) {
            CHECK(sql("KILL CONNECTION %lu", (unsigned long)mysql_thread_id(bm->c[0].my)) == 0);
        } else { /* the session lives but lets the lock go (as one that reconnected past a stale
                    one would never have had it): its next command takes it again */
            UNTIL(bm->c[0].cur == NULL && bm->c[0].wait == 0, 2000, p.la, p.lb);
            snprintf(q, sizeof q, "DO RELEASE_LOCK('simba-bell:%s')", bm->token);
            CHECK(mysql_query(bm->c[0].my, q) == 0);
        }
        UNTIL(strcmp(simba_mysql_push(p.bb), "timers") == 0, 2000, p.la, p.lb);
        CHECK_STR(simba_mysql_push(p.bb), "timers"); /* its lock came free: the doorbell closed */
        UNTIL(strcmp(simba_mysql_push(p.bb), "doorbell") == 0, 8000, p.la, p.lb);
        CHECK_STR(simba_mysql_push(p.bb), "doorbell");
    }
    UNTIL(in_line(p.bb, table, "bell-relock", "b"), 3000, p.la, p.lb); /* its place carries the new doorbell */
    CHECK(in_line(p.bb, table, "bell-relock", "b"));
    ms = pair_hand_over(&p, p.a, &p.rb, 1);
    fprintf(stderr, "  (after both the waiter owned %lld ms after the release was asked)\n", (long long)ms);
    CHECK(ms >= 0 && ms < 400);
    pair_free(&p);
}

/* The first row of a statement on a blocking connection of the test's own into out ("" none). */
static int sql_row(char *out, size_t cap, const char *q) {
    MYSQL *c = mysql_init(NULL);
    int rc = -1;
    out[0] = 0;
    if (c && mysql_real_connect(c, "127.0.0.1", "root", "simba", "simba", (unsigned)port, NULL, CLIENT_MULTI_RESULTS) &&
        mysql_query(c, q) == 0) {
        MYSQL_RES *r = mysql_store_result(c);
        MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
        unsigned i, n = r ? mysql_num_fields(r) : 0;
        size_t o = 0;
        for (i = 0; row && i < n && o + 1 < cap; i++)
            o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "|" : "", row[i] ? row[i] : "NULL");
        if (r) mysql_free_result(r);
        while (mysql_next_result(c) == 0) {}
        rc = 0;
    } else fprintf(stderr, "  sql: %s: %s\n", q, c ? mysql_error(c) : "no memory");
    if (c) mysql_close(c);
    return rc;
}

/* A renewal (p_renew 1) whose lease has ended at the store is refused: the answer names
   nobody and the row is not granted anew; the same ask as a new acquisition (p_renew 0) is
   granted with the next fence. The procedure called as any program would. */
TEST(renewal_of_an_ended_lease_is_refused_not_granted) {
    char q[400], out[400];
    char t5[80];
    simba_loop *loop;
    simba_backend *be;
    simba_service *s;
    rec r = {0};
    snprintf(t5, sizeof t5, "%s_r", table);
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK);
    REQUIRE(open_be(loop, t5, 0, &be) == SIMBA_OK);
    s = contend(loop, be, "made", "a", &r); /* the setup makes the table and procedures */
    REQUIRE(s);
    UNTIL(r.acquired == 1, 5000, loop);
    REQUIRE(r.acquired == 1);
    simba_loop_free(loop);
    snprintf(q, sizeof q, "CALL `%s_acq`('ended', 'x', 100, 0, 1000, 0, '', X'')", t5);
    CHECK(sql_row(out, sizeof out, q) == 0);
    CHECK(strncmp(out, "x|", 2) == 0);
    {
        struct timespec sl = {0, 300000000}; /* the 100 ms lease ends at the store */
        nanosleep(&sl, NULL);
    }
    snprintf(q, sizeof q, "CALL `%s_acq`('ended', 'x', 100, 0, 1000, 1, '', X'')", t5);
    CHECK(sql_row(out, sizeof out, q) == 0);
    fprintf(stderr, "  (a renewal after the lease's end answers: %s)\n", out);
    CHECK(strncmp(out, "|0|0|-1|0|", 10) == 0);
    snprintf(q, sizeof q, "SELECT owner, fence FROM `%s` WHERE name = 'ended'", t5);
    CHECK(sql_row(out, sizeof out, q) == 0);
    CHECK_STR(out, "x|1"); /* the row as the ended lease left it: not granted anew */
    snprintf(q, sizeof q, "CALL `%s_acq`('ended', 'x', 100, 0, 1000, 0, '', X'')", t5);
    CHECK(sql_row(out, sizeof out, q) == 0);
    CHECK(strncmp(out, "x|", 2) == 0);
    snprintf(q, sizeof q, "SELECT owner, fence FROM `%s` WHERE name = 'ended'", t5);
    CHECK(sql_row(out, sizeof out, q) == 0);
    CHECK_STR(out, "x|2");
}

static int script(const char *fmt, ...) {
    char cmd[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd) == 0 ? 0 : -1;
}

/* The server restarts (a clean stop, its data kept): the owner loses its connection and
   steps down within its ttl; the backends connect anew by themselves; the loss marker is
   gone with the restart, so nobody is granted until max_lease_ms after the server's start,
   and the next fence is above the old one. */
TEST(server_restart_reconnects_and_quarantines) {
    simba_loop *la, *lb;
    simba_backend *ba, *bb;
    simba_service *a, *b;
    rec ra = {0}, rb = {0};
    int64_t t_up;
    REQUIRE(script("sh scripts/mysql-start.sh %d %s >/dev/null", port2, dir2) == 0);
    REQUIRE(simba_loop_new(NULL, &la) == SIMBA_OK && simba_loop_new(NULL, &lb) == SIMBA_OK);
    /* a quarantine longer than a loaded machine's server start (from its process's start) */
    REQUIRE(open_on(port2, la, "restarted", 8000, &ba) == SIMBA_OK && open_on(port2, lb, "restarted", 8000, &bb) == SIMBA_OK);
    a = contend(la, ba, "restart", "a", &ra);
    REQUIRE(a);
    UNTIL(ra.acquired == 1, 5000, la);
    REQUIRE(ra.acquired == 1);
    CHECK(script("sh scripts/mysql-stop.sh %s --keep >/dev/null", dir2) == 0);
    UNTIL(ra.released == 1, 3000, la);
    CHECK(ra.released == 1);
    CHECK(simba_stop(a) == SIMBA_OK);
    CHECK(script("sh scripts/mysql-start.sh %d %s >/dev/null", port2, dir2) == 0);
    t_up = now_ms();
    b = contend(lb, bb, "restart", "b", &rb);
    REQUIRE(b);
    UNTIL(rb.acquired == 1, 15000, la, lb);
    CHECK(rb.acquired == 1);
    fprintf(stderr, "  (b owned %lld ms after the server was up again, %d quarantine event(s))\n", (long long)(now_ms() - t_up),
            rb.quarantines);
    CHECK(rb.quarantines >= 1);
    CHECK(rb.fence > ra.fence);
    simba_loop_free(la);
    simba_loop_free(lb);
    CHECK(script("sh scripts/mysql-stop.sh %s >/dev/null", dir2) == 0);
}

int main(int argc, char **argv) {
    const char *e = getenv("SIMBA_MYSQL_PORT");
    port = e && *e ? atoi(e) : 3390;
    port2 = port + 1;
    snprintf(dir2, sizeof dir2, "%s", getenv("SIMBA_MYSQL_DIR2") ? getenv("SIMBA_MYSQL_DIR2") : "build/mysql-test");
    snprintf(table, sizeof table, "tm_%d_%ld", (int)getpid(), (long)(now_ms() % 100000));
    CHECK_INIT(argc, argv);
    RUN(bad_input_is_refused_in_words);
    RUN(killed_connection_reconnects_and_owner_keeps_the_fence);
    RUN(release_rings_the_waiters_doorbell_and_a_killed_one_comes_back);
    RUN(doorbell_parks_again_after_its_request_session_is_killed);
    RUN(ring_interrupts_only_the_doorbell_that_holds_its_token);
    RUN(pool_spreads_names_and_one_killed_connection_reconnects_alone);
    RUN(hand_over_grant_is_the_fence_the_waiter_owns);
    RUN(unix_socket_contends_and_is_rung);
    RUN(free_behind_a_hung_statement_keeps_its_bound);
    RUN(renewal_of_an_ended_lease_is_refused_not_granted);
    RUN(deleted_rows_quarantine_and_fences_go_on);
    RUN(truncated_table_quarantines_and_fences_go_on);
    RUN(dropped_table_is_made_anew_with_higher_fences);
    RUN(first_setup_by_several_processes_at_once);
    RUN(another_schema_version_is_refused_naming_both);
    RUN(refused_login_and_unknown_database_are_denied_at_once);
    RUN(force_release_frees_one_holding_of_a_semaphore);
    RUN(server_restart_reconnects_and_quarantines);
    return check_report("mysql");
}
