#!/usr/bin/env bash
# Atari runs (benchmarks.atari) on a lent GPU machine (one GPU, 16 CPU cores): every run given at once, each on the
# GPU with its 8 training environments in their own processes (--vec-env subproc), stopped after LIMIT_S seconds.
# What comes back in $OUT: records.tgz (the finished runs' records, every run's curve, diagnostics and log) and, for
# the runs that did not finish, their latest checkpoints as ckpt.tar.part-* (a checkpoint is about 21 MB, over the
# size of one returned file): `cat ckpt.tar.part-* | tar xf -` in the checkout puts them where `--resume` finds them.
# Python packages the machine lacks travel as wheels in .whl/ (gymnasium, ale-py, stable-baselines3, sb3-contrib,
# rl-zoo3, optuna and their missing requirements).
#
#   BENCHMARK_COMMIT=$(git rev-parse HEAD) bash benchmarks/lent_machine_atari.sh LIMIT_S GAME:ALGO:SEED...
set -u
limit=$1
shift
if [ -d "${WHEELS:-.whl}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${WHEELS:-.whl}"/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
python3 -c "import torch, ale_py, rl_zoo3.exp_manager, sb3_trpo_plus.zoo, benchmarks.atari; \
print('cuda', torch.cuda.is_available(), torch.__version__)" || exit 1
out=${OUT:-/tmp/out}
logs=benchmarks/results/tmp/lent_logs
mkdir -p "$out" "$logs"
start=$(date +%s)
for run in "$@"; do
    IFS=: read -r game algo seed <<<"$run"
    timeout "$limit" python3 -m benchmarks.atari --env "$game" --algo "$algo" --seed "$seed" --budget 1e6 \
        --device "${DEVICE:-cuda}" --threads 1 --vec-env subproc --checkpoint-freq 50000 --resume \
        >"$logs/${game}_${algo}_seed$seed.log" 2>&1 &
done
wait
echo "all runs ended after $(($(date +%s) - start)) s"
for f in "$logs"/*.log; do echo "== $f"; tail -n 2 "$f"; done
find benchmarks/results/atari benchmarks/results/tmp/atari -newer benchmarks/lent_machine_atari.sh -type f \
    \( -name 'seed*.json' -o -name 'curve.json' -o -name 'diagnostics.json' -o -name 'segments.json' \) -print0 \
    | tar czf "$out/records.tgz" --null -T - "$logs"
unfinished=()
for run in "$@"; do
    IFS=: read -r game algo seed <<<"$run"
    lower=$(echo "$game" | tr '[:upper:]' '[:lower:]')
    [ -f "benchmarks/results/atari/$lower/$algo/seed$seed.json" ] && continue
    unfinished+=("benchmarks/results/tmp/atari/$lower/$algo/seed$seed/checkpoints")
done
if [ ${#unfinished[@]} -gt 0 ]; then
    tar cf - "${unfinished[@]}" | split -b 15M - "$out/ckpt.tar.part-"
fi
ls -la "$out"
