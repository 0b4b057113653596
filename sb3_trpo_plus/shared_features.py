"""
The critic training the features extractor it shares with the actor, within part of the trust region.

With ``critic_kl_fraction > 0`` (the ``atari`` and MinAtar entries), one update spends its trust region in two parts:

1. the critic trains first, the shared extractor included (:func:`critic_within_kl`): ``n_critic_updates`` epochs of
   minibatches on the value loss, or with ``critic_policy_coef > 0`` on PPO's combined loss ``value_loss -
   critic_policy_coef * objective`` (:func:`combined_loss`, PPO's clipped surrogate with ``critic_policy_clip_range``);
   its change of the extractor is halved until the policy's KL from the rollout's policy is within
   ``critic_kl_fraction * target_kl``, and undone if :data:`CRITIC_KL_HALVINGS` halvings do not get there;
2. the trust-region step takes the rest of ``target_kl``, its KL measured from the rollout's policy; with
   ``actor_trains_features=False`` it moves the actor's own layers only, on the features the critic left.

:class:`~sb3_trpo_plus.TRPOPlus` calls this module at one place of its ``train()``; with ``critic_kl_fraction = 0``
nothing here runs. See docs/critic_features.md.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

import numpy as np
import torch as th
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import DictRolloutBufferSamples, PyTorchObs, RolloutBufferSamples
from torch import nn
from torch.nn import functional as F

from sb3_trpo_plus.batch import PolicyBatch, index_obs
from sb3_trpo_plus.diagnostics import UpdateSettings
from sb3_trpo_plus.distributions import detach_distribution, mean_kl
from sb3_trpo_plus.parameters import assign_params, flatten_params

if TYPE_CHECKING:  # (only for the annotations: the algorithm imports this module, not the other way)
    from sb3_trpo_plus.trpo_plus import TRPOPlus

#: Halvings of the critic's change of a shared features extractor before it is undone
CRITIC_KL_HALVINGS = 10


def is_standard_shared_actor_critic(policy: BasePolicy) -> TypeGuard[ActorCriticPolicy]:
    """SB3's ActorCriticPolicy (or a subclass keeping its forward passes) with a features extractor shared by both heads."""
    return (
        isinstance(policy, ActorCriticPolicy)
        and policy.share_features_extractor
        and all(
            getattr(type(policy), method) is getattr(ActorCriticPolicy, method)
            for method in ("get_distribution", "predict_values", "extract_features")
        )
    )


def head_distribution(policy: ActorCriticPolicy, features: th.Tensor) -> Distribution:
    """The distribution of SB3's actor-critic policy from the features of its (shared) extractor."""
    return policy._get_action_dist_from_latent(policy.mlp_extractor.forward_actor(features))


def check_policy(policy: BasePolicy, critic_kl_fraction: float, actor_trains_features: bool) -> None:
    """Raise a ``ValueError`` when the policy has no shared extractor with parameters for the critic to train."""
    if critic_kl_fraction > 0 and not is_standard_shared_actor_critic(policy):
        raise ValueError(
            f"critic_kl_fraction > 0 ({critic_kl_fraction}) needs an ActorCriticPolicy whose features extractor "
            "is shared by actor and critic (policy_kwargs share_features_extractor=True, SB3's default); "
            f"got {type(policy).__name__} with share_features_extractor={getattr(policy, 'share_features_extractor', None)}"
        )
    if critic_kl_fraction > 0 and not list(policy.features_extractor.parameters()):
        raise ValueError(
            f"critic_kl_fraction > 0 ({critic_kl_fraction}) needs a shared features extractor with parameters "
            f"for the critic to train; {type(policy.features_extractor).__name__} has none (SB3's MlpPolicy "
            "only flattens the observation): use critic_kl_fraction=0, or give the policy a features extractor "
            "with parameters (policy_kwargs features_extractor_class, as CnnPolicy's NatureCNN)"
        )
    if not actor_trains_features and critic_kl_fraction == 0:
        raise ValueError(
            "actor_trains_features=False needs critic_kl_fraction > 0 (the critic then trains the shared features "
            "extractor); with critic_kl_fraction=0 nothing would train it"
        )


def critic_value_fn(
    policy: BasePolicy, observations: PyTorchObs, features: th.Tensor | None = None, train_features: bool = False
) -> Callable[[th.Tensor], th.Tensor]:
    """
    A function from minibatch indices to value predictions, differentiable in the critic-only parameters (and in
    the features extractor with ``train_features``).

    With a features extractor shared with the actor (SB3's default), the critic may only train what the actor
    does not use (the critic's MLP and value head; sb3-contrib TRPO discards the shared gradients too), so the
    shared features are computed once, without gradient, instead of once per minibatch and epoch; unless
    ``train_features`` (``critic_kl_fraction > 0``).
    """
    if is_standard_shared_actor_critic(policy) and not train_features:
        if features is None:
            with th.no_grad():
                features = policy.extract_features(observations)  # type: ignore[call-arg, assignment]

        def values_from_features(index: th.Tensor) -> th.Tensor:
            return policy.value_net(policy.mlp_extractor.forward_critic(features[index]))  # type: ignore[index]

        return values_from_features

    def values_from_observations(index: th.Tensor) -> th.Tensor:
        return policy.predict_values(index_obs(observations, index))  # type: ignore[operator]

    return values_from_observations


@dataclass
class CriticShare:
    """
    What the critic's part of the trust region leaves to the trust-region step.

    :param value_losses: the critic's minibatch value losses
    :param reference: the rollout's policy on the batch: the step's KL is measured from it
    :param kl_used: its KL to the policy after the critic (the part of ``target_kl`` spent)
    :param kept: the share of the critic's change of the extractor that was kept (1, 1/2, ...; 0: undone)
    :param step_params: the parameters the step moves (the actor's own only, with ``actor_trains_features=False``)
    :param actor_features: with ``actor_trains_features=False``, the shared features of the batch at the extractor
        the critic left, from which the step computes the distributions (the extractor is not run again)
    """

    value_losses: list[float]
    reference: Distribution
    kl_used: float
    kept: float
    step_params: list[nn.Parameter]
    actor_features: th.Tensor | None


def combined_loss(
    model: "TRPOPlus", minibatch: PolicyBatch, returns: th.Tensor, ent_coef: float
) -> tuple[th.Tensor, th.Tensor]:
    """
    PPO's combined loss on one minibatch, one pass of the extractor for both heads: ``value_loss -
    critic_policy_coef * objective``, the policy's objective (with ``ent_coef``, clipped with
    ``critic_policy_clip_range``) through the actor's head, which gets no gradient from it (its parameters are among
    those the critic leaves alone).

    :return: the value loss and the combined loss
    """
    policy: ActorCriticPolicy = model.policy  # type: ignore[assignment]
    features = policy.extract_features(minibatch.obs)  # type: ignore[arg-type]
    values = policy.value_net(policy.mlp_extractor.forward_critic(features))  # type: ignore[arg-type]
    value_loss = F.mse_loss(returns, values.flatten())
    distribution = head_distribution(policy, features)  # type: ignore[arg-type]
    objective, _ = model._objective(distribution, minibatch, ent_coef, model.critic_policy_clip_range)
    return value_loss, value_loss - model.critic_policy_coef * objective


def critic_within_kl(
    model: "TRPOPlus",
    rollout_data: RolloutBufferSamples | DictRolloutBufferSamples,
    batch: PolicyBatch,
    actor_params: list[nn.Parameter],
    update: UpdateSettings,
) -> CriticShare:
    """
    The critic first, training the features extractor it shares with the actor, within its part of the trust region:
    its change of the extractor is halved until ``KL(rollout's policy || policy) <= critic_kl_fraction * target_kl``,
    and undone if ``CRITIC_KL_HALVINGS`` halvings do not get there, or on any exception or interruption (the critic's
    own layers keep their training).
    """
    policy: ActorCriticPolicy = model.policy  # type: ignore[assignment]
    with th.no_grad():
        features_at_start = policy.extract_features(batch.obs)  # type: ignore[arg-type]
        rollout_policy = detach_distribution(head_distribution(policy, features_at_start))  # type: ignore[arg-type]
    shared = list(policy.features_extractor.parameters())
    start = flatten_params(shared)
    budget = model.critic_kl_fraction * update.target_kl
    kept, critic_kl, features = 0.0, 0.0, features_at_start
    try:
        # (with critic_policy_coef, on the policy's objective too: the whole rollout, in the critic's order; the
        # policy batch is already that without sub_sampling_factor)
        policy_batch = None
        if model.critic_policy_coef > 0:
            policy_batch = (
                batch if model.sub_sampling_factor == 1 else model._policy_batch(rollout_data, sub_sampling_factor=1)
            )
        value_losses = model._update_critic(
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
                new_features = policy.extract_features(batch.obs)  # type: ignore[arg-type]
                kl = mean_kl(rollout_policy, head_distribution(policy, new_features), joint=False).item()  # type: ignore[arg-type]
                if np.isfinite(kl) and kl <= budget:
                    kept, critic_kl, features = fraction, kl, new_features
                    break
                fraction *= 0.5
    finally:
        if kept == 0.0:
            # the extractor as the rollout's policy had it, exactly
            assign_params(shared, start)
    if model.actor_trains_features:
        return CriticShare(value_losses, rollout_policy, critic_kl, kept, actor_params, None)
    # The step moves the actor's own layers only, on the features the critic left (computed once)
    shared_set = set(shared)
    own = [param for param in actor_params if param not in shared_set]
    return CriticShare(value_losses, rollout_policy, critic_kl, kept, own, features)  # type: ignore[arg-type]
