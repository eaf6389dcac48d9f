/* loop_iouring.c -- simba inside a caller's io_uring loop, through the loop hooks. Readiness
 * comes from one-shot IORING_OP_POLL_ADD requests, re-armed after each poll (which gives
 * level-triggered behaviour). A POLL_ADD in flight holds a reference to the file: a socket
 * closed under it stays open on the server. So the fd hook's stop (always before the backend
 * closes the descriptor) submits IORING_OP_POLL_REMOVE and waits for the poll to end.
 *
 *   build/loop_iouring [redis-port [seconds]]      (default 6379, 3)
 *
 * Where the kernel refuses io_uring (seccomp, io_uring_disabled), it says so and exits 0.
 * tests/loops_check.c drives this same code (-DLOOPS_URING).
 */
#ifndef LOOP_IOURING_NO_MAIN
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_redis.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#endif
#include <errno.h>
#include <liburing.h>
#include <poll.h>

#define UR_MAXW 16
#define UR_REMOVE (1ull << 63) /* user_data of a POLL_REMOVE */

typedef struct ur_watch { int fd; short events; uint64_t tag; int armed; } ur_watch;
typedef struct ur_driver {
    simba_loop *loop;
    struct io_uring ring;
    ur_watch w[UR_MAXW];
    int nw;
    uint64_t next_tag;
    int64_t wait_ms;
    struct pollfd pend[UR_MAXW]; /* readiness gathered for the next simba_poll_ready */
    int npend;
} ur_driver;

static void ur_arm(ur_driver *d, ur_watch *w) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);
    if (!sqe) { io_uring_submit(&d->ring); sqe = io_uring_get_sqe(&d->ring); }
    if (!sqe) return; /* the timer still polls */
    w->tag = ++d->next_tag;
    io_uring_prep_poll_add(sqe, w->fd, (unsigned)(((w->events & POLLIN) ? POLLIN : 0) | ((w->events & POLLOUT) ? POLLOUT : 0)));
    io_uring_sqe_set_data64(sqe, w->tag);
    w->armed = 1;
    io_uring_submit(&d->ring);
}

/* One completion: readiness of an armed poll goes to pend; returns 1 if it was tag's. */
static int ur_complete(ur_driver *d, struct io_uring_cqe *cqe, uint64_t tag) {
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    int i, res = cqe->res;
    io_uring_cqe_seen(&d->ring, cqe);
    if (ud & UR_REMOVE) return 0;
    for (i = 0; i < d->nw; i++) {
        if (d->w[i].armed && d->w[i].tag == ud) {
            d->w[i].armed = 0;
            if (res > 0 && d->npend < UR_MAXW) {
                d->pend[d->npend].fd = d->w[i].fd;
                d->pend[d->npend].events = d->w[i].events;
                d->pend[d->npend].revents = (short)res;
                d->npend++;
            }
            break;
        }
    }
    return ud == tag;
}

/* Cancel w's poll and wait until the kernel has let go of the file. */
static void ur_cancel(ur_driver *d, ur_watch *w) {
    struct io_uring_sqe *sqe;
    struct io_uring_cqe *cqe;
    uint64_t tag = w->tag;
    int done = 0;
    if (!w->armed) return;
    sqe = io_uring_get_sqe(&d->ring);
    if (!sqe) { io_uring_submit(&d->ring); sqe = io_uring_get_sqe(&d->ring); }
    if (!sqe) return;
    io_uring_prep_poll_remove(sqe, tag);
    io_uring_sqe_set_data64(sqe, UR_REMOVE | tag);
    io_uring_submit(&d->ring);
    while (!done && io_uring_wait_cqe(&d->ring, &cqe) == 0) done = ur_complete(d, cqe, tag);
    w->armed = 0;
}

static void ur_fd_hook(void *user, int fd, short events) {
    ur_driver *d = (ur_driver *)user;
    int i;
    for (i = 0; i < d->nw && d->w[i].fd != fd; i++) {}
    if (i < d->nw) ur_cancel(d, &d->w[i]); /* stop, or a new mask: the old poll goes first */
    if (!events) {
        if (i < d->nw) d->w[i] = d->w[--d->nw];
        for (i = 0; i < d->npend; i++) /* readiness of a socket that is about to close */
            if (d->pend[i].fd == fd) d->pend[i--] = d->pend[--d->npend];
        return;
    }
    if (i == d->nw) {
        if (d->nw == UR_MAXW) return;
        d->nw++;
        d->w[i].fd = fd;
        d->w[i].armed = 0;
    }
    d->w[i].events = events;
    ur_arm(d, &d->w[i]);
}

static void ur_timer_hook(void *user, int64_t wait_ms) {
    ur_driver *d = (ur_driver *)user;
    if (wait_ms < d->wait_ms) d->wait_ms = wait_ms;
}

/* 0, or -errno when the kernel refuses io_uring. */
static int ur_attach(ur_driver *d, simba_loop *loop) {
    int rc;
    memset(d, 0, sizeof *d);
    rc = io_uring_queue_init(64, &d->ring, 0);
    if (rc < 0) return rc;
    d->loop = loop;
    if (simba_loop_set_hooks(loop, ur_fd_hook, d, ur_timer_hook, d) != SIMBA_OK) return -EINVAL;
    return 0;
}

static void ur_detach(ur_driver *d) {
    if (d->loop) simba_loop_set_hooks(d->loop, NULL, NULL, NULL, NULL);
    while (d->nw) ur_fd_hook(d, d->w[0].fd, 0);
    io_uring_queue_exit(&d->ring);
}

static int64_t ur_run_once(ur_driver *d, int64_t max_ms) {
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts;
    int64_t wait = d->wait_ms < max_ms ? d->wait_ms : max_ms, r;
    int i;
    if (wait < 0) wait = 0;
    for (i = 0; i < d->nw; i++)
        if (!d->w[i].armed) ur_arm(d, &d->w[i]); /* one-shot polls: re-arm what fired */
    if (d->npend == 0) {
        ts.tv_sec = wait / 1000;
        ts.tv_nsec = (wait % 1000) * 1000000;
        if (io_uring_wait_cqe_timeout(&d->ring, &cqe, &ts) == 0) ur_complete(d, cqe, 0);
    }
    while (io_uring_peek_cqe(&d->ring, &cqe) == 0) ur_complete(d, cqe, 0);
    d->wait_ms = SIMBA_MAX_WAIT_MS;
    r = simba_poll_ready(d->loop, d->pend, d->npend);
    d->npend = 0;
    if (r >= 0 && r < d->wait_ms) d->wait_ms = r;
    if (r < 0) d->loop = NULL;
    return r;
}

#ifndef LOOP_IOURING_NO_MAIN
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
    printf("io_uring: %s acquired %s, fence %llu\n", simba_service_contender_id(s), simba_service_mutex(s), (unsigned long long)st->after->fence);
}
static void on_released(simba_service *s, const simba_state *st, void *u) {
    (void)st; (void)u;
    printf("io_uring: %s released %s\n", simba_service_contender_id(s), simba_service_mutex(s));
}

int main(int argc, char **argv) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *svc;
    simba_redis_desc rd;
    simba_contend_desc cd;
    static ur_driver d;
    int64_t end;
    int rc;
    memset(&rd, 0, sizeof rd);
    rd.port = argc > 1 ? atoi(argv[1]) : 6379;
    memset(&cd, 0, sizeof cd);
    cd.mutex = "loop-iouring-demo";
    cd.ttl_ms = 3000;
    cd.transition_ms = 1000;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    if (simba_loop_new(loop_desc(), &loop) != SIMBA_OK) return 1;
    rc = ur_attach(&d, loop);
    if (rc < 0) {
        printf("io_uring: SKIPPED: the kernel refuses io_uring (io_uring_queue_init: %s)\n", strerror(-rc));
        simba_loop_free(loop);
        return 0;
    }
    if (simba_redis_open(loop, &rd, &be) != SIMBA_OK || simba_contend(loop, be, &cd, &svc) != SIMBA_OK) {
        fprintf(stderr, "loop_iouring: setup failed: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    simba_start(svc);
    end = simba_now(loop) + (argc > 2 ? atoi(argv[2]) : 3) * 1000;
    while (simba_now(loop) < end && ur_run_once(&d, end - simba_now(loop)) >= 0) {}
    simba_stop(svc);
    while (simba_service_status(svc) != SIMBA_INITIAL && ur_run_once(&d, 1000) >= 0) {}
    ur_detach(&d);
    simba_loop_free(loop);
    return 0;
}
#endif
