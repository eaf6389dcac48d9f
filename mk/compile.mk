# compile.mk -- every header compiles alone, with its implementation, as C99 and C++11 with
# gcc and clang (tests/compile/<header>.c and .cc); sql_only checks SIMBA_<NAME>_IMPLEMENTATION;
# value_max_fixed: a file that sets SIMBA_VALUE_MAX to another value (simba_owner's size) does
# not build, with simba.h's own words, and one that sets the same value does.
# PGINC comes from mk/pg.mk. Part of `make all` (so of `make test`). Uses CC, CFLAGS, ZKINC and B from the Makefile.
COMPILE_HDRS   = simba simba_memory simba_sql simba_redis simba_zk simba_pg
COMPILE_CXX    = -std=c++11 -Wall -Wextra -Wpedantic -Werror
COMPILE_CHECKS = $(COMPILE_HDRS:%=$(B)/compile/%.c.o) $(COMPILE_HDRS:%=$(B)/compile/%.cc.o) \
                 $(COMPILE_HDRS:%=$(B)/compile/clang/%.c.o) $(COMPILE_HDRS:%=$(B)/compile/clang/%.cc.o) \
                 $(B)/compile/sql_only $(B)/compile/value_max_fixed

all: $(COMPILE_CHECKS)

$(B)/compile $(B)/compile/clang:
	mkdir -p $@
$(B)/compile/%.c.o: tests/compile/%.c %.h simba.h | $(B)/compile
	$(CC) $(CFLAGS) $(ZKINC) $(PGINC) -I. -c -o $@ $<
$(B)/compile/%.cc.o: tests/compile/%.cc %.h simba.h | $(B)/compile
	$(CXX) $(COMPILE_CXX) $(ZKINC) $(PGINC) -I. -c -o $@ $<
$(B)/compile/clang/%.c.o: tests/compile/%.c %.h simba.h | $(B)/compile/clang
	clang $(CFLAGS) $(ZKINC) $(PGINC) -I. -c -o $@ $<
$(B)/compile/clang/%.cc.o: tests/compile/%.cc %.h simba.h | $(B)/compile/clang
	clang++ $(COMPILE_CXX) $(ZKINC) $(PGINC) -I. -c -o $@ $<
$(B)/compile/sql_only: tests/compile/sql_only.c simba.h simba_sql.h | $(B)/compile
	$(CC) $(CFLAGS) -I. -o $@ $< -lsqlite3
	$@
$(B)/compile/value_max_fixed: tests/two_tu_main.c simba.h | $(B)/compile
	$(CC) $(CFLAGS) -DSIMBA_VALUE_MAX=1024 -c -o $@.o tests/two_tu_main.c
	! $(CC) $(CFLAGS) -DSIMBA_VALUE_MAX=2048 -c -o $@.o tests/two_tu_main.c 2>$@.err
	grep -q 'SIMBA_VALUE_MAX is fixed at 1024' $@.err
	touch $@
