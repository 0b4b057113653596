#!/usr/bin/env bash
# Breakout tuning runs on a lent accelerator machine (one GPU, 16 CPU cores): every lane below at once, one per
# process, each on the GPU with one torch thread; at the end their records and TensorBoard logs (not the
# checkpoints) are packed into $OUT/tuning_runs.tgz. Python packages the machine lacks travel as wheels in .whl/
# (see the note of benchmarks/results/breakout_tuning/X500/decision_rule.md for the list).
#
#   bash benchmarks/lent_machine_tuning.sh LIMIT_S NAME:SEED:PARAMS... (PARAMS: the --params words, '|'-separated)
set -u
limit=$1
shift
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
python3 -c "import torch, ale_py, rl_zoo3.exp_manager, sb3_trpo_plus.zoo, benchmarks.breakout; \
print('cuda', torch.cuda.is_available(), torch.__version__)" || exit 1
out=${OUT:-/tmp/out}
mkdir -p "$out/logs"
start=$(date +%s)
for lane in "$@"; do
    name=${lane%%:*}
    rest=${lane#*:}
    seed=${rest%%:*}
    IFS='|' read -r -a params <<<"${rest#*:}"
    timeout "$limit" python3 -m benchmarks.breakout --algo trpo_plus --seed "$seed" --budget "${BUDGET:-5e5}" --eval-freq 100000 \
        --threads 1 --device "${DEVICE:-cuda}" --checkpoint-freq 100000 --results-dir "benchmarks/results/breakout_tuning/$name" \
        --resume --params "${params[@]}" >"$out/logs/${name}_seed$seed.log" 2>&1 &
done
wait
echo "all lanes ended after $(($(date +%s) - start)) s"
for f in "$out"/logs/*.log; do echo "== $f"; tail -n 3 "$f"; done
find benchmarks/results/breakout_tuning -newer benchmarks/lent_machine_tuning.sh -type f \
    \( -name 'seed*.json' -o -name 'events.out.tfevents*' -o -name 'curve.json' \) -print0 \
    | tar czf "$out/tuning_runs.tgz" --null -T - "$out/logs"
ls -la "$out"
