/* redis_fair.c -- fairness and handoff on Redis with several processes (issue 12).
 *
 *   redis_fair PORT [SECONDS (10)] [PROCS (4)] [HOLD_MS (5)]
 *
 * PROCS processes, each with its own loop, backend and Locker with the DEFAULT timing, on one
 * mutex: lock (blocking), hold HOLD_MS, unlock, lock again at once, for SECONDS. Prints the
 * acquisitions per process, Jain's fairness index over them, acquisitions/s, the longest wait
 * (lock call to acquisition) and the handoff (one tenure's unlock call to the next one's
 * acquisition, CLOCK_MONOTONIC across processes) p50/p99/max.
 *   Locker handoff with default timing: redis_fair PORT 10 2 100
 * Needs a server on 127.0.0.1:PORT declared fresh (scripts/redis-start.sh does), or the
 * first acquisition waits a data-loss quarantine.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_redis.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FAIR_MAXP 16
#define FAIR_MAXT 200000

typedef struct tenure {
    int id;
    int64_t req, acq, rel; /* us, CLOCK_MONOTONIC */
} tenure;

static int64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}
static int cmp_acq(const void *a, const void *b) {
    int64_t x = ((const tenure *)a)->acq, y = ((const tenure *)b)->acq;
    return x < y ? -1 : x > y;
}

/* One contender process: records go to fd as binary tenure structs (< PIPE_BUF: atomic). */
static void worker(int port, const char *mutex, int id, int64_t start, int64_t end, int64_t hold_us, int fd) {
    simba_loop *l;
    simba_backend *be;
    simba_locker *lk;
    simba_redis_desc rd;
    simba_locker_desc ld;
    char cid[16];
    if (simba_loop_new(&(simba_loop_desc){0}, &l) != SIMBA_OK) _exit(2);
    memset(&rd, 0, sizeof rd);
    rd.port = port;
    if (simba_redis_open(l, &rd, &be) != SIMBA_OK) _exit(3);
    memset(&ld, 0, sizeof ld);
    snprintf(cid, sizeof cid, "w%d", id);
    ld.mutex = mutex;
    ld.contender_id = cid;
    if (simba_locker_new(l, be, &ld, &lk) != SIMBA_OK) _exit(4);
    while (mono_us() < start) simba_wait(l, (start - mono_us()) / 1000 + 1);
    while (mono_us() < end) {
        tenure t;
        int64_t until;
        simba_result rc;
        t.id = id;
        t.req = mono_us();
        rc = simba_locker_lock(lk, 30000);
        if (rc != SIMBA_OK) {
            fprintf(stderr, "redis_fair: w%d: lock: %s\n", id, simba_strerror(rc));
            _exit(5);
        }
        t.acq = mono_us();
        until = t.acq + hold_us;
        while (mono_us() < until) simba_wait(l, (until - mono_us()) / 1000);
        t.rel = mono_us();
        simba_locker_unlock(lk);
        if (write(fd, &t, sizeof t) != (ssize_t)sizeof t) _exit(6);
    }
    /* the last release is answered before the process goes */
    {
        int64_t stop = mono_us() + 3000000;
        while (simba_service_status(simba_locker_service(lk)) != SIMBA_INITIAL && mono_us() < stop)
            if (simba_wait(l, 20) != SIMBA_OK) break;
    }
    simba_locker_free(lk);
    simba_loop_free(l);
    _exit(0);
}

int main(int argc, char **argv) {
    int port, procs, i, fd[2], failed = 0;
    int64_t secs, hold_ms, start, end, *gaps, *waits;
    long n = 0, ng = 0, cnt[FAIR_MAXP];
    pid_t pid[FAIR_MAXP];
    tenure *t;
    char mutex[64];
    double sum = 0, sq = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [SECONDS] [PROCS] [HOLD_MS]\n", argv[0]);
        return 2;
    }
    port = atoi(argv[1]);
    secs = argc > 2 ? atoll(argv[2]) : 10;
    procs = argc > 3 ? atoi(argv[3]) : 4;
    hold_ms = argc > 4 ? atoll(argv[4]) : 5;
    if (port <= 0 || port > 65535 || secs <= 0 || procs < 2 || procs > FAIR_MAXP || hold_ms < 0) {
        fprintf(stderr, "redis_fair: need 1 <= PORT <= 65535, SECONDS > 0, 2 <= PROCS <= %d, HOLD_MS >= 0\n", FAIR_MAXP);
        return 2;
    }
    t = (tenure *)malloc(FAIR_MAXT * sizeof *t);
    gaps = (int64_t *)malloc(FAIR_MAXT * sizeof *gaps);
    waits = (int64_t *)malloc(FAIR_MAXT * sizeof *waits);
    if (!t || !gaps || !waits || pipe(fd) != 0) return 1;
    snprintf(mutex, sizeof mutex, "fair.%d", (int)getpid());
    /* every process connects first; then all start together */
    start = mono_us() + 1500000;
    end = start + secs * 1000000;
    fflush(NULL);
    for (i = 0; i < procs; i++) {
        pid[i] = fork();
        if (pid[i] < 0) return 1;
        if (pid[i] == 0) {
            close(fd[0]);
            worker(port, mutex, i, start, end, hold_ms * 1000, fd[1]);
        }
    }
    close(fd[1]);
    for (;;) {
        tenure x;
        ssize_t k = read(fd[0], &x, sizeof x);
        if (k != (ssize_t)sizeof x) break;
        if (n < FAIR_MAXT) t[n++] = x;
    }
    for (i = 0; i < procs; i++) {
        int st;
        if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
    }
    if (failed) fprintf(stderr, "redis_fair: a worker failed\n");
    qsort(t, (size_t)n, sizeof *t, cmp_acq);
    memset(cnt, 0, sizeof cnt);
    for (i = 0; i < n; i++) {
        cnt[t[i].id]++;
        waits[i] = t[i].acq - t[i].req;
        /* a handoff: the next owner was already asking when this tenure ended */
        if (i > 0 && t[i].req <= t[i - 1].rel) gaps[ng++] = t[i].acq - t[i - 1].rel;
        if (i > 0 && t[i].acq < t[i - 1].rel) fprintf(stderr, "redis_fair: OVERLAP at tenure %d\n", i), failed = 1;
    }
    printf("redis_fair: %d processes, hold %lld ms, %lld s, default Locker timing\n", procs, (long long)hold_ms, (long long)secs);
    printf("  acquisitions by process:");
    for (i = 0; i < procs; i++) {
        printf(" %ld", cnt[i]);
        sum += (double)cnt[i];
        sq += (double)cnt[i] * (double)cnt[i];
    }
    printf("\n  acquisitions/s %.1f, Jain %.3f\n", (double)n / (double)secs, sq > 0 ? sum * sum / ((double)procs * sq) : 0.0);
    if (n > 0) {
        qsort(waits, (size_t)n, sizeof *waits, cmp_i64);
        printf("  wait: p50 %.2f ms, p99 %.2f ms, longest %.2f ms\n", (double)waits[n / 2] / 1000.0,
               (double)waits[(n * 99) / 100] / 1000.0, (double)waits[n - 1] / 1000.0);
    }
    if (ng > 0) {
        qsort(gaps, (size_t)ng, sizeof *gaps, cmp_i64);
        printf("  handoff (%ld): p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", ng, (double)gaps[ng / 2] / 1000.0,
               (double)gaps[(ng * 99) / 100] / 1000.0, (double)gaps[ng - 1] / 1000.0);
    }
    free(t);
    free(gaps);
    free(waits);
    return failed;
}
