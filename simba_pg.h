/*
 * simba_pg.h v0.1.0 -- PostgreSQL backend for simba (libpq non-blocking API), stb-style
 * single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file: that file then holds the core
 * (simba.h) and this backend. Link with -lpq (libpq >= 10); compile with the include path of
 * libpq-fe.h (Debian: -I/usr/include/postgresql, or `pkg-config --cflags libpq`).
 *
 *     simba_backend *be;
 *     simba_pg_desc d = {0};
 *     d.hostaddr = "127.0.0.1"; d.port = 5432; d.user = "app"; d.password = "secret";
 *     simba_pg_open(loop, &d, &be);        // never blocks: connecting happens in simba_poll
 *
 * COMPILE-TIME OPTIONS
 *   SIMBA_API, SIMBA_MALLOC / SIMBA_FREE   as in simba.h
 *   SIMBA_PG_IMPLEMENTATION                this header and the core only
 *   SIMBA_PG_BATCH_MAX (64): see CONNECTION. How long a request waits for company is the
 *                                          core's (simba_req.company_ms: SIMBA_HOLD_MS and
 *                                          SIMBA_HOLD_TAKEOVER_MS in simba.h)
 *
 * CONNECTION (one per backend, never blocks the poll)
 *   PQconnectStartParams + PQconnectPoll, then PQsendQueryParams / PQflush /
 *   PQconsumeInput / PQisBusy. The descriptor (it may change during the connect, libpq tries
 *   addresses and SSL in turn) and the next deadline go to the loop through simba_fds() and
 *   simba_poll()'s return value. Host names would need a blocking resolver (getaddrinfo):
 *   the server must be named by a numeric hostaddr (IPv4/IPv6) or a unix socket directory
 *   (a host starting with '/', or none: libpq's default socket). Resolve names yourself at
 *   start-up. A statement not answered within statement_timeout_ms completes with
 *   SIMBA_ETIMEDOUT (PQcancel would block on a new connection; the server also gets
 *   statement_timeout so it gives up on its side). In pipeline mode the connection then
 *   stalls: new requests fail at once (SIMBA_ECONN) while it reads and drops the late
 *   answers of the failed batches for up to stall_timeout_ms (default 30 s), and goes on as
 *   before once they are all in (SIMBA_EV_RESET), so that a stopped or overloaded server
 *   resumes without a new login; then it is recycled. Without pipeline mode, and when the
 *   stall ends unanswered, the connection is closed and made anew.
 *   Authentication runs inside PQconnectPoll: with scram-sha-256 (PostgreSQL's default for
 *   TCP) one call computes the client proof (PBKDF2, 4096 iterations of HMAC-SHA-256), which
 *   takes milliseconds (5-12 ms on a 2-CPU machine), so the simba_poll that runs it is that long, once per
 *   connection (at start, and after a lost or recycled one; a stopped server that comes back
 *   within stall_timeout_ms resumes on the stalled connection, with no login). md5 took
 *   0.6 ms, trust 0.2 ms; a unix socket with peer or trust avoids the cost, as does a SCRAM
 *   verifier with fewer iterations (scram_iterations, PostgreSQL 16).
 *   Lost connections are re-made with randomised doubling backoff [reconnect_min_ms,
 *   reconnect_max_ms]; requests submitted between attempts fail at once with SIMBA_ECONN so
 *   that the core backs off; requests submitted while an attempt runs wait for it.
 *
 *   Job states of the connection:
 *
 *        open ──► CONNECTING ──(PQconnectPoll OK)──► SETUP ──(setup done)──► READY ◄─┐
 *                  │  ▲   (failed / connect_timeout_ms)  │ (error)            │ send │
 *                  ▼  │                                 ▼                    ▼      │
 *                  DOWN ◄──────────────────────────────────────────── BUSY ──(result)┘
 *            (backoff, then CONNECTING)   (lost / statement_timeout_ms: recycle)
 *                  ▲                                                     │ pipelined:
 *                  └──(stall_timeout_ms)── STALLED ◄─(statement_timeout_ms)┘ late answers
 *                                            └──(all late answers in)──► READY
 *
 *   READY/BUSY with libpq >= 14 runs in pipeline mode: what is queued goes out at once as
 *   prepared statements; consecutive renewals and waiters' timer asks (req->deferrable)
 *   share one transaction (at most SIMBA_PG_BATCH_MAX, sorted by name so batches never
 *   deadlock, one commit for all, and answered only after it: a rolled-back renewal never
 *   reaches the core); anything else has a transaction of its own. A renewal or a routine
 *   re-ask (no win expected) and an ask at a lease end wait for company as long as the core
 *   says (simba_req.company_ms); other requests (a first ask, a pushed
 *   waiter's, a release) go at once and take them along. One poll sends and answers at most
 *   2 * SIMBA_PG_BATCH_MAX statements. Older libpq sends one at a time.
 *   The statement deadline restarts at every answer: a server that answers is alive.
 *   No commit waits for the WAL flush (the connection sets synchronous_commit = off), so a
 *   handoff waits for no disk; what a crash can lose is covered by the quarantine (CRASHES).
 *
 *   SETUP runs once per connection: one query reads the schema version and whether every
 *   object is there (SCHEMA VERSION AND PRIVILEGES); only when something is missing the
 *   setup script makes it, under a transaction-level advisory lock (so that two creators
 *   never race); then one round trip prepares the statements and LISTENs on the backend's
 *   own channel. After a reconnect (not the first
 *   connect) SIMBA_EV_RESET is raised for every mutex, since pushes may have been missed;
 *   a lost connection raises SIMBA_EV_DISCONNECTED: owners whose desc asks for
 *   step_down_on_disconnect step down at once (reason "connection"), others at their local
 *   ttl. Grants are the requested ttl (SIMBA_LEASE_ASKED).
 *
 * TLS
 *   sslmode, sslrootcert, sslcert and sslkey go to libpq as they are (each may come from
 *   conninfo or libpq's environment, PGSSLMODE and the rest, instead); libpq runs the
 *   handshake inside PQconnectPoll, which never blocks. verify-full checks the server's
 *   certificate against a name: give it in tls_name beside the numeric hostaddr (libpq's
 *   host and hostaddr: the connection goes to hostaddr, the name is never resolved). A
 *   certificate that does not verify fails the connection as a refused one does: requests
 *   fail with SIMBA_ECONN, simba_backend_errmsg() has libpq's words ("certificate verify
 *   failed", "server certificate for ... does not match host name ..."), and the backend
 *   tries again with its backoff. tests/test_pg_tls.c runs against a server whose
 *   certificate comes from a throwaway CA.
 *
 * DATA (the table name is checked and quoted; names and ids reach SQL only as parameters)
 *   <table>     name PK, owner ('' = nobody), fence, acquired_ms, ttl_ms, transition_ms
 *               (absolute server ms from clock_timestamp()), value (the owner's bytea, see
 *               LEADERSHIP VALUE); simba never deletes a row: a
 *               fence grows by one at each change of owner and at each re-acquisition
 *               with renew = 0 (a local step-down the server never saw), and starts above
 *               a floor after a crash or lost rows (see CRASHES, LOST ROWS)
 *   <table>_boot  UNLOGGED, one row (since_ms, fence_floor, max_lease_ms): the crash marker
 *   <table>_q   the wait queue: name, contender, channel, seq (arrival), expires_ms, and
 *               the waiter's ttl_ms / tr_ms / value (what a release grants it)
 *   <table>_hold  the holders set (SEMAPHORES AND READ-WRITE LOCKS in simba.h): one row per
 *               reader or semaphore permit (name, contender, shared, fence, acquired_ms,
 *               ttl_ms, transition_ms, value), each its own lease; its grant takes the next
 *               fence of the name's row, which records the permits (column permits) while
 *               anyone holds or waits; the queue's rows say who reads (column shared).
 *               <table>_sacq asks for a holding under the row lock: another N is refused
 *               (SIMBA_EINVAL), else the rule grants or queues; a release or yield of a
 *               holding (or of the owner row before readers) grants, in its transaction,
 *               each waiter it frees (<table>_grant) and NOTIFYs it the grant, as PUSH
 *               does for a mutex: one hop. The owner row's grant also needs no live
 *               holding (one index probe, at asks and not renewals).
 *   <table>_acq / _rel / _read / _val / _yield / _sacq / _grant   PL/pgSQL functions:
 *               one statement = one round trip each (_grant is called by the others);
 *               acquire and release lock the mutex's row (FOR UPDATE), so one mutex's queue
 *               changes are serialised; replies carry remaining durations only (and
 *               the server's clock, see PUSH).
 *
 * CRASHES (a grant committed but lost: crash recovery, a promoted standby, a restored backup)
 *   Commits are asynchronous: a crash can lose the last few hundred ms of them, among them a
 *   grant or renewal whose owner was told it owns. <table>_boot is an UNLOGGED table created
 *   with one row; PostgreSQL empties it in crash recovery, and a standby or a base backup has
 *   it empty (a statement that empties it restarts it at once, see LOST ROWS: only the
 *   server leaves it empty). The first grant that finds it empty records when the server
 *   began taking writes again (its WAL writer's start in pg_stat_activity, which every
 *   restart, crash recovery, promotion and restore comes before), and for
 *   desc.max_lease_ms (default SIMBA_MAX_LEASE_DEFAULT_MS, one minute; simba_contend refuses
 *   a longer ttl + transition) after that nobody is granted a new ownership: a mutex first
 *   asked for long after a crash waits for nothing. The function that reads it runs as
 *   the objects' owner: an owner that may not see the WAL writer (neither superuser nor
 *   pg_read_all_stats) records the grant's own time instead: safe, and up to a whole
 *   quarantine later. pg_postmaster_start_time() would not do: a backend's crash empties
 *   the marker without restarting the postmaster.
 *   Refused asks fail with SIMBA_EBACKEND ("crash quarantine ... ms"); the contender hears
 *   SIMBA_EVENT_QUARANTINE and asks again when it ends; a lost owner steps down within its
 *   own ttl before anyone else can win. Renewals of a row that still names its owner go on. Every later grant's fence
 *   starts above a floor of (ms since 1970) << 10, so a fence handed out by a lost commit is
 *   never handed out again (unless a row was granted 1,024 times a ms; fences stay below 2^53,
 *   exact as doubles, until 2248). A clean shutdown or restart loses nothing and quarantines
 *   nothing. Every process on a table must use the same max_lease_ms: the marker keeps the
 *   first grant's, and a new grant asked with another is refused ("max_lease_ms mismatch").
 *
 * LOST ROWS (another program's DELETE or TRUNCATE of <table>, a DROP TABLE, a partial restore)
 *   Triggers on <table> (statement level, AFTER DELETE with its transition table, BEFORE
 *   TRUNCATE) raise the marker's fence floor above every fence the vanishing rows held, so
 *   a row made again never repeats a fence, and when one of them held a live lease they
 *   start the quarantine at that moment: its owner learns it lost at its next renewal and
 *   steps down, and nobody else is granted until its lease has ended. A table gone where
 *   simba was set up before (DROP TABLE: no trigger sees it) restarts the marker (the
 *   quarantine and a floor of now) at the next connection's setup, and so does a statement
 *   that empties the marker. The queue <table>_q holds no lease: losing its rows costs the
 *   waiters their order, nothing else. Dropping every simba object of a table (its
 *   functions too) makes a new store: fences start again at 1.
 *
 * FAIRNESS (the rule of every backend)
 *   A free mutex (released, or its lease fully over) goes to the oldest live waiter; a
 *   contender that finds it free but is not at the head joins the queue, so a releaser that
 *   asks again at once goes to the back. A waiter's place lapses req->live_ms after its last
 *   request (the core's bound). The owner's renewal is not an acquisition.
 *
 * PUSH (one hop: the release grants, the NOTIFY carries the grant)
 *   A release by the live owner grants the mutex in the same transaction to the oldest live
 *   waiter, with that waiter's own ttl and transition (kept with its place) from the
 *   server's now, and sends pg_notify(<its channel>, 'G <fence> <ttl> <transition>
 *   <server ms> <contender> <mutex>'). Each backend LISTENs on its own channel
 *   "simba_<random>", keeps the grant and raises SIMBA_EV_RELEASED for that waiter, whose
 *   ask is then answered from the grant without a statement: a handoff is one trip through
 *   the server, as a pg_advisory_lock handoff is. The waiter's lease counts from the grant,
 *   placed on the loop clock through the server's clock, which every answer carries (a
 *   7th column): a statement submitted at loop time s that read server time T bounds the
 *   offset from below by s - T - 1, less 1 ms a second of drift since, so the local lease
 *   never ends after the server's, whenever the NOTIFY is read. A grant is only kept while
 *   nothing of that contender for that mutex is queued or in flight (that request's answer,
 *   newer, decides) and the connection it came on is up; else the push is a hint, and the
 *   ask finds the contender owner on the server (a new tenure, fence + 1).
 *   With nobody live in line (or in the crash quarantine) the release clears the row, and
 *   a place from v0.1.0 (no lease recorded) gets '<contender> <mutex>', a hint only.
 *   NOTIFY is lost when the waiter's connection drops: the granted waiter is owner on the
 *   server without knowing it until its next ask (at the latest its place's timer; after a
 *   reconnect at once, SIMBA_EV_RESET), as a dead head waiter holds the line for at most
 *   its place's liveness (ttl + transition + jitter + 1 s) before.
 *   Every follower (waiter or observer) learns each owner and value: each connection also
 *   LISTENs on the table's follow channel, where the process granted a mutex or changing its
 *   value sends the owner record (>>follow); followers take it without a read.
 *   LISTEN/NOTIFY does not survive a transaction-mode pooler (PgBouncer pool_mode =
 *   transaction): there the push is lost and handoffs wait for the timers.
 *   Every lease here is timed by the server's clock (clock_timestamp()): a step of it
 *   forward ends leases early on the server, while their owners still count them, and
 *   moves a pushed grant's start as far. Keep the server's clock slewed (NTP), not stepped.
 *
 * LEADERSHIP VALUE, PROCLAIM, YIELD
 *   The owner's value (bytea, any bytes up to SIMBA_VALUE_MAX; hex on the wire both ways)
 *   is written by the statement that grants, a waiter's with its place in <table>_q so that
 *   a release's grant stores it too; renewals keep it, release and force-release empty it,
 *   and every answer that names the owner carries it (reads, simba_inspect). Proclaim
 *   (<table>_val) and yield (<table>_yield) are one statement each, under the row lock:
 *   proclaim replaces the value while the contender holds the fence and a live lease, and
 *   NOTIFYs every live waiter (the release's hint: each asks once); every follower, observers
 *   too, is also sent the new value by the proclaiming process (>>follow). Yield, with a live waiter other than the owner
 *   in line, hands the mutex over exactly as a release does (the grant pushed to the head)
 *   and queues the yielder at the back with its lease and value; with nobody in line it
 *   changes nothing. A reader's or a permit's yield, when its permit once free goes to a
 *   waiter the rule does not grant now, frees its holding as its release does and queues
 *   it at the back (a reader's place marked shared); else it changes nothing. A value
 *   longer than SIMBA_VALUE_MAX (not written by simba) is an error, never cut.
 *
 * FENCED WRITES (the protected data in the same database)
 *   Setup creates, with the table, the function simba_check_fence(name text, fence bigint)
 *   RETURNS boolean in the table's schema; for a table other than the default
 *   "simba_mutex" it is <table>_check_fence, so that several simba tables in one schema
 *   keep one each (the table "simba" is refused: its function would be the default's).
 *   It protects the writes of the transaction it runs in, from any language: inside the
 *   write's own statement (safe in autocommit too), or before it in one transaction:
 *       UPDATE orders SET ... WHERE id = 42 AND simba_check_fence('orders', 42);
 *       BEGIN; SELECT simba_check_fence('orders', 42); UPDATE orders ...; COMMIT;
 *   A SELECT of it alone in autocommit protects nothing (its lock ends with that statement,
 *   before the write): the function cannot tell (a statement inside BEGIN looks the same).
 *   It share-locks the mutex row (FOR SHARE), so every grant, renewal and release, which
 *   lock it FOR UPDATE, waits for that transaction to end, and then judges by the server's
 *   clock read under the lock: the fence holds while it is the stored owner's and its
 *   transition end has not passed (the rule of a grant: nobody else is granted before).
 *   Else it raises SQLSTATE SF001 with the reason in words (the fence moved on to a later
 *   owner's, was never handed out, the mutex was released, the lease is over), which aborts
 *   the transaction: the write never commits. Bad input (an empty name, a fence below 1)
 *   raises 22023. So a write lands before any later owner's grant, or not at all. Keep such
 *   transactions short: the owner's renewals wait for them too (statement_timeout_ms). The
 *   role needs EXECUTE on the function only (it runs with its owner's rights). It returns
 *   true, so a WHERE clause can hold it. simba_pg_check_fence() is the C call of it on a
 *   PGconn of the application's, inside a transaction (BEGIN first).
 *
 * SCHEMA VERSION AND PRIVILEGES
 *   The layout's version is the mutex table's COMMENT, "simba schema version 1" (psql \dt+
 *   shows it), written last by the setup's transaction. Each connection reads it, and
 *   whether every table and function is there, in one catalog query that needs no
 *   privilege; the setup (CREATE ...) runs only when something is missing, so only the role
 *   that makes the objects, once, needs CREATE on the schema. A table of another version,
 *   or one without the comment, is refused and nothing is altered: requests fail with
 *   SIMBA_EDENIED, "found simba schema version N on table ..., this simba uses 1: ...".
 *   Every function runs with its owner's rights (SECURITY DEFINER) and a search_path fixed
 *   at setup (the table's schema, then pg_temp); EXECUTE on them is revoked from PUBLIC.
 *   An application role needs EXECUTE on <table>_acq, _rel, _read, _val, _yield, _sacq and
 *   the fence check, and SELECT on <table>, _q and _hold to inspect (get, ls); a forced
 *   release (release --fence) UPDATE on <table> and DELETE on _hold; a read-only role
 *   EXECUTE on <table>_read (watch) and the SELECTs. LISTEN needs nothing.
 *   A refused login, a missing role, database, schema or privilege (SQLSTATE class 28,
 *   3D000, 3F000, 42501) fails requests at once with SIMBA_EDENIED and the server's words,
 *   with the privilege this role needs ("permission denied for function simba_mutex_acq:
 *   this role needs EXECUTE on that function"); the connection is still tried again with
 *   its backoff, so grants given later take effect without a restart.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  public declarations   >>impl  the implementation   >>open  the constructor
 *   >>process  the work of one poll   >>close  teardown
 *   >>sql  the statements   >>row  answer rows   >>names  quoting   >>conn  the connection
 *   >>push  NOTIFY   >>stall  a statement not answered   >>fence  fenced writes
 *   >>version  the schema version   >>errors  failures asking again cannot mend
 *   >>inspect  simba_inspect, simba_list, simba_force_release
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together).
 */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_PG_IMPLEMENTATION)
#define SIMBA_PG_IMPLEMENTATION
#endif
/* Its implementation uses the core's private helpers: the core's goes into the same file. */
#if defined(SIMBA_PG_IMPLEMENTATION) && !defined(SIMBA_CORE_IMPLEMENTATION)
#define SIMBA_CORE_IMPLEMENTATION
#endif
#ifndef SIMBA_PG_H
#define SIMBA_PG_H

#include "simba.h"

#ifdef __cplusplus
extern "C" {
#endif

/* >>api */
typedef struct simba_pg_desc {
    const char *conninfo;   /* optional libpq connection string or URI; fields below override it,
                               and so do options (-c statement_timeout) and application_name (simba) */
    const char *hostaddr;   /* numeric IPv4/IPv6 address of the server */
    const char *socket_dir; /* or: unix socket directory (absolute path) */
    int port;               /* 0 -> conninfo's, else 5432 */
    const char *dbname, *user, *password; /* optional */
    const char *schema;     /* NULL -> the search_path's first schema (usually public) */
    const char *table;      /* NULL -> "simba_mutex"; 1..48 printable bytes, no '$' */
    int64_t connect_timeout_ms;   /* 0 -> 2000: connect + setup */
    int64_t statement_timeout_ms; /* 0 -> 2000 */
    int64_t reconnect_min_ms, reconnect_max_ms; /* 0 -> 100 / max(5000, reconnect_min_ms) */
    int64_t stall_timeout_ms; /* 0 -> 30000: how long a connection whose statements timed out
                                 is kept for the server's late answers (see CONNECTION) */
    int64_t max_lease_ms;   /* 0 -> SIMBA_MAX_LEASE_DEFAULT_MS (60000): the longest lease (ttl +
                               transition) a contender may ask for (simba_contend refuses a
                               longer one), and the quarantine after a crash; give every
                               process on a table the same */
    /* TLS (see TLS): each NULL -> conninfo's, else libpq's default (PGSSLMODE, ..., "prefer") */
    const char *sslmode;     /* disable, allow, prefer, require, verify-ca, verify-full */
    const char *sslrootcert; /* file of the CA certificates that may sign the server's */
    const char *sslcert, *sslkey; /* this client's certificate and key (clientcert auth) */
    const char *tls_name;    /* with hostaddr: the server's name, which verify-full finds in
                                its certificate (libpq's host; never resolved) */
} simba_pg_desc;

SIMBA_API simba_result simba_pg_open(simba_loop *loop, const simba_pg_desc *desc, simba_backend **out);

/* The fenced write's check (FENCED WRITES) on conn, the application's own connection, inside
   its open transaction, before the write it guards: SELECT <check function>(name, fence).
   schema and table as in simba_pg_desc (NULL: the search_path's first schema,
   "simba_mutex"). BLOCKING: one round trip on conn. SIMBA_OK: the fence holds, and no grant
   can commit before the transaction ends; SIMBA_EFENCE: refused, errbuf says why (the fence
   moved on, was never handed out, released, the lease is over); the transaction is then
   aborted: ROLLBACK. SIMBA_EINVAL: conn NULL, an empty or bad name, fence 0, a bad table or
   schema name, no check function there (an unknown table, or simba_pg_open never ran on it);
   SIMBA_ESTATE: conn is not connected or not inside a transaction (BEGIN first), or the
   transaction has failed already; SIMBA_EBACKEND: another server error (errbuf). errbuf may
   be NULL. */
struct pg_conn; /* libpq-fe.h's PGconn: this header's declarations need no libpq-fe.h */
SIMBA_API simba_result simba_pg_check_fence(struct pg_conn *conn, const char *schema, const char *table, const char *name,
                                            uint64_t fence, char *errbuf, size_t errbuf_cap);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_PG_H */

/* >>impl */
/* ==================================================================================== */
/*                                   IMPLEMENTATION                                     */
/* ==================================================================================== */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_PG_IMPLEMENTATION)
#define SIMBA_PG_IMPLEMENTATION
#endif
#if defined(SIMBA_PG_IMPLEMENTATION) && !defined(SIMBA__PG_IMPLEMENTED)
#define SIMBA__PG_IMPLEMENTED
#include "simba.h" /* the core's implementation, when this file has not got it yet */

#include <libpq-fe.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Statements per transaction (one sync): PostgreSQL before 17 counts statement_timeout from
   the start of a pipelined transaction, and one poll answers at most one batch's worth. */
#ifndef SIMBA_PG_BATCH_MAX
#define SIMBA_PG_BATCH_MAX 64
#endif
#define SIMBA__PG_TABLE_MAX 48
#define SIMBA__PG_IDENT_MAX (2 * 64 + 8)           /* one quoted identifier, doubled quotes */
#define SIMBA__PG_QNAME_MAX (2 * SIMBA__PG_IDENT_MAX + 2)
/* Any constant: every simba creator on a database takes the same advisory lock. */
#define SIMBA__PG_LOCK_KEY "7308604897068483425"

#ifdef LIBPQ_HAS_PIPELINING
#define SIMBA__PG_SYNC(st) ((st) == PGRES_PIPELINE_SYNC)
#else
#define SIMBA__PG_SYNC(st) ((void)(st), 0)
#endif

enum { SIMBA__PG_DOWN, SIMBA__PG_CONNECTING, SIMBA__PG_SETUP, SIMBA__PG_READY, SIMBA__PG_STALLED };

/* >>sql  {T} = quoted table, {Q} = quoted queue table, {B} = quoted crash marker table,
   {A} {R} {D} = quoted functions, {L} = desc.max_lease_ms,
   {I} = quoted queue index (unqualified), {X} = quoted trigger function of lost rows,
   {G} {H} = its quoted triggers (unqualified), {Y} = quoted trigger function that keeps the
   marker, {K} its trigger (unqualified), {W} = quoted function: when the server began taking
   writes, {N} = the table name unquoted (in $n$ only), {V} = quoted set-value function,
   {E} = quoted yield function, {F} = quoted fence check function, {U} = its name unquoted
   (in $n$ only), {M} = the version comment, {O} = the schema as a literal (NULL: the
   search_path's), {J} = the follow channel (>>follow). Every function but {F} returns one
   row: owner ('' = nobody), ttl_left, transition_left, held (-1 unknown), fence,
   first_in_line (or what the answer is, see SIMBA__PG_GUARD and SIMBA__PG_REFUSED), the
   owner's value. */
#define SIMBA__PG_OUT \
    "OUT o_owner text, OUT o_ttl bigint, OUT o_tr bigint, OUT o_held bigint, OUT o_fence bigint, OUT o_first int," \
    " OUT o_val bytea"
#define SIMBA__PG_NOW_EXPR "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
#define SIMBA__PG_NOW "now_ms := " SIMBA__PG_NOW_EXPR ";\n"
#define SIMBA__PG_ANSWER                                                                          \
    "  IF r.owner <> '' AND r.transition_ms >= now_ms THEN\n"                                      \
    "    o_owner := r.owner; o_ttl := r.ttl_ms - now_ms; o_tr := r.transition_ms - now_ms;\n"      \
    "    o_held := now_ms - r.acquired_ms; o_fence := r.fence; o_val := r.value;\n"               \
    "  ELSE\n"                                                                                     \
    "    o_owner := ''; o_ttl := 0; o_tr := 0; o_held := -1; o_fence := 0; o_val := '';\n"         \
    "  END IF;\n"

/* Every commit is asynchronous (the session runs with synchronous_commit = off): a handoff
   waits for no WAL flush. What a crash can then lose is covered by the quarantine (see
   CRASHES): {B} is UNLOGGED, so crash recovery, a promoted standby and a restored backup
   all find it empty. The first grant that finds it empty records the time and a fence floor
   ((ms since 1970) << 10); no new owner is granted for max(ttl + transition,
   simba.max_lease_ms) after that, and every later grant's fence starts above the floor, so a
   fence handed out by a lost commit is never handed out again. The answer of a refused grant
   is o_first = 2 with the quarantine's remaining ms in o_ttl. */
/* The marker as a loss now leaves it: the quarantine from now, a fence floor of now. */
#define SIMBA__PG_MARKER_RESTART                                                                  \
    "INSERT INTO {B} AS b (id, since_ms, fence_floor) VALUES (1, " SIMBA__PG_NOW_EXPR ",\n"       \
    "    " SIMBA__PG_NOW_EXPR " * 1024) ON CONFLICT (id) DO UPDATE\n"                             \
    "    SET since_ms = EXCLUDED.since_ms, fence_floor = greatest(b.fence_floor, EXCLUDED.fence_floor);\n"
#define SIMBA__PG_GUARD_LOAD(ttl, tr)                                                            \
    "      SELECT since_ms, fence_floor INTO b_since, b_floor FROM {B} WHERE id = 1;\n"          \
    "      IF NOT FOUND THEN\n"                                                                   \
    "        INSERT INTO {B} VALUES (1, least(now_ms, coalesce({W}(), now_ms)), now_ms * 1024)\n"  \
    "          ON CONFLICT (id) DO NOTHING;\n"                                                    \
    "        SELECT since_ms, fence_floor INTO b_since, b_floor FROM {B} WHERE id = 1;\n"        \
    "      END IF;\n"                                                                             \
    "      my_bound := coalesce(nullif(current_setting('simba.max_lease_ms', true), '')::bigint, 0);\n" \
    "      b_until := b_since + greatest(" ttl " + " tr ", my_bound);\n"
/* Every process of a table agrees on max_lease_ms, the quarantine's length: the marker keeps
   the first grant's bound, and a new grant asked with another is refused (o_first = 3, the
   marker's bound in o_ttl, the asker's in o_tr). A session that set none (SQL of the
   application's own) is not checked. */
#define SIMBA__PG_GUARD                                                                           \
    SIMBA__PG_GUARD_LOAD("p_ttl", "p_tr")                                                         \
    "      SELECT max_lease_ms INTO b_bound FROM {B} WHERE id = 1;\n"                              \
    "      IF my_bound = 0 THEN NULL;\n"                                                          \
    "      ELSIF b_bound = 0 THEN UPDATE {B} SET max_lease_ms = my_bound WHERE id = 1;\n"          \
    "      ELSIF b_bound <> my_bound THEN\n"                                                      \
    "        o_owner := ''; o_ttl := b_bound; o_tr := my_bound; o_held := -1; o_fence := 0; o_first := 3; RETURN;\n" \
    "      END IF;\n"                                                                             \
    "      IF now_ms < b_until THEN\n"                                                            \
    "        o_owner := ''; o_ttl := b_until - now_ms; o_tr := 0; o_held := -1; o_fence := 0;\n"  \
    "        o_first := 2;\n"                                                                     \
    "        RETURN;\n"                                                                           \
    "      END IF;\n"
/* The seventh column is the server's clock (ms since 1970) when the answer was made: a
   pushed grant's lease is placed on the loop clock through it (see PUSH). The eighth is
   the owner's value in hex (text answers: no escapes to undo). */
#define SIMBA__PG_COLS \
    "o_owner, o_ttl, o_tr, o_held, o_fence, o_first, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint," \
    " encode(o_val, 'hex')"
/* Every statement in the functions looks rows up by name, and each has an index for it. A
   session's PL/pgSQL keeps the generic plan it made first: made while the tables were new
   (or analyzed when they held a few rows), that was a sequential scan, kept until autovacuum
   analyzed the grown tables (W4 on a fresh table: 64,000 scans of the mutex table, 41 s to
   own 10,000 mutexes instead of 6). Planned without sequential scans, the plans stay index
   scans whatever the statistics say. */
#define SIMBA__PG_FN_SET SIMBA__PG_DEFINER " SET enable_seqscan = off"
/* Every function runs with its owner's rights and the search_path of its setup (the table's
   schema, then pg_temp: nobody else's objects shadow simba's), so that an application role
   needs only EXECUTE on it (see PRIVILEGES); the setup revokes EXECUTE from PUBLIC. */
#define SIMBA__PG_DEFINER "SECURITY DEFINER SET search_path FROM CURRENT"

/* Inspection (simba_inspect, simba_list, simba_force_release), one statement each. A view
   row: name, owner, fence, acquired, held, ttl left, transition left, then for one mutex its
   live waiters' count and the first SIMBA_VIEW_WAITERS ids, oldest first (ids hold no
   space). A forced release clears the row only while the owner holds that fence and its
   lease lives, and wakes the head waiter as a release without a grant does. */
#define SIMBA__PG_NOW_EXPR "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
#define SIMBA__PG_VIEW_COLS                                                                       \
    "name, owner, fence, acquired_ms, n.ms - acquired_ms, ttl_ms - n.ms, transition_ms - n.ms, encode(value, 'hex')"
#define SIMBA__PG_VIEW_FROM " FROM {T}, (SELECT " SIMBA__PG_NOW_EXPR " AS ms) n"
/* A mutex's holdings of the set, oldest grant first, each "id fence shared acquired held ttl
   tr x<value in hex>" (ids and hex hold no space); then its permits. */
#define SIMBA__PG_HOLDINGS                                                                        \
    "  (SELECT coalesce(string_agg(contender || ' ' || fence || ' ' || shared::int || ' ' || acquired_ms || ' '\n" \
    "    || (n.ms - acquired_ms) || ' ' || (ttl_ms - n.ms) || ' ' || (transition_ms - n.ms) || ' x'\n" \
    "    || encode(value, 'hex'), ' ' ORDER BY fence), '')\n"                                       \
    "    FROM {S} WHERE {S}.name = {T}.name AND transition_ms >= n.ms), permits\n"
#define SIMBA__PG_INSPECTION                                                                      \
    "PREPARE simba_inspect (text) AS SELECT " SIMBA__PG_VIEW_COLS ",\n"                          \
    "  (SELECT count(*) FROM {Q} WHERE name = $1 AND expires_ms >= n.ms),\n"                     \
    "  (SELECT coalesce(string_agg(contender, ' ' ORDER BY seq), '') FROM (SELECT contender, seq FROM {Q}\n" \
    "    WHERE name = $1 AND expires_ms >= n.ms ORDER BY seq LIMIT 8) w),\n"                      \
    SIMBA__PG_HOLDINGS                                                                            \
    SIMBA__PG_VIEW_FROM " WHERE name = $1;\n"                                                    \
    /* no queue read: -1 waiters (unknown), none listed */                                      \
    "PREPARE simba_list AS SELECT " SIMBA__PG_VIEW_COLS ", -1, '',\n" SIMBA__PG_HOLDINGS SIMBA__PG_VIEW_FROM ";\n" \
    "PREPARE simba_force (text, bigint) AS WITH n AS (SELECT " SIMBA__PG_NOW_EXPR " AS ms),\n"     \
    "  c AS (UPDATE {T} SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = $1 AND fence = $2\n" \
    "    AND owner <> '' AND transition_ms >= (SELECT ms FROM n) RETURNING name),\n"             \
    "  s AS (DELETE FROM {S} WHERE name = $1 AND fence = $2 AND transition_ms >= (SELECT ms FROM n) RETURNING name),\n" \
    "  w AS (SELECT pg_notify(channel, contender || ' ' || $1) FROM (SELECT channel, contender FROM {Q}\n" \
    "    WHERE name = $1 AND expires_ms >= (SELECT ms FROM n) AND EXISTS (SELECT 1 FROM c) ORDER BY seq LIMIT 1) h),\n" \
    /* a holding of the set: a hint to the first waiters (each asks; the rule decides) */     \
    "  x AS (SELECT pg_notify(channel, contender || ' ' || $1) FROM (SELECT channel, contender FROM {Q}\n" \
    "    WHERE name = $1 AND expires_ms >= (SELECT ms FROM n) AND EXISTS (SELECT 1 FROM s) ORDER BY seq LIMIT 8) h)\n" \
    "  SELECT (SELECT count(*) FROM c) + (SELECT count(*) FROM s), (SELECT count(*) FROM w) + (SELECT count(*) FROM x);\n"

/* A release's hand-over (the owner's row r locked FOR UPDATE, now_ms read): the oldest live
   waiter is granted the mutex with its own ttl, transition and value (kept with its place)
   and the NOTIFY to its channel carries the grant; a place of v0.1.0 (no lease) or the crash
   quarantine clears the row instead, and the head gets a hint. hd IS NULL: nobody waits,
   nothing changed. Shared by release ({R}) and yield ({E}). */
#define SIMBA__PG_HAND_OVER                                                                       \
    "    SELECT contender, channel, ttl_ms, tr_ms, value, shared INTO hd, ch, h_ttl, h_tr, h_val, h_sh FROM {Q}\n" \
    "      WHERE name = p_name AND expires_ms >= now_ms ORDER BY seq LIMIT 1;\n"                   \
    "    IF hd IS NOT NULL AND h_ttl > 0 THEN\n"                                                  \
    SIMBA__PG_GUARD_LOAD("h_ttl", "h_tr")                                                         \
    "    END IF;\n"                                                                               \
    "    IF hd IS NOT NULL AND h_ttl > 0 AND NOT h_sh AND now_ms >= b_until THEN\n"               \
    "      UPDATE {T} SET owner = hd, fence = greatest(fence + 1, b_floor), acquired_ms = now_ms,\n" \
    "        ttl_ms = now_ms + h_ttl, transition_ms = now_ms + h_ttl + h_tr, value = h_val\n"     \
    "        WHERE name = p_name RETURNING * INTO r;\n"                                           \
    "      DELETE FROM {Q} WHERE name = p_name AND (contender = hd OR expires_ms < now_ms);\n"    \
    /* "G fence ttl transition server-ms contender mutex": ids and names hold no spaces */    \
    "      PERFORM pg_notify(ch, 'G ' || r.fence || ' ' || h_ttl || ' ' || h_tr || ' ' || now_ms\n" \
    "        || ' ' || hd || ' ' || p_name);\n"                                                   \
    "    ELSIF hd IS NOT NULL THEN\n"                                                             \
    "      UPDATE {T} SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = p_name;\n" \
    "      r.owner := '';\n"                                                                      \
    "      IF h_sh THEN\n" /* readers at the head: each one before the first writer */           \
    SIMBA__PG_GRANT_SET                                                                            \
    "      ELSE\n"                                                                                \
    "        PERFORM pg_notify(ch, hd || ' ' || p_name);\n"                                      \
    "      END IF;\n"                                                                             \
    "    END IF;\n"

/* SEMAPHORES AND READ-WRITE LOCKS: the holders set {S} (<table>_hold) beside the owner row,
   one row per reader or permit with its own lease and a fence from the row's counter. The
   answer for a waiter while the owner row is free and the set holds: the holding that
   frees first (h: a {S}%ROWTYPE). */
#define SIMBA__PG_FIRST_HOLDER                                                                    \
    "    SELECT * INTO h FROM {S} WHERE name = p_name AND transition_ms >= now_ms ORDER BY transition_ms LIMIT 1;\n" \
    "    IF FOUND THEN\n"                                                                          \
    "      o_owner := h.contender; o_ttl := h.ttl_ms - now_ms; o_tr := h.transition_ms - now_ms;\n"   \
    "      o_held := now_ms - h.acquired_ms; o_fence := h.fence; o_val := h.value;\n"              \
    "      RETURN;\n"                                                                               \
    "    END IF;\n"
/* {Z}: a holding or the owner row freed (p_free: the owner row holds no live lease;
   p_permits: the row's), under the caller's row lock: each live waiter the rule grants now
   (semaphore: the first N - holders; else the writer at the head when nobody holds, or the
   readers before the first writer) is granted in this transaction with its own ttl,
   transition and value (kept with its place), a permit or a reader into {S}, a writer the
   owner row, and the NOTIFY to its channel carries the grant as the mutex's hand-over does:
   one hop, no ask of its own. A place of v0.1.0 (no lease) or the crash quarantine gets a
   hint instead, and asks. (A live waiter that also has a dead holding: replaced.) */
#define SIMBA__PG_GRANT_FN                                                                        \
    "CREATE OR REPLACE FUNCTION {Z}(p_name text, p_free boolean, p_permits int, now_ms bigint) RETURNS void\n" \
    "LANGUAGE plpgsql " SIMBA__PG_FN_SET " AS $simba$\n"                                          \
    "DECLARE w record; g_f bigint; b_since bigint; b_floor bigint; b_until bigint; my_bound bigint;\n" \
    "BEGIN\n"                                                                                     \
    "  IF NOT p_free THEN RETURN; END IF;\n"                                                      \
    "  FOR w IN SELECT q.contender, q.channel, q.ttl_ms, q.tr_ms, q.value, q.shared FROM (SELECT contender,\n" \
    "      channel, ttl_ms, tr_ms, value, shared, seq, row_number() OVER (ORDER BY seq) AS i,\n"    \
    "      count(*) FILTER (WHERE NOT shared) OVER (ORDER BY seq) AS ex\n"                        \
    "      FROM {Q} WHERE name = p_name AND expires_ms >= now_ms) q,\n"                            \
    "      (SELECT count(*) AS n FROM {S} WHERE name = p_name AND transition_ms >= now_ms) c\n"    \
    "      WHERE CASE WHEN p_permits > 1 THEN q.i <= p_permits - c.n\n"                            \
    "        ELSE (q.shared AND q.ex = 0) OR (NOT q.shared AND q.i = 1 AND c.n = 0) END\n"         \
    "      ORDER BY q.seq LOOP\n"                                                                 \
    "    IF w.ttl_ms > 0 THEN\n"                                                                  \
    SIMBA__PG_GUARD_LOAD("w.ttl_ms", "w.tr_ms")                                                   \
    "    END IF;\n"                                                                               \
    "    IF w.ttl_ms <= 0 OR now_ms < b_until THEN\n"                                             \
    "      PERFORM pg_notify(w.channel, w.contender || ' ' || p_name);\n"                          \
    "      CONTINUE;\n"                                                                           \
    "    END IF;\n"                                                                               \
    "    IF p_permits > 1 OR w.shared THEN\n"                                                     \
    "      UPDATE {T} SET fence = greatest(fence + 1, b_floor) WHERE name = p_name RETURNING fence INTO g_f;\n" \
    "      INSERT INTO {S} VALUES (p_name, w.contender, w.shared, g_f, now_ms, now_ms + w.ttl_ms,\n" \
    "        now_ms + w.ttl_ms + w.tr_ms, w.value) ON CONFLICT (name, contender) DO UPDATE\n"      \
    "        SET shared = EXCLUDED.shared, fence = EXCLUDED.fence, acquired_ms = EXCLUDED.acquired_ms,\n" \
    "          ttl_ms = EXCLUDED.ttl_ms, transition_ms = EXCLUDED.transition_ms, value = EXCLUDED.value;\n" \
    "    ELSE\n"                                                                                  \
    "      UPDATE {T} SET owner = w.contender, fence = greatest(fence + 1, b_floor), acquired_ms = now_ms,\n" \
    "        ttl_ms = now_ms + w.ttl_ms, transition_ms = now_ms + w.ttl_ms + w.tr_ms, value = w.value\n" \
    "        WHERE name = p_name RETURNING fence INTO g_f;\n"                                     \
    "    END IF;\n"                                                                               \
    "    DELETE FROM {Q} WHERE name = p_name AND contender = w.contender;\n"                      \
    "    PERFORM pg_notify(w.channel, 'G ' || g_f || ' ' || w.ttl_ms || ' ' || w.tr_ms || ' ' || now_ms\n" \
    "      || ' ' || w.contender || ' ' || p_name);\n"                                             \
    "  END LOOP;\n"                                                                               \
    "END $simba$;\n"
/* The owner row freed or a holding gone (r the row as it is now): {Z} grants whom it frees. */
#define SIMBA__PG_GRANT_SET                                                                       \
    "      PERFORM {Z}(p_name, NOT (r.owner <> '' AND r.transition_ms >= now_ms), r.permits, now_ms);\n"
/* The holders set {S} (the row's recorded permits and the queue's readers are columns of
   {T} and {Q}). */
#define SIMBA__PG_SET_SETUP                                                                       \
    "CREATE TABLE IF NOT EXISTS {S} (name text NOT NULL, contender text NOT NULL,\n"             \
    "  shared boolean NOT NULL DEFAULT false, fence bigint NOT NULL, acquired_ms bigint NOT NULL,\n" \
    "  ttl_ms bigint NOT NULL, transition_ms bigint NOT NULL, value bytea NOT NULL DEFAULT '',\n" \
    "  PRIMARY KEY (name, contender));\n"
/* {P}: a reader's or a permit's ask, under the row lock: dead holdings and waiters dropped,
   another N while anyone holds or waits refused (o_first 6: the name's N in o_ttl, the
   asked one in o_tr), a renewal kept, else the rule of simba.h grants (fence + 1 from the
   row) or queues it. */
#define SIMBA__PG_SET_FN_A                                                                        \
    "CREATE OR REPLACE FUNCTION {P}(p_name text, p_id text, p_ttl bigint, p_tr bigint, p_live bigint,\n" \
    "  p_renew boolean, p_chan text, p_val bytea, p_permits int, p_shared boolean, " SIMBA__PG_OUT ")\n" \
    "LANGUAGE plpgsql " SIMBA__PG_FN_SET " AS $simba$\n"                                          \
    "DECLARE r {T}%ROWTYPE; h {S}%ROWTYPE; now_ms bigint; live boolean; held boolean := false; ok boolean;\n" \
    "  nh bigint; nq bigint; pos bigint; ahead bigint; my_seq bigint; rec int;\n"                \
    "  b_since bigint; b_floor bigint; b_until bigint; b_bound bigint; my_bound bigint;\n"        \
    "BEGIN\n"                                                                                     \
    "  SELECT * INTO r FROM {T} WHERE name = p_name FOR UPDATE;\n"                                \
    "  IF NOT FOUND THEN\n"                                                                       \
    "    INSERT INTO {T} (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING;\n"                 \
    "    SELECT * INTO r FROM {T} WHERE name = p_name FOR UPDATE;\n"                              \
    "  END IF;\n"                                                                                 \
    "  " SIMBA__PG_NOW                                                                            \
    "  DELETE FROM {Q} WHERE name = p_name AND expires_ms < now_ms;\n"                            \
    "  DELETE FROM {S} WHERE name = p_name AND transition_ms < now_ms;\n"                         \
    "  live := r.owner <> '' AND r.transition_ms >= now_ms;\n"                                    \
    "  o_first := 0;\n"                                                                           \
    "  SELECT count(*) INTO nh FROM {S} WHERE name = p_name;\n"                                   \
    "  SELECT seq INTO my_seq FROM {Q} WHERE name = p_name AND contender = p_id;\n"               \
    "  SELECT count(*) INTO nq FROM {Q} WHERE name = p_name AND contender <> p_id;\n"             \
    "  rec := CASE WHEN live THEN 1 ELSE r.permits END;\n"                                        \
    "  IF rec > 0 AND rec <> p_permits AND (live OR nh > 0 OR nq > 0) THEN\n"                     \
    "    o_owner := ''; o_ttl := rec; o_tr := p_permits; o_held := -1; o_fence := 0; o_first := 6; o_val := '';\n" \
    "    RETURN;\n"                                                                               \
    "  END IF;\n"                                                                                 \
    /* the owner's id back as a reader (a new incarnation): its ownership ends */               \
    "  IF live AND r.owner = p_id THEN\n"                                                         \
    "    UPDATE {T} SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = p_name RETURNING * INTO r;\n" \
    "    live := false;\n"                                                                        \
    "  END IF;\n"
#define SIMBA__PG_SET_FN_B                                                                        \
    "  SELECT * INTO h FROM {S} WHERE name = p_name AND contender = p_id;\n"                      \
    "  IF FOUND AND p_renew THEN\n"                                                               \
    "    UPDATE {S} SET ttl_ms = now_ms + p_ttl, transition_ms = now_ms + p_ttl + p_tr\n"         \
    "      WHERE name = p_name AND contender = p_id RETURNING * INTO h;\n"                         \
    "    held := true;\n"                                                                         \
    "  ELSE\n"                                                                                    \
    "    IF FOUND THEN\n" /* the holder asking anew: a new grant, with a new fence */            \
    "      DELETE FROM {S} WHERE name = p_name AND contender = p_id;\n"                           \
    "      nh := nh - 1; ok := true;\n"                                                           \
    "    END IF;\n"                                                                               \
    "    SELECT count(*), count(*) FILTER (WHERE NOT shared) INTO pos, ahead FROM {Q}\n"          \
    "      WHERE name = p_name AND contender <> p_id AND (my_seq IS NULL OR seq < my_seq);\n"     \
    "    IF ok IS NULL THEN\n"                                                                    \
    "      ok := NOT p_renew AND CASE WHEN p_permits > 1 THEN pos < p_permits - nh ELSE NOT live AND ahead = 0 END;\n" \
    "    END IF;\n"                                                                               \
    "    IF ok THEN\n"                                                                            \
    SIMBA__PG_GUARD                                                                               \
    "      UPDATE {T} SET fence = greatest(fence + 1, b_floor), permits = p_permits WHERE name = p_name\n" \
    "        RETURNING * INTO r;\n"                                                               \
    "      INSERT INTO {S} VALUES (p_name, p_id, p_shared, r.fence, now_ms, now_ms + p_ttl,\n"     \
    "        now_ms + p_ttl + p_tr, p_val) RETURNING * INTO h;\n"                                 \
    "      DELETE FROM {Q} WHERE name = p_name AND contender = p_id;\n"                           \
    "      held := true;\n"                                                                       \
    "    ELSE\n"                                                                                  \
    "      IF NOT p_renew THEN\n"                                                                \
    "      INSERT INTO {Q} (name, contender, channel, expires_ms, ttl_ms, tr_ms, value, shared)\n" \
    "        VALUES (p_name, p_id, p_chan, now_ms + p_live, p_ttl, p_tr, p_val, p_shared)\n"      \
    "        ON CONFLICT (name, contender) DO UPDATE SET channel = EXCLUDED.channel,\n"           \
    "          expires_ms = EXCLUDED.expires_ms, ttl_ms = EXCLUDED.ttl_ms, tr_ms = EXCLUDED.tr_ms,\n" \
    "          value = EXCLUDED.value, shared = EXCLUDED.shared;\n"                               \
    "      END IF;\n"                                                                           \
    "      IF r.permits <> p_permits THEN UPDATE {T} SET permits = p_permits WHERE name = p_name; END IF;\n" \
    "      o_first := CASE WHEN pos <= CASE WHEN p_permits > 1 THEN p_permits - nh ELSE 0 END THEN 1 ELSE 0 END;\n" \
    "    END IF;\n"                                                                               \
    "  END IF;\n"                                                                                 \
    "  IF held THEN\n"                                                                            \
    "    o_owner := p_id; o_ttl := h.ttl_ms - now_ms; o_tr := h.transition_ms - now_ms;\n"       \
    "    o_held := now_ms - h.acquired_ms; o_fence := h.fence; o_val := h.value;\n"              \
    "    RETURN;\n"                                                                               \
    "  END IF;\n"                                                                                 \
    "  IF NOT live THEN\n"                                                                        \
    SIMBA__PG_FIRST_HOLDER                                                                        \
    "  END IF;\n"                                                                                 \
    SIMBA__PG_ANSWER                                                                              \
    "END $simba$;\n"

/* An answer of {V} or {E} whose fence no longer holds (o_first = 4: the contender does not
   hold the mutex with p_fence and a live lease; the row as it is follows), and of a yield
   that passed the mutex on (o_first = 5: the new owner's row follows). */
#define SIMBA__PG_REFUSED "4"
#define SIMBA__PG_YIELDED "5"

/* The owner's proclaim {V}: the value replaced under the same fence while the lease lives,
   and every live waiter hinted (as by a release) so that it reads the new value at once. */
#define SIMBA__PG_VALUE_SETUP                                                                     \
    "CREATE OR REPLACE FUNCTION {V}(p_name text, p_id text, p_fence bigint, p_val bytea,\n"       \
    "  " SIMBA__PG_OUT ")\n"                                                                      \
    "LANGUAGE plpgsql " SIMBA__PG_FN_SET " AS $simba$\n"                                          \
    "DECLARE r {T}%ROWTYPE; h {S}%ROWTYPE; now_ms bigint;\n"                                      \
    "BEGIN\n"                                                                                     \
    "  SELECT * INTO r FROM {T} WHERE name = p_name FOR UPDATE;\n"                                \
    "  IF NOT FOUND THEN r.owner := ''; END IF;\n"                                                \
    "  " SIMBA__PG_NOW                                                                            \
    /* a holding of the set: its own value */                                                   \
    "  UPDATE {S} SET value = p_val WHERE name = p_name AND contender = p_id AND fence = p_fence\n" \
    "    AND transition_ms >= now_ms RETURNING * INTO h;\n"                                       \
    "  IF FOUND THEN\n"                                                                           \
    "    o_owner := h.contender; o_ttl := h.ttl_ms - now_ms; o_tr := h.transition_ms - now_ms;\n" \
    "    o_held := now_ms - h.acquired_ms; o_fence := h.fence; o_val := h.value; o_first := 0;\n" \
    "    RETURN;\n"                                                                               \
    "  END IF;\n"                                                                                 \
    "  IF r.owner = p_id AND r.fence = p_fence AND r.transition_ms >= now_ms THEN\n"              \
    "    UPDATE {T} SET value = p_val WHERE name = p_name RETURNING * INTO r;\n"                  \
    "    o_first := 0;\n"                                                                         \
    "    PERFORM pg_notify(channel, contender || ' ' || p_name) FROM {Q}\n"                       \
    "      WHERE name = p_name AND expires_ms >= now_ms;\n"                                       \
    "  ELSE\n"                                                                                    \
    "    o_first := " SIMBA__PG_REFUSED ";\n"                                                     \
    "  END IF;\n"                                                                                 \
    SIMBA__PG_ANSWER                                                                              \
    "END $simba$;\n"

/* Yield of a holding of the set h (under the row lock): when its permit, once free, goes to
   a live waiter the rule does not grant now (the next permit's, or a writer no other reader
   holds back), the holding goes, the waiters it frees are pushed as by its release, and the
   contender joins the back of the line (a reader's place marked shared); else nothing
   changes and the answer is its own holding. */
#define SIMBA__PG_YIELD_HOLDING                                                                   \
    "    SELECT count(*) INTO nh FROM {S} WHERE name = p_name AND transition_ms >= now_ms;\n"     \
    "    SELECT count(*) INTO nq FROM {Q} WHERE name = p_name AND contender <> p_id AND expires_ms >= now_ms;\n" \
    "    frees := nq > 0 AND CASE WHEN r.permits > 1 THEN nq > r.permits - nh\n"                 \
    "      ELSE NOT (r.owner <> '' AND r.transition_ms >= now_ms) AND nh = 1 END;\n"               \
    "    IF frees THEN\n"                                                                         \
    "      DELETE FROM {S} WHERE name = p_name AND contender = p_id;\n"                           \
    "      DELETE FROM {Q} WHERE name = p_name AND (contender = p_id OR expires_ms < now_ms);\n"  \
    SIMBA__PG_GRANT_SET                                                                            \
    "      INSERT INTO {Q} (name, contender, channel, expires_ms, ttl_ms, tr_ms, value, shared)\n" \
    "        VALUES (p_name, p_id, p_chan, now_ms + p_live, p_ttl, p_tr, h.value, h.shared);\n"   \
    "      o_first := " SIMBA__PG_YIELDED ";\n"                                                   \
    SIMBA__PG_FIRST_HOLDER                                                                        \
    "      o_owner := ''; o_ttl := 0; o_tr := 0; o_held := -1; o_fence := 0; o_val := '';\n"      \
    "      RETURN;\n"                                                                             \
    "    END IF;\n"                                                                               \
    "    o_owner := p_id; o_ttl := h.ttl_ms - now_ms; o_tr := h.transition_ms - now_ms;\n"        \
    "    o_held := now_ms - h.acquired_ms; o_fence := h.fence; o_val := h.value;\n"               \
    "    RETURN;\n"

/* Yield {E}: while the contender holds the mutex with p_fence and a live lease, and a live
   waiter other than it stands in line, the mutex is handed over as a release hands it over
   and the contender joins the back of the line (its place with p_live, and p_ttl, p_tr and
   the value it held: what a later release grants it); with nobody live in line nothing
   changes. A reader or a permit yields its holding (SIMBA__PG_YIELD_HOLDING). */
#define SIMBA__PG_YIELD_FN                                                                        \
    "CREATE OR REPLACE FUNCTION {E}(p_name text, p_id text, p_fence bigint, p_live bigint,\n"     \
    "  p_chan text, p_ttl bigint, p_tr bigint, " SIMBA__PG_OUT ")\n"                              \
    "LANGUAGE plpgsql " SIMBA__PG_FN_SET " AS $simba$\n"                                          \
    "DECLARE r {T}%ROWTYPE; h {S}%ROWTYPE; now_ms bigint; hd text; ch text; h_ttl bigint; h_tr bigint;\n" \
    "  h_val bytea; b_since bigint; b_floor bigint; b_until bigint; my_bound bigint; y_val bytea; h_sh boolean;\n" \
    "  nh bigint; nq bigint; frees boolean;\n"                                                   \
    "BEGIN\n"                                                                                     \
    "  SELECT * INTO r FROM {T} WHERE name = p_name FOR UPDATE;\n"                                \
    "  IF NOT FOUND THEN r.owner := ''; END IF;\n"                                                \
    "  " SIMBA__PG_NOW                                                                            \
    "  o_first := 0;\n"                                                                           \
    "  y_val := r.value;\n"                                                                       \
    "  SELECT * INTO h FROM {S} WHERE name = p_name AND contender = p_id AND fence = p_fence\n"    \
    "    AND transition_ms >= now_ms;\n"                                                          \
    "  IF FOUND THEN\n"
/* (the function, cut in two for C99's longest string) */
#define SIMBA__PG_YIELD_FN_B                                                                      \
    SIMBA__PG_YIELD_HOLDING                                                                       \
    "  END IF;\n"
#define SIMBA__PG_YIELD_FN_C                                                                      \
    "  IF r.owner <> p_id OR r.fence <> p_fence OR r.transition_ms < now_ms THEN\n"               \
    "    o_first := " SIMBA__PG_REFUSED ";\n"                                                     \
    "  ELSE\n"                                                                                    \
    "    DELETE FROM {Q} WHERE name = p_name AND (contender = p_id OR expires_ms < now_ms);\n"    \
    SIMBA__PG_HAND_OVER                                                                           \
    "    IF hd IS NOT NULL THEN\n"                                                                \
    "      INSERT INTO {Q} (name, contender, channel, expires_ms, ttl_ms, tr_ms, value)\n"       \
    "        VALUES (p_name, p_id, p_chan, now_ms + p_live, p_ttl, p_tr, y_val);\n"               \
    "      o_first := " SIMBA__PG_YIELDED ";\n"                                                   \
    "    END IF;\n"                                                                               \
    "  END IF;\n"                                                                                 \
    SIMBA__PG_ANSWER                                                                              \
    "END $simba$;\n"

/* >>fence  The fenced write's check, {F}(name, fence) in the table's schema (see FENCED
   WRITES): the share lock on the mutex row keeps every grant, renewal and release (they lock
   it FOR UPDATE) out until the caller's transaction ends, and the clock is read once it is
   held. The rule is a grant's: the fence is the stored owner's and its transition end has
   not passed. A refusal raises SQLSTATE SF001, bad input 22023 (invalid_parameter_value). */
#define SIMBA__PG_FENCE_REFUSED "SF001"
#define SIMBA__PG_CHECK_FENCE                                                                     \
    "CREATE OR REPLACE FUNCTION {F}(p_name text, p_fence bigint) RETURNS boolean\n"                  \
    "LANGUAGE plpgsql " SIMBA__PG_FN_SET " AS $simba$\n"                                          \
    "DECLARE r record; now_ms bigint; got boolean; fn text := $n${U}$n$;\n"                       \
    "BEGIN\n"                                                                                     \
    "  IF p_name IS NULL OR p_name = '' THEN\n"                                                   \
    "    RAISE EXCEPTION '%: the mutex name is empty: give the name the fence was granted for', fn\n" \
    "      USING ERRCODE = '22023';\n"                                                            \
    "  END IF;\n"                                                                                 \
    "  IF p_fence IS NULL OR p_fence < 1 THEN\n"                                                  \
    "    RAISE EXCEPTION '%: fence % is no fence (a grant''s fence is at least 1): give the owner''s fence',\n" \
    "      fn, coalesce(p_fence::text, 'NULL') USING ERRCODE = '22023';\n"                        \
    "  END IF;\n"                                                                                 \
    "  SELECT owner, fence, transition_ms INTO r FROM {T} WHERE name = p_name FOR SHARE;\n"      \
    "  got := FOUND;\n"                                                                           \
    "  " SIMBA__PG_NOW                                                                            \
    "  IF NOT got THEN r := ROW(''::text, 0::bigint, 0::bigint); END IF;\n"                       \
    "  IF r.fence > p_fence THEN\n"                                                               \
    "    RAISE EXCEPTION '%: the fence of % moved on to % (a later owner): fence % is not the owner''s any more',\n" \
    "      fn, p_name, r.fence, p_fence USING ERRCODE = '" SIMBA__PG_FENCE_REFUSED "';\n"         \
    "  ELSIF r.fence < p_fence THEN\n"                                                            \
    "    RAISE EXCEPTION '%: fence % was never handed out for % (its fence is %): not the owner''s',\n" \
    "      fn, p_fence, p_name, r.fence USING ERRCODE = '" SIMBA__PG_FENCE_REFUSED "';\n"         \
    "  ELSIF r.owner = '' THEN\n"                                                                 \
    "    RAISE EXCEPTION '%: % has no owner (released): fence % holds no lease', fn, p_name, p_fence\n" \
    "      USING ERRCODE = '" SIMBA__PG_FENCE_REFUSED "';\n"                                      \
    "  ELSIF r.transition_ms < now_ms THEN\n"                                                     \
    "    RAISE EXCEPTION '%: the lease of fence % on % is over (ended % ms ago by the server''s clock)',\n" \
    "      fn, p_fence, p_name, now_ms - r.transition_ms USING ERRCODE = '" SIMBA__PG_FENCE_REFUSED "';\n" \
    "  END IF;\n"                                                                                 \
    "  RETURN true;\n"                                                                            \
    "END $simba$;\n"

/* >>version  The layout's version, in the mutex table's COMMENT ({M}: "simba schema version
   N"), which the setup writes last, in its transaction: a connection reads it, and whether
   every object is there, in one cheap query ({O}: the schema as a literal, or NULL), and runs
   the setup only when something is missing. Another version is refused (SIMBA_EDENIED). */
#define SIMBA__PG_SCHEMA_VERSION 1
#define SIMBA__PG_VERSION_TAG "simba schema version "
static const char *const simba__pg_check_sql[] = {
    "SELECT obj_description(to_regclass($n${T}$n$), 'pg_class'), to_regclass($n${T}$n$) IS NOT NULL,\n"
    "  to_regclass($n${Q}$n$) IS NOT NULL AND to_regclass($n${S}$n$) IS NOT NULL AND to_regclass($n${B}$n$) IS NOT NULL\n"
    "  AND to_regproc($n${A}$n$) IS NOT NULL AND to_regproc($n${R}$n$) IS NOT NULL AND to_regproc($n${D}$n$) IS NOT NULL\n"
    "  AND to_regproc($n${V}$n$) IS NOT NULL AND to_regproc($n${E}$n$) IS NOT NULL AND to_regproc($n${P}$n$) IS NOT NULL\n"
    "  AND to_regproc($n${Z}$n$) IS NOT NULL AND to_regproc($n${F}$n$) IS NOT NULL AND to_regproc($n${W}$n$) IS NOT NULL\n"
    "  AND to_regproc($n${X}$n$) IS NOT NULL AND to_regproc($n${Y}$n$) IS NOT NULL",
    NULL};

/* The setup (the objects' owner, once; see PRIVILEGES): every function's search_path is the
   table's schema, then pg_temp; a table of another version found under the lock is refused. */
static const char *const simba__pg_setup_sql[] = {
    "BEGIN;\n"
    "SELECT pg_advisory_xact_lock(" SIMBA__PG_LOCK_KEY ");\n"
    "SELECT set_config('search_path', quote_ident(coalesce({O}, current_schema())) || ', pg_temp', true);\n"
    "DO $simba$ DECLARE c text := obj_description(to_regclass($n${T}$n$), 'pg_class'); BEGIN\n"
    "  IF to_regclass($n${T}$n$) IS NOT NULL AND c IS DISTINCT FROM $n${M}$n$ THEN\n"
    "    RAISE EXCEPTION 'table % carries %, not %: it is not this simba''s', $n${T}$n$,\n"
    "      coalesce('the comment ' || quote_literal(c), 'no comment'), $n${M}$n$ USING ERRCODE = '55000';\n"
    "  END IF;\n"
    "END $simba$;\n"
    /* a mutex table gone where simba was set up before (DROP TABLE: no trigger sees it) took
       its rows, fences and leases with it: the marker then restarts (below) */
    "SELECT set_config('simba.table_lost', CASE WHEN to_regclass($n${T}$n$) IS NULL\n"
    "  AND to_regproc($n${A}$n$) IS NOT NULL THEN 'on' ELSE 'off' END, true);\n"
    "CREATE TABLE IF NOT EXISTS {T} (name text PRIMARY KEY, owner text NOT NULL DEFAULT '',\n"
    "  fence bigint NOT NULL DEFAULT 0, acquired_ms bigint NOT NULL DEFAULT 0,\n"
    "  ttl_ms bigint NOT NULL DEFAULT 0, transition_ms bigint NOT NULL DEFAULT 0,\n"
    "  value bytea NOT NULL DEFAULT '', permits int NOT NULL DEFAULT 0);\n"
    "CREATE TABLE IF NOT EXISTS {Q} (name text NOT NULL, contender text NOT NULL,\n"
    "  channel text NOT NULL, seq bigserial, expires_ms bigint NOT NULL,\n"
    "  ttl_ms bigint NOT NULL DEFAULT 0, tr_ms bigint NOT NULL DEFAULT 0,\n"
    "  value bytea NOT NULL DEFAULT '', shared boolean NOT NULL DEFAULT false,\n"
    "  PRIMARY KEY (name, contender));\n"
    "CREATE INDEX IF NOT EXISTS {I} ON {Q} (name, seq);\n"
    /* created with its row; a crash empties it (see SIMBA__PG_GUARD) */
    "DO $simba$ BEGIN\n"
    "  CREATE UNLOGGED TABLE {B} (id int PRIMARY KEY, since_ms bigint NOT NULL, fence_floor bigint NOT NULL,\n"
    "    max_lease_ms bigint NOT NULL DEFAULT 0);\n"
    "  INSERT INTO {B} VALUES (1, 0, 0);\n"
    "EXCEPTION WHEN duplicate_table THEN NULL;\n"
    "END $simba$;\n",
    /* (one script, cut in two for C99's longest string) Only the server empties the
       marker (crash recovery, promotion, a restored backup: see SIMBA__PG_GUARD_LOAD); a
       statement that empties it starts the quarantine there. */
    "CREATE OR REPLACE FUNCTION {Y}() RETURNS trigger LANGUAGE plpgsql " SIMBA__PG_DEFINER " AS $simba$\n"
    "BEGIN\n"
    "  " SIMBA__PG_MARKER_RESTART
    "  RETURN NULL;\n"
    "END $simba$;\n"
    "DO $simba$ BEGIN\n"
    "  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($n${B}$n$)\n"
    "                 AND tgname = $n${N}_boot_kept$n$) THEN\n"
    "    CREATE TRIGGER {K} AFTER DELETE OR TRUNCATE ON {B} FOR EACH STATEMENT EXECUTE PROCEDURE {Y}();\n"
    "  END IF;\n"
    "  IF current_setting('simba.table_lost') = 'on' THEN\n"
    "    " SIMBA__PG_MARKER_RESTART
    "  END IF;\n"
    "END $simba$;\n"
    /* When the server began taking writes (its WAL writer's start: after crash recovery, a
       promotion or a restore), NULL where its owner may not see it (pg_read_all_stats may). */
    "CREATE OR REPLACE FUNCTION {W}() RETURNS bigint LANGUAGE plpgsql STABLE " SIMBA__PG_DEFINER " AS $simba$\n"
    "BEGIN\n"
    "  RETURN (SELECT floor(extract(epoch FROM backend_start) * 1000)::bigint FROM pg_stat_activity\n"
    "          WHERE backend_type = 'walwriter' LIMIT 1);\n"
    "EXCEPTION WHEN OTHERS THEN RETURN NULL;\n"
    "END $simba$;\n"
    /* Rows that vanish (DELETE, TRUNCATE) take their fences and maybe a live lease with them:
       the floor rises above every fence they held, so a row made again never repeats one,
       and a live lease among them starts the quarantine now, as a lost marker does. */
    "CREATE OR REPLACE FUNCTION {X}() RETURNS trigger LANGUAGE plpgsql " SIMBA__PG_DEFINER " AS $simba$\n"
    "DECLARE now_ms bigint; f bigint; live boolean;\n"
    "BEGIN\n"
    "  " SIMBA__PG_NOW
    "  IF TG_OP = 'TRUNCATE' THEN\n"
    "    SELECT max(fence), bool_or(owner <> '' AND transition_ms >= now_ms) INTO f, live FROM {T};\n"
    "  ELSE\n"
    "    SELECT max(fence), bool_or(owner <> '' AND transition_ms >= now_ms) INTO f, live FROM simba_gone;\n"
    "  END IF;\n"
    "  IF f IS NOT NULL THEN\n"
    /* no marker row: the next grant starts the crash quarantine with a floor of its own */
    "    UPDATE {B} SET fence_floor = greatest(fence_floor, f + 1),\n"
    "      since_ms = CASE WHEN live THEN greatest(since_ms, now_ms) ELSE since_ms END WHERE id = 1;\n"
    "  END IF;\n"
    "  RETURN NULL;\n"
    "END $simba$;\n"
    /* the catalog is asked first: CREATE TRIGGER locks the table against every grant */
    "DO $simba$ BEGIN\n"
    "  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($n${T}$n$)\n"
    "                 AND tgname = $n${N}_lost$n$) THEN\n"
    "    CREATE TRIGGER {G} AFTER DELETE ON {T} REFERENCING OLD TABLE AS simba_gone\n"
    "      FOR EACH STATEMENT EXECUTE PROCEDURE {X}();\n"
    "  END IF;\n"
    "  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($n${T}$n$)\n"
    "                 AND tgname = $n${N}_lost_t$n$) THEN\n"
    "    CREATE TRIGGER {H} BEFORE TRUNCATE ON {T} FOR EACH STATEMENT EXECUTE PROCEDURE {X}();\n"
    "  END IF;\n"
    "END $simba$;\n",
    SIMBA__PG_SET_SETUP,
    SIMBA__PG_VALUE_SETUP,
    SIMBA__PG_GRANT_FN,
    SIMBA__PG_YIELD_FN,
    SIMBA__PG_YIELD_FN_B,
    SIMBA__PG_YIELD_FN_C,
    SIMBA__PG_SET_FN_A,
    SIMBA__PG_SET_FN_B,
    /* acquire: p_renew = the core believes it owns it (renewal keeps fence, acquired and
       value); a new tenure stores p_val, and a waiter's place keeps it for a release's grant
       (SQL of an application's own may leave it out: no value) */
    "CREATE OR REPLACE FUNCTION {A}(p_name text, p_id text, p_ttl bigint, p_tr bigint,\n"
    "  p_live bigint, p_renew boolean, p_chan text, p_val bytea DEFAULT '', " SIMBA__PG_OUT ")\n"
    "LANGUAGE plpgsql " SIMBA__PG_FN_SET " AS $simba$\n"
    "DECLARE r {T}%ROWTYPE; h {S}%ROWTYPE; now_ms bigint; head text; live boolean; nh bigint := 0;\n"
    "  b_since bigint; b_floor bigint; b_until bigint; b_bound bigint; my_bound bigint;\n"
    "BEGIN\n"
    /* A renewal of a live lease, the common case, is one statement (each statement of a
       function costs ~20 us of server time); its row lock serialises it as FOR UPDATE does. */
    "  IF p_renew THEN\n"
    "    " SIMBA__PG_NOW
    "    UPDATE {T} SET ttl_ms = now_ms + p_ttl, transition_ms = now_ms + p_ttl + p_tr\n"
    "      WHERE name = p_name AND owner = p_id AND transition_ms >= now_ms RETURNING * INTO r;\n"
    "    IF FOUND THEN\n"
    "      o_first := 0;\n"
    SIMBA__PG_ANSWER
    "      RETURN;\n"
    "    END IF;\n"
    "  END IF;\n"
    "  SELECT * INTO r FROM {T} WHERE name = p_name FOR UPDATE;\n"
    "  IF NOT FOUND THEN\n"
    "    INSERT INTO {T} (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING;\n"
    "    SELECT * INTO r FROM {T} WHERE name = p_name FOR UPDATE;\n"
    "  END IF;\n"
    "  " SIMBA__PG_NOW
    "  DELETE FROM {Q} WHERE name = p_name AND expires_ms < now_ms;\n"
    "  live := r.owner <> '' AND r.transition_ms >= now_ms;\n"
    "  o_first := 0;\n",
    /* (the function, cut in two for C99's longest string) */
    "  IF live AND r.owner = p_id AND p_renew THEN\n"
    "    UPDATE {T} SET ttl_ms = now_ms + p_ttl, transition_ms = now_ms + p_ttl + p_tr\n"
    "      WHERE name = p_name RETURNING * INTO r;\n"
    "  ELSE\n"
    /* readers or permits hold (the set): an exclusive grant waits for them; a semaphore's
       name refuses a mutex's ask while anyone holds or waits */
    "    SELECT count(*) INTO nh FROM {S} WHERE name = p_name AND transition_ms >= now_ms;\n"
    "    IF r.permits > 1 AND (nh > 0 OR EXISTS (SELECT 1 FROM {Q} WHERE name = p_name AND contender <> p_id)) THEN\n"
    "      o_owner := ''; o_ttl := r.permits; o_tr := 1; o_held := -1; o_fence := 0; o_first := 6; o_val := '';\n"
    "      RETURN;\n"
    "    END IF;\n"
    "    SELECT contender INTO head FROM {Q} WHERE name = p_name ORDER BY seq LIMIT 1;\n"
    /* a stored owner re-acquiring after a local step-down (or a pushed grant it never
       heard of) starts a new tenure; a free mutex goes to the head of the line (or anyone
       when nobody waits); a renewal whose lease has ended is no new grant and takes no place */
    "    IF NOT p_renew AND ((live AND r.owner = p_id) OR (NOT live AND nh = 0 AND (head IS NULL OR head = p_id))) THEN\n"
    SIMBA__PG_GUARD
    "      UPDATE {T} SET owner = p_id, fence = greatest(fence + 1, b_floor), acquired_ms = now_ms,\n"
    "        ttl_ms = now_ms + p_ttl, transition_ms = now_ms + p_ttl + p_tr, value = p_val\n"
    "        WHERE name = p_name RETURNING * INTO r;\n"
    "      DELETE FROM {Q} WHERE name = p_name AND contender = p_id;\n"
    "    ELSE\n"
    /* the waiter's lease goes with its place: a release grants it to the head at once */
    "      IF NOT p_renew THEN\n"
    "      INSERT INTO {Q} (name, contender, channel, expires_ms, ttl_ms, tr_ms, value)\n"
    "        VALUES (p_name, p_id, p_chan, now_ms + p_live, p_ttl, p_tr, p_val)\n"
    "        ON CONFLICT (name, contender) DO UPDATE\n"
    "        SET channel = EXCLUDED.channel, expires_ms = EXCLUDED.expires_ms,\n"
    "            ttl_ms = EXCLUDED.ttl_ms, tr_ms = EXCLUDED.tr_ms, value = EXCLUDED.value;\n"
    "      END IF;\n"
    /* first in line: the line was empty, or we led it */
    "      o_first := CASE WHEN head IS NULL OR head = p_id THEN 1 ELSE 0 END;\n"
    "      IF r.permits <> 1 THEN UPDATE {T} SET permits = 1 WHERE name = p_name; END IF;\n"
    "      IF nh > 0 AND NOT live THEN\n"
    SIMBA__PG_FIRST_HOLDER
    "      END IF;\n"
    "    END IF;\n"
    "  END IF;\n"
    SIMBA__PG_ANSWER
    "END $simba$;\n",
    /* release by the live owner: the mutex goes at once to the oldest live waiter, with
       that waiter's own ttl and transition from the server's now, and the NOTIFY to its
       channel carries the grant (one hop: the waiter needs no statement of its own); with
       nobody waiting the row is cleared. A release by anyone else leaves the line. */
    "CREATE OR REPLACE FUNCTION {R}(p_name text, p_id text, " SIMBA__PG_OUT ")\n"
    "LANGUAGE plpgsql " SIMBA__PG_FN_SET " AS $simba$\n"
    "DECLARE r {T}%ROWTYPE; now_ms bigint; hd text; ch text; h_ttl bigint; h_tr bigint; h_val bytea;\n"
    "  b_since bigint; b_floor bigint; b_until bigint; my_bound bigint; h_sh boolean; freed boolean;\n"
    "BEGIN\n"
    "  SELECT * INTO r FROM {T} WHERE name = p_name FOR UPDATE;\n"
    "  IF NOT FOUND THEN\n"
    "    o_owner := ''; o_ttl := 0; o_tr := 0; o_held := -1; o_fence := 0; o_first := 0;\n"
    "    RETURN;\n"
    "  END IF;\n"
    "  " SIMBA__PG_NOW
    "  o_first := 0;\n"
    "  IF r.owner = p_id AND r.transition_ms >= now_ms THEN\n"
    SIMBA__PG_HAND_OVER
    "    IF hd IS NULL THEN\n"
    "      UPDATE {T} SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = p_name;\n"
    "      r.owner := '';\n"
    "    END IF;\n"
    "  ELSE\n"
    /* a holding of the set: freed, and pushed to the waiters it frees */
    "    DELETE FROM {S} WHERE name = p_name AND contender = p_id;\n"
    "    freed := FOUND;\n"
    "    DELETE FROM {Q} WHERE name = p_name AND contender = p_id;\n"
    "    IF freed THEN\n"
    SIMBA__PG_GRANT_SET
    "    END IF;\n"
    "  END IF;\n"
    SIMBA__PG_ANSWER
    "END $simba$;\n",
    "CREATE OR REPLACE FUNCTION {D}(p_name text, " SIMBA__PG_OUT ")\n"
    "LANGUAGE plpgsql STABLE " SIMBA__PG_FN_SET " AS $simba$\n"
    "DECLARE r {T}%ROWTYPE; now_ms bigint;\n"
    "BEGIN\n"
    "  " SIMBA__PG_NOW
    "  SELECT * INTO r FROM {T} WHERE name = p_name;\n"
    "  o_first := 0;\n"
    "  IF NOT FOUND THEN r.owner := ''; END IF;\n"
    SIMBA__PG_ANSWER
    "END $simba$;\n",
    SIMBA__PG_CHECK_FENCE,
    "REVOKE EXECUTE ON FUNCTION {A}, {R}, {D}, {V}, {E}, {P}, {Z}, {F}, {W} FROM PUBLIC;\n"
    "COMMENT ON TABLE {T} IS $n${M}$n$;\n"
    "COMMIT;\n",
    NULL};

/* Every connection, in one round trip: its settings, its statements, its channel. */
static const char *const simba__pg_session_sql[] = {
    /* no commit waits for the WAL flush (see SIMBA__PG_GUARD); the quarantine's lower bound */
    "SET synchronous_commit = off;\n"
    "SELECT set_config('simba.max_lease_ms', '{L}', false);\n"
    "PREPARE simba_acq (text, text, bigint, bigint, bigint, boolean, text, text) AS\n"
    "  SELECT " SIMBA__PG_COLS " FROM {A}($1, $2, $3, $4, $5, $6, $7, decode($8, 'hex'));\n"
    "PREPARE simba_sacq (text, text, bigint, bigint, bigint, boolean, text, text, int, boolean) AS\n"
    "  SELECT " SIMBA__PG_COLS " FROM {P}($1, $2, $3, $4, $5, $6, $7, decode($8, 'hex'), $9, $10);\n"
    "PREPARE simba_val (text, text, bigint, text) AS\n"
    "  SELECT " SIMBA__PG_COLS " FROM {V}($1, $2, $3, decode($4, 'hex'));\n"
    "PREPARE simba_yield (text, text, bigint, bigint, text, bigint, bigint) AS\n"
    "  SELECT " SIMBA__PG_COLS " FROM {E}($1, $2, $3, $4, $5, $6, $7);\n"
    "PREPARE simba_rel (text, text) AS SELECT " SIMBA__PG_COLS " FROM {R}($1, $2);\n"
    "PREPARE simba_read (text) AS SELECT " SIMBA__PG_COLS " FROM {D}($1);\n"
    SIMBA__PG_INSPECTION
    "LISTEN {C};\n"
    "LISTEN {J};\n",
    NULL};

#define SIMBA__PG_NOTES 8 /* announcements in flight at once (see >>follow) */
typedef struct simba__pg_note {
    simba_req req; /* op SIMBA_OP_CALL, no service: simba_req_done only marks it done */
    char mutex[SIMBA_NAME_MAX + 1];
    char text[32 * 6 + SIMBA_ID_MAX + SIMBA_NAME_MAX + 2 * SIMBA_VALUE_MAX + 8];
} simba__pg_note;

/* A grant pushed by a release (see PUSH), kept until its contender's ask takes it. */
#define SIMBA__PG_GRANTS 4
typedef struct simba__pg_grant {
    char mutex[SIMBA_NAME_MAX + 1], id[SIMBA_ID_MAX + 1];
    uint64_t fence;
    int64_t ttl, tr;
    int64_t start; /* loop ms no later than the grant (the server's ms while parsing) */
    int used;
} simba__pg_grant;

typedef struct simba__pg {
    simba_loop *loop;
    simba_backend *be;
    const char *keys[24], *vals[24];
    int expand;
    char *strs[16]; /* owned copies behind vals */
    char port_s[16], opts[64];
    char *check, *setup, *session; /* the statements of SETUP, names filled in (>>version) */
    int phase;     /* SETUP: 0 the version check, 1 the setup, 2 the session's statements */
    int need;      /* SETUP: what the check found: 0 all there, 1 the setup must run */
    simba_result down_rc; /* DOWN: what requests fail with (SIMBA_ECONN, or SIMBA_EDENIED) */
    char tname[SIMBA__PG_QNAME_MAX]; /* the quoted table, for the words */
    char chan[48];
    PGconn *conn;
    int state, fd;
    int want_write; /* CONNECTING: PQconnectPoll asked for POLLOUT; else output not flushed */
    int busy;       /* SETUP: the setup script is in flight */
    int pipeline;   /* READY in libpq pipeline mode: every queued request goes out at once */
    int nfl;        /* READY: statements in flight, fhead..ftail in order */
    int ngot;       /* READY: results held in res[] for the oldest ngot of them */
    int rescap;     /* slots in res[] (grows to the most statements ever in flight) */
    int await_null; /* READY: a statement's result came, its terminating NULL not yet */
    int nsync;      /* READY (pipeline): batches sent whose sync has not come back */
    int batch_err;  /* READY: a statement of the current batch failed: its simba_result (words in err) */
    PGresult **res; /* results of the current batch, answered only once it has committed */
    int more;       /* READY: answers wait in libpq's buffer for the next poll (time budget) */
    int was_up;     /* a setup has completed before: the next one raises SIMBA_EV_RESET */
    int stall_syncs; /* STALLED: syncs of batches whose requests failed, still to come back */
    uint64_t pushed;   /* asks answered from a pushed grant (tests) */
    uint64_t connects; /* connections started (tests: a stall that ends keeps its connection) */
    int64_t conn_to, stmt_to, rmin, rmax, backoff, stall_to, stall_deadline;
    int64_t conn_deadline, stmt_deadline, retry_at;
    int64_t send_at; /* READY: the queued requests go out by then (INT64_MAX: none waits) */
    simba_req *fhead, *ftail, *head, *tail;
    simba_reply rep;
    char owner_buf[SIMBA_ID_MAX + 1];
    char err[512];
    char num[4][24];
    char val_hex[2 * SIMBA_VALUE_MAX + 1];  /* a request's value as the statement's parameter */
    unsigned char val[SIMBA_VALUE_MAX];     /* the owner's value in the answer in rep */
    unsigned char view_val[SIMBA_VALUE_MAX]; /* ... in an inspection's row */
    /* loop ms minus server ms, a lower bound taken from an answer (s - T - 1: the statement
       ran after it was submitted at s, and the server's clock read T then, truncated to
       the ms); off_at = when, INT64_MIN = no answer yet on this connection */
    int64_t off, off_at;
    int64_t rep_server_ms; /* the server's clock in the answer in rep (0: none) */
    simba__pg_grant grants[SIMBA__PG_GRANTS];
    char follow[32]; /* the table's follow channel (see >>follow) */
    struct simba__pg_note *notes[SIMBA__PG_NOTES]; /* announcements, reused once done */
} simba__pg;

/* >>row  One answer row (text format) into a reply; 0, or -1 with err set. Checks every
   field: a value that does not parse never becomes an owner. */
static int simba__pg_int(const char *s, int64_t *out) {
    int neg = 0;
    uint64_t v = 0;
    if (!s || !*s) return -1;
    if (*s == '-') { neg = 1; s++; }
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        if (v > (UINT64_C(9223372036854775807) - (uint64_t)(*s - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* Bytes as hex text (bytea travels as hex both ways: decode($n, 'hex'), encode(v, 'hex')). */
static const char *simba__pg_hex(char *out, const unsigned char *v, size_t n) {
    static const char digits[] = "0123456789abcdef";
    size_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = digits[v[i] >> 4];
        out[2 * i + 1] = digits[v[i] & 15];
    }
    out[2 * n] = 0;
    return out;
}

static int simba__pg_nibble(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A value column (hex, NULL = none) into out; -1 with err set when it is not hex or is over
   SIMBA_VALUE_MAX (not written by simba: an error, never cut). */
/* n hex digits at hex into out (SIMBA_VALUE_MAX bytes), *len bytes. */
static int simba__pg_unhex_n(const char *hex, size_t n, unsigned char *out, size_t *len, char *err, size_t errcap) {
    size_t i;
    *len = 0;
    if (n % 2) { snprintf(err, errcap, "postgres: the owner's value is not hex"); return -1; }
    if (n / 2 > SIMBA_VALUE_MAX) {
        snprintf(err, errcap, "postgres: the owner's value is %zu bytes, over SIMBA_VALUE_MAX (%d)", n / 2,
                 SIMBA_VALUE_MAX);
        return -1;
    }
    for (i = 0; i < n; i += 2) {
        int hi = simba__pg_nibble(hex[i]), lo = simba__pg_nibble(hex[i + 1]);
        if (hi < 0 || lo < 0) { snprintf(err, errcap, "postgres: the owner's value is not hex"); return -1; }
        out[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    *len = n / 2;
    return 0;
}
static int simba__pg_unhex(const char *hex, unsigned char *out, size_t *len, char *err, size_t errcap) {
    return simba__pg_unhex_n(hex, hex ? strlen(hex) : 0, out, len, err, errcap);
}

static int simba__pg_parse_row(int nfields, const char *const *vals, simba_reply *out, int64_t *server_ms, char *owner_buf,
                               unsigned char *val_buf, char *err, size_t errcap) {
    int64_t n[6];
    int i, refused;
    simba__reply_none(out);
    *server_ms = 0;
    if (nfields != 8) { snprintf(err, errcap, "postgres: answer has %d columns, expected 8", nfields); return -1; }
    for (i = 0; i < 7; i++) /* (the value, column 8, may be NULL: none) */
        if (!vals[i]) { snprintf(err, errcap, "postgres: answer column %d is NULL", i + 1); return -1; }
    for (i = 0; i < 6; i++)
        if (simba__pg_int(vals[i + 1], &n[i]) != 0) {
            snprintf(err, errcap, "postgres: answer column %d is not an integer", i + 2);
            return -1;
        }
    if (n[5] <= 0) { snprintf(err, errcap, "postgres: server clock %lld is not a time", (long long)n[5]); return -1; }
    *server_ms = n[5];
    if (n[4] == 2) { /* a grant refused by the quarantine (SIMBA__PG_GUARD); o_ttl = ms left */
        if (vals[0][0] || n[0] < 0 || n[0] > SIMBA_MAX_MS) {
            snprintf(err, errcap, "postgres: quarantine answer with an owner or out of range (%lld ms)", (long long)n[0]);
            return -1;
        }
        snprintf(err, errcap, "postgres: crash quarantine: the server lost its unlogged marker (crash recovery, a promoted "
                 "standby or a restored backup) or rows were deleted under a live lease, so an owner may not know it "
                 "lost: no new owner for %lld ms more",
                 (long long)n[0]);
        /* the core asks again when it ends, and tells the application */
        simba__reply_fail(out, SIMBA_EBACKEND, err)->quarantine_ms = n[0];
        return 0;
    }
    if (n[4] == 3) { /* a grant refused: the table's marker keeps another max_lease_ms (SIMBA__PG_GUARD) */
        snprintf(err, errcap, "postgres: max_lease_ms mismatch: the table's crash marker holds %lld ms, this process uses "
                 "%lld ms; every process on a table must use the same max_lease_ms", (long long)n[0], (long long)n[1]);
        simba__reply_fail(out, SIMBA_EBACKEND, err);
        return 0;
    }
    if (n[4] == 6) { /* another N than the name's while anyone holds or waits ({P}, {A}) */
        simba__reply_conflict(out, err, errcap, n[1], n[0]);
        return 0;
    }
    if (n[4] != 0 && n[4] != 1 && n[4] != 4 && n[4] != 5) { snprintf(err, errcap, "postgres: first_in_line must be 0 to 6"); return -1; }
    out->first_in_line = n[4] == 1;
    out->yielded = n[4] == 5;
    /* the fence of a SET_VALUE or YIELD no longer holds: the row as it is says who holds it */
    refused = n[4] == 4;
    if (refused) out->rc = SIMBA_EFENCE;
    if (!vals[0][0]) return 0; /* nobody: the durations mean nothing */
    if (simba_id_check(vals[0]) != SIMBA_OK) { snprintf(err, errcap, "postgres: stored owner id is not a valid contender id"); return -1; }
    if (n[0] > SIMBA_MAX_MS || n[1] > SIMBA_MAX_MS || n[0] < -SIMBA_MAX_MS || n[1] < 0 || n[1] < n[0] || n[2] < 0 ||
        n[2] > SIMBA_MAX_MS || n[3] <= 0) {
        snprintf(err, errcap, "postgres: owner row out of range (ttl %lld, transition %lld, held %lld, fence %lld)",
                 (long long)n[0], (long long)n[1], (long long)n[2], (long long)n[3]);
        return -1;
    }
    if (simba__pg_unhex(vals[7], val_buf, &out->value_len, err, errcap) != 0) return -1;
    out->value = out->value_len > 0 ? val_buf : NULL;
    simba__copy(owner_buf, SIMBA_ID_MAX + 1, vals[0]);
    out->owner = owner_buf;
    out->ttl_left_ms = n[0];
    out->transition_left_ms = n[1];
    out->held_ms = n[2];
    out->fence = (uint64_t)n[3];
    return 0;
}

/* A release's NOTIFY payload (see PUSH): "<contender> <mutex>", a hint (returns 1), or
   "G <fence> <ttl> <transition> <server ms> <contender> <mutex>", a grant (returns 2, with
   the server's ms in g->start); 0 when malformed. Ids and names hold no spaces. */
static int simba__pg_parse_push(const char *s, simba__pg_grant *g) {
    const char *f[7];
    size_t len[7];
    int n = 0, i;
    int64_t v[4];
    memset(g, 0, sizeof *g);
    while (n < 7) {
        const char *sp = strchr(s, ' ');
        f[n] = s;
        len[n] = sp ? (size_t)(sp - s) : strlen(s);
        n++;
        if (!sp) break;
        s = sp + 1;
        if (n == 7) return 0; /* more fields than a grant has */
    }
    if (n != 2 && !(n == 7 && len[0] == 1 && f[0][0] == 'G')) return 0;
    if (len[n - 2] < 1 || len[n - 2] > SIMBA_ID_MAX || len[n - 1] < 1 || len[n - 1] > SIMBA_NAME_MAX) return 0;
    memcpy(g->id, f[n - 2], len[n - 2]);
    memcpy(g->mutex, f[n - 1], len[n - 1]);
    if (simba_id_check(g->id) != SIMBA_OK || simba_name_check(g->mutex) != SIMBA_OK) return 0;
    if (n == 2) return 1;
    for (i = 0; i < 4; i++) {
        char num[24];
        if (len[i + 1] < 1 || len[i + 1] >= sizeof num) return 0;
        memcpy(num, f[i + 1], len[i + 1]);
        num[len[i + 1]] = 0;
        if (simba__pg_int(num, &v[i]) != 0) return 0;
    }
    if (v[0] <= 0 || v[1] <= 0 || v[1] > SIMBA_MAX_MS || v[2] < 0 || v[2] > SIMBA_MAX_MS || v[3] <= 0) return 0;
    g->fence = (uint64_t)v[0];
    g->ttl = v[1];
    g->tr = v[2];
    g->start = v[3];
    return 2;
}

/* >>names  "name" with doubled quotes; 0 when it does not fit. */
static int simba__pg_quote(char *dst, size_t cap, const char *schema, const char *name, const char *suffix) {
    size_t o = 0;
    int part;
    for (part = schema ? 0 : 1; part < 2; part++) {
        const char *s = part ? name : schema;
        if (o + 1 >= cap) return 0;
        dst[o++] = '"';
        for (; *s; s++) {
            if (o + 3 >= cap) return 0;
            if (*s == '"') dst[o++] = '"';
            dst[o++] = *s;
        }
        if (part) for (s = suffix; *s; s++) {
            if (o + 3 >= cap) return 0;
            dst[o++] = *s;
        }
        dst[o++] = '"';
        if (!part) dst[o++] = '.';
    }
    dst[o] = 0;
    return 1;
}

/* The fence check's function name (FENCED WRITES): simba_check_fence for the default table,
   <table>_check_fence for any other, so that the tables of one schema keep one each. */
static const char *simba__pg_fence_fn(const char *table, char *buf, size_t cap) {
    if (strcmp(table, "simba_mutex") == 0) snprintf(buf, cap, "simba_check_fence");
    else snprintf(buf, cap, "%s_check_fence", table);
    return buf;
}

static int simba__pg_name_ok(const char *t) {
    size_t n = strlen(t), i;
    if (n < 1 || n > SIMBA__PG_TABLE_MAX) return 0;
    for (i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || (unsigned char)t[i] > 0x7e || t[i] == '$') return 0;
    return 1;
}

/* Joins the parts, replacing each {X} by subst[X - 'A'] (letters A..Z). NULL when out of memory. */
static char *simba__pg_fill(simba_loop *loop, const char *const *parts, const char *const *subst) {
    size_t need = 1, o = 0;
    const char *p;
    char *out;
    int i;
    for (i = 0; parts[i]; i++)
    for (p = parts[i]; *p; p++) {
        if (p[0] == '{' && p[1] >= 'A' && p[1] <= 'Z' && p[2] == '}' && subst[p[1] - 'A']) {
            need += strlen(subst[p[1] - 'A']);
            p += 2;
        } else need++;
    }
    out = (char *)simba_alloc(loop, need);
    if (!out) return NULL;
    for (i = 0; parts[i]; i++)
    for (p = parts[i]; *p; p++) {
        if (p[0] == '{' && p[1] >= 'A' && p[1] <= 'Z' && p[2] == '}' && subst[p[1] - 'A']) {
            size_t l = strlen(subst[p[1] - 'A']);
            memcpy(out + o, subst[p[1] - 'A'], l);
            o += l;
            p += 2;
        } else out[o++] = *p;
    }
    out[o] = 0;
    return out;
}

/* Fails the requests not yet sent. */
static void simba__pg_fail_queued(simba__pg *p, simba_result rc, const char *msg) {
    while (p->head) {
        simba_req *r = p->head;
        p->head = r->next_;
        if (!p->head) p->tail = NULL;
        simba_req_fail(r, rc, msg);
    }
}

/* >>conn */
static void simba__pg_fail_all(simba__pg *p, simba_result rc, const char *msg) {
    while (p->fhead) {
        simba_req *r = p->fhead;
        p->fhead = r->next_;
        simba_req_fail(r, rc, msg);
    }
    p->ftail = NULL;
    p->nfl = 0;
    p->await_null = 0;
    p->nsync = 0;
    p->batch_err = 0;
    while (p->ngot > 0) {
        p->ngot--;
        PQclear(p->res[p->ngot]);
        p->res[p->ngot] = NULL;
    }
    simba__pg_fail_queued(p, rc, msg);
}

static void simba__pg_set_err(simba__pg *p, const char *what, const char *detail) {
    size_t n;
    snprintf(p->err, sizeof p->err, "postgres: %s%s%s", what, detail && *detail ? ": " : "", detail ? detail : "");
    n = strlen(p->err);
    while (n > 0 && (p->err[n - 1] == '\n' || p->err[n - 1] == ' ')) p->err[--n] = 0;
    simba__copy(p->be->errmsg, sizeof p->be->errmsg, p->err);
}

/* >>errors  A failure that asking again cannot mend until an operator acts: a login refused
   (SQLSTATE class 28), a database, schema or privilege missing (3D000, 3F000, 42501).
   Requests fail with SIMBA_EDENIED at once, with the server's words and the privilege. */
static int simba__pg_denied_state(const char *st) {
    return st && (strncmp(st, "28", 2) == 0 || !strcmp(st, "3D000") || !strcmp(st, "3F000") || !strcmp(st, "42501"));
}

/* What this role lacks, from the server's words and the request (op, -1: none). */
static const char *simba__pg_privilege(const char *msg, int op) {
    if (strstr(msg, "for function ")) return "EXECUTE on that function";
    if (strstr(msg, "for schema ")) return "USAGE on that schema";
    if (strstr(msg, "for database ")) return "CONNECT on that database";
    if (strstr(msg, "must be owner")) return "the objects' ownership: run the setup as their owner once";
    if (strstr(msg, "for table ") || strstr(msg, "for sequence "))
        return op == SIMBA_OP_FORCE_RELEASE ? "UPDATE on the mutex table and DELETE on its _hold table"
                                            : "SELECT on that table (inspection: get, ls)";
    return NULL;
}

/* p->err from a failed result (what: the step); SIMBA_EDENIED or SIMBA_EBACKEND. */
static simba_result simba__pg_res_err(simba__pg *p, const char *what, const PGresult *res, int op) {
    const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE), *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *priv;
    char w[768];
    int setup = p->state == SIMBA__PG_SETUP && p->phase == 1;
    if (!m || !(simba__pg_denied_state(st) || (setup && st && !strcmp(st, "55000")))) {
        simba__pg_set_err(p, what, PQresultErrorMessage(res));
        return SIMBA_EBACKEND;
    }
    priv = simba__pg_privilege(m, op);
    if (setup && strcmp(st, "55000") != 0)
        snprintf(w, sizeof w, "simba's objects for table %s are missing or incomplete, and this role may not make them: "
                 "%s (run the setup once as the role that owns them; docs/postgresql.md, Privileges)", p->tname, m);
    else snprintf(w, sizeof w, "%s%s%s (docs/postgresql.md, Privileges)", m, priv ? ": this role needs " : "", priv ? priv : "");
    simba__pg_set_err(p, what, w);
    return SIMBA_EDENIED;
}

/* A failed connect: libpq's words (verbose: "FATAL:  28P01: ..." and a LOCATION line, cut
   here), SIMBA_EDENIED for a refused login or a missing role, database or privilege. */
static simba_result simba__pg_conn_err(simba__pg *p) {
    const char *m = PQerrorMessage(p->conn), *f = strstr(m, "FATAL:  ");
    char w[768], code[6] = "";
    size_t o = 0;
    const char *c;
    if (f && strlen(f) > 15 && f[13] == ':' && f[14] == ' ') memcpy(code, f + 8, 5);
    for (c = m; *c && o + 1 < sizeof w; c++) {
        if (code[0] && c == f + 8) c += 7; /* the SQLSTATE and its ": " */
        if (strncmp(c, "\nLOCATION:", 10) == 0) break;
        w[o++] = *c;
    }
    w[o] = 0;
    simba__pg_set_err(p, "connect failed", w);
    return simba__pg_denied_state(code) ? SIMBA_EDENIED : SIMBA_ECONN;
}

/* The version check's row (>>version): p->need, or SIMBA_EDENIED with words for a table of
   another version or one simba did not make. */
static simba_result simba__pg_version(simba__pg *p, const PGresult *res) {
    const char *c = PQntuples(res) == 1 && PQnfields(res) == 3 && !PQgetisnull(res, 0, 0) ? PQgetvalue(res, 0, 0) : NULL;
    size_t tag = strlen(SIMBA__PG_VERSION_TAG);
    char w[768];
    int found = PQntuples(res) == 1 && PQnfields(res) == 3 && strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    long v = -1;
    if (c && strncmp(c, SIMBA__PG_VERSION_TAG, tag) == 0 && c[tag] >= '0' && c[tag] <= '9') v = strtol(c + tag, NULL, 10);
    if (v == SIMBA__PG_SCHEMA_VERSION || !found) {
        p->need = !found || strcmp(PQgetvalue(res, 0, 2), "t") != 0;
        return SIMBA_OK;
    }
    if (v >= 0)
        snprintf(w, sizeof w, "found simba schema version %ld on table %s, this simba uses %d: run one simba version on "
                 "a table, or give this one another table (simba_pg_desc.table, ?table= in its URL)", v, p->tname,
                 SIMBA__PG_SCHEMA_VERSION);
    else
        snprintf(w, sizeof w, "table %s carries %s%.80s%s, not a simba schema version: this simba's setup did not make it; "
                 "give simba another table (simba_pg_desc.table, ?table= in its URL) or drop this one", p->tname,
                 c ? "the comment \"" : "no comment", c ? c : "", c ? "\"" : "");
    simba__pg_set_err(p, "connection setup", w);
    return SIMBA_EDENIED;
}

/* The op of the n-th statement in flight (-1: none). */
static int simba__pg_nth_op(const simba__pg *p, int n) {
    const simba_req *r = p->fhead;
    while (r && n-- > 0) r = r->next_;
    return r ? (int)r->op : -1;
}

static void simba__pg_grants_clear(simba__pg *p);

/* Closes the connection, fails what is in flight or queued, schedules the next attempt. */
static void simba__pg_drop(simba__pg *p, int64_t now, simba_result rc) {
    int was_ready = p->state == SIMBA__PG_READY;
    /* the loop's watcher goes while the number is still this socket's */
    if (p->conn && PQsocket(p->conn) >= 0) simba_backend_fd(p->be, PQsocket(p->conn), 0);
    if (p->conn) PQfinish(p->conn);
    p->conn = NULL;
    p->fd = -1;
    p->busy = 0;
    p->pipeline = 0;
    p->want_write = 0;
    p->more = 0;
    p->send_at = INT64_MAX;
    p->state = SIMBA__PG_DOWN;
    p->down_rc = rc == SIMBA_EDENIED ? SIMBA_EDENIED : SIMBA_ECONN;
    simba__pg_grants_clear(p); /* a new connection may reach another server and clock */
    p->retry_at = simba__add(now, simba__backoff(p->loop, &p->backoff, p->rmin, p->rmax));
    simba_log(p->loop, SIMBA_LOG_WARN, "%s (next attempt in %lld ms)", p->err, (long long)(p->retry_at - now));
    simba__pg_fail_all(p, rc, p->err);
    /* Losing the connection is losing the server: the core's policy decides. */
    if (was_ready) simba_backend_event(p->be, SIMBA_EV_DISCONNECTED, NULL, NULL, NULL);
}

static void simba__pg_notice(void *arg, const char *msg) {
    (void)arg;
    (void)msg;
}

static void simba__pg_start(simba__pg *p, int64_t now) {
    p->connects++;
    p->conn = PQconnectStartParams(p->keys, p->vals, p->expand);
    p->conn_deadline = simba__add(now, p->conn_to);
    if (!p->conn || PQstatus(p->conn) == CONNECTION_BAD) {
        simba__pg_set_err(p, "connect failed", p->conn ? PQerrorMessage(p->conn) : "out of memory");
        simba__pg_drop(p, now, SIMBA_ECONN);
        return;
    }
    PQsetNoticeProcessor(p->conn, simba__pg_notice, NULL); /* libpq prints notices to stderr */
    PQsetErrorVerbosity(p->conn, PQERRORS_VERBOSE); /* a refused login's SQLSTATE (see >>errors) */
    p->state = SIMBA__PG_CONNECTING;
    p->fd = PQsocket(p->conn);
    p->want_write = 1; /* libpq: begin as if PQconnectPoll returned PGRES_POLLING_WRITING */
}

static void simba__pg_flush(simba__pg *p, int64_t now) {
    int f = PQflush(p->conn);
    if (f < 0) {
        simba__pg_set_err(p, "send failed", PQerrorMessage(p->conn));
        simba__pg_drop(p, now, SIMBA_ECONN);
        return;
    }
    p->want_write = f == 1;
}

/* Puts one request's statement (and, in pipeline mode, its sync) into the output buffer. */
static int simba__pg_send_one(simba__pg *p, simba_req *r) {
    const char *v[10];
    const char *stmt;
    int n;
    v[0] = r->mutex;
    v[1] = r->contender;
    if (r->op == SIMBA_OP_ACQUIRE) {
        snprintf(p->num[0], sizeof p->num[0], "%lld", (long long)r->ttl_ms);
        snprintf(p->num[1], sizeof p->num[1], "%lld", (long long)r->transition_ms);
        snprintf(p->num[2], sizeof p->num[2], "%lld", (long long)r->live_ms);
        v[2] = p->num[0];
        v[3] = p->num[1];
        v[4] = p->num[2];
        v[5] = r->renew ? "t" : "f";
        v[6] = p->chan;
        v[7] = simba__pg_hex(p->val_hex, r->value, r->value ? r->value_len : 0);
        stmt = "simba_acq";
        n = 8;
        if (r->permits > 1 || r->shared) { /* a reader or a permit: the holders set ({P}) */
            snprintf(p->num[3], sizeof p->num[3], "%d", r->permits > 1 ? r->permits : 1);
            v[8] = p->num[3];
            v[9] = r->shared ? "t" : "f";
            stmt = "simba_sacq";
            n = 10;
        }
    } else if (r->op == SIMBA_OP_SET_VALUE) {
        snprintf(p->num[0], sizeof p->num[0], "%llu", (unsigned long long)r->fence);
        v[2] = p->num[0];
        v[3] = simba__pg_hex(p->val_hex, r->value, r->value ? r->value_len : 0);
        stmt = "simba_val";
        n = 4;
    } else if (r->op == SIMBA_OP_YIELD) {
        /* the yielder's place: its liveness, and the lease a later release grants it (with
           the value it held) */
        snprintf(p->num[0], sizeof p->num[0], "%llu", (unsigned long long)r->fence);
        snprintf(p->num[1], sizeof p->num[1], "%lld",
                 (long long)(r->live_ms > 0 ? r->live_ms : simba__add(simba__add(r->ttl_ms, r->transition_ms), 2000)));
        snprintf(p->num[2], sizeof p->num[2], "%lld", (long long)r->ttl_ms);
        snprintf(p->num[3], sizeof p->num[3], "%lld", (long long)r->transition_ms);
        v[2] = p->num[0];
        v[3] = p->num[1];
        v[4] = p->chan;
        v[5] = p->num[2];
        v[6] = p->num[3];
        stmt = "simba_yield";
        n = 7;
    } else if (r->op == SIMBA_OP_RELEASE) {
        stmt = "simba_rel";
        n = 2;
    } else if (r->op == SIMBA_OP_INSPECT || r->op == SIMBA_OP_LIST) {
        stmt = r->op == SIMBA_OP_LIST ? "simba_list" : "simba_inspect";
        n = r->op == SIMBA_OP_LIST ? 0 : 1;
    } else if (r->op == SIMBA_OP_CALL) { /* an announcement (>>follow) */
        v[0] = p->follow;
        v[1] = ((const simba__pg_note *)(const void *)r)->text;
        return PQsendQueryParams(p->conn, "SELECT pg_notify($1, $2)", 2, NULL, v, NULL, NULL, 0);
    } else if (r->op == SIMBA_OP_FORCE_RELEASE) {
        snprintf(p->num[0], sizeof p->num[0], "%llu", (unsigned long long)r->fence);
        v[1] = p->num[0];
        stmt = "simba_force";
        n = 2;
    } else {
        stmt = "simba_read";
        n = 1;
    }
    /* prepared by the setup: the server neither parses nor plans it again */
    return PQsendQueryPrepared(p->conn, stmt, n, v, NULL, NULL, 0);
}

/* Stable merge sort of a request list by mutex name: every batch locks its rows in one
   global order, so two processes' batches never deadlock on each other; requests for one
   mutex keep the order they were submitted in. */
static simba_req *simba__pg_sort(simba_req *l) {
    simba_req *slow = l, *fast, *b, *out = NULL, **to = &out;
    if (!l || !l->next_) return l;
    for (fast = l->next_; fast && fast->next_; fast = fast->next_->next_) slow = slow->next_;
    b = slow->next_; /* the second half */
    slow->next_ = NULL;
    l = simba__pg_sort(l);
    b = simba__pg_sort(b);
    while (l && b) {
        if (strcmp(b->mutex, l->mutex) < 0) { *to = b; b = b->next_; } else { *to = l; l = l->next_; }
        to = &(*to)->next_;
    }
    *to = l ? l : b;
    return out;
}

/* Sorts the next transaction's worth of queued requests (the front of the queue). */
static void simba__pg_sort_front(simba__pg *p) {
    simba_req *rest, *last;
    int n = 1;
    for (last = p->head; last->next_ && n < SIMBA_PG_BATCH_MAX; last = last->next_) n++;
    if (n < 2) return;
    rest = last->next_;
    last->next_ = NULL;
    p->head = simba__pg_sort(p->head);
    for (last = p->head; last->next_; last = last->next_) {}
    last->next_ = rest;
    if (!rest) p->tail = last;
}

/* Renewals and a waiter's timer asks (req->deferrable) share a transaction: none of them
   wakes anyone. */
static int simba__pg_batchable(const simba_req *r) {
    return r->op == SIMBA_OP_ACQUIRE && (r->renew || r->deferrable != SIMBA_DEFER_NO);
}

/* How long a request may wait for company: the core's word (simba_req.company_ms). At 10,000
   mutexes the asks at lease ends, which lose while owners renew, would cost a commit each. */
static int64_t simba__pg_hold(const simba_req *r) { return r->op == SIMBA_OP_ACQUIRE ? r->company_ms : 0; }

/* Sends what is queued: in pipeline mode all of it as one batch, one transaction closed by
   one sync (renewals due in one poll share one round trip and one commit), sorted by name;
   else one statement at a time. */
static void simba__pg_send_next(simba__pg *p, int64_t now) {
    int sent = 0, flushed = 1, budget = 2 * SIMBA_PG_BATCH_MAX, last_batchable = 0;
    if (p->state != SIMBA__PG_READY || !p->head || (!p->pipeline && p->nfl > 0)) return;
    p->send_at = INT64_MAX;
    while (p->head && (p->pipeline || p->nfl == 0)) {
        simba_req *r = p->head;
        if (budget-- == 0) { /* one poll sends two batches at most: the rest goes next poll */
            p->send_at = 0;
            break;
        }
#ifdef LIBPQ_HAS_PIPELINING
        /* renewals and timer asks share a transaction (one commit for many); anything else,
           which may change the line or wake a waiter, has one of its own, as alone */
        if (p->pipeline && sent > 0 && (sent == SIMBA_PG_BATCH_MAX || !simba__pg_batchable(p->head) || !last_batchable)) {
            if (!PQpipelineSync(p->conn)) {
                simba__pg_set_err(p, "send failed", PQerrorMessage(p->conn));
                simba__pg_drop(p, now, SIMBA_ECONN);
                return;
            }
            p->nsync++;
            sent = 0;
        }
        if (p->pipeline && sent == 0) simba__pg_sort_front(p);
        r = p->head;
#endif
        if (p->nfl >= p->rescap) { /* a result slot per statement in flight, kept for reuse */
            int cap = p->rescap ? p->rescap * 2 : 64;
            PGresult **nr = (PGresult **)simba_alloc(p->loop, (size_t)cap * sizeof *nr);
            if (!nr) {
                simba__pg_fail_queued(p, SIMBA_ENOMEM, "postgres: out of memory");
                break;
            }
            memset(nr, 0, (size_t)cap * sizeof *nr);
            if (p->res) memcpy(nr, p->res, (size_t)p->rescap * sizeof *nr);
            simba_free(p->loop, p->res);
            p->res = nr;
            p->rescap = cap;
        }
        p->head = r->next_;
        if (!p->head) p->tail = NULL;
        r->next_ = NULL;
        if (p->ftail) p->ftail->next_ = r; else p->fhead = r;
        p->ftail = r;
        if (p->nfl++ == 0 && p->nsync == 0) p->stmt_deadline = simba__add(now, p->stmt_to);
        if (!simba__pg_send_one(p, r)) {
            simba__pg_set_err(p, "send failed", PQerrorMessage(p->conn));
            simba__pg_drop(p, now, SIMBA_ECONN);
            return;
        }
        sent++;
        flushed = 0;
        last_batchable = simba__pg_batchable(r);
    }
#ifdef LIBPQ_HAS_PIPELINING
    if (p->pipeline && sent) {
        if (!PQpipelineSync(p->conn)) {
            simba__pg_set_err(p, "send failed", PQerrorMessage(p->conn));
            simba__pg_drop(p, now, SIMBA_ECONN);
            return;
        }
        p->nsync++;
    }
#endif
    if (!flushed) simba__pg_flush(p, now);
}

/* Sends one step of SETUP (phase: see simba__pg.phase). */
static void simba__pg_setup_step(simba__pg *p, int64_t now, int phase) {
    const char *sql = phase == 0 ? p->check : phase == 1 ? p->setup : p->session;
    if (!PQsendQuery(p->conn, sql)) {
        simba__pg_set_err(p, "setup failed", PQerrorMessage(p->conn));
        simba__pg_drop(p, now, SIMBA_ECONN);
        return;
    }
    p->phase = phase;
    p->busy = 1;
    p->rep.rc = SIMBA_OK;
    simba__pg_flush(p, now);
}

static void simba__pg_connected(simba__pg *p, int64_t now) {
    PQsetErrorVerbosity(p->conn, PQERRORS_DEFAULT);
    if (PQsetnonblocking(p->conn, 1) != 0) {
        simba__pg_set_err(p, "setup failed", PQerrorMessage(p->conn));
        simba__pg_drop(p, now, SIMBA_ECONN);
        return;
    }
    p->state = SIMBA__PG_SETUP;
    p->need = 0;
    p->stmt_deadline = p->conn_deadline; /* connect + setup share connect_timeout_ms */
    simba__pg_setup_step(p, now, 0);
}

/* One result of the setup, or of the oldest statement in flight (into p->rep). */
static void simba__pg_result(simba__pg *p, PGresult *res) {
    ExecStatusType st = PQresultStatus(res);
    p->rep_server_ms = 0;
    if (p->state == SIMBA__PG_SETUP) {
        if ((st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) && p->rep.rc == SIMBA_OK)
            p->rep.rc = simba__pg_res_err(p, p->phase == 1 ? "setup" : "connection setup", res, -1); /* kept to the last result */
        else if (p->phase == 0 && st == PGRES_TUPLES_OK) p->rep.rc = simba__pg_version(p, res);
        return;
    }
    memset(&p->rep, 0, sizeof p->rep);
    if (st == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        const char *v[8];
        int i, nf = PQnfields(res);
        for (i = 0; i < 8 && i < nf; i++) v[i] = PQgetisnull(res, 0, i) ? NULL : PQgetvalue(res, 0, i);
        if (simba__pg_parse_row(nf, v, &p->rep, &p->rep_server_ms, p->owner_buf, p->val, p->err, sizeof p->err) != 0) {
            p->rep_server_ms = 0; /* an answer that does not parse tells nothing, not even the time */
            simba__reply_fail(&p->rep, SIMBA_EBACKEND, p->err);
        }
    } else if (st == PGRES_TUPLES_OK) {
        snprintf(p->err, sizeof p->err, "postgres: statement returned %d rows, expected 1", PQntuples(res));
        simba__copy(p->be->errmsg, sizeof p->be->errmsg, p->err);
        simba__reply_fail(&p->rep, SIMBA_EBACKEND, p->err);
    } else {
        simba__reply_fail(&p->rep, simba__pg_res_err(p, "statement failed", res, -1), p->err);
    }
}

/* The setup script is complete (PQgetResult returned NULL). */
static void simba__pg_setup_done(simba__pg *p, int64_t now) {
    p->busy = 0;
    if (p->rep.rc != SIMBA_OK) { simba__pg_drop(p, now, p->rep.rc == SIMBA_EDENIED ? SIMBA_EDENIED : SIMBA_ECONN); return; }
    if (p->phase < 2) { simba__pg_setup_step(p, now, p->phase == 0 && p->need ? 1 : 2); return; }
#ifdef LIBPQ_HAS_PIPELINING
    p->pipeline = PQenterPipelineMode(p->conn) == 1;
#endif
    p->state = SIMBA__PG_READY;
    p->backoff = 0;
    p->err[0] = 0;
    simba_log(p->loop, SIMBA_LOG_INFO, "postgres: connected, listening on %s%s", p->chan, p->pipeline ? " (pipeline mode)" : "");
    /* pushes may have been missed while we were away */
    if (p->was_up) simba_backend_event(p->be, SIMBA_EV_RESET, NULL, NULL, NULL);
    p->was_up = 1;
    simba__pg_send_next(p, now);
}

/* >>push  The offset bound (see simba__pg.off): the tightest one wins; an older one is worth
   less by the clocks' possible drift since (1 ms a second, twice what NTP may slew). */
static void simba__pg_clock(simba__pg *p, int64_t sent_at, int64_t server_ms, int64_t now) {
    int64_t c = sent_at - server_ms - 1;
    if (p->off_at == INT64_MIN || c >= p->off - (now - p->off_at) / 1000 - 1) {
        p->off = c;
        p->off_at = now;
    }
}

/* Forgets a kept grant of (mutex, contender): a request of theirs was answered or submitted
   after it, and that answer is what the core goes by. */
static void simba__pg_grant_drop(simba__pg *p, const char *mutex, const char *id) {
    int i;
    for (i = 0; i < SIMBA__PG_GRANTS; i++)
        if (p->grants[i].used && strcmp(p->grants[i].mutex, mutex) == 0 && strcmp(p->grants[i].id, id) == 0) p->grants[i].used = 0;
}

static void simba__pg_grants_clear(simba__pg *p) {
    int i;
    for (i = 0; i < SIMBA__PG_GRANTS; i++) p->grants[i].used = 0;
    p->off_at = INT64_MIN;
}

static int simba__pg_pending(const simba_req *l, const char *mutex, const char *id) {
    for (; l; l = l->next_)
        if (strcmp(l->mutex, mutex) == 0 && strcmp(l->contender, id) == 0) return 1;
    return 0;
}

/* A grant pushed to one of our contenders. It is kept for the ask that the
   SIMBA_EV_RELEASED raised with it makes the core send (simba__pg_submit answers that ask
   from it), and only when it can be placed on the loop clock and nothing of that contender
   for that mutex is queued or in flight: such a request runs after the grant on the server
   and its answer says the same, so the push stays a hint. Where the grant is not kept, the
   ask goes to the server, which finds its contender owner and starts a new tenure. */
static void simba__pg_grant_push(simba__pg *p, const simba__pg_grant *in, int64_t now) {
    int i, slot = -1;
    int64_t start;
    if (p->off_at == INT64_MIN || p->state != SIMBA__PG_READY) return;
    if (simba__pg_pending(p->head, in->mutex, in->id) || simba__pg_pending(p->fhead, in->mutex, in->id)) return;
    simba__pg_grant_drop(p, in->mutex, in->id);
    for (i = 0; i < SIMBA__PG_GRANTS && slot < 0; i++)
        if (!p->grants[i].used) slot = i;
    if (slot < 0) return;
    /* The grant happened on the server at in->start (its ms, truncated); on the loop clock
       that is no earlier than in->start + off, less the drift since off was taken. Never
       later than now: it has happened. */
    start = simba__add(in->start, simba__add(p->off, -((now - p->off_at) / 1000 + 1)));
    p->grants[slot] = *in;
    p->grants[slot].start = simba__min(start, now);
    p->grants[slot].used = 1;
}

/* An ask of a contender whose grant was pushed (simba__pg_grant_push): answered from it,
   with the lease counted from the grant's start, as if the ask had been sent then. 1 when
   answered. A renewal, a release or a read go to the server. */
static int simba__pg_grant_take(simba__pg *p, simba_req *req) {
    int i;
    for (i = 0; i < SIMBA__PG_GRANTS; i++) {
        simba__pg_grant *g = &p->grants[i];
        simba_reply rep;
        int64_t end;
        if (!g->used || strcmp(g->mutex, req->mutex) != 0 || strcmp(g->id, req->contender) != 0) continue;
        g->used = 0;
        end = simba__add(g->start, g->ttl);
        if (req->op != SIMBA_OP_ACQUIRE || req->renew || p->state != SIMBA__PG_READY || req->ttl_ms != g->ttl ||
            req->transition_ms != g->tr || end <= req->sent_at)
            return 0;
        memset(&rep, 0, sizeof rep);
        rep.rc = SIMBA_OK;
        simba__copy(p->owner_buf, sizeof p->owner_buf, g->id);
        rep.owner = p->owner_buf;
        rep.ttl_left_ms = end - req->sent_at;
        rep.transition_left_ms = simba__add(end, g->tr) - req->sent_at;
        rep.held_ms = simba__max(0, req->sent_at - g->start);
        rep.fence = g->fence;
        /* the value the server granted with is the one this ask carries: the waiter's place
           holds the value of its last ask, and a contender's value changes only as owner */
        rep.value = req->value;
        rep.value_len = req->value ? req->value_len : 0;
        p->pushed++;
        simba_req_done(req, &rep);
        return 1;
    }
    return 0;
}

/* >>inspect  An inspection's rows into views for the core (into p->rep: its answer). */
static int simba__pg_view_row(PGresult *res, int row, simba_view *v, unsigned char *val_buf, char *err, size_t errcap) {
    int64_t n[6];
    int i;
    const char *name = PQgetvalue(res, row, 0), *owner = PQgetvalue(res, row, 1);
    memset(v, 0, sizeof *v);
    for (i = 0; i < 5; i++)
        if (simba__pg_int(PQgetvalue(res, row, i + 2), &n[i]) != 0) return -1;
    if (strlen(name) > SIMBA_NAME_MAX || strlen(owner) > SIMBA_ID_MAX) return -1;
    simba__copy(v->mutex, sizeof v->mutex, name);
    v->fence = (uint64_t)n[0];
    v->acquired_unix_ms = v->held_ms = v->ttl_left_ms = v->transition_left_ms = v->lease_ms = SIMBA_UNKNOWN_MS;
    v->waiters = -1;
    if (owner[0] && n[4] >= 0) { /* a lease fully over is nobody's */
        simba__copy(v->owner, sizeof v->owner, owner);
        v->acquired_unix_ms = n[1];
        v->held_ms = n[2];
        v->ttl_left_ms = n[3];
        v->transition_left_ms = n[4];
        if (simba__pg_unhex(PQgetisnull(res, row, 7) ? NULL : PQgetvalue(res, row, 7), val_buf, &v->value_len, err, errcap) != 0)
            return -2;
        v->value = v->value_len > 0 ? val_buf : NULL;
    }
    if (PQnfields(res) >= 10) { /* one mutex: its line */
        const char *w = PQgetvalue(res, row, 9);
        int k = 0;
        if (simba__pg_int(PQgetvalue(res, row, 8), &n[5]) != 0) return -1;
        v->waiters = (int)n[5];
        while (*w && k < SIMBA_VIEW_WAITERS) {
            size_t len = strcspn(w, " ");
            if (len > SIMBA_ID_MAX) return -1;
            memcpy(v->waiter[k], w, len);
            v->waiter[k++][len] = 0;
            w += len + (w[len] == ' ');
        }
    }
    return 0;
}

/* One holding of the set from *w ("id fence shared acquired held ttl tr x<value in hex>",
   then a space or the end) into h, its value into vals; *w moves past it. -1: unreadable,
   -2: a bad value (err says). */
static int simba__pg_view_holding(const char **w, simba_view_holder *h, unsigned char *vals, char *err, size_t errcap) {
    const char *c = *w;
    int64_t f[6];
    size_t len = strcspn(c, " ");
    char num[24];
    int i;
    memset(h, 0, sizeof *h);
    if (len == 0 || len > SIMBA_ID_MAX) return -1;
    memcpy(h->id, c, len);
    h->id[len] = 0;
    c += len;
    for (i = 0; i < 6; i++) {
        if (*c != ' ') return -1;
        c++;
        len = strcspn(c, " ");
        if (len == 0 || len >= sizeof num) return -1;
        memcpy(num, c, len);
        num[len] = 0;
        if (simba__pg_int(num, &f[i]) != 0) return -1;
        c += len;
    }
    if (c[0] != ' ' || c[1] != 'x') return -1;
    c += 2;
    len = strcspn(c, " ");
    if (simba__pg_unhex_n(c, len, vals, &h->value_len, err, errcap) != 0) return -2;
    h->value = h->value_len > 0 ? vals : NULL;
    c += len;
    *w = c + (*c == ' ');
    h->fence = (uint64_t)f[0];
    h->shared = f[1] != 0;
    h->acquired_unix_ms = f[2];
    h->held_ms = f[3];
    h->ttl_left_ms = f[4];
    h->transition_left_ms = f[5];
    return 0;
}

/* One mutex's holders of the set (column 11: SIMBA__PG_HOLDING each, oldest grant first)
   and its permits (column 12) into v, after the owner row's holder; *out (allocated here
   with their values after them, NULL: none) keeps them until the caller frees it. -1:
   unreadable, -2: a bad value (p->err), -3: out of memory. With no live owner the view
   shows the holding that frees first. */
static int simba__pg_view_holders(simba__pg *p, PGresult *res, int row, simba_view *v, simba_view_holder **out) {
    const char *w = PQgetvalue(res, row, 10);
    int n = 0, cap = v->owner[0] ? 1 : 0, i, bad;
    size_t used = 0, wl = strlen(w);
    int64_t permits;
    simba_view_holder *hs;
    unsigned char *vals;
    *out = NULL;
    for (i = 0; w[i]; i++) cap += w[i] == ' ';
    cap = cap / 7 + 2;
    if (simba__pg_int(PQgetvalue(res, row, 11), &permits) != 0) return -1;
    if (!(hs = (simba_view_holder *)simba_alloc(p->loop, (size_t)cap * sizeof *hs + wl / 2 + 1))) return -3;
    vals = (unsigned char *)(hs + cap); /* every value's bytes: at most half the text's */
    if (v->owner[0]) simba__view_owner_holder(v, &hs[n++]); /* a mutex's owner or a writer */
    while (*w && n < cap) {
        if ((bad = simba__pg_view_holding(&w, &hs[n], vals + used, p->err, sizeof p->err)) != 0) goto bad;
        used += hs[n].value_len;
        n++;
    }
    simba__view_holders(v, hs, n, (int)permits);
    *out = hs;
    return 0;
bad:
    simba_free(p->loop, hs);
    return bad;
}

static void simba__pg_view_result(simba__pg *p, simba_req *r, PGresult *res) {
    int i, rows = PQntuples(res);
    p->rep_server_ms = 0;
    simba__reply_none(&p->rep);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        simba__reply_fail(&p->rep, simba__pg_res_err(p, "inspection failed", res, (int)r->op), p->err);
        return;
    }
    if (r->op == SIMBA_OP_FORCE_RELEASE) {
        p->rep.rc = rows == 1 && strcmp(PQgetvalue(res, 0, 0), "1") == 0 ? SIMBA_OK : SIMBA_EFENCE;
        return;
    }
    for (i = 0; i < rows; i++) {
        simba_view v;
        simba_view_holder *hs = NULL;
        int bad = PQnfields(res) < 8 ? -1 : simba__pg_view_row(res, i, &v, p->view_val, p->err, sizeof p->err);
        if (bad == 0 && PQnfields(res) >= 12) bad = simba__pg_view_holders(p, res, i, &v, &hs);
        if (bad == -3) {
            snprintf(p->err, sizeof p->err, "postgres: out of memory listing holders");
            simba__reply_fail(&p->rep, SIMBA_ENOMEM, p->err);
            return;
        }
        if (bad != 0) {
            if (bad == -1) snprintf(p->err, sizeof p->err, "postgres: unreadable row %d of an inspection", i);
            simba__reply_fail(&p->rep, SIMBA_EBACKEND, p->err);
            return;
        }
        simba_req_view(r, &v);
        simba_free(p->loop, hs);
    }
}

static int simba__pg_inspection(simba_op op) {
    return op == SIMBA_OP_INSPECT || op == SIMBA_OP_LIST || op == SIMBA_OP_FORCE_RELEASE;
}

/* A SET_VALUE or YIELD whose fence no longer holds: SIMBA_EFENCE, saying who holds the mutex
   now (the answer's owner fields, which go no further). */
static void simba__pg_not_held(simba__pg *p, const simba_req *r) {
    if (p->rep.owner && p->rep.owner[0])
        snprintf(p->err, sizeof p->err, "postgres %s: %.128s no longer holds mutex %.128s with fence %llu: %.128s holds it "
                 "with fence %llu", r->op == SIMBA_OP_YIELD ? "yield" : "set_value", r->contender, r->mutex,
                 (unsigned long long)r->fence, p->rep.owner, (unsigned long long)p->rep.fence);
    else
        snprintf(p->err, sizeof p->err, "postgres %s: %.128s no longer holds mutex %.128s with fence %llu: nobody holds it",
                 r->op == SIMBA_OP_YIELD ? "yield" : "set_value", r->contender, r->mutex, (unsigned long long)r->fence);
    simba__reply_fail(&p->rep, SIMBA_EFENCE, p->err);
}

/* A batch is over (its sync came back: committed, or rolled back if a statement failed):
   its requests are answered in order. Nothing is answered before the commit, since a grant
   that is rolled back with its batch must never reach the core. */
static void simba__pg_batch_done(simba__pg *p, int64_t now) {
    int i, k = p->ngot;
    for (i = 0; i < k && p->fhead; i++) {
        simba_req *r = p->fhead;
        p->fhead = r->next_;
        if (!p->fhead) p->ftail = NULL;
        p->nfl--;
        if (p->batch_err) {
            p->rep_server_ms = 0;
            simba__reply_fail(&p->rep, (simba_result)p->batch_err, p->err);
        } else if (r->op == SIMBA_OP_CALL) {
            p->rep_server_ms = 0; /* an announcement: nothing to read */
        } else if (simba__pg_inspection(r->op)) {
            simba__pg_view_result(p, r, p->res[i]);
        } else {
            simba__pg_result(p, p->res[i]);
            if (p->rep.rc == SIMBA_EFENCE) simba__pg_not_held(p, r);
        }
        PQclear(p->res[i]);
        p->res[i] = NULL;
        if (p->rep_server_ms > 0) simba__pg_clock(p, r->sent_at, p->rep_server_ms, now);
        simba__pg_grant_drop(p, r->mutex, r->contender); /* this answer is newer than a push */
        simba_req_done(r, &p->rep);
    }
    p->ngot = 0;
    p->batch_err = 0;
    if (!p->pipeline) simba__pg_send_next(p, now);
}

/* READY: per statement its result, then NULL; in pipeline mode each batch ends with its
   sync. Any answer shows the server alive: the deadline restarts for what is still out. */
static void simba__pg_results(simba__pg *p, int64_t now) {
    int nulls = 0, batches = 0;
    p->more = 0;
    while (p->conn && p->state == SIMBA__PG_READY && (p->await_null || p->ngot < p->nfl || p->nsync > 0) &&
           !PQisBusy(p->conn)) {
        PGresult *res = PQgetResult(p->conn);
        ExecStatusType st;
        if (!res) {
            if (p->await_null) {
                p->await_null = 0;
                if (!p->pipeline) simba__pg_batch_done(p, now); /* a batch of one */
            } else if (++nulls > 1) break;
            continue;
        }
        nulls = 0;
        st = PQresultStatus(res);
        p->stmt_deadline = simba__add(now, p->stmt_to);
        if (SIMBA__PG_SYNC(st)) {
            PQclear(res);
            if (p->nsync > 0) p->nsync--;
            simba__pg_batch_done(p, now);
            /* one poll answers two batches at most: the rest waits for the next call */
            if (++batches == 2) { p->more = (p->nsync > 0 || p->nfl > 0) && !PQisBusy(p->conn); break; }
            continue;
        }
        if (st != PGRES_TUPLES_OK && !p->batch_err) {
            /* the first failure of the batch says why; the others were aborted with it */
            p->batch_err = simba__pg_res_err(p, "statement failed", res, simba__pg_nth_op(p, p->ngot));
        }
        if (p->await_null || p->ngot >= p->nfl) { /* an error at commit, not a statement's */
            PQclear(res);
            continue;
        }
        p->res[p->ngot++] = res;
        p->await_null = 1;
    }
}

static void simba__pg_follow_recv(simba__pg *p, const char *s);
static void simba__pg_notifies(simba__pg *p, int64_t now) {
    PGnotify *n;
    while ((n = PQnotifies(p->conn)) != NULL) {
        simba__pg_grant g;
        int kind = strcmp(n->relname, p->follow) == 0 ? 0 : simba__pg_parse_push(n->extra, &g);
        if (strcmp(n->relname, p->follow) == 0) simba__pg_follow_recv(p, n->extra);
        if (kind == 2) simba__pg_grant_push(p, &g, now);
        if (kind != 0) {
            p->send_at = 0; /* a waiter's ask held for company goes now: it is a handoff */
            simba_backend_event(p->be, SIMBA_EV_RELEASED, g.mutex, g.id, NULL);
        }
        PQfreemem(n);
    }
}

/* >>follow Every follower learns each owner. Each connection LISTENs on the table's follow
   channel ("simba_f_" and a hash of schema and table, so every process finds it alone); a
   contender of this process granted a mutex or changing its value sends the record there
   (simba__pg_announce, one statement of its own in the queue): 'O <fence> <ttl>
   <transition> <held> <holders> <contender> <mutex> x<hex value>'. Every other process
   raises SIMBA_EV_OWNER for a mutex it follows (the core drops the others): no read. */
static char *simba__pg_follow_chan(char *out, size_t cap, const char *schema, const char *table) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    const char *s;
    for (s = schema ? schema : ""; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h = (h ^ '.') * 1099511628211ull;
    for (s = table; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    snprintf(out, cap, "simba_f_%016llx", (unsigned long long)h);
    return out;
}

static void simba__pg_announce(void *impl, const char *mutex, const simba_reply *o) {
    simba__pg *p = (simba__pg *)impl;
    simba__pg_note *nt = NULL;
    char hex[2 * SIMBA_VALUE_MAX + 1];
    int i;
    if (p->state != SIMBA__PG_READY) return; /* a hint: a reconnect's reset makes everyone ask */
    for (i = 0; i < SIMBA__PG_NOTES && !nt; i++) {
        if (!p->notes[i]) p->notes[i] = (simba__pg_note *)simba_alloc(p->loop, sizeof *p->notes[i]);
        else if (!p->notes[i]->req.done_) continue;
        nt = p->notes[i];
    }
    if (!nt) return; /* every slot still in flight: dropped, timers remain */
    memset(&nt->req, 0, sizeof nt->req);
    simba__copy(nt->mutex, sizeof nt->mutex, mutex);
    snprintf(nt->text, sizeof nt->text, "O %llu %lld %lld %lld %d %s %s x%s", (unsigned long long)o->fence,
             (long long)o->ttl_left_ms, (long long)o->transition_left_ms, (long long)o->held_ms, o->holders, o->owner, mutex,
             simba__pg_hex(hex, o->value, o->value ? o->value_len : 0));
    nt->req.op = SIMBA_OP_CALL;
    nt->req.mutex = nt->mutex;
    nt->req.contender = "";
    nt->req.sent_at = simba_now(p->loop);
    nt->req.next_ = NULL;
    if (p->tail) p->tail->next_ = &nt->req; else p->head = &nt->req;
    p->tail = &nt->req;
    p->send_at = 0;
    if (!simba__in_poll(p->loop)) simba__pg_send_next(p, simba_now(p->loop));
}

/* An announcement on the follow channel: checked, then SIMBA_EV_OWNER (a hint). */
static void simba__pg_follow_recv(simba__pg *p, const char *s) {
    char f[8][SIMBA_NAME_MAX + 1], err[96];
    unsigned char val[SIMBA_VALUE_MAX];
    int64_t v[5];
    size_t i, n;
    simba_reply rep;
    if (s[0] != 'O' || s[1] != ' ') return;
    s += 2;
    for (i = 0; i < 7; i++) {
        const char *sp = strchr(s, ' ');
        if (!sp || (size_t)(sp - s) > SIMBA_NAME_MAX || sp == s) return;
        memcpy(f[i], s, (size_t)(sp - s));
        f[i][sp - s] = 0;
        s = sp + 1;
    }
    for (i = 0; i < 5; i++)
        if (simba__pg_int(f[i], &v[i]) != 0) return;
    if (s[0] != 'x' || v[0] <= 0 || simba_id_check(f[5]) != SIMBA_OK || simba_name_check(f[6]) != SIMBA_OK) return;
    if (simba__pg_unhex(s + 1, val, &n, err, sizeof err) != 0) return; /* strict: two hex digits a byte */
    memset(&rep, 0, sizeof rep);
    rep.owner = f[5];
    rep.fence = (uint64_t)v[0];
    rep.ttl_left_ms = v[1];
    rep.transition_left_ms = v[2];
    rep.held_ms = v[3];
    rep.holders = v[4] > 0 && v[4] <= SIMBA_PERMITS_MAX ? (int)v[4] : 1;
    rep.value = n ? val : NULL;
    rep.value_len = n;
    simba_backend_event(p->be, SIMBA_EV_OWNER, f[6], NULL, &rep);
}

/* >>stall A statement not answered within statement_timeout_ms on a pipelined connection:
   its requests, and the queued ones, fail now (SIMBA_ETIMEDOUT; the core backs off), but the
   connection stays, for up to stall_timeout_ms, reading and discarding the late answers of
   those batches. A server that was stopped or overloaded then resumes on it without a new
   login (a SCRAM login costs 5-12 ms of one poll) and without the reconnect backoff; a dead
   one is recycled at the end, as before. Every answer is a whole batch's (one sync, one
   transaction): nothing of a failed request can be answered to the core later. New
   requests fail at once while stalled, as while down. */
static void simba__pg_stall(simba__pg *p, int64_t now) {
    int syncs = p->nsync;
    snprintf(p->err, sizeof p->err, "postgres: statement not answered within %lld ms; waiting %lld ms more for the server on this connection",
             (long long)p->stmt_to, (long long)p->stall_to);
    simba__copy(p->be->errmsg, sizeof p->be->errmsg, p->err);
    simba_log(p->loop, SIMBA_LOG_WARN, "%s", p->err);
    p->state = SIMBA__PG_STALLED;
    simba__pg_grants_clear(p);
    p->stall_deadline = simba__add(now, p->stall_to);
    p->send_at = INT64_MAX;
    p->more = 0;
    simba__pg_fail_all(p, SIMBA_ETIMEDOUT, p->err); /* clears nfl, nsync and held results */
    p->stall_syncs = syncs;
    simba_backend_event(p->be, SIMBA_EV_DISCONNECTED, NULL, NULL, NULL);
}

/* STALLED: discards late results; once every failed batch's sync is back, READY again. */
static void simba__pg_discard(simba__pg *p, int64_t now) {
    int nulls = 0;
    while (p->conn && p->stall_syncs > 0 && !PQisBusy(p->conn)) {
        PGresult *res = PQgetResult(p->conn);
        if (!res) {
            if (++nulls > 1) break;
            continue;
        }
        nulls = 0;
        if (SIMBA__PG_SYNC(PQresultStatus(res))) p->stall_syncs--;
        PQclear(res);
    }
    if (p->conn && p->stall_syncs == 0) {
        p->state = SIMBA__PG_READY;
        p->backoff = 0;
        p->err[0] = 0;
        simba_log(p->loop, SIMBA_LOG_INFO, "postgres: the server answered again on the same connection");
        simba_backend_event(p->be, SIMBA_EV_RESET, NULL, NULL, NULL); /* pushes may have been missed */
        simba__pg_send_next(p, now);
    }
}

/* Reads the socket when poll said so (read_socket), then handles whatever libpq holds:
   a flush may have read answers into its buffer without the socket staying readable. */
static void simba__pg_read(simba__pg *p, int64_t now, int read_socket) {
    if (read_socket && !PQconsumeInput(p->conn)) {
        simba__pg_set_err(p, "connection lost", PQerrorMessage(p->conn));
        simba__pg_drop(p, now, SIMBA_ECONN);
        return;
    }
    simba__pg_notifies(p, now);
    while (p->state == SIMBA__PG_SETUP && p->busy && p->conn && !PQisBusy(p->conn)) {
        PGresult *res = PQgetResult(p->conn);
        if (!res) { simba__pg_setup_done(p, now); break; }
        simba__pg_result(p, res);
        PQclear(res);
    }
    if (p->state == SIMBA__PG_STALLED) simba__pg_discard(p, now);
    else simba__pg_results(p, now);
    if (p->conn && PQstatus(p->conn) == CONNECTION_BAD) {
        simba__pg_set_err(p, "connection lost", PQerrorMessage(p->conn));
        simba__pg_drop(p, now, SIMBA_ECONN);
    }
}

/* Readiness of our descriptor: from the loop's poll when it covered it, else a zero-timeout
   poll of our own (tick mode, or the descriptor changed since simba_fds). */
static short simba__pg_ready(const simba__pg *p, const struct pollfd *ready, int n, short events) {
    struct pollfd pf;
    int i;
    if (p->fd < 0) return 0;
    for (i = 0; ready && i < n; i++)
        if (ready[i].fd == p->fd && (ready[i].events & events) == events) return (short)(ready[i].revents & (events | POLLHUP | POLLERR));
    pf.fd = p->fd;
    pf.events = events;
    pf.revents = 0;
    if (poll(&pf, 1, 0) <= 0) return 0;
    return pf.revents;
}

/* >>process */
static void simba__pg_process(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    simba__pg *p = (simba__pg *)impl;
    short rv;
    (void)flags; /* ready is NULL without SIMBA_PROCESS_IO: simba__pg_ready polls itself */
    if (p->state == SIMBA__PG_DOWN && now >= p->retry_at) simba__pg_start(p, now);
    if (p->state == SIMBA__PG_CONNECTING) {
        rv = simba__pg_ready(p, ready, n, p->want_write ? POLLOUT : POLLIN);
        if (rv) {
            PostgresPollingStatusType st = PQconnectPoll(p->conn);
            p->fd = PQsocket(p->conn); /* may change: libpq tries addresses in turn */
            if (st == PGRES_POLLING_OK) simba__pg_connected(p, now);
            else if (st == PGRES_POLLING_FAILED) simba__pg_drop(p, now, simba__pg_conn_err(p)); else p->want_write = st == PGRES_POLLING_WRITING;
        }
        if (p->state == SIMBA__PG_CONNECTING && now >= p->conn_deadline) {
            snprintf(p->err, sizeof p->err, "postgres: connect not done within %lld ms", (long long)p->conn_to);
            simba__copy(p->be->errmsg, sizeof p->be->errmsg, p->err);
            simba__pg_drop(p, now, SIMBA_ECONN);
        }
        return;
    }
    if (p->state != SIMBA__PG_SETUP && p->state != SIMBA__PG_READY && p->state != SIMBA__PG_STALLED) return;
    rv = simba__pg_ready(p, ready, n, (short)(POLLIN | (p->want_write ? POLLOUT : 0)));
    if (rv & POLLOUT) simba__pg_flush(p, now);
    if (p->conn) simba__pg_read(p, now, (rv & (POLLIN | POLLHUP | POLLERR)) != 0);
    /* a late poll runs due timers after this call (and past its budget, in the next poll):
       what waits for company waits for them */
    if (p->conn && p->head && now >= p->send_at && !simba__timer_due(p->loop, now))
        simba__pg_send_next(p, now);
    if (p->conn && p->state == SIMBA__PG_STALLED && now >= p->stall_deadline) {
        snprintf(p->err, sizeof p->err, "postgres: no answer within %lld ms more, connection recycled", (long long)p->stall_to);
        simba__copy(p->be->errmsg, sizeof p->be->errmsg, p->err);
        simba__pg_drop(p, now, SIMBA_ECONN);
    } else if (p->conn && p->state == SIMBA__PG_READY && p->pipeline && p->nsync > 0 && now >= p->stmt_deadline) {
        simba__pg_stall(p, now);
    } else if (p->conn && (p->busy || p->nfl > 0 || p->nsync > 0) && now >= p->stmt_deadline) {
        /* no answer in time, not pipelined: later answers could not be told apart, so the
           connection goes */
        snprintf(p->err, sizeof p->err, "postgres: %s not answered within %lld ms, connection recycled",
                 p->state == SIMBA__PG_SETUP ? "setup" : "statement",
                 (long long)(p->state == SIMBA__PG_SETUP ? p->conn_to : p->stmt_to));
        simba__copy(p->be->errmsg, sizeof p->be->errmsg, p->err);
        simba__pg_drop(p, now, p->state == SIMBA__PG_SETUP ? SIMBA_ECONN : SIMBA_ETIMEDOUT);
    }
}

static int simba__pg_fds(void *impl, struct pollfd *out, int cap) {
    simba__pg *p = (simba__pg *)impl;
    if (!p->conn || p->fd < 0 || p->state == SIMBA__PG_DOWN) return 0;
    if (cap >= 1) {
        out[0].fd = p->fd;
        out[0].events = p->state == SIMBA__PG_CONNECTING ? (p->want_write ? POLLOUT : POLLIN)
                                                          : (short)(POLLIN | (p->want_write ? POLLOUT : 0));
        out[0].revents = 0;
    }
    return 1;
}

static int64_t simba__pg_deadline(void *impl) {
    simba__pg *p = (simba__pg *)impl;
    if (p->state == SIMBA__PG_DOWN) return p->retry_at;
    if (p->state == SIMBA__PG_CONNECTING) return p->conn_deadline;
    if (p->state == SIMBA__PG_READY && p->more) return 0;
    if (p->state == SIMBA__PG_STALLED) return p->stall_deadline;
    return simba__min(p->busy || p->nfl > 0 || p->nsync > 0 ? p->stmt_deadline : INT64_MAX,
                      p->state == SIMBA__PG_READY && p->head ? p->send_at : INT64_MAX);
}

static simba_result simba__pg_submit(void *impl, simba_req *req) {
    simba__pg *p = (simba__pg *)impl;
    int64_t hold;
    if (req->op < SIMBA_OP_ACQUIRE || req->op > SIMBA_OP_YIELD || req->value_len > SIMBA_VALUE_MAX) return SIMBA_EINVAL;
    if (p->state == SIMBA__PG_DOWN || p->state == SIMBA__PG_STALLED) {
        simba_req_fail(req, p->state == SIMBA__PG_DOWN ? p->down_rc : SIMBA_ECONN, p->err[0] ? p->err : "postgres: not connected");
        return SIMBA_OK;
    }
    if (simba__pg_grant_take(p, req)) return SIMBA_OK;
    req->next_ = NULL;
    if (p->tail) p->tail->next_ = req; else p->head = req;
    p->tail = req;
    /* a renewal or a waiter's timer ask may wait for company; anything else (a first ask,
       whose arrival decides its place in the line, a pushed waiter's ask, a release) goes now
       and takes them along */
    hold = simba__pg_hold(req);
    p->send_at = hold > 0 ? simba__min(p->send_at, simba__add(simba_now(p->loop), hold)) : 0;
    if (simba_now(p->loop) >= p->send_at) simba__pg_send_next(p, simba_now(p->loop));
    return SIMBA_OK;
}

/* >>close */
static void simba__pg_destroy(void *impl) {
    simba__pg *p = (simba__pg *)impl;
    int i;
    if (p->be) simba__pg_fail_all(p, SIMBA_ECLOSED, "postgres: backend closed");
    if (p->conn && PQsocket(p->conn) >= 0) simba_backend_fd(p->be, PQsocket(p->conn), 0);
    if (p->conn) PQfinish(p->conn);
    for (i = 0; i < 16; i++) simba_free(p->loop, p->strs[i]);
    for (i = 0; i < SIMBA__PG_NOTES; i++) simba_free(p->loop, p->notes[i]);
    simba_free(p->loop, p->res);
    simba_free(p->loop, p->check);
    simba_free(p->loop, p->setup);
    simba_free(p->loop, p->session);
    simba_free(p->loop, p);
}

/* The core waits on a held request (a stop behind a renewal): what waits for company goes
   out at the next poll, which the deadline now asks for at once. */
static void simba__pg_hurry(void *impl, simba_req *req) {
    simba__pg *p = (simba__pg *)impl;
    (void)req;
    if (p->head) p->send_at = 0;
}

static const simba_backend_vt simba__pg_vt = {
    sizeof(simba_backend_vt),
    "postgres",
    simba__pg_submit,
    simba__pg_fds,
    simba__pg_process,
    simba__pg_deadline,
    NULL,
    NULL,
    simba__pg_destroy,
    SIMBA_LEASE_ASKED,
    simba__pg_hurry,
    simba__pg_submit, /* inspect: the same queue, each in a transaction of its own */
    simba__pg_announce,
};

/* >>open */

static int simba__pg_numeric(const char *a) {
    unsigned char b[16];
    return inet_pton(AF_INET, a, b) == 1 || inet_pton(AF_INET6, a, b) == 1;
}

/* The host libpq will use must not need a resolver: hostaddr numeric, or host a socket dir. */
static simba_result simba__pg_host_check(simba_loop *loop, const simba_pg_desc *d) {
    const char *host = NULL, *hostaddr = NULL;
    PQconninfoOption *opts = NULL, *o;
    if (d->conninfo) {
        char *err = NULL;
        opts = PQconninfoParse(d->conninfo, &err);
        if (!opts) {
            simba_result rc = simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: bad conninfo: %s", err ? err : "out of memory");
            if (err) PQfreemem(err);
            return rc;
        }
        for (o = opts; o->keyword; o++) {
            if (!o->val || !*o->val) continue;
            if (strcmp(o->keyword, "host") == 0) host = o->val;
            if (strcmp(o->keyword, "hostaddr") == 0) hostaddr = o->val;
        }
    }
    if (!host) host = getenv("PGHOST");
    if (!hostaddr) hostaddr = getenv("PGHOSTADDR");
    if (d->socket_dir) host = d->socket_dir;
    if (d->hostaddr) hostaddr = d->hostaddr;
    if (hostaddr && *hostaddr) {
        if (!simba__pg_numeric(hostaddr)) {
            simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: hostaddr \"%.64s\" must be one numeric IPv4/IPv6 address", hostaddr);
            PQconninfoFree(opts);
            return SIMBA_EINVAL;
        }
    } else if (host && *host && host[0] != '/' && host[0] != '@') {
        simba__fail(loop, SIMBA_EINVAL,
                    "simba_pg_open: host \"%.64s\" needs a resolver, which could block the loop: give a numeric hostaddr "
                    "or a unix socket directory", host);
        PQconninfoFree(opts);
        return SIMBA_EINVAL;
    }
    PQconninfoFree(opts);
    return SIMBA_OK;
}

static int simba__pg_kv(simba__pg *p, int *nk, int *ns, const char *k, const char *v) {
    size_t l;
    char *c;
    if (!v) return 1;
    l = strlen(v) + 1;
    c = (char *)simba_alloc(p->loop, l);
    if (!c) return 0;
    memcpy(c, v, l);
    p->strs[(*ns)++] = c;
    p->keys[*nk] = k;
    p->vals[(*nk)++] = c;
    return 1;
}

/* The connection's keywords and values (copies the backend owns); 0 when out of memory. */
static int simba__pg_conninfo(simba__pg *p, const simba_pg_desc *desc) {
    int nk = 0, ns = 0, ok;
    if (desc->port) snprintf(p->port_s, sizeof p->port_s, "%d", desc->port);
    p->expand = desc->conninfo != NULL;
    ok = simba__pg_kv(p, &nk, &ns, "dbname", desc->conninfo) && simba__pg_kv(p, &nk, &ns, "hostaddr", desc->hostaddr) &&
         simba__pg_kv(p, &nk, &ns, "host", desc->socket_dir) &&
         simba__pg_kv(p, &nk, &ns, "port", desc->port ? p->port_s : NULL) &&
         simba__pg_kv(p, &nk, &ns, "dbname", desc->dbname) && simba__pg_kv(p, &nk, &ns, "user", desc->user) &&
         simba__pg_kv(p, &nk, &ns, "password", desc->password) && simba__pg_kv(p, &nk, &ns, "options", p->opts) &&
         simba__pg_kv(p, &nk, &ns, "host", desc->tls_name) && simba__pg_kv(p, &nk, &ns, "sslmode", desc->sslmode) &&
         simba__pg_kv(p, &nk, &ns, "sslrootcert", desc->sslrootcert) &&
         simba__pg_kv(p, &nk, &ns, "sslcert", desc->sslcert) && simba__pg_kv(p, &nk, &ns, "sslkey", desc->sslkey) &&
         (p->keys[nk] = "application_name", p->vals[nk++] = "simba", 1);
    p->keys[nk] = NULL;
    p->vals[nk] = NULL;
    return ok;
}

/* The TLS fields: a known sslmode, no empty path, a name only beside a numeric hostaddr. */
static simba_result simba__pg_tls_check(simba_loop *loop, const simba_pg_desc *d) {
    static const char *const modes[] = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"};
    const char *const paths[3] = {d->sslrootcert, d->sslcert, d->sslkey};
    static const char *const fields[3] = {"sslrootcert", "sslcert", "sslkey"};
    size_t i;
    if (d->sslmode) {
        for (i = 0; i < sizeof modes / sizeof modes[0]; i++)
            if (strcmp(d->sslmode, modes[i]) == 0) break;
        if (i == sizeof modes / sizeof modes[0])
            return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: sslmode \"%.32s\" is not one of disable, allow, "
                               "prefer, require, verify-ca, verify-full", d->sslmode);
    }
    for (i = 0; i < 3; i++)
        if (paths[i] && !paths[i][0])
            return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: %s is empty: give a file, or NULL for libpq's default",
                               fields[i]);
    if (d->tls_name) {
        if (!d->tls_name[0] || strlen(d->tls_name) > 253 || strpbrk(d->tls_name, " \t\r\n,/"))
            return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: tls_name \"%.64s\" is not a host name (1..253 bytes, "
                               "no space, ',' or '/')", d->tls_name);
        if (!d->hostaddr || d->socket_dir)
            return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: tls_name needs hostaddr (the address it names; "
                               "the name is never resolved) and no socket_dir");
    }
    return SIMBA_OK;
}

/* Every field of the desc, with words for what is wrong. */
static simba_result simba__pg_desc_check(simba_loop *loop, const simba_pg_desc *desc) {
    simba_result rc;
    const char *table;
    table = desc->table ? desc->table : "simba_mutex";
    if (!simba__pg_name_ok(table))
        return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: table must be 1..%d printable ASCII bytes without '$'",
                           SIMBA__PG_TABLE_MAX);
    if (strcmp(table, "simba") == 0)
        return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: table \"simba\" would name its fence check "
                           "simba_check_fence, the default table's (see FENCED WRITES): choose another name");
    if (desc->schema && !simba__pg_name_ok(desc->schema))
        return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: schema must be 1..%d printable ASCII bytes without '$'",
                           SIMBA__PG_TABLE_MAX);
    if (desc->port < 0 || desc->port > 65535)
        return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: port must be in 0..65535 (got %d)", desc->port);
    if (desc->socket_dir && desc->socket_dir[0] != '/')
        return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: socket_dir must be an absolute path");
    if ((rc = simba__pg_tls_check(loop, desc)) != SIMBA_OK) return rc;
    if ((rc = simba__desc_ms(loop, "simba_pg_open", "connect_timeout_ms", desc->connect_timeout_ms)) != SIMBA_OK ||
        (rc = simba__desc_ms(loop, "simba_pg_open", "statement_timeout_ms", desc->statement_timeout_ms)) != SIMBA_OK ||
        (rc = simba__desc_reconnect(loop, "simba_pg_open", desc->reconnect_min_ms, desc->reconnect_max_ms)) != SIMBA_OK ||
        (rc = simba__desc_ms(loop, "simba_pg_open", "stall_timeout_ms", desc->stall_timeout_ms)) != SIMBA_OK ||
        (rc = simba__desc_ms(loop, "simba_pg_open", "max_lease_ms", desc->max_lease_ms)) != SIMBA_OK)
        return rc;
    return simba__pg_host_check(loop, desc);
}

/* The statements of SETUP with every name filled in (see >>sql for the letters); 0 when out
   of memory or a name does not fit. */
static int simba__pg_scripts(simba__pg *p, const simba_pg_desc *desc, const char *table) {
    /* letter, schema-qualified, suffix of the table's name */
    static const struct { char letter; char qualified; const char *suffix; } names[] = {
        {'T', 1, ""}, {'Q', 1, "_q"}, {'A', 1, "_acq"}, {'R', 1, "_rel"}, {'D', 1, "_read"}, {'I', 0, "_qi"},
        {'B', 1, "_boot"}, {'X', 1, "_lost"}, {'G', 0, "_lost"}, {'H', 0, "_lost_t"}, {'Y', 1, "_boot_kept"},
        {'K', 0, "_boot_kept"}, {'W', 1, "_up"}, {'V', 1, "_val"}, {'E', 1, "_yield"}, {'S', 1, "_hold"},
        {'P', 1, "_sacq"}, {'Z', 1, "_grant"}};
    char q[26][SIMBA__PG_QNAME_MAX], fname[SIMBA__PG_TABLE_MAX + 16], ml[24], version[48], schema_lit[SIMBA__PG_TABLE_MAX + 8];
    const char *subst[26];
    size_t i;
    memset((void *)subst, 0, sizeof subst);
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        int k = names[i].letter - 'A';
        if (!simba__pg_quote(q[k], sizeof q[k], names[i].qualified ? desc->schema : NULL, table, names[i].suffix)) return 0;
        subst[k] = q[k];
    }
    if (!simba__pg_quote(q['C' - 'A'], sizeof q[0], NULL, p->chan, "") ||
        !simba__pg_quote(q['F' - 'A'], sizeof q[0], desc->schema, simba__pg_fence_fn(table, fname, sizeof fname), ""))
        return 0;
    subst['C' - 'A'] = q['C' - 'A'], subst['F' - 'A'] = q['F' - 'A'];
    snprintf(ml, sizeof ml, "%lld", (long long)(desc->max_lease_ms ? desc->max_lease_ms : SIMBA_MAX_LEASE_DEFAULT_MS));
    snprintf(version, sizeof version, SIMBA__PG_VERSION_TAG "%d", SIMBA__PG_SCHEMA_VERSION);
    if (desc->schema) snprintf(schema_lit, sizeof schema_lit, "$n$%s$n$", desc->schema); /* it holds no '$' */
    else snprintf(schema_lit, sizeof schema_lit, "NULL");
    subst['L' - 'A'] = ml, subst['M' - 'A'] = version, subst['O' - 'A'] = schema_lit;
    subst['U' - 'A'] = fname, subst['N' - 'A'] = table; /* raw, inside $n$ quotes only: no '$' in them */
    subst['J' - 'A'] = simba__pg_follow_chan(p->follow, sizeof p->follow, desc->schema, table); /* >>follow */
    p->check = simba__pg_fill(p->loop, simba__pg_check_sql, subst);
    p->setup = simba__pg_fill(p->loop, simba__pg_setup_sql, subst);
    p->session = simba__pg_fill(p->loop, simba__pg_session_sql, subst);
    simba__copy(p->tname, sizeof p->tname, q['T' - 'A']);
    return p->check && p->setup && p->session;
}

SIMBA_API simba_result simba_pg_open(simba_loop *loop, const simba_pg_desc *desc, simba_backend **out) {
    simba__pg *p;
    simba_result rc;
    const char *table;
    char rnd[40];
    if (out) *out = NULL;
    if (!loop || !desc || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_pg_open: NULL argument");
    if ((rc = simba__pg_desc_check(loop, desc)) != SIMBA_OK) return rc;
    table = desc->table ? desc->table : "simba_mutex";
    if (simba_contender_id_random(loop, rnd, sizeof rnd) != SIMBA_OK) return simba__fail(loop, SIMBA_ESYS, "simba_pg_open: no random channel name");
    p = (simba__pg *)simba__zalloc(loop, sizeof *p);
    if (!p) return simba__fail(loop, SIMBA_ENOMEM, "simba_pg_open: out of memory");
    p->loop = loop;
    p->fd = -1;
    p->conn_to = desc->connect_timeout_ms ? desc->connect_timeout_ms : 2000;
    p->stmt_to = desc->statement_timeout_ms ? desc->statement_timeout_ms : 2000;
    p->stall_to = desc->stall_timeout_ms ? desc->stall_timeout_ms : 30000;
    p->rmin = desc->reconnect_min_ms ? desc->reconnect_min_ms : 100;
    p->rmax = desc->reconnect_max_ms ? desc->reconnect_max_ms : (p->rmin > 5000 ? p->rmin : 5000);
    p->backoff = 0;
    p->send_at = INT64_MAX;
    p->off_at = INT64_MIN;
    snprintf(p->chan, sizeof p->chan, "simba_%.32s", rnd);
    /* the server gives up on a statement when we do: its row locks are not held for nothing */
    snprintf(p->opts, sizeof p->opts, "-c statement_timeout=%lld", (long long)p->stmt_to);
    if (!simba__pg_conninfo(p, desc) || !simba__pg_scripts(p, desc, table)) {
        simba__pg_destroy(p);
        return simba__fail(loop, SIMBA_ENOMEM, "simba_pg_open: out of memory");
    }
    rc = simba_backend_new(loop, &simba__pg_vt, p, &p->be);
    if (rc != SIMBA_OK) {
        simba__pg_destroy(p);
        return rc;
    }
    /* checked above: cannot fail */
    (void)simba_backend_set_max_lease(p->be, desc->max_lease_ms ? desc->max_lease_ms : SIMBA_MAX_LEASE_DEFAULT_MS);
    simba__pg_start(p, simba_now(loop));
    *out = p->be;
    return SIMBA_OK;
}

/* >>fence  simba_pg_check_fence: the SQL function, called on the application's connection. */
static simba_result simba__pg_check_fence(PGconn *conn, const char *schema, const char *table, const char *name,
                                          uint64_t fence, char *err, size_t cap) {
    static const char fn[] = "simba_pg_check_fence";
    char fname[SIMBA__PG_TABLE_MAX + 16], qf[SIMBA__PG_QNAME_MAX], sql[SIMBA__PG_QNAME_MAX + 32], fs[24];
    const char *vals[2];
    const char *state;
    PGresult *res;
    simba_result rc;
    if (!conn) return simba__refuse(err, cap, SIMBA_EINVAL, "%s: conn is NULL", fn);
    if (!table) table = "simba_mutex";
    if (!simba__pg_name_ok(table) || strcmp(table, "simba") == 0)
        return simba__refuse(err, cap, SIMBA_EINVAL,
                             "%s: table \"%.80s\" is not a simba table name (1..%d printable ASCII bytes, no '$', not "
                             "\"simba\")", fn, table, SIMBA__PG_TABLE_MAX);
    if (schema && !simba__pg_name_ok(schema))
        return simba__refuse(err, cap, SIMBA_EINVAL,
                             "%s: schema \"%.80s\" is not a schema name (1..%d printable ASCII bytes, no '$')", fn, schema,
                             SIMBA__PG_TABLE_MAX);
    if ((rc = simba__fence_args(fn, name, fence, err, cap)) != SIMBA_OK) return rc;
    if (fence > (uint64_t)INT64_MAX)
        return simba__refuse(err, cap, SIMBA_EINVAL, "%s: fence %llu is beyond bigint: no grant hands it out", fn,
                             (unsigned long long)fence);
    if (PQstatus(conn) != CONNECTION_OK) return simba__refuse(err, cap, SIMBA_ESTATE, "%s: conn is not connected", fn);
    /* outside a transaction the row lock would end with the statement, before the write */
    switch (PQtransactionStatus(conn)) {
    case PQTRANS_INTRANS: break;
    case PQTRANS_INERROR:
        return simba__refuse(err, cap, SIMBA_ESTATE, "%s: the transaction has failed already: ROLLBACK, then BEGIN again", fn);
    default:
        return simba__refuse(err, cap, SIMBA_ESTATE,
                             "%s: conn is not inside a transaction: BEGIN first, then check, write and COMMIT", fn);
    }
    if (!simba__pg_quote(qf, sizeof qf, schema, simba__pg_fence_fn(table, fname, sizeof fname), ""))
        return simba__refuse(err, cap, SIMBA_EINVAL, "%s: table name too long", fn);
    snprintf(sql, sizeof sql, "SELECT %s($1, $2)", qf);
    snprintf(fs, sizeof fs, "%llu", (unsigned long long)fence);
    vals[0] = name;
    vals[1] = fs;
    res = PQexecParams(conn, sql, 2, NULL, vals, NULL, NULL, 0);
    if (res && PQresultStatus(res) == PGRES_TUPLES_OK) {
        PQclear(res);
        return SIMBA_OK;
    }
    state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (!state) state = "";
    if (strcmp(state, SIMBA__PG_FENCE_REFUSED) == 0 || strcmp(state, "22023") == 0) {
        const char *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        snprintf(err, cap, "%s", m ? m : "refused");
        rc = state[0] == 'S' ? SIMBA_EFENCE : SIMBA_EINVAL;
    } else if (strcmp(state, "42883") == 0 || strcmp(state, "3F000") == 0) { /* undefined function, schema */
        snprintf(err, cap, "%s: no fence check %.200s in this database: is \"%.48s\" a simba table there "
                 "(simba_pg_open creates the function with it)?", fn, qf, table);
        rc = SIMBA_EINVAL;
    } else {
        size_t n;
        snprintf(err, cap, "%s: %s", fn, res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
        n = strlen(err);
        while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' ')) err[--n] = 0;
        rc = SIMBA_EBACKEND;
    }
    PQclear(res);
    return rc;
}

SIMBA_API simba_result simba_pg_check_fence(struct pg_conn *conn, const char *schema, const char *table, const char *name,
                                            uint64_t fence, char *errbuf, size_t errbuf_cap) {
    char err[512];
    simba_result rc;
    err[0] = 0;
    rc = simba__pg_check_fence(conn, schema, table, name, fence, err, sizeof err);
    if (errbuf && errbuf_cap > 0) simba__copy(errbuf, errbuf_cap, rc == SIMBA_OK ? "" : err);
    return rc;
}

#endif /* SIMBA_PG_IMPLEMENTATION */

/* License: MIT, the full text at the end of simba.h (the headers ship together). */
