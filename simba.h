/*
 * simba.h v0.1.0 -- distributed mutex and leader election for C, stb-style single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file to create the implementation.
 * Every other file includes it plainly. Backend headers (simba_memory.h, simba_sql.h,
 * simba_redis.h, simba_zk.h, simba_pg.h) include this file themselves and follow the same
 * macro: the umbrella SIMBA_IMPLEMENTATION instantiates every simba header that file
 * includes; SIMBA_<NAME>_IMPLEMENTATION (CORE, MEMORY, SQL, REDIS, ZK, PG) just one, plus the
 * core, whose private helpers the backends use (so a backend is instantiated in the core's
 * file).
 *
 * THE HEADERS (each backend header includes this one; link what its line names)
 *   simba.h          the protocol, the poll loop, Locker, Scheduler, the backend interface
 *   simba_memory.h   in-memory backend with an injectable clock, for tests (-lpthread)
 *   simba_sql.h      SQLite (-lsqlite3)
 *   simba_redis.h    Redis, on hiredis's async API (-lhiredis)
 *   simba_zk.h       ZooKeeper (-lzookeeper_mt, -DTHREADED)
 *   simba_pg.h       PostgreSQL (-lpq)
 *   simba_mysql.h    MySQL and MariaDB, on MariaDB Connector/C (pkg-config libmariadb)
 *   adapters/simba_libuv.h, simba_libev.h, simba_libevent.h   drive a loop from libuv, libev
 *                    or libevent; installed as <simba/adapters/simba_libuv.h> and so on
 *
 * COMPILE-TIME OPTIONS (define before the implementation's include)
 *   SIMBA_API                  storage of the public functions (default extern), e.g.
 *                              static for a program-private copy, or a visibility attribute
 *   SIMBA_MALLOC(sz), SIMBA_FREE(p)   allocator of loop-independent memory (default malloc
 *                              / free; define both). Per-loop memory: simba_loop_desc alloc
 *   SIMBA_IMPLEMENTATION, SIMBA_<NAME>_IMPLEMENTATION   see above
 *   _POSIX_C_SOURCE            set to 200809L by the implementation when nothing was chosen
 *   SIMBA_HOLD_MS (50), SIMBA_HOLD_TAKEOVER_MS (10)   the longest a renewal or a waiter's
 *                              routine re-ask, and an ask at a lease end, may wait for
 *                              company in a batching backend (simba_req.company_ms; 0: never)
 *   (SIMBA_VALUE_MAX, 1024 bytes, the largest value stored with an ownership, is fixed: it
 *   sizes simba_owner.value, so a file that defines it to another value does not build)
 *
 * WHAT IT DOES
 *   For each mutex name, at most one contender owns it at a time. Ownership is a lease:
 *     acquired_at     when this ownership began (renewals keep it)
 *     ttl_at          the owner must renew before this
 *     transition_at   ttl_at + transition: only the owner may renew, nobody else may take it
 *   After transition_at anyone may take it. An owner renews at ttl_at - renew_margin (a
 *   little earlier: at random, then down to a step of the loop clock of at most margin / 16
 *   and 128 ms, so that many owners renew in one poll and one batch); a non-owner tries at
 *   transition_at + jitter in [jitter_min, jitter_max) (default [-200, 1000) ms, [0, 1000)
 *   when transition is 0); with no owner it tries at once; a waiter that the backend reports
 *   as first in line tries exactly at lease end. A release is pushed to the head waiter (see
 *   FAIRNESS).
 *
 *   Every ownership carries a 64-bit fence that strictly increases from one ownership of a
 *   mutex to the next (renewals keep it): pass it to the resource you protect so that it
 *   can reject a stale owner.
 *
 * FAIRNESS (one rule, kept in storage by every backend; the memory store is the reference)
 *
 *       owner                     wait queue, oldest first
 *     +-------+  release   +------+------+------+
 *     |   A   | ---------> |  B   |  C   |  D   | <-- A asks again at once: joins here
 *     +-------+ push to B  +------+------+------+
 *                              head
 *
 *   What the store does with each request (one line per transition):
 *     ACQUIRE, free, queue empty or asker is the head -----> owner (new fence, leaves queue)
 *     ACQUIRE, held by another, or free but asker not head -> queued at the back, or its
 *                                                             place refreshed
 *     ACQUIRE renew=1 by the owner inside its window ------> owner (same fence)
 *     RELEASE by the owner -> free, push to the head; RELEASE by a waiter -> leaves queue
 *     YIELD by the owner, a live waiter queued ----------> free, push to the head, the
 *                                                             yielder queued at the back
 *     YIELD by the owner, nobody waiting ---------------> unchanged (kept)
 *     no request from a waiter within its live_ms ---------> dropped from the queue
 *
 *   - A free mutex (released, or its lease fully over) with live waiters queued goes to the
 *     oldest live waiter only. A contender that finds it free but is not the head joins the
 *     back of the queue; so does a releaser that asks again at once.
 *   - The owner's renewal inside its window is not a new acquisition: unchanged by the queue.
 *   - Every ACQUIRE refreshes the asker's place. A waiter not heard from within
 *     req->live_ms (the core sends ttl + transition + jitter max + 1 s; a waiter asks again
 *     within ttl + transition + jitter max of its last ask) leaves the queue: a dead head
 *     keeps the mutex from the others no longer than that.
 *   - A release is pushed to the head; the head also tries right at lease end
 *     (reply.first_in_line). Every follower is pushed each new owner and value (the
 *     granted process announces it, vt->announce) and only re-times its ask from it: it
 *     never grants. The others keep their jittered timers; one that finds the
 *     mutex free but kept for the head asks again at doubling intervals from min_retry up
 *     to 1 s, until the head has taken it or its place has lapsed.
 *
 * LEADERSHIP VALUE, PROCLAIM, YIELD, AT RISK (docs/leadership.md)
 *   A contender may store a value with its ownership (simba_contend_desc.value/value_len:
 *   0..SIMBA_VALUE_MAX bytes, any bytes, NUL and non-UTF-8 included), so the others learn
 *   where the leader is, not just who. The store writes it in the same operation as the
 *   grant; renewals keep it; a release, a force-release or a yield that passes clears it;
 *   the next owner's grant stores its own. simba_owner carries it (value, value_len) to
 *   on_owner, on_acquired, simba_owner_get(), observers and simba_inspect's view; a waiter
 *   or observer learns it with the owner. Locker and Scheduler descs take one too.
 *     simba_set_value   proclaim: the owner replaces it under the same fence, same lease
 *                       (the store refuses it if the fence moved on: the tenure then ends,
 *                       "refused"); on_owner fires where it is seen
 *     simba_yield       hand over: with a live waiter queued the store passes the mutex to
 *                       the oldest one (pushed, as a release is) and queues the yielder at
 *                       the back, in one operation (on_released, "yielded"); with nobody
 *                       waiting the owner keeps it (on_event SIMBA_EVENT_YIELD_KEPT)
 *     on_at_risk        once per tenure, when a renewal has failed or is unanswered and
 *                       less than at_risk_ms (default half the renew margin) of the local
 *                       lease is left, with the time left: finish or checkpoint; on_released
 *                       ("lapsed") follows if no renewal is confirmed in time
 *   A service never shows an owner with a fence below one it has shown (fences only grow),
 *   nor one whose tenure the store has since answered over (nobody), so an observer never
 *   goes back to a contender that no longer leads (on a name with several holders the owner
 *   shown is one of them: see SEMAPHORES AND READ-WRITE LOCKS). An answer that shows nobody
 *   or a lower fence than a push heard while its ask was in flight may predate that grant:
 *   the pushed owner stays shown and the service asks again.
 *
 * SEMAPHORES AND READ-WRITE LOCKS (docs/semaphores.md)
 *   A name has one mode while anyone holds or waits on it: a mutex (one holder), a
 *   semaphore of N permits (permits N > 1 in the desc: at most N holders), or a read-write
 *   lock (shared 1: readers together; shared 0: a writer alone; a mutex is a read-write lock
 *   nobody reads). Each holder is a contender that owns exactly as a mutex owner does: its
 *   own lease, renewals, step-down at its local ttl_at, release pushed, on_acquired and
 *   on_released, value, yield, and its own fence, above every earlier grant's of the name.
 *   One FIFO wait queue per name; the store grants, in the same operation, after dropping
 *   holders past their transition end and waiters past their live_ms:
 *     semaphore N   a requester iff it is among the first (N - live holders) live waiters
 *                   (one not queued joins the back first); N = 1 is the mutex rule above
 *     read-write    a writer iff nobody holds and it is the head; a reader iff no writer
 *                   holds and every live waiter ahead of it is a reader (a waiting writer
 *                   holds back the readers behind it; readers at the head go together)
 *   Every contender of a name asks for the same N: another N while anyone holds or waits is
 *   refused by the store (SIMBA_ECONFLICT, "permits 3 asked, the name has 2 while held or
 *   waited on"). A waiter times its next ask by the holder whose permit frees first
 *   (simba_owner_get and on_owner show that one); simba_inspect lists every holder
 *   (simba_view.holder).
 *   permits < 0, above SIMBA_PERMITS_MAX, or shared with permits > 1 is SIMBA_EINVAL.
 *   A Scheduler is a single leader (permits 1).
 *
 * LEASE SAFETY
 *   All local decisions use the monotonic clock. A backend reports remaining durations; the
 *   local lease deadline counts from when the request was *sent*. An owner without a
 *   confirmed renewal steps down (on_released fires, simba_is_owner() turns false) at its
 *   local ttl_at, which is never later than the moment another contender could win on the
 *   server: the transition window lies between the two and absorbs clock drift and pauses.
 *
 * THE LOOP (no threads of its own)
 *       simba_loop *loop;
 *       simba_loop_new(&(simba_loop_desc){0}, &loop);          // zero-init = defaults
 *       simba_backend *be;
 *       simba_sql_open(loop, &sql_desc, &be);                   // or any backend header
 *       simba_service *svc;
 *       simba_contend(loop, be, &(simba_contend_desc){
 *           .mutex = "orders-leader", .ttl_ms = 10000, .transition_ms = 6000,
 *           .on_acquired = became_leader, .on_released = lost_leader, .user_data = app }, &svc);
 *       simba_start(svc);
 *       for (;;) {
 *           int64_t wait_ms = simba_poll(loop);   // never blocks; runs due timers and ready
 *                                                 // I/O; callbacks fire here
 *           ... sleep or poll(2) on simba_fds() up to wait_ms, or just tick next frame ...
 *       }
 *
 *   simba_poll() never blocks. simba_fds() gives the descriptors worth waiting on so that an
 *   existing poll(2) loop or tick can wake on a push instead of a timer. simba_wait() is the
 *   blocking convenience: poll(2) on those fds up to the next deadline, then simba_poll().
 *   With an injected clock, simba_loop_desc.sleep stands in for that poll(2)'s wait, so a
 *   unit test runs simba_locker_lock() and every blocking call in simulated time.
 *   Callback-driven loops (epoll, io_uring, libuv, libev, libevent) use the hooks instead:
 *   simba_loop_desc.fd_hook hears each descriptor start, change and stop (before its close),
 *   timer_hook hears when a call outside the poll needs a poll sooner; adapters/ has libuv,
 *   libev and libevent in one attach call each (simba_loop_set_hooks).
 *   Callbacks fire only inside simba_poll()/simba_wait(), on the caller's thread. Calling
 *   simba_poll()/simba_wait() from a callback returns SIMBA_ECALLBACK. simba_stop() or a free
 *   requested from a callback takes effect when the dispatch returns.
 *
 * TEARDOWN
 *   A clean exit: simba_loop_close(loop, timeout_ms) stops everything and waits until the
 *   backends have answered every release (simba_stop_wait() for one service,
 *   simba_locker_unlock_wait() for a locker). simba_loop_free() is the immediate form: the
 *   releases go out (behind whatever is in flight) and nothing waits for them.
 *   simba_loop_free() from a callback is carried out by the poll that dispatched it, which
 *   then returns SIMBA_ECLOSED (simba_wait() passes it on); a simba_locker_lock() or
 *   simba_lock() blocking on that loop returns SIMBA_ECLOSED at once. The same holds for a
 *   locker freed from a callback while its lock blocks. After SIMBA_ECLOSED every handle of
 *   the freed object is invalid: do not free it again.
 *
 * THREADS
 *   simba creates no threads (simba_zk's client library does; it only hands events over
 *   through a pipe; on a session expiry simba_zk starts one short-lived thread to replace the
 *   handle, since zookeeper_close joins the library's threads). A loop is not thread-safe: call every function of one loop, and receive
 *   every callback, on the thread that polls it. Separate loops on separate threads are
 *   independent. There is no global state. A memory store may be shared by loops on
 *   different threads (it has its own lock; simba_memory.h).
 *
 * BUILDING BLOCKS
 *   simba_contend   a contender: on_acquired / on_released, never for a mere renewal
 *   simba_observe   follows the owner of a mutex without contending (on_owner)
 *   simba_locker_*  blocking lock with timeout (drives the loop), non-blocking form, unlock
 *                   (sent before it returns), unlock_wait (until the backend confirms)
 *   simba_scheduler_* leader-gated periodic work, fixed rate or fixed delay
 *   simba_contender_id_host / _random   "counter:pid@host" or 32 random hex digits
 *
 * RELEASE REASONS AND STATISTICS
 *   on_released gets state->reason: why ownership left (stopped, unlocked, lapsed, refused,
 *   session, connection, yielded: see simba_reason); other callbacks get SIMBA_REASON_NONE.
 *   simba_service_stats() / simba_loop_stats() count acquisitions, releases by reason,
 *   renewals, waits, hold times and errors; counting and reading allocate nothing.
 *
 * LIFECYCLE
 *   INITIAL --start--> RUNNING --stop--> STOPPING --(release done)--> INITIAL
 *   (STARTING is seen only inside simba_start). Start or stop from another state returns
 *   SIMBA_ESTATE. A stopped service restarts with the same contender id. Stopping an owner
 *   releases the mutex in the backend and fires on_released exactly once, before the
 *   release goes out (from the poll after the stop); an acquire or renewal in flight does
 *   not hold it back: the release goes on a request of its own, sent behind that one.
 *
 * TIMING DEFAULTS (zero-initialised fields mean the default)
 *   ttl_ms, transition_ms  both 0 -> 10000 / 6000. Otherwise ttl_ms must be > 0 and
 *                          transition_ms >= 0 (0 = no transition window).
 *   renew_margin_ms        0 -> ttl / 3
 *   jitter_min/max_ms      both 0 -> [-200, 1000), or [0, 1000) when transition is 0
 *   min_retry_ms           0 -> 50: a failed attempt never retries sooner than this
 *   backoff_min/max_ms     0 -> 100 / 5000: after a backend error, doubling, randomised
 *
 * DURATIONS (one limit)
 *   Every duration the API takes -- ttl_ms, transition_ms and their sum (the lease), jitter,
 *   retry and backoff bounds, refresh_ms, period_ms, initial_delay_ms, the timeouts of
 *   simba_lock / simba_locker_lock / simba_locker_unlock_wait / simba_stop_wait /
 *   simba_loop_close / simba_wait -- is at most
 *   SIMBA_MAX_MS (2^40 ms, about 34 years), checked the same way at every entry point: a
 *   larger one is refused with SIMBA_EINVAL and simba_loop_errmsg() names the field, its
 *   value and the bound. (A negative timeout still means "no limit".)
 *   A backend that quarantines after a data loss (Redis, PostgreSQL) bounds the lease
 *   further: its max_lease_ms (default SIMBA_MAX_LEASE_DEFAULT_MS, one minute), read with
 *   simba_backend_max_lease(). simba_contend / simba_locker_new / simba_scheduler_new refuse
 *   ttl_ms + transition_ms above it (SIMBA_EINVAL, the same words), since the quarantine
 *   after a loss lasts max_lease_ms and must outlast every lease that may have been live.
 *
 * DATA-LOSS QUARANTINE (an event, not a silent wait)
 *   When the store cannot rule out a live lease it lost (Redis: first use of a server not
 *   declared empty, a restart without persistence, FLUSHALL, eviction; PostgreSQL: crash
 *   recovery), it grants nobody for up to max_lease_ms. A contender then gets on_event with
 *   SIMBA_EVENT_QUARANTINE once (when grants resume, and the backend's words), the loop
 *   logs it at WARN, simba_stats counts it (quarantines, quarantine_left_ms), and the
 *   contender asks again right when the quarantine ends.
 *
 * NAMES
 *   Mutex names: 1..SIMBA_NAME_MAX bytes, each a letter, a digit or one of  - _ . : @ + = ,
 *   (nothing else: no space, quote, semicolon, slash or brace), and not "." or "..". The
 *   same rule holds on every backend so a name never works on one and fails on another.
 *   Contender ids: 1..SIMBA_ID_MAX printable non-space ASCII bytes.
 *
 * FUNCTION NAMES (one pattern for the three handles that hold a name)
 *   constructor   simba_contend / simba_observe, simba_locker_new, simba_scheduler_new
 *   destructor    simba_service_free, simba_locker_free, simba_scheduler_free
 *   verbs         simba_start / simba_stop / simba_yield / simba_set_value, and the same
 *                 verbs after the handle's prefix: simba_locker_yield, simba_scheduler_yield
 *   do I hold it  simba_is_owner, simba_locker_is_owner, simba_scheduler_is_owner
 *   my fence      simba_fence, simba_locker_fence, simba_scheduler_fence
 *   accessors     simba_service_<field>: status, contender_id, mutex, user_data, stats
 *   The blocking twin of a non-blocking call ends in _wait (simba_stop_wait,
 *   simba_inspect_wait, simba_locker_unlock_wait); simba_lock and simba_locker_lock block
 *   by nature, simba_locker_try is their non-blocking form.
 *
 * ERRORS
 *   Every public function checks its arguments and returns a simba_result (or, where it
 *   returns a count or a delay, a negative simba_result). simba_strerror() names a code;
 *   simba_backend_errmsg() keeps the backend's own last message.
 *
 * MEMORY AND LOGGING
 *   Define SIMBA_MALLOC / SIMBA_FREE before the implementation to replace malloc/free, or
 *   give an allocator in simba_loop_desc. Steady-state polling allocates nothing. Logging
 *   goes through simba_loop_desc.log; without it, WARN and ERROR messages go to stderr,
 *   each cause once per loop (a hook silences that).
 *
 * BACKENDS
 *   A backend is a simba_backend_vt plus an opaque impl pointer, registered on a loop with
 *   simba_backend_new(). The core submits requests (acquire-or-renew, release, read, and
 *   the owner's SET_VALUE and YIELD, each one store operation; see simba_op); the
 *   backend completes each one exactly once, later, with simba_req_done(), and may push
 *   events (release, owner change, connection reset) with simba_backend_event(). See the
 *   comments at simba_backend_vt. The in-memory backend (simba_memory.h) is the reference.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  public declarations   >>impl  the implementation   >>open  the constructor
 *   >>process  the work of one poll   >>close  teardown   >>stats  statistics
 *   >>inspect  simba_inspect, simba_list, simba_force_release   >>kit  the backend kit
 *
 * LICENSE: MIT, see the end of this file.
 */
#ifndef SIMBA_H
#define SIMBA_H

/* The implementation needs POSIX 2008 (clock_gettime, poll, pipe). When this header is the
   first include of the implementation file, ask for it here; otherwise compile with
   -D_POSIX_C_SOURCE=200809L (or _GNU_SOURCE / _DEFAULT_SOURCE). */
#if (defined(SIMBA_IMPLEMENTATION) || defined(SIMBA_CORE_IMPLEMENTATION)) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>

struct pollfd;

#ifdef __cplusplus
extern "C" {
#endif

#ifndef SIMBA_API
#define SIMBA_API extern
#endif

#define SIMBA_VERSION "0.1.0"
#define SIMBA_NAME_MAX 128 /* mutex name, bytes */
#define SIMBA_ID_MAX 128   /* contender id, bytes */
/* Largest duration accepted anywhere (about 34 years), checked the same way for every
   duration of the API (see DURATIONS): sums of two never overflow. */
#define SIMBA_MAX_MS ((int64_t)1 << 40)
/* The default lease bound (ttl + transition) of a backend that quarantines after a data
   loss, its max_lease_ms: room for leases of almost four times the default one (10 s + 6 s),
   while a loss costs at most a minute without grants. */
#define SIMBA_MAX_LEASE_DEFAULT_MS 60000
/* simba_poll() never asks to be called later than this. */
#define SIMBA_MAX_WAIT_MS 60000
/* Largest value stored with an ownership, bytes (see LEADERSHIP VALUE). Fixed, not an
   option: it sizes simba_owner.value, so every file of a program and every process on a
   store must agree; a file that defines it to another value does not build. */
#if defined(SIMBA_VALUE_MAX) && SIMBA_VALUE_MAX != 1024
#error "SIMBA_VALUE_MAX is fixed at 1024 (it sizes simba_owner.value): do not define it"
#endif
#undef SIMBA_VALUE_MAX
#define SIMBA_VALUE_MAX 1024
/* Most permits a semaphore name may have (simba_contend_desc.permits; see SEMAPHORES AND
   READ-WRITE LOCKS): every holder is a lease the store keeps and lists. */
#define SIMBA_PERMITS_MAX 1024

/* >>api */
typedef enum simba_result {
    SIMBA_OK = 0,
    SIMBA_EINVAL = -1,     /* bad argument */
    SIMBA_ESTATE = -2,     /* wrong lifecycle state for this call */
    SIMBA_ENOMEM = -3,     /* allocation failed */
    SIMBA_ETIMEDOUT = -4,  /* deadline passed */
    SIMBA_EBACKEND = -5,   /* the backend failed; see simba_backend_errmsg() */
    SIMBA_EBUSY = -6,      /* in use (backend still has services, storage busy) */
    SIMBA_EAGAIN = -7,     /* not yet: try again later (non-blocking lock pending) */
    SIMBA_ECLOSED = -8,    /* backend closed or request cancelled */
    SIMBA_EEXIST = -9,     /* this contender id already contends for this mutex here */
    SIMBA_ECALLBACK = -10, /* not allowed from inside a simba callback */
    SIMBA_ECONN = -11,     /* connection to the server lost or not established */
    SIMBA_ESYS = -12,      /* a system call failed (errno kept in the message) */
    SIMBA_ELOST = -13,     /* the lease had lapsed before the unlock (simba_locker_unlock) */
    SIMBA_EFENCE = -14,    /* the caller's fence holds no live lease any more: a fenced write,
                              simba_set_value, simba_yield, simba_force_release refused */
    SIMBA_ECONFLICT = -15, /* the store holds the name with other permits or another mode */
    SIMBA_EDENIED = -16    /* the store refuses this login or role (authentication, a missing
                              privilege, role or database, another schema version): asking
                              again does not help until an operator acts; the words say what */
} simba_result;

SIMBA_API const char *simba_strerror(int rc);

typedef struct simba_loop simba_loop;
typedef struct simba_backend simba_backend;
typedef struct simba_service simba_service;
typedef struct simba_locker simba_locker;
typedef struct simba_scheduler simba_scheduler;
typedef struct simba_req simba_req;

/* ---- owner model ------------------------------------------------------------------- */

/* An owner as this process sees it. Times are on the loop's monotonic clock (ms). */
typedef struct simba_owner {
    char id[SIMBA_ID_MAX + 1]; /* "" = nobody */
    int64_t acquired_at;       /* when this ownership began; renewals keep it */
    int64_t ttl_at;            /* end of the exclusive lease */
    int64_t transition_at;     /* end of the transition window */
    uint64_t fence;            /* strictly increases from ownership to ownership */
    size_t value_len;          /* the owner's value (see LEADERSHIP VALUE): value_len bytes, */
    unsigned char value[SIMBA_VALUE_MAX]; /* any bytes, NUL included; 0 = none */
} simba_owner;

/* Why ownership left this contender: on_released says it in simba_state.reason. */
typedef enum simba_reason {
    SIMBA_REASON_NONE = 0,   /* not a release (on_acquired, on_owner) */
    SIMBA_REASON_STOPPED,    /* the user stopped or freed the service (simba_stop, ..._free) */
    SIMBA_REASON_UNLOCKED,   /* a Locker's owner unlocked (simba_locker_unlock, simba_unlock) */
    SIMBA_REASON_LAPSED,     /* no renewal confirmed by the local ttl_at (server hung or failing,
                                answer too late) */
    SIMBA_REASON_REFUSED,    /* the server answered a renewal with another owner or none */
    SIMBA_REASON_SESSION,    /* the backend reported the ownership gone (SIMBA_EV_LOST:
                                ZooKeeper session expired) */
    SIMBA_REASON_CONNECTION, /* the backend lost its connection (SIMBA_EV_DISCONNECTED) */
    SIMBA_REASON_YIELDED,    /* simba_yield passed the ownership to the oldest live waiter */
    SIMBA_REASON_COUNT_      /* number of reasons; may grow (see SIMBA_REASON_SLOTS) */
} simba_reason;
/* "stopped", "unlocked", "lapsed", "refused", "session", "connection", "yielded", "none"; "unknown"
   for a value out of range. */
SIMBA_API const char *simba_reason_str(int reason);

/* The pair handed to callbacks: the owner before and after a change. */
typedef struct simba_state {
    const simba_owner *before;
    const simba_owner *after;
    simba_reason reason; /* on_released: why; SIMBA_REASON_NONE in other callbacks */
} simba_state;

/* Time-based predicates: an owner is one whose window has not passed. */
SIMBA_API int simba_owner_is(const simba_owner *o, const char *id); /* id equal and non-empty */
SIMBA_API int simba_owner_in_ttl(const simba_owner *o, int64_t now);        /* ttl_at > now */
SIMBA_API int simba_owner_in_transition(const simba_owner *o, int64_t now); /* ttl_at <= now <= transition_at */
SIMBA_API int simba_owner_in_lease(const simba_owner *o, int64_t now);     /* id set and transition_at >= now */

/* ---- the loop ---------------------------------------------------------------------- */

typedef enum simba_log_level { SIMBA_LOG_DEBUG, SIMBA_LOG_INFO, SIMBA_LOG_WARN, SIMBA_LOG_ERROR } simba_log_level;

typedef struct simba_loop_desc {
    /* Monotonic clock in ms; default CLOCK_MONOTONIC. Inject for exact tests. */
    int64_t (*now_ms)(void *user);
    void *clock_user;
    /* Optional, with an injected clock: where a blocking call (simba_wait and every call
       built on it: simba_locker_lock, simba_lock, simba_stop_wait, simba_loop_close, the
       _wait forms) would block in poll(2) for ms > 0, the descriptors are checked without
       waiting and, when none is ready, sleep is called instead, so a test advances its
       clock there and blocking calls run in simulated time. It must not call simba. */
    void (*sleep)(void *user, int64_t ms);
    void *sleep_user;
    /* Uniform 32-bit random numbers; default a per-loop xorshift seeded from the clock,
       pid and address. Inject for exact tests. */
    uint32_t (*random)(void *user);
    void *random_user;
    /* Allocator; default SIMBA_MALLOC / SIMBA_FREE. Both or neither. */
    void *(*alloc)(void *user, size_t size);
    void (*free)(void *user, void *ptr);
    void *alloc_user;
    /* Log hook. Without one, WARN and ERROR messages go to stderr, each cause once per loop
       (the message without its numbers), but for a call's own failure, which its result
       and simba_loop_errmsg() carry; installing a hook silences that default. */
    void (*log)(void *user, simba_log_level level, const char *msg);
    void *log_user;
    simba_log_level log_level; /* lowest level passed to log (default DEBUG when log set) */
    /* Optional fd hook (event-loop adapters): events POLLIN/POLLOUT when simba starts watching
       fd or changes its interest, 0 when it stops; a stop always comes before the fd is
       closed, so a number reused by a new socket is reported as stop, then start. */
    void (*fd_hook)(void *user, int fd, short events);
    void *fd_user;
    /* Optional timer hook: a call made outside simba_poll (start, stop, lock, try, unlock,
       free, contend, a backend event) moved the next deadline earlier: poll within wait_ms.
       Both hooks run on the loop's thread, inside simba_poll or inside such a call; they may
       only (re)arm or cancel the caller's watchers and timers, never call simba functions. */
    void (*timer_hook)(void *user, int64_t wait_ms);
    void *timer_user;
    /* The work one simba_poll does before it returns 0 ("call me again at once") with the
       rest queued: a time budget in µs of the real monotonic clock (default 500, so that the
       step in progress and the I/O check still end within 1 ms), and optionally a count of
       steps (a due timer, a completion, an event, a request a backend executes; 0 = no count
       bound). Time is what a caller's tick cares about and costs one vDSO clock read per
       step; the count bound makes the limit exact for tests with an injected clock. */
    int64_t poll_budget_us;
    int poll_max_steps;
} simba_loop_desc;

/* >>open */
SIMBA_API simba_result simba_loop_new(const simba_loop_desc *desc, simba_loop **out);
/* Frees every service, locker, scheduler and backend of the loop at once, best effort:
   every contender sends its release (behind an acquire or renewal in flight, which the
   backend sends first), the backends put it on the wire, and nothing waits for an answer
   beyond what a backend's header states (1 s at most: ZooKeeper lets its deletes be answered,
   MySQL, one command at a time, waits for the one in flight to send the release behind it).
   A release still unsent when a backend closes (a server not connected, a busy SQLite
   file) is lost: the mutex is then free when its lease ends. To wait for the releases, use
   simba_loop_close(). From inside a callback it is deferred until dispatch returns: the
   simba_poll()/simba_wait() that carries it out returns SIMBA_ECLOSED, and a blocking
   simba_locker_lock()/simba_lock() returns SIMBA_ECLOSED at once; every handle is gone. */
SIMBA_API simba_result simba_loop_free(simba_loop *loop);
/* The clean exit: stops every service, unlocks every locker, stops every scheduler, then
   drives the loop until every release is answered or timeout_ms passes (< 0 = no limit),
   then frees the loop as simba_loop_free() does. SIMBA_OK when every release was
   confirmed, SIMBA_ETIMEDOUT when the time ran out first, or the error of a release the
   backend failed (the mutex is then free when its lease ends); the loop is freed in each
   case. From a callback: SIMBA_ECALLBACK, nothing done. SIMBA_ECLOSED: a callback freed
   the loop while it waited. */
SIMBA_API simba_result simba_loop_close(simba_loop *loop, int64_t timeout_ms);
SIMBA_API int64_t simba_now(simba_loop *loop);
/* Why the last call on this loop failed, in words ("" if none). */
SIMBA_API const char *simba_loop_errmsg(const simba_loop *loop);

/* Non-blocking step: checks simba's fds with a zero timeout, processes ready I/O, runs due
   timers and state machines, dispatches callbacks. Returns the ms until it wants to be
   called again (0..SIMBA_MAX_WAIT_MS), or a negative simba_result: SIMBA_ECLOSED when a
   callback freed the loop and this poll carried the free out (stop using the handle), so
   `while (simba_poll(loop) >= 0)` ends there. */
SIMBA_API int64_t simba_poll(simba_loop *loop);
/* The same, for a caller that has already polled the fds from simba_fds() itself: hands in
   the revents it got (n may be 0: then no I/O is attempted beyond what timers need). */
SIMBA_API int64_t simba_poll_ready(simba_loop *loop, const struct pollfd *ready, int n);
/* Writes up to cap descriptors worth waiting on. Returns how many there are (may exceed
   cap: call again with more room), or a negative simba_result. It is a snapshot: between two
   polls a backend may close a descriptor and open another that gets the same number, so a
   caller that registers fds with epoll/kqueue must use fd_hook instead of diffing numbers. */
SIMBA_API int simba_fds(simba_loop *loop, struct pollfd *out, int cap);
/* Installs (or, with NULLs, removes) the fd and timer hooks of simba_loop_desc on a live
   loop: the old fd hook is told to stop every descriptor, the new one to start each, and the
   new timer hook gets the current wait. For adapters (adapters/). SIMBA_ECALLBACK from a
   callback. */
SIMBA_API simba_result simba_loop_set_hooks(simba_loop *loop, void (*fd_hook)(void *user, int fd, short events), void *fd_user,
                                            void (*timer_hook)(void *user, int64_t wait_ms), void *timer_user);
/* Blocking convenience: poll(2) on simba_fds() until the next deadline or max_ms
   (negative = no cap), then simba_poll(); with simba_loop_desc.sleep, a zero-timeout check
   of the fds and, if none is ready, sleep(ms) instead. Passes SIMBA_ECLOSED through. */
SIMBA_API simba_result simba_wait(simba_loop *loop, int64_t max_ms);

/* ---- contenders and observers -------------------------------------------------------- */

typedef enum simba_status { SIMBA_INITIAL, SIMBA_RUNNING, SIMBA_STOPPING } simba_status;

typedef void (*simba_state_fn)(simba_service *svc, const simba_state *state, void *user_data);

/* What a contender should know that is not an ownership change (on_event). */
typedef enum simba_service_event_type {
    /* the store grants nobody until .until: it may have lost a lease that is still live
       (see DATA-LOSS QUARANTINE); the contender asks again then */
    SIMBA_EVENT_QUARANTINE = 1,
    /* simba_yield found no live waiter: this contender still owns the mutex, same fence
       (a yield that passes it on is on_released with SIMBA_REASON_YIELDED instead) */
    SIMBA_EVENT_YIELD_KEPT = 2,
    /* simba_yield or simba_set_value failed in the backend (msg says why); ownership is
       unchanged as far as this contender knows, and renewals go on */
    SIMBA_EVENT_YIELD_FAILED = 3,
    SIMBA_EVENT_VALUE_FAILED = 4
} simba_service_event_type;
typedef struct simba_service_event {
    simba_service_event_type type;
    int64_t until;   /* QUARANTINE: loop time (simba_now) when grants may resume; else 0 */
    int64_t left_ms; /* QUARANTINE: until - now; else 0 */
    const char *msg; /* the backend's words, e.g. "... marker was missing or stale: first use,
                        restart without persistence, FLUSHALL or eviction" */
} simba_service_event;
typedef void (*simba_event_fn)(simba_service *svc, const simba_service_event *event, void *user_data);

typedef struct simba_contend_desc {
    const char *mutex;        /* required */
    const char *contender_id; /* NULL = a host id, simba_contender_id_host() */
    int64_t ttl_ms;           /* see TIMING DEFAULTS */
    int64_t transition_ms;
    int64_t renew_margin_ms;
    int64_t jitter_min_ms, jitter_max_ms;
    int64_t min_retry_ms;
    int64_t backoff_min_ms, backoff_max_ms;
    simba_state_fn on_acquired; /* ownership moved to this contender */
    simba_state_fn on_released; /* ownership left this contender (lost, stepped down, stopped) */
    simba_state_fn on_owner;    /* optional: every change of owner id or fence it learns of */
    void *user_data;
    /* 1: an owner steps down at once when its backend loses the connection (reason
       "connection"); 0: it keeps its lease to the local deadline, as the server would */
    int step_down_on_disconnect;
    /* optional: events that are not ownership changes (simba_service_event_type), from the poll */
    simba_event_fn on_event;
    /* optional: the value stored with each ownership this contender gains (LEADERSHIP
       VALUE): value_len bytes (0..SIMBA_VALUE_MAX, any bytes), copied at simba_contend */
    const void *value;
    size_t value_len;
    /* optional: renewals have failed and the local lease has less than at_risk_ms left
       (0 = half of renew_margin_ms): called once per tenure, left_ms = what is left;
       on_released (lapsed) follows if no renewal is confirmed in time (AT RISK) */
    void (*on_at_risk)(simba_service *svc, int64_t left_ms, void *user_data);
    int64_t at_risk_ms;
    /* optional (SEMAPHORES AND READ-WRITE LOCKS): permits 0 or 1 = one holder at a time (a
       mutex, or a read-write lock's writer); N > 1 = at most N holders ("at most N
       leaders"), 2..SIMBA_PERMITS_MAX, the same N in every contender of the name. shared 1
       = a reader: holds with other readers, never with a writer (permits must be 0 or 1) */
    int permits;
    int shared;
} simba_contend_desc;

typedef struct simba_observe_desc {
    const char *mutex;       /* required */
    simba_state_fn on_owner; /* every change of owner id or fence */
    int64_t refresh_ms;      /* 0 -> 1000: longest time between reads while an owner holds */
    void *user_data;
} simba_observe_desc;

SIMBA_API simba_result simba_contend(simba_loop *loop, simba_backend *be, const simba_contend_desc *desc, simba_service **out);
SIMBA_API simba_result simba_observe(simba_loop *loop, simba_backend *be, const simba_observe_desc *desc, simba_service **out);
SIMBA_API simba_result simba_start(simba_service *svc);
/* RUNNING -> STOPPING: local ownership ends now; the next poll fires on_released and right
   after it sends the release (behind an acquire or renewal in flight, on a request of its
   own, which the backend no longer holds for company); INITIAL once the backend answered
   it. A program that stops and then exits without polling again sends it with
   simba_loop_free(), or waits for it with simba_stop_wait() or simba_loop_close(). */
SIMBA_API simba_result simba_stop(simba_service *svc);
/* Stops if running, then blocks, driving the loop, until the backend has answered the
   release: SIMBA_OK once it confirmed it (or when no release was going out),
   SIMBA_ETIMEDOUT after timeout_ms (< 0 = no limit; 0 = do not wait), or the release's
   error (the mutex is then free when its lease ends). From a callback: SIMBA_ECALLBACK.
   SIMBA_ECLOSED: a callback freed the loop, or this service, while it waited. */
SIMBA_API simba_result simba_stop_wait(simba_service *svc, int64_t timeout_ms);
/* Stops if needed and frees. The release still goes out; the handle is invalid at once. */
SIMBA_API simba_result simba_service_free(simba_service *svc);
SIMBA_API simba_status simba_service_status(const simba_service *svc);
SIMBA_API int simba_is_owner(const simba_service *svc);
SIMBA_API uint64_t simba_fence(const simba_service *svc); /* 0 when not owner */
SIMBA_API simba_result simba_owner_get(const simba_service *svc, simba_owner *out); /* latest view */
SIMBA_API const char *simba_service_contender_id(const simba_service *svc);
SIMBA_API const char *simba_service_mutex(const simba_service *svc);
SIMBA_API void *simba_service_user_data(const simba_service *svc);
/* Proclaim: the owner replaces the value stored with its ownership, same fence, same lease
   (LEADERSHIP VALUE). Non-blocking: the store answers in a later poll; on_owner then fires
   (observers learn it at their next read or push). SIMBA_EFENCE when this contender does not
   own the mutex (SIMBA_ESTATE for an observer); SIMBA_EINVAL when len > SIMBA_VALUE_MAX or value is NULL with len > 0 (the
   errmsg names the field, the length and the limit). The value is also the one the next
   ownership stores. If the store finds the fence gone, ownership ends as a refused renewal
   ends it (on_released, reason "refused"; simba_stats.last_error SIMBA_EFENCE). */
SIMBA_API simba_result simba_set_value(simba_service *svc, const void *value, size_t len);
/* Hand over on purpose (YIELD): in one store operation, if a live waiter is queued, the
   mutex passes to the oldest one (pushed to it, as a release is) and this contender joins
   the back of the queue as a waiter; otherwise it keeps it. Non-blocking: the outcome comes
   from a later poll, on_released with SIMBA_REASON_YIELDED when passed, on_event
   SIMBA_EVENT_YIELD_KEPT when kept (same fence and lease). From the call until the outcome
   simba_is_owner() is 0 and simba_fence() 0, with no callback: the store may have passed it
   on already. A yield the backend fails (SIMBA_EVENT_YIELD_FAILED) is settled by the next
   renewal (asked for at once): ownership back, or on_released (refused) if it had passed.
   SIMBA_EFENCE when not the owner (its fence holds no lease), SIMBA_ESTATE when a yield is
   under way. A store that finds the fence gone ends ownership as for simba_set_value. */
SIMBA_API simba_result simba_yield(simba_service *svc);

/* ---- statistics ---------------------------------------------------------------------- */

#define SIMBA_STATS_VERSION 3
#define SIMBA_REASON_SLOTS 16 /* releases_by_reason[] room: reasons may be added later */

/* Counters of one service, or of every service a loop has had (simba_loop_stats). Set size
   to sizeof(simba_stats) before the call: a program built against an older, smaller struct
   gets its prefix filled. Times are ms on the loop's clock. Reading allocates nothing. */
typedef struct simba_stats {
    uint32_t size;    /* in: sizeof(simba_stats) as the caller knows it; out: bytes filled */
    uint32_t version; /* out: SIMBA_STATS_VERSION */
    uint64_t services;     /* loop: services now open (contenders, observers); service: 1 */
    uint64_t owned;        /* mutexes owned now (service: 0 or 1) */
    uint64_t acquisitions; /* ownerships gained (on_acquired) */
    uint64_t releases;     /* ownerships left (on_released), any reason */
    uint64_t releases_by_reason[SIMBA_REASON_SLOTS]; /* indexed by simba_reason */
    uint64_t step_downs;   /* releases the user did not ask for: lapsed, refused, session,
                              connection */
    uint64_t attempts;     /* ACQUIRE requests sent (renewals included) */
    uint64_t renewals;     /* renewals the server confirmed in time */
    uint64_t renewals_failed; /* renewals answered with an error, refused, or confirmed late */
    uint64_t errors;       /* requests of any kind answered with an error */
    int64_t held_ms;       /* how long the current ownership has lasted (loop: the sum) */
    int64_t held_total_ms; /* all ownerships, the current one included */
    uint64_t waits;        /* completed waits: from start (or the last release) to acquisition */
    int64_t wait_total_ms;
    int64_t wait_max_ms;
    int64_t waiting_ms;    /* the wait in progress (loop: the longest), 0 when none */
    int last_error;        /* simba_result of the latest failed request, SIMBA_OK if none */
    int64_t last_error_at; /* loop time of it */
    char last_error_msg[128];
    uint64_t in_flight;    /* requests sent and not yet answered (service: 0 or 1); version 2 */
    uint64_t quarantines;  /* data-loss quarantines met (SIMBA_EVENT_QUARANTINE); version 3 */
    int64_t quarantine_left_ms; /* how long the store still grants nobody, as it last said
                                   (loop: the longest); 0 when none; version 3 */
} simba_stats;

/* Fill *out (out->size set by the caller, at least up to .version + the first counter).
   A freed service is refused; an observer counts only attempts (reads) and errors. */
SIMBA_API simba_result simba_service_stats(const simba_service *svc, simba_stats *out);
/* Totals of every service the loop has had, freed ones included (services and owned: now). */
SIMBA_API simba_result simba_loop_stats(const simba_loop *loop, simba_stats *out);
/* Why a Locker's lock last left its holder (read it in on_lost, or after an unlock):
   SIMBA_REASON_NONE if it never did. */
SIMBA_API simba_reason simba_locker_last_reason(const simba_locker *lk);
/* The Locker's contender, for simba_service_stats() (valid until the locker is freed). */
SIMBA_API const simba_service *simba_locker_service(const simba_locker *lk);

/* ---- locker ------------------------------------------------------------------------ */

/* The Locker and the Scheduler are contenders underneath: their descs carry every lease
   setting of simba_contend_desc under the same names and meanings (mutex, contender_id,
   ttl_ms ... backoff_max_ms, step_down_on_disconnect, value, at_risk_ms), and their own
   forms of on_event and on_at_risk. */
typedef struct simba_locker_desc {
    const char *mutex;
    const char *contender_id; /* NULL = host id */
    int64_t ttl_ms, transition_ms; /* see TIMING DEFAULTS */
    int64_t renew_margin_ms;       /* as in simba_contend_desc, 0 = default */
    int64_t jitter_min_ms, jitter_max_ms;
    int64_t min_retry_ms;
    int64_t backoff_min_ms, backoff_max_ms;
    /* optional: the lock was lost while held (lease not renewed in time); also, from the
       next poll, when an unlock finds that the lease had already lapsed (SIMBA_ELOST) */
    void (*on_lost)(simba_locker *lk, void *user_data);
    void *user_data;
    int step_down_on_disconnect; /* as in simba_contend_desc */
    /* optional: a pending simba_locker_try() became held (called from the poll), so that a
       callback-driven loop need not call try again and again; simba_locker_lock() returns
       instead */
    void (*on_locked)(simba_locker *lk, void *user_data);
    const void *value; /* as in simba_contend_desc */
    size_t value_len;
    /* optional: as simba_contend_desc.on_at_risk; on_lost follows if the lease lapses */
    void (*on_at_risk)(simba_locker *lk, int64_t left_ms, void *user_data);
    int64_t at_risk_ms;
    /* as in simba_contend_desc: permits N > 1 = one of at most N holders of a semaphore;
       shared 1 = a reader of a read-write lock, 0 = a writer (or a mutex's owner) */
    int permits;
    int shared;
    /* optional: as simba_contend_desc.on_event (quarantine, yield kept or failed, value
       failed), from the poll */
    void (*on_event)(simba_locker *lk, const simba_service_event *event, void *user_data);
} simba_locker_desc;

SIMBA_API simba_result simba_locker_new(simba_loop *loop, simba_backend *be, const simba_locker_desc *desc, simba_locker **out);
/* Blocks, driving the loop, until owned (SIMBA_OK) or timeout_ms passes (SIMBA_ETIMEDOUT;
   timeout_ms < 0 = no limit). timeout_ms bounds the wait for another owner, not for the
   backend: the first answer that names an owner is always awaited (at most ttl_ms), so
   timeout 0 means one attempt on every backend: SIMBA_OK if the mutex was free,
   SIMBA_ETIMEDOUT if someone else holds it. Already held or pending: SIMBA_ESTATE.
   SIMBA_ECLOSED: a callback freed the loop or this locker while it waited; handle gone. */
SIMBA_API simba_result simba_locker_lock(simba_locker *lk, int64_t timeout_ms);
/* Non-blocking form: starts contending if idle (once an earlier release has been
   answered); SIMBA_OK once held, SIMBA_EAGAIN while pending. Call again from the tick loop. */
SIMBA_API simba_result simba_locker_try(simba_locker *lk);
/* Releases (or gives up a pending try). Not held and not pending: SIMBA_ESTATE.
   Outside a callback the release is submitted to the backend before this returns (no user
   callback runs from it); it is confirmed later, by a poll. From a callback it goes out
   when the dispatch returns. If an acquire or renewal is in flight, the release is sent
   behind it. To be sure the backend has it (before sleeping or exiting), use
   simba_locker_unlock_wait(). SIMBA_ELOST: the lock had been lost before this unlock (its
   lease lapsed, a frozen process's included, or the server refused a renewal): the
   critical section was not protected to its end; on_lost fires (from the next poll, if it
   has not yet) and simba_locker_last_reason() says why. The locker is unlocked all the
   same. */
SIMBA_API simba_result simba_locker_unlock(simba_locker *lk);
/* Unlocks if held or pending, then blocks, driving the loop, until the backend has answered
   the release: SIMBA_OK once it confirmed it (or when no release is going out), the
   backend's error if the release failed (the mutex is then free when its lease ends),
   SIMBA_ETIMEDOUT after timeout_ms (< 0 = no limit; 0 = do not wait), SIMBA_ELOST (after
   the wait) as for simba_locker_unlock(). From a callback: SIMBA_ECALLBACK. SIMBA_ECLOSED
   as for simba_locker_lock(). */
SIMBA_API simba_result simba_locker_unlock_wait(simba_locker *lk, int64_t timeout_ms);
SIMBA_API int simba_locker_is_owner(const simba_locker *lk);
SIMBA_API uint64_t simba_locker_fence(const simba_locker *lk);
/* simba_yield for a held lock: if a live waiter is queued the lock passes to it
   (simba_locker_is_owner() turns 0; on_lost does not fire, simba_locker_last_reason() says
   "yielded") and the locker waits in line again, as a pending simba_locker_try() does:
   on_locked fires when it holds again, simba_locker_unlock() gives the wait up. Otherwise
   it keeps the lock (on_event SIMBA_EVENT_YIELD_KEPT). SIMBA_ESTATE when not held. */
SIMBA_API simba_result simba_locker_yield(simba_locker *lk);
/* simba_set_value for a held lock (LEADERSHIP VALUE); SIMBA_ESTATE when not held. */
SIMBA_API simba_result simba_locker_set_value(simba_locker *lk, const void *value, size_t len);
/* Unlocks if needed and frees. From a callback while simba_locker_lock() blocks on this
   locker, the memory goes when that call returns (SIMBA_ECLOSED). */
SIMBA_API simba_result simba_locker_free(simba_locker *lk);
/* Shorthands: new + lock with default timing; unlock + free (the handle is gone after it,
   unlike simba_locker_unlock's). */
SIMBA_API simba_result simba_lock(simba_loop *loop, simba_backend *be, const char *mutex, int64_t timeout_ms, simba_locker **out);
SIMBA_API simba_result simba_unlock(simba_locker *lk);

/* ---- scheduler --------------------------------------------------------------------- */

typedef enum simba_schedule_strategy { SIMBA_FIXED_DELAY, SIMBA_FIXED_RATE } simba_schedule_strategy;

typedef struct simba_scheduler_desc {
    const char *mutex;
    const char *contender_id; /* NULL = host id */
    int64_t ttl_ms, transition_ms; /* see TIMING DEFAULTS */
    int64_t renew_margin_ms;       /* as in simba_contend_desc, 0 = default */
    int64_t jitter_min_ms, jitter_max_ms;
    int64_t min_retry_ms;
    int64_t backoff_min_ms, backoff_max_ms;
    simba_schedule_strategy strategy;
    int64_t initial_delay_ms; /* from the moment leadership is gained, >= 0 */
    int64_t period_ms;        /* > 0 */
    void (*work)(simba_scheduler *s, void *user_data); /* required; runs inside simba_poll */
    void *user_data;
    int step_down_on_disconnect; /* as in simba_contend_desc */
    const void *value; /* as in simba_contend_desc: the leader's value */
    size_t value_len;
    /* optional: as simba_contend_desc.on_event, from the poll */
    void (*on_event)(simba_scheduler *s, const simba_service_event *event, void *user_data);
    /* optional: as simba_contend_desc.on_at_risk: the leader's renewals are failing and its
       lease has at_risk_ms left; work stops if it lapses */
    void (*on_at_risk)(simba_scheduler *s, int64_t left_ms, void *user_data);
    int64_t at_risk_ms;
} simba_scheduler_desc;

SIMBA_API simba_result simba_scheduler_new(simba_loop *loop, simba_backend *be, const simba_scheduler_desc *desc, simba_scheduler **out);
SIMBA_API simba_result simba_scheduler_start(simba_scheduler *s);
SIMBA_API simba_result simba_scheduler_stop(simba_scheduler *s);
SIMBA_API int simba_scheduler_running(const simba_scheduler *s);
SIMBA_API int simba_scheduler_is_owner(const simba_scheduler *s);
/* The fence of the current tenure (0 when not leader): work hands it to what it writes, so
   that a store can reject a former leader's late writes. */
SIMBA_API uint64_t simba_scheduler_fence(const simba_scheduler *s);
/* simba_yield for the leader: leadership passes to the oldest live waiter, if any (work stops
   here and starts there), and this scheduler waits in line to lead again; otherwise it keeps
   leading (on_event SIMBA_EVENT_YIELD_KEPT). SIMBA_ESTATE when not the leader. */
SIMBA_API simba_result simba_scheduler_yield(simba_scheduler *s);
/* simba_set_value for the leader (LEADERSHIP VALUE); SIMBA_ESTATE when not the leader. */
SIMBA_API simba_result simba_scheduler_set_value(simba_scheduler *s, const void *value, size_t len);
SIMBA_API simba_result simba_scheduler_free(simba_scheduler *s);

/* ---- contender ids and names ------------------------------------------------------- */

/* "counter:pid@host": counter per loop (starting at a random offset so that two loops of
   one process do not collide), host = a non-loopback IPv4 address, else the host name. */
SIMBA_API simba_result simba_contender_id_host(simba_loop *loop, char *buf, size_t cap);
/* 32 lowercase hex digits from the loop's random source. */
SIMBA_API simba_result simba_contender_id_random(simba_loop *loop, char *buf, size_t cap);
SIMBA_API simba_result simba_name_check(const char *mutex);
SIMBA_API simba_result simba_id_check(const char *contender_id);

/* ---- inspection: what the store holds (admin tools) ------------------------------------- */

/* A mutex as its store holds it, the same on every backend. Durations are as the server saw
   them when it answered; SIMBA_UNKNOWN_MS where the store does not know one. */
#define SIMBA_UNKNOWN_MS INT64_MIN
#define SIMBA_VIEW_WAITERS 8 /* waiter ids a view carries; view.waiters counts them all */
/* One holder of a name (a mutex's owner, a reader, one permit of a semaphore). */
typedef struct simba_view_holder {
    char id[SIMBA_ID_MAX + 1];
    uint64_t fence;             /* its own grant's */
    int shared;                 /* 1: a reader */
    int64_t acquired_unix_ms;   /* as in simba_view, for this holder */
    int64_t held_ms;
    int64_t ttl_left_ms;
    int64_t transition_left_ms;
    const unsigned char *value; /* its value, NULL/0 = none (valid as simba_view.value) */
    size_t value_len;
} simba_view_holder;
typedef struct simba_view {
    char mutex[SIMBA_NAME_MAX + 1];
    char owner[SIMBA_ID_MAX + 1]; /* "" = nobody holds it now */
    uint64_t fence;               /* the owner's; with no owner the last one handed out where the
                                     store keeps it (SQLite, PostgreSQL, Redis), else 0 */
    int64_t acquired_unix_ms;     /* when this ownership began, the server's wall clock in ms
                                     since 1970; SIMBA_UNKNOWN_MS */
    int64_t held_ms;              /* how long the owner has held it; SIMBA_UNKNOWN_MS */
    int64_t ttl_left_ms;          /* the owner's exclusive lease left (<= 0 in transition) */
    int64_t transition_left_ms;   /* until anyone may take it; SIMBA_UNKNOWN_MS */
    int64_t lease_ms;             /* the lease as granted when the store grants one of its own
                                     making (ZooKeeper: the owner's session timeout); else
                                     SIMBA_UNKNOWN_MS (the lease is as asked) */
    int waiters;                  /* contenders in the store's wait queue, -1 when not known
                                     (simba_list does not read queues) */
    char waiter[SIMBA_VIEW_WAITERS][SIMBA_ID_MAX + 1]; /* the first of them, oldest first */
    /* The owner's value (LEADERSHIP VALUE), NULL/0 = none. A backend points it at bytes valid
       until simba_req_view returns (copied). A caller's view: a listed mutex's is valid in
       the callback; simba_inspect's / simba_inspect_wait's until the next inspection
       answer on this loop is handed out, or the loop is freed. */
    const unsigned char *value;
    size_t value_len;
    /* Every live holder (SEMAPHORES AND READ-WRITE LOCKS), oldest grant (lowest fence)
       first: holder[0..holders). The owner fields above are then the holder whose permit
       frees first. A mutex held: holders 1 and holder[0] the owner; nobody: 0 and NULL. A
       backend may leave holders 0 with an owner set (one holder, the owner: the core fills
       holder[0]); its holder array and values need only be valid until simba_req_view
       returns (copied). A caller's: valid as value is. */
    int holders;
    const simba_view_holder *holder;
    int permits; /* the name's recorded permits (1 for a mutex or a read-write lock), 0 = not
                    known or nobody holds or waits */
} simba_view;

/* simba_inspect: once, with the view (rc SIMBA_OK) or the error. simba_list: once per mutex
   (rc SIMBA_OK), in name order, then once with view NULL and the result of the whole
   listing. simba_force_release: once, view NULL, rc SIMBA_OK when the holder was cleared,
   SIMBA_EFENCE when nobody holds the mutex with that fence. Called from simba_poll only. */
typedef void (*simba_view_fn)(const simba_view *view, simba_result rc, void *user_data);

/* Non-blocking, through the loop like any request: the answer comes from a later
   simba_poll. simba_inspect fills *view (valid until cb) before it calls cb. A backend
   whose vt has no inspect entry answers SIMBA_EINVAL at once. */
SIMBA_API simba_result simba_inspect(simba_backend *be, const char *mutex, simba_view *view, simba_view_fn cb, void *user_data);
SIMBA_API simba_result simba_list(simba_backend *be, simba_view_fn cb, void *user_data);
/* Clears the holder with this fence (the owner, a reader, one permit of a semaphore) only if
   it still holds it, atomically in the store, and wakes the waiters it frees as a release
   does: for an operator removing a dead holder by hand. */
SIMBA_API simba_result simba_force_release(simba_backend *be, const char *mutex, uint64_t fence, simba_view_fn cb,
                                           void *user_data);
/* Blocking forms: drive the loop (as simba_locker_lock does) until the answer, or
   SIMBA_ETIMEDOUT after timeout_ms (< 0: no limit). simba_list_wait calls cb for each mutex
   from inside the loop it drives. From a callback: SIMBA_ECALLBACK. */
SIMBA_API simba_result simba_inspect_wait(simba_backend *be, const char *mutex, simba_view *view, int64_t timeout_ms);
SIMBA_API simba_result simba_list_wait(simba_backend *be, simba_view_fn cb, void *user_data, int64_t timeout_ms);
SIMBA_API simba_result simba_force_release_wait(simba_backend *be, const char *mutex, uint64_t fence, int64_t timeout_ms);

/* ---- backend interface ------------------------------------------------------------- */

typedef enum simba_op {
    SIMBA_OP_ACQUIRE = 1, /* acquire, or renew when the contender already owns it */
    SIMBA_OP_RELEASE = 2, /* release if the contender owns it; no-op otherwise */
    SIMBA_OP_READ = 3,    /* report the current owner (contender is "") */
    /* Inspection, submitted through vt->inspect (contender ""): */
    SIMBA_OP_INSPECT = 4, /* the store's record of mutex: simba_req_view() once if it has
                             one, then simba_req_done() */
    SIMBA_OP_LIST = 5,    /* every mutex the store holds: simba_req_view() each (waiters -1
                             is enough), then simba_req_done() (mutex is "") */
    SIMBA_OP_FORCE_RELEASE = 6, /* end the holding of mutex's holder (owner, reader or permit)
                                   whose fence is req->fence, in one store operation, waking
                                   the waiters it frees as a release does; done with SIMBA_OK
                                   when cleared, SIMBA_EFENCE when nobody holds that fence */
    /* Through vt->submit, as ACQUIRE and RELEASE: */
    SIMBA_OP_SET_VALUE = 7, /* replace the stored value with req->value only if contender owns
                               mutex with req->fence and its lease is live by the store's
                               clock; fence and times unchanged. SIMBA_OK with the owner fields
                               and the new value; SIMBA_EFENCE with words when the fence no
                               longer holds */
    SIMBA_OP_YIELD = 8,     /* only if contender owns it with req->fence: with a live waiter
                               other than contender queued, end the ownership as RELEASE does
                               (value cleared, release pushed to the waiters) and queue
                               contender at the BACK as a live waiter (req->live_ms), reply
                               yielded = 1; with none, change nothing, yielded = 0 and the owner
                               fields as a renewal's answer. SIMBA_EFENCE when the fence no
                               longer holds. One atomic store operation */
    SIMBA_OP_CALL = 16 /* a backend's own call (simba_backend_call): only it knows what
                          simba_req_call_user(req) carries */
} simba_op;

/* A request, owned by the core. Its fields stay valid until simba_req_done(). */
struct simba_req {
    simba_op op;
    int expect_win;     /* ACQUIRE by a contender that owns the mutex or knows of no live
                           owner: a backend may try the write first; otherwise (someone else
                           holds it, as far as we know) a read first is usually enough */
    const char *mutex;
    const char *contender;
    int64_t ttl_ms, transition_ms;
    int64_t sent_at;    /* loop clock when submitted */
    int renew;          /* ACQUIRE by a contender that owns the mutex locally (a renewal).
                           1: granted only as a renewal of its live holding; one whose lease
                           has ended by the store's clock (a late one: the owner has stepped
                           down locally) is no new grant: it takes no fence and no place (the
                           contender asks anew, behind every waiter). 0 = a new acquisition: if storage still names this
                           contender as owner (a local step-down the server never saw, or a
                           lost answer), the backend starts a new ownership (new fence,
                           acquired now), so every on_acquired carries a fence above any
                           seen before */
    int deferrable;     /* ACQUIRE by a waiter on its own timer (answered before: it holds its
                           place in line; not woken by a push or an event), so a backend may
                           hold it briefly to send it with others: SIMBA_DEFER_ROUTINE when it
                           expects no win (nobody waits on it, as on a renewal),
                           SIMBA_DEFER_TAKEOVER at the lease end it knows (it wins only if the
                           owner is gone: holding it delays that takeover). SIMBA_DEFER_NO (0)
                           for anything else: a first ask, a pushed waiter's, a release */
    int64_t next_ask_ms; /* ACQUIRE by a non-owner: it asks again within this long (its
                            timer's bound), so a queued place whose liveness outlasts that
                            needs no refresh now: a waiter that is not granted need not
                            write. 0 = unknown (always refresh) */
    int64_t live_ms;    /* ACQUIRE: how long the backend keeps this contender's place in the
                           wait queue without a new request from it. The core computes it from
                           its own timing (a waiter asks again at least every ttl + transition
                           + jitter max); backends keep no liveness constant of their own */
    simba_req *next_;   /* free for the backend's use as a list link while in flight */
    int step_down_on_disconnect; /* ACQUIRE: the contender steps down on SIMBA_EV_DISCONNECTED,
                                    so a backend that knows it is disconnected grants nothing */
    int64_t company_ms;    /* ACQUIRE: how long the backend may hold it to send it with others
                           (one round trip or commit for many), the core's rule: a renewal or
                           a waiter's routine re-ask min(ttl/64, SIMBA_HOLD_MS), an ask at a
                           lease end min(ttl/256, SIMBA_HOLD_TAKEOVER_MS); else 0 */
    uint64_t fence;     /* FORCE_RELEASE, SET_VALUE, YIELD: the fence the owner must still hold */
    /* ACQUIRE: the value a NEW grant stores, in the same store operation as the grant (a
       renewal leaves the stored value alone). SET_VALUE: the new value. value_len bytes,
       0..SIMBA_VALUE_MAX (checked by the core), any bytes (NUL, non-UTF-8): stores keep them
       exactly. NULL when value_len is 0. */
    const unsigned char *value;
    size_t value_len;
    /* Every op of a contender (SEMAPHORES AND READ-WRITE LOCKS): permits 1..SIMBA_PERMITS_MAX
       (the core sends 1 for a desc's 0): 1 = one exclusive holder at a time, or readers
       together; N > 1 = at most N holders, never shared. shared 1 = a reader (permits is 1
       then), 0 = exclusive (a mutex's owner is a writer). The store records N with the name
       while anyone holds or waits and refuses an ACQUIRE with another N (SIMBA_ECONFLICT, errmsg
       "permits 3 asked, the name has 2 while held or waited on"). Owner, RELEASE, SET_VALUE,
       YIELD and the fence then refer to this contender's own holding. */
    int permits;
    int shared;
    /* private to the core (done_ fills the last int's padding) */
    int done_;
    simba_service *svc_;
    uint64_t gen_;
    simba_req *done_next_;
    void *ask_; /* an inspection's own state (svc_ NULL) */
};

/* simba_req.deferrable */
enum { SIMBA_DEFER_NO = 0, SIMBA_DEFER_TAKEOVER = 1, SIMBA_DEFER_ROUTINE = 2 };

/* An answer. Durations are as the server saw them when it evaluated the request. */
typedef struct simba_reply {
    simba_result rc;            /* SIMBA_OK, or why it failed (no owner fields then) */
    const char *errmsg;         /* optional, copied */
    const char *owner;          /* current owner after the request; NULL or "" = nobody */
    int64_t ttl_left_ms;        /* owner's remaining ttl (may be <= 0 in transition) */
    int64_t transition_left_ms; /* remaining until transition end, >= ttl_left_ms */
    int64_t held_ms;            /* how long the owner has held it; < 0 unknown */
    uint64_t fence;             /* owner's fence, 0 when nobody */
    int first_in_line;          /* the requester is next in the backend's wait order */
    int64_t quarantine_ms;      /* rc != SIMBA_OK on an ACQUIRE: the store grants nobody for this
                                   long (its data-loss quarantine), 0 = not that; the core asks
                                   again when it ends and raises SIMBA_EVENT_QUARANTINE */
    /* the owner's stored value with the owner fields (copied by the core); NULL/0 = none.
       A value longer than SIMBA_VALUE_MAX is a malformed answer (SIMBA_EBACKEND) */
    const unsigned char *value;
    size_t value_len;
    int yielded;                /* YIELD: 1 when the ownership passed to a waiter, else 0 */
    /* live holders of the name after the request (0 = nobody; 1 for a mutex held). For a
       holder, owner and the owner fields are its own holding (id, fence, times, value); for
       anyone else, those of the holder whose permit frees first (the waiter times its next
       ask by it). A backend that leaves it 0 with an owner set means 1 */
    int holders;
} simba_reply;

typedef enum simba_event_kind {
    SIMBA_EV_RELEASED = 1, /* mutex was released: waiters (or the one named) try now */
    SIMBA_EV_OWNER = 2,    /* owner information pushed (owner fields of the reply) */
    SIMBA_EV_RESET = 3,    /* server state may be gone (reconnect): re-contend / renew now */
    SIMBA_EV_LOST = 4,     /* ownership is gone (session expired): owners step down now */
    SIMBA_EV_DISCONNECTED = 5 /* connection lost (every networked backend raises it): owners
                                 with step_down_on_disconnect step down (reason "connection") */
} simba_event_kind;

/* The lease a backend grants, declared in its vt. */
typedef enum simba_lease {
    SIMBA_LEASE_ASKED = 0,  /* the requested ttl/transition: the core clamps grants to them */
    SIMBA_LEASE_SESSION = 1 /* derived from its session (ZooKeeper): ttl/transition are ignored,
                               the grant is taken as is and renewals fit inside it */
} simba_lease;

/* What a call of vt->process is for (flags). */
enum {
    SIMBA_PROCESS_IO = 1,   /* ready[0..n) holds the revents of this backend's descriptors */
    SIMBA_PROCESS_TICK = 2, /* the poll's call without readiness: check yourself, never block */
    SIMBA_PROCESS_FLUSH = 4 /* after a dispatch: send what callbacks submitted (no readiness) */
};

typedef struct simba_backend_vt {
    size_t size;      /* sizeof(simba_backend_vt): lets the vt grow; an unknown size is refused */
    const char *name;
    /* Start a request. Return SIMBA_OK and complete it later (or from inside this call)
       with simba_req_done(); or return an error and do not complete it. Must not block. */
    simba_result (*submit)(void *impl, simba_req *req);
    /* Optional: descriptors to wait on. Return count written (<= cap) or the needed count. */
    int (*fds)(void *impl, struct pollfd *out, int cap);
    /* Optional: do ready I/O and due timers; flags say which call it is (SIMBA_PROCESS_*),
       ready is NULL unless SIMBA_PROCESS_IO. Called on every simba_poll. */
    void (*process)(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags);
    /* Optional: absolute loop time of the backend's next timer, or INT64_MAX. */
    int64_t (*deadline)(void *impl);
    /* Optional: first / last service for a mutex on this backend (subscribe, set watches). */
    simba_result (*watch)(void *impl, const char *mutex);
    void (*unwatch)(void *impl, const char *mutex);
    /* Complete every pending request (rc SIMBA_ECLOSED), then free impl. */
    void (*destroy)(void *impl);
    simba_lease lease; /* 0 = SIMBA_LEASE_ASKED */
    /* Optional: the service of req, which this backend may hold for company (a renewal
       batched with others), now waits on it to send its release (simba_stop, an unlock):
       send it at once. A vt that ends before this member (.size = its offset) is accepted. */
    void (*hurry)(void *impl, simba_req *req);
    /* Optional: start an inspection (SIMBA_OP_INSPECT, _LIST, _FORCE_RELEASE) as submit
       starts a request. A vt that ends before this member has no inspection. */
    simba_result (*inspect)(void *impl, simba_req *req);
    /* Optional: this process's contender of mutex was granted it, or changed its value
       (owner: the record, as an answer carries it). Deliver it to every other process with
       a waiter or an observer of mutex, which raises SIMBA_EV_OWNER with it: a hint, sent
       once per change, never waited for. A backend whose store announces its own changes
       (memory, Redis) leaves it NULL; so does a vt that ends before this member. */
    void (*announce)(void *impl, const char *mutex, const simba_reply *owner);
} simba_backend_vt;

SIMBA_API simba_result simba_backend_new(simba_loop *loop, const simba_backend_vt *vt, void *impl, simba_backend **out);
/* SIMBA_EBUSY while services, lockers or schedulers that the caller has not freed use it.
   When only freed ones remain, finishing their release, it returns SIMBA_OK at once and
   the backend goes when the last of them is done (the handle is invalid at once). */
SIMBA_API simba_result simba_backend_free(simba_backend *be);
SIMBA_API const char *simba_backend_errmsg(const simba_backend *be);
SIMBA_API simba_loop *simba_backend_loop(const simba_backend *be);
/* The longest lease (ttl + transition) this backend grants, 0 = no bound of its own (only
   SIMBA_MAX_MS). A backend that quarantines after a data loss sets it at open, from its
   desc's max_lease_ms: contenders, lockers and schedulers made after it with a longer
   lease are refused (SIMBA_EINVAL), so that its quarantine covers every live lease.
   1..SIMBA_MAX_MS, or 0. */
SIMBA_API simba_result simba_backend_set_max_lease(simba_backend *be, int64_t max_lease_ms);
SIMBA_API int64_t simba_backend_max_lease(const simba_backend *be);
SIMBA_API void *simba_backend_impl(const simba_backend *be);
/* The vt the backend was registered with: lets a backend header check that a handle is its
   own before it touches the impl. */
SIMBA_API const simba_backend_vt *simba_backend_vt_get(const simba_backend *be);
/* Complete a request exactly once. Safe from inside submit/process; handled in the poll. */
SIMBA_API void simba_req_done(simba_req *req, const simba_reply *reply);
/* Complete a request with an error: rc, and the words (optional, copied). */
SIMBA_API void simba_req_fail(simba_req *req, simba_result rc, const char *errmsg);
/* Add one mutex to the answer of an INSPECT or LIST request, before its simba_req_done()
   (copied; ignored for other requests). Safe from inside inspect/process. */
SIMBA_API void simba_req_view(simba_req *req, const simba_view *view);
/* A backend's own call (a fenced write), answered through the loop like an inspection:
   makes a request (op SIMBA_OP_CALL, mutex copied, fence) and hands it to start(impl, req)
   as submit would (no hooks run inside); the backend completes it with simba_req_done /
   simba_req_fail, or start returns an error and the core fails it. The poll after that
   runs fn(req, rc, errmsg, user) once, as a user callback (blocking calls refused, frees
   deferred), then frees req; if the loop is freed first, fn(NULL, SIMBA_ECLOSED, NULL,
   user) runs instead, only for the backend to free what user holds. SIMBA_OK, or an error
   before anything started (a name that is not valid, out of memory, a backend being
   freed; simba_loop_errmsg says which) and fn is never called. */
typedef void (*simba_call_fn)(simba_req *req, simba_result rc, const char *errmsg, void *user);
SIMBA_API simba_result simba_backend_call(simba_backend *be, const char *mutex, uint64_t fence,
                                          simba_result (*start)(void *impl, simba_req *req), simba_call_fn fn, void *user);
/* The user pointer given to simba_backend_call for req; NULL for any other request. */
SIMBA_API void *simba_req_call_user(const simba_req *req);
/* Tell the loop's fd_hook about a descriptor: events 0 = stop watching. A backend must call
   it with 0 before it closes a descriptor it has listed in vt->fds (the core learns starts
   and interest changes from vt->fds after each poll and each call outside the poll). */
SIMBA_API void simba_backend_fd(simba_backend *be, int fd, short events);
/* Push an event. mutex NULL = every mutex of this backend; contender NULL = every service
   of the mutex; owner used by SIMBA_EV_OWNER. */
SIMBA_API void simba_backend_event(simba_backend *be, simba_event_kind kind, const char *mutex, const char *contender, const simba_reply *owner);
/* For backends that do synchronous work inside simba_poll (SQLite statements): call it
   before each unit of work (one request executed). Returns 1 when the poll's budget
   (simba_loop_desc.poll_budget_us / poll_max_steps) is spent: stop, keep the rest, and
   report a deadline of now so the next poll, asked for at once, continues. Otherwise counts
   the unit as a step and returns 0. Outside simba_poll it always returns 0. */
SIMBA_API int simba_poll_budget_spent(simba_loop *loop);
/* What is left of the poll's time budget in µs (0 once spent), counting no step; INT64_MAX
   outside simba_poll and before the poll's first step (which always runs). For a backend
   whose unit of work ends in a step it cannot stop half way (SQLite's COMMIT after a batch
   of statements): it stops adding to the unit while the closing step's expected cost no
   longer fits, so that the poll still ends in its budget. */
SIMBA_API int64_t simba_poll_budget_left_us(simba_loop *loop);
/* The loop's allocator and log, for backends. */
SIMBA_API void *simba_alloc(simba_loop *loop, size_t size);
SIMBA_API void simba_free(simba_loop *loop, void *ptr);
SIMBA_API void simba_log(simba_loop *loop, simba_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_H */

/* >>impl */
/* ==================================================================================== */
/*                                   IMPLEMENTATION                                     */
/* ==================================================================================== */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_CORE_IMPLEMENTATION)
#define SIMBA_CORE_IMPLEMENTATION
#endif
#if defined(SIMBA_CORE_IMPLEMENTATION) && !defined(SIMBA__CORE_IMPLEMENTED)
#define SIMBA__CORE_IMPLEMENTED

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A system header included before this one under -std=c99 fixes the C library to plain ISO
   C: say what to do here rather than fail deep inside with 'CLOCK_MONOTONIC undeclared'. */
#if !defined(CLOCK_MONOTONIC)
#error "simba.h needs POSIX 2008, which a system header included earlier has left out (-std=c99). Put the SIMBA_IMPLEMENTATION include first in this file, or compile with -D_POSIX_C_SOURCE=200809L"
#endif

#ifndef SIMBA_MALLOC
#define SIMBA_MALLOC(sz) malloc(sz)
#define SIMBA_FREE(p) free(p)
#endif

#define SIMBA__DEFAULT_TTL 10000
/* Longest interval between asks while a free mutex is kept for another waiter. */
#define SIMBA__FREE_RETRY_MAX 1000
#define SIMBA__DEFAULT_TRANSITION 6000
#define SIMBA__DEFAULT_MIN_RETRY 50
#define SIMBA__DEFAULT_BACKOFF_MIN 100
#define SIMBA__DEFAULT_BACKOFF_MAX 5000
#define SIMBA__DEFAULT_REFRESH 1000
#define SIMBA__NEVER INT64_MAX
/* Waits for company (simba_req.company_ms): owners renew long before their lease ends and the
   lease counts from the send, so ttl/64 costs nothing; a takeover after a crash comes at
   most ttl/256 later. */
#ifndef SIMBA_HOLD_MS
#define SIMBA_HOLD_MS 50
#endif
#ifndef SIMBA_HOLD_TAKEOVER_MS
#define SIMBA_HOLD_TAKEOVER_MS 10
#endif
#define SIMBA__MAX_ROUNDS 16
#define SIMBA__POLL_BUDGET_US 500 /* default simba_loop_desc.poll_budget_us */
#define SIMBA__RENEW_GRID_MS 128 /* renewals are aligned down to this step at most */
#define SIMBA__EV_FREE_MAX 64     /* recycled event nodes kept */
#define SIMBA__ERRMSG_MAX 128     /* simba_stats.last_error_msg */
#define SIMBA__TOLD_MAX 32        /* causes a loop without a log hook writes to stderr */

/* ---- small helpers ----------------------------------------------------------------- */

/* Times saturate instead of overflowing: an injected clock may sit anywhere in int64. */
static int64_t simba__add(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}
static int64_t simba__min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t simba__max(int64_t a, int64_t b) { return a > b ? a : b; }

static void simba__copy(char *dst, size_t cap, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}

/* >>kit The backend kit: helpers every backend header uses and the core itself may not. */
#if defined(__GNUC__)
#define SIMBA__KIT __attribute__((unused))
#else
#define SIMBA__KIT
#endif

static int64_t simba__uniform(simba_loop *loop, int64_t lo, int64_t hi);
/* The jittered doubling backoff of every retry, the core's and the backends' reconnects:
   *cur goes from min (when 0: reset it after a success) doubling up to max; the wait is
   uniform in [*cur/2, *cur] (many clients after a server restart do not come back in step),
   at least 1 ms. */
static int64_t simba__backoff(simba_loop *loop, int64_t *cur, int64_t min, int64_t max) {
    *cur = *cur ? simba__min(simba__add(*cur, *cur), max) : min;
    return simba__max(simba__uniform(loop, *cur / 2, simba__add(*cur, 1)), 1);
}

/* A copy in the loop's memory (NULL: s was NULL, or no memory). */
static SIMBA__KIT char *simba__strdup(simba_loop *loop, const char *s);

/* A pipe whose ends never block and do not leak into a child (wake-ups of the loop by
   other threads). 0, or -1 with errno, both ends closed. */
static SIMBA__KIT int simba__pipe(int fd[2]) {
    int i;
    if (pipe(fd) != 0) return -1;
    for (i = 0; i < 2; i++) {
        int fl = fcntl(fd[i], F_GETFL);
        if (fl < 0 || fcntl(fd[i], F_SETFL, fl | O_NONBLOCK) != 0 || fcntl(fd[i], F_SETFD, FD_CLOEXEC) != 0) {
            int e = errno;
            close(fd[0]);
            close(fd[1]);
            errno = e;
            return -1;
        }
    }
    return 0;
}

/* Writes why into err (cap bytes) and returns rc: the fenced-write checks' refusals. */
static SIMBA__KIT simba_result simba__refuse(char *err, size_t cap, simba_result rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static SIMBA__KIT simba_result simba__refuse(char *err, size_t cap, simba_result rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return rc;
}

/* A zeroed block of the loop's memory, or with loop NULL of SIMBA_MALLOC's (a store shared
   by loops; free it with SIMBA_FREE). NULL: no memory. */
static SIMBA__KIT void *simba__zalloc(simba_loop *loop, size_t size) {
    void *p = loop ? simba_alloc(loop, size) : size ? SIMBA_MALLOC(size) : NULL;
    if (p) memset(p, 0, size);
    return p;
}

/* >>reply  A store's answer, built here: nobody owns (held unknown), ... */
static SIMBA__KIT simba_reply *simba__reply_none(simba_reply *rep) {
    memset(rep, 0, sizeof *rep);
    rep->held_ms = -1;
    return rep;
}
/* ... or the request failed with rc and words (msg optional; simba_req_done copies it). */
static SIMBA__KIT simba_reply *simba__reply_fail(simba_reply *rep, simba_result rc, const char *msg) {
    simba__reply_none(rep)->rc = rc;
    rep->errmsg = msg;
    return rep;
}
/* The words of SIMBA_ECONFLICT, one wording for every store: an ask with asked permits on a
   name the store records with has while anyone holds or waits (into buf, cap bytes). */
static SIMBA__KIT const char *simba__conflict_words(char *buf, size_t cap, long long asked, long long has) {
    snprintf(buf, cap, "permits %lld asked, the name has %lld while held or waited on", asked, has);
    return buf;
}
static SIMBA__KIT simba_reply *simba__reply_conflict(simba_reply *rep, char *buf, size_t cap, long long asked, long long has) {
    return simba__reply_fail(rep, SIMBA_ECONFLICT, simba__conflict_words(buf, cap, asked, has));
}

/* >>grant  The grant rule (SEMAPHORES AND READ-WRITE LOCKS), for a requester that holds
   nothing of the name, from the store's facts: the name's permits, its live holders,
   writer_holds (an exclusive holder among them), the requester's place in line (0: the
   head; the line's length: it would join the back), shared (a reader) and writer_ahead (an
   exclusive waiter ahead of it). */
static SIMBA__KIT int simba__grantable(int permits, int holders, int writer_holds, int place, int shared, int writer_ahead) {
    if (permits > 1) return place < permits - holders; /* among the first N - holders */
    if (writer_holds) return 0;
    if (!shared) return holders == 0 && place == 0; /* a writer: nobody holds, the head */
    return !writer_ahead;                           /* a reader: only readers ahead */
}

/* >>view  The owner row's holder of view v (a mutex's owner or a writer) into h. */
static SIMBA__KIT void simba__view_owner_holder(const simba_view *v, simba_view_holder *h) {
    memset(h, 0, sizeof *h);
    simba__copy(h->id, sizeof h->id, v->owner);
    h->fence = v->fence;
    h->acquired_unix_ms = v->acquired_unix_ms;
    h->held_ms = v->held_ms;
    h->ttl_left_ms = v->ttl_left_ms;
    h->transition_left_ms = v->transition_left_ms;
    h->value = v->value;
    h->value_len = v->value_len;
}

/* A view's holders as a store hands them over (hs[0..n)): when the view names no owner it
   shows the holder whose lease ends first, the one a waiter waits for; permits is what the
   store keeps (a holder beside an owner: 1; nobody holds: 0). */
static SIMBA__KIT void simba__view_holders(simba_view *v, simba_view_holder *hs, int n, int permits) {
    int i, first = -1;
    for (i = 0; !v->owner[0] && i < n; i++)
        if (first < 0 || hs[i].transition_left_ms < hs[first].transition_left_ms) first = i;
    if (first >= 0) {
        simba__copy(v->owner, sizeof v->owner, hs[first].id);
        v->fence = hs[first].fence;
        v->acquired_unix_ms = hs[first].acquired_unix_ms;
        v->held_ms = hs[first].held_ms;
        v->ttl_left_ms = hs[first].ttl_left_ms;
        v->transition_left_ms = hs[first].transition_left_ms;
        v->value = hs[first].value;
        v->value_len = hs[first].value_len;
    }
    v->holders = n;
    v->holder = n ? hs : NULL;
    v->permits = n ? (v->owner[0] && first < 0 ? 1 : permits) : 0;
}

/* >>fence  The fenced write's rule, one for every store that judges it in C. The arguments
   first: a mutex name and a fence a grant could have handed out (fences start at 1). */
static SIMBA__KIT simba_result simba__fence_args(const char *fn, const char *name, uint64_t fence, char *err, size_t cap) {
    if (!name || !name[0]) {
        snprintf(err, cap, "%s: the mutex name is %s: give the name the fence was granted for", fn, name ? "empty" : "NULL");
        return SIMBA_EINVAL;
    }
    if (simba_name_check(name) != SIMBA_OK) {
        snprintf(err, cap, "%s: mutex name \"%.80s\" is not a name (1..%d of [A-Za-z0-9-_.:@+=,])", fn, name, SIMBA_NAME_MAX);
        return SIMBA_EINVAL;
    }
    if (fence == 0) {
        snprintf(err, cap, "%s: fence 0 is no fence (a grant's fence is at least 1): give simba_fence() of the owner", fn);
        return SIMBA_EINVAL;
    }
    return SIMBA_OK;
}

/* A fence holds while it is the stored owner's and the lease has not passed its transition
   end by the store's clock: the rule of a grant, which gives nobody else the mutex before.
   left_ms = stored transition end - the store's now. SIMBA_OK, or SIMBA_EFENCE with why. */
static SIMBA__KIT simba_result simba__fence_judge(const char *fn, const char *name, uint64_t fence, int has_owner,
                                                  uint64_t stored, int64_t left_ms, char *err, size_t cap) {
    if (stored > fence) {
        snprintf(err, cap, "%s: the fence of %s moved on to %llu (a later owner): fence %llu is not the owner's any more", fn,
                 name, (unsigned long long)stored, (unsigned long long)fence);
        return SIMBA_EFENCE;
    }
    if (stored < fence) {
        snprintf(err, cap, "%s: fence %llu was never handed out for %s (its fence is %llu): not the owner's", fn,
                 (unsigned long long)fence, name, (unsigned long long)stored);
        return SIMBA_EFENCE;
    }
    if (!has_owner) {
        snprintf(err, cap, "%s: %s has no owner (released): fence %llu holds no lease", fn, name, (unsigned long long)fence);
        return SIMBA_EFENCE;
    }
    if (left_ms < 0) {
        snprintf(err, cap, "%s: the lease of fence %llu on %s is over (ended %lld ms ago by the store's clock)", fn,
                 (unsigned long long)fence, name, (long long)-left_ms);
        return SIMBA_EFENCE;
    }
    return SIMBA_OK;
}

static uint32_t simba__strhash(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    while (*s) { h ^= (unsigned char)*s++; h *= 16777619u; }
    return h;
}

/* The same hash over n bytes (a value may hold NUL): backends' checksums use it. */
static SIMBA__KIT uint32_t simba__memhash(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) { h ^= b[i]; h *= 16777619u; }
    return h;
}

static int64_t simba__sys_now(void *user) {
    struct timespec ts;
    (void)user;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

SIMBA_API const char *simba_strerror(int rc) {
    switch (rc) {
    case SIMBA_OK: return "ok";
    case SIMBA_EINVAL: return "invalid argument";
    case SIMBA_ESTATE: return "wrong state for this call";
    case SIMBA_ENOMEM: return "out of memory";
    case SIMBA_ETIMEDOUT: return "timed out";
    case SIMBA_EBACKEND: return "backend failure";
    case SIMBA_EBUSY: return "busy";
    case SIMBA_EAGAIN: return "not yet, try again";
    case SIMBA_ECLOSED: return "closed";
    case SIMBA_EEXIST: return "contender already contends for this mutex";
    case SIMBA_ECALLBACK: return "not allowed inside a simba callback";
    case SIMBA_ECONN: return "not connected";
    case SIMBA_ESYS: return "system call failed";
    case SIMBA_ELOST: return "the lease had lapsed before the unlock";
    case SIMBA_EFENCE: return "the fence no longer holds a live lease";
    case SIMBA_EDENIED: return "denied by the store (login, privilege or schema version)";
    case SIMBA_ECONFLICT: return "the name is held with other permits or another mode";
    default: return "unknown error";
    }
}

/* ---- names and ids ------------------------------------------------------------------ */

static int simba__name_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == ':' || c == '@' || c == '+' || c == '=' || c == ',';
}

SIMBA_API simba_result simba_name_check(const char *mutex) {
    size_t n = 0;
    if (!mutex || !*mutex) return SIMBA_EINVAL;
    for (; mutex[n]; n++) {
        if (n >= SIMBA_NAME_MAX || !simba__name_char((unsigned char)mutex[n])) return SIMBA_EINVAL;
    }
    if (!strcmp(mutex, ".") || !strcmp(mutex, "..")) return SIMBA_EINVAL;
    return SIMBA_OK;
}

SIMBA_API simba_result simba_id_check(const char *id) {
    size_t n = 0;
    if (!id || !*id) return SIMBA_EINVAL;
    for (; id[n]; n++) {
        unsigned char c = (unsigned char)id[n];
        if (n >= SIMBA_ID_MAX || c <= 0x20 || c >= 0x7f) return SIMBA_EINVAL;
    }
    return SIMBA_OK;
}

/* ---- owner predicates --------------------------------------------------------------- */

SIMBA_API int simba_owner_is(const simba_owner *o, const char *id) {
    return o && id && o->id[0] && strcmp(o->id, id) == 0;
}
SIMBA_API int simba_owner_in_ttl(const simba_owner *o, int64_t now) { return o && o->id[0] && o->ttl_at > now; }
SIMBA_API int simba_owner_in_transition(const simba_owner *o, int64_t now) {
    return o && o->id[0] && o->ttl_at <= now && now <= o->transition_at;
}
SIMBA_API int simba_owner_in_lease(const simba_owner *o, int64_t now) {
    return o && o->id[0] && o->transition_at >= now;
}

/* ---- internal types ------------------------------------------------------------------ */

typedef struct simba__timer {
    int64_t at;
    int idx; /* position in the heap, -1 when not queued */
    int kind;
} simba__timer;
typedef struct simba__heap_slot {
    int64_t at; /* a copy of t->at, kept equal while t is queued */
    simba__timer *t;
} simba__heap_slot;
enum { SIMBA__T_SERVICE = 1, SIMBA__T_SCHED = 2, SIMBA__T_LOCKER = 3 };

/* Intrusive string-keyed hash table; allocation through the given pair so that the memory
   store (which has no loop) can use it too. */
typedef struct simba__hnode {
    struct simba__hnode *hnext;
    uint32_t hash;
    const char *key;
} simba__hnode;
typedef struct simba__htab {
    simba__hnode **b;
    size_t nb, n;
} simba__htab;
typedef void *(*simba__alloc_fn)(void *u, size_t n);
typedef void (*simba__free_fn)(void *u, void *p);

static simba__hnode *simba__hfind(const simba__htab *t, const char *key) {
    uint32_t h;
    simba__hnode *n;
    if (!t->nb) return NULL;
    h = simba__strhash(key);
    for (n = t->b[h & (t->nb - 1)]; n; n = n->hnext)
        if (n->hash == h && strcmp(n->key, key) == 0) return n;
    return NULL;
}
static int simba__hinsert(simba__htab *t, simba__hnode *node, simba__alloc_fn af, simba__free_fn ff, void *u) {
    size_t i;
    node->hash = simba__strhash(node->key);
    if (t->n + 1 > t->nb) { /* load factor <= 1, power-of-two buckets */
        size_t nb = t->nb ? t->nb * 2 : 16;
        simba__hnode **b = (simba__hnode **)af(u, nb * sizeof *b);
        if (!b) return 0;
        memset(b, 0, nb * sizeof *b);
        for (i = 0; i < t->nb; i++) {
            simba__hnode *n = t->b[i], *next;
            for (; n; n = next) {
                next = n->hnext;
                n->hnext = b[n->hash & (nb - 1)];
                b[n->hash & (nb - 1)] = n;
            }
        }
        if (t->b) ff(u, t->b);
        t->b = b;
        t->nb = nb;
    }
    node->hnext = t->b[node->hash & (t->nb - 1)];
    t->b[node->hash & (t->nb - 1)] = node;
    t->n++;
    return 1;
}
static void simba__hremove(simba__htab *t, simba__hnode *node) {
    simba__hnode **pp;
    if (!t->nb) return;
    for (pp = &t->b[node->hash & (t->nb - 1)]; *pp; pp = &(*pp)->hnext) {
        if (*pp == node) { *pp = node->hnext; t->n--; return; }
    }
}

/* One mutex name on one backend: the services that use it. */
typedef struct simba__mx {
    simba__hnode h;
    simba_service *svcs;
    int nsvcs;
    char *name; /* stored once, right after the struct, at its own length */
} simba__mx;

/* A pushed event, queued until the poll handles it. Nodes are recycled. */
typedef struct simba__ev {
    struct simba__ev *next;
    simba_backend *be;
    simba_event_kind kind;
    int all_mutexes, all_contenders;
    char mutex[SIMBA_NAME_MAX + 1];
    char contender[SIMBA_ID_MAX + 1];
    char owner[SIMBA_ID_MAX + 1];
    simba_reply rep;
    unsigned char value[SIMBA_VALUE_MAX]; /* rep.value's storage */
} simba__ev;

struct simba_backend {
    simba_loop *loop;
    const simba_backend_vt *vt;
    void *impl;
    simba_backend *next, *prev;
    simba__htab mxs;
    int users; /* services (live or finishing) */
    int free_requested; /* freed by the user while freed services finish their release */
    int pfd_off, pfd_n;
    void (*hurry)(void *impl, simba_req *req); /* vt->hurry, NULL for a vt without it */
    simba_result (*inspect)(void *impl, simba_req *req); /* vt->inspect, likewise */
    void (*announce)(void *impl, const char *mutex, const simba_reply *owner); /* likewise */
    int64_t max_lease; /* simba_backend_set_max_lease, 0 = none */
    char errmsg[256];
};

/* Statistics kept per service and per loop (the loop's outlive freed services). */
typedef struct simba__counters {
    /* reasons that exist, not the public struct's room for later ones: 72 bytes a service */
    uint64_t acquisitions, releases, by_reason[SIMBA_REASON_COUNT_], attempts, renewals, renewals_failed, errors, waits,
        quarantines;
    int64_t held_total_ms, wait_total_ms, wait_max_ms, last_error_at;
    int last_error;
    /* the loop's own buffer; a service's is allocated at its first error (most never fail,
       and 128 bytes each would be a tenth of a service) */
    char *last_error_msg;
} simba__counters;

enum { SIMBA__KIND_CONTEND = 1, SIMBA__KIND_OBSERVE = 2 };
enum {
    SIMBA__F_INFLIGHT = 1u << 0,
    SIMBA__F_OWNER = 1u << 1,      /* local belief: we own it (within lease_end) */
    SIMBA__F_TOLD = 1u << 2,       /* the user was told on_acquired, not yet on_released */
    SIMBA__F_WAKE = 1u << 3,       /* a push arrived while a request was in flight: retry after */
    SIMBA__F_RELEASE_SENT = 1u << 4,
    SIMBA__F_ZOMBIE = 1u << 5,     /* freed by the user; finishing its release */
    SIMBA__F_GC = 1u << 6,         /* on the loop's list of things to free */
    SIMBA__F_IMMEDIATE = 1u << 7,  /* the last attempt was an immediate one (no owner) */
    SIMBA__F_FIRST = 1u << 8,      /* the backend last said we are first in line */
    SIMBA__F_ASKED = 1u << 9,      /* an acquire was answered in this run (we hold a place) */
    SIMBA__F_DISC_DOWN = 1u << 10, /* step down on SIMBA_EV_DISCONNECTED (the desc's policy) */
    SIMBA__F_WOKEN = 1u << 11,     /* the next ask answers a push or an event, not a timer */
    SIMBA__F_BEHIND = 1u << 12,    /* a release sent behind the acquire in flight is unanswered */
    SIMBA__F_WAITED = 1u << 13,    /* simba_stop_wait / simba_loop_close waits on it: not freed */
    SIMBA__F_SETVAL = 1u << 14,    /* simba_set_value: a SET_VALUE is to be sent */
    SIMBA__F_YIELD = 1u << 15,     /* simba_yield: a YIELD is to be sent */
    SIMBA__F_PEND = 1u << 16,      /* vals->pend holds the value to store (own is in flight) */
    SIMBA__F_YIELDED = 1u << 17,   /* the answer to req said yielded = 1 */
    SIMBA__F_RENEW_FAILED = 1u << 18, /* a renewal of this tenure failed, none confirmed since */
    SIMBA__F_AT_RISK = 1u << 19,   /* on_at_risk was called in this tenure */
    SIMBA__F_YIELDING = 1u << 20,  /* simba_yield: no belief until the store says kept */
    /* the name has several holders (a semaphore, readers): the owner shown is one of them,
       so the fence shown may go down from one to the next */
    SIMBA__F_MANY = 1u << 21
};

/* The values a service handles (LEADERSHIP VALUE), allocated at its first value: most
   services carry none, and four buffers of SIMBA_VALUE_MAX would dwarf a service. */
typedef struct simba__vals {
    size_t own_len, pend_len, view_len, rep_len;
    unsigned char own[SIMBA_VALUE_MAX];  /* stored by our grants; a request in flight reads it */
    unsigned char pend[SIMBA_VALUE_MAX]; /* a simba_set_value made while a request was in flight */
    unsigned char view[SIMBA_VALUE_MAX]; /* the known owner's (simba__view) */
    unsigned char rep[SIMBA_VALUE_MAX];  /* the answer's, until the poll handles it */
} simba__vals;

/* A release sent behind an acquire still in flight (a stop that does not wait for its
   answer): a request of its own, allocated then (rare), kept on the loop's list. */
typedef struct simba__behind {
    simba_req req; /* first: the backend hands back &req */
    struct simba__behind *next, *prev;
    int32_t rc; /* the backend's answer */
} simba__behind;

/* A simba_owner whose id is not copied in: it points to the service's own id, "" or the
   service's view_other (a fixed SIMBA_ID_MAX buffer would be a seventh of a service). */
typedef struct simba__tprof simba__tprof;
typedef struct simba__view {
    const char *id;
    int64_t acquired_at, ttl_at, transition_at;
    uint64_t fence;
} simba__view;

/* A service's timing as its desc fixed it. Services of the same timing share one copy (a
   loop of 10,000 services made from one desc keeps one, not 10,000 copies of 96 bytes): the
   loop reuses an equal profile among its most recently used ones (simba__tprof_get). */
typedef struct simba__tvals {
    int64_t ttl, transition, renew_margin, jmin, jmax, min_retry, bmin, bmax, refresh;
    int64_t at_risk; /* on_at_risk's threshold, ms of local lease left */
    int permits, shared; /* SEMAPHORES AND READ-WRITE LOCKS: the requests', 1 and 0 for a mutex */
    void (*on_at_risk)(simba_service *, int64_t, void *);
    /* its callbacks: a freed service (SIMBA__F_ZOMBIE) never calls them */
    simba_state_fn on_acquired, on_released, on_owner;
    simba_event_fn on_event;
} simba__tvals;
struct simba__tprof {
    simba__tvals v;
    simba__tprof *next, *prev; /* the loop's tprofs, most recently used first */
    int refs;
};

struct simba_service {
    simba__timer tm;
    simba_loop *loop;
    simba_backend *be;
    simba__mx *mx;
    simba_service *mx_next, *mx_prev;
    simba_service *all_next, *all_prev;
    simba_service *gc_next;
    int kind;
    simba_status status;
    unsigned flags;
    simba_result release_rc; /* answer to the last release (simba_locker_unlock_wait) */
    uint64_t gen;
    simba__tprof *tp;     /* its timing, shared with the loop's services of the same timing */
    int64_t backoff;     /* current error backoff, 0 after a success */
    int64_t free_retry;  /* interval while a free mutex is kept for the queue's head */
    int64_t asked_at;    /* when the latest answered acquire was sent (its place's refresh) */
    int64_t next_try;    /* next attempt (loop time) */
    int64_t lease_end;   /* local end of our own lease: step down here without renewal */
    int64_t stepped_at;  /* loop time of the latest run of its timer's step */
    int64_t quar_until;  /* end of the store's data-loss quarantine as last told, 0 = none */
    uint64_t own_fence;
    uint64_t seen_fence;  /* the greatest fence of an owner it has shown, over its runs: a
                             push sent before a stop may arrive after the next start */
    uint64_t push_fence;  /* the greatest fence pushed since req was sent, 0 = none */
    uint64_t ended_fence; /* the greatest fence of an owner an answer showed gone (nobody): that
                             tenure is over, a push of it still on its way is old news */
    simba__vals *vals;    /* NULL until a value is met */
    simba__counters cnt;  /* statistics (simba_service_stats) */
    int64_t held_since;   /* loop time of the current ownership's on_acquired */
    int64_t wait_since;   /* start of the wait in progress, SIMBA__NEVER when none */
    simba_reason why_stop, last_reason; /* the reason a stop reports; the latest release's */
    void *user;
    simba_req req;
    simba__view view; /* latest knowledge of the owner */
    char *id; /* stored right after the struct, at its own length ("" for an observer) */
    /* the answer to req, kept until the poll handles it (the simba_reply fields it needs) */
    struct {
        int64_t ttl_left_ms, transition_left_ms, held_ms, quarantine_ms;
        uint64_t fence;
        int32_t rc;
        int32_t first_in_line;
        int32_t holders;
    } rep;
    /* The answer's owner: s->id (we own it), "" (nobody) or rep_other, a copy of another
       contender's id allocated at its first such answer and grown as needed (most services
       see one other owner: a fixed buffer of SIMBA_ID_MAX would be an eighth of a service).
       view_other is view.id's storage for another contender's id; both buffers have
       other_cap bytes and grow together (simba__grow_other). */
    const char *rep_owner;
    char *rep_other, *view_other;
    size_t other_cap;
};

/* A descriptor the fd hook was told about (seen: listed by the latest sync). */
typedef struct simba__watched { simba_backend *be; int fd; short events; short seen; } simba__watched;

struct simba_loop {
    int64_t (*now_fn)(void *);
    void *clock_user;
    void (*sleep_fn)(void *, int64_t);
    void *sleep_user;
    uint32_t (*rand_fn)(void *);
    void *rand_user;
    uint64_t rng;
    void *(*alloc_fn)(void *, size_t);
    void (*free_fn)(void *, void *);
    void *alloc_user;
    void (*log_fn)(void *, simba_log_level, const char *);
    void *log_user;
    simba_log_level log_level;
    uint64_t told[SIMBA__TOLD_MAX]; /* without a log hook: the causes written to stderr */
    int told_n;
    simba__counters cnt; /* totals of every service the loop has had */
    char last_error_buf[SIMBA__ERRMSG_MAX];
    int64_t now; /* cached during a poll */
    simba__heap_slot *heap;
    int heap_n, heap_cap, ntimers;
    simba_backend *backends;
    simba_service *services;
    simba_locker *lockers;
    simba_scheduler *scheds;
    simba_req *done_head, *done_tail;
    simba__behind *behind; /* releases sent behind an acquire, unanswered */
    struct simba__ask *asks; /* inspections in flight */
    simba__ev *ev_head, *ev_tail, *ev_free;
    int ev_nfree, more;
    int64_t poll_start_us, budget_us;
    int max_steps, steps; /* count bound (0 = none) and the steps of the poll in progress */
    simba_service *gc;
    int in_poll, in_cb, free_requested, closing, in_submit;
    struct pollfd *pfd;
    int pfd_cap;
    /* descriptors the fd hook was told about, and the deadline the caller last learnt */
    void (*fd_hook)(void *, int, short);
    void *fd_user;
    void (*timer_hook)(void *, int64_t);
    void *timer_user;
    simba__watched *wfd;
    int wfd_n, wfd_cap;
    int64_t armed_at;
    uint64_t id_counter;
    unsigned char view_value[SIMBA_VALUE_MAX]; /* the value of the last inspection handed out */
    simba_view_holder *view_holders; /* its holders and their values (simba__holders_copy) */
    simba__tprof *tprofs; /* the services' timing profiles, most recently used first */
    int host_done;
    char host[64];
    char errmsg[256];
};

/* ---- loop basics ------------------------------------------------------------------- */

static void *simba__default_alloc(void *u, size_t n) { (void)u; return SIMBA_MALLOC(n); }
static void simba__default_free(void *u, void *p) { (void)u; SIMBA_FREE(p); }

SIMBA_API void *simba_alloc(simba_loop *loop, size_t size) {
    if (!loop || !size) return NULL;
    return loop->alloc_fn(loop->alloc_user, size);
}
static SIMBA__KIT char *simba__strdup(simba_loop *loop, const char *s) {
    size_t n;
    char *p;
    if (!s) return NULL;
    n = strlen(s) + 1;
    p = (char *)simba_alloc(loop, n);
    if (p) memcpy(p, s, n);
    return p;
}
SIMBA_API void simba_free(simba_loop *loop, void *ptr) {
    if (loop && ptr) loop->free_fn(loop->alloc_user, ptr);
}
static void *simba__lalloc(void *u, size_t n) { return simba_alloc((simba_loop *)u, n); }
static void simba__lfree(void *u, void *p) { simba_free((simba_loop *)u, p); }

/* Without a log hook, WARN and ERROR go to stderr once per cause, as libpq's default notice
   processor does: a program that hooks nothing still hears why nobody is granted. A cause
   is the message without its numbers (a quarantine's ms left change, its words do not). */
static void simba__log_default(simba_loop *loop, simba_log_level level, const char *msg) {
    uint64_t h = 14695981039346656037ull;
    const char *c;
    int i;
    if (level < SIMBA_LOG_WARN) return;
    for (c = msg; *c; c++)
        if (*c < '0' || *c > '9') h = (h ^ (unsigned char)*c) * 1099511628211ull;
    for (i = 0; i < loop->told_n; i++)
        if (loop->told[i] == h) return;
    if (loop->told_n == SIMBA__TOLD_MAX) return;
    loop->told[loop->told_n++] = h;
    fprintf(stderr, "simba: %s: %s\n", level == SIMBA_LOG_WARN ? "warning" : "error", msg);
    if (loop->told_n == SIMBA__TOLD_MAX)
        fprintf(stderr, "simba: further warnings are not shown (simba_loop_desc.log hears them all)\n");
}

static void simba__vlog(simba_loop *loop, simba_log_level level, const char *fmt, va_list ap) {
    char buf[512];
    if (!loop || level < loop->log_level) return;
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (loop->log_fn) loop->log_fn(loop->log_user, level, buf);
    else simba__log_default(loop, level, buf);
}
SIMBA_API void simba_log(simba_loop *loop, simba_log_level level, const char *fmt, ...) {
    va_list ap;
    if (!loop || !fmt) return;
    va_start(ap, fmt);
    simba__vlog(loop, level, fmt, ap);
    va_end(ap);
}

/* Record why a call failed (simba_loop_errmsg) and log it at WARN. Returns rc. */
static simba_result simba__fail(simba_loop *loop, simba_result rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static simba_result simba__fail(simba_loop *loop, simba_result rc, const char *fmt, ...) {
    va_list ap;
    if (!loop) return rc;
    va_start(ap, fmt);
    vsnprintf(loop->errmsg, sizeof loop->errmsg, fmt, ap);
    va_end(ap);
    /* the caller has rc and simba_loop_errmsg: stderr by default would only repeat them */
    if (loop->log_fn) simba_log(loop, SIMBA_LOG_WARN, "%s: %s", simba_strerror(rc), loop->errmsg);
    return rc;
}

/* Every duration of the API is checked here, one way and one bound (see
   DURATIONS), so that a value is never accepted by one call and refused by another. */
static simba_result simba__ms_check(simba_loop *l, const char *fn, const char *field, int64_t v, int64_t lo) {
    if (v >= lo && v <= SIMBA_MAX_MS) return SIMBA_OK;
    return simba__fail(l, SIMBA_EINVAL, "%s: %s = %lld is out of range: it must be in %lld..%lld (SIMBA_MAX_MS)", fn, field,
                       (long long)v, (long long)lo, (long long)SIMBA_MAX_MS);
}

/* A duration field of a backend's desc: 0..SIMBA_MAX_MS (0 means the default). */
static SIMBA__KIT simba_result simba__desc_ms(simba_loop *loop, const char *call, const char *field, int64_t v) {
    return simba__ms_check(loop, call, field, v, 0);
}

/* A networked backend's reconnect bounds: two durations, and min <= max where both are set
   (as simba_contend does with its backoff: an explicit inversion is a mistake). */
static SIMBA__KIT simba_result simba__desc_reconnect(simba_loop *loop, const char *call, int64_t min, int64_t max) {
    simba_result rc;
    if ((rc = simba__desc_ms(loop, call, "reconnect_min_ms", min)) != SIMBA_OK ||
        (rc = simba__desc_ms(loop, call, "reconnect_max_ms", max)) != SIMBA_OK)
        return rc;
    if (min && max && min > max)
        return simba__fail(loop, SIMBA_EINVAL, "%s: reconnect_min_ms (%lld) must not exceed reconnect_max_ms (%lld)", call,
                           (long long)min, (long long)max);
    return SIMBA_OK;
}

SIMBA_API const char *simba_loop_errmsg(const simba_loop *loop) { return loop ? loop->errmsg : "no loop"; }

/* A timeout: negative means no limit, otherwise the same bound. */
static simba_result simba__timeout_check(simba_loop *l, const char *fn, int64_t v) {
    if (v <= SIMBA_MAX_MS) return SIMBA_OK;
    return simba__fail(l, SIMBA_EINVAL, "%s: timeout_ms = %lld exceeds %lld (SIMBA_MAX_MS); a negative timeout waits without limit",
                       fn, (long long)v, (long long)SIMBA_MAX_MS);
}

SIMBA_API int64_t simba_now(simba_loop *loop) {
    if (!loop) return 0;
    return loop->now_fn(loop->clock_user);
}

static uint32_t simba__rand(simba_loop *loop) {
    uint64_t x;
    if (loop->rand_fn) return loop->rand_fn(loop->rand_user);
    x = loop->rng; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    loop->rng = x;
    return (uint32_t)((x * 2685821657736338717ull) >> 32);
}

/* Uniform in [lo, hi) (hi > lo). */
static int64_t simba__uniform(simba_loop *loop, int64_t lo, int64_t hi) {
    uint64_t span = (uint64_t)(hi - lo);
    uint64_t r = ((uint64_t)simba__rand(loop) << 32) | simba__rand(loop);
    if (hi <= lo) return lo;
    return lo + (int64_t)(r % span);
}

/* ---- timer heap ---------------------------------------------------------------------- */

/* A 4-ary heap whose slots hold each timer's time next to its pointer: sifting compares
   times inside the array (a cache line holds a node's four children) and never reads the
   services, which lie scattered in memory; with 20,000 timers that was most of a poll's cost. */
#define SIMBA__HEAP_D 4
static void simba__heap_put(simba_loop *l, int i, simba__heap_slot e) {
    l->heap[i] = e;
    e.t->idx = i;
}
static void simba__heap_up(simba_loop *l, int i) {
    simba__heap_slot e = l->heap[i];
    while (i > 0) {
        int p = (i - 1) / SIMBA__HEAP_D;
        if (!(e.at < l->heap[p].at)) break;
        simba__heap_put(l, i, l->heap[p]);
        i = p;
    }
    simba__heap_put(l, i, e);
}
static void simba__heap_down(simba_loop *l, int i) {
    simba__heap_slot e = l->heap[i];
    for (;;) {
        int c = SIMBA__HEAP_D * i + 1, m = -1, k, end = c + SIMBA__HEAP_D;
        int64_t best = e.at;
        if (end > l->heap_n) end = l->heap_n;
        for (k = c; k < end; k++)
            if (l->heap[k].at < best) {
                best = l->heap[k].at;
                m = k;
            }
        if (m < 0) break;
        simba__heap_put(l, i, l->heap[m]);
        i = m;
    }
    simba__heap_put(l, i, e);
}
static void simba__heap_remove(simba_loop *l, simba__timer *t) {
    int i = t->idx;
    if (i < 0) return;
    l->heap_n--;
    if (i != l->heap_n) {
        simba__timer *moved = l->heap[l->heap_n].t;
        simba__heap_put(l, i, l->heap[l->heap_n]);
        simba__heap_down(l, i);
        simba__heap_up(l, moved->idx);
    }
    t->idx = -1;
}
/* Every timer object gets its heap slot reserved when it is created, so that arming a
   timer later can never fail for lack of memory. */
static int simba__timer_init(simba_loop *l, simba__timer *t, int kind) {
    if (l->ntimers + 1 > l->heap_cap) {
        int cap = l->heap_cap ? l->heap_cap * 2 : 64;
        simba__heap_slot *h;
        h = (simba__heap_slot *)simba_alloc(l, (size_t)cap * sizeof *h);
        if (!h) return 0;
        if (l->heap_n) memcpy(h, l->heap, (size_t)l->heap_n * sizeof *h);
        simba_free(l, l->heap);
        l->heap = h;
        l->heap_cap = cap;
    }
    l->ntimers++;
    t->idx = -1;
    t->kind = kind;
    t->at = SIMBA__NEVER;
    return 1;
}
static void simba__timer_fini(simba_loop *l, simba__timer *t);
/* at == SIMBA__NEVER takes the timer out. Room was reserved when the owner was created. */
static void simba__kick(simba_loop *l);
static void simba__timer_set(simba_loop *l, simba__timer *t, int64_t at) {
    if (at == SIMBA__NEVER) { simba__heap_remove(l, t); return; }
    if (t->idx >= 0) {
        int64_t old = t->at;
        t->at = at;
        l->heap[t->idx].at = at;
        if (at < old) simba__heap_up(l, t->idx); else simba__heap_down(l, t->idx);
    } else {
        t->at = at;
        t->idx = l->heap_n++;
        l->heap[t->idx].at = at;
        l->heap[t->idx].t = t;
        simba__heap_up(l, t->idx);
    }
    if (at < l->armed_at) simba__kick(l);
}
static void simba__timer_fini(simba_loop *l, simba__timer *t) {
    simba__heap_remove(l, t);
    l->ntimers--;
}

/* ---- backends ------------------------------------------------------------------------ */

SIMBA_API simba_result simba_backend_new(simba_loop *loop, const simba_backend_vt *vt, void *impl, simba_backend **out) {
    simba_backend *be;
    if (out) *out = NULL;
    if (!loop || !vt || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_backend_new: NULL argument");
    /* The one layout this core knows; a vt built for another one would be misread. */
    if (vt->size != sizeof(simba_backend_vt) && vt->size != offsetof(simba_backend_vt, hurry) &&
        vt->size != offsetof(simba_backend_vt, inspect) && vt->size != offsetof(simba_backend_vt, announce))
        return simba__fail(loop, SIMBA_EINVAL, "simba_backend_new: vt size %lu is not this core's (%lu): set .size = sizeof(simba_backend_vt)",
                           (unsigned long)vt->size, (unsigned long)sizeof(simba_backend_vt));
    if (!vt->submit || !vt->name) return simba__fail(loop, SIMBA_EINVAL, "simba_backend_new: vt needs name and submit");
    be = (simba_backend *)simba__zalloc(loop, sizeof *be);
    if (!be) return simba__fail(loop, SIMBA_ENOMEM, "simba_backend_new: out of memory");
    be->loop = loop;
    be->vt = vt;
    be->hurry = vt->size > offsetof(simba_backend_vt, hurry) ? vt->hurry : NULL;
    be->inspect = vt->size > offsetof(simba_backend_vt, inspect) ? vt->inspect : NULL;
    be->announce = vt->size > offsetof(simba_backend_vt, announce) ? vt->announce : NULL;
    be->impl = impl;
    be->next = loop->backends;
    if (loop->backends) loop->backends->prev = be;
    loop->backends = be;
    *out = be;
    return SIMBA_OK;
}

static void simba__backend_destroy(simba_backend *be) {
    simba_loop *l = be->loop;
    simba__ev *ev;
    for (ev = l->ev_head; ev; ev = ev->next)
        if (ev->be == be) ev->be = NULL; /* queued pushes for a backend that is gone */
    if (be->vt->destroy) be->vt->destroy(be->impl);
    simba_backend_fd(be, -1, 0); /* whatever the backend left watched */
    simba_free(l, be->mxs.b);
    if (be->prev) be->prev->next = be->next; else l->backends = be->next;
    if (be->next) be->next->prev = be->prev;
    simba_free(l, be);
}

SIMBA_API simba_result simba_backend_free(simba_backend *be) {
    size_t i;
    int live = 0;
    if (!be || be->free_requested) return SIMBA_EINVAL;
    for (i = 0; i < be->mxs.nb; i++) {
        simba__hnode *n;
        for (n = be->mxs.b[i]; n; n = n->hnext) {
            simba_service *s;
            for (s = ((simba__mx *)n)->svcs; s; s = s->mx_next)
                if (!(s->flags & SIMBA__F_ZOMBIE)) live++;
        }
    }
    if (live > 0)
        return simba__fail(be->loop, SIMBA_EBUSY, "simba_backend_free: %d services, lockers or schedulers still use backend '%s'",
                           live, be->vt->name);
    /* Only services the caller already freed remain, finishing their release: the last of
       them frees the backend (the caller owns nothing here any more). */
    if (be->users > 0) { be->free_requested = 1; return SIMBA_OK; }
    simba__backend_destroy(be);
    return SIMBA_OK;
}
SIMBA_API const char *simba_backend_errmsg(const simba_backend *be) { return be ? be->errmsg : "no backend"; }
SIMBA_API simba_loop *simba_backend_loop(const simba_backend *be) { return be ? be->loop : NULL; }
SIMBA_API simba_result simba_backend_set_max_lease(simba_backend *be, int64_t max_lease_ms) {
    simba_result rc;
    if (!be) return SIMBA_EINVAL;
    if (max_lease_ms != 0 && (rc = simba__ms_check(be->loop, "simba_backend_set_max_lease", "max_lease_ms", max_lease_ms, 1)) != SIMBA_OK)
        return rc;
    be->max_lease = max_lease_ms;
    return SIMBA_OK;
}
SIMBA_API int64_t simba_backend_max_lease(const simba_backend *be) { return be ? be->max_lease : 0; }
SIMBA_API void *simba_backend_impl(const simba_backend *be) { return be ? be->impl : NULL; }
SIMBA_API const simba_backend_vt *simba_backend_vt_get(const simba_backend *be) { return be ? be->vt : NULL; }

static simba__mx *simba__mx_get(simba_backend *be, const char *name, simba_result *rc) {
    simba_loop *l = be->loop;
    simba__mx *mx = (simba__mx *)simba__hfind(&be->mxs, name);
    *rc = SIMBA_OK;
    if (mx) return mx;
    mx = (simba__mx *)simba__zalloc(l, sizeof *mx + strlen(name) + 1);
    if (!mx) { *rc = SIMBA_ENOMEM; return NULL; }
    mx->name = (char *)(mx + 1);
    memcpy(mx->name, name, strlen(name) + 1);
    mx->h.key = mx->name;
    if (be->vt->watch) {
        simba_result w = be->vt->watch(be->impl, mx->name);
        if (w != SIMBA_OK) { simba_free(l, mx); *rc = w; return NULL; }
    }
    if (!simba__hinsert(&be->mxs, &mx->h, simba__lalloc, simba__lfree, l)) {
        if (be->vt->unwatch) be->vt->unwatch(be->impl, mx->name);
        simba_free(l, mx);
        *rc = SIMBA_ENOMEM;
        return NULL;
    }
    return mx;
}
static void simba__mx_put(simba_backend *be, simba__mx *mx) {
    if (mx->nsvcs > 0) return;
    if (be->vt->unwatch) be->vt->unwatch(be->impl, mx->name);
    simba__hremove(&be->mxs, &mx->h);
    simba_free(be->loop, mx);
}

/* >>stats: counter updates, called where ownership moves; they never allocate. */
static void simba__stat_acquired(simba_service *s) {
    simba_loop *l = s->loop;
    s->cnt.acquisitions++;
    l->cnt.acquisitions++;
    s->held_since = l->now;
    if (s->wait_since != SIMBA__NEVER) {
        int64_t w = simba__max(0, l->now - s->wait_since);
        s->cnt.waits++;
        l->cnt.waits++;
        s->cnt.wait_total_ms = simba__add(s->cnt.wait_total_ms, w);
        l->cnt.wait_total_ms = simba__add(l->cnt.wait_total_ms, w);
        s->cnt.wait_max_ms = simba__max(s->cnt.wait_max_ms, w);
        l->cnt.wait_max_ms = simba__max(l->cnt.wait_max_ms, w);
        s->wait_since = SIMBA__NEVER;
    }
}
static void simba__stat_released(simba_service *s, simba_reason why) {
    simba_loop *l = s->loop;
    int64_t held = simba__max(0, l->now - s->held_since);
    s->cnt.releases++;
    l->cnt.releases++;
    s->cnt.by_reason[why]++;
    l->cnt.by_reason[why]++;
    s->cnt.held_total_ms = simba__add(s->cnt.held_total_ms, held);
    l->cnt.held_total_ms = simba__add(l->cnt.held_total_ms, held);
    s->last_reason = why;
    /* A contender still running waits for its next tenure from now on. */
    if (s->status == SIMBA_RUNNING) s->wait_since = l->now;
}
static void simba__stat_error(simba_service *s, int rc, const char *msg) {
    simba__counters *c[2];
    int i;
    c[0] = &s->cnt;
    c[1] = &s->loop->cnt;
    if (!s->cnt.last_error_msg) s->cnt.last_error_msg = (char *)simba_alloc(s->loop, SIMBA__ERRMSG_MAX);
    for (i = 0; i < 2; i++) {
        c[i]->errors++;
        c[i]->last_error = rc;
        c[i]->last_error_at = s->loop->now;
        if (c[i]->last_error_msg) simba__copy(c[i]->last_error_msg, SIMBA__ERRMSG_MAX, msg);
    }
}

/* ---- completions and events (queued; handled inside the poll) ------------------------- */

/* The value buffers, allocated at the first value met (0 when there is no memory). */
static int simba__vals_get(simba_service *s) {
    if (s->vals) return 1;
    s->vals = (simba__vals *)simba_alloc(s->loop, sizeof *s->vals);
    if (!s->vals) return 0;
    s->vals->own_len = s->vals->pend_len = s->vals->view_len = s->vals->rep_len = 0;
    return 1;
}

/* Room for another contender's id of n bytes in both rep_other and view_other. The view's
   id is carried over (it may live in the old view_other). */
static int simba__grow_other(simba_service *s, size_t n) {
    size_t cap = (n + 15) & ~(size_t)15;
    char *p = (char *)simba_alloc(s->loop, cap), *q = (char *)simba_alloc(s->loop, cap);
    if (!p || !q) { simba_free(s->loop, p); simba_free(s->loop, q); return 0; }
    if (s->view.id == s->view_other) {
        memcpy(q, s->view_other, strlen(s->view_other) + 1);
        s->view.id = q;
    }
    simba_free(s->loop, s->rep_other);
    simba_free(s->loop, s->view_other);
    s->rep_other = p;
    s->view_other = q;
    s->other_cap = cap;
    return 1;
}

static void simba__req_failed(simba_service *s, const simba_req *req, const simba_reply *reply) {
    simba__copy(s->be->errmsg, sizeof s->be->errmsg, reply->errmsg ? reply->errmsg : simba_strerror(reply->rc));
    simba__stat_error(s, reply->rc, s->be->errmsg);
    if (reply->quarantine_ms > 0) return; /* simba__quarantined says it, with when it asks again */
    simba_log(s->loop, SIMBA_LOG_WARN, "%s: %s on mutex %s: %s", s->be->vt->name,
              req->op == SIMBA_OP_RELEASE ? "release" : req->op == SIMBA_OP_READ ? "read" : "acquire", req->mutex,
              s->be->errmsg);
}
static void simba__done_queue(simba_loop *l, simba_req *req) {
    req->done_next_ = NULL;
    if (l->done_tail) l->done_tail->done_next_ = req; else l->done_head = req;
    l->done_tail = req;
    simba__kick(l);
}

static void simba__ask_done(simba_req *req, const simba_reply *reply);
SIMBA_API void simba_req_done(simba_req *req, const simba_reply *reply) {
    simba_service *s;
    simba_loop *l;
    simba_reply own; /* the core's own failure, when the answer cannot be kept */
    if (!req || !reply) return;
    s = req->svc_;
    if (req->done_) {
        if (s) simba_log(s->loop, SIMBA_LOG_ERROR, "backend completed a request twice (mutex %s)", req->mutex);
        return;
    }
    req->done_ = 1;
    if (req->ask_) { simba__ask_done(req, reply); return; }
    if (!s) return;
    l = s->loop;
    if (l->closing) return;
    if (req != &s->req) { /* a release sent behind an acquire: only its result is kept */
        ((simba__behind *)(void *)req)->rc = reply->rc;
        if (reply->rc != SIMBA_OK) simba__req_failed(s, req, reply);
        simba__done_queue(l, req);
        return;
    }
    if (reply->rc == SIMBA_OK && reply->owner && reply->owner[0] && simba_id_check(reply->owner) != SIMBA_OK) {
        /* Whatever the store holds, users only ever see well-formed ids. */
        reply = simba__reply_fail(&own, SIMBA_EBACKEND, "backend reported a malformed owner id");
    }
    if (reply->rc == SIMBA_OK && (reply->value_len > SIMBA_VALUE_MAX || (reply->value_len && !reply->value))) {
        reply = simba__reply_fail(&own, SIMBA_EBACKEND, "backend reported a value longer than SIMBA_VALUE_MAX");
    }
    if (reply->rc == SIMBA_OK && reply->owner && reply->owner[0] && reply->value_len && !simba__vals_get(s)) {
        reply = simba__reply_fail(&own, SIMBA_ENOMEM, "out of memory keeping a backend's answer");
    }
    if (s->vals) {
        /* the value belongs to the owner: none without one */
        s->vals->rep_len = reply->rc == SIMBA_OK && reply->owner && reply->owner[0] ? reply->value_len : 0;
        if (s->vals->rep_len) memcpy(s->vals->rep, reply->value, s->vals->rep_len);
    }
    if (reply->rc == SIMBA_OK && reply->yielded) s->flags |= SIMBA__F_YIELDED; else s->flags &= ~SIMBA__F_YIELDED;
    s->rep.rc = reply->rc;
    s->rep.first_in_line = reply->first_in_line != 0;
    s->rep.ttl_left_ms = reply->ttl_left_ms;
    s->rep.transition_left_ms = reply->transition_left_ms;
    s->rep.held_ms = reply->held_ms;
    s->rep.quarantine_ms = reply->rc != SIMBA_OK && reply->quarantine_ms > 0 ? simba__min(reply->quarantine_ms, SIMBA_MAX_MS) : 0;
    s->rep.fence = reply->fence;
    s->rep.holders = reply->holders > 0 ? (int32_t)simba__min(reply->holders, SIMBA_PERMITS_MAX) : reply->owner && reply->owner[0] ? 1 : 0;
    s->rep_owner = "";
    if (reply->owner && reply->owner[0]) {
        size_t n = strlen(reply->owner) + 1;
        if (strcmp(reply->owner, s->id) == 0) {
            s->rep_owner = s->id;
        } else if (n <= s->other_cap || simba__grow_other(s, n)) {
            memcpy(s->rep_other, reply->owner, n);
            s->rep_owner = s->rep_other;
        } else {
            /* The answer cannot be kept: like a request that failed, the core backs off. */
            reply = simba__reply_fail(&own, SIMBA_ENOMEM, "out of memory keeping a backend's answer");
            s->rep.rc = reply->rc;
            s->rep.held_ms = reply->held_ms;
        }
    }
    if (reply->rc != SIMBA_OK) simba__req_failed(s, req, reply);
    simba__done_queue(l, req);
}

SIMBA_API void simba_req_fail(simba_req *req, simba_result rc, const char *errmsg) {
    simba_reply rep;
    simba_req_done(req, simba__reply_fail(&rep, rc, errmsg && errmsg[0] ? errmsg : NULL));
}

SIMBA_API void simba_backend_event(simba_backend *be, simba_event_kind kind, const char *mutex, const char *contender, const simba_reply *owner) {
    simba_loop *l;
    simba__ev *ev;
    if (!be || kind < SIMBA_EV_RELEASED || kind > SIMBA_EV_DISCONNECTED) return;
    l = be->loop;
    if (l->closing) return;
    if (mutex && simba_name_check(mutex) != SIMBA_OK) return;
    if (contender && simba_id_check(contender) != SIMBA_OK) return;
    if (kind == SIMBA_EV_OWNER && (!owner || (owner->owner && owner->owner[0] && simba_id_check(owner->owner) != SIMBA_OK) ||
                                   owner->value_len > SIMBA_VALUE_MAX || (owner->value_len && !owner->value)))
        return;
    ev = l->ev_free;
    if (ev) {
        l->ev_free = ev->next;
        l->ev_nfree--;
    }
    else if (!(ev = (simba__ev *)simba_alloc(l, sizeof *ev))) {
        /* Pushes are hints: losing one costs latency (timers remain), never safety. */
        simba_log(l, SIMBA_LOG_WARN, "out of memory: dropped a %s event", be->vt->name);
        return;
    }
    memset(ev, 0, offsetof(simba__ev, value)); /* the value's bytes are written as needed */
    ev->be = be;
    ev->kind = kind;
    ev->all_mutexes = !mutex;
    ev->all_contenders = !contender;
    simba__copy(ev->mutex, sizeof ev->mutex, mutex);
    simba__copy(ev->contender, sizeof ev->contender, contender);
    if (owner) {
        ev->rep = *owner;
        simba__copy(ev->owner, sizeof ev->owner, owner->owner);
        ev->rep.owner = ev->owner;
        ev->rep.errmsg = NULL;
        ev->rep.value_len = ev->owner[0] ? owner->value_len : 0;
        if (ev->rep.value_len) memcpy(ev->value, owner->value, ev->rep.value_len);
        ev->rep.value = ev->value;
    }
    if (l->ev_tail) l->ev_tail->next = ev; else l->ev_head = ev;
    l->ev_tail = ev;
    simba__kick(l);
}

/* ---- the service state machine ------------------------------------------------------ */

static void simba__fire_why(simba_service *s, simba_state_fn fn, const simba_owner *before, const simba_owner *after,
                            simba_reason why) {
    simba_state st;
    if (!fn || (s->flags & SIMBA__F_ZOMBIE)) return;
    st.before = before;
    st.after = after;
    st.reason = why;
    s->loop->in_cb++;
    fn(s, &st, s->user);
    s->loop->in_cb--;
}
static void simba__fire(simba_service *s, simba_state_fn fn, const simba_owner *before, const simba_owner *after) {
    simba__fire_why(s, fn, before, after, SIMBA_REASON_NONE);
}


/* When on_at_risk is due: a tenure not yet warned whose renewal is failing (one failed, or
   one in flight or due, unconfirmed) warns at_risk before its local lease ends. */
static int64_t simba__at_risk_at(const simba_service *s) {
    if (!s->tp->v.on_at_risk ||
        (s->flags & (SIMBA__F_OWNER | SIMBA__F_TOLD | SIMBA__F_AT_RISK | SIMBA__F_YIELDING)) != (SIMBA__F_OWNER | SIMBA__F_TOLD))
        return SIMBA__NEVER;
    if (!(s->flags & (SIMBA__F_RENEW_FAILED | SIMBA__F_INFLIGHT)) && s->next_try > s->loop->now) return SIMBA__NEVER;
    return simba__add(s->lease_end, -s->tp->v.at_risk);
}

/* A deadline of the lease itself (its end, at-risk) that the step run at this very instant
   left due is not armed again at this instant: running the step again before time moves
   cannot change its outcome, and the loop would ask to be polled at once, forever. */
static int64_t simba__unacted(const simba_service *s, int64_t at) {
    return at <= s->stepped_at && s->stepped_at == s->loop->now ? SIMBA__NEVER : at;
}

static void simba__arm(simba_service *s) {
    simba_loop *l = s->loop;
    int64_t at = SIMBA__NEVER;
    if (s->status == SIMBA_STOPPING) {
        if ((s->flags & SIMBA__F_TOLD) || !(s->flags & (SIMBA__F_INFLIGHT | SIMBA__F_RELEASE_SENT))) at = l->now;
    } else if (s->status == SIMBA_RUNNING) {
        if (!(s->flags & SIMBA__F_INFLIGHT)) at = s->next_try;
        if (s->flags & SIMBA__F_OWNER) at = simba__min(at, simba__unacted(s, s->lease_end));
        if ((s->flags & SIMBA__F_OWNER) && !(s->flags & SIMBA__F_INFLIGHT) && (s->flags & (SIMBA__F_SETVAL | SIMBA__F_YIELD)))
            at = l->now;
        at = simba__min(at, simba__unacted(s, simba__at_risk_at(s)));
    }
    simba__timer_set(l, &s->tm, at);
}

/* Nobody. The value's bytes are left alone (value_len 0): a simba_owner is 1 KiB of them. */
static void simba__owner_none(simba_owner *o) { memset(o, 0, offsetof(simba_owner, value)); }

static void simba__view_get(const simba_service *s, simba_owner *o) {
    simba__copy(o->id, sizeof o->id, s->view.id);
    o->acquired_at = s->view.acquired_at;
    o->ttl_at = s->view.ttl_at;
    o->transition_at = s->view.transition_at;
    o->fence = s->view.fence;
    o->value_len = s->vals && s->view.id[0] ? s->vals->view_len : 0;
    if (o->value_len) memcpy(o->value, s->vals->view, o->value_len);
}
static int simba__view_is(const simba_service *s, const char *id) { return id && id[0] && strcmp(s->view.id, id) == 0; }
static void simba__view_clear(simba_service *s) {
    memset(&s->view, 0, sizeof s->view);
    s->view.id = "";
    if (s->vals) s->vals->view_len = 0;
}
/* The view's value, from an owner record; a value without room is dropped (it is shown
   again with the next answer), which keeps ownership decisions independent of memory. */
static void simba__view_value_put(simba_service *s, const simba_owner *nv) {
    size_t n = nv->id[0] ? nv->value_len : 0;
    if (!n && !s->vals) return;
    if (!simba__vals_get(s)) return;
    s->vals->view_len = n;
    if (n) memcpy(s->vals->view, nv->value, n);
}
static int simba__view_value_is(const simba_service *s, const simba_owner *nv) {
    size_t have = s->vals ? s->vals->view_len : 0, n = nv->id[0] ? nv->value_len : 0;
    return have == n && (!n || memcmp(s->vals->view, nv->value, n) == 0);
}
/* "" and our own id need no room; another id normally has it already (an answer's owner
   was given room where its failure could be reported, see simba_req_done). Should room for
   it fail here, the view says "nobody": a waiter then asks at once and the server says who
   owns it, which is safe (only the server grants). */
static void simba__view_put(simba_service *s, const simba_owner *nv) {
    size_t n;
    simba__view_value_put(s, nv);
    s->view.acquired_at = nv->acquired_at;
    s->view.ttl_at = nv->ttl_at;
    s->view.transition_at = nv->transition_at;
    s->view.fence = nv->fence;
    if (!nv->id[0]) { s->view.id = ""; return; }
    if (strcmp(nv->id, s->id) == 0) { s->view.id = s->id; return; }
    if (s->view.id == s->view_other && strcmp(s->view_other, nv->id) == 0) return;
    n = strlen(nv->id) + 1;
    if (n > s->other_cap && !simba__grow_other(s, n)) { s->view.id = ""; return; }
    memcpy(s->view_other, nv->id, n);
    s->view.id = s->view_other;
}

/* A new view of the owner; on_owner fires when the owner id, fence or value changed. */
static void simba__set_view(simba_service *s, const simba_owner *nv) {
    simba_owner before, after;
    /* Fences only grow: another owner with a fence below one already shown, or of a tenure
       shown over, is old news (a push overtaken by an answer, or the reverse; a store failed
       over to a replica that missed the latest grant), and showing it would bring back a
       contender that no longer leads. Our own tenure that just ended then shows as nobody. */
    if (nv->id[0] && (nv->fence < s->seen_fence || (s->ended_fence && nv->fence <= s->ended_fence)) &&
        strcmp(nv->id, s->id) != 0 && !(s->flags & SIMBA__F_MANY)) {
        if (s->view.id == s->id && !(s->flags & SIMBA__F_OWNER)) {
            simba_owner none;
            simba__owner_none(&none);
            simba__set_view(s, &none);
        }
        return;
    }
    if (nv->id[0] && nv->fence > s->seen_fence) s->seen_fence = nv->fence;
    if ((strcmp(s->view.id, nv->id) == 0 && s->view.fence == nv->fence && simba__view_value_is(s, nv)) || !s->tp->v.on_owner ||
        (s->flags & SIMBA__F_ZOMBIE)) {
        simba__view_put(s, nv);
        return;
    }
    simba__view_get(s, &before);
    simba__view_put(s, nv);
    simba__view_get(s, &after);
    simba__fire(s, s->tp->v.on_owner, &before, &after);
}

/* Ownership leaves this contender: local belief ends now, the user hears once. */
static void simba__step_down(simba_service *s, const simba_owner *after, simba_reason why) {
    simba_owner before;
    simba__view_get(s, &before);
    s->flags &= ~(SIMBA__F_OWNER | SIMBA__F_SETVAL | SIMBA__F_YIELD | SIMBA__F_YIELDING | SIMBA__F_RENEW_FAILED);
    if (s->flags & SIMBA__F_TOLD) {
        s->flags &= ~SIMBA__F_TOLD;
        if (!simba_owner_is(&before, s->id)) { /* view already moved on: describe what we had */
            simba__copy(before.id, sizeof before.id, s->id);
            before.fence = s->own_fence;
        }
        simba__stat_released(s, why);
        simba__fire_why(s, s->tp->v.on_released, &before, after, why);
    }
}

/* Sends op on r: the service's own request, or a release behind it (simba__stop_send). */
static void simba__submit_on(simba_service *s, simba_req *r, simba_op op) {
    simba_backend *be = s->be;
    simba_result rc;
    memset(r, 0, sizeof *r);
    r->op = op;
    r->mutex = s->mx->name;
    r->contender = s->kind == SIMBA__KIND_OBSERVE ? "" : s->id;
    if (op == SIMBA_OP_ACQUIRE || op == SIMBA_OP_SET_VALUE) {
        if (s->flags & SIMBA__F_PEND) { /* nothing in flight reads own any more */
            memcpy(s->vals->own, s->vals->pend, s->vals->pend_len);
            s->vals->own_len = s->vals->pend_len;
            s->flags &= ~SIMBA__F_PEND;
        }
        r->value = s->vals && s->vals->own_len ? s->vals->own : NULL;
        r->value_len = s->vals ? s->vals->own_len : 0;
    }
    if (op == SIMBA_OP_SET_VALUE || op == SIMBA_OP_YIELD) r->fence = s->own_fence;
    r->ttl_ms = s->tp->v.ttl;
    r->transition_ms = s->tp->v.transition;
    r->permits = s->tp->v.permits;
    r->shared = s->tp->v.shared;
    /* The poll's cached time is never later than the real send time: the lease we count
       from it can only end earlier than the server's. */
    r->sent_at = s->loop->now;
    /* A free mutex last found kept for another head (not first in line) is not expected
       to be ours either: the backend may read before it writes. */
    r->expect_win = op == SIMBA_OP_ACQUIRE && ((s->flags & SIMBA__F_OWNER) || simba__view_is(s, s->id) ||
                                               (!(s->view.id[0] && s->view.transition_at >= s->loop->now) &&
                                                !((s->flags & SIMBA__F_ASKED) && !(s->flags & SIMBA__F_FIRST) && s->free_retry > 0)));
    r->renew = op == SIMBA_OP_ACQUIRE && (s->flags & SIMBA__F_OWNER) != 0;
    /* A waiter's own timer re-asking holds its place already and wakes nobody: the backend
       may batch it, for long when it expects no win, briefly when it may take over. */
    r->deferrable = op != SIMBA_OP_ACQUIRE || r->renew || s->kind != SIMBA__KIND_CONTEND ||
                            !(s->flags & SIMBA__F_ASKED) || (s->flags & SIMBA__F_WOKEN)
                        ? SIMBA_DEFER_NO
                        : r->expect_win ? SIMBA_DEFER_TAKEOVER : SIMBA_DEFER_ROUTINE;
    s->flags &= ~SIMBA__F_WOKEN;
    /* A waiter asks again by ttl + transition + jitter max at the latest (simba__contender_next);
       a second of slack covers a loaded host's scheduling. */
    r->live_ms = op == SIMBA_OP_ACQUIRE || op == SIMBA_OP_YIELD ? simba__min(simba__add(s->tp->v.ttl + s->tp->v.transition + simba__max(s->tp->v.jmax, 0), 1000), SIMBA_MAX_MS) : 0;
    /* simba__contender_next never waits longer than this after an answered ask. */
    r->next_ask_ms = op == SIMBA_OP_ACQUIRE && !(s->flags & SIMBA__F_OWNER) && s->kind == SIMBA__KIND_CONTEND
                         ? simba__min(simba__add(s->tp->v.ttl + s->tp->v.transition, simba__max(s->tp->v.jmax, 0)), SIMBA_MAX_MS)
                         : 0;
    r->step_down_on_disconnect = op == SIMBA_OP_ACQUIRE && (s->flags & SIMBA__F_DISC_DOWN) != 0;
    r->company_ms = op != SIMBA_OP_ACQUIRE ? 0
                 : r->renew || r->deferrable == SIMBA_DEFER_ROUTINE ? simba__min(r->ttl_ms / 64, SIMBA_HOLD_MS)
                 : r->deferrable == SIMBA_DEFER_TAKEOVER ? simba__min(r->ttl_ms / 256, SIMBA_HOLD_TAKEOVER_MS)
                                                          : 0;
    r->svc_ = s;
    r->gen_ = s->gen;
    if (r == &s->req) s->push_fence = 0;
    if (op == SIMBA_OP_ACQUIRE || op == SIMBA_OP_READ) { s->cnt.attempts++; s->loop->cnt.attempts++; }
    s->flags |= r == &s->req ? SIMBA__F_INFLIGHT : SIMBA__F_BEHIND;
    if (op == SIMBA_OP_RELEASE) s->flags |= SIMBA__F_RELEASE_SENT;
    s->loop->in_submit++; /* no hooks while the backend is inside submit */
    rc = be->vt->submit(be->impl, r);
    s->loop->in_submit--;
    if (rc != SIMBA_OK && !r->done_) simba_req_fail(r, rc, be->errmsg[0] ? NULL : "submit refused"); /* like any failed answer */
    simba__kick(s->loop); /* what the backend now watches and when it times out */
}
static void simba__submit(simba_service *s, simba_op op) { simba__submit_on(s, &s->req, op); }

static void simba__attempt_failed(simba_service *s) {
    int64_t now = s->loop->now, delay;
    delay = simba__backoff(s->loop, &s->backoff, s->tp->v.bmin, s->tp->v.bmax);
    /* An owner keeps trying while its lease lasts, at least twice before it ends. */
    if (s->flags & SIMBA__F_OWNER) delay = simba__min(delay, simba__max(1, (s->lease_end - now) / 2));
    s->next_try = simba__add(now, simba__max(delay, 1));
    s->flags &= ~SIMBA__F_IMMEDIATE;
}

/* The store grants nobody for ms (its data-loss quarantine). Ask again right after it ends,
   not on the error backoff, which could overshoot it by seconds; the application hears of
   it once per quarantine (on_event, a WARN, the stats), never as a silent wait. */
static void simba__quarantined(simba_service *s, int64_t ms) {
    simba_loop *l = s->loop;
    int64_t until = simba__add(l->now, ms);
    int first = s->quar_until == 0;
    if (s->flags & SIMBA__F_OWNER) { simba__attempt_failed(s); return; } /* renewals never wait on it */
    s->quar_until = until;
    s->next_try = simba__add(until, 1 + simba__uniform(l, 0, simba__max(s->tp->v.min_retry, 1)));
    s->flags &= ~SIMBA__F_IMMEDIATE;
    if (!first) return;
    s->cnt.quarantines++;
    l->cnt.quarantines++;
    simba_log(l, SIMBA_LOG_WARN, "%s: mutex %s: no grant for %lld ms (until loop time %lld), then it asks again: %s",
              s->be->vt->name, s->mx->name, (long long)ms, (long long)until, s->be->errmsg);
    if (s->tp->v.on_event && !(s->flags & SIMBA__F_ZOMBIE)) {
        simba_service_event ev;
        ev.type = SIMBA_EVENT_QUARANTINE;
        ev.until = until;
        ev.left_ms = ms;
        ev.msg = s->be->errmsg;
        l->in_cb++;
        s->tp->v.on_event(s, &ev, s->user);
        l->in_cb--;
    }
}

static void simba__owner_from_reply(simba_owner *nv, const simba_reply *rep, int64_t base, int64_t now) {
    nv->id[0] = 0;
    nv->acquired_at = nv->ttl_at = nv->transition_at = 0;
    nv->fence = 0;
    nv->value_len = 0;
    if (!rep->owner || !rep->owner[0]) return;
    nv->value_len = rep->value && rep->value_len <= SIMBA_VALUE_MAX ? rep->value_len : 0;
    if (nv->value_len) memcpy(nv->value, rep->value, nv->value_len);
    simba__copy(nv->id, sizeof nv->id, rep->owner);
    nv->ttl_at = simba__add(base, rep->ttl_left_ms);
    nv->transition_at = simba__add(base, simba__max(rep->transition_left_ms, rep->ttl_left_ms));
    nv->acquired_at = rep->held_ms >= 0 ? simba__add(now, -rep->held_ms) : now;
    nv->fence = rep->fence;
}

/* Next attempt of a contender that does not own the mutex, from what it just learned. */
static int64_t simba__contender_next(simba_service *s, int first_in_line) {
    int64_t now = s->loop->now, target;
    if (!s->view.id[0] || s->view.transition_at < now) {
        /* Nobody holds it: at once. Found free and still not granted, it is kept for the
           head of the backend's queue: ask again at doubling intervals until the head takes
           it or its place lapses (live_ms), never in a tight loop. */
        if (s->flags & SIMBA__F_IMMEDIATE) {
            s->free_retry = s->free_retry ? simba__min(s->free_retry * 2, SIMBA__FREE_RETRY_MAX) : s->tp->v.min_retry;
            return simba__add(now, simba__max(s->free_retry, s->tp->v.min_retry));
        }
        s->flags |= SIMBA__F_IMMEDIATE;
        s->free_retry = 0;
        return now;
    }
    s->flags &= ~SIMBA__F_IMMEDIATE;
    /* The head of the line has no herd to spread: it tries right at lease end. */
    target = simba__add(s->view.transition_at, first_in_line ? 1 : simba__uniform(s->loop, s->tp->v.jmin, s->tp->v.jmax));
    /* Never wait longer than our own lease and jitter since we last asked: an announcement
       with a forged or mistaken lease must not keep a crashed owner's waiters asleep for days,
       and a waiter's place in the queue (live_ms from its last ask) must not lapse while it
       sleeps through other owners' tenures. */
    target = simba__min(target, simba__add((s->flags & SIMBA__F_ASKED) ? simba__min(s->asked_at, now) : now,
                                           s->tp->v.ttl + s->tp->v.transition + s->tp->v.jmax));
    return simba__max(target, simba__add(now, s->tp->v.min_retry));
}

/* When an owner renews: renew_margin before its local ttl_at, never in the past, and with
   room for a retry before the lease ends even when the answer came late. */
static int64_t simba__renew_at(const simba_service *s, int64_t now, int64_t granted, int gained) {
    /* A session lease may be shorter than ttl_ms: the margin never exceeds half of it, or
       the owner would renew continuously. An asked lease is ttl_ms, the margin below it. */
    int64_t margin = s->be->vt->lease == SIMBA_LEASE_SESSION ? simba__min(s->tp->v.renew_margin, simba__max(0, granted / 2))
                                                               : s->tp->v.renew_margin;
    /* Earlier, at random, never later: the first renewal of an ownership by up to half the
       margin, so owners that started together spread their renewals over a sixth of the ttl
       at once; later ones by up to an eighth, so the phases keep drifting apart. */
    int64_t at = simba__add(s->lease_end, -margin - simba__uniform(s->loop, 0, (gained ? margin / 2 : margin / 8) + 1));
    int64_t floor = simba__add(now, simba__max(1, simba__min(s->tp->v.min_retry, (s->lease_end - now) / 2)));
    /* Then earlier still, down to a grid of the loop clock (a power of two of ms, at most
       margin / 16 and SIMBA__RENEW_GRID_MS): owners whose renewals fall in the same step
       renew in one poll, so 10,000 owners wake the process a few times a second instead of
       hundreds, and the backend sends their renewals together. At most margin / 16 early:
       the rate of renewals grows by that fraction of the period, at most. */
    int64_t grid = 1;
    while (grid * 2 <= simba__min(margin / 16, SIMBA__RENEW_GRID_MS)) grid *= 2;
    if (grid > 1 && at > 0) at -= at % grid;
    return simba__max(at, floor);
}

/* Our grant or our new value, told to every follower of the name in other processes (the
   backend delivers it; each of them sets its view from it, no store read): a waiter or an
   observer learns each owner and value with the head, not at its next timed ask. */
static void simba__announce(simba_service *s, const simba_owner *o) {
    simba_reply rep;
    int64_t now = s->loop->now;
    /* A holder of a set is one of several: the view a waiter times its ask by is the holder
       whose permit frees first, which only a read says. */
    if (!s->be->announce || s->tp->v.permits > 1 || s->tp->v.shared) return;
    memset(&rep, 0, sizeof rep);
    rep.owner = o->id;
    rep.fence = o->fence;
    rep.ttl_left_ms = o->ttl_at - now;
    rep.transition_left_ms = o->transition_at - now;
    rep.held_ms = now - o->acquired_at;
    rep.value = o->value_len ? o->value : NULL;
    rep.value_len = o->value_len;
    rep.holders = s->rep.holders;
    s->be->announce(s->be->impl, s->mx->name, &rep);
}

static void simba__learn(simba_service *s, const simba_reply *rep_in, int64_t sent_at) {
    simba_loop *l = s->loop;
    int64_t now = l->now;
    simba_owner nv, none;
    simba_reply clamped = *rep_in;
    const simba_reply *rep = &clamped;
    int mine = s->kind == SIMBA__KIND_CONTEND && rep->owner && strcmp(rep->owner, s->id) == 0;
    simba__owner_none(&none);
    if (rep->holders > 1) s->flags |= SIMBA__F_MANY;
    /* A backend that honours the request grants no more than was asked: a longer lease (a
       clock or script fault) must not keep us owner past what every waiter expects. */
    if (mine && s->be->vt->lease != SIMBA_LEASE_SESSION) {
        clamped.ttl_left_ms = simba__min(clamped.ttl_left_ms, s->tp->v.ttl);
        clamped.transition_left_ms = simba__min(clamped.transition_left_ms, simba__add(s->tp->v.ttl, s->tp->v.transition));
    }
    simba__owner_from_reply(&nv, rep, mine ? sent_at : now, now);
    if (mine && nv.ttl_at > now && (s->flags & SIMBA__F_OWNER) && rep->fence < s->own_fence) {
        /* A store that lost its latest writes kept an older record of ours, from a tenure
           that has ended: not ours to own. The next ask is a new acquisition (new fence). */
        simba__step_down(s, &none, SIMBA_REASON_REFUSED);
        simba__set_view(s, &none);
        s->next_try = now;
        return;
    }
    if (mine && nv.ttl_at > now) {
        int gained = !(s->flags & SIMBA__F_OWNER) || s->own_fence != rep->fence;
        if ((s->flags & SIMBA__F_OWNER) && s->own_fence != rep->fence) simba__step_down(s, &nv, SIMBA_REASON_REFUSED);
        if (!gained) { s->cnt.renewals++; l->cnt.renewals++; }
        if (gained) s->flags &= ~SIMBA__F_AT_RISK; /* once per tenure */
        s->flags &= ~SIMBA__F_RENEW_FAILED;
        /* a renewal after a yield that failed: the store still has our tenure */
        if (!(s->flags & SIMBA__F_YIELD)) s->flags &= ~SIMBA__F_YIELDING;
        s->flags |= SIMBA__F_OWNER;
        s->flags &= ~SIMBA__F_IMMEDIATE;
        s->own_fence = rep->fence;
        s->lease_end = nv.ttl_at;
        if (simba__view_is(s, s->id) && s->view.fence == nv.fence) nv.acquired_at = s->view.acquired_at;
        {
            simba_owner before, after;
            simba__view_get(s, &before);
            simba__set_view(s, &nv);
            if (gained) simba__announce(s, &nv);
            if (gained && !(s->flags & SIMBA__F_TOLD)) {
                s->flags |= SIMBA__F_TOLD;
                simba__stat_acquired(s);
                simba__view_get(s, &after);
                simba__fire(s, s->tp->v.on_acquired, &before, &after);
            }
        }
        /* Renew inside the TTL, never in the past; keep a retry before the lease ends. */
        s->next_try = simba__renew_at(s, now, rep->ttl_left_ms, gained);
        return;
    }
    /* mine here: our grant arrived after the local ttl_at; otherwise someone else or nobody */
    if (s->flags & SIMBA__F_OWNER) simba__step_down(s, mine ? &none : &nv, mine ? SIMBA_REASON_LAPSED : SIMBA_REASON_REFUSED);
    if (mine) { /* our grant arrived after our own lease had lapsed locally: not owned */
        simba__set_view(s, &none);
        s->next_try = simba__add(now, s->tp->v.min_retry);
        return;
    }
    /* The store says nobody: the tenure shown has ended, its fence never comes back (a store
       read; a push of nobody may be older than what is shown). */
    if (!nv.id[0] && s->view.id[0] && !simba__view_is(s, s->id) && s->view.fence > s->ended_fence)
        s->ended_fence = s->view.fence;
    simba__set_view(s, &nv);
    if (s->kind == SIMBA__KIND_OBSERVE) {
        int64_t next = simba__add(now, s->tp->v.refresh);
        if (nv.id[0]) next = simba__min(next, simba__add(nv.transition_at, 1));
        s->next_try = simba__max(next, simba__add(now, s->tp->v.min_retry));
    } else {
        if (rep->first_in_line) s->flags |= SIMBA__F_FIRST; else s->flags &= ~SIMBA__F_FIRST;
        s->flags |= SIMBA__F_ASKED;
        s->asked_at = sent_at;
        s->next_try = simba__contender_next(s, rep->first_in_line);
    }
}

static void simba__gc_add(simba_service *s);

/* The stop is complete (its release answered, or none needed): INITIAL. */
static void simba__stop_done(simba_service *s) {
    /* The stop's own step may not have run yet (a poll's budget ended first): the user
       hears on_released before the service is back to INITIAL, once. */
    if (s->flags & SIMBA__F_TOLD) {
        simba_owner none;
        simba__owner_none(&none);
        simba__step_down(s, &none, s->why_stop ? s->why_stop : SIMBA_REASON_STOPPED);
    }
    s->status = SIMBA_INITIAL;
    simba__view_clear(s); /* a stopped service knows no owner */
    s->flags &= ~(SIMBA__F_RELEASE_SENT | SIMBA__F_WAKE);
    if (s->flags & SIMBA__F_ZOMBIE) simba__gc_add(s);
}

/* A release sent behind an acquire was answered; the stop ends with the later answer. */
static void simba__behind_done(simba_service *s, simba__behind *b) {
    simba_loop *l = s->loop;
    s->release_rc = (simba_result)b->rc;
    if (b->prev) b->prev->next = b->next; else l->behind = b->next;
    if (b->next) b->next->prev = b->prev;
    simba_free(l, b);
    s->flags &= ~SIMBA__F_BEHIND;
    if (!(s->flags & SIMBA__F_INFLIGHT)) simba__stop_done(s);
}

static void simba__svc_event(simba_service *s, simba_service_event_type type, const char *msg) {
    simba_service_event ev;
    if (!s->tp->v.on_event || (s->flags & SIMBA__F_ZOMBIE)) return;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.msg = msg;
    s->loop->in_cb++;
    s->tp->v.on_event(s, &ev, s->user);
    s->loop->in_cb--;
}

/* A SET_VALUE or YIELD was answered. They never extend the lease: only a renewal does. */
static void simba__owner_op_done(simba_service *s, const simba_req *r, const simba_reply *rep) {
    simba_loop *l = s->loop;
    int yield = r->op == SIMBA_OP_YIELD;
    simba_owner nv;
    if (rep->rc == SIMBA_EFENCE) {
        /* The store no longer holds our fence: the tenure is over, as a refused renewal says. */
        simba_log(l, SIMBA_LOG_WARN, "mutex %s: the store refused a %s: %s", s->mx->name, yield ? "yield" : "value change",
                  s->be->errmsg);
        if (s->flags & SIMBA__F_OWNER) {
            simba__owner_from_reply(&nv, rep, l->now, l->now); /* nobody: no owner fields on an error */
            simba__step_down(s, &nv, SIMBA_REASON_REFUSED);
            simba__set_view(s, &nv);
        }
        s->next_try = l->now;
        return;
    }
    if (rep->rc != SIMBA_OK) {
        /* A value change failed: nothing changed, renewals go on. A yield may have passed it
           on before its answer was lost: no belief until a renewal confirms our tenure, asked
           for now (on the error backoff, never past the lease). */
        if (yield && (s->flags & SIMBA__F_OWNER)) simba__attempt_failed(s);
        simba__svc_event(s, yield ? SIMBA_EVENT_YIELD_FAILED : SIMBA_EVENT_VALUE_FAILED, s->be->errmsg);
        return;
    }
    simba__owner_from_reply(&nv, rep, l->now, l->now);
    if (yield && rep->yielded) {
        /* Passed to the head waiter, which the store pushed; we are queued at the back and
           ask after min_retry, never at once: the head takes it first. */
        if (s->flags & SIMBA__F_OWNER) simba__step_down(s, &nv, SIMBA_REASON_YIELDED);
        simba__set_view(s, &nv);
        s->flags |= SIMBA__F_ASKED | SIMBA__F_IMMEDIATE;
        s->flags &= ~SIMBA__F_FIRST;
        s->asked_at = r->sent_at;
        s->free_retry = 0;
        s->wait_since = l->now;
        s->next_try = simba__contender_next(s, 0);
        return;
    }
    if (!(s->flags & SIMBA__F_OWNER)) return; /* stepped down meanwhile: that stands */
    if (!simba_owner_is(&nv, s->id) || rep->fence != s->own_fence) {
        simba__step_down(s, &nv, SIMBA_REASON_REFUSED);
        simba__set_view(s, &nv);
        s->next_try = l->now;
        return;
    }
    nv.acquired_at = s->view.acquired_at;
    nv.ttl_at = s->view.ttl_at;
    nv.transition_at = s->view.transition_at;
    if (!yield) simba__announce(s, &nv);
    simba__set_view(s, &nv); /* on_owner when the value changed */
    if (yield) {
        if (!(s->flags & SIMBA__F_YIELD)) s->flags &= ~SIMBA__F_YIELDING; /* the store says ours still */
        simba__svc_event(s, SIMBA_EVENT_YIELD_KEPT, "no live waiter: still the owner");
    }
}

/* Pushes and answers may travel apart (two connections): a push heard while a follower's ask
   was in flight may announce a grant made after the store answered, and the answer then shows
   nobody or an older fence. Shown, it would take back the owner the push brought (and the
   next answer would bring that owner back): the follower keeps its view and asks again. */
static int simba__overtaken(const simba_service *s, const simba_req *r, const simba_reply *rep) {
    if (!s->push_fence || r->renew || (r->op != SIMBA_OP_READ && r->op != SIMBA_OP_ACQUIRE)) return 0;
    if ((s->flags & SIMBA__F_MANY) || rep->holders > 1 || s->tp->v.permits > 1 || s->tp->v.shared) return 0;
    return !rep->owner[0] || (strcmp(rep->owner, s->id) != 0 && rep->fence < s->push_fence);
}

/* A request of s was answered. */
static void simba__complete(simba_service *s) {
    simba_loop *l = s->loop;
    simba_req *r = &s->req;
    uint64_t renewals;
    simba_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.rc = (simba_result)s->rep.rc;
    rep.owner = s->rep_owner;
    rep.ttl_left_ms = s->rep.ttl_left_ms;
    rep.transition_left_ms = s->rep.transition_left_ms;
    rep.held_ms = s->rep.held_ms;
    rep.fence = s->rep.fence;
    rep.first_in_line = s->rep.first_in_line;
    rep.value = s->vals ? s->vals->rep : NULL;
    rep.value_len = s->vals ? s->vals->rep_len : 0;
    rep.yielded = (s->flags & SIMBA__F_YIELDED) != 0;
    rep.holders = s->rep.holders;
    s->flags &= ~SIMBA__F_INFLIGHT;
    if (s->status == SIMBA_STOPPING) {
        if (r->op == SIMBA_OP_RELEASE || s->kind == SIMBA__KIND_OBSERVE) {
            if (r->op == SIMBA_OP_RELEASE) s->release_rc = rep.rc;
            simba__stop_done(s);
        } else if (s->flags & SIMBA__F_BEHIND) {
            simba__arm(s); /* the release sent behind this acquire is still unanswered */
        } else if (s->flags & SIMBA__F_RELEASE_SENT) {
            simba__stop_done(s); /* ... and was answered first (release_rc has its result) */
        } else {
            /* An acquire was in flight when stop came: it may have won. Release either way
               (a release by a non-owner is a no-op that also leaves the wait queue). */
            simba__submit(s, SIMBA_OP_RELEASE);
        }
        return;
    }
    if (s->status != SIMBA_RUNNING || r->gen_ != s->gen) return; /* an earlier run's answer */
    renewals = s->cnt.renewals;
    if (r->op == SIMBA_OP_SET_VALUE || r->op == SIMBA_OP_YIELD) {
        simba__owner_op_done(s, r, &rep);
    } else if (rep.rc != SIMBA_OK && s->rep.quarantine_ms > 0 && r->op == SIMBA_OP_ACQUIRE && s->kind == SIMBA__KIND_CONTEND) {
        simba__quarantined(s, s->rep.quarantine_ms);
    } else if (rep.rc != SIMBA_OK) {
        simba__attempt_failed(s);
    } else if (simba__overtaken(s, r, &rep)) {
        s->backoff = 0;
        s->next_try = l->now;
    } else if (r->renew && !(s->flags & SIMBA__F_OWNER) && strcmp(rep.owner, s->id) == 0) {
        /* A renewal confirmed after the local step-down: the tenure the user was told had
           ended stays ended. Ask again at once as a new acquisition, which gets a new fence. */
        s->backoff = 0;
        s->next_try = l->now;
    } else {
        s->backoff = 0;
        s->quar_until = 0;
        simba__learn(s, &rep, r->sent_at);
    }
    if (r->renew && s->cnt.renewals == renewals) {
        s->cnt.renewals_failed++;
        l->cnt.renewals_failed++;
        if (s->flags & SIMBA__F_OWNER) s->flags |= SIMBA__F_RENEW_FAILED;
    }
    if ((s->flags & SIMBA__F_WAKE) && !(s->flags & SIMBA__F_OWNER) && s->status == SIMBA_RUNNING) {
        s->next_try = l->now;
        s->flags |= SIMBA__F_WOKEN;
    }
    s->flags &= ~SIMBA__F_WAKE;
    simba__arm(s);
}

static void simba__wake(simba_service *s) {
    if (s->flags & SIMBA__F_INFLIGHT) s->flags |= SIMBA__F_WAKE;
    else {
        s->next_try = s->loop->now;
        s->flags |= SIMBA__F_WOKEN;
    }
}

static void simba__event_svc(simba_service *s, const simba__ev *ev) {
    simba_loop *l = s->loop;
    simba_owner nv, none;
    if (s->status != SIMBA_RUNNING || (s->flags & SIMBA__F_ZOMBIE)) return;
    if (!ev->all_contenders && (s->kind != SIMBA__KIND_CONTEND || strcmp(s->id, ev->contender) != 0)) return;
    simba__owner_none(&none);
    switch (ev->kind) {
    case SIMBA_EV_RELEASED:
        if (s->flags & SIMBA__F_OWNER) {
            /* Its yield (or a renewal that fails) in flight may make it a waiter: a release
               pushed meanwhile stands for then (a doorbell can ring before the yield's own
               answer is read), else the push is lost and it waits for a lease's end. */
            if (s->flags & SIMBA__F_INFLIGHT) s->flags |= SIMBA__F_WAKE;
            return;
        }
        s->flags &= ~SIMBA__F_IMMEDIATE;
        simba__wake(s);
        break;
    case SIMBA_EV_RESET:
        s->flags &= ~SIMBA__F_IMMEDIATE;
        simba__wake(s);
        break;
    case SIMBA_EV_DISCONNECTED:
        /* Without the policy the lease runs to its local deadline, as on the server. */
        if (!(s->flags & SIMBA__F_DISC_DOWN)) return;
        /* fall through */
    case SIMBA_EV_LOST:
        if (s->flags & SIMBA__F_OWNER) {
            simba__step_down(s, &none, ev->kind == SIMBA_EV_LOST ? SIMBA_REASON_SESSION : SIMBA_REASON_CONNECTION);
            simba__set_view(s, &none);
        }
        s->flags &= ~SIMBA__F_IMMEDIATE;
        simba__wake(s);
        break;
    case SIMBA_EV_OWNER:
        /* Only our own request's answer makes us owner, and an owner trusts its renewals
           over a broadcast that may be older than them. */
        if (s->flags & SIMBA__F_OWNER) return;
        if (s->kind == SIMBA__KIND_CONTEND && simba__view_is(s, s->id)) return;
        if (ev->rep.owner[0] && s->kind == SIMBA__KIND_CONTEND && strcmp(ev->rep.owner, s->id) == 0) return;
        /* A reader or a permit waiter times its ask by the holder that frees first, which its
           own asks and the release pushes tell: an announced writer's record is not that. */
        if (s->kind == SIMBA__KIND_CONTEND && (s->tp->v.permits > 1 || s->tp->v.shared) && s->be->announce) return;
        /* a push is a hint: without room for its owner's id it is dropped */
        if (ev->rep.owner[0] && strlen(ev->rep.owner) + 1 > s->other_cap && !simba__grow_other(s, strlen(ev->rep.owner) + 1)) return;
        if (ev->rep.holders > 1) s->flags |= SIMBA__F_MANY;
        if (ev->rep.owner[0] && ev->rep.fence > s->push_fence) s->push_fence = ev->rep.fence;
        simba__owner_from_reply(&nv, &ev->rep, l->now, l->now);
        simba__set_view(s, &nv);
        /* A contender that has not asked yet still asks now: the fairness queue knows only
           those who asked, so learning the owner from a push must not keep it out of line. */
        /* A push that woke it stands: the owner a release freed it for may be announced
           first (readers granted together, the permits of a semaphore). */
        if (s->kind == SIMBA__KIND_CONTEND && !(s->flags & (SIMBA__F_INFLIGHT | SIMBA__F_WOKEN)) && (s->flags & SIMBA__F_ASKED))
            s->next_try = simba__contender_next(s, (s->flags & SIMBA__F_FIRST) != 0);
        break;
    }
    simba__arm(s);
}

static void simba__event_mx(simba__mx *mx, const simba__ev *ev) {
    simba_service *s, *next;
    for (s = mx->svcs; s; s = next) {
        next = s->mx_next;
        simba__event_svc(s, ev);
    }
}

static void simba__handle_event(simba__ev *ev) {
    simba_backend *be = ev->be;
    if (!be) return;
    if (ev->all_mutexes) {
        size_t i;
        for (i = 0; i < be->mxs.nb; i++) {
            simba__hnode *n = be->mxs.b[i];
            for (; n; n = n->hnext) simba__event_mx((simba__mx *)n, ev);
        }
    } else {
        simba__mx *mx = (simba__mx *)simba__hfind(&be->mxs, ev->mutex);
        if (mx) simba__event_mx(mx, ev);
    }
}

static void simba__stop_send(simba_service *s);

/* The service's timer fired. */
static void simba__svc_step(simba_service *s) {
    simba_loop *l = s->loop;
    int64_t now = l->now;
    simba_owner none;
    simba__owner_none(&none);
    s->stepped_at = now;
    if (s->status == SIMBA_STOPPING) {
        if (s->flags & SIMBA__F_TOLD) simba__step_down(s, &none, s->why_stop ? s->why_stop : SIMBA_REASON_STOPPED); /* stop: the one on_released */
        if (s->status == SIMBA_STOPPING && s->kind == SIMBA__KIND_CONTEND) {
            simba__stop_send(s); /* now, behind what is in flight */
        } else if (s->status == SIMBA_STOPPING && !(s->flags & SIMBA__F_INFLIGHT)) {
            s->status = SIMBA_INITIAL; /* an observer with no read in flight */
            simba__view_clear(s);
            if (s->flags & SIMBA__F_ZOMBIE) simba__gc_add(s);
        }
        simba__arm(s);
        return;
    }
    if (s->status != SIMBA_RUNNING) return;
    if (simba__at_risk_at(s) <= now && now < s->lease_end) {
        s->flags |= SIMBA__F_AT_RISK;
        simba_log(l, SIMBA_LOG_WARN, "mutex %s: renewal not confirmed, %lld ms of the lease left", s->mx->name,
                  (long long)(s->lease_end - now));
        l->in_cb++;
        s->tp->v.on_at_risk(s, s->lease_end - now, s->user);
        l->in_cb--;
        if (s->status != SIMBA_RUNNING || (s->flags & SIMBA__F_ZOMBIE)) { simba__arm(s); return; } /* stopped from it */
    }
    if ((s->flags & SIMBA__F_OWNER) && now >= s->lease_end) {
        /* No confirmed renewal by our local ttl_at: step down before anyone else can win. */
        simba_log(l, SIMBA_LOG_WARN, "mutex %s: lease not renewed in time, stepping down", s->mx->name);
        simba__step_down(s, &none, SIMBA_REASON_LAPSED);
        simba__set_view(s, &none);
        s->next_try = simba__min(s->next_try, now);
    }
    /* A due renewal goes first: proclaims and yields, however many, never starve it. */
    if (s->status == SIMBA_RUNNING && !(s->flags & SIMBA__F_INFLIGHT) && now >= s->next_try) {
        simba__submit(s, s->kind == SIMBA__KIND_OBSERVE ? SIMBA_OP_READ : SIMBA_OP_ACQUIRE);
    } else if (s->status == SIMBA_RUNNING && !(s->flags & SIMBA__F_INFLIGHT) && (s->flags & SIMBA__F_OWNER) &&
               (s->flags & (SIMBA__F_SETVAL | SIMBA__F_YIELD))) {
        simba_op op = (s->flags & SIMBA__F_SETVAL) ? SIMBA_OP_SET_VALUE : SIMBA_OP_YIELD;
        s->flags &= ~(op == SIMBA_OP_SET_VALUE ? SIMBA__F_SETVAL : SIMBA__F_YIELD);
        simba__submit(s, op);
    }
    simba__arm(s);
}

/* ---- services: creation, lifecycle, queries ------------------------------------------ */

/* ttl and transition (0 and 0: the defaults), and the lease they make: within SIMBA_MAX_MS,
   and within the backend's max_lease_ms, the length of its data-loss quarantine: a longer
   lease could outlive the quarantine and be granted twice after a loss. */
static simba_result simba__timing(simba_loop *l, simba_backend *be, const char *what, int64_t *ttl, int64_t *transition) {
    simba_result rc;
    if (*ttl == 0 && *transition == 0) {
        *ttl = SIMBA__DEFAULT_TTL;
        *transition = SIMBA__DEFAULT_TRANSITION;
    }
    if ((rc = simba__ms_check(l, what, "ttl_ms", *ttl, 1)) != SIMBA_OK) return rc;
    if ((rc = simba__ms_check(l, what, "transition_ms", *transition, 0)) != SIMBA_OK) return rc;
    if ((rc = simba__ms_check(l, what, "ttl_ms + transition_ms", *ttl + *transition, 1)) != SIMBA_OK) return rc;
    if (be && be->max_lease > 0 && *ttl + *transition > be->max_lease)
        return simba__fail(l, SIMBA_EINVAL,
                           "%s: ttl_ms + transition_ms = %lld exceeds the %s backend's max_lease_ms = %lld (the longest lease it "
                           "grants, and its quarantine after a data loss; raise max_lease_ms in its desc, for every process)",
                           what, (long long)(*ttl + *transition), be->vt->name, (long long)be->max_lease);
    return SIMBA_OK;
}

static simba_result simba__svc_new(simba_loop *l, simba_backend *be, const char *what, const char *mutex, const char *id,
                                   int kind, simba_service **out) {
    simba_service *s, *o;
    simba__mx *mx;
    simba_result rc;
    if (l->closing || l->free_requested) return simba__fail(l, SIMBA_ESTATE, "%s: the loop is being freed", what);
    if (be->loop != l) return simba__fail(l, SIMBA_EINVAL, "%s: backend belongs to another loop", what);
    if (be->free_requested) return simba__fail(l, SIMBA_EINVAL, "%s: backend '%s' has been freed", what, be->vt->name);
    if (simba_name_check(mutex) != SIMBA_OK)
        return simba__fail(l, SIMBA_EINVAL, "%s: bad mutex name (1..%d of [A-Za-z0-9-_.:@+=,])", what, SIMBA_NAME_MAX);
    if (id && simba_id_check(id) != SIMBA_OK)
        return simba__fail(l, SIMBA_EINVAL, "%s: bad contender id (1..%d printable non-space ASCII)", what, SIMBA_ID_MAX);
    {
        char idbuf[SIMBA_ID_MAX + 1];
        size_t n;
        idbuf[0] = 0;
        if (kind == SIMBA__KIND_CONTEND) {
            if (id) simba__copy(idbuf, sizeof idbuf, id);
            else if ((rc = simba_contender_id_host(l, idbuf, sizeof idbuf)) != SIMBA_OK) return rc;
        }
        n = strlen(idbuf) + 1;
        s = (simba_service *)simba__zalloc(l, sizeof *s + n);
        if (!s) return simba__fail(l, SIMBA_ENOMEM, "%s: out of memory", what);
        s->id = (char *)(s + 1);
        memcpy(s->id, idbuf, n);
        s->view.id = "";
    }
    mx = simba__mx_get(be, mutex, &rc);
    if (!mx) { simba_free(l, s); return simba__fail(l, rc, "%s: cannot watch mutex %s on %s", what, mutex, be->vt->name); }
    if (kind == SIMBA__KIND_CONTEND) {
        for (o = mx->svcs; o; o = o->mx_next) {
            if (o->kind == SIMBA__KIND_CONTEND && strcmp(o->id, s->id) == 0) {
                simba_free(l, s);
                simba__mx_put(be, mx);
                return simba__fail(l, SIMBA_EEXIST, "%s: contender %s already contends for %s on this backend", what, id, mutex);
            }
        }
    }
    if (!simba__timer_init(l, &s->tm, SIMBA__T_SERVICE)) {
        simba_free(l, s);
        simba__mx_put(be, mx);
        return simba__fail(l, SIMBA_ENOMEM, "%s: out of memory", what);
    }
    s->loop = l;
    s->be = be;
    s->mx = mx;
    s->kind = kind;
    s->status = SIMBA_INITIAL;
    s->mx_next = mx->svcs;
    if (mx->svcs) mx->svcs->mx_prev = s;
    mx->svcs = s;
    mx->nsvcs++;
    s->all_next = l->services;
    if (l->services) l->services->all_prev = s;
    l->services = s;
    be->users++;
    s->next_try = SIMBA__NEVER;
    s->wait_since = SIMBA__NEVER;
    *out = s;
    return SIMBA_OK;
}

/* A value the API takes (LEADERSHIP VALUE): at most SIMBA_VALUE_MAX bytes, present if any. */
static simba_result simba__value_check(simba_loop *l, const char *fn, const char *field, const void *value, size_t len) {
    if (len > SIMBA_VALUE_MAX)
        return simba__fail(l, SIMBA_EINVAL, "%s: %s %lu is above SIMBA_VALUE_MAX (%lu bytes)", fn, field, (unsigned long)len,
                           (unsigned long)SIMBA_VALUE_MAX);
    if (len && !value) return simba__fail(l, SIMBA_EINVAL, "%s: value is NULL with %s %lu", fn, field, (unsigned long)len);
    return SIMBA_OK;
}

/* SEMAPHORES AND READ-WRITE LOCKS: a name's permits, and whether this holder shares. */
static simba_result simba__permits_check(simba_loop *l, const char *fn, int permits, int shared) {
    if (permits < 0 || permits > SIMBA_PERMITS_MAX)
        return simba__fail(l, SIMBA_EINVAL, "%s: permits %d is out of range (0 or 1 = one holder, 2..SIMBA_PERMITS_MAX = %d)", fn,
                           permits, SIMBA_PERMITS_MAX);
    if (shared != 0 && shared != 1) return simba__fail(l, SIMBA_EINVAL, "%s: shared %d must be 0 (exclusive) or 1 (a reader)", fn, shared);
    if (shared && permits > 1)
        return simba__fail(l, SIMBA_EINVAL, "%s: shared 1 with permits %d: a reader belongs to a read-write lock (permits 0 or 1)", fn,
                           permits);
    return SIMBA_OK;
}

/* How many of the loop's most recently used timing profiles a new service compares with its
   own: enough for the few descs a program uses, and a bounded cost for one that gives every
   service timing of its own (an equal profile not found is a new copy, never an error). */
#define SIMBA__TPROF_SCAN 8

/* A shared profile equal to *v (reference taken), a new one, or NULL when out of memory. */
static simba__tprof *simba__tprof_get(simba_loop *l, const simba__tvals *v) {
    simba__tprof *p = l->tprofs;
    int i;
    for (i = 0; p && i < SIMBA__TPROF_SCAN; i++, p = p->next)
        if (memcmp(&p->v, v, sizeof *v) == 0) break;
    if (p && i < SIMBA__TPROF_SCAN) {
        if (p->prev) { /* to the front: the next service of the same desc finds it first */
            p->prev->next = p->next;
            if (p->next) p->next->prev = p->prev;
            p->next = l->tprofs;
            p->prev = NULL;
            l->tprofs->prev = p;
            l->tprofs = p;
        }
    } else {
        if (!(p = (simba__tprof *)simba_alloc(l, sizeof *p))) return NULL;
        p->v = *v;
        p->refs = 0;
        p->prev = NULL;
        p->next = l->tprofs;
        if (l->tprofs) l->tprofs->prev = p;
        l->tprofs = p;
    }
    p->refs++;
    return p;
}

static void simba__tprof_put(simba_loop *l, simba__tprof *p) {
    if (!p || --p->refs > 0) return;
    if (p->prev) p->prev->next = p->next; else l->tprofs = p->next;
    if (p->next) p->next->prev = p->prev;
    simba_free(l, p);
}

static void simba__svc_finalize(simba_service *s);
/* simba_contend, and the contender of a Locker or Scheduler: what names the caller's call. */
static simba_result simba__contend_as(simba_loop *loop, simba_backend *be, const simba_contend_desc *d, simba_service **out,
                                      const char *what) {
    int64_t ttl, tr, margin, jmin, jmax, retry, bmin, bmax;
    simba__tvals tv;
    simba_service *s;
    simba_result rc;
    if (out) *out = NULL;
    if (!loop || !be || !d || !out) return simba__fail(loop, SIMBA_EINVAL, "%s: NULL argument", what);
    ttl = d->ttl_ms;
    tr = d->transition_ms;
    if ((rc = simba__timing(loop, be, what, &ttl, &tr)) != SIMBA_OK) return rc;
    margin = d->renew_margin_ms ? d->renew_margin_ms : ttl / 3;
    if (margin < 0 || margin >= ttl) return simba__fail(loop, SIMBA_EINVAL, "%s: renew_margin_ms must be in 0..ttl_ms-1", what);
    jmin = d->jitter_min_ms;
    jmax = d->jitter_max_ms;
    if (jmin == 0 && jmax == 0) {
        jmin = tr == 0 ? 0 : -200;
        jmax = 1000;
    }
    if ((rc = simba__ms_check(loop, what, "jitter_max_ms", jmax, -SIMBA_MAX_MS)) != SIMBA_OK ||
        (rc = simba__ms_check(loop, what, "jitter_min_ms", jmin, -SIMBA_MAX_MS)) != SIMBA_OK)
        return rc;
    if (jmin >= jmax) return simba__fail(loop, SIMBA_EINVAL, "%s: need jitter_min_ms < jitter_max_ms", what);
    retry = d->min_retry_ms ? d->min_retry_ms : SIMBA__DEFAULT_MIN_RETRY;
    bmin = d->backoff_min_ms ? d->backoff_min_ms : SIMBA__DEFAULT_BACKOFF_MIN;
    bmax = d->backoff_max_ms ? d->backoff_max_ms : simba__max(SIMBA__DEFAULT_BACKOFF_MAX, bmin);
    if ((rc = simba__ms_check(loop, what, "min_retry_ms", retry, 0)) != SIMBA_OK ||
        (rc = simba__ms_check(loop, what, "backoff_min_ms", bmin, 0)) != SIMBA_OK ||
        (rc = simba__ms_check(loop, what, "backoff_max_ms", bmax, 0)) != SIMBA_OK)
        return rc;
    if (bmin > bmax) return simba__fail(loop, SIMBA_EINVAL, "%s: need backoff_min_ms <= backoff_max_ms", what);
    if ((rc = simba__ms_check(loop, what, "at_risk_ms", d->at_risk_ms, 0)) != SIMBA_OK) return rc;
    if ((rc = simba__value_check(loop, what, "value_len", d->value, d->value_len)) != SIMBA_OK) return rc;
    if ((rc = simba__permits_check(loop, what, d->permits, d->shared)) != SIMBA_OK) return rc;
    if ((rc = simba__svc_new(loop, be, what, d->mutex, d->contender_id, SIMBA__KIND_CONTEND, &s)) != SIMBA_OK) return rc;
    if (d->value_len) {
        if (!simba__vals_get(s)) {
            simba__svc_finalize(s);
            return simba__fail(loop, SIMBA_ENOMEM, "%s: out of memory", what);
        }
        memcpy(s->vals->own, d->value, d->value_len);
        s->vals->own_len = d->value_len;
    }
    memset(&tv, 0, sizeof tv);
    tv.on_at_risk = d->on_at_risk;
    tv.on_acquired = d->on_acquired;
    tv.on_released = d->on_released;
    tv.on_owner = d->on_owner;
    tv.on_event = d->on_event;
    tv.at_risk = d->at_risk_ms ? d->at_risk_ms : margin / 2;
    tv.ttl = ttl;
    tv.transition = tr;
    tv.renew_margin = margin;
    tv.jmin = jmin;
    tv.jmax = jmax;
    tv.min_retry = retry;
    tv.bmin = simba__max(bmin, 1);
    tv.bmax = simba__max(bmax, 1);
    tv.permits = d->permits > 1 ? d->permits : 1;
    tv.shared = d->shared;
    if (!(s->tp = simba__tprof_get(loop, &tv))) {
        simba__svc_finalize(s);
        return simba__fail(loop, SIMBA_ENOMEM, "%s: out of memory", what);
    }
    if (tv.permits > 1 || tv.shared) s->flags |= SIMBA__F_MANY;
    s->user = d->user_data;
    if (d->step_down_on_disconnect) s->flags |= SIMBA__F_DISC_DOWN;
    *out = s;
    return SIMBA_OK;
}

SIMBA_API simba_result simba_contend(simba_loop *loop, simba_backend *be, const simba_contend_desc *d, simba_service **out) {
    return simba__contend_as(loop, be, d, out, "simba_contend");
}

SIMBA_API simba_result simba_observe(simba_loop *loop, simba_backend *be, const simba_observe_desc *d, simba_service **out) {
    simba_service *s;
    simba__tvals tv;
    simba_result rc;
    if (out) *out = NULL;
    if (!loop || !be || !d || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_observe: NULL argument");
    if ((rc = simba__ms_check(loop, "simba_observe", "refresh_ms", d->refresh_ms, 0)) != SIMBA_OK) return rc;
    if ((rc = simba__svc_new(loop, be, "simba_observe", d->mutex, NULL, SIMBA__KIND_OBSERVE, &s)) != SIMBA_OK) return rc;
    memset(&tv, 0, sizeof tv);
    tv.ttl = SIMBA__DEFAULT_TTL;
    tv.refresh = d->refresh_ms ? d->refresh_ms : SIMBA__DEFAULT_REFRESH;
    tv.min_retry = SIMBA__DEFAULT_MIN_RETRY;
    tv.bmin = SIMBA__DEFAULT_BACKOFF_MIN;
    tv.bmax = SIMBA__DEFAULT_BACKOFF_MAX;
    tv.jmin = 0;
    tv.jmax = 1;
    tv.on_owner = d->on_owner;
    tv.permits = 1;
    if (!(s->tp = simba__tprof_get(loop, &tv))) {
        simba__svc_finalize(s);
        return simba__fail(loop, SIMBA_ENOMEM, "simba_observe: out of memory");
    }
    s->user = d->user_data;
    *out = s;
    return SIMBA_OK;
}

/* A handle the user has freed (still finishing its release) is refused: EINVAL. */
static int simba__svc_ok(const simba_service *s) { return s && s->loop && !(s->flags & SIMBA__F_ZOMBIE); }

SIMBA_API simba_result simba_start(simba_service *s) {
    simba_loop *l;
    if (!simba__svc_ok(s)) return SIMBA_EINVAL;
    l = s->loop;
    if (s->status != SIMBA_INITIAL)
        return simba__fail(l, SIMBA_ESTATE, "simba_start: cannot start mutex %s from state %d, expected INITIAL", s->mx->name, (int)s->status);
    s->gen++;
    s->flags &= ~(SIMBA__F_OWNER | SIMBA__F_TOLD | SIMBA__F_WAKE | SIMBA__F_RELEASE_SENT | SIMBA__F_IMMEDIATE | SIMBA__F_ASKED);
    simba__view_clear(s);
    s->backoff = 0;
    s->release_rc = SIMBA_OK;
    s->own_fence = 0;
    s->lease_end = 0;
    s->stepped_at = INT64_MIN;
    s->quar_until = 0;
    if (!l->in_poll) l->now = simba_now(l);
    s->next_try = l->now;
    s->wait_since = s->kind == SIMBA__KIND_CONTEND ? l->now : SIMBA__NEVER;
    s->why_stop = SIMBA_REASON_NONE;
    s->status = SIMBA_RUNNING;
    simba__arm(s);
    return SIMBA_OK;
}

/* What the backend holds for company (a renewal batched with others) goes now: the
   release waits on it. */
static void simba__hurry(simba_service *s) {
    if ((s->flags & SIMBA__F_INFLIGHT) && !s->req.done_ && s->be->hurry) {
        s->loop->in_submit++;
        s->be->hurry(s->be->impl, &s->req);
        s->loop->in_submit--;
    }
}

/* A stopping contender's release goes to the backend now: on the service's request when it
   is free; else on a request of its own, sent behind the acquire or renewal in flight (the
   backend sends it after that one, which it no longer holds for company), so that a
   process that stops and then exits hands over without waiting for that answer. */
static void simba__stop_send(simba_service *s) {
    simba_loop *l = s->loop;
    simba__behind *b;
    if (s->kind != SIMBA__KIND_CONTEND || s->status != SIMBA_STOPPING || (s->flags & (SIMBA__F_RELEASE_SENT | SIMBA__F_BEHIND)))
        return;
    if (!(s->flags & SIMBA__F_INFLIGHT)) {
        simba__submit(s, SIMBA_OP_RELEASE);
        return;
    }
    b = (simba__behind *)simba_alloc(l, sizeof *b);
    if (b) { /* without memory the release follows the answer (simba__complete) */
        memset(b, 0, sizeof *b);
        b->next = l->behind;
        if (l->behind) l->behind->prev = b;
        l->behind = b;
        simba__submit_on(s, &b->req, SIMBA_OP_RELEASE);
    }
    simba__hurry(s);
}

SIMBA_API simba_result simba_stop(simba_service *s) {
    simba_loop *l;
    if (!simba__svc_ok(s)) return SIMBA_EINVAL;
    l = s->loop;
    if (s->status != SIMBA_RUNNING)
        return simba__fail(l, SIMBA_ESTATE, "simba_stop: cannot stop mutex %s from state %d, expected RUNNING", s->mx->name, (int)s->status);
    /* Local ownership ends now; the user hears on_released from the next dispatch. */
    s->status = SIMBA_STOPPING;
    s->wait_since = SIMBA__NEVER; /* a wait given up is not a wait to acquire */
    if (!s->why_stop) s->why_stop = SIMBA_REASON_STOPPED;
    s->flags &= ~(SIMBA__F_OWNER | SIMBA__F_WAKE | SIMBA__F_RELEASE_SENT);
    if (!l->in_poll) l->now = simba_now(l);
    /* The release goes from the next step, right after on_released (which the user hears
       before anyone can take the mutex through it); what the backend holds goes now. */
    simba__hurry(s);
    simba__arm(s);
    return SIMBA_OK;
}

static void simba__svc_finalize(simba_service *s) {
    simba_loop *l = s->loop;
    simba_backend *be = s->be;
    simba__mx *mx = s->mx;
    if (s->mx_prev) s->mx_prev->mx_next = s->mx_next; else mx->svcs = s->mx_next;
    if (s->mx_next) s->mx_next->mx_prev = s->mx_prev;
    mx->nsvcs--;
    simba__mx_put(be, mx);
    if (s->all_prev) s->all_prev->all_next = s->all_next; else l->services = s->all_next;
    if (s->all_next) s->all_next->all_prev = s->all_prev;
    simba__timer_fini(l, &s->tm);
    be->users--;
    s->loop = NULL;
    simba_free(l, s->cnt.last_error_msg);
    simba_free(l, s->rep_other);
    simba_free(l, s->view_other);
    simba_free(l, s->vals);
    simba__tprof_put(l, s->tp);
    simba_free(l, s);
    if (be->free_requested && be->users == 0) simba__backend_destroy(be);
}

static void simba__gc_add(simba_service *s) {
    simba_loop *l = s->loop;
    /* simba_stop_wait / simba_loop_close still reads it: it frees it when its wait ends */
    if (s->flags & (SIMBA__F_GC | SIMBA__F_WAITED)) return;
    s->flags |= SIMBA__F_GC;
    simba__timer_set(l, &s->tm, SIMBA__NEVER);
    s->gc_next = l->gc;
    l->gc = s;
}

static void simba__gc_run(simba_loop *l) {
    while (l->gc) {
        simba_service *s = l->gc;
        l->gc = s->gc_next;
        simba__svc_finalize(s);
    }
}

SIMBA_API simba_result simba_service_free(simba_service *s) {
    simba_loop *l;
    if (!simba__svc_ok(s)) return SIMBA_EINVAL;
    l = s->loop;
    if (s->status == SIMBA_RUNNING) simba_stop(s);
    /* No callback reaches a freed handle; the release still goes out. */
    s->flags |= SIMBA__F_ZOMBIE;
    if (s->status == SIMBA_INITIAL && !(s->flags & SIMBA__F_INFLIGHT)) {
        if (l->in_poll) simba__gc_add(s); else simba__svc_finalize(s);
    }
    return SIMBA_OK;
}

/* Drives the loop until s is INITIAL or deadline (SIMBA__NEVER: none). s carries
   SIMBA__F_WAITED meanwhile, so that a free from a callback leaves it to us. */
static simba_result simba__wait_stopped(simba_service *s, int64_t deadline) {
    simba_loop *l = s->loop;
    simba_result rc = SIMBA_OK;
    while (s->status != SIMBA_INITIAL) {
        int64_t now = simba_now(l);
        if (deadline != SIMBA__NEVER && now >= deadline) return SIMBA_ETIMEDOUT;
        rc = simba_wait(l, deadline == SIMBA__NEVER ? -1 : deadline - now);
        if (rc != SIMBA_OK) return rc;
    }
    return rc;
}

SIMBA_API simba_result simba_stop_wait(simba_service *s, int64_t timeout_ms) {
    simba_loop *l;
    simba_result rc;
    int64_t deadline;
    if (!simba__svc_ok(s)) return SIMBA_EINVAL;
    l = s->loop;
    if (l->in_cb || l->in_poll) return simba__fail(l, SIMBA_ECALLBACK, "simba_stop_wait: blocking call from a callback");
    if ((rc = simba__timeout_check(l, "simba_stop_wait", timeout_ms)) != SIMBA_OK) return rc;
    if (s->status == SIMBA_RUNNING && (rc = simba_stop(s)) != SIMBA_OK) return rc;
    deadline = timeout_ms < 0 ? SIMBA__NEVER : simba__add(simba_now(l), timeout_ms);
    s->flags |= SIMBA__F_WAITED;
    rc = simba__wait_stopped(s, deadline);
    /* SIMBA_ECLOSED: a callback freed the loop, and with it this service: touch nothing. */
    if (rc == SIMBA_ECLOSED) return rc;
    s->flags &= ~SIMBA__F_WAITED;
    if (s->flags & SIMBA__F_ZOMBIE) { /* freed by a callback meanwhile: ours to finish */
        if (s->status == SIMBA_INITIAL && !(s->flags & SIMBA__F_INFLIGHT)) simba__svc_finalize(s);
        return SIMBA_ECLOSED;
    }
    if (rc == SIMBA_ETIMEDOUT)
        return simba__fail(l, rc, "simba_stop_wait: release of %s not answered within %lld ms", s->mx->name, (long long)timeout_ms);
    if (rc != SIMBA_OK) return rc;
    if (s->release_rc != SIMBA_OK)
        return simba__fail(l, s->release_rc, "simba_stop_wait: release of %s failed: %s", s->mx->name, simba_strerror(s->release_rc));
    return SIMBA_OK;
}

SIMBA_API simba_status simba_service_status(const simba_service *s) { return simba__svc_ok(s) ? s->status : SIMBA_INITIAL; }

SIMBA_API int simba_is_owner(const simba_service *s) {
    /* Time is checked too: if the caller's tick stalled past the lease, we do not own it
       any more even though the step-down has not been dispatched yet. A yield may have
       passed it on in the store before its answer comes: no belief meanwhile. */
    return simba__svc_ok(s) && s->status == SIMBA_RUNNING && (s->flags & (SIMBA__F_OWNER | SIMBA__F_YIELDING)) == SIMBA__F_OWNER &&
           simba_now(s->loop) < s->lease_end;
}
SIMBA_API uint64_t simba_fence(const simba_service *s) { return simba_is_owner(s) ? s->own_fence : 0; }
SIMBA_API simba_result simba_owner_get(const simba_service *s, simba_owner *out) {
    if (!simba__svc_ok(s) || !out) return SIMBA_EINVAL;
    simba__view_get(s, out);
    return SIMBA_OK;
}
SIMBA_API const char *simba_service_contender_id(const simba_service *s) { return simba__svc_ok(s) ? s->id : NULL; }
SIMBA_API const char *simba_service_mutex(const simba_service *s) { return simba__svc_ok(s) ? s->mx->name : NULL; }
SIMBA_API void *simba_service_user_data(const simba_service *s) { return simba__svc_ok(s) ? s->user : NULL; }
/* Both owner operations go out from the service's timer step (at once, or when the request
   in flight is answered), so that one request per service is ever in flight. */
static simba_result simba__owner_op(simba_service *s, const char *fn) {
    simba_loop *l = s->loop;
    if (s->kind != SIMBA__KIND_CONTEND)
        return simba__fail(l, SIMBA_ESTATE, "%s: an observer of mutex %s owns nothing", fn, s->mx->name);
    if (!simba_is_owner(s)) /* no fence of ours holds a live lease */
        return simba__fail(l, SIMBA_EFENCE, "%s: contender %s does not own mutex %s", fn, s->id, s->mx->name);
    if (!l->in_poll) l->now = simba_now(l);
    return SIMBA_OK;
}
SIMBA_API simba_result simba_set_value(simba_service *s, const void *value, size_t len) {
    simba_result rc;
    if (!simba__svc_ok(s)) return SIMBA_EINVAL;
    if ((rc = simba__value_check(s->loop, "simba_set_value", "len", value, len)) != SIMBA_OK) return rc;
    if ((rc = simba__owner_op(s, "simba_set_value")) != SIMBA_OK) return rc;
    if (!simba__vals_get(s)) return simba__fail(s->loop, SIMBA_ENOMEM, "simba_set_value: out of memory");
    if (s->flags & SIMBA__F_INFLIGHT) { /* the request in flight may read own: keep it */
        if (len) memcpy(s->vals->pend, value, len);
        s->vals->pend_len = len;
        s->flags |= SIMBA__F_PEND;
    } else {
        if (len) memcpy(s->vals->own, value, len);
        s->vals->own_len = len;
        s->flags &= ~SIMBA__F_PEND;
    }
    s->flags |= SIMBA__F_SETVAL;
    simba__arm(s);
    return SIMBA_OK;
}
SIMBA_API simba_result simba_yield(simba_service *s) {
    simba_result rc;
    if (!simba__svc_ok(s)) return SIMBA_EINVAL;
    if ((s->flags & (SIMBA__F_OWNER | SIMBA__F_YIELDING)) == (SIMBA__F_OWNER | SIMBA__F_YIELDING))
        return simba__fail(s->loop, SIMBA_ESTATE, "simba_yield: a yield of mutex %s is already under way", s->mx->name);
    if ((rc = simba__owner_op(s, "simba_yield")) != SIMBA_OK) return rc;
    /* From here the store may pass it on at any moment: no belief until it says kept. */
    s->flags |= SIMBA__F_YIELD | SIMBA__F_YIELDING;
    simba__arm(s);
    return SIMBA_OK;
}

/* ---- the poll ----------------------------------------------------------------------- */

static void simba__sched_step(simba_scheduler *sc);
static void simba__lk_step(simba_locker *lk);

/* Collect every backend's descriptors into loop->pfd; returns the count or -1. */
static int simba__gather(simba_loop *l) {
    simba_backend *be;
    int n = 0;
    for (be = l->backends; be; be = be->next) {
        int want;
        be->pfd_off = n;
        be->pfd_n = 0;
        if (!be->vt->fds) continue;
        for (;;) {
            want = be->vt->fds(be->impl, l->pfd ? l->pfd + n : NULL, l->pfd_cap - n);
            if (want < 0) want = 0;
            if (n + want <= l->pfd_cap) break;
            {
                int cap = l->pfd_cap ? l->pfd_cap * 2 : 16;
                struct pollfd *p;
                while (cap < n + want) cap *= 2;
                p = (struct pollfd *)simba_alloc(l, (size_t)cap * sizeof *p);
                if (!p) return -1;
                if (n) memcpy(p, l->pfd, (size_t)n * sizeof *p);
                simba_free(l, l->pfd);
                l->pfd = p;
                l->pfd_cap = cap;
            }
        }
        be->pfd_n = want;
        n += want;
    }
    return n;
}

/* Real time in µs, for the poll's own time budget (independent of an injected clock). */
static int64_t simba__real_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The poll's budget: 1 (and work left for the next poll, asked for at once) when spent.
   The first step of a poll always runs, so that every poll makes progress. */
static int simba__spent(simba_loop *l) {
    if (l->steps > 0 && ((l->max_steps > 0 && l->steps >= l->max_steps) || simba__real_us() - l->poll_start_us >= l->budget_us)) {
        l->more = 1;
        return 1;
    }
    l->steps++;
    return 0;
}

SIMBA_API int simba_poll_budget_spent(simba_loop *loop) {
    if (!loop || !loop->in_poll || loop->in_cb) return 0;
    return simba__spent(loop);
}

SIMBA_API int64_t simba_poll_budget_left_us(simba_loop *loop) {
    int64_t left;
    if (!loop || !loop->in_poll || loop->in_cb || loop->steps == 0) return INT64_MAX;
    left = loop->budget_us - (simba__real_us() - loop->poll_start_us);
    return left > 0 ? left : 0;
}

/* Thousands of timers can fall due together (services started together renew together):
   past the budget the rest waits for the next poll, so that one poll never stalls the
   caller's tick. */
static int simba__run_due(simba_loop *l) {
    int steps = 0;
    while (l->heap_n > 0 && l->heap[0].at <= l->now) {
        simba__timer *t = l->heap[0].t;
        if (simba__spent(l)) break;
        simba__heap_remove(l, t);
        if (t->kind == SIMBA__T_SERVICE) simba__svc_step((simba_service *)(void *)t);
        else if (t->kind == SIMBA__T_SCHED) simba__sched_step((simba_scheduler *)(void *)t);
        else simba__lk_step((simba_locker *)(void *)t);
        steps++;
    }
    return steps;
}

static void simba__ask_complete(struct simba__ask *a);
static int simba__drain(simba_loop *l) {
    int n = 0;
    l->now = simba_now(l);
    while (l->done_head && !simba__spent(l)) {
        simba_req *r = l->done_head;
        l->done_head = r->done_next_;
        if (!l->done_head) l->done_tail = NULL;
        if (r->ask_) simba__ask_complete((struct simba__ask *)r->ask_);
        else if (r == &r->svc_->req) simba__complete(r->svc_);
        else simba__behind_done(r->svc_, (simba__behind *)(void *)r);
        n++;
    }
    while (l->ev_head && !simba__spent(l)) {
        simba__ev *ev = l->ev_head;
        l->ev_head = ev->next;
        if (!l->ev_head) l->ev_tail = NULL;
        simba__handle_event(ev);
        if (l->ev_nfree < SIMBA__EV_FREE_MAX) { /* a burst of pushes leaves no lasting memory */
            ev->next = l->ev_free;
            l->ev_free = ev;
            l->ev_nfree++;
        } else {
            simba_free(l, ev);
        }
        n++;
    }
    return n + simba__run_due(l);
}

static void simba__loop_destroy(simba_loop *l);

/* A timer of the loop is due: this poll runs it after the backends' first process call.
   A backend holding requests for company waits for the flush that follows, so that a late
   poll does not send what is held before the due timers have added to it. */
static inline int simba__timer_due(simba_loop *l, int64_t now) {
    return l->heap_n > 0 && l->heap[0].at <= now;
}

/* Inside simba_poll (callbacks included) a backend may leave what it submits queued or
   buffered: the poll calls process(SIMBA_PROCESS_FLUSH) after every round of its work, so
   requests made in one round (renewals due together) go out together. Outside it (an
   application's call) nothing would come to run or send them: do it at once. */
static inline int simba__in_poll(const simba_loop *l) { return l->in_poll; }

static int64_t simba__next_wait(simba_loop *l) {
    int64_t at = SIMBA__NEVER, now = simba_now(l);
    simba_backend *be;
    if (l->done_head || l->ev_head || l->more) return 0;
    if (l->heap_n) at = l->heap[0].at;
    for (be = l->backends; be; be = be->next)
        if (be->vt->deadline) at = simba__min(at, be->vt->deadline(be->impl));
    if (at == SIMBA__NEVER) return SIMBA_MAX_WAIT_MS;
    return simba__max(0, simba__min(at - now, SIMBA_MAX_WAIT_MS));
}

enum { SIMBA__IO_OWN, SIMBA__IO_GIVEN, SIMBA__IO_POLLED };

/* ---- loop hooks: what the caller's event loop watches --------------------------------- */

static void simba__fd_unwatch(simba_loop *l, int i) {
    int fd = l->wfd[i].fd;
    l->wfd[i] = l->wfd[--l->wfd_n];
    l->fd_hook(l->fd_user, fd, 0);
}

/* Index of fd in the watched set, appended (events 0) when absent; -1 on no memory. */
static int simba__fd_slot(simba_loop *l, simba_backend *be, int fd) {
    int i;
    for (i = 0; i < l->wfd_n; i++)
        if (l->wfd[i].fd == fd) return i;
    if (l->wfd_n == l->wfd_cap) {
        int cap = l->wfd_cap ? l->wfd_cap * 2 : 8;
        simba__watched *w = (simba__watched *)simba_alloc(l, (size_t)cap * sizeof *w);
        if (!w) {
            simba_log(l, SIMBA_LOG_ERROR, "out of memory: fd %d not handed to fd_hook", fd);
            return -1;
        }
        if (l->wfd_n) memcpy(w, l->wfd, (size_t)l->wfd_n * sizeof *w);
        simba_free(l, l->wfd);
        l->wfd = w;
        l->wfd_cap = cap;
    }
    l->wfd[l->wfd_n].be = be;
    l->wfd[l->wfd_n].fd = fd;
    l->wfd[l->wfd_n].events = 0;
    l->wfd[l->wfd_n].seen = 0;
    return l->wfd_n++;
}

static void simba__fd_set(simba_loop *l, simba_backend *be, int fd, short events) {
    int i = simba__fd_slot(l, be, fd);
    if (i < 0) return;
    l->wfd[i].be = be;
    l->wfd[i].seen = 1;
    if (l->wfd[i].events != events) {
        l->wfd[i].events = events;
        l->fd_hook(l->fd_user, fd, events);
    }
}

SIMBA_API void simba_backend_fd(simba_backend *be, int fd, short events) {
    simba_loop *l;
    int i;
    if (!be || !be->loop) return;
    l = be->loop;
    if (!l->fd_hook) return;
    events = (short)(events & (POLLIN | POLLOUT));
    if (events) {
        if (fd >= 0) simba__fd_set(l, be, fd, events);
        return;
    }
    for (i = 0; i < l->wfd_n;) {
        if (l->wfd[i].be == be && (fd < 0 || l->wfd[i].fd == fd)) simba__fd_unwatch(l, i);
        else i++;
    }
}

/* Bring the fd hook's view in line with what the backends list now. */
static int simba__gather(simba_loop *l);
static void simba__fds_sync(simba_loop *l) {
    simba_backend *be;
    int i, j, n;
    if (!l->fd_hook) return;
    n = simba__gather(l);
    if (n < 0) return;
    for (i = 0; i < l->wfd_n; i++) l->wfd[i].seen = 0;
    for (be = l->backends; be; be = be->next)
        for (j = be->pfd_off; j < be->pfd_off + be->pfd_n; j++) {
            short ev = (short)(l->pfd[j].events & (POLLIN | POLLOUT));
            if (l->pfd[j].fd >= 0 && ev) simba__fd_set(l, be, l->pfd[j].fd, ev);
        }
    for (i = 0; i < l->wfd_n;) {
        if (!l->wfd[i].seen) simba__fd_unwatch(l, i);
        else i++;
    }
}

static int64_t simba__next_wait(simba_loop *l);

/* After a call outside the poll changed something: tell the caller's loop at once. */
static void simba__kick(simba_loop *l) {
    int64_t w, at;
    if (l->closing || l->in_poll || l->in_submit || (!l->fd_hook && !l->timer_hook)) return;
    simba__fds_sync(l);
    if (!l->timer_hook) return;
    w = simba__next_wait(l);
    at = simba__add(simba_now(l), w);
    if (at < l->armed_at) {
        l->armed_at = at;
        l->timer_hook(l->timer_user, w);
    }
}

static int64_t simba__poll(simba_loop *l, int io, const struct pollfd *ready, int nready) {
    simba_backend *be;
    int n, i, j, round;
    if (l->in_cb || l->in_poll) return SIMBA_ECALLBACK;
    l->in_poll = 1;
    l->more = 0;
    l->steps = 0;
    l->poll_start_us = simba__real_us();
    l->now = simba_now(l);
    if (io != SIMBA__IO_POLLED) {
        n = simba__gather(l);
        if (n < 0) n = 0;
        if (io == SIMBA__IO_OWN && n > 0) {
            if (poll(l->pfd, (nfds_t)n, 0) < 0)
                for (i = 0; i < n; i++) l->pfd[i].revents = 0;
        } else {
            for (i = 0; i < n; i++) {
                l->pfd[i].revents = 0;
                for (j = 0; j < nready; j++)
                    if (ready[j].fd == l->pfd[i].fd) l->pfd[i].revents |= (short)(ready[j].revents & (l->pfd[i].events | POLLERR | POLLHUP | POLLNVAL));
            }
        }
    }
    for (be = l->backends; be; be = be->next)
        if (be->vt->process)
            be->vt->process(be->impl, be->pfd_n ? l->pfd + be->pfd_off : NULL, be->pfd_n, l->now,
                            be->pfd_n ? SIMBA_PROCESS_IO : SIMBA_PROCESS_TICK);
    /* Answers can arrive synchronously (SQLite, memory): handle them in the same poll so
       that a step does not wait one tick per round trip; bounded so a poll always ends. */
    for (round = 0; round < SIMBA__MAX_ROUNDS; round++) {
        if (!simba__drain(l)) break;
        /* what was just handled may have submitted requests: let backends send them now */
        for (be = l->backends; be; be = be->next)
            if (be->vt->process) be->vt->process(be->impl, NULL, 0, l->now, SIMBA_PROCESS_FLUSH);
        if (l->more) break;
    }
    simba__gc_run(l);
    if (!l->free_requested) simba__fds_sync(l);
    l->in_poll = 0;
    if (l->free_requested) {
        /* The caller driving the loop must learn that its handle is gone. */
        simba__loop_destroy(l);
        return SIMBA_ECLOSED;
    }
    {
        int64_t w = simba__next_wait(l);
        l->armed_at = simba__add(simba_now(l), w); /* the caller sleeps until then */
        return w;
    }
}

/* >>process */
SIMBA_API int64_t simba_poll(simba_loop *loop) {
    if (!loop) return SIMBA_EINVAL;
    return simba__poll(loop, SIMBA__IO_OWN, NULL, 0);
}
SIMBA_API int64_t simba_poll_ready(simba_loop *loop, const struct pollfd *ready, int n) {
    if (!loop || n < 0 || (n > 0 && !ready)) return SIMBA_EINVAL;
    return simba__poll(loop, SIMBA__IO_GIVEN, ready, n);
}
SIMBA_API int simba_fds(simba_loop *loop, struct pollfd *out, int cap) {
    simba_backend *be;
    int n = 0;
    if (!loop || cap < 0 || (cap > 0 && !out)) return SIMBA_EINVAL;
    for (be = loop->backends; be; be = be->next) {
        int room = cap > n ? cap - n : 0, want;
        if (!be->vt->fds) continue;
        want = be->vt->fds(be->impl, room ? out + n : NULL, room);
        if (want > 0) n += want;
    }
    return n;
}
SIMBA_API simba_result simba_loop_set_hooks(simba_loop *l, void (*fd_hook)(void *, int, short), void *fd_user,
                                            void (*timer_hook)(void *, int64_t), void *timer_user) {
    if (!l) return SIMBA_EINVAL;
    if (l->in_cb || l->in_poll) return simba__fail(l, SIMBA_ECALLBACK, "simba_loop_set_hooks: not from a callback");
    while (l->wfd_n > 0) simba__fd_unwatch(l, l->wfd_n - 1);
    l->fd_hook = fd_hook;
    l->fd_user = fd_user;
    l->timer_hook = timer_hook;
    l->timer_user = timer_user;
    l->armed_at = SIMBA__NEVER; /* the new hook has learnt nothing yet */
    simba__kick(l);
    return SIMBA_OK;
}
SIMBA_API simba_result simba_wait(simba_loop *l, int64_t max_ms) {
    int64_t wait, r;
    int n;
    if (!l) return SIMBA_EINVAL;
    if (l->in_cb || l->in_poll) return SIMBA_ECALLBACK;
    if (simba__timeout_check(l, "simba_wait", max_ms) != SIMBA_OK) return SIMBA_EINVAL;
    wait = simba__next_wait(l);
    if (max_ms >= 0) wait = simba__min(wait, max_ms);
    n = simba__gather(l);
    if (n < 0) return SIMBA_ENOMEM;
    if (n > 0) {
        int i, ready = poll(l->pfd, (nfds_t)n, l->sleep_fn ? 0 : (int)wait);
        if (ready < 0)
            for (i = 0; i < n; i++) l->pfd[i].revents = 0;
        if (ready <= 0 && l->sleep_fn && wait > 0) l->sleep_fn(l->sleep_user, wait);
    } else if (l->sleep_fn) {
        if (wait > 0) l->sleep_fn(l->sleep_user, wait);
    } else if (wait > 0) {
        struct timespec ts;
        ts.tv_sec = (time_t)(wait / 1000);
        ts.tv_nsec = (long)(wait % 1000) * 1000000L;
        nanosleep(&ts, NULL);
    }
    r = simba__poll(l, SIMBA__IO_POLLED, NULL, 0);
    if (r < 0) return (simba_result)r;
    /* Its caller (often a blocking lock) does not see the wait: the timer hook hears it. */
    l->armed_at = SIMBA__NEVER;
    simba__kick(l);
    return SIMBA_OK;
}

/* ---- the loop ------------------------------------------------------------------------- */

SIMBA_API simba_result simba_loop_new(const simba_loop_desc *d, simba_loop **out) {
    simba_loop *l;
    simba_loop_desc zero;
    void *(*af)(void *, size_t);
    void (*ff)(void *, void *);
    if (!out) return SIMBA_EINVAL;
    *out = NULL;
    if (!d) { memset(&zero, 0, sizeof zero); d = &zero; }
    if (!d->alloc != !d->free) return SIMBA_EINVAL; /* both or neither */
    if (d->poll_budget_us < 0 || d->poll_max_steps < 0) return SIMBA_EINVAL;
    af = d->alloc ? d->alloc : simba__default_alloc;
    ff = d->free ? d->free : simba__default_free;
    l = (simba_loop *)af(d->alloc_user, sizeof *l);
    if (!l) return SIMBA_ENOMEM;
    memset(l, 0, sizeof *l);
    l->alloc_fn = af;
    l->free_fn = ff;
    l->alloc_user = d->alloc_user;
    l->now_fn = d->now_ms ? d->now_ms : simba__sys_now;
    l->clock_user = d->clock_user;
    l->sleep_fn = d->sleep;
    l->sleep_user = d->sleep_user;
    l->rand_fn = d->random;
    l->rand_user = d->random_user;
    l->log_fn = d->log;
    l->log_user = d->log_user;
    l->log_level = d->log_level;
    l->fd_hook = d->fd_hook;
    l->fd_user = d->fd_user;
    l->timer_hook = d->timer_hook;
    l->timer_user = d->timer_user;
    l->armed_at = SIMBA__NEVER;
    l->cnt.last_error_msg = l->last_error_buf;
    l->budget_us = d->poll_budget_us > 0 ? d->poll_budget_us : SIMBA__POLL_BUDGET_US;
    l->max_steps = d->poll_max_steps > 0 ? d->poll_max_steps : 0;
    {
        /* Seed: wall time, pid and this loop's address, so two loops never share a stream. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        l->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)l;
        l->rng = l->rng * 6364136223846793005ull + 1442695040888963407ull;
        if (!l->rng) l->rng = 0x9e3779b97f4a7c15ull;
    }
    /* The address keeps two live loops apart even when an injected random source repeats. */
    l->id_counter = (simba__rand(l) ^ (uint32_t)((uintptr_t)l >> 4)) & 0x7fffffffu;
    l->now = simba_now(l);
    *out = l;
    return SIMBA_OK;
}

static void simba__locker_release_all(simba_loop *l);
static void simba__sched_release_all(simba_loop *l);

static void simba__ask_free(struct simba__ask *a);
static void simba__loop_destroy(simba_loop *l) {
    simba_service *s, *sn;
    simba__ev *ev, *en;
    l->now = simba_now(l);
    /* Best effort: owners and waiters send their release now, behind whatever they have in
       flight; the backends get one chance to put it on the wire before they close. Nothing
       waits for the answer. */
    for (s = l->services; s; s = s->all_next) {
        if (s->kind == SIMBA__KIND_CONTEND && s->status != SIMBA_INITIAL) {
            if (s->status == SIMBA_RUNNING) s->flags &= ~(SIMBA__F_OWNER | SIMBA__F_WAKE);
            s->status = SIMBA_STOPPING;
            simba__stop_send(s);
        }
    }
    {
        simba_backend *be;
        for (be = l->backends; be; be = be->next)
            if (be->vt->process) be->vt->process(be->impl, NULL, 0, l->now, SIMBA_PROCESS_FLUSH);
    }
    l->closing = 1;
    while (l->backends) {
        simba_backend *be = l->backends;
        if (be->vt->destroy) be->vt->destroy(be->impl);
        simba_backend_fd(be, -1, 0); /* whatever the backend left watched */
        be->vt = NULL;
        l->backends = be->next;
        {
            size_t i;
            for (i = 0; i < be->mxs.nb; i++) {
                simba__hnode *n = be->mxs.b[i], *nn;
                for (; n; n = nn) { nn = n->hnext; simba_free(l, n); }
            }
        }
        simba_free(l, be->mxs.b);
        simba_free(l, be);
    }
    simba__locker_release_all(l);
    simba__sched_release_all(l);
    while (l->behind) { /* their backends are gone: nothing refers to them */
        simba__behind *b = l->behind;
        l->behind = b->next;
        simba_free(l, b);
    }
    while (l->asks) simba__ask_free(l->asks);
    for (s = l->services; s; s = sn) { sn = s->all_next; s->loop = NULL; simba_free(l, s->cnt.last_error_msg); simba_free(l, s->rep_other); simba_free(l, s->view_other); simba_free(l, s->vals); simba_free(l, s); }
    while (l->tprofs) { /* the services above held them */
        simba__tprof *p = l->tprofs;
        l->tprofs = p->next;
        simba_free(l, p);
    }
    for (ev = l->ev_head; ev; ev = en) { en = ev->next; simba_free(l, ev); }
    for (ev = l->ev_free; ev; ev = en) { en = ev->next; simba_free(l, ev); }
    simba_free(l, l->heap);
    simba_free(l, l->pfd);
    simba_free(l, l->wfd);
    simba_free(l, l->view_holders);
    l->free_fn(l->alloc_user, l);
}

/* >>close */
SIMBA_API simba_result simba_loop_free(simba_loop *l) {
    if (!l) return SIMBA_EINVAL;
    if (l->in_poll || l->in_cb) { l->free_requested = 1; return SIMBA_OK; }
    simba__loop_destroy(l);
    return SIMBA_OK;
}

/* ---- contender ids ---------------------------------------------------------------------- */

static void simba__find_host(simba_loop *l) {
    struct ifaddrs *ifs = NULL, *i;
    char buf[64];
    l->host_done = 1;
    simba__copy(l->host, sizeof l->host, "localhost");
    if (getifaddrs(&ifs) == 0) {
        int found = 0;
        for (i = ifs; i; i = i->ifa_next) {
            const struct sockaddr_in *sin;
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & 0x1 /* IFF_UP */)) continue;
            sin = (const struct sockaddr_in *)(const void *)i->ifa_addr;
            if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127) continue;
            /* the last eligible address wins */
            if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) { simba__copy(l->host, sizeof l->host, buf); found = 1; }
        }
        freeifaddrs(ifs);
        if (found) return;
    }
    if (gethostname(buf, sizeof buf) == 0) {
        buf[sizeof buf - 1] = 0;
        if (simba_id_check(buf) == SIMBA_OK) simba__copy(l->host, sizeof l->host, buf);
    }
}

SIMBA_API simba_result simba_contender_id_host(simba_loop *l, char *buf, size_t cap) {
    char tmp[SIMBA_ID_MAX + 64];
    int n;
    if (!l || !buf || !cap) return SIMBA_EINVAL;
    if (!l->host_done) simba__find_host(l);
    n = snprintf(tmp, sizeof tmp, "%llu:%ld@%s", (unsigned long long)l->id_counter, (long)getpid(), l->host);
    if (n < 0 || (size_t)n >= cap || n > SIMBA_ID_MAX) return simba__fail(l, SIMBA_EINVAL, "simba_contender_id_host: buffer too small");
    l->id_counter++;
    memcpy(buf, tmp, (size_t)n + 1);
    return SIMBA_OK;
}

SIMBA_API simba_result simba_contender_id_random(simba_loop *l, char *buf, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    int i;
    if (!l || !buf || cap < 33) return SIMBA_EINVAL;
    for (i = 0; i < 32; i += 8) {
        uint32_t r = simba__rand(l);
        int k;
        for (k = 0; k < 8; k++) buf[i + k] = hex[(r >> (4 * k)) & 15];
    }
    buf[32] = 0;
    return SIMBA_OK;
}

/* ---- locker --------------------------------------------------------------------------- */

enum { SIMBA__LK_IDLE, SIMBA__LK_PENDING, SIMBA__LK_HELD, SIMBA__LK_LOST };

struct simba_locker {
    simba__timer tm; /* first: the heap hands back this pointer; due while owe_lost */
    simba_loop *loop;
    simba_service *svc;
    simba_locker *next, *prev;
    int state;
    int in_lock;    /* simba_locker_lock() is blocking on it */
    int free_after; /* freed from a callback during that lock: the lock frees it on return */
    int seen_owner; /* this run of the contender has learned who owns the mutex */
    int owe_lost;   /* an unlock found the lease lapsed: on_lost fires from the next poll */
    void (*on_lost)(simba_locker *, void *);
    void (*on_locked)(simba_locker *, void *);
    void (*on_at_risk)(simba_locker *, int64_t, void *);
    void (*on_event)(simba_locker *, const simba_service_event *, void *);
    void *user;
};

/* A handle freed from a callback stays allocated until its blocking lock returns: refused. */
static int simba__lk_ok(const simba_locker *lk) { return lk && lk->loop && !lk->free_after; }

static void simba__lk_owner(simba_service *svc, const simba_state *st, void *u) {
    (void)svc;
    if (st->after->id[0]) ((simba_locker *)u)->seen_owner = 1;
}

static void simba__lk_acquired(simba_service *svc, const simba_state *st, void *u) {
    simba_locker *lk = (simba_locker *)u;
    (void)svc;
    (void)st;
    if (lk->state != SIMBA__LK_PENDING) return;
    lk->state = SIMBA__LK_HELD;
    /* a blocking lock learns it from its return; a try's caller from this (on_locked may
       free lk: nothing touches it after) */
    if (!lk->in_lock && lk->on_locked) lk->on_locked(lk, lk->user);
}

/* The locker's timer: the on_lost that an unlock owes (called from the poll, as every
   callback is). lk may be freed by it: nothing touches it after. */
static void simba__lk_step(simba_locker *lk) {
    simba_loop *l = lk->loop;
    if (!lk->owe_lost) return;
    lk->owe_lost = 0;
    if (!lk->on_lost) return;
    l->in_cb++;
    lk->on_lost(lk, lk->user);
    l->in_cb--;
}
static void simba__lk_at_risk(simba_service *svc, int64_t left_ms, void *u) {
    simba_locker *lk = (simba_locker *)u;
    (void)svc;
    if (lk->state == SIMBA__LK_HELD && lk->on_at_risk) lk->on_at_risk(lk, left_ms, lk->user);
}

static void simba__lk_event(simba_service *svc, const simba_service_event *ev, void *u) {
    simba_locker *lk = (simba_locker *)u;
    (void)svc;
    if (lk->on_event) lk->on_event(lk, ev, lk->user);
}

static void simba__lk_released(simba_service *svc, const simba_state *st, void *u) {
    simba_locker *lk = (simba_locker *)u;
    if (lk->state != SIMBA__LK_HELD) return;
    /* Passed on by a yield: the contender is in line again, as a pending try is. */
    if (st->reason == SIMBA_REASON_YIELDED) { lk->state = SIMBA__LK_PENDING; return; }
    /* The holder's critical section is no longer protected: stop contending (a lock is not
       re-taken behind the holder's back) and say so. */
    lk->state = SIMBA__LK_LOST;
    simba_stop(svc);
    if (lk->on_lost) lk->on_lost(lk, lk->user);
}

/* Lockers and schedulers are built on a contender of their own: their descs name every
   lease setting as simba_contend_desc does, so one copy serves both. */
#define SIMBA__LEASE_FROM(cd, d)                                                              \
    do {                                                                                      \
        memset(&(cd), 0, sizeof(cd));                                                         \
        (cd).mutex = (d)->mutex;                                                              \
        (cd).contender_id = (d)->contender_id;                                                \
        (cd).ttl_ms = (d)->ttl_ms;                                                            \
        (cd).transition_ms = (d)->transition_ms;                                              \
        (cd).renew_margin_ms = (d)->renew_margin_ms;                                          \
        (cd).jitter_min_ms = (d)->jitter_min_ms;                                              \
        (cd).jitter_max_ms = (d)->jitter_max_ms;                                              \
        (cd).min_retry_ms = (d)->min_retry_ms;                                                \
        (cd).backoff_min_ms = (d)->backoff_min_ms;                                            \
        (cd).backoff_max_ms = (d)->backoff_max_ms;                                            \
        (cd).step_down_on_disconnect = (d)->step_down_on_disconnect;                          \
        (cd).value = (d)->value;                                                              \
        (cd).value_len = (d)->value_len;                                                      \
        (cd).at_risk_ms = (d)->at_risk_ms;                                                    \
    } while (0)

SIMBA_API simba_result simba_locker_new(simba_loop *loop, simba_backend *be, const simba_locker_desc *d, simba_locker **out) {
    simba_contend_desc cd;
    simba_locker *lk;
    simba_result rc;
    if (out) *out = NULL;
    if (!loop || !be || !d || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_locker_new: NULL argument");
    lk = (simba_locker *)simba__zalloc(loop, sizeof *lk);
    if (!lk) return simba__fail(loop, SIMBA_ENOMEM, "simba_locker_new: out of memory");
    if (!simba__timer_init(loop, &lk->tm, SIMBA__T_LOCKER)) { simba_free(loop, lk); return simba__fail(loop, SIMBA_ENOMEM, "simba_locker_new: out of memory"); }
    SIMBA__LEASE_FROM(cd, d);
    cd.permits = d->permits;
    cd.shared = d->shared;
    cd.on_acquired = simba__lk_acquired;
    cd.on_released = simba__lk_released;
    cd.on_owner = simba__lk_owner;
    cd.on_at_risk = d->on_at_risk ? simba__lk_at_risk : NULL;
    cd.on_event = d->on_event ? simba__lk_event : NULL;
    cd.user_data = lk;
    rc = simba__contend_as(loop, be, &cd, &lk->svc, "simba_locker_new");
    if (rc != SIMBA_OK) {
        simba__timer_fini(loop, &lk->tm);
        simba_free(loop, lk);
        return rc;
    }
    lk->loop = loop;
    lk->on_lost = d->on_lost;
    lk->on_locked = d->on_locked;
    lk->on_at_risk = d->on_at_risk;
    lk->on_event = d->on_event;
    lk->user = d->user_data;
    lk->next = loop->lockers;
    if (loop->lockers) loop->lockers->prev = lk;
    loop->lockers = lk;
    *out = lk;
    return SIMBA_OK;
}

/* Starts a run of the contender once the previous run's release has been answered. */
static void simba__lk_start(simba_locker *lk) {
    if (simba_service_status(lk->svc) != SIMBA_INITIAL) return; /* last release still going out */
    lk->seen_owner = 0;
    (void)simba_start(lk->svc); /* INITIAL and valid: cannot fail */
}

SIMBA_API simba_result simba_locker_try(simba_locker *lk) {
    if (!simba__lk_ok(lk)) return SIMBA_EINVAL;
    switch (lk->state) {
    case SIMBA__LK_HELD: return simba_locker_is_owner(lk) ? SIMBA_OK : SIMBA_EAGAIN;
    case SIMBA__LK_LOST: return simba__fail(lk->loop, SIMBA_ESTATE, "simba_locker_try: the lock was lost; unlock first");
    default: break;
    }
    /* Pending from here on, even while an earlier release is still going out, so that
       simba_locker_unlock() agrees with what this call said. */
    lk->state = SIMBA__LK_PENDING;
    simba__lk_start(lk);
    return SIMBA_EAGAIN;
}

static void simba__lk_destroy(simba_locker *lk) {
    simba_loop *l = lk->loop;
    simba__timer_fini(l, &lk->tm);
    if (lk->prev) lk->prev->next = lk->next; else l->lockers = lk->next;
    if (lk->next) lk->next->prev = lk->prev;
    lk->loop = NULL;
    simba_free(l, lk);
}

/* Send a stopping locker's release now, not at the next poll: a process that unlocks (or
   gives up waiting) and then sleeps or exits must not keep the mutex, or its place at the
   head of the wait queue, for a whole lease. The step runs only the locker's own callbacks
   (nothing of the user's: state is already idle) and the backend's answer is queued for a
   poll, so the enqueue-only boundary holds. */
static void simba__lk_send_release(simba_locker *lk) {
    simba_loop *l = lk->loop;
    if (l->in_poll || l->in_cb || simba_service_status(lk->svc) != SIMBA_STOPPING) return;
    l->now = simba_now(l);
    simba__svc_step(lk->svc);
}

SIMBA_API simba_result simba_locker_lock(simba_locker *lk, int64_t timeout_ms) {
    simba_loop *l;
    int64_t start, deadline, answer_by;
    simba_result rc;
    if (!simba__lk_ok(lk)) return SIMBA_EINVAL;
    l = lk->loop;
    if (l->in_cb || l->in_poll) return simba__fail(l, SIMBA_ECALLBACK, "simba_locker_lock: blocking call from a callback");
    if ((rc = simba__timeout_check(l, "simba_locker_lock", timeout_ms)) != SIMBA_OK) return rc;
    if (lk->state != SIMBA__LK_IDLE) return simba__fail(l, SIMBA_ESTATE, "simba_locker_lock: already held or pending (not reentrant)");
    start = simba_now(l);
    deadline = timeout_ms < 0 ? SIMBA__NEVER : simba__add(start, timeout_ms);
    /* The timeout bounds the wait for another owner, not the backend's first answer: that
       is awaited on every backend (timeout 0 = one attempt), at most one ttl, after which
       no answer could grant a lease anyway. */
    answer_by = simba__add(start, lk->svc->tp->v.ttl);
    lk->seen_owner = 0;
    lk->in_lock = 1;
    for (;;) {
        int64_t until, now;
        rc = simba_locker_try(lk);
        if (rc != SIMBA_EAGAIN) break;
        now = simba_now(l);
        until = lk->seen_owner || deadline == SIMBA__NEVER ? deadline : simba__max(deadline, answer_by);
        if (until != SIMBA__NEVER && now >= until) { rc = SIMBA_ETIMEDOUT; break; }
        rc = simba_wait(l, until == SIMBA__NEVER ? -1 : until - now);
        /* SIMBA_ECLOSED: a callback freed the loop, and with it this locker: touch nothing. */
        if (rc == SIMBA_ECLOSED) return rc;
        if (lk->free_after) { simba__lk_destroy(lk); return SIMBA_ECLOSED; }
        if (rc != SIMBA_OK) break;
        if (lk->state == SIMBA__LK_HELD && simba_locker_is_owner(lk)) { rc = SIMBA_OK; break; }
        if (lk->state == SIMBA__LK_IDLE) { /* unlocked from a callback: the wait is over */
            lk->in_lock = 0;
            return simba__fail(l, SIMBA_ESTATE, "simba_locker_lock: unlocked from a callback while it waited");
        }
    }
    lk->in_lock = 0;
    if (rc == SIMBA_OK) return SIMBA_OK;
    if (lk->state == SIMBA__LK_PENDING && simba_service_status(lk->svc) == SIMBA_RUNNING) simba_stop(lk->svc);
    if (lk->state == SIMBA__LK_PENDING) lk->state = SIMBA__LK_IDLE;
    simba__lk_send_release(lk); /* leave the wait queue now */
    if (rc == SIMBA_ETIMEDOUT)
        return simba__fail(l, SIMBA_ETIMEDOUT, "simba_locker_lock: %s not acquired in time%s", simba_service_mutex(lk->svc),
                           lk->seen_owner ? " (another contender holds it)" : " (the backend gave no answer)");
    return rc;
}

SIMBA_API simba_result simba_locker_unlock(simba_locker *lk) {
    simba_loop *l;
    int was, lapsed;
    if (!simba__lk_ok(lk)) return SIMBA_EINVAL;
    l = lk->loop;
    if (lk->state == SIMBA__LK_IDLE) return simba__fail(l, SIMBA_ESTATE, "simba_locker_unlock: not locked");
    was = lk->state;
    /* a yield in flight is not a lapse: ownership is only unknown until the store answers */
    lapsed = was == SIMBA__LK_HELD && !simba_locker_is_owner(lk) && !(lk->svc->flags & SIMBA__F_YIELDING);
    lk->state = SIMBA__LK_IDLE;
    /* What its on_released and last_reason say. Held by name only: the lease ran out before
       the step-down was dispatched (a frozen or busy process); the critical section outlived
       it, which on_lost exists to tell, so it is owed from the next poll. */
    if (lapsed) {
        lk->svc->why_stop = SIMBA_REASON_LAPSED;
        lk->owe_lost = 1;
        simba__timer_set(l, &lk->tm, l->in_poll ? l->now : simba_now(l));
    } else {
        lk->svc->why_stop = SIMBA_REASON_UNLOCKED;
    }
    if (simba_service_status(lk->svc) == SIMBA_RUNNING) simba_stop(lk->svc);
    simba__lk_send_release(lk);
    if (was == SIMBA__LK_LOST || lapsed)
        return simba__fail(l, SIMBA_ELOST, "simba_locker_unlock: the lease of %s had lapsed before the unlock (%s)",
                           simba_service_mutex(lk->svc), simba_reason_str(lapsed ? SIMBA_REASON_LAPSED : lk->svc->last_reason));
    return SIMBA_OK;
}

SIMBA_API simba_result simba_locker_unlock_wait(simba_locker *lk, int64_t timeout_ms) {
    simba_loop *l;
    simba_result rc = SIMBA_OK;
    int64_t deadline;
    int lost;
    if (!simba__lk_ok(lk)) return SIMBA_EINVAL;
    l = lk->loop;
    if (l->in_cb || l->in_poll) return simba__fail(l, SIMBA_ECALLBACK, "simba_locker_unlock_wait: blocking call from a callback");
    if ((rc = simba__timeout_check(l, "simba_locker_unlock_wait", timeout_ms)) != SIMBA_OK) return rc;
    if (lk->state != SIMBA__LK_IDLE && (rc = simba_locker_unlock(lk)) != SIMBA_OK && rc != SIMBA_ELOST) return rc;
    lost = rc == SIMBA_ELOST;
    rc = SIMBA_OK;
    deadline = timeout_ms < 0 ? SIMBA__NEVER : simba__add(simba_now(l), timeout_ms);
    lk->in_lock = 1;
    while (simba_service_status(lk->svc) != SIMBA_INITIAL) {
        int64_t now = simba_now(l);
        if (deadline != SIMBA__NEVER && now >= deadline) { rc = SIMBA_ETIMEDOUT; break; }
        rc = simba_wait(l, deadline == SIMBA__NEVER ? -1 : deadline - now);
        /* SIMBA_ECLOSED: a callback freed the loop, and with it this locker: touch nothing. */
        if (rc == SIMBA_ECLOSED) return rc;
        if (lk->free_after) { simba__lk_destroy(lk); return SIMBA_ECLOSED; }
        if (rc != SIMBA_OK) break;
    }
    lk->in_lock = 0;
    if (rc == SIMBA_ETIMEDOUT)
        return simba__fail(l, rc, "simba_locker_unlock_wait: release of %s not answered in time", simba_service_mutex(lk->svc));
    if (rc != SIMBA_OK) return rc;
    if (lk->svc->release_rc != SIMBA_OK)
        return simba__fail(l, lk->svc->release_rc, "simba_locker_unlock_wait: release of %s failed: %s", simba_service_mutex(lk->svc),
                           simba_strerror(lk->svc->release_rc));
    if (lost)
        return simba__fail(l, SIMBA_ELOST, "simba_locker_unlock_wait: the lease of %s had lapsed before the unlock (%s)",
                           simba_service_mutex(lk->svc), simba_reason_str(lk->svc->last_reason));
    return SIMBA_OK;
}
SIMBA_API int simba_locker_is_owner(const simba_locker *lk) { return simba__lk_ok(lk) && lk->state == SIMBA__LK_HELD && simba_is_owner(lk->svc); }
SIMBA_API uint64_t simba_locker_fence(const simba_locker *lk) { return simba_locker_is_owner(lk) ? simba_fence(lk->svc) : 0; }
SIMBA_API simba_result simba_locker_yield(simba_locker *lk) {
    if (!simba__lk_ok(lk)) return SIMBA_EINVAL;
    if (!simba_locker_is_owner(lk)) return simba__fail(lk->loop, SIMBA_ESTATE, "simba_locker_yield: not held");
    return simba_yield(lk->svc);
}
SIMBA_API simba_result simba_locker_set_value(simba_locker *lk, const void *value, size_t len) {
    if (!simba__lk_ok(lk)) return SIMBA_EINVAL;
    if (!simba_locker_is_owner(lk)) return simba__fail(lk->loop, SIMBA_ESTATE, "simba_locker_set_value: not held");
    return simba_set_value(lk->svc, value, len);
}

SIMBA_API simba_result simba_locker_free(simba_locker *lk) {
    if (!simba__lk_ok(lk)) return SIMBA_EINVAL;
    simba_service_free(lk->svc); /* stops and releases; no callback reaches lk any more */
    /* From a callback while simba_locker_lock() blocks on it: that call frees it on return. */
    if (lk->in_lock) { lk->free_after = 1; return SIMBA_OK; }
    simba__lk_destroy(lk);
    return SIMBA_OK;
}
SIMBA_API simba_result simba_lock(simba_loop *loop, simba_backend *be, const char *mutex, int64_t timeout_ms, simba_locker **out) {
    simba_locker_desc d;
    simba_result rc;
    if (out) *out = NULL;
    if (!out) return simba__fail(loop, SIMBA_EINVAL, "simba_lock: NULL out");
    if (loop && (rc = simba__timeout_check(loop, "simba_lock", timeout_ms)) != SIMBA_OK) return rc;
    memset(&d, 0, sizeof d);
    d.mutex = mutex;
    if ((rc = simba_locker_new(loop, be, &d, out)) != SIMBA_OK) return rc;
    if ((rc = simba_locker_lock(*out, timeout_ms)) != SIMBA_OK) {
        if (rc != SIMBA_ECLOSED) simba_locker_free(*out); /* ECLOSED: already gone */
        *out = NULL;
    }
    return rc;
}
SIMBA_API simba_result simba_unlock(simba_locker *lk) {
    if (!simba__lk_ok(lk)) return SIMBA_EINVAL;
    if (lk->state != SIMBA__LK_IDLE) simba_locker_unlock(lk);
    return simba_locker_free(lk);
}

static void simba__locker_release_all(simba_loop *l) {
    while (l->lockers) {
        simba_locker *lk = l->lockers;
        l->lockers = lk->next;
        simba_free(l, lk);
    }
}

/* ---- scheduler -------------------------------------------------------------------------- */

struct simba_scheduler {
    simba__timer tm; /* first: the heap hands back this pointer */
    simba_loop *loop;
    simba_service *svc;
    simba_scheduler *next, *prev;
    simba_schedule_strategy strategy;
    int64_t initial_delay, period, next_run;
    void (*work)(simba_scheduler *, void *);
    void (*on_event)(simba_scheduler *, const simba_service_event *, void *);
    void (*on_at_risk)(simba_scheduler *, int64_t, void *);
    void *user;
    int running, leader, in_work, free_after;
};

static void simba__sc_acquired(simba_service *svc, const simba_state *st, void *u) {
    simba_scheduler *sc = (simba_scheduler *)u;
    (void)svc;
    (void)st;
    if (!sc->running) return;
    sc->leader = 1;
    sc->next_run = simba__add(sc->loop->now, sc->initial_delay);
    simba__timer_set(sc->loop, &sc->tm, sc->next_run);
}
static void simba__sc_released(simba_service *svc, const simba_state *st, void *u) {
    simba_scheduler *sc = (simba_scheduler *)u;
    (void)svc;
    (void)st;
    sc->leader = 0;
    simba__timer_set(sc->loop, &sc->tm, SIMBA__NEVER);
}

static void simba__sc_event(simba_service *svc, const simba_service_event *ev, void *u) {
    simba_scheduler *sc = (simba_scheduler *)u;
    (void)svc;
    if (sc->on_event) sc->on_event(sc, ev, sc->user);
}
static void simba__sc_at_risk(simba_service *svc, int64_t left_ms, void *u) {
    simba_scheduler *sc = (simba_scheduler *)u;
    (void)svc;
    if (sc->leader && sc->on_at_risk) sc->on_at_risk(sc, left_ms, sc->user);
}

SIMBA_API simba_result simba_scheduler_new(simba_loop *loop, simba_backend *be, const simba_scheduler_desc *d, simba_scheduler **out) {
    simba_contend_desc cd;
    simba_scheduler *sc;
    simba_result rc;
    if (out) *out = NULL;
    if (!loop || !be || !d || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_scheduler_new: NULL argument");
    if (!d->work) return simba__fail(loop, SIMBA_EINVAL, "simba_scheduler_new: work is required");
    if ((rc = simba__ms_check(loop, "simba_scheduler_new", "period_ms", d->period_ms, 1)) != SIMBA_OK ||
        (rc = simba__ms_check(loop, "simba_scheduler_new", "initial_delay_ms", d->initial_delay_ms, 0)) != SIMBA_OK)
        return rc;
    if (d->strategy != SIMBA_FIXED_DELAY && d->strategy != SIMBA_FIXED_RATE)
        return simba__fail(loop, SIMBA_EINVAL, "simba_scheduler_new: unknown strategy");
    sc = (simba_scheduler *)simba__zalloc(loop, sizeof *sc);
    if (!sc) return simba__fail(loop, SIMBA_ENOMEM, "simba_scheduler_new: out of memory");
    if (!simba__timer_init(loop, &sc->tm, SIMBA__T_SCHED)) { simba_free(loop, sc); return SIMBA_ENOMEM; }
    SIMBA__LEASE_FROM(cd, d);
    cd.on_acquired = simba__sc_acquired;
    cd.on_released = simba__sc_released;
    cd.on_at_risk = d->on_at_risk ? simba__sc_at_risk : NULL;
    cd.on_event = d->on_event ? simba__sc_event : NULL;
    cd.user_data = sc;
    rc = simba__contend_as(loop, be, &cd, &sc->svc, "simba_scheduler_new");
    if (rc != SIMBA_OK) {
        simba__timer_fini(loop, &sc->tm);
        simba_free(loop, sc);
        return rc;
    }
    sc->loop = loop;
    sc->strategy = d->strategy;
    sc->initial_delay = d->initial_delay_ms;
    sc->period = d->period_ms;
    sc->work = d->work;
    sc->on_event = d->on_event;
    sc->on_at_risk = d->on_at_risk;
    sc->user = d->user_data;
    sc->next = loop->scheds;
    if (loop->scheds) loop->scheds->prev = sc;
    loop->scheds = sc;
    *out = sc;
    return SIMBA_OK;
}

SIMBA_API simba_result simba_scheduler_start(simba_scheduler *sc) {
    simba_result rc;
    if (!sc || !sc->loop || sc->free_after) return SIMBA_EINVAL;
    if (sc->running) return simba__fail(sc->loop, SIMBA_ESTATE, "simba_scheduler_start: already running");
    if ((rc = simba_start(sc->svc)) != SIMBA_OK) return rc;
    sc->running = 1;
    return SIMBA_OK;
}
SIMBA_API simba_result simba_scheduler_stop(simba_scheduler *sc) {
    if (!sc || !sc->loop || sc->free_after) return SIMBA_EINVAL;
    if (!sc->running) return simba__fail(sc->loop, SIMBA_ESTATE, "simba_scheduler_stop: not running");
    sc->running = 0;
    sc->leader = 0;
    simba__timer_set(sc->loop, &sc->tm, SIMBA__NEVER);
    if (simba_service_status(sc->svc) == SIMBA_RUNNING) simba_stop(sc->svc);
    return SIMBA_OK;
}
SIMBA_API int simba_scheduler_running(const simba_scheduler *sc) { return sc && sc->loop && sc->running; }
SIMBA_API int simba_scheduler_is_owner(const simba_scheduler *sc) { return sc && sc->loop && sc->running && sc->leader && simba_is_owner(sc->svc); }
SIMBA_API uint64_t simba_scheduler_fence(const simba_scheduler *sc) { return simba_scheduler_is_owner(sc) ? simba_fence(sc->svc) : 0; }
SIMBA_API simba_result simba_scheduler_yield(simba_scheduler *sc) {
    if (!sc || !sc->loop || sc->free_after) return SIMBA_EINVAL;
    if (!simba_scheduler_is_owner(sc)) return simba__fail(sc->loop, SIMBA_ESTATE, "simba_scheduler_yield: not the leader");
    return simba_yield(sc->svc);
}
SIMBA_API simba_result simba_scheduler_set_value(simba_scheduler *sc, const void *value, size_t len) {
    if (!sc || !sc->loop || sc->free_after) return SIMBA_EINVAL;
    if (!simba_scheduler_is_owner(sc)) return simba__fail(sc->loop, SIMBA_ESTATE, "simba_scheduler_set_value: not the leader");
    return simba_set_value(sc->svc, value, len);
}

static void simba__sched_destroy(simba_scheduler *sc) {
    simba_loop *l = sc->loop;
    simba__timer_fini(l, &sc->tm);
    if (sc->prev) sc->prev->next = sc->next; else l->scheds = sc->next;
    if (sc->next) sc->next->prev = sc->prev;
    sc->loop = NULL;
    simba_free(l, sc);
}

SIMBA_API simba_result simba_scheduler_free(simba_scheduler *sc) {
    if (!sc || !sc->loop || sc->free_after) return SIMBA_EINVAL;
    sc->running = 0;
    sc->leader = 0;
    simba_service_free(sc->svc);
    if (sc->in_work) { sc->free_after = 1; return SIMBA_OK; } /* freed when work returns */
    simba__sched_destroy(sc);
    return SIMBA_OK;
}

static void simba__sched_step(simba_scheduler *sc) {
    simba_loop *l = sc->loop;
    if (!sc->running || !sc->leader) return;
    if (sc->svc->flags & SIMBA__F_YIELDING) { /* the store decides who leads: skip this run */
        sc->next_run = simba__add(simba_now(l), sc->period);
        simba__timer_set(l, &sc->tm, sc->next_run);
        return;
    }
    if (!simba_is_owner(sc->svc)) return; /* lease lapsed; the step-down is on its way */
    sc->in_work = 1;
    l->in_cb++;
    sc->work(sc, sc->user);
    l->in_cb--;
    sc->in_work = 0;
    if (sc->free_after) { simba__sched_destroy(sc); return; }
    if (!sc->running || !sc->leader) return;
    if (sc->strategy == SIMBA_FIXED_RATE) {
        /* Keep the grid; periods missed while the work ran long are skipped, not bursted. */
        int64_t now = simba_now(l);
        sc->next_run = simba__add(sc->next_run, sc->period);
        if (sc->next_run <= now) sc->next_run = simba__add(sc->next_run, ((now - sc->next_run) / sc->period + 1) * sc->period);
    } else {
        sc->next_run = simba__add(simba_now(l), sc->period);
    }
    simba__timer_set(l, &sc->tm, sc->next_run);
}

static void simba__sched_release_all(simba_loop *l) {
    while (l->scheds) {
        simba_scheduler *sc = l->scheds;
        l->scheds = sc->next;
        simba_free(l, sc);
    }
}

/* ---- >>close: the clean exit ------------------------------------------------------------ */

SIMBA_API simba_result simba_loop_close(simba_loop *l, int64_t timeout_ms) {
    simba_service *s;
    simba_locker *lk;
    simba_scheduler *sc;
    simba_result rc = SIMBA_OK;
    int64_t deadline;
    if (!l) return SIMBA_EINVAL;
    if (l->in_cb || l->in_poll || l->free_requested)
        return simba__fail(l, SIMBA_ECALLBACK, "simba_loop_close: blocking call from a callback (simba_loop_free is deferred there)");
    if ((rc = simba__timeout_check(l, "simba_loop_close", timeout_ms)) != SIMBA_OK) return rc;
    deadline = timeout_ms < 0 ? SIMBA__NEVER : simba__add(simba_now(l), timeout_ms);
    /* Lockers unlock (no on_lost for a lock given up), schedulers stop, contenders and
       observers stop: every release goes out now. */
    for (lk = l->lockers; lk; lk = lk->next)
        if (simba__lk_ok(lk) && lk->state != SIMBA__LK_IDLE) (void)simba_locker_unlock(lk);
    for (sc = l->scheds; sc; sc = sc->next)
        if (sc->running && !sc->free_after) (void)simba_scheduler_stop(sc);
    for (;;) {
        /* (a callback may have started one again: it is stopped again) */
        for (s = l->services; s; s = s->all_next) {
            if (s->status == SIMBA_RUNNING && !(s->flags & SIMBA__F_ZOMBIE)) (void)simba_stop(s);
            s->flags |= SIMBA__F_WAITED; /* freed ones too: the loop's free frees them */
        }
        for (s = l->services; s && s->status == SIMBA_INITIAL; s = s->all_next) {}
        if (!s) break;
        if (deadline != SIMBA__NEVER && simba_now(l) >= deadline) { rc = SIMBA_ETIMEDOUT; break; }
        rc = simba__wait_stopped(s, deadline);
        if (rc == SIMBA_ECLOSED) return rc; /* a callback freed the loop: the handle is gone */
        if (rc != SIMBA_OK) break;
    }
    if (rc == SIMBA_OK)
        for (s = l->services; s; s = s->all_next)
            if ((s->flags & SIMBA__F_WAITED) && s->release_rc != SIMBA_OK) {
                rc = simba__fail(l, s->release_rc, "simba_loop_close: release of %s failed: %s", s->mx->name, simba_strerror(s->release_rc));
                break;
            }
    simba_loop_free(l);
    return rc;
}

/* ---- >>inspect: what the store holds, through the loop like any request ---------------- */

/* One mutex of a listing, kept until the answer is complete: a view without its waiters
   (a listing reads no queue), so that a long listing costs a third of full views. */
#define SIMBA__ITEM_SIZE offsetof(simba_view, waiter)
typedef struct simba__item {
    struct simba__item *next;
    simba_view *v; /* SIMBA__ITEM_SIZE bytes right after the item, then the value's */
    size_t value_len;
    simba_view_holder *holder; /* simba__holders_copy's block, or NULL */
    int holders, permits;
} simba__item;

/* A view's holders in one block: the array, then each holder's value. A backend that lists
   none while an owner is set has one holder, the owner. NULL with *n 0 when nobody holds;
   NULL with *n -1 when the list is malformed (err says why) or memory ran out. */
static simba_view_holder *simba__holders_copy(simba_loop *l, const simba_view *v, int *n, const char **err, simba_result *rc) {
    simba_view_holder one, *out;
    const simba_view_holder *in = v->holder;
    size_t bytes, at;
    int i, k = v->holders;
    *n = 0;
    if (k <= 0) {
        if (!v->owner[0]) return NULL;
        memset(&one, 0, sizeof one);
        simba__copy(one.id, sizeof one.id, v->owner);
        one.fence = v->fence;
        one.acquired_unix_ms = v->acquired_unix_ms;
        one.held_ms = v->held_ms;
        one.ttl_left_ms = v->ttl_left_ms;
        one.transition_left_ms = v->transition_left_ms;
        one.value = v->value;
        one.value_len = v->value_len;
        in = &one;
        k = 1;
    }
    *n = -1;
    *rc = SIMBA_EBACKEND;
    if (k > SIMBA_PERMITS_MAX || !in) { *err = "backend reported more holders than SIMBA_PERMITS_MAX, or none listed"; return NULL; }
    bytes = (size_t)k * sizeof *out;
    for (i = 0; i < k; i++) {
        if (simba_id_check(in[i].id) != SIMBA_OK) { *err = "backend reported a malformed holder id"; return NULL; }
        if (in[i].value_len > SIMBA_VALUE_MAX || (in[i].value_len && !in[i].value)) {
            *err = "backend reported a holder's value longer than SIMBA_VALUE_MAX";
            return NULL;
        }
        bytes += in[i].value_len;
    }
    out = (simba_view_holder *)simba_alloc(l, bytes);
    if (!out) {
        *rc = SIMBA_ENOMEM;
        *err = "out of memory keeping a view's holders";
        return NULL;
    }
    at = (size_t)k * sizeof *out;
    for (i = 0; i < k; i++) {
        out[i] = in[i];
        out[i].id[SIMBA_ID_MAX] = 0;
        out[i].shared = in[i].shared != 0;
        out[i].value = NULL;
        if (in[i].value_len) {
            memcpy((unsigned char *)out + at, in[i].value, in[i].value_len);
            out[i].value = (unsigned char *)out + at;
            at += in[i].value_len;
        }
    }
    *n = k;
    return out;
}

/* An inspection in flight. The caller's view and callback are dropped when a blocking form
   gives up (timeout): the request stays with the backend until it answers. */
typedef struct simba__ask {
    simba_req req;
    simba_loop *loop;
    struct simba__ask *next, *prev;
    simba_view *out; /* the caller's (simba_inspect), or NULL */
    simba_view_fn cb;
    simba_call_fn call; /* SIMBA_OP_CALL: the backend's completion */
    void *user;
    simba_view one; /* INSPECT: the store's answer */
    simba_view_holder *one_holder; /* its holders (simba__holders_copy), handed to the loop */
    unsigned char one_value[SIMBA_VALUE_MAX]; /* one.value's storage */
    int have_one, n;
    int delivered; /* SIMBA_OP_CALL: its fn ran */
    simba__item *items;
    simba_result rc;
    char *err_to; /* a blocking form's copy of err */
    char mutex[SIMBA_NAME_MAX + 1];
    char err[320];
} simba__ask;

static void simba__ask_free(simba__ask *a) {
    simba_loop *l = a->loop;
    /* A call the poll never answered (the loop is going): its backend frees its part. */
    if (a->call && !a->delivered) a->call(NULL, SIMBA_ECLOSED, NULL, a->user);
    while (a->items) {
        simba__item *it = a->items;
        a->items = it->next;
        simba_free(l, it->holder);
        simba_free(l, it);
    }
    simba_free(l, a->one_holder);
    if (a->prev) a->prev->next = a->next; else l->asks = a->next;
    if (a->next) a->next->prev = a->prev;
    simba_free(l, a);
}

static void simba__view_unknown(simba_view *v, const char *mutex) {
    memset(v, 0, sizeof *v);
    simba__copy(v->mutex, sizeof v->mutex, mutex);
    v->acquired_unix_ms = v->held_ms = v->ttl_left_ms = v->transition_left_ms = v->lease_ms = SIMBA_UNKNOWN_MS;
}

SIMBA_API void simba_req_view(simba_req *req, const simba_view *view) {
    simba__ask *a;
    simba__item *it = NULL;
    if (!req || !view || req->done_ || !req->ask_) return;
    a = (simba__ask *)req->ask_;
    if (simba_name_check(view->mutex) != SIMBA_OK || (view->owner[0] && simba_id_check(view->owner) != SIMBA_OK)) {
        /* Whatever the store holds, users only ever see well-formed names and ids. */
        a->rc = SIMBA_EBACKEND;
        simba__copy(a->err, sizeof a->err, "backend reported a malformed mutex name or owner id");
        return;
    }
    if (view->value_len > SIMBA_VALUE_MAX || (view->value_len && !view->value)) {
        a->rc = SIMBA_EBACKEND;
        simba__copy(a->err, sizeof a->err, "backend reported a value longer than SIMBA_VALUE_MAX");
        return;
    }
    if (req->op == SIMBA_OP_INSPECT || req->op == SIMBA_OP_LIST) {
        const char *err = NULL;
        simba_result why = SIMBA_EBACKEND;
        int n;
        simba_view_holder *h = simba__holders_copy(a->loop, view, &n, &err, &why);
        if (n < 0) {
            a->rc = why;
            simba__copy(a->err, sizeof a->err, err);
            return;
        }
        if (req->op == SIMBA_OP_LIST) {
            it = (simba__item *)simba_alloc(a->loop, sizeof *it + SIMBA__ITEM_SIZE + view->value_len);
            if (!it) {
                simba_free(a->loop, h);
                a->rc = SIMBA_ENOMEM;
                simba__copy(a->err, sizeof a->err, "out of memory keeping a listing");
                return;
            }
            it->holder = h;
            it->holders = n;
            it->permits = view->permits > 0 ? view->permits : 0;
        } else {
            simba_free(a->loop, a->one_holder);
            a->one_holder = h;
            a->one = *view;
            a->one.holders = n;
            a->one.holder = h;
        }
    }
    if (req->op == SIMBA_OP_INSPECT) {
        a->one.mutex[SIMBA_NAME_MAX] = a->one.owner[SIMBA_ID_MAX] = 0;
        if (view->value_len) memcpy(a->one_value, view->value, view->value_len);
        a->one.value = view->value_len ? a->one_value : NULL;
        if (a->one.waiters < -1) a->one.waiters = -1;
        a->have_one = 1;
        return;
    }
    if (req->op != SIMBA_OP_LIST || !it) return;
    it->v = (simba_view *)(void *)(it + 1);
    memcpy(it->v, view, SIMBA__ITEM_SIZE);
    it->value_len = view->value_len;
    if (view->value_len) memcpy((unsigned char *)it->v + SIMBA__ITEM_SIZE, view->value, view->value_len);
    it->next = a->items;
    a->items = it;
    a->n++;
}

static void simba__ask_done(simba_req *req, const simba_reply *reply) {
    simba__ask *a = (simba__ask *)req->ask_;
    simba_loop *l = a->loop;
    if (l->closing) return;
    if (a->rc == SIMBA_OK) {
        a->rc = reply->rc;
        if (reply->rc != SIMBA_OK) simba__copy(a->err, sizeof a->err, reply->errmsg ? reply->errmsg : simba_strerror(reply->rc));
    }
    req->done_next_ = NULL;
    if (l->done_tail) l->done_tail->done_next_ = req; else l->done_head = req;
    l->done_tail = req;
    simba__kick(l);
}

static int simba__item_cmp(const void *x, const void *y) {
    return strcmp((*(simba__item *const *)x)->v->mutex, (*(simba__item *const *)y)->v->mutex);
}

/* A listing's mutexes, in name order whatever order the store gave them. */
static void simba__ask_list_out(simba__ask *a) {
    simba_loop *l = a->loop;
    simba__item **arr = a->n ? (simba__item **)simba_alloc(l, (size_t)a->n * sizeof *arr) : NULL;
    simba__item *it;
    simba_view v;
    int i = 0;
    if (a->n && !arr) {
        a->rc = SIMBA_ENOMEM;
        simba__copy(a->err, sizeof a->err, "out of memory sorting a listing");
        return;
    }
    for (it = a->items; it; it = it->next) arr[i++] = it;
    if (a->n > 1) qsort(arr, (size_t)a->n, sizeof *arr, simba__item_cmp);
    for (i = 0; i < a->n && a->cb; i++) {
        memset(&v, 0, sizeof v);
        memcpy(&v, arr[i]->v, SIMBA__ITEM_SIZE);
        v.waiters = -1;
        v.value_len = arr[i]->value_len;
        v.value = v.value_len ? (const unsigned char *)arr[i]->v + SIMBA__ITEM_SIZE : NULL;
        v.holders = arr[i]->holders;
        v.holder = arr[i]->holder;
        v.permits = arr[i]->permits;
        a->cb(&v, SIMBA_OK, a->user);
    }
    simba_free(l, arr);
}

/* The answer is complete: hand it to the caller, from the poll. */
static void simba__ask_complete(simba__ask *a) {
    simba_loop *l = a->loop;
    if (a->req.op == SIMBA_OP_CALL) { /* a refusal is an answer, not a failure to log */
        l->in_cb++;
        a->delivered = 1;
        a->call(&a->req, a->rc, a->rc != SIMBA_OK ? a->err : NULL, a->user);
        l->in_cb--;
        simba__ask_free(a);
        return;
    }
    if (a->rc != SIMBA_OK) simba_log(l, SIMBA_LOG_WARN, "inspection of '%s' failed: %s", a->mutex, a->err);
    if (a->err_to) simba__copy(a->err_to, sizeof a->err, a->err);
    l->in_cb++;
    if (a->req.op == SIMBA_OP_INSPECT) {
        if (a->out) {
            if (a->have_one) *a->out = a->one;
            else simba__view_unknown(a->out, a->mutex);
            /* the caller's copy of the value outlives the request: the loop keeps it */
            if (a->out->value_len) memcpy(l->view_value, a->one_value, a->out->value_len);
            a->out->value = a->out->value_len ? l->view_value : NULL;
            /* ... and its holders: the block passes to the loop */
            simba_free(l, l->view_holders);
            l->view_holders = a->have_one ? a->one_holder : NULL;
            if (a->have_one) a->one_holder = NULL;
            a->out->holder = l->view_holders;
            if (!a->out->holder) a->out->holders = 0;
        }
        if (a->cb) a->cb(a->out, a->rc, a->user);
    } else if (a->req.op == SIMBA_OP_LIST) {
        if (a->rc == SIMBA_OK) simba__ask_list_out(a);
        if (a->cb) a->cb(NULL, a->rc, a->user);
    } else if (a->cb) {
        a->cb(NULL, a->rc, a->user);
    }
    l->in_cb--;
    simba__ask_free(a);
}

static simba_result simba__ask_start(simba_backend *be, simba_op op, const char *mutex, uint64_t fence, simba_view *out,
                                     simba_view_fn cb, void *user, simba__ask **made) {
    static const char *const what[] = {"simba_inspect", "simba_list", "simba_force_release"};
    const char *fn = what[op - SIMBA_OP_INSPECT];
    simba_loop *l;
    simba__ask *a;
    simba_result rc;
    if (made) *made = NULL;
    if (!be || !be->loop || be->free_requested) return SIMBA_EINVAL;
    l = be->loop;
    if (op != SIMBA_OP_LIST && simba_name_check(mutex) != SIMBA_OK)
        return simba__fail(l, SIMBA_EINVAL, "%s: mutex name '%.140s' is not valid (1..%d bytes of letters, digits, - _ . : @ + = ,)",
                           fn, mutex ? mutex : "(null)", SIMBA_NAME_MAX);
    if (!cb && !made) return simba__fail(l, SIMBA_EINVAL, "%s: no callback", fn);
    if (op == SIMBA_OP_INSPECT && !out) return simba__fail(l, SIMBA_EINVAL, "%s: no view to fill", fn);
    if (!be->inspect) return simba__fail(l, SIMBA_EINVAL, "%s: backend '%s' has no inspection", fn, be->vt->name);
    a = (simba__ask *)simba__zalloc(l, sizeof *a);
    if (!a) return simba__fail(l, SIMBA_ENOMEM, "%s: out of memory", fn);
    a->loop = l;
    a->out = out;
    a->cb = cb;
    a->user = user;
    simba__copy(a->mutex, sizeof a->mutex, op == SIMBA_OP_LIST ? "" : mutex);
    a->req.op = op;
    a->req.mutex = a->mutex;
    a->req.contender = "";
    a->req.fence = fence;
    a->req.sent_at = simba_now(l);
    a->req.ask_ = a;
    a->next = l->asks;
    if (l->asks) l->asks->prev = a;
    l->asks = a;
    if (made) *made = a;
    l->in_submit++; /* no hooks while the backend is inside inspect */
    rc = be->inspect(be->impl, &a->req);
    l->in_submit--;
    if (rc != SIMBA_OK && !a->req.done_) simba_req_fail(&a->req, rc, be->errmsg[0] ? be->errmsg : "inspection refused");
    simba__kick(l);
    return SIMBA_OK;
}

SIMBA_API simba_result simba_backend_call(simba_backend *be, const char *mutex, uint64_t fence,
                                          simba_result (*start)(void *impl, simba_req *req), simba_call_fn fn, void *user) {
    simba_loop *l;
    simba__ask *a;
    simba_result rc;
    if (!be || !be->loop || !start || !fn) return SIMBA_EINVAL;
    l = be->loop;
    if (be->free_requested) return simba__fail(l, SIMBA_ECLOSED, "%s: the backend is being freed", be->vt->name);
    if (simba_name_check(mutex) != SIMBA_OK)
        return simba__fail(l, SIMBA_EINVAL, "%s: mutex name '%.140s' is not valid (1..%d bytes of letters, digits, - _ . : @ + = ,)",
                           be->vt->name, mutex ? mutex : "(null)", SIMBA_NAME_MAX);
    a = (simba__ask *)simba__zalloc(l, sizeof *a);
    if (!a) return simba__fail(l, SIMBA_ENOMEM, "%s: out of memory for a call", be->vt->name);
    a->loop = l;
    a->call = fn;
    a->user = user;
    simba__copy(a->mutex, sizeof a->mutex, mutex);
    a->req.op = SIMBA_OP_CALL;
    a->req.mutex = a->mutex;
    a->req.contender = "";
    a->req.fence = fence;
    a->req.sent_at = simba_now(l);
    a->req.ask_ = a;
    a->next = l->asks;
    if (l->asks) l->asks->prev = a;
    l->asks = a;
    l->in_submit++; /* no hooks while the backend is inside start */
    rc = start(be->impl, &a->req);
    l->in_submit--;
    if (rc != SIMBA_OK && !a->req.done_) simba_req_fail(&a->req, rc, be->errmsg[0] ? be->errmsg : "call refused");
    simba__kick(l);
    return SIMBA_OK;
}

SIMBA_API void *simba_req_call_user(const simba_req *req) {
    return req && req->op == SIMBA_OP_CALL && req->ask_ ? ((simba__ask *)req->ask_)->user : NULL;
}

SIMBA_API simba_result simba_inspect(simba_backend *be, const char *mutex, simba_view *view, simba_view_fn cb, void *user_data) {
    return simba__ask_start(be, SIMBA_OP_INSPECT, mutex, 0, view, cb, user_data, NULL);
}
SIMBA_API simba_result simba_list(simba_backend *be, simba_view_fn cb, void *user_data) {
    return simba__ask_start(be, SIMBA_OP_LIST, NULL, 0, NULL, cb, user_data, NULL);
}
SIMBA_API simba_result simba_force_release(simba_backend *be, const char *mutex, uint64_t fence, simba_view_fn cb,
                                           void *user_data) {
    return simba__ask_start(be, SIMBA_OP_FORCE_RELEASE, mutex, fence, NULL, cb, user_data, NULL);
}

/* The blocking forms' callback: the end of the answer, or a listed mutex to pass on. */
typedef struct simba__ask_wait {
    int done;
    char err[320];
    simba_result rc;
    simba_view_fn cb;
    void *user;
} simba__ask_wait;
static void simba__ask_wait_cb(const simba_view *view, simba_result rc, void *user) {
    simba__ask_wait *w = (simba__ask_wait *)user;
    if (view && w->cb) { w->cb(view, rc, w->user); return; } /* a listed mutex */
    w->done = 1;
    w->rc = rc;
}

static simba_result simba__ask_wait_run(simba_backend *be, simba_op op, const char *mutex, uint64_t fence, simba_view *out,
                                        simba_view_fn cb, void *user, int64_t timeout_ms) {
    simba__ask_wait w;
    simba__ask *a;
    simba_loop *l;
    simba_result rc;
    int64_t deadline;
    if (!be || !be->loop) return SIMBA_EINVAL;
    l = be->loop;
    if (l->in_cb || l->in_poll) return simba__fail(l, SIMBA_ECALLBACK, "blocking inspection from a callback");
    memset(&w, 0, sizeof w);
    w.cb = cb;
    w.user = user;
    rc = simba__ask_start(be, op, mutex, fence, out, simba__ask_wait_cb, &w, &a);
    if (rc != SIMBA_OK) return rc;
    a->err_to = w.err;
    deadline = timeout_ms < 0 ? SIMBA__NEVER : simba__add(simba_now(l), simba__min(timeout_ms, SIMBA_MAX_MS));
    while (!w.done) {
        int64_t now = simba_now(l);
        if (deadline != SIMBA__NEVER && now >= deadline) {
            a->cb = NULL; /* the answer may still come: nobody hears it */
            a->out = NULL;
            a->err_to = NULL;
            return simba__fail(l, SIMBA_ETIMEDOUT, "inspection of '%s' not answered in %lld ms", a->mutex, (long long)timeout_ms);
        }
        rc = simba_wait(l, deadline == SIMBA__NEVER ? -1 : deadline - now);
        if (rc == SIMBA_ECLOSED) return rc; /* a callback freed the loop: touch nothing */
        if (rc != SIMBA_OK) return rc;
    }
    if (w.rc == SIMBA_EFENCE) return simba__fail(l, w.rc, "simba_force_release_wait: nobody holds '%s' with fence %llu", mutex,
                                                 (unsigned long long)fence);
    if (w.rc != SIMBA_OK) return simba__fail(l, w.rc, "%s", w.err);
    return SIMBA_OK;
}

SIMBA_API simba_result simba_inspect_wait(simba_backend *be, const char *mutex, simba_view *view, int64_t timeout_ms) {
    return simba__ask_wait_run(be, SIMBA_OP_INSPECT, mutex, 0, view, NULL, NULL, timeout_ms);
}
SIMBA_API simba_result simba_list_wait(simba_backend *be, simba_view_fn cb, void *user_data, int64_t timeout_ms) {
    if (!cb) return be && be->loop ? simba__fail(be->loop, SIMBA_EINVAL, "simba_list_wait: no callback") : SIMBA_EINVAL;
    return simba__ask_wait_run(be, SIMBA_OP_LIST, NULL, 0, NULL, cb, user_data, timeout_ms);
}
SIMBA_API simba_result simba_force_release_wait(simba_backend *be, const char *mutex, uint64_t fence, int64_t timeout_ms) {
    return simba__ask_wait_run(be, SIMBA_OP_FORCE_RELEASE, mutex, fence, NULL, NULL, NULL, timeout_ms);
}

/* ---- >>stats: statistics and release reasons ------------------------------------------- */

SIMBA_API const char *simba_reason_str(int reason) {
    switch (reason) {
    case SIMBA_REASON_NONE: return "none";
    case SIMBA_REASON_STOPPED: return "stopped";
    case SIMBA_REASON_UNLOCKED: return "unlocked";
    case SIMBA_REASON_LAPSED: return "lapsed";
    case SIMBA_REASON_REFUSED: return "refused";
    case SIMBA_REASON_SESSION: return "session";
    case SIMBA_REASON_CONNECTION: return "connection";
    case SIMBA_REASON_YIELDED: return "yielded";
    default: return "unknown";
    }
}

/* The public struct from counters; the caller's size decides how much of it is copied. */
static simba_result simba__stats_out(const simba__counters *c, const simba_stats *live, simba_stats *out) {
    simba_stats t;
    uint32_t n;
    int i;
    if (!out || out->size < offsetof(simba_stats, owned)) return SIMBA_EINVAL;
    n = out->size < (uint32_t)sizeof t ? out->size : (uint32_t)sizeof t;
    t = *live;
    t.size = n;
    t.version = SIMBA_STATS_VERSION;
    t.acquisitions = c->acquisitions;
    t.releases = c->releases;
    t.step_downs = 0;
    for (i = 0; i < SIMBA_REASON_SLOTS; i++) t.releases_by_reason[i] = 0;
    for (i = 0; i < SIMBA_REASON_COUNT_; i++) {
        t.releases_by_reason[i] = c->by_reason[i];
        if (i != SIMBA_REASON_NONE && i != SIMBA_REASON_STOPPED && i != SIMBA_REASON_UNLOCKED && i != SIMBA_REASON_YIELDED)
            t.step_downs += c->by_reason[i];
    }
    t.attempts = c->attempts;
    t.renewals = c->renewals;
    t.renewals_failed = c->renewals_failed;
    t.errors = c->errors;
    t.held_total_ms = simba__add(c->held_total_ms, t.held_ms);
    t.waits = c->waits;
    t.wait_total_ms = c->wait_total_ms;
    t.wait_max_ms = c->wait_max_ms;
    t.last_error = c->last_error;
    t.last_error_at = c->last_error_at;
    t.quarantines = c->quarantines;
    if (c->last_error_msg) memcpy(t.last_error_msg, c->last_error_msg, sizeof t.last_error_msg);
    else t.last_error_msg[0] = 0;
    memcpy(out, &t, n);
    return SIMBA_OK;
}

/* What a service holds and waits for right now, at loop time now. */
static void simba__stats_live(const simba_service *s, int64_t now, simba_stats *t) {
    if (s->status == SIMBA_RUNNING && (s->flags & SIMBA__F_OWNER) && now < s->lease_end) {
        t->owned++;
        t->held_ms = simba__add(t->held_ms, simba__max(0, now - s->held_since));
    }
    if (s->flags & SIMBA__F_INFLIGHT) t->in_flight++;
    if (s->status == SIMBA_RUNNING && s->quar_until > now) t->quarantine_left_ms = simba__max(t->quarantine_left_ms, s->quar_until - now);
    if (s->status == SIMBA_RUNNING && s->wait_since != SIMBA__NEVER)
        t->waiting_ms = simba__max(t->waiting_ms, simba__max(0, now - s->wait_since));
}

SIMBA_API simba_result simba_service_stats(const simba_service *s, simba_stats *out) {
    simba_stats t;
    if (!simba__svc_ok(s)) return SIMBA_EINVAL;
    memset(&t, 0, sizeof t);
    t.services = 1;
    simba__stats_live(s, simba_now(s->loop), &t);
    return simba__stats_out(&s->cnt, &t, out);
}

SIMBA_API simba_result simba_loop_stats(const simba_loop *l, simba_stats *out) {
    simba_stats t;
    const simba_service *s;
    int64_t now;
    if (!l) return SIMBA_EINVAL;
    now = l->now_fn(l->clock_user);
    memset(&t, 0, sizeof t);
    for (s = l->services; s; s = s->all_next) {
        if (s->flags & SIMBA__F_ZOMBIE) continue;
        t.services++;
        simba__stats_live(s, now, &t);
    }
    return simba__stats_out(&l->cnt, &t, out);
}

SIMBA_API simba_reason simba_locker_last_reason(const simba_locker *lk) {
    return lk && lk->loop && lk->svc ? lk->svc->last_reason : SIMBA_REASON_NONE;
}
SIMBA_API const simba_service *simba_locker_service(const simba_locker *lk) { return lk && lk->loop ? lk->svc : NULL; }

#endif /* SIMBA_CORE_IMPLEMENTATION */

/*
MIT License

Copyright (c) 2026 the simba authors

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT
OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
*/
