#!/usr/bin/env bash
# test_mysql_roles.sh -- MySQL/MariaDB with least privilege, through the command-line tool: on
# the server at 127.0.0.1:$SIMBA_MYSQL_PORT (default 3390, user root, password simba; the mysql
# group of tests/run.sh starts it) a database of its own; an owner role with the owner's grants
# of docs/mysql.md runs the setup once; then the grants of docs/mysql.md (its "Privileges" SQL
# block, run as it is by the owner) for an application role and a read-only role. The
# application role runs `simba run` with a fenced write, `get` and `ls`, on timers while the
# owner may not ring other users' doorbells and on the doorbell once it may; the read-only role
# `get`, `ls` and `watch`, and is refused when it contends; a role without grants, one with
# grants on other tables only and a wrong password fail at once (exit 77, under 2 s) with the
# privilege or the login named. Drops the database and the roles on exit.
# Prints "N passed, N failed" last.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
P=${SIMBA_MYSQL_PORT:-3390}
W=$(mktemp -d "${TMPDIR:-/tmp}/simba-myroles.XXXXXX") || exit 1
DB=simba_roles_$$
PASS=0
FAIL=0
. tests/cli_lib.sh
# the roles are the server's: names of this run only
OWNER=simba_owner_$$ APP=simba_app_$$ RO=simba_reader_$$ NOG=simba_nogrant_$$ OTHER=simba_other_$$
my() { mariadb --no-defaults -h 127.0.0.1 -P "$P" -u"$1" -p"$2" -N -B "${@:3}"; }
su_sql() { my root simba -e "$1"; }
as_sql() { my "$1" pw "$DB" -e "$2"; } # ROLE SQL: in the test's database
cleanup() {
    [ -n "${WATCH:-}" ] && kill "$WATCH" 2>/dev/null
    su_sql "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
    for r in "$OWNER" "$APP" "$RO" "$NOG" "$OTHER"; do su_sql "DROP USER IF EXISTS '$r'@'%'" >/dev/null 2>&1; done
    rm -rf "$W"
}
trap cleanup EXIT
simba_as() { local role=$1 pw=$2; shift 2; MYSQL_PWD=$pw "$B/simba" -u "mysql://$role@127.0.0.1:$P/$DB" "$@"; }
ms() { date +%s%3N; }
# the SQL block of docs/mysql.md's Privileges after the line that names it (roles owner, app,
# reader and database app there)
doc_block() {
    awk -v m="$1" '/^## Privileges/ { p = 1 } p && index($0, m) { f = 1 } f && /^```sql/ { s = 1; next } s && /^```/ { exit } s' docs/mysql.md |
        sed -e "s/'owner'@/'$OWNER'@/g" -e "s/'app'@/'$APP'@/g" -e "s/'reader'@/'$RO'@/g" -e "s/\bapp\.\*/$DB.*/g"
}

for r in "$OWNER" "$APP" "$RO" "$NOG" "$OTHER"; do echo "CREATE USER '$r'@'%' IDENTIFIED BY 'pw';"; done >"$W/users.sql"
echo "CREATE DATABASE $DB;" >>"$W/users.sql"
doc_block "The owner, once" >"$W/owner.sql"
if grep -q GRANT "$W/owner.sql" && cat "$W/users.sql" "$W/owner.sql" | my root simba >"$W/err" 2>&1; then
    ok "the owner's grants of docs/mysql.md ($(grep -c GRANT "$W/owner.sql") statements) run as root"
else cat "$W/err"; echo "0 passed, 1 failed"; exit 1; fi

# the owner runs the setup once (any command: here ls), and owns the application's table
expect_rc "owner: the first ls makes simba's objects" 0 simba_as "$OWNER" pw ls
v=$(as_sql "$OWNER" "SELECT v FROM simba_mutex_meta WHERE k = 'version'")
if [ "$v" = 1 ]; then ok "the version row: $v"; else bad "the version row: '$v'"; fi
as_sql "$OWNER" "CREATE TABLE orders (id INT PRIMARY KEY, state VARCHAR(16), fence BIGINT); INSERT INTO orders VALUES (42, 'new', 0);
                 GRANT SELECT, UPDATE ON orders TO '$APP'@'%'; GRANT SELECT ON orders TO '$OTHER'@'%'" >"$W/err" 2>&1 ||
    bad "the application's table: $(cat "$W/err")"

# the grants exactly as docs/mysql.md gives them, run by the owner
doc_block "The application role" >"$W/grants.sql"
if grep -q GRANT "$W/grants.sql" && my "$OWNER" pw "$DB" <"$W/grants.sql" >"$W/err" 2>&1; then
    ok "the grants of docs/mysql.md ($(grep -c GRANT "$W/grants.sql") statements) run as the owner"
else bad "the grants of docs/mysql.md: $(cat "$W/err")"; fi

# the application role: run with a fenced write inside the write's transaction, get, ls
cat >"$W/write.sh" <<EOF
exec mariadb --no-defaults -h 127.0.0.1 -P $P -u$APP -ppw $DB -e "START TRANSACTION;
  SELECT simba_check_fence('\$SIMBA_MUTEX', \$SIMBA_FENCE); UPDATE orders SET state = 'shipped', fence = \$SIMBA_FENCE WHERE id = 42; COMMIT"
EOF
SIMBA_DEBUG=1 expect_rc "app: run -n orders -- a fenced UPDATE" 0 simba_as "$APP" pw run -n orders -- sh "$W/write.sh"
if err_has "push by timers" && err_has "CONNECTION ADMIN"; then ok "app: the backend says it runs on timers: $(grep -m1 'push by' "$W/err" | head -c 160)"
else bad "app: no word of timers: $(cat "$W/err")"; fi
f=$(as_sql "$APP" "SELECT CONCAT(state, ' ', fence) FROM orders")
if [ "$f" = "shipped 1" ]; then ok "app: the fenced write landed with fence 1"; else bad "app: the row is '$f'"; fi
expect_rc "app: a second run writes under fence 2" 0 simba_as "$APP" pw run -n orders -- sh "$W/write.sh"
as_sql "$APP" "START TRANSACTION; SELECT simba_check_fence('orders', 1); UPDATE orders SET state = 'stale'; COMMIT" >"$W/out" 2>"$W/err"
f=$(as_sql "$APP" "SELECT CONCAT(state, ' ', fence) FROM orders")
if grep -q 'moved on to 2' "$W/err" && [ "$f" = "shipped 2" ]; then ok "app: a stale fence is refused, nothing written"
else bad "app: stale fence: row '$f', $(cat "$W/err")"; fi
expect_rc "app: get orders (nobody owns it now)" 1 simba_as "$APP" pw get orders
if out_has "fence: 2"; then ok "app: get shows fence 2"; else bad "app: get printed $(cat "$W/out")"; fi
expect_rc "app: ls" 0 simba_as "$APP" pw ls
if out_has "^orders "; then ok "app: ls lists orders"; else bad "app: ls printed $(cat "$W/out")"; fi

# the doorbell of another user's process: the owner's CONNECTION ADMIN
doc_block "The doorbell (see Push)" >"$W/bell.sql"
if grep -q GRANT "$W/bell.sql" && my root simba <"$W/bell.sql" >"$W/err" 2>&1; then ok "the doorbell's grants of docs/mysql.md run as root"
else bad "the doorbell's grants: $(cat "$W/err")"; fi
SIMBA_DEBUG=1 simba_as "$APP" pw run -n orders -- sleep 1 >"$W/out" 2>"$W/err" &
RUN=$!
if wait_for 5 sh -c "mariadb --no-defaults -h 127.0.0.1 -P $P -uroot -psimba -N -e \"SELECT 1 FROM information_schema.PROCESSLIST
    WHERE USER = '$APP' AND INFO LIKE 'SELECT GET_LOCK(%simba-bell:%'\" | grep -q 1"; then ok "app: its doorbell is parked"
else bad "app: no parked doorbell"; fi
wait "$RUN"
if ! err_has "push by timers"; then ok "app: no word of timers"; else bad "app: still on timers: $(cat "$W/err")"; fi

# the read-only role: get, ls, watch; contending is refused with the privilege named
expect_rc "reader: get orders" 1 simba_as "$RO" pw get orders
expect_rc "reader: ls" 0 simba_as "$RO" pw ls
MYSQL_PWD=pw "$B/simba" -u "mysql://$RO@127.0.0.1:$P/$DB" watch orders >"$W/watch.out" 2>"$W/watch.err" &
WATCH=$!
sleep 0.5
expect_rc "app: run -n orders while the reader watches" 0 simba_as "$APP" pw run -n orders -- sleep 1.5
if wait_for 5 grep -q 'orders owner=' "$W/watch.out" && ! grep -q 'denied' "$W/watch.err"; then ok "reader: watch saw the owner: $(head -n 1 "$W/watch.out")"
else bad "reader: watch printed '$(cat "$W/watch.out")' / '$(cat "$W/watch.err")'"; fi
kill "$WATCH" 2>/dev/null; wait "$WATCH" 2>/dev/null; WATCH=

# no grants, grants on other tables only, contending read-only, a wrong password, objects
# missing: at once, exit 77, with words
denied() { # DESC WANT1 WANT2 ROLE PW ARGS...
    local d=$1 w1=$2 w2=$3 role=$4 pw=$5 t0 t rc; shift 5
    t0=$(ms)
    simba_as "$role" "$pw" "$@" >"$W/out" 2>"$W/err"; rc=$?
    t=$(( $(ms) - t0 ))
    if [ "$rc" -eq 77 ] && [ "$t" -lt 2000 ] && err_has "$w1" && err_has "$w2"; then ok "$d: exit $rc in $t ms: $(tail -n 1 "$W/err" | head -c 220)"
    else bad "$d: exit $rc in $t ms: $(cat "$W/err")"; fi
}
denied "reader: run" "simba_mutex_acq" "this role needs EXECUTE" "$RO" pw run -n --connect-timeout 2 orders -- true
denied "no grants: get" "to database '$DB'" "this role needs EXECUTE" "$NOG" pw get orders
denied "no grants: run" "to database '$DB'" "this role needs EXECUTE" "$NOG" pw run -n orders -- true
denied "other tables only: ls" "simba_mutex_version" "this role needs EXECUTE" "$OTHER" pw ls
denied "wrong password: get" "Access denied for user '$APP'" "using password: YES" "$APP" wrong get orders
MYSQL_PWD=pw "$B/simba" -u "mysql://$APP@127.0.0.1:$P/$DB?table=other" ls >"$W/out" 2>"$W/err"; rc=$?
if [ "$rc" -eq 77 ] && err_has "never set up on this table" && err_has "other_version"; then ok "app: a table not set up is not made by it (exit $rc)"
else bad "app: table not set up: exit $rc: $(cat "$W/err")"; fi
su_sql "GRANT EXECUTE ON $DB.* TO '$OTHER'@'%'" >"$W/err" 2>&1 || bad "EXECUTE on the database: $(cat "$W/err")"
MYSQL_PWD=pw "$B/simba" -u "mysql://$OTHER@127.0.0.1:$P/$DB?table=other" ls >"$W/out" 2>"$W/err"; rc=$?
if [ "$rc" -eq 77 ] && err_has "may not make them" && err_has "CREATE command denied"; then ok "a role that may not create: told so (exit $rc)"
else bad "a role that may not create: exit $rc: $(cat "$W/err")"; fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
