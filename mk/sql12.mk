# sql12.mk -- SQLite fairness and handoff between processes (issue 12): bench/sql_fair.c.
# Uses CC, CFLAGS and B. `make build/sql_fair`, then e.g. `build/sql_fair round 4 5 0 10`.
$(B)/sql_fair: bench/sql_fair.c simba.h simba_sql.h | $(B)
	$(CC) $(CFLAGS) -O2 -o $@ bench/sql_fair.c -lsqlite3 -lpthread
