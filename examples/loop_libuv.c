/* loop_libuv.c -- simba driven by libuv through adapters/simba_libuv.h: one call attaches the
 * simba loop, one detaches it. A libuv timer stops the contender after a while; the stop
 * takes effect at once because the adapter's timer hook re-arms its uv_timer_t. SIGINT or
 * SIGTERM (a uv_signal_t) ends it early; either way simba_loop_close() releases the mutex
 * and waits until the server confirmed it.
 *
 *   build/loop_libuv [redis-port [seconds]]      (default 6379, 3)
 */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_redis.h"
#include "../adapters/simba_libuv.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static simba_service *svc;
static uv_timer_t stop_timer;
static uv_signal_t sigint, sigterm;

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
    printf("libuv: %s acquired %s, fence %llu\n", simba_service_contender_id(s), simba_service_mutex(s), (unsigned long long)st->after->fence);
}
static void on_released(simba_service *s, const simba_state *st, void *u) {
    (void)st;
    printf("libuv: %s released %s\n", simba_service_contender_id(s), simba_service_mutex(s));
    uv_stop((uv_loop_t *)u); /* done: leave uv_run */
}
static void on_signal(uv_signal_t *h, int signum) {
    (void)signum;
    uv_stop(h->loop); /* leave uv_run: the close below releases */
}
static void stop_later(uv_timer_t *t) {
    (void)t;
    if (simba_is_owner(svc)) simba_stop(svc); /* from a foreign callback: the timer hook wakes simba */
    else uv_stop(t->loop);
}

int main(int argc, char **argv) {
    uv_loop_t *uv = uv_default_loop();
    simba_loop *loop;
    simba_backend *be;
    simba_redis_desc rd;
    simba_contend_desc cd;
    simba_uv *a;
    memset(&rd, 0, sizeof rd);
    rd.port = argc > 1 ? atoi(argv[1]) : 6379;
    memset(&cd, 0, sizeof cd);
    cd.mutex = "loop-libuv-demo";
    cd.ttl_ms = 3000;
    cd.transition_ms = 1000;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    cd.user_data = uv;
    if (simba_loop_new(loop_desc(), &loop) != SIMBA_OK || simba_redis_open(loop, &rd, &be) != SIMBA_OK ||
        simba_contend(loop, be, &cd, &svc) != SIMBA_OK || simba_uv_attach(loop, uv, &a) != SIMBA_OK) {
        fprintf(stderr, "loop_libuv: setup failed: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    simba_start(svc);
    uv_timer_init(uv, &stop_timer);
    uv_timer_start(&stop_timer, stop_later, (uint64_t)(argc > 2 ? atoi(argv[2]) : 3) * 1000, 0);
    uv_signal_init(uv, &sigint);
    uv_signal_init(uv, &sigterm);
    uv_signal_start(&sigint, on_signal, SIGINT);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_run(uv, UV_RUN_DEFAULT);
    simba_uv_detach(a);
    uv_close((uv_handle_t *)&stop_timer, NULL);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_run(uv, UV_RUN_DEFAULT); /* the close callbacks */
    /* the clean exit: simba drives itself until the release is confirmed (2 s at most) */
    if (simba_loop_close(loop, 2000) != SIMBA_OK) fprintf(stderr, "loop_libuv: release not confirmed\n");
    uv_loop_close(uv);
    return 0;
}
