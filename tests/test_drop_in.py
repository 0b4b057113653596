"""TRPOPlus as a drop-in for ``sb3_contrib.TRPO``: same arguments, same defaults, same update when ent_coef = 0."""

import copy
import inspect
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_contrib import TRPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import IdentityEnvMultiBinary
from stable_baselines3.common.logger import configure

from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus.fisher import detach_distribution, flatten_params, kl_per_sample


class TrackingEnv(gym.Env):
    """Continuous control with a 3-dimensional action: follow the first three observation coordinates."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self._obs = np.zeros(4, np.float32)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        return self._obs, {}

    def step(self, action):
        reward = -float(np.sum((np.clip(action, -1, 1) - self._obs[:3]) ** 2))
        self._t += 1
        self._obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        return self._obs, reward, False, self._t >= 20, {}


def test_signature_extends_sb3_contrib():
    """Every sb3-contrib TRPO argument, at the same position (positional calls keep working), with the same default."""
    contrib = list(inspect.signature(TRPO.__init__).parameters.values())
    plus = list(inspect.signature(TRPOPlus.__init__).parameters.values())
    contrib_names = [param.name for param in contrib]
    plus_names = [param.name for param in plus]
    # the same arguments in the same order, _init_setup_model included; TRPOPlus's own come after, keyword-only
    assert plus_names[: len(contrib_names)] == contrib_names
    assert all(param.kind is inspect.Parameter.KEYWORD_ONLY for param in plus[len(contrib) :])
    plus_by_name = {param.name: param for param in plus}
    for param in contrib:
        assert plus_by_name[param.name].default == param.default, param.name
    # TRPOPlus's own arguments default to plain TRPO behaviour
    defaults = {name: plus_by_name[name].default for name in set(plus_names) - set(contrib_names)}
    assert defaults == dict(
        ent_coef=0.0,
        ent_coef_decay=1.0,
        min_ent_coef=0.0,
        entropy_floor=0.0,
        cg_sub_sampling_factor=1,
        critic_kl_fraction=0.0,
        actor_trains_features=True,
        critic_policy_coef=0.0,
        critic_policy_clip_range=None,
    )


def test_positional_call_of_sb3_contrib():
    """sb3-contrib TRPO's full positional call (its 26 arguments) builds the same model with TRPOPlus (it failed with
    ``ent_coef ... got True`` while TRPOPlus's own arguments sat before ``_init_setup_model``)."""
    values = ["MlpPolicy", "CartPole-v1", 3e-4, 64, 32, 0.98, 7, 0.05, 0.7, 6, 3, 0.9, False, -1, None, None, True]
    values += [0.02, 2, 50, None, dict(net_arch=[8]), 0, 1, "cpu", True]
    contrib, plus = TRPO(*values), TRPOPlus(*values)
    names = [name for name in inspect.signature(TRPO.__init__).parameters if name != "self"]
    assert len(values) == len(names) == 26
    for name in ("learning_rate", "n_steps", "batch_size", "gamma", "cg_max_steps", "cg_damping", "target_kl",
                 "line_search_shrinking_factor", "line_search_max_iter", "n_critic_updates", "gae_lambda",
                 "sub_sampling_factor", "seed"):  # fmt: skip
        assert getattr(plus, name) == getattr(contrib, name), name
    assert plus._stats_window_size == contrib._stats_window_size == 50 and plus.policy is not None


def _actor_state(policy) -> th.Tensor:
    """The actor's parameters by name (SB3's actor-critic policies: the policy branch, action head and log_std)."""
    names = [name for name, _ in policy.named_parameters() if "value" not in name and "vf" not in name]
    params = dict(policy.named_parameters())
    return flatten_params([params[name] for name in sorted(names)])


def _paired_update(env_fn, plus_kwargs=None, **kwargs):
    """
    sb3-contrib TRPO and TRPOPlus (ent_coef 0) updated from the same weights on the same rollout.
    ``plus_kwargs`` are given to TRPOPlus only (and override ``kwargs`` for it).
    """
    common = dict(n_steps=256, batch_size=64, n_critic_updates=1, seed=0, policy_kwargs=dict(net_arch=[32]), **kwargs)
    contrib = TRPO("MlpPolicy", make_vec_env(env_fn, n_envs=2, seed=0), **common)
    contrib.learn(2 * 256)  # one rollout (and a first update), the buffer keeps the rollout
    plus = TRPOPlus("MlpPolicy", make_vec_env(env_fn, n_envs=2, seed=0), **{**common, **(plus_kwargs or {})})
    plus.policy.load_state_dict(contrib.policy.state_dict())
    plus.rollout_buffer = copy.deepcopy(contrib.rollout_buffer)
    plus.set_logger(configure(None, [""]))
    before = _actor_state(contrib.policy)
    assert th.equal(_actor_state(plus.policy), before)
    contrib.train()
    plus.train()
    return before, _actor_state(contrib.policy), _actor_state(plus.policy), plus


@pytest.mark.parametrize(
    "env_fn, kwargs",
    [
        ("CartPole-v1", dict(target_kl=0.01)),
        (TrackingEnv, dict(target_kl=0.01)),
        (lambda: IdentityEnvMultiBinary(3), dict(target_kl=0.01)),
    ],
    ids=["discrete", "box-3d", "multibinary-3"],
)
def test_same_update_as_sb3_contrib(env_fn, kwargs):
    """With ent_coef = 0 the analytic Fisher product and the same target_kl give sb3-contrib's step (to float32 noise)."""
    before, contrib_after, plus_after, plus = _paired_update(env_fn, **kwargs)
    assert plus.last_update.line_search_success
    contrib_step, plus_step = contrib_after - before, plus_after - before
    assert contrib_step.norm() > 0
    relative_difference = ((plus_step - contrib_step).norm() / contrib_step.norm()).item()
    print(f"relative difference of the steps: {relative_difference:.2e}")
    assert relative_difference < 1e-3


def test_same_critic_update_as_sb3_contrib(monkeypatch):
    """
    The critic's epochs are sb3-contrib's, bit for bit, when both draw the same minibatches: same weights, same Adam
    moments, same rollout (not yet flattened by ``get``), several epochs. sb3-contrib shuffles with numpy (one
    permutation for the policy's whole batch, then one per critic epoch), TRPOPlus with ``th.randperm`` per epoch: here
    both draw from numpy's generator, seeded alike.
    """
    common = dict(n_steps=256, batch_size=64, n_critic_updates=5, seed=0, policy_kwargs=dict(net_arch=[32]))
    contrib = TRPO("MlpPolicy", make_vec_env(TrackingEnv, n_envs=2, seed=0), **common)
    contrib.learn(3 * 2 * 256)  # the critic's Adam moments are not zero
    _, callback = contrib._setup_learn(2 * 256, None, reset_num_timesteps=False)
    callback.on_training_start(locals(), globals())
    contrib.collect_rollouts(contrib.env, callback, contrib.rollout_buffer, contrib.n_steps)
    plus = TRPOPlus("MlpPolicy", make_vec_env(TrackingEnv, n_envs=2, seed=0), **common)
    plus.policy.load_state_dict(contrib.policy.state_dict())
    # (deep: load_state_dict keeps the very moment tensors, which contrib's update would then change for both)
    plus.policy.optimizer.load_state_dict(copy.deepcopy(contrib.policy.optimizer.state_dict()))
    plus.rollout_buffer = copy.deepcopy(contrib.rollout_buffer)
    plus.set_logger(configure(None, [""]))
    names = [name for name, _ in contrib.policy.named_parameters() if "value" in name]
    before = {name: param.detach().clone() for name, param in contrib.policy.named_parameters() if name in names}

    np.random.seed(123)
    contrib.train()
    np.random.seed(123)
    np.random.permutation(2 * 256)  # the policy's shuffle of the whole batch in sb3-contrib's train()
    monkeypatch.setattr(th, "randperm", lambda n, device=None: th.as_tensor(np.random.permutation(n)))
    plus.train()

    contrib_params, plus_params = dict(contrib.policy.named_parameters()), dict(plus.policy.named_parameters())
    for name in names:
        assert not th.equal(contrib_params[name], before[name]), name
        assert th.equal(plus_params[name], contrib_params[name]), name


def test_kl_convention_of_accepted_steps():
    """The logged KL is the KL that target_kl bounds: the mean over action dimensions, as in sb3-contrib."""
    model = TRPOPlus(
        "MlpPolicy",
        make_vec_env(TrackingEnv, n_envs=2, seed=0),
        n_steps=128,
        batch_size=64,
        seed=0,
        target_kl=0.02,
        policy_kwargs=dict(net_arch=[32]),
    )
    model.learn(2 * 128)
    obs = th.as_tensor(model.rollout_buffer.observations.reshape(-1, 4))
    with th.no_grad():
        old = detach_distribution(model.policy.get_distribution(obs))
    model.train()
    assert model.last_update.line_search_success
    with th.no_grad():
        new = model.policy.get_distribution(obs)
        mean_kl = kl_per_sample(old, new, joint=False).mean().item()
        joint = kl_per_sample(old, new, joint=True).mean().item()
    assert joint == pytest.approx(3 * mean_kl, rel=1e-5)
    assert model.last_update.kl == pytest.approx(mean_kl, rel=1e-4)
    assert mean_kl <= model.target_kl + 1e-7


@pytest.mark.parametrize(
    "name, value, new_name",
    [("max_kl", 0.01, "target_kl"), ("damping", 0.1, "cg_damping"), ("entropy_coef", 0.01, "ent_coef"),
     ("cg_iters", 10, "cg_max_steps"), ("lam", 0.97, "gae_lambda"), ("normalize_rewards", True, "VecNormalize")],
)  # fmt: skip
def test_names_of_hand_written_trpo_scripts_point_to_the_new_ones(name, value, new_name, tmp_path):
    match = rf"unexpected keyword argument '{name}': use {re.escape(new_name)}"
    with pytest.raises(TypeError, match=match):
        TRPOPlus("MlpPolicy", "CartPole-v1", **{name: value})
    TRPOPlus("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64).save(tmp_path / "model")
    with pytest.raises(TypeError, match=match):
        TRPOPlus.load(tmp_path / "model", **{name: value})
    # a name of no TRPO script: the list of arguments, and the signature is the real one
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_argument': the arguments are "):
        TRPOPlus("MlpPolicy", "CartPole-v1", no_such_argument=1)
    assert "target_kl" in inspect.signature(TRPOPlus).parameters


@pytest.mark.parametrize("name, closest", [("targetkl", "target_kl"), ("target_kll", "target_kl"), ("entcoef", "ent_coef")])
def test_misspelled_argument_names_the_closest(name, closest, tmp_path):
    """A misspelled keyword gets the closest argument's name, at construction and in ``load`` (where SB3 would store
    it unseen)."""
    match = rf"unexpected keyword argument '{name}': did you mean '{closest}'"
    with pytest.raises(TypeError, match=match):
        TRPOPlus("MlpPolicy", "CartPole-v1", **{name: 0.01})
    TRPOPlus("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64).save(tmp_path / "model")
    with pytest.raises(TypeError, match=match):
        TRPOPlus.load(tmp_path / "model", **{name: 0.01})


def test_renamed_arguments_are_the_docs_table():
    """Every name of the table in docs/trpo_plus.md that TRPOPlus does not take points to the row's TRPOPlus name."""
    from sb3_trpo_plus.arguments import RENAMED_ARGUMENTS

    page = (Path(__file__).resolve().parent.parent / "docs" / "trpo_plus.md").read_text(encoding="utf-8")
    table = page.split("## Names used in hand-written TRPO scripts")[1].split("\n## ")[0]
    arguments = set(inspect.signature(TRPOPlus.__init__).parameters)
    documented = {}
    for row in re.findall(r"^\| (.+) \| (.+) \|$", table, re.MULTILINE)[1:]:  # (after the header)
        old_names = [name for name in re.findall(r"`([^`]+)`", row[0]) if name.isidentifier() and name not in arguments]
        documented.update(dict.fromkeys(old_names, re.findall(r"`([^`]+)`", row[1])[0]))
    assert documented.keys() == RENAMED_ARGUMENTS.keys()
    for name, new_name in documented.items():
        assert RENAMED_ARGUMENTS[name].startswith(new_name), name
