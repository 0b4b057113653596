"""
Make ``docs/images/diagnostics.png``: a short CartPole-v1 run whose trust region starts far too large, so that
the line search fails, ``AdaptiveTrustRegionCallback`` shrinks the radius until steps are accepted again, then
(recovery on) moves it back toward the initial value. About a minute on one CPU core.

Run from the repository root (needs the ``plots`` extra)::

    python docs/make_diagnostics_picture.py

It is the same as training with the code below, then::

    python -m sb3_trpo_plus.plot runs/diagnostics/TRPOPlus_1 -o docs/images/diagnostics.png
"""

import argparse
from pathlib import Path

import gymnasium as gym
import torch as th
from stable_baselines3.common.callbacks import CallbackList, EvalCallback
from stable_baselines3.common.monitor import Monitor

from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus.callbacks import AdaptiveTrustRegionCallback
from sb3_trpo_plus.plot import plot_diagnostics

N_TIMESTEPS = 40_000
#: Deliberately too large a radius, with a line search that may not backtrack: full steps overshoot
TOO_LARGE = {"target_kl": 1.0, "line_search_max_iter": 1}
ADAPTIVE = {
    "ls_fail_threshold": 3,
    "max_kl_decay": 0.5,
    "min_max_kl": 0.005,
    "damping_growth": 1.5,
    "max_damping": 0.5,
    "recovery_window": 10,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-dir", default="runs/diagnostics", help="tensorboard_log folder (default: runs/diagnostics)")
    parser.add_argument("-o", "--output", default="docs/images/diagnostics.png", help="PNG file to write")
    args = parser.parse_args()
    th.set_num_threads(1)

    model = TRPOPlus(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=512,
        ent_coef=0.01,
        ent_coef_decay=0.98,
        stats_window_size=20,
        tensorboard_log=args.log_dir,
        seed=0,
        **TOO_LARGE,
    )
    adaptive = AdaptiveTrustRegionCallback(**ADAPTIVE, verbose=1)
    evaluation = EvalCallback(Monitor(gym.make("CartPole-v1")), eval_freq=4096, n_eval_episodes=5, verbose=0)
    model.learn(N_TIMESTEPS, callback=CallbackList([adaptive, evaluation]), tb_log_name="TRPOPlus")

    run_dir = Path(model.logger.get_dir())
    settings = ", ".join(f"{name}={value}" for name, value in TOO_LARGE.items())
    callback = ", ".join(f"{name}={value}" for name, value in ADAPTIVE.items())
    title = f"TRPOPlus on CartPole-v1: {settings} (too large on purpose)\nAdaptiveTrustRegionCallback({callback})"
    output = plot_diagnostics(run_dir, args.output, title=title)
    print(f"Logs in {run_dir}, picture in {output}")


if __name__ == "__main__":
    main()
