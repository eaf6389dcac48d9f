# loop.mk -- event-loop hooks (issue 15): tests/test_hooks.c (memory, SQLite, Redis on
# SIMBA_HOOKS_REDIS_PORT); tests/test_loops.sh starts its own redis-server and runs it.
HOOKS_DEP = simba.h simba_memory.h simba_sql.h simba_redis.h tests/check.h
HOOKS_LIB = -lsqlite3 -lhiredis -lpthread
$(B)/test_hooks: tests/test_hooks.c $(HOOKS_DEP) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/test_hooks.c $(HOOKS_LIB)
$(B)/asan/test_hooks: tests/test_hooks.c $(HOOKS_DEP) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) -o $@ tests/test_hooks.c $(HOOKS_LIB)
$(B)/clang/test_hooks: tests/test_hooks.c $(HOOKS_DEP) | $(B)/clang
	clang $(CFLAGS) -o $@ tests/test_hooks.c $(HOOKS_LIB)
.PHONY: test-loops
test-loops: $(B)/test_hooks $(B)/loops_uv $(B)/loops_ev $(B)/loops_event
	bash tests/test_loops.sh $(B)
# adapters/ driven against a real redis-server (tests/loops_check.c, one build per adapter)
LOOPS_DEP = simba.h simba_redis.h tests/loops_check.c
$(B)/loops_uv: $(LOOPS_DEP) adapters/simba_libuv.h | $(B)
	$(CC) $(CFLAGS) -DLOOPS_UV -o $@ tests/loops_check.c -lhiredis -luv
$(B)/loops_ev: $(LOOPS_DEP) adapters/simba_libev.h | $(B)
	$(CC) $(CFLAGS) -DLOOPS_EV -o $@ tests/loops_check.c -lhiredis -lev
$(B)/loops_event: $(LOOPS_DEP) adapters/simba_libevent.h | $(B)
	$(CC) $(CFLAGS) -DLOOPS_EVENT -o $@ tests/loops_check.c -lhiredis -levent_core
$(B)/asan/loops_uv: $(LOOPS_DEP) adapters/simba_libuv.h | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) -DLOOPS_UV -o $@ tests/loops_check.c -lhiredis -luv
