/* kit_sql.c -- the shared backend kit (tests/kit.c) on SQLite.
 *
 * Every open() is a new connection (backend) on one database file in a fresh mkdtemp()
 * directory, as separate processes on one file would be. With SIMBA_KIT_SQL_MEMORY=1 the
 * same cases run on ":memory:", the process's one in-memory database, which must behave as
 * a shared file does (multiContend shortened to 5 s).
 * mute: another connection holds the database's write lock (a transaction that does not end,
 * as another program's can): every write of the backends waits for it (reads go on).
 * The fenced write is the application's own connection on the same database: BEGIN
 * IMMEDIATE, simba_sql_check_fence, an upsert into a table of its own, COMMIT.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"
#include "kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct kit_sql_cfg {
    char dir[256];
    char path[300];
    sqlite3 *app; /* the application's connection (fenced writes) */
} kit_sql_cfg;

static kit_sql_cfg *cfg_now;
static sqlite3 *mute_db;

static void mute_sql(simba_backend *be, int on) {
    (void)be;
    if (on && !mute_db) {
        const char *path = strcmp(cfg_now->path, ":memory:") == 0 ? SIMBA__SQL_MEMORY_URI : cfg_now->path;
        if (sqlite3_open_v2(path, &mute_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL) != SQLITE_OK ||
            sqlite3_exec(mute_db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
            fprintf(stderr, "kit_sql: mute: %s\n", mute_db ? sqlite3_errmsg(mute_db) : "cannot open");
    } else if (!on && mute_db) {
        sqlite3_exec(mute_db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(mute_db);
        mute_db = NULL;
    }
}

static simba_result open_sql(simba_loop *loop, void *ctx, simba_backend **out) {
    kit_sql_cfg *cfg = (kit_sql_cfg *)ctx;
    simba_sql_desc d;
    char err[256];
    simba_result rc;
    memset(&d, 0, sizeof d);
    d.path = cfg->path;
    d.errbuf = err;
    d.errbuf_cap = sizeof err;
    rc = simba_sql_open(loop, &d, out);
    if (rc != SIMBA_OK) fprintf(stderr, "kit_sql: open %s: %s (%s)\n", cfg->path, simba_strerror(rc), err);
    return rc;
}

/* The application's connection, opened once (blocking: test side), with its data table. */
static sqlite3 *app_db(kit_sql_cfg *cfg, char *err, size_t errcap) {
    const char *path = strcmp(cfg->path, ":memory:") == 0 ? SIMBA__SQL_MEMORY_URI : cfg->path;
    if (cfg->app) return cfg->app;
    if (sqlite3_open_v2(path, &cfg->app, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL) != SQLITE_OK ||
        sqlite3_busy_timeout(cfg->app, 5000) != SQLITE_OK ||
        sqlite3_exec(cfg->app, "CREATE TABLE IF NOT EXISTS app_data (name TEXT, key TEXT, value TEXT, fence INTEGER,"
                               " PRIMARY KEY (name, key))", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errcap, "app connection: %s", sqlite3_errmsg(cfg->app));
        sqlite3_close(cfg->app);
        cfg->app = NULL;
    }
    return cfg->app;
}

static simba_result fenced_write(simba_loop *loop, simba_backend *be, void *ctx, const char *name, uint64_t fence,
                                 const char *key, const char *value, char *err, size_t errcap) {
    sqlite3 *db = app_db((kit_sql_cfg *)ctx, err, errcap);
    sqlite3_stmt *st = NULL;
    simba_result rc;
    (void)loop;
    (void)be;
    if (!db) return SIMBA_EBACKEND;
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errcap, "BEGIN IMMEDIATE: %s", sqlite3_errmsg(db));
        return SIMBA_EBACKEND;
    }
    rc = simba_sql_check_fence(db, NULL, name, fence, err, errcap);
    if (rc == SIMBA_OK) {
        if (sqlite3_prepare_v2(db, "INSERT INTO app_data VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name, key) DO UPDATE"
                                   " SET value = excluded.value, fence = excluded.fence", -1, &st, NULL) != SQLITE_OK ||
            sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_bind_text(st, 3, value, -1, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_bind_int64(st, 4, (sqlite3_int64)fence) != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE) {
            snprintf(err, errcap, "upsert: %s", sqlite3_errmsg(db));
            rc = SIMBA_EBACKEND;
        }
        sqlite3_finalize(st);
    }
    if (sqlite3_exec(db, rc == SIMBA_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK && rc == SIMBA_OK) {
        snprintf(err, errcap, "COMMIT: %s", sqlite3_errmsg(db));
        rc = SIMBA_EBACKEND;
    }
    return rc;
}

static int fenced_read(simba_loop *loop, simba_backend *be, void *ctx, const char *name, const char *key, char *out,
                       size_t cap, char *err, size_t errcap) {
    sqlite3 *db = app_db((kit_sql_cfg *)ctx, err, errcap);
    sqlite3_stmt *st = NULL;
    int rc;
    (void)loop;
    (void)be;
    if (!db) return -1;
    out[0] = 0;
    rc = sqlite3_prepare_v2(db, "SELECT value FROM app_data WHERE name = ?1 AND key = ?2", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        snprintf(err, errcap, "read: %s", sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    kit_sql_cfg cfg;
    kit_backend kb;
    int rc;
    char cmd[600];
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.dir, sizeof cfg.dir, "%s/simba_kit_sql_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(cfg.dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(cfg.path, sizeof cfg.path, "%s/kit.db", cfg.dir);
    memset(&kb, 0, sizeof kb);
    kb.name = "sqlite";
    if (getenv("SIMBA_KIT_SQL_MEMORY") && strcmp(getenv("SIMBA_KIT_SQL_MEMORY"), "1") == 0) {
        snprintf(cfg.path, sizeof cfg.path, ":memory:");
        kb.name = "sqlite :memory:";
        kb.multi_ms = 5000;
    }
    kb.open = open_sql;
    kb.ctx = &cfg;
    kb.mute = mute_sql;
    kb.mute_all = 1;
    cfg_now = &cfg;
    kb.ttl_ms = 2000;
    kb.transition_ms = 1000;
    kb.fenced_write = fenced_write;
    kb.fenced_read = fenced_read;
    rc = kit_run(&kb, argc, argv);
    sqlite3_close(cfg.app);
    if (!getenv("SIMBA_KEEP_TMP")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cfg.dir);
        if (system(cmd) != 0) fprintf(stderr, "kit_sql: could not remove %s\n", cfg.dir);
    }
    return rc;
}
