/* stats_prometheus.c -- simba_service_stats() and simba_loop_stats() in the Prometheus text
   exposition format (version 0.0.4), the shape a /metrics endpoint serves.

       stats_prometheus [SECONDS]     (default 2)

   Three contenders share mutex "jobs" on the in-memory backend; halfway through, the leader
   stops and another takes over. Then every counter is printed once, labelled by mutex and
   contender, followed by the loop's totals. A real program would print the same from its
   HTTP handler: reading the statistics allocates nothing and never blocks. */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"

#include <stdio.h>
#include <stdlib.h>

#define NSVC 3

/* One metric family: HELP and TYPE once, then a sample per service (and the loop's). */
typedef struct family {
    const char *name, *type, *help;
    size_t offset; /* of the uint64_t / int64_t field in simba_stats */
    int is_signed;
} family;

#define FAM(n, t, h, field, sgn) {n, t, h, offsetof(simba_stats, field), sgn}
static const family families[] = {
    FAM("simba_acquisitions_total", "counter", "Ownerships gained.", acquisitions, 0),
    FAM("simba_step_downs_total", "counter", "Releases the program did not ask for.", step_downs, 0),
    FAM("simba_attempts_total", "counter", "Acquire and read requests sent.", attempts, 0),
    FAM("simba_renewals_total", "counter", "Renewals confirmed in time.", renewals, 0),
    FAM("simba_renewals_failed_total", "counter", "Renewals failed, refused or confirmed late.", renewals_failed, 0),
    FAM("simba_errors_total", "counter", "Requests answered with an error.", errors, 0),
    FAM("simba_owned", "gauge", "Mutexes owned now.", owned, 0),
    FAM("simba_hold_seconds", "gauge", "Duration of the current ownership.", held_ms, 1),
    FAM("simba_hold_seconds_total", "counter", "Time spent owning, all ownerships.", held_total_ms, 1),
    FAM("simba_waits_total", "counter", "Completed waits to acquire.", waits, 0),
    FAM("simba_wait_seconds_total", "counter", "Time spent waiting to acquire.", wait_total_ms, 1),
    FAM("simba_wait_seconds_max", "gauge", "Longest wait to acquire.", wait_max_ms, 1),
    FAM("simba_waiting_seconds", "gauge", "The wait in progress.", waiting_ms, 1),
};

static void value(const simba_stats *st, const family *f, char *buf, size_t cap) {
    const char *p = (const char *)st + f->offset;
    if (f->is_signed) {
        int64_t ms;
        memcpy(&ms, p, sizeof ms);
        snprintf(buf, cap, "%.3f", (double)ms / 1000.0); /* Prometheus wants seconds */
    } else {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        snprintf(buf, cap, "%llu", (unsigned long long)v);
    }
}

/* Label values here are mutex names and contender ids: no quote, backslash or newline can
   occur in a mutex name; ids are printable ASCII, so escape " and \ for them. */
static void label(char *out, size_t cap, const char *s) {
    size_t n = 0;
    for (; *s && n + 2 < cap; s++) {
        if (*s == '"' || *s == '\\') out[n++] = '\\';
        out[n++] = *s;
    }
    out[n] = 0;
}

int main(int argc, char **argv) {
    simba_memstore *store = NULL;
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_service *svc[NSVC];
    simba_stats st[NSVC + 1];
    char lbl[NSVC + 1][2 * SIMBA_NAME_MAX + 2 * SIMBA_ID_MAX + 64];
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    int64_t start, half, end;
    int i, stopped = 0, r;
    size_t f;
    if (seconds <= 0 || seconds > 3600) {
        fprintf(stderr, "usage: %s [SECONDS]  (0 < SECONDS <= 3600)\n", argv[0]);
        return 2;
    }
    if (simba_memstore_new(NULL, &store) != SIMBA_OK || simba_loop_new(NULL, &loop) != SIMBA_OK ||
        simba_memory_open(loop, store, &be) != SIMBA_OK) {
        fprintf(stderr, "stats_prometheus: setup failed\n");
        return 1;
    }
    for (i = 0; i < NSVC; i++) {
        simba_contend_desc d;
        char id[32];
        memset(&d, 0, sizeof d);
        snprintf(id, sizeof id, "worker-%d", i);
        d.mutex = "jobs";
        d.contender_id = id;
        d.ttl_ms = 300;
        d.transition_ms = 100;
        if (simba_contend(loop, be, &d, &svc[i]) != SIMBA_OK || simba_start(svc[i]) != SIMBA_OK) {
            fprintf(stderr, "stats_prometheus: %s\n", simba_loop_errmsg(loop));
            return 1;
        }
    }
    start = simba_now(loop);
    half = start + (int64_t)(seconds * 500.0);
    end = start + (int64_t)(seconds * 1000.0);
    while (simba_now(loop) < end) {
        if (simba_wait(loop, end - simba_now(loop)) != SIMBA_OK) break;
        if (!stopped && simba_now(loop) >= half) { /* the leader steps aside: a handoff */
            for (i = 0; i < NSVC; i++)
                if (simba_is_owner(svc[i])) simba_stop(svc[i]);
            stopped = 1;
        }
    }
    for (i = 0; i <= NSVC; i++) {
        st[i].size = sizeof st[i];
        r = i < NSVC ? simba_service_stats(svc[i], &st[i]) : simba_loop_stats(loop, &st[i]);
        if (r != SIMBA_OK) {
            fprintf(stderr, "stats_prometheus: %s\n", simba_strerror(r));
            return 1;
        }
        if (i < NSVC) {
            char m[2 * SIMBA_NAME_MAX + 1], c[2 * SIMBA_ID_MAX + 1];
            label(m, sizeof m, simba_service_mutex(svc[i]));
            label(c, sizeof c, simba_service_contender_id(svc[i]));
            snprintf(lbl[i], sizeof lbl[i], "scope=\"service\",mutex=\"%s\",contender=\"%s\"", m, c);
        } else {
            snprintf(lbl[i], sizeof lbl[i], "scope=\"loop\"");
        }
    }
    for (f = 0; f < sizeof families / sizeof families[0]; f++) {
        printf("# HELP %s %s\n# TYPE %s %s\n", families[f].name, families[f].help, families[f].name, families[f].type);
        for (i = 0; i <= NSVC; i++) {
            char v[32];
            value(&st[i], &families[f], v, sizeof v);
            printf("%s{%s} %s\n", families[f].name, lbl[i], v);
        }
    }
    printf("# HELP simba_releases_total Ownerships left, by reason.\n# TYPE simba_releases_total counter\n");
    for (i = 0; i <= NSVC; i++) {
        int k;
        for (k = SIMBA_REASON_STOPPED; k < SIMBA_REASON_COUNT_; k++)
            printf("simba_releases_total{%s,reason=\"%s\"} %llu\n", lbl[i], simba_reason_str(k),
                   (unsigned long long)st[i].releases_by_reason[k]);
    }
    printf("# HELP simba_last_error_info The latest failed request (value 1), if any.\n# TYPE simba_last_error_info gauge\n");
    for (i = 0; i <= NSVC; i++) {
        if (st[i].last_error != SIMBA_OK) {
            char e[2 * sizeof st[i].last_error_msg + 1];
            label(e, sizeof e, st[i].last_error_msg);
            printf("simba_last_error_info{%s,code=\"%d\",message=\"%s\"} 1\n", lbl[i], st[i].last_error, e);
        }
    }
    fflush(stdout);
    simba_loop_free(loop);
    simba_memstore_free(store);
    /* the run proved something only if a handoff happened */
    return st[NSVC].acquisitions >= 2 && st[NSVC].releases >= 1 ? 0 : 1;
}
