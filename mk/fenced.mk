# fenced.mk -- the fenced-write examples (examples/fenced_redis.c, examples/fenced_zk.c), each
# built as C99 and as C++11 with -Wall -Wextra -Wpedantic -Werror; the redis and zk groups of
# tests/run.sh run them against their servers. Uses CC, CXX, CFLAGS, WARN and B from the Makefile.
FENCED_EXAMPLES = $(B)/fenced_redis $(B)/fenced_redis_cxx $(B)/fenced_zk $(B)/fenced_zk_cxx

all: $(FENCED_EXAMPLES)
test-redis: $(B)/fenced_redis $(B)/fenced_redis_cxx
test-zk: $(B)/fenced_zk $(B)/fenced_zk_cxx

$(B)/fenced_redis: examples/fenced_redis.c $(HDR_REDIS) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/fenced_redis.c -lhiredis
$(B)/fenced_redis_cxx: examples/fenced_redis.c $(HDR_REDIS) | $(B)
	$(CXX) -std=c++11 $(WARN) -x c++ -o $@ examples/fenced_redis.c -x none -lhiredis
$(B)/fenced_zk: examples/fenced_zk.c $(HDR_ZK) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/fenced_zk.c -lzookeeper_mt -lpthread
$(B)/fenced_zk_cxx: examples/fenced_zk.c $(HDR_ZK) | $(B)
	$(CXX) -std=c++11 $(WARN) -x c++ -o $@ examples/fenced_zk.c -x none -lzookeeper_mt -lpthread
