/*
 * simba_zk.h v0.1.0 -- ZooKeeper backend for simba (libzookeeper_mt), stb-style single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file: that file then holds the core
 * (simba.h) and this backend. Others include it plainly. Link with -lzookeeper_mt -lpthread.
 *
 * The header includes <zookeeper/zookeeper.h> (Debian: libzookeeper-mt-dev), so no -I is
 * needed, and -DTHREADED is not needed either (it only declares the synchronous API, which
 * this backend does not use).
 *
 *     simba_backend *be;
 *     simba_zk_open(loop, &(simba_zk_desc){ .hosts = "127.0.0.1:2181" }, &be);
 *
 * COMPILE-TIME OPTIONS (define before the implementation's include)
 *   SIMBA_API, SIMBA_MALLOC / SIMBA_FREE   as in simba.h
 *   SIMBA_ZK_IMPLEMENTATION                this header and the core only
 *   SIMBA_ZK_TEST_FAULTS                   test builds: fault injection into the client calls,
 *                                          a late zookeeper_close, and a backend whose jobs
 *                                          call nothing (test_mute)
 *
 * RECIPE
 *   Mutex M lives at <root>/M (persistent, created on demand; root defaults to "/simba").
 *   The root's data names the layout below, "simba schema <N>" (SIMBA__ZK_SCHEMA_VERSION): a
 *   backend whose first look at it (each session's first call) finds another refuses every
 *   request in words that name both; an empty root gets this one, a missing root is made
 *   with it.
 *   A contender C that acquires creates one EPHEMERAL|SEQUENTIAL child
 *       <root>/M/n-<tag>-<10-digit sequence>
 *   whose data is "<tag> <session timeout ms> <C> <keep> <value>" (see VALUE). The tag is
 *   unique per contender and backend (a random per-backend token plus a counter), so after
 *   a lost connection the backend recognises a node that its create may or may not have
 *   made (ZooKeeper's "protected" create) and never mistakes another client's node for its
 *   own; duplicates are deleted. The lowest sequence owns. Every reply names the owner: non-owners and
 *   observers read the owner node's data. A
 *   waiter watches only its predecessor: when that node goes, exactly that waiter gets
 *   SIMBA_EV_RELEASED (no herd), and the waiter whose predecessor is the owner is reported
 *   first_in_line. The core re-sends ACQUIRE periodically: for the owner that is the
 *   renewal, and it re-checks that the node still exists and is still the lowest. "n-" is a
 *   mutex owner's or a writer's node; semaphores and readers name theirs otherwise (below).
 *
 * SEMAPHORES AND READERS (docs/semaphores.md)
 *   The node's name carries its mode, so one listing shows every contender's:
 *       n-<tag>-<seq>     exclusive: a mutex owner, a read-write lock's writer (N = 1)
 *       r-<tag>-<seq>     a reader (N = 1: readers and writers mix with a mutex's owners)
 *       s<N>-<tag>-<seq>  one of N permits, 2 <= N <= SIMBA_PERMITS_MAX
 *   Holding is a place in sequence order, decided from one listing (synced, as a mutex's):
 *     semaphore N  among the first N nodes
 *     writer       the first node (a mutex's rule)
 *     reader       no n- node ahead of it (a waiting writer holds back later readers)
 *   A node with another node of another N ahead of it is refused: the store says SIMBA_ECONFLICT
 *   "permits 3 asked, the name has 2 while held or waited on", deletes that node first, and
 *   the contender's next ACQUIRE lists before it makes one (none is made while the other N
 *   is there). Nodes ahead only ever go, so a node that holds keeps holding until it goes:
 *   never more than N holders, never a writer with anyone, and a holder's renewal is
 *   answered by a session check as an owner's is (SCALE). While a refused node lives
 *   (create, listing, delete: three calls) a newcomer of the name's N behind it is refused
 *   too; the rule cannot skip it, as that node may hold if the nodes ahead go first.
 *     A writer watches the node just before it, a reader the n- node nearest ahead (a
 *   release of a reader wakes no reader). A semaphore's waiter may hold once any of the N
 *   nodes just ahead of it goes; its listing leaves a child watch on <root>/M instead of N
 *   exists watches: one watch per backend and name, no extra call per look, at the cost of
 *   waking this backend's waiters of the name on any change of the queue (each lists
 *   again: a sync, a listing, a read).
 *     Fences: a holder's node's zxid as for a mutex (FENCE). Holders are granted in
 *   sequence order, so each grant's node is younger than every earlier grant's (a waiter
 *   granted after a later one only while its own push is on its way). A holder asking anew
 *   after a local step-down rewrites its node when nobody waits, else its node goes to the
 *   back, as an owner's does. A yield passes when any node waits: ours goes to the back in
 *   one transaction that checks another's last node still exists, and the waiters that frees
 *   are granted. simba_inspect lists every holder (holder[], each with its fence), and
 *   simba_force_release and simba_zk_fenced_multi take any holder's fence. Costs: a
 *   listing is a scan of the children (two passes, on the client library's thread, no
 *   allocation); a grant or a wait is the mutex's calls (create, sync, list, read) plus a
 *   reader's one exists; inspection reads one node per holder and per listed waiter.
 *
 * SCALE (10,000 mutexes on one handle)
 *   An owner also watches its own node, so its node cannot go unnoticed; its renewal then
 *   needs no listing: one session check (a sync, which goes through the leader) answers
 *   every renewal that was sent before it, because the leader evaluated it later, our server
 *   applied everything the leader had committed before answering it, and every watch event
 *   that the server sent before it is handled first. Likewise for the waiter right behind the
 *   owner, which watches the owner's node and whose read of it is unchanged since. At most
 *   one check is in flight, 20 ms apart at least. A fired watch, a new session or dropped
 *   events (the event queue holds 256) send requests the long way again. Mutexes are kept
 *   in a hash table, deadlines in a FIFO (they grow with submission), and at most 256
 *   calls are in flight: more wait, started ones and renewals first, so that a renewal
 *   never queues behind thousands of start-up calls in the server. A contender that knows
 *   it has no node creates one at once (no listing first); a mutex's persistent node is
 *   asked for once, before its first create.
 *   RELEASE deletes the contender's node. READ lists the children and reads the lowest.
 *   While a service observes a mutex (vt watch), READs also leave a child watch, and a
 *   change of the lowest node is pushed as SIMBA_EV_OWNER.
 *
 * FENCE
 *   The owner node's last-modified zxid (mzxid), which every reply and observer reads; it
 *   is the creation zxid unless the node was rewritten. Owners succeed each other in
 *   sequence (creation) order, so the fence grows from one ownership to the next, also
 *   across <root>/M being deleted and made again. A renewal (renew == 1) keeps it. A new
 *   ownership on a node granted before -- an owner asking again (renew == 0) after a local
 *   step-down while its session and node survived -- needs a greater fence: alone, the
 *   backend rewrites the node (same bytes) and the write's zxid is the fence (any node made
 *   later is younger); with waiters, whose nodes are older than such a write, the node
 *   goes to the back of the queue (deleted and made again) and the head waiter owns next.
 *   A process with an observer or a waiter of the name keeps a data watch on the owner node
 *   (and one on its children), so a rewrite or a new tenure is pushed to every follower,
 *   and a waiter whose watched predecessor is rewritten sets its watch again.
 *
 * VALUE
 *   The value of a tenure is the tail of its node's data, written by the create (or the
 *   rewrite) that starts the tenure; renewals do not touch it. SET_VALUE rewrites the
 *   owner's own node (only its owner writes it, and it exists only while the session does:
 *   ZNONODE is SIMBA_EFENCE). Such a write moves the node's mzxid, so it also writes
 *   keep = the tenure's fence, and every reader takes keep as the fence when it is not 0
 *   (a tenure's own write has keep 0: its mzxid is the new fence). Observers' data watch on
 *   the owner node pushes the change (SIMBA_EV_OWNER when owner, fence or value differ from
 *   what was pushed last). Data without keep and value (a node made by a version without
 *   values) reads as no value; such a version reads this data as a malformed id ("owner node
 *   holds foreign data") and answers no request, so two versions never disagree on an owner.
 *   YIELD lists the children; with another's node behind ours, one zoo_amulti checks that node
 *   still exists, deletes ours (its watcher, the head waiter, hears the release as after a
 *   RELEASE) and makes ours again at the back with the same data; with none it keeps the
 *   mutex. Waiters' nodes are ephemeral, so a node that exists is a live waiter. A yield
 *   that passed then watches the node just before our new one, as a waiter does, so the
 *   next release is pushed to us (the core asks again only after min_retry).
 *
 * LEASE
 *   The lease is the ZooKeeper session. Only the leader expires a session, no earlier than
 *   one negotiated session timeout T after it last heard of the client; a new leader gives
 *   every session a full T. The leader hears of us through our server: the server forwards
 *   our touches when the leader pings it (every tickTime/2). A server cut off from the
 *   leader (a frozen or partitioned leader) still answers reads from its own view for up to
 *   syncLimit x tickTime before it drops its clients, and a leader that was frozen expires,
 *   when continued, every session it has not heard of for T: an owner confirmed by such a
 *   read would believe it owned seconds after another was granted
 *   (tests/fault_zk_isolated.sh builds that case). So nothing that grants or renews rests on our server's
 *   view alone: a renewal's session check is a sync, a listing that may grant comes after a
 *   sync (or after our own create), and both were evaluated by the leader after the request
 *   was sent. A sync also touches the session: the backend sends one whenever T/6 passed
 *   without a call (while it knows any mutex), as the client library pings only after T/3.
 *   The leader then heard of us no earlier than sent_at - T/6 - tickTime/2 and cannot expire
 *   the session before sent_at + 5T/6 - tickTime/2. An owner's reply carries
 *   ttl_left_ms = T/2 and transition_left_ms = T counted from the request's sent_at (the
 *   core counts from there): the owner stops believing it owns at sent_at + T/2, which
 *   leaves T/3 - tickTime/2 for delays (ZooKeeper requires T >= 2 tickTime by default). Not
 *   covered: a leader partitioned away with our server that has lost its quorum and not yet
 *   noticed answers syncs for up to syncLimit x tickTime (with 3 members it cannot lose its
 *   quorum while it and our server still talk; with 5 or more it can): choose
 *   T > 2 x syncLimit x tickTime, or step_down_on_disconnect, if that partition matters.
 *   The ttl_ms / transition_ms of a request are ignored; choose a session timeout that fits
 *   (the owner renews at ttl_at - renew_margin, so a renew_margin below T/2 is needed).
 *   Non-owners get the owner's values from its node data (its session timeout as it knew it
 *   when it created the node). held_ms is -1.
 *   The vt declares SIMBA_LEASE_SESSION, so the core takes these grants as they are.
 *     Disconnect (ZOO_CONNECTING_STATE): SIMBA_EV_DISCONNECTED, always. An owner whose desc
 *   asks for step_down_on_disconnect steps down at once (reason "connection") and replies
 *   that would confirm its ownership are refused with SIMBA_ECONN until reconnected; other
 *   owners keep their lease until the local deadline (renewals just fail). On reconnect SIMBA_EV_RESET makes every service re-check at once.
 *     Session expiry: SIMBA_EV_LOST for every mutex at once, the handle is closed, a new
 *   session is opened, and once it is connected SIMBA_EV_RESET makes services re-contend
 *   (nodes are created again lazily by the next ACQUIRE).
 *     Tested against a single server and against a 3-node ensemble (scripts/zk-ensemble-
 *   start.sh; the shared kit, tests/fault_zk_ensemble.sh and tests/fault_zk_isolated.sh).
 *
 * JOBS
 *   Every request is a job (so are a released contender's clean-up and an observer's
 *   refresh, which answer nobody): a contender's jobs run one after the other, and a job is
 *   one ZooKeeper call at a time, its step. simba__zk_job_go() is the one place a step
 *   changes (a build with SIMBA_ZK_TRACE logs every change).
 *
 *     ACQUIRE ──► LIST ──(no node known)──────────────► CREATE ──(made)──► LIST
 *                  │  ──(may grant, not synced)──────► SYNC ──(synced)───► LIST
 *                  │  ──(a session check answers it)─► [BATCH] ──► answered, or LIST
 *                  ├─(ours holds)─► answered (a renewal); SET (alone: a new fence)
 *                  │                or DELETE (waiters: to the back) ──► LIST
 *                  ├─(another N ahead)─► DELETE ──► refused;  (ours in another mode)─► DELETE ──► LIST
 *                  └─(ours waits)─► GET (the lowest) ──► answered ──► EXISTS (watch the node
 *                                    │                               ours waits for) ──► end
 *                                    └─(ours after all)─► as "ours holds"
 *     RELEASE ──► DELETE (our node) ──(more of ours may exist)──► SWEEP ──► DELETE ──► end
 *     SET_VALUE ──(holds the fence)──► VALUE (our node, keep = fence) ──► answered
 *     YIELD ──(holds the fence)──► LIST ──(nobody behind)──► answered (kept)
 *                                        └─(a waiter behind)─► REQUEUE (multi) ──► answered ──►
 *                                                              │   LIST ──► EXISTS (watch the node
 *                                                              │            just before ours) ──► end
 *                                                              └─(that waiter left)─► LIST
 *     READ, refresh ──► LIST ──(nobody)──► answered;  ──► GET (the lowest) ──► answered
 *
 *   A node gone between two steps, or a queue that moved, sends the job back to LIST (at
 *   most SIMBA__ZK_TRIES times). Between calls a job waits (job->wait) in its contender's
 *   queue, for a session check ([BATCH]), or, with SIMBA__ZK_FLY_MAX calls in flight,
 *   parked (started jobs and renewals first). Its deadline is the request's.
 *
 * REQUESTS BEFORE THE CONNECTION
 *   simba_zk_open() does not block on the network (zookeeper_init is asynchronous; host
 *   names are refused with SIMBA_EINVAL, as the client library would resolve them with a
 *   blocking getaddrinfo). Every refusal says which field and why in simba_loop_errmsg().
 *   Requests made while the client is (re)connecting are queued by the client library and
 *   sent once connected; if a connection attempt fails they fail with SIMBA_ECONN. Every
 *   request also has a deadline of session timeout + 1 s, after which it completes with
 *   SIMBA_ETIMEDOUT. Every request completes exactly once, on destroy with SIMBA_ECLOSED.
 *
 * THREADS
 *   libzookeeper_mt runs an I/O thread and a completion thread per handle; they are kept
 *   because the I/O thread keeps the session alive while the caller's loop is busy. Their
 *   callbacks here only copy results into preallocated buffers, append them to a
 *   mutex-protected queue and write one byte to a pipe whose read end simba_fds() reports.
 *   vt process (inside simba_poll, on the caller's thread) drains the pipe and the queue
 *   and only there calls simba_req_done() / simba_backend_event(): no simba or user
 *   callback ever runs on a ZooKeeper thread, and nothing is allocated there. Everything
 *   those threads can touch (the backend context, the session record, in-flight call
 *   records) is freed only after zookeeper_close() has joined them.
 *   The client library logs through zk_log (NULL = silent); its log hook has no context
 *   pointer, so it cannot be routed to the loop's log. libzookeeper_mt 3.8 formats some log
 *   lines into a static buffer shared by all handles, a data race inside the library when a
 *   process has several sessions (ThreadSanitizer reports it; a garbled log line at worst).
 *   zoo_set_debug_level((ZooLogLevel)0) stops that formatting, process-wide; simba_zk does
 *   not change that global setting itself (the tests do).
 *   Destroy (simba_backend_free / simba_loop_free) deletes our nodes (a prompt hand-over)
 *   and waits up to 1 s for the calls in flight to be answered (libzookeeper_mt 3.8 leaks
 *   the completion of a call still pending at zookeeper_close); while answers keep coming
 *   (thousands of deletes) it waits on, 10 s at most in all. Then a closer thread (below)
 *   calls zookeeper_close, which sends the close and joins the library's threads, while
 *   destroy waits for it. Against a connected server that hangs it blocks 2.5 s (1 s + the
 *   library's 1.5 s wait for the close's answer), at most 5.5 s when the send itself
 *   stalls; against an unreachable one it does not wait.
 *     A session expiry does not close the dead handle inside simba_poll: zookeeper_close
 *   joins the library's threads and zookeeper_init2 starts new ones (1-10 ms on a loaded
 *   machine), so a short-lived closer thread, started for that expiry, makes the new handle
 *   and then closes the old one; it touches only the two handles and the pipe and queue
 *   above, and simba_poll picks the new handle up when the thread says so. The thread is
 *   detached (a join would wait in the poll until it is scheduled again); it touches
 *   nothing of ours after saying so. Destroy closes its session through such a thread too
 *   (it makes no new handle), so that it can act while the close waits (read-only probes,
 *   below). These are the only threads simba itself starts; destroy waits until each has
 *   said so.
 *     Read-only sessions are refused: a server that grants one (an ensemble member without
 *   quorum, or a foreign service whose reply happens to parse as a read-only handshake)
 *   gets no request; they fail with SIMBA_ECONN and simba_backend_errmsg() says why, the
 *   owner steps down as on a disconnect, and the client library keeps looking for a
 *   read-write server. Its read-only probe reads with a blocking recv whose timeout
 *   libzookeeper_mt 3.8 sets from an uninitialised field (often no timeout at all), and the
 *   library starts one whenever it is due until its I/O thread sees the close. Destroy
 *   shuts down the probe sockets (blocking, TCP_NODELAY, connected to one of the backend's
 *   servers) when it closes a session that went read-only, and again every 100 ms while it
 *   waits for a close, so the bound above holds whatever listens there (+0.1 s).
 *     A poll's budget (simba_loop_desc.poll_budget_us) bounds the answers it handles and
 *   the parked calls it starts; the rest wait for the next poll. What it cannot bound is
 *   one zoo_a* call, which allocates with malloc: the client library's I/O thread frees
 *   those buffers, and glibc may merge its freed chunks inside a later call's allocation.
 *   simba changes no malloc setting of the process; fastbins off (mallopt(M_MXFAST, 0), or
 *   GLIBC_TUNABLES=glibc.malloc.mxfast=0) removes that merge if a poll must never pay it.
 *
 * STATS
 *   simba_zk_stats_get() reports the session (id, password, negotiated timeout, connected)
 *   and counters (requests, ZooKeeper calls, pushed events by kind) for monitoring and tests.
 *
 * NAMES
 *   Mutex names pass simba_name_check() (no '/', not "." or ".."), so they are always one
 *   valid path component. root must be an absolute path of such components, not under
 *   /zookeeper, at most 256 bytes.
 *
 * FENCED WRITES (simba_zk_fenced_multi)
 *   Nodes outside the root can be created, set and deleted so that a stale owner cannot:
 *   the backend lists <root>/M, reads the lowest node (the owner; with several holders,
 *   each holder's node until one has the fence) and, when its mzxid is
 *   the given fence, sends the caller's operations in one zoo_amulti behind check(owner
 *   node, its version). ZooKeeper's leader applies the multi only while that node exists
 *   unwritten since the read: the tenure has not ended (a release deletes the node, the
 *   leader deletes it when the owner's session expires, a new tenure rewrites it) and
 *   nobody else can have been granted (only a lowest node owns, and no lower node can
 *   appear; a holder keeps holding while its node exists). The listing and the read may be stale; the check is not. While the owner's
 *   session lives, its writes are accepted, also when its own loop stands still (the
 *   client library keeps the session): the lease is the session (see LEASE).
 *     owner node with this fence, unchanged -----------> applied: SIMBA_OK, each op's result
 *     no owner node (released, session ended) ----------> SIMBA_EFENCE
 *     another owner node (a later tenure) --------------> SIMBA_EFENCE "moved on"
 *     the owner node went or changed before the multi --> SIMBA_EFENCE
 *     an operation fails (ZNODEEXISTS, ZBADVERSION ...) > SIMBA_EBACKEND, results say which,
 *                                                         nothing applied
 *     not sent, or "session expired" (never sent on a
 *       live session), the fence's session expired -----> SIMBA_EFENCE: nothing written
 *     the connection went before the multi was sent ---> SIMBA_ECONN "nothing was written"
 *     the answer lost (connection) ---------------------> SIMBA_ECONN: unknown
 *   Unknown means the multi went out before the connection did and may have been applied
 *   while the fence still held; ZooKeeper keeps no trace of a multi's outcome. The
 *   application learns it from its own data: read the nodes back (a CREATE's node, a SET's
 *   data or version); a resend is refused (SIMBA_EFENCE) once the fence holds no lease.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  public declarations   >>impl  the implementation   >>open  the constructor
 *   >>process  the work of one poll   >>close  teardown
 *   >>inspect  simba_inspect, simba_list, simba_force_release   >>fenced  simba_zk_fenced_multi
 *   >>jobs  a request's steps (see JOBS)
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together).
 */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_ZK_IMPLEMENTATION)
#define SIMBA_ZK_IMPLEMENTATION
#endif
/* Its implementation uses the core's private helpers: the core's goes into the same file. */
#if defined(SIMBA_ZK_IMPLEMENTATION) && !defined(SIMBA_CORE_IMPLEMENTATION)
#define SIMBA_CORE_IMPLEMENTATION
#endif
#ifndef SIMBA_ZK_H
#define SIMBA_ZK_H

#include "simba.h"

#ifdef __cplusplus
extern "C" {
#endif

/* >>api */
typedef struct simba_zk_desc {
    const char *hosts;          /* required: "ADDR:PORT[,ADDR:PORT...][/chroot]" with numeric
                                   addresses, e.g. "127.0.0.1:2181,10.0.0.2:2181" or "::1:2181"
                                   (IPv6 without brackets, as the client library parses it) */
    int session_timeout_ms;     /* 0 -> 10000, at most 1e9; the server negotiates it into its
                                   bounds */
    const char *root;           /* NULL -> "/simba" */
    const char *auth_scheme;    /* optional, e.g. "digest" */
    const char *auth;           /* its credentials, e.g. "user:password" */
    int acl_creator_only;       /* nodes get CREATOR_ALL_ACL (needs auth_scheme) */
    void (*zk_log)(const char *message); /* client library log lines; NULL = silent. Called
                                   from ZooKeeper threads: must be thread-safe. */
} simba_zk_desc;

typedef struct simba_zk_stats {
    int connected;              /* the session is connected now (as last processed) */
    int64_t session_timeout_ms; /* negotiated (the requested one before connecting) */
    int64_t session_id;         /* 0 before the first connection */
    uint64_t sessions;          /* sessions opened: 1 + one per expiry */
    uint64_t requests;          /* requests submitted */
    uint64_t zk_calls;          /* asynchronous ZooKeeper calls issued */
    uint64_t released_events;   /* SIMBA_EV_RELEASED raised (a watched predecessor went) */
    uint64_t owner_events;      /* SIMBA_EV_OWNER raised */
    uint64_t reset_events;      /* SIMBA_EV_RESET raised */
    uint64_t lost_events;       /* SIMBA_EV_LOST or SIMBA_EV_DISCONNECTED raised */
    uint64_t session_checks;    /* session checks sent: one answers many renewals */
    uint64_t checked;           /* requests answered by a session check, without a listing */
    uint64_t closer_threads;    /* expired handles closed by a closer thread (not in the poll) */
    uint64_t syncs;             /* syncs sent before a listing that may grant ownership */
    uint64_t keepalives;        /* syncs sent only to touch the session (see LEASE) */
    uint64_t answers;           /* answers of the client library handled (a poll handles
                                   what its budget allows, the rest the next one) */
} simba_zk_stats;

/* Opens a ZooKeeper session (asynchronously) and registers the backend on loop. */
SIMBA_API simba_result simba_zk_open(simba_loop *loop, const simba_zk_desc *desc, simba_backend **out);
/* Counters and session facts of a backend that simba_zk_open() made (others: SIMBA_EINVAL). */
SIMBA_API simba_result simba_zk_stats_get(simba_backend *be, simba_zk_stats *out);

/* >>fenced One operation of a fenced multi (see FENCED WRITES). */
enum { SIMBA_ZK_FENCED_CREATE = 1, SIMBA_ZK_FENCED_SET = 2, SIMBA_ZK_FENCED_DELETE = 3 };
/* simba_zk_fenced_op.flags of a CREATE (ZooKeeper's ZOO_EPHEMERAL, ZOO_SEQUENCE) */
enum { SIMBA_ZK_FENCED_EPHEMERAL = 1, SIMBA_ZK_FENCED_SEQUENTIAL = 2 };
typedef struct simba_zk_fenced_op {
    int type;         /* SIMBA_ZK_FENCED_CREATE, _SET or _DELETE */
    const char *path; /* absolute, outside the backend's root and /zookeeper */
    const char *data; /* CREATE, SET: the bytes; NULL = none */
    int data_len;     /* CREATE, SET: how many; < 0 = strlen(data) */
    int version;      /* SET, DELETE: the node's version must be this; -1 = any */
    int flags;        /* CREATE: 0, SIMBA_ZK_FENCED_SEQUENTIAL, _EPHEMERAL or both */
} simba_zk_fenced_op;

/* Per operation: zrc ZOK, or what ZooKeeper said of it (zerror(zrc)); after a failed one
   the rest say ZRUNTIMEINCONSISTENCY (not run). path: a CREATE's node as made (a
   sequential one with its number), else NULL. Valid only during the callback. */
typedef struct simba_zk_fenced_result {
    int zrc;
    const char *path;
} simba_zk_fenced_result;

/* rc SIMBA_OK: every operation is done, results[0..n). SIMBA_EFENCE: refused, nothing done,
   results NULL, errmsg says why (the fence moved on, released, the owner's session ended;
   also a multi not sent, or never sent on a live session, under a fence whose session expired).
   SIMBA_EBACKEND: an operation failed (results say which and why), nothing done.
   SIMBA_ECONN, SIMBA_ECLOSED: the answer was lost; the multi may or may not have been
   applied (results NULL): read its nodes back to learn (FENCED WRITES). Called from
   simba_poll only. */
typedef void (*simba_zk_fenced_fn)(simba_result rc, const simba_zk_fenced_result *results, int n, const char *errmsg,
                                   void *user);

/* Applies ops[0..n) in one zoo_amulti together with a check of the owner node of mutex
   name: it commits only if, in ZooKeeper's order, the node whose tenure fence is fence (its
   mzxid) still exists unchanged (its version), that is while fence holds the lease (see
   FENCED WRITES). Non-blocking: cb answers from a later simba_poll. SIMBA_OK (cb comes),
   or SIMBA_EINVAL before anything is sent (not a ZooKeeper backend, empty or bad name,
   fence 0, n outside 1..256, a bad operation: simba_loop_errmsg says which), and cb
   never comes. */
SIMBA_API simba_result simba_zk_fenced_multi(simba_backend *be, const char *name, uint64_t fence,
                                             const simba_zk_fenced_op *ops, int n, simba_zk_fenced_fn cb, void *user);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_ZK_H */

/* >>impl */
/* ==================================================================================== */
/*                                   IMPLEMENTATION                                     */
/* ==================================================================================== */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_ZK_IMPLEMENTATION)
#define SIMBA_ZK_IMPLEMENTATION
#endif
#if defined(SIMBA_ZK_IMPLEMENTATION) && !defined(SIMBA__ZK_IMPLEMENTED)
#define SIMBA__ZK_IMPLEMENTED
#include "simba.h" /* the core's implementation, when this file has not got it yet */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#define SIMBA__ZK_MAGIC 0x7a6b6265u
#define SIMBA__ZK_ROOT_MAX 256
#define SIMBA__ZK_NODE_MAX 64
#define SIMBA__ZK_PATH_MAX (SIMBA__ZK_ROOT_MAX + SIMBA_NAME_MAX + SIMBA__ZK_NODE_MAX + 4)
/* A node's data: "<tag> <timeout> <id> <keep> " and the value (see VALUE) */
#define SIMBA__ZK_DATA_MAX (SIMBA_ID_MAX + 96 + SIMBA_VALUE_MAX)
#define SIMBA__ZK_TAG_LEN 24
/* A node name kept in a per-contender or per-mutex record: ours are the mode ("n", "r" or
   "s<N>", N <= 1024: see SEMAPHORES AND READERS), "-", the tag, "-" and the sequence (10
   digits, 11 once ZooKeeper's counter wraps negative) = 42 bytes at most.
   Others' names that do not fit are not kept (simba__zk_keep): only pushes for them are
   then missed, and the timers cover those. At 10,000 mutexes every byte counts twice. */
#define SIMBA__ZK_KEEP_MAX 44
/* our longest node name fits (a negative array size fails the build otherwise) */
typedef char simba__zk_keep_fits[6 + SIMBA__ZK_TAG_LEN + 1 + 11 < SIMBA__ZK_KEEP_MAX && SIMBA_PERMITS_MAX < 10000 ? 1 : -1];
/* A contender's or a node's mode (see SEMAPHORES AND READERS): exclusive (a mutex owner, a
   writer), a reader, or N > 1: one of N permits. Readers and writers have N = 1. */
#define SIMBA__ZK_EXCL 0
#define SIMBA__ZK_READER (-1)
#define SIMBA__ZK_N(mode) ((mode) > 1 ? (mode) : 1)
#define SIMBA__ZK_EXTRA_MAX 4
#define SIMBA__ZK_RING 256 /* pushed events not yet processed; more make every service re-check */
#define SIMBA__ZK_TRIES 8
#define SIMBA__ZK_ADDRS 16
#define SIMBA__ZK_SETTLE_MS 1000 /* destroy waits this long at most for calls in flight */
#define SIMBA__ZK_PING_GAP_MS 20 /* session checks for cheap renewals: at most 50 a second */
/* A session that could not be made, refused credentials, a released contender's refused
   clean-up: tried again after the kit's backoff between these bounds (reset when connected). */
#define SIMBA__ZK_RETRY_MIN_MS 1000
#define SIMBA__ZK_RETRY_MAX_MS 30000
#define SIMBA__ZK_FLY_MAX 256    /* job calls in flight: more wait, so a renewal never queues
                                    behind thousands of start-up calls in the server */
#define SIMBA__ZK_RO_MSG "zookeeper: the server granted a read-only session (no quorum, or not ZooKeeper): refused"

enum { SIMBA__ZK_CREATE, SIMBA__ZK_LIST, SIMBA__ZK_GET, SIMBA__ZK_EXISTS, SIMBA__ZK_DELETE,
       SIMBA__ZK_MKDIR, SIMBA__ZK_AUTH, SIMBA__ZK_PARENT, SIMBA__ZK_SET, SIMBA__ZK_REWATCH,
       SIMBA__ZK_SELF, SIMBA__ZK_PING, SIMBA__ZK_SYNC, SIMBA__ZK_VALUE, SIMBA__ZK_MULTI, SIMBA__ZK_SCHEMA };
/* The layout of the nodes (RECIPE, VALUE), as the root's data says it. */
#define SIMBA__ZK_SCHEMA_VERSION 1
#define SIMBA__ZK_SCHEMA_WORD "simba schema "
/* job kinds beyond simba_op */
enum { SIMBA__ZK_J_REFRESH = 100 };
/* job steps (see JOBS): each is one ZooKeeper call */
enum { SIMBA__ZK_S_LIST, SIMBA__ZK_S_CREATE, SIMBA__ZK_S_GET, SIMBA__ZK_S_EXISTS, SIMBA__ZK_S_DELETE,
       SIMBA__ZK_S_SWEEP, SIMBA__ZK_S_SET, SIMBA__ZK_S_SYNC, SIMBA__ZK_S_VALUE, SIMBA__ZK_S_REQUEUE };
/* where a job waits while no call of it is in flight: nowhere (its contender's queue, or
   its next call is being issued), for a session check (zk->bq_*), or for room among the
   calls in flight (zk->park_*[0]: started jobs and renewals, [1]: new ones) */
enum { SIMBA__ZK_W_NONE, SIMBA__ZK_W_BATCH, SIMBA__ZK_W_PARK_STARTED, SIMBA__ZK_W_PARK_NEW };

typedef struct simba__zk simba__zk;
typedef struct simba__zk_sess simba__zk_sess;
typedef struct simba__zk_job simba__zk_job;
typedef struct simba__zk_cont simba__zk_cont;
typedef struct simba__zk_mtx simba__zk_mtx;
typedef struct simba__zk_ins simba__zk_ins;

/* One asynchronous ZooKeeper call. Inputs are written before the call; outputs are written
   by the completion thread before it queues the record under zk->mu; the caller's thread
   reads them after dequeuing under zk->mu. */
typedef struct simba__zk_op {
    struct simba__zk_op *qnext;         /* done queue, under zk->mu */
    struct simba__zk_op *onext, *oprev; /* outstanding list, caller thread */
    simba__zk *zk;
    simba__zk_sess *sess;
    simba__zk_job *job; /* NULL = fire and forget */
    int kind;
    int orphan; /* the library may or may not hold it (ZMARSHALLINGERROR): no job, not waited for */
    int posted; /* under zk->mu: its completion queued it (a closed handle's other calls never come) */
    int counted; /* in zk->nfly */
    char tag[SIMBA__ZK_TAG_LEN + 1]; /* LIST: whose nodes to find */
    char mutex[SIMBA_NAME_MAX + 1];  /* PARENT: whose parent is watched */
    int rc;
    int count;                                        /* LIST: contender children */
    int mode;                                         /* LIST: the requester's (input) */
    int mine_mode;                                    /* LIST: our node's, as named */
    int granted, first;                               /* LIST: ours holds / waits first in line */
    int holders;                                      /* LIST: nodes that hold */
    int waiters;                                      /* LIST: nodes that wait (do not hold) */
    int mismatch;                                     /* LIST: another N ahead of ours, 0 none */
    char lowest[SIMBA__ZK_NODE_MAX];                  /* LIST */
    char mine[SIMBA__ZK_NODE_MAX];                    /* LIST: our lowest */
    char pred[SIMBA__ZK_NODE_MAX];                    /* LIST: the node ours waits for (see
                                                         SEMAPHORES AND READERS; a mutex's: the
                                                         node just before mine) */
    char succ[SIMBA__ZK_NODE_MAX];                    /* LIST: another's node just after mine */
    char last[SIMBA__ZK_NODE_MAX];                    /* LIST: another's highest node */
    int nextra;                                       /* LIST: our other nodes */
    char extra[SIMBA__ZK_EXTRA_MAX][SIMBA__ZK_NODE_MAX];
    char name[SIMBA__ZK_NODE_MAX]; /* CREATE: the node made */
    int64_t czxid;                 /* CREATE, GET */
    int64_t mzxid;                 /* CREATE, GET, SET */
    char data[SIMBA__ZK_DATA_MAX + 1];
    int datalen;         /* GET: the bytes in data (a value may hold NUL); -1: longer than data */
    int version;         /* GET: the node's, for a conditional delete */
    struct simba__zk_multi *multi; /* MULTI: its operations and results (the loop's allocator) */
    simba__zk_ins *ins;  /* an inspection's call (job NULL) */
    char *kids;          /* KIDS: every child's name, each NUL-terminated (SIMBA_MALLOC) */
    int nkids;
    void *fw_call; /* a fenced multi's ops, results and their buffers (SIMBA_MALLOC): the library
                      writes the results from its thread, so they live as long as the call */
} simba__zk_op;

struct simba__zk_sess {
    simba__zk *zk;
    zhandle_t *zh;
    uint64_t gen;
    int connected; /* caller thread's view, from processed events */
    int ever_connected;
    int dead; /* expired or auth failed */
    int readonly;    /* caller thread: the server granted a read-only session (refused) */
    int ro_seen;     /* under zk->mu: the library entered read-only mode at some point */
    int closed;      /* under zk->mu: the closer thread's zookeeper_close returned */
    int closer;      /* a detached closer thread runs for this handle */
    int pending;     /* caller thread: its handle is being made by the closer thread */
    int inited;      /* under zk->mu: zookeeper_init2 returned (zh_new, init_errno) */
    int init_errno;
    zhandle_t *zh_new;
    simba__zk_sess *next_sess; /* the session whose handle this one's closer thread makes */
    pthread_t th;
    simba__zk_sess *znext; /* zk->zombies */
};

typedef struct simba__zk_evt {
    uint64_t gen;
    int type, state;
    char path[SIMBA__ZK_PATH_MAX];
} simba__zk_evt;

/* Fields are ordered so that little padding is left (10,000 mutexes: every byte counts). */
struct simba__zk_mtx {
    simba__hnode h;             /* first: zk->mtab by name (key = name) */
    int watchers;               /* vt watch count */
    int holders;                /* nodes that held at the last listing (replies' holders) */
    simba__zk_mtx *next, *prev; /* zk->mtxs */
    int64_t own_fence, own_timeout; /* own_*: the lowest node as last read, valid while own_valid */
    char own_node[SIMBA__ZK_KEEP_MAX];
    unsigned char own_valid;  /* own_*: unchanged since read (watched) */
    unsigned char refreshing; /* an internal refresh job runs */
    unsigned char made;       /* its node was asked for (persistent) by this backend */
    unsigned char refresh_again;
    unsigned char pushed;     /* last_* hold what was pushed with SIMBA_EV_OWNER */
    unsigned char armed;      /* a refresh ran in this session: its watches follow the owner */
    char *own_id;   /* allocated to size (memory per mutex counts at 10,000 mutexes) */
    char *name;     /* stored right after the record */
    char *last_owner; /* allocated to size; NULL = none */
    uint64_t last_fence;
    uint64_t last_vsum;        /* a checksum of the value pushed last */
    int64_t own_mzxid;         /* the lowest node's mzxid as read (own_fence may be older: VALUE) */
    unsigned char *own_value;  /* the lowest node's value, allocated to size; NULL = none */
    size_t own_value_len;
    simba__zk_cont *conts;
};

/* A contender's id is stored right after its record (SIMBA__ZK_CID); fields are ordered so
   that no padding is left. */
struct simba__zk_cont {
    simba__zk_cont *next;
    simba__zk_mtx *mtx;
    uint32_t tagno; /* the tag is the backend's token and this number (simba__zk_tag) */
    unsigned char self_watch; /* 1: an exists watch on node is on its way, 2: it is set */
    unsigned char dirty;      /* a node of ours may exist that we do not know of */
    unsigned char want_gone;  /* released: any node of ours must go */
    unsigned char child_watch; /* a semaphore waiter's child watch on the name is set */
    unsigned char refused;    /* its last ACQUIRE was refused (another N): the next lists
                                 before it makes a node */
    int mode;                 /* SIMBA__ZK_EXCL, _READER or N (its last ACQUIRE's) */
    char node[SIMBA__ZK_KEEP_MAX]; /* our node in this session, "" = none known */
    int64_t czxid;                 /* of node, 0 = unknown */
    int64_t mzxid;                 /* of node as last read or written */
    int64_t fence;                 /* of the tenure granted on node, 0 = none yet */
    int64_t granted_max;           /* the greatest fence ever granted to it: never again */
    char watch_pred[SIMBA__ZK_KEEP_MAX];
    int64_t self_czxid;   /* of the node that self_watch is about */
    simba__zk_job *q_head, *q_tail;
    unsigned char *value; /* the value on node (what we wrote), allocated to size; NULL = none */
    size_t value_len;
};

#define SIMBA__ZK_CID(c) ((char *)((c) + 1))

struct simba__zk_job {
    simba__zk_job *next, *prev; /* zk->jobs */
    simba__zk_job *cnext;       /* cont queue */
    simba__zk_job *tnext, *tprev; /* zk->thead: requests not answered yet, by deadline */
    simba__zk_job *bnext, *bprev; /* zk->bq_wait, bq_fly or bq_ready (batch 1 on any): a
                                     session check's request, before, during and after it */
    int timed;                  /* on zk->thead (a request not answered yet) */
    int wait;                   /* SIMBA__ZK_W_*: where it waits while no call of it flies */
    int refused;                /* its call was refused at once: no answer will come */
    simba_req *req;             /* NULL once answered */
    simba__zk_cont *cont;
    simba__zk_mtx *mtx;
    int kind; /* SIMBA_OP_* or SIMBA__ZK_J_REFRESH */
    int internal;
    int step;
    int tries;
    int mkdirs;
    int created;
    int synced;    /* a sync went through the leader after the request was sent */
    int pred_gone; /* the watched predecessor's deletion was processed before the exists answer */
    int full;      /* no session-only confirmation: list and read */
    int started;   /* a call of it was answered: it goes before new ones */
    simba__zk_job *pnext, *pprev;
    int count;     /* contender children in the last listing */
    int first, holders; /* the last listing's (replies) */
    int alone;     /* the last listing: nobody waits behind ours (a re-grant rewrites) */
    int self_get;  /* GET reads our own node (a holder that is not the lowest) */
    int refuse_n;  /* the N of the nodes ahead: ours goes, then SIMBA_ECONFLICT */
    int64_t deadline;
    simba__zk_op *op; /* the call in flight */
    char lowest[SIMBA__ZK_NODE_MAX], pred[SIMBA__ZK_NODE_MAX];
};

struct simba__zk {
    uint32_t magic;
    simba_loop *loop;
    simba_backend *be;
    char *hosts, *scheme, *auth;
    struct sockaddr_storage addrs[SIMBA__ZK_ADDRS]; /* numeric servers of hosts */
    int naddrs;
    char root[SIMBA__ZK_ROOT_MAX + 1];
    int timeout_ms, creator_only;
    void (*zk_log)(const char *message);
    char token[17];
    uint32_t counter;
    int closing;
    /* shared with the ZooKeeper threads, under mu */
    pthread_mutex_t mu;
    int pipe_r, pipe_w;
    int signalled;
    simba__zk_op *done_head, *done_tail;
    simba__zk_evt ring[SIMBA__ZK_RING];
    unsigned ring_head, ring_len;
    int overflow;
    /* caller thread only */
    simba__zk_sess *sess;
    simba__zk_sess *zombies; /* closed sessions whose handles close off the caller's thread */
    uint64_t gen;
    int64_t reopen_at;
    simba__zk_op *outstanding;
    simba__zk_job *jobs;
    simba__zk_ins *inss; /* inspections in flight */
    simba__zk_job *thead, *ttail; /* deadlines grow with submission: a FIFO is sorted */
    simba__zk_job *bq_wait, *bq_fly; /* cheap renewals: for the next / the flying check */
    simba__zk_job *bq_ready;         /* ... the answered check's, not yet answered themselves:
                                        one poll answers what its budget allows */
    int ready_live, ready_rc;        /* that check's answer */
    simba__zk_op *ping_op;           /* the session check in flight */
    simba__zk_job *park_head[2], *park_tail[2]; /* [0]: started jobs and renewals, [1]: new */
    int nfly;                        /* job calls in flight on the current session */
    int root_made;                   /* the root's parents were asked for in this session */
    int schema_bad;                  /* the root names another layout: every request refused */
    char schema_err[512];            /* ... in these words */
    int64_t ping_at;                 /* the next check no sooner than this */
    int64_t sent_at;                 /* the last call issued on the current session */
    int64_t idle_at;                 /* released contenders' refused clean-up: tried again then */
    int64_t reopen_backoff, idle_backoff; /* simba__backoff of reopen_at and idle_at */
    simba__zk_mtx *mtxs;
    /* fences our contenders held under a session that expired (their nodes went with it):
       a fenced write with one of them, not sent or not applied, is SIMBA_EFENCE */
    int64_t dead_fence[8];
    int dead_next;
    simba__htab mtab; /* mtxs by name */
    size_t nmtx;
    simba_zk_stats stats;
    simba__zk_evt evt; /* scratch for draining the ring */
#ifdef SIMBA_ZK_TEST_FAULTS
    int test_mute; /* 1: jobs issue no call (a server that answers nothing); they time out */
#endif
};

/* ---- ZooKeeper threads: copy, queue, wake ------------------------------------------- */

static void simba__zk_signal_locked(simba__zk *zk) {
    if (!zk->signalled) {
        char c = 1;
        ssize_t w = write(zk->pipe_w, &c, 1);
        (void)w; /* the pipe is empty when signalled == 0, so it cannot be full */
        zk->signalled = 1;
    }
}

static void simba__zk_post(simba__zk_op *op, int rc) {
    simba__zk *zk = op->zk;
    op->rc = rc;
    pthread_mutex_lock(&zk->mu);
    op->posted = 1;
    op->qnext = NULL;
    if (zk->done_tail) zk->done_tail->qnext = op;
    else zk->done_head = op;
    zk->done_tail = op;
    simba__zk_signal_locked(zk);
    pthread_mutex_unlock(&zk->mu);
    /* op may be freed by the caller's thread from here on */
}


static const char *simba__zk_last(const char *path) {
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : (path ? path : "");
}

static void simba__zk_cb_create(int rc, const char *value, const struct Stat *st, const void *data) {
    simba__zk_op *op = (simba__zk_op *)data;
    if (rc == ZOK) {
        simba__copy(op->name, sizeof op->name, simba__zk_last(value));
        op->czxid = st ? st->czxid : 0;
        op->mzxid = st ? st->mzxid : 0;
    }
    simba__zk_post(op, rc);
}

static void simba__zk_cb_string(int rc, const char *value, const void *data) {
    (void)value;
    simba__zk_post((simba__zk_op *)data, rc);
}

static void simba__zk_cb_void(int rc, const void *data) { simba__zk_post((simba__zk_op *)data, rc); }

/* YIELD's one transaction: check(the waiter's node), delete(ours), create(ours, at the back).
   Inputs and outputs live here until the completion has run. */
struct simba__zk_multi {
    zoo_op_t ops[3];
    zoo_op_result_t res[3];
    char waiter[SIMBA__ZK_PATH_MAX], ours[SIMBA__ZK_PATH_MAX], made[SIMBA__ZK_PATH_MAX];
    char created[SIMBA__ZK_PATH_MAX]; /* the new node's path, from the answer */
    char data[SIMBA__ZK_DATA_MAX + 1];
};

static void simba__zk_cb_stat(int rc, const struct Stat *st, const void *data) {
    simba__zk_op *op = (simba__zk_op *)data;
    if (rc == ZOK && st) op->mzxid = st->mzxid;
    simba__zk_post(op, rc);
}

static void simba__zk_cb_get(int rc, const char *value, int len, const struct Stat *st, const void *data) {
    simba__zk_op *op = (simba__zk_op *)data;
    if (rc == ZOK) {
        size_t n = value && len > 0 ? (size_t)len : 0;
        op->datalen = n > SIMBA__ZK_DATA_MAX ? -1 : (int)n;
        if (n > SIMBA__ZK_DATA_MAX) n = SIMBA__ZK_DATA_MAX;
        if (n) memcpy(op->data, value, n);
        op->data[n] = 0;
        op->czxid = st ? st->czxid : 0;
        op->mzxid = st ? st->mzxid : 0;
        op->version = st ? st->version : -1;
    }
    simba__zk_post(op, rc);
}

/* An inspection's listing: every name, copied for the caller's thread. */
static void simba__zk_cb_kids(int rc, const struct String_vector *sv, const void *data) {
    simba__zk_op *op = (simba__zk_op *)data;
    if (rc == ZOK && sv && sv->count > 0) {
        size_t n = 0, at = 0;
        int32_t i;
        for (i = 0; i < sv->count; i++) n += strlen(sv->data[i]) + 1;
        op->kids = (char *)SIMBA_MALLOC(n);
        if (!op->kids) rc = ZSYSTEMERROR;
        for (i = 0; op->kids && i < sv->count; i++) {
            size_t l = strlen(sv->data[i]) + 1;
            memcpy(op->kids + at, sv->data[i], l);
            at += l;
        }
        if (op->kids) op->nkids = sv->count;
    }
    simba__zk_post(op, rc);
}

/* "<mode>-<tag>-<seq>", mode "n" (exclusive), "r" (a reader) or "s<N>" (one of N permits,
   2..SIMBA_PERMITS_MAX): the sequence and *mode, or -1 when the child is not one of ours (any
   client's). */
static long long simba__zk_seqm(const char *name, const char **tag, size_t *tag_len, int *mode) {
    const char *dash, *p = name + 1;
    long long v = 0;
    int n = 0;
    if (name[0] == 'n' || name[0] == 'r') {
        *mode = name[0] == 'n' ? SIMBA__ZK_EXCL : SIMBA__ZK_READER;
    } else if (name[0] == 's' && name[1] >= '1' && name[1] <= '9') {
        for (; *p >= '0' && *p <= '9' && n <= SIMBA_PERMITS_MAX; p++) n = n * 10 + (*p - '0');
        if (n < 2 || n > SIMBA_PERMITS_MAX) return -1;
        *mode = n;
    } else {
        return -1;
    }
    if (*p != '-') return -1;
    p++;
    dash = strrchr(p, '-');
    if (!dash || !dash[1]) return -1;
    *tag = p;
    *tag_len = (size_t)(dash - p);
    for (p = dash + 1; *p; p++) {
        if (*p < '0' || *p > '9' || v > (LLONG_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

static long long simba__zk_seq(const char *name, const char **tag, size_t *tag_len) {
    int mode;
    return simba__zk_seqm(name, tag, tag_len, &mode);
}

/* A node's mode as its name's prefix. */
static void simba__zk_prefix(int mode, char out[16]) {
    if (mode > 1) snprintf(out, 16, "s%d", mode);
    else snprintf(out, 16, "%s", mode == SIMBA__ZK_READER ? "r" : "n");
}

/* A listing's first pass: the lowest node, ours (the lowest with our tag), the lowest
   exclusive one, another's highest; *lowmode: the lowest's mode. */
static void simba__zk_list_ends(simba__zk_op *op, const struct String_vector *sv, long long *mine, long long *minw,
                                int *lowmode) {
    long long low = -1, last = -1;
    size_t taglen = strlen(op->tag);
    int32_t i;
    for (i = 0; i < sv->count; i++) {
        const char *t;
        size_t tl;
        int md;
        long long s = simba__zk_seqm(sv->data[i], &t, &tl, &md);
        int ours;
        if (s < 0) continue; /* not a contender's node: t and tl are not set */
        ours = taglen && tl == taglen && memcmp(t, op->tag, tl) == 0;
        op->count++;
        if (low < 0 || s < low) {
            low = s;
            *lowmode = md;
            simba__copy(op->lowest, sizeof op->lowest, sv->data[i]);
        }
        if (ours && (*mine < 0 || s < *mine)) {
            *mine = s;
            op->mine_mode = md;
            simba__copy(op->mine, sizeof op->mine, sv->data[i]);
        }
        if (md == SIMBA__ZK_EXCL && (*minw < 0 || s < *minw)) *minw = s;
        if (!ours && s > last) {
            last = s;
            simba__copy(op->last, sizeof op->last, sv->data[i]);
        }
    }
}

/* The grant rule (see SEMAPHORES AND READERS), for the requester's mode op->mode: which
   nodes hold, whether ours does or waits first, the node it waits for, another N ahead. */
static void simba__zk_list_scan(simba__zk_op *op, const struct String_vector *sv) {
    long long mine = -1, minw = -1, pred = -1, predw = -1, succ = -1;
    int lowmode = 0, ahead = 0, hr = 0, n = SIMBA__ZK_N(op->mode);
    size_t taglen = strlen(op->tag);
    int32_t i, ip = -1, iw = -1;
    simba__zk_list_ends(op, sv, &mine, &minw, &lowmode);
    for (i = 0; i < sv->count; i++) {
        const char *t;
        size_t tl;
        int md;
        long long s = simba__zk_seqm(sv->data[i], &t, &tl, &md);
        int ours;
        if (s < 0) continue; /* not a contender's node: t and tl are not set */
        ours = taglen && tl == taglen && memcmp(t, op->tag, tl) == 0;
        if (lowmode == SIMBA__ZK_READER && md == SIMBA__ZK_READER && (minw < 0 || s < minw)) hr++;
        if (mine < 0 && SIMBA__ZK_N(md) != n && !op->mismatch) op->mismatch = SIMBA__ZK_N(md); /* none of ours: any */
        if (mine < 0) continue;
        if (s < mine) {
            ahead++;
            if (SIMBA__ZK_N(md) != n && !op->mismatch) op->mismatch = SIMBA__ZK_N(md);
            if (s > pred) { pred = s; ip = i; }
            if (md == SIMBA__ZK_EXCL && s > predw) { predw = s; iw = i; }
        }
        if (s > mine && (succ < 0 || s < succ) && !ours) {
            succ = s;
            simba__copy(op->succ, sizeof op->succ, sv->data[i]);
        }
        if (s != mine && ours && op->nextra < SIMBA__ZK_EXTRA_MAX)
            simba__copy(op->extra[op->nextra++], SIMBA__ZK_NODE_MAX, sv->data[i]);
    }
    op->holders = !op->count ? 0 : lowmode > 1 ? (int)simba__min(op->count, lowmode) : lowmode == SIMBA__ZK_EXCL ? 1 : hr;
    op->waiters = op->count - op->holders;
    if (mine < 0) return;
    if (op->mode > 1) op->granted = !op->mismatch && ahead < n;
    else if (op->mode == SIMBA__ZK_READER) op->granted = !op->mismatch && (minw < 0 || minw > mine);
    else op->granted = ahead == 0;
    op->first = !op->granted && !op->mismatch && ahead == op->holders;
    /* a writer waits for the node just before it, a reader for the writer nearest ahead; a
       semaphore's waiter for any node ahead (its listing's child watch) */
    if (op->mode == SIMBA__ZK_READER) ip = iw;
    if (op->mode <= 1 && ip >= 0) simba__copy(op->pred, sizeof op->pred, sv->data[ip]);
}

static void simba__zk_cb_list(int rc, const struct String_vector *sv, const void *data) {
    simba__zk_op *op = (simba__zk_op *)data;
    if (rc == ZOK && sv) simba__zk_list_scan(op, sv);
    simba__zk_post(op, rc);
}

static void simba__zk_push_evt(simba__zk_sess *sess, int type, int state, const char *path) {
    simba__zk *zk = sess->zk;
    pthread_mutex_lock(&zk->mu);
    if (zk->ring_len == SIMBA__ZK_RING) {
        zk->overflow = 1; /* the caller's thread resynchronises everything */
    } else {
        simba__zk_evt *e = &zk->ring[(zk->ring_head + zk->ring_len) % SIMBA__ZK_RING];
        e->gen = sess->gen;
        e->type = type;
        e->state = state;
        simba__copy(e->path, sizeof e->path, path);
        zk->ring_len++;
    }
    simba__zk_signal_locked(zk);
    pthread_mutex_unlock(&zk->mu);
}

/* The handle's default watcher: session state changes only. */
static void simba__zk_session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh;
    if (ctx && type == ZOO_SESSION_EVENT) {
        simba__zk_sess *s = (simba__zk_sess *)ctx;
        if (state == ZOO_READONLY_STATE) { /* destroy must know even if the event is not processed yet */
            pthread_mutex_lock(&s->zk->mu);
            s->ro_seen = 1;
            pthread_mutex_unlock(&s->zk->mu);
        }
        simba__zk_push_evt(s, type, state, path);
    }
}

/* Node and child watches. The client also hands every session event to each registered
   watch; the default watcher reports those once already. */
static void simba__zk_node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh;
    if (ctx && type != ZOO_SESSION_EVENT) simba__zk_push_evt((simba__zk_sess *)ctx, type, state, path);
}

static void simba__zk_log_silent(const char *message) { (void)message; }

/* ---- caller's thread ---------------------------------------------------------------- */

static simba_result simba__zk_rc(int rc) {
    if (rc == ZOK) return SIMBA_OK;
    if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZSESSIONMOVED ||
        rc == ZINVALIDSTATE)
        return SIMBA_ECONN;
    if (rc == ZCLOSING) return SIMBA_ECLOSED;
    return SIMBA_EBACKEND;
}

static int simba__zk_path(const simba__zk *zk, char *buf, const char *mutex, const char *node) {
    int n;
    if (node) n = snprintf(buf, SIMBA__ZK_PATH_MAX, "%s/%s/%s", zk->root, mutex, node);
    else if (mutex) n = snprintf(buf, SIMBA__ZK_PATH_MAX, "%s/%s", zk->root, mutex);
    else n = snprintf(buf, SIMBA__ZK_PATH_MAX, "%s", zk->root);
    return n > 0 && n < SIMBA__ZK_PATH_MAX;
}

static void simba__zk_event(simba__zk *zk, simba_event_kind kind, const char *mutex, const char *contender,
                            const simba_reply *owner) {
    if (zk->closing) return;
    if (kind == SIMBA_EV_RELEASED) zk->stats.released_events++;
    else if (kind == SIMBA_EV_OWNER) zk->stats.owner_events++;
    else if (kind == SIMBA_EV_RESET) zk->stats.reset_events++;
    else if (kind == SIMBA_EV_LOST || kind == SIMBA_EV_DISCONNECTED) zk->stats.lost_events++;
    simba_backend_event(zk->be, kind, mutex, contender, owner);
}

static void simba__zk_op_free(simba__zk *zk, simba__zk_op *op) {
    SIMBA_FREE(op->kids);
    simba_free(zk->loop, op->multi);
    SIMBA_FREE(op->fw_call);
    simba_free(zk->loop, op);
}

static simba__zk_op *simba__zk_op_new(simba__zk *zk, simba__zk_job *job, int kind) {
    simba__zk_op *op = (simba__zk_op *)simba__zalloc(zk->loop, sizeof *op);
    if (!op) return NULL;
    op->zk = zk;
    op->sess = zk->sess;
    op->job = job;
    op->kind = kind;
    return op;
}

#ifdef SIMBA_ZK_TEST_FAULTS
/* Test builds: the next N calls the library accepted are reported as ZMARSHALLINGERROR,
   as libzookeeper 3.8 does when queueing a request fails after its completion is registered. */
static int simba_zk_test_marshal_fail;
/* ... and the next N deletes a job sends are refused before they reach the library, with
   the ZINVALIDSTATE an expired handle gives before our loop has processed the expiry. */
static int simba_zk_test_refuse_delete;
#define SIMBA__ZK_JOB_DELETE(call) (simba_zk_test_refuse_delete > 0 ? (simba_zk_test_refuse_delete--, ZINVALIDSTATE) : (call))
/* ... and the next N YIELD transactions check a waiter's node that is gone, as when the
   waiter leaves between the listing and the transaction. */
static int simba_zk_test_stale_waiter;
/* ... and every zookeeper_close starts this many ms late, as on a machine that does not
   schedule the closing thread for a while: the library's I/O thread runs on meanwhile. */
static int simba_zk_test_close_delay_ms;
#else
#define SIMBA__ZK_JOB_DELETE(call) (call)
#endif

/* Records op as outstanding once the library accepted it; frees it when it did not.
   ZMARSHALLINGERROR is ambiguous (the completion may be registered already: a failed
   allocation after add_completion), so that op stays outstanding, detached from its job,
   until its completion runs or the handle is closed. ZBADARGUMENTS and ZINVALIDSTATE come
   before registration. */
static int simba__zk_op_issued(simba__zk *zk, simba__zk_op *op, int zrc) {
#ifdef SIMBA_ZK_TEST_FAULTS
    if (zrc == ZOK && simba_zk_test_marshal_fail > 0) {
        simba_zk_test_marshal_fail--;
        zrc = ZMARSHALLINGERROR;
    }
#endif
    if (zrc != ZOK && zrc != ZMARSHALLINGERROR) {
        simba__zk_op_free(zk, op);
        return zrc;
    }
    zk->stats.zk_calls++;
    zk->sent_at = simba_now(zk->loop);
    op->oprev = NULL;
    op->onext = zk->outstanding;
    if (zk->outstanding) zk->outstanding->oprev = op;
    zk->outstanding = op;
    if (zrc == ZMARSHALLINGERROR) {
        op->orphan = 1;
        op->job = NULL; /* the job fails now; the op only waits for the library to let go */
        return zrc;
    }
    if (op->job) {
        op->job->op = op;
        op->counted = 1;
        zk->nfly++;
    }
    return ZOK;
}

static void simba__zk_op_unlink(simba__zk *zk, simba__zk_op *op) {
    if (op->oprev) op->oprev->onext = op->onext;
    else if (zk->outstanding == op) zk->outstanding = op->onext;
    if (op->onext) op->onext->oprev = op->oprev;
    op->onext = op->oprev = NULL;
}

static int simba__zk_usable(const simba__zk *zk) {
    return zk->sess && zk->sess->zh && !zk->sess->dead && !zk->sess->readonly && !zk->closing;
}

static const char *simba__zk_unusable_msg(const simba__zk *zk) {
    if (zk->sess && zk->sess->readonly) return SIMBA__ZK_RO_MSG;
    return zk->sess && zk->sess->dead ? "zookeeper session unusable" : "no zookeeper session";
}

/* Fire-and-forget delete of one of our nodes. */
static void simba__zk_delete_node(simba__zk *zk, const char *mutex, const char *node) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_op *op;
    if (!simba__zk_usable(zk) || !simba__zk_path(zk, path, mutex, node)) return;
    op = simba__zk_op_new(zk, NULL, SIMBA__ZK_DELETE);
    if (!op) return;
    simba__zk_op_issued(zk, op, zoo_adelete(zk->sess->zh, path, -1, simba__zk_cb_void, op));
}


/* Mutexes are found by a hash of their names: 10,000 mutexes on one backend are usual. */
static simba__zk_mtx *simba__zk_mtx_find(simba__zk *zk, const char *name, int create) {
    simba__zk_mtx *m = (simba__zk_mtx *)simba__hfind(&zk->mtab, name);
    if (m || !create) return m;
    m = (simba__zk_mtx *)simba__zalloc(zk->loop, sizeof *m + strlen(name) + 1);
    if (!m) return NULL;
    m->name = (char *)(m + 1);
    memcpy(m->name, name, strlen(name) + 1);
    m->h.key = m->name;
    if (!simba__hinsert(&zk->mtab, &m->h, simba__lalloc, simba__lfree, zk->loop)) {
        simba_free(zk->loop, m);
        return NULL;
    }
    m->next = zk->mtxs;
    if (zk->mtxs) zk->mtxs->prev = m;
    zk->mtxs = m;
    zk->nmtx++;
    return m;
}

/* The contender's tag: unique per contender and backend instance (token + number). */
static const char *simba__zk_tag(const simba__zk *zk, const simba__zk_cont *c, char out[SIMBA__ZK_TAG_LEN + 1]) {
    snprintf(out, SIMBA__ZK_TAG_LEN + 1, "%s%08x", zk->token, (unsigned)c->tagno);
    return out;
}

/* A contender node's data, "<tag> <session timeout ms> <id> <keep> <value>" (the tag goes
   to tag too; keep: see VALUE): its length, or 0 when it does not fit. */
static int simba__zk_node_data(const simba__zk *zk, const simba__zk_cont *c, zhandle_t *zh, char data[SIMBA__ZK_DATA_MAX + 1],
                               char tag[SIMBA__ZK_TAG_LEN + 1], int64_t keep, const unsigned char *value, size_t len) {
    int n = snprintf(data, SIMBA__ZK_DATA_MAX + 1, "%s %d %s %lld ", simba__zk_tag(zk, c, tag), zoo_recv_timeout(zh),
                     SIMBA__ZK_CID(c), (long long)keep);
    if (n <= 0 || len > SIMBA_VALUE_MAX || (size_t)n + len > SIMBA__ZK_DATA_MAX) return 0;
    if (len) memcpy(data + n, value, len);
    return n + (int)len;
}

/* *dst (*dlen bytes) = a copy of len bytes (0: none); 0 when out of memory (none kept). */
static int simba__zk_setmem(simba__zk *zk, unsigned char **dst, size_t *dlen, const unsigned char *v, size_t len) {
    if (*dst && len == *dlen && memcmp(*dst, v, len) == 0) return 1;
    if (*dst) simba_free(zk->loop, *dst);
    *dst = NULL;
    *dlen = 0;
    if (!len) return 1;
    if (!(*dst = (unsigned char *)simba_alloc(zk->loop, len))) return 0;
    memcpy(*dst, v, len);
    *dlen = len;
    return 1;
}

/* Keeps a node name in a record's SIMBA__ZK_KEEP_MAX buffer: 0 (and "") when it does not fit. */
static int simba__zk_keep(char dst[SIMBA__ZK_KEEP_MAX], const char *name) {
    size_t n = strlen(name);
    if (n >= SIMBA__ZK_KEEP_MAX) {
        dst[0] = 0;
        return 0;
    }
    memcpy(dst, name, n + 1);
    return 1;
}

static simba__zk_cont *simba__zk_cont_find(simba__zk *zk, simba__zk_mtx *m, const char *id, int create) {
    simba__zk_cont *c;
    for (c = m->conts; c; c = c->next)
        if (strcmp(SIMBA__ZK_CID(c), id) == 0) return c;
    if (!create) return NULL;
    c = (simba__zk_cont *)simba__zalloc(zk->loop, sizeof *c + strlen(id) + 1);
    if (!c) return NULL;
    c->mtx = m;
    memcpy(SIMBA__ZK_CID(c), id, strlen(id) + 1);
    c->tagno = (uint32_t)++zk->counter;
    c->next = m->conts;
    m->conts = c;
    return c;
}

/* *dst = a copy of s (NULL s: none); 0 when out of memory (*dst is then NULL). */
static int simba__zk_setstr(simba__zk *zk, char **dst, const char *s) {
    size_t n;
    if (s && *dst && strcmp(*dst, s) == 0) return 1;
    if (*dst) simba_free(zk->loop, *dst);
    *dst = NULL;
    if (!s) return 1;
    n = strlen(s) + 1;
    if (!(*dst = (char *)simba_alloc(zk->loop, n))) return 0;
    memcpy(*dst, s, n);
    return 1;
}

static void simba__zk_mtx_free(simba__zk *zk, simba__zk_mtx *m) {
    simba__zk_setstr(zk, &m->own_id, NULL);
    simba__zk_setstr(zk, &m->last_owner, NULL);
    simba_free(zk->loop, m->own_value);
    simba_free(zk->loop, m);
}

static void simba__zk_mtx_gc(simba__zk *zk, simba__zk_mtx *m) {
    if (m->conts || m->watchers || m->refreshing) return;
    simba__hremove(&zk->mtab, &m->h);
    if (m->prev) m->prev->next = m->next;
    else zk->mtxs = m->next;
    if (m->next) m->next->prev = m->prev;
    zk->nmtx--;
    simba__zk_mtx_free(zk, m);
}

static void simba__zk_job_run(simba__zk *zk, simba__zk_job *job);
static void simba__zk_job_end(simba__zk *zk, simba__zk_job *job);

/* >>jobs The one constructor of a job: on zk->jobs; a request's job also on the deadline FIFO
   (deadlines grow with submission). A job without a request is internal (a clean-up, an
   observer's refresh) and has no deadline. */
static simba__zk_job *simba__zk_job_new(simba__zk *zk, int kind, simba_req *req, simba__zk_cont *c, simba__zk_mtx *m) {
    simba__zk_job *job = (simba__zk_job *)simba__zalloc(zk->loop, sizeof *job);
    if (!job) return NULL;
    job->kind = kind;
    job->req = req;
    job->cont = c;
    job->mtx = m;
    job->internal = req == NULL;
    job->deadline = req ? simba_now(zk->loop) + zk->timeout_ms + 1000 : INT64_MAX;
    job->next = zk->jobs;
    if (zk->jobs) zk->jobs->prev = job;
    zk->jobs = job;
    if (req) {
        job->timed = 1;
        job->tprev = zk->ttail;
        if (zk->ttail) zk->ttail->tnext = job;
        else zk->thead = job;
        zk->ttail = job;
    }
    return job;
}

/* Every change of a job's step goes through here; a build with SIMBA_ZK_TRACE logs each. */
static void simba__zk_job_step(simba__zk *zk, simba__zk_job *job, int step) {
#ifdef SIMBA_ZK_TRACE
    static const char *const names[] = {"LIST", "CREATE", "GET", "EXISTS", "DELETE", "SWEEP", "SET", "SYNC", "VALUE", "REQUEUE"};
    simba_log(zk->loop, SIMBA_LOG_DEBUG, "zookeeper job %p (%s, kind %d): %s -> %s", (void *)job, job->mtx->name, job->kind,
              names[job->step], names[step]);
#else
    (void)zk;
#endif
    job->step = step;
}

/* ... and on to it: the step's call goes out. */
static void simba__zk_job_go(simba__zk *zk, simba__zk_job *job, int step) {
    simba__zk_job_step(zk, job, step);
    simba__zk_job_run(zk, job);
}

/* A contender with nothing queued: make sure a released contender leaves no node behind,
   and forget contenders that hold nothing. */
static void simba__zk_cont_idle(simba__zk *zk, simba__zk_cont *c) {
    simba__zk_cont **pp;
    simba__zk_mtx *m = c->mtx;
    if (c->q_head || !c->want_gone || zk->closing) return;
    if (c->node[0] || c->dirty) {
        simba__zk_job *job;
        if (!simba__zk_usable(zk)) return; /* retried on reconnect */
        if (!(job = simba__zk_job_new(zk, SIMBA_OP_RELEASE, NULL, c, m))) return;
        c->q_head = c->q_tail = job;
        simba__zk_job_run(zk, job);
        return;
    }
    for (pp = &m->conts; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            simba_free(zk->loop, c->value);
            simba_free(zk->loop, c);
            break;
        }
    simba__zk_mtx_gc(zk, m);
}

static void simba__zk_tq_del(simba__zk *zk, simba__zk_job *job) {
    if (!job->timed) return;
    if (job->tprev) job->tprev->tnext = job->tnext;
    else zk->thead = job->tnext;
    if (job->tnext) job->tnext->tprev = job->tprev;
    else zk->ttail = job->tprev;
    job->tnext = job->tprev = NULL;
    job->timed = 0;
}

static void simba__zk_park_del(simba__zk *zk, simba__zk_job *job) {
    int q = job->wait - SIMBA__ZK_W_PARK_STARTED;
    if (job->wait != SIMBA__ZK_W_PARK_STARTED && job->wait != SIMBA__ZK_W_PARK_NEW) return;
    if (job->pprev) job->pprev->pnext = job->pnext;
    else zk->park_head[q] = job->pnext;
    if (job->pnext) job->pnext->pprev = job->pprev;
    else zk->park_tail[q] = job->pprev;
    job->pnext = job->pprev = NULL;
    job->wait = SIMBA__ZK_W_NONE;
}

static void simba__zk_bq_del(simba__zk *zk, simba__zk_job *job) {
    if (job->wait != SIMBA__ZK_W_BATCH) return;
    /* the list a job is on is told by its head: a whole list moves from wait to fly to
       ready without a walk (a walk over a check's 600 requests, cold in the cache, took
       0.6 ms of one poll in W4) */
    if (job->bprev) job->bprev->bnext = job->bnext;
    else if (zk->bq_wait == job) zk->bq_wait = job->bnext;
    else if (zk->bq_fly == job) zk->bq_fly = job->bnext;
    else zk->bq_ready = job->bnext;
    if (job->bnext) job->bnext->bprev = job->bprev;
    job->bnext = job->bprev = NULL;
    job->wait = SIMBA__ZK_W_NONE;
}

static void simba__zk_reply(simba__zk *zk, simba__zk_job *job, const simba_reply *r) {
    if (job->req) {
        simba_req *req = job->req;
        job->req = NULL;
        simba__zk_tq_del(zk, job);
        simba_req_done(req, r);
    }
}

static void simba__zk_fail(simba__zk *zk, simba__zk_job *job, simba_result rc, const char *msg) {
    if (job->req) {
        simba_req *req = job->req;
        job->req = NULL;
        simba__zk_tq_del(zk, job);
        simba_req_fail(req, rc, msg);
    }
    simba__zk_job_end(zk, job);
}

static void simba__zk_job_end(simba__zk *zk, simba__zk_job *job) {
    simba__zk_cont *c = job->cont;
    simba__zk_mtx *m = job->mtx;
    int refused = job->refused;
    if (job->req) { /* never leave a request unanswered */
        simba_reply r;
        simba__zk_reply(zk, job, simba__reply_fail(&r, zk->closing ? SIMBA_ECLOSED : SIMBA_ECONN, NULL));
    }
    if (job->op) job->op->job = NULL; /* its result is still processed for side effects */
    simba__zk_tq_del(zk, job);
    simba__zk_bq_del(zk, job);
    simba__zk_park_del(zk, job);
    if (job->prev) job->prev->next = job->next;
    else if (zk->jobs == job) zk->jobs = job->next;
    if (job->next) job->next->prev = job->prev;
    if (c) {
        simba__zk_job **pp = &c->q_head, *prev = NULL;
        for (; *pp; prev = *pp, pp = &(*pp)->cnext)
            if (*pp == job) {
                *pp = job->cnext;
                if (c->q_tail == job) c->q_tail = prev;
                break;
            }
    }
    if (job->kind == SIMBA__ZK_J_REFRESH && m) m->refreshing = 0;
    simba_free(zk->loop, job);
    if (zk->closing) return;
    if (c) {
        if (c->q_head && !c->q_head->op) {
            simba__zk_job_run(zk, c->q_head);
        } else if (!c->q_head && refused) {
            /* not now: the clean-up's delete would be refused at once too, and end here
               again one level deeper (an expired handle refused them until the stack ran
               out); it is tried again after a while, or when a session connects */
            if (zk->idle_at == INT64_MAX)
                zk->idle_at = simba__add(simba_now(zk->loop), simba__backoff(zk->loop, &zk->idle_backoff, SIMBA__ZK_RETRY_MIN_MS,
                                                                             SIMBA__ZK_RETRY_MAX_MS));
        } else if (!c->q_head) {
            simba__zk_cont_idle(zk, c);
        }
    } else if (m && m->refresh_again && !m->refreshing) {
        simba__zk_job *nj;
        m->refresh_again = 0;
        if ((nj = simba__zk_job_new(zk, SIMBA__ZK_J_REFRESH, NULL, NULL, m)) != NULL) {
            m->refreshing = 1;
            simba__zk_job_run(zk, nj);
        }
    } else if (m) {
        simba__zk_mtx_gc(zk, m);
    }
}

static void simba__zk_refresh(simba__zk *zk, simba__zk_mtx *m) {
    simba__zk_job *job;
    if (m->refreshing) {
        m->refresh_again = 1;
        return;
    }
    if (!simba__zk_usable(zk)) return;
    if (!(job = simba__zk_job_new(zk, SIMBA__ZK_J_REFRESH, NULL, NULL, m))) return;
    m->refreshing = 1;
    m->armed = 1;
    simba__zk_job_run(zk, job);
}

static int simba__zk_cheap(const simba__zk *zk, const simba__zk_job *job);
static void simba__zk_ping(simba__zk *zk, int64_t now);
static void simba__zk_mkdirs(simba__zk *zk, const char *mutex);

/* Not a ZooKeeper code (those are <= 0): a call's record could not be allocated. */
#define SIMBA__ZK_NOMEM 1

/* A job whose step a session check can answer joins the next check; one that finds the
   calls in flight at their bound waits for room. 1 when it waits. */
static int simba__zk_job_hold(simba__zk *zk, simba__zk_job *job) {
    if (job->step == SIMBA__ZK_S_LIST && !job->full && !job->tries && !job->created && simba__zk_cheap(zk, job)) {
        /* the watches vouch for the queue: one session check answers many such requests */
        job->wait = SIMBA__ZK_W_BATCH;
        job->bprev = NULL;
        job->bnext = zk->bq_wait;
        if (zk->bq_wait) zk->bq_wait->bprev = job;
        zk->bq_wait = job;
        simba__zk_ping(zk, simba_now(zk->loop));
        return 1;
    }
    if (zk->nfly >= SIMBA__ZK_FLY_MAX) { /* waits for room; started jobs and renewals first */
        int q = job->started || (job->req && job->req->renew) ? 0 : 1;
        job->wait = SIMBA__ZK_W_PARK_STARTED + q;
        job->pnext = NULL;
        job->pprev = zk->park_tail[q];
        if (zk->park_tail[q]) zk->park_tail[q]->pnext = job;
        else zk->park_head[q] = job;
        zk->park_tail[q] = job;
        return 1;
    }
    return 0;
}

/* SET_VALUE, YIELD: the contender does not hold the mutex with the request's fence. */
static void simba__zk_not_held(simba__zk *zk, simba__zk_job *job) {
    char msg[224];
    snprintf(msg, sizeof msg, "zookeeper: %.64s does not hold %.64s with fence %llu any more", SIMBA__ZK_CID(job->cont),
             job->mtx->name, job->req ? (unsigned long long)job->req->fence : 0ull);
    simba__zk_fail(zk, job, SIMBA_EFENCE, msg);
}

/* A listing that need not be made: an ACQUIRE that knows it has no node creates one; one
   that may grant syncs first; a RELEASE deletes the node it knows. 0 when the job is over
   (a RELEASE with nothing of ours left). */
static int simba__zk_job_route(simba__zk *zk, simba__zk_job *job) {
    simba__zk_cont *c = job->cont;
    if (job->step != SIMBA__ZK_S_LIST) return 1;
    if ((job->kind == SIMBA_OP_SET_VALUE || (job->kind == SIMBA_OP_YIELD && !job->internal)) &&
        (!job->req || !c->node[0] || c->fence <= 0 || (uint64_t)c->fence != job->req->fence)) {
        simba__zk_not_held(zk, job);
        return 0;
    }
    if (job->kind == SIMBA_OP_SET_VALUE)
        simba__zk_job_step(zk, job, SIMBA__ZK_S_VALUE);
    else if (job->kind == SIMBA_OP_ACQUIRE && !c->node[0] && !c->dirty && !job->tries && !c->refused)
        simba__zk_job_step(zk, job, SIMBA__ZK_S_CREATE); /* we know we have no node: nothing to list yet */
    else if (job->kind == SIMBA_OP_ACQUIRE && !job->created && !job->synced)
        simba__zk_job_step(zk, job, SIMBA__ZK_S_SYNC); /* a listing that may grant is only as fresh as its server: see LEASE */
    else if (job->kind == SIMBA_OP_RELEASE && (c->node[0] || c->dirty))
        simba__zk_job_step(zk, job, c->node[0] ? SIMBA__ZK_S_DELETE : SIMBA__ZK_S_SWEEP);
    else if (job->kind == SIMBA_OP_RELEASE) {
        simba_reply r;
        simba__zk_reply(zk, job, simba__reply_none(&r));
        simba__zk_job_end(zk, job);
        return 0;
    }
    return 1;
}

/* The data of a node that starts a tenure (CREATE, or SET for a new fence): keep 0 and the
   request's value, which becomes the contender's (c->value: what its node holds). */
static int simba__zk_grant_data(simba__zk *zk, simba__zk_job *job, zhandle_t *zh, char data[SIMBA__ZK_DATA_MAX + 1],
                                char tag[SIMBA__ZK_TAG_LEN + 1]) {
    simba__zk_cont *c = job->cont;
    if (job->req && job->req->op == SIMBA_OP_ACQUIRE &&
        !simba__zk_setmem(zk, &c->value, &c->value_len, job->req->value, job->req->value_len))
        return 0;
    return simba__zk_node_data(zk, c, zh, data, tag, 0, c->value, c->value_len);
}

/* CREATE: our node, EPHEMERAL|SEQUENTIAL, after the persistent parents the first time. */
static int simba__zk_call_create(simba__zk *zk, simba__zk_job *job, zhandle_t *zh, simba__zk_op **op) {
    char path[SIMBA__ZK_PATH_MAX], data[SIMBA__ZK_DATA_MAX + 1];
    const struct ACL_vector *acl = zk->creator_only ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
    char node[SIMBA__ZK_NODE_MAX], tag[SIMBA__ZK_TAG_LEN + 1], mode[16];
    simba__zk_cont *c = job->cont;
    int n = simba__zk_grant_data(zk, job, zh, data, tag);
    simba__zk_prefix(c->mode, mode);
    snprintf(node, sizeof node, "%s-%s-", mode, tag);
    if (!n || !simba__zk_path(zk, path, job->mtx->name, node)) return ZOK;
    if (!job->mtx->made && !job->mkdirs && zk->sess->connected) { /* the parents first, in session order */
        job->mtx->made = 1;
        job->mkdirs = 1;
        simba__zk_mkdirs(zk, job->mtx->name);
    }
    if (!(*op = simba__zk_op_new(zk, job, SIMBA__ZK_CREATE))) return SIMBA__ZK_NOMEM;
    c->dirty = 1; /* until a listing or the reply says what happened */
    return simba__zk_op_issued(zk, *op, zoo_acreate2(zh, path, data, n, acl, ZOO_EPHEMERAL_SEQUENTIAL, simba__zk_cb_create, *op));
}

/* YIELD with a waiter behind us: in one transaction, the waiter's node still exists, ours
   goes (its watcher, that waiter, is pushed the release) and ours is made again at the
   back, with the same data. */
static int simba__zk_call_requeue(simba__zk *zk, simba__zk_job *job, zhandle_t *zh) {
    simba__zk_cont *c = job->cont;
    const struct ACL_vector *acl = zk->creator_only ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
    char node[SIMBA__ZK_NODE_MAX], tag[SIMBA__ZK_TAG_LEN + 1], mode[16];
    struct simba__zk_multi *mu;
    simba__zk_op *op;
    int n;
    if (!(mu = (struct simba__zk_multi *)simba_alloc(zk->loop, sizeof *mu))) return SIMBA__ZK_NOMEM;
    memset(mu, 0, sizeof *mu);
    n = simba__zk_node_data(zk, c, zh, mu->data, tag, 0, c->value, c->value_len);
    simba__zk_prefix(c->mode, mode);
    snprintf(node, sizeof node, "%s-%s-", mode, tag);
    if (!n || !simba__zk_path(zk, mu->waiter, job->mtx->name, job->pred) || !simba__zk_path(zk, mu->ours, job->mtx->name, c->node) ||
        !simba__zk_path(zk, mu->made, job->mtx->name, node)) {
        simba_free(zk->loop, mu);
        return ZOK;
    }
    if (!(op = simba__zk_op_new(zk, job, SIMBA__ZK_MULTI))) {
        simba_free(zk->loop, mu);
        return SIMBA__ZK_NOMEM;
    }
#ifdef SIMBA_ZK_TEST_FAULTS
    if (simba_zk_test_stale_waiter > 0 && strlen(mu->waiter) + 5 < sizeof mu->waiter) {
        simba_zk_test_stale_waiter--;
        strcat(mu->waiter, "-gone");
    }
#endif
    op->multi = mu;
    zoo_check_op_init(&mu->ops[0], mu->waiter, -1);
    zoo_delete_op_init(&mu->ops[1], mu->ours, -1);
    zoo_create_op_init(&mu->ops[2], mu->made, mu->data, n, acl, ZOO_EPHEMERAL_SEQUENTIAL, mu->created, (int)sizeof mu->created);
    c->dirty = 1; /* until the answer says what happened */
    return simba__zk_op_issued(zk, op, zoo_amulti(zh, 3, mu->ops, mu->res, simba__zk_cb_void, op));
}

/* The call of the job's step. ZOK without a call: a path did not fit; SIMBA__ZK_NOMEM: no memory. */
static int simba__zk_call(simba__zk *zk, simba__zk_job *job, zhandle_t *zh) {
    static const int kinds[] = {SIMBA__ZK_LIST, SIMBA__ZK_CREATE, SIMBA__ZK_GET,  SIMBA__ZK_EXISTS, SIMBA__ZK_DELETE,
                                SIMBA__ZK_LIST, SIMBA__ZK_SET,    SIMBA__ZK_SYNC, SIMBA__ZK_VALUE,  SIMBA__ZK_MULTI};
    char path[SIMBA__ZK_PATH_MAX], data[SIMBA__ZK_DATA_MAX + 1], tag[SIMBA__ZK_TAG_LEN + 1];
    simba__zk_cont *c = job->cont;
    simba__zk_op *op = NULL;
    int s = job->step, observed = !c && job->mtx->watchers > 0, n = 0;
    const char *node = s == SIMBA__ZK_S_GET ? (job->self_get ? c->node : job->lowest) : s == SIMBA__ZK_S_EXISTS ? job->pred
                       : s == SIMBA__ZK_S_SET || s == SIMBA__ZK_S_DELETE || s == SIMBA__ZK_S_VALUE ? c->node : NULL;
    if (s == SIMBA__ZK_S_CREATE) return simba__zk_call_create(zk, job, zh, &op);
    if (s == SIMBA__ZK_S_REQUEUE) return simba__zk_call_requeue(zk, job, zh);
    if (s == SIMBA__ZK_S_SET && !(n = simba__zk_grant_data(zk, job, zh, data, tag))) return ZOK;
    /* a new value under the tenure's fence: keep names it (see VALUE) */
    if (s == SIMBA__ZK_S_VALUE &&
        !(n = simba__zk_node_data(zk, c, zh, data, tag, c->fence, job->req->value, job->req->value_len)))
        return ZOK;
    if (!simba__zk_path(zk, path, job->mtx->name, node)) return ZOK;
    if (!(op = simba__zk_op_new(zk, job, kinds[s]))) return SIMBA__ZK_NOMEM;
    switch (s) {
    case SIMBA__ZK_S_LIST:
    case SIMBA__ZK_S_SWEEP:
        if (c) simba__zk_tag(zk, c, op->tag);
        op->mode = c ? c->mode : SIMBA__ZK_EXCL;
        if (c && c->mode > 1 && s == SIMBA__ZK_S_LIST) { /* a waiter learns of any node ahead going */
            int zrc = simba__zk_op_issued(zk, op, zoo_awget_children(zh, path, simba__zk_node_watcher, zk->sess, simba__zk_cb_list, op));
            if (zrc == ZOK) c->child_watch = 1;
            return zrc;
        }
        if (observed) return simba__zk_op_issued(zk, op, zoo_awget_children(zh, path, simba__zk_node_watcher, zk->sess, simba__zk_cb_list, op));
        return simba__zk_op_issued(zk, op, zoo_aget_children(zh, path, 0, simba__zk_cb_list, op));
    case SIMBA__ZK_S_GET: /* observed: a new tenure's write to the owner node is pushed */
        if (observed) return simba__zk_op_issued(zk, op, zoo_awget(zh, path, simba__zk_node_watcher, zk->sess, simba__zk_cb_get, op));
        return simba__zk_op_issued(zk, op, zoo_aget(zh, path, 0, simba__zk_cb_get, op));
    case SIMBA__ZK_S_SET: /* a new tenure on a node we hold already: its write gives the fence */
    case SIMBA__ZK_S_VALUE: /* only we write our node: its existence is the tenure's */
        return simba__zk_op_issued(zk, op, zoo_aset(zh, path, data, n, -1, simba__zk_cb_stat, op));
    case SIMBA__ZK_S_EXISTS:
        return simba__zk_op_issued(zk, op, zoo_awexists(zh, path, simba__zk_node_watcher, zk->sess, simba__zk_cb_stat, op));
    case SIMBA__ZK_S_SYNC:
        zk->stats.syncs++;
        return simba__zk_op_issued(zk, op, zoo_async(zh, path, simba__zk_cb_string, op));
    default: /* SIMBA__ZK_S_DELETE */
        return simba__zk_op_issued(zk, op, SIMBA__ZK_JOB_DELETE(zoo_adelete(zh, path, -1, simba__zk_cb_void, op)));
    }
}

/* Issues the call for the job's current step; on a refused call the job fails. */
static void simba__zk_job_run(simba__zk *zk, simba__zk_job *job) {
    int zrc;
    char msg[96];
    if (!simba__zk_usable(zk)) {
        simba__zk_fail(zk, job, zk->closing ? SIMBA_ECLOSED : SIMBA_ECONN, simba__zk_unusable_msg(zk));
        return;
    }
#ifdef SIMBA_ZK_TEST_FAULTS
    if (zk->test_mute) return; /* its deadline fails it */
#endif
    if (simba__zk_job_hold(zk, job) || !simba__zk_job_route(zk, job)) return;
    zrc = simba__zk_call(zk, job, zk->sess->zh);
    if (job->op) return;
    job->refused = 1;
    if (zrc == SIMBA__ZK_NOMEM) {
        simba__zk_fail(zk, job, SIMBA_ENOMEM, NULL);
    } else if (zrc == ZOK) { /* a path did not fit: names are bounded, so this is a bug */
        simba__zk_fail(zk, job, SIMBA_EINVAL, "zookeeper path too long");
    } else {
        snprintf(msg, sizeof msg, "zookeeper: %s", zerror(zrc));
        simba__zk_fail(zk, job, simba__zk_rc(zrc), msg);
    }
}

/* Creates the persistent parents of <root>/<mutex>, in order, without waiting: the
   session's requests are applied in order, so the create issued next finds them. */
static void simba__zk_mkdirs(simba__zk *zk, const char *mutex) {
    char path[SIMBA__ZK_PATH_MAX];
    size_t i, n;
    const struct ACL_vector *acl = zk->creator_only ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
    if (!simba__zk_path(zk, path, mutex, NULL)) return;
    n = strlen(path);
    /* the root's components once per session (10,000 mutexes share them) */
    for (i = zk->root_made ? strlen(zk->root) + 1 : 1; i <= n; i++) {
        if (i == n || path[i] == '/') {
            simba__zk_op *op = simba__zk_op_new(zk, NULL, SIMBA__ZK_MKDIR);
            char save = path[i];
            if (!op) return;
            char mark[32];
            int ml = i == strlen(zk->root) ? snprintf(mark, sizeof mark, SIMBA__ZK_SCHEMA_WORD "%d", SIMBA__ZK_SCHEMA_VERSION) : 0;
            path[i] = 0;
            simba__zk_op_issued(zk, op, zoo_acreate(zk->sess->zh, path, ml ? mark : "", ml, acl, ZOO_PERSISTENT,
                                                    simba__zk_cb_string, op));
            path[i] = save;
        }
    }
    zk->root_made = 1;
}

/* What a node's data says (see VALUE). */
typedef struct simba__zk_data {
    char id[SIMBA_ID_MAX + 1];
    int64_t timeout;
    int64_t keep;               /* 0: the node's mzxid is the fence */
    const unsigned char *value; /* into the data read; NULL = none */
    size_t value_len;
} simba__zk_data;

/* "<tag> <timeout> <id> <keep> <value>"; len bytes (value may hold NUL). 0 when it is not
   one of ours. */
static int simba__zk_parse(const char *data, int len, simba__zk_data *d) {
    const char *end = data + (len > 0 ? len : 0), *a, *b, *p, *q;
    long long t = 0, k = 0;
    size_t idn;
    if (len < 0 || !(a = (const char *)memchr(data, ' ', (size_t)(end - data)))) return 0;
    if (!(b = (const char *)memchr(a + 1, ' ', (size_t)(end - a - 1)))) return 0;
    for (p = a + 1; p < b; p++) { /* at most 1e9 ms: no session lasts longer */
        if (*p < '0' || *p > '9') return 0;
        t = t * 10 + (*p - '0');
        if (t > 1000000000LL) return 0;
    }
    d->timeout = t;
    d->keep = 0;
    d->value = NULL;
    d->value_len = 0;
    for (p = b + 1; p < end && *p != ' '; p++) {
    }
    idn = (size_t)(p - b - 1);
    if (!idn || idn > SIMBA_ID_MAX) return 0;
    memcpy(d->id, b + 1, idn);
    d->id[idn] = 0;
    if (p >= end) return 0;
    for (q = p + 1; q < end && *q >= '0' && *q <= '9'; q++) { /* " <keep> <value>" */
        if (k > ((long long)1 << 62) / 10) return 0; /* before it could overflow */
        k = k * 10 + (*q - '0');
    }
    if (q == p + 1 || q >= end || *q != ' ' || (size_t)(end - q - 1) > SIMBA_VALUE_MAX) return 0;
    d->keep = k;
    d->value_len = (size_t)(end - q - 1);
    d->value = d->value_len ? (const unsigned char *)q + 1 : NULL;
    return simba_id_check(d->id) == SIMBA_OK;
}

static int64_t simba__zk_timeout(const simba__zk *zk) {
    int t = zk->sess && zk->sess->zh ? zoo_recv_timeout(zk->sess->zh) : zk->timeout_ms;
    return t > 0 ? t : zk->timeout_ms;
}

/* When to try again to make a session: the kit's backoff, reset once connected. */
static int64_t simba__zk_reopen_in(simba__zk *zk) {
    return simba__backoff(zk->loop, &zk->reopen_backoff, SIMBA__ZK_RETRY_MIN_MS, SIMBA__ZK_RETRY_MAX_MS);
}

static void simba__zk_owner_reply(simba_reply *r, const char *owner, int64_t timeout, uint64_t fence,
                                  const unsigned char *value, size_t value_len) {
    simba__reply_none(r)->owner = owner;
    r->ttl_left_ms = timeout / 2; /* see LEASE */
    r->transition_left_ms = timeout;
    r->fence = fence;
    r->value = value_len ? value : NULL;
    r->value_len = value_len;
}

/* A checksum of a value (the core's hash): an observer is told when the owner's value
   changed. */
static uint64_t simba__zk_vsum(const unsigned char *v, size_t n) {
    return ((uint64_t)simba__memhash(v, n) << 32) ^ n;
}

static void simba__zk_retry(simba__zk *zk, simba__zk_job *job) {
    if (++job->tries > SIMBA__ZK_TRIES) {
        simba__zk_fail(zk, job, SIMBA_EBACKEND, "zookeeper: the queue kept changing under the request");
        return;
    }
    simba__zk_job_go(zk, job, SIMBA__ZK_S_LIST);
}

/* An observed mutex without a node yet: a child watch cannot be left on a missing node,
   so watch for its creation instead (ZOO_CREATED_EVENT starts a refresh). */
static void simba__zk_watch_parent(simba__zk *zk, const char *mutex) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_op *op;
    if (!simba__zk_usable(zk) || !simba__zk_path(zk, path, mutex, NULL)) return;
    op = simba__zk_op_new(zk, NULL, SIMBA__ZK_PARENT);
    if (!op) return;
    simba__copy(op->mutex, sizeof op->mutex, mutex);
    simba__zk_op_issued(zk, op, zoo_awexists(zk->sess->zh, path, simba__zk_node_watcher, zk->sess,
                                             simba__zk_cb_stat, op));
}

static void simba__zk_reply_none(simba__zk *zk, simba__zk_job *job) {
    simba_reply r;
    simba__reply_none(&r);
    if (job->kind == SIMBA__ZK_J_REFRESH) {
        simba__zk_mtx *m = job->mtx;
        if (!m->pushed || m->last_owner) {
            m->pushed = 1;
            simba__zk_setstr(zk, &m->last_owner, NULL);
            m->last_fence = 0;
            simba__zk_event(zk, SIMBA_EV_OWNER, m->name, NULL, &r);
        }
    }
    simba__zk_reply(zk, job, &r);
    simba__zk_job_end(zk, job);
}

/* An owner watches its own node, so that its renewals need only a session check: the node
   cannot stop being the lowest without going, and its going is pushed. */
static void simba__zk_watch_self(simba__zk *zk, simba__zk_cont *c) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_op *op;
    if (!simba__zk_usable(zk) || !c->node[0] || c->czxid <= 0 || !simba__zk_path(zk, path, c->mtx->name, c->node))
        return;
    op = simba__zk_op_new(zk, NULL, SIMBA__ZK_SELF);
    if (!op) return;
    simba__copy(op->mutex, sizeof op->mutex, c->mtx->name);
    simba__copy(op->name, sizeof op->name, c->node);
    simba__copy(op->data, sizeof op->data, SIMBA__ZK_CID(c));
    op->czxid = c->czxid; /* an input here: the answer only sets mzxid */
    if (simba__zk_op_issued(zk, op, zoo_awexists(zk->sess->zh, path, simba__zk_node_watcher, zk->sess, simba__zk_cb_stat,
                                                 op)) == ZOK) {
        c->self_watch = 1;
        c->self_czxid = c->czxid;
    }
}

static void simba__zk_reply_self(simba__zk *zk, simba__zk_job *job) {
    simba__zk_cont *c = job->cont;
    simba_reply r;
    if (job->req && job->req->step_down_on_disconnect && !zk->sess->connected) { /* it would step down at once */
        simba__zk_fail(zk, job, SIMBA_ECONN, "zookeeper disconnected");
        return;
    }
    if (c->self_watch == 0 || c->self_czxid != c->czxid) simba__zk_watch_self(zk, c);
    if (c->fence > c->granted_max) c->granted_max = c->fence;
    c->watch_pred[0] = 0;
    simba__zk_owner_reply(&r, SIMBA__ZK_CID(c), simba__zk_timeout(zk), (uint64_t)c->fence, c->value, c->value_len);
    r.holders = job->mtx->holders > 0 ? job->mtx->holders : 1;
    simba__zk_reply(zk, job, &r);
    simba__zk_job_end(zk, job);
}

/* A request that a session check alone can answer: 1 = an owner's renewal (its node is
   watched: it exists, so it is still the lowest), 2 = the waiter right behind the owner (it
   watches the owner's node, whose data was read and has not changed since). */
static int simba__zk_cheap(const simba__zk *zk, const simba__zk_job *job) {
    const simba__zk_cont *c = job->cont;
    const simba__zk_mtx *m = job->mtx;
    if (job->kind != SIMBA_OP_ACQUIRE || !job->req || !c || !c->node[0] || !zk->sess || !zk->sess->connected) return 0;
    if (job->req->renew && c->fence > 0 && c->self_watch == 2 && c->self_czxid == c->czxid) return 1;
    if (!job->req->renew && c->fence == 0 && c->mode == SIMBA__ZK_EXCL && c->watch_pred[0] && m->own_valid &&
        strcmp(m->own_node, c->watch_pred) == 0)
        return 2;
    return 0;
}

static void simba__zk_reply_first(simba__zk *zk, simba__zk_job *job) {
    simba__zk_mtx *m = job->mtx;
    simba_reply r;
    simba__zk_owner_reply(&r, m->own_id, m->own_timeout, (uint64_t)m->own_fence, m->own_value, m->own_value_len);
    r.first_in_line = 1;
    simba__zk_reply(zk, job, &r);
    simba__zk_job_end(zk, job);
}

/* Sends one session check for every cheap request waiting (at most one in flight, and
   SIMBA__ZK_PING_GAP_MS apart). Its answer was evaluated after each of them was sent, and
   the watch events it follows were handled first: the session and the watched nodes are
   as good as a listing would show. */
static void simba__zk_ping(simba__zk *zk, int64_t now) {
    simba__zk_job *job;
    simba__zk_op *op = NULL;
    int zrc = ZINVALIDSTATE;
    if (!zk->bq_wait || zk->ping_op || zk->bq_ready || now < zk->ping_at || zk->closing) return;
    if (simba__zk_usable(zk) && (op = simba__zk_op_new(zk, NULL, SIMBA__ZK_PING)) != NULL)
        zrc = simba__zk_op_issued(zk, op, zoo_async(zk->sess->zh, zk->root, simba__zk_cb_string, op));
    else if (simba__zk_usable(zk))
        zrc = ZSYSTEMERROR;
    if (zrc != ZOK) {
        char msg[96];
        snprintf(msg, sizeof msg, "zookeeper: %s", zrc == ZSYSTEMERROR ? "out of memory" : zerror(zrc));
        while ((job = zk->bq_wait) != NULL)
            simba__zk_fail(zk, job, zrc == ZSYSTEMERROR ? SIMBA_ENOMEM : simba__zk_rc(zrc), msg);
        return;
    }
    zk->ping_op = op;
    zk->stats.session_checks++;
    zk->ping_at = simba__add(now, SIMBA__ZK_PING_GAP_MS);
    zk->bq_fly = zk->bq_wait;
    zk->bq_wait = NULL;
}

/* Answers the requests of the session check that came back, or sends them the long way,
   as many as the poll's budget allows (W4: one check answered up to 4,700 renewals, 3 ms
   of one poll): the rest wait in bq_ready for the next poll, which the core asks for at
   once, and no new check goes out before they are answered. Answered later, a request is
   judged by the watches as they are then: a watch that fired meanwhile sends it the long
   way, as one that fired before the check would. */
static void simba__zk_answer_ready(simba__zk *zk) {
    simba__zk_job *job;
    int live = zk->ready_live, rc = zk->ready_rc;
    char msg[96];
    if (!zk->bq_ready) return;
    snprintf(msg, sizeof msg, "zookeeper: %s", zerror(rc));
    while ((job = zk->bq_ready) != NULL) {
        int k;
        if (simba_poll_budget_spent(zk->loop)) return;
        simba__zk_bq_del(zk, job);
        if (!live) {
            simba__zk_fail(zk, job, zk->closing ? SIMBA_ECLOSED : SIMBA_ECONN, "zookeeper session lost");
        } else if (rc != ZOK && rc != ZNONODE) {
            simba__zk_fail(zk, job, simba__zk_rc(rc), msg);
        } else if ((k = simba__zk_cheap(zk, job)) == 1) {
            zk->stats.checked++;
            simba__zk_reply_self(zk, job);
        } else if (k == 2) {
            zk->stats.checked++;
            simba__zk_reply_first(zk, job);
        } else { /* a watch fired meanwhile: look */
            job->full = 1;
            simba__zk_job_run(zk, job);
        }
    }
    simba__zk_ping(zk, simba_now(zk->loop));
}

/* The session check came back: its requests are answered next (in order, before those of
   any later check). */
static void simba__zk_batch_done(simba__zk *zk, int live, int rc) {
    /* bq_ready is empty: simba__zk_ping sends no check while it holds requests */
    zk->bq_ready = zk->bq_fly;
    zk->bq_fly = NULL;
    zk->ready_live = live;
    zk->ready_rc = rc;
    simba__zk_answer_ready(zk);
}

/* Our node is the lowest. A renewal keeps its tenure's fence. The first tenure on a node
   takes its mzxid (its czxid: only an owner alone ever writes its node). A new tenure on a
   node granted before (a re-grant after a local step-down) needs a greater fence: alone,
   the node is rewritten and the write's zxid is the fence (any later node is younger);
   with waiters, whose nodes are older than such a write, our node goes to the back of the
   queue instead (deleted, made again) and the head waiter owns next. */
static void simba__zk_own(simba__zk *zk, simba__zk_job *job) {
    simba__zk_cont *c = job->cont;
    if (c->fence > 0 && job->req && job->req->renew) {
        simba__zk_reply_self(zk, job);
    } else if (c->fence == 0 && c->mzxid > c->granted_max) {
        /* a node granted before whose fence we forgot (its mzxid is not above the last
           grant) goes the re-grant way below */
        c->fence = c->mzxid;
        simba__zk_reply_self(zk, job);
    } else {
        simba__zk_job_go(zk, job, job->alone ? SIMBA__ZK_S_SET : SIMBA__ZK_S_DELETE);
    }
}

/* A yield passed: our node is at the back, and the node just before it is watched now, as
   a waiter's, so its release is pushed to us (the core asks again only after min_retry). */
static void simba__zk_yield_watch(simba__zk *zk, simba__zk_job *job, simba__zk_op *op) {
    simba__zk_cont *c = job->cont;
    if (op->rc != ZOK || !op->mine[0] || strcmp(op->mine, c->node) != 0 ||
        (c->watch_pred[0] && strcmp(c->watch_pred, op->pred) == 0)) {
        simba__zk_job_end(zk, job); /* ours went, or is watched already: nothing to set */
    } else if (op->granted) { /* the waiters left already: ours holds, ask now */
        simba__zk_event(zk, SIMBA_EV_RELEASED, c->mtx->name, SIMBA__ZK_CID(c), NULL);
        simba__zk_job_end(zk, job);
    } else if (!op->pred[0]) { /* a semaphore's waiter: this listing left its child watch */
        simba__zk_job_end(zk, job);
    } else {
        simba__copy(job->pred, sizeof job->pred, op->pred);
        simba__zk_job_go(zk, job, SIMBA__ZK_S_EXISTS);
    }
}

static void simba__zk_refuse(simba__zk *zk, simba__zk_job *job);

/* An ACQUIRE's listing that grants nothing yet: no node of ours (made now), ours refused
   (another N ahead: it goes, then SIMBA_ECONFLICT), or ours in another mode than asked (it
   goes to the back: a new request). */
static void simba__zk_acquire_route(simba__zk *zk, simba__zk_job *job, simba__zk_op *op) {
    simba__zk_cont *c = job->cont;
    if (!op->mine[0] && job->created) { /* made it, and it is gone already: the session is in trouble */
        simba__zk_fail(zk, job, SIMBA_ECONN, "zookeeper: our node vanished");
    } else if (!op->mine[0] && op->mismatch) { /* refused before a node of ours is there */
        job->refuse_n = op->mismatch;
        simba__zk_refuse(zk, job);
    } else if (!op->mine[0]) {
        simba__zk_job_go(zk, job, SIMBA__ZK_S_CREATE);
    } else {
        job->refuse_n = op->mismatch;
        if (c->mode != op->mine_mode) job->refuse_n = 0;
        simba__zk_job_go(zk, job, SIMBA__ZK_S_DELETE);
    }
}

static void simba__zk_on_list(simba__zk *zk, simba__zk_job *job, simba__zk_op *op) {
    simba__zk_cont *c = job->cont;
    if (job->step == SIMBA__ZK_S_SWEEP) { /* RELEASE: whatever of ours is left goes */
        simba_reply r;
        if (c->node[0]) { /* known again: forgotten only once its delete is confirmed */
            simba__zk_job_go(zk, job, SIMBA__ZK_S_DELETE);
            return;
        }
        simba__zk_reply(zk, job, simba__reply_none(&r));
        simba__zk_job_end(zk, job);
        return;
    }
    if (job->kind == SIMBA_OP_YIELD && job->internal) {
        simba__zk_yield_watch(zk, job, op);
        return;
    }
    if (job->kind == SIMBA_OP_YIELD) {
        /* a mutex's waiter is the node after ours; with several holders, another's last node
           waits iff anybody does, and ours going frees one unless another reader still
           holds the writer back (a reader then keeps its holding, as on every store) */
        int frees = op->waiters && (c->mode != SIMBA__ZK_READER || op->holders == 1);
        const char *w = c->mode == SIMBA__ZK_EXCL && op->mode == SIMBA__ZK_EXCL ? op->succ : frees ? op->last : "";
        if (!op->mine[0] || !op->granted || strcmp(op->mine, c->node) != 0) {
            simba__zk_not_held(zk, job);
        } else if (!w[0]) { /* nobody it would free waits: it keeps its holding */
            simba__zk_reply_self(zk, job);
        } else {
            simba__copy(job->pred, sizeof job->pred, w); /* the waiter the transaction checks */
            simba__zk_job_go(zk, job, SIMBA__ZK_S_REQUEUE);
        }
        return;
    }
    if (job->kind == SIMBA_OP_ACQUIRE && (!op->mine[0] || op->mismatch || op->mine_mode != c->mode)) {
        simba__zk_acquire_route(zk, job, op);
        return;
    }
    if (op->rc == ZNONODE || !op->lowest[0]) { /* READ / refresh: nobody owns it */
        if (op->rc == ZNONODE && job->mtx->watchers > 0) simba__zk_watch_parent(zk, job->mtx->name);
        simba__zk_reply_none(zk, job);
        return;
    }
    simba__copy(job->lowest, sizeof job->lowest, op->lowest);
    simba__copy(job->pred, sizeof job->pred, op->pred);
    job->count = op->count;
    job->first = op->first;
    job->holders = op->holders;
    job->alone = op->mode == SIMBA__ZK_EXCL ? op->count <= 1 : !op->waiters;
    job->mtx->holders = op->holders;
    if (job->kind == SIMBA_OP_ACQUIRE && op->granted && c->czxid > 0) {
        simba__zk_own(zk, job);
        return;
    }
    /* read the owner's id and creation zxid; a holder that is not the lowest and does not
       know its node's reads its own */
    job->self_get = job->kind == SIMBA_OP_ACQUIRE && op->granted && strcmp(op->mine, op->lowest) != 0;
    simba__zk_job_go(zk, job, SIMBA__ZK_S_GET);
}

static void simba__zk_on_get(simba__zk *zk, simba__zk_job *job, simba__zk_op *op) {
    simba__zk_cont *c = job->cont;
    simba__zk_data d;
    int64_t fence;
    simba_reply r;
    if (op->rc == ZNONODE) { /* the owner left between listing and reading */
        simba__zk_retry(zk, job);
        return;
    }
    if (!simba__zk_parse(op->data, op->datalen, &d)) {
        simba__zk_fail(zk, job, SIMBA_EBACKEND, "zookeeper: owner node holds foreign data");
        return;
    }
    if (d.timeout <= 0) d.timeout = simba__zk_timeout(zk);
    fence = d.keep > 0 ? d.keep : op->mzxid; /* see VALUE */
    if (job->self_get) { /* our own node, which holds: its zxids */
        job->self_get = 0;
        if (c->czxid != op->czxid) c->fence = 0;
        c->czxid = op->czxid;
        c->mzxid = fence;
        simba__zk_own(zk, job);
        return;
    }
    {
        simba__zk_mtx *lm = job->mtx;
        int kept = simba__zk_keep(lm->own_node, job->lowest);
        lm->own_timeout = d.timeout;
        lm->own_fence = fence;
        lm->own_mzxid = op->mzxid;
        kept = simba__zk_setmem(zk, &lm->own_value, &lm->own_value_len, d.value, d.value_len) && kept;
        lm->own_valid = (unsigned char)(simba__zk_setstr(zk, &lm->own_id, d.id) && kept);
    }
    if (job->kind == SIMBA_OP_ACQUIRE && strcmp(job->lowest, c->node) == 0) {
        if (c->czxid != op->czxid) c->fence = 0;
        c->czxid = op->czxid;
        c->mzxid = fence;
        simba__zk_own(zk, job);
        return;
    }
    simba__zk_owner_reply(&r, d.id, d.timeout, (uint64_t)fence, d.value, d.value_len);
    r.holders = job->holders;
    if (job->kind == SIMBA__ZK_J_REFRESH) {
        simba__zk_mtx *m = job->mtx;
        uint64_t vs = simba__zk_vsum(d.value, d.value_len);
        if (!m->pushed || !m->last_owner || strcmp(m->last_owner, d.id) != 0 || m->last_fence != r.fence ||
            m->last_vsum != vs) {
            m->pushed = 1;
            simba__zk_setstr(zk, &m->last_owner, d.id); /* out of memory: pushed again next time */
            m->last_fence = r.fence;
            m->last_vsum = vs;
            simba__zk_event(zk, SIMBA_EV_OWNER, m->name, NULL, &r);
        }
    }
    if (job->kind != SIMBA_OP_ACQUIRE) {
        simba__zk_reply(zk, job, &r);
        simba__zk_job_end(zk, job);
        return;
    }
    /* A waiter: answer now, then watch the node it waits for (only it: no herd; a
       semaphore's waiter has its listing's child watch). A node that goes in between is
       caught by the exists call (ZNONODE -> SIMBA_EV_RELEASED). */
    r.first_in_line = job->first;
    simba__zk_reply(zk, job, &r);
    job->internal = 1;
    if (!job->pred[0] || (strcmp(c->watch_pred, job->pred) == 0 && c->watch_pred[0])) {
        /* already watched in this session: the watch stays until the node goes */
        simba__zk_job_end(zk, job);
        return;
    }
    simba__zk_job_go(zk, job, SIMBA__ZK_S_EXISTS);
}

/* What an answer tells about the contender's node, whether or not anybody still waits
   for it. */
static void simba__zk_op_effects(simba__zk *zk, simba__zk_op *op, simba__zk_cont *c) {
    int rc = op->rc, i;
    if (op->kind == SIMBA__ZK_CREATE && rc == ZOK) {
        /* ours always fit; one that did not would stay a node we do not know of */
        c->dirty = (unsigned char)!simba__zk_keep(c->node, op->name);
        c->czxid = op->czxid;
        c->mzxid = op->mzxid;
        c->fence = 0;
        c->refused = 0;
    } else if (op->kind == SIMBA__ZK_MULTI && rc == ZOK) { /* YIELD: ours is made again at the back */
        const char *base = strrchr(op->multi->created, '/');
        c->dirty = (unsigned char)!(base && simba__zk_keep(c->node, base + 1));
        c->czxid = c->mzxid = c->fence = 0;
        c->self_watch = 0;
        c->watch_pred[0] = 0;
    } else if (op->kind == SIMBA__ZK_MULTI && op->multi->res[1].err == ZNONODE) {
        c->node[0] = 0;
        c->czxid = c->fence = 0;
        c->dirty = 0;
    } else if (op->kind == SIMBA__ZK_MULTI && op->multi->res[0].err != ZOK) {
        c->dirty = 0; /* refused as a whole: nothing changed */
    } else if (op->kind == SIMBA__ZK_DELETE && (rc == ZOK || rc == ZNONODE)) {
        c->node[0] = 0;
        c->czxid = 0;
        c->fence = 0;
    } else if (op->kind == SIMBA__ZK_LIST && rc == ZOK && op->mine[0]) {
        if (strcmp(c->node, op->mine) != 0) c->czxid = c->fence = 0;
        c->dirty = (unsigned char)!simba__zk_keep(c->node, op->mine);
        for (i = 0; i < op->nextra; i++) simba__zk_delete_node(zk, c->mtx->name, op->extra[i]);
    } else if (op->kind == SIMBA__ZK_LIST && (rc == ZOK || rc == ZNONODE)) {
        c->node[0] = 0;
        c->czxid = 0;
        c->fence = 0;
        c->dirty = 0;
        for (i = 0; i < op->nextra; i++) simba__zk_delete_node(zk, c->mtx->name, op->extra[i]);
    }
}

/* The answer of a call no job waits for: a parent that appeared, a session check, an
   owner's watch on its own node, a waiter's watch set again. */
/* The root's data, read at each session's start: empty gets this layout's mark (only while
   nobody has written it: version 0), another layout's refuses the backend. */
static void simba__zk_schema_seen(simba__zk *zk, const simba__zk_op *op) {
    char mark[32];
    int ml = snprintf(mark, sizeof mark, SIMBA__ZK_SCHEMA_WORD "%d", SIMBA__ZK_SCHEMA_VERSION);
    if (op->datalen == 0 && op->version == 0) {
        simba__zk_op *set = simba__zk_op_new(zk, NULL, SIMBA__ZK_SET);
        if (set) simba__zk_op_issued(zk, set, zoo_aset(zk->sess->zh, zk->root, mark, ml, 0, simba__zk_cb_stat, set));
        return;
    }
    if (op->datalen == ml && memcmp(op->data, mark, (size_t)ml) == 0) return;
    snprintf(zk->schema_err, sizeof zk->schema_err, "zookeeper: found simba schema version %.40s (the data of %s), this "
             "simba uses %d: run one simba version on a root, or give this one a root of its own",
             strncmp(op->data, SIMBA__ZK_SCHEMA_WORD, sizeof SIMBA__ZK_SCHEMA_WORD - 1) == 0
                 ? op->data + sizeof SIMBA__ZK_SCHEMA_WORD - 1 : "(not simba's)",
             zk->root, SIMBA__ZK_SCHEMA_VERSION);
    if (!zk->schema_bad) simba_log(zk->loop, SIMBA_LOG_ERROR, "%s", zk->schema_err);
    zk->schema_bad = 1;
}

static void simba__zk_op_loose(simba__zk *zk, simba__zk_op *op, int live) {
    int named = op->kind == SIMBA__ZK_PARENT || op->kind == SIMBA__ZK_SELF || op->kind == SIMBA__ZK_REWATCH;
    simba__zk_mtx *m = live && named ? simba__zk_mtx_find(zk, op->mutex, 0) : NULL;
    simba__zk_cont *wc = m && op->kind != SIMBA__ZK_PARENT ? simba__zk_cont_find(zk, m, op->data, 0) : NULL;
    if (op->kind == SIMBA__ZK_PARENT && m && op->rc == ZOK && m->watchers > 0) simba__zk_refresh(zk, m); /* appeared before its watch was set */
    if (op->kind == SIMBA__ZK_PING && op == zk->ping_op) {
        zk->ping_op = NULL;
        simba__zk_batch_done(zk, live, op->rc);
    }
    if (op->kind == SIMBA__ZK_SCHEMA && live && op->rc == ZOK) simba__zk_schema_seen(zk, op);
    if (op->kind == SIMBA__ZK_SELF && wc && wc->self_watch == 1 && wc->self_czxid == op->czxid && strcmp(wc->node, op->name) == 0)
        wc->self_watch = op->rc == ZOK ? 2 : 0;
    if (op->kind == SIMBA__ZK_REWATCH && wc && op->rc == ZNONODE && strcmp(wc->watch_pred, op->name) == 0) {
        wc->watch_pred[0] = 0; /* it went before the watch was back */
        simba__zk_event(zk, SIMBA_EV_RELEASED, m->name, SIMBA__ZK_CID(wc), NULL);
    }
}

/* YIELD's transaction answered: passed (our node is at the back), or which check failed. */
static void simba__zk_on_requeue(simba__zk *zk, simba__zk_job *job, simba__zk_op *op) {
    simba_reply r;
    char msg[96];
    if (op->rc == ZOK) {
        simba__reply_none(&r)->yielded = 1;
        simba__zk_reply(zk, job, &r);
        job->internal = 1; /* on to watch the node now just before ours */
        simba__zk_job_go(zk, job, SIMBA__ZK_S_LIST);
    } else if (op->multi->res[1].err == ZNONODE) { /* ours went: the tenure is over */
        simba__zk_not_held(zk, job);
    } else if (op->multi->res[0].err == ZNONODE) { /* that waiter left: look again */
        simba__zk_retry(zk, job);
    } else {
        snprintf(msg, sizeof msg, "zookeeper: %s", zerror(op->rc));
        simba__zk_fail(zk, job, simba__zk_rc(op->rc), msg);
    }
}

/* Another N ahead of ours, whose node is gone now: refused in words, never obeyed. */
static void simba__zk_refuse(simba__zk *zk, simba__zk_job *job) {
    char msg[200];
    job->cont->refused = 1;
    simba__zk_fail(zk, job, SIMBA_ECONFLICT, simba__conflict_words(msg, sizeof msg, SIMBA__ZK_N(job->cont->mode), job->refuse_n));
}

/* A job's call answered (ZOK or ZNONODE, on the live session): its next step. */
static void simba__zk_job_answer(simba__zk *zk, simba__zk_job *job, simba__zk_op *op) {
    simba__zk_cont *c = job->cont;
    int rc = op->rc;
    if (op->kind == SIMBA__ZK_SYNC) { /* our server has caught up with the leader: list */
        job->synced = 1;
        simba__zk_job_go(zk, job, SIMBA__ZK_S_LIST);
    } else if (op->kind == SIMBA__ZK_LIST) {
        simba__zk_on_list(zk, job, op);
    } else if (op->kind == SIMBA__ZK_GET) {
        simba__zk_on_get(zk, job, op);
    } else if (op->kind == SIMBA__ZK_CREATE && rc == ZNONODE && !job->mkdirs) {
        job->mkdirs = 1;
        zk->root_made = 0; /* the root itself may be gone */
        simba__zk_mkdirs(zk, job->mtx->name);
        simba__zk_job_run(zk, job); /* the create again, behind the mkdirs */
    } else if (op->kind == SIMBA__ZK_CREATE && rc == ZNONODE) {
        simba__zk_fail(zk, job, SIMBA_EBACKEND, "zookeeper: cannot create the mutex node");
    } else if (op->kind == SIMBA__ZK_CREATE) {
        job->created = 1;
        simba__zk_job_go(zk, job, SIMBA__ZK_S_LIST);
    } else if (op->kind == SIMBA__ZK_VALUE && rc == ZNONODE) {
        simba__zk_not_held(zk, job);
    } else if (op->kind == SIMBA__ZK_VALUE) {
        if (!simba__zk_setmem(zk, &c->value, &c->value_len, job->req ? job->req->value : NULL, job->req ? job->req->value_len : 0))
            c->value_len = 0; /* out of memory: the node has it, the next read says it */
        simba__zk_reply_self(zk, job);
    } else if (op->kind == SIMBA__ZK_MULTI) {
        simba__zk_on_requeue(zk, job, op);
    } else if (op->kind == SIMBA__ZK_SET && rc == ZNONODE) { /* our node went (session trouble): look again */
        simba__zk_retry(zk, job);
    } else if (op->kind == SIMBA__ZK_SET) {
        c->fence = c->mzxid = op->mzxid;
        simba__zk_reply_self(zk, job);
    } else if (op->kind == SIMBA__ZK_EXISTS) {
        if (rc == ZNONODE || job->pred_gone) { /* the predecessor is gone already: re-check at once */
            c->watch_pred[0] = 0;
            if (!job->pred_gone) simba__zk_event(zk, SIMBA_EV_RELEASED, c->mtx->name, SIMBA__ZK_CID(c), NULL);
        } else {
            (void)simba__zk_keep(c->watch_pred, job->pred); /* one too long: its push is missed, the timer stays */
            /* changed between our read and this watch: the cached owner data is stale */
            if (strcmp(job->pred, c->mtx->own_node) == 0 && op->mzxid != c->mtx->own_mzxid) c->mtx->own_valid = 0;
        }
        simba__zk_job_end(zk, job);
    } else if (op->kind == SIMBA__ZK_DELETE && job->kind == SIMBA_OP_ACQUIRE && job->refuse_n) {
        simba__zk_refuse(zk, job);
    } else if (op->kind == SIMBA__ZK_DELETE && job->kind == SIMBA_OP_ACQUIRE) { /* re-queued: list again */
        simba__zk_retry(zk, job);
    } else if (op->kind == SIMBA__ZK_DELETE && job->kind == SIMBA_OP_RELEASE && c->dirty) {
        simba__zk_job_go(zk, job, SIMBA__ZK_S_SWEEP);
    } else {
        simba_reply r;
        simba__zk_reply(zk, job, simba__reply_none(&r));
        simba__zk_job_end(zk, job);
    }
}

/* Result of a call, on the caller's thread. */
static void simba__zk_ins_on_op(simba__zk *zk, simba__zk_op *op);
static void simba__zk_on_op(simba__zk *zk, simba__zk_op *op) {
    simba__zk_job *job = op->job;
    int same = zk->sess && op->sess == zk->sess && !zk->sess->dead; /* closing included: settle */
    int live = same && !zk->closing;
    char msg[96];
    simba__zk_op_unlink(zk, op);
    zk->stats.answers++; /* destroy also waits on while these keep coming */
    if (op->ins) {
        simba__zk_ins_on_op(zk, op);
    } else {
        if (job) {
            job->op = NULL;
            job->started = 1;
        }
        if (op->counted && same) zk->nfly--;
        if (same && job && job->cont) simba__zk_op_effects(zk, op, job->cont);
        if (!job) {
            simba__zk_op_loose(zk, op, live);
        } else if (!live) {
            simba__zk_fail(zk, job, zk->closing ? SIMBA_ECLOSED : SIMBA_ECONN, "zookeeper session lost");
        } else if (!job->req && !job->internal) { /* answered already (timed out) */
            simba__zk_job_end(zk, job);
        } else if (op->rc != ZOK && op->rc != ZNONODE && op->kind != SIMBA__ZK_MULTI) {
            snprintf(msg, sizeof msg, "zookeeper: %s", zerror(op->rc));
            simba__zk_fail(zk, job, simba__zk_rc(op->rc), msg);
        } else {
            simba__zk_job_answer(zk, job, op);
        }
    }
    simba__zk_op_free(zk, op);
}

/* ---- >>inspect: simba_inspect, simba_list, simba_force_release -----------------------------
 *
 *   INSPECT  KIDS(/root/m) --> GET(each holder's node) --> GET(each of the first waiters) --> done
 *   LIST     KIDS(/root) --> for each mutex: KIDS(/root/m) --> GET(each holder's node) --> done
 *   FORCE    KIDS(/root/m) --> GET(holders' nodes until the fence) --> DELETE(node, version) --> done
 *
 * The holders are the nodes that hold by SEMAPHORES AND READERS (a mutex's: the lowest); a
 * holder's fence is its node's mzxid (a tenure's write) or keep, its data "tag timeout id
 * keep value". One call at a time per inspection; caller's thread only. */
enum { SIMBA__ZK_I_ROOT, SIMBA__ZK_I_KIDS, SIMBA__ZK_I_GET, SIMBA__ZK_I_DELETE, SIMBA__ZK_I_MULTI };
struct simba__zkfw;

struct simba__zk_ins {
    simba__zk_ins *next, *prev; /* zk->inss */
    simba_req *req;
    int step;
    simba_view v;
    char (*node)[SIMBA__ZK_NODE_MAX]; /* a mutex's nodes, oldest first: its holders, then the
                                         first waiters (SIMBA_MALLOC) */
    int nnodes, at, nhold, mode;      /* nhold: holders in node[]; mode: the lowest's */
    simba_view_holder *hold;          /* the holders read (SIMBA_MALLOC, with their values) */
    unsigned char (*hval)[SIMBA_VALUE_MAX];
    char *names; /* LIST: the root's children (SIMBA_MALLOC), next the one to read */
    int nnames;
    const char *name_at;
    char mutex[SIMBA_NAME_MAX + 1]; /* the mutex being read */
    struct simba__zkfw *fw;         /* SIMBA_OP_CALL: the fenced multi */
    int owner_version;              /* SIMBA_OP_CALL: the owner node's, as read */
    int fw_unknown;                 /* SIMBA_OP_CALL: the multi went out, its answer was lost */
    int parked;                     /* SIMBA_OP_CALL: 1 waits for a session, 2 asked again */
    int64_t parked_until;
};
static void simba__zkfw_refuse(simba__zk *zk, simba__zk_ins *in, int has_owner, uint64_t stored);
static void simba__zkfw_multi(simba__zk *zk, simba__zk_ins *in);
static void simba__zkfw_on_multi(simba__zk *zk, simba__zk_ins *in, simba__zk_op *op, int same);

static void simba__zk_ins_end(simba__zk *zk, simba__zk_ins *in, simba_result rc, const char *msg) {
    simba_reply r;
    char words[224];
    int i;
    if (in->fw && !in->fw_unknown && rc == SIMBA_ECONN && !in->parked && !zk->closing) {
        /* Nothing was sent: it asks again once the session is known (back: the fence is
           checked as before; expired: its node is gone, the fence refused), within a
           session timeout (simba__zk_ins_resume). */
        SIMBA_FREE(in->names);
        SIMBA_FREE(in->node);
        SIMBA_FREE(in->hold);
        memset(&in->v, 0, sizeof in->v);
        in->names = NULL;
        in->node = NULL;
        in->hold = NULL;
        in->hval = NULL;
        in->nnames = in->nnodes = in->at = in->nhold = in->mode = 0;
        in->name_at = NULL;
        in->step = SIMBA__ZK_I_KIDS;
        in->parked = 1;
        in->parked_until = simba__add(simba_now(zk->loop), simba__add(zk->timeout_ms, 1000));
        return;
    }
    /* A fenced multi not sent, or answered "session expired" (never sent on a live one),
       under a fence whose session has expired: nothing was written, and nothing can be. */
    for (i = 0; in->fw && !in->fw_unknown && (rc == SIMBA_ECONN || rc == SIMBA_ECLOSED) && i < 8; i++) {
        if (zk->dead_fence[i] <= 0 || (uint64_t)zk->dead_fence[i] != in->req->fence) continue;
        snprintf(words, sizeof words, "simba_zk_fenced_multi: fence %llu of %.64s was held by a session that expired "
                 "(its node went with it): it holds no lease; nothing was written", (unsigned long long)in->req->fence, in->mutex);
        rc = SIMBA_EFENCE;
        msg = words;
        break;
    }
    simba__reply_fail(&r, rc, msg);
    if (in->prev) in->prev->next = in->next; else zk->inss = in->next;
    if (in->next) in->next->prev = in->prev;
    SIMBA_FREE(in->names);
    SIMBA_FREE(in->node);
    SIMBA_FREE(in->hold);
    simba_req_done(in->req, &r);
    simba_free(zk->loop, in);
}

/* Issues the call of in's step; a call the library refuses ends the inspection. */
static void simba__zk_ins_call(simba__zk *zk, simba__zk_ins *in) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_op *op;
    int zrc, kind = in->step == SIMBA__ZK_I_GET ? SIMBA__ZK_GET : in->step == SIMBA__ZK_I_DELETE ? SIMBA__ZK_DELETE : SIMBA__ZK_LIST;
    const char *node = in->step == SIMBA__ZK_I_GET || in->step == SIMBA__ZK_I_DELETE ? in->node[in->at] : NULL;
    if (!simba__zk_usable(zk)) {
        simba__zk_ins_end(zk, in, SIMBA_ECONN, in->fw ? "no usable zookeeper session: the fenced multi was not sent, nothing "
                                                         "was written" : simba__zk_unusable_msg(zk));
        return;
    }
    if (!simba__zk_path(zk, path, in->step == SIMBA__ZK_I_ROOT ? NULL : in->mutex, node)) {
        simba__zk_ins_end(zk, in, SIMBA_EINVAL, "zookeeper: path too long");
        return;
    }
    if (!(op = simba__zk_op_new(zk, NULL, kind))) { simba__zk_ins_end(zk, in, SIMBA_ENOMEM, "zookeeper: out of memory"); return; }
    op->ins = in;
    if (kind == SIMBA__ZK_LIST) zrc = zoo_aget_children(zk->sess->zh, path, 0, simba__zk_cb_kids, op);
    else if (kind == SIMBA__ZK_GET) zrc = zoo_aget(zk->sess->zh, path, 0, simba__zk_cb_get, op);
    else zrc = zoo_adelete(zk->sess->zh, path, (int)in->v.fence, simba__zk_cb_void, op); /* fence: the version here */
    zrc = simba__zk_op_issued(zk, op, zrc);
    if (zrc == ZMARSHALLINGERROR) op->ins = NULL; /* it may still come: nobody waits for it */
    if (zrc != ZOK) simba__zk_ins_end(zk, in, simba__zk_rc(zrc), zerror(zrc));
}

/* Whether the node at place k (oldest first) of mode md holds, all before it holding: see
   SEMAPHORES AND READERS. */
static int simba__zk_ins_holds(const simba__zk_ins *in, int k, int md) {
    if (k != in->nhold) return 0;
    if (in->mode > 1) return md == in->mode && k < in->mode;
    return in->mode == SIMBA__ZK_EXCL ? k == 0 : md == SIMBA__ZK_READER;
}

/* A mutex's contender nodes into in->node, oldest first: its holders, then (INSPECT) the
   first SIMBA_VIEW_WAITERS waiters; the count of them all, -1 when out of memory. */
static int simba__zk_ins_order(simba__zk_ins *in, const char *kids, int n) {
    long long last = -1;
    int count = 0, i, k, md, cap;
    const char *p, *t;
    size_t tl;
    for (p = kids, i = 0; i < n; i++, p += strlen(p) + 1) count += simba__zk_seq(p, &t, &tl) >= 0;
    cap = count < SIMBA_PERMITS_MAX + SIMBA_VIEW_WAITERS ? count : SIMBA_PERMITS_MAX + SIMBA_VIEW_WAITERS;
    SIMBA_FREE(in->node);
    in->node = NULL;
    in->nnodes = in->nhold = 0;
    if (cap && !(in->node = (char (*)[SIMBA__ZK_NODE_MAX])SIMBA_MALLOC((size_t)cap * SIMBA__ZK_NODE_MAX))) return -1;
    while (in->nnodes < cap) {
        long long best = -1;
        const char *bp = NULL;
        int bm = 0;
        for (p = kids, k = 0; k < n; k++, p += strlen(p) + 1) {
            long long s = simba__zk_seqm(p, &t, &tl, &md);
            if (s > last && (best < 0 || s < best) && strlen(p) < SIMBA__ZK_NODE_MAX) { best = s; bp = p; bm = md; }
        }
        if (!bp) break;
        if (in->nnodes == 0) in->mode = bm;
        if (simba__zk_ins_holds(in, in->nnodes, bm)) in->nhold++;
        else if (in->req->op != SIMBA_OP_INSPECT || in->nnodes >= in->nhold + SIMBA_VIEW_WAITERS) break;
        simba__copy(in->node[in->nnodes++], SIMBA__ZK_NODE_MAX, bp);
        last = best;
    }
    return count;
}

/* The next mutex of a listing, or the end. */
static void simba__zk_ins_next(simba__zk *zk, simba__zk_ins *in) {
    while (in->nnames > 0) {
        const char *name = in->name_at;
        in->name_at += strlen(name) + 1;
        in->nnames--;
        if (simba_name_check(name) != SIMBA_OK) continue; /* not a mutex of ours */
        simba__copy(in->mutex, sizeof in->mutex, name);
        in->step = SIMBA__ZK_I_KIDS;
        simba__zk_ins_call(zk, in);
        return;
    }
    simba__zk_ins_end(zk, in, SIMBA_OK, NULL);
}

/* The mutex's view is complete (or it has no nodes): hand it over, go on. */
static void simba__zk_ins_view(simba__zk *zk, simba__zk_ins *in) {
    int permits = in->v.permits; /* known from the nodes, waiters' included */
    simba__copy(in->v.mutex, sizeof in->v.mutex, in->mutex);
    /* the view shows the holder whose lease ends first; no lease end is known here: the oldest */
    simba__view_holders(&in->v, in->hold, in->v.holders, permits);
    in->v.permits = permits;
    /* no holder has the fence asked for */
    if (in->req->op == SIMBA_OP_CALL) { simba__zkfw_refuse(zk, in, in->v.owner[0] != 0, in->v.fence); return; }
    if (in->req->op == SIMBA_OP_FORCE_RELEASE) { simba__zk_ins_end(zk, in, SIMBA_EFENCE, NULL); return; }
    simba_req_view(in->req, &in->v);
    if (in->req->op == SIMBA_OP_LIST) simba__zk_ins_next(zk, in);
    else simba__zk_ins_end(zk, in, SIMBA_OK, NULL);
}

static void simba__zk_ins_kids(simba__zk *zk, simba__zk_ins *in, simba__zk_op *op) {
    int count = op->rc == ZOK ? simba__zk_ins_order(in, op->kids, op->nkids) : 0;
    size_t each = sizeof(simba_view_holder) + SIMBA_VALUE_MAX;
    SIMBA_FREE(in->hold);
    in->hold = NULL;
    if (count < 0 || (in->nhold && !(in->hold = (simba_view_holder *)SIMBA_MALLOC((size_t)in->nhold * each)))) {
        simba__zk_ins_end(zk, in, SIMBA_ENOMEM, "zookeeper: out of memory");
        return;
    }
    in->hval = (unsigned char (*)[SIMBA_VALUE_MAX])(void *)(in->hold + in->nhold);
    memset(&in->v, 0, sizeof in->v);
    in->v.acquired_unix_ms = in->v.held_ms = in->v.ttl_left_ms = in->v.transition_left_ms = SIMBA_UNKNOWN_MS;
    in->v.lease_ms = SIMBA_UNKNOWN_MS;
    in->v.permits = count > 0 ? SIMBA__ZK_N(in->mode) : 0;
    in->v.waiters = in->req->op == SIMBA_OP_INSPECT ? count - in->nhold : -1;
    if (op->rc == ZNONODE && in->req->op == SIMBA_OP_INSPECT) { simba__zk_ins_end(zk, in, SIMBA_OK, NULL); return; }
    if (in->nnodes == 0) { simba__zk_ins_view(zk, in); return; }
    in->at = 0;
    in->step = SIMBA__ZK_I_GET;
    simba__zk_ins_call(zk, in);
}

/* A holder's node read: into the view's holders (the first one's session timeout is the
   view's lease); 1 when a fenced multi or a force release found the holder it asks for and went on. */
static int simba__zk_ins_holder(simba__zk *zk, simba__zk_ins *in, simba__zk_op *op, const simba__zk_data *d) {
    simba_view_holder *h = &in->hold[in->v.holders];
    uint64_t fence = (uint64_t)(d->keep > 0 ? d->keep : op->mzxid);
    memset(h, 0, sizeof *h);
    simba__copy(h->id, sizeof h->id, d->id);
    h->fence = fence;
    h->shared = in->mode == SIMBA__ZK_READER;
    h->acquired_unix_ms = h->held_ms = h->ttl_left_ms = h->transition_left_ms = SIMBA_UNKNOWN_MS;
    h->value_len = d->value_len;
    if (d->value_len) memcpy(in->hval[in->v.holders], d->value, d->value_len);
    h->value = d->value_len ? in->hval[in->v.holders] : NULL;
    if (++in->v.holders == 1) in->v.lease_ms = d->timeout;
    if (fence != in->req->fence || (in->req->op != SIMBA_OP_CALL && in->req->op != SIMBA_OP_FORCE_RELEASE)) return 0;
    if (in->req->op == SIMBA_OP_CALL) {
        in->owner_version = op->version; /* the multi checks this very write */
        in->step = SIMBA__ZK_I_MULTI;
        simba__zkfw_multi(zk, in);
        return 1;
    }
    in->v.fence = (uint64_t)op->version; /* the delete is conditional on this very write */
    in->step = SIMBA__ZK_I_DELETE;
    simba__zk_ins_call(zk, in);
    return 1;
}

static void simba__zk_ins_get(simba__zk *zk, simba__zk_ins *in, simba__zk_op *op) {
    simba__zk_data d;
    int ok = op->rc == ZOK && simba__zk_parse(op->data, op->datalen, &d);
    if (ok && in->at < in->nhold) { /* a holder; one that went while we looked is not one */
        if (simba__zk_ins_holder(zk, in, op, &d)) return;
    } else if (ok) {
        int w = 0;
        while (w < SIMBA_VIEW_WAITERS && in->v.waiter[w][0]) w++;
        if (w < SIMBA_VIEW_WAITERS) simba__copy(in->v.waiter[w], sizeof in->v.waiter[w], d.id);
    }
    if (++in->at < in->nnodes) {
        simba__zk_ins_call(zk, in); /* the next holder, or waiter's id */
        return;
    }
    simba__zk_ins_view(zk, in);
}

static void simba__zk_ins_on_op(simba__zk *zk, simba__zk_op *op) {
    simba__zk_ins *in = op->ins;
    int same = zk->sess && op->sess == zk->sess && !zk->sess->dead && !zk->closing;
    if (in->step == SIMBA__ZK_I_MULTI) { simba__zkfw_on_multi(zk, in, op, same); return; }
    if (!same || (op->rc != ZOK && op->rc != ZNONODE && op->rc != ZBADVERSION)) {
        char words[160];
        snprintf(words, sizeof words, "%s%s", zerror(op->rc), in->fw ? ": the fenced multi was not sent, nothing was written" : "");
        simba__zk_ins_end(zk, in, same ? simba__zk_rc(op->rc) : SIMBA_ECONN, words);
        return;
    }
    switch (in->step) {
    case SIMBA__ZK_I_ROOT:
        in->names = op->kids; /* the listing keeps the block */
        op->kids = NULL;
        in->nnames = op->rc == ZOK ? op->nkids : 0;
        in->name_at = in->names;
        simba__zk_ins_next(zk, in);
        break;
    case SIMBA__ZK_I_KIDS: simba__zk_ins_kids(zk, in, op); break;
    case SIMBA__ZK_I_GET: simba__zk_ins_get(zk, in, op); break;
    default: simba__zk_ins_end(zk, in, op->rc == ZOK ? SIMBA_OK : SIMBA_EFENCE, NULL); break;
    }
}

static simba_result simba__zk_inspect(void *impl, simba_req *req) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_ins *in;
    if (req->op != SIMBA_OP_LIST && simba_name_check(req->mutex) != SIMBA_OK) return SIMBA_EINVAL;
    if (zk->schema_bad) { /* another layout would be misread */
        simba_req_fail(req, SIMBA_EBACKEND, zk->schema_err);
        return SIMBA_OK;
    }
    if (!(in = (simba__zk_ins *)simba__zalloc(zk->loop, sizeof *in))) return SIMBA_ENOMEM;
    in->req = req;
    simba__copy(in->mutex, sizeof in->mutex, req->mutex);
    in->step = req->op == SIMBA_OP_LIST ? SIMBA__ZK_I_ROOT : SIMBA__ZK_I_KIDS;
    if (zk->inss) zk->inss->prev = in;
    in->next = zk->inss;
    zk->inss = in;
    simba__zk_ins_call(zk, in);
    return SIMBA_OK;
}

/* ---- >>fenced: simba_zk_fenced_multi ------------------------------------------------------
 *
 *   CALL  KIDS(/root/m) --> GET(owner node) --(its mzxid is the fence)--> MULTI(check(owner
 *         node, version), ops...) --> done;  no owner, or another fence --> refused
 *
 * The check makes the multi commit only while, in the leader's order, the tenure's node
 * exists unwritten since: no other owner can have been granted (its node is younger, and
 * an owner's node goes only with a release or its session). Reads may be stale; the check
 * is not. */

#define SIMBA__ZKFW_OPS_MAX 256
#define SIMBA__ZKFW_PATH 600     /* a path (at most 512) and a sequence number */
#define SIMBA__ZKFW_BYTES 1000000 /* data of one multi: below the server's 1 MB jute.maxbuffer */

/* The caller's side: copies of the ops, and the results handed to the callback. */
typedef struct simba__zkfw {
    simba_loop *loop;
    simba_zk_fenced_fn cb;
    void *user;
    int n, have_res;
    simba_zk_fenced_op *ops;     /* n copies; paths and data after the results' paths */
    simba_zk_fenced_result *res; /* n */
    char (*made)[SIMBA__ZKFW_PATH]; /* n: created paths */
} simba__zkfw;

/* What the library reads and writes from its thread: one SIMBA_MALLOC block per call. */
typedef struct simba__zkfw_call {
    int count; /* n + 1: the check first */
    zoo_op_t *ops;
    zoo_op_result_t *res;
    struct Stat *stats;
    char (*bufs)[SIMBA__ZKFW_PATH];
    char check[SIMBA__ZK_PATH_MAX];
} simba__zkfw_call;

static void simba__zkfw_refuse(simba__zk *zk, simba__zk_ins *in, int has_owner, uint64_t stored) {
    char words[320];
    if (!has_owner)
        snprintf(words, sizeof words, "simba_zk_fenced_multi: %s has no owner (released, or its owner's session ended): "
                 "fence %llu holds no lease", in->req->mutex, (unsigned long long)in->req->fence);
    else if (simba__fence_judge("simba_zk_fenced_multi", in->req->mutex, in->req->fence, 1, stored, 0, words,
                                sizeof words) == SIMBA_OK)
        snprintf(words, sizeof words, "simba_zk_fenced_multi: refused"); /* not reached: stored differs */
    simba__zk_ins_end(zk, in, SIMBA_EFENCE, words);
}

static void simba__zkfw_multi(simba__zk *zk, simba__zk_ins *in) {
    simba__zkfw *fw = in->fw;
    const struct ACL_vector *acl = zk->creator_only ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
    size_t k = (size_t)fw->n + 1;
    size_t size = sizeof(simba__zkfw_call) + k * (sizeof(zoo_op_t) + sizeof(zoo_op_result_t) + sizeof(struct Stat)) +
                  k * SIMBA__ZKFW_PATH;
    simba__zkfw_call *c;
    simba__zk_op *op;
    int i, zrc;
    if (!simba__zk_usable(zk)) { simba__zk_ins_end(zk, in, SIMBA_ECONN, simba__zk_unusable_msg(zk)); return; }
    if (!(c = (simba__zkfw_call *)simba__zalloc(NULL, size))) { simba__zk_ins_end(zk, in, SIMBA_ENOMEM, "zookeeper: out of memory"); return; }
    c->count = (int)k;
    c->ops = (zoo_op_t *)(void *)(c + 1);
    c->res = (zoo_op_result_t *)(void *)(c->ops + k);
    c->stats = (struct Stat *)(void *)(c->res + k);
    c->bufs = (char (*)[SIMBA__ZKFW_PATH])(void *)(c->stats + k);
    if (!simba__zk_path(zk, c->check, in->mutex, in->node[in->at])) {
        SIMBA_FREE(c);
        simba__zk_ins_end(zk, in, SIMBA_EINVAL, "zookeeper: path too long");
        return;
    }
    zoo_check_op_init(&c->ops[0], c->check, in->owner_version);
    for (i = 0; i < fw->n; i++) {
        const simba_zk_fenced_op *o = &fw->ops[i];
        if (o->type == SIMBA_ZK_FENCED_CREATE)
            zoo_create_op_init(&c->ops[i + 1], o->path, o->data, o->data ? o->data_len : -1, acl,
                               (o->flags & SIMBA_ZK_FENCED_EPHEMERAL ? ZOO_EPHEMERAL : 0) |
                                   (o->flags & SIMBA_ZK_FENCED_SEQUENTIAL ? ZOO_SEQUENCE : 0),
                               c->bufs[i + 1], SIMBA__ZKFW_PATH);
        else if (o->type == SIMBA_ZK_FENCED_SET)
            zoo_set_op_init(&c->ops[i + 1], o->path, o->data, o->data ? o->data_len : -1, o->version, &c->stats[i + 1]);
        else
            zoo_delete_op_init(&c->ops[i + 1], o->path, o->version);
    }
    if (!(op = simba__zk_op_new(zk, NULL, SIMBA__ZK_SET))) {
        SIMBA_FREE(c);
        simba__zk_ins_end(zk, in, SIMBA_ENOMEM, "zookeeper: out of memory");
        return;
    }
    op->ins = in;
    op->fw_call = c;
    zrc = zoo_amulti(zk->sess->zh, c->count, c->ops, c->res, simba__zk_cb_void, op);
    zrc = simba__zk_op_issued(zk, op, zrc);
    if (zrc == ZMARSHALLINGERROR) op->ins = NULL; /* it may still come: nobody waits for it */
    if (zrc != ZOK) simba__zk_ins_end(zk, in, simba__zk_rc(zrc), zerror(zrc));
}

static void simba__zkfw_on_multi(simba__zk *zk, simba__zk_ins *in, simba__zk_op *op, int same) {
    simba__zkfw *fw = in->fw;
    simba__zkfw_call *c = (simba__zkfw_call *)op->fw_call;
    char words[320];
    int i, bad = -1;
    if (!same || simba__zk_rc(op->rc) == SIMBA_ECONN || simba__zk_rc(op->rc) == SIMBA_ECLOSED) {
        /* "session expired": the library never sent it on a live session; otherwise it may
           have been applied before the connection went (see FENCED WRITES) */
        in->fw_unknown = op->rc != ZSESSIONEXPIRED;
        snprintf(words, sizeof words, "simba_zk_fenced_multi: %s: the answer was lost, the multi may or may not have been "
                 "applied: read the data back to learn (a resend gets SIMBA_EFENCE once the fence holds no lease)",
                 zerror(same ? op->rc : ZCONNECTIONLOSS));
        simba__zk_ins_end(zk, in, same ? simba__zk_rc(op->rc) : SIMBA_ECONN, words);
        return;
    }
    for (i = 0; i < fw->n; i++) {
        fw->res[i].zrc = c->res[i + 1].err;
        fw->res[i].path = NULL;
        if (op->rc == ZOK && fw->ops[i].type == SIMBA_ZK_FENCED_CREATE) {
            simba__copy(fw->made[i], SIMBA__ZKFW_PATH, c->bufs[i + 1]);
            fw->res[i].path = fw->made[i];
        }
        if (bad < 0 && c->res[i + 1].err != ZOK && c->res[i + 1].err != ZRUNTIMEINCONSISTENCY) bad = i;
    }
    if (op->rc == ZOK) {
        fw->have_res = 1;
        simba__zk_ins_end(zk, in, SIMBA_OK, NULL);
    } else if (c->res[0].err != ZOK && c->res[0].err != ZRUNTIMEINCONSISTENCY) {
        /* the check: the tenure's node went (release, session end) or was rewritten */
        snprintf(words, sizeof words, "simba_zk_fenced_multi: the owner node of %s changed before the write (%s: released, "
                 "its session ended, or a new tenure): fence %llu holds no lease", in->req->mutex, zerror(c->res[0].err),
                 (unsigned long long)in->req->fence);
        simba__zk_ins_end(zk, in, SIMBA_EFENCE, words);
    } else {
        fw->have_res = 1;
        snprintf(words, sizeof words, "simba_zk_fenced_multi: operation %d (%s %.200s) failed: %s; nothing was written",
                 bad < 0 ? 0 : bad,
                 bad < 0 ? "?" : fw->ops[bad].type == SIMBA_ZK_FENCED_CREATE ? "create" : fw->ops[bad].type == SIMBA_ZK_FENCED_SET ? "set" : "delete",
                 bad < 0 ? "" : fw->ops[bad].path, zerror(bad < 0 ? op->rc : c->res[bad + 1].err));
        simba__zk_ins_end(zk, in, SIMBA_EBACKEND, words);
    }
}

static simba_result simba__zkfw_start(void *impl, simba_req *req) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_ins *in;
    if (!(in = (simba__zk_ins *)simba__zalloc(zk->loop, sizeof *in))) return SIMBA_ENOMEM;
    in->req = req;
    in->fw = (simba__zkfw *)simba_req_call_user(req);
    simba__copy(in->mutex, sizeof in->mutex, req->mutex);
    in->step = SIMBA__ZK_I_KIDS;
    if (zk->inss) zk->inss->prev = in;
    in->next = zk->inss;
    zk->inss = in;
    simba__zk_ins_call(zk, in);
    return SIMBA_OK;
}

/* The core's call is answered (or the loop is going: req NULL, nobody to tell). */
static void simba__zkfw_done(simba_req *req, simba_result rc, const char *errmsg, void *user) {
    simba__zkfw *fw = (simba__zkfw *)user;
    if (req && fw->cb) fw->cb(rc, fw->have_res ? fw->res : NULL, fw->n, errmsg, fw->user);
    simba_free(fw->loop, fw);
}

/* Why path cannot be written by a fenced multi, or NULL. */
static const char *simba__zkfw_path_bad(const simba__zk *zk, const char *path) {
    size_t n, rl = strlen(zk->root);
    const char *p;
    if (!path) return "is NULL";
    n = strlen(path);
    if (path[0] != '/' || n < 2) return "is not an absolute path below /";
    if (n > 512) return "is longer than 512 bytes";
    if (path[n - 1] == '/') return "ends with /";
    for (p = path; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) return "holds a control character";
    for (p = path; p; p = strchr(p + 1, '/'))
        if (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || !p[2] || (p[2] == '.' && (p[3] == '/' || !p[3])))))
            return "has an empty, . or .. component";
    if (strncmp(path, "/zookeeper", 10) == 0 && (!path[10] || path[10] == '/')) return "is ZooKeeper's own (/zookeeper)";
    if (strncmp(path, zk->root, rl) == 0 && (!path[rl] || path[rl] == '/')) return "is in the lock's own tree (the root)";
    return NULL;
}

/* ---- sessions ----------------------------------------------------------------------- */

static void simba__zk_drain(simba__zk *zk);
static void simba__zk_ack(simba__zk *zk);

/* By default the client resolves the hosts string again each time its I/O thread checks the
   socket (getaddrinfo: a socket, a netlink dump, /etc files, per wakeup); our hosts are
   numeric, so only a lost connection needs them read again. */
static void simba__zk_no_routine_lookup(zhandle_t *zh) {
    if (zh) zoo_set_servers_resolution_delay(zh, -1);
}

static int simba__zk_session_open(simba__zk *zk) {
    simba__zk_sess *s = (simba__zk_sess *)simba__zalloc(zk->loop, sizeof *s);
    if (!s) return SIMBA_ENOMEM;
    s->zk = zk;
    s->gen = ++zk->gen;
    s->zh = zookeeper_init2(zk->hosts, simba__zk_session_watcher, zk->timeout_ms, NULL, s, 0,
                            zk->zk_log ? zk->zk_log : simba__zk_log_silent);
    simba__zk_no_routine_lookup(s->zh);
    if (!s->zh) {
        int e = errno;
        simba_free(zk->loop, s);
        return simba__fail(zk->loop, e == EINVAL ? SIMBA_EINVAL : SIMBA_ESYS, "simba_zk: zookeeper_init(hosts %s) failed: %s",
                           zk->hosts, strerror(e));
    }
    if (zk->scheme) {
        simba__zk_op *op = simba__zk_op_new(zk, NULL, SIMBA__ZK_AUTH);
        zk->sess = s;
        if (op) {
            op->sess = s;
            simba__zk_op_issued(zk, op, zoo_add_auth(s->zh, zk->scheme, zk->auth, (int)strlen(zk->auth),
                                                     simba__zk_cb_void, op));
        }
    }
    zk->sess = s;
    zk->stats.sessions++;
    zk->stats.connected = 0;
    zk->stats.session_timeout_ms = zk->timeout_ms;
    return SIMBA_OK;
}

/* 1 when fd is a blocking stream socket with TCP_NODELAY (the library sets it on its probe;
   a program's own blocking connection to the server, such as a proxy's, seldom has it)
   connected to one of our servers. */
static int simba__zk_is_probe(const simba__zk *zk, int fd) {
    struct sockaddr_storage peer;
    socklen_t pl = sizeof peer, tl;
    int type = 0, nodelay = 0, flags, i;
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_NONBLOCK)) return 0;
    tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) return 0;
    tl = sizeof nodelay;
    if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &tl) != 0 || !nodelay) return 0;
    memset(&peer, 0, sizeof peer);
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0) return 0;
    for (i = 0; i < zk->naddrs; i++) {
        const struct sockaddr_storage *a = &zk->addrs[i];
        if (a->ss_family != peer.ss_family) continue;
        if (a->ss_family == AF_INET) {
            const struct sockaddr_in *x = (const struct sockaddr_in *)(const void *)a;
            const struct sockaddr_in *y = (const struct sockaddr_in *)(const void *)&peer;
            if (x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr) return 1;
        } else if (a->ss_family == AF_INET6) {
            const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)(const void *)a;
            const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)(const void *)&peer;
            if (x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0) return 1;
        }
    }
    return 0;
}

/* libzookeeper_mt 3.8 in read-only mode probes the server for a read-write one with a
   blocking recv whose SO_RCVTIMEO it sets from an uninitialised timeval (EDOM: no timeout),
   so its I/O thread, and zookeeper_close joining it, can wait as long as a foreign or hung
   server stays silent. Shutting down the probe socket (the session's own is non-blocking)
   ends that recv. The I/O thread starts a probe whenever it is due until it sees the
   close, so while destroy waits for a zookeeper_close it shuts probes down every 100 ms.
   The socket is local to the library's I/O thread and its API names no descriptor but the
   session's, so we look among the open ones: poll(2) with no events tells them from closed
   ones, a batch a call, without touching a descriptor the library may be closing. */
static void simba__zk_unblock_probe(const simba__zk *zk) {
    struct pollfd batch[256];
    struct rlimit rl;
    int top = 1 << 20, base, i; /* socket(2) returns no descriptor at or above the soft limit */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)top)
        top = (int)rl.rlim_cur;
    for (base = 0; base < top; base += 256) {
        int n = top - base < 256 ? top - base : 256;
        for (i = 0; i < n; i++) {
            batch[i].fd = base + i;
            batch[i].events = 0;
            batch[i].revents = 0;
        }
        if (poll(batch, (nfds_t)n, 0) < 0)
            for (i = 0; i < n; i++) batch[i].revents = 0; /* then ask each one */
        for (i = 0; i < n; i++)
            if (!(batch[i].revents & POLLNVAL) && simba__zk_is_probe(zk, base + i)) shutdown(base + i, SHUT_RDWR);
    }
}

/* zookeeper_close, late in test builds that ask for it */
static void simba__zk_close_handle(zhandle_t *zh) {
#ifdef SIMBA_ZK_TEST_FAULTS
    if (simba_zk_test_close_delay_ms > 0) {
        struct timespec ts;
        ts.tv_sec = simba_zk_test_close_delay_ms / 1000;
        ts.tv_nsec = (long)(simba_zk_test_close_delay_ms % 1000) * 1000000L;
        nanosleep(&ts, NULL);
    }
#endif
    zookeeper_close(zh);
}

/* A closer thread: zookeeper_init2 (its threads, an address lookup) and zookeeper_close
   (joining the old handle's threads) take milliseconds that the caller's poll must not wait
   for. It makes the next session's handle first, then closes the old one, and reports each. */
static void *simba__zk_closer_main(void *arg) {
    simba__zk_sess *s = (simba__zk_sess *)arg;
    simba__zk *zk = s->zk;
    if (s->next_sess) {
        simba__zk_sess *ns = s->next_sess;
        zhandle_t *zh = zookeeper_init2(zk->hosts, simba__zk_session_watcher, zk->timeout_ms, NULL, ns, 0,
                                        zk->zk_log ? zk->zk_log : simba__zk_log_silent);
        int e = errno;
        simba__zk_no_routine_lookup(zh);
        pthread_mutex_lock(&zk->mu);
        ns->zh_new = zh;
        ns->init_errno = e;
        ns->inited = 1;
        simba__zk_signal_locked(zk);
        pthread_mutex_unlock(&zk->mu);
    }
    simba__zk_close_handle(s->zh);
    pthread_mutex_lock(&zk->mu);
    s->closed = 1;
    simba__zk_signal_locked(zk);
    pthread_mutex_unlock(&zk->mu);
    return NULL;
}

/* Frees what closed handles leave: calls whose completion will never come (the handle is
   closed and they were not queued), then the session record once no call names it.
   wait: wait for closers still running (destroy). */
static void simba__zk_reap(simba__zk *zk, int wait) {
    simba__zk_sess **pp = &zk->zombies;
    while (*pp) {
        simba__zk_sess *s = *pp;
        simba__zk_op *op, *next;
        int closed, left = 0, waits = 0;
        pthread_mutex_lock(&zk->mu);
        closed = s->closed;
        pthread_mutex_unlock(&zk->mu);
        if (!closed && !wait) {
            pp = &s->znext;
            continue;
        }
        while (!closed) { /* destroy: the detached closer signals the pipe when it is done */
            struct pollfd pfd;
            pfd.fd = zk->pipe_r;
            pfd.events = POLLIN;
            pfd.revents = 0;
            poll(&pfd, 1, 10);
            simba__zk_ack(zk);
            /* a read-only probe started after the last shutdown (or before the read-only
               event reached ro_seen) blocks the close's join: every tenth wait, about 100 ms */
            if (++waits % 10 == 0) simba__zk_unblock_probe(zk);
            pthread_mutex_lock(&zk->mu);
            closed = s->closed;
            pthread_mutex_unlock(&zk->mu);
        }
        s->closer = 0; /* detached: it touches nothing of ours after saying closed */
        pthread_mutex_lock(&zk->mu); /* posted is written under mu */
        for (op = zk->outstanding; op; op = next) {
            next = op->onext;
            if (op->sess != s) continue;
            if (op->posted) {
                left++; /* queued: the next drain frees it */
                continue;
            }
            simba__zk_op_unlink(zk, op);
            simba__zk_op_free(zk, op);
        }
        pthread_mutex_unlock(&zk->mu);
        if (left) {
            pp = &s->znext;
            continue;
        }
        *pp = s->znext;
        simba_free(zk->loop, s);
    }
}

/* Closes the current session: its requests fail now, and its handle is closed by a closer
   thread (async) or here (no thread could be started), joining the library's threads. A
   closer thread also makes next_sess's handle; returns 1 when it took next_sess. */
static int simba__zk_session_close(simba__zk *zk, int async, simba__zk_sess *next_sess) {
    simba__zk_sess *s = zk->sess;
    simba__zk_op *op, *next;
    simba__zk_mtx *m;
    simba__zk_job *job;
    int ro;
    if (!s) return 0;
    zk->sess = NULL; /* from here on, results of s count as lost */
    pthread_mutex_lock(&zk->mu);
    ro = s->ro_seen;
    pthread_mutex_unlock(&zk->mu);
    if (ro) simba__zk_unblock_probe(zk);
    zk->ping_op = NULL;
    zk->nfly = 0;
    zk->root_made = 0;
    while ((job = zk->bq_ready) != NULL || (job = zk->bq_fly) != NULL || (job = zk->bq_wait) != NULL || (job = zk->park_head[0]) != NULL ||
           (job = zk->park_head[1]) != NULL)
        simba__zk_fail(zk, job, zk->closing ? SIMBA_ECLOSED : SIMBA_ECONN, "zookeeper session lost");
    for (op = zk->outstanding; op; op = next) { /* their answers no longer count: fail them now */
        next = op->onext;
        if (op->sess == s && op->job) {
            simba__zk_fail(zk, op->job, zk->closing ? SIMBA_ECLOSED : SIMBA_ECONN, "zookeeper session lost");
            next = zk->outstanding; /* ending a job may start others: start over */
        }
    }
    for (m = zk->mtxs; m; m = m->next) {
        simba__zk_cont *c;
        m->pushed = 0;
        m->armed = 0;
        m->own_valid = 0;
        for (c = m->conts; c; c = c->next) { /* the session's nodes and watches are gone */
            c->node[0] = 0;
            c->czxid = 0;
            c->fence = 0;
            c->watch_pred[0] = 0;
            c->self_watch = 0;
            c->child_watch = 0;
            c->dirty = 0;
        }
    }
    s->znext = zk->zombies;
    zk->zombies = s;
    s->next_sess = async ? next_sess : NULL;
    if (async && s->zh && pthread_create(&s->th, NULL, simba__zk_closer_main, s) == 0) {
        pthread_detach(s->th); /* never joined: a join would wait in the poll for it to be scheduled */
        s->closer = 1;
        zk->stats.closer_threads++;
        return next_sess != NULL;
    }
    s->next_sess = NULL;
    if (s->zh) simba__zk_close_handle(s->zh);
    pthread_mutex_lock(&zk->mu);
    s->closed = 1;
    pthread_mutex_unlock(&zk->mu);
    simba__zk_drain(zk);
    simba__zk_reap(zk, 0);
    return 0;
}

/* The closer thread made the pending session's handle: use it (or try again later). */
static void simba__zk_adopt(simba__zk *zk, int64_t now) {
    simba__zk_sess *s = zk->sess;
    zhandle_t *zh;
    int inited, e;
    if (!s || !s->pending) return;
    pthread_mutex_lock(&zk->mu);
    inited = s->inited;
    zh = s->zh_new;
    e = s->init_errno;
    pthread_mutex_unlock(&zk->mu);
    if (!inited) return;
    s->pending = 0;
    if (!zh) {
        simba_log(zk->loop, SIMBA_LOG_WARN, "simba_zk: zookeeper_init(hosts %s) failed: %s", zk->hosts, strerror(e));
        zk->sess = NULL;
        simba_free(zk->loop, s);
        zk->reopen_at = simba__add(now, simba__zk_reopen_in(zk));
        return;
    }
    s->zh = zh;
    if (zk->scheme) {
        simba__zk_op *op = simba__zk_op_new(zk, NULL, SIMBA__ZK_AUTH);
        if (op)
            simba__zk_op_issued(zk, op, zoo_add_auth(s->zh, zk->scheme, zk->auth, (int)strlen(zk->auth),
                                                     simba__zk_cb_void, op));
    }
}

/* Gives every idle contender its clean-up (a released one's node must go): on a new
   connection, and when a refused clean-up is due again (zk->idle_at). */
static void simba__zk_idle_all(simba__zk *zk) {
    simba__zk_mtx *m, *mn;
    for (m = zk->mtxs; m; m = mn) {
        simba__zk_cont *c, *cn;
        mn = m->next;
        for (c = m->conts; c; c = cn) {
            cn = c->next;
            if (!c->q_head) simba__zk_cont_idle(zk, c);
        }
    }
}

/* A read-only server can neither create nor delete nodes, and a garbage handshake can
   claim read-only too: no grant from it; the library keeps looking for a r/w one. */
static void simba__zk_on_readonly(simba__zk *zk) {
    simba__zk_sess *s = zk->sess;
    simba__zk_job *job, *next;
    if (!s->readonly) simba_log(zk->loop, SIMBA_LOG_WARN, "simba_zk: %s (%s)", SIMBA__ZK_RO_MSG, zk->hosts);
    s->readonly = 1;
    if (s->connected) {
        s->connected = 0;
        zk->stats.connected = 0;
        simba__zk_event(zk, SIMBA_EV_DISCONNECTED, NULL, NULL, NULL);
    }
    for (job = zk->jobs; job; job = next) { /* nothing will answer them usefully */
        next = job->next;
        if (job->req) {
            simba_reply r;
            simba__zk_reply(zk, job, simba__reply_fail(&r, SIMBA_ECONN, SIMBA__ZK_RO_MSG));
            if (!job->op) {
                simba__zk_job_end(zk, job);
                next = zk->jobs;
            }
        }
    }
}

/* The session is gone (expired, or its credentials refused): owners step down; a new
   session is made off the poll (the closer thread makes the new handle too). */
/* The session expired: the tenures of its nodes are over for good. */
static void simba__zk_note_dead(simba__zk *zk) {
    simba__zk_mtx *m;
    simba__zk_cont *c;
    for (m = zk->mtxs; m; m = m->next)
        for (c = m->conts; c; c = c->next)
            if (c->fence > 0) zk->dead_fence[zk->dead_next++ % 8] = c->fence;
}

static void simba__zk_on_expired(simba__zk *zk, int state, int64_t now) {
    simba__zk_sess *s = zk->sess, *ns;
    simba_log(zk->loop, SIMBA_LOG_WARN, "simba_zk: session %s; opening a new one",
              state == ZOO_EXPIRED_SESSION_STATE ? "expired" : "failed authentication");
    s->dead = 1;
    s->connected = 0;
    zk->stats.connected = 0;
    if (state == ZOO_EXPIRED_SESSION_STATE) simba__zk_note_dead(zk);
    simba__zk_event(zk, SIMBA_EV_LOST, NULL, NULL, NULL);
    if (state == ZOO_AUTH_FAILED_STATE) {
        simba__zk_session_close(zk, 1, NULL);
        zk->reopen_at = simba__add(now, simba__zk_reopen_in(zk)); /* credentials will not get better by hammering */
        return;
    }
    ns = (simba__zk_sess *)simba_alloc(zk->loop, sizeof *ns);
    if (ns) {
        memset(ns, 0, sizeof *ns);
        ns->zk = zk;
        ns->gen = ++zk->gen;
        ns->pending = 1;
    }
    if (simba__zk_session_close(zk, 1, ns)) {
        zk->sess = ns;
        zk->stats.sessions++;
        zk->stats.connected = 0;
        zk->stats.session_timeout_ms = zk->timeout_ms;
        return;
    }
    if (ns) simba_free(zk->loop, ns);
    if (simba__zk_session_open(zk) != SIMBA_OK) zk->reopen_at = simba__add(now, simba__zk_reopen_in(zk));
}

static void simba__zk_on_session(simba__zk *zk, int state, int64_t now) {
    simba__zk_sess *s = zk->sess;
    if (state == ZOO_READONLY_STATE) {
        simba__zk_on_readonly(zk);
    } else if (state == ZOO_CONNECTED_STATE) {
        const clientid_t *id;
        int first = !s->ever_connected && zk->stats.sessions == 1;
        s->readonly = 0;
        if (s->connected) return;
        s->connected = 1;
        s->ever_connected = 1;
        zk->stats.connected = 1;
        zk->reopen_backoff = zk->idle_backoff = 0;
        zk->stats.session_timeout_ms = zoo_recv_timeout(s->zh);
        id = zoo_client_id(s->zh);
        if (id) zk->stats.session_id = id->client_id;
        simba__zk_idle_all(zk); /* released contenders whose delete could not go out: now it can */
        {
            simba__zk_op *op = simba__zk_op_new(zk, NULL, SIMBA__ZK_SCHEMA);
            if (op) simba__zk_op_issued(zk, op, zoo_aget(s->zh, zk->root, 0, simba__zk_cb_get, op));
        }
        if (!first) simba__zk_event(zk, SIMBA_EV_RESET, NULL, NULL, NULL);
    } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
        if (!s->connected) return;
        s->connected = 0;
        zk->stats.connected = 0;
        simba__zk_event(zk, SIMBA_EV_DISCONNECTED, NULL, NULL, NULL);
    } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        simba__zk_on_expired(zk, state, now);
    }
}

static void simba__zk_on_path(simba__zk *zk, int type, const char *path) {
    size_t rl = strlen(zk->root);
    const char *rest, *slash;
    char name[SIMBA_NAME_MAX + 1];
    simba__zk_mtx *m;
    if (strncmp(path, zk->root, rl) != 0 || path[rl] != '/') return;
    rest = path + rl + 1;
    slash = strchr(rest, '/');
    if ((size_t)(slash ? slash - rest : (ptrdiff_t)strlen(rest)) > SIMBA_NAME_MAX) return;
    simba__copy(name, (size_t)(slash ? slash - rest : (ptrdiff_t)strlen(rest)) + 1, rest);
    m = simba__zk_mtx_find(zk, name, 0);
    if (!m) return;
    if (!slash) { /* child list changed, or the mutex node appeared: observers' and semaphore waiters' watches */
        simba__zk_cont *c;
        if ((type == ZOO_CHILD_EVENT || type == ZOO_CREATED_EVENT) && m->watchers > 0) simba__zk_refresh(zk, m);
        for (c = m->conts; type == ZOO_CHILD_EVENT && c; c = c->next) {
            if (!c->child_watch) continue;
            c->child_watch = 0;
            if (c->fence == 0) simba__zk_event(zk, SIMBA_EV_RELEASED, m->name, SIMBA__ZK_CID(c), NULL);
        }
        return;
    }
    if (type == ZOO_CHANGED_EVENT || type == ZOO_DELETED_EVENT) { /* watches on that node are spent */
        simba__zk_cont *c;
        const char *node = slash + 1;
        if (strcmp(m->own_node, node) == 0) m->own_valid = 0;
        for (c = m->conts; c; c = c->next)
            if (c->self_watch && strcmp(c->node, node) == 0) c->self_watch = 0;
    }
    if (type == ZOO_CHANGED_EVENT) { /* a new tenure wrote its fence */
        simba__zk_cont *c;
        const char *node = slash + 1;
        if (m->watchers > 0) simba__zk_refresh(zk, m);
        /* that write also spent the exists watch of the waiter behind it: set it again */
        for (c = m->conts; c; c = c->next) {
            char p[SIMBA__ZK_PATH_MAX];
            simba__zk_op *op;
            if (!c->watch_pred[0] || strcmp(c->watch_pred, node) != 0 || !simba__zk_usable(zk) ||
                !simba__zk_path(zk, p, m->name, node))
                continue;
            op = simba__zk_op_new(zk, NULL, SIMBA__ZK_REWATCH);
            if (!op) continue;
            simba__copy(op->mutex, sizeof op->mutex, m->name);
            simba__copy(op->name, sizeof op->name, node);
            simba__copy(op->data, sizeof op->data, SIMBA__ZK_CID(c));
            simba__zk_op_issued(zk, op, zoo_awexists(zk->sess->zh, p, simba__zk_node_watcher, zk->sess,
                                                     simba__zk_cb_stat, op));
        }
        return;
    }
    if (type == ZOO_DELETED_EVENT) {
        simba__zk_cont *c;
        const char *node = slash + 1;
        for (c = m->conts; c; c = c->next) {
            simba__zk_job *j = c->q_head;
            if (c->watch_pred[0] && strcmp(c->watch_pred, node) == 0) {
                c->watch_pred[0] = 0;
                simba__zk_event(zk, SIMBA_EV_RELEASED, m->name, SIMBA__ZK_CID(c), NULL);
            } else if (j && j->op && j->op->kind == SIMBA__ZK_EXISTS && strcmp(j->pred, node) == 0) {
                /* events are handled before answers: the exists that set this watch is queued */
                j->pred_gone = 1;
                simba__zk_event(zk, SIMBA_EV_RELEASED, m->name, SIMBA__ZK_CID(c), NULL);
            }
        }
    }
}

/* Re-arms the wake-up before the queues are looked at: whatever is queued after this
   writes a new byte, so a caller sleeping in poll(2) on the pipe cannot miss it. */
static void simba__zk_ack(simba__zk *zk) {
    char buf[64];
    pthread_mutex_lock(&zk->mu);
    if (zk->signalled) { /* at most one byte is in the pipe: written when signalled was 0 */
        while (read(zk->pipe_r, buf, sizeof buf) > 0) {
        }
        zk->signalled = 0;
    }
    pthread_mutex_unlock(&zk->mu);
}

/* Takes the finished calls the ZooKeeper threads queued. */
static simba__zk_op *simba__zk_take(simba__zk *zk, int *overflow) {
    simba__zk_op *done;
    pthread_mutex_lock(&zk->mu);
    done = zk->done_head;
    zk->done_head = zk->done_tail = NULL;
    *overflow = zk->overflow;
    zk->overflow = 0;
    pthread_mutex_unlock(&zk->mu);
    return done;
}

/* Handles finished calls that simba__zk_take() took; with `budgeted`, as many as the poll's
   budget allows (W4: up to 1.8 ms of answers in one poll): the rest go back to the front of
   the done queue, in order, for the next poll, which the core asks for at once. Events
   that arrive meanwhile are then handled before them, as events are before any answer
   taken with them (see simba__zk_process). */
static void simba__zk_handle(simba__zk *zk, simba__zk_op *done, int overflow, int budgeted) {
    if (overflow) { /* dropped events may have spent any watch: no answer may rely on one */
        simba__zk_mtx *m;
        for (m = zk->mtxs; m; m = m->next) {
            simba__zk_cont *c;
            m->own_valid = 0;
            for (c = m->conts; c; c = c->next) c->self_watch = 0;
        }
    }
    while (done) {
        simba__zk_op *next;
        if (budgeted && simba_poll_budget_spent(zk->loop)) {
            simba__zk_op *last = done;
            while (last->qnext) last = last->qnext;
            pthread_mutex_lock(&zk->mu);
            last->qnext = zk->done_head;
            if (!zk->done_head) zk->done_tail = last;
            zk->done_head = done;
            pthread_mutex_unlock(&zk->mu);
            break;
        }
        next = done->qnext;
        simba__zk_on_op(zk, done);
        done = next;
    }
    if (overflow && !zk->closing) {
        /* events were dropped: everybody re-checks now, observers re-read */
        simba__zk_mtx *m;
        simba__zk_event(zk, SIMBA_EV_RESET, NULL, NULL, NULL);
        for (m = zk->mtxs; m; m = m->next)
            if (m->watchers > 0) simba__zk_refresh(zk, m);
    }
}

static void simba__zk_drain(simba__zk *zk) {
    int overflow;
    simba__zk_op *done = simba__zk_take(zk, &overflow);
    simba__zk_handle(zk, done, overflow, 0);
}

static void simba__zk_events(simba__zk *zk, int64_t now) {
    for (;;) {
        simba__zk_evt *e = &zk->evt;
        int have = 0;
        if (zk->sess && zk->sess->pending) return; /* its events wait until its handle is ours */
        pthread_mutex_lock(&zk->mu);
        if (zk->ring_len) {
            *e = zk->ring[zk->ring_head];
            zk->ring_head = (zk->ring_head + 1) % SIMBA__ZK_RING;
            zk->ring_len--;
            have = 1;
        }
        pthread_mutex_unlock(&zk->mu);
        if (!have) return;
        if (!zk->sess || e->gen != zk->sess->gen || zk->closing) continue; /* an older session's */
        if (e->type == ZOO_SESSION_EVENT) simba__zk_on_session(zk, e->state, now);
        else simba__zk_on_path(zk, e->type, e->path);
    }
}

/* ---- the vtable ------------------------------------------------------------------------ */

/* Fenced writes that waited for a session (simba__zk_ins_end): asked again once one is
   usable, ended when their time is up. */
static void simba__zk_ins_resume(simba__zk *zk, int64_t now) {
    simba__zk_ins *in, *next;
    for (in = zk->inss; in; in = next) {
        next = in->next;
        if (in->parked != 1) continue;
        if (simba__zk_usable(zk) && zk->sess->connected) {
            in->parked = 2;
            simba__zk_ins_call(zk, in);
        } else if (now >= in->parked_until) {
            in->parked = 2;
            simba__zk_ins_end(zk, in, SIMBA_ECONN, "no usable zookeeper session: the fenced multi was not sent, nothing was written");
        }
    }
}

/* Starts parked jobs while there is room, started ones and renewals first, and while the
   poll's budget lasts (each start is a call into the client library: W4 spent 0.5 ms of
   one poll here after its budget was gone); the rest start in the next poll. */
static void simba__zk_unpark(simba__zk *zk) {
    int q;
    for (q = 0; q < 2; q++) {
        simba__zk_job *job;
        while (zk->nfly < SIMBA__ZK_FLY_MAX && (job = zk->park_head[q]) != NULL) {
            if (simba_poll_budget_spent(zk->loop)) return;
            simba__zk_park_del(zk, job);
            simba__zk_job_run(zk, job);
        }
    }
}

static simba_result simba__zk_submit(void *impl, simba_req *req) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_job *job;
    simba__zk_mtx *m;
    simba__zk_cont *c = NULL;
    if (!zk || !req || zk->closing) return SIMBA_EINVAL;
    if (simba_name_check(req->mutex) != SIMBA_OK) return SIMBA_EINVAL;
    if (req->op != SIMBA_OP_ACQUIRE && req->op != SIMBA_OP_RELEASE && req->op != SIMBA_OP_READ &&
        req->op != SIMBA_OP_SET_VALUE && req->op != SIMBA_OP_YIELD)
        return SIMBA_EINVAL;
    if ((req->op == SIMBA_OP_ACQUIRE || req->op == SIMBA_OP_SET_VALUE) &&
        (req->value_len > SIMBA_VALUE_MAX || (req->value_len && !req->value)))
        return SIMBA_EINVAL;
    if (req->op != SIMBA_OP_READ && simba_id_check(req->contender) != SIMBA_OK) return SIMBA_EINVAL;
    zk->stats.requests++;
    if (req->op == SIMBA_OP_ACQUIRE && (req->permits > SIMBA_PERMITS_MAX || (req->shared && req->permits > 1)))
        return SIMBA_EINVAL; /* the core checks these */
    if (!simba__zk_usable(zk)) {
        simba_req_fail(req, SIMBA_ECONN, zk->sess && zk->sess->readonly ? SIMBA__ZK_RO_MSG : "no usable zookeeper session (reopening)");
        return SIMBA_OK;
    }
    if (zk->schema_bad) {
        simba_req_fail(req, SIMBA_EBACKEND, zk->schema_err);
        return SIMBA_OK;
    }
    m = simba__zk_mtx_find(zk, req->mutex, req->op == SIMBA_OP_ACQUIRE || req->op == SIMBA_OP_READ);
    if (m && req->op != SIMBA_OP_READ) c = simba__zk_cont_find(zk, m, req->contender, req->op == SIMBA_OP_ACQUIRE);
    if (req->op == SIMBA_OP_RELEASE && !c) { /* nothing of ours there */
        simba_reply r;
        simba_req_done(req, simba__reply_none(&r));
        return SIMBA_OK;
    }
    if ((req->op == SIMBA_OP_SET_VALUE || req->op == SIMBA_OP_YIELD) && !c) {
        simba_req_fail(req, SIMBA_EFENCE, "zookeeper: the contender holds no node of this mutex");
        return SIMBA_OK;
    }
    if (!m || (req->op == SIMBA_OP_ACQUIRE && !c)) {
        if (m) simba__zk_mtx_gc(zk, m);
        return SIMBA_ENOMEM;
    }
    /* A waiter's process follows the owner as an observer's does (one refresh, whose watches
       push each new tenure and value to every service of the mutex here), not only the
       release to the head through its predecessor's watch. */
    if (req->op == SIMBA_OP_ACQUIRE && !req->renew && req->permits <= 1 && !req->shared && !m->armed && m->watchers > 0)
        simba__zk_refresh(zk, m);
    job = simba__zk_job_new(zk, req->op, req, c, m);
    if (!job) {
        if (c && !c->q_head) simba__zk_cont_idle(zk, c);
        else simba__zk_mtx_gc(zk, m);
        return SIMBA_ENOMEM;
    }
    if (c) {
        if (req->op == SIMBA_OP_ACQUIRE || req->op == SIMBA_OP_RELEASE) c->want_gone = req->op == SIMBA_OP_RELEASE;
        if (req->op == SIMBA_OP_ACQUIRE) c->mode = req->shared ? SIMBA__ZK_READER : req->permits > 1 ? req->permits : SIMBA__ZK_EXCL;
        if (c->q_tail) { /* one job per contender at a time; this one waits its turn */
            c->q_tail->cnext = job;
            c->q_tail = job;
            return SIMBA_OK;
        }
        c->q_head = c->q_tail = job;
    }
    simba__zk_job_run(zk, job);
    return SIMBA_OK;
}

static int simba__zk_fds(void *impl, struct pollfd *out, int cap) {
    simba__zk *zk = (simba__zk *)impl;
    if (cap >= 1 && out) {
        out[0].fd = zk->pipe_r;
        out[0].events = POLLIN;
        out[0].revents = 0;
    }
    return 1;
}

/* When the session must be touched next (see LEASE): T/6 after the last call, while any
   mutex is known and the session is connected; INT64_MAX otherwise. */
static int64_t simba__zk_touch_at(const simba__zk *zk) {
    if (!zk->nmtx || !simba__zk_usable(zk) || !zk->sess->connected) return INT64_MAX;
    return simba__add(zk->sent_at, simba__max(1, simba__zk_timeout(zk) / 6));
}

/* The client library pings only after T/3 without a call; the leader hears of a touch at
   its next ping of our server. A sync now and then keeps what the leader knows recent. */
static void simba__zk_keepalive(simba__zk *zk, int64_t now) {
    simba__zk_op *op;
    int zrc;
    if (now < simba__zk_touch_at(zk)) return;
    op = simba__zk_op_new(zk, NULL, SIMBA__ZK_SYNC);
    zrc = op ? simba__zk_op_issued(zk, op, zoo_async(zk->sess->zh, zk->root, simba__zk_cb_string, op)) : ZSYSTEMERROR;
    if (zrc == ZOK) {
        zk->stats.keepalives++;
    } else { /* refused (the library is reconnecting, or no memory): said, and not again at once */
        snprintf(zk->be->errmsg, sizeof zk->be->errmsg, "zookeeper: keepalive sync: %s",
                 op ? zerror(zrc) : "out of memory");
        zk->sent_at = now;
    }
}

/* >>process */
static void simba__zk_process(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_job *job;
    simba__zk_op *ops;
    int overflow;
    (void)ready;
    (void)flags;
    (void)n; /* the queue is checked on every call: it costs one uncontended lock */
    if (zk->closing) return;
    simba__zk_ack(zk);
    if (zk->zombies) simba__zk_reap(zk, 0);
    simba__zk_adopt(zk, now);
    simba__zk_answer_ready(zk); /* what the last poll's budget left */
    /* answers taken first, events handled first: every event that the ZooKeeper threads
       delivered before an answer is handled before it (a watched node's deletion before
       a session check that came after it) */
    ops = simba__zk_take(zk, &overflow);
    simba__zk_events(zk, now);
    simba__zk_handle(zk, ops, overflow, 1);
    simba__zk_unpark(zk);
    simba__zk_ins_resume(zk, now);
    if (zk->idle_at <= now && !simba_poll_budget_spent(zk->loop)) {
        zk->idle_at = INT64_MAX;
        simba__zk_idle_all(zk);
    }
    if (!zk->sess && zk->reopen_at <= now) {
        zk->reopen_at = INT64_MAX;
        if (simba__zk_session_open(zk) != SIMBA_OK) zk->reopen_at = simba__add(now, simba__zk_reopen_in(zk));
    }
    while ((job = zk->thead) != NULL && job->deadline <= now) {
        simba_reply r;
        /* leaves the FIFO */
        simba__zk_reply(zk, job, simba__reply_fail(&r, SIMBA_ETIMEDOUT, "zookeeper did not answer in time"));
        if (!job->op) simba__zk_job_end(zk, job); /* still waiting for its turn: nothing in flight */
    }
    simba__zk_ping(zk, now);
    simba__zk_keepalive(zk, now);
}

static int64_t simba__zk_deadline(void *impl) {
    simba__zk *zk = (simba__zk *)impl;
    int64_t d = zk->sess ? INT64_MAX : zk->reopen_at;
    if (zk->thead && zk->thead->deadline < d) d = zk->thead->deadline;
    if (zk->idle_at < d) d = zk->idle_at;
    if (zk->bq_wait && !zk->ping_op && zk->ping_at < d) d = zk->ping_at;
    return simba__min(d, simba__zk_touch_at(zk));
}

static simba_result simba__zk_watch(void *impl, const char *mutex) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_mtx *m;
    if (!zk || simba_name_check(mutex) != SIMBA_OK) return SIMBA_EINVAL;
    m = simba__zk_mtx_find(zk, mutex, 1);
    if (!m) return SIMBA_ENOMEM;
    m->watchers++;
    return SIMBA_OK;
}

static void simba__zk_unwatch(void *impl, const char *mutex) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_mtx *m;
    simba__zk_cont *c, *cn;
    if (!zk || simba_name_check(mutex) != SIMBA_OK) return;
    m = simba__zk_mtx_find(zk, mutex, 0);
    if (!m) return;
    if (m->watchers > 0) m->watchers--;
    if (m->watchers > 0) return;
    /* no service of this backend uses the mutex any more: none of our nodes may stay */
    for (c = m->conts; c; c = cn) {
        cn = c->next;
        c->want_gone = 1;
        if (!c->q_head) simba__zk_cont_idle(zk, c);
    }
    m = simba__zk_mtx_find(zk, mutex, 0);
    if (m) simba__zk_mtx_gc(zk, m);
}

/* Lets the calls in flight (the releases just sent) be answered before zookeeper_close:
   the library fakes a ZCLOSING answer for each call still pending there and queues it for
   its completion thread, which may have stopped already (libzookeeper_mt 3.8 leaks them). */
static void simba__zk_settle(simba__zk *zk) {
    int64_t start = simba_now(zk->loop), end = start + SIMBA__ZK_SETTLE_MS;
    uint64_t seen = zk->stats.answers;
    for (;;) {
        simba__zk_op *op;
        simba__zk_mtx *m;
        struct pollfd pfd;
        int64_t left = end - simba_now(zk->loop);
        /* our nodes go now: a release still queued behind a renewal would never be sent */
        for (m = zk->mtxs; m; m = m->next) {
            simba__zk_cont *c;
            for (c = m->conts; c; c = c->next) {
                char path[SIMBA__ZK_PATH_MAX];
                if (!c->node[0] || !simba__zk_path(zk, path, m->name, c->node)) continue;
                c->node[0] = 0;
                c->czxid = 0;
                op = simba__zk_op_new(zk, NULL, SIMBA__ZK_DELETE);
                if (op) simba__zk_op_issued(zk, op, zoo_adelete(zk->sess->zh, path, -1, simba__zk_cb_void, op));
            }
        }
        for (op = zk->outstanding; op; op = op->onext)
            if (op->sess == zk->sess && !op->orphan) break;
        if (!op || left <= 0) return;
        pfd.fd = zk->pipe_r;
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) return;
        simba__zk_ack(zk);
        simba__zk_drain(zk); /* closing: answers are settled, nothing new is issued */
        if (zk->stats.answers != seen) { /* a live server answering thousands of deletes: keep waiting */
            int64_t now = simba_now(zk->loop);
            seen = zk->stats.answers;
            end = now + SIMBA__ZK_SETTLE_MS < start + 10 * SIMBA__ZK_SETTLE_MS ? now + SIMBA__ZK_SETTLE_MS
                                                                                : start + 10 * SIMBA__ZK_SETTLE_MS;
        }
    }
}

#ifdef SIMBA_ZK_TEST_FAULTS
#include <sys/time.h>
/* declared by the client library's header only without THREADED; the library has it */
extern int zookeeper_interest(zhandle_t *zh, int *fd, int *interest, struct timeval *tv);
#endif

/* Test builds: a muted backend freed is a killed process. Its connection is shut down and
   the handle closed at once, so the close request never reaches the server, and our nodes
   are not deleted: the server ends the session after its timeout, as after a kill -9. */
static void simba__zk_test_killed(simba__zk *zk) {
#ifdef SIMBA_ZK_TEST_FAULTS
    int fd = -1, interest = 0;
    struct timeval tv;
    if (!zk->test_mute || !zk->sess || !zk->sess->zh) return;
    if (zookeeper_interest(zk->sess->zh, &fd, &interest, &tv) == ZOK && fd >= 0) shutdown(fd, SHUT_RDWR);
    zookeeper_close(zk->sess->zh);
    zk->sess->zh = NULL;
#else
    (void)zk;
#endif
}

/* >>close */
static void simba__zk_destroy(void *impl) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_mtx *m, *mn;
    if (!zk) return;
    zk->closing = 1;
    simba__zk_reap(zk, 1); /* a closer thread may still be making the next handle */
    simba__zk_adopt(zk, simba_now(zk->loop));
    simba__zk_test_killed(zk);
    if (zk->sess && zk->sess->zh && zk->sess->connected && !zk->sess->dead) simba__zk_settle(zk);
    /* closing the session deletes our ephemeral nodes on the server at once; a closer thread
       closes it, so that the wait below can end a read-only probe that blocks the close */
    simba__zk_session_close(zk, 1, NULL);
    simba__zk_reap(zk, 1); /* waits for closers still running */
    simba__zk_drain(zk);
    simba__zk_reap(zk, 1);
    while (zk->outstanding) { /* e.g. calls of sessions closed earlier: none expected */
        simba__zk_op *op = zk->outstanding;
        op->rc = ZCLOSING;
        simba__zk_on_op(zk, op);
    }
    while (zk->jobs) {
        simba__zk_job *job = zk->jobs;
        simba__zk_fail(zk, job, SIMBA_ECLOSED, "zookeeper backend closed");
    }
    while (zk->inss) simba__zk_ins_end(zk, zk->inss, SIMBA_ECLOSED, "zookeeper backend closed");
    for (m = zk->mtxs; m; m = mn) {
        simba__zk_cont *c, *cn;
        mn = m->next;
        for (c = m->conts; c; c = cn) {
            cn = c->next;
            simba_free(zk->loop, c->value);
            simba_free(zk->loop, c);
        }
        simba__zk_mtx_free(zk, m);
    }
    simba_free(zk->loop, zk->mtab.b);
    while (zk->zombies) { /* every call is settled: nothing names them */
        simba__zk_sess *s = zk->zombies;
        zk->zombies = s->znext;
        simba_free(zk->loop, s);
    }
    simba_backend_fd(zk->be, zk->pipe_r, 0); /* the loop's watcher goes before the number does */
    close(zk->pipe_r);
    close(zk->pipe_w);
    pthread_mutex_destroy(&zk->mu);
    simba_free(zk->loop, zk->hosts);
    if (zk->scheme) simba_free(zk->loop, zk->scheme);
    if (zk->auth) simba_free(zk->loop, zk->auth);
    zk->magic = 0;
    simba_free(zk->loop, zk);
}

static const simba_backend_vt simba__zk_vt = {
    sizeof(simba_backend_vt), "zookeeper", simba__zk_submit, simba__zk_fds, simba__zk_process, simba__zk_deadline,
    simba__zk_watch, simba__zk_unwatch, simba__zk_destroy,
    SIMBA_LEASE_SESSION, /* the session is the lease */
    NULL, /* hurry: nothing is held */
    simba__zk_inspect,
    NULL, /* announce: the owner node's data watch pushes each tenure and value */
};

/* ---- public ----------------------------------------------------------------------------- */

static int simba__zk_root_ok(const char *root) {
    size_t n, i, start = 1;
    if (!root || root[0] != '/') return 0;
    n = strlen(root);
    if (n < 2 || n > SIMBA__ZK_ROOT_MAX || root[n - 1] == '/') return 0;
    for (i = 1; i <= n; i++) {
        if (i == n || root[i] == '/') {
            char comp[SIMBA__ZK_ROOT_MAX + 1];
            size_t len = i - start;
            if (len == 0 || len > SIMBA_NAME_MAX) return 0;
            memcpy(comp, root + start, len);
            comp[len] = 0;
            if (simba_name_check(comp) != SIMBA_OK) return 0;
            if (start == 1 && strcmp(comp, "zookeeper") == 0) return 0; /* the server's own */
            start = i + 1;
        }
    }
    return 1;
}



/* hosts: "ADDR:PORT[,ADDR:PORT...][/chroot]" with numeric IPv4 or IPv6 addresses (the client
   library resolves names with a blocking getaddrinfo). Fills zk->addrs; 0 and why on error. */
static int simba__zk_hosts_parse(simba__zk *zk, const char *hosts, char *why, size_t cap) {
    const char *p = hosts, *stop = strchr(hosts, '/');
    size_t total = stop ? (size_t)(stop - hosts) : strlen(hosts);
    zk->naddrs = 0;
    if (total == 0) {
        snprintf(why, cap, "no server before the chroot");
        return 0;
    }
    while (p < hosts + total) {
        const char *comma = (const char *)memchr(p, ',', (size_t)(hosts + total - p));
        size_t len = comma ? (size_t)(comma - p) : (size_t)(hosts + total - p);
        char item[64], *colon, *end;
        long port;
        struct sockaddr_storage *a = &zk->addrs[zk->naddrs];
        if (len == 0 || len >= sizeof item) {
            snprintf(why, cap, "entry %d is %s", zk->naddrs + 1, len ? "too long" : "empty");
            return 0;
        }
        if (zk->naddrs == SIMBA__ZK_ADDRS) {
            snprintf(why, cap, "more than %d servers", SIMBA__ZK_ADDRS);
            return 0;
        }
        memcpy(item, p, len);
        item[len] = 0;
        colon = strrchr(item, ':');
        if (!colon || !colon[1]) {
            snprintf(why, cap, "'%s' has no :port", item);
            return 0;
        }
        *colon = 0;
        errno = 0;
        port = strtol(colon + 1, &end, 10);
        if (*end || errno || port < 1 || port > 65535) {
            snprintf(why, cap, "'%s:%s': the port must be 1..65535", item, colon + 1);
            return 0;
        }
        memset(a, 0, sizeof *a);
        {
            struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)a;
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)a;
            if (inet_pton(AF_INET, item, &a4->sin_addr) == 1) {
                a4->sin_family = AF_INET;
                a4->sin_port = htons((uint16_t)port);
            } else if (inet_pton(AF_INET6, item, &a6->sin6_addr) == 1) {
                a6->sin6_family = AF_INET6;
                a6->sin6_port = htons((uint16_t)port);
            } else {
                snprintf(why, cap, "'%s' is not a numeric IPv4 or IPv6 address (host names would be resolved "
                         "by a blocking lookup)", item);
                return 0;
            }
        }
        zk->naddrs++;
        p += len + (comma ? 1 : 0);
        if (comma && p == hosts + total) {
            snprintf(why, cap, "trailing ','");
            return 0;
        }
    }
    return 1;
}

/* >>open */
/* Every field of the desc, with words for what is wrong. */
static simba_result simba__zk_desc_check(simba_loop *loop, const simba_zk_desc *desc) {
    const char *root;
    if (!desc->hosts || !desc->hosts[0])
        return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: hosts is required (e.g. \"127.0.0.1:2181\")");
    if (strlen(desc->hosts) > 4096) return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: hosts is over 4096 bytes");
    if (desc->session_timeout_ms < 0 || desc->session_timeout_ms > 1000000000)
        return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: session_timeout_ms %d is not in 0..1e9 (0 = 10000)",
                           desc->session_timeout_ms);
    root = desc->root ? desc->root : "/simba";
    if (!simba__zk_root_ok(root))
        return simba__fail(loop, SIMBA_EINVAL,
                           "simba_zk_open: root must be an absolute path of valid names, not under /zookeeper, "
                           "at most %d bytes", SIMBA__ZK_ROOT_MAX);
    if ((desc->auth_scheme == NULL) != (desc->auth == NULL))
        return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: auth_scheme and auth go together (%s is NULL)",
                           desc->auth_scheme ? "auth" : "auth_scheme");
    if (desc->auth_scheme && (!desc->auth_scheme[0] || strlen(desc->auth_scheme) > 64))
        return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: auth_scheme must be 1..64 bytes");
    if (desc->auth_scheme && strlen(desc->auth) > 4096)
        return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: auth is over 4096 bytes");
    if (desc->acl_creator_only && !desc->auth_scheme) /* CREATOR_ALL needs an identity */
        return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: acl_creator_only needs auth_scheme and auth");
    return SIMBA_OK;
}

SIMBA_API simba_result simba_zk_open(simba_loop *loop, const simba_zk_desc *desc, simba_backend **out) {
    simba__zk *zk;
    const char *root;
    char rnd[33];
    int fds[2];
    int rc;
    char why[160];
    if (out) *out = NULL;
    if (!loop) return SIMBA_EINVAL;
    if (!desc || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: %s is NULL", !desc ? "desc" : "out");
    if ((rc = simba__zk_desc_check(loop, desc)) != SIMBA_OK) return (simba_result)rc;
    root = desc->root ? desc->root : "/simba";
    rc = simba_contender_id_random(loop, rnd, sizeof rnd);
    if (rc != SIMBA_OK) return (simba_result)rc;
    zk = (simba__zk *)simba__zalloc(loop, sizeof *zk);
    if (!zk) return simba__fail(loop, SIMBA_ENOMEM, "simba_zk_open: out of memory");
    if (!simba__zk_hosts_parse(zk, desc->hosts, why, sizeof why)) {
        simba_free(loop, zk);
        return simba__fail(loop, SIMBA_EINVAL, "simba_zk_open: hosts \"%.64s\": %s", desc->hosts, why);
    }
    zk->magic = SIMBA__ZK_MAGIC;
    zk->loop = loop;
    zk->timeout_ms = desc->session_timeout_ms ? desc->session_timeout_ms : 10000;
    zk->creator_only = desc->acl_creator_only != 0;
    zk->zk_log = desc->zk_log;
    zk->reopen_at = INT64_MAX;
    zk->idle_at = INT64_MAX;
    memcpy(zk->token, rnd, 16);
    zk->token[16] = 0;
    simba__copy(zk->root, sizeof zk->root, root);
    zk->hosts = simba__strdup(loop, desc->hosts);
    if (desc->auth_scheme) {
        zk->scheme = simba__strdup(loop, desc->auth_scheme);
        zk->auth = simba__strdup(loop, desc->auth);
    }
    if (!zk->hosts || (desc->auth_scheme && (!zk->scheme || !zk->auth))) {
        rc = SIMBA_ENOMEM;
        goto fail_strings;
    }
    if (simba__pipe(fds) != 0) {
        rc = SIMBA_ESYS;
        goto fail_strings;
    }
    zk->pipe_r = fds[0];
    zk->pipe_w = fds[1];
    if (pthread_mutex_init(&zk->mu, NULL) != 0) {
        rc = SIMBA_ESYS;
        goto fail_pipe;
    }
    rc = simba_backend_new(loop, &simba__zk_vt, zk, &zk->be);
    if (rc != SIMBA_OK) goto fail_mutex;
    rc = simba__zk_session_open(zk);
    if (rc != SIMBA_OK) {
        /* the backend owns zk now: freeing it runs destroy */
        simba_backend_free(zk->be);
        return (simba_result)rc;
    }
    *out = zk->be;
    return SIMBA_OK;
fail_mutex:
    pthread_mutex_destroy(&zk->mu);
fail_pipe:
    close(zk->pipe_r);
    close(zk->pipe_w);
fail_strings:
    if (zk->hosts) simba_free(loop, zk->hosts);
    if (zk->scheme) simba_free(loop, zk->scheme);
    if (zk->auth) simba_free(loop, zk->auth);
    simba_free(loop, zk);
    return (simba_result)rc;
}

SIMBA_API simba_result simba_zk_fenced_multi(simba_backend *be, const char *name, uint64_t fence,
                                             const simba_zk_fenced_op *ops, int n, simba_zk_fenced_fn cb, void *user) {
    static const char fn[] = "simba_zk_fenced_multi";
    simba_loop *l = simba_backend_loop(be);
    simba__zk *zk;
    simba__zkfw *fw;
    char err[256], *p;
    size_t bytes, data = 0;
    simba_result rc;
    int i;
    if (!l) return SIMBA_EINVAL;
    if (simba_backend_vt_get(be) != &simba__zk_vt) return simba__fail(l, SIMBA_EINVAL, "%s: not a ZooKeeper backend", fn);
    zk = (simba__zk *)simba_backend_impl(be);
    if ((rc = simba__fence_args(fn, name, fence, err, sizeof err)) != SIMBA_OK) return simba__fail(l, rc, "%s", err);
    if (!cb) return simba__fail(l, SIMBA_EINVAL, "%s: no callback", fn);
    if (!ops || n < 1 || n > SIMBA__ZKFW_OPS_MAX)
        return simba__fail(l, SIMBA_EINVAL, "%s: %d operations%s: give 1..%d", fn, n, ops ? "" : " (ops NULL)", SIMBA__ZKFW_OPS_MAX);
    bytes = sizeof *fw + (size_t)n * (sizeof(simba_zk_fenced_op) + sizeof(simba_zk_fenced_result) + SIMBA__ZKFW_PATH);
    for (i = 0; i < n; i++) {
        const simba_zk_fenced_op *o = &ops[i];
        const char *why = simba__zkfw_path_bad(zk, o->path);
        size_t len = o->data ? (o->data_len < 0 ? strlen(o->data) : (size_t)o->data_len) : 0;
        if (o->type != SIMBA_ZK_FENCED_CREATE && o->type != SIMBA_ZK_FENCED_SET && o->type != SIMBA_ZK_FENCED_DELETE)
            return simba__fail(l, SIMBA_EINVAL, "%s: ops[%d].type %d is not SIMBA_ZK_FENCED_CREATE, _SET or _DELETE", fn, i, o->type);
        if (why) return simba__fail(l, SIMBA_EINVAL, "%s: ops[%d].path \"%.80s\" %s", fn, i, o->path ? o->path : "", why);
        if (o->type == SIMBA_ZK_FENCED_CREATE && (o->flags & ~(SIMBA_ZK_FENCED_SEQUENTIAL | SIMBA_ZK_FENCED_EPHEMERAL)))
            return simba__fail(l, SIMBA_EINVAL, "%s: ops[%d].flags %d: only SIMBA_ZK_FENCED_SEQUENTIAL and _EPHEMERAL", fn, i,
                               o->flags);
        if (o->type != SIMBA_ZK_FENCED_CREATE && o->version < -1)
            return simba__fail(l, SIMBA_EINVAL, "%s: ops[%d].version %d: -1 (any) or a version", fn, i, o->version);
        if (o->type == SIMBA_ZK_FENCED_DELETE && o->data)
            return simba__fail(l, SIMBA_EINVAL, "%s: ops[%d] deletes: it takes no data", fn, i);
        data += len;
        if (data > SIMBA__ZKFW_BYTES)
            return simba__fail(l, SIMBA_EINVAL, "%s: more than %d bytes of data in one multi", fn, SIMBA__ZKFW_BYTES);
        bytes += strlen(o->path) + 1 + len + 1;
    }
    if (!(fw = (simba__zkfw *)simba__zalloc(l, bytes))) return simba__fail(l, SIMBA_ENOMEM, "%s: out of memory", fn);
    fw->loop = l;
    fw->cb = cb;
    fw->user = user;
    fw->n = n;
    fw->ops = (simba_zk_fenced_op *)(void *)(fw + 1);
    fw->res = (simba_zk_fenced_result *)(void *)(fw->ops + n);
    fw->made = (char (*)[SIMBA__ZKFW_PATH])(void *)(fw->res + n);
    p = (char *)(fw->made + n);
    for (i = 0; i < n; i++) {
        simba_zk_fenced_op *o = &fw->ops[i];
        size_t len = ops[i].data ? (ops[i].data_len < 0 ? strlen(ops[i].data) : (size_t)ops[i].data_len) : 0;
        *o = ops[i];
        memcpy(p, ops[i].path, strlen(ops[i].path) + 1);
        o->path = p;
        p += strlen(p) + 1;
        if (ops[i].data) {
            memcpy(p, ops[i].data, len);
            p[len] = 0;
            o->data = p;
            o->data_len = (int)len;
            p += len + 1;
        }
        fw->made[i][0] = 0;
    }
    rc = simba_backend_call(be, name, fence, simba__zkfw_start, simba__zkfw_done, fw);
    if (rc != SIMBA_OK) simba_free(l, fw); /* the loop's errmsg says why */
    return rc;
}

SIMBA_API simba_result simba_zk_stats_get(simba_backend *be, simba_zk_stats *out) {
    simba__zk *zk;
    if (!be) return SIMBA_EINVAL;
    if (!out) return simba__fail(simba_backend_loop(be), SIMBA_EINVAL, "simba_zk_stats_get: out is NULL");
    if (simba_backend_vt_get(be) != &simba__zk_vt)
        return simba__fail(simba_backend_loop(be), SIMBA_EINVAL, "simba_zk_stats_get: be is not a zookeeper backend");
    zk = (simba__zk *)simba_backend_impl(be);
    if (!zk || zk->magic != SIMBA__ZK_MAGIC)
        return simba__fail(simba_backend_loop(be), SIMBA_EINVAL, "simba_zk_stats_get: be is closed");
    *out = zk->stats;
    return SIMBA_OK;
}

#endif /* SIMBA_ZK_IMPLEMENTATION */

/* License: MIT, the full text at the end of simba.h (the headers ship together). */
