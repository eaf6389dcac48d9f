/* fault_forged.c -- a waiter must still take over from a crashed owner when an owner
 * announcement with an absurd lease arrives on the mutex's Redis event channel (anyone who
 * can PUBLISH on the server can send one; a buggy or older peer could too).
 *
 *   SIMBA_REDIS_PORT=6392 build/fault_forged      (a redis-server must answer there)
 *
 * A child process owns mutex M, the parent waits for it as contender B. Then
 *   control: the child is SIGKILLed: B must own M within ttl + transition + 3 s;
 *   forged:  "owner 1 1000000000 1000000000 ghost" is PUBLISHed on M's event channel,
 *            then the child is SIGKILLed: B must own M within the same bound.
 * The second case guards against B postponing its next attempt to the forged lease end
 * (about 11 days away).
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"
#include "check.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define TTL 500
#define TRANSITION 300

static int port = 6392;
static char prefix[64];

static simba_backend *open_be(simba_loop *loop) {
    simba_redis_desc d;
    simba_backend *be = NULL;
    memset(&d, 0, sizeof d);
    d.host = "127.0.0.1";
    d.port = port;
    d.prefix = prefix;
    if (simba_redis_open(loop, &d, &be) != SIMBA_OK) return NULL;
    return be;
}

static simba_service *contend(simba_loop *loop, simba_backend *be, const char *m, const char *id) {
    simba_contend_desc cd;
    simba_service *s = NULL;
    memset(&cd, 0, sizeof cd);
    cd.mutex = m;
    cd.contender_id = id;
    cd.ttl_ms = TTL;
    cd.transition_ms = TRANSITION;
    if (simba_contend(loop, be, &cd, &s) != SIMBA_OK || simba_start(s) != SIMBA_OK) return NULL;
    return s;
}

/* The child: owns m until killed; writes one byte to fd when it owns. */
static void owner_child(const char *m, int fd) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *s;
    int told = 0;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || !(be = open_be(loop)) || !(s = contend(loop, be, m, "A"))) _exit(1);
    for (;;) {
        simba_wait(loop, 50);
        if (!told && simba_is_owner(s)) {
            if (write(fd, "A", 1) != 1) _exit(1);
            told = 1;
        }
    }
}

static int publish(const char *chan, const char *msg) {
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r;
    int ok;
    if (!c || c->err) return 0;
    r = (redisReply *)redisCommand(c, "PUBLISH %s %s", chan, msg);
    ok = r && r->type == REDIS_REPLY_INTEGER;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* Returns how long B took to own m after the owner was killed (ms), or -1. */
static int64_t failover(const char *m, int forge) {
    simba_loop *loop;
    simba_backend *be;
    simba_service *b;
    int fds[2];
    pid_t pid;
    char c;
    int64_t t_kill, deadline, took = -1;
    if (pipe(fds) != 0) return -1;
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        owner_child(m, fds[1]);
    }
    close(fds[1]);
    if (read(fds[0], &c, 1) != 1) { /* the child owns m (bounded: it exits on error) */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    close(fds[0]);
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || !(be = open_be(loop)) || !(b = contend(loop, be, m, "B"))) return -1;
    /* B learns the owner and queues up */
    deadline = simba_now(loop) + 1500;
    while (simba_now(loop) < deadline) simba_wait(loop, 20);
    if (forge) {
        char chan[256];
        snprintf(chan, sizeof chan, "%s{%s}:ev:0", prefix, m);
        CHECK(publish(chan, "owner 1 1000000000 1000000000 ghost"));
        deadline = simba_now(loop) + 200; /* B receives it */
        while (simba_now(loop) < deadline) simba_wait(loop, 20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    t_kill = simba_now(loop);
    deadline = t_kill + TTL + TRANSITION + 3000;
    while (simba_now(loop) < deadline && !simba_is_owner(b)) simba_wait(loop, 20);
    if (simba_is_owner(b)) took = simba_now(loop) - t_kill;
    simba_loop_free(loop);
    return took;
}

TEST(failover_without_forgery) {
    int64_t took = failover("forge-control", 0);
    fprintf(stderr, "  B owns %lld ms after the owner was killed\n", (long long)took);
    CHECK(took >= 0);
}

TEST(failover_despite_forged_owner_message) {
    int64_t took = failover("forge-ghost", 1);
    fprintf(stderr, "  B owns %lld ms after the owner was killed (-1: not within %d ms)\n", (long long)took,
            TTL + TRANSITION + 3000);
    CHECK(took >= 0);
}

int main(int argc, char **argv) {
    const char *e = getenv("SIMBA_REDIS_PORT");
    redisContext *c;
    CHECK_INIT(argc, argv);
    if (e && atoi(e) > 0) port = atoi(e);
    snprintf(prefix, sizeof prefix, "forge%ld:", (long)getpid());
    signal(SIGPIPE, SIG_IGN);
    c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        fprintf(stderr, "fault_forged: no redis-server on 127.0.0.1:%d\n", port);
        if (c) redisFree(c);
        check__failed++;
        return check_report("fault_forged");
    }
    redisFree(c);
    RUN(failover_without_forgery);
    RUN(failover_despite_forged_owner_message);
    return check_report("fault_forged");
}
