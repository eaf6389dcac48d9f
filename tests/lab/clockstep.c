/* clockstep.c -- an LD_PRELOAD library that steps one process's wall clock, for the fault lab.
 *
 *   LD_PRELOAD=build/clockstep.so CLOCKSTEP_FILE=/path/offset redis-server ...
 *
 * CLOCK_REALTIME (clock_gettime, gettimeofday, time) reads as the real clock plus the seconds
 * written in CLOCKSTEP_FILE ("+9", "-3", "0"), re-read at most every 10 ms, so rewriting the
 * file steps the clock. Monotonic clocks are left alone: the process's own timers run true.
 * The lab steps Redis with it: libfaketime cannot start Debian's redis-server (its jemalloc
 * calls clock_gettime inside libfaketime's initialisation). The real clock is read by system
 * call and the file with open/read, so nothing here allocates or calls back into a clock. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long offset_s;     /* the step, in seconds; read and written with __atomic */
static long next_read_ms; /* the real time (ms) at which the file is read again */

static void reread(long now_ms)
{
    static const char *path;
    char buf[32];
    ssize_t n;
    int fd;
    if (now_ms < __atomic_load_n(&next_read_ms, __ATOMIC_RELAXED))
        return;
    __atomic_store_n(&next_read_ms, now_ms + 10, __ATOMIC_RELAXED);
    if (!path)
        path = getenv("CLOCKSTEP_FILE");
    if (!path || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
        buf[n] = '\0';
        __atomic_store_n(&offset_s, strtol(buf, NULL, 10), __ATOMIC_RELAXED);
    }
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = (int)syscall(SYS_clock_gettime, id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        reread((long)ts->tv_sec * 1000 + ts->tv_nsec / 1000000);
        ts->tv_sec += __atomic_load_n(&offset_s, __ATOMIC_RELAXED);
    }
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *t)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}
