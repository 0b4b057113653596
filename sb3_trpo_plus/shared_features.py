"""
Pure functions of SB3's actor-critic policies for the critic training the features extractor it shares with the actor
(``critic_kl_fraction > 0``, the ``atari`` and MinAtar entries): which policies have such an extractor, the actor's
distribution and the critic's values from its features, and what the critic's part of the trust region leaves to the
step (:class:`CriticShare`). The steps themselves are :class:`~sb3_trpo_plus.TRPOPlus`'s ``_critic_within_kl`` and
``_combined_loss``. See docs/critic_features.md.

This module uses nothing of ``sb3_trpo_plus`` but :mod:`sb3_trpo_plus.rollout`.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeGuard

import torch as th
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import PyTorchObs
from torch import nn

from sb3_trpo_plus.rollout import index_obs

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
