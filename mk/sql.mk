# sql.mk -- the SQLite recipe for users' tests (docs/testing.md): built by
# `make all`, run by tests/run.sh in the "sql" group. Uses CC, CFLAGS and B.
$(B)/test_with_simba: examples/test_with_simba.c simba.h simba_sql.h | $(B)
	$(CC) $(CFLAGS) -I. -o $@ examples/test_with_simba.c -lsqlite3 -lpthread
$(B)/asan/test_with_simba: examples/test_with_simba.c simba.h simba_sql.h | $(B)/asan
	$(CC) $(CFLAGS) $(SAN) -I. -o $@ examples/test_with_simba.c -lsqlite3 -lpthread
all: $(B)/test_with_simba
