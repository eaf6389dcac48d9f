/* kit_diff.c -- the differential test: a store against the reference, the memory store.
 *
 *   build/kit_diff_<store> [--steps N] [--seed S] [--plant] [--quiet]
 *
 * Seeded random requests from several contenders (acquire or renew, release, yield,
 * set_value, force_release, inspect) on a mutex, a semaphore of 2, one of 3 and a read-write
 * lock run step by step on both sides: the store under test (SQLite, Redis, ZooKeeper,
 * PostgreSQL, MySQL; the memory store itself with --plant) and a memory store (simba_memory.h).
 * After every step each side's outcome is written as one line (the request's result, each
 * contender's "do I hold it" with its fence's rank, the store's holders in fence order with
 * their values and ranks, the wait queue, the permits) and the two lines must be equal.
 * Fences are compared by rank, never by number: the rank of the step that first showed
 * them, and a fence first shown must lie above every earlier one. A divergence prints the
 * seed, the step and both lines; `--seed S --steps N` replays it (SIMBA_DIFF_TRACE=1 prints
 * every step's line). make test runs 2,000 steps per store (about 1 s on memory, 4 s on
 * SQLite, 3 s on Redis, 10 s on PostgreSQL, 14 s on ZooKeeper); make diff-long 100,000.
 *
 * Why the public API and not the backend vtable: a reply reaches only the core
 * (simba_req_done), so only the core's services see grants, fences and values. The steps are
 * made deterministic by time instead: leases of ten minutes (the store's clock decides
 * nothing), and each contender's loop runs on a clock of its own (the real one plus an
 * offset) that the test moves to the contender's next deadline to make it ask ("tick":
 * a start, a renewal, a waiter's next ask). Pushes (a release woken waiter's ask) arrive when
 * they arrive: after every step that may free a permit both sides tick every waiter until
 * nobody more is granted, so a late push only repeats an ask that changes nothing.
 *
 * --plant runs the memory store against itself, the side under test granting a reader
 * beside a waiting writer (SIMBA_MEMORY_TEST_PLANT, names "plant-..."): it must diverge
 * (exit 0 when it does, 1 when it does not).
 */
#define SIMBA_IMPLEMENTATION
#define SIMBA_MEMORY_TEST_PLANT
#include "../simba.h"
#include "../simba_memory.h"
#if defined(DIFF_SQL)
#include "../simba_sql.h"
#elif defined(DIFF_REDIS)
#include "../simba_redis.h"
#elif defined(DIFF_ZK)
#include "../simba_zk.h"
#elif defined(DIFF_PG)
#include "../simba_pg.h"
#elif defined(DIFF_MYSQL)
#include "../simba_mysql.h"
#endif

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NC 5        /* contenders at most */
#define BLOCK 100   /* steps on one name before the next kind of lock */
#define MAXG 4096   /* fences a side remembers per name */
#define TTL_MS 600000
#define WAIT_MS 15000 /* a request unanswered this long is a failure */
/* a store's own timeouts (connect, statement, command): beyond any jump of the clocks, which
   would otherwise reach one while a statement is under way (WAIT_MS bounds them in real time) */
#define FAR_MS 1000000000

typedef struct side {
    const char *what;
    simba_memstore *st; /* the memory store of this side (reference, or --plant) */
    simba_loop *loop[NC + 1];
    simba_backend *be[NC + 1]; /* [NC]: the admin's client (inspect, force_release) */
    int64_t off[NC + 1];       /* each loop's clock: the real one plus off */
    uint64_t rnd[NC + 1];      /* each loop's random source */
    simba_service *svc[NC];
    int news[NC]; /* callbacks each contender has had (an outcome arrived) */
    uint64_t fence[MAXG]; /* fences seen on the current name, ascending */
    int grank[MAXG];      /* fence[i]'s rank: the step that first showed it, counted */
    int nf, nrank;
    char name[SIMBA_NAME_MAX + 1];
} side;

static char tag[32];
static int kind, ncont, plant, quiet;
static const char *kinds[] = {"mutex", "semaphore of 2", "semaphore of 3", "read-write lock"};

static int64_t wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static int64_t clock_of(void *u) { return wall() + *(int64_t *)u; }

/* xorshift64*: one sequence per seed, the same on every machine */
static uint64_t rs;
static uint32_t rnd(void) {
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    return (uint32_t)((rs * 2685821657736338717ull) >> 32);
}
/* each loop's own source (jitter), apart from the steps' so that no timing moves them */
static uint32_t rnd_loop(void *u) {
    uint64_t *x = (uint64_t *)u;
    *x += 0x9E3779B97F4A7C15ull;
    return (uint32_t)((*x ^ (*x >> 29)) * 0xBF58476D1CE4E5B9ull >> 32);
}

/* ---- the store under test ------------------------------------------------------------ */

#if defined(DIFF_SQL)
static char sql_path[300];
#endif
static simba_result open_store(side *s, simba_loop *loop, simba_backend **out) {
#if defined(DIFF_SQL)
    simba_sql_desc d;
    memset(&d, 0, sizeof d);
    d.path = sql_path;
    (void)s;
    return simba_sql_open(loop, &d, out);
#elif defined(DIFF_REDIS)
    simba_redis_desc d;
    const char *e = getenv("SIMBA_REDIS_PORT");
    static char prefix[48];
    memset(&d, 0, sizeof d);
    d.port = e && *e ? atoi(e) : 6390;
    snprintf(prefix, sizeof prefix, "diff.%s:", tag);
    d.prefix = prefix;
    d.max_lease_ms = 2 * TTL_MS;
    d.connect_timeout_ms = d.command_timeout_ms = FAR_MS;
    (void)s;
    return simba_redis_open(loop, &d, out);
#elif defined(DIFF_ZK)
    simba_zk_desc d;
    static char hosts[64];
    const char *e = getenv("SIMBA_ZK_PORT");
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d", e && *e ? atoi(e) : 2191);
    memset(&d, 0, sizeof d);
    d.hosts = hosts;
    d.session_timeout_ms = 10000;
    d.root = "/simba-diff";
    (void)s;
    return simba_zk_open(loop, &d, out);
#elif defined(DIFF_PG)
    simba_pg_desc d;
    static char table[48];
    const char *e = getenv("SIMBA_PG_PORT");
    memset(&d, 0, sizeof d);
    d.hostaddr = "127.0.0.1";
    d.port = e && *e ? atoi(e) : 5440;
    d.user = "postgres";
    d.password = "simba";
    d.dbname = "postgres";
    snprintf(table, sizeof table, "diff_%s", tag);
    d.table = table;
    d.max_lease_ms = 2 * TTL_MS;
    d.connect_timeout_ms = d.statement_timeout_ms = d.stall_timeout_ms = FAR_MS;
    (void)s;
    return simba_pg_open(loop, &d, out);
#elif defined(DIFF_MYSQL)
    simba_mysql_desc d;
    static char table[48];
    const char *e = getenv("SIMBA_MYSQL_PORT");
    memset(&d, 0, sizeof d);
    d.host = "127.0.0.1";
    d.port = e && *e ? atoi(e) : 3390;
    d.user = "root";
    d.password = "simba";
    d.db = "simba";
    e = getenv("SIMBA_KIT_MYSQL_CONNECTIONS"); /* request connections (POOL in simba_mysql.h) */
    d.connections = e && *e ? atoi(e) : 0;
    snprintf(table, sizeof table, "diff_%s", tag);
    d.table = table;
    d.max_lease_ms = 2 * TTL_MS;
    d.connect_timeout_ms = d.statement_timeout_ms = FAR_MS;
    (void)s;
    return simba_mysql_open(loop, &d, out);
#else
    return simba_memory_open(loop, s->st, out);
#endif
}

static int side_open(side *s, const char *what, int reference) {
    int i;
    s->what = what;
    if (reference || !strcmp(what, "memory")) {
        if (simba_memstore_new(NULL, &s->st) != SIMBA_OK) return -1;
    }
    for (i = 0; i <= NC; i++) {
        simba_loop_desc ld;
        simba_result rc;
        memset(&ld, 0, sizeof ld);
        ld.now_ms = clock_of;
        ld.clock_user = &s->off[i];
        ld.random = rnd_loop;
        s->rnd[i] = (uint64_t)i + 1;
        ld.random_user = &s->rnd[i];
        if (simba_loop_new(&ld, &s->loop[i]) != SIMBA_OK) return -1;
        rc = reference ? simba_memory_open(s->loop[i], s->st, &s->be[i]) : open_store(s, s->loop[i], &s->be[i]);
        if (rc != SIMBA_OK) {
            fprintf(stderr, "kit_diff: cannot open %s: %s (%s)\n", what, simba_strerror(rc), simba_loop_errmsg(s->loop[i]));
            return -1;
        }
    }
    return 0;
}

/* ---- driving the loops --------------------------------------------------------------- */

/* One round over every loop of a side: wait up to ms on all their fds, then poll each. */
static void pump(side *s, int ms) {
    struct pollfd fds[64];
    int i, n = 0;
    for (i = 0; i <= NC; i++) {
        int k;
        simba_poll(s->loop[i]);
        k = simba_fds(s->loop[i], fds + n, 64 - n);
        if (k > 0) n += k < 64 - n ? k : 64 - n;
    }
    if (ms > 0 && n > 0) poll(fds, (nfds_t)n, ms);
    for (i = 0; i <= NC; i++) simba_poll(s->loop[i]);
}

/* A descriptor waiting to be writable is a connect (or a send) under way: its deadline is
   on the loop's clock, so the clock does not jump until it is done. */
static int writing(simba_loop *loop) {
    struct pollfd fds[16];
    int i, n = simba_fds(loop, fds, 16);
    for (i = 0; i < n && i < 16; i++)
        if (fds[i].events & POLLOUT) return 1;
    return 0;
}

/* Moves loop i's clock on by w ms, once what it is writing is written. */
static void jump(side *s, int i, int64_t w) {
    int k;
    for (k = 0; k < 1000 && writing(s->loop[i]); k++) pump(s, 1);
    if (w > 0) s->off[i] += w;
}

static simba_stats stats_of(simba_service *svc) {
    simba_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    simba_service_stats(svc, &st);
    return st;
}

/* Until contender i's requests are all answered (and, with after, one more was sent) and
   nothing is due on its loop within QUIET_MS: a batching hold, a retry at once or after
   the minimum interval (a refused value's or a yield's follow-up) is moved to at once. */
#define QUIET_MS 1000
static int settle_one(side *s, int i, uint64_t after) {
    int64_t end = wall() + WAIT_MS;
    int jumps = 0;
    while (wall() < end) {
        int64_t w = simba_poll(s->loop[i]);
        simba_stats st = stats_of(s->svc[i]); /* after the poll: what it sent (a push's ask) is in flight */
        if (st.attempts > after && st.in_flight == 0) {
            if (w > QUIET_MS || jumps >= 20) return 0;
            jumps++;
            jump(s, i, w);
            pump(s, 1); /* what the jump sent is answered before the next look */
            continue;
        } else if (st.in_flight && w > 0 && w <= SIMBA_HOLD_MS + 10) {
            jump(s, i, w);
        }
        pump(s, st.in_flight ? 1 : 0);
    }
    fprintf(stderr, "kit_diff: %s: contender c%d got no answer in %d ms\n", s->what, i, WAIT_MS);
    return -1;
}

/* Contender i asks now: started if it was not, else its clock moves to its next deadline
   (an owner's renewal, a waiter's next ask) until it has sent an ACQUIRE. Never while one
   is in flight: its answer's lease counts from the send, and a clock moved on meanwhile
   would find that grant lapsed on arrival (the contender then asks anew, at the back). */
static int tick(side *s, int i) {
    simba_stats st = stats_of(s->svc[i]);
    uint64_t before = st.attempts;
    int k;
    if (simba_service_status(s->svc[i]) != SIMBA_RUNNING) {
        if (simba_start(s->svc[i]) != SIMBA_OK) return -1;
        return settle_one(s, i, before);
    }
    if (settle_one(s, i, 0) < 0) return -1;
    before = stats_of(s->svc[i]).attempts;
    for (k = 0; k < 200; k++) {
        int64_t w = simba_poll(s->loop[i]);
        if (stats_of(s->svc[i]).attempts != before) break;
        jump(s, i, w);
    }
    return settle_one(s, i, before);
}

/* A yield's outcome: the ownership kept (simba_is_owner again) or passed (on_released). */
static void on_news(simba_service *svc, const simba_state *st, void *user) {
    (void)svc;
    (void)st;
    (*(int *)user)++;
}
static void on_news_event(simba_service *svc, const simba_service_event *ev, void *user) {
    (void)svc;
    (void)ev;
    (*(int *)user)++;
}

/* A value change's outcome: on_owner (stored), on_released (refused) or on_event (failed). */
static int value_outcome(side *s, int i, int news) {
    int64_t end = wall() + WAIT_MS;
    while (wall() < end) {
        if (s->news[i] > news) return settle_one(s, i, 0);
        pump(s, 1);
    }
    fprintf(stderr, "kit_diff: %s: c%d's value change got no outcome in %d ms\n", s->what, i, WAIT_MS);
    return -1;
}

static int yield_outcome(side *s, int i) {
    uint64_t released = stats_of(s->svc[i]).releases;
    int64_t end = wall() + WAIT_MS;
    while (wall() < end) {
        simba_stats st = stats_of(s->svc[i]);
        if ((simba_is_owner(s->svc[i]) || st.releases > released) && st.in_flight == 0) return settle_one(s, i, 0);
        pump(s, 1);
    }
    fprintf(stderr, "kit_diff: %s: c%d's yield got no outcome in %d ms\n", s->what, i, WAIT_MS);
    return -1;
}

static int stop(side *s, int i) {
    if (simba_service_status(s->svc[i]) == SIMBA_INITIAL) return 0;
    if (simba_stop_wait(s->svc[i], WAIT_MS) != SIMBA_OK) {
        fprintf(stderr, "kit_diff: %s: c%d did not stop: %s\n", s->what, i, simba_loop_errmsg(s->loop[i]));
        return -1;
    }
    pump(s, 0);
    return 0;
}

/* Which running contenders' beliefs the store contradicts (bit i): a holder the store lists
   that has not heard of it (its answer lost a race with a push's ask), or an owner the store
   no longer lists (a forced release, which some stores push to it and others let it find at
   its renewal). -1 when the store cannot be read. */
static int unsettled(side *s) {
    simba_view v;
    int i, k, out = 0;
    if (simba_inspect_wait(s->be[NC], s->name, &v, WAIT_MS) != SIMBA_OK) return -1;
    for (i = 0; i < ncont; i++) {
        int listed = 0;
        if (simba_service_status(s->svc[i]) != SIMBA_RUNNING) continue;
        for (k = 0; k < v.holders; k++)
            if (!strcmp(v.holder[k].id, simba_service_contender_id(s->svc[i])) &&
                (!simba_is_owner(s->svc[i]) || v.holder[k].fence == simba_fence(s->svc[i])))
                listed = 1;
        if (listed != simba_is_owner(s->svc[i])) out |= 1 << i;
    }
    return out;
}

/* After a step that may free a permit: every waiter asks, and every contender the store
   contradicts, until nobody more is granted and every belief matches the store. */
static int settle_all(side *s) {
    int round, i, odd = 0;
    for (round = 0; round < 6; round++) {
        int changed = 0;
        for (i = 0; i < ncont; i++) {
            int was;
            if (simba_service_status(s->svc[i]) != SIMBA_RUNNING || (simba_is_owner(s->svc[i]) && !(odd & 1 << i))) continue;
            was = simba_is_owner(s->svc[i]);
            if (tick(s, i) < 0) return -1;
            if (simba_is_owner(s->svc[i]) != was) changed = 1;
        }
        if ((odd = unsettled(s)) < 0) return -1;
        if (!changed && !odd) break;
    }
    pump(s, 0);
    return 0;
}

/* ---- fences by rank ------------------------------------------------------------------ */

/* Fences are ranked by the step that first showed them: every fence a step shows for the
   first time gets that step's rank, and must lie above every fence shown before. Two
   grants of one step (two readers let in by one release) share a rank: which of them
   asked first is the pushes' timing, not the store's decision. */
static int rank_of(const side *s, uint64_t f) {
    int i;
    for (i = 0; i < s->nf; i++)
        if (s->fence[i] == f) return s->grank[i];
    return -1;
}

static void ranks_learn(side *s, const uint64_t *f, int n, char *bad, size_t cap) {
    uint64_t top = 0;
    int i, added = 0;
    for (i = 0; i < s->nf; i++)
        if (s->fence[i] > top) top = s->fence[i];
    for (i = 0; i < n; i++) {
        if (!f[i] || rank_of(s, f[i]) >= 0 || s->nf >= MAXG) continue;
        if (f[i] < top)
            snprintf(bad, cap, " fence %llu is new and below %llu", (unsigned long long)f[i], (unsigned long long)top);
        if (!added++) s->nrank++;
        s->fence[s->nf] = f[i];
        s->grank[s->nf++] = s->nrank;
    }
}

/* ---- one step ------------------------------------------------------------------------ */

typedef struct step {
    int op, who, pick;
    char value[24];
} step;
enum { OP_TICK, OP_RELEASE, OP_YIELD, OP_SET_VALUE, OP_FORCE, OP_INSPECT };
static const char *opname[] = {"acquire/renew", "release", "yield", "set_value", "force_release", "inspect"};

static void add(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    va_list ap;
    if (n >= cap) return;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

typedef struct hword {
    int rank;
    char text[SIMBA_ID_MAX + SIMBA_VALUE_MAX + 32];
} hword;
static int hword_cmp(const void *x, const void *y) {
    const hword *a = (const hword *)x, *b = (const hword *)y;
    return a->rank != b->rank ? a->rank - b->rank : strcmp(a->text, b->text);
}

/* The store's view of the name, in words: holders by fence rank with their values, the
   wait queue, the permits; fences (and the contenders' own, f[0..nf)) ranked first. */
static int view_words(side *s, simba_backend *be, uint64_t *f, const int *run, int nf, char *out, size_t cap) {
    static hword hw[SIMBA_PERMITS_MAX + 1];
    simba_view v;
    char bad[128] = "";
    int k, n;
    simba_result rc = simba_inspect_wait(be, s->name, &v, WAIT_MS);
    if (rc != SIMBA_OK) {
        snprintf(out, cap, "inspect failed: %s (%s)", simba_strerror(rc), simba_loop_errmsg(simba_backend_loop(be)));
        return -1;
    }
    n = v.holders < SIMBA_PERMITS_MAX ? v.holders : SIMBA_PERMITS_MAX;
    for (k = 0; k < n && nf < 64; k++) f[nf++] = v.holder[k].fence;
    ranks_learn(s, f, nf, bad, sizeof bad);
    for (k = 0; k < n; k++) {
        hw[k].rank = rank_of(s, v.holder[k].fence);
        snprintf(hw[k].text, sizeof hw[k].text, "%s#%d%s='%.*s'", v.holder[k].id, hw[k].rank, v.holder[k].shared ? " r" : "",
                 (int)v.holder[k].value_len, v.holder[k].value ? (const char *)v.holder[k].value : "");
    }
    qsort(hw, (size_t)n, sizeof hw[0], hword_cmp);
    out[0] = 0;
    for (k = 0; k < nf - n; k++) {
        if (f[k]) add(out, cap, "c%d:holds#%d ", k, rank_of(s, f[k]));
        else add(out, cap, "c%d:%s ", k, run[k] ? "waits" : "-");
    }
    add(out, cap, "| holders [");
    for (k = 0; k < n; k++) add(out, cap, " %s", hw[k].text);
    add(out, cap, " ] waiters [");
    for (k = 0; k < v.waiters && k < SIMBA_VIEW_WAITERS; k++) add(out, cap, " %s", v.waiter[k]);
    add(out, cap, " ] permits %d%s", v.permits, bad);
    return 0;
}

/* The holder at place k in rank order (grants of one step by id): the same on both sides
   whatever order the pushes gave them. */
static uint64_t holder_at(side *s, const simba_view *v, int k) {
    hword hw[SIMBA_PERMITS_MAX + 1];
    int j, n = v->holders < SIMBA_PERMITS_MAX ? v->holders : SIMBA_PERMITS_MAX;
    for (j = 0; j < n; j++) {
        hw[j].rank = rank_of(s, v->holder[j].fence);
        snprintf(hw[j].text, sizeof hw[j].text, "%s", v->holder[j].id);
    }
    qsort(hw, (size_t)n, sizeof hw[0], hword_cmp);
    for (j = 0; j < n; j++)
        if (!strcmp(v->holder[j].id, hw[k].text)) return v->holder[j].fence;
    return 0;
}

/* Runs one step on a side and writes its outcome. */
static int run_step(side *s, const step *p, char *out, size_t cap) {
    simba_result rc = SIMBA_OK;
    char words[2048];
    uint64_t f[64];
    int run[NC];
    int i = p->who, failed = 0, frees = 0, news;
    simba_service *svc = s->svc[i];
    switch (p->op) {
    case OP_TICK: failed = tick(s, i); break;
    case OP_RELEASE: failed = stop(s, i); frees = 1; break;
    case OP_YIELD:
        rc = simba_yield(svc);
        if (rc == SIMBA_OK) failed = yield_outcome(s, i);
        frees = 1;
        break;
    case OP_SET_VALUE:
        news = s->news[i];
        rc = simba_set_value(svc, p->value, strlen(p->value));
        if (rc == SIMBA_OK) failed = value_outcome(s, i, news);
        frees = 1; /* a refused one ends a holding the store had ended already */
        break;
    case OP_FORCE: {
        /* pick: a holder by place (1..) in the view, or a fence handed out before (< 0) */
        uint64_t fx = 0;
        simba_view v;
        if (p->pick > 0 && simba_inspect_wait(s->be[NC], s->name, &v, WAIT_MS) == SIMBA_OK && p->pick <= v.holders)
            fx = holder_at(s, &v, p->pick - 1);
        else if (p->pick < 0 && s->nf)
            fx = s->fence[(-p->pick - 1) % s->nf];
        rc = fx ? simba_force_release_wait(s->be[NC], s->name, fx, WAIT_MS) : SIMBA_ESTATE;
        frees = 1;
        break;
    }
    case OP_INSPECT: {
        simba_view v;
        rc = simba_inspect_wait(s->be[i], s->name, &v, WAIT_MS);
        break;
    }
    }
    if (failed) return -1;
    if (frees && settle_all(s) < 0) return -1;
    for (i = 0; i < ncont; i++) {
        run[i] = simba_service_status(s->svc[i]) == SIMBA_RUNNING;
        f[i] = run[i] && simba_is_owner(s->svc[i]) ? simba_fence(s->svc[i]) : 0;
    }
    snprintf(out, cap, "%s c%d rc %d | ", opname[p->op], p->who, (int)rc);
    if (view_words(s, s->be[NC], f, run, ncont, words, sizeof words) < 0) failed = -1;
    add(out, cap, "%s", words);
    return failed;
}

/* ---- blocks: one name, one kind of lock, fresh contenders ------------------------------ */

static int block_begin(side *s, int b, const char *prefix) {
    int i;
    for (i = 0; i < NC; i++)
        if (s->svc[i]) {
            if (stop(s, i) < 0) return -1;
            simba_service_free(s->svc[i]);
            s->svc[i] = NULL;
        }
    snprintf(s->name, sizeof s->name, "%s-%s-%d", prefix, tag, b);
    s->nf = s->nrank = 0;
    for (i = 0; i < ncont; i++) {
        simba_contend_desc d;
        char id[8];
        memset(&d, 0, sizeof d);
        snprintf(id, sizeof id, "c%d", i);
        d.mutex = s->name;
        d.contender_id = id;
        d.ttl_ms = TTL_MS;
        d.transition_ms = TTL_MS;
        d.permits = kind == 1 ? 2 : kind == 2 ? 3 : 1;
        d.shared = kind == 3 && (i == 1 || i == 2 || i == 4); /* c0 and c3 write */
        d.on_acquired = d.on_released = d.on_owner = on_news;
        d.on_event = on_news_event;
        d.user_data = &s->news[i];
        if (simba_contend(s->loop[i], s->be[i], &d, &s->svc[i]) != SIMBA_OK) {
            fprintf(stderr, "kit_diff: %s: contend: %s\n", s->what, simba_loop_errmsg(s->loop[i]));
            return -1;
        }
    }
    return 0;
}

static step make_step(int n) {
    step p;
    uint32_t x = rnd() % 100;
    memset(&p, 0, sizeof p);
    p.op = x < 40 ? OP_TICK : x < 55 ? OP_RELEASE : x < 65 ? OP_YIELD : x < 80 ? OP_SET_VALUE : x < 90 ? OP_FORCE : OP_INSPECT;
    p.who = (int)(rnd() % (uint32_t)ncont);
    p.pick = rnd() % 4 ? (int)(rnd() % 3) + 1 : -(int)(rnd() % 8) - 1;
    snprintf(p.value, sizeof p.value, "v%d", n);
    return p;
}

int main(int argc, char **argv) {
    static side real, ref;
    static char a[4096], b[4096];
    long steps = 2000, n;
    unsigned long long seed = 0;
    int i, diverged = 0;
    const char *store = "memory";
#if defined(DIFF_SQL)
    store = "sqlite";
#elif defined(DIFF_REDIS)
    store = "redis";
#elif defined(DIFF_ZK)
    store = "zookeeper";
    zoo_set_debug_level((ZooLogLevel)0);
#elif defined(DIFF_PG)
    store = "postgres";
#elif defined(DIFF_MYSQL)
    store = "mysql";
#endif
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--plant")) plant = 1;
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else {
            fprintf(stderr, "usage: %s [--steps N] [--seed S] [--plant] [--quiet]\n", argv[0]);
            return 2;
        }
    }
    if (!seed) seed = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 16);
    if (plant && strcmp(store, "memory")) {
        fprintf(stderr, "kit_diff: --plant is the memory store's self-test\n");
        return 2;
    }
    rs = seed * 0x9E3779B97F4A7C15ull | 1;
    snprintf(tag, sizeof tag, "%d%ld", (int)getpid() % 100000, (long)(wall() % 100000));
#if defined(DIFF_SQL)
    snprintf(sql_path, sizeof sql_path, "%s/simba_diff_%s.db", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag);
#endif
    if (side_open(&real, store, 0) < 0 || side_open(&ref, "reference", 1) < 0) return 1;
    printf("kit_diff %s: seed %llu, %ld steps\n", store, seed, steps);
    fflush(stdout);
    for (n = 0; n < steps && !diverged; n++) {
        step p;
        if (n % BLOCK == 0) {
            kind = (int)(n / BLOCK) % 4;
            ncont = kind == 0 ? 3 : kind == 3 ? 5 : kind + 3;
            if (block_begin(&real, (int)(n / BLOCK), plant ? "plant" : "diff") < 0 || block_begin(&ref, (int)(n / BLOCK), "diff") < 0)
                return 1;
        }
        p = make_step((int)n);
        if (run_step(&real, &p, a, sizeof a) < 0 || run_step(&ref, &p, b, sizeof b) < 0) {
            fprintf(stderr, "kit_diff %s: seed %llu step %ld (%s): a request failed\n  %s: %s\n  reference: %s\n", store, seed, n,
                    kinds[kind], store, a, b);
            return 1;
        }
        if (!quiet && getenv("SIMBA_DIFF_TRACE")) printf("%ld %s\n", n, b);
        if (strcmp(a, b) != 0) {
            printf("kit_diff %s: DIVERGED at seed %llu step %ld (%s, replay: --seed %llu --steps %ld)\n  %-9s %s\n  reference %s\n",
                   store, seed, n, kinds[kind], seed, n + 1, store, a, b);
            diverged = 1;
        }
    }
    if (!diverged) printf("kit_diff %s: %ld steps equal to the reference (seed %llu)\n", store, steps, seed);
    if (plant) {
        printf("kit_diff plant: %s\n", diverged ? "the planted reader beside a waiting writer is caught" : "NOT caught");
        return diverged ? 0 : 1;
    }
    return diverged;
}
