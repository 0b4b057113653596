"""
Numerical pieces of the trust-region update, typed and testable on their own.

The Fisher information matrix of a policy with distribution parameters ``y = f(obs; theta)`` is the Hessian of
``KL(pi_old || pi_theta)`` at ``theta = theta_old``. By the chain rule it is a Gauss-Newton product

    F = (1 / N) * sum_n J_n^T M_n J_n

with ``J_n`` the Jacobian of the distribution parameters of sample ``n`` with respect to ``theta`` and ``M_n`` the
Hessian of the KL in those parameters (the Fisher metric of the distribution family). ``M`` is known in closed form
for every action distribution of Stable-Baselines3, so ``F v`` needs one forward-mode product ``J v``, one closed-form
product ``M (J v)`` and one backward pass ``J^T u``: no second-order autograd graph.

Closed forms used here (``p``: probabilities, ``sigma``: standard deviation):

- Categorical, on logits: ``M = diag(p) - p p^T``
- MultiCategorical: block diagonal of the above, one block per action dimension
- Bernoulli, on logits: ``M = diag(p (1 - p))``
- Gaussian (diagonal, gSDE, squashed), on ``(mean, std)``: ``M = diag(1 / sigma^2, 2 / sigma^2)``

This module uses nothing else of ``sb3_trpo_plus``.
"""

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from typing import cast

import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
    kl_divergence,
)
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import MlpExtractor
from stable_baselines3.common.type_aliases import PyTorchObs
from torch import nn
from torch.func import jvp

SUPPORTED_DISTRIBUTIONS = (
    CategoricalDistribution,
    MultiCategoricalDistribution,
    BernoulliDistribution,
    DiagGaussianDistribution,
    StateDependentNoiseDistribution,
)


def _is_gaussian(distribution: Distribution) -> bool:
    return isinstance(distribution, (DiagGaussianDistribution, StateDependentNoiseDistribution))


def distribution_tensors(distribution: Distribution) -> list[th.Tensor]:
    """
    The tensors that parametrize an SB3 action distribution, in the order used by :func:`fisher_metric_product`.

    :param distribution: an SB3 distribution on which ``proba_distribution`` was called
    :return: ``[logits]`` (Categorical, Bernoulli), one logits tensor per action dimension (MultiCategorical)
        or ``[mean, std]`` (Gaussian families), each of shape ``(batch_size, ...)``
    """
    if isinstance(distribution, MultiCategoricalDistribution):
        return [dist.logits for dist in distribution.distribution]
    if isinstance(distribution, (CategoricalDistribution, BernoulliDistribution)):
        return [distribution.distribution.logits]
    if _is_gaussian(distribution):
        normal = cast(th.distributions.Normal, distribution.distribution)
        return [normal.loc, normal.scale]
    raise ValueError(
        f"Unsupported action distribution {type(distribution).__name__}: "
        f"expected one of {[cls.__name__ for cls in SUPPORTED_DISTRIBUTIONS]}"
    )


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
    if isinstance(distribution, (CategoricalDistribution, MultiCategoricalDistribution)):
        products = []
        for logits, tangent in zip(tensors, tangents, strict=True):
            probs = th.softmax(logits, dim=-1)
            weighted = probs * tangent
            products.append(weighted - probs * weighted.sum(dim=-1, keepdim=True))
        return products
    if isinstance(distribution, BernoulliDistribution):
        probs = th.sigmoid(tensors[0])
        return [probs * (1.0 - probs) * tangents[0]]
    if _is_gaussian(distribution):
        inv_variance = tensors[1].pow(-2)
        return [tangents[0] * inv_variance, 2.0 * tangents[1] * inv_variance]
    raise ValueError(f"Unsupported action distribution {type(distribution).__name__}")


def detach_distribution(distribution: Distribution) -> Distribution:
    """
    A shallow copy of an SB3 distribution whose torch distribution(s) hold detached parameters.
    Used as the fixed "old" policy of the KL without a second forward pass.

    :param distribution: an SB3 distribution on which ``proba_distribution`` was called
    :return: the detached copy (the input is left untouched)
    """
    detached = copy.copy(distribution)
    if isinstance(distribution, MultiCategoricalDistribution):
        detached.distribution = [th.distributions.Categorical(logits=d.logits.detach()) for d in distribution.distribution]
    elif isinstance(distribution, CategoricalDistribution):
        detached.distribution = th.distributions.Categorical(logits=distribution.distribution.logits.detach())
    elif isinstance(distribution, BernoulliDistribution):
        detached.distribution = th.distributions.Bernoulli(logits=distribution.distribution.logits.detach())
    elif _is_gaussian(distribution):
        normal = cast(th.distributions.Normal, distribution.distribution)
        detached.distribution = th.distributions.Normal(normal.loc.detach(), normal.scale.detach())
    else:
        raise ValueError(f"Unsupported action distribution {type(distribution).__name__}")
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


def kl_scale(distribution: Distribution, joint: bool = True) -> float:
    """
    Factor from the KL of the joint action distribution to the KL that :func:`kl_per_sample` returns with the same
    ``joint`` flag: ``1 / d`` for a factorized distribution with ``d`` action dimensions (diagonal Gaussian, gSDE,
    Bernoulli) when ``joint`` is ``False``, else 1. The Fisher matrix of that KL is the joint one times this factor.

    :param distribution: an SB3 distribution on which ``proba_distribution`` was called
    :param joint: as in :func:`kl_per_sample`
    :return: the factor
    """
    if joint or not (_is_gaussian(distribution) or isinstance(distribution, BernoulliDistribution)):
        return 1.0
    return 1.0 / distribution_tensors(distribution)[0][0].numel()


def flatten_params(params: Sequence[th.Tensor]) -> th.Tensor:
    """
    Concatenate tensors into one flat vector (a copy), in logical (row-major) order whatever their memory format
    (``parameters_to_vector`` needs contiguous parameters, which ``channels_last`` convolution weights are not).

    :param params: the parameters (or gradients)
    :return: flat vector
    """
    return th.cat([param.detach().reshape(-1) for param in params])


def assign_params(params: Sequence[nn.Parameter], vector: th.Tensor) -> None:
    """
    Copy a flat vector into parameters in place, keeping their memory format (inverse of :func:`flatten_params`).

    :param params: the parameters to write
    :param vector: flat vector with as many entries as all ``params`` together
    """
    with th.no_grad():
        for param, chunk in zip(params, unflatten_like(vector, params), strict=True):
            param.copy_(chunk)


def unflatten_like(vector: th.Tensor, params: Sequence[nn.Parameter]) -> list[th.Tensor]:
    """
    Split a flat vector into views shaped like ``params`` (inverse of ``parameters_to_vector``).

    :param vector: flat vector with as many entries as all ``params`` together
    :param params: the parameters giving the shapes
    :return: list of views of ``vector``
    """
    chunks = []
    start = 0
    for param in params:
        numel = param.numel()
        chunks.append(vector[start : start + numel].view_as(param))
        start += numel
    if start != vector.numel():
        raise ValueError(f"vector has {vector.numel()} entries but the parameters have {start}")
    return chunks


JvpFn = Callable[[Sequence[th.Tensor]], list[th.Tensor]]


@contextlib.contextmanager
def _substituted(module: nn.Module, params: Sequence[nn.Parameter], values: Sequence[th.Tensor]) -> Iterator[None]:
    """
    Temporarily replace ``params`` by ``values`` in ``module`` (and all its submodules).

    Each submodule object is visited once, so a module registered under several names (SB3 registers the shared
    features extractor as ``features_extractor``, ``pi_features_extractor`` and ``vf_features_extractor``) is
    substituted and restored exactly once. (``torch.func.functional_call`` does not restore such aliases correctly.)
    """
    owners: dict[nn.Parameter, tuple[nn.Module, str]] = {}
    for submodule in module.modules():
        for attr, param in submodule._parameters.items():
            if param is not None:
                owners.setdefault(param, (submodule, attr))  # type: ignore[arg-type]
    swapped = []
    try:
        for param, value in zip(params, values, strict=True):
            owner, attr = owners[param]
            owner._parameters[attr] = value  # type: ignore[assignment]
            swapped.append((owner, attr, param))
        yield
    finally:
        for owner, attr, param in swapped:
            owner._parameters[attr] = param


def functional_jvp(policy: BasePolicy, obs: PyTorchObs, params: Sequence[nn.Parameter]) -> JvpFn:
    """
    Forward-mode product ``v -> J v`` of the distribution parameters with respect to ``params``, for any policy
    that has a ``get_distribution(obs)`` method (generic path, based on ``torch.func.jvp``).

    :param policy: the policy
    :param obs: the observations (batch) at which the Jacobian is taken
    :param params: the parameters the tangents refer to (the others have zero tangent)
    :return: a function mapping one tangent per parameter to one tangent per distribution tensor
    """
    primals = tuple(param.detach() for param in params)

    def distribution_of(*values: th.Tensor) -> tuple[th.Tensor, ...]:
        with _substituted(policy, params, values):
            return tuple(distribution_tensors(policy.get_distribution(obs)))  # type: ignore[operator]

    def jvp_fn(tangents: Sequence[th.Tensor]) -> list[th.Tensor]:
        output_tangents = jvp(distribution_of, primals, tuple(tangents))[1]
        return list(output_tangents)

    return jvp_fn


class FisherVectorProduct:
    """
    Analytic (Gauss-Newton) Fisher-vector product ``v -> (F + damping * I) v`` with ``F = scale * J^T M J / N``.

    :param distribution: the policy's distribution on the batch, computed with autograd enabled
        (its parameter tensors keep the graph to ``params``, used for ``J^T``)
    :param params: the actor parameters (the coordinates of ``v``)
    :param jvp_fn: ``J v`` for one tangent per parameter (see :func:`functional_jvp`)
    :param damping: the damping added to the diagonal
    :param scale: factor applied to ``F`` (not to the damping): :func:`kl_scale` gives the one that makes ``F`` the
        Hessian of the KL that the trust region bounds
    """

    def __init__(
        self,
        distribution: Distribution,
        params: Sequence[nn.Parameter],
        jvp_fn: JvpFn,
        damping: float,
        scale: float = 1.0,
    ) -> None:
        self.distribution = distribution
        self.params = list(params)
        self.jvp_fn = jvp_fn
        self.damping = damping
        self.scale = scale
        self.outputs = distribution_tensors(distribution)
        self.detached_outputs = [output.detach() for output in self.outputs]
        self.batch_size = self.outputs[0].shape[0]

    def __call__(self, vector: th.Tensor, retain_graph: bool = True) -> th.Tensor:
        # J v: how the distribution parameters move along v
        output_tangents = self.jvp_fn(unflatten_like(vector, self.params))
        # M (J v) / N: the Hessian of the mean KL in the distribution parameters
        weighted = [
            product * (self.scale / self.batch_size)
            for product in fisher_metric_product(self.distribution, self.detached_outputs, output_tangents)
        ]
        # J^T (M J v / N): one backward pass through the retained graph
        grads = th.autograd.grad(
            self.outputs, self.params, grad_outputs=weighted, retain_graph=retain_graph, allow_unused=True
        )
        flat = th.cat(
            [(grad if grad is not None else th.zeros_like(param)).reshape(-1) for grad, param in zip(grads, self.params)]
        )
        return flat + self.damping * vector


_FAST_DISTRIBUTIONS = (CategoricalDistribution, MultiCategoricalDistribution, BernoulliDistribution, DiagGaussianDistribution)


def actor_critic_jvp(policy: BasePolicy, obs: PyTorchObs, params: Sequence[nn.Parameter]) -> JvpFn | None:
    """
    Fast forward-mode product ``v -> J v`` for SB3's ``ActorCriticPolicy`` family (Mlp, Cnn), built from
    :func:`sb3_trpo_plus.jvp.linearize`: the network is run once, then each product costs one tangent pass
    with hand-written rules (convolutions and linear layers), several times cheaper than ``torch.func.jvp``.

    :param policy: the policy
    :param obs: the observations (batch) at which the Jacobian is taken
    :param params: the parameters the tangents refer to (the others have zero tangent)
    :return: the product function, or ``None`` when the policy does not have the standard structure
        (custom ``get_distribution``, dict observations, gSDE, ...): use :func:`functional_jvp` then
    """
    from sb3_trpo_plus.jvp import linearize

    if not (
        isinstance(policy, ActorCriticPolicy)
        and type(policy.mlp_extractor) is MlpExtractor
        and type(policy.action_dist) in _FAST_DISTRIBUTIONS
        and isinstance(obs, th.Tensor)
        and type(policy).get_distribution is ActorCriticPolicy.get_distribution
        and type(policy)._get_action_dist_from_latent is ActorCriticPolicy._get_action_dist_from_latent
        and type(policy).extract_features is ActorCriticPolicy.extract_features
    ):
        return None
    with th.no_grad():
        preprocessed = preprocess_obs(obs, policy.observation_space, normalize_images=policy.normalize_images)
    features = linearize(policy.pi_features_extractor, preprocessed)  # type: ignore[arg-type]
    latent = linearize(policy.mlp_extractor.policy_net, features.output)
    head = linearize(policy.action_net, latent.output)
    action_dist = policy.action_dist
    if isinstance(action_dist, DiagGaussianDistribution):
        std = th.exp(policy.log_std.detach()).expand_as(head.output)

    def jvp_fn(tangents: Sequence[th.Tensor]) -> list[th.Tensor]:
        param_tangents = dict(zip(params, tangents, strict=True))
        d_output = head.jvp(param_tangents, latent.jvp(param_tangents, features.jvp(param_tangents)))
        if isinstance(action_dist, MultiCategoricalDistribution):
            return list(th.split(d_output, list(action_dist.action_dims), dim=1))
        if isinstance(action_dist, DiagGaussianDistribution):
            # std = exp(log_std), broadcast over the batch
            d_log_std = param_tangents.get(policy.log_std)  # type: ignore[call-overload]
            d_std = std * d_log_std if d_log_std is not None else th.zeros_like(std)
            return [d_output, d_std]
        return [d_output]

    return jvp_fn
