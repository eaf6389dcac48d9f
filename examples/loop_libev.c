/* loop_libev.c -- simba driven by libev through adapters/simba_libev.h: one call attaches the
 * simba loop, one detaches it. A libev timer stops the contender after a while; the stop
 * takes effect at once because the adapter's timer hook re-arms its ev_timer. SIGINT or
 * SIGTERM (an ev_signal) ends it early; either way simba_loop_close() releases the mutex and
 * waits until the server confirmed it.
 *
 *   build/loop_libev [redis-port [seconds]]      (default 6379, 3)
 */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_redis.h"
#include "../adapters/simba_libev.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static simba_service *svc;
static ev_signal sigint, sigterm;

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
    printf("libev: %s acquired %s, fence %llu\n", simba_service_contender_id(s), simba_service_mutex(s), (unsigned long long)st->after->fence);
}
static void on_released(simba_service *s, const simba_state *st, void *u) {
    (void)st;
    printf("libev: %s released %s\n", simba_service_contender_id(s), simba_service_mutex(s));
    ev_break((struct ev_loop *)u, EVBREAK_ALL);
}
static void on_signal(struct ev_loop *ev, ev_signal *w, int revents) {
    (void)w; (void)revents;
    ev_break(ev, EVBREAK_ALL); /* leave ev_run: the close below releases */
}
static void stop_later(struct ev_loop *ev, ev_timer *t, int revents) {
    (void)t; (void)revents;
    if (simba_is_owner(svc)) simba_stop(svc); /* from a foreign callback: the timer hook wakes simba */
    else ev_break(ev, EVBREAK_ALL);
}

int main(int argc, char **argv) {
    struct ev_loop *ev = EV_DEFAULT;
    simba_loop *loop;
    simba_backend *be;
    simba_redis_desc rd;
    simba_contend_desc cd;
    simba_ev *a;
    ev_timer stop_timer;
    memset(&rd, 0, sizeof rd);
    rd.port = argc > 1 ? atoi(argv[1]) : 6379;
    memset(&cd, 0, sizeof cd);
    cd.mutex = "loop-libev-demo";
    cd.ttl_ms = 3000;
    cd.transition_ms = 1000;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    cd.user_data = ev;
    if (simba_loop_new(loop_desc(), &loop) != SIMBA_OK || simba_redis_open(loop, &rd, &be) != SIMBA_OK ||
        simba_contend(loop, be, &cd, &svc) != SIMBA_OK || simba_ev_attach(loop, ev, &a) != SIMBA_OK) {
        fprintf(stderr, "loop_libev: setup failed: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    simba_start(svc);
    ev_timer_init(&stop_timer, stop_later, argc > 2 ? atoi(argv[2]) : 3, 0.);
    ev_timer_start(ev, &stop_timer);
    ev_signal_init(&sigint, on_signal, SIGINT);
    ev_signal_init(&sigterm, on_signal, SIGTERM);
    ev_signal_start(ev, &sigint);
    ev_signal_start(ev, &sigterm);
    ev_run(ev, 0);
    ev_timer_stop(ev, &stop_timer);
    ev_signal_stop(ev, &sigint);
    ev_signal_stop(ev, &sigterm);
    simba_ev_detach(a);
    /* the clean exit: simba drives itself until the release is confirmed (2 s at most) */
    if (simba_loop_close(loop, 2000) != SIMBA_OK) fprintf(stderr, "loop_libev: release not confirmed\n");
    return 0;
}
