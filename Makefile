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

HDR_CORE  = simba.h simba_memory.h
HDR_SQL   = simba.h simba_memory.h simba_sql.h
HDR_REDIS = simba.h simba_redis.h
HDR_ZK    = simba.h simba_zk.h
HDR_PG    = simba.h simba_pg.h
HDR_ALL   = simba.h simba_memory.h simba_sql.h simba_redis.h simba_zk.h simba_pg.h
KIT       = tests/kit.c tests/kit.h tests/check.h tests/fixture.h

CORE_BINS  = $(B)/test_core $(B)/kit_memory $(B)/two_tu $(B)/cxx_check $(B)/tick_loop $(B)/poll_loop
SQL_BINS   = $(B)/test_sql $(B)/kit_sql $(B)/mp_worker $(B)/mp_check $(B)/leader_demo
REDIS_BINS = $(B)/test_redis $(B)/kit_redis $(B)/test_fenced
ZK_BINS    = $(B)/test_zk $(B)/kit_zk $(B)/test_fenced
ASAN_BINS  = $(B)/asan/test_core $(B)/asan/kit_memory $(B)/asan/test_sql $(B)/asan/test_redis $(B)/asan/test_zk \
             $(B)/asan/test_fenced

.PHONY: all deps test valgrind demo bench clean
all: $(CORE_BINS) $(SQL_BINS) $(REDIS_BINS) $(ZK_BINS)

# Debian packages the build and the tests need; no-op when present.
deps:
	@sh scripts/install-deps.sh

$(B) $(B)/asan $(B)/clang $(B)/tsan:
	mkdir -p $@

# ---- core ---------------------------------------------------------------------------------
# SIMBA_IMPLEMENTATION in exactly one translation unit of a two-file program
$(B)/two_tu: tests/two_tu_main.c tests/two_tu_impl.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/two_tu_main.c tests/two_tu_impl.c -lpthread
# the headers compile as C++ too (gcc and clang)
$(B)/cxx_check: tests/cxx_check.cpp simba.h simba_memory.h simba_sql.h simba_redis.h simba_zk.h simba_pg.h | $(B)
	$(CXX) -std=c++11 $(WARN) $(ZKINC) $(PGINC) -o $@ tests/cxx_check.cpp -lsqlite3 -lhiredis -lzookeeper_mt -lpq -lpthread
$(B)/tick_loop: examples/tick_loop.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/tick_loop.c -lpthread
$(B)/poll_loop: examples/poll_loop.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/poll_loop.c -lpthread

# ---- sqlite -------------------------------------------------------------------------------
# test_sql, kit_sql: see VARIANT_PROGS below
$(B)/mp_worker: tests/mp_worker.c $(HDR_SQL) simba_redis.h simba_zk.h | $(B)
	$(CC) $(CFLAGS) -DSIMBA_HAVE_REDIS -DSIMBA_HAVE_ZK -DSIMBA_HAVE_PG -DSIMBA_HAVE_MYSQL $(ZKINC) $(PGINC) $(MYINC) -o $@ tests/mp_worker.c -lsqlite3 -lhiredis -lzookeeper_mt -lpq $(MYLIB) -lpthread
$(B)/mp_check: tests/mp_check.c | $(B)
	$(CC) $(CFLAGS) -o $@ tests/mp_check.c
$(B)/leader_demo: examples/leader_demo.c $(HDR_SQL) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/leader_demo.c -lsqlite3 -lpthread

# ---- redis --------------------------------------------------------------------------------
# test_redis, kit_redis: see VARIANT_PROGS below

# ---- test programs in every variant: plain, clang, ASan, TSan --------------------------------
# One table (sources, headers they depend on, flags, libraries) and one pattern rule per
# variant: $(B)/NAME, $(B)/clang/NAME, $(B)/asan/NAME, $(B)/tsan/NAME.
VARIANT_PROGS  = test_core kit_memory test_stats test_sql kit_sql test_redis kit_redis test_zk kit_zk \
                 test_pg kit_pg test_redis_cluster test_redis_sentinel test_hooks badinput simba test_fenced \
                 test_mysql kit_mysql
SRC_test_core  = tests/test_core.c
DEP_test_core  = $(HDR_CORE) tests/check.h tests/fixture.h
LIB_test_core  = -lpthread
SRC_kit_memory = tests/kit_memory.c tests/kit.c
DEP_kit_memory = $(HDR_CORE) $(KIT)
LIB_kit_memory = -lpthread
SRC_test_stats = tests/test_stats.c
DEP_test_stats = $(HDR_CORE) tests/check.h tests/fixture.h
LIB_test_stats = -lpthread
SRC_test_sql   = tests/test_sql.c
DEP_test_sql   = $(HDR_SQL) tests/check.h
LIB_test_sql   = -lsqlite3 -lpthread
SRC_kit_sql    = tests/kit_sql.c tests/kit.c
DEP_kit_sql    = $(HDR_SQL) $(KIT)
LIB_kit_sql    = -lsqlite3 -lpthread
SRC_test_redis = tests/test_redis.c
DEP_test_redis = $(HDR_REDIS) tests/check.h tests/fixture.h
LIB_test_redis = -lhiredis -lpthread
SRC_kit_redis  = tests/kit_redis.c tests/kit.c
DEP_kit_redis  = $(HDR_REDIS) $(KIT)
LIB_kit_redis  = -lhiredis -lpthread
SRC_test_zk    = tests/test_zk.c
DEP_test_zk    = $(HDR_ZK) tests/check.h tests/zk_probe.h
FLG_test_zk    = $(ZKINC)
LIB_test_zk    = -lzookeeper_mt -lpthread
SRC_kit_zk     = tests/kit_zk.c tests/kit.c
DEP_kit_zk     = $(HDR_ZK) $(KIT) tests/zk_probe.h
FLG_kit_zk     = $(ZKINC)
LIB_kit_zk     = -lzookeeper_mt -lpthread
SRC_test_pg    = tests/test_pg.c
DEP_test_pg    = $(HDR_PG) tests/check.h tests/fixture.h
FLG_test_pg    = $(PGINC)
LIB_test_pg    = -lpq -lpthread
SRC_kit_pg     = tests/kit_pg.c tests/kit.c
DEP_kit_pg     = $(HDR_PG) $(KIT)
FLG_kit_pg     = $(PGINC)
LIB_kit_pg     = -lpq -lpthread
SRC_test_redis_cluster  = tests/test_redis_cluster.c
DEP_test_redis_cluster  = $(HDR_REDIS) tests/check.h
LIB_test_redis_cluster  = -lhiredis -lpthread
SRC_test_redis_sentinel = tests/test_redis_sentinel.c
DEP_test_redis_sentinel = $(HDR_REDIS) tests/check.h
LIB_test_redis_sentinel = -lhiredis -lpthread
SRC_test_hooks = tests/test_hooks.c
DEP_test_hooks = simba.h simba_memory.h simba_sql.h simba_redis.h tests/check.h
LIB_test_hooks = -lsqlite3 -lhiredis -lpthread
SRC_badinput   = tests/badinput.c
DEP_badinput   = $(HDR_ALL) tests/check.h
FLG_badinput   = $(ZKINC) $(PGINC)
LIB_badinput   = -lsqlite3 -lhiredis -lzookeeper_mt -lpq -lpthread
SRC_test_fenced = tests/test_fenced.c
DEP_test_fenced = $(HDR_REDIS) simba_zk.h tests/check.h
FLG_test_fenced = $(ZKINC)
LIB_test_fenced = -lhiredis -lzookeeper_mt -lpthread
# the command-line tool: one file on the public headers
SRC_simba      = tools/simba.c
DEP_simba      = $(HDR_ALL) simba_mysql.h
FLG_simba      = $(ZKINC) $(PGINC) $(MYINC)
LIB_simba      = -lsqlite3 -lhiredis -lzookeeper_mt -lpq $(MYLIB) -lpthread

.SECONDEXPANSION:
$(VARIANT_PROGS:%=$(B)/%): $(B)/%: $$(SRC_$$*) $$(DEP_$$*) | $(B)
	$(CC) $(CFLAGS) $(FLG_$*) -o $@ $(SRC_$*) $(LIB_$*)
$(VARIANT_PROGS:%=$(B)/clang/%): $(B)/clang/%: $$(SRC_$$*) $$(DEP_$$*) | $(B)/clang
	clang $(CFLAGS) $(FLG_$*) -o $@ $(SRC_$*) $(LIB_$*)
$(VARIANT_PROGS:%=$(B)/asan/%): $(B)/asan/%: $$(SRC_$$*) $$(DEP_$$*) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) $(FLG_$*) -o $@ $(SRC_$*) $(LIB_$*)
$(VARIANT_PROGS:%=$(B)/tsan/%): $(B)/tsan/%: $$(SRC_$$*) $$(DEP_$$*) | $(B)/tsan
	$(CC) $(CFLAGS) $(TSAN) $(FLG_$*) -o $@ $(SRC_$*) $(LIB_$*)

# ---- the same sources under clang / clang++ (gcc is the default cc) ------------------------
$(B)/clang/cxx_check: tests/cxx_check.cpp simba.h simba_memory.h simba_sql.h simba_redis.h simba_zk.h simba_pg.h | $(B)/clang
	clang++ -std=c++11 $(WARN) $(ZKINC) $(PGINC) -o $@ tests/cxx_check.cpp -lsqlite3 -lhiredis -lzookeeper_mt -lpq -lpthread
CLANG_BINS = $(B)/clang/test_core $(B)/clang/cxx_check

# ---- running ------------------------------------------------------------------------------
# The whole suite: unit tests, the kit on every backend, the multi-process test, the
# sanitizer run. Servers are started and stopped by tests/run.sh.
test: deps
	$(MAKE) --no-print-directory -j$$(nproc) all $(ASAN_BINS) $(CLANG_BINS)
	@sh tests/run.sh

# The same suite with the timed parts at their long lengths (about 10 minutes more): the
# kit's ten-contender run 30 s per store, each fault harness a minute, the ensemble's 60 s;
# then make test-scale (10,000 services on one loop, and the ensemble).
test-long:
	@SIMBA_KIT_MULTI_MS=30000 REL_SQL_SECONDS=60 REL_REDIS_SECONDS=60 REL_ZK_SECONDS=60 \
	    REL_SEM_SECONDS=60 SIMBA_PRIVATE_FAULT_SECONDS=60 ZK_ENSEMBLE_FAULT_SECONDS=60 $(MAKE) --no-print-directory test
	@$(MAKE) --no-print-directory test-scale

# One group of tests/run.sh each, with what it runs (servers started and stopped as in make
# test): core, asan and sql need no server, redis / zk / pg start their own.
TEST_GROUPS = core asan sql redis zk pg mysql
.PHONY: test-long $(TEST_GROUPS:%=test-%)
test-core: $(CORE_BINS) $(CLANG_BINS) $(B)/leader_demo $(B)/test_stats $(B)/clang/test_stats $(B)/stats_prometheus $(B)/simba
test-asan: $(B)/asan/test_core $(B)/asan/kit_memory $(B)/asan/test_stats $(B)/asan/test_sql
test-sql: $(SQL_BINS) $(B)/test_with_simba
test-redis: $(REDIS_BINS) $(B)/asan/test_redis $(B)/asan/test_fenced
test-zk: $(ZK_BINS) $(B)/asan/test_zk $(B)/asan/test_fenced $(B)/zk_include_c $(B)/zk_include_cxx
test-pg: $(B)/test_pg $(B)/asan/test_pg $(B)/kit_pg $(B)/fault_proxy
$(TEST_GROUPS:%=test-%): test-%:
	@SIMBA_TEST_ONLY=$* sh tests/run.sh

valgrind: $(B)/test_core $(B)/test_sql
	valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite $(B)/test_core
	valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite $(B)/test_sql

# Three processes on a SQLite file; the leader is killed and another takes over.
# the demo needs a C compiler and SQLite only (scripts/demo.sh --deps), not the test servers
demo:
	@sh scripts/demo.sh --deps
	@$(MAKE) --no-print-directory $(B)/leader_demo
	@sh scripts/demo.sh $(B)/leader_demo

clean:
	rm -rf $(B)

# the README's example must keep compiling
$(B)/readme: examples/readme.c $(HDR_SQL) | $(B)
	$(CC) $(CFLAGS) -I. -o $@ examples/readme.c -lsqlite3 -lpthread
all: $(B)/readme

# Further targets live in mk/*.mk, one file per part: bench, cli, compile, hooks, install,
# pg, readme, redis-ha, reliability, scale, sim, sql, zk, zk-ensemble.
-include mk/*.mk
