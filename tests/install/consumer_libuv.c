/* A program that drives simba from libuv through the installed adapter header
   (pkg-config simba-libuv, CMake simba::libuv): wins a mutex on the memory backend from
   uv_run, stops it from its on_acquired, and leaves uv_run when the release is done. */
#define SIMBA_IMPLEMENTATION
#include <simba.h>
#include <simba_memory.h>
#include <simba/adapters/simba_libuv.h>

#include <stdio.h>
#include <string.h>

static uint64_t fence;
static simba_reason released_why = SIMBA_REASON_NONE;

static void acquired(simba_service *svc, const simba_state *st, void *user) {
    (void)user;
    fence = st->after->fence;
    simba_stop(svc);
}
static void released(simba_service *svc, const simba_state *st, void *user) {
    (void)svc;
    released_why = st->reason;
    uv_stop((uv_loop_t *)user);
}

int main(void) {
    uv_loop_t uv;
    simba_memstore *store;
    simba_loop *loop;
    simba_backend *be;
    simba_service *svc;
    simba_contend_desc d;
    simba_uv *a;
    if (uv_loop_init(&uv) != 0) return 1;
    if (simba_memstore_new(NULL, &store) || simba_loop_new(NULL, &loop) || simba_memory_open(loop, store, &be)) return 1;
    memset(&d, 0, sizeof d);
    d.mutex = "consumer-libuv";
    d.on_acquired = acquired;
    d.on_released = released;
    d.user_data = &uv;
    if (simba_contend(loop, be, &d, &svc) || simba_uv_attach(loop, &uv, &a) || simba_start(svc)) return 1;
    uv_run(&uv, UV_RUN_DEFAULT);
    simba_uv_detach(a);
    uv_run(&uv, UV_RUN_DEFAULT); /* the adapter's close callbacks */
    printf("simba %s libuv fence %llu released %s\n", SIMBA_VERSION, (unsigned long long)fence, simba_reason_str(released_why));
    simba_loop_free(loop);
    simba_memstore_free(store);
    return uv_loop_close(&uv) == 0 && fence > 0 && released_why == SIMBA_REASON_STOPPED ? 0 : 1;
}
