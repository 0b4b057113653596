"""
Time the preparation of the update's batch from a full rollout buffer of Atari frames (8 envs x 256 steps of
4x84x84 by default, the ``atari`` entry's rollout): ``next(buffer.get(batch_size=None))`` then ``channels_last`` (the
path before ``sb3_trpo_plus.rollout.whole_rollout``) against ``whole_rollout``, each followed by the images' scaling
to [0, 1] that the update does once: ``/ 255.0`` (a second 230 MB allocation); since stop 23
``sb3_trpo_plus.rollout.scaled_images`` (the division in place on a copy, bit-identical); since stop 26 the division
in place on ``whole_rollout``'s own tensor (no copy at all, ``scaled_images(..., in_place=True)``). The paths are
timed in turn (the order reversed every repeat), so a shared machine's drift hits all alike.

Usage::

    python -m benchmarks.experiments.rollout_batch --n-envs 8 --n-steps 256 --repeats 6 --threads 2
"""

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer

from sb3_trpo_plus.rollout import scaled_images, whole_rollout


def filled_buffer(n_envs: int, n_steps: int, seed: int) -> RolloutBuffer:
    """A full buffer of random frames, as ``collect_rollouts`` leaves it (returns and advantages computed)."""
    rng = np.random.default_rng(seed)
    observation_space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    buffer = RolloutBuffer(n_steps, observation_space, spaces.Discrete(4), n_envs=n_envs)
    for _ in range(n_steps):
        buffer.add(
            rng.integers(0, 256, (n_envs, 4, 84, 84), dtype=np.uint8),
            rng.integers(0, 4, (n_envs, 1)),
            rng.normal(size=n_envs),
            np.zeros(n_envs, dtype=bool),
            th.as_tensor(rng.normal(size=n_envs)),
            th.as_tensor(rng.normal(size=n_envs)),
        )
    buffer.compute_returns_and_advantage(th.zeros(n_envs), np.zeros(n_envs, dtype=bool))
    return buffer


def shuffled_path(buffer: RolloutBuffer) -> th.Tensor:
    """The path before ``whole_rollout``; the buffer is put back as it was (``get`` flattens it in place)."""
    saved = {name: value for name, value in vars(buffer).items() if isinstance(value, np.ndarray)}
    observations = next(buffer.get(batch_size=None)).observations
    scaled = observations.contiguous(memory_format=th.channels_last) / 255.0
    vars(buffer).update(saved)
    buffer.generator_ready = False
    return scaled


def whole_path(buffer: RolloutBuffer) -> th.Tensor:
    return whole_rollout(buffer).observations / 255.0


def in_place_path(buffer: RolloutBuffer) -> th.Tensor:
    """``whole_rollout``, then ``scaled_images`` on a copy (the update from stop 23 to stop 25)."""
    return scaled_images(whole_rollout(buffer).observations)


def no_copy_path(buffer: RolloutBuffer) -> th.Tensor:
    """What the update does now (``TRPOPlus.train``: ``whole_rollout``, then ``scaled_images`` on its own tensor)."""
    return scaled_images(whole_rollout(buffer).observations, in_place=True)


def timed(function: Callable[[RolloutBuffer], th.Tensor], buffer: RolloutBuffer) -> float:
    start = time.perf_counter()
    function(buffer)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--n-steps", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=6, help="timed calls of each path, in alternation")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    th.set_num_threads(args.threads)
    buffer = filled_buffer(args.n_envs, args.n_steps, args.seed)
    paths = {
        "get + channels_last": shuffled_path,
        "whole_rollout": whole_path,
        "whole_rollout, in place": in_place_path,
        "whole_rollout, no copy": no_copy_path,
    }
    times: dict[str, list[float]] = {name: [] for name in paths}
    for repeat in range(args.repeats):
        for name in list(paths)[:: 1 if repeat % 2 == 0 else -1]:
            times[name].append(timed(paths[name], buffer))
    print(f"batch of {args.n_envs} x {args.n_steps} frames of 4x84x84, {args.repeats} calls each, in alternation:")
    for name, values in times.items():
        print(f"  {name:24s} mean {np.mean(values):.3f} s, best {np.min(values):.3f} s")
    for before, after in zip(list(paths), list(paths)[1:]):
        saved = np.mean(times[before]) - np.mean(times[after])
        print(f"  {after!r} against {before!r}: {saved:.3f} s saved per update (means)")
    return times


if __name__ == "__main__":
    main()
