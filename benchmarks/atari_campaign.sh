#!/usr/bin/env bash
# The runs behind docs/benchmarks.md's Atari-5 section (benchmarks/results/atari/atari5_rule.md). Lanes (one per CPU
# core) take runs from one ordered list: the runs with a checkpoint first (the furthest first), then seed 0 of every
# game for both algorithms, then seed 1, and so on; a finished run (its record exists) is skipped, a run another lane
# holds is left to it, and a run with a checkpoint continues from it.
#
#     bash benchmarks/atari_campaign.sh                 # 2 lanes in the background, logs in benchmarks/results/tmp/
#     bash benchmarks/atari_campaign.sh --lanes 1       # one lane
#     bash benchmarks/atari_campaign.sh --commit        # also commit each record as its run finishes
#     bash benchmarks/atari_campaign.sh --status        # finished, running, started and waiting runs
#
# Only a finished run's record (benchmarks/results/atari/GAME/ALGO/seedK.json) is committed. Checkpoints (every 50k
# steps, about 20 MB each) stay in benchmarks/results/tmp/atari/ (not committed, .gitignore): a stopped run continues
# from its latest one in the same checkout, and a run that cannot finish before its checkout is thrown away starts
# again from step 0 in the next one.
#
# Extra runs: SEEDS="5 6 7 8 9" GAMES="Breakout" bash benchmarks/atari_campaign.sh (Breakout seeds 5-9, both algorithms)
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
GAMES=(${GAMES:-BattleZone DoubleDunk NameThisGame Phoenix Qbert})
SEEDS=(${SEEDS:-0 1 2 3 4})
ALGOS=(trpo_plus ppo)
TMP=benchmarks/results/tmp/atari
LOGS=benchmarks/results/tmp/campaign
source benchmarks/lanes.sh

lanes=2 commit=0 action=run
while [ $# -gt 0 ]; do
    case $1 in
        --lanes) lanes=$2; shift ;;
        --commit) commit=1 ;;
        --status) action=status ;;
        --lane) action=lane; lane=$2; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

runs() {  # GAME:ALGO:SEED, in campaign order
    for seed in "${SEEDS[@]}"; do for game in "${GAMES[@]}"; do for algo in "${ALGOS[@]}"; do
        echo "$game:$algo:$seed"
    done; done; done
}
lower() { echo "$1" | tr '[:upper:]' '[:lower:]'; }
record() { echo "benchmarks/results/atari/$(lower "$1")/$2/seed$3.json"; }
workdir() { echo "$TMP/$(lower "$1")/$2/seed$3"; }
progress() {  # steps of the run's latest checkpoint, 0 without one
    local steps
    steps=$(ls "$(workdir "$@")"/checkpoints/rl_model_*_steps.zip 2>/dev/null \
        | sed 's/.*rl_model_\([0-9]*\)_steps.zip/\1/' | sort -n | tail -1)
    echo "${steps:-0}"
}
queue() {  # the runs a lane may take next: those with a checkpoint first (furthest first), then campaign order
    local i=0
    while IFS=: read -r game algo seed; do
        echo "$(progress "$game" "$algo" "$seed") $i $game:$algo:$seed"
        i=$((i + 1))
    done < <(runs) | sort -k1,1nr -k2,2n | cut -d' ' -f3
}

run_one() {  # game algo seed
    local game=$1 algo=$2 seed=$3 result
    result=$(record "$@")
    mkdir -p "$(workdir "$@")"
    OMP_NUM_THREADS=1 "$PYTHON" -m benchmarks.atari --env "$game" --algo "$algo" --seed "$seed" --budget 1e6 \
        --threads 1 --checkpoint-freq 50000 --resume || return 1
    [ "$commit" = 1 ] && commit_record "$result" "Atari-5: $game $algo seed $seed at 1M steps"
    return 0
}

case $action in
    status)
        while IFS=: read -r game algo seed; do
            printf '%-8s %-13s %-10s seed %s\n' "$(run_state "$game" "$algo" "$seed")" "$game" "$algo" "$seed"
        done < <(runs)
        ;;
    lane) lane_loop ;;
    run)
        mkdir -p "$LOGS"
        for lane in $(seq 1 "$lanes"); do
            args=(--lane "$lane"); [ "$commit" = 1 ] && args+=(--commit)
            GAMES="${GAMES[*]}" SEEDS="${SEEDS[*]}" nohup bash "$0" "${args[@]}" > "$LOGS/atari_lane$lane.log" 2>&1 &
            echo "lane $lane: pid $!, log $LOGS/atari_lane$lane.log"
            sleep 2
        done
        ;;
esac
