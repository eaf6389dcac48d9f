/* kit_zk.c -- the shared backend kit (tests/kit.c) on ZooKeeper.
 *
 * Every open() is a new ZooKeeper session (a new backend), as separate processes would
 * be. Session timeout 2000 ms: owners report ttl 1333 ms / transition 2000 ms.
 * Needs a server: scripts/zk-start.sh 2191 build/zk (port from SIMBA_ZK_PORT, default
 * 2191), or an ensemble: SIMBA_ZK_HOSTS="127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
 * (scripts/zk-ensemble-start.sh DIR prints it; the first member is probed). An unreachable
 * server fails the run; it is not skipped.
 */
#define SIMBA_IMPLEMENTATION
#define SIMBA_ZK_TEST_FAULTS
#include "../simba_zk.h"
#include "kit.h"
#include "zk_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>


typedef struct kit_zk_cfg {
    char hosts[256];
    int port;
} kit_zk_cfg;

static simba_result open_zk(simba_loop *loop, void *ctx, simba_backend **out) {
    kit_zk_cfg *cfg = (kit_zk_cfg *)ctx;
    simba_zk_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.hosts = cfg->hosts;
    d.session_timeout_ms = 2000;
    d.root = "/simba-kit";
    rc = simba_zk_open(loop, &d, out);
    if (rc != SIMBA_OK) fprintf(stderr, "kit_zk: open %s: %s\n", cfg->hosts, simba_strerror(rc));
    return rc;
}

/* The store stops answering this backend: its jobs issue no call (the session itself stays
   alive, as with a server that answers pings but no requests); requests time out. Freed
   while muted, it is a killed process (its session ends after its timeout). NULL: nothing
   is muted as a whole here. */
static void mute_zk(simba_backend *be, int on) {
    if (be) ((simba__zk *)simba_backend_impl(be))->test_mute = on;
}

/* >>fenced The kit's data: the node /simba-kitfw-<name>-<key>, written through
   simba_zk_fenced_multi (set, or create when it is not there yet) and read back with a
   plain zoo_get on a session of the test's own. */
static void fw_path(const char *name, const char *key, char *out, size_t cap) {
    snprintf(out, cap, "/simba-kitfw-%s-%s", name, key);
}

typedef struct fw_wait {
    int done, zrc;
    simba_result rc;
    char err[512];
} fw_wait;

static void fw_done(simba_result rc, const simba_zk_fenced_result *res, int n, const char *errmsg, void *user) {
    fw_wait *w = (fw_wait *)user;
    w->done = 1;
    w->rc = rc;
    w->zrc = res && n == 1 ? res[0].zrc : 0;
    snprintf(w->err, sizeof w->err, "%s", errmsg ? errmsg : "");
}

static simba_result fw_one(simba_loop *loop, simba_backend *be, const char *name, uint64_t fence,
                           const simba_zk_fenced_op *op, fw_wait *w, char *err, size_t errcap) {
    simba_result rc;
    int i;
    memset(w, 0, sizeof *w);
    rc = simba_zk_fenced_multi(be, name, fence, op, 1, fw_done, w);
    if (rc != SIMBA_OK) {
        snprintf(err, errcap, "%s", simba_loop_errmsg(loop));
        return rc;
    }
    for (i = 0; i < 500 && !w->done; i++) simba_wait(loop, 20);
    if (!w->done) {
        snprintf(err, errcap, "simba_zk_fenced_multi: not answered in 10 s");
        return SIMBA_ETIMEDOUT;
    }
    snprintf(err, errcap, "%s", w->err);
    return w->rc;
}

static simba_result fenced_write(simba_loop *loop, simba_backend *be, void *ctx, const char *name, uint64_t fence,
                                 const char *key, const char *value, char *err, size_t errcap) {
    char path[400];
    simba_zk_fenced_op op;
    fw_wait w;
    simba_result rc;
    (void)ctx;
    fw_path(name, key, path, sizeof path);
    memset(&op, 0, sizeof op);
    op.type = SIMBA_ZK_FENCED_SET;
    op.path = path;
    op.data = value;
    op.data_len = -1;
    op.version = -1;
    rc = fw_one(loop, be, name, fence, &op, &w, err, errcap);
    if (rc == SIMBA_EBACKEND && w.zrc == ZNONODE) { /* the first write of this key makes it */
        op.type = SIMBA_ZK_FENCED_CREATE;
        rc = fw_one(loop, be, name, fence, &op, &w, err, errcap);
    }
    return rc;
}

static int fenced_read(simba_loop *loop, simba_backend *be, void *ctx, const char *name, const char *key, char *out,
                       size_t cap, char *err, size_t errcap) {
    kit_zk_cfg *cfg = (kit_zk_cfg *)ctx;
    char path[400], buf[256];
    int len = (int)sizeof buf - 1, zrc, i;
    zhandle_t *zh = zookeeper_init(cfg->hosts, NULL, 10000, NULL, NULL, 0);
    (void)loop;
    (void)be;
    fw_path(name, key, path, sizeof path);
    if (!zh) {
        snprintf(err, errcap, "zookeeper_init %s failed", cfg->hosts);
        return -1;
    }
    for (i = 0; i < 1000 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    zrc = zoo_get(zh, path, 0, buf, &len, NULL);
    zookeeper_close(zh);
    if (zrc == ZNONODE) {
        out[0] = 0;
        return 0;
    }
    if (zrc != ZOK) {
        snprintf(err, errcap, "zoo_get %s: %s", path, zerror(zrc));
        return -1;
    }
    snprintf(out, cap, "%.*s", len < 0 ? 0 : len, buf);
    return 0;
}

static void between(void *ctx) {
    kit_zk_cfg *cfg = (kit_zk_cfg *)ctx;
    if (!zk_serving(cfg->port)) fprintf(stderr, "kit_zk: WARNING: server on port %d does not answer srvr\n", cfg->port);
}

int main(int argc, char **argv) {
    kit_zk_cfg cfg;
    kit_backend kb;
    const char *p = getenv("SIMBA_ZK_PORT");
    /* libzookeeper_mt formats log lines into one static buffer shared by all handles (a
       race inside the library with several sessions per process): level 0 switches its
       logging off, process-wide, so they are never formatted. */
    if (!getenv("SIMBA_TEST_ZKLOG")) zoo_set_debug_level((ZooLogLevel)0);
    memset(&cfg, 0, sizeof cfg);
    cfg.port = p && atoi(p) > 0 ? atoi(p) : 2191;
    snprintf(cfg.hosts, sizeof cfg.hosts, "127.0.0.1:%d", cfg.port);
    if ((p = getenv("SIMBA_ZK_HOSTS")) && p[0]) { /* an ensemble: every member's address */
        const char *colon = strchr(p, ':');
        snprintf(cfg.hosts, sizeof cfg.hosts, "%s", p);
        cfg.port = colon ? atoi(colon + 1) : 0;
    }
    if (!zk_serving(cfg.port)) {
        fprintf(stderr, "kit_zk: no ZooKeeper on 127.0.0.1:%d (scripts/zk-start.sh %d DIR) for %s\n", cfg.port, cfg.port,
                cfg.hosts);
        printf("zookeeper kit: 0 passed, 1 failed\n");
        return 1;
    }
    memset(&kb, 0, sizeof kb);
    kb.name = "zookeeper";
    kb.open = open_zk;
    kb.ctx = &cfg;
    kb.ttl_ms = 2000;
    kb.transition_ms = 1000;
    kb.between = between;
    kb.mute = mute_zk;
    kb.fenced_write = fenced_write;
    kb.fenced_read = fenced_read;
    /* the lease is the session, which the client library's thread keeps while the loop stands still */
    kb.lease_is_session = 1;
    return kit_run(&kb, argc, argv);
}
