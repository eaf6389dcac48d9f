/* kit_sql.c -- the shared backend kit (tests/kit.c) on SQLite.
 *
 * Every open() is a new connection (backend) on one database file in a fresh mkdtemp()
 * directory, as separate processes on one file would be. With SIMBA_KIT_SQL_MEMORY=1 the
 * same cases run on ":memory:", the process's one in-memory database, which must behave as
 * a shared file does (multiContend shortened to 5 s).
 * mute: another connection holds the database's write lock (a transaction that does not end,
 * as another program's can): every write of the backends waits for it (reads go on).
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
    cfg_now = &cfg;
    kb.ttl_ms = 2000;
    kb.transition_ms = 1000;
    rc = kit_run(&kb, argc, argv);
    if (!getenv("SIMBA_KEEP_TMP")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cfg.dir);
        if (system(cmd) != 0) fprintf(stderr, "kit_sql: could not remove %s\n", cfg.dir);
    }
    return rc;
}
