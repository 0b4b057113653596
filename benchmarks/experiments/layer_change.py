"""
Two diagnostics of a training run that motivated Breakout tuning candidate P
(``benchmarks/results/breakout_tuning/P500/decision_rule.md``):

- ``weights A B``: the relative change ``||w_B - w_A|| / ||w_A||`` of every weight tensor (biases left out) between two
  checkpoints of one run (SB3 ``.zip`` files).
- ``logs EVENTS... --keys ...``: the mean of logged keys over step ranges (``--bins``), from TensorBoard event files
  (read by :func:`sb3_trpo_plus.plot_data.read_tensorboard_log`).

Every file argument is a path, or ``REV:PATH`` for a file in the git history (read with ``git show``): the carried
checkpoints and logs of the reported Breakout runs are there, under ``benchmarks/results/in_progress/``.

Usage (the figures of P500/decision_rule.md)::

    C=benchmarks/results/in_progress/breakout
    python -m benchmarks.experiments.layer_change weights b32d57a:$C/ppo/seed2/checkpoints/rl_model_400000_steps.zip \\
        b60a0ab:$C/ppo/seed2/checkpoints/rl_model_450000_steps.zip
    python -m benchmarks.experiments.layer_change weights 64f73d4:$C/trpo_plus/seed0/checkpoints/rl_model_500000_steps.zip \\
        2b3f98e:$C/trpo_plus/seed0/checkpoints/rl_model_550000_steps.zip
    python -m benchmarks.experiments.layer_change logs \\
        f613a9d:$C/ppo/seed1/tensorboard/BreakoutNoFrameskip-v4/ppo_1/events.out.tfevents.1795434204.vm.3700.0 \\
        --keys train/approx_kl train/entropy_loss
    T=$C/trpo_plus/seed0/tensorboard/BreakoutNoFrameskip-v4/trpo_plus_2/events.out.tfevents
    python -m benchmarks.experiments.layer_change logs \\
        b32d57a:$T.1795439320.vm.6726.0 2b3f98e:$T.1795456110.vm.17907.0 2b3f98e:$T.1795461369.vm.24176.0 \\
        07a6ba5:$T.1795469389.vm.28232.0 0e413f3:$T.1795470279.vm.28633.0 --keys train/entropy train/kl_divergence_loss
"""

import argparse
import io
import itertools
import subprocess
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch as th

from benchmarks._common import REPO_ROOT
from sb3_trpo_plus.plot_data import read_tensorboard_log


def read_bytes(spec: str) -> bytes:
    """The content of a file: a path, or ``REV:PATH`` in the git history of the repository."""
    if Path(spec).is_file() or ":" not in spec:
        return Path(spec).read_bytes()
    return subprocess.run(["git", "show", spec], cwd=REPO_ROOT, capture_output=True, check=True).stdout


def policy_weights(spec: str) -> dict[str, th.Tensor]:
    """The policy's state dict in an SB3 checkpoint."""
    with zipfile.ZipFile(io.BytesIO(read_bytes(spec))) as archive:
        return th.load(io.BytesIO(archive.read("policy.pth")), map_location="cpu")


def relative_changes(before: dict[str, th.Tensor], after: dict[str, th.Tensor]) -> dict[str, float]:
    """``||after - before|| / ||before||`` for every floating-point weight tensor (not biases, not scalars)."""
    return {
        name: float((after[name] - value).norm() / value.norm())
        for name, value in before.items()
        if value.is_floating_point() and value.dim() > 1
    }


def binned_means(steps: np.ndarray, values: np.ndarray, bins: list[float]) -> list[float | None]:
    """The mean of the finite ``values`` logged at steps in each ``[bins[i], bins[i + 1])``."""
    means = []
    for low, high in itertools.pairwise(bins):
        chosen = values[(steps >= low) & (steps < high) & np.isfinite(values)]
        means.append(float(chosen.mean()) if chosen.size else None)
    return means


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    weights = commands.add_parser("weights", help="relative change of each weight tensor between two checkpoints")
    weights.add_argument("before")
    weights.add_argument("after")
    logs = commands.add_parser("logs", help="means of logged keys over step ranges")
    logs.add_argument("events", nargs="+", help="TensorBoard event files of one run")
    logs.add_argument("--keys", nargs="+", required=True)
    logs.add_argument("--bins", nargs="+", type=float, default=[0, 1e5, 2e5, 3e5, 4e5, 6e5, 8e5, 1.01e6])
    args = parser.parse_args(argv)

    if args.command == "weights":
        changes = relative_changes(policy_weights(args.before), policy_weights(args.after))
        for name, change in changes.items():
            print(f"{name:45s} {change:7.2%}")
        return
    with tempfile.TemporaryDirectory() as folder:
        for index, spec in enumerate(args.events):
            (Path(folder) / f"events.out.tfevents.{index}").write_bytes(read_bytes(spec))
        scalars = read_tensorboard_log(folder)
    ranges = [f"{low / 1e3:.0f}k-{high / 1e3:.0f}k" for low, high in itertools.pairwise(args.bins)]
    print("key".ljust(25) + " ".join(f"{label:>10s}" for label in ranges))
    for key in args.keys:
        means = binned_means(scalars[key].x, scalars[key].y, args.bins)
        print(key.ljust(25) + " ".join(f"{'-' if m is None else f'{m:.4f}':>10s}" for m in means))


if __name__ == "__main__":
    main()
