# fence.mk -- fenced writes: the paused-owner fault test (tests/fault_fence.c, run by the sql,
# pg and mysql groups of tests/run.sh) and the examples, each built as C and as C++. Part of `make
# all`. Uses CC, CXX, CFLAGS, WARN, PGINC, MYINC, MYLIB and B.
FENCE_CXX = $(CXX) -x c++ -std=c++11 -Wall -Wextra -Werror
$(B)/fault_fence: tests/fault_fence.c $(HDR_SQL) simba_pg.h simba_mysql.h | $(B)
	$(CC) $(CFLAGS) $(PGINC) $(MYINC) -o $@ tests/fault_fence.c -lsqlite3 -lpq $(MYLIB) -lpthread
$(B)/fenced_sqlite: examples/fenced_sqlite.c simba.h simba_sql.h | $(B)
	$(CC) $(CFLAGS) -I. -o $@ examples/fenced_sqlite.c -lsqlite3 -lpthread
$(B)/fenced_sqlite_cxx: examples/fenced_sqlite.c simba.h simba_sql.h | $(B)
	$(FENCE_CXX) -I. -o $@ examples/fenced_sqlite.c -lsqlite3 -lpthread
$(B)/fenced_pg: examples/fenced_pg.c simba.h simba_pg.h | $(B)
	$(CC) $(CFLAGS) $(PGINC) -I. -o $@ examples/fenced_pg.c -lpq -lpthread
$(B)/fenced_pg_cxx: examples/fenced_pg.c simba.h simba_pg.h | $(B)
	$(FENCE_CXX) $(PGINC) -I. -o $@ examples/fenced_pg.c -lpq -lpthread
FENCE_BINS = $(B)/fault_fence $(B)/fenced_sqlite $(B)/fenced_sqlite_cxx $(B)/fenced_pg $(B)/fenced_pg_cxx
all: $(FENCE_BINS)
test-sql: $(B)/fault_fence $(B)/fenced_sqlite $(B)/fenced_sqlite_cxx
test-pg: $(B)/fault_fence $(B)/fenced_pg $(B)/fenced_pg_cxx
