"""EntropyTargetCallback: the rule on scripted entropies (no training), its checks, a real run, save/load, rl_zoo3."""

import dataclasses
import math

import pytest
import yaml
from helpers import fake_update, tiny_cartpole
from stable_baselines3.common.logger import Logger

from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus.callbacks import EntropyTargetCallback


def attached(model_kwargs: dict | None = None, **callback_kwargs) -> tuple[TRPOPlus, EntropyTargetCallback]:
    """A never-trained CartPole model (ent_coef 0.01 unless given) with the callback attached as training does."""
    model = tiny_cartpole(**{"ent_coef": 0.01, **(model_kwargs or {})})
    model.set_logger(Logger(folder=None, output_formats=[]))
    callback = EntropyTargetCallback(**{"target_entropy": 0.5, **callback_kwargs})
    callback.init_callback(model)
    callback.on_training_start({}, {})
    return model, callback


def feed(callback: EntropyTargetCallback, model: TRPOPlus, entropies: list[float], outcome: str = "s") -> list[float]:
    """Play one update per entropy the way training does; return ``model.ent_coef`` after each."""
    values = []
    for entropy in entropies:
        n_updates = 1 if model.last_update is None else model.last_update.n_updates + 1
        model.last_update = dataclasses.replace(fake_update(n_updates, outcome), entropy=entropy)
        callback.on_rollout_start()
        values.append(model.ent_coef)
    return values


def test_entropy_target_rule():
    model, callback = attached(adaptation_rate=0.2, min_ent_coef=0.005, max_ent_coef=0.02)
    # Above the target, the coefficient shrinks by exp(-rate * error); below it, it grows; the bounds clip it
    values = feed(callback, model, [0.9, 0.9, 0.5, 0.1])
    expected = [0.01 * math.exp(-0.2 * 0.4), 0.01 * math.exp(-0.2 * 0.8), 0.01 * math.exp(-0.2 * 0.8)]
    expected.append(expected[-1] * math.exp(0.2 * 0.4))
    assert values == pytest.approx(expected, rel=1e-12)
    assert feed(callback, model, [10.0])[-1] == 0.005
    assert feed(callback, model, [-100.0])[-1] == 0.02
    assert model.logger.name_to_value["entropy_target/ent_coef"] == 0.02
    assert model.logger.name_to_value["entropy_target/error"] == pytest.approx(-100.5)
    # A failed line search still measured the policy's entropy: the rule applies
    assert feed(callback, model, [1.0], outcome="F")[-1] == pytest.approx(0.02 * math.exp(-0.2 * 0.5))


def test_entropy_target_ignores_skipped_and_non_finite():
    model, callback = attached()
    assert feed(callback, model, [math.nan, math.inf]) == [0.01, 0.01]
    model.last_update = dataclasses.replace(fake_update(3, "F", failure_reason="non_finite_input"), entropy=0.1)
    callback.on_rollout_start()
    assert model.ent_coef == 0.01
    # The same update is handled once, however many rollouts start after it
    feed(callback, model, [0.9])
    callback.on_rollout_start()
    callback.on_rollout_start()
    assert model.ent_coef == pytest.approx(0.01 * math.exp(-0.1 * 0.4))


def test_entropy_target_next_update_uses_it():
    # What the callback writes is the coefficient of the model's next update
    model = tiny_cartpole(ent_coef=0.05)
    callback = EntropyTargetCallback(target_entropy=0.1, adaptation_rate=1.0, min_ent_coef=1e-3, max_ent_coef=0.1)
    model.learn(3 * model.n_steps, callback=callback)
    assert model.last_update.n_updates == 3
    # The untrained policy's entropy (about log 2) is above 0.1: the coefficient went down at every update
    assert model.last_update.ent_coef < 0.05 and model.ent_coef < model.last_update.ent_coef
    assert model.ent_coef == pytest.approx(callback.next_ent_coef(model.last_update.ent_coef, model.last_update.entropy))


def test_entropy_target_saved_with_the_model(tmp_path):
    model = tiny_cartpole(ent_coef=0.05)
    model.learn(2 * model.n_steps, callback=EntropyTargetCallback(target_entropy=0.1, adaptation_rate=1.0))
    model.save(tmp_path / "model.zip")
    loaded = TRPOPlus.load(tmp_path / "model.zip")
    assert loaded.ent_coef == model.ent_coef != 0.05
    # A new callback on the loaded model ignores the update made before the save
    callback = EntropyTargetCallback(target_entropy=0.1, adaptation_rate=1.0)
    callback.init_callback(loaded)
    callback.on_rollout_start()
    assert loaded.ent_coef == model.ent_coef


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(target_entropy=math.nan), "target_entropy"),
        (dict(target_entropy="0.5"), "target_entropy"),
        (dict(adaptation_rate=0.0), "adaptation_rate"),
        (dict(adaptation_rate=-0.1), "adaptation_rate"),
        (dict(min_ent_coef=0.0), "min_ent_coef"),
        (dict(min_ent_coef=math.inf), "min_ent_coef"),
        (dict(max_ent_coef=1e-3), "max_ent_coef"),
        (dict(max_ent_coef=True), "max_ent_coef"),
    ],
)
def test_entropy_target_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        EntropyTargetCallback(**{"target_entropy": 0.5, **kwargs})


@pytest.mark.parametrize(
    "model_kwargs, callback_kwargs, match",
    [
        (dict(ent_coef=lambda progress: 0.01 * progress), {}, "not a schedule"),
        (dict(ent_coef=0.5), {}, r"within \[min_ent_coef, max_ent_coef\]"),
        (dict(ent_coef=0.01), dict(min_ent_coef=0.02), r"within \[min_ent_coef, max_ent_coef\]"),
        (dict(ent_coef=0.01, ent_coef_decay=0.99), {}, "ent_coef_decay must be 1.0"),
        (dict(ent_coef=0.01, min_ent_coef=0.005), {}, "min_ent_coef"),
        (dict(ent_coef=0.01), dict(target_entropy=math.log(2)), r"below log\(2\)"),
    ],
)
def test_entropy_target_model_checks(model_kwargs, callback_kwargs, match):
    with pytest.raises(ValueError, match=match):
        attached(model_kwargs, **callback_kwargs)


def test_entropy_target_needs_trpo_plus():
    from sb3_contrib import TRPO

    model = TRPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64)
    with pytest.raises(TypeError, match="needs a TRPOPlus model"):
        EntropyTargetCallback(target_entropy=0.5).init_callback(model)


def test_entropy_target_zoo_callback_entry():
    rl_zoo3_utils = pytest.importorskip("rl_zoo3.utils")
    hyperparams = yaml.safe_load(
        """
callback:
  - sb3_trpo_plus.callbacks.EntropyTargetCallback:
      target_entropy: 0.85
      adaptation_rate: 0.05
"""
    )
    (callback,) = rl_zoo3_utils.get_callback_list(hyperparams)
    assert isinstance(callback, EntropyTargetCallback)
    assert (callback.target_entropy, callback.adaptation_rate, callback.min_ent_coef) == (0.85, 0.05, 1e-3)
