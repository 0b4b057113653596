"""AdaptiveTrustRegionCallback: scripted line-search outcomes (no training), a real run forced to fail, save/load."""

import math
from typing import Any

import gymnasium as gym
import pytest
import yaml
from helpers import fake_update, tiny_cartpole
from sb3_contrib import TRPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback, EvalCallback
from stable_baselines3.common.logger import Logger

from sb3_trpo_plus import TRPOPlus, UpdateDiagnostics
from sb3_trpo_plus.callbacks import AdaptiveTrustRegionCallback


def make_model() -> TRPOPlus:
    """A model that is never trained (target_kl 0.01, cg_damping 0.1): the scripted tests set ``model.last_update``."""
    model = tiny_cartpole(target_kl=0.01, cg_damping=0.1)
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def attach(callback: AdaptiveTrustRegionCallback, model: TRPOPlus) -> AdaptiveTrustRegionCallback:
    callback.init_callback(model)
    callback.on_training_start({}, {})
    return callback


def attached(**callback_kwargs: Any) -> tuple[TRPOPlus, AdaptiveTrustRegionCallback]:
    """A new model (:func:`make_model`) with an ``AdaptiveTrustRegionCallback(**callback_kwargs)`` attached to it."""
    model = make_model()
    return model, attach(AdaptiveTrustRegionCallback(**callback_kwargs), model)


def feed(callback: AdaptiveTrustRegionCallback, model: TRPOPlus, outcomes: str) -> list[tuple[float, float]]:
    """Play one update per character of ``outcomes`` the way training does; return (target_kl, cg_damping) after each."""
    values = []
    for outcome in outcomes:
        n_updates = 1 if model.last_update is None else model.last_update.n_updates + 1
        model.last_update = fake_update(n_updates, outcome)
        callback.on_rollout_start()
        values.append((model.target_kl, model.cg_damping))
    return values


class UpdateRecorder(BaseCallback):
    """Keeps the diagnostics of every update, read the same way the adaptive callback reads them."""

    def __init__(self):
        super().__init__()
        self.updates: list[UpdateDiagnostics] = []

    def _on_rollout_start(self) -> None:
        update = self.model.last_update
        if update is not None and (not self.updates or self.updates[-1].n_updates != update.n_updates):
            self.updates.append(update)

    def _on_training_end(self) -> None:
        self._on_rollout_start()

    def _on_step(self) -> bool:
        return True


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(ls_fail_threshold=0), "ls_fail_threshold"),
        (dict(ls_fail_threshold=-3), "ls_fail_threshold"),
        (dict(ls_fail_threshold=2.5), "ls_fail_threshold"),
        (dict(ls_fail_threshold=True), "ls_fail_threshold"),
        (dict(max_kl_decay=0.0), "max_kl_decay"),
        (dict(max_kl_decay=1.0), "max_kl_decay"),
        (dict(max_kl_decay=1.5), "max_kl_decay"),
        (dict(max_kl_decay=math.nan), "max_kl_decay"),
        (dict(max_kl_decay="0.8"), "max_kl_decay"),
        (dict(min_max_kl=0.0), "min_max_kl"),
        (dict(min_max_kl=-0.01), "min_max_kl"),
        (dict(damping_growth=1.0), "damping_growth"),
        (dict(damping_growth=0.5), "damping_growth"),
        (dict(damping_growth=math.inf), "damping_growth"),
        (dict(max_damping=0.0), "max_damping"),
        (dict(max_damping=-1.0), "max_damping"),
        (dict(recovery_window=0), "recovery_window"),
        (dict(recovery_window=1.5), "recovery_window"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        AdaptiveTrustRegionCallback(**kwargs)


def test_bounds_checked_against_the_model():
    model = make_model()
    with pytest.raises(ValueError, match="min_max_kl"):
        AdaptiveTrustRegionCallback(min_max_kl=0.02).init_callback(model)
    with pytest.raises(ValueError, match="max_damping"):
        AdaptiveTrustRegionCallback(max_damping=0.05).init_callback(model)
    # Equal to the current values is allowed: the trust region is then fixed on that side
    AdaptiveTrustRegionCallback(min_max_kl=0.01, max_damping=0.1).init_callback(model)


def test_needs_a_trpo_plus_model():
    model = TRPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64)
    with pytest.raises(TypeError, match="TRPOPlus"):
        AdaptiveTrustRegionCallback().init_callback(model)


def test_scripted_failures_shrink_to_the_bounds():
    model, callback = attached(ls_fail_threshold=3, max_kl_decay=0.5, min_max_kl=0.003, damping_growth=2.0, max_damping=0.3)
    # Two failures, then a success: the count restarts, nothing moves
    assert feed(callback, model, "FFS") == [(0.01, 0.1)] * 3
    assert callback.n_consecutive_failures == 0
    # Three failures in a row: one shrink, at the third
    assert feed(callback, model, "FFF") == [(0.01, 0.1), (0.01, 0.1), (0.005, 0.2)]
    assert model.logger.name_to_value["trust_region/shrink"] == 1.0
    assert model.logger.name_to_value["trust_region/target_kl"] == 0.005
    assert callback.n_consecutive_failures == 0 and callback.n_shrinks == 1
    # Three more: both hit their bounds (0.0025 -> 0.003, 0.4 -> 0.3)
    assert feed(callback, model, "FFF")[-1] == (0.003, 0.3)
    # And stay there
    assert feed(callback, model, "FFFFFF") == [(0.003, 0.3)] * 6
    assert callback.n_shrinks == 4
    # Failures separated by partial-step successes never reach the threshold
    assert feed(callback, model, "FFsFFsFF")[-1] == (0.003, 0.3)
    assert callback.n_shrinks == 4 and callback.n_consecutive_failures == 2
    # Without a recovery window nothing ever moves back
    assert feed(callback, model, "S" * 50)[-1] == (0.003, 0.3)
    assert "trust_region/recover" not in model.logger.name_to_value


def test_reacts_once_per_update():
    model, callback = attached(ls_fail_threshold=2, min_max_kl=0.001)
    model.last_update = fake_update(1, "F")
    for _ in range(5):  # several rollout starts (or a training end) without a new update
        callback.on_rollout_start()
        callback.on_training_end()
    assert callback.n_consecutive_failures == 1 and model.target_kl == 0.01
    model.last_update = fake_update(2, "F")
    callback.on_rollout_start()
    assert model.target_kl == pytest.approx(0.008) and model.cg_damping == pytest.approx(0.12)


def test_ignores_the_update_it_finds_at_start():
    # A loaded model carries the diagnostics of its last update: a new callback must not count it again
    model = make_model()
    model.last_update = fake_update(7, "F")
    callback = attach(AdaptiveTrustRegionCallback(ls_fail_threshold=1, min_max_kl=0.001), model)
    callback.on_rollout_start()
    assert callback.n_consecutive_failures == 0 and model.target_kl == 0.01


def test_recovery():
    model, callback = attached(
        ls_fail_threshold=2, max_kl_decay=0.5, min_max_kl=0.001, damping_growth=2.0, max_damping=1.0, recovery_window=3
    )
    assert feed(callback, model, "FFFFFF")[-1] == (0.00125, 0.8)
    # A window of full steps moves one step back
    assert feed(callback, model, "SSS") == [(0.00125, 0.8), (0.00125, 0.8), (0.0025, 0.4)]
    assert model.logger.name_to_value["trust_region/recover"] == 1.0
    # A shorter accepted step or a failure breaks the run of full steps
    assert feed(callback, model, "SSsSS")[-1] == (0.0025, 0.4)
    assert feed(callback, model, "sSFSS")[-1] == (0.0025, 0.4)
    assert feed(callback, model, "S")[-1] == (0.005, 0.2)
    # Back to the initial values, never past them
    assert feed(callback, model, "SSS")[-1] == (0.01, 0.1)
    assert feed(callback, model, "S" * 30)[-1] == (0.01, 0.1)
    assert callback.n_recoveries == 3 and callback.n_shrinks == 3


def test_recovery_stops_at_the_initial_values_and_never_moves_away():
    model, callback = attached(ls_fail_threshold=1, max_kl_decay=0.8, min_max_kl=0.001, damping_growth=1.5, recovery_window=1)
    # One step back would overshoot (0.009 / 0.8 = 0.01125, 0.11 / 1.5 = 0.073): clipped to the initial values
    model.target_kl, model.cg_damping = 0.009, 0.11
    assert feed(callback, model, "S")[-1] == (0.01, 0.1)
    assert callback.n_recoveries == 1
    # Values set by hand beyond the initial ones are not pulled back by the recovery
    model.target_kl, model.cg_damping = 0.02, 0.05
    assert feed(callback, model, "SS")[-1] == (0.02, 0.05)
    assert callback.n_recoveries == 1
    assert model.logger.name_to_value["trust_region/recover"] == 0.0


def test_zoo_callback_entry():
    rl_zoo3_utils = pytest.importorskip("rl_zoo3.utils")
    hyperparams = yaml.safe_load(
        """
callback:
  - sb3_trpo_plus.callbacks.AdaptiveTrustRegionCallback:
      ls_fail_threshold: 5
      max_kl_decay: 0.7
      min_max_kl: !!float 1e-3
      recovery_window: 10
"""
    )
    (callback,) = rl_zoo3_utils.get_callback_list(hyperparams)
    assert isinstance(callback, AdaptiveTrustRegionCallback)
    assert (callback.ls_fail_threshold, callback.max_kl_decay, callback.min_max_kl, callback.recovery_window) == (
        5,
        0.7,
        0.001,
        10,
    )
    # A name alone works too (all defaults)
    (callback,) = rl_zoo3_utils.get_callback_list({"callback": "sb3_trpo_plus.callbacks.AdaptiveTrustRegionCallback"})
    assert callback.ls_fail_threshold == 20


def test_real_run_forced_to_fail(tmp_path):
    # A huge radius with a single line-search iteration: every full step overshoots and is rejected.
    # (A tiny radius such as 1e-12 does not force failures: steps that small are accepted on rounding noise.)
    model = tiny_cartpole(target_kl=1e4, cg_damping=0.1, line_search_max_iter=1)
    recorder = UpdateRecorder()
    adaptive = AdaptiveTrustRegionCallback(
        ls_fail_threshold=2, max_kl_decay=0.5, min_max_kl=2500.0, damping_growth=1.5, max_damping=0.2
    )
    callbacks = CallbackList(
        [
            recorder,
            adaptive,
            CheckpointCallback(save_freq=128, save_path=str(tmp_path / "checkpoints"), name_prefix="trpo_plus"),
            EvalCallback(gym.make("CartPole-v1"), eval_freq=192, n_eval_episodes=1, verbose=0, warn=False),
        ]
    )
    model.learn(8 * 64, callback=callbacks)

    updates = recorder.updates
    assert [update.n_updates for update in updates] == list(range(1, 9))
    assert not any(update.line_search_success for update in updates), "the setting should make every line search fail"
    assert all(math.isnan(update.kl) for update in updates)
    # Radius and damping each update used: a shrink after every second failure, then the bounds
    assert [update.target_kl for update in updates] == [1e4, 1e4, 5e3, 5e3, 2500.0, 2500.0, 2500.0, 2500.0]
    assert [update.cg_damping for update in updates] == pytest.approx([0.1, 0.1, 0.15, 0.15, 0.2, 0.2, 0.2, 0.2])
    # The last update (not followed by a rollout) was handled at the end of training
    assert adaptive.n_shrinks == 4 and adaptive.n_consecutive_failures == 0
    assert (model.target_kl, model.cg_damping) == (2500.0, 0.2)

    # The values live in the model: save/load keeps them, and the values given at construction
    model.save(tmp_path / "model.zip")
    loaded = TRPOPlus.load(tmp_path / "model.zip", device="cpu")
    assert (loaded.target_kl, loaded.cg_damping) == (2500.0, 0.2)
    assert (loaded.initial_target_kl, loaded.initial_cg_damping) == (1e4, 0.1)
    # A checkpoint taken during training holds the values of that moment (after the 7th update)
    checkpoint = TRPOPlus.load(tmp_path / "checkpoints" / "trpo_plus_512_steps.zip", device="cpu")
    assert (checkpoint.target_kl, checkpoint.cg_damping) == (2500.0, 0.2)

    # A new callback on the loaded model starts from the saved values and keeps them within its bounds
    loaded.set_env(model.get_env())
    callback = AdaptiveTrustRegionCallback(ls_fail_threshold=1, max_kl_decay=0.5, min_max_kl=2000.0, max_damping=0.25)
    loaded.learn(64, callback=callback, reset_num_timesteps=False)
    assert callback.n_shrinks == 1
    assert loaded.target_kl == 2000.0 and loaded.cg_damping == pytest.approx(0.24)
