/* leader_demo.c -- leader election on a SQLite file, one line per event.
 *
 *   leader_demo --db FILE --name NAME [--ttl-ms 2000] [--transition-ms 1000] [--run-ms N]
 *   leader_demo --clock          (prints CLOCK_MONOTONIC in ms; scripts/demo.sh uses it)
 *
 * Start several with the same --db and different names: exactly one is the leader at a
 * time. Kill the leader (even with SIGKILL) and another takes over once its lease has run
 * out (ttl + transition + a random jitter). SIGINT/SIGTERM step down cleanly: the mutex is
 * released at once, so a follower takes over without waiting for the lease.
 *
 * Each line: <monotonic ms> <wall time> <name> <event>, e.g.
 *     1234567.890  12:00:01.234  alice  LEADER        fence=3
 * The monotonic column is system-wide, so the lines of several processes merge by sorting.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *name = "?";
static volatile sig_atomic_t quit;

static void on_signal(int sig) {
    (void)sig;
    quit = 1;
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
/* One timeline line, flushed at once so that a SIGKILL loses nothing already said. */
static void say(const char *fmt, ...) {
    va_list ap;
    struct timespec mono, wall;
    struct tm tm;
    char when[16], what[200];
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &wall);
    localtime_r(&wall.tv_sec, &tm);
    strftime(when, sizeof when, "%H:%M:%S", &tm);
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    printf("%lld.%03ld  %s.%03ld  %-6s  %s\n", (long long)mono.tv_sec * 1000 + mono.tv_nsec / 1000000,
           (long)(mono.tv_nsec / 1000 % 1000), when, (long)(wall.tv_nsec / 1000000), name, what);
    fflush(stdout);
}

/* Ownership moved to us: from here until on_released we are the leader, and the fence
   is what we would hand to anything we write to, so it can refuse an older leader. */
/* simba says why it waits (a refused or locked database, a data-loss quarantine) at WARN */
static void log_stderr(void *user, simba_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "%s: simba %s: %s\n", name, level >= SIMBA_LOG_ERROR ? "error" : "warning", msg);
}

static void became_leader(simba_service *svc, const simba_state *st, void *user) {
    (void)svc;
    (void)user;
    say("LEADER        fence=%llu", (unsigned long long)st->after->fence);
}

static void lost_leadership(simba_service *svc, const simba_state *st, void *user) {
    (void)svc;
    (void)user;
    say("stepped down  fence=%llu", (unsigned long long)st->before->fence);
}

/* Every change of owner we learn of (followers see who leads). */
static void owner_changed(simba_service *svc, const simba_state *st, void *user) {
    (void)user;
    if (!st->after->id[0]) say("sees no leader");
    else if (strcmp(st->after->id, simba_service_contender_id(svc)) != 0)
        say("follows %s  fence=%llu", st->after->id, (unsigned long long)st->after->fence);
}

static int64_t arg_ms(const char *s) {
    char *end;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > SIMBA_MAX_MS) {
        fprintf(stderr, "leader_demo: bad number %s\n", s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    const char *db = NULL;
    int64_t ttl = 2000, transition = 1000, run_ms = 0, end;
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_loop_desc ld;
    simba_sql_desc sd;
    simba_contend_desc cd;
    struct sigaction sa;
    char err[512];
    int i, rc = 1;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--clock") == 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            printf("%lld.%03ld\n", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, (long)(ts.tv_nsec / 1000 % 1000));
            return 0;
        }
        if (i + 1 >= argc) break;
        if (strcmp(argv[i], "--db") == 0) db = argv[++i];
        else if (strcmp(argv[i], "--name") == 0) name = argv[++i];
        else if (strcmp(argv[i], "--ttl-ms") == 0) ttl = arg_ms(argv[++i]);
        else if (strcmp(argv[i], "--transition-ms") == 0) transition = arg_ms(argv[++i]);
        else if (strcmp(argv[i], "--run-ms") == 0) run_ms = arg_ms(argv[++i]);
        else break;
    }
    if (i < argc || !db || strcmp(name, "?") == 0) {
        fprintf(stderr, "usage: leader_demo --db FILE --name NAME [--ttl-ms 2000] [--transition-ms 1000] [--run-ms N]\n"
                        "       leader_demo --clock\n");
        return 2;
    }

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: simba_wait returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    memset(&ld, 0, sizeof ld);
    ld.log = log_stderr;
    ld.log_level = SIMBA_LOG_WARN;
    if (simba_loop_new(&ld, &loop) != SIMBA_OK) return 1;

    memset(&sd, 0, sizeof sd);
    sd.path = db;
    sd.errbuf = err;
    sd.errbuf_cap = sizeof err;
    if (simba_sql_open(loop, &sd, &be) != SIMBA_OK) {
        fprintf(stderr, "leader_demo: %s\n", err);
        goto out;
    }

    memset(&cd, 0, sizeof cd);
    cd.mutex = "demo-leader";
    cd.contender_id = name; /* names must be unique among the demo processes */
    cd.ttl_ms = ttl;
    cd.transition_ms = transition;
    cd.on_acquired = became_leader;
    cd.on_released = lost_leadership;
    cd.on_owner = owner_changed;
    if (simba_contend(loop, be, &cd, &svc) != SIMBA_OK || simba_start(svc) != SIMBA_OK) {
        fprintf(stderr, "leader_demo: cannot contend (is the name a valid contender id?)\n");
        goto out;
    }
    say("joined        ttl=%lld transition=%lld", (long long)ttl, (long long)transition);

    /* The application's loop: here simply simba_wait(); a real program would do its own
       work between the calls, or poll simba_fds() together with its own descriptors. */
    end = run_ms > 0 ? simba_now(loop) + run_ms : INT64_MAX;
    while (!quit && simba_now(loop) < end) {
        int64_t left = end - simba_now(loop);
        simba_wait(loop, left < 1000 ? left : 1000);
    }

    /* Step down cleanly: on_released fires, and the database has the release before the
       process exits (3 s at most: then the lease runs out by itself). */
    if (simba_stop_wait(svc, 3000) != SIMBA_OK) say("left         release not confirmed: %s", simba_loop_errmsg(loop));
    else say("left");
    rc = 0;
out:
    simba_loop_free(loop);
    return rc;
}
