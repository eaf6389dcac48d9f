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
test-loops: $(B)/test_hooks
	bash tests/test_loops.sh $(B)
