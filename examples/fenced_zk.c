/* fenced_zk.c -- a leader whose writes to ZooKeeper cannot outlive its lease.
 *
 * The leader of "report-job" records reports under /simba-example-reports, each with one
 * simba_zk_fenced_multi: a sequential child with the report and the parent's data set to
 * the latest one, in one zoo_amulti with a check of the leader's own lock node. ZooKeeper
 * applies it only while that node still exists unchanged, that is while the leader's
 * session (its lease) holds the lock; a leader that was paused past its session and wakes
 * after another took over cannot write. To show it, the example releases the lock after a
 * few reports and tries once more with the fence it had: that write is refused.
 *
 *   cc -std=c99 -Wall -Wextra -Werror -o fenced_zk examples/fenced_zk.c -lzookeeper_mt -lpthread
 *   ./fenced_zk [host:port]      (a ZooKeeper server, default 127.0.0.1:2181)
 *
 * Exit status 0 when the reports landed and the late write was refused.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_zk.h"

#include <stdio.h>
#include <string.h>

#define MUTEX "report-job"
#define PARENT "/simba-example-reports"

typedef struct app {
    simba_backend *be;
    uint64_t fence; /* the current tenure's, 0 when not leading */
    int ready;      /* the parent node exists */
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

/* The answer of one fenced multi, from simba_poll. */
static void written(simba_result rc, const simba_zk_fenced_result *res, int n, const char *errmsg, void *user) {
    app *a = (app *)user;
    a->inflight = 0;
    if (!a->ready) { /* the parent: made now, or there from an earlier run */
        a->ready = rc == SIMBA_OK || (rc == SIMBA_EBACKEND && res && res[0].zrc == ZNODEEXISTS);
        if (!a->ready) printf("cannot make %s (%s): %s\n", PARENT, simba_strerror(rc), errmsg ? errmsg : "");
        return;
    }
    if (rc == SIMBA_OK && n == 2) {
        a->landed++;
        printf("report stored as %s\n", res[0].path);
    } else if (rc == SIMBA_EFENCE) {
        a->refused++;
        printf("refused: %s\n", errmsg);
    } else {
        printf("failed (%s): %s\n", simba_strerror(rc), errmsg ? errmsg : "");
    }
}

static void write_ops(app *a, uint64_t fence, const simba_zk_fenced_op *ops, int n) {
    if (simba_zk_fenced_multi(a->be, MUTEX, fence, ops, n, written, a) == SIMBA_OK) a->inflight = 1;
}

static void report(app *a, uint64_t fence) {
    char entry[64];
    simba_zk_fenced_op ops[2];
    memset(ops, 0, sizeof ops);
    if (!a->ready) { /* first the parent (fenced too: only a leader makes it) */
        ops[0].type = SIMBA_ZK_FENCED_CREATE;
        ops[0].path = PARENT;
        write_ops(a, fence, ops, 1);
        return;
    }
    snprintf(entry, sizeof entry, "report %d by fence %llu", a->sent + 1, (unsigned long long)fence);
    ops[0].type = SIMBA_ZK_FENCED_CREATE;
    ops[0].path = PARENT "/r-";
    ops[0].data = entry;
    ops[0].data_len = -1;
    ops[0].flags = SIMBA_ZK_FENCED_SEQUENTIAL;
    ops[1].type = SIMBA_ZK_FENCED_SET;
    ops[1].path = PARENT;
    ops[1].data = entry;
    ops[1].data_len = -1;
    ops[1].version = -1;
    a->sent++;
    write_ops(a, fence, ops, 2);
}

int main(int argc, char **argv) {
    simba_loop *loop;
    simba_zk_desc zd;
    simba_contend_desc cd;
    simba_service *svc;
    app a;
    uint64_t old;
    int i;
    memset(&a, 0, sizeof a);
    memset(&zd, 0, sizeof zd);
    memset(&cd, 0, sizeof cd);
    zoo_set_debug_level((ZooLogLevel)0);
    zd.hosts = argc > 1 ? argv[1] : "127.0.0.1:2181";
    zd.session_timeout_ms = 4000;
    zd.root = "/simba-example";
    cd.mutex = MUTEX;
    cd.on_acquired = on_acquired;
    cd.on_released = on_released;
    cd.user_data = &a;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return 1;
    if (simba_zk_open(loop, &zd, &a.be) != SIMBA_OK || simba_contend(loop, a.be, &cd, &svc) != SIMBA_OK ||
        simba_start(svc) != SIMBA_OK) {
        fprintf(stderr, "fenced_zk: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    /* three reports while leading (at most 10 s) */
    for (i = 0; i < 1000 && a.landed < 3; i++) {
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
