/* A second translation unit that only sees the declarations: links against two_tu_impl.c. */
#include "../simba.h"
#include "../simba_memory.h"
#include <stdio.h>

int main(void) {
    simba_loop *loop;
    simba_memstore *st;
    simba_backend *be;
    simba_service *svc;
    simba_contend_desc d = {0};
    int i, ok;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK || simba_memstore_new(NULL, &st) != SIMBA_OK) return 1;
    if (simba_memory_open(loop, st, &be) != SIMBA_OK) return 1;
    d.mutex = "two-tu";
    d.ttl_ms = 1000;
    if (simba_contend(loop, be, &d, &svc) != SIMBA_OK || simba_start(svc) != SIMBA_OK) return 1;
    for (i = 0; i < 10 && !simba_is_owner(svc); i++) simba_wait(loop, 10);
    ok = simba_is_owner(svc);
    simba_loop_free(loop);
    simba_memstore_free(st);
    printf("two_tu: %d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
