/* poll_loop.c -- simba inside a caller's own poll(2) loop. The loop waits on its own fds
 * (here: stdin) and on simba_fds(), with the timeout simba_poll() returned, so it wakes for
 * a pushed release as well as for a timer. Two contenders share an in-memory store; the
 * leader steps aside every second and the release is pushed to the waiter.
 *
 *   build/poll_loop [seconds]      (default 3)
 *
 * Ctrl-C (SIGINT) or SIGTERM ends it early: simba_loop_close() releases the mutex and
 * waits until the store confirmed it.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t quit;
static void on_signal(int sig) {
    (void)sig;
    quit = 1;
}

static void on_acquired(simba_service *svc, const simba_state *st, void *user) {
    (void)user;
    printf("%s acquired %s, fence %llu\n", simba_service_contender_id(svc), simba_service_mutex(svc),
           (unsigned long long)st->after->fence);
}
static void on_released(simba_service *svc, const simba_state *st, void *user) {
    (void)st;
    (void)user;
    printf("%s released %s\n", simba_service_contender_id(svc), simba_service_mutex(svc));
}

int main(int argc, char **argv) {
    simba_memstore *store;
    simba_loop *loop;
    simba_backend *be[2];
    simba_service *svc[2];
    int64_t end, next_step_aside, handoffs = 0;
    int i, seconds = argc > 1 ? atoi(argv[1]) : 3;
    const char *ids[2] = {"alpha", "beta"};
    struct sigaction sa;
    if (seconds <= 0) seconds = 3;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it happens, into a pipe or file too */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll(2) returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (simba_memstore_new(NULL, &store) != SIMBA_OK || simba_loop_new(NULL, &loop) != SIMBA_OK) return 1;
    for (i = 0; i < 2; i++) {
        simba_contend_desc d = {0};
        d.mutex = "report-writer";
        d.contender_id = ids[i];
        d.ttl_ms = 10000; /* long lease: a handoff within ms can only come from the push */
        d.transition_ms = 6000;
        d.on_acquired = on_acquired;
        d.on_released = on_released;
        if (simba_memory_open(loop, store, &be[i]) != SIMBA_OK || simba_contend(loop, be[i], &d, &svc[i]) != SIMBA_OK ||
            simba_start(svc[i]) != SIMBA_OK) {
            fprintf(stderr, "setup failed: %s\n", simba_loop_errmsg(loop));
            return 1;
        }
    }
    end = simba_now(loop) + seconds * 1000;
    next_step_aside = simba_now(loop) + 1000;
    while (simba_now(loop) < end && !quit) {
        struct pollfd fds[8];
        int64_t wait = simba_poll(loop);
        int n = 0, k;
        if (wait < 0) return 1;
        fds[n].fd = STDIN_FILENO; /* the application's own descriptor */
        fds[n].events = POLLIN;
        n++;
        k = simba_fds(loop, fds + n, 8 - n);
        if (k < 0 || k > 8 - n) return 1;
        n += k;
        if (simba_now(loop) + wait > next_step_aside) wait = next_step_aside - simba_now(loop);
        if (wait < 0) wait = 0;
        if (poll(fds, (nfds_t)n, (int)wait) > 0 && (fds[0].revents & (POLLIN | POLLHUP))) {
            char buf[256];
            if (read(STDIN_FILENO, buf, sizeof buf) <= 0) fds[0].fd = -1; /* EOF: stop watching */
        }
        simba_poll_ready(loop, fds + 1, n - 1); /* hand simba what poll(2) found */
        if (simba_now(loop) >= next_step_aside) {
            for (i = 0; i < 2; i++)
                if (simba_is_owner(svc[i])) { /* step aside: stop, and come back as a waiter */
                    simba_stop(svc[i]);
                    handoffs++;
                    break;
                }
            next_step_aside += 1000;
        }
        for (i = 0; i < 2; i++)
            if (simba_service_status(svc[i]) == SIMBA_INITIAL) simba_start(svc[i]);
    }
    printf("%lld handoffs\n", (long long)handoffs);
    /* the clean exit: every release answered (1 s at most), then the loop freed */
    if (simba_loop_close(loop, 1000) != SIMBA_OK) fprintf(stderr, "poll_loop: releases not all confirmed\n");
    simba_memstore_free(store);
    if (quit) return 0; /* stopped by a signal: the run was cut short, not failed */
    return handoffs > 0 ? 0 : 1;
}
