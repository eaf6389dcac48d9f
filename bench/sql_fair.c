/* sql_fair.c -- fairness and handoff on SQLite between processes (issue 12).
 *
 *   sql_fair round  NPROC HOLD_MS PAUSE_MS SECONDS [TTL_MS TRANSITION_MS]
 *       NPROC processes on one file, each: blocking Locker lock, hold, unlock, pause, again.
 *       Prints acquisitions per process, Jain fairness, longest wait, acquisitions/s and the
 *       handoff latency (one process's unlock call to the next one's lock returning) p50/p99.
 *       TTL 0 = the Locker's default timing (ttl 10 s, transition 6 s).
 *   sql_fair kill   ROUNDS
 *       An owner process (ttl 1000, transition 500) is SIGKILLed while another waits: how long
 *       after the row's lease end (database time) the waiter owns, median and max.
 *
 * Times: CLOCK_MONOTONIC is one clock for every process of the host; the database's time is
 * the wall clock. Each process writes its records to its own file; the parent reads them.
 */
#define SIMBA_IMPLEMENTATION
#include "../simba_sql.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
static void sleep_ms(int64_t ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000;
    nanosleep(&ts, NULL);
}
static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct rec {
    int who;
    int64_t want_us, acq_us, rel_us; /* lock called, lock returned, unlock called */
} rec;

static char dir[256], db[300];

static simba_backend *open_db(simba_loop **loop) {
    simba_backend *be = NULL;
    simba_sql_desc d;
    *loop = NULL;
    if (simba_loop_new(&(simba_loop_desc){0}, loop) != SIMBA_OK) return NULL;
    memset(&d, 0, sizeof d);
    d.path = db;
    if (simba_sql_open(*loop, &d, &be) != SIMBA_OK) return NULL;
    return be;
}

static void round_child(int who, int hold_ms, int pause_ms, int64_t start_us, int64_t end_us, int64_t ttl, int64_t tr) {
    simba_loop *loop;
    simba_backend *be = open_db(&loop);
    simba_locker *lk = NULL;
    simba_locker_desc d;
    char path[400];
    FILE *f;
    rec r;
    if (!be) _exit(2);
    memset(&d, 0, sizeof d);
    d.mutex = "fair";
    d.ttl_ms = ttl;
    d.transition_ms = tr;
    if (simba_locker_new(loop, be, &d, &lk) != SIMBA_OK) _exit(2);
    snprintf(path, sizeof path, "%s/rec%d", dir, who);
    if (!(f = fopen(path, "wb"))) _exit(2);
    while (mono_us() < start_us) sleep_ms(1);
    while (mono_us() < end_us) {
        r.who = who;
        r.want_us = mono_us();
        if (simba_locker_lock(lk, (end_us - r.want_us) / 1000 + 1) != SIMBA_OK) {
            r.acq_us = r.rel_us = -1; /* still waiting when the run ended */
            fwrite(&r, sizeof r, 1, f);
            break;
        }
        r.acq_us = mono_us();
        if (r.acq_us >= end_us) {
            simba_locker_unlock(lk);
            r.acq_us = r.rel_us = -1;
            fwrite(&r, sizeof r, 1, f);
            break;
        }
        sleep_ms(hold_ms);
        r.rel_us = mono_us();
        simba_locker_unlock(lk);
        fwrite(&r, sizeof r, 1, f);
        if (pause_ms > 0) {
            int64_t until = mono_us() + (int64_t)pause_ms * 1000;
            while (mono_us() < until) simba_wait(loop, (until - mono_us()) / 1000 + 1);
        }
    }
    fclose(f);
    simba_locker_free(lk);
    simba_loop_free(loop);
    _exit(0);
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}
static int cmprec(const void *a, const void *b) {
    const rec *x = (const rec *)a, *y = (const rec *)b;
    return x->acq_us < y->acq_us ? -1 : x->acq_us > y->acq_us;
}

static int run_round(int n, int hold_ms, int pause_ms, int secs, int64_t ttl, int64_t tr) {
    pid_t kid[64];
    rec *all = NULL;
    size_t nall = 0, cap = 0, i;
    int64_t start, end, longest = 0, *hand;
    double sum = 0, sum2 = 0;
    int counts[64], k;
    size_t nh = 0;
    if (n < 1 || n > 64) return 1;
    start = mono_us() + 300000;
    end = start + (int64_t)secs * 1000000;
    for (k = 0; k < n; k++) {
        kid[k] = fork();
        if (kid[k] == 0) round_child(k, hold_ms, pause_ms, start, end, ttl, tr);
    }
    for (k = 0; k < n; k++) waitpid(kid[k], NULL, 0);
    for (k = 0; k < n; k++) {
        char path[400];
        FILE *f;
        rec r;
        counts[k] = 0;
        snprintf(path, sizeof path, "%s/rec%d", dir, k);
        if (!(f = fopen(path, "rb"))) continue;
        while (fread(&r, sizeof r, 1, f) == 1) {
            if (r.acq_us < 0) { /* an unfinished wait counts up to the end of the run */
                if (end - r.want_us > longest) longest = end - r.want_us;
                continue;
            }
            if (nall == cap) {
                cap = cap ? cap * 2 : 1024;
                all = (rec *)realloc(all, cap * sizeof *all);
            }
            all[nall++] = r;
            counts[k]++;
            /* the wait: from asking (after its own pause) to owning */
            if (r.acq_us - r.want_us > longest) longest = r.acq_us - r.want_us;
        }
        fclose(f);
    }
    qsort(all, nall, sizeof *all, cmprec);
    hand = (int64_t *)malloc((nall + 1) * sizeof *hand);
    for (i = 1; i < nall; i++)
        if (all[i].who != all[i - 1].who && all[i].want_us < all[i - 1].rel_us) /* it waited for that release */
            hand[nh++] = all[i].acq_us - all[i - 1].rel_us;
    qsort(hand, nh, sizeof *hand, cmp64);
    printf("sqlite, %d processes, hold %d ms, pause %d ms, %d s, timing %s\n", n, hold_ms, pause_ms, secs,
           ttl ? "given" : "Locker default (ttl 10 s, transition 6 s)");
    printf("  acquisitions by process:");
    for (k = 0; k < n; k++) {
        printf(" %d", counts[k]);
        sum += counts[k];
        sum2 += (double)counts[k] * counts[k];
    }
    printf("\n  acquisitions/s %.1f   Jain fairness %.3f   longest wait %.1f ms\n", sum / secs,
           sum2 > 0 ? sum * sum / (n * sum2) : 0.0, longest / 1000.0);
    if (nh)
        printf("  handoff (unlock called -> next lock returned) n=%zu p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", nh,
               hand[nh / 2] / 1000.0, hand[(nh * 99) / 100] / 1000.0, hand[nh - 1] / 1000.0);
    free(hand);
    free(all);
    return 0;
}

/* One SIGKILL round: returns ms from the row's lease end to the waiter owning, or -1. */
static int64_t kill_once(int round) {
    int p[2];
    pid_t owner, waiter;
    char mutex[32], b;
    int64_t took = -1, lease_end;
    simba_loop *loop;
    simba_backend *be;
    simba_reply rep;
    char who[SIMBA_ID_MAX + 1];
    snprintf(mutex, sizeof mutex, "kill%d", round);
    if (pipe(p) != 0) return -1;
    owner = fork();
    if (owner == 0) {
        simba_loop *l;
        simba_backend *ob = open_db(&l);
        simba_locker *lk = NULL;
        simba_locker_desc d;
        memset(&d, 0, sizeof d);
        d.mutex = mutex;
        d.contender_id = "owner";
        d.ttl_ms = 1000;
        d.transition_ms = 500;
        if (!ob || simba_locker_new(l, ob, &d, &lk) != SIMBA_OK || simba_locker_lock(lk, 5000) != SIMBA_OK) _exit(2);
        if (write(p[1], "L", 1) != 1) _exit(2);
        for (;;) simba_wait(l, 100);
    }
    if (read(p[0], &b, 1) != 1) return -1;
    waiter = fork();
    if (waiter == 0) {
        simba_loop *l;
        simba_backend *wb = open_db(&l);
        simba_locker *lk = NULL;
        simba_locker_desc d;
        int64_t t;
        memset(&d, 0, sizeof d);
        d.mutex = mutex;
        d.contender_id = "waiter";
        d.ttl_ms = 1000;
        d.transition_ms = 500;
        if (!wb || simba_locker_new(l, wb, &d, &lk) != SIMBA_OK || simba_locker_lock(lk, 20000) != SIMBA_OK) _exit(2);
        t = wall_ms();
        if (write(p[1], &t, sizeof t) != (ssize_t)sizeof t) _exit(2);
        _exit(0);
    }
    sleep_ms(300); /* the waiter is queued */
    be = open_db(&loop);
    kill(owner, SIGKILL);
    waitpid(owner, NULL, 0);
    if (be && simba_sql_read(be, mutex, &rep, who, sizeof who) == SIMBA_OK && strcmp(who, "owner") == 0) {
        int64_t t;
        lease_end = wall_ms() + rep.transition_left_ms;
        if (read(p[0], &t, sizeof t) == (ssize_t)sizeof t) took = t - lease_end;
    }
    waitpid(waiter, NULL, 0);
    simba_loop_free(loop);
    close(p[0]);
    close(p[1]);
    return took;
}

int main(int argc, char **argv) {
    int rc = 1;
    char cmd[400];
    snprintf(dir, sizeof dir, "%s/simba_sql_fair_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 1;
    snprintf(db, sizeof db, "%s/fair.db", dir);
    if (argc >= 6 && strcmp(argv[1], "round") == 0) {
        rc = run_round(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argc > 6 ? atoll(argv[6]) : 0,
                       argc > 7 ? atoll(argv[7]) : 0);
    } else if (argc >= 3 && strcmp(argv[1], "kill") == 0) {
        int n = atoi(argv[2]), i, got = 0;
        int64_t v[64];
        for (i = 0; i < n && i < 64; i++) {
            int64_t t = kill_once(i);
            if (t != -1) v[got++] = t;
        }
        qsort(v, (size_t)got, sizeof v[0], cmp64);
        if (got)
            printf("sqlite, owner SIGKILLed (ttl 1000, transition 500), %d rounds: next owner after the lease end "
                   "median %lld ms, min %lld, max %lld\n", got, (long long)v[got / 2], (long long)v[0], (long long)v[got - 1]);
        rc = got ? 0 : 1;
    } else {
        fprintf(stderr, "usage: sql_fair round NPROC HOLD_MS PAUSE_MS SECONDS [TTL_MS TRANSITION_MS] | kill ROUNDS\n");
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
