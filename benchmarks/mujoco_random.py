"""
Scores of the uniformly random policy on the five MuJoCo tasks: the 0 of the normalized scores of the MuJoCo tuning
rule (``benchmarks/results/mujoco/tuning_rule.md``, rule 3) and of the report's aggregate over tasks.

Each task is stepped as Gymnasium makes it (its own time limit of 1,000 steps, no other wrapper: the return is the
task's own, as the benchmark's evaluations report it), ``--episodes`` episodes with uniformly random actions, from
seeded environments.

Usage::

    python -m benchmarks.mujoco_random --episodes 100 --out benchmarks/results/mujoco/random.json
"""

import argparse
from typing import Any

from benchmarks import minatar_random
from benchmarks._common import RESULTS_DIR, random_policy_scores

TASKS = ["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5", "Ant-v5", "Swimmer-v5"]


def random_returns(env_id: str, episodes: int, seed: int) -> list[float]:
    """Undiscounted returns of ``episodes`` episodes of the uniformly random policy on ``env_id`` (its own time limit)."""
    return minatar_random.random_returns(env_id, episodes, seed, max_episode_steps=None)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=TASKS, choices=TASKS)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "mujoco" / "random.json"))
    args = parser.parse_args(argv)
    return random_policy_scores({task: task for task in args.tasks}, random_returns, args.episodes, args.seed, args.out)


if __name__ == "__main__":
    main()
