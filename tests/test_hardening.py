"""
Hardening (issue 13): bad settings, bad data, interruptions, odd policies and foreign checkpoints never put a
non-finite number (or a half-step) into the weights, and every refusal names what was wrong.

Each hole of the issue and the test that closes it:

- ``target_kl``/``cg_damping``/entropy settings set to NaN, inf, 0 or < 0 after construction:
  ``test_bad_setting_refused_on_assignment``, ``test_bad_setting_refused_by_load``,
  ``test_writable_settings_are_checked_and_nothing_reaches_the_weights`` (hypothesis); a value past the setters is
  refused where the update uses it: ``test_unusable_value_refused_where_it_is_used``; ``set_parameters`` with NaN:
  ``test_set_parameters_refuses_non_finite_weights``
- a callback's rule fed a NaN KL: ``test_callback_rule_fed_a_nan_kl``; what ``AdaptiveTrustRegionCallback`` writes:
  ``test_adaptive_callback_never_writes_an_unusable_value``
- an exception or KeyboardInterrupt in the line search: ``test_interrupted_line_search_leaves_no_trial_point``
- NaN/inf observations or rewards, NaN gamma, reported as bad data and kept away from the trust region:
  ``test_non_finite_environment_data_is_reported_as_bad_data``, ``test_non_finite_gamma_is_reported_as_bad_data``,
  ``test_skipped_updates_leave_the_trust_region_alone``
- arguments refused at construction before the environment is built:
  ``test_constructor_refuses_bad_arguments_before_building_anything`` (hypothesis)
- BatchNorm/Dropout features extractors: ``test_batch_norm_follows_sb3_train_eval_contract``
- initial trust region of an sb3-contrib TRPO checkpoint: ``test_sb3_contrib_checkpoint_keeps_its_initial_trust_region``
- the fast finite check every guard above relies on (a sum first) stays exact: ``test_finite_check_is_exact``

Issue 38 (the update's correctness holes; the failed step after the critic's change is in test_critic_kl_fraction.py,
the names of hand-written TRPO scripts in test_drop_in.py):

- the rollout's NaN guard leaves the policy alone (a callback may copy or pickle it):
  ``test_rollout_leaves_the_policy_alone``
- a run that non-finite data has left nothing to train on stops with an error, while a single bad step costs its
  update only: ``test_poisoned_normalization_stops_training``, ``test_non_finite_rollouts_in_a_row_stop_training``,
  ``test_single_non_finite_step_costs_one_update``
- ``load(path, **kwargs)`` checks every argument as the constructor does (the same ``ValueError``):
  ``test_load_checks_arguments_as_the_constructor``, ``test_load_accepts_what_the_constructor_accepts``
"""

import copy
import math
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from helpers import fake_update, tiny_images
from hypothesis import given, settings
from hypothesis import strategies as st
from sb3_contrib import TRPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.preprocessing import get_flattened_obs_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
from torch import nn

from sb3_trpo_plus import TRPOPlus, UpdateDiagnostics
from sb3_trpo_plus.callbacks import AdaptiveTrustRegionCallback
from sb3_trpo_plus.fisher import flatten_params

SMALL = dict(n_steps=32, batch_size=32, n_critic_updates=1, policy_kwargs=dict(net_arch=[8]))


def all_params(model: TRPOPlus) -> th.Tensor:
    return flatten_params(list(model.policy.parameters())).clone()


def actor_vector(model: TRPOPlus) -> th.Tensor:
    return flatten_params(model._actor_params()).clone()


def trained_once(**kwargs) -> TRPOPlus:
    """A model with one rollout in its buffer (``model.train()`` updates on it again)."""
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, **{**SMALL, **kwargs})
    model.learn(model.n_steps)
    return model


# --- The step size and the weights ---------------------------------------------------------------------------------

BAD_SETTINGS = [
    ("target_kl", math.nan),
    ("target_kl", math.inf),
    ("target_kl", 0.0),
    ("target_kl", -1.0),
    ("target_kl", True),
    ("cg_damping", math.nan),
    ("cg_damping", -0.1),
    ("cg_damping", math.inf),
    ("ent_coef", math.nan),
    ("ent_coef", -0.01),
    ("ent_coef", lambda _: math.nan),
    ("ent_coef_decay", math.nan),
    ("ent_coef_decay", 0.0),
    ("ent_coef_decay", math.inf),
    ("min_ent_coef", math.nan),
    ("min_ent_coef", -1.0),
    ("initial_target_kl", math.nan),
    ("initial_cg_damping", -1.0),
    ("entropy_floor", 1.0),
    ("entropy_floor", math.nan),
    ("entropy_floor", -0.1),
]


@pytest.mark.parametrize("name, value", BAD_SETTINGS, ids=[f"{name}={value!r}"[:30] for name, value in BAD_SETTINGS])
def test_bad_setting_refused_on_assignment(name, value):
    model = trained_once(ent_coef=0.01)
    before, params = getattr(model, name), all_params(model)
    with pytest.raises(ValueError, match=name):
        setattr(model, name, value)
    assert getattr(model, name) == before
    assert th.equal(all_params(model), params)
    model.train()  # the next update still runs, on the old value
    assert th.isfinite(all_params(model)).all()


def test_bad_setting_refused_by_load(tmp_path):
    model = trained_once()
    model.target_kl = 0.005  # as an adaptive callback would
    model.save(tmp_path / "model")
    for kwargs, name in ((dict(target_kl=-1), "target_kl"), (dict(cg_damping=math.nan), "cg_damping"),
                         (dict(ent_coef_decay=2.0), "ent_coef_decay"), (dict(gamma=math.nan), "gamma"),
                         (dict(n_steps=0), "n_steps")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            TRPOPlus.load(tmp_path / "model", **kwargs)
    # A valid override goes through the setter, and the initial trust region stays the checkpoint's own
    loaded = TRPOPlus.load(tmp_path / "model", target_kl=0.002, ent_coef=0.05)
    assert (loaded.target_kl, loaded.initial_target_kl) == (0.002, 0.01)
    assert loaded.ent_coef_schedule(1.0) == 0.05


def test_arguments_checked_once_per_way_in(tmp_path, monkeypatch):
    from sb3_trpo_plus import arguments

    calls = []
    checked = arguments.check_arguments
    monkeypatch.setattr(arguments, "check_arguments", lambda **given: calls.append(given) or checked(**given))
    model = TRPOPlus("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, target_kl=0.02, seed=0)
    assert [given["target_kl"] for given in calls] == [0.02]  # construction: once, before the model is built
    model.save(tmp_path / "model")
    calls.clear()
    TRPOPlus.load(tmp_path / "model", target_kl=0.003)
    # load: the constructor's check of its defaults, then once on the loaded values with the keyword arguments
    assert [given["target_kl"] for given in calls] == [0.01, 0.003]


#: Arguments outside what the constructor allows (n_critic_updates=0 is allowed: the critic is then never trained)
BAD_ARGUMENTS = [
    dict(n_critic_updates=-1),
    dict(cg_max_steps=-3),
    dict(batch_size=-1),
    dict(line_search_shrinking_factor=3.0),
    dict(line_search_max_iter=0),
    dict(critic_policy_coef=-1.0),
    dict(critic_policy_clip_range=-0.2),
    dict(critic_policy_coef=0.5),  # needs critic_kl_fraction > 0
    dict(sub_sampling_factor=0),
    dict(sub_sampling_factor=64),  # a policy batch of one sample (n_steps 32, one environment)
    dict(cg_sub_sampling_factor=0),
    dict(actor_trains_features="no"),
    dict(stats_window_size=0),
    dict(min_ent_coef=0.5),  # above the checkpoint's ent_coef
    dict(entropy_floor=1.0),
    dict(entropy_floor=-0.1),
    dict(entropy_floor=math.nan),
]


@pytest.mark.parametrize("kwargs", BAD_ARGUMENTS, ids=[repr(kwargs)[1:-1][:40] for kwargs in BAD_ARGUMENTS])
def test_load_checks_arguments_as_the_constructor(kwargs, tmp_path):
    model = trained_once()
    model.save(tmp_path / "model")
    with pytest.raises(ValueError) as constructor_error:
        TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, **{**SMALL, **kwargs})
    with pytest.raises(ValueError) as load_error:
        TRPOPlus.load(tmp_path / "model", env=model.get_env(), **kwargs)
    assert str(load_error.value) == str(constructor_error.value)


def test_load_accepts_what_the_constructor_accepts(tmp_path):
    model = trained_once()
    model.save(tmp_path / "model")
    loaded = TRPOPlus.load(tmp_path / "model", env=model.get_env(), n_critic_updates=0, cg_max_steps=3, batch_size=16)
    assert (loaded.n_critic_updates, loaded.cg_max_steps, loaded.batch_size) == (0, 3, 16)
    loaded.learn(32)
    assert th.isfinite(all_params(loaded)).all()


@pytest.mark.parametrize(
    "name, corrupt",
    [
        ("target_kl", lambda model: model.__dict__.update(_target_kl=math.nan)),
        ("cg_damping", lambda model: model.__dict__.update(_cg_damping=-math.inf)),
        ("ent_coef", lambda model: setattr(model, "ent_coef_schedule", lambda _: math.nan)),
        ("ent_coef", lambda model: model.__dict__.update(_ent_coef_decay=math.inf)),
        ("learning_rate", lambda model: setattr(model, "lr_schedule", lambda _: math.nan)),
    ],
    ids=["target_kl", "cg_damping", "ent_coef_schedule", "ent_coef_decay", "learning_rate"],
)
def test_unusable_value_refused_where_it_is_used(name, corrupt):
    """A value that got past the setters refuses the update (named reason); no weight changes."""
    model = trained_once(ent_coef=0.01)
    model.train()  # ent_coef_decay ** n_updates: n_updates > 0
    corrupt(model)
    state = {key: value.clone() for key, value in model.policy.state_dict().items()}
    with pytest.warns(RuntimeWarning, match=name):
        model.train()
    assert model.last_update.failure_reason == f"invalid_{name}"
    assert model.last_update.skipped and not model.last_update.line_search_success
    assert all(th.equal(value, state[key]) for key, value in model.policy.state_dict().items())


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_interrupted_line_search_leaves_no_trial_point(error):
    model = trained_once()
    before = actor_vector(model)
    original, calls = model._distribution, []

    def interrupted(obs):
        calls.append(1)
        if len(calls) == 2:  # the first call is the gradient's, the second the first candidate's
            raise error("stopped in the middle of the line search")
        return original(obs)

    model._distribution = interrupted
    with pytest.raises(error):
        model.train()
    assert th.equal(actor_vector(model), before)


def test_set_parameters_refuses_non_finite_weights():
    model = trained_once()
    before = all_params(model)
    params = model.get_parameters()
    params["policy"] = {key: value.clone() for key, value in params["policy"].items()}
    params["policy"]["action_net.bias"][0] = math.nan
    with pytest.raises(ValueError, match=r"action_net\.bias"):
        model.set_parameters(params)
    assert th.equal(all_params(model), before)


# --- The adaptive callback and what it writes ----------------------------------------------------------------------


def test_adaptive_callback_never_writes_an_unusable_value():
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, **SMALL)
    model.set_logger(Logger(folder=None, output_formats=[]))
    callback = AdaptiveTrustRegionCallback(ls_fail_threshold=1, min_max_kl=0.001)
    callback.init_callback(model)
    callback.min_max_kl = math.nan  # a bound broken after construction: max(nan, x) is nan
    model.last_update = fake_update(1, "F")
    with pytest.raises(ValueError, match="target_kl"):
        callback.on_rollout_start()
    # Both values or neither: the damping was not raised either
    assert (model.target_kl, model.cg_damping) == (0.01, 0.1)


def test_callback_rule_fed_a_nan_kl():
    class FollowTheKL(BaseCallback):
        """A user's rule: the radius follows the last KL (NaN after a failed line search)."""

        def _on_rollout_start(self) -> None:
            if self.model.last_update is not None:
                self.model.target_kl = 2 * self.model.last_update.kl

        def _on_step(self) -> bool:
            return True

    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, line_search_max_iter=1, target_kl=1e4, **SMALL)
    with pytest.raises(ValueError, match="target_kl"):
        model.learn(4 * 32, callback=FollowTheKL())
    assert model.target_kl == 1e4
    assert th.isfinite(all_params(model)).all()


def test_skipped_updates_leave_the_trust_region_alone():
    model = TRPOPlus("MlpPolicy", "CartPole-v1", seed=0, **SMALL)
    model.set_logger(Logger(folder=None, output_formats=[]))
    callback = AdaptiveTrustRegionCallback(ls_fail_threshold=2, min_max_kl=0.001, recovery_window=2)
    callback.init_callback(model)
    model.target_kl = 0.005  # below the initial value: a recovery would move it
    for n_updates, reason in enumerate(["line_search_exhausted", "non_finite_input", "invalid_ent_coef"], start=1):
        model.last_update = fake_update(n_updates, "F", reason)
        callback.on_rollout_start()
    assert callback.n_consecutive_failures == 1 and callback.n_shrinks == 0
    for update in (fake_update(4, "S"), fake_update(5, "F", "non_finite_input")):
        model.last_update = update
        callback.on_rollout_start()
    assert callback.n_consecutive_full_steps == 1 and callback.n_recoveries == 0
    assert (model.target_kl, model.cg_damping) == (0.005, 0.1)


# --- Bad environment data ------------------------------------------------------------------------------------------


class InjectNonFinite(gym.Wrapper):
    """Puts ``value`` into the observation or the reward of the ``at``-th step (of every step for ``at=None``)."""

    def __init__(self, env: gym.Env, where: str, value: float, at: int | None = 5):
        super().__init__(env)
        self.where, self.value, self.at, self.t = where, value, at, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        if self.at is None or self.t == self.at:
            if self.where == "observation":
                obs = obs.copy()
                obs[0] = self.value
            else:
                reward = self.value
        return obs, reward, terminated, truncated, info


class RecordUpdates(BaseCallback):
    def __init__(self):
        super().__init__()
        self.updates: list[tuple[UpdateDiagnostics, th.Tensor]] = []

    def _on_rollout_start(self) -> None:
        if self.model.last_update is not None:
            self.updates.append((self.model.last_update, all_params(self.model)))

    def _on_training_end(self) -> None:
        self._on_rollout_start()

    def _on_step(self) -> bool:
        return True


@pytest.mark.parametrize("where", ["observation", "reward"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_environment_data_is_reported_as_bad_data(where, value):
    model = TRPOPlus("MlpPolicy", InjectNonFinite(gym.make("CartPole-v1"), where, value), seed=0, **SMALL)
    before = all_params(model)
    recorder = RecordUpdates()
    adaptive = AdaptiveTrustRegionCallback(ls_fail_threshold=1, min_max_kl=0.001)
    with pytest.warns(RuntimeWarning, match="VecCheckNan") as record:
        model.learn(2 * 32, callback=[recorder, adaptive])
    assert not any("line search" in str(w.message) and "unhealthy" in str(w.message) for w in record)
    (first, params_after_first), (second, _) = recorder.updates
    assert first.failure_reason == "non_finite_input" and first.skipped
    assert th.equal(params_after_first, before)  # neither the actor nor the critic moved
    assert second.failure_reason != "non_finite_input"  # the next, finite rollout trains as usual
    assert model.logger.name_to_value["train/non_finite_rollouts"] == 1
    # The trust region never hears of it (a failed line search would shrink it at once here)
    assert first.target_kl == second.target_kl == 0.01
    assert adaptive.n_shrinks == (0 if second.line_search_success else 1)


class CopyPolicyDuringRollout(BaseCallback):
    """At the rollout's first step, as a snapshot or self-play callback would: a deep copy and a pickle of the policy."""

    def __init__(self):
        super().__init__()
        self.checked = False

    def _on_step(self) -> bool:
        if not self.checked:
            self.checked = True
            obs = th.nan_to_num(th.as_tensor(self.locals["new_obs"]))
            snapshot = copy.deepcopy(self.model.policy)
            with th.no_grad():
                before = self.model.policy.get_distribution(obs).distribution.logits.clone()
                for param in snapshot.parameters():
                    param.add_(th.randn_like(param))
                actions, _, log_probs = snapshot(obs, deterministic=True)
                assert not th.equal(snapshot.get_distribution(obs).distribution.logits, before)  # the copy's weights
                assert th.equal(log_probs, snapshot.get_distribution(obs).log_prob(actions))
                assert th.equal(self.model.policy.get_distribution(obs).distribution.logits, before)
            self.pickled = pickle.dumps(self.model.policy)
        return True


@pytest.mark.parametrize("nan_observation", [False, True])
def test_rollout_leaves_the_policy_alone(nan_observation):
    """The rollout's guard against NaN observations checks the data, never patches the policy a callback may copy."""
    env = gym.make("CartPole-v1")
    if nan_observation:
        env = InjectNonFinite(env, "observation", math.nan, at=1)
    model = TRPOPlus("MlpPolicy", env, seed=0, **SMALL)
    callback = CopyPolicyDuringRollout()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the skipped update of the NaN observation)
        model.learn(32, callback=callback)
    assert callback.checked
    assert type(pickle.loads(callback.pickled)) is type(model.policy)
    assert "forward" not in vars(model.policy)
    assert (model.last_update.failure_reason == "non_finite_input") == nan_observation


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_finite_check_is_exact(backend):
    # One sum decides in the usual case; a NaN or an infinity anywhere (even +inf and -inf together, whose sum is NaN)
    # is caught, and finite entries whose sum overflows are still finite
    from sb3_trpo_plus.finite import is_finite as _is_finite
    from sb3_trpo_plus.finite import is_finite_array as _is_finite_array

    def check(values, dtype=np.float32):
        array = np.array(values, dtype=dtype)
        return _is_finite(th.as_tensor(array)) if backend == "torch" else _is_finite_array(array)

    big = float(np.finfo(np.float32).max)
    assert check([0.0, 1.0, -2.5]) and check([]) and check([big, big, big]) and check([-big, -big])
    assert check([1, 2, 3], dtype=np.int64)
    for bad in (math.nan, math.inf, -math.inf):
        assert not check([0.0, bad, 1.0]) and not check([big, big, bad])
    assert not check([math.inf, -math.inf])
    frames = np.random.default_rng(0).random((8, 4, 84, 84), dtype=np.float32)
    frames[3, 2, 10, 70] = math.nan
    assert not check(frames)


def test_non_finite_gamma_is_reported_as_bad_data():
    model = trained_once()
    model.rollout_buffer.gamma = math.nan  # past the constructor's check
    before = all_params(model)
    with pytest.warns(RuntimeWarning, match="gamma or gae_lambda"):
        model.learn(32, reset_num_timesteps=False)
    assert model.last_update.failure_reason == "non_finite_input"
    assert th.equal(all_params(model), before)
    assert len(model._line_search_window) == 1  # the first update's; the skipped one is not a line search


def normalized_cartpole(where: str, value: float = math.nan, at: int = 5, **vec_normalize_kwargs) -> VecNormalize:
    return VecNormalize(
        DummyVecEnv([lambda: InjectNonFinite(gym.make("CartPole-v1"), where, value, at)]), **vec_normalize_kwargs
    )


@pytest.mark.parametrize(
    "where, vec_normalize_kwargs, statistics",
    [("observation", dict(norm_obs=True, norm_reward=False), "obs_rms"), ("reward", dict(norm_obs=False), "ret_rms")],
)
def test_poisoned_normalization_stops_training(where, vec_normalize_kwargs, statistics):
    """One NaN behind VecNormalize poisons its running statistics for good: learn() stops, naming cause and cure."""
    model = TRPOPlus("MlpPolicy", normalized_cartpole(where, **vec_normalize_kwargs), seed=0, **SMALL)
    with pytest.warns(RuntimeWarning, match="skipped update 1"):
        with pytest.raises(RuntimeError, match=rf"VecNormalize \({statistics}\) hold NaN or inf.*VecCheckNan"):
            model.learn(10 * 32)
    assert model.last_update.n_updates == 1 and model.last_update.failure_reason == "non_finite_input"


def test_non_finite_rollouts_in_a_row_stop_training():
    """An environment whose every rollout holds NaN leaves nothing to train on: learn() stops after a few rollouts."""
    model = TRPOPlus("MlpPolicy", InjectNonFinite(gym.make("CartPole-v1"), "reward", math.nan, at=None), seed=0, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(RuntimeError, match=r"the last 10 rollouts held NaN or inf.*VecCheckNan"):
            model.learn(100 * 32)
    assert model.last_update.n_updates == 10 and model._n_non_finite_rollouts == 10


def test_single_non_finite_step_costs_one_update():
    """A NaN observation that poisons nothing (behind VecNormalize without norm_obs, as the atari entry) costs one update."""
    model = TRPOPlus("MlpPolicy", normalized_cartpole("observation", norm_obs=False, norm_reward=True), seed=0, **SMALL)
    recorder = RecordUpdates()
    with pytest.warns(RuntimeWarning, match="skipped update 1: .*VecCheckNan") as record:
        model.learn(3 * 32, callback=recorder)
    assert not any("skipped update 2" in str(warning.message) for warning in record)
    reasons = [update.failure_reason for update, _ in recorder.updates]
    assert reasons[0] == "non_finite_input" and "non_finite_input" not in reasons[1:] and len(reasons) == 3
    assert th.isfinite(all_params(model)).all()


# --- Arguments -----------------------------------------------------------------------------------------------------

ENV_ID = "HardeningCountingCartPole-v0"
ENVS_BUILT = []


def _counting_cartpole() -> gym.Env:
    ENVS_BUILT.append(1)
    return gym.make("CartPole-v1").unwrapped


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=_counting_cartpole, max_episode_steps=500)


def _finite_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(minimum: int):
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= minimum


#: What each argument allows, written independently of the code under test
ALLOWED = {
    "n_steps": _integer(1),
    "batch_size": _integer(1),
    "cg_max_steps": _integer(1),
    "line_search_max_iter": _integer(1),
    "sub_sampling_factor": _integer(1),
    "cg_sub_sampling_factor": _integer(1),
    "n_critic_updates": _integer(0),
    "gamma": lambda value: _finite_real(value) and 0 <= value <= 1,
    "gae_lambda": lambda value: _finite_real(value) and 0 <= value <= 1,
    "learning_rate": lambda value: _finite_real(value if not callable(value) else value(1.0)) and
    (value if not callable(value) else value(1.0)) >= 0,
    "target_kl": lambda value: _finite_real(value if not callable(value) else value(1.0)) and
    (value if not callable(value) else value(1.0)) > 0,
    "cg_damping": lambda value: _finite_real(value) and value >= 0,
    "ent_coef": lambda value: _finite_real(value if not callable(value) else value(1.0)) and
    (value if not callable(value) else value(1.0)) >= 0,
    "ent_coef_decay": lambda value: _finite_real(value) and 0 < value <= 1,
    "line_search_shrinking_factor": lambda value: _finite_real(value) and 0 < value < 1,
    "entropy_floor": lambda value: _finite_real(value) and 0 <= value < 1,
}  # fmt: skip
WRITABLE = (
    "target_kl", "cg_damping", "ent_coef", "ent_coef_decay", "min_ent_coef", "initial_target_kl", "initial_cg_damping",
    "entropy_floor",
)  # fmt: skip
ALLOWED_WRITES = {
    **{name: ALLOWED[name] for name in ("target_kl", "cg_damping", "ent_coef", "ent_coef_decay", "entropy_floor")},
    "min_ent_coef": ALLOWED["cg_damping"],
    "initial_target_kl": lambda value: _finite_real(value) and value > 0,
    "initial_cg_damping": ALLOWED["cg_damping"],
}

ANY_VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-0.5, max_value=1.5),
    st.integers(min_value=-3, max_value=64),
    st.booleans(),
    st.none(),
    st.sampled_from(["64", "0.99", "nan"]),
    st.sampled_from([lambda progress: 0.01 * progress, lambda _: math.nan, lambda _: -1.0]),
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(name=st.sampled_from(sorted(ALLOWED)), value=ANY_VALUE)
def test_constructor_refuses_bad_arguments_before_building_anything(name, value):
    kwargs = dict(n_steps=8, batch_size=8, normalize_advantage=False, policy_kwargs=dict(net_arch=[4]), device="cpu")
    built = len(ENVS_BUILT)
    if ALLOWED[name](value):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (a batch_size that does not divide the rollout)
            TRPOPlus("MlpPolicy", ENV_ID, **{**kwargs, name: value})
        return
    with pytest.raises(ValueError, match=rf"{name} must be .+, got"):
        TRPOPlus("MlpPolicy", ENV_ID, **{**kwargs, name: value})
    assert len(ENVS_BUILT) == built, "the environment was built before the argument was refused"


_MODEL: list[TRPOPlus] = []


def _shared_model() -> TRPOPlus:
    if not _MODEL:
        _MODEL.append(trained_once(n_steps=16, batch_size=16, ent_coef=0.01))
    return _MODEL[0]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(name=st.sampled_from(WRITABLE), value=ANY_VALUE)
def test_writable_settings_are_checked_and_nothing_reaches_the_weights(name, value):
    model = _shared_model()
    before = getattr(model, name)
    # (the floor min_ent_coef may not pass the initial ent_coef, whichever of the two is written)
    pair_holds = {
        "min_ent_coef": lambda: value <= (model.ent_coef(1.0) if callable(model.ent_coef) else model.ent_coef),
        "ent_coef": lambda: (value(1.0) if callable(value) else value) >= model.min_ent_coef,
    }.get(name, lambda: True)
    if ALLOWED_WRITES[name](value) and pair_holds():
        setattr(model, name, value)
        assert getattr(model, name) is value
    else:
        with pytest.raises(ValueError, match=rf"{name} must be .+, got"):
            setattr(model, name, value)
        assert getattr(model, name) is before
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the line-search health warning, extreme but allowed values)
        model.train()
    assert th.isfinite(all_params(model)).all()
    for key in WRITABLE:  # whatever happened, every setting is still usable
        assert ALLOWED_WRITES[key](getattr(model, key)), key


# --- SB3 contracts -------------------------------------------------------------------------------------------------


class FlattenBatchNormDropoutExtractor(BaseFeaturesExtractor):
    """SB3's test extractor (tests/test_train_eval_mode.py): flatten, batch normalization, dropout."""

    def __init__(self, observation_space: gym.Space):
        super().__init__(observation_space, get_flattened_obs_dim(observation_space))
        self.flatten = nn.Flatten()
        self.batch_norm = nn.BatchNorm1d(self._features_dim)
        self.dropout = nn.Dropout(0.5)

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.dropout(self.batch_norm(self.flatten(observations)))


def batch_norm_model(env_id: str) -> TRPOPlus:
    policy_kwargs = dict(net_arch=[16, 16], features_extractor_class=FlattenBatchNormDropoutExtractor)
    return TRPOPlus("MlpPolicy", env_id, seed=1, n_steps=64, batch_size=64, n_critic_updates=1, policy_kwargs=policy_kwargs)


def batch_norm_stats(model: TRPOPlus) -> tuple[th.Tensor, th.Tensor]:
    batch_norm = model.policy.features_extractor.batch_norm
    return batch_norm.bias.detach().clone(), batch_norm.running_mean.clone()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_batch_norm_follows_sb3_train_eval_contract(env_id):
    """As SB3 tests A2C and PPO: rollouts and predict in eval mode (no statistic moves), the update in train mode."""
    model = batch_norm_model(env_id)
    before = batch_norm_stats(model)
    _, callback = model._setup_learn(total_timesteps=2 * 64)
    for _ in range(2):
        model.collect_rollouts(model.get_env(), callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
    observation = model.get_env().reset()
    first, _ = model.predict(observation, deterministic=True)
    for _ in range(3):
        np.testing.assert_allclose(model.predict(observation, deterministic=True)[0], first)
    for value_before, value_after in zip(before, batch_norm_stats(model)):
        assert th.equal(value_before, value_after)

    bias_before, running_mean_before = batch_norm_stats(model)
    model.learn(total_timesteps=256)
    bias_after, running_mean_after = batch_norm_stats(model)
    assert not th.isclose(running_mean_before, running_mean_after).all()
    assert not th.isclose(bias_before, bias_after).all()  # the actor's accepted steps move the shared extractor
    # The actor split does not depend on the mode, and leaves the mode as it found it
    model.policy.set_training_mode(True)
    in_train_mode = [id(param) for param in model._actor_params()]
    assert model.policy.training
    model.policy.set_training_mode(False)
    assert [id(param) for param in model._actor_params()] == in_train_mode and not model.policy.training


def test_sb3_contrib_checkpoint_keeps_its_initial_trust_region(tmp_path):
    contrib = TRPO("MlpPolicy", "CartPole-v1", target_kl=0.03, cg_damping=0.2, n_steps=64, batch_size=64, seed=0)
    contrib.save(tmp_path / "contrib")
    loaded = TRPOPlus.load(tmp_path / "contrib")
    assert (loaded.target_kl, loaded.cg_damping) == (0.03, 0.2)
    assert (loaded.initial_target_kl, loaded.initial_cg_damping) == (0.03, 0.2)
    # Given to load: the values given; one of the pair given, the other still the checkpoint's own (and fixed)
    given = TRPOPlus.load(tmp_path / "contrib", target_kl=0.02)
    assert (given.initial_target_kl, given.initial_cg_damping) == (0.02, 0.2)
    only_radius = TRPOPlus.load(tmp_path / "contrib", initial_target_kl=0.05)
    only_radius.cg_damping = 0.4
    assert (only_radius.initial_target_kl, only_radius.initial_cg_damping) == (0.05, 0.2)
    # The adaptive callback's recovery moves back toward those values, not toward TRPOPlus's defaults
    loaded.set_logger(Logger(folder=None, output_formats=[]))
    callback = AdaptiveTrustRegionCallback(ls_fail_threshold=1, min_max_kl=0.001, max_damping=0.5, recovery_window=1)
    callback.init_callback(loaded)
    loaded.target_kl = 0.029
    loaded.last_update = fake_update(1, "S")
    callback.on_rollout_start()
    assert loaded.target_kl == 0.03


# Issue 56: what a line-by-line review found


def test_entropy_floor_pair_is_checked_on_assignment(tmp_path):
    """``min_ent_coef <= initial ent_coef`` is checked by both setters as by the constructor (the updates silently used
    the broken pair, and the saved model could not be loaded); what can be saved can be loaded."""
    model = TRPOPlus("MlpPolicy", "CartPole-v1", ent_coef=0.05, min_ent_coef=0.01, **SMALL)
    with pytest.raises(ValueError, match="ent_coef must start at or above min_ent_coef"):
        model.ent_coef = 0.0
    with pytest.raises(ValueError, match="min_ent_coef must be between 0 and the initial ent_coef"):
        model.min_ent_coef = 0.5
    assert (model.ent_coef, model.min_ent_coef) == (0.05, 0.01)
    model.min_ent_coef = 0.0
    model.ent_coef = 0.0  # the floor first, then the coefficient
    model.learn(32)
    model.save(tmp_path / "model")
    loaded = TRPOPlus.load(tmp_path / "model")
    assert (loaded.ent_coef, loaded.min_ent_coef) == (0.0, 0.0)
    # load's keyword arguments may move both, in any order, and are checked as a pair
    moved = TRPOPlus.load(tmp_path / "model", min_ent_coef=0.08, ent_coef=0.1)
    assert (moved.ent_coef, moved.min_ent_coef) == (0.1, 0.08)
    with pytest.raises(ValueError, match="min_ent_coef"):
        TRPOPlus.load(tmp_path / "model", min_ent_coef=0.2)


def test_refused_learning_rate_never_reaches_the_optimizer(tmp_path):
    """An update refused for a NaN learning rate leaves the optimizer's rate as it was (it wrote NaN there, and the
    saved model then failed to load)."""
    model = TRPOPlus(
        "MlpPolicy", "CartPole-v1", learning_rate=lambda progress: 1e-3 if progress > 0.5 else float("nan"), **SMALL
    )
    with pytest.warns(RuntimeWarning, match="learning_rate"):
        model.learn(8 * 32)
    assert model.last_update.failure_reason == "invalid_learning_rate"
    assert all(math.isfinite(group["lr"]) for group in model.policy.optimizer.param_groups)
    model.save(tmp_path / "model")
    TRPOPlus.load(tmp_path / "model")


def test_zero_critic_updates_with_a_frozen_extractor_refused():
    """``n_critic_updates=0`` would leave the shared extractor untrained when only the critic trains it."""
    frozen = dict(n_critic_updates=0, critic_kl_fraction=0.5, n_steps=32, batch_size=32)
    with pytest.raises(ValueError, match=r"n_critic_updates=0 .*actor_trains_features=False"):
        tiny_images(True, 8, actor_trains_features=False, **frozen)
    # 0 stays valid where the step trains the extractor (sb3-contrib's meaning: the critic is not trained)
    tiny_images(True, 8, actor_trains_features=True, **frozen).learn(32)


def test_load_applies_stats_window_size(tmp_path):
    """``load(path, stats_window_size=3)`` is applied (it was stored and ignored)."""
    TRPOPlus("MlpPolicy", "CartPole-v1", **SMALL).save(tmp_path / "model")
    loaded = TRPOPlus.load(tmp_path / "model", env=DummyVecEnv([lambda: gym.make("CartPole-v1")]), stats_window_size=3)
    assert loaded._stats_window_size == 3 and "stats_window_size" not in vars(loaded)
    loaded.learn(5 * 32)
    assert loaded.ep_info_buffer.maxlen == 3 and loaded._line_search_window.maxlen == 3
    with pytest.raises(ValueError, match="stats_window_size"):
        TRPOPlus.load(tmp_path / "model", stats_window_size=0)


def test_multi_input_policy_on_a_box_space_says_which_policy_fits():
    with pytest.raises(ValueError, match=r"MultiInputPolicy takes Dict observation spaces.*use MlpPolicy"):
        TRPOPlus("MultiInputPolicy", "CartPole-v1", **SMALL)


def test_rollout_wrapper_is_built_once_per_environment(monkeypatch, tmp_path):
    """The NaN guard's wrapper is built once per environment, not at every rollout (building one costs a round trip
    to every SubprocVecEnv worker), and is neither saved nor kept across ``set_env``."""
    from sb3_trpo_plus import trpo_plus as trpo_plus_module

    built = []

    class Counted(trpo_plus_module.FiniteObservations):
        def __init__(self, venv):
            built.append(venv)
            super().__init__(venv)

    monkeypatch.setattr(trpo_plus_module, "FiniteObservations", Counted)
    model = TRPOPlus("MlpPolicy", "CartPole-v1", **SMALL)
    model.learn(3 * 32)
    assert len(built) == 1
    model.save(tmp_path / "model")
    other = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    model.set_env(other)
    model.learn(32, reset_num_timesteps=False)
    assert len(built) == 2 and built[-1] is other


def test_entropy_floor_needs_discrete_actions():
    with pytest.raises(ValueError, match=r"entropy_floor \(0.2\) needs a discrete action space"):
        TRPOPlus("MlpPolicy", "Pendulum-v1", entropy_floor=0.2, **SMALL)
    model = TRPOPlus("MlpPolicy", "Pendulum-v1", entropy_floor=0.0, **SMALL)  # (no floor: any space)
    with pytest.raises(ValueError, match=r"entropy_floor \(0.2\) needs a discrete action space"):
        model.entropy_floor = 0.2  # (nor when assigned later)
    assert model.entropy_floor == 0.0
