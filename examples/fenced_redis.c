/* fenced_redis.c -- a leader whose writes to Redis cannot outlive its lease.
 *
 * The leader of "report-job" appends reports to a list in the same Redis that holds the
 * lock, each through simba_redis_fenced: the server runs the RPUSH only while the fence
 * still holds a live lease, so a leader that was paused (GC, SIGSTOP, a slow disk) and
 * wakes after another took over cannot append. To show it, the example releases the lock
 * after a few reports and tries once more with the fence it had: that write is refused.
 *
 *   cc -std=c99 -Wall -Wextra -Werror -o fenced_redis examples/fenced_redis.c -lhiredis
 *   ./fenced_redis [port]        (a redis-server on 127.0.0.1, default port 6379)
 *
 * The keys carry the mutex's hash tag, {report-job}, so that on Redis Cluster they live in
 * the lock's slot. On a server simba has not used before, the first grant waits out the
 * data-loss quarantine (a minute) unless the server was declared new (`simba -u
 * redis://127.0.0.1:6379 init`). Exit status 0 when the reports landed and the late write
 * was refused.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MUTEX "report-job"
#define REPORTS "reports:{report-job}" /* the mutex's hash tag: the lock's slot */

typedef struct app {
    simba_backend *be;
    uint64_t fence; /* the current tenure's, 0 when not leading */
    int sent, landed, refused, inflight;
} app;

static void on_acquired(simba_service *svc, const simba_state *st, void *user) {
    app *a = (app *)user;
    (void)svc;
    a->fence = st->after->fence;
    printf("leader of %s, fence %llu\n", MUTEX, (unsigned long long)a->fence);
}

static void on_released(simba_service *svc, const simba_state *st, void *user) {
    (void)svc;
    (void)st;
    ((app *)user)->fence = 0;
}

/* The answer of one fenced write, from simba_poll. */
static void written(simba_result rc, const simba_redis_value *reply, const char *errmsg, void *user) {
    app *a = (app *)user;
    a->inflight = 0;
    if (rc == SIMBA_OK) {
        a->landed++;
        printf("report stored: the list holds %lld\n", reply->integer);
    } else if (rc == SIMBA_EFENCE) {
        a->refused++;
        printf("refused: %s\n", errmsg);
    } else {
        printf("failed (%s): %s\n", simba_strerror(rc), errmsg ? errmsg : "");
    }
}

static void report(app *a, uint64_t fence) {
    char entry[64];
    const char *argv[3];
    snprintf(entry, sizeof entry, "report %d by fence %llu", a->sent + 1, (unsigned long long)fence);
    argv[0] = "RPUSH";
    argv[1] = REPORTS;
    argv[2] = entry;
    if (simba_redis_fenced(a->be, MUTEX, fence, 3, argv, written, a) == SIMBA_OK) {
        a->sent++;
        a->inflight = 1;
    }
}

int main(int argc, char **argv) {
    simba_loop *loop;
    simba_redis_desc rd;
    simba_contend_desc cd;
    simba_service *svc;
    app a;
    uint64_t old;
    int i;
    memset(&a, 0, sizeof a);
    memset(&rd, 0, sizeof rd);
    memset(&cd, 0, sizeof cd);
    rd.port = argc > 1 ? atoi(argv[1]) : 6379;
    rd.prefix = "simba-example:";
    cd.mutex = MUTEX;
    cd.ttl_ms = 2000;
    cd.transition_ms = 1000;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    cd.user_data = &a;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return 1;
    if (simba_redis_open(loop, &rd, &a.be) != SIMBA_OK || simba_contend(loop, a.be, &cd, &svc) != SIMBA_OK ||
        simba_start(svc) != SIMBA_OK) {
        fprintf(stderr, "fenced_redis: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    /* three reports while leading (at most 75 s: a first grant may wait a quarantine) */
    for (i = 0; i < 7500 && a.landed < 3; i++) {
        simba_wait(loop, 10);
        if (a.fence && !a.inflight && a.sent < 3) report(&a, a.fence);
    }
    for (i = 0; i < 500 && a.inflight; i++) simba_wait(loop, 10);
    /* the lease ends (here: a release); a write still carrying the old fence is refused */
    old = simba_fence(svc);
    simba_stop_wait(svc, 5000);
    report(&a, old);
    for (i = 0; i < 500 && a.inflight; i++) simba_wait(loop, 10);
    simba_loop_close(loop, 5000);
    return a.landed == 3 && a.refused == 1 ? 0 : 1;
}
