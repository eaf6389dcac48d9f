/* The README's Install snippets build this as app.c: the SQLite backend only (pkg-config
   simba-sqlite, CMake simba::sqlite). Takes a lock in the SQLite file argv[1]. */
#define SIMBA_IMPLEMENTATION
#include "simba_sql.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    simba_loop *loop;
    simba_backend *be;
    simba_locker *lk;
    simba_sql_desc sd;
    uint64_t fence;
    if (argc != 2) {
        fprintf(stderr, "usage: %s SQLITE_FILE\n", argv[0]);
        return 2;
    }
    if (simba_loop_new(NULL, &loop) != SIMBA_OK) return 1;
    memset(&sd, 0, sizeof sd);
    sd.path = argv[1];
    if (simba_sql_open(loop, &sd, &be) != SIMBA_OK || simba_lock(loop, be, "app", 5000, &lk) != SIMBA_OK) {
        fprintf(stderr, "app: %s\n", simba_loop_errmsg(loop));
        return 1;
    }
    fence = simba_locker_fence(lk);
    printf("app: simba %s, lock held with fence %llu\n", SIMBA_VERSION, (unsigned long long)fence);
    simba_unlock(lk);
    simba_loop_free(loop);
    return fence > 0 ? 0 : 1;
}
