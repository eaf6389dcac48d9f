/*
 * simba.h -- distributed mutex and leader election for C, stb-style single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file to create the implementation.
 * Every other file includes it plainly. Backend headers (simba_sql.h, simba_redis.h,
 * simba_zk.h) include this file themselves and follow the same macro.
 *
 * WHAT IT DOES
 *   For each mutex name, at most one contender owns it at a time. Ownership is a lease:
 *     acquired_at     when this ownership began (renewals keep it)
 *     ttl_at          the owner must renew before this
 *     transition_at   ttl_at + transition: only the owner may renew, nobody else may take it
 *   After transition_at anyone may take it. An owner renews at ttl_at - renew_margin; a
 *   non-owner tries at transition_at + jitter in [jitter_min, jitter_max) (default
 *   [-200, 1000) ms, [0, 1000) when transition is 0); with no owner it tries at once; a
 *   waiter that the backend reports as first in line tries exactly at lease end. A release
 *   is pushed to waiters where the backend can.
 *
 *   Every ownership carries a 64-bit fence that strictly increases from one ownership of a
 *   mutex to the next (renewals keep it): pass it to the resource you protect so that it
 *   can reject a stale owner.
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
 *       simba_memory_open(loop, store, &be);                    // or simba_sql_open(...)
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
 *   existing poll/epoll/libuv loop can wake on a push instead of a timer. simba_wait() is the
 *   blocking convenience: poll(2) on those fds up to the next deadline, then simba_poll().
 *   Callbacks fire only inside simba_poll()/simba_wait(), on the caller's thread. Calling
 *   simba_poll()/simba_wait() from a callback returns SIMBA_ECALLBACK. simba_stop() or a free
 *   requested from a callback takes effect when the dispatch returns.
 *
 * THREADS
 *   simba creates no threads (simba_zk's client library does; it only hands events over
 *   through a pipe). A loop is not thread-safe: call every function of one loop, and receive
 *   every callback, on the thread that polls it. Separate loops on separate threads are
 *   independent. There is no global state. A memory store may be shared by loops on
 *   different threads (it has its own lock).
 *
 * BUILDING BLOCKS
 *   simba_contend   a contender: on_acquired / on_released, never for a mere renewal
 *   simba_observe   follows the owner of a mutex without contending (on_owner)
 *   simba_locker_*  blocking lock with timeout (drives the loop), non-blocking form, unlock
 *   simba_scheduler_* leader-gated periodic work, fixed rate or fixed delay
 *   simba_contender_id_host / _random   "counter:pid@host" or 32 random hex digits
 *
 * LIFECYCLE
 *   INITIAL --start--> RUNNING --stop--> STOPPING --(release done)--> INITIAL
 *   (STARTING is seen only inside simba_start). Start or stop from another state returns
 *   SIMBA_ESTATE. A stopped service restarts with the same contender id. Stopping an owner
 *   releases the mutex in the backend and fires on_released exactly once.
 *
 * TIMING DEFAULTS (zero-initialised fields mean the default)
 *   ttl_ms, transition_ms  both 0 -> 10000 / 6000. Otherwise ttl_ms must be > 0 and
 *                          transition_ms >= 0 (0 = no transition window).
 *   renew_margin_ms        0 -> ttl / 3
 *   jitter_min/max_ms      both 0 -> [-200, 1000), or [0, 1000) when transition is 0
 *   min_retry_ms           0 -> 50: a failed attempt never retries sooner than this
 *   backoff_min/max_ms     0 -> 100 / 5000: after a backend error, doubling, randomised
 *
 * NAMES
 *   Mutex names: 1..SIMBA_NAME_MAX bytes of [A-Za-z0-9] and - _ . : @ + = , ; not "." or
 *   "..". The same rule holds on every backend so a name never works on one and fails on
 *   another. Contender ids: 1..SIMBA_ID_MAX printable non-space ASCII bytes.
 *
 * ERRORS
 *   Every public function checks its arguments and returns a simba_result (or, where it
 *   returns a count or a delay, a negative simba_result). simba_strerror() names a code;
 *   simba_backend_errmsg() keeps the backend's own last message.
 *
 * MEMORY AND LOGGING
 *   Define SIMBA_MALLOC / SIMBA_FREE before the implementation to replace malloc/free, or
 *   give an allocator in simba_loop_desc. Steady-state polling allocates nothing. Logging
 *   goes through simba_loop_desc.log (silent by default).
 *
 * BACKENDS
 *   A backend is a simba_backend_vt plus an opaque impl pointer, registered on a loop with
 *   simba_backend_new(). The core submits requests (acquire-or-renew, release, read); the
 *   backend completes each one exactly once, later, with simba_req_done(), and may push
 *   events (release, owner change, connection reset) with simba_backend_event(). See the
 *   comments at simba_backend_vt. The in-memory backend below is the reference.
 *
 * LICENSE: MIT, see the end of this file.
 */
#ifndef SIMBA_H
#define SIMBA_H

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
/* Largest duration accepted anywhere (about 34 years): sums of two never overflow. */
#define SIMBA_MAX_MS ((int64_t)1 << 40)
/* simba_poll() never asks to be called later than this. */
#define SIMBA_MAX_WAIT_MS 60000

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
    SIMBA_ESYS = -12       /* a system call failed (errno kept in the message) */
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
} simba_owner;

/* The pair handed to callbacks: the owner before and after a change. */
typedef struct simba_state {
    const simba_owner *before;
    const simba_owner *after;
} simba_state;

/* Time-based predicates (the original's hasOwner ignored time). */
SIMBA_API int simba_owner_is(const simba_owner *o, const char *id); /* id equal and non-empty */
SIMBA_API int simba_owner_in_ttl(const simba_owner *o, int64_t now);        /* ttl_at > now */
SIMBA_API int simba_owner_in_transition(const simba_owner *o, int64_t now); /* ttl_at <= now <= transition_at */
SIMBA_API int simba_owner_has_owner(const simba_owner *o, int64_t now);     /* id set and transition_at >= now */

/* ---- the loop ---------------------------------------------------------------------- */

typedef enum simba_log_level { SIMBA_LOG_DEBUG, SIMBA_LOG_INFO, SIMBA_LOG_WARN, SIMBA_LOG_ERROR } simba_log_level;

typedef struct simba_loop_desc {
    /* Monotonic clock in ms; default CLOCK_MONOTONIC. Inject for exact tests. */
    int64_t (*now_ms)(void *user);
    void *clock_user;
    /* Uniform 32-bit random numbers; default a per-loop xorshift seeded from the clock,
       pid and address. Inject for exact tests. */
    uint32_t (*random)(void *user);
    void *random_user;
    /* Allocator; default SIMBA_MALLOC / SIMBA_FREE. Both or neither. */
    void *(*alloc)(void *user, size_t size);
    void (*free)(void *user, void *ptr);
    void *alloc_user;
    /* Log hook; default silent. */
    void (*log)(void *user, simba_log_level level, const char *msg);
    void *log_user;
    simba_log_level log_level; /* lowest level passed to log (default DEBUG when log set) */
} simba_loop_desc;

SIMBA_API simba_result simba_loop_new(const simba_loop_desc *desc, simba_loop **out);
/* Frees every service, locker, scheduler and backend of the loop (owners release, best
   effort, without waiting). From inside a callback it is deferred until dispatch returns. */
SIMBA_API simba_result simba_loop_free(simba_loop *loop);
SIMBA_API int64_t simba_now(simba_loop *loop);

/* Non-blocking step: checks simba's fds with a zero timeout, processes ready I/O, runs due
   timers and state machines, dispatches callbacks. Returns the ms until it wants to be
   called again (0..SIMBA_MAX_WAIT_MS), or a negative simba_result. */
SIMBA_API int64_t simba_poll(simba_loop *loop);
/* The same, for a caller that has already polled the fds from simba_fds() itself: hands in
   the revents it got (n may be 0: then no I/O is attempted beyond what timers need). */
SIMBA_API int64_t simba_poll_ready(simba_loop *loop, const struct pollfd *ready, int n);
/* Writes up to cap descriptors worth waiting on. Returns how many there are (may exceed
   cap: call again with more room), or a negative simba_result. */
SIMBA_API int simba_fds(simba_loop *loop, struct pollfd *out, int cap);
/* Blocking convenience: poll(2) on simba_fds() until the next deadline or max_ms
   (negative = no cap), then simba_poll(). */
SIMBA_API simba_result simba_wait(simba_loop *loop, int64_t max_ms);

/* ---- contenders and observers -------------------------------------------------------- */

typedef enum simba_status { SIMBA_INITIAL, SIMBA_STARTING, SIMBA_RUNNING, SIMBA_STOPPING } simba_status;

typedef void (*simba_state_fn)(simba_service *svc, const simba_state *state, void *user_data);

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
/* RUNNING -> STOPPING: local ownership ends now (on_released fires at the next dispatch),
   the release is sent once any in-flight request is answered, then INITIAL. */
SIMBA_API simba_result simba_stop(simba_service *svc);
/* Stops if needed and frees. The release still goes out; the handle is invalid at once. */
SIMBA_API simba_result simba_service_free(simba_service *svc);
SIMBA_API simba_status simba_service_status(const simba_service *svc);
SIMBA_API int simba_is_owner(const simba_service *svc);
SIMBA_API uint64_t simba_fence(const simba_service *svc); /* 0 when not owner */
SIMBA_API simba_result simba_owner_get(const simba_service *svc, simba_owner *out); /* latest view */
SIMBA_API const char *simba_service_contender_id(const simba_service *svc);
SIMBA_API const char *simba_service_mutex(const simba_service *svc);
SIMBA_API void *simba_service_user_data(const simba_service *svc);

/* ---- locker ------------------------------------------------------------------------ */

typedef struct simba_locker_desc {
    const char *mutex;
    const char *contender_id; /* NULL = host id */
    int64_t ttl_ms, transition_ms; /* see TIMING DEFAULTS */
    /* optional: the lock was lost while held (lease not renewed in time) */
    void (*on_lost)(simba_locker *lk, void *user_data);
    void *user_data;
} simba_locker_desc;

SIMBA_API simba_result simba_locker_new(simba_loop *loop, simba_backend *be, const simba_locker_desc *desc, simba_locker **out);
/* Blocks, driving the loop, until owned (SIMBA_OK) or timeout_ms passes (SIMBA_ETIMEDOUT;
   timeout_ms < 0 = no limit). Already held or pending: SIMBA_ESTATE. */
SIMBA_API simba_result simba_locker_lock(simba_locker *lk, int64_t timeout_ms);
/* Non-blocking form: starts contending if idle; SIMBA_OK once held, SIMBA_EAGAIN while
   pending. Call again from the tick loop. */
SIMBA_API simba_result simba_locker_try(simba_locker *lk);
/* Releases (or gives up a pending try). Not held and not pending: SIMBA_ESTATE. */
SIMBA_API simba_result simba_locker_unlock(simba_locker *lk);
SIMBA_API int simba_locker_held(const simba_locker *lk);
SIMBA_API uint64_t simba_locker_fence(const simba_locker *lk);
SIMBA_API simba_result simba_locker_free(simba_locker *lk);
/* Shorthands: new + lock with default timing; unlock + free. */
SIMBA_API simba_result simba_lock(simba_loop *loop, simba_backend *be, const char *mutex, int64_t timeout_ms, simba_locker **out);
SIMBA_API simba_result simba_unlock(simba_locker *lk);

/* ---- scheduler --------------------------------------------------------------------- */

typedef enum simba_schedule_strategy { SIMBA_FIXED_DELAY, SIMBA_FIXED_RATE } simba_schedule_strategy;

typedef struct simba_scheduler_desc {
    const char *mutex;
    const char *contender_id; /* NULL = host id */
    int64_t ttl_ms, transition_ms; /* see TIMING DEFAULTS */
    simba_schedule_strategy strategy;
    int64_t initial_delay_ms; /* from the moment leadership is gained, >= 0 */
    int64_t period_ms;        /* > 0 */
    void (*work)(simba_scheduler *s, void *user_data); /* required; runs inside simba_poll */
    void *user_data;
} simba_scheduler_desc;

SIMBA_API simba_result simba_scheduler_new(simba_loop *loop, simba_backend *be, const simba_scheduler_desc *desc, simba_scheduler **out);
SIMBA_API simba_result simba_scheduler_start(simba_scheduler *s);
SIMBA_API simba_result simba_scheduler_stop(simba_scheduler *s);
SIMBA_API int simba_scheduler_running(const simba_scheduler *s);
SIMBA_API int simba_scheduler_is_leader(const simba_scheduler *s);
SIMBA_API simba_result simba_scheduler_free(simba_scheduler *s);

/* ---- contender ids and names ------------------------------------------------------- */

/* "counter:pid@host": counter per loop (starting at a random offset so that two loops of
   one process do not collide), host = a non-loopback IPv4 address, else the host name. */
SIMBA_API simba_result simba_contender_id_host(simba_loop *loop, char *buf, size_t cap);
/* 32 lowercase hex digits from the loop's random source. */
SIMBA_API simba_result simba_contender_id_random(simba_loop *loop, char *buf, size_t cap);
SIMBA_API simba_result simba_name_check(const char *mutex);
SIMBA_API simba_result simba_id_check(const char *contender_id);

/* ---- backend interface ------------------------------------------------------------- */

typedef enum simba_op {
    SIMBA_OP_ACQUIRE = 1, /* acquire, or renew when the contender already owns it */
    SIMBA_OP_RELEASE = 2, /* release if the contender owns it; no-op otherwise */
    SIMBA_OP_READ = 3     /* report the current owner (contender is "") */
} simba_op;

/* A request, owned by the core. Its fields stay valid until simba_req_done(). */
struct simba_req {
    simba_op op;
    const char *mutex;
    const char *contender;
    int64_t ttl_ms, transition_ms;
    int64_t sent_at;    /* loop clock when submitted */
    void *backend_data; /* free for the backend's use while the request is in flight */
    simba_req *next_;   /* free for the backend's use as a list link while in flight */
    /* private to the core */
    simba_service *svc_;
    uint64_t gen_;
    simba_req *done_next_;
    int done_;
};

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
} simba_reply;

typedef enum simba_event_kind {
    SIMBA_EV_RELEASED = 1, /* mutex was released: waiters (or the one named) try now */
    SIMBA_EV_OWNER = 2,    /* owner information pushed (owner fields of the reply) */
    SIMBA_EV_RESET = 3,    /* server state may be gone (reconnect): re-contend / renew now */
    SIMBA_EV_LOST = 4      /* ownership is gone (session expired): owners step down now */
} simba_event_kind;

typedef struct simba_backend_vt {
    const char *name;
    /* Start a request. Return SIMBA_OK and complete it later (or from inside this call)
       with simba_req_done(); or return an error and do not complete it. Must not block. */
    simba_result (*submit)(void *impl, simba_req *req);
    /* Optional: descriptors to wait on. Return count written (<= cap) or the needed count. */
    int (*fds)(void *impl, struct pollfd *out, int cap);
    /* Optional: do ready I/O and due timers. ready may be NULL (tick mode: check yourself
       without blocking). Called on every simba_poll. */
    void (*process)(void *impl, const struct pollfd *ready, int n, int64_t now);
    /* Optional: absolute loop time of the backend's next timer, or INT64_MAX. */
    int64_t (*deadline)(void *impl);
    /* Optional: first / last service for a mutex on this backend (subscribe, set watches). */
    simba_result (*watch)(void *impl, const char *mutex);
    void (*unwatch)(void *impl, const char *mutex);
    /* Complete every pending request (rc SIMBA_ECLOSED), then free impl. */
    void (*destroy)(void *impl);
} simba_backend_vt;

SIMBA_API simba_result simba_backend_new(simba_loop *loop, const simba_backend_vt *vt, void *impl, simba_backend **out);
/* SIMBA_EBUSY while services, lockers or schedulers still use it. */
SIMBA_API simba_result simba_backend_free(simba_backend *be);
SIMBA_API const char *simba_backend_errmsg(const simba_backend *be);
SIMBA_API simba_loop *simba_backend_loop(const simba_backend *be);
SIMBA_API void *simba_backend_impl(const simba_backend *be);
/* Complete a request exactly once. Safe from inside submit/process; handled in the poll. */
SIMBA_API void simba_req_done(simba_req *req, const simba_reply *reply);
/* Push an event. mutex NULL = every mutex of this backend; contender NULL = every service
   of the mutex; owner used by SIMBA_EV_OWNER. */
SIMBA_API void simba_backend_event(simba_backend *be, simba_event_kind kind, const char *mutex, const char *contender, const simba_reply *owner);
/* The loop's allocator and log, for backends. */
SIMBA_API void *simba_alloc(simba_loop *loop, size_t size);
SIMBA_API void simba_free(simba_loop *loop, void *ptr);
SIMBA_API void simba_log(simba_loop *loop, simba_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- in-memory backend -------------------------------------------------------------- */

/* A store is the "server": several loops (even on different threads) may open it. */
typedef struct simba_memstore simba_memstore;
typedef struct simba_memstore_desc {
    int64_t (*now_ms)(void *user); /* the store's clock; default CLOCK_MONOTONIC */
    void *clock_user;
} simba_memstore_desc;

SIMBA_API simba_result simba_memstore_new(const simba_memstore_desc *desc, simba_memstore **out);
/* SIMBA_EBUSY while backends are open on it. */
SIMBA_API simba_result simba_memstore_free(simba_memstore *st);
/* Inspect the stored owner of a mutex (store clock: remaining durations in the reply). */
SIMBA_API simba_result simba_memstore_read(simba_memstore *st, const char *mutex, simba_reply *out, char *owner_buf, size_t cap);

/* One client of a store, on one loop. */
SIMBA_API simba_result simba_memory_open(simba_loop *loop, simba_memstore *st, simba_backend **out);

/* Fault controls of one client (apply to requests submitted afterwards; hang and delay
   also to queued ones). All zero = healthy. */
typedef struct simba_memory_fault {
    int fail;         /* answer every request with SIMBA_EBACKEND */
    int hang;         /* stop answering: requests wait until hang is cleared */
    int64_t delay_ms; /* answer this long after submission */
    int drop_events;  /* do not deliver pushed events to this client */
} simba_memory_fault;
SIMBA_API simba_result simba_memory_fault_set(simba_backend *be, const simba_memory_fault *fault);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_H */
