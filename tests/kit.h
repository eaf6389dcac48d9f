/* kit.h -- the shared backend test kit: one suite, written once, run per backend.
 *
 * A backend test program fills a kit_backend and calls kit_run():
 *
 *     static simba_result open_mine(simba_loop *loop, void *ctx, simba_backend **out) {...}
 *     int main(int argc, char **argv) {
 *         kit_backend kb = { .name = "sqlite", .open = open_mine, .ctx = &cfg,
 *                            .ttl_ms = 2000, .transition_ms = 1000 };
 *         return kit_run(&kb, argc, argv);
 *     }
 *
 * open() is called once per simulated process: every contender that must look like a
 * separate client gets its own loop and its own backend from it. The cases use real time
 * (the system monotonic clock) and wait with deadlines, never bare sleeps. Mutex names are
 * made unique per run (a random suffix) so that leftovers of earlier runs do not interfere.
 */
#ifndef SIMBA_KIT_H
#define SIMBA_KIT_H
#include "../simba.h"

typedef struct kit_backend {
    const char *name;
    simba_result (*open)(simba_loop *loop, void *ctx, simba_backend **out);
    void *ctx;
    int64_t ttl_ms, transition_ms; /* timing the cases use; 0/0 -> 2000/1000 */
    int64_t multi_ms;              /* length of multiContend; 0 -> 10000 (SIMBA_KIT_MULTI_MS wins) */
    /* Optional: called between cases (e.g. to check the server is still up). */
    void (*between)(void *ctx);
    /* Optional, for a backend that answers inside the poll that asks (memory): from now on
       answer this client's requests ms after they were sent, so that one can be caught in
       flight as on a network. */
    void (*slow)(simba_backend *be, int64_t ms);
    /* How this backend's store stops answering one client, for on_at_risk (kit_at_risk):
       mute(be, 1) makes every later request of be go unanswered (the server hangs, or the
       client's traffic is held: no error, no answer), mute(be, 0) lets it through again.
       Without it kit_at_risk fails: each backend says how its store stops answering. */
    void (*mute)(simba_backend *be, int on);
    /* >>fenced  Optional (the cases run where it is set): the fenced write into the
       application's data in the lock's own store. fenced_write stores value under key (a key
       of the mutex name's, e.g. in its Redis hash slot) only if fence holds a live lease of
       name there, atomically in the store: SIMBA_OK written; SIMBA_EFENCE refused, err says
       why in words (a lease that is over says "lease"); SIMBA_EINVAL bad input (empty name,
       fence 0: err names "name" or "fence"). Nothing is written unless
       SIMBA_OK. It may drive loop (be's loop) until answered. fenced_read copies what the
       store holds under (name, key) into out ("" when nothing): 0, or -1 with err. */
    simba_result (*fenced_write)(simba_loop *loop, simba_backend *be, void *ctx, const char *name, uint64_t fence,
                                 const char *key, const char *value, char *err, size_t errcap);
    int (*fenced_read)(simba_loop *loop, simba_backend *be, void *ctx, const char *name, const char *key, char *out,
                       size_t cap, char *err, size_t errcap);
    /* 1: the lease is a session that the client library keeps alive while the loop stands
       still (ZooKeeper): an owner whose loop is not polled still holds it, so the
       lease-over case does not apply (a paused process is the fault tests' case). */
    int lease_is_session;
    /* The bound (ms) within which every follower of a name, waiters and observers, shows a
       new owner or value (kit_followers_learn_new_owner): the store's push latency and one
       read. 0 -> 300. */
    int64_t push_ms;
    /* 1: fences follow the store's clock (Redis), 0: they count one by one from a floor */
    int fence_by_time;
    /* 1: mute stops the whole store, every client's requests (SQLite, PostgreSQL) */
    int mute_all;
} kit_backend;

/* Runs every case (argv[1] = optional name filter), prints the closing
   "<name> kit: N passed, N failed" line and returns the exit status. */
int kit_run(const kit_backend *kb, int argc, char **argv);
#endif
