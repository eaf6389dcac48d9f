#define SIMBA_IMPLEMENTATION
#include "simba_sql.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t quit;
static void on_signal(int sig) { (void)sig; quit = 1; }

static void up(simba_service *svc, const simba_state *st, void *user) {
    (void)svc; (void)user;
    printf("leader, fence %llu\n", (unsigned long long)st->after->fence);
}
static void down(simba_service *svc, const simba_state *st, void *user) {
    (void)svc; (void)st; (void)user;
    printf("not leader\n");
}

int main(void) {
    simba_loop *loop;  simba_backend *be;  simba_service *svc;
    simba_sql_desc db;  simba_contend_desc cd;
    setvbuf(stdout, NULL, _IOLBF, 0);                 /* a line at a time, even into a file */
    signal(SIGINT, on_signal);  signal(SIGTERM, on_signal);
    memset(&db, 0, sizeof db);  db.path = "locks.db";
    memset(&cd, 0, sizeof cd);  cd.mutex = "orders-leader";
    cd.ttl_ms = 10000;  cd.transition_ms = 6000;  cd.on_acquired = up;  cd.on_released = down;
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return 1;
    if (simba_sql_open(loop, &db, &be) != SIMBA_OK || simba_contend(loop, be, &cd, &svc) != SIMBA_OK
        || simba_start(svc) != SIMBA_OK) {
        fprintf(stderr, "%s\n", simba_loop_errmsg(loop));
        return 1;
    }
    while (!quit) simba_wait(loop, 1000);             /* or call simba_poll(loop) once per frame */
    simba_loop_close(loop, 2000);     /* releases the mutex, confirmed: the next process leads at once */
    return 0;
}
