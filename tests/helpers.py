"""Helpers shared by several test modules (``from helpers import ...``: pytest puts ``tests/`` on the path)."""

import math
from typing import Any

from sb3_trpo_plus import TRPOPlus, UpdateDiagnostics


def tiny_cartpole(n_steps: int = 64, width: int = 16, **kwargs: Any) -> TRPOPlus:
    """
    TRPOPlus on CartPole-v1, small enough for a test: a rollout of ``n_steps`` is one batch, one critic update per
    rollout, one hidden layer of ``width`` units, seed 0.

    :param n_steps: Steps per rollout (and batch size)
    :param width: Units of the hidden layer
    :param kwargs: Further arguments of ``TRPOPlus`` (they override the ones above)
    :return: The model
    """
    small: dict[str, Any] = dict(
        n_steps=n_steps, batch_size=n_steps, n_critic_updates=1, policy_kwargs=dict(net_arch=[width]), seed=0
    )
    return TRPOPlus("MlpPolicy", "CartPole-v1", **{**small, **kwargs})


def tiny_images(share_features_extractor: bool, features_dim: int, **kwargs: Any) -> TRPOPlus:
    """
    TRPOPlus with a CnnPolicy on SB3's FakeImageEnv (36x36 frames of one channel, discrete actions), whose frames are
    the same from one model to the next (the observation space is seeded), seed 3.

    :param share_features_extractor: Whether actor and critic share the CNN
    :param features_dim: Width of the CNN's output
    :param kwargs: Further arguments of ``TRPOPlus``
    :return: The model
    """
    from stable_baselines3.common.envs import FakeImageEnv

    env = FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True)
    env.observation_space.seed(0)  # FakeImageEnv samples its frames from the space
    policy_kwargs = dict(
        share_features_extractor=share_features_extractor, features_extractor_kwargs=dict(features_dim=features_dim)
    )
    return TRPOPlus("CnnPolicy", env, policy_kwargs=policy_kwargs, seed=3, **kwargs)


def fake_update(n_updates: int, outcome: str, failure_reason: str | None = "line_search_exhausted") -> UpdateDiagnostics:
    """
    The diagnostics of an update that did not run, to feed ``model.last_update`` to a callback.

    :param n_updates: The update's number
    :param outcome: ``"F"`` failed (no step), ``"S"`` full step accepted at once, ``"s"`` shorter step accepted
    :param failure_reason: Why a failed update failed (``"F"`` only)
    :return: The diagnostics
    """
    success = outcome != "F"
    return UpdateDiagnostics(
        n_updates=n_updates,
        line_search_success=success,
        line_search_iters=10 if not success else (1 if outcome == "S" else 3),
        step_fraction={"F": 0.0, "S": 1.0, "s": 0.64}[outcome],
        kl=0.004 if success else math.nan,
        policy_objective=0.1,
        improvement=0.01 if success else 0.0,
        entropy=0.69,
        ent_coef=0.0,
        target_kl=0.01,
        cg_damping=0.1,
        failure_reason=None if success else failure_reason,
    )
