#!/usr/bin/env bash
# lab.sh -- the network-namespace fault lab: real partitions, packet loss and clocks between
# simba workers and real servers, every history checked by mp_check (tests/mp_check.c).
#
#   tests/lab/lab.sh [--short] [--seed N] [--runs N] [--only "ROW ..."]
#
# Builds one outer network namespace (simbalab-o: a bridge, no route anywhere, so nothing
# leaves this machine) and one namespace per node, each on 10.231.0.0/24 with its own address:
#   r1 r2 r3   Redis primary and two replicas (.11-.13)   s1 s2 s3  Sentinels (.21-.23)
#   z1 z2 z3   a ZooKeeper ensemble (.31-.33)              pg        PostgreSQL (.41)
#   my         MariaDB (.61, scripts/mysql-start.sh)
#   c1 .. c4   clients (.51-.54), one mp_worker each, all writing through one fenced resource
#              (mp_worker --fenced-file: a file that keeps the highest fence and refuses lower)
# Faults are nftables rules in a node's own namespace (table inet simbalab), added and then
# deleted whole, so each is exactly reversible; clocks are libfaketime's. Rows (ROW = backend
# and fault; the backend's servers start once for its rows):
#   cut-short / cut-long     the owner cut off from every server of its backend, both
#                            directions, for half a lease / for two leases
#   drop-answers / drop-requests   one direction only, two leases: what the servers send
#                            the owner is dropped / what the owner sends them (no RST)
#   loss5 / loss30           every client loses 5 % / 30 % of its packets both ways
#                            (nftables numgen), for four leases, during renewals
#   clock-fast2 / clock-slow2 / clock-fast10 / clock-slow10   c1's clocks (all of them, the
#                            monotonic one too) run 2 % or 10 % fast or slow for the whole run,
#                            c1 holds three leases, and is cut off (two leases) each time it
#                            owns, so that its lease lapses on its own clock; these rows use
#                            transition = ttl/20, so 2 % slow is inside the drift bound of
#                            docs/testing.md and 10 % slow outside it; the rate c1's loop clock
#                            really ran at (mp_worker's last line) is checked each run
#   server-clock-step        (pg-clock, redis-clock, mysql-clock: a server of its own whose clock
#                            the other rows must not share) the server's wall clock is stepped
#                            three leases ahead while an owner holds, and back at the heal;
#                            PostgreSQL and MariaDB run under libfaketime (clock_timestamp(),
#                            SYSDATE(3)), the Redis primary under
#                            tests/lab/clockstep.c (TIME: libfaketime cannot run Debian's
#                            redis-server, its jemalloc calls clock_gettime inside libfaketime's
#                            initialisation); both reread an offset file the lab rewrites, and
#                            leave the monotonic clock true. The step the server shows is
#                            measured each time, and a step not the size asked fails the row
#   sentinel-split           (redis) the primary and the owner on one side, the replicas, the
#                            Sentinels and the other clients on the other, for 8 s: a replica
#                            is promoted; then healed. redis = Redis defaults; redis-minrep =
#                            min-replicas-to-write 1, min-replicas-max-lag 1 (docs/redis.md)
#   zk-split                 (zk) 2|1: z1, the owner and one waiter against z2, z3 and the
#                            other waiters, for two sessions
#   server-cuts-owner        (pg, mysql) the server drops the owner's packets both ways, two leases
# Each run injects its fault several times at random moments (bash $RANDOM, seeded with the
# printed seed: --seed replays the timing). One results line per row in $LAB_DIR/results.tsv
# and a table at the end: runs, overlaps, fence violations, stale writes accepted (by the
# fenced resource), the longest time without an owner. The lab fails when a row that the
# docs call safe shows an overlap, a fence violation, an accepted stale write or any other
# finding of mp_check (acts while not owner, a leaked lock), when any row shows a fence
# violation or an accepted stale write, when a clock fault was not the size asked, or when a
# row has fewer than four ownerships a run (it measured nothing); rows marked "reported" (a
# configuration docs/operations.md says can break exclusion) only report.
# Environment: LAB_DIR (work dir, default build/lab, wiped first), LAB_NS (the namespaces'
# prefix, default simbalab: two labs with different prefixes can run side by side).
# Everything it starts it stops by PID, and it deletes its namespaces at the end, pass, fail
# or interrupt. Needs root (network namespaces, nftables): without it, it fails and says so.
set -u
cd "$(dirname "$0")/../.."
B=build
WORKER=$B/mp_worker
CHECK=$B/mp_check
LAB_DIR=${LAB_DIR:-$B/lab}
P=${LAB_NS:-simbalab} # the namespaces' prefix: a second lab may run beside with another
NET=10.231.0
FT=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -1)
CS=$B/clockstep.so # steps a Redis server's wall clock (tests/lab/clockstep.c)
SHORT=0
RUNS=""
ONLY=""
SEED=""
while [ $# -gt 0 ]; do
    case "$1" in
    --short) SHORT=1 ;;
    --seed) SEED=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --only) ONLY=$2; shift ;;
    *) echo "usage: $0 [--short] [--seed N] [--runs N] [--only \"ROW ...\"]" >&2; exit 2 ;;
    esac
    shift
done
SEED=${SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$SEED
[ -n "$RUNS" ] || { [ $SHORT = 1 ] && RUNS=1 || RUNS=3; }
TTL=2000 TR=1000 LEASE=3000 SESSION=2000

die() { echo "lab: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root: network namespaces and nftables (run as root; the lab does not skip)"
for b in "$WORKER" "$CHECK"; do [ -x "$b" ] || die "$b missing (make $b)"; done
for t in ip nft redis-server redis-cli java mariadb; do command -v $t >/dev/null || die "$t not installed"; done
[ -n "$FT" ] || die "libfaketime not installed (Debian package faketime)"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$PGBIN/initdb" ] || die "PostgreSQL not installed"
[ -x /usr/sbin/mariadbd ] || command -v mariadbd >/dev/null || die "MariaDB not installed (Debian package mariadb-server)"
ip netns list | grep -q "^$P-" && die "namespaces $P-* exist already (another lab running?): $(ip netns list | grep "^$P-" | tr '\n' ' ')"
ip netns add $P-probe 2>/dev/null || die "cannot create a network namespace (no CAP_SYS_ADMIN here?)"
ip netns del $P-probe
rm -rf "$LAB_DIR"
mkdir -p "$LAB_DIR"
LAB_DIR=$(cd "$LAB_DIR" && pwd)
PIDS=$LAB_DIR/pids
: >"$PIDS"

# ---- cleanup: every PID we started, then whatever is left in our namespaces, then them ----
PGDATA=""
MYDIR="" # the MariaDB node's directory (scripts/mysql-start.sh PORT DIR) while it runs
ours() { ip netns identify "$1" 2>/dev/null | grep -q "^$P-"; } # a PID reused elsewhere is left alone
alive() { local pid; while read -r pid; do ours "$pid" && kill -0 "$pid" 2>/dev/null && return 0; done <"$PIDS"; return 1; }
stop_pids() { # TERM, then KILL, every recorded PID still in one of our namespaces; empties the list
    local pid i
    while read -r pid; do ours "$pid" && kill -TERM "$pid" 2>/dev/null; done <"$PIDS"
    for i in $(seq 30); do alive || break; sleep 0.1; done
    while read -r pid; do ours "$pid" && kill -KILL "$pid" 2>/dev/null; done <"$PIDS"
    : >"$PIDS"
}
cleanup() {
    local pid ns left
    trap '' INT TERM
    [ -n "$PGDATA" ] && [ -d "$PGDATA/data" ] && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA/data" -m immediate stop >/dev/null 2>&1
    [ -n "$MYDIR" ] && sh scripts/mysql-stop.sh "$MYDIR" >/dev/null 2>&1
    stop_pids
    for ns in $(ip netns list | awk -v p="^$P-" '$1 ~ p {print $1}'); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    done
    sleep 0.2
    for ns in $(ip netns list | awk -v p="^$P-" '$1 ~ p {print $1}'); do ip netns del "$ns"; done
    [ -n "$PGDATA" ] && rm -rf "$PGDATA"
    left=$(ip netns list | grep -c "^$P-")
    [ "$left" = 0 ] || echo "lab: cleanup left $left namespaces" >&2
    echo "lab: cleaned up: namespaces deleted, every process stopped (seed $SEED)"
}
trap cleanup EXIT
trap 'echo "lab: interrupted" >&2; exit 130' INT TERM

# ---- topology ----
declare -A IP=([r1]=$NET.11 [r2]=$NET.12 [r3]=$NET.13 [s1]=$NET.21 [s2]=$NET.22 [s3]=$NET.23
    [z1]=$NET.31 [z2]=$NET.32 [z3]=$NET.33 [pg]=$NET.41 [my]=$NET.61 [c1]=$NET.51 [c2]=$NET.52 [c3]=$NET.53 [c4]=$NET.54)
CLIENTS="c1 c2 c3 c4"
in_ns() { local n=$1; shift; ip netns exec "$P-$n" "$@"; }
# bg LABEL NODE CMD...: starts CMD in NODE's namespace, records its PID
bg() {
    local label=$1 n=$2
    shift 2
    ip netns exec "$P-$n" "$@" >>"$LAB_DIR/$label.out" 2>&1 </dev/null &
    echo $! >>"$PIDS"
    LAST_PID=$!
}
build_net() {
    local n
    ip netns add $P-o || die "ip netns add"
    ip -n $P-o link set lo up
    ip -n $P-o link add br0 type bridge
    ip -n $P-o link set br0 up
    for n in "${!IP[@]}"; do
        ip netns add "$P-$n"
        ip -n $P-o link add "v-$n" type veth peer name eth0 netns "$P-$n"
        ip -n $P-o link set "v-$n" master br0 up
        ip -n "$P-$n" addr add "${IP[$n]}/24" dev eth0
        ip -n "$P-$n" link set eth0 up
        ip -n "$P-$n" link set lo up
    done
    # the outer namespace has no link to the host's: only the bridge and its veths
    [ -z "$(ip -n $P-o route show default)$(ip -n $P-c1 route show default)" ] || die "a lab namespace has a route out"
    [ "$(ip -n $P-o -o link show | grep -vc -e ' lo:' -e ' br0:' -e ' v-')" = 0 ] || die "the outer namespace has a foreign link"
    echo "lab: ${#IP[@]} namespaces on $NET.0/24 behind $P-o's bridge, no route out"
}

# ---- faults: one nftables table per node, deleted whole to heal ----
# block NODE DIR "IPs" [PERCENT]: DIR in|out|both; PERCENT: drop only that share (numgen)
block() {
    local n=$1 dir=$2 ips=$3 pct=${4:-} m="" rules=""
    [ -n "$pct" ] && m="numgen random mod 100 < $pct "
    ips="{ $(echo $ips | tr ' ' ',') }"
    case $dir in in | both) rules="$rules add rule inet $P in ip saddr $ips ${m}drop;" ;; esac
    case $dir in out | both) rules="$rules add rule inet $P out ip daddr $ips ${m}drop;" ;; esac
    in_ns "$n" nft "add table inet $P; add chain inet $P in { type filter hook input priority 0; };
        add chain inet $P out { type filter hook output priority 0; }; $rules" || die "nft on $n"
}
heal() { local n; for n in "$@"; do in_ns "$n" nft delete table inet $P 2>/dev/null; done; }
heal_all() { heal "${!IP[@]}"; }
ips_of() { local n s=""; for n in "$@"; do s="$s ${IP[$n]}"; done; echo $s; }
mark() { echo "0 - 0 fault:$1 $($CHECK --now)" >>"$RD/faults.log"; echo "lab:   $(date +%T) $1 ${2:-}"; }

# ---- servers ----
redis_up() { # redis_up EXTRA-PRIMARY-OPTIONS...
    local n i
    for n in r1 r2 r3; do
        mkdir -p "$LAB_DIR/$n"
        local rep=() env=()
        [ $n != r1 ] && rep=(--replicaof "${IP[r1]}" 6379)
        echo "+0" >"$LAB_DIR/$n/clock"
        [ "${CLOCKED:-0}" = 1 ] && [ $n = r1 ] && env=(env LD_PRELOAD="$(pwd)/$CS" CLOCKSTEP_FILE="$LAB_DIR/$n/clock")
        bg "$n" "$n" "${env[@]}" redis-server --bind "${IP[$n]}" --port 6379 --save '' --appendonly no --dir "$LAB_DIR/$n" \
            --repl-diskless-sync-delay 0 --protected-mode no "$@" "${rep[@]}"
    done
    for n in s1 s2 s3; do
        mkdir -p "$LAB_DIR/$n"
        printf 'port 26379\nbind %s\nprotected-mode no\ndir %s\nsentinel monitor simba %s 6379 2\nsentinel down-after-milliseconds simba 1000\nsentinel failover-timeout simba 5000\n' \
            "${IP[$n]}" "$LAB_DIR/$n" "${IP[r1]}" >"$LAB_DIR/$n/sentinel.conf"
        bg "$n" "$n" redis-server "$LAB_DIR/$n/sentinel.conf" --sentinel
    done
    for i in $(seq 100); do
        [ "$(in_ns s1 redis-cli -h "${IP[s1]}" -p 26379 SENTINEL master simba 2>/dev/null | tr -d '\r' |
            awk 'p=="num-slaves"||p=="num-other-sentinels"{s+=$0} {p=$0} END{print s+0}')" = 4 ] && break
        sleep 0.2
    done
    [ "$i" -lt 100 ] || die "Redis: the sentinels did not see 2 replicas and each other"
    # declared empty: the first grant does not wait out a quarantine (scripts/redis-start.sh)
    local rid
    rid=$(in_ns r1 redis-cli -h "${IP[r1]}" INFO server | tr -d '\r' | sed -n 's/^run_id://p')
    in_ns r1 redis-cli -h "${IP[r1]}" SET simba:fresh "$rid" >/dev/null
    echo "lab: Redis primary r1, replicas r2 r3, sentinels s1-s3 up $*"
}
redis_primary() { # the node the sentinels name
    local ip n
    ip=$(in_ns s1 redis-cli -h "${IP[s1]}" -p 26379 SENTINEL get-master-addr-by-name simba 2>/dev/null | head -1 | tr -d '\r')
    for n in r1 r2 r3; do [ "${IP[$n]}" = "$ip" ] && echo $n; done
}
zk_up() {
    local n i cfg
    for i in 1 2 3; do
        n=z$i
        mkdir -p "$LAB_DIR/$n/data"
        echo $i >"$LAB_DIR/$n/data/myid"
        cfg=$LAB_DIR/$n/zoo.cfg
        printf 'tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir=%s\nclientPort=2181\nclientPortAddress=%s\nmaxClientCnxns=0\nminSessionTimeout=1000\nmaxSessionTimeout=600000\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\nserver.1=%s:2888:3888\nserver.2=%s:2888:3888\nserver.3=%s:2888:3888\n' \
            "$LAB_DIR/$n/data" "${IP[$n]}" "${IP[z1]}" "${IP[z2]}" "${IP[z3]}" >"$cfg"
        bg "$n" "$n" java -Xmx128m -Xss512k -XX:+UseSerialGC -Dzookeeper.jmx.log4j.disable=true \
            -cp "$LAB_DIR/$n:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-nop.jar" \
            org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
    done
    for n in z1 z2 z3; do
        for i in $(seq 300); do
            in_ns "$n" bash -c "exec 3<>/dev/tcp/${IP[$n]}/2181 && printf srvr >&3 && timeout 2 cat <&3" 2>/dev/null |
                grep -qE '^Mode: (leader|follower)' && break
            sleep 0.2
        done
        [ "$i" -lt 300 ] || die "ZooKeeper member $n did not join a quorum in 60 s"
    done
    echo "lab: ZooKeeper ensemble z1 z2 z3 up"
}
pg_up() {
    local env=() i
    PGDATA=$(runuser -u postgres -- mktemp -d /tmp/simbalab-pg.XXXXXX) || die "mktemp as postgres"
    # libfaketime rereads the offset file at every call; the monotonic clock stays true
    [ "${CLOCKED:-0}" = 1 ] && env=(LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$PGDATA/clock" FAKETIME_NO_CACHE=1
        FAKETIME_DONT_FAKE_MONOTONIC=1)
    echo "+0" >"$PGDATA/clock" # read by the server (libfaketime), written by server-clock-step
    chmod 644 "$PGDATA/clock"
    printf 'simba\n' | runuser -u postgres -- sh -c 'umask 077; cat >"$1"' _ "$PGDATA/pw"
    runuser -u postgres -- "$PGBIN/initdb" -D "$PGDATA/data" -U postgres --pwfile="$PGDATA/pw" --auth-local=trust \
        --auth-host=scram-sha-256 -E UTF8 --locale=C >"$LAB_DIR/initdb.log" 2>&1 || die "initdb (see $LAB_DIR/initdb.log)"
    echo "host all all $NET.0/24 scram-sha-256" >>"$PGDATA/data/pg_hba.conf"
    in_ns pg runuser -u postgres -- env "${env[@]}" "$PGBIN/pg_ctl" -D "$PGDATA/data" -l "$PGDATA/log" -w -t 30 start \
        -o "-p 5432 -c listen_addresses=${IP[pg]} -k $PGDATA -c max_connections=100" >/dev/null || die "postgres did not start"
    head -1 "$PGDATA/data/postmaster.pid" >>"$PIDS"
    echo "lab: PostgreSQL up on ${IP[pg]} $*"
}
my_up() { # MariaDB on my's own address, root allowed from the clients (SIMBA_MYSQL_BIND)
    local env=()
    MYDIR=$LAB_DIR/my
    mkdir -p "$MYDIR"
    echo "+0" >"$MYDIR/clock" # read by the server (libfaketime), written by server-clock-step
    [ "${CLOCKED:-0}" = 1 ] && env=(LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$MYDIR/clock" FAKETIME_NO_CACHE=1
        FAKETIME_DONT_FAKE_MONOTONIC=1)
    in_ns my env "${env[@]}" SIMBA_MYSQL_BIND="${IP[my]}" sh scripts/mysql-start.sh 3306 "$MYDIR" >"$LAB_DIR/my.out" 2>&1 ||
        { cat "$LAB_DIR/my.out" >&2; die "MariaDB did not start"; }
    cat "$MYDIR/mysql.pid" >>"$PIDS"
    echo "lab: MariaDB up on ${IP[my]} $*"
}
servers_down() { # stops every server (their PIDs stay in the list: killing a dead PID is harmless)
    local pid
    [ -n "$MYDIR" ] && sh scripts/mysql-stop.sh "$MYDIR" >/dev/null 2>&1
    MYDIR=""
    [ -n "$PGDATA" ] && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA/data" -m immediate stop >/dev/null 2>&1
    [ -n "$PGDATA" ] && rm -rf "$PGDATA"
    PGDATA=""
    stop_pids
    heal_all
}

# ---- one run: four workers, a fault injected several times, the history checked ----
owner() { # the client whose log's last ownership line is "acquired", or nothing
    local c
    for c in $CLIENTS; do
        [ -f "$RD/w-$c.log" ] && grep -E ' (acquired|released) ' "$RD/w-$c.log" | tail -1 | grep -q ' acquired ' && echo $c
    done | head -1
}
wait_owner() { # wait_owner [CLIENT]: up to 15 s for an owner (that client), prints it
    local i o
    for i in $(seq 150); do
        o=$(owner)
        [ -n "$o" ] && { [ -z "${1:-}" ] || [ "$o" = "$1" ]; } && { echo "$o"; return 0; }
        sleep 0.1
    done
    return 1
}
servers_of() { case $1 in redis*) echo r1 r2 r3 s1 s2 s3 ;; zk) echo z1 z2 z3 ;; pg*) echo pg ;; mysql*) echo my ;; esac; }
others() { local n x=""; for n in $2; do [ "$n" = "$1" ] || x="$x $n"; done; echo $x; }
rnd() { echo $(($1 + RANDOM % ($2 - $1 + 1))); } # rnd LO HI (ms or s)
nap() { sleep "$(awk -v m="$1" 'BEGIN{printf "%.3f", m/1000}')"; }

# the server's wall clock: its offset file (libfaketime's for PostgreSQL, clockstep's for the
# Redis primary) and the offset it shows (s, one decimal: measured, not assumed)
clock_file() { case $1 in redis*) echo "$LAB_DIR/r1/clock" ;; pg*) echo "$PGDATA/clock" ;; mysql*) echo "$MYDIR/clock" ;; esac; }
server_offset() {
    case $1 in
    redis*) in_ns r1 redis-cli -h "${IP[r1]}" TIME | tr -d '\r' | tr '\n' ' ' |
        awk -v t="$(date +%s.%N)" '{printf "%.1f", $1 + $2 / 1e6 - t}' ;;
    pg*) runuser -u postgres -- psql -h "$PGDATA" -p 5432 -U postgres -Atc \
        "select round(extract(epoch from clock_timestamp()) - $(date +%s.%N), 1)" ;;
    mysql*) mariadb --no-defaults -S "$MYDIR/sock" -uroot -psimba -N -e \
        "select round(unix_timestamp(sysdate(3)) - $(date +%s.%N), 1)" ;;
    esac
}
CLOCKFAIL=0 # set when a clock fault was not the size asked: the row fails
step_clock() { # step_clock BACKEND S: the server's wall clock set S s (>= 0) ahead of the real one
    local before after
    before=$(server_offset "$1")
    echo "+$2" >"$(clock_file "$1")"
    nap 50
    after=$(server_offset "$1")
    echo "lab:   the server's clock stepped from $before to $after s ahead (asked $2)"
    awk -v a="$after" -v s="$2" 'BEGIN {exit !(a - s > -0.5 && a - s < 0.5)}' ||
        { echo "lab:   FAIL: the server's clock is $after s ahead, not $2"; CLOCKFAIL=1; }
}
rate_of() { case $1 in clock-fast2) echo 1.02 ;; clock-slow2) echo 0.98 ;; clock-fast10) echo 1.10 ;; clock-slow10) echo 0.90 ;; esac; }
check_rate() { # check_rate FAULT WORKER-OUTPUT: c1's loop clock ran at the rate asked
    local r want
    want=$(rate_of "$1")
    r=$(sed -n 's/.*loop clock .* x\([0-9.]*\)$/\1/p' "$2" | tail -1)
    echo "lab:   c1's loop clock (CLOCK_MONOTONIC) ran x${r:-?} of the machine's (asked x$want)"
    awk -v r="${r:-0}" -v w="$want" 'BEGIN {exit !(r - w > -0.005 && r - w < 0.005)}' ||
        { echo "lab:   FAIL: c1's clock did not run at x$want"; CLOCKFAIL=1; }
}

# inject BACKEND FAULT: one injection, healed before it returns
inject() {
    local be=$1 f=$2 o srv t prim minority majority
    srv=$(servers_of "$be")
    case $f in
    clock-*) o=$(wait_owner c1) || { echo "lab:   c1 never owned"; return; } ;;
    *) o=$(wait_owner) || { echo "lab:   nobody owns"; return; } ;;
    esac
    case $f in
    cut-short) t=$((TTL / 2)) ;;
    loss*) t=$((4 * LEASE)) ;;
    sentinel-split) t=8000 ;;
    *) t=$((2 * LEASE)) ;;
    esac
    [ "$be" = zk ] && [ "$f" != loss5 ] && [ "$f" != loss30 ] && [ "$f" != cut-short ] && t=$((2 * SESSION + 1000))
    [ "$be" = zk ] && [ "$f" = cut-short ] && t=$((SESSION / 2))
    mark "$f" "owner $o, $t ms"
    case $f in
    cut-* | clock-*) block "$o" both "$(ips_of $srv)" ;;
    drop-answers) block "$o" in "$(ips_of $srv)" ;;
    drop-requests) block "$o" out "$(ips_of $srv)" ;;
    loss5 | loss30) for c in $CLIENTS; do block "$c" both "$(ips_of $srv)" "${f#loss}"; done ;;
    server-cuts-owner) block "$srv" both "${IP[$o]}" ;;
    server-clock-step) step_clock "$be" $((3 * LEASE / 1000)) ;;
    sentinel-split)
        prim=$(redis_primary)
        minority="$prim $o"
        majority="$(others "$prim" "r1 r2 r3") s1 s2 s3 $(others "$o" "$CLIENTS")"
        for n in $minority; do block "$n" both "$(ips_of $majority)"; done
        ;;
    zk-split)
        minority="z1 $o $(others "$o" "$CLIENTS" | cut -d' ' -f1)"
        majority="z2 z3 $(others "$o" "$CLIENTS" | cut -d' ' -f2-)"
        for n in $minority; do block "$n" both "$(ips_of $majority)"; done
        ;;
    esac
    nap $t
    heal_all
    [ "$f" = server-clock-step ] && step_clock "$be" 0 # stepped back: a second step
    mark heal "$f"
}

worker_args() { # worker_args BACKEND CLIENT
    case $1 in
    redis*) echo --backend redis --sentinels "${IP[s1]}:26379,${IP[s2]}:26379,${IP[s3]}:26379" --master-name simba ;;
    zk) echo --backend zk --hosts "${IP[z1]}:2181,${IP[z2]}:2181,${IP[z3]}:2181" --session-ms $SESSION ;;
    pg*) echo --backend pg --pg-host "${IP[pg]}" --pg-port 5432 --pg-user postgres --pg-password simba ;;
    mysql*) echo --backend mysql --my-host "${IP[my]}" --my-port 3306 --my-user root --my-password simba ;;
    esac
}

# run_row BACKEND FAULT K: one run of a row; appends its checker figures to $LAB_DIR/figures
run_row() {
    local be=$1 f=$2 k=$3 c env hold inj i pids="" rc dur tr=$TR prefix=()
    # the clock rows take the drift bound's own transition, ttl/20: 2 % slow is inside
    # ttl * r / (1 - r) < transition, 10 % is outside (docs/testing.md)
    case $f in clock-*) tr=$((TTL / 20)) ;; esac
    # each Redis run its own prefix: the prefix's marker binds one max_lease_ms (ttl + transition)
    # (MariaDB: each row its own table, whose loss marker binds one max_lease_ms)
    case $be in redis*) prefix=(--prefix "lab$k-$f:") ;; mysql*) prefix=(--my-table "lab_${f//-/_}") ;; esac
    RD=$LAB_DIR/$be-$f-$k
    mkdir -p "$RD"
    : >"$RD/faults.log"
    inj=$([ $SHORT = 1 ] && echo 2 || echo 3)
    dur=$(( (inj * 12 + (SHORT ? 4 : 8)) * 1000 )) # the short form keeps make test under 180 s
    for c in $CLIENTS; do
        env=() hold=1500
        # c1's clocks (monotonic too) at the row's rate; it holds three leases, so that the
        # cut reaches it while it holds and its lease lapses on its own clock
        case "$c:$f" in c1:clock-*) env=(env LD_PRELOAD="$FT" FAKETIME="+0 x$(rate_of "$f")") hold=$((3 * LEASE)) ;; esac
        # shellcheck disable=SC2046 # worker_args is a list of options
        bg "$be-$f-$k-$c" "$c" "${env[@]}" "$WORKER" $(worker_args "$be" "$c") --mutex "lab-$f-$k-$SEED" \
            "${prefix[@]}" --id "$c" --duration-ms $dur --ttl-ms $TTL --transition-ms $tr --hold-ms $hold --rest-ms 300 \
            --fenced-file "$RD/resource" --log "$RD/w-$c.log"
        pids="$pids $LAST_PID"
    done
    for i in $(seq $inj); do
        sleep "$(rnd 1 4)"
        inject "$be" "$f"
    done
    for i in $(seq $(( dur / 1000 + 20 ))); do
        rc=0
        for c in $pids; do kill -0 "$c" 2>/dev/null && rc=1; done
        [ $rc = 0 ] && break
        sleep 1
    done
    for c in $pids; do ours "$c" && kill -KILL "$c" 2>/dev/null && echo "lab:   worker $c did not end: killed"; done
    wait $pids 2>/dev/null
    case $f in clock-*) check_rate "$f" "$LAB_DIR/$be-$f-$k-c1.out" ;; esac
    "$CHECK" --porcupine "$RD/history.json" --min-contenders 2 "$RD"/w-*.log "$RD/faults.log" >"$RD/check.out" 2>&1
    rc=$?
    grep -E '^mp_check: (OVERLAP|FENCE|STALE)' "$RD/check.out" | head -3 | sed 's/^/lab:   /'
    awk -v rc=$rc '/^mp_check: ownerships/ {gsub(",", ""); for (i = 1; i <= NF; i++) { if ($i == "overlaps") o = $(i+1);
            if ($i == "violations" && $(i-1) == "fence") fv = $(i+1); if ($i == "accepted" && $(i-1) == "writes") st = $(i+1);
            if ($i == "ownerships") n = $(i+1) } }
        /^mp_check: longest time without an owner/ {g = $7}
        END {print n + 0, o + 0, fv + 0, st + 0, g + 0, rc}' "$RD/check.out" >>"$RD/../figures.$be.$f"
    echo "lab:   run $k: $(tail -1 "$RD/../figures.$be.$f" | awk '{print $1 " ownerships, overlaps " $2 ", fence violations " $3 ", stale writes accepted " $4 ", longest without an owner " $5 " ms"}')"
}

# ---- rows ----
CLOCKS="clock-fast2 clock-slow2 clock-fast10 clock-slow10"
COMMON="cut-short cut-long drop-answers drop-requests loss5 loss30"
declare -A ROWS=(
    [redis]="$COMMON sentinel-split $CLOCKS"
    [redis-minrep]="sentinel-split"
    [zk]="$COMMON zk-split $CLOCKS"
    [pg]="$COMMON server-cuts-owner $CLOCKS"
    [pg-clock]="server-clock-step"
    [mysql]="$COMMON server-cuts-owner $CLOCKS"
    [mysql-clock]="server-clock-step"
    [redis-clock]="server-clock-step")
SHORT_ROWS="pg:cut-long pg:loss30 redis-minrep:sentinel-split zk:zk-split zk:clock-slow2"
# configurations docs/operations.md says can break exclusion: measured, reported, not failed
# (ZooKeeper's lease is half its session: a client's clock 10 % slow is inside that margin)
UNSAFE=" redis:sentinel-split pg-clock:server-clock-step redis-clock:server-clock-step mysql-clock:server-clock-step "
UNSAFE="$UNSAFE redis:clock-slow10 pg:clock-slow10 mysql:clock-slow10 "
wanted() { # wanted BACKEND:FAULT
    if [ -n "$ONLY" ]; then case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; fi
    [ $SHORT = 1 ] || return 0
    case " $SHORT_ROWS " in *" $1 "*) return 0 ;; esac
    return 1
}
FAILED=""
run_backend() {
    local be=$1 f k any=0
    for f in ${ROWS[$be]}; do wanted "$be:$f" && any=1; done
    [ $any = 1 ] || return 0
    case $be in
    redis) redis_up ;;
    redis-minrep) redis_up --min-replicas-to-write 1 --min-replicas-max-lag 1 ;;
    zk) zk_up ;;
    pg) pg_up ;;
    pg-clock) CLOCKED=1 pg_up "(under libfaketime)" ;;
    mysql) my_up ;;
    mysql-clock) CLOCKED=1 my_up "(under libfaketime)" ;;
    redis-clock)
        [ -f "$CS" ] || die "$CS missing (make $CS)"
        CLOCKED=1 redis_up
        ;;
    esac
    for f in ${ROWS[$be]}; do
        wanted "$be:$f" || continue
        echo "lab: == $be $f ($RUNS runs)"
        RANDOM=$SEED # each row's timing from the seed alone: --only replays it
        for k in $(seq "$RUNS"); do run_row "$be" "$f" "$k"; done
        report_row "$be" "$f"
    done
    servers_down
}
report_row() { # one line of results.tsv; a failure for a safe row with a violation
    local be=$1 f=$2 line verdict=ok
    line=$(awk -v runs="$RUNS" '{n += $1; o += $2; fv += $3; st += $4; if ($5 > g) g = $5} END {printf "%d\t%d\t%d\t%d\t%.1f\t%d", runs, o, fv, st, g / 1000, n}' "$LAB_DIR/figures.$be.$f")
    case "$UNSAFE" in *" $be:$f "*) verdict=reported ;; esac
    [ $CLOCKFAIL = 1 ] && verdict=FAIL
    CLOCKFAIL=0
    # a row in which the mutex hardly changed hands measured nothing
    [ "$(echo "$line" | cut -f6)" -ge $((4 * RUNS)) ] || verdict=FAIL
    if [ $verdict = ok ] && [ "$(echo "$line" | cut -f2-4)" != "$(printf '0\t0\t0')" ]; then verdict=FAIL; fi
    # and any other finding of the checker (acts while not owner, leaked locks, protocol errors)
    if [ $verdict = ok ] && awk '$6 != 0 {bad = 1} END {exit !bad}' "$LAB_DIR/figures.$be.$f"; then verdict=FAIL; fi
    if [ "$(echo "$line" | cut -f3-4)" != "$(printf '0\t0')" ]; then verdict=FAIL; fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$be" "$f" "$line" "$verdict" "tests/lab/lab.sh --seed $SEED --runs $RUNS --only $be:$f" >>"$LAB_DIR/results.tsv"
    [ $verdict = FAIL ] && FAILED="$FAILED $be:$f"
    return 0
}

T0=$(date +%s)
echo "lab: seed $SEED, $RUNS run(s) per row$([ $SHORT = 1 ] && echo ", short form"), work in $LAB_DIR"
build_net
for be in pg pg-clock redis redis-minrep redis-clock zk mysql mysql-clock; do run_backend $be; done
echo "lab: results (overlaps, fence violations, stale writes accepted, longest without an owner: over every run)"
printf '%-13s %-18s %4s %8s %6s %6s %9s %6s  %s\n' backend fault runs overlaps fences stale no-owner-s owns verdict
sort "$LAB_DIR/results.tsv" | awk -F'\t' '{printf "%-13s %-18s %4s %8s %6s %6s %9s %6s  %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
echo "lab: $(( $(date +%s) - T0 )) s, seed $SEED"
[ -s "$LAB_DIR/results.tsv" ] || die "no row ran (--only names backend:fault, e.g. pg:cut-long)"
if [ -n "$FAILED" ]; then echo "lab: FAIL:$FAILED"; exit 1; fi
echo "lab: PASS"
