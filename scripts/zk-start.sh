#!/usr/bin/env bash
# zk-start.sh PORT DIR -- start a throwaway standalone ZooKeeper on 127.0.0.1:PORT with its
# config, data and pid file under DIR. Safe to run again on the same DIR after zk-stop.sh
# (the data survives, so sessions and znodes survive a restart, as with a real server).
# Waits until the server answers `srvr` with a "Mode:" line (that is later than `ruok`).
# Callers may run it with sh: it needs bash (/dev/tcp, SECONDS).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 PORT DIR" >&2; exit 2; fi
PORT=$1
DIR=$2
case "$PORT" in ''|*[!0-9]*) echo "zk-start: bad port '$PORT'" >&2; exit 2 ;; esac

JAR=/usr/share/java/zookeeper.jar
if [ ! -f "$JAR" ]; then
    if [ "$(id -u)" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y zookeeper >&2
    else
        echo "zk-start: $JAR missing and not root: apt-get install zookeeper" >&2; exit 1
    fi
fi
# A log binding: slf4j-nop keeps the server quiet; fall back to any binding present.
BIND=""
for j in /usr/share/java/slf4j-nop.jar /usr/share/java/slf4j-simple.jar \
         /usr/share/java/slf4j-jdk14.jar /usr/share/java/slf4j-log4j12.jar; do
    if [ -f "$j" ]; then BIND=$j; break; fi
done

srvr() { # prints the server's srvr answer, or nothing
    { exec 3<>"/dev/tcp/127.0.0.1/$PORT" && printf 'srvr' >&3 && timeout 2 cat <&3; } 2>/dev/null || true
}

mkdir -p "$DIR/data"
DIR=$(cd "$DIR" && pwd)
if [ -f "$DIR/zk.pid" ] && kill -0 "$(cat "$DIR/zk.pid")" 2>/dev/null; then
    echo "zk-start: already running (pid $(cat "$DIR/zk.pid"))" >&2; exit 1
fi
if srvr | grep -q '^Mode:'; then
    echo "zk-start: port $PORT is already served by another process" >&2; exit 1
fi
cat > "$DIR/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$DIR/data
clientPort=$PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=600000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
autopurge.purgeInterval=0
CFG

CP="$DIR:$JAR"
[ -n "$BIND" ] && CP="$CP:$BIND"
# setsid: the server must not die with the caller's terminal or process group.
setsid java -Xmx256m -Dzookeeper.jmx.log4j.disable=true -cp "$CP" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$DIR/zoo.cfg" \
    >"$DIR/zk.out" 2>&1 </dev/null &
PID=$!
echo "$PID" > "$DIR/zk.pid"

deadline=$((SECONDS + 30))
while :; do
    if srvr | grep -q '^Mode:'; then echo "zookeeper up on 127.0.0.1:$PORT (pid $PID)"; exit 0; fi
    if ! kill -0 "$PID" 2>/dev/null; then
        echo "zk-start: server exited; last output:" >&2; tail -20 "$DIR/zk.out" >&2 || true
        rm -f "$DIR/zk.pid"; exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
        echo "zk-start: no 'Mode:' from srvr within 30 s" >&2
        kill "$PID" 2>/dev/null || true; rm -f "$DIR/zk.pid"; exit 1
    fi
    sleep 0.2
done
