"""The trust-region math against exact small-case computation (explicit Fisher matrix, torch.linalg.solve)."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_contrib.common.utils import conjugate_gradient_solver
from stable_baselines3.common.distributions import kl_divergence
from stable_baselines3.common.policies import ActorCriticPolicy
from torch.func import functional_call
from torch.nn.utils import parameters_to_vector

from sb3_trpo_plus import fisher as distributions
from sb3_trpo_plus.fisher import (
    FisherVectorProduct,
    actor_critic_jvp,
    conjugate_gradient,
    detach_distribution,
    distribution_tensors,
    functional_jvp,
    kl_per_sample,
    mean_kl,
    unflatten_like,
)

ACTION_SPACES = {
    "categorical": (gym.spaces.Discrete(3), {}),
    "multicategorical": (gym.spaces.MultiDiscrete([2, 3]), {}),
    "bernoulli": (gym.spaces.MultiBinary(3), {}),
    "diag_gaussian": (gym.spaces.Box(-1, 1, (2,)), {}),
    "gsde": (gym.spaces.Box(-1, 1, (2,)), {"use_sde": True}),
}


def make_policy(action_space, kwargs, share_features_extractor=True):
    th.manual_seed(0)
    policy = ActorCriticPolicy(
        gym.spaces.Box(-1, 1, (3,)),
        action_space,
        lambda _: 1e-3,
        net_arch=dict(pi=[5], vf=[4]),
        share_features_extractor=share_features_extractor,
        log_std_init=-0.3,
        **kwargs,
    )
    if kwargs.get("use_sde"):
        policy.reset_noise()
    obs = th.randn(7, 3)
    return policy, obs


def actor_params_of(policy, obs):
    params = list(policy.parameters())
    outputs = distribution_tensors(policy.get_distribution(obs))
    grads = th.autograd.grad(sum(o.sum() for o in outputs), params, allow_unused=True)
    return [p for p, g in zip(params, grads) if g is not None]


def explicit_fisher(policy, obs, params):
    """Hessian of mean KL(old || new) in the flat actor parameters, at new = old (full second derivatives)."""
    names = {p: n for n, p in policy.named_parameters()}
    old = detach_distribution(policy.get_distribution(obs))
    theta0 = parameters_to_vector(params).detach()

    # functional_call runs forward(); get_distribution is what we need, so wrap it
    class Wrapper(th.nn.Module):
        def __init__(self):
            super().__init__()
            self.policy = policy

        def forward(self, o):
            return tuple(distribution_tensors(self.policy.get_distribution(o)))

    wrapper = Wrapper()

    def mean_kl_from_theta(theta):
        values = {"policy." + names[p]: chunk for p, chunk in zip(params, unflatten_like(theta, params))}
        tensors = functional_call(wrapper, values, (obs,), strict=False)
        new = detach_distribution(policy.get_distribution(obs))  # right type; parameters replaced below
        if len(tensors) == 2 and isinstance(new.distribution, th.distributions.Normal):
            new.distribution = th.distributions.Normal(tensors[0], tensors[1])
        elif isinstance(new.distribution, list):
            new.distribution = [th.distributions.Categorical(logits=t) for t in tensors]
        elif isinstance(new.distribution, th.distributions.Bernoulli):
            new.distribution = th.distributions.Bernoulli(logits=tensors[0])
        else:
            new.distribution = th.distributions.Categorical(logits=tensors[0])
        return kl_per_sample(old, new).mean()

    return th.autograd.functional.hessian(mean_kl_from_theta, theta0)


def make_jvp(path, policy, obs, params):
    if path == "fast":
        jvp_fn = actor_critic_jvp(policy, obs, params)
        if jvp_fn is None:
            pytest.skip("no fast path for this policy (torch.func is used)")
        return jvp_fn
    return functional_jvp(policy, obs, params)


@pytest.mark.parametrize("path", ["functional", "fast"])
@pytest.mark.parametrize("name", list(ACTION_SPACES))
@pytest.mark.parametrize("share_features_extractor", [True, False])
def test_fisher_vector_product_matches_explicit_fisher(name, share_features_extractor, path):
    action_space, kwargs = ACTION_SPACES[name]
    policy, obs = make_policy(action_space, kwargs, share_features_extractor)
    params = actor_params_of(policy, obs)
    # value-function parameters never belong to the actor
    assert not any(p is q for p in params for q in policy.value_net.parameters())
    fisher = explicit_fisher(policy, obs, params)
    assert th.allclose(fisher, fisher.T, atol=1e-6)
    damping = 0.1
    fvp = FisherVectorProduct(policy.get_distribution(obs), params, make_jvp(path, policy, obs, params), damping)
    for _ in range(3):
        vector = th.randn(fisher.shape[0])
        expected = fisher @ vector + damping * vector
        assert th.allclose(fvp(vector), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", list(ACTION_SPACES))
def test_fisher_vector_product_of_the_head_on_given_features_matches_explicit_fisher(name):
    """
    actor_trains_features=False: the Fisher of the actor's own layers (the shared extractor left out), with the
    features computed once and given to the product (the extractor is not run), is the explicit one of those layers.
    """
    action_space, kwargs = ACTION_SPACES[name]
    policy, obs = make_policy(action_space, kwargs)
    # make_policy's extractor (FlattenExtractor) has no parameters: a shared one with parameters, left out of the step
    policy.pi_features_extractor = policy.features_extractor = th.nn.Sequential(th.nn.Linear(3, 3), th.nn.Tanh())
    extractor = set(policy.features_extractor.parameters())
    params = [p for p in actor_params_of(policy, obs) if p not in extractor]
    with th.no_grad():
        features = policy.extract_features(obs)
    jvp_fn = actor_critic_jvp(policy, obs, params, features)
    if jvp_fn is None:
        pytest.skip("no fast path for this policy (torch.func is used)")
    fisher = explicit_fisher(policy, obs, params)
    damping = 0.1
    fvp = FisherVectorProduct(policy.get_distribution(obs), params, jvp_fn, damping)
    for _ in range(3):
        vector = th.randn(fisher.shape[0])
        assert th.allclose(fvp(vector), fisher @ vector + damping * vector, rtol=1e-4, atol=1e-6)
    # features given with extractor parameters among the tangents' parameters: refused, not silently wrong
    with pytest.raises(ValueError, match="features given"):
        actor_critic_jvp(policy, obs, actor_params_of(policy, obs), features)


@pytest.mark.parametrize("name", list(ACTION_SPACES))
def test_conjugate_gradient_solves_damped_fisher_system(name):
    action_space, kwargs = ACTION_SPACES[name]
    policy, obs = make_policy(action_space, kwargs)
    params = actor_params_of(policy, obs)
    damping = 0.05
    fisher = explicit_fisher(policy, obs, params) + damping * th.eye(sum(p.numel() for p in params))
    rhs = th.randn(fisher.shape[0])
    expected = th.linalg.solve(fisher, rhs)
    fvp = FisherVectorProduct(policy.get_distribution(obs), params, functional_jvp(policy, obs, params), damping)
    solution, product = conjugate_gradient(fvp, rhs, max_iter=4 * fisher.shape[0], residual_tol=1e-14)
    assert th.allclose(solution, expected, rtol=1e-3, atol=1e-4)
    # the product it returns is (F + damping * I) x, of the x it returns
    assert th.allclose(product, fisher @ solution, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("max_iter", [0, 1, 3, 10])
def test_conjugate_gradient_is_sb3_contrib_solver_with_product(max_iter):
    """The iterates of sb3-contrib's solver, from the same random start, and A x (the step length's s^T A s) with them."""
    generator = th.Generator().manual_seed(0)
    basis = th.randn(12, 12, generator=generator)
    matrix = basis @ basis.T / 12 + 0.1 * th.eye(12)
    rhs = th.randn(12, generator=generator)
    th.manual_seed(1)
    expected = conjugate_gradient_solver(lambda v: matrix @ v, rhs, max_iter=max_iter)
    th.manual_seed(1)
    solution, product = conjugate_gradient(lambda v: matrix @ v, rhs, max_iter=max_iter)
    assert th.equal(solution, expected)
    assert th.allclose(product, matrix @ solution, rtol=1e-5, atol=1e-6)
    assert (solution @ product).item() == pytest.approx((solution @ matrix @ solution).item(), rel=1e-5, abs=1e-10)


def test_conjugate_gradient_stops_at_residual_tolerance():
    """A right-hand side already solved by the start (residual below the tolerance): no product after the first."""
    calls = []

    def product(vector):
        calls.append(vector)
        return 2.0 * vector

    solution, image = conjugate_gradient(product, th.zeros(5), max_iter=10, residual_tol=1e-6)
    assert len(calls) == 1
    assert th.allclose(image, 2.0 * solution)


@pytest.mark.parametrize("name", ["categorical", "diag_gaussian"])
def test_fisher_vector_product_matches_double_backward(name):
    """Same product as sb3-contrib's Hessian of KL(new || old) by double backward (1-D actions: same KL scale)."""
    action_space = gym.spaces.Discrete(3) if name == "categorical" else gym.spaces.Box(-1, 1, (1,))
    policy, obs = make_policy(action_space, {})
    params = actor_params_of(policy, obs)
    distribution = copy.copy(policy.get_distribution(obs))
    with th.no_grad():
        old = copy.copy(policy.get_distribution(obs))
    kl = kl_divergence(distribution, old).mean()
    grad_kl = th.cat([g.reshape(-1) for g in th.autograd.grad(kl, params, create_graph=True)])
    vector = th.randn_like(grad_kl)
    expected = th.cat([g.reshape(-1) for g in th.autograd.grad(grad_kl @ vector, params)])
    fvp = FisherVectorProduct(policy.get_distribution(obs), params, functional_jvp(policy, obs, params), 0.0)
    assert th.allclose(fvp(vector), expected, rtol=1e-4, atol=1e-6)


def test_kl_per_sample_is_joint_kl():
    """KL of a factorized distribution is the sum over action dimensions (SB3 returns one value per dimension)."""
    policy, obs = make_policy(gym.spaces.Box(-1, 1, (2,)), {})
    old = detach_distribution(policy.get_distribution(obs))
    with th.no_grad():
        policy.log_std.add_(0.2)
    new = detach_distribution(policy.get_distribution(obs))
    mu0, s0 = old.distribution.loc, old.distribution.scale
    mu1, s1 = new.distribution.loc, new.distribution.scale
    closed_form = (th.log(s1 / s0) + (s0**2 + (mu0 - mu1) ** 2) / (2 * s1**2) - 0.5).sum(dim=1)
    assert th.allclose(kl_per_sample(old, new), closed_form)
    assert np.all(kl_per_sample(old, new).numpy() > 0)


def test_mean_kl_is_the_batch_mean_clamped_at_zero(monkeypatch):
    """The trust region's KL: the batch mean of ``kl_per_sample``, and a rounding-negative mean reads as 0."""
    policy, obs = make_policy(gym.spaces.Box(-1, 1, (2,)), {})
    old = detach_distribution(policy.get_distribution(obs))
    with th.no_grad():
        policy.log_std.add_(0.2)
    new = detach_distribution(policy.get_distribution(obs))
    assert mean_kl(old, new).item() == kl_per_sample(old, new).mean().item() > 0
    assert mean_kl(old, new, joint=False).item() == kl_per_sample(old, new, joint=False).mean().item()
    # float32 rounding of a vanishing KL
    monkeypatch.setattr(distributions, "kl_per_sample", lambda *args: th.tensor([-1e-9, -3e-9]))
    assert mean_kl(old, new).item() == 0.0


def test_unflatten_like_checks_size():
    params = [th.nn.Parameter(th.zeros(2, 3)), th.nn.Parameter(th.zeros(4))]
    chunks = unflatten_like(th.arange(10.0), params)
    assert [c.shape for c in chunks] == [(2, 3), (4,)]
    with pytest.raises(ValueError, match="entries"):
        unflatten_like(th.arange(11.0), params)


def test_fast_path_on_nature_cnn_matches_torch_func():
    from stable_baselines3.common.policies import ActorCriticCnnPolicy

    th.manual_seed(0)
    policy = ActorCriticCnnPolicy(gym.spaces.Box(0, 255, (4, 36, 36), np.uint8), gym.spaces.Discrete(4), lambda _: 1e-3)
    obs = th.randint(0, 256, (6, 4, 36, 36)).float()
    params = actor_params_of(policy, obs)
    assert not any(p is q for p in params for q in policy.value_net.parameters())
    vector = th.randn(sum(p.numel() for p in params))
    fast = FisherVectorProduct(policy.get_distribution(obs), params, actor_critic_jvp(policy, obs, params), 0.0)
    reference = FisherVectorProduct(policy.get_distribution(obs), params, functional_jvp(policy, obs, params), 0.0)
    expected = reference(vector)
    assert (fast(vector) - expected).norm() <= 1e-4 * expected.norm()


def test_distribution_rules_cover_every_sb3_distribution():
    # One entry per SB3 action distribution: a distribution SB3 adds must get its entry here
    import stable_baselines3.common.distributions as sb3_distributions

    from sb3_trpo_plus.fisher import DISTRIBUTION_RULES

    base = sb3_distributions.Distribution
    sb3_classes = {cls for cls in vars(sb3_distributions).values() if isinstance(cls, type) and issubclass(cls, base)}
    assert sb3_classes - {base} == set(DISTRIBUTION_RULES)
