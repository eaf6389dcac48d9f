/* mp_check.c -- checks the merged logs of mp_worker processes.
 *
 *   mp_check [--min-ownerships N] [--min-contenders K] LOG... (or - / nothing for stdin)
 *
 * Each line: <pid> <contender> <fence> acquired|released <monotonic ms>.
 * Builds the ownership intervals [acquired, released] per contender and reports
 *   overlaps          two intervals of different contenders that intersect (more than
 *                     touching): mutual exclusion was broken;
 *   fence violations  an ownership whose fence is <= that of an ownership that began
 *                     earlier: fences must strictly increase;
 *   protocol errors   acquired twice without a release, a release without an acquire or
 *                     with another fence, an ownership never released, a bad line.
 * Prints its figures and exits 1 on any violation (or fewer ownerships / contenders than
 * asked for), 0 otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_MAX 160

typedef struct ev {
    long pid;
    char who[ID_MAX];
    unsigned long long fence;
    int acquired; /* 1 acquired, 0 released */
    double t;
    int order; /* input order, to keep equal times stable */
} ev;

typedef struct own {
    char who[ID_MAX + 24]; /* "pid/contender" */
    unsigned long long fence;
    double from, to; /* to < 0: never released */
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

static void read_file(FILE *f, const char *name) {
    char line[512], what[32];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        ev e;
        lineno++;
        if (line[0] == '\n' || line[0] == '#') continue;
        memset(&e, 0, sizeof e);
        if (sscanf(line, "%ld %159s %llu %31s %lf", &e.pid, e.who, &e.fence, what, &e.t) != 5 ||
            (strcmp(what, "acquired") != 0 && strcmp(what, "released") != 0)) {
            fprintf(stderr, "mp_check: %s:%d: bad line: %s", name, lineno, line);
            errors++;
            continue;
        }
        e.acquired = strcmp(what, "acquired") == 0;
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

int main(int argc, char **argv) {
    long min_own = 1, min_contenders = 1;
    size_t i, j;
    int nfiles = 0, overlaps = 0, fence_viol = 0, handoffs = 0, contenders = 0;
    double first = 0, last = 0, held = 0, gap_min = 0, gap_max = 0, gap_sum = 0;
    int ngaps = 0;
    unsigned long long max_fence = 0;

    for (i = 1; i < (size_t)argc; i++) {
        if (strcmp(argv[i], "--min-ownerships") == 0 && i + 1 < (size_t)argc) {
            min_own = atol(argv[++i]);
        } else if (strcmp(argv[i], "--min-contenders") == 0 && i + 1 < (size_t)argc) {
            min_contenders = atol(argv[++i]);
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
        own *open_own = NULL;
        snprintf(key, sizeof key, "%ld/%s", e->pid, e->who);
        for (j = nown; j-- > 0;)
            if (strcmp(owns[j].who, key) == 0) {
                if (owns[j].to < 0) open_own = &owns[j];
                break;
            }
        if (e->acquired) {
            if (open_own) {
                fprintf(stderr, "mp_check: %s acquired at %.3f while already owning since %.3f\n", key, e->t,
                        open_own->from);
                errors++;
                open_own->to = e->t;
            }
            owns = (own *)grow(owns, &cap_own, nown + 1, sizeof *owns);
            memset(&owns[nown], 0, sizeof owns[nown]);
            snprintf(owns[nown].who, sizeof owns[nown].who, "%s", key);
            owns[nown].fence = e->fence;
            owns[nown].from = e->t;
            owns[nown].to = -1;
            nown++;
        } else if (!open_own) {
            fprintf(stderr, "mp_check: %s released at %.3f without owning\n", key, e->t);
            errors++;
        } else {
            if (open_own->fence != e->fence) {
                fprintf(stderr, "mp_check: %s released fence %llu but acquired fence %llu\n", key, e->fence,
                        open_own->fence);
                errors++;
            }
            open_own->to = e->t;
        }
    }
    if (nev) {
        first = evs[0].t;
        last = evs[nev - 1].t;
    }
    for (i = 0; i < nown; i++)
        if (owns[i].to < 0) {
            fprintf(stderr, "mp_check: %s acquired at %.3f (fence %llu) and never released\n", owns[i].who,
                    owns[i].from, owns[i].fence);
            errors++;
            owns[i].to = 1e300; /* counts as held to the end for the overlap check */
        }
    qsort(owns, nown, sizeof *owns, by_from);

    for (i = 0; i < nown; i++) {
        int seen = 0;
        for (j = 0; j < i; j++) {
            if (strcmp(owns[j].who, owns[i].who) == 0) seen = 1;
            /* intervals that only touch are not an overlap */
            if (owns[j].to > owns[i].from && strcmp(owns[j].who, owns[i].who) != 0) {
                if (overlaps < 10)
                    fprintf(stderr, "mp_check: OVERLAP %s [%.3f, %.3f] fence %llu with %s [%.3f, %.3f] fence %llu\n",
                            owns[j].who, owns[j].from, owns[j].to, owns[j].fence, owns[i].who, owns[i].from,
                            owns[i].to, owns[i].fence);
                overlaps++;
            }
        }
        if (!seen) contenders++;
        if (i > 0 && owns[i].fence <= max_fence) {
            if (fence_viol < 10)
                fprintf(stderr, "mp_check: FENCE %s at %.3f has fence %llu, not above %llu seen before\n", owns[i].who,
                        owns[i].from, owns[i].fence, max_fence);
            fence_viol++;
        }
        if (owns[i].fence > max_fence) max_fence = owns[i].fence;
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

    printf("mp_check: %zu events, %zu ownerships by %d contenders, %d handoffs, fences up to %llu\n", nev, nown,
           contenders, handoffs, max_fence);
    printf("mp_check: span %.0f ms, owned %.1f%% of it; gap between ownerships min %.1f / avg %.1f / max %.1f ms\n",
           last - first, last > first ? 100.0 * held / (last - first) : 0.0, gap_min,
           ngaps ? gap_sum / ngaps : 0.0, gap_max);
    printf("mp_check: overlaps %d, fence violations %d, protocol errors %d\n", overlaps, fence_viol, errors);
    if ((long)nown < min_own) printf("mp_check: FAIL: %zu ownerships, wanted at least %ld\n", nown, min_own);
    if (contenders < min_contenders)
        printf("mp_check: FAIL: %d contenders owned, wanted at least %ld\n", contenders, min_contenders);
    free(evs);
    free(owns);
    if (overlaps || fence_viol || errors || (long)nown < min_own || contenders < min_contenders) {
        printf("mp_check: FAIL\n");
        return 1;
    }
    printf("mp_check: OK\n");
    return 0;
}
