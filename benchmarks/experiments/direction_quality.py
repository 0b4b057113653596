"""
Direction quality: how much a policy step computed on one rollout improves the surrogate on other rollouts of the
same policy, at the same KL.

A TRPOPlus checkpoint is loaded with its environment (as ``python -m rl_zoo3.train`` builds it); ``--held-out``
rollouts are collected with its policy, then one more, the training rollout ``A``. Each method turns ``A`` into a
displacement ``d`` of the actor's parameters; ``theta + alpha * d`` is then scaled (bisection on ``alpha``) until its
KL from the old policy on ``A`` is each of ``--kls``, and the surrogate gain ``mean(ratio * advantage) - mean(advantage)``
(advantages normalized per rollout, no entropy term) is measured on ``A`` and on the held-out rollouts. A direction
that fits the noise of ``A`` gains on ``A`` and not on the held-out data.

Methods (``--methods``):

- ``natural:<fisher_samples>:<cg_steps>:<damping>``: TRPOPlus's direction ``(F + damping I)^-1 g`` by conjugate
  gradient, with the Fisher-vector products on ``fisher_samples`` frames of ``A`` drawn at random (the library's
  ``cg_sub_sampling_factor`` path); ``g`` is the gradient of TRPOPlus's objective (entropy bonus included).
- ``gradient``: ``g`` itself.
- ``adam:<epochs>:<minibatch>:<lr>``: PPO's actor step: Adam on the clipped surrogate (clip 0.1, the zoo's Atari value)
  plus the entropy bonus, over minibatches of ``A``.
- ``steps:<k>``: ``k`` TRPOPlus trust-region steps in a row on ``A`` (each with ``target_kl / k``, from where the last
  one ended; the ratio stays the one to the rollout's policy).

Usage::

    python -m benchmarks.experiments.direction_quality --ent-coef 0 \\
        --checkpoint benchmarks/results/breakout_tuning/D/tmp/breakout/trpo_plus/seed100/checkpoints/rl_model_500000_steps.zip
"""

import argparse
import pickle
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from sb3_contrib.common.utils import conjugate_gradient_solver

from benchmarks._common import command_line, load_hyperparams, machine_info, set_threads, write_json, zoo_env_and_model
from sb3_trpo_plus.diagnostics import UpdateSettings
from sb3_trpo_plus.fisher import assign_params, flat_grad, flatten_params, kl_per_sample
from sb3_trpo_plus.rollout import images_normalized_once, whole_rollout
from sb3_trpo_plus.trpo_plus import TRPOPlus

ENV_ID = "BreakoutNoFrameskip-v4"
CLIP_RANGE = 0.1


@dataclass
class Rollout:
    obs: th.Tensor
    actions: th.Tensor
    advantages: th.Tensor  # normalized
    old_distribution: Any = None


def collect(model: TRPOPlus, callback: Any) -> Rollout:
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
    data = whole_rollout(model.rollout_buffer)
    advantages = data.advantages
    return Rollout(
        data.observations.clone(), data.actions.long().flatten(), (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    )


def distribution(model: TRPOPlus, obs: th.Tensor, chunk: int = 1024) -> Any:
    """The policy's distribution on ``obs`` (raw images), computed in chunks, as one Categorical."""
    from stable_baselines3.common.distributions import CategoricalDistribution

    with th.no_grad():
        logits = th.cat(
            [model.policy.get_distribution(obs[i : i + chunk]).distribution.logits for i in range(0, len(obs), chunk)]
        )
    dist = CategoricalDistribution(int(logits.shape[1]))
    return dist.proba_distribution(logits)


def measure(model: TRPOPlus, params: list, theta: th.Tensor, rollout: Rollout) -> tuple[float, float, float]:
    """(surrogate gain, KL from the old policy, entropy change) of the actor at ``theta`` on ``rollout``."""
    assign_params(params, theta)
    new = distribution(model, rollout.obs)
    ratio = th.exp(new.log_prob(rollout.actions) - rollout.old_distribution.log_prob(rollout.actions))
    gain = ((ratio - 1.0) * rollout.advantages).mean().item()
    kl = kl_per_sample(rollout.old_distribution, new, False).mean().item()
    entropy_change = (new.entropy() - rollout.old_distribution.entropy()).mean().item()
    return gain, kl, entropy_change


def scale_for_kl(model: TRPOPlus, params: list, theta0: th.Tensor, d: th.Tensor, rollout: Rollout, kl: float) -> float:
    """The ``alpha`` with KL(theta0 + alpha d) = kl on ``rollout`` (bisection on log alpha; KL grows with alpha)."""
    norm = d.norm().item()
    if norm == 0.0:
        return 0.0
    low, high = 1e-6 / norm, 1e-6 / norm
    while measure(model, params, theta0 + high * d, rollout)[1] < kl:
        low, high = high, high * 4.0
        if high * norm > 1e4:
            print(f"warning: KL {kl} not reached along this direction (step norm {high * norm:.3g})")
            return high
    for _ in range(14):
        mid = float(np.sqrt(low * high))
        if measure(model, params, theta0 + mid * d, rollout)[1] < kl:
            low = mid
        else:
            high = mid
    return float(np.sqrt(low * high))


def direction(model: TRPOPlus, params: list, method: str, rollout_data: Any, ent_coef: float) -> th.Tensor:
    """The displacement of the actor's parameters that ``method`` computes on the training rollout."""
    # (the sub-sampling settings a method changes are the model's again for the next method)
    settings = model.sub_sampling_factor, model.cg_sub_sampling_factor
    try:
        return _direction(model, params, method, rollout_data, ent_coef)
    finally:
        model.sub_sampling_factor, model.cg_sub_sampling_factor = settings


def _direction(model: TRPOPlus, params: list, method: str, rollout_data: Any, ent_coef: float) -> th.Tensor:
    name, *args = method.split(":")
    theta0 = flatten_params(params)
    model.sub_sampling_factor = 1
    batch = model._policy_batch(rollout_data)
    if name in ("natural", "gradient"):
        dist, _ = model._distribution(batch)
        objective, _ = model._objective(dist, batch, ent_coef)
        if args:
            model.cg_sub_sampling_factor = max(1, len(batch.actions) // int(args[0]))
        # (the Fisher-vector products on the whole batch reuse the gradient's graph)
        gradient = flat_grad(objective, params, retain_graph=model.cg_sub_sampling_factor == 1)
        if name == "gradient":
            return gradient
        cg_steps, damping = int(args[1]), float(args[2])
        fvp = model._fisher_vector_product(batch, dist, params, damping)
        return conjugate_gradient_solver(fvp, gradient, max_iter=cg_steps)
    if name == "adam":
        epochs, minibatch, lr = int(args[0]), int(args[1]), float(args[2])
        optimizer = th.optim.Adam(params, lr=lr, eps=1e-5)
        n = len(batch.actions)
        for _ in range(epochs):
            for index in th.randperm(n).split(minibatch):
                dist = model.policy.get_distribution(batch.obs[index])
                log_prob = dist.log_prob(batch.actions[index])
                ratio = th.exp(log_prob - batch.old_log_prob[index])
                advantages = batch.advantages[index]
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                surrogate = th.min(ratio * advantages, th.clamp(ratio, 1 - CLIP_RANGE, 1 + CLIP_RANGE) * advantages)
                loss = -(surrogate.mean() + ent_coef * dist.entropy().mean())
                optimizer.zero_grad()
                loss.backward()
                th.nn.utils.clip_grad_norm_(params, 0.5)
                optimizer.step()
        d = flatten_params(params).detach() - theta0
        assign_params(params, theta0)
        return d
    if name == "steps":
        k = int(args[0])
        for i in range(k):
            update = UpdateSettings(i + 1, ent_coef, model.target_kl / k, model.cg_damping)
            model._update_policy(batch, update, params)
        d = flatten_params(params).detach() - theta0
        assign_params(params, theta0)
        return d
    raise ValueError(f"unknown method {method!r}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--held-out", type=int, default=6, help="held-out rollouts")
    parser.add_argument("--kls", type=float, nargs="+", default=[0.01, 0.02, 0.04])
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["gradient", "natural:128:10:0.05", "natural:512:10:0.05", "natural:2048:10:0.05", "adam:4:256:2.5e-4"],
    )
    parser.add_argument("--env", default=ENV_ID, help="the checkpoint's environment (built from its YAML entry)")
    parser.add_argument(
        "--ent-coef", type=float, default=None, help="the entropy bonus of every method (default: the checkpoint's)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    th.manual_seed(args.seed)

    hyperparams, _ = load_hyperparams("trpo_plus", args.env)
    hyperparams.pop("callback", None)
    checkpoint = Path(args.checkpoint)
    with tempfile.TemporaryDirectory() as log_folder:
        env, model, _ = zoo_env_and_model(
            "trpo_plus", args.env, hyperparams, load_path=checkpoint, seed=args.seed, log_folder=log_folder, n_timesteps=10**7
        )
        stats = checkpoint.with_name(checkpoint.name.replace("rl_model_", "rl_model_vecnormalize_").replace(".zip", ".pkl"))
        if stats.exists():
            saved = pickle.loads(stats.read_bytes())
            env.ret_rms = vars(saved)["ret_rms"]  # (norm_obs is off in the atari entry)
        _, callback = model._setup_learn(10**7, None, reset_num_timesteps=False)
        ent_coef = model.current_ent_coef if args.ent_coef is None else args.ent_coef
        start = time.perf_counter()
        collect(model, callback)  # (episodes under way, as in training)
        held_out = [collect(model, callback) for _ in range(args.held_out)]
        train = collect(model, callback)
        rollout_data = whole_rollout(model.rollout_buffer)
        print(f"rollouts: {time.perf_counter() - start:.0f} s; ent_coef {ent_coef:.4f}")
        results = {}
        with images_normalized_once(model.policy, rollout_data.observations) as observations:
            # (every rollout scaled as the update scales its own; the policy does not scale them again in here)
            scaled = observations is not rollout_data.observations
            rollout_data = rollout_data._replace(observations=observations)
            for rollout in [*held_out, train]:
                rollout.obs = rollout.obs.float() / 255.0 if scaled else rollout.obs
                rollout.old_distribution = distribution(model, rollout.obs)
            params = model._actor_params(rollout_data.observations)
            theta0 = flatten_params(params).detach().clone()
            for method in args.methods:
                start = time.perf_counter()
                d = direction(model, params, method, rollout_data, ent_coef).detach()
                assign_params(params, theta0)
                seconds = time.perf_counter() - start
                rows = []
                for kl in args.kls:
                    alpha = scale_for_kl(model, params, theta0, d, train, kl)
                    gain_a, kl_a, _ = measure(model, params, theta0 + alpha * d, train)
                    held = np.array([measure(model, params, theta0 + alpha * d, rollout) for rollout in held_out])
                    rows.append(
                        {
                            "kl_target": kl,
                            "kl_train": kl_a,
                            "gain_train": gain_a,
                            "gain_held_out": float(held[:, 0].mean()),
                            "gain_held_out_se": float(held[:, 0].std(ddof=1) / np.sqrt(len(held))),
                            "kl_held_out": float(held[:, 1].mean()),
                            "entropy_change_held_out": float(held[:, 2].mean()),
                        }
                    )
                assign_params(params, theta0)
                results[method] = {"seconds": seconds, "rows": rows}
                print(
                    f"{method:24s} ({seconds:5.1f} s) "
                    + "  ".join(
                        f"KL {r['kl_target']}: train {r['gain_train']:+.4f} held-out {r['gain_held_out']:+.4f}"
                        f"±{r['gain_held_out_se']:.4f} dH {r['entropy_change_held_out']:+.3f}"
                        for r in rows
                    ),
                    flush=True,
                )
    if args.out:
        write_json(
            args.out,
            {
                "command": command_line(),
                "machine": machine_info(),
                "checkpoint": str(checkpoint),
                "ent_coef": ent_coef,
                "held_out_rollouts": args.held_out,
                "results": results,
            },
        )


if __name__ == "__main__":
    main()
