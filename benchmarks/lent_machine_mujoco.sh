#!/usr/bin/env bash
# MuJoCo runs of mujoco_campaign.sh on a lent machine's CPU cores (16 there): every run given at once, one core each,
# stopped after LIMIT_S seconds, with mujoco_campaign.sh's command (budget, evaluation, diagnostics, one torch thread)
# and a checkpoint every CHECKPOINT_FREQ steps (default 50k), so that little of an unfinished run is lost.
# What comes back is one file, $OUT/mujoco.tgz: the finished runs' records and every unfinished run's working folder
# (checkpoint, curve, diagnostics, segments, log). Here, in the checkout: `tar xzf mujoco.tgz`, then
# mujoco_campaign.sh resumes the unfinished runs from their checkpoints; only the finished runs' records are committed.
# Python packages the machine lacks travel as wheels in .whl/ (gymnasium, mujoco, stable-baselines3, sb3-contrib,
# rl-zoo3, optuna and their missing requirements); the copy there has no git history, so the command names the commit.
#
#   BENCHMARK_COMMIT=$(git rev-parse HEAD) bash benchmarks/lent_machine_mujoco.sh LIMIT_S ALGO:ENV:SEED...
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUDGET=${BUDGET:-1000000}
EVAL_FREQ=${EVAL_FREQ:-50000}
RESULTS=${RESULTS:-benchmarks/results/mujoco}
out=${OUT:-/tmp/out}
limit=$1
shift
if [ -d "${WHEELS:-.whl}" ]; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "${WHEELS:-.whl}"/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
"$PYTHON" -c "import torch, gymnasium, rl_zoo3.exp_manager, sb3_trpo_plus.zoo, benchmarks.learning; \
gymnasium.make('Hopper-v5'); print('torch', torch.__version__, 'commit', '${BENCHMARK_COMMIT:-}')" || exit 1
stamp=$(mktemp)
start=$(date +%s)
for run in "$@"; do
    IFS=: read -r algo env seed <<<"$run"
    work=$RESULTS/tmp/learning/$algo/$env/seed$seed
    mkdir -p "$work"
    timeout "$limit" "$PYTHON" -m benchmarks.learning --algos "$algo" --envs "$env" --seeds "$seed" \
        --n-timesteps "$BUDGET" --eval-freq "$EVAL_FREQ" --eval-episodes 10 --n-eval-envs 5 --diagnostics-every 50000 \
        --threads 1 --checkpoint-freq "${CHECKPOINT_FREQ:-50000}" --results-dir "$RESULTS" >> "$work/train.log" 2>&1 &
done
wait
echo "all runs ended after $(($(date +%s) - start)) s"
mkdir -p "$out"
for run in "$@"; do
    IFS=: read -r algo env seed <<<"$run"
    if [ -f "$RESULTS/learning/$algo/$env/seed$seed.json" ]; then echo "$run: finished"
    else echo "$run: stopped, $(ls "$RESULTS/tmp/learning/$algo/$env/seed$seed" 2>/dev/null | tr '\n' ' ')"; fi
done
find "$RESULTS/learning" "$RESULTS/tmp/learning" -newer "$stamp" -type f ! -name '*.partial' -print0 \
    | tar czf "$out/mujoco.tgz" --null -T -
rm -f "$stamp"
ls -la "$out"
