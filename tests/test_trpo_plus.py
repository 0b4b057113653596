"""Behaviour of TRPOPlus against SB3's conventions: spaces, wrappers, diagnostics, errors, save/load, learning."""

import copy
import functools
import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from helpers import tiny_cartpole
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import (
    FakeImageEnv,
    IdentityEnv,
    IdentityEnvBox,
    IdentityEnvMultiBinary,
    IdentityEnvMultiDiscrete,
    SimpleMultiObsEnv,
)
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack, VecNormalize

from sb3_trpo_plus import TRPOPlus, fisher
from sb3_trpo_plus import trpo_plus as trpo_plus_module
from sb3_trpo_plus.fisher import detach_distribution, flatten_params, kl_per_sample
from sb3_trpo_plus.trpo_plus import decayed_ent_coef

SMALL = dict(n_steps=64, batch_size=32, n_critic_updates=2, policy_kwargs=dict(net_arch=[16]))


def actor_vector(model):
    return flatten_params(model._actor_params()).detach().clone()


def all_params(model):
    return flatten_params(model.policy.parameters()).detach().clone()


def one_update(model):
    """Collect one rollout and update, like learn(n_steps) would; the buffer keeps the rollout afterwards."""
    model.learn(model.n_steps * model.n_envs)
    return model.last_update


@pytest.mark.parametrize(
    "env_fn, kwargs",
    [
        (lambda: IdentityEnv(4), {}),
        (lambda: IdentityEnvMultiDiscrete(2), {}),
        (lambda: IdentityEnvMultiBinary(3), {}),
        (lambda: IdentityEnvBox(-1, 1), {}),
        (lambda: IdentityEnvBox(-1, 1), {"use_sde": True}),
    ],
    ids=["discrete", "multidiscrete", "multibinary", "box", "box-gsde"],
)
def test_action_spaces(env_fn, kwargs):
    model = TRPOPlus("MlpPolicy", make_vec_env(env_fn, n_envs=2), seed=0, ent_coef=0.01, **SMALL, **kwargs)
    model.learn(3 * 64 * 2)
    assert model.last_update is not None and model.last_update.n_updates == 3
    assert all(th.isfinite(p).all() for p in model.policy.parameters())


def rollout_observations(model):
    """The observations of the rollout buffer (the last rollout), as the policy takes them."""
    return next(model.rollout_buffer.get(batch_size=None)).observations


def checked_update(model):
    """
    ``model.train()`` on the buffer's rollout, checked against the policy before and after: an accepted step moves the
    actor, its KL (measured here) is the reported one and stays within ``target_kl``; a rejected one moves nothing.
    """
    obs = rollout_observations(model)
    with th.no_grad():
        old = detach_distribution(model.policy.get_distribution(obs))
    before = actor_vector(model)
    model.train()
    diagnostics = model.last_update
    with th.no_grad():
        kl = kl_per_sample(old, model.policy.get_distribution(obs)).mean().item()
    if diagnostics.line_search_success:
        if model.sub_sampling_factor == 1:  # (else the update measured it on a random part of the rollout)
            assert kl <= diagnostics.target_kl + 1e-7
            assert kl == pytest.approx(diagnostics.kl, rel=1e-4, abs=1e-8)
        assert 0 < diagnostics.step_fraction <= 1 and diagnostics.improvement > 0
        assert not th.equal(actor_vector(model), before)
    else:
        assert th.equal(actor_vector(model), before)
    return diagnostics


def test_cnn_and_multi_input_policies():
    # MultiInput (dict observations: an image and a vector, the generic torch.func product): trust-region steps
    model = TRPOPlus("MultiInputPolicy", SimpleMultiObsEnv(random_start=False), seed=0, **SMALL)
    one_update(model)
    critic_before = all_params(model)
    accepted = [checked_update(model).line_search_success for _ in range(3)]
    assert sum(accepted) >= 2, accepted
    assert not th.equal(all_params(model), critic_before)
    model = TRPOPlus(
        "CnnPolicy",
        FakeImageEnv(screen_height=36, screen_width=36, n_channels=1),
        seed=0,
        n_steps=32,
        batch_size=16,
        n_critic_updates=1,
        cg_sub_sampling_factor=2,
    )
    model.learn(64)
    assert model.last_update.n_updates == 2


def test_vec_env_wrappers_and_callbacks(tmp_path):
    from stable_baselines3.common.callbacks import CheckpointCallback, EvalCallback

    env = VecNormalize(VecFrameStack(make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=SubprocVecEnv), 2))
    eval_env = VecNormalize(VecFrameStack(make_vec_env("CartPole-v1", n_envs=1), 2), training=False)
    model = TRPOPlus("MlpPolicy", env, seed=0, tensorboard_log=str(tmp_path / "tb"), **SMALL)
    callbacks = [EvalCallback(eval_env, eval_freq=64, n_eval_episodes=1), CheckpointCallback(64, str(tmp_path / "ckpt"))]
    model.learn(256, callback=callbacks, progress_bar=True)
    env.close()
    assert list((tmp_path / "ckpt").glob("*.zip"))
    assert list((tmp_path / "tb").glob("TRPOPlus_1/events.*"))


def test_logged_keys_and_failed_update_is_nan(tmp_path):
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, **SMALL)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(4 * 64, callback=ZeroAdvantages())
    import pandas as pd

    # SB3 dumps the logs before each train(): the first row has no train/ values yet
    log = pd.read_csv(tmp_path / "progress.csv").dropna(subset=["train/n_updates"])
    assert len(log) == 3
    for key in (
        "policy_objective",
        "value_loss",
        "kl_divergence_loss",
        "explained_variance",
        "is_line_search_success",
        "n_updates",
        "entropy",
        "ent_coef",
        "line_search_iters",
        "step_fraction",
        "target_kl",
        "cg_damping",
        "line_search_success_rate",
        "step_fraction_mean",
        "line_search_warning",
    ):
        assert f"train/{key}" in log.columns, key
    assert (log["train/is_line_search_success"] == 0).all()
    assert log["train/kl_divergence_loss"].isna().all()  # never 0 for a rejected update
    assert (log["train/step_fraction"] == 0).all()
    assert (log["train/line_search_iters"] == model.line_search_max_iter).all()
    assert model.last_update.failure_reason == "line_search_exhausted" and math.isnan(model.last_update.kl)


def test_failed_line_search_restores_parameters_exactly():
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, **SMALL)
    one_update(model)
    before = actor_vector(model)
    model.rollout_buffer.advantages[:] = 0.0  # with ent_coef=0 no step can improve the objective
    model.train()
    assert not model.last_update.line_search_success
    assert th.equal(actor_vector(model), before)


def test_accepted_step_respects_trust_region():
    # (a small damping: the quadratic model underestimates the KL, so the full step often leaves the trust region and
    # the line search has to backtrack for the KL, not only for the objective)
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=1, target_kl=0.05, cg_damping=1e-3, **SMALL)
    updates = []
    for _ in range(4):
        one_update(model)
        updates.append(checked_update(model))
    # (a test that passed with no accepted step, or with no step the KL bound shortened, would check nothing)
    assert sum(update.line_search_success for update in updates) >= 2
    assert any(update.line_search_success and update.step_fraction < 1 for update in updates)


def test_entropy_bonus_drives_acceptance():
    """Zero advantages: only the entropy term can improve L, and the search accepts a step that raises entropy."""
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, ent_coef=0.1, **SMALL)
    one_update(model)
    model.rollout_buffer.advantages[:] = 0.0
    obs = th.as_tensor(model.rollout_buffer.observations.reshape(-1, 4))
    with th.no_grad():
        entropy_before = model.policy.get_distribution(obs).entropy().mean().item()
    model.train()
    with th.no_grad():
        entropy_after = model.policy.get_distribution(obs).entropy().mean().item()
    assert model.last_update.line_search_success
    assert entropy_after > entropy_before
    # Without the entropy term, nothing can improve: the update is (honestly) rejected
    model.ent_coef_schedule = lambda _: 0.0
    model.rollout_buffer.advantages[:] = 0.0
    model.train()
    assert not model.last_update.line_search_success and math.isnan(model.last_update.kl)


def test_ent_coef_decay_values():
    assert decayed_ent_coef(0.05, 0.9995, 0.01, 0) == 0.05
    assert decayed_ent_coef(0.05, 0.9995, 0.01, 1000) == pytest.approx(0.0303, abs=5e-5)
    assert decayed_ent_coef(0.05, 0.9995, 0.01, 2000) == pytest.approx(0.0184, abs=5e-5)
    assert decayed_ent_coef(0.05, 0.9995, 0.01, 3000) == pytest.approx(0.0112, abs=5e-5)
    assert decayed_ent_coef(0.05, 0.9995, 0.01, 3218) > 0.01
    assert decayed_ent_coef(0.05, 0.9995, 0.01, 3219) == 0.01
    # The model uses exactly these values, update after update
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, ent_coef=0.05, ent_coef_decay=0.5, min_ent_coef=0.01, **SMALL)
    used = []
    for _ in range(4):
        one_update(model)
        used.append(model.last_update.ent_coef)
    assert used == [0.05, 0.025, 0.0125, 0.01]
    assert model.current_ent_coef == 0.01


class ZeroAdvantages(BaseCallback):
    """Zero the advantages before every update: with ent_coef=0 nothing can improve and every search fails."""

    def _on_rollout_end(self) -> None:
        self.model.rollout_buffer.advantages[:] = 0.0

    def _on_step(self) -> bool:
        return True


class RecordUpdates(BaseCallback):
    def __init__(self):
        super().__init__()
        self.updates = []

    def _on_rollout_start(self) -> None:
        if self.model.last_update is not None:
            self.updates.append(self.model.last_update)

    def _on_training_end(self) -> None:
        self.updates.append(self.model.last_update)

    def _on_step(self) -> bool:
        return True


def test_ent_coef_schedule():
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, ent_coef=lambda progress: 0.1 * progress, **SMALL)
    recorder = RecordUpdates()
    model.learn(4 * 64, callback=recorder)
    # SB3's progress remaining at the k-th update (of 4) is 1 - k / 4
    assert [u.ent_coef for u in recorder.updates] == pytest.approx([0.075, 0.05, 0.025, 0.0])


def test_target_kl_schedule():
    """A scheduled radius is the one each update uses and logs, its steps stay inside it, and the updates it closes
    (0 or below, as at the end of a linear schedule) are skipped without a warning, leaving the policy as it was."""
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, target_kl=lambda progress: 0.03 * progress - 0.01, **SMALL)
    assert model.initial_target_kl == pytest.approx(0.02)
    recorder = RecordUpdates()
    model.learn(64)  # one update at progress remaining 0: closed
    assert model.last_update.failure_reason == "closed_trust_region" and model.last_update.target_kl == pytest.approx(-0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.learn(3 * 64, callback=recorder)  # progress remaining 2/3, 1/3, 0
    assert not [w for w in caught if "skipped update" in str(w.message)]
    updates = recorder.updates[1:]  # (the first is the previous learn's last update)
    assert [u.target_kl for u in updates] == pytest.approx([0.01, 0.0, -0.01], abs=1e-12)
    assert updates[0].line_search_success and updates[0].kl <= 0.01
    assert [u.failure_reason for u in updates[1:]] == ["closed_trust_region"] * 2
    assert all(u.skipped for u in updates[1:])


def test_target_kl_schedule_refused_by_adaptive_callback():
    from sb3_trpo_plus.callbacks import AdaptiveTrustRegionCallback

    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, target_kl=lambda progress: 0.02 * progress, **SMALL)
    with pytest.raises(ValueError, match="target_kl is a schedule"):
        model.learn(64, callback=AdaptiveTrustRegionCallback())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(target_kl=0.0), "target_kl"),
        (dict(target_kl=lambda progress: 0.0), "target_kl"),
        (dict(target_kl=float("nan")), "target_kl"),
        (dict(cg_damping=-0.1), "cg_damping"),
        (dict(line_search_shrinking_factor=1.0), "line_search_shrinking_factor"),
        (dict(line_search_shrinking_factor=0.0), "line_search_shrinking_factor"),
        (dict(line_search_max_iter=0), "line_search_max_iter"),
        (dict(cg_max_steps=0), "cg_max_steps"),
        (dict(cg_sub_sampling_factor=0), "cg_sub_sampling_factor"),
        (dict(sub_sampling_factor=0), "sub_sampling_factor"),
        (dict(ent_coef=-0.01), "ent_coef"),
        (dict(ent_coef_decay=0.0), "ent_coef_decay"),
        (dict(ent_coef_decay=1.01), "ent_coef_decay"),
        (dict(ent_coef=0.05, min_ent_coef=-0.01), "min_ent_coef"),
        (dict(ent_coef=0.05, min_ent_coef=0.1), "min_ent_coef"),
        (dict(batch_size=0), "batch_size"),
        (dict(n_critic_updates=-1), "n_critic_updates"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TRPOPlus("MlpPolicy", "CartPole-v1", **kwargs)


def test_invalid_action_space_and_batch():
    class TupleActionEnv(IdentityEnv):
        def __init__(self):
            super().__init__(2)
            self.action_space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)])

    with pytest.raises(ValueError, match="action space"):
        TRPOPlus("MlpPolicy", DummyVecEnv([TupleActionEnv]))
    with pytest.raises(ValueError, match="normalize_advantage"):
        TRPOPlus("MlpPolicy", "CartPole-v1", n_steps=1, batch_size=1)
    TRPOPlus("MlpPolicy", "CartPole-v1", n_steps=1, batch_size=1, normalize_advantage=False)


@pytest.mark.parametrize("where", ["advantages", "observations"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_inputs_never_reach_the_weights(where, value):
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, **SMALL)
    one_update(model)
    before = all_params(model)
    getattr(model.rollout_buffer, where)[3] = value
    with pytest.warns(RuntimeWarning, match="VecCheckNan"):
        model.train()
    assert not model.last_update.line_search_success
    assert model.last_update.failure_reason == "non_finite_input" and model.last_update.skipped
    assert math.isnan(model.last_update.kl)
    after = all_params(model)
    assert th.isfinite(after).all()
    # Bad data updates nothing: neither the actor nor the critic
    assert th.equal(actor_vector(model), actor_part(model, before))
    assert th.equal(after, before)


def actor_part(model, flat_params):
    chunks, start = [], 0
    actor = set(model._actor_params())
    for param in model.policy.parameters():
        if param in actor:
            chunks.append(flat_params[start : start + param.numel()])
        start += param.numel()
    return th.cat(chunks)


class _SharedLinearFeatures(BaseFeaturesExtractor):
    """A features extractor with parameters (SB3's FlattenExtractor has none), shared by actor and critic."""

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 8):
        super().__init__(observation_space, features_dim)
        self.linear = th.nn.Sequential(th.nn.Linear(observation_space.shape[0], features_dim), th.nn.Tanh())

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.linear(observations)


class _OwnValuePolicy(ActorCriticPolicy):
    """SB3's policy with its own ``predict_values`` (the same computation): the critic trains through the shared
    extractor, with gradient, as for any custom policy, so only the critic's guard keeps the actor's parameters still."""

    def predict_values(self, obs: th.Tensor) -> th.Tensor:
        return super().predict_values(obs)


@pytest.mark.parametrize("policy", ["MlpPolicy", _OwnValuePolicy])
@pytest.mark.parametrize("share", [True, False])
def test_critic_only_trains_what_the_actor_does_not_use(policy, share):
    model = TRPOPlus(
        policy,
        "CartPole-v1",
        seed=0,
        n_steps=64,
        batch_size=32,
        policy_kwargs=dict(net_arch=[16], share_features_extractor=share, features_extractor_class=_SharedLinearFeatures),
    )
    one_update(model)
    extractor = list(model.policy.features_extractor.parameters())
    shared_before = flatten_params(extractor).clone()
    actor_before, all_before = actor_vector(model), all_params(model)
    model.rollout_buffer.advantages[:] = 0.0
    model.train()  # the policy step fails (nothing to improve), the critic trains
    assert not model.last_update.line_search_success
    assert th.equal(actor_vector(model), actor_before)
    assert not th.equal(all_params(model), all_before)
    if share:
        # the shared extractor is the actor's: the critic's loss reaches it (through the custom policy's
        # predict_values; SB3's policy computes the features without gradient), and must leave it as it was
        assert th.equal(flatten_params(extractor), shared_before)


def test_save_load_round_trip(tmp_path):
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, ent_coef=0.05, ent_coef_decay=0.9, min_ent_coef=0.01, **SMALL)
    model.learn(3 * 64)
    model.target_kl, model.cg_damping = 0.004, 0.15  # as an adaptive callback would
    model.save(tmp_path / "model")
    loaded = TRPOPlus.load(tmp_path / "model", env=make_vec_env("CartPole-v1"))
    obs = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    assert np.array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    assert th.equal(all_params(model), all_params(loaded))
    for attribute in (
        "target_kl",
        "cg_damping",
        "initial_target_kl",
        "initial_cg_damping",
        "_n_updates",
        "current_ent_coef",
        "last_update",
        "ent_coef_decay",
        "min_ent_coef",
    ):
        assert getattr(loaded, attribute) == getattr(model, attribute), attribute
    loaded.learn(64, reset_num_timesteps=False)
    assert loaded.last_update.ent_coef == pytest.approx(0.05 * 0.9**3)
    assert loaded.last_update.target_kl == 0.004 and loaded.last_update.cg_damping == 0.15


def test_same_seed_same_parameters():
    vectors = []
    for _ in range(2):
        model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=7, ent_coef=0.01, cg_sub_sampling_factor=2, **SMALL)
        model.learn(3 * 64)
        vectors.append(all_params(model))
    assert th.equal(vectors[0], vectors[1])


def test_sub_sampling(monkeypatch):
    # 64 samples: the gradient and the line search on every 2nd (32), the Fisher-vector products on every 4th of those
    fvp_batch_sizes, objective_batch_sizes = [], []

    class RecordedFVP(trpo_plus_module.FisherVectorProduct):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            fvp_batch_sizes.append(self.batch_size)

    monkeypatch.setattr(fisher, "FisherVectorProduct", RecordedFVP)
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, sub_sampling_factor=2, cg_sub_sampling_factor=4, **SMALL)
    objective = model._objective
    monkeypatch.setattr(
        model,
        "_objective",
        lambda distribution, batch, ent_coef: (
            objective_batch_sizes.append(len(batch.actions)),
            objective(distribution, batch, ent_coef),
        )[1],
    )
    one_update(model)
    accepted = [checked_update(model).line_search_success for _ in range(2)]
    assert model.last_update.n_updates == 3 and any(accepted)
    assert fvp_batch_sizes == [8, 8, 8]
    assert set(objective_batch_sizes) == {32}


def test_line_search_health_warning():
    model = tiny_cartpole(n_steps=16, width=8, stats_window_size=10)
    with pytest.warns(RuntimeWarning, match="line search unhealthy") as record:
        model.learn(14 * 16, callback=ZeroAdvantages())
    # once per episode of trouble, not once per update
    assert len([w for w in record if "unhealthy" in str(w.message)]) == 1
    assert model.logger.name_to_value["train/line_search_warning"] == 1.0


def test_learns_cartpole():
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, ent_coef=0.01, ent_coef_decay=0.99)
    model.learn(20_000)
    mean_reward, _ = evaluate_policy(model, make_vec_env("CartPole-v1", seed=123), n_eval_episodes=10)
    assert mean_reward >= 200


def test_critic_reuses_shared_features_exactly():
    """The critic's reuse of the line search's features gives the same update as recomputing them."""
    model = TRPOPlus(
        "CnnPolicy", FakeImageEnv(screen_height=36, screen_width=36, n_channels=1), seed=0,
        n_steps=32, batch_size=16, n_critic_updates=2,
    )  # fmt: skip
    one_update(model)
    state = copy.deepcopy((model.policy.state_dict(), model.policy.optimizer.state_dict()))
    rng = (th.get_rng_state(), np.random.get_state())
    results = []
    for reuse in (True, False):
        model.policy.load_state_dict(state[0])
        model.policy.optimizer.load_state_dict(copy.deepcopy(state[1]))  # Adam updates its state in place
        th.set_rng_state(rng[0])
        np.random.set_state(rng[1])
        reused = []

        def update_critic(original, rollout_data, actor_params, features=None, reuse=reuse, reused=reused):
            # Without the shared features: the critic recomputes them from the observations
            reused.append(features is not None)
            return original(rollout_data, actor_params, features if reuse else None)

        model._update_critic = functools.partial(update_critic, model._update_critic)
        model.train()
        assert reused == [True]  # the update handed its features on
        results.append(all_params(model))
    assert th.allclose(results[0], results[1], atol=1e-6)


def test_custom_policy_actor_params_from_structure():
    """A custom policy whose actor parameter has "value" in its name (sb3-contrib would skip it) is updated."""
    from stable_baselines3.common.policies import ActorCriticPolicy

    class TemperaturePolicy(ActorCriticPolicy):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.value_temperature = th.nn.Parameter(th.zeros(1))  # an actor parameter, despite its name

        def _get_action_dist_from_latent(self, latent_pi):
            logits = self.action_net(latent_pi) * th.exp(self.value_temperature)
            return self.action_dist.proba_distribution(action_logits=logits)

    model = TRPOPlus(TemperaturePolicy, "CartPole-v1", seed=0, **SMALL)
    one_update(model)
    assert any(param is model.policy.value_temperature for param in model._actor_params())
    assert not any(param is model.policy.value_net.weight for param in model._actor_params())
    before = model.policy.value_temperature.item()
    model.train()
    assert model.last_update.line_search_success
    assert model.policy.value_temperature.item() != before


def test_entropy_floor_objective_exact():
    """L = mean(ratio * A) + c * H - max(0, floor - H), H the mean entropy, floor a fraction of log(n_actions)."""
    from sb3_trpo_plus.rollout import PolicyBatch

    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, ent_coef=0.1, entropy_floor=0.9, **SMALL)
    probs = th.tensor([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])
    distribution = model.policy.action_dist.proba_distribution(action_logits=probs.log())
    actions = th.tensor([0, 1, 1])
    old_log_prob = th.tensor([0.8, 0.5, 0.5]).log()
    advantages = th.tensor([1.0, -2.0, 0.5])
    batch = PolicyBatch(obs=None, actions=actions, old_log_prob=old_log_prob, advantages=advantages)
    objective, entropy = model._objective(distribution, batch, ent_coef=0.1)
    ratios = np.array([0.9 / 0.8, 0.5 / 0.5, 0.8 / 0.5])
    entropies = [-sum(p * math.log(p) for p in row) for row in ([0.9, 0.1], [0.5, 0.5], [0.2, 0.8])]
    mean_entropy = float(np.mean(entropies))  # 0.5472, under the floor 0.6238
    expected = float(np.mean(ratios * np.array([1.0, -2.0, 0.5]))) + 0.1 * mean_entropy - (0.9 * math.log(2) - mean_entropy)
    assert entropy.item() == pytest.approx(mean_entropy, rel=1e-6)
    assert objective.item() == pytest.approx(expected, abs=1e-6)
    # Above the floor the term is 0: the objective is the one without a floor (a floor assigned after construction,
    # as a callback would, is the one the next objective uses)
    model.entropy_floor = 0.3 / math.log(2)
    objective, _ = model._objective(distribution, batch, ent_coef=0.1)
    assert objective.item() == pytest.approx(expected + (0.9 * math.log(2) - mean_entropy), abs=1e-6)


class AlwaysAction0(gym.Env):
    """One-step episodes whose reward is 1 for action 0 and 0 for action 1: the policy is pulled to determinism."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), float(action == 0), True, False, {}


@pytest.mark.parametrize("entropy_floor", [0.0, 0.5])
def test_entropy_floor_holds_the_entropy(entropy_floor):
    """
    The same runs with and without a floor. Without one the policy goes deterministic and the line search then fails
    update after update (the collapse); with one the entropy stays at the floor (where this one-state task's
    objective has its maximum, so a search that finds nothing better there is honest).
    """
    model = TRPOPlus(
        "MlpPolicy", AlwaysAction0(), seed=0, target_kl=0.05, entropy_floor=entropy_floor, normalize_advantage=False, **SMALL
    )
    recorder = RecordUpdates()
    model.learn(30 * 64, callback=recorder)
    entropies = [update.entropy for update in recorder.updates]
    floor = 0.5 * math.log(2)
    if entropy_floor == 0:
        assert entropies[-1] < 0.01 and not recorder.updates[-1].line_search_success
    else:
        assert min(entropies) > floor - 0.06
        assert max(entropies[5:]) < floor + 0.06
