#!/bin/sh
# pg-start.sh PORT DIR -- start a throwaway PostgreSQL cluster on 127.0.0.1:PORT and wait until
# it answers. Stop it with pg-stop.sh DIR (which removes its data; --keep for a restart).
# initdb refuses root: the cluster runs as the postgres user (runuser). Its data directory and
# socket live in a private directory of that user under /tmp (or /var/tmp), so a checkout
# anywhere works, a 0700 home included; DIR (the caller's) holds only the pointer DIR/datadir,
# DIR/postgres.pid and logs. Superuser "postgres", password "simba" over TCP (scram-sha-256);
# the socket trusts. A data directory left by pg-stop.sh --keep is reused (a restart keeps its rows).
# With SIMBA_PG_TLS_DIR (server.crt, server.key, optional ca.crt and pg_hba.conf) the server
# takes TLS connections with that certificate (ssl=on; ca.crt verifies client certificates),
# and that pg_hba.conf replaces initdb's.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 PORT DIR" >&2
    exit 2
fi
PORT=$1
DIR=$2
case $PORT in
    ''|*[!0-9]*) echo "pg-start: bad port '$PORT'" >&2; exit 2 ;;
esac
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
    echo "pg-start: PostgreSQL not found, installing it with apt-get" >&2
    if [ "$(id -u)" -ne 0 ]; then echo "pg-start: need root to install postgresql" >&2; exit 1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql libpq-dev >&2 ||
        { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql libpq-dev >&2; }
    BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
if pg_isready -q -h 127.0.0.1 -p "$PORT" -t 1 2>/dev/null; then
    echo "pg-start: something already answers on port $PORT" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then PGUSER_RUN=postgres; else PGUSER_RUN=$(id -un); fi
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# The private directory: reused when DIR points at one that holds a cluster, else a new one.
PD=""
FRESH=0
if [ -s "$DIR/datadir" ]; then
    PD=$(cat "$DIR/datadir")
    [ -s "$PD/data/PG_VERSION" ] || PD=""
fi
if [ -z "$PD" ]; then
    for base in /tmp /var/tmp; do
        PD=$(as_pg mktemp -d "$base/simba-pg-$PORT.XXXXXX" 2>/dev/null) && break
        PD=""
    done
    if [ -z "$PD" ]; then
        echo "pg-start: user $PGUSER_RUN cannot create a directory in /tmp or /var/tmp for the cluster's data" >&2
        exit 1
    fi
    FRESH=1
    echo "$PD" >"$DIR/datadir"
fi
# A failed start leaves nothing running and, for a new cluster, nothing on disk.
fail() {
    if [ -s "$PD/data/postmaster.pid" ]; then as_pg "$BIN/pg_ctl" -D "$PD/data" -m immediate stop >/dev/null 2>&1 || true; fi
    if [ $FRESH = 1 ]; then rm -rf "$PD"; rm -f "$DIR/datadir"; fi
    exit 1
}
if ! as_pg test -w "$PD" -a -x "$PD"; then
    echo "pg-start: user $PGUSER_RUN cannot write its data directory $PD" >&2
    fail
fi
if [ ! -s "$PD/data/PG_VERSION" ]; then
    printf 'simba\n' | as_pg sh -c 'umask 077; cat >"$1"' _ "$PD/pwfile"
    if ! as_pg "$BIN/initdb" -D "$PD/data" -U postgres --pwfile="$PD/pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C >"$DIR/initdb.log" 2>&1; then
        echo "pg-start: initdb as user $PGUSER_RUN failed in $PD; its output:" >&2
        cat "$DIR/initdb.log" >&2
        fail
    fi
    rm -f "$PD/pwfile"
fi
# TLS: the files are copied into the data directory by this (the caller's) user and owned by
# the server's, since the server refuses a key that others may read.
TLS_OPTS=""
if [ -n "${SIMBA_PG_TLS_DIR:-}" ]; then
    for f in server.crt server.key ca.crt pg_hba.conf; do
        [ -f "$SIMBA_PG_TLS_DIR/$f" ] || continue
        as_pg sh -c 'umask 077; cat >"$1"' _ "$PD/data/$f" <"$SIMBA_PG_TLS_DIR/$f" || fail
    done
    TLS_OPTS="-c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key"
    [ -f "$SIMBA_PG_TLS_DIR/ca.crt" ] && TLS_OPTS="$TLS_OPTS -c ssl_ca_file=ca.crt"
fi
# pg_ctl returns once the postmaster answers; its PID is the first line of postmaster.pid.
if ! as_pg "$BIN/pg_ctl" -D "$PD/data" -l "$PD/postgres.log" -w -t 30 start \
    -o "-p $PORT -c listen_addresses=127.0.0.1 -k $PD -c max_connections=200 $TLS_OPTS" >/dev/null; then
    echo "pg-start: postgres (user $PGUSER_RUN, data $PD/data) did not start on port $PORT; its log:" >&2
    tail -n 20 "$PD/postgres.log" >&2
    fail
fi
i=0
while [ $i -lt 100 ]; do   # 100 x 0.05 s = 5 s deadline
    if pg_isready -q -h 127.0.0.1 -p "$PORT" -t 1 && [ -s "$PD/data/postmaster.pid" ]; then
        head -n 1 "$PD/data/postmaster.pid" >"$DIR/postgres.pid"
        echo "pg-start: postgres pid $(cat "$DIR/postgres.pid") ready on 127.0.0.1:$PORT, data in $PD"
        exit 0
    fi
    sleep 0.05
    i=$((i + 1))
done
echo "pg-start: postgres on port $PORT did not answer on 127.0.0.1 within 5 s; its log:" >&2
tail -n 20 "$PD/postgres.log" >&2
fail
