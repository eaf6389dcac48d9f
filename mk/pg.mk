# The PostgreSQL backend (simba_pg.h): its tests, kit, fuzz target and bench. Uses CC, CFLAGS,
# SAN and B. PGINC: where libpq-fe.h lives (Debian: /usr/include/postgresql).
PGINC ?= $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
HDR_PG = simba.h simba_pg.h
$(B)/test_pg: tests/test_pg.c $(HDR_PG) tests/check.h | $(B)
	$(CC) $(CFLAGS) $(PGINC) -o $@ tests/test_pg.c -lpq -lpthread
$(B)/kit_pg: tests/kit_pg.c $(HDR_PG) $(KIT) | $(B)
	$(CC) $(CFLAGS) $(PGINC) -o $@ tests/kit_pg.c tests/kit.c -lpq -lpthread
$(B)/asan/test_pg: tests/test_pg.c $(HDR_PG) tests/check.h | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) $(PGINC) -o $@ tests/test_pg.c -lpq -lpthread
$(B)/asan/kit_pg: tests/kit_pg.c $(HDR_PG) $(KIT) | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) $(PGINC) -o $@ tests/kit_pg.c tests/kit.c -lpq -lpthread
all: $(B)/kit_pg
# tests/cxx_check.cpp includes simba_pg.h (the Makefile's rule adds PGINC and -lpq)
$(B)/cxx_check: simba_pg.h
all: $(B)/test_pg $(B)/asan/test_pg $(B)/fault_proxy
# tests/badinput.c has rows for simba_pg_open
$(B)/badinput $(B)/asan/badinput: simba_pg.h
$(B)/badinput $(B)/asan/badinput: ZKINC += $(PGINC)
$(B)/badinput $(B)/asan/badinput: BADINPUT_LIBS += -lpq
$(B)/mp_worker: simba_pg.h
# the row parser's libFuzzer target (FUZZ_CC, FUZZ_FLAGS from mk/reliability.mk)
$(B)/fuzz/fuzz_pg_row: fuzz/fuzz_pg_row.c simba.h simba_pg.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) $(PGINC) -o $@ fuzz/fuzz_pg_row.c -lpq -lpthread
fuzz-pg: $(B)/fuzz/fuzz_pg_row
	sh fuzz/run.sh $(B)/fuzz/fuzz_pg_row fuzz/corpus/fuzz_pg_row $${FUZZ_SECONDS:-60}
.PHONY: fuzz-pg
# the simba tool (tools/simba.c, rules in mk/cli.mk) speaks postgres:// too
$(B)/simba $(B)/asan/simba $(B)/clang/simba: simba_pg.h
$(B)/simba $(B)/asan/simba $(B)/clang/simba: ZKINC += $(PGINC)
$(B)/simba $(B)/asan/simba $(B)/clang/simba: CLI_LIBS += -lpq
