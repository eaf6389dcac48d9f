/* fuzz_names.c -- mutex names and contender ids: simba_name_check / simba_id_check, then a
 * contender and an observer with those strings on the memory backend.
 * Input: "<name>\n<id>" (no newline: the whole input is the name, the id is the default).
 * Invariants: contend succeeds exactly when both checks pass; a contender that starts on a
 * free mutex owns it after a poll; nothing leaks, nothing crashes. */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"
#include <assert.h>
#include <stdlib.h>
#include <string.h>

static simba_memstore *st;
static simba_loop *loop;
static simba_backend *be;
static unsigned runs;

static void setup(void) {
    if (loop && runs % 4096 != 0) return;
    if (loop) { /* start over now and then: the store keeps one record per name */
        simba_loop_free(loop);
        simba_memstore_free(st);
    }
    if (simba_memstore_new(NULL, &st) != SIMBA_OK || simba_loop_new(NULL, &loop) != SIMBA_OK ||
        simba_memory_open(loop, st, &be) != SIMBA_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char *buf = (char *)malloc(size + 1), *name, *id = NULL, *nl;
    simba_contend_desc cd;
    simba_observe_desc od;
    simba_service *svc = NULL, *obs = NULL;
    int name_ok, id_ok, rc, i;
    runs++;
    setup();
    memcpy(buf, data, size);
    buf[size] = 0;
    name = buf;
    nl = memchr(buf, '\n', size);
    if (nl) {
        *nl = 0;
        id = nl + 1;
    }
    name_ok = simba_name_check(name) == SIMBA_OK;
    id_ok = !id || simba_id_check(id) == SIMBA_OK;
    memset(&cd, 0, sizeof cd);
    cd.mutex = name;
    cd.contender_id = id;
    cd.ttl_ms = 1000;
    cd.transition_ms = 500;
    rc = simba_contend(loop, be, &cd, &svc);
    assert((rc == SIMBA_OK) == (name_ok && id_ok));
    memset(&od, 0, sizeof od);
    od.mutex = name;
    rc = simba_observe(loop, be, &od, &obs);
    assert((rc == SIMBA_OK) == name_ok);
    if (svc) {
        assert(simba_start(svc) == SIMBA_OK);
        if (obs) assert(simba_start(obs) == SIMBA_OK);
        /* A poll yields after its time budget (SIMBA__POLL_BUDGET_US), which a loaded host or a
           sanitizer build can exhaust: keep polling while it asks to be called again at once. */
        for (i = 0; i < 64 && !simba_is_owner(svc); i++) simba_poll(loop);
        assert(simba_is_owner(svc));
        assert(strcmp(simba_service_mutex(svc), name) == 0);
        if (id) assert(strcmp(simba_service_contender_id(svc), id) == 0);
        simba_service_free(svc);
    }
    if (obs) simba_service_free(obs);
    for (i = 0; i < 64 && simba_poll(loop) == 0; i++) {} /* the release goes out and is answered */
    free(buf);
    return 0;
}
