"""
Breakout (ALE): one run of TRPOPlus (``atari`` entry of ``hyperparams/trpo_plus.yml``) or PPO (the zoo's ``atari``
entry of ``ppo.yml``) on ``BreakoutNoFrameskip-v4`` for a given budget and seed, with checkpoints, resume and the
diagnostics picture at the end.

The environment, wrappers (``AtariWrapper``, 4 stacked frames, reward normalization for TRPOPlus) and the model come
from the YAML entry through rl_zoo3's ``ExperimentManager``, as in ``python -m rl_zoo3.train``. Every
``--checkpoint-freq`` steps SB3's ``CheckpointCallback`` saves the model and the ``VecNormalize`` statistics; run the
same command again to continue from the latest checkpoint (``learn(..., reset_num_timesteps=False)``: the step count,
the TensorBoard run and, for TRPOPlus, the adapted trust region and decayed entropy coefficient carry on; the random
number generators restart from the seed). Evaluation: every ``--eval-freq`` steps, ``--eval-episodes`` episodes on
separate environments (stochastic actions, the zoo's rule for Atari).

At the end: ``benchmarks/results/breakout/<algo>/seed<k>.json`` (curve, final evaluation, wall time, and from the
TensorBoard logs the critic's explained variance along training) and the diagnostics picture drawn by
``python -m sb3_trpo_plus.plot`` from the TensorBoard logs. ``--summarize-only`` rewrites a finished run's record
from its logs (the explained variance) without training.

Usage::

    python -m benchmarks.breakout --algo trpo_plus --budget 1e6 --seed 0            # about hours on 2 CPU cores
    python -m benchmarks.breakout --algo ppo --budget 1e6 --seed 0
    python -m benchmarks.breakout --algo trpo_plus --budget 1e7 --seed 0 --device cuda --threads 8   # GPU machine
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    RESULTS_DIR,
    command_line,
    load_hyperparams,
    machine_info,
    parse_params,
    set_threads,
    write_json,
)
from benchmarks.learning import train_run
from sb3_trpo_plus.plot import NoLogsError, read_run, resolve_run

ENV_ID = "BreakoutNoFrameskip-v4"


def explained_variance_series(run_dir: Path, every: int = 10_000) -> dict[str, list[float]] | None:
    """
    ``train/explained_variance`` of the run's TensorBoard logs (the critic's fit of the returns, as SB3 logs it),
    thinned to about one value per ``every`` steps.

    :return: ``{"timesteps": [...], "value": [...]}``, or ``None`` when there are no logs or they hold no such key
    """
    try:
        scalars = read_run(resolve_run(run_dir / "tensorboard"))
    except NoLogsError:
        return None
    series = scalars.get("train/explained_variance")
    if series is None or len(series.x) == 0:
        return None
    timesteps, values, next_step = [], [], 0.0
    for step, value in zip(series.x, series.y):
        if step >= next_step:
            timesteps.append(int(step))
            values.append(float(value))
            next_step = step + every
    return {"timesteps": timesteps, "value": values}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", choices=["trpo_plus", "ppo"], default="trpo_plus")
    parser.add_argument("--budget", type=float, default=1e6, help="environment steps (agent steps, 4 frames each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="cpu, cuda, auto")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--checkpoint-freq", type=int, default=100_000, help="steps between checkpoints")
    parser.add_argument("--eval-freq", type=int, default=None, help="steps between evaluations (default: budget / 10)")
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--n-eval-envs", type=int, default=5)
    parser.add_argument("--params", nargs="*", default=[], help="hyperparameter overrides key:value (e.g. n_steps:128)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the latest checkpoint (without it, an existing run folder is an error)",
    )
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    parser.add_argument("--no-plot", action="store_true", help="skip the diagnostics picture")
    parser.add_argument(
        "--summarize-only",
        action="store_true",
        help="do not train: add what the finished run's logs hold (explained variance) to its existing record",
    )
    args = parser.parse_args(argv)

    set_threads(args.threads)
    results_dir = Path(args.results_dir)
    budget = int(args.budget)
    run_dir = results_dir / "tmp" / "breakout" / args.algo / f"seed{args.seed}"
    out_dir = results_dir / "breakout" / args.algo
    if args.summarize_only:
        path = out_dir / f"seed{args.seed}.json"
        record = json.loads(path.read_text())
        record["explained_variance"] = explained_variance_series(run_dir)
        write_json(path, record)
        print(f"{path}: explained variance added from {run_dir / 'tensorboard'}")
        return record
    if run_dir.exists() and not args.resume:
        raise SystemExit(f"{run_dir} exists: add --resume to continue it, or delete it to start again")
    hyperparams, source = load_hyperparams(args.algo, ENV_ID)
    hyperparams.update(parse_params(args.params))
    eval_freq = args.eval_freq if args.eval_freq is not None else max(budget // 10, 1)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    record = train_run(
        args.algo,
        ENV_ID,
        args.seed,
        budget,
        run_dir,
        hyperparams=hyperparams,
        device=args.device,
        eval_freq=eval_freq,
        eval_episodes=args.eval_episodes,
        n_eval_envs=args.n_eval_envs,
        checkpoint_freq=args.checkpoint_freq,
        tensorboard=True,
        log_args=args,
    )
    picture = out_dir / f"seed{args.seed}_diagnostics.png"
    record.update(
        hyperparams_source=source + (f" with {' '.join(args.params)}" if args.params else ""),
        started=started,
        finished=time.strftime("%Y-%m-%d %H:%M:%S"),
        command=command_line(),
        machine=machine_info(),
        explained_variance=explained_variance_series(run_dir),
    )
    if not args.no_plot:
        out_dir.mkdir(parents=True, exist_ok=True)
        plot = [sys.executable, "-m", "sb3_trpo_plus.plot", str(run_dir / "tensorboard"), "-o", str(picture)]
        plot += ["--title", f"{record['algo_label']} on {ENV_ID}, seed {args.seed}, {budget:,} steps"]
        completed = subprocess.run(plot, capture_output=True, text=True)
        if completed.returncode == 0:
            record["diagnostics_picture"] = (
                str(picture.relative_to(results_dir)) if picture.is_relative_to(results_dir) else str(picture)
            )
        else:
            print(f"the diagnostics picture failed:\n{completed.stdout}{completed.stderr}", file=sys.stderr)
    write_json(out_dir / f"seed{args.seed}.json", record)
    print(
        f"{args.algo} {ENV_ID} seed {args.seed}: final {record['final']['mean']:.1f} +/- {record['final']['std']:.1f}"
        f" -> {out_dir / f'seed{args.seed}.json'}"
    )
    return record


if __name__ == "__main__":
    main()
