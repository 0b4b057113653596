"""
The trust-region step's Fisher-vector product, typed and testable on its own.

The Fisher information matrix of the policy is the Gauss-Newton product ``F = (1 / N) * sum_n J_n^T M_n J_n``
(see :mod:`sb3_trpo_plus.distributions`), so ``F v`` needs one forward-mode product ``J v``
(:mod:`sb3_trpo_plus.policy_jvp`), one closed-form product ``M (J v)`` (one entry per distribution of
:data:`~sb3_trpo_plus.distributions.DISTRIBUTION_RULES`) and one backward pass ``J^T u``: no second-order
autograd graph.
"""

from collections.abc import Callable, Sequence

import torch as th
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import PyTorchObs
from torch import nn

from sb3_trpo_plus import distributions as _distributions
from sb3_trpo_plus import parameters as _parameters
from sb3_trpo_plus.policy_jvp import JvpFn, actor_critic_jvp, functional_jvp


class FisherVectorProduct:
    """
    Analytic (Gauss-Newton) Fisher-vector product ``v -> (F + damping * I) v`` with ``F = scale * J^T M J / N``.

    :param distribution: the policy's distribution on the batch, computed with autograd enabled
        (its parameter tensors keep the graph to ``params``, used for ``J^T``)
    :param params: the actor parameters (the coordinates of ``v``)
    :param jvp_fn: ``J v`` for one tangent per parameter (see :mod:`sb3_trpo_plus.policy_jvp`)
    :param damping: the damping added to the diagonal
    :param scale: factor applied to ``F`` (not to the damping): :func:`~sb3_trpo_plus.distributions.kl_scale` gives
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
        rule = _distributions.distribution_rule(distribution)
        self.metric_product = rule.metric_product
        self.outputs = rule.tensors(distribution)
        self.detached_outputs = [output.detach() for output in self.outputs]
        self.batch_size = self.outputs[0].shape[0]

    def __call__(self, vector: th.Tensor, retain_graph: bool = True) -> th.Tensor:
        # J v: how the distribution parameters move along v
        output_tangents = self.jvp_fn(_parameters.unflatten_like(vector, self.params))
        # M (J v) / N: the Hessian of the mean KL in the distribution parameters
        weighted = [
            product * (self.scale / self.batch_size) for product in self.metric_product(self.detached_outputs, output_tangents)
        ]
        # J^T (M J v / N): one backward pass through the retained graph
        return _parameters.flat_grad(self.outputs, self.params, grad_outputs=weighted, retain_graph=retain_graph) + (
            self.damping * vector
        )


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
    return FisherVectorProduct(distribution, params, jvp_fn, damping, scale=_distributions.kl_scale(distribution, joint=False))


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
