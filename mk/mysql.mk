# mysql.mk -- the MySQL / MariaDB backend (simba_mysql.h): its tests and kit. Uses CC, CFLAGS,
# SAN and B. MYINC / MYLIB: Connector/C's (pkg-config libmariadb).
MYINC ?= $(shell pkg-config --cflags libmariadb 2>/dev/null || echo -I/usr/include/mariadb)
MYLIB ?= $(shell pkg-config --libs libmariadb 2>/dev/null || echo -lmariadb)
HDR_MYSQL = simba.h simba_mysql.h
# test_mysql, kit_mysql: VARIANT_PROGS in the Makefile
all: $(B)/kit_mysql $(B)/test_mysql
test-mysql: $(B)/kit_mysql $(B)/test_mysql
SRC_test_mysql = tests/test_mysql.c
DEP_test_mysql = $(HDR_MYSQL) tests/check.h tests/fixture.h
FLG_test_mysql = $(MYINC)
LIB_test_mysql = $(MYLIB) -lpthread
SRC_kit_mysql  = tests/kit_mysql.c tests/kit.c
DEP_kit_mysql  = $(HDR_MYSQL) $(KIT)
FLG_kit_mysql  = $(MYINC)
LIB_kit_mysql  = $(MYLIB) -lpthread
