/* test_zk.c -- the ZooKeeper backend against a real server.
 *
 *   scripts/zk-start.sh 2191 build/zk
 *   SIMBA_ZK_PORT=2191 SIMBA_ZK_DIR=build/zk build/test_zk [filter]
 *   scripts/zk-stop.sh build/zk
 *
 * SIMBA_ZK_DIR is the directory zk-start.sh used: the restart case stops and starts that
 * server with the scripts (SIMBA_ZK_SCRIPTS, default "scripts"). An unreachable server
 * is a failure, not a skip. Every simulated process is its own loop and ZooKeeper
 * session; the kill -9 case runs this binary again as a child (--child).
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#define SIMBA_IMPLEMENTATION
#define SIMBA_ZK_TEST_FAULTS /* simba_zk_test_marshal_fail */
#include "../simba_zk.h"
#include "check.h"
#include "zk_probe.h"
/* The driver only: the cases read on_owner's id and fence and the times in ms, which this
   file's recorder notes and the fixture's does not. */
#define FIXTURE_DRIVER
#define FIXTURE_DRIVER_ONLY
#include "fixture.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define SESSION_MS 2000
/* simba_loop_free / simba_backend_free returns, it does not hang (simba_zk.h THREADS: 2.5 s
   against a hung server); the margin is for ASan on a loaded machine (3.6 s seen once) */
#define FREE_BOUND_MS 6000
/* libzookeeper_mt reads an HTTP reply's text as a packet length and callocs it (up to 2 GB;
   218 MB for our fake, whose reply is shaped so: 1.8 GB cost ASan 25 s on a loaded machine):
   free with lazy zero pages, but ThreadSanitizer and AddressSanitizer fill and free that
   memory's shadow, which takes seconds inside the join on a loaded machine. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define GARBAGE_FREE_BOUND_MS 30000
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define GARBAGE_FREE_BOUND_MS 30000
#endif
#endif
#ifndef GARBAGE_FREE_BOUND_MS
#define GARBAGE_FREE_BOUND_MS FREE_BOUND_MS
#endif

static int g_port = 2191;
static char g_hosts[64];
static const char *g_dir = "build/zk";
static const char *g_scripts = "scripts";
static char g_self[4096];
static int g_twice; /* core log lines about double completion: must stay 0 */
static double g_max_poll; /* longest single simba_poll, ms */

static double now_ms(void) { return check__wall() * 1000.0; }

/* Which thread closes handles: closing joins the client library's threads, which the
   polling thread must not wait for (this definition wins over the library's for the
   header's calls; the library's own is called through). */
static pthread_t g_main;
static int g_in_poll, g_close_in_poll;
int zookeeper_close(zhandle_t *zh) {
    static int (*real)(zhandle_t *);
    if (!real) {
        void *f = dlsym(RTLD_NEXT, "zookeeper_close");
        memcpy(&real, &f, sizeof f);
    }
    if (pthread_equal(pthread_self(), g_main) && g_in_poll) g_close_in_poll++;
    return real(zh);
}

/* Host lookups by the library (its I/O threads call getaddrinfo), counted. */
static int g_lookups;
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    int (*f)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    __atomic_load(&real, &f, __ATOMIC_ACQUIRE);
    if (!f) {
        void *p = dlsym(RTLD_NEXT, "getaddrinfo");
        memcpy(&f, &p, sizeof p);
        __atomic_store(&real, &f, __ATOMIC_RELEASE);
    }
    __atomic_fetch_add(&g_lookups, 1, __ATOMIC_RELAXED);
    return f(node, service, hints, res);
}

/* libzookeeper_mt 3.8 sets its read-only probe's socket timeouts from a timeval whose
   tv_usec it leaves uninitialised: setsockopt refuses them (EDOM) when that garbage is out
   of range, and the probe's recv then has no timeout. g_no_timeouts makes that happen
   every time. */
static int g_no_timeouts;
int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
    static int (*real)(int, int, int, const void *, socklen_t);
    int (*f)(int, int, int, const void *, socklen_t);
    __atomic_load(&real, &f, __ATOMIC_ACQUIRE);
    if (!f) {
        void *p = dlsym(RTLD_NEXT, "setsockopt");
        memcpy(&f, &p, sizeof p);
        __atomic_store(&real, &f, __ATOMIC_RELEASE);
    }
    if (__atomic_load_n(&g_no_timeouts, __ATOMIC_ACQUIRE) && level == SOL_SOCKET &&
        (name == SO_RCVTIMEO || name == SO_SNDTIMEO)) {
        errno = EDOM;
        return -1;
    }
    return f(fd, level, name, val, len);
}

/* libzookeeper_mt formats endpoint names for its log lines into one static buffer that
   every handle's threads share: with several sessions in one process that is a data race
   inside the library (ThreadSanitizer reports it; the worst outcome is a garbled log
   line). Level 0 switches the library's logging off process-wide, so those lines are never
   formatted; the backend does not log through it anyway (zk_log NULL = silent). A program
   may do the same; simba_zk does not, as it is a process-wide setting. */
static void quiet_zk_client(void) {
    if (!getenv("SIMBA_TEST_ZKLOG")) zoo_set_debug_level((ZooLogLevel)0);
}

/* ---- simulated processes ------------------------------------------------------------ */

typedef struct proc {
    simba_loop *loop;
    simba_backend *be;
    int used;
} proc;

#define MAXP 12
static proc g_procs[MAXP];
static drv g_drv; /* drives every open proc's loop */

static void log_hook(void *user, simba_log_level level, const char *msg) {
    (void)user;
    if (strstr(msg, "twice")) g_twice++;
    if (level >= SIMBA_LOG_ERROR || getenv("SIMBA_TEST_VERBOSE")) fprintf(stderr, "    [log] %s\n", msg);
}

static void drv_loop_desc(simba_loop_desc *ld) {
    ld->log = log_hook;
    ld->log_level = SIMBA_LOG_INFO;
}

static proc *proc_open_ex(const char *hosts) {
    int i;
    for (i = 0; i < MAXP; i++) {
        if (!g_procs[i].used) {
            proc *p = &g_procs[i];
            simba_zk_desc zd;
            if (!(p->loop = drv_add(&g_drv))) return NULL;
            memset(&zd, 0, sizeof zd);
            zd.hosts = hosts ? hosts : g_hosts;
            zd.session_timeout_ms = SESSION_MS;
            zd.root = "/simba-test";
            if (simba_zk_open(p->loop, &zd, &p->be) != SIMBA_OK) {
                drv_close(&g_drv, p->loop);
                return NULL;
            }
            p->used = 1;
            return p;
        }
    }
    return NULL;
}
static proc *proc_open(void) { return proc_open_ex(NULL); }

static void proc_close(proc *p) {
    if (!p || !p->used) return;
    drv_close(&g_drv, p->loop);
    memset(p, 0, sizeof *p);
}

/* Polls every open loop once, after waiting up to max_ms on all their descriptors (or less,
   when a loop is due sooner). */
static void pump(int max_ms) {
    g_drv.max_poll_us = 0;
    g_in_poll = 1; /* spans drv_once's poll(2) wait too: the main thread closes nothing there */
    drv_once(&g_drv, max_ms);
    g_in_poll = 0;
    if (g_drv.max_poll_us / 1000.0 > g_max_poll) g_max_poll = g_drv.max_poll_us / 1000.0;
}

#define WAIT_FOR(cond, ms)                                                                 \
    do {                                                                                   \
        double wf_t0_ = now_ms();                                                          \
        while (!(cond) && now_ms() - wf_t0_ < (ms)) pump(5);                               \
    } while (0)

/* ---- services with recorded callbacks ----------------------------------------------- */

typedef struct rec {
    int acquired, released, owner_changes;
    double t_acquired, t_released;
    char owner[SIMBA_ID_MAX + 1]; /* last on_owner after-id */
    uint64_t fence;               /* fence at the last acquire */
    uint64_t owner_fence;         /* fence of the last on_owner */
    simba_reason reason;          /* why the last on_released fired */
} rec;

static void on_acq(simba_service *s, const simba_state *st, void *u) {
    rec *r = (rec *)u;
    (void)s;
    r->acquired++;
    r->t_acquired = now_ms();
    r->fence = st->after->fence;
}
static void on_rel(simba_service *s, const simba_state *st, void *u) {
    rec *r = (rec *)u;
    (void)s;
    r->released++;
    r->t_released = now_ms();
    r->reason = st->reason;
}
static void on_own(simba_service *s, const simba_state *st, void *u) {
    rec *r = (rec *)u;
    (void)s;
    r->owner_changes++;
    snprintf(r->owner, sizeof r->owner, "%s", st->after->id);
    r->owner_fence = st->after->fence;
}

static simba_service *contend_ex(proc *p, const char *mutex, const char *id, rec *r, int step_down_on_disconnect) {
    simba_contend_desc d;
    simba_service *s = NULL;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    d.contender_id = id;
    d.ttl_ms = SESSION_MS; /* ignored by ZooKeeper: the session is the lease */
    d.transition_ms = 1000;
    d.on_acquired = on_acq;
    d.on_released = on_rel;
    d.on_owner = on_own;
    d.user_data = r;
    d.step_down_on_disconnect = step_down_on_disconnect;
    if (simba_contend(p->loop, p->be, &d, &s) != SIMBA_OK) return NULL;
    if (simba_start(s) != SIMBA_OK) return NULL;
    return s;
}
static simba_service *contend(proc *p, const char *mutex, const char *id, rec *r) { return contend_ex(p, mutex, id, r, 0); }

/* A ("A") owns mutex, then B ("B") contends and has seen A as the owner; 1 when both hold. */
static int owner_and_waiter(proc *a, proc *b, const char *mutex, rec *ra, rec *rb, simba_service **sa,
                            simba_service **sb) {
    *sa = contend(a, mutex, "A", ra);
    if (!*sa) return 0;
    WAIT_FOR(ra->acquired == 1, 10000);
    if (ra->acquired != 1) return 0;
    *sb = contend(b, mutex, "B", rb);
    if (!*sb) return 0;
    WAIT_FOR(strcmp(rb->owner, "A") == 0, 5000);
    return strcmp(rb->owner, "A") == 0;
}

static simba_service *observe(proc *p, const char *mutex, rec *r) {
    simba_observe_desc d;
    simba_service *s = NULL;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    d.on_owner = on_own;
    d.user_data = r;
    d.refresh_ms = 5000; /* long: changes must arrive by the child watch push */
    if (simba_observe(p->loop, p->be, &d, &s) != SIMBA_OK) return NULL;
    if (simba_start(s) != SIMBA_OK) return NULL;
    return s;
}

static const char *view_id(simba_service *s) {
    static simba_owner o;
    if (simba_owner_get(s, &o) != SIMBA_OK) return "?";
    return o.id;
}

static void mname(char *buf, size_t cap, const char *what) {
    snprintf(buf, cap, "%s-%d-%ld", what, (int)getpid(), (long)(time(NULL) % 100000));
}

static simba_zk_stats stats(proc *p) {
    simba_zk_stats st;
    memset(&st, 0, sizeof st);
    simba_zk_stats_get(p->be, &st);
    return st;
}

/* ---- servers and scripts -------------------------------------------------------------- */

/* Runs a script in a child so that the loops keep being polled meanwhile. */
static pid_t script_start(const char *script, int with_port) {
    char path[512], port[16];
    pid_t pid;
    snprintf(path, sizeof path, "%s/%s", g_scripts, script);
    snprintf(port, sizeof port, "%d", g_port);
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", 1);
        if (devnull >= 0) dup2(devnull, 1);
        if (with_port) execl("/bin/bash", "bash", path, port, g_dir, (char *)NULL);
        else execl("/bin/bash", "bash", path, g_dir, (char *)NULL);
        _exit(127);
    }
    return pid;
}
static int script_wait(pid_t pid, double max_ms) {
    double t0 = now_ms();
    int st = 0;
    while (now_ms() - t0 < max_ms) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        pump(5);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* ---- cases ---------------------------------------------------------------------------- */

/* A refusal names the field in simba_loop_errmsg(). */
#define CHECK_REFUSED(call, word)                                                          \
    do {                                                                                   \
        CHECK_RC(call, SIMBA_EINVAL);                                                      \
        if (!strstr(simba_loop_errmsg(loop), word)) {                                      \
            fprintf(stderr, "  FAIL %s:%d: errmsg \"%s\" does not name %s\n", __FILE__,    \
                    __LINE__, simba_loop_errmsg(loop), word);                              \
            check__cur_failed = 1;                                                         \
        }                                                                                  \
    } while (0)

TEST(args) {
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_zk_desc d;
    simba_zk_stats st;
    const char *bad_roots[] = {"", "/", "simba", "/a/", "/a//b", "/zookeeper", "/zookeeper/x", "/a/..", "/a/.", "/a b", "/m/n\n"};
    const char *bad_hosts[] = {"localhost:2181", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                               "127.0.0.1:21x", "127.0.0.1:2181,", ",127.0.0.1:2181", "127.0.0.1:2181,,127.0.0.2:2181",
                               "zk.example:2181", "/chroot", "1.2.3:2181", "[::1]:2181"};
    const char *good_hosts[] = {"127.0.0.1:1", "127.0.0.1:2181,127.0.0.2:2182", "::1:2181", "127.0.0.1:2181/chroot"};
    char big[5000];
    size_t i;
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK || simba_loop_new(&(simba_loop_desc){0}, &loop) == SIMBA_OK);
    memset(&d, 0, sizeof d);
    CHECK_RC(simba_zk_open(NULL, &d, &be), SIMBA_EINVAL);
    CHECK_REFUSED(simba_zk_open(loop, NULL, &be), "desc");
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "hosts"); /* no hosts */
    d.hosts = "";
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "hosts");
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = 0;
    d.hosts = big;
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "hosts");
    for (i = 0; i < sizeof bad_hosts / sizeof bad_hosts[0]; i++) {
        d.hosts = bad_hosts[i];
        CHECK_REFUSED(simba_zk_open(loop, &d, &be), "hosts");
        CHECK(be == NULL);
    }
    for (i = 0; i < sizeof good_hosts / sizeof good_hosts[0]; i++) {
        d.hosts = good_hosts[i];
        CHECK_RC(simba_zk_open(loop, &d, &be), SIMBA_OK);
        if (be) CHECK_RC(simba_backend_free(be), SIMBA_OK);
        be = NULL;
    }
    d.hosts = g_hosts;
    CHECK_REFUSED(simba_zk_open(loop, &d, NULL), "out");
    for (i = 0; i < sizeof bad_roots / sizeof bad_roots[0]; i++) {
        d.root = bad_roots[i];
        CHECK_REFUSED(simba_zk_open(loop, &d, &be), "root");
    }
    d.root = NULL;
    d.session_timeout_ms = -1;
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "session_timeout_ms");
    d.session_timeout_ms = 1000000001;
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "session_timeout_ms");
    d.session_timeout_ms = 0;
    d.auth_scheme = "digest"; /* without credentials */
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "auth");
    d.auth = "u:p";
    d.auth_scheme = "";
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "auth_scheme");
    d.auth_scheme = "digest";
    d.auth = big;
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "auth");
    d.auth_scheme = NULL;
    d.auth = NULL;
    d.acl_creator_only = 1; /* needs an identity */
    CHECK_REFUSED(simba_zk_open(loop, &d, &be), "acl_creator_only");
    d.acl_creator_only = 0;
    d.root = "/simba-test/deeper/x_y";
    CHECK_RC(simba_zk_open(loop, &d, &be), SIMBA_OK);
    CHECK(be != NULL);
    CHECK_RC(simba_zk_stats_get(NULL, &st), SIMBA_EINVAL); /* no loop to hold words */
    CHECK_REFUSED(simba_zk_stats_get(be, NULL), "out");
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

TEST(acquire_renew_release) {
    proc *a = proc_open();
    char m[64];
    rec ra;
    simba_service *s;
    uint64_t f;
    simba_zk_stats st;
    memset(&ra, 0, sizeof ra);
    REQUIRE(a != NULL);
    mname(m, sizeof m, "arr");
    s = contend(a, m, "A", &ra);
    REQUIRE(s != NULL);
    WAIT_FOR(ra.acquired, 10000);
    REQUIRE(ra.acquired == 1);
    st = stats(a);
    CHECK(st.connected);
    CHECK_EQ(st.session_timeout_ms, SESSION_MS);
    CHECK(st.session_id != 0);
    f = simba_fence(s);
    CHECK(f > 0);
    /* several renewals (ttl 1333 ms): no new acquire, same fence, still owner */
    {
        double t0 = now_ms();
        WAIT_FOR(now_ms() - t0 > 4500, 5000);
    }
    CHECK(simba_is_owner(s));
    CHECK_EQ(ra.acquired, 1);
    CHECK_EQ(ra.released, 0);
    CHECK(simba_fence(s) == f);
    CHECK(stats(a).requests >= 4);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    WAIT_FOR(simba_service_status(s) == SIMBA_INITIAL, 5000);
    CHECK_EQ(ra.released, 1);
    CHECK(!simba_is_owner(s));
    proc_close(a);
}

/* A connected session does not look its (numeric) hosts up again: by default the library
   resolves them each time its I/O thread wakes, a dozen system calls per renewal. */
TEST(connected_session_does_not_look_up_hosts_again) {
    proc *a = proc_open();
    char m[64];
    rec ra;
    simba_service *s;
    int before;
    double t0;
    uint64_t req0;
    memset(&ra, 0, sizeof ra);
    REQUIRE(a != NULL);
    mname(m, sizeof m, "lookup");
    s = contend(a, m, "A", &ra);
    REQUIRE(s != NULL);
    WAIT_FOR(ra.acquired, 10000);
    REQUIRE(ra.acquired == 1);
    before = __atomic_load_n(&g_lookups, __ATOMIC_RELAXED);
    req0 = stats(a).requests;
    t0 = now_ms();
    WAIT_FOR(now_ms() - t0 > 3000, 4000); /* renewals every ~0.9 s (ttl 1333 ms) */
    CHECK(stats(a).requests >= req0 + 2);
    CHECK(simba_is_owner(s));
    CHECK_EQ(__atomic_load_n(&g_lookups, __ATOMIC_RELAXED) - before, 0);
    CHECK_RC(simba_stop(s), SIMBA_OK);
    WAIT_FOR(simba_service_status(s) == SIMBA_INITIAL, 5000);
    proc_close(a);
}

TEST(unreachable_server) {
    /* nothing listens on port 1: requests fail with ECONN, nobody owns, close is clean */
    proc *a = proc_open_ex("127.0.0.1:1");
    char m[64];
    rec ra;
    simba_service *s;
    memset(&ra, 0, sizeof ra);
    REQUIRE(a != NULL);
    mname(m, sizeof m, "unreach");
    s = contend(a, m, "A", &ra);
    REQUIRE(s != NULL);
    {
        double t0 = now_ms();
        WAIT_FOR(now_ms() - t0 > 1500, 2000);
    }
    CHECK_EQ(ra.acquired, 0);
    CHECK(!simba_is_owner(s));
    CHECK(!stats(a).connected);
    CHECK(strlen(simba_backend_errmsg(a->be)) > 0);
    proc_close(a); /* with a request in flight: completes with ECLOSED, no leak */
}

/* Names of other clients' nodes are kept only when they fit a record's buffer (memory per
   contender counts at 10,000 mutexes). A longer one, owning the mutex: the waiter still
   names it as owner, and takes over when it goes (by the push if the exists call that
   set the watch is still answering, else by its timer), with a fence. */
TEST(foreign_long_named_owner_is_waited_out) {
    proc *b = proc_open();
    char m[64], dir[160], node[256], made[256], data[96];
    const char *tag = "foreign0123456789abcdefghijklmnopqrstuvwxyz"; /* 43 > our 24 */
    rec rb;
    simba_service *sb;
    zhandle_t *zh = zookeeper_init(g_hosts, NULL, 10000, NULL, NULL, 0);
    double t0 = now_ms();
    int len;
    memset(&rb, 0, sizeof rb);
    REQUIRE(b && zh);
    while (zoo_state(zh) != ZOO_CONNECTED_STATE && now_ms() - t0 < 10000) usleep(5000);
    REQUIRE(zoo_state(zh) == ZOO_CONNECTED_STATE);
    mname(m, sizeof m, "longpred");
    snprintf(dir, sizeof dir, "/simba-test/%s", m);
    (void)zoo_create(zh, "/simba-test", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    CHECK_RC(zoo_create(zh, dir, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    snprintf(node, sizeof node, "%s/n-%s-", dir, tag);
    len = snprintf(data, sizeof data, "%s %d foreign-owner 0 ", tag, SESSION_MS); /* keep 0, no value */
    CHECK_RC(zoo_create(zh, node, data, len, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, made, sizeof made), ZOK);
    CHECK(strlen(strrchr(made, '/') + 1) >= SIMBA__ZK_KEEP_MAX); /* too long to keep */
    sb = contend(b, m, "waiter-B", &rb);
    REQUIRE(sb != NULL);
    WAIT_FOR(strcmp(rb.owner, "foreign-owner") == 0, 5000);
    CHECK_STR(rb.owner, "foreign-owner");
    CHECK(rb.acquired == 0);
    CHECK_RC(zoo_delete(zh, made, -1), ZOK);
    t0 = now_ms();
    WAIT_FOR(rb.acquired == 1, 3 * SESSION_MS + 2000);
    CHECK(rb.acquired == 1);
    CHECK(rb.fence > 0);
    fprintf(stderr, "  B owned %.0f ms after the foreign node went\n", now_ms() - t0);
    proc_close(b);
    zookeeper_close(zh);
}

TEST(observer_and_waiters_see_owner) {
    proc *a = proc_open(), *b = proc_open(), *o = proc_open();
    char m[64];
    rec ra, rb, ro;
    simba_service *sa, *sb, *so;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    memset(&ro, 0, sizeof ro);
    REQUIRE(a && b && o);
    mname(m, sizeof m, "obs");
    so = observe(o, m, &ro);
    REQUIRE(so != NULL);
    sa = contend(a, m, "owner-A", &ra);
    REQUIRE(sa != NULL);
    WAIT_FOR(ra.acquired, 10000);
    REQUIRE(ra.acquired == 1);
    sb = contend(b, m, "waiter-B", &rb);
    REQUIRE(sb != NULL);
    WAIT_FOR(strcmp(rb.owner, "owner-A") == 0 && strcmp(ro.owner, "owner-A") == 0, 5000);
    CHECK_STR(rb.owner, "owner-A"); /* a non-owner learns the owner id (the original did not) */
    CHECK_STR(ro.owner, "owner-A"); /* so does an observer */
    CHECK(ro.owner_fence == ra.fence);
    CHECK_STR(view_id(so), "owner-A");
    /* hand-over: the observer hears of it by the child watch push, not its 5 s refresh */
    {
        double t0;
        CHECK_RC(simba_stop(sa), SIMBA_OK);
        t0 = now_ms();
        /* the new owner's fence comes with its write to its node: pushed by the data watch */
        WAIT_FOR(rb.acquired && strcmp(ro.owner, "waiter-B") == 0 && ro.owner_fence == rb.fence, 4000);
        CHECK(rb.acquired == 1);
        CHECK_STR(ro.owner, "waiter-B");
        CHECK(ro.owner_fence == rb.fence);
        CHECK(rb.fence > ra.fence);
        fprintf(stderr, "  observer saw the new owner %.0f ms after the stop\n", now_ms() - t0);
        CHECK(now_ms() - t0 < 1500);
        CHECK(stats(o).owner_events >= 1);
    }
    proc_close(a);
    proc_close(b);
    proc_close(o);
}

TEST(fence_strictly_increases) {
    proc *a = proc_open(), *b = proc_open();
    char m[64];
    rec ra, rb;
    simba_service *sa, *sb;
    uint64_t f1, f2, f3;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    REQUIRE(a && b);
    mname(m, sizeof m, "fence");
    REQUIRE(owner_and_waiter(a, b, m, &ra, &rb, &sa, &sb));
    f1 = ra.fence;
    CHECK_RC(simba_stop(sa), SIMBA_OK);
    WAIT_FOR(rb.acquired == 1, 5000);
    REQUIRE(rb.acquired == 1);
    f2 = rb.fence;
    WAIT_FOR(simba_service_status(sa) == SIMBA_INITIAL, 5000);
    CHECK_RC(simba_start(sa), SIMBA_OK); /* A again, a new node */
    WAIT_FOR(strcmp(ra.owner, "B") == 0, 5000);
    CHECK_RC(simba_stop(sb), SIMBA_OK);
    WAIT_FOR(ra.acquired == 2, 5000);
    REQUIRE(ra.acquired == 2);
    f3 = ra.fence;
    fprintf(stderr, "  fences: %llu < %llu < %llu\n", (unsigned long long)f1, (unsigned long long)f2,
            (unsigned long long)f3);
    CHECK(f1 > 0);
    CHECK(f2 > f1);
    CHECK(f3 > f2);
    proc_close(a);
    proc_close(b);
}

/* An owner whose loop stalls past its local lease steps down while its session (kept
   alive by the client library's thread) and node survive. Asking again is a new
   acquisition (renew == 0) and must carry a greater fence. Alone, it keeps the mutex with a
   new fence; with a waiter queued, whose node is older than any new write, the waiter owns
   next and the re-asking owner queues behind it. Observers report the same fences. */
static void stall_owner(proc *a, rec *ra, int acquired) {
    struct timespec stall = {1, 800000000}; /* > 2T/3 = 1333 ms, < T = 2000 ms */
    (void)a;
    nanosleep(&stall, NULL); /* the stalled frame: nobody is polled */
    WAIT_FOR(ra->released == acquired, 3000);
    CHECK_EQ(ra->released, acquired);
}

TEST(reacquire_after_local_step_down_new_fence) {
    proc *a = proc_open(), *b = proc_open(), *o = proc_open();
    char m[64];
    rec ra, rb, ro;
    simba_service *sa, *sb, *so;
    uint64_t f1, f2, f3, f4;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    memset(&ro, 0, sizeof ro);
    REQUIRE(a && b && o);
    mname(m, sizeof m, "regrant");
    so = observe(o, m, &ro);
    REQUIRE(so != NULL);
    sa = contend(a, m, "A", &ra);
    REQUIRE(sa != NULL);
    WAIT_FOR(ra.acquired == 1 && ro.owner_fence == ra.fence, 10000);
    REQUIRE(ra.acquired == 1);
    f1 = ra.fence;
    /* alone: the same node, a new tenure, a greater fence */
    stall_owner(a, &ra, 1);
    WAIT_FOR(ra.acquired == 2, 5000);
    REQUIRE(ra.acquired == 2);
    CHECK_EQ(stats(a).sessions, 1); /* the same session and node: only the tenure is new */
    f2 = ra.fence;
    CHECK(f2 > f1);
    WAIT_FOR(ro.owner_fence == f2, 3000);
    CHECK(ro.owner_fence == f2);
    {   /* renewals keep it */
        double t0 = now_ms();
        WAIT_FOR(now_ms() - t0 > 1500, 2000);
    }
    CHECK(simba_fence(sa) == f2);
    CHECK_EQ(ra.acquired, 2);
    /* with a waiter: it owns next, with a greater fence; A queues behind it */
    sb = contend(b, m, "B", &rb);
    REQUIRE(sb != NULL);
    WAIT_FOR(strcmp(rb.owner, "A") == 0, 5000);
    stall_owner(a, &ra, 2);
    WAIT_FOR(rb.acquired == 1 && strcmp(ra.owner, "B") == 0, 5000);
    REQUIRE(rb.acquired == 1);
    f3 = rb.fence;
    CHECK(f3 > f2);
    CHECK_EQ(ra.acquired, 2);
    WAIT_FOR(ro.owner_fence == f3, 3000);
    CHECK(ro.owner_fence == f3);
    CHECK_RC(simba_stop(sb), SIMBA_OK);
    WAIT_FOR(ra.acquired == 3, 5000);
    REQUIRE(ra.acquired == 3);
    f4 = ra.fence;
    CHECK(f4 > f3);
    fprintf(stderr, "  fences: A %llu, A again %llu, B %llu, A %llu\n", (unsigned long long)f1,
            (unsigned long long)f2, (unsigned long long)f3, (unsigned long long)f4);
    proc_close(a);
    proc_close(b);
    proc_close(o);
}

TEST(waiters_woken_one_at_a_time) {
    enum { NW = 4 };
    proc *p[NW + 1];
    rec r[NW + 1];
    simba_service *s[NW + 1];
    char m[64], id[16];
    int i, k;
    mname(m, sizeof m, "line");
    memset(r, 0, sizeof r);
    for (i = 0; i <= NW; i++) {
        p[i] = proc_open();
        REQUIRE(p[i] != NULL);
    }
    /* p[0] owns, p[1..NW] queue up in this order */
    for (i = 0; i <= NW; i++) {
        snprintf(id, sizeof id, "C%d", i);
        s[i] = contend(p[i], m, id, &r[i]);
        REQUIRE(s[i] != NULL);
        if (i == 0) WAIT_FOR(r[0].acquired, 10000);
        else WAIT_FOR(strcmp(r[i].owner, "C0") == 0, 5000);
        REQUIRE(strcmp(i == 0 ? view_id(s[0]) : r[i].owner, "C0") == 0);
    }
    for (k = 0; k < NW; k++) {
        uint64_t before[NW + 1];
        double t0;
        for (i = 0; i <= NW; i++) before[i] = stats(p[i]).released_events;
        CHECK_RC(simba_stop(s[k]), SIMBA_OK);
        t0 = now_ms();
        WAIT_FOR(r[k + 1].acquired == 1, 5000);
        CHECK_EQ(r[k + 1].acquired, 1);
        fprintf(stderr, "  stop of C%d -> C%d owns: %.1f ms\n", k, k + 1, r[k + 1].t_acquired - t0);
        CHECK(r[k + 1].t_acquired - t0 < 500);
        WAIT_FOR(0, 300); /* let any wrongly woken waiter show itself */
        for (i = k + 2; i <= NW; i++) {
            CHECK_EQ(stats(p[i]).released_events, before[i]); /* not woken */
            CHECK_EQ(r[i].acquired, 0);
        }
        CHECK_EQ(stats(p[k + 1]).released_events, before[k + 1] + 1); /* exactly the next */
    }
    for (i = 0; i <= NW; i++) proc_close(p[i]);
}

/* ---- a TCP proxy that can cut a client off (a partition) ------------------------------- */

#include <pthread.h>

typedef struct proxy {
    int lfd, port;
    pthread_t th;
    pthread_mutex_t mu;
    int frozen, stop; /* under mu */
    int cli[32], srv[32], n;
} proxy;

static int proxy_flag(proxy *px, int *f) {
    int v;
    pthread_mutex_lock(&px->mu);
    v = *f;
    pthread_mutex_unlock(&px->mu);
    return v;
}
static void proxy_set(proxy *px, int *f, int v) {
    pthread_mutex_lock(&px->mu);
    *f = v;
    pthread_mutex_unlock(&px->mu);
}

static void proxy_drop(proxy *px, int i) {
    close(px->cli[i]);
    close(px->srv[i]);
    px->cli[i] = px->cli[px->n - 1];
    px->srv[i] = px->srv[px->n - 1];
    px->n--;
}

static int write_all(int fd, const char *b, ssize_t n) {
    while (n > 0) {
        ssize_t w = write(fd, b, (size_t)n);
        if (w <= 0) return -1;
        b += w;
        n -= w;
    }
    return 0;
}

/* While frozen nothing is read, forwarded or accepted: both ends see silence, as in a
   partition (TCP stays up, so nobody gets a quick connection error). */
static void *proxy_main(void *arg) {
    proxy *px = (proxy *)arg;
    while (!proxy_flag(px, &px->stop)) {
        struct pollfd pf[65];
        int i, np = 0, frozen = proxy_flag(px, &px->frozen);
        if (!frozen) {
            pf[np].fd = px->lfd;
            pf[np++].events = POLLIN;
            for (i = 0; i < px->n; i++) {
                pf[np].fd = px->cli[i];
                pf[np++].events = POLLIN;
                pf[np].fd = px->srv[i];
                pf[np++].events = POLLIN;
            }
        }
        if (poll(pf, (nfds_t)np, 20) <= 0 || frozen) continue;
        for (i = px->n - 1; i >= 0; i--) {
            char buf[65536];
            int k;
            for (k = 0; k < 2; k++) {
                int from = k ? px->srv[i] : px->cli[i], to = k ? px->cli[i] : px->srv[i];
                if (pf[1 + 2 * i + k].revents & (POLLIN | POLLHUP | POLLERR)) {
                    ssize_t r = read(from, buf, sizeof buf);
                    if (r <= 0 || write_all(to, buf, r) != 0) {
                        proxy_drop(px, i);
                        break;
                    }
                }
            }
        }
        if ((pf[0].revents & POLLIN) && px->n < 32) {
            int c = accept(px->lfd, NULL, NULL), sfd;
            struct sockaddr_in a;
            if (c < 0) continue;
            memset(&a, 0, sizeof a);
            a.sin_family = AF_INET;
            a.sin_port = htons((uint16_t)g_port);
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            sfd = socket(AF_INET, SOCK_STREAM, 0);
            if (sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof a) != 0) {
                close(c);
                if (sfd >= 0) close(sfd);
                continue;
            }
            px->cli[px->n] = c;
            px->srv[px->n] = sfd;
            px->n++;
        }
    }
    while (px->n) proxy_drop(px, 0);
    return NULL;
}

static int proxy_start(proxy *px) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    memset(px, 0, sizeof *px);
    px->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (px->lfd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(px->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(px->lfd, 16) != 0 ||
        getsockname(px->lfd, (struct sockaddr *)&a, &al) != 0) {
        close(px->lfd);
        return -1;
    }
    px->port = ntohs(a.sin_port);
    pthread_mutex_init(&px->mu, NULL);
    if (pthread_create(&px->th, NULL, proxy_main, px) != 0) {
        close(px->lfd);
        pthread_mutex_destroy(&px->mu);
        return -1;
    }
    return 0;
}

static void proxy_stop(proxy *px) {
    proxy_set(px, &px->stop, 1);
    pthread_join(px->th, NULL);
    close(px->lfd);
    pthread_mutex_destroy(&px->mu);
}



/* Freeing the loop while owning sends a best-effort release (a delete) per mutex and closes
   the session. libzookeeper_mt fakes a ZCLOSING answer for each call still pending at
   zookeeper_close and queues it for its completion thread, which may have stopped already:
   those leak (LSan in the ASan build; many owned mutexes make the race near certain). The
   deletes must also be done: the waiter owns at once, not after the session timeout. */
#define FREE_MUTEXES 30
TEST(free_while_owning) {
    int round, rounds = getenv("SIMBA_TEST_ROUNDS") ? atoi(getenv("SIMBA_TEST_ROUNDS")) : 3;
    for (round = 0; round < rounds; round++) {
        proc *a = proc_open(), *b = proc_open();
        char m[FREE_MUTEXES][64];
        rec ra[FREE_MUTEXES], rb;
        simba_service *sb;
        double t0, took;
        int i, owned = 0;
        memset(ra, 0, sizeof ra);
        memset(&rb, 0, sizeof rb);
        REQUIRE(a && b);
        for (i = 0; i < FREE_MUTEXES; i++) {
            char what[32];
            snprintf(what, sizeof what, "freeown%d", i);
            mname(m[i], sizeof m[i], what);
            REQUIRE(contend(a, m[i], "A", &ra[i]) != NULL);
        }
        for (t0 = now_ms(); owned < FREE_MUTEXES && now_ms() - t0 < 15000; pump(5))
            for (owned = 0, i = 0; i < FREE_MUTEXES; i++) owned += ra[i].acquired == 1;
        REQUIRE(owned == FREE_MUTEXES);
        sb = contend(b, m[0], "B", &rb);
        REQUIRE(sb != NULL);
        WAIT_FOR(strcmp(rb.owner, "A") == 0, 5000);
        t0 = now_ms();
        proc_close(a);
        took = now_ms() - t0;
        CHECK(took < FREE_BOUND_MS);
        WAIT_FOR(rb.acquired == 1, 5000);
        CHECK_EQ(rb.acquired, 1);
        CHECK(rb.t_acquired - t0 < 1000); /* by the delete or the close, not by the session's end */
        fprintf(stderr, "  round %d: free took %.1f ms, B owns %.0f ms after\n", round, took, rb.t_acquired - t0);
        proc_close(b);
    }
}

/* libzookeeper 3.8 can answer ZMARSHALLINGERROR with the completion registered already; its
   thread then writes the result into the call record later. The hook reports accepted calls
   as that error: the records must outlive the library's use (ASan build: use after free). */
TEST(marshalling_error_keeps_call) {
    proc *a = proc_open();
    char m[64];
    rec ra;
    simba_service *s;
    const char *em;
    memset(&ra, 0, sizeof ra);
    REQUIRE(a != NULL);
    WAIT_FOR(stats(a).connected, 10000);
    REQUIRE(stats(a).connected);
    mname(m, sizeof m, "marshal");
    WAIT_FOR(0, 500); /* the session's own first calls (the root's schema version) are answered */
    simba_zk_test_marshal_fail = 3; /* the list, then the retries' first calls */
    s = contend(a, m, "A", &ra);
    REQUIRE(s != NULL);
    WAIT_FOR(simba_zk_test_marshal_fail == 0 && ra.acquired == 1, 15000);
    CHECK_EQ(simba_zk_test_marshal_fail, 0);
    CHECK_EQ(ra.acquired, 1);
    em = simba_backend_errmsg(a->be);
    if (!(em && strstr(em, "marshalling"))) fprintf(stderr, "  errmsg: %s\n", em ? em : "(null)");
    CHECK(em && strstr(em, "marshalling") != NULL); /* the refused call was reported */
    WAIT_FOR(0, 300); /* the orphaned calls' answers arrive and are released */
    simba_zk_test_marshal_fail = 2; /* a renewal's call, in an owned state */
    WAIT_FOR(simba_zk_test_marshal_fail == 0, 5000);
    CHECK_EQ(simba_zk_test_marshal_fail, 0);
    simba_zk_test_marshal_fail = 1; /* and one left for the close to settle */
    proc_close(a);
    simba_zk_test_marshal_fail = 0;
}

/* A released contender's clean-up delete that the library refuses at once (ZINVALIDSTATE:
   the handle knew of its session's expiry before our loop processed the event) must not
   be tried again in the same call chain: each try was refused at once too, one level
   deeper, until the stack ran out (mp_worker, SIGSEGV after a freeze longer than its
   session, in the zk fault run). It is tried again later, and the node goes then. */
TEST(refused_cleanup_tried_again_later) {
    proc *a = proc_open(), *b = proc_open();
    char m[64];
    rec ra, rb;
    simba_service *sa, *sb;
    int refused;
    double t0;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    REQUIRE(a && b);
    mname(m, sizeof m, "refused");
    REQUIRE(owner_and_waiter(a, b, m, &ra, &rb, &sa, &sb));
    simba_zk_test_refuse_delete = 1000000;
    CHECK_RC(simba_stop(sa), SIMBA_OK);
    WAIT_FOR(ra.released == 1, 2000);
    CHECK_EQ(ra.released, 1);
    WAIT_FOR(0, 200);
    refused = 1000000 - simba_zk_test_refuse_delete;
    simba_zk_test_refuse_delete = 0;
    fprintf(stderr, "  deletes refused before the retry: %d\n", refused);
    CHECK(refused >= 1 && refused <= 4); /* the release's, the clean-up's: no more */
    t0 = now_ms();
    WAIT_FOR(rb.acquired == 1, 5000); /* the later try deleted A's node */
    CHECK_EQ(rb.acquired, 1);
    fprintf(stderr, "  B owns %.0f ms after the refusals ended\n", rb.t_acquired - t0);
    proc_close(a);
    proc_close(b);
}

/* ---- a listener that is not ZooKeeper ------------------------------------------------- */

/* Answers what a client sends with garbage (an HTTP server's reply, kept open), with
   silence, or with a well-formed handshake that grants a read-only session; the client
   library's read-only probe ("isro" on a new connection) always meets silence, as a
   hung or foreign server gives it. Bound to an ephemeral loopback port. */
enum { FAKE_GARBAGE, FAKE_SILENT, FAKE_READONLY };

typedef struct fake {
    int lfd, port, mode;
    pthread_t th;
    pthread_mutex_t mu;
    int stop;                /* under mu */
    int isro, handshakes;    /* under mu: probes and session handshakes seen */
    int cli[64], seen[64], n;
} fake;

static int fake_get(fake *f, int *v) {
    int r;
    pthread_mutex_lock(&f->mu);
    r = *v;
    pthread_mutex_unlock(&f->mu);
    return r;
}

static void fake_answer(fake *f, int i, const char *buf, ssize_t got) {
    /* bytes 41-44, which the library reads as a packet length, are "\r\n\r\n" (218 MB) */
    static const char http[] = "HTTP/1.1 400 Bad Request\r\nServer: fakehtt\r\n\r\n";
    unsigned char ro[41];
    uint32_t v;
    int first = f->seen[i] == 0;
    f->seen[i] += (int)got;
    if (first && got >= 4 && memcmp(buf, "isro", 4) == 0) {
        pthread_mutex_lock(&f->mu);
        f->isro++;
        pthread_mutex_unlock(&f->mu);
        return; /* the probe waits for "rw" or "ro": it gets nothing */
    }
    if (!first || f->mode == FAKE_SILENT) return;
    if (f->mode == FAKE_GARBAGE) {
        (void)write_all(f->cli[i], http, (ssize_t)sizeof http - 1);
        return;
    }
    /* ConnectResponse: length 37, protocol 0, timeout 2000, session id, 16-byte password, readOnly 1 */
    memset(ro, 0, sizeof ro);
    v = htonl(37);
    memcpy(ro, &v, 4);
    v = htonl(2000);
    memcpy(ro + 8, &v, 4);
    ro[19] = 0x5a; /* a session id */
    v = htonl(16);
    memcpy(ro + 20, &v, 4);
    ro[40] = 1;
    pthread_mutex_lock(&f->mu);
    f->handshakes++;
    pthread_mutex_unlock(&f->mu);
    (void)write_all(f->cli[i], (const char *)ro, (ssize_t)sizeof ro);
}

static void *fake_main(void *arg) {
    fake *f = (fake *)arg;
    while (!fake_get(f, &f->stop)) {
        struct pollfd pf[65];
        int i;
        pf[0].fd = f->lfd;
        pf[0].events = POLLIN;
        for (i = 0; i < f->n; i++) {
            pf[1 + i].fd = f->cli[i];
            pf[1 + i].events = POLLIN;
        }
        if (poll(pf, (nfds_t)(1 + f->n), 20) <= 0) continue;
        for (i = f->n - 1; i >= 0; i--) {
            if (pf[1 + i].revents & (POLLIN | POLLHUP | POLLERR)) {
                char buf[4096];
                ssize_t r = read(f->cli[i], buf, sizeof buf);
                if (r <= 0) {
                    close(f->cli[i]);
                    f->cli[i] = f->cli[f->n - 1];
                    f->seen[i] = f->seen[f->n - 1];
                    f->n--;
                } else {
                    fake_answer(f, i, buf, r);
                }
            }
        }
        if ((pf[0].revents & POLLIN) && f->n < 64) {
            int c = accept(f->lfd, NULL, NULL);
            if (c >= 0) {
                f->cli[f->n] = c;
                f->seen[f->n] = 0;
                f->n++;
            }
        }
    }
    while (f->n) close(f->cli[--f->n]);
    return NULL;
}

static int fake_start(fake *f, int mode) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    memset(f, 0, sizeof *f);
    f->mode = mode;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (f->lfd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(f->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(f->lfd, 64) != 0 ||
        getsockname(f->lfd, (struct sockaddr *)&a, &al) != 0) {
        close(f->lfd);
        return -1;
    }
    f->port = ntohs(a.sin_port);
    pthread_mutex_init(&f->mu, NULL);
    if (pthread_create(&f->th, NULL, fake_main, f) != 0) {
        close(f->lfd);
        pthread_mutex_destroy(&f->mu);
        return -1;
    }
    return 0;
}

static void fake_stop(fake *f) {
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    close(f->lfd);
    pthread_mutex_destroy(&f->mu);
}

/* A simba_loop_free that never returns ends the run as a failure, not a hang. */
static void free_hangs(int sig) {
    static const char m[] = "  FAIL: simba_loop_free still waits, far past its bound\n";
    (void)sig;
    _exit(write(2, m, sizeof m - 1) < 0 ? 2 : 1);
}

/* simba_loop_free must keep its documented bound whatever listens at the address; a
   read-only session is refused (no grant) and said so in the backend's errmsg. */
static void foreign_server_case(int mode, const char *what, int rounds) {
    int round;
    for (round = 0; round < rounds && !check__cur_failed; round++) {
        fake f;
        char hosts[64], m[64];
        proc *a;
        rec ra;
        simba_service *s;
        double t0, took;
        memset(&ra, 0, sizeof ra);
        REQUIRE(fake_start(&f, mode) == 0);
        snprintf(hosts, sizeof hosts, "127.0.0.1:%d", f.port);
        a = proc_open_ex(hosts);
        REQUIRE(a != NULL);
        mname(m, sizeof m, what);
        s = contend(a, m, "A", &ra);
        REQUIRE(s != NULL);
        t0 = now_ms();
        /* long enough for the library's read-only probe (its first one is due 200 ms after
           connecting) */
        WAIT_FOR(now_ms() - t0 > 1200 && (mode != FAKE_READONLY || fake_get(&f, &f.isro) > 0), 3000);
        CHECK_EQ(ra.acquired, 0);
        if (mode == FAKE_READONLY) {
            const char *em = simba_backend_errmsg(a->be);
            CHECK(fake_get(&f, &f.handshakes) > 0);
            CHECK(em && strstr(em, "read-only") != NULL);
        }
        t0 = now_ms();
        signal(SIGALRM, free_hangs);
        alarm((unsigned)(2 * GARBAGE_FREE_BOUND_MS / 1000));
        proc_close(a);
        alarm(0);
        took = now_ms() - t0;
        fprintf(stderr, "  %s round %d: probes %d, simba_loop_free took %.0f ms\n", what, round, fake_get(&f, &f.isro),
                took);
        CHECK(took < (mode == FAKE_GARBAGE ? GARBAGE_FREE_BOUND_MS : FREE_BOUND_MS));
        fake_stop(&f);
    }
}

TEST(foreign_server_garbage) { foreign_server_case(FAKE_GARBAGE, "garbage", 3); }
TEST(foreign_server_silent) { foreign_server_case(FAKE_SILENT, "silent", 3); }
TEST(foreign_server_readonly) { foreign_server_case(FAKE_READONLY, "readonly", 3); }

/* The library's I/O thread starts a new read-only probe (a recv with no timeout) when the
   last one failed and it has not yet seen the close: a close that starts late (a loaded
   machine) must not leave simba_loop_free waiting on that probe. */
TEST(free_bounded_when_a_probe_starts_before_the_close) {
    __atomic_store_n(&g_no_timeouts, 1, __ATOMIC_RELEASE);
    simba_zk_test_close_delay_ms = 800; /* the probe shut down fails; the next is due 400 ms later */
    foreign_server_case(FAKE_READONLY, "lateclose", 1);
    simba_zk_test_close_delay_ms = 0;
    __atomic_store_n(&g_no_timeouts, 0, __ATOMIC_RELEASE);
}

/* The owner is cut off from the server long enough for its session to expire there: it
   must step down (by its local deadline) before the other contender can own, then learn
   of the expiry when the partition heals, open a new session and queue up again. */
TEST(session_expiry) {
    proxy px;
    char hosts[64], m[64];
    proc *a, *b;
    rec ra, rb;
    simba_service *sa, *sb;
    double t0;
    int both = 0;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    REQUIRE(proxy_start(&px) == 0);
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d", px.port);
    a = proc_open_ex(hosts);
    b = proc_open();
    REQUIRE(a && b);
    mname(m, sizeof m, "expiry");
    REQUIRE(owner_and_waiter(a, b, m, &ra, &rb, &sa, &sb));
    proxy_set(&px, &px.frozen, 1);
    g_max_poll = 0;
    g_close_in_poll = 0;
    t0 = now_ms();
    while (now_ms() - t0 < 8000 && !rb.acquired) {
        pump(5);
        if (simba_is_owner(sa) && simba_is_owner(sb)) both++;
    }
    CHECK_EQ(both, 0);
    CHECK_EQ(ra.released, 1);
    CHECK_EQ(rb.acquired, 1);
    CHECK(ra.t_released <= rb.t_acquired);
    fprintf(stderr, "  partition: A stepped down after %.0f ms, its session expired and B owns after %.0f ms\n",
            ra.t_released - t0, rb.t_acquired - t0);
    proxy_set(&px, &px.frozen, 0);
    t0 = now_ms();
    WAIT_FOR(stats(a).sessions == 2 && stats(a).connected, 10000);
    CHECK_EQ(stats(a).sessions, 2);
    CHECK(stats(a).lost_events >= 1);
    /* the expired handle was closed, but not inside simba_poll */
    CHECK_EQ(stats(a).closer_threads, 1);
    CHECK_EQ(g_close_in_poll, 0);
    fprintf(stderr, "  healed: A is in a new session after %.0f ms\n", now_ms() - t0);
    /* A re-contends in its new session and queues behind B */
    WAIT_FOR(strcmp(ra.owner, "B") == 0, 6000);
    CHECK_STR(ra.owner, "B");
    CHECK(!simba_is_owner(sa));
    CHECK(simba_is_owner(sb));
    CHECK_RC(simba_stop(sb), SIMBA_OK);
    WAIT_FOR(ra.acquired == 2, 5000);
    CHECK_EQ(ra.acquired, 2);
    CHECK(ra.fence > rb.fence);
    /* the caller's loop never waited on the silent server, nor on closing the dead handle */
    fprintf(stderr, "  longest simba_poll through partition, expiry and new session: %.1f ms\n", g_max_poll);
    CHECK(g_max_poll < 100);
    proc_close(a);
    proc_close(b);
    proxy_stop(&px);
}

/* The server goes away and comes back (same data dir, so sessions survive). Nobody may
   believe it owns past its local deadline meanwhile; afterwards ownership comes back. */
TEST(server_restart) {
    proc *a = proc_open(), *b = proc_open(), *c = proc_open();
    char m[64], m2[64];
    rec ra, rb, rc;
    simba_service *sa, *sb, *sc;
    pid_t pid;
    double t_dead, t_up, t_own;
    int violations = 0;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    memset(&rc, 0, sizeof rc);
    REQUIRE(a && b && c);
    mname(m, sizeof m, "restart");
    mname(m2, sizeof m2, "restart-sd");
    sa = contend(a, m, "A", &ra);
    REQUIRE(sa != NULL);
    WAIT_FOR(ra.acquired == 1, 10000);
    sb = contend(b, m, "B", &rb);
    sc = contend_ex(c, m2, "C", &rc, 1); /* the core's disconnect policy */
    REQUIRE(sb && sc);
    WAIT_FOR(strcmp(rb.owner, "A") == 0 && rc.acquired == 1, 5000);
    REQUIRE(ra.acquired == 1 && rc.acquired == 1);

    pid = script_start("zk-stop.sh", 0);
    CHECK_EQ(script_wait(pid, 20000), 0);
    t_dead = now_ms();
    CHECK(!zk_serving(g_port));
    /* The last renewal was sent before the server died, so A's local deadline (2/3 of
       the 2000 ms session) is at most 1333 ms away: after that nobody may own. */
    while (now_ms() - t_dead < 4000) {
        pump(5);
        if (now_ms() - t_dead > 1333 + 100 && (simba_is_owner(sa) || simba_is_owner(sb) || simba_is_owner(sc)))
            violations++;
    }
    CHECK_EQ(violations, 0);
    CHECK_EQ(ra.released, 1);
    CHECK_EQ(rc.released, 1);
    CHECK_EQ(ra.reason, SIMBA_REASON_LAPSED);     /* kept its lease to the local deadline */
    CHECK_EQ(rc.reason, SIMBA_REASON_CONNECTION); /* step_down_on_disconnect */
    fprintf(stderr, "  server gone: A stepped down %+.0f ms, C (step down on disconnect) %+.0f ms from then\n",
            ra.t_released - t_dead, rc.t_released - t_dead);
    CHECK(rc.t_released <= ra.t_released);

    pid = script_start("zk-start.sh", 1);
    CHECK_EQ(script_wait(pid, 40000), 0);
    t_up = now_ms();
    WAIT_FOR((ra.acquired == 2 || rb.acquired == 1) && rc.acquired == 2, 15000);
    t_own = now_ms();
    CHECK_EQ(ra.acquired + rb.acquired, 2);
    CHECK_EQ(simba_is_owner(sa) + simba_is_owner(sb), 1);
    CHECK_EQ(rc.acquired, 2);
    fprintf(stderr, "  ownership re-established %.0f ms after the server answered again (owner %s)\n",
            t_own - t_up, simba_is_owner(sa) ? "A" : "B");
    WAIT_FOR(strcmp(simba_is_owner(sa) ? rb.owner : ra.owner, simba_is_owner(sa) ? "A" : "B") == 0, 6000);
    CHECK_STR(simba_is_owner(sa) ? rb.owner : ra.owner, simba_is_owner(sa) ? "A" : "B");
    proc_close(a);
    proc_close(b);
    proc_close(c);
}

/* The child of kill9: contends, says "OWNER" on stdout when it owns, runs until killed. */
static int child_main(const char *mutex, const char *id) {
    proc *p = proc_open();
    rec r;
    simba_service *s;
    double t0 = now_ms();
    int told = 0;
    memset(&r, 0, sizeof r);
    if (!p) return 2;
    s = contend(p, mutex, id, &r);
    if (!s) return 3;
    while (now_ms() - t0 < 60000) {
        pump(20);
        if (r.acquired && !told) {
            printf("OWNER\n");
            fflush(stdout);
            told = 1;
        }
    }
    return 0;
}

/* 10,000 services on one loop and one session (5,000 mutexes x 2): every mutex
   gets exactly one owner, renewals are answered by session checks instead of a listing
   each, and when the owners stop, every waiter takes over with a greater fence. */
/* Under ASan the loop needs about three times the CPU: 5,000 services there (the plain
   build runs 10,000), so that a loaded 2-core machine still gives it what the renew margin
   asks (see the steady window below). */
#if defined(__SANITIZE_ADDRESS__)
#define SCALE_MUTEXES 2500
#else
#define SCALE_MUTEXES 5000
#endif
#define SCALE_STEPS 100 /* simba_loop_desc.poll_max_steps of its loop */
static simba_backend *g_scale_be;
static uint64_t g_most_checked; /* requests a session check answered in one poll, at most */
static uint64_t g_most_answers; /* answers of the client library handled in one poll, at most */
/* What delayed the loop while it was driven: the longest time its polls came later than
   they asked (the process not scheduled, or a slow poll), and the longest stretch in which
   every poll left work for the next one (more due than one poll's steps: the loop is
   behind). A renewal is late only when these and the server's delay add up to its margin. */
static double g_late_max, g_behind_max;
static int scale_drive(simba_loop *loop, int64_t max_ms, int (*done)(void)) {
    double t0 = now_ms(), due = t0, behind_since = -1;
    while (!(done && done()) && now_ms() - t0 < (double)max_ms) {
        int64_t w;
        int n;
        double t;
        struct pollfd fds[8];
        simba_zk_stats a, b;
        simba_zk_stats_get(g_scale_be, &a);
        t = now_ms();
        if (t - due > g_late_max) g_late_max = t - due;
        g_in_poll = 1;
        w = simba_poll(loop);
        g_in_poll = 0;
        if (w < 0) return (int)w;
        t = now_ms();
        if (w == 0) {
            if (behind_since < 0) behind_since = t;
            if (t - behind_since > g_behind_max) g_behind_max = t - behind_since;
        } else {
            behind_since = -1;
        }
        simba_zk_stats_get(g_scale_be, &b);
        if (b.checked - a.checked > g_most_checked) g_most_checked = b.checked - a.checked;
        if (b.answers - a.answers > g_most_answers) g_most_answers = b.answers - a.answers;
        n = simba_fds(loop, fds, 8);
        if (n > 8) n = 8;
        if (w > 20) w = 20;
        due = t + (double)w;
        if (w > 0 && poll(fds, (nfds_t)(n > 0 ? n : 0), (int)w) > 0) due = now_ms(); /* woken: due now */
    }
    return 0;
}

/* The server's delay, seen from a session of its own: a thread times a sync (which goes
   through the leader, as a renewal's session check does) every 50 ms; the longest one. */
static volatile int g_probe_stop;
static double g_server_max;
static pthread_mutex_t g_probe_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_probe_cv = PTHREAD_COND_INITIALIZER;
static int g_probe_done;
static void probe_synced(int rc, const char *value, const void *data) {
    (void)rc;
    (void)value;
    (void)data;
    pthread_mutex_lock(&g_probe_mu);
    g_probe_done = 1;
    pthread_cond_signal(&g_probe_cv);
    pthread_mutex_unlock(&g_probe_mu);
}
static void *probe_main(void *arg) {
    zhandle_t *zh = (zhandle_t *)arg;
    while (!g_probe_stop) {
        double t0 = now_ms();
        pthread_mutex_lock(&g_probe_mu);
        g_probe_done = 0;
        pthread_mutex_unlock(&g_probe_mu);
        if (zoo_async(zh, "/", probe_synced, NULL) == ZOK) {
            pthread_mutex_lock(&g_probe_mu);
            while (!g_probe_done && !g_probe_stop) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 100 * 1000000L;
                if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
                pthread_cond_timedwait(&g_probe_cv, &g_probe_mu, &ts);
                if (now_ms() - t0 > g_server_max) g_server_max = now_ms() - t0;
            }
            pthread_mutex_unlock(&g_probe_mu);
        }
        if (now_ms() - t0 > g_server_max) g_server_max = now_ms() - t0;
        usleep(50000);
    }
    return NULL;
}
static rec g_sr[2][SCALE_MUTEXES];
static simba_service *g_ss[2][SCALE_MUTEXES];
static int scale_owned(int who) { /* every mutex owned; who = -1 any, else by that side */
    int i;
    for (i = 0; i < SCALE_MUTEXES; i++) {
        int a = simba_is_owner(g_ss[0][i]), b = simba_is_owner(g_ss[1][i]);
        if (who < 0 ? !(a || b) : !(who ? b : a)) return 0;
    }
    return 1;
}
static int scale_all_owned(void) { return scale_owned(-1); }

/* The test's 5,000 persistent mutex nodes go afterwards (a server kept across runs would
   pile them up): asynchronous deletes on a handle of its own, awaited for 30 s at most. */
static pthread_mutex_t g_del_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_del_done;
static void scale_deleted(int rc, const void *data) {
    (void)rc;
    (void)data;
    pthread_mutex_lock(&g_del_mu);
    g_del_done++;
    pthread_mutex_unlock(&g_del_mu);
}
static int scale_cleanup(const char *base) {
    zhandle_t *zh = zookeeper_init(g_hosts, NULL, 10000, NULL, NULL, 0);
    double t0 = now_ms();
    int i, sent = 0, done = 0;
    if (!zh) return -1;
    while (zoo_state(zh) != ZOO_CONNECTED_STATE && now_ms() - t0 < 10000) usleep(5000);
    g_del_done = 0;
    for (i = 0; i < SCALE_MUTEXES; i++) {
        char path[128];
        snprintf(path, sizeof path, "/simba-scale/%s-%d", base, i);
        if (zoo_adelete(zh, path, -1, scale_deleted, NULL) == ZOK) sent++;
    }
    while (now_ms() - t0 < 30000) {
        pthread_mutex_lock(&g_del_mu);
        done = g_del_done;
        pthread_mutex_unlock(&g_del_mu);
        if (done >= sent) break;
        usleep(5000);
    }
    zookeeper_close(zh);
    return done >= sent && sent == SCALE_MUTEXES ? 0 : -1;
}

TEST(ten_thousand_services) {
    simba_loop *loop;
    simba_backend *be;
    simba_loop_desc ld;
    simba_zk_desc zd;
    simba_zk_stats s0, s1;
    char base[48];
    int i, side, both = 0, released0 = 0, released1 = 0, overloaded;
    double t0, t_steady;
    zhandle_t *probe_zh;
    pthread_t probe;
    check_cost cost0, cost1;
    int64_t margin;
    memset(&ld, 0, sizeof ld);
    ld.log = log_hook;
    ld.log_level = SIMBA_LOG_WARN;
    /* A poll's work is bounded: a session check that answers hundreds of renewals does so
       over as many polls as that takes (a poll answers at most its steps' worth). */
    ld.poll_max_steps = SCALE_STEPS;
    REQUIRE(simba_loop_new(&ld, &loop) == SIMBA_OK);
    memset(&zd, 0, sizeof zd);
    zd.hosts = g_hosts;
    zd.session_timeout_ms = 10000; /* renewals every ~3.3 s, as in make bench W4 */
    zd.root = "/simba-scale";
    REQUIRE(simba_zk_open(loop, &zd, &be) == SIMBA_OK);
    g_scale_be = be;
    mname(base, sizeof base, "scale");
    memset(g_sr, 0, sizeof g_sr);
    for (i = 0; i < SCALE_MUTEXES; i++)
        for (side = 0; side < 2; side++) {
            simba_contend_desc d;
            char m[80];
            snprintf(m, sizeof m, "%s-%d", base, i);
            memset(&d, 0, sizeof d);
            d.mutex = m;
            d.contender_id = side ? "b" : "a";
            d.ttl_ms = 10000;
            d.transition_ms = 6000;
            d.on_acquired = on_acq;
            d.on_released = on_rel;
            d.user_data = &g_sr[side][i];
            REQUIRE(simba_contend(loop, be, &d, &g_ss[side][i]) == SIMBA_OK);
            REQUIRE(simba_start(g_ss[side][i]) == SIMBA_OK);
        }
    t0 = now_ms();
    g_most_answers = 0;
    g_late_max = g_behind_max = 0;
    cost0 = check_cost_now();
    CHECK_RC(scale_drive(loop, 120000, scale_all_owned), SIMBA_OK);
    /* A loop that was behind for seconds at a time had less CPU than the start needs: it
       gets longer (and says so); one that kept up has no excuse. */
    if (!scale_all_owned() && g_behind_max + g_late_max >= 1000) {
        fprintf(stderr, "  not all owned after 120 s, the loop behind for up to %.0f ms at a time: a loaded machine, going on\n",
                g_behind_max);
        CHECK_RC(scale_drive(loop, 480000, scale_all_owned), SIMBA_OK);
    }
    cost1 = check_cost_now();
    if (!scale_all_owned()) { /* say why */
        int owned = 0, by[SIMBA_REASON_SLOTS] = {0}, k;
        simba_stats ls;
        simba_zk_stats zs;
        for (i = 0; i < SCALE_MUTEXES; i++) {
            owned += simba_is_owner(g_ss[0][i]) || simba_is_owner(g_ss[1][i]);
            for (side = 0; side < 2; side++)
                if (g_sr[side][i].released && (int)g_sr[side][i].reason < SIMBA_REASON_SLOTS) by[g_sr[side][i].reason]++;
        }
        memset(&ls, 0, sizeof ls);
        ls.size = sizeof ls;
        simba_loop_stats(loop, &ls);
        simba_zk_stats_get(be, &zs);
        fprintf(stderr, "  after %.0f s: %d of %d mutexes owned; polls up to %.0f ms late, behind for up to %.0f ms; %llu acquisitions, "
                        "%llu renewals failed, %llu errors (last: %s); %llu requests, %llu ZooKeeper calls, %llu answers\n",
                (now_ms() - t0) / 1000, owned, SCALE_MUTEXES, g_late_max, g_behind_max, (unsigned long long)ls.acquisitions,
                (unsigned long long)ls.renewals_failed, (unsigned long long)ls.errors, ls.last_error_msg,
                (unsigned long long)zs.requests, (unsigned long long)zs.zk_calls, (unsigned long long)zs.answers);
        for (k = 0; k < SIMBA_REASON_SLOTS; k++)
            if (by[k]) fprintf(stderr, "  released so far: %d with reason %s\n", by[k], simba_reason_str(k));
    }
    REQUIRE(scale_all_owned());
    fprintf(stderr, "  %d services: every mutex owned after %.1f s (%.1f s of CPU); at most %llu answers handled in one poll\n",
            2 * SCALE_MUTEXES, (now_ms() - t0) / 1000, (double)(cost1.cpu_us - cost0.cpu_us) / 1e6, (unsigned long long)g_most_answers);
    /* 10,000 creates and listings come back in bursts: a poll handles its steps' worth (the
       budget counts each answer as a step) */
    CHECK(g_most_answers <= SCALE_STEPS);
    /* steady: two renewal periods, no ownership changes, many requests per call */
    REQUIRE(simba_zk_stats_get(be, &s0) == SIMBA_OK);
    for (i = 0; i < SCALE_MUTEXES; i++) released0 += g_sr[0][i].released + g_sr[1][i].released;
    g_most_checked = 0;
    probe_zh = zookeeper_init(g_hosts, NULL, 10000, NULL, NULL, 0);
    REQUIRE(probe_zh != NULL);
    g_probe_stop = 0;
    g_server_max = g_late_max = g_behind_max = 0;
    REQUIRE(pthread_create(&probe, NULL, probe_main, probe_zh) == 0);
    cost0 = check_cost_now();
    t_steady = now_ms();
    CHECK_RC(scale_drive(loop, 8000, NULL), SIMBA_OK);
    cost1 = check_cost_now();
    g_probe_stop = 1;
    pthread_join(probe, NULL);
    zookeeper_close(probe_zh);
    REQUIRE(simba_zk_stats_get(be, &s1) == SIMBA_OK);
    /* An owner renews its renew margin before its lease ends locally: min(ttl/3, T/4) */
    margin = s1.session_timeout_ms / 4 < 10000 / 3 ? s1.session_timeout_ms / 4 : 10000 / 3;
    fprintf(stderr, "  steady window: the loop used %.0f%% of a core; polls came up to %.0f ms late, behind for up to %.0f ms;"
                    " the server's sync took up to %.0f ms (renew margin %lld ms)\n",
            (double)(cost1.cpu_us - cost0.cpu_us) / 80000.0, g_late_max, g_behind_max, g_server_max, (long long)margin);
    fprintf(stderr, "  at most %llu requests answered by a session check in one poll (%d steps each)\n",
            (unsigned long long)g_most_checked, SCALE_STEPS);
    CHECK(g_most_checked <= SCALE_STEPS);
    for (i = 0; i < SCALE_MUTEXES; i++) {
        released1 += g_sr[0][i].released + g_sr[1][i].released;
        if (simba_is_owner(g_ss[0][i]) && simba_is_owner(g_ss[1][i])) both++;
    }
    /* Lost renewals are a defect unless the delays measured account for one: a renewal sent
       late (the loop behind or not scheduled), answered late (the server), handled late
       (the loop behind again) by its margin in all. That is the bound of a loaded machine,
       not of simba: the README says how much CPU 10,000 services need. */
    overloaded = g_late_max + 2 * g_behind_max + g_server_max >= (double)margin;
    if (!overloaded) CHECK_EQ(released1, released0);
    if (released1 != released0) { /* say why: by reason, when, and what the loop saw */
        fprintf(stderr, "  %d renewals lost in the steady window: %s\n", released1 - released0,
                overloaded ? "the machine's delays reached the renew margin (the documented bound, not a defect)"
                           : "with every delay inside the renew margin: a defect");
        int by[SIMBA_REASON_SLOTS] = {0}, k;
        double first = 0, last = 0;
        simba_stats ls;
        for (i = 0; i < SCALE_MUTEXES; i++)
            for (side = 0; side < 2; side++)
                if (g_sr[side][i].released && g_sr[side][i].t_released >= t_steady) {
                    double t = g_sr[side][i].t_released - t_steady;
                    if ((int)g_sr[side][i].reason < SIMBA_REASON_SLOTS) by[g_sr[side][i].reason]++;
                    if (!first || t < first) first = t;
                    if (t > last) last = t;
                }
        for (k = 0; k < SIMBA_REASON_SLOTS; k++)
            if (by[k]) fprintf(stderr, "  released in the steady window: %d with reason %d\n", by[k], k);
        memset(&ls, 0, sizeof ls);
        ls.size = sizeof ls;
        if (simba_loop_stats(loop, &ls) == SIMBA_OK)
            fprintf(stderr, "  between %.0f and %.0f ms into it; loop: %llu renewals failed, %llu errors, last: %s\n", first, last,
                    (unsigned long long)ls.renewals_failed, (unsigned long long)ls.errors, ls.last_error_msg);
        fprintf(stderr, "  backend in the window: %llu lost/disconnected, %llu reset, %llu released, %llu owner events, %llu sessions\n",
                (unsigned long long)(s1.lost_events - s0.lost_events), (unsigned long long)(s1.reset_events - s0.reset_events),
                (unsigned long long)(s1.released_events - s0.released_events),
                (unsigned long long)(s1.owner_events - s0.owner_events), (unsigned long long)(s1.sessions - s0.sessions));
    }
    CHECK_EQ(both, 0);
    if (!overloaded) CHECK(scale_all_owned()); /* (an owner that lapsed takes it back later) */
    fprintf(stderr, "  steady 8 s: %llu requests, %llu answered by %llu session checks, %llu ZooKeeper calls\n",
            (unsigned long long)(s1.requests - s0.requests), (unsigned long long)(s1.checked - s0.checked),
            (unsigned long long)(s1.session_checks - s0.session_checks), (unsigned long long)(s1.zk_calls - s0.zk_calls));
    CHECK(s1.requests - s0.requests >= SCALE_MUTEXES); /* every owner renewed */
    CHECK((s1.zk_calls - s0.zk_calls) * 10 <= s1.requests - s0.requests);
    CHECK(s1.checked - s0.checked >= (s1.requests - s0.requests) * 9 / 10);
    /* hand-over: stop every owner (mostly side a, which asked first) */
    side = simba_is_owner(g_ss[0][0]) ? 0 : 1;
    for (i = 0; i < SCALE_MUTEXES; i++)
        if (simba_is_owner(g_ss[side][i])) CHECK_RC(simba_stop(g_ss[side][i]), SIMBA_OK);
    for (i = 0; i < SCALE_MUTEXES; i++) /* a mutex whose owner is on the other side: stop that one */
        if (simba_is_owner(g_ss[!side][i])) CHECK_RC(simba_stop(g_ss[!side][i]), SIMBA_OK);
    t0 = now_ms();
    g_late_max = g_behind_max = 0;
    {
        int left = 0, stale = 0;
        double tt = now_ms(), limit = 60000;
        for (;;) {
            if (now_ms() - tt >= limit) { /* a loop that was behind for seconds gets longer, as at the start */
                if (limit >= 300000 || g_behind_max + g_late_max < 1000) break;
                fprintf(stderr, "  hand-over not done after 60 s, the loop behind for up to %.0f ms at a time: going on\n", g_behind_max);
                limit = 300000;
            }
            CHECK_RC(scale_drive(loop, 50, NULL), SIMBA_OK);
            left = 0;
            for (i = 0; i < SCALE_MUTEXES; i++) {
                int a = simba_is_owner(g_ss[0][i]), b = simba_is_owner(g_ss[1][i]);
                if (a && b) both++;
                if (!a && !b) left++;
            }
            if (!left) break;
        }
        CHECK_EQ(left, 0);
        CHECK_EQ(both, 0);
        for (i = 0; i < SCALE_MUTEXES; i++) { /* the new owner's fence is above every old one of its mutex */
            int o = simba_is_owner(g_ss[0][i]) ? 0 : 1;
            uint64_t old = g_sr[!o][i].fence;
            if (g_sr[o][i].acquired < 1 || g_sr[o][i].fence <= old) stale++;
        }
        CHECK_EQ(stale, 0);
    }
    fprintf(stderr, "  hand-over of %d mutexes to their waiters: %.1f s\n", SCALE_MUTEXES, (now_ms() - t0) / 1000);
    simba_loop_free(loop);
    CHECK_EQ(scale_cleanup(base), 0);
}

TEST(kill9_owner) {
    proc *b = proc_open();
    char m[64];
    rec rb;
    simba_service *sb;
    int fds[2];
    pid_t pid;
    char line[64];
    ssize_t n;
    size_t got = 0;
    double t0, t_kill;
    memset(&rb, 0, sizeof rb);
    REQUIRE(b != NULL);
    REQUIRE(pipe(fds) == 0);
    mname(m, sizeof m, "kill9");
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(g_self, g_self, "--child", m, "child-K", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    /* wait for the child's OWNER line, keeping our loop alive */
    t0 = now_ms();
    memset(line, 0, sizeof line);
    while (now_ms() - t0 < 15000 && !strstr(line, "OWNER")) {
        struct pollfd pf = {fds[0], POLLIN, 0};
        if (poll(&pf, 1, 10) > 0) {
            n = read(fds[0], line + got, sizeof line - 1 - got);
            if (n <= 0) break;
            got += (size_t)n;
        }
    }
    CHECK(strstr(line, "OWNER") != NULL);
    if (strstr(line, "OWNER")) {
        sb = contend(b, m, "B", &rb);
        REQUIRE(sb != NULL);
        WAIT_FOR(strcmp(rb.owner, "child-K") == 0, 5000);
        CHECK_STR(rb.owner, "child-K");
        {
            double t = now_ms();
            WAIT_FOR(now_ms() - t > 500, 600); /* B settled in line */
        }
        kill(pid, SIGKILL);
        t_kill = now_ms();
        WAIT_FOR(rb.acquired == 1, 10000);
        CHECK_EQ(rb.acquired, 1);
        fprintf(stderr, "  kill -9 of the owner -> B owns: %.0f ms (session timeout %d ms)\n", rb.t_acquired - t_kill,
                SESSION_MS);
        /* the server expires the session T after it last heard from the child (its last
           ping, up to T/3 before the kill), rounded up to its tick */
        CHECK(rb.t_acquired - t_kill >= SESSION_MS * 2 / 3 - 100);
        CHECK(rb.t_acquired - t_kill < SESSION_MS + 2000);
    } else {
        kill(pid, SIGKILL);
    }
    close(fds[0]);
    waitpid(pid, NULL, 0);
    proc_close(b);
}

TEST(auth_creator_only) {
    proc *p;
    simba_loop_desc ld;
    simba_zk_desc zd;
    char m[64];
    rec r;
    simba_service *s;
    int i;
    memset(&r, 0, sizeof r);
    for (i = 0; i < MAXP && g_procs[i].used; i++) {
    }
    REQUIRE(i < MAXP);
    p = &g_procs[i];
    memset(&ld, 0, sizeof ld);
    ld.log = log_hook;
    REQUIRE(simba_loop_new(&ld, &p->loop) == SIMBA_OK);
    memset(&zd, 0, sizeof zd);
    zd.hosts = g_hosts;
    zd.session_timeout_ms = SESSION_MS;
    zd.root = "/simba-test-acl";
    zd.auth_scheme = "digest";
    zd.auth = "simba:secret";
    zd.acl_creator_only = 1;
    REQUIRE(simba_zk_open(p->loop, &zd, &p->be) == SIMBA_OK);
    REQUIRE(drv_attach(&g_drv, p->loop) == 0);
    p->used = 1;
    mname(m, sizeof m, "acl");
    s = contend(p, m, "A", &r);
    REQUIRE(s != NULL);
    WAIT_FOR(r.acquired == 1, 10000);
    CHECK_EQ(r.acquired, 1);
    CHECK(simba_fence(s) > 0);
    proc_close(p);
}

/* ---- the value stored with the ownership ---------------------------------------------- */

/* A raw session for looking at the nodes (test side only). */
static zhandle_t *raw_zk(void) {
    zhandle_t *zh = zookeeper_init(g_hosts, NULL, 10000, NULL, NULL, 0);
    double t0 = now_ms();
    while (zh && zoo_state(zh) != ZOO_CONNECTED_STATE && now_ms() - t0 < 10000) usleep(5000);
    if (zh && zoo_state(zh) != ZOO_CONNECTED_STATE) {
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

/* The root's data names the layout ("simba schema <N>"): a new root is made with this one,
   and a backend on a root of another refuses inspections and contenders in words that name
   both versions; the root keeps its data and gains no node. */
TEST(root_of_another_schema_version_refused) {
    zhandle_t *zh = raw_zk();
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_zk_desc zd;
    simba_contend_desc cd;
    simba_view v;
    struct String_vector sv;
    char root[64], data[64];
    int len = sizeof data - 1, i;
    simba_result rc = SIMBA_OK;
    REQUIRE(zh != NULL);
    /* the suite's own root, made by the backend: this layout's mark */
    CHECK_RC(zoo_get(zh, "/simba-test", 0, data, &len, NULL), ZOK);
    data[len > 0 ? len : 0] = 0;
    CHECK_STR(data, "simba schema 1");
    snprintf(root, sizeof root, "/simba-schema-%d", (int)getpid());
    CHECK_RC(zoo_create(zh, root, "simba schema 2", 14, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    REQUIRE(simba_loop_new(NULL, &loop) == SIMBA_OK); /* its ERROR log is the point here */
    memset(&zd, 0, sizeof zd);
    zd.hosts = g_hosts;
    zd.root = root;
    REQUIRE(simba_zk_open(loop, &zd, &be) == SIMBA_OK);
    for (i = 0; i < 100 && (rc = simba_inspect_wait(be, "sv", &v, 3000)) != SIMBA_EBACKEND; i++) simba_wait(loop, 50);
    CHECK_RC(rc, SIMBA_EBACKEND);
    fprintf(stderr, "  %s\n", simba_loop_errmsg(loop));
    CHECK(strstr(simba_loop_errmsg(loop), "found simba schema version 2") != NULL);
    CHECK(strstr(simba_loop_errmsg(loop), "this simba uses 1") != NULL);
    memset(&cd, 0, sizeof cd);
    cd.mutex = "sv";
    cd.contender_id = "A";
    REQUIRE(simba_contend(loop, be, &cd, &svc) == SIMBA_OK);
    CHECK_RC(simba_start(svc), SIMBA_OK);
    for (i = 0; i < 20; i++) simba_wait(loop, 50);
    CHECK(!simba_is_owner(svc));
    CHECK(strstr(simba_backend_errmsg(be), "found simba schema version 2") != NULL);
    len = sizeof data - 1;
    CHECK_RC(zoo_get(zh, root, 0, data, &len, NULL), ZOK);
    data[len > 0 ? len : 0] = 0;
    CHECK_STR(data, "simba schema 2");
    memset(&sv, 0, sizeof sv);
    CHECK_RC(zoo_get_children(zh, root, 0, &sv), ZOK);
    CHECK_EQ(sv.count, 0);
    deallocate_String_vector(&sv);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    CHECK_RC(zoo_delete(zh, root, -1), ZOK);
    zookeeper_close(zh);
}

/* The n- children of mutex m, sorted by sequence (node names into names[i]); their count. */
static int raw_nodes(zhandle_t *zh, const char *m, char names[][64], int cap) {
    char dir[160];
    struct String_vector sv;
    int i, j, n = 0;
    snprintf(dir, sizeof dir, "/simba-test/%s", m);
    memset(&sv, 0, sizeof sv);
    if (zoo_get_children(zh, dir, 0, &sv) != ZOK) return -1;
    for (i = 0; i < sv.count && n < cap; i++) snprintf(names[n++], 64, "%s", sv.data[i]);
    deallocate_String_vector(&sv);
    for (i = 0; i < n; i++) /* by the 10-digit sequence at the end */
        for (j = i + 1; j < n; j++)
            if (strcmp(names[j] + strlen(names[j]) - 10, names[i] + strlen(names[i]) - 10) < 0) {
                char t[64];
                memcpy(t, names[i], 64);
                memcpy(names[i], names[j], 64);
                memcpy(names[j], t, 64);
            }
    return n;
}

static int zk_owner_value_is(simba_service *s, const char *id, const void *v, size_t n, uint64_t fence) {
    static simba_owner o;
    return simba_owner_get(s, &o) == SIMBA_OK && strcmp(o.id, id) == 0 && o.value_len == n && memcmp(o.value, v, n) == 0 &&
           (fence == 0 || o.fence == fence);
}

/* The owner's value is its node's data tail; a new value rewrites the node but keeps the
   fence (the node says which), reaches an observer by its data watch, and the next owner's
   fence is still greater. */
TEST(value_keeps_fence_and_is_pushed) {
    static const char v1[] = "10.0.0.1:80\0\xff", v2[] = "moved\0\x80";
    proc *a = proc_open(), *o = proc_open(), *b = proc_open();
    char m[64], names[4][64], path[256], data[2048], keep[40];
    rec ra, ro, rb;
    simba_service *sa, *so, *sb;
    simba_contend_desc d;
    simba_view v;
    zhandle_t *zh = raw_zk();
    struct Stat st;
    int len;
    uint64_t f;
    double t0;
    memset(&ra, 0, sizeof ra);
    memset(&ro, 0, sizeof ro);
    memset(&rb, 0, sizeof rb);
    REQUIRE(a && o && b && zh);
    mname(m, sizeof m, "value");
    memset(&d, 0, sizeof d);
    d.mutex = m;
    d.contender_id = "A";
    d.ttl_ms = SESSION_MS;
    d.transition_ms = 1000;
    d.on_acquired = on_acq;
    d.on_released = on_rel;
    d.user_data = &ra;
    d.value = v1;
    d.value_len = sizeof v1 - 1;
    REQUIRE(simba_contend(a->loop, a->be, &d, &sa) == SIMBA_OK);
    REQUIRE(simba_start(sa) == SIMBA_OK);
    WAIT_FOR(ra.acquired == 1, 10000);
    REQUIRE(ra.acquired == 1);
    f = simba_fence(sa);
    so = observe(o, m, &ro);
    REQUIRE(so);
    WAIT_FOR(zk_owner_value_is(so, "A", v1, sizeof v1 - 1, f), 5000);
    CHECK(zk_owner_value_is(so, "A", v1, sizeof v1 - 1, f));
    REQUIRE(raw_nodes(zh, m, names, 4) == 1);
    snprintf(path, sizeof path, "/simba-test/%s/%s", m, names[0]);
    len = (int)sizeof data;
    CHECK_RC(zoo_get(zh, path, 0, data, &len, &st), ZOK);
    CHECK(len > (int)sizeof v1 && memcmp(data + len - (int)(sizeof v1 - 1), v1, sizeof v1 - 1) == 0);
    CHECK(memcmp(data + len - (int)(sizeof v1 - 1) - 3, " 0 ", 3) == 0); /* keep 0: the node's own write is the fence */
    t0 = now_ms();
    CHECK_RC(simba_set_value(sa, v2, sizeof v2 - 1), SIMBA_OK);
    WAIT_FOR(zk_owner_value_is(so, "A", v2, sizeof v2 - 1, f), 3000);
    CHECK(zk_owner_value_is(so, "A", v2, sizeof v2 - 1, f));
    fprintf(stderr, "  the observer saw the new value %.1f ms after simba_set_value\n", now_ms() - t0);
    CHECK(now_ms() - t0 < 1000); /* pushed: its refresh is 5 s */
    CHECK(simba_fence(sa) == f);
    len = (int)sizeof data;
    CHECK_RC(zoo_get(zh, path, 0, data, &len, &st), ZOK);
    CHECK((uint64_t)st.mzxid > f); /* the node was written, its fence kept by name: */
    snprintf(keep, sizeof keep, " %llu ", (unsigned long long)f);
    CHECK(len > (int)sizeof v2 && memcmp(data + len - (int)(sizeof v2 - 1) - strlen(keep), keep, strlen(keep)) == 0);
    memset(&v, 0, sizeof v);
    CHECK_RC(simba_inspect_wait(o->be, m, &v, 5000), SIMBA_OK);
    CHECK_STR(v.owner, "A");
    CHECK(v.fence == f);
    CHECK(v.value_len == sizeof v2 - 1 && v.value && memcmp(v.value, v2, v.value_len) == 0);
    /* a renewal keeps it */
    WAIT_FOR(0, 2 * SESSION_MS);
    CHECK(simba_is_owner(sa) && simba_fence(sa) == f);
    CHECK(zk_owner_value_is(sa, "A", v2, sizeof v2 - 1, f));
    sb = contend(b, m, "B", &rb);
    REQUIRE(sb);
    WAIT_FOR(strcmp(rb.owner, "A") == 0, 5000);
    CHECK(zk_owner_value_is(sb, "A", v2, sizeof v2 - 1, f));
    CHECK_RC(simba_stop(sa), SIMBA_OK);
    WAIT_FOR(rb.acquired == 1, 5000);
    CHECK(rb.acquired == 1);
    CHECK(rb.fence > f);
    WAIT_FOR(zk_owner_value_is(so, "B", "", 0, rb.fence), 3000);
    CHECK(zk_owner_value_is(so, "B", "", 0, rb.fence));
    proc_close(a);
    proc_close(o);
    proc_close(b);
    zookeeper_close(zh);
}

/* A yield that passes makes the yielder's node again behind the waiter's, in one
   transaction: its old node is gone, the new one is the last. */
TEST(yield_requeues_node_behind_waiter) {
    proc *a = proc_open(), *b = proc_open();
    char m[64], names[4][64];
    rec ra, rb;
    simba_service *sa, *sb;
    zhandle_t *zh = raw_zk();
    uint64_t f;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    REQUIRE(a && b && zh);
    mname(m, sizeof m, "yield");
    REQUIRE(owner_and_waiter(a, b, m, &ra, &rb, &sa, &sb));
    f = simba_fence(sa);
    REQUIRE(raw_nodes(zh, m, names, 4) == 2);
    CHECK(strstr(names[0], "-") != NULL);
    CHECK_RC(simba_yield(sa), SIMBA_OK);
    /* two processes: either may hear first (A its answer, B the push and its grant) */
    WAIT_FOR(rb.acquired == 1 && ra.released == 1, 3000);
    CHECK(rb.acquired == 1);
    CHECK(rb.fence > f);
    CHECK_EQ(ra.released, 1);
    CHECK_EQ(ra.reason, SIMBA_REASON_YIELDED);
    {
        char before_b[64];
        int n;
        snprintf(before_b, sizeof before_b, "%s", names[1]); /* B's node */
        n = raw_nodes(zh, m, names, 4);
        CHECK_EQ(n, 2);
        CHECK_STR(names[0], before_b); /* B's node leads, A's is made again behind it */
        CHECK(n == 2 && strcmp(names[1] + strlen(names[1]) - 10, before_b + strlen(before_b) - 10) > 0);
    }
    CHECK(!simba_is_owner(sa));
    CHECK_EQ(simba_service_status(sa), SIMBA_RUNNING);
    proc_close(a);
    proc_close(b);
    zookeeper_close(zh);
}

/* A yield that passes watches the node now just before the yielder's, as a waiter does: a
   release of the new owner is pushed to the yielder, which takes the mutex back at once and
   not when its own next try (min_retry_ms, long here) comes. */
TEST(yield_watches_the_new_owner) {
    proc *a = proc_open(), *b = proc_open();
    char m[64];
    rec ra, rb;
    simba_contend_desc d;
    simba_service *sa = NULL, *sb;
    double t0;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    REQUIRE(a && b);
    mname(m, sizeof m, "yield-watch");
    memset(&d, 0, sizeof d);
    d.mutex = m;
    d.contender_id = "A";
    d.ttl_ms = SESSION_MS;
    d.transition_ms = 1000;
    d.min_retry_ms = 4000;
    d.on_acquired = on_acq;
    d.on_released = on_rel;
    d.on_owner = on_own;
    d.user_data = &ra;
    REQUIRE(simba_contend(a->loop, a->be, &d, &sa) == SIMBA_OK && simba_start(sa) == SIMBA_OK);
    WAIT_FOR(ra.acquired == 1, 10000);
    REQUIRE(ra.acquired == 1);
    sb = contend(b, m, "B", &rb);
    REQUIRE(sb);
    WAIT_FOR(strcmp(rb.owner, "A") == 0, 5000);
    CHECK_RC(simba_yield(sa), SIMBA_OK);
    WAIT_FOR(rb.acquired == 1 && ra.released == 1, 3000);
    REQUIRE(rb.acquired == 1 && ra.released == 1);
    t0 = now_ms();
    CHECK_RC(simba_yield(sb), SIMBA_OK);
    WAIT_FOR(ra.acquired == 2, 3000);
    CHECK_EQ(ra.acquired, 2);
    CHECK(now_ms() - t0 < 1500); /* pushed, not A's next try 4 s after its yield */
    proc_close(a);
    proc_close(b);
}

/* The waiter the listing named is gone when the transaction runs: the transaction changes
   nothing (our node stays, the owner is still the owner), the yield lists again and passes
   to the waiter that is there. Had the failed transaction deleted our node, the second one
   would find it gone and the yield would fail instead of passing. */
TEST(yield_lists_again_when_the_waiter_left) {
    proc *a = proc_open(), *b = proc_open();
    char m[64];
    rec ra, rb;
    simba_service *sa, *sb;
    uint64_t f, calls;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    REQUIRE(a && b);
    mname(m, sizeof m, "yield-stale");
    REQUIRE(owner_and_waiter(a, b, m, &ra, &rb, &sa, &sb));
    f = simba_fence(sa);
    calls = stats(a).zk_calls;
    simba_zk_test_stale_waiter = 1;
    CHECK_RC(simba_yield(sa), SIMBA_OK);
    WAIT_FOR(rb.acquired == 1 && ra.released == 1, 3000);
    CHECK_EQ(simba_zk_test_stale_waiter, 0);
    CHECK(rb.acquired == 1 && rb.fence > f);
    CHECK_EQ(ra.released, 1);
    CHECK_EQ(ra.reason, SIMBA_REASON_YIELDED);
    CHECK(stats(a).zk_calls >= calls + 4); /* list, refused transaction, list, transaction */
    simba_zk_test_stale_waiter = 0;
    proc_close(a);
    proc_close(b);
}

/* ---- semaphores and read-write locks (simba_zk.h SEMAPHORES AND READERS) ---------------- */

static simba_service *contend_mode(proc *p, const char *mutex, const char *id, rec *r, int permits, int shared) {
    simba_contend_desc d;
    simba_service *s = NULL;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    d.contender_id = id;
    d.ttl_ms = SESSION_MS;
    d.transition_ms = 1000;
    d.on_acquired = on_acq;
    d.on_released = on_rel;
    d.on_owner = on_own;
    d.user_data = r;
    d.permits = permits;
    d.shared = shared;
    if (simba_contend(p->loop, p->be, &d, &s) != SIMBA_OK) return NULL;
    if (simba_start(s) != SIMBA_OK) return NULL;
    return s;
}

/* The fence a holder's node gives: its last write's zxid (its creation's, unwritten since). */
static uint64_t raw_mzxid(zhandle_t *zh, const char *m, const char *node) {
    char path[256];
    struct Stat st;
    snprintf(path, sizeof path, "/simba-test/%s/%s", m, node);
    return zoo_exists(zh, path, 0, &st) == ZOK ? (uint64_t)st.mzxid : 0;
}

/* A semaphore's nodes say its N ("s2-"); holders are the first N in sequence order, each
   fenced by its own node; every grant's fence is above every earlier one's, also the grant
   a yield passes on (the yielder's node made again at the back); the store lists each holder
   and clears one by its fence. */
TEST(semaphore_nodes_and_fences) {
    proc *p[4];
    rec r[4];
    simba_service *s[4];
    char m[64], names[6][64];
    zhandle_t *zh = raw_zk();
    simba_view v;
    int i;
    memset(r, 0, sizeof r);
    REQUIRE(zh);
    mname(m, sizeof m, "sem");
    for (i = 0; i < 4; i++) REQUIRE((p[i] = proc_open()) != NULL);
    for (i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "S%d", i);
        REQUIRE((s[i] = contend_mode(p[i], m, id, &r[i], 2, 0)) != NULL);
        WAIT_FOR(r[i].acquired == 1 || (i == 2 && r[i].owner[0]), 5000);
    }
    CHECK(r[0].acquired == 1 && r[1].acquired == 1 && r[2].acquired == 0);
    REQUIRE(raw_nodes(zh, m, names, 6) == 3);
    for (i = 0; i < 3; i++) CHECK(strncmp(names[i], "s2-", 3) == 0);
    CHECK(r[0].fence == raw_mzxid(zh, m, names[0]) && r[1].fence == raw_mzxid(zh, m, names[1]));
    CHECK(r[1].fence > r[0].fence);
    memset(&v, 0, sizeof v);
    CHECK_RC(simba_inspect_wait(p[3]->be, m, &v, 5000), SIMBA_OK);
    CHECK_EQ(v.holders, 2);
    CHECK_EQ(v.permits, 2);
    CHECK_EQ(v.waiters, 1);
    CHECK(v.holders == 2 && v.holder[0].fence == r[0].fence && v.holder[1].fence == r[1].fence);
    CHECK(v.holders == 2 && strcmp(v.holder[1].id, "S1") == 0 && strcmp(v.waiter[0], "S2") == 0);
    /* a release frees one permit: the waiter is pushed and granted above both */
    CHECK_RC(simba_stop(s[0]), SIMBA_OK);
    WAIT_FOR(r[2].acquired == 1, 3000);
    CHECK(r[2].acquired == 1 && r[2].fence > r[1].fence);
    /* a yield of a permit holder with a waiter: its node goes to the back, the waiter holds */
    REQUIRE((s[3] = contend_mode(p[3], m, "S3", &r[3], 2, 0)) != NULL);
    WAIT_FOR(r[3].owner[0] != 0, 5000);
    CHECK_RC(simba_yield(s[1]), SIMBA_OK);
    WAIT_FOR(r[3].acquired == 1 && r[1].released == 1, 3000);
    CHECK(r[3].acquired == 1 && r[3].fence > r[2].fence);
    CHECK_EQ(r[1].reason, SIMBA_REASON_YIELDED);
    REQUIRE(raw_nodes(zh, m, names, 6) == 3);
    CHECK(strstr(names[2], "s2-") == names[2] && !simba_is_owner(s[1]));
    /* an operator clears one holder by its fence: its permit goes to the yielder */
    CHECK_RC(simba_force_release_wait(p[0]->be, m, r[2].fence, 5000), SIMBA_OK);
    WAIT_FOR(r[1].acquired == 2 && r[2].released == 1, 5000);
    CHECK(r[1].acquired == 2 && r[1].fence > r[3].fence);
    CHECK_RC(simba_force_release_wait(p[0]->be, m, r[2].fence, 5000), SIMBA_EFENCE);
    for (i = 0; i < 4; i++) proc_close(p[i]);
    zookeeper_close(zh);
}

/* Readers' nodes are "r-", a writer's "n-" (a mutex's): readers at the head hold together,
   a waiting writer holds back a reader that comes after it, and each grant's fence is above
   the ones before. */
TEST(readers_and_writer_nodes_and_fences) {
    proc *p[4];
    rec r[4];
    simba_service *s[4];
    char m[64], names[6][64];
    zhandle_t *zh = raw_zk();
    simba_view v;
    int i;
    memset(r, 0, sizeof r);
    REQUIRE(zh);
    mname(m, sizeof m, "rw");
    for (i = 0; i < 4; i++) REQUIRE((p[i] = proc_open()) != NULL);
    REQUIRE((s[0] = contend_mode(p[0], m, "R0", &r[0], 0, 1)) != NULL);
    REQUIRE((s[1] = contend_mode(p[1], m, "R1", &r[1], 0, 1)) != NULL);
    WAIT_FOR(r[0].acquired == 1 && r[1].acquired == 1, 5000);
    REQUIRE(r[0].acquired == 1 && r[1].acquired == 1);
    REQUIRE((s[2] = contend_mode(p[2], m, "W", &r[2], 0, 0)) != NULL);
    WAIT_FOR(r[2].owner[0] != 0, 5000);
    REQUIRE((s[3] = contend_mode(p[3], m, "R3", &r[3], 0, 1)) != NULL);
    WAIT_FOR(r[3].owner[0] != 0, 5000);
    WAIT_FOR(r[2].acquired || r[3].acquired, 300);
    CHECK(r[2].acquired == 0 && r[3].acquired == 0);
    REQUIRE(raw_nodes(zh, m, names, 6) == 4);
    CHECK(names[0][0] == 'r' && names[1][0] == 'r' && strncmp(names[2], "n-", 2) == 0 && names[3][0] == 'r');
    memset(&v, 0, sizeof v);
    CHECK_RC(simba_inspect_wait(p[0]->be, m, &v, 5000), SIMBA_OK);
    CHECK(v.holders == 2 && v.holder[0].shared == 1 && v.holder[1].shared == 1 && v.permits == 1 && v.waiters == 2);
    CHECK_RC(simba_stop(s[0]), SIMBA_OK);
    WAIT_FOR(r[2].acquired, 300);
    CHECK_EQ(r[2].acquired, 0); /* a reader still holds */
    CHECK_RC(simba_stop(s[1]), SIMBA_OK);
    WAIT_FOR(r[2].acquired == 1, 3000);
    CHECK(r[2].acquired == 1 && r[2].fence > r[0].fence && r[2].fence > r[1].fence);
    CHECK_EQ(r[3].acquired, 0);
    CHECK_RC(simba_stop(s[2]), SIMBA_OK);
    WAIT_FOR(r[3].acquired == 1, 3000);
    CHECK(r[3].acquired == 1 && r[3].fence > r[2].fence);
    for (i = 0; i < 4; i++) proc_close(p[i]);
    zookeeper_close(zh);
}

/* Another N than the nodes ahead have is refused in words naming both; the refused node goes,
   nothing is granted, the holder keeps its permit. A mutex asks N = 1. */
TEST(permits_mismatch_refused_in_words) {
    proc *a = proc_open(), *b = proc_open();
    char m[64], names[4][64];
    rec ra, rb;
    simba_service *sa, *sb;
    zhandle_t *zh = raw_zk();
    int k;
    memset(&ra, 0, sizeof ra);
    REQUIRE(a && b && zh);
    mname(m, sizeof m, "sem-mismatch");
    REQUIRE((sa = contend_mode(a, m, "A", &ra, 2, 0)) != NULL);
    WAIT_FOR(ra.acquired == 1, 5000);
    REQUIRE(ra.acquired == 1);
    for (k = 0; k < 2; k++) {
        simba_stats st;
        memset(&rb, 0, sizeof rb);
        REQUIRE((sb = contend_mode(b, m, "B", &rb, k ? 0 : 3, 0)) != NULL);
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        WAIT_FOR(simba_service_stats(sb, &st) == SIMBA_OK && st.last_error == SIMBA_ECONFLICT, 5000);
        CHECK_EQ(st.last_error, SIMBA_ECONFLICT);
        CHECK(strstr(st.last_error_msg, k ? "permits 1 asked, the name has 2 while held" : "permits 3 asked, the name has 2 while held") != NULL);
        if (!strstr(st.last_error_msg, "asked")) fprintf(stderr, "  errmsg: %s\n", st.last_error_msg);
        WAIT_FOR(raw_nodes(zh, m, names, 4) > 1 || rb.acquired, 500);
        CHECK_EQ(raw_nodes(zh, m, names, 4), 1); /* the refused node is gone, and asking again makes none */
        CHECK(rb.acquired == 0 && simba_is_owner(sa));
        CHECK_RC(simba_stop(sb), SIMBA_OK);
        WAIT_FOR(simba_service_status(sb) == SIMBA_INITIAL, 5000);
        simba_service_free(sb);
    }
    proc_close(a);
    proc_close(b);
    zookeeper_close(zh);
}

int main(int argc, char **argv) {
    const char *e;
    ssize_t n;
    if (argc == 4 && strcmp(argv[1], "--child") == 0) {
        quiet_zk_client();
        e = getenv("SIMBA_ZK_PORT");
        g_port = e && atoi(e) > 0 ? atoi(e) : 2191;
        snprintf(g_hosts, sizeof g_hosts, "127.0.0.1:%d", g_port);
        return child_main(argv[2], argv[3]);
    }
    CHECK_INIT(argc, argv);
    g_main = pthread_self();
    signal(SIGPIPE, SIG_IGN);
    quiet_zk_client();
    e = getenv("SIMBA_ZK_PORT");
    g_port = e && atoi(e) > 0 ? atoi(e) : 2191;
    snprintf(g_hosts, sizeof g_hosts, "127.0.0.1:%d", g_port);
    if ((e = getenv("SIMBA_ZK_DIR")) && e[0]) g_dir = e;
    if ((e = getenv("SIMBA_ZK_SCRIPTS")) && e[0]) g_scripts = e;
    n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0) snprintf(g_self, sizeof g_self, "%s", argv[0]);
    else g_self[n] = 0;
    if (!zk_serving(g_port)) {
        fprintf(stderr, "test_zk: no ZooKeeper answers on 127.0.0.1:%d (scripts/zk-start.sh %d %s)\n", g_port, g_port,
                g_dir);
        check__failed++;
        return check_report("zookeeper");
    }
    RUN(args);
    RUN(acquire_renew_release);
    RUN(connected_session_does_not_look_up_hosts_again);
    RUN(unreachable_server);
    RUN(observer_and_waiters_see_owner);
    RUN(foreign_long_named_owner_is_waited_out);
    RUN(fence_strictly_increases);
    RUN(reacquire_after_local_step_down_new_fence);
    RUN(waiters_woken_one_at_a_time);
    RUN(session_expiry);
    RUN(refused_cleanup_tried_again_later);
    RUN(kill9_owner);
    RUN(ten_thousand_services);
    RUN(auth_creator_only);
    RUN(free_while_owning);
    RUN(marshalling_error_keeps_call);
    RUN(foreign_server_garbage);
    RUN(foreign_server_silent);
    RUN(foreign_server_readonly);
    RUN(free_bounded_when_a_probe_starts_before_the_close);
    RUN(value_keeps_fence_and_is_pushed);
    RUN(yield_requeues_node_behind_waiter);
    RUN(yield_lists_again_when_the_waiter_left);
    RUN(semaphore_nodes_and_fences);
    RUN(readers_and_writer_nodes_and_fences);
    RUN(permits_mismatch_refused_in_words);
    RUN(yield_watches_the_new_owner);
    RUN(root_of_another_schema_version_refused);
    RUN(server_restart); /* last: it bounces the server */
    if (g_twice) {
        fprintf(stderr, "a request was completed twice (%d)\n", g_twice);
        check__failed++;
    }
    return check_report("zookeeper");
}
