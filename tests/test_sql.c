/* test_sql.c -- SQLite-specific tests of simba_sql.h against a real database file.
 *
 * Every case works in its own file under one mkdtemp() directory (removed at the end).
 * Cases that check the row semantics call the backend's executor directly (exact, no
 * timers); the rest go through the core (simba_contend) like an application would.
 */
#define SIMBA_IMPLEMENTATION
#define SIMBA_SQL_TEST_HOOKS /* simba_sql_test_after_checkpoint */
#include "../simba_sql.h"
#include "../simba_memory.h"
#include "check.h"
/* The driver only: the cases count callbacks in recorders of their own (counts, fence_log)
   and read no times from them. */
#define FIXTURE_DRIVER
#define FIXTURE_DRIVER_ONLY
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];
static int dbseq;

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A fresh database path in the temp dir. */
static const char *newdb(char *buf, size_t cap) {
    snprintf(buf, cap, "%s/t%d.db", tmpdir, ++dbseq);
    return buf;
}

static void drv_loop_desc(simba_loop_desc *ld) { (void)ld; } /* the defaults */
static simba_loop *newloop(void) {
    simba_loop *loop = NULL;
    simba_loop_desc d;
    memset(&d, 0, sizeof d);
    drv_loop_desc(&d);
    if (simba_loop_new(&d, &loop) != SIMBA_OK) return NULL;
    return loop;
}

static simba_result open_be(simba_loop *loop, const char *path, const char *table, simba_backend **out) {
    simba_sql_desc d;
    memset(&d, 0, sizeof d);
    d.path = path;
    d.table = table;
    return simba_sql_open(loop, &d, out);
}

static simba__sql *impl_of(simba_backend *be) { return (simba__sql *)simba_backend_impl(be); }

/* One request straight through the executor, retrying while the database is locked. */
static simba_result exec_op(simba_backend *be, simba_op op, const char *mutex, const char *who, int64_t ttl,
                            int64_t tr, simba_reply *rep, char *owner, size_t cap) {
    int64_t until = mono_ms() + 2000;
    int rc;
    while ((rc = simba__sql_exec(impl_of(be), op, mutex, who, ttl, tr, 0, rep)) == SIMBA__SQL_BUSY) {
        if (mono_ms() > until) return SIMBA_EBUSY;
        poll(NULL, 0, 1);
    }
    snprintf(owner, cap, "%s", rep->owner ? rep->owner : "");
    rep->owner = owner;
    return rep->rc;
}

/* A raw connection for looking at the table from outside. */
static sqlite3 *raw_open(const char *path) {
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 2000);
    return db;
}

static int64_t raw_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    int64_t v = -999;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* A new row's fence starts at its creation time in ms x 2^10 (the floor), so that a lost
   file made again cannot give a fence the lost one gave. */
#define FLOOR_UNIT ((uint64_t)1 << 10)
static int floor_is_now(uint64_t floor) {
    int64_t now = wall_ms(), at = (int64_t)(floor / FLOOR_UNIT);
    return floor % FLOOR_UNIT == 0 && at <= now && at > now - 60000;
}

/* ---- database time ------------------------------------------------------------------ */

/* The backend relies on SQLite evaluating 'now' once per sqlite3_step(): check it over a
   statement that runs long enough to cross many milliseconds. */
TEST(now_is_stable_within_a_step) {
    char path[300];
    sqlite3 *db = raw_open(newdb(path, sizeof path));
    sqlite3_stmt *st = NULL;
    int64_t t0, t1, w0, w1, lo, hi, rows;
    REQUIRE(db != NULL);
    REQUIRE(sqlite3_prepare_v2(db,
                               "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 150000)"
                               " SELECT min(t), max(t), count(*) FROM (SELECT " SIMBA__SQLITE_NOW
                               " AS t, randomblob(16) FROM c)",
                               -1, &st, NULL) == SQLITE_OK);
    w0 = wall_ms();
    t0 = mono_ms();
    CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
    t1 = mono_ms();
    w1 = wall_ms();
    lo = sqlite3_column_int64(st, 0);
    hi = sqlite3_column_int64(st, 1);
    rows = sqlite3_column_int64(st, 2);
    sqlite3_finalize(st);
    fprintf(stderr, "  one step took %lld ms over %lld rows; now spread %lld ms\n", (long long)(t1 - t0),
            (long long)rows, (long long)(hi - lo));
    CHECK(t1 - t0 >= 5); /* otherwise the check proves nothing */
    CHECK_EQ(hi, lo);
    /* and it is the epoch in ms, taken during that step */
    CHECK(lo >= w0 - 2 && lo <= w1 + 2);
    sqlite3_close(db);
}

/* The statements bind NOW from C (simba__sql_now): it must be the instant SQLite's own
   expression gives, so that rows written by another program with it compare the same. Checked both ways round, 200 times. */
TEST(bound_now_is_sqlite_now) {
    char path[300];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    sqlite3_stmt *st = NULL;
    int i, bad = 0;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    REQUIRE(simba__sql_setup(impl_of(be)) == SQLITE_OK);
    REQUIRE(sqlite3_prepare_v2(impl_of(be)->db, "SELECT " SIMBA__SQLITE_NOW, -1, &st, NULL) == SQLITE_OK);
    for (i = 0; i < 200; i++) {
        int64_t c0 = simba__sql_now(impl_of(be)), q, c1;
        REQUIRE(sqlite3_step(st) == SQLITE_ROW);
        q = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
        c1 = simba__sql_now(impl_of(be));
        if (q < c0 || q > c1) bad++;
    }
    sqlite3_finalize(st);
    CHECK_EQ(bad, 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- checkpoints off the loop ------------------------------------------------------ */

static off_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

TEST(checkpoint_bad_input) {
    char path[300], wal[320], err[256];
    int frames = 7, copied = 7;
    FILE *f;
    CHECK_RC(simba_sql_checkpoint(NULL, &frames, &copied, err, sizeof err), SIMBA_EINVAL);
    CHECK(strstr(err, "path is NULL") != NULL);
    CHECK_EQ(frames, -1);
    CHECK_EQ(copied, -1);
    CHECK_RC(simba_sql_checkpoint("", NULL, NULL, err, sizeof err), SIMBA_EINVAL);
    CHECK_RC(simba_sql_checkpoint(":memory:", NULL, NULL, err, sizeof err), SIMBA_EINVAL);
    CHECK(strstr(err, "in-memory") != NULL);
    CHECK_RC(simba_sql_checkpoint("file:/x?vfs=memdb", NULL, NULL, NULL, 0), SIMBA_EINVAL);
    newdb(path, sizeof path); /* no such file: refused, and not created */
    CHECK_RC(simba_sql_checkpoint(path, NULL, NULL, err, sizeof err), SIMBA_EBACKEND);
    CHECK(strstr(err, path) != NULL);
    CHECK_EQ((long long)file_size(path), -1);
    REQUIRE((f = fopen(path, "w")) != NULL); /* not a database */
    fputs("this is not a database, but it is long enough to have a header of a hundred bytes, "
          "which is what sqlite reads first...........................................\n", f);
    fclose(f);
    CHECK_RC(simba_sql_checkpoint(path, NULL, NULL, err, sizeof err), SIMBA_EBACKEND);
    CHECK(strstr(err, "not a database") != NULL);
    snprintf(wal, sizeof wal, "%s-wal", path);
    CHECK_EQ((long long)file_size(wal), -1);
    { /* a database not in WAL mode: nothing to copy, and no -wal or -shm file made for it */
        sqlite3 *db = NULL;
        char shm[320];
        remove(path);
        REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
        CHECK(sqlite3_exec(db, "PRAGMA journal_mode=DELETE; CREATE TABLE t (k); INSERT INTO t VALUES (1)", NULL, NULL, NULL) ==
              SQLITE_OK);
        sqlite3_close(db);
        frames = copied = 7;
        CHECK_RC(simba_sql_checkpoint(path, &frames, &copied, err, sizeof err), SIMBA_OK);
        CHECK_EQ(frames, -1);
        CHECK_EQ(copied, -1);
        snprintf(shm, sizeof shm, "%s-shm", path);
        CHECK_EQ((long long)file_size(shm), -1);
        CHECK_EQ((long long)file_size(wal), -1);
    }
}

/* A loop whose backend never checkpoints (checkpoint = -1) keeps a short WAL when a thread
   checkpoints beside it: the loop's writes never fail meanwhile, and the WAL stays a
   fraction of what it grows to without the thread. */
struct ckpt_thread {
    const char *path;
    volatile int stop;
    int calls, busy, errors;
};
static void *ckpt_main(void *arg) {
    struct ckpt_thread *t = (struct ckpt_thread *)arg;
    while (!t->stop) {
        simba_result rc = simba_sql_checkpoint(t->path, NULL, NULL, NULL, 0);
        t->calls++;
        if (rc == SIMBA_EBUSY) t->busy++;
        else if (rc != SIMBA_OK) t->errors++;
        poll(NULL, 0, 5);
    }
    return NULL;
}
static off_t renew_rounds(simba_backend *be, const char *wal, int rounds, int *failed) {
    char name[32], owner[SIMBA_ID_MAX + 1];
    simba_reply rep;
    off_t most = 0;
    int r, i;
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < 300; i++) {
            snprintf(name, sizeof name, "ck%03d", i);
            if (exec_op(be, SIMBA_OP_ACQUIRE, name, "A", 60000, 1000, &rep, owner, sizeof owner) != SIMBA_OK ||
                strcmp(owner, "A") != 0)
                (*failed)++;
        }
        if (file_size(wal) > most) most = file_size(wal);
        /* Rounds paced as renewals come (W4: a write transaction every 20 ms): the WAL
           restarts from its start only at a write that finds it all copied. */
        poll(NULL, 0, 20);
    }
    return most;
}
TEST(checkpoint_off_the_loop_keeps_the_wal_short) {
    char path[300], wal[320];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_sql_desc d;
    struct ckpt_thread t;
    pthread_t th;
    int failed = 0, frames = -2, copied = -2;
    off_t with, without;
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    d.path = newdb(path, sizeof path);
    d.checkpoint = -1;
    snprintf(wal, sizeof wal, "%s-wal", path);
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    memset(&t, 0, sizeof t);
    t.path = path;
    REQUIRE(pthread_create(&th, NULL, ckpt_main, &t) == 0);
    with = renew_rounds(be, wal, 40, &failed);
    t.stop = 1;
    pthread_join(th, NULL);
    /* The same writes again, with nobody checkpointing: the WAL (reused from its start
       after a complete checkpoint, never shrunk) grows past what it was. */
    without = renew_rounds(be, wal, 40, &failed);
    CHECK_RC(simba_sql_checkpoint(path, &frames, &copied, NULL, 0), SIMBA_OK);
    CHECK(frames >= 12000); /* the loop alone never checkpointed (SQLite's own would at 1000) */
    CHECK_EQ(copied, frames);
    fprintf(stderr, "  WAL: %lld bytes at most without checkpoints, %lld with %d of them beside (%d busy)\n",
            (long long)without, (long long)with, t.calls, t.busy);
    CHECK_EQ(failed, 0);
    CHECK_EQ(t.errors, 0);
    CHECK(t.calls > t.busy);
    CHECK(with > 0 && with * 4 < without);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* Which thread syncs: a VFS of the test's own, wrapped around the default one, counts the
   xSync calls made from the thread that opened the backend (the loop's). */
static sqlite3_vfs *sync_real;
static pthread_t sync_loop_thread;
static volatile int sync_by_loop, sync_by_others;
typedef struct sync_file {
    sqlite3_file base;
    sqlite3_file *real; /* follows this struct in the same allocation */
} sync_file;
#define SYNC_REAL(f) (((sync_file *)(void *)(f))->real)
static int sf_close(sqlite3_file *f) { return SYNC_REAL(f)->pMethods->xClose(SYNC_REAL(f)); }
static int sf_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return SYNC_REAL(f)->pMethods->xRead(SYNC_REAL(f), b, n, o); }
static int sf_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    return SYNC_REAL(f)->pMethods->xWrite(SYNC_REAL(f), b, n, o);
}
static int sf_truncate(sqlite3_file *f, sqlite3_int64 n) { return SYNC_REAL(f)->pMethods->xTruncate(SYNC_REAL(f), n); }
static int sf_sync(sqlite3_file *f, int flags) {
    if (pthread_equal(pthread_self(), sync_loop_thread)) sync_by_loop++;
    else sync_by_others++;
    return SYNC_REAL(f)->pMethods->xSync(SYNC_REAL(f), flags);
}
static int sf_size(sqlite3_file *f, sqlite3_int64 *n) { return SYNC_REAL(f)->pMethods->xFileSize(SYNC_REAL(f), n); }
static int sf_lock(sqlite3_file *f, int l) { return SYNC_REAL(f)->pMethods->xLock(SYNC_REAL(f), l); }
static int sf_unlock(sqlite3_file *f, int l) { return SYNC_REAL(f)->pMethods->xUnlock(SYNC_REAL(f), l); }
static int sf_check(sqlite3_file *f, int *out) { return SYNC_REAL(f)->pMethods->xCheckReservedLock(SYNC_REAL(f), out); }
static int sf_fcntl(sqlite3_file *f, int op, void *arg) { return SYNC_REAL(f)->pMethods->xFileControl(SYNC_REAL(f), op, arg); }
static int sf_sector(sqlite3_file *f) { return SYNC_REAL(f)->pMethods->xSectorSize(SYNC_REAL(f)); }
static int sf_caps(sqlite3_file *f) { return SYNC_REAL(f)->pMethods->xDeviceCharacteristics(SYNC_REAL(f)); }
static int sf_shm_map(sqlite3_file *f, int i, int sz, int ext, void volatile **pp) {
    return SYNC_REAL(f)->pMethods->xShmMap(SYNC_REAL(f), i, sz, ext, pp);
}
static int sf_shm_lock(sqlite3_file *f, int off, int n, int flags) { return SYNC_REAL(f)->pMethods->xShmLock(SYNC_REAL(f), off, n, flags); }
static void sf_shm_barrier(sqlite3_file *f) { SYNC_REAL(f)->pMethods->xShmBarrier(SYNC_REAL(f)); }
static int sf_shm_unmap(sqlite3_file *f, int del) { return SYNC_REAL(f)->pMethods->xShmUnmap(SYNC_REAL(f), del); }
/* version 2 of the methods: WAL needs the shm calls, nothing of version 3 (mmap) */
static const sqlite3_io_methods sync_methods = {2,        sf_close, sf_read,    sf_write,   sf_truncate,    sf_sync,
                                                 sf_size,  sf_lock,  sf_unlock,  sf_check,   sf_fcntl,       sf_sector,
                                                 sf_caps,  sf_shm_map, sf_shm_lock, sf_shm_barrier, sf_shm_unmap, NULL, NULL};
static int sv_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
    sync_file *sf = (sync_file *)(void *)f;
    int rc;
    (void)v;
    sf->real = (sqlite3_file *)(void *)(sf + 1);
    rc = sync_real->xOpen(sync_real, name, sf->real, flags, out);
    /* the methods are set only on success: SQLite closes only a file that has them */
    sf->base.pMethods = rc == SQLITE_OK && sf->real->pMethods ? &sync_methods : NULL;
    return rc;
}
static int sv_delete(sqlite3_vfs *v, const char *n, int d) { (void)v; return sync_real->xDelete(sync_real, n, d); }
static int sv_access(sqlite3_vfs *v, const char *n, int f, int *o) { (void)v; return sync_real->xAccess(sync_real, n, f, o); }
static int sv_full(sqlite3_vfs *v, const char *n, int c, char *o) { (void)v; return sync_real->xFullPathname(sync_real, n, c, o); }
static int sv_rand(sqlite3_vfs *v, int n, char *o) { (void)v; return sync_real->xRandomness(sync_real, n, o); }
static int sv_sleep(sqlite3_vfs *v, int us) { (void)v; return sync_real->xSleep(sync_real, us); }
static int sv_time(sqlite3_vfs *v, double *o) { (void)v; return sync_real->xCurrentTime(sync_real, o); }
static int sv_err(sqlite3_vfs *v, int n, char *o) { (void)v; return sync_real->xGetLastError(sync_real, n, o); }
static int sv_time64(sqlite3_vfs *v, sqlite3_int64 *o) { (void)v; return sync_real->xCurrentTimeInt64(sync_real, o); }
static sqlite3_vfs sync_vfs;

/* With checkpoints off the loop, the loop's thread never waits for the disk: the WAL header
   of a new WAL is synced by simba_sql_checkpoint(), which starts the WAL over itself once
   every frame is copied, instead of by the loop's next write. */
struct ckpt_call {
    const char *path;
    int frames, copied;
    simba_result rc;
};
static void *ckpt_call_main(void *arg) {
    struct ckpt_call *c = (struct ckpt_call *)arg;
    c->rc = simba_sql_checkpoint(c->path, &c->frames, &c->copied, NULL, 0);
    return NULL;
}
/* One simba_sql_checkpoint() call from a thread of its own (the counting VFS tells the
   loop's syncs from others' by thread), waited for. 0 when the thread cannot start. */
static int ckpt_in_thread(const char *path, struct ckpt_call *c) {
    pthread_t th;
    memset(c, 0, sizeof *c);
    c->path = path;
    if (pthread_create(&th, NULL, ckpt_call_main, c) != 0) return 0;
    pthread_join(th, NULL);
    return 1;
}
/* A loop whose SQLite backend never checkpoints (checkpoint = -1), on a new file at path
   (wal: its WAL), with its rows written once. NULL when it cannot open. */
static simba_loop *ckpt_loop(char *path, size_t path_cap, char *wal, size_t wal_cap, simba_backend **be, int *failed) {
    simba_loop *loop = newloop();
    simba_sql_desc d;
    if (!loop) return NULL;
    memset(&d, 0, sizeof d);
    d.path = newdb(path, path_cap);
    d.checkpoint = -1;
    snprintf(wal, wal_cap, "%s-wal", path);
    if (simba_sql_open(loop, &d, be) != SIMBA_OK) {
        simba_loop_free(loop);
        return NULL;
    }
    (void)renew_rounds(*be, wal, 1, failed);
    return loop;
}
/* Makes the counting VFS the default, and the calling thread the loop's; undone by
   sync_vfs_remove(). */
static int sync_vfs_install(void) {
    if (!sync_real) sync_real = sqlite3_vfs_find(NULL); /* (the first time: the real default) */
    if (!sync_real) return 0;
    memset(&sync_vfs, 0, sizeof sync_vfs);
    sync_vfs.iVersion = 2;
    sync_vfs.szOsFile = (int)sizeof(sync_file) + sync_real->szOsFile;
    sync_vfs.mxPathname = sync_real->mxPathname;
    sync_vfs.zName = "simba-test-sync";
    sync_vfs.xOpen = sv_open;
    sync_vfs.xDelete = sv_delete;
    sync_vfs.xAccess = sv_access;
    sync_vfs.xFullPathname = sv_full;
    sync_vfs.xRandomness = sv_rand;
    sync_vfs.xSleep = sv_sleep;
    sync_vfs.xCurrentTime = sv_time;
    sync_vfs.xGetLastError = sv_err;
    sync_vfs.xCurrentTimeInt64 = sv_time64;
    if (sqlite3_vfs_register(&sync_vfs, 1) != SQLITE_OK) return 0; /* the default while a case runs */
    sync_loop_thread = pthread_self();
    sync_by_loop = sync_by_others = 0;
    return 1;
}
/* (sync_real stays the one found first: the default again once this VFS is gone) */
static int sync_vfs_remove(void) {
    return sqlite3_vfs_unregister(&sync_vfs) == SQLITE_OK;
}

TEST(checkpoint_thread_takes_the_wal_header_sync) {
    char path[300], wal[320];
    simba_loop *loop;
    simba_backend *be = NULL;
    int failed = 0, round, loop_syncs;
    REQUIRE(sync_vfs_install());
    REQUIRE((loop = ckpt_loop(path, sizeof path, wal, sizeof wal, &be, &failed)) != NULL); /* the table and its rows exist */
    sync_by_loop = sync_by_others = 0;
    for (round = 0; round < 5; round++) {
        struct ckpt_call c;
        REQUIRE(ckpt_in_thread(path, &c));
        CHECK_RC(c.rc, SIMBA_OK);
        CHECK(c.frames > 0 && c.copied == c.frames); /* nothing else wrote meanwhile */
        (void)renew_rounds(be, wal, 1, &failed);
    }
    loop_syncs = sync_by_loop;
    fprintf(stderr, "  syncs: %d by the loop's thread, %d by the checkpointing thread over 5 checkpoints\n", loop_syncs,
            sync_by_others);
    CHECK_EQ(failed, 0);
    CHECK(sync_by_others >= 5); /* the checkpoints themselves sync (WAL, then the database) */
    CHECK_EQ(loop_syncs, 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    REQUIRE(sync_vfs_remove());
}

/* The same when a write of the loop's comes between a complete checkpoint and the
   checkpointer's own first write of the new WAL (W4: after 4 of ~20 checkpoints): the
   checkpointer's read snapshot, kept until it holds the write lock, stops the loop's
   writer from starting the WAL over (it appends), so the loop's thread does not sync. The test hook holds the checkpointer in that window while the loop writes; the
   WAL passes 1,000 frames (SQLite's automatic checkpoint) on the way. */
static pthread_mutex_t race_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t race_cv = PTHREAD_COND_INITIALIZER;
static int race_stage; /* 1: the checkpoint is done; 2: the loop has written */
static void race_after_checkpoint(void) {
    pthread_mutex_lock(&race_mu);
    race_stage = 1;
    pthread_cond_broadcast(&race_cv);
    while (race_stage != 2) pthread_cond_wait(&race_cv, &race_mu);
    pthread_mutex_unlock(&race_mu);
}
TEST(loop_write_right_after_a_checkpoint_does_not_sync) {
    char path[300], wal[320];
    simba_loop *loop;
    simba_backend *be = NULL;
    int failed = 0, round, complete = 0;
    REQUIRE(sync_vfs_install());
    REQUIRE((loop = ckpt_loop(path, sizeof path, wal, sizeof wal, &be, &failed)) != NULL);
    sync_by_loop = sync_by_others = 0;
    simba_sql_test_after_checkpoint = race_after_checkpoint;
    for (round = 0; round < 6; round++) {
        struct ckpt_call c;
        pthread_t th;
        memset(&c, 0, sizeof c);
        c.path = path;
        race_stage = 0;
        REQUIRE(pthread_create(&th, NULL, ckpt_call_main, &c) == 0);
        pthread_mutex_lock(&race_mu);
        while (race_stage != 1) pthread_cond_wait(&race_cv, &race_mu);
        pthread_mutex_unlock(&race_mu);

        (void)renew_rounds(be, wal, 1, &failed); /* the loop writes in the window */
        pthread_mutex_lock(&race_mu);
        race_stage = 2;
        pthread_cond_broadcast(&race_cv);
        pthread_mutex_unlock(&race_mu);
        pthread_join(th, NULL);
        CHECK_RC(c.rc, SIMBA_OK);
        complete += c.frames > 1 && c.copied == c.frames;
    }
    simba_sql_test_after_checkpoint = NULL;
    fprintf(stderr, "  %d of 6 checkpoints complete; syncs: %d by the loop's thread, %d by the checkpointing thread\n",
            complete, sync_by_loop, sync_by_others);
    CHECK_EQ(failed, 0);
    CHECK_EQ(complete, 6); /* each left a WAL all copied: the window was there */
    CHECK_EQ(sync_by_loop, 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    REQUIRE(sync_vfs_remove());
}

/* And when the loop writes nothing between two checkpoints (quiet spans between renewal
   waves): the second call finds only the first one's own write of the new WAL, copies it
   and starts the WAL over again, so the loop's next write still appends. */
TEST(idle_checkpoint_starts_the_wal_over_itself) {
    char path[300], wal[320];
    simba_loop *loop;
    simba_backend *be = NULL;
    int failed = 0, round, idle_calls = 0;
    REQUIRE(sync_vfs_install());
    REQUIRE((loop = ckpt_loop(path, sizeof path, wal, sizeof wal, &be, &failed)) != NULL);
    sync_by_loop = sync_by_others = 0;
    for (round = 0; round < 4; round++) {
        int call;
        for (call = 0; call < 2; call++) { /* the second call: nothing written since the first */
            struct ckpt_call c;
            REQUIRE(ckpt_in_thread(path, &c));
            CHECK_RC(c.rc, SIMBA_OK);
            if (call == 1) idle_calls += c.frames == 1 && c.copied == 1;
        }
        (void)renew_rounds(be, wal, 1, &failed);
    }
    fprintf(stderr, "  %d of 4 second calls found and copied only their own frame; syncs: %d by the loop's thread, "
            "%d by the checkpointing thread\n", idle_calls, sync_by_loop, sync_by_others);
    CHECK_EQ(failed, 0);
    CHECK_EQ(idle_calls, 4);
    CHECK_EQ(sync_by_loop, 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    REQUIRE(sync_vfs_remove());
}

/* simba_sql_checkpoint() opens connections of its own and closes them: closing a
   descriptor of the file would drop every POSIX lock this process holds on it, among them
   the loop connection's SHARED lock on the database (which tells another process closing
   the last connection not to delete the WAL) and its lock on the -shm file (which tells
   another process not to start the wal-index afresh). SQLite's own connections share the
   locks of the process; a child process asks (F_GETLK) whether they are still held. */
static int sql_lock_held(const char *path, off_t start, off_t len) {
    pid_t kid = fork();
    int st = 0;
    if (kid == 0) {
        struct flock fl;
        int fd = open(path, O_RDONLY);
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = start;
        fl.l_len = len;
        _exit(fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 ? (fl.l_type == F_UNLCK ? 2 : 1) : 3);
    }
    if (kid < 0 || waitpid(kid, &st, 0) != kid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st) == 1 ? 1 : WEXITSTATUS(st) == 2 ? 0 : -1;
}
/* SQLite's unix VFS: a connection's SHARED lock on the database (SHARED_FIRST = PENDING_BYTE
   + 2, SHARED_SIZE 510 bytes), and the -shm file's "dead man switch" byte (120 + 8) that
   every process using the wal-index holds, so that no other process starts it afresh. */
static int sql_shared_lock_held(const char *path) {
    char shm[320];
    int db = sql_lock_held(path, 0x40000000 + 2, 510), dms;
    snprintf(shm, sizeof shm, "%s-shm", path);
    dms = sql_lock_held(shm, 128, 1);
    return db < 0 || dms < 0 ? -1 : db && dms;
}
TEST(checkpoint_keeps_this_process_locks) {
    char path[300], wal[320];
    simba_loop *loop;
    simba_backend *be = NULL;
    int failed = 0, frames = -1, copied = -1, before, after;
    REQUIRE((loop = ckpt_loop(path, sizeof path, wal, sizeof wal, &be, &failed)) != NULL);
    (void)renew_rounds(be, wal, 1, &failed); /* (a second round: frames to copy) */
    before = sql_shared_lock_held(path);
    CHECK_RC(simba_sql_checkpoint(path, &frames, &copied, NULL, 0), SIMBA_OK);
    CHECK(frames > 1 && copied == frames);
    after = sql_shared_lock_held(path);
    (void)renew_rounds(be, wal, 1, &failed); /* and the loop goes on */
    fprintf(stderr, "  the loop's locks on the database and its -shm file: %s before the checkpoint, %s after\n",
            before == 1 ? "held" : before == 0 ? "not held" : "unknown", after == 1 ? "held" : after == 0 ? "not held" : "unknown");
    CHECK_EQ(before, 1);
    CHECK_EQ(after, 1);
    CHECK_EQ(failed, 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- opening ------------------------------------------------------------------------ */

TEST(open_errors) {
    simba_loop *loop = newloop();
    simba_backend *be = (simba_backend *)1;
    simba_sql_desc d;
    char err[512], path[300], bad[300];
    FILE *f;
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    d.errbuf = err;
    d.errbuf_cap = sizeof err;

    CHECK_RC(simba_sql_open(NULL, &d, &be), SIMBA_EINVAL);
    CHECK_RC(simba_sql_open(loop, NULL, &be), SIMBA_EINVAL);
    CHECK_RC(simba_sql_open(loop, &d, NULL), SIMBA_EINVAL);
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL); /* no path */
    CHECK(be == NULL);
    d.path = "";
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);

    /* a path under a regular file: fails even for root */
    d.path = "/etc/passwd/x.db";
    err[0] = 0;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EBACKEND);
    CHECK(be == NULL);
    CHECK(strstr(err, "unable to open") != NULL);
    fprintf(stderr, "  /etc/passwd/x.db: %s\n", err);

    /* a directory that does not exist */
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.db", tmpdir);
    d.path = bad;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EBACKEND);

    /* a directory instead of a file */
    d.path = tmpdir;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EBACKEND);

    /* a file that is not a database */
    newdb(path, sizeof path);
    f = fopen(path, "wb");
    REQUIRE(f != NULL);
    {
        int i;
        for (i = 0; i < 64; i++) fputs("this is not an sqlite database, just text. ", f);
    }
    fclose(f);
    d.path = path;
    err[0] = 0;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EBACKEND);
    CHECK(strstr(err, "not a database") != NULL);
    fprintf(stderr, "  garbage file: %s\n", err);

    /* table names: identifiers only */
    d.path = newdb(path, sizeof path);
    {
        static const char *bad_tables[] = {"bad name", "x;drop", "a\"b", "a'b", "1abc", "sqlite_master",
                                           "SQLITE_x", "t-1", "\xc3\xa9t\xc3\xa9",
                                           "a1234567890123456789012345678901234567890123456789012345678901234"};
        size_t i;
        for (i = 0; i < sizeof bad_tables / sizeof bad_tables[0]; i++) {
            d.table = bad_tables[i];
            CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
        }
    }
    d.table = "_Locks_2";
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_OK);
    CHECK(err[0] == 0);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    d.table = NULL;
    d.busy_retry_ms = -1;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

TEST(tables_are_separate) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *a = NULL, *b = NULL;
    simba_reply rep;
    sqlite3 *db;
    REQUIRE(loop != NULL);
    newdb(path, sizeof path);
    REQUIRE(open_be(loop, path, NULL, &a) == SIMBA_OK);
    /* the longest table name allowed (64 bytes) fits every statement */
    REQUIRE(open_be(loop, path, "other_locks_4567890123456789012345678901234567890123456789012345", &b) == SIMBA_OK);
    CHECK_RC(exec_op(a, SIMBA_OP_ACQUIRE, "m", "A", 5000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_RC(exec_op(b, SIMBA_OP_ACQUIRE, "m", "B", 5000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "B");
    db = raw_open(path);
    REQUIRE(db != NULL);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM simba_mutex"), 1);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM other_locks_4567890123456789012345678901234567890123456789012345"), 1);
    sqlite3_close(db);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- names -------------------------------------------------------------------------- */

TEST(bad_names_rejected_table_unaffected) {
    char path[300], owner[SIMBA_ID_MAX + 1], longname[SIMBA_NAME_MAX + 2], longid[SIMBA_ID_MAX + 2];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_contend_desc cd;
    simba_reply rep;
    sqlite3 *db;
    size_t i;
    static const char *bad[] = {"a'b", "x'; DROP TABLE simba_mutex; --", "x\";DROP TABLE simba_mutex;--",
                                "a b", "", ".", "..", "tab\t", "new\nline", "semi;'quote", "x;DROP", ";"};
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    /* one legitimate row first, to see that it survives */
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "keep", "A", 60000, 1000, &rep, owner, sizeof owner), SIMBA_OK);

    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0; /* SIMBA_NAME_MAX + 1 bytes */
    memset(longid, 'i', sizeof longid - 1);
    longid[sizeof longid - 1] = 0;

    memset(&cd, 0, sizeof cd);
    cd.contender_id = "A";
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cd.mutex = bad[i];
        svc = (simba_service *)1;
        CHECK_RC(simba_contend(loop, be, &cd, &svc), SIMBA_EINVAL);
    }
    cd.mutex = longname;
    CHECK_RC(simba_contend(loop, be, &cd, &svc), SIMBA_EINVAL);
    cd.mutex = "fine";
    cd.contender_id = longid;
    CHECK_RC(simba_contend(loop, be, &cd, &svc), SIMBA_EINVAL);
    cd.contender_id = "has space";
    CHECK_RC(simba_contend(loop, be, &cd, &svc), SIMBA_EINVAL);
    cd.contender_id = "quote'd"; /* printable: a legal id, bound as a parameter */
    CHECK_RC(simba_contend(loop, be, &cd, &svc), SIMBA_OK);
    CHECK_RC(simba_service_free(svc), SIMBA_OK);

    /* the backend's own checks, below the core */
    {
        char ob[8];
        CHECK_RC(simba__sql_read(be, "a'b", &rep, ob, sizeof ob), SIMBA_EINVAL);
        CHECK_RC(simba__sql_read(be, longname, &rep, ob, sizeof ob), SIMBA_EINVAL);
        CHECK_RC(simba__sql_read(be, NULL, &rep, ob, sizeof ob), SIMBA_EINVAL);
        CHECK_RC(simba__sql_read(NULL, "ok", &rep, ob, sizeof ob), SIMBA_EINVAL);
        CHECK_RC(simba__sql_read(be, "ok", NULL, ob, sizeof ob), SIMBA_EINVAL);
        CHECK_RC(simba__sql_read(be, "ok", &rep, NULL, 0), SIMBA_EINVAL);
        CHECK_RC(simba__sql_read(be, "keep", &rep, ob, 1), SIMBA_EINVAL); /* "A" does not fit */
    }

    /* legal names with SQL-ish characters are data, nothing else */
    {
        static const char evil[] = "B');DROP/**/TABLE/**/simba_mutex;--";
        CHECK_RC(simba_id_check(evil), SIMBA_OK);
        CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "x,DROP=1", evil, 60000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK_STR(owner, evil);
        CHECK_EQ(rep.fence % FLOOR_UNIT, 1);
        CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "x,DROP=1", evil, 60000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK_STR(owner, evil);
        CHECK_EQ(rep.fence % FLOOR_UNIT, 1);
    }

    db = raw_open(path);
    REQUIRE(db != NULL);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM simba_mutex"), 2);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM simba_mutex WHERE mutex = 'keep' AND owner_id = 'A'"), 1);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM simba_mutex WHERE mutex = 'x,DROP=1'"), 1);
    sqlite3_close(db);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- row semantics (executor, exact) --------------------------------------------------- */

/* Waits (bounded) until the database reports nobody as the owner of m. */
static int wait_no_owner(simba_backend *be, const char *m, int64_t max_ms) {
    int64_t until = mono_ms() + max_ms;
    char owner[SIMBA_ID_MAX + 1];
    simba_reply rep;
    for (;;) {
        if (exec_op(be, SIMBA_OP_READ, m, "", 0, 0, &rep, owner, sizeof owner) == SIMBA_OK && !owner[0]) return 1;
        if (mono_ms() > until) return 0;
        poll(NULL, 0, 5);
    }
}

/* simba_sql_check_fence inside the application's BEGIN IMMEDIATE on its own connection: the
   fence holds only for the live owner's fence, bad input is refused with words, and no grant
   commits while the application's transaction holds the write lock. */
TEST(check_fence_in_the_callers_write_transaction) {
    char path[300], owner[SIMBA_ID_MAX + 1], err[320];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_reply rep;
    sqlite3 *app;
    uint64_t fa, fb;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    app = raw_open(path);
    REQUIRE(app != NULL);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "A", 3000, 2000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    fa = rep.fence;

    /* outside a write transaction: refused, whatever the fence */
    CHECK_RC(simba_sql_check_fence(app, NULL, "m", fa, err, sizeof err), SIMBA_ESTATE);
    CHECK(strstr(err, "BEGIN IMMEDIATE") != NULL);
    CHECK(sqlite3_exec(app, "BEGIN", NULL, NULL, NULL) == SQLITE_OK); /* deferred: no lock yet */
    CHECK_RC(simba_sql_check_fence(app, NULL, "m", fa, err, sizeof err), SIMBA_ESTATE);
    CHECK(sqlite3_exec(app, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);

    CHECK(sqlite3_exec(app, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    /* bad input: words naming what is wrong */
    CHECK_RC(simba_sql_check_fence(NULL, NULL, "m", fa, err, sizeof err), SIMBA_EINVAL);
    CHECK(strstr(err, "db") != NULL);
    CHECK_RC(simba_sql_check_fence(app, "no such", "m", fa, err, sizeof err), SIMBA_EINVAL);
    CHECK(strstr(err, "table") != NULL);
    CHECK_RC(simba_sql_check_fence(app, "orders", "m", fa, err, sizeof err), SIMBA_EINVAL);
    CHECK(strstr(err, "no table \"orders\"") != NULL);
    CHECK_RC(simba_sql_check_fence(app, NULL, "", fa, err, sizeof err), SIMBA_EINVAL);
    CHECK(strstr(err, "name") != NULL);
    CHECK_RC(simba_sql_check_fence(app, NULL, "m", 0, err, sizeof err), SIMBA_EINVAL);
    CHECK(strstr(err, "fence 0") != NULL);
    /* the owner's fence holds; one never handed out does not */
    CHECK_RC(simba_sql_check_fence(app, "", "m", fa, err, sizeof err), SIMBA_OK);
    CHECK_STR(err, "");
    CHECK_RC(simba_sql_check_fence(app, NULL, "m", fa + 1, err, sizeof err), SIMBA_EFENCE);
    CHECK(strstr(err, "never handed out") != NULL);
    CHECK_RC(simba_sql_check_fence(app, NULL, "other", fa, err, sizeof err), SIMBA_EFENCE);
    /* the application's transaction holds the write lock: no renewal, release or grant
       commits before it ends */
    CHECK_EQ(simba__sql_exec(impl_of(be), SIMBA_OP_RELEASE, "m", "A", 0, 0, 0, &rep), SIMBA__SQL_BUSY);
    CHECK(sqlite3_exec(app, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);

    /* released: no owner; a later owner: the fence moved on */
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "m", "A", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK(sqlite3_exec(app, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    CHECK_RC(simba_sql_check_fence(app, NULL, "m", fa, err, sizeof err), SIMBA_EFENCE);
    CHECK(strstr(err, "no owner") != NULL);
    CHECK(sqlite3_exec(app, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "B", 100, 100, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "B");
    fb = rep.fence;
    CHECK(fb > fa);
    CHECK(sqlite3_exec(app, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    CHECK_RC(simba_sql_check_fence(app, NULL, "m", fa, err, sizeof err), SIMBA_EFENCE);
    CHECK(strstr(err, "moved on") != NULL);
    CHECK_RC(simba_sql_check_fence(app, NULL, "m", fb, err, sizeof err), SIMBA_OK);
    CHECK(sqlite3_exec(app, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    /* B's lease (100 + 100 ms) ends by the database's clock: refused, with no later owner */
    poll(NULL, 0, 260);
    CHECK(sqlite3_exec(app, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    CHECK_RC(simba_sql_check_fence(app, NULL, "m", fb, err, sizeof err), SIMBA_EFENCE);
    CHECK(strstr(err, "lease") != NULL && strstr(err, "is over") != NULL);
    CHECK(sqlite3_exec(app, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(app);
    simba_loop_free(loop);
}

TEST(acquire_renew_release_fence) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_reply rep;
    sqlite3 *db;
    int64_t t0;
    uint64_t base;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    db = raw_open(path);
    REQUIRE(db != NULL);

    /* READ of an unknown mutex: nobody, and no row is created */
    CHECK_RC(exec_op(be, SIMBA_OP_READ, "m", "", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "");
    CHECK_EQ(rep.fence, 0);
    CHECK(rep.held_ms < 0);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM simba_mutex"), 0);

    /* first acquire creates the row: its floor + 1, full lease remaining */
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "A", 3000, 2000, &rep, owner, sizeof owner), SIMBA_OK);
    t0 = mono_ms(); /* after acquired_at, however slow the acquire was (valgrind) */
    CHECK_STR(owner, "A");
    base = rep.fence - 1; /* the row's floor: its creation time x 2^10 */
    CHECK(floor_is_now(base));
    CHECK(rep.ttl_left_ms > 2900 && rep.ttl_left_ms <= 3000);
    CHECK(rep.transition_left_ms > 4900 && rep.transition_left_ms <= 5000);
    CHECK(rep.held_ms >= 0 && rep.held_ms < 100);

    /* another contender cannot take it, and learns the owner */
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "B", 3000, 2000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.fence, base + 1);

    /* renewal: same fence, acquired_at kept (held grows), lease extended */
    while (mono_ms() - t0 < 30) poll(NULL, 0, 5);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "A", 3000, 2000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.fence, base + 1);
    CHECK(rep.held_ms >= 25);
    CHECK(rep.ttl_left_ms > 2900);
    CHECK_EQ(raw_int(db, "SELECT version FROM simba_mutex WHERE mutex = 'm'"), 2);

    /* release by a non-owner changes nothing */
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "m", "B", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.fence, base + 1);

    /* release by the owner: nobody, the stored fence stays */
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "m", "A", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "");
    CHECK_EQ(rep.fence, 0);
    CHECK_EQ(raw_int(db, "SELECT fence FROM simba_mutex WHERE mutex = 'm'"), (int64_t)base + 1);

    /* the next ownership, even by the same contender, gets a greater fence */
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "A", 3000, 2000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.fence, base + 2);
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "m", "A", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "B", 3000, 2000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "B");
    CHECK_EQ(rep.fence, base + 3);
    CHECK(rep.held_ms >= 0 && rep.held_ms < 100);
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "m", "B", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);

    /* expiry: short lease. Inside ttl and inside transition nobody else may take it; the
       owner may renew inside the transition; after it, anyone may. */
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "e", "A", 150, 150, &rep, owner, sizeof owner), SIMBA_OK);
    base = rep.fence - 1;
    CHECK(floor_is_now(base));
    t0 = mono_ms();
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "e", "B", 150, 150, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    {
        /* wait until the ttl is over but the transition is not (database view) */
        int in_transition = 0;
        int64_t until = mono_ms() + 1000;
        while (mono_ms() < until) {
            CHECK_RC(exec_op(be, SIMBA_OP_READ, "e", "", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
            if (rep.ttl_left_ms < 0 && rep.transition_left_ms > 30) {
                in_transition = 1;
                break;
            }
            poll(NULL, 0, 2);
        }
        CHECK(in_transition);
        CHECK_STR(owner, "A");
        CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "e", "B", 150, 150, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK_STR(owner, "A"); /* B still refused in transition */
        CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "e", "A", 150, 150, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK_STR(owner, "A"); /* the owner renews in transition */
        CHECK_EQ(rep.fence, base + 1);
        CHECK(rep.ttl_left_ms > 100);
        CHECK(rep.held_ms >= mono_ms() - t0 - 5);
    }
    /* let it lapse completely: READ says nobody, then B takes it with a new fence */
    CHECK(wait_no_owner(be, "e", 2000));
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "e", "B", 150, 150, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "B");
    CHECK_EQ(rep.fence, base + 2);
    CHECK(rep.held_ms < 100);
    /* an expired owner re-acquiring is a new ownership too */
    CHECK(wait_no_owner(be, "e", 2000));
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "e", "B", 150, 150, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "B");
    CHECK_EQ(rep.fence, base + 3);

    sqlite3_close(db);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* Rows deleted by another program while an owner holds (the trigger in the file sees every
   DELETE): the row made again is closed until the deleted lease's end, and no owner is
   granted before it (SIMBA_EBACKEND, saying why; the owner's renewal fails too, so it steps
   down); fences go on above every deleted one, also when rows come and go within one ms. */
TEST(rows_deleted_under_live_owner) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_reply rep;
    sqlite3 *db;
    uint64_t f0, last;
    int64_t lease_end, t_del;
    simba_result rc;
    int k;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    db = raw_open(path);
    REQUIRE(db != NULL);
    for (k = 0; k < 3; k++) { /* three tenures of A */
        CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "A", 300, 200, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK_STR(owner, "A");
        if (k < 2) CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "m", "A", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    }
    f0 = rep.fence;
    lease_end = raw_int(db, "SELECT transition_at FROM simba_mutex WHERE mutex = 'm'");
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "B", 300, 200, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A"); /* B waits in line */
    CHECK_EQ(sqlite3_exec(db, "DELETE FROM simba_mutex; DELETE FROM simba_mutex_wait", NULL, NULL, NULL), SQLITE_OK);
    t_del = mono_ms();
    rc = exec_op(be, SIMBA_OP_ACQUIRE, "m", "B", 300, 200, &rep, owner, sizeof owner);
    CHECK_RC(rc, SIMBA_EBACKEND);
    CHECK(rep.errmsg && strstr(rep.errmsg, "deleted under a live lease") != NULL);
    if (rep.errmsg) fprintf(stderr, "  %s\n", rep.errmsg);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "A", 300, 200, &rep, owner, sizeof owner), SIMBA_EBACKEND);
    CHECK_RC(exec_op(be, SIMBA_OP_READ, "m", "", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, ""); /* nobody owns it, and nobody may yet */
    while ((rc = exec_op(be, SIMBA_OP_ACQUIRE, "m", "B", 300, 200, &rep, owner, sizeof owner)) != SIMBA_OK &&
           mono_ms() - t_del < 3000)
        poll(NULL, 0, 5);
    CHECK_RC(rc, SIMBA_OK);
    CHECK_STR(owner, "B");
    CHECK(wall_ms() > lease_end); /* on the database's clock, after A's lease */
    fprintf(stderr, "  fence before the DELETE %llu, after it %llu (granted %lld ms after it)\n",
            (unsigned long long)f0, (unsigned long long)rep.fence, (long long)(mono_ms() - t_del));
    CHECK(rep.fence > f0);
    /* with no live lease a DELETE costs no wait, and fences never repeat, however fast */
    last = rep.fence;
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "m", "B", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    for (k = 0; k < 20; k++) {
        CHECK_EQ(sqlite3_exec(db, "DELETE FROM simba_mutex", NULL, NULL, NULL), SQLITE_OK);
        CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "m", "C", 300, 200, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK_STR(owner, "C");
        CHECK(rep.fence > last);
        last = rep.fence;
        CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "m", "C", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    }
    sqlite3_close(db);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- through the core ----------------------------------------------------------------- */

typedef struct counts {
    int acquired, released;
    uint64_t fence;
} counts;

static void on_acq(simba_service *svc, const simba_state *st, void *u) {
    counts *c = (counts *)u;
    (void)svc;
    c->acquired++;
    c->fence = st->after ? st->after->fence : 0;
}
static void on_rel(simba_service *svc, const simba_state *st, void *u) {
    (void)svc;
    (void)st;
    ((counts *)u)->released++;
}

/* A contender reporting to acq and rel with user (not started). */
static simba_result contend_cb(simba_loop *loop, simba_backend *be, const char *m, const char *id, int64_t ttl,
                               int64_t tr, simba_state_fn acq, simba_state_fn rel, void *user, simba_service **out) {
    simba_contend_desc d;
    memset(&d, 0, sizeof d);
    d.mutex = m;
    d.contender_id = id;
    d.ttl_ms = ttl;
    d.transition_ms = tr;
    d.on_acquired = acq;
    d.on_released = rel;
    d.user_data = user;
    return simba_contend(loop, be, &d, out);
}
static simba_result contend(simba_loop *loop, simba_backend *be, const char *m, const char *id, int64_t ttl,
                            int64_t tr, counts *c, simba_service **out) {
    return contend_cb(loop, be, m, id, ttl, tr, on_acq, on_rel, c, out);
}

/* Drives the loops with the fixture's driver (2 ms at most between polls) until cond holds
   or max_ms passes; 1 when it held. Also records the longest single simba_poll(). */
static int64_t longest_poll_ms;
static int drive(simba_loop **loops, int n, int64_t max_ms, int (*cond)(void *), void *arg) {
    int64_t until = mono_ms() + max_ms;
    drv d;
    int i;
    memset(&d, 0, sizeof d);
    for (i = 0; i < n; i++)
        if (drv_attach(&d, loops[i]) != 0) return 0;
    for (;;) {
        drv_once(&d, 2);
        if (d.max_poll_us / 1000 > longest_poll_ms) longest_poll_ms = d.max_poll_us / 1000;
        if (cond && cond(arg)) return 1;
        if (mono_ms() >= until) return 0;
    }
}

static int is_owner_cond(void *p) { return simba_is_owner((simba_service *)p); }
static int is_initial_cond(void *p) { return simba_service_status((simba_service *)p) == SIMBA_INITIAL; }
static simba_service *pair[2];
static int one_owner_cond(void *p) {
    (void)p;
    return simba_is_owner(pair[0]) || simba_is_owner(pair[1]);
}

static int is_not_owner_cond(void *p) { return !simba_is_owner((simba_service *)p); }

/* The fence of every on_acquired, in order. */
typedef struct fence_log {
    uint64_t fence[8];
    int n, released;
} fence_log;
static void fl_acq(simba_service *svc, const simba_state *st, void *u) {
    fence_log *f = (fence_log *)u;
    (void)svc;
    if (f->n < 8) f->fence[f->n] = st->after ? st->after->fence : 0;
    f->n++;
}
static void fl_rel(simba_service *svc, const simba_state *st, void *u) {
    (void)svc;
    (void)st;
    ((fence_log *)u)->released++;
}
static simba_result contend_fl(simba_loop *loop, simba_backend *be, const char *m, const char *id, int64_t ttl,
                               int64_t tr, fence_log *f, simba_service **out) {
    return contend_cb(loop, be, m, id, ttl, tr, fl_acq, fl_rel, f, out);
}

/* End to end: services renewing through simba_poll on a file opened with checkpoint = -1,
   a thread calling simba_sql_checkpoint() every 5 ms beside them (complete checkpoints,
   idle calls between renewal waves, the WAL written past SQLite's 1,000 frames by bursts
   of single writes). The counting VFS sees no sync on the loop's thread. Then the counter
   is shown to see one: a plain PRAGMA wal_checkpoint from another thread leaves the WAL
   all copied, and the loop's next renewal starts it over and syncs its header itself. */
#define NOSYNC_SERVICES 200
static void *raw_checkpoint_main(void *arg) {
    struct ckpt_call *c = (struct ckpt_call *)arg;
    sqlite3 *db = raw_open(c->path);
    c->frames = c->copied = -1;
    /* (reading the schema finds the WAL: a fresh connection is not in WAL mode before) */
    if (db && sqlite3_exec(db, "PRAGMA schema_version", NULL, NULL, NULL) == SQLITE_OK)
        sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &c->frames, &c->copied);
    sqlite3_close(db);
    return NULL;
}
TEST(polls_never_sync_with_checkpoints_off_the_loop) {
    char path[300], wal[320], name[32];
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_service *sv[NOSYNC_SERVICES];
    counts c;
    struct ckpt_thread t;
    pthread_t th;
    int failed = 0, i, burst, owners = 0, loop_syncs;
    REQUIRE(sync_vfs_install());
    REQUIRE((loop = ckpt_loop(path, sizeof path, wal, sizeof wal, &be, &failed)) != NULL);
    memset(&c, 0, sizeof c);
    for (i = 0; i < NOSYNC_SERVICES; i++) {
        snprintf(name, sizeof name, "ns%03d", i);
        REQUIRE(contend(loop, be, name, "A", 900, 300, &c, &sv[i]) == SIMBA_OK);
        REQUIRE(simba_start(sv[i]) == SIMBA_OK);
    }
    sync_by_loop = sync_by_others = 0;
    memset(&t, 0, sizeof t);
    t.path = path;
    REQUIRE(pthread_create(&th, NULL, ckpt_main, &t) == 0);
    for (burst = 0; burst < 6; burst++) { /* ~4 renewal waves, 1,800 single writes between */
        (void)drive(&loop, 1, 500, NULL, NULL);
        (void)renew_rounds(be, wal, 1, &failed);
    }
    t.stop = 1;
    pthread_join(th, NULL);
    for (i = 0; i < NOSYNC_SERVICES; i++) owners += simba_is_owner(sv[i]);
    loop_syncs = sync_by_loop;
    fprintf(stderr, "  %d checkpoints (%d busy) beside %d services; syncs: %d by the loop's thread, %d by the "
            "checkpointing thread\n", t.calls, t.busy, owners, loop_syncs, sync_by_others);
    CHECK_EQ(failed, 0);
    CHECK_EQ(t.errors, 0);
    CHECK(t.calls > t.busy);
    CHECK_EQ(owners, NOSYNC_SERVICES);
    CHECK_EQ(c.released, 0);
    CHECK(sync_by_others > 0);
    CHECK_EQ(loop_syncs, 0);
    /* the counter's own check: SQLite's checkpoint alone leaves the sync to the loop */
    {
        struct ckpt_call raw;
        memset(&raw, 0, sizeof raw);
        raw.path = path;
        REQUIRE(pthread_create(&th, NULL, raw_checkpoint_main, &raw) == 0);
        pthread_join(th, NULL);
        CHECK(raw.frames > 0 && raw.copied == raw.frames);
    }
    (void)drive(&loop, 1, 1000, NULL, NULL); /* a renewal wave */
    fprintf(stderr, "  after a plain PRAGMA wal_checkpoint: %d syncs by the loop's thread\n", sync_by_loop);
    CHECK(sync_by_loop > 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    REQUIRE(sync_vfs_remove());
}

TEST(service_lifecycle) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    counts c = {0, 0, 0};
    simba_reply rep;
    uint64_t f1;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    REQUIRE(contend(loop, be, "life", "A", 2000, 1000, &c, &svc) == SIMBA_OK);
    CHECK_RC(simba_start(svc), SIMBA_OK);
    CHECK(drive(&loop, 1, 2000, is_owner_cond, svc));
    CHECK_EQ(c.acquired, 1);
    f1 = simba_fence(svc);
    CHECK(f1 >= 1);
    CHECK_EQ(c.fence, f1);
    CHECK_RC(simba__sql_read(be, "life", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.fence, f1);
    /* stop: released locally and in the database */
    CHECK_RC(simba_stop(svc), SIMBA_OK);
    CHECK(drive(&loop, 1, 2000, is_initial_cond, svc));
    CHECK_EQ(c.released, 1);
    CHECK_RC(simba__sql_read(be, "life", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "");
    /* restart: a new ownership with a greater fence */
    CHECK_RC(simba_start(svc), SIMBA_OK);
    CHECK(drive(&loop, 1, 2000, is_owner_cond, svc));
    CHECK_EQ(c.acquired, 2);
    CHECK(simba_fence(svc) > f1);
    CHECK_RC(simba_service_free(svc), SIMBA_OK);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* Two backends (connections) on one file in one process, each on its own loop. */
TEST(two_connections_one_process) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loops[2];
    simba_backend *be[2];
    counts c[2];
    simba_reply rep;
    int i, winner;
    uint64_t f1;
    memset(c, 0, sizeof c);
    newdb(path, sizeof path);
    for (i = 0; i < 2; i++) {
        loops[i] = newloop();
        REQUIRE(loops[i] != NULL);
        REQUIRE(open_be(loops[i], path, NULL, &be[i]) == SIMBA_OK);
        REQUIRE(contend(loops[i], be[i], "two", i ? "B" : "A", 600, 300, &c[i], &pair[i]) == SIMBA_OK);
    }
    for (i = 0; i < 2; i++) CHECK_RC(simba_start(pair[i]), SIMBA_OK);
    CHECK(drive(loops, 2, 3000, one_owner_cond, NULL));
    winner = simba_is_owner(pair[0]) ? 0 : 1;
    CHECK(!simba_is_owner(pair[1 - winner]));
    f1 = simba_fence(pair[winner]);
    /* both connections see the same row */
    CHECK_RC(simba__sql_read(be[1 - winner], "two", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, winner ? "B" : "A");
    CHECK_EQ(rep.fence, f1);
    /* keep driving for a few renewals: ownership must not move, nor be doubled */
    {
        int64_t until = mono_ms() + 1500;
        while (mono_ms() < until) {
            drive(loops, 2, 0, NULL, NULL);
            CHECK(!(simba_is_owner(pair[0]) && simba_is_owner(pair[1])));
            poll(NULL, 0, 3);
        }
    }
    CHECK(simba_is_owner(pair[winner]));
    CHECK_EQ(c[winner].acquired, 1);
    CHECK_EQ(c[winner].released, 0);
    /* the winner stops: the other takes over with a greater fence */
    CHECK_RC(simba_stop(pair[winner]), SIMBA_OK);
    CHECK(drive(loops, 2, 4000, is_owner_cond, pair[1 - winner]));
    CHECK(simba_fence(pair[1 - winner]) > f1);
    CHECK_EQ(c[winner].released, 1);
    for (i = 0; i < 2; i++) CHECK_RC(simba_loop_free(loops[i]), SIMBA_OK);
}

/* Another connection holds the write lock: polls stay fast, the request completes after
   the lock goes away. */
TEST(busy_database_does_not_block_poll) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    counts c = {0, 0, 0};
    simba_reply rep;
    sqlite3 *db;
    int64_t t0, took;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    db = raw_open(path);
    REQUIRE(db != NULL);
    CHECK_EQ(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);

    /* the executor itself reports busy at once */
    t0 = mono_ms();
    CHECK_EQ(simba__sql_exec(impl_of(be), SIMBA_OP_ACQUIRE, "busy", "A", 2000, 1000, 1, &rep), SIMBA__SQL_BUSY);
    CHECK(mono_ms() - t0 < 50);

    REQUIRE(contend(loop, be, "busy", "A", 2000, 1000, &c, &svc) == SIMBA_OK);
    t0 = mono_ms();
    CHECK_RC(simba_start(svc), SIMBA_OK);
    took = mono_ms() - t0;
    CHECK(took < 50);
    longest_poll_ms = 0;
    CHECK(!drive(&loop, 1, 400, is_owner_cond, svc));
    fprintf(stderr, "  locked for 400 ms: longest simba_poll %lld ms\n", (long long)longest_poll_ms);
    CHECK(longest_poll_ms < 50);
    CHECK(!simba_is_owner(svc));
    /* the backend keeps retrying on a short deadline */
    CHECK(simba__sql_deadline(impl_of(be)) <= simba_now(loop) + 1000);

    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    t0 = mono_ms();
    CHECK(drive(&loop, 1, 2000, is_owner_cond, svc));
    fprintf(stderr, "  acquired %lld ms after the lock was released\n", (long long)(mono_ms() - t0));
    CHECK_EQ(c.acquired, 1);
    CHECK_RC(simba__sql_read(be, "busy", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    sqlite3_close(db);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* A lock that outlasts the busy limit: the request fails with SIMBA_EBUSY (the core backs
   off), and a later one succeeds. */
TEST(busy_gives_up_after_limit) {
    char path[300];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_sql_desc d;
    counts c = {0, 0, 0};
    sqlite3 *db;
    simba__sql *s;
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    d.path = newdb(path, sizeof path);
    d.busy_max_ms = 100;
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    s = impl_of(be);
    db = raw_open(path);
    REQUIRE(db != NULL);
    CHECK_EQ(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    REQUIRE(contend(loop, be, "gu", "A", 2000, 1000, &c, &svc) == SIMBA_OK);
    CHECK_RC(simba_start(svc), SIMBA_OK);
    CHECK(!drive(&loop, 1, 500, is_owner_cond, svc));
    CHECK(s->head == NULL || s->head->next_ == NULL); /* requests do not pile up */
    {
        const char *msg = simba_backend_errmsg(be);
        fprintf(stderr, "  backend errmsg: %s\n", msg ? msg : "(null)");
        CHECK(msg && strstr(msg, "locked"));
    }
    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    CHECK(drive(&loop, 1, 8000, is_owner_cond, svc));
    sqlite3_close(db);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* The database is locked (rollback journal, exclusive lock) while the backend opens: the
   open succeeds, setup finishes on the first request once the lock is gone. */
TEST(open_while_locked) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    counts c = {0, 0, 0};
    simba_reply rep;
    sqlite3 *db;
    REQUIRE(loop != NULL);
    db = raw_open(newdb(path, sizeof path));
    REQUIRE(db != NULL);
    CHECK_EQ(sqlite3_exec(db, "CREATE TABLE other (x); BEGIN EXCLUSIVE; INSERT INTO other VALUES (1);", NULL, NULL,
                          NULL),
             SQLITE_OK);
    CHECK_RC(open_be(loop, path, NULL, &be), SIMBA_OK);
    REQUIRE(be != NULL);
    CHECK(!impl_of(be)->ready);
    CHECK_RC(simba__sql_read(be, "m", &rep, owner, sizeof owner), SIMBA_EBUSY);
    REQUIRE(contend(loop, be, "m", "A", 2000, 1000, &c, &svc) == SIMBA_OK);
    CHECK_RC(simba_start(svc), SIMBA_OK);
    longest_poll_ms = 0;
    CHECK(!drive(&loop, 1, 200, is_owner_cond, svc));
    CHECK(longest_poll_ms < 50);
    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    CHECK(drive(&loop, 1, 3000, is_owner_cond, svc));
    CHECK(impl_of(be)->ready);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'"), 1);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM other"), 1);
    sqlite3_close(db);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* N processes race to create and take the row of a fresh mutex at one instant. */
TEST(row_creation_race) {
    enum { N = 6 };
    char path[300], owner[SIMBA_ID_MAX + 1];
    int go[2], i, winners = 0, losers = 0, errors = 0;
    pid_t pids[N];
    sqlite3 *db;
    newdb(path, sizeof path);
    { /* the file and table exist, the row does not */
        simba_loop *loop = newloop();
        simba_backend *be = NULL;
        REQUIRE(loop && open_be(loop, path, NULL, &be) == SIMBA_OK);
        simba_loop_free(loop);
    }
    REQUIRE(pipe(go) == 0);
    fflush(NULL);
    for (i = 0; i < N; i++) {
        pids[i] = fork();
        REQUIRE(pids[i] >= 0);
        if (pids[i] == 0) {
            char id[16], b;
            simba_loop *loop;
            simba_backend *be = NULL;
            simba_reply rep;
            int code = 2;
            close(go[1]);
            snprintf(id, sizeof id, "P%d", i);
            loop = newloop();
            if (loop && open_be(loop, path, NULL, &be) == SIMBA_OK) {
                if (read(go[0], &b, 1) == 0) { /* all start when the parent closes the pipe */
                    if (exec_op(be, SIMBA_OP_ACQUIRE, "race", id, 10000, 1000, &rep, owner, sizeof owner) == SIMBA_OK)
                        code = strcmp(owner, id) == 0 ? (rep.fence % FLOOR_UNIT == 1 ? 0 : 3) : (owner[0] ? 1 : 2);
                }
            }
            if (loop) simba_loop_free(loop);
            _exit(code);
        }
    }
    close(go[0]);
    poll(NULL, 0, 100); /* let the children open their connections */
    close(go[1]);
    for (i = 0; i < N; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) winners++;
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 1) losers++;
        else errors++;
    }
    fprintf(stderr, "  %d processes: %d winner, %d saw the winner, %d errors\n", N, winners, losers, errors);
    CHECK_EQ(winners, 1);
    CHECK_EQ(losers, N - 1);
    CHECK_EQ(errors, 0);
    db = raw_open(path);
    REQUIRE(db != NULL);
    CHECK_EQ(raw_int(db, "SELECT count(*) FROM simba_mutex"), 1);
    CHECK_EQ(raw_int(db, "SELECT fence FROM simba_mutex WHERE mutex = 'race'") % (int64_t)FLOOR_UNIT, 1);
    sqlite3_close(db);
}

/* simba__sql_read() refuses a backend that is not an SQL one. */
TEST(read_needs_sql_backend) {
    simba_loop *loop = newloop();
    simba_memstore *st = NULL;
    simba_backend *mem = NULL;
    simba_reply rep;
    char owner[16];
    simba_memstore_desc md;
    REQUIRE(loop != NULL);
    memset(&md, 0, sizeof md);
    REQUIRE(simba_memstore_new(&md, &st) == SIMBA_OK);
    REQUIRE(simba_memory_open(loop, st, &mem) == SIMBA_OK);
    CHECK_RC(simba__sql_read(mem, "m", &rep, owner, sizeof owner), SIMBA_EINVAL);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    CHECK_RC(simba_memstore_free(st), SIMBA_OK);
}

/* ---- files that cannot work, desc ranges, the fence after a local step-down ---------- */

/* A read-only database (and below, one whose table page is corrupt) is refused at open,
   with the reason, instead of opening "ok" and never acquiring. */
TEST(open_refuses_readonly) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_sql_desc d;
    char err[512], path[300], uri[400], cmd[400];
    simba_reply rep;
    int fd, made_ro = 0;
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    d.errbuf = err;
    d.errbuf_cap = sizeof err;
    /* a healthy database with a table and a row */
    d.path = newdb(path, sizeof path);
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    CHECK_RC(simba__sql_exec(impl_of(be), SIMBA_OP_ACQUIRE, "m", "A", 5000, 1000, 1, &rep), 0);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);

    /* opened read-only through a URI */
    snprintf(uri, sizeof uri, "file:%s?mode=ro", path);
    d.path = uri;
    err[0] = 0;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EBACKEND);
    CHECK(be == NULL);
    CHECK(strstr(err, "read-only") != NULL);
    fprintf(stderr, "  mode=ro: %s\n", err);
    /* a file nobody may write: chmod, and for root (who ignores modes) the immutable flag */
    CHECK_EQ(chmod(path, 0444), 0);
    fd = open(path, O_RDWR);
    if (fd >= 0) {
        close(fd);
        snprintf(cmd, sizeof cmd, "chattr +i '%s' 2>/dev/null", path);
        if (system(cmd) == 0) made_ro = 2;
    } else {
        made_ro = 1;
    }
    CHECK(made_ro != 0); /* no way to make a read-only file here: the test cannot pass */
    d.path = path;
    err[0] = 0;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EBACKEND);
    CHECK(strstr(err, "read-only") != NULL);
    fprintf(stderr, "  %s file: %s\n", made_ro == 2 ? "immutable" : "0444", err);
    if (made_ro == 2) {
        snprintf(cmd, sizeof cmd, "chattr -i '%s'", path);
        CHECK_EQ(system(cmd), 0);
    }
    CHECK_EQ(chmod(path, 0644), 0);
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_OK); /* writable again: fine */
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* Opens path with a fresh loop; the result, and the error text in err. */
static simba_result open_err(const char *path, char *err, size_t cap) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_sql_desc d;
    simba_result rc;
    if (!loop) return SIMBA_ENOMEM;
    memset(&d, 0, sizeof d);
    d.path = path;
    d.errbuf = err;
    d.errbuf_cap = cap;
    err[0] = 0;
    rc = simba_sql_open(loop, &d, &be);
    simba_loop_free(loop);
    return rc;
}

/* The same in a process that file modes bind: a child running as user nobody when this one
   is root (root is refused nothing by modes). */
static simba_result open_as_other(const char *path, char *err, size_t cap) {
    int p[2], st = 0;
    size_t n = 0;
    pid_t pid;
    if (geteuid() != 0) return open_err(path, err, cap);
    err[0] = 0;
    if (pipe(p) != 0) return SIMBA_EINVAL;
    pid = fork();
    if (pid == 0) {
        simba_result rc;
        close(p[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(99);
        rc = open_err(path, err, cap);
        if (write(p[1], err, strlen(err)) < 0) _exit(98);
        _exit(-(int)rc);
    }
    close(p[1]);
    for (;;) {
        ssize_t r = read(p[0], err + n, cap - 1 - n);
        if (r <= 0 || (n += (size_t)r) == cap - 1) break;
    }
    err[n] = 0;
    close(p[0]);
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) >= 98) return SIMBA_EINVAL;
    return (simba_result)-WEXITSTATUS(st);
}

/* A database the process may not open is refused with its path and the access that
   failed, not SQLite's bare "unable to open database file". */
TEST(open_denied_says_which_path_and_access) {
    char dir[300], f1[340], f2[340], f3[340], f4[340], err[600];
    int root = geteuid() == 0;
    snprintf(dir, sizeof dir, "%s/access", tmpdir);
    snprintf(f1, sizeof f1, "%s/private.db", dir);
    snprintf(f2, sizeof f2, "%s/readable.db", dir);
    snprintf(f3, sizeof f3, "%s/writable.db", dir);
    snprintf(f4, sizeof f4, "%s/new.db", dir);
    REQUIRE(mkdir(dir, 0755) == 0);
    CHECK_EQ(chmod(tmpdir, 0711), 0); /* nobody may pass through to dir */
    CHECK_RC(open_err(f1, err, sizeof err), SIMBA_OK);
    CHECK_RC(open_err(f2, err, sizeof err), SIMBA_OK);
    CHECK_RC(open_err(f3, err, sizeof err), SIMBA_OK);
    CHECK_EQ(chmod(f1, root ? 0600 : 0), 0);
    CHECK_EQ(chmod(f2, 0444), 0);
    CHECK_EQ(chmod(f3, 0666), 0);
    if (!root) CHECK_EQ(chmod(dir, 0555), 0);

    CHECK_RC(open_as_other(f1, err, sizeof err), SIMBA_EBACKEND);
    fprintf(stderr, "  another user's 0600 file: %s\n", err);
    CHECK(strstr(err, f1) != NULL);
    CHECK(strstr(err, "no read or write access for uid") != NULL);
    CHECK(strstr(err, root ? "mode 0600" : "mode 0000") != NULL);

    CHECK_RC(open_as_other(f2, err, sizeof err), SIMBA_EBACKEND);
    fprintf(stderr, "  a file it may only read: %s\n", err);
    CHECK(strstr(err, f2) != NULL);
    CHECK(strstr(err, ": no write access for uid") != NULL);

    CHECK_RC(open_as_other(f3, err, sizeof err), SIMBA_EBACKEND);
    fprintf(stderr, "  a writable file in a directory it may not write: %s\n", err);
    CHECK(strstr(err, "no write access to directory") != NULL);
    CHECK(strstr(err, dir) != NULL);
    CHECK(strstr(err, "-wal") != NULL);

    CHECK_RC(open_as_other(f4, err, sizeof err), SIMBA_EBACKEND);
    fprintf(stderr, "  a new file in that directory: %s\n", err);
    CHECK(strstr(err, f4) != NULL);
    CHECK(strstr(err, "cannot create") != NULL);

    CHECK_EQ(chmod(dir, 0755), 0);
    CHECK_EQ(chmod(tmpdir, 0700), 0);
}

/* read_only = 1 opens a file for inspection: it reads what a writer stored, writes nothing
   (a file nobody may write works too), and refuses every request that would write. */
TEST(read_only_inspects_and_refuses_writes) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL, *ro = NULL;
    simba_sql_desc d;
    simba_reply rep;
    simba_view v;
    simba_service *svc = NULL;
    simba_contend_desc cd;
    char path[300], err[512];
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    d.path = newdb(path, sizeof path);
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    CHECK_RC(simba__sql_exec(impl_of(be), SIMBA_OP_ACQUIRE, "m", "A", 60000, 1000, 1, &rep), 0);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    CHECK_EQ(chmod(path, 0444), 0);
    d.read_only = 1;
    d.errbuf = err;
    d.errbuf_cap = sizeof err;
    CHECK_RC(simba_sql_open(loop, &d, &ro), SIMBA_OK);
    CHECK_RC(simba_inspect_wait(ro, "m", &v, 5000), SIMBA_OK);
    CHECK_STR(v.owner, "A");
    CHECK_EQ(v.fence, rep.fence);
    CHECK_RC(simba_force_release_wait(ro, "m", rep.fence, 5000), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "read_only") != NULL);
    memset(&cd, 0, sizeof cd);
    cd.mutex = "m";
    CHECK_RC(simba_contend(loop, ro, &cd, &svc), SIMBA_OK);
    CHECK_RC(simba_start(svc), SIMBA_OK);
    simba_poll(loop);
    CHECK(!simba_is_owner(svc));
    CHECK_EQ(impl_of(ro)->executed, 0);
    CHECK_RC(simba_service_free(svc), SIMBA_OK);
    d.read_only = 2;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(err, "read_only") != NULL);
    CHECK_EQ(chmod(path, 0644), 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

TEST(open_refuses_corrupt_table) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_sql_desc d;
    char err[512], path[300];
    simba_reply rep;
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    d.errbuf = err;
    d.errbuf_cap = sizeof err;
    d.path = newdb(path, sizeof path);
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    CHECK_RC(simba__sql_exec(impl_of(be), SIMBA_OP_ACQUIRE, "m", "A", 5000, 1000, 1, &rep), 0);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    /* the table's root page overwritten with garbage; the file header stays good */
    {
        sqlite3 *db = raw_open(path);
        int64_t root, psize;
        char junk[512];
        FILE *f;
        REQUIRE(db != NULL);
        CHECK_EQ(sqlite3_exec(db, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL), SQLITE_OK);
        root = raw_int(db, "SELECT rootpage FROM sqlite_master WHERE name = 'simba_mutex'");
        psize = raw_int(db, "PRAGMA page_size");
        sqlite3_close(db);
        REQUIRE(root > 1 && psize > 0);
        memset(junk, 0xA5, sizeof junk);
        f = fopen(path, "r+b");
        REQUIRE(f != NULL);
        CHECK_EQ(fseek(f, (long)((root - 1) * psize), SEEK_SET), 0);
        CHECK_EQ(fwrite(junk, 1, sizeof junk, f), sizeof junk);
        fclose(f);
    }
    err[0] = 0;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EBACKEND);
    CHECK(be == NULL);
    CHECK(strstr(err, "corrupt") != NULL || strstr(err, "malformed") != NULL);
    fprintf(stderr, "  corrupt table page: %s\n", err);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* Every refusal of simba_sql_open says which field and why, in simba_loop_errmsg(). */
TEST(open_desc_ranges_have_words) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_sql_desc d;
    char path[300], err[8];
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    newdb(path, sizeof path);
    CHECK_RC(simba_sql_open(loop, NULL, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "desc") != NULL);
    d.path = path;
    CHECK_RC(simba_sql_open(loop, &d, NULL), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "out") != NULL);
    d.path = NULL;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "path") != NULL);
    d.path = path;
    d.table = "no such";
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "table") != NULL);
    d.table = NULL;
    d.busy_retry_ms = -1;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "busy_retry_ms") != NULL);
    d.busy_retry_ms = (int64_t)1 << 41;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "busy_retry_ms") != NULL);
    d.busy_retry_ms = 0;
    d.busy_max_ms = -5;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "busy_max_ms") != NULL);
    /* an inversion: the first retry would come after giving up */
    d.busy_retry_ms = 500;
    d.busy_max_ms = 100;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "busy_retry_ms") != NULL && strstr(simba_loop_errmsg(loop), "busy_max_ms") != NULL);
    fprintf(stderr, "  %s\n", simba_loop_errmsg(loop));
    d.busy_retry_ms = 0;
    d.busy_max_ms = 0;
    d.batch_max = -1;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "batch_max") != NULL);
    d.batch_max = 4097;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "batch_max") != NULL);
    d.batch_max = 0;
    d.checkpoint = 1;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "checkpoint") != NULL);
    d.checkpoint = -1; /* never on this connection: SQLite's automatic checkpoint is off */
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_OK);
    CHECK_EQ(raw_int(impl_of(be)->db, "PRAGMA wal_autocheckpoint"), 0);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    d.checkpoint = 0;
    d.errbuf = err;
    d.errbuf_cap = sizeof err;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_OK); /* a short errbuf is fine */
    CHECK_RC(simba__sql_read(be, "bad name", NULL, NULL, 0), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "simba__sql_read") != NULL);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* The owner's renewals cannot reach the database (it is locked) until after the owner has
   stepped down locally; its row still names it. Asking again (simba_req.renew = 0) must
   start a new ownership: on_acquired with a greater fence, acquired_at = now. */
TEST(reacquire_after_local_step_down_gets_new_fence) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_sql_desc d;
    fence_log fl;
    simba_reply rep;
    sqlite3 *db;
    REQUIRE(loop != NULL);
    memset(&fl, 0, sizeof fl);
    memset(&d, 0, sizeof d);
    d.path = newdb(path, sizeof path);
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    REQUIRE(contend_fl(loop, be, "stepdown", "A", 600, 3000, &fl, &svc) == SIMBA_OK);
    CHECK_RC(simba_start(svc), SIMBA_OK);
    CHECK(drive(&loop, 1, 2000, is_owner_cond, svc));
    REQUIRE(fl.n == 1);
    db = raw_open(path);
    REQUIRE(db != NULL);
    CHECK_EQ(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    CHECK(drive(&loop, 1, 3000, is_not_owner_cond, svc)); /* local step-down at ttl_at */
    CHECK_EQ(fl.released, 1);
    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    /* the row still names A inside its transition window */
    CHECK_RC(simba__sql_read(be, "stepdown", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.fence, fl.fence[0]);
    CHECK(drive(&loop, 1, 2000, is_owner_cond, svc));
    fprintf(stderr, "  fences told: %llu then %llu\n", (unsigned long long)fl.fence[0],
            (unsigned long long)(fl.n > 1 ? fl.fence[1] : 0));
    CHECK_EQ(fl.n, 2);
    CHECK(fl.fence[1] > fl.fence[0]);
    CHECK_RC(simba__sql_read(be, "stepdown", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_EQ(rep.fence, fl.fence[1]);
    CHECK(rep.held_ms >= 0 && rep.held_ms < 1000); /* acquired_at is the new tenure's */
    sqlite3_close(db);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- in-process databases and the test clock ------------------------------------------ */

/* ":memory:" is one database for every backend of the process: two backends on one loop,
   one contender each, contend for real (never two owners at one poll). */
TEST(memory_two_backends_one_owner) {
    simba_loop *loop = newloop();
    simba_backend *be[2] = {NULL, NULL};
    counts c[2];
    int i, polls, owners, max_owners = 0, ever_owned = 0;
    memset(c, 0, sizeof c);
    REQUIRE(loop != NULL);
    for (i = 0; i < 2; i++) {
        REQUIRE(open_be(loop, ":memory:", NULL, &be[i]) == SIMBA_OK);
        REQUIRE(contend(loop, be[i], "m", i ? "B" : "A", 2000, 1000, &c[i], &pair[i]) == SIMBA_OK);
    }
    for (i = 0; i < 2; i++) CHECK_RC(simba_start(pair[i]), SIMBA_OK);
    for (polls = 0; polls < 50; polls++) {
        simba_poll(loop);
        owners = simba_is_owner(pair[0]) + simba_is_owner(pair[1]);
        if (owners > max_owners) max_owners = owners;
        if (owners) ever_owned = 1;
    }
    fprintf(stderr, "  most owners at one poll: %d; on_acquired A %d, B %d\n", max_owners, c[0].acquired,
            c[1].acquired);
    CHECK_EQ(max_owners, 1);
    CHECK(ever_owned);
    CHECK_EQ(c[0].acquired + c[1].acquired, 1);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* Paths that would give each connection its own database are refused with words; shared
   in-process forms are accepted and really shared. */
TEST(memory_private_databases_refused) {
    static const char *private_paths[] = {"file::memory:", "file:priv.db?mode=memory", "file:priv?vfs=memdb", "file:",
                                          "file:?mode=memory"};
    simba_loop *loop = newloop();
    simba_backend *be = NULL, *be2 = NULL;
    simba_sql_desc d;
    char err[512], owner[SIMBA_ID_MAX + 1];
    simba_reply rep;
    size_t i;
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    d.errbuf = err;
    d.errbuf_cap = sizeof err;
    d.path = "";
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), ":memory:") != NULL);
    for (i = 0; i < sizeof private_paths / sizeof private_paths[0]; i++) {
        d.path = private_paths[i];
        err[0] = 0;
        CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
        CHECK(be == NULL);
        CHECK(strstr(err, "private") != NULL && strstr(err, ":memory:") != NULL);
        CHECK(strstr(simba_loop_errmsg(loop), "private") != NULL);
    }
    fprintf(stderr, "  %s\n", err);
    /* a named memdb database is shared by two connections of the process */
    d.path = "file:/simba-test-named?vfs=memdb";
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    REQUIRE(simba_sql_open(loop, &d, &be2) == SIMBA_OK);
    CHECK_RC(simba__sql_exec(impl_of(be), SIMBA_OP_ACQUIRE, "shared", "A", 5000, 1000, 1, &rep), 0);
    CHECK_RC(simba__sql_read(be2, "shared", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    /* and is not the one ":memory:" names */
    d.path = ":memory:";
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_OK);
    CHECK_RC(simba__sql_read(be, "shared", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "");
    /* shared-cache in-memory databases are shared too, so they stay allowed */
    d.path = "file:simba_sc?mode=memory&cache=shared";
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_OK);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

static int64_t fake_now;
static int64_t fake_clock(void *u) {
    (void)u;
    return fake_now;
}
static simba_loop *fakeloop(void) {
    simba_loop *loop = NULL;
    simba_loop_desc d;
    memset(&d, 0, sizeof d);
    d.now_ms = fake_clock;
    if (simba_loop_new(&d, &loop) != SIMBA_OK) return NULL;
    return loop;
}
static simba_result open_test_clock_at(simba_loop *loop, const char *path, simba_backend **out) {
    simba_sql_desc d;
    memset(&d, 0, sizeof d);
    d.path = path;
    d.test_clock = 1;
    return simba_sql_open(loop, &d, out);
}
static simba_result open_test_clock(simba_loop *loop, simba_backend **out) { return open_test_clock_at(loop, ":memory:", out); }

/* With test_clock, leases follow the injected loop clock to the millisecond. */
TEST(test_clock_expiry_exact) {
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_reply rep;
    char owner[SIMBA_ID_MAX + 1];
    fake_now = 5000000;
    loop = fakeloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_test_clock(loop, &be) == SIMBA_OK);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "t", "A", 1000, 500, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.ttl_left_ms, 1000);
    CHECK_EQ(rep.transition_left_ms, 1500);
    CHECK_EQ(rep.held_ms, 0);
    CHECK_EQ(rep.fence, ((uint64_t)5000000 << 10) + 1); /* the floor from the loop's clock */
    fake_now += 1500; /* the last millisecond of the transition window: still A's */
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "t", "B", 1000, 500, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.ttl_left_ms, -500);
    CHECK_EQ(rep.transition_left_ms, 0);
    CHECK_EQ(rep.held_ms, 1500);
    fake_now += 1; /* one millisecond later the lease is over */
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "t", "B", 1000, 500, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "B");
    CHECK_EQ(rep.fence, ((uint64_t)5000000 << 10) + 2);
    CHECK_EQ(rep.ttl_left_ms, 1000);
    /* the stored times are the loop's, not the wall clock's */
    CHECK_EQ(raw_int(impl_of(be)->db, "SELECT ttl_at FROM simba_mutex WHERE mutex = 't'"), fake_now + 1000);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}


/* A file that is lost (deleted; a tmpfs across a reboot) and made again must not give a
   fence the lost one gave: a fenced resource that saw the old fences would accept the
   new owner's writes as the old owner's. Every row starts at its creation time x 2^10. */
TEST(lost_file_fences_stay_above) {
    char path[300], side[320], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_reply rep;
    uint64_t last = 0;
    int64_t t;
    int i;
    /* exactly, on the loop's clock: an in-memory database is lost with its last backend */
    fake_now = 9000000;
    loop = fakeloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_test_clock_at(loop, "file:/lost?vfs=memdb", &be) == SIMBA_OK);
    for (i = 0; i < 5; i++) { /* five ownerships on the first database */
        CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "lost", i % 2 ? "A" : "B", 1000, 0, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK(rep.fence > last);
        last = rep.fence;
        CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "lost", i % 2 ? "A" : "B", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    }
    CHECK_EQ(last, ((uint64_t)9000000 << 10) + 5);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    fake_now += 1; /* a millisecond later, a new database */
    loop = fakeloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_test_clock_at(loop, "file:/lost?vfs=memdb", &be) == SIMBA_OK);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "lost", "C", 1000, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "C");
    CHECK_EQ(rep.fence, ((uint64_t)9000001 << 10) + 1);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);

    /* on a file, deleted between two processes' lives (the wall clock) */
    newdb(path, sizeof path);
    loop = newloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, path, NULL, &be) == SIMBA_OK);
    for (i = 0; i < 3; i++) {
        CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "lost", i % 2 ? "A" : "B", 1000, 0, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "lost", i % 2 ? "A" : "B", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    }
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    {
        sqlite3 *db = raw_open(path);
        REQUIRE(db != NULL);
        last = (uint64_t)raw_int(db, "SELECT fence FROM simba_mutex WHERE mutex = 'lost'");
        sqlite3_close(db);
    }
    CHECK(floor_is_now(last - 3));
    CHECK_EQ(remove(path), 0);
    snprintf(side, sizeof side, "%s-wal", path);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", path);
    remove(side);
    /* the floor counts whole ms: wait (with a deadline) for the next one */
    t = mono_ms();
    while (wall_ms() <= (int64_t)((last - 3) / FLOOR_UNIT) && mono_ms() - t < 1000) poll(NULL, 0, 1);
    loop = newloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, path, NULL, &be) == SIMBA_OK);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "lost", "C", 1000, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "C");
    fprintf(stderr, "  fence before the loss %llu, after %llu\n", (unsigned long long)last, (unsigned long long)rep.fence);
    CHECK(rep.fence > last);
    CHECK(floor_is_now(rep.fence - 1));
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- batching ------------------------------------------------------------------------- */

/* What every contender observes, in order: acquisitions and releases with their fences, and
   each owner it learns, at the simulated time. */
static char blog[1 << 20];
static size_t blog_n;
static int64_t blog_t0;
static void blog_add(simba_service *s, char what, const simba_owner *o) {
    if (blog_n + 200 < sizeof blog)
        blog_n += (size_t)snprintf(blog + blog_n, sizeof blog - blog_n, "%lld %s %c %s %llu\n", (long long)(fake_now - blog_t0),
                                   simba_service_contender_id(s), what, o ? o->id : "-", o ? (unsigned long long)o->fence : 0ull);
}
static void blog_acq(simba_service *s, const simba_state *st, void *u) { (void)u; blog_add(s, 'A', st->after); }
static void blog_rel(simba_service *s, const simba_state *st, void *u) { (void)u; blog_add(s, 'R', st->before); }
static void blog_own(simba_service *s, const simba_state *st, void *u) { (void)u; blog_add(s, 'O', st->after); }
static uint32_t const_rand(void *u) { (void)u; return 0x9e3779b9u; }
static int commits;
static int count_commit(void *u) { (void)u; commits++; return 0; }

/* 100 mutexes, contenders "a" on one backend and "b" on another of the same database, half
   of the a's stopping midway; returns the write transactions the backends committed. */
static int batch_run(const char *path, int batch_max, uint64_t *batched) {
    enum { N = 100 };
    simba_loop *loop = NULL;
    simba_loop_desc ld;
    simba_sql_desc sd;
    simba_backend *be[2];
    static simba_service *sv[2][N];
    int i, k, step;
    memset(&ld, 0, sizeof ld);
    ld.now_ms = fake_clock;
    ld.random = const_rand;
    ld.poll_budget_us = 3600000000; /* batches as large as the logic makes them, however slow the build */
    if (simba_loop_new(&ld, &loop) != SIMBA_OK) return -1;
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    sd.test_clock = 1;
    sd.batch_max = batch_max;
    for (k = 0; k < 2; k++) {
        if (simba_sql_open(loop, &sd, &be[k]) != SIMBA_OK) return -1;
        sqlite3_commit_hook(impl_of(be[k])->db, count_commit, NULL);
    }
    commits = 0;
    blog_n = 0;
    blog_t0 = fake_now;
    for (k = 0; k < 2; k++)
        for (i = 0; i < N; i++) {
            simba_contend_desc d;
            char name[32], id[32];
            memset(&d, 0, sizeof d);
            snprintf(name, sizeof name, "batch%d", i);
            snprintf(id, sizeof id, "%c%d", k ? 'b' : 'a', i);
            d.mutex = name;
            d.contender_id = id;
            d.ttl_ms = 1000;
            d.transition_ms = 500;
            d.on_acquired = blog_acq;
            d.on_released = blog_rel;
            d.on_owner = blog_own;
            if (simba_contend(loop, be[k], &d, &sv[k][i]) != SIMBA_OK) return -1;
        }
    for (step = 0; step < 500; step++) { /* 5 s in 10 ms steps */
        int64_t w = 0;
        int polls;
        if (step == 0) for (i = 0; i < N; i++) CHECK_RC(simba_start(sv[0][i]), SIMBA_OK);
        if (step == 5) for (i = 0; i < N; i++) CHECK_RC(simba_start(sv[1][i]), SIMBA_OK);
        if (step == 200) for (i = 0; i < N; i += 2) CHECK_RC(simba_stop(sv[0][i]), SIMBA_OK);
        for (polls = 0; polls < 1000 && (w = simba_poll(loop)) == 0; polls++) {
        }
        CHECK(w > 0);
        for (i = 0; i < N; i++) CHECK(!(simba_is_owner(sv[0][i]) && simba_is_owner(sv[1][i])));
        fake_now += 10;
    }
    for (i = 0; i < N; i++) {
        CHECK(simba_is_owner(sv[i % 2 ? 0 : 1][i])); /* the a's that stopped were replaced by their b's */
        CHECK(!simba_is_owner(sv[i % 2 ? 1 : 0][i]));
    }
    *batched = impl_of(be[0])->batched + impl_of(be[1])->batched;
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    return commits;
}

/* Each contender's own lines in the order it saw them (contenders served in the same
   instant may be served in another order: that is not something any of them observes). */
static char *blog_lines[40000];
static int blog_cmp(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    const char *xi = strchr(x, ' ') + 1, *yi = strchr(y, ' ') + 1;
    size_t xl = strcspn(xi, " "), yl = strcspn(yi, " ");
    int c = xl != yl ? (xl < yl ? -1 : 1) : strncmp(xi, yi, xl);
    return c ? c : (x < y ? -1 : x > y);
}
static void blog_by_contender(char *buf) {
    static char out[sizeof blog];
    size_t n = 0, o = 0, i;
    char *p = buf, *nl;
    while ((nl = strchr(p, '\n')) != NULL && n < sizeof blog_lines / sizeof blog_lines[0]) {
        *nl = 0;
        blog_lines[n++] = p;
        p = nl + 1;
    }
    qsort(blog_lines, n, sizeof blog_lines[0], blog_cmp);
    for (i = 0; i < n; i++) o += (size_t)snprintf(out + o, sizeof out - o, "%s\n", blog_lines[i]);
    memcpy(buf, out, o + 1);
}

/* Batching changes the cost, not what anyone sees: the same run with every request in its
   own transaction and with batches gives every contender the same acquisitions, fences,
   releases and owner views at the same instants, with several times fewer write
   transactions. */
TEST(batched_requests_observe_what_single_requests_do) {
    static char single[sizeof blog];
    uint64_t batched1 = 0, batched = 0;
    int c1, cb;
    fake_now = 7000000;
    c1 = batch_run("file:/batch-single?vfs=memdb", 1, &batched1);
    blog_by_contender(blog);
    memcpy(single, blog, blog_n + 1);
    fake_now = 7000000;
    cb = batch_run("file:/batch-many?vfs=memdb", 0, &batched);
    REQUIRE(c1 > 0 && cb > 0);
    blog_by_contender(blog);
    CHECK(blog_n > 1000);
    CHECK(strcmp(single, blog) == 0);
    CHECK_EQ(batched1, 0);
    CHECK(batched > 1000);
    CHECK(cb * 4 < c1);
    fprintf(stderr, "  %d write transactions alone, %d batched (%llu requests in batches)\n", c1, cb, (unsigned long long)batched);
    if (strcmp(single, blog) != 0) {
        size_t i = 0;
        while (single[i] && single[i] == blog[i]) i++;
        while (i > 0 && single[i - 1] != '\n') i--;
        fprintf(stderr, "  first difference:\n  alone:   %.120s\n  batched: %.120s\n", single + i, blog + i);
    }
}


/* Two owners on one in-memory file whose first renewals fall due 32 ms apart (due[0], due[1]),
   on an injected clock and a constant jitter, with commits counted. NULL if set-up failed.
   renew_margin 320 ms makes the core's renewal grid 16 ms (margin / 16, a power of two), so
   the two stay 32 ms apart: the backend's own hold for company is what is tested. */
static simba_loop *two_owners_due_apart(const char *path, const char *prefix, int64_t start, simba_service *sv[2],
                                        int64_t due[2]) {
    simba_loop *loop = NULL;
    simba_loop_desc ld;
    simba_sql_desc sd;
    simba_backend *be = NULL;
    int k, polls;
    fake_now = start;
    memset(&ld, 0, sizeof ld);
    ld.now_ms = fake_clock;
    ld.random = const_rand;
    ld.poll_budget_us = 3600000000; /* what is due runs in its injected millisecond, however slow the build */
    if (simba_loop_new(&ld, &loop) != SIMBA_OK) return NULL;
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    sd.test_clock = 1;
    if (simba_sql_open(loop, &sd, &be) != SIMBA_OK) goto fail;
    sqlite3_commit_hook(impl_of(be)->db, count_commit, NULL);
    for (k = 0; k < 2; k++) {
        char name[64];
        simba_contend_desc d;
        snprintf(name, sizeof name, "%s%d", prefix, k);
        memset(&d, 0, sizeof d);
        d.mutex = name;
        d.ttl_ms = 6400;
        d.transition_ms = 3000;
        d.renew_margin_ms = 320;
        if (simba_contend(loop, be, &d, &sv[k]) != SIMBA_OK || simba_start(sv[k]) != SIMBA_OK) goto fail;
        for (polls = 0; polls < 100 && !simba_is_owner(sv[k]); polls++) simba_poll(loop);
        if (!simba_is_owner(sv[k])) goto fail;
        due[k] = sv[k]->tm.at; /* its first renewal */
        fake_now += 32;
    }
    if (due[1] - due[0] == 32) return loop;
fail:
    simba_loop_free(loop);
    return NULL;
}

/* Renewals due apart wait for company (at most ttl/64, here 50 ms): two owners whose
   renewals fall due 32 ms apart renew in one write transaction, each within the hold of
   its due time, and both stay owners. Without the hold each renewal commits alone. */
TEST(renewals_due_apart_share_one_write_transaction) {
    simba_loop *loop;
    simba_service *sv[2];
    int k, c0, polls;
    int64_t due[2], renewed[2] = {0, 0};
    int sent[2] = {0, 0};
    loop = two_owners_due_apart("file:/company?vfs=memdb", "company", 11000000, sv, due);
    REQUIRE(loop != NULL);
    /* 1 ms steps from just before the first renewal is due until both are answered */
    fake_now = due[0] - 1;
    simba_poll(loop);
    c0 = commits;
    while ((!renewed[0] || !renewed[1]) && fake_now < due[1] + 1000) {
        fake_now++;
        for (polls = 0; polls < 100 && simba_poll(loop) == 0; polls++) {
        }
        for (k = 0; k < 2; k++) { /* answered: sent (in flight) and no longer in flight */
            if (sv[k]->flags & SIMBA__F_INFLIGHT) sent[k] = 1;
            else if (sent[k] && !renewed[k]) renewed[k] = fake_now;
        }
    }
    CHECK(renewed[0] && renewed[1]);
    CHECK_EQ(commits - c0, 1);
    CHECK(renewed[0] <= due[0] + 50);
    CHECK(renewed[1] <= due[1] + 50);
    CHECK(simba_is_owner(sv[0]) && simba_is_owner(sv[1]));
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* A late poll must not split what waits for company: the first renewal is submitted in its
   due millisecond and held; the next poll comes 60 ms late, after the first's hold and the
   second's due time. The held renewal waits for the second's timer in that same poll, so
   both commit in one write transaction. (Before, the backend sent the held one before the
   loop ran the due timer: two transactions.) The held one's time is up, so they go at once. */
TEST(late_poll_keeps_held_renewals_together) {
    simba_loop *loop;
    simba_service *sv[2];
    int c0, polls;
    int64_t due[2];
    loop = two_owners_due_apart("file:/latepoll?vfs=memdb", "late", 12000000, sv, due);
    REQUIRE(loop != NULL);
    fake_now = due[0];
    c0 = commits;
    simba_poll(loop);
    CHECK(sv[0]->flags & SIMBA__F_INFLIGHT); /* submitted, held for company */
    CHECK_EQ(commits - c0, 0);
    fake_now = due[0] + 60;
    for (polls = 0; polls < 100 && simba_poll(loop) == 0; polls++) {
    }
    CHECK_EQ(sv[1]->tm.at > due[1], 1); /* the late timer ran in that poll */
    fake_now = due[0] + 200;
    for (polls = 0; polls < 100 && ((sv[0]->flags | sv[1]->flags) & SIMBA__F_INFLIGHT); polls++) simba_poll(loop);
    CHECK(!(sv[0]->flags & SIMBA__F_INFLIGHT) && !(sv[1]->flags & SIMBA__F_INFLIGHT));
    CHECK_EQ(commits - c0, 1);
    CHECK(simba_is_owner(sv[0]) && simba_is_owner(sv[1]));
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* A waiter's ask that expects the mutex held may wait for company, but not once its
   release was pushed: that ask is a handoff and goes at once. Here the loop's clock stands
   still, so a held ask would never run: the woken waiter owns all the same. */
TEST(woken_waiter_ask_is_not_held) {
    char path[300];
    simba_loop *loop = NULL;
    simba_loop_desc ld;
    simba_sql_desc sd;
    simba_backend *be[2];
    simba_service *sv[2];
    int k, i;
    int64_t t0;
    fake_now = 13000000;
    memset(&ld, 0, sizeof ld);
    ld.now_ms = fake_clock;
    REQUIRE(simba_loop_new(&ld, &loop) == SIMBA_OK);
    memset(&sd, 0, sizeof sd);
    sd.path = newdb(path, sizeof path); /* a file: wake-ups are datagrams (the database keeps its own clock) */
    for (k = 0; k < 2; k++) {
        simba_contend_desc d;
        REQUIRE(simba_sql_open(loop, &sd, &be[k]) == SIMBA_OK);
        REQUIRE(impl_of(be[k])->wake_fd >= 0);
        memset(&d, 0, sizeof d);
        d.mutex = "woken";
        d.contender_id = k ? "b" : "a";
        d.ttl_ms = 6400;
        d.transition_ms = 3000;
        REQUIRE(simba_contend(loop, be[k], &d, &sv[k]) == SIMBA_OK);
        CHECK_RC(simba_start(sv[k]), SIMBA_OK);
        for (i = 0; i < 100 && (sv[k]->flags & SIMBA__F_INFLIGHT || !(sv[k]->flags & SIMBA__F_ASKED)); i++) simba_poll(loop);
    }
    REQUIRE(simba_is_owner(sv[0]));
    REQUIRE(!simba_is_owner(sv[1]));
    fake_now += 100;
    CHECK_RC(simba_stop(sv[0]), SIMBA_OK);
    for (t0 = mono_ms(); mono_ms() - t0 < 5000 && !simba_is_owner(sv[1]);) simba_wait(loop, 20);
    CHECK(simba_is_owner(sv[1]));
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* The budget tests' setup: a loop on the test clock with the given budget (µs; steps, 0 = no
   count bound) and a backend on an in-memory database of its own. */
static int budget_open(const char *path, int64_t budget_us, int max_steps, simba_loop **loop, simba_backend **be) {
    simba_loop_desc ld;
    simba_sql_desc sd;
    memset(&ld, 0, sizeof ld);
    ld.now_ms = fake_clock;
    ld.poll_budget_us = budget_us;
    ld.poll_max_steps = max_steps;
    if (simba_loop_new(&ld, loop) != SIMBA_OK) return 0;
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    sd.test_clock = 1;
    return simba_sql_open(*loop, &sd, be) == SIMBA_OK;
}
/* ... and n services on mutexes prefix0..prefix<n-1>, started at once. */
static int budget_services(simba_loop *loop, simba_backend *be, const char *prefix, int64_t ttl_ms, int64_t tr_ms,
                           int n, simba_service **sv) {
    int i;
    for (i = 0; i < n; i++) {
        simba_contend_desc d;
        char name[32];
        memset(&d, 0, sizeof d);
        snprintf(name, sizeof name, "%s%d", prefix, i);
        d.mutex = name;
        d.ttl_ms = ttl_ms;
        d.transition_ms = tr_ms;
        if (simba_contend(loop, be, &d, &sv[i]) != SIMBA_OK || simba_start(sv[i]) != SIMBA_OK) return 0;
    }
    return 1;
}

/* Synchronous statements count against the poll's budget: with a bound of 20 steps no poll
   executes more than 20 requests, however many fall due together, and all are served. */
TEST(sql_statements_count_against_the_poll_budget) {
    enum { N = 500, MAX = 20 };
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    static simba_service *sv[N];
    int i, polls = 0, owners = 0;
    uint64_t most = 0;
    fake_now = 9000000;
    REQUIRE(budget_open("file:/budget?vfs=memdb", 3600000000, MAX, &loop, &be));
    REQUIRE(budget_services(loop, be, "budget", 1000, 500, N, sv));
    while (owners < N && polls < 10000) {
        uint64_t before = impl_of(be)->executed, did;
        int64_t w = simba_poll(loop);
        CHECK(w >= 0);
        did = impl_of(be)->executed - before;
        if (did > most) most = did;
        polls++;
        for (owners = 0, i = 0; i < N; i++) owners += simba_is_owner(sv[i]);
        if (owners < N) CHECK_EQ(w, 0); /* work left: at once */
    }
    CHECK_EQ(owners, N);
    CHECK(most <= MAX);
    CHECK(most >= MAX / 2); /* batches did fill up to the bound */
    CHECK(polls >= N / MAX);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}


/* The COMMIT that closes a batch counts against the poll's budget too: its cost per
   request is learnt from the commits, and a batch takes only as many requests as fit
   with it. Here each commit sleeps 200 µs per row it changed (a slow disk) and the budget is
   4 ms: once learnt (after 20 commits), no commit changes more than 30 rows (20 rows are the
   whole budget; the estimate is per request, and a request changes one row or two), where
   the statements alone (microseconds each in memory) fill batches of 64 requests, 64-128
   rows. Counted by the commit hook, per commit, whatever the polls did. Then another
   connection commits (SQLite drops the loop's page cache): the next batch reserves 5 times
   its COMMIT, at most 6 requests (12 rows). */
static int slow_changes, slow_commits, slow_late, slow_most_early, slow_most_late, slow_watch, slow_after_other;
static int slow_commit(void *u) {
    sqlite3 *db = (sqlite3 *)u;
    int now = sqlite3_total_changes(db), rows = now - slow_changes;
    struct timespec ts = {0, 0};
    slow_changes = now;
    if (slow_watch && rows > 0) {
        slow_after_other = rows;
        slow_watch = 0;
    }
    if (++slow_commits > 20) {
        slow_late++;
        if (rows > slow_most_late) slow_most_late = rows;
    } else if (rows > slow_most_early) {
        slow_most_early = rows;
    }
    ts.tv_nsec = 200000L * rows;
    while (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    nanosleep(&ts, NULL);
    return 0;
}
/* Polls until the loop asks to wait (its work done), then moves the test clock 2.1 s on:
   past a renewal (every ttl - ttl/3 = 2 s at ttl 3 s), and past the wait for company of
   the renewals just queued, which the next round then sends (4.2 s after the grant: inside
   the transition of 2 s, since a renewal after the lease is no grant). */
static int slow_round(simba_loop *loop, int *polls) {
    int64_t w;
    do {
        w = simba_poll(loop);
        if (w < 0) return 0;
        (*polls)++;
    } while (w == 0 && *polls < 100000);
    fake_now += 2100;
    return 1;
}
TEST(sql_batches_leave_room_for_their_commit) {
    enum { N = 1000 };
    static const char *path = "file:/commit-room?vfs=memdb";
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    static simba_service *sv[N];
    sqlite3 *other = NULL;
    int i, k, polls = 0, owners = 0;
    fake_now = 11000000;
    REQUIRE(budget_open(path, 4000, 0, &loop, &be));
    slow_changes = sqlite3_total_changes(impl_of(be)->db);
    slow_commits = slow_late = slow_most_early = slow_most_late = 0;
    sqlite3_commit_hook(impl_of(be)->db, slow_commit, impl_of(be)->db);
    REQUIRE(budget_services(loop, be, "room", 3000, 2000, N, sv)); /* renewals sent a round late land in the lease */
    /* the first acquisitions, then two rounds of renewals */
    for (k = 0; k < 3; k++) CHECK(slow_round(loop, &polls));
    /* another connection commits: the next batch is cold */
    REQUIRE(sqlite3_open_v2(path, &other, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, "CREATE TABLE IF NOT EXISTS other_data (x); INSERT INTO other_data VALUES (1)", NULL, NULL,
                         NULL) == SQLITE_OK);
    sqlite3_close(other);
    slow_watch = 1;
    slow_after_other = 0;
    for (k = 0; k < 2; k++) CHECK(slow_round(loop, &polls));
    for (owners = 0, i = 0; i < N; i++) owners += simba_is_owner(sv[i]);
    fprintf(stderr, "  %d polls, %d commits; the most rows in one: %d in the first 20, %d after; "
                    "%lld ns per request learnt; %d rows in the first after another connection's\n",
            polls, slow_commits, slow_most_early, slow_most_late, (long long)impl_of(be)->commit_ns, slow_after_other);
    CHECK_EQ(owners, N);
    CHECK(slow_late >= 20);
    CHECK(slow_most_early > 20); /* before it learnt, batches filled */
    CHECK(slow_most_late >= 2);  /* still batches */
    CHECK(slow_most_late <= 30); /* 20 x 200 µs is the whole budget */
    CHECK(impl_of(be)->commit_ns >= 100000);
    CHECK(slow_after_other >= 1 && slow_after_other <= 12);
    sqlite3_commit_hook(impl_of(be)->db, NULL, NULL);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* A waiter that is not granted now and whose place outlives its next ask (simba_req.
   next_ask_ms) is answered by reads alone: the same owner and place as the queue's
   transaction would report, no write transaction. Without next_ask_ms it refreshes. */
static simba_result kept_ask(simba_backend *be, const char *who, int64_t next_ask, simba_reply *rep, char *owner) {
    int rc;
    impl_of(be)->next_ask_ms = next_ask;
    rc = simba__sql_exec_req(impl_of(be), SIMBA_OP_ACQUIRE, "kept", who, 5000, 1000, 0, 0, 8000, rep);
    impl_of(be)->next_ask_ms = 0;
    if (rc == SIMBA__SQL_BUSY) return SIMBA_EBUSY;
    snprintf(owner, SIMBA_ID_MAX + 1, "%s", rep->owner ? rep->owner : "");
    return rep->rc;
}
TEST(waiter_not_at_the_head_does_not_write) {
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_reply rep;
    char owner[SIMBA_ID_MAX + 1];
    fake_now = 11000000;
    loop = fakeloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_test_clock_at(loop, "file:/kept?vfs=memdb", &be) == SIMBA_OK);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "kept", "A", 5000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    sqlite3_commit_hook(impl_of(be)->db, count_commit, NULL);
    commits = 0;
    CHECK_RC(kept_ask(be, "B", 7000, &rep, owner), SIMBA_OK); /* no place yet: joins */
    CHECK_EQ(rep.first_in_line, 1);
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK);
    CHECK_EQ(rep.first_in_line, 0);
    CHECK_EQ(commits, 2);
    fake_now += 10;
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK); /* place lasts 7990 ms >= 7000 */
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.first_in_line, 0);
    CHECK_EQ(rep.ttl_left_ms, 5000 - 10);
    CHECK_RC(kept_ask(be, "B", 7000, &rep, owner), SIMBA_OK);
    CHECK_EQ(rep.first_in_line, 1);
    CHECK_EQ(commits, 2); /* read alone */
    CHECK_EQ(impl_of(be)->kept_places, 2);
    CHECK_RC(kept_ask(be, "C", 0, &rep, owner), SIMBA_OK); /* next ask unknown: refreshes */
    CHECK_EQ(commits, 3);
    fake_now += 1500;
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK); /* 6490 ms left: refreshes */
    CHECK_EQ(commits, 4);
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "kept", "A", 5000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
    commits = 0;
    fake_now += 10;
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK); /* free, kept for B */
    CHECK_STR(owner, "");
    CHECK_EQ(rep.first_in_line, 0);
    CHECK_EQ(commits, 0);
    CHECK_RC(kept_ask(be, "B", 7000, &rep, owner), SIMBA_OK); /* the head takes it */
    CHECK_STR(owner, "B");
    CHECK_EQ(rep.fence, ((uint64_t)11000000 << 10) + 2);
    commits = 0;
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK);
    CHECK_STR(owner, "B");
    CHECK_EQ(rep.first_in_line, 1); /* C heads the line now */
    CHECK_EQ(commits, 0);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* A waiter whose place would lapse before its next ask refreshes it with one small write
   (its own row's liveness), not the queue's transaction (savepoint, purge, join, count, a
   second read): W4 showed the transaction on every waiter's ask, since a place outlives an
   ask by one second only. A place that already lapsed is not revived: it rejoins at the
   back, as the queue's transaction would make it. */
static int stmt_runs(simba_backend *be, int which) {
    return sqlite3_stmt_status(impl_of(be)->st[which], SQLITE_STMTSTATUS_RUN, 0);
}
static int64_t place_left(simba_backend *be, const char *who) {
    sqlite3_stmt *st = NULL;
    int64_t left = -1;
    CHECK_EQ(sqlite3_prepare_v2(impl_of(be)->db, "SELECT expires_at - ?2 FROM simba_mutex_wait WHERE mutex = 'kept' AND contender = ?1",
                                -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, who, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, fake_now);
    if (sqlite3_step(st) == SQLITE_ROW) left = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return left;
}
/* A stop while the owner's renewal is held for company (up to ttl/64) sends the renewal and
   then the release at once: the clock does not move. Before the vt's hurry hook the release
   waited for the hold (examples/test_with_simba.c failed 6 % of runs on it). */
TEST(stop_behind_a_held_renewal) {
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_service *svc;
    simba_contend_desc cd;
    int i, held = 0;
    fake_now = 13000000;
    loop = fakeloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_test_clock(loop, &be) == SIMBA_OK);
    memset(&cd, 0, sizeof cd);
    cd.mutex = "held-renewal";
    cd.contender_id = "A";
    cd.ttl_ms = 6400; /* a renewal may wait 100 ms for company */
    cd.transition_ms = 1000;
    REQUIRE(simba_contend(loop, be, &cd, &svc) == SIMBA_OK);
    REQUIRE(simba_start(svc) == SIMBA_OK);
    for (i = 0; i < 10 && !simba_is_owner(svc); i++) simba_poll(loop);
    REQUIRE(simba_is_owner(svc));
    /* move 1 ms at a time to the renewal: it is submitted, and held */
    for (i = 0; i < 7000 && !held; i++) {
        simba_stats st;
        fake_now += 1;
        simba_poll(loop);
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        REQUIRE(simba_service_stats(svc, &st) == SIMBA_OK);
        held = st.in_flight == 1 && impl_of(be)->head != NULL;
    }
    REQUIRE(held);
    CHECK_RC(simba_stop(svc), SIMBA_OK);
    for (i = 0; i < 5 && simba_service_status(svc) != SIMBA_INITIAL; i++) simba_poll(loop); /* no time passes */
    CHECK_EQ((int)simba_service_status(svc), (int)SIMBA_INITIAL);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

TEST(waiter_refreshes_its_place_with_one_write) {
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_reply rep;
    char owner[SIMBA_ID_MAX + 1];
    int joins, counts, begins;
    fake_now = 12000000;
    loop = fakeloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_test_clock_at(loop, "file:/refresh?vfs=memdb", &be) == SIMBA_OK);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "kept", "A", 20000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_RC(kept_ask(be, "B", 7000, &rep, owner), SIMBA_OK); /* joins: place 8000 ms */
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK);
    CHECK_EQ(place_left(be, "C"), 8000);
    sqlite3_commit_hook(impl_of(be)->db, count_commit, NULL);
    commits = 0;
    joins = stmt_runs(be, SIMBA__SQL_Q_JOIN);
    counts = stmt_runs(be, SIMBA__SQL_Q_COUNT);
    begins = stmt_runs(be, SIMBA__SQL_BEGIN);
    fake_now += 4000; /* 4000 ms left < 7000: C must refresh */
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.first_in_line, 0);
    CHECK_EQ(rep.ttl_left_ms, 16000);
    CHECK_EQ(place_left(be, "C"), 8000); /* refreshed from now */
    CHECK_EQ(commits, 1);                /* one write */
    CHECK_EQ(impl_of(be)->refreshed_places, 1);
    CHECK_EQ(stmt_runs(be, SIMBA__SQL_Q_JOIN), joins);
    CHECK_EQ(stmt_runs(be, SIMBA__SQL_Q_COUNT), counts);
    CHECK_EQ(stmt_runs(be, SIMBA__SQL_BEGIN), begins);
    CHECK_RC(kept_ask(be, "B", 7000, &rep, owner), SIMBA_OK); /* B too, and still heads */
    CHECK_EQ(rep.first_in_line, 1);
    CHECK_EQ(place_left(be, "B"), 8000);
    CHECK_EQ(commits, 2);
    /* C refreshes again; B's place lapses unrefreshed. B, asking late, is not revived: it
       rejoins behind C through the queue's transaction, and C heads the line. */
    fake_now += 4500;
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK);
    CHECK_EQ(rep.first_in_line, 0); /* B's place still lives */
    CHECK_EQ(commits, 3);
    fake_now += 4000;
    CHECK(place_left(be, "B") < 0);
    CHECK_RC(kept_ask(be, "B", 7000, &rep, owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    CHECK_EQ(rep.first_in_line, 0);
    CHECK_EQ(stmt_runs(be, SIMBA__SQL_Q_JOIN), joins + 1);
    CHECK_RC(kept_ask(be, "C", 7000, &rep, owner), SIMBA_OK);
    CHECK_EQ(rep.first_in_line, 1);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* The test clock where it cannot be safe, and clocks mixed on one in-memory database. */
TEST(test_clock_refused_where_unsafe) {
    simba_loop *loop;
    simba_backend *wall = NULL, *be = NULL;
    simba_sql_desc d;
    char path[300], err[512];
    struct stat sb;
    fake_now = 1000;
    loop = fakeloop();
    REQUIRE(loop != NULL);
    memset(&d, 0, sizeof d);
    d.errbuf = err;
    d.errbuf_cap = sizeof err;
    d.test_clock = 1;
    d.path = newdb(path, sizeof path);
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(err, "test_clock") != NULL && strstr(err, "wall clock") != NULL);
    CHECK(stat(path, &sb) != 0); /* refused before anything was created */
    fprintf(stderr, "  file: %s\n", err);
    d.path = "file:/x?vfs=memdb&mode=ro";
    d.test_clock = 2;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(simba_loop_errmsg(loop), "test_clock") != NULL);
    /* the first backend of ":memory:" fixes its clock */
    d.path = ":memory:";
    d.test_clock = 0;
    REQUIRE(simba_sql_open(loop, &d, &wall) == SIMBA_OK);
    d.test_clock = 1;
    CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EINVAL);
    CHECK(strstr(err, "clock") != NULL);
    fprintf(stderr, "  mixed: %s\n", err);
    CHECK_RC(simba_backend_free(wall), SIMBA_OK); /* the database goes with its last backend */
    REQUIRE(simba_sql_open(loop, &d, &be) == SIMBA_OK);
    d.test_clock = 0;
    CHECK_RC(simba_sql_open(loop, &d, &wall), SIMBA_EINVAL);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* Steps the fake clock to the loop's next deadline (at most max_step ms) until cond holds
   or until the clock passes limit; no sleeps. */
static int run_fake(simba_loop *loop, int64_t limit, int64_t max_step, int (*cond)(void *), void *arg) {
    for (;;) {
        int64_t w = simba_poll(loop);
        if (cond && cond(arg)) return 1;
        if (fake_now >= limit) return 0;
        if (w < 1) w = 1;
        if (w > max_step) w = max_step;
        if (fake_now + w > limit) w = limit - fake_now;
        fake_now += w;
    }
}

/* simba_sql_simulate_crash(): the owner's lease stays in the row until it ends, the release
   never arrives, and the other contender takes over only after the lease. A clean stop
   instead hands over without the clock moving. */
TEST(simulated_crash_keeps_lease_until_it_ends) {
    simba_loop *loop;
    simba_backend *be[2];
    counts c[2];
    simba_reply rep;
    char owner[SIMBA_ID_MAX + 1];
    int64_t crash_at, lease_end, took_at;
    uint64_t f1;
    int i;
    memset(c, 0, sizeof c);
    fake_now = 7000000;
    loop = fakeloop();
    REQUIRE(loop != NULL);
    for (i = 0; i < 2; i++) {
        REQUIRE(open_test_clock(loop, &be[i]) == SIMBA_OK);
        REQUIRE(contend(loop, be[i], "job", i ? "B" : "A", 1000, 500, &c[i], &pair[i]) == SIMBA_OK);
    }
    CHECK_RC(simba_start(pair[0]), SIMBA_OK);
    CHECK(run_fake(loop, fake_now + 100, 10, is_owner_cond, pair[0]));
    CHECK_RC(simba_start(pair[1]), SIMBA_OK);
    run_fake(loop, fake_now + 2500, 10, NULL, NULL); /* a few renewals */
    REQUIRE(simba_is_owner(pair[0]) && !simba_is_owner(pair[1]));
    f1 = simba_fence(pair[0]);
    CHECK_RC(simba__sql_read(be[1], "job", &rep, owner, sizeof owner), SIMBA_OK);
    crash_at = fake_now;
    lease_end = crash_at + rep.transition_left_ms; /* the last renewal's transition end */
    CHECK_RC(simba_sql_simulate_crash(be[0]), SIMBA_OK);
    CHECK(run_fake(loop, lease_end + 2000, 1, is_owner_cond, pair[1]));
    took_at = fake_now;
    fprintf(stderr, "  crash at +0, row's lease ends at +%lld, B owner at +%lld (jitter [-200, 1000))\n",
            (long long)(lease_end - crash_at), (long long)(took_at - crash_at));
    CHECK(took_at > lease_end);
    CHECK(took_at <= lease_end + 1000 + 50);
    CHECK_EQ(c[0].released, 1); /* A stepped down locally before B could win */
    CHECK(simba_fence(pair[1]) > f1);
    /* B stops: its release arrives, and A's crashed backend never writes again */
    CHECK_RC(simba__sql_read(be[1], "job", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "B");
    CHECK_RC(simba__sql_read(be[0], "job", &rep, owner, sizeof owner), SIMBA_ESTATE);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);

    /* control: the same without the crash, the stop releases and B takes over at once */
    memset(c, 0, sizeof c);
    loop = fakeloop();
    REQUIRE(loop != NULL);
    for (i = 0; i < 2; i++) {
        REQUIRE(open_test_clock(loop, &be[i]) == SIMBA_OK);
        REQUIRE(contend(loop, be[i], "job", i ? "B" : "A", 1000, 500, &c[i], &pair[i]) == SIMBA_OK);
    }
    CHECK_RC(simba_start(pair[0]), SIMBA_OK);
    CHECK(run_fake(loop, fake_now + 100, 10, is_owner_cond, pair[0]));
    CHECK_RC(simba_start(pair[1]), SIMBA_OK);
    run_fake(loop, fake_now + 300, 10, NULL, NULL);
    CHECK_RC(simba_stop(pair[0]), SIMBA_OK);
    crash_at = fake_now;
    for (i = 0; i < 10 && !simba_is_owner(pair[1]); i++) simba_poll(loop); /* the clock stands still */
    CHECK(simba_is_owner(pair[1]));
    CHECK_EQ(fake_now, crash_at);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);

    /* a crashed owner's loop free leaves its row as a dead process would */
    loop = fakeloop();
    REQUIRE(loop != NULL);
    for (i = 0; i < 2; i++) REQUIRE(open_test_clock(loop, &be[i]) == SIMBA_OK);
    {
        simba_loop *l2 = fakeloop();
        simba_backend *dead = NULL;
        simba_service *svc = NULL;
        counts cd = {0, 0, 0};
        REQUIRE(l2 != NULL);
        REQUIRE(open_test_clock(l2, &dead) == SIMBA_OK);
        REQUIRE(contend(l2, dead, "job2", "D", 1000, 500, &cd, &svc) == SIMBA_OK);
        CHECK_RC(simba_start(svc), SIMBA_OK);
        CHECK(run_fake(l2, fake_now + 100, 10, is_owner_cond, svc));
        CHECK_RC(simba_sql_simulate_crash(dead), SIMBA_OK);
        CHECK_RC(simba_loop_free(l2), SIMBA_OK);
    }
    CHECK_RC(simba__sql_read(be[0], "job2", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "D");
    CHECK_RC(simba_sql_simulate_crash(NULL), SIMBA_EINVAL);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ":memory:" from loops on two threads: the connections really contend (SQLITE_BUSY, retried
   from the loop), tenures never overlap and fences increase from one to the next. Each
   thread gives up ownership after holding it 30 ms and rests 20 ms, so ownership changes
   hands often. */
typedef struct mt_tenure {
    int64_t from, to;
    uint64_t fence;
} mt_tenure;
typedef struct mt_arg {
    const char *id;
    int64_t until;
    int ok, tenures;
    mt_tenure t[400];
} mt_arg;
static void mt_acq(simba_service *svc, const simba_state *st, void *u) {
    mt_arg *a = (mt_arg *)u;
    (void)svc;
    if (a->tenures < 400) {
        a->t[a->tenures].from = mono_ms();
        a->t[a->tenures].to = -1;
        a->t[a->tenures].fence = st->after ? st->after->fence : 0;
    }
}
static void mt_rel(simba_service *svc, const simba_state *st, void *u) {
    mt_arg *a = (mt_arg *)u;
    (void)svc;
    (void)st;
    if (a->tenures < 400) a->t[a->tenures++].to = mono_ms();
}
static void *mt_run(void *p) {
    mt_arg *a = (mt_arg *)p;
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    simba_contend_desc d;
    int64_t held_since = -1, rest_until = 0;
    if (!loop || open_be(loop, ":memory:", NULL, &be) != SIMBA_OK) {
        fprintf(stderr, "  %s: open: %s\n", a->id, loop ? simba_loop_errmsg(loop) : "no loop");
        if (loop) simba_loop_free(loop);
        return NULL;
    }
    memset(&d, 0, sizeof d);
    d.mutex = "mt";
    d.contender_id = a->id;
    d.ttl_ms = 400;
    d.transition_ms = 200;
    d.on_acquired = mt_acq;
    d.on_released = mt_rel;
    d.user_data = a;
    if (simba_contend(loop, be, &d, &svc) != SIMBA_OK || simba_start(svc) != SIMBA_OK) return NULL;
    while (mono_ms() < a->until) {
        simba_wait(loop, 2);
        if (simba_is_owner(svc) && held_since < 0) held_since = mono_ms();
        if (held_since >= 0 && mono_ms() - held_since >= 30 && simba_service_status(svc) == SIMBA_RUNNING) {
            simba_stop(svc);
            held_since = -1;
            rest_until = mono_ms() + 20; /* SQLite keeps no wait queue: let the other win */
        }
        if (simba_service_status(svc) == SIMBA_INITIAL && mono_ms() >= rest_until) simba_start(svc);
    }
    simba_stop(svc);
    {
        int64_t end = mono_ms() + 2000;
        while (simba_service_status(svc) != SIMBA_INITIAL && mono_ms() < end) simba_wait(loop, 2);
    }
    a->ok = simba_loop_free(loop) == SIMBA_OK;
    return NULL;
}
TEST(memory_shared_across_threads) {
    mt_arg a[2];
    pthread_t th[2];
    mt_tenure all[800];
    int i, j, n = 0, overlaps = 0, fence_bad = 0;
    memset(a, 0, sizeof a);
    a[0].id = "T0";
    a[1].id = "T1";
    a[0].until = a[1].until = mono_ms() + 1500;
    for (i = 0; i < 2; i++) REQUIRE(pthread_create(&th[i], NULL, mt_run, &a[i]) == 0);
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(a[0].ok && a[1].ok);
    for (i = 0; i < 2; i++)
        for (j = 0; j < a[i].tenures; j++) all[n++] = a[i].t[j];
    /* in order of start; each must end before the next starts, with a greater fence */
    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++)
            if (all[j].from < all[i].from) {
                mt_tenure x = all[i];
                all[i] = all[j];
                all[j] = x;
            }
    for (i = 1; i < n; i++) {
        if (all[i].from < all[i - 1].to) overlaps++;
        if (all[i].fence <= all[i - 1].fence) fence_bad++;
    }
    fprintf(stderr, "  tenures: T0 %d, T1 %d; overlaps %d, fences not increasing %d\n", a[0].tenures, a[1].tenures,
            overlaps, fence_bad);
    CHECK(a[0].tenures >= 3 && a[1].tenures >= 3);
    CHECK_EQ(overlaps, 0);
    CHECK_EQ(fence_bad, 0);
}

/* ---- the wait queue and wake-ups ------------------------------------------ */

/* One acquire through the executor with the core's liveness for this timing. */
static simba_result q_acquire(simba_backend *be, const char *mutex, const char *who, simba_reply *rep, char *owner) {
    int64_t until = mono_ms() + 2000;
    int rc;
    while ((rc = simba__sql_exec_req(impl_of(be), SIMBA_OP_ACQUIRE, mutex, who, 5000, 1000, 0, 0, 8000, rep)) ==
           SIMBA__SQL_BUSY) {
        if (mono_ms() > until) return SIMBA_EBUSY;
        poll(NULL, 0, 1);
    }
    snprintf(owner, SIMBA_ID_MAX + 1, "%s", rep->owner ? rep->owner : "");
    rep->owner = owner;
    return rep->rc;
}

/* 1 when fd has a datagram within ms. */
static int readable_within(int fd, int ms) {
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static void drain_fd(int fd) {
    char buf[512];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) >= 0) {}
}

/* The rule, row by row, with four connections on one file: arrival order, the releaser goes
   to the back, a non-head that finds the mutex free does not take it, the waiters count
   follows the queue, and a release wakes exactly the head's connection. */
TEST(queue_arrival_order_and_releaser_to_the_back) {
    static const char *ids[4] = {"A", "B", "C", "D"};
    char path[300], owner[SIMBA_ID_MAX + 1], sql[200];
    simba_loop *loop = newloop();
    simba_backend *be[4];
    simba_reply rep;
    sqlite3 *raw;
    int i, round;
    REQUIRE(loop != NULL);
    newdb(path, sizeof path);
    for (i = 0; i < 4; i++) REQUIRE(open_be(loop, path, NULL, &be[i]) == SIMBA_OK);
    for (i = 0; i < 4; i++) REQUIRE(impl_of(be[i])->wake_fd >= 0);
    raw = raw_open(path);
    REQUIRE(raw != NULL);
    CHECK_RC(q_acquire(be[0], "q", "A", &rep, owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    for (i = 1; i < 4; i++) {
        CHECK_RC(q_acquire(be[i], "q", ids[i], &rep, owner), SIMBA_OK);
        CHECK_STR(owner, "A");
        CHECK_EQ(rep.first_in_line, i == 1);
    }
    CHECK_EQ(raw_int(raw, "SELECT waiters FROM simba_mutex WHERE mutex = 'q'"), 3);
    CHECK_EQ(raw_int(raw, "SELECT count(*) FROM simba_mutex_wait WHERE mutex = 'q'"), 3);
    /* Around twice: the owner releases and asks again at once; the others, asking in any
       order, get it only at the head. */
    for (round = 0; round < 8; round++) {
        int cur = round % 4, next = (round + 1) % 4, after = (round + 2) % 4;
        for (i = 0; i < 4; i++) drain_fd(impl_of(be[i])->wake_fd);
        CHECK_RC(exec_op(be[cur], SIMBA_OP_RELEASE, "q", ids[cur], 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
        CHECK_STR(owner, "");
        CHECK(readable_within(impl_of(be[next])->wake_fd, 1000)); /* the head is woken */
        CHECK(!readable_within(impl_of(be[after])->wake_fd, 0));  /* nobody else */
        CHECK_RC(q_acquire(be[cur], "q", ids[cur], &rep, owner), SIMBA_OK);
        CHECK_STR(owner, ""); /* free, but reserved for the head: the releaser queues */
        CHECK_EQ(rep.first_in_line, 0);
        CHECK_RC(q_acquire(be[after], "q", ids[after], &rep, owner), SIMBA_OK);
        CHECK_STR(owner, ""); /* not the head either */
        CHECK_RC(q_acquire(be[next], "q", ids[next], &rep, owner), SIMBA_OK);
        CHECK_STR(owner, ids[next]);
        CHECK_EQ(raw_int(raw, "SELECT waiters FROM simba_mutex WHERE mutex = 'q'"), 3);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM simba_mutex_wait WHERE mutex = 'q' AND contender = '%s'", ids[next]);
        CHECK_EQ(raw_int(raw, sql), 0);
    }
    /* A waiter that stops leaves the line; the last owner's release then finds nobody. */
    for (i = 0; i < 4; i++)
        if (i != 0) CHECK_RC(exec_op(be[i], SIMBA_OP_RELEASE, "q", ids[i], 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_EQ(raw_int(raw, "SELECT waiters FROM simba_mutex WHERE mutex = 'q'"), 0);
    CHECK_RC(exec_op(be[0], SIMBA_OP_RELEASE, "q", "A", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_RC(q_acquire(be[2], "q", "C", &rep, owner), SIMBA_OK);
    CHECK_STR(owner, "C");
    sqlite3_close(raw);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* A waiter whose liveness (simba_req.live_ms) passed is dropped: it reserves nothing. */
TEST(queue_dead_waiter_dropped_after_its_liveness) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *be[3];
    simba_reply rep;
    int i, rc;
    REQUIRE(loop != NULL);
    newdb(path, sizeof path);
    for (i = 0; i < 3; i++) REQUIRE(open_be(loop, path, NULL, &be[i]) == SIMBA_OK);
    CHECK_RC(q_acquire(be[0], "d", "A", &rep, owner), SIMBA_OK);
    /* B queues with a 300 ms liveness and never comes back */
    while ((rc = simba__sql_exec_req(impl_of(be[1]), SIMBA_OP_ACQUIRE, "d", "B", 5000, 1000, 0, 0, 300, &rep)) ==
           SIMBA__SQL_BUSY) poll(NULL, 0, 1);
    CHECK_STR(rep.owner, "A");
    CHECK_RC(exec_op(be[0], SIMBA_OP_RELEASE, "d", "A", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_RC(q_acquire(be[2], "d", "C", &rep, owner), SIMBA_OK);
    CHECK_STR(owner, ""); /* B still heads */
    poll(NULL, 0, 400);
    CHECK_RC(q_acquire(be[2], "d", "C", &rep, owner), SIMBA_OK);
    CHECK_STR(owner, "C");
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* Child processes for the multi-process cases: each opens its own loop and backend. */
static void child_contend(const char *path, const char *mutex, const char *id, int64_t ttl, int64_t tr, int out_fd) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_service *svc = NULL;
    counts c = {0, 0, 0};
    int told = 0;
    pid_t parent = getppid();
    if (!loop || open_be(loop, path, NULL, &be) != SIMBA_OK || contend(loop, be, mutex, id, ttl, tr, &c, &svc) != SIMBA_OK ||
        simba_start(svc) != SIMBA_OK)
        _exit(2);
    for (;;) {
        simba_wait(loop, 50);
        if (getppid() != parent) _exit(0); /* the test is gone: never outlive it */
        if (!told && simba_is_owner(svc)) {
            if (write(out_fd, "O", 1) != 1) _exit(3);
            told = 1;
        }
    }
}

static int64_t raw_waiters(sqlite3 *raw, const char *mutex) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM simba_mutex_wait WHERE mutex = '%s'", mutex);
    return raw_int(raw, sql);
}

static int one_waiter_cond(void *raw) { return raw_waiters((sqlite3 *)raw, "f") == 1; }

static int wait_waiters(sqlite3 *raw, const char *mutex, int64_t want, int ms) {
    int64_t until = mono_ms() + ms;
    while (raw_waiters(raw, mutex) != want) {
        if (mono_ms() > until) return 0;
        poll(NULL, 0, 5);
    }
    return 1;
}

/* A head waiter's process SIGKILLed (its socket gone: dropped at the release, the next one
   woken at once) or SIGSTOPped (alive to the kernel: it keeps its place until its liveness
   passes, and no longer). Timing ttl 1000, transition 500: liveness 1000 + 500 + 1000 +
   1000 = 3.5 s after its last attempt, which is at most 2.5 s before the stop. */
static void head_waiter_case(int sig) {
    char path[300], owner[SIMBA_ID_MAX + 1];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_reply rep;
    sqlite3 *raw;
    int p[2], i;
    pid_t kid[2];
    int64_t t0, took = -1;
    REQUIRE(loop != NULL && pipe(p) == 0);
    newdb(path, sizeof path);
    REQUIRE(open_be(loop, path, NULL, &be) == SIMBA_OK);
    raw = raw_open(path);
    REQUIRE(raw != NULL);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "h", "A", 60000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
    kid[0] = kid[1] = -1;
    for (i = 0; i < 2; i++) {
        kid[i] = fork();
        CHECK(kid[i] >= 0);
        if (kid[i] == 0) child_contend(path, "h", i ? "W2" : "W1", 1000, 500, p[1]);
        CHECK(wait_waiters(raw, "h", i + 1, 5000));
    }
    if (kid[0] > 0) kill(kid[0], sig);
    if (kid[0] > 0 && sig == SIGKILL) waitpid(kid[0], NULL, 0);
    t0 = mono_ms();
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "h", "A", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    while (mono_ms() - t0 < 10000) {
        CHECK_RC(simba__sql_read(be, "h", &rep, owner, sizeof owner), SIMBA_OK);
        if (strcmp(owner, "W2") == 0) {
            took = mono_ms() - t0;
            break;
        }
        CHECK(strcmp(owner, "W1") != 0 && strcmp(owner, "A") != 0);
        poll(NULL, 0, 2);
    }
    fprintf(stderr, "  head waiter %s: the next waiter owns %lld ms after the release\n",
            sig == SIGKILL ? "SIGKILLed" : "SIGSTOPped", (long long)took);
    CHECK(took >= 0);
    if (sig == SIGKILL) CHECK(took < 1000); /* no lease to wait for, no liveness either */
    else CHECK(took <= 3500 + 1500);       /* within its liveness, with slack for a loaded host */
    for (i = 0; i < 2; i++) {
        if (kid[i] <= 0) continue;
        kill(kid[i], SIGKILL);
        waitpid(kid[i], NULL, 0);
    }
    close(p[0]);
    close(p[1]);
    sqlite3_close(raw);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

TEST(head_waiter_sigkilled_does_not_block_the_queue) { head_waiter_case(SIGKILL); }
TEST(head_waiter_sigstopped_blocks_at_most_its_liveness) { head_waiter_case(SIGSTOP); }

/* Locker handoff between processes with the DEFAULT timing (ttl 10 s, transition 6 s):
   the release is pushed to the waiting process, which owns within milliseconds. */
TEST(locker_handoff_default_timing_between_processes) {
    char path[300];
    int up[2], go[2];
    pid_t kid;
    char b;
    simba_loop *loop;
    simba_backend *be = NULL;
    simba_locker *lk = NULL;
    simba_locker_desc d;
    simba_result rc = SIMBA_EAGAIN;
    int64_t t0, took = -1;
    REQUIRE(pipe(up) == 0 && pipe(go) == 0);
    newdb(path, sizeof path);
    kid = fork();
    REQUIRE(kid >= 0);
    if (kid == 0) {
        pid_t parent = getppid();
        simba_loop *cl = newloop();
        simba_backend *cb = NULL;
        simba_locker *clk = NULL;
        struct pollfd pf;
        if (!cl || open_be(cl, path, NULL, &cb) != SIMBA_OK || simba_lock(cl, cb, "handoff", 5000, &clk) != SIMBA_OK) _exit(2);
        if (write(up[1], "L", 1) != 1) _exit(3);
        pf.fd = go[0];
        pf.events = POLLIN;
        for (;;) { /* keep renewing until told to let go (or the test is gone) */
            simba_wait(cl, 20);
            if (poll(&pf, 1, 0) == 1) break;
            if (getppid() != parent) _exit(0);
        }
        if (read(go[0], &b, 1) != 1) _exit(4);
        simba_locker_unlock(clk);
        for (t0 = mono_ms(); mono_ms() - t0 < 2000;) simba_wait(cl, 50); /* the release goes out */
        _exit(0);
    }
    CHECK(read(up[0], &b, 1) == 1);
    loop = newloop();
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, path, NULL, &be) == SIMBA_OK);
    memset(&d, 0, sizeof d);
    d.mutex = "handoff";
    REQUIRE(simba_locker_new(loop, be, &d, &lk) == SIMBA_OK);
    /* queued behind the child: one answer naming it */
    for (t0 = mono_ms(); mono_ms() - t0 < 3000;) {
        CHECK_RC(simba_locker_try(lk), SIMBA_EAGAIN);
        simba_wait(loop, 10);
        simba_owner view;
        memset(&view, 0, sizeof view);
        simba_owner_get(simba_locker_service(lk), &view);
        if (view.id[0]) break;
    }
    CHECK(write(go[1], "G", 1) == 1);
    t0 = mono_ms();
    while (mono_ms() - t0 < 8000) {
        rc = simba_locker_try(lk);
        if (rc != SIMBA_EAGAIN) break;
        simba_wait(loop, 100);
    }
    took = mono_ms() - t0;
    fprintf(stderr, "  default timing: the waiting process holds the lock %lld ms after the holder was told to unlock\n",
            (long long)took);
    CHECK_RC(rc, SIMBA_OK);
    CHECK(took < 1000); /* not the old lease's 16 s */
    waitpid(kid, NULL, 0);
    CHECK_RC(simba_locker_free(lk), SIMBA_OK);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
    close(up[0]), close(up[1]), close(go[0]), close(go[1]);
}

/* A forged or malformed datagram only wakes (at most one attempt each, never a grant), and
   garbage rows in the queue never become owner nor block the line. */
TEST(forged_datagram_and_garbage_row_grant_nothing) {
    char path[300], owner[SIMBA_ID_MAX + 1], addr[SIMBA__SQL_WAKE_MAX];
    simba_loop *loop = newloop();
    simba_backend *be = NULL, *wbe = NULL;
    simba_service *w = NULL;
    counts c = {0, 0, 0};
    simba_reply rep;
    simba_stats st;
    sqlite3 *raw;
    uint64_t before;
    int fd, k;
    REQUIRE(loop != NULL);
    newdb(path, sizeof path);
    REQUIRE(open_be(loop, path, NULL, &be) == SIMBA_OK);
    REQUIRE(open_be(loop, path, NULL, &wbe) == SIMBA_OK);
    raw = raw_open(path);
    REQUIRE(raw != NULL);
    CHECK_RC(exec_op(be, SIMBA_OP_ACQUIRE, "f", "A", 60000, 1000, &rep, owner, sizeof owner), SIMBA_OK);
    REQUIRE(contend(loop, wbe, "f", "W", 20000, 5000, &c, &w) == SIMBA_OK);
    CHECK_RC(simba_start(w), SIMBA_OK);
    CHECK(drive(&loop, 1, 3000, one_waiter_cond, raw));
    drive(&loop, 1, 100, NULL, NULL);
    snprintf(addr, sizeof addr, "%s", impl_of(wbe)->wake_addr);
    fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    REQUIRE(fd >= 0);
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    simba_service_stats(w, &st);
    before = st.attempts;
    {
        static const char *forged[] = {"simba-sql-wake f W", "simba-sql-wake f A", "simba-sql-wake f W extra junk",
                                       "simba-sql-wake", "\xff\xfe garbage", "simba-sql-wake f' W"};
        struct sockaddr_un a;
        size_t n = strlen(addr + 2) / 2, i;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        for (i = 0; i < n; i++) {
            unsigned v;
            sscanf(addr + 2 + 2 * i, "%2x", &v);
            a.sun_path[1 + i] = (char)v;
        }
        for (k = 0; k < (int)(sizeof forged / sizeof forged[0]); k++)
            CHECK(sendto(fd, forged[k], strlen(forged[k]), 0, (struct sockaddr *)&a,
                         (socklen_t)(sizeof(sa_family_t) + 1 + n)) >= 0);
    }
    drive(&loop, 1, 300, NULL, NULL);
    simba_service_stats(w, &st);
    fprintf(stderr, "  6 forged datagrams (1 well-formed for W): W made %llu attempts\n",
            (unsigned long long)(st.attempts - before));
    CHECK(st.attempts - before <= 1);
    CHECK(!simba_is_owner(w));
    CHECK_RC(simba__sql_read(be, "f", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "A");
    /* garbage ahead of W: malformed ids, a text expiry, a blob; and a well-formed row of a
       process that does not exist (no socket at its address) */
    CHECK_EQ(sqlite3_exec(raw,
                          "INSERT INTO simba_mutex_wait (mutex, contender, seq, expires_at, wake) VALUES ('f', 'bad id!', -5, 99999999999999, 'u:00');"
                          "INSERT INTO simba_mutex_wait (mutex, contender, seq, expires_at, wake) VALUES ('f', '', -4, 99999999999999, '');"
                          "INSERT INTO simba_mutex_wait (mutex, contender, seq, expires_at, wake) VALUES ('f', 'T', -3, 'soon', 'u:41');"
                          "INSERT INTO simba_mutex_wait (mutex, contender, seq, expires_at, wake) VALUES ('f', x'00ff', -2, 99999999999999, 'zz');"
                          "INSERT INTO simba_mutex_wait (mutex, contender, seq, expires_at, wake) VALUES ('f', 'ghost', -1, 99999999999999, 'u:6e6f626f6479');"
                          "UPDATE simba_mutex SET waiters = 6 WHERE mutex = 'f'",
                          NULL, NULL, NULL),
             SQLITE_OK);
    CHECK_RC(exec_op(be, SIMBA_OP_RELEASE, "f", "A", 0, 0, &rep, owner, sizeof owner), SIMBA_OK);
    CHECK(drive(&loop, 1, 3000, is_owner_cond, w));
    CHECK_RC(simba__sql_read(be, "f", &rep, owner, sizeof owner), SIMBA_OK);
    CHECK_STR(owner, "W");
    CHECK_EQ(raw_waiters(raw, "f"), 0);
    CHECK_EQ(raw_int(raw, "SELECT waiters FROM simba_mutex WHERE mutex = 'f'"), 0);
    close(fd);
    sqlite3_close(raw);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- leadership value, proclaim, yield ------------------------------------------------ */

/* One request of the core's shape (renew, fence, value) straight through the executor. */
static simba_result value_op(simba_backend *be, simba_op op, const char *mutex, const char *who, int renew, uint64_t fence,
                             const void *value, size_t len, simba_reply *rep) {
    simba_req r;
    int64_t until = mono_ms() + 2000;
    memset(&r, 0, sizeof r);
    r.op = op;
    r.mutex = mutex;
    r.contender = who;
    r.ttl_ms = 5000;
    r.transition_ms = 1000;
    r.renew = renew;
    r.expect_win = op == SIMBA_OP_ACQUIRE && renew;
    r.live_ms = 10000;
    r.fence = fence;
    r.value = (const unsigned char *)value;
    r.value_len = len;
    r.sent_at = simba_now(impl_of(be)->loop);
    while (simba__sql_exec_one(impl_of(be), &r, rep) == SIMBA__SQL_BUSY) {
        if (mono_ms() > until) return SIMBA_EBUSY;
        poll(NULL, 0, 1);
    }
    return rep->rc;
}

static int value_is(const simba_reply *rep, const void *want, size_t len) {
    return rep->value_len == len && (len == 0 || (rep->value && memcmp(rep->value, want, len) == 0));
}

TEST(value_bytes_round_trip_through_the_file) {
    static const unsigned char v1[] = {0, 0xff, 'a', 0, 0xc3, 0x28, 0}; /* NUL, and bytes that are not UTF-8 */
    static const unsigned char v2[] = {'n', 'e', 'w', 0, 0x80};
    static unsigned char big[SIMBA_VALUE_MAX];
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_reply rep, out;
    sqlite3 *raw;
    char path[300], owner[SIMBA_ID_MAX + 1];
    uint64_t fence;
    size_t i;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    REQUIRE((raw = raw_open(path)) != NULL);
    for (i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 7 + 1);
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "m", "A", 0, 0, v1, sizeof v1, &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "A");
    CHECK(value_is(&rep, v1, sizeof v1));
    fence = rep.fence;
    CHECK_EQ(raw_int(raw, "SELECT length(value) FROM simba_mutex WHERE mutex = 'm' AND typeof(value) = 'blob'"), (int64_t)sizeof v1);
    /* a renewal keeps the stored value, whatever it asks with */
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "m", "A", 1, 0, v2, sizeof v2, &rep), SIMBA_OK);
    CHECK_EQ(rep.fence, fence);
    CHECK(value_is(&rep, v1, sizeof v1));
    CHECK_RC(simba__sql_read(be, "m", &out, owner, sizeof owner), SIMBA_OK);
    CHECK(value_is(&out, v1, sizeof v1));
    /* proclaim: same fence, new value; a fence that moved on or another contender is refused */
    CHECK_RC(value_op(be, SIMBA_OP_SET_VALUE, "m", "A", 0, fence, v2, sizeof v2, &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "A");
    CHECK_EQ(rep.fence, fence);
    CHECK(value_is(&rep, v2, sizeof v2));
    CHECK_RC(value_op(be, SIMBA_OP_SET_VALUE, "m", "A", 0, fence + 1, v1, sizeof v1, &rep), SIMBA_EFENCE);
    CHECK(rep.errmsg && strstr(rep.errmsg, "no longer holds mutex m") && strstr(rep.errmsg, "A holds it"));
    CHECK_RC(value_op(be, SIMBA_OP_SET_VALUE, "m", "B", 0, fence, v1, sizeof v1, &rep), SIMBA_EFENCE);
    CHECK_RC(simba__sql_read(be, "m", &out, owner, sizeof owner), SIMBA_OK);
    CHECK(value_is(&out, v2, sizeof v2));
    CHECK_EQ(out.fence, fence);
    /* a release clears it; the next owner's value, of the largest size, comes with its grant */
    CHECK_RC(value_op(be, SIMBA_OP_RELEASE, "m", "A", 0, 0, NULL, 0, &rep), SIMBA_OK);
    CHECK_EQ(raw_int(raw, "SELECT length(value) FROM simba_mutex WHERE mutex = 'm'"), 0);
    CHECK_RC(value_op(be, SIMBA_OP_SET_VALUE, "m", "A", 0, fence, v1, sizeof v1, &rep), SIMBA_EFENCE);
    CHECK(rep.errmsg && strstr(rep.errmsg, "nobody holds it"));
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "m", "B", 0, 0, big, sizeof big, &rep), SIMBA_OK);
    CHECK(value_is(&rep, big, sizeof big));
    CHECK(rep.fence > fence);
    /* a new tenure of the same contender without renew stores what it asks with now */
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "m", "B", 0, 0, NULL, 0, &rep), SIMBA_OK);
    CHECK(value_is(&rep, NULL, 0));
    sqlite3_close(raw);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

TEST(yield_passes_to_the_head_and_queues_the_yielder_behind) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_reply rep;
    sqlite3 *raw;
    char path[300];
    uint64_t fence;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    REQUIRE((raw = raw_open(path)) != NULL);
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "y", "A", 0, 0, "a", 1, &rep), SIMBA_OK);
    fence = rep.fence;
    /* nobody waits: it keeps it, nothing changes */
    CHECK_RC(value_op(be, SIMBA_OP_YIELD, "y", "A", 0, fence, NULL, 0, &rep), SIMBA_OK);
    CHECK_EQ(rep.yielded, 0);
    CHECK_STR(rep.owner, "A");
    CHECK_EQ(rep.fence, fence);
    CHECK(value_is(&rep, "a", 1));
    CHECK(rep.ttl_left_ms > 0 && rep.ttl_left_ms <= 5000);
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "y", "B", 0, 0, "b", 1, &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "A");
    CHECK(value_is(&rep, "a", 1)); /* a waiter learns the owner's value with the owner */
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "y", "C", 0, 0, "c", 1, &rep), SIMBA_OK);
    CHECK_EQ(raw_int(raw, "SELECT waiters FROM simba_mutex WHERE mutex = 'y'"), 2);
    CHECK_RC(value_op(be, SIMBA_OP_YIELD, "y", "A", 0, fence + 1, NULL, 0, &rep), SIMBA_EFENCE);
    CHECK(rep.errmsg && strstr(rep.errmsg, "yield") && strstr(rep.errmsg, "no longer holds"));
    CHECK_RC(value_op(be, SIMBA_OP_YIELD, "y", "B", 0, fence, NULL, 0, &rep), SIMBA_EFENCE);
    /* passed: the row is free (value cleared), the line is B, C, then A */
    CHECK_RC(value_op(be, SIMBA_OP_YIELD, "y", "A", 0, fence, NULL, 0, &rep), SIMBA_OK);
    CHECK_EQ(rep.yielded, 1);
    CHECK(!rep.owner || !rep.owner[0]);
    CHECK_EQ(raw_int(raw, "SELECT (owner_id = '') + 2 * (length(value) = 0) FROM simba_mutex WHERE mutex = 'y'"), 3);
    CHECK_EQ(raw_int(raw, "SELECT waiters FROM simba_mutex WHERE mutex = 'y'"), 3);
    {
        sqlite3_stmt *st = NULL;
        REQUIRE(sqlite3_prepare_v2(raw, "SELECT group_concat(contender, ',') FROM (SELECT contender FROM simba_mutex_wait"
                                        " WHERE mutex = 'y' ORDER BY seq)", -1, &st, NULL) == SQLITE_OK);
        REQUIRE(sqlite3_step(st) == SQLITE_ROW);
        CHECK_STR((const char *)sqlite3_column_text(st, 0), "B,C,A");
        sqlite3_finalize(st);
    }
    /* the yielder asking again does not jump the line; the head wins with its own value */
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "y", "A", 0, 0, "a", 1, &rep), SIMBA_OK);
    CHECK(!rep.owner || !rep.owner[0]);
    CHECK_RC(value_op(be, SIMBA_OP_ACQUIRE, "y", "B", 0, 0, "b", 1, &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "B");
    CHECK(rep.fence > fence);
    CHECK(value_is(&rep, "b", 1));
    sqlite3_close(raw);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* The layout version lives in PRAGMA user_version: a new file gets this simba's, and a file
   marked with another is refused at open, by a writer and a reader alike, in words that
   name both versions; nothing in it is touched. */
TEST(file_of_another_schema_version_is_refused_at_open) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_sql_desc d;
    sqlite3 *raw;
    char path[300], fresh[300], err[512];
    int ro;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(fresh, sizeof fresh), NULL, &be) == SIMBA_OK);
    REQUIRE((raw = raw_open(fresh)) != NULL);
    CHECK_EQ(raw_int(raw, "PRAGMA user_version"), SIMBA__SQL_SCHEMA_VERSION);
    sqlite3_close(raw);
    CHECK_RC(simba_backend_free(be), SIMBA_OK);
    REQUIRE((raw = raw_open(newdb(path, sizeof path))) != NULL);
    REQUIRE(sqlite3_exec(raw, "PRAGMA user_version = 7", NULL, NULL, NULL) == SQLITE_OK);
    for (ro = 0; ro < 2; ro++) {
        memset(&d, 0, sizeof d);
        d.path = path;
        d.read_only = ro;
        d.errbuf = err;
        d.errbuf_cap = sizeof err;
        be = NULL;
        CHECK_RC(simba_sql_open(loop, &d, &be), SIMBA_EBACKEND);
        CHECK(be == NULL);
        CHECK(strstr(err, "found simba schema version 7") != NULL);
        CHECK(strstr(err, "this simba uses 1") != NULL);
        CHECK(strstr(simba_loop_errmsg(loop), "found simba schema version 7") != NULL);
        if (ro == 0) fprintf(stderr, "  %s\n", err);
    }
    CHECK_EQ(raw_int(raw, "PRAGMA user_version"), 7);
    CHECK_EQ(raw_int(raw, "SELECT count(*) FROM sqlite_master"), 0); /* no table made */
    sqlite3_close(raw);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* ---- semaphores and read-write locks: the holders table ---------------------------------- */

/* One request of a semaphore of permits or a reader (shared), executed at once. */
static simba_result sem_op(simba_backend *be, simba_op op, const char *mutex, const char *who, int permits, int shared,
                           int renew, const char *value, simba_reply *rep) {
    simba_req r;
    int64_t until = mono_ms() + 2000;
    memset(&r, 0, sizeof r);
    r.op = op;
    r.mutex = mutex;
    r.contender = who;
    r.ttl_ms = 5000;
    r.transition_ms = 1000;
    r.renew = renew;
    r.live_ms = 10000;
    r.permits = permits;
    r.shared = shared;
    r.value = (const unsigned char *)value;
    r.value_len = value ? strlen(value) : 0;
    r.sent_at = simba_now(impl_of(be)->loop);
    while (simba__sql_exec_one(impl_of(be), &r, rep) == SIMBA__SQL_BUSY) {
        if (mono_ms() > until) return SIMBA_EBUSY;
        poll(NULL, 0, 1);
    }
    return rep->rc;
}

/* Two permits with their values, fences and leases through the file: a third waits and is
   told the holder that frees first, inspection lists both, a forced release by fence frees
   exactly one holder and the waiter takes its permit with a greater fence. */
TEST(holders_round_trip_through_the_file) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_reply rep;
    simba_view v;
    sqlite3 *raw;
    char path[300];
    uint64_t fa, fb;
    int i, seen = 0;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    REQUIRE((raw = raw_open(path)) != NULL);
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "A", 2, 0, 0, "a", &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "A");
    CHECK(value_is(&rep, "a", 1));
    fa = rep.fence;
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "B", 2, 0, 0, "bb", &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "B");
    CHECK_EQ(rep.holders, 2);
    fb = rep.fence;
    CHECK(fb > fa);
    poll(NULL, 0, 5); /* A's renewed lease ends after B's */
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "A", 2, 0, 1, "a", &rep), SIMBA_OK); /* renewal keeps the fence */
    CHECK_STR(rep.owner, "A");
    CHECK_EQ(rep.fence, fa);
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "C", 2, 0, 0, "c", &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "B"); /* A renewed: B's permit frees first */
    CHECK_EQ(rep.holders, 2);
    CHECK_EQ(raw_int(raw, "SELECT count(*) FROM simba_mutex_hold WHERE mutex = 's'"), 2);
    CHECK_EQ(raw_int(raw, "SELECT holders FROM simba_mutex WHERE mutex = 's'"), 2);
    CHECK_EQ(raw_int(raw, "SELECT permits FROM simba_mutex WHERE mutex = 's'"), 2);
    CHECK_EQ(raw_int(raw, "SELECT count(*) FROM simba_mutex_wait WHERE mutex = 's'"), 1);
    CHECK_RC(simba_inspect_wait(be, "s", &v, 5000), SIMBA_OK);
    CHECK_EQ(v.holders, 2);
    CHECK_EQ(v.permits, 2);
    CHECK_EQ(v.waiters, 1);
    CHECK_STR(v.owner, "B");
    for (i = 0; i < v.holders && v.holder; i++) {
        const simba_view_holder *h = &v.holder[i];
        if (strcmp(h->id, "A") == 0 && h->fence == fa && h->value_len == 1 && memcmp(h->value, "a", 1) == 0) seen |= 1;
        if (strcmp(h->id, "B") == 0 && h->fence == fb && h->value_len == 2 && memcmp(h->value, "bb", 2) == 0) seen |= 2;
        CHECK(h->ttl_left_ms > 0 && h->transition_left_ms > h->ttl_left_ms && !h->shared);
    }
    CHECK_EQ(seen, 3);
    CHECK_RC(simba_force_release_wait(be, "s", fb, 5000), SIMBA_OK);
    CHECK_RC(simba_force_release_wait(be, "s", fb, 5000), SIMBA_EFENCE);
    CHECK_EQ(raw_int(raw, "SELECT count(*) FROM simba_mutex_hold WHERE mutex = 's' AND contender = 'A'"), 1);
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "C", 2, 0, 0, "c", &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "C");
    CHECK(rep.fence > fb);
    CHECK_RC(sem_op(be, SIMBA_OP_RELEASE, "s", "A", 2, 0, 0, NULL, &rep), SIMBA_OK);
    CHECK_EQ(raw_int(raw, "SELECT holders FROM simba_mutex WHERE mutex = 's'"), 1);
    CHECK_EQ(raw_int(raw, "SELECT count(*) FROM simba_mutex_wait WHERE mutex = 's'"), 0);
    sqlite3_close(raw);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

/* A holding's YIELD through the executor (the fence it must still hold). */
static simba_result sem_yield(simba_backend *be, const char *mutex, const char *who, int permits, int shared, uint64_t fence,
                              simba_reply *rep) {
    simba_req r;
    int64_t until = mono_ms() + 2000;
    memset(&r, 0, sizeof r);
    r.op = SIMBA_OP_YIELD;
    r.mutex = mutex;
    r.contender = who;
    r.ttl_ms = 5000;
    r.transition_ms = 1000;
    r.live_ms = 10000;
    r.permits = permits;
    r.shared = shared;
    r.fence = fence;
    r.sent_at = simba_now(impl_of(be)->loop);
    while (simba__sql_exec_one(impl_of(be), &r, rep) == SIMBA__SQL_BUSY) {
        if (mono_ms() > until) return SIMBA_EBUSY;
        poll(NULL, 0, 1);
    }
    return rep->rc;
}
static void wait_line_is(sqlite3 *raw, const char *mutex, const char *want) {
    sqlite3_stmt *st = NULL;
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT group_concat(contender || shared, ',') FROM (SELECT contender, shared FROM"
             " simba_mutex_wait WHERE mutex = '%s' ORDER BY seq)", mutex);
    REQUIRE(sqlite3_prepare_v2(raw, sql, -1, &st, NULL) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK_STR((const char *)sqlite3_column_text(st, 0), want);
    sqlite3_finalize(st);
}

/* A reader's yield passes only when it frees someone: with another reader holding, the
   waiting writer stays blocked and the yield is kept; alone, the writer is freed and the
   reader waits behind it (marked a reader). A permit's yield passes to the next waiter. */
TEST(holding_yield_passes_to_whom_it_frees) {
    simba_loop *loop = newloop();
    simba_backend *be = NULL;
    simba_reply rep;
    sqlite3 *raw;
    char path[300];
    uint64_t f1, f2, fb;
    REQUIRE(loop != NULL);
    REQUIRE(open_be(loop, newdb(path, sizeof path), NULL, &be) == SIMBA_OK);
    REQUIRE((raw = raw_open(path)) != NULL);
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "rw", "R1", 0, 1, 0, NULL, &rep), SIMBA_OK);
    f1 = rep.fence;
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "rw", "R2", 0, 1, 0, NULL, &rep), SIMBA_OK);
    f2 = rep.fence;
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "rw", "W", 0, 0, 0, NULL, &rep), SIMBA_OK);
    CHECK(!rep.owner || strcmp(rep.owner, "W") != 0);
    CHECK_RC(sem_yield(be, "rw", "R1", 0, 1, f1, &rep), SIMBA_OK);
    CHECK_EQ(rep.yielded, 0);
    CHECK_STR(rep.owner, "R1");
    CHECK_EQ(rep.fence, f1);
    CHECK_RC(sem_yield(be, "rw", "R1", 0, 1, f2, &rep), SIMBA_EFENCE);
    CHECK(rep.errmsg && strstr(rep.errmsg, "no longer holds"));
    CHECK_RC(sem_op(be, SIMBA_OP_RELEASE, "rw", "R2", 0, 1, 0, NULL, &rep), SIMBA_OK);
    CHECK_RC(sem_yield(be, "rw", "R1", 0, 1, f1, &rep), SIMBA_OK);
    CHECK_EQ(rep.yielded, 1);
    CHECK_EQ(raw_int(raw, "SELECT holders + 10 * waiters FROM simba_mutex WHERE mutex = 'rw'"), 20);
    wait_line_is(raw, "rw", "W0,R11");
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "rw", "R1", 0, 1, 0, NULL, &rep), SIMBA_OK);
    CHECK(!rep.owner || strcmp(rep.owner, "R1") != 0); /* no jumping the line */
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "rw", "W", 0, 0, 0, NULL, &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "W");
    CHECK(rep.fence > f2);
    /* two permits: A's yield passes to C, and A waits behind it */
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "A", 2, 0, 0, NULL, &rep), SIMBA_OK);
    f1 = rep.fence;
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "B", 2, 0, 0, NULL, &rep), SIMBA_OK);
    fb = rep.fence;
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "C", 2, 0, 0, NULL, &rep), SIMBA_OK);
    CHECK_EQ(rep.holders, 2);
    CHECK_RC(sem_yield(be, "s", "A", 2, 0, f1, &rep), SIMBA_OK);
    CHECK_EQ(rep.yielded, 1);
    CHECK_STR(rep.owner, "B"); /* the holder whose permit frees first */
    wait_line_is(raw, "s", "C0,A0");
    CHECK_RC(sem_op(be, SIMBA_OP_ACQUIRE, "s", "C", 2, 0, 0, NULL, &rep), SIMBA_OK);
    CHECK_STR(rep.owner, "C");
    CHECK(rep.fence > fb);
    sqlite3_close(raw);
    CHECK_RC(simba_loop_free(loop), SIMBA_OK);
}

static void rm_tmpdir(void) {
    char cmd[600];
    if (!tmpdir[0] || getenv("SIMBA_KEEP_TMP")) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

int main(int argc, char **argv) {
    int rc;
    CHECK_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "%s/simba_sql_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(now_is_stable_within_a_step);
    RUN(bound_now_is_sqlite_now);
    RUN(checkpoint_bad_input);
    RUN(checkpoint_off_the_loop_keeps_the_wal_short);
    RUN(checkpoint_thread_takes_the_wal_header_sync);
    RUN(loop_write_right_after_a_checkpoint_does_not_sync);
    RUN(idle_checkpoint_starts_the_wal_over_itself);
    RUN(polls_never_sync_with_checkpoints_off_the_loop);
    RUN(checkpoint_keeps_this_process_locks);
    RUN(open_errors);
    RUN(tables_are_separate);
    RUN(bad_names_rejected_table_unaffected);
    RUN(acquire_renew_release_fence);
    RUN(check_fence_in_the_callers_write_transaction);
    RUN(rows_deleted_under_live_owner);
    RUN(service_lifecycle);
    RUN(two_connections_one_process);
    RUN(busy_database_does_not_block_poll);
    RUN(busy_gives_up_after_limit);
    RUN(open_while_locked);
    RUN(row_creation_race);
    RUN(read_needs_sql_backend);
    RUN(open_refuses_readonly);
    RUN(open_denied_says_which_path_and_access);
    RUN(read_only_inspects_and_refuses_writes);
    RUN(open_refuses_corrupt_table);
    RUN(open_desc_ranges_have_words);
    RUN(reacquire_after_local_step_down_gets_new_fence);
    RUN(memory_two_backends_one_owner);
    RUN(memory_private_databases_refused);
    RUN(memory_shared_across_threads);
    RUN(test_clock_expiry_exact);
    RUN(lost_file_fences_stay_above);
    RUN(test_clock_refused_where_unsafe);
    RUN(batched_requests_observe_what_single_requests_do);
    RUN(renewals_due_apart_share_one_write_transaction);
    RUN(late_poll_keeps_held_renewals_together);
    RUN(woken_waiter_ask_is_not_held);
    RUN(sql_statements_count_against_the_poll_budget);
    RUN(sql_batches_leave_room_for_their_commit);
    RUN(waiter_not_at_the_head_does_not_write);
    RUN(waiter_refreshes_its_place_with_one_write);
    RUN(stop_behind_a_held_renewal);
    RUN(simulated_crash_keeps_lease_until_it_ends);
    RUN(queue_arrival_order_and_releaser_to_the_back);
    RUN(queue_dead_waiter_dropped_after_its_liveness);
    RUN(head_waiter_sigkilled_does_not_block_the_queue);
    RUN(head_waiter_sigstopped_blocks_at_most_its_liveness);
    RUN(locker_handoff_default_timing_between_processes);
    RUN(forged_datagram_and_garbage_row_grant_nothing);
    RUN(value_bytes_round_trip_through_the_file);
    RUN(yield_passes_to_the_head_and_queues_the_yielder_behind);
    RUN(holding_yield_passes_to_whom_it_frees);
    RUN(file_of_another_schema_version_is_refused_at_open);
    RUN(holders_round_trip_through_the_file);
    rc = check_report("test_sql");
    rm_tmpdir();
    return rc;
}
