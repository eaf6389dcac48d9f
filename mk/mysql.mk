# mysql.mk -- the MySQL / MariaDB backend (simba_mysql.h): its tests and kit. Uses CC, CFLAGS,
# SAN and B. MYINC / MYLIB: Connector/C's (pkg-config libmariadb).
MYINC ?= $(shell pkg-config --cflags libmariadb 2>/dev/null || echo -I/usr/include/mariadb)
MYLIB ?= $(shell pkg-config --libs libmariadb 2>/dev/null || echo -lmariadb)
HDR_MYSQL = simba.h simba_mysql.h
# test_mysql, kit_mysql: VARIANT_PROGS in the Makefile
$(B)/mp_worker: simba_mysql.h
all: $(B)/kit_mysql $(B)/test_mysql $(B)/asan/test_mysql
test-mysql: $(B)/kit_mysql $(B)/test_mysql $(B)/asan/test_mysql $(B)/fault_fence
SRC_test_mysql = tests/test_mysql.c
DEP_test_mysql = $(HDR_MYSQL) tests/check.h tests/fixture.h
FLG_test_mysql = $(MYINC)
LIB_test_mysql = $(MYLIB) -lpthread
SRC_kit_mysql  = tests/kit_mysql.c tests/kit.c
DEP_kit_mysql  = $(HDR_MYSQL) $(KIT)
FLG_kit_mysql  = $(MYINC)
LIB_kit_mysql  = $(MYLIB) -lpthread
# the header alone, as C99 and C++11, gcc and clang (as mk/compile.mk does for the others)
MYSQL_COMPILE = $(B)/compile/simba_mysql.c.o $(B)/compile/simba_mysql.cc.o \
                $(B)/compile/clang/simba_mysql.c.o $(B)/compile/clang/simba_mysql.cc.o
all: $(MYSQL_COMPILE)
$(B)/compile/simba_mysql.c.o: tests/compile/simba_mysql.c $(HDR_MYSQL) | $(B)/compile
	$(CC) $(CFLAGS) $(MYINC) -I. -c -o $@ $<
$(B)/compile/simba_mysql.cc.o: tests/compile/simba_mysql.cc $(HDR_MYSQL) | $(B)/compile
	$(CXX) $(COMPILE_CXX) $(MYINC) -I. -c -o $@ $<
$(B)/compile/clang/simba_mysql.c.o: tests/compile/simba_mysql.c $(HDR_MYSQL) | $(B)/compile/clang
	clang $(CFLAGS) $(MYINC) -I. -c -o $@ $<
$(B)/compile/clang/simba_mysql.cc.o: tests/compile/simba_mysql.cc $(HDR_MYSQL) | $(B)/compile/clang
	clang++ $(COMPILE_CXX) $(MYINC) -I. -c -o $@ $<
# TLS: tests/test_mysql_tls.sh makes a throwaway CA and a server with its certificate, then runs it
all: $(B)/test_mysql_tls
test-mysql: $(B)/test_mysql_tls $(B)/simba
$(B)/test_mysql_tls: tests/test_mysql_tls.c $(HDR_MYSQL) tests/check.h | $(B)
	$(CC) $(CFLAGS) $(MYINC) -o $@ tests/test_mysql_tls.c $(MYLIB) -lpthread
# the answer and inspection rows' libFuzzer target (FUZZ_CC, FUZZ_FLAGS from mk/reliability.mk)
$(B)/fuzz/fuzz_mysql_row: fuzz/fuzz_mysql_row.c $(HDR_MYSQL) | $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) $(MYINC) -o $@ fuzz/fuzz_mysql_row.c $(MYLIB) -lpthread
fuzz-mysql: $(B)/fuzz/fuzz_mysql_row
	sh fuzz/run.sh $(B)/fuzz/fuzz_mysql_row fuzz/corpus/fuzz_mysql_row $${FUZZ_SECONDS:-60}
.PHONY: fuzz-mysql
