"""
Sections 1 and 2 of the report (``benchmarks.report``): the Fisher-vector product (``fvp.json``, from
``benchmarks.fvp``) and the throughput of training (``throughput*.json``, from ``benchmarks.throughput``), with the
targets each is checked against.
"""

import json
import math
import re
from pathlib import Path
from typing import Any

from benchmarks._common import ALGO_LABELS
from benchmarks.report_common import (
    Target,
    check_targets,
    fill,
    fill_each,
    paragraphs,
    provenance,
    read_json,
    sentences,
    template_blocks,
)

#: The rows of the Fisher-vector product tables, by method of ``benchmarks.fvp``
FVP_LABELS = {
    "double_backward": "double backward (sb3-contrib)",
    "double_backward_one_grad": "double backward, one `create_graph` gradient",
    "double_backward_channels_last": "double backward (sb3-contrib), channels_last",
    "analytic": "analytic, `actor_critic_jvp` (TRPOPlus)",
    "functional": "analytic, `functional_jvp`",
}
#: The parts of one update in the time split (``benchmarks.throughput --phase-timing``)
PHASE_LABELS = {
    "actor_params": "find actor parameters",
    "gradient": "forward + surrogate gradient",
    "fvp_setup": "FVP setup (linearization)",
    "cg": "conjugate gradient",
    "curvature": "step length",
    "line_search": "line search",
    "critic": "critic",
    "critic_kl_check": "critic's KL check (`critic_kl_fraction`)",
}


# --- targets: TRPOPlus against the others --------------------------------------------------------------------------


def _speed_ratio(env: dict[str, Any], algo: str) -> float | None:
    """TRPOPlus's steps per second over ``algo``'s (``rollout_only``: the ceiling), ``None`` if ``algo`` was not run."""
    rate = env["rollout_only"] if algo == "rollout_only" else env["algos"].get(algo)
    return env["algos"]["trpo_plus"]["steps_per_s"] / rate["steps_per_s"] if rate else None


def _ceiling_ratio(env: dict[str, Any]) -> float:
    """
    TRPOPlus's rate against the rollout-only ceiling, taken as the faster of the rollout-only pass and TRPOPlus's own
    rollouts inside its training run (``rollout_s / (rollout_s + train_s)``): on a shared machine the separate pass
    may run slower than the same rollouts inside training, and would then flatter the ratio.
    """
    plus = env["algos"]["trpo_plus"]
    return min(_speed_ratio(env, "rollout_only") or 1.0, plus["rollout_s"] / (plus["rollout_s"] + plus["train_s"]))


#: On the CNN case's full batch of ``fvp.json``
FVP_TARGETS = (
    Target(
        "at least 15x faster per product",
        lambda batch: batch["product_speedup"]["analytic"],
        lambda speedup: speedup >= 15,
        "{value:.1f}x per product, {cg_speedup[analytic]:.1f}x per CG solve with setup",
    ),
    Target(
        "relative error under 1e-4", lambda batch: batch["error"]["analytic"]["rel"], lambda error: error < 1e-4, "{value:.1e}"
    ),
)
FVP_TARGET_CASE, FVP_TARGET_BATCH = "nature_cnn", "full"
#: Per env of ``throughput*.json`` (its key): TRPOPlus's rate against the others'
THROUGHPUT_TARGETS = {
    "breakout": (
        Target(
            "at least 10x sb3-contrib TRPO", lambda env: _speed_ratio(env, "trpo"), lambda ratio: ratio >= 10, "{value:.1f}x"
        ),
        Target("at least as fast as PPO", lambda env: _speed_ratio(env, "ppo"), lambda ratio: ratio >= 1, "{value:.2f}x"),
        Target(
            "at least half of the rollout-only ceiling",
            _ceiling_ratio,
            lambda ratio: ratio >= 0.5,
            "{value:.2f}; ceiling: the faster of the rollout-only pass and TRPOPlus's own rollouts",
        ),
    ),
    "hopper": (
        Target(
            "at least as fast as sb3-contrib TRPO",
            lambda env: _speed_ratio(env, "trpo"),
            lambda ratio: ratio >= 1,
            "{value:.2f}x",
        ),
    ),
}
#: The envs whose targets come with the reading of where an update's time goes (the CNN case's ceiling)
THROUGHPUT_LIMITS = {"breakout"}


# --- Fisher-vector product -------------------------------------------------------------------------------------


def fvp_section(results_dir: Path) -> str:
    data = read_json(results_dir / "fvp.json")
    if data is None:
        return fill("fvp.missing")
    load_after = data.get("machine_after", {}).get("load_average", ["n/a"])[0]
    parts = [fill("fvp", provenance=provenance(data["command"], data["machine"], load_after), **data["args"])]
    for case_name, case in data["cases"].items():
        parts.append(fill("fvp.case", **{**case, "name": case_name}))
        for batch_name, batch in case["batches"].items():
            parts.append(fill("fvp.batch", name=batch_name, batch_size=batch["batch_size"], rows=fvp_rows(batch)))
            # sb3-contrib's KL averaged over the action dimensions: its products are rescaled to compare
            scales = [scale for scale in batch.get("kl_scale", {}).values() if scale != 1]
            if scales:
                parts.append(fill("fvp.kl_scale", dimensions=max(scales)))
    target = data["cases"].get(FVP_TARGET_CASE, {}).get("batches", {}).get(FVP_TARGET_BATCH)
    if target:
        parts.append(fill("fvp.targets", batch_size=target["batch_size"], checks=check_targets(FVP_TARGETS, target)))
        if "double_backward_one_grad" in target["product_s"]:
            speedup = target["product_s"]["double_backward_one_grad"] / target["product_s"]["analytic"]
            parts.append(fill("fvp.one_grad", speedup=speedup))
        parts.append(fill("fvp.cnn_limits"))
    return paragraphs(*parts)


def fvp_rows(batch: dict[str, Any]) -> str:
    rows = []
    for method in batch["product_s"]:
        fields = {key: batch[key][method] for key in ("setup_s", "product_s", "product_speedup", "cg_s", "cg_speedup")}
        error = batch["error"].get(method)
        if error:
            rows.append(fill("fvp.row", label=FVP_LABELS.get(method, method), **fields, **error))
        else:
            rows.append(fill("fvp.row.reference", label=FVP_LABELS.get(method, method), **fields))
    return "\n".join(rows)


# --- throughput --------------------------------------------------------------------------------------------------


def throughput_section(results_dir: Path) -> str:
    """One block per env of each ``throughput*.json`` (e.g. a second file measured with another thread count)."""
    blocks = throughput_blocks(results_dir)
    return paragraphs(fill("throughput"), *blocks) if blocks else fill("throughput.missing")


def throughput_blocks(results_dir: Path, pattern: str = "throughput*.json") -> list[str]:
    """``throughput_env`` for every env of every file ``pattern`` names directly in ``results_dir``."""
    files = sorted(results_dir.glob(pattern))
    envs = [(name, env) for path in files for name, env in json.loads(path.read_text())["envs"].items()]
    return [throughput_env(name, env) for name, env in envs]


def rollout_of(env: dict[str, Any], result: dict[str, Any]) -> tuple[int, int]:
    """``(n_envs, n_steps)`` of one algorithm's timing (older results hold only the benchmark's, shared by all)."""
    return result.get("n_envs", env["n_envs"]), result.get("n_steps", env["n_steps"])


def rollout_settings(env: dict[str, Any]) -> str:
    """The header's rollout: one for all algorithms when the benchmark sets it, else each from its own zoo entry."""
    batches = {rollout_of(env, result) for result in env["algos"].values()}
    if len(batches) == 1:
        return f"{env['n_envs']} envs x {env['n_steps']} steps = {env['n_envs'] * env['n_steps']} steps per update"
    rollout_only = f"{env['n_envs']} envs x {env['n_steps']} steps"
    return f"each algorithm's `n_envs` and `n_steps` from its zoo entry; TRPOPlus's rollout-only pass {rollout_only}"


def throughput_row(env: dict[str, Any], algo: str, result: dict[str, Any]) -> str:
    """One algorithm's row of the throughput table, with its own update size and its ratio to the rollout-only rate."""
    n_envs, n_steps = rollout_of(env, result)
    return fill(
        "throughput.row",
        **{**result, "n_envs": n_envs, "n_steps": n_steps},
        label=ALGO_LABELS[algo],
        vs_rollout=result["steps_per_s"] / env["rollout_only"]["steps_per_s"],
        train_per_update=result["train_s"] / max(result["timed_updates"], 1),
    )


def throughput_env(env_name: str, env: dict[str, Any]) -> str:
    rollout = env["rollout_only"]
    rows = [throughput_row(env, algo, result) for algo, result in env["algos"].items()]
    by_round = env.get("ratios_by_round", [])
    ratios = (
        {
            "name": key.replace("_", " "),
            "value": value,
            "rounds": fill("throughput.ratio.rounds", values=", ".join(f"{r[key]:.2f}" for r in by_round)) if by_round else "",
        }
        for key, value in env["ratios"].items()
    )
    fields = {
        **env,
        "rollout_settings": rollout_settings(env),
        "provenance": provenance(env["command"], env["machine"], env["load_average_after"][0]),
        "rows": "\n".join(rows),
        "rollout_rate": rollout["steps_per_s"],
        "rollouts": rollout["rollouts"],
        "rollout_s": rollout["rollout_s"],
        "ratios": fill_each("throughput.ratio", ratios, ", "),
    }
    parts = [fill("throughput.env", **fields)]
    for algo in ALGO_LABELS:
        phases = env["algos"].get(algo, {}).get("phases")
        if phases:
            parts.append(phase_table(algo, phases))
            if f"throughput.phases.note.{algo}" in template_blocks():
                parts.append(fill(f"throughput.phases.note.{algo}"))
    if env_name in THROUGHPUT_TARGETS and "trpo_plus" in env["algos"]:
        sub = env["algos"]["trpo_plus"]["hyperparams"].get("cg_sub_sampling_factor", "1")
        checks = check_targets(THROUGHPUT_TARGETS[env_name], env)
        parts.append(fill(f"throughput.targets.{env_name}", cg_sub_sampling_factor=sub, checks=checks))
        if env_name in THROUGHPUT_LIMITS:
            parts.append(limits_text(env))
    return paragraphs(*parts)


def phase_table(algo: str, phases: dict[str, float]) -> str:
    """The time split of one update (``phases``: seconds per part, from ``benchmarks.throughput --phase-timing``)."""
    total = phases["total"]
    parts = {key: value for key, value in phases.items() if key in PHASE_LABELS and math.isfinite(value)}
    other = total - sum(parts.values())
    rows = ({"part": PHASE_LABELS[key], "seconds": value, "share": value / total} for key, value in parts.items())
    return fill(
        "throughput.phases",
        label=ALGO_LABELS[algo],
        fvp_calls=phases["fvp_calls"],
        fvp_ms=phases["fvp_mean"] * 1000,
        line_search=fill("throughput.phases.line_search", iters=phases["line_search_iters"])
        if "line_search_iters" in phases
        else "",
        rows=fill_each("throughput.phases.row", rows),
        other=other,
        other_share=other / total,
        total=total,
    )


def limits_text(env: dict[str, Any]) -> str:
    """Where the time goes, from the measured split: why the end-to-end ratios are what they are."""
    plus, trpo = env["algos"]["trpo_plus"], env["algos"].get("trpo")
    batch = env["n_envs"] * env["n_steps"]
    updates = max(plus["timed_updates"], 1)
    per_update = plus["train_s"] / updates
    # (the hyperparameters are stored as strings: the YAML's `dict(...)`, or in older files the repr of a dict)
    separate = re.search(r"share_features_extractor\W+False", plus["hyperparams"].get("policy_kwargs", "")) is not None
    critic_kind = "separate_critic" if separate else "shared_critic"
    text = [
        fill(
            "throughput.limits",
            batch=batch,
            rollout_per_update=plus["rollout_s"] / updates,
            rollout_work=fill(f"throughput.limits.rollout_work.{critic_kind}"),
            train_per_update=per_update,
            rollout_share=plus["rollout_s"] / (plus["rollout_s"] + plus["train_s"]),
            ceiling_per_update=batch / env["rollout_only"]["steps_per_s"],
        )
    ]
    if "phases" in plus:
        sub = int(plus["hyperparams"].get("cg_sub_sampling_factor", "1"))
        phases = plus["phases"]
        text.append(
            fill(
                "throughput.limits.phases",
                **phases,
                fvp_ms=phases["fvp_mean"] * 1000,
                fisher_frames=f"all {batch} frames" if sub == 1 else f"every {sub}th sample, {batch // sub} frames",
                batch=batch,
                critic_trains_cnn=fill(
                    "throughput.limits.critic_trains_cnn", critic_updates=plus["hyperparams"].get("n_critic_updates")
                )
                if float(plus["hyperparams"].get("critic_kl_fraction", "0")) > 0
                else "",
            )
        )
        if trpo and "phases" in trpo:
            trpo_per_update = trpo["train_s"] / max(trpo["timed_updates"], 1)
            critic_work = fill(
                f"throughput.limits.trpo.{critic_kind}",
                trpo_critic_updates=trpo["hyperparams"].get("n_critic_updates", "10"),
                critic_updates=plus["hyperparams"].get("n_critic_updates"),
            )
            text.append(
                fill(
                    "throughput.limits.trpo",
                    speedup=trpo_per_update / per_update,
                    trpo_per_update=trpo_per_update,
                    trpo_fvp_mean=trpo["phases"]["fvp_mean"],
                    trpo_fvp_calls=trpo["phases"]["fvp_calls"],
                    trpo_critic=trpo["phases"]["critic"],
                    critic=phases["critic"],
                    batch=batch,
                    critic_work=critic_work,
                )
            )
    return sentences(*text)
