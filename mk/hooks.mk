# hooks.mk -- event-loop hooks and adapters: tests/test_hooks.c (memory, SQLite, Redis on
# SIMBA_HOOKS_REDIS_PORT; VARIANT_PROGS in the Makefile), the adapters' checks and the loop
# examples; tests/test_loops.sh starts its own redis-server and runs them.
.PHONY: test-loops
test-loops: $(B)/test_hooks $(B)/loops_uv $(B)/loops_ev $(B)/loops_event $(B)/loops_epoll $(B)/loop_epoll $(B)/loops_uring $(B)/loop_iouring $(B)/loop_libuv $(B)/loop_libev $(B)/loop_libevent
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
$(B)/loops_epoll: $(LOOPS_DEP) examples/loop_epoll.c | $(B)
	$(CC) $(CFLAGS) -DLOOPS_EPOLL -o $@ tests/loops_check.c -lhiredis
$(B)/loop_epoll: examples/loop_epoll.c simba.h simba_redis.h | $(B)
	$(CC) $(CFLAGS) -o $@ examples/loop_epoll.c -lhiredis
$(B)/loops_uring: $(LOOPS_DEP) examples/loop_iouring.c | $(B)
	$(CC) $(CFLAGS) -DLOOPS_URING -o $@ tests/loops_check.c -lhiredis -luring
$(B)/loop_iouring: examples/loop_iouring.c simba.h simba_redis.h | $(B)
	$(CC) $(CFLAGS) -o $@ examples/loop_iouring.c -lhiredis -luring
$(B)/loop_libuv: examples/loop_libuv.c adapters/simba_libuv.h simba.h simba_redis.h | $(B)
	$(CC) $(CFLAGS) -o $@ examples/loop_libuv.c -lhiredis -luv
$(B)/loop_libev: examples/loop_libev.c adapters/simba_libev.h simba.h simba_redis.h | $(B)
	$(CC) $(CFLAGS) -o $@ examples/loop_libev.c -lhiredis -lev
$(B)/loop_libevent: examples/loop_libevent.c adapters/simba_libevent.h simba.h simba_redis.h | $(B)
	$(CC) $(CFLAGS) -o $@ examples/loop_libevent.c -lhiredis -levent_core
# the examples are part of `make all` (scripts/install-deps.sh installs their libraries)
all: $(B)/loop_libuv $(B)/loop_libev $(B)/loop_libevent $(B)/loop_epoll $(B)/loop_iouring
