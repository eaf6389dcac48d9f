#!/bin/sh
# install-deps.sh -- install the Debian packages simba's build, tests and demo need, if any
# is missing. Needs root (CI runs as root); prints what it does.
set -eu
PKGS="build-essential clang valgrind libsqlite3-dev libhiredis-dev redis-server redis-tools libzookeeper-mt-dev zookeeper default-jre-headless"
PKGS="$PKGS cmake pkgconf man-db" # tests/test_install.sh builds consumers with both, renders simba(1)
PKGS="$PKGS postgresql libpq-dev" # simba_pg.h and its tests (scripts/pg-start.sh)
PKGS="$PKGS mariadb-server libmariadb-dev" # simba_mysql.h and its tests (scripts/mysql-start.sh)
PKGS="$PKGS libuv1-dev libev-dev libevent-dev liburing-dev" # adapters/ and the loop examples (tests/test_loops.sh)
PKGS="$PKGS nftables faketime iproute2" # the network-namespace fault lab (tests/lab/lab.sh)
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
# default-jre-headless is only a way to get Java; any installed java will do
if [ -n "$missing" ] && command -v java >/dev/null 2>&1; then
    missing=$(echo "$missing" | sed 's/ default-jre-headless//')
fi
missing=$(echo "$missing" | sed 's/^ *//')
[ -z "$missing" ] && exit 0
echo "install-deps: installing: $missing"
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root for apt-get (or install these yourself): $missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq $missing
