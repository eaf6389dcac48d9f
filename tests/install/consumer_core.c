/* A program that uses only simba.h (pkg-config simba, CMake simba::core): wins a mutex on the
   memory backend, stops, and prints the version, fence and release reason it saw. */
#define SIMBA_IMPLEMENTATION
#include <simba.h>
#include <simba_memory.h>

#include <stdio.h>
#include <string.h>

static simba_reason released_why = SIMBA_REASON_NONE;
static void released(simba_service *svc, const simba_state *st, void *user) {
    (void)svc;
    (void)user;
    released_why = st->reason;
}

int main(void) {
    simba_memstore *store;
    simba_loop *loop;
    simba_backend *be;
    simba_service *svc;
    simba_contend_desc d;
    simba_stats st;
    uint64_t fence = 0;
    int i;
    if (simba_memstore_new(NULL, &store) || simba_loop_new(NULL, &loop) || simba_memory_open(loop, store, &be)) return 1;
    memset(&d, 0, sizeof d);
    d.mutex = "consumer";
    d.on_released = released;
    if (simba_contend(loop, be, &d, &svc) || simba_start(svc)) return 1;
    for (i = 0; i < 100 && !simba_is_owner(svc); i++) simba_wait(loop, 10);
    fence = simba_fence(svc);
    simba_stop(svc);
    for (i = 0; i < 100 && simba_service_status(svc) != SIMBA_INITIAL; i++) simba_wait(loop, 10);
    st.size = sizeof st;
    if (simba_service_stats(svc, &st) != SIMBA_OK) return 1;
    printf("simba %s fence %llu released %s acquisitions %llu\n", SIMBA_VERSION, (unsigned long long)fence,
           simba_reason_str(released_why), (unsigned long long)st.acquisitions);
    simba_loop_free(loop);
    simba_memstore_free(store);
    return fence > 0 && released_why == SIMBA_REASON_STOPPED && st.acquisitions == 1 ? 0 : 1;
}
