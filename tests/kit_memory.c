/* The kit on the in-memory backend: every simulated process opens its own client of one
   shared store (real clock). */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"
#include "kit.h"

#include <string.h>

static simba_result open_memory(simba_loop *loop, void *ctx, simba_backend **out) {
    return simba_memory_open(loop, (simba_memstore *)ctx, out);
}

static void slow_memory(simba_backend *be, int64_t ms) {
    simba_memory_fault f;
    memset(&f, 0, sizeof f);
    f.delay_ms = ms;
    simba_memory_fault_set(be, &f);
}

static void mute_memory(simba_backend *be, int on) {
    simba_memory_fault f;
    memset(&f, 0, sizeof f);
    f.hang = on;
    simba_memory_fault_set(be, &f);
}

int main(int argc, char **argv) {
    simba_memstore *st;
    kit_backend kb = {0};
    int rc;
    if (simba_memstore_new(NULL, &st) != SIMBA_OK) return 2;
    kb.name = "memory";
    kb.open = open_memory;
    kb.ctx = st;
    kb.ttl_ms = 1000;
    kb.transition_ms = 500;
    kb.multi_ms = 10000;
    kb.slow = slow_memory;
    kb.mute = mute_memory;
    rc = kit_run(&kb, argc, argv);
    simba_memstore_free(st);
    return rc;
}
