# diff.mk -- the differential test (tests/kit_diff.c): each store against the memory store.
#   make diff-long           100,000 steps on every store (servers from scripts/*-start.sh on
#                            SIMBA_REDIS_PORT, SIMBA_ZK_PORT, SIMBA_PG_PORT, SIMBA_MYSQL_PORT)
#   make diff-long DIFF=sql  one store (memory sql redis zk pg mysql); SEED=S replays a seed
.PHONY: diff-long
DIFF       ?= sql redis zk pg mysql
DIFF_STEPS ?= 100000
DIFF_BINS  = $(B)/kit_diff_memory $(B)/kit_diff_sql $(B)/kit_diff_redis $(B)/kit_diff_zk $(B)/kit_diff_pg $(B)/kit_diff_mysql
all: $(DIFF_BINS)
# make test-<group> builds its store's differential test (tests/run.sh runs it there)
test-core: $(B)/kit_diff_memory
test-sql: $(B)/kit_diff_sql
test-redis: $(B)/kit_diff_redis
test-zk: $(B)/kit_diff_zk
test-pg: $(B)/kit_diff_pg
test-mysql: $(B)/kit_diff_mysql
$(B)/kit_diff_memory: tests/kit_diff.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/kit_diff.c -lpthread
$(B)/kit_diff_sql: tests/kit_diff.c $(HDR_SQL) | $(B)
	$(CC) $(CFLAGS) -DDIFF_SQL -o $@ tests/kit_diff.c -lsqlite3 -lpthread
$(B)/kit_diff_redis: tests/kit_diff.c $(HDR_REDIS) simba_memory.h | $(B)
	$(CC) $(CFLAGS) -DDIFF_REDIS -o $@ tests/kit_diff.c -lhiredis -lpthread
$(B)/kit_diff_zk: tests/kit_diff.c $(HDR_ZK) simba_memory.h | $(B)
	$(CC) $(CFLAGS) $(ZKINC) -DDIFF_ZK -o $@ tests/kit_diff.c -lzookeeper_mt -lpthread
$(B)/kit_diff_pg: tests/kit_diff.c $(HDR_PG) simba_memory.h | $(B)
	$(CC) $(CFLAGS) $(PGINC) -DDIFF_PG -o $@ tests/kit_diff.c -lpq -lpthread
$(B)/kit_diff_mysql: tests/kit_diff.c simba.h simba_mysql.h simba_memory.h | $(B)
	$(CC) $(CFLAGS) $(MYINC) -DDIFF_MYSQL -o $@ tests/kit_diff.c $(MYLIB) -lpthread
diff-long: $(DIFF:%=$(B)/kit_diff_%)
	@for s in $(DIFF); do $(B)/kit_diff_$$s --steps $(DIFF_STEPS) $(if $(SEED),--seed $(SEED)) || exit 1; done
