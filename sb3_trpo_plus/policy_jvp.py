"""
The forward-mode product ``v -> J v`` of a policy's distribution parameters with respect to its parameters: what
the Fisher-vector product needs to know of the structure of Stable-Baselines3's policies.

Two ways: :func:`actor_critic_jvp`, fast, for SB3's standard ``ActorCriticPolicy`` (hand-written tangent rules of
:mod:`sb3_trpo_plus.jvp`), and :func:`functional_jvp`, for any policy with a ``get_distribution`` method
(``torch.func.jvp``).
"""

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import MlpExtractor
from stable_baselines3.common.type_aliases import PyTorchObs
from torch import nn
from torch.func import jvp

from sb3_trpo_plus.distributions import DISTRIBUTION_RULES, distribution_tensors
from sb3_trpo_plus.jvp import linearize

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
