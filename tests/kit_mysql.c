/* kit_mysql.c -- the shared backend kit (tests/kit.c) on MariaDB (or MySQL).
 *
 * Every open() is a new backend with its own connection to the server on
 * 127.0.0.1:$SIMBA_MYSQL_PORT (default 3390, started by scripts/mysql-start.sh), as separate
 * processes would have ($SIMBA_KIT_MYSQL_CONNECTIONS request connections each, default 1:
 * see POOL in simba_mysql.h). The table carries a per-run name so that leftovers of earlier runs
 * never interfere. A server that cannot be reached makes the cases fail (checked first).
 * mute: another session holds the table's write lock (LOCK TABLES ... WRITE) that it does not
 * release: every statement of the backends waits for it, unanswered.
 * The fenced write is the application's own connection: START TRANSACTION,
 * simba_mysql_check_fence, an upsert into a table of its own in the same database, COMMIT
 * (ROLLBACK when refused).
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_mysql.h"
#include "kit.h"

#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct kit_my_cfg {
    int port;
    char table[64];
    MYSQL *app; /* the application's connection (fenced writes) */
} kit_my_cfg;

static kit_my_cfg *cfg_now;
static MYSQL *mute_conn;
static unsigned long muted_ids[SIMBA_MYSQL_CONNECTIONS_MAX]; /* the muted backend's sessions */
static int n_muted;

static simba_result open_my(simba_loop *loop, void *ctx, simba_backend **out) {
    kit_my_cfg *cfg = (kit_my_cfg *)ctx;
    simba_mysql_desc d;
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.host = "127.0.0.1";
    d.port = cfg->port;
    d.user = "root";
    d.password = "simba";
    d.db = "simba";
    d.table = cfg->table;
    d.connections = getenv("SIMBA_KIT_MYSQL_CONNECTIONS") ? atoi(getenv("SIMBA_KIT_MYSQL_CONNECTIONS")) : 0;
    rc = simba_mysql_open(loop, &d, out);
    if (rc != SIMBA_OK) fprintf(stderr, "kit_mysql: open port %d: %s\n", cfg->port, simba_strerror(rc));
    return rc;
}

/* A blocking connection of the test's own (the application's, or the muting session). */
static MYSQL *test_conn(int port) {
    MYSQL *c = mysql_init(NULL);
    unsigned int to = 2;
    if (!c) return NULL;
    mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &to);
    if (!mysql_real_connect(c, "127.0.0.1", "root", "simba", "simba", (unsigned)port, NULL, 0)) {
        fprintf(stderr, "kit_mysql: server on port %d: %s\n", port, mysql_error(c));
        mysql_close(c);
        return NULL;
    }
    return c;
}

/* The whole table is write-locked by another session: every backend's statement waits.
   mute(NULL, 0): the muted backend's process is gone; its statements already sent (a
   release) die with its server session, as a killed client's would once the server
   noticed, before the others go on. */
static void mute_my(simba_backend *be, int on) {
    char sql[200];
    int i;
    if (on && be && be->impl) {
        const simba__my *p = (const simba__my *)be->impl;
        for (n_muted = i = 0; i < p->nc; i++)
            if (p->c[i].my) muted_ids[n_muted++] = mysql_thread_id(p->c[i].my);
    }
    for (i = 0; !on && !be && mute_conn && i < n_muted; i++) {
        snprintf(sql, sizeof sql, "KILL CONNECTION %lu", muted_ids[i]);
        if (mysql_query(mute_conn, sql)) fprintf(stderr, "kit_mysql: %s: %s\n", sql, mysql_error(mute_conn));
    }
    if (!on) n_muted = 0;
    if (on && !mute_conn) {
        mute_conn = test_conn(cfg_now->port);
        snprintf(sql, sizeof sql, "LOCK TABLES `%s` WRITE, `%s_q` WRITE", cfg_now->table, cfg_now->table);
        if (mute_conn && mysql_query(mute_conn, sql)) fprintf(stderr, "kit_mysql: mute: %s\n", mysql_error(mute_conn));
    } else if (!on && mute_conn) {
        mysql_query(mute_conn, "UNLOCK TABLES");
        mysql_close(mute_conn);
        mute_conn = NULL;
    }
}

/* Between cases: the server must still answer (a blocking check, test side only). */
static void between(void *ctx) {
    kit_my_cfg *cfg = (kit_my_cfg *)ctx;
    MYSQL *c = test_conn(cfg->port);
    if (c && mysql_query(c, "SELECT 1") == 0) mysql_free_result(mysql_store_result(c));
    else fprintf(stderr, "kit_mysql: server on port %d does not answer\n", cfg->port);
    if (c) mysql_close(c);
}

static int app_exec(MYSQL *c, const char *sql, char *err, size_t errcap) {
    if (mysql_query(c, sql) == 0) {
        MYSQL_RES *r = mysql_store_result(c);
        if (r) mysql_free_result(r);
        return 0;
    }
    snprintf(err, errcap, "%s: %s", sql, mysql_error(c));
    return -1;
}

static MYSQL *app_conn(kit_my_cfg *cfg, char *err, size_t errcap) {
    char sql[240];
    if (cfg->app) return cfg->app;
    cfg->app = test_conn(cfg->port);
    if (!cfg->app) { snprintf(err, errcap, "app connection failed"); return NULL; }
    snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS `%s_app` (name VARCHAR(200), k VARCHAR(200), value TEXT,"
             " fence BIGINT, PRIMARY KEY (name, k))", cfg->table);
    if (app_exec(cfg->app, sql, err, errcap)) { mysql_close(cfg->app); cfg->app = NULL; }
    return cfg->app;
}

static simba_result fenced_write(simba_loop *loop, simba_backend *be, void *ctx, const char *name, uint64_t fence,
                                 const char *key, const char *value, char *err, size_t errcap) {
    kit_my_cfg *cfg = (kit_my_cfg *)ctx;
    MYSQL *c = app_conn(cfg, err, errcap);
    char sql[1600], n[300], k[300], v[600], e2[200];
    simba_result rc;
    (void)loop;
    (void)be;
    if (!c) return SIMBA_EBACKEND;
    if (app_exec(c, "START TRANSACTION", err, errcap)) return SIMBA_EBACKEND;
    rc = simba_mysql_check_fence(c, cfg->table, name, fence, err, errcap);
    if (rc == SIMBA_OK) {
        mysql_real_escape_string(c, n, name, (unsigned long)strlen(name));
        mysql_real_escape_string(c, k, key, (unsigned long)strlen(key));
        mysql_real_escape_string(c, v, value, (unsigned long)strlen(value));
        snprintf(sql, sizeof sql, "INSERT INTO `%s_app` VALUES ('%s', '%s', '%s', %llu) ON DUPLICATE KEY UPDATE"
                 " value = VALUES(value), fence = VALUES(fence)", cfg->table, n, k, v, (unsigned long long)fence);
        if (app_exec(c, sql, err, errcap)) rc = SIMBA_EBACKEND;
    }
    if (app_exec(c, rc == SIMBA_OK ? "COMMIT" : "ROLLBACK", e2, sizeof e2) && rc == SIMBA_OK) {
        snprintf(err, errcap, "%s", e2);
        rc = SIMBA_EBACKEND;
    }
    return rc;
}

static int fenced_read(simba_loop *loop, simba_backend *be, void *ctx, const char *name, const char *key, char *out,
                       size_t cap, char *err, size_t errcap) {
    kit_my_cfg *cfg = (kit_my_cfg *)ctx;
    MYSQL *c = app_conn(cfg, err, errcap);
    char sql[800], n[300], k[300];
    MYSQL_RES *r;
    MYSQL_ROW row;
    (void)loop;
    (void)be;
    if (!c) return -1;
    mysql_real_escape_string(c, n, name, (unsigned long)strlen(name));
    mysql_real_escape_string(c, k, key, (unsigned long)strlen(key));
    snprintf(sql, sizeof sql, "SELECT value FROM `%s_app` WHERE name = '%s' AND k = '%s'", cfg->table, n, k);
    if (app_exec(c, "COMMIT", err, errcap) || mysql_query(c, sql)) {
        snprintf(err, errcap, "%s", mysql_error(c));
        return -1;
    }
    r = mysql_store_result(c);
    row = r ? mysql_fetch_row(r) : NULL;
    snprintf(out, cap, "%s", row && row[0] ? row[0] : "");
    if (r) mysql_free_result(r);
    return 0;
}

int main(int argc, char **argv) {
    kit_my_cfg cfg;
    kit_backend kb;
    struct timespec ts;
    int rc;
    const char *e = getenv("SIMBA_MYSQL_PORT");
    memset(&cfg, 0, sizeof cfg);
    cfg.port = e && *e ? atoi(e) : 3390;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(cfg.table, sizeof cfg.table, "kit_%d_%ld", (int)getpid(), (long)(ts.tv_nsec / 1000));
    between(&cfg);
    memset(&kb, 0, sizeof kb);
    kb.name = "mysql";
    kb.open = open_my;
    kb.ctx = &cfg;
    kb.ttl_ms = 2000;
    kb.transition_ms = 1000;
    kb.between = between;
    kb.mute = mute_my;
    cfg_now = &cfg;
    kb.fenced_write = fenced_write;
    kb.fenced_read = fenced_read;
    rc = kit_run(&kb, argc, argv);
    if (cfg.app) mysql_close(cfg.app);
    return rc;
}
