/*
 * simba_mysql.h v0.1.0 -- MySQL and MariaDB backend for simba (MariaDB Connector/C's
 * non-blocking API), stb-style single header.
 *
 * Do this:
 *     #define SIMBA_IMPLEMENTATION
 * before you include this file in *one* C or C++ file: that file then holds the core
 * (simba.h) and this backend. Link with -lmariadb (Connector/C >= 3.0); compile with the
 * include path of mysql.h (`pkg-config --cflags --libs libmariadb`).
 *
 *     simba_backend *be;
 *     simba_mysql_desc d = {0};
 *     d.host = "127.0.0.1"; d.port = 3306; d.user = "app"; d.password = "secret"; d.db = "app";
 *     simba_mysql_open(loop, &d, &be);     // never blocks: connecting happens in simba_poll
 *
 * COMPILE-TIME OPTIONS
 *   SIMBA_API, SIMBA_MALLOC / SIMBA_FREE   as in simba.h
 *   SIMBA_MYSQL_IMPLEMENTATION             this header and the core only
 *
 * CONNECTION (desc.connections per backend, default 1, and the doorbell's; never blocks the poll)
 *   MYSQL_OPT_NONBLOCK, then mysql_real_connect_start/_cont, mysql_real_query_start/_cont,
 *   mysql_store_result_start/_cont and mysql_next_result_start/_cont. After every step the
 *   socket is read again (mysql_get_socket) and goes to the loop through simba_fds() with
 *   the events the step waits for (MYSQL_WAIT_READ, _WRITE); MYSQL_WAIT_TIMEOUT becomes a
 *   deadline of the loop (mysql_get_timeout_value_ms). The server is named by a numeric
 *   address (IPv4/IPv6) or a unix socket path: a host name would need a blocking resolver
 *   inside mysql_real_connect_start. Connector/C's own reconnect is off: simba reconnects and
 *   sets the session up again itself. One command is outstanding at a time on a connection
 *   (the protocol has no pipelining); the others wait in its queue, in order.
 *   A statement not answered within statement_timeout_ms completes with SIMBA_ETIMEDOUT and
 *   the connection is closed and made anew (the server also gets max_statement_time so it
 *   gives up on its side); lost connections are re-made with randomised doubling backoff
 *   [reconnect_min_ms, reconnect_max_ms], and requests submitted between attempts fail at
 *   once with SIMBA_ECONN so that the core backs off. A refused login or a missing
 *   database or privilege (1044, 1045, 1049, 1142, 1143, 1227, 1370, 1698, 1862) is
 *   SIMBA_EDENIED, with the server's words: at once, and for every request until a
 *   connection is set up again.
 *   Deadlocks (1213) and lock-wait timeouts (1205) roll the procedure's transaction back:
 *   the same CALL is sent again, up to SIMBA__MY_RETRIES times.
 *
 *   Job states of the connection:
 *
 *        open ──► CONNECTING ──(connected)──► SETUP ──(script done)──► READY ◄──────┐
 *                  │ (failed / connect_timeout_ms)  │ (error)            │ send      │
 *                  ▼                               ▼                    ▼           │
 *                  DOWN ◄───────────────────────────────────────────── BUSY ─(row)─┘
 *            (backoff, then CONNECTING)   (lost / statement_timeout_ms)  │ 1213, 1205:
 *                                                                        └─ send again
 *   BUSY steps: QUERY ─► STORE ─(more results)─► NEXT ─► STORE ... ─(none)─► answered;
 *   each step returns to the loop whenever Connector/C waits for the socket or a timer.
 *
 *   SETUP runs once per connection, in one round trip (a multi-statement script): the
 *   session's time_zone '+00:00', READ COMMITTED (so gap locks never deadlock two first
 *   acquisitions), max_statement_time, then CALL <table>_version() (PRIVILEGES). Only when
 *   that routine is missing or finds an object missing, a second round trip, under GET_LOCK
 *   (two creators never race), checks the version row and creates what is missing.
 *   After a reconnect (not the first connect) SIMBA_EV_RESET is raised for every mutex; a
 *   lost connection raises SIMBA_EV_DISCONNECTED. Grants are the requested ttl
 *   (SIMBA_LEASE_ASKED).
 *
 * POOL
 *   Each request waits for the server's answer, and a write's answer waits for its commit's
 *   log flush: one connection carries one request per round trip and flush, the server's
 *   CPU mostly idle (bench/README.md, W4). desc.connections request
 *   connections carry that many at once, and the server flushes their commits together.
 *   Every request on one name goes on the connection its name hashes to (FNV-1a), in
 *   order, so each name sees exactly what one connection would give it; a list goes on the
 *   first. Each connection has its own session, setup, state and backoff; a request whose
 *   connection is down fails at once (SIMBA_ECONN) while the others go on. A lost one raises
 *   SIMBA_EV_DISCONNECTED (and its reconnect SIMBA_EV_RESET) for every mutex of the backend,
 *   as the loss of the server would: the events name no connection. Renewals go before the
 *   other requests queued on their connection, so an owner's lease never waits behind a
 *   burst of first asks; nothing of one contender is reordered (it has one request at a
 *   time, and a release sent behind its renewal stays behind it). The first one's
 *   session holds the doorbell's lock (PUSH). A process that follows thousands of names
 *   needs several (bench/README.md, W4); one is enough for a few hundred.
 *
 * TLS (ssl_mode, ssl_ca, ssl_cert, ssl_key; both connections)
 *   "required" refuses a server without TLS; "verify_ca" also checks the chain against
 *   ssl_ca; "verify_identity" also that the certificate names host (an IP address in its
 *   subjectAltName: the host is numeric). A failed check is SIMBA_ECONN with Connector/C's
 *   words, retried with the backoff like any failed connect.
 *   THE ONE BLOCKING STEP: Connector/C runs the TLS handshake inside
 *   mysql_real_connect_cont with its own poll(2), so one simba_poll can wait there: on a
 *   healthy server for the handshake's round trips (about a millisecond on a LAN), on a
 *   server that stops answering mid-handshake for at most connect_timeout_ms rounded up to
 *   whole seconds (Connector/C's unit; 1 s at least), per connect. Everything after the
 *   handshake (queries, results, the doorbell) is non-blocking again (simba sets the socket
 *   back to O_NONBLOCK: Connector/C leaves it blocking). Where that pause is
 *   too long, set connect_timeout_ms to 1000, or use a unix socket or a private network.
 *
 * DATA (the table name is checked; names and ids reach SQL only escaped by
 * mysql_real_escape_string, values only as hex literals)
 *   <table>       name PK, owner ('' = nobody), fence, acquired_ms, ttl_ms, transition_ms
 *                 (absolute server ms), value (the owner's bytes), seq (the name's wait
 *                 queue counter), pending (1: granted by a hand-over, the grantee has not
 *                 asked yet: its ask is answered that grant); simba never deletes a row
 *   <table>_q     the wait queue: name, contender, seq (from the row's counter: arrival
 *                 order per name), expires_ms, and the waiter's ttl_ms, tr_ms, value
 *   <table>_boot  ENGINE=MEMORY, one row (since_ms, fence_floor, max_lease_ms): the loss marker
 *   <table>_meta  the schema version row ('version', 1); another version is refused
 *   <table>_hold  the holders of a semaphore or read-write lock (see below)
 *   <table>_follow  the doorbells of processes that read a name (see PUSH), each for max_lease_ms
 *   <table>_version  the check every connection makes (PRIVILEGES)
 *   <table>_acq / _rel / _read / _val / _yield / _force / _sacq / _grant / _bell / _fan   stored
 *                 procedures, one CALL =
 *                 one round trip; each locks the mutex's row first (FOR UPDATE) in a
 *                 transaction of its own, so one mutex's queue changes are serialised.
 *
 * LOSSES (a restart, a failover to a replica that missed writes, a restored backup, rows
 * deleted)
 *   <table>_boot is a MEMORY table: every server start empties it. The first grant that
 *   finds it empty records the server's start (now - Uptime) and for max_lease_ms after it
 *   nobody is granted a new ownership (SIMBA_EBACKEND "quarantine", the contender hears
 *   SIMBA_EVENT_QUARANTINE and asks again when it ends); a mutex first asked long after a
 *   start waits for nothing. Every later grant's fence starts above a floor of (ms since
 *   1970) << 10, so a fence handed out by a lost commit is never handed out again. A
 *   trigger AFTER DELETE on <table> raises the floor above every fence a deleted row held,
 *   and starts the quarantine when it held a live lease; a <table> gone where simba was set
 *   up (DROP TABLE) restarts the marker at the next setup. <table> keeps a sentinel row
 *   (name ''): a setup or a name's first row that finds it gone (TRUNCATE, which fires no
 *   trigger, or every row deleted) restarts the marker then. Renewals of a row that still
 *   names its owner go on. Every process on a table must use the same max_lease_ms.
 *
 * FAIRNESS (the rule of every backend)
 *   A free mutex goes to the oldest live waiter (lowest seq); a contender that finds it free
 *   but is not at the head joins the queue. A waiter's place lapses req->live_ms after its
 *   last request. The owner's renewal is not an acquisition, and a renewal whose lease has
 *   already ended at the store is refused (the answer names who holds it now), never
 *   granted as a new ownership.
 *
 * PUSH
 *   A release by the live owner grants the mutex, in its transaction, to the oldest live
 *   waiter with that waiter's ttl, transition and value. MySQL has no LISTEN/NOTIFY: each
 *   backend's request connection holds a user lock named by a random token, and a second
 *   connection, the doorbell, parks in a tagged GET_LOCK(60) on it and holds the lock
 *   'simba-door:<token>', by which the procedure finds it (IS_USED_LOCK) and interrupts it
 *   (KILL QUERY) as soon as it knows the head: the head's ask waits for the commit.
 *   Not SLEEP: every SLEEP waits on one server mutex, and a KILL of one at times took
 *   MariaDB two seconds; a lock wait is interrupted at once.
 *   The head's doorbell rings at a hand-over; every follower's (the queue's bells and the
 *   readers registered in <table>_follow) rings through <table>_fan at each new owner or
 *   value. A rung backend makes each of its waiters and observers ask once. Timers remain
 *   the fallback; simba_mysql_push() says which mode a backend runs (docs/mysql.md).
 *
 * LEADERSHIP VALUE, PROCLAIM, YIELD: as in simba_pg.h (the value in hex on the wire).
 *
 * SEMAPHORES AND READ-WRITE LOCKS (as in simba_pg.h)
 *   <table>_hold holds one row per reader or semaphore permit, each its own lease, its fence
 *   the next of the name's row, which records the permits while anyone holds or waits; the
 *   queue's rows say who reads (column shared). <table>_sacq asks for a holding under the
 *   row lock (another N is refused, SIMBA_ECONFLICT); a release or yield of a holding, or of the
 *   owner row before readers, grants in its transaction each waiter it frees (<table>_grant)
 *   and rings its doorbell.
 *
 * FENCED WRITES (the protected data in the same database)
 *   Setup creates the SQL function simba_check_fence(name, fence) (for a table other than
 *   "simba_mutex": <table>_check_fence). Called inside the application's own transaction,
 *   before the write it guards, from any language:
 *       START TRANSACTION; SELECT simba_check_fence('orders', 42); UPDATE orders ...; COMMIT;
 *   it share-locks the mutex row (LOCK IN SHARE MODE), so every grant, renewal and release
 *   waits for that transaction to end, and judges by the server's clock read under the
 *   lock. A refusal is SQLSTATE 45000 with PostgreSQL's words (the fence moved on, was never
 *   handed out, released, the lease is over); roll back. simba_mysql_check_fence() is the C
 *   call of it on a MYSQL connection of the application's.
 *
 * PRIVILEGES
 *   Every routine runs with its definer's rights (SQL SECURITY DEFINER): only the role that
 *   makes the objects, once, needs CREATE, TRIGGER and CREATE ROUTINE. <table>_version
 *   answers, for any caller with EXECUTE on it, the version row, whether every object is
 *   there, and whether the definer may ring this user's doorbell (the same user, or
 *   CONNECTION ADMIN or SUPER); when it may not, no doorbell is parked (timers, logged
 *   once, simba_mysql_push() "timers"). An application role needs EXECUTE on the routines it
 *   calls and SELECT on <table>, _q and _hold to inspect; docs/mysql.md lists the grants.
 *   A refusal (error 1044, 1142, 1370, ...) fails requests at once with SIMBA_EDENIED and
 *   the server's words, with the privilege this role needs.
 *
 * SECTIONS (grep the tag in this file)
 *   >>api  public declarations   >>impl  the implementation   >>open  the constructor
 *   >>process  the work of one poll   >>close  teardown   >>sql  the statements
 *   >>row  answer rows   >>conn  the connection   >>step  the non-blocking steps
 *   >>fence  fenced writes   >>inspect  simba_inspect, simba_list, simba_force_release
 *   >>version  the schema check of every connection
 *
 * LICENSE: MIT, the full text at the end of simba.h (the headers ship together).
 */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_MYSQL_IMPLEMENTATION)
#define SIMBA_MYSQL_IMPLEMENTATION
#endif
/* Its implementation uses the core's private helpers: the core's goes into the same file. */
#if defined(SIMBA_MYSQL_IMPLEMENTATION) && !defined(SIMBA_CORE_IMPLEMENTATION)
#define SIMBA_CORE_IMPLEMENTATION
#endif
#ifndef SIMBA_MYSQL_H
#define SIMBA_MYSQL_H

#include "simba.h"

#ifdef __cplusplus
extern "C" {
#endif

/* >>api */
#define SIMBA_MYSQL_CONNECTIONS_MAX 64 /* simba_mysql_desc.connections at most */
typedef struct simba_mysql_desc {
    const char *host;        /* numeric IPv4/IPv6 address of the server */
    const char *unix_socket; /* or: the server's socket path (absolute) */
    int port;                /* 0 -> 3306 */
    const char *user, *password, *db; /* db: the database of the tables (required) */
    const char *table;       /* NULL -> "simba_mutex"; 1..48 of [A-Za-z0-9_] */
    int64_t connect_timeout_ms;   /* 0 -> 2000: connect + setup */
    int64_t statement_timeout_ms; /* 0 -> 5000: the server's max_statement_time too */
    int64_t reconnect_min_ms, reconnect_max_ms; /* 0 -> 100 / max(5000, reconnect_min_ms) */
    int64_t max_lease_ms;    /* 0 -> SIMBA_MAX_LEASE_DEFAULT_MS (60000): the longest lease (ttl +
                                transition) a contender may ask for, and the quarantine after a
                                loss; give every process on a table the same */
    /* TLS (see TLS), for both connections of the backend */
    const char *ssl_mode;    /* NULL or "disabled": plain; "required": TLS, any certificate;
                                "verify_ca": signed by ssl_ca; "verify_identity": also naming
                                host (an IP address in its subjectAltName) */
    const char *ssl_ca;      /* file of the CA certificates (required by verify_ca / _identity) */
    const char *ssl_cert, *ssl_key; /* this client's certificate and key, when the server asks */
    int connections;         /* 0 -> 1: request connections, 1..SIMBA_MYSQL_CONNECTIONS_MAX; each
                                name's requests go on one of them, in order (see POOL) */
} simba_mysql_desc;

SIMBA_API simba_result simba_mysql_open(simba_loop *loop, const simba_mysql_desc *desc, simba_backend **out);

/* How a release reaches the next waiter now: "doorbell" while the backend's doorbell
   connection is parked, "timers" while it is not (connecting, killed, refused), NULL for a
   backend that is not this header's. */
SIMBA_API const char *simba_mysql_push(const simba_backend *be);

/* The fenced write's check (FENCED WRITES) on conn, the application's own connection, inside
   its open transaction, before the write it guards: SELECT <check function>(name, fence).
   table as in simba_mysql_desc (NULL: "simba_mutex"). BLOCKING: one round trip on conn.
   SIMBA_OK: the fence holds, and no grant can commit before the transaction ends;
   SIMBA_EFENCE: refused, errbuf says why; roll the transaction back. SIMBA_EINVAL: conn
   NULL, an empty or bad name, fence 0, a bad table name, no check function there;
   SIMBA_EBACKEND: another server error (errbuf). errbuf may be NULL. */
struct st_mysql; /* mysql.h's MYSQL: this header's declarations need no mysql.h */
SIMBA_API simba_result simba_mysql_check_fence(struct st_mysql *conn, const char *table, const char *name, uint64_t fence,
                                               char *errbuf, size_t errbuf_cap);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_MYSQL_H */

/* >>impl */
/* ==================================================================================== */
/*                                   IMPLEMENTATION                                     */
/* ==================================================================================== */
#if defined(SIMBA_IMPLEMENTATION) && !defined(SIMBA_MYSQL_IMPLEMENTATION)
#define SIMBA_MYSQL_IMPLEMENTATION
#endif
#if defined(SIMBA_MYSQL_IMPLEMENTATION) && !defined(SIMBA__MYSQL_IMPLEMENTED)
#define SIMBA__MYSQL_IMPLEMENTED
#include "simba.h" /* the core's implementation, when this file has not got it yet */

#include <mysql.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIMBA__MY_TABLE_MAX 48
#define SIMBA__MY_VERSION "1"
#define SIMBA__MY_SCHEMA_VERSION 1 /* the same, as a number */
#define SIMBA__MY_RETRIES 8
#define SIMBA__MY_SETTLE_MS 1000 /* destroy waits this long at most to send the releases queued */
#define SIMBA__MY_VIEW_HOLDERS 64 /* holders an inspection shows per mutex */
#define SIMBA__MY_ROWBUF (2 * SIMBA_VALUE_MAX + 4 * SIMBA_ID_MAX + 256)

enum { SIMBA__MY_DOWN, SIMBA__MY_CONNECTING, SIMBA__MY_SETUP, SIMBA__MY_READY };
enum { SIMBA__MY_B_DOWN, SIMBA__MY_B_CONNECTING, SIMBA__MY_B_PARKED };
enum { SIMBA__MY_S_CONNECT, SIMBA__MY_S_QUERY, SIMBA__MY_S_STORE, SIMBA__MY_S_NEXT };
enum { SIMBA__MY_SSL_OFF, SIMBA__MY_SSL_REQUIRED, SIMBA__MY_SSL_VERIFY_CA, SIMBA__MY_SSL_VERIFY_IDENTITY };

/* >>sql  {T} {Q} {B} {M} = the tables (backquoted), {A} {R} {D} {V} {E} {G} = the
   procedures, {F} = the fence check function, {N} = the table name unquoted (in strings),
   {L} = desc.max_lease_ms. Every procedure but {G} answers one row: owner ('' = nobody),
   ttl_left, transition_left, held (-1 unknown), fence, first_in_line (or what the answer
   is, see SIMBA__MY_GUARD and SIMBA__MY_REFUSED), the server's ms, the owner's value in hex. */
#define SIMBA__MY_NOW "FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000)"
/* Names and ids in routines as in the tables: a parameter or variable of the database's
   default character set would make every lookup by name a scan of the whole table. */
#define SIMBA__MY_ASCII "CHARACTER SET ascii COLLATE ascii_bin"
#define SIMBA__MY_DECL                                                                            \
    "  DECLARE now_ms BIGINT DEFAULT 0; DECLARE nf INT DEFAULT 0; DECLARE done INT DEFAULT 0;\n"   \
    "  DECLARE r_owner VARCHAR(255) " SIMBA__MY_ASCII " DEFAULT ''; DECLARE r_fence BIGINT DEFAULT 0;\n"              \
    "  DECLARE r_acq BIGINT DEFAULT 0; DECLARE r_ttl BIGINT DEFAULT 0; DECLARE r_tr BIGINT DEFAULT 0;\n" \
    "  DECLARE r_val BLOB DEFAULT ''; DECLARE r_seq BIGINT DEFAULT 0;\n"                          \
    "  DECLARE o_owner VARCHAR(255) " SIMBA__MY_ASCII " DEFAULT ''; DECLARE o_ttl BIGINT DEFAULT 0; DECLARE o_tr BIGINT DEFAULT 0;\n" \
    "  DECLARE o_held BIGINT DEFAULT -1; DECLARE o_fence BIGINT DEFAULT 0; DECLARE o_first INT DEFAULT 0;\n" \
    "  DECLARE o_val BLOB DEFAULT ''; DECLARE fan INT DEFAULT 0; DECLARE fan_skip VARCHAR(80) " SIMBA__MY_ASCII " DEFAULT '';\n"                                                          \
    "  DECLARE b_since BIGINT DEFAULT 0; DECLARE b_floor BIGINT DEFAULT 0; DECLARE b_bound BIGINT DEFAULT 0;\n" \
    "  DECLARE b_until BIGINT DEFAULT 0; DECLARE my_bound BIGINT DEFAULT 0;\n"                    \
    "  DECLARE hd VARCHAR(255) " SIMBA__MY_ASCII " DEFAULT NULL; DECLARE h_ttl BIGINT DEFAULT 0; DECLARE h_tr BIGINT DEFAULT 0;\n" \
    "  DECLARE h_val BLOB DEFAULT ''; DECLARE y_val BLOB DEFAULT '';\n"                           \
    "  DECLARE h_bell VARCHAR(80) " SIMBA__MY_ASCII " DEFAULT ''; DECLARE ring VARCHAR(80) " SIMBA__MY_ASCII " DEFAULT ''; DECLARE h_sh INT DEFAULT 0;\n" \
    "  DECLARE r_permits INT DEFAULT 0; DECLARE r_pending INT DEFAULT 0; DECLARE nh BIGINT DEFAULT 0;\n" \
    "  DECLARE nq BIGINT DEFAULT 0;\n" \
    "  DECLARE my_seq BIGINT DEFAULT NULL; DECLARE pos BIGINT DEFAULT 0; DECLARE ahead BIGINT DEFAULT 0;\n" \
    "  DECLARE ok INT DEFAULT NULL; DECLARE rec INT DEFAULT 0; DECLARE live INT DEFAULT 0;\n"      \
    "  DECLARE hs_id VARCHAR(255) " SIMBA__MY_ASCII " DEFAULT NULL; DECLARE hs_fence BIGINT DEFAULT 0; DECLARE hs_acq BIGINT DEFAULT 0;\n" \
    "  DECLARE hs_ttl BIGINT DEFAULT 0; DECLARE hs_tr BIGINT DEFAULT 0; DECLARE hs_val BLOB DEFAULT ''; DECLARE hs_sh INT DEFAULT 0;\n" \
    "  DECLARE CONTINUE HANDLER FOR NOT FOUND SET nf = 1;\n"                                      \
    "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n"
#define SIMBA__MY_ROW_COLS "owner, fence, acquired_ms, ttl_ms, transition_ms, value, seq, permits, pending"
#define SIMBA__MY_ROW_INTO " INTO r_owner, r_fence, r_acq, r_ttl, r_tr, r_val, r_seq, r_permits, r_pending"
/* The mutex row, locked first (one lock order per name: the row, then its queue). */
#define SIMBA__MY_LOCK                                                                            \
    "  START TRANSACTION;\n"                                                                      \
    "  SET nf = 0;\n"                                                                             \
    "  SELECT " SIMBA__MY_ROW_COLS SIMBA__MY_ROW_INTO " FROM {T} WHERE name = p_name FOR UPDATE;\n"
/* A name's first row: the sentinel row ('') gone means the table was emptied (TRUNCATE fires
   no trigger): the loss marker restarts now, as rows deleted under a lease start it. */
#define SIMBA__MY_LOCK_MAKE                                                                       \
    SIMBA__MY_LOCK                                                                                \
    "  IF nf THEN\n"                                                                              \
    "    IF NOT EXISTS (SELECT 1 FROM {T} WHERE name = '') THEN\n"                                \
    "      INSERT INTO {B} VALUES (1, " SIMBA__MY_NOW ", " SIMBA__MY_NOW " * 1024, 0) ON DUPLICATE KEY UPDATE\n" \
    "        since_ms = GREATEST(since_ms, VALUES(since_ms)), fence_floor = GREATEST(fence_floor, VALUES(fence_floor));\n" \
    "      INSERT IGNORE INTO {T} (name) VALUES ('');\n"                                          \
    "    END IF;\n"                                                                               \
    "    INSERT IGNORE INTO {T} (name) VALUES (p_name);\n"                                        \
    "    SET nf = 0;\n"                                                                           \
    "    SELECT " SIMBA__MY_ROW_COLS SIMBA__MY_ROW_INTO " FROM {T} WHERE name = p_name FOR UPDATE;\n" \
    "  END IF;\n"                                                                                 \
    "  SET now_ms = " SIMBA__MY_NOW ";\n"
#define SIMBA__MY_RELOAD                                                                          \
    "  SELECT " SIMBA__MY_ROW_COLS SIMBA__MY_ROW_INTO " FROM {T} WHERE name = p_name;\n"
/* The doorbell (see PUSH): the waiter's parked GET_LOCK ("<connection id>:<token>" in ring)
   is interrupted on the connection that holds the user lock 'simba-door:<token>': only that
   process's doorbell takes it, and it goes with its session, so a connection id the server
   reused is never interrupted (and the lookup is a hash probe, not a processlist scan). A
   failure (no privilege to kill it) only leaves the waiter to its timer. */
#define SIMBA__MY_RING "  IF ring <> '' THEN CALL {W}(ring); END IF;\n"
#define SIMBA__MY_BELL_FN                                                                         \
    "CREATE PROCEDURE IF NOT EXISTS {W}(ring VARCHAR(80) " SIMBA__MY_ASCII ")\n"                                      \
    "MODIFIES SQL DATA BEGIN\n"                                                                   \
    "  DECLARE bid BIGINT UNSIGNED;\n"                                                            \
    "  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;\n"                                    \
    "  IF ring IS NOT NULL AND ring <> '' THEN\n"                                                \
    "    SET bid = IS_USED_LOCK(CONCAT('simba-door:', SUBSTRING_INDEX(ring, ':', -1)));\n"        \
    "    IF bid IS NOT NULL THEN KILL QUERY bid; END IF;\n"                                        \
    "  END IF;\n"                                                                                 \
    "END"
/* Every follower learns a new owner or value (see PUSH): after the commit, {J} rings the
   doorbell of every process with a live waiter of the name (its queue rows) or an observer
   (its registration in {O}), but the head's, which ring already holds, and the asker's own
   (fan_skip: its answer tells it). A ring is a hint; a failure leaves the followers to
   their timers. */
/* (the lookups first: a name nobody follows costs no call) */
#define SIMBA__MY_FAN_ANY                                                                         \
    "(EXISTS (SELECT 1 FROM {O} WHERE name = p_name AND expires_ms >= now_ms) OR EXISTS (SELECT 1 FROM {Q} WHERE name = p_name\n" \
    "    AND bell <> '' AND bell <> ring AND bell <> fan_skip AND expires_ms >= now_ms))"
#define SIMBA__MY_FAN "  IF fan AND " SIMBA__MY_FAN_ANY " THEN CALL {J}(p_name, ring, fan_skip); END IF;\n"
#define SIMBA__MY_FAN_FN                                                                          \
    "CREATE PROCEDURE IF NOT EXISTS {J}(p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_skip VARCHAR(80) " SIMBA__MY_ASCII ",\n" \
    "  p_skip2 VARCHAR(80) " SIMBA__MY_ASCII ")\n" \
    "MODIFIES SQL DATA BEGIN\n"                                                                   \
    "  DECLARE b VARCHAR(80) " SIMBA__MY_ASCII "; DECLARE fin INT DEFAULT 0; DECLARE now_ms BIGINT DEFAULT " SIMBA__MY_NOW ";\n" \
    "  DECLARE c CURSOR FOR SELECT bell FROM {Q} WHERE name = p_name AND bell <> '' AND expires_ms >= now_ms\n" \
    "    UNION SELECT bell FROM {O} WHERE name = p_name AND expires_ms >= now_ms;\n"               \
    "  DECLARE CONTINUE HANDLER FOR NOT FOUND SET fin = 1;\n"                                     \
    "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN END;\n"                                        \
    "  OPEN c;\n"                                                                                 \
    "  lp: LOOP\n"                                                                                \
    "    FETCH c INTO b;\n"                                                                       \
    "    IF fin THEN LEAVE lp; END IF;\n"                                                         \
    "    IF b <> COALESCE(p_skip, '') AND b <> COALESCE(p_skip2, '') THEN CALL {W}(b); END IF;\n"  \
    "  END LOOP;\n"                                                                               \
    "  CLOSE c;\n"                                                                                \
    "END"
/* The holding of the set that frees first answers a waiter while the owner row is free. */
#define SIMBA__MY_FIRST_HOLDER                                                                    \
    "    SET nf = 0, hs_id = NULL;\n"                                                             \
    "    SELECT contender, fence, acquired_ms, ttl_ms, transition_ms, value INTO hs_id, hs_fence, hs_acq, hs_ttl, hs_tr, hs_val\n" \
    "      FROM {S} WHERE name = p_name AND transition_ms >= now_ms ORDER BY transition_ms LIMIT 1;\n" \
    "    IF hs_id IS NOT NULL THEN\n"                                                             \
    "      SET o_owner = hs_id, o_ttl = hs_ttl - now_ms, o_tr = hs_tr - now_ms, o_held = now_ms - hs_acq,\n" \
    "        o_fence = hs_fence, o_val = hs_val, done = 1;\n"                                     \
    "      LEAVE body;\n"                                                                         \
    "    END IF;\n"
/* A waiter's place: kept (with its seq) when it has one, else the next of the name's counter. */
#define SIMBA__MY_QUEUE(val, sh)                                                                  \
    "    IF EXISTS (SELECT 1 FROM {Q} WHERE name = p_name AND contender = p_id) THEN\n"           \
    "      UPDATE {Q} SET expires_ms = now_ms + p_live, ttl_ms = p_ttl, tr_ms = p_tr, value = " val ", bell = p_bell,\n" \
    "        shared = " sh " WHERE name = p_name AND contender = p_id;\n"                        \
    "    ELSE\n"                                                                                  \
    "      UPDATE {T} SET seq = seq + 1 WHERE name = p_name;\n"                                   \
    "      SELECT seq INTO r_seq FROM {T} WHERE name = p_name;\n"                                 \
    "      INSERT INTO {Q} (name, contender, seq, expires_ms, ttl_ms, tr_ms, value, bell, shared)\n" \
    "        VALUES (p_name, p_id, r_seq, now_ms + p_live, p_ttl, p_tr, " val ", p_bell, " sh ");\n" \
    "    END IF;\n"
#define SIMBA__MY_ANSWER                                                                          \
    "  IF NOT done THEN\n"                                                                        \
    "    IF r_owner <> '' AND r_tr >= now_ms THEN\n"                                              \
    "      SET o_owner = r_owner, o_ttl = r_ttl - now_ms, o_tr = r_tr - now_ms, o_held = now_ms - r_acq,\n" \
    "        o_fence = r_fence, o_val = r_val;\n"                                                 \
    "    ELSE\n"                                                                                  \
    "      SET o_owner = '', o_ttl = 0, o_tr = 0, o_held = -1, o_fence = 0, o_val = '';\n"       \
    "    END IF;\n"                                                                               \
    "  END IF;\n"                                                                                 \
    "  COMMIT;\n" SIMBA__MY_FAN                                                                  \
    "  SELECT o_owner, o_ttl, o_tr, o_held, o_fence, o_first, now_ms, HEX(o_val);\n"
/* The loss marker (see LOSSES): a MEMORY table that every server start empties. The first
   grant that finds it empty records the server's start; no new owner is granted for
   max(ttl + tr, @simba_max_lease_ms) after since_ms, and fences start above the floor. */
#define SIMBA__MY_GUARD_LOAD(ttl, tr)                                                            \
    "    SET nf = 0;\n"                                                                           \
    "    SELECT since_ms, fence_floor, max_lease_ms INTO b_since, b_floor, b_bound FROM {B} WHERE id = 1;\n" \
    "    IF nf THEN\n"                                                                            \
    "      INSERT IGNORE INTO {B} VALUES (1, now_ms - 1000 * (SELECT VARIABLE_VALUE FROM\n"        \
    "        information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'), now_ms * 1024, 0);\n" \
    "      SELECT since_ms, fence_floor, max_lease_ms INTO b_since, b_floor, b_bound FROM {B} WHERE id = 1;\n" \
    "    END IF;\n"                                                                               \
    "    SET my_bound = COALESCE(@simba_max_lease_ms, 0);\n"                                      \
    "    SET b_until = b_since + GREATEST(" ttl " + " tr ", my_bound);\n"
/* A grant refused: o_first 2 (quarantine, ms left in o_ttl) or 3 (another max_lease_ms:
   the marker's in o_ttl, the asker's in o_tr). */
#define SIMBA__MY_GUARD                                                                           \
    SIMBA__MY_GUARD_LOAD("p_ttl", "p_tr")                                                         \
    "    IF my_bound > 0 AND b_bound = 0 THEN UPDATE {B} SET max_lease_ms = my_bound WHERE id = 1;\n" \
    "    ELSEIF my_bound > 0 AND b_bound <> my_bound THEN\n"                                      \
    "      SET o_ttl = b_bound, o_tr = my_bound, o_first = 3, done = 1;\n"                         \
    "      LEAVE body;\n"                                                                         \
    "    END IF;\n"                                                                               \
    "    IF now_ms < b_until THEN\n"                                                              \
    "      SET o_ttl = b_until - now_ms, o_first = 2, done = 1;\n"                                 \
    "      LEAVE body;\n"                                                                         \
    "    END IF;\n"

/* A release's hand-over (row locked, now_ms read): the oldest live waiter is granted the
   mutex with its own ttl, transition and value; in the quarantine the row is cleared
   instead. hd IS NULL: nobody waits, nothing changed. Shared by release and yield. The
   head's doorbell rings as soon as the head is known: its ask waits on the row lock for
   this commit and finds the grant, so the wake-up overlaps the writes and the log flush. */
#define SIMBA__MY_HAND_OVER                                                                       \
    "    SET nf = 0, hd = NULL;\n"                                                                \
    "    SELECT contender, ttl_ms, tr_ms, value, bell, shared INTO hd, h_ttl, h_tr, h_val, h_bell, h_sh FROM {Q}\n" \
    "      WHERE name = p_name AND expires_ms >= now_ms ORDER BY seq LIMIT 1;\n"                  \
    "    IF hd IS NOT NULL THEN\n"                                                                \
    "      SET ring = h_bell, fan = 1;\n"                                                         \
    "      IF NOT h_sh THEN CALL {W}(ring); END IF;\n"                                            \
    SIMBA__MY_GUARD_LOAD("h_ttl", "h_tr")                                                         \
    "      IF now_ms >= b_until AND NOT h_sh THEN\n"                                              \
    "        UPDATE {T} SET owner = hd, fence = GREATEST(fence + 1, b_floor), acquired_ms = now_ms, pending = 1,\n" \
    "          ttl_ms = now_ms + h_ttl, transition_ms = now_ms + h_ttl + h_tr, value = h_val WHERE name = p_name;\n" \
    "        DELETE FROM {Q} WHERE name = p_name AND (contender = hd OR expires_ms < now_ms);\n"   \
    "        SET r_owner = hd, r_fence = GREATEST(r_fence + 1, b_floor), r_acq = now_ms, r_pending = 1,\n" \
    "          r_ttl = now_ms + h_ttl, r_tr = now_ms + h_ttl + h_tr, r_val = h_val;\n"              \
    "      ELSE\n"                                                                                \
    "        UPDATE {T} SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = p_name;\n" \
    /* readers at the head: each one before the first writer, granted by {Z} */               \
    "        IF h_sh THEN SET ring = ''; CALL {Z}(p_name, 1, r_permits, now_ms); END IF;\n"       \
    "        " SIMBA__MY_RELOAD                                                                   \
    "      END IF;\n"                                                                             \
    "    END IF;\n"

/* o_first of an answer whose fence no longer holds (set_value, yield), and of a yield that
   passed the mutex on. */
#define SIMBA__MY_REFUSED "4"
#define SIMBA__MY_YIELDED "5"
#define SIMBA__MY_ARGS_ACQ                                                                       \
    "p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_id VARCHAR(255) " SIMBA__MY_ASCII ", p_ttl BIGINT, p_tr BIGINT, p_live BIGINT, p_renew INT, p_bell VARCHAR(80) " SIMBA__MY_ASCII ",\n  p_val BLOB"

/* Yield of a holding of the set (row locked): when its permit, once free, goes to a live
   waiter the rule does not grant now, the holding goes, {Z} grants whom it frees, and the
   contender joins the back of the line; else nothing changes. */
#define SIMBA__MY_YIELD_HOLDING                                                                   \
    "  SET nf = 0, hs_id = NULL;\n"                                                               \
    "  SELECT contender, fence, acquired_ms, ttl_ms, transition_ms, value, shared INTO hs_id, hs_fence, hs_acq, hs_ttl,\n" \
    "    hs_tr, hs_val, hs_sh FROM {S} WHERE name = p_name AND contender = p_id AND fence = p_fence AND transition_ms >= now_ms;\n" \
    "  IF hs_id IS NOT NULL THEN\n"                                                               \
    "    SELECT COUNT(*) INTO nh FROM {S} WHERE name = p_name AND transition_ms >= now_ms;\n"     \
    "    SELECT COUNT(*) INTO nq FROM {Q} WHERE name = p_name AND contender <> p_id AND expires_ms >= now_ms;\n" \
    "    IF nq > 0 AND IF(r_permits > 1, nq > r_permits - nh, NOT (r_owner <> '' AND r_tr >= now_ms) AND nh = 1) THEN\n" \
    "      DELETE FROM {S} WHERE name = p_name AND contender = p_id;\n"                           \
    "      DELETE FROM {Q} WHERE name = p_name AND (contender = p_id OR expires_ms < now_ms);\n"  \
    "      CALL {Z}(p_name, NOT (r_owner <> '' AND r_tr >= now_ms), r_permits, now_ms);\n"        \
    SIMBA__MY_QUEUE("hs_val", "hs_sh")                                                            \
    "      SET o_first = " SIMBA__MY_YIELDED ";\n"                                                \
    SIMBA__MY_FIRST_HOLDER                                                                        \
    "      SET done = 1;\n"                                                                       \
    "      LEAVE body;\n"                                                                         \
    "    END IF;\n"                                                                               \
    "    SET o_owner = p_id, o_ttl = hs_ttl - now_ms, o_tr = hs_tr - now_ms, o_held = now_ms - hs_acq,\n" \
    "      o_fence = hs_fence, o_val = hs_val, done = 1;\n"                                       \
    "    LEAVE body;\n"                                                                           \
    "  END IF;\n"

/* {Z}: the owner row freed (p_free) or a holding gone, under the caller's row lock: each live
   waiter the rule grants now (semaphore: the first N - holders; else the writer at the head
   when nobody holds, or the readers before the first writer) is granted in this transaction
   with its own ttl, transition and value, and its doorbell rung: its ask waits for the
   commit on the row lock, and finds the grant. In the quarantine: only the bell. */
#define SIMBA__MY_GRANT_FN_HEAD                                                                   \
    "CREATE PROCEDURE IF NOT EXISTS {Z}(p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_free INT, p_permits INT, now_ms BIGINT)\n" \
    "MODIFIES SQL DATA BEGIN\n"                                                                   \
    "  DECLARE w_id VARCHAR(255) " SIMBA__MY_ASCII "; DECLARE w_ttl BIGINT; DECLARE w_tr BIGINT; DECLARE w_val BLOB; DECLARE w_sh INT;\n" \
    "  DECLARE w_bell VARCHAR(80) " SIMBA__MY_ASCII "; DECLARE g_f BIGINT; DECLARE b_since BIGINT DEFAULT 0; DECLARE b_floor BIGINT DEFAULT 0;\n" \
    "  DECLARE b_bound BIGINT DEFAULT 0; DECLARE b_until BIGINT DEFAULT 0; DECLARE my_bound BIGINT DEFAULT 0; DECLARE nf INT DEFAULT 0;\n" \
    "  DECLARE c CURSOR FOR SELECT q.contender, q.ttl_ms, q.tr_ms, q.value, q.shared, q.bell FROM (SELECT contender, ttl_ms,\n" \
    "      tr_ms, value, shared, bell, seq, ROW_NUMBER() OVER (ORDER BY seq) AS i, SUM(1 - shared) OVER (ORDER BY seq) AS ex\n" \
    "      FROM {Q} WHERE name = p_name AND expires_ms >= now_ms) q,\n"                           \
    "      (SELECT COUNT(*) AS n FROM {S} WHERE name = p_name AND transition_ms >= now_ms) h\n"    \
    "    WHERE CASE WHEN p_permits > 1 THEN q.i <= p_permits - h.n\n"                             \
    "      ELSE (q.shared = 1 AND q.ex = 0) OR (q.shared = 0 AND q.i = 1 AND h.n = 0) END ORDER BY q.seq;\n" \
    "  DECLARE CONTINUE HANDLER FOR NOT FOUND SET nf = 1;\n"
#define SIMBA__MY_GRANT_FN                                                                        \
    "  IF p_free THEN\n"                                                                          \
    "  OPEN c;\n"                                                                                 \
    "  lp: LOOP\n"                                                                                \
    "    SET nf = 0;\n"                                                                           \
    "    FETCH c INTO w_id, w_ttl, w_tr, w_val, w_sh, w_bell;\n"                                  \
    "    IF nf THEN LEAVE lp; END IF;\n"                                                          \
    SIMBA__MY_GUARD_LOAD("w_ttl", "w_tr")                                                         \
    "    IF now_ms < b_until THEN CALL {W}(w_bell); ITERATE lp; END IF;\n"                        \
    "    UPDATE {T} SET fence = GREATEST(fence + 1, b_floor) WHERE name = p_name;\n"              \
    "    SELECT fence INTO g_f FROM {T} WHERE name = p_name;\n"                                   \
    "    IF p_permits > 1 OR w_sh THEN\n"                                                         \
    "      INSERT INTO {S} VALUES (p_name, w_id, w_sh, g_f, now_ms, now_ms + w_ttl, now_ms + w_ttl + w_tr, w_val)\n" \
    "        ON DUPLICATE KEY UPDATE shared = VALUES(shared), fence = VALUES(fence), acquired_ms = VALUES(acquired_ms),\n" \
    "        ttl_ms = VALUES(ttl_ms), transition_ms = VALUES(transition_ms), value = VALUES(value);\n" \
    "    ELSE\n"                                                                                  \
    "      UPDATE {T} SET owner = w_id, acquired_ms = now_ms, ttl_ms = now_ms + w_ttl,\n"         \
    "        transition_ms = now_ms + w_ttl + w_tr, value = w_val WHERE name = p_name;\n"         \
    "    END IF;\n"                                                                               \
    "    DELETE FROM {Q} WHERE name = p_name AND contender = w_id;\n"                             \
    "    CALL {W}(w_bell);\n"                                                                     \
    "  END LOOP;\n"                                                                               \
    "  CLOSE c;\n"                                                                                \
    "  END IF;\n"                                                                                 \
    "END"

/* {P}: a reader's or a permit's ask, under the row lock: dead holdings and waiters dropped,
   another N while anyone holds or waits refused (o_first 6: the name's N in o_ttl, the asked
   one in o_tr), a renewal kept (one whose holding has ended is refused), else the rule of
   simba.h grants (fence + 1 from the row) or queues it. */
#define SIMBA__MY_SET_HEAD                                                                        \
    "CREATE PROCEDURE IF NOT EXISTS {P}(" SIMBA__MY_ARGS_ACQ ", p_permits INT, p_shared INT)\n"   \
    "MODIFIES SQL DATA BEGIN\n"
#define SIMBA__MY_SET_A                                                                           \
    "  body: BEGIN\n" SIMBA__MY_LOCK_MAKE                                                         \
    "  DELETE FROM {Q} WHERE name = p_name AND expires_ms < now_ms;\n"                            \
    "  DELETE FROM {S} WHERE name = p_name AND transition_ms < now_ms;\n"                         \
    "  SET live = r_owner <> '' AND r_tr >= now_ms;\n"                                            \
    "  SELECT COUNT(*) INTO nh FROM {S} WHERE name = p_name;\n"                                   \
    "  SET nf = 0;\n"                                                                             \
    "  SELECT seq INTO my_seq FROM {Q} WHERE name = p_name AND contender = p_id;\n"               \
    "  SELECT COUNT(*) INTO nq FROM {Q} WHERE name = p_name AND contender <> p_id;\n"             \
    "  SET rec = IF(live, 1, r_permits);\n"                                                       \
    "  IF rec > 0 AND rec <> p_permits AND (live OR nh > 0 OR nq > 0) THEN\n"                     \
    "    SET o_ttl = rec, o_tr = p_permits, o_first = 6, done = 1;\n"                             \
    "    LEAVE body;\n"                                                                           \
    "  END IF;\n"                                                                                 \
    /* the owner's id back as a reader (a new incarnation): its ownership ends */               \
    "  IF live AND r_owner = p_id THEN\n"                                                         \
    "    UPDATE {T} SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = p_name;\n" \
    "    SET r_owner = '', live = 0;\n"                                                           \
    "  END IF;\n"                                                                                 \
    "  SET nf = 0, hs_id = NULL;\n"                                                               \
    "  SELECT contender, fence, acquired_ms, value INTO hs_id, hs_fence, hs_acq, hs_val FROM {S}\n" \
    "    WHERE name = p_name AND contender = p_id;\n"
#define SIMBA__MY_SET_B                                                                           \
    "  IF p_renew THEN\n"                                                                         \
    "    IF hs_id IS NOT NULL THEN\n"                                                             \
    "      UPDATE {S} SET ttl_ms = now_ms + p_ttl, transition_ms = now_ms + p_ttl + p_tr WHERE name = p_name AND contender = p_id;\n" \
    "      SET o_owner = p_id, o_ttl = p_ttl, o_tr = p_ttl + p_tr, o_held = now_ms - hs_acq, o_fence = hs_fence,\n" \
    "        o_val = hs_val, done = 1;\n"                                                         \
    "      LEAVE body;\n"                                                                         \
    "    END IF;\n"                                                                               \
    "    IF NOT live THEN\n" SIMBA__MY_FIRST_HOLDER "    END IF;\n"                              \
    "    LEAVE body;\n"                                                                           \
    "  END IF;\n"                                                                                 \
    "  IF hs_id IS NOT NULL THEN\n" /* the holder asking anew: a new grant, with a new fence */ \
    "    DELETE FROM {S} WHERE name = p_name AND contender = p_id;\n"                             \
    "    SET nh = nh - 1, ok = 1;\n"                                                              \
    "  END IF;\n"                                                                                 \
    "  SELECT COUNT(*), COALESCE(SUM(1 - shared), 0) INTO pos, ahead FROM {Q}\n"                  \
    "    WHERE name = p_name AND contender <> p_id AND (my_seq IS NULL OR seq < my_seq);\n"       \
    "  IF ok IS NULL THEN SET ok = IF(p_permits > 1, pos < p_permits - nh, NOT live AND ahead = 0); END IF;\n"
/* (cut for C99's longest string) */
#define SIMBA__MY_SET_C \
    "  IF ok THEN\n"                                                                              \
    SIMBA__MY_GUARD                                                                               \
    "    UPDATE {T} SET fence = GREATEST(fence + 1, b_floor), permits = p_permits WHERE name = p_name;\n" \
    "  " SIMBA__MY_RELOAD                                                                         \
    "    INSERT INTO {S} VALUES (p_name, p_id, p_shared, r_fence, now_ms, now_ms + p_ttl, now_ms + p_ttl + p_tr, p_val);\n" \
    "    DELETE FROM {Q} WHERE name = p_name AND contender = p_id;\n"                             \
    "    SET o_owner = p_id, o_ttl = p_ttl, o_tr = p_ttl + p_tr, o_held = 0, o_fence = r_fence, o_val = p_val, done = 1;\n" \
    "    LEAVE body;\n"                                                                           \
    "  END IF;\n"                                                                                 \
    SIMBA__MY_QUEUE("p_val", "p_shared")                                                          \
    "  IF r_permits <> p_permits THEN UPDATE {T} SET permits = p_permits WHERE name = p_name; END IF;\n" \
    "  SET o_first = IF(pos <= IF(p_permits > 1, p_permits - nh, 0), 1, 0);\n"                    \
    "  IF NOT live THEN\n" SIMBA__MY_FIRST_HOLDER "  END IF;\n"                                  \
    "  END body;\n" SIMBA__MY_ANSWER "END"

/* acquire: p_renew = the core believes it owns it. A renewal of a live lease keeps fence,
   acquired and value; a renewal whose lease has ended at the store is refused (answered
   with the row as it is), never granted as a new ownership. */
#define SIMBA__MY_ACQ_HEAD                                                                             \
    "CREATE PROCEDURE IF NOT EXISTS {A}(" SIMBA__MY_ARGS_ACQ ")\n"                                   \
    "MODIFIES SQL DATA BEGIN\n"
#define SIMBA__MY_ACQ                                                                          \
    "  body: BEGIN\n" SIMBA__MY_LOCK_MAKE                                                         \
    /* (a renewal and a pending grant read no queue: the dead waiters go at the next ask) */    \
    "  IF p_renew THEN\n"                                                                         \
    "    IF r_owner = p_id AND r_tr >= now_ms THEN\n"                                             \
    "      UPDATE {T} SET ttl_ms = now_ms + p_ttl, transition_ms = now_ms + p_ttl + p_tr, pending = 0 WHERE name = p_name;\n" \
    "      SET r_ttl = now_ms + p_ttl, r_tr = now_ms + p_ttl + p_tr;\n"                          \
    "    END IF;\n"                                                                               \
    "    LEAVE body;\n"                                                                           \
    "  END IF;\n"                                                                                 \
    /* a hand-over's grantee asking: answered its grant, read only (the hand-over rang) */     \
    "  IF r_owner = p_id AND r_tr >= now_ms AND r_pending THEN LEAVE body; END IF;\n"
/* (cut for C99's longest string) */
#define SIMBA__MY_ACQ_B \
    /* readers or permits hold (the set): an exclusive grant waits for them; a semaphore's
       name refuses a mutex's ask while anyone holds or waits */                               \
    /* (the holdings, the live head and whether others wait, in one statement) */              \
    "  SELECT (SELECT COUNT(*) FROM {S} WHERE name = p_name AND transition_ms >= now_ms),\n"        \
    "    (SELECT contender FROM {Q} WHERE name = p_name AND expires_ms >= now_ms ORDER BY seq LIMIT 1),\n" \
    "    EXISTS (SELECT 1 FROM {Q} WHERE name = p_name AND contender <> p_id AND expires_ms >= now_ms) INTO nh, hd, nq;\n" \
    "  IF r_permits > 1 AND (nh > 0 OR nq) THEN\n"                                                \
    "    SET o_ttl = r_permits, o_tr = 1, o_first = 6, done = 1;\n"                               \
    "    LEAVE body;\n"                                                                           \
    "  END IF;\n"                                                                                 \
    /* a stored owner asking anew starts a new tenure; a free mutex goes to the head */         \
    "  IF (r_owner = p_id AND r_tr >= now_ms) OR (NOT (r_owner <> '' AND r_tr >= now_ms) AND nh = 0 AND (hd IS NULL OR hd = p_id)) THEN\n" \
    SIMBA__MY_GUARD                                                                               \
    "    UPDATE {T} SET owner = p_id, fence = GREATEST(fence + 1, b_floor), acquired_ms = now_ms, pending = 0,\n" \
    "      ttl_ms = now_ms + p_ttl, transition_ms = now_ms + p_ttl + p_tr, value = p_val WHERE name = p_name;\n" \
    /* (hd NULL: nobody is in line; the row as written, read under its lock) */               \
    "    IF hd IS NOT NULL THEN DELETE FROM {Q} WHERE name = p_name AND contender = p_id; END IF;\n" \
    "    SET fan = 1, fan_skip = p_bell, r_owner = p_id, r_fence = GREATEST(r_fence + 1, b_floor), r_acq = now_ms,\n" \
    "      r_pending = 0, r_ttl = now_ms + p_ttl, r_tr = now_ms + p_ttl + p_tr, r_val = p_val;\n"   \
    "  ELSE\n"                                                                                    \
    /* the waiter's lease goes with its place (a dead one's place goes first); its seq is the
       name's counter's next */                                                                  \
    "    DELETE FROM {Q} WHERE name = p_name AND expires_ms < now_ms;\n"                           \
    SIMBA__MY_QUEUE("p_val", "0")                                                                 \
    "    SET o_first = IF(hd IS NULL OR hd = p_id, 1, 0);\n"                                      \
    "    IF r_permits <> 1 THEN UPDATE {T} SET permits = 1 WHERE name = p_name; END IF;\n"        \
    "    IF nh > 0 AND NOT (r_owner <> '' AND r_tr >= now_ms) THEN\n" SIMBA__MY_FIRST_HOLDER "    END IF;\n" \
    "  END IF;\n"                                                                                 \
    "  END body;\n" SIMBA__MY_ANSWER "END"

/* release by the live owner: the mutex goes at once to the oldest live waiter; with
   nobody waiting the row is cleared. A release by anyone else leaves the line. */
#define SIMBA__MY_REL_HEAD                                                                             \
    "CREATE PROCEDURE IF NOT EXISTS {R}(p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_id VARCHAR(255) " SIMBA__MY_ASCII ")\n"                   \
    "MODIFIES SQL DATA BEGIN\n"
#define SIMBA__MY_REL                                                                          \
    "  body: BEGIN\n" SIMBA__MY_LOCK                                                              \
    "  SET now_ms = " SIMBA__MY_NOW ";\n"                                                         \
    "  IF nf THEN LEAVE body; END IF;\n"                                                          \
    "  IF r_owner = p_id AND r_tr >= now_ms THEN\n" SIMBA__MY_HAND_OVER                           \
    "    IF hd IS NULL THEN\n"                                                                    \
    "      UPDATE {T} SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = p_name;\n" \
    "      SET r_owner = '', fan = 1;\n"                                                                   \
    "    END IF;\n"                                                                               \
    "  ELSE\n"                                                                                    \
    /* a holding of the set: freed, and granted to the waiters it frees */                     \
    "    DELETE FROM {S} WHERE name = p_name AND contender = p_id;\n"                             \
    "    SET nh = ROW_COUNT();\n"                                                                 \
    "    DELETE FROM {Q} WHERE name = p_name AND contender = p_id;\n"                             \
    "    IF nh > 0 THEN\n"                                                                        \
    "      CALL {Z}(p_name, NOT (r_owner <> '' AND r_tr >= now_ms), r_permits, now_ms);\n"        \
    "      " SIMBA__MY_RELOAD                                                                     \
    "    END IF;\n"                                                                               \
    "  END IF;\n"                                                                                 \
    "  END body;\n" SIMBA__MY_ANSWER "END"

#define SIMBA__MY_READ_HEAD                                                                            \
    "CREATE PROCEDURE IF NOT EXISTS {D}(p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_bell VARCHAR(80) " SIMBA__MY_ASCII ")\n" \
    "MODIFIES SQL DATA BEGIN\n"
#define SIMBA__MY_READ                                                                          \
    "  body: BEGIN\n"                                                                             \
    "  START TRANSACTION;\n"                                                                      \
    "  SELECT " SIMBA__MY_ROW_COLS SIMBA__MY_ROW_INTO " FROM {T} WHERE name = p_name;\n"          \
    "  SET now_ms = " SIMBA__MY_NOW ";\n"                                                         \
    /* the reader's doorbell follows the name for max_lease_ms (renewed past half of it) */    \
    "  SET my_bound = GREATEST(COALESCE(@simba_max_lease_ms, 0), 1000);\n"                         \
    "  IF p_bell <> '' AND NOT EXISTS (SELECT 1 FROM {O} WHERE name = p_name AND bell = p_bell\n" \
    "      AND expires_ms >= now_ms + my_bound / 2) THEN\n"                                       \
    "    DELETE FROM {O} WHERE name = p_name AND expires_ms < now_ms;\n"                          \
    "    INSERT INTO {O} VALUES (p_name, p_bell, now_ms + my_bound) ON DUPLICATE KEY UPDATE expires_ms = VALUES(expires_ms);\n" \
    "  END IF;\n"                                                                                 \
    "  IF NOT (r_owner <> '' AND r_tr >= now_ms) THEN\n" SIMBA__MY_FIRST_HOLDER "  END IF;\n"    \
    "  END body;\n" SIMBA__MY_ANSWER "END"

/* proclaim: the value replaced while the contender holds p_fence and a live lease. */
#define SIMBA__MY_VAL_HEAD                                                                             \
    "CREATE PROCEDURE IF NOT EXISTS {V}(p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_id VARCHAR(255) " SIMBA__MY_ASCII ", p_fence BIGINT, p_val BLOB)\n" \
    "MODIFIES SQL DATA BEGIN\n"
#define SIMBA__MY_VAL                                                                          \
    "  body: BEGIN\n" SIMBA__MY_LOCK                                                              \
    "  SET now_ms = " SIMBA__MY_NOW ";\n"                                                         \
    "  SET nf = 0, hs_id = NULL;\n"                                                               \
    "  SELECT contender, acquired_ms, ttl_ms, transition_ms INTO hs_id, hs_acq, hs_ttl, hs_tr FROM {S}\n" \
    "    WHERE name = p_name AND contender = p_id AND fence = p_fence AND transition_ms >= now_ms;\n" \
    "  IF hs_id IS NOT NULL THEN\n"                                                               \
    "    UPDATE {S} SET value = p_val WHERE name = p_name AND contender = p_id;\n"                \
    "    SET o_owner = hs_id, o_ttl = hs_ttl - now_ms, o_tr = hs_tr - now_ms, o_held = now_ms - hs_acq,\n" \
    "      o_fence = p_fence, o_val = p_val, done = 1;\n"                                         \
    "    LEAVE body;\n"                                                                           \
    "  END IF;\n"                                                                                 \
    "  IF r_owner = p_id AND r_fence = p_fence AND r_tr >= now_ms THEN\n"                  \
    "    UPDATE {T} SET value = p_val WHERE name = p_name;\n"                                     \
    "    SET r_val = p_val, fan = 1;\n"                                                                    \
    "  ELSE\n"                                                                                    \
    "    SET o_first = " SIMBA__MY_REFUSED ";\n"                                                  \
    "  END IF;\n"                                                                                 \
    "  END body;\n" SIMBA__MY_ANSWER "END"

/* yield: with a live waiter other than the owner in line, handed over as a release does,
   and the yielder queued at the back with its lease and value; else nothing changes. */
#define SIMBA__MY_YIELD_HEAD                                                                           \
    "CREATE PROCEDURE IF NOT EXISTS {E}(p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_id VARCHAR(255) " SIMBA__MY_ASCII ", p_fence BIGINT, p_live BIGINT,\n" \
    "  p_ttl BIGINT, p_tr BIGINT, p_bell VARCHAR(80) " SIMBA__MY_ASCII ")\n"                                                              \
    "MODIFIES SQL DATA BEGIN\n"
#define SIMBA__MY_YIELD                                                                          \
    "  body: BEGIN\n" SIMBA__MY_LOCK                                                              \
    "  SET now_ms = " SIMBA__MY_NOW ", y_val = r_val;\n"                                          \
    SIMBA__MY_YIELD_HOLDING                                                                       \
    "  IF r_owner <> p_id OR r_fence <> p_fence OR r_tr < now_ms THEN\n"                           \
    "    SET o_first = " SIMBA__MY_REFUSED ";\n"                                                  \
    "    LEAVE body;\n"                                                                           \
    "  END IF;\n"
/* (cut for C99's longest string) */
#define SIMBA__MY_YIELD_B \
    "  DELETE FROM {Q} WHERE name = p_name AND (contender = p_id OR expires_ms < now_ms);\n"      \
    SIMBA__MY_HAND_OVER                                                                           \
    "  SET fan_skip = p_bell;\n"                                                                   \
    "  IF hd IS NOT NULL THEN\n" SIMBA__MY_QUEUE("y_val", "0")                                   \
    "    SET o_first = " SIMBA__MY_YIELDED ";\n"                                                  \
    "  END IF;\n"                                                                                 \
    "  END body;\n" SIMBA__MY_ANSWER "END"

/* force release: clears the row, or deletes the holding of the set, only while that fence's
   lease lives; the head waiter then asks at its timer. One row: 1 cleared, 0 not. */
#define SIMBA__MY_FORCE                                                                           \
    "CREATE PROCEDURE IF NOT EXISTS {G}(p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_fence BIGINT)\n"                      \
    "MODIFIES SQL DATA BEGIN\n"                                                                   \
    "  DECLARE now_ms BIGINT; DECLARE n INT; DECLARE ring VARCHAR(80) " SIMBA__MY_ASCII " DEFAULT '';\n"             \
    "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n"                    \
    "  START TRANSACTION;\n"                                                                      \
    "  SELECT COUNT(*) INTO n FROM {T} WHERE name = p_name FOR UPDATE;\n"                         \
    "  SET now_ms = " SIMBA__MY_NOW ";\n"                                                         \
    "  UPDATE {T} SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = p_name\n" \
    "    AND fence = p_fence AND owner <> '' AND transition_ms >= now_ms;\n"                     \
    "  SET n = ROW_COUNT();\n"                                                                    \
    "  IF n = 0 THEN\n"                                                                           \
    "    DELETE FROM {S} WHERE name = p_name AND fence = p_fence AND transition_ms >= now_ms;\n"   \
    "    SET n = ROW_COUNT();\n"                                                                  \
    "  END IF;\n"                                                                                 \
    "  IF n = 1 THEN\n"                                                                           \
    "    SELECT COALESCE(MAX(bell), '') INTO ring FROM (SELECT bell FROM {Q} WHERE name = p_name\n" \
    "      AND expires_ms >= now_ms ORDER BY seq LIMIT 1) h;\n"                                    \
    "  END IF;\n"                                                                                 \
    "  COMMIT;\n" SIMBA__MY_RING                                                                 \
    "  IF n = 1 THEN CALL {J}(p_name, ring, ''); END IF;\n"                                       \
    "  SELECT n;\n"                                                                               \
    "END"

/* >>fence  The fenced write's check (see FENCED WRITES): the share lock on the mutex row
   keeps every grant, renewal and release out until the caller's transaction ends. */
#define SIMBA__MY_CHECK_FENCE                                                                     \
    "CREATE FUNCTION IF NOT EXISTS {F}(p_name VARCHAR(255) " SIMBA__MY_ASCII ", p_fence BIGINT) RETURNS INT\n"           \
    "READS SQL DATA BEGIN\n"                                                                      \
    "  DECLARE r_owner VARCHAR(255) " SIMBA__MY_ASCII " DEFAULT ''; DECLARE r_fence BIGINT DEFAULT 0;\n"              \
    "  DECLARE r_tr BIGINT DEFAULT 0; DECLARE now_ms BIGINT; DECLARE msg VARCHAR(400);\n"         \
    "  DECLARE CONTINUE HANDLER FOR NOT FOUND SET r_owner = '';\n"                                \
    "  IF p_name IS NULL OR p_name = '' THEN\n"                                                   \
    "    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = '{U}: the mutex name is empty: give the name the fence was granted for';\n" \
    "  END IF;\n"                                                                                 \
    "  IF p_fence IS NULL OR p_fence < 1 THEN\n"                                                  \
    "    SET msg = CONCAT('{U}: fence ', COALESCE(p_fence, 'NULL'), ' is no fence (a grant''s fence is at least 1): give the owner''s fence');\n" \
    "    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = msg;\n"                                       \
    "  END IF;\n"                                                                                 \
    "  SELECT owner, fence, transition_ms INTO r_owner, r_fence, r_tr FROM {T} WHERE name = p_name LOCK IN SHARE MODE;\n" \
    "  SET now_ms = " SIMBA__MY_NOW ";\n"                                                         \
    "  IF r_fence > p_fence THEN\n"                                                               \
    "    SET msg = CONCAT('{U}: the fence of ', p_name, ' moved on to ', r_fence, ' (a later owner): fence ', p_fence, ' is not the owner''s any more');\n" \
    "  ELSEIF r_fence < p_fence THEN\n"                                                           \
    "    SET msg = CONCAT('{U}: fence ', p_fence, ' was never handed out for ', p_name, ' (its fence is ', r_fence, '): not the owner''s');\n" \
    "  ELSEIF r_owner = '' THEN\n"                                                                \
    "    SET msg = CONCAT('{U}: ', p_name, ' has no owner (released): fence ', p_fence, ' holds no lease');\n" \
    "  ELSEIF r_tr < now_ms THEN\n"                                                               \
    "    SET msg = CONCAT('{U}: the lease of fence ', p_fence, ' on ', p_name, ' is over (ended ', now_ms - r_tr, ' ms ago by the server''s clock)');\n" \
    "  END IF;\n"                                                                                 \
    "  IF msg IS NOT NULL THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg; END IF;\n"          \
    "  RETURN 1;\n"                                                                               \
    "END"

/* >>version  {C}: one row, with its definer's rights: the version row's number (0 when it
   cannot be read), whether every table, routine and the trigger is there, and whether the
   definer can ring this user's doorbell (see PUSH): the same user, or CONNECTION ADMIN (or
   SUPER). The definer's name last, for the log. */
#define SIMBA__MY_VERSION_FN                                                                      \
    "CREATE PROCEDURE IF NOT EXISTS {C}()\n"                                                      \
    "READS SQL DATA BEGIN\n"                                                                      \
    "  DECLARE v BIGINT DEFAULT 0; DECLARE nt INT DEFAULT 0; DECLARE nr INT DEFAULT 0; DECLARE ng INT DEFAULT 0;\n" \
    "  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION, NOT FOUND SET v = v;\n"                         \
    "  SELECT m.v INTO v FROM {M} m WHERE k = 'version';\n"                                       \
    "  SELECT COUNT(*) INTO nt FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()\n"   \
    "    AND TABLE_NAME IN ('{N}', '{N}_q', '{N}_boot', '{N}_meta', '{N}_hold', '{N}_follow');\n"    \
    "  SELECT COUNT(*) INTO nr FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME IN\n" \
    "    ('{N}_acq', '{N}_rel', '{N}_read', '{N}_val', '{N}_yield', '{N}_force', '{N}_sacq', '{N}_grant', '{N}_bell',\n" \
    "     '{N}_fan', '{N}_version', '{U}');\n"                                                               \
    "  SELECT COUNT(*) INTO ng FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = '{N}_lost';\n" \
    "  SELECT v, nt = 6 AND nr = 12 AND ng = 1,\n"                                                \
    "    SUBSTRING_INDEX(USER(), '@', 1) = SUBSTRING_INDEX(CURRENT_USER(), '@', 1) OR\n"           \
    "      EXISTS (SELECT 1 FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE IN\n"       \
    "        ('CONNECTION ADMIN', 'CONNECTION_ADMIN', 'SUPER')), CURRENT_USER();\n"                \
    "END"

/* Every connection: the session, then the check (the application role needs EXECUTE on {C}
   only); the setup below runs only when {C} is missing or finds something missing. */
#define SIMBA__MY_SESSION                                                                         \
    "SET SESSION time_zone = '+00:00', SESSION tx_isolation = 'READ-COMMITTED', @simba_max_lease_ms = {L},\n" \
    "  SESSION max_statement_time = {X}, SESSION innodb_lock_wait_timeout = {Y}, SESSION sql_mode = 'STRICT_ALL_TABLES'"
static const char *const simba__my_check_sql[] = {
    SIMBA__MY_SESSION ",\n  @simba_bell = GET_LOCK('simba-bell:{H}', 1);\nCALL {C}()", NULL};
/* (the other request connections: the first one holds the doorbell's lock) */
static const char *const simba__my_check_more_sql[] = {SIMBA__MY_SESSION ";\nCALL {C}()", NULL};

/* The setup script, the objects' owner's, once (one round trip; statements end with ";\n"
   except the routines' "END", which the script separates with ";\n" too: the server parses
   each whole); it ends with the check's row. */
static const char *const simba__my_setup_sql[] = {
    "DO GET_LOCK('simba_setup_{N}', 10);\n"
    "CREATE TABLE IF NOT EXISTS {M} (k VARCHAR(32) PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB;\n"
    /* the version row first: another version is refused before anything is touched; a
       marker table gone, or a mutex table gone where simba was set up, restarts the marker */
    "BEGIN NOT ATOMIC\n"
    "  DECLARE v BIGINT DEFAULT NULL; DECLARE nb INT; DECLARE nt INT; DECLARE now_ms BIGINT;\n"
    "  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v = NULL;\n"
    "  SET now_ms = " SIMBA__MY_NOW ";\n"
    "  SELECT m.v INTO v FROM {M} m WHERE k = 'version';\n"
    "  IF v IS NOT NULL AND v <> " SIMBA__MY_VERSION " THEN\n"
    "    SET @simba_msg = CONCAT('table {N} has schema version ', v, ', this simba_mysql.h uses version " SIMBA__MY_VERSION
    ": run one version of simba on a table (or give this program another table)');\n"
    "    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = @simba_msg;\n"
    "  END IF;\n"
    "  SELECT COUNT(*) INTO nb FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{N}_boot';\n"
    "  SELECT COUNT(*) INTO nt FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{N}';\n"
    "  IF nb = 0 THEN\n"
    "    CREATE TABLE {B} (id INT PRIMARY KEY, since_ms BIGINT NOT NULL, fence_floor BIGINT NOT NULL,\n"
    "      max_lease_ms BIGINT NOT NULL DEFAULT 0) ENGINE=MEMORY;\n"
    "  END IF;\n"
    /* a new store has nothing to protect; a store whose rows or marker went restarts it */
    "  IF v IS NULL AND nb = 0 THEN INSERT INTO {B} VALUES (1, 0, 0, 0);\n"
    "  ELSEIF v IS NOT NULL AND (nb = 0 OR nt = 0) THEN\n"
    "    INSERT INTO {B} VALUES (1, now_ms, now_ms * 1024, 0) ON DUPLICATE KEY UPDATE\n"
    "      since_ms = VALUES(since_ms), fence_floor = GREATEST(fence_floor, VALUES(fence_floor));\n"
    "  END IF;\n"
    "END;\n"
    "CREATE TABLE IF NOT EXISTS {T} (name VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin PRIMARY KEY,\n"
    "  owner VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',\n"
    "  fence BIGINT NOT NULL DEFAULT 0, acquired_ms BIGINT NOT NULL DEFAULT 0, ttl_ms BIGINT NOT NULL DEFAULT 0,\n"
    "  transition_ms BIGINT NOT NULL DEFAULT 0, value BLOB NOT NULL DEFAULT '', seq BIGINT NOT NULL DEFAULT 0,\n"
    "  permits INT NOT NULL DEFAULT 0, pending TINYINT NOT NULL DEFAULT 0) ENGINE=InnoDB;\n"
    /* the sentinel row (''): a table set up before and found without it was emptied */
    "INSERT INTO {B} SELECT 1, " SIMBA__MY_NOW ", " SIMBA__MY_NOW " * 1024, 0 FROM DUAL WHERE EXISTS (SELECT 1 FROM {M}\n"
    "  WHERE k = 'version') AND NOT EXISTS (SELECT 1 FROM {T} WHERE name = '') ON DUPLICATE KEY UPDATE\n"
    "  since_ms = GREATEST(since_ms, VALUES(since_ms)), fence_floor = GREATEST(fence_floor, VALUES(fence_floor));\n"
    "INSERT IGNORE INTO {T} (name) VALUES ('');\n"
    "CREATE TABLE IF NOT EXISTS {Q} (name VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n"
    "  contender VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, seq BIGINT NOT NULL,\n"
    "  expires_ms BIGINT NOT NULL, ttl_ms BIGINT NOT NULL, tr_ms BIGINT NOT NULL, value BLOB NOT NULL,\n"
    "  bell VARCHAR(80) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '', shared TINYINT NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY (name, contender), KEY (name, seq)) ENGINE=InnoDB;\n"
    /* rows that vanish take their fences and maybe a live lease: the floor rises, and a
       live lease among them starts the quarantine now */
    "CREATE TABLE IF NOT EXISTS {S} (name VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n"
    "  contender VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, shared TINYINT NOT NULL DEFAULT 0,\n"
    "  fence BIGINT NOT NULL, acquired_ms BIGINT NOT NULL, ttl_ms BIGINT NOT NULL, transition_ms BIGINT NOT NULL,\n"
    "  value BLOB NOT NULL, PRIMARY KEY (name, contender)) ENGINE=InnoDB;\n"
    "CREATE TABLE IF NOT EXISTS {O} (name VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n"
    "  bell VARCHAR(80) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, expires_ms BIGINT NOT NULL,\n"
    "  PRIMARY KEY (name, bell)) ENGINE=InnoDB;\n"
    "CREATE TRIGGER IF NOT EXISTS {K} AFTER DELETE ON {T} FOR EACH ROW\n"
    "  UPDATE {B} SET fence_floor = GREATEST(fence_floor, OLD.fence + 1), since_ms = IF(OLD.owner <> ''\n"
    "    AND OLD.transition_ms >= " SIMBA__MY_NOW ", GREATEST(since_ms, " SIMBA__MY_NOW "), since_ms) WHERE id = 1;\n",
    SIMBA__MY_ACQ_HEAD, SIMBA__MY_DECL, SIMBA__MY_ACQ, SIMBA__MY_ACQ_B ";\n",
    SIMBA__MY_REL_HEAD, SIMBA__MY_DECL, SIMBA__MY_REL ";\n",
    SIMBA__MY_READ_HEAD, SIMBA__MY_DECL, SIMBA__MY_READ ";\n",
    SIMBA__MY_VAL_HEAD, SIMBA__MY_DECL, SIMBA__MY_VAL ";\n",
    SIMBA__MY_YIELD_HEAD, SIMBA__MY_DECL, SIMBA__MY_YIELD, SIMBA__MY_YIELD_B ";\n",
    SIMBA__MY_FORCE ";\n",
    SIMBA__MY_BELL_FN ";\n",
    SIMBA__MY_FAN_FN ";\n",
    SIMBA__MY_GRANT_FN_HEAD, SIMBA__MY_GRANT_FN ";\n",
    SIMBA__MY_SET_HEAD, SIMBA__MY_DECL, SIMBA__MY_SET_A, SIMBA__MY_SET_B, SIMBA__MY_SET_C ";\n",
    SIMBA__MY_CHECK_FENCE ";\n",
    SIMBA__MY_VERSION_FN ";\n",
    "INSERT IGNORE INTO {M} VALUES ('version', " SIMBA__MY_VERSION ");\n"
    /* the check before the lock goes: information_schema skips a table that another
       creator's DDL holds (CREATE TRIGGER IF NOT EXISTS locks it even when it exists) */
    "CALL {C}();\n"
    "DO RELEASE_LOCK('simba_setup_{N}')",
    NULL};

/* Inspection: name, owner, fence, acquired, held, ttl left, transition left, value (hex),
   then for one mutex its live waiters' count and the first SIMBA_VIEW_WAITERS ids. */
#define SIMBA__MY_VIEW_COLS                                                                       \
    "SELECT name, owner, fence, acquired_ms, n.ms - acquired_ms, ttl_ms - n.ms, transition_ms - n.ms, HEX(value)"
/* A mutex's holdings of the set, oldest grant first, each "id fence shared acquired held ttl
   tr x<value in hex>" (ids and hex hold no space); then its permits. */
#define SIMBA__MY_HOLDINGS                                                                        \
    ", (SELECT COALESCE(GROUP_CONCAT(CONCAT(contender, ' ', fence, ' ', shared, ' ', acquired_ms, ' ', n.ms - acquired_ms,"    \
    " ' ', ttl_ms - n.ms, ' ', transition_ms - n.ms, ' x', HEX(value)) ORDER BY fence SEPARATOR ' '), '') FROM `%s_hold` s"  \
    " WHERE s.name = t.name AND s.transition_ms >= n.ms), permits"

typedef struct simba__my simba__my;

/* One request connection (see POOL): its session, its command in flight and its queue. */
typedef struct simba__myc {
    simba__my *p;
    MYSQL *my;
    int phase;                   /* SETUP: 0 the session and the check, 1 the setup */
    int need;                    /* the check found objects missing: the setup runs */
    int state, step, fd;
    int wait;                    /* MYSQL_WAIT_* bits the current step waits for, 0 none */
    int64_t wait_until;          /* MYSQL_WAIT_TIMEOUT: the step's own deadline */
    int ret_int;
    MYSQL *ret_my;
    MYSQL_RES *ret_res;
    int got;                     /* the current command's answer row was taken */
    int retries;                 /* deadlock retries of the current request */
    int was_up;
    simba_result step_rc;        /* the current command's failure (0 none) */
    int64_t backoff, deadline, retry_at;
    simba_req *cur;              /* the request in flight */
    simba_req *head[2], *tail[2]; /* queued: [0] renewals, sent first (POOL); [1] the others */
    char *q;                     /* the current command's text */
    size_t qcap;
    simba_reply rep;
    char owner_buf[SIMBA_ID_MAX + 1];
    char err[512];
    simba_result down_rc; /* DOWN: what requests fail with (SIMBA_ECONN, or SIMBA_EDENIED) */
    unsigned char val[SIMBA_VALUE_MAX];
} simba__myc;

struct simba__my {
    simba_loop *loop;
    simba_backend *be;
    simba__myc *c;               /* the request connections; c[0] holds the doorbell's lock */
    int nc;
    char *check, *check_more, *setup; /* SETUP's scripts with the names filled in (>>version) */
    int bell_ok;                 /* the procedures' definer can ring this user's doorbell */
    char *host, *sock, *user, *pass, *db;
    char *ssl_ca, *ssl_cert, *ssl_key;
    int ssl_mode; /* SIMBA__MY_SSL_* */
    char table[SIMBA__MY_TABLE_MAX + 1];
    char fn[SIMBA__MY_TABLE_MAX + 16]; /* the fence check function */
    int port;
    int64_t conn_to, stmt_to, rmin, rmax;
    simba_view_holder hs[SIMBA__MY_VIEW_HOLDERS];            /* an inspection's holders (delivered in take) */
    unsigned char hs_vals[SIMBA__MY_VIEW_HOLDERS * SIMBA_VALUE_MAX]; /* ... and their values */
    /* the doorbell connection (see PUSH): parked in a tagged GET_LOCK on this session's lock */
    MYSQL *bmy, *bret_my;
    MYSQL_RES *bret_res;
    int bstate, bstep, bfd, bwait, bret_int;
    int64_t buntil, bdeadline, bretry, bbackoff;
    uint64_t wakes;        /* doorbell rings heard (tests) */
    char bell[96];         /* "<connection id>:<token>" while parked, else "" */
    char token[40], bq[160], bdq[80];
    int bdoor; /* the doorbell's session holds 'simba-door:<token>' (rings find it by it) */
    int relock; /* the doorbell's lock is not c[0]'s session's: its next command takes it */
};

/* >>row  Helpers: integers, hex. */
static int simba__my_int(const char *s, int64_t *out) {
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

static int simba__my_nibble(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int simba__my_unhex(const char *hex, unsigned char *out, size_t *len, char *err, size_t errcap) {
    size_t n = hex ? strlen(hex) : 0, i;
    *len = 0;
    if (n % 2) { snprintf(err, errcap, "mysql: the owner's value is not hex"); return -1; }
    if (n / 2 > SIMBA_VALUE_MAX) {
        snprintf(err, errcap, "mysql: the owner's value is %zu bytes, over SIMBA_VALUE_MAX %d of this build: build every "
                 "program on the table with the same SIMBA_VALUE_MAX", n / 2, SIMBA_VALUE_MAX);
        return -1;
    }
    for (i = 0; i < n; i += 2) {
        int hi = simba__my_nibble(hex[i]), lo = simba__my_nibble(hex[i + 1]);
        if (hi < 0 || lo < 0) { snprintf(err, errcap, "mysql: the owner's value is not hex"); return -1; }
        out[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    *len = n / 2;
    return 0;
}

/* The refusals coded in o_first (quarantine 2, max_lease_ms mismatch 3) into out. */
static void simba__my_refusal(int64_t kind, const int64_t *n, simba_reply *out, char *err, size_t errcap) {
    if (kind == 2)
        snprintf(err, errcap, "mysql: quarantine: the server lost its loss marker (a restart, a failover or a restored "
                 "backup) or rows were deleted under a live lease, so an owner may not know it lost: no new owner for "
                 "%lld ms more", (long long)n[0]);
    else
        snprintf(err, errcap, "mysql: max_lease_ms mismatch: the table's loss marker holds %lld ms, this process uses "
                 "%lld ms; every process on a table must use the same max_lease_ms", (long long)n[0], (long long)n[1]);
    simba__reply_fail(out, SIMBA_EBACKEND, err);
    if (kind == 2) out->quarantine_ms = n[0]; /* the core asks again when it ends */
}

/* One answer row into a reply; 0, or -1 with err set. Checks every field: a value that does
   not parse never becomes an owner. */
static int simba__my_parse_row(unsigned nf, char **vals, simba_reply *out, char *owner_buf, unsigned char *val_buf, char *err,
                               size_t errcap) {
    int64_t n[6];
    int i;
    simba__reply_none(out);
    if (nf != 8) { snprintf(err, errcap, "mysql: answer has %u columns, expected 8", nf); return -1; }
    for (i = 0; i < 6; i++)
        if (!vals[i + 1] || simba__my_int(vals[i + 1], &n[i]) != 0) {
            snprintf(err, errcap, "mysql: answer column %d is not an integer", i + 2);
            return -1;
        }
    if (!vals[0] || n[5] <= 0) { snprintf(err, errcap, "mysql: answer without owner column or server clock"); return -1; }
    if (n[4] == 2 || n[4] == 3) {
        if (vals[0][0] || n[0] < 0 || n[0] > SIMBA_MAX_MS) { snprintf(err, errcap, "mysql: refusal out of range"); return -1; }
        simba__my_refusal(n[4], n, out, err, errcap);
        return 0;
    }
    if (n[4] == 6) { /* another N than the name's while anyone holds or waits */
        simba__reply_conflict(out, err, errcap, n[1], n[0]);
        return 0;
    }
    if (n[4] < 0 || n[4] > 5) { snprintf(err, errcap, "mysql: first_in_line must be 0 to 6"); return -1; }
    out->first_in_line = n[4] == 1;
    out->yielded = n[4] == 5;
    if (n[4] == 4) out->rc = SIMBA_EFENCE; /* the fence no longer holds: the row says who holds it */
    if (!vals[0][0]) return 0;
    if (simba_id_check(vals[0]) != SIMBA_OK) { snprintf(err, errcap, "mysql: stored owner id is not a valid contender id"); return -1; }
    if (n[0] > SIMBA_MAX_MS || n[1] > SIMBA_MAX_MS || n[0] < -SIMBA_MAX_MS || n[1] < 0 || n[1] < n[0] || n[2] < 0 ||
        n[2] > SIMBA_MAX_MS || n[3] <= 0) {
        snprintf(err, errcap, "mysql: owner row out of range (ttl %lld, transition %lld, held %lld, fence %lld)",
                 (long long)n[0], (long long)n[1], (long long)n[2], (long long)n[3]);
        return -1;
    }
    if (simba__my_unhex(vals[7], val_buf, &out->value_len, err, errcap) != 0) return -1;
    out->value = out->value_len > 0 ? val_buf : NULL;
    simba__copy(owner_buf, SIMBA_ID_MAX + 1, vals[0]);
    out->owner = owner_buf;
    out->ttl_left_ms = n[0];
    out->transition_left_ms = n[1];
    out->held_ms = n[2];
    out->fence = (uint64_t)n[3];
    return 0;
}

/* >>inspect  One inspection row into a view; 0, or -1. */
static int simba__my_view_row(unsigned nf, char **c, simba_view *v, unsigned char *val_buf, char *err, size_t errcap) {
    int64_t n[6];
    int i;
    memset(v, 0, sizeof *v);
    if (nf < 8 || !c[0] || !c[1]) return -1;
    for (i = 0; i < 5; i++)
        if (simba__my_int(c[i + 2], &n[i]) != 0) return -1;
    if (strlen(c[0]) > SIMBA_NAME_MAX || strlen(c[1]) > SIMBA_ID_MAX) return -1;
    simba__copy(v->mutex, sizeof v->mutex, c[0]);
    v->fence = (uint64_t)n[0];
    v->acquired_unix_ms = v->held_ms = v->ttl_left_ms = v->transition_left_ms = v->lease_ms = SIMBA_UNKNOWN_MS;
    v->waiters = -1;
    if (c[1][0] && n[4] >= 0) { /* a lease fully over is nobody's */
        simba__copy(v->owner, sizeof v->owner, c[1]);
        v->acquired_unix_ms = n[1];
        v->held_ms = n[2];
        v->ttl_left_ms = n[3];
        v->transition_left_ms = n[4];
        if (simba__my_unhex(c[7], val_buf, &v->value_len, err, errcap) != 0) return -1;
        v->value = v->value_len > 0 ? val_buf : NULL;
    }
    if (nf >= 10) { /* one mutex: its line */
        const char *w = c[9] ? c[9] : "";
        int k = 0;
        if (simba__my_int(c[8], &n[5]) != 0) return -1;
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

/* One holding of the set from *w ("id fence shared acquired held ttl tr x<hex>", then a space
   or the end) into h, its value into vals; *w moves past it. -1: unreadable. */
static int simba__my_view_holding(const char **w, simba_view_holder *h, unsigned char *vals, char *err, size_t errcap) {
    const char *c = *w;
    int64_t f[6];
    size_t len = strcspn(c, " ");
    char num[24], hex[2 * SIMBA_VALUE_MAX + 1];
    int i;
    memset(h, 0, sizeof *h);
    if (len == 0 || len > SIMBA_ID_MAX) return -1;
    memcpy(h->id, c, len);
    c += len;
    for (i = 0; i < 6; i++) {
        if (*c++ != ' ' || (len = strcspn(c, " ")) == 0 || len >= sizeof num) return -1;
        memcpy(num, c, len);
        num[len] = 0;
        if (simba__my_int(num, &f[i]) != 0) return -1;
        c += len;
    }
    if (c[0] != ' ' || c[1] != 'x' || (len = strcspn(c + 2, " ")) >= sizeof hex) return -1;
    memcpy(hex, c + 2, len);
    hex[len] = 0;
    if (simba__my_unhex(hex, vals, &h->value_len, err, errcap) != 0) return -1;
    h->value = h->value_len > 0 ? vals : NULL;
    c += 2 + len;
    *w = c + (*c == ' ');
    h->fence = (uint64_t)f[0];
    h->shared = f[1] != 0;
    h->acquired_unix_ms = f[2];
    h->held_ms = f[3];
    h->ttl_left_ms = f[4];
    h->transition_left_ms = f[5];
    return 0;
}

/* A view's holders: the owner row's holder, then the set's (column 11), and the permits
   (column 12); with no live owner the view shows the holding that frees first. hs has
   room for SIMBA__MY_VIEW_HOLDERS, vals for their values. */
static int simba__my_view_holders(char **c, simba_view *v, simba_view_holder *hs, unsigned char *vals, char *err, size_t errcap) {
    const char *w = c[10] ? c[10] : "";
    int n = 0;
    int64_t permits;
    if (!c[11] || simba__my_int(c[11], &permits) != 0) return -1;
    if (v->owner[0]) simba__view_owner_holder(v, &hs[n++]); /* a mutex's owner or a writer */
    while (*w && n < SIMBA__MY_VIEW_HOLDERS) {
        if (simba__my_view_holding(&w, &hs[n], vals + (size_t)n * SIMBA_VALUE_MAX, err, errcap) != 0) return -1;
        n++;
    }
    simba__view_holders(v, hs, n, (int)permits);
    return 0;
}

static int simba__my_inspection(simba_op op) {
    return op == SIMBA_OP_INSPECT || op == SIMBA_OP_LIST || op == SIMBA_OP_FORCE_RELEASE;
}

/* A stored result of the current command: the answer row (or, for an inspection, each row
   as a view). Only the first result with rows counts: a CALL's status result has none. */
static void simba__my_take(simba__myc *c, MYSQL_RES *res) {
    simba__my *p = c->p;
    simba_req *r = c->cur;
    unsigned nf = mysql_num_fields(res);
    MYSQL_ROW row;
    if (c->got || !r) return;
    c->got = 1;
    if (r->op == SIMBA_OP_FORCE_RELEASE) {
        row = mysql_fetch_row(res);
        c->rep.rc = row && row[0] && strcmp(row[0], "1") == 0 ? SIMBA_OK : SIMBA_EFENCE;
        return;
    }
    if (simba__my_inspection(r->op)) {
        while ((row = mysql_fetch_row(res)) != NULL) {
            simba_view v;
            unsigned char vb[SIMBA_VALUE_MAX];
            if (simba__my_view_row(nf, row, &v, vb, c->err, sizeof c->err) != 0 ||
                (nf >= 12 && simba__my_view_holders(row, &v, p->hs, p->hs_vals, c->err, sizeof c->err) != 0)) {
                snprintf(c->err, sizeof c->err, "mysql: unreadable row of an inspection");
                simba__reply_fail(&c->rep, SIMBA_EBACKEND, c->err);
                return;
            }
            simba_req_view(r, &v);
        }
        return;
    }
    if (mysql_num_rows(res) != 1 || (row = mysql_fetch_row(res)) == NULL) {
        snprintf(c->err, sizeof c->err, "mysql: statement returned %llu rows, expected 1", (unsigned long long)mysql_num_rows(res));
        simba__reply_fail(&c->rep, SIMBA_EBACKEND, c->err);
        return;
    }
    if (simba__my_parse_row(nf, row, &c->rep, c->owner_buf, c->val, c->err, sizeof c->err) != 0)
        simba__reply_fail(&c->rep, SIMBA_EBACKEND, c->err);
}

/* >>version  The check's row ({C}): the version, whether everything is there, whether the
   doorbell can ring. Another version is refused in words (SIMBA_EDENIED in p->rep.rc). */
static void simba__my_version(simba__myc *c, MYSQL_RES *res) {
    simba__my *p = c->p;
    MYSQL_ROW row = mysql_num_fields(res) == 4 ? mysql_fetch_row(res) : NULL;
    int64_t v = -1;
    if (!row || !row[0] || !row[1] || !row[2] || simba__my_int(row[0], &v) != 0) {
        snprintf(c->err, sizeof c->err, "mysql: the schema check of table %s answered no readable row", p->table);
        c->rep.rc = SIMBA_EBACKEND;
    } else if (v != 0 && v != SIMBA__MY_SCHEMA_VERSION) {
        snprintf(c->err, sizeof c->err, "mysql: found simba schema version %lld on table %s, this simba_mysql.h uses version %d: "
                 "run one version of simba on a table, or give this one another table (simba_mysql_desc.table, ?table= in "
                 "its URL)", (long long)v, p->table, SIMBA__MY_SCHEMA_VERSION);
        c->rep.rc = SIMBA_EDENIED;
    } else if (strcmp(row[1], "1") != 0 || v == 0) {
        if (c->phase == 0) c->need = 1;
        else {
            snprintf(c->err, sizeof c->err, "mysql: the setup of table %s left objects missing", p->table);
            c->rep.rc = SIMBA_EBACKEND;
        }
    }
    if (c->rep.rc != SIMBA_OK) simba__copy(p->be->errmsg, sizeof p->be->errmsg, c->err);
    p->bell_ok = row && row[2] && strcmp(row[2], "1") == 0;
}

/* >>sql  A command's text: the CALL of a request, names escaped, values as hex literals. */
static int simba__my_reserve(simba__myc *c, size_t need) {
    simba__my *p = c->p;
    char *q;
    if (need <= c->qcap) return 1;
    q = (char *)simba_alloc(p->loop, need);
    if (!q) return 0;
    simba_free(p->loop, c->q);
    c->q = q;
    c->qcap = need;
    return 1;
}

static void simba__my_esc(simba__myc *c, char *dst, const char *s) {
    mysql_real_escape_string(c->my, dst, s, (unsigned long)strlen(s));
}

static void simba__my_hex(char *out, const unsigned char *v, size_t n) {
    static const char digits[] = "0123456789abcdef";
    size_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = digits[v[i] >> 4];
        out[2 * i + 1] = digits[v[i] & 15];
    }
    out[2 * n] = 0;
}

/* The doorbell a waiter's place carries: "" while it is not parked (timers only). */
static const char *simba__my_bell(const simba__my *p) { return p->bstate == SIMBA__MY_B_PARKED ? p->bell : ""; }

/* The text of r into p->q; 0 when out of memory. */
static int simba__my_command(simba__myc *c, simba_req *r) {
    simba__my *p = c->p;
    char name[2 * SIMBA_NAME_MAX + 1], id[2 * SIMBA_ID_MAX + 1], hex[2 * SIMBA_VALUE_MAX + 1];
    const char *t = p->table;
    char *q;
    size_t cap, o = 0;
    if (!simba__my_reserve(c, 3 * SIMBA_VALUE_MAX + 2048)) return 0;
    if (c == p->c && p->relock) /* the doorbell found this session's lock free (PUSH): take it again */
        o = (size_t)snprintf(c->q, c->qcap, "DO GET_LOCK('simba-bell:%s', 1); ", p->token);
    if (c == p->c) p->relock = 0;
    q = c->q + o;
    cap = c->qcap - o;
    simba__my_esc(c, name, r->mutex ? r->mutex : "");
    simba__my_esc(c, id, r->contender ? r->contender : "");
    simba__my_hex(hex, r->value ? r->value : (const unsigned char *)"", r->value ? r->value_len : 0);
    switch (r->op) {
    case SIMBA_OP_ACQUIRE:
        if (r->permits > 1 || r->shared) {
            snprintf(q, cap, "CALL `%s_sacq`('%s', '%s', %lld, %lld, %lld, %d, '%s', X'%s', %d, %d)", t, name, id,
                     (long long)r->ttl_ms, (long long)r->transition_ms, (long long)r->live_ms, r->renew ? 1 : 0,
                     simba__my_bell(p), hex, r->permits, r->shared ? 1 : 0);
            break;
        }
        snprintf(q, cap, "CALL `%s_acq`('%s', '%s', %lld, %lld, %lld, %d, '%s', X'%s')", t, name, id,
                 (long long)r->ttl_ms, (long long)r->transition_ms, (long long)r->live_ms, r->renew ? 1 : 0, simba__my_bell(p), hex);
        break;
    case SIMBA_OP_RELEASE: snprintf(q, cap, "CALL `%s_rel`('%s', '%s')", t, name, id); break;
    case SIMBA_OP_READ: snprintf(q, cap, "CALL `%s_read`('%s', '%s')", t, name, simba__my_bell(p)); break;
    case SIMBA_OP_SET_VALUE:
        snprintf(q, cap, "CALL `%s_val`('%s', '%s', %llu, X'%s')", t, name, id, (unsigned long long)r->fence, hex);
        break;
    case SIMBA_OP_YIELD:
        snprintf(q, cap, "CALL `%s_yield`('%s', '%s', %llu, %lld, %lld, %lld, '%s')", t, name, id,
                 (unsigned long long)r->fence, (long long)r->live_ms, (long long)r->ttl_ms, (long long)r->transition_ms,
                 simba__my_bell(p));
        break;
    case SIMBA_OP_FORCE_RELEASE:
        snprintf(q, cap, "CALL `%s_force`('%s', %llu)", t, name, (unsigned long long)r->fence);
        break;
    case SIMBA_OP_INSPECT:
        snprintf(q, cap, SIMBA__MY_VIEW_COLS ", (SELECT COUNT(*) FROM `%s_q` WHERE name = '%s' AND expires_ms >= n.ms),"
                 " (SELECT GROUP_CONCAT(contender ORDER BY seq SEPARATOR ' ') FROM (SELECT contender, seq FROM `%s_q`"
                 " WHERE name = '%s' AND expires_ms >= (" SIMBA__MY_NOW ") ORDER BY seq LIMIT %d) w)" SIMBA__MY_HOLDINGS
                 " FROM `%s` t, (SELECT " SIMBA__MY_NOW " AS ms) n WHERE name = '%s'",
                 t, name, t, name, SIMBA_VIEW_WAITERS, t, t, name);
        break;
    default: /* LIST: no queue read */
        snprintf(q, cap, SIMBA__MY_VIEW_COLS ", -1, ''" SIMBA__MY_HOLDINGS " FROM `%s` t, (SELECT " SIMBA__MY_NOW
                 " AS ms) n WHERE name <> '' ORDER BY name", t, t); /* '': the sentinel (see LOSSES) */
        break;
    }
    return 1;
}

/* >>conn  What this role lacks, from the server's error (see PRIVILEGES); NULL: the words say it. */
static const char *simba__my_privilege(unsigned e, const char *msg) {
    if (e == 1370) return "EXECUTE on that routine";
    if (e == 1044) return "EXECUTE on simba's procedures in that database (docs/mysql.md, Privileges)";
    if ((e == 1142 || e == 1143) && strncmp(msg, "SELECT", 6) == 0) return "SELECT on that table (inspection: get, ls)";
    return NULL;
}

static void simba__my_set_err(simba__myc *c, const char *what) {
    simba__my *p = c->p;
    unsigned e = c->my ? mysql_errno(c->my) : 0;
    const char *m = c->my ? mysql_error(c->my) : "out of memory", *priv = simba__my_privilege(e, m);
    /* the server says "denied" before it says "does not exist" */
    if (c->state == SIMBA__MY_SETUP && c->phase == 0 && e == 1370)
        priv = "EXECUTE on it (docs/mysql.md, Privileges), or simba was never set up on this table: run the setup once as "
               "the role that owns the objects";
    if (c->state == SIMBA__MY_SETUP && c->phase == 1 && (e == 1044 || e == 1142 || e == 1370 || e == 1227))
        snprintf(c->err, sizeof c->err, "mysql: simba's objects for table %s are missing or incomplete, and this role may not "
                 "make them: %s (%u) (run the setup once as the role that owns them; docs/mysql.md, Privileges)", p->table, m, e);
    else snprintf(c->err, sizeof c->err, "mysql: %s: %s (%u)%s%s", what, m, e, priv ? ": this role needs " : "", priv ? priv : "");
    simba__copy(p->be->errmsg, sizeof p->be->errmsg, c->err);
}

static void simba__my_fail_all(simba__myc *c, simba_result rc, const char *msg) {
    simba_req *r = c->cur;
    c->cur = NULL;
    if (r) simba_req_fail(r, rc, msg);
    while (c->head[0] || c->head[1]) {
        int k = c->head[0] ? 0 : 1;
        r = c->head[k];
        c->head[k] = r->next_;
        if (!c->head[k]) c->tail[k] = NULL;
        simba_req_fail(r, rc, msg);
    }
}

/* The loop's watcher follows the socket, which may change at any step of the connect. */
static void simba__my_fd(simba__myc *c) {
    simba__my *p = c->p;
    int fd = c->my ? (int)mysql_get_socket(c->my) : -1;
    if (fd != c->fd && c->fd >= 0) simba_backend_fd(p->be, c->fd, 0);
    c->fd = fd;
}

static void simba__my_close(simba__myc *c) {
    simba__my *p = c->p;
    if (c->fd >= 0) simba_backend_fd(p->be, c->fd, 0);
    c->fd = -1;
    if (c->my) mysql_close(c->my); /* a QUIT packet into the socket's buffer: never waits */
    c->my = NULL;
    c->wait = 0;
    c->ret_res = NULL;
}

/* A refusal that no retry mends: access denied, an unknown database, a missing privilege,
   an expired password. */
static int simba__my_denied(unsigned e) {
    return e == 1044 || e == 1045 || e == 1049 || e == 1142 || e == 1143 || e == 1227 || e == 1370 || e == 1698 || e == 1862;
}

/* Closes the connection, fails what is in flight or queued, schedules the next attempt. */
static void simba__my_drop(simba__myc *c, int64_t now, simba_result rc) {
    simba__my *p = c->p;
    int was_ready = c->state == SIMBA__MY_READY;
    c->down_rc = rc == SIMBA_EDENIED ? SIMBA_EDENIED : SIMBA_ECONN;
    simba__my_close(c);
    c->state = SIMBA__MY_DOWN;
    /* from the clock, not the poll's start: a TLS handshake may have held this poll (TLS) */
    now = simba__max(now, simba_now(p->loop));
    c->retry_at = simba__add(now, simba__backoff(p->loop, &c->backoff, p->rmin, p->rmax));
    simba_log(p->loop, SIMBA_LOG_WARN, "%s (next attempt in %lld ms)", c->err, (long long)(c->retry_at - now));
    simba__my_fail_all(c, rc, c->err);
    /* Losing the connection is losing the server: the core's policy decides. */
    if (was_ready) simba_backend_event(p->be, SIMBA_EV_DISCONNECTED, NULL, NULL, NULL);
}

static void simba__my_run(simba__myc *c, int64_t now, int ready);

/* TLS options of one connection (both: the requests' and the doorbell's). */
static void simba__my_tls(const simba__my *p, MYSQL *m) {
    my_bool on = 1;
    if (p->ssl_mode == SIMBA__MY_SSL_OFF) return;
    mysql_options(m, MYSQL_OPT_SSL_ENFORCE, &on);
    if (p->ssl_ca) mysql_options(m, MYSQL_OPT_SSL_CA, p->ssl_ca);
    if (p->ssl_cert) mysql_options(m, MYSQL_OPT_SSL_CERT, p->ssl_cert);
    if (p->ssl_key) mysql_options(m, MYSQL_OPT_SSL_KEY, p->ssl_key);
    if (p->ssl_mode == SIMBA__MY_SSL_VERIFY_IDENTITY) mysql_options(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
}

static void simba__my_start(simba__myc *c, int64_t now) {
    simba__my *p = c->p;
    unsigned int zero = 0, to = (unsigned int)((p->conn_to + 999) / 1000);
    my_bool off = 0;
    c->my = mysql_init(NULL);
    c->deadline = simba__add(now, p->conn_to);
    if (!c->my || mysql_options(c->my, MYSQL_OPT_NONBLOCK, 0) != 0) {
        snprintf(c->err, sizeof c->err, "mysql: no non-blocking connection (out of memory)");
        simba__my_drop(c, now, SIMBA_ECONN);
        return;
    }
    mysql_options(c->my, MYSQL_OPT_RECONNECT, &off); /* simba reconnects, and sets the session up again */
    mysql_options(c->my, MYSQL_OPT_CONNECT_TIMEOUT, &to);
    mysql_options(c->my, MYSQL_OPT_LOCAL_INFILE, &zero);
    mysql_options(c->my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    simba__my_tls(p, c->my);
    c->state = SIMBA__MY_CONNECTING;
    c->step = SIMBA__MY_S_CONNECT;
    simba__my_run(c, now, 0);
}

/* The next queued request goes out (READY, nothing in flight). */
static void simba__my_send_next(simba__myc *c, int64_t now) {
    simba__my *p = c->p;
    simba_req *r;
    int k = c->head[0] ? 0 : 1;
    if (c->state != SIMBA__MY_READY || c->cur || !c->head[k]) return;
    r = c->head[k];
    c->head[k] = r->next_;
    if (!c->head[k]) c->tail[k] = NULL;
    if (!simba__my_command(c, r)) {
        simba_req_fail(r, SIMBA_ENOMEM, "mysql: out of memory");
        return;
    }
    c->cur = r;
    c->retries = 0;
    c->deadline = simba__add(now, p->stmt_to);
    c->step = SIMBA__MY_S_QUERY;
    memset(&c->rep, 0, sizeof c->rep);
    c->got = 0;
    c->step_rc = SIMBA_OK;
    simba__my_run(c, now, 0);
}

/* A command is over (every result read): answer it, or set up, then send the next. */
static void simba__my_done(simba__myc *c, int64_t now) {
    simba__my *p = c->p;
    simba_req *r = c->cur;
    if (c->state == SIMBA__MY_SETUP) {
        if (c->rep.rc != SIMBA_OK) { simba__my_drop(c, now, c->rep.rc); return; }
        if (c->need) { /* objects missing: the setup, once, as their owner */
            c->phase = 1;
            c->need = 0;
            c->step = SIMBA__MY_S_QUERY;
            simba__my_run(c, now, 0);
            return;
        }
        c->state = SIMBA__MY_READY;
        c->backoff = 0;
        c->err[0] = 0;
        if (c == p->c) { /* the first connection speaks for all */
            simba_log(p->loop, p->bell_ok ? SIMBA_LOG_INFO : SIMBA_LOG_WARN, "mysql: push by %s%s", p->bell_ok ? "doorbell" : "timers",
                      p->bell_ok ? "" : ": the procedures' definer may not interrupt this user's queries (CONNECTION ADMIN "
                      "or SUPER; docs/mysql.md, Privileges)");
            p->relock = 0; /* the check took the doorbell's lock */
            simba_log(p->loop, SIMBA_LOG_INFO, "mysql: connected, set up table %s", p->table);
        }
        if (c->was_up) simba_backend_event(p->be, SIMBA_EV_RESET, NULL, NULL, NULL);
        c->was_up = 1;
    } else if (r) {
        c->cur = NULL;
        if (!c->got && c->rep.rc == SIMBA_OK) {
            snprintf(c->err, sizeof c->err, "mysql: command gave no answer row");
            simba__reply_fail(&c->rep, SIMBA_EBACKEND, c->err);
        }
        if (c->rep.rc == SIMBA_EFENCE && !simba__my_inspection(r->op)) {
            snprintf(c->err, sizeof c->err, "mysql %s: %.128s no longer holds mutex %.128s with fence %llu",
                     r->op == SIMBA_OP_YIELD ? "yield" : "set_value", r->contender, r->mutex, (unsigned long long)r->fence);
            simba__reply_fail(&c->rep, SIMBA_EFENCE, c->err);
        }
        simba_req_done(r, &c->rep);
    }
    simba__my_send_next(c, now);
}

/* A server error of the current command: a deadlock or lock wait is sent again; a lost
   connection is dropped; anything else fails the request and the connection goes on. */
static void simba__my_error(simba__myc *c, int64_t now) {
    unsigned e = mysql_errno(c->my);
    if (c->state == SIMBA__MY_SETUP && c->phase == 0 && e == 1305) { /* no {C}: simba was never set up here */
        c->need = 1;
        simba__my_done(c, now);
        return;
    }
    simba__my_set_err(c, c->state == SIMBA__MY_SETUP ? "setup failed" : "statement failed");
    if (c->state == SIMBA__MY_SETUP && e == 1644) { /* the setup's refusal of another version */
        simba__my_drop(c, now, SIMBA_EDENIED);
        return;
    }
    if (c->state == SIMBA__MY_READY && c->cur && (e == 1213 || e == 1205) && ++c->retries <= SIMBA__MY_RETRIES &&
        !mysql_more_results(c->my)) {
        c->step = SIMBA__MY_S_QUERY;
        c->got = 0;
        memset(&c->rep, 0, sizeof c->rep);
        simba__my_run(c, now, 0);
        return;
    }
    if (c->state != SIMBA__MY_READY || e >= 2000 || mysql_more_results(c->my)) { /* CR_* client errors: the link */
        simba__my_drop(c, now, simba__my_denied(e) ? SIMBA_EDENIED : c->state == SIMBA__MY_READY ? SIMBA_EBACKEND : SIMBA_ECONN);
        return;
    }
    simba__reply_fail(&c->rep, simba__my_denied(e) ? SIMBA_EDENIED : SIMBA_EBACKEND, c->err);
    c->got = 1;
    simba__my_done(c, now);
}

/* Connector/C leaves the socket blocking after a TLS handshake, and its TLS reads then wait
   in read(2) inside a poll: the socket goes back to non-blocking once connected. */
static void simba__my_nonblock(MYSQL *m) {
    int fd = (int)mysql_get_socket(m), fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (fl >= 0 && !(fl & O_NONBLOCK)) (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* >>step  One non-blocking call of the current step: 0 when it finished, else the
   MYSQL_WAIT_* bits it waits for. */
static int simba__my_call(simba__myc *c, int ready) {
    simba__my *p = c->p;
    switch (c->step) {
    case SIMBA__MY_S_CONNECT:
        return ready ? mysql_real_connect_cont(&c->ret_my, c->my, ready)
                     : mysql_real_connect_start(&c->ret_my, c->my, p->host, p->user, p->pass, p->db, (unsigned)p->port,
                                                p->sock, CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS);
    case SIMBA__MY_S_QUERY: {
        /* the first connection's check also takes the doorbell's lock */
        const char *q = c->state != SIMBA__MY_SETUP ? c->q : c->phase ? p->setup : c == p->c ? p->check : p->check_more;
        return ready ? mysql_real_query_cont(&c->ret_int, c->my, ready)
                     : mysql_real_query_start(&c->ret_int, c->my, q, (unsigned long)strlen(q));
    }
    case SIMBA__MY_S_STORE:
        return ready ? mysql_store_result_cont(&c->ret_res, c->my, ready) : mysql_store_result_start(&c->ret_res, c->my);
    default:
        return ready ? mysql_next_result_cont(&c->ret_int, c->my, ready) : mysql_next_result_start(&c->ret_int, c->my);
    }
}

/* What follows a finished step: 1 to go on with the next step, 0 when the command is over
   or failed (answered, dropped). */
static int simba__my_after(simba__myc *c, int64_t now) {
    switch (c->step) {
    case SIMBA__MY_S_CONNECT:
        if (!c->ret_my) {
            simba__my_set_err(c, "connect failed");
            simba__my_drop(c, now, simba__my_denied(mysql_errno(c->my)) ? SIMBA_EDENIED : SIMBA_ECONN);
            return 0;
        }
        simba__my_nonblock(c->my);
        c->state = SIMBA__MY_SETUP;
        c->phase = c->need = 0;
        memset(&c->rep, 0, sizeof c->rep);
        c->step = SIMBA__MY_S_QUERY;
        return 1;
    case SIMBA__MY_S_QUERY:
    case SIMBA__MY_S_NEXT:
        if (c->step == SIMBA__MY_S_NEXT && c->ret_int < 0) { simba__my_done(c, now); return 0; }
        if (c->ret_int != 0) { simba__my_error(c, now); return 0; }
        c->step = SIMBA__MY_S_STORE;
        return 1;
    default:
        if (c->ret_res) {
            if (c->state == SIMBA__MY_READY) simba__my_take(c, c->ret_res);
            else simba__my_version(c, c->ret_res);
            mysql_free_result(c->ret_res); /* a stored result: no I/O */
            c->ret_res = NULL;
        } else if (mysql_field_count(c->my) != 0) {
            simba__my_error(c, now);
            return 0;
        }
        if (!mysql_more_results(c->my)) { simba__my_done(c, now); return 0; }
        c->step = SIMBA__MY_S_NEXT;
        return 1;
    }
}

/* Runs the steps of the current command until one waits (its socket events and timer go
   to the loop) or the command is over. ready: the MYSQL_WAIT_* bits seen, 0 to start. */
static void simba__my_run(simba__myc *c, int64_t now, int ready) {
    for (;;) {
        int st = simba__my_call(c, ready);
        simba__my_fd(c);
        if (st) {
            c->wait = st;
            c->wait_until = (st & MYSQL_WAIT_TIMEOUT) ? simba__add(now, (int64_t)mysql_get_timeout_value_ms(c->my)) : INT64_MAX;
            return;
        }
        c->wait = 0;
        ready = 0;
        if (!simba__my_after(c, now)) return;
    }
}

/* >>bell  The doorbell connection (see PUSH): connect, park in the tagged GET_LOCK, and when a
   release interrupts it (or it ends) wake every waiter of this backend, then park again. */
static void simba__my_bell_close(simba__my *p, int64_t now) {
    if (p->bfd >= 0) simba_backend_fd(p->be, p->bfd, 0);
    p->bfd = -1;
    if (p->bmy) mysql_close(p->bmy);
    p->bmy = NULL;
    p->bwait = 0;
    p->bell[0] = 0;
    p->bstate = SIMBA__MY_B_DOWN;
    p->bretry = simba__add(now, simba__backoff(p->loop, &p->bbackoff, p->rmin, p->rmax));
}

static int simba__my_bell_call(simba__my *p, int ready) {
    if (p->bstep == SIMBA__MY_S_CONNECT)
        return ready ? mysql_real_connect_cont(&p->bret_my, p->bmy, ready)
                     : mysql_real_connect_start(&p->bret_my, p->bmy, p->host, p->user, p->pass, p->db, (unsigned)p->port,
                                                p->sock, 0);
    if (p->bstep == SIMBA__MY_S_QUERY) {
        const char *q = p->bdoor ? p->bq : p->bdq;
        return ready ? mysql_real_query_cont(&p->bret_int, p->bmy, ready)
                     : mysql_real_query_start(&p->bret_int, p->bmy, q, (unsigned long)strlen(q));
    }
    return ready ? mysql_store_result_cont(&p->bret_res, p->bmy, ready) : mysql_store_result_start(&p->bret_res, p->bmy);
}

/* A finished step of the doorbell: 1 to go on, 0 when it closed. */
static int simba__my_bell_after(simba__my *p, int64_t now) {
    int rung = 1, lost = 0;
    if (p->bstep == SIMBA__MY_S_CONNECT) {
        if (!p->bret_my) { simba__my_bell_close(p, now); return 0; }
        simba__my_nonblock(p->bmy);
        snprintf(p->bell, sizeof p->bell, "%lu:%s", (unsigned long)mysql_thread_id(p->bmy), p->token);
        p->bbackoff = 0;
        p->bdoor = 0;
        p->bstep = SIMBA__MY_S_QUERY;
        return 1;
    }
    if (p->bstep == SIMBA__MY_S_QUERY && p->bret_int == 0) {
        p->bstep = SIMBA__MY_S_STORE;
        return 1;
    }
    if (p->bstep == SIMBA__MY_S_QUERY && mysql_errno(p->bmy) != 1317) { /* not "interrupted": the link */
        simba__my_bell_close(p, now);
        return 0;
    }
    if (!p->bdoor) { /* the door lock: 1, or a stale session of ours still holds it */
        MYSQL_ROW row = p->bret_res ? mysql_fetch_row(p->bret_res) : NULL;
        p->bdoor = row && row[0] && strcmp(row[0], "1") == 0;
        if (p->bret_res) mysql_free_result(p->bret_res);
        p->bret_res = NULL;
        if (!p->bdoor) {
            simba__my_bell_close(p, now);
            return 0;
        }
        p->bstep = SIMBA__MY_S_QUERY;
        return 1;
    }
    if (p->bret_res) { /* a stored result: no I/O. NULL: interrupted, 0: its whole time, 1: free */
        MYSQL_ROW row = mysql_fetch_row(p->bret_res);
        lost = row && row[0] && strcmp(row[0], "1") == 0;
        rung = !(row && row[0] && strcmp(row[0], "0") == 0);
        mysql_free_result(p->bret_res);
    }
    p->bret_res = NULL;
    if (lost) { /* the request connection's session lost the lock: it takes it again first */
        p->relock = 1;
        simba__my_bell_close(p, now);
        return 0;
    }
    if (rung) {
        p->wakes++;
        simba_backend_event(p->be, SIMBA_EV_RELEASED, NULL, NULL, NULL); /* a hint: each waiter asks */
    }
    p->bstep = SIMBA__MY_S_QUERY;
    return 1;
}

static void simba__my_bell_run(simba__my *p, int64_t now, int ready) {
    for (;;) {
        int st = simba__my_bell_call(p, ready);
        int fd = (int)mysql_get_socket(p->bmy);
        if (fd != p->bfd && p->bfd >= 0) simba_backend_fd(p->be, p->bfd, 0);
        p->bfd = fd;
        if (st) {
            int parked = p->bstep != SIMBA__MY_S_CONNECT && p->bdoor;
            int fresh = p->bstate == SIMBA__MY_B_CONNECTING && parked;
            p->bwait = st;
            p->bstate = parked ? SIMBA__MY_B_PARKED : SIMBA__MY_B_CONNECTING;
            /* waiters queued without a doorbell ask once more, so that their places carry it */
            if (fresh) simba_backend_event(p->be, SIMBA_EV_RELEASED, NULL, NULL, NULL);
            p->buntil = (st & MYSQL_WAIT_TIMEOUT) ? simba__add(now, (int64_t)mysql_get_timeout_value_ms(p->bmy)) : INT64_MAX;
            return;
        }
        ready = 0;
        if (!simba__my_bell_after(p, now)) return;
    }
}

static void simba__my_bell_start(simba__my *p, int64_t now) {
    unsigned int to = (unsigned int)((p->conn_to + 999) / 1000);
    my_bool off = 0;
    p->bmy = mysql_init(NULL);
    if (!p->bmy || mysql_options(p->bmy, MYSQL_OPT_NONBLOCK, 0) != 0) {
        simba__my_bell_close(p, now);
        return;
    }
    mysql_options(p->bmy, MYSQL_OPT_RECONNECT, &off);
    mysql_options(p->bmy, MYSQL_OPT_CONNECT_TIMEOUT, &to);
    simba__my_tls(p, p->bmy);
    /* parked a minute at a time on the lock the request connection holds (it takes it in its
       session statement); got at once means that session lost it: released, and retaken */
    snprintf(p->bq, sizeof p->bq, "SELECT GET_LOCK('simba-bell:%.32s', 60), RELEASE_LOCK('simba-bell:%.32s')", p->token, p->token);
    /* first the door lock, which rings look up (a stale session of ours may hold it a moment) */
    snprintf(p->bdq, sizeof p->bdq, "SELECT GET_LOCK('simba-door:%.32s', 1)", p->token);
    p->bdoor = 0;
    p->bdeadline = simba__add(now, p->conn_to);
    p->bstep = SIMBA__MY_S_CONNECT;
    p->bstate = SIMBA__MY_B_CONNECTING;
    simba__my_bell_run(p, now, 0);
}

/* >>process */
static short simba__my_events(int wait) {
    return (short)(((wait & MYSQL_WAIT_READ) ? POLLIN : 0) | ((wait & MYSQL_WAIT_WRITE) ? POLLOUT : 0) |
                   ((wait & MYSQL_WAIT_EXCEPT) ? POLLPRI : 0));
}

/* The MYSQL_WAIT_* bits that happened on fd (waiting for wait, its timer until): from the
   poll's ready set, else a zero-timeout poll. */
static int simba__my_ready(int fd, int wait, int64_t until, const struct pollfd *ready, int n, int64_t now) {
    struct pollfd pf;
    int i, bits = 0;
    short rv = 0, ev = simba__my_events(wait);
    if (fd >= 0 && ev) {
        for (i = 0; ready && i < n; i++)
            if (ready[i].fd == fd) rv = ready[i].revents;
        if (!rv) {
            pf.fd = fd;
            pf.events = ev;
            pf.revents = 0;
            if (poll(&pf, 1, 0) > 0) rv = pf.revents;
        }
    }
    if (rv & (POLLIN | POLLHUP | POLLERR)) bits |= MYSQL_WAIT_READ;
    if (rv & (POLLOUT | POLLHUP | POLLERR)) bits |= MYSQL_WAIT_WRITE;
    if (rv & POLLPRI) bits |= MYSQL_WAIT_EXCEPT;
    bits &= wait;
    if ((wait & MYSQL_WAIT_TIMEOUT) && now >= until) bits |= MYSQL_WAIT_TIMEOUT;
    return bits;
}

static void simba__my_bell_process(simba__my *p, const struct pollfd *ready, int n, int64_t now) {
    int bits;
    if (p->bstate == SIMBA__MY_B_DOWN) {
        if (now >= p->bretry && p->c[0].state == SIMBA__MY_READY && p->bell_ok && !p->relock)
            simba__my_bell_start(p, now); /* after the setup, while this session holds the lock */
        return;
    }
    if (p->bwait && (bits = simba__my_ready(p->bfd, p->bwait, p->buntil, ready, n, now)) != 0) simba__my_bell_run(p, now, bits);
    if (p->bstate == SIMBA__MY_B_CONNECTING && now >= p->bdeadline) simba__my_bell_close(p, now);
}

static void simba__my_conn_process(simba__myc *c, const struct pollfd *ready, int n, int64_t now) {
    simba__my *p = c->p;
    int bits;
    if (c->state == SIMBA__MY_DOWN && now >= c->retry_at) simba__my_start(c, now);
    if (c->state == SIMBA__MY_DOWN) return;
    if (c->wait && (bits = simba__my_ready(c->fd, c->wait, c->wait_until, ready, n, now)) != 0) simba__my_run(c, now, bits);
    if (c->state != SIMBA__MY_DOWN && c->wait && now >= c->deadline) {
        int setup = c->state != SIMBA__MY_READY;
        snprintf(c->err, sizeof c->err, "mysql: %s not answered within %lld ms, connection recycled",
                 setup ? "connect and setup" : "statement", (long long)(setup ? p->conn_to : p->stmt_to));
        simba__copy(p->be->errmsg, sizeof p->be->errmsg, c->err);
        simba__my_drop(c, now, setup ? SIMBA_ECONN : SIMBA_ETIMEDOUT);
    }
}

static void simba__my_process(void *impl, const struct pollfd *ready, int n, int64_t now, unsigned flags) {
    simba__my *p = (simba__my *)impl;
    int i;
    (void)flags;
    simba__my_bell_process(p, ready, n, now);
    for (i = 0; i < p->nc; i++) simba__my_conn_process(&p->c[i], ready, n, now);
}

static int simba__my_fds(void *impl, struct pollfd *out, int cap) {
    simba__my *p = (simba__my *)impl;
    int k = 0, i;
    for (i = 0; i < p->nc; i++) {
        const simba__myc *c = &p->c[i];
        if (c->fd >= 0 && simba__my_events(c->wait)) {
            if (k < cap) out[k].fd = c->fd, out[k].events = simba__my_events(c->wait), out[k].revents = 0;
            k++;
        }
    }
    if (p->bmy && p->bfd >= 0 && simba__my_events(p->bwait)) {
        if (k < cap) out[k].fd = p->bfd, out[k].events = simba__my_events(p->bwait), out[k].revents = 0;
        k++;
    }
    return k;
}

static int64_t simba__my_deadline(void *impl) {
    simba__my *p = (simba__my *)impl;
    int64_t d = p->bstate == SIMBA__MY_B_DOWN ? (p->c[0].state == SIMBA__MY_READY ? p->bretry : INT64_MAX)
              : p->bstate == SIMBA__MY_B_CONNECTING ? simba__min(p->bdeadline, p->buntil) : p->buntil;
    int i;
    for (i = 0; i < p->nc; i++) {
        const simba__myc *c = &p->c[i];
        if (c->state == SIMBA__MY_DOWN) d = simba__min(d, c->retry_at);
        else if (c->wait) d = simba__min(d, simba__min(c->deadline, c->wait_until));
    }
    return d;
}

/* The connection of a name (see POOL): every request on one name goes on one connection, in
   order; a list goes on the first. */
static simba__myc *simba__my_route(simba__my *p, const char *name) {
    uint32_t h = 2166136261u;
    if (p->nc == 1 || !name) return p->c;
    while (*name) h = (h ^ (unsigned char)*name++) * 16777619u;
    return &p->c[h % (uint32_t)p->nc];
}

static simba_result simba__my_submit(void *impl, simba_req *req) {
    simba__my *p = (simba__my *)impl;
    simba__myc *c;
    int k;
    if (req->op < SIMBA_OP_ACQUIRE || req->op > SIMBA_OP_YIELD || req->value_len > SIMBA_VALUE_MAX) return SIMBA_EINVAL;
    c = simba__my_route(p, req->op == SIMBA_OP_LIST ? NULL : req->mutex);
    if (c->state == SIMBA__MY_DOWN) {
        simba_req_fail(req, c->down_rc ? c->down_rc : SIMBA_ECONN, c->err[0] ? c->err : "mysql: not connected");
        return SIMBA_OK;
    }
    k = req->op == SIMBA_OP_ACQUIRE && req->renew ? 0 : 1;
    req->next_ = NULL;
    if (c->tail[k]) c->tail[k]->next_ = req; else c->head[k] = req;
    c->tail[k] = req;
    simba__my_send_next(c, simba_now(p->loop));
    return SIMBA_OK;
}

/* >>close  Destroy (simba_loop_free) sends the releases still queued before it closes: one
   command is outstanding at a time, so a release queued behind a renewal in flight would
   die with the connection and the waiter would take over only at the lease's end. It waits
   for the command in flight and the ones queued before the last release, SIMBA__MY_SETTLE_MS
   at most in real time (a hung server costs that, no more); their answers are not reported. */
static int simba__my_releasing(const simba__my *p) {
    const simba_req *r;
    int i;
    for (i = 0; i < p->nc; i++) {
        const simba__myc *c = &p->c[i];
        if (c->state != SIMBA__MY_READY) continue;
        if (c->cur && c->cur->op == SIMBA_OP_RELEASE) return 1;
        for (r = c->head[1]; r; r = r->next_)
            if (r->op == SIMBA_OP_RELEASE) return 1;
    }
    return 0;
}

static void simba__my_settle(simba__my *p) {
    int64_t end = simba__real_us() + SIMBA__MY_SETTLE_MS * 1000, left;
    struct pollfd pf[SIMBA_MYSQL_CONNECTIONS_MAX];
    while (simba__my_releasing(p) && (left = end - simba__real_us()) > 0) {
        int64_t now = simba_now(p->loop), w = (left + 999) / 1000;
        int i, k = 0;
        for (i = 0; i < p->nc; i++) {
            const simba__myc *c = &p->c[i];
            if (c->fd < 0 || !c->wait) continue;
            if ((c->wait & MYSQL_WAIT_TIMEOUT) && c->wait_until - now < w) w = simba__max(c->wait_until - now, 0);
            pf[k].fd = c->fd;
            pf[k].events = simba__my_events(c->wait);
            pf[k].revents = 0;
            k++;
        }
        if (k == 0) break;
        if (poll(pf, (nfds_t)k, (int)w) < 0 && errno != EINTR) break;
        now = simba_now(p->loop);
        for (i = 0; i < p->nc; i++) simba__my_conn_process(&p->c[i], pf, k, now);
    }
}

static void simba__my_destroy(void *impl) {
    simba__my *p = (simba__my *)impl;
    int i;
    if (p->be && p->c) simba__my_settle(p);
    for (i = 0; p->c && i < p->nc; i++) {
        simba__myc *c = &p->c[i];
        if (p->be) {
            simba__my_fail_all(c, SIMBA_ECLOSED, "mysql: backend closed");
            simba__my_close(c);
        } else if (c->my) mysql_close(c->my);
        simba_free(p->loop, c->q);
    }
    if (p->bfd >= 0 && p->be) simba_backend_fd(p->be, p->bfd, 0);
    if (p->bmy) mysql_close(p->bmy);
    simba_free(p->loop, p->c);
    simba_free(p->loop, p->setup);
    simba_free(p->loop, p->check);
    simba_free(p->loop, p->check_more);
    simba_free(p->loop, p->host);
    simba_free(p->loop, p->sock);
    simba_free(p->loop, p->user);
    simba_free(p->loop, p->pass);
    simba_free(p->loop, p->db);
    simba_free(p->loop, p->ssl_ca);
    simba_free(p->loop, p->ssl_cert);
    simba_free(p->loop, p->ssl_key);
    simba_free(p->loop, p);
}

static const simba_backend_vt simba__my_vt = {
    sizeof(simba_backend_vt),
    "mysql",
    simba__my_submit,
    simba__my_fds,
    simba__my_process,
    simba__my_deadline,
    NULL,
    NULL,
    simba__my_destroy,
    SIMBA_LEASE_ASKED,
    NULL,
    simba__my_submit, /* inspect: the same queue */
    NULL,             /* announce: the procedures ring every follower's doorbell (see PUSH) */
};

SIMBA_API const char *simba_mysql_push(const simba_backend *be) {
    if (!be || simba_backend_vt_get(be) != &simba__my_vt) return NULL;
    return ((const simba__my *)simba_backend_impl(be))->bstate == SIMBA__MY_B_PARKED ? "doorbell" : "timers";
}

/* >>open */
static int simba__my_table_ok(const char *t) {
    size_t n = strlen(t), i;
    if (n < 1 || n > SIMBA__MY_TABLE_MAX) return 0;
    for (i = 0; i < n; i++)
        if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') || (t[i] >= '0' && t[i] <= '9') || t[i] == '_')) return 0;
    return 1;
}

/* The fence check's function name: simba_check_fence for the default table, else
   <table>_check_fence, so that the tables of one database keep one each. */
static const char *simba__my_fence_fn(const char *table, char *buf, size_t cap) {
    if (strcmp(table, "simba_mutex") == 0) snprintf(buf, cap, "simba_check_fence");
    else snprintf(buf, cap, "%s_check_fence", table);
    return buf;
}

/* Joins the parts with ";\n"-ended pieces, replacing each {X} by subst[X - 'A']. */
static char *simba__my_fill(simba_loop *loop, const char *const *parts, const char *const *subst) {
    size_t need = 1, o = 0;
    const char *s;
    char *out;
    int i, pass;
    for (pass = 0; pass < 2; pass++) {
        out = pass ? (char *)simba_alloc(loop, need) : NULL;
        if (pass && !out) return NULL;
        for (i = 0; parts[i]; i++)
            for (s = parts[i]; *s; s++) {
                if (s[0] == '{' && s[1] >= 'A' && s[1] <= 'Z' && s[2] == '}' && subst[s[1] - 'A']) {
                    size_t l = strlen(subst[s[1] - 'A']);
                    if (pass) memcpy(out + o, subst[s[1] - 'A'], l);
                    if (pass) o += l; else need += l;
                    s += 2;
                } else if (pass) out[o++] = *s;
                else need++;
            }
    }
    out[o] = 0;
    return out;
}

/* ssl_mode's word as SIMBA__MY_SSL_*, -1 for none of them */
static int simba__my_ssl_mode(const char *m) {
    static const char *const words[] = {"disabled", "required", "verify_ca", "verify_identity"};
    int i;
    if (!m) return SIMBA__MY_SSL_OFF;
    for (i = 0; i < 4; i++)
        if (strcmp(m, words[i]) == 0) return i;
    return -1;
}

static simba_result simba__my_desc_check(simba_loop *loop, const simba_mysql_desc *d) {
    unsigned char b[16];
    simba_result rc;
    const char *table = d->table ? d->table : "simba_mutex";
    if (!simba__my_table_ok(table))
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: table must be 1..%d of [A-Za-z0-9_]", SIMBA__MY_TABLE_MAX);
    if (strcmp(table, "simba") == 0)
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: table \"simba\" would name its fence check "
                           "simba_check_fence, the default table's: choose another name");
    if (!d->db || !d->db[0]) return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: db (the database of the tables) is required");
    if (d->host && d->unix_socket) return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: give host or unix_socket, not both");
    if (!d->host && !d->unix_socket) return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: host (numeric) or unix_socket is required");
    if (d->host && inet_pton(AF_INET, d->host, b) != 1 && inet_pton(AF_INET6, d->host, b) != 1)
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: host \"%.64s\" is not a numeric IPv4/IPv6 address (a name "
                           "would need a blocking resolver: resolve it yourself at start-up)", d->host);
    if (d->unix_socket && d->unix_socket[0] != '/')
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: unix_socket must be an absolute path");
    if (d->port < 0 || d->port > 65535)
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: port must be in 0..65535 (got %d)", d->port);
    if (simba__my_ssl_mode(d->ssl_mode) < 0)
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: ssl_mode \"%.32s\" is none of disabled, required, verify_ca, "
                           "verify_identity", d->ssl_mode);
    if (simba__my_ssl_mode(d->ssl_mode) >= SIMBA__MY_SSL_VERIFY_CA && !d->ssl_ca)
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: ssl_mode %s needs ssl_ca (the CA certificates to verify with)",
                           d->ssl_mode);
    if (!d->ssl_cert != !d->ssl_key)
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: give ssl_cert and ssl_key together");
    if (d->connections < 0 || d->connections > SIMBA_MYSQL_CONNECTIONS_MAX)
        return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: connections must be in 0..%d (got %d)",
                           SIMBA_MYSQL_CONNECTIONS_MAX, d->connections);
    if ((rc = simba__desc_ms(loop, "simba_mysql_open", "connect_timeout_ms", d->connect_timeout_ms)) != SIMBA_OK ||
        (rc = simba__desc_ms(loop, "simba_mysql_open", "statement_timeout_ms", d->statement_timeout_ms)) != SIMBA_OK ||
        (rc = simba__desc_reconnect(loop, "simba_mysql_open", d->reconnect_min_ms, d->reconnect_max_ms)) != SIMBA_OK ||
        (rc = simba__desc_ms(loop, "simba_mysql_open", "max_lease_ms", d->max_lease_ms)) != SIMBA_OK)
        return rc;
    return SIMBA_OK;
}

/* The check (p->check) and the setup (p->setup) with this table's names; 0 when out of memory. */
static int simba__my_script(simba__my *p, int64_t max_lease) {
    char n[19][SIMBA__MY_TABLE_MAX + 24], ml[24], st[24], lw[24];
    static const char *const sfx[] = {"", "_q", "_boot", "_meta", "_acq", "_rel", "_read", "_val", "_yield", "_force", "_lost",
                                      "_hold", "_sacq", "_grant", "_bell", "_follow", "_fan", "_version"};
    static const char letter[] = "TQBMARDVEGKSPZWOJC";
    const char *subst[26];
    int i;
    memset((void *)subst, 0, sizeof subst);
    for (i = 0; i < 18; i++) {
        snprintf(n[i], sizeof n[i], "`%s%s`", p->table, sfx[i]);
        subst[letter[i] - 'A'] = n[i];
    }
    snprintf(n[18], sizeof n[18], "`%s`", p->fn);
    subst['F' - 'A'] = n[18];
    subst['U' - 'A'] = p->fn;
    subst['N' - 'A'] = p->table;
    snprintf(ml, sizeof ml, "%lld", (long long)max_lease);
    snprintf(st, sizeof st, "%.3f", (double)p->stmt_to / 1000.0);
    snprintf(lw, sizeof lw, "%lld", (long long)simba__max(1, (p->stmt_to + 999) / 1000));
    subst['L' - 'A'] = ml;
    subst['X' - 'A'] = st;
    subst['Y' - 'A'] = lw;
    subst['H' - 'A'] = p->token;
    p->check = simba__my_fill(p->loop, simba__my_check_sql, subst);
    p->check_more = simba__my_fill(p->loop, simba__my_check_more_sql, subst);
    p->setup = simba__my_fill(p->loop, simba__my_setup_sql, subst);
    return p->check && p->check_more && p->setup;
}

SIMBA_API simba_result simba_mysql_open(simba_loop *loop, const simba_mysql_desc *desc, simba_backend **out) {
    simba__my *p;
    simba_result rc;
    int64_t ml;
    int i;
    if (out) *out = NULL;
    if (!loop || !desc || !out) return simba__fail(loop, SIMBA_EINVAL, "simba_mysql_open: NULL argument");
    if ((rc = simba__my_desc_check(loop, desc)) != SIMBA_OK) return rc;
    p = (simba__my *)simba__zalloc(loop, sizeof *p);
    if (!p) return simba__fail(loop, SIMBA_ENOMEM, "simba_mysql_open: out of memory");
    p->loop = loop;
    p->bfd = -1;
    p->nc = desc->connections ? desc->connections : 1;
    p->c = (simba__myc *)simba__zalloc(loop, (size_t)p->nc * sizeof *p->c);
    if (!p->c) {
        simba__my_destroy(p);
        return simba__fail(loop, SIMBA_ENOMEM, "simba_mysql_open: out of memory");
    }
    simba__copy(p->table, sizeof p->table, desc->table ? desc->table : "simba_mutex");
    simba__my_fence_fn(p->table, p->fn, sizeof p->fn);
    (void)simba_contender_id_random(loop, p->token, sizeof p->token); /* 40 bytes: cannot fail */
    p->port = desc->port ? desc->port : 3306;
    p->conn_to = desc->connect_timeout_ms ? desc->connect_timeout_ms : 2000;
    p->stmt_to = desc->statement_timeout_ms ? desc->statement_timeout_ms : 5000;
    p->rmin = desc->reconnect_min_ms ? desc->reconnect_min_ms : 100;
    p->rmax = desc->reconnect_max_ms ? desc->reconnect_max_ms : (p->rmin > 5000 ? p->rmin : 5000);
    ml = desc->max_lease_ms ? desc->max_lease_ms : SIMBA_MAX_LEASE_DEFAULT_MS;
    p->host = simba__strdup(loop, desc->host);
    p->sock = simba__strdup(loop, desc->unix_socket);
    p->user = simba__strdup(loop, desc->user ? desc->user : "");
    p->pass = simba__strdup(loop, desc->password ? desc->password : "");
    p->db = simba__strdup(loop, desc->db);
    p->ssl_mode = simba__my_ssl_mode(desc->ssl_mode);
    p->ssl_ca = simba__strdup(loop, desc->ssl_ca);
    p->ssl_cert = simba__strdup(loop, desc->ssl_cert);
    p->ssl_key = simba__strdup(loop, desc->ssl_key);
    if (!simba__my_script(p, ml) || !p->user || !p->pass || !p->db || (desc->host && !p->host) ||
        (desc->unix_socket && !p->sock) || (desc->ssl_ca && !p->ssl_ca) || (desc->ssl_cert && !p->ssl_cert) ||
        (desc->ssl_key && !p->ssl_key)) {
        simba__my_destroy(p);
        return simba__fail(loop, SIMBA_ENOMEM, "simba_mysql_open: out of memory");
    }
    for (i = 0; i < p->nc; i++) {
        p->c[i].p = p;
        p->c[i].fd = -1;
    }
    rc = simba_backend_new(loop, &simba__my_vt, p, &p->be);
    if (rc != SIMBA_OK) {
        simba__my_destroy(p);
        return rc;
    }
    (void)simba_backend_set_max_lease(p->be, ml); /* checked above: cannot fail */
    for (i = 0; i < p->nc; i++) simba__my_start(&p->c[i], simba_now(loop));
    *out = p->be;
    return SIMBA_OK;
}

/* >>fence  simba_mysql_check_fence: the SQL function, called on the application's connection. */
SIMBA_API simba_result simba_mysql_check_fence(struct st_mysql *conn, const char *table, const char *name, uint64_t fence,
                                               char *errbuf, size_t errbuf_cap) {
    char e[512], fn[SIMBA__MY_TABLE_MAX + 16], q[SIMBA__MY_TABLE_MAX + 2 * SIMBA_NAME_MAX + 96], esc[2 * SIMBA_NAME_MAX + 1];
    char *err = errbuf ? errbuf : e;
    size_t cap = errbuf ? errbuf_cap : sizeof e;
    simba_result rc;
    MYSQL_RES *res;
    unsigned en;
    if (!conn) return simba__refuse(err, cap, SIMBA_EINVAL, "simba_mysql_check_fence: conn is NULL");
    if (!table) table = "simba_mutex";
    if (!simba__my_table_ok(table)) return simba__refuse(err, cap, SIMBA_EINVAL, "simba_mysql_check_fence: bad table name");
    if ((rc = simba__fence_args(simba__my_fence_fn(table, fn, sizeof fn), name, fence, err, cap)) != SIMBA_OK) return rc;
    mysql_real_escape_string(conn, esc, name, (unsigned long)strlen(name));
    snprintf(q, sizeof q, "SELECT `%s`('%s', %llu)", fn, esc, (unsigned long long)fence);
    /* the refusal may come with the result's rows, after the query was accepted */
    if (mysql_query(conn, q) == 0) {
        res = mysql_store_result(conn);
        if (res) mysql_free_result(res);
        if (res || mysql_errno(conn) == 0) return SIMBA_OK;
    }
    en = mysql_errno(conn);
    snprintf(err, cap, "%s", mysql_error(conn));
    if (en == 1644 && strcmp(mysql_sqlstate(conn), "45000") == 0) return SIMBA_EFENCE;
    if (en == 1644 || en == 1305) return SIMBA_EINVAL; /* 22023: bad input; 1305: no such function */
    return SIMBA_EBACKEND;
}

#endif /* SIMBA_MYSQL_IMPLEMENTATION */
