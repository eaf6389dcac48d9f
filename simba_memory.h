/*
 * simba_memory.h v0.1.0 -- in-memory backend for simba (tests, simulations, one process),
 * stb-style single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file; the same macro instantiates simba.h,
 * which this header includes itself. Link with -lpthread.
 *
 *     simba_memstore *st;  simba_backend *be;
 *     simba_memstore_new(NULL, &st);         // the "server": loops on any thread may share it
 *     simba_memory_open(loop, st, &be);       // one client of it, on one loop
 *
 * COMPILE-TIME OPTIONS (define before the implementation's include)
 *   SIMBA_API, SIMBA_MALLOC / SIMBA_FREE   as in simba.h (the store allocates with the latter)
 *   SIMBA_MEMORY_IMPLEMENTATION            this header and the core only
 *
 * The store is the reference implementation of the backend contract (simba__mexec): the
 * fairness queue, renew vs new acquisition, live_ms, the owner's value (stored with a new
 * grant, replaced by SET_VALUE under the owner's fence, cleared with the ownership) and
 * YIELD (the release and the yielder's place at the back in one step), semaphores and
 * read-write locks (simba__mgrantable: the grant rule; a holders set beside the exclusive
 * owner record, one fence counter and one queue per name). Fault injection (simba_memory_fault)
 * makes a client fail, hang, answer late or miss pushes; a client closed while requests are
 * delayed delivers them to the store first, as a server gets what a departed client sent.
 * simba_memstore_lose() makes the store forget its records, and the store then keeps the
 * data-loss rule (below). Grants are what was asked (SIMBA_LEASE_ASKED); it raises no
 * SIMBA_EV_DISCONNECTED (there is no connection).
 *
 * DATA LOSS (the rule every store that can forget keeps; simba_redis.h DATA LOSS)
 *     simba_memstore_lose ---> records and queues gone; no new ownership until every lease
 *                              granted before has ended (the longest ttl + transition the
 *                              store granted, or the asker's, if longer): SIMBA_EBACKEND
 *     new ownership after ---> fence above every fence handed out before the loss
 *   An owner finds its record gone at its next renewal and steps down inside its own ttl,
 *   before the quarantine ends.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  public declarations   >>impl  the implementation   >>open  the constructor
 *   >>process  the work of one poll   >>close  teardown
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together).
 */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_MEMORY_IMPLEMENTATION)
#define SIMBA_MEMORY_IMPLEMENTATION
#endif
/* Its implementation uses the core's private helpers: the core's goes into the same file. */
#if defined(SIMBA_MEMORY_IMPLEMENTATION) && !defined(SIMBA_CORE_IMPLEMENTATION)
#define SIMBA_CORE_IMPLEMENTATION
#endif
#ifndef SIMBA_MEMORY_H
#define SIMBA_MEMORY_H

#include "simba.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A store is the "server": several loops (even on different threads) may open it. */
typedef struct simba_memstore simba_memstore;
/* >>api */
typedef struct simba_memstore_desc {
    int64_t (*now_ms)(void *user); /* the store's clock; default CLOCK_MONOTONIC */
    void *clock_user;
} simba_memstore_desc;

SIMBA_API simba_result simba_memstore_new(const simba_memstore_desc *desc, simba_memstore **out);
/* SIMBA_EBUSY while backends are open on it. */
SIMBA_API simba_result simba_memstore_free(simba_memstore *st);
/* Data loss (a restart without persistence, FLUSHALL, a promoted replica): every owner
   record and wait queue is forgotten; see DATA LOSS for what the store does after it. */
SIMBA_API simba_result simba_memstore_lose(simba_memstore *st);

/* The fenced write, for users' unit tests: write(user) runs (under the store's lock, so no
   grant interleaves) only if fence holds a live lease of mutex name by the store's clock,
   the rule a grant keeps (see simba_pg.h FENCED WRITES). write may be NULL: a check only.
   SIMBA_OK (written); SIMBA_EFENCE refused: errbuf says why (not the owner's fence, the
   fence moved on, the lease is over, released); SIMBA_EINVAL: NULL store, empty or bad
   name, fence 0. errbuf may be NULL. write must not call into the store. */
SIMBA_API simba_result simba_memory_check_fence(simba_memstore *st, const char *name, uint64_t fence,
                                                void (*write)(void *user), void *user, char *errbuf, size_t errbuf_cap);

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
#endif /* SIMBA_MEMORY_H */

/* >>impl */
/* ==================================================================================== */
/*                                   IMPLEMENTATION                                     */
/* ==================================================================================== */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_MEMORY_IMPLEMENTATION)
#define SIMBA_MEMORY_IMPLEMENTATION
#endif
#if defined(SIMBA_MEMORY_IMPLEMENTATION) && !defined(SIMBA__MEMORY_IMPLEMENTED)
#define SIMBA__MEMORY_IMPLEMENTED
#include "simba.h" /* the core's implementation, when this file has not got it yet */

#include <pthread.h>

/* The store plays the server: it keeps the truth under its own lock (loops on other
   threads may share it) and pushes events into each client's inbox, waking that client's
   loop through a pipe. */

typedef struct simba__mclient simba__mclient;

typedef struct simba__mwait {
    char id[SIMBA_ID_MAX + 1];
    simba__mclient *client;
    int64_t expires;
    int shared; /* a reader */
} simba__mwait;

/* A holder beside the exclusive owner record: a reader, or one permit of a semaphore. */
typedef struct simba__mhold {
    char id[SIMBA_ID_MAX + 1];
    int shared;
    int64_t acquired_at, ttl_at, transition_at;
    uint64_t fence;
    size_t value_len;
    unsigned char value[SIMBA_VALUE_MAX];
} simba__mhold;

/* A name: the exclusive owner record (a mutex's owner, a read-write lock's writer), the
   holders set (readers, a semaphore's permits), one fence counter and one wait queue. */
typedef struct simba__mentry {
    simba__hnode h;
    char name[SIMBA_NAME_MAX + 1];
    char owner[SIMBA_ID_MAX + 1];
    int64_t acquired_at, ttl_at, transition_at;
    uint64_t fence; /* of the latest grant, the owner's or a holder's; never goes back */
    simba__mwait *w;
    int nw, capw;
    size_t value_len; /* the owner's value; 0 with no owner */
    unsigned char value[SIMBA_VALUE_MAX];
    simba__mhold *hs; /* the holders set, oldest grant first */
    int nh, caph;
    int permits; /* recorded while anyone holds or waits (1 for a mutex or a read-write lock) */
} simba__mentry;

typedef struct simba__mevent {
    struct simba__mevent *next;
    simba_event_kind kind;
    int has_contender;
    char mutex[SIMBA_NAME_MAX + 1];
    char contender[SIMBA_ID_MAX + 1];
    char owner[SIMBA_ID_MAX + 1];
    simba_reply rep;
    unsigned char value[SIMBA_VALUE_MAX]; /* rep.value's storage */
} simba__mevent;

typedef struct simba__mwatch {
    simba__hnode h;
    int count;
    char name[SIMBA_NAME_MAX + 1];
} simba__mwatch;

struct simba__mclient {
    simba_memstore *st;
    simba_loop *loop;
    simba_backend *be;
    simba__mclient *next, *prev;
    simba__htab watched;                   /* under st->lock */
    simba__mevent *inbox, *inbox_tail;     /* under st->lock */
    int pipefd[2];
    simba_req *pend, *pend_tail;           /* loop thread only */
    simba_memory_fault fault;              /* loop thread only */
};

struct simba_memstore {
    pthread_mutex_t lock;
    int64_t (*now_fn)(void *);
    void *clock_user;
    simba__htab entries;
    simba__mclient *clients;
    /* kept outside the records, so a loss forgets neither (DATA LOSS) */
    int64_t lost_at;      /* store time of the latest loss, INT64_MIN when none */
    int64_t max_lease;    /* longest ttl + transition granted or renewed */
    uint64_t fence_max;   /* highest fence handed out */
    uint64_t fence_floor; /* every new fence is above this: fence_max at the latest loss */
};

static void *simba__malloc_u(void *u, size_t n) { (void)u; return SIMBA_MALLOC(n); }
static void simba__free_u(void *u, void *p) { (void)u; SIMBA_FREE(p); }

SIMBA_API simba_result simba_memstore_new(const simba_memstore_desc *d, simba_memstore **out) {
    simba_memstore *st;
    if (!out) return SIMBA_EINVAL;
    *out = NULL;
    st = (simba_memstore *)simba__zalloc(NULL, sizeof *st);
    if (!st) return SIMBA_ENOMEM;
    if (pthread_mutex_init(&st->lock, NULL) != 0) { SIMBA_FREE(st); return SIMBA_ESYS; }
    st->now_fn = d && d->now_ms ? d->now_ms : simba__sys_now;
    st->clock_user = d ? d->clock_user : NULL;
    st->lost_at = INT64_MIN;
    *out = st;
    return SIMBA_OK;
}

SIMBA_API simba_result simba_memstore_free(simba_memstore *st) {
    size_t i;
    if (!st) return SIMBA_EINVAL;
    pthread_mutex_lock(&st->lock);
    if (st->clients) { pthread_mutex_unlock(&st->lock); return SIMBA_EBUSY; }
    pthread_mutex_unlock(&st->lock);
    for (i = 0; i < st->entries.nb; i++) {
        simba__hnode *n = st->entries.b[i], *nn;
        for (; n; n = nn) {
            nn = n->hnext;
            SIMBA_FREE(((simba__mentry *)n)->w);
            SIMBA_FREE(((simba__mentry *)n)->hs);
            SIMBA_FREE(n);
        }
    }
    SIMBA_FREE(st->entries.b);
    pthread_mutex_destroy(&st->lock);
    SIMBA_FREE(st);
    return SIMBA_OK;
}

static int simba__mlive(const simba__mentry *e, int64_t now) { return e->owner[0] && e->transition_at >= now; }

/* The holders set's entry of id, or -1. */
static int simba__mhold_find(const simba__mentry *e, const char *id) {
    int i;
    for (i = 0; id && i < e->nh; i++)
        if (strcmp(e->hs[i].id, id) == 0) return i;
    return -1;
}
static void simba__mhold_remove(simba__mentry *e, int i) {
    memmove(&e->hs[i], &e->hs[i + 1], (size_t)(e->nh - i - 1) * sizeof *e->hs);
    e->nh--;
}
/* A holder's permit frees at its transition end, as a mutex's ownership does. */
static void simba__mhold_purge(simba__mentry *e, int64_t now) {
    int i;
    for (i = 0; i < e->nh;)
        if (e->hs[i].transition_at < now) simba__mhold_remove(e, i); else i++;
}
static int simba__mholders(const simba__mentry *e, int64_t now) { return e->nh + simba__mlive(e, now); }

/* The answer for contender (NULL: an observer): its own holding when it holds, else the
   holder whose permit frees first, which the waiter times its next ask by. */
static void simba__mreply(const simba__mentry *e, int64_t now, const char *contender, simba_reply *rep) {
    const simba__mhold *h = NULL;
    int i;
    simba__reply_none(rep);
    if (!e) return;
    rep->holders = simba__mholders(e, now);
    if (!(simba__mlive(e, now) && contender && strcmp(e->owner, contender) == 0)) {
        if ((i = simba__mhold_find(e, contender)) >= 0) {
            h = &e->hs[i];
        } else {
            for (i = 0; i < e->nh; i++)
                if (!h || e->hs[i].transition_at < h->transition_at) h = &e->hs[i];
            if (h && simba__mlive(e, now) && e->transition_at <= h->transition_at) h = NULL;
        }
    }
    if (h) {
        rep->owner = h->id;
        rep->ttl_left_ms = h->ttl_at - now;
        rep->transition_left_ms = h->transition_at - now;
        rep->held_ms = now - h->acquired_at;
        rep->fence = h->fence;
        rep->value = h->value_len ? h->value : NULL; /* valid under the store's lock: copied */
        rep->value_len = h->value_len;
    } else if (simba__mlive(e, now)) {
        rep->owner = e->owner;
        rep->ttl_left_ms = e->ttl_at - now;
        rep->transition_left_ms = e->transition_at - now;
        rep->held_ms = now - e->acquired_at;
        rep->fence = e->fence;
        rep->value = e->value_len ? e->value : NULL;
        rep->value_len = e->value_len;
    }
}

/* Queue an event for one client (store locked). Allocation failure drops it: pushes are
   hints, timers remain. */
static void simba__mpost(simba__mclient *c, simba_event_kind kind, const char *mutex, const char *contender, const simba_reply *rep) {
    simba__mevent *ev = (simba__mevent *)SIMBA_MALLOC(sizeof *ev);
    char b = 1;
    ssize_t w;
    if (!ev) return;
    memset(ev, 0, offsetof(simba__mevent, value)); /* the value's bytes are written as needed */
    ev->kind = kind;
    simba__copy(ev->mutex, sizeof ev->mutex, mutex);
    if (contender) { ev->has_contender = 1; simba__copy(ev->contender, sizeof ev->contender, contender); }
    if (rep) {
        ev->rep = *rep;
        simba__copy(ev->owner, sizeof ev->owner, rep->owner);
        ev->rep.owner = ev->owner;
        if (rep->value_len) memcpy(ev->value, rep->value, rep->value_len);
        ev->rep.value = rep->value_len ? ev->value : NULL;
    }
    if (c->inbox_tail) c->inbox_tail->next = ev; else c->inbox = ev;
    c->inbox_tail = ev;
    w = write(c->pipefd[1], &b, 1); /* full pipe = already awake */
    (void)w;
}

static void simba__mbroadcast(simba_memstore *st, const simba__mentry *e, int64_t now) {
    simba__mclient *c;
    simba_reply rep;
    simba__mreply(e, now, NULL, &rep);
    for (c = st->clients; c; c = c->next)
        if (simba__hfind(&c->watched, e->name)) simba__mpost(c, SIMBA_EV_OWNER, e->name, NULL, &rep);
}

static void simba__mwait_remove(simba__mentry *e, int i) {
    memmove(&e->w[i], &e->w[i + 1], (size_t)(e->nw - i - 1) * sizeof *e->w);
    e->nw--;
}
static void simba__mwait_purge(simba__mentry *e, int64_t now) {
    int i;
    for (i = 0; i < e->nw;)
        if (e->w[i].expires < now) simba__mwait_remove(e, i); else i++;
}
static int simba__mwait_find(const simba__mentry *e, const char *id) {
    int i;
    for (i = 0; i < e->nw; i++)
        if (strcmp(e->w[i].id, id) == 0) return i;
    return -1;
}

/* Waiting (store locked): join the line (arrival order), or refresh our place in it. */
static void simba__mwait_join(simba__mclient *c, simba__mentry *e, const simba_req *r, int64_t now) {
    int i = simba__mwait_find(e, r->contender);
    int64_t exp = simba__add(now, r->live_ms);
    if (i >= 0) {
        e->w[i].expires = exp;
        e->w[i].shared = r->shared != 0;
    } else {
        if (e->nw == e->capw) {
            int cap = e->capw ? e->capw * 2 : 4;
            simba__mwait *w = (simba__mwait *)SIMBA_MALLOC((size_t)cap * sizeof *w);
            if (w) {
                if (e->nw) memcpy(w, e->w, (size_t)e->nw * sizeof *w);
                SIMBA_FREE(e->w);
                e->w = w;
                e->capw = cap;
            }
        }
        if (e->nw < e->capw) {
            simba__copy(e->w[e->nw].id, sizeof e->w[0].id, r->contender);
            e->w[e->nw].client = c;
            e->w[e->nw].expires = exp;
            e->w[e->nw].shared = r->shared != 0;
            e->nw++;
        }
    }
}

#ifdef SIMBA_MEMORY_TEST_PLANT
/* Test only (tests/kit_diff.c): on names "plant-..." a reader is granted beside a waiting
   writer, the divergence the differential test must catch. */
#define SIMBA__MPLANT(e) (strncmp((e)->name, "plant-", 6) == 0)
#else
#define SIMBA__MPLANT(e) 0
#endif
/* The grant rule (SEMAPHORES AND READ-WRITE LOCKS in simba.h), for a requester that is not
   a holder, at place p of the queue (p = nw: it would join the back), after the purges. */
static int simba__mgrantable(const simba__mentry *e, int p, int shared, int64_t now) {
    int i, writer_ahead = 0;
    for (i = 0; i < p && i < e->nw; i++) writer_ahead |= !e->w[i].shared && !SIMBA__MPLANT(e);
    return simba__grantable(e->permits, simba__mholders(e, now), simba__mlive(e, now), p, shared, writer_ahead);
}

/* A holding ended (store locked): push to each waiter it frees (they stay in line until
   they ask), then tell the watchers. */
static void simba__mpush_freed(simba_memstore *st, simba__mentry *e, int64_t now) {
    int i;
    for (i = 0; i < e->nw && simba__mgrantable(e, i, e->w[i].shared, now); i++)
        simba__mpost(e->w[i].client, SIMBA_EV_RELEASED, e->name, e->w[i].id, NULL);
    simba__mbroadcast(st, e, now);
}

/* The owner's record ends (store locked): value with it. */
static void simba__mfree(simba_memstore *st, simba__mentry *e, int64_t now) {
    e->owner[0] = 0;
    e->ttl_at = e->transition_at = 0;
    e->value_len = 0;
    simba__mpush_freed(st, e, now);
}
static void simba__mhold_free(simba_memstore *st, simba__mentry *e, int i, int64_t now) {
    simba__mhold_remove(e, i);
    simba__mpush_freed(st, e, now);
}

/* A holding's yield passes only when its permit frees a waiter the holders held back: the
   first other waiter is granted once the holding is gone (a semaphore's next waiter; for a
   reader, the last one, the writer at the head). Giving it up otherwise would only cost
   the holder its place. */
static int simba__mhold_frees(simba__mentry *e, const char *self, int64_t now) {
    int i, ok;
    for (i = 0; i < e->nw && strcmp(e->w[i].id, self) == 0; i++) {
    }
    if (i == e->nw) return 0;
    e->nh--; /* as if the holding were gone */
    ok = simba__mgrantable(e, 0, e->w[i].shared, now);
    e->nh++;
    return ok;
}

/* SET_VALUE and YIELD (store locked): only for the owner that still holds r->fence. 1 when
   a yield passed it on, 0 when done otherwise; -1 with rep failed (SIMBA_EFENCE) when the
   fence does not hold. */
static int simba__mowner_op(simba_memstore *st, simba__mclient *c, simba__mentry *e, const simba_req *r, int64_t now,
                            simba_reply *rep) {
    int i, k = e ? simba__mhold_find(e, r->contender) : -1;
    if (k >= 0 && e->hs[k].fence == r->fence) { /* a reader or a permit: its own holding */
        simba__mhold *h = &e->hs[k];
        if (r->op == SIMBA_OP_SET_VALUE) {
            h->value_len = r->value_len;
            if (r->value_len) memcpy(h->value, r->value, r->value_len);
            simba__mbroadcast(st, e, now);
            return 0;
        }
        if (!simba__mhold_frees(e, r->contender, now)) return 0; /* kept: it would free nobody */
        i = simba__mwait_find(e, r->contender);
        if (i >= 0) simba__mwait_remove(e, i);
        simba__mhold_free(st, e, k, now);
        simba__mwait_join(c, e, r, now);
        return 1;
    }
    if (!e || !simba__mlive(e, now) || strcmp(e->owner, r->contender) != 0 || e->fence != r->fence) {
        simba__reply_fail(rep, SIMBA_EFENCE, r->op == SIMBA_OP_YIELD
                                                 ? "memory store: yield refused: the contender no longer holds the mutex with that fence"
                                                 : "memory store: value refused: the contender no longer holds the mutex with that fence");
        return -1;
    }
    if (r->op == SIMBA_OP_SET_VALUE) { /* fence and times stay */
        e->value_len = r->value_len;
        if (r->value_len) memcpy(e->value, r->value, r->value_len);
        simba__mbroadcast(st, e, now);
        return 0;
    }
    for (i = 0; i < e->nw && strcmp(e->w[i].id, r->contender) == 0; i++) {
    }
    if (i == e->nw) return 0; /* nobody else waits: kept, nothing changes */
    /* Passed: released as RELEASE does, and the yielder queued behind everyone. */
    i = simba__mwait_find(e, r->contender);
    if (i >= 0) simba__mwait_remove(e, i);
    simba__mfree(st, e, now);
    simba__mwait_join(c, e, r, now);
    return 1;
}

/* After a loss a lease granted before it may still be held: no new grant until the longest
   one has ended. */
static int simba__mquarantined(const simba_memstore *st, const simba_req *r, int64_t now) {
    return now < simba__add(st->lost_at, simba__max(st->max_lease, simba__add(r->ttl_ms, r->transition_ms)));
}

/* ACQUIRE by a reader or for a permit (store locked): the holders set's side of
   simba__macquire. k: the requester's entry in the set or -1; i: its place in line or -1. */
static int simba__macquire_set(simba__mclient *c, simba__mentry *e, const simba_req *r, int64_t now, int k, int i) {
    simba_memstore *st = c->st;
    int fresh = k >= 0 ? !r->renew : simba__mgrantable(e, i >= 0 ? i : e->nw, r->shared != 0, now);
    simba__mhold *h;
    /* a renewal whose holding has ended (late, or lost with the store) is no new grant and
       takes no place: the owner steps down and asks anew (refused as a grant is in a
       quarantine) */
    if (r->renew && k < 0) return simba__mquarantined(st, r, now) ? -1 : 0;
    if (fresh && simba__mquarantined(st, r, now)) return -1;
    if (fresh || k >= 0) st->max_lease = simba__max(st->max_lease, simba__add(r->ttl_ms, r->transition_ms));
    if (!fresh && k < 0) {
        simba__mwait_join(c, e, r, now);
        return 0;
    }
    if (k >= 0 && !fresh) { /* renewal: fence and acquired_at stay */
        e->hs[k].ttl_at = now + r->ttl_ms;
        e->hs[k].transition_at = e->hs[k].ttl_at + r->transition_ms;
        return 0;
    }
    if (k >= 0) simba__mhold_remove(e, k); /* a holder asking anew: a new grant, at the end */
    if (e->nh == e->caph) {
        int cap = e->caph ? e->caph * 2 : 2;
        simba__mhold *n = (simba__mhold *)SIMBA_MALLOC((size_t)cap * sizeof *n);
        if (!n) return -2;
        if (e->nh) memcpy(n, e->hs, (size_t)e->nh * sizeof *n);
        SIMBA_FREE(e->hs);
        e->hs = n;
        e->caph = cap;
    }
    h = &e->hs[e->nh++];
    memset(h, 0, offsetof(simba__mhold, value));
    simba__copy(h->id, sizeof h->id, r->contender);
    h->shared = r->shared != 0;
    /* one counter per name: above every earlier grant's, and after a loss every earlier one */
    e->fence = (e->fence > st->fence_floor ? e->fence : st->fence_floor) + 1;
    if (e->fence > st->fence_max) st->fence_max = e->fence;
    h->fence = e->fence;
    h->acquired_at = now;
    h->ttl_at = now + r->ttl_ms;
    h->transition_at = h->ttl_at + r->transition_ms;
    h->value_len = r->value_len;
    if (r->value_len) memcpy(h->value, r->value, r->value_len);
    if (i >= 0) simba__mwait_remove(e, i);
    simba__mbroadcast(st, e, now);
    return 0;
}

/* ACQUIRE against an entry (store locked): a renewal, a new ownership, or a place in line;
   -1 (nothing changed) while a data-loss quarantine lasts, -2 out of memory. */
static int simba__macquire(simba__mclient *c, simba__mentry *e, const simba_req *r, int64_t now) {
    simba_memstore *st = c->st;
    int i, mine, turn, fresh, k = simba__mhold_find(e, r->contender);
    /* A holder's id back in the other mode (a new incarnation, as a writer where it read or
       the reverse): its old holding ends, and it asks as anyone does. */
    if (k >= 0 && !r->renew && r->permits <= 1 && !r->shared) {
        simba__mhold_free(st, e, k, now);
        k = -1;
    }
    if (simba__mlive(e, now) && strcmp(e->owner, r->contender) == 0 && !r->renew && r->shared) simba__mfree(st, e, now);
    i = simba__mwait_find(e, r->contender);
    mine = simba__mlive(e, now) && strcmp(e->owner, r->contender) == 0;
    if (!mine && (r->permits > 1 || r->shared || k >= 0)) return simba__macquire_set(c, e, r, now, k, i);
    /* Fairness: a free mutex goes to the oldest live waiter; anyone else joins the line
       (a releaser asking again at once included), so nobody overtakes a waiter. A writer
       also needs the holders set empty (no reader holds). */
    turn = e->nw == 0 || i == 0;
    /* A renewal is granted only as one: one whose lease has ended (late, or lost with the
       store) takes nothing and no place: the owner steps down and asks anew (refused as a
       grant is in a quarantine). */
    if (r->renew && !mine) return simba__mquarantined(st, r, now) ? -1 : 0;
    fresh = !r->renew && (mine || (!simba__mlive(e, now) && turn && e->nh == 0));
    if (fresh && simba__mquarantined(st, r, now)) return -1;
    if (fresh || (mine && r->renew)) st->max_lease = simba__max(st->max_lease, simba__add(r->ttl_ms, r->transition_ms));
    if (mine && r->renew) {
        e->ttl_at = now + r->ttl_ms; /* renewal: fence and acquired_at stay */
        e->transition_at = e->ttl_at + r->transition_ms;
    } else if (fresh) {
        /* A new ownership, also for the stored owner that stepped down locally: its
           next tenure needs a fence above the one its late writes may still carry. */
        simba__copy(e->owner, sizeof e->owner, r->contender);
        /* above the record's last fence and, after a loss, above every earlier one */
        e->fence = (e->fence > st->fence_floor ? e->fence : st->fence_floor) + 1;
        if (e->fence > st->fence_max) st->fence_max = e->fence;
        e->acquired_at = now;
        e->ttl_at = now + r->ttl_ms;
        e->transition_at = e->ttl_at + r->transition_ms;
        /* the new owner's value, in the same step as the grant (a renewal keeps it) */
        e->value_len = r->value_len;
        if (r->value_len) memcpy(e->value, r->value, r->value_len);
        if (i >= 0) simba__mwait_remove(e, i);
        simba__mbroadcast(st, e, now);
    } else {
        simba__mwait_join(c, e, r, now);
    }
    return 0;
}

/* Run one request against the store. Returns the reply (owner copied into owner_buf, the
   value into value_buf, SIMBA_VALUE_MAX bytes). */
static void simba__mexec(simba__mclient *c, const simba_req *r, simba_reply *rep, char *owner_buf, unsigned char *value_buf) {
    simba_memstore *st = c->st;
    simba__mentry *e;
    int64_t now;
    int yielded = 0;
    pthread_mutex_lock(&st->lock);
    now = st->now_fn(st->clock_user);
    e = (simba__mentry *)simba__hfind(&st->entries, r->mutex);
    if (!e && r->op == SIMBA_OP_ACQUIRE) {
        e = (simba__mentry *)simba__zalloc(NULL, sizeof *e);
        if (e) {
            simba__copy(e->name, sizeof e->name, r->mutex);
            e->h.key = e->name;
            if (!simba__hinsert(&st->entries, &e->h, simba__malloc_u, simba__free_u, NULL)) { SIMBA_FREE(e); e = NULL; }
        }
        if (!e) {
            pthread_mutex_unlock(&st->lock);
            simba__reply_fail(rep, SIMBA_ENOMEM, "memory store: out of memory");
            return;
        }
    }
    if (e) {
        simba__mwait_purge(e, now);
        simba__mhold_purge(e, now);
    }
    if (e && r->op == SIMBA_OP_ACQUIRE) {
        int permits = r->permits > 1 ? r->permits : 1, got;
        /* One mode per name while anyone holds or waits: another N is refused, never obeyed. */
        if ((simba__mholders(e, now) > 0 || e->nw > 0) && e->permits && e->permits != permits) {
            pthread_mutex_unlock(&st->lock);
            simba__reply_conflict(rep, owner_buf, SIMBA_ID_MAX + 1, permits, e->permits);
            return;
        }
        e->permits = permits;
        if ((got = simba__macquire(c, e, r, now)) != 0) {
            pthread_mutex_unlock(&st->lock);
            simba__reply_fail(rep, got == -2 ? SIMBA_ENOMEM : SIMBA_EBACKEND,
                              got == -2 ? "memory store: out of memory" : "memory store: data-loss quarantine");
            return;
        }
    } else if (e && r->op == SIMBA_OP_RELEASE) {
        int k = simba__mhold_find(e, r->contender);
        if (simba__mlive(e, now) && strcmp(e->owner, r->contender) == 0) {
            simba__mfree(st, e, now);
        } else if (k >= 0) {
            simba__mhold_free(st, e, k, now);
        } else {
            int i = simba__mwait_find(e, r->contender);
            if (i >= 0) simba__mwait_remove(e, i);
        }
    } else if (r->op == SIMBA_OP_SET_VALUE || r->op == SIMBA_OP_YIELD) {
        if ((yielded = simba__mowner_op(st, c, e, r, now, rep)) < 0) {
            pthread_mutex_unlock(&st->lock);
            return;
        }
    }
    simba__mreply(e, now, r->contender, rep);
    rep->yielded = yielded;
    if (rep->owner) {
        simba__copy(owner_buf, SIMBA_ID_MAX + 1, rep->owner);
        rep->owner = owner_buf;
    }
    if (rep->value_len) {
        memcpy(value_buf, rep->value, rep->value_len);
        rep->value = value_buf;
    }
    if (e && r->op == SIMBA_OP_ACQUIRE && e->nw > 0 && strcmp(e->w[0].id, r->contender) == 0 && e->w[0].client == c)
        rep->first_in_line = 1;
    pthread_mutex_unlock(&st->lock);
}

/* A view of e; hold (room for nh + 1) receives the holders, oldest grant first (values
   copied by simba_req_view, under the lock); the core picks the one the view shows. */
static void simba__mview(const simba__mentry *e, int64_t now, int with_waiters, simba_view *v, simba_view_holder *hold) {
    int i, n = 0;
    memset(v, 0, sizeof *v);
    simba__copy(v->mutex, sizeof v->mutex, e->name);
    v->fence = e->fence;
    v->acquired_unix_ms = v->lease_ms = SIMBA_UNKNOWN_MS; /* the store keeps no wall clock */
    v->held_ms = v->ttl_left_ms = v->transition_left_ms = SIMBA_UNKNOWN_MS;
    if (simba__mlive(e, now)) {
        memset(&hold[n], 0, sizeof hold[n]);
        simba__copy(hold[n].id, sizeof hold[n].id, e->owner);
        hold[n].fence = e->fence;
        hold[n].acquired_unix_ms = SIMBA_UNKNOWN_MS;
        hold[n].held_ms = now - e->acquired_at;
        hold[n].ttl_left_ms = e->ttl_at - now;
        hold[n].transition_left_ms = e->transition_at - now;
        hold[n].value = e->value_len ? e->value : NULL;
        hold[n].value_len = e->value_len;
        n++;
    }
    for (i = 0; i < e->nh; i++, n++) {
        const simba__mhold *h = &e->hs[i];
        memset(&hold[n], 0, sizeof hold[n]);
        simba__copy(hold[n].id, sizeof hold[n].id, h->id);
        hold[n].fence = h->fence;
        hold[n].shared = h->shared;
        hold[n].acquired_unix_ms = SIMBA_UNKNOWN_MS;
        hold[n].held_ms = now - h->acquired_at;
        hold[n].ttl_left_ms = h->ttl_at - now;
        hold[n].transition_left_ms = h->transition_at - now;
        hold[n].value = h->value_len ? h->value : NULL;
        hold[n].value_len = h->value_len;
    }
    simba__view_holders(v, hold, n, e->permits);
    v->permits = n || e->nw ? e->permits : 0;
    v->waiters = with_waiters ? e->nw : -1;
    for (i = 0; with_waiters && i < e->nw && i < SIMBA_VIEW_WAITERS; i++) simba__copy(v->waiter[i], sizeof v->waiter[i], e->w[i].id);
}

/* An inspection against the store: views go to the core under the store's lock (copied). */
static void simba__minspect(simba__mclient *c, simba_req *r, simba_reply *rep) {
    simba_memstore *st = c->st;
    simba__mentry *e;
    simba_view v;
    int64_t now;
    size_t i;
    simba__reply_none(rep);
    pthread_mutex_lock(&st->lock);
    now = st->now_fn(st->clock_user);
    e = (simba__mentry *)simba__hfind(&st->entries, r->mutex);
    if (e) {
        simba__mwait_purge(e, now);
        simba__mhold_purge(e, now);
    }
    if (r->op == SIMBA_OP_INSPECT && e) {
        simba_view_holder *hold = (simba_view_holder *)SIMBA_MALLOC((size_t)(e->nh + 1) * sizeof *hold);
        if (!hold) simba__reply_fail(rep, SIMBA_ENOMEM, "memory store: out of memory");
        else {
            simba__mview(e, now, 1, &v, hold);
            simba_req_view(r, &v);
            SIMBA_FREE(hold);
        }
    } else if (r->op == SIMBA_OP_LIST) {
        for (i = 0; i < st->entries.nb && rep->rc == SIMBA_OK; i++) {
            simba__hnode *n;
            for (n = st->entries.b[i]; n; n = n->hnext) {
                simba__mentry *le = (simba__mentry *)n;
                simba_view_holder *hold;
                simba__mhold_purge(le, now);
                hold = (simba_view_holder *)SIMBA_MALLOC((size_t)(le->nh + 1) * sizeof *hold);
                if (!hold) { simba__reply_fail(rep, SIMBA_ENOMEM, "memory store: out of memory"); break; }
                simba__mview(le, now, 0, &v, hold);
                simba_req_view(r, &v);
                SIMBA_FREE(hold);
            }
        }
    } else if (r->op == SIMBA_OP_FORCE_RELEASE) {
        int k;
        rep->rc = SIMBA_EFENCE;
        if (e && simba__mlive(e, now) && e->fence == r->fence) {
            simba__mfree(st, e, now);
            rep->rc = SIMBA_OK;
        }
        for (k = 0; e && rep->rc != SIMBA_OK && k < e->nh; k++) {
            if (e->hs[k].fence != r->fence) continue;
            simba__mhold_free(st, e, k, now);
            rep->rc = SIMBA_OK;
        }
    }
    pthread_mutex_unlock(&st->lock);
}

static void simba__mrun(simba__mclient *c, int64_t now) {
    simba_req *r = c->pend, *prev = NULL, *next;
    for (; r; r = next) {
        simba_reply rep;
        char owner[SIMBA_ID_MAX + 1];
        unsigned char value[SIMBA_VALUE_MAX];
        next = r->next_;
        if (!c->fault.fail && (c->fault.hang || now < simba__add(r->sent_at, c->fault.delay_ms))) { prev = r; continue; }
        if (prev) prev->next_ = next; else c->pend = next;
        if (c->pend_tail == r) c->pend_tail = prev;
        if (c->fault.fail) {
            simba_req_fail(r, SIMBA_EBACKEND, "memory backend: injected failure");
            continue;
        }
        if (r->op == SIMBA_OP_INSPECT || r->op == SIMBA_OP_LIST || r->op == SIMBA_OP_FORCE_RELEASE) simba__minspect(c, r, &rep);
        else simba__mexec(c, r, &rep, owner, value);
        simba_req_done(r, &rep);
    }
}

static simba_result simba__msubmit(void *impl, simba_req *r) {
    simba__mclient *c = (simba__mclient *)impl;
    r->next_ = NULL;
    if (c->pend_tail) c->pend_tail->next_ = r; else c->pend = r;
    c->pend_tail = r;
    simba__mrun(c, simba_now(c->loop));
    return SIMBA_OK;
}

static int simba__mfds(void *impl, struct pollfd *out, int cap) {
    simba__mclient *c = (simba__mclient *)impl;
    if (cap >= 1) {
        out[0].fd = c->pipefd[0];
        out[0].events = POLLIN;
        out[0].revents = 0;
    }
    return 1;
}

/* >>process */
static void simba__mprocess(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    simba__mclient *c = (simba__mclient *)impl;
    simba__mevent *ev, *next;
    char buf[64];
    (void)ready;
    (void)n;
    (void)flags;
    while (read(c->pipefd[0], buf, sizeof buf) > 0) {
    }
    pthread_mutex_lock(&c->st->lock);
    ev = c->inbox;
    c->inbox = c->inbox_tail = NULL;
    pthread_mutex_unlock(&c->st->lock);
    for (; ev; ev = next) {
        next = ev->next;
        if (!c->fault.drop_events)
            simba_backend_event(c->be, ev->kind, ev->mutex, ev->has_contender ? ev->contender : NULL, &ev->rep);
        SIMBA_FREE(ev);
    }
    simba__mrun(c, now);
}

static int64_t simba__mdeadline(void *impl) {
    simba__mclient *c = (simba__mclient *)impl;
    int64_t at = SIMBA__NEVER;
    simba_req *r;
    if (c->fault.hang || c->fault.fail) return c->fault.fail && c->pend ? 0 : at;
    for (r = c->pend; r; r = r->next_) at = simba__min(at, simba__add(r->sent_at, c->fault.delay_ms));
    return at;
}

static simba_result simba__mem_watch(void *impl, const char *mutex) {
    simba__mclient *c = (simba__mclient *)impl;
    simba__mwatch *w;
    simba_result rc = SIMBA_OK;
    pthread_mutex_lock(&c->st->lock);
    w = (simba__mwatch *)simba__hfind(&c->watched, mutex);
    if (w) {
        w->count++;
    } else if ((w = (simba__mwatch *)simba__zalloc(NULL, sizeof *w)) != NULL) {
        simba__copy(w->name, sizeof w->name, mutex);
        w->h.key = w->name;
        w->count = 1;
        if (!simba__hinsert(&c->watched, &w->h, simba__malloc_u, simba__free_u, NULL)) { SIMBA_FREE(w); rc = SIMBA_ENOMEM; }
    } else {
        rc = SIMBA_ENOMEM;
    }
    pthread_mutex_unlock(&c->st->lock);
    return rc;
}

static void simba__mem_unwatch(void *impl, const char *mutex) {
    simba__mclient *c = (simba__mclient *)impl;
    simba__mwatch *w;
    pthread_mutex_lock(&c->st->lock);
    w = (simba__mwatch *)simba__hfind(&c->watched, mutex);
    if (w && --w->count == 0) {
        simba__hremove(&c->watched, &w->h);
        SIMBA_FREE(w);
    }
    pthread_mutex_unlock(&c->st->lock);
}

/* >>close */
static void simba__mdestroy(void *impl) {
    simba__mclient *c = (simba__mclient *)impl;
    simba_memstore *st = c->st;
    simba__mevent *ev, *next;
    size_t i;
    while (c->pend) {
        simba_req *r = c->pend;
        simba_reply rep;
        char owner[SIMBA_ID_MAX + 1];
        unsigned char value[SIMBA_VALUE_MAX];
        c->pend = r->next_;
        /* What was sent reaches the store, in order, as bytes on the wire reach a server
           after its client has gone (a delayed answer is a request in transit); a hung or
           failing client's never do. An inspection changes nothing: it just ends. */
        if (!c->fault.hang && !c->fault.fail && r->op != SIMBA_OP_INSPECT && r->op != SIMBA_OP_LIST && r->op != SIMBA_OP_FORCE_RELEASE)
            simba__mexec(c, r, &rep, owner, value);
        simba_req_fail(r, SIMBA_ECLOSED, "memory backend closed");
    }
    pthread_mutex_lock(&st->lock);
    /* A vanished client leaves no waiter entries that point at it. */
    for (i = 0; i < st->entries.nb; i++) {
        simba__hnode *n = st->entries.b[i];
        for (; n; n = n->hnext) {
            simba__mentry *e = (simba__mentry *)n;
            int k;
            for (k = 0; k < e->nw;)
                if (e->w[k].client == c) simba__mwait_remove(e, k); else k++;
        }
    }
    if (c->prev) c->prev->next = c->next; else st->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    ev = c->inbox;
    pthread_mutex_unlock(&st->lock);
    for (; ev; ev = next) { next = ev->next; SIMBA_FREE(ev); }
    for (i = 0; i < c->watched.nb; i++) {
        simba__hnode *n = c->watched.b[i], *nn;
        for (; n; n = nn) { nn = n->hnext; SIMBA_FREE(n); }
    }
    SIMBA_FREE(c->watched.b);
    simba_backend_fd(c->be, c->pipefd[0], 0); /* the loop's watcher goes before the number does */
    close(c->pipefd[0]);
    close(c->pipefd[1]);
    simba_free(c->loop, c);
}

static const simba_backend_vt simba__memory_vt = {
    sizeof(simba_backend_vt), "memory", simba__msubmit, simba__mfds, simba__mprocess, simba__mdeadline, simba__mem_watch, simba__mem_unwatch, simba__mdestroy,
    SIMBA_LEASE_ASKED,
    NULL, /* hurry: nothing is held */
    simba__msubmit, /* inspect: queued with the requests, so faults delay it alike */
    NULL, /* announce: the store tells every watching client itself */
};

/* >>open */
SIMBA_API simba_result simba_memory_open(simba_loop *loop, simba_memstore *st, simba_backend **out) {
    simba__mclient *c;
    simba_result rc;
    if (out) *out = NULL;
    if (!loop || !st || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_memory_open: NULL argument");
    c = (simba__mclient *)simba__zalloc(loop, sizeof *c);
    if (!c) return simba__fail(loop, SIMBA_ENOMEM, "simba_memory_open: out of memory");
    if (simba__pipe(c->pipefd) != 0) {
        simba_free(loop, c);
        return simba__fail(loop, SIMBA_ESYS, "simba_memory_open: pipe: %s", strerror(errno));
    }
    c->st = st;
    c->loop = loop;
    if ((rc = simba_backend_new(loop, &simba__memory_vt, c, &c->be)) != SIMBA_OK) {
        close(c->pipefd[0]);
        close(c->pipefd[1]);
        simba_free(loop, c);
        return rc;
    }
    pthread_mutex_lock(&st->lock);
    c->next = st->clients;
    if (st->clients) st->clients->prev = c;
    st->clients = c;
    pthread_mutex_unlock(&st->lock);
    *out = c->be;
    return SIMBA_OK;
}

SIMBA_API simba_result simba_memory_fault_set(simba_backend *be, const simba_memory_fault *f) {
    simba__mclient *c;
    if (!be || !f || be->vt != &simba__memory_vt) return SIMBA_EINVAL;
    if (f->delay_ms < 0 || f->delay_ms > SIMBA_MAX_MS) return SIMBA_EINVAL;
    c = (simba__mclient *)be->impl;
    c->fault = *f;
    return SIMBA_OK;
}

/* Test support, not API (simba_inspect is the reader): the stored owner of a mutex, store
   clock. */
SIMBA_API simba_result simba__memstore_read(simba_memstore *st, const char *mutex, simba_reply *out, char *owner_buf, size_t cap) {
    simba__mentry *e;
    int64_t now;
    if (!st || !out || simba_name_check(mutex) != SIMBA_OK || (owner_buf && cap == 0)) return SIMBA_EINVAL;
    pthread_mutex_lock(&st->lock);
    now = st->now_fn(st->clock_user);
    e = (simba__mentry *)simba__hfind(&st->entries, mutex);
    if (e) simba__mhold_purge(e, now);
    simba__mreply(e, now, NULL, out);
    out->value = NULL; /* the record may change once unlocked */
    out->value_len = 0;
    if (owner_buf) {
        simba__copy(owner_buf, cap, out->owner);
        out->owner = owner_buf;
    } else {
        out->owner = NULL;
    }
    pthread_mutex_unlock(&st->lock);
    return SIMBA_OK;
}

SIMBA_API simba_result simba_memory_check_fence(simba_memstore *st, const char *name, uint64_t fence,
                                                void (*write)(void *user), void *user, char *errbuf, size_t errbuf_cap) {
    char err[256];
    simba__mentry *e;
    simba_result rc;
    int64_t now;
    err[0] = 0;
    if (!st) {
        snprintf(err, sizeof err, "simba_memory_check_fence: the store is NULL");
        rc = SIMBA_EINVAL;
    } else if ((rc = simba__fence_args("simba_memory_check_fence", name, fence, err, sizeof err)) == SIMBA_OK) {
        pthread_mutex_lock(&st->lock);
        now = st->now_fn(st->clock_user);
        e = (simba__mentry *)simba__hfind(&st->entries, name);
        rc = simba__fence_judge("simba_memory_check_fence", name, fence, e && e->owner[0], e ? e->fence : 0,
                                e ? e->transition_at - now : -1, err, sizeof err);
        if (rc == SIMBA_OK && write) write(user);
        pthread_mutex_unlock(&st->lock);
    }
    if (errbuf && errbuf_cap > 0) simba__copy(errbuf, errbuf_cap, err);
    return rc;
}

SIMBA_API simba_result simba_memstore_lose(simba_memstore *st) {
    size_t i;
    if (!st) return SIMBA_EINVAL;
    pthread_mutex_lock(&st->lock);
    for (i = 0; i < st->entries.nb; i++) {
        simba__hnode *n = st->entries.b[i];
        for (; n; n = n->hnext) {
            simba__mentry *e = (simba__mentry *)n;
            e->owner[0] = 0;
            e->acquired_at = e->ttl_at = e->transition_at = 0;
            e->fence = 0;
            e->nw = 0;
            e->nh = 0;
            e->permits = 0;
        }
    }
    st->lost_at = st->now_fn(st->clock_user);
    st->fence_floor = st->fence_max;
    pthread_mutex_unlock(&st->lock);
    return SIMBA_OK;
}

#endif /* SIMBA_MEMORY_IMPLEMENTATION */
