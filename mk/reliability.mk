# reliability.mk -- fault harness, bad input, fuzzing, sanitizers.
# Included by the Makefile; uses its CC, CFLAGS, ZKINC, SAN, B.
#   make rel-bins       everything tests/test_reliability.sh runs
#   make chaos          the fault harness for minutes per backend (CHAOS_SECONDS=180 each)
#   make fuzz           every libFuzzer target for FUZZ_SECONDS (default 300) each
#   make tsan           core tests, memory kit and the ZooKeeper test under ThreadSanitizer
#   make valgrind-all   the unit tests and kits under valgrind (servers started as needed)

FUZZ_CC      ?= clang
FUZZ_FLAGS    = -std=c99 -D_POSIX_C_SOURCE=200809L -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
TSAN          = -fsanitize=thread -fno-omit-frame-pointer
CHAOS_SECONDS ?= 180
FUZZ_SECONDS  ?= 300
FUZZ_TARGETS  = fuzz_names fuzz_redis_reply fuzz_redis_msg fuzz_zk_node fuzz_sql_row fuzz_sql_push fuzz_pg_row fuzz_pg_follow fuzz_mysql_row
FUZZ_BINS     = $(FUZZ_TARGETS:%=$(B)/fuzz/%)
REL_BINS      = $(B)/mp_worker $(B)/mp_check $(B)/fault_sqlhold $(B)/fault_proxy $(B)/badinput $(B)/asan/badinput

.PHONY: rel-bins chaos fuzz fuzz-bins tsan valgrind-all reliability
rel-bins: $(REL_BINS)

$(B)/fuzz:
	mkdir -p $@

$(B)/fault_sqlhold: tests/fault_sqlhold.c | $(B)
	$(CC) $(CFLAGS) -o $@ tests/fault_sqlhold.c -lsqlite3
$(B)/fault_proxy: tests/fault_proxy.c | $(B)
	$(CC) $(CFLAGS) -o $@ tests/fault_proxy.c

# badinput: VARIANT_PROGS in the Makefile

# ---- fault harness -------------------------------------------------------------------------
chaos: $(B)/mp_worker $(B)/mp_check $(B)/fault_sqlhold $(B)/fault_proxy
	@rc=0; for be in sql redis zk pg redis-cluster redis-sentinel; do \
	    echo "== chaos $$be: $(CHAOS_SECONDS) s"; \
	    bash tests/fault_run.sh $$be $(CHAOS_SECONDS) > $(B)/chaos-$$be.log 2>&1 || rc=1; \
	    grep -E '^mp_check: (faults|ownerships|OK|FAIL)|^fault_run: .*(PASS|FAIL)' $(B)/chaos-$$be.log; \
	done; \
	echo "== chaos zk-ensemble: $(CHAOS_SECONDS) s"; \
	bash tests/fault_zk_ensemble.sh $(CHAOS_SECONDS) > $(B)/chaos-zk-ensemble.log 2>&1 || rc=1; \
	grep -E '^mp_check: (faults|ownerships|OK|FAIL)|PASS|FAIL' $(B)/chaos-zk-ensemble.log | tail -4; \
	exit $$rc

# ---- fuzzing (clang, libFuzzer) --------------------------------------------------------------
fuzz-bins: $(FUZZ_BINS)
$(B)/fuzz/fuzz_names: fuzz/fuzz_names.c simba.h simba_memory.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_names.c -lpthread
$(B)/fuzz/fuzz_redis_reply: fuzz/fuzz_redis_reply.c fuzz/fuzz_common.h simba.h simba_memory.h simba_redis.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_redis_reply.c -lhiredis -lpthread
$(B)/fuzz/fuzz_redis_msg: fuzz/fuzz_redis_msg.c fuzz/fuzz_common.h simba.h simba_redis.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_redis_msg.c -lhiredis -lpthread
$(B)/fuzz/fuzz_zk_node: fuzz/fuzz_zk_node.c simba.h simba_zk.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) $(ZKINC) -o $@ fuzz/fuzz_zk_node.c -lzookeeper_mt -lpthread
$(B)/fuzz/fuzz_sql_row: fuzz/fuzz_sql_row.c simba.h simba_sql.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_sql_row.c -lsqlite3 -lpthread
$(B)/fuzz/fuzz_sql_push: fuzz/fuzz_sql_push.c simba.h simba_sql.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_sql_push.c -lsqlite3 -lpthread

# Runs each target on a scratch copy of its corpus (fuzz/corpus/<target> stays small and
# is only read); crashes land in $(B)/fuzz/<target>-crash-*.
fuzz: $(FUZZ_BINS)
	@rc=0; for t in $(FUZZ_TARGETS); do \
	    sh fuzz/run.sh $(B)/fuzz/$$t fuzz/corpus/$$t $(FUZZ_SECONDS) || rc=1; \
	done; exit $$rc

# ---- sanitizers ------------------------------------------------------------------------------
TSAN_BINS = $(B)/tsan/test_core $(B)/tsan/kit_memory $(B)/tsan/test_zk $(B)/tsan/kit_zk
# the programs: VARIANT_PROGS pattern rules in the Makefile

tsan: $(TSAN_BINS)
	@bash tests/fault_sanitizers.sh tsan

valgrind-all: $(B)/test_core $(B)/kit_memory $(B)/test_sql $(B)/kit_sql $(B)/test_redis $(B)/kit_redis $(B)/test_zk $(B)/kit_zk $(B)/badinput $(B)/test_pg $(B)/kit_pg
	@bash tests/fault_sanitizers.sh valgrind

# the whole reliability suite (what `make test` runs as its last group)
reliability: rel-bins fuzz-bins
	bash tests/test_reliability.sh

# A forged owner announcement must not postpone failover by more than one lease (see
# tests/fault_forged.c). Needs a redis-server on $(FORGED_PORT): it starts and stops one.
FORGED_PORT ?= 6392
$(B)/fault_forged: tests/fault_forged.c $(HDR_REDIS) tests/check.h | $(B)
	$(CC) $(CFLAGS) -o $@ tests/fault_forged.c -lhiredis -lpthread
.PHONY: fault-forged
fault-forged: $(B)/fault_forged
	@sh scripts/redis-start.sh $(FORGED_PORT) $(B)/rel-forged/redis >/dev/null && \
	  { SIMBA_REDIS_PORT=$(FORGED_PORT) $(B)/fault_forged; rc=$$?; \
	    sh scripts/redis-stop.sh $(B)/rel-forged/redis >/dev/null; exit $$rc; }
