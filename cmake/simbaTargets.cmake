# simbaTargets.cmake -- the simba::core, simba::sqlite, simba::redis, simba::zk, simba::pg and simba::mysql targets,
# and the adapters' simba::libuv, simba::libev and simba::libevent.
# Shared by the source tree's CMakeLists.txt (add_subdirectory / FetchContent) and by the
# installed simbaConfig.cmake (find_package). simba is header-only: each target is an
# INTERFACE library carrying the include directory, the dependency's flags and libraries;
# one C file of the program defines SIMBA_IMPLEMENTATION before including the headers.
#
#   simba__define_targets(<dir holding simba.h> <IMPORTED|""> [<dir holding simba/adapters/>])
#
# A backend or adapter target exists only when its dependency is found; SIMBA_<COMP>_FOUND
# says which (core, sqlite, redis, zk, pg, mysql, libuv, libev, libevent). The adapter targets
# exist only when the third argument is given: they add that directory, so that a program
# writes #include <simba/adapters/simba_libuv.h> after <simba.h>.

function(simba__define_targets inc imported)
  if(TARGET simba::core) # defined already in this directory: just report what exists
    foreach(t core sqlite redis zk pg mysql libuv libev libevent)
      string(TOUPPER "${t}" T)
      if(TARGET simba::${t})
        set(SIMBA_${T}_FOUND TRUE PARENT_SCOPE)
      else()
        set(SIMBA_${T}_FOUND FALSE PARENT_SCOPE)
      endif()
    endforeach()
    return()
  endif()
  # installed: imported targets named simba::<c>; source tree: simba_<c> with an alias
  if(imported)
    set(kind INTERFACE IMPORTED)
    set(p "simba::")
  else()
    set(kind INTERFACE)
    set(p "simba_")
  endif()

  # core: the memory backend uses pthread
  set(THREADS_PREFER_PTHREAD_FLAG ON)
  find_package(Threads REQUIRED)
  add_library(${p}core ${kind})
  target_include_directories(${p}core INTERFACE "${inc}")
  target_link_libraries(${p}core INTERFACE Threads::Threads)
  set(SIMBA_CORE_FOUND TRUE PARENT_SCOPE)

  # sqlite: FindSQLite3 (CMake >= 3.14) knows Debian's libsqlite3-dev
  find_package(SQLite3 QUIET)
  if(SQLite3_FOUND)
    add_library(${p}sqlite ${kind})
    target_link_libraries(${p}sqlite INTERFACE ${p}core SQLite::SQLite3)
    set(SIMBA_SQLITE_FOUND TRUE PARENT_SCOPE)
  else()
    set(SIMBA_SQLITE_FOUND FALSE PARENT_SCOPE)
  endif()

  # redis: hiredis (Debian's HiredisConfig.cmake defines no target; find it ourselves)
  find_path(SIMBA_HIREDIS_INCLUDE_DIR hiredis/hiredis.h)
  find_library(SIMBA_HIREDIS_LIBRARY hiredis)
  if(SIMBA_HIREDIS_INCLUDE_DIR AND SIMBA_HIREDIS_LIBRARY)
    add_library(${p}redis ${kind})
    target_include_directories(${p}redis INTERFACE "${SIMBA_HIREDIS_INCLUDE_DIR}")
    target_link_libraries(${p}redis INTERFACE ${p}core "${SIMBA_HIREDIS_LIBRARY}")
    set(SIMBA_REDIS_FOUND TRUE PARENT_SCOPE)
  else()
    set(SIMBA_REDIS_FOUND FALSE PARENT_SCOPE)
  endif()

  # zk: libzookeeper_mt (Debian: headers under /usr/include/zookeeper, no .pc, no config)
  find_path(SIMBA_ZK_INCLUDE_DIR zookeeper.h PATH_SUFFIXES zookeeper)
  find_library(SIMBA_ZK_LIBRARY zookeeper_mt)
  if(SIMBA_ZK_INCLUDE_DIR AND SIMBA_ZK_LIBRARY)
    add_library(${p}zk ${kind})
    target_include_directories(${p}zk INTERFACE "${SIMBA_ZK_INCLUDE_DIR}")
    target_compile_definitions(${p}zk INTERFACE THREADED)
    target_link_libraries(${p}zk INTERFACE ${p}core "${SIMBA_ZK_LIBRARY}")
    set(SIMBA_ZK_FOUND TRUE PARENT_SCOPE)
  else()
    set(SIMBA_ZK_FOUND FALSE PARENT_SCOPE)
  endif()

  # pg: libpq through CMake's FindPostgreSQL (PostgreSQL::PostgreSQL, CMake >= 3.14)
  find_package(PostgreSQL QUIET)
  if(PostgreSQL_FOUND)
    add_library(${p}pg ${kind})
    target_link_libraries(${p}pg INTERFACE ${p}core PostgreSQL::PostgreSQL)
    set(SIMBA_PG_FOUND TRUE PARENT_SCOPE)
  else()
    set(SIMBA_PG_FOUND FALSE PARENT_SCOPE)
  endif()

  # mysql: MariaDB Connector/C (Debian: mysql.h under /usr/include/mariadb, libmariadb)
  find_path(SIMBA_MYSQL_INCLUDE_DIR mysql.h PATH_SUFFIXES mariadb)
  find_library(SIMBA_MYSQL_LIBRARY mariadb)
  if(SIMBA_MYSQL_INCLUDE_DIR AND SIMBA_MYSQL_LIBRARY)
    add_library(${p}mysql ${kind})
    target_include_directories(${p}mysql INTERFACE "${SIMBA_MYSQL_INCLUDE_DIR}")
    target_link_libraries(${p}mysql INTERFACE ${p}core "${SIMBA_MYSQL_LIBRARY}")
    set(SIMBA_MYSQL_FOUND TRUE PARENT_SCOPE)
  else()
    set(SIMBA_MYSQL_FOUND FALSE PARENT_SCOPE)
  endif()

  # adapters: the event library's headers and library, found as Debian installs them
  set(_adapters libuv libev libevent)
  set(_hdr_libuv uv.h)
  set(_lib_libuv uv)
  set(_hdr_libev ev.h)
  set(_lib_libev ev)
  set(_hdr_libevent event2/event.h)
  set(_lib_libevent event_core)
  foreach(a IN LISTS _adapters)
    string(TOUPPER "${a}" A)
    set(SIMBA_${A}_FOUND FALSE PARENT_SCOPE)
    if(ARGC GREATER 2 AND ARGV2)
      find_path(SIMBA_${A}_INCLUDE_DIR ${_hdr_${a}})
      find_library(SIMBA_${A}_LIBRARY ${_lib_${a}})
      if(SIMBA_${A}_INCLUDE_DIR AND SIMBA_${A}_LIBRARY)
        add_library(${p}${a} ${kind})
        target_include_directories(${p}${a} INTERFACE "${ARGV2}" "${SIMBA_${A}_INCLUDE_DIR}")
        target_link_libraries(${p}${a} INTERFACE ${p}core "${SIMBA_${A}_LIBRARY}")
        set(SIMBA_${A}_FOUND TRUE PARENT_SCOPE)
      endif()
    endif()
  endforeach()

  if(NOT imported)
    foreach(t core sqlite redis zk pg mysql libuv libev libevent)
      if(TARGET simba_${t})
        add_library(simba::${t} ALIAS simba_${t})
      endif()
    endforeach()
  endif()
endfunction()
