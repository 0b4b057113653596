"""
The ``atari`` entry's update, pinned: from the same initial weights and the same rollouts, two updates with the
entry's algorithm settings give the weights they gave when the pin was recorded. Long Atari runs of the benchmark
may be under way while the code moves; this test is what says a change left their algorithm alone.

Only the rollout's size is made small (2 environments x 32 steps, minibatches of 32, 36x36 frames); every other
algorithm argument is the YAML entry's. A change of the entry, or of the update it runs, fails this test: then the
campaign's runs no longer measure one algorithm, and the pin is recorded again only on purpose, with
``python tests/test_atari_pin.py --record``.
"""

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
import yaml
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecNormalize

from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus.zoo import HYPERPARAMS_PATH

PIN_PATH = Path(__file__).parent / "data" / "atari_update_pin.json"
#: Keys of the entry that describe the environment or the run, not the update
NOT_THE_UPDATE = ("env_wrapper", "frame_stack", "policy", "n_envs", "n_timesteps", "normalize", "callback")
SMALL_ROLLOUT = {"n_steps": 32, "batch_size": 32}


class Frames(gym.Env):
    """36x36 frames of noise; reward 1 when the action is the parity of the frame's first pixel, 16 steps a game."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
    action_space = gym.spaces.Discrete(4)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.frame = self.np_random.integers(0, 256, (36, 36, 1), dtype=np.uint8)
        return self.frame, {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = float(action == self.frame[0, 0, 0] % 2)
        self.t += 1
        self.frame = self.np_random.integers(0, 256, (36, 36, 1), dtype=np.uint8)
        return self.frame, reward, self.t >= 16, False, {}


def atari_entry_update_args() -> dict[str, Any]:
    """The algorithm arguments of the YAML ``atari`` entry (``policy_kwargs`` evaluated as rl_zoo3 does)."""
    entry = yaml.safe_load(HYPERPARAMS_PATH.read_text())["atari"]
    args = {key: value for key, value in entry.items() if key not in NOT_THE_UPDATE}
    args["policy_kwargs"] = eval(args["policy_kwargs"])  # the zoo's own reading of the string
    return {**args, **SMALL_ROLLOUT}


def two_updates() -> dict[str, Any]:
    """Two updates of the entry from seed 0; per parameter its sum and sum of squares, and the updates' diagnostics."""
    th.manual_seed(0)
    env = DummyVecEnv([lambda i=i: Frames() for i in range(2)])
    env.seed(0)
    env = VecNormalize(VecFrameStack(env, 4), norm_obs=False, norm_reward=True)
    model = TRPOPlus("CnnPolicy", env, seed=0, **atari_entry_update_args())
    updates = []
    for _ in range(2):
        model.learn(64, reset_num_timesteps=False)
        updates.append({key: model.last_update.__dict__[key] for key in ("line_search_success", "step_fraction", "kl")})
    parameters = {
        name: [float(p.detach().double().sum()), float(p.detach().double().square().sum())]
        for name, p in model.policy.named_parameters()
    }
    return {"parameters": parameters, "updates": updates}


def test_atari_entry_update_is_pinned():
    pinned = json.loads(PIN_PATH.read_text())
    now = two_updates()
    for update, pinned_update in zip(now["updates"], pinned["updates"]):
        assert update["line_search_success"] == pinned_update["line_search_success"]
        assert update["step_fraction"] == pytest.approx(pinned_update["step_fraction"], rel=1e-6)
        assert update["kl"] == pytest.approx(pinned_update["kl"], rel=1e-4, nan_ok=True)
    assert now["parameters"].keys() == pinned["parameters"].keys()
    for name, values in pinned["parameters"].items():
        assert now["parameters"][name] == pytest.approx(values, rel=1e-5, abs=1e-6), name


if __name__ == "__main__":
    if "--record" not in sys.argv:
        raise SystemExit("usage: python tests/test_atari_pin.py --record   (records the pin anew: on purpose only)")
    th.set_num_threads(1)
    PIN_PATH.parent.mkdir(exist_ok=True)
    PIN_PATH.write_text(json.dumps(two_updates(), indent=1) + "\n")
    print(f"written to {PIN_PATH}")
