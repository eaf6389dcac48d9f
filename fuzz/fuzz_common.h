/* fuzz_common.h -- pieces the Redis fuzz targets share. */
#ifndef SIMBA_FUZZ_COMMON_H
#define SIMBA_FUZZ_COMMON_H
#include <stdlib.h>
#include <string.h>

/* An observer and a contender on mutex "m", so that what the fuzzer pushes goes through the
   core's event handling for both kinds of service. */
static void fuzz_watch_m(simba_loop *loop, simba_backend *be, simba_service **obs, simba_service **con) {
    simba_observe_desc od;
    simba_contend_desc cd;
    memset(&od, 0, sizeof od);
    od.mutex = "m";
    memset(&cd, 0, sizeof cd);
    cd.mutex = "m";
    cd.contender_id = "me";
    cd.ttl_ms = 1000;
    cd.transition_ms = 500;
    if (simba_observe(loop, be, &od, obs) != SIMBA_OK || simba_start(*obs) != SIMBA_OK ||
        simba_contend(loop, be, &cd, con) != SIMBA_OK || simba_start(*con) != SIMBA_OK)
        abort();
}

/* hiredis 0.14 allocates whatever a "*<n>" or "$<n>" header announces before the data
   arrives: that is hiredis' business (and the server's), not simba's; keep it small. Any
   '*' or '$' counts, not only at a line start: hiredis does not check a bulk's trailing CRLF,
   so a header can start mid-line. */
static int huge_count(const unsigned char *d, size_t n) {
    size_t i;
    for (i = 0; i + 1 < n; i++)
        if (d[i] == '*' || d[i] == '$') {
            long v = 0;
            size_t k = i + 1;
            if (k < n && d[k] == '-') continue;
            for (; k < n && d[k] >= '0' && d[k] <= '9' && v < 1000000; k++) v = v * 10 + (d[k] - '0');
            if (v > 4096) return 1;
        }
    return 0;
}
#endif
