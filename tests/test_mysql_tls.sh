#!/bin/sh
# test_mysql_tls.sh -- MySQL/MariaDB over TLS: a throwaway CA made with openssl here, a server on
# 127.0.0.1:$SIMBA_MYSQL_TLS_PORT (default $SIMBA_MYSQL_PORT + 20, 3410) with a certificate
# naming IP:127.0.0.1 and require_secure_transport=ON, a user certuser REQUIRE X509; then
# build/test_mysql_tls and the command-line tool's URL parameters against it. Stops the server
# (mysql-stop.sh) and removes the certificates on exit. Prints "N passed, N failed" last.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
PORT=${SIMBA_MYSQL_TLS_PORT:-$((${SIMBA_MYSQL_PORT:-3390} + 20))}
T=$(mktemp -d "${TMPDIR:-/tmp}/simba-mytls.XXXXXX") || exit 1
PASS=0
FAIL=0
cleanup() {
    [ -f "$T/my/mysql.pid" ] && sh scripts/mysql-stop.sh "$T/my" >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
die() { echo "test_mysql_tls: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

# the CA, a CA that signed nothing of the server's, the server's and a client's certificate
C=$T/certs
. tests/tls_certs.sh
tls_certs "$C" "subjectAltName=IP:127.0.0.1" || die "openssl could not make the certificates"
S=$T/server
mkdir -p "$S"
cp "$C/server.crt" "$C/server.key" "$C/ca.crt" "$S/"

SIMBA_MYSQL_TLS_DIR=$S sh scripts/mysql-start.sh "$PORT" "$T/my" >"$T/start.log" 2>&1 || { cat "$T/start.log" >&2; die "the server did not start"; }
mariadb --no-defaults -S "$T/my/sock" -uroot -psimba -e "
    CREATE USER certuser@'127.0.0.1' REQUIRE X509; GRANT ALL ON simba.* TO certuser@'127.0.0.1';
    SET GLOBAL require_secure_transport = ON" >"$T/sql.log" 2>&1 || { cat "$T/sql.log" >&2; die "cannot set the server up"; }

# the library
SIMBA_MYSQL_TLS_PORT=$PORT SIMBA_MYSQL_TLS_CERTS=$C "$B/test_mysql_tls" >"$T/lib.log" 2>&1
rc=$?
cat "$T/lib.log"
line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$T/lib.log" | tail -1)
p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
PASS=$((PASS + ${p:-0}))
FAIL=$((FAIL + ${f:-1}))
[ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ] && FAIL=$((FAIL + 1))

# the command-line tool
U="mysql://root@127.0.0.1:$PORT/simba?table=tls_cli&ssl-mode=verify_identity"
if MYSQL_PWD=simba "$B/simba" -u "$U&ssl-ca=$C/ca.crt" run tls-cli --connect-timeout 5 -- true >"$T/cli.log" 2>&1; then
    ok "simba run over verify_identity with the right CA"
else
    bad "simba run over verify_identity with the right CA: $(cat "$T/cli.log")"
fi
MYSQL_PWD=simba "$B/simba" -u "$U&ssl-ca=$C/other-ca.crt" run tls-cli --connect-timeout 1 -- true >"$T/cli.log" 2>&1
rc=$?
if [ $rc -eq 69 ]; then
    ok "simba run with the wrong CA: status 69"
else
    bad "simba run with the wrong CA: status $rc: $(cat "$T/cli.log")"
fi
if "$B/simba" -u "$U&ssl-mode=verify" ls >"$T/cli.log" 2>&1 || ! grep -q "ssl-mode" "$T/cli.log"; then
    bad "a bad ssl-mode: $(cat "$T/cli.log")"
else
    ok "a bad ssl-mode is refused in words"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
