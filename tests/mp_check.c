/* mp_check.c -- checks the merged logs of mp_worker processes (and of the fault harness).
 *
 *   mp_check [--min-ownerships N] [--min-contenders K] [--need-inspect] [--quiet-figures]
 *            [--permits N] [--order-window-ms W] [--min-concurrent K] [--min-exclusive K]
 *            [--porcupine FILE] LOG... (or - / nothing for stdin)
 *   mp_check --now        prints CLOCK_MONOTONIC in ms (3 decimals), for scripts
 *
 * Each line: <pid> <contender> <fence> <what> <monotonic ms> [<ms>], what one of
 *   acquired / released   an ownership as the callbacks told it ("acquired:shared": a
 *                         reader of a read-write lock); "released" may carry the
 *                         end of the local lease as the worker last knew it: the ownership
 *                         ends at the earlier of the two (a process frozen past its lease
 *                         writes its "released" late, but could not act after the lease)
 *   work                  the worker acted as owner (simba_is_owner() said yes)
 *   wrote / refused       a real fenced resource (mp_worker --fenced-file) accepted / refused
 *                         the write of that work line; logged under the resource's lock, so
 *                         these lines are in the resource's order
 *   violation:<kind>      the worker caught simba_is_owner() and the callbacks disagreeing
 *   killed                (from the harness; contender "-") the process <pid> was killed
 *                         at or before this time: its open ownership ends here
 *   fault:<kind>          (from the harness) a fault was injected
 *   inspect-free / inspect-leaked   the final inspector owned the mutex / found it held
 * CLOCK_MONOTONIC is system-wide on Linux, so lines of different processes compare.
 *
 * Reports
 *   overlaps          two ownerships of different contenders that intersect (more than
 *                     touching): mutual exclusion was broken. With --permits N (a
 *                     semaphore): more than N ownerships at one moment. Readers
 *                     ("acquired:shared") may intersect each other, never an exclusive one;
 *   fence violations  an ownership whose fence is not above every fence seen before it,
 *                     also when the same contender re-acquires after a local step-down
 *                     (every on_acquired starts a new tenure with a new fence); among
 *                     them, repeated fences: a fence that an earlier ownership already had
 *                     (a fenced resource cannot tell those two owners apart). Holders that
 *                     share are granted close together and may log in another order than
 *                     the store granted: with --order-window-ms W an ownership need only be
 *                     above those that began more than W ms before it (W = the lease: a
 *                     grant answered later than its lease is refused by the core, so one
 *                     logged W ms after another was granted after it); every fence is
 *                     still unique;
 *   acts while not owner  work outside the worker's own ownership (or inside another's),
 *                     plus the workers' violation lines;
 *   leaked locks      inspect-leaked lines (with --need-inspect, a missing inspector line
 *                     counts as a leak);
 *   protocol errors   acquired twice without a release, a release without an acquire or
 *                     with another fence, an ownership never released, a bad line.
 * Also reported: stale writes, work lines made after another contender's later
 * ownership had begun, and whether a fenced resource (it keeps the highest fence written and
 * refuses lower ones) refuses them: "let through" counts those accepted although a later
 * ownership had a fence not above theirs (a fence that did not catch them).
 * A real fenced resource's log (wrote / refused, a mutex) is checked too: "stale writes
 * accepted" counts writes it accepted with a fence below one it accepted before, or made
 * after another contender's later ownership began whose fence is not above theirs (each
 * reported with both ownerships). Those and the "let through" above fail the check.
 * Also printed: the longest time without an owner. --porcupine FILE writes the history in
 * Porcupine's JSON shape (operations with ClientId, Input, Call, Output, Return; acquire with
 * its fence, release, write with its answer; microseconds) for an offline cross-check.
 * --min-concurrent K: some moment must show K holders at once (a semaphore of K, readers
 * together: a store that grants one at a time fails); --min-exclusive K: at least K
 * exclusive ownerships (a read-write lock's writers are not starved).
 * Exits 1 on any of these (or fewer ownerships / contenders than asked for), 0 otherwise.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ID_MAX 160
#define WORK_SLACK_MS 5.0 /* work is logged just after simba_is_owner() said yes */

enum { E_ACQ, E_REL, E_WORK, E_VIOL, E_KILLED, E_FAULT, E_FREE, E_LEAKED, E_WROTE, E_REFUSED };

typedef struct ev {
    long pid;
    char who[ID_MAX];
    char what[48];
    unsigned long long fence;
    int kind;
    int shared;      /* acquired:shared */
    double t, extra; /* extra < 0: absent */
    int order;       /* input order, to keep equal times stable */
} ev;

typedef struct own {
    char who[ID_MAX + 24]; /* "pid/contender" */
    long pid;
    unsigned long long fence;
    double from, to; /* to: effective end; < 0 while open */
    double notice;   /* when the release was written (or the kill noticed) */
    int killed;
    int shared; /* a reader: may hold with other readers */
} own;

static ev *evs;
static size_t nev, cap_ev;
static own *owns;
static size_t nown, cap_own;
static int errors;

static void *grow(void *p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return p;
    *cap = *cap ? *cap * 2 : 256;
    if (*cap < need) *cap = need;
    p = realloc(p, *cap * size);
    if (!p) {
        fprintf(stderr, "mp_check: out of memory\n");
        exit(2);
    }
    return p;
}

static int kind_of(const char *w) {
    if (strcmp(w, "acquired") == 0 || strcmp(w, "acquired:shared") == 0) return E_ACQ;
    if (strcmp(w, "released") == 0) return E_REL;
    if (strcmp(w, "work") == 0) return E_WORK;
    if (strncmp(w, "violation:", 10) == 0) return E_VIOL;
    if (strcmp(w, "killed") == 0) return E_KILLED;
    if (strncmp(w, "fault:", 6) == 0) return E_FAULT;
    if (strcmp(w, "inspect-free") == 0) return E_FREE;
    if (strcmp(w, "inspect-leaked") == 0) return E_LEAKED;
    if (strcmp(w, "wrote") == 0) return E_WROTE;
    if (strcmp(w, "refused") == 0) return E_REFUSED;
    return -1;
}

static void read_file(FILE *f, const char *name) {
    char line[512];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        ev e;
        int n;
        lineno++;
        if (line[0] == '\n' || line[0] == '#') continue;
        memset(&e, 0, sizeof e);
        e.extra = -1;
        n = sscanf(line, "%ld %159s %llu %47s %lf %lf", &e.pid, e.who, &e.fence, e.what, &e.t, &e.extra);
        if (n < 5 || (e.kind = kind_of(e.what)) < 0) {
            fprintf(stderr, "mp_check: %s:%d: bad line: %s", name, lineno, line);
            errors++;
            continue;
        }
        if (n < 6) e.extra = -1;
        e.shared = strcmp(e.what, "acquired:shared") == 0;
        evs = (ev *)grow(evs, &cap_ev, nev + 1, sizeof *evs);
        e.order = (int)nev;
        evs[nev++] = e;
    }
}

static int by_time(const void *a, const void *b) {
    const ev *x = (const ev *)a, *y = (const ev *)b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->order - y->order;
}

static int by_from(const void *a, const void *b) {
    const own *x = (const own *)a, *y = (const own *)b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    return 0;
}

static own *open_of(const char *key) {
    size_t j;
    for (j = nown; j-- > 0;)
        if (strcmp(owns[j].who, key) == 0) return owns[j].to < 0 ? &owns[j] : NULL;
    return NULL;
}

/* Fault kinds and their counts, for the summary. */
static char fault_names[32][48];
static int fault_counts[32], nfault_kinds, nfaults;
static void count_fault(const char *what) {
    int i;
    nfaults++;
    for (i = 0; i < nfault_kinds; i++)
        if (strcmp(fault_names[i], what + 6) == 0) {
            fault_counts[i]++;
            return;
        }
    if (nfault_kinds < 32) {
        snprintf(fault_names[nfault_kinds], sizeof fault_names[0], "%s", what + 6);
        fault_counts[nfault_kinds++] = 1;
    }
}

static void key_of(const ev *e, char *key, size_t cap) { snprintf(key, cap, "%ld/%s", e->pid, e->who); }

/* The ownership a line of this contender with this fence belongs to: the latest begun by t. */
static const own *ownership_of(const ev *e) {
    char key[ID_MAX + 24];
    const own *o = NULL;
    size_t j;
    key_of(e, key, sizeof key);
    for (j = 0; j < nown; j++)
        if (strcmp(owns[j].who, key) == 0 && owns[j].fence == e->fence && owns[j].from <= e->t) o = &owns[j];
    return o;
}

static void print_own(const char *label, const own *o) {
    if (!o) fprintf(stderr, "%s (no ownership of that fence)", label);
    else fprintf(stderr, "%s %s [%.3f, %.3f] fence %llu", label, o->who, o->from, o->to, o->fence);
}

/* A real fenced resource's answers ("wrote", "refused", in the resource's order): a write
   accepted with a fence below one it accepted before, or made after a later ownership
   began whose fence is not above it, is a stale write accepted. Returns how many. */
static int check_fenced_writes(void) {
    const ev *top = NULL;
    int accepted = 0, refused = 0, stale = 0;
    size_t i, j;
    for (i = 0; i < nev; i++) {
        const ev *e = &evs[i];
        const own *mine, *later = NULL;
        char key[ID_MAX + 24];
        if (e->kind == E_REFUSED) refused++;
        if (e->kind != E_WROTE) continue;
        accepted++;
        mine = ownership_of(e);
        key_of(e, key, sizeof key);
        for (j = 0; j < nown && !later; j++)
            if (strcmp(owns[j].who, key) != 0 && owns[j].from > (mine ? mine->from : -1e300) && owns[j].from < e->t &&
                owns[j].fence <= e->fence)
                later = &owns[j];
        if ((top && e->fence < top->fence) || later) {
            if (stale < 10) {
                fprintf(stderr, "mp_check: STALE write accepted: %s fence %llu at %.3f, ", key, e->fence, e->t);
                print_own("its ownership", mine);
                if (later) {
                    print_own("; begun after it:", later);
                } else {
                    fprintf(stderr, "; after fence %llu written at %.3f, ", top->fence, top->t);
                    print_own("by", ownership_of(top));
                }
                fprintf(stderr, "\n");
            }
            stale++;
        }
        if (!top || e->fence >= top->fence) top = e;
    }
    if (accepted || refused)
        printf("mp_check: fenced resource: %d writes accepted, %d refused, stale writes accepted %d\n", accepted,
               refused, stale);
    return stale;
}

/* The longest stretch of [first, last] that no ownership covers (first, last: the workers'
   first and last lines; a fault's line after the workers stopped does not count). */
static double longest_without_owner(double first, double last) {
    double end = first, worst = 0;
    size_t i;
    for (i = 0; i < nown; i++) { /* owns sorted by from */
        if (owns[i].from - end > worst) worst = owns[i].from - end;
        if (owns[i].to > end) end = owns[i].to;
    }
    if (end < last && last - end > worst) worst = last - end;
    return worst;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int client_of(const char *key) {
    size_t j;
    for (j = 0; j < nown; j++)
        if (strcmp(owns[j].who, key) == 0) return (int)j;
    return (int)nown;
}

/* The history in Porcupine's JSON shape (a list of operations: ClientId, Input, Call, Output,
   Return; times in microseconds from the first line): acquire (output: the fence), release,
   and the fenced resource's writes (output: accepted or not). */
static int write_porcupine(const char *path, double first) {
    FILE *f = fopen(path, "w");
    size_t i;
    int n = 0;
    if (!f) {
        perror(path);
        return 0;
    }
    fprintf(f, "[");
    for (i = 0; i < nown; i++) {
        long long a = (long long)((owns[i].from - first) * 1000), r = (long long)((owns[i].to - first) * 1000);
        fprintf(f, "%s\n {\"ClientId\": %d, \"Input\": {\"op\": \"acquire\", \"contender\": ", n++ ? "," : "", client_of(owns[i].who));
        json_str(f, owns[i].who);
        fprintf(f, "%s}, \"Call\": %lld, \"Output\": {\"fence\": %llu}, \"Return\": %lld}", owns[i].shared ? ", \"shared\": true" : "",
                a, owns[i].fence, a);
        if (owns[i].to < 1e299)
            fprintf(f, ",\n {\"ClientId\": %d, \"Input\": {\"op\": \"release\", \"fence\": %llu}, \"Call\": %lld, \"Output\": {}, \"Return\": %lld}",
                    client_of(owns[i].who), owns[i].fence, r, r);
    }
    for (i = 0; i < nev; i++) {
        char key[ID_MAX + 24];
        long long t = (long long)((evs[i].t - first) * 1000);
        if (evs[i].kind != E_WROTE && evs[i].kind != E_REFUSED) continue;
        key_of(&evs[i], key, sizeof key);
        fprintf(f, "%s\n {\"ClientId\": %d, \"Input\": {\"op\": \"write\", \"fence\": %llu}, \"Call\": %lld, \"Output\": {\"ok\": %s}, \"Return\": %lld}",
                n++ ? "," : "", client_of(key), evs[i].fence, t, evs[i].kind == E_WROTE ? "true" : "false", t);
    }
    fprintf(f, "\n]\n");
    return fclose(f) == 0;
}

int main(int argc, char **argv) {
    long min_own = 1, min_contenders = 1, permits = 1, min_concurrent = 0, min_exclusive = 0;
    double order_window = 0;
    int max_concurrent = 0, max_readers = 0, nexclusive = 0, modes = 0;
    size_t i, j;
    int nfiles = 0, need_inspect = 0, overlaps = 0, fence_viol = 0, handoffs = 0, contenders = 0, reacquired = 0;
    int repeated = 0, acts = 0, worker_viol = 0, leaked = 0, inspected = 0, late_notices = 0, nwork = 0, nkilled = 0;
    double wfirst = -1, wlast = 0; /* the workers' own lines: the span the mutex was wanted */
    double first = 0, last = 0, held = 0, gap_min = 0, gap_max = 0, gap_sum = 0, margin_min = -1;
    int ngaps = 0;
    unsigned long long max_fence = 0;
    size_t imax = 0; /* the ownership with max_fence */
    const char *porcupine = NULL;
    int stale_accepted = 0;

    for (i = 1; i < (size_t)argc; i++) {
        if (strcmp(argv[i], "--now") == 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            printf("%.3f\n", (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6);
            return 0;
        } else if (strcmp(argv[i], "--min-ownerships") == 0 && i + 1 < (size_t)argc) {
            min_own = atol(argv[++i]);
        } else if (strcmp(argv[i], "--min-contenders") == 0 && i + 1 < (size_t)argc) {
            min_contenders = atol(argv[++i]);
        } else if (strcmp(argv[i], "--permits") == 0 && i + 1 < (size_t)argc) {
            permits = atol(argv[++i]);
            if (permits < 1) permits = 1;
        } else if (strcmp(argv[i], "--order-window-ms") == 0 && i + 1 < (size_t)argc) {
            order_window = atof(argv[++i]);
        } else if (strcmp(argv[i], "--min-concurrent") == 0 && i + 1 < (size_t)argc) {
            min_concurrent = atol(argv[++i]);
        } else if (strcmp(argv[i], "--min-exclusive") == 0 && i + 1 < (size_t)argc) {
            min_exclusive = atol(argv[++i]);
        } else if (strcmp(argv[i], "--porcupine") == 0 && i + 1 < (size_t)argc) {
            porcupine = argv[++i];
        } else if (strcmp(argv[i], "--need-inspect") == 0) {
            need_inspect = 1;
        } else if (strcmp(argv[i], "-") == 0) {
            read_file(stdin, "stdin");
            nfiles++;
        } else {
            FILE *f = fopen(argv[i], "r");
            if (!f) {
                perror(argv[i]);
                return 2;
            }
            read_file(f, argv[i]);
            fclose(f);
            nfiles++;
        }
    }
    if (!nfiles) read_file(stdin, "stdin");
    qsort(evs, nev, sizeof *evs, by_time);

    /* Pair each contender's events into ownerships. A contender is pid + id. */
    for (i = 0; i < nev; i++) {
        ev *e = &evs[i];
        char key[ID_MAX + 24];
        own *o;
        snprintf(key, sizeof key, "%ld/%s", e->pid, e->who);
        if (i == 0 || e->t < first) first = e->t;
        if (e->t > last) last = e->t;
        if (e->kind != E_FAULT && e->kind != E_KILLED) {
            if (wfirst < 0) wfirst = e->t;
            if (e->t > wlast) wlast = e->t;
        }
        switch (e->kind) {
        case E_FAULT: count_fault(e->what); continue;
        case E_FREE: inspected++; continue;
        case E_LEAKED:
            inspected++;
            leaked++;
            fprintf(stderr, "mp_check: LEAKED: the inspector found the mutex still held (fence %llu)\n", e->fence);
            continue;
        case E_VIOL:
            worker_viol++;
            if (worker_viol <= 10) fprintf(stderr, "mp_check: WORKER %s at %.3f: %s (fence %llu)\n", key, e->t, e->what, e->fence);
            continue;
        case E_WORK: nwork++; continue; /* checked against the ownerships below */
        case E_WROTE:
        case E_REFUSED: continue; /* the fenced resource's answers: checked below */
        case E_KILLED:
            nkilled++;
            /* every open ownership of that process ends here */
            for (j = 0; j < nown; j++)
                if (owns[j].pid == e->pid && owns[j].to < 0) {
                    owns[j].to = e->t;
                    owns[j].notice = e->t;
                    owns[j].killed = 1;
                }
            continue;
        default: break;
        }
        o = open_of(key);
        if (e->kind == E_ACQ) {
            if (o) {
                fprintf(stderr, "mp_check: %s acquired at %.3f while already owning since %.3f\n", key, e->t, o->from);
                errors++;
                o->to = o->notice = e->t;
            }
            owns = (own *)grow(owns, &cap_own, nown + 1, sizeof *owns);
            memset(&owns[nown], 0, sizeof owns[nown]);
            snprintf(owns[nown].who, sizeof owns[nown].who, "%s", key);
            owns[nown].pid = e->pid;
            owns[nown].fence = e->fence;
            owns[nown].from = e->t;
            owns[nown].to = -1;
            owns[nown].shared = e->shared;
            nown++;
        } else if (!o) {
            fprintf(stderr, "mp_check: %s released at %.3f without owning\n", key, e->t);
            errors++;
        } else {
            if (o->fence != e->fence) {
                fprintf(stderr, "mp_check: %s released fence %llu but acquired fence %llu\n", key, e->fence, o->fence);
                errors++;
            }
            o->notice = e->t;
            o->to = e->t;
            /* the lease end, when known and earlier, is when the ownership really ended */
            if (e->extra >= 0 && e->extra < o->to) o->to = e->extra < o->from ? o->from : e->extra;
        }
    }
    for (i = 0; i < nown; i++)
        if (owns[i].to < 0) {
            fprintf(stderr, "mp_check: %s acquired at %.3f (fence %llu) and never released\n", owns[i].who,
                    owns[i].from, owns[i].fence);
            errors++;
            owns[i].to = owns[i].notice = 1e300; /* counts as held to the end for the overlap check */
        }
    qsort(owns, nown, sizeof *owns, by_from);

    for (i = 0; i < nown; i++) {
        int seen = 0, holding = 1, readers = owns[i].shared, before = 0;
        unsigned long long below = 0; /* the highest fence of ownerships begun before the window */
        if (owns[i].shared) modes |= 2;
        else nexclusive++;
        for (j = 0; j < i; j++) {
            int same = strcmp(owns[j].who, owns[i].who) == 0;
            if (same) seen = 1;
            /* Every intersecting pair has one member that begins inside the other: counting
               the holders at each beginning finds every moment with too many. */
            if (!same && owns[j].to > owns[i].from) { /* intervals that only touch are no overlap */
                holding++;
                readers += owns[j].shared;
                if (permits == 1 && !(owns[i].shared && owns[j].shared)) {
                    if (overlaps < 10)
                        fprintf(stderr, "mp_check: OVERLAP %s%s [%.3f, %.3f] fence %llu with %s%s [%.3f, %.3f] fence %llu\n",
                                owns[j].who, owns[j].shared ? " (reader)" : "", owns[j].from, owns[j].to,
                                owns[j].fence, owns[i].who, owns[i].shared ? " (reader)" : "", owns[i].from,
                                owns[i].to, owns[i].fence);
                    overlaps++;
                }
            }
            if (!same && owns[j].notice > owns[i].from && owns[j].to <= owns[i].from) late_notices++;
            if (owns[j].from < owns[i].from - order_window) {
                before = 1;
                if (owns[j].fence > below) below = owns[j].fence;
            }
            if (order_window > 0 && owns[j].fence == owns[i].fence) {
                if (fence_viol < 10)
                    fprintf(stderr, "mp_check: FENCE %s at %.3f repeats fence %llu of %s at %.3f\n", owns[i].who,
                            owns[i].from, owns[i].fence, owns[j].who, owns[j].from);
                fence_viol++;
                repeated++;
            }
        }
        if (permits > 1 && holding > permits) {
            if (overlaps < 10)
                fprintf(stderr, "mp_check: OVERLAP %d holders at %.3f (permits %ld), the last %s fence %llu\n", holding,
                        owns[i].from, permits, owns[i].who, owns[i].fence);
            overlaps++;
        }
        if (holding > max_concurrent) max_concurrent = holding;
        if (readers > max_readers) max_readers = readers;
        if (i > 0 && !seen) {
            /* margin between the end of the previous ownership and this one */
            double m = owns[i].from - owns[i - 1].to;
            if (owns[i - 1].to < 1e299 && (margin_min < 0 || m < margin_min)) margin_min = m;
        }
        if (!seen) contenders++;
        if (order_window > 0) {
            if (before && owns[i].fence <= below) {
                if (fence_viol < 10)
                    fprintf(stderr,
                            "mp_check: FENCE %s at %.3f has fence %llu, not above %llu of an ownership begun more than "
                            "%.0f ms before\n",
                            owns[i].who, owns[i].from, owns[i].fence, below, order_window);
                fence_viol++;
            }
        } else if (i > 0 && owns[i].fence <= max_fence) {
            for (j = 0; j < i; j++)
                if (owns[j].fence == owns[i].fence) {
                    repeated++;
                    break;
                }
            if (owns[i].fence == max_fence && strcmp(owns[i - 1].who, owns[i].who) == 0) reacquired++;
            if (fence_viol < 10)
                fprintf(stderr, "mp_check: FENCE %s [%.3f, %.3f] fence %llu, not above %s [%.3f, %.3f] fence %llu begun before it\n",
                        owns[i].who, owns[i].from, owns[i].to, owns[i].fence, owns[imax].who, owns[imax].from,
                        owns[imax].to, max_fence);
            fence_viol++;
        }
        if (owns[i].fence > max_fence) {
            max_fence = owns[i].fence;
            imax = i;
        }
        if (i > 0) {
            double gap = owns[i].from - owns[i - 1].to;
            if (strcmp(owns[i].who, owns[i - 1].who) != 0) handoffs++;
            if (owns[i - 1].to < 1e299) {
                if (ngaps == 0 || gap < gap_min) gap_min = gap;
                if (ngaps == 0 || gap > gap_max) gap_max = gap;
                gap_sum += gap;
                ngaps++;
            }
        }
        if (owns[i].to < 1e299) held += owns[i].to - owns[i].from;
    }
    if (permits > 1) modes |= 1;

    /* Every work line inside its own ownership (same fence), inside nobody else's. */
    for (i = 0; i < nev; i++) {
        ev *e = &evs[i];
        char key[ID_MAX + 24];
        int mine = 0, other = -1, mine_shared = 0;
        if (e->kind != E_WORK) continue;
        snprintf(key, sizeof key, "%ld/%s", e->pid, e->who);
        for (j = 0; j < nown; j++) {
            const own *o = &owns[j];
            if (strcmp(o->who, key) == 0 && o->fence == e->fence && e->t >= o->from && e->t <= o->to + WORK_SLACK_MS) {
                mine = 1;
                mine_shared = o->shared;
            }
        }
        /* another's ownership excludes this work where the two cannot share (a semaphore's
           count of holders is checked above) */
        for (j = 0; j < nown && permits == 1; j++) {
            const own *o = &owns[j];
            if (strcmp(o->who, key) != 0 && !(mine && mine_shared && o->shared) && e->t > o->from && e->t < o->to)
                other = (int)j;
        }
        if (!mine || other >= 0) {
            if (acts < 10) {
                if (!mine)
                    fprintf(stderr, "mp_check: ACTS %s worked at %.3f (fence %llu) outside its own ownership\n", key,
                            e->t, e->fence);
                else
                    fprintf(stderr, "mp_check: ACTS %s worked at %.3f (fence %llu) while %s owned [%.3f, %.3f]\n", key,
                            e->t, e->fence, owns[other].who, owns[other].from, owns[other].to);
            }
            acts++;
        }
    }
    /* Stale writes against a fenced resource, replayed in time order (a mutex: one writer). */
    if (!modes) {
        unsigned long long top = 0;
        int stale = 0, refused = 0, before = 0, through = 0;
        for (i = 0; i < nev; i++) {
            ev *e = &evs[i];
            char key[ID_MAX + 24];
            double mine_from = -1;
            int later = 0, later_low = 0;
            if (e->kind != E_WORK) continue;
            snprintf(key, sizeof key, "%ld/%s", e->pid, e->who);
            for (j = 0; j < nown; j++)
                if (strcmp(owns[j].who, key) == 0 && owns[j].fence == e->fence && owns[j].from <= e->t) mine_from = owns[j].from;
            for (j = 0; j < nown; j++)
                if (strcmp(owns[j].who, key) != 0 && owns[j].from > mine_from && owns[j].from < e->t) {
                    later = 1;
                    if (owns[j].fence <= e->fence) later_low = 1;
                }
            if (later) stale++;
            if (e->fence < top) {
                if (later) refused++;
            } else {
                top = e->fence;
                if (later && later_low) through++;
                else if (later) before++;
            }
        }
        printf("mp_check: stale writes %d: refused by the fence %d, accepted before the later owner's first write %d, "
               "let through %d\n",
               stale, refused, before, through);
        stale_accepted += through;
        stale_accepted += check_fenced_writes();
    }
    if (need_inspect && !inspected) {
        fprintf(stderr, "mp_check: LEAKED: no inspector line (the final check did not run)\n");
        leaked++;
    }

    printf("mp_check: %zu events, %zu ownerships by %d contenders, %d handoffs, %d same-fence re-acquisitions (violations), "
           "fences up to %llu\n",
           nev, nown, contenders, handoffs, reacquired, max_fence);
    printf("mp_check: span %.0f ms, owned %.1f%% of it; gap between ownerships min %.1f / avg %.1f / max %.1f ms\n",
           last - first, last > first ? 100.0 * held / (last - first) : 0.0, gap_min, ngaps ? gap_sum / ngaps : 0.0,
           gap_max);
    printf("mp_check: longest time without an owner %.1f ms\n", longest_without_owner(wfirst < 0 ? first : wfirst, wfirst < 0 ? last : wlast));
    if (porcupine && !write_porcupine(porcupine, first)) errors++;
    printf("mp_check: %d work lines, %d processes killed, %d late release notices (frozen owners, harmless), "
           "smallest handoff margin %.1f ms\n",
           nwork, nkilled, late_notices, margin_min);
    printf("mp_check: faults injected %d", nfaults);
    for (i = 0; i < (size_t)nfault_kinds; i++) printf("%s%s %d", i ? ", " : " (", fault_names[i], fault_counts[i]);
    printf("%s\n", nfault_kinds ? ")" : "");
    if (modes)
        printf("mp_check: permits %ld, %d exclusive ownerships, at most %d holders at once (%d readers)\n", permits,
               nexclusive, max_concurrent, max_readers);
    printf("mp_check: ownerships %zu, overlaps %d, fence violations %d (repeated fences %d), stale writes accepted %d, "
           "leaked locks %d, acts while not owner %d, protocol errors %d\n",
           nown, overlaps, fence_viol, repeated, stale_accepted, leaked, acts + worker_viol, errors);
    if ((long)nown < min_own) printf("mp_check: FAIL: %zu ownerships, wanted at least %ld\n", nown, min_own);
    if (contenders < min_contenders)
        printf("mp_check: FAIL: %d contenders owned, wanted at least %ld\n", contenders, min_contenders);
    if (max_concurrent < min_concurrent)
        printf("mp_check: FAIL: at most %d holders at once, wanted a moment with %ld\n", max_concurrent, min_concurrent);
    if (nexclusive < min_exclusive)
        printf("mp_check: FAIL: %d exclusive ownerships, wanted at least %ld\n", nexclusive, min_exclusive);
    free(evs);
    free(owns);
    if (overlaps || fence_viol || stale_accepted || errors || leaked || acts || worker_viol || (long)nown < min_own ||
        contenders < min_contenders || max_concurrent < min_concurrent || nexclusive < min_exclusive) {
        printf("mp_check: FAIL\n");
        return 1;
    }
    printf("mp_check: OK\n");
    return 0;
}
