/* tick_loop.c -- simba in a game-style tick loop: one simba_poll() per frame, no fds, no
 * threads. Two "servers" in one process contend for leadership of "world-sim" through an
 * in-memory store; halfway through, the leader shuts down and the other takes over.
 *
 *   build/tick_loop [seconds]      (default 4)
 *
 * Ctrl-C (SIGINT) or SIGTERM ends it early: simba_loop_close() releases the mutex and
 * waits until the store confirmed it.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t quit;
static void on_signal(int sig) {
    (void)sig;
    quit = 1;
}

typedef struct node {
    const char *name;
    simba_loop *loop;
    simba_backend *be;
    simba_service *svc;
    long frames_as_leader;
} node;

static void became_leader(simba_service *svc, const simba_state *st, void *user) {
    node *n = (node *)user;
    (void)svc;
    printf("[%s] leader now (fence %llu)\n", n->name, (unsigned long long)st->after->fence);
}
static void lost_leader(simba_service *svc, const simba_state *st, void *user) {
    node *n = (node *)user;
    (void)svc;
    (void)st;
    printf("[%s] no longer leader\n", n->name);
}

static void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    simba_memstore *store;
    node nodes[2] = {{"east", 0, 0, 0, 0}, {"west", 0, 0, 0, 0}};
    long frames = (argc > 1 ? atol(argv[1]) : 4) * 60, f;
    int i;
    struct sigaction sa;
    if (frames <= 0) frames = 240;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it happens, into a pipe or file too */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (simba_memstore_new(NULL, &store) != SIMBA_OK) return 1;
    for (i = 0; i < 2; i++) {
        simba_contend_desc d = {0};
        node *n = &nodes[i];
        d.mutex = "world-sim";
        d.ttl_ms = 1000;
        d.transition_ms = 500;
        d.on_acquired = became_leader;
        d.on_released = lost_leader;
        d.user_data = n;
        if (simba_loop_new(NULL, &n->loop) != SIMBA_OK || simba_memory_open(n->loop, store, &n->be) != SIMBA_OK ||
            simba_contend(n->loop, n->be, &d, &n->svc) != SIMBA_OK || simba_start(n->svc) != SIMBA_OK) {
            fprintf(stderr, "setup failed: %s\n", n->loop ? simba_loop_errmsg(n->loop) : "no loop");
            return 1;
        }
    }
    for (f = 0; f < frames && !quit; f++) { /* 60 frames a second */
        for (i = 0; i < 2; i++) {
            node *n = &nodes[i];
            if (simba_poll(n->loop) < 0) return 1; /* never blocks */
            if (simba_is_owner(n->svc)) n->frames_as_leader++; /* the leader simulates the world */
        }
        if (f == frames / 2) {
            for (i = 0; i < 2; i++)
                if (simba_is_owner(nodes[i].svc)) {
                    printf("[%s] shutting down\n", nodes[i].name);
                    simba_stop(nodes[i].svc);
                    break;
                }
        }
        sleep_ms(16);
    }
    for (i = 0; i < 2; i++) {
        printf("[%s] led for %ld frames\n", nodes[i].name, nodes[i].frames_as_leader);
        /* the clean exit: the release answered (1 s at most), then the loop freed */
        if (simba_loop_close(nodes[i].loop, 1000) != SIMBA_OK) fprintf(stderr, "tick_loop: release not confirmed\n");
    }
    simba_memstore_free(store);
    if (quit) return 0; /* stopped by a signal: the run was cut short, not failed */
    return nodes[0].frames_as_leader > 0 && nodes[1].frames_as_leader > 0 ? 0 : 1;
}
