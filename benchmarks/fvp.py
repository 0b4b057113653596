"""
Fisher-vector product: TRPOPlus's analytic product against the double-backward one of sb3-contrib TRPO.

Ways of computing ``F v`` (``F`` the Hessian of the mean KL at the current policy), in one process, on the
same weights, observations and vectors:

- ``double_backward``: sb3-contrib TRPO's own code, called on a policy in PyTorch's default memory format, as
  sb3-contrib runs it: ``TRPO._compute_actor_grad`` (one ``autograd.grad(kl, param, create_graph=True)`` per parameter
  tensor, plus the surrogate gradient), then ``TRPO.hessian_vector_product`` (``grad((grad_kl * v).sum())``).
  ``double_backward_channels_last``: the same on the channels_last copy used below (CNN only), to separate what
  the memory format gives from what the method gives.
- ``double_backward_one_grad``: the double backward in its cheapest form, one ``create_graph`` gradient over all
  actor parameters (what a careful implementation would do), on the default memory format.
- ``analytic``: TRPOPlus's ``FisherVectorProduct`` with ``actor_critic_jvp`` (hand-written tangents) on a
  channels_last policy, as ``TRPOPlus`` builds it for CNN policies: one tangent pass ``J v``, the closed-form
  metric ``M``, one backward pass ``J^T (M J v)``.
- ``functional``: the same with ``functional_jvp`` (``torch.func.jvp``).

Measured for each: the setup (from observations to the product function and the surrogate gradient), one product
(best of ``--repeats`` after a warm-up), a whole ``--cg-steps`` conjugate-gradient solve including the setup (CNN:
one run; MLP: best of 3), and the error against ``double_backward`` (``||a - b|| / ||b||`` and ``max |a - b|``,
worst over ``--vectors`` random vectors, damping 0). Cases: NatureCNN on ``--batch`` Breakout frames (and the
``--cg-sub-sampling-factor`` sub-batch that the conjugate gradient of TRPOPlus sees with ``cg_sub_sampling_factor``),
and two MLPs (Gaussian and categorical actions).

Usage::

    python -m benchmarks.fvp --batch 2048 --threads 2 --repeats 3 --out benchmarks/results/fvp.json
"""

import argparse
import copy
import gc
import time
from collections.abc import Callable
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib import TRPO
from sb3_contrib.common.utils import conjugate_gradient_solver
from stable_baselines3.common.distributions import kl_divergence
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy
from torch import nn

from benchmarks._common import RESULTS_DIR, command_line, machine_info, register_envs, write_json
from benchmarks._timing import best_time
from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus.fisher import FisherVectorProduct, actor_critic_jvp, functional_jvp

Setup = Callable[[], tuple[Callable[..., th.Tensor], th.Tensor]]


def atari_frames(batch: int, seed: int) -> tuple[th.Tensor, spaces.Space, spaces.Space]:
    """``batch`` stacked Breakout frames (4x84x84, uint8, channels first) from 8 envs under a random policy."""
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack, VecTransposeImage

    register_envs()
    n_envs = 8
    env = VecTransposeImage(VecFrameStack(make_atari_env("BreakoutNoFrameskip-v4", n_envs=n_envs, seed=seed), n_stack=4))
    env.action_space.seed(seed)
    frames = [env.reset()]
    while sum(len(f) for f in frames) < batch:
        obs, *_ = env.step(np.array([env.action_space.sample() for _ in range(n_envs)]))
        frames.append(obs)
    observation_space, action_space = env.observation_space, env.action_space
    env.close()
    return th.as_tensor(np.concatenate(frames)[:batch]), observation_space, action_space


def _actor_params(policy: ActorCriticPolicy, obs: th.Tensor) -> list[nn.Parameter]:
    # TRPOPlus's own selection (through the autograd graph); only `policy` is read from `self`
    return TRPOPlus._actor_params(SimpleNamespace(policy=policy), obs)  # type: ignore[arg-type]


def _surrogate(policy: ActorCriticPolicy, obs: th.Tensor, actions: th.Tensor, advantages: th.Tensor) -> tuple[Any, th.Tensor]:
    """The policy's distribution (with graph) and the surrogate objective ``mean(ratio * advantage)`` at ratio 1."""
    distribution = policy.get_distribution(obs)
    log_prob = distribution.log_prob(actions)
    return distribution, (advantages * th.exp(log_prob - log_prob.detach())).mean()


def double_backward_setup(policy: ActorCriticPolicy, obs: th.Tensor, actions: th.Tensor, advantages: th.Tensor) -> Setup:
    """sb3-contrib TRPO's steps, with its own methods: old distribution, KL, ``_compute_actor_grad``."""

    def setup() -> tuple[Callable[..., th.Tensor], th.Tensor]:
        trpo = SimpleNamespace(policy=policy, cg_damping=0.0)
        with th.no_grad():
            old_distribution = copy.copy(policy.get_distribution(obs))
        distribution, objective = _surrogate(policy, obs, actions, advantages)
        kl = kl_divergence(distribution, old_distribution)
        kl_div = kl.mean()
        actor_params, gradient, grad_kl, _ = TRPO._compute_actor_grad(trpo, kl_div, objective)  # type: ignore[arg-type]
        product = partial(TRPO.hessian_vector_product, trpo, actor_params, grad_kl)
        product.damping_holder = trpo  # type: ignore[attr-defined]
        # sb3-contrib averages the KL over action dimensions too (Gaussian: one KL per dimension); the TRPOPlus
        # products below are those of the joint KL (TRPOPlus's update multiplies the same product by 1/d at no cost,
        # sb3-contrib's per-dimension mean): sb3-contrib's F is the joint one divided by this factor
        product.kl_scale = kl.numel() // kl.shape[0]  # type: ignore[attr-defined]
        return product, gradient

    return setup


def double_backward_one_grad_setup(
    policy: ActorCriticPolicy, obs: th.Tensor, actions: th.Tensor, advantages: th.Tensor
) -> Setup:
    """
    The double backward in its cheapest form: one ``autograd.grad(kl, actor_params, create_graph=True)`` call
    (sb3-contrib makes one per parameter tensor, and its product then runs back through all of those graphs).
    """
    actor_params = _actor_params(policy, obs)

    def setup() -> tuple[Callable[..., th.Tensor], th.Tensor]:
        holder = SimpleNamespace(cg_damping=0.0)
        with th.no_grad():
            old_distribution = copy.copy(policy.get_distribution(obs))
        distribution, objective = _surrogate(policy, obs, actions, advantages)
        kl = kl_divergence(distribution, old_distribution)
        grads = th.autograd.grad(objective, actor_params, retain_graph=True)
        gradient = th.cat([grad.reshape(-1) for grad in grads])
        grad_kl = th.cat([g.reshape(-1) for g in th.autograd.grad(kl.mean(), actor_params, create_graph=True)])

        def product(vector: th.Tensor, retain_graph: bool = True) -> th.Tensor:
            grads = th.autograd.grad((grad_kl * vector).sum(), actor_params, retain_graph=retain_graph)
            return th.cat([grad.reshape(-1) for grad in grads]) + holder.cg_damping * vector

        product.damping_holder = holder  # type: ignore[attr-defined]
        product.kl_scale = kl.numel() // kl.shape[0]  # type: ignore[attr-defined]
        return product, gradient

    return setup


def analytic_setup(policy: ActorCriticPolicy, obs: th.Tensor, actions: th.Tensor, advantages: th.Tensor, fast: bool) -> Setup:
    """TRPOPlus's steps (``_update_policy``): forward with graph, surrogate gradient, linearization, product."""
    actor_params = _actor_params(policy, obs)

    def setup() -> tuple[Callable[..., th.Tensor], th.Tensor]:
        distribution, objective = _surrogate(policy, obs, actions, advantages)
        grads = th.autograd.grad(objective, actor_params, retain_graph=True)
        gradient = th.cat([grad.reshape(-1) for grad in grads])
        jvp_fn = actor_critic_jvp(policy, obs, actor_params) if fast else functional_jvp(policy, obs, actor_params)
        if jvp_fn is None:
            raise RuntimeError("actor_critic_jvp does not handle this policy")
        product = FisherVectorProduct(distribution, actor_params, jvp_fn, damping=0.0)
        product.damping_holder = product  # type: ignore[attr-defined]
        product.kl_scale = 1  # type: ignore[attr-defined]
        return product, gradient

    return setup


def _set_damping(product: Callable[..., th.Tensor], damping: float) -> None:
    holder = product.damping_holder  # type: ignore[attr-defined]
    if isinstance(holder, FisherVectorProduct):
        holder.damping = damping
    else:
        holder.cg_damping = damping


def _errors(value: th.Tensor, reference: th.Tensor) -> dict[str, float]:
    diff = (value - reference).double()
    return {
        "rel": (diff.norm() / reference.double().norm()).item(),
        "max_abs": diff.abs().max().item(),
        "max_abs_over_max_ref": (diff.abs().max() / reference.double().abs().max()).item(),
    }


def measure(
    setups: dict[str, Setup],
    n_params: int,
    repeats: int,
    cg_steps: int,
    damping: float,
    n_vectors: int,
    seed: int,
    cg_repeats: int = 1,
    collect: bool = True,
) -> dict[str, Any]:
    """Setup, product and CG times of each method, and their errors against the first one."""
    result: dict[str, Any] = {"setup_s": {}, "product_s": {}, "cg_s": {}, "error": {}, "cg_direction_error": {}}
    generator = th.Generator().manual_seed(seed)
    vectors = [th.randn(n_params, generator=generator) for _ in range(n_vectors)]
    reference_products: list[th.Tensor] = []
    reference_direction, reference_scale = None, 1
    for name, setup in setups.items():
        result["setup_s"][name] = best_time(lambda setup=setup: setup(), repeats, collect=collect)  # type: ignore[misc]
        product, _ = setup()
        _set_damping(product, 0.0)
        kl_scale = product.kl_scale  # type: ignore[attr-defined]
        result.setdefault("kl_scale", {})[name] = kl_scale
        # Errors of the same matrix: sb3-contrib's product rescaled to the KL of the joint distribution
        values = [kl_scale * product(vector).detach() for vector in vectors]
        result["product_s"][name] = best_time(lambda product=product: product(vectors[0]), repeats, collect=collect)  # type: ignore[misc]
        if not reference_products:
            reference_products = values
        else:
            errors = [_errors(value, reference) for value, reference in zip(values, reference_products, strict=True)]
            result["error"][name] = {key: max(error[key] for error in errors) for key in errors[0]}
        del product
        if collect:  # free the large graphs of a CNN before the next measurement
            gc.collect()

        # A whole solve, as an update does it: setup, cg_steps products inside CG, one more for the curvature
        def solve(setup: Setup = setup) -> th.Tensor:
            product, gradient = setup()
            _set_damping(product, damping)
            direction = conjugate_gradient_solver(product, gradient, max_iter=cg_steps)
            th.dot(direction, product(direction, retain_graph=False))
            return direction.detach()

        if collect:  # free the large graphs of a CNN before the next measurement
            gc.collect()
        start = time.perf_counter()
        direction = solve()
        result["cg_s"][name] = time.perf_counter() - start
        if cg_repeats > 1:
            result["cg_s"][name] = min(result["cg_s"][name], best_time(solve, cg_repeats - 1, warmup=False, collect=collect))
        # With damping, a rescaled matrix gives another direction: compare directions only for the same matrix
        if reference_direction is None:
            reference_direction, reference_scale = direction, kl_scale
        elif kl_scale == reference_scale:
            result["cg_direction_error"][name] = _errors(direction, reference_direction)["rel"]
        if collect:  # free the large graphs of a CNN before the next measurement
            gc.collect()
    reference = next(iter(setups))
    result["product_speedup"] = {name: result["product_s"][reference] / t for name, t in result["product_s"].items()}
    result["cg_speedup"] = {name: result["cg_s"][reference] / t for name, t in result["cg_s"].items()}
    return result


def run_case(
    name: str, policy: ActorCriticPolicy, obs: th.Tensor, args: argparse.Namespace, sub_sampling_factor: int = 1
) -> dict[str, Any]:
    """All methods on one policy and batch (and on its ``sub_sampling_factor`` sub-batch when > 1)."""
    th.manual_seed(args.seed)
    with th.no_grad():
        actions = policy.get_distribution(obs).sample()
    advantages = th.randn(obs.shape[0], generator=th.Generator().manual_seed(args.seed))
    is_cnn = any(isinstance(module, nn.Conv2d) for module in policy.modules())
    policy_cl = copy.deepcopy(policy)
    if is_cnn:
        policy_cl = policy_cl.to(memory_format=th.channels_last)  # type: ignore[call-overload]
    actor_params = _actor_params(policy, obs)
    n_params = sum(param.numel() for param in actor_params)
    case: dict[str, Any] = {
        "policy": type(policy).__name__,
        "features_extractor": type(policy.features_extractor).__name__,
        "observation_shape": list(obs.shape[1:]),
        "distribution": type(policy.action_dist).__name__,
        "n_actor_params": n_params,
        "batches": {},
    }
    batches = {"full": slice(None)}
    if sub_sampling_factor > 1:
        batches[f"every_{sub_sampling_factor}th"] = slice(None, None, sub_sampling_factor)
    for label, index in batches.items():
        o, a, adv = obs[index], actions[index], advantages[index]
        setups: dict[str, Setup] = {
            "double_backward": double_backward_setup(policy, o, a, adv),
            "double_backward_one_grad": double_backward_one_grad_setup(policy, o, a, adv),
        }
        if is_cnn:
            setups["double_backward_channels_last"] = double_backward_setup(policy_cl, o, a, adv)
        setups["analytic"] = analytic_setup(policy_cl, o, a, adv, fast=True)
        setups["functional"] = analytic_setup(policy_cl, o, a, adv, fast=False)
        repeats = args.repeats if is_cnn else max(args.repeats, 20)
        print(f"[{name}] {label}: {o.shape[0]} samples, {n_params} actor parameters ...", flush=True)
        case["batches"][label] = {"batch_size": int(o.shape[0])} | measure(
            setups,
            n_params,
            repeats,
            args.cg_steps,
            args.cg_damping,
            args.vectors,
            args.seed,
            1 if is_cnn else 3,
            collect=is_cnn,
        )
        print_batch(name, label, case["batches"][label])
    return case


def print_batch(name: str, label: str, result: dict[str, Any]) -> None:
    print(f"  {name} / {label} ({result['batch_size']} samples)")
    print(
        f"  {'method':32s} {'setup s':>9s} {'product s':>10s} {'speed-up':>9s} {'CG solve s':>11s} {'speed-up':>9s}"
        f" {'rel err':>9s} {'max abs':>9s}"
    )
    for method in result["product_s"]:
        error = result["error"].get(method)
        rel = f"{error['rel']:9.2e}" if error else f"{'(ref)':>9s}"
        max_abs = f"{error['max_abs']:9.2e}" if error else f"{'':>9s}"
        print(
            f"  {method:32s} {result['setup_s'][method]:9.3f} {result['product_s'][method]:10.4f}"
            f" {result['product_speedup'][method]:8.2f}x {result['cg_s'][method]:11.3f}"
            f" {result['cg_speedup'][method]:8.2f}x {rel} {max_abs}"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=2048, help="samples per batch (Atari frames for the CNN)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per measurement, best kept (MLP: at least 20)")
    parser.add_argument("--vectors", type=int, default=3, help="random vectors for the error (worst one reported)")
    parser.add_argument("--cg-steps", type=int, default=15, help="conjugate-gradient iterations of the timed solve")
    parser.add_argument("--cg-damping", type=float, default=0.1, help="damping of the timed solve (errors: damping 0)")
    parser.add_argument("--cg-sub-sampling-factor", type=int, default=4, help="also measure the CNN on every k-th frame")
    parser.add_argument("--cases", nargs="+", default=["nature_cnn", "mlp_gaussian", "mlp_categorical"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "fvp.json"), help="JSON file to write")
    args = parser.parse_args(argv)

    th.set_num_threads(args.threads)
    th.manual_seed(args.seed)
    result: dict[str, Any] = {"command": command_line(), "args": vars(args), "machine": machine_info(), "cases": {}}
    lr_schedule = lambda _: 1e-3  # noqa: E731  (only the critic's optimizer uses it)
    for case in args.cases:
        th.manual_seed(args.seed)
        if case == "nature_cnn":
            obs, observation_space, action_space = atari_frames(args.batch, args.seed)
            policy: ActorCriticPolicy = ActorCriticCnnPolicy(observation_space, action_space, lr_schedule)
            result["cases"][case] = run_case(case, policy, obs, args, args.cg_sub_sampling_factor)
        elif case == "mlp_gaussian":
            # HalfCheetah-sized: 17 observations, 6 continuous actions, SB3's default 64x64 tanh network
            observation_space = spaces.Box(-10, 10, (17,), dtype=np.float32)
            policy = ActorCriticPolicy(observation_space, spaces.Box(-1, 1, (6,), dtype=np.float32), lr_schedule)
            obs = th.randn(args.batch, 17)
            result["cases"][case] = run_case(case, policy, obs, args)
        elif case == "mlp_categorical":
            # CartPole-sized: 4 observations, 2 actions
            observation_space = spaces.Box(-10, 10, (4,), dtype=np.float32)
            policy = ActorCriticPolicy(observation_space, spaces.Discrete(2), lr_schedule)
            obs = th.randn(args.batch, 4)
            result["cases"][case] = run_case(case, policy, obs, args)
        else:
            raise ValueError(f"unknown case {case!r}: choose among nature_cnn, mlp_gaussian, mlp_categorical")
    result["machine_after"] = {"load_average": machine_info()["load_average"]}
    write_json(args.out, result)
    print(f"written to {args.out}")
    return result


if __name__ == "__main__":
    main()
