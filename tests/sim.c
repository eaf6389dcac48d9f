/* sim.c -- deterministic simulation of simba: the real simba.h and the memory store of
 * simba_memory.h, run by N simulated processes over a simulated network, with faults, all
 * drawn from one 64-bit seed. A failing seed replays exactly: `make sim SEED=N`.
 *
 *   sim                      100,000 seeds (2 worker processes), summary on stdout
 *   sim --seeds N [--from S] N seeds from S; progress on stderr with --progress
 *   sim --seed N [--trace]   one seed; --trace prints every traced event
 *   sim --stop               stop at the first violation (the mutant runs)
 *   sim --old-requests       lift the restart assumption (ASSUMPTIONS)
 *
 * THE WORLD
 *   One global clock G (ms) orders every event (a heap of events by time, then by the order
 *   they were made). Each process has its own simba_loop with an injected clock
 *   L(G) = offset + G + G * ppm / 10^6 (|ppm| <= SIM_DRIFT_PPM), an injected random source,
 *   a loop allocator that counts, and a backend of its own (the "sim" vt below) that sends
 *   requests through the network to the store. The store is the memory store
 *   (simba_memory.h): the sim runs each request with the store's own code (simba__mexec) at
 *   the moment the request arrives, on the store clock G, and carries its answer and its
 *   pushes back through the network. A process is polled when its loop asks to be (the
 *   wait simba_poll returns, or the loop's timer hook after an application's call, turned
 *   into G through its clock) and when a message reaches it. The poll's time budget is
 *   off (real time would make runs differ); some processes get a step bound instead.
 *   The application: each process runs 1-3 services on 1-3 mutexes (contenders that stop,
 *   start, proclaim a new value, yield and are freed and made again, each with a value of
 *   its own that names it; Lockers that try, hold, unlock and give up,
 *   Schedulers that stop and start, observers), now and then stopping from a callback;
 *   half the services keep their contender id across restarts.
 *
 * THE NETWORK
 *   Requests of one process reach the store in the order sent, answers come back in the
 *   order made (a connection); pushes travel on their own and overtake answers or each
 *   other. Delays: a few ms, with rare spikes; during faults much more. A lost request
 *   or answer (a lossy episode, a partition, a store restart) is never answered: the
 *   backend completes it with SIMBA_ETIMEDOUT at its deadline. A duplicated request runs
 *   twice in a row at the store; a duplicated answer is dropped by the backend (it matches
 *   answers to requests by id).
 *
 * FAULTS (at least 10 a run, in its first part; the last 30 s are quiet so that liveness
 * can be checked)
 *   crash        the process's network is cut, then its loop is freed: nothing it sends
 *                afterwards (the releases of simba_loop_free) reaches the store; restarts
 *   stop         services stopped and freed through the API, loop freed later; restarts
 *   pause        the process is not polled (its clock runs on)
 *   partition    nothing to or from the process
 *   lossy-net    requests, answers and pushes dropped and duplicated, long delays
 *   late-answers answers take up to twice the lease
 *   store-stall  the store answers nothing, then everything at once
 *   data-loss    simba_memstore_lose: the store forgets (Redis without persistence)
 *   failover     the store comes back as a replica that missed its last writes (Redis);
 *                PostgreSQL's crash with asynchronous commits is the same loss
 *   store-restart connections cut; Redis loses its data, SQLite and PostgreSQL lose what
 *                was not committed (requests in their transaction), then the store is down
 *   session-expiry ZooKeeper: a partition longer than the session: the store drops the
 *                process's ownerships and places, the process hears SIMBA_EV_LOST
 *
 * PERSONALITIES (a mode of the store and the backend, as the headers document)
 *   redis   asked lease; data loss, failover and restarts, quarantine by the store
 *   zk      session lease (SIMBA_LEASE_SESSION): an owner is told ttl T/2, transition T from
 *           its send; partitions raise SIMBA_EV_DISCONNECTED, then RESET or LOST + RESET.
 *           The store keeps an owner's record T after its last request, where ZooKeeper's
 *           I/O thread would keep the session of a paused owner alive: the same for
 *           safety, stricter for liveness
 *   sqlite  requests run at their commit, one transaction at a time; a crash loses the
 *           requests not yet committed (their answers never come); no network partitions
 *   pg      commits may come late; a crash loses the last commits (a replica's state, with
 *           the quarantine and the fence floor of simba_pg.h CRASHES)
 *
 * NAMES (mutex m0 is always a mutex; each other one, drawn per run: a mutex, a semaphore of
 * 2 or 3 permits, or a read-write lock whose contenders and lockers are readers or writers
 * at random; a Scheduler is a single leader, so none runs on a semaphore)
 *
 * INVARIANTS (checked at the global time G after every poll, application call and fault:
 * a belief begins only there and time only ends beliefs, so no overlap goes unseen)
 *   one-owner    at most N believers per name (1 for a mutex or a read-write lock's
 *                writer; never a writer with anyone): simba_is_owner() of contenders,
 *                simba_locker_is_owner(), simba_scheduler_is_owner(), over all live processes
 *   fence        a new ownership's fence is above every fence of that mutex before it; on
 *                a name with several holders, above every earlier grant's at the store
 *   liveness     with no believer, a live waiter and no store-wide fault, someone believes
 *                within 2(ttl+transition) + the queue's liveness (ttl + transition + jitter
 *                + 1 s) + backoff max + timeout + slack
 *   fifo         every grant obeys the grant rule (simba.h FAIRNESS; SEMAPHORES AND
 *                READ-WRITE LOCKS): a mutex's goes to the oldest live waiter, a permit to
 *                one of the first N - holders, a writer only with nobody holding and at
 *                the head, a reader only with no writer and only readers ahead, checked
 *                against the sim's own model of the queue
 *   tenure       a Scheduler's work runs only while its process is the one believer
 *   on-lost      every lapse of a held Locker fires on_lost, by the poll that sees it
 *   callbacks    none after the handle's free; on_acquired / on_released alternate
 *   leak         every loop frees all it allocated; the store too at the end
 *   value        every owner a contender or observer is shown (on_owner) carries a value
 *                that this owner stored with that very fence (with its grant or by
 *                simba_set_value under it: a value belongs to the fence that set it); and
 *                once a service has shown an owner, it never shows one of an older tenure
 *                (never the value of a contender that no longer leads after the new one's;
 *                on a name with several holders the one shown may be an older grant)
 *   busy         time moves: at most SIM_BUSY_MAX events and polls in one simulated second,
 *                and SIM_SEED_REAL_S real seconds for the whole seed (a poll that never
 *                returns is caught by SIGALRM); either ends the seed, named like any other
 *
 * ASSUMPTIONS (what the documented guarantees rest on; outside them a violation is expected)
 *   - clocks within the drift bound below, never stepped;
 *   - one connection per process incarnation keeps its requests in order (TCP);
 *   - a process that restarts with the same contender id gets no request of its earlier
 *     incarnation executed after its own (that connection is gone): a RELEASE carries no
 *     fence, so such a late release would free the new tenure (--old-requests shows it).
 *
 * DRIFT BOUND (an assumption of the one-owner invariant)
 *   Process clocks run at 1 +- SIM_DRIFT_PPM / 10^6 of the store's clock (2 %), and never
 *   step. An owner stops believing at its local ttl_at, counted from its send; the store
 *   grants another no earlier than ttl + transition after that send, so a clock slow by a
 *   fraction r is safe while ttl * r / (1 - r) < transition. Runs draw transition >= ttl / 20
 *   (5 %, more than twice what 2 % needs). Pauses of any length are within the assumption.
 *
 * NEW PRIMITIVES (value and yield, semaphores, read-write locks) plug in as service kinds:
 * a case in svc_create (make and start), svc_action (what the application does with it),
 * svc_free and svc_believes (its belief and fence); the store side is the memory store's.
 * The invariants then apply to them; one with N holders counts believers against N.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS: the workers' shared stop flag */
#include <stdint.h>
#include <stdlib.h>

/* The store's allocations (SIMBA_MALLOC) are counted: none may be left at the end. */
static long sim_store_allocs;
static void *sim_malloc(size_t n) {
    void *p = malloc(n);
    if (p) sim_store_allocs++;
    return p;
}
static void sim_free(void *p) {
    if (p) sim_store_allocs--;
    free(p);
}
#define SIMBA_MALLOC(n) sim_malloc(n)
#define SIMBA_FREE(p) sim_free(p)
#define SIMBA_IMPLEMENTATION
#include "../simba_memory.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SIM_DRIFT_PPM 20000 /* 2 % */
/* A seed's bounds: events and polls in one simulated second (the busiest second of any
   healthy seed has far fewer: `sim` prints it), and real seconds for the whole seed (a
   healthy seed takes milliseconds). Past either, time has stopped moving for some loop. */
#define SIM_BUSY_MAX 20000
#define SIM_SEED_REAL_S 10
#define MAXP 8              /* processes */
#define MAXS 3              /* services per process */
#define MAXM 3              /* mutexes */
#define MAXQ 64             /* the fifo model's queue per mutex */
#define IDLEN 32
#define NAMELEN 16
#define QUIET_TAIL 30000    /* ms without faults at the end of a run */
#define NEVER INT64_MAX
#define SIMV 48             /* a value: "<contender id>#<number>", unique in the run */

/* ---- random numbers (splitmix64: one stream per purpose, all from the seed) ------------ */

typedef struct rng { uint64_t s; } rng;
static uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* uniform in [lo, hi] */
static int64_t rng_range(rng *r, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}
static int rng_chance(rng *r, double p) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0) < p; }
static rng rng_fork(rng *r) {
    rng n;
    n.s = rng_next(r);
    return n;
}

/* ---- kinds ---------------------------------------------------------------------------- */

enum { PERS_REDIS, PERS_ZK, PERS_SQLITE, PERS_PG, PERS_N };
static const char *const pers_name[PERS_N] = {"redis", "zk", "sqlite", "pg"};

enum {
    F_CRASH, F_STOP, F_PAUSE, F_PARTITION, F_LOSSY, F_SLOW, F_STALL, F_LOSS, F_FAILOVER, F_RESTART, F_EXPIRY, F_N
};
static const char *const fault_name[F_N] = {"crash",     "stop",        "pause",     "partition", "lossy-net",     "late-answers",
                                            "store-stall", "data-loss", "failover", "store-restart", "session-expiry"};
/* faults a personality draws (session expiry follows from long partitions) */
static const unsigned pers_faults[PERS_N] = {
    1u << F_CRASH | 1u << F_STOP | 1u << F_PAUSE | 1u << F_PARTITION | 1u << F_LOSSY | 1u << F_SLOW | 1u << F_STALL |
        1u << F_LOSS | 1u << F_FAILOVER | 1u << F_RESTART,
    1u << F_CRASH | 1u << F_STOP | 1u << F_PAUSE | 1u << F_PARTITION | 1u << F_LOSSY | 1u << F_SLOW | 1u << F_STALL,
    1u << F_CRASH | 1u << F_STOP | 1u << F_PAUSE | 1u << F_SLOW | 1u << F_STALL | 1u << F_RESTART,
    1u << F_CRASH | 1u << F_STOP | 1u << F_PAUSE | 1u << F_PARTITION | 1u << F_LOSSY | 1u << F_SLOW | 1u << F_STALL |
        1u << F_RESTART,
};

enum { K_CONTEND, K_LOCKER, K_SCHED, K_OBSERVE };
static const char *const kind_name[] = {"contender", "locker", "scheduler", "observer"};

enum { INV_ONE_OWNER, INV_FENCE, INV_LIVENESS, INV_FIFO, INV_TENURE, INV_ON_LOST, INV_CALLBACK, INV_LEAK, INV_POLL, INV_VALUE, INV_BUSY, INV_N };
static const char *const inv_name[INV_N] = {"one-owner", "fence", "liveness", "fifo", "tenure", "on-lost", "callbacks", "leak", "poll", "value", "busy"};

/* ---- the world ---------------------------------------------------------------------- */

struct proc;
struct client;

/* What a service's callbacks get as user_data; lives for the whole run (freed is set when
   the service goes), so that a callback after a free is seen, not a crash. */
typedef struct handle {
    struct proc *p;
    int kind, mutex, freed, told;
    int believing;
    uint64_t fence;  /* of the latest belief */
    int lk_state;    /* locker, the sim's side: idle, want, held, lost */
    int64_t until;   /* locker: end of the hold or of the wait */
    int sched_on;    /* scheduler started */
    uint64_t seen_fence; /* the greatest fence of an owner on_owner has shown */
    int shared;      /* a reader of a read-write lock */
    char id[IDLEN];
} handle;
/* LK_LAPSED: unlocked after the lease lapsed (SIMBA_ELOST); on_lost is due from the next poll */
enum { LK_IDLE, LK_WANT, LK_HELD, LK_LOST, LK_LAPSED };

typedef struct svcslot {
    int kind, mutex, stable, step_down;
    handle *h;
    simba_service *svc; /* contender or observer */
    simba_locker *lk;
    simba_scheduler *sc;
    uint32_t gen;       /* of its action events */
    int64_t period;     /* scheduler */
    int strategy;
} svcslot;

typedef struct proc {
    int idx, up, stopping, inc;
    int64_t off, ppm, paused_until, part_until;
    uint32_t part_gen;
    rng r_loop, r_app;
    simba_loop *loop;
    struct client *cl;
    long allocs;
    int64_t poll_at;
    uint32_t poll_gen;
    int max_steps, nsvc;
    svcslot s[MAXS];
} proc;

typedef struct msg {
    struct msg *next;
    int kind; /* M_REQ, M_REP, M_EV */
    struct client *cl;
    uint64_t id;
    uint32_t epoch;
    simba_op op;
    int renew, evkind, all_mutexes, has_contender, permits, shared;
    int64_t ttl, tr, live;
    char mutex[NAMELEN];
    char contender[IDLEN];
    char owner[IDLEN];
    simba_reply rep;
    uint64_t fence;             /* a request's (SET_VALUE, YIELD) */
    size_t value_len;           /* a request's value, or the answer's / push's */
    unsigned char value[SIMV];
} msg;
enum { M_REQ, M_REP, M_EV };

typedef struct pend { simba_req *req; uint64_t id; int64_t deadline; } pend;

/* The sim backend of one process incarnation; the store's client record comes first. It
   lives to the end of the run: the store's queue may still point at it. */
typedef struct client {
    simba__mclient mc;
    proc *p;
    int dead, zk_lost;
    simba_backend *be;
    pend *pend;
    int npend, cappend;
    msg *in_head, *in_tail;
    int64_t req_floor, rep_floor;
    uint64_t next_id;
    struct client *all_next;
} client;

typedef struct qent { char id[IDLEN]; int64_t expires; int shared; } qent;

typedef struct mutexinfo {
    char name[NAMELEN];
    int64_t ttl, tr, bound;
    uint64_t max_fence;
    uint64_t max_grant; /* the greatest fence the store granted */
    int permits, rw;    /* N (1: a mutex or a read-write lock); rw: a read-write lock */
    int64_t gap_since;
    qent q[MAXQ];
    int nq;
    /* the replica's copy (failover) */
    int snap_has;
    char snap_owner[IDLEN];
    int64_t snap_acq, snap_ttl, snap_tr;
    uint64_t snap_fence;
    size_t snap_value_len;
    unsigned char snap_value[SIMBA_VALUE_MAX];
} mutexinfo;

/* A value the application made (its number is in it): the fences the store kept it with. */
typedef struct valinfo { uint64_t fences[8]; int nf, mutex; } valinfo;

typedef struct ev { int64_t at; uint64_t seq; int type, a, b; uint32_t gen; void *ptr; } ev;
enum { E_POLL, E_STORE, E_COMMIT, E_PROC, E_ACTION, E_FAULT, E_HEAL, E_RESTART, E_FINISH, E_SNAPSHOT, E_ZK_DISC, E_ZK_EXPIRE, E_UNSTALL, E_END };

typedef struct tr { int64_t g; int proc, code, mx; int64_t a, b; char s[IDLEN]; } trent;
enum { T_EXEC, T_BELIEF, T_UNBELIEF, T_FAULT, T_HEAL, T_ACTION, T_TIMEOUT, T_CB, T_LOST };
#define TRACE_N 4096

typedef struct stats {
    uint64_t seeds, sim_ms, faults[F_N], checks[INV_N], violations, ownerships, requests, dropped, duplicated, pers[PERS_N];
    uint64_t work_runs, min_faults, min_procs, min_ms;
    uint64_t value_sets, yields, yields_passed;
    uint64_t sem_grants, reader_grants, writer_grants; /* grants on semaphores, read-write locks */
    uint64_t busiest; /* the most events and polls in one simulated second of any seed */
} stats;

typedef struct world {
    uint64_t seed;
    int pers, np, nm, trace_all, violated, stop_first, old_requests;
    int64_t dur, timeout, zk_T, fault_clear_at;
    int run_faults;
    int64_t G;
    int64_t busy_sec; /* the simulated second busy_n counts events and polls of */
    uint64_t busy_n;
    int busy;         /* over SIM_BUSY_MAX: time no longer moves, the seed ends */
    rng r_net, r_fault, r_store;
    ev *heap;
    int nheap, capheap;
    uint64_t seq;
    proc p[MAXP];
    mutexinfo m[MAXM];
    simba_memstore *st;
    int store_down;
    int64_t stall_until, last_commit;
    msg *stall_head, *stall_tail;
    uint32_t store_epoch, net_epoch;
    int64_t lossy_until, slow_until, slow_max, delay_base, delay_jit;
    double drop_p, dup_p;
    client *clients;
    handle *handles;
    int nhandles, caphandles;
    msg *free_msgs;
    valinfo *vals;
    int nvals, capvals;
    trent trace[TRACE_N];
    uint64_t ntrace;
    stats *sx;
    char first[256];
} world;
static world *W;

/* ---- trace and violations ------------------------------------------------------------ */

static void trace_print_one(const struct tr *t);
static void trace_mx(int proc, int code, int mx, int64_t a, int64_t b, const char *s) {
    trent *t = &W->trace[W->ntrace++ % TRACE_N];
    t->g = W->G;
    t->mx = mx;
    t->proc = proc;
    t->code = code;
    t->a = a;
    t->b = b;
    if (s) simba__copy(t->s, sizeof t->s, s); else t->s[0] = 0;
    if (W->trace_all) trace_print_one(t);
}
static void trace(int proc, int code, int64_t a, int64_t b, const char *s) { trace_mx(proc, code, -1, a, b, s); }

static const char *op_name(int op) {
    return op == SIMBA_OP_ACQUIRE       ? "acquire"
           : op == SIMBA_OP_RELEASE     ? "release"
           : op == SIMBA_OP_SET_VALUE   ? "set_value"
           : op == SIMBA_OP_YIELD       ? "yield"
                                        : "read";
}

static void trace_print_one(const struct tr *t) {
    char who[16];
    if (t->proc >= 0) snprintf(who, sizeof who, "p%d", t->proc); else snprintf(who, sizeof who, "--");
    switch (t->code) {
    case T_EXEC:
        fprintf(stderr, "  %8lld %-3s store runs %s of m%d%s: owner %s fence %lld\n", (long long)t->g, who, op_name((int)(t->a & 15)), t->mx,
                t->a & 16 ? " (refused)" : "", t->s[0] ? t->s : "-", (long long)t->b);
        break;
    case T_BELIEF: fprintf(stderr, "  %8lld %-3s %s believes it owns m%lld, fence %lld\n", (long long)t->g, who, t->s, (long long)t->a, (long long)t->b); break;
    case T_UNBELIEF: fprintf(stderr, "  %8lld %-3s %s stops believing it owns m%lld\n", (long long)t->g, who, t->s, (long long)t->a); break;
    case T_FAULT: fprintf(stderr, "  %8lld %-3s fault %s (%lld ms)\n", (long long)t->g, who, fault_name[t->a], (long long)t->b); break;
    case T_HEAL: fprintf(stderr, "  %8lld %-3s end of %s\n", (long long)t->g, who, fault_name[t->a]); break;
    case T_ACTION: fprintf(stderr, "  %8lld %-3s %s: %s\n", (long long)t->g, who, t->s, t->a == 0 ? "starts" : t->a == 1 ? "stops" : t->a == 2 ? "locks" : t->a == 3 ? "unlocks" : t->a == 4 ? "gives up" : t->a == 5 ? "freed" : t->a == 7 ? "tries" : t->a == 8 ? "proclaims" : t->a == 9 ? "yields" : "restarts"); break;
    case T_TIMEOUT: fprintf(stderr, "  %8lld %-3s a request timed out\n", (long long)t->g, who); break;
    case T_CB: fprintf(stderr, "  %8lld %-3s %s: %s (fence %lld)\n", (long long)t->g, who, t->s, t->a == 1 ? "on_acquired" : t->a == 2 ? "on_released" : "work", (long long)t->b); break;
    case T_LOST: fprintf(stderr, "  %8lld %-3s %s: on_lost\n", (long long)t->g, who, t->s); break;
    default: break;
    }
}

/* The last events of the processes involved (mask) or of the mutex (mx), and the
   store-wide ones. */
static int trace_wanted(const trent *t, unsigned mask, int mx) {
    if (t->proc < 0) return 1;
    if (mx >= 0) return t->mx == mx || (t->mx < 0 && (mask & (1u << t->proc)));
    return (mask & (1u << t->proc)) != 0;
}
static void trace_dump(unsigned mask, int mx, int max) {
    uint64_t n = W->ntrace, start = n > TRACE_N ? n - TRACE_N : 0, i;
    int shown = 0;
    uint64_t from = start;
    for (i = n; i > start && shown < max; i--) {
        const trent *t = &W->trace[(i - 1) % TRACE_N];
        if (trace_wanted(t, mask, mx)) { shown++; from = i - 1; }
    }
    for (i = from; i < n; i++) {
        const trent *t = &W->trace[i % TRACE_N];
        if (trace_wanted(t, mask, mx)) trace_print_one(t);
    }
}

static void violation_mx(int inv, unsigned mask, int mx, const char *fmt, va_list ap) {
    char buf[200];
    vsnprintf(buf, sizeof buf, fmt, ap);
    W->sx->violations++;
    if (W->violated++ == 0) {
        snprintf(W->first, sizeof W->first, "%s: %s", inv_name[inv], buf);
        fprintf(stderr, "VIOLATION seed %llu (%s, %d processes): %s: %s at %lld ms\n", (unsigned long long)W->seed, pers_name[W->pers], W->np,
                inv_name[inv], buf, (long long)W->G);
        fprintf(stderr, "  trace (ms, process, event), the processes involved:\n");
        trace_dump(mask, mx, 40);
        fprintf(stderr, "  replay: make sim SEED=%llu\n", (unsigned long long)W->seed);
    }
}
static void violation(int inv, unsigned mask, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    violation_mx(inv, mask, -1, fmt, ap);
    va_end(ap);
}
static void violation_on(int inv, int mx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    violation_mx(inv, 0, mx, fmt, ap);
    va_end(ap);
}

/* n more events or polls (by the processes in mask) at the global time G: past SIM_BUSY_MAX in
   one simulated second, a violation that ends the seed. */
static void busy_count(unsigned mask, uint64_t n) {
    if (W->G / 1000 != W->busy_sec) {
        W->busy_sec = W->G / 1000;
        W->busy_n = 0;
    }
    W->busy_n += n;
    if (W->busy_n > W->sx->busiest) W->sx->busiest = W->busy_n;
    W->sx->checks[INV_BUSY]++;
    if (W->busy_n > SIM_BUSY_MAX && !W->busy) {
        W->busy = 1;
        violation(INV_BUSY, mask, "%llu events and polls within simulated second %lld (bound %d): a loop asks to be polled at once, forever",
                  (unsigned long long)W->busy_n, (long long)W->busy_sec, SIM_BUSY_MAX);
    }
}

/* ---- the event heap --------------------------------------------------------------------- */

static int ev_less(const ev *a, const ev *b) { return a->at < b->at || (a->at == b->at && a->seq < b->seq); }
static void push(int64_t at, int type, int a, int b, uint32_t gen, void *ptr) {
    ev e;
    int i;
    if (W->nheap == W->capheap) {
        W->capheap = W->capheap ? W->capheap * 2 : 256;
        W->heap = (ev *)realloc(W->heap, (size_t)W->capheap * sizeof *W->heap);
        if (!W->heap) abort();
    }
    e.at = at < W->G ? W->G : at;
    e.seq = W->seq++;
    e.type = type;
    e.a = a;
    e.b = b;
    e.gen = gen;
    e.ptr = ptr;
    i = W->nheap++;
    while (i > 0 && ev_less(&e, &W->heap[(i - 1) / 2])) {
        W->heap[i] = W->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    W->heap[i] = e;
}
static ev pop(void) {
    ev top = W->heap[0], last = W->heap[--W->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= W->nheap) break;
        if (c + 1 < W->nheap && ev_less(&W->heap[c + 1], &W->heap[c])) c++;
        if (!ev_less(&W->heap[c], &last)) break;
        W->heap[i] = W->heap[c];
        i = c;
    }
    if (W->nheap > 0) W->heap[i] = last;
    return top;
}

/* ---- clocks, random sources, allocators of the processes ---------------------------------- */

static int64_t local_at(const proc *p, int64_t g) { return p->off + g + g * p->ppm / 1000000; }
static int64_t proc_clock(void *u) { return local_at((const proc *)u, W->G); }
static uint32_t proc_rand(void *u) { return (uint32_t)(rng_next(&((proc *)u)->r_loop) >> 32); }
/* first global time at which the process's clock reads at least t */
static int64_t global_at(const proc *p, int64_t t) {
    int64_t d = t - local_at(p, W->G), g;
    if (d <= 0) return W->G;
    g = W->G + (d * 1000000) / (1000000 + p->ppm);
    while (local_at(p, g) < t) g++;
    return g;
}
static void *proc_alloc(void *u, size_t n) {
    void *q = malloc(n);
    if (q) ((proc *)u)->allocs++;
    return q;
}
static void proc_free(void *u, void *q) {
    if (q) ((proc *)u)->allocs--;
    free(q);
}

static void schedule_poll(proc *p, int64_t at) {
    if (!p->up) return;
    if (at < p->paused_until) at = p->paused_until;
    if (at < p->poll_at) p->poll_at = at; /* polls are not in the heap: see run_seed */
}
/* The loop's timer hook: a call outside the poll (start, stop, unlock, free) wants a poll
   within wait_ms of the process's clock. */
static void proc_timer_hook(void *u, int64_t wait_ms) {
    proc *p = (proc *)u;
    schedule_poll(p, global_at(p, local_at(p, W->G) + wait_ms));
}

/* ---- the network ------------------------------------------------------------------------- */

static msg *msg_new(int kind, client *c) {
    msg *m = W->free_msgs;
    if (m) W->free_msgs = m->next; else if (!(m = (msg *)malloc(sizeof *m))) abort();
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->cl = c;
    m->epoch = W->net_epoch;
    return m;
}
static void msg_free(msg *m) {
    m->next = W->free_msgs;
    W->free_msgs = m;
}

static int64_t net_delay(int answer) {
    int64_t d = W->delay_base + rng_range(&W->r_net, 0, W->delay_jit);
    if (rng_chance(&W->r_net, 0.01)) d += rng_range(&W->r_net, 0, 40);
    if (W->G < W->lossy_until && rng_chance(&W->r_net, 0.2)) d += rng_range(&W->r_net, 0, W->m[0].ttl);
    if (answer && W->G < W->slow_until) d += rng_range(&W->r_net, 0, W->slow_max);
    return d;
}
static int net_cut(const proc *p) { return !p->up || p->cl->dead || W->G < p->part_until; }
static int net_drop(void) {
    if (W->G < W->lossy_until && rng_chance(&W->r_net, W->drop_p)) { W->sx->dropped++; return 1; }
    return 0;
}
static int net_dup(void) {
    if (W->G < W->lossy_until && rng_chance(&W->r_net, W->dup_p)) { W->sx->duplicated++; return 1; }
    return 0;
}

/* A message to a process: answers keep their connection's order, pushes do not. */
static void send_to_proc(msg *m) {
    client *c = m->cl;
    int64_t at = W->G + net_delay(m->kind == M_REP);
    if (m->kind == M_REP) {
        if (at < c->rep_floor) at = c->rep_floor;
        c->rep_floor = at;
    }
    push(at, E_PROC, 0, 0, 0, m);
}

static void send_req(client *c, const simba_req *r, uint64_t id) {
    msg *m;
    int64_t at;
    int copies, i;
    if (net_cut(c->p) || net_drop()) return;
    copies = net_dup() ? 2 : 1;
    at = W->G + net_delay(0);
    if (at < c->req_floor) at = c->req_floor;
    c->req_floor = at;
    for (i = 0; i < copies; i++) {
        m = msg_new(M_REQ, c);
        m->id = id;
        m->op = r->op;
        m->renew = r->renew;
        m->ttl = r->ttl_ms;
        m->tr = r->transition_ms;
        m->live = r->live_ms;
        m->fence = r->fence;
        m->permits = r->permits;
        m->shared = r->shared;
        if (r->value_len > SIMV) abort(); /* the sim's values are short */
        m->value_len = r->value_len;
        if (r->value_len) memcpy(m->value, r->value, r->value_len);
        simba__copy(m->mutex, sizeof m->mutex, r->mutex);
        simba__copy(m->contender, sizeof m->contender, r->contender);
        push(at, E_STORE, 0, 0, 0, m);
    }
}

/* ---- the sim backend (one per process incarnation) ----------------------------------------- */

static simba_result cl_submit(void *impl, simba_req *req) {
    client *c = (client *)impl;
    pend *pd;
    if (c->npend == c->cappend) {
        c->cappend = c->cappend ? c->cappend * 2 : 8;
        c->pend = (pend *)realloc(c->pend, (size_t)c->cappend * sizeof *c->pend);
        if (!c->pend) abort();
    }
    pd = &c->pend[c->npend++];
    pd->req = req;
    pd->id = ++c->next_id;
    pd->deadline = simba__add(req->sent_at, W->timeout);
    W->sx->requests++;
    send_req(c, req, pd->id);
    return SIMBA_OK;
}

static void cl_complete(client *c, int i, const simba_reply *rep) {
    simba_req *r = c->pend[i].req;
    c->pend[i] = c->pend[--c->npend];
    simba_req_done(r, rep);
}

static void cl_process(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    client *c = (client *)impl;
    int i;
    (void)ready;
    (void)n;
    (void)flags;
    while (c->in_head) {
        msg *m = c->in_head;
        c->in_head = m->next;
        if (!c->in_head) c->in_tail = NULL;
        if (m->kind == M_REP) {
            for (i = 0; i < c->npend; i++)
                if (c->pend[i].id == m->id) break;
            if (i < c->npend) {
                m->rep.owner = m->owner[0] ? m->owner : NULL;
                m->rep.value = m->value_len ? m->value : NULL;
                m->rep.value_len = m->value_len;
                cl_complete(c, i, &m->rep);
            }
        } else {
            m->rep.owner = m->owner;
            m->rep.value = m->value_len ? m->value : NULL;
            m->rep.value_len = m->value_len;
            simba_backend_event(c->be, (simba_event_kind)m->evkind, m->all_mutexes ? NULL : m->mutex, m->has_contender ? m->contender : NULL,
                                &m->rep);
        }
        msg_free(m);
    }
    for (i = 0; i < c->npend;) {
        if (c->pend[i].deadline <= now) {
            simba_reply rep;
            memset(&rep, 0, sizeof rep);
            rep.rc = SIMBA_ETIMEDOUT;
            rep.errmsg = "sim: no answer in time";
            trace(c->p->idx, T_TIMEOUT, 0, 0, NULL);
            cl_complete(c, i, &rep);
        } else {
            i++;
        }
    }
}

static int64_t cl_deadline(void *impl) {
    client *c = (client *)impl;
    int64_t at = NEVER;
    int i;
    for (i = 0; i < c->npend; i++)
        if (c->pend[i].deadline < at) at = c->pend[i].deadline;
    return at;
}
static simba_result cl_watch(void *impl, const char *mutex) { return simba__mem_watch(&((client *)impl)->mc, mutex); }
static void cl_unwatch(void *impl, const char *mutex) { simba__mem_unwatch(&((client *)impl)->mc, mutex); }

static void client_forget_watches(client *c) {
    size_t i;
    for (i = 0; i < c->mc.watched.nb; i++) {
        simba__hnode *n = c->mc.watched.b[i], *nn;
        for (; n; n = nn) { nn = n->hnext; SIMBA_FREE(n); }
    }
    SIMBA_FREE(c->mc.watched.b);
    memset(&c->mc.watched, 0, sizeof c->mc.watched);
}

static void cl_destroy(void *impl) {
    client *c = (client *)impl;
    simba_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.rc = SIMBA_ECLOSED;
    while (c->npend > 0) cl_complete(c, c->npend - 1, &rep);
    while (c->in_head) {
        msg *m = c->in_head;
        c->in_head = m->next;
        msg_free(m);
    }
    c->in_tail = NULL;
    c->dead = 1;
    c->be = NULL;
    client_forget_watches(c); /* the store pushes nothing more to it */
}

static const simba_backend_vt sim_vt_asked = {sizeof(simba_backend_vt), "sim", cl_submit, NULL, cl_process, cl_deadline,
                                              cl_watch, cl_unwatch, cl_destroy, SIMBA_LEASE_ASKED, NULL, NULL, NULL};
static const simba_backend_vt sim_vt_session = {sizeof(simba_backend_vt), "sim-zk", cl_submit, NULL, cl_process, cl_deadline,
                                                cl_watch, cl_unwatch, cl_destroy, SIMBA_LEASE_SESSION, NULL, NULL, NULL};

static client *client_new(proc *p) {
    client *c = (client *)calloc(1, sizeof *c);
    simba_memstore *st = W->st;
    if (!c) abort();
    c->p = p;
    c->mc.st = st;
    c->mc.loop = p->loop;
    c->mc.pipefd[0] = c->mc.pipefd[1] = -1; /* the store's wake-ups go nowhere: the sim delivers */
    c->mc.next = st->clients;
    if (st->clients) st->clients->prev = &c->mc;
    st->clients = &c->mc;
    c->all_next = W->clients;
    W->clients = c;
    return c;
}

/* Deliver a message that reached its process. */
static void proc_receive(msg *m) {
    client *c = m->cl;
    proc *p = c->p;
    if (c->dead || p->cl != c || m->epoch != W->net_epoch || W->G < p->part_until) { msg_free(m); return; }
    m->next = NULL;
    if (c->in_tail) c->in_tail->next = m; else c->in_head = m;
    c->in_tail = m;
    schedule_poll(p, W->G);
}

/* A push the sim backend raises itself (ZooKeeper's connection state). */
static void proc_event(client *c, int kind) {
    msg *m = msg_new(M_EV, c);
    m->evkind = kind;
    m->all_mutexes = 1;
    m->next = NULL;
    if (c->in_tail) c->in_tail->next = m; else c->in_head = m;
    c->in_tail = m;
    schedule_poll(c->p, W->G);
}

/* ---- the store ------------------------------------------------------------------------- */

static int mutex_index(const char *name) {
    int i;
    for (i = 0; i < W->nm; i++)
        if (strcmp(W->m[i].name, name) == 0) return i;
    return -1;
}

/* Pushes the store queued for its clients go out through the network. */
static void store_drain(void) {
    simba__mclient *mc;
    for (mc = W->st->clients; mc; mc = mc->next) {
        client *c = (client *)(void *)mc;
        simba__mevent *e = mc->inbox, *en;
        mc->inbox = mc->inbox_tail = NULL;
        for (; e; e = en) {
            en = e->next;
            if (!net_cut(c->p) && c->p->cl == c && !net_drop()) {
                int k, copies = net_dup() ? 2 : 1;
                for (k = 0; k < copies; k++) {
                    msg *m = msg_new(M_EV, c);
                    m->evkind = e->kind;
                    simba__copy(m->mutex, sizeof m->mutex, e->mutex);
                    m->has_contender = e->has_contender;
                    simba__copy(m->contender, sizeof m->contender, e->contender);
                    m->rep = e->rep;
                    simba__copy(m->owner, sizeof m->owner, e->owner);
                    m->rep.owner = NULL;
                    if (e->rep.value_len > SIMV) abort();
                    m->value_len = e->rep.value_len;
                    if (m->value_len) memcpy(m->value, e->rep.value, m->value_len);
                    m->rep.value = NULL;
                    send_to_proc(m);
                }
            }
            SIMBA_FREE(e);
        }
    }
}

static void q_purge(mutexinfo *mi, int64_t now) {
    int i, k = 0;
    for (i = 0; i < mi->nq; i++)
        if (!(mi->q[i].expires < now)) mi->q[k++] = mi->q[i];
    mi->nq = k;
}
static int q_find(const mutexinfo *mi, const char *id) {
    int i;
    for (i = 0; i < mi->nq; i++)
        if (strcmp(mi->q[i].id, id) == 0) return i;
    return -1;
}
static void q_remove(mutexinfo *mi, int i) {
    memmove(&mi->q[i], &mi->q[i + 1], (size_t)(mi->nq - i - 1) * sizeof mi->q[0]);
    mi->nq--;
}

/* The number of an application's value ("<id>#<n>"), -1 if it is not one. */
static int value_num(const unsigned char *v, size_t n) {
    char buf[SIMV + 1];
    const char *h;
    if (!v || n == 0 || n > SIMV) return -1;
    memcpy(buf, v, n);
    buf[n] = 0;
    if (strlen(buf) != n || !(h = strrchr(buf, '#'))) return -1;
    n = (size_t)atoi(h + 1);
    return (int)n < W->nvals ? (int)n : -1;
}
/* The store kept value v with fence f. */
static void value_stored(const unsigned char *v, size_t n, uint64_t f) {
    int k = value_num(v, n), i;
    valinfo *vi;
    if (k < 0) return;
    vi = &W->vals[k];
    for (i = 0; i < vi->nf; i++)
        if (vi->fences[i] == f) return;
    vi->fences[vi->nf++ % 8] = f;
}
/* A new value of the application, for mutex mx, written into out (SIMV bytes). */
static size_t value_make(const char *id, int mx, unsigned char *out) {
    char buf[SIMV + 16];
    int n;
    if (W->nvals == W->capvals) {
        W->capvals = W->capvals ? W->capvals * 2 : 256;
        W->vals = (valinfo *)realloc(W->vals, (size_t)W->capvals * sizeof *W->vals);
        if (!W->vals) abort();
    }
    memset(&W->vals[W->nvals], 0, sizeof W->vals[0]);
    W->vals[W->nvals].mutex = mx;
    n = snprintf(buf, sizeof buf, "%s#%d", id, W->nvals++);
    if (n <= 0 || n > SIMV) abort();
    memcpy(out, buf, (size_t)n);
    return (size_t)n;
}

/* The model's queue: join the back, or refresh the place. */
static void q_join(mutexinfo *mi, const char *id, int shared, int64_t expires) {
    int i = q_find(mi, id);
    if (i >= 0) {
        mi->q[i].expires = expires;
        mi->q[i].shared = shared;
    } else if (mi->nq < MAXQ) {
        simba__copy(mi->q[mi->nq].id, IDLEN, id);
        mi->q[mi->nq].expires = expires;
        mi->q[mi->nq].shared = shared;
        mi->nq++;
    }
}

/* Run one request with the store's own code, checking each grant against the sim's model
   of the wait queue (FAIRNESS and SEMAPHORES AND READ-WRITE LOCKS in simba.h). */
static void store_exec(client *c, simba_op op, const char *mutex, const char *contender, int renew, int64_t ttl, int64_t tr,
                       int64_t live, uint64_t fence, const unsigned char *value, size_t value_len, int permits, int shared,
                       simba_reply *rep, char *owner, unsigned char *value_out) {
    simba_req r;
    simba__mentry *e;
    int mi_i = mutex_index(mutex), pre_own = 0, pre_holders = 0, pre_writer = 0, granted, k;
    mutexinfo *mi = mi_i >= 0 ? &W->m[mi_i] : NULL;
    uint64_t pre_fence = 0;
    int64_t now = W->G;
    memset(&r, 0, sizeof r);
    r.op = op;
    r.mutex = mutex;
    r.contender = contender;
    r.renew = renew;
    r.ttl_ms = ttl;
    r.transition_ms = tr;
    r.live_ms = live;
    r.fence = fence;
    r.value = value_len ? value : NULL;
    r.value_len = value_len;
    r.permits = permits;
    r.shared = shared;
    /* who holds before: the requester itself (its fence), and the others */
    e = (simba__mentry *)simba__hfind(&W->st->entries, mutex);
    if (e && simba__mlive(e, now)) {
        if (strcmp(e->owner, contender) == 0) { pre_own = 1; pre_fence = e->fence; }
        else { pre_holders++; pre_writer = 1; }
    }
    for (k = 0; e && k < e->nh; k++) {
        if (e->hs[k].transition_at < now) continue;
        if (strcmp(e->hs[k].id, contender) == 0) { pre_own = 1; pre_fence = e->hs[k].fence; }
        else pre_holders++;
    }
    simba__mexec(&c->mc, &r, rep, owner, value_out);
    if (mi && op == SIMBA_OP_SET_VALUE && rep->rc == SIMBA_OK) value_stored(value, value_len, fence);
    if (mi && op == SIMBA_OP_YIELD && rep->rc == SIMBA_OK && rep->yielded) {
        /* the model: the owner leaves, the yielder waits at the back */
        int i;
        q_purge(mi, now);
        if ((i = q_find(mi, contender)) >= 0) q_remove(mi, i);
        q_join(mi, contender, shared, simba__add(now, live));
        W->sx->yields_passed++;
    }
    if (mi && (op == SIMBA_OP_ACQUIRE || op == SIMBA_OP_RELEASE) && rep->rc == SIMBA_OK) {
        q_purge(mi, now);
        granted = op == SIMBA_OP_ACQUIRE && rep->owner && strcmp(rep->owner, contender) == 0 && (!pre_own || rep->fence != pre_fence);
        W->sx->checks[INV_FIFO]++;
        if (granted) {
            int i = q_find(mi, contender), p = i >= 0 ? i : mi->nq, writer_ahead = 0, j;
            for (j = 0; j < p; j++) writer_ahead |= !mi->q[j].shared;
            /* the holder itself, anew: it held a permit already; anyone else by the rule,
               from the sim's own model of holders and line */
            if (!pre_own && !simba__grantable(mi->permits, pre_holders, pre_writer, p, shared, writer_ahead))
                violation(INV_FIFO, 1u << c->p->idx, "%s granted %s to %s%s at place %d of the line, %d holding, %s first", op_name(op),
                          mi->name, contender, shared ? " (a reader)" : "", p, pre_holders, mi->nq ? mi->q[0].id : "nobody");
            W->sx->checks[INV_FENCE]++;
            if (rep->fence <= mi->max_grant)
                violation(INV_FENCE, 1u << c->p->idx, "%s granted %s to %s with fence %llu, not above the earlier grant's %llu", op_name(op),
                          mi->name, contender, (unsigned long long)rep->fence, (unsigned long long)mi->max_grant);
            mi->max_grant = rep->fence;
            if (i >= 0) q_remove(mi, i);
            W->sx->ownerships++;
            if (mi->permits > 1) W->sx->sem_grants++;
            else if (mi->rw && shared) W->sx->reader_grants++;
            else if (mi->rw) W->sx->writer_grants++;
            value_stored(value, value_len, rep->fence);
        } else if (op == SIMBA_OP_ACQUIRE) {
            if (!renew) q_join(mi, contender, shared, simba__add(now, live)); /* a refused renewal takes no place */
        } else if (!pre_own) {
            int i = q_find(mi, contender);
            if (i >= 0) q_remove(mi, i);
        }
    }
    trace_mx(c->p->idx, T_EXEC, mi_i, (int64_t)op | (rep->rc != SIMBA_OK ? 16 : 0), (int64_t)rep->fence, rep->owner);
    store_drain();
}

/* A request reached the store (or its commit came, on SQL). */
static void store_request(msg *m) {
    client *c = m->cl;
    msg *a;
    char owner[SIMBA_ID_MAX + 1];
    unsigned char value[SIMBA_VALUE_MAX];
    int64_t ttl = m->ttl, tr = m->tr;
    if (m->epoch != W->net_epoch) { msg_free(m); return; }
    a = msg_new(M_REP, c);
    a->id = m->id;
    if (W->store_down) {
        a->rep.rc = SIMBA_ECONN;
        a->rep.errmsg = "sim: store down";
    } else {
        if (W->pers == PERS_ZK) { ttl = W->zk_T / 2; tr = W->zk_T / 2; } /* the session's lease */
        store_exec(c, m->op, m->mutex, m->contender, m->renew, ttl, tr, m->live, m->fence, m->value, m->value_len, m->permits,
                   m->shared, &a->rep, owner, value);
        simba__copy(a->owner, sizeof a->owner, a->rep.owner);
        a->rep.owner = NULL;
        if (a->rep.value_len > SIMV) abort();
        a->value_len = a->rep.value_len;
        if (a->value_len) memcpy(a->value, a->rep.value, a->value_len);
        a->rep.value = NULL;
        if (W->pers == PERS_ZK && a->rep.rc == SIMBA_OK && a->owner[0] && strcmp(a->owner, m->contender) == 0) {
            /* simba_zk.h LEASE: an owner is told T/2 and T, counted by the core from its send */
            a->rep.ttl_left_ms = W->zk_T / 2;
            a->rep.transition_left_ms = W->zk_T;
        }
        a->rep.errmsg = NULL;
    }
    msg_free(m);
    if (net_cut(c->p) || net_drop()) { msg_free(a); return; }
    if (net_dup()) {
        msg *b = msg_new(M_REP, c);
        *b = *a;
        send_to_proc(b);
    }
    send_to_proc(a);
}

/* A request reached the store: during a stall it waits, in arrival order, behind what
   already waits. */
static void store_arrive(msg *m, int unstalling) {
    /* A restarted process's earlier connection is gone, and what was still on it with it
       (see ASSUMPTIONS; --old-requests keeps it). */
    if (m->epoch != W->net_epoch || (!W->old_requests && m->cl->p->cl != m->cl)) { msg_free(m); return; }
    if (!unstalling && (W->stall_head || W->G < W->stall_until)) {
        m->next = NULL;
        if (W->stall_tail) W->stall_tail->next = m; else W->stall_head = m;
        W->stall_tail = m;
        return;
    }
    if ((W->pers == PERS_SQLITE || W->pers == PERS_PG) && !W->store_down) {
        /* one transaction at a time: the request runs at its commit */
        int64_t at = W->G + rng_range(&W->r_store, 0, 3);
        if (W->G < W->slow_until) at += rng_range(&W->r_store, 0, W->slow_max / 2);
        if (at < W->last_commit) at = W->last_commit;
        W->last_commit = at;
        push(at, E_COMMIT, 0, 0, W->store_epoch, m);
        return;
    }
    store_request(m);
}

/* The replica's (or the last durable) copy of the records. */
static void store_snapshot(void) {
    int i;
    for (i = 0; i < W->nm; i++) {
        mutexinfo *mi = &W->m[i];
        simba__mentry *e = (simba__mentry *)simba__hfind(&W->st->entries, mi->name);
        mi->snap_has = e && e->owner[0];
        if (mi->snap_has) {
            simba__copy(mi->snap_owner, IDLEN, e->owner);
            mi->snap_acq = e->acquired_at;
            mi->snap_ttl = e->ttl_at;
            mi->snap_tr = e->transition_at;
            mi->snap_fence = e->fence;
            mi->snap_value_len = e->value_len;
            memcpy(mi->snap_value, e->value, e->value_len);
        }
    }
}

/* Data loss; with a replica, the store comes back with the replica's records. */
static void store_lose(int to_replica) {
    int i;
    simba_memstore_lose(W->st);
    for (i = 0; i < W->nm; i++) {
        mutexinfo *mi = &W->m[i];
        mi->nq = 0;
        if (to_replica && mi->snap_has) {
            simba__mentry *e = (simba__mentry *)simba__hfind(&W->st->entries, mi->name);
            if (e) {
                simba__copy(e->owner, sizeof e->owner, mi->snap_owner);
                e->acquired_at = mi->snap_acq;
                e->ttl_at = mi->snap_ttl;
                e->transition_at = mi->snap_tr;
                e->fence = mi->snap_fence;
                e->value_len = mi->snap_value_len;
                memcpy(e->value, mi->snap_value, mi->snap_value_len);
            }
        }
    }
}

static int64_t max_lease(void) {
    int64_t l = 0;
    int i;
    for (i = 0; i < W->nm; i++)
        if (W->m[i].ttl + W->m[i].tr > l) l = W->m[i].ttl + W->m[i].tr;
    return W->pers == PERS_ZK ? W->zk_T : l;
}

/* ---- callbacks ------------------------------------------------------------------------ */

static int cb_ok(handle *h, const char *what) {
    W->sx->checks[INV_CALLBACK]++;
    if (h->freed || !h->p->up) {
        violation(INV_CALLBACK, 1u << h->p->idx, "%s of %s after its free", what, h->id);
        return 0;
    }
    return 1;
}
static void on_acquired(simba_service *s, const simba_state *st, void *u) {
    handle *h = (handle *)u;
    if (!cb_ok(h, "on_acquired")) return;
    trace_mx(h->p->idx, T_CB, h->mutex, 1, (int64_t)st->after->fence, h->id);
    if (h->told) violation(INV_CALLBACK, 1u << h->p->idx, "%s: on_acquired twice without on_released", h->id);
    if (!simba_is_owner(s)) violation(INV_CALLBACK, 1u << h->p->idx, "%s: on_acquired while simba_is_owner() is 0", h->id);
    h->told = 1;
    /* now and then the application stops from inside the callback */
    if (rng_chance(&h->p->r_app, 0.02)) simba_stop(s);
}
static void on_released(simba_service *s, const simba_state *st, void *u) {
    handle *h = (handle *)u;
    (void)s;
    if (!cb_ok(h, "on_released")) return;
    trace_mx(h->p->idx, T_CB, h->mutex, 2, (int64_t)st->before->fence, h->id);
    if (!h->told) violation(INV_CALLBACK, 1u << h->p->idx, "%s: on_released without on_acquired", h->id);
    h->told = 0;
}
static void on_owner(simba_service *s, const simba_state *st, void *u) {
    handle *h = (handle *)u;
    const simba_owner *o = st->after;
    int k;
    (void)s;
    if (!cb_ok(h, "on_owner") || !o->id[0]) return;
    W->sx->checks[INV_VALUE]++;
    k = value_num(o->value, o->value_len);
    if (k < 0 || strncmp((const char *)o->value, o->id, strlen(o->id)) != 0 || o->value[strlen(o->id)] != '#') {
        violation(INV_VALUE, 1u << h->p->idx, "%s shows owner %s of %s with the value '%.*s', not one of its own", h->id, o->id,
                  W->m[h->mutex].name, (int)o->value_len, (const char *)o->value);
    } else {
        const valinfo *vi = &W->vals[k];
        int i, found = 0;
        for (i = 0; i < vi->nf && i < 8; i++) found |= vi->fences[i] == o->fence;
        if (!found && vi->nf <= 8)
            violation(INV_VALUE, 1u << h->p->idx, "%s shows owner %s fence %llu with the value '%.*s', which the store never kept with that fence",
                      h->id, o->id, (unsigned long long)o->fence, (int)o->value_len, (const char *)o->value);
    }
    if (o->fence < h->seen_fence && W->m[h->mutex].permits == 1 && !W->m[h->mutex].rw)
        violation(INV_VALUE, 1u << h->p->idx, "%s shows owner %s of %s with fence %llu after it had shown fence %llu", h->id, o->id,
                  W->m[h->mutex].name, (unsigned long long)o->fence, (unsigned long long)h->seen_fence);
    if (o->fence > h->seen_fence) h->seen_fence = o->fence;
}
static void on_lost(simba_locker *lk, void *u) {
    handle *h = (handle *)u;
    (void)lk;
    if (!cb_ok(h, "on_lost")) return;
    trace_mx(h->p->idx, T_LOST, h->mutex, 0, 0, h->id);
    /* the lock may have come and gone between two of the application's calls */
    if (h->lk_state == LK_LAPSED) { /* the unlock reported the lapse; this is its on_lost */
        h->lk_state = LK_IDLE;
        return;
    }
    if (h->lk_state != LK_HELD && h->lk_state != LK_WANT) violation(INV_ON_LOST, 1u << h->p->idx, "%s: on_lost while not holding", h->id);
    h->lk_state = LK_LOST;
    {
        /* the application unlocks soon after (svc_action) */
        svcslot *s = &h->p->s[0];
        int k;
        for (k = 0; k < h->p->nsvc; k++)
            if (h->p->s[k].h == h) s = &h->p->s[k];
        s->gen++;
        push(W->G + rng_range(&h->p->r_app, 0, 500), E_ACTION, h->p->idx, (int)(s - h->p->s), s->gen, NULL);
    }
}

static int believers(int mutex, handle **who);
static void work(simba_scheduler *sc, void *u) {
    handle *h = (handle *)u;
    handle *who = NULL;
    uint64_t f;
    if (!cb_ok(h, "work")) return;
    W->sx->checks[INV_TENURE]++;
    W->sx->work_runs++;
    f = simba_scheduler_fence(sc);
    trace_mx(h->p->idx, T_CB, h->mutex, 3, (int64_t)f, h->id);
    if (!h->sched_on) violation(INV_TENURE, 1u << h->p->idx, "%s: work after simba_scheduler_stop", h->id);
    else if (!simba_scheduler_is_owner(sc) || believers(h->mutex, &who) != 1 || who != h || f < W->m[h->mutex].max_fence)
        violation(INV_TENURE, 1u << h->p->idx | (who ? 1u << who->p->idx : 0), "%s: work outside its tenure (fence %llu, %s believes)", h->id,
                  (unsigned long long)f, who ? who->id : "nobody");
    if (rng_chance(&h->p->r_app, 0.01)) { h->sched_on = 0; simba_scheduler_stop(sc); }
}

/* ---- processes ------------------------------------------------------------------------ */

static handle *handle_new(proc *p, svcslot *s, int slot, int again) {
    handle *h;
    if (W->nhandles == W->caphandles) {
        /* handles are never moved: the pool is a list of blocks */
        abort();
    }
    h = &W->handles[W->nhandles++];
    memset(h, 0, sizeof *h);
    h->p = p;
    h->kind = s->kind;
    h->mutex = s->mutex;
    /* a stable id survives restarts (a configured id); one freed service's id may still be
       finishing its release when the slot is made again: that one gets a new id */
    if (s->stable && !again) snprintf(h->id, sizeof h->id, "p%d.s%d", p->idx, slot);
    else snprintf(h->id, sizeof h->id, "p%d.s%d.r%d.%u", p->idx, slot, p->inc, (unsigned)s->gen);
    return h;
}

static void svc_create(proc *p, int slot, int again) {
    svcslot *s = &p->s[slot];
    mutexinfo *mi = &W->m[s->mutex];
    handle *h = handle_new(p, s, slot, again);
    simba_result rc = SIMBA_OK;
    unsigned char value[SIMV];
    size_t value_len = value_make(h->id, s->mutex, value);
    s->h = h;
    s->svc = NULL;
    s->lk = NULL;
    s->sc = NULL;
    s->gen++;
    /* on a read-write lock, a contender or a locker is a reader or a writer */
    h->shared = mi->rw && (s->kind == K_CONTEND || s->kind == K_LOCKER) && rng_chance(&p->r_app, 0.6);
    switch (s->kind) {
    case K_CONTEND: {
        simba_contend_desc d;
        memset(&d, 0, sizeof d);
        d.mutex = mi->name;
        d.contender_id = h->id;
        d.ttl_ms = mi->ttl;
        d.transition_ms = mi->tr;
        d.on_acquired = on_acquired;
        d.on_released = on_released;
        d.on_owner = on_owner;
        d.user_data = h;
        d.step_down_on_disconnect = s->step_down;
        d.value = value;
        d.value_len = value_len;
        d.permits = mi->permits;
        d.shared = h->shared;
        if ((rc = simba_contend(p->loop, p->cl->be, &d, &s->svc)) == SIMBA_OK) rc = simba_start(s->svc);
        break;
    }
    case K_LOCKER: {
        simba_locker_desc d;
        memset(&d, 0, sizeof d);
        d.mutex = mi->name;
        d.contender_id = h->id;
        d.ttl_ms = mi->ttl;
        d.transition_ms = mi->tr;
        d.on_lost = on_lost;
        d.user_data = h;
        d.step_down_on_disconnect = s->step_down;
        d.value = value;
        d.value_len = value_len;
        d.permits = mi->permits;
        d.shared = h->shared;
        rc = simba_locker_new(p->loop, p->cl->be, &d, &s->lk);
        h->lk_state = LK_IDLE;
        break;
    }
    case K_SCHED: {
        simba_scheduler_desc d;
        memset(&d, 0, sizeof d);
        d.mutex = mi->name;
        d.contender_id = h->id;
        d.ttl_ms = mi->ttl;
        d.transition_ms = mi->tr;
        d.strategy = s->strategy ? SIMBA_FIXED_RATE : SIMBA_FIXED_DELAY;
        d.period_ms = s->period;
        d.initial_delay_ms = s->period / 2;
        d.work = work;
        d.user_data = h;
        d.step_down_on_disconnect = s->step_down;
        d.value = value;
        d.value_len = value_len;
        if ((rc = simba_scheduler_new(p->loop, p->cl->be, &d, &s->sc)) == SIMBA_OK) rc = simba_scheduler_start(s->sc);
        h->sched_on = rc == SIMBA_OK;
        break;
    }
    default: {
        simba_observe_desc d;
        memset(&d, 0, sizeof d);
        d.mutex = mi->name;
        d.on_owner = on_owner;
        d.user_data = h;
        if ((rc = simba_observe(p->loop, p->cl->be, &d, &s->svc)) == SIMBA_OK) rc = simba_start(s->svc);
        break;
    }
    }
    if (rc != SIMBA_OK) {
        fprintf(stderr, "sim: seed %llu: cannot create a %s: %s (%s)\n", (unsigned long long)W->seed, kind_name[s->kind], simba_strerror(rc),
                simba_loop_errmsg(p->loop));
        exit(2);
    }
    trace_mx(p->idx, T_ACTION, s->mutex, 0, 0, h->id);
    push(W->G + rng_range(&p->r_app, 10, 3000), E_ACTION, p->idx, slot, s->gen, NULL);
}

/* Free a service through the API: no callback may reach its handle afterwards. */
static void svc_free(proc *p, int slot) {
    svcslot *s = &p->s[slot];
    if (!s->h) return;
    switch (s->kind) {
    case K_LOCKER: simba_locker_free(s->lk); break;
    case K_SCHED: simba_scheduler_free(s->sc); break;
    default: simba_service_free(s->svc); break;
    }
    s->h->freed = 1;
    s->h->believing = 0;
    trace_mx(p->idx, T_ACTION, s->mutex, 5, 0, s->h->id);
    s->h = NULL;
    s->gen++;
}

static void proc_log(void *u, simba_log_level level, const char *msg) { (void)u; (void)level; (void)msg; }

static void proc_start(proc *p) {
    simba_loop_desc d;
    simba_result rc;
    int i;
    p->inc++;
    p->up = 1;
    p->stopping = 0;
    p->allocs = 0;
    p->poll_at = NEVER;
    p->paused_until = 0;
    memset(&d, 0, sizeof d);
    d.now_ms = proc_clock;
    d.clock_user = p;
    d.random = proc_rand;
    d.random_user = p;
    d.alloc = proc_alloc;
    d.free = proc_free;
    d.alloc_user = p;
    d.poll_budget_us = (int64_t)1 << 40; /* real time must not cut a poll: runs replay exactly */
    d.poll_max_steps = p->max_steps;
    d.timer_hook = proc_timer_hook;
    d.timer_user = p;
    d.log = proc_log; /* the faults make warnings by the thousand: the trace says what happened */
    if ((rc = simba_loop_new(&d, &p->loop)) != SIMBA_OK) { fprintf(stderr, "sim: loop: %s\n", simba_strerror(rc)); exit(2); }
    p->cl = client_new(p);
    rc = simba_backend_new(p->loop, W->pers == PERS_ZK ? &sim_vt_session : &sim_vt_asked, p->cl, &p->cl->be);
    if (rc != SIMBA_OK) { fprintf(stderr, "sim: backend: %s\n", simba_strerror(rc)); exit(2); }
    for (i = 0; i < p->nsvc; i++) svc_create(p, i, 0);
    schedule_poll(p, W->G);
}

/* The loop goes: every handle is freed, and the loop must have freed all it allocated. */
static void proc_down(proc *p) {
    int i;
    for (i = 0; i < p->nsvc; i++)
        if (p->s[i].h) { p->s[i].h->freed = 1; p->s[i].h->believing = 0; p->s[i].h = NULL; p->s[i].gen++; }
    simba_loop_free(p->loop);
    p->loop = NULL;
    p->up = 0;
    p->poll_gen++;
    p->poll_at = NEVER;
    W->sx->checks[INV_LEAK]++;
    if (p->allocs != 0) violation(INV_LEAK, 1u << p->idx, "p%d's loop left %ld allocations", p->idx, p->allocs);
}

static void proc_crash(proc *p) {
    p->cl->dead = 1; /* nothing it sends from now on gets out */
    proc_down(p);
}

/* A clean stop: every service stopped and freed through the API; the loop goes later. */
static void proc_stop(proc *p) {
    int i;
    for (i = 0; i < p->nsvc; i++) {
        svcslot *s = &p->s[i];
        if (s->kind == K_LOCKER && s->h && s->h->lk_state != LK_IDLE) simba_locker_unlock(s->lk);
        svc_free(p, i);
    }
    p->stopping = 1;
}

static void after_poll_checks(proc *p);
/* An unlock says SIMBA_ELOST exactly when the lease had lapsed: the lapse is never lost. */
static simba_result locker_unlock(proc *p, svcslot *s) {
    int held = simba_locker_is_owner(s->lk);
    int was_held = s->h->lk_state == LK_HELD;
    simba_result rc = simba_locker_unlock(s->lk);
    W->sx->checks[INV_ON_LOST]++;
    if (rc == SIMBA_ELOST && held)
        violation(INV_ON_LOST, 1u << p->idx, "%s: unlock said the lease had lapsed while it was held", s->h->id);
    if (rc != SIMBA_ELOST && was_held && !held)
        violation(INV_ON_LOST, 1u << p->idx, "%s: unlock after a lapse did not report it", s->h->id);
    return rc;
}
static void locker_gained(proc *p, svcslot *s);

static void poll_proc(proc *p) {
    int64_t w = 0;
    int i;
    p->poll_at = NEVER;
    if (!p->up) return;
    if (W->G < p->paused_until) { schedule_poll(p, p->paused_until); return; }
    for (i = 0; i < 2000; i++) {
        w = simba_poll(p->loop);
        if (w != 0) break;
    }
    busy_count(1u << p->idx, (uint64_t)i + 1);
    if (w < 0) { violation(INV_POLL, 1u << p->idx, "simba_poll returned %lld", (long long)w); return; }
    if (i == 2000) { violation(INV_POLL, 1u << p->idx, "simba_poll asks to be called again at once, 2000 times"); w = 1; }
    after_poll_checks(p);
    schedule_poll(p, global_at(p, local_at(p, W->G) + w));
}

/* The application learns that its lock is held (simba_locker_try said so): it holds it
   for a while, then unlocks (svc_action). */
static void locker_gained(proc *p, svcslot *s) {
    handle *h = s->h;
    h->lk_state = LK_HELD;
    h->until = W->G + rng_range(&p->r_app, 0, 2 * W->m[s->mutex].ttl);
    s->gen++; /* the wait's deadline is void */
    trace_mx(p->idx, T_ACTION, s->mutex, 2, 0, h->id);
    push(h->until, E_ACTION, p->idx, (int)(s - p->s), s->gen, NULL);
}

/* The application's own behaviour, between polls. */
static void svc_action(proc *p, int slot) {
    svcslot *s = &p->s[slot];
    handle *h = s->h;
    int64_t next = rng_range(&p->r_app, 500, 6000);
    if (!h || !p->up || p->stopping) return;
    if (W->G < p->paused_until) { push(p->paused_until + rng_range(&p->r_app, 0, 50), E_ACTION, p->idx, slot, s->gen, NULL); return; }
    switch (s->kind) {
    case K_CONTEND:
        if (simba_is_owner(s->svc) && rng_chance(&p->r_app, 0.2)) { /* proclaim a new value */
            unsigned char v[SIMV];
            size_t n = value_make(h->id, s->mutex, v);
            if (simba_set_value(s->svc, v, n) != SIMBA_OK) violation(INV_CALLBACK, 1u << p->idx, "%s: simba_set_value refused", h->id);
            W->sx->value_sets++;
            trace_mx(p->idx, T_ACTION, s->mutex, 8, 0, h->id);
        }
        if (simba_is_owner(s->svc) && rng_chance(&p->r_app, 0.1)) {
            if (simba_yield(s->svc) == SIMBA_OK) W->sx->yields++;
            trace_mx(p->idx, T_ACTION, s->mutex, 9, 0, h->id);
        }
        if (simba_service_status(s->svc) == SIMBA_RUNNING) {
            if (rng_chance(&p->r_app, 0.15)) { simba_stop(s->svc); trace_mx(p->idx, T_ACTION, s->mutex, 1, 0, h->id); }
        } else if (simba_service_status(s->svc) == SIMBA_INITIAL) {
            simba_start(s->svc);
            trace_mx(p->idx, T_ACTION, s->mutex, 0, 0, h->id);
        }
        if (rng_chance(&p->r_app, 0.03)) { svc_free(p, slot); svc_create(p, slot, 1); return; }
        break;
    case K_LOCKER:
        /* idle -> try; wanting -> gives up at its deadline; held -> unlocks at the end of
           its hold; lost -> unlocks (a lock is seen taken after each poll: locker_gained) */
        switch (h->lk_state) {
        case LK_IDLE: {
            simba_result rc = simba_locker_try(s->lk);
            if (rc == SIMBA_OK || rc == SIMBA_EAGAIN) {
                h->lk_state = LK_WANT;
                h->until = W->G + rng_range(&p->r_app, 500, 4 * W->m[s->mutex].ttl + 4000);
                trace_mx(p->idx, T_ACTION, s->mutex, 7, 0, h->id);
                if (rc == SIMBA_OK) locker_gained(p, s);
            }
            next = h->lk_state == LK_WANT ? h->until - W->G : rng_range(&p->r_app, 100, 3000);
            break;
        }
        case LK_WANT:
        case LK_HELD:
            if (W->G >= h->until) {
                int code = h->lk_state == LK_WANT ? 4 : 3; /* gives up waiting, or unlocks */
                h->lk_state = locker_unlock(p, s) == SIMBA_ELOST ? LK_LAPSED : LK_IDLE;
                trace_mx(p->idx, T_ACTION, s->mutex, code, 0, h->id);
                next = rng_range(&p->r_app, 0, 3000);
            } else {
                next = h->until - W->G;
            }
            break;
        case LK_LAPSED: /* unlocked; its on_lost is due from the next poll */
            next = rng_range(&p->r_app, 0, 3000);
            break;
        default: /* lost: unlock to use it again */
            simba_locker_unlock(s->lk);
            h->lk_state = LK_IDLE;
            trace_mx(p->idx, T_ACTION, s->mutex, 3, 0, h->id);
            next = rng_range(&p->r_app, 0, 3000);
            break;
        }
        break;
    case K_SCHED:
        if (h->sched_on && rng_chance(&p->r_app, 0.1)) {
            h->sched_on = 0;
            simba_scheduler_stop(s->sc);
            trace_mx(p->idx, T_ACTION, s->mutex, 1, 0, h->id);
        } else if (!h->sched_on && !simba_scheduler_running(s->sc) && rng_chance(&p->r_app, 0.5)) {
            if (simba_scheduler_start(s->sc) == SIMBA_OK) { h->sched_on = 1; trace_mx(p->idx, T_ACTION, s->mutex, 0, 0, h->id); }
        }
        break;
    default:
        if (rng_chance(&p->r_app, 0.05)) { svc_free(p, slot); svc_create(p, slot, 1); return; }
        break;
    }
    push(W->G + next, E_ACTION, p->idx, slot, s->gen, NULL);
}

/* ---- invariants ------------------------------------------------------------------------- */

static int svc_believes(const svcslot *s, uint64_t *fence) {
    switch (s->kind) {
    case K_CONTEND: return simba_is_owner(s->svc) && (*fence = simba_fence(s->svc), 1);
    case K_LOCKER: return simba_locker_is_owner(s->lk) && (*fence = simba_locker_fence(s->lk), 1);
    case K_SCHED: return simba_scheduler_is_owner(s->sc) && (*fence = simba_scheduler_fence(s->sc), 1);
    default: return 0;
    }
}

static int believers(int mutex, handle **who) {
    int i, k, n = 0;
    for (i = 0; i < W->np; i++) {
        proc *p = &W->p[i];
        if (!p->up) continue;
        for (k = 0; k < p->nsvc; k++) {
            uint64_t f;
            if (p->s[k].h && p->s[k].mutex == mutex && svc_believes(&p->s[k], &f)) { n++; *who = p->s[k].h; }
        }
    }
    return n;
}

static void after_poll_checks(proc *p) {
    int k;
    for (k = 0; k < p->nsvc; k++) {
        svcslot *s = &p->s[k];
        if (s->kind != K_LOCKER || !s->h) continue;
        if (s->h->lk_state == LK_WANT && simba_locker_is_owner(s->lk) && simba_locker_try(s->lk) == SIMBA_OK) locker_gained(p, s);
        W->sx->checks[INV_ON_LOST]++;
        if (s->h->lk_state == LK_HELD && !simba_locker_is_owner(s->lk))
            violation(INV_ON_LOST, 1u << p->idx, "%s: the lock lapsed and a whole poll passed without on_lost", s->h->id);
        if (s->h->lk_state == LK_LAPSED)
            violation(INV_ON_LOST, 1u << p->idx, "%s: unlocked after a lapse and a whole poll passed without on_lost", s->h->id);
    }
}

static void check_world(void) {
    int i, k, m;
    int count[MAXM], waiting[MAXM], writers[MAXM];
    unsigned mask[MAXM];
    for (m = 0; m < W->nm; m++) { count[m] = 0; waiting[m] = 0; mask[m] = 0; writers[m] = 0; }
    for (i = 0; i < W->np; i++) {
        proc *p = &W->p[i];
        int reachable;
        if (!p->up) continue;
        reachable = !p->stopping && W->G >= p->paused_until && W->G >= p->part_until;
        for (k = 0; k < p->nsvc; k++) {
            svcslot *s = &p->s[k];
            handle *h = s->h;
            uint64_t f = 0;
            int b;
            if (!h || s->kind == K_OBSERVE) continue;
            b = svc_believes(s, &f);
            if (b) {
                mutexinfo *mi = &W->m[s->mutex];
                count[s->mutex]++;
                writers[s->mutex] += !h->shared;
                mask[s->mutex] |= 1u << i;
                if (!h->believing || h->fence != f) {
                    W->sx->checks[INV_FENCE]++;
                    /* one holder at a time: beliefs come in fence order (several holders:
                       their answers may arrive in any order; the store's grants are checked) */
                    if (h->fence != f && f <= mi->max_fence && mi->permits == 1 && !mi->rw)
                        violation(INV_FENCE, 1u << i, "%s owns %s with fence %llu, not above the earlier %llu", h->id, mi->name,
                                  (unsigned long long)f, (unsigned long long)mi->max_fence);
                    if (f > mi->max_fence) mi->max_fence = f;
                    trace_mx(i, T_BELIEF, s->mutex, s->mutex, (int64_t)f, h->id);
                }
                h->believing = 1;
                h->fence = f;
            } else {
                if (h->believing) trace_mx(i, T_UNBELIEF, s->mutex, s->mutex, 0, h->id);
                h->believing = 0;
                if (reachable && ((s->kind == K_CONTEND && simba_service_status(s->svc) == SIMBA_RUNNING) ||
                                  (s->kind == K_LOCKER && h->lk_state == LK_WANT) || (s->kind == K_SCHED && h->sched_on)))
                    waiting[s->mutex] = 1;
            }
        }
    }
    for (m = 0; m < W->nm; m++) {
        mutexinfo *mi = &W->m[m];
        W->sx->checks[INV_ONE_OWNER]++;
        if (count[m] > mi->permits && !(mi->rw && writers[m] == 0))
            violation_on(INV_ONE_OWNER, m, "%d processes believe they own %s (%d permits)", count[m], mi->name, mi->permits);
        if (mi->rw && writers[m] > 0 && count[m] > 1)
            violation_on(INV_ONE_OWNER, m, "a writer holds %s with %d others", mi->name, count[m] - 1);
        if (count[m] == 0 && waiting[m]) {
            int64_t from;
            if (mi->gap_since == NEVER) mi->gap_since = W->G;
            from = mi->gap_since > W->fault_clear_at ? mi->gap_since : W->fault_clear_at;
            W->sx->checks[INV_LIVENESS]++;
            if (W->G - from > mi->bound) {
                violation_on(INV_LIVENESS, m, "%s: nobody owns it for %lld ms while a live process waits (bound %lld ms)", mi->name,
                          (long long)(W->G - from), (long long)mi->bound);
                mi->gap_since = W->G;
            }
        } else {
            mi->gap_since = NEVER;
        }
    }
}

/* ---- faults ------------------------------------------------------------------------------ */

static void clear_after(int64_t end) {
    int64_t settle = end + 500;
    if (settle > W->fault_clear_at) W->fault_clear_at = settle;
}

static void fault_start(int kind) {
    int first = (int)rng_range(&W->r_fault, 0, W->np - 1), i;
    proc *p = &W->p[first];
    int64_t lease = max_lease(), d;
    if (kind == F_CRASH || kind == F_STOP) {
        /* a process that is up; with none, the network slows instead */
        for (i = 0; i < W->np && (!p->up || p->stopping); i++) p = &W->p[(first + i + 1) % W->np];
        if (!p->up || p->stopping) kind = F_SLOW;
    }
    W->sx->faults[kind]++;
    W->run_faults++;
    switch (kind) {
    case F_CRASH:
    case F_STOP:
        d = rng_range(&W->r_fault, 100, 3 * lease);
        trace(p->idx, T_FAULT, kind, d, NULL);
        if (kind == F_CRASH) {
            proc_crash(p);
            push(W->G + d, E_RESTART, p->idx, 0, 0, NULL);
        } else {
            proc_stop(p);
            push(W->G + rng_range(&W->r_fault, 0, lease), E_FINISH, p->idx, 0, 0, NULL);
            push(W->G + d + lease, E_RESTART, p->idx, 0, 0, NULL);
        }
        return;
    case F_PAUSE:
        d = rng_chance(&W->r_fault, 0.5) ? rng_range(&W->r_fault, 1, 200) : rng_range(&W->r_fault, 200, 3 * lease);
        if (p->paused_until < W->G + d) p->paused_until = W->G + d;
        trace(p->idx, T_FAULT, kind, d, NULL);
        return;
    case F_PARTITION:
        d = rng_range(&W->r_fault, 50, W->pers == PERS_ZK ? 2 * W->zk_T : 2 * lease);
        p->part_until = W->G + d;
        p->part_gen++;
        trace(p->idx, T_FAULT, kind, d, NULL);
        push(W->G + d, E_HEAL, p->idx, F_PARTITION, p->part_gen, NULL);
        if (W->pers == PERS_ZK && p->up) {
            push(W->G + W->zk_T / 3, E_ZK_DISC, p->idx, 0, p->part_gen, p->cl);
            push(W->G + W->zk_T, E_ZK_EXPIRE, p->idx, 0, p->part_gen, p->cl);
        }
        return;
    default: break;
    }
    /* store-wide faults */
    switch (kind) {
    case F_LOSSY:
        d = rng_range(&W->r_fault, 100, 2 * lease);
        if (W->G + d > W->lossy_until) W->lossy_until = W->G + d;
        W->drop_p = 0.02 + 0.3 * (double)rng_range(&W->r_fault, 0, 100) / 100.0;
        W->dup_p = 0.3 * (double)rng_range(&W->r_fault, 0, 100) / 100.0;
        break;
    case F_SLOW:
        d = rng_range(&W->r_fault, 100, 2 * lease);
        if (W->G + d > W->slow_until) W->slow_until = W->G + d;
        W->slow_max = rng_range(&W->r_fault, lease / 4, 2 * lease);
        d += W->slow_max;
        break;
    case F_STALL:
        d = rng_range(&W->r_fault, 10, 2 * lease);
        if (W->G + d > W->stall_until) W->stall_until = W->G + d;
        push(W->stall_until, E_UNSTALL, 0, 0, 0, NULL);
        break;
    case F_LOSS:
        d = lease;
        store_lose(0);
        break;
    case F_FAILOVER:
    case F_RESTART:
        d = rng_range(&W->r_fault, 20, 2000);
        W->store_down = 1;
        W->net_epoch++;                   /* connections cut: what is on the wire is lost */
        W->store_epoch++;                 /* and what was not committed */
        if (kind == F_FAILOVER || W->pers == PERS_PG) store_lose(1);
        else if (W->pers == PERS_REDIS) store_lose(0);
        push(W->G + d, E_HEAL, -1, kind, 0, NULL);
        if (W->pers != PERS_SQLITE) d += lease;
        break;
    default: d = 0; break;
    }
    trace(-1, T_FAULT, kind, d, NULL);
    clear_after(W->G + d);
}

static void draw_faults(void) {
    int n = (int)rng_range(&W->r_fault, 10, 16), i;
    unsigned allowed = pers_faults[W->pers];
    for (i = 0; i < n; i++) {
        int kind;
        do kind = (int)rng_range(&W->r_fault, 0, F_EXPIRY - 1);
        while (!(allowed & (1u << kind)));
        /* the first fault comes early, so that short runs still see ten */
        push(rng_range(&W->r_fault, 1000, W->dur - QUIET_TAIL), E_FAULT, kind, 0, 0, NULL);
    }
}

/* ZooKeeper: the session of a partitioned client expires at the store. */
static void zk_expire(proc *p, client *c) {
    int k;
    if (c->dead || p->cl != c || W->G >= p->part_until) return;
    W->sx->faults[F_EXPIRY]++;
    W->run_faults++;
    trace(p->idx, T_FAULT, F_EXPIRY, 0, NULL);
    for (k = 0; k < p->nsvc; k++) {
        simba_reply rep;
        char owner[SIMBA_ID_MAX + 1];
        unsigned char value[SIMBA_VALUE_MAX];
        if (!p->s[k].h || p->s[k].kind == K_OBSERVE) continue;
        store_exec(c, SIMBA_OP_RELEASE, W->m[p->s[k].mutex].name, p->s[k].h->id, 0, 0, 0, 0, 0, NULL, 0, 1, 0, &rep, owner, value);
    }
    c->zk_lost = 1;
    clear_after(p->part_until);
}

/* ---- one run -------------------------------------------------------------------------- */

static void world_setup(uint64_t seed) {
    rng r;
    int i, k;
    simba_memstore_desc sd;
    r.s = seed * 0x2545f4914f6cdd1dull + 0x1234567;
    W->seed = seed;
    W->r_net = rng_fork(&r);
    W->r_fault = rng_fork(&r);
    W->r_store = rng_fork(&r);
    W->pers = (int)rng_range(&r, 0, PERS_N - 1);
    W->np = (int)rng_range(&r, 5, MAXP);
    W->nm = (int)rng_range(&r, 1, MAXM);
    W->dur = rng_range(&r, 60000, 75000);
    W->G = 0;
    W->fault_clear_at = 0;
    W->delay_base = rng_range(&r, 0, 3);
    W->delay_jit = rng_range(&r, 0, 8);
    W->zk_T = rng_range(&r, 1000, 4000);
    for (i = 0; i < W->nm; i++) {
        mutexinfo *mi = &W->m[i];
        memset(mi, 0, sizeof *mi);
        snprintf(mi->name, sizeof mi->name, "m%d", i);
        if (W->pers == PERS_ZK) {
            mi->ttl = W->zk_T / 2;
            mi->tr = W->zk_T / 2;
        } else {
            mi->ttl = rng_range(&r, 300, 2000);
            mi->tr = rng_range(&r, mi->ttl / 20, mi->ttl);
        }
        mi->gap_since = NEVER;
        mi->permits = 1;
    }
    W->timeout = 0;
    for (i = 0; i < W->nm; i++)
        if (W->m[i].ttl + W->m[i].tr > W->timeout) W->timeout = W->m[i].ttl + W->m[i].tr;
    W->timeout += 500;
    for (i = 0; i < W->nm; i++) {
        mutexinfo *mi = &W->m[i];
        /* old lease + a dead head's place + backoff max + a timed-out ask + slack */
        mi->bound = 2 * (mi->ttl + mi->tr) + (mi->ttl + mi->tr + 1000 + 1000) + 5000 + 1000 + W->timeout + 2000;
    }
    memset(&sd, 0, sizeof sd);
    sd.now_ms = proc_clock; /* a process at offset 0 and rate 1: the store's clock is G */
    {
        static proc store_clock_proc;
        memset(&store_clock_proc, 0, sizeof store_clock_proc);
        sd.clock_user = &store_clock_proc;
    }
    if (simba_memstore_new(&sd, &W->st) != SIMBA_OK) abort();
    for (i = 0; i < W->np; i++) {
        proc *p = &W->p[i];
        memset(p, 0, sizeof *p);
        p->idx = i;
        p->off = rng_range(&r, 0, (int64_t)1 << 40);
        p->ppm = rng_range(&r, -SIM_DRIFT_PPM, SIM_DRIFT_PPM);
        p->r_loop = rng_fork(&r);
        p->r_app = rng_fork(&r);
        p->max_steps = rng_chance(&r, 0.3) ? (int)rng_range(&r, 1, 4) : 0;
        p->nsvc = (int)rng_range(&r, 1, MAXS);
        for (k = 0; k < p->nsvc; k++) {
            svcslot *s = &p->s[k];
            int64_t roll = rng_range(&r, 0, 99);
            s->kind = roll < 35 ? K_CONTEND : roll < 65 ? K_LOCKER : roll < 85 ? K_SCHED : K_OBSERVE;
            s->mutex = (int)rng_range(&r, 0, W->nm - 1);
            s->stable = rng_chance(&r, 0.5);
            s->step_down = rng_chance(&r, 0.3);
            s->period = rng_range(&r, 30, 1000);
            s->strategy = (int)rng_range(&r, 0, 1);
        }
    }
    {
        /* the names' modes, from a stream of their own (the draws above stay as they were) */
        rng rm = rng_fork(&r);
        for (i = 1; i < W->nm; i++) {
            int64_t roll = rng_range(&rm, 0, 2);
            W->m[i].permits = roll == 1 ? (int)rng_range(&rm, 2, 3) : 1;
            W->m[i].rw = roll == 2;
        }
        for (i = 0; i < W->np; i++)
            for (k = 0; k < W->p[i].nsvc; k++)
                if (W->p[i].s[k].kind == K_SCHED && W->m[W->p[i].s[k].mutex].permits > 1) W->p[i].s[k].kind = K_CONTEND;
    }
    W->sx->pers[W->pers]++;
}

static void world_teardown(void) {
    int i;
    client *c, *cn;
    for (i = 0; i < W->np; i++)
        if (W->p[i].up) proc_down(&W->p[i]);
    for (c = W->clients; c; c = cn) {
        simba__mevent *e, *en;
        cn = c->all_next;
        for (e = c->mc.inbox; e; e = en) { en = e->next; SIMBA_FREE(e); }
        client_forget_watches(c);
        free(c->pend);
        free(c);
    }
    W->clients = NULL;
    W->st->clients = NULL;
    simba_memstore_free(W->st);
    W->st = NULL;
    W->sx->checks[INV_LEAK]++;
    if (sim_store_allocs != 0) violation(INV_LEAK, 0, "the store left %ld allocations", sim_store_allocs);
    while (W->stall_head) {
        msg *m = W->stall_head;
        W->stall_head = m->next;
        msg_free(m);
    }
    W->stall_tail = NULL;
    while (W->nheap > 0) {
        ev e = pop();
        if (e.ptr && (e.type == E_STORE || e.type == E_COMMIT || e.type == E_PROC)) msg_free((msg *)e.ptr);
    }
}

static void run_seed(uint64_t seed) {
    int i;
    world_setup(seed);
    W->violated = 0;
    W->busy = 0;
    W->busy_sec = -1;
    W->busy_n = 0;
    W->ntrace = 0;
    W->nhandles = 0;
    W->nvals = 0;
    W->seq = 0;
    W->store_down = 0;
    W->stall_until = W->lossy_until = W->slow_until = 0;
    W->last_commit = 0;
    W->run_faults = 0;
    W->stall_head = W->stall_tail = NULL;
    for (i = 0; i < W->np; i++) proc_start(&W->p[i]);
    draw_faults();
    push(rng_range(&W->r_store, 100, 1000), E_SNAPSHOT, 0, 0, 0, NULL);
    push(W->dur, E_END, 0, 0, 0, NULL);
    for (;;) {
        ev e;
        proc *p;
        /* the next poll due (processes in index order), unless a heap event comes first; at
           equal times the heap's events go first */
        int pi = -1;
        for (i = 0; i < W->np; i++)
            if (W->p[i].poll_at != NEVER && (pi < 0 || W->p[i].poll_at < W->p[pi].poll_at)) pi = i;
        memset(&e, 0, sizeof e);
        if (pi >= 0 && (W->nheap == 0 || W->p[pi].poll_at < W->heap[0].at)) {
            e.type = E_POLL;
            e.at = W->p[pi].poll_at;
            e.a = pi;
            e.gen = W->p[pi].poll_gen;
        } else {
            e = pop();
        }
        p = e.type == E_POLL || e.type == E_ACTION || e.type == E_HEAL || e.type == E_RESTART || e.type == E_FINISH ||
                          e.type == E_ZK_DISC || e.type == E_ZK_EXPIRE
                      ? (e.a >= 0 ? &W->p[e.a] : NULL)
                      : NULL;
        W->G = e.at;
        if (e.type == E_END) break;
        busy_count(0, 1);
        switch (e.type) {
        case E_POLL:
            poll_proc(p);
            break;
        case E_STORE: store_arrive((msg *)e.ptr, 0); break;
        case E_UNSTALL:
            if (W->G < W->stall_until) { push(W->stall_until, E_UNSTALL, 0, 0, 0, NULL); break; }
            while (W->stall_head) {
                msg *m = W->stall_head;
                W->stall_head = m->next;
                if (!W->stall_head) W->stall_tail = NULL;
                store_arrive(m, 1);
            }
            break;
        case E_COMMIT:
            if (e.gen != W->store_epoch) msg_free((msg *)e.ptr); /* not committed: lost with the crash */
            else store_request((msg *)e.ptr);
            break;
        case E_PROC: proc_receive((msg *)e.ptr); break;
        case E_ACTION:
            if (p->up && p->s[e.b].gen == e.gen) svc_action(p, e.b);
            break;
        case E_FAULT: fault_start(e.a); break;
        case E_HEAL:
            if (e.b == F_PARTITION) {
                if (e.gen != p->part_gen) break;
                trace(p->idx, T_HEAL, F_PARTITION, 0, NULL);
                if (W->pers == PERS_ZK && p->up) {
                    if (p->cl->zk_lost) proc_event(p->cl, SIMBA_EV_LOST);
                    proc_event(p->cl, SIMBA_EV_RESET);
                    p->cl->zk_lost = 0;
                }
                schedule_poll(p, W->G);
            } else {
                W->store_down = 0;
                trace(-1, T_HEAL, e.b, 0, NULL);
            }
            break;
        case E_RESTART:
            if (p->up) break;
            trace(p->idx, T_ACTION, 6, 0, NULL);
            proc_start(p);
            break;
        case E_FINISH:
            if (p->up && p->stopping) { p->cl->dead = 1; proc_down(p); }
            break;
        case E_SNAPSHOT:
            store_snapshot();
            push(W->G + rng_range(&W->r_store, 50, 600), E_SNAPSHOT, 0, 0, 0, NULL);
            break;
        case E_ZK_DISC:
            if (p->up && p->cl == e.ptr && e.gen == p->part_gen && W->G < p->part_until) proc_event(p->cl, SIMBA_EV_DISCONNECTED);
            break;
        case E_ZK_EXPIRE:
            if (p->up && p->cl == e.ptr && e.gen == p->part_gen) zk_expire(p, (client *)e.ptr);
            break;
        default: break;
        }
        /* A belief begins only inside a poll or an application's call (a step of a
           process); time only ends beliefs. Checking after each such step therefore sees
           every instant at which two could overlap. */
        if (e.type != E_STORE && e.type != E_COMMIT && e.type != E_PROC && e.type != E_SNAPSHOT && e.type != E_UNSTALL) check_world();
        if ((W->violated && W->stop_first) || W->busy) break;
    }
    if (W->sx->seeds == 0 || (uint64_t)W->run_faults < W->sx->min_faults) W->sx->min_faults = (uint64_t)W->run_faults;
    if (W->sx->seeds == 0 || (uint64_t)W->np < W->sx->min_procs) W->sx->min_procs = (uint64_t)W->np;
    if (W->sx->seeds == 0 || (uint64_t)W->G < W->sx->min_ms) W->sx->min_ms = (uint64_t)W->G;
    W->sx->seeds++;
    W->sx->sim_ms += (uint64_t)W->G;
    world_teardown();
}

/* ---- driver --------------------------------------------------------------------------- */

/* The real-time bound of a seed: a poll that never returns cannot be counted from inside,
   so SIGALRM reports the seed as a violation, hands this worker's figures to the parent
   and ends the worker (its remaining seeds are not run). Only async-signal-safe calls. */
static char alarm_msg[400];
static size_t alarm_len;
static int alarm_fd = -1; /* a worker's pipe to the parent, -1 when not forked */
static stats *alarm_sx;
static uint64_t alarm_seed;
static volatile int *stop_flag;
static void seed_alarm(int sig) {
    uint64_t f = alarm_seed + 1;
    (void)sig;
    if (write(2, alarm_msg, alarm_len) < 0) _exit(1);
    if (stop_flag) *stop_flag = 1;
    if (alarm_fd < 0) _exit(1);
    alarm_sx->violations++;
    if (write(alarm_fd, alarm_sx, sizeof *alarm_sx) != (ssize_t)sizeof *alarm_sx || write(alarm_fd, &f, sizeof f) != (ssize_t)sizeof f)
        _exit(3);
    _exit(0);
}
static void seed_alarm_arm(uint64_t seed) {
    int n = snprintf(alarm_msg, sizeof alarm_msg,
                     "VIOLATION seed %llu: busy: the seed still runs after %d s of real time (a simba_poll that never returns?)\n"
                     "  replay: make sim SEED=%llu\n",
                     (unsigned long long)seed, SIM_SEED_REAL_S, (unsigned long long)seed);
    alarm_len = n > 0 && (size_t)n < sizeof alarm_msg ? (size_t)n : 0;
    alarm_seed = seed;
    signal(SIGALRM, seed_alarm);
    alarm(SIM_SEED_REAL_S);
}

static void stats_add(stats *a, const stats *b) {
    int i;
    if (b->seeds && (!a->seeds || b->min_faults < a->min_faults)) a->min_faults = b->min_faults;
    if (b->seeds && (!a->seeds || b->min_procs < a->min_procs)) a->min_procs = b->min_procs;
    if (b->seeds && (!a->seeds || b->min_ms < a->min_ms)) a->min_ms = b->min_ms;
    a->seeds += b->seeds;
    a->sim_ms += b->sim_ms;
    for (i = 0; i < F_N; i++) a->faults[i] += b->faults[i];
    for (i = 0; i < INV_N; i++) a->checks[i] += b->checks[i];
    for (i = 0; i < PERS_N; i++) a->pers[i] += b->pers[i];
    a->violations += b->violations;
    a->ownerships += b->ownerships;
    a->requests += b->requests;
    a->dropped += b->dropped;
    a->duplicated += b->duplicated;
    a->work_runs += b->work_runs;
    a->value_sets += b->value_sets;
    a->yields += b->yields;
    a->yields_passed += b->yields_passed;
    a->sem_grants += b->sem_grants;
    a->reader_grants += b->reader_grants;
    a->writer_grants += b->writer_grants;
    if (b->busiest > a->busiest) a->busiest = b->busiest;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* With --stop, the first worker to fail tells the others (memory shared across fork):
   stop_flag, above. */

/* Runs seeds from + w, from + w + workers, ...; returns the first failing seed + 1 or 0. */
static uint64_t run_range(uint64_t from, uint64_t count, int w, int workers, int progress, stats *sx, int stop_first, int trace_all,
                          int old_requests) {
    static world world_storage;
    uint64_t i, failed = 0;
    double t0 = now_s(), last = t0;
    W = &world_storage;
    W->sx = sx;
    W->stop_first = stop_first;
    W->trace_all = trace_all;
    W->old_requests = old_requests;
    W->caphandles = 4096;
    W->handles = (handle *)malloc((size_t)W->caphandles * sizeof *W->handles);
    if (!W->handles) abort();
    alarm_sx = sx;
    for (i = (uint64_t)w; i < count; i += (uint64_t)workers) {
        seed_alarm_arm(from + i);
        run_seed(from + i);
        alarm(0);
        if (W->violated && !failed) failed = from + i + 1;
        if (failed && stop_first) {
            if (stop_flag) *stop_flag = 1;
            break;
        }
        if (stop_first && stop_flag && *stop_flag) break;
        if (progress && w == 0 && now_s() - last >= 2.0) {
            last = now_s();
            fprintf(stderr, "sim: %llu of %llu seeds, %.0f s, %llu violations so far\n", (unsigned long long)(i + 1), (unsigned long long)count,
                    last - t0, (unsigned long long)sx->violations);
        }
    }
    free(W->handles);
    free(W->vals);
    W->vals = NULL;
    W->nvals = W->capvals = 0;
    while (W->free_msgs) {
        msg *m = W->free_msgs;
        W->free_msgs = m->next;
        free(m);
    }
    free(W->heap);
    W->heap = NULL;
    W->capheap = W->nheap = 0;
    return failed;
}

static void usage(void) {
    fprintf(stderr, "usage: sim [--seeds N] [--from S] [--seed S] [--workers K] [--stop] [--progress] [--trace] [--old-requests]\n");
    exit(2);
}

int main(int argc, char **argv) {
    uint64_t count = 100000, from = 1;
    int workers = 2, progress = 0, stop_first = 0, trace_all = 0, old_requests = 0, i, k;
    stats total;
    double t0 = now_s();
    uint64_t first_failed = 0;
    int total_failed = 0;
    memset(&total, 0, sizeof total);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc) count = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--from") && i + 1 < argc) from = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) { from = strtoull(argv[++i], NULL, 10); count = 1; workers = 1; }
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc) workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stop")) stop_first = 1;
        else if (!strcmp(argv[i], "--progress")) progress = 1;
        else if (!strcmp(argv[i], "--trace")) trace_all = 1;
        else if (!strcmp(argv[i], "--old-requests")) old_requests = 1;
        else usage();
    }
    if (workers < 1 || workers > 64 || count == 0) usage();
    if ((uint64_t)workers > count) workers = (int)count;
    if (stop_first) {
        void *m = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) stop_flag = (volatile int *)m;
    }
    if (workers == 1) {
        uint64_t f = run_range(from, count, 0, 1, progress, &total, stop_first, trace_all, old_requests);
        if (f) first_failed = f - 1;
    } else {
        int fds[64];
        pid_t pids[64];
        for (k = 0; k < workers; k++) {
            int pfd[2];
            if (pipe(pfd) != 0) { perror("pipe"); return 2; }
            fflush(NULL);
            pids[k] = fork();
            if (pids[k] < 0) { perror("fork"); return 2; }
            if (pids[k] == 0) {
                stats sx;
                uint64_t f;
                memset(&sx, 0, sizeof sx);
                close(pfd[0]);
                alarm_fd = pfd[1];
                f = run_range(from, count, k, workers, progress, &sx, stop_first, trace_all, old_requests);
                if (write(pfd[1], &sx, sizeof sx) != (ssize_t)sizeof sx || write(pfd[1], &f, sizeof f) != (ssize_t)sizeof f) _exit(3);
                _exit(0);
            }
            close(pfd[1]);
            fds[k] = pfd[0];
        }
        for (k = 0; k < workers; k++) {
            stats sx;
            uint64_t f = 0;
            int status;
            if (read(fds[k], &sx, sizeof sx) != (ssize_t)sizeof sx || read(fds[k], &f, sizeof f) != (ssize_t)sizeof f) {
                fprintf(stderr, "sim: worker %d died\n", k);
                return 2;
            }
            close(fds[k]);
            waitpid(pids[k], &status, 0);
            stats_add(&total, &sx);
            if (f && (!total_failed || f - 1 < first_failed)) { first_failed = f - 1; total_failed = 1; } /* the lowest */
        }
    }
    {
        double secs = now_s() - t0;
        printf("sim: %llu seeds in %.1f s (%d worker%s), %.1f simulated hours\n", (unsigned long long)total.seeds, secs, workers,
               workers > 1 ? "s" : "", (double)total.sim_ms / 3600000.0);
        printf("  every run: at least %llu processes, %.1f simulated s, %llu faults\n", (unsigned long long)total.min_procs,
               (double)total.min_ms / 1000.0, (unsigned long long)total.min_faults);
        printf("  personalities:");
        for (i = 0; i < PERS_N; i++) printf(" %s %llu", pers_name[i], (unsigned long long)total.pers[i]);
        printf("\n  faults:");
        {
            uint64_t n = 0;
            for (i = 0; i < F_N; i++) n += total.faults[i];
            printf(" %llu (", (unsigned long long)n);
            for (i = 0; i < F_N; i++) printf("%s%s %llu", i ? ", " : "", fault_name[i], (unsigned long long)total.faults[i]);
            printf(")\n");
        }
        printf("  invariant checks:");
        {
            uint64_t n = 0;
            for (i = 0; i < INV_N; i++) n += total.checks[i];
            printf(" %llu (", (unsigned long long)n);
            for (i = 0; i < INV_N; i++) printf("%s%s %llu", i ? ", " : "", inv_name[i], (unsigned long long)total.checks[i]);
            printf(")\n");
        }
        printf("  requests %llu, ownerships %llu, scheduler work runs %llu, messages dropped %llu, duplicated %llu\n",
               (unsigned long long)total.requests, (unsigned long long)total.ownerships, (unsigned long long)total.work_runs,
               (unsigned long long)total.dropped, (unsigned long long)total.duplicated);
        printf("  values proclaimed %llu, yields %llu (passed %llu)\n", (unsigned long long)total.value_sets,
               (unsigned long long)total.yields, (unsigned long long)total.yields_passed);
        printf("  semaphore grants %llu, read-write grants %llu readers, %llu writers\n", (unsigned long long)total.sem_grants,
               (unsigned long long)total.reader_grants, (unsigned long long)total.writer_grants);
        printf("  busiest simulated second: %llu events and polls (bound %d)\n", (unsigned long long)total.busiest, SIM_BUSY_MAX);
        printf("  violations: %llu\n", (unsigned long long)total.violations);
        if (total.violations) printf("  first failing seed: %llu (make sim SEED=%llu)\n", (unsigned long long)first_failed, (unsigned long long)first_failed);
    }
    return total.violations ? 1 : 0;
}
