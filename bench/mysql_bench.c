/* mysql_bench.c -- the MySQL / MariaDB rows of the bench, each next to the same server's own
 * reference measured in the same run.
 *
 *   mysql_bench [--port P] [--secs 6] [--part w1|handoff|all]
 *
 * w1: one contender acquires and releases one mutex in a loop (simba_start, wait for
 *     ownership; simba_stop, wait for INITIAL: two round trips), against the raw limit: one
 *     blocking client running autocommit conditional UPDATEs (owner, lease from the server's
 *     clock, WHERE the lease is over or ours) on a table of its own. Target: cycles/s >=
 *     0.5 x UPDATEs/s.
 * handoff: 2 processes on one name, each holding it 5 ms in turn through the blocking Locker
 *     (simba_locker_lock, hold, simba_locker_unlock_wait); the gap from one's unlock to the
 *     other's lock, p50 and p99; then the same processes and timing on GET_LOCK /
 *     RELEASE_LOCK (blocking client, the waiter blocked inside the server). Target: p50
 *     within 3x GET_LOCK's.
 * The server: 127.0.0.1:P, user root, password simba, database simba (scripts/mysql-start.sh).
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_mysql.h"

#include <mysql.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port = 3390;
static double secs = 6;
static char table[64];

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static MYSQL *conn(void) {
    MYSQL *c = mysql_init(NULL);
    if (!c || !mysql_real_connect(c, "127.0.0.1", "root", "simba", "simba", (unsigned)port, NULL, 0)) {
        fprintf(stderr, "mysql_bench: connect to port %d: %s\n", port, c ? mysql_error(c) : "no memory");
        exit(2);
    }
    return c;
}

static void q(MYSQL *c, const char *sql) {
    if (mysql_query(c, sql)) { fprintf(stderr, "mysql_bench: %s: %s\n", sql, mysql_error(c)); exit(2); }
    mysql_free_result(mysql_store_result(c));
}

static simba_backend *open_be(simba_loop *loop) {
    simba_mysql_desc d;
    simba_backend *be;
    memset(&d, 0, sizeof d);
    d.host = "127.0.0.1";
    d.port = port;
    d.user = "root";
    d.password = "simba";
    d.db = "simba";
    d.table = table;
    if (simba_mysql_open(loop, &d, &be) != SIMBA_OK) { fprintf(stderr, "mysql_bench: open\n"); exit(2); }
    return be;
}

static void w1(void) {
    MYSQL *c = conn();
    simba_loop *loop;
    simba_backend *be;
    simba_service *svc;
    simba_contend_desc d;
    int64_t end, n = 0, raw = 0;
    char sql[400];
    simba_loop_new(NULL, &loop);
    be = open_be(loop);
    memset(&d, 0, sizeof d);
    d.mutex = "w1";
    d.ttl_ms = 10000;
    d.transition_ms = 6000;
    simba_contend(loop, be, &d, &svc);
    /* warm up: the setup, the first grant */
    simba_start(svc);
    while (!simba_is_owner(svc)) simba_wait(loop, 50);
    simba_stop(svc);
    while (simba_service_status(svc) != SIMBA_INITIAL) simba_wait(loop, 50);
    end = now_us() + (int64_t)(secs / 2 * 1e6);
    while (now_us() < end) {
        simba_start(svc);
        while (!simba_is_owner(svc)) simba_wait(loop, 50);
        simba_stop(svc);
        while (simba_service_status(svc) != SIMBA_INITIAL) simba_wait(loop, 50);
        n++;
    }
    snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS `%s_raw` (name VARCHAR(64) PRIMARY KEY, owner VARCHAR(64),"
             " ttl_ms BIGINT, transition_ms BIGINT) ENGINE=InnoDB", table);
    q(c, sql);
    snprintf(sql, sizeof sql, "INSERT IGNORE INTO `%s_raw` VALUES ('raw', '', 0, 0)", table);
    q(c, sql);
    snprintf(sql, sizeof sql, "UPDATE `%s_raw` SET owner = 'me', ttl_ms = FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) + 10000,"
             " transition_ms = FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) + 16000 WHERE name = 'raw' AND (owner = 'me'"
             " OR transition_ms < FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000))", table);
    end = now_us() + (int64_t)(secs / 2 * 1e6);
    while (now_us() < end) { q(c, sql); raw++; }
    printf("| W1 uncontended cycle | %.0f cycles/s | raw conditional UPDATE %.0f/s | ratio %.2f (target >= 0.5) |\n",
           n / (secs / 2), raw / (secs / 2), (double)n / (double)raw);
    simba_loop_free(loop);
    mysql_close(c);
}

/* shared between the two processes: the last unlock's time, the gaps seen */
typedef struct shm_t {
    volatile int64_t unlocked_at;
    volatile int n;
    int64_t gap[20000];
} shm_t;

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void hold_5ms(void) {
    struct timespec sl = {0, 5000000};
    nanosleep(&sl, NULL);
}

static void handoff_proc(shm_t *sh, int advisory, int64_t end) {
    if (advisory) {
        MYSQL *c = conn();
        while (now_us() < end) {
            q(c, "SELECT GET_LOCK('bench-handoff', -1)");
            if (sh->unlocked_at && sh->n < 20000) sh->gap[sh->n++] = now_us() - sh->unlocked_at;
            hold_5ms();
            sh->unlocked_at = now_us();
            q(c, "SELECT RELEASE_LOCK('bench-handoff')");
        }
        mysql_close(c);
    } else {
        simba_loop *loop;
        simba_locker *lk;
        simba_locker_desc d;
        simba_loop_new(NULL, &loop);
        memset(&d, 0, sizeof d);
        d.mutex = "handoff";
        d.ttl_ms = 10000;
        d.transition_ms = 6000;
        simba_locker_new(loop, open_be(loop), &d, &lk);
        while (now_us() < end) {
            if (simba_locker_lock(lk, -1) != SIMBA_OK) continue;
            if (sh->unlocked_at && sh->n < 20000) sh->gap[sh->n++] = now_us() - sh->unlocked_at;
            hold_5ms();
            sh->unlocked_at = now_us();
            simba_locker_unlock(lk);
            simba_locker_unlock_wait(lk, 5000);
        }
        simba_loop_free(loop);
    }
}

static void handoff(int advisory, double *p50, double *p99) {
    shm_t *sh = (shm_t *)mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int64_t end = now_us() + 1000000 + (int64_t)(secs / 2 * 1e6);
    pid_t pid[2];
    int i;
    memset(sh, 0, sizeof *sh);
    for (i = 0; i < 2; i++)
        if ((pid[i] = fork()) == 0) { handoff_proc(sh, advisory, end); _exit(0); }
    for (i = 0; i < 2; i++) waitpid(pid[i], NULL, 0);
    qsort(sh->gap, (size_t)sh->n, sizeof sh->gap[0], cmp64);
    *p50 = sh->n ? sh->gap[sh->n / 2] / 1000.0 : -1;
    *p99 = sh->n ? sh->gap[sh->n * 99 / 100] / 1000.0 : -1;
    printf("  (%s: %d handoffs)\n", advisory ? "GET_LOCK" : "Locker", sh->n);
    munmap(sh, sizeof *sh);
}

int main(int argc, char **argv) {
    const char *part = "all";
    int i;
    double p50, p99, a50, a99;
    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--secs")) secs = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--part")) part = argv[i + 1];
    }
    snprintf(table, sizeof table, "bench_%d", (int)getpid());
    if (!strcmp(part, "w1") || !strcmp(part, "all")) w1();
    if (!strcmp(part, "handoff") || !strcmp(part, "all")) {
        handoff(0, &p50, &p99);
        handoff(1, &a50, &a99);
        printf("| W2 Locker handoff, 2 processes, hold 5 ms | p50 %.2f ms, p99 %.2f ms | GET_LOCK p50 %.2f ms, p99 %.2f ms |"
               " ratio %.2f (target <= 3) |\n", p50, p99, a50, a99, a50 > 0 ? p50 / a50 : -1);
    }
    return 0;
}
