# fault_lib.sh -- what the fault harnesses (fault_run.sh, fault_zk_ensemble.sh) share: the
# timing helpers, finding the owner among the workers, the faults on a worker, the
# round-robin loop of faults and the bounded stop of every worker. Sourced (bash) after the
# harness has set FAULT_NAME (its name in messages), CHECK (mp_check), DIR, FAULTS, N, LEASE,
# OWNER_WAIT_MS and defined worker_start SLOT (it sets W_PID[SLOT] and W_LOG[SLOT]).

now_ms() { "$CHECK" --now; }
# sleep_ms N: a pacing pause between faults (never used to wait for a result)
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }
rnd() { echo $(($1 + RANDOM % ($2 - $1 + 1))); } # rnd LO HI
note() { echo "0 - 0 fault:$1 $(now_ms)" >>"$FAULTS"; echo "$FAULT_NAME: $(date +%T) $*"; }
alive() { [ -r "/proc/$1/stat" ] && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null; }
# wait_gone PID MS: up to MS for PID to exit; 1 if still running
wait_gone() {
    local end=$(($(date +%s%N) / 1000000 + $2))
    while alive "$1"; do
        [ $(($(date +%s%N) / 1000000)) -ge "$end" ] && return 1
        sleep 0.02
    done
    return 0
}

# owner_slot: the slot whose worker last logged "acquired" (empty if none)
owner_slot() {
    local i line
    for ((i = 0; i < N; i++)); do
        line=$(grep -E ' (acquired|released) ' "${W_LOG[$i]}" 2>/dev/null | tail -1)
        case "$line" in *" acquired "*) echo "$i"; return ;; esac
    done
}
# wait_owner MS: the owner's slot, waiting up to MS for one
wait_owner() {
    local end=$(($(date +%s%N) / 1000000 + $1)) s
    while :; do
        s=$(owner_slot)
        [ -n "$s" ] && { echo "$s"; return 0; }
        [ $(($(date +%s%N) / 1000000)) -ge "$end" ] && return 1
        sleep 0.05
    done
}

# ---- faults on a worker -------------------------------------------------------------------
f_gc_pause() {
    local s p ms
    s=$(wait_owner "$OWNER_WAIT_MS") || { echo "$FAULT_NAME: no owner for gc-pause"; return; }
    p=${W_PID[$s]}
    ms=$((LEASE + $(rnd 200 1500)))
    kill -STOP "$p" && note gc-pause "owner slot $s pid $p frozen ${ms} ms"
    sleep_ms "$ms"
    kill -CONT "$p"
}
f_kill_owner() {
    local s p
    s=$(wait_owner "$OWNER_WAIT_MS") || { echo "$FAULT_NAME: no owner for kill-owner"; return; }
    p=${W_PID[$s]}
    kill -KILL "$p" || return
    wait "$p" 2>/dev/null
    echo "$p - 0 killed $(now_ms)" >>"$FAULTS"
    note kill-owner "owner slot $s pid $p killed"
    worker_start "$s"
}

# fault_loop SECS QUIET: the faults of LIST, round robin, until QUIET seconds before SECS
# (counted from T0), then a wait to SECS. A worker that died by itself is a failure: noted
# in $DIR/unexpected, and replaced.
fault_loop() {
    local k=0 i
    while [ $(($(date +%s) - T0)) -lt $(($1 - $2)) ]; do
        sleep_ms "$(rnd 700 1800)"
        "f_${LIST[$((k % ${#LIST[@]}))]}"
        k=$((k + 1))
        for ((i = 0; i < N; i++)); do
            if ! alive "${W_PID[$i]}"; then
                wait "${W_PID[$i]}"
                echo "$FAULT_NAME: worker slot $i pid ${W_PID[$i]} exited by itself (status $?)" | tee -a "$DIR/unexpected"
                echo "${W_PID[$i]} - 0 killed $(now_ms)" >>"$FAULTS"
                worker_start "$i"
            fi
        done
    done
    while [ $(($(date +%s) - T0)) -lt "$1" ]; do sleep 0.2; done
}

# workers_stop: every worker stops (releasing), bounded at 10 s each; STUCK=1 if one did not
workers_stop() {
    local i
    for ((i = 0; i < N; i++)); do kill -CONT "${W_PID[$i]}" 2>/dev/null; kill -TERM "${W_PID[$i]}" 2>/dev/null; done
    STUCK=0
    for ((i = 0; i < N; i++)); do
        if ! wait_gone "${W_PID[$i]}" 10000; then
            echo "$FAULT_NAME: worker ${W_PID[$i]} did not stop within 10 s" | tee -a "$DIR/unexpected"
            kill -KILL "${W_PID[$i]}" 2>/dev/null
            STUCK=1
        fi
        wait "${W_PID[$i]}" || echo "$FAULT_NAME: worker ${W_PID[$i]} exit status $?" | tee -a "$DIR/unexpected"
    done
    W_PID=()
}
