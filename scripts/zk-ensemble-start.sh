#!/usr/bin/env bash
# zk-ensemble-start.sh DIR [N] -- start a throwaway 3-node ZooKeeper ensemble on loopback
# (three JVMs, -Xmx128m each), configs, data and pid files under DIR/zk1..zk3; with N (1..3),
# start only member N again (after it was stopped or killed; its data is kept).
# Ports: SIMBA_ZK_ENSEMBLE_BASE (default 2272); member i uses base+3(i-1) for clients,
# +1 for the quorum and +2 for leader election, all on 127.0.0.1. Prints the connect string
# and writes it to DIR/hosts. Waits (60 s at most) until every member it started answers
# `srvr` with "Mode: leader" or "Mode: follower" (a member that has joined a quorum).
# Stop with zk-ensemble-stop.sh DIR (by PID). Callers may run it with sh: it needs bash.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then echo "usage: $0 DIR [1|2|3]" >&2; exit 2; fi
DIR=$1
ONLY=${2:-}
case "$ONLY" in ''|1|2|3) ;; *) echo "zk-ensemble-start: member must be 1, 2 or 3" >&2; exit 2 ;; esac
BASE=${SIMBA_ZK_ENSEMBLE_BASE:-2272}
case "$BASE" in ''|*[!0-9]*) echo "zk-ensemble-start: bad SIMBA_ZK_ENSEMBLE_BASE '$BASE'" >&2; exit 2 ;; esac

JAR=/usr/share/java/zookeeper.jar
[ -f "$JAR" ] || { echo "zk-ensemble-start: $JAR missing: apt-get install zookeeper" >&2; exit 1; }
# SIMBA_ZK_ENSEMBLE_LOG=1: the members log at INFO (elections, session expiries) to DIR/zkN/zk.out,
# each line stamped with the wall clock; otherwise they are silent.
BIND=""
JLOG=""
if [ "${SIMBA_ZK_ENSEMBLE_LOG:-0}" = 1 ] && [ -f /usr/share/java/slf4j-simple.jar ]; then
    BIND=/usr/share/java/slf4j-simple.jar
    JLOG="-Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"
fi
[ -n "$BIND" ] || for j in /usr/share/java/slf4j-nop.jar /usr/share/java/slf4j-simple.jar \
         /usr/share/java/slf4j-jdk14.jar /usr/share/java/slf4j-log4j12.jar; do
    if [ -f "$j" ]; then BIND=$j; break; fi
done

cport() { echo $((BASE + 3 * ($1 - 1))); }
srvr() { # srvr PORT: the member's srvr answer, or nothing
    { exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'srvr' >&3 && timeout 2 cat <&3; } 2>/dev/null || true
}

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
HOSTS=""
for i in 1 2 3; do HOSTS="$HOSTS${HOSTS:+,}127.0.0.1:$(cport $i)"; done
echo "$HOSTS" >"$DIR/hosts"

start_member() {
    local i=$1 d=$DIR/zk$1 p
    p=$(cport "$i")
    mkdir -p "$d/data"
    if [ -f "$d/zk.pid" ] && kill -0 "$(cat "$d/zk.pid")" 2>/dev/null; then
        echo "zk-ensemble-start: member $i already running (pid $(cat "$d/zk.pid"))" >&2; return 1
    fi
    if srvr "$p" | grep -q '^Mode:'; then
        echo "zk-ensemble-start: port $p is already served by another process" >&2; return 1
    fi
    echo "$i" >"$d/data/myid"
    cat >"$d/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$d/data
clientPort=$p
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=600000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,cons
autopurge.purgeInterval=0
server.1=127.0.0.1:$((BASE + 1)):$((BASE + 2))
server.2=127.0.0.1:$((BASE + 4)):$((BASE + 5))
server.3=127.0.0.1:$((BASE + 7)):$((BASE + 8))
CFG
    local cp="$d:$JAR"
    [ -n "$BIND" ] && cp="$cp:$BIND"
    # setsid: the member must not die with the caller's terminal or process group
    # shellcheck disable=SC2086 # JLOG is a list of options
    setsid java -Xmx128m -Xss512k -XX:+UseSerialGC -Dzookeeper.jmx.log4j.disable=true $JLOG -cp "$cp" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" >>"$d/zk.out" 2>&1 </dev/null &
    echo $! >"$d/zk.pid"
}

if [ -n "$ONLY" ]; then MEMBERS=$ONLY; else MEMBERS="1 2 3"; fi
for i in $MEMBERS; do start_member "$i"; done

deadline=$((SECONDS + 60))
for i in $MEMBERS; do
    pid=$(cat "$DIR/zk$i/zk.pid")
    while ! srvr "$(cport "$i")" | grep -qE '^Mode: (leader|follower)'; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "zk-ensemble-start: member $i exited; last output:" >&2; tail -20 "$DIR/zk$i/zk.out" >&2 || true
            rm -f "$DIR/zk$i/zk.pid"; exit 1
        fi
        if [ $SECONDS -ge $deadline ]; then
            echo "zk-ensemble-start: member $i did not join a quorum within 60 s" >&2; exit 1
        fi
        sleep 0.2
    done
done
echo "zookeeper ensemble up: $HOSTS (members $MEMBERS started)"
