# redis12.mk -- Redis fairness figures (issue 12): build/bench/redis_fair, 4 processes with a
# Locker each. Run: build/bench/redis_fair PORT [SECONDS] [PROCS] [HOLD_MS].
$(B)/bench/redis_fair: bench/redis_fair.c simba.h simba_redis.h
	mkdir -p $(B)/bench
	$(CC) $(CFLAGS) -O2 -o $@ bench/redis_fair.c -lhiredis -lpthread
$(B)/bench/redis_script_cost: bench/redis_script_cost.c simba.h simba_redis.h
	mkdir -p $(B)/bench
	$(CC) $(CFLAGS) -O2 -o $@ bench/redis_script_cost.c -lhiredis -lpthread
