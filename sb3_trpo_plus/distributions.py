"""
What the trust-region update needs to know about each of Stable-Baselines3's action distributions, in one table.

The Fisher information matrix of a policy with distribution parameters ``y = f(obs; theta)`` is the Hessian of
``KL(pi_old || pi_theta)`` at ``theta = theta_old``. By the chain rule it is a Gauss-Newton product

    F = (1 / N) * sum_n J_n^T M_n J_n

with ``J_n`` the Jacobian of the distribution parameters of sample ``n`` with respect to ``theta`` and ``M_n`` the
Hessian of the KL in those parameters (the Fisher metric of the distribution family). ``M`` is known in closed form
for every action distribution of Stable-Baselines3 (``p``: probabilities, ``sigma``: standard deviation):

- Categorical, on logits: ``M = diag(p) - p p^T``
- MultiCategorical: block diagonal of the above, one block per action dimension
- Bernoulli, on logits: ``M = diag(p (1 - p))``
- Gaussian (diagonal, gSDE, squashed), on ``(mean, std)``: ``M = diag(1 / sigma^2, 2 / sigma^2)``

Each distribution is one :class:`DistributionRule` of :data:`DISTRIBUTION_RULES`: the tensors that parametrize it,
``M t`` in those tensors, a detached copy (the fixed "old" policy of the KL), whether SB3's KL is per action
dimension, and how the tangent of the action net's output becomes the tangent of those tensors (the fast ``J v`` of
:func:`sb3_trpo_plus.policy_jvp.actor_critic_jvp`). Supporting a new distribution is adding one entry.

This module uses nothing else of ``sb3_trpo_plus``.
"""

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    SquashedDiagGaussianDistribution,
    StateDependentNoiseDistribution,
    kl_divergence,
)

#: ``(d_action_net_output, d_log_std) -> tangents of the distribution tensors``
NetTangentsFn = Callable[[th.Tensor, th.Tensor | None], list[th.Tensor]]


@dataclass(frozen=True)
class DistributionRule:
    """
    What the trust-region update uses of one SB3 action distribution.

    :param tensors: the tensors that parametrize the distribution (on which ``proba_distribution`` was called),
        each of shape ``(batch_size, ...)``; the coordinates of ``M``
    :param metric_product: ``(tensors, tangents) -> M t`` per sample, ``M`` the Hessian of ``KL(old || new)`` in those
        tensors at ``new = old``, evaluated at the given (detached) tensors
    :param detached: the torch distribution(s) of a distribution, with detached parameters
    :param per_dimension_kl: whether SB3's ``kl_divergence`` gives one value per action dimension (factorized
        distributions), so that the mean over dimensions is the joint KL divided by their number
    :param net_tangents: for SB3's ``ActorCriticPolicy``, ``(distribution, action_net output, log_std or None)`` to
        the map from the tangent of the action net's output (and of ``log_std``) to the tangents of :attr:`tensors`;
        ``None`` when the distribution's parameters are not a function of the action net alone (gSDE), so that the
        generic ``torch.func`` product is used
    """

    tensors: Callable[[Any], list[th.Tensor]]
    metric_product: Callable[[Sequence[th.Tensor], Sequence[th.Tensor]], list[th.Tensor]]
    detached: Callable[[Any], Any]
    per_dimension_kl: bool
    net_tangents: Callable[[Any, th.Tensor, th.Tensor | None], NetTangentsFn] | None


def _softmax_metric(tensors: Sequence[th.Tensor], tangents: Sequence[th.Tensor]) -> list[th.Tensor]:
    # (diag(p) - p p^T) t for each categorical block
    products = []
    for logits, tangent in zip(tensors, tangents, strict=True):
        probs = th.softmax(logits, dim=-1)
        weighted = probs * tangent
        products.append(weighted - probs * weighted.sum(dim=-1, keepdim=True))
    return products


def _bernoulli_metric(tensors: Sequence[th.Tensor], tangents: Sequence[th.Tensor]) -> list[th.Tensor]:
    probs = th.sigmoid(tensors[0])
    return [probs * (1.0 - probs) * tangents[0]]


def _gaussian_metric(tensors: Sequence[th.Tensor], tangents: Sequence[th.Tensor]) -> list[th.Tensor]:
    inv_variance = tensors[1].pow(-2)
    return [tangents[0] * inv_variance, 2.0 * tangents[1] * inv_variance]


def _normal(distribution: Distribution) -> th.distributions.Normal:
    return cast(th.distributions.Normal, distribution.distribution)


def _logits_tangents(distribution: Any, output: th.Tensor, log_std: th.Tensor | None) -> NetTangentsFn:
    # the action net's output is the logits
    return lambda d_output, d_log_std: [d_output]


def _split_logits_tangents(distribution: Any, output: th.Tensor, log_std: th.Tensor | None) -> NetTangentsFn:
    # one block of logits per action dimension
    action_dims = list(distribution.action_dims)
    return lambda d_output, d_log_std: list(th.split(d_output, action_dims, dim=1))


def _gaussian_tangents(distribution: Any, output: th.Tensor, log_std: th.Tensor | None) -> NetTangentsFn:
    # mean = action net output; std = exp(log_std), broadcast over the batch
    assert log_std is not None
    std = th.exp(log_std.detach()).expand_as(output)

    def tangents(d_output: th.Tensor, d_log_std: th.Tensor | None) -> list[th.Tensor]:
        return [d_output, std * d_log_std if d_log_std is not None else th.zeros_like(std)]

    return tangents


_CATEGORICAL = DistributionRule(
    tensors=lambda distribution: [distribution.distribution.logits],
    metric_product=_softmax_metric,
    detached=lambda distribution: th.distributions.Categorical(logits=distribution.distribution.logits.detach()),
    per_dimension_kl=False,
    net_tangents=_logits_tangents,
)
_GAUSSIAN = DistributionRule(
    tensors=lambda distribution: [_normal(distribution).loc, _normal(distribution).scale],
    metric_product=_gaussian_metric,
    detached=lambda distribution: th.distributions.Normal(
        _normal(distribution).loc.detach(), _normal(distribution).scale.detach()
    ),
    per_dimension_kl=True,
    net_tangents=_gaussian_tangents,
)

#: One entry per SB3 action distribution (a subclass of one of them gets its parent's entry)
DISTRIBUTION_RULES: dict[type[Distribution], DistributionRule] = {
    CategoricalDistribution: _CATEGORICAL,
    MultiCategoricalDistribution: DistributionRule(
        tensors=lambda distribution: [dist.logits for dist in distribution.distribution],
        metric_product=_softmax_metric,
        detached=lambda distribution: [
            th.distributions.Categorical(logits=dist.logits.detach()) for dist in distribution.distribution
        ],
        per_dimension_kl=False,  # (SB3 sums the per-dimension KLs)
        net_tangents=_split_logits_tangents,
    ),
    BernoulliDistribution: DistributionRule(
        tensors=lambda distribution: [distribution.distribution.logits],
        metric_product=_bernoulli_metric,
        detached=lambda distribution: th.distributions.Bernoulli(logits=distribution.distribution.logits.detach()),
        per_dimension_kl=True,
        net_tangents=_logits_tangents,
    ),
    DiagGaussianDistribution: _GAUSSIAN,
    # (ActorCriticPolicy never builds one without gSDE: no fast product)
    SquashedDiagGaussianDistribution: DistributionRule(
        _GAUSSIAN.tensors, _GAUSSIAN.metric_product, _GAUSSIAN.detached, per_dimension_kl=True, net_tangents=None
    ),
    # (the std depends on the latent features too: no fast product)
    StateDependentNoiseDistribution: DistributionRule(
        _GAUSSIAN.tensors, _GAUSSIAN.metric_product, _GAUSSIAN.detached, per_dimension_kl=True, net_tangents=None
    ),
}

SUPPORTED_DISTRIBUTIONS = tuple(DISTRIBUTION_RULES)


def distribution_rule(distribution: Distribution) -> DistributionRule:
    """
    The entry of :data:`DISTRIBUTION_RULES` for a distribution (its class's, else its nearest parent's).

    :param distribution: an SB3 distribution
    :return: the rule
    """
    for cls in type(distribution).__mro__:
        rule = DISTRIBUTION_RULES.get(cls)
        if rule is not None:
            return rule
    raise ValueError(
        f"Unsupported action distribution {type(distribution).__name__}: "
        f"expected one of {[cls.__name__ for cls in SUPPORTED_DISTRIBUTIONS]}"
    )


def distribution_tensors(distribution: Distribution) -> list[th.Tensor]:
    """
    The tensors that parametrize an SB3 action distribution, in the order used by :func:`fisher_metric_product`.

    :param distribution: an SB3 distribution on which ``proba_distribution`` was called
    :return: ``[logits]`` (Categorical, Bernoulli), one logits tensor per action dimension (MultiCategorical)
        or ``[mean, std]`` (Gaussian families), each of shape ``(batch_size, ...)``
    """
    return distribution_rule(distribution).tensors(distribution)


def fisher_metric_product(
    distribution: Distribution, tensors: Sequence[th.Tensor], tangents: Sequence[th.Tensor]
) -> list[th.Tensor]:
    """
    Per-sample product ``M_n t_n`` of the Hessian of ``KL(old || new)`` in the distribution parameters
    (evaluated at ``new = old``) with tangents ``t`` of those parameters.

    :param distribution: the distribution (only its type is used)
    :param tensors: the (detached) distribution parameters at which ``M`` is evaluated
        (see :func:`distribution_tensors`)
    :param tangents: one tangent per tensor, same shapes
    :return: ``M t``, one tensor per distribution parameter tensor
    """
    return distribution_rule(distribution).metric_product(tensors, tangents)


def detach_distribution(distribution: Distribution) -> Distribution:
    """
    A shallow copy of an SB3 distribution whose torch distribution(s) hold detached parameters.
    Used as the fixed "old" policy of the KL without a second forward pass.

    :param distribution: an SB3 distribution on which ``proba_distribution`` was called
    :return: the detached copy (the input is left untouched)
    """
    rule = distribution_rule(distribution)
    detached = copy.copy(distribution)
    detached.distribution = rule.detached(distribution)
    return detached


def kl_per_sample(old_distribution: Distribution, new_distribution: Distribution, joint: bool = True) -> th.Tensor:
    """
    ``KL(old || new)`` per sample.

    SB3's :func:`~stable_baselines3.common.distributions.kl_divergence` returns one value per action dimension
    for the factorized distributions (diagonal Gaussian, gSDE, Bernoulli) and one value per sample for the others
    (Categorical, and MultiCategorical, whose dimensions it sums).

    :param old_distribution: the behaviour (old) policy's distribution
    :param new_distribution: the candidate (new) policy's distribution
    :param joint: ``True``: the KL of the joint action distribution (the sum over action dimensions);
        ``False``: the mean over action dimensions, as ``kl_divergence(...).mean()`` in sb3-contrib TRPO
    :return: tensor of shape ``(batch_size,)``
    """
    kl = kl_divergence(old_distribution, new_distribution)
    if kl.dim() > 1:
        kl = kl.flatten(start_dim=1)
        kl = kl.sum(dim=1) if joint else kl.mean(dim=1)
    return kl


def mean_kl(old_distribution: Distribution, new_distribution: Distribution, joint: bool = True) -> th.Tensor:
    """
    ``KL(old || new)`` averaged over the batch: the quantity the trust region bounds.

    A KL is ``>= 0``; float32 rounding makes a vanishing one come out slightly negative, so the mean is clamped at 0.

    :param old_distribution: the behaviour (old) policy's distribution
    :param new_distribution: the candidate (new) policy's distribution
    :param joint: as in :func:`kl_per_sample`
    :return: a scalar tensor
    """
    return kl_per_sample(old_distribution, new_distribution, joint).mean().clamp(min=0.0)


def kl_scale(distribution: Distribution, joint: bool = True) -> float:
    """
    Factor from the KL of the joint action distribution to the KL that :func:`kl_per_sample` returns with the same
    ``joint`` flag: ``1 / d`` for a factorized distribution with ``d`` action dimensions (diagonal Gaussian, gSDE,
    Bernoulli) when ``joint`` is ``False``, else 1. The Fisher matrix of that KL is the joint one times this factor.

    :param distribution: an SB3 distribution on which ``proba_distribution`` was called
    :param joint: as in :func:`kl_per_sample`
    :return: the factor
    """
    rule = distribution_rule(distribution)
    if joint or not rule.per_dimension_kl:
        return 1.0
    return 1.0 / rule.tensors(distribution)[0][0].numel()
