# cli.mk -- the simba command-line tool (issue 16) and its test. Uses CC, CFLAGS, ZKINC, SAN, B.
#   make build/simba         the tool (tools/simba.c, one file on the public headers)
#   make test-cli            tests/test_cli.sh: starts its own redis-server and ZooKeeper
CLI_DEPS = tools/simba.c simba.h simba_sql.h simba_redis.h simba_zk.h
CLI_LIBS = -lsqlite3 -lhiredis -lzookeeper_mt -lpthread

$(B)/simba: $(CLI_DEPS) | $(B)
	$(CC) $(CFLAGS) $(ZKINC) -o $@ tools/simba.c $(CLI_LIBS)
$(B)/asan/simba: $(CLI_DEPS) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) $(ZKINC) -o $@ tools/simba.c $(CLI_LIBS)
$(B)/clang/simba: $(CLI_DEPS) | $(B)/clang
	clang $(CFLAGS) $(ZKINC) -o $@ tools/simba.c $(CLI_LIBS)

all: $(B)/simba

.PHONY: test-cli
test-cli: $(B)/simba $(B)/fault_proxy
	bash tests/test_cli.sh

# tests/test_cli.sh partitions the tool with the fault proxy (rule in mk/reliability.mk)
all: $(B)/fault_proxy
