// The four headers, implementation included, compiled as C++ (make builds it with -Wall
// -Wextra -Wpedantic -Werror); running it exercises the memory backend once.
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"
#include "../simba_sql.h"
#include "../simba_redis.h"
#include "../simba_zk.h"
#include "../simba_pg.h"
#include <cstdio>

int main() {
    simba_loop *loop = nullptr;
    simba_memstore *st = nullptr;
    simba_backend *be = nullptr;
    simba_service *svc = nullptr;
    simba_contend_desc d = {};
    int ok;
    if (simba_loop_new(nullptr, &loop) != SIMBA_OK || simba_memstore_new(nullptr, &st) != SIMBA_OK) return 1;
    if (simba_memory_open(loop, st, &be) != SIMBA_OK) return 1;
    d.mutex = "cxx";
    d.ttl_ms = 1000;
    if (simba_contend(loop, be, &d, &svc) != SIMBA_OK || simba_start(svc) != SIMBA_OK) return 1;
    for (int i = 0; i < 10 && !simba_is_owner(svc); i++) simba_wait(loop, 10);
    ok = simba_is_owner(svc);
    simba_loop_free(loop);
    simba_memstore_free(st);
    std::printf("cxx_check: %d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
