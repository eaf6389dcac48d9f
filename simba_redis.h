/*
 * simba_redis.h v0.1.0 -- Redis backend for simba (hiredis async API), stb-style single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file: that file then holds the core
 * (simba.h) and this backend. Link with -lhiredis. Builds against hiredis 0.14 and 1.x.
 *
 *     simba_backend *be;
 *     simba_redis_desc d = {0};
 *     d.host = "127.0.0.1"; d.port = 6379;
 *     simba_redis_open(loop, &d, &be);      // never blocks: connecting happens in simba_poll
 *
 * COMPILE-TIME OPTIONS (define before the implementation's include)
 *   SIMBA_API, SIMBA_MALLOC / SIMBA_FREE   as in simba.h
 *   SIMBA_REDIS_IMPLEMENTATION             this header and the core only
 *   SIMBA_REDIS_TEST_FAULTS                test builds: a backend's command traffic can be
 *                                          held (simba__redis.test_mute), as a hung server,
 *                                          or its replies or pushes left unread (test_slow)
 *
 * CONNECTIONS
 *   Each backend has one command connection and, once a mutex is watched, one subscriber
 *   connection. Both are non-blocking and driven only by simba_poll() through simba's own
 *   hiredis event hooks; hiredis 0.14 has no timers, so connect and command deadlines are
 *   kept here. A hung server (SIGSTOP, partition) never stalls the caller: a command that
 *   is not answered within command_timeout_ms completes with SIMBA_ETIMEDOUT and its
 *   connection is dropped and re-made (later replies on it could not be matched any more).
 *   Lost connections are re-made with randomised doubling backoff
 *   [reconnect_min_ms, reconnect_max_ms].
 *   Losing the command connection raises SIMBA_EV_DISCONNECTED: owners whose desc asks for
 *   step_down_on_disconnect step down at once (reason "connection"), others keep their
 *   lease to the local deadline. Grants are the requested ttl (SIMBA_LEASE_ASKED).
 *
 *   Requests submitted inside simba_poll (renewals due together, asks after a push, anything
 *   a callback starts) are pipelined and written together by the flush that ends their
 *   round of the poll: one write for hundreds of renewals. One submitted outside a poll (an
 *   application's start, stop or unlock) is written at once.
 *
 *   Requests submitted while a connection attempt is in progress are queued and sent when it
 *   is up (or fail with SIMBA_ECONN when the attempt fails, at the latest after
 *   connect_timeout_ms). Requests submitted while disconnected between attempts fail at
 *   once with SIMBA_ECONN, so the core backs off instead of piling up work.
 *
 *   host must be a numeric IPv4/IPv6 address or "localhost": resolving a name could block
 *   in getaddrinfo(), which the loop must never do. Resolve names yourself at start-up.
 *
 * DATA (every key of one mutex shares the hash tag {name}; the data-loss marker is per
 * prefix, see DATA LOSS for Cluster; every key a script touches is passed in KEYS, names
 * reach Redis only as KEYS/ARGV)
 *   <prefix>{<name>}:owner  string "v<fence> <acquired> <granted> <ttl> <lease> <idlen>
 *                           <id><value>" (server ms; ttl, lease = ttl+transition as
 *                           durations; the value's bytes as they are), expiring after the
 *                           lease
 *   <prefix>{<name>}:fence  never expires: fence = max(previous + 1, server time in us), so
 *                           fences keep increasing even after the server lost its data
 *                           (provided its clock does not step back)
 *   <prefix>{<name>}:queue  waiters by arrival (zset, score = arrival time in us)
 *   <prefix>{<name>}:qexp   per-waiter expiry (zset): a waiter that does not come back
 *                           within its req->live_ms (sent by the core) is considered gone
 *   <prefix>alive           the data-loss marker "<since ms> <run_id> <max_lease_ms>
 *                           schema=<N>", never expires; N is the layout of these keys
 *                           (SIMBA__REDIS_SCHEMA): a process of another layout is refused
 *                           at connect and at every grant ("found simba schema version")
 *   simba:fresh             optional: the run_id of a server declared empty (per db; see
 *                           simba_redis_declare_fresh, simba init)
 *   All times come from the server (TIME); replies carry remaining durations only.
 *   Requires Redis >= 5 (scripts that call TIME before writing).
 *
 * FAIRNESS (the rule of simba.h, kept in the scripts)
 *     ACQUIRE, no owner record, queue empty or asker is its head --> owner (new fence), leaves
 *     ACQUIRE, no owner record, a live head before the asker -----> joins the back, "nobody"
 *     ACQUIRE, held by another (ttl or transition) ----------------> joins the back, or its
 *                                                                      place refreshed
 *     ACQUIRE renew=1 by the recorded owner -----------------------> renewal (same fence,
 *                                                                      value kept)
 *     ACQUIRE renew=1, no record of its own (its lease ended) -----> no grant, no place
 *     RELEASE by the owner -> record deleted, "released" pushed to the head's wake channel
 *     SET_VALUE by the owner with its fence, lease not over -------> value replaced (fields
 *                                                                      and expiry kept)
 *     YIELD by the owner with its fence, a live head queued -------> as RELEASE, then the
 *                                                                      yielder joins the back
 *     YIELD, nobody live queued -----------------------------------> nothing changes
 *     SET_VALUE / YIELD with another fence or no record -----------> SIMBA_EFENCE
 *   The head keeps a free mutex reserved while it is live: its expiry (the last request +
 *   req->live_ms) is ahead and somebody listens on its wake channel (PUBSUB NUMSUB; a process
 *   that died has closed its connection). A dead head, or a garbage entry (no expiry, no
 *   listener), leaves the line at the next ask, so a SIGSTOPped head holds the others back
 *   no longer than its live_ms, a SIGKILLed one not at all (a live head whose subscriber
 *   connection is down at that moment loses its place too: it asks again after the
 *   reconnect's SIMBA_EV_RESET and joins the back). A waiter told "nobody" asks again
 *   at the core's doubling interval; the head is told first_in_line and tries at lease end.
 *   Costs: an uncontended acquire looks at the empty queue once (one EXISTS); only a
 *   contended free mutex pays for the head check.
 *
 * DATA LOSS (a restart without persistence, FLUSHALL/FLUSHDB, eviction, a promoted replica)
 *   The owner record can vanish while its owner still holds the lease. The acquire script
 *   therefore grants (starts a new ownership) only when the marker <prefix>alive is present,
 *   was written by the running server process (INFO run_id, read at connect), and is older
 *   than a quarantine: desc.max_lease_ms (default one minute), the longest lease any
 *   contender may hold (simba_contend refuses a longer ttl + transition). The marker keeps
 *   the bound: a process whose max_lease_ms differs is refused every grant ("max_lease_ms
 *   mismatch"), since the quarantine must outlast the leases of every process on the prefix.
 *   A missing or stale marker is (re)installed with the current time, so after a loss
 *   nobody is granted for one quarantine; the old owner's next renewal finds its record gone,
 *   is told "nobody", and steps down within its own ttl, before anyone else can win. Refused
 *   acquisitions fail with SIMBA_EBACKEND ("data-loss quarantine: no grant for N ms ..."
 *   with its reasons) and quarantine_ms: the contender hears SIMBA_EVENT_QUARANTINE and asks
 *   again when it ends; it has joined the line meanwhile (its place kept until the quarantine
 *   ends and live ms more), so the first to arrive is the first granted. Renewals of a record that exists never consult the marker: the
 *   steady state costs no round trip and no extra key.
 *     first use of a prefix    one quarantine (the server may have restarted a moment ago),
 *                              unless the server was declared empty: simba:fresh = run_id
 *                              (simba_redis_declare_fresh, `simba -u redis://... init`, and
 *                              scripts/redis-start.sh for the servers it creates)
 *     restart, no persistence  one quarantine (the marker is gone)
 *     restart, AOF with appendfsync always   none: the marker survives and a restart keeps
 *                              every write (INFO aof_enabled, CONFIG GET appendfsync)
 *     restart, other persistence (RDB, everysec)   one quarantine (run_id differs)
 *     FLUSHALL / FLUSHDB / DEL of the prefix's keys   one quarantine
 *   Eviction: at every connect INFO tells maxmemory_policy; anything but noeviction fails
 *   every acquisition with SIMBA_EBACKEND and logs an ERROR, since an evicted owner record
 *   hands out a held mutex (desc.allow_eviction accepts that risk). A server that refuses
 *   INFO or CONFIG GET (renamed, ACL) is noted once in the log and backend message; restarts
 *   are then seen by the marker alone and the policy is not checked.
 *   Redis Cluster refuses scripts whose keys lie in several hash slots: there the marker is
 *   one per slot, "<prefix>{<tag>}:alive" with <tag> a short string of that slot, and the
 *   fresh key "simba:fresh{<tag>}" (see CLUSTER). A promoted replica carries a marker with
 *   its old primary's run_id, a migrated slot one with its source's: both quarantine, and a
 *   Cluster node never counts as durable (AOF cannot make up for unreplicated writes).
 *
 * PUSH
 *   <prefix>{<name>}:ev:<db>         "released" broadcasts, to every watcher of the mutex
 *   <prefix>{<name>}:ow:<db>         "holder <fence> <ttl> <lease> <held> <idlen> <id><value>"
 *                                    for observers and waiters: each grant and each new value
 *   <prefix>{<name>}:wk:<db>:<id>    wake-up for one waiter
 *   A release wakes only the oldest live waiter, on its own channel, and the mutex is kept
 *   for it (see FAIRNESS); a waiter whose channel nobody listens to any more (its process
 *   is gone) is dropped from the queue and the next one is tried. A forged or stray wake-up
 *   only makes a contender ask: the script decides.
 *   With no waiter to wake, "released" goes to every watcher of the mutex,
 *   unless PUBSUB NUMSUB shows that the only one is the releasing process itself (its
 *   subscription counted only once the server confirmed it), so an uncontended release
 *   sends nothing back to its own process. A backend subscribes a mutex's owner channel once
 *   one of its observers has read the mutex or one of its contenders (not of a set) has asked
 *   for it, so every follower learns each grant and new value by push. A push comes on the
 *   subscriber connection and an answer on the command connection: an ask answered just
 *   before a grant may arrive after that grant's push; such an answer (nobody, or an earlier
 *   fence) is not shown: the core keeps the pushed owner and asks again (simba.h). A
 *   contender's wake channel stays subscribed after its release (at most 8 such idle
 *   channels per mutex, the least recently used go first; all of them when the mutex is
 *   unwatched), so acquiring again costs no SUBSCRIBE; a release that failed unsubscribes at
 *   once, since the waiter may still be queued and must not take wake-ups it will not act on.
 *   After a reconnect every channel is subscribed again and SIMBA_EV_RESET is raised for all
 *   mutexes (messages may have been missed). Messages are hints; timers stay the fallback.
 *   In Redis Cluster the same channels are sharded (SSUBSCRIBE on the mutex's primary,
 *   SPUBLISH and PUBSUB SHARDNUMSUB in the scripts): the mutex's shard counts and receives.
 *
 * SEMAPHORES AND READ-WRITE LOCKS (simba.h)
 *   A mutex's owner and a read-write lock's writer keep the owner record and its fast path.
 *   Readers and a semaphore's permits are entries of the hash <prefix>{<name>}:hold, in the
 *   name's slot, which exists only while a name is shared or counted: '#n' the recorded
 *   permits, '?<id>' a waiting reader, '=<id>' a holder ('0' or '1' for a reader, then an
 *   owner record of its own: fence, times, value). One fence key and one queue per name. An
 *   acquisition of a name with that hash (or asking permits > 1 or shared) takes the general
 *   path: holders past their lease end leave, the grant rule runs over the live line (dead
 *   waiters leave it), another permits while anyone holds or waits is SIMBA_ECONFLICT. A
 *   holder's release (or a forced one by fence) pushes each waiter it frees on its wake
 *   channel; a reader granted pushes the readers right behind it. Each renewal of a holder
 *   reads the whole hash: O(holders) per renewal.
 *
 * CLUSTER (desc.cluster = 1; host:port is any node, a seed)
 *   The seed is asked CLUSTER SLOTS once it is up; requests submitted before the first map
 *   wait for it (at most connect_timeout_ms). Each primary gets a backend state of its own
 *   (command + subscriber connection, scripts, INFO), made on first sight, numeric addresses
 *   only. A name's slot is the CRC16 of the name (its keys' hash tag). MOVED updates that
 *   slot, asks for the whole map again and re-sends the request to the named node; ASK
 *   re-sends it there after ASKING; at most 5 redirections per request. CLUSTERDOWN, a lost
 *   node connection or an unreachable primary ask for the map again (at most once per
 *   reconnect_min_ms); the request fails and the core retries with its backoff. A mutex
 *   whose slot moved is watched on its new primary and gets SIMBA_EV_RESET. Losing one
 *   node raises SIMBA_EV_DISCONNECTED and SIMBA_EV_RESET for the mutexes it serves only.
 *   Errors: CLUSTER SLOTS refused (a standalone server) fails every request with "not a
 *   Redis Cluster node"; without desc.cluster a MOVED or CROSSSLOT reply is "it is a Redis
 *   Cluster node ... simba_redis_desc.cluster = 1" (logged once), never retried as a
 *   transient fault. hiredis 0.14 knows no sharded pub/sub: each channel is also SUBSCRIBEd
 *   plainly (nobody publishes there), which makes hiredis hand the ssubscribe/smessage
 *   pushes to that channel's callback.
 *
 * SENTINEL (desc.sentinels = {"ip:port", ..., NULL}, desc.master_name)
 *   A third connection goes to a sentinel and asks SENTINEL get-master-addr-by-name; then it
 *   stays subscribed to +switch-master. The command and subscriber connections are made to
 *   the primary it named, and the command connection's handshake checks ROLE: an address
 *   that is not the primary (any more) drops the connection and asks the sentinels again. A
 *   failed or silent sentinel gives way to the next one in the list. +switch-master for our
 *   name drops both connections and makes them to the new primary at once: owners see
 *   SIMBA_EV_DISCONNECTED, then SIMBA_EV_RESET. The promoted replica has another run_id, so
 *   its first grant waits one quarantine (see DATA LOSS): a grant that asynchronous
 *   replication lost cannot be handed out again while its owner may still act; sentinel mode
 *   never counts the server as durable. Sentinel AUTH is not supported (only the data
 *   nodes' username/password are used). Requests before the first answer fail with
 *   SIMBA_ECONN and are retried by the core.
 *   desc.wait_replicas = N (standalone or Sentinel): after an acquire answered with a new
 *   grant, WAIT N wait_timeout_ms; fewer acknowledgements fail the request (SIMBA_EBACKEND,
 *   "acknowledged by k of N replicas") and the contender asks again. Renewals never wait.
 *
 * FENCED WRITES (simba_redis_fenced)
 *   Data kept in the lock's own Redis can be written so that a stale owner cannot: one
 *   script reads the owner record and runs the caller's command only if the record holds
 *   the given fence and the server's TIME has not passed its lease end (ttl + transition,
 *   the moment the record expires and a grant may happen), all in one step of the server.
 *   A write in the owner's transition window is accepted: nobody else can be granted
 *   before it ends. One command per call, from an allow-list of writes on keys (SET, DEL,
 *   INCRBY, HSET, LPUSH, RPUSH, ZADD, XADD, MSET ...), every key carrying the hash tag
 *   {name} (so it lives in the mutex's Cluster slot) and none of the lock's own keys:
 *   anything else is refused with SIMBA_EINVAL before it is sent. It travels as the
 *   requests do (the primary under Sentinel, the slot's node in a Cluster, MOVED/ASK
 *   followed, command_timeout_ms) and is answered from simba_poll:
 *     held with this fence, lease live ------------> the command runs: SIMBA_OK, its reply
 *     no owner record (released, lease over) ------> SIMBA_EFENCE
 *     held with a later fence ---------------------> SIMBA_EFENCE "moved on"
 *     held with an earlier fence (never handed out) > SIMBA_EFENCE
 *     the command fails (WRONGTYPE ...) -----------> SIMBA_EBACKEND, nothing written
 *     no answer (timeout, lost connection) --------> SIMBA_ETIMEDOUT / SIMBA_ECONN: unknown
 *   After a data loss (see DATA LOSS) the record is gone: every fenced write is refused
 *   until a new grant, which the quarantine delays.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  public declarations   >>impl  the implementation   >>open  the constructor
 *   >>process  the work of one poll   >>close  teardown
 *   >>inspect  simba_inspect, simba_list, simba_force_release   >>fenced  simba_redis_fenced
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together).
 */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_REDIS_IMPLEMENTATION)
#define SIMBA_REDIS_IMPLEMENTATION
#endif
/* Its implementation uses the core's private helpers: the core's goes into the same file. */
#if defined(SIMBA_REDIS_IMPLEMENTATION) && !defined(SIMBA_CORE_IMPLEMENTATION)
#define SIMBA_CORE_IMPLEMENTATION
#endif
#ifndef SIMBA_REDIS_H
#define SIMBA_REDIS_H

#include "simba.h"

#ifdef __cplusplus
extern "C" {
#endif

/* >>api */
typedef struct simba_redis_desc {
    const char *host;      /* numeric address or "localhost"; NULL -> 127.0.0.1 */
    int port;              /* 0 -> 6379 */
    const char *unix_path; /* set: connect to this unix socket instead of host:port */
    const char *username;  /* optional (Redis 6 ACL): AUTH username password */
    const char *password;  /* optional: AUTH password */
    int db;                /* SELECT db when not 0 */
    const char *prefix;    /* key prefix, default "simba:" (<= 64 bytes, no braces) */
    int64_t connect_timeout_ms;  /* 0 -> 2000: connect + AUTH/SELECT/SCRIPT LOAD */
    int64_t command_timeout_ms;  /* 0 -> 2000 */
    int64_t reconnect_min_ms, reconnect_max_ms; /* 0 -> 100 / max(5000, reconnect_min_ms) */
    int64_t max_lease_ms;  /* 0 -> SIMBA_MAX_LEASE_DEFAULT_MS (60000): the longest lease
                              (ttl + transition) a contender may ask for, and the data-loss
                              quarantine. Kept in the prefix's marker: every process on a
                              prefix must use the same (a grant to another is refused) */
    int allow_eviction;    /* 1: accept a maxmemory-policy other than noeviction (unsafe) */
    int wait_replicas;     /* > 0: a new grant counts only once WAIT saw this many replicas take
                              it (renewals do not wait; not with cluster); see SENTINEL */
    int64_t wait_timeout_ms; /* WAIT's timeout; 0 -> 200, below command_timeout_ms */
    int cluster;           /* 1: Redis Cluster; host:port is a seed node (see CLUSTER) */
    /* Sentinel (see SENTINEL): NULL-terminated list of numeric "ip:port" sentinel addresses
       (at most 8); host/port are then unused. master_name is required with it. */
    const char *const *sentinels;
    const char *master_name;
} simba_redis_desc;

SIMBA_API simba_result simba_redis_open(simba_loop *loop, const simba_redis_desc *desc, simba_backend **out);
/* Declares the server of desc (host/port or unix_path, username/password) empty: writes
   simba:fresh = its run_id in every db (CONFIG GET databases, else 16), so that the first
   grant of every prefix waits no data-loss quarantine (see DATA LOSS). Refused with
   SIMBA_EEXIST, naming a key, when some db holds simba keys ("*}:owner", "*}:fence",
   "*}:queue", "*}:qexp", "*alive") unless force: a server that has granted leases may have
   lost one that is still live, which only the quarantine covers. Run it on a new server
   before any contender uses it (after a restart of a server in use, let the quarantine
   run). Blocking (each step bounded by connect_timeout_ms / command_timeout_ms), outside
   any loop: for the command line (simba init) and deployment scripts. Not for Cluster or
   Sentinel. On failure err holds the reason; on success a summary (run_id, dbs). */
SIMBA_API simba_result simba_redis_declare_fresh(const simba_redis_desc *desc, int force, char *err, size_t errcap);

/* >>fenced The reply of a fenced write's command, as the server gave it. Valid only during
   the callback. STATUS is a simple string ("OK"), STRING a bulk one; both end with a NUL
   (str[len]). ARRAY: elements of them in element. */
enum { SIMBA_REDIS_NIL = 0, SIMBA_REDIS_INTEGER = 1, SIMBA_REDIS_STRING = 2, SIMBA_REDIS_STATUS = 3, SIMBA_REDIS_ARRAY = 4 };
typedef struct simba_redis_value {
    int type;
    long long integer;
    const char *str;
    size_t len;
    const struct simba_redis_value *element;
    size_t elements;
} simba_redis_value;

/* rc SIMBA_OK: the command ran, reply is its answer. SIMBA_EFENCE: refused, nothing ran,
   errmsg says why (the fence moved on to a later owner, released, the lease is over).
   SIMBA_EBACKEND: the command itself failed (errmsg is the server's words: WRONGTYPE ...),
   nothing written. SIMBA_ETIMEDOUT, SIMBA_ECONN: the answer was lost, the write may or may
   not have happened. Called from simba_poll only. */
typedef void (*simba_redis_fenced_fn)(simba_result rc, const simba_redis_value *reply, const char *errmsg, void *user);

/* A write that commits only while fence holds a live lease of mutex name (see FENCED
   WRITES): one script, on the server that holds the mutex (the primary under Sentinel, the
   slot's node in a Cluster), checks the owner record and runs argv (argc words, C strings:
   the command and its arguments) in the same step. argv[0] is one of SET DEL UNLINK INCR
   INCRBY DECR DECRBY APPEND EXPIRE PEXPIRE PERSIST HSET HDEL HINCRBY LPUSH RPUSH LPOP RPOP
   LTRIM SADD SREM ZADD ZREM ZINCRBY XADD XTRIM MSET (any case), and every key it names
   carries the hash tag {name} ("orders:{job-7}:log"), outside the backend's own keys
   (<prefix>{name}...). Non-blocking: cb answers from a later simba_poll. SIMBA_OK (cb
   comes), or SIMBA_EINVAL before anything is sent (not a Redis backend, empty or bad name,
   fence 0, a command outside the list, a key outside the slot, too few arguments, more
   than 1024: simba_loop_errmsg says which), and cb never comes. */
SIMBA_API simba_result simba_redis_fenced(simba_backend *be, const char *name, uint64_t fence, int argc,
                                          const char *const *argv, simba_redis_fenced_fn cb, void *user);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_REDIS_H */

/* >>impl */
/* ==================================================================================== */
/*                                   IMPLEMENTATION                                     */
/* ==================================================================================== */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_REDIS_IMPLEMENTATION)
#define SIMBA_REDIS_IMPLEMENTATION
#endif
#if defined(SIMBA_REDIS_IMPLEMENTATION) && !defined(SIMBA__REDIS_IMPLEMENTED)
#define SIMBA__REDIS_IMPLEMENTED
#include "simba.h" /* the core's implementation, when this file has not got it yet */

#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <arpa/inet.h>
#include <sys/un.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIMBA__REDIS_PREFIX_MAX 64
/* Holds the run_id of a server declared empty when it started (see DATA LOSS). */
#define SIMBA__REDIS_FRESH_KEY "simba:fresh"
/* Longest key or channel: prefix + {name} + ":wk:" + db + ":" + id, with room to spare. */
#define SIMBA__REDIS_KEY_MAX (SIMBA__REDIS_PREFIX_MAX + SIMBA_NAME_MAX + SIMBA_ID_MAX + 48)
/* A Cluster slot's marker tag: at most 4 base-62 digits and the NUL. */
#define SIMBA__RCL_TAG 5

/* ---- scripts ------------------------------------------------------------------------
 * KEYS: owner, fence, queue, qexp. Every reply: {owner, ttl_left, lease_left, held, fence,
 * first_in_line, value} (YIELD adds yielded); owner "" = nobody.
 * The owner record is one string "v<fence> <acquired> <granted> <ttl> <lease> <idlen>
 * <id><value>" (server ms: when the ownership began, when it was last granted or renewed;
 * the ttl and the lease = ttl + transition as durations; the fence in us; idlen the id's
 * length, so that id and value are any bytes) set with PX = the lease, so that a grant or a
 * renewal is one SET and a read one GET. It is built from strings only (TIME's digits, ARGV,
 * the record's own fields): in Redis' Lua a number-to-string conversion costs about as much
 * as a redis.call.
 * The hot paths touch the queue only when it exists: queue and qexp always hold the same
 * members, so a ZREM that found nothing in one needs no ZREM in the other.
 * Each script is joined from the pieces below when it is loaded (simba__redis_lua_text):
 * a C99 string literal holds at most 4095 characters. */
#define SIMBA__REDIS_LUA_REC                                                                \
    "local function rec(v)\n"                                                               \
    "  local f, acq, at, ttl, lease, n, p = string.match(v, '^v(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ()')\n" \
    "  local id, val\n"                                                                     \
    "  if p then\n"                                                                         \
    "    local e = p + tonumber(n)\n"                                                       \
    "    id, val = string.sub(v, p, e - 1), string.sub(v, e)\n"                             \
    "    if #id + p ~= e then id = nil end\n"                                               \
    "  end\n"                                                                               \
    "  if not id or id == '' then return redis.error_reply('simba: unreadable owner record') end\n" \
    "  at = tonumber(at)\n"                                                                 \
    "  return {f, acq, tonumber(acq), at + tonumber(ttl), at + tonumber(lease), id, val, n, p}\n" \
    "end\n"                                                                                 \
    /* server time: ms and us as digit strings (t[2] has no leading zeros), ms as number */ \
    "local function clock()\n"                                                              \
    "  local t = redis.call('TIME')\n"                                                      \
    "  local u = string.sub('00000' .. t[2], -6)\n"                                         \
    "  local ms = t[1] .. string.sub(u, 1, 3)\n"                                            \
    "  return tonumber(ms), ms, t[1] .. u\n"                                                \
    "end\n"                                                                                 \
    "local function current(o, now)\n"                                                      \
    "  if not o then return {'', 0, 0, -1, '0', 0, ''} end\n"                               \
    "  local p = o[5] - now\n"                                                              \
    "  if p < 0 then p = 0 end\n"                                                           \
    "  return {o[6], o[4] - now, p, now - o[3], o[1], 0, o[7]}\n"                           \
    "end\n"
/* Waiters whose expiry passed (crashed or hung processes) leave the queue. */
#define SIMBA__REDIS_LUA_PURGE                                                              \
    "local function purge(ms)\n"                                                            \
    "  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ms, 'LIMIT', 0, 64)\n"    \
    "  if #dead > 0 then\n"                                                                 \
    "    redis.call('ZREM', KEYS[3], unpack(dead))\n"                                       \
    "    redis.call('ZREM', KEYS[4], unpack(dead))\n"                                       \
    "  end\n"                                                                               \
    "end\n"                                                                                 \
    /* Join the line (arrival order) or refresh our place for live ms; true when we are its \
       head. */                                                                             \
    "local function enqueue(c, now, ms, us, live)\n"                                        \
    "  purge(ms)\n"                                                                         \
    "  redis.call('ZADD', KEYS[3], 'NX', us, c)\n"                                          \
    "  redis.call('ZADD', KEYS[4], string.format('%.0f', now + tonumber(live)), c)\n"       \
    /* Both keys expire with their latest waiter; an earlier one already set them as far. */ \
    "  local last = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')\n"                  \
    "  if last[1] == c then\n"                                                              \
    "    local at = string.format('%.0f', tonumber(last[2]))\n"                             \
    "    redis.call('PEXPIREAT', KEYS[3], at)\n"                                            \
    "    redis.call('PEXPIREAT', KEYS[4], at)\n"                                            \
    "  end\n"                                                                               \
    "  return redis.call('ZRANGE', KEYS[3], 0, 0)[1] == c\n"                                \
    "end\n"

/* The layout of this header's keys and records, in the data-loss marker: another is refused. */
#define SIMBA__REDIS_SCHEMA 1
#define SIMBA__REDIS_SCHEMA_STR_(n) #n
#define SIMBA__REDIS_SCHEMA_STR(n) SIMBA__REDIS_SCHEMA_STR_(n)
#define SIMBA__REDIS_SCHEMA_FIELD "schema=" SIMBA__REDIS_SCHEMA_STR(SIMBA__REDIS_SCHEMA)

/* The data-loss marker (KEYS[5], "<since ms> <run_id> <max_lease_ms> schema=<N>", never expires) is
   missing after a restart without persistence, FLUSHALL/FLUSHDB or eviction, and names
   another server process after a restart or failover. Then no lease granted before can be
   ruled out: no grant until the quarantine (ARGV[7]: desc.max_lease_ms, the longest lease
   any contender may hold) has passed since the marker was (re)installed. Written back only
   when it changes. KEYS[6] holds the run_id of a server declared empty at its start: nothing
   it could have granted is live. Returns the ms of quarantine left (<= 0: none), or 0 and
   "bound <the marker's>" when it differs from ARGV[7], or "schema <the marker's>" when the
   marker names another layout (nothing is written then). */
#define SIMBA__REDIS_LUA_QUARANTINE                                                         \
    "local function quarantine(now, ms)\n"                                                  \
    "  local m = redis.call('GET', KEYS[5])\n"                                              \
    "  local at, rid, b, sv\n"                                                              \
    "  if m then at, rid, b, sv = string.match(m, '^(%d+) ?(%S*) ?(%d*) ?(%S*)$') end\n"   \
    "  if sv and sv ~= '' and sv ~= '" SIMBA__REDIS_SCHEMA_FIELD "' then return 0, 'schema ' .. sv end\n" \
    /* Every process on a prefix uses one lease bound: the quarantine must outlast them all. */ \
    "  if b and b ~= '' and b ~= ARGV[7] then return 0, 'bound ' .. b end\n"              \
    "  local keep = at ~= nil\n"                                                            \
    "  if keep and rid ~= ARGV[8] and rid ~= '' and ARGV[8] ~= '' and ARGV[9] ~= '1' then\n"\
    "    keep = false\n"                                                                    \
    "  end\n"                                                                               \
    "  local sid = ARGV[8]\n"                                                               \
    "  if sid == '' then sid = rid or '' end\n"                                             \
    "  if not keep then\n"                                                                  \
    "    if ARGV[8] ~= '' and redis.call('GET', KEYS[6]) == ARGV[8] then at = '0' else at = ms end\n" \
    "  end\n"                                                                               \
    "  if not keep or rid ~= sid or b ~= ARGV[7] or sv ~= '" SIMBA__REDIS_SCHEMA_FIELD "' then\n" \
    "    redis.call('SET', KEYS[5], at..' '..sid..' '..ARGV[7]..' " SIMBA__REDIS_SCHEMA_FIELD "')\n" \
    "  end\n"                                                                               \
    "  return tonumber(at) + tonumber(ARGV[7]) - now\n"                                     \
    "end\n"

/* A new grant (c's, ARGV as the acquire script's): the name's next fence, max(last + 1,
   server time in us), both well below 2^53, is stored; store(r) writes the holding's record
   r; the owner channel hears of it (every follower's process listens there). Returns the
   fence. */
#define SIMBA__REDIS_LUA_GRANT                                                              \
    "local function grant(c, ms, us, store)\n"                                              \
    "  local f = us\n"                                                                      \
    "  local last = redis.call('GET', KEYS[2])\n"                                           \
    "  if last and tonumber(last) >= tonumber(us) then f = string.format('%.0f', tonumber(last) + 1) end\n" \
    "  redis.call('SET', KEYS[2], f)\n"                                                     \
    "  local who = ARGV[11] .. ' ' .. c .. ARGV[12]\n"                                      \
    "  store('v' .. f .. ' ' .. ms .. ' ' .. ms .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. who)\n" \
    "  redis.call(PUB, ARGV[4], 'holder ' .. f .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' 0 ' .. who)\n" \
    "  return f\n"                                                                          \
    "end\n"

/* SEMAPHORES AND READ-WRITE LOCKS. Beside the owner record (a mutex's owner, a read-write
   lock's writer), the holders set "<prefix>{<name>}:hold", a hash that exists only while a
   name is shared or counted: '#n' the recorded permits, '?<id>' a waiting reader, '=<id>' a
   reader or a semaphore's permit: '0' or '1' (a reader) and then an owner record. It lives as
   long as its longest lease or waiter (keep); holders past their lease end leave when read. */
#define SIMBA__REDIS_LUA_SEM                                                                \
    "local function holders(k, now)\n"                                                      \
    "  local hs = redis.call('HGETALL', k)\n"                                               \
    "  local n, rd, h, nh = nil, {}, {}, 0\n"                                               \
    "  for i = 1, #hs, 2 do\n"                                                              \
    "    local t, id = string.sub(hs[i], 1, 1), string.sub(hs[i], 2)\n"                     \
    "    if t == '#' then n = hs[i + 1]\n"                                                  \
    "    elseif t == '?' then rd[id] = true\n"                                              \
    "    else\n"                                                                            \
    "      local o = rec(string.sub(hs[i + 1], 2))\n"                                       \
    "      if o.err or o[5] <= now then redis.call('HDEL', k, hs[i])\n"                     \
    "      else o.sh = string.sub(hs[i + 1], 1, 1); h[id] = o; nh = nh + 1 end\n"           \
    "    end\n"                                                                             \
    "  end\n"                                                                               \
    "  return n, rd, h, nh\n"                                                               \
    "end\n"                                                                                 \
    "local function keep(k, ms)\n"                                                          \
    "  if redis.call('PTTL', k) < tonumber(ms) then redis.call('PEXPIRE', k, ms) end\n"     \
    "end\n"                                                                                 \
    /* The line in order, dead waiters (place lapsed, nobody listening) leaving it, by the  \
       grant rule with nh holders and busy (a writer holds). With c (a reader when sh):     \
       whether c may be granted now and whether no live waiter is ahead of it. Without: the \
       waiters a grant may go to now (third result). */                                     \
    "local function walk(k, c, sh, N, nh, busy, rd, now, wk)\n"                             \
    "  local out, n, wr = {}, 0, false\n"                                                   \
    "  local function ok(r)\n"                                                              \
    "    if N > 1 then return n < N - nh end\n"                                             \
    "    if busy then return false end\n"                                                   \
    "    if r then return not wr end\n"                                                     \
    "    return nh == 0 and n == 0\n"                                                       \
    "  end\n"                                                                               \
    "  for _, w in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do\n"                       \
    "    if w == c then return ok(sh), n == 0 end\n"                                        \
    "    local e = redis.call('ZSCORE', KEYS[4], w)\n"                                      \
    "    if e and tonumber(e) > now and redis.call('PUBSUB', NSUB, wk .. w)[2] > 0 then\n"  \
    "      if not ok(rd[w]) then return false, false, out end\n"                            \
    "      out[#out + 1] = w\n"                                                             \
    "      n = n + 1\n"                                                                     \
    "      if not rd[w] then wr = true end\n"                                               \
    "    else\n"                                                                            \
    "      redis.call('ZREM', KEYS[3], w)\n"                                                \
    "      redis.call('ZREM', KEYS[4], w)\n"                                                \
    "      redis.call('HDEL', k, '?' .. w)\n"                                               \
    "    end\n"                                                                             \
    "  end\n"                                                                               \
    "  if c then return ok(sh), n == 0 end\n"                                               \
    "  return false, false, out\n"                                                          \
    "end\n"                                                                                 \
    /* A holding ended or readers were let in: each waiter a grant may go to now hears it   \
       on its wake channel. True when one was told. */                                      \
    "local function push(k, c, N, nh, busy, rd, now, wk)\n"                                 \
    "  local _, _, out = walk(k, nil, false, N, nh, busy, rd, now, wk)\n"                   \
    "  for _, w in ipairs(out) do redis.call(PUB, wk .. w, 'released ' .. c) end\n"        \
    "  return #out > 0\n"                                                                   \
    "end\n"
/* ACQUIRE of a shared or counted name (ARGV[13] permits, ARGV[14] '1' for a reader; KEYS[7]
   the holders set), or of any name whose holders set exists. A writer's grant is the
   owner record, as a mutex's; a reader's or a permit's an entry of the set. Another permits
   while anyone holds or waits is refused. Replies add yielded (0) and the live holders. */
#define SIMBA__REDIS_LUA_SEMACQ                                                             \
    "local function sem_acquire(c, o, now, ms, us)\n"                                       \
    "  o = o or nil\n"                                                                      \
    "  local K, N, sh = KEYS[7], tonumber(ARGV[13]), ARGV[14] == '1'\n"                     \
    "  local rn, rd, h, nh = holders(K, now)\n"                                             \
    "  purge(ms)\n"                                                                         \
    "  local queued = redis.call('EXISTS', KEYS[3]) == 1\n"                                 \
    "  if not rn and (o or queued) then rn = '1' end\n"                                     \
    "  if rn and rn ~= ARGV[13] and (o or nh > 0 or queued) then\n"                         \
    "    return redis.error_reply('simba: permits ' .. ARGV[13] .. ' ' .. rn)\n"            \
    "  end\n"                                                                               \
    "  local mine, again = h[c], false\n"                                                   \
    "  if mine and mine.sh == ARGV[14] and ARGV[6] == '1' then\n"                           \
    "    redis.call('HSET', K, '=' .. c, mine.sh .. 'v' .. mine[1] .. ' ' .. mine[2] .. ' ' .. ms .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. mine[8] .. ' ' .. c .. mine[7])\n" \
    "    keep(K, ARGV[3])\n"                                                                \
    "    return {c, tonumber(ARGV[2]), tonumber(ARGV[3]), now - mine[3], mine[1], 0, mine[7], 0, nh}\n"         \
    "  end\n"                                                                               \
    /* its own holding not renewed (stepped down, an answer lost): a new grant, as a mutex's */ \
    "  if mine then redis.call('HDEL', K, '=' .. c); nh = nh - 1; h[c] = nil; again = true end\n" \
    "  if o and o[6] == c then o = nil; again = true end\n"                                 \
    "  local can, first = again, false\n"                                                   \
    "  if not again then can, first = walk(K, c, sh, N, nh, o ~= nil, rd, now, ARGV[10]) end\n" \
    /* a renewal whose holding has ended is no new grant and takes no place */             \
    "  if ARGV[6] == '1' and not again then return {'', 0, 0, -1, '0', 0, '', 0, nh} end\n" \
    "  if can then\n"                                                                       \
    "    local q, other = quarantine(now, ms)\n"                                            \
    "    if other or q > 0 then\n"                                                          \
    "      if ARGV[6] == '1' then return {'', 0, 0, -1, '0', 0, '', 0, nh} end\n"           \
    "      if other then return redis.error_reply('simba: ' .. other) end\n"                \
    "      return redis.error_reply('simba: quarantine ' .. q)\n"                           \
    "    end\n"                                                                             \
    "    local f = grant(c, ms, us, function(r)\n"                                          \
    "      if redis.call('ZREM', KEYS[3], c) > 0 then redis.call('ZREM', KEYS[4], c) end\n" \
    "      redis.call('HDEL', K, '?' .. c)\n"                                               \
    "      if N == 1 and not sh then\n"                                                     \
    "        redis.call('SET', KEYS[1], r, 'PX', ARGV[3])\n"                                \
    "      else\n"                                                                          \
    "        redis.call('HSET', K, '=' .. c, ARGV[14] .. r, '#n', ARGV[13])\n"              \
    "        nh = nh + 1\n"                                                                 \
    "        keep(K, ARGV[3])\n"                                                            \
    /* readers behind it at the head of the line go too */                                  \
    "        if sh then push(K, c, N, nh, false, rd, now, ARGV[10]) end\n"                  \
    "      end\n"                                                                           \
    "    end)\n"                                                                            \
    "    return {c, tonumber(ARGV[2]), tonumber(ARGV[3]), 0, f, 0, ARGV[12], 0, nh + ((N == 1 and not sh) and 1 or 0)}\n" \
    "  end\n"                                                                               \
    "  enqueue(c, now, ms, us, ARGV[5])\n"                                                  \
    "  redis.call('HSET', K, '#n', ARGV[13])\n"                                             \
    "  if sh then redis.call('HSET', K, '?' .. c, '1') else redis.call('HDEL', K, '?' .. c) end\n" \
    "  keep(K, ARGV[5])\n"                                                                  \
    /* the waiter times its next ask by the holder whose permit frees first */              \
    "  local b, fst, tot = o, first and 1 or 0, nh + (o and 1 or 0)\n"                      \
    "  for _, x in pairs(h) do if not b or x[5] < b[5] then b = x end end\n"                \
    "  if not b then return {'', 0, 0, -1, '0', fst, '', 0, tot} end\n"                     \
    "  local p = b[5] - now\n"                                                              \
    "  if p < 0 then p = 0 end\n"                                                           \
    "  return {b[6], b[4] - now, p, now - b[3], b[1], fst, b[7], 0, tot}\n"                 \
    "end\n"
/* RELEASE and FORCE of a holder of the set (KEYS[5]): its entry goes (or its place in the
   line), and the waiters it frees hear it. own: the releaser's listeners on the event
   channel (ARGV[2]). */
#define SIMBA__REDIS_LUA_SEMREL                                                             \
    "local function sem_release(c, o, own)\n"                                               \
    "  o = o or nil\n"                                                                      \
    "  local now = clock()\n"                                                               \
    "  local rn, rd, h, nh = holders(KEYS[5], now)\n"                                       \
    "  if redis.call('ZREM', KEYS[3], c) > 0 then redis.call('ZREM', KEYS[4], c) end\n"     \
    "  redis.call('HDEL', KEYS[5], '?' .. c)\n"                                             \
    "  if h[c] then\n"                                                                      \
    "    redis.call('HDEL', KEYS[5], '=' .. c)\n"                                           \
    "    nh = nh - 1\n"                                                                     \
    "    if not push(KEYS[5], c, tonumber(rn or '1'), nh, o ~= nil, rd, now, ARGV[3]) then tell_watchers(own) end\n" \
    "  end\n"                                                                               \
    "  if nh == 0 and redis.call('EXISTS', KEYS[3]) == 0 then redis.call('DEL', KEYS[5]) end\n" \
    "  return {'', 0, 0, -1, '0', 0, '', 0, nh + (o and 1 or 0)}\n"                         \
    "end\n"
/* ARGV: contender, ttl, lease (ttl + transition), owner channel, live ms (how long this
   waiter keeps its place without asking again, from the core), renew (1: the contender
   believes it owns the mutex), quarantine ms, the server's run_id ('' = unknown), durable
   (1: AOF with appendfsync always, so a restart keeps every write), wake channel prefix,
   the contender's length (digits), the value a new grant stores.
   A grant (a new ownership) happens only where no owner record exists or where the record
   names this contender but it does not renew (it stepped down locally, or lost an answer):
   both pass the data-loss check. A renewal of a record that exists needs none, and keeps
   the stored value.
   Fairness: a free mutex (no record: released, or its lease fully over) goes only to the
   head of the queue; anyone else joins the line and is told "nobody", so that it asks
   again later while the head keeps the mutex reserved. */
#define SIMBA__REDIS_LUA_ACQUIRE                                                            \
    "local c = ARGV[1]\n"                                                                   \
    "local ttl = tonumber(ARGV[2])\n"                                                       \
    "local lease = tonumber(ARGV[3])\n"                                                     \
    "local now, ms, us = clock()\n"                                                         \
    "local v = redis.call('GET', KEYS[1])\n"                                                \
    "local o = v and rec(v)\n"                                                              \
    "if o and o.err then return o end\n"                                                    \
    "if o and o[6] == c and ARGV[6] == '1' then\n"                                          \
    "  redis.call('SET', KEYS[1], 'v' .. o[1] .. ' ' .. o[2] .. ' ' .. ms .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. o[8] .. ' ' .. c .. o[7], 'PX', ARGV[3])\n" \
    "  if redis.call('ZREM', KEYS[3], c) > 0 then redis.call('ZREM', KEYS[4], c) end\n"     \
    "  return {c, ttl, lease, now - o[3], o[1], 0, o[7]}\n"                                 \
    "end\n"                                                                                 \
    /* A name shared or counted, or with a holders set: SEMAPHORES AND READ-WRITE LOCKS. */ \
    "if ARGV[13] ~= '1' or ARGV[14] == '1' or redis.call('EXISTS', KEYS[7]) == 1 then\n"    \
    "  return sem_acquire(c, o, now, ms, us)\n"                                             \
    "end\n"                                                                                 \
    /* A renewal whose record is gone (its lease ended, or the store lost it) or another's   \
       is no new grant and takes no place: the owner steps down and asks anew. */          \
    "if ARGV[6] == '1' then\n"                                                              \
    "  if not o then return {'', 0, 0, -1, '0', 0, ''} end\n"                               \
    "  return {o[6], o[4] - now, math.max(o[5] - now, 0), now - o[3], o[1], 0, o[7]}\n"     \
    "end\n"                                                                                 \
    "local inq\n"                                                                           \
    "if not o then\n"                                                                       \
    /* Free: it is the head's, if the head is alive (its place not lapsed and its process   \
       still listening on its wake channel); a dead or garbage head leaves the line. An empty \
       queue costs one EXISTS, as the ZREM it replaces did. */                              \
    "  local h = redis.call('EXISTS', KEYS[3]) == 1 and redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n" \
    "  for i = 1, 16 do\n"                                                                  \
    "    if not h or h == c then break end\n"                                               \
    "    local e = redis.call('ZSCORE', KEYS[4], h)\n"                                      \
    "    if e and tonumber(e) > now and redis.call('PUBSUB', NSUB, ARGV[10] .. h)[2] > 0 then break end\n" \
    "    redis.call('ZREM', KEYS[3], h)\n"                                                  \
    "    redis.call('ZREM', KEYS[4], h)\n"                                                  \
    "    h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n"                                      \
    "  end\n"                                                                               \
    "  if h and h ~= c then\n"                                                              \
    "    enqueue(c, now, ms, us, ARGV[5])\n"                                                \
    "    return {'', 0, 0, -1, '0', 0, ''}\n"                                               \
    "  end\n"                                                                               \
    "  inq = h == c\n"                                                                      \
    "end\n"                                                                                 \
    "if not o or o[6] == c then\n"                                                          \
    "  local q, other = quarantine(now, ms)\n"                                              \
    "  if other or q > 0 then\n"                                                            \
    /* The owner whose record is gone learns it at once and steps down. */                  \
    "    if ARGV[6] == '1' then return {'', 0, 0, -1, '0', 0, ''} end\n"                    \
    "    if other then return redis.error_reply('simba: ' .. other) end\n"                  \
    /* Refused for the quarantine, it keeps its place in line until it ends: arrival order. */ \
    "    enqueue(c, now, ms, us, q + tonumber(ARGV[5]))\n"                                  \
    "    return redis.error_reply('simba: quarantine ' .. q)\n"                             \
    "  end\n"                                                                               \
    "  local f = grant(c, ms, us, function(r)\n"                                            \
    "    redis.call('SET', KEYS[1], r, 'PX', ARGV[3])\n"                                    \
    "    if inq ~= false and redis.call('ZREM', KEYS[3], c) > 0 then redis.call('ZREM', KEYS[4], c) end\n" \
    "  end)\n"                                                                              \
    "  return {c, ttl, lease, 0, f, 0, ARGV[12]}\n"                                         \
    "end\n"                                                                                 \
    "local p = o[5] - now\n"                                                                \
    "if p < 0 then p = 0 end\n"                                                             \
    "local first = 0\n"                                                                     \
    "if enqueue(c, now, ms, us, ARGV[5]) then first = 1 end\n"                              \
    "return {o[6], o[4] - now, p, now - o[3], o[1], first, o[7]}\n"

/* The head of the line hears of a release on its wake channel ('released <releaser>'); a
   head that is not alive (its place lapsed, nobody listening) leaves the line. True when
   one was woken. KEYS[3], KEYS[4]: queue and qexp; ARGV[3]: the wake channel prefix. */
#define SIMBA__REDIS_LUA_WAKE_HEAD                                                          \
    "local function wake_head(c)\n"                                                         \
    "  local w = redis.call('ZRANGE', KEYS[3], 0, 0)\n"                                     \
    "  if #w == 0 then return false end\n"                                                  \
    "  local now = clock()\n"                                                               \
    "  for i = 1, 16 do\n"                                                                  \
    "    if w[1] ~= c then\n"                                                               \
    "      local e = redis.call('ZSCORE', KEYS[4], w[1])\n"                                 \
    "      if e and tonumber(e) > now and\n"                                                \
    "         redis.call(PUB, ARGV[3] .. w[1], 'released ' .. c) > 0 then\n"                \
    "        return true\n"                                                                 \
    "      end\n"                                                                           \
    "    end\n"                                                                             \
    "    redis.call('ZREM', KEYS[3], w[1])\n"                                               \
    "    redis.call('ZREM', KEYS[4], w[1])\n"                                               \
    "    w = redis.call('ZRANGE', KEYS[3], 0, 0)\n"                                         \
    "    if #w == 0 then break end\n"                                                       \
    "  end\n"                                                                               \
    "  return false\n"                                                                      \
    "end\n"                                                                                 \
    /* Nobody to wake: tell every watcher, unless the only one is the releaser itself. */   \
    "local function tell_watchers(own)\n"                                                   \
    "  if redis.call('PUBSUB', NSUB, ARGV[2])[2] > tonumber(own) then\n"                    \
    "    redis.call(PUB, ARGV[2], 'released')\n"                                            \
    "  end\n"                                                                               \
    "end\n"

/* ARGV: contender, event channel, wake channel prefix (the waiter id is appended), how many
   of the event channel's subscribers are the releaser's own (0 or 1) */
#define SIMBA__REDIS_LUA_RELEASE                                                            \
    "local c = ARGV[1]\n"                                                                   \
    "local v = redis.call('GET', KEYS[1])\n"                                                \
    "local o = v and rec(v)\n"                                                              \
    "if o and o.err then return o end\n"                                                    \
    "if not o or o[6] ~= c then\n"                                                          \
    /* not the owner: a reader or a permit, if the name has a holders set */               \
    "  if redis.call('EXISTS', KEYS[5]) == 1 then return sem_release(c, o, ARGV[4]) end\n"  \
    "  if redis.call('ZREM', KEYS[3], c) > 0 then redis.call('ZREM', KEYS[4], c) end\n"     \
    "  return current(o, (clock()))\n"                                                      \
    "end\n"                                                                                 \
    "redis.call('DEL', KEYS[1])\n"                                                          \
    /* An owner is never queued (its grant and renewals take it out): an empty queue needs  \
       no clock. Only the head's expiry is checked, not a purge of the whole queue: a live  \
       head costs one ZSCORE, and dead entries behind it go when they come to the head or   \
       when the next waiter enters. */                                                      \
    "if not wake_head(c) then tell_watchers(ARGV[4]) end\n"                                 \
    "return {'', 0, 0, -1, '0', 0, ''}\n"

/* The owner's own check for SET_VALUE and YIELD: the record names the contender ARGV[1]
   with the fence ARGV[2] and its lease has not ended by the server's clock. */
#define SIMBA__REDIS_LUA_HOLDS                                                              \
    "local now, ms, us = clock()\n"                                                         \
    "local v = redis.call('GET', KEYS[1])\n"                                                \
    "local o = v and rec(v)\n"                                                              \
    "if o and o.err then return o end\n"                                                    \
    "if not o or o[6] ~= ARGV[1] or o[1] ~= ARGV[2] or o[5] <= now or not o[9] then\n"      \
    "  return redis.error_reply('simba: not held ' .. (o and o[1] or '0'))\n"               \
    "end\n"

/* SET_VALUE of a reader or a permit (KEYS[2]: the holders set): its entry, as the owner's
   record below. */
#define SIMBA__REDIS_LUA_SETVAL_HOLDER                                                      \
    "local hv = redis.call('HGET', KEYS[2], '=' .. ARGV[1])\n"                              \
    "if hv then\n"                                                                          \
    "  local now = clock()\n"                                                               \
    "  local o = rec(string.sub(hv, 2))\n"                                                  \
    "  if o.err or o[1] ~= ARGV[2] or o[5] <= now then return redis.error_reply('simba: not held ' .. (o[1] or '0')) end\n" \
    "  redis.call('HSET', KEYS[2], '=' .. ARGV[1], string.sub(hv, 1, o[9]) .. ARGV[1] .. ARGV[3])\n" \
    "  local held = now - o[3]\n"                                                           \
    "  redis.call(PUB, ARGV[4], 'holder ' .. o[1] .. ' ' .. (o[4] - now) .. ' ' .. (o[5] - now) .. ' ' .. held .. ' ' .. o[8] .. ' ' .. ARGV[1] .. ARGV[3])\n" \
    "  return {ARGV[1], o[4] - now, o[5] - now, held, o[1], 0, ARGV[3]}\n"                  \
    "end\n"
/* SET_VALUE (KEYS: owner, holders set). ARGV: contender, fence, the new value, owner channel.
   The record keeps its fields and its expiry; observers hear of the change as of a grant. */
#define SIMBA__REDIS_LUA_SETVAL                                                             \
    "redis.call('SET', KEYS[1], string.sub(v, 1, o[9] - 1) .. ARGV[1] .. ARGV[3], 'PX', string.format('%.0f', o[5] - now))\n" \
    "local held = now - o[3]\n"                                                             \
    "redis.call(PUB, ARGV[4], 'holder ' .. o[1] .. ' ' .. (o[4] - now) .. ' ' .. (o[5] - now) .. ' ' .. held .. ' ' .. o[8] .. ' ' .. ARGV[1] .. ARGV[3])\n" \
    "return {ARGV[1], o[4] - now, o[5] - now, held, o[1], 0, ARGV[3]}\n"

/* YIELD (KEYS: owner, fence, queue, qexp; the holders set fifth). ARGV: contender, fence, wake channel prefix,
   live ms. With a live waiter, the release's steps (the record deleted, the head woken on
   its own channel, which keeps the mutex for it), then the contender joins the back of the
   line; with none, nothing changes and the answer is the owner's. */
#define SIMBA__REDIS_LUA_YIELD                                                              \
    "if not wake_head(ARGV[1]) then\n"                                                      \
    "  return {ARGV[1], o[4] - now, o[5] - now, now - o[3], o[1], 0, o[7], 0}\n"            \
    "end\n"                                                                                 \
    "redis.call('DEL', KEYS[1])\n"                                                          \
    "enqueue(ARGV[1], now, ms, us, ARGV[4])\n"                                              \
    "return {'', 0, 0, -1, '0', 0, '', 1}\n"

/* YIELD of a reader or a permit (KEYS[5]: the holders set): if its permit, once free, goes
   to a live waiter, in one step its entry goes, the waiters it frees hear it and it joins
   the back of the line; else nothing changes and the answer is its own holding. */
#define SIMBA__REDIS_LUA_YIELD_HOLDER                                                       \
    "local hv = redis.call('HGET', KEYS[5], '=' .. ARGV[1])\n"                              \
    "if hv then\n"                                                                          \
    "  local now, ms, us = clock()\n"                                                       \
    "  local o = rec(string.sub(hv, 2))\n"                                                  \
    "  if o.err or o[1] ~= ARGV[2] or o[5] <= now then return redis.error_reply('simba: not held ' .. (o[1] or '0')) end\n" \
    "  local rn, rd, h, nh = holders(KEYS[5], now)\n"                                       \
    "  local own = redis.call('EXISTS', KEYS[1]) == 1\n"                                    \
    "  local _, _, out = walk(KEYS[5], nil, false, tonumber(rn or '1'), nh - 1, own, rd, now, ARGV[3])\n" \
    "  if #out == 0 then return {ARGV[1], o[4] - now, o[5] - now, now - o[3], o[1], 0, o[7], 0, nh} end\n" \
    "  redis.call('HDEL', KEYS[5], '=' .. ARGV[1])\n"                                       \
    "  for _, w in ipairs(out) do redis.call(PUB, ARGV[3] .. w, 'released ' .. ARGV[1]) end\n" \
    "  enqueue(ARGV[1], now, ms, us, ARGV[4])\n"                                            \
    "  if string.sub(hv, 1, 1) == '1' then redis.call('HSET', KEYS[5], '?' .. ARGV[1], '1') end\n" \
    "  keep(KEYS[5], ARGV[4])\n"                                                            \
    "  return {'', 0, 0, -1, '0', 0, '', 1, nh - 1}\n"                                      \
    "end\n"

/* A forced release (simba_force_release): as the owner's own release, but the owner is
   named by its fence (ARGV[1]). Returns 1 when it was cleared. */
#define SIMBA__REDIS_LUA_FORCE                                                              \
    "local v = redis.call('GET', KEYS[1])\n"                                                \
    "local o = v and rec(v)\n"                                                              \
    "if o and o.err then return o end\n"                                                    \
    "if (not o or o[1] ~= ARGV[1]) and redis.call('EXISTS', KEYS[5]) == 1 then\n"          \
    "  local _, _, h = holders(KEYS[5], (clock()))\n"                                       \
    "  for id, x in pairs(h) do\n"                                                          \
    "    if x[1] == ARGV[1] then sem_release(id, o, 0); return 1 end\n"                     \
    "  end\n"                                                                               \
    "end\n"                                                                                 \
    "if not o or o[1] ~= ARGV[1] then return 0 end\n"                                       \
    "redis.call('DEL', KEYS[1])\n"                                                          \
    "if not wake_head(o[6]) then tell_watchers(0) end\n"                                    \
    "return 1\n"

/* A view of one mutex: {owner, fence, acquired, held, ttl_left, lease_left, value} as
   strings ('' owner = nobody; the fence key keeps the last fence), server ms. */
#define SIMBA__REDIS_LUA_VIEW                                                               \
    "local function view(ko, kf, now)\n"                                                    \
    "  local v = redis.call('GET', ko)\n"                                                   \
    "  local o = v and rec(v)\n"                                                            \
    "  local f = redis.call('GET', kf) or '0'\n"                                            \
    "  if not o or o.err then return {'', f, '-1', '-1', '-1', '-1', ''} end\n"             \
    "  return {o[6], o[1], o[2], tostring(now - o[3]), tostring(o[4] - now), tostring(o[5] - now), o[7]}\n" \
    "end\n"

/* KEYS: owner, fence, queue, qexp. The view, then the live waiters' count and the first
   ARGV[1] of them, oldest first. */
#define SIMBA__REDIS_LUA_INSPECT                                                            \
    "local now = clock()\n"                                                                 \
    "local r = view(KEYS[1], KEYS[2], now)\n"                                               \
    "local ids, n = {}, 0\n"                                                                \
    "for _, c in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do\n"                         \
    "  local e = redis.call('ZSCORE', KEYS[4], c)\n"                                        \
    "  if e and tonumber(e) > now then\n"                                                   \
    "    n = n + 1\n"                                                                       \
    "    if n <= tonumber(ARGV[1]) then ids[n] = c end\n"                                   \
    "  end\n"                                                                               \
    "end\n"                                                                                 \
    "r[8] = tostring(n)\n"                                                                  \
    "for i, c in ipairs(ids) do r[8 + i] = c end\n"                                         \
    /* then the recorded permits ('' = none) and each holder of the set: id, fence,        \
       acquired, held, ttl left, lease left, value, '1' for a reader */                    \
    "local pn, _, h = holders(KEYS[5], now)\n"                                              \
    "if not pn and (r[1] ~= '' or n > 0) then pn = '1' end\n"                               \
    "r[#r + 1] = pn or ''\n"                                                                \
    "for id, o in pairs(h) do\n"                                                            \
    "  for _, x in ipairs({id, o[1], o[2], tostring(now - o[3]), tostring(o[4] - now), tostring(o[5] - now), o[7], o.sh}) do\n" \
    "    r[#r + 1] = x\n"                                                                   \
    "  end\n"                                                                               \
    "end\n"                                                                                 \
    "return r\n"

/* One page of a listing (no keys: the node it runs on). ARGV: SCAN cursor, the fence keys'
   pattern, the prefix. Returns {next cursor, then per mutex its name, its view, the number
   of live holders of its holders set, and INSPECT's tail: the recorded permits, each holder's
   8 strings}. Read-only: holders past their lease end are skipped, left for a write. */
#define SIMBA__REDIS_LUA_LIST                                                               \
    "local function set_of(k, now, r, owner)\n"                                             \
    "  local hs, pn, h, nh = redis.call('HGETALL', k), '', {}, 0\n"                         \
    "  for i = 1, #hs, 2 do\n"                                                              \
    "    local t = string.sub(hs[i], 1, 1)\n"                                               \
    "    if t == '#' then pn = hs[i + 1]\n"                                                 \
    "    elseif t == '=' then\n"                                                            \
    "      local o = rec(string.sub(hs[i + 1], 2))\n"                                       \
    "      if not o.err and o[5] > now then\n"                                              \
    "        nh = nh + 1\n"                                                                 \
    "        for _, x in ipairs({string.sub(hs[i], 2), o[1], o[2], tostring(now - o[3]), tostring(o[4] - now), tostring(o[5] - now), o[7], string.sub(hs[i + 1], 1, 1)}) do h[#h + 1] = x end\n" \
    "      end\n"                                                                           \
    "    end\n"                                                                             \
    "  end\n"                                                                               \
    /* as INSPECT: an owner alone holds 1 permit; nobody holding, none */                   \
    "  if pn == '' and owner ~= '' then pn = '1' end\n"                                     \
    "  if nh == 0 and owner == '' then pn = '' end\n"                                       \
    "  r[#r + 1] = tostring(nh)\n"                                                          \
    "  r[#r + 1] = pn\n"                                                                    \
    "  for _, x in ipairs(h) do r[#r + 1] = x end\n"                                        \
    "end\n"                                                                                 \
    "local now = clock()\n"                                                                 \
    "local page = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 1000)\n"           \
    "local r = {page[1]}\n"                                                                 \
    "local n = #ARGV[3]\n"                                                                  \
    "for _, k in ipairs(page[2]) do\n"                                                      \
    "  local name = string.match(string.sub(k, n + 1), '^{([^{}]+)}:fence$')\n"             \
    "  if name then\n"                                                                      \
    "    r[#r + 1] = name\n"                                                                \
    "    local b, at = string.sub(k, 1, -6), #r\n"                                          \
    "    for _, x in ipairs(view(b .. 'owner', k, now)) do r[#r + 1] = x end\n"             \
    "    set_of(b .. 'hold', now, r, r[at + 1])\n"                                          \
    "  end\n"                                                                               \
    "end\n"                                                                                 \
    "return r\n"

/* KEYS: owner only */
#define SIMBA__REDIS_LUA_READ                                                               \
    "local v = redis.call('GET', KEYS[1])\n"                                                \
    "local o = v and rec(v)\n"                                                              \
    "if o and o.err then return o end\n"                                                    \
    "return current(o, (clock()))\n"

/* The fenced write (simba_redis_fenced). KEYS: owner, fence, holders set, then the command's
   keys (all in the mutex's slot); ARGV: the fence, then the command. The command runs only
   while the record (or a reader's or a permit's entry of the holders set) holds that fence
   and the server's clock has not passed its lease end (ttl + transition): the rule of a
   grant, so nobody else can have been granted since. Returns
   {1, the command's reply}, a refusal {0, owner record there (1/0), its fence (or the
   last one handed out), lease left ms}, or the command's own error. */
#define SIMBA__REDIS_LUA_FENCED                                                             \
    "local now = clock()\n"                                                                 \
    "local v = redis.call('GET', KEYS[1])\n"                                                \
    "local o = v and rec(v)\n"                                                              \
    "if o and o.err then return o end\n"                                                    \
    /* a reader or a permit of the holders set (KEYS[3]) that holds the fence, live */       \
    "local h = false\n"                                                                     \
    "if not o or o[1] ~= ARGV[1] then\n"                                                    \
    "  local hs = redis.call('HGETALL', KEYS[3])\n"                                         \
    "  for i = 1, #hs, 2 do\n"                                                              \
    "    if string.sub(hs[i], 1, 1) == '=' then\n"                                          \
    "      local x = rec(string.sub(hs[i + 1], 2))\n"                                       \
    "      if not x.err and x[1] == ARGV[1] and x[5] >= now then h = true end\n"            \
    "    end\n"                                                                             \
    "  end\n"                                                                               \
    "end\n"                                                                                 \
    "if not h and o and (o[1] ~= ARGV[1] or o[5] < now) then return {0, 1, o[1], o[5] - now} end\n" \
    "if not h and not o then return {0, 0, redis.call('GET', KEYS[2]) or '0', -1} end\n"    \
    "local r = redis.pcall(unpack(ARGV, 2))\n"                                              \
    "if type(r) == 'table' and r.err then return r end\n"                                   \
    "return {1, r}\n"

enum { SIMBA__RS_ACQUIRE, SIMBA__RS_RELEASE, SIMBA__RS_READ, SIMBA__RS_INSPECT, SIMBA__RS_LIST, SIMBA__RS_FORCE,
       SIMBA__RS_SETVAL, SIMBA__RS_YIELD, SIMBA__RS_FENCED, SIMBA__RS_N };
/* Standalone scripts publish with PUBLISH and count listeners with PUBSUB NUMSUB; the
   Cluster ones use sharded pub/sub (Redis >= 7), so a wake-up goes to the mutex's own shard
   and PUBSUB SHARDNUMSUB counts the listeners there, not on whichever node runs the script. */
#define SIMBA__REDIS_LUA_PLAIN "local PUB, NSUB = 'PUBLISH', 'NUMSUB'\n"
#define SIMBA__REDIS_LUA_SHARD "local PUB, NSUB = 'SPUBLISH', 'SHARDNUMSUB'\n"
/* The pieces of each script, in order, after the PUB/NSUB line. */
#define SIMBA__REDIS_LUA_PIECES 8
static const char *const simba__redis_lua[SIMBA__RS_N][SIMBA__REDIS_LUA_PIECES] = {
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_PURGE, SIMBA__REDIS_LUA_QUARANTINE, SIMBA__REDIS_LUA_GRANT, SIMBA__REDIS_LUA_SEM,
     SIMBA__REDIS_LUA_SEMACQ, SIMBA__REDIS_LUA_ACQUIRE, NULL},
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_WAKE_HEAD, SIMBA__REDIS_LUA_SEM, SIMBA__REDIS_LUA_SEMREL, SIMBA__REDIS_LUA_RELEASE, NULL,
     NULL, NULL},
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_READ, NULL, NULL, NULL, NULL, NULL, NULL},
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_SEM, SIMBA__REDIS_LUA_VIEW, SIMBA__REDIS_LUA_INSPECT, NULL, NULL, NULL, NULL},
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_VIEW, SIMBA__REDIS_LUA_LIST, NULL, NULL, NULL, NULL, NULL},
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_WAKE_HEAD, SIMBA__REDIS_LUA_SEM, SIMBA__REDIS_LUA_SEMREL, SIMBA__REDIS_LUA_FORCE, NULL,
     NULL, NULL},
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_SETVAL_HOLDER, SIMBA__REDIS_LUA_HOLDS, SIMBA__REDIS_LUA_SETVAL, NULL, NULL, NULL, NULL},
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_PURGE, SIMBA__REDIS_LUA_WAKE_HEAD, SIMBA__REDIS_LUA_SEM,
     SIMBA__REDIS_LUA_YIELD_HOLDER, SIMBA__REDIS_LUA_HOLDS, SIMBA__REDIS_LUA_YIELD, NULL},
    {SIMBA__REDIS_LUA_REC, SIMBA__REDIS_LUA_FENCED, NULL, NULL, NULL, NULL, NULL, NULL}};
/* Room for the longest script (a test checks that each fits). */
#define SIMBA__REDIS_LUA_CAP 16384
/* Script idx as the server loads it (Cluster: sharded pub/sub) into buf: its length, or 0
   when it does not fit. */
static size_t simba__redis_lua_text(int cluster, int idx, char *buf, size_t cap) {
    const char *head = cluster ? SIMBA__REDIS_LUA_SHARD : SIMBA__REDIS_LUA_PLAIN;
    size_t n = strlen(head), k;
    int i;
    if (n >= cap) return 0;
    memcpy(buf, head, n);
    for (i = 0; i < SIMBA__REDIS_LUA_PIECES && simba__redis_lua[idx][i]; i++) {
        k = strlen(simba__redis_lua[idx][i]);
        if (k >= cap - n) return 0;
        memcpy(buf + n, simba__redis_lua[idx][i], k);
        n += k;
    }
    buf[n] = 0;
    return n;
}
/* The script that serves a request. */
static int simba__redis_script(simba_op op) {
    switch (op) {
    case SIMBA_OP_ACQUIRE: return SIMBA__RS_ACQUIRE;
    case SIMBA_OP_RELEASE: return SIMBA__RS_RELEASE;
    case SIMBA_OP_INSPECT: return SIMBA__RS_INSPECT;
    case SIMBA_OP_LIST: return SIMBA__RS_LIST;
    case SIMBA_OP_FORCE_RELEASE: return SIMBA__RS_FORCE;
    case SIMBA_OP_SET_VALUE: return SIMBA__RS_SETVAL;
    case SIMBA_OP_YIELD: return SIMBA__RS_YIELD;
    case SIMBA_OP_CALL: return SIMBA__RS_FENCED;
    default: return SIMBA__RS_READ;
    }
}

/* Channels and mutexes are kept in the core's hash map (simba__htab), each node keyed by
   a copy of its string that the node owns. */

/* A zeroed record of size bytes that starts with its node, keyed by a copy of name and put
   in map; NULL when out of memory (nothing kept). */
static simba__hnode *simba__redis_node_new(simba_loop *loop, simba__htab *map, size_t size, const char *name) {
    simba__hnode *n = (simba__hnode *)simba__zalloc(loop, size);
    if (!n) return NULL;
    n->key = simba__strdup(loop, name);
    if (!n->key || !simba__hinsert(map, n, simba__lalloc, simba__lfree, loop)) {
        simba_free(loop, (void *)n->key);
        simba_free(loop, n);
        return NULL;
    }
    return n;
}

/* ---- state --------------------------------------------------------------------------- */

struct simba__redis;
struct simba__rmutex;

/* Idle wake subscriptions kept per mutex (their contenders released): a contender that
   comes back finds its channel subscribed, churning ids do not pile up. */
#define SIMBA__REDIS_IDLE_WAKES 8

enum { SIMBA__RSUB_EV, SIMBA__RSUB_OW, SIMBA__RSUB_WAKE };

/* One subscribed channel: a mutex's event or owner channel, or one contender's wake
   channel. */
typedef struct simba__rsub {
    simba__hnode node; /* key = channel */
    struct simba__rsub *mnext;
    struct simba__rmutex *m;
    char *contender; /* wake channels only */
    int kind;
    int confirmed;    /* the server acknowledged the SUBSCRIBE on the current connection */
    int idle;         /* wake: its contender released since its last acquire */
    uint32_t acq_seq; /* wake: acquires submitted, so a late release answer is recognised */
} simba__rsub;

typedef struct simba__rmutex {
    simba__hnode node; /* key = mutex name */
    int refs;
    int nidle;
    simba__rsub *ev;
    simba__rsub *ow;    /* once this backend has followed the mutex (an observer, a waiter) */
    simba__rsub *wakes; /* most recently acquired first */
} simba__rmutex;

/* A request in flight (or queued for the connection). Pooled: steady state allocates
   nothing of simba's own; hiredis' buffers are its own business. The pool keeps at most
   SIMBA__REDIS_POOL_KEEP spare records (~150 B each): 10,000 services started at once have
   as many requests in flight once, and keeping all of them would cost that much a service
   for good; renewals that the core sends together (its renewal grid) stay well below. */
#define SIMBA__REDIS_POOL_KEEP 1024
typedef struct simba__rop {
    struct simba__rop *next, *prev;
    struct simba__rop *all_next, *all_prev;
    struct simba__redis *r;
    simba_req *req;
    int64_t deadline;
    int retried;
    int hops;     /* Cluster: MOVED/ASK redirections followed so far */
    int asking;   /* Cluster: send ASKING first (an ASK redirection) */
    uint32_t seq; /* RELEASE: its contender's acq_seq when submitted */
    char cursor[24]; /* LIST: the SCAN cursor of the next page */
    /* desc.wait_replicas: the script's answer, kept until the WAIT after it answers */
    int waits, have;
    long long acked;
    simba_reply wrep; /* a grant: its owner is req->contender, which outlives the op */
} simba__rop;

enum { SIMBA__RC_DOWN, SIMBA__RC_CONNECTING, SIMBA__RC_READY };
/* Handshake steps that are not scripts. The probes (INFO, CONFIG GET) may be refused by a
   server that renamed them or an ACL: that is noted, never a reason to drop the connection. */
enum { SIMBA__RHS_PLAIN = -1, SIMBA__RHS_INFO = -2, SIMBA__RHS_FSYNC = -3, SIMBA__RHS_ROLE = -4, SIMBA__RHS_MARKER = -5 };
#define SIMBA__REDIS_SENTINELS_MAX 8

struct simba__rconn;
/* privdata of a handshake command */
struct simba__rhs {
    struct simba__rconn *c;
    int script; /* index into simba__redis_lua, or one of SIMBA__RHS_* */
};

typedef struct simba__rconn {
    struct simba__redis *r;
    redisAsyncContext *ac;
    int is_sub;
    int is_sen; /* the Sentinel connection */
    int state;
    int rd, wr; /* events hiredis asked for */
    int fd;
    int hs_left, hs_failed;
    int was_ready;
    int64_t deadline; /* CONNECTING: connect deadline; DOWN: next attempt */
    int64_t backoff;
    uint64_t writes; /* times buffered commands were written (tests: batching is one write) */
    struct simba__rhs hs[SIMBA__RS_N + 6]; /* AUTH, SELECT, scripts, INFO, CONFIG GET, ROLE, GET alive */
} simba__rconn;

struct simba__rcluster;
typedef struct simba__redis {
    simba_loop *loop;
    simba_backend *be;
    int cluster;                   /* 1: a node of a Cluster router (sharded pub/sub, keys) */
    struct simba__rcluster *router; /* the router this node serves, NULL when standalone */
    int moved_noted;               /* standalone: a MOVED or CROSSSLOT reply was logged */
    char cfg_msg[200];             /* its message */
    char (*tags)[SIMBA__RCL_TAG];  /* Cluster node: the router's marker tag per slot */
    int wait_replicas;
    int64_t wait_to;
    /* Sentinel: where to ask, and whether host:port is the primary they named */
    char *master_name;
    char sen_host[SIMBA__REDIS_SENTINELS_MAX][48];
    int sen_port[SIMBA__REDIS_SENTINELS_MAX];
    int nsen, sen_i, addr_ok;
    simba__rconn sen;
    char *host, *unix_path, *username, *password, *prefix;
    int port, db;
    int64_t connect_to, cmd_to, rmin, rmax;
    char sha[SIMBA__RS_N][41];
    simba__rconn cmd, sub;
    simba__rop *inflight, *inflight_tail; /* on cmd, in send order */
    simba__rop *pending, *pending_tail;   /* waiting for cmd to come up */
    simba__rop *free_ops, *all_ops;
    int nfree_ops;
    char werr[200]; /* a wait_replicas refusal's message, read by simba_req_done at once */
    simba__htab mutexes, chans;
    int reset_pending;
    int destroying;
    int64_t io_at; /* loop time of the last process() that was handed a ready set */
    int64_t max_lease;     /* desc.max_lease_ms or its default: the quarantine, kept in the marker */
    int allow_eviction;
    /* What the server said at the last connect (INFO, CONFIG GET appendfsync). */
    char run_id[48];       /* "" = unknown */
    char policy[48];       /* maxmemory-policy, "" = unknown */
    int aof_on, fsync_always;
    int probe_noted;       /* 1: INFO refused, 2: CONFIG GET refused (said once) */
    char evict_msg[200];
    char err[256];
#ifdef SIMBA_REDIS_TEST_FAULTS
    int test_mute; /* 1: nothing is written on the command connection, as to a hung server */
    int test_slow; /* left unread, as a slow path delays them: 1 the command connection's
                      replies, 2 the subscriber connection's pushes */
#endif
} simba__redis;

/* Test builds: the command connection's writes are held (simba__redis.test_mute), or its
   replies or the subscriber's pushes left unread (test_slow). */
#ifdef SIMBA_REDIS_TEST_FAULTS
#define SIMBA__RCONN_HELD(c) ((c)->r->test_mute && (c) == &(c)->r->cmd)
#define SIMBA__RCONN_SLOW(c) \
    ((((c)->r->test_slow & 1) && (c) == &(c)->r->cmd) || (((c)->r->test_slow & 2) && (c) == &(c)->r->sub))
#else
#define SIMBA__RCONN_HELD(c) 0
#define SIMBA__RCONN_SLOW(c) 0
#endif

/* ---- helpers --------------------------------------------------------------------------- */

static void simba__redis_seterr(simba__redis *r, const char *what, const char *detail) {
    snprintf(r->err, sizeof(r->err), "redis %s%s%s", what, detail && *detail ? ": " : "",
             detail ? detail : "");
    simba_log(r->loop, SIMBA_LOG_WARN, "%s", r->err);
}

/* Key and argument building without printf: every request builds about ten strings, and
   formatting them through vfprintf and hiredis' sdscatfmt was a fifth of the loop's CPU
   in W4 (10,000 mutexes). A builder that runs out of room marks itself and truncates. */
typedef struct simba__rb {
    char *p;
    size_t n, cap;
    int over;
} simba__rb;
static void simba__rb_mem(simba__rb *b, const char *s, size_t l) {
    if (b->over || l >= b->cap - b->n) {
        b->over = 1;
        l = b->n + 1 < b->cap ? b->cap - b->n - 1 : 0;
    }
    memcpy(b->p + b->n, s, l);
    b->n += l;
    b->p[b->n] = 0;
}
static void simba__rb_init(simba__rb *b, char *buf, size_t cap) {
    b->p = buf;
    b->n = 0;
    b->cap = cap;
    b->over = 0;
    buf[0] = 0;
}
static void simba__rb_str(simba__rb *b, const char *s) { simba__rb_mem(b, s, strlen(s)); }
/* decimal text of v into buf (24 bytes); returns its length */
static size_t simba__redis_i64(char *buf, int64_t v) {
    char t[24];
    size_t n = 0, o = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do { t[n++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) buf[o++] = '-';
    while (n) buf[o++] = t[--n];
    buf[o] = 0;
    return o;
}
static void simba__rb_int(simba__rb *b, int64_t v) {
    char t[24];
    simba__rb_mem(b, t, simba__redis_i64(t, v));
}
/* "<prefix>{<mutex>}" into a builder over buf */
static void simba__redis_tag(simba__rb *b, char *buf, size_t cap, const simba__redis *r, const char *mutex) {
    simba__rb_init(b, buf, cap);
    simba__rb_str(b, r->prefix);
    simba__rb_mem(b, "{", 1);
    simba__rb_str(b, mutex);
    simba__rb_mem(b, "}", 1);
}

static int simba__redis_mkname(char *buf, size_t cap, const simba__redis *r, const char *mutex,
                               const char *suffix) {
    simba__rb b;
    simba__redis_tag(&b, buf, cap, r, mutex);
    simba__rb_str(&b, suffix);
    return b.over ? -1 : (int)b.n;
}

/* "<prefix>{<mutex>}<what><db>", then ":<contender>" when contender is not NULL */
static void simba__redis_chan(char *buf, size_t cap, const simba__redis *r, const char *mutex, const char *what,
                              const char *contender) {
    simba__rb b;
    simba__redis_tag(&b, buf, cap, r, mutex);
    simba__rb_str(&b, what);
    simba__rb_int(&b, r->db);
    if (!contender) return;
    simba__rb_mem(&b, ":", 1);
    simba__rb_str(&b, contender);
}

static void simba__redis_evchan(char *buf, size_t cap, const simba__redis *r, const char *mutex) {
    simba__redis_chan(buf, cap, r, mutex, ":ev:", NULL);
}

static void simba__redis_owchan(char *buf, size_t cap, const simba__redis *r, const char *mutex) {
    simba__redis_chan(buf, cap, r, mutex, ":ow:", NULL);
}

static void simba__redis_wkchan(char *buf, size_t cap, const simba__redis *r, const char *mutex,
                                const char *contender) {
    simba__redis_chan(buf, cap, r, mutex, ":wk:", contender ? contender : "");
}

/* The RESP text of one command (*argc, then $len and the bytes of each argument) into buf:
   its length, or 0 when it does not fit (the caller then lets hiredis format it). */
static size_t simba__redis_resp(char *buf, size_t cap, int argc, const char *const *argv, const size_t *lens) {
    simba__rb b;
    int i;
    simba__rb_init(&b, buf, cap);
    simba__rb_mem(&b, "*", 1);
    simba__rb_int(&b, argc);
    simba__rb_mem(&b, "\r\n", 2);
    for (i = 0; i < argc; i++) {
        simba__rb_mem(&b, "$", 1);
        simba__rb_int(&b, (int64_t)lens[i]);
        simba__rb_mem(&b, "\r\n", 2);
        simba__rb_mem(&b, argv[i], lens[i]);
        simba__rb_mem(&b, "\r\n", 2);
    }
    return b.over ? 0 : b.n;
}

/* CRC16-CCITT (XMODEM), the Cluster's key hash. */
static unsigned simba__rcl_crc16(const char *s, size_t n) {
    unsigned crc = 0;
    size_t i;
    int b;
    for (i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)s[i] << 8;
        for (b = 0; b < 8; b++) crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

/* Every key and channel of a mutex carries the hash tag {name} (names have no braces), so
   the slot is the name's. */
static int simba__rcl_slot(const char *mutex) { return (int)(simba__rcl_crc16(mutex, strlen(mutex)) & 16383); }

/* A Cluster slot's marker tag: the first short string (in the order of n = 0, 1, ...: base
   62 digits) that hashes to the slot. Keys "<prefix>{<tag>}:alive" are then one per slot
   and lie in the slot of every mutex that maps there, as a script's keys must. */
static void simba__rcl_tagstr(unsigned long n, char out[SIMBA__RCL_TAG]) {
    static const char dig[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    int k = 0;
    do {
        out[k++] = dig[n % 62];
        n /= 62;
    } while (n && k < SIMBA__RCL_TAG - 1);
    out[k] = 0;
}

/* Fills tags[slot] for all 16384 slots (about 2 ms, once per Cluster backend). */
static void simba__rcl_tags_fill(char (*tags)[SIMBA__RCL_TAG]) {
    unsigned long n;
    int left = 16384;
    char t[SIMBA__RCL_TAG];
    for (n = 0; n < 16384; n++) tags[n][0] = 0;
    for (n = 0; left > 0 && n < 62ul * 62 * 62 * 62; n++) {
        int s;
        simba__rcl_tagstr(n, t);
        s = simba__rcl_slot(t);
        if (!tags[s][0]) {
            memcpy(tags[s], t, SIMBA__RCL_TAG);
            left--;
        }
    }
}


/* ---- request completion ------------------------------------------------------------------ */

static void simba__rop_release(simba__redis *r, simba__rop *op) {
    op->req = NULL;
    if (r->nfree_ops >= SIMBA__REDIS_POOL_KEEP && !r->destroying) {
        /* hiredis holds no callback with it any more: this is its completion */
        if (op->all_prev) op->all_prev->all_next = op->all_next; else r->all_ops = op->all_next;
        if (op->all_next) op->all_next->all_prev = op->all_prev;
        simba_free(r->loop, op);
        return;
    }
    op->next = r->free_ops;
    op->prev = NULL;
    r->free_ops = op;
    r->nfree_ops++;
}

static void simba__redis_wake_released(simba__redis *r, const simba_req *req, uint32_t seq, int ok);
static void simba__rcl_list_part(simba_req *req, const simba_reply *rep);

/* Every answer of a node goes through here: a Cluster listing's part goes to its router. */
static void simba__redis_done(simba__redis *r, simba_req *req, const simba_reply *rep) {
    if (r->router && req->op == SIMBA_OP_LIST) simba__rcl_list_part(req, rep);
    else simba_req_done(req, rep);
}

static void simba__rop_fail(simba__redis *r, simba__rop *op, simba_result rc, const char *msg) {
    simba_reply rep;
    simba_req *req = op->req;
    if (req->op == SIMBA_OP_RELEASE) simba__redis_wake_released(r, req, op->seq, 0);
    simba__reply_fail(&rep, rc, msg && *msg ? msg : NULL);
    simba__rop_release(r, op);
    simba__redis_done(r, req, &rep);
}

static void simba__rop_unlink(simba__redis *r, simba__rop *op) {
    if (op->prev) op->prev->next = op->next; else r->inflight = op->next;
    if (op->next) op->next->prev = op->prev; else r->inflight_tail = op->prev;
    op->next = op->prev = NULL;
}

static void simba__rop_append(simba__redis *r, simba__rop *op) {
    op->next = NULL;
    op->prev = r->inflight_tail;
    if (r->inflight_tail) r->inflight_tail->next = op; else r->inflight = op;
    r->inflight_tail = op;
}

static int simba__redis_int(const redisReply *e, int64_t *out) {
    if (e->type == REDIS_REPLY_INTEGER) {
        *out = (int64_t)e->integer;
        return 0;
    }
    if (e->type == REDIS_REPLY_STRING && e->len > 0 && e->len < 24) {
        char *end;
        long long v = strtoll(e->str, &end, 10);
        if (*end) return -1;
        *out = (int64_t)v;
        return 0;
    }
    return -1;
}

/* Parses a script reply into rep (owner points into the reply). 0 on success. */
static int simba__redis_parse(const redisReply *x, simba_reply *rep) {
    int64_t fence_tmp = 0, first = 0, yielded = 0, holders = 0;
    const redisReply *f, *val;
    if (!x || x->type != REDIS_REPLY_ARRAY || x->elements < 7 || x->elements > 9) return -1;
    val = x->element[6];
    if (val->type != REDIS_REPLY_STRING || val->len > SIMBA_VALUE_MAX) return -1;
    if (x->elements >= 8 && simba__redis_int(x->element[7], &yielded)) return -1;
    if (x->elements == 9 && (simba__redis_int(x->element[8], &holders) || holders < 0 || holders > SIMBA_PERMITS_MAX)) return -1;
    rep->holders = (int)holders;
    if (x->element[0]->type != REDIS_REPLY_STRING || x->element[0]->len > SIMBA_ID_MAX) return -1;
    rep->owner = x->element[0]->str;
    if (simba__redis_int(x->element[1], &rep->ttl_left_ms) ||
        simba__redis_int(x->element[2], &rep->transition_left_ms) ||
        simba__redis_int(x->element[3], &rep->held_ms) || simba__redis_int(x->element[5], &first))
        return -1;
    f = x->element[4];
    if (f->type == REDIS_REPLY_STRING && f->len > 0 && f->len < 24) {
        char *end;
        unsigned long long v = strtoull(f->str, &end, 10);
        if (*end) return -1;
        rep->fence = (uint64_t)v;
    } else if (simba__redis_int(f, &fence_tmp) == 0 && fence_tmp >= 0) {
        rep->fence = (uint64_t)fence_tmp;
    } else {
        return -1;
    }
    rep->first_in_line = first != 0;
    rep->yielded = yielded != 0;
    rep->value = val->len ? (const unsigned char *)val->str : NULL;
    rep->value_len = (size_t)val->len;
    if (!rep->owner[0]) {
        rep->owner = "";
        rep->fence = 0;
        rep->value = NULL;
        rep->value_len = 0;
    }
    /* PTTL and the stored ttl end are separate readings of the same lease: keep the
       contract transition_left >= ttl_left even if a millisecond ticked in between. */
    if (rep->transition_left_ms < rep->ttl_left_ms) rep->transition_left_ms = rep->ttl_left_ms;
    return 0;
}

static void simba__redis_send(simba__redis *r, simba__rop *op, int64_t now);

static void simba__redis_on_ignore(redisAsyncContext *ac, void *reply, void *priv) {
    (void)ac;
    (void)reply;
    (void)priv;
}

/* Cluster hooks (defined with the router below). */
static int simba__rcl_redirect(simba__redis *r, simba__rop *op, const char *err);
static void simba__rcl_want_map(simba__redis *r, const char *why);

/* desc.wait_replicas: the script's answer is kept (its reply object goes when this returns)
   and the request completes at the WAIT after it. */
static void simba__redis_keep(simba__rop *op, const redisReply *x) {
    simba_reply *rep = &op->wrep;
    memset(rep, 0, sizeof(*rep));
    op->have = 1;
    /* only grants wait, so the owner is the asker; the string stays with the request */
    if (x->type != REDIS_REPLY_ERROR && simba__redis_parse(x, rep) == 0 && strcmp(rep->owner, op->req->contender) == 0) {
        rep->owner = op->req->contender;
        /* the reply goes with this call: a new grant stored the request's value */
        rep->value = op->req->value_len ? op->req->value : NULL;
        rep->value_len = op->req->value_len;
        return;
    }
    simba__reply_fail(rep, SIMBA_EBACKEND, "redis: unexpected script reply");
}

static void simba__redis_on_wait(redisAsyncContext *ac, void *reply, void *priv) {
    simba__rop *op = (simba__rop *)priv;
    simba__redis *r = op->r;
    redisReply *x = (redisReply *)reply;
    simba_reply rep;
    simba_req *req;
    (void)ac;
    if (x && x->type == REDIS_REPLY_INTEGER) op->acked = x->integer;
    op->waits = 0;
    simba__rop_unlink(r, op);
    if (!x || !op->have) {
        simba__rop_fail(r, op, r->destroying ? SIMBA_ECLOSED : op->deadline <= simba_now(r->loop) ? SIMBA_ETIMEDOUT : SIMBA_ECONN,
                        r->destroying ? "redis backend closed" : "redis connection lost");
        return;
    }
    rep = op->wrep;
    req = op->req;
    if (rep.rc == SIMBA_OK && rep.owner[0] && strcmp(rep.owner, req->contender) == 0 && rep.held_ms == 0 &&
        op->acked < r->wait_replicas) {
        /* A new grant that too few replicas have: a failover could lose it. Not ownership;
           the contender asks again (and is granted again once the replicas keep up). */
        /* simba_req_done copies the message before anything can write here again */
        snprintf(r->werr, sizeof(r->werr), "redis: grant acknowledged by %lld of %d replicas within %lld ms (wait_replicas)",
                 op->acked, r->wait_replicas, (long long)r->wait_to);
        simba__reply_fail(&rep, SIMBA_EBACKEND, r->werr);
    }
    simba__rop_release(r, op);
    simba__redis_done(r, req, &rep);
}

static int simba__redis_views(simba__redis *r, simba__rop *op, const redisReply *x, simba_reply *rep);
static simba__rmutex *simba__redis_mutex(simba__redis *r, const char *mutex);

/* An observer's read or a mutex waiter's ask: it follows the owner channel. */
static int simba__redis_follows(const simba_req *req) {
    return req->op == SIMBA_OP_READ || (req->op == SIMBA_OP_ACQUIRE && !req->renew && req->permits <= 1 && !req->shared);
}

/* The ops answered with views (simba_inspect, simba_list, simba_force_release). */
static int simba__redis_inspection(simba_op op) {
    return op == SIMBA_OP_INSPECT || op == SIMBA_OP_LIST || op == SIMBA_OP_FORCE_RELEASE;
}
static int simba__rfw_answer(const simba_req *req, const redisReply *x, simba_reply *rep, char *words, size_t cap);

/* The words for a marker of another layout ("schema=<N>" as found). */
static void simba__redis_schema_words(const simba__redis *r, const char *found, char *out, size_t cap) {
    size_t n = strcspn(found, " \r\n");
    const char *eq = (const char *)memchr(found, '=', n);
    if (eq) {
        n -= (size_t)(eq + 1 - found);
        found = eq + 1;
    }
    snprintf(out, cap, "redis: found simba schema version %.*s (the marker %salive), this simba uses %d: run one simba "
             "version on a prefix, or give this one a prefix of its own", (int)(n < 20 ? n : 20), found, r->prefix,
             SIMBA__REDIS_SCHEMA);
}

/* A script's reply (not a redirection) into the request's answer. 1 when the request is
   not answered yet: a listing's next page went out. An error in words goes to words. */
static int simba__redis_answer(simba__redis *r, simba__rop *op, const redisReply *x, simba_reply *rep, char *words,
                               size_t cap) {
    int v = 0;
    simba__reply_none(rep);
    if (x->type == REDIS_REPLY_ERROR && !r->router &&
        (strncmp(x->str, "MOVED ", 6) == 0 || strncmp(x->str, "CROSSSLOT", 9) == 0)) {
        /* A Cluster node: the keys live elsewhere (MOVED), or the prefix-wide data-loss
           marker is in another slot than the mutex (CROSSSLOT). Retrying cannot help. */
        snprintf(r->cfg_msg, sizeof(r->cfg_msg), "redis: the server answered %.*s: it is a Redis Cluster node, and "
                 "this backend was opened without simba_redis_desc.cluster = 1", (int)strcspn(x->str, " "), x->str);
        simba__reply_fail(rep, SIMBA_EBACKEND, r->cfg_msg);
        if (!r->moved_noted) {
            r->moved_noted = 1;
            simba_log(r->loop, SIMBA_LOG_ERROR, "%s (%s)", rep->errmsg, x->str);
        }
        return 0;
    }
    if (x->type == REDIS_REPLY_ERROR) {
        static const char qs[] = "simba: quarantine ", ms[] = "simba: bound ", hs[] = "simba: not held ",
                          ps[] = "simba: permits ", ss[] = "simba: schema ";
        const char *q = strstr(x->str, qs), *m = strstr(x->str, ms), *h = strstr(x->str, hs), *pm = strstr(x->str, ps);
        rep->rc = SIMBA_EBACKEND;
        rep->errmsg = x->str;
        if (strstr(x->str, ss)) {
            simba__redis_schema_words(r, strstr(x->str, ss) + sizeof ss - 1, words, cap);
            rep->errmsg = words;
        } else if (pm) { /* another permits than the name's while anyone holds or waits */
            long long asked = 0, has = 0;
            if (sscanf(pm + sizeof ps - 1, "%lld %lld", &asked, &has) == 2) {
                simba__reply_conflict(rep, words, cap, asked, has);
            } else {
                snprintf(words, cap, "redis: permits refused: %s", x->str);
                simba__reply_fail(rep, SIMBA_ECONFLICT, words);
            }
        } else if (h) { /* SET_VALUE, YIELD: the store refused, the fence no longer holds */
            unsigned long long now_f = strtoull(h + sizeof hs - 1, NULL, 10);
            rep->rc = SIMBA_EFENCE;
            if (now_f)
                snprintf(words, cap, "redis: %s does not hold %s with fence %llu any more (the record holds fence %llu)",
                         op->req->contender, op->req->mutex, (unsigned long long)op->req->fence, now_f);
            else
                snprintf(words, cap, "redis: %s does not hold %s with fence %llu any more (nobody holds it)",
                         op->req->contender, op->req->mutex, (unsigned long long)op->req->fence);
            rep->errmsg = words;
        } else if (q) { /* the core asks again when it ends, and tells the application */
            rep->quarantine_ms = strtoll(q + sizeof qs - 1, NULL, 10);
            snprintf(words, cap, "redis: data-loss quarantine: no grant for %lld ms: the server's marker %salive was "
                     "missing or stale (first use, restart without persistence, FLUSHALL, eviction, failover)",
                     (long long)rep->quarantine_ms, r->prefix);
            rep->errmsg = words;
        } else if (m) {
            snprintf(words, cap, "redis: max_lease_ms mismatch: the marker %salive holds %lld ms, this process "
                     "uses %lld ms; every process on a prefix must use the same max_lease_ms",
                     r->prefix, strtoll(m + sizeof ms - 1, NULL, 10), (long long)r->max_lease);
            rep->errmsg = words;
        }
        return 0;
    }
    if (op->req->op == SIMBA_OP_CALL) v = simba__rfw_answer(op->req, x, rep, words, cap);
    else if (simba__redis_inspection(op->req->op)) v = simba__redis_views(r, op, x, rep);
    else if (simba__redis_parse(x, rep) == 0) return 0;
    else v = -1;
    if (v == 1) return 1;
    if (v < 0)
        simba__reply_fail(rep, SIMBA_EBACKEND, op->req->op == SIMBA_OP_CALL ? "redis: unexpected fenced write reply"
                                               : simba__redis_inspection(op->req->op) ? "redis: unexpected inspection reply"
                                                                                      : "redis: unexpected script reply");
    return 0;
}

static void simba__redis_on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    simba__rop *op = (simba__rop *)priv;
    simba__redis *r = op->r;
    redisReply *x = (redisReply *)reply;
    simba_reply rep;
    simba_req *req;
    char words[320];
    simba__rop_unlink(r, op);
    if (!x) {
        /* The connection is being torn down: by destroy, after a timeout, or on error. */
        simba_result rc = SIMBA_ECONN;
        const char *msg = ac->c.errstr[0] ? ac->c.errstr : "redis connection lost";
        if (r->destroying) {
            rc = SIMBA_ECLOSED;
            msg = "redis backend closed";
        } else if (op->deadline <= simba_now(r->loop)) {
            rc = SIMBA_ETIMEDOUT;
            msg = "redis command timed out";
        }
        simba__rop_fail(r, op, rc, msg);
        return;
    }
    if (x->type == REDIS_REPLY_ERROR && strncmp(x->str, "NOSCRIPT", 8) == 0 && !op->retried &&
        !(ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING))) {
        /* The script cache was flushed under us: load it again, then re-run. */
        char text[SIMBA__REDIS_LUA_CAP];
        size_t n = simba__redis_lua_text(r->cluster, simba__redis_script(op->req->op), text, sizeof text);
        op->retried = 1;
        redisAsyncCommand(ac, simba__redis_on_ignore, NULL, "SCRIPT LOAD %b", text, n);
        simba__redis_send(r, op, simba_now(r->loop));
        return;
    }
    if (x->type == REDIS_REPLY_ERROR && r->router && strncmp(x->str, "CLUSTERDOWN", 11) == 0)
        simba__rcl_want_map(r, x->str); /* the core backs off and asks again */
    if (x->type == REDIS_REPLY_ERROR && (strncmp(x->str, "MOVED ", 6) == 0 || strncmp(x->str, "ASK ", 4) == 0)) {
        /* Cluster: the op went on to the right node. Standalone: a configuration error. */
        if (simba__rcl_redirect(r, op, x->str)) return;
    }
    if (simba__redis_answer(r, op, x, &rep, words, sizeof words)) return; /* a listing's next page went out */
    req = op->req;
    if (req->op == SIMBA_OP_ACQUIRE && r->wait_replicas > 0 && rep.rc == SIMBA_OK && rep.held_ms == 0 &&
        strcmp(rep.owner, req->contender) == 0 && !(ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) &&
        redisAsyncCommand(ac, simba__redis_on_wait, op, "WAIT %d %lld", r->wait_replicas, (long long)r->wait_to) == REDIS_OK) {
        /* A new grant: it counts once enough replicas have it (renewals never wait). The
           request goes to the back of the line with a new deadline, as if sent now. */
        simba__redis_keep(op, x);
        op->waits = 1;
        op->deadline = simba__add(simba_now(r->loop), r->cmd_to);
        simba__rop_append(r, op);
        return;
    }
    if (req->op == SIMBA_OP_RELEASE) simba__redis_wake_released(r, req, op->seq, rep.rc == SIMBA_OK);
    simba__rop_release(r, op);
    simba__redis_done(r, req, &rep);
}

/* One view from seven strings (owner, fence, acquired, held, ttl left, lease left as
   digits; the value); -1 is "not known" where nobody holds it. v->value points into e. */
static int simba__redis_view(const redisReply *const *e, simba_view *v) {
    int64_t n[5];
    int i;
    memset(v, 0, sizeof *v);
    if (e[0]->type != REDIS_REPLY_STRING || e[0]->len > SIMBA_ID_MAX) return -1;
    for (i = 0; i < 5; i++)
        if (simba__redis_int(e[i + 1], &n[i]) != 0) return -1;
    if (e[6]->len > SIMBA_VALUE_MAX) return -1;
    memcpy(v->owner, e[0]->str, e[0]->len);
    v->value = v->owner[0] && e[6]->len ? (const unsigned char *)e[6]->str : NULL;
    v->value_len = v->value ? (size_t)e[6]->len : 0;
    v->fence = (uint64_t)n[0];
    v->lease_ms = SIMBA_UNKNOWN_MS;
    v->waiters = -1;
    v->acquired_unix_ms = v->owner[0] ? n[1] : SIMBA_UNKNOWN_MS;
    v->held_ms = v->owner[0] ? n[2] : SIMBA_UNKNOWN_MS;
    v->ttl_left_ms = v->owner[0] ? n[3] : SIMBA_UNKNOWN_MS;
    v->transition_left_ms = v->owner[0] ? n[4] : SIMBA_UNKNOWN_MS;
    return 0;
}

/* INSPECT's tail (and each name's in a listing) from e: the recorded permits, then the
   holders set's n entries (8 strings each), lowest fence first; with no owner record, the
   view's owner is the holder whose permit frees first. The view goes to the core. */
static int simba__redis_holders(simba__redis *r, simba_req *req, simba_view *v, const redisReply *const *x, size_t n) {
    simba_view_holder *h = NULL;
    size_t i, j;
    int64_t k[5];
    int permits;
    if (x[0]->len && (simba__redis_int(x[0], &k[0]) != 0 || k[0] < 1 || k[0] > SIMBA_PERMITS_MAX)) return -1;
    v->permits = x[0]->len ? (int)k[0] : 0;
    if (n > SIMBA_PERMITS_MAX) return -1;
    if (n) {
        h = (simba_view_holder *)simba__zalloc(r->loop, n * sizeof *h);
        if (!h) return -1;
    }
    for (i = 0; i < n; i++) {
        const redisReply *const *e = x + 1 + 8 * i;
        simba_view_holder t;
        memset(&t, 0, sizeof t);
        if (e[0]->len > SIMBA_ID_MAX || e[6]->len > SIMBA_VALUE_MAX) { simba_free(r->loop, h); return -1; }
        for (j = 0; j < 5; j++)
            if (simba__redis_int(e[j + 1], &k[j]) != 0) { simba_free(r->loop, h); return -1; }
        memcpy(t.id, e[0]->str, e[0]->len);
        t.fence = (uint64_t)k[0];
        t.acquired_unix_ms = k[1];
        t.held_ms = k[2];
        t.ttl_left_ms = k[3];
        t.transition_left_ms = k[4];
        t.value = e[6]->len ? (const unsigned char *)e[6]->str : NULL;
        t.value_len = (size_t)e[6]->len;
        t.shared = e[7]->len == 1 && e[7]->str[0] == '1';
        for (j = i; j > 0 && h[j - 1].fence > t.fence; j--) h[j] = h[j - 1]; /* oldest grant first */
        h[j] = t;
    }
    permits = v->permits;
    simba__view_holders(v, h, (int)n, permits);
    /* the recorded permits; the hash outlives its last holder by its lease (keep): nobody
       holds or waits now */
    v->permits = !n && !v->owner[0] && v->waiters == 0 ? 0 : permits;
    simba_req_view(req, v);
    simba_free(r->loop, h);
    return 0;
}

/* >>inspect An inspection script's reply: views to the core, rep its answer. 0, -1 when
   the reply is not what the script returns, 1 when a listing's next page went out. */
static int simba__redis_views(simba__redis *r, simba__rop *op, const redisReply *x, simba_reply *rep) {
    simba_req *req = op->req;
    simba_view v;
    size_t i, k;
    simba__reply_none(rep);
    if (req->op == SIMBA_OP_FORCE_RELEASE) {
        if (x->type != REDIS_REPLY_INTEGER) return -1;
        rep->rc = x->integer == 1 ? SIMBA_OK : SIMBA_EFENCE;
        return 0;
    }
    if (x->type != REDIS_REPLY_ARRAY) return -1;
    for (i = 0; i < x->elements; i++)
        if (x->element[i]->type != REDIS_REPLY_STRING) return -1;
    if (req->op == SIMBA_OP_INSPECT) {
        int64_t n;
        if (x->elements < 8 || simba__redis_view((const redisReply *const *)x->element, &v) != 0 ||
            simba__redis_int(x->element[7], &n) != 0)
            return -1;
        simba__copy(v.mutex, sizeof v.mutex, req->mutex);
        v.waiters = (int)n;
        k = n < 0 ? 0 : n > SIMBA_VIEW_WAITERS ? SIMBA_VIEW_WAITERS : (size_t)n;
        if (x->elements < 9 + k || (x->elements - 9 - k) % 8 != 0) return -1;
        for (i = 8; i < 8 + k; i++) simba__copy(v.waiter[i - 8], sizeof v.waiter[0], x->element[i]->str);
        return simba__redis_holders(r, req, &v, (const redisReply *const *)x->element + 8 + k, (x->elements - 9 - k) / 8);
    }
    if (x->elements < 1 || x->element[0]->len >= sizeof op->cursor) return -1;
    for (i = 1; i < x->elements; i += 10 + 8 * k) { /* name, view, holders' count, INSPECT's tail */
        const redisReply *const *e = (const redisReply *const *)x->element + i;
        int64_t n;
        if (x->elements - i < 10 || e[0]->len > SIMBA_NAME_MAX || simba__redis_view(e + 1, &v) != 0 ||
            simba__redis_int(e[8], &n) != 0 || n < 0 || n > SIMBA_PERMITS_MAX || (size_t)n > (x->elements - i - 10) / 8)
            return -1;
        k = (size_t)n;
        memcpy(v.mutex, e[0]->str, e[0]->len);
        if (simba__redis_holders(r, req, &v, e + 9, k) != 0) return -1;
    }
    if (strcmp(x->element[0]->str, "0") == 0) return 0;
    memcpy(op->cursor, x->element[0]->str, x->element[0]->len + 1);
    simba__redis_send(r, op, simba_now(r->loop));
    return 1;
}

/* One script call's arguments, built without printf (see simba__rb) into its own buffers. */
typedef struct simba__rargs {
    char k[7][SIMBA__REDIS_KEY_MAX], ch[SIMBA__REDIS_KEY_MAX], wk[SIMBA__REDIS_KEY_MAX], ow[SIMBA__REDIS_KEY_MAX];
    char ttl[24], lease[24], quar[24], live[24], idlen[24], permits[24];
    const char *argv[24];
    int argc;
    int vi; /* argv[vi] is the request's value (any bytes, value_len long); 0 = none */
} simba__rargs;

/* The request's value as the next argument. */
static void simba__redis_arg_value(const simba_req *req, simba__rargs *a) {
    a->vi = a->argc;
    a->argv[a->argc++] = req->value_len ? (const char *)req->value : "";
}

/* ACQUIRE: KEYS[5..6] the data-loss marker and the "declared empty" key, then ARGV. */
static void simba__redis_args_acquire(simba__redis *r, const simba_req *req, simba__rargs *a) {
    int64_t lease_ms = req->ttl_ms + req->transition_ms;
    /* Standalone: one marker per prefix (and db). A cluster mode passes
       "<prefix>{<name>}:alive" instead, in the mutex's hash slot; the script is the same. */
    if (r->cluster) {
        /* Cluster: the marker of the mutex's slot, and that slot's "declared empty" key. */
        const char *tag = r->tags[simba__rcl_slot(req->mutex)];
        snprintf(a->k[4], sizeof(a->k[4]), "%s{%s}:alive", r->prefix, tag);
        snprintf(a->k[5], sizeof(a->k[5]), "%s{%s}", SIMBA__REDIS_FRESH_KEY, tag);
        a->argv[a->argc++] = a->k[4];
        a->argv[a->argc++] = a->k[5];
    } else {
        simba__rb b;
        simba__rb_init(&b, a->k[4], sizeof(a->k[4]));
        simba__rb_str(&b, r->prefix);
        simba__rb_str(&b, "alive");
        a->argv[a->argc++] = a->k[4];
        a->argv[a->argc++] = SIMBA__REDIS_FRESH_KEY;
    }
    a->argv[a->argc++] = a->k[6]; /* the holders set */
    simba__redis_i64(a->ttl, req->ttl_ms);
    simba__redis_i64(a->lease, lease_ms);
    simba__redis_i64(a->quar, r->max_lease);
    /* The core's liveness bound; a request without one keeps its place for its lease. */
    simba__redis_i64(a->live, req->live_ms > 0 ? req->live_ms : lease_ms);
    simba__redis_owchan(a->ow, sizeof(a->ow), r, req->mutex);
    simba__redis_wkchan(a->wk, sizeof(a->wk), r, req->mutex, NULL);
    a->argv[a->argc++] = req->contender;
    a->argv[a->argc++] = a->ttl;
    a->argv[a->argc++] = a->lease;
    a->argv[a->argc++] = a->ow;
    a->argv[a->argc++] = a->live;
    a->argv[a->argc++] = req->renew ? "1" : "0";
    a->argv[a->argc++] = a->quar;
    a->argv[a->argc++] = r->run_id;
    /* A promoted replica or a migrated slot never counts as durable (see CLUSTER). */
    a->argv[a->argc++] = r->aof_on && r->fsync_always && !r->cluster && !r->nsen ? "1" : "0";
    a->argv[a->argc++] = a->wk;
    simba__redis_i64(a->idlen, (int64_t)strlen(req->contender));
    a->argv[a->argc++] = a->idlen;
    simba__redis_arg_value(req, a);
    simba__redis_i64(a->permits, req->permits > 1 ? req->permits : 1);
    a->argv[a->argc++] = a->permits;
    a->argv[a->argc++] = req->shared ? "1" : "0";
}

/* SET_VALUE (KEYS: owner, holders set): contender, fence, value, owner channel. YIELD (KEYS:
   owner, fence, queue, qexp, holders set): contender, fence, wake channels' prefix, live ms. */
static void simba__redis_args_owner(simba__redis *r, const simba_req *req, simba__rargs *a) {
    simba__redis_i64(a->ttl, (int64_t)req->fence);
    a->argv[a->argc++] = req->contender;
    a->argv[a->argc++] = a->ttl;
    if (req->op == SIMBA_OP_SET_VALUE) {
        simba__redis_arg_value(req, a);
        simba__redis_owchan(a->ow, sizeof(a->ow), r, req->mutex);
        a->argv[a->argc++] = a->ow;
    } else {
        simba__redis_wkchan(a->wk, sizeof(a->wk), r, req->mutex, NULL);
        a->argv[a->argc++] = a->wk;
        /* the core's liveness bound for the place it takes at the back (as an ACQUIRE's) */
        simba__redis_i64(a->live, req->live_ms > 0 ? req->live_ms : req->ttl_ms + req->transition_ms);
        a->argv[a->argc++] = a->live;
    }
}

/* RELEASE and FORCE: who releases (the contender, or the fence it must hold), the event
   channel, the wake channels' prefix; a release also how many listeners are its own. */
static void simba__redis_args_release(simba__redis *r, const simba_req *req, simba__rargs *a) {
    simba__redis_evchan(a->ch, sizeof(a->ch), r, req->mutex);
    simba__redis_wkchan(a->wk, sizeof(a->wk), r, req->mutex, NULL);
    if (req->op == SIMBA_OP_FORCE_RELEASE) {
        simba__redis_i64(a->ttl, (int64_t)req->fence);
        a->argv[a->argc++] = a->ttl;
    } else {
        a->argv[a->argc++] = req->contender;
    }
    a->argv[a->argc++] = a->ch;
    a->argv[a->argc++] = a->wk;
    if (req->op == SIMBA_OP_RELEASE) {
        simba__rmutex *m = simba__redis_mutex(r, req->mutex);
        /* Counted only once the server confirmed it: a SUBSCRIBE still on its way would make
           the script skip a broadcast that another watcher needs. */
        a->argv[a->argc++] = m && m->ev && m->ev->confirmed && r->sub.state == SIMBA__RC_READY ? "1" : "0";
    }
}

/* LIST: the SCAN cursor, the pattern of the fence keys (one per mutex ever held: they
   outlive every lease; the prefix's own glob characters escaped), the prefix. */
static void simba__redis_args_list(simba__redis *r, const simba__rop *op, simba__rargs *a) {
    simba__rb b;
    const char *c;
    simba__rb_init(&b, a->ow, sizeof(a->ow));
    for (c = r->prefix; *c; c++) {
        if (strchr("*?[]\\", *c)) simba__rb_mem(&b, "\\", 1);
        simba__rb_mem(&b, c, 1);
    }
    simba__rb_str(&b, "{*}:fence");
    a->argv[a->argc++] = op->cursor[0] ? op->cursor : "0";
    a->argv[a->argc++] = a->ow;
    a->argv[a->argc++] = r->prefix;
}

static void simba__rfw_send(simba__redis *r, simba__rop *op, int64_t now);
static void simba__redis_send(simba__redis *r, simba__rop *op, int64_t now) {
    simba__rargs a;
    size_t lens[24];
    int i, idx, nkeys;
    const simba_req *req = op->req;
    static const char *const suffix[4] = {":owner", ":fence", ":queue", ":qexp"};

    if (!r->cmd.ac || r->cmd.state != SIMBA__RC_READY) {
        simba__rop_fail(r, op, SIMBA_ECONN, r->err[0] ? r->err : "redis not connected");
        return;
    }
    if (req->op == SIMBA_OP_CALL) {
        simba__rfw_send(r, op, now);
        return;
    }
    for (i = 0; i < 4; i++)
        if (simba__redis_mkname(a.k[i], sizeof(a.k[i]), r, req->mutex, suffix[i]) < 0) {
            simba__rop_fail(r, op, SIMBA_EINVAL, "redis: key too long");
            return;
        }
    if (simba__redis_mkname(a.k[6], sizeof(a.k[6]), r, req->mutex, ":hold") < 0) {
        simba__rop_fail(r, op, SIMBA_EINVAL, "redis: key too long");
        return;
    }
    idx = simba__redis_script(req->op);
    if (idx == SIMBA__RS_ACQUIRE && r->evict_msg[0]) {
        /* A server that may evict an owner record can hand out a held mutex: no grants. */
        simba__rop_fail(r, op, SIMBA_EBACKEND, r->evict_msg);
        return;
    }
    /* ACQUIRE: owner, fence, queue, qexp, marker, fresh, holders; RELEASE, FORCE, INSPECT: the
       first four and the holders set, as YIELD; SET_VALUE owner and holders set */
    nkeys = idx == SIMBA__RS_READ ? 1 : idx == SIMBA__RS_SETVAL ? 2 : idx == SIMBA__RS_ACQUIRE ? 7 : idx == SIMBA__RS_LIST ? 0 : 5;
    /* ASK: the slot is moving and this key is already on the target; ASKING lets the next
       command in (the NOSCRIPT re-send comes here again and asks again). */
    if (op->asking && redisAsyncCommand(r->cmd.ac, simba__redis_on_ignore, NULL, "ASKING") != REDIS_OK) {
        simba__rop_fail(r, op, SIMBA_ECONN, "redis: cannot queue command");
        return;
    }
    a.argc = 0;
    a.vi = 0;
    a.argv[a.argc++] = "EVALSHA";
    a.argv[a.argc++] = r->sha[idx];
    a.argv[a.argc++] = nkeys == 0 ? "0" : nkeys == 1 ? "1" : nkeys == 2 ? "2" : nkeys == 4 ? "4" : nkeys == 5 ? "5" : "7";
    for (i = 0; i < nkeys && i < 4 && (nkeys != 2 || i < 1); i++) a.argv[a.argc++] = a.k[i];
    if (nkeys == 5 || nkeys == 2) a.argv[a.argc++] = a.k[6];
    if (idx == SIMBA__RS_ACQUIRE) simba__redis_args_acquire(r, req, &a);
    else if (idx == SIMBA__RS_RELEASE || idx == SIMBA__RS_FORCE) simba__redis_args_release(r, req, &a);
    else if (idx == SIMBA__RS_LIST) simba__redis_args_list(r, op, &a);
    else if (idx == SIMBA__RS_SETVAL || idx == SIMBA__RS_YIELD) simba__redis_args_owner(r, req, &a);
    else if (idx == SIMBA__RS_INSPECT) {
        simba__redis_i64(a.ttl, SIMBA_VIEW_WAITERS);
        a.argv[a.argc++] = a.ttl;
    }
    for (i = 0; i < a.argc; i++) lens[i] = i == a.vi && i ? req->value_len : strlen(a.argv[i]);
    {
        char cmd[4096]; /* an acquire with a value of 1 KiB fits; longer ones hiredis formats */
        size_t n = simba__redis_resp(cmd, sizeof cmd, a.argc, a.argv, lens);
        int sent = n ? redisAsyncFormattedCommand(r->cmd.ac, simba__redis_on_reply, op, cmd, n)
                     : redisAsyncCommandArgv(r->cmd.ac, simba__redis_on_reply, op, a.argc, a.argv, lens);
        if (sent != REDIS_OK) {
            simba__rop_fail(r, op, SIMBA_ECONN, "redis: cannot queue command");
            return;
        }
    }
    /* Requests go out in submission order with one timeout, so the head of the list always
       holds the earliest deadline. */
    op->deadline = simba__add(now, r->cmd_to);
    simba__rop_append(r, op);
}

/* ---- event hooks: hiredis tells us which events it wants; simba's poll delivers them ---- */

static void simba__rev_add_read(void *p) { ((simba__rconn *)p)->rd = 1; }
static void simba__rev_del_read(void *p) { ((simba__rconn *)p)->rd = 0; }
static void simba__rev_add_write(void *p) { ((simba__rconn *)p)->wr = 1; }
static void simba__rev_del_write(void *p) { ((simba__rconn *)p)->wr = 0; }
static void simba__rev_cleanup(void *p) {
    simba__rconn *c = (simba__rconn *)p;
    /* The context is about to be freed (by hiredis on error, or by us): keep its last
       error, forget the pointer. */
    if (c->ac && c->ac->c.errstr[0] && !c->r->destroying) {
        simba__redis_seterr(c->r, c->is_sen ? "sentinel connection" : c->is_sub ? "subscriber connection" : "connection",
                            c->ac->c.errstr);
        /* hiredis drops a subscriber connection on an error reply: a SSUBSCRIBE to a moved slot */
        if (c->r->router && (strncmp(c->ac->c.errstr, "MOVED", 5) == 0 || strncmp(c->ac->c.errstr, "ASK", 3) == 0))
            simba__rcl_want_map(c->r, c->ac->c.errstr);
    }
    /* hiredis closes the socket right after this: the loop's watchers go while the number is
       still this socket's (a reconnect often gets the same number) */
    if (c->ac && c->ac->c.fd >= 0) simba_backend_fd(c->r->be, c->ac->c.fd, 0);
    c->ac = NULL;
    c->rd = c->wr = 0;
    c->fd = -1;
}

/* ---- subscriptions --------------------------------------------------------------------- */

/* hiredis 0.14 keeps a callback record for every command sent on a subscribed connection
   (only an error reply, which drops the connection, would take one): the sharded commands
   have none, so the records go at once instead of piling up until the next reconnect.
   0.14 allocates them with malloc (hi_malloc is a plain wrapper there). */
static void simba__redis_purge_invalid(redisAsyncContext *ac) {
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR == 0
    redisCallback *cb = ac->sub.invalid.head, *next;
    for (; cb; cb = next) {
        next = cb->next;
        free(cb);
    }
    ac->sub.invalid.head = ac->sub.invalid.tail = NULL;
#else
    (void)ac;
#endif
}

static void simba__redis_unsubscribe(simba__redis *r, simba__rsub *s) {
    const char *argv[2];
    size_t lens[2];
    /* Not ready: nothing was sent on this connection yet, ready() sends what is recorded. */
    if (!r->sub.ac || r->sub.state != SIMBA__RC_READY) return;
    argv[1] = s->node.key;
    lens[1] = strlen(s->node.key);
    if (r->cluster) {
        argv[0] = "SUNSUBSCRIBE";
        lens[0] = 12;
        redisAsyncCommandArgv(r->sub.ac, NULL, NULL, 2, argv, lens);
        simba__redis_purge_invalid(r->sub.ac);
    }
    argv[0] = "UNSUBSCRIBE";
    lens[0] = 11;
    /* 0.14 refuses UNSUBSCRIBE before the first SUBSCRIBE: nothing to undo then. */
    redisAsyncCommandArgv(r->sub.ac, NULL, NULL, 2, argv, lens);
}

static void simba__redis_on_msg(redisAsyncContext *ac, void *reply, void *priv);

static void simba__redis_sub_send(simba__redis *r, simba__rsub *s) {
    const char *argv[2];
    size_t lens[2];
    s->confirmed = 0;
    if (!r->sub.ac || r->sub.state != SIMBA__RC_READY) return; /* ready() subscribes all */
    argv[0] = "SUBSCRIBE";
    argv[1] = s->node.key;
    lens[0] = 9;
    lens[1] = strlen(s->node.key);
    /* privdata is the backend, not the subscription: hiredis may still deliver replies for
       a channel after we dropped our record of it; those are looked up and ignored. */
    redisAsyncCommandArgv(r->sub.ac, simba__redis_on_msg, r, 2, argv, lens);
    if (r->cluster) {
        /* hiredis 0.14 knows no sharded pub/sub: it hands "ssubscribe"/"smessage" pushes to
           the callback of the plain SUBSCRIBE of the same name above (which nobody publishes
           to), so that SUBSCRIBE goes first and the SSUBSCRIBE has no callback of its own. */
        argv[0] = "SSUBSCRIBE";
        lens[0] = 10;
        redisAsyncCommandArgv(r->sub.ac, NULL, NULL, 2, argv, lens);
        simba__redis_purge_invalid(r->sub.ac);
    }
}

static void simba__redis_sub_free(simba__redis *r, simba__rsub *s) {
    simba__hremove(&r->chans, &s->node);
    simba_free(r->loop, (void *)s->node.key);
    simba_free(r->loop, s->contender);
    simba_free(r->loop, s);
}

static simba__rsub *simba__redis_sub_new(simba__redis *r, simba__rmutex *m, const char *chan,
                                         const char *contender, int kind) {
    simba__rsub *s = (simba__rsub *)simba__zalloc(r->loop, sizeof(*s));
    if (!s) return NULL;
    s->m = m;
    s->kind = kind;
    s->node.key = simba__strdup(r->loop, chan);
    s->contender = contender ? simba__strdup(r->loop, contender) : NULL;
    if (!s->node.key || (contender && !s->contender) ||
        !simba__hinsert(&r->chans, &s->node, simba__lalloc, simba__lfree, r->loop)) {
        simba_free(r->loop, (void *)s->node.key);
        simba_free(r->loop, s->contender);
        simba_free(r->loop, s);
        return NULL;
    }
    simba__redis_sub_send(r, s);
    return s;
}

static simba__rmutex *simba__redis_mutex(simba__redis *r, const char *mutex) {
    return (simba__rmutex *)simba__hfind(&r->mutexes, mutex);
}

static simba__rsub **simba__redis_wake_find(simba__rmutex *m, const char *contender) {
    simba__rsub **p;
    for (p = &m->wakes; *p; p = &(*p)->mnext)
        if (strcmp((*p)->contender, contender) == 0) break;
    return p;
}

static void simba__redis_wake_drop(simba__redis *r, simba__rsub **p) {
    simba__rsub *s = *p;
    *p = s->mnext;
    if (s->idle) s->m->nidle--;
    simba__redis_unsubscribe(r, s);
    simba__redis_sub_free(r, s);
}

/* An acquire: subscribe to the contender's wake channel before it can enter the wait queue
   (or keep the subscription it has). */
static void simba__redis_wake_acquire(simba__redis *r, const char *mutex, const char *contender) {
    simba__rmutex *m = simba__redis_mutex(r, mutex);
    simba__rsub **p, *s;
    char chan[SIMBA__REDIS_KEY_MAX];
    if (!m) return;
    p = simba__redis_wake_find(m, contender);
    if (*p) {
        s = *p;
        *p = s->mnext;
        if (s->idle) m->nidle--;
        s->idle = 0;
    } else {
        simba__redis_wkchan(chan, sizeof(chan), r, mutex, contender);
        s = simba__redis_sub_new(r, m, chan, contender, SIMBA__RSUB_WAKE);
        if (!s) return; /* without it the waiter just relies on its timer */
    }
    s->acq_seq++;
    s->mnext = m->wakes;
    m->wakes = s;
}

static uint32_t simba__redis_wake_seq(simba__redis *r, const char *mutex, const char *contender) {
    simba__rmutex *m = simba__redis_mutex(r, mutex);
    simba__rsub **p;
    if (!m) return 0;
    p = simba__redis_wake_find(m, contender);
    return *p ? (*p)->acq_seq : 0;
}

/* A release was answered. Done: the contender left the queue, so the channel may stay
   subscribed for its next acquire (at most SIMBA__REDIS_IDLE_WAKES such per mutex). Failed:
   it may still be queued, and a wake-up must not be taken by a process that will not act
   on it, so the channel goes. Unless an acquire came after the release. */
static void simba__redis_wake_released(simba__redis *r, const simba_req *req, uint32_t seq, int ok) {
    simba__rmutex *m;
    simba__rsub **p, **oldest = NULL;
    if (r->destroying || !req->mutex || !req->contender) return;
    m = simba__redis_mutex(r, req->mutex);
    if (!m) return;
    p = simba__redis_wake_find(m, req->contender);
    if (!*p || (*p)->acq_seq != seq) return;
    if (!ok) {
        simba__redis_wake_drop(r, p);
        return;
    }
    if ((*p)->idle) return;
    (*p)->idle = 1;
    if (++m->nidle <= SIMBA__REDIS_IDLE_WAKES) return;
    for (p = &m->wakes; *p; p = &(*p)->mnext)
        if ((*p)->idle) oldest = p;
    if (oldest) simba__redis_wake_drop(r, oldest);
}

/* An observer or a waiter in this process: from now on it hears owner announcements. */
static void simba__redis_owner_sub(simba__redis *r, const char *mutex) {
    simba__rmutex *m = simba__redis_mutex(r, mutex);
    char chan[SIMBA__REDIS_KEY_MAX];
    if (!m || m->ow) return;
    simba__redis_owchan(chan, sizeof(chan), r, mutex);
    m->ow = simba__redis_sub_new(r, m, chan, NULL, SIMBA__RSUB_OW);
}

static void simba__redis_on_msg(redisAsyncContext *ac, void *reply, void *priv) {
    simba__redis *r = (simba__redis *)priv;
    redisReply *x = (redisReply *)reply;
    const redisReply *kind, *chan, *msg;
    simba__rsub *s;
    if (!x || r->destroying || x->type != REDIS_REPLY_ARRAY || x->elements < 3) return;
    kind = x->element[0];
    chan = x->element[1];
    msg = x->element[2];
    if (kind->type == REDIS_REPLY_STRING && strcmp(kind->str, "sunsubscribe") == 0 && r->cluster) {
        /* The server dropped a sharded subscription: its slot moved to another node. */
        s = chan->type == REDIS_REPLY_STRING ? (simba__rsub *)simba__hfind(&r->chans, chan->str) : NULL;
        if (s && ac == r->sub.ac) {
            s->confirmed = 0;
            simba__rcl_want_map(r, "a sharded subscription was dropped by the server");
        }
        return;
    }
    if (kind->type == REDIS_REPLY_STRING && strcmp(kind->str, r->cluster ? "ssubscribe" : "subscribe") == 0 &&
        chan->type == REDIS_REPLY_STRING) {
        s = (simba__rsub *)simba__hfind(&r->chans, chan->str);
        if (s && ac == r->sub.ac) {
            s->confirmed = 1;
            /* The waiter's acquire went out on the other connection: a release that ran
               before this SUBSCRIBE counted no listener, dropped the waiter from the line and
               woke nobody. Ask once more now (a waiter only asks; an owner ignores it). */
            if (s->kind == SIMBA__RSUB_WAKE && !s->idle)
                simba_backend_event(r->be, SIMBA_EV_RELEASED, s->m->node.key, s->contender, NULL);
        }
        return;
    }
    if (kind->type != REDIS_REPLY_STRING || strcmp(kind->str, r->cluster ? "smessage" : "message") != 0 ||
        chan->type != REDIS_REPLY_STRING || msg->type != REDIS_REPLY_STRING)
        return;
    s = (simba__rsub *)simba__hfind(&r->chans, chan->str);
    if (!s) return;
    if (s->kind != SIMBA__RSUB_OW && strncmp(msg->str, "released", 8) == 0) {
        /* A wake channel names its one waiter; the event channel's "released" is for all. */
        simba_backend_event(r->be, SIMBA_EV_RELEASED, s->m->node.key, s->contender, NULL);
    } else if (s->kind == SIMBA__RSUB_OW && msg->len > 7 && memcmp(msg->str, "holder ", 7) == 0) {
        /* "holder <fence> <ttl> <lease> <held> <idlen> <id><value>": a grant or a new value */
        simba_reply rep;
        char id[SIMBA_ID_MAX + 1], *p = msg->str + 7, *end;
        const char *stop = msg->str + msg->len;
        long long n[5];
        int i;
        for (i = 0; i < 5; i++) {
            n[i] = strtoll(p, &end, 10);
            if (end == p || end >= stop || *end != ' ') return;
            p = end + 1;
        }
        if (n[0] <= 0 || n[4] <= 0 || n[4] > SIMBA_ID_MAX || n[4] > stop - p || stop - p - n[4] > SIMBA_VALUE_MAX) return;
        memcpy(id, p, (size_t)n[4]);
        id[n[4]] = 0;
        if (strlen(id) != (size_t)n[4]) return;
        memset(&rep, 0, sizeof(rep));
        rep.rc = SIMBA_OK;
        rep.owner = id;
        rep.fence = (uint64_t)n[0];
        rep.ttl_left_ms = n[1];
        rep.transition_left_ms = n[2];
        rep.held_ms = n[3];
        rep.value_len = (size_t)(stop - p - n[4]);
        rep.value = rep.value_len ? (const unsigned char *)p + n[4] : NULL;
        simba_backend_event(r->be, SIMBA_EV_OWNER, s->m->node.key, NULL, &rep);
    }
}

/* ---- connections ------------------------------------------------------------------------- */

/* Copies the value of "name:value" from an INFO reply ("" when absent). */
static void simba__redis_info_field(const char *info, const char *name, char *out, size_t cap) {
    size_t n = strlen(name), k = 0;
    const char *p = info;
    out[0] = 0;
    while (p && *p) {
        if (strncmp(p, name, n) == 0 && p[n] == ':') {
            p += n + 1;
            while (p[k] && p[k] != '\r' && p[k] != '\n' && k + 1 < cap) k++;
            memcpy(out, p, k);
            out[k] = 0;
            return;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
}

/* A probe the server refused: said once per backend (log and errmsg), then assumed unsafe. */
static void simba__redis_probe_refused(simba__redis *r, int bit, const char *what, const char *why) {
    char detail[200];
    if (r->probe_noted & bit) return;
    r->probe_noted |= bit;
    snprintf(detail, sizeof(detail), "%s refused (%s): %s", what, why,
             bit == 1 ? "cannot check maxmemory-policy (it must be noeviction) nor detect restarts by run_id"
                      : "cannot tell whether a restart keeps every write; a restart quarantines");
    simba__redis_seterr(r, "probe", detail);
    /* No request failed, so the core has not set the backend's message: set it here. */
    simba__copy(r->be->errmsg, sizeof(r->be->errmsg), r->err);
}

/* GET <prefix>alive at connect: 1 (r->err says) when the marker names another layout. */
static int simba__redis_marker_schema(simba__redis *r, const redisReply *x) {
    const char *sv;
    char words[300];
    if (x->type != REDIS_REPLY_STRING || !(sv = strstr(x->str, " schema=")) ||
        strncmp(sv + 1, SIMBA__REDIS_SCHEMA_FIELD, sizeof SIMBA__REDIS_SCHEMA_FIELD - 1) == 0)
        return 0;
    if (sv[sizeof SIMBA__REDIS_SCHEMA_FIELD] == 0) return 0;
    simba__redis_schema_words(r, sv + 1, words, sizeof words);
    simba__copy(r->err, sizeof r->err, words);
    simba_log(r->loop, SIMBA_LOG_ERROR, "%s", words);
    return 1;
}

/* INFO and CONFIG GET appendfsync answers: what the data-loss and eviction checks need. */
static void simba__redis_on_probe(simba__redis *r, int kind, const redisReply *x) {
    char v[48];
    if (kind == SIMBA__RHS_INFO) {
        if (x->type != REDIS_REPLY_STRING && x->type != REDIS_REPLY_STATUS) {
            simba__redis_probe_refused(r, 1, "INFO", x->type == REDIS_REPLY_ERROR ? x->str : "unexpected reply");
            return;
        }
        simba__redis_info_field(x->str, "run_id", r->run_id, sizeof(r->run_id));
        simba__redis_info_field(x->str, "maxmemory_policy", r->policy, sizeof(r->policy));
        simba__redis_info_field(x->str, "aof_enabled", v, sizeof(v));
        r->aof_on = strcmp(v, "1") == 0;
    } else if (x->type == REDIS_REPLY_ARRAY && x->elements == 2 && x->element[1]->type == REDIS_REPLY_STRING) {
        r->fsync_always = strcmp(x->element[1]->str, "always") == 0;
    } else {
        simba__redis_probe_refused(r, 2, "CONFIG GET appendfsync", x->type == REDIS_REPLY_ERROR ? x->str : "unexpected reply");
    }
}

static void simba__rconn_drop(simba__rconn *c, int64_t now);

static void simba__redis_on_hs(redisAsyncContext *ac, void *reply, void *priv) {
    struct simba__rhs *h = (struct simba__rhs *)priv;
    simba__rconn *c = h->c;
    redisReply *x = (redisReply *)reply;
    (void)ac;
    if (!x) return; /* going down anyway */
    if (h->script == SIMBA__RHS_ROLE) {
        const char *role = x->type == REDIS_REPLY_ARRAY && x->elements > 0 && x->element[0]->type == REDIS_REPLY_STRING
                               ? x->element[0]->str : "unknown";
        if (!c->hs_failed && strcmp(role, "master") != 0) {
            char d[128];
            snprintf(d, sizeof(d), "%s:%d is not the primary (ROLE %s): asking the sentinels again", c->r->host,
                     c->r->port, role);
            simba__redis_seterr(c->r, "sentinel", d);
            c->hs_failed = 1;
            c->r->addr_ok = 0;
            if (c->r->sen.ac) simba__rconn_drop(&c->r->sen, simba_now(c->r->loop));
        }
    } else if (h->script == SIMBA__RHS_MARKER) {
        if (!c->hs_failed && simba__redis_marker_schema(c->r, x)) c->hs_failed = 1;
    } else if (h->script <= SIMBA__RHS_INFO) {
        if (!c->hs_failed) simba__redis_on_probe(c->r, h->script, x);
    } else if (c->hs_failed) {
        /* keep the first error (AUTH): what follows it only fails because of it */
    } else if (x->type == REDIS_REPLY_ERROR) {
        simba__redis_seterr(c->r, h->script >= 0 ? "SCRIPT LOAD" : "handshake", x->str);
        c->hs_failed = 1;
    } else if (h->script >= 0) {
        if (x->type == REDIS_REPLY_STRING && x->len == 40) {
            memcpy(c->r->sha[h->script], x->str, 40);
            c->r->sha[h->script][40] = 0;
        } else {
            simba__redis_seterr(c->r, "SCRIPT LOAD", "unexpected reply");
            c->hs_failed = 1;
        }
    }
    c->hs_left--;
}

/* An event for every mutex of this backend; a Cluster node names the mutexes it serves, so
   that losing one node does not touch owners on the others. */
static void simba__redis_event_all(simba__redis *r, simba_event_kind kind) {
    size_t b;
    simba__hnode *nd;
    if (!r->router) {
        simba_backend_event(r->be, kind, NULL, NULL, NULL);
        return;
    }
    for (b = 0; b < r->mutexes.nb; b++)
        for (nd = r->mutexes.b[b]; nd; nd = nd->hnext) simba_backend_event(r->be, kind, nd->key, NULL, NULL);
}

static void simba__rconn_down(simba__rconn *c, int64_t now) {
    simba__redis *r = c->r;
    /* Losing the command connection is losing the server: the core's policy decides. */
    if (c == &r->cmd && c->state == SIMBA__RC_READY) simba__redis_event_all(r, SIMBA_EV_DISCONNECTED);
    /* A Cluster node that went away may have been failed over: learn the map again. */
    if (r->router && c == &r->cmd) simba__rcl_want_map(r, "a node's connection was lost");
    /* The next attempt asks the next sentinel. */
    if (c->is_sen && r->nsen) r->sen_i = (r->sen_i + 1) % r->nsen;
    c->state = SIMBA__RC_DOWN;
    c->rd = c->wr = 0;
    c->fd = -1;
    if (c->was_ready && !c->is_sen) r->reset_pending = 1;
    if (c->is_sub) {
        size_t b;
        simba__hnode *nd;
        for (b = 0; b < r->chans.nb; b++)
            for (nd = r->chans.b[b]; nd; nd = nd->hnext) ((simba__rsub *)nd)->confirmed = 0;
    }
    c->deadline = simba__add(now, simba__backoff(r->loop, &c->backoff, r->rmin, r->rmax));
    if (c == &r->cmd) {
        /* They were waiting for this attempt; the core retries after its own backoff. */
        while (r->pending) {
            simba__rop *op = r->pending;
            r->pending = op->next;
            if (!r->pending) r->pending_tail = NULL;
            simba__rop_fail(r, op, SIMBA_ECONN, r->err[0] ? r->err : "redis not connected");
        }
    }
}

/* Tear the context down; hiredis completes every callback with a NULL reply first. */
static void simba__rconn_drop(simba__rconn *c, int64_t now) {
    if (c->ac) redisAsyncFree(c->ac); /* cleanup hook clears c->ac */
    c->ac = NULL;
    if (c->state != SIMBA__RC_DOWN) simba__rconn_down(c, now);
}

/* The handshake's AUTH, first in the pipeline of a new connection. */
static void simba__rconn_auth(simba__rconn *c, redisAsyncContext *ac) {
    simba__redis *r = c->r;
    const char *argv[3];
    size_t lens[3];
    int n = 0;
    argv[n] = "AUTH";
    lens[n++] = 4;
    if (r->username) {
        argv[n] = r->username;
        lens[n] = strlen(r->username);
        n++;
    }
    argv[n] = r->password;
    lens[n] = strlen(r->password);
    n++;
    c->hs[0].c = c;
    c->hs[0].script = SIMBA__RHS_PLAIN;
    if (redisAsyncCommandArgv(ac, simba__redis_on_hs, &c->hs[0], n, argv, lens) == REDIS_OK) c->hs_left++;
}

static void simba__rconn_start(simba__rconn *c, int64_t now) {
    simba__redis *r = c->r;
    redisAsyncContext *ac;
    int i;
    if (c->is_sen) ac = redisAsyncConnect(r->sen_host[r->sen_i], r->sen_port[r->sen_i]);
    else ac = r->unix_path ? redisAsyncConnectUnix(r->unix_path) : redisAsyncConnect(r->host, r->port);
    c->hs_left = 0;
    c->hs_failed = 0;
    if (!ac || ac->err) {
        simba__redis_seterr(r, "connect", ac ? ac->errstr : "out of memory");
        if (ac) redisAsyncFree(ac);
        c->state = SIMBA__RC_CONNECTING; /* so that down() counts it as an attempt */
        simba__rconn_down(c, now);
        return;
    }
    c->ac = ac;
    c->fd = ac->c.fd;
    c->state = SIMBA__RC_CONNECTING;
    c->deadline = simba__add(now, r->connect_to);
    ac->ev.data = c;
    ac->ev.addRead = simba__rev_add_read;
    ac->ev.delRead = simba__rev_del_read;
    ac->ev.addWrite = simba__rev_add_write;
    ac->ev.delWrite = simba__rev_del_write;
    ac->ev.cleanup = simba__rev_cleanup;
    /* Completion of a non-blocking connect shows as writability. */
    c->wr = 1;
    c->rd = 0;
    if (r->password && !c->is_sen) simba__rconn_auth(c, ac);
    if (c == &r->cmd) {
        if (r->db) {
            c->hs[1].c = c;
            c->hs[1].script = SIMBA__RHS_PLAIN;
            if (redisAsyncCommand(ac, simba__redis_on_hs, &c->hs[1], "SELECT %d", r->db) == REDIS_OK)
                c->hs_left++;
        }
        for (i = 0; i < SIMBA__RS_N; i++) {
            char text[SIMBA__REDIS_LUA_CAP];
            size_t n = simba__redis_lua_text(r->cluster, i, text, sizeof text);
            c->hs[2 + i].c = c;
            c->hs[2 + i].script = i;
            if (redisAsyncCommand(ac, simba__redis_on_hs, &c->hs[2 + i], "SCRIPT LOAD %b", text, n) == REDIS_OK)
                c->hs_left++;
        }
        /* Asked at every connect, pipelined with the rest: a restart or a new policy shows
           at the reconnect, and the steady-state acquire/release costs no extra round trip. */
        r->run_id[0] = r->policy[0] = 0;
        r->aof_on = r->fsync_always = 0;
        c->hs[2 + SIMBA__RS_N].c = c;
        c->hs[2 + SIMBA__RS_N].script = SIMBA__RHS_INFO;
        if (redisAsyncCommand(ac, simba__redis_on_hs, &c->hs[2 + SIMBA__RS_N], "INFO") == REDIS_OK)
            c->hs_left++;
        c->hs[3 + SIMBA__RS_N].c = c;
        c->hs[3 + SIMBA__RS_N].script = SIMBA__RHS_FSYNC;
        if (redisAsyncCommand(ac, simba__redis_on_hs, &c->hs[3 + SIMBA__RS_N], "CONFIG GET appendfsync") == REDIS_OK)
            c->hs_left++;
        /* Sentinel: the address they named must still be the primary (a stale answer, or
           a demoted primary that came back). */
        c->hs[4 + SIMBA__RS_N].c = c;
        c->hs[4 + SIMBA__RS_N].script = SIMBA__RHS_ROLE;
        if (r->nsen && redisAsyncCommand(ac, simba__redis_on_hs, &c->hs[4 + SIMBA__RS_N], "ROLE") == REDIS_OK)
            c->hs_left++;
        /* The layout the prefix's keys are in, at first contact (a Cluster's markers are per
           slot: there the grants find it). */
        c->hs[5 + SIMBA__RS_N].c = c;
        c->hs[5 + SIMBA__RS_N].script = SIMBA__RHS_MARKER;
        if (!r->cluster && redisAsyncCommand(ac, simba__redis_on_hs, &c->hs[5 + SIMBA__RS_N], "GET %salive", r->prefix) == REDIS_OK)
            c->hs_left++;
    }
}

static void simba__redis_on_master(redisAsyncContext *ac, void *reply, void *priv);

static void simba__rconn_ready(simba__rconn *c) {
    simba__redis *r = c->r;
    c->state = SIMBA__RC_READY;
    c->was_ready = 1;
    c->backoff = 0;
    if (c->is_sen) {
        redisAsyncCommand(c->ac, simba__redis_on_master, r, "SENTINEL get-master-addr-by-name %s", r->master_name);
    } else if (c->is_sub) {
        /* Only now, after AUTH: a SUBSCRIBE refused with NOAUTH would hide the real error. */
        size_t b;
        for (b = 0; b < r->chans.nb; b++) {
            simba__hnode *nd;
            for (nd = r->chans.b[b]; nd; nd = nd->hnext) simba__redis_sub_send(r, (simba__rsub *)nd);
        }
    } else {
        simba__rop *op = r->pending;
        int64_t now = simba_now(r->loop);
        r->evict_msg[0] = 0;
        if (r->policy[0] && strcmp(r->policy, "noeviction") != 0) {
            /* Owner keys carry a TTL: volatile-* and allkeys-* may evict one under memory
               pressure, and the mutex would go to a second owner. */
            snprintf(r->evict_msg, sizeof(r->evict_msg),
                     "redis maxmemory-policy is %s: an evicted owner record hands out a held mutex; "
                     "set it to noeviction (or simba_redis_desc.allow_eviction)", r->policy);
            simba_log(r->loop, r->allow_eviction ? SIMBA_LOG_WARN : SIMBA_LOG_ERROR, "%s%s", r->evict_msg,
                      r->allow_eviction ? " [allowed by allow_eviction]" : "");
            if (r->allow_eviction) r->evict_msg[0] = 0;
        }
        r->pending = r->pending_tail = NULL;
        while (op) {
            simba__rop *next = op->next;
            simba__redis_send(r, op, now);
            op = next;
        }
    }
}

/* After hiredis ran: notice what happened to the connection. */
static void simba__rconn_settle(simba__rconn *c, int64_t now) {
    if (c->state == SIMBA__RC_DOWN) return;
    if (!c->ac) {
        simba__rconn_down(c, now);
        return;
    }
    if (c->hs_failed) {
        simba__rconn_drop(c, now);
        return;
    }
    if (c->state == SIMBA__RC_CONNECTING && (c->ac->c.flags & REDIS_CONNECTED) && c->hs_left <= 0)
        simba__rconn_ready(c);
}

/* ---- Sentinel --------------------------------------------------------------------------- */

/* The sentinels named the primary: connections to another address go and are made again at
   once (their reconnect raises SIMBA_EV_RESET; the new primary's run_id quarantines). */
static void simba__redis_set_primary(simba__redis *r, const char *host, int port, const char *why) {
    unsigned char addr[16];
    int64_t now = simba_now(r->loop);
    char *h;
    if ((inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1) || port <= 0 || port > 65535) {
        simba__redis_seterr(r, "sentinel", "named a primary that is not a numeric address");
        return;
    }
    if (port == r->port && strcmp(host, r->host) == 0) {
        r->addr_ok = 1;
        return;
    }
    if (!(h = simba__strdup(r->loop, host))) return;
    simba_free(r->loop, r->host);
    r->host = h;
    r->port = port;
    r->addr_ok = 1;
    simba_log(r->loop, SIMBA_LOG_WARN, "redis sentinel: primary of %s is %s:%d (%s)", r->master_name, host, port, why);
    if (r->cmd.state != SIMBA__RC_DOWN) simba__rconn_drop(&r->cmd, now);
    if (r->sub.state != SIMBA__RC_DOWN) simba__rconn_drop(&r->sub, now);
    r->cmd.deadline = r->sub.deadline = now;
    r->cmd.backoff = r->sub.backoff = 0;
}

/* "+switch-master <name> <old ip> <old port> <new ip> <new port>" */
static void simba__redis_on_switch(redisAsyncContext *ac, void *reply, void *priv) {
    simba__redis *r = (simba__redis *)priv;
    redisReply *x = (redisReply *)reply;
    char name[128], oh[48], nh[48];
    int op, np;
    (void)ac;
    if (!x || r->destroying || x->type != REDIS_REPLY_ARRAY || x->elements < 3 ||
        x->element[0]->type != REDIS_REPLY_STRING || strcmp(x->element[0]->str, "message") != 0 ||
        x->element[2]->type != REDIS_REPLY_STRING)
        return;
    if (sscanf(x->element[2]->str, "%127s %47s %d %47s %d", name, oh, &op, nh, &np) != 5) return;
    if (strcmp(name, r->master_name) == 0) simba__redis_set_primary(r, nh, np, "+switch-master");
}

/* SENTINEL get-master-addr-by-name: [ip, port], or nil for a name it does not monitor. */
static void simba__redis_on_master(redisAsyncContext *ac, void *reply, void *priv) {
    simba__redis *r = (simba__redis *)priv;
    redisReply *x = (redisReply *)reply;
    char port[8], d[240];
    if (!x || r->destroying) return;
    if (x->type == REDIS_REPLY_ARRAY && x->elements == 2 && x->element[0]->type == REDIS_REPLY_STRING &&
        x->element[1]->type == REDIS_REPLY_STRING && x->element[1]->len < sizeof(port)) {
        memcpy(port, x->element[1]->str, x->element[1]->len + 1);
        simba__redis_set_primary(r, x->element[0]->str, atoi(port), "asked");
        /* From now on this connection only listens for failovers. */
        redisAsyncCommand(ac, simba__redis_on_switch, r, "SUBSCRIBE +switch-master");
        return;
    }
    snprintf(d, sizeof(d), "%s:%d does not name a primary for \"%.64s\" (%.60s)", r->sen_host[r->sen_i],
             r->sen_port[r->sen_i], r->master_name, x->type == REDIS_REPLY_ERROR ? x->str : "unknown master name");
    simba__redis_seterr(r, "sentinel", d);
    r->sen.hs_failed = 1; /* settle() drops it; the next attempt asks the next sentinel */
}

/* Writes what hiredis has buffered (non-blocking; EAGAIN keeps wr), counted. */
static void simba__rconn_write(simba__rconn *c) {
    if (SIMBA__RCONN_HELD(c)) return;
    c->writes++;
    redisAsyncHandleWrite(c->ac);
}

static void simba__rconn_io(simba__rconn *c, short revents, int64_t now) {
    if (c->ac && (revents & (POLLIN | POLLERR | POLLHUP)) && !SIMBA__RCONN_SLOW(c)) redisAsyncHandleRead(c->ac);
    if (c->ac && c->wr && (revents & (POLLOUT | POLLERR | POLLHUP))) simba__rconn_write(c);
    simba__rconn_settle(c, now);
}

/* Write what is buffered now rather than a poll later. */
static void simba__rconn_flush(simba__rconn *c, int64_t now) {
    if (c->ac && c->wr && c->state == SIMBA__RC_READY) {
        simba__rconn_write(c);
        simba__rconn_settle(c, now);
    }
}

/* ---- vtable ------------------------------------------------------------------------------ */

static simba_result simba__redis_req_check(const simba_req *req) {
    if (!req || !req->mutex || req->op < SIMBA_OP_ACQUIRE || (req->op > SIMBA_OP_YIELD && req->op != SIMBA_OP_CALL))
        return SIMBA_EINVAL;
    if (req->op == SIMBA_OP_LIST) return SIMBA_OK; /* no mutex */
    /* The core checks names too; braces would also move the cluster hash tag. */
    if (simba_name_check(req->mutex) != SIMBA_OK || strpbrk(req->mutex, "{}")) return SIMBA_EINVAL;
    if ((req->op < SIMBA_OP_READ || req->op == SIMBA_OP_SET_VALUE || req->op == SIMBA_OP_YIELD) &&
        (!req->contender || simba_id_check(req->contender) != SIMBA_OK))
        return SIMBA_EINVAL;
    /* the core refuses a longer value before any backend sees it; this guards the vt */
    if ((req->op == SIMBA_OP_ACQUIRE || req->op == SIMBA_OP_SET_VALUE) &&
        (req->value_len > SIMBA_VALUE_MAX || (req->value_len && !req->value)))
        return SIMBA_EINVAL;
    if (req->op == SIMBA_OP_ACQUIRE &&
        (req->ttl_ms <= 0 || req->ttl_ms > SIMBA_MAX_MS || req->transition_ms < 0 ||
         req->transition_ms > SIMBA_MAX_MS || req->live_ms < 0 || req->live_ms > SIMBA_MAX_MS))
        return SIMBA_EINVAL;
    /* a yielder waits at the back: its place needs a liveness bound */
    if (req->op == SIMBA_OP_YIELD && (req->live_ms < 0 || req->live_ms > SIMBA_MAX_MS || req->ttl_ms < 0 ||
                                      req->transition_ms < 0 || req->ttl_ms > SIMBA_MAX_MS ||
                                      req->transition_ms > SIMBA_MAX_MS || req->live_ms + req->ttl_ms + req->transition_ms <= 0))
        return SIMBA_EINVAL;
    return SIMBA_OK;
}

/* hops, asking: a Cluster redirection (MOVED/ASK) brought the request to this node. */
static simba_result simba__redis_submit_ex(simba__redis *r, simba_req *req, int hops, int asking) {
    simba__rop *op;
    int64_t now;
    simba_result rc;
    if (!r) return SIMBA_EINVAL;
    if ((rc = simba__redis_req_check(req)) != SIMBA_OK) return rc;
    if (r->destroying) return SIMBA_ECLOSED;
    op = r->free_ops;
    if (op) {
        r->free_ops = op->next;
        r->nfree_ops--;
    } else {
        op = (simba__rop *)simba__zalloc(r->loop, sizeof(*op));
        if (!op) return SIMBA_ENOMEM;
        op->r = r;
        op->all_next = r->all_ops;
        op->all_prev = NULL;
        if (r->all_ops) r->all_ops->all_prev = op;
        r->all_ops = op;
    }
    op->next = op->prev = NULL;
    op->req = req;
    op->retried = 0;
    op->hops = hops;
    op->asking = asking;
    op->waits = op->have = 0;
    op->acked = 0;
    op->deadline = INT64_MAX;
    op->seq = 0;
    if (req->op == SIMBA_OP_ACQUIRE) simba__redis_wake_acquire(r, req->mutex, req->contender);
    else if (req->op == SIMBA_OP_RELEASE) op->seq = simba__redis_wake_seq(r, req->mutex, req->contender);
    /* An observer or a waiter: every follower hears each grant and new value, not only the
       head its wake-up (one subscription per mutex and process, whatever its followers). */
    if (simba__redis_follows(req)) simba__redis_owner_sub(r, req->mutex);
    op->cursor[0] = 0;
    now = simba_now(r->loop);
    if (r->cmd.state == SIMBA__RC_READY) {
        simba__redis_send(r, op, now);
        /* In a poll, the flush after this round writes it with the others (simba__in_poll).
           A Cluster redirection is re-sent from inside a node's process: at once. */
        if (!simba__in_poll(r->loop) || hops > 0) simba__rconn_flush(&r->cmd, now);
    } else if (r->cmd.state == SIMBA__RC_CONNECTING ||
               (simba__redis_inspection(req->op) && r->nsen && !r->addr_ok && !r->cmd.was_ready)) {
        /* An inspection has no retry of its own: right after the open it waits for the
           sentinels to name the primary, a connect timeout at most. */
        if (r->cmd.state != SIMBA__RC_CONNECTING) op->deadline = simba__add(now, r->connect_to);
        if (r->pending_tail) r->pending_tail->next = op; else r->pending = op;
        r->pending_tail = op;
    } else {
        simba__rop_fail(r, op, SIMBA_ECONN, r->err[0] ? r->err : "redis not connected");
    }
    return SIMBA_OK;
}

/* Inspections waiting for the sentinels past their deadline fail (the rest keeps its order). */
static int64_t simba__redis_pending_due(simba__redis *r, int64_t now, int fail) {
    simba__rop *op = r->pending, *prev = NULL, *next;
    int64_t d = INT64_MAX;
    for (; op; op = next) {
        next = op->next;
        if (!fail || op->deadline > now) {
            if (op->deadline < d) d = op->deadline;
            prev = op;
            continue;
        }
        if (prev) prev->next = next; else r->pending = next;
        if (r->pending_tail == op) r->pending_tail = prev;
        op->next = NULL;
        simba__rop_fail(r, op, SIMBA_ETIMEDOUT, "redis: the sentinels named no primary in time");
    }
    return d;
}

static simba_result simba__redis_submit(void *impl, simba_req *req) {
    return simba__redis_submit_ex((simba__redis *)impl, req, 0, 0);
}

static int simba__redis_fds(void *impl, struct pollfd *out, int cap) {
    simba__redis *r = (simba__redis *)impl;
    simba__rconn *cs[3];
    int i, n = 0;
    cs[0] = &r->cmd;
    cs[1] = &r->sub;
    cs[2] = &r->sen;
    for (i = 0; i < 3; i++) {
        simba__rconn *c = cs[i];
        short ev = (short)((c->rd && !SIMBA__RCONN_SLOW(c) ? POLLIN : 0) | (c->wr && !SIMBA__RCONN_HELD(c) ? POLLOUT : 0));
        if (!c->ac || c->fd < 0 || !ev) continue;
        if (out && n < cap) {
            out[n].fd = c->fd;
            out[n].events = ev;
            out[n].revents = 0;
        }
        n++;
    }
    return n;
}

static int simba__redis_sub_needed(const simba__redis *r) { return r->mutexes.n > 0; }

/* Whether a connection that is down should be made again now that its backoff has passed. */
static int simba__rconn_wanted(const simba__redis *r, const simba__rconn *c) {
    if (c->is_sen) return r->nsen > 0;
    if (r->nsen && !r->addr_ok) return 0; /* the sentinels have not named the primary yet */
    return !c->is_sub || simba__redis_sub_needed(r);
}

/* >>process */
static void simba__redis_process(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    simba__redis *r = (simba__redis *)impl;
    simba__rconn *cs[3];
    short rev[3] = {0, 0, 0};
    int i, j;
    if (!r || r->destroying) return;
    cs[0] = &r->cmd;
    cs[1] = &r->sub;
    cs[2] = &r->sen;
    if (!(flags & SIMBA_PROCESS_IO) && r->io_at != now) {
        /* Tick mode: our own zero-timeout look at our descriptors. Not again when the loop
           looked at them in this same poll (it calls us once more after every round of
           answers, so that new requests go out): that costs a syscall per round trip and
           anything that arrives later still wakes the caller's poll. */
        struct pollfd p[3];
        int k = simba__redis_fds(r, p, 3), m = 0;
        if (k > 0 && poll(p, (nfds_t)k, 0) > 0) {
            for (i = 0; i < 3; i++)
                if (cs[i]->ac && cs[i]->fd >= 0 && m < k && p[m].fd == cs[i]->fd &&
                    (cs[i]->rd || cs[i]->wr))
                    rev[i] = p[m++].revents;
        }
    } else if ((flags & SIMBA_PROCESS_IO) && ready) {
        r->io_at = now;
        for (i = 0; i < 3; i++)
            for (j = 0; j < n; j++)
                if (cs[i]->ac && cs[i]->fd >= 0 && ready[j].fd == cs[i]->fd) rev[i] |= ready[j].revents;
    }
    for (i = 0; i < 3; i++) {
        simba__rconn *c = cs[i];
        if (rev[i]) simba__rconn_io(c, rev[i], now);
        if (c->state == SIMBA__RC_CONNECTING && now >= c->deadline) {
            simba__redis_seterr(r, c->is_sen ? "sentinel connect" : c->is_sub ? "subscriber connect" : "connect", "timed out");
            simba__rconn_drop(c, now);
        } else if (c == &r->cmd && c->state == SIMBA__RC_READY && r->inflight &&
                   r->inflight->deadline <= now) {
            simba__redis_seterr(r, "command", "timed out; reconnecting");
            simba__rconn_drop(c, now);
            /* The server may be fine (one slow command): try again soon. */
            c->deadline = now;
        }
        if (c->state == SIMBA__RC_DOWN && now >= c->deadline && simba__rconn_wanted(r, c))
            simba__rconn_start(c, now);
        simba__rconn_flush(c, now);
    }
    if (r->pending && r->cmd.state == SIMBA__RC_DOWN) simba__redis_pending_due(r, now, 1);
    if (r->reset_pending && r->cmd.state == SIMBA__RC_READY &&
        (r->sub.state == SIMBA__RC_READY || !simba__redis_sub_needed(r))) {
        r->reset_pending = 0;
        simba__redis_event_all(r, SIMBA_EV_RESET);
    }
}

static int64_t simba__redis_deadline(void *impl) {
    simba__redis *r = (simba__redis *)impl;
    int64_t d = INT64_MAX;
    if (!r) return d;
    if (r->cmd.state != SIMBA__RC_READY && (r->cmd.state != SIMBA__RC_DOWN || simba__rconn_wanted(r, &r->cmd)))
        d = r->cmd.deadline;
    else if (r->inflight) d = r->inflight->deadline;
    if (r->nsen && r->sen.state != SIMBA__RC_READY && r->sen.deadline < d) d = r->sen.deadline;
    if (r->pending && r->cmd.state == SIMBA__RC_DOWN) d = simba__min(d, simba__redis_pending_due(r, 0, 0));
    if (r->sub.state == SIMBA__RC_CONNECTING ||
        (r->sub.state == SIMBA__RC_DOWN && simba__rconn_wanted(r, &r->sub)))
        if (r->sub.deadline < d) d = r->sub.deadline;
    return d;
}

static simba_result simba__redis_watch(void *impl, const char *mutex) {
    simba__redis *r = (simba__redis *)impl;
    simba__rmutex *m;
    char chan[SIMBA__REDIS_KEY_MAX];
    if (!r || !mutex || simba_name_check(mutex) != SIMBA_OK || strpbrk(mutex, "{}")) return SIMBA_EINVAL;
    m = simba__redis_mutex(r, mutex);
    if (m) {
        m->refs++;
        return SIMBA_OK;
    }
    m = (simba__rmutex *)simba__redis_node_new(r->loop, &r->mutexes, sizeof(*m), mutex);
    if (!m) return SIMBA_ENOMEM;
    m->refs = 1;
    simba__redis_evchan(chan, sizeof(chan), r, mutex);
    m->ev = simba__redis_sub_new(r, m, chan, NULL, SIMBA__RSUB_EV);
    if (!m->ev) {
        simba__hremove(&r->mutexes, &m->node);
        simba_free(r->loop, (void *)m->node.key);
        simba_free(r->loop, m);
        return SIMBA_ENOMEM;
    }
    /* First watch: bring the subscriber connection up now rather than at the next poll. */
    if (r->sub.state == SIMBA__RC_DOWN && !r->sub.was_ready && !r->sub.ac)
        simba__rconn_start(&r->sub, simba_now(r->loop));
    return SIMBA_OK;
}

static void simba__redis_mutex_free(simba__redis *r, simba__rmutex *m, int unsubscribe) {
    while (m->wakes) {
        simba__rsub *s = m->wakes;
        m->wakes = s->mnext;
        if (unsubscribe) simba__redis_unsubscribe(r, s);
        simba__redis_sub_free(r, s);
    }
    if (m->ev) {
        if (unsubscribe) simba__redis_unsubscribe(r, m->ev);
        simba__redis_sub_free(r, m->ev);
    }
    if (m->ow) {
        if (unsubscribe) simba__redis_unsubscribe(r, m->ow);
        simba__redis_sub_free(r, m->ow);
    }
    simba__hremove(&r->mutexes, &m->node);
    simba_free(r->loop, (void *)m->node.key);
    simba_free(r->loop, m);
}

static void simba__redis_unwatch(void *impl, const char *mutex) {
    simba__redis *r = (simba__redis *)impl;
    simba__rmutex *m;
    if (!r || !mutex) return;
    m = simba__redis_mutex(r, mutex);
    if (!m || --m->refs > 0) return;
    simba__redis_mutex_free(r, m, 1);
}

/* >>close */
static void simba__redis_destroy(void *impl) {
    simba__redis *r = (simba__redis *)impl;
    simba_loop *loop;
    simba__rop *op;
    size_t b;
    if (!r) return;
    loop = r->loop;
    r->destroying = 1;
    /* In-flight requests complete (SIMBA_ECLOSED) from hiredis' NULL-reply callbacks. */
    if (r->cmd.ac) redisAsyncFree(r->cmd.ac);
    if (r->sub.ac) redisAsyncFree(r->sub.ac);
    if (r->sen.ac) redisAsyncFree(r->sen.ac);
    while (r->pending) {
        op = r->pending;
        r->pending = op->next;
        simba__rop_fail(r, op, SIMBA_ECLOSED, "redis backend closed");
    }
    for (b = 0; b < r->mutexes.nb; b++)
        while (r->mutexes.b[b]) simba__redis_mutex_free(r, (simba__rmutex *)r->mutexes.b[b], 0);
    simba_free(loop, r->mutexes.b);
    simba_free(loop, r->chans.b);
    while (r->all_ops) {
        op = r->all_ops;
        r->all_ops = op->all_next;
        simba_free(loop, op);
    }
    simba_free(loop, r->host);
    simba_free(loop, r->unix_path);
    simba_free(loop, r->username);
    simba_free(loop, r->password);
    simba_free(loop, r->prefix);
    simba_free(loop, r->master_name);
    simba_free(loop, r);
}

static const simba_backend_vt simba__redis_vt = {
    sizeof(simba_backend_vt),
    "redis",
    simba__redis_submit,
    simba__redis_fds,
    simba__redis_process,
    simba__redis_deadline,
    simba__redis_watch,
    simba__redis_unwatch,
    simba__redis_destroy,
    SIMBA_LEASE_ASKED,
    NULL, /* hurry: every request goes out at once */
    simba__redis_submit, /* inspect: scripts like the requests' */
    NULL, /* announce: the scripts publish each grant and value on the owner channel */
};

/* One backend's state for host:port (a standalone server or one Cluster node); NULL when
   out of memory. Its connections start later. */
static simba__redis *simba__redis_make(simba_loop *loop, const simba_redis_desc *desc, const char *host, int port) {
    simba__redis *r = (simba__redis *)simba__zalloc(loop, sizeof(*r));
    if (!r) return NULL;
    r->loop = loop;
    r->port = port;
    r->db = desc->db;
    r->cluster = desc->cluster;
    r->connect_to = desc->connect_timeout_ms ? desc->connect_timeout_ms : 2000;
    r->cmd_to = desc->command_timeout_ms ? desc->command_timeout_ms : 2000;
    r->rmin = desc->reconnect_min_ms ? desc->reconnect_min_ms : 100;
    r->rmax = desc->reconnect_max_ms ? desc->reconnect_max_ms : (r->rmin > 5000 ? r->rmin : 5000);
    r->max_lease = desc->max_lease_ms ? desc->max_lease_ms : SIMBA_MAX_LEASE_DEFAULT_MS;
    r->allow_eviction = desc->allow_eviction;
    r->wait_replicas = desc->wait_replicas;
    r->wait_to = desc->wait_timeout_ms ? desc->wait_timeout_ms : 200;
    r->host = simba__strdup(loop, host);
    r->unix_path = simba__strdup(loop, desc->unix_path);
    r->username = simba__strdup(loop, desc->username);
    r->password = simba__strdup(loop, desc->password);
    r->prefix = simba__strdup(loop, desc->prefix ? desc->prefix : "simba:");
    r->io_at = INT64_MIN;
    r->cmd.r = r->sub.r = r->sen.r = r;
    r->sub.is_sub = 1;
    r->sen.is_sen = 1;
    r->cmd.fd = r->sub.fd = r->sen.fd = -1;
    r->cmd.backoff = r->sub.backoff = r->sen.backoff = 0;
    if (desc->sentinels) {
        for (; desc->sentinels[r->nsen] && r->nsen < SIMBA__REDIS_SENTINELS_MAX; r->nsen++) {
            const char *a = desc->sentinels[r->nsen], *colon = strrchr(a, ':');
            snprintf(r->sen_host[r->nsen], sizeof(r->sen_host[0]), "%.*s", (int)(colon - a), a);
            r->sen_port[r->nsen] = atoi(colon + 1);
        }
        r->master_name = simba__strdup(loop, desc->master_name);
    }
    if (!r->host || !r->prefix || (desc->sentinels && !r->master_name) || (desc->unix_path && !r->unix_path) ||
        (desc->username && !r->username) || (desc->password && !r->password)) {
        simba__redis_destroy(r);
        return NULL;
    }
    return r;
}

/* ---- Redis Cluster: a router over one backend state per primary ------------------------- */

#define SIMBA__RCL_SLOTS 16384
#define SIMBA__RCL_NODES_MAX 64
#define SIMBA__RCL_HOPS 5 /* redirections one request may follow before it fails */

typedef struct simba__rcl_mutex {
    simba__hnode node; /* key = mutex name */
    int refs;
    simba__redis *at; /* the node it is watched on, NULL while its slot is unknown */
} simba__rcl_mutex;

typedef struct simba__rcluster {
    simba_loop *loop;
    simba_backend *be;
    simba_redis_desc tmpl; /* what every node is opened with; its strings are the nodes' */
    simba__redis *nodes[SIMBA__RCL_NODES_MAX];
    int nnodes, ask_from;
    int16_t *slots;        /* node index per slot; -1: no primary known */
    char (*tags)[SIMBA__RCL_TAG]; /* marker tag per slot */
    int have_map, map_bad; /* map_bad: the last CLUSTER SLOTS was refused (not a cluster) */
    int map_want, map_busy;
    simba__redis *map_node;           /* asked for the map */
    int64_t map_deadline, map_next;   /* busy: its answer's deadline; else: next ask */
    simba_req **pending;              /* submitted before the first map */
    size_t npending, cap_pending;
    int64_t pending_deadline;
    simba__htab mutexes;
    int destroying;
    char err[256];
} simba__rcluster;

static void simba__rcl_seterr(simba__rcluster *rc, simba_log_level level, const char *msg) {
    simba__copy(rc->err, sizeof(rc->err), msg);
    simba_log(rc->loop, level, "%s", rc->err);
}


/* The node for a primary's address, made (and connecting) on first sight. */
static simba__redis *simba__rcl_node(simba__rcluster *rc, const char *host, int port) {
    simba__redis *n;
    unsigned char addr[16];
    int i;
    for (i = 0; i < rc->nnodes; i++)
        if (rc->nodes[i]->port == port && strcmp(rc->nodes[i]->host, host) == 0) return rc->nodes[i];
    /* Only numeric addresses: resolving a name could block the loop. */
    if (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1) return NULL;
    if (rc->nnodes >= SIMBA__RCL_NODES_MAX || port <= 0 || port > 65535) return NULL;
    n = simba__redis_make(rc->loop, &rc->tmpl, host, port);
    if (!n) return NULL;
    n->be = rc->be;
    n->router = rc;
    n->cluster = 1;
    n->tags = rc->tags;
    rc->nodes[rc->nnodes++] = n;
    simba__rconn_start(&n->cmd, simba_now(rc->loop));
    return n;
}

static int simba__rcl_index(const simba__rcluster *rc, const simba__redis *n) {
    int i;
    for (i = 0; i < rc->nnodes; i++)
        if (rc->nodes[i] == n) return i;
    return -1;
}

static simba__redis *simba__rcl_owner(const simba__rcluster *rc, const char *mutex) {
    int i = rc->have_map ? rc->slots[simba__rcl_slot(mutex)] : -1;
    return i >= 0 && i < rc->nnodes ? rc->nodes[i] : NULL;
}

static void simba__rcl_want_map(simba__redis *r, const char *why) {
    simba__rcluster *rc = r->router;
    if (!rc || rc->destroying || rc->map_want || rc->map_busy) return;
    simba_log(rc->loop, SIMBA_LOG_INFO, "redis cluster: refreshing the slot map (%s)", why);
    rc->map_want = 1;
}

/* Each watched mutex lives on the node that serves its slot: a moved slot moves its watch
   (and the subscriptions with it), and its services ask again (SIMBA_EV_RESET). */
static void simba__rcl_rehome(simba__rcluster *rc) {
    size_t b;
    simba__hnode *nd;
    for (b = 0; b < rc->mutexes.nb; b++)
        for (nd = rc->mutexes.b[b]; nd; nd = nd->hnext) {
            simba__rcl_mutex *m = (simba__rcl_mutex *)nd;
            simba__redis *want = simba__rcl_owner(rc, nd->key);
            if (want == m->at) continue;
            if (m->at) simba__redis_unwatch(m->at, nd->key);
            m->at = want && simba__redis_watch(want, nd->key) == SIMBA_OK ? want : NULL;
            simba_backend_event(rc->be, SIMBA_EV_RESET, nd->key, NULL, NULL);
        }
}

/* >>list A listing asks every primary for its keys: one part per node, the whole answered
   when the last part is (with the first failure, if any). */
typedef struct simba__rcl_part {
    simba_req req; /* first: a part's request is the part */
    struct simba__rcl_list *list;
} simba__rcl_part;
typedef struct simba__rcl_list {
    simba_loop *loop;
    simba_req *whole;
    int left;
    simba_result rc;
    char err[160];
    simba__rcl_part part[SIMBA__RCL_NODES_MAX];
} simba__rcl_list;

static void simba__rcl_list_note(simba__rcl_list *L, const simba_reply *rep) {
    if (rep->rc != SIMBA_OK && L->rc == SIMBA_OK) {
        L->rc = rep->rc;
        simba__copy(L->err, sizeof L->err, rep->errmsg ? rep->errmsg : simba_strerror(rep->rc));
    }
    if (--L->left > 0) return;
    {
        simba_reply out;
        simba_req_done(L->whole, simba__reply_fail(&out, L->rc, L->rc != SIMBA_OK ? L->err : NULL));
        simba_free(L->loop, L);
    }
}

static void simba__rcl_list_part(simba_req *req, const simba_reply *rep) {
    simba__rcl_list_note(((simba__rcl_part *)(void *)req)->list, rep);
}

static void simba__rcl_list_start(simba__rcluster *rc, simba_req *req) {
    simba__rcl_list *L = (simba__rcl_list *)simba_alloc(rc->loop, sizeof *L);
    int i, n = rc->nnodes;
    if (!L) {
        simba_req_fail(req, SIMBA_ENOMEM, "redis cluster: out of memory");
        return;
    }
    memset(L, 0, sizeof *L);
    L->loop = rc->loop;
    L->whole = req;
    L->left = n + 1; /* held by this loop until every part is out */
    for (i = 0; i < n; i++) {
        simba_req *p = &L->part[i].req;
        L->part[i].list = L;
        *p = *req; /* its views go to the whole's answer */
        p->done_ = 0;
        if (simba__redis_submit_ex(rc->nodes[i], p, 0, 0) != SIMBA_OK) {
            simba_reply f;
            memset(&f, 0, sizeof f);
            f.rc = SIMBA_EBACKEND;
            f.errmsg = "redis cluster: cannot submit";
            simba__rcl_list_note(L, &f);
        }
    }
    {
        simba_reply ok;
        memset(&ok, 0, sizeof ok);
        simba__rcl_list_note(L, &ok); /* the loop's own hold */
    }
}

static void simba__rcl_route(simba__rcluster *rc, simba_req *req) {
    simba__redis *n;
    char msg[96];
    if (req->op == SIMBA_OP_LIST) {
        simba__rcl_list_start(rc, req);
        return;
    }
    n = simba__rcl_owner(rc, req->mutex);
    /* Its primary is unreachable: a replica may be taking over (asked at most every
       reconnect_min_ms); this request fails now and the core retries with its backoff. */
    if (n && n->cmd.state == SIMBA__RC_DOWN) simba__rcl_want_map(n, "a primary is unreachable");
    if (!n) {
        snprintf(msg, sizeof(msg), "redis cluster: no primary serves slot %d", simba__rcl_slot(req->mutex));
        simba_req_fail(req, SIMBA_EBACKEND, msg);
        rc->map_want = 1;
        return;
    }
    if (simba__redis_submit_ex(n, req, 0, 0) != SIMBA_OK) simba_req_fail(req, SIMBA_EBACKEND, "redis cluster: cannot submit");
}

static void simba__rcl_flush_pending(simba__rcluster *rc, simba_result code) {
    size_t i, n = rc->npending;
    rc->npending = 0;
    for (i = 0; i < n; i++) {
        if (code == SIMBA_OK) simba__rcl_route(rc, rc->pending[i]);
        else simba_req_fail(rc->pending[i], code, rc->err[0] ? rc->err : "redis cluster: no slot map");
    }
}

/* CLUSTER SLOTS: [[start, end, [host, port, id, ...], replicas...], ...]. */
static void simba__rcl_on_slots(redisAsyncContext *ac, void *reply, void *priv) {
    simba__redis *asked = (simba__redis *)priv;
    simba__rcluster *rc = asked->router;
    redisReply *x = (redisReply *)reply;
    char msg[256];
    size_t i;
    int s;
    (void)ac;
    if (!rc || rc->destroying || !rc->map_busy || rc->map_node != asked) return;
    rc->map_busy = 0;
    rc->map_node = NULL;
    if (!x) {
        rc->map_want = 1;
        return;
    }
    if (x->type == REDIS_REPLY_ERROR) {
        snprintf(msg, sizeof(msg), "redis cluster: %s:%d refused CLUSTER SLOTS (%.120s): it is not a Redis Cluster node; "
                 "open it without simba_redis_desc.cluster", asked->host, asked->port, x->str);
        simba__rcl_seterr(rc, SIMBA_LOG_ERROR, msg);
        rc->map_bad = 1;
        rc->map_next = simba__add(simba_now(rc->loop), asked->rmax);
        rc->map_want = 1;
        simba__rcl_flush_pending(rc, SIMBA_EBACKEND);
        return;
    }
    if (x->type != REDIS_REPLY_ARRAY) {
        rc->map_want = 1;
        return;
    }
    for (s = 0; s < SIMBA__RCL_SLOTS; s++) rc->slots[s] = -1;
    for (i = 0; i < x->elements; i++) {
        const redisReply *e = x->element[i], *h;
        char host[64];
        long long a, z, port;
        simba__redis *n;
        int idx;
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
            e->element[2]->elements < 2)
            continue;
        a = e->element[0]->integer;
        z = e->element[1]->integer;
        h = e->element[2];
        if (h->element[0]->type != REDIS_REPLY_STRING || h->element[1]->type != REDIS_REPLY_INTEGER) continue;
        port = h->element[1]->integer;
        /* An empty host means "the address you reached me at". */
        snprintf(host, sizeof(host), "%s", h->element[0]->len ? h->element[0]->str : asked->host);
        if (a < 0 || z >= SIMBA__RCL_SLOTS || a > z || port <= 0 || port > 65535) continue;
        n = simba__rcl_node(rc, host, (int)port);
        if (!n) {
            snprintf(msg, sizeof(msg), "redis cluster: cannot use primary %.64s:%lld (a numeric address is needed, "
                     "at most %d nodes)", host, port, SIMBA__RCL_NODES_MAX);
            simba__rcl_seterr(rc, SIMBA_LOG_ERROR, msg);
            continue;
        }
        idx = simba__rcl_index(rc, n);
        for (s = (int)a; s <= (int)z; s++) rc->slots[s] = (int16_t)idx;
    }
    rc->have_map = 1;
    rc->map_bad = 0;
    rc->map_want = 0;
    simba__rcl_rehome(rc);
    simba__rcl_flush_pending(rc, SIMBA_OK);
}

/* A node's op was answered MOVED or ASK: 1 when it went on to the named node. */
static int simba__rcl_redirect(simba__redis *r, simba__rop *op, const char *err) {
    simba__rcluster *rc = r->router;
    int ask = strncmp(err, "ASK ", 4) == 0;
    const char *p = err + (ask ? 4 : 6), *colon;
    char host[64], *end;
    long slot, port;
    simba__redis *n;
    simba_req *req;
    int hops;
    if (!rc || rc->destroying || op->hops >= SIMBA__RCL_HOPS) return 0;
    slot = strtol(p, &end, 10);
    if (end == p || *end != ' ' || slot < 0 || slot >= SIMBA__RCL_SLOTS) return 0;
    p = end + 1;
    colon = strrchr(p, ':');
    if (!colon || colon == p || (size_t)(colon - p) >= sizeof(host)) return 0;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = 0;
    port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535) return 0;
    n = simba__rcl_node(rc, host, (int)port);
    if (!n) return 0;
    if (!ask) {
        /* The slot has moved for good: note it now, and learn the rest of the map. */
        if (rc->have_map) rc->slots[slot] = (int16_t)simba__rcl_index(rc, n);
        simba__rcl_want_map(r, err);
        if (rc->have_map) simba__rcl_rehome(rc);
    }
    req = op->req;
    hops = op->hops + 1;
    simba__rop_release(r, op);
    if (simba__redis_submit_ex(n, req, hops, ask) != SIMBA_OK) simba_req_fail(req, SIMBA_EBACKEND, err);
    return 1;
}

static simba_result simba__rcl_submit(void *impl, simba_req *req) {
    simba__rcluster *rc = (simba__rcluster *)impl;
    simba_result code;
    if (!rc) return SIMBA_EINVAL;
    if ((code = simba__redis_req_check(req)) != SIMBA_OK) return code;
    if (rc->destroying) return SIMBA_ECLOSED;
    if (rc->have_map) {
        simba__rcl_route(rc, req);
        return SIMBA_OK;
    }
    if (rc->map_bad) {
        simba_req_fail(req, SIMBA_EBACKEND, rc->err);
        return SIMBA_OK;
    }
    /* No map yet: held until the first one arrives, for one connect timeout at most. */
    if (rc->npending == rc->cap_pending) {
        size_t cap = rc->cap_pending ? rc->cap_pending * 2 : 16;
        simba_req **p = (simba_req **)simba_alloc(rc->loop, cap * sizeof(*p));
        if (!p) return SIMBA_ENOMEM;
        if (rc->npending) memcpy(p, rc->pending, rc->npending * sizeof(*p));
        simba_free(rc->loop, rc->pending);
        rc->pending = p;
        rc->cap_pending = cap;
    }
    if (!rc->npending) rc->pending_deadline = simba__add(simba_now(rc->loop), rc->nodes[0]->connect_to);
    rc->pending[rc->npending++] = req;
    return SIMBA_OK;
}

static int simba__rcl_fds(void *impl, struct pollfd *out, int cap) {
    simba__rcluster *rc = (simba__rcluster *)impl;
    int i, n = 0;
    for (i = 0; i < rc->nnodes; i++)
        n += simba__redis_fds(rc->nodes[i], out && n < cap ? out + n : NULL, out && n < cap ? cap - n : 0);
    return n;
}

static void simba__rcl_process(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    simba__rcluster *rc = (simba__rcluster *)impl;
    int i;
    if (!rc || rc->destroying) return;
    for (i = 0; i < rc->nnodes; i++) simba__redis_process(rc->nodes[i], ready, n, now, flags);
    if (rc->map_busy && now >= rc->map_deadline) {
        rc->map_busy = 0;
        rc->map_node = NULL;
        rc->map_want = 1;
        rc->ask_from++;
    }
    if ((rc->map_want || !rc->have_map) && !rc->map_busy && now >= rc->map_next) {
        /* Ask the first node that is up, starting after the last one asked. */
        for (i = 0; i < rc->nnodes; i++) {
            simba__redis *nd = rc->nodes[(i + rc->ask_from) % rc->nnodes];
            if (nd->cmd.state != SIMBA__RC_READY || !nd->cmd.ac) continue;
            if (redisAsyncCommand(nd->cmd.ac, simba__rcl_on_slots, nd, "CLUSTER SLOTS") != REDIS_OK) continue;
            rc->map_busy = 1;
            rc->map_node = nd;
            rc->map_deadline = simba__add(now, nd->cmd_to);
            rc->map_next = simba__add(now, nd->rmin); /* at most one map per reconnect_min_ms */
            rc->ask_from = (i + rc->ask_from) % rc->nnodes;
            simba__rconn_flush(&nd->cmd, now);
            break;
        }
    }
    if (rc->npending && now >= rc->pending_deadline) {
        if (!rc->err[0]) simba__copy(rc->err, sizeof(rc->err), "redis cluster: no slot map within connect_timeout_ms");
        simba__rcl_flush_pending(rc, SIMBA_ECONN);
    }
}

static int64_t simba__rcl_deadline(void *impl) {
    simba__rcluster *rc = (simba__rcluster *)impl;
    int64_t d = INT64_MAX, t;
    int i;
    if (!rc) return d;
    for (i = 0; i < rc->nnodes; i++)
        if ((t = simba__redis_deadline(rc->nodes[i])) < d) d = t;
    if (rc->map_busy && rc->map_deadline < d) d = rc->map_deadline;
    if (!rc->map_busy && (rc->map_want || !rc->have_map) && rc->map_next < d) d = rc->map_next;
    if (rc->npending && rc->pending_deadline < d) d = rc->pending_deadline;
    return d;
}

static simba_result simba__rcl_watch(void *impl, const char *mutex) {
    simba__rcluster *rc = (simba__rcluster *)impl;
    simba__rcl_mutex *m;
    simba__redis *n;
    if (!rc || !mutex || simba_name_check(mutex) != SIMBA_OK || strpbrk(mutex, "{}")) return SIMBA_EINVAL;
    m = (simba__rcl_mutex *)simba__hfind(&rc->mutexes, mutex);
    if (m) {
        m->refs++;
        return SIMBA_OK;
    }
    m = (simba__rcl_mutex *)simba__redis_node_new(rc->loop, &rc->mutexes, sizeof(*m), mutex);
    if (!m) return SIMBA_ENOMEM;
    m->refs = 1;
    n = simba__rcl_owner(rc, mutex);
    if (n && simba__redis_watch(n, mutex) == SIMBA_OK) m->at = n;
    return SIMBA_OK;
}

static void simba__rcl_unwatch(void *impl, const char *mutex) {
    simba__rcluster *rc = (simba__rcluster *)impl;
    simba__rcl_mutex *m;
    if (!rc || !mutex) return;
    m = (simba__rcl_mutex *)simba__hfind(&rc->mutexes, mutex);
    if (!m || --m->refs > 0) return;
    if (m->at) simba__redis_unwatch(m->at, mutex);
    simba__hremove(&rc->mutexes, &m->node);
    simba_free(rc->loop, (void *)m->node.key);
    simba_free(rc->loop, m);
}

static void simba__rcl_destroy(void *impl) {
    simba__rcluster *rc = (simba__rcluster *)impl;
    simba_loop *loop;
    size_t b;
    int i;
    if (!rc) return;
    loop = rc->loop;
    rc->destroying = 1;
    simba__copy(rc->err, sizeof(rc->err), "redis backend closed");
    simba__rcl_flush_pending(rc, SIMBA_ECLOSED);
    for (i = 0; i < rc->nnodes; i++) simba__redis_destroy(rc->nodes[i]);
    for (b = 0; b < rc->mutexes.nb; b++)
        while (rc->mutexes.b[b]) {
            simba__rcl_mutex *m = (simba__rcl_mutex *)rc->mutexes.b[b];
            simba__hremove(&rc->mutexes, &m->node);
            simba_free(loop, (void *)m->node.key);
            simba_free(loop, m);
        }
    simba_free(loop, rc->mutexes.b);
    simba_free(loop, rc->pending);
    simba_free(loop, rc->slots);
    simba_free(loop, rc->tags);
    simba_free(loop, (void *)rc->tmpl.username);
    simba_free(loop, (void *)rc->tmpl.password);
    simba_free(loop, (void *)rc->tmpl.prefix);
    simba_free(loop, rc);
}

static const simba_backend_vt simba__rcl_vt = {
    sizeof(simba_backend_vt),
    "redis",
    simba__rcl_submit,
    simba__rcl_fds,
    simba__rcl_process,
    simba__rcl_deadline,
    simba__rcl_watch,
    simba__rcl_unwatch,
    simba__rcl_destroy,
    SIMBA_LEASE_ASKED,
    NULL, /* hurry: every request goes out at once */
    simba__rcl_submit, /* inspect: by slot; a listing asks every primary */
    NULL, /* announce: the scripts publish (see simba__redis_vt) */
};

static simba_result simba__rcl_open(simba_loop *loop, const simba_redis_desc *desc, const char *host, simba_backend **out) {
    simba__rcluster *rc = (simba__rcluster *)simba_alloc(loop, sizeof(*rc));
    simba_result code;
    int s;
    if (!rc) return SIMBA_ENOMEM;
    memset(rc, 0, sizeof(*rc));
    rc->loop = loop;
    rc->tmpl = *desc;
    rc->tmpl.host = NULL;
    rc->tmpl.username = simba__strdup(loop, desc->username);
    rc->tmpl.password = simba__strdup(loop, desc->password);
    rc->tmpl.prefix = simba__strdup(loop, desc->prefix ? desc->prefix : "simba:");
    rc->slots = (int16_t *)simba_alloc(loop, SIMBA__RCL_SLOTS * sizeof(*rc->slots));
    rc->tags = (char (*)[SIMBA__RCL_TAG])simba_alloc(loop, SIMBA__RCL_SLOTS * sizeof(*rc->tags));
    if (!rc->slots || !rc->tags || !rc->tmpl.prefix || (desc->username && !rc->tmpl.username) ||
        (desc->password && !rc->tmpl.password)) {
        simba__rcl_destroy(rc);
        return SIMBA_ENOMEM;
    }
    for (s = 0; s < SIMBA__RCL_SLOTS; s++) rc->slots[s] = -1;
    simba__rcl_tags_fill(rc->tags);
    code = simba_backend_new(loop, &simba__rcl_vt, rc, &rc->be);
    if (code != SIMBA_OK) {
        simba__rcl_destroy(rc);
        return code;
    }
    (void)simba_backend_set_max_lease(rc->be, desc->max_lease_ms ? desc->max_lease_ms : SIMBA_MAX_LEASE_DEFAULT_MS);
    /* The seed: asked for the map once it is up; it serves slots only if the map says so. */
    if (!simba__rcl_node(rc, host, desc->port ? desc->port : 6379)) {
        simba_backend_free(rc->be);
        return SIMBA_ENOMEM;
    }
    *out = rc->be;
    return SIMBA_OK;
}

/* ---- declaring a server empty (blocking, outside any loop) ------------------------------ */

static void simba__rf_msg(char *err, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void simba__rf_msg(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    if (!err || !cap) return;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}
/* A key that only simba writes: a mutex's keys end in "}:<kind>", a marker in "alive". */
static int simba__rf_is_simba_key(const char *k, size_t n) {
    static const char *const ends[] = {"}:owner", "}:fence", "}:queue", "}:qexp", "alive"};
    size_t i, e;
    for (i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        e = strlen(ends[i]);
        if (n >= e && memcmp(k + n - e, ends[i], e) == 0) return 1;
    }
    return 0;
}
/* One command; NULL (and err filled) when it failed or answered an error. */
static redisReply *simba__rf_cmd(redisContext *c, char *err, size_t cap, const char *what, const char *fmt, ...) {
    va_list ap;
    redisReply *x;
    va_start(ap, fmt);
    x = (redisReply *)redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!x) { simba__rf_msg(err, cap, "redis: %s: %s", what, c->errstr[0] ? c->errstr : "no answer"); return NULL; }
    if (x->type == REDIS_REPLY_ERROR) {
        simba__rf_msg(err, cap, "redis: %s: %s", what, x->str);
        freeReplyObject(x);
        return NULL;
    }
    return x;
}

/* A blocking connection for simba_redis_declare_fresh (AUTH done), or NULL with err (rc then
   says why). */
static redisContext *simba__rf_connect(const simba_redis_desc *desc, char *err, size_t errcap, simba_result *rc) {
    redisContext *c;
    redisReply *x;
    struct timeval ct, cmt;
    int64_t cto, cmto;
    const char *host = desc->host ? desc->host : "127.0.0.1";
    cto = desc->connect_timeout_ms > 0 && desc->connect_timeout_ms <= SIMBA_MAX_MS ? desc->connect_timeout_ms : 2000;
    cmto = desc->command_timeout_ms > 0 && desc->command_timeout_ms <= SIMBA_MAX_MS ? desc->command_timeout_ms : 2000;
    ct.tv_sec = (time_t)(cto / 1000);
    ct.tv_usec = (suseconds_t)(cto % 1000 * 1000);
    cmt.tv_sec = (time_t)(cmto / 1000);
    cmt.tv_usec = (suseconds_t)(cmto % 1000 * 1000);
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    c = desc->unix_path ? redisConnectUnixWithTimeout(desc->unix_path, ct)
                        : redisConnectWithTimeout(host, desc->port ? desc->port : 6379, ct);
    if (!c || c->err) {
        simba__rf_msg(err, errcap, "redis: cannot connect to %s:%d: %s", desc->unix_path ? desc->unix_path : host,
                      desc->unix_path ? 0 : desc->port ? desc->port : 6379, c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        *rc = SIMBA_ECONN;
        return NULL;
    }
    redisSetTimeout(c, cmt);
    if (desc->password) {
        x = desc->username ? simba__rf_cmd(c, err, errcap, "AUTH", "AUTH %s %s", desc->username, desc->password)
                           : simba__rf_cmd(c, err, errcap, "AUTH", "AUTH %s", desc->password);
        if (!x) {
            redisFree(c);
            *rc = SIMBA_EBACKEND;
            return NULL;
        }
        freeReplyObject(x);
    }
    return c;
}

/* The server's run_id into out (cap >= 48) and its number of dbs: 0, or -1 with err. */
static int simba__rf_server(redisContext *c, char *out, size_t cap, long *dbs, char *err, size_t errcap) {
    redisReply *x;
    char *p;
    out[0] = 0;
    if (!(x = simba__rf_cmd(c, err, errcap, "INFO server", "INFO server"))) return -1;
    if (x->type == REDIS_REPLY_STRING && (p = strstr(x->str, "run_id:")) != NULL) {
        size_t n = strcspn(p + 7, "\r\n");
        if (n > 0 && n < cap) { memcpy(out, p + 7, n); out[n] = 0; }
    }
    freeReplyObject(x);
    if (!out[0]) { simba__rf_msg(err, errcap, "redis: INFO server gave no run_id: cannot declare this server"); return -1; }
    /* How many dbs: CONFIG may be renamed away; then up to the first SELECT refused. */
    *dbs = 16;
    x = (redisReply *)redisCommand(c, "CONFIG GET databases");
    if (!x && c->err) { simba__rf_msg(err, errcap, "redis: CONFIG GET databases: %s", c->errstr); return -1; }
    if (x && x->type == REDIS_REPLY_ARRAY && x->elements == 2 && x->element[1]->type == REDIS_REPLY_STRING)
        *dbs = strtol(x->element[1]->str, NULL, 10);
    if (x) freeReplyObject(x);
    if (*dbs <= 0 || *dbs > 100000) *dbs = 16;
    return 0;
}

/* Counts the simba keys of the selected db db into *found (the first named in example):
   0, or -1 with err. */
static int simba__rf_scan_db(redisContext *c, long db, long *found, char *example, size_t excap, char *err, size_t errcap) {
    char cursor[32] = "0";
    redisReply *x;
    do {
        size_t i;
        if (!(x = simba__rf_cmd(c, err, errcap, "SCAN", "SCAN %s COUNT 1000", cursor))) return -1;
        if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 || x->element[0]->type != REDIS_REPLY_STRING ||
            x->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(x);
            simba__rf_msg(err, errcap, "redis: SCAN: unexpected reply");
            return -1;
        }
        simba__copy(cursor, sizeof cursor, x->element[0]->str);
        for (i = 0; i < x->element[1]->elements; i++) {
            redisReply *k = x->element[1]->element[i];
            if (k->type == REDIS_REPLY_STRING && simba__rf_is_simba_key(k->str, k->len)) {
                if (!*found) snprintf(example, excap, "db %ld key %.100s", db, k->str);
                (*found)++;
            }
        }
        freeReplyObject(x);
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

SIMBA_API simba_result simba_redis_declare_fresh(const simba_redis_desc *desc, int force, char *err, size_t errcap) {
    redisContext *c;
    redisReply *x;
    char run_id[48] = "";
    long dbs = 16, db, found = 0;
    char example[160] = "";
    simba_result rc = SIMBA_EBACKEND;
    if (err && errcap) err[0] = 0;
    if (!desc) { simba__rf_msg(err, errcap, "simba_redis_declare_fresh: NULL desc"); return SIMBA_EINVAL; }
    if (desc->cluster || desc->sentinels) {
        simba__rf_msg(err, errcap, "simba_redis_declare_fresh: not for Redis Cluster or Sentinel (declare each node's simba:fresh{tag} keys)");
        return SIMBA_EINVAL;
    }
    if (!(c = simba__rf_connect(desc, err, errcap, &rc))) return rc;
    if (simba__rf_server(c, run_id, sizeof run_id, &dbs, err, errcap) != 0) goto done;
    /* Every db's keys are looked at before anything is written. */
    for (db = 0; db < dbs && !found; db++) {
        if (!(x = simba__rf_cmd(c, err, errcap, "SELECT", "SELECT %ld", db))) {
            if (db == 0) goto done;
            dbs = db; /* fewer dbs than assumed */
            if (err && errcap) err[0] = 0;
            break;
        }
        freeReplyObject(x);
        if (simba__rf_scan_db(c, db, &found, example, sizeof example, err, errcap) != 0) goto done;
    }
    if (found && !force) {
        simba__rf_msg(err, errcap, "redis: the server holds simba keys (%s): it may have granted a lease that is still live, "
                      "so it is not declared empty (force to declare it anyway)", example);
        rc = SIMBA_EEXIST;
        goto done;
    }
    for (db = 0; db < dbs; db++) {
        if (!(x = simba__rf_cmd(c, err, errcap, "SELECT", "SELECT %ld", db))) goto done;
        freeReplyObject(x);
        if (!(x = simba__rf_cmd(c, err, errcap, "SET " SIMBA__REDIS_FRESH_KEY, "SET %s %s", SIMBA__REDIS_FRESH_KEY, run_id))) goto done;
        freeReplyObject(x);
    }
    simba__rf_msg(err, errcap, "declared empty: %s = %s in %ld dbs%s", SIMBA__REDIS_FRESH_KEY, run_id, dbs,
                  found ? " (forced over existing simba keys)" : "");
    rc = SIMBA_OK;
done:
    redisFree(c);
    return rc;
}

/* A duration of the desc: 0 (default) .. 2^40 ms, like every duration the core accepts. */

/* >>fenced The fenced write: checked here, sent as any request (the pending queue, the
   command deadline, Sentinel's primary, Cluster routing and MOVED/ASK are the requests'),
   answered through the core's call (simba_backend_call). */

#define SIMBA__RFW_ARGS_MAX 1024

/* An allowed command: Redis' arity (> 0 exact, < 0 at least -arity words) and where its
   keys are (first, last (-1: the last word), step), as COMMAND INFO gives them. */
typedef struct simba__rfw_cmd {
    const char *name;
    int arity, first, last, step;
} simba__rfw_cmd;

static const simba__rfw_cmd simba__rfw_cmds[] = {
    {"SET", -3, 1, 1, 1},      {"DEL", -2, 1, -1, 1},    {"UNLINK", -2, 1, -1, 1}, {"INCR", 2, 1, 1, 1},
    {"INCRBY", 3, 1, 1, 1},    {"DECR", 2, 1, 1, 1},     {"DECRBY", 3, 1, 1, 1},   {"APPEND", 3, 1, 1, 1},
    {"EXPIRE", -3, 1, 1, 1},   {"PEXPIRE", -3, 1, 1, 1}, {"PERSIST", 2, 1, 1, 1},  {"HSET", -4, 1, 1, 1},
    {"HDEL", -3, 1, 1, 1},     {"HINCRBY", 4, 1, 1, 1},  {"LPUSH", -3, 1, 1, 1},   {"RPUSH", -3, 1, 1, 1},
    {"LPOP", -2, 1, 1, 1},     {"RPOP", -2, 1, 1, 1},    {"LTRIM", 4, 1, 1, 1},    {"SADD", -3, 1, 1, 1},
    {"SREM", -3, 1, 1, 1},     {"ZADD", -4, 1, 1, 1},    {"ZREM", -3, 1, 1, 1},    {"ZINCRBY", 4, 1, 1, 1},
    {"XADD", -5, 1, 1, 1},     {"XTRIM", -4, 1, 1, 1},   {"MSET", -3, 1, -1, 2}};

/* A fenced write in flight: the script's argv (EVALSHA, sha, numkeys, KEYS, ARGV) with
   copies of the caller's words, and the command's reply once answered. */
typedef struct simba__rfw {
    simba_loop *loop;
    simba_redis_fenced_fn cb;
    void *user;
    int argc;
    const char **argv;
    size_t *lens;
    simba_redis_value *val; /* one block: the values, then their bytes */
} simba__rfw;

static const simba__rfw_cmd *simba__rfw_find(const char *word) {
    size_t i, j;
    for (i = 0; i < sizeof simba__rfw_cmds / sizeof simba__rfw_cmds[0]; i++) {
        const char *n = simba__rfw_cmds[i].name;
        for (j = 0; n[j] && word[j] && (word[j] == n[j] || word[j] == n[j] - 'A' + 'a'); j++) {}
        if (!n[j] && !word[j]) return &simba__rfw_cmds[i];
    }
    return NULL;
}

/* Redis' hash tag rule: the bytes between the first '{' and the first '}' after it. */
static int simba__rfw_tagged(const char *key, const char *name) {
    const char *o = strchr(key, '{'), *c = o ? strchr(o + 1, '}') : NULL;
    size_t n = strlen(name);
    return c && (size_t)(c - o - 1) == n && memcmp(o + 1, name, n) == 0;
}

/* The words that are keys: 1 for each, in is_key[0..argc). */
static void simba__rfw_keys(const simba__rfw_cmd *c, int argc, char *is_key) {
    int i, last = c->last < 0 ? argc + c->last : c->last;
    memset(is_key, 0, (size_t)argc);
    for (i = c->first; i <= last && i < argc; i += c->step) is_key[i] = 1;
}

static void simba__rfw_free(simba__rfw *fw) {
    simba_loop *l = fw->loop;
    simba_free(l, fw->val);
    simba_free(l, fw);
}

/* The core's call is answered (or the loop is going: req NULL, nobody to tell). */
static void simba__rfw_done(simba_req *req, simba_result rc, const char *errmsg, void *user) {
    simba__rfw *fw = (simba__rfw *)user;
    if (req && fw->cb) fw->cb(rc, rc == SIMBA_OK ? fw->val : NULL, errmsg, fw->user);
    simba__rfw_free(fw);
}

static void simba__rfw_send(simba__redis *r, simba__rop *op, int64_t now) {
    simba__rfw *fw = (simba__rfw *)simba_req_call_user(op->req);
    fw->argv[1] = r->sha[SIMBA__RS_FENCED]; /* the same text, so the same sha on every node */
    fw->lens[1] = strlen(fw->argv[1]);
    if (op->asking && redisAsyncCommand(r->cmd.ac, simba__redis_on_ignore, NULL, "ASKING") != REDIS_OK) {
        simba__rop_fail(r, op, SIMBA_ECONN, "redis: cannot queue command");
        return;
    }
    if (redisAsyncCommandArgv(r->cmd.ac, simba__redis_on_reply, op, fw->argc, fw->argv, fw->lens) != REDIS_OK) {
        simba__rop_fail(r, op, SIMBA_ECONN, "redis: cannot queue command");
        return;
    }
    op->deadline = simba__add(now, r->cmd_to);
    simba__rop_append(r, op);
}

/* The bytes a reply needs as simba_redis_values (count of values, string bytes). */
static void simba__rfw_measure(const redisReply *x, size_t *nv, size_t *nb) {
    size_t i;
    (*nv)++;
    if (x->type == REDIS_REPLY_STRING || x->type == REDIS_REPLY_STATUS) *nb += x->len + 1;
    if (x->type == REDIS_REPLY_ARRAY)
        for (i = 0; i < x->elements; i++) simba__rfw_measure(x->element[i], nv, nb);
}

/* Fills v from x: children take the next free values, strings the next free bytes. */
static void simba__rfw_fill(const redisReply *x, simba_redis_value *v, simba_redis_value **free_v, char **free_b) {
    size_t i;
    memset(v, 0, sizeof *v);
    switch (x->type) {
    case REDIS_REPLY_INTEGER: v->type = SIMBA_REDIS_INTEGER; v->integer = x->integer; break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        v->type = x->type == REDIS_REPLY_STRING ? SIMBA_REDIS_STRING : SIMBA_REDIS_STATUS;
        memcpy(*free_b, x->str, x->len);
        (*free_b)[x->len] = 0;
        v->str = *free_b;
        v->len = x->len;
        *free_b += x->len + 1;
        break;
    case REDIS_REPLY_ARRAY: {
        simba_redis_value *kids = *free_v;
        v->type = SIMBA_REDIS_ARRAY;
        v->elements = x->elements;
        v->element = kids;
        *free_v += x->elements;
        for (i = 0; i < x->elements; i++) simba__rfw_fill(x->element[i], &kids[i], free_v, free_b);
        break;
    }
    default: v->type = SIMBA_REDIS_NIL; break;
    }
}

/* The script's answer (not an error reply): the command's reply kept for the callback, or
   the refusal in words. 0, or -1 when it is not what the script returns. */
static int simba__rfw_answer(const simba_req *req, const redisReply *x, simba_reply *rep, char *words, size_t cap) {
    simba__rfw *fw = (simba__rfw *)simba_req_call_user(req);
    int64_t ok, has, left;
    simba__reply_none(rep);
    if (!fw || x->type != REDIS_REPLY_ARRAY || x->elements < 2 || simba__redis_int(x->element[0], &ok) != 0) return -1;
    if (ok == 1 && x->elements == 2) {
        size_t nv = 0, nb = 0;
        simba_redis_value *free_v;
        char *free_b;
        simba__rfw_measure(x->element[1], &nv, &nb);
        simba_free(fw->loop, fw->val);
        fw->val = (simba_redis_value *)simba_alloc(fw->loop, nv * sizeof(simba_redis_value) + nb);
        if (!fw->val) {
            simba__reply_fail(rep, SIMBA_ENOMEM, "simba_redis_fenced: the write was done, but out of memory keeping its reply");
            return 0;
        }
        free_v = fw->val + 1;
        free_b = (char *)(fw->val + nv);
        simba__rfw_fill(x->element[1], fw->val, &free_v, &free_b);
        return 0;
    }
    {
        uint64_t stored;
        char *end;
        const redisReply *f = x->element[2];
        if (ok != 0 || x->elements != 4 || simba__redis_int(x->element[1], &has) != 0 ||
            simba__redis_int(x->element[3], &left) != 0 || f->type != REDIS_REPLY_STRING || f->len == 0 || f->len > 20)
            return -1;
        stored = (uint64_t)strtoull(f->str, &end, 10);
        if (*end) return -1;
        rep->rc = simba__fence_judge("simba_redis_fenced", req->mutex, req->fence, has == 1, stored, left, words, cap);
        if (has != 1 && stored == req->fence) /* the record is gone: a release, or its expiry at the lease end */
            snprintf(words, cap, "simba_redis_fenced: %s has no owner record (released, or its lease is over): fence %llu "
                     "holds no lease", req->mutex, (unsigned long long)req->fence);
        if (rep->rc == SIMBA_OK) { /* the script refused what the rule allows: say so, never write */
            rep->rc = SIMBA_EFENCE;
            snprintf(words, cap, "simba_redis_fenced: refused by the server (record fence %llu, lease left %lld ms)",
                     (unsigned long long)stored, (long long)left);
        }
        rep->errmsg = words;
    }
    return 0;
}

static simba_result simba__rfw_start_one(void *impl, simba_req *req) { return simba__redis_submit_ex((simba__redis *)impl, req, 0, 0); }
static simba_result simba__rfw_start_cluster(void *impl, simba_req *req) { return simba__rcl_submit(impl, req); }

/* The command of a fenced write: one of the allow-list, with its arity; *out its entry.
   SIMBA_OK, or SIMBA_EINVAL with the loop's errmsg saying why. */
static simba_result simba__rfw_check_cmd(simba_loop *l, const char *fn, int argc, const char *const *argv,
                                         const simba__rfw_cmd **out) {
    const simba__rfw_cmd *c;
    int k;
    if (argc < 1 || !argv || !argv[0])
        return simba__fail(l, SIMBA_EINVAL, "%s: no command (argc %d): give the command and its arguments", fn, argc);
    if (argc > SIMBA__RFW_ARGS_MAX)
        return simba__fail(l, SIMBA_EINVAL, "%s: %d words in the command, at most %d", fn, argc, SIMBA__RFW_ARGS_MAX);
    for (k = 0; k < argc; k++)
        if (!argv[k]) return simba__fail(l, SIMBA_EINVAL, "%s: argv[%d] is NULL", fn, k);
    if (!(c = simba__rfw_find(argv[0])))
        return simba__fail(l, SIMBA_EINVAL, "%s: command \"%.40s\" is not a fenced write (one of SET DEL UNLINK INCR INCRBY "
                           "DECR DECRBY APPEND EXPIRE PEXPIRE PERSIST HSET HDEL HINCRBY LPUSH RPUSH LPOP RPOP LTRIM SADD "
                           "SREM ZADD ZREM ZINCRBY XADD XTRIM MSET)", fn, argv[0]);
    if ((c->arity > 0 && argc != c->arity) || (c->arity < 0 && argc < -c->arity) || (c->step == 2 && (argc - 1) % 2))
        return simba__fail(l, SIMBA_EINVAL, "%s: %s takes %s%d words with the command (%s), got %d", fn, c->name,
                           c->arity < 0 ? "at least " : "", c->arity < 0 ? -c->arity : c->arity,
                           c->step == 2 ? "key value pairs" : "see the Redis manual", argc);
    *out = c;
    return SIMBA_OK;
}

SIMBA_API simba_result simba_redis_fenced(simba_backend *be, const char *name, uint64_t fence, int argc,
                                          const char *const *argv, simba_redis_fenced_fn cb, void *user) {
    static const char fn[] = "simba_redis_fenced";
    const simba_backend_vt *vt = simba_backend_vt_get(be);
    simba_loop *l = simba_backend_loop(be);
    const simba__rfw_cmd *c = NULL;
    const char *prefix;
    char err[256], own[SIMBA__REDIS_KEY_MAX], fence_s[24], nkeys_s[24], keys_at[SIMBA__RFW_ARGS_MAX];
    size_t own_len, bytes;
    simba__rfw *fw;
    char *p;
    int nkeys = 0, k, total;
    simba__rb b;
    simba_result rc;
    if (!l || (vt != &simba__redis_vt && vt != &simba__rcl_vt)) return l ? simba__fail(l, SIMBA_EINVAL, "%s: not a Redis backend", fn) : SIMBA_EINVAL;
    if ((rc = simba__fence_args(fn, name, fence, err, sizeof err)) != SIMBA_OK) return simba__fail(l, rc, "%s", err);
    if (!cb) return simba__fail(l, SIMBA_EINVAL, "%s: no callback", fn);
    if ((rc = simba__rfw_check_cmd(l, fn, argc, argv, &c)) != SIMBA_OK) return rc;
    prefix = vt == &simba__redis_vt ? ((simba__redis *)simba_backend_impl(be))->prefix
                                    : ((simba__rcluster *)simba_backend_impl(be))->nodes[0]->prefix;
    simba__rb_init(&b, own, sizeof own);
    simba__rb_str(&b, prefix);
    simba__rb_mem(&b, "{", 1);
    simba__rb_str(&b, name);
    simba__rb_mem(&b, "}", 1);
    own_len = b.n;
    if (b.over || own_len + 7 > sizeof own) return simba__fail(l, SIMBA_EINVAL, "%s: key of mutex %s too long", fn, name);
    simba__rfw_keys(c, argc, keys_at);
    for (k = 0; k < argc; k++) {
        if (!keys_at[k]) continue;
        if (!simba__rfw_tagged(argv[k], name))
            return simba__fail(l, SIMBA_EINVAL, "%s: key \"%.100s\" is outside the slot of mutex %s: a key of a fenced "
                               "write carries the hash tag {%s}", fn, argv[k], name, name);
        if (strncmp(argv[k], own, own_len) == 0)
            return simba__fail(l, SIMBA_EINVAL, "%s: key \"%.100s\" is the lock's own (it starts with %s)", fn, argv[k], own);
        nkeys++;
    }
    /* EVALSHA sha numkeys owner fence hold <keys> <fence> <argv>, each copied after the arrays */
    total = 3 + 3 + nkeys + 1 + argc;
    simba__redis_i64(fence_s, (int64_t)fence);
    simba__redis_i64(nkeys_s, 3 + nkeys);
    bytes = sizeof *fw + (size_t)total * (sizeof(char *) + sizeof(size_t)) + strlen(nkeys_s) + 1 + 3 * (own_len + 7) +
            strlen(fence_s) + 1;
    for (k = 0; k < argc; k++) bytes += (strlen(argv[k]) + 1) * (keys_at[k] ? 2 : 1);
    fw = (simba__rfw *)simba__zalloc(l, bytes);
    if (!fw) return simba__fail(l, SIMBA_ENOMEM, "%s: out of memory", fn);
    fw->loop = l;
    fw->cb = cb;
    fw->user = user;
    fw->argv = (const char **)(void *)(fw + 1);
    fw->lens = (size_t *)(void *)(fw->argv + total);
    p = (char *)(fw->lens + total);
#define SIMBA__RFW_PUT(s_, n_) (memcpy(p, (s_), (n_)), p[(n_)] = 0, fw->lens[fw->argc] = (n_), fw->argv[fw->argc++] = p, p += (n_) + 1)
    fw->argv[fw->argc] = "EVALSHA"; fw->lens[fw->argc++] = 7;
    fw->argv[fw->argc] = ""; fw->lens[fw->argc++] = 0; /* the sha, set by the node that sends it */
    SIMBA__RFW_PUT(nkeys_s, strlen(nkeys_s));
    memcpy(own + own_len, ":owner", 7);
    SIMBA__RFW_PUT(own, own_len + 6);
    memcpy(own + own_len, ":fence", 7);
    SIMBA__RFW_PUT(own, own_len + 6);
    memcpy(own + own_len, ":hold", 6);
    SIMBA__RFW_PUT(own, own_len + 5);
    for (k = 0; k < argc; k++)
        if (keys_at[k]) SIMBA__RFW_PUT(argv[k], strlen(argv[k]));
    SIMBA__RFW_PUT(fence_s, strlen(fence_s));
    for (k = 0; k < argc; k++) SIMBA__RFW_PUT(argv[k], strlen(argv[k]));
#undef SIMBA__RFW_PUT
    rc = simba_backend_call(be, name, fence, vt == &simba__redis_vt ? simba__rfw_start_one : simba__rfw_start_cluster,
                            simba__rfw_done, fw);
    if (rc != SIMBA_OK) simba__rfw_free(fw); /* the loop's errmsg says why */
    return rc;
}

/* >>open */
/* The desc's fields beside the address, with words for what is wrong. */
static simba_result simba__redis_desc_check(simba_loop *loop, const simba_redis_desc *desc) {
    simba_result rc;
    size_t sun_cap = sizeof(((struct sockaddr_un *)0)->sun_path);
    /* hiredis 0.14 copies sun_path without terminating an over-long one */
    if (desc->unix_path && (!desc->unix_path[0] || strlen(desc->unix_path) >= sun_cap))
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: unix_path must be 1..%u bytes (got %u)",
                           (unsigned)(sun_cap - 1), (unsigned)strlen(desc->unix_path));
    if (desc->port < 0 || desc->port > 65535)
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: port must be in 0..65535 (got %d)", desc->port);
    if (desc->db < 0) return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: db must be >= 0 (got %d)", desc->db);
    if (desc->username && !desc->password)
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: username given without a password");
    if ((rc = simba__desc_ms(loop, "simba_redis_open", "connect_timeout_ms", desc->connect_timeout_ms)) != SIMBA_OK ||
        (rc = simba__desc_ms(loop, "simba_redis_open", "command_timeout_ms", desc->command_timeout_ms)) != SIMBA_OK ||
        (rc = simba__desc_reconnect(loop, "simba_redis_open", desc->reconnect_min_ms, desc->reconnect_max_ms)) != SIMBA_OK ||
        (rc = simba__desc_ms(loop, "simba_redis_open", "max_lease_ms", desc->max_lease_ms)) != SIMBA_OK)
        return rc;
    if (desc->allow_eviction != 0 && desc->allow_eviction != 1)
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: allow_eviction must be 0 or 1 (got %d)", desc->allow_eviction);
    return SIMBA_OK;
}

SIMBA_API simba_result simba_redis_open(simba_loop *loop, const simba_redis_desc *desc, simba_backend **out) {
    simba__redis *r;
    const char *host, *prefix;
    unsigned char addr[16];
    simba_result rc;
    if (out) *out = NULL;
    if (!loop || !desc || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: NULL argument");
    host = desc->host ? desc->host : "127.0.0.1";
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    if (!desc->unix_path && inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1)
        return simba__fail(loop, SIMBA_EINVAL,
                           "simba_redis_open: host \"%.64s\" must be a numeric IPv4/IPv6 address or \"localhost\" "
                           "(resolving a name could block the loop)", host);
    if ((rc = simba__redis_desc_check(loop, desc)) != SIMBA_OK) return rc;
    prefix = desc->prefix ? desc->prefix : "simba:";
    if (strlen(prefix) > SIMBA__REDIS_PREFIX_MAX || strpbrk(prefix, "{}"))
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: prefix must be at most %d bytes without braces",
                           SIMBA__REDIS_PREFIX_MAX);

    if (desc->cluster != 0 && desc->cluster != 1)
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: cluster must be 0 or 1 (got %d)", desc->cluster);
    if (desc->cluster && (desc->unix_path || desc->db))
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: a Redis Cluster has no unix_path seed and only db 0");
    if (desc->sentinels) {
        int k;
        if (desc->cluster || desc->unix_path)
            return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: sentinels go with neither cluster nor unix_path");
        if (!desc->master_name || !desc->master_name[0] || strlen(desc->master_name) > 127 ||
            strpbrk(desc->master_name, " \t\r\n"))
            return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: sentinels need a master_name (1..127 bytes, no spaces)");
        for (k = 0; desc->sentinels[k]; k++) {
            const char *a = desc->sentinels[k], *colon = strrchr(a, ':');
            char h[48];
            long pt;
            char *end;
            if (k >= SIMBA__REDIS_SENTINELS_MAX || !colon || colon == a || (size_t)(colon - a) >= sizeof(h))
                return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: sentinels must be 1..%d numeric \"ip:port\" (entry %d)",
                                   SIMBA__REDIS_SENTINELS_MAX, k);
            memcpy(h, a, (size_t)(colon - a));
            h[colon - a] = 0;
            pt = strtol(colon + 1, &end, 10);
            if (*end || pt <= 0 || pt > 65535 || (inet_pton(AF_INET, h, addr) != 1 && inet_pton(AF_INET6, h, addr) != 1))
                return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: sentinel \"%.64s\" is not a numeric ip:port", a);
        }
        if (k == 0) return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: sentinels is empty");
    } else if (desc->master_name) {
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: master_name goes with sentinels");
    }
    if (desc->wait_replicas < 0 || desc->wait_replicas > 64 || (desc->wait_replicas && desc->cluster))
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: wait_replicas must be 0..64, and 0 with cluster");
    if ((rc = simba__desc_ms(loop, "simba_redis_open", "wait_timeout_ms", desc->wait_timeout_ms)) != SIMBA_OK) return rc;
    if ((desc->wait_timeout_ms ? desc->wait_timeout_ms : 200) >= (desc->command_timeout_ms ? desc->command_timeout_ms : 2000))
        return simba__fail(loop, SIMBA_EINVAL, "simba_redis_open: wait_timeout_ms must be below command_timeout_ms");
    if (desc->cluster) return simba__rcl_open(loop, desc, host, out);
    r = simba__redis_make(loop, desc, host, desc->port ? desc->port : 6379);
    if (!r) return SIMBA_ENOMEM;
    rc = simba_backend_new(loop, &simba__redis_vt, r, &r->be);
    if (rc != SIMBA_OK) {
        simba__redis_destroy(r);
        return rc;
    }
    (void)simba_backend_set_max_lease(r->be, r->max_lease); /* checked above: cannot fail */
    /* Sentinel: the command connection waits until a sentinel has named the primary. */
    simba__rconn_start(r->nsen ? &r->sen : &r->cmd, simba_now(loop));
    *out = r->be;
    return SIMBA_OK;
}

#endif /* SIMBA_REDIS_IMPLEMENTATION */

/* License: MIT, the full text at the end of simba.h (the headers ship together). */
