/* loop_epoll.c -- simba inside a caller's own epoll loop, through the loop hooks. The fd hook
 * keeps the epoll set in step (level-triggered: no EPOLLET); the timer hook shortens the
 * epoll_wait timeout when a call outside simba_poll needs a poll sooner.
 *
 *   build/loop_epoll [redis-port [seconds]]      (default 6379, 3)
 *
 * The rules an epoll user needs: register level-triggered; on stop (events 0) EPOLL_CTL_DEL
 * right away (the descriptor is still open, so the kernel still knows it); ENOENT on DEL or MOD
 * means the set no longer holds it (then ADD for MOD); EEXIST on ADD means it is already there
 * (then MOD). tests/loops_check.c drives this same code (-DLOOPS_EPOLL).
 */
#ifndef LOOP_EPOLL_NO_MAIN
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_redis.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#endif
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

typedef struct ep_driver {
    simba_loop *loop;
    int epfd;
    int64_t wait_ms; /* when simba wants its next poll, from now */
} ep_driver;

static uint32_t ep_mask(short events) {
    return ((events & POLLIN) ? EPOLLIN : 0u) | ((events & POLLOUT) ? EPOLLOUT : 0u);
}

static void ep_fd_hook(void *user, int fd, short events) {
    ep_driver *d = (ep_driver *)user;
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = ep_mask(events);
    ev.data.fd = fd;
    if (!events) { /* before close: the kernel still knows this socket */
        if (epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, &ev) != 0 && errno != ENOENT) perror("epoll_ctl DEL");
        return;
    }
    if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &ev) == 0) return;
    if (errno == ENOENT && epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) == 0) return;
    perror("epoll_ctl");
}

static void ep_timer_hook(void *user, int64_t wait_ms) {
    ep_driver *d = (ep_driver *)user;
    if (wait_ms < d->wait_ms) d->wait_ms = wait_ms;
}

static int ep_attach(ep_driver *d, simba_loop *loop) {
    d->loop = loop;
    d->wait_ms = 0;
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (d->epfd < 0) return -1;
    return simba_loop_set_hooks(loop, ep_fd_hook, d, ep_timer_hook, d) == SIMBA_OK ? 0 : -1;
}

static void ep_detach(ep_driver *d) {
    if (d->loop) simba_loop_set_hooks(d->loop, NULL, NULL, NULL, NULL);
    close(d->epfd);
}

/* One turn: wait for readiness up to simba's deadline (and at most max_ms), hand what fired
   to simba_poll_ready. Returns simba's result (negative: the loop is gone). */
static int64_t ep_run_once(ep_driver *d, int64_t max_ms) {
    struct epoll_event evs[16];
    struct pollfd ready[16];
    int64_t wait = d->wait_ms < max_ms ? d->wait_ms : max_ms, r;
    int n, i;
    n = epoll_wait(d->epfd, evs, 16, (int)(wait < 0 ? 0 : wait));
    for (i = 0; i < n; i++) {
        ready[i].fd = evs[i].data.fd;
        ready[i].events = POLLIN | POLLOUT;
        ready[i].revents = (short)(((evs[i].events & EPOLLIN) ? POLLIN : 0) | ((evs[i].events & EPOLLOUT) ? POLLOUT : 0) |
                                   ((evs[i].events & EPOLLERR) ? POLLERR : 0) | ((evs[i].events & EPOLLHUP) ? POLLHUP : 0));
    }
    d->wait_ms = SIMBA_MAX_WAIT_MS; /* the poll's answer replaces it */
    r = simba_poll_ready(d->loop, ready, n > 0 ? n : 0);
    if (r >= 0 && r < d->wait_ms) d->wait_ms = r;
    if (r < 0) d->loop = NULL;
    return r;
}

#ifndef LOOP_EPOLL_NO_MAIN
/* simba says why it waits (a data-loss quarantine, a refused connection) at WARN: on stderr */
static void log_stderr(void *user, simba_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "simba: %s%s\n", level >= SIMBA_LOG_ERROR ? "error: " : "", msg);
}
static const simba_loop_desc *loop_desc(void) {
    static simba_loop_desc d;
    d.log = log_stderr;
    d.log_level = SIMBA_LOG_WARN;
    return &d;
}

static void on_acquired(simba_service *s, const simba_state *st, void *u) {
    (void)u;
    printf("epoll: %s acquired %s, fence %llu\n", simba_service_contender_id(s), simba_service_mutex(s), (unsigned long long)st->after->fence);
}
static void on_released(simba_service *s, const simba_state *st, void *u) {
    (void)st; (void)u;
    printf("epoll: %s released %s\n", simba_service_contender_id(s), simba_service_mutex(s));
}

int main(int argc, char **argv) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *svc;
    simba_redis_desc rd;
    simba_contend_desc cd;
    ep_driver d;
    int64_t end;
    memset(&rd, 0, sizeof rd);
    rd.port = argc > 1 ? atoi(argv[1]) : 6379;
    memset(&cd, 0, sizeof cd);
    cd.mutex = "loop-epoll-demo";
    cd.ttl_ms = 3000;
    cd.transition_ms = 1000;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    if (simba_loop_new(loop_desc(), &loop) != SIMBA_OK || simba_redis_open(loop, &rd, &be) != SIMBA_OK ||
        simba_contend(loop, be, &cd, &svc) != SIMBA_OK || ep_attach(&d, loop) != 0) {
        fprintf(stderr, "loop_epoll: setup failed: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    simba_start(svc);
    end = simba_now(loop) + (argc > 2 ? atoi(argv[2]) : 3) * 1000;
    while (simba_now(loop) < end && ep_run_once(&d, end - simba_now(loop)) >= 0) {}
    simba_stop(svc); /* outside the poll: the timer hook asks for a poll now */
    while (simba_service_status(svc) != SIMBA_INITIAL && ep_run_once(&d, 1000) >= 0) {}
    ep_detach(&d);
    simba_loop_free(loop);
    return 0;
}
#endif
