# install.mk -- `make install` / `make uninstall`, the statistics test and example. Included
# by the Makefile; uses its CC, CFLAGS, SAN and B.
#
#   make install   [PREFIX=/usr/local] [DESTDIR=]   headers, pkg-config files, CMake package,
#                                                   and the simba tool and its manual page
#                                                   when tools/simba.c exists
#   make uninstall [PREFIX=/usr/local] [DESTDIR=]   removes exactly those files
#
# Layout under $(DESTDIR)$(PREFIX):
#   include/simba/simba.h simba_memory.h simba_sql.h simba_redis.h simba_zk.h simba_pg.h simba_mysql.h
#   include/simba/adapters/simba_libuv.h simba_libev.h simba_libevent.h
#                           (#include <simba/adapters/simba_libuv.h>: -I include, not include/simba)
#   share/pkgconfig/simba.pc simba-sqlite.pc simba-redis.pc simba-zk.pc simba-pg.pc simba-mysql.pc
#                   simba-libuv.pc simba-libev.pc simba-libevent.pc
#   share/cmake/simba/simbaConfig.cmake simbaConfigVersion.cmake simbaTargets.cmake
#   bin/simba  share/man/man1/simba.1
# The headers are the library (nothing to compile), so the pkg-config and CMake files are
# architecture-independent and live under share/.

PREFIX        ?= /usr/local
DESTDIR       ?=
INCLUDEDIR    ?= $(PREFIX)/include
BINDIR        ?= $(PREFIX)/bin
DATADIR       ?= $(PREFIX)/share
PKGCONFIGDIR  ?= $(DATADIR)/pkgconfig
CMAKEDIR      ?= $(DATADIR)/cmake/simba
MANDIR        ?= $(DATADIR)/man
ZK_INCLUDEDIR ?= /usr/include/zookeeper
PG_INCLUDEDIR ?= $(or $(shell pkg-config --variable=includedir libpq 2>/dev/null),/usr/include/postgresql)
INSTALL       ?= install

# The one version, from simba.h; the pkg-config and CMake files are stamped with it.
SIMBA_VERSION := $(shell sed -n 's/^\#define SIMBA_VERSION "\(.*\)"/\1/p' simba.h)

SIMBA_HEADERS  = simba.h simba_memory.h simba_sql.h simba_redis.h simba_zk.h simba_pg.h simba_mysql.h
SIMBA_ADAPTERS = adapters/simba_libuv.h adapters/simba_libev.h adapters/simba_libevent.h
SIMBA_PCS      = simba simba-sqlite simba-redis simba-zk simba-pg simba-mysql simba-libuv simba-libev simba-libevent
SIMBA_PC_OUT   = $(SIMBA_PCS:%=$(B)/pkgconfig/%.pc)
SIMBA_CMAKE_OUT = $(B)/cmake/simbaConfig.cmake $(B)/cmake/simbaConfigVersion.cmake
# The command-line tool is built by mk/cli.mk; installed when its source is there.
SIMBA_TOOL     = $(if $(wildcard tools/simba.c),$(B)/simba)

.PHONY: install uninstall install-files

$(B)/pkgconfig $(B)/cmake:
	mkdir -p $@

$(B)/pkgconfig/%.pc: pkgconfig/%.pc.in simba.h mk/install.mk | $(B)/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(SIMBA_VERSION)|g' -e 's|@ZK_INCLUDEDIR@|$(ZK_INCLUDEDIR)|g' -e 's|@PG_INCLUDEDIR@|$(PG_INCLUDEDIR)|g' $< > $@

$(B)/cmake/%.cmake: cmake/%.cmake.in simba.h mk/install.mk | $(B)/cmake
	sed -e 's|@VERSION@|$(SIMBA_VERSION)|g' $< > $@

# PREFIX is baked into the .pc files: regenerate them on every install.
install: $(SIMBA_TOOL)
	@test -n "$(SIMBA_VERSION)" || { echo "install: no SIMBA_VERSION in simba.h" >&2; exit 1; }
	rm -f $(SIMBA_PC_OUT)
	$(MAKE) --no-print-directory install-files

install-files: $(SIMBA_PC_OUT) $(SIMBA_CMAKE_OUT)
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR)/simba/adapters $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR)
	$(INSTALL) -m 644 $(SIMBA_HEADERS) $(DESTDIR)$(INCLUDEDIR)/simba/
	$(INSTALL) -m 644 $(SIMBA_ADAPTERS) $(DESTDIR)$(INCLUDEDIR)/simba/adapters/
	$(INSTALL) -m 644 $(SIMBA_PC_OUT) $(DESTDIR)$(PKGCONFIGDIR)/
	$(INSTALL) -m 644 $(SIMBA_CMAKE_OUT) cmake/simbaTargets.cmake $(DESTDIR)$(CMAKEDIR)/
	$(if $(SIMBA_TOOL),$(INSTALL) -d $(DESTDIR)$(BINDIR) && $(INSTALL) -m 755 $(SIMBA_TOOL) $(DESTDIR)$(BINDIR)/simba)
	$(if $(SIMBA_TOOL),$(INSTALL) -d $(DESTDIR)$(MANDIR)/man1 && $(INSTALL) -m 644 docs/simba.1 $(DESTDIR)$(MANDIR)/man1/simba.1)

# Removes only what install put there, then the directories it made if they are empty.
uninstall:
	rm -f $(SIMBA_HEADERS:%=$(DESTDIR)$(INCLUDEDIR)/simba/%)
	rm -f $(SIMBA_ADAPTERS:adapters/%=$(DESTDIR)$(INCLUDEDIR)/simba/adapters/%)
	rm -f $(SIMBA_PCS:%=$(DESTDIR)$(PKGCONFIGDIR)/%.pc)
	rm -f $(DESTDIR)$(CMAKEDIR)/simbaConfig.cmake $(DESTDIR)$(CMAKEDIR)/simbaConfigVersion.cmake $(DESTDIR)$(CMAKEDIR)/simbaTargets.cmake
	rm -f $(DESTDIR)$(BINDIR)/simba $(DESTDIR)$(MANDIR)/man1/simba.1
	-rmdir $(DESTDIR)$(INCLUDEDIR)/simba/adapters $(DESTDIR)$(INCLUDEDIR)/simba $(DESTDIR)$(CMAKEDIR) 2>/dev/null

# ---- statistics and release reasons ---------------------------------------------------------
# test_stats in every variant: VARIANT_PROGS in the Makefile
$(B)/stats_prometheus: examples/stats_prometheus.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -o $@ examples/stats_prometheus.c -lpthread

all: $(B)/test_stats $(B)/asan/test_stats $(B)/clang/test_stats $(B)/stats_prometheus
