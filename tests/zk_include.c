/* zk_include.c -- simba_zk.h built exactly as its header and the README say: no -I, no -D,
   header first, C99 or C++11 with -Wall -Wextra -Wpedantic -Werror, -lzookeeper_mt -lpthread.
   It opens a backend towards a closed port and frees it: no server needed. */
#define SIMBA_IMPLEMENTATION
#include "../simba_zk.h"

#include <stdio.h>

int main(void) {
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_zk_desc d;
    simba_zk_stats st;
    memset(&d, 0, sizeof d);
    d.hosts = "127.0.0.1:1";
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return 1;
    if (simba_zk_open(loop, &d, &be) != SIMBA_OK || simba_zk_stats_get(be, &st) != SIMBA_OK) {
        fprintf(stderr, "zk_include: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    simba_poll(loop);
    simba_loop_free(loop);
    printf("zk_include: ok (sessions %llu)\n", (unsigned long long)st.sessions);
    return 0;
}
