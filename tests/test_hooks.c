/* test_hooks.c -- the loop's fd and timer hooks: every descriptor a backend watches
 * is started once, changed, and stopped while it is still the same open file (a number reused
 * by a reconnect shows as stop then start); calls outside simba_poll that move the deadline
 * earlier reach the timer hook at once. Memory and SQLite in process; Redis against the real
 * redis-server on SIMBA_HOOKS_REDIS_PORT (tests/test_loops.sh starts one), which must answer. */
/* Not on tests/fixture.h: what it records is the loop's fd and timer hook calls on one loop, not service callbacks. */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"
#include "../simba_sql.h"
#include "../simba_redis.h"
#include "check.h"
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the caller's event loop would hold: fd, interest and the file it was when started. */
typedef struct watch { int fd; short ev; dev_t dev; ino_t ino; } watch;
typedef struct rec {
    watch w[32];
    int n;
    int starts, stops, changes;
    int stop_unknown;  /* a stop for a number not watched */
    int stop_closed;   /* a stop that came after the fd was closed or reused */
    int missed_stop;   /* a start for a number still watched as another file */
    int timer_calls;
    int64_t last_wait;
} rec;

static int rec_find(rec *r, int fd) {
    int i;
    for (i = 0; i < r->n; i++)
        if (r->w[i].fd == fd) return i;
    return -1;
}

static void fd_hook(void *u, int fd, short ev) {
    rec *r = (rec *)u;
    int i = rec_find(r, fd);
    struct stat st;
    int open_now = fstat(fd, &st) == 0;
    if (ev) {
        if (!open_now) { r->stop_closed++; return; } /* told to watch a closed number */
        if (i >= 0) {
            if (r->w[i].dev != st.st_dev || r->w[i].ino != st.st_ino) r->missed_stop++;
            r->w[i].ev = ev;
            r->changes++;
            return;
        }
        if (r->n == 32) return;
        r->w[r->n].fd = fd;
        r->w[r->n].ev = ev;
        r->w[r->n].dev = st.st_dev;
        r->w[r->n].ino = st.st_ino;
        r->n++;
        r->starts++;
        return;
    }
    if (i < 0) { r->stop_unknown++; return; }
    if (!open_now || r->w[i].dev != st.st_dev || r->w[i].ino != st.st_ino) r->stop_closed++;
    r->w[i] = r->w[--r->n];
    r->stops++;
}

static void timer_hook(void *u, int64_t wait_ms) {
    rec *r = (rec *)u;
    r->timer_calls++;
    r->last_wait = wait_ms;
}

static simba_loop *hooked_loop(rec *r) {
    simba_loop_desc d;
    simba_loop *l = NULL;
    memset(r, 0, sizeof *r);
    memset(&d, 0, sizeof d);
    d.fd_hook = fd_hook;
    d.fd_user = r;
    d.timer_hook = timer_hook;
    d.timer_user = r;
    simba_loop_new(&d, &l);
    return l;
}

/* The hook's view must equal what simba_fds() lists, number and interest. */
static int view_matches(simba_loop *l, rec *r) {
    struct pollfd p[16];
    int n = simba_fds(l, p, 16), i, j;
    if (n != r->n) return 0;
    for (i = 0; i < n; i++) {
        j = rec_find(r, p[i].fd);
        if (j < 0 || r->w[j].ev != (short)(p[i].events & (POLLIN | POLLOUT))) return 0;
    }
    return 1;
}

static int poll_until_owner(simba_loop *l, rec *r, simba_service *s, int64_t max_ms, int *views_ok) {
    int64_t end = simba_now(l) + max_ms;
    while (simba_now(l) < end) {
        if (simba_wait(l, 20) != SIMBA_OK) return 0;
        if (views_ok && !view_matches(l, r)) *views_ok = 0;
        if (simba_is_owner(s)) return 1;
    }
    return 0;
}

static simba_contend_desc cdesc(const char *mutex, const char *id) {
    simba_contend_desc d;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    d.contender_id = id;
    d.ttl_ms = 3000;
    d.transition_ms = 1000;
    return d;
}

TEST(memory_pipe_started_and_stopped_before_close) {
    rec r;
    simba_memstore *st = NULL;
    simba_backend *be = NULL;
    simba_service *s = NULL;
    simba_contend_desc d = cdesc("hooks-mem", "a");
    simba_loop *l = hooked_loop(&r);
    int views_ok = 1;
    REQUIRE(l != NULL);
    CHECK_RC(simba_memstore_new(NULL, &st), SIMBA_OK);
    CHECK_RC(simba_memory_open(l, st, &be), SIMBA_OK);
    CHECK_RC(simba_contend(l, be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    CHECK_EQ(r.starts, 1); /* the call outside the poll already told the loop */
    CHECK(poll_until_owner(l, &r, s, 2000, &views_ok));
    CHECK(views_ok);
    CHECK_EQ(r.n, 1);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
    CHECK_EQ(r.n, 0);
    CHECK_EQ(r.stops, r.starts);
    CHECK_EQ(r.stop_closed, 0);
    CHECK_EQ(r.stop_unknown, 0);
    CHECK_EQ(r.missed_stop, 0);
    simba_memstore_free(st);
}

TEST(timer_hook_on_calls_outside_the_poll) {
    rec r;
    simba_memstore *st = NULL;
    simba_backend *be = NULL;
    simba_service *s = NULL, *s2 = NULL;
    simba_contend_desc d = cdesc("hooks-timer", "a"), d2 = cdesc("hooks-timer", "b");
    simba_loop *l = hooked_loop(&r);
    int64_t w;
    int calls;
    REQUIRE(l != NULL);
    CHECK_RC(simba_memstore_new(NULL, &st), SIMBA_OK);
    CHECK_RC(simba_memory_open(l, st, &be), SIMBA_OK);
    w = simba_poll(l);
    CHECK(w > 1000); /* idle: the caller sleeps long */
    CHECK_EQ(r.timer_calls, 0);
    CHECK_RC(simba_contend(l, be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    CHECK(r.timer_calls >= 1);
    CHECK_EQ(r.last_wait, 0); /* the answer is queued: poll now */
    CHECK(poll_until_owner(l, &r, s, 2000, NULL));
    w = simba_poll(l); /* the owner renews in about ttl/3 */
    CHECK(w > 100);
    calls = r.timer_calls;
    /* a service that is not started moves nothing */
    CHECK_RC(simba_contend(l, be, &d2, &s2), SIMBA_OK);
    CHECK_EQ(r.timer_calls, calls);
    /* a refused call moves nothing either */
    CHECK_RC(simba_start(s), SIMBA_ESTATE);
    CHECK_EQ(r.timer_calls, calls);
    /* a stop from outside (another callback of the caller's loop) must wake it now */
    CHECK_RC(simba_stop(s), SIMBA_OK);
    CHECK_EQ(r.timer_calls, calls + 1);
    CHECK_EQ(r.last_wait, 0);
    /* the stop is carried out by the very next poll */
    simba_poll(l);
    CHECK(!simba_is_owner(s));
    CHECK_EQ(simba_service_status(s), SIMBA_INITIAL);
    /* simba_wait (the blocking calls' driver) hands its new deadline to the timer hook */
    calls = r.timer_calls;
    CHECK_RC(simba_wait(l, 0), SIMBA_OK);
    CHECK_EQ(r.timer_calls, calls + 1);
    CHECK(r.last_wait > 1000); /* idle again */
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
    simba_memstore_free(st);
}

TEST(no_hooks_no_calls) {
    /* a loop without hooks behaves as before: simba_backend_fd is a no-op */
    simba_loop *l = NULL;
    simba_memstore *st = NULL;
    simba_backend *be = NULL;
    REQUIRE(simba_loop_new(NULL, &l) == SIMBA_OK);
    CHECK_RC(simba_memstore_new(NULL, &st), SIMBA_OK);
    CHECK_RC(simba_memory_open(l, st, &be), SIMBA_OK);
    simba_backend_fd(be, 0, POLLIN);
    simba_backend_fd(NULL, 0, POLLIN);
    CHECK_EQ(simba_fds(l, NULL, 0), 1);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
    simba_memstore_free(st);
}

TEST(hooks_set_and_removed_on_a_live_loop) {
    rec r;
    simba_loop *l = NULL;
    simba_memstore *st = NULL;
    simba_backend *be = NULL;
    memset(&r, 0, sizeof r);
    REQUIRE(simba_loop_new(NULL, &l) == SIMBA_OK);
    CHECK_RC(simba_memstore_new(NULL, &st), SIMBA_OK);
    CHECK_RC(simba_memory_open(l, st, &be), SIMBA_OK);
    CHECK_RC(simba_loop_set_hooks(NULL, fd_hook, &r, timer_hook, &r), SIMBA_EINVAL);
    CHECK_RC(simba_loop_set_hooks(l, fd_hook, &r, timer_hook, &r), SIMBA_OK);
    CHECK_EQ(r.starts, 1);       /* what is already watched is handed over at once */
    CHECK_EQ(r.timer_calls, 1);  /* and so is the current wait */
    CHECK(view_matches(l, &r));
    CHECK_RC(simba_loop_set_hooks(l, NULL, NULL, NULL, NULL), SIMBA_OK);
    CHECK_EQ(r.n, 0);
    CHECK_EQ(r.stops, 1);
    CHECK_EQ(r.stop_closed, 0);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
    CHECK_EQ(r.stops, 1); /* a removed hook hears nothing more */
    simba_memstore_free(st);
}

TEST(sql_wake_socket_stopped_before_close) {
    char path[] = "/tmp/simba_hooks_XXXXXX";
    int fd = mkstemp(path);
    rec ra, rb;
    simba_loop *la, *lb;
    simba_backend *ba = NULL, *bb = NULL;
    simba_service *sa = NULL, *sb = NULL;
    simba_sql_desc sd;
    simba_contend_desc da = cdesc("hooks-sql", "a"), db = cdesc("hooks-sql", "b");
    int64_t end;
    REQUIRE(fd >= 0);
    close(fd);
    la = hooked_loop(&ra);
    lb = hooked_loop(&rb);
    REQUIRE(la && lb);
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    CHECK_RC(simba_sql_open(la, &sd, &ba), SIMBA_OK);
    CHECK_RC(simba_sql_open(lb, &sd, &bb), SIMBA_OK);
    REQUIRE(ba && bb);
    CHECK_RC(simba_contend(la, ba, &da, &sa), SIMBA_OK);
    CHECK_RC(simba_start(sa), SIMBA_OK);
    CHECK(poll_until_owner(la, &ra, sa, 2000, NULL));
    CHECK_RC(simba_contend(lb, bb, &db, &sb), SIMBA_OK);
    CHECK_RC(simba_start(sb), SIMBA_OK);
    /* the waiter's wake-up socket is watched while its waiter row lives */
    end = simba_now(lb) + 2000;
    while (rb.n == 0 && simba_now(lb) < end) simba_wait(lb, 20);
    CHECK_EQ(rb.n, 1);
    CHECK(view_matches(lb, &rb));
    /* a crash closes the socket: the stop comes first */
    CHECK_RC(simba_sql_simulate_crash(bb), SIMBA_OK);
    CHECK_EQ(rb.n, 0);
    CHECK_EQ(rb.stops, rb.starts);
    CHECK_EQ(rb.stop_closed, 0);
    CHECK_EQ(rb.stop_unknown, 0);
    CHECK_RC(simba_loop_free(lb), SIMBA_OK);
    CHECK_RC(simba_loop_free(la), SIMBA_OK);
    CHECK_EQ(ra.n, 0);
    CHECK_EQ(ra.stops, ra.starts);
    CHECK_EQ(ra.stop_closed + ra.stop_unknown + ra.missed_stop, 0);
    unlink(path);
}

static int redis_port(void) {
    const char *p = getenv("SIMBA_HOOKS_REDIS_PORT");
    return p && *p ? atoi(p) : 6500;
}

static int redis_kill_clients(int port) {
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *a, *b;
    int ok;
    if (!c || c->err) { if (c) redisFree(c); return 0; }
    a = (redisReply *)redisCommand(c, "CLIENT KILL TYPE normal SKIPME yes");
    b = (redisReply *)redisCommand(c, "CLIENT KILL TYPE pubsub");
    ok = a && a->type == REDIS_REPLY_INTEGER && a->integer >= 1 && b && b->type == REDIS_REPLY_INTEGER;
    if (a) freeReplyObject(a);
    if (b) freeReplyObject(b);
    redisFree(c);
    return ok;
}

TEST(redis_reconnect_stops_then_starts_every_socket) {
    rec r;
    simba_loop *l = hooked_loop(&r);
    simba_backend *be = NULL;
    simba_service *s = NULL;
    simba_redis_desc rd;
    simba_contend_desc d = cdesc("hooks-redis", "a");
    int views_ok = 1, stops0, starts0;
    REQUIRE(l != NULL);
    memset(&rd, 0, sizeof rd);
    rd.port = redis_port();
    rd.connect_timeout_ms = 1000;
    rd.command_timeout_ms = 1000;
    CHECK_RC(simba_redis_open(l, &rd, &be), SIMBA_OK);
    REQUIRE(be != NULL);
    CHECK_RC(simba_contend(l, be, &d, &s), SIMBA_OK);
    CHECK_RC(simba_start(s), SIMBA_OK);
    /* a fresh server quarantines grants for one lease (its marker is missing) */
    if (!poll_until_owner(l, &r, s, 8000, &views_ok)) {
        fprintf(stderr, "  no ownership: is redis-server on 127.0.0.1:%d? (%s)\n", rd.port, simba_backend_errmsg(be));
        CHECK(0);
    }
    CHECK(views_ok);
    CHECK(r.n >= 1);
    stops0 = r.stops;
    starts0 = r.starts;
    /* both connections die on the server: the backend reconnects, often on the same numbers */
    CHECK(redis_kill_clients(rd.port));
    {
        int64_t end = simba_now(l) + 4000;
        while (simba_now(l) < end && (r.stops < stops0 + 2 || r.starts < starts0 + 2 || r.n < 2)) {
            CHECK_RC(simba_wait(l, 20), SIMBA_OK);
            if (!view_matches(l, &r)) views_ok = 0;
        }
    }
    CHECK(r.stops >= stops0 + 2);
    CHECK(r.starts >= starts0 + 2);
    CHECK(views_ok);
    CHECK(poll_until_owner(l, &r, s, 3000, &views_ok));
    CHECK_EQ(r.stop_closed, 0);
    CHECK_EQ(r.stop_unknown, 0);
    CHECK_EQ(r.missed_stop, 0);
    CHECK_RC(simba_loop_free(l), SIMBA_OK);
    CHECK_EQ(r.n, 0);
    CHECK_EQ(r.stops, r.starts);
    CHECK_EQ(r.stop_closed, 0);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(memory_pipe_started_and_stopped_before_close);
    RUN(timer_hook_on_calls_outside_the_poll);
    RUN(no_hooks_no_calls);
    RUN(hooks_set_and_removed_on_a_live_loop);
    RUN(sql_wake_socket_stopped_before_close);
    RUN(redis_reconnect_stops_then_starts_every_socket);
    return check_report("hooks");
}
