/* w1_cycle.c -- W1, uncontended cycle: one contender acquires and releases one mutex in a
 * loop, next to the raw limit of the same server measured in the same run.
 *
 *   w1_cycle --backend memory|sqlite|redis|redis-cluster|zk|pg|mysql [--secs 6] [--rounds 5]
 *            [--sql FILE] [--redis-port P] [--cluster-port P] [--zk HOST:PORT] [--zk-session-ms T] [--pg-port P]
 *            [--mysql-port P]
 *   w1_cycle --versions      (the library versions it was built with, for the table header)
 *
 * One simba cycle, through the public API and nothing else:
 *     simba_start(svc); simba_wait() until simba_is_owner(svc);
 *     simba_stop(svc);  simba_wait() until simba_service_status(svc) == SIMBA_INITIAL
 * i.e. an acquire and a release, both confirmed by the server (two round trips).
 *
 * The raw limit (one "op"):
 *   redis   redis-benchmark -p P -c 1 -n N --csv EVALSHA <sha> 1 <key> of the one-key
 *           script "return redis.call('GET', KEYS[1])": one script round trip
 *   sqlite  one autocommit conditional UPDATE (the shape of the backend's acquire: owner,
 *           ttl and transition from the database clock, WHERE the lease is over or ours) on
 *           the same file, same table, same pragmas (WAL, synchronous=NORMAL): one write
 *           transaction
 *   zk      zoo_create of an EPHEMERAL node + zoo_delete of it (synchronous C API, own
 *           session): the two round trips a lock needs at the very least
 *   pg      one blocking libpq client (PQexecParams) running the backend's own acquire
 *           statement as a renewal of a row of its own: one statement round trip. A cycle
 *           is two statements: target >= 0.85 of half that rate
 *   mysql   one blocking Connector/C client running autocommit conditional UPDATEs (owner,
 *           ttl and transition from the server's clock, WHERE the lease is over or ours, the
 *           fence + 1 so that each one writes) on a row of the backend's table: one write
 *           transaction. A cycle is two requests: target >= 0.5 of the UPDATE rate
 *   redis-cluster (a cluster seeded at 127.0.0.1:--cluster-port, its prefix declared
 *           with bench/redis_cluster_declare): as redis, against the primary that serves
 *           the mutex's slot, on a key of that slot
 *   memory  none (reference only)
 * Raw and simba alternate in --rounds interleaved slices of secs/rounds/2 each, so that
 * load from elsewhere on the machine hits both alike; rates are the median slice, latency
 * percentiles are over every cycle of every slice.
 */
#define SIMBA_IMPLEMENTATION
#include "bench.h"

#include <hiredis/hiredis.h>
#include <zookeeper/zookeeper.h>

#define PROG "w1_cycle"
#define MAXR 15

static const char *backend;

/* ---- raw limits ----------------------------------------------------------------------- */

static char redis_sha[64];
static int raw_port;
static const char *raw_key = "bench:{raw}:k";

/* Cluster: the port of the primary serving the slot of key (asked of the seed); 0 if none. */
static int cluster_port_of(const char *key) {
    redisContext *c = redisConnect("127.0.0.1", atoi(b_opt("cluster-port", "6680")));
    redisReply *k = c && !c->err ? (redisReply *)redisCommand(c, "CLUSTER KEYSLOT %s", key) : NULL;
    redisReply *m = k && k->type == REDIS_REPLY_INTEGER ? (redisReply *)redisCommand(c, "CLUSTER SLOTS") : NULL;
    size_t i;
    int port = 0;
    for (i = 0; m && m->type == REDIS_REPLY_ARRAY && i < m->elements; i++)
        if (k->integer >= m->element[i]->element[0]->integer && k->integer <= m->element[i]->element[1]->integer)
            port = (int)m->element[i]->element[2]->element[1]->integer;
    if (m) freeReplyObject(m);
    if (k) freeReplyObject(k);
    if (c) redisFree(c);
    return port;
}

/* The cluster backend (bench.h's b_open knows the standalone one). */
static simba_result w1_open(simba_loop *loop, simba_memstore **store, simba_backend **out) {
    simba_redis_desc d;
    if (strcmp(backend, "redis-cluster") != 0) return b_open(loop, backend, store, out);
    memset(&d, 0, sizeof d);
    d.host = "127.0.0.1";
    d.port = atoi(b_opt("cluster-port", "6680"));
    d.prefix = "bench:";
    d.cluster = 1;
    return simba_redis_open(loop, &d, out);
}

static void redis_raw_setup(void) {
    int port = raw_port = atoi(b_opt("redis-port", "6395"));
    redisContext *c;
    redisReply *r;
    if (strcmp(backend, "redis-cluster") == 0) {
        raw_key = "bench:{w1-cycle}:k";
        if (!(port = raw_port = cluster_port_of(raw_key))) b_die(PROG, "no primary for %s", raw_key);
    }
    c = redisConnect("127.0.0.1", port);
    if (!c || c->err) b_die(PROG, "redis connect on %d failed", port);
    r = (redisReply *)redisCommand(c, "SCRIPT LOAD %s", "return redis.call('GET', KEYS[1])");
    if (!r || r->type != REDIS_REPLY_STRING) b_die(PROG, "SCRIPT LOAD failed");
    snprintf(redis_sha, sizeof redis_sha, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
}

/* Runs redis-benchmark for about slice_s seconds; returns req/s, p50 in *p50_us. */
static double redis_raw(double slice_s, double *p50_us) {
    static double last_rate = 20000;
    long n = (long)(last_rate * slice_s);
    double rps;
    char args[128];
    if (n < 2000) n = 2000;
    if (n > 500000) n = 500000;
    snprintf(args, sizeof args, "EVALSHA %s 1 %s", redis_sha, raw_key);
    rps = b_redis_benchmark(raw_port, n, args, p50_us);
    if (rps <= 0) b_die(PROG, "redis-benchmark failed");
    last_rate = rps;
    return rps;
}

static sqlite3 *raw_db;
static sqlite3_stmt *raw_st;

static void sql_raw_setup(void) {
    const char *path = b_opt("sql", "build/bench-sql/bench.db");
    if (sqlite3_open(path, &raw_db) != SQLITE_OK) b_die(PROG, "sqlite open %s", path);
    sqlite3_exec(raw_db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, NULL);
    /* the backend has created the table by now (simba_sql_open ran first) */
    if (sqlite3_exec(raw_db, "INSERT OR IGNORE INTO simba_mutex (mutex) VALUES ('raw')", NULL, NULL, NULL) != SQLITE_OK)
        b_die(PROG, "raw insert: %s", sqlite3_errmsg(raw_db));
#define NOW "CAST((julianday('now') - 2440587.5) * 86400000.0 + 0.5 AS INTEGER)"
    if (sqlite3_prepare_v2(raw_db,
                           "UPDATE simba_mutex SET owner_id = ?2, ttl_at = " NOW " + ?3, transition_at = " NOW
                           " + ?4, version = version + 1 WHERE mutex = ?1 AND (transition_at < " NOW
                           " OR owner_id = ?2)",
                           -1, &raw_st, NULL) != SQLITE_OK)
        b_die(PROG, "raw prepare: %s", sqlite3_errmsg(raw_db));
#undef NOW
    sqlite3_bind_text(raw_st, 1, "raw", -1, SQLITE_STATIC);
    sqlite3_bind_text(raw_st, 2, "me", -1, SQLITE_STATIC);
    sqlite3_bind_int64(raw_st, 3, 10000);
    sqlite3_bind_int64(raw_st, 4, 16000);
}

static double sql_raw(double slice_s, b_samples *lat) {
    double t0 = b_now_us(), t = t0, end = t0 + slice_s * 1e6;
    long n;
    for (n = 0; t < end; n++) {
        double a = t;
        if (sqlite3_step(raw_st) != SQLITE_DONE || sqlite3_changes(raw_db) != 1)
            b_die(PROG, "raw update: %s", sqlite3_errmsg(raw_db));
        sqlite3_reset(raw_st);
        t = b_now_us();
        b_add(lat, t - a);
    }
    return (double)n / ((t - t0) / 1e6);
}

static zhandle_t *zh;
static void zk_watcher(zhandle_t *h, int type, int state, const char *path, void *ctx) {
    (void)h; (void)type; (void)state; (void)path; (void)ctx;
}

static void zk_raw_setup(void) {
    double end = b_now_us() + 10e6;
    int rc;
    zoo_set_debug_level((ZooLogLevel)0);
    zh = zookeeper_init(b_opt("zk", "127.0.0.1:2195"), zk_watcher, 2000, NULL, NULL, 0);
    if (!zh) b_die(PROG, "zookeeper_init failed");
    while (zoo_state(zh) != ZOO_CONNECTED_STATE) {
        if (b_now_us() > end) b_die(PROG, "zk raw: not connected within 10 s");
        b_sleep_ms(5);
    }
    rc = zoo_create(zh, "/simba_bench_raw", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    if (rc != ZOK && rc != ZNODEEXISTS) b_die(PROG, "zk raw mkdir: %s", zerror(rc));
}

static double zk_raw(double slice_s, b_samples *lat) {
    double t0 = b_now_us(), t = t0, end = t0 + slice_s * 1e6;
    long n;
    for (n = 0; t < end; n++) {
        double a = t;
        int rc = zoo_create(zh, "/simba_bench_raw/n", "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0);
        if (rc != ZOK) b_die(PROG, "zk raw create: %s", zerror(rc));
        rc = zoo_delete(zh, "/simba_bench_raw/n", -1);
        if (rc != ZOK) b_die(PROG, "zk raw delete: %s", zerror(rc));
        t = b_now_us();
        b_add(lat, t - a);
    }
    return (double)n / ((t - t0) / 1e6);
}

/* PostgreSQL: one blocking libpq client runs the backend's acquire statement (the table's
   _acq function, text parameters, as the backend sends it) as a renewal of its own row. */
static PGconn *pg_raw_c;
static void pg_raw_setup(void) {
    char ci[200];
    snprintf(ci, sizeof ci, "hostaddr=127.0.0.1 port=%d user=postgres password=simba dbname=postgres",
             atoi(b_opt("pg-port", "5445")));
    pg_raw_c = PQconnectdb(ci);
    if (PQstatus(pg_raw_c) != CONNECTION_OK) b_die(PROG, "pg raw connect: %s", PQerrorMessage(pg_raw_c));
}

static double pg_raw(double slice_s, b_samples *lat) {
    static const char *sql = "SELECT " SIMBA__PG_COLS
                             " FROM \"simba_bench_acq\"($1, $2, $3::bigint, $4::bigint, $5::bigint, $6::boolean, $7)";
    const char *v[7] = {"w1-raw", "w1-raw-me", "10000", "6000", "17000", "true", "none"};
    double t0 = b_now_us(), t = t0, end = t0 + slice_s * 1e6;
    long n;
    for (n = 0; t < end; n++) {
        double a = t;
        PGresult *r = PQexecParams(pg_raw_c, sql, 7, NULL, v, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) b_die(PROG, "pg raw statement: %s", PQresultErrorMessage(r));
        PQclear(r);
        t = b_now_us();
        b_add(lat, t - a);
    }
    return (double)n / ((t - t0) / 1e6);
}

/* MySQL: one blocking client runs autocommit conditional UPDATEs of a row of its own. */
static MYSQL *my_raw_c;
static void my_raw_setup(void) {
    my_raw_c = mysql_init(NULL);
    if (!my_raw_c || !mysql_real_connect(my_raw_c, "127.0.0.1", "root", "simba", "simba",
                                         (unsigned)atoi(b_opt("mysql-port", "3395")), NULL, CLIENT_MULTI_STATEMENTS))
        b_die(PROG, "mysql raw connect: %s", my_raw_c ? mysql_error(my_raw_c) : "out of memory");
    /* the session simba's connections run */
    if (mysql_query(my_raw_c, "SET SESSION time_zone = '+00:00', SESSION tx_isolation = 'READ-COMMITTED'") ||
        mysql_query(my_raw_c, "INSERT IGNORE INTO simba_bench (name) VALUES ('w1-raw'), ('w1-checked')"))
        b_die(PROG, "mysql raw insert: %s", mysql_error(my_raw_c));
}

/* The same cycle without the procedures, as the least a correct one-statement request
   could do: an acquire as one conditional UPDATE that also checks what the procedure
   checks (no live holding, nobody in line, no follower to ring, the quarantine over) and
   reads its fence back, and a release as one conditional UPDATE (nobody in line to hand
   over to, no follower). It shows what the checks cost apart from the procedure. */
#define NOW "FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000)"
#define LIVE(t, col) "NOT EXISTS (SELECT 1 FROM simba_bench_" t " WHERE name = 'w1-checked' AND " col " >= " NOW ")"
static const char *my_chk_acq =
    "UPDATE simba_bench SET owner = 'w1-chk', fence = (@w1_f := GREATEST(fence + 1, COALESCE((SELECT fence_floor FROM "
    "simba_bench_boot WHERE id = 1), 0))), acquired_ms = " NOW ", pending = 0, ttl_ms = " NOW " + 10000, transition_ms = " NOW
    " + 16000 WHERE name = 'w1-checked' AND (owner = '' OR transition_ms < " NOW ") AND permits <= 1 AND " LIVE("hold", "transition_ms")
    " AND " LIVE("q", "expires_ms") " AND " LIVE("follow", "expires_ms") " AND COALESCE((SELECT since_ms + GREATEST(16000, "
    "max_lease_ms) FROM simba_bench_boot WHERE id = 1), 0) <= " NOW "; SELECT ROW_COUNT(), @w1_f";
static const char *my_chk_rel = "UPDATE simba_bench SET owner = '', ttl_ms = 0, transition_ms = 0, value = '' WHERE name = "
                                "'w1-checked' AND owner = 'w1-chk' AND transition_ms >= " NOW " AND " LIVE("q", "expires_ms")
                                " AND " LIVE("follow", "expires_ms");
#undef LIVE
#undef NOW

static double my_checked(double slice_s) {
    double t0 = b_now_us(), t = t0, end = t0 + slice_s * 1e6;
    long n;
    for (n = 0; t < end; n++) {
        MYSQL_RES *res;
        MYSQL_ROW row;
        int got;
        if (mysql_query(my_raw_c, my_chk_acq) || mysql_next_result(my_raw_c) != 0 || !(res = mysql_store_result(my_raw_c)))
            b_die(PROG, "mysql checked acquire: %s", mysql_error(my_raw_c));
        row = mysql_fetch_row(res);
        got = row && row[0] && strcmp(row[0], "1") == 0 && row[1];
        mysql_free_result(res);
        if (!got) b_die(PROG, "mysql checked acquire: not granted");
        if (mysql_query(my_raw_c, my_chk_rel) || mysql_affected_rows(my_raw_c) != 1)
            b_die(PROG, "mysql checked release: %s", mysql_error(my_raw_c));
        t = b_now_us();
    }
    return (double)n / ((t - t0) / 1e6);
}

static double my_raw(double slice_s, b_samples *lat) {
#define NOW "FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000)"
    static const char *sql = "UPDATE simba_bench SET owner = 'w1-raw-me', ttl_ms = " NOW " + 10000, transition_ms = " NOW
                             " + 16000, fence = fence + 1 WHERE name = 'w1-raw' AND (transition_ms < " NOW " OR owner = 'w1-raw-me')";
#undef NOW
    double t0 = b_now_us(), t = t0, end = t0 + slice_s * 1e6;
    long n;
    for (n = 0; t < end; n++) {
        double a = t;
        if (mysql_query(my_raw_c, sql) || mysql_affected_rows(my_raw_c) != 1) b_die(PROG, "mysql raw UPDATE: %s", mysql_error(my_raw_c));
        t = b_now_us();
        b_add(lat, t - a);
    }
    return (double)n / ((t - t0) / 1e6);
}

/* ---- simba cycles ----------------------------------------------------------------------- */

static double simba_cycles(simba_loop *loop, simba_service *svc, double slice_s, b_samples *lat) {
    double t0 = b_now_us(), t = t0, end = t0 + slice_s * 1e6;
    long n;
    for (n = 0; t < end; n++) {
        double a = t;
        if (simba_start(svc) != SIMBA_OK) b_die(PROG, "simba_start: %s", simba_loop_errmsg(loop));
        if (b_wait_until(loop, b_is_owner, svc, a + 5e6) != 0) b_die(PROG, "%s: not acquired within 5 s", backend);
        if (simba_stop(svc) != SIMBA_OK) b_die(PROG, "simba_stop: %s", simba_loop_errmsg(loop));
        if (b_wait_until(loop, b_is_initial, svc, a + 10e6) != 0) b_die(PROG, "%s: release not confirmed within 5 s", backend);
        t = b_now_us();
        b_add(lat, t - a);
    }
    return (double)n / ((t - t0) / 1e6);
}

int main(int argc, char **argv) {
    double secs, slice, rate[MAXR], raw[MAXR], rb_p50[MAXR], chk[MAXR], simba_rate, raw_rate;
    int rounds, r;
    simba_loop *loop = NULL;
    simba_memstore *store = NULL;
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_contend_desc cd;
    simba_result rc;
    b_samples lat = {0}, rlat = {0};
    int has_raw;
    b_argc = argc;
    b_argv = argv;
    if (argc == 2 && strcmp(argv[1], "--versions") == 0) { /* for the table's header */
        printf("simba %s, sqlite %s, hiredis %d.%d.%d, zookeeper C client %s, libpq %d, MariaDB Connector/C %s\n", SIMBA_VERSION,
               sqlite3_libversion(), HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, ZOO_VERSION, PQlibVersion(),
               mysql_get_client_info());
        return 0;
    }
    backend = b_opt("backend", "memory");
    secs = b_optf("secs", 6);
    rounds = (int)b_optf("rounds", 5);
    if (rounds < 1) rounds = 1;
    if (rounds > MAXR) rounds = MAXR;
    slice = secs / rounds / 2;
    has_raw = strcmp(backend, "memory") != 0;

    if (simba_loop_new(NULL, &loop) != SIMBA_OK) b_die(PROG, "loop");
    if ((rc = w1_open(loop, &store, &be)) != SIMBA_OK) b_die(PROG, "open %s: %s", backend, simba_strerror(rc));
    memset(&cd, 0, sizeof cd);
    cd.mutex = "w1-cycle";
    cd.contender_id = "w1-me";
    cd.ttl_ms = 10000;
    cd.transition_ms = 6000;
    if (simba_contend(loop, be, &cd, &svc) != SIMBA_OK) b_die(PROG, "contend: %s", simba_loop_errmsg(loop));
    /* warm-up: connection, scripts loaded, table and row created, caches warm */
    {
        b_samples warm = {0};
        simba_cycles(loop, svc, 0.3, &warm);
        free(warm.v);
    }
    if (strncmp(backend, "redis", 5) == 0) redis_raw_setup();
    if (strcmp(backend, "sqlite") == 0) sql_raw_setup();
    if (strcmp(backend, "zk") == 0) zk_raw_setup();
    if (strcmp(backend, "pg") == 0) pg_raw_setup();
    if (strcmp(backend, "mysql") == 0) my_raw_setup();

    for (r = 0; r < rounds; r++) {
        rb_p50[r] = 0;
        if (strncmp(backend, "redis", 5) == 0) raw[r] = redis_raw(slice, &rb_p50[r]);
        else if (strcmp(backend, "sqlite") == 0) raw[r] = sql_raw(slice, &rlat);
        else if (strcmp(backend, "zk") == 0) raw[r] = zk_raw(slice, &rlat);
        else if (strcmp(backend, "pg") == 0) raw[r] = pg_raw(slice, &rlat);
        else if (strcmp(backend, "mysql") == 0) raw[r] = my_raw(slice, &rlat);
        else raw[r] = 0;
        rate[r] = simba_cycles(loop, svc, slice, &lat);
        chk[r] = strcmp(backend, "mysql") == 0 ? my_checked(slice / 2) : 0;
        fprintf(stderr, "%s round %d: raw %.0f /s, simba %.0f cycles/s\n", backend, r, raw[r], rate[r]);
    }
    simba_rate = b_median_of(rate, rounds);
    raw_rate = b_median_of(raw, rounds);
    b_sort(&lat);
    b_sort(&rlat);

    {
        const char *w = "W1 uncontended cycle";
        const char *limit = "", *ratio = "", *target = "", *verdict = "";
        const char *llat = "";
        double pct = has_raw ? 100.0 * simba_rate / raw_rate : 0;
        if (strncmp(backend, "redis", 5) == 0) {
            limit = b_fmt("%s req/s (redis-benchmark -c 1, EVALSHA 1-key script%s)", b_num(raw_rate),
                          strcmp(backend, "redis-cluster") == 0 ? ", on the mutex's primary" : "");
            ratio = b_fmt("%.1f %%", pct);
            target = "≥ 45 %";
            verdict = b_verdict_min(pct, 45, "pts");
            llat = b_fmt("%.0f µs p50 per request (median of redis-benchmark runs)", b_median_of(rb_p50, rounds));
        } else if (strcmp(backend, "sqlite") == 0) {
            limit = b_fmt("%s UPDATE/s (autocommit conditional UPDATE)", b_num(raw_rate));
            ratio = b_fmt("%.1f %%", pct);
            target = "≥ 50 %";
            verdict = b_verdict_min(pct, 50, "pts");
            llat = b_fmt("%.0f / %.0f µs per UPDATE", b_pct(&rlat, 0.5), b_pct(&rlat, 0.99));
        } else if (strcmp(backend, "zk") == 0) {
            limit = b_fmt("%s create+delete/s (sync C API, ephemeral)", b_num(raw_rate));
            ratio = b_fmt("%.1f %%", pct);
            target = "(none)";
            verdict = "";
            llat = b_fmt("%.0f / %.0f µs per create+delete", b_pct(&rlat, 0.5), b_pct(&rlat, 0.99));
        } else if (strcmp(backend, "pg") == 0) {
            /* a cycle is two statements: target 0.85 of half the raw statement rate */
            limit = b_fmt("%s statements/s (blocking libpq client, the acquire statement)", b_num(raw_rate));
            ratio = b_fmt("%.1f %%", pct);
            target = "≥ 42.5 % (0.85 × raw / 2)";
            verdict = b_verdict_min(pct, 42.5, "pts");
            llat = b_fmt("%.0f / %.0f µs per statement", b_pct(&rlat, 0.5), b_pct(&rlat, 0.99));
        } else if (strcmp(backend, "mysql") == 0) {
            /* a cycle is two requests, each one write transaction as the raw UPDATE is */
            limit = b_fmt("%s UPDATE/s (autocommit conditional UPDATE)", b_num(raw_rate));
            ratio = b_fmt("%.1f %%", pct);
            target = "≥ 50 %";
            verdict = b_verdict_min(pct, 50, "pts");
            llat = b_fmt("%.0f / %.0f µs per UPDATE", b_pct(&rlat, 0.5), b_pct(&rlat, 0.99));
        } else {
            limit = "(reference: in-process store)";
        }
        b_row(w, backend, "cycles/s (acquire+release)", b_num(simba_rate), limit, ratio, target, verdict);
        b_row(w, backend, "cycle latency p50 / p99", b_fmt("%.1f / %.1f µs", b_pct(&lat, 0.5), b_pct(&lat, 0.99)), llat,
              "", "", "");
        if (strcmp(backend, "mysql") == 0) {
            double c = b_median_of(chk, rounds);
            b_row(w, backend, "cycles/s with the checks as one UPDATE per request, no procedure (reference)", b_num(c), limit,
                  b_fmt("%.1f %%", 100.0 * c / raw_rate), "", "");
        }
    }
    simba_service_free(svc);
    simba_loop_free(loop);
    if (store) simba_memstore_free(store);
    if (raw_st) sqlite3_finalize(raw_st);
    if (raw_db) sqlite3_close(raw_db);
    if (pg_raw_c) PQfinish(pg_raw_c);
    if (my_raw_c) mysql_close(my_raw_c);
    if (zh) zookeeper_close(zh);
    free(lat.v);
    free(rlat.v);
    return 0;
}
