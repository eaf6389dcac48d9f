/* simba_libev.h v0.1.0 -- drive a simba_loop from a libev loop: one call attaches, one
 * detaches. Include after simba.h (everything here is static).
 *
 *     simba_ev *a;
 *     simba_ev_attach(loop, EV_DEFAULT, &a);   // an ev_io per fd + one ev_timer
 *     ev_run(EV_DEFAULT, 0);
 *     simba_ev_detach(a);                      // before simba_loop_free()
 *
 * ev_io watchers stop before the backend closes a socket (the loop's fd hook), so a reused
 * number gets a fresh watcher; calls from other libev callbacks re-arm the timer at once.
 *
 * COMPILE-TIME OPTIONS: none of its own (everything here is static); simba.h's apply.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  the types   >>impl  the implementation   >>process  libev's callbacks drive the
 *   loop   >>open  attach   >>close  detach
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together). */
#ifndef SIMBA_LIBEV_H
#define SIMBA_LIBEV_H
#include <ev.h>
#include <poll.h>
#include <stdlib.h>

/* >>api */
typedef struct simba_ev simba_ev;
struct simba_ev__io {
    ev_io w; /* first */
    struct simba_ev__io *next;
    simba_ev *a;
};
struct simba_ev {
    simba_loop *loop; /* NULL once the loop is gone */
    struct ev_loop *ev;
    ev_timer timer;
    struct simba_ev__io *ios;
};

/* >>impl */
static void simba_ev__arm(simba_ev *a, int64_t wait_ms) {
    ev_timer_stop(a->ev, &a->timer);
    ev_timer_set(&a->timer, (double)(wait_ms < 0 ? 0 : wait_ms) / 1000.0, 0.);
    ev_timer_start(a->ev, &a->timer);
}
static void simba_ev__after(simba_ev *a, int64_t r) {
    if (r < 0) { a->loop = NULL; ev_timer_stop(a->ev, &a->timer); return; } /* loop freed */
    simba_ev__arm(a, r);
}
/* >>process */
static void simba_ev__on_timer(struct ev_loop *ev, ev_timer *t, int revents) {
    simba_ev *a = (simba_ev *)t->data;
    (void)ev; (void)revents;
    if (a->loop) simba_ev__after(a, simba_poll(a->loop));
}
static void simba_ev__on_io(struct ev_loop *ev, ev_io *w, int revents) {
    struct simba_ev__io *io = (struct simba_ev__io *)w;
    simba_ev *a = io->a;
    struct pollfd p;
    (void)ev;
    if (!a->loop) return;
    p.fd = w->fd;
    p.events = POLLIN | POLLOUT;
    p.revents = (short)(((revents & EV_READ) ? POLLIN : 0) | ((revents & EV_WRITE) ? POLLOUT : 0) | ((revents & EV_ERROR) ? POLLERR : 0));
    simba_ev__after(a, simba_poll_ready(a->loop, &p, 1));
}
static void simba_ev__fd_hook(void *user, int fd, short events) {
    simba_ev *a = (simba_ev *)user;
    struct simba_ev__io **pp = &a->ios, *io;
    while (*pp && (*pp)->w.fd != fd) pp = &(*pp)->next;
    io = *pp;
    if (io) ev_io_stop(a->ev, &io->w);
    if (!events) { /* before close */
        if (io) { *pp = io->next; free(io); }
        return;
    }
    if (!io) {
        io = (struct simba_ev__io *)calloc(1, sizeof *io);
        if (!io) return; /* the timer still polls */
        io->a = a;
        io->next = a->ios;
        a->ios = io;
    }
    ev_io_init(&io->w, simba_ev__on_io, fd, ((events & POLLIN) ? EV_READ : 0) | ((events & POLLOUT) ? EV_WRITE : 0));
    ev_io_start(a->ev, &io->w);
}
static void simba_ev__timer_hook(void *user, int64_t wait_ms) { simba_ev__arm((simba_ev *)user, wait_ms); }

/* >>open */
static simba_result simba_ev_attach(simba_loop *loop, struct ev_loop *ev, simba_ev **out) {
    simba_ev *a;
    simba_result rc;
    if (!out) return SIMBA_EINVAL;
    *out = NULL;
    if (!loop || !ev) return SIMBA_EINVAL;
    a = (simba_ev *)calloc(1, sizeof *a);
    if (!a) return SIMBA_ENOMEM;
    a->loop = loop;
    a->ev = ev;
    ev_timer_init(&a->timer, simba_ev__on_timer, 0., 0.);
    a->timer.data = a;
    rc = simba_loop_set_hooks(loop, simba_ev__fd_hook, a, simba_ev__timer_hook, a);
    if (rc != SIMBA_OK) { free(a); return rc; }
    simba_ev__arm(a, 0);
    *out = a;
    return SIMBA_OK;
}

/* >>close */
/* Detach (before simba_loop_free, not from a simba callback); frees the adapter. */
static void simba_ev_detach(simba_ev *a) {
    if (!a) return;
    if (a->loop) simba_loop_set_hooks(a->loop, NULL, NULL, NULL, NULL);
    while (a->ios) simba_ev__fd_hook(a, a->ios->w.fd, 0);
    ev_timer_stop(a->ev, &a->timer);
    free(a);
}
#endif
