# redis-ha.mk -- Redis Cluster and Sentinel: make test-cluster starts a loopback cluster
# (scripts/redis-cluster-start.sh, ports SIMBA_CLUSTER_PORT..+5, default 6600), runs the
# cluster tests and the shared kit on it, and stops it by PID. build/test_redis_sentinel starts
# its own primary, replica and three sentinels (SIMBA_SENTINEL_REDIS_PORT 6650/6651,
# SIMBA_SENTINEL_PORT 26600..26602). Both programs: VARIANT_PROGS in the Makefile.
.PHONY: test-cluster
test-cluster: $(B)/test_redis_cluster $(B)/asan/test_redis_cluster $(B)/kit_redis \
	      $(B)/test_redis_sentinel $(B)/asan/test_redis_sentinel
	sh tests/test_redis_ha.sh --full

# make test (tests/run.sh group "cluster") runs test_redis_cluster and test_redis_sentinel.
all: $(B)/test_redis_cluster $(B)/test_redis_sentinel

# make bench: W1/W2 on a Redis Cluster declare their prefix on every slot first.
bench-build: $(B)/bench/redis_cluster_declare

# make chaos-redis-ha: the fault harness on the Redis topologies, CHAOS_SECONDS
# each (as make chaos): Cluster, Sentinel without and with wait_replicas = 1 (tests/fault_run.sh;
# its ports FAULT_CLUSTER_PORT, FAULT_SENTINEL_REDIS_PORT, FAULT_SENTINEL_PORT).
.PHONY: chaos-redis-ha
chaos-redis-ha: $(B)/mp_worker $(B)/mp_check $(B)/fault_sqlhold $(B)/fault_proxy
	@rc=0; for m in redis-cluster:0 redis-sentinel:0 redis-sentinel:1; do \
	    be=$${m%:*}; w=$${m#*:}; \
	    echo "== chaos $$be wait_replicas=$$w: $(CHAOS_SECONDS) s"; \
	    FAULT_WAIT_REPLICAS=$$w bash tests/fault_run.sh $$be $(CHAOS_SECONDS) > $(B)/chaos-$$be-w$$w.log 2>&1 || rc=1; \
	    grep -E '^mp_check: (faults|ownerships|stale|OK|FAIL)|^fault_run: .*(PASS|FAIL)' $(B)/chaos-$$be-w$$w.log; \
	done; exit $$rc
