"""
The ``atari`` entry's update, pinned: from the same initial weights and the same rollouts, two updates with the
entry's algorithm settings give the weights they gave when the pin was recorded. Long Atari runs of the benchmark
may be under way while the code moves; this test is what says a change left their algorithm alone.

The rollout is made small (2 environments x 32 steps, minibatches of 32, 36x36 frames) and ``cg_damping`` larger
(below); every other algorithm argument is the YAML entry's. A change of the entry, or of the update it runs, fails
this test: then the campaign's runs no longer measure one algorithm, and the pin is recorded again only on purpose, with
``python tests/test_atari_pin.py --record``.

The YAML entry's values are pinned as they are. The two updates run them with two changes that make the result
stable under floating point, which is not the same on every CPU (ATen's and oneDNN's kernels follow the instruction
set, reductions the thread count): ``cg_damping`` 0.5 instead of the entry's 0.05 (on 64 samples, the entry's damping
leaves the conjugate-gradient solve ill-conditioned enough to turn float32 noise of 1e-6 into 1e-3 by the second
update), and an action head that starts 30 times larger than SB3's, so the policy is away from uniform, where the
entropy bonus has no gradient. Measured on 2026-11-28 (Intel Xeon; AVX-512 against AVX2 and scalar kernels, 1 and 2
threads), the weights and KLs then differ by at most 6e-6 (relative, sums against their parameter's norm);
``TOLERANCE`` is 5e-5, and ``test_the_pin_sees_a_small_change`` shows that 10% on one argument is caught.
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
from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecNormalize

from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus.zoo import HYPERPARAMS_PATH, _lin_schedules

PIN_PATH = Path(__file__).parent / "data" / "atari_update_pin.json"
#: Keys of the entry that describe the environment or the run, not the update
NOT_THE_UPDATE = ("env_wrapper", "frame_stack", "policy", "n_envs", "n_timesteps", "normalize", "callback")
SMALL_ROLLOUT = {"n_steps": 32, "batch_size": 32}
#: Four rollouts of 2 environments x 32 steps: the run's budget, which a ``lin_`` schedule follows
BUDGET = 4 * 2 * 32


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


#: The action head's initial weights times this (SB3's orthogonal initialization has gain 0.01: a uniform policy)
ACTION_HEAD_SCALE = 30.0
#: Arguments changed from the entry's so that floating point noise stays small (the module's docstring says why)
WELL_CONDITIONED = {"cg_damping": 0.5}
#: Relative tolerance of a KL, of a sum of squares, and of a sum against its parameter's norm
TOLERANCE = 5e-5


class TwoUpdates(BaseCallback):
    """After each update, its diagnostics and per parameter the sum and the sum of squares; stops after the second."""

    def __init__(self) -> None:
        super().__init__()
        self.rollouts, self.updates = 0, []

    def _on_rollout_start(self) -> None:  # the previous rollout's update has run
        self.rollouts += 1
        if self.rollouts > 1:
            update = {key: self.model.last_update.__dict__[key] for key in ("line_search_success", "step_fraction", "kl")}
            update["parameters"] = {
                name: [float(p.detach().double().sum()), float(p.detach().double().square().sum())]
                for name, p in self.model.policy.named_parameters()
            }
            self.updates.append(update)

    def _on_step(self) -> bool:
        return len(self.updates) < 2


def two_updates(**changes: Any) -> dict[str, Any]:
    """
    Two updates of the entry from seed 0, on one torch thread, in a run of four rollouts (``BUDGET``): a ``lin_``
    schedule stands at 3/4 and 1/2 of its start. ``changes`` replace algorithm arguments (to show what the pin
    catches). The entry's ``lin_`` strings become schedules as the zoo reads them.
    """
    threads = th.get_num_threads()
    th.set_num_threads(1)
    try:
        th.manual_seed(0)
        env = DummyVecEnv([lambda i=i: Frames() for i in range(2)])
        env.seed(0)
        env = VecNormalize(VecFrameStack(env, 4), norm_obs=False, norm_reward=True)
        args = ExperimentManager._preprocess_schedules(_lin_schedules(atari_entry_update_args()))
        model = TRPOPlus("CnnPolicy", env, seed=0, **{**args, **WELL_CONDITIONED, **changes})
        with th.no_grad():  # SB3's action head starts near uniform, where the entropy has no gradient: not here
            model.policy.action_net.weight.mul_(ACTION_HEAD_SCALE)
        recorder = TwoUpdates()
        model.learn(BUDGET, callback=recorder)
    finally:
        th.set_num_threads(threads)
    return {"entry": atari_entry_update_args(), "updates": recorder.updates}


def differences(now: dict[str, Any], pinned: dict[str, Any]) -> list[str]:
    """What differs between two results of ``two_updates``, beyond floating point's tolerances (empty: the same)."""
    found = [
        f"entry: {key} {now['entry'].get(key)} != {pinned['entry'].get(key)}"
        for key in sorted(now["entry"].keys() | pinned["entry"].keys())
        if now["entry"].get(key) != pinned["entry"].get(key)
    ]
    for i, (update, pin) in enumerate(zip(now["updates"], pinned["updates"])):
        where = f"update {i + 1}"
        for key in ("line_search_success", "step_fraction"):  # discrete: a shrink count of the line search
            if update[key] != pytest.approx(pin[key], rel=1e-9):
                found.append(f"{where}: {key} {update[key]} != {pin[key]}")
        if update["kl"] != pytest.approx(pin["kl"], rel=TOLERANCE, nan_ok=True):
            found.append(f"{where}: kl {update['kl']} != {pin['kl']}")
        if update["parameters"].keys() != pin["parameters"].keys():
            found.append(f"{where}: parameters {sorted(update['parameters'])} != {sorted(pin['parameters'])}")
            continue
        for name, (pinned_sum, pinned_square) in pin["parameters"].items():
            total, square = update["parameters"][name]
            if abs(square - pinned_square) > TOLERANCE * pinned_square:
                found.append(f"{where}: {name} sum of squares {square} != {pinned_square}")
            if abs(total - pinned_sum) > TOLERANCE * pinned_square**0.5:
                found.append(f"{where}: {name} sum {total} != {pinned_sum}")
    return found


def test_atari_entry_update_is_pinned():
    assert differences(two_updates(), json.loads(PIN_PATH.read_text())) == []


def test_the_pin_sees_a_changed_entry():
    pinned = json.loads(PIN_PATH.read_text())
    changed = {**pinned, "entry": {**pinned["entry"], "target_kl": "lin_0.088"}}
    assert differences(changed, pinned) == [f"entry: target_kl lin_0.088 != {pinned['entry']['target_kl']}"]


@pytest.mark.parametrize("argument", ["cg_damping", "critic_policy_coef", "ent_coef"])
def test_the_pin_sees_a_small_change(argument):
    """The tolerances leave room for floating point, not for a change of the update: 10% on one argument fails."""
    value = {**atari_entry_update_args(), **WELL_CONDITIONED}[argument]
    changed = two_updates(**{argument: value * 1.1})
    assert differences(changed, json.loads(PIN_PATH.read_text())) != []


def test_the_pin_sees_the_radius_schedule():
    """The entry's radius follows the run (``lin_0.08``): the same radius held constant gives other updates."""
    assert differences(two_updates(target_kl=0.08), json.loads(PIN_PATH.read_text())) != []


if __name__ == "__main__":
    if "--record" not in sys.argv:
        raise SystemExit("usage: python tests/test_atari_pin.py --record   (records the pin anew: on purpose only)")
    PIN_PATH.parent.mkdir(exist_ok=True)
    PIN_PATH.write_text(json.dumps(two_updates(), indent=1) + "\n")
    print(f"written to {PIN_PATH}")
