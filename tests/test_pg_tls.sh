#!/bin/sh
# test_pg_tls.sh -- PostgreSQL over TLS: a throwaway CA made with openssl here, a server on
# 127.0.0.1:$SIMBA_PG_TLS_PORT (default $SIMBA_PG_PORT + 20, 5460) with ssl=on, a certificate naming the host
# simba-tls.test and a pg_hba.conf that takes TLS connections only (certuser by client
# certificate), then build/test_pg_tls and the command-line tool's URL parameters against it.
# Stops the server (pg-stop.sh) and removes the certificates on exit. Prints "N passed, N failed" last.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
PORT=${SIMBA_PG_TLS_PORT:-$((${SIMBA_PG_PORT:-5440} + 20))}
T=$(mktemp -d "${TMPDIR:-/tmp}/simba-tls.XXXXXX") || exit 1
PASS=0
FAIL=0
cleanup() {
    [ -s "$T/pg/datadir" ] && sh scripts/pg-stop.sh "$T/pg" >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
die() { echo "test_pg_tls: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

# the CA, a CA that signed nothing of the server's, the server's and a client's certificate
C=$T/certs
. tests/tls_certs.sh
tls_certs "$C" "subjectAltName=DNS:simba-tls.test" || die "openssl could not make the certificates"

S=$T/server
mkdir -p "$S"
cp "$C/server.crt" "$C/server.key" "$C/ca.crt" "$S/"
cat >"$S/pg_hba.conf" <<'HBA'
local   all all                   trust
hostssl all certuser 127.0.0.1/32 cert
hostssl all all      127.0.0.1/32 scram-sha-256
host    all all      127.0.0.1/32 reject
HBA
SIMBA_PG_TLS_DIR=$S sh scripts/pg-start.sh "$PORT" "$T/pg" >"$T/start.log" 2>&1 || { cat "$T/start.log" >&2; die "the server did not start"; }
PGPASSWORD=simba PGSSLMODE=require psql -q -X -v ON_ERROR_STOP=1 "hostaddr=127.0.0.1 port=$PORT user=postgres dbname=postgres" \
    -c "CREATE ROLE certuser LOGIN SUPERUSER" >"$T/psql.log" 2>&1 || { cat "$T/psql.log" >&2; die "cannot create certuser"; }

# the library
SIMBA_PG_TLS_PORT=$PORT SIMBA_PG_TLS_CERTS=$C "$B/test_pg_tls" >"$T/lib.log" 2>&1
rc=$?
cat "$T/lib.log"
line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$T/lib.log" | tail -1)
p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
PASS=$((PASS + ${p:-0}))
FAIL=$((FAIL + ${f:-1}))
[ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ] && FAIL=$((FAIL + 1))

# the command-line tool: the HOST name is what verify-full checks, hostaddr where it connects
U="postgres://postgres@simba-tls.test:$PORT/postgres?hostaddr=127.0.0.1&sslmode=verify-full"
if PGPASSWORD=simba "$B/simba" -u "$U&sslrootcert=$C/ca.crt" run tls-cli --connect-timeout 5 -- true >"$T/cli.log" 2>&1; then
    ok "simba run over verify-full with the right CA"
else
    bad "simba run over verify-full with the right CA: $(cat "$T/cli.log")"
fi
PGPASSWORD=simba "$B/simba" -u "$U&sslrootcert=$C/other-ca.crt" run tls-cli --connect-timeout 1 -- true >"$T/cli.log" 2>&1
rc=$?
if [ $rc -eq 69 ] && grep -q "certificate verify failed" "$T/cli.log"; then
    ok "simba run with the wrong CA: status 69, \"$(grep -o 'certificate verify failed' "$T/cli.log" | head -1)\""
else
    bad "simba run with the wrong CA: status $rc: $(cat "$T/cli.log")"
fi
if "$B/simba" -u "postgres://simba-tls.test:$PORT/postgres" ls >"$T/cli.log" 2>&1; then
    bad "a HOST name without hostaddr was taken"
elif grep -q "hostaddr=IP" "$T/cli.log"; then
    ok "a HOST name without hostaddr is refused in words"
else
    bad "a HOST name without hostaddr: $(cat "$T/cli.log")"
fi
if "$B/simba" -u "$U&sslmode=verify" ls >"$T/cli.log" 2>&1 || ! grep -q "sslmode" "$T/cli.log"; then
    bad "a bad sslmode: $(cat "$T/cli.log")"
else
    ok "a bad sslmode is refused in words"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
