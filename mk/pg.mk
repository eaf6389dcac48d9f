# pg.mk -- the PostgreSQL backend (simba_pg.h): its tests, kit and fuzz targets. Uses CC,
# CFLAGS, SAN and B. PGINC: where libpq-fe.h lives (Debian: /usr/include/postgresql).
PGINC ?= $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
# test_pg, kit_pg: VARIANT_PROGS in the Makefile
all: $(B)/kit_pg $(B)/test_pg $(B)/asan/test_pg $(B)/fault_proxy $(B)/test_pg_tls
# TLS: tests/test_pg_tls.sh makes a throwaway CA and a server with ssl=on, then runs it and
# the command-line tool's TLS URL parameters (the pg group of tests/run.sh)
$(B)/test_pg_tls: tests/test_pg_tls.c $(HDR_PG) tests/check.h | $(B)
	$(CC) $(CFLAGS) $(PGINC) -o $@ tests/test_pg_tls.c -lpq -lpthread
test-pg: $(B)/test_pg_tls $(B)/simba
# tests/cxx_check.cpp includes simba_pg.h (the Makefile's rule adds PGINC and -lpq)
$(B)/cxx_check: simba_pg.h
$(B)/mp_worker: simba_pg.h
# the row parser's libFuzzer target (FUZZ_CC, FUZZ_FLAGS from mk/reliability.mk)
$(B)/fuzz/fuzz_pg_row: fuzz/fuzz_pg_row.c simba.h simba_pg.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) $(PGINC) -o $@ fuzz/fuzz_pg_row.c -lpq -lpthread
# the follow channel's announcements (see >>follow in simba_pg.h)
$(B)/fuzz/fuzz_pg_follow: fuzz/fuzz_pg_follow.c fuzz/fuzz_common.h simba.h simba_pg.h | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) $(PGINC) -o $@ fuzz/fuzz_pg_follow.c -lpq -lpthread
fuzz-pg: $(B)/fuzz/fuzz_pg_row $(B)/fuzz/fuzz_pg_follow
	sh fuzz/run.sh $(B)/fuzz/fuzz_pg_row fuzz/corpus/fuzz_pg_row $${FUZZ_SECONDS:-60} && \
	  sh fuzz/run.sh $(B)/fuzz/fuzz_pg_follow fuzz/corpus/fuzz_pg_follow $${FUZZ_SECONDS:-60}
.PHONY: fuzz-pg
