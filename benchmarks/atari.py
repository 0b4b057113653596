"""
One ALE game: one run of TRPOPlus (the ``atari`` entry of ``hyperparams/trpo_plus.yml``) or PPO (the zoo's ``atari``
entry of ``ppo.yml``) on ``<Game>NoFrameskip-v4`` for a given budget and seed, with checkpoints and resume.

The environment, wrappers (``AtariWrapper``, 4 stacked frames, reward normalization for TRPOPlus) and the model come
from the YAML entry through rl_zoo3's ``ExperimentManager``, as in ``python -m rl_zoo3.train``. Every
``--checkpoint-freq`` steps SB3's ``CheckpointCallback`` saves the model and the ``VecNormalize`` statistics; the
same command run again continues from the latest checkpoint (``learn(..., reset_num_timesteps=False)``: the step
count and, for TRPOPlus, the adapted trust region carry on; the random number generators restart from the seed).

Evaluation: every ``--eval-freq`` steps, ``--eval-episodes`` episodes on separate environments (stochastic actions,
the zoo's rule for Atari), and at the end ``--final-episodes`` episodes. Scores are the game's own (the ``Monitor``
sits below ``AtariWrapper``'s reward clipping), so they can be normalized by random and human scores.

Record: ``benchmarks/results/atari/<game>/<algo>/seed<k>.json`` (``<game>`` in lower case): the curve, the final
evaluation, the mean over the last 3 evaluations, the wall time, ``segments`` (the steps each command made, where,
at which commit), and ``diagnostics``: every ``train/*`` value the algorithm logged (line-search success, step
fraction, KL, explained variance, entropy, the critic's share...), averaged over bins of 50k steps. No TensorBoard files
unless ``--tensorboard``.

Usage::

    python -m benchmarks.atari --env BattleZone --algo trpo_plus --seed 0 --resume   # 1-3 h a run on one core
    python -m benchmarks.atari --env Breakout --algo ppo --seed 5 --resume
    python -m benchmarks.atari --env Qbert --algo trpo_plus --seed 0 --device cuda --threads 1   # GPU machine
"""

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import (
    RESULTS_DIR,
    set_threads,
    write_json,
)
from benchmarks.learning import recorded_run

#: Evaluations averaged for the "late" score beside the final one (the final evaluation included)
LATE_EVALUATIONS = 3
DIAGNOSTICS_EVERY = 50_000


def env_id_of(game: str) -> str:
    """``BattleZone`` or ``BattleZoneNoFrameskip-v4`` -> ``BattleZoneNoFrameskip-v4``."""
    return game if game.endswith("-v4") else f"{game}NoFrameskip-v4"


def game_of(env_id: str) -> str:
    """``BattleZoneNoFrameskip-v4`` -> ``BattleZone``."""
    return env_id.removesuffix("-v4").removesuffix("NoFrameskip")


def record_path(results_dir: Path, game: str, algo: str, seed: int) -> Path:
    return results_dir / "atari" / game_of(env_id_of(game)).lower() / algo / f"seed{seed}.json"


def run_dir_of(results_dir: Path, game: str, algo: str, seed: int) -> Path:
    """Checkpoints, the partial curve and diagnostics of a run (under ``results/tmp/``, not committed)."""
    return results_dir / "tmp" / "atari" / game_of(env_id_of(game)).lower() / algo / f"seed{seed}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, help="the game (BattleZone) or its id (BattleZoneNoFrameskip-v4)")
    parser.add_argument("--algo", choices=["trpo_plus", "ppo"], default="trpo_plus")
    parser.add_argument("--budget", type=float, default=1e6, help="environment steps (agent steps, 4 frames each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="cpu, cuda, auto")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument(
        "--vec-env", choices=["dummy", "subproc"], default="dummy", help="environments in one process or each in its own"
    )
    parser.add_argument("--checkpoint-freq", type=int, default=50_000, help="steps between checkpoints")
    parser.add_argument("--eval-freq", type=int, default=None, help="steps between evaluations (default: budget / 10)")
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--final-episodes", type=int, default=10, help="episodes of the evaluation at the end")
    parser.add_argument("--n-eval-envs", type=int, default=5)
    parser.add_argument("--params", nargs="*", default=[], help="hyperparameter overrides key:value (e.g. n_steps:128)")
    parser.add_argument("--tensorboard", action="store_true", help="also write TensorBoard logs in the run folder")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the latest checkpoint (without it, an existing run folder is an error)",
    )
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    args = parser.parse_args(argv)

    set_threads(args.threads)
    results_dir, env_id, budget = Path(args.results_dir), env_id_of(args.env), int(args.budget)
    run_dir = run_dir_of(results_dir, args.env, args.algo, args.seed)
    out_path = record_path(results_dir, args.env, args.algo, args.seed)
    if run_dir.exists() and not args.resume:
        raise SystemExit(f"{run_dir} exists: add --resume to continue it, or delete it to start again")
    eval_freq = args.eval_freq if args.eval_freq is not None else max(budget // 10, 1)
    # the final evaluation over more episodes than the periodic ones, and the diagnostics binned per 50k steps
    options = dict(final_episodes=args.final_episodes, diagnostics_every=DIAGNOSTICS_EVERY, vec_env_type=args.vec_env)
    record = recorded_run(
        args,
        args.algo,
        env_id,
        args.seed,
        budget,
        run_dir,
        eval_freq=eval_freq,
        checkpoint_freq=args.checkpoint_freq,
        tensorboard=args.tensorboard,
        **options,
    )
    record["late"] = {"evaluations": LATE_EVALUATIONS, "mean": float(np.mean(record["curve"]["mean"][-LATE_EVALUATIONS:]))}
    record.pop("run_dir", None)
    write_json(out_path, record)
    print(
        f"{args.algo} {env_id} seed {args.seed}: final {record['final']['mean']:.1f} +/- {record['final']['std']:.1f}"
        f" ({args.final_episodes} episodes), last {LATE_EVALUATIONS} evaluations {record['late']['mean']:.1f}"
        f" -> {out_path}"
    )
    return record


if __name__ == "__main__":
    main()
