#!/usr/bin/env bash
# test_pg_roles.sh -- PostgreSQL with least privilege, through the command-line tool: on the
# server at 127.0.0.1:$SIMBA_PG_PORT (default 5440, superuser postgres, password simba; the pg
# group of tests/run.sh starts it) a database of its own, owned by an owner role that runs the
# setup once; then the grants of docs/postgresql.md (its "Privileges" SQL block, run as it is)
# for an application role and a read-only role. The application role runs `simba run` with a
# fenced write, `get` and `ls`; the read-only role `get`, `ls` and `watch`, and is refused
# when it contends; a role without grants and a wrong password fail at once (under 2 s) with
# the privilege or the login named. Drops the database and the roles on exit.
# Prints "N passed, N failed" last.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
P=${SIMBA_PG_PORT:-5440}
W=$(mktemp -d "${TMPDIR:-/tmp}/simba-roles.XXXXXX") || exit 1
DB=simba_roles_$$
PASS=0
FAIL=0
. tests/cli_lib.sh
# the roles are the cluster's: names of this run only
OWNER=simba_owner_$$ APP=simba_app_$$ RO=simba_reader_$$ NOG=simba_nogrant_$$
su_sql() { PGPASSWORD=simba psql -X -q -v ON_ERROR_STOP=1 "hostaddr=127.0.0.1 port=$P user=postgres dbname=${2:-postgres}" -c "$1"; }
as_sql() { # ROLE SQL: in the test's database
    PGPASSWORD=pw psql -X -q -v ON_ERROR_STOP=1 "hostaddr=127.0.0.1 port=$P user=$1 dbname=$DB" -c "$2"
}
cleanup() {
    [ -n "${WATCH:-}" ] && kill "$WATCH" 2>/dev/null
    su_sql "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
    for r in "$OWNER" "$APP" "$RO" "$NOG"; do su_sql "DROP ROLE IF EXISTS $r" >/dev/null 2>&1; done
    rm -rf "$W"
}
trap cleanup EXIT
url() { echo "postgres://$1@127.0.0.1:$P/$DB${2:+?table=$2}"; }
simba_as() { local role=$1 pw=$2; shift 2; PGPASSWORD=$pw "$B/simba" -u "$(url "$role")" "$@"; }
ms() { date +%s%3N; }

su_sql "CREATE ROLE $OWNER LOGIN PASSWORD 'pw'; CREATE ROLE $APP LOGIN PASSWORD 'pw';
        CREATE ROLE $RO LOGIN PASSWORD 'pw'; CREATE ROLE $NOG LOGIN PASSWORD 'pw'" >"$W/err" 2>&1 ||
    { cat "$W/err"; echo "0 passed, 1 failed"; exit 1; }
su_sql "CREATE DATABASE $DB OWNER $OWNER" >"$W/err" 2>&1 || { cat "$W/err"; echo "0 passed, 1 failed"; exit 1; }

# the owner runs the setup once (any command: here ls), and owns the application's table
expect_rc "owner: the first ls makes simba's objects" 0 simba_as "$OWNER" pw ls
v=$(PGPASSWORD=pw psql -X -At "hostaddr=127.0.0.1 port=$P user=$OWNER dbname=$DB" -c "SELECT obj_description('simba_mutex'::regclass, 'pg_class')")
if [ "$v" = "simba schema version 1" ]; then ok "the version comment: $v"; else bad "the version comment: '$v'"; fi
as_sql "$OWNER" "CREATE TABLE orders (id int PRIMARY KEY, state text, fence bigint); INSERT INTO orders VALUES (42, 'new', 0);
                 GRANT SELECT, UPDATE ON orders TO $APP" >"$W/err" 2>&1 || bad "the application's table: $(cat "$W/err")"

# the grants exactly as docs/postgresql.md gives them (roles app and reader there)
awk '/^## Privileges/ { p = 1 } p && /^```sql/ { s = 1; next } s && /^```/ { exit } s' docs/postgresql.md |
    sed -e "s/\bapp\b/$APP/g" -e "s/\breader\b/$RO/g" >"$W/grants.sql"
if grep -q GRANT "$W/grants.sql" && PGPASSWORD=pw psql -X -q -v ON_ERROR_STOP=1 \
    "hostaddr=127.0.0.1 port=$P user=$OWNER dbname=$DB" -f "$W/grants.sql" >"$W/err" 2>&1; then
    ok "the grants of docs/postgresql.md ($(grep -c GRANT "$W/grants.sql") statements) run as the owner"
else bad "the grants of docs/postgresql.md: $(cat "$W/err")"; fi

# the application role: run with a fenced write in the write's own statement, get, ls
cat >"$W/write.sh" <<EOF
PGPASSWORD=pw exec psql -X -q -v ON_ERROR_STOP=1 "hostaddr=127.0.0.1 port=$P user=$APP dbname=$DB" \
  -c "UPDATE orders SET state = 'shipped', fence = \$SIMBA_FENCE WHERE id = 42 AND simba_check_fence('\$SIMBA_MUTEX', \$SIMBA_FENCE)"
EOF
expect_rc "app: run -n orders -- a fenced UPDATE" 0 simba_as "$APP" pw run -n orders -- sh "$W/write.sh"
f=$(PGPASSWORD=pw psql -X -At "hostaddr=127.0.0.1 port=$P user=$APP dbname=$DB" -c "SELECT state || ' ' || fence FROM orders")
if [ "$f" = "shipped 1" ]; then ok "app: the fenced write landed with fence 1"; else bad "app: the row is '$f'"; fi
expect_rc "app: a second run writes under fence 2" 0 simba_as "$APP" pw run -n orders -- sh "$W/write.sh"
as_sql "$APP" "UPDATE orders SET state = 'stale' WHERE id = 42 AND simba_check_fence('orders', 1)" >"$W/out" 2>"$W/err"
f=$(PGPASSWORD=pw psql -X -At "hostaddr=127.0.0.1 port=$P user=$APP dbname=$DB" -c "SELECT state || ' ' || fence FROM orders")
if grep -q 'moved on to 2' "$W/err" && [ "$f" = "shipped 2" ]; then ok "app: a stale fence in the statement is refused, nothing written"
else bad "app: stale fence: row '$f', $(cat "$W/err")"; fi
expect_rc "app: get orders (nobody owns it now)" 1 simba_as "$APP" pw get orders
if out_has "fence: 2"; then ok "app: get shows fence 2"; else bad "app: get printed $(cat "$W/out")"; fi
expect_rc "app: ls" 0 simba_as "$APP" pw ls
if out_has "^orders "; then ok "app: ls lists orders"; else bad "app: ls printed $(cat "$W/out")"; fi

# the read-only role: get, ls, watch; contending is refused with the privilege named
expect_rc "reader: get orders" 1 simba_as "$RO" pw get orders
expect_rc "reader: ls" 0 simba_as "$RO" pw ls
PGPASSWORD=pw "$B/simba" -u "$(url "$RO")" watch orders >"$W/watch.out" 2>"$W/watch.err" &
WATCH=$!
sleep 0.5
expect_rc "app: run -n orders while the reader watches" 0 simba_as "$APP" pw run -n orders -- sleep 1
if wait_for 5 grep -q 'orders owner=' "$W/watch.out" && ! grep -q 'denied' "$W/watch.err"; then ok "reader: watch saw the owner: $(head -n 1 "$W/watch.out")"
else bad "reader: watch printed '$(cat "$W/watch.out")' / '$(cat "$W/watch.err")'"; fi
kill "$WATCH" 2>/dev/null; wait "$WATCH" 2>/dev/null; WATCH=
t0=$(ms)
simba_as "$RO" pw run -n --connect-timeout 2 orders -- true >"$W/out" 2>"$W/err"; rc=$?
t=$(( $(ms) - t0 ))
if [ "$rc" -ne 0 ] && err_has "permission denied for function simba_mutex_acq" && err_has "EXECUTE"; then
    ok "reader: run refused (exit $rc, $t ms): $(tail -n 1 "$W/err" | head -c 200)"
else bad "reader: run: exit $rc after $t ms: $(cat "$W/err")"; fi

# no grants, a wrong password, objects missing: at once, with words
denied() { # DESC WANT1 WANT2 ROLE PW ARGS...
    local d=$1 w1=$2 w2=$3 role=$4 pw=$5 t0 t rc; shift 5
    t0=$(ms)
    simba_as "$role" "$pw" "$@" >"$W/out" 2>"$W/err"; rc=$?
    t=$(( $(ms) - t0 ))
    if [ "$rc" -ne 0 ] && [ "$t" -lt 2000 ] && err_has "$w1" && err_has "$w2"; then ok "$d: exit $rc in $t ms"
    else bad "$d: exit $rc in $t ms: $(cat "$W/err")"; fi
}
denied "no grants: get" "permission denied for table simba_mutex" "SELECT" "$NOG" pw get orders
denied "no grants: ls" "permission denied for table simba_mutex" "SELECT" "$NOG" pw ls
denied "wrong password: get" "password authentication failed" "$APP" "$APP" wrong get orders
PGPASSWORD=pw "$B/simba" -u "$(url "$APP" other)" ls >"$W/out" 2>"$W/err"; rc=$?
if [ "$rc" -ne 0 ] && err_has "may not make them" && err_has "permission denied for schema public"; then ok "app: a table not set up is not made by it (exit $rc)"
else bad "app: table not set up: exit $rc: $(cat "$W/err")"; fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
