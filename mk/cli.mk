# cli.mk -- the simba command-line tool and its test. Uses B.
#   make build/simba         the tool (tools/simba.c: VARIANT_PROGS in the Makefile)
#   make test-cli            tests/test_cli.sh: starts its own redis-server, ZooKeeper,
#                            PostgreSQL and MariaDB, runs every command under ASan too ($(B)/asan/simba),
#                            then tests/test_elect.sh (values, yield; every backend)
all: $(B)/simba $(B)/asan/simba

.PHONY: test-cli
test-cli: $(B)/simba $(B)/asan/simba $(B)/fault_proxy
	bash tests/test_cli.sh
	bash tests/test_elect.sh

# tests/test_cli.sh partitions the tool with the fault proxy (rule in mk/reliability.mk)
all: $(B)/fault_proxy
