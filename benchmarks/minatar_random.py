"""
Scores of the uniformly random policy on the five MinAtar games: the 0 of the normalized scores that the report
aggregates over games (``random = 0``, ``PPO = 1``).

Each game is stepped as the benchmark's entries step it (``gymnasium.wrappers.TimeLimit`` of 10,000 steps, no other
wrapper), ``--episodes`` episodes with uniformly random actions, from seeded environments.

Usage::

    python -m benchmarks.minatar_random --episodes 100 --out benchmarks/results/minatar_random.json
"""

import argparse
from typing import Any

import gymnasium as gym

from benchmarks._common import RESULTS_DIR, random_policy_scores, register_envs

GAMES = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
#: The time limit of the MinAtar entries (``hyperparams/trpo_plus.yml``, ``benchmarks/hyperparams.yml``)
MAX_EPISODE_STEPS = 10_000


def random_returns(env_id: str, episodes: int, seed: int, max_episode_steps: int | None = MAX_EPISODE_STEPS) -> list[float]:
    """
    Undiscounted returns of ``episodes`` episodes of the uniformly random policy on ``env_id``, cut at
    ``max_episode_steps`` (``None``: the environment's own time limit only; ``benchmarks.mujoco_random``).
    """
    env = gym.make(env_id)
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=max_episode_steps)
    env.action_space.seed(seed)
    returns = []
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", nargs="+", default=GAMES, choices=GAMES)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "minatar_random.json"))
    args = parser.parse_args(argv)
    register_envs()
    env_ids = {f"MinAtar/{game}-v1": f"MinAtar/{game}-v1" for game in args.games}
    return random_policy_scores(env_ids, random_returns, args.episodes, args.seed, args.out)


if __name__ == "__main__":
    main()
