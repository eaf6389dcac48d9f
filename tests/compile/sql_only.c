/* SIMBA_SQL_IMPLEMENTATION alone instantiates the SQLite backend and the core it uses, and
   nothing else (no memory backend): this links with -lsqlite3 and no other backend library. */
#define SIMBA_SQL_IMPLEMENTATION
#include "simba_sql.h"
#include "simba_sql.h" /* a second include changes nothing */

#ifdef SIMBA__MEMORY_IMPLEMENTED
#error "the memory backend was instantiated without being asked for"
#endif

int main(void) {
    simba_loop *loop = NULL;
    simba_backend *be = NULL;
    simba_sql_desc d;
    int ok;
    memset(&d, 0, sizeof d);
    d.path = ":memory:";
    ok = simba_loop_new(NULL, &loop) == SIMBA_OK && simba_sql_open(loop, &d, &be) == SIMBA_OK;
    if (loop) simba_loop_free(loop);
    return ok ? 0 : 1;
}
