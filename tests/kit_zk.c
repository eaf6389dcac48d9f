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
   alive, as with a server that answers pings but no requests); requests time out. */
static void mute_zk(simba_backend *be, int on) {
    ((simba__zk *)simba_backend_impl(be))->test_mute = on;
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
    return kit_run(&kb, argc, argv);
}
