#!/usr/bin/env bash
# Atari runs (benchmarks.atari) on a lent GPU machine (one GPU, 16 CPU cores): every run given at once, each on the
# GPU with its 8 training environments in their own processes (--vec-env subproc), stopped after LIMIT_S seconds
# (a checkpoint every 10k steps, written whole or not at all, so at most 10k steps of a run are lost).
# What comes back is staged in benchmarks/results/tmp/lent_out/ and sent in $OUT as far as one call's limits allow
# (8 files, 64 MiB): records.tgz (the finished runs' records, every run's curve, diagnostics, segments and log), then
# each unfinished run's latest checkpoint as N_GAME_ALGO_seedS.tar.part-* (a checkpoint is about 21 MB, over the size
# of one returned file), in the order the runs were given, a run's parts always together. `--send`, called on the
# same warm machine, sends the next ones. Here, in the checkout: `tar xzf records.tgz`, and for each run
# `cat N_*.tar.part-* | tar xf -`, which puts its checkpoint where `--resume` (and atari_campaign.sh) finds it, in
# benchmarks/results/tmp/ (not committed). Only the finished runs' records are committed: a run whose checkpoint is
# not in this checkout starts again from step 0.
# Python packages the machine lacks travel as wheels in .whl/ (gymnasium, ale-py, stable-baselines3, sb3-contrib,
# rl-zoo3, optuna and their missing requirements).
#
#   BENCHMARK_COMMIT=$(git rev-parse HEAD) bash benchmarks/lent_machine_atari.sh LIMIT_S GAME:ALGO:SEED...
#   bash benchmarks/lent_machine_atari.sh --send
set -u
stage=benchmarks/results/tmp/lent_out
out=${OUT:-/tmp/out}

send() {  # move staged files into $OUT: records first, then whole runs in order, within one call's limits
    local n=0 total=0 limit=$((64 * 1024 * 1024)) group files size
    mkdir -p "$out"
    for group in records.tgz $(ls "$stage" | grep '\.tar\.part-' | sed 's/\.tar\.part-.*//' | sort -un); do
        if [ "$group" = records.tgz ]; then files=("$stage"/records.tgz); else files=("$stage/$group".tar.part-*); fi
        [ -f "${files[0]}" ] || continue
        size=$(cat "${files[@]}" | wc -c)
        if [ $((n + ${#files[@]})) -le 8 ] && [ $((total + size)) -le $limit ]; then
            mv "${files[@]}" "$out"/
            n=$((n + ${#files[@]})) total=$((total + size))
        fi
    done
    echo "sent: $(ls "$out" | tr '\n' ' ')($total bytes)"
    echo "left: $(ls "$stage" | tr '\n' ' ')"
}

if [ "${1:-}" = --send ]; then send; exit; fi
limit=$1
shift
if [ -d "${WHEELS:-.whl}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${WHEELS:-.whl}"/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
python3 -c "import cv2, torch, ale_py, rl_zoo3.exp_manager, sb3_trpo_plus.zoo, benchmarks.atari; \
print('cuda', torch.cuda.is_available(), torch.__version__)" || exit 1
logs=benchmarks/results/tmp/lent_logs
rm -rf "$stage"
mkdir -p "$stage" "$logs"
start=$(date +%s)
for run in "$@"; do
    IFS=: read -r game algo seed <<<"$run"
    timeout "$limit" python3 -m benchmarks.atari --env "$game" --algo "$algo" --seed "$seed" --budget 1e6 \
        --device "${DEVICE:-cuda}" --threads 1 --vec-env subproc --checkpoint-freq 10000 --resume \
        >"$logs/${game}_${algo}_seed$seed.log" 2>&1 &
done
wait
echo "all runs ended after $(($(date +%s) - start)) s"
find benchmarks/results/atari benchmarks/results/tmp/atari -newer benchmarks/lent_machine_atari.sh -type f \
    \( -name 'seed*.json' -o -name 'curve.json' -o -name 'diagnostics.json' -o -name 'segments.json' \) -print0 \
    | tar czf "$stage/records.tgz" --null -T - "$logs"
i=1
for run in "$@"; do
    IFS=: read -r game algo seed <<<"$run"
    lower=$(echo "$game" | tr '[:upper:]' '[:lower:]')
    checkpoints=benchmarks/results/tmp/atari/$lower/$algo/seed$seed/checkpoints
    echo "$run: $(ls "$checkpoints" 2>/dev/null | grep zip)"
    if [ ! -f "benchmarks/results/atari/$lower/$algo/seed$seed.json" ] && [ -d "$checkpoints" ]; then
        tar cf - --exclude="*.partial" "$checkpoints" | split -b 15M - "$stage/${i}_${game}_${algo}_seed$seed.tar.part-"
    fi
    i=$((i + 1))
done
send
