import copy
import inspect
import io
import math
import pathlib
import warnings
from collections import deque
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
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
from stable_baselines3.common.vec_env import VecEnv
from torch import nn
from torch.nn import functional as F

from sb3_trpo_plus import arguments, shared_features
from sb3_trpo_plus.diagnostics import UpdateDiagnostics, UpdateSettings, line_search_health
from sb3_trpo_plus.finite import FiniteObservations, is_finite, non_finite_entries, non_finite_rollout, stop_if_untrainable
from sb3_trpo_plus.fisher import (
    FisherVectorProduct,
    actor_parameters,
    assign_params,
    conjugate_gradient,
    detach_distribution,
    flat_grad,
    flatten_params,
    mean_kl,
    policy_fisher_vector_product,
)
from sb3_trpo_plus.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_trpo_plus.rollout import PolicyBatch, images_normalized_once, index_obs, owns_copies, sub_sample, whole_rollout

SelfTRPOPlus = TypeVar("SelfTRPOPlus", bound="TRPOPlus")


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
    :param n_critic_updates: number of critic updates (epochs over the rollout) per policy update (0: the critic is
        not trained, as in sb3-contrib TRPO)
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param use_sde: Whether to use generalized State Dependent Exploration (gSDE)
        instead of action noise exploration (default: False)
    :param sde_sample_freq: Sample a new noise matrix every n steps when using gSDE
        Default: -1 (only sample at the beginning of the rollout)
    :param rollout_buffer_class: Rollout buffer class to use. If ``None``, it will be automatically selected.
    :param rollout_buffer_kwargs: Keyword arguments to pass to the rollout buffer on creation
    :param normalize_advantage: Whether to normalize or not the advantage
    :param target_kl: Trust-region radius: the largest ``KL(old || new)`` an accepted step may have (mean over the
        batch; averaged over the action dimensions of Box and MultiBinary actions, as in sb3-contrib TRPO), small
        for stability, like 0.01 or 0.05. A float or a schedule of the progress remaining (from 1 to 0), like
        ``learning_rate``: a schedule that reaches 0 closes the trust region, and the updates from then on are
        skipped (``failure_reason="closed_trust_region"``). Callbacks may change a float radius during training
        (``sb3_trpo_plus.callbacks``).
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
    :param _init_setup_model: Whether or not to build the network at the creation of the instance

    The arguments below are TRPOPlus's own, keyword-only (sb3-contrib TRPO's 26 arguments keep their positions):

    :param ent_coef: Entropy coefficient of the objective ``mean(ratio * advantage) + ent_coef * mean(entropy)``.
        A float or a schedule of the progress remaining (from 1 to 0), like ``learning_rate``. 0 gives plain TRPO.
    :param ent_coef_decay: multiplied into the entropy coefficient after every policy update, in (0, 1]
        (e.g. 0.9995 halves it in about 1386 updates; 1.0 disables the decay)
    :param min_ent_coef: floor of the decayed entropy coefficient, between 0 and the initial ``ent_coef``
    :param entropy_floor: a floor on the policy's mean entropy, as a fraction in [0, 1) of the uniform policy's
        (discrete action spaces only; 0, the default: none). Below it the objective loses one unit per nat, ``L =
        mean(ratio * advantage) + ent_coef * H - max(0, floor - H)``: the step climbs back, and the line search accepts
        on that same ``L``.
    :param cg_sub_sampling_factor: compute the Fisher-vector products of the conjugate gradient on one
        ``cg_sub_sampling_factor``-th of the policy batch, drawn at random at each update, while the gradient and the
        line search use the whole batch (1: no sub-sampling; OpenAI Baselines uses every 5th sample)
    :param critic_kl_fraction: the part of ``target_kl`` the critic may spend training the features extractor it
        shares with the actor, before the trust-region step takes the rest (docs/critic_features.md).
        ``0`` (default, as sb3-contrib TRPO): the critic trains only its own layers, after the step.
    :param actor_trains_features: ``False`` (with ``critic_kl_fraction > 0``): the trust-region step moves the actor's
        own layers only, on the features the critic left; the critic alone trains the shared extractor.
    :param critic_policy_coef: with ``critic_kl_fraction > 0``, the critic's minibatch loss is ``value_loss -
        critic_policy_coef * objective``, PPO's combined loss, which trains the shared extractor for the policy too.
    :param critic_policy_clip_range: with ``critic_policy_coef > 0``, that objective clipped as PPO clips its surrogate
        (``None``, the default: unclipped).
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }

    # Settings that callbacks and users may change during training: checked on every assignment
    target_kl = arguments.CheckedSetting()
    cg_damping = arguments.CheckedSetting()
    #: The trust region the model was built with, toward which ``AdaptiveTrustRegionCallback`` recovers
    initial_target_kl = arguments.CheckedSetting(default_from="target_kl")
    initial_cg_damping = arguments.CheckedSetting(default_from="cg_damping")
    ent_coef_decay = arguments.CheckedSetting()
    min_ent_coef = arguments.CheckedSetting()
    entropy_floor = arguments.CheckedSetting()

    @arguments.pointing_to_new_names
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
        target_kl: float | Schedule = 0.01,
        sub_sampling_factor: int = 1,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        *,
        ent_coef: float | Schedule = 0.0,
        ent_coef_decay: float = 1.0,
        min_ent_coef: float = 0.0,
        entropy_floor: float = 0.0,
        cg_sub_sampling_factor: int = 1,
        critic_kl_fraction: float = 0.0,
        actor_trains_features: bool = True,
        critic_policy_coef: float = 0.0,
        critic_policy_clip_range: float | None = None,
    ):
        # Every argument is checked before anything (the environment included) is built
        given = locals()
        arguments.check_arguments(**{name: given[name] for name in arguments.CHECKED_ARGUMENTS})
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
            arguments.check_policy_fits(self.policy_class, self.observation_space)
            arguments.check_environment(
                self.action_space, self.n_steps, self.env.num_envs, batch_size, normalize_advantage, sub_sampling_factor
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
        self.critic_kl_fraction = float(critic_kl_fraction)
        self.actor_trains_features = bool(actor_trains_features)
        self.critic_policy_coef = float(critic_policy_coef)
        self.critic_policy_clip_range = None if critic_policy_clip_range is None else float(critic_policy_clip_range)
        # Entropy bonus: `ent_coef` keeps what the user gave (float or schedule), like `learning_rate`
        self.ent_coef = ent_coef
        self.ent_coef_decay = ent_coef_decay
        self.min_ent_coef = min_ent_coef
        self.entropy_floor = float(entropy_floor)
        self._current_ent_coef = float(FloatSchedule(ent_coef)(1.0))
        # Updates skipped because the rollout held NaN or inf (in all, in a row); whether the latest rollout met some
        self._n_non_finite_rollouts = 0
        self._n_non_finite_rollouts_in_a_row = 0
        self._rollout_met_non_finite_obs = False
        self._finite_env: FiniteObservations | None = None
        self.last_update: UpdateDiagnostics | None = None
        self._line_search_window: deque[tuple[bool, float]] = deque(maxlen=stats_window_size)
        self._line_search_warned = False

        if _init_setup_model:
            self._build_model()  # (its arguments were checked above)

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_finite_env"]  # (it holds the environment, as ``env`` does)

    def _setup_model(self) -> None:
        # SB3's hook, which `load` calls after writing the saved values and its own keyword arguments straight into
        # __dict__, past the setters: they are checked here, as the constructor checks its own
        arguments.check_loaded_model(self)
        self._line_search_window = deque(self._line_search_window, maxlen=self._stats_window_size)
        self._build_model()

    def _build_model(self) -> None:
        super()._setup_model()
        # (a model that has none yet: a new one, or a checkpoint of sb3-contrib TRPO, whose radius never moves)
        if "_initial_target_kl" not in self.__dict__:
            self.initial_target_kl = arguments.initial_value(self.target_kl)
        if "_initial_cg_damping" not in self.__dict__:
            self.initial_cg_damping = self.cg_damping
        self.ent_coef_schedule = FloatSchedule(self.ent_coef)
        if any(isinstance(module, nn.Conv2d) for module in self.policy.modules()):
            # channels_last halves the cost of the convolutions' backward pass on CPU (one per Fisher-vector
            # product): measured 0.28 s -> 0.14 s for NatureCNN on 512 frames, 1 thread
            self.policy = self.policy.to(memory_format=th.channels_last)  # type: ignore[call-overload]
        shared_features.check_policy(self.policy, self.critic_kl_fraction, self.actor_trains_features)

    @property  # type: ignore[override]
    def ent_coef(self) -> float | Schedule:
        """The entropy coefficient as given (a float, or a schedule of the progress remaining); checked on assignment."""
        return self._ent_coef

    @ent_coef.setter
    def ent_coef(self, value: float | Schedule) -> None:
        arguments.check_setting("ent_coef", value)
        arguments.check_setting_pair(self, "ent_coef", value)
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

    def _next_target_kl(self) -> float:
        """The trust-region radius of the next update: ``target_kl``, or its schedule at the current progress."""
        target_kl = self.target_kl
        return float(target_kl(self._current_progress_remaining)) if callable(target_kl) else target_kl

    def set_trust_region(self, target_kl: float, cg_damping: float) -> None:
        """
        Set the trust region of the next updates: both values, or neither (a ``ValueError`` naming the first unusable
        one is raised before anything is written). The way callbacks adapt it (``AdaptiveTrustRegionCallback``).
        """
        arguments.check_setting("target_kl", target_kl)
        arguments.check_setting("cg_damping", cg_damping)
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
        Load the model from a zip-file (SB3's ``load``, whose arguments it takes; only load files you trust).
        ``kwargs`` change the loaded model's arguments (a training setting such as ``target_kl`` among them replaces
        the saved value; the saved initial trust region stays the checkpoint's own), and every argument of the loaded
        model is then checked as the constructor checks it (the same ``ValueError``).
        """
        # (SB3 would write an unknown name into the model unseen)
        allowed = (set(inspect.signature(cls.__init__).parameters) - {"self", "policy", "env"}) | set(
            arguments.TRAINING_SETTINGS
        )
        arguments.check_argument_names(kwargs, allowed)
        return super().load(
            path,
            env=env,
            device=device,
            custom_objects=custom_objects,
            print_system_info=print_system_info,
            force_reset=force_reset,
            **kwargs,
        )

    def set_parameters(
        self,
        load_path_or_dict: str | TensorDict,
        exact_match: bool = True,
        device: th.device | str = "auto",
    ) -> None:
        """SB3's ``set_parameters``, refusing NaN or inf anywhere (a ``ValueError``, the parameters left as they were)."""
        previous = copy.deepcopy(self.get_parameters())
        super().set_parameters(load_path_or_dict, exact_match=exact_match, device=device)
        non_finite = non_finite_entries(self.get_parameters())
        if non_finite:
            super().set_parameters(previous, exact_match=True, device=device)  # type: ignore[arg-type]
            raise ValueError(
                f"set_parameters: non-finite values (NaN or inf) in {', '.join(non_finite[:5])}"
                f"{', ...' if len(non_finite) > 5 else ''}; the parameters were left unchanged"
            )

    def collect_rollouts(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int
    ) -> bool:
        # The policy acts on NaN and inf observations as 0; `train` skips the update of a rollout that met some. The
        # wrapper is built once per environment (building one asks a SubprocVecEnv's workers for their render mode)
        finite_env = self._finite_env
        if finite_env is None or finite_env.venv is not env:
            finite_env = self._finite_env = FiniteObservations(env)
        finite_env.met_non_finite = False
        if self._last_obs is not None:
            self._last_obs = finite_env.finite(self._last_obs)  # type: ignore[assignment]
        collected = super().collect_rollouts(finite_env, callback, rollout_buffer, n_rollout_steps)
        self._rollout_met_non_finite_obs = finite_env.met_non_finite
        return collected

    def _policy_batch(
        self, rollout_data: RolloutBufferSamples | DictRolloutBufferSamples, sub_sampling_factor: int | None = None
    ) -> PolicyBatch:
        """
        The whole rollout (or a random sub-sample of it, ``sub_sampling_factor``, by default the algorithm's) as
        observations, actions, old log-probs and advantages.
        """
        factor = self.sub_sampling_factor if sub_sampling_factor is None else sub_sampling_factor
        index = sub_sample(rollout_data.advantages.shape[0], factor, self.device)
        actions = rollout_data.actions[index]
        if isinstance(self.action_space, spaces.Discrete):
            # Convert discrete action from float to long
            actions = actions.long().flatten()
        advantages = rollout_data.advantages[index]
        if self.normalize_advantage:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        return PolicyBatch(index_obs(rollout_data.observations, index), actions, rollout_data.old_log_prob[index], advantages)

    def _entropy(self, distribution: Distribution, log_prob: th.Tensor) -> th.Tensor:
        entropy = distribution.entropy()
        if entropy is None:
            # No analytical form (e.g. squashed Gaussian): single-sample estimate, as in PPO
            return -log_prob.mean()
        return entropy.mean()

    def _objective(
        self, distribution: Distribution, batch: PolicyBatch, ent_coef: float, clip_range: float | None = None
    ) -> tuple[th.Tensor, th.Tensor]:
        """
        The objective ``L = mean(ratio * advantage) + ent_coef * H - max(0, floor - H)`` (``H`` the mean entropy,
        ``floor`` the ``entropy_floor`` in nats) and ``H``; with ``clip_range``, PPO's clipped surrogate
        ``mean(min(ratio * advantage, clip(ratio, 1 - clip_range, 1 + clip_range) * advantage))`` in place of
        ``mean(ratio * advantage)``.
        """
        log_prob = distribution.log_prob(batch.actions)
        # ratio between old and new policy, should be one at the first iteration
        ratio = th.exp(log_prob - batch.old_log_prob)
        surrogate = batch.advantages * ratio
        if clip_range is not None:
            surrogate = th.min(surrogate, batch.advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range))
        entropy = self._entropy(distribution, log_prob)
        objective = surrogate.mean() + ent_coef * entropy
        floor = arguments.entropy_floor_nats(self.action_space, self.entropy_floor)
        if floor > 0:
            objective = objective - th.clamp(floor - entropy, min=0.0)
        return objective, entropy

    def _distribution(self, batch: PolicyBatch) -> tuple[Distribution, th.Tensor | None]:
        """
        The policy's distribution on the batch, and for SB3's actor-critic policies with a shared features extractor
        (no ``sub_sampling_factor``) the shared features of the whole rollout it was computed from, detached: the
        critic update reuses them instead of running the extractor again.
        """
        policy = self.policy
        if batch.actor_features is not None:
            return self._head_distribution(batch.actor_features), None
        if shared_features.is_standard_shared_actor_critic(policy):
            # Same computation as ActorCriticPolicy.get_distribution, keeping the features
            features = policy.extract_features(batch.obs)
            kept = features.detach() if self.sub_sampling_factor == 1 else None  # type: ignore[union-attr]
            return self._head_distribution(features), kept  # type: ignore[arg-type]
        return policy.get_distribution(batch.obs), None

    def _head_distribution(self, features: th.Tensor) -> Distribution:
        """The distribution of SB3's actor-critic policy from the features of its (shared) extractor."""
        return shared_features.head_distribution(self.policy, features)  # type: ignore[arg-type]

    def _fisher_vector_product(
        self, batch: PolicyBatch, distribution: Distribution, actor_params: list[nn.Parameter], cg_damping: float
    ) -> FisherVectorProduct:
        """``v -> (F + cg_damping * I) v`` on the batch, or on a sub-sample of it (``cg_sub_sampling_factor``)."""
        obs, features = batch.obs, batch.actor_features
        if self.cg_sub_sampling_factor > 1:
            index = sub_sample(batch.actions.shape[0], self.cg_sub_sampling_factor, self.device)
            obs = index_obs(obs, index)
            if features is None:
                distribution = self.policy.get_distribution(obs)
            else:
                features = features[index]
                distribution = self._head_distribution(features)
        return policy_fisher_vector_product(self.policy, obs, distribution, actor_params, cg_damping, features)

    def _update_policy(
        self,
        batch: PolicyBatch,
        update: UpdateSettings,
        actor_params: list[nn.Parameter],
        reference: Distribution | None = None,
        kl_used: float = 0.0,
    ) -> UpdateDiagnostics:
        """
        One trust-region step on ``L(theta) = mean(ratio * advantage) + ent_coef * H - max(0, floor - H)``: gradient,
        natural-gradient direction (conjugate gradient with the Fisher-vector product), full step, backtracking line
        search on the same ``L``. Every stage that cannot go on ends the update with its failure reason.

        :param batch: the policy batch; the step sets ``batch.features`` to the shared features of the rollout at the
            actor's final parameters when it computed them anyway (the critic reuses them)
        :param update: the settings of this update
        :param actor_params: the parameters the action distribution depends on
        :param reference: the distribution the KL is measured from (the policy at the start of the step if ``None``)
        :param kl_used: ``KL(reference || current policy)``, already spent: the full step is sized for the rest
        :return: the diagnostics
        """
        # (the rollout was checked for NaN and inf before the update: train() refuses one that holds some)
        # 1. Gradient g of the surrogate objective (with the entropy bonus)
        distribution, batch.features = self._distribution(batch)
        old_distribution = detach_distribution(distribution) if reference is None else reference
        objective, entropy = self._objective(distribution, batch, update.ent_coef)
        # (the graph is kept when the Fisher-vector products reuse it: no sub-sampling)
        gradient = flat_grad(objective, actor_params, retain_graph=self.cg_sub_sampling_factor == 1)
        old_objective, old_entropy = objective.item(), entropy.item()
        if not is_finite(gradient):
            return update.record(failure_reason="non_finite_gradient", policy_objective=old_objective, entropy=old_entropy)

        # 2. Direction s = (F + damping * I)^-1 g, by conjugate gradient with the Fisher-vector product
        fisher_vector_product = self._fisher_vector_product(batch, distribution, actor_params, update.cg_damping)
        search_direction, damped_product = conjugate_gradient(fisher_vector_product, gradient, max_iter=self.cg_max_steps)
        if not is_finite(search_direction):
            return update.record(failure_reason="non_finite_direction", policy_objective=old_objective, entropy=old_entropy)

        # 3. Full step: the largest step along s whose quadratic KL model 0.5 * beta^2 * s^T (F + damping * I) s is
        # target_kl, less the KL the critic already used ((F + damping * I) s comes with the solver's answer)
        curvature = float(search_direction.dot(damped_product))
        if not (np.isfinite(curvature) and curvature > 0.0):
            return update.record(failure_reason="non_positive_curvature", policy_objective=old_objective, entropy=old_entropy)
        full_step = np.sqrt(2.0 * (update.target_kl - kl_used) / curvature) * search_direction
        if not is_finite(full_step):
            return update.record(failure_reason="non_finite_direction", policy_objective=old_objective, entropy=old_entropy)
        # free the graphs before the line search
        del fisher_vector_product, distribution, objective, entropy

        # 4. Line search (backtracking) on the same objective L, under the KL constraint
        return self._line_search(
            batch, update, actor_params, old_distribution, full_step, policy_objective=old_objective, entropy=old_entropy
        )

    def _line_search(
        self,
        batch: PolicyBatch,
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
        step_fraction = 1.0
        accepted = False
        try:
            with th.no_grad():
                for iteration in range(1, self.line_search_max_iter + 1):
                    assign_params(actor_params, original_params + step_fraction * full_step)
                    new_distribution, features = self._distribution(batch)
                    new_objective, _ = self._objective(new_distribution, batch, update.ent_coef)
                    kl = mean_kl(old_distribution, new_distribution, joint=False)
                    new_objective_value, kl_value = new_objective.item(), kl.item()
                    # Acceptance: the objective improves and the step stays inside the trust region
                    if (
                        np.isfinite(new_objective_value)
                        and np.isfinite(kl_value)
                        and new_objective_value > policy_objective
                        and kl_value <= update.target_kl
                    ):
                        accepted = True
                        batch.features = features  # (the shared features at the accepted parameters)
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
                # the old parameters, exactly
                assign_params(actor_params, original_params)
        return update.record(
            failure_reason="line_search_exhausted",
            line_search_iters=self.line_search_max_iter,
            policy_objective=policy_objective,
            entropy=entropy,
        )

    def _update_critic(
        self,
        rollout_data: RolloutBufferSamples | DictRolloutBufferSamples,
        actor_params: set[nn.Parameter],
        features: th.Tensor | None = None,
        train_features: bool = False,
        policy_batch: PolicyBatch | None = None,
        ent_coef: float = 0.0,
    ) -> list[float]:
        """
        ``n_critic_updates`` epochs of minibatch regression of the value function on the GAE returns.

        :param actor_params: the parameters the critic leaves alone (their gradients are discarded)
        :param features: the shared features of the rollout, when already computed at the current parameters
        :param train_features: run the features extractor in every minibatch, with gradient (it is then trained
            unless it is among ``actor_params``)
        :param policy_batch: with ``train_features``, the whole rollout as a policy batch, in the rollout's order: the
            minibatch loss is then PPO's combined loss (:meth:`_combined_loss`)
        :param ent_coef: the entropy coefficient of that loss's objective (this update's)
        """
        returns = rollout_data.returns
        values_of = shared_features.critic_value_fn(self.policy, rollout_data.observations, features, train_features)
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
                    value_loss, loss = self._combined_loss(policy_batch.minibatch(index), returns[index], ent_coef)
                if not th.isfinite(loss):
                    continue  # never let a non-finite loss reach the weights
                self.policy.optimizer.zero_grad()
                loss.backward()
                # Removing gradients of parameters shared with the actor
                # otherwise it defeats the purposes of the KL constraint
                for param in actor_params:
                    param.grad = None
                if not all(is_finite(param.grad) for param in critic_params if param.grad is not None):
                    continue
                self.policy.optimizer.step()
                value_losses.append(value_loss.item())
        return value_losses

    def _combined_loss(self, minibatch: PolicyBatch, returns: th.Tensor, ent_coef: float) -> tuple[th.Tensor, th.Tensor]:
        """
        PPO's combined loss on one minibatch, one pass of the shared extractor for both heads: ``value_loss -
        critic_policy_coef * objective``, the objective (with ``ent_coef`` and the ``entropy_floor`` term, clipped with
        ``critic_policy_clip_range``) through the actor's head, which gets no gradient from it (the critic leaves the
        actor's parameters alone).

        :return: the value loss and the combined loss
        """
        policy: ActorCriticPolicy = self.policy
        features = policy.extract_features(minibatch.obs)  # type: ignore[arg-type]
        values = policy.value_net(policy.mlp_extractor.forward_critic(features))  # type: ignore[arg-type]
        value_loss = F.mse_loss(returns, values.flatten())
        distribution = shared_features.head_distribution(policy, features)  # type: ignore[arg-type]
        objective, _ = self._objective(distribution, minibatch, ent_coef, self.critic_policy_clip_range)
        return value_loss, value_loss - self.critic_policy_coef * objective

    def _critic_within_kl(
        self,
        rollout_data: RolloutBufferSamples | DictRolloutBufferSamples,
        batch: PolicyBatch,
        actor_params: list[nn.Parameter],
        update: UpdateSettings,
    ) -> shared_features.CriticShare:
        """
        The critic first, training the features extractor it shares with the actor within its part of the trust
        region: its change of the extractor is halved until ``KL(rollout's policy || policy) <= critic_kl_fraction *
        target_kl``. If ``CRITIC_KL_HALVINGS`` halvings do not get there, the critic's whole pass is undone (the
        extractor, the critic's own layers trained on the discarded features, and the optimizer's state, whose moments
        hold the discarded change), and the critic's own layers train alone on the rollout's features. On an exception
        or interruption the extractor is the rollout's, exactly.
        """
        policy: ActorCriticPolicy = self.policy  # type: ignore[assignment]
        with th.no_grad():
            # (one extractor shared by both heads: a tensor, not the pair of a policy that has two)
            features_at_start: th.Tensor = policy.extract_features(batch.obs)  # type: ignore[arg-type, assignment]
            rollout_policy = detach_distribution(shared_features.head_distribution(policy, features_at_start))
        shared = list(policy.features_extractor.parameters())
        actor_set = set(actor_params)
        critic_own = [param for param in policy.parameters() if param not in actor_set]
        start, critic_start = flatten_params(shared), flatten_params(critic_own)
        optimizer_state = copy.deepcopy(policy.optimizer.state_dict())
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
                for _ in range(shared_features.CRITIC_KL_HALVINGS + 1):
                    assign_params(shared, start + fraction * change)
                    new_features: th.Tensor = policy.extract_features(batch.obs)  # type: ignore[arg-type, assignment]
                    new_distribution = shared_features.head_distribution(policy, new_features)
                    kl = mean_kl(rollout_policy, new_distribution, joint=False).item()
                    if np.isfinite(kl) and kl <= budget:
                        kept, critic_kl, features = fraction, kl, new_features
                        break
                    fraction *= 0.5
        finally:
            if kept == 0.0:
                # the extractor as the rollout's policy had it, exactly
                assign_params(shared, start)
        if kept == 0.0:
            assign_params(critic_own, critic_start)
            policy.optimizer.load_state_dict(optimizer_state)
            # (the features of the whole rollout when the batch is the whole rollout)
            rollout_features = features_at_start if self.sub_sampling_factor == 1 else None
            value_losses = self._update_critic(rollout_data, actor_set | set(shared), rollout_features)
        if self.actor_trains_features:
            return shared_features.CriticShare(value_losses, rollout_policy, critic_kl, kept, actor_params, None)
        # The step moves the actor's own layers only, on the features the critic left (computed once)
        shared_set = set(shared)
        own = [param for param in actor_params if param not in shared_set]
        return shared_features.CriticShare(value_losses, rollout_policy, critic_kl, kept, own, features)

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
        return actor_parameters(self.policy, observations)

    def train(self) -> None:
        """
        Update policy using the currently gathered rollout buffer.
        """
        self.policy.set_training_mode(True)
        # Entropy coefficient of this update: schedule(progress) * decay ** n_updates, floored
        ent_coef = self._next_ent_coef()
        # Nothing computed from an unusable setting or from non-finite data may reach the weights: such an update is
        # refused as a whole (actor and critic) and reported as what it is, never as a failed line search
        learning_rate = self.lr_schedule(self._current_progress_remaining)
        # What this update uses of the settings schedules and callbacks may change (read once, reported as used)
        update = UpdateSettings(self._n_updates + 1, ent_coef, self._next_target_kl(), self.cg_damping)
        refusal = (
            closed_trust_region(update.target_kl, scheduled=callable(self.target_kl))
            or arguments.unusable_setting(update.target_kl, update.cg_damping, ent_coef, learning_rate)
            or non_finite_rollout(self.rollout_buffer, self._rollout_met_non_finite_obs)
        )
        if refusal is not None:
            self._refuse_update(*refusal, update=update)
            return
        self._current_ent_coef = ent_coef
        self._n_non_finite_rollouts_in_a_row = 0
        self._update_learning_rate(self.policy.optimizer)  # (the critic's; checked above, as nothing else is)

        # 1. The rollout batch: the whole rollout, in the buffer's order (images in channels_last, as the convolution
        # weights, scaled once, in place where the batch is a copy of the buffer's arrays)
        rollout_data = whole_rollout(self.rollout_buffer)
        with images_normalized_once(self.policy, rollout_data.observations, owns_copies(self.rollout_buffer)) as observations:
            rollout_data = rollout_data._replace(observations=observations)  # type: ignore[arg-type]  # (dict: Dict buffer)
            actor_params = self._actor_params(rollout_data.observations)
            batch = self._policy_batch(rollout_data)

            # 2. The trust-region step. With critic_kl_fraction > 0 the critic's training of the shared features first
            # spends its part of the trust region (_critic_within_kl), and the step takes the rest
            share = self._critic_within_kl(rollout_data, batch, actor_params, update) if self.critic_kl_fraction > 0 else None
            if share is None:
                diagnostics = self._update_policy(batch, update, actor_params)
            else:
                self.logger.record("train/critic_kl", share.kl_used)
                self.logger.record("train/critic_features_kept", share.kept)
                batch.actor_features = share.actor_features
                diagnostics = self._update_policy(
                    batch, update, share.step_params, reference=share.reference, kl_used=share.kl_used
                )
                if not diagnostics.line_search_success:
                    # the step failed, but the critic's kept change of the shared extractor moved the policy
                    diagnostics = replace(diagnostics, update_kl=share.kl_used)

            # 3. The critic: regression on the GAE returns, never touching what the actor uses (reusing the shared
            # features the step computed at the actor's final parameters); done in step 2 with critic_kl_fraction > 0
            value_losses = (
                self._update_critic(rollout_data, set(actor_params), batch.features) if share is None else share.value_losses
            )

        self._n_updates += 1
        self.last_update = diagnostics
        self._log_update(diagnostics, value_losses)

    def _refuse_update(self, reason: str, message: str, update: UpdateSettings) -> None:
        """
        Count and report an update that does not run (bad data or an unusable setting: ``reason`` and ``message``);
        no weight changes. Stop the run once non-finite data has left it nothing to train on
        (:func:`~sb3_trpo_plus.finite.stop_if_untrainable`).
        """
        if reason == "non_finite_input":
            self._n_non_finite_rollouts += 1
            self._n_non_finite_rollouts_in_a_row += 1
        if reason != "closed_trust_region":  # (the end of a target_kl schedule is not a fault)
            warnings.warn(f"TRPOPlus skipped update {update.n_updates}: {message}", RuntimeWarning)
        self._n_updates += 1
        self.last_update = update.record(failure_reason=reason)
        self._log_update(self.last_update, [])
        if reason == "non_finite_input":
            stop_if_untrainable(self.get_vec_normalize_env(), self._n_non_finite_rollouts_in_a_row)

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
        # The line search's rolling health (a warning once when it turns bad)
        health = line_search_health(self._line_search_window, diagnostics, self._line_search_warned)
        for key, value in (health or {}).items():
            self.logger.record(f"train/{key}", value)
        self._line_search_warned = bool(health["line_search_warning"]) if health else self._line_search_warned

    def learn(
        self: SelfTRPOPlus,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "TRPOPlus",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfTRPOPlus:
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


def closed_trust_region(target_kl: float, scheduled: bool) -> tuple[str, str] | None:
    """
    The refusal of an update whose scheduled radius has reached 0 (``lin_0.08`` does at the end of the run): the
    policy is meant to stay where it is, so the update is skipped, without a warning. A radius <= 0 given as a
    number is an error, which :func:`~sb3_trpo_plus.arguments.unusable_setting` reports.
    """
    if scheduled and arguments.is_finite_real(target_kl) and target_kl <= 0:
        return "closed_trust_region", f"the target_kl schedule is at {target_kl!r}: the trust region is closed"
    return None


def decayed_ent_coef(ent_coef: float, ent_coef_decay: float, min_ent_coef: float, n_updates: int) -> float:
    """
    Entropy coefficient after ``n_updates`` updates: ``max(min_ent_coef, ent_coef * ent_coef_decay ** n_updates)``,
    ``ent_coef`` the scheduled value. A NaN in any input gives NaN (``max`` alone would hide it behind the floor), so
    that the update refuses it.
    """
    decayed = float(ent_coef) * ent_coef_decay**n_updates
    if math.isnan(decayed) or math.isnan(min_ent_coef):
        return math.nan
    return max(min_ent_coef, decayed)
