import contextlib
import copy
import functools
import inspect
import io
import math
import pathlib
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar, TypeGuard, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.type_aliases import (
    DictRolloutBufferSamples,
    GymEnv,
    MaybeCallback,
    PyTorchObs,
    RolloutBufferSamples,
    Schedule,
    TensorDict,
)
from stable_baselines3.common.utils import FloatSchedule, explained_variance
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn
from torch import nn
from torch.nn import functional as F

from sb3_trpo_plus.buffers import owns_copies, scaled_images, whole_rollout
from sb3_trpo_plus.diagnostics import UpdateDiagnostics, UpdateSettings
from sb3_trpo_plus.distributions import detach_distribution, distribution_tensors, kl_scale, mean_kl
from sb3_trpo_plus.parameters import assign_params, flat_grad, flatten_params
from sb3_trpo_plus.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_trpo_plus.policy_jvp import JvpFn, actor_critic_jvp, functional_jvp
from sb3_trpo_plus.trust_region import FisherVectorProduct, conjugate_gradient

SelfTRPOPlus = TypeVar("SelfTRPOPlus", bound="TRPOPlus")

SUPPORTED_ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)

# Rolling line-search health: warn when the success rate or the mean accepted step fraction stays this low
LINE_SEARCH_MIN_SUCCESS_RATE = 0.3
LINE_SEARCH_MIN_STEP_FRACTION = 0.05
#: Halvings of the critic's change of a shared features extractor before it is undone (critic_kl_fraction > 0)
CRITIC_KL_HALVINGS = 10
#: Halvings of a Gauss-Newton step of the actor's re-fit before it is dropped (actor_refit_steps > 0)
ACTOR_REFIT_HALVINGS = 5
#: Rollouts in a row holding NaN or inf (their updates skipped) after which training stops with an error
MAX_NON_FINITE_ROLLOUTS_IN_A_ROW = 10


def _index_obs(obs: PyTorchObs, index: slice | th.Tensor) -> PyTorchObs:
    if isinstance(obs, dict):
        return {key: value[index] for key, value in obs.items()}
    return obs[index]


def _sub_sample(n_samples: int, factor: int, device: th.device) -> slice | th.Tensor:
    """The index of ``ceil(n_samples / factor)`` samples drawn at random without replacement (all of them for 1)."""
    if factor == 1:
        return slice(None)
    return th.randperm(n_samples, device=device)[: -(-n_samples // factor)]


@dataclass
class _PolicyBatch:
    """
    The batch of one policy update.

    :param obs: observations
    :param actions: actions taken
    :param old_log_prob: their log-probabilities under the policy that collected them
    :param advantages: their advantages (normalized if asked)
    :param features: the shared features of the whole rollout at the actor's current parameters, when the update
        computed them anyway (shared features extractor, no ``sub_sampling_factor``): the critic update reuses them
    :param actor_features: the features the step's distributions are computed from, when the step leaves the
        features extractor alone (``actor_trains_features=False``): computed once, the extractor is not run again
    """

    obs: PyTorchObs
    actions: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    features: th.Tensor | None = None
    actor_features: th.Tensor | None = None

    def is_finite(self) -> bool:
        return _all_finite(self.obs) and _is_finite(self.advantages) and _is_finite(self.old_log_prob)

    def minibatch(self, index: th.Tensor) -> "_PolicyBatch":
        """The samples at ``index`` (observations, actions, old log-probs and advantages)."""
        return _PolicyBatch(_index_obs(self.obs, index), self.actions[index], self.old_log_prob[index], self.advantages[index])


def _is_standard_shared_actor_critic(policy: BasePolicy) -> TypeGuard[ActorCriticPolicy]:
    """SB3's ActorCriticPolicy (or a subclass keeping its forward passes) with a features extractor shared by both heads."""
    return (
        isinstance(policy, ActorCriticPolicy)
        and policy.share_features_extractor
        and all(
            getattr(type(policy), method) is getattr(ActorCriticPolicy, method)
            for method in ("get_distribution", "predict_values", "extract_features")
        )
    )


@contextlib.contextmanager
def _images_normalized_once(policy: BasePolicy, observations: PyTorchObs, in_place: bool = False) -> Iterator[PyTorchObs]:
    """
    The observations with their images scaled to ``[0, 1]`` once, and the policy told not to scale them again while
    the context lasts.

    SB3's ``preprocess_obs`` converts image observations from ``uint8`` and divides them by 255 at every forward pass.
    One update runs the actor and the critic on the whole rollout several times (gradient, line-search candidates,
    critic epochs); on 1024 Atari frames each conversion costs about half a forward pass of NatureCNN on CPU. The
    scaling here is ``preprocess_obs``'s own arithmetic (:func:`~sb3_trpo_plus.buffers.scaled_images`), so the update
    is bit-identical. Only SB3's
    actor-critic policies whose feature extraction goes through ``policy.normalize_images`` are handled; any other
    policy gets the observations unchanged.

    :param policy: the policy being trained
    :param observations: the rollout's observations
    :param in_place: scale the ``float32`` images of ``observations`` themselves, without a copy (the caller owns them)
    :return: the observations to train on
    """
    standard = isinstance(policy, ActorCriticPolicy) and all(
        getattr(type(policy), method) is getattr(ActorCriticPolicy, method)
        for method in ("extract_features", "predict_values", "get_distribution")
    )
    if not (standard and policy.normalize_images):
        yield observations
        return

    def scaled(obs: th.Tensor, space: spaces.Space) -> th.Tensor:
        return scaled_images(obs, in_place) if is_image_space(space) else obs

    if isinstance(observations, dict):
        assert isinstance(policy.observation_space, spaces.Dict)
        normalized: PyTorchObs = {key: scaled(obs, policy.observation_space[key]) for key, obs in observations.items()}
    else:
        normalized = scaled(observations, policy.observation_space)
    policy.normalize_images = False
    try:
        yield normalized
    finally:
        policy.normalize_images = True


def _is_finite(tensor: th.Tensor) -> bool:
    """
    Whether every entry of ``tensor`` is finite, exactly, at the cost of one sum in the usual case.

    A NaN or an infinite entry makes the sum NaN or infinite; a non-finite sum of finite entries (an overflow) is
    told apart by checking the entries one by one. On 1024 Atari frames ``th.isfinite(x).all()`` alone costs about a
    tenth of a second on CPU (a boolean copy of the whole batch), the sum a few milliseconds.
    """
    return bool(th.isfinite(tensor.sum())) or bool(th.isfinite(tensor).all())


def _is_finite_array(array: np.ndarray) -> bool:
    """:func:`_is_finite` for a NumPy array (an overflowing sum is not warned about: the entries are checked then)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(array.sum())) or bool(np.isfinite(array).all())


def _all_finite(obs: PyTorchObs) -> bool:
    tensors = obs.values() if isinstance(obs, dict) else [obs]
    return all(_is_finite(tensor) for tensor in tensors if tensor.is_floating_point())


class _FiniteObservations(VecEnvWrapper):
    """
    The environment as the rollout's policy sees it: NaN and inf in its observations replaced by 0, and
    ``met_non_finite`` set when there were some.

    A NaN observation would otherwise stop the rollout inside the action distribution (its logits or mean are NaN),
    while an inf one often goes through (``tanh(inf)`` is finite): with this, both are collected the same way, and
    ``train`` skips the update on the rollout that met them. The policy is left as it is (a callback may copy or pickle
    it during the rollout).

    :param venv: the environment collecting the rollout
    """

    def __init__(self, venv: VecEnv):
        super().__init__(venv)
        self.met_non_finite = False

    def finite(self, obs: VecEnvObs) -> VecEnvObs:
        """The observations, with NaN and inf replaced by 0 (a copy only where there are some)."""
        arrays: list[np.ndarray] = list(obs.values()) if isinstance(obs, dict) else [obs]  # type: ignore[list-item]
        if all(_is_finite_array(array) for array in arrays if np.issubdtype(array.dtype, np.floating)):
            return obs
        self.met_non_finite = True
        if isinstance(obs, dict):
            return {key: np.nan_to_num(value, nan=0.0, posinf=0.0, neginf=0.0) for key, value in obs.items()}
        return np.nan_to_num(obs, nan=0.0, posinf=0.0, neginf=0.0)  # type: ignore[arg-type]

    def reset(self) -> VecEnvObs:
        return self.finite(self.venv.reset())

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        return self.finite(obs), rewards, dones, infos


def _non_finite_statistics(vec_normalize: VecNormalize | None) -> list[str]:
    """The running statistics that ``vec_normalize`` normalizes with (observations, returns) holding NaN or inf."""
    if vec_normalize is None:
        return []
    statistics: dict[str, RunningMeanStd] = {}
    if vec_normalize.norm_obs:
        obs_rms = vec_normalize.obs_rms
        statistics = (
            {f"obs_rms[{key!r}]": rms for key, rms in obs_rms.items()} if isinstance(obs_rms, dict) else {"obs_rms": obs_rms}
        )
    if vec_normalize.norm_reward:
        statistics["ret_rms"] = vec_normalize.ret_rms
    return [name for name, rms in statistics.items() if not (np.isfinite(rms.mean).all() and np.isfinite(rms.var).all())]


@contextlib.contextmanager
def _eval_mode(policy: BasePolicy) -> Iterator[None]:
    """The policy in evaluation mode (BatchNorm on its running statistics, no Dropout), its mode restored after."""
    was_training = policy.training
    policy.set_training_mode(False)
    try:
        yield
    finally:
        policy.set_training_mode(was_training)


def _non_finite_entries(state: Any, prefix: str = "") -> list[str]:
    """The names of the floating-point tensors and floats holding NaN or inf in a nested (optimizer) state dict."""
    if isinstance(state, th.Tensor):
        return [prefix] if state.is_floating_point() and not bool(th.isfinite(state).all()) else []
    if isinstance(state, float):
        return [prefix] if not math.isfinite(state) else []
    if isinstance(state, dict):
        return [entry for key, value in state.items() for entry in _non_finite_entries(value, f"{prefix}.{key}".lstrip("."))]
    if isinstance(state, (list, tuple)):
        return [entry for i, value in enumerate(state) for entry in _non_finite_entries(value, f"{prefix}[{i}]")]
    return []


#: Argument names of hand-written TRPO scripts -> what TRPOPlus takes instead (docs/trpo_plus.md, "Names used in
#: hand-written TRPO scripts")
RENAMED_ARGUMENTS: dict[str, str] = {
    "max_kl": "target_kl",
    "delta": "target_kl",
    "damping": "cg_damping",
    "cg_iters": "cg_max_steps",
    "backtrack_coeff": "line_search_shrinking_factor",
    "alpha": "line_search_shrinking_factor",
    "backtrack_iters": "line_search_max_iter",
    "critic_train_iters": "n_critic_updates",
    "vf_iters": "n_critic_updates",
    "critic_lr": "learning_rate (the critic's)",
    "vf_lr": "learning_rate (the critic's)",
    "entropy_coef": "ent_coef",
    "ent_coeff": "ent_coef",
    "entropy_decay": "ent_coef_decay",
    "min_entropy_coef": "min_ent_coef",
    "rollout_steps": "n_steps (per environment: the batch is n_steps * n_envs)",
    "timesteps_per_batch": "n_steps (per environment: the batch is n_steps * n_envs)",
    "lam": "gae_lambda",
    "normalize_rewards": "VecNormalize(env, norm_obs=False, norm_reward=True) around the environment",
}


def _check_renamed_arguments(names: Iterable[str]) -> None:
    """Raise a ``TypeError`` naming what to use instead of the first argument name of hand-written TRPO scripts."""
    for name in names:
        if name in RENAMED_ARGUMENTS:
            raise TypeError(
                f"TRPOPlus got an unexpected keyword argument {name!r}: use {RENAMED_ARGUMENTS[name]} instead "
                '(docs/trpo_plus.md, "Names used in hand-written TRPO scripts")'
            )


def _pointing_to_new_names(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` raising :func:`_check_renamed_arguments`'s ``TypeError`` (its signature kept, for ``inspect``)."""

    @functools.wraps(init)
    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        _check_renamed_arguments(kwargs)
        init(self, *args, **kwargs)

    return checked_init


class _CheckedSetting:
    """
    A model attribute stored as ``_<name>`` whose every assignment is checked by :func:`_check_setting` (a
    ``ValueError`` naming the attribute, and the old value kept), so that a callback or a user can never put a value
    into the update that it cannot use.

    :param default_from: attribute whose value is returned while this one has not been set yet
    """

    def __init__(self, default_from: str | None = None):
        self.default_from = default_from
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        if self.default_from is not None and f"_{self.name}" not in obj.__dict__:
            return getattr(obj, self.default_from)
        return obj.__dict__[f"_{self.name}"]

    def __set__(self, obj: Any, value: Any) -> None:
        _check_setting(self.name, value)
        obj.__dict__[f"_{self.name}"] = value


class TRPOPlus(OnPolicyAlgorithm):
    """
    Trust Region Policy Optimization with a consistent entropy bonus (TRPOPlus)

    A drop-in replacement for ``sb3_contrib.TRPO``: same arguments, same meaning, plus
    an entropy bonus used by both the step direction and the line-search acceptance, an entropy-coefficient decay,
    honest per-update diagnostics (``model.last_update``; KL is NaN when the line search fails), and an analytic
    Gauss-Newton Fisher-vector product (no double backward).

    Paper: https://arxiv.org/abs/1502.05477
    Code: This implementation follows sb3-contrib TRPO (https://github.com/Stable-Baselines-Team/stable-baselines3-contrib)
    and OpenAI Baselines TRPO (https://github.com/openai/baselines/tree/master/baselines/trpo_mpi)
    Introduction to TRPO: https://spinningup.openai.com/en/latest/algorithms/trpo.html
    Fisher-vector product: Martens, "New insights and perspectives on the natural gradient method"
    (https://arxiv.org/abs/1412.1193), Schulman's thesis p. 40-42 (http://joschu.net/docs/thesis.pdf)

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, ...)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: The learning rate for the value function, it can be a function
        of the current progress remaining (from 1 to 0)
    :param n_steps: The number of steps to run for each environment per update
        (i.e. rollout buffer size is n_steps * n_envs where n_envs is number of environment copies running in parallel)
    :param batch_size: Minibatch size for the value function
    :param gamma: Discount factor
    :param cg_max_steps: maximum number of steps in the Conjugate Gradient algorithm
        for computing the Hessian vector product
    :param cg_damping: damping in the Hessian vector product computation (``(F + cg_damping * I) x = g``)
    :param line_search_shrinking_factor: step-size reduction factor for the line-search
        (i.e., ``theta_new = theta + alpha^i * step``)
    :param line_search_max_iter: maximum number of iteration
        for the backtracking line-search
    :param n_critic_updates: number of critic updates (epochs over the rollout) per policy update
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param use_sde: Whether to use generalized State Dependent Exploration (gSDE)
        instead of action noise exploration (default: False)
    :param sde_sample_freq: Sample a new noise matrix every n steps when using gSDE
        Default: -1 (only sample at the beginning of the rollout)
    :param rollout_buffer_class: Rollout buffer class to use. If ``None``, it will be automatically selected.
    :param rollout_buffer_kwargs: Keyword arguments to pass to the rollout buffer on creation
    :param normalize_advantage: Whether to normalize or not the advantage
    :param target_kl: Trust-region radius: the largest ``KL(old || new)`` (mean over the batch; see ``joint_kl`` for
        several action dimensions) an accepted step may have. Should be small for stability. Values like 0.01, 0.05.
        Callbacks may change it during training (see ``sb3_trpo_plus.callbacks``).
    :param sub_sampling_factor: Sub-sample the batch to make computation faster (one ``sub_sampling_factor``-th of
        the rollout, drawn at random at each update), see p40-42 of John Schulman thesis http://joschu.net/docs/thesis.pdf
    :param stats_window_size: Window size for the rollout logging, specifying the number of episodes to average
        the reported success rate, mean episode length, and mean reward over; also the number of updates over
        which the line-search success rate and mean step fraction are averaged
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation
    :param verbose: the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run.
        Setting it to auto, the code will be run on the GPU if possible.
    :param ent_coef: Entropy coefficient of the objective ``mean(ratio * advantage) + ent_coef * mean(entropy)``.
        A float or a schedule of the progress remaining (from 1 to 0), like ``learning_rate``. 0 gives plain TRPO.
    :param ent_coef_decay: multiplied into the entropy coefficient after every policy update, in (0, 1]
        (e.g. 0.9995 halves it in about 1386 updates; 1.0 disables the decay)
    :param min_ent_coef: floor of the decayed entropy coefficient, between 0 and the initial ``ent_coef``
    :param cg_sub_sampling_factor: compute the Fisher-vector products of the conjugate gradient on one
        ``cg_sub_sampling_factor``-th of the policy batch, drawn at random at each update, while the gradient and the
        line search use the whole batch (1: no sub-sampling; OpenAI Baselines uses every 5th sample)
    :param joint_kl: which KL ``target_kl`` bounds (and whose Hessian is the Fisher matrix) for factorized action
        distributions (Box, also with gSDE, and MultiBinary) with several dimensions. ``False`` (default, as
        sb3-contrib TRPO): the mean of the per-dimension KLs, so ``target_kl`` and ``cg_damping`` mean exactly what
        they mean in ``sb3_contrib.TRPO``. ``True``: the KL of the joint action distribution (their sum), the
        quantity TRPO's theory bounds; same as ``joint_kl=False`` with ``target_kl`` and ``cg_damping`` multiplied
        by the number of action dimensions. No difference for Discrete, MultiDiscrete (whose per-dimension KLs
        SB3 and sb3-contrib already sum) and one-dimensional Box actions.
    :param damped_step_size: which quadratic model of the KL sizes the full step ``beta * s`` before the line search.
        ``True`` (default, as sb3-contrib TRPO and OpenAI Baselines): ``0.5 * beta^2 * s^T (F + cg_damping * I) s =
        target_kl``. ``False``: ``0.5 * beta^2 * s^T F s = target_kl``, the KL's own quadratic model, so that a large
        ``cg_damping`` regularizes the direction (toward the plain gradient) without shrinking the step below the
        trust region. With ``cg_sub_sampling_factor > 1``, ``s^T F s`` is measured on the sub-sample, and may
        underestimate the KL on the whole batch (the line search then shrinks the step). See docs/trpo_plus.md
        ("Damping against overfitting").
    :param critic_kl_fraction: with a features extractor shared by actor and critic (SB3's default,
        ``share_features_extractor=True``), the part of ``target_kl`` that the critic may use to train the shared
        extractor. ``0`` (default, as sb3-contrib TRPO): the critic trains only its own layers, after the policy step.
        In ``(0, 1)``: the critic trains first, the shared extractor included (as PPO's value loss does), and its
        change of the extractor is halved until ``KL(rollout's policy || policy after the critic) <=
        critic_kl_fraction * target_kl`` (undone if 10 halvings do not get there); the trust-region step then uses
        the rest: its full step is sized for ``target_kl`` minus that KL, and its line search bounds the KL from the
        rollout's policy by ``target_kl``. Needs an ``ActorCriticPolicy`` with a shared features extractor.
    :param actor_trains_features: whether the trust-region step moves the shared features extractor too (default,
        as sb3-contrib TRPO), or only the actor's own layers (``False``, with ``critic_kl_fraction > 0``): the
        extractor is then trained by the critic alone (within its part of the trust region), and the step is a
        natural-gradient step of the actor's head on the critic's features, which are computed once per update.
    :param actor_refit_steps: with ``critic_kl_fraction > 0``, Gauss-Newton steps that re-fit the actor's own layers
        (its MLP and action head, not the shared extractor) to the rollout's policy on the features the critic's
        change of the extractor produced, before that change's KL is checked against the critic's part of the trust
        region: the critic may then keep more of its training of the extractor, the policy staying close to the
        rollout's (as the policy cloning of Phasic Policy Gradient, https://arxiv.org/abs/2009.04416). Each step
        solves ``(F + cg_damping * I) d = grad KL`` by conjugate gradient (``cg_max_steps``) with the Fisher of the
        actor's own layers on the whole batch, and is halved until the KL decreases (dropped if it does not).
        ``0`` (default): no re-fit.
    :param critic_policy_coef: with ``critic_kl_fraction > 0``, the weight of the policy's objective (the
        trust-region step's own, ``mean(ratio * advantage) + ent_coef * mean(entropy)``) in the critic's minibatch
        loss: the critic's Adam steps then train the shared extractor on ``value_loss - critic_policy_coef *
        objective``, as PPO's combined loss trains its shared CNN, the actor's own layers left to the trust-region
        step. Its change of the extractor stays within the critic's part of the trust region (``critic_kl_fraction``,
        halved as without it). ``0`` (default): the critic trains the extractor on the value loss alone.
    :param critic_policy_clip_range: with ``critic_policy_coef > 0``, clip that objective as PPO clips its surrogate
        (https://arxiv.org/abs/1707.06347): ``mean(min(ratio * advantage, clip(ratio, 1 - critic_policy_clip_range,
        1 + critic_policy_clip_range) * advantage))``, so that a sample stops pushing the extractor once its ratio has
        moved past the clip range in the advantage's direction, while a move the other way (the value loss's drift
        included) is still pulled back. ``None`` (default): the objective unclipped.
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }

    # Settings that callbacks and users may change during training: checked on every assignment
    target_kl = _CheckedSetting()
    cg_damping = _CheckedSetting()
    #: The trust region the model was built with, toward which ``AdaptiveTrustRegionCallback`` recovers
    initial_target_kl = _CheckedSetting(default_from="target_kl")
    initial_cg_damping = _CheckedSetting(default_from="cg_damping")
    ent_coef_decay = _CheckedSetting()
    min_ent_coef = _CheckedSetting()

    @_pointing_to_new_names
    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 1e-3,
        n_steps: int = 2048,
        batch_size: int = 128,
        gamma: float = 0.99,
        cg_max_steps: int = 15,
        cg_damping: float = 0.1,
        line_search_shrinking_factor: float = 0.8,
        line_search_max_iter: int = 10,
        n_critic_updates: int = 10,
        gae_lambda: float = 0.95,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        normalize_advantage: bool = True,
        target_kl: float = 0.01,
        sub_sampling_factor: int = 1,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        ent_coef: float | Schedule = 0.0,
        ent_coef_decay: float = 1.0,
        min_ent_coef: float = 0.0,
        cg_sub_sampling_factor: int = 1,
        joint_kl: bool = False,
        damped_step_size: bool = True,
        critic_kl_fraction: float = 0.0,
        actor_trains_features: bool = True,
        actor_refit_steps: int = 0,
        critic_policy_coef: float = 0.0,
        critic_policy_clip_range: float | None = None,
        _init_setup_model: bool = True,
    ):
        # Every argument is checked before anything (the environment included) is built
        _check_arguments(
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=gae_lambda,
            learning_rate=learning_rate,
            batch_size=batch_size,
            cg_max_steps=cg_max_steps,
            cg_damping=cg_damping,
            cg_sub_sampling_factor=cg_sub_sampling_factor,
            line_search_shrinking_factor=line_search_shrinking_factor,
            line_search_max_iter=line_search_max_iter,
            n_critic_updates=n_critic_updates,
            ent_coef=ent_coef,
            ent_coef_decay=ent_coef_decay,
            min_ent_coef=min_ent_coef,
            target_kl=target_kl,
            sub_sampling_factor=sub_sampling_factor,
            stats_window_size=stats_window_size,
            joint_kl=joint_kl,
            damped_step_size=damped_step_size,
            critic_kl_fraction=critic_kl_fraction,
            actor_trains_features=actor_trains_features,
            actor_refit_steps=actor_refit_steps,
            critic_policy_coef=critic_policy_coef,
            critic_policy_clip_range=critic_policy_clip_range,
        )
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=0.0,  # the entropy bonus is handled by TRPOPlus itself (see `ent_coef` below)
            vf_coef=0.0,  # value function is optimized separately
            max_grad_norm=0.0,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            device=device,
            seed=seed,
            _init_setup_model=False,
            supported_action_spaces=None,  # checked below, with a ValueError instead of an assert
        )

        if self.env is not None:
            if not isinstance(self.action_space, SUPPORTED_ACTION_SPACES):
                raise ValueError(
                    f"TRPOPlus does not support the action space {self.action_space} (env): "
                    f"allowed are {', '.join(space.__name__ for space in SUPPORTED_ACTION_SPACES)}"
                )
            _check_policy_batch(normalize_advantage, self.n_steps, self.env.num_envs, sub_sampling_factor)
            buffer_size = self.env.num_envs * self.n_steps
            if buffer_size % batch_size > 0:
                warnings.warn(
                    f"You have specified a mini-batch size of {batch_size},"
                    f" but because the `RolloutBuffer` is of size `n_steps * n_envs = {buffer_size}`,"
                    f" after every {buffer_size // batch_size} untruncated mini-batches,"
                    f" there will be a truncated mini-batch of size {buffer_size % batch_size}\n"
                    f"We recommend using a `batch_size` that is a factor of `n_steps * n_envs`.\n"
                    f"Info: (n_steps={self.n_steps} and n_envs={self.env.num_envs})"
                )

        self.normalize_advantage = normalize_advantage
        self.batch_size = batch_size
        # Conjugate gradients parameters
        self.cg_max_steps = cg_max_steps
        self.cg_damping = cg_damping
        self.cg_sub_sampling_factor = cg_sub_sampling_factor
        # Backtracking line search parameters
        self.line_search_shrinking_factor = line_search_shrinking_factor
        self.line_search_max_iter = line_search_max_iter
        self.target_kl = target_kl
        self.n_critic_updates = n_critic_updates
        self.sub_sampling_factor = sub_sampling_factor
        self.joint_kl = bool(joint_kl)
        self.damped_step_size = bool(damped_step_size)
        self.critic_kl_fraction = float(critic_kl_fraction)
        self.actor_trains_features = bool(actor_trains_features)
        self.actor_refit_steps = int(actor_refit_steps)
        self.critic_policy_coef = float(critic_policy_coef)
        self.critic_policy_clip_range = None if critic_policy_clip_range is None else float(critic_policy_clip_range)
        # Entropy bonus: `ent_coef` keeps what the user gave (float or schedule), like `learning_rate`
        self.ent_coef = ent_coef
        self.ent_coef_decay = ent_coef_decay
        self.min_ent_coef = min_ent_coef
        # Trust-region state that callbacks may adapt; all of it is saved with the model. (`target_kl`,
        # `cg_damping`, the entropy settings and the initial values are properties that check what they are given;
        # the initial values are set by `_setup_model`.)
        self._current_ent_coef = float(FloatSchedule(ent_coef)(1.0))
        # Updates skipped because the rollout held NaN or inf: in all, and in a row; whether the latest rollout met
        # non-finite observations (the policy acted on them as 0)
        self._n_non_finite_rollouts = 0
        self._n_non_finite_rollouts_in_a_row = 0
        self._rollout_met_non_finite_obs = False
        self.last_update: UpdateDiagnostics | None = None
        self._line_search_window: deque[tuple[bool, float]] = deque(maxlen=stats_window_size)
        self._line_search_warned = False

        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        self._check_loaded_state()
        super()._setup_model()
        self.ent_coef_schedule = FloatSchedule(self.ent_coef)
        if any(isinstance(module, nn.Conv2d) for module in self.policy.modules()):
            # channels_last halves the cost of the convolutions' backward pass on CPU (one per Fisher-vector
            # product): measured 0.28 s -> 0.14 s for NatureCNN on 512 frames, 1 thread
            self.policy = self.policy.to(memory_format=th.channels_last)  # type: ignore[call-overload]
        if self.critic_kl_fraction > 0 and not _is_standard_shared_actor_critic(self.policy):
            raise ValueError(
                f"critic_kl_fraction > 0 ({self.critic_kl_fraction}) needs an ActorCriticPolicy whose features extractor "
                "is shared by actor and critic (policy_kwargs share_features_extractor=True, SB3's default); "
                f"got {type(self.policy).__name__} with share_features_extractor="
                f"{getattr(self.policy, 'share_features_extractor', None)}"
            )
        if self.critic_kl_fraction > 0 and not list(self.policy.features_extractor.parameters()):
            raise ValueError(
                f"critic_kl_fraction > 0 ({self.critic_kl_fraction}) needs a shared features extractor with parameters "
                f"for the critic to train; {type(self.policy.features_extractor).__name__} has none (SB3's MlpPolicy "
                "only flattens the observation): use critic_kl_fraction=0, or give the policy a features extractor "
                "with parameters (policy_kwargs features_extractor_class, as CnnPolicy's NatureCNN)"
            )
        if not self.actor_trains_features and self.critic_kl_fraction == 0:
            raise ValueError(
                "actor_trains_features=False needs critic_kl_fraction > 0 (the critic then trains the shared features "
                "extractor); with critic_kl_fraction=0 nothing would train it"
            )
        if self.actor_refit_steps > 0 and self.critic_kl_fraction == 0:
            raise ValueError(
                f"actor_refit_steps > 0 ({self.actor_refit_steps}) needs critic_kl_fraction > 0: the actor's layers are "
                "re-fitted after the critic's change of the shared features extractor, which only critic_kl_fraction > 0 "
                "makes"
            )

    def _check_loaded_state(self) -> None:
        """
        Check what SB3's ``load`` wrote straight into ``__dict__`` (past the setters) before anything uses it: every
        argument of the constructor, as the constructor checks it.

        ``load`` builds the model with default arguments, then ``__dict__.update``s the saved data: a checkpoint of
        sb3-contrib TRPO (or of an older TRPOPlus) holds ``target_kl``, ``cg_damping``, ... as plain attributes, which
        the checked settings would hide; they go through the setters here, and so do the values a TRPOPlus checkpoint
        stores. The initial trust region is the checkpoint's own: the saved one, or for a checkpoint that has none
        (sb3-contrib TRPO never adapts its trust region), its ``target_kl`` and ``cg_damping``.
        """
        for name in TRAINING_SETTINGS:
            if name in self.__dict__:
                setattr(self, name, self.__dict__.pop(name))
            elif f"_{name}" in self.__dict__:
                setattr(self, name, self.__dict__[f"_{name}"])
        self._check_model_arguments()
        if "_initial_target_kl" not in self.__dict__:
            self.initial_target_kl = self.target_kl
        if "_initial_cg_damping" not in self.__dict__:
            self.initial_cg_damping = self.cg_damping

    @property  # type: ignore[override]
    def ent_coef(self) -> float | Schedule:
        """The entropy coefficient as given (a float, or a schedule of the progress remaining); checked on assignment."""
        return self._ent_coef

    @ent_coef.setter
    def ent_coef(self, value: float | Schedule) -> None:
        _check_setting("ent_coef", value)
        self._ent_coef = value
        self.ent_coef_schedule = FloatSchedule(value)

    @property
    def current_ent_coef(self) -> float:
        """The entropy coefficient used by the latest update (the initial one before the first update)."""
        return self._current_ent_coef

    def _next_ent_coef(self) -> float:
        """
        The entropy coefficient of the next update, the one place it is computed: ``ent_coef`` (its schedule at the
        current progress) times ``ent_coef_decay ** n_updates``, floored at ``min_ent_coef`` (NaN stays NaN, so that
        the update refuses it).
        """
        return decayed_ent_coef(
            self.ent_coef_schedule(self._current_progress_remaining), self.ent_coef_decay, self.min_ent_coef, self._n_updates
        )

    def set_trust_region(self, target_kl: float, cg_damping: float) -> None:
        """
        Set the trust region of the next updates: both values, or neither (a ``ValueError`` naming the first unusable
        one is raised before anything is written). The way callbacks adapt it (``AdaptiveTrustRegionCallback``).

        :param target_kl: the new radius, a finite number > 0
        :param cg_damping: the new damping, a finite number >= 0
        """
        _check_setting("target_kl", target_kl)
        _check_setting("cg_damping", cg_damping)
        self.target_kl, self.cg_damping = target_kl, cg_damping

    @classmethod
    def load(
        cls: type[SelfTRPOPlus],
        path: str | pathlib.Path | io.BufferedIOBase,
        env: GymEnv | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> SelfTRPOPlus:
        """
        Load the model from a zip-file (SB3's ``load``, whose arguments it takes).

        Only load files you trust: SB3's format runs pickled code when it is read. The training settings among
        ``kwargs`` (``target_kl``, ``cg_damping``, ``ent_coef``, ``ent_coef_decay``, ``min_ent_coef``, and the initial
        values) are checked before the file is read and set through their setters, after the saved ones, so that the
        saved initial trust region stays the checkpoint's own. Then every argument of the loaded model, the saved
        ones and those of ``kwargs``, is checked as the constructor checks it (the same ``ValueError``).
        """
        _check_renamed_arguments(kwargs)
        settings = {name: kwargs.pop(name) for name in TRAINING_SETTINGS if name in kwargs}
        for name, value in settings.items():
            _check_setting(name, value)
        model = super().load(
            path,
            env=env,
            device=device,
            custom_objects=custom_objects,
            print_system_info=print_system_info,
            force_reset=force_reset,
            **kwargs,
        )
        for name, value in settings.items():
            setattr(model, name, value)
        model._check_model_arguments()  # (again, with the settings of kwargs)
        return model

    def _check_model_arguments(self) -> None:
        """Check the model's values of the constructor's arguments as the constructor does (the same ``ValueError``)."""
        # (SB3 keeps stats_window_size as _stats_window_size; load(path, stats_window_size=...) writes the public name)
        names = [name for name in inspect.signature(_check_arguments).parameters if name != "stats_window_size"]
        stats_window_size = self.__dict__.get("stats_window_size", self._stats_window_size)
        _check_arguments(**{name: getattr(self, name) for name in names}, stats_window_size=stats_window_size)
        if self.env is not None:
            _check_policy_batch(self.normalize_advantage, self.n_steps, self.env.num_envs, self.sub_sampling_factor)

    def set_parameters(
        self,
        load_path_or_dict: str | TensorDict,
        exact_match: bool = True,
        device: th.device | str = "auto",
    ) -> None:
        """
        SB3's ``set_parameters``, refusing (``ValueError``, parameters left as they were) parameters, buffers or
        optimizer state holding NaN or inf.
        """
        previous = copy.deepcopy(self.get_parameters())
        super().set_parameters(load_path_or_dict, exact_match=exact_match, device=device)
        non_finite = _non_finite_entries(self.get_parameters())
        if non_finite:
            super().set_parameters(previous, exact_match=True, device=device)  # type: ignore[arg-type]
            raise ValueError(
                f"set_parameters: non-finite values (NaN or inf) in {', '.join(non_finite[:5])}"
                f"{', ...' if len(non_finite) > 5 else ''}; the parameters were left unchanged"
            )

    def collect_rollouts(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int
    ) -> bool:
        # The policy acts on NaN and inf observations as 0; `train` skips the update of a rollout that met some
        finite_env = _FiniteObservations(env)
        if self._last_obs is not None:
            self._last_obs = finite_env.finite(self._last_obs)  # type: ignore[assignment]
        collected = super().collect_rollouts(finite_env, callback, rollout_buffer, n_rollout_steps)
        self._rollout_met_non_finite_obs = finite_env.met_non_finite
        return collected

    def _policy_batch(
        self, rollout_data: RolloutBufferSamples | DictRolloutBufferSamples, sub_sampling_factor: int | None = None
    ) -> _PolicyBatch:
        """
        The whole rollout (or a random sub-sample of it, ``sub_sampling_factor``, by default the algorithm's) as
        observations, actions, old log-probs and advantages.
        """
        factor = self.sub_sampling_factor if sub_sampling_factor is None else sub_sampling_factor
        index = _sub_sample(rollout_data.advantages.shape[0], factor, self.device)
        actions = rollout_data.actions[index]
        if isinstance(self.action_space, spaces.Discrete):
            # Convert discrete action from float to long
            actions = actions.long().flatten()
        advantages = rollout_data.advantages[index]
        if self.normalize_advantage:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        return _PolicyBatch(
            _index_obs(rollout_data.observations, index), actions, rollout_data.old_log_prob[index], advantages
        )

    def _entropy(self, distribution: Distribution, log_prob: th.Tensor) -> th.Tensor:
        entropy = distribution.entropy()
        if entropy is None:
            # No analytical form (e.g. squashed Gaussian): single-sample estimate, as in PPO
            return -log_prob.mean()
        return entropy.mean()

    def _objective(
        self, distribution: Distribution, batch: _PolicyBatch, ent_coef: float, clip_range: float | None = None
    ) -> tuple[th.Tensor, th.Tensor]:
        """
        The objective ``L = mean(ratio * advantage) + ent_coef * mean(entropy)`` and the mean entropy; with
        ``clip_range``, PPO's clipped surrogate ``mean(min(ratio * advantage, clip(ratio, 1 - clip_range, 1 +
        clip_range) * advantage))`` in place of ``mean(ratio * advantage)``.
        """
        log_prob = distribution.log_prob(batch.actions)
        # ratio between old and new policy, should be one at the first iteration
        ratio = th.exp(log_prob - batch.old_log_prob)
        surrogate = batch.advantages * ratio
        if clip_range is not None:
            surrogate = th.min(surrogate, batch.advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range))
        entropy = self._entropy(distribution, log_prob)
        return surrogate.mean() + ent_coef * entropy, entropy

    def _distribution(self, batch: _PolicyBatch) -> Distribution:
        """
        The policy's distribution on the batch. For SB3's actor-critic policies with a shared features extractor, the
        shared features of the whole rollout are kept on ``batch.features`` (the critic update reuses them instead of
        running the extractor again).
        """
        policy = self.policy
        if batch.actor_features is not None:
            return self._head_distribution(batch.actor_features)
        if _is_standard_shared_actor_critic(policy):
            # Same computation as ActorCriticPolicy.get_distribution, keeping the features
            features = policy.extract_features(batch.obs)
            if self.sub_sampling_factor == 1:
                batch.features = features.detach()  # type: ignore[union-attr]
            return self._head_distribution(features)  # type: ignore[arg-type]
        return policy.get_distribution(batch.obs)

    def _head_distribution(self, features: th.Tensor) -> Distribution:
        """The distribution of SB3's actor-critic policy from the features of its (shared) extractor."""
        policy: ActorCriticPolicy = self.policy  # type: ignore[assignment]
        return policy._get_action_dist_from_latent(policy.mlp_extractor.forward_actor(features))

    def _jvp_fn(self, obs: PyTorchObs, actor_params: list[nn.Parameter], features: th.Tensor | None = None) -> JvpFn:
        # Hand-written tangent rules for SB3's standard actor-critic policies, torch.func for anything else
        return actor_critic_jvp(self.policy, obs, actor_params, features) or functional_jvp(self.policy, obs, actor_params)

    def _fisher_vector_product(
        self, batch: _PolicyBatch, distribution: Distribution, actor_params: list[nn.Parameter], cg_damping: float
    ) -> FisherVectorProduct:
        """``v -> (F + cg_damping * I) v`` on the batch, or on a sub-sample of it (``cg_sub_sampling_factor``)."""
        obs, features = batch.obs, batch.actor_features
        if self.cg_sub_sampling_factor > 1:
            index = _sub_sample(batch.actions.shape[0], self.cg_sub_sampling_factor, self.device)
            obs = _index_obs(obs, index)
            if features is None:
                distribution = self.policy.get_distribution(obs)
            else:
                features = features[index]
                distribution = self._head_distribution(features)
        # (F is the Hessian of the KL that the line search bounds: joint, or averaged over action dimensions)
        return FisherVectorProduct(
            distribution,
            actor_params,
            self._jvp_fn(obs, actor_params, features),
            cg_damping,
            scale=kl_scale(distribution, self.joint_kl),
        )

    def _update_policy(
        self,
        batch: _PolicyBatch,
        update: UpdateSettings,
        actor_params: list[nn.Parameter],
        reference: Distribution | None = None,
        kl_used: float = 0.0,
    ) -> UpdateDiagnostics:
        """
        One trust-region step on ``L(theta) = mean(ratio * advantage) + ent_coef * mean(entropy)``: gradient,
        natural-gradient direction (conjugate gradient with the Fisher-vector product), full step, backtracking line
        search on the same ``L``. Every stage that cannot go on ends the update with its failure reason.

        :param batch: the policy batch (``batch.features`` is set to the shared features at the final parameters when
            they are computed anyway)
        :param update: the settings of this update
        :param actor_params: the parameters the action distribution depends on
        :param reference: the distribution the KL is measured from (the policy at the start of the step if ``None``)
        :param kl_used: ``KL(reference || current policy)``, already spent: the full step is sized for the rest
        :return: the diagnostics
        """
        if not batch.is_finite():
            return update.record(failure_reason="non_finite_input")

        # 1. Gradient g of the surrogate objective (with the entropy bonus)
        distribution = self._distribution(batch)
        old_distribution = detach_distribution(distribution) if reference is None else reference
        objective, entropy = self._objective(distribution, batch, update.ent_coef)
        # (the graph is kept when the Fisher-vector products reuse it: no sub-sampling)
        gradient = flat_grad(objective, actor_params, retain_graph=self.cg_sub_sampling_factor == 1)
        old_objective, old_entropy = objective.item(), entropy.item()
        if not _is_finite(gradient):
            return update.record(failure_reason="non_finite_gradient", policy_objective=old_objective, entropy=old_entropy)

        # 2. Direction s = (F + damping * I)^-1 g, by conjugate gradient with the Fisher-vector product
        fisher_vector_product = self._fisher_vector_product(batch, distribution, actor_params, update.cg_damping)
        search_direction, damped_product = conjugate_gradient(fisher_vector_product, gradient, max_iter=self.cg_max_steps)
        if not _is_finite(search_direction):
            return update.record(failure_reason="non_finite_direction", policy_objective=old_objective, entropy=old_entropy)

        # 3. Full step: the largest step along s whose quadratic KL model 0.5 * beta^2 * s^T F s is target_kl
        # (s^T (F + damping * I) s unless damped_step_size is False), less the KL the critic already used.
        # s^T (F + damping * I) s comes with the solver's (F + damping * I) s; s^T F s takes one forward-mode product
        # (subtracting damping * s^T s from the damped form would lose its digits when the damping dominates)
        if self.damped_step_size:
            curvature = float(search_direction.dot(damped_product))
        else:
            curvature = fisher_vector_product.quadratic_form(search_direction, damped=False)
        if not (np.isfinite(curvature) and curvature > 0.0):
            return update.record(failure_reason="non_positive_curvature", policy_objective=old_objective, entropy=old_entropy)
        full_step = np.sqrt(2.0 * (update.target_kl - kl_used) / curvature) * search_direction
        if not _is_finite(full_step):
            return update.record(failure_reason="non_finite_direction", policy_objective=old_objective, entropy=old_entropy)
        # free the graphs before the line search
        del fisher_vector_product, distribution, objective, entropy

        # 4. Line search (backtracking) on the same objective L, under the KL constraint
        return self._line_search(
            batch, update, actor_params, old_distribution, full_step, policy_objective=old_objective, entropy=old_entropy
        )

    def _line_search(
        self,
        batch: _PolicyBatch,
        update: UpdateSettings,
        actor_params: list[nn.Parameter],
        old_distribution: Distribution,
        full_step: th.Tensor,
        policy_objective: float,
        entropy: float,
    ) -> UpdateDiagnostics:
        """
        Try ``theta + shrinking_factor^i * full_step`` for ``i = 0, 1, ...``; accept the first candidate that improves
        the objective and keeps ``KL(old || new) <= target_kl``. Without one, and on any exception or interruption, the
        actor's parameters are the old ones, exactly, never a trial point.

        :param policy_objective: the objective at the old parameters
        :param entropy: the mean entropy at the old parameters
        """
        original_params = flatten_params(actor_params)
        features_at_start = batch.features
        step_fraction = 1.0
        accepted = False
        try:
            with th.no_grad():
                for iteration in range(1, self.line_search_max_iter + 1):
                    assign_params(actor_params, original_params + step_fraction * full_step)
                    new_distribution = self._distribution(batch)
                    new_objective, _ = self._objective(new_distribution, batch, update.ent_coef)
                    kl = mean_kl(old_distribution, new_distribution, self.joint_kl)
                    new_objective_value, kl_value = new_objective.item(), kl.item()
                    # Acceptance: the objective improves and the step stays inside the trust region
                    if (
                        np.isfinite(new_objective_value)
                        and np.isfinite(kl_value)
                        and new_objective_value > policy_objective
                        and kl_value <= update.target_kl
                    ):
                        accepted = True
                        return update.record(
                            line_search_iters=iteration,
                            step_fraction=step_fraction,
                            kl=kl_value,
                            policy_objective=new_objective_value,
                            improvement=new_objective_value - policy_objective,
                            entropy=entropy,
                        )
                    step_fraction *= self.line_search_shrinking_factor
        finally:
            if not accepted:
                # the old parameters, exactly (and the features computed at them)
                assign_params(actor_params, original_params)
                batch.features = features_at_start
        return update.record(
            failure_reason="line_search_exhausted",
            line_search_iters=self.line_search_max_iter,
            policy_objective=policy_objective,
            entropy=entropy,
        )

    def _critic_value_fn(
        self, observations: PyTorchObs, features: th.Tensor | None = None, train_features: bool = False
    ) -> Callable[[th.Tensor], th.Tensor]:
        """
        A function from minibatch indices to value predictions, differentiable in the critic-only parameters (and in
        the features extractor with ``train_features``).

        With a features extractor shared with the actor (SB3's default), the critic may only train what the actor
        does not use (the critic's MLP and value head; sb3-contrib TRPO discards the shared gradients too), so the
        shared features are computed once, without gradient, instead of once per minibatch and epoch; unless
        ``train_features`` (``critic_kl_fraction > 0``).
        """
        policy = self.policy
        if _is_standard_shared_actor_critic(policy) and not train_features:
            if features is None:
                with th.no_grad():
                    features = policy.extract_features(observations)  # type: ignore[call-arg, assignment]

            def values_from_features(index: th.Tensor) -> th.Tensor:
                return policy.value_net(policy.mlp_extractor.forward_critic(features[index]))  # type: ignore[index]

            return values_from_features

        def values_from_observations(index: th.Tensor) -> th.Tensor:
            return policy.predict_values(_index_obs(observations, index))

        return values_from_observations

    def _update_critic(
        self,
        rollout_data: RolloutBufferSamples | DictRolloutBufferSamples,
        actor_params: set[nn.Parameter],
        features: th.Tensor | None = None,
        train_features: bool = False,
        policy_batch: _PolicyBatch | None = None,
        ent_coef: float = 0.0,
    ) -> list[float]:
        """
        ``n_critic_updates`` epochs of minibatch regression of the value function on the GAE returns.

        :param actor_params: the parameters the critic leaves alone (their gradients are discarded)
        :param features: the shared features of the rollout, when already computed at the current parameters
        :param train_features: run the features extractor in every minibatch, with gradient (it is then trained
            unless it is among ``actor_params``)
        :param policy_batch: with ``train_features``, the whole rollout as a policy batch, in the rollout's order: the
            minibatch loss is then ``value_loss - critic_policy_coef * objective``, the policy's objective (with
            ``ent_coef``, clipped with ``critic_policy_clip_range``) computed on the same minibatch's features
            (``critic_policy_coef > 0``)
        :param ent_coef: the entropy coefficient of that objective (this update's)
        """
        returns = rollout_data.returns
        values_of = self._critic_value_fn(rollout_data.observations, features, train_features)
        critic_params = [param for param in self.policy.parameters() if param not in actor_params]
        n_samples = returns.shape[0]
        value_losses = []
        for _ in range(self.n_critic_updates):
            permutation = th.randperm(n_samples, device=self.device)
            for start in range(0, n_samples, self.batch_size):
                index = permutation[start : start + self.batch_size]
                if policy_batch is None:
                    value_loss = F.mse_loss(returns[index], values_of(index).flatten())
                    loss = value_loss
                else:
                    # One pass of the extractor for both heads: the value loss and the policy's objective, as in
                    # PPO's combined loss (the actor's own layers get no gradient: they are among actor_params)
                    minibatch = policy_batch.minibatch(index)
                    minibatch_features = self.policy.extract_features(minibatch.obs)  # type: ignore[call-arg]
                    values = self.policy.value_net(self.policy.mlp_extractor.forward_critic(minibatch_features))  # type: ignore[union-attr, operator]
                    value_loss = F.mse_loss(returns[index], values.flatten())
                    objective, _ = self._objective(
                        self._head_distribution(minibatch_features),  # type: ignore[arg-type]
                        minibatch,
                        ent_coef,
                        self.critic_policy_clip_range,
                    )
                    loss = value_loss - self.critic_policy_coef * objective
                if not th.isfinite(loss):
                    continue  # never let a non-finite loss reach the weights
                self.policy.optimizer.zero_grad()
                loss.backward()
                # Removing gradients of parameters shared with the actor
                # otherwise it defeats the purposes of the KL constraint
                for param in actor_params:
                    param.grad = None
                if not all(_is_finite(param.grad) for param in critic_params if param.grad is not None):
                    continue
                self.policy.optimizer.step()
                value_losses.append(value_loss.item())
        return value_losses

    def _update_critic_within_kl(
        self,
        rollout_data: RolloutBufferSamples | DictRolloutBufferSamples,
        batch: _PolicyBatch,
        actor_params: list[nn.Parameter],
        update: UpdateSettings,
    ) -> tuple[list[float], Distribution, float, float, th.Tensor]:
        """
        The critic first, training the features extractor it shares with the actor (``critic_kl_fraction > 0``),
        within its part of the trust region: its change of the extractor is halved until ``KL(rollout's policy ||
        policy) <= critic_kl_fraction * target_kl``, and undone if ``CRITIC_KL_HALVINGS`` halvings do not get there,
        or on any exception or interruption (the critic's own layers keep their training). With ``actor_refit_steps``,
        the actor's own layers are re-fitted to the rollout's policy on each candidate's features before its KL is
        checked (:meth:`_refit_actor`), and put back as they were when the change is undone.

        :return: the value losses; the rollout's policy on the batch (the KL of the update is measured from it); its
            KL to the policy after the critic; the share of the critic's change of the extractor that was kept; the
            shared features of the batch at the extractor the critic left
        """
        policy = self.policy
        with th.no_grad():
            features_at_start = policy.extract_features(batch.obs)
            rollout_policy = detach_distribution(self._head_distribution(features_at_start))  # type: ignore[arg-type]
        shared = list(policy.features_extractor.parameters())
        start = flatten_params(shared)
        # the actor's own layers, re-fitted to the rollout's policy on each candidate change (actor_refit_steps > 0)
        shared_set = set(shared)
        own = [param for param in actor_params if param not in shared_set] if self.actor_refit_steps > 0 else []
        own_start = flatten_params(own) if own else None
        budget = self.critic_kl_fraction * update.target_kl
        kept, critic_kl, features = 0.0, 0.0, features_at_start
        try:
            # (with critic_policy_coef, on the policy's objective too: the whole rollout, in the critic's order; the
            # policy batch is already that without sub_sampling_factor)
            policy_batch = None
            if self.critic_policy_coef > 0:
                policy_batch = (
                    batch if self.sub_sampling_factor == 1 else self._policy_batch(rollout_data, sub_sampling_factor=1)
                )
            value_losses = self._update_critic(
                rollout_data,
                set(actor_params) - set(shared),
                train_features=True,
                policy_batch=policy_batch,
                ent_coef=update.ent_coef,
            )
            change = flatten_params(shared) - start
            fraction = 1.0
            with th.no_grad():
                for _ in range(CRITIC_KL_HALVINGS + 1):
                    assign_params(shared, start + fraction * change)
                    new_features = policy.extract_features(batch.obs)
                    kl = mean_kl(rollout_policy, self._head_distribution(new_features), self.joint_kl).item()  # type: ignore[arg-type]
                    if own and np.isfinite(kl) and kl > 0.0:
                        self.logger.record("train/critic_kl_before_refit", kl)
                        assign_params(own, own_start)  # type: ignore[arg-type]
                        kl = self._refit_actor(batch, rollout_policy, new_features, own, update.cg_damping, kl)  # type: ignore[arg-type]
                    if np.isfinite(kl) and kl <= budget:
                        kept, critic_kl, features = fraction, kl, new_features
                        break
                    fraction *= 0.5
        finally:
            if kept == 0.0:
                # the extractor (and the actor's own layers) as the rollout's policy had them, exactly
                assign_params(shared, start)
                if own:
                    assign_params(own, own_start)  # type: ignore[arg-type]
        return value_losses, rollout_policy, critic_kl, kept, features  # type: ignore[return-value]

    def _refit_actor(
        self,
        batch: _PolicyBatch,
        reference: Distribution,
        features: th.Tensor,
        own_params: list[nn.Parameter],
        cg_damping: float,
        kl: float,
    ) -> float:
        """
        ``actor_refit_steps`` Gauss-Newton steps on ``KL(reference || policy)`` in the actor's own layers, on fixed
        features: ``d = (F + cg_damping * I)^-1 grad KL`` (conjugate gradient, F the Fisher of those layers on the
        batch; for a softmax policy F is the Hessian of this KL in the logits), each halved until the KL decreases and
        dropped if it does not within ``ACTOR_REFIT_HALVINGS`` halvings (the layers then stay where they were).

        :param kl: the KL at the current parameters
        :return: the KL after the re-fit
        """
        for _ in range(self.actor_refit_steps):
            with th.enable_grad():
                distribution = self._head_distribution(features)
                gradient = flat_grad(mean_kl(reference, distribution, self.joint_kl), own_params, retain_graph=True)
                if not _is_finite(gradient):
                    break
                fisher_vector_product = FisherVectorProduct(
                    distribution,
                    own_params,
                    self._jvp_fn(batch.obs, own_params, features),
                    cg_damping,
                    scale=kl_scale(distribution, self.joint_kl),
                )
                direction, _ = conjugate_gradient(fisher_vector_product, gradient, max_iter=self.cg_max_steps)
            del fisher_vector_product, distribution
            if not _is_finite(direction):
                break
            own_start = flatten_params(own_params)
            fraction, improved = 1.0, False
            for _ in range(ACTOR_REFIT_HALVINGS + 1):
                assign_params(own_params, own_start - fraction * direction)
                new_kl = mean_kl(reference, self._head_distribution(features), self.joint_kl).item()
                if np.isfinite(new_kl) and new_kl < kl:
                    kl, improved = new_kl, True
                    break
                fraction *= 0.5
            if not improved:
                assign_params(own_params, own_start)
                break
        return kl

    def _actor_params(self, observations: PyTorchObs | None = None) -> list[nn.Parameter]:
        """
        The parameters the action distribution depends on, in ``policy.parameters()`` order.

        Found through the autograd graph of one observation, not from parameter names, so that custom policies and
        ``share_features_extractor`` True or False are handled alike.

        :param observations: observations to run the policy on (the rollout buffer's when ``None``); only the first
            is used
        :return: the actor parameters
        """
        if observations is None:
            observations = next(self.rollout_buffer.get(batch_size=None)).observations
        obs = _index_obs(observations, slice(0, 1))
        if isinstance(obs, dict):
            obs = {key: th.nan_to_num(value) for key, value in obs.items()}
        else:
            obs = th.nan_to_num(obs)
        params = [param for param in self.policy.parameters() if param.requires_grad]
        # In evaluation mode, whatever the policy's mode: a batch of one is valid for BatchNorm there, no running
        # statistic moves, and the parameters the distribution depends on are the same in both modes
        with _eval_mode(self.policy):
            outputs = distribution_tensors(self.policy.get_distribution(obs))
        grads = th.autograd.grad(th.cat([output.reshape(-1) for output in outputs]).sum(), params, allow_unused=True)
        return [param for param, grad in zip(params, grads, strict=True) if grad is not None]

    def _record_line_search_health(self, diagnostics: UpdateDiagnostics) -> None:
        if diagnostics.skipped:
            # (no line search ran: bad data or an unusable setting is reported as such, not as a failed search)
            if not self._line_search_window:
                return
        else:
            self._line_search_window.append((diagnostics.line_search_success, diagnostics.step_fraction))
        success_rate = float(np.mean([success for success, _ in self._line_search_window]))
        step_fraction_mean = float(np.mean([fraction for _, fraction in self._line_search_window]))
        self.logger.record("train/line_search_success_rate", success_rate)
        self.logger.record("train/step_fraction_mean", step_fraction_mean)
        # Judge the health only once the window holds enough updates to mean something
        enough = len(self._line_search_window) >= min(10, self._line_search_window.maxlen or 10)
        in_trouble = enough and (
            success_rate < LINE_SEARCH_MIN_SUCCESS_RATE or step_fraction_mean < LINE_SEARCH_MIN_STEP_FRACTION
        )
        if in_trouble and not self._line_search_warned:
            warnings.warn(
                f"TRPOPlus line search unhealthy over the last {len(self._line_search_window)} updates: "
                f"success rate {success_rate:.0%}, mean step fraction {step_fraction_mean:.3f}. "
                "The policy is barely changing. What usually helps: a smaller target_kl or a larger cg_damping "
                "(or sb3_trpo_plus.callbacks.AdaptiveTrustRegionCallback, which adapts both), more line-search "
                "iterations, or a lower ent_coef.",
                RuntimeWarning,
            )
        self._line_search_warned = in_trouble
        self.logger.record("train/line_search_warning", float(in_trouble))

    def train(self) -> None:
        """
        Update policy using the currently gathered rollout buffer.
        """
        # Switch to train mode (this affects batch norm / dropout)
        self.policy.set_training_mode(True)
        # Update optimizer learning rate (critic)
        self._update_learning_rate(self.policy.optimizer)
        # Entropy coefficient of this update: schedule(progress) * decay ** n_updates, floored
        ent_coef = self._next_ent_coef()
        # Nothing computed from an unusable setting or from non-finite data may reach the weights: such an update is
        # refused as a whole (actor and critic) and reported as what it is, never as a failed line search
        refusal = self._invalid_setting(ent_coef) or self._non_finite_rollout()
        if refusal is not None:
            self._refuse_update(*refusal, update=self._update_settings(ent_coef))
            return
        self._current_ent_coef = ent_coef
        self._n_non_finite_rollouts_in_a_row = 0
        # What this update uses of the settings callbacks may change (read once, reported as used)
        update = self._update_settings(ent_coef)

        # The whole rollout, in one batch (in the buffer's order; images in channels_last, as the convolution weights)
        # (its images scaled once, in place where the batch is a copy of the buffer's arrays)
        rollout_data = whole_rollout(self.rollout_buffer)
        in_place = owns_copies(self.rollout_buffer)
        with _images_normalized_once(self.policy, rollout_data.observations, in_place) as observations:
            rollout_data = rollout_data._replace(observations=observations)  # type: ignore[arg-type]  # (dict: Dict buffer)
            actor_params = self._actor_params(rollout_data.observations)
            batch = self._policy_batch(rollout_data)
            if self.critic_kl_fraction > 0:
                # Critic first, training the shared features within its part of the trust region; then one
                # trust-region step for the rest, its KL measured from the rollout's policy
                value_losses, rollout_policy, critic_kl, kept, features = self._update_critic_within_kl(
                    rollout_data, batch, actor_params, update
                )
                self.logger.record("train/critic_kl", critic_kl)
                self.logger.record("train/critic_features_kept", kept)
                step_params = actor_params
                if not self.actor_trains_features:
                    # The step moves the actor's own layers only, on the features the critic left (computed once)
                    shared = set(self.policy.features_extractor.parameters())
                    step_params = [param for param in actor_params if param not in shared]
                    batch.actor_features = features
                diagnostics = self._update_policy(batch, update, step_params, reference=rollout_policy, kl_used=critic_kl)
                if not diagnostics.line_search_success:
                    # the step failed, but the critic's kept change of the shared extractor moved the policy
                    diagnostics = replace(diagnostics, update_kl=critic_kl)
            else:
                # Actor: one trust-region step
                diagnostics = self._update_policy(batch, update, actor_params)
                # Critic: regression on the GAE returns, never touching what the actor uses (reusing the actor's
                # shared features of the rollout when the update computed them at the final parameters)
                value_losses = self._update_critic(rollout_data, set(actor_params), batch.features)

        self._n_updates += 1
        self.last_update = diagnostics
        self._log_update(diagnostics, value_losses)

    def _invalid_setting(self, ent_coef: float) -> tuple[str, str] | None:
        """
        The failure reason and a message when a value the update would use is unusable (it got past the setters,
        e.g. through ``ent_coef_schedule``, a learning-rate schedule or a private attribute), else ``None``.

        :param ent_coef: the entropy coefficient of this update (schedule, decay and floor applied)
        """
        for name, value in (("target_kl", self.target_kl), ("cg_damping", self.cg_damping), ("ent_coef", ent_coef)):
            try:
                _check_setting(name, value)
            except ValueError as error:
                return f"invalid_{name}", f"{error} (the value this update would use)"
        learning_rate = self.lr_schedule(self._current_progress_remaining)
        if not (_is_finite_real(learning_rate) and learning_rate >= 0):
            return "invalid_learning_rate", f"learning_rate must be a finite number >= 0, got {learning_rate!r} (its schedule)"
        return None

    def _non_finite_rollout(self) -> tuple[str, str] | None:
        """The failure reason and a message when the rollout holds NaN or inf, else ``None``."""
        buffer = self.rollout_buffer
        observations = buffer.observations
        parts: dict[str, list[Any]] = {
            "observations": list(observations.values()) if isinstance(observations, dict) else [observations],
            "rewards": [buffer.rewards],
            "returns and advantages": [buffer.returns, buffer.advantages],
            "value predictions": [buffer.values],
            "log-probabilities": [buffer.log_probs],
        }
        non_finite = [
            name
            for name, arrays in parts.items()
            if (name == "observations" and self._rollout_met_non_finite_obs)
            or any(np.issubdtype(array.dtype, np.floating) and not _is_finite_array(array) for array in arrays)
        ]
        if not non_finite:
            return None
        return "non_finite_input", (
            f"the rollout holds NaN or inf in its {', '.join(non_finite)}. This is bad data, not a line-search "
            "failure: neither the policy nor the critic was updated, and the trust region was left as it is. Likely "
            "cause: the environment (or a wrapper such as VecNormalize) returned a NaN or inf observation or reward; "
            "a gamma or gae_lambda that is not finite gives non-finite returns too. To stop at the step that produces "
            "them, wrap the environment in stable_baselines3.common.vec_env.VecCheckNan(env, raise_exception=True)."
        )

    def _update_settings(self, ent_coef: float) -> UpdateSettings:
        """The settings of the next update, with its number."""
        return UpdateSettings(self._n_updates + 1, ent_coef, self.target_kl, self.cg_damping)

    def _refuse_update(self, reason: str, message: str, update: UpdateSettings) -> None:
        """
        Count and report an update that does not run (bad data or an unusable setting); no weight changes. Stop the run
        once non-finite data has left it nothing to train on (:meth:`_stop_if_untrainable`).

        :param reason: the failure reason of the diagnostics
        :param message: what is wrong, for the warning
        :param update: the settings this update would have used
        """
        if reason == "non_finite_input":
            self._n_non_finite_rollouts += 1
            self._n_non_finite_rollouts_in_a_row += 1
        warnings.warn(f"TRPOPlus skipped update {update.n_updates}: {message}", RuntimeWarning)
        self._n_updates += 1
        self.last_update = update.record(failure_reason=reason)
        self._log_update(self.last_update, [])
        if reason == "non_finite_input":
            self._stop_if_untrainable()

    def _stop_if_untrainable(self) -> None:
        """
        Raise a ``RuntimeError`` once non-finite data has left the run nothing to train on: the running statistics of
        the environment's ``VecNormalize`` hold NaN or inf (everything it normalizes is then non-finite for good), or
        ``MAX_NON_FINITE_ROLLOUTS_IN_A_ROW`` rollouts in a row held NaN or inf.
        """
        statistics = _non_finite_statistics(self.get_vec_normalize_env())
        if statistics:
            cause = (
                f"the running statistics of the environment's VecNormalize ({', '.join(statistics)}) hold NaN or inf, "
                "so every rollout from now on will too"
            )
        elif self._n_non_finite_rollouts_in_a_row >= MAX_NON_FINITE_ROLLOUTS_IN_A_ROW:
            cause = f"the last {self._n_non_finite_rollouts_in_a_row} rollouts held NaN or inf (their updates were skipped)"
        else:
            return
        raise RuntimeError(
            f"TRPOPlus cannot train: {cause}. Likely cause: the environment returned a NaN or inf observation or reward "
            "(one is enough to poison VecNormalize's statistics for good). To stop at the step that produces it, wrap the "
            "environment in stable_baselines3.common.vec_env.VecCheckNan(env, raise_exception=True), below any "
            "VecNormalize."
        )

    def _log_update(self, diagnostics: UpdateDiagnostics, value_losses: list[float]) -> None:
        with np.errstate(invalid="ignore"):  # (NaN, quietly, for a rollout with inf in it)
            explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())

        # Logs (the sb3-contrib TRPO keys first)
        self.logger.record("train/policy_objective", diagnostics.policy_objective)
        self.logger.record("train/value_loss", np.mean(value_losses) if value_losses else float("nan"))
        self.logger.record("train/kl_divergence_loss", diagnostics.kl)
        self.logger.record("train/update_kl", diagnostics.update_kl)
        self.logger.record("train/explained_variance", explained_var)
        self.logger.record("train/is_line_search_success", float(diagnostics.line_search_success))
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/entropy", diagnostics.entropy)
        self.logger.record("train/ent_coef", diagnostics.ent_coef)
        self.logger.record("train/line_search_iters", diagnostics.line_search_iters)
        self.logger.record("train/step_fraction", diagnostics.step_fraction)
        self.logger.record("train/target_kl", diagnostics.target_kl)
        self.logger.record("train/cg_damping", diagnostics.cg_damping)
        self.logger.record("train/non_finite_rollouts", self._n_non_finite_rollouts)
        self._record_line_search_health(diagnostics)

    def learn(
        self: SelfTRPOPlus,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "TRPOPlus",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfTRPOPlus:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )


def decayed_ent_coef(ent_coef: float, ent_coef_decay: float, min_ent_coef: float, n_updates: int) -> float:
    """
    Entropy coefficient after ``n_updates`` updates: ``max(min_ent_coef, ent_coef * ent_coef_decay ** n_updates)``.

    A NaN in any input gives NaN (``max`` alone would hide it behind the floor), so that the update refuses it.

    :param ent_coef: the (scheduled) coefficient before decay
    :param ent_coef_decay: factor multiplied in after every update
    :param min_ent_coef: the floor
    :param n_updates: updates done so far
    :return: the coefficient for the next update
    """
    decayed = float(ent_coef) * ent_coef_decay**n_updates
    if math.isnan(decayed) or math.isnan(min_ent_coef):
        return math.nan
    return max(min_ent_coef, decayed)


def _is_finite_real(value: Any) -> bool:
    """Whether ``value`` is a finite real number (a ``bool`` is not one)."""
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
        and bool(np.isfinite(value))
    )


def _initial_value(value: Any) -> Any:
    """The value of a schedule at the start of training (progress remaining 1), or the value itself."""
    return value(1.0) if callable(value) else value


#: Settings of the update that callbacks and users may change during training (``model.target_kl = ...``,
#: ``TRPOPlus.load(path, target_kl=...)``): each is checked by its setter, at construction and when loading.
#: name -> (rule on a finite real number, what is allowed)
TRAINING_SETTINGS: dict[str, tuple[Callable[[float], bool], str]] = {
    "target_kl": (lambda value: value > 0, "a finite number > 0"),
    "cg_damping": (lambda value: value >= 0, "a finite number >= 0"),
    "initial_target_kl": (lambda value: value > 0, "a finite number > 0"),
    "initial_cg_damping": (lambda value: value >= 0, "a finite number >= 0"),
    "ent_coef": (lambda value: value >= 0, "a finite number >= 0, or a schedule whose value at progress 1 is one"),
    "ent_coef_decay": (lambda value: 0 < value <= 1, "a finite number in (0, 1] (1 disables the decay)"),
    "min_ent_coef": (lambda value: value >= 0, "a finite number >= 0"),
}


def _check_setting(name: str, value: Any) -> None:
    """
    Raise a ``ValueError`` naming the setting and what it allows when ``value`` is not allowed.

    :param name: a key of :data:`TRAINING_SETTINGS`
    :param value: the value to check (a float, or for ``ent_coef`` also a schedule)
    """
    rule, allowed = TRAINING_SETTINGS[name]
    checked = _initial_value(value) if name == "ent_coef" else value
    if not (_is_finite_real(checked) and rule(checked)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _check_rollout_arguments(*, n_steps: Any, gamma: Any, gae_lambda: Any, learning_rate: Any) -> None:
    """
    Raise a ``ValueError`` naming the first of SB3's on-policy arguments outside its allowed range (checked before
    the environment is built, and again when a model is loaded).
    """
    if isinstance(n_steps, (bool, np.bool_)) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1, got {n_steps!r}")
    for name, value in (("gamma", gamma), ("gae_lambda", gae_lambda)):
        if not (_is_finite_real(value) and 0 <= value <= 1):
            raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")
    initial_learning_rate = _initial_value(learning_rate)
    if not (_is_finite_real(initial_learning_rate) and initial_learning_rate >= 0):
        raise ValueError(
            "learning_rate must be a finite number >= 0, or a schedule whose value at progress 1 is one, "
            f"got {learning_rate!r}"
        )


def _check_policy_batch(normalize_advantage: bool, n_steps: int, n_envs: int, sub_sampling_factor: int) -> None:
    """Raise a ``ValueError`` when advantage normalization would divide by the standard deviation of one sample."""
    policy_batch_size = -(-n_steps * n_envs // sub_sampling_factor)
    if normalize_advantage and policy_batch_size <= 1:
        raise ValueError(
            "normalize_advantage=True needs a policy batch of at least 2 samples, but "
            f"n_steps * n_envs / sub_sampling_factor = {n_steps} * {n_envs} / "
            f"{sub_sampling_factor} gives {policy_batch_size}: raise n_steps or set normalize_advantage=False"
        )


def _check_arguments(
    *,
    n_steps: int,
    gamma: float,
    gae_lambda: float,
    learning_rate: float | Schedule,
    batch_size: int,
    cg_max_steps: int,
    cg_damping: float,
    cg_sub_sampling_factor: int,
    line_search_shrinking_factor: float,
    line_search_max_iter: int,
    n_critic_updates: int,
    ent_coef: float | Schedule,
    ent_coef_decay: float,
    min_ent_coef: float,
    target_kl: float,
    sub_sampling_factor: int,
    stats_window_size: int,
    joint_kl: bool,
    damped_step_size: bool,
    critic_kl_fraction: float,
    actor_trains_features: bool,
    actor_refit_steps: int,
    critic_policy_coef: float,
    critic_policy_clip_range: float | None,
) -> None:
    """Raise a ``ValueError`` naming the first argument outside its allowed range."""
    _check_rollout_arguments(n_steps=n_steps, gamma=gamma, gae_lambda=gae_lambda, learning_rate=learning_rate)
    for name, value in (
        ("target_kl", target_kl),
        ("cg_damping", cg_damping),
        ("ent_coef", ent_coef),
        ("ent_coef_decay", ent_coef_decay),
        ("min_ent_coef", min_ent_coef),
    ):
        _check_setting(name, value)
    if not (_is_finite_real(line_search_shrinking_factor) and 0 < line_search_shrinking_factor < 1):
        raise ValueError(f"line_search_shrinking_factor must be in (0, 1), got {line_search_shrinking_factor!r}")
    for name, value, minimum in (
        ("line_search_max_iter", line_search_max_iter, 1),
        ("cg_max_steps", cg_max_steps, 1),
        ("cg_sub_sampling_factor", cg_sub_sampling_factor, 1),
        ("sub_sampling_factor", sub_sampling_factor, 1),
        ("batch_size", batch_size, 1),
        ("n_critic_updates", n_critic_updates, 0),
        ("stats_window_size", stats_window_size, 1),
        ("actor_refit_steps", actor_refit_steps, 0),
    ):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    initial_ent_coef = _initial_value(ent_coef)
    if min_ent_coef > initial_ent_coef:
        raise ValueError(f"min_ent_coef must be between 0 and the initial ent_coef ({initial_ent_coef}), got {min_ent_coef!r}")
    for name, value in (
        ("joint_kl", joint_kl),
        ("damped_step_size", damped_step_size),
        ("actor_trains_features", actor_trains_features),
    ):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {value!r}")
    if not (_is_finite_real(critic_kl_fraction) and 0 <= critic_kl_fraction < 1):
        raise ValueError(f"critic_kl_fraction must be a number in [0, 1), got {critic_kl_fraction!r}")
    if not (_is_finite_real(critic_policy_coef) and critic_policy_coef >= 0):
        raise ValueError(f"critic_policy_coef must be a finite number >= 0, got {critic_policy_coef!r}")
    if critic_policy_coef > 0 and critic_kl_fraction == 0:
        raise ValueError(
            f"critic_policy_coef > 0 ({critic_policy_coef}) needs critic_kl_fraction > 0: only then does the critic "
            "train the shared features extractor"
        )
    if critic_policy_clip_range is not None:
        if not (_is_finite_real(critic_policy_clip_range) and critic_policy_clip_range > 0):
            raise ValueError(f"critic_policy_clip_range must be None or a finite number > 0, got {critic_policy_clip_range!r}")
        if critic_policy_coef == 0:
            raise ValueError(
                f"critic_policy_clip_range ({critic_policy_clip_range}) needs critic_policy_coef > 0: it clips the "
                "policy's objective in the critic's loss, which is only there with critic_policy_coef > 0"
            )
