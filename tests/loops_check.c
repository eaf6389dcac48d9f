/* loops_check.c -- one adapter (built with -DLOOPS_UV, -DLOOPS_EV or -DLOOPS_EVENT) driving
 * simba against a real redis-server. Usage: loops_check PORT REDIS_PID
 *   1. acquire;
 *   2. the server SIGSTOPped past the command timeout, then continued: the backend reconnects
 *      (often on the same fd numbers); ownership must survive (no release), every listed fd
 *      must be registered with the foreign loop, and CLIENT LIST must no longer show the
 *      old connections;
 *   3. a waiting process (fork) gets the handoff pushed, and simba_stop() called from a
 *      foreign timer callback releases within a few ms;
 *   4. a Locker's pending try becomes held while only the foreign loop runs: on_locked
 *      says so (nobody calls try again), within a few ms of the holder's unlock.
 * Prints its figures; exit 0 only when every check holds. */
/* Not on tests/fixture.h: a foreign event loop (libuv, libev, libevent) drives simba here, not a poll(2) driver. */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_redis.h"
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

typedef void (*task_fn)(void);

#if defined(LOOPS_UV)
#include "../adapters/simba_libuv.h"
#define ADAPTER "libuv"
static uv_loop_t fl;
static simba_uv *ad;
static uv_timer_t tick, once;
static task_fn once_fn;
static void fl_init(void) { uv_loop_init(&fl); uv_timer_init(&fl, &tick); uv_timer_init(&fl, &once); }
static void tick_cb(uv_timer_t *t) { (void)t; }
static void once_cb(uv_timer_t *t) { (void)t; once_fn(); }
static void fl_run_once(void) { uv_timer_start(&tick, tick_cb, 5, 0); uv_run(&fl, UV_RUN_ONCE); }
static void fl_after(int ms, task_fn fn) { once_fn = fn; uv_timer_start(&once, once_cb, (uint64_t)ms, 0); }
static int attach(simba_loop *l) { return simba_uv_attach(l, &fl, &ad); }
static void detach(void) {
    simba_uv_detach(ad);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_close((uv_handle_t *)&once, NULL);
    uv_run(&fl, UV_RUN_DEFAULT); /* the close callbacks */
    uv_loop_close(&fl);
}
static int registered(int fd, short ev) {
    struct simba_uv__io *io;
    (void)ev;
    for (io = ad->ios; io; io = io->next)
        if (io->fd == fd) return uv_is_active((uv_handle_t *)&io->h);
    return 0;
}
#elif defined(LOOPS_EV)
#include "../adapters/simba_libev.h"
#define ADAPTER "libev"
static struct ev_loop *fl;
static simba_ev *ad;
static ev_timer tick, once;
static task_fn once_fn;
static void tick_cb(struct ev_loop *l, ev_timer *t, int r) { (void)l; (void)t; (void)r; }
static void once_cb(struct ev_loop *l, ev_timer *t, int r) { (void)l; (void)t; (void)r; once_fn(); }
static void fl_init(void) { fl = ev_loop_new(EVFLAG_AUTO); ev_timer_init(&tick, tick_cb, 0.005, 0.); ev_timer_init(&once, once_cb, 0., 0.); }
static void fl_run_once(void) { ev_timer_stop(fl, &tick); ev_timer_set(&tick, 0.005, 0.); ev_timer_start(fl, &tick); ev_run(fl, EVRUN_ONCE); }
static void fl_after(int ms, task_fn fn) { once_fn = fn; ev_timer_stop(fl, &once); ev_timer_set(&once, ms / 1000.0, 0.); ev_timer_start(fl, &once); }
static int attach(simba_loop *l) { return simba_ev_attach(l, fl, &ad); }
static void detach(void) { simba_ev_detach(ad); ev_timer_stop(fl, &tick); ev_timer_stop(fl, &once); ev_loop_destroy(fl); }
static int registered(int fd, short ev) {
    struct simba_ev__io *io;
    for (io = ad->ios; io; io = io->next)
        if (io->w.fd == fd) return ev_is_active(&io->w) && ((ev & POLLIN) != 0) == ((io->w.events & EV_READ) != 0);
    return 0;
}
#elif defined(LOOPS_EVENT)
#include "../adapters/simba_libevent.h"
#define ADAPTER "libevent"
static struct event_base *fl;
static simba_event *ad;
static struct event *tick, *once;
static task_fn once_fn;
static void tick_cb(evutil_socket_t f, short w, void *a) { (void)f; (void)w; (void)a; }
static void once_cb(evutil_socket_t f, short w, void *a) { (void)f; (void)w; (void)a; once_fn(); }
static void fl_init(void) { fl = event_base_new(); tick = evtimer_new(fl, tick_cb, NULL); once = evtimer_new(fl, once_cb, NULL); }
static void fl_run_once(void) { struct timeval tv = {0, 5000}; evtimer_add(tick, &tv); event_base_loop(fl, EVLOOP_ONCE); }
static void fl_after(int ms, task_fn fn) { struct timeval tv; tv.tv_sec = ms / 1000; tv.tv_usec = (ms % 1000) * 1000; once_fn = fn; evtimer_add(once, &tv); }
static int attach(simba_loop *l) { return simba_event_attach(l, fl, &ad); }
static void detach(void) { simba_event_detach(ad); event_free(tick); event_free(once); event_base_free(fl); }
static int registered(int fd, short ev) {
    struct simba_event__io *io;
    for (io = ad->ios; io; io = io->next)
        if (io->fd == fd) return io->e && event_pending(io->e, (short)(((ev & POLLIN) ? EV_READ : 0) | ((ev & POLLOUT) ? EV_WRITE : 0)), NULL);
    return 0;
}
#elif defined(LOOPS_EPOLL)
#define LOOP_EPOLL_NO_MAIN
#include "../examples/loop_epoll.c"
#define ADAPTER "epoll"
static ep_driver ed;
#define DRIVER ed
static int64_t once_at = -1;
static task_fn once_fn;
static void fl_init(void) {}
static void fl_run_once(void) {
    int64_t now = mono_us(), max = 5;
    if (once_at >= 0 && (once_at - now) / 1000 < max) max = once_at > now ? (once_at - now) / 1000 : 0;
    if (ed.loop) ep_run_once(&ed, max); else { struct timespec ts = {0, 1000000}; nanosleep(&ts, NULL); }
    if (once_at >= 0 && mono_us() >= once_at) { once_at = -1; once_fn(); }
}
static void fl_after(int ms, task_fn fn) { once_fn = fn; once_at = mono_us() + (int64_t)ms * 1000; }
static int attach(simba_loop *l) { return ep_attach(&ed, l) == 0 ? SIMBA_OK : SIMBA_EINVAL; }
static void detach(void) { ep_detach(&ed); }
static int registered(int fd, short ev) {
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = ep_mask(ev);
    e.data.fd = fd;
    return epoll_ctl(ed.epfd, EPOLL_CTL_MOD, fd, &e) == 0; /* ENOENT: not in the set */
}
#elif defined(LOOPS_URING)
#define LOOP_IOURING_NO_MAIN
#include "../examples/loop_iouring.c"
#define ADAPTER "io_uring"
static ur_driver ud;
#define DRIVER ud
static int64_t once_at = -1;
static task_fn once_fn;
static void fl_init(void) {}
static void fl_run_once(void) {
    int64_t now = mono_us(), max = 5;
    if (once_at >= 0 && (once_at - now) / 1000 < max) max = once_at > now ? (once_at - now) / 1000 : 0;
    if (ud.loop) ur_run_once(&ud, max); else { struct timespec ts = {0, 1000000}; nanosleep(&ts, NULL); }
    if (once_at >= 0 && mono_us() >= once_at) { once_at = -1; once_fn(); }
}
static void fl_after(int ms, task_fn fn) { once_fn = fn; once_at = mono_us() + (int64_t)ms * 1000; }
static int attach(simba_loop *l) { return ur_attach(&ud, l) == 0 ? SIMBA_OK : SIMBA_EINVAL; }
static void detach(void) { ur_detach(&ud); }
static int registered(int fd, short ev) {
    int i;
    for (i = 0; i < ud.nw; i++)
        if (ud.w[i].fd == fd) return ud.w[i].events == ev && ud.w[i].armed;
    return 0;
}
#else
#error "build with -DLOOPS_UV, -DLOOPS_EV, -DLOOPS_EVENT, -DLOOPS_EPOLL or -DLOOPS_URING"
#endif

static simba_loop *loop;
static simba_service *svc;
static int owner, released, failures;
static int64_t stop_called_us, released_us, acquired_us;

static void on_acquired(simba_service *s, const simba_state *st, void *u) { (void)s; (void)st; (void)u; owner = 1; acquired_us = mono_us(); }
static void on_released(simba_service *s, const simba_state *st, void *u) { (void)s; (void)st; (void)u; owner = 0; released++; released_us = mono_us(); }

static void fail(const char *what) {
    printf("%s: FAIL %s\n", ADAPTER, what);
    failures++;
}

static void run_for(int ms) {
    int64_t end = mono_us() + (int64_t)ms * 1000;
    while (mono_us() < end) fl_run_once();
}
static int run_until(int *flag, int want, int ms) {
    int64_t end = mono_us() + (int64_t)ms * 1000;
    while (*flag != want && mono_us() < end) fl_run_once();
    return *flag == want;
}

static simba_backend *g_be;
static int setup(int port, const char *mutex, const char *id) {
    simba_backend *be;
    simba_redis_desc rd;
    simba_contend_desc cd;
    memset(&rd, 0, sizeof rd);
    rd.port = port;
    rd.connect_timeout_ms = 400;
    rd.command_timeout_ms = 400;
    memset(&cd, 0, sizeof cd);
    cd.mutex = mutex;
    cd.contender_id = id;
    /* A long lease: a waiter that missed the push would ask again only at its end (up to
       15 s after the owner's last renewal), so a handoff within 5 s can only be the push,
       however slow the machine (the check is behaviour, not speed). */
    cd.ttl_ms = 10000;
    cd.transition_ms = 5000;
    cd.renew_margin_ms = 9000; /* renew 1 s after each grant: the stopped server sees one */
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    fl_init();
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || simba_redis_open(loop, &rd, &be) != SIMBA_OK ||
        simba_contend(loop, be, &cd, &svc) != SIMBA_OK || attach(loop) != SIMBA_OK)
        return 0;
    g_be = be;
    return simba_start(svc) == SIMBA_OK;
}

/* The local ports of simba's current sockets. */
static int our_ports(int *ports, int cap) {
    struct pollfd p[8];
    int n = simba_fds(loop, p, 8), i, k = 0;
    for (i = 0; i < n && i < 8 && k < cap; i++) {
        struct sockaddr_in a;
        socklen_t len = sizeof a;
        if (getsockname(p[i].fd, (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET) ports[k++] = ntohs(a.sin_port);
    }
    return k;
}

static int port_in_client_list(int port, int rport) {
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r;
    char needle[32];
    int found = -1;
    if (!c || c->err) { if (c) redisFree(c); return -1; }
    r = (redisReply *)redisCommand(c, "CLIENT LIST");
    snprintf(needle, sizeof needle, "addr=127.0.0.1:%d ", rport);
    if (r && r->type == REDIS_REPLY_STRING) found = strstr(r->str, needle) != NULL;
    if (r) freeReplyObject(r);
    redisFree(c);
    return found;
}

static simba_locker *lk_a, *lk_b;
static int64_t unlock_called_us, locked_us;
static void on_locked(simba_locker *lk, void *u) {
    (void)lk;
    (*(int *)u)++;
    locked_us = mono_us();
}
static void unlock_a_now(void) {
    unlock_called_us = mono_us();
    if (simba_locker_unlock(lk_a) != SIMBA_OK) fail("locker a: unlock from a foreign timer");
}

static void stop_now(void) {
    stop_called_us = mono_us();
    if (simba_stop(svc) != SIMBA_OK) fail("simba_stop from a foreign timer");
}

static int child_main(int port, const char *mutex, int go_fd, int report_fd) {
    char b;
    int64_t t;
    int got;
    if (read(go_fd, &b, 1) != 1) return 2;
    if (!setup(port, mutex, "waiter")) return 3;
    got = run_until(&owner, 1, 8000);
    t = got ? acquired_us : -1; /* -1: not acquired; the line says what the waiter saw */
    if (write(report_fd, &t, sizeof t) != (ssize_t)sizeof t) return 5;
    {
        /* what the waiter went through, printed by the parent next to the handoff figure */
        char line[256];
        simba_stats st;
        memset(&st, 0, sizeof st);
        memset(line, 0, sizeof line);
        st.size = sizeof st;
        if (simba_service_stats(svc, &st) == SIMBA_OK)
            snprintf(line, sizeof line, "attempts %llu, errors %llu, wait %lld ms, last error: %s", (unsigned long long)st.attempts,
                     (unsigned long long)st.errors, (long long)st.wait_max_ms, st.last_error_msg[0] ? st.last_error_msg : "none");
        if (write(report_fd, line, sizeof line) != (ssize_t)sizeof line) return 5;
    }
    if (!got) return 4;
    simba_stop(svc);
    run_until(&released, 1, 2000);
    detach();
    simba_loop_free(loop);
    return 0;
}

int main(int argc, char **argv) {
    int port, go[2], rep[2], status = 0, i, n, nold, nnew, old[8], cur[8], reused = 0;
    pid_t redis_pid, child;
    char mutex[64];
    struct pollfd before[8], after[8];
    if (argc < 3) { fprintf(stderr, "usage: loops_check PORT REDIS_PID\n"); return 2; }
    port = atoi(argv[1]);
    redis_pid = (pid_t)atoi(argv[2]);
    snprintf(mutex, sizeof mutex, "loops-%s-%d", ADAPTER, (int)getpid());
#if defined(LOOPS_URING)
    {
        struct io_uring probe;
        int rc = io_uring_queue_init(8, &probe, 0);
        if (rc < 0) {
            printf("io_uring: SKIPPED: the kernel refuses io_uring (io_uring_queue_init: %s)\n", strerror(-rc));
            return 0;
        }
        io_uring_queue_exit(&probe);
    }
#endif
    if (pipe(go) != 0 || pipe(rep) != 0) return 2;
    child = fork();
    if (child == 0) _exit(child_main(port, mutex, go[0], rep[1]));

    /* 1. acquire (test_loops.sh declares its server empty: no data-loss quarantine) */
    if (!setup(port, mutex, "owner")) { fail("setup"); goto out; }
    if (!run_until(&owner, 1, 8000)) { fail("acquire"); goto out; }
    printf("%s: acquired\n", ADAPTER);

    /* 2. server stopped past the command timeout, then continued */
    nold = our_ports(old, 8);
    n = simba_fds(loop, before, 8);
    kill(redis_pid, SIGSTOP);
    run_for(1800); /* renew sent by 1000 ms, timed out by 1400: reconnecting meanwhile */
    kill(redis_pid, SIGCONT);
    {
        /* the connections come back: wait until both are ready again (interest POLLIN only) */
        int64_t t0 = mono_us(), end = t0 + 3000000;
        int ready = 0;
        while (mono_us() < end && !ready) {
            int m;
            fl_run_once();
            m = simba_fds(loop, after, 8);
            ready = m == 2 && after[0].events == POLLIN && after[1].events == POLLIN;
        }
        printf("%s: reconnected %s in %.0f ms after SIGCONT\n", ADAPTER, ready ? "and ready" : "NOT ready", (mono_us() - t0) / 1000.0);
        if (!ready) fail("reconnect after SIGCONT");
    }
    run_for(200);
    if (released || !owner) fail("ownership did not survive the stopped server");
    else printf("%s: ownership survived the stopped server (no release)\n", ADAPTER);
    n = simba_fds(loop, after, 8);
    for (i = 0; i < n && i < 8; i++)
        if (!registered(after[i].fd, after[i].events)) fail("a listed fd is not registered with the foreign loop");
    nnew = our_ports(cur, 8);
    {
        int64_t end = mono_us() + 2000000;
        int gone = 0, dropped = 0, j;
        /* the dropped connections: old local ports no longer ours */
        for (i = 0; i < nold; i++) { /* old[i] is before[i]'s port (same order) */
            int still = 0;
            for (j = 0; j < nnew; j++) if (cur[j] == old[i]) still = 1;
            if (still) continue;
            for (j = 0; j < n && j < 8; j++)
                if (after[j].fd == before[i].fd) reused = 1; /* same number, new socket */
            old[dropped++] = old[i];
        }
        nold = dropped;
        printf("%s: %d connection(s) re-made; fd numbers reused: %s\n", ADAPTER, dropped, reused ? "yes" : "no");
        if (!dropped) fail("the stopped server did not make the backend reconnect");
        while (!gone && mono_us() < end) {
            gone = 1;
            for (i = 0; i < nold; i++)
                if (port_in_client_list(port, old[i]) != 0) gone = 0;
            if (!gone) run_for(20);
        }
        for (i = 0; i < nnew; i++)
            if (port_in_client_list(port, cur[i]) != 1) fail("a current connection is missing from CLIENT LIST");
        if (!gone || nold < 1) {
            printf("%s: old ports:", ADAPTER);
            for (i = 0; i < nold; i++) printf(" %d (listed: %d)", old[i], port_in_client_list(port, old[i]));
            printf("\n");
            { char cmd[128]; snprintf(cmd, sizeof cmd, "ss -tanp | grep -E \"%d|%d\"; redis-cli -p %d client list", old[0], old[1], port); if (system(cmd)) {} }
            fail("old connections still in CLIENT LIST");
        }
        else printf("%s: CLIENT LIST: the %d dropped connection(s) gone, our %d current ones present\n", ADAPTER, nold, nnew);
    }

    /* 3. a waiting process, then simba_stop from a foreign timer */
    if (write(go[1], "g", 1) != 1) fail("pipe");
    run_for(600); /* the waiter has asked and been refused by now */
    fl_after(50, stop_now);
    if (!run_until(&released, 1, 2000)) fail("release after stop");
    else {
        double ms = (released_us - stop_called_us) / 1000.0;
        printf("%s: simba_stop from a foreign timer released in %.2f ms\n", ADAPTER, ms);
        /* without the kick to the foreign loop's timer it would wait for the next renewal
           timer, up to 1 s away */
        if (ms > 250) fail("stop took more than 250 ms (the foreign loop's timer not re-armed?)");
    }
    {
        struct pollfd p;
        int64_t t = 0;
        char line[256];
        p.fd = rep[0];
        p.events = POLLIN;
        if (poll(&p, 1, 5000) == 1 && read(rep[0], &t, sizeof t) == (ssize_t)sizeof t && t >= 0) {
            double ms = (t - stop_called_us) / 1000.0;
            printf("%s: handoff to the waiting process in %.1f ms\n", ADAPTER, ms);
            if (read(rep[0], line, sizeof line) == (ssize_t)sizeof line) {
                line[sizeof line - 1] = 0;
                printf("%s: the waiting process: %s\n", ADAPTER, line);
            }
            if (ms > 5000) fail("handoff later than 5 s: the release was not pushed to the waiter");
        } else {
            fail("the waiting process did not acquire within 5 s of the release (the push was lost; "
                 "its own timer comes only at the lease end)");
            /* what it saw, once it gives up (8 s after it started) */
            if (t >= 0 && !(poll(&p, 1, 5000) == 1 && read(rep[0], &t, sizeof t) == (ssize_t)sizeof t)) t = 0;
            if (t < 0 && read(rep[0], line, sizeof line) == (ssize_t)sizeof line) {
                line[sizeof line - 1] = 0;
                printf("%s: the waiting process, not owner after 8 s: %s\n", ADAPTER, line);
            }
        }
    }
    {
        /* 4. two lockers of this loop: b's try is pending behind a; a unlocks from a foreign
           timer; the release push wakes the foreign loop and b's on_locked fires from the
           poll it runs */
        simba_backend *be;
        simba_locker_desc ld;
        char lname[80];
        int got = 0;
        memset(&ld, 0, sizeof ld);
        snprintf(lname, sizeof lname, "%s-locker", mutex);
        ld.mutex = lname;
        ld.on_locked = on_locked;
        ld.user_data = &got;
        be = g_be;
        if (simba_locker_new(loop, be, &ld, &lk_a) != SIMBA_OK || simba_locker_new(loop, be, &ld, &lk_b) != SIMBA_OK)
            fail("locker_new");
        else if (simba_locker_lock(lk_a, 5000) != SIMBA_OK) fail("locker a: lock");
        else if (simba_locker_try(lk_b) != SIMBA_EAGAIN) fail("locker b: try should be pending");
        else {
            run_for(300); /* b has asked and waits in line */
            if (got) fail("on_locked before the unlock");
            fl_after(20, unlock_a_now);
            if (!run_until(&got, 1, 3000)) fail("on_locked did not fire after the holder unlocked");
            else {
                double ms = (locked_us - unlock_called_us) / 1000.0;
                printf("%s: a pending Locker's on_locked fired %.2f ms after the holder's unlock\n", ADAPTER, ms);
                if (!simba_locker_is_owner(lk_b)) fail("on_locked but not held");
                if (ms > 250) fail("on_locked took more than 250 ms (the push did not wake the foreign loop?)");
            }
            run_for(50);
            if (got != 1) fail("on_locked fired more than once");
        }
        if (lk_b && simba_locker_is_owner(lk_b) && simba_locker_unlock(lk_b) != SIMBA_OK) fail("locker b: unlock");
        if (lk_a) simba_locker_free(lk_a);
        if (lk_b) simba_locker_free(lk_b);
    }
#if defined(LOOPS_URING) || defined(LOOPS_EPOLL)
    {
        /* the loop freed while the driver is attached: each stop comes before its close, so
           the server sees every connection go (an io_uring poll left armed would keep it) */
        int64_t end;
        int gone = 0;
        nnew = our_ports(cur, 8);
        simba_loop_free(loop);
        loop = NULL;
        DRIVER.loop = NULL;
        end = mono_us() + 2000000;
        while (!gone && mono_us() < end) {
            struct timespec ts = {0, 20000000};
            gone = 1;
            for (i = 0; i < nnew; i++)
                if (port_in_client_list(port, cur[i]) != 0) gone = 0;
            if (!gone) nanosleep(&ts, NULL);
        }
        if (!gone || nnew < 1) fail("connections still on the server after simba_loop_free");
        else printf("%s: simba_loop_free: the server saw our %d connection(s) close\n", ADAPTER, nnew);
        detach();
    }
#endif
out:
    if (child > 0) {
        if (write(go[1], "g", 1) < 0) {}
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("waiting process");
    }
    if (loop) {
        detach();
        simba_loop_free(loop);
    }
    printf("%s: %s\n", ADAPTER, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
