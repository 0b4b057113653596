#!/usr/bin/env bash
# The runs behind docs/benchmarks.md's Breakout (section 4) and MinAtar (section 5) tables, in two lanes, one per CPU
# core. Every run is resumable and a finished one is skipped, so after an interruption (a session's end) the same
# command carries on where it stopped:
#
#     bash benchmarks/atari_campaign.sh            # both lanes in the background, logs in benchmarks/results/tmp/
#     bash benchmarks/atari_campaign.sh --status   # which runs are finished
#     bash benchmarks/atari_campaign.sh --lane 1   # one lane only (1 or 2), e.g. on a one-core share
#
# Lane 1: TRPOPlus `atari` entry on ALE Breakout, seeds 0, 1, 2 (1M steps each).
# Lane 2: PPO `atari` entry on ALE Breakout, seeds 1, 2 (seed 0 exists), then the MinAtar sweep (TRPOPlus and PPO,
#         Asterix, Freeway, Seaquest, SpaceInvaders, seeds 1-3; Breakout seeds 1-3 exist).
# When a run finishes, commit its result: git add benchmarks/results/breakout benchmarks/results/learning
# and regenerate the report: python -m benchmarks.report
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
LOGS=benchmarks/results/tmp/campaign
MINATAR_GAMES=(MinAtar/Asterix-v1 MinAtar/Freeway-v1 MinAtar/Seaquest-v1 MinAtar/SpaceInvaders-v1)

breakout() {  # algo seed
    local result=benchmarks/results/breakout/$1/seed$2.json
    if [ -f "$result" ]; then echo "done: $result"; return; fi
    OMP_NUM_THREADS=1 "$PYTHON" -m benchmarks.breakout --algo "$1" --budget 1e6 --seed "$2" --threads 1 \
        --checkpoint-freq 50000 --resume
}

minatar() {  # learning.py skips the finished (algo, env, seed) keys and resumes the others from their checkpoints
    OMP_NUM_THREADS=1 "$PYTHON" -m benchmarks.learning --algos trpo_plus ppo --envs "${MINATAR_GAMES[@]}" \
        --seeds 1 2 3 --jobs 1 --threads 1
}

if [ "${1:-}" = "--status" ]; then
    for algo_seed in "trpo_plus 0" "trpo_plus 1" "trpo_plus 2" "ppo 0" "ppo 1" "ppo 2"; do
        set -- $algo_seed
        file=benchmarks/results/breakout/$1/seed$2.json
        [ -f "$file" ] && echo "finished  $file" || echo "to run    $file"
    done
    "$PYTHON" -m benchmarks.learning --algos trpo_plus ppo --envs "${MINATAR_GAMES[@]}" --seeds 1 2 3 --dry-run \
        | grep -v "^would run"
    exit 0
fi

lane1() { breakout trpo_plus 0 && breakout trpo_plus 1 && breakout trpo_plus 2; }
lane2() { breakout ppo 1 && breakout ppo 2 && minatar; }

mkdir -p "$LOGS"
if [ "${1:-}" = "--lane" ]; then
    "lane$2" >> "$LOGS/lane$2.log" 2>&1 &
else
    lane1 >> "$LOGS/lane1.log" 2>&1 &
    lane2 >> "$LOGS/lane2.log" 2>&1 &
fi
echo "lanes started (pids $(jobs -p | tr '\n' ' ')); logs in $LOGS/"
wait
