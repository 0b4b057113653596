"""
Throughput: environment steps per second of TRPOPlus, sb3-contrib TRPO and PPO, in one run, and the rollout-only
rate (policy forward plus environment steps, no update) as the ceiling.

Every model is built from its YAML entry by rl_zoo3's ``ExperimentManager``, as ``python -m rl_zoo3.train`` builds
it (``benchmarks._common.zoo_env_and_model``): on Breakout, TRPOPlus's ``atari`` entry (``hyperparams/trpo_plus.yml``)
and PPO's (rl_zoo3's ``ppo.yml``), each with its own wrappers, frame stack, ``n_envs`` x ``n_steps``, ``normalize``
and callbacks; sb3-contrib TRPO, which has no Atari entry, gets ``trpo.yml``'s defaults with PPO's environment keys.
On CartPole every algorithm gets the same rollout (2 x 512). ``--params`` overrides TRPOPlus's entry (its rollout-only
run included). The rate counts every timed update: rollout plus training, after ``--warmup-updates`` untimed ones;
the rollout-only rate (the ceiling) runs TRPOPlus's model without updates.

``--phase-timing`` splits the updates without changing library code: the script times the methods of a
``TRPOPlus`` subclass and wraps the module-level functions ``_update_policy`` calls (``conjugate_gradient``,
``assign_params``) and ``FisherVectorProduct.__call__``; for sb3-contrib TRPO it wraps ``_compute_actor_grad``,
``conjugate_gradient_solver``, ``hessian_vector_product`` and the critic's first minibatch fetch.

Usage::

    python -m benchmarks.throughput --threads 2 --phase-timing --out benchmarks/results/throughput.json
    python -m benchmarks.throughput --envs cartpole --merge        # redo one env, keep the other in the file
    python -m benchmarks.throughput --envs hopper --threads 1 --updates 5 --trpo-updates 5 --trpo-warmup-updates 1 \
        --rounds 3 --phase-timing --out benchmarks/results/mujoco/throughput_hopper.json
"""

import argparse
import contextlib
import gc
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch as th
from sb3_contrib import TRPO
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv

from benchmarks._common import (
    ALGO_LABELS,
    RESULTS_DIR,
    command_line,
    load_hyperparams,
    machine_info,
    parse_params,
    register_envs,
    write_json,
    zoo_env_and_model,
)
from benchmarks._timing import PhaseTimer, counting, marking, marking_start, patched, phase_split
from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus import trpo_plus as trpo_plus_module
from sb3_trpo_plus.fisher import FisherVectorProduct

#: The benchmark's environments. Breakout: every algorithm as its zoo entry builds it (``atari``: wrappers, frame
#: stack, n_envs x n_steps, ``normalize``, callbacks); sb3-contrib TRPO, which has no such entry, gets the environment
#: keys of PPO's. CartPole: the same rollout (n_envs x n_steps, trpo.yml's 2 x 512) for every algorithm.
ENVS: dict[str, dict[str, Any]] = {
    "breakout": {"env_id": "BreakoutNoFrameskip-v4", "policy": "CnnPolicy", "rollout": {}},
    # an Atari-5 game (benchmarks/results/atari/atari5_rule.md), built as Breakout is
    "qbert": {"env_id": "QbertNoFrameskip-v4", "policy": "CnnPolicy", "rollout": {}},
    "cartpole": {"env_id": "CartPole-v1", "policy": "MlpPolicy", "rollout": {"n_envs": 2, "n_steps": 512}},
    # MuJoCo (sb3-trpo-plus[mujoco]): each algorithm's own entry; TRPOPlus's is sb3-contrib TRPO's (2 x 1024, ent_coef 0)
    "hopper": {"env_id": "Hopper-v5", "policy": "MlpPolicy", "rollout": {}},
}
ALGO_CLASSES = {"trpo_plus": TRPOPlus, "trpo": TRPO, "ppo": PPO}
#: The budget of a measured run, stopped after its timed updates: a ``lin_`` schedule stays at its start meanwhile
SCHEDULE_BUDGET = 10**9
#: YAML keys that describe the environment, taken from PPO's entry for an algorithm without an entry of its own
ENV_KEYS = ("n_envs", "n_steps", "env_wrapper", "frame_stack", "policy")


def zoo_entry(algo: str, spec: dict[str, Any], params: list[str]) -> tuple[dict[str, Any], str]:
    """The YAML entry ``algo`` is built from on ``spec``'s environment, with ``--params`` overrides (TRPOPlus only)."""
    hyperparams, source = load_hyperparams(algo, spec["env_id"])
    if source.endswith(":default"):
        # no entry for this environment (sb3-contrib TRPO on Atari): PPO's environment settings, the algorithm's defaults
        ppo_entry, ppo_source = load_hyperparams("ppo", spec["env_id"])
        hyperparams.update({key: ppo_entry[key] for key in ENV_KEYS if key in ppo_entry})
        source += f" with the environment keys of {ppo_source}"
    hyperparams.update(spec["rollout"])
    hyperparams["policy"] = spec["policy"]
    if params:
        hyperparams.update(parse_params(params))
        source += f" with {' '.join(params)}"
    return hyperparams, source


def build(algo: str, spec: dict[str, Any], args: argparse.Namespace, log_folder: str, model_class: type | None = None):
    """``(env, model, callbacks, hyperparams, source)`` of ``algo`` on ``spec``, built by rl_zoo3 from the YAML."""
    params = spec.get("trpo_plus_params", []) if algo == "trpo_plus" else []
    hyperparams, source = zoo_entry(algo, spec, params)
    env, model, experiment = zoo_env_and_model(
        algo,
        spec["env_id"],
        hyperparams,
        seed=args.seed,
        log_folder=log_folder,
        n_timesteps=SCHEDULE_BUDGET,
        device=args.device,
        model_class=model_class,
    )
    return env, model, list(experiment.callbacks), hyperparams, source


class UpdateTimer(BaseCallback):
    """
    Timestamps of each rollout's start and end: rollout and update times. It stops the run at the first step of
    the rollout after ``updates`` updates, so that a run's budget, which a ``lin_`` schedule follows, can be longer than
    the updates timed (the end of training closes the last update when the budget ends first).
    """

    def __init__(self, updates: int) -> None:
        super().__init__()
        self.updates = updates
        self.rollout_starts: list[float] = []
        self.rollout_ends: list[float] = []
        self.training_end = float("nan")

    def _on_rollout_start(self) -> None:
        self.rollout_starts.append(time.perf_counter())

    def _on_rollout_end(self) -> None:
        self.rollout_ends.append(time.perf_counter())

    def _on_step(self) -> bool:
        return len(self.rollout_starts) <= self.updates

    def _on_training_end(self) -> None:
        self.training_end = time.perf_counter()

    def durations(self) -> tuple[list[float], list[float]]:
        """Per update: rollout seconds, and training seconds (rollout end to the next rollout start)."""
        rollouts = [end - start for start, end in zip(self.rollout_starts, self.rollout_ends)]
        train_ends = [*self.rollout_starts[1:], self.training_end]
        trains = [end - start for start, end in zip(self.rollout_ends, train_ends)]
        return rollouts, trains


# --- phase timing --------------------------------------------------------------------------------------------


class TimedTRPOPlus(PhaseTimer, TRPOPlus):
    """TRPOPlus that records, per update, when each part of ``train()`` starts and ends (see ``spans``)."""

    #: what each part contains: see the report
    spans: ClassVar[dict[str, tuple[str, str]]] = {
        "actor_params": ("actor_params_start", "actor_params_end"),
        "gradient": ("policy_start", "fvp_setup_start"),
        "fvp_setup": ("fvp_setup_start", "cg_start"),
        "cg": ("cg_start", "cg_end"),
        "curvature": ("cg_end", "line_search_start"),
        "line_search": ("line_search_start", "policy_end"),
        "critic": ("critic_start", "critic_end"),
        # critic_kl_fraction > 0 only: the critic runs first, then its change of the shared extractor is checked
        # against its part of the trust region (halved until it fits): the KL checks after its epochs
        "critic_kl_check": ("critic_end", "critic_within_kl_end"),
        "total": ("train_start", "train_end"),
    }

    def _actor_params(self, observations: Any = None) -> Any:
        return self.marked("actor_params", super()._actor_params, observations)

    def _update_policy(self, *args: Any, **kwargs: Any) -> Any:
        diagnostics = self.marked("policy", super()._update_policy, *args, **kwargs)
        # the line search's time is about one forward pass on the whole batch per candidate tried
        self._marks["line_search_iters"] = float(diagnostics.line_search_iters)
        return diagnostics

    def _fisher_vector_product(self, *args: Any, **kwargs: Any) -> Any:
        self.mark("fvp_setup_start")
        return super()._fisher_vector_product(*args, **kwargs)

    def _update_critic(self, *args: Any, **kwargs: Any) -> Any:
        return self.marked("critic", super()._update_critic, *args, **kwargs)

    def _critic_within_kl(self, *args: Any, **kwargs: Any) -> Any:
        return self.marked("critic_within_kl", super()._critic_within_kl, *args, **kwargs)


@contextlib.contextmanager
def trpo_plus_phase_timing(model: TimedTRPOPlus) -> Iterator[None]:
    """Wrap the functions ``TRPOPlus._update_policy`` calls, to mark the CG and line-search boundaries."""
    model.phase_log = []
    with (
        patched(trpo_plus_module, "conjugate_gradient", marking(model, "cg")),
        # the first assignment after the CG is the first line-search candidate (with critic_kl_fraction > 0 the
        # critic's KL checks assign the extractor's parameters before it)
        patched(trpo_plus_module, "assign_params", marking_start(model, "line_search_start", after="cg_end")),
        patched(FisherVectorProduct, "__call__", counting(model)),
    ):
        yield


class TimedTRPO(PhaseTimer, TRPO):
    """sb3-contrib TRPO with per-update timestamps (its ``train()`` is one block: the split is coarser)."""

    spans: ClassVar[dict[str, tuple[str, str]]] = {
        "gradient": ("train_start", "cg_start"),
        "cg": ("cg_start", "cg_end"),
        "line_search": ("cg_end", "critic_start"),  # includes the curvature product
        "critic": ("critic_start", "train_end"),
        "total": ("train_start", "train_end"),
    }

    def _compute_actor_grad(self, *args: Any, **kwargs: Any) -> Any:
        return self.marked("actor_grad", super()._compute_actor_grad, *args, **kwargs)

    def hessian_vector_product(self, *args: Any, **kwargs: Any) -> Any:
        return self.counted(super().hessian_vector_product, *args, **kwargs)


@contextlib.contextmanager
def trpo_phase_timing(model: TimedTRPO) -> Iterator[None]:
    import sb3_contrib.trpo.trpo as trpo_module

    model.phase_log = []
    buffer_get = model.rollout_buffer.get

    def get(batch_size: int | None = None) -> Any:
        if batch_size is not None:
            model.mark("critic_start")  # the critic's minibatches; the actor fetches the whole buffer
        return buffer_get(batch_size)

    model.rollout_buffer.get = get  # type: ignore[method-assign]
    try:
        with patched(trpo_module, "conjugate_gradient_solver", marking(model, "cg")):
            yield
    finally:
        del model.rollout_buffer.get


# --- measurements ----------------------------------------------------------------------------------------------


def measure_algo(algo: str, spec: dict[str, Any], updates: int, warmup: int, args: argparse.Namespace) -> dict[str, Any]:
    algo_class: type = ALGO_CLASSES[algo]
    if args.phase_timing and algo in ("trpo_plus", "trpo"):
        algo_class = TimedTRPOPlus if algo == "trpo_plus" else TimedTRPO
    with tempfile.TemporaryDirectory() as log_folder:
        env, model, callbacks, hyperparams, source = build(algo, spec, args, log_folder, algo_class)
        return _measure(algo, model, env, callbacks, hyperparams, source, updates, warmup, spec)


def _measure(
    algo: str,
    model: Any,
    env: VecEnv,
    callbacks: list[BaseCallback],
    hyperparams: dict[str, Any],
    source: str,
    updates: int,
    warmup: int,
    spec: dict[str, Any],
) -> dict[str, Any]:
    timing: contextlib.AbstractContextManager = contextlib.nullcontext()
    if isinstance(model, TimedTRPOPlus):
        timing = trpo_plus_phase_timing(model)
    elif isinstance(model, TimedTRPO):
        timing = trpo_phase_timing(model)
    timer = UpdateTimer(warmup + updates)
    steps_per_update = model.n_envs * model.n_steps
    print(
        f"[{spec['env_id']}] {ALGO_LABELS[algo]}: {warmup} warm-up + {updates} timed updates of {steps_per_update} steps",
        flush=True,
    )
    with timing:  # timed as updates early in a long run: a schedule (the atari entry's target_kl) near its start
        model.learn(total_timesteps=SCHEDULE_BUDGET, callback=[*callbacks, timer])
    rollouts, trains = timer.durations()
    rollouts, trains = rollouts[warmup:], trains[warmup:]
    steps = steps_per_update * len(rollouts)
    result: dict[str, Any] = {
        "hyperparams_source": source,
        "hyperparams": {key: str(value) for key, value in hyperparams.items()},
        "n_envs": model.n_envs,
        "n_steps": model.n_steps,
        "warmup_updates": warmup,
        "timed_updates": len(rollouts),
        "steps": steps,
        "rollout_s": float(np.sum(rollouts)),
        "train_s": float(np.sum(trains)),
        "steps_per_s": steps / float(np.sum(rollouts) + np.sum(trains)),
        "rollout_steps_per_s": steps / float(np.sum(rollouts)),
        "train_s_per_update": [float(t) for t in trains],
    }
    if isinstance(model, PhaseTimer):
        splits = [phase_split(marks, model.spans) for marks in model.phase_log[warmup:]]
        means = {key: float(np.mean([split[key] for split in splits])) for key in splits[0]}
        # (a part that no update ran, e.g. the critic's KL check without critic_kl_fraction, is left out)
        result["phases"] = {key: value for key, value in means.items() if not np.isnan(value)}
    env.close()
    del model, env
    gc.collect()
    print(
        f"  {result['steps_per_s']:8.1f} steps/s  (rollout {result['rollout_s']:.1f} s, train {result['train_s']:.1f} s"
        f" for {steps} steps)",
        flush=True,
    )
    if "phases" in result:
        print("  update split (s): " + ", ".join(f"{key} {value:.3f}" for key, value in result["phases"].items()))
    return result


def merge_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One algorithm's measurements of several rounds as one: times and steps summed, rates from the sums."""
    if len(rounds) == 1:
        return rounds[0]
    merged = dict(rounds[0])
    for key in ("steps", "rollout_s", "train_s", "timed_updates", "rollouts"):
        if key in merged:
            merged[key] = sum(measurement[key] for measurement in rounds)
    if "train_s" in merged:
        merged["steps_per_s"] = merged["steps"] / (merged["rollout_s"] + merged["train_s"])
        merged["rollout_steps_per_s"] = merged["steps"] / merged["rollout_s"]
        merged["train_s_per_update"] = [t for measurement in rounds for t in measurement["train_s_per_update"]]
    else:
        merged["steps_per_s"] = merged["steps"] / merged["rollout_s"]
    if "phases" in merged:
        weights = [measurement["timed_updates"] for measurement in rounds]
        merged["phases"] = {
            key: float(np.average([measurement["phases"][key] for measurement in rounds], weights=weights))
            for key in merged["phases"]
        }
    merged["steps_per_s_by_round"] = [measurement["steps_per_s"] for measurement in rounds]
    return merged


def measured_rates(env_result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every algorithm's merged measurement and the rollout-only one, as ``(name, measurement)``."""
    return [*env_result["algos"].items(), ("rollout_only", env_result["rollout_only"])]


def rate_ratios(rates: dict[str, float]) -> dict[str, float]:
    """Each algorithm's steps/s over the rollout-only rate, and TRPOPlus's over each other algorithm's."""
    ceiling = rates["rollout_only"]
    algos = {algo: rate for algo, rate in rates.items() if algo != "rollout_only"}
    ratios = {f"{algo}/rollout_only": rate / ceiling for algo, rate in algos.items()}
    if "trpo_plus" in algos:
        ratios.update({f"trpo_plus/{algo}": algos["trpo_plus"] / rate for algo, rate in algos.items() if algo != "trpo_plus"})
    return ratios


def measure_rollout_only(spec: dict[str, Any], rollouts: int, warmup: int, args: argparse.Namespace) -> dict[str, Any]:
    """Rollouts of the TRPOPlus model (its policy forward, env steps, buffer), built as for its timing, no update."""
    with tempfile.TemporaryDirectory() as log_folder:
        env, model, _, _, _ = build("trpo_plus", spec, args, log_folder)
        return _measure_rollouts(model, env, rollouts, warmup, spec)


def _measure_rollouts(model: Any, env: VecEnv, rollouts: int, warmup: int, spec: dict[str, Any]) -> dict[str, Any]:
    _, callback = model._setup_learn(total_timesteps=SCHEDULE_BUDGET, callback=None)
    callback.on_training_start(locals(), globals())
    times = []
    for _ in range(warmup + rollouts):
        start = time.perf_counter()
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=model.n_steps)  # type: ignore[arg-type]
        times.append(time.perf_counter() - start)
    env.close()
    steps = model.n_envs * model.n_steps * rollouts
    result = {"rollouts": rollouts, "steps": steps, "rollout_s": float(np.sum(times[warmup:]))}
    result["steps_per_s"] = steps / result["rollout_s"]
    print(f"[{spec['env_id']}] rollout only (TRPOPlus policy): {result['steps_per_s']:8.1f} steps/s", flush=True)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=["breakout", "cartpole"])
    parser.add_argument("--algos", nargs="+", choices=sorted(ALGO_CLASSES), default=["trpo_plus", "trpo", "ppo"])
    parser.add_argument("--updates", type=int, default=3, help="timed updates of TRPOPlus and PPO (Breakout)")
    parser.add_argument("--trpo-updates", type=int, default=1, help="timed updates of sb3-contrib TRPO (Breakout)")
    parser.add_argument("--cartpole-updates", type=int, default=10, help="timed updates of every algorithm (CartPole)")
    parser.add_argument("--warmup-updates", type=int, default=1, help="untimed first updates (TRPOPlus, PPO, rollout)")
    parser.add_argument("--trpo-warmup-updates", type=int, default=0, help="untimed first updates of sb3-contrib TRPO")
    parser.add_argument(
        "--breakout-n-steps", type=int, default=None, help="n_steps of every algorithm on Breakout (default: each entry's)"
    )
    parser.add_argument(
        "--breakout-n-envs", type=int, default=None, help="n_envs of every algorithm on Breakout (default: each entry's)"
    )
    parser.add_argument(
        "--params",
        nargs="*",
        default=[],
        help="overrides key:value of TRPOPlus's hyperparameters on Breakout, its rollout-only run included "
        "(e.g. 'policy_kwargs:dict(share_features_extractor=True)')",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every algorithm this many times, in turn, the order reversed each round (a shared machine's "
        "speed drifts: each algorithm then sees the same drift); rates sum the rounds, ratios per round are kept too",
    )
    parser.add_argument("--phase-timing", action="store_true", help="split the TRPOPlus and TRPO updates into parts")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (Breakout)")
    parser.add_argument(
        "--cartpole-threads",
        type=int,
        default=1,
        help="torch threads on CartPole (a 64x64 MLP gains nothing from a second thread, and loses much on a busy machine)",
    )
    parser.add_argument("--merge", action="store_true", help="keep the other envs already in --out (rerun one env)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "throughput.json"), help="JSON file to write")
    args = parser.parse_args(argv)

    register_envs()
    result: dict[str, Any] = {"envs": {}}
    if args.merge and Path(args.out).is_file():
        result = json.loads(Path(args.out).read_text())
    for env_name in args.envs:
        threads = args.cartpole_threads if env_name == "cartpole" else args.threads
        th.set_num_threads(threads)
        spec = dict(ENVS[env_name])
        if spec["policy"] == "CnnPolicy":
            rollout = {"n_steps": args.breakout_n_steps, "n_envs": args.breakout_n_envs}
            spec.update(trpo_plus_params=args.params, rollout={key: value for key, value in rollout.items() if value})
        env_result: dict[str, Any] = {**spec, "threads": threads, "command": command_line(), "machine": machine_info()}
        rollouts = args.cartpole_updates if env_name == "cartpole" else args.updates
        measured: dict[str, list[dict[str, Any]]] = {algo: [] for algo in [*args.algos, "rollout_only"]}
        for round_index in range(args.rounds):
            order = [*args.algos, "rollout_only"]
            for algo in order if round_index % 2 == 0 else order[::-1]:
                if algo == "rollout_only":
                    measured[algo].append(measure_rollout_only(spec, rollouts, args.warmup_updates, args))
                    continue
                if env_name == "cartpole":
                    updates, warmup = args.cartpole_updates, args.warmup_updates
                elif algo == "trpo":
                    updates, warmup = args.trpo_updates, args.trpo_warmup_updates
                else:
                    updates, warmup = args.updates, args.warmup_updates
                measured[algo].append(measure_algo(algo, spec, updates, warmup, args))
        env_result["algos"] = {algo: merge_rounds(measured[algo]) for algo in args.algos}
        env_result["rollout_only"] = merge_rounds(measured["rollout_only"])
        # the rollout of the report's heading: TRPOPlus's (every entry compared here has the same)
        first = env_result["algos"].get("trpo_plus") or next(iter(env_result["algos"].values()))
        env_result.update(n_envs=first["n_envs"], n_steps=first["n_steps"], rounds=args.rounds)
        env_result["ratios"] = ratios = rate_ratios({algo: value["steps_per_s"] for algo, value in measured_rates(env_result)})
        if args.rounds > 1:
            env_result["ratios_by_round"] = [
                rate_ratios({algo: measured[algo][index]["steps_per_s"] for algo in measured}) for index in range(args.rounds)
            ]
            for key in ratios:
                by_round = [round_ratios[key] for round_ratios in env_result["ratios_by_round"]]
                print(f"  {key}: {ratios[key]:.2f} over all rounds, per round " + ", ".join(f"{r:.2f}" for r in by_round))
        env_result["load_average_after"] = machine_info()["load_average"]
        result["envs"][env_name] = env_result
        print(f"[{spec['env_id']}] ratios: " + ", ".join(f"{key} {value:.2f}" for key, value in ratios.items()), flush=True)
        # Written after each env: an interrupted run keeps what it measured
        write_json(args.out, result)
        print(f"written to {args.out}")
    return result


if __name__ == "__main__":
    main()
