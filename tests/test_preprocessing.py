import contextlib

import numpy as np
import pytest
import torch as th
from helpers import tiny_images
from stable_baselines3.common.envs import FakeImageEnv

from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus import trpo_plus as trpo_plus_module


@contextlib.contextmanager
def _unchanged(policy, observations, in_place=False):
    yield observations


def _train(share_features_extractor: bool, monkeypatch: pytest.MonkeyPatch | None = None) -> TRPOPlus:
    model = tiny_images(
        share_features_extractor, 32, n_steps=64, batch_size=32, n_critic_updates=2, cg_max_steps=5, ent_coef=0.01
    )
    if monkeypatch is not None:
        monkeypatch.setattr(trpo_plus_module, "images_normalized_once", _unchanged)
    model.learn(128)
    return model


@pytest.mark.parametrize("share_features_extractor", [True, False])
def test_images_normalized_once_is_exact(share_features_extractor: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Scaling the rollout's images once per update gives the very update that scaling them at every forward pass gives
    fast = _train(share_features_extractor)
    # the policy scales images again once the update is over (rollouts and predict see raw uint8 frames)
    assert fast.policy.normalize_images
    reference = _train(share_features_extractor, monkeypatch)
    assert fast.last_update is not None and fast.last_update.line_search_success
    for (name, param), ref in zip(fast.policy.named_parameters(), reference.policy.parameters(), strict=True):
        assert th.equal(param, ref), name


def test_images_scaled_in_place_leave_the_buffer_unchanged() -> None:
    # The update divides its own copy of the rollout's frames, never the buffer's arrays
    model = tiny_images(False, 16, n_steps=64, batch_size=32, n_critic_updates=1)
    model.learn(64)
    frames = model.rollout_buffer.observations.copy()
    assert frames.max() > 1.0  # raw uint8 values, stored as float32
    model.train()
    assert model.last_update is not None and model.last_update.line_search_success
    np.testing.assert_array_equal(model.rollout_buffer.observations, frames)


def test_images_normalized_once_restores_on_error() -> None:
    env = FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True)
    model = TRPOPlus(
        "CnnPolicy", env, n_steps=16, batch_size=16, policy_kwargs=dict(features_extractor_kwargs=dict(features_dim=8))
    )
    observations = th.zeros((2, 1, 36, 36), dtype=th.uint8)
    with pytest.raises(RuntimeError), trpo_plus_module.images_normalized_once(model.policy, observations) as scaled:
        assert scaled.dtype == th.float32
        assert not model.policy.normalize_images
        raise RuntimeError("interrupted update")
    assert model.policy.normalize_images
