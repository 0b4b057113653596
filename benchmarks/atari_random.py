"""
Scores of the uniformly random policy on ALE games, with the wrappers the ``atari`` entries train and evaluate with
(``AtariWrapper``: no-op starts, 4-frame skip, a life lost ends the agent's episode; the score is the whole game's,
read by the ``Monitor`` below the wrapper, as the evaluations read it). They are the 0 of the normalized scores
that the report aggregates over games (``random = 0``, ``PPO = 1``).

Usage::

    python -m benchmarks.atari_random --episodes 30 --out benchmarks/results/atari/random.json
"""

import argparse
from typing import Any

import gymnasium as gym

from benchmarks._common import RESULTS_DIR, random_policy_scores, register_envs
from benchmarks.atari import env_id_of

#: The five games of Atari-5 (Aitchison et al., ICML 2023) and the game the ``atari`` entry was tuned on
GAMES = ["BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert", "Breakout"]


def random_returns(env_id: str, episodes: int, seed: int) -> list[float]:
    """Whole-game returns of ``episodes`` games of the uniformly random policy, through ``AtariWrapper``."""
    from stable_baselines3.common.atari_wrappers import AtariWrapper
    from stable_baselines3.common.monitor import Monitor

    env = AtariWrapper(Monitor(gym.make(env_id)))
    env.action_space.seed(seed)
    returns: list[float] = []
    env.reset(seed=seed)
    while len(returns) < episodes:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if "episode" in info:  # the Monitor saw the game end
            returns.append(float(info["episode"]["r"]))
        if terminated or truncated:
            env.reset()
    env.close()
    return returns


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", nargs="+", default=GAMES)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "atari" / "random.json"))
    args = parser.parse_args(argv)
    register_envs()
    env_ids = {game: env_id_of(game) for game in args.games}
    return random_policy_scores(env_ids, random_returns, args.episodes, args.seed, args.out)


if __name__ == "__main__":
    main()
