#!/bin/bash
# run.sh -- run every suite (called by `make test` after the build). Starts redis-server and
# ZooKeeper on loopback ports of its own, stops them (by PID) on exit, prints each suite's
# result and a closing "total: N passed, N failed" line. Exit status 0 only if all passed.
#   SIMBA_TEST_ONLY="core sql" limits the run to some groups (core asan sql redis zk pg mysql
#   reliability scale; cli loops cluster ensemble lab private_checkout run in a full run, which runs
#   the pg group from the private copy only); make
#   test-GROUP too.
set -u
cd "$(dirname "$0")/.."
B=build
LOGS=$B/logs
mkdir -p "$LOGS"
export SIMBA_REDIS_PORT=${SIMBA_REDIS_PORT:-6390}
export SIMBA_REDIS_DIR=${SIMBA_REDIS_DIR:-$PWD/$B/redis}
export SIMBA_ZK_PORT=${SIMBA_ZK_PORT:-2191}
export SIMBA_ZK_DIR=${SIMBA_ZK_DIR:-$PWD/$B/zk}
export SIMBA_PG_PORT=${SIMBA_PG_PORT:-5440}
export SIMBA_PG_DIR=${SIMBA_PG_DIR:-$PWD/$B/pg}
export SIMBA_PG_DIR2=${SIMBA_PG_DIR2:-$PWD/$B/pg-test-$((SIMBA_PG_PORT + 1))}
export SIMBA_MYSQL_PORT=${SIMBA_MYSQL_PORT:-3390}
export SIMBA_MYSQL_DIR=${SIMBA_MYSQL_DIR:-$PWD/$B/mysql}
export SIMBA_MYSQL_DIR2=${SIMBA_MYSQL_DIR2:-$PWD/$B/mysql-test}
ONLY=${SIMBA_TEST_ONLY:-core asan sql redis zk pg mysql reliability}
[ -z "${SIMBA_TEST_ONLY:-}" ] && export SIMBA_FULL_RUN=1
PASS=0
FAIL=0
FAILED=""
T0=$(date +%s)

cleanup() {
    [ -f "$SIMBA_REDIS_DIR/redis.pid" ] && sh scripts/redis-stop.sh "$SIMBA_REDIS_DIR" >/dev/null 2>&1
    [ -f "$SIMBA_ZK_DIR/zk.pid" ] && sh scripts/zk-stop.sh "$SIMBA_ZK_DIR" >/dev/null 2>&1
    # a PostgreSQL server's data lives under /tmp until pg-stop.sh removes it, pass or fail
    [ -s "$SIMBA_PG_DIR/datadir" ] && sh scripts/pg-stop.sh "$SIMBA_PG_DIR" >/dev/null 2>&1
    [ -s "$SIMBA_PG_DIR2/datadir" ] && sh scripts/pg-stop.sh "$SIMBA_PG_DIR2" >/dev/null 2>&1
    [ -f "$SIMBA_MYSQL_DIR/mysql.pid" ] && sh scripts/mysql-stop.sh "$SIMBA_MYSQL_DIR" >/dev/null 2>&1
    [ -f "$SIMBA_MYSQL_DIR2/mysql.pid" ] && sh scripts/mysql-stop.sh "$SIMBA_MYSQL_DIR2" >/dev/null 2>&1
    [ -f "$PWD/$B/redis-scale/redis.pid" ] && sh scripts/redis-stop.sh "$PWD/$B/redis-scale" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run NAME CMD...: runs one suite into its log and tallies it (tests/suite_lib.sh).
. tests/suite_lib.sh
run() {
    local name=$1 t=$(date +%s) rc
    shift
    echo "== $name: $*"
    "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    tally "$name" "$LOGS/$name.log" "$rc" "$t"
}
want() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if want core; then
    run core $B/test_core
    run two_tu $B/two_tu
    run cxx_check $B/cxx_check
    run tick_loop $B/tick_loop 2
    run poll_loop $B/poll_loop 2 </dev/null
    run kit_memory $B/kit_memory
    # the differential test's own proof: a store granting a reader beside a waiting writer diverges
    run kit_diff_plant $B/kit_diff_memory --plant --seed 1 --steps 2000
    run readme_blocks sh tests/readme_blocks.sh $B
    run doc_links sh tests/doc_links.sh
    run fn_length sh tests/fn_length.sh
    run api_doc sh tests/api_doc.sh
    run clang_core $B/clang/test_core
    run clang_cxx_check $B/clang/cxx_check
    run valgrind_core valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite $B/test_core
    # release reasons and statistics; the Prometheus example; make install + pkg-config + CMake
    run stats $B/test_stats
    run clang_stats $B/clang/test_stats
    run stats_prometheus sh -c '"$1" 1 >"$2" && grep -q "^simba_releases_total{scope=\"loop\",reason=\"stopped\"} 1$" "$2"' _ $B/stats_prometheus $LOGS/stats_prometheus.prom
    run install sh tests/test_install.sh
    # the deterministic simulator: a bounded batch, then the planted bugs it must catch
    run sim $B/sim --seeds 10000
    run sim_mutants sh tests/sim_mutants.sh
fi
if want asan; then
    run asan_core $B/asan/test_core
    run asan_kit_memory $B/asan/kit_memory
    run asan_stats $B/asan/test_stats
    run asan_sql $B/asan/test_sql
fi
if want sql; then
    run sql $B/test_sql
    run kit_sql $B/kit_sql
    # the differential test on a fixed seed (make diff-long explores random ones)
    run kit_diff_sql $B/kit_diff_sql --seed 1 --steps 2000
    # the kit on a shared in-memory database: the cases that touch the store's own state
    run kit_sql_memory env SIMBA_KIT_SQL_MEMORY=1 $B/kit_sql kit_start,kit_restart,kit_guard,kit_fencing,kit_fair_queue,kit_inspect,kit_force_release,kit_value,kit_yield,kit_sem_permits,kit_rw_readers,kit_followers,kit_fenced
    run test_with_simba $B/test_with_simba
    run multiprocess_sql env MP_WORKER=$B/mp_worker MP_CHECK=$B/mp_check sh tests/mp_test.sh
    # fenced writes: an owner SIGSTOPped past its lease writes nothing after a later owner
    run fault_fence_sql $B/fault_fence sql
    rm -f $B/fenced-example.db*
    run fenced_sqlite $B/fenced_sqlite $B/fenced-example.db
    run fenced_sqlite_cxx $B/fenced_sqlite_cxx $B/fenced-example.db
fi
if want redis; then
    if sh scripts/redis-start.sh "$SIMBA_REDIS_PORT" "$SIMBA_REDIS_DIR" >"$LOGS/redis-server.log" 2>&1; then
        run redis $B/test_redis
        # ASan runs 2-3x slower: the CPU bound of one poll is wider; "never waits in the
        # kernel" (no voluntary context switch) is checked the same
        run asan_redis env SIMBA_POLL_LIMIT_US=30000 $B/asan/test_redis
        run kit_redis $B/kit_redis
        run kit_diff_redis $B/kit_diff_redis --seed 1 --steps 2000
        # fenced writes: the API's own cases, then a paused owner resumed after a takeover
        run fenced_redis $B/test_fenced redis
        run asan_fenced_redis $B/asan/test_fenced redis
        EXTRA_GREP='^fault ' run fault_fenced_redis $B/test_fenced fault redis
        run fenced_redis_example $B/fenced_redis "$SIMBA_REDIS_PORT"
        run fenced_redis_example_cxx $B/fenced_redis_cxx "$SIMBA_REDIS_PORT"
        sh scripts/redis-stop.sh "$SIMBA_REDIS_DIR" >/dev/null 2>&1
    else
        echo "== redis: could not start redis-server (see $LOGS/redis-server.log)"
        FAIL=$((FAIL + 1)); FAILED="$FAILED redis-server"
    fi
fi
if want zk; then
    if sh scripts/zk-start.sh "$SIMBA_ZK_PORT" "$SIMBA_ZK_DIR" >"$LOGS/zk-server.log" 2>&1; then
        run zk $B/test_zk
        # libzookeeper_mt keeps some of its own records past zookeeper_close: not ours to free
        run asan_zk env LSAN_OPTIONS=suppressions=$PWD/tests/lsan_zookeeper.supp $B/asan/test_zk
        run kit_zk $B/kit_zk
        run kit_diff_zk $B/kit_diff_zk --seed 1 --steps 2000
        run fenced_zk $B/test_fenced zk
        run asan_fenced_zk $B/asan/test_fenced zk
        EXTRA_GREP='^fault ' run fault_fenced_zk $B/test_fenced fault zk
        run fenced_zk_example $B/fenced_zk "127.0.0.1:$SIMBA_ZK_PORT"
        run fenced_zk_example_cxx $B/fenced_zk_cxx "127.0.0.1:$SIMBA_ZK_PORT"
        run zk_include $B/zk_include_c
        run zk_include_cxx $B/zk_include_cxx
        sh scripts/zk-stop.sh "$SIMBA_ZK_DIR" >/dev/null 2>&1
    else
        echo "== zk: could not start ZooKeeper (see $LOGS/zk-server.log)"
        FAIL=$((FAIL + 1)); FAILED="$FAILED zk-server"
    fi
fi
# A full run runs the pg group once, from the private copy (private_checkout, below).
if want pg && [ -n "${SIMBA_TEST_ONLY:-}" ]; then
    # test_pg starts and stops a private server of its own on SIMBA_PG_PORT + 1
    if sh scripts/pg-start.sh "$SIMBA_PG_PORT" "$SIMBA_PG_DIR" >"$LOGS/pg-server.log" 2>&1; then
        run pg $B/test_pg
        run asan_pg env SIMBA_POLL_LIMIT_US=30000 $B/asan/test_pg
        run kit_pg $B/kit_pg
        run kit_diff_pg $B/kit_diff_pg --seed 1 --steps 2000
        run fault_fence_pg $B/fault_fence pg
        run fenced_pg $B/fenced_pg "hostaddr=127.0.0.1 port=$SIMBA_PG_PORT user=postgres password=simba dbname=postgres"
        run fenced_pg_cxx $B/fenced_pg_cxx "hostaddr=127.0.0.1 port=$SIMBA_PG_PORT user=postgres password=simba dbname=postgres"
        # least privilege: an owner, an application and a read-only role, through the CLI
        run pg_roles bash tests/test_pg_roles.sh
        # TLS: a server of its own with a throwaway CA, on SIMBA_PG_TLS_PORT (default port + 20)
        run pg_tls env SIMBA_PG_TLS_PORT=${SIMBA_PG_TLS_PORT:-$((SIMBA_PG_PORT + 20))} sh tests/test_pg_tls.sh
        sh scripts/pg-stop.sh "$SIMBA_PG_DIR" >/dev/null 2>&1
    else
        echo "== pg: could not start PostgreSQL (see $LOGS/pg-server.log)"
        FAIL=$((FAIL + 1)); FAILED="$FAILED pg-server"
    fi
fi
# MariaDB (simba_mysql.h): a private server on SIMBA_MYSQL_PORT, its data under $B/mysql;
# test_mysql restarts one of its own on SIMBA_MYSQL_PORT + 1 (data in SIMBA_MYSQL_DIR2).
# The kit runs in three processes, each a group of cases (about 75 s in all), then the fenced
# write against a paused owner (tests/fault_fence.c, about 10 s).
if want mysql; then
    if sh scripts/mysql-start.sh "$SIMBA_MYSQL_PORT" "$SIMBA_MYSQL_DIR" >"$LOGS/mysql-server.log" 2>&1; then
        run mysql $B/test_mysql
        run asan_mysql $B/asan/test_mysql
        run mysql_kit_a $B/kit_mysql kit_start,kit_restart,kit_guard,kit_fencing,kit_locker,kit_scheduler,kit_observer,kit_schedule,kit_multi,kit_stop_wait,kit_loop_close,kit_loop_free_during,kit_stop_and_free
        run mysql_kit_b $B/kit_mysql kit_inspect,kit_list,kit_force,kit_stale,kit_value,kit_yield,kit_at_risk,kit_late
        run mysql_kit_c $B/kit_mysql kit_fair_queue,kit_sem,kit_rw,kit_followers,kit_fenced
        # the same kit on backends of three request connections each (POOL in simba_mysql.h)
        run mysql_kit_pool env SIMBA_KIT_MYSQL_CONNECTIONS=3 $B/kit_mysql kit_start,kit_fencing,kit_locker,kit_observer,kit_fair_queue,kit_loop_free_during,kit_stop_and_free,kit_sem,kit_rw,kit_followers,kit_fenced
        run fault_fence_mysql $B/fault_fence mysql
        run kit_diff_mysql $B/kit_diff_mysql --seed 1 --steps 2000
        run kit_diff_mysql_pool env SIMBA_KIT_MYSQL_CONNECTIONS=3 $B/kit_diff_mysql --seed 2 --steps 1000
        # TLS: a server of its own with a throwaway CA, on SIMBA_MYSQL_TLS_PORT (default port + 20)
        run mysql_tls env SIMBA_MYSQL_TLS_PORT=${SIMBA_MYSQL_TLS_PORT:-$((SIMBA_MYSQL_PORT + 20))} sh tests/test_mysql_tls.sh
        # least privilege: an owner, an application and a read-only role, through the CLI
        run mysql_roles bash tests/test_mysql_roles.sh
        sh scripts/mysql-stop.sh "$SIMBA_MYSQL_DIR" >/dev/null 2>&1
    else
        echo "== mysql: could not start MariaDB (see $LOGS/mysql-server.log)"
        FAIL=$((FAIL + 1)); FAILED="$FAILED mysql-server"
    fi
fi
# the simba command-line tool: tests/test_cli.sh starts its own redis-server, ZooKeeper,
# PostgreSQL and MariaDB (SIMBA_CLI_REDIS_PORT 6430, SIMBA_CLI_ZK_PORT 2221, SIMBA_CLI_PG_PORT
# 5447, SIMBA_CLI_MYSQL_PORT 3447) and stops them by PID; tests/test_elect.sh
# (leadership values, yield, three elect processes and an observer on every backend) its own
# redis-server, ZooKeeper and PostgreSQL on those ports + 2 (and SIMBA_CLI_PG_PORT 5447 + 2)
if want cli || [ -z "${SIMBA_TEST_ONLY:-}" ]; then
    run cli bash tests/test_cli.sh
    run cli_elect bash tests/test_elect.sh
fi
# event-loop hooks and adapters: tests/test_loops.sh starts its own redis-server
# (SIMBA_LOOPS_REDIS_PORT 6500) and stops it by PID
if want loops || [ -z "${SIMBA_TEST_ONLY:-}" ]; then
    run loops bash tests/test_loops.sh "$B"
fi
# 10,000 services on one loop renew and hand over, SQLite and Redis: its own
# redis-server (SIMBA_SCALE_REDIS_PORT 6470), stopped by PID; `make test-scale` (about 2.5
# minutes: not in a full run, which keeps within its budget)
if want scale; then
    export SIMBA_SCALE_REDIS_PORT=${SIMBA_SCALE_REDIS_PORT:-6470}
    if sh scripts/redis-start.sh "$SIMBA_SCALE_REDIS_PORT" "$PWD/$B/redis-scale" >"$LOGS/redis-scale.log" 2>&1; then
        run scale $B/test_scale
        sh scripts/redis-stop.sh "$PWD/$B/redis-scale" >/dev/null 2>&1
    else
        echo "== scale: could not start redis-server (see $LOGS/redis-scale.log)"
        FAIL=$((FAIL + 1)); FAILED="$FAILED redis-scale"
    fi
fi
# Redis Cluster and Sentinel: tests/test_redis_ha.sh starts its own loopback
# cluster (SIMBA_CLUSTER_PORT 6600..6606) and sentinel setup (6650/6651, 26600..26602), stops them by PID
if want cluster || [ -z "${SIMBA_TEST_ONLY:-}" ]; then
    run cluster sh tests/test_redis_ha.sh
fi
# a 3-node ZooKeeper ensemble: the shared kit on it, then the fault harness (kill the
# leader, kill the clients' follower, lose quorum) for 20 s; three JVMs on 2272..2289, stopped by PID
if want ensemble || [ -z "${SIMBA_TEST_ONLY:-}" ]; then
    run ensemble env ZK_ENSEMBLE_FAULT_SECONDS=${ZK_ENSEMBLE_FAULT_SECONDS:-20} bash tests/test_zk_ensemble.sh
fi
# the network-namespace fault lab, short form (5 rows, 1 run each): needs root, fails without it
if want lab || [ -z "${SIMBA_TEST_ONLY:-}" ]; then
    run lab env LAB_DIR=$B/lab-short bash tests/lab/lab.sh --short
fi
if want reliability && [ -f tests/test_reliability.sh ]; then
    # fault harness, bad-input table, short fuzz run: starts its own servers on its own ports
    run reliability bash tests/test_reliability.sh
fi

# the PostgreSQL suites (the pg group) from a copy of the tree under a mode-0700 directory
# (ports SIMBA_PRIVATE_PG_PORT 5456..5457 and +20 for TLS, SIMBA_PRIVATE_FAULT_PG_PORT 5458): servers that
# run as another user must not depend on where the checkout lives
if want private_checkout || [ -z "${SIMBA_TEST_ONLY:-}" ]; then
    run private_checkout bash tests/test_private_checkout.sh
fi

echo "suites took $(( $(date +%s) - T0 ))s${FAILED:+; failed:$FAILED}"
echo "total: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
