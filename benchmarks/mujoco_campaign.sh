#!/usr/bin/env bash
# The MuJoCo runs: the benchmark (TRPOPlus, sb3-contrib TRPO and PPO, each with its own entry, on Hopper-v5,
# Walker2d-v5, HalfCheetah-v5, Ant-v5 and Swimmer-v5, 1M steps) and the tuning of TRPOPlus's entry
# (benchmarks/results/mujoco/tuning_rule.md), resumable across sessions. A run is ALGO:ENV:SEED[:CANDIDATE]; lanes
# (one per CPU core, in the background) take runs in the order given; a run whose record exists is skipped, a run
# another lane holds is left to it, a run with a checkpoint continues from it (benchmarks.learning does both).
#
#     bash benchmarks/mujoco_campaign.sh                      # the benchmark: seeds 0-4 of every task, 3 algorithms
#                                                             # (TRPOPlus's only once tuning/decision.md exists)
#     bash benchmarks/mujoco_campaign.sh --tuning             # round 1 of the tuning rule (seeds 100-102)
#     bash benchmarks/mujoco_campaign.sh --tuning 2           # round 2 (only if the rule calls for it)
#     bash benchmarks/mujoco_campaign.sh trpo_plus:Hopper-v5:0 ppo:Swimmer-v5:5   # the runs given
#     bash benchmarks/mujoco_campaign.sh --lanes 1            # one lane (default: 2)
#     bash benchmarks/mujoco_campaign.sh --commit             # also commit each record as its run finishes
#     bash benchmarks/mujoco_campaign.sh --status             # finished, running, started and waiting runs
#
# Without CANDIDATE a run is the algorithm's entry (hyperparams/trpo_plus.yml; the zoo's v4 entries for trpo and ppo,
# benchmarks/hyperparams.yml) and its record goes to benchmarks/results/mujoco/learning/ALGO/ENV/seedS.json. With it,
# the entry gets the overrides of benchmarks/results/mujoco/tuning/CANDIDATE/params.txt (one key:value a line, as
# benchmarks.learning's --params; none for T0) and the record goes under benchmarks/results/mujoco/tuning/CANDIDATE/.
# Every run: 1M steps, an evaluation every 50k steps and at the end (10 deterministic episodes on 5 environments
# seeded apart), the train/* diagnostics binned per 50k steps, one torch thread. Checkpoints (every 250k steps) and
# logs stay in .../tmp/ (not committed). More seeds: SEEDS="5 6 7 8 9" bash benchmarks/mujoco_campaign.sh
# A smoke test elsewhere: RESULTS=/tmp/mujoco BUDGET=4096 EVAL_FREQ=2048 bash benchmarks/mujoco_campaign.sh --lanes 1 ...
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
ENVS=(${ENVS:-Hopper-v5 Walker2d-v5 HalfCheetah-v5 Ant-v5 Swimmer-v5})
SEEDS=(${SEEDS:-0 1 2 3 4})
ALGOS=(${ALGOS:-trpo_plus trpo ppo})
RESULTS=${RESULTS:-benchmarks/results/mujoco}
BUDGET=${BUDGET:-1000000}
EVAL_FREQ=${EVAL_FREQ:-50000}
#: The candidates' overrides (committed with the tuning rule, before their runs)
CANDIDATES=benchmarks/results/mujoco/tuning
LOGS=$RESULTS/tmp/campaign
source benchmarks/lanes.sh

lanes=2 commit=0 action=run tuning="" given=()
while [ $# -gt 0 ]; do
    case $1 in
        --lanes) lanes=$2; shift ;;
        --commit) commit=1 ;;
        --status) action=status ;;
        --tuning) tuning=1; if [[ ${2:-} =~ ^[0-9]+$ ]]; then tuning=$2; shift; fi ;;
        --lane) action=lane; lane=$2; shift ;;
        --*) echo "unknown argument $1" >&2; exit 2 ;;
        *) given+=("$1") ;;
    esac
    shift
done

runs() {  # ALGO:ENV:SEED[:CANDIDATE], in campaign order
    if [ ${#given[@]} -gt 0 ]; then
        printf '%s\n' "${given[@]}"
    elif [ "$tuning" = 1 ]; then  # round 1 of tuning_rule.md: T0, T1, T2 on both tuning tasks, T0b on HalfCheetah
        for seed in 100 101 102; do
            for candidate in T0 T1 T2; do for env in Hopper-v5 HalfCheetah-v5; do
                echo "trpo_plus:$env:$seed:$candidate"
            done; done
            echo "trpo_plus:HalfCheetah-v5:$seed:T0b"
        done
    elif [ "$tuning" = 2 ]; then  # round 2: T3 (both features), run only if T1 and T2 both pass round 1
        for seed in 100 101 102; do for env in Hopper-v5 HalfCheetah-v5; do echo "trpo_plus:$env:$seed:T3"; done; done
    else
        for seed in "${SEEDS[@]}"; do for env in "${ENVS[@]}"; do for algo in "${ALGOS[@]}"; do
            # TRPOPlus's reported runs wait for its entries: the tuning's decision (tuning_rule.md) is recorded first
            [ "$algo" = trpo_plus ] && [ ! -f "$CANDIDATES/decision.md" ] && continue
            echo "$algo:$env:$seed"
        done; done; done
    fi
}

results_dir() {  # [candidate]
    if [ -n "${1:-}" ]; then echo "$RESULTS/tuning/$1"; else echo "$RESULTS"; fi
}
record() { echo "$(results_dir "${4:-}")/learning/$1/$2/seed$3.json"; }   # algo env seed [candidate]
workdir() { echo "$(results_dir "${4:-}")/tmp/learning/$1/$2/seed$3"; }   # (benchmarks.learning's own)

run_one() {  # algo env seed [candidate]
    local algo=$1 env=$2 seed=$3 candidate=${4:-} result work params=()
    result=$(record "$@") work=$(workdir "$@")
    if [ -n "$candidate" ]; then
        local file=$CANDIDATES/$candidate/params.txt
        [ -f "$file" ] || { echo "no $file: the candidate's overrides are written (and committed) before its runs"; return 1; }
        mapfile -t params < <(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$file")
    fi
    mkdir -p "$work"
    OMP_NUM_THREADS=1 "$PYTHON" -m benchmarks.learning --algos "$algo" --envs "$env" --seeds "$seed" \
        --n-timesteps "$BUDGET" --eval-freq "$EVAL_FREQ" --eval-episodes 10 --n-eval-envs 5 --diagnostics-every 50000 \
        --threads 1 --results-dir "$(results_dir "$candidate")" ${params[@]+--params "${params[@]}"} \
        >> "$work/train.log" 2>&1 || { echo "log: $work/train.log"; return 1; }
    [ -f "$result" ] || return 1
    [ "$commit" = 1 ] && commit_record "$result" "MuJoCo: $algo $env seed $seed${candidate:+ (candidate $candidate)} at $BUDGET steps"
    return 0
}

queue() { runs; }

case $action in
    status)
        while IFS=: read -r algo env seed candidate; do
            printf '%-8s %-10s %-15s seed %-4s %s\n' "$(run_state "$algo" "$env" "$seed" "$candidate")" "$algo" "$env" \
                "$seed" "$candidate"
        done < <(runs)
        ;;
    lane) lane_loop ;;
    run)
        mkdir -p "$LOGS"
        for lane in $(seq 1 "$lanes"); do
            args=(--lane "$lane")
            [ "$commit" = 1 ] && args+=(--commit)
            [ -n "$tuning" ] && args+=(--tuning "$tuning")
            ENVS="${ENVS[*]}" SEEDS="${SEEDS[*]}" ALGOS="${ALGOS[*]}" RESULTS=$RESULTS BUDGET=$BUDGET EVAL_FREQ=$EVAL_FREQ \
                nohup bash "$0" "${args[@]}" ${given[@]+"${given[@]}"} > "$LOGS/lane$lane.log" 2>&1 &
            echo "lane $lane: pid $!, log $LOGS/lane$lane.log"
            sleep 2
        done
        ;;
esac
