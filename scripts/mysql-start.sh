#!/bin/sh
# mysql-start.sh PORT DIR -- start a throwaway MariaDB server on 127.0.0.1:PORT, its data in
# DIR/data, and wait until it answers. Stop it with mysql-stop.sh DIR (which removes its data;
# --keep for a restart). As root it runs as root (--user=root), as CI does. User root, password
# "simba" over TCP. SIMBA_MYSQL_TLS_DIR (below) adds TLS. A data directory left by mysql-stop.sh --keep is reused (a restart keeps its rows).
# SIMBA_MYSQL_BIND (default 127.0.0.1) is the address it listens on; on any other (the fault
# lab's node), root may connect over TCP from any host too (root@'%').
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 PORT DIR" >&2
    exit 2
fi
PORT=$1
DIR=$2
case $PORT in
    ''|*[!0-9]*) echo "mysql-start: bad port '$PORT'" >&2; exit 2 ;;
esac
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
    echo "mysql-start: MariaDB not found, installing it with apt-get" >&2
    if [ "$(id -u)" -ne 0 ]; then echo "mysql-start: need root to install mariadb-server" >&2; exit 1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-server libmariadb-dev >&2 ||
        { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-server libmariadb-dev >&2; }
fi
PATH=$PATH:/usr/sbin
BIND=${SIMBA_MYSQL_BIND:-127.0.0.1}
ROOTS="root@'127.0.0.1'"
[ "$BIND" = 127.0.0.1 ] || ROOTS="$ROOTS root@'%'"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
ask() { mariadb --no-defaults -h "$BIND" -P "$PORT" -uroot -psimba -N -e "$1" 2>/dev/null; }
if ask "SELECT 1" >/dev/null; then
    echo "mysql-start: something already answers on port $PORT" >&2
    exit 1
fi
FRESH=0
if [ ! -d "$DIR/data/mysql" ]; then
    FRESH=1
    if ! mariadb-install-db --no-defaults --datadir="$DIR/data" --user="$(id -un)" \
        --auth-root-authentication-method=normal --skip-test-db >"$DIR/install-db.log" 2>&1; then
        echo "mysql-start: mariadb-install-db failed in $DIR/data; its output:" >&2
        tail -n 20 "$DIR/install-db.log" >&2
        rm -rf "$DIR/data"
        exit 1
    fi
fi
# SIMBA_MYSQL_TLS_DIR: ca.crt, server.crt and server.key there make the server take TLS too
TLS=
if [ -n "${SIMBA_MYSQL_TLS_DIR:-}" ]; then
    T=$SIMBA_MYSQL_TLS_DIR
    TLS="--ssl-ca=$T/ca.crt --ssl-cert=$T/server.crt --ssl-key=$T/server.key"
fi
# A failed start leaves nothing running and, for a new server, nothing on disk.
fail() {
    [ -s "$DIR/mysql.pid" ] && kill -KILL "$(cat "$DIR/mysql.pid")" 2>/dev/null
    rm -f "$DIR/mysql.pid"
    [ $FRESH = 1 ] && rm -rf "$DIR/data"
    exit 1
}
mariadbd --no-defaults --datadir="$DIR/data" --user="$(id -un)" --bind-address="$BIND" --port="$PORT" \
    --socket="$DIR/sock" --pid-file="$DIR/data/mariadbd.pid" --skip-log-bin --max-connections=300 \
    --innodb-buffer-pool-size=32M --innodb-log-file-size=16M --log-error="$DIR/mysql.log" $TLS </dev/null >/dev/null 2>&1 &
echo $! >"$DIR/mysql.pid"
i=0
while [ $i -lt 300 ]; do   # 300 x 0.05 s = 15 s deadline
    if ! kill -0 "$(cat "$DIR/mysql.pid")" 2>/dev/null; then
        echo "mysql-start: mariadbd exited; its log:" >&2
        tail -n 20 "$DIR/mysql.log" >&2
        fail
    fi
    # a new server's root has no password over the socket yet: set it once
    if [ $FRESH = 1 ] && mariadb --no-defaults -S "$DIR/sock" -uroot -e \
        "ALTER USER root@localhost IDENTIFIED BY 'simba'; $(for r in $ROOTS; do
            printf "CREATE USER IF NOT EXISTS %s IDENTIFIED BY 'simba'; GRANT ALL ON *.* TO %s WITH GRANT OPTION; " "$r" "$r"; done)
         CREATE DATABASE IF NOT EXISTS simba" 2>/dev/null; then
        FRESH=2
    fi
    if [ $FRESH != 1 ] && ask "SELECT 1" >/dev/null; then
        echo "mysql-start: mariadbd pid $(cat "$DIR/mysql.pid") ready on $BIND:$PORT, data in $DIR/data"
        exit 0
    fi
    sleep 0.05
    i=$((i + 1))
done
echo "mysql-start: mariadbd on port $PORT did not answer within 15 s; its log:" >&2
tail -n 20 "$DIR/mysql.log" >&2
fail
