/* simba_libuv.h v0.1.0 -- drive a simba_loop from a libuv loop, in the hiredis adapter
 * manner: one call attaches, one detaches. Include after simba.h, in the file that has the
 * implementation or any other (everything here is static).
 *
 *     simba_uv *a;
 *     simba_uv_attach(loop, uv_default_loop(), &a);   // a uv_poll_t per fd + one uv_timer_t
 *     uv_run(uv_default_loop(), UV_RUN_DEFAULT);      // callbacks fire from uv's callbacks
 *     simba_uv_detach(a);                             // before simba_loop_free()
 *
 * The loop's fd hook opens and closes a uv_poll_t per descriptor (closed before the backend
 * closes the socket, so a reused number never meets a stale handle); the timer hook re-arms
 * the uv_timer_t when a call from another libuv callback (simba_stop, ...) needs a poll now.
 * When a simba callback frees the loop, the adapter notices (SIMBA_ECLOSED) and stops its
 * timer; simba_uv_detach() is still needed to free the adapter.
 *
 * COMPILE-TIME OPTIONS: none of its own (everything here is static); simba.h's apply.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  the types   >>impl  the implementation   >>process  libuv's callbacks drive the
 *   loop   >>open  attach   >>close  detach
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together). */
#ifndef SIMBA_LIBUV_H
#define SIMBA_LIBUV_H
#include <poll.h>
#include <stdlib.h>
#include <uv.h>

/* >>api */
typedef struct simba_uv simba_uv;
struct simba_uv__io {
    uv_poll_t h; /* first: the handle's address is the record's */
    int fd;
    struct simba_uv__io *next;
    simba_uv *a;
};
struct simba_uv {
    simba_loop *loop; /* NULL once the loop is gone */
    uv_loop_t *uv;
    uv_timer_t timer;
    struct simba_uv__io *ios;
};

/* >>impl */
static void simba_uv__io_closed(uv_handle_t *h) { free(h); }
static void simba_uv__timer_closed(uv_handle_t *h) { free(h->data); }

static void simba_uv__arm(simba_uv *a, int64_t wait_ms);
static void simba_uv__after(simba_uv *a, int64_t r) {
    if (r < 0) { /* SIMBA_ECLOSED: a callback freed the loop, its fds are already stopped */
        a->loop = NULL;
        uv_timer_stop(&a->timer);
        return;
    }
    simba_uv__arm(a, r);
}
/* >>process */
static void simba_uv__on_timer(uv_timer_t *t) {
    simba_uv *a = (simba_uv *)t->data;
    if (a->loop) simba_uv__after(a, simba_poll(a->loop));
}
static void simba_uv__arm(simba_uv *a, int64_t wait_ms) {
    uv_timer_start(&a->timer, simba_uv__on_timer, (uint64_t)(wait_ms < 0 ? 0 : wait_ms), 0);
}
static void simba_uv__on_io(uv_poll_t *h, int status, int events) {
    struct simba_uv__io *io = (struct simba_uv__io *)h;
    simba_uv *a = io->a;
    struct pollfd p;
    if (!a->loop) return;
    p.fd = io->fd;
    p.events = POLLIN | POLLOUT;
    p.revents = (short)(status < 0 ? POLLERR : ((events & UV_READABLE) ? POLLIN : 0) | ((events & UV_WRITABLE) ? POLLOUT : 0));
    simba_uv__after(a, simba_poll_ready(a->loop, &p, 1));
}
static void simba_uv__fd_hook(void *user, int fd, short events) {
    simba_uv *a = (simba_uv *)user;
    struct simba_uv__io **pp = &a->ios, *io;
    while (*pp && (*pp)->fd != fd) pp = &(*pp)->next;
    io = *pp;
    if (!events) { /* before close: the registration goes while the number is this socket */
        if (!io) return;
        *pp = io->next;
        uv_poll_stop(&io->h);
        uv_close((uv_handle_t *)&io->h, simba_uv__io_closed);
        return;
    }
    if (!io) {
        io = (struct simba_uv__io *)calloc(1, sizeof *io);
        if (!io) return; /* the timer still polls: slower, never stuck */
        if (uv_poll_init(a->uv, &io->h, fd) != 0) { free(io); return; }
        io->fd = fd;
        io->a = a;
        io->next = a->ios;
        a->ios = io;
    }
    uv_poll_start(&io->h, ((events & POLLIN) ? UV_READABLE : 0) | ((events & POLLOUT) ? UV_WRITABLE : 0), simba_uv__on_io);
}
static void simba_uv__timer_hook(void *user, int64_t wait_ms) { simba_uv__arm((simba_uv *)user, wait_ms); }

/* >>open */
/* Attach loop to uv: from now on libuv's callbacks drive it. */
static simba_result simba_uv_attach(simba_loop *loop, uv_loop_t *uv, simba_uv **out) {
    simba_uv *a;
    simba_result rc;
    if (!out) return SIMBA_EINVAL;
    *out = NULL;
    if (!loop || !uv) return SIMBA_EINVAL;
    a = (simba_uv *)calloc(1, sizeof *a);
    if (!a) return SIMBA_ENOMEM;
    a->loop = loop;
    a->uv = uv;
    uv_timer_init(uv, &a->timer);
    a->timer.data = a;
    rc = simba_loop_set_hooks(loop, simba_uv__fd_hook, a, simba_uv__timer_hook, a);
    if (rc != SIMBA_OK) {
        uv_close((uv_handle_t *)&a->timer, simba_uv__timer_closed);
        return rc;
    }
    simba_uv__arm(a, 0); /* a first poll right away */
    *out = a;
    return SIMBA_OK;
}

/* >>close */
/* Detach (before simba_loop_free, not from a simba callback): every handle closes; the
   memory goes in libuv's close callbacks, so let uv run once more. */
static void simba_uv_detach(simba_uv *a) {
    if (!a) return;
    if (a->loop) simba_loop_set_hooks(a->loop, NULL, NULL, NULL, NULL);
    while (a->ios) simba_uv__fd_hook(a, a->ios->fd, 0);
    uv_timer_stop(&a->timer);
    uv_close((uv_handle_t *)&a->timer, simba_uv__timer_closed);
}
#endif
