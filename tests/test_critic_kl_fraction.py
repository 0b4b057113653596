"""critic_kl_fraction: the critic trains the shared features extractor within its part of the trust region."""

import copy
import math

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.preprocessing import get_flattened_obs_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus import trpo_plus as trpo_plus_module
from sb3_trpo_plus.callbacks import AdaptiveTrustRegionCallback
from sb3_trpo_plus.fisher import flatten_params, kl_per_sample

TARGET_KL = 0.01


class LinearFeatures(BaseFeaturesExtractor):
    """A features extractor with parameters (SB3's FlattenExtractor has none), shared by actor and critic."""

    def __init__(self, observation_space: spaces.Box, features_dim: int = 16):
        super().__init__(observation_space, features_dim)
        self.linear = nn.Sequential(nn.Linear(get_flattened_obs_dim(observation_space), features_dim), nn.Tanh())

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.linear(observations.flatten(1))


class KeepRolloutPolicy(BaseCallback):
    """A copy of the policy that collected the latest rollout."""

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.rollout_policy = copy.deepcopy(self.model.policy)


def shared_model(critic_kl_fraction: float, learning_rate: float = 1e-3, net_arch=(), **kwargs) -> TRPOPlus:
    # (without ortho_init: SB3's action head starts with gain 0.01, which makes the policy all but blind to its features)
    return TRPOPlus(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=256,
        batch_size=64,
        n_critic_updates=3,
        learning_rate=learning_rate,
        target_kl=TARGET_KL,
        critic_kl_fraction=critic_kl_fraction,
        policy_kwargs=dict(features_extractor_class=LinearFeatures, net_arch=net_arch or [], ortho_init=False),
        seed=0,
        **kwargs,
    )


def rollout_kl(rollout_policy, model: TRPOPlus) -> float:
    obs = th.as_tensor(model.rollout_buffer.observations.reshape(-1, 4))
    with th.no_grad():
        return kl_per_sample(rollout_policy.get_distribution(obs), model.policy.get_distribution(obs)).mean().item()


def test_critic_kl_fraction_trains_the_shared_features_within_its_part_of_the_trust_region():
    # fraction 0 (sb3-contrib's behaviour): the critic never moves the policy, so there is no critic KL to log
    plain = shared_model(0.0)
    plain.learn(256)
    assert "train/critic_kl" not in plain.logger.name_to_value
    # fraction 0.5: the critic's training of the extractor moves the policy, by at most half the trust region,
    # and the whole update (critic, then step) stays within target_kl of the rollout's policy
    model = shared_model(0.5)
    keep = KeepRolloutPolicy()
    model.learn(256, callback=keep)
    logged = model.logger.name_to_value
    assert 0.0 < logged["train/critic_kl"] <= 0.5 * TARGET_KL
    assert 0.0 < logged["train/critic_features_kept"] <= 1.0
    assert model.last_update.line_search_success
    kl = rollout_kl(keep.rollout_policy, model)
    assert model.last_update.kl == pytest.approx(kl, rel=1e-4)
    assert logged["train/critic_kl"] < kl <= TARGET_KL + 1e-7


@pytest.mark.parametrize("critic_kl_fraction", [0.0, 0.5])
def test_failed_step_after_the_critic_reports_what_moved(critic_kl_fraction, monkeypatch):
    # The step is made to fail (the line search walks against the gradient): with critic_kl_fraction > 0 the critic's
    # kept change of the shared extractor still moved the policy, and update_kl says by how much; the step's KL stays
    # NaN, and the adaptive callback counts a failed line search, as the diagnostics say
    line_search = TRPOPlus._line_search

    def backwards(self, batch, update, actor_params, old_distribution, full_step, **kwargs):
        return line_search(self, batch, update, actor_params, old_distribution, -full_step, **kwargs)

    monkeypatch.setattr(TRPOPlus, "_line_search", backwards)
    model = shared_model(critic_kl_fraction)
    keep = KeepRolloutPolicy()
    adaptive = AdaptiveTrustRegionCallback(ls_fail_threshold=5, min_max_kl=0.001)
    model.learn(256, callback=[keep, adaptive])
    update, logged = model.last_update, model.logger.name_to_value
    assert update.failure_reason == "line_search_exhausted" and not update.line_search_success
    assert math.isnan(update.kl) and math.isnan(logged["train/kl_divergence_loss"]) and update.step_fraction == 0.0
    moved = rollout_kl(keep.rollout_policy, model)
    assert update.update_kl == logged["train/update_kl"] == pytest.approx(moved, rel=1e-4, abs=1e-12)
    if critic_kl_fraction > 0:
        assert update.update_kl == logged["train/critic_kl"] > 0.0
    else:
        assert update.update_kl == 0.0
    assert adaptive.n_consecutive_failures == 1


def test_update_kl_of_an_accepted_step_is_its_kl():
    model = shared_model(0.5)
    model.learn(256)
    assert model.last_update.line_search_success
    assert model.last_update.update_kl == model.last_update.kl == model.logger.name_to_value["train/update_kl"]


def test_critic_kl_fraction_shrinks_a_large_critic_change():
    # a learning rate far too large: the critic's change of the extractor is halved (or undone) to fit its budget
    model = shared_model(0.1, learning_rate=0.5)
    model.learn(256)
    logged = model.logger.name_to_value
    # halved, not undone: part of the change is kept, and its KL is within the budget
    assert 0.0 < logged["train/critic_features_kept"] < 1.0
    assert 0.0 < logged["train/critic_kl"] <= 0.1 * TARGET_KL


def test_undone_critic_change_leaves_no_trace_in_the_optimizer():
    """
    When the critic's change of the shared extractor is undone (no halving fits its budget), nothing of it stays in
    Adam's moments of the extractor (they fed the discarded change into the next update), and the critic's own layers
    still train (alone, on the rollout's features).
    """
    # a learning rate far too large and a budget far too small: every change of the extractor is undone
    model = shared_model(1e-9, learning_rate=0.5, net_arch=dict(pi=[], vf=[8]), actor_trains_features=False)
    extractor = list(model.policy.features_extractor.parameters())
    critic_own = list(model.policy.mlp_extractor.value_net.parameters()) + list(model.policy.value_net.parameters())
    start, critic_start = flatten_params(extractor).clone(), flatten_params(critic_own).clone()
    model.learn(2 * 256)
    assert model.logger.name_to_value["train/critic_features_kept"] == 0.0
    assert th.equal(flatten_params(extractor), start)
    assert all(param not in model.policy.optimizer.state for param in extractor)
    assert not th.equal(flatten_params(critic_own), critic_start)
    assert all(param in model.policy.optimizer.state for param in critic_own)


def test_critic_kl_fraction_interrupted_leaves_the_features_as_they_were(monkeypatch):
    model = shared_model(0.5)
    model.learn(256)
    extractor = list(model.policy.features_extractor.parameters())
    start = flatten_params(extractor).clone()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    # interrupted while the critic's change of the extractor is measured: the extractor is the rollout's, exactly
    monkeypatch.setattr(trpo_plus_module, "mean_kl", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.train()
    assert th.equal(flatten_params(extractor), start)


@pytest.mark.parametrize("value", [-0.1, 1.0, float("nan"), "half"])
def test_critic_kl_fraction_must_be_in_zero_one(value):
    with pytest.raises(ValueError, match=r"critic_kl_fraction must be a number in \[0, 1\)"):
        TRPOPlus("MlpPolicy", "CartPole-v1", critic_kl_fraction=value)


def test_critic_kl_fraction_needs_a_shared_features_extractor():
    with pytest.raises(ValueError, match=r"critic_kl_fraction > 0 .* needs an ActorCriticPolicy whose features extractor"):
        TRPOPlus("MlpPolicy", "CartPole-v1", critic_kl_fraction=0.5, policy_kwargs=dict(share_features_extractor=False))
    # the shared extractor must have parameters for the critic to train: SB3's MlpPolicy only flattens
    with pytest.raises(ValueError, match=r"critic_kl_fraction > 0 .* needs a shared features extractor with parameters"):
        TRPOPlus("MlpPolicy", "CartPole-v1", critic_kl_fraction=0.5)
    # accepted with a shared extractor that has parameters (SB3's default sharing); nothing to check for 0
    kwargs = dict(features_extractor_class=LinearFeatures)
    TRPOPlus("MlpPolicy", "CartPole-v1", critic_kl_fraction=0.5, policy_kwargs=kwargs)
    TRPOPlus("MlpPolicy", "CartPole-v1", policy_kwargs=dict(share_features_extractor=False))
    assert np.isclose(
        TRPOPlus("MlpPolicy", "CartPole-v1", critic_kl_fraction=0.25, policy_kwargs=kwargs).critic_kl_fraction, 0.25
    )


def test_actor_trains_features_false_leaves_the_extractor_to_the_critic(monkeypatch):
    # The step moves the actor's own layers only; the extractor changes by the critic's (kept) training alone, and
    # the whole update stays within target_kl of the rollout's policy
    snapshots = []
    update_policy = TRPOPlus._update_policy

    def recording(self, batch, update, actor_params, **kwargs):
        extractor = list(self.policy.features_extractor.parameters())
        before = flatten_params(extractor).clone()
        diagnostics = update_policy(self, batch, update, actor_params, **kwargs)
        snapshots.append((before, flatten_params(extractor).clone(), {id(p) for p in actor_params}))
        return diagnostics

    monkeypatch.setattr(TRPOPlus, "_update_policy", recording)
    for actor_trains_features in (True, False):
        snapshots.clear()
        model = shared_model(0.5)
        model.actor_trains_features = actor_trains_features
        keep = KeepRolloutPolicy()
        model.learn(512, callback=keep)
        extractor_ids = {id(p) for p in model.policy.features_extractor.parameters()}
        assert model.last_update.line_search_success
        assert rollout_kl(keep.rollout_policy, model) <= TARGET_KL + 1e-7
        for before, after, step_ids in snapshots:
            assert extractor_ids.isdisjoint(step_ids) is not actor_trains_features
            assert th.equal(before, after) is not actor_trains_features
    # the critic still trains the extractor within its part of the trust region
    assert 0.0 < model.logger.name_to_value["train/critic_kl"] <= 0.5 * TARGET_KL


def test_actor_trains_features_false_needs_critic_kl_fraction():
    with pytest.raises(ValueError, match="actor_trains_features=False needs critic_kl_fraction > 0"):
        TRPOPlus("MlpPolicy", "CartPole-v1", actor_trains_features=False)
    with pytest.raises(ValueError, match="actor_trains_features must be True or False"):
        TRPOPlus("MlpPolicy", "CartPole-v1", critic_kl_fraction=0.5, actor_trains_features="no")
    kwargs = dict(features_extractor_class=LinearFeatures)
    model = TRPOPlus("MlpPolicy", "CartPole-v1", critic_kl_fraction=0.5, actor_trains_features=False, policy_kwargs=kwargs)
    assert not model.actor_trains_features


def test_critic_policy_coef_trains_the_extractor_on_the_policy_objective(monkeypatch):
    # The value loss made zero (its graph kept): only the policy's objective in the critic's loss can move the
    # extractor. At the rollout's parameters the objective is mean(normalized advantage) = 0 (ent_coef 0); the
    # critic's steps must raise it on the whole batch, within the critic's part of the trust region.
    monkeypatch.setattr(trpo_plus_module.F, "mse_loss", lambda prediction, target: (prediction - target).sum() * 0.0)
    recorded = []
    update_policy = TRPOPlus._update_policy

    def recording(self, batch, update, step_params, **kwargs):
        with th.no_grad():
            features = batch.actor_features
            if features is None:
                features = self.policy.extract_features(batch.obs)
            objective, _ = self._objective(self._head_distribution(features), batch, update.ent_coef)
        recorded.append(objective.item())
        return update_policy(self, batch, update, step_params, **kwargs)

    monkeypatch.setattr(TRPOPlus, "_update_policy", recording)
    logged = {}
    for coef in (0.0, 1.0):
        model = shared_model(0.5, learning_rate=1e-2, critic_policy_coef=coef)
        model.learn(256)
        logged[coef] = dict(model.logger.name_to_value)
    (without, with_policy) = recorded
    # without the term, the critic leaves the policy as the rollout had it
    assert logged[0.0]["train/critic_kl"] < 1e-7
    assert without == pytest.approx(0.0, abs=1e-6)
    # with it, the critic's change of the extractor improves the policy's objective, within its budget
    assert with_policy > 1e-3, (with_policy, logged[1.0]["train/critic_kl"])
    assert 0.0 < logged[1.0]["train/critic_kl"] <= 0.5 * TARGET_KL


@pytest.mark.parametrize("value", [-0.1, float("nan"), float("inf")])
def test_critic_policy_coef_must_be_finite_and_non_negative(value):
    with pytest.raises(ValueError, match=r"critic_policy_coef must be a finite number >= 0"):
        shared_model(0.5, critic_policy_coef=value)


def test_critic_policy_coef_needs_critic_kl_fraction():
    with pytest.raises(ValueError, match=r"critic_policy_coef > 0 \(0.5\) needs critic_kl_fraction > 0"):
        shared_model(0.0, critic_policy_coef=0.5)


def test_critic_policy_clip_range_is_ppo_clipped_surrogate():
    # Exact small case: four samples of a 2-action softmax policy, ratios 1.5, 0.5, 1.5, 0.5 against advantages
    # +1, +1, -1, -1. With clip 0.2 the surrogate is min(r * A, clip(r, 0.8, 1.2) * A): 1.2, 0.5, -1.5, -0.8.
    model = shared_model(0.5, critic_policy_coef=1.0, critic_policy_clip_range=0.2)
    probs = th.tensor([[0.6, 0.4], [0.2, 0.8], [0.6, 0.4], [0.2, 0.8]])
    logits = probs.log().requires_grad_()
    distribution = model.policy.action_dist.proba_distribution(logits)
    actions = th.zeros(4, dtype=th.long)
    old_log_prob = th.log(th.tensor([0.4, 0.4, 0.4, 0.4]))
    batch = trpo_plus_module.PolicyBatch(th.zeros(4, 4), actions, old_log_prob, th.tensor([1.0, 1.0, -1.0, -1.0]))
    objective, _ = model._objective(distribution, batch, ent_coef=0.0, clip_range=0.2)
    assert objective.item() == pytest.approx((1.2 + 0.5 - 1.5 - 0.8) / 4, abs=1e-6)
    unclipped, _ = model._objective(distribution, batch, ent_coef=0.0)
    assert unclipped.item() == pytest.approx((1.5 + 0.5 - 1.5 - 0.5) / 4, abs=1e-6)
    # Past the clip range in the advantage's direction a sample no longer pushes (samples 0 and 3); a move the other
    # way is still pulled back (samples 1 and 2)
    (gradient,) = th.autograd.grad(objective, logits)
    pushing = gradient.abs().sum(dim=1)
    assert pushing[0] == 0 and pushing[3] == 0
    assert pushing[1] > 0 and pushing[2] > 0


def test_critic_policy_clip_range_limits_the_critic_push(monkeypatch):
    # The value loss made zero: only the policy's objective moves the extractor. Clipped at a tiny range, a sample
    # stops pushing as soon as its ratio has moved, so the critic moves the policy far less than unclipped
    monkeypatch.setattr(trpo_plus_module.F, "mse_loss", lambda prediction, target: (prediction - target).sum() * 0.0)
    kls = {}
    for clip_range in (None, 1e-4):
        model = shared_model(0.5, learning_rate=1e-2, critic_policy_coef=1.0, critic_policy_clip_range=clip_range)
        model.learn(256)
        kls[clip_range] = model.logger.name_to_value["train/critic_kl"]
    assert kls[None] > 0
    assert kls[1e-4] < 0.1 * kls[None], kls


@pytest.mark.parametrize("value", [0.0, -0.1, float("nan"), float("inf"), "0.2"])
def test_critic_policy_clip_range_must_be_none_or_positive(value):
    with pytest.raises(ValueError, match=r"critic_policy_clip_range must be None or a finite number > 0"):
        shared_model(0.5, critic_policy_coef=1.0, critic_policy_clip_range=value)


def test_critic_policy_clip_range_needs_critic_policy_coef():
    with pytest.raises(ValueError, match=r"critic_policy_clip_range \(0.2\) needs critic_policy_coef > 0"):
        shared_model(0.5, critic_policy_clip_range=0.2)
    assert shared_model(0.5, critic_policy_coef=1.0, critic_policy_clip_range=0.2).critic_policy_clip_range == 0.2
