/* simba_libevent.h v0.1.0 -- drive a simba_loop from a libevent event_base: one call
 * attaches, one detaches. Include after simba.h (everything here is static).
 *
 *     simba_event *a;
 *     simba_event_attach(loop, base, &a);   // a persistent struct event per fd + one timer
 *     event_base_dispatch(base);
 *     simba_event_detach(a);                // before simba_loop_free()
 *
 * Events are deleted and freed before the backend closes a socket (the loop's fd hook), so a
 * reused number gets a fresh event; calls from other callbacks re-arm the timer at once.
 *
 * COMPILE-TIME OPTIONS: none of its own (everything here is static); simba.h's apply.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  the types   >>impl  the implementation   >>process  libevent's callbacks drive the
 *   loop   >>open  attach   >>close  detach
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together). */
#ifndef SIMBA_LIBEVENT_H
#define SIMBA_LIBEVENT_H
#include <event2/event.h>
#include <poll.h>
#include <stdlib.h>

/* >>api */
typedef struct simba_event simba_event;
struct simba_event__io {
    struct event *e;
    int fd;
    short events;
    struct simba_event__io *next;
    simba_event *a;
};
struct simba_event {
    simba_loop *loop; /* NULL once the loop is gone */
    struct event_base *base;
    struct event *timer;
    struct simba_event__io *ios;
};

/* >>impl */
static void simba_event__arm(simba_event *a, int64_t wait_ms) {
    struct timeval tv;
    if (wait_ms < 0) wait_ms = 0;
    tv.tv_sec = (time_t)(wait_ms / 1000);
    tv.tv_usec = (suseconds_t)(wait_ms % 1000) * 1000;
    evtimer_add(a->timer, &tv);
}
static void simba_event__after(simba_event *a, int64_t r) {
    if (r < 0) { a->loop = NULL; evtimer_del(a->timer); return; } /* loop freed */
    simba_event__arm(a, r);
}
/* >>process */
static void simba_event__on_timer(evutil_socket_t fd, short what, void *arg) {
    simba_event *a = (simba_event *)arg;
    (void)fd; (void)what;
    if (a->loop) simba_event__after(a, simba_poll(a->loop));
}
static void simba_event__on_io(evutil_socket_t fd, short what, void *arg) {
    simba_event *a = ((struct simba_event__io *)arg)->a;
    struct pollfd p;
    if (!a->loop) return;
    p.fd = (int)fd;
    p.events = POLLIN | POLLOUT;
    p.revents = (short)(((what & EV_READ) ? POLLIN : 0) | ((what & EV_WRITE) ? POLLOUT : 0));
    simba_event__after(a, simba_poll_ready(a->loop, &p, 1));
}
static void simba_event__fd_hook(void *user, int fd, short events) {
    simba_event *a = (simba_event *)user;
    struct simba_event__io **pp = &a->ios, *io;
    while (*pp && (*pp)->fd != fd) pp = &(*pp)->next;
    io = *pp;
    if (io) { event_free(io->e); io->e = NULL; } /* event_free deletes it first */
    if (!events) { /* before close */
        if (io) { *pp = io->next; free(io); }
        return;
    }
    if (!io) {
        io = (struct simba_event__io *)calloc(1, sizeof *io);
        if (!io) return; /* the timer still polls */
        io->fd = fd;
        io->a = a;
        io->next = a->ios;
        a->ios = io;
    }
    io->events = events;
    io->e = event_new(a->base, fd, (short)(EV_PERSIST | ((events & POLLIN) ? EV_READ : 0) | ((events & POLLOUT) ? EV_WRITE : 0)),
                      simba_event__on_io, io);
    if (io->e) event_add(io->e, NULL);
}
static void simba_event__timer_hook(void *user, int64_t wait_ms) { simba_event__arm((simba_event *)user, wait_ms); }

/* >>open */
static simba_result simba_event_attach(simba_loop *loop, struct event_base *base, simba_event **out) {
    simba_event *a;
    simba_result rc;
    if (!out) return SIMBA_EINVAL;
    *out = NULL;
    if (!loop || !base) return SIMBA_EINVAL;
    a = (simba_event *)calloc(1, sizeof *a);
    if (!a) return SIMBA_ENOMEM;
    a->loop = loop;
    a->base = base;
    a->timer = evtimer_new(base, simba_event__on_timer, a);
    if (!a->timer) { free(a); return SIMBA_ENOMEM; }
    rc = simba_loop_set_hooks(loop, simba_event__fd_hook, a, simba_event__timer_hook, a);
    if (rc != SIMBA_OK) { event_free(a->timer); free(a); return rc; }
    simba_event__arm(a, 0);
    *out = a;
    return SIMBA_OK;
}

/* >>close */
/* Detach (before simba_loop_free, not from a simba callback); frees the adapter. */
static void simba_event_detach(simba_event *a) {
    if (!a) return;
    if (a->loop) simba_loop_set_hooks(a->loop, NULL, NULL, NULL, NULL);
    while (a->ios) simba_event__fd_hook(a, a->ios->fd, 0);
    event_free(a->timer);
    free(a);
}
#endif
