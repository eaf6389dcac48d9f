# bench.mk -- `make bench` builds bench/*.c and runs scripts/bench.sh, which starts
# its own redis-server, ZooKeeper, PostgreSQL and MariaDB on loopback, runs every workload and
# prints one markdown table. Uses CC, CFLAGS, ZKINC, B (Makefile), PGINC (mk/pg.mk) and MYINC,
# MYLIB (mk/mysql.mk).

BENCH_PROGS = w1_cycle w2_handoff w2_shared w3_failover w4_scale w5_stall
BENCH_BINS  = $(addprefix $(B)/bench/,$(BENCH_PROGS))
BENCH_HDRS  = bench/bench.h simba.h simba_memory.h simba_sql.h simba_redis.h simba_zk.h simba_pg.h simba_mysql.h
BENCH_LIBS  = -lsqlite3 -lhiredis -lzookeeper_mt -lpq $(MYLIB) -lpthread -lm

$(B)/bench:
	mkdir -p $@

# -O2 after CFLAGS' -O1: figures of an optimised build, as users would ship it.
$(B)/bench/%: bench/%.c $(BENCH_HDRS) | $(B)/bench
	$(CC) $(CFLAGS) -O2 $(ZKINC) $(PGINC) $(MYINC) -o $@ $< $(BENCH_LIBS)

bench-build: $(BENCH_BINS)

bench: deps bench-build
	@bash scripts/bench.sh

.PHONY: bench-build
