/*
 * simba_sql.h v0.1.0 -- SQL (SQLite) backend for simba, stb-style single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file; the same macro instantiates simba.h,
 * which this header includes itself. (SIMBA_SQL_IMPLEMENTATION instead: this header and the
 * core only.) Link with -lsqlite3; SQLite 3.35 or later (RETURNING).
 *
 *     simba_backend *be;
 *     simba_sql_desc d = {0};
 *     d.path = "locks.db";
 *     if (simba_sql_open(loop, &d, &be) != SIMBA_OK) ...
 *     simba_contend(loop, be, &cdesc, &svc);      // as with any backend
 *
 * COMPILE-TIME OPTIONS (define before the implementation's include)
 *   SIMBA_API, SIMBA_MALLOC / SIMBA_FREE   as in simba.h
 *   SIMBA_SQL_IMPLEMENTATION               this header and the core only
 *   SIMBA_SQL_TEST_HOOKS                   test builds: simba_sql_test_after_checkpoint
 *
 * HOW IT WORKS
 *   One row per mutex in one table (default "simba_mutex"):
 *       mutex (primary key), acquired_at, ttl_at, transition_at, owner_id, fence, version,
 *       waiters, value, holders, permits
 *   Times are the database's clock in ms since the epoch, so every process on the file shares
 *   one clock; replies carry only remaining durations computed by the database. (The wall
 *   clock that SQLite's julianday('now') reads, read once per request and bound as NOW.)
 *   Acquire-or-renew is one conditional UPDATE in one short write transaction: anyone may take
 *   the row once transition_at < now (the lease is fully over), the owner may renew while
 *   transition_at >= now. acquired_at and fence change only when an ownership begins: a new
 *   owner, or the stored owner asking without simba_req.renew (it stepped down locally or
 *   lost an answer), gets fence + 1 in the same UPDATE; release never resets the fence, so
 *   fences strictly increase from one ownership to the next. The UPDATE returns the row it
 *   wrote (RETURNING), so a renewal or a win is one autocommit statement. The row is created
 *   on first use, its fence starting at the creation time in ms x 2^10: a file that is lost
 *   (deleted, or on a tmpfs across a reboot) and made again gives greater fences than the
 *   lost one did. Release clears the row only for its owner.
 *
 * LEADERSHIP VALUE, PROCLAIM, YIELD
 *   value (a BLOB, any bytes up to SIMBA_VALUE_MAX) is written by the UPDATE that grants, in
 *   the same statement; a renewal keeps it, a release or a forced release empties it, and
 *   every answer that names the owner carries it (RETURNING, reads, simba_inspect).
 *   SET_VALUE is one UPDATE conditioned on contender, fence and a live lease (the store's
 *   clock); YIELD is one write transaction: while a live waiter other than the owner is in
 *   line, the row is cleared as a release clears it, the owner joins the back of the line and
 *   the head gets the release's datagram after the commit; with nobody live in line nothing
 *   changes. On a file observers are not pushed a new value: they read it at their next
 *   refresh, as they learn a new owner (OBSERVERS). A value longer than SIMBA_VALUE_MAX
 *   (not written by simba) is an error, never cut.
 *
 * SEMAPHORES AND READ-WRITE LOCKS (same file, table "<table>_hold")
 *   The row above is the exclusive holder (a mutex's owner, a read-write lock's writer).
 *   Readers and a semaphore's permits are rows of "<table>_hold" (mutex, contender, shared,
 *   acquired_at, ttl_at, transition_at, fence, value), each a lease of its own that frees at
 *   its transition_at. The mutex row keeps the name's one fence counter (a holding's grant
 *   takes fence + 1 from it), the recorded permits (N) and how many holding rows it has
 *   (holders): a free row is taken by the hot path only with holders = 0, so a mutex nobody
 *   shares never reads the set. A reader or a permit asks in one write transaction (>>holders):
 *   dead holdings and waiters are dropped, another N while anyone holds or waits is refused
 *   (SIMBA_EINVAL), and the rule of simba.h grants or queues it (the queue's rows say who
 *   reads, column shared). A release of a holding pushes to every waiter the rule would grant
 *   then. A holding's YIELD is one such transaction: when its permit, once free, goes to a
 *   waiter the rule does not grant now, the holding goes, the holder joins the back of the
 *   line and those it frees are pushed; else nothing changes (kept).
 *
 * FAIRNESS: THE WAIT QUEUE (same file, table "<table>_wait")
 *   mutex, contender, seq (arrival order), expires_at (liveness), wake (datagram address)
 *   The mutex row counts its waiter rows (column waiters), so the hot paths stay one
 *   statement while nobody waits: a renewal, or a free row with waiters = 0, is the single
 *   UPDATE above, a release one UPDATE (a second, RETURNING waiters, only when someone
 *   waits). Everything else is decided in one BEGIN IMMEDIATE transaction
 *   (simba__sql_contend), by the rule of simba.h:
 *
 *     request              row                     queue              result
 *     owner renews         held by us              -                  renewed (fence kept)
 *     owner renews         lease over              -                  nothing (no grant,
 *                                                                     no place)
 *     acquire              free (or lease over)    empty or we head   granted, we leave it
 *     acquire              free                    another heads      we join / keep our
 *                                                                     place; head woken
 *     acquire              held by another         -                  we join / refresh,
 *                                                                     first_in_line if head
 *     release by owner     cleared                 -                  head woken (datagram)
 *     release by a waiter  -                       we leave it        next head woken if free
 *
 *   A waiter row lives until expires_at = the database time of its last request +
 *   simba_req.live_ms (the core's bound: ttl + transition + jitter max + 1 s); dead rows,
 *   rows that are not what the backend writes (wrong types, an id the core refuses, a
 *   malformed address) and rows whose process is gone (its socket refuses a datagram) are
 *   dropped when met and never stand in line, let alone own. A releaser that asks again at
 *   once finds the row free but another at the head, and joins the back. A head that does
 *   not come (SIGSTOPped, hung) keeps the mutex reserved until its liveness passes; others
 *   then retry every min_retry_ms and the oldest live one wins.
 *
 * WAKE-UPS (host-local push)
 *   Every process on a SQLite file shares a host, so each backend binds a datagram socket of
 *   its own: on Linux an autobound abstract AF_UNIX address (unique, no file to create or
 *   clean up, gone with the process: a send to a dead waiter fails at once and drops it).
 *   Its address goes into the backend's waiter rows, and its descriptor is in simba_fds()
 *   while one of those rows may be live (an uncontended loop polls nothing). After a
 *   release commits, one datagram goes to the oldest live waiter's backend, naming mutex
 *   and contender; it raises SIMBA_EV_RELEASED for that contender only, which then asks the
 *   database: a datagram never grants, and a lost or forged one costs at most one attempt
 *   (at most 64 are read per poll). Timers stay the fallback: the head tries at lease end
 *   (first_in_line), as on Redis. Without abstract sockets (not Linux) there is no socket
 *   and handoff waits for those timers. Abstract addresses belong to a network namespace:
 *   processes in different namespaces (containers sharing a volume) cannot wake each other,
 *   and a release drops such a waiter's row, which comes back at its next attempt; mutual
 *   exclusion is unaffected, only order and handoff speed are.
 *
 * FOLLOWERS (waiters and observers, table "<table>_follow": mutex, wake)
 *   A backend with services of a name writes its socket's address there once (the table
 *   is made with the others at open); a process whose contender is granted the
 *   name or changes its value sends the owner record to every other address there, one
 *   datagram each (>>follow), and followers set their view from it without a read. A
 *   follower on a file it may not write is not registered and learns at its own refresh.
 *   On ":memory:" PRAGMA data_version (below) tells of a change, and the row read is
 *   pushed (SIMBA_EV_RELEASED when free, SIMBA_EV_OWNER when held).
 *
 * NEVER BLOCKS THE POLL
 *   The connection runs with busy_timeout 0, WAL journal, synchronous=NORMAL. A request that
 *   finds the database locked (SQLITE_BUSY / SQLITE_LOCKED) is kept and retried every
 *   busy_retry_ms from the loop (the backend's deadline), and fails with SIMBA_EBUSY once it
 *   has waited busy_max_ms (default: ttl/2 for acquire, 1000 ms otherwise), so that the core
 *   backs off instead of waiting. Requests are executed in submission order. The statements
 *   are short local transactions: executing them inside the poll is the design.
 *   Several processes on one file, and several backends (connections) in one process, work.
 *   At open, a database that cannot work is refused: read-only, or its table fails
 *   PRAGMA quick_check (of that table only).
 *
 * BATCHING
 *   Inside simba_poll submit() only queues, and the poll's process call runs the queue
 *   (outside a poll, a request runs at once). Requests that one poll
 *   submits (a burst of renewals, releases, waiters' attempts) share one BEGIN IMMEDIATE
 *   write transaction, up to simba_sql_desc.batch_max (default 64), each in the order it
 *   was submitted and each step of the queue's rule a savepoint inside it, so every request
 *   sees exactly the rows it would see alone after the ones before it. Answers are handed
 *   to the core, and a release's wake-up datagram sent, only after the commit. A request
 *   alone keeps its single autocommit statement. Each request executed is a step of the
 *   poll's budget (simba_poll_budget_spent): past it the rest waits for the next poll.
 *   So is the COMMIT, which nothing stops once it started: its cost per request is learnt
 *   from the batches' commits (a moving average, each sample at most 4 times it), and a
 *   batch takes a request only while it and that COMMIT fit in what is left of the budget
 *   (simba_poll_budget_left_us). After another connection's commit (the checkpointer
 *   starting the WAL over) SQLite has dropped the page cache, and the next batch costs ~5
 *   times as much a request: it reserves SIMBA__SQL_COLD (5) times its COMMIT and teaches
 *   the estimate nothing (PRAGMA data_version, once per batch).
 *   A waiter that is not granted is answered by reads alone (the row, its place, the head)
 *   while its place outlives its next ask (simba_req.next_ask_ms), else with one UPDATE of
 *   its own place's liveness: never the queue's transaction on a timer's ask.
 *   A renewal, and a waiter's ask on its own timer, may wait for company as long as the core
 *   says (simba_req.company_ms: SIMBA_HOLD_MS, SIMBA_HOLD_TAKEOVER_MS in simba.h). Anything
 *   else (a release, a handoff after a pushed release, a first ask) runs in the next poll
 *   and takes the held ones along. With batch_max 1 nothing is held.
 *
 * CHECKPOINTS
 *   The one step of a poll no budget bounds is SQLite's automatic WAL checkpoint, which runs
 *   inside the commit that crosses 1,000 pages, fsyncs included. With
 *   simba_sql_desc.checkpoint = -1 the loop's connection never checkpoints, and its polls
 *   never call fsync; simba_sql_checkpoint() from a thread or process of the application
 *   (or `simba checkpoint --every 1` beside it) must then keep the WAL short:
 *     - it copies what it can (PRAGMA wal_checkpoint(PASSIVE): it never waits for a lock);
 *     - when every frame is copied it starts the WAL over with one write of its own, so
 *       the sync of the new WAL header (synchronous=NORMAL syncs it at a WAL's first frame)
 *       is its own, not the loop's. A second connection keeps a read snapshot from before
 *       the checkpoint until that write holds the lock: a writer of the loop's that comes in
 *       between appends instead of starting the WAL over.
 *   So no poll syncs, as long as every connection that writes the file checkpoints only
 *   this way (tests/test_sql.c counts the syncs per thread with a VFS of its own). An
 *   idle database costs each call one page written and synced.
 *
 * WHERE TO PUT THE FILE
 *   On a disk, a read of the loop's can still wait for a page the kernel dropped from its
 *   cache: the longest poll is then the disk's, not simba's (make bench, W4). On a tmpfs
 *   (/run/lock, /dev/shm, $XDG_RUNTIME_DIR) no read or write waits for a disk, and a lock
 *   file loses nothing there that it needs: a reboot ends every process that held a lease,
 *   and fences stay increasing (a row made again starts above the lost one's, see HOW IT
 *   WORKS). A tmpfs with checkpoint = -1 and a checkpoint thread is the configuration for
 *   sub-millisecond polls at 10,000 mutexes. Every process on the file must see the same
 *   tmpfs (one host, one mount namespace).
 *
 * CLOCK AND ROWS
 *   "The database's clock" is, for SQLite, the wall clock of the host running each process:
 *   all processes on one file must share a host (SQLite itself does not support network
 *   file systems). A forward step of that clock shortens every lease in real time, by the
 *   size of the step, and the owner's monotonic step-down cannot see it; keep the clock
 *   slewed (NTP does), not stepped. Rows that another program deletes (every DELETE runs the
 *   trigger "<table>_lost" stored in the file) leave in "<table>_floor" the highest fence and
 *   the latest lease end they held: a row made again starts above that fence and nobody owns
 *   it before that lease end (asks fail with SIMBA_EBACKEND, saying why), while the owner who
 *   lost its row steps down at its next renewal. A dropped table (DROP TABLE runs no
 *   trigger) keeps fences increasing through the floor and the time floor, with no wait:
 *   nothing recorded its lease.
 *
 * IN-PROCESS TESTS
 *   path ":memory:" is one database shared by every backend of the process (any loop, any
 *   thread), SQLite's memdb VFS under the name file:/simba-memory?vfs=memdb: backends opened
 *   on it contend as processes on one file do. It lives while one of them is open. For
 *   separate databases in one process, give file:/NAME?vfs=memdb. A path that would give
 *   each connection a private database ("", a temporary one, file::memory:, mode=memory
 *   without cache=shared, memdb without a leading "/") is refused: every backend would win.
 *   A release on an in-memory database is pushed to the other backends of the process
 *   (each checks PRAGMA data_version in its poll, observers included) besides the head
 *   waiter's datagram, so waiters take over at once. Loops on
 *   other threads lock it only for a statement's microseconds; simba_sql_open() waits for
 *   that (at most about 0.5 s), requests retry from the loop as on a file.
 *   test_clock = 1 writes and compares every time in the loop's clock, bound as a
 *   parameter, so that a test advancing an injected simba_loop_desc.now_ms expires leases
 *   to the millisecond. It is refused on a file: other processes could open the file with
 *   the wall clock, and times of two clocks in one row would let two owners win. Within the
 *   process the first backend of ":memory:" fixes its clock (test_clock or not) and a
 *   backend with the other one is refused; loops sharing it with test_clock must share one
 *   clock. simba_sql_simulate_crash() stands for a process that died while owning.
 *
 * SAFETY OF INPUT
 *   Names reach SQL only as bound parameters. The table name cannot be bound: it must match
 *   [A-Za-z_][A-Za-z0-9_]{0,63} and not start with "sqlite_", and it is quoted besides.
 *
 * THREADS
 *   One backend is one sqlite3 connection, used only from its loop's thread.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  public declarations   >>impl  the implementation   >>open  the constructor
 *   >>process  the work of one poll   >>close  teardown
 *   >>wake  wake-up datagrams   >>queue  the fairness rule   >>kept  a waiter's ask
 *   >>batch  one write transaction for many requests   >>holders  semaphores, readers
 *   >>fence  simba_sql_check_fence
 *   >>inspect  simba_inspect, simba_list, simba_force_release
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together).
 */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_SQL_IMPLEMENTATION)
#define SIMBA_SQL_IMPLEMENTATION
#endif
/* Its implementation uses the core's private helpers: the core's goes into the same file. */
#if defined(SIMBA_SQL_IMPLEMENTATION) && !defined(SIMBA_CORE_IMPLEMENTATION)
#define SIMBA_CORE_IMPLEMENTATION
#endif
#ifndef SIMBA_SQL_H
#define SIMBA_SQL_H

#include "simba.h"

#ifdef __cplusplus
extern "C" {
#endif

/* >>api */
#define SIMBA_SQL_TABLE_MAX 64

typedef struct simba_sql_desc {
    /* required: a database file (created if missing), or ":memory:", the process's one
       in-memory database (see IN-PROCESS TESTS); a file: URI works too. */
    const char *path;
    const char *table;     /* NULL or "" -> "simba_mutex" */
    int64_t busy_retry_ms; /* 0 -> 5: retry interval while the database is locked */
    int64_t busy_max_ms;   /* 0 -> acquire: ttl/2, release/read: 1000. Then SIMBA_EBUSY;
                              when set, at least busy_retry_ms */
    /* Optional: receives the message when simba_sql_open() fails (always NUL-terminated
       when errbuf_cap > 0). simba_loop_errmsg() has it too. */
    char *errbuf;
    size_t errbuf_cap;
    /* Test support, 0 or 1: 1 takes every time from the loop's clock (simba_loop_desc.now_ms)
       instead of the database's, so an injected clock expires leases exactly. Only with
       ":memory:" (see IN-PROCESS TESTS for why). */
    int test_clock;
    /* 0 -> 64: requests that one poll submits share one write transaction, up to this many
       (see BATCHING); 1 runs every request in its own. At most 4096. */
    int batch_max;
    /* 0 -> SQLite's automatic WAL checkpoint (every 1000 pages), which runs inside the commit
       that crosses it, fsyncs included: the one step of a poll no budget bounds. -1: never
       on this connection, so the loop never waits for the disk's syncs; something off the
       loop must then keep the WAL short: simba_sql_checkpoint() from a thread of yours, or
       `simba -u sqlite:PATH checkpoint --every 1` beside the application (see CHECKPOINTS). */
    int checkpoint;
    /* 1: open the file read-only, for inspection (simba_inspect, simba_list: tools on a file
       they may only read). Nothing is created or written; every other request is refused. */
    int read_only;
} simba_sql_desc;

/* Opens the database (creating file and table if needed) and registers a backend on loop.
   SIMBA_EINVAL for bad arguments (which field and why in simba_loop_errmsg() and errbuf),
   SIMBA_EBACKEND when sqlite cannot open or set up the database, or it cannot work: not a
   database, read-only, the table corrupt (nothing is leaked), SIMBA_ENOMEM. If the database
   file is merely locked at open, setup finishes on the first request instead. */
SIMBA_API simba_result simba_sql_open(simba_loop *loop, const simba_sql_desc *desc, simba_backend **out);

/* Test support: this backend acts as if its process had died without releasing. It never
   touches the database again: its requests stay unanswered (an owner steps down locally at
   its ttl_at, as with a hung server) and the release that a stop or a free would send never
   arrives, so its leases end on their own. Its wake-up socket closes, as a dead process's
   does, so its places in wait queues are dropped at the next release. Free the loop or the
   backend as usual; simba__sql_read() on it returns SIMBA_ESTATE. */
SIMBA_API simba_result simba_sql_simulate_crash(simba_backend *be);

/* One WAL checkpoint of the database file at path (PRAGMA wal_checkpoint(PASSIVE)), on a
   connection of its own, closed before it returns. BLOCKING: it copies the WAL into the
   database and syncs both: call it from a thread or process of yours, never from the loop's
   thread, for backends opened with checkpoint = -1; once a second keeps the WAL of 10,000
   mutexes under 2 MB. It never waits for a lock: frames that a reader still needs stay for
   the next call. When it copied every frame it starts the WAL over with one write of its
   own, so that the new WAL header's sync is its and not the loop's (see CHECKPOINTS).
   Thread-safe.
   *wal_frames / *copied (either may be NULL): the WAL's frames and those now in the
   database (-1 when the file is not in WAL mode). SIMBA_EINVAL (no path, ":memory:"),
   SIMBA_EBACKEND (no such database, not a database; errbuf says), SIMBA_EBUSY (another
   checkpoint or a recovery runs right now: call again later). */
SIMBA_API simba_result simba_sql_checkpoint(const char *path, int *wal_frames, int *copied, char *errbuf, size_t errbuf_cap);


/* FENCED WRITES: the check of the application's write in the same database file. Call it
   inside the application's own write transaction (BEGIN IMMEDIATE) on db, a connection of
   the application's, before the write it guards:
       BEGIN IMMEDIATE;  simba_sql_check_fence(db, NULL, "orders", fence, err, sizeof err);
       UPDATE orders ...;  COMMIT;            (ROLLBACK when the check refused)
   The write lock it finds held keeps every grant out until the COMMIT, and the fence holds
   while it is the stored owner's and its lease has not passed its transition end by the
   clock the backend's grants use (the wall clock julianday('now') reads): the write lands
   before any later owner's grant, or not at all. table: NULL or "" -> "simba_mutex".
   SIMBA_OK: the fence holds; SIMBA_EFENCE: refused, errbuf says why (the fence moved on,
   never handed out, released, the lease is over); SIMBA_EINVAL: db NULL, a bad or unknown
   table, an empty or bad name, fence 0; SIMBA_ESTATE: db is not in a write transaction, or
   its rows are in a test clock (test_clock); SIMBA_EBACKEND: SQLite failed (errbuf).
   Nothing is written. errbuf may be NULL. */
struct sqlite3; /* sqlite3.h's sqlite3: this header's declarations need no sqlite3.h */
SIMBA_API simba_result simba_sql_check_fence(struct sqlite3 *db, const char *table, const char *name, uint64_t fence,
                                             char *errbuf, size_t errbuf_cap);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_SQL_H */

/* >>impl */
/* ==================================================================================== */
/*                                   IMPLEMENTATION                                     */
/* ==================================================================================== */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_SQL_IMPLEMENTATION)
#define SIMBA_SQL_IMPLEMENTATION
#endif
#if defined(SIMBA_SQL_IMPLEMENTATION) && !defined(SIMBA__SQL_IMPLEMENTED)
#define SIMBA__SQL_IMPLEMENTED
#include "simba.h" /* the core's implementation, when this file has not got it yet */

#include <sqlite3.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- all SQL text lives here ----------------------------------------------------------
 * {T} is replaced by the validated, quoted table name; every value is a bound parameter:
 *   ?1 mutex   ?2 contender   ?3 ttl_ms (q_join: live_ms)   ?4 ttl_ms + transition_ms
 *   ?5 renew (0/1)   ?6 now: the loop's clock, only in the test-clock text   ?7 wake address
 *   ?8 value (a BLOB)   ?9 fence
 * {Q} is the wait queue "<table>_wait", {O} its index "<table>_wait_order", {F} the floor of
 * lost rows "<table>_floor", {G} its trigger "<table>_lost", {W} the followers "<table>_follow".
 * A networked SQL engine would add a second simba__sql_text; the places where SQLite's
 * dialect is used are marked [sqlite]. */

/* [sqlite] Database time in ms since the epoch, as SQL: SQLite 3.40 lacks the 'subsec'
   modifier (3.42), so milliseconds come from julianday, which reads the VFS's clock
   (gettimeofday) once per sqlite3_step(). The statements do not use it: each use costs a
   date parse and computation, ten per statement. They bind the same wall clock, read in C
   (SIMBA__SQL_BOUND_NOW), which tests/test_sql.c checks against this expression, and which
   another program writing our rows with this expression would agree with. */
#define SIMBA__SQLITE_NOW "CAST((julianday('now') - 2440587.5) * 86400000.0 + 0.5 AS INTEGER)"
/* NOW in every statement: bound once per request, so every use sees one instant. */
#define SIMBA__SQL_BOUND_NOW "?6"

typedef struct simba__sql_text {
    const char *dialect;
    const char *setup[10]; /* once per connection, in order; NULL ends the list */
    const char *create_row; /* ?1: the row of a mutex, if it does not exist yet */
    const char *acquire;    /* ?1 ?2 ?3 ?4 ?5 -> the row as READ gives it, if we won or renewed
                               and nobody waits (the hot path) */
    const char *grant;      /* the same, queue or not: the queue was checked in the transaction */
    const char *release;    /* ?1 ?2: release when nobody waits (changes() says) */
    const char *read;       /* ?1 -> owner_id, ttl_left, transition_left, held, fence, waiters */
    const char *q_purge;    /* ?1: drop dead (expired) and malformed waiter rows */
    const char *q_head;     /* ?1 -> contender, wake of the oldest live waiter */
    const char *q_join;     /* ?1 ?2 ?3 live_ms ?7 wake: join the line or refresh our place */
    const char *q_self;     /* ?1 ?2 -> ms our well-formed place still lives */
    const char *q_refresh;  /* ?1 ?2 ?3 live_ms ?7 wake: push our live place's liveness on */
    const char *set_value;  /* ?1 ?2 ?8 value ?9 fence -> the row, if the fence still holds */
} simba__sql_text;

/* Still the owner's lease: the owner may renew, nobody else may take it. */
#define SIMBA__SQL_OWNS(NOW) "(owner_id = ?2 AND transition_at >= " NOW ")"
/* A row as READ gives it, and as every write that answers with the row returns it. */
#define SIMBA__SQL_ROW_COLS(NOW) \
    "owner_id, ttl_at - " NOW ", transition_at - " NOW ", " NOW " - acquired_at, fence, waiters, value, holders, permits"

#define SIMBA__SQL_SETUP                                                                        \
    {/* [sqlite] WAL: readers never block the writer and the writer never blocks them (an      \
        in-memory database keeps its own journal and ignores it). */                           \
     "PRAGMA journal_mode=WAL",                                                                \
     /* [sqlite] with WAL, NORMAL loses at most the last commits on power loss, never          \
        consistency; a lease outlives such a loss anyway. */                                   \
     "PRAGMA synchronous=NORMAL",                                                              \
     /* [sqlite] WITHOUT ROWID: the primary key is the table. waiters counts the mutex's       \
        rows in {Q}, so that the hot paths touch the queue only when it is not empty. value    \
        is the owner's bytes (simba_req.value): written with its grant, cleared by release. */ \
     "CREATE TABLE IF NOT EXISTS {T} ("                                                        \
     " mutex TEXT NOT NULL PRIMARY KEY,"                                                       \
     " acquired_at INTEGER NOT NULL DEFAULT 0,"                                                \
     " ttl_at INTEGER NOT NULL DEFAULT 0,"                                                     \
     " transition_at INTEGER NOT NULL DEFAULT 0,"                                              \
     " owner_id TEXT NOT NULL DEFAULT '',"                                                     \
     " fence INTEGER NOT NULL DEFAULT 0,"                                                      \
     " version INTEGER NOT NULL DEFAULT 0,"                                                    \
     " waiters INTEGER NOT NULL DEFAULT 0,"                                                    \
     " value BLOB NOT NULL DEFAULT x'',"                                                       \
     " holders INTEGER NOT NULL DEFAULT 0,"                                                    \
     " permits INTEGER NOT NULL DEFAULT 0"                                                     \
     ") WITHOUT ROWID",                                                                        \
     /* The wait queue: seq orders arrivals per mutex; wake is the waiter's datagram address   \
        ("" = none), expires_at its liveness (now + simba_req.live_ms at its last request). */ \
     "CREATE TABLE IF NOT EXISTS {Q} ("                                                        \
     " mutex TEXT NOT NULL, contender TEXT NOT NULL, seq INTEGER NOT NULL,"                    \
     " expires_at INTEGER NOT NULL, wake TEXT NOT NULL DEFAULT '',"                            \
     " shared INTEGER NOT NULL DEFAULT 0,"                                                     \
     " PRIMARY KEY (mutex, contender)) WITHOUT ROWID",                                         \
     /* The holders set beside the owner row: readers and a semaphore's permits, each with     \
        its own lease, fence (from the row's counter) and value. holders counts them in {T}.  */ \
     "CREATE TABLE IF NOT EXISTS {H} ("                                                        \
     " mutex TEXT NOT NULL, contender TEXT NOT NULL, shared INTEGER NOT NULL DEFAULT 0,"       \
     " acquired_at INTEGER NOT NULL, ttl_at INTEGER NOT NULL, transition_at INTEGER NOT NULL,"\
     " fence INTEGER NOT NULL, value BLOB NOT NULL DEFAULT x'',"                               \
     " PRIMARY KEY (mutex, contender)) WITHOUT ROWID",                                         \
     "CREATE INDEX IF NOT EXISTS {O} ON {Q} (mutex, seq)",                                     \
     /* Every process with a follower of a name: its datagram address (FOLLOWERS). */          \
     "CREATE TABLE IF NOT EXISTS {W} (mutex TEXT NOT NULL, wake TEXT NOT NULL,"                \
     " PRIMARY KEY (mutex, wake)) WITHOUT ROWID",                                              \
     /* Rows deleted by another program take their fences and maybe a live lease with them:   \
        the trigger, stored in the file, runs in that program's transaction and keeps the     \
        highest fence and the latest lease end they held (see SIMBA__SQL_CREATE_ROW_TEXT). */ \
     "CREATE TABLE IF NOT EXISTS {F} (id INTEGER PRIMARY KEY CHECK (id = 1),"                  \
     " fence_floor INTEGER NOT NULL, lost_until INTEGER NOT NULL)",                            \
     "CREATE TRIGGER IF NOT EXISTS {G} AFTER DELETE ON {T} BEGIN"                              \
     " INSERT OR IGNORE INTO {F} (id, fence_floor, lost_until) VALUES (1, 0, 0);"              \
     " UPDATE {F} SET fence_floor = max(fence_floor, OLD.fence),"                              \
     " lost_until = max(lost_until, OLD.transition_at) WHERE id = 1;"                          \
     " END",                                                                                   \
     NULL}

/* The whole mutual exclusion, one autocommit statement: the hot path (renewal, or a free
   row nobody waits for) is a single write transaction. SET expressions see the row as it
   was before the UPDATE; RETURNING sees it after, at the same NOW. Only a renewal (?5) keeps
   fence, acquired_at and value: the stored owner asking anew (it stepped down locally, or
   lost an answer) starts a new ownership, with the value it asks with (?8); a renewal whose
   lease has ended takes nothing and no place (a late renewal is no new grant). Fairness: with
   waiters queued a free row is not taken here; the queue decides in a transaction
   (simba__sql_contend). [sqlite] RETURNING (3.35+; PostgreSQL has it too, MySQL would read
   the row back in the same transaction). */
#define SIMBA__SQL_TAKE_TEXT(NOW, FREE)                                                              \
    "UPDATE {T} SET"                                                                            \
    " fence = CASE WHEN ?5 AND " SIMBA__SQL_OWNS(NOW) " THEN fence ELSE fence + 1 END,"         \
    " acquired_at = CASE WHEN ?5 AND " SIMBA__SQL_OWNS(NOW) " THEN acquired_at ELSE " NOW " END," \
    " value = CASE WHEN ?5 AND " SIMBA__SQL_OWNS(NOW) " THEN value ELSE ?8 END,"               \
    " owner_id = ?2,"                                                                           \
    " ttl_at = " NOW " + ?3,"                                                                   \
    " transition_at = " NOW " + ?4,"                                                            \
    " version = version + 1"                                                                    \
    " WHERE mutex = ?1 AND ((NOT ?5 AND " FREE ") OR " SIMBA__SQL_OWNS(NOW) ")"                 \
    " RETURNING " SIMBA__SQL_ROW_COLS(NOW)
#define SIMBA__SQL_ACQUIRE_TEXT(NOW) SIMBA__SQL_TAKE_TEXT(NOW, "(transition_at < " NOW " AND waiters = 0 AND holders = 0)")
#define SIMBA__SQL_GRANT_TEXT(NOW) SIMBA__SQL_TAKE_TEXT(NOW, "transition_at < " NOW)

#define SIMBA__SQL_READ_TEXT(NOW) "SELECT " SIMBA__SQL_ROW_COLS(NOW) " FROM {T} WHERE mutex = ?1"

/* Proclaim: the owner's new value under the same fence while its lease lives (?8 value,
   ?9 fence); nothing else changes. No row returned: the fence no longer holds. */
#define SIMBA__SQL_SET_VALUE_TEXT(NOW)                                                               \
    "UPDATE {T} SET value = ?8, version = version + 1"                                          \
    " WHERE mutex = ?1 AND fence = ?9 AND " SIMBA__SQL_OWNS(NOW) " RETURNING " SIMBA__SQL_ROW_COLS(NOW)

/* A waiter row is dead when its liveness passed, and garbage when it is not what
   q_join writes (an id the core would refuse is also dropped where the head is read).
   Only well-formed rows can head the line. */
#define SIMBA__SQL_Q_WELL_FORMED(NOW)                                                                \
    "(typeof(expires_at) = 'integer' AND expires_at >= " NOW " AND typeof(seq) = 'integer'"      \
    " AND typeof(contender) = 'text' AND length(contender) BETWEEN 1 AND 128"                   \
    " AND typeof(wake) = 'text' AND (wake = '' OR (wake GLOB 'u:*' AND length(wake) < 112)))"
#define SIMBA__SQL_Q_PURGE_TEXT(NOW) "DELETE FROM {Q} WHERE mutex = ?1 AND NOT " SIMBA__SQL_Q_WELL_FORMED(NOW)
#define SIMBA__SQL_Q_HEAD_TEXT(NOW)                                                                  \
    "SELECT contender, wake, shared FROM {Q} WHERE mutex = ?1 AND " SIMBA__SQL_Q_WELL_FORMED(NOW) \
    " ORDER BY seq LIMIT 1"
/* [sqlite] UPSERT (3.24+; PostgreSQL ON CONFLICT too): a waiter that asks again keeps its
   place (seq) and pushes its liveness on. */
#define SIMBA__SQL_Q_JOIN_TEXT(NOW)                                                                  \
    "INSERT INTO {Q} (mutex, contender, seq, expires_at, wake, shared) VALUES (?1, ?2,"         \
    " (SELECT coalesce(max(seq), 0) + 1 FROM {Q} WHERE mutex = ?1), " NOW " + ?3, ?7, coalesce(?5, 0))" \
    " ON CONFLICT (mutex, contender) DO UPDATE SET expires_at = excluded.expires_at, wake = excluded.wake," \
    " shared = excluded.shared"
#define SIMBA__SQL_Q_LEAVE_TEXT "DELETE FROM {Q} WHERE mutex = ?1 AND contender = ?2"
#define SIMBA__SQL_Q_SELF_TEXT(NOW)                                                                  \
    "SELECT expires_at - " NOW " FROM {Q} WHERE mutex = ?1 AND contender = ?2 AND " SIMBA__SQL_Q_WELL_FORMED(NOW)
/* A place that still lives is pushed on; a lapsed one is not revived (changes() = 0). */
#define SIMBA__SQL_Q_REFRESH_TEXT(NOW)                                                               \
    "UPDATE {Q} SET expires_at = " NOW " + ?3, wake = ?7"                                       \
    " WHERE mutex = ?1 AND contender = ?2 AND expires_at >= " NOW
/* The holders set (SEMAPHORES AND READ-WRITE LOCKS in simba.h), ?6 now: ?3 ttl_ms (FENCE_NEXT,
   SET_PERMITS: the permits), ?4 ttl + transition, ?5 shared, ?8 value, ?9 fence. A holding is
   live until its transition_at, as the owner row's lease; dead ones are purged when met. A
   grant takes the next fence of the name's one counter (the owner row's fence column). */
#define SIMBA__SQL_HROW "contender, ttl_at - ?6, transition_at - ?6, ?6 - acquired_at, fence, value"
#define SIMBA__SQL_H_PURGE_TEXT "DELETE FROM {H} WHERE mutex = ?1 AND transition_at < ?6"
#define SIMBA__SQL_H_COUNT_TEXT "UPDATE {T} SET holders = (SELECT count(*) FROM {H} WHERE mutex = ?1) WHERE mutex = ?1"
#define SIMBA__SQL_H_NUM_TEXT "SELECT count(*) FROM {H} WHERE mutex = ?1 AND transition_at >= ?6"
#define SIMBA__SQL_H_SELF_TEXT "SELECT fence FROM {H} WHERE mutex = ?1 AND contender = ?2 AND transition_at >= ?6"
#define SIMBA__SQL_H_RENEW_TEXT "UPDATE {H} SET ttl_at = ?6 + ?3, transition_at = ?6 + ?4 WHERE mutex = ?1 AND contender = ?2"
#define SIMBA__SQL_H_LEAVE_TEXT "DELETE FROM {H} WHERE mutex = ?1 AND contender = ?2"
#define SIMBA__SQL_H_GRANT_TEXT                                                                      \
    "INSERT OR REPLACE INTO {H} (mutex, contender, shared, acquired_at, ttl_at, transition_at, fence, value)" \
    " VALUES (?1, ?2, ?5, ?6, ?6 + ?3, ?6 + ?4, ?9, ?8)"
#define SIMBA__SQL_H_MINE_TEXT "SELECT " SIMBA__SQL_HROW " FROM {H} WHERE mutex = ?1 AND contender = ?2"
#define SIMBA__SQL_H_FIRST_TEXT                                                                      \
    "SELECT " SIMBA__SQL_HROW " FROM {H} WHERE mutex = ?1 AND transition_at >= ?6 ORDER BY transition_at LIMIT 1"
#define SIMBA__SQL_H_SET_VALUE_TEXT                                                                  \
    "UPDATE {H} SET value = ?8 WHERE mutex = ?1 AND contender = ?2 AND fence = ?9 AND transition_at >= ?6" \
    " RETURNING " SIMBA__SQL_HROW
#define SIMBA__SQL_H_FORCE_TEXT "DELETE FROM {H} WHERE mutex = ?1 AND fence = ?9 AND transition_at >= ?6"
#define SIMBA__SQL_FENCE_NEXT_TEXT                                                                   \
    "UPDATE {T} SET fence = fence + 1, permits = ?3, version = version + 1 WHERE mutex = ?1 RETURNING fence"
#define SIMBA__SQL_SET_PERMITS_TEXT "UPDATE {T} SET permits = ?3 WHERE mutex = ?1"
#define SIMBA__SQL_Q_NUM_TEXT "SELECT count(*) FROM {Q} WHERE mutex = ?1 AND contender <> ?2 AND " SIMBA__SQL_Q_WELL_FORMED("?6")
#define SIMBA__SQL_Q_LIST_TEXT                                                                       \
    "SELECT contender, shared, wake FROM {Q} WHERE mutex = ?1 AND " SIMBA__SQL_Q_WELL_FORMED("?6") " ORDER BY seq"
#define SIMBA__SQL_Q_COUNT_TEXT "UPDATE {T} SET waiters = (SELECT count(*) FROM {Q} WHERE mutex = ?1) WHERE mutex = ?1"

/* Inspection (simba_inspect, simba_list, simba_force_release): ?1 mutex, ?2 fence, ?6 now.
   A listing reads no queue. A forced release clears the owner only while it still holds
   the fence and its lease lives, as one statement; the waiters column says whom to wake. */
#define SIMBA__SQL_VIEW_COLS "mutex, owner_id, fence, acquired_at, ?6 - acquired_at, ttl_at - ?6, transition_at - ?6, value"
#define SIMBA__SQL_INSPECT_TEXT "SELECT " SIMBA__SQL_VIEW_COLS " FROM {T} WHERE mutex = ?1"
#define SIMBA__SQL_LIST_TEXT "SELECT " SIMBA__SQL_VIEW_COLS " FROM {T}"
#define SIMBA__SQL_WAITERS_TEXT "SELECT contender FROM {Q} WHERE mutex = ?1 AND " SIMBA__SQL_Q_WELL_FORMED("?6") " ORDER BY seq"
#define SIMBA__SQL_FORCE_TEXT                                                                      \
    "UPDATE {T} SET owner_id = '', acquired_at = 0, ttl_at = 0, transition_at = 0, value = x'',"      \
    " version = version + 1 WHERE mutex = ?1 AND fence = ?2 AND owner_id <> '' AND transition_at >= ?6 RETURNING waiters"

/* [sqlite] INSERT OR IGNORE (MySQL: INSERT IGNORE, PostgreSQL: ON CONFLICT DO NOTHING). */
/* A new row's fence starts at its creation time in ms x 2^10 (?6 is NOW), not at 0: a row
   made again after its file was lost (deleted, or on a tmpfs across a reboot) starts above
   every fence the lost one gave, unless that one gave more than 1,024 a ms of its life (a
   write transaction each: SQLite commits far fewer). 2^10 (PostgreSQL's crash floor too):
   fences stay below 2^53, exact in JSON readers' and awk's doubles, until the year 2248.
   A row made again after a DELETE starts at the floor of deleted fences too, so no fence
   repeats, and free of owner but closed until the latest lease end of the deleted rows:
   whoever held one may still act on it, and nobody is granted before it ends. */
#define SIMBA__SQL_CREATE_ROW_TEXT                                                                 \
    "INSERT OR IGNORE INTO {T} (mutex, fence, transition_at) VALUES (?1,"                       \
    " max(?6 * 1024, coalesce((SELECT fence_floor FROM {F} WHERE id = 1), 0)),"                  \
    " coalesce((SELECT lost_until FROM {F} WHERE id = 1), 0))"
/* No time condition: while owner_id is still ours nobody else has taken the row, so
   clearing it is always right. The fence stays. The hot release (nobody waits) has no
   RETURNING, which costs SQLite about 5 % of an uncontended cycle; with waiters the second
   form says so, to wake the head. */
#define SIMBA__SQL_RELEASE_SET                                                                     \
    "UPDATE {T} SET owner_id = '', acquired_at = 0, ttl_at = 0, transition_at = 0, value = x'',"  \
    " version = version + 1 WHERE mutex = ?1 AND owner_id = ?2"
#define SIMBA__SQL_RELEASE_TEXT SIMBA__SQL_RELEASE_SET " AND waiters = 0"
#define SIMBA__SQL_RELEASE_QUEUED_TEXT SIMBA__SQL_RELEASE_SET " RETURNING waiters"

#define SIMBA__SQL_TEXTS(NOW)                                                                       \
    SIMBA__SQL_SETUP, SIMBA__SQL_CREATE_ROW_TEXT, SIMBA__SQL_ACQUIRE_TEXT(NOW), SIMBA__SQL_GRANT_TEXT(NOW), \
        SIMBA__SQL_RELEASE_TEXT, SIMBA__SQL_READ_TEXT(NOW), SIMBA__SQL_Q_PURGE_TEXT(NOW), SIMBA__SQL_Q_HEAD_TEXT(NOW), \
        SIMBA__SQL_Q_JOIN_TEXT(NOW), SIMBA__SQL_Q_SELF_TEXT(NOW), SIMBA__SQL_Q_REFRESH_TEXT(NOW), \
        SIMBA__SQL_SET_VALUE_TEXT(NOW)
/* NOW is bound once per request (see simba__sql_now): the wall clock that julianday('now')
   reads, or the loop's clock with simba_sql_desc.test_clock. */
static const simba__sql_text simba__sqlite_text = {"sqlite", SIMBA__SQL_TEXTS(SIMBA__SQL_BOUND_NOW)};

enum { SIMBA__SQL_CREATE_ROW, SIMBA__SQL_ACQUIRE_ST, SIMBA__SQL_GRANT_ST, SIMBA__SQL_RELEASE_ST, SIMBA__SQL_RELEASE_QUEUED,
       SIMBA__SQL_READ_ST, SIMBA__SQL_Q_PURGE, SIMBA__SQL_Q_HEAD, SIMBA__SQL_Q_JOIN, SIMBA__SQL_Q_LEAVE, SIMBA__SQL_Q_COUNT, SIMBA__SQL_BEGIN,
       SIMBA__SQL_COMMIT, SIMBA__SQL_ROLLBACK, SIMBA__SQL_DATA_VERSION, SIMBA__SQL_SAVEPOINT, SIMBA__SQL_SP_RELEASE,
       SIMBA__SQL_SP_ROLLBACK, SIMBA__SQL_Q_SELF, SIMBA__SQL_Q_REFRESH, SIMBA__SQL_SET_VALUE,
       /* the holders set: */
       SIMBA__SQL_H_PURGE, SIMBA__SQL_H_COUNT, SIMBA__SQL_H_NUM, SIMBA__SQL_H_SELF, SIMBA__SQL_H_RENEW, SIMBA__SQL_H_LEAVE,
       SIMBA__SQL_H_GRANT, SIMBA__SQL_H_MINE, SIMBA__SQL_H_FIRST, SIMBA__SQL_H_SET_VALUE, SIMBA__SQL_H_FORCE,
       SIMBA__SQL_FENCE_NEXT, SIMBA__SQL_SET_PERMITS, SIMBA__SQL_Q_NUM, SIMBA__SQL_Q_LIST, SIMBA__SQL_NSTMT };

/* ":memory:" names this database: SQLite's memdb VFS shares a name that starts with "/"
   between the connections of one process, without shared-cache mode. */
#define SIMBA__SQL_MEMORY_URI "file:/simba-memory?vfs=memdb"
/* PRAGMA user_version: the layout of simba's tables in this database (SCHEMA VERSION). */
#define SIMBA__SQL_SCHEMA_VERSION 1
/* PRAGMA application_id of an in-memory database: which clock its rows are written in. */
enum { SIMBA__SQL_CLOCK_WALL = 0x53570001, SIMBA__SQL_CLOCK_LOOP = 0x53570002 };

#define SIMBA__SQL_MAGIC 0x53514c31u /* "SQL1": simba__sql_read() checks it */
#define SIMBA__SQL_BUSY 1            /* internal: database locked, nothing changed */
#define SIMBA__SQL_WAKE_MAX 112      /* a wake address as text: "u:" + hex of an abstract name */
/* Requests one write transaction carries by default: enough to make a renewal burst cost a
   commit per 64 rows, few enough that the lock is held well under a millisecond. */
#define SIMBA__SQL_BATCH_DEFAULT 64
#define SIMBA__SQL_BATCH_LIMIT 4096
/* The first COMMIT's cost is assumed at most this (ns per request): a WAL frame on a disk's
   page cache, measured here at 2-4 µs. The batches' own commits take over from there. */
#define SIMBA__SQL_COMMIT_NS0 4000
/* A batch after another connection's commit (a dropped page cache) reserves this many
   times the COMMIT it would make warm (simba__sql_cold) */
#define SIMBA__SQL_COLD 5
/* simba_sql_checkpoint() waits this long for the write lock to start the WAL over itself */
#define SIMBA__SQL_RESTART_WAIT_MS 50

#ifdef SIMBA_SQL_TEST_HOOKS
/* Test builds: called by simba_sql_checkpoint() between its checkpoint and its start of
   the new WAL, the window in which a writer of the loop's may come. */
static void (*simba_sql_test_after_checkpoint)(void);
#define SIMBA__SQL_AFTER_CHECKPOINT()                                                          \
    do {                                                                                       \
        if (simba_sql_test_after_checkpoint) simba_sql_test_after_checkpoint();                \
    } while (0)
#else
#define SIMBA__SQL_AFTER_CHECKPOINT() ((void)0)
#endif


/* A request executed in a batch, its answer kept until the batch commits. */
typedef struct simba__sql_done {
    simba_reply rep;
    int wake; /* a release with waiters: wake the head (1) or whom the set frees (2) once it is committed */
    char owner[SIMBA_ID_MAX + 1];
    char err[320];
    unsigned char value[SIMBA_VALUE_MAX];
} simba__sql_done;

typedef struct simba__sql {
    uint32_t magic;
    simba_loop *loop;
    simba_backend *be;
    sqlite3 *db;
    const simba__sql_text *text;
    char table[SIMBA_SQL_TABLE_MAX + 1];
    int64_t retry_ms, busy_max_ms;
    int ready; /* setup done and statements prepared */
    int memory;     /* the process's shared in-memory database (memdb VFS) */
    int loop_clock; /* times come from the loop's clock (test_clock) */
    int crashed;    /* simba_sql_simulate_crash(): never touches the database again */
    int read_only;  /* simba_sql_desc.read_only: inspection only */
    sqlite3_stmt *st[SIMBA__SQL_NSTMT];
    /* In-memory database only: the mutexes of this backend's services and the last
       PRAGMA data_version seen, so that a release by another connection is pushed. */
    char **watched;
    int nwatched, capwatched;
    int64_t data_version;
    simba_req *head, *tail; /* requests waiting for the lock, in submission order */
    int64_t next_try;
    int woken; /* releases pushed and not yet asked after: such an ask is not held */
    char err[512];
    char owner[SIMBA_ID_MAX + 1];
    unsigned char value[SIMBA_VALUE_MAX]; /* the owner's value in the last row read or written */
    size_t value_len;
    const simba_req *cur; /* the request being executed (NULL: a tool's simba__sql_exec) */
    int64_t waiters; /* the waiters column of the last row read or written */
    int64_t holders, permits_col; /* its holders and permits columns (the holders set) */
    int qhead_shared;             /* the last queue head read is a reader */
    int64_t lost_left; /* the last row read has no owner but is closed this many ms more (rows
                          deleted under a live lease, see SIMBA__SQL_CREATE_ROW_TEXT); -1: not */
    /* Host-local wake-ups: this backend's datagram socket (-1: none) and its address as
       stored in its waiter rows. */
    int wake_fd;
    char wake_addr[SIMBA__SQL_WAKE_MAX];
    char qhead[SIMBA_ID_MAX + 1]; /* the last queue head read */
    char qhead_wake[SIMBA__SQL_WAKE_MAX];
    int64_t queued_until; /* loop time until which a waiter row of ours may be live */
    int follow_todo; /* watched names not yet in the followers table (see >>follow) */
    int following;   /* our address is in the followers table: the socket is polled */
    /* Batching: inside one write transaction the queue's steps nest as savepoints, and a
       release's wake-up waits for the commit (a head woken earlier would find the lock). */
    int batch, batch_wake;
    simba__sql_done *done; /* batch_max answers, allocated at open (NULL: no batching) */
    int batch_max;
    uint64_t batches, batched; /* write transactions of several requests, and their requests */
    int64_t commit_ns;         /* a batch's COMMIT, measured: ns per request in it (EWMA) */
    int64_t batch_dv;          /* PRAGMA data_version in the last batch (0: none yet) */
    uint64_t executed;         /* requests executed (answered by the database) */
    uint64_t kept_places;      /* waiters' asks answered by reads alone (their place lasts) */
    uint64_t refreshed_places; /* ... by reads and one UPDATE of their place's liveness */
    int64_t next_ask_ms;       /* simba_req.next_ask_ms of the request being executed */
} simba__sql;

static int simba__sql_table_ok(const char *t) {
    size_t i, n = strlen(t);
    if (n == 0 || n > SIMBA_SQL_TABLE_MAX) return 0;
    if (!((t[0] >= 'A' && t[0] <= 'Z') || (t[0] >= 'a' && t[0] <= 'z') || t[0] == '_')) return 0;
    for (i = 1; i < n; i++) {
        char c = t[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    /* sqlite_ names are reserved by SQLite itself */
    if (n >= 7 && (t[0] | 32) == 's' && (t[1] | 32) == 'q' && (t[2] | 32) == 'l' && (t[3] | 32) == 'i' &&
        (t[4] | 32) == 't' && (t[5] | 32) == 'e' && t[6] == '_')
        return 0;
    return 1;
}

/* Replaces each {T} of src by the quoted table name, {Q} by the queue's, {O} by its index's.
   0 when it does not fit. */
static int simba__sql_expand(const simba__sql *s, const char *src, char *dst, size_t cap) {
    size_t o = 0, tl = strlen(s->table);
    while (*src) {
        if (src[0] == '{' && src[1] && strchr("TQOFGHW", src[1]) && src[2] == '}') {
            const char *suffix = src[1] == 'T' ? "" : src[1] == 'Q' ? "_wait" : src[1] == 'O' ? "_wait_order"
                               : src[1] == 'F' ? "_floor" : src[1] == 'H' ? "_hold" : src[1] == 'W' ? "_follow" : "_lost";
            size_t sl = strlen(suffix);
            if (o + tl + sl + 2 >= cap) return 0;
            dst[o++] = '"';
            memcpy(dst + o, s->table, tl);
            o += tl;
            memcpy(dst + o, suffix, sl);
            o += sl;
            dst[o++] = '"';
            src += 3;
        } else {
            if (o + 1 >= cap) return 0;
            dst[o++] = *src++;
        }
    }
    dst[o] = 0;
    return 1;
}

static int simba__sql_is_busy(int rc) {
    rc &= 0xff;
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

static void simba__sql_seterr(simba__sql *s, const char *what, int rc) {
    snprintf(s->err, sizeof s->err, "sqlite %s: %s (%d)", what, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc), rc);
}

/* [posix] What the file system refuses this process at a database path, for the open and
   setup errors SQLite can only call "unable to open database file" or "readonly": the
   file's read and write access, then its directory's (SQLite creates the -wal, -shm and
   journal files there). Appends nothing when every access is granted. */
static void simba__sql_access_why(const char *path, int write, char *out, size_t cap) {
    char dir[4096], aux[4200];
    const char *slash = strrchr(path, '/'), *what;
    unsigned long uid = (unsigned long)geteuid();
    struct stat st, dst;
    int r, w, e;
    if (cap == 0 || strlen(path) >= sizeof dir) return;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(path, &st) != 0) {
        e = errno;
        if (e != ENOENT) snprintf(out, cap, ": %s: %s (uid %lu)", path, strerror(e), uid);
        else if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0)
            snprintf(out, cap, ": cannot create %s: no write access to directory %s for uid %lu (%s)", path, dir, uid, strerror(errno));
        return;
    }
    r = faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) == 0;
    e = r ? 0 : errno;
    w = !write || faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0; /* a read_only open needs no write */
    if (!w && !e) e = errno;
    if (!r || !w) {
        snprintf(out, cap, ": %s: no %s access for uid %lu (%s; owner uid %lu, mode %04o)", path,
                 !r && !w ? "read or write" : !r ? "read" : "write", uid, strerror(e), (unsigned long)st.st_uid,
                 (unsigned)(st.st_mode & 07777));
        return;
    }
    if (write && faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0) {
        e = errno;
        if (stat(dir, &dst) != 0) memset(&dst, 0, sizeof dst);
        snprintf(out, cap, ": no write access to directory %s for uid %lu (%s; owner uid %lu, mode %04o): SQLite creates "
                           "the database's -wal and -shm files there", dir, uid, strerror(e), (unsigned long)dst.st_uid,
                 (unsigned)(dst.st_mode & 07777));
        return;
    }
    for (what = "-wal"; what; what = what[1] == 'w' ? "-shm" : NULL) {
        snprintf(aux, sizeof aux, "%s%s", path, what);
        if (stat(aux, &st) == 0 && faccessat(AT_FDCWD, aux, write ? R_OK | W_OK : R_OK, AT_EACCESS) != 0) {
            e = errno;
            snprintf(out, cap, ": %s: no %s access for uid %lu (%s; owner uid %lu, mode %04o)", aux, write ? "read or write" : "read",
                     uid, strerror(e), (unsigned long)st.st_uid, (unsigned)(st.st_mode & 07777));
            return;
        }
    }
}

/* [sqlite] PRAGMA quick_check of our table only (its pages, not the whole file, which may
   be an application's own large database): a corrupt page is refused at open. */
static int simba__sql_check_table(simba__sql *s) {
    char sql[128];
    sqlite3_stmt *st = NULL;
    int rc;
    snprintf(sql, sizeof sql, "PRAGMA quick_check(\"%s\")", s->table);
    rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        if (v && strcmp(v, "ok") == 0) {
            rc = SQLITE_OK;
        } else {
            snprintf(s->err, sizeof s->err, "sqlite setup: table %s is corrupt: %.300s", s->table, v ? v : "?");
            rc = SQLITE_CORRUPT;
        }
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    } else {
        simba__sql_seterr(s, "setup (quick_check)", rc);
    }
    sqlite3_finalize(st);
    return rc;
}

/* PRAGMA user_version into *out. */
static int simba__sql_user_version(simba__sql *s, sqlite3_int64 *out) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The layout version (PRAGMA user_version): 0 on a database simba has not set up yet, which
   gets this one (in a write transaction, so that two processes setting up at once agree);
   another is refused, and nothing in the file is touched. */
static int simba__sql_schema(simba__sql *s) {
    sqlite3_int64 have = -1;
    int rc = simba__sql_user_version(s, &have);
    if (rc == SQLITE_OK && have == 0 && !s->read_only) {
        char sql[48];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", SIMBA__SQL_SCHEMA_VERSION);
        rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK) rc = simba__sql_user_version(s, &have);
        if (rc == SQLITE_OK && have == 0) rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK && !sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (rc != SQLITE_OK) {
        if (!simba__sql_is_busy(rc)) simba__sql_seterr(s, "setup (schema version)", rc);
        return rc;
    }
    if (have == 0 || have == SIMBA__SQL_SCHEMA_VERSION) return SQLITE_OK;
    snprintf(s->err, sizeof s->err, "sqlite setup: found simba schema version %lld (PRAGMA user_version), this simba "
             "uses %d: run one simba version on a database, or give this one a database of its own (another program's "
             "user_version there means the file is not simba's alone)", (long long)have, SIMBA__SQL_SCHEMA_VERSION);
    return SQLITE_MISMATCH;
}

/* The text of every prepared statement, by its index. */
static void simba__sql_sources(const simba__sql *s, const char **src) {
    src[SIMBA__SQL_CREATE_ROW] = s->text->create_row;
    src[SIMBA__SQL_ACQUIRE_ST] = s->text->acquire;
    src[SIMBA__SQL_GRANT_ST] = s->text->grant;
    src[SIMBA__SQL_RELEASE_ST] = s->text->release;
    src[SIMBA__SQL_RELEASE_QUEUED] = SIMBA__SQL_RELEASE_QUEUED_TEXT;
    src[SIMBA__SQL_READ_ST] = s->text->read;
    src[SIMBA__SQL_Q_PURGE] = s->text->q_purge;
    src[SIMBA__SQL_Q_HEAD] = s->text->q_head;
    src[SIMBA__SQL_Q_JOIN] = s->text->q_join;
    src[SIMBA__SQL_Q_LEAVE] = SIMBA__SQL_Q_LEAVE_TEXT;
    src[SIMBA__SQL_Q_COUNT] = SIMBA__SQL_Q_COUNT_TEXT;
    src[SIMBA__SQL_BEGIN] = "BEGIN IMMEDIATE";
    src[SIMBA__SQL_COMMIT] = "COMMIT";
    src[SIMBA__SQL_ROLLBACK] = "ROLLBACK";
    src[SIMBA__SQL_DATA_VERSION] = "PRAGMA data_version";
    src[SIMBA__SQL_SAVEPOINT] = "SAVEPOINT simba_step";
    src[SIMBA__SQL_SP_RELEASE] = "RELEASE simba_step";
    src[SIMBA__SQL_SP_ROLLBACK] = "ROLLBACK TO simba_step";
    src[SIMBA__SQL_Q_SELF] = s->text->q_self;
    src[SIMBA__SQL_Q_REFRESH] = s->text->q_refresh;
    src[SIMBA__SQL_SET_VALUE] = s->text->set_value;
    src[SIMBA__SQL_H_PURGE] = SIMBA__SQL_H_PURGE_TEXT;
    src[SIMBA__SQL_H_COUNT] = SIMBA__SQL_H_COUNT_TEXT;
    src[SIMBA__SQL_H_NUM] = SIMBA__SQL_H_NUM_TEXT;
    src[SIMBA__SQL_H_SELF] = SIMBA__SQL_H_SELF_TEXT;
    src[SIMBA__SQL_H_RENEW] = SIMBA__SQL_H_RENEW_TEXT;
    src[SIMBA__SQL_H_LEAVE] = SIMBA__SQL_H_LEAVE_TEXT;
    src[SIMBA__SQL_H_GRANT] = SIMBA__SQL_H_GRANT_TEXT;
    src[SIMBA__SQL_H_MINE] = SIMBA__SQL_H_MINE_TEXT;
    src[SIMBA__SQL_H_FIRST] = SIMBA__SQL_H_FIRST_TEXT;
    src[SIMBA__SQL_H_SET_VALUE] = SIMBA__SQL_H_SET_VALUE_TEXT;
    src[SIMBA__SQL_H_FORCE] = SIMBA__SQL_H_FORCE_TEXT;
    src[SIMBA__SQL_FENCE_NEXT] = SIMBA__SQL_FENCE_NEXT_TEXT;
    src[SIMBA__SQL_SET_PERMITS] = SIMBA__SQL_SET_PERMITS_TEXT;
    src[SIMBA__SQL_Q_NUM] = SIMBA__SQL_Q_NUM_TEXT;
    src[SIMBA__SQL_Q_LIST] = SIMBA__SQL_Q_LIST_TEXT;
}

/* Setup statements and prepared statements; once per connection. Returns SQLITE_OK,
   a busy code (try later) or another error (message in s->err). */
static int simba__sql_setup(simba__sql *s) {
    char sql[2048];
    int i, rc;
    const char *src[SIMBA__SQL_NSTMT];
    if (s->ready) return SQLITE_OK;
    if ((rc = simba__sql_schema(s)) != SQLITE_OK) return rc;
    for (i = 0; i < (int)(sizeof s->text->setup / sizeof s->text->setup[0]) && s->text->setup[i]; i++) {
        if (!simba__sql_expand(s, s->text->setup[i], sql, sizeof sql)) {
            snprintf(s->err, sizeof s->err, "sqlite setup: statement too long");
            return SQLITE_ERROR;
        }
        rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            simba__sql_seterr(s, "setup", rc);
            return rc;
        }
    }
    /* A file that cannot work is refused here, not found out by every later request. */
    if (sqlite3_db_readonly(s->db, "main") == 1) {
        snprintf(s->err, sizeof s->err, "sqlite setup: the database is read-only (file or directory permissions, "
                                        "a read-only medium or mode=ro): simba writes its rows there");
        return SQLITE_READONLY;
    }
    if ((rc = simba__sql_check_table(s)) != SQLITE_OK) return rc;
    simba__sql_sources(s, src);
    for (i = 0; i < SIMBA__SQL_NSTMT; i++) {
        if (s->st[i]) continue;
        if (!simba__sql_expand(s, src[i], sql, sizeof sql)) {
            snprintf(s->err, sizeof s->err, "sqlite prepare: statement too long");
            return SQLITE_ERROR;
        }
        rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
        if (rc != SQLITE_OK) {
            simba__sql_seterr(s, "prepare", rc);
            return rc;
        }
    }
    s->ready = 1;
    return SQLITE_OK;
}

/* Steps a statement that returns no row, and resets it. */
static int simba__sql_run(simba__sql *s, int which) {
    sqlite3_stmt *st = s->st[which];
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The value column of the row at st into s->value. A value longer than SIMBA_VALUE_MAX
   (not written by simba) is an error, never cut. */
static int simba__sql_value_col(simba__sql *s, sqlite3_stmt *st, int col) {
    const void *v = sqlite3_column_blob(st, col);
    int n = sqlite3_column_bytes(st, col);
    s->value_len = 0;
    if (n > SIMBA_VALUE_MAX) {
        snprintf(s->err, sizeof s->err, "sqlite read: the owner's value in table %s is %d bytes, over SIMBA_VALUE_MAX (%d)",
                 s->table, n, SIMBA_VALUE_MAX);
        return SQLITE_MISMATCH;
    }
    if (v && n > 0) memcpy(s->value, v, (size_t)n);
    s->value_len = n > 0 ? (size_t)n : 0;
    return SQLITE_OK;
}

/* The holding columns an owner row (SIMBA__SQL_ROW_COLS) and a holder row (SIMBA__SQL_HROW)
   share: 0 id, 1 ttl left, 2 transition left, 3 held, 4 fence, the value in column vcol;
   into rep, the id into s->owner, the value into s->value. SQLITE_MISMATCH (s->err says)
   for an id or a value simba never writes. */
static int simba__sql_holding_cols(simba__sql *s, sqlite3_stmt *st, int vcol, simba_reply *rep) {
    const unsigned char *o = sqlite3_column_text(st, 0);
    int olen = sqlite3_column_bytes(st, 0), rc;
    if (!o || olen <= 0 || olen > SIMBA_ID_MAX) {
        snprintf(s->err, sizeof s->err, "sqlite read: a holder id in table %s%s is empty or longer than %d bytes", s->table,
                 vcol == 6 ? "" : "_hold", SIMBA_ID_MAX);
        return SQLITE_MISMATCH;
    }
    memcpy(s->owner, o, (size_t)olen);
    s->owner[olen] = 0;
    if ((rc = simba__sql_value_col(s, st, vcol)) != SQLITE_OK) {
        s->owner[0] = 0;
        return rc;
    }
    rep->owner = s->owner;
    rep->value = s->value_len ? s->value : NULL;
    rep->value_len = s->value_len;
    rep->ttl_left_ms = sqlite3_column_int64(st, 1);
    rep->transition_left_ms = sqlite3_column_int64(st, 2);
    rep->held_ms = sqlite3_column_int64(st, 3);
    rep->fence = (uint64_t)sqlite3_column_int64(st, 4);
    return SQLITE_OK;
}

/* Steps a bound statement that yields at most one row (SIMBA__SQL_ROW_COLS) into rep (owner
   into s->owner, value into s->value), and resets it; *got says whether a row came. */
static int simba__sql_row(simba__sql *s, int which, simba_reply *rep, int *got) {
    sqlite3_stmt *st = s->st[which];
    int rc;
    *got = 0;
    s->owner[0] = 0;
    s->value_len = 0;
    rep->owner = s->owner;
    rep->value = NULL;
    rep->value_len = 0;
    rep->ttl_left_ms = 0;
    rep->transition_left_ms = 0;
    rep->held_ms = -1;
    rep->fence = 0;
    s->waiters = 0;
    s->holders = 0;
    s->permits_col = 0;
    s->lost_left = -1;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        s->waiters = sqlite3_column_int64(st, 5);
        s->holders = sqlite3_column_int64(st, 7);
        s->permits_col = sqlite3_column_int64(st, 8);
        const unsigned char *o = sqlite3_column_text(st, 0);
        int olen = sqlite3_column_bytes(st, 0);
        int64_t tr_left = sqlite3_column_int64(st, 2);
        if ((!o || olen == 0) && tr_left >= 0) s->lost_left = tr_left; /* a release sets transition_at 0 */
        if (o && olen > 0 && tr_left >= 0 && (rc = simba__sql_holding_cols(s, st, 6, rep)) != SQLITE_OK) {
            sqlite3_reset(st);
            return rc;
        }
        *got = 1;
        rc = sqlite3_step(st); /* primary key: no second row */
    }
    if (rc != SQLITE_DONE) {
        simba__sql_seterr(s, which == SIMBA__SQL_READ_ST ? "read" : "acquire", rc);
        sqlite3_reset(st);
        return rc;
    }
    sqlite3_reset(st);
    return SQLITE_OK;
}

/* The owner row of mutex into rep (simba__sql_row); *got (NULL: not wanted) whether it exists. */
static int simba__sql_read_row(simba__sql *s, const char *mutex, simba_reply *rep, int *got) {
    int g;
    sqlite3_bind_text(s->st[SIMBA__SQL_READ_ST], 1, mutex, -1, SQLITE_STATIC);
    return simba__sql_row(s, SIMBA__SQL_READ_ST, rep, got ? got : &g);
}

/* ?8: the request's value, a BLOB (empty, not NULL, when it has none). */
static void simba__sql_bind_value(simba__sql *s, sqlite3_stmt *st) {
    if (s->cur && s->cur->value && s->cur->value_len > 0)
        sqlite3_bind_blob(st, 8, s->cur->value, (int)s->cur->value_len, SQLITE_STATIC);
    else
        sqlite3_bind_zeroblob(st, 8, 0);
}

static int simba__sql_acquire_row(simba__sql *s, int which, const char *mutex, const char *contender, int64_t ttl_ms,
                                  int64_t transition_ms, int renew, simba_reply *rep, int *got) {
    sqlite3_stmt *st = s->st[which];
    sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ttl_ms);
    sqlite3_bind_int64(st, 4, ttl_ms + transition_ms);
    sqlite3_bind_int(st, 5, renew != 0);
    simba__sql_bind_value(s, st);
    return simba__sql_row(s, which, rep, got);
}

/* >>wake Host-local wake-ups. Every process on one SQLite file shares a host, so a release
   reaches the head waiter as one datagram on its backend's own AF_UNIX socket. Linux:
   an autobound abstract address (unique, no file to create or clean up, gone with the
   process, so a send to a dead waiter fails with ECONNREFUSED). Elsewhere no socket: the
   timers (the head tries at lease end) carry the handoff. A datagram only wakes: the
   receiver raises SIMBA_EV_RELEASED for the named contender, which then asks the database. */
#define SIMBA__SQL_WAKE_TAG "simba-sql-wake"
/* An owner announcement (see >>follow): tag, mutex, 5 numbers, the id's length, id, value. */
#define SIMBA__SQL_OWN_TAG "simba-sql-owner"
#define SIMBA__SQL_OWN_MAX (sizeof SIMBA__SQL_OWN_TAG + SIMBA_NAME_MAX + 7 * 22 + SIMBA_ID_MAX + SIMBA_VALUE_MAX + 8)

static void simba__sql_wake_open(simba__sql *s) {
    s->wake_fd = -1;
    s->wake_addr[0] = 0;
#if defined(__linux__)
    {
        struct sockaddr_un a;
        socklen_t len = (socklen_t)sizeof(sa_family_t);
        int fd = socket(AF_UNIX, SOCK_DGRAM, 0), i, n;
        if (fd < 0) return;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        /* An address of only the family autobinds to a fresh abstract name (unix(7)). */
        if (bind(fd, (struct sockaddr *)&a, len) != 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0 ||
            fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
            close(fd);
            return;
        }
        len = (socklen_t)sizeof a;
        if (getsockname(fd, (struct sockaddr *)&a, &len) != 0 || len <= (socklen_t)sizeof(sa_family_t) + 1 ||
            a.sun_path[0] != 0) {
            close(fd);
            return;
        }
        n = (int)len - (int)sizeof(sa_family_t) - 1; /* name bytes after the leading NUL */
        if (2 + 2 * n + 1 > (int)sizeof s->wake_addr) {
            close(fd);
            return;
        }
        s->wake_addr[0] = 'u';
        s->wake_addr[1] = ':';
        for (i = 0; i < n; i++) snprintf(s->wake_addr + 2 + 2 * i, 3, "%02x", (unsigned char)a.sun_path[1 + i]);
        s->wake_fd = fd;
    }
#endif
}

/* Sends one wake-up to the waiter at addr (as stored in its row). 1 sent (or its queue is
   full: it is alive and already has one), 0 no address or nothing to send with, -1 nobody
   listens there (the waiter's process is gone, or the row is garbage). */
static int simba__sql_dgram_send(simba__sql *s, const char *addr, const char *msg, size_t len);
static int simba__sql_wake_send(simba__sql *s, const char *addr, const char *mutex, const char *contender) {
    char msg[sizeof SIMBA__SQL_WAKE_TAG + SIMBA_NAME_MAX + SIMBA_ID_MAX + 4];
    int len = snprintf(msg, sizeof msg, "%s %s %s", SIMBA__SQL_WAKE_TAG, mutex, contender);
    if (len <= 0 || (size_t)len >= sizeof msg) return 0;
    return simba__sql_dgram_send(s, addr, msg, (size_t)len);
}
static int simba__sql_dgram_send(simba__sql *s, const char *addr, const char *msg, size_t len) {
#if defined(__linux__)
    struct sockaddr_un a;
    size_t n, i;
    if (s->wake_fd < 0 || !addr || strncmp(addr, "u:", 2) != 0) return 0;
    n = strlen(addr + 2);
    if (n == 0 || n % 2 || n / 2 > sizeof a.sun_path - 1) return -1;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    for (i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(addr + 2 + 2 * i, "%2x", &v) != 1) return -1;
        a.sun_path[1 + i] = (char)v;
    }
    if (sendto(s->wake_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a,
               (socklen_t)(sizeof(sa_family_t) + 1 + n / 2)) >= 0)
        return 1;
    return errno == ECONNREFUSED || errno == ENOENT ? -1 : 1;
#else
    (void)s, (void)addr, (void)msg, (void)len;
    return 0;
#endif
}

/* Datagrams that arrived: each names a mutex and a contender of this process and becomes
   SIMBA_EV_RELEASED for that contender only. Anything else on the socket is dropped; a
   burst is bounded per poll, so forged traffic costs at most attempts, never a grant. */
static void simba__sql_follow_recv(simba__sql *s, const char *buf, size_t len);
static void simba__sql_wake_recv(simba__sql *s) {
    char buf[SIMBA__SQL_OWN_MAX + 1];
    int k;
    if (s->wake_fd < 0) return;
    for (k = 0; k < 64; k++) {
        char *mutex, *contender;
        ssize_t got = recv(s->wake_fd, buf, sizeof buf - 1, MSG_DONTWAIT);
        if (got < 0) return;
        buf[got] = 0;
        if (strncmp(buf, SIMBA__SQL_OWN_TAG " ", sizeof SIMBA__SQL_OWN_TAG) == 0) {
            simba__sql_follow_recv(s, buf, (size_t)got);
            continue;
        }
        if (strncmp(buf, SIMBA__SQL_WAKE_TAG " ", sizeof SIMBA__SQL_WAKE_TAG) != 0) continue;
        mutex = buf + sizeof SIMBA__SQL_WAKE_TAG;
        contender = strchr(mutex, ' ');
        if (!contender) continue;
        *contender++ = 0;
        if (simba_name_check(mutex) != SIMBA_OK || simba_id_check(contender) != SIMBA_OK) continue;
        simba_backend_event(s->be, SIMBA_EV_RELEASED, mutex, contender, NULL);
        s->woken++;
    }
}

/* >>follow Every follower learns each owner. A backend with services of a mutex puts its
   datagram address in "<table>_follow" (mutex, wake), when it may write the file (a
   read-only one keeps to its timers). A contender of this process that is
   granted the mutex or changes its value sends the record (SIMBA__SQL_OWN_TAG) to every
   other address there, so waiters and observers learn it without reading the database; an
   address that refuses (its process is gone) is dropped. A datagram never grants. */
static int simba__sql_follow_run(simba__sql *s, const char *fmt, const char *mutex, const char *wake, sqlite3_stmt **keep) {
    char sql[160 + SIMBA_SQL_TABLE_MAX];
    sqlite3_stmt *st = NULL;
    int rc;
    snprintf(sql, sizeof sql, fmt, s->table);
    rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    if (mutex) sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
    if (wake) sqlite3_bind_text(st, 2, wake, -1, SQLITE_STATIC);
    if (keep) { *keep = st; return SQLITE_OK; }
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* The watched names go into the followers table, when the database lets us write. */
static void simba__sql_follow_register(simba__sql *s) {
    int i, rc;
    if (!s->follow_todo || !s->ready || s->read_only || s->memory || s->crashed || s->wake_fd < 0 || s->head) return;
    for (i = 0, rc = SQLITE_OK; rc == SQLITE_OK && i < s->nwatched; i++)
        rc = simba__sql_follow_run(s, "INSERT OR IGNORE INTO \"%s_follow\" (mutex, wake) VALUES (?1, ?2)", s->watched[i], s->wake_addr, NULL);
    if (rc == SQLITE_OK) {
        s->follow_todo = 0;
        s->following = s->nwatched > 0;
    } else if (!simba__sql_is_busy(rc)) {
        s->follow_todo = 0; /* a file we may not write: timers only */
    }
}

static void simba__sql_announce(void *impl, const char *mutex, const simba_reply *o) {
    simba__sql *s = (simba__sql *)impl;
    char msg[SIMBA__SQL_OWN_MAX], gone[4][SIMBA__SQL_WAKE_MAX];
    sqlite3_stmt *st = NULL;
    size_t idlen = strlen(o->owner);
    int len, ngone = 0, i;
    if (!s->ready || s->memory || s->crashed || s->wake_fd < 0) return;
    len = snprintf(msg, sizeof msg, "%s %s %llu %lld %lld %lld %d %lu %s", SIMBA__SQL_OWN_TAG, mutex, (unsigned long long)o->fence,
                   (long long)o->ttl_left_ms, (long long)o->transition_left_ms, (long long)o->held_ms, o->holders,
                   (unsigned long)idlen, o->owner);
    if (len <= 0 || (size_t)len + o->value_len >= sizeof msg) return;
    if (o->value_len) memcpy(msg + len, o->value, o->value_len);
    if (simba__sql_follow_run(s, "SELECT wake FROM \"%s_follow\" WHERE mutex = ?1", mutex, NULL, &st) != SQLITE_OK) return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *w = (const char *)sqlite3_column_text(st, 0);
        if (!w || strcmp(w, s->wake_addr) == 0) continue;
        if (simba__sql_dgram_send(s, w, msg, (size_t)len + o->value_len) < 0 && ngone < 4 && strlen(w) < sizeof gone[0])
            memcpy(gone[ngone++], w, strlen(w) + 1);
    }
    sqlite3_finalize(st);
    for (i = 0; i < ngone; i++) simba__sql_follow_run(s, "DELETE FROM \"%s_follow\" WHERE mutex = ?1 AND wake = ?2", mutex, gone[i], NULL);
}

/* An owner announcement: checked, then SIMBA_EV_OWNER (a hint: the core keeps fences
   from going back and never lets it make anyone owner). */
static void simba__sql_follow_recv(simba__sql *s, const char *buf, size_t len) {
    char mutex[SIMBA_NAME_MAX + 1], id[SIMBA_ID_MAX + 1];
    const char *p = buf + sizeof SIMBA__SQL_OWN_TAG, *stop = buf + len, *sp = (const char *)memchr(p, ' ', (size_t)(stop - p));
    long long n[6];
    char *end;
    int i;
    simba_reply rep;
    if (!sp || sp - p > SIMBA_NAME_MAX) return;
    memcpy(mutex, p, (size_t)(sp - p));
    mutex[sp - p] = 0;
    p = sp + 1;
    for (i = 0; i < 6; i++) {
        n[i] = strtoll(p, &end, 10);
        if (end == p || end >= stop || *end != ' ') return;
        p = end + 1;
    }
    if (n[0] <= 0 || n[5] <= 0 || n[5] > SIMBA_ID_MAX || n[5] > stop - p || stop - p - n[5] > SIMBA_VALUE_MAX) return;
    memcpy(id, p, (size_t)n[5]);
    id[n[5]] = 0;
    if (simba_name_check(mutex) != SIMBA_OK || simba_id_check(id) != SIMBA_OK) return;
    memset(&rep, 0, sizeof rep);
    rep.owner = id;
    rep.fence = (uint64_t)n[0];
    rep.ttl_left_ms = n[1];
    rep.transition_left_ms = n[2];
    rep.held_ms = n[3];
    rep.holders = (int)(n[4] > 0 && n[4] <= SIMBA_PERMITS_MAX ? n[4] : 1);
    rep.value_len = (size_t)(stop - p - n[5]);
    rep.value = rep.value_len ? (const unsigned char *)p + n[5] : NULL;
    simba_backend_event(s->be, SIMBA_EV_OWNER, mutex, NULL, &rep);
}

static int simba__sql_leave(simba__sql *s, const char *mutex, const char *contender, int *changed) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_Q_LEAVE];
    int rc;
    sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
    rc = simba__sql_run(s, SIMBA__SQL_Q_LEAVE);
    if (rc != SQLITE_OK) simba__sql_seterr(s, "queue leave", rc);
    else if (sqlite3_changes(s->db) > 0) *changed = 1;
    return rc;
}

/* Reads the oldest live waiter into s->qhead / s->qhead_wake ("" when nobody waits). A row
   the core would refuse (a malformed id) is dropped here: garbage never stands in line. */
static int simba__sql_head(simba__sql *s, const char *mutex, int *changed) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_Q_HEAD];
    int rc, tries;
    for (tries = 0; tries < 8; tries++) {
        const unsigned char *c, *w;
        int cl, wl;
        s->qhead[0] = s->qhead_wake[0] = 0;
        sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            sqlite3_reset(st);
            return SQLITE_OK;
        }
        if (rc != SQLITE_ROW) {
            simba__sql_seterr(s, "queue head", rc);
            sqlite3_reset(st);
            return rc;
        }
        c = sqlite3_column_text(st, 0);
        cl = sqlite3_column_bytes(st, 0);
        w = sqlite3_column_text(st, 1);
        wl = sqlite3_column_bytes(st, 1);
        if (c && cl > 0 && cl <= SIMBA_ID_MAX) {
            memcpy(s->qhead, c, (size_t)cl);
            s->qhead[cl] = 0;
        }
        if (w && wl > 0 && wl < (int)sizeof s->qhead_wake) {
            memcpy(s->qhead_wake, w, (size_t)wl);
            s->qhead_wake[wl] = 0;
        }
        s->qhead_shared = sqlite3_column_int(st, 2) != 0;
        if (s->qhead[0] && simba_id_check(s->qhead) == SIMBA_OK) {
            sqlite3_reset(st);
            return SQLITE_OK;
        }
        /* An id the core refuses (well-formed text otherwise): dropped, never a grant. */
        sqlite3_reset(st);
        if ((rc = simba__sql_leave(s, mutex, s->qhead, changed)) != SQLITE_OK) return rc;
    }
    s->qhead[0] = s->qhead_wake[0] = 0; /* more garbage than we clean per request: nobody leads */
    return SQLITE_OK;
}


/* The live head of the line, after dropping heads whose process is gone (a wake-up to
   them is refused); wakes it when wake is set. In the caller's transaction. */
static int simba__sql_live_head(simba__sql *s, const char *mutex, const char *self, int wake, int *changed) {
    int rc, k;
    for (k = 0; k < 8; k++) {
        if ((rc = simba__sql_head(s, mutex, changed)) != SQLITE_OK) return rc;
        if (!s->qhead[0] || (self && strcmp(s->qhead, self) == 0) || !wake) return SQLITE_OK;
        if (simba__sql_wake_send(s, s->qhead_wake, mutex, s->qhead) >= 0) return SQLITE_OK;
        if ((rc = simba__sql_leave(s, mutex, s->qhead, changed)) != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}


/* A step of the queue's rule is one write transaction, or a savepoint inside a batch's.
   Begin and commit: SQLITE_OK, or the error (s->err says, unless the database is busy). */
static int simba__sql_tx_step(simba__sql *s, int which, const char *what) {
    int rc = sqlite3_step(s->st[which]);
    sqlite3_reset(s->st[which]);
    if (rc == SQLITE_DONE) return SQLITE_OK;
    if (!simba__sql_is_busy(rc)) simba__sql_seterr(s, what, rc);
    return rc;
}
static int simba__sql_tx_begin(simba__sql *s) {
    return simba__sql_tx_step(s, s->batch ? SIMBA__SQL_SAVEPOINT : SIMBA__SQL_BEGIN, "begin");
}
static int simba__sql_tx_commit(simba__sql *s) {
    return simba__sql_tx_step(s, s->batch ? SIMBA__SQL_SP_RELEASE : SIMBA__SQL_COMMIT, "commit");
}
/* Undoes the step after a failed begin, statement or commit (nothing when none is open). */
static void simba__sql_tx_abort(simba__sql *s) {
    if (s->batch) {
        if (sqlite3_get_autocommit(s->db)) return; /* SQLite rolled the whole batch back itself */
        sqlite3_step(s->st[SIMBA__SQL_SP_ROLLBACK]);
        sqlite3_reset(s->st[SIMBA__SQL_SP_ROLLBACK]);
        sqlite3_step(s->st[SIMBA__SQL_SP_RELEASE]);
        sqlite3_reset(s->st[SIMBA__SQL_SP_RELEASE]);
        return;
    }
    if (!sqlite3_get_autocommit(s->db)) {
        sqlite3_step(s->st[SIMBA__SQL_ROLLBACK]);
        sqlite3_reset(s->st[SIMBA__SQL_ROLLBACK]);
    }
}

/* >>holders The holders set beside the owner row (SEMAPHORES AND READ-WRITE LOCKS in
   simba.h): readers and a semaphore's permits, table "<table>_hold", one row per holding.
   The owner row keeps the name's fence counter, its recorded permits and the count of
   holding rows (holders), so that a mutex nobody shares never reads the set: its hot path
   only requires holders = 0. Every decision is one write transaction (a savepoint in a
   batch), as the queue's rule is:
     request                 grant when (after dropping dead holdings and waiters)
     semaphore N             among the first N - holders live waiters (one not queued: at
                             the back)
     reader                  no owner (writer) holds and only readers are ahead in line
     writer (the owner row)  nobody holds (owner or set) and it heads the line
   Another N while anyone holds or waits is refused (SIMBA_EINVAL, with both numbers). */

static void simba__sql_bind2(sqlite3_stmt *st, const char *mutex, const char *contender) {
    sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
    if (contender) sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
}

static int simba__sql_step_simple(simba__sql *s, int which, const char *what) {
    int rc = simba__sql_run(s, which);
    if (rc != SQLITE_OK && !simba__sql_is_busy(rc)) simba__sql_seterr(s, what, rc);
    return rc;
}
/* Binds ?1 mutex (and ?2 contender unless NULL), steps a statement that returns no row,
   resets it; what names it in the error. */
static int simba__sql_step_on(simba__sql *s, int which, const char *mutex, const char *contender, const char *what) {
    simba__sql_bind2(s->st[which], mutex, contender);
    return simba__sql_step_simple(s, which, what);
}

/* Steps a statement that yields at most one integer (0 when no row), and resets it. */
static int simba__sql_int(simba__sql *s, int which, int64_t *out) {
    sqlite3_stmt *st = s->st[which];
    int rc = sqlite3_step(st);
    *out = 0;
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = sqlite3_step(st);
    }
    sqlite3_reset(st);
    if (rc == SQLITE_ROW) rc = SQLITE_DONE; /* a count or a fence: the first row is the answer */
    if (rc != SQLITE_DONE) {
        if (!simba__sql_is_busy(rc)) simba__sql_seterr(s, "holders", rc);
        return rc;
    }
    return SQLITE_OK;
}
static int simba__sql_int_on(simba__sql *s, int which, const char *mutex, const char *contender, int64_t *out) {
    simba__sql_bind2(s->st[which], mutex, contender);
    return simba__sql_int(s, which, out);
}

/* One holding (SIMBA__SQL_HROW) from a bound statement into rep (s->owner, s->value). */
static int simba__sql_hrow(simba__sql *s, int which, simba_reply *rep, int *got) {
    sqlite3_stmt *st = s->st[which];
    int rc = sqlite3_step(st);
    *got = 0;
    if (rc == SQLITE_ROW) {
        if ((rc = simba__sql_holding_cols(s, st, 5, rep)) != SQLITE_OK) {
            sqlite3_reset(st);
            return rc;
        }
        *got = 1;
        rc = sqlite3_step(st);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        if (!simba__sql_is_busy(rc)) simba__sql_seterr(s, "holders", rc);
        return rc;
    }
    return SQLITE_OK;
}

/* The answer for a waiter when the owner row is free: the holding that frees first. */
static int simba__sql_first_holder(simba__sql *s, const char *mutex, simba_reply *rep) {
    int got;
    simba__sql_bind2(s->st[SIMBA__SQL_H_FIRST], mutex, NULL);
    s->owner[0] = 0;
    rep->owner = s->owner;
    return simba__sql_hrow(s, SIMBA__SQL_H_FIRST, rep, &got);
}

/* SIMBA_ECONFLICT for a request whose permits differ from the name's while anyone holds or
   waits: refused, never obeyed (nothing was written). */
static void simba__sql_mismatch(simba__sql *s, int asked, int64_t has, simba_reply *rep) {
    simba__reply_conflict(rep, s->err, sizeof s->err, asked, has);
}

/* An exclusive ask's look at the set (in its transaction, the row just read): live holdings
   (*nh; a holder's id back as a writer, a new incarnation, ends its holding) and *refused
   when the name is a semaphore's that anyone holds or waits on. */
static int simba__sql_writer_check(simba__sql *s, const char *mutex, const char *contender, int renew, int64_t *nh,
                                   int *hchanged, int *refused) {
    int64_t nq = 0;
    int rc;
    if (s->holders != 0) { /* readers or permits hold: an exclusive grant waits for them */
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_H_PURGE, mutex, NULL, "holders purge")) != SQLITE_OK) return rc;
        if (sqlite3_changes(s->db) > 0) *hchanged = 1;
        if (!renew) {
            if ((rc = simba__sql_step_on(s, SIMBA__SQL_H_LEAVE, mutex, contender, "holders leave")) != SQLITE_OK) return rc;
            if (sqlite3_changes(s->db) > 0) *hchanged = 1;
        }
        if ((rc = simba__sql_int_on(s, SIMBA__SQL_H_NUM, mutex, NULL, nh)) != SQLITE_OK) return rc;
    }
    if (s->permits_col > 1) {
        if ((rc = simba__sql_int_on(s, SIMBA__SQL_Q_NUM, mutex, contender, &nq)) != SQLITE_OK) return rc;
        *refused = *nh > 0 || nq > 0;
    }
    return SQLITE_OK;
}

/* >>queue The fairness rule, in one write transaction (BEGIN IMMEDIATE: nobody else can
   change the row or the queue between our reads and our writes):
     owner asks           -> renew (or a new ownership, without simba_req.renew)
     a renewal, lease over -> no grant, no place (a late renewal takes no fence)
     free, nobody queued  -> granted
     free, we are head    -> granted, we leave the queue
     free, another heads  -> we join (or keep our place); the head is woken (a dead one,
                             whose socket is gone, is dropped first)
     held by another      -> we join (or refresh our place), first_in_line when we head
   Dead (liveness passed) and malformed rows are dropped first; the waiters count is
   recomputed whenever the queue changed. */
/* A writer not granted takes its place in line (refreshed when it has one); the name's mode
   while a writer waits is one holder. */
static int simba__sql_writer_queue(simba__sql *s, const char *mutex, const char *contender, int64_t live_ms) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_Q_JOIN];
    int rc;
    simba__sql_bind2(st, mutex, contender);
    sqlite3_bind_int64(st, 3, live_ms);
    sqlite3_bind_int(st, 5, 0);
    sqlite3_bind_text(st, 7, s->wake_addr, -1, SQLITE_STATIC);
    if ((rc = simba__sql_step_simple(s, SIMBA__SQL_Q_JOIN, "queue join")) != SQLITE_OK) return rc;
    s->queued_until = simba__max(s->queued_until, simba__add(simba_now(s->loop), live_ms));
    if (s->permits_col == 1) return SQLITE_OK;
    st = s->st[SIMBA__SQL_SET_PERMITS];
    simba__sql_bind2(st, mutex, NULL);
    sqlite3_bind_int64(st, 3, 1);
    return simba__sql_step_simple(s, SIMBA__SQL_SET_PERMITS, "permits");
}

/* The waiters and holders counts of the row, recomputed after the queue or the set changed. */
static int simba__sql_recount(simba__sql *s, const char *mutex, int qchanged, int hchanged) {
    int rc;
    if (qchanged && (rc = simba__sql_step_on(s, SIMBA__SQL_Q_COUNT, mutex, NULL, "queue count")) != SQLITE_OK) return rc;
    return hchanged ? simba__sql_step_on(s, SIMBA__SQL_H_COUNT, mutex, NULL, "holders count") : SQLITE_OK;
}

static int simba__sql_contend(simba__sql *s, const char *mutex, const char *contender, int64_t ttl_ms,
                              int64_t transition_ms, int renew, int64_t live_ms, simba_reply *rep) {
    int rc, exists = 0, got = 0, changed = 0, first = 0, hchanged = 0, refused = 0;
    int64_t nh = 0;
    if ((rc = simba__sql_tx_begin(s)) != SQLITE_OK) return rc;
    rc = simba__sql_read_row(s, mutex, rep, &exists);
    if (rc != SQLITE_OK) goto fail;
    if (!exists) {
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_CREATE_ROW, mutex, NULL, "insert")) != SQLITE_OK) goto fail;
    }
    if (s->waiters != 0) {
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_Q_PURGE, mutex, NULL, "queue purge")) != SQLITE_OK) goto fail;
        if (sqlite3_changes(s->db) > 0) changed = 1;
        rc = simba__sql_live_head(s, mutex, contender, !s->owner[0], &changed);
        if (rc != SQLITE_OK) goto fail;
    } else {
        s->qhead[0] = 0;
    }
    if ((rc = simba__sql_writer_check(s, mutex, contender, renew, &nh, &hchanged, &refused)) != SQLITE_OK) goto fail;
    if (refused) { /* a semaphore's name: refused while anyone holds or waits */
        simba__sql_tx_abort(s);
        simba__sql_mismatch(s, 1, s->permits_col, rep);
        return SQLITE_OK;
    }
    first = !s->qhead[0] || strcmp(s->qhead, contender) == 0; /* the head of the line, or nobody waits */
    if (strcmp(s->owner, contender) == 0 || simba__grantable(1, (int)nh + (s->owner[0] != 0), s->owner[0] != 0, !first, 0, 0)) {
        rc = simba__sql_acquire_row(s, SIMBA__SQL_GRANT_ST, mutex, contender, ttl_ms, transition_ms, renew, rep, &got);
        if (rc != SQLITE_OK) goto fail;
        /* not granted (a row closed after a DELETE, see SIMBA__SQL_CREATE_ROW_TEXT): the head keeps its place */
        if (got && s->qhead[0] && (rc = simba__sql_leave(s, mutex, contender, &changed)) != SQLITE_OK) goto fail;
    }
    if (!got && !renew) { /* a renewal whose lease has ended takes no place: it asks anew */
        if ((rc = simba__sql_writer_queue(s, mutex, contender, live_ms)) != SQLITE_OK) goto fail;
        changed = 1;
    }
    if ((rc = simba__sql_recount(s, mutex, changed, hchanged)) != SQLITE_OK) goto fail;
    if (!got) {
        if ((rc = simba__sql_read_row(s, mutex, rep, &exists)) != SQLITE_OK) goto fail;
        /* readers or permits hold: the waiter times its next ask by the first to end */
        if (!s->owner[0] && nh > 0 && (rc = simba__sql_first_holder(s, mutex, rep)) != SQLITE_OK) goto fail;
        rep->holders = (int)simba__min(nh, SIMBA_PERMITS_MAX);
    }
    if ((rc = simba__sql_tx_commit(s)) != SQLITE_OK) goto fail;
    rep->first_in_line = !got && !renew && first;
    return SQLITE_OK;
fail:
    simba__sql_tx_abort(s);
    return rc;
}

static void simba__sql_wake_set(simba__sql *s, const char *mutex);

/* After a release committed: wake the oldest live waiter. The usual case is one read and
   one datagram; a head whose process is gone is dropped in a transaction and the next one
   woken (when the database is busy right now, the next contender's attempt drops it). */
static void simba__sql_wake_head(simba__sql *s, const char *mutex) {
    int changed = 0, rc;
    if (simba__sql_head(s, mutex, &changed) != SQLITE_OK || !s->qhead[0]) return;
    if (simba__sql_wake_send(s, s->qhead_wake, mutex, s->qhead) >= 0) {
        if (s->qhead_shared) simba__sql_wake_set(s, mutex); /* the readers behind it go together */
        return;
    }
    if (simba__sql_tx_begin(s) != SQLITE_OK) return;
    rc = simba__sql_live_head(s, mutex, NULL, 1, &changed);
    if (rc == SQLITE_OK && changed) {
        sqlite3_bind_text(s->st[SIMBA__SQL_Q_COUNT], 1, mutex, -1, SQLITE_STATIC);
        rc = simba__sql_run(s, SIMBA__SQL_Q_COUNT);
    }
    if (rc != SQLITE_OK || simba__sql_tx_commit(s) != SQLITE_OK) simba__sql_tx_abort(s);
}

/* A contender that stops while waiting leaves the line; when it headed the line of a free
   mutex, the next waiter is woken. */
static int simba__sql_quit_line(simba__sql *s, const char *mutex, const char *contender) {
    int rc, changed = 0;
    if ((rc = simba__sql_tx_begin(s)) != SQLITE_OK) return rc;
    rc = simba__sql_leave(s, mutex, contender, &changed);
    if (rc == SQLITE_OK && changed && !s->owner[0]) rc = simba__sql_live_head(s, mutex, NULL, 1, &changed);
    if (rc == SQLITE_OK && changed) {
        rc = simba__sql_step_on(s, SIMBA__SQL_Q_COUNT, mutex, NULL, "queue count");
    }
    if (rc == SQLITE_OK) {
        rc = simba__sql_tx_commit(s);
    }
    if (rc != SQLITE_OK) simba__sql_tx_abort(s);
    return rc;
}

/* After a holding or the owner row was freed, committed: push to each waiter the rule
   would grant now (each asks the database itself; a datagram never grants). */
static void simba__sql_wake_set(simba__sql *s, const char *mutex) {
    simba_reply rep;
    sqlite3_stmt *st;
    int64_t nh = 0, n, i = 0;
    char c[SIMBA_ID_MAX + 1], w[SIMBA__SQL_WAKE_MAX];
    if (simba__sql_read_row(s, mutex, &rep, NULL) != SQLITE_OK || s->owner[0]) return; /* a writer holds */
    n = s->permits_col > 1 ? s->permits_col : 1;
    if (simba__sql_int_on(s, SIMBA__SQL_H_NUM, mutex, NULL, &nh) != SQLITE_OK) return;
    st = s->st[SIMBA__SQL_Q_LIST];
    simba__sql_bind2(st, mutex, NULL);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int sh = sqlite3_column_int(st, 1) != 0;
        if (n > 1 ? i >= n - nh : (sh ? 0 : (i > 0 || nh > 0))) break;
        simba__copy(c, sizeof c, (const char *)sqlite3_column_text(st, 0));
        simba__copy(w, sizeof w, (const char *)sqlite3_column_text(st, 2));
        if (c[0] && simba_id_check(c) == SIMBA_OK) simba__sql_wake_send(s, w, mutex, c);
        if (n == 1 && !sh) break; /* a writer goes alone */
        i++;
    }
    sqlite3_reset(st);
}

/* What a reader's or a permit's ask reads in its transaction: live holdings of the set,
   waiters other than it, its place in line (-1: none) and the writers ahead of it. */
typedef struct simba__sql_setq {
    int64_t nh, nq, p, excl_ahead;
    int mainlive, qchanged, hchanged, freed_owner, first, granted;
} simba__sql_setq;

/* The row (made when missing), dead waiters and holdings dropped, then the counts. */
static int simba__sql_set_read(simba__sql *s, const char *mutex, const char *me, simba_reply *rep, simba__sql_setq *q) {
    sqlite3_stmt *st;
    int rc, exists = 0;
    if ((rc = simba__sql_read_row(s, mutex, rep, &exists)) != SQLITE_OK) return rc;
    if (!exists) {
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_CREATE_ROW, mutex, NULL, "insert")) != SQLITE_OK) return rc;
        if ((rc = simba__sql_read_row(s, mutex, rep, &exists)) != SQLITE_OK) return rc;
    }
    if (s->waiters != 0) {
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_Q_PURGE, mutex, NULL, "queue purge")) != SQLITE_OK) return rc;
        if (sqlite3_changes(s->db) > 0) q->qchanged = 1;
    }
    if (s->holders != 0) {
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_H_PURGE, mutex, NULL, "holders purge")) != SQLITE_OK) return rc;
        if (sqlite3_changes(s->db) > 0) q->hchanged = 1;
    }
    q->mainlive = s->owner[0] != 0;
    if ((rc = simba__sql_int_on(s, SIMBA__SQL_H_NUM, mutex, NULL, &q->nh)) != SQLITE_OK) return rc;
    st = s->st[SIMBA__SQL_Q_LIST];
    simba__sql_bind2(st, mutex, NULL);
    q->p = -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *c = (const char *)sqlite3_column_text(st, 0);
        if (q->p < 0 && c && strcmp(c, me) == 0) q->p = q->nq;
        else if (q->p < 0 && !sqlite3_column_int(st, 1)) q->excl_ahead++;
        if (!c || strcmp(c, me) != 0) q->nq++;
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) simba__sql_seterr(s, "queue list", rc);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The owner's id back as a reader (a new incarnation): its ownership ends, and it asks as
   anyone does. */
static int simba__sql_set_owner_back(simba__sql *s, const char *mutex, const char *me, simba__sql_setq *q) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_RELEASE_QUEUED];
    int rc;
    simba__sql_bind2(st, mutex, me);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) q->freed_owner = 1;
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        simba__sql_seterr(s, "release", rc);
        return rc;
    }
    q->mainlive = 0;
    return SQLITE_OK;
}

/* A new holding: the name's next fence, the row in the set, its place in line left. */
static int simba__sql_set_take(simba__sql *s, const simba_req *r, int n, simba__sql_setq *q) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_FENCE_NEXT];
    int64_t fence = 0;
    int rc;
    simba__sql_bind2(st, r->mutex, NULL);
    sqlite3_bind_int64(st, 3, n);
    if ((rc = simba__sql_int(s, SIMBA__SQL_FENCE_NEXT, &fence)) != SQLITE_OK) return rc;
    st = s->st[SIMBA__SQL_H_GRANT];
    simba__sql_bind2(st, r->mutex, r->contender);
    sqlite3_bind_int64(st, 3, r->ttl_ms);
    sqlite3_bind_int64(st, 4, r->ttl_ms + r->transition_ms);
    sqlite3_bind_int(st, 5, r->shared != 0);
    simba__sql_bind_value(s, st);
    sqlite3_bind_int64(st, 9, fence);
    if ((rc = simba__sql_step_simple(s, SIMBA__SQL_H_GRANT, "holders grant")) != SQLITE_OK) return rc;
    q->hchanged = 1;
    q->nh++;
    return q->p >= 0 ? simba__sql_leave(s, r->mutex, r->contender, &q->qchanged) : SQLITE_OK;
}

/* Not granted: a place in line (a reader's marked shared) and the name's permits recorded. */
static int simba__sql_set_queue(simba__sql *s, const simba_req *r, int n, int64_t live_ms, simba__sql_setq *q) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_Q_JOIN];
    int64_t pos = q->p >= 0 ? q->p : q->nq;
    int rc;
    simba__sql_bind2(st, r->mutex, r->contender);
    sqlite3_bind_int64(st, 3, live_ms);
    sqlite3_bind_int(st, 5, r->shared != 0);
    sqlite3_bind_text(st, 7, s->wake_addr, -1, SQLITE_STATIC);
    if ((rc = simba__sql_step_simple(s, SIMBA__SQL_Q_JOIN, "queue join")) != SQLITE_OK) return rc;
    q->qchanged = 1;
    s->queued_until = simba__max(s->queued_until, simba__add(simba_now(s->loop), live_ms));
    if (s->permits_col != n) {
        st = s->st[SIMBA__SQL_SET_PERMITS];
        simba__sql_bind2(st, r->mutex, NULL);
        sqlite3_bind_int64(st, 3, n);
        if ((rc = simba__sql_step_simple(s, SIMBA__SQL_SET_PERMITS, "permits")) != SQLITE_OK) return rc;
    }
    /* the next to be granted when a holding ends tries at its end exactly */
    q->first = pos <= (n > 1 ? n - q->nh : 0);
    return SQLITE_OK;
}

/* The rule (simba.h) for an ask of the set: a holder renews or asks anew (a new grant at
   the end), anyone else is granted or queued. */
static int simba__sql_set_decide(simba__sql *s, const simba_req *r, int n, int64_t live_ms, simba__sql_setq *q) {
    int64_t mine = 0, pos = q->p >= 0 ? q->p : q->nq;
    int rc;
    if ((rc = simba__sql_int_on(s, SIMBA__SQL_H_SELF, r->mutex, r->contender, &mine)) != SQLITE_OK) return rc;
    if (mine && r->renew) { /* a renewal: fence and acquired_at stay */
        sqlite3_stmt *st = s->st[SIMBA__SQL_H_RENEW];
        simba__sql_bind2(st, r->mutex, r->contender);
        sqlite3_bind_int64(st, 3, r->ttl_ms);
        sqlite3_bind_int64(st, 4, r->ttl_ms + r->transition_ms);
        q->granted = 1;
        return simba__sql_step_simple(s, SIMBA__SQL_H_RENEW, "holders renew");
    }
    if (mine) { /* the holder asking anew: a new grant, with a new fence */
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_H_LEAVE, r->mutex, r->contender, "holders leave")) != SQLITE_OK) return rc;
        q->nh--;
        q->granted = 1;
    } else {
        q->granted = simba__grantable(n, (int)q->nh, q->mainlive, (int)simba__min(pos, INT32_MAX), r->shared != 0, q->excl_ahead > 0);
    }
    if (r->renew && !mine) return SQLITE_OK; /* its holding has ended: no grant, no place */
    return q->granted ? simba__sql_set_take(s, r, n, q) : simba__sql_set_queue(s, r, n, live_ms, q);
}

/* ACQUIRE by a reader or for a permit of a semaphore, in one write transaction. */
static int simba__sql_contend_set(simba__sql *s, const simba_req *r, int64_t live_ms, simba_reply *rep) {
    int n = r->permits > 1 ? r->permits : 1, rc, got;
    int64_t recorded;
    simba__sql_setq q;
    memset(&q, 0, sizeof q);
    if ((rc = simba__sql_tx_begin(s)) != SQLITE_OK) return rc;
    if ((rc = simba__sql_set_read(s, r->mutex, r->contender, rep, &q)) != SQLITE_OK) goto fail;
    if (s->lost_left >= 0) { /* a row closed after a DELETE: no grant; the caller says why */
        simba__sql_tx_abort(s);
        s->owner[0] = 0;
        return SQLITE_OK;
    }
    recorded = q.mainlive ? 1 : s->permits_col;
    if (recorded > 0 && recorded != n && (q.mainlive || q.nh > 0 || q.nq > 0)) {
        simba__sql_tx_abort(s);
        simba__sql_mismatch(s, n, recorded, rep);
        return SQLITE_OK;
    }
    if (q.mainlive && strcmp(s->owner, r->contender) == 0 && (rc = simba__sql_set_owner_back(s, r->mutex, r->contender, &q)) != SQLITE_OK)
        goto fail;
    if ((rc = simba__sql_set_decide(s, r, n, live_ms, &q)) != SQLITE_OK) goto fail;
    if ((rc = simba__sql_recount(s, r->mutex, q.qchanged, q.hchanged)) != SQLITE_OK) goto fail;
    if (q.granted) {
        simba__sql_bind2(s->st[SIMBA__SQL_H_MINE], r->mutex, r->contender);
        if ((rc = simba__sql_hrow(s, SIMBA__SQL_H_MINE, rep, &got)) != SQLITE_OK) goto fail;
    } else if (!q.mainlive && (rc = simba__sql_first_holder(s, r->mutex, rep)) != SQLITE_OK) {
        goto fail;
    }
    if ((rc = simba__sql_tx_commit(s)) != SQLITE_OK) goto fail;
    rep->holders = (int)simba__min(q.nh + q.mainlive, SIMBA_PERMITS_MAX);
    rep->first_in_line = q.first;
    if (q.freed_owner) {
        if (s->batch) s->batch_wake = 1;
        else simba__sql_wake_head(s, r->mutex);
    }
    return SQLITE_OK;
fail:
    simba__sql_tx_abort(s);
    return rc;
}

/* RELEASE of a holding of the set, in one write transaction; *released says whether the
   contender held one. */
static int simba__sql_release_hold(simba__sql *s, const char *mutex, const char *contender, int *released) {
    int rc;
    *released = 0;
    if ((rc = simba__sql_tx_begin(s)) != SQLITE_OK) return rc;
    if ((rc = simba__sql_step_on(s, SIMBA__SQL_H_LEAVE, mutex, contender, "holders release")) != SQLITE_OK) goto fail;
    *released = sqlite3_changes(s->db) > 0;
    if (*released) {
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_H_COUNT, mutex, NULL, "holders count")) != SQLITE_OK) goto fail;
    }
    if ((rc = simba__sql_tx_commit(s)) != SQLITE_OK) goto fail;
    return SQLITE_OK;
fail:
    *released = 0;
    simba__sql_tx_abort(s);
    return rc;
}

/* >>kept A waiter that will not be granted now (the row is held by another, or free and
   kept for another head) and whose place still lives needs no queue transaction: the answer
   is the row as read and whether it heads the line, what the queue's transaction would
   say. A place that outlives the waiter's next ask needs no write at all; one that would
   lapse first is pushed on by one UPDATE of its own row (every ask of a waiter that sleeps
   through other owners' renewals: a place outlives an ask by a second only). *kept = 0
   sends it down the full path (it may win, it has no live place, or a free row's head is
   gone and must be dropped). After the row was read into rep. */
static int simba__sql_kept_place(simba__sql *s, const char *mutex, const char *contender, int64_t live_ms,
                                 simba_reply *rep, int *kept) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_Q_SELF];
    int rc, changed = 0, free_row = !s->owner[0];
    int64_t left = -1;
    char owner[SIMBA_ID_MAX + 1];
    *kept = 0;
    sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) left = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        simba__sql_seterr(s, "queue place", rc);
        return rc;
    }
    if (left < 0) return SQLITE_OK; /* no live place: the queue's transaction joins it */
    memcpy(owner, s->owner, sizeof owner);
    if ((rc = simba__sql_head(s, mutex, &changed)) != SQLITE_OK) return rc;
    memcpy(s->owner, owner, sizeof owner);
    rep->owner = s->owner;
    if (!s->qhead[0] || strcmp(s->qhead, contender) == 0) {
        if (free_row) return SQLITE_OK; /* ours to take: the full path grants it */
        rep->first_in_line = 1;
    } else if (free_row && simba__sql_wake_send(s, s->qhead_wake, mutex, s->qhead) < 0) {
        return SQLITE_OK; /* the head's process is gone: the full path drops it */
    }
    if (left < s->next_ask_ms) {
        st = s->st[SIMBA__SQL_Q_REFRESH];
        sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, live_ms);
        sqlite3_bind_text(st, 7, s->wake_addr, -1, SQLITE_STATIC);
        if ((rc = simba__sql_step_simple(s, SIMBA__SQL_Q_REFRESH, "queue refresh")) != SQLITE_OK) return rc;
        if (sqlite3_changes(s->db) != 1) return SQLITE_OK; /* lapsed since it was read */
        s->queued_until = simba__max(s->queued_until, simba__add(simba_now(s->loop), live_ms));
        s->refreshed_places++;
    } else {
        s->kept_places++;
    }
    *kept = 1;
    return SQLITE_OK;
}

/* A waiter's ask, answered without the queue's transaction when it can be (>>kept): reads
   the row into rep; *held: another owns it; *kept: answered. */
static int simba__sql_ask_kept(simba__sql *s, const char *mutex, const char *contender, int renew, int64_t live_ms,
                               simba_reply *rep, int *held, int *kept) {
    int exists, rc;
    *kept = 0;
    if ((rc = simba__sql_read_row(s, mutex, rep, &exists)) != SQLITE_OK) return rc;
    *held = exists && s->owner[0] && strcmp(s->owner, contender) != 0;
    if (s->next_ask_ms > 0 && !renew && exists && s->waiters > 0 && s->holders == 0 && (*held || !s->owner[0]))
        return simba__sql_kept_place(s, mutex, contender, live_ms, rep, kept);
    return SQLITE_OK;
}

/* SIMBA_EFENCE for a SET_VALUE or YIELD whose fence no longer holds (the row just read
   says who holds it now). */
static void simba__sql_not_held(simba__sql *s, const simba_req *r, simba_reply *rep, const char *what) {
    if (s->owner[0])
        snprintf(s->err, sizeof s->err, "sqlite %s: %s no longer holds mutex %s with fence %llu: %s holds it with fence %llu",
                 what, r->contender, r->mutex, (unsigned long long)r->fence, s->owner, (unsigned long long)rep->fence);
    else
        snprintf(s->err, sizeof s->err, "sqlite %s: %s no longer holds mutex %s with fence %llu: nobody holds it", what,
                 r->contender, r->mutex, (unsigned long long)r->fence);
    simba__reply_fail(rep, SIMBA_EFENCE, s->err);
}

/* Proclaim: one UPDATE replaces the value while the contender holds the fence and its lease
   lives (SIMBA__SQL_SET_VALUE_TEXT); else the row as it is, and SIMBA_ESTATE. On a file
   nobody is pushed: observers read the new value at their next refresh, as a new owner. */
static int simba__sql_set_value(simba__sql *s, const simba_req *r, simba_reply *rep) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_SET_VALUE];
    int rc, got;
    sqlite3_bind_text(st, 1, r->mutex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->contender, -1, SQLITE_STATIC);
    simba__sql_bind_value(s, st);
    sqlite3_bind_int64(st, 9, (sqlite3_int64)r->fence);
    if ((rc = simba__sql_row(s, SIMBA__SQL_SET_VALUE, rep, &got)) != SQLITE_OK) return rc;
    if (got && strcmp(s->owner, r->contender) == 0) {
        rep->rc = SIMBA_OK;
        return SQLITE_OK;
    }
    if (r->permits > 1 || r->shared) { /* a holding of the set: its own value */
        st = s->st[SIMBA__SQL_H_SET_VALUE];
        simba__sql_bind2(st, r->mutex, r->contender);
        simba__sql_bind_value(s, st);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)r->fence);
        if ((rc = simba__sql_hrow(s, SIMBA__SQL_H_SET_VALUE, rep, &got)) != SQLITE_OK) return rc;
        if (got) {
            rep->rc = SIMBA_OK;
            return SQLITE_OK;
        }
    }
    if ((rc = simba__sql_read_row(s, r->mutex, rep, NULL)) != SQLITE_OK) return rc;
    simba__sql_not_held(s, r, rep, "set_value");
    return SQLITE_OK;
}

/* A holding's yield that passes (in its transaction): the holding goes, the contender joins
   the back of the line (a reader's place marked shared), and the answer names the holding
   that frees first, as a waiter's does. */
static int simba__sql_yield_pass(simba__sql *s, const simba_req *r, int64_t live_ms, simba__sql_setq *q, simba_reply *rep) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_Q_JOIN];
    int rc;
    if ((rc = simba__sql_step_on(s, SIMBA__SQL_H_LEAVE, r->mutex, r->contender, "holders yield")) != SQLITE_OK) return rc;
    q->hchanged = 1;
    q->nh--;
    if (q->p >= 0 && (rc = simba__sql_leave(s, r->mutex, r->contender, &q->qchanged)) != SQLITE_OK) return rc;
    simba__sql_bind2(st, r->mutex, r->contender);
    sqlite3_bind_int64(st, 3, live_ms);
    sqlite3_bind_int(st, 5, r->shared != 0);
    sqlite3_bind_text(st, 7, s->wake_addr, -1, SQLITE_STATIC);
    if ((rc = simba__sql_step_simple(s, SIMBA__SQL_Q_JOIN, "queue join")) != SQLITE_OK) return rc;
    q->qchanged = 1;
    simba__reply_none(rep)->yielded = 1;
    return simba__sql_first_holder(s, r->mutex, rep);
}

/* Yield of a reader or a permit, in one write transaction (a savepoint in a batch): while
   the contender holds its holding with req->fence and the permit, once free, goes to a live
   waiter the rule does not grant now (the next permit's, or a writer no other reader holds
   back), the holding passes (simba__sql_yield_pass) and the waiters it frees are pushed
   after the commit; else nothing changes (yielded 0, the answer is its own holding). */
static int simba__sql_yield_set(simba__sql *s, const simba_req *r, int64_t live_ms, simba_reply *rep) {
    int n = r->permits > 1 ? r->permits : 1, rc, got = 0, frees;
    int64_t fence = 0;
    simba__sql_setq q;
    memset(&q, 0, sizeof q);
    if ((rc = simba__sql_tx_begin(s)) != SQLITE_OK) return rc;
    if ((rc = simba__sql_set_read(s, r->mutex, r->contender, rep, &q)) != SQLITE_OK) goto fail;
    if ((rc = simba__sql_int_on(s, SIMBA__SQL_H_SELF, r->mutex, r->contender, &fence)) != SQLITE_OK) goto fail;
    if (fence <= 0 || (uint64_t)fence != r->fence) {
        simba__sql_tx_abort(s); /* nothing was written */
        simba__sql_not_held(s, r, rep, "yield");
        return SQLITE_OK;
    }
    frees = q.nq > 0 && (n > 1 ? q.nq > n - q.nh : !q.mainlive && q.nh == 1);
    if (frees) {
        if ((rc = simba__sql_yield_pass(s, r, live_ms, &q, rep)) != SQLITE_OK) goto fail;
    } else {
        simba__sql_bind2(s->st[SIMBA__SQL_H_MINE], r->mutex, r->contender);
        if ((rc = simba__sql_hrow(s, SIMBA__SQL_H_MINE, rep, &got)) != SQLITE_OK) goto fail;
    }
    if ((rc = simba__sql_recount(s, r->mutex, q.qchanged, q.hchanged)) != SQLITE_OK) goto fail;
    if ((rc = simba__sql_tx_commit(s)) != SQLITE_OK) goto fail;
    rep->holders = (int)simba__min(q.nh, SIMBA_PERMITS_MAX);
    rep->rc = SIMBA_OK;
    if (frees) {
        s->queued_until = simba__max(s->queued_until, simba__add(simba_now(s->loop), live_ms));
        if (s->batch) {
            s->batch_wake = 2;
        } else { /* the push reads the name's row into s->owner and s->value: the answer's holder again */
            simba__sql_wake_set(s, r->mutex);
            if (simba__sql_first_holder(s, r->mutex, rep) != SQLITE_OK) s->owner[0] = 0;
        }
        if (s->memory && s->be) simba_backend_event(s->be, SIMBA_EV_RELEASED, r->mutex, NULL, NULL);
    }
    return SQLITE_OK;
fail:
    simba__sql_tx_abort(s);
    return rc;
}

/* Yield, in one write transaction (a savepoint in a batch): while the contender holds the
   mutex with req->fence and a live waiter other than it stands in line, the row is cleared
   as a release clears it and the contender joins the back of the line (liveness live_ms);
   the head is woken once it is committed, as after a release. With nobody live in line
   nothing changes (yielded 0, the row as it is). */
static int simba__sql_yield(simba__sql *s, const simba_req *r, int64_t live_ms, simba_reply *rep) {
    sqlite3_stmt *st;
    int rc, exists = 0, changed = 0, passed = 0;
    if (r->permits > 1 || r->shared) return simba__sql_yield_set(s, r, live_ms, rep);
    if ((rc = simba__sql_tx_begin(s)) != SQLITE_OK) return rc;
    if ((rc = simba__sql_read_row(s, r->mutex, rep, &exists)) != SQLITE_OK) goto fail;
    if (strcmp(s->owner, r->contender) != 0 || rep->fence != r->fence) {
        simba__sql_tx_abort(s); /* nothing was written */
        simba__sql_not_held(s, r, rep, "yield");
        return SQLITE_OK;
    }
    if (s->waiters > 0) {
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_Q_PURGE, r->mutex, NULL, "queue purge")) != SQLITE_OK) goto fail;
        if (sqlite3_changes(s->db) > 0) changed = 1;
        if ((rc = simba__sql_leave(s, r->mutex, r->contender, &changed)) != SQLITE_OK) goto fail;
        if ((rc = simba__sql_head(s, r->mutex, &changed)) != SQLITE_OK) goto fail;
    } else {
        s->qhead[0] = 0;
    }
    if (s->qhead[0]) {
        st = s->st[SIMBA__SQL_RELEASE_QUEUED];
        sqlite3_bind_text(st, 1, r->mutex, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, r->contender, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) passed = 1;
        sqlite3_reset(st);
        if (rc != SQLITE_DONE || !passed) {
            if (rc == SQLITE_DONE) rc = SQLITE_ERROR;
            if (!simba__sql_is_busy(rc)) simba__sql_seterr(s, "yield", rc);
            goto fail;
        }
        st = s->st[SIMBA__SQL_Q_JOIN];
        sqlite3_bind_text(st, 1, r->mutex, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, r->contender, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, live_ms);
        sqlite3_bind_int(st, 5, 0);
        sqlite3_bind_text(st, 7, s->wake_addr, -1, SQLITE_STATIC);
        if ((rc = simba__sql_step_simple(s, SIMBA__SQL_Q_JOIN, "queue join")) != SQLITE_OK) goto fail;
        changed = 1;
    }
    if (changed) {
        if ((rc = simba__sql_step_on(s, SIMBA__SQL_Q_COUNT, r->mutex, NULL, "queue count")) != SQLITE_OK) goto fail;
    }
    if ((rc = simba__sql_tx_commit(s)) != SQLITE_OK) goto fail;
    if (passed) {
        s->queued_until = simba__max(s->queued_until, simba__add(simba_now(s->loop), live_ms));
        simba__reply_none(rep)->yielded = 1;
        s->owner[0] = 0;
        rep->owner = s->owner;
        if (s->batch) s->batch_wake = 1;
        else simba__sql_wake_head(s, r->mutex);
        if (s->memory && s->be) simba_backend_event(s->be, SIMBA_EV_RELEASED, r->mutex, NULL, NULL);
    }
    rep->rc = SIMBA_OK;
    return SQLITE_OK;
fail:
    simba__sql_tx_abort(s);
    return rc;
}

/* The statements' NOW in ms since the epoch: the loop's clock with test_clock, else the
   wall clock that julianday('now') reads (the VFS's xCurrentTimeInt64: gettimeofday), read
   here once and bound, which costs a tenth of evaluating the date function at every use. */
static int64_t simba__sql_now(simba__sql *s) {
    struct timespec ts;
    if (s->loop_clock) return simba_now(s->loop);
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* RELEASE: the owner row's (pushed to the head, or the readers it frees), else a holding of
   the set's (pushed to whom it frees), else a place in line left. SQLITE_OK with rep. */
static int simba__sql_release_req(simba__sql *s, const char *mutex, const char *contender, simba_reply *rep) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_RELEASE_ST];
    int64_t waiters = 0;
    int released = 0, rc;
    sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_DONE && sqlite3_changes(s->db) == 1) {
        released = 1;
    } else if (rc == SQLITE_DONE) { /* someone waits, or it is not ours */
        st = s->st[SIMBA__SQL_RELEASE_QUEUED];
        sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, contender, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            released = 1;
            waiters = sqlite3_column_int64(st, 0);
            rc = sqlite3_step(st);
        }
        sqlite3_reset(st);
    }
    if (rc != SQLITE_DONE) {
        simba__sql_seterr(s, "release", rc);
        return rc;
    }
    if (released) {
        /* Released: nobody owns it now; the oldest waiter hears of it at once. */
        s->owner[0] = 0;
        rep->owner = s->owner;
        if (waiters > 0 && s->batch) s->batch_wake = 1;
        else if (waiters > 0) simba__sql_wake_head(s, mutex);
        /* Other contenders of this backend learn at once (other connections through
           PRAGMA data_version in process()). */
        if (s->memory && s->be) simba_backend_event(s->be, SIMBA_EV_RELEASED, mutex, NULL, NULL);
    } else {
        /* Not ours: a holding of the set, or say who owns it and leave the line if we
           stood in it. */
        int held = 0;
        if ((rc = simba__sql_read_row(s, mutex, rep, NULL)) != SQLITE_OK) return rc;
        if (s->holders > 0 && (rc = simba__sql_release_hold(s, mutex, contender, &held)) != SQLITE_OK) return rc;
        if (held) {
            simba__reply_none(rep)->owner = s->owner;
            s->owner[0] = 0;
            if (s->batch) s->batch_wake = 2;
            else simba__sql_wake_set(s, mutex);
            if (s->memory && s->be) simba_backend_event(s->be, SIMBA_EV_RELEASED, mutex, NULL, NULL);
        } else if (s->waiters > 0) {
            char owner[SIMBA_ID_MAX + 1];
            memcpy(owner, s->owner, sizeof owner);
            if ((rc = simba__sql_quit_line(s, mutex, contender)) != SQLITE_OK) return rc;
            memcpy(s->owner, owner, sizeof owner);
        }
    }
    return SQLITE_OK;
}

/* Executes one request. renew: the contender owns the mutex locally (simba_req.renew);
   live_ms: how long its place in the wait queue lasts (simba_req.live_ms).
   Returns SIMBA__SQL_BUSY when the database was locked (nothing changed: try again later);
   otherwise 0 with *rep filled (rep->owner, rep->errmsg point into s until the next call). */
/* One instant for the whole request, as the database clock gives: ?6 of every statement
   that reads the clock. */
static void simba__sql_bind_now(simba__sql *s) {
    static const int with_now[] = {SIMBA__SQL_CREATE_ROW, SIMBA__SQL_ACQUIRE_ST, SIMBA__SQL_GRANT_ST, SIMBA__SQL_READ_ST,
                                   SIMBA__SQL_Q_PURGE,    SIMBA__SQL_Q_HEAD,   SIMBA__SQL_Q_JOIN,
                                   SIMBA__SQL_Q_SELF,     SIMBA__SQL_Q_REFRESH, SIMBA__SQL_SET_VALUE,
                                   SIMBA__SQL_H_PURGE,    SIMBA__SQL_H_NUM,    SIMBA__SQL_H_SELF, SIMBA__SQL_H_RENEW,
                                   SIMBA__SQL_H_GRANT,    SIMBA__SQL_H_MINE,   SIMBA__SQL_H_FIRST,
                                   SIMBA__SQL_H_SET_VALUE, SIMBA__SQL_H_FORCE, SIMBA__SQL_Q_NUM, SIMBA__SQL_Q_LIST};
    int64_t now = simba__sql_now(s);
    size_t i;
    for (i = 0; i < sizeof with_now / sizeof with_now[0]; i++) sqlite3_bind_int64(s->st[with_now[i]], 6, now);
}

/* ACQUIRE. Hot path: one UPDATE ... RETURNING (renewal, or a free row nobody waits for). A
   waiter reads first: while someone else's lease lasts the UPDATE could not succeed.
   Everything else (a queue, another's lease, no row yet) is decided by simba__sql_contend
   in one transaction; a reader's or a permit's by simba__sql_contend_set. */
static int simba__sql_acquire_req(simba__sql *s, const char *mutex, const char *contender, int64_t ttl_ms,
                                  int64_t transition_ms, int expect_win, int renew, int64_t live_ms, simba_reply *rep) {
    int got = 0, held = 0, kept = 0, rc;
    if (s->cur && (s->cur->permits > 1 || s->cur->shared)) return simba__sql_contend_set(s, s->cur, live_ms, rep);
    if (!expect_win) {
        if ((rc = simba__sql_ask_kept(s, mutex, contender, renew, live_ms, rep, &held, &kept)) != SQLITE_OK || kept) return rc;
    }
    if (!held) {
        rc = simba__sql_acquire_row(s, SIMBA__SQL_ACQUIRE_ST, mutex, contender, ttl_ms, transition_ms, renew, rep, &got);
        if (rc != SQLITE_OK) return rc;
    }
    return got ? SQLITE_OK : simba__sql_contend(s, mutex, contender, ttl_ms, transition_ms, renew, live_ms, rep);
}

static int simba__sql_exec_req(simba__sql *s, simba_op op, const char *mutex, const char *contender, int64_t ttl_ms,
                               int64_t transition_ms, int expect_win, int renew, int64_t live_ms, simba_reply *rep) {
    int rc;
    simba__reply_none(rep);
    rc = simba__sql_setup(s);
    if (rc != SQLITE_OK) goto fail;
    simba__sql_bind_now(s);
    if (op == SIMBA_OP_READ) {
        rc = simba__sql_read_row(s, mutex, rep, NULL);
        if (rc != SQLITE_OK) goto fail;
        rep->rc = SIMBA_OK;
        return 0;
    }
    if (op == SIMBA_OP_SET_VALUE || op == SIMBA_OP_YIELD) { /* rep->rc says whether the fence held */
        if (!s->cur) {
            snprintf(s->err, sizeof s->err, "sqlite: set_value and yield come from the core only");
            rc = SQLITE_MISUSE;
            goto fail;
        }
        rc = op == SIMBA_OP_SET_VALUE ? simba__sql_set_value(s, s->cur, rep) : simba__sql_yield(s, s->cur, live_ms, rep);
        if (rc != SQLITE_OK) goto fail;
        return 0;
    }
    rc = op == SIMBA_OP_ACQUIRE ? simba__sql_acquire_req(s, mutex, contender, ttl_ms, transition_ms, expect_win, renew, live_ms, rep)
                                : simba__sql_release_req(s, mutex, contender, rep);
    if (rc != SQLITE_OK) goto fail;
    if (rep->rc != SIMBA_OK) return 0; /* refused by the store, in words (the permits) */
    if (op == SIMBA_OP_ACQUIRE && !s->owner[0] && s->lost_left >= 0) goto lost;
    rep->rc = SIMBA_OK;
    return 0;
lost: /* an error, as a store that lost its data answers: the core backs off and asks again */
    {
        int64_t left = s->lost_left;
        snprintf(s->err, sizeof s->err, "sqlite: rows of table %s were deleted under a live lease, whose owner may not "
                 "know it lost: no new owner for %lld ms more", s->table, (long long)left);
        simba__reply_fail(rep, SIMBA_EBACKEND, s->err);
        return 0;
    }
fail:
    if (simba__sql_is_busy(rc)) return SIMBA__SQL_BUSY;
    simba__reply_fail(rep, SIMBA_EBACKEND, s->err);
    return 0;
}

/* The same, renewing when the stored owner is the contender with a live lease (tools,
   benchmarks, tests); a queued place lasts as long as the core would keep it for this timing. */
static int simba__sql_exec(simba__sql *s, simba_op op, const char *mutex, const char *contender, int64_t ttl_ms,
                           int64_t transition_ms, int expect_win, simba_reply *rep) {
    int rc, renew = 0;
    if (op == SIMBA_OP_ACQUIRE) {
        rc = simba__sql_exec_req(s, SIMBA_OP_READ, mutex, "", 0, 0, 0, 0, 0, rep);
        if (rc != 0) return rc;
        renew = rep->owner && strcmp(rep->owner, contender) == 0 && rep->transition_left_ms >= 0;
    }
    return simba__sql_exec_req(s, op, mutex, contender, ttl_ms, transition_ms, expect_win, renew,
                               simba__add(simba__add(ttl_ms, transition_ms), 2000), rep);
}

static int64_t simba__sql_busy_limit(const simba__sql *s, const simba_req *r) {
    int64_t lim;
    if (s->busy_max_ms > 0) return s->busy_max_ms;
    lim = r->op == SIMBA_OP_ACQUIRE ? r->ttl_ms / 2 : 1000;
    return lim < s->retry_ms ? s->retry_ms : lim;
}

static int simba__sql_exec_one(simba__sql *s, const simba_req *r, simba_reply *rep) {
    int rc;
    s->executed++;
    s->next_ask_ms = r->op == SIMBA_OP_ACQUIRE && !r->renew ? r->next_ask_ms : 0;
    s->cur = r;
    /* A waiter's timer ask at the lease end it knows expects to win, but mostly finds the
       lease renewed (owners renew well before it ends): it reads first, as an ask that
       expects the mutex held does, and skips the UPDATE that would take nothing. */
    rc = simba__sql_exec_req(s, r->op, r->mutex, r->contender, r->ttl_ms, r->transition_ms,
                             r->expect_win && r->deferrable != SIMBA_DEFER_TAKEOVER, r->renew,
                             r->live_ms > 0 ? r->live_ms : simba__add(simba__add(r->ttl_ms, r->transition_ms), 2000), rep);
    s->next_ask_ms = 0;
    s->cur = NULL;
    return rc;
}

static simba_req *simba__sql_pop(simba__sql *s) {
    simba_req *r = s->head;
    s->head = r->next_;
    if (!s->head) s->tail = NULL;
    r->next_ = NULL;
    return r;
}

/* The database is locked: the head request waits for the next try, or fails once it has
   waited its limit (returns 1 then: go on with the next). */
static int simba__sql_busy_head(simba__sql *s, int64_t now) {
    simba_req *r = s->head;
    int64_t waited = now - r->sent_at;
    if (waited < simba__sql_busy_limit(s, r)) {
        s->next_try = simba__add(now, s->retry_ms);
        return 0;
    }
    {
        char last[sizeof s->err];
        memcpy(last, s->err, sizeof last);
        snprintf(s->err, sizeof s->err, "database locked, gave up after %lld ms (%.400s)", (long long)waited, last);
    }
    simba_req_fail(simba__sql_pop(s), SIMBA_EBUSY, s->err);
    return 1;
}

/* The COMMIT's cost per request, learnt from the batches' commits: a moving average, each
   sample at most 4 times the average so far, so that a commit that waited for the disk
   (or was preempted) does not shrink the batches that follow for long. A checkpoint inside
   a commit (checkpoint = 0) is such a wait: no budget bounds it. */
static void simba__sql_commit_learn(simba__sql *s, int n, int64_t us) {
    int64_t ns;
    if (n < 1 || us < 0) return;
    ns = us * 1000 / n;
    if (s->commit_ns == 0) s->commit_ns = ns < SIMBA__SQL_COMMIT_NS0 ? ns : SIMBA__SQL_COMMIT_NS0;
    if (ns > 4 * s->commit_ns) ns = 4 * s->commit_ns;
    s->commit_ns += (ns - s->commit_ns) / 8;
    if (s->commit_ns < 1) s->commit_ns = 1;
}

/* Another connection committed since this one's last batch (simba_sql_checkpoint()
   starting the WAL over, another process): SQLite has dropped this connection's page cache,
   and the batch's statements and COMMIT read and write it all again (about 5 times a warm
   batch's cost a request). Such a batch reserves SIMBA__SQL_COLD times the COMMIT and
   teaches the estimate nothing. Returns that factor (1: warm). */
static int simba__sql_cold(simba__sql *s) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_DATA_VERSION];
    int64_t dv;
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_reset(st);
        return SIMBA__SQL_COLD;
    }
    dv = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (dv == s->batch_dv) return 1;
    s->batch_dv = dv;
    return SIMBA__SQL_COLD;
}

/* 1 when a batch of n requests and its COMMIT, at the cost learnt, fit in the poll's
   budget left (always outside a poll). */
static int simba__sql_commit_fits(simba__sql *s, int n) {
    int64_t left = simba_poll_budget_left_us(s->loop);
    return left == INT64_MAX || left * 1000 >= (int64_t)n * s->commit_ns;
}

/* >>inspect  Prepared at each use (inspection is rare) and without the setup, which writes:
   a store that never held anything answers "nothing" (no table yet). Returns 0 with the
   views handed to the core, SIMBA__SQL_BUSY, or -1 with s->err set. */
static int simba__sql_prepare_view(simba__sql *s, const char *text, sqlite3_stmt **st, int *absent) {
    char sql[1024];
    int rc;
    *st = NULL;
    *absent = 0;
    if (!simba__sql_expand(s, text, sql, sizeof sql)) return SQLITE_ERROR;
    rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
    if (rc == SQLITE_ERROR && strncmp(sqlite3_errmsg(s->db), "no such table", 13) == 0) { *absent = 1; return SQLITE_OK; }
    if (rc != SQLITE_OK) simba__sql_seterr(s, "inspect", rc);
    return rc;
}

/* One row of SIMBA__SQL_VIEW_COLS into v; a lease fully over is nobody's. v->value points
   into st's row (valid until its next step). -1 (s->err says) when the value is over
   SIMBA_VALUE_MAX. */
static int simba__sql_view_row(simba__sql *s, sqlite3_stmt *st, simba_view *v) {
    const char *m = (const char *)sqlite3_column_text(st, 0), *o = (const char *)sqlite3_column_text(st, 1);
    memset(v, 0, sizeof *v);
    simba__copy(v->mutex, sizeof v->mutex, m);
    v->fence = (uint64_t)sqlite3_column_int64(st, 2);
    v->acquired_unix_ms = v->held_ms = v->ttl_left_ms = v->transition_left_ms = v->lease_ms = SIMBA_UNKNOWN_MS;
    v->waiters = -1;
    if (o && o[0] && sqlite3_column_int64(st, 6) >= 0) {
        simba__copy(v->owner, sizeof v->owner, o);
        v->acquired_unix_ms = sqlite3_column_int64(st, 3);
        v->held_ms = sqlite3_column_int64(st, 4);
        v->ttl_left_ms = sqlite3_column_int64(st, 5);
        v->transition_left_ms = sqlite3_column_int64(st, 6);
        v->value_len = (size_t)sqlite3_column_bytes(st, 7);
        v->value = v->value_len > 0 ? (const unsigned char *)sqlite3_column_blob(st, 7) : NULL;
        if (v->value_len > SIMBA_VALUE_MAX) {
            snprintf(s->err, sizeof s->err, "sqlite inspect: the owner's value of %s in table %s is %zu bytes, over "
                     "SIMBA_VALUE_MAX (%d)", v->mutex, s->table, v->value_len, SIMBA_VALUE_MAX);
            return -1;
        }
    }
    return 0;
}

static int simba__sql_waiters(simba__sql *s, const char *mutex, int64_t now, simba_view *v) {
    sqlite3_stmt *st;
    int absent, rc = simba__sql_prepare_view(s, SIMBA__SQL_WAITERS_TEXT, &st, &absent);
    v->waiters = 0;
    if (rc != SQLITE_OK || absent) return rc;
    sqlite3_bind_text(st, 1, mutex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, now);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (v->waiters < SIMBA_VIEW_WAITERS) simba__copy(v->waiter[v->waiters], sizeof v->waiter[0], (const char *)sqlite3_column_text(st, 0));
        v->waiters++;
    }
    if (rc != SQLITE_DONE) simba__sql_seterr(s, "inspect (queue)", rc);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The holders of a view's name into v (the owner row's first, then the set's, oldest grant
   first); *buf and *arr, allocated here, keep them and their values until the caller frees
   them (simba__sql_view_holders_free). */
typedef struct simba__sql_vh {
    simba_view_holder h;
    unsigned char value[SIMBA_VALUE_MAX];
} simba__sql_vh;
#define SIMBA__SQL_HOLDERS_TEXT                                                                      \
    "SELECT h.contender, h.fence, h.shared, h.acquired_at, ?6 - h.acquired_at, h.ttl_at - ?6,"      \
    " h.transition_at - ?6, h.value, t.permits FROM {H} h JOIN {T} t ON t.mutex = h.mutex"          \
    " WHERE h.mutex = ?1 AND h.transition_at >= ?6 ORDER BY h.fence"
/* The owner row's holder of view v into e. */
static void simba__sql_vh_owner(const simba_view *v, simba__sql_vh *e) {
    simba__view_owner_holder(v, &e->h);
    if (v->value_len) memcpy(e->value, v->value, v->value_len);
}
/* One holding row of SIMBA__SQL_HOLDERS_TEXT into e; SQLITE_MISMATCH (s->err says) when
   its value is over SIMBA_VALUE_MAX. */
static int simba__sql_vh_row(simba__sql *s, sqlite3_stmt *st, const char *mutex, simba__sql_vh *e) {
    int vl = sqlite3_column_bytes(st, 7);
    memset(&e->h, 0, sizeof e->h);
    simba__copy(e->h.id, sizeof e->h.id, (const char *)sqlite3_column_text(st, 0));
    e->h.fence = (uint64_t)sqlite3_column_int64(st, 1);
    e->h.shared = sqlite3_column_int(st, 2) != 0;
    e->h.acquired_unix_ms = sqlite3_column_int64(st, 3);
    e->h.held_ms = sqlite3_column_int64(st, 4);
    e->h.ttl_left_ms = sqlite3_column_int64(st, 5);
    e->h.transition_left_ms = sqlite3_column_int64(st, 6);
    if (vl > SIMBA_VALUE_MAX) {
        snprintf(s->err, sizeof s->err, "sqlite inspect: a holder's value of %s in table %s_hold is %d bytes, over "
                 "SIMBA_VALUE_MAX (%d)", mutex, s->table, vl, SIMBA_VALUE_MAX);
        return SQLITE_MISMATCH;
    }
    if (vl > 0) memcpy(e->value, sqlite3_column_blob(st, 7), (size_t)vl);
    e->h.value_len = vl > 0 ? (size_t)vl : 0;
    return SQLITE_OK;
}
static int simba__sql_view_holders(simba__sql *s, int64_t now, simba_view *v, simba__sql_vh **buf, simba_view_holder **arr_out) {
    sqlite3_stmt *st;
    int absent, n = 0, cap = 0, permits = 1, rc;
    simba__sql_vh *b = NULL;
    *buf = NULL;
    *arr_out = NULL;
    if (v->owner[0]) { /* the owner row's holder: a mutex's owner or a writer */
        if (!(b = (simba__sql_vh *)simba_alloc(s->loop, 4 * sizeof *b))) return SQLITE_NOMEM;
        cap = 4;
        simba__sql_vh_owner(v, &b[0]);
        n = 1;
    }
    rc = simba__sql_prepare_view(s, SIMBA__SQL_HOLDERS_TEXT, &st, &absent);
    if (rc == SQLITE_ERROR && strstr(sqlite3_errmsg(s->db), "no such column")) { rc = SQLITE_OK; absent = 1; }
    if (rc != SQLITE_OK || absent) goto out;
    sqlite3_bind_text(st, 1, v->mutex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, now);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            int nc = cap ? cap * 2 : 4;
            simba__sql_vh *nb = (simba__sql_vh *)simba_alloc(s->loop, (size_t)nc * sizeof *nb);
            if (!nb) { rc = SQLITE_NOMEM; break; }
            if (n) memcpy(nb, b, (size_t)n * sizeof *b);
            simba_free(s->loop, b);
            b = nb;
            cap = nc;
        }
        if ((rc = simba__sql_vh_row(s, st, v->mutex, &b[n])) != SQLITE_OK) break;
        permits = (int)sqlite3_column_int64(st, 8);
        n++;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    else if (rc != SQLITE_MISMATCH && rc != SQLITE_NOMEM) simba__sql_seterr(s, "inspect (holders)", rc);
out:
    if (rc != SQLITE_OK) {
        simba_free(s->loop, b);
        if (rc == SQLITE_NOMEM) snprintf(s->err, sizeof s->err, "sqlite inspect: out of memory listing holders");
        return rc;
    }
    if (n > 0) {
        /* the view's holder array, values pointing into b */
        simba_view_holder *arr = (simba_view_holder *)simba_alloc(s->loop, (size_t)n * sizeof *arr);
        int i;
        if (!arr) {
            simba_free(s->loop, b);
            snprintf(s->err, sizeof s->err, "sqlite inspect: out of memory listing holders");
            return SQLITE_NOMEM;
        }
        for (i = 0; i < n; i++) {
            arr[i] = b[i].h;
            arr[i].value = b[i].h.value_len ? b[i].value : NULL;
        }
        simba__view_holders(v, arr, n, permits); /* with no owner row's, the one that frees first */
        *arr_out = arr;
    }
    *buf = b;
    return SQLITE_OK;
}
static void simba__sql_view_holders_free(simba__sql *s, simba__sql_vh *b, simba_view_holder *arr) {
    simba_free(s->loop, arr);
    simba_free(s->loop, b);
}

static int simba__sql_force(simba__sql *s, simba_req *r, int64_t now, simba_reply *rep) {
    sqlite3_stmt *st;
    int absent, rc = simba__sql_setup(s); /* a write, and the head's wake-up needs the statements */
    int64_t waiters = 0;
    rep->rc = SIMBA_EFENCE;
    if (rc == SQLITE_OK) rc = simba__sql_prepare_view(s, SIMBA__SQL_FORCE_TEXT, &st, &absent);
    if (rc != SQLITE_OK || absent) return rc;
    sqlite3_bind_text(st, 1, r->mutex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)r->fence);
    sqlite3_bind_int64(st, 6, now);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        rep->rc = SIMBA_OK;
        waiters = sqlite3_column_int64(st, 0);
        rc = sqlite3_step(st);
    }
    if (rc != SQLITE_DONE) simba__sql_seterr(s, "force release", rc);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return rc;
    if (rep->rc != SIMBA_OK) { /* a holding of the set with that fence, in one transaction */
        static const int with_now[] = {SIMBA__SQL_READ_ST, SIMBA__SQL_H_NUM, SIMBA__SQL_Q_LIST, SIMBA__SQL_H_FORCE, SIMBA__SQL_Q_HEAD};
        size_t i;
        int freed = 0;
        for (i = 0; i < sizeof with_now / sizeof with_now[0]; i++) sqlite3_bind_int64(s->st[with_now[i]], 6, now);
        if ((rc = simba__sql_tx_begin(s)) != SQLITE_OK) return rc;
        simba__sql_bind2(s->st[SIMBA__SQL_H_FORCE], r->mutex, NULL);
        sqlite3_bind_int64(s->st[SIMBA__SQL_H_FORCE], 9, (sqlite3_int64)r->fence);
        rc = simba__sql_step_simple(s, SIMBA__SQL_H_FORCE, "force release");
        freed = rc == SQLITE_OK && sqlite3_changes(s->db) > 0;
        if (freed) {
            rc = simba__sql_step_on(s, SIMBA__SQL_H_COUNT, r->mutex, NULL, "holders count");
        }
        if (rc == SQLITE_OK) {
            rc = simba__sql_tx_commit(s);
        }
        if (rc != SQLITE_OK) {
            simba__sql_tx_abort(s);
            return rc;
        }
        if (freed) {
            rep->rc = SIMBA_OK;
            simba__sql_wake_set(s, r->mutex);
            if (s->memory && s->be) simba_backend_event(s->be, SIMBA_EV_RELEASED, r->mutex, NULL, NULL);
        }
        return SQLITE_OK;
    }
    if (rep->rc == SIMBA_OK && waiters > 0) simba__sql_wake_head(s, r->mutex);
    if (rep->rc == SIMBA_OK && s->memory && s->be) simba_backend_event(s->be, SIMBA_EV_RELEASED, r->mutex, NULL, NULL);
    return SQLITE_OK;
}

static int simba__sql_inspect_one(simba__sql *s, simba_req *r, simba_reply *rep) {
    sqlite3_stmt *st;
    int absent = 0, rc;
    int64_t now = simba__sql_now(s);
    simba__reply_none(rep);
    if (r->op == SIMBA_OP_FORCE_RELEASE) {
        rc = simba__sql_force(s, r, now, rep);
    } else {
        rc = simba__sql_prepare_view(s, r->op == SIMBA_OP_LIST ? SIMBA__SQL_LIST_TEXT : SIMBA__SQL_INSPECT_TEXT, &st, &absent);
        if (rc == SQLITE_OK && !absent) {
            simba_view v;
            if (r->op == SIMBA_OP_INSPECT) sqlite3_bind_text(st, 1, r->mutex, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 6, now);
            while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (simba__sql_view_row(s, st, &v) != 0) {
                    rc = SQLITE_MISMATCH; /* s->err says */
                    break;
                }
                if (r->op == SIMBA_OP_INSPECT && (rc = simba__sql_waiters(s, r->mutex, now, &v)) != SQLITE_OK) break;
                {
                    simba__sql_vh *hb;
                    simba_view_holder *ha;
                    if ((rc = simba__sql_view_holders(s, now, &v, &hb, &ha)) != SQLITE_OK) break;
                    simba_req_view(r, &v);
                    simba__sql_view_holders_free(s, hb, ha);
                }
            }
            if (rc != SQLITE_DONE && rc != SQLITE_OK && rc != SQLITE_MISMATCH) simba__sql_seterr(s, "inspect", rc);
            sqlite3_finalize(st);
            if (rc == SQLITE_DONE) rc = SQLITE_OK;
        }
    }
    if (rc == SQLITE_OK) return 0;
    if (simba__sql_is_busy(rc)) return SIMBA__SQL_BUSY;
    simba__reply_fail(rep, SIMBA_EBACKEND, s->err);
    return 0;
}

static int simba__sql_inspection(simba_op op) {
    return op == SIMBA_OP_INSPECT || op == SIMBA_OP_LIST || op == SIMBA_OP_FORCE_RELEASE;
}

/* >>batch Queued requests in one write transaction (BEGIN IMMEDIATE ... COMMIT), in order,
   each step of the queue's rule a savepoint inside it. Each request sees exactly the rows
   it would see alone, after the requests before it; answers are handed back only once the
   commit succeeded, and a release's wake-up goes out after it. Returns SIMBA__SQL_BUSY
   (nothing changed, every request still queued), 0 when it completed some, -1 when it
   could not start (the caller runs the head alone and reports its error). */
static int simba__sql_batch(simba__sql *s) {
    simba_req *r;
    int n = 0, failed = 0, i, rc, cold;
    rc = sqlite3_step(s->st[SIMBA__SQL_BEGIN]);
    sqlite3_reset(s->st[SIMBA__SQL_BEGIN]);
    if (rc != SQLITE_DONE) return simba__sql_is_busy(rc) ? SIMBA__SQL_BUSY : -1;
    s->batch = 1;
    cold = simba__sql_cold(s);
    for (r = s->head; r && n < s->batch_max && !simba__sql_inspection(r->op); r = r->next_) {
        simba__sql_done *d = &s->done[n];
        /* The head was charged by the caller; every further request is a step of the poll,
           and so is the COMMIT that no budget stops once it started (a WAL frame per page
           written): a request is added only while it and the COMMIT it would make fit. */
        if (n > 0 && (!simba__sql_commit_fits(s, (n + 1) * cold) || simba_poll_budget_spent(s->loop))) break;
        s->batch_wake = 0;
        if (simba__sql_exec_one(s, r, &d->rep) == SIMBA__SQL_BUSY) { rc = SQLITE_BUSY; break; }
        if (sqlite3_get_autocommit(s->db)) { /* SQLite ended the transaction (I/O error, full) */
            rc = SQLITE_ABORT;
            failed = 1;
            break;
        }
        d->wake = s->batch_wake;
        simba__copy(d->owner, sizeof d->owner, d->rep.owner);
        d->rep.owner = d->owner;
        if (d->rep.value && d->rep.value_len > 0) {
            memcpy(d->value, d->rep.value, d->rep.value_len);
            d->rep.value = d->value;
        }
        if (d->rep.errmsg) {
            simba__copy(d->err, sizeof d->err, d->rep.errmsg);
            d->rep.errmsg = d->err;
        }
        n++;
    }
    s->batch = 0;
    if (rc == SQLITE_DONE) {
        int64_t t0 = simba__real_us();
        rc = sqlite3_step(s->st[SIMBA__SQL_COMMIT]);
        sqlite3_reset(s->st[SIMBA__SQL_COMMIT]);
        if (rc == SQLITE_DONE && cold == 1) simba__sql_commit_learn(s, n, simba__real_us() - t0);
    }
    if (rc != SQLITE_DONE) {
        char why[160];
        if (!sqlite3_get_autocommit(s->db)) {
            sqlite3_step(s->st[SIMBA__SQL_ROLLBACK]);
            sqlite3_reset(s->st[SIMBA__SQL_ROLLBACK]);
        }
        if (simba__sql_is_busy(rc)) return SIMBA__SQL_BUSY;
        /* Nothing of the batch is stored: its requests failed, the next ones go on. */
        snprintf(why, sizeof why, "sqlite batch of %d: %s", n + failed, sqlite3_errstr(rc));
        for (i = 0; i < n + failed && s->head; i++) simba_req_fail(simba__sql_pop(s), SIMBA_EBACKEND, why);
        return 0;
    }
    s->batches++;
    s->batched += (uint64_t)n;
    for (i = 0; i < n; i++) {
        r = simba__sql_pop(s);
        if (s->done[i].wake == 2) simba__sql_wake_set(s, r->mutex);
        else if (s->done[i].wake) simba__sql_wake_head(s, r->mutex);
        simba_req_done(r, &s->done[i].rep);
    }
    return 0;
}

/* Runs queued requests in order until the queue is empty, the database is locked or the
   poll's budget is spent (then the deadline asks for the next poll at once). Two or more
   go in one write transaction; one alone keeps its single autocommit statement. */
static void simba__sql_drain(simba__sql *s, int64_t now) {
    while (s->head) {
        simba_reply rep;
        int rc = -1;
        /* A batch starts only with room for two requests and their COMMIT: else the poll's
           tail fills with batches of one or two, each with a COMMIT of its own. */
        if ((s->head->next_ && s->done && !simba__sql_commit_fits(s, 2)) || simba_poll_budget_spent(s->loop)) {
            s->next_try = now;
            return;
        }
        if (simba__sql_inspection(s->head->op)) {
            rc = simba__sql_inspect_one(s, s->head, &rep);
        } else {
            if (s->head->next_ && s->ready && s->done) rc = simba__sql_batch(s);
            if (rc == 0) continue;
            if (rc == -1) rc = simba__sql_exec_one(s, s->head, &rep);
        }
        if (rc == SIMBA__SQL_BUSY) {
            if (!simba__sql_busy_head(s, now)) return;
            continue;
        }
        simba_req_done(simba__sql_pop(s), &rep);
    }
    s->next_try = INT64_MAX;
}

static simba_result simba__sql_enqueue(simba__sql *s, simba_req *req);

/* A backend opened read_only answers reads only. */
static simba_result simba__sql_refuse_write(simba__sql *s) {
    simba__copy(s->be->errmsg, sizeof s->be->errmsg, "sqlite: opened read_only: inspection only");
    return SIMBA_EINVAL;
}

static simba_result simba__sql_inspect(void *impl, simba_req *req) {
    simba__sql *s = (simba__sql *)impl;
    if (req->op != SIMBA_OP_LIST && simba_name_check(req->mutex) != SIMBA_OK) return SIMBA_EINVAL;
    if (s->read_only && req->op == SIMBA_OP_FORCE_RELEASE) return simba__sql_refuse_write(s);
    return simba__sql_enqueue(s, req);
}

static simba_result simba__sql_submit(void *impl, simba_req *req) {
    simba__sql *s = (simba__sql *)impl;
    if (!s || !req || !req->mutex || simba_name_check(req->mutex) != SIMBA_OK) return SIMBA_EINVAL;
    if (s->read_only) return simba__sql_refuse_write(s);
    switch (req->op) {
    case SIMBA_OP_ACQUIRE:
        if (req->ttl_ms <= 0 || req->ttl_ms > SIMBA_MAX_MS || req->transition_ms < 0 ||
            req->transition_ms > SIMBA_MAX_MS)
            return SIMBA_EINVAL;
        /* fall through */
    case SIMBA_OP_RELEASE:
    case SIMBA_OP_SET_VALUE:
    case SIMBA_OP_YIELD:
        if (!req->contender || simba_id_check(req->contender) != SIMBA_OK || req->value_len > SIMBA_VALUE_MAX)
            return SIMBA_EINVAL;
        break;
    case SIMBA_OP_READ:
        break;
    default:
        return SIMBA_EINVAL;
    }
    return simba__sql_enqueue(s, req);
}

static simba_result simba__sql_enqueue(simba__sql *s, simba_req *req) {
    req->next_ = NULL;
    if (s->tail) s->tail->next_ = req;
    else s->head = req;
    s->tail = req;
    /* A crashed process answers nothing: the request waits until the backend is freed. */
    if (s->crashed) return SIMBA_OK;
    /* Inside a poll, executed by its process call, so that what one poll submits shares one
       write transaction; a call from outside (start, stop, unlock) runs at once, as a single
       statement, with no poll's delay. Behind a request that waits for the lock, a new one
       waits its turn. */
    {
        int64_t now = simba_now(s->loop), at = now;
        /* Nobody waits on a renewal, nor on a waiter's ask on its own timer: they wait for
           company as long as the core says. An ask after a pushed release is a handoff: it
           goes now, and takes the held ones along. */
        if (req->op == SIMBA_OP_ACQUIRE && !req->renew && !req->expect_win && s->woken > 0) s->woken--;
        /* (":memory:" pushes a release to every watcher, uncounted: its waiters are not held) */
        else if (req->company_ms > 0 && (req->renew || !s->memory) && s->done)
            at = simba__add(now, req->company_ms);
        if (s->head == req || at < s->next_try) s->next_try = at;
        if (s->head == req && !simba__in_poll(s->loop) && s->next_try <= now) simba__sql_drain(s, now);
    }
    return SIMBA_OK;
}

/* In-memory database: when another connection has committed since the last look, a watched
   mutex whose row is now free gets SIMBA_EV_RELEASED, so that waiters do not sit out the
   old lease, and a held one SIMBA_EV_OWNER with the row's owner and value. A hint like every push; one in-memory PRAGMA per poll while mutexes are
   watched. */
static void simba__sql_watch_check(simba__sql *s) {
    sqlite3_stmt *st = s->st[SIMBA__SQL_DATA_VERSION];
    int64_t dv;
    int i;
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_reset(st);
        return;
    }
    dv = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (dv == s->data_version) return;
    s->data_version = dv;
    sqlite3_bind_int64(s->st[SIMBA__SQL_READ_ST], 6, simba__sql_now(s));
    for (i = 0; i < s->nwatched; i++) {
        simba_reply rep;
        memset(&rep, 0, sizeof rep);
        if (simba__sql_read_row(s, s->watched[i], &rep, NULL) != SQLITE_OK) continue;
        /* free: the waiters ask; held: every follower takes the owner and value read */
        if (!s->owner[0]) simba_backend_event(s->be, SIMBA_EV_RELEASED, s->watched[i], NULL, NULL);
        else simba_backend_event(s->be, SIMBA_EV_OWNER, s->watched[i], NULL, &rep);
    }
}

/* >>process */
static void simba__sql_process(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    simba__sql *s = (simba__sql *)impl;
    int i, readable = 0;
    if (s->crashed) return;
    for (i = 0; (flags & SIMBA_PROCESS_IO) && ready && i < n; i++)
        if (ready[i].fd == s->wake_fd && (ready[i].revents & POLLIN)) readable = 1;
    if (readable) simba__sql_wake_recv(s);
    /* a late poll runs due timers after this call (and past its budget, in the next poll):
       what waits for company waits for them */
    if (s->head && now >= s->next_try && !simba__timer_due(s->loop, now))
        simba__sql_drain(s, now);
    if (s->memory && s->nwatched > 0 && s->ready && !s->head) simba__sql_watch_check(s);
    simba__sql_follow_register(s);
}

static int simba__sql_fds(void *impl, struct pollfd *out, int cap) {
    simba__sql *s = (simba__sql *)impl;
    /* Only while a waiter row of ours may live or we follow a mutex: an uncontended loop
       polls nothing. */
    if (s->wake_fd < 0 || s->crashed || (s->loop->now > s->queued_until && !s->following)) return 0;
    if (cap >= 1 && out) {
        out[0].fd = s->wake_fd;
        out[0].events = POLLIN;
        out[0].revents = 0;
    }
    return 1;
}

static int64_t simba__sql_deadline(void *impl) {
    simba__sql *s = (simba__sql *)impl;
    return s->head && !s->crashed ? s->next_try : INT64_MAX;
}

static simba_result simba__sql_watch(void *impl, const char *mutex) {
    simba__sql *s = (simba__sql *)impl;
    size_t n;
    char *copy;
    if (s->nwatched == s->capwatched) {
        int cap = s->capwatched ? s->capwatched * 2 : 8;
        char **w = (char **)simba_alloc(s->loop, (size_t)cap * sizeof *w);
        if (!w) return SIMBA_ENOMEM;
        if (s->nwatched) memcpy(w, s->watched, (size_t)s->nwatched * sizeof *w);
        simba_free(s->loop, s->watched);
        s->watched = w;
        s->capwatched = cap;
    }
    n = strlen(mutex);
    copy = (char *)simba_alloc(s->loop, n + 1);
    if (!copy) return SIMBA_ENOMEM;
    memcpy(copy, mutex, n + 1);
    s->watched[s->nwatched++] = copy;
    s->follow_todo = 1;
    simba__sql_follow_register(s);
    return SIMBA_OK;
}

static void simba__sql_unwatch(void *impl, const char *mutex) {
    simba__sql *s = (simba__sql *)impl;
    int i;
    for (i = 0; i < s->nwatched; i++) {
        if (strcmp(s->watched[i], mutex) == 0) {
            /* best effort: a row left behind costs a datagram per change, dropped on receipt */
            if (s->following && s->ready && !s->crashed && !s->head)
                simba__sql_follow_run(s, "DELETE FROM \"%s_follow\" WHERE mutex = ?1 AND wake = ?2", mutex, s->wake_addr, NULL);
            simba_free(s->loop, s->watched[i]);
            s->watched[i] = s->watched[--s->nwatched];
            return;
        }
    }
}

/* >>close */
static void simba__sql_close(simba__sql *s) {
    int i;
    for (i = 0; i < SIMBA__SQL_NSTMT; i++) {
        if (s->st[i]) sqlite3_finalize(s->st[i]);
        s->st[i] = NULL;
    }
    if (s->db) sqlite3_close(s->db);
    s->db = NULL;
    if (s->wake_fd >= 0) simba_backend_fd(s->be, s->wake_fd, 0); /* before the number is free */
    if (s->wake_fd >= 0) close(s->wake_fd);
    s->wake_fd = -1;
    for (i = 0; i < s->nwatched; i++) simba_free(s->loop, s->watched[i]);
    simba_free(s->loop, s->watched);
    simba_free(s->loop, s->done);
    s->magic = 0;
    simba_free(s->loop, s);
}

static void simba__sql_destroy(void *impl) {
    simba__sql *s = (simba__sql *)impl;
    while (s->head) {
        simba_req *r = s->head;
        s->head = r->next_;
        r->next_ = NULL;
        simba_req_fail(r, SIMBA_ECLOSED, "sqlite backend closed");
    }
    s->tail = NULL;
    simba__sql_close(s);
}

/* The core waits on a held request (a stop behind a renewal): what waits for company goes now. */
static void simba__sql_hurry(void *impl, simba_req *req) {
    simba__sql *s = (simba__sql *)impl;
    int64_t now = simba_now(s->loop);
    (void)req;
    if (s->crashed || !s->head) return;
    if (s->next_try > now) s->next_try = now;
    if (!simba__in_poll(s->loop)) simba__sql_drain(s, now);
}

static const simba_backend_vt simba__sql_vt = {
    sizeof(simba_backend_vt),
    "sql",
    simba__sql_submit,
    simba__sql_fds, /* the wake-up socket; requests complete in submit() or at a deadline */
    simba__sql_process,
    simba__sql_deadline,
    simba__sql_watch,
    simba__sql_unwatch,
    simba__sql_destroy,
    SIMBA_LEASE_ASKED,
    simba__sql_hurry,
    simba__sql_inspect,
    simba__sql_announce,
};

static void simba__sql_errout(const simba_sql_desc *desc, const char *msg) {
    if (desc && desc->errbuf && desc->errbuf_cap > 0) snprintf(desc->errbuf, desc->errbuf_cap, "%s", msg);
}

/* A refused argument: the words go to simba_loop_errmsg() and to desc->errbuf. */
static simba_result simba__sql_refuse(simba_loop *loop, const simba_sql_desc *desc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static simba_result simba__sql_refuse(simba_loop *loop, const simba_sql_desc *desc, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    simba__sql_errout(desc, msg);
    return simba__fail(loop, SIMBA_EINVAL, "%s", msg);
}

/* [sqlite] The VFS the main database was opened with ("memdb" for in-memory ones). */
static const char *simba__sql_vfs_name(sqlite3 *db) {
    sqlite3_vfs *vfs = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK || !vfs || !vfs->zName) return "";
    return vfs->zName;
}

/* Which clock the rows of an in-memory database are written in: the first backend sets it,
   a later one with the other clock is refused (its leases would mean nothing to the first). */
static int simba__sql_clock_mark(simba__sql *s, int *clash) {
    sqlite3_stmt *st = NULL;
    int64_t want = s->loop_clock ? SIMBA__SQL_CLOCK_LOOP : SIMBA__SQL_CLOCK_WALL, have = 0;
    int rc;
    *clash = 0;
    /* One write transaction: two backends opening at once on two threads cannot both find
       no mark and each write their own. */
    rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(s->db, "PRAGMA application_id", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        have = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && have != want && have != 0) *clash = 1;
    if (rc == SQLITE_OK && have == 0) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %lld", (long long)want);
        rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        simba__sql_seterr(s, "setup (clock mark)", rc);
    }
    return rc;
}

/* >>open */
/* read_only: a database in WAL mode needs its -wal and -shm files, which a reader that may
   not write the directory cannot create; without a -wal file no connection has the database
   open (the last one removes it), so the file alone holds every commit and is read as
   immutable. */
static int simba__sql_open_ro(simba__sql *s, const char *path, int is_uri) {
    char uri[3 * 4096 + 32], wal[4096 + 8];
    const char *p;
    size_t n;
    int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    if (rc == SQLITE_OK || is_uri || strlen(path) >= 4096 || ((rc & 0xff) != SQLITE_READONLY && (rc & 0xff) != SQLITE_CANTOPEN))
        return rc;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (access(wal, F_OK) == 0 || access(path, R_OK) != 0) return rc;
    sqlite3_close(s->db);
    s->db = NULL;
    n = (size_t)snprintf(uri, sizeof uri, "file:");
    for (p = path; *p; p++) /* the path percent-encoded: '?', '#' and '%' are URI syntax */
        n += (size_t)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/._-~", *p)
                          ? snprintf(uri + n, sizeof uri - n, "%c", *p)
                          : snprintf(uri + n, sizeof uri - n, "%%%02X", (unsigned char)*p));
    snprintf(uri + n, sizeof uri - n, "?immutable=1");
    return sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, NULL);
}

/* Every field of the desc, with words for what is wrong (errbuf and the loop's errmsg). */
static simba_result simba__sql_desc_check(simba_loop *loop, const simba_sql_desc *desc) {
    const char *table;
    if (!desc->path || !desc->path[0])
        return simba__sql_refuse(loop, desc, "simba_sql_open: path is %s: give a database file, or \":memory:\" for the "
                                             "process's shared in-memory database (\"\" would be a private temporary one)",
                                 desc->path ? "empty" : "NULL");
    table = desc->table && desc->table[0] ? desc->table : "simba_mutex";
    if (!simba__sql_table_ok(table))
        return simba__sql_refuse(loop, desc, "simba_sql_open: table must match [A-Za-z_][A-Za-z0-9_]{0,63} and not start "
                                             "with sqlite_ (got \"%.80s\")", table);
    if (desc->busy_retry_ms < 0 || desc->busy_retry_ms > SIMBA_MAX_MS)
        return simba__sql_refuse(loop, desc, "simba_sql_open: busy_retry_ms must be in 0..2^40 (0 = 5; got %lld)",
                                 (long long)desc->busy_retry_ms);
    if (desc->busy_max_ms < 0 || desc->busy_max_ms > SIMBA_MAX_MS)
        return simba__sql_refuse(loop, desc, "simba_sql_open: busy_max_ms must be in 0..2^40 (0 = by request; got %lld)",
                                 (long long)desc->busy_max_ms);
    if (desc->busy_max_ms > 0 && desc->busy_retry_ms > desc->busy_max_ms)
        return simba__sql_refuse(loop, desc, "simba_sql_open: busy_retry_ms %lld > busy_max_ms %lld: the first retry would "
                                             "come after giving up", (long long)desc->busy_retry_ms, (long long)desc->busy_max_ms);
    if (desc->batch_max < 0 || desc->batch_max > SIMBA__SQL_BATCH_LIMIT)
        return simba__sql_refuse(loop, desc, "simba_sql_open: batch_max must be in 0..%d (0 = %d; got %d)",
                                 SIMBA__SQL_BATCH_LIMIT, SIMBA__SQL_BATCH_DEFAULT, desc->batch_max);
    if (desc->checkpoint != 0 && desc->checkpoint != -1)
        return simba__sql_refuse(loop, desc, "simba_sql_open: checkpoint must be 0 (SQLite's automatic one) or -1 (never on "
                                             "this connection; got %d)", desc->checkpoint);
    if (desc->test_clock != 0 && desc->test_clock != 1)
        return simba__sql_refuse(loop, desc, "simba_sql_open: test_clock must be 0 or 1 (got %d)", desc->test_clock);
    if (desc->read_only != 0 && desc->read_only != 1)
        return simba__sql_refuse(loop, desc, "simba_sql_open: read_only must be 0 or 1 (got %d)", desc->read_only);
    return SIMBA_OK;
}

/* Refuses what gives this connection a database nobody else sees (each backend would win its
   own), and the test clock on anything but ":memory:"; closes s then. */
static simba_result simba__sql_shared(simba__sql *s, const simba_sql_desc *desc, const char *path, int is_uri) {
    simba_loop *loop = s->loop;
    const char *fname, *vfs;
    /* Refuse what gives this connection a database nobody else sees: each backend would
       win its own. Shared-cache in-memory databases are shared by the process. */
    int memdb, shared_cache = is_uri && strstr(path, "cache=shared") != NULL;
    fname = sqlite3_db_filename(s->db, "main");
    vfs = simba__sql_vfs_name(s->db);
    memdb = strcmp(vfs, "memdb") == 0;
    s->memory = memdb && fname && fname[0] == '/';
    if (!s->memory && (memdb || ((!fname || !fname[0]) && !shared_cache))) {
        simba__sql_close(s);
        return simba__sql_refuse(loop, desc, "simba_sql_open: path \"%.200s\" opens a database private to one "
                                             "connection (temporary or in-memory): every backend would own alone; use "
                                             "\":memory:\" (one in-memory database per process) or a file", desc->path);
    }
    if (desc->test_clock && !s->memory) {
        simba__sql_close(s);
        return simba__sql_refuse(loop, desc, "simba_sql_open: test_clock needs an in-memory database (\":memory:\")");
    }
    return SIMBA_OK;
}

/* The setup at open; an in-memory database is locked only while another thread's
   statement runs (microseconds): waited for here, boundedly, so that its clock is checked
   at open. A file locked by someone else right now: the first request finishes it. */
static int simba__sql_setup_at_open(simba__sql *s, int *clash) {
    int tries = 0, rc;
    for (;;) {
        rc = simba__sql_setup(s);
        if (rc == SQLITE_OK && s->memory) rc = simba__sql_clock_mark(s, clash);
        if (!simba__sql_is_busy(rc) || !s->memory || ++tries > 500) break;
        poll(NULL, 0, 1);
    }
    return simba__sql_is_busy(rc) && !s->memory ? SQLITE_OK : rc;
}

/* An open or setup that failed: the message (with the access the file system refused,
   which SQLite does not name) to errbuf, the log and the loop's errmsg; s is closed. */
static simba_result simba__sql_open_failed(simba__sql *s, const simba_sql_desc *desc, int rc, int is_uri) {
    simba_loop *loop = s->loop;
    char msg[sizeof s->err + 64];
    int prim = rc & 0xff;
    /* SQLite names neither the file nor the access: say which the file system refused */
    if (prim == SQLITE_CANTOPEN || prim == SQLITE_READONLY || prim == SQLITE_PERM || prim == SQLITE_AUTH) {
        const char *f = s->db ? sqlite3_db_filename(s->db, "main") : NULL;
        size_t n = strlen(s->err);
        if (!f || !f[0]) f = is_uri ? NULL : desc->path;
        if (f) simba__sql_access_why(f, !s->read_only, s->err + n, sizeof s->err - n);
    }
    snprintf(msg, sizeof msg, "simba_sql_open(%s): %s", desc->path, s->err);
    simba_log(loop, SIMBA_LOG_ERROR, "%s", msg);
    simba__sql_errout(desc, msg);
    simba__copy(loop->errmsg, sizeof loop->errmsg, msg);
    simba__sql_close(s);
    return SIMBA_EBACKEND;
}

SIMBA_API simba_result simba_sql_open(simba_loop *loop, const simba_sql_desc *desc, simba_backend **out) {
    simba__sql *s;
    const char *table, *path;
    int rc, clash = 0, is_uri;
    simba_result r;
    if (out) *out = NULL;
    if (desc) simba__sql_errout(desc, "");
    if (!loop) {
        simba__sql_errout(desc, "simba_sql_open: loop is NULL");
        return SIMBA_EINVAL;
    }
    if (!desc) return simba__fail(loop, SIMBA_EINVAL, "simba_sql_open: desc is NULL");
    if (!out) return simba__sql_refuse(loop, desc, "simba_sql_open: out is NULL");
    if ((r = simba__sql_desc_check(loop, desc)) != SIMBA_OK) return r;
    table = desc->table && desc->table[0] ? desc->table : "simba_mutex";
    path = strcmp(desc->path, ":memory:") == 0 ? SIMBA__SQL_MEMORY_URI : desc->path;
    is_uri = strncmp(path, "file:", 5) == 0;
    /* Checked before anything is created: the test clock on a file that other processes may
       open with the wall clock would let both win (see the desc). */
    if (desc->test_clock && !(is_uri && strncmp(path, "file:/", 6) == 0 && strstr(path, "vfs=memdb")))
        return simba__sql_refuse(loop, desc, "simba_sql_open: test_clock needs path \":memory:\" (or file:/NAME?vfs=memdb), "
                                             "not \"%.200s\": other processes may open a file with the wall clock", desc->path);
    s = (simba__sql *)simba__zalloc(loop, sizeof *s);
    if (!s) return simba__fail(loop, SIMBA_ENOMEM, "simba_sql_open: out of memory");
    s->magic = SIMBA__SQL_MAGIC;
    /* Without room for a batch's answers every request runs alone, as correct, only slower. */
    s->batch_max = desc->batch_max > 0 ? desc->batch_max : SIMBA__SQL_BATCH_DEFAULT;
    if (s->batch_max > 1) s->done = (simba__sql_done *)simba_alloc(loop, (size_t)s->batch_max * sizeof *s->done);
    s->loop = loop;
    s->loop_clock = desc->test_clock;
    s->text = &simba__sqlite_text;
    memcpy(s->table, table, strlen(table) + 1);
    s->retry_ms = desc->busy_retry_ms > 0 ? desc->busy_retry_ms : 5;
    s->busy_max_ms = desc->busy_max_ms;
    s->next_try = INT64_MAX;
    s->read_only = desc->read_only;
    s->wake_fd = -1;
    if (!s->read_only) simba__sql_wake_open(s);
    /* [sqlite] NOMUTEX: a loop is single-threaded, so the connection needs no lock of its own.
       URI: ":memory:" becomes a memdb URI whatever SQLite's compile-time default. */
    rc = s->read_only ? simba__sql_open_ro(s, path, is_uri)
                      : sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, NULL);
    if (rc == SQLITE_OK) {
        if ((r = simba__sql_shared(s, desc, path, is_uri)) != SIMBA_OK) return r;
        sqlite3_extended_result_codes(s->db, 1);
        rc = sqlite3_busy_timeout(s->db, 0);
        if (rc == SQLITE_OK && desc->checkpoint == -1) rc = sqlite3_wal_autocheckpoint(s->db, 0);
    }
    if (rc == SQLITE_OK && !s->read_only) {
        rc = simba__sql_setup_at_open(s, &clash);
    } else if (rc == SQLITE_OK) {
        rc = simba__sql_schema(s); /* a reader of another layout would misread it */
    } else {
        simba__sql_seterr(s, "open", rc);
    }
    if (rc == SQLITE_OK && clash) {
        simba__sql_close(s);
        return simba__sql_refuse(loop, desc, "simba_sql_open: the in-memory database %s is open with the %s clock by "
                                             "another backend of this process: open every backend of it with the same "
                                             "test_clock", desc->path, desc->test_clock ? "wall" : "loop's (test_clock)");
    }
    if (rc != SQLITE_OK) return simba__sql_open_failed(s, desc, rc, is_uri);
    r = simba_backend_new(loop, &simba__sql_vt, s, &s->be);
    if (r != SIMBA_OK) {
        simba__sql_close(s);
        return r;
    }
    *out = s->be;
    return SIMBA_OK;
}

/* The backend of a handle, or NULL (with words in the loop's errmsg) when it is not ours. */
static simba__sql *simba__sql_of(simba_backend *be, const char *what) {
    simba__sql *s;
    if (!be) return NULL;
    if (simba_backend_vt_get(be) != &simba__sql_vt) {
        (void)simba__fail(simba_backend_loop(be), SIMBA_EINVAL, "%s: be is a %s backend, not one from simba_sql_open()",
                          what, simba_backend_vt_get(be) ? simba_backend_vt_get(be)->name : "?");
        return NULL;
    }
    s = (simba__sql *)simba_backend_impl(be);
    return s && s->magic == SIMBA__SQL_MAGIC ? s : NULL;
}

SIMBA_API simba_result simba_sql_simulate_crash(simba_backend *be) {
    simba__sql *s = simba__sql_of(be, "simba_sql_simulate_crash");
    if (!s) return SIMBA_EINVAL;
    s->crashed = 1;
    /* A dead process's socket is gone: a release then drops its waiter rows at once. */
    if (s->wake_fd >= 0) simba_backend_fd(s->be, s->wake_fd, 0);
    if (s->wake_fd >= 0) close(s->wake_fd);
    s->wake_fd = -1;
    return SIMBA_OK;
}

/* Every frame is in the database: the next write starts the WAL over, and with
   synchronous=NORMAL the connection that does so syncs the new WAL header first (SQLite's
   guard against replaying stale frames after a power loss). Left to the loop, that is an
   fsync inside a poll, once per checkpoint. One write here, the first of the new WAL (page
   1 rewritten with the value it holds), takes that sync into this thread.
   A writer of the loop's that comes first would start the WAL over itself. It cannot while
   `hold` (a second connection) keeps the read snapshot it took before the checkpoint: a
   writer starts the WAL over only when no reader uses its frames, else it appends. So the
   hold ends only once this connection has the write lock (then no writer of the loop's
   can come between), or when it could not get it (then the loop's writer that holds the
   lock has appended, and there is nothing to start over). Best effort either way. */
static void simba__sql_restart_wal(sqlite3 *db, sqlite3 *hold) {
    sqlite3_stmt *st = NULL;
    char sql[48];
    int id = 0, rc;
    /* the loop holds the lock for one batch at a time (about a millisecond) */
    sqlite3_busy_timeout(db, SIMBA__SQL_RESTART_WAIT_MS);
    rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (hold) sqlite3_exec(hold, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return;
    rc = sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) id = sqlite3_column_int(st, 0);
    else rc = SQLITE_ERROR;
    sqlite3_finalize(st);
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d", id);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

/* The read snapshot simba__sql_restart_wal() needs kept during the checkpoint: a second
   connection in a read transaction (NULL when it cannot open: the loop's next write may
   then start the WAL over itself). */
static sqlite3 *simba__sql_hold(const char *path) {
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
        sqlite3_exec(h, "BEGIN; PRAGMA schema_version", NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_close(h);
        return NULL;
    }
    return h;
}

SIMBA_API simba_result simba_sql_checkpoint(const char *path, int *wal_frames, int *copied, char *errbuf, size_t errbuf_cap) {
    sqlite3 *db = NULL, *hold = NULL;
    int rc, frames = -1, done = -1;
    simba_result res = SIMBA_OK;
    if (wal_frames) *wal_frames = -1;
    if (copied) *copied = -1;
    if (errbuf && errbuf_cap > 0) errbuf[0] = 0;
    if (!path || !path[0] || strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0) {
        if (errbuf && errbuf_cap > 0)
            snprintf(errbuf, errbuf_cap, "simba_sql_checkpoint: path is %s: give the database file's path (an "
                                         "in-memory database has no WAL)", !path ? "NULL" : path[0] ? path : "empty");
        return SIMBA_EINVAL;
    }
    /* No CREATE: a mistyped path must not leave an empty database behind. */
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    /* Opening reads nothing: reading the schema cookie says "not a database" now. */
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "PRAGMA schema_version", NULL, NULL, NULL);
    /* Its own write below must not checkpoint again on commit (past 1,000 frames): that
       would leave the WAL all copied before the next call's hold, whose read snapshot then
       uses no frame of the WAL and keeps no writer from starting it over. */
    if (rc == SQLITE_OK) rc = sqlite3_wal_autocheckpoint(db, 0);
    if (rc == SQLITE_OK) hold = simba__sql_hold(path);
    if (rc == SQLITE_OK) rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &done);
    SIMBA__SQL_AFTER_CHECKPOINT();
    /* All copied (an empty WAL too): start the WAL over here, so that the loop's next write
       appends. On an idle database that is one page written and synced per call. */
    if (rc == SQLITE_OK && frames >= 0 && done == frames) simba__sql_restart_wal(db, hold);
    sqlite3_close(hold); /* (a read transaction still open ends with it) */
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
        res = SIMBA_EBUSY;
    } else if (rc != SQLITE_OK) {
        if (errbuf && errbuf_cap > 0)
            snprintf(errbuf, errbuf_cap, "simba_sql_checkpoint: %s: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        res = SIMBA_EBACKEND;
    }
    sqlite3_close(db);
    if (res == SIMBA_OK && wal_frames) *wal_frames = frames;
    if (res == SIMBA_OK && copied) *copied = done;
    return res;
}

/* Test support, not API (simba_inspect is the reader): one mutex as the database sees it,
   synchronously. */
SIMBA_API simba_result simba__sql_read(simba_backend *be, const char *mutex, simba_reply *out, char *owner_buf, size_t cap) {
    simba__sql *s;
    simba_reply rep;
    size_t n;
    if (!be) return SIMBA_EINVAL;
    if (!(s = simba__sql_of(be, "simba__sql_read"))) return SIMBA_EINVAL;
    if (!out || !owner_buf || cap == 0)
        return simba__fail(s->loop, SIMBA_EINVAL, "simba__sql_read: out and owner_buf are required, cap > 0");
    if (!mutex || simba_name_check(mutex) != SIMBA_OK)
        return simba__fail(s->loop, SIMBA_EINVAL, "simba__sql_read: bad mutex name (1..%d of [A-Za-z0-9-_.:@+=,])",
                           SIMBA_NAME_MAX);
    if (s->crashed) return simba__fail(s->loop, SIMBA_ESTATE, "simba__sql_read: the backend simulates a crashed process");
    if (simba__sql_exec(s, SIMBA_OP_READ, mutex, "", 0, 0, 0, &rep) == SIMBA__SQL_BUSY) return SIMBA_EBUSY;
    *out = rep;
    owner_buf[0] = 0;
    out->owner = owner_buf;
    if (rep.rc != SIMBA_OK) return rep.rc;
    n = strlen(s->owner);
    if (n >= cap) return simba__fail(s->loop, SIMBA_EINVAL, "simba__sql_read: owner id needs %zu bytes, cap is %zu", n + 1, cap);
    memcpy(owner_buf, s->owner, n + 1);
    return SIMBA_OK;
}

/* >>fence  simba_sql_check_fence: read the row under the caller's write lock, judge it by
   the backend's clock and rule (simba__fence_judge). */
static simba_result simba__sql_check_fence(sqlite3 *db, const char *table, const char *name, uint64_t fence, char *err,
                                           size_t cap) {
    static const char fn[] = "simba_sql_check_fence";
    sqlite3_stmt *st = NULL;
    char sql[SIMBA_SQL_TABLE_MAX + 96];
    int rc, found = 0, has_owner = 0;
    uint64_t stored = 0;
    int64_t transition_at = 0, now;
    struct timespec ts;
    simba_result res;
    if (!db) return simba__refuse(err, cap, SIMBA_EINVAL, "%s: db is NULL", fn);
    if (!table || !table[0]) table = "simba_mutex";
    if (!simba__sql_table_ok(table))
        return simba__refuse(err, cap, SIMBA_EINVAL,
                             "%s: table \"%.80s\" is not a simba table name ([A-Za-z_][A-Za-z0-9_]{0,%d}, not sqlite_)",
                             fn, table, SIMBA_SQL_TABLE_MAX - 1);
    if ((res = simba__fence_args(fn, name, fence, err, cap)) != SIMBA_OK) return res;
    /* a read outside the write lock would let a grant commit between check and write */
    if (sqlite3_txn_state(db, "main") != SQLITE_TXN_WRITE)
        return simba__refuse(err, cap, SIMBA_ESTATE,
                             "%s: db holds no write transaction: call it inside your BEGIN IMMEDIATE, before the write it "
                             "guards", fn);
    rc = sqlite3_prepare_v2(db, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?1", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) found = 1;
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return simba__refuse(err, cap, SIMBA_EBACKEND, "%s: %s", fn, sqlite3_errmsg(db));
    if (!found)
        return simba__refuse(err, cap, SIMBA_EINVAL,
                             "%s: no table \"%s\" in this database: give the table simba_sql_open uses here", fn, table);
    if (sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_int64(st, 0) == SIMBA__SQL_CLOCK_LOOP) {
        sqlite3_finalize(st);
        return simba__refuse(err, cap, SIMBA_ESTATE,
                             "%s: the rows are in a loop's test clock (test_clock): the wall clock cannot judge them", fn);
    }
    sqlite3_finalize(st);
    st = NULL;
    snprintf(sql, sizeof sql, "SELECT owner_id, fence, transition_at FROM \"%s\" WHERE mutex = ?1", table);
    rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *o = sqlite3_column_text(st, 0);
        has_owner = o && o[0];
        stored = (uint64_t)sqlite3_column_int64(st, 1);
        transition_at = sqlite3_column_int64(st, 2);
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        snprintf(err, cap, "%s: %s", fn, sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return SIMBA_EBACKEND;
    }
    sqlite3_finalize(st);
    /* the clock of the backend's statements (simba__sql_now without test_clock) */
    clock_gettime(CLOCK_REALTIME, &ts);
    now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return simba__fence_judge(fn, name, fence, has_owner, stored, transition_at - now, err, cap);
}

SIMBA_API simba_result simba_sql_check_fence(struct sqlite3 *db, const char *table, const char *name, uint64_t fence,
                                             char *errbuf, size_t errbuf_cap) {
    char err[320];
    simba_result rc;
    err[0] = 0;
    rc = simba__sql_check_fence(db, table, name, fence, err, sizeof err);
    if (errbuf && errbuf_cap > 0) simba__copy(errbuf, errbuf_cap, rc == SIMBA_OK ? "" : err);
    return rc;
}

#endif /* SIMBA_SQL_IMPLEMENTATION */

/* License: MIT, the full text at the end of simba.h (the headers ship together). */
