/* A program that uses every backend header (pkg-config simba-sqlite simba-redis simba-zk
   simba-pg, CMake simba::sqlite simba::redis simba::zk simba::pg): wins a mutex in the SQLite
   file argv[1], and opens and frees a Redis, a ZooKeeper and a PostgreSQL backend (no server
   needed: they connect asynchronously), so that every library is really linked and called. */
#define SIMBA_IMPLEMENTATION
#include <simba_sql.h>
#include <simba_redis.h>
#include <simba_zk.h>
#include <simba_pg.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    simba_loop *loop;
    simba_backend *sql, *redis, *zk, *pg;
    simba_locker *lk;
    simba_sql_desc sd;
    simba_redis_desc rd;
    simba_zk_desc zd;
    simba_pg_desc pd;
    uint64_t fence;
    if (argc != 2) {
        fprintf(stderr, "usage: %s SQLITE_FILE\n", argv[0]);
        return 2;
    }
    if (simba_loop_new(NULL, &loop)) return 1;
    memset(&sd, 0, sizeof sd);
    sd.path = argv[1];
    if (simba_sql_open(loop, &sd, &sql) != SIMBA_OK) return 1;
    if (simba_lock(loop, sql, "consumer", 5000, &lk) != SIMBA_OK) return 1;
    fence = simba_locker_fence(lk);
    simba_unlock(lk);
    memset(&rd, 0, sizeof rd);
    rd.host = "127.0.0.1";
    rd.port = 1; /* nobody listens: the connect fails later, asynchronously */
    memset(&zd, 0, sizeof zd);
    zd.hosts = "127.0.0.1:1";
    if (simba_redis_open(loop, &rd, &redis) != SIMBA_OK) return 1;
    if (simba_zk_open(loop, &zd, &zk) != SIMBA_OK) return 1;
    memset(&pd, 0, sizeof pd);
    pd.hostaddr = "127.0.0.1";
    pd.port = 1;
    if (simba_pg_open(loop, &pd, &pg) != SIMBA_OK) return 1;
    simba_poll(loop);
    if (simba_backend_free(redis) != SIMBA_OK || simba_backend_free(zk) != SIMBA_OK || simba_backend_free(pg) != SIMBA_OK)
        return 1;
    printf("simba %s sqlite fence %llu, redis, zk and pg backends opened and freed\n", SIMBA_VERSION, (unsigned long long)fence);
    simba_loop_free(loop);
    return fence > 0 ? 0 : 1;
}
