/* The README's example, kept compiling by `make all` (built, not run: it loops forever). */
#define SIMBA_IMPLEMENTATION
#include "simba_sql.h"
#include <stdio.h>

static void up(simba_service *s, const simba_state *st, void *u)   { printf("leader, fence %llu\n", (unsigned long long)st->after->fence); }
static void down(simba_service *s, const simba_state *st, void *u) { printf("not leader\n"); }

int main(void) {
    simba_loop *loop;  simba_backend *be;  simba_service *svc;
    simba_loop_new(&(simba_loop_desc){0}, &loop);
    simba_sql_open(loop, &(simba_sql_desc){ .path = "locks.db" }, &be);
    simba_contend(loop, be, &(simba_contend_desc){ .mutex = "orders-leader",
        .ttl_ms = 10000, .transition_ms = 6000, .on_acquired = up, .on_released = down }, &svc);
    simba_start(svc);
    for (;;) simba_wait(loop, -1);        /* or call simba_poll(loop) once per frame */
}
