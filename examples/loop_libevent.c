/* loop_libevent.c -- simba driven by libevent through adapters/simba_libevent.h: one call
 * attaches the simba loop, one detaches it. A libevent timer stops the contender after a
 * while; the stop takes effect at once because the adapter's timer hook re-arms its timer.
 * SIGINT or SIGTERM (evsignal) ends it early; either way simba_loop_close() releases the
 * mutex and waits until the server confirmed it.
 *
 *   build/loop_libevent [redis-port [seconds]]      (default 6379, 3)
 */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_redis.h"
#include "../adapters/simba_libevent.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static simba_service *svc;

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
    printf("libevent: %s acquired %s, fence %llu\n", simba_service_contender_id(s), simba_service_mutex(s), (unsigned long long)st->after->fence);
}
static void on_released(simba_service *s, const simba_state *st, void *u) {
    (void)st;
    printf("libevent: %s released %s\n", simba_service_contender_id(s), simba_service_mutex(s));
    event_base_loopbreak((struct event_base *)u);
}
static void on_signal(evutil_socket_t sig, short what, void *u) {
    (void)sig; (void)what;
    event_base_loopbreak((struct event_base *)u); /* leave the loop: the close below releases */
}
static void stop_later(evutil_socket_t fd, short what, void *u) {
    (void)fd; (void)what;
    if (simba_is_owner(svc)) simba_stop(svc); /* from a foreign callback: the timer hook wakes simba */
    else event_base_loopbreak((struct event_base *)u);
}

int main(int argc, char **argv) {
    struct event_base *base = event_base_new();
    simba_loop *loop;
    simba_backend *be;
    simba_redis_desc rd;
    simba_contend_desc cd;
    simba_event *a;
    struct event *stop_timer, *sigint, *sigterm;
    struct timeval tv;
    if (!base) return 1;
    memset(&rd, 0, sizeof rd);
    rd.port = argc > 1 ? atoi(argv[1]) : 6379;
    memset(&cd, 0, sizeof cd);
    cd.mutex = "loop-libevent-demo";
    cd.ttl_ms = 3000;
    cd.transition_ms = 1000;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    cd.user_data = base;
    if (simba_loop_new(loop_desc(), &loop) != SIMBA_OK || simba_redis_open(loop, &rd, &be) != SIMBA_OK ||
        simba_contend(loop, be, &cd, &svc) != SIMBA_OK || simba_event_attach(loop, base, &a) != SIMBA_OK) {
        fprintf(stderr, "loop_libevent: setup failed: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    simba_start(svc);
    stop_timer = evtimer_new(base, stop_later, base);
    tv.tv_sec = argc > 2 ? atoi(argv[2]) : 3;
    tv.tv_usec = 0;
    evtimer_add(stop_timer, &tv);
    sigint = evsignal_new(base, SIGINT, on_signal, base);
    sigterm = evsignal_new(base, SIGTERM, on_signal, base);
    evsignal_add(sigint, NULL);
    evsignal_add(sigterm, NULL);
    event_base_dispatch(base);
    event_free(stop_timer);
    event_free(sigint);
    event_free(sigterm);
    simba_event_detach(a);
    /* the clean exit: simba drives itself until the release is confirmed (2 s at most) */
    if (simba_loop_close(loop, 2000) != SIMBA_OK) fprintf(stderr, "loop_libevent: release not confirmed\n");
    event_base_free(base);
    return 0;
}
