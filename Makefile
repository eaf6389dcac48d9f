# simba -- build and test. `make test` installs what it needs (Debian packages), starts the
# servers it needs on loopback, runs every suite and stops them. `make demo` shows a failover.

CC      ?= cc
CXX     ?= c++
OPT     ?= -O1
WARN    = -Wall -Wextra -Wpedantic -Werror
CFLAGS  = -std=c99 -D_POSIX_C_SOURCE=200809L $(WARN) -g $(OPT) $(EXTRA_CFLAGS)
# simba_zk.h needs no -I or -D; -DTHREADED declares the client's synchronous API (bench/w1_cycle.c)
ZKINC   = -DTHREADED
SAN     = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
B       = build

HDR_CORE  = simba.h
HDR_SQL   = simba.h simba_sql.h
HDR_REDIS = simba.h simba_redis.h
HDR_ZK    = simba.h simba_zk.h
KIT       = tests/kit.c tests/kit.h tests/check.h

CORE_BINS  = $(B)/test_core $(B)/kit_memory $(B)/two_tu $(B)/cxx_check $(B)/tick_loop $(B)/poll_loop
SQL_BINS   = $(B)/test_sql $(B)/kit_sql $(B)/mp_worker $(B)/mp_check $(B)/leader_demo $(B)/sql_cycle
REDIS_BINS = $(B)/test_redis $(B)/kit_redis $(B)/redis_cycle
ZK_BINS    = $(B)/test_zk $(B)/kit_zk
ASAN_BINS  = $(B)/asan/test_core $(B)/asan/kit_memory $(B)/asan/test_sql $(B)/asan/test_redis $(B)/asan/test_zk

.PHONY: all deps test test-core test-asan valgrind demo bench clean
all: $(CORE_BINS) $(SQL_BINS) $(REDIS_BINS) $(ZK_BINS)

# Debian packages the build and the tests need; no-op when present.
deps:
	@sh scripts/install-deps.sh

$(B) $(B)/asan:
	mkdir -p $@

# ---- core ---------------------------------------------------------------------------------
$(B)/test_core: tests/test_core.c $(HDR_CORE) tests/check.h | $(B)
	$(CC) $(CFLAGS) -o $@ tests/test_core.c -lpthread
$(B)/kit_memory: tests/kit_memory.c $(HDR_CORE) $(KIT) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/kit_memory.c tests/kit.c -lpthread
# SIMBA_IMPLEMENTATION in exactly one translation unit of a two-file program
$(B)/two_tu: tests/two_tu_main.c tests/two_tu_impl.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/two_tu_main.c tests/two_tu_impl.c -lpthread
# the headers compile as C++ too (gcc and clang)
$(B)/cxx_check: tests/cxx_check.cpp simba.h simba_sql.h simba_redis.h simba_zk.h | $(B)
	$(CXX) -std=c++11 $(WARN) $(ZKINC) $(PGINC) -o $@ tests/cxx_check.cpp -lsqlite3 -lhiredis -lzookeeper_mt -lpq -lpthread
$(B)/tick_loop: examples/tick_loop.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/tick_loop.c -lpthread
$(B)/poll_loop: examples/poll_loop.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/poll_loop.c -lpthread

# ---- sqlite -------------------------------------------------------------------------------
$(B)/test_sql: tests/test_sql.c $(HDR_SQL) tests/check.h | $(B)
	$(CC) $(CFLAGS) -o $@ tests/test_sql.c -lsqlite3 -lpthread
$(B)/kit_sql: tests/kit_sql.c $(HDR_SQL) $(KIT) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/kit_sql.c tests/kit.c -lsqlite3 -lpthread
$(B)/mp_worker: tests/mp_worker.c $(HDR_SQL) simba_redis.h simba_zk.h | $(B)
	$(CC) $(CFLAGS) -DSIMBA_HAVE_REDIS -DSIMBA_HAVE_ZK -DSIMBA_HAVE_PG $(ZKINC) $(PGINC) -o $@ tests/mp_worker.c -lsqlite3 -lhiredis -lzookeeper_mt -lpq -lpthread
$(B)/mp_check: tests/mp_check.c | $(B)
	$(CC) $(CFLAGS) -o $@ tests/mp_check.c
$(B)/leader_demo: examples/leader_demo.c $(HDR_SQL) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/leader_demo.c -lsqlite3 -lpthread
$(B)/sql_cycle: bench/sql_cycle.c $(HDR_SQL) | $(B)
	$(CC) $(CFLAGS) -O2 -o $@ bench/sql_cycle.c -lsqlite3 -lpthread

# ---- redis --------------------------------------------------------------------------------
$(B)/test_redis: tests/test_redis.c $(HDR_REDIS) tests/check.h | $(B)
	$(CC) $(CFLAGS) -o $@ tests/test_redis.c -lhiredis -lpthread
$(B)/kit_redis: tests/kit_redis.c $(HDR_REDIS) $(KIT) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/kit_redis.c tests/kit.c -lhiredis -lpthread
$(B)/redis_cycle: bench/redis_cycle.c $(HDR_REDIS) | $(B)
	$(CC) $(CFLAGS) -O2 -o $@ bench/redis_cycle.c -lhiredis -lpthread

# ---- zookeeper ----------------------------------------------------------------------------
$(B)/test_zk: tests/test_zk.c $(HDR_ZK) tests/check.h tests/zk_probe.h | $(B)
	$(CC) $(CFLAGS) $(ZKINC) -o $@ tests/test_zk.c -lzookeeper_mt -lpthread
$(B)/kit_zk: tests/kit_zk.c $(HDR_ZK) $(KIT) tests/zk_probe.h | $(B)
	$(CC) $(CFLAGS) $(ZKINC) -o $@ tests/kit_zk.c tests/kit.c -lzookeeper_mt -lpthread

# ---- the same sources under clang / clang++ (gcc is the default cc) ------------------------
$(B)/clang:
	mkdir -p $@
$(B)/clang/test_core: tests/test_core.c $(HDR_CORE) | $(B)/clang
	clang $(CFLAGS) -o $@ tests/test_core.c -lpthread
$(B)/clang/cxx_check: tests/cxx_check.cpp simba.h simba_sql.h simba_redis.h simba_zk.h | $(B)/clang
	clang++ -std=c++11 $(WARN) -o $@ tests/cxx_check.cpp -lsqlite3 -lhiredis -lzookeeper_mt -lpthread
CLANG_BINS = $(B)/clang/test_core $(B)/clang/cxx_check

# ---- sanitizer builds ---------------------------------------------------------------------
$(B)/asan/test_core: tests/test_core.c $(HDR_CORE) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) -o $@ tests/test_core.c -lpthread
$(B)/asan/kit_memory: tests/kit_memory.c $(HDR_CORE) $(KIT) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) -o $@ tests/kit_memory.c tests/kit.c -lpthread
$(B)/asan/test_sql: tests/test_sql.c $(HDR_SQL) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) -o $@ tests/test_sql.c -lsqlite3 -lpthread
$(B)/asan/test_redis: tests/test_redis.c $(HDR_REDIS) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) -o $@ tests/test_redis.c -lhiredis -lpthread
$(B)/asan/test_zk: tests/test_zk.c $(HDR_ZK) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) $(ZKINC) -o $@ tests/test_zk.c -lzookeeper_mt -lpthread

# ---- running ------------------------------------------------------------------------------
# The whole suite: unit tests, the kit on every backend, the multi-process test, the
# sanitizer run. Servers are started and stopped by scripts/test.sh.
test: deps
	$(MAKE) --no-print-directory all $(ASAN_BINS) $(CLANG_BINS)
	@sh scripts/test.sh

# Quick: core only, no servers, no packages.
test-core: $(B)/test_core $(B)/kit_memory $(B)/two_tu
	$(B)/test_core && $(B)/two_tu && $(B)/kit_memory

test-asan: $(B)/asan/test_core $(B)/asan/kit_memory
	$(B)/asan/test_core && $(B)/asan/kit_memory

valgrind: $(B)/test_core $(B)/test_sql
	valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite $(B)/test_core
	valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite $(B)/test_sql

# Three processes on a SQLite file; the leader is killed and another takes over.
demo: deps $(B)/leader_demo
	@sh scripts/demo.sh $(B)/leader_demo

clean:
	rm -rf $(B)

# the README's example must keep compiling
$(B)/readme: examples/readme.c $(HDR_SQL) | $(B)
	$(CC) $(CFLAGS) -I. -o $@ examples/readme.c -lsqlite3 -lpthread
all: $(B)/readme

# Further targets (bench, reliability) live in mk/*.mk.
-include mk/*.mk
