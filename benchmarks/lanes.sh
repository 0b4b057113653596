# Lanes of a campaign, sourced by atari_campaign.sh and mujoco_campaign.sh: each lane (one per CPU core, in the
# background) takes the next run of the campaign's queue that is neither finished (its record exists), nor held by a
# live lane, nor failed in this lane before. A lane holds a run by flock(1) on a file beside the run's working folder:
# taking the lock is one atomic step, so two lanes started at the same moment never take the same run, and the kernel
# lets it go when the lane and the run's processes are gone, so a killed lane leaves no stale lock behind.
#
# The sourcing script defines, for a run given as its fields (a queue line is the fields joined by ':'):
#   queue          the runs, one a line, in the order lanes take them
#   record F...    the record that a finished run has written
#   workdir F...   the run's working folder (checkpoints, logs)
#   run_one F...   the run itself (non-zero when it failed)
# and sets `lane` (this lane's number) before calling lane_loop.

held() {  # a live lane holds the run whose working folder is $1
    [ -e "$1.lane" ] && ! flock -n "$1.lane" true
}

run_state() {  # F...: done, running (a live lane holds it), started (it has a curve) or waiting
    if [ -f "$(record "$@")" ]; then echo done
    elif held "$(workdir "$@")"; then echo running
    elif [ -f "$(workdir "$@")/curve.json" ]; then echo started
    else echo waiting; fi
}

commit_record() {  # path message: commit one record (retried: the other lane may be committing at the same moment)
    for _ in 1 2 3 4 5; do
        git add "$1" && git commit -q -m "$2" -- "$1" && return
        sleep 7
    done
}

lane_loop() {
    local failed=" " run next fields work lock  # a run that failed in this lane is not tried again by it (no spinning)
    while true; do
        next=""
        while read -r run; do
            IFS=: read -r -a fields <<< "$run"
            [ -f "$(record "${fields[@]}")" ] && continue
            [[ $failed == *" $run "* ]] && continue
            work=$(workdir "${fields[@]}")
            mkdir -p "$(dirname "$work")"
            exec {lock}> "$work.lane"
            # held by another lane, or finished by it between the test above and the lock: not for this lane
            flock -n "$lock" && [ ! -f "$(record "${fields[@]}")" ] && { next=$run; break; }
            exec {lock}>&-
        done < <(queue)
        [ -z "$next" ] && { echo "lane $lane: nothing left"; return; }
        IFS=: read -r -a fields <<< "$next"
        echo "lane $lane: $(date -u +%H:%M) ${fields[*]}"
        if ! run_one "${fields[@]}"; then
            echo "lane $lane: ${fields[*]} failed, not retried by this lane"
            failed+="$next "
        fi
        exec {lock}>&-
    done
}
