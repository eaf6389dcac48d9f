#!/bin/sh
# pg-start.sh PORT DIR -- start a throwaway PostgreSQL cluster on 127.0.0.1:PORT, data in
# DIR/data, unix socket in DIR, and wait until it answers. Stop it with pg-stop.sh DIR.
# initdb refuses root: the cluster runs as the postgres user (runuser), DIR is made its own.
# Superuser "postgres", password "simba" over TCP (scram-sha-256); the socket trusts.
# A data directory left by an earlier run is reused (a restart keeps its rows).
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
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres: "$DIR"
if [ ! -s "$DIR/data/PG_VERSION" ]; then
    printf 'simba\n' >"$DIR/pwfile"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$DIR/pwfile"
    as_pg "$BIN/initdb" -D "$DIR/data" -U postgres --pwfile="$DIR/pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C >"$DIR/initdb.log" 2>&1 ||
        { cat "$DIR/initdb.log" >&2; exit 1; }
    rm -f "$DIR/pwfile"
fi
# pg_ctl returns once the postmaster answers; its PID is the first line of postmaster.pid.
as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" -w -t 30 start \
    -o "-p $PORT -c listen_addresses=127.0.0.1 -k $DIR -c max_connections=200" >/dev/null ||
    { tail -n 20 "$DIR/postgres.log" >&2; exit 1; }
i=0
while [ $i -lt 100 ]; do   # 100 x 0.05 s = 5 s deadline
    if pg_isready -q -h 127.0.0.1 -p "$PORT" -t 1 && [ -s "$DIR/data/postmaster.pid" ]; then
        head -n 1 "$DIR/data/postmaster.pid" >"$DIR/postgres.pid"
        echo "pg-start: postgres pid $(cat "$DIR/postgres.pid") ready on 127.0.0.1:$PORT"
        exit 0
    fi
    sleep 0.05
    i=$((i + 1))
done
echo "pg-start: postgres on port $PORT did not answer within 5 s" >&2
tail -n 20 "$DIR/postgres.log" >&2
exit 1
