# scale.mk -- 10,000 services on one loop on SQLite and Redis: tests/test_scale.c.
# tests/run.sh group "scale" starts its own redis-server (SIMBA_SCALE_REDIS_PORT, default
# 6470) and runs it; `make test-scale` does the same alone.
SCALE_DEP = simba.h simba_sql.h simba_redis.h tests/check.h
$(B)/test_scale: tests/test_scale.c $(SCALE_DEP) | $(B)
	$(CC) $(CFLAGS) -o $@ tests/test_scale.c -lsqlite3 -lhiredis -lpthread
all: $(B)/test_scale
.PHONY: test-scale
test-scale:: $(B)/test_scale
	@SIMBA_TEST_ONLY=scale sh tests/run.sh
