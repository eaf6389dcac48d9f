/* The kit on the in-memory backend: every simulated process opens its own client of one
   shared store (real clock). The fenced write keeps the application's data in a small table
   of this file, written only through simba_memory_check_fence. */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"
#include "kit.h"

#include <stdio.h>
#include <string.h>

#define KV_MAX 64
typedef struct kit_mem {
    simba_memstore *st;
    int n;
    char key[KV_MAX][SIMBA_NAME_MAX + 40], val[KV_MAX][64];
} kit_mem;

typedef struct kv_write {
    kit_mem *m;
    const char *key, *value;
} kv_write;

static simba_result open_memory(simba_loop *loop, void *ctx, simba_backend **out) {
    return simba_memory_open(loop, ((kit_mem *)ctx)->st, out);
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

static int kv_find(const kit_mem *m, const char *key) {
    int i;
    for (i = 0; i < m->n; i++)
        if (strcmp(m->key[i], key) == 0) return i;
    return -1;
}

/* runs under the store's lock, only when the fence holds */
static void kv_put(void *user) {
    kv_write *w = (kv_write *)user;
    int i = kv_find(w->m, w->key);
    if (i < 0 && w->m->n < KV_MAX) {
        i = w->m->n++;
        snprintf(w->m->key[i], sizeof w->m->key[i], "%s", w->key);
    }
    if (i >= 0) snprintf(w->m->val[i], sizeof w->m->val[i], "%s", w->value);
}

static simba_result fenced_write(simba_loop *loop, simba_backend *be, void *ctx, const char *name, uint64_t fence,
                                 const char *key, const char *value, char *err, size_t errcap) {
    kit_mem *m = (kit_mem *)ctx;
    char k[SIMBA_NAME_MAX + 40];
    kv_write w;
    (void)loop;
    (void)be;
    snprintf(k, sizeof k, "%s/%s", name, key);
    w.m = m;
    w.key = k;
    w.value = value;
    return simba_memory_check_fence(m->st, name, fence, kv_put, &w, err, errcap);
}

static int fenced_read(simba_loop *loop, simba_backend *be, void *ctx, const char *name, const char *key, char *out,
                       size_t cap, char *err, size_t errcap) {
    kit_mem *m = (kit_mem *)ctx;
    char k[SIMBA_NAME_MAX + 40];
    int i;
    (void)loop;
    (void)be;
    (void)err;
    (void)errcap;
    snprintf(k, sizeof k, "%s/%s", name, key);
    i = kv_find(m, k);
    snprintf(out, cap, "%s", i >= 0 ? m->val[i] : "");
    return 0;
}

int main(int argc, char **argv) {
    static kit_mem m;
    kit_backend kb;
    int rc;
    memset(&kb, 0, sizeof kb);
    if (simba_memstore_new(NULL, &m.st) != SIMBA_OK) return 2;
    kb.name = "memory";
    kb.open = open_memory;
    kb.ctx = &m;
    kb.ttl_ms = 1000;
    kb.transition_ms = 500;
    kb.multi_ms = 10000;
    kb.slow = slow_memory;
    kb.mute = mute_memory;
    kb.fenced_write = fenced_write;
    kb.fenced_read = fenced_read;
    rc = kit_run(&kb, argc, argv);
    simba_memstore_free(m.st);
    return rc;
}
