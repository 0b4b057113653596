"""
The Fisher-vector product of the trust-region step, and the conjugate gradient that uses it.

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

So ``F v`` needs one forward-mode product ``J v`` (:func:`actor_critic_jvp`, with the tangent rules of SB3's layers in
:mod:`sb3_trpo_plus.jvp`; :func:`functional_jvp` for any other policy), one closed-form product ``M (J v)`` and one
backward pass ``J^T u``: no second-order autograd graph (:class:`FisherVectorProduct`).

Each distribution is one :class:`DistributionRule` of :data:`DISTRIBUTION_RULES`: the tensors that parametrize it,
``M t`` in those tensors, a detached copy (the fixed "old" policy of the KL), whether SB3's KL is per action
dimension, and how the tangent of the action net's output becomes the tangent of those tensors. Supporting a new
distribution is adding one entry.

Vectors are flat, in the order of the actor's parameters (:func:`flatten_params`, :func:`assign_params`,
:func:`flat_grad`).

This module uses nothing of ``sb3_trpo_plus`` but :mod:`sb3_trpo_plus.jvp`.
"""

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
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
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import MlpExtractor
from stable_baselines3.common.type_aliases import PyTorchObs
from torch import nn
from torch.func import jvp

from sb3_trpo_plus.jvp import linearize


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


def flat_grad(
    outputs: th.Tensor | Sequence[th.Tensor],
    params: Sequence[nn.Parameter],
    grad_outputs: Sequence[th.Tensor] | None = None,
    retain_graph: bool = False,
) -> th.Tensor:
    """
    The gradient (or vector-Jacobian product ``u^T J``) of ``outputs`` with respect to ``params``, as one flat
    vector, with zeros for the parameters the outputs do not depend on (unlike sb3-contrib's ``flat_grad``, which
    drops them and so shifts the coordinates).

    :param outputs: a scalar, or the tensors of a vector-Jacobian product
    :param params: the parameters (the coordinates of the result)
    :param grad_outputs: ``u``, one tensor per output (``None`` for a scalar)
    :param retain_graph: keep the graph for another backward pass
    :return: flat vector with as many entries as all ``params`` together
    """
    grads = th.autograd.grad(outputs, params, grad_outputs=grad_outputs, retain_graph=retain_graph, allow_unused=True)
    return th.cat([(grad if grad is not None else th.zeros_like(param)).reshape(-1) for grad, param in zip(grads, params)])


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
    The tensors that parametrize an SB3 action distribution, in the order of its rule's ``metric_product``.

    :param distribution: an SB3 distribution on which ``proba_distribution`` was called
    :return: ``[logits]`` (Categorical, Bernoulli), one logits tensor per action dimension (MultiCategorical)
        or ``[mean, std]`` (Gaussian families), each of shape ``(batch_size, ...)``
    """
    return distribution_rule(distribution).tensors(distribution)


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


#: one tangent per parameter -> one tangent per distribution tensor
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


def actor_critic_jvp(
    policy: BasePolicy, obs: PyTorchObs, params: Sequence[nn.Parameter], features: th.Tensor | None = None
) -> JvpFn | None:
    """
    Fast forward-mode product ``v -> J v`` for SB3's ``ActorCriticPolicy`` family (Mlp, Cnn), built from
    :func:`sb3_trpo_plus.jvp.linearize`: the network is run once, then each product costs one tangent pass
    with hand-written rules (convolutions and linear layers), several times cheaper than ``torch.func.jvp``.

    :param policy: the policy
    :param obs: the observations (batch) at which the Jacobian is taken
    :param params: the parameters the tangents refer to (the others have zero tangent)
    :param features: the actor's features of ``obs``, when none of ``params`` is in the actor's features extractor:
        the extractor is then not run (its tangent is zero)
    :return: the product function, or ``None`` when the policy does not have the standard structure
        (custom ``get_distribution``, dict observations, gSDE, ...): use :func:`functional_jvp` then
    """
    if not (
        isinstance(policy, ActorCriticPolicy)
        and type(policy.mlp_extractor) is MlpExtractor
        and isinstance(obs, th.Tensor)
        and type(policy).get_distribution is ActorCriticPolicy.get_distribution
        and type(policy)._get_action_dist_from_latent is ActorCriticPolicy._get_action_dist_from_latent
        and type(policy).extract_features is ActorCriticPolicy.extract_features
    ):
        return None
    # (exact type: a subclass may compute its parameters otherwise)
    rule = DISTRIBUTION_RULES.get(type(policy.action_dist))
    if rule is None or rule.net_tangents is None:
        return None
    if features is None:
        with th.no_grad():
            preprocessed = preprocess_obs(obs, policy.observation_space, normalize_images=policy.normalize_images)
        extractor = linearize(policy.pi_features_extractor, preprocessed)  # type: ignore[arg-type]
        features = extractor.output
    else:
        if not set(params).isdisjoint(policy.pi_features_extractor.parameters()):
            raise ValueError("features given, but some of params are in the features extractor")
        extractor = None
    latent = linearize(policy.mlp_extractor.policy_net, features)
    head = linearize(policy.action_net, latent.output)
    log_std = getattr(policy, "log_std", None)
    net_tangents = rule.net_tangents(policy.action_dist, head.output, log_std)

    def jvp_fn(tangents: Sequence[th.Tensor]) -> list[th.Tensor]:
        param_tangents = dict(zip(params, tangents, strict=True))
        d_features = None if extractor is None else extractor.jvp(param_tangents)
        d_output = head.jvp(param_tangents, latent.jvp(param_tangents, d_features))
        d_log_std = param_tangents.get(log_std) if log_std is not None else None  # type: ignore[call-overload]
        return net_tangents(d_output, d_log_std)

    return jvp_fn


@contextlib.contextmanager
def _eval_mode(policy: BasePolicy) -> Iterator[None]:
    """The policy in evaluation mode (BatchNorm on its running statistics, no Dropout), its mode restored after."""
    was_training = policy.training
    policy.set_training_mode(False)
    try:
        yield
    finally:
        policy.set_training_mode(was_training)


def _first(observations: PyTorchObs) -> PyTorchObs:
    if isinstance(observations, dict):
        return {key: value[0:1] for key, value in observations.items()}
    return observations[0:1]


def actor_parameters(policy: BasePolicy, observations: PyTorchObs) -> list[nn.Parameter]:
    """
    The parameters the action distribution depends on, in ``policy.parameters()`` order.

    Found through the autograd graph of one observation, not from parameter names, so that custom policies and
    ``share_features_extractor`` True or False are handled alike.

    :param policy: the policy
    :param observations: observations to run the policy on; only the first is used
    :return: the actor parameters
    """
    obs = _first(observations)
    if isinstance(obs, dict):
        obs = {key: th.nan_to_num(value) for key, value in obs.items()}
    else:
        obs = th.nan_to_num(obs)
    params = [param for param in policy.parameters() if param.requires_grad]
    # In evaluation mode, whatever the policy's mode: a batch of one is valid for BatchNorm there, no running
    # statistic moves, and the parameters the distribution depends on are the same in both modes
    with _eval_mode(policy):
        outputs = distribution_tensors(policy.get_distribution(obs))  # type: ignore[operator]
    grads = th.autograd.grad(th.cat([output.reshape(-1) for output in outputs]).sum(), params, allow_unused=True)
    return [param for param, grad in zip(params, grads, strict=True) if grad is not None]


class FisherVectorProduct:
    """
    Analytic (Gauss-Newton) Fisher-vector product ``v -> (F + damping * I) v`` with ``F = scale * J^T M J / N``.

    :param distribution: the policy's distribution on the batch, computed with autograd enabled
        (its parameter tensors keep the graph to ``params``, used for ``J^T``)
    :param params: the actor parameters (the coordinates of ``v``)
    :param jvp_fn: ``J v`` for one tangent per parameter (:func:`actor_critic_jvp`, :func:`functional_jvp`)
    :param damping: the damping added to the diagonal
    :param scale: factor applied to ``F`` (not to the damping): :func:`kl_scale` gives
        the one that makes ``F`` the Hessian of the KL that the trust region bounds
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
        rule = distribution_rule(distribution)
        self.metric_product = rule.metric_product
        self.outputs = rule.tensors(distribution)
        self.detached_outputs = [output.detach() for output in self.outputs]
        self.batch_size = self.outputs[0].shape[0]

    def __call__(self, vector: th.Tensor, retain_graph: bool = True) -> th.Tensor:
        # J v: how the distribution parameters move along v
        output_tangents = self.jvp_fn(unflatten_like(vector, self.params))
        # M (J v) / N: the Hessian of the mean KL in the distribution parameters
        weighted = [
            product * (self.scale / self.batch_size) for product in self.metric_product(self.detached_outputs, output_tangents)
        ]
        # J^T (M J v / N): one backward pass through the retained graph
        return flat_grad(self.outputs, self.params, grad_outputs=weighted, retain_graph=retain_graph) + (self.damping * vector)


def policy_fisher_vector_product(
    policy: BasePolicy,
    obs: PyTorchObs,
    distribution: Distribution,
    params: Sequence[nn.Parameter],
    damping: float,
    features: th.Tensor | None = None,
) -> FisherVectorProduct:
    """
    The Fisher-vector product of a policy, ``v -> (F + damping * I) v`` with ``F`` the Hessian of the KL the trust
    region bounds (averaged over action dimensions, as sb3-contrib's): the one entry point of this module and the
    modules below it. ``J v`` comes from hand-written tangent rules for SB3's actor-critic policies, from
    ``torch.func.jvp`` for any other policy.

    :param policy: the policy
    :param obs: the observations of the batch
    :param distribution: the policy's distribution on ``obs``, computed with autograd enabled
    :param params: the actor parameters (the coordinates of ``v``)
    :param damping: the damping added to the diagonal
    :param features: the shared features of ``obs``, when the step leaves the features extractor alone
    """
    jvp_fn = actor_critic_jvp(policy, obs, params, features) or functional_jvp(policy, obs, params)
    return FisherVectorProduct(distribution, params, jvp_fn, damping, scale=kl_scale(distribution, joint=False))


def conjugate_gradient(
    matrix_vector_product: Callable[[th.Tensor], th.Tensor],
    b: th.Tensor,
    max_iter: int = 10,
    residual_tol: float = 1e-10,
) -> tuple[th.Tensor, th.Tensor]:
    """
    Conjugate gradient for ``A x = b`` (``A`` symmetric positive definite), returning ``x`` and ``A x``.

    The iterations of sb3-contrib's ``conjugate_gradient_solver`` (the same start ``x_0 = 1e-4 * randn``, drawn from
    torch's global generator as there, the same stopping rules and the same ``x``), except that the residual is also
    updated after the last step: ``A x = b - r`` then comes for free, where the trust-region step length
    ``x^T A x`` would otherwise cost one more product. (``b - r`` is the recursively updated residual, equal to ``A x``
    up to floating-point drift.)

    :param matrix_vector_product: ``v -> A v``
    :param b: the right-hand side
    :param max_iter: the number of products after the first one (``A x_0``)
    :param residual_tol: stop once ``||r||^2`` falls below it
    :return: ``x`` and ``A x``
    """
    x = 1e-4 * th.randn_like(b)
    residual = b - matrix_vector_product(x)
    residual_squared_norm = residual.dot(residual)
    direction = residual.clone()
    for _ in range(max_iter):
        if residual_squared_norm < residual_tol:
            break
        product = matrix_vector_product(direction)
        alpha = residual_squared_norm / direction.dot(product)
        x += alpha * direction
        residual -= alpha * product
        new_residual_squared_norm = residual.dot(residual)
        # the next direction: the new residual, made A-conjugate to the previous directions
        direction = residual + (new_residual_squared_norm / residual_squared_norm) * direction
        residual_squared_norm = new_residual_squared_norm
    return x, b - residual
