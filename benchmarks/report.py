"""
Turn the results under ``benchmarks/results/`` into ``docs/benchmarks.md`` (tables) and ``docs/images/`` (plots).

Reads ``fvp.json`` (``benchmarks.fvp``), ``throughput.json`` (``benchmarks.throughput``), ``learning/<algo>/<env>/
seed<k>.json`` (``benchmarks.learning``) and ``breakout/<algo>/seed<k>.json`` (``benchmarks.breakout``); whatever is
missing is listed as not run. Per env of the learning benchmark: the mean and the interquartile mean (IQM) of the
final evaluation returns over seeds, with 95% stratified-bootstrap confidence intervals from ``rliable``
(``rly.get_interval_estimates``); envs with fewer than ``MIN_SEEDS`` seeds of an algorithm are marked incomplete and
not judged. Every figure in the page comes from these files: never edit the page by hand, run this again.

Usage::

    python -m benchmarks.report                       # benchmarks/results -> docs/benchmarks.md, docs/images/
"""

import argparse
import json
import math
import re
import shutil
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import ALGO_LABELS, REPO_ROOT, RESULTS_DIR, env_dirname, load_hyperparams, machine_info

MIN_SEEDS = 5
BOOTSTRAP_REPS = 20_000
#: Seed of the bootstrap: the same results give the same intervals on every regeneration
BOOTSTRAP_SEED = 0
LEARNING_ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "Pendulum-v1", "MinAtar/Breakout-v1"]
COLORS = {"trpo_plus": "tab:blue", "trpo": "tab:orange", "ppo": "tab:green"}
FVP_LABELS = {
    "double_backward": "double backward (sb3-contrib)",
    "double_backward_one_grad": "double backward, one `create_graph` gradient",
    "double_backward_channels_last": "double backward (sb3-contrib), channels_last",
    "analytic": "analytic, `actor_critic_jvp` (TRPOPlus)",
    "functional": "analytic, `functional_jvp`",
}
PHASE_LABELS = {
    "actor_params": "find actor parameters",
    "gradient": "forward + surrogate gradient",
    "fvp_setup": "FVP setup (linearization)",
    "cg": "conjugate gradient",
    "curvature": "step length (1 FVP)",
    "line_search": "line search",
    "critic": "critic",
}


def _read(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def _machine_line(machine: dict[str, Any] | None, when: str = "at start") -> str:
    if not machine:
        return "machine not recorded"
    load = machine.get("load_average")
    return (
        f"{machine.get('cpu_model')}, {machine.get('cpu_affinity') or machine.get('cpu_count')} cores, "
        f"torch {machine.get('torch')} ({machine.get('torch_threads')} threads), load average {when} "
        f"{load[0] if load else 'n/a'}, {machine.get('date')}"
    )


# --- Fisher-vector product -------------------------------------------------------------------------------------


def fvp_section(results_dir: Path) -> list[str]:
    data = _read(results_dir / "fvp.json")
    lines = ["## 1. Fisher-vector product", ""]
    if data is None:
        return [*lines, "Not run yet: `python -m benchmarks.fvp --batch 2048 --threads 2 --repeats 3`.", ""]
    lines += [
        f"Command: `{data['command']}`  ",
        f"Machine: {_machine_line(data['machine'])}; load average at the end "
        f"{data.get('machine_after', {}).get('load_average', ['n/a'])[0]}.",
        "",
        "One process, the same weights, observations (real Breakout frames for the CNN) and vectors for every method. "
        "*setup*: from the observations to the product function and the surrogate gradient (for sb3-contrib: the "
        "old distribution, the KL and `_compute_actor_grad`, one `create_graph` gradient per parameter tensor; for "
        "TRPOPlus: the forward with graph, the gradient and the linearization). *product*: one `F v`, best of "
        f"{data['args']['repeats']} after a warm-up. *CG solve*: setup + {data['args']['cg_steps']} CG iterations "
        "+ the step-length product (one run for the CNN, best of 3 for the MLPs). Errors against the double-backward "
        "product (damping 0, worst of "
        f"{data['args']['vectors']} random vectors): `||a - b|| / ||b||` and `max |a - b|`.",
        "",
    ]
    for case_name, case in data["cases"].items():
        lines.append(
            f"**{case_name}**: {case['policy']} ({case['features_extractor']}), observations {case['observation_shape']}, "
            f"{case['distribution']}, {case['n_actor_params']:,} actor parameters"
        )
        lines.append("")
        for batch_name, batch in case["batches"].items():
            lines += [
                f"*{batch_name}: {batch['batch_size']} samples*",
                "",
                "| method | setup (s) | product (s) | product speed-up | CG solve (s) | CG speed-up | rel. error "
                "| max abs error |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            ]
            for method, product in batch["product_s"].items():
                error = batch["error"].get(method)
                rel = f"{error['rel']:.1e}" if error else "reference"
                max_abs = f"{error['max_abs']:.1e}" if error else ""
                lines.append(
                    f"| {FVP_LABELS.get(method, method)} | {batch['setup_s'][method]:.4g} | {product:.4g} | "
                    f"{batch['product_speedup'][method]:.2f}x | {batch['cg_s'][method]:.4g} | "
                    f"{batch['cg_speedup'][method]:.2f}x | {rel} | {max_abs} |"
                )
            scales = {m: s for m, s in batch.get("kl_scale", {}).items() if s != 1}
            if scales:
                lines += [
                    "",
                    f"sb3-contrib averages the KL over the {max(scales.values())} action dimensions too; the TRPOPlus rows "
                    "are the products of the KL of the joint distribution (`joint_kl=True`; TRPOPlus's default, like "
                    "sb3-contrib, scales the same product by 1/d at no extra cost), so the errors compare the same "
                    "matrix (sb3-contrib's product rescaled by d).",
                ]
            lines.append("")
    cnn = data["cases"].get("nature_cnn", {}).get("batches", {}).get("full")
    if cnn:
        speedup = cnn["product_speedup"]["analytic"]
        error = cnn["error"]["analytic"]["rel"]
        lines += [
            f"**Targets** (CNN, {cnn['batch_size']} frames): at least 15x faster per product: "
            f"**{'met' if speedup >= 15 else 'missed'}** ({speedup:.1f}x per product, "
            f"{cnn['cg_speedup']['analytic']:.1f}x per CG solve with setup); relative error under 1e-4: "
            f"**{'met' if error < 1e-4 else 'missed'}** ({error:.1e}).",
            "",
        ]
        if "double_backward_one_grad" in cnn["product_s"]:
            one_grad = cnn["product_s"]["double_backward_one_grad"] / cnn["product_s"]["analytic"]
            lines += [
                f"Part of the gap to sb3-contrib is its way of building the first gradient: one `create_graph` gradient "
                f"per parameter tensor, whose graphs the product then runs back through one by one. Against the "
                f"double backward with a single `create_graph` gradient the analytic product is {one_grad:.1f}x "
                "faster.",
                "",
            ]
        lines += [
            "What limits the speed-up on CPU: every product, analytic or not, ends with a backward pass through the "
            "convolutions (`J^T u`), and the convolution weight-gradient kernels dominate it. The analytic product "
            "removes the second-order graph and replaces its forward part by one tangent pass, so its cost is about "
            "one forward plus one backward through the network, against about two of each for the double backward: "
            "a few times faster, not 15x. The double backward gains nothing from channels_last tensors (its "
            "channels_last row), so the speed-up is not an effect of the memory format.",
            "",
        ]
    return lines


# --- throughput --------------------------------------------------------------------------------------------------


def throughput_section(results_dir: Path) -> list[str]:
    """One block per env of each ``throughput*.json`` (e.g. a second file measured with another thread count)."""
    files = sorted(results_dir.glob("throughput*.json"))
    lines = ["## 2. Throughput", ""]
    if not files:
        return [*lines, "Not run yet: `python -m benchmarks.throughput --threads 2 --phase-timing`.", ""]
    lines += [
        "Steps per second over the timed updates (rollout plus training), after untimed warm-up updates; every "
        "algorithm steps the same environment with the same `n_envs` and `n_steps`, the rest of its hyperparameters "
        "from its zoo entry. *Rollout only*: TRPOPlus's rollouts (policy forward, env steps, buffer) without "
        "any update: the ceiling.",
        "",
    ]
    envs = [(name, env) for path in files for name, env in json.loads(path.read_text())["envs"].items()]
    for env_name, env in envs:
        rollout = env["rollout_only"]["steps_per_s"]
        lines += [
            f"**{env['env_id']}** ({env['policy']}, {env['n_envs']} envs x {env['n_steps']} steps = "
            f"{env['n_envs'] * env['n_steps']} steps per update, {env['threads']} torch thread(s))",
            "",
            f"Command: `{env['command']}`  ",
            f"Machine: {_machine_line(env['machine'])}; load average at the end {env['load_average_after'][0]}.",
            "",
            "| algorithm | steps/s | vs rollout only | timed updates | rollout (s) | training (s) | training s / update "
            "| hyperparameters |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for algo, result in env["algos"].items():
            lines.append(
                f"| {ALGO_LABELS[algo]} | {result['steps_per_s']:.1f} | {result['steps_per_s'] / rollout:.2f} | "
                f"{result['timed_updates']} (+{result['warmup_updates']} warm-up) | {result['rollout_s']:.1f} | "
                f"{result['train_s']:.1f} | {result['train_s'] / max(result['timed_updates'], 1):.2f} | "
                f"`{result['hyperparams_source']}` |"
            )
        lines += [
            f"| rollout only | {rollout:.1f} | 1.00 | {env['rollout_only']['rollouts']} | "
            f"{env['rollout_only']['rollout_s']:.1f} | 0 | 0 | |",
            "",
        ]
        ratios = env["ratios"]
        lines.append("Ratios: " + ", ".join(f"{key.replace('_', ' ')} **{value:.2f}**" for key, value in ratios.items()))
        lines.append("")
        for algo in ("trpo_plus", "trpo"):
            phases = env["algos"].get(algo, {}).get("phases")
            if not phases:
                continue
            total = phases["total"]
            parts = {key: value for key, value in phases.items() if key in PHASE_LABELS and math.isfinite(value)}
            other = total - sum(parts.values())
            lines += [
                f"Time split of one {ALGO_LABELS[algo]} update (mean over the timed updates; "
                f"{phases['fvp_calls']:.0f} Fisher-vector products of {phases['fvp_mean'] * 1000:.1f} ms each):",
                "",
                "| part | seconds | share |",
                "| --- | ---: | ---: |",
            ]
            for key, value in parts.items():
                lines.append(f"| {PHASE_LABELS[key]} | {value:.3f} | {value / total:.0%} |")
            lines += [
                f"| other (logging, explained variance) | {other:.3f} | {other / total:.0%} |",
                f"| **total** | {total:.3f} | 100% |",
                "",
            ]
            if algo == "trpo":
                lines += [
                    "(sb3-contrib's `train()` is one block: its *line search* row includes the step-length "
                    "product, its *forward + surrogate gradient* row the per-parameter `create_graph` gradients.)",
                    "",
                ]
        if env_name == "breakout" and "trpo_plus" in env["algos"]:
            plus = env["algos"]["trpo_plus"]["steps_per_s"]
            checks = []
            if "trpo" in env["algos"]:
                ratio = plus / env["algos"]["trpo"]["steps_per_s"]
                checks.append(f"at least 10x sb3-contrib TRPO: **{'met' if ratio >= 10 else 'missed'}** ({ratio:.1f}x)")
            if "ppo" in env["algos"]:
                ratio = plus / env["algos"]["ppo"]["steps_per_s"]
                checks.append(f"at least as fast as PPO: **{'met' if ratio >= 1 else 'missed'}** ({ratio:.2f}x)")
            ratio = plus / rollout
            checks.append(
                f"at least half of the rollout-only ceiling: **{'met' if ratio >= 0.5 else 'missed'}** ({ratio:.2f})"
            )
            sub = env["algos"]["trpo_plus"]["hyperparams"].get("cg_sub_sampling_factor", "1")
            lines += [f"**Targets** (Breakout, TRPOPlus with cg_sub_sampling_factor={sub}): " + "; ".join(checks) + ".", ""]
            lines += limits_text(env)
    return lines


def limits_text(env: dict[str, Any]) -> list[str]:
    """Where the time goes, from the measured split: why the end-to-end ratios are what they are."""
    plus, trpo = env["algos"]["trpo_plus"], env["algos"].get("trpo")
    batch = env["n_envs"] * env["n_steps"]
    updates = max(plus["timed_updates"], 1)
    per_update = plus["train_s"] / updates
    rollout_per_update = plus["rollout_s"] / updates
    ceiling_per_update = batch / env["rollout_only"]["steps_per_s"]
    sub = int(plus["hyperparams"].get("cg_sub_sampling_factor", "1"))
    # (the hyperparameters are stored as strings: the YAML's `dict(...)`, or in older files the repr of a dict)
    separate_critic = re.search(r"share_features_extractor\W+False", plus["hyperparams"].get("policy_kwargs", "")) is not None
    rollout_work = (
        "the environment steps of every algorithm, plus a second CNN forward pass per step for TRPOPlus's own critic"
        if separate_critic
        else "the same work for every algorithm"
    )
    text = (
        f"Where the time goes: per update of {batch} steps, TRPOPlus spends {rollout_per_update:.2f} s in the rollout "
        f"({rollout_work}) and {per_update:.2f} s in training "
        f"({plus['rollout_s'] / (plus['rollout_s'] + plus['train_s']):.0%} of its time is the rollout). Half of the "
        f"rollout-only rate needs the training of an update to take no longer than a rollout-only pass, "
        f"{ceiling_per_update:.2f} s here."
    )
    if "phases" in plus:
        phases = plus["phases"]
        text += (
            f" TRPOPlus's update: conjugate gradient {phases['cg']:.2f} s ({phases['fvp_calls']:.0f} products of "
            f"{phases['fvp_mean'] * 1000:.0f} ms on every {sub}th sample, {batch // sub} frames), forward and "
            f"surrogate gradient on all {batch} frames {phases['gradient']:.2f} s, line search "
            f"{phases['line_search']:.2f} s, critic {phases['critic']:.2f} s."
        )
    if trpo and "phases" in trpo and "phases" in plus:
        trpo_update = trpo["train_s"] / max(trpo["timed_updates"], 1)
        text += (
            f" The training step is {trpo_update / per_update:.1f}x faster than sb3-contrib's ({trpo_update:.1f} s): "
            f"sb3-contrib's products take {trpo['phases']['fvp_mean']:.2f} s each on all {batch} frames "
            f"({trpo['phases']['fvp_calls']:.0f} of them: its CG stopped early on the residual tolerance), and its "
            f"critic {trpo['phases']['critic']:.2f} s against {plus['phases']['critic']:.2f} s "
            + (
                "(both run every critic minibatch through a CNN: sb3-contrib's "
                f"{trpo['hyperparams'].get('n_critic_updates', '10')} "
                f"epochs through the shared one, of which only the value head learns; TRPOPlus's "
                f"{plus['hyperparams'].get('n_critic_updates')} epochs through the critic's own CNN)."
                if separate_critic
                else "(it runs every critic minibatch through the shared CNN; TRPOPlus computes the features once)."
            )
        )
    return [text, ""]


# --- MinAtar: five games, normalized ----------------------------------------------------------------------------

MINATAR_GAMES = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
#: Seeds of the MinAtar comparison: seed 0 chose the TRPOPlus entry's values (docs/zoo.md), so it is not reported
MINATAR_SEEDS = [1, 2, 3]


def minatar_section(results_dir: Path) -> list[str]:
    """Per game and aggregated over the five games: TRPOPlus against PPO, normalized by random = 0 and PPO = 1."""
    runs = load_learning(results_dir)
    random_scores = (_read(results_dir / "minatar_random.json") or {}).get("games", {})
    lines = [
        "## 5. MinAtar: five games",
        "",
        f"TRPOPlus (one entry for all five games, `hyperparams/trpo_plus.yml`) against PPO (one fixed configuration, "
        f"`benchmarks/hyperparams.yml`), 2M steps, seeds {', '.join(map(str, MINATAR_SEEDS))} (seed 0 chose the "
        "TRPOPlus entry's values and is left out). Score of a run: its final evaluation, as in section 3. Normalized "
        "score: `(score - random) / (PPO - random)`, with *random* the uniformly random policy's mean return "
        "(`python -m benchmarks.minatar_random`, 100 episodes) and *PPO* PPO's mean score on the game over the same "
        "seeds: PPO = 1 by construction. Aggregate: IQM and mean of the normalized scores of all runs of all games, "
        f"95% stratified-bootstrap intervals (rliable, {BOOTSTRAP_REPS:,} resamples, seed {BOOTSTRAP_SEED}).",
        "",
        "Command (resumable): `python -m benchmarks.learning --algos trpo_plus ppo --envs MinAtar/Asterix-v1 "
        "MinAtar/Breakout-v1 MinAtar/Freeway-v1 MinAtar/Seaquest-v1 MinAtar/SpaceInvaders-v1 --seeds 1 2 3 --jobs 2 "
        "--threads 1`, then `python -m benchmarks.minatar_random` and `python -m benchmarks.report`.",
        "",
        "| game | random | TRPOPlus IQM [95% CI] | PPO IQM [95% CI] | TRPOPlus normalized (mean) | TRPOPlus below PPO's "
        "interval | seeds (TRPOPlus / PPO) |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    normalized: dict[str, list[list[float]]] = {"trpo_plus": [], "ppo": []}
    complete = []
    for game in MINATAR_GAMES:
        env_id = f"MinAtar/{game}-v1"
        by_algo = {
            algo: {r["seed"]: r["final"]["mean"] for r in runs.get(env_id, {}).get(algo, []) if r["seed"] in MINATAR_SEEDS}
            for algo in normalized
        }
        counts = f"{len(by_algo['trpo_plus'])} / {len(by_algo['ppo'])}"
        random_score = random_scores.get(env_id, {}).get("mean")
        if not all(by_algo.values()) or random_score is None:
            shown = "n/a" if random_score is None else f"{random_score:.2f}"
            lines.append(f"| {game} | {shown} | not run yet | not run yet | | | {counts} |")
            continue
        scores = {algo: np.array(list(values.values())) for algo, values in by_algo.items()}
        estimates = interval_estimates(scores)
        ppo_mean = float(np.mean(scores["ppo"]))
        scale = ppo_mean - random_score
        game_normalized = {algo: (values - random_score) / scale for algo, values in scores.items()}
        below = estimates["trpo_plus"]["iqm"][0] < estimates["ppo"]["iqm"][1]
        lines.append(
            f"| {game} | {random_score:.2f} | {_interval(estimates['trpo_plus']['iqm'])} | "
            f"{_interval(estimates['ppo']['iqm'])} "
            f"| {float(np.mean(game_normalized['trpo_plus'])):.2f} | {'**yes**' if below else 'no'} | {counts} |"
        )
        full = all(len(values) == len(MINATAR_SEEDS) for values in by_algo.values())
        if full:
            complete.append(game)
            for algo in normalized:
                normalized[algo].append([float(by_algo[algo][seed] - random_score) / scale for seed in MINATAR_SEEDS])
    lines.append("")
    if len(complete) < 2:
        return [*lines, f"Aggregate: not yet ({len(complete)} game(s) with every seed of both algorithms).", ""]
    matrices = {algo: np.array(values).T for algo, values in normalized.items()}  # (seeds, games)
    estimates = interval_estimates(matrices)
    games_text = (
        "all five games" if len(complete) == len(MINATAR_GAMES) else f"{len(complete)} of 5 games ({', '.join(complete)})"
    )
    lines += [
        f"Aggregate over {games_text}, normalized scores:",
        "",
        "| algorithm | IQM [95% CI] | mean [95% CI] |",
        "| --- | ---: | ---: |",
    ]
    for algo in normalized:
        iqm, mean = estimates[algo]["iqm"], estimates[algo]["mean"]
        lines.append(
            f"| {ALGO_LABELS[algo]} | {iqm[0]:.2f} [{iqm[1]:.2f}, {iqm[2]:.2f}] | "
            f"{mean[0]:.2f} [{mean[1]:.2f}, {mean[2]:.2f}] |"
        )
    lines.append("")
    return lines


# --- learning ----------------------------------------------------------------------------------------------------


def load_learning(results_dir: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``{env_id: {algo: [record, ...]}}`` of the finished runs, sorted by seed."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted((results_dir / "learning").glob("*/*/seed*.json")):
        record = json.loads(path.read_text())
        runs[record["env_id"]][record["algo"]].append(record)
    for by_algo in runs.values():
        for records in by_algo.values():
            records.sort(key=lambda record: record["seed"])
    return runs


def interval_estimates(scores: dict[str, np.ndarray]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """
    Per algorithm: mean and IQM of the scores with 95% stratified-bootstrap intervals (rliable). ``scores[algo]``:
    one score per seed, or a ``(seeds, tasks)`` matrix aggregated over all its entries.
    """
    from rliable import library as rly
    from rliable import metrics

    def aggregates(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_mean(x), metrics.aggregate_iqm(x)])

    # one row per run, one column per task (a single task: a column of seeds)
    score_dict = {algo: values.reshape(len(values), -1) for algo, values in scores.items()}
    # rliable's StratifiedBootstrap draws its resamples from NumPy's global generator (np.random.choice), whatever
    # random_state says: seed that generator for the call, then give the caller back its state
    global_state = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # arch's notice about `random_state`, used by rliable
            points, intervals = rly.get_interval_estimates(
                score_dict, aggregates, reps=BOOTSTRAP_REPS, random_state=np.random.RandomState(BOOTSTRAP_SEED)
            )
    finally:
        np.random.set_state(global_state)
    return {
        algo: {
            "mean": (points[algo][0], intervals[algo][0, 0], intervals[algo][1, 0]),
            "iqm": (points[algo][1], intervals[algo][0, 1], intervals[algo][1, 1]),
        }
        for algo in scores
    }


def plot_curves(env_id: str, by_algo: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """Mean evaluation return over seeds against steps, with a 95% bootstrap interval of the mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    rng = np.random.default_rng(0)
    for algo, records in by_algo.items():
        grid = np.asarray(records[0]["curve"]["timesteps"], dtype=float)
        curves = np.array([np.interp(grid, r["curve"]["timesteps"], r["curve"]["mean"]) for r in records])
        mean = curves.mean(axis=0)
        ax.plot(grid, mean, color=COLORS.get(algo), label=f"{ALGO_LABELS[algo]} ({len(records)} seeds)")
        if len(records) > 1:
            samples = curves[rng.integers(0, len(records), size=(2000, len(records)))].mean(axis=1)
            low, high = np.percentile(samples, [2.5, 97.5], axis=0)
            ax.fill_between(grid, low, high, color=COLORS.get(algo), alpha=0.2, linewidth=0)
    ax.set_title(f"{env_id}: evaluation return (mean over seeds, 95% bootstrap CI)", fontsize=9)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("return")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def budget_table() -> list[str]:
    """The common budget of each env and each algorithm's own zoo budget (read from the YAML files)."""
    from benchmarks._common import common_budget, load_hyperparams

    lines = ["| env | common budget | " + " | ".join(f"{label} own budget" for label in ALGO_LABELS.values()) + " |"]
    lines.append("| --- | ---: |" + " ---: |" * len(ALGO_LABELS))
    for env_id in LEARNING_ENVS:
        own = []
        for algo in ALGO_LABELS:
            hyperparams, _ = load_hyperparams(algo, env_id)
            own.append(f"{int(float(hyperparams['n_timesteps'])):,}")
        lines.append(f"| {env_id} | {common_budget(env_id):,} | " + " | ".join(own) + " |")
    return lines


def _interval(value: tuple[float, float, float]) -> str:
    return f"{value[0]:.1f} [{value[1]:.1f}, {value[2]:.1f}]"


def learning_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> list[str]:
    runs = load_learning(results_dir)
    lines = [
        "## 3. Learning",
        "",
        "Score of a run: the mean return of the evaluation at the end of training (separate environments seeded "
        "apart from the training ones, `VecNormalize` statistics copied, reward normalization off; deterministic "
        "actions, the zoo's rule outside Atari). Per env and algorithm: the mean and the interquartile mean (IQM) of "
        f"the scores over seeds, with 95% stratified-bootstrap confidence intervals (rliable, {BOOTSTRAP_REPS:,} "
        f"resamples, seed {BOOTSTRAP_SEED}: the same results give the same intervals). With fewer than {MIN_SEEDS} "
        "seeds an entry is marked *incomplete* and not judged; nothing is "
        "extrapolated. The seeds are the same for every algorithm. *Training reward at the end*: the mean over seeds "
        "of SB3's `rollout/ep_rew_mean` (the last 100 training episodes, stochastic actions, raw rewards) when the "
        "run ended; shown for context, not used in the verdicts.",
        "",
        "Budget: unless a row says otherwise, every algorithm gets the same number of steps on an env, "
        "sb3-contrib TRPO's zoo budget (`n_timesteps` of `trpo.yml`; 2M steps for MinAtar), so that the comparison "
        "is at equal experience. Where an algorithm's own zoo budget is larger (table below), it is measured below "
        "the budget its hyperparameters were tuned for. Hyperparameters: `hyperparams/trpo_plus.yml`, rl_zoo3's "
        "`trpo.yml` and `ppo.yml` (MinAtar: `benchmarks/hyperparams.yml`, untuned for TRPO and PPO).",
        "",
        *budget_table(),
        "",
    ]
    if not runs:
        return [*lines, "No run finished yet.", ""]
    verdicts = []
    for env_id in [*LEARNING_ENVS, *sorted(set(runs) - set(LEARNING_ENVS))]:
        if env_id not in runs:
            continue
        by_algo = {algo: runs[env_id][algo] for algo in ALGO_LABELS if algo in runs[env_id]}
        scores = {algo: np.array([r["final"]["mean"] for r in records]) for algo, records in by_algo.items()}
        estimates = interval_estimates(scores)
        lines += [
            f"### {env_id}",
            "",
            "| algorithm | seeds | budget (steps) | mean [95% CI] | IQM [95% CI] | per seed | training reward at the end "
            "| status | hyperparameters |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |",
        ]
        for algo, records in by_algo.items():
            budgets = sorted({r["n_timesteps"] for r in records})
            seeds = ", ".join(f"{r['seed']}: {r['final']['mean']:.1f}" for r in records)
            status = "complete" if len(records) >= MIN_SEEDS else f"**incomplete** ({len(records)} < {MIN_SEEDS} seeds)"
            # Secondary, not judged: the stochastic policy's training episodes (SB3's ep_rew_mean, last 100 episodes)
            train = [r["curve"]["train_ep_rew_mean"][-1] for r in records if r["curve"].get("train_ep_rew_mean")]
            train = [value for value in train if value is not None]
            lines.append(
                f"| {ALGO_LABELS[algo]} | {len(records)} | {', '.join(f'{b:,}' for b in budgets)} | "
                f"{_interval(estimates[algo]['mean'])} | {_interval(estimates[algo]['iqm'])} | {seeds} | "
                f"{_fmt(float(np.mean(train)) if train else None, 4)} | {status} | `{records[0]['hyperparams_source']}` |"
            )
        image = images_dir / f"learning_{env_dirname(env_id)}.png"
        plot_curves(env_id, by_algo, image)
        lines += ["", f"![{env_id} learning curves]({image.relative_to(docs_dir).as_posix()})", ""]
        complete = {algo for algo, records in by_algo.items() if len(records) >= MIN_SEEDS}
        for other in ("trpo", "ppo"):
            if other == "ppo" and not env_id.startswith("MinAtar/"):
                continue  # the target against PPO is on MinAtar Breakout only
            if "trpo_plus" not in by_algo or other not in by_algo:
                missing_algo = ALGO_LABELS["trpo_plus" if "trpo_plus" not in by_algo else other]
                verdicts.append(f"- {env_id}, TRPOPlus vs {ALGO_LABELS[other]}: not judged ({missing_algo} not run yet)")
                continue
            if {"trpo_plus", other} <= complete:
                plus, base = estimates["trpo_plus"]["iqm"], estimates[other]["iqm"]
                overlap = plus[1] <= base[2] and base[1] <= plus[2]
                met = plus[0] >= base[0]
                verdicts.append(
                    f"- {env_id}, TRPOPlus at or above {ALGO_LABELS[other]} (IQM): **{'met' if met else 'missed'}** "
                    f"({plus[0]:.1f} vs {base[0]:.1f}; the 95% intervals {'overlap' if overlap else 'do not overlap'})"
                )
            else:
                verdicts.append(f"- {env_id}, TRPOPlus vs {ALGO_LABELS[other]}: not judged (incomplete)")
    missing = [env for env in LEARNING_ENVS if env not in runs]
    lines += ["### Targets", "", *verdicts]
    if missing:
        lines.append(f"- Not run yet: {', '.join(missing)}")
    lines.append("")
    return lines


# --- Breakout ----------------------------------------------------------------------------------------------------


VARIANT_COLORS = ("tab:purple", "tab:brown", "tab:olive", "tab:cyan", "tab:pink")


def _breakout_color(record: dict[str, Any], variants: list[str]) -> str | None:
    if "variant" in record:
        return VARIANT_COLORS[variants.index(record["variant"]) % len(VARIANT_COLORS)]
    return COLORS.get(record["algo"])


def plot_breakout_curves(records: list[dict[str, Any]], path: Path) -> None:
    """Evaluation return, training reward and the critic's explained variance against steps, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = sorted({record["variant"] for record in records if "variant" in record})
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    for record in records:
        curve, color = record["curve"], _breakout_color(record, variants)
        label = f"{record['algo_label']} seed {record['seed']}"
        axes[0].errorbar(curve["timesteps"], curve["mean"], yerr=curve["std"], color=color, label=label, capsize=2)
        points = [(t, r) for t, r in zip(curve["timesteps"], curve.get("train_ep_rew_mean", [])) if r is not None]
        if points:
            axes[1].plot(*zip(*points), color=color, label=label, marker=".")
        explained = record.get("explained_variance")
        if explained:
            axes[2].plot(explained["timesteps"], explained["value"], color=color, label=label, linewidth=0.8)
    titles = [
        "evaluation return (mean +/- std over episodes)",
        "training reward (last 100 episodes)",
        "critic: explained variance of the returns",
    ]
    for ax, title in zip(axes, titles):
        ax.set_title(f"BreakoutNoFrameskip-v4: {title}", fontsize=9)
        ax.set_xlabel("environment steps")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _late_explained_variance(record: dict[str, Any], window: int = 100_000) -> float | None:
    """Mean ``train/explained_variance`` over the last ``window`` steps of the run (None if not recorded)."""
    explained = record.get("explained_variance")
    if not explained or not explained["timesteps"]:
        return None
    last = explained["timesteps"][-1]
    values = [v for t, v in zip(explained["timesteps"], explained["value"]) if t > last - window]
    return float(np.mean(values))


def differences_from_entry(record: dict[str, Any]) -> str:
    """
    What the run's hyperparameters change from the algorithm's YAML entry as it is now (``n_timesteps`` aside): a
    run recorded before an entry changed, or with ``--params``, says so.
    """
    entry, _ = load_hyperparams(record["algo"], record["env_id"])
    used = record.get("hyperparams") or {}
    changed = [
        f"{key}: {json.dumps(used.get(key))} (entry: {json.dumps(entry.get(key))})"
        for key in sorted(set(entry) | set(used))
        if key != "n_timesteps" and used.get(key) != entry.get(key)
    ]
    return "; ".join(changed) if changed else "none"


def breakout_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> list[str]:
    lines = ["## 4. Breakout (ALE)", ""]
    records = [json.loads(p.read_text()) for p in sorted((results_dir / "breakout").glob("*/seed*.json"))]
    # Variants of a YAML entry (``--params ... --results-dir benchmarks/results/breakout_variants/NAME``)
    for path in sorted((results_dir / "breakout_variants").glob("*/breakout/*/seed*.json")):
        record = json.loads(path.read_text())
        variant = path.parents[2].name
        records.append({**record, "algo_label": f"{record['algo_label']} [{variant}]", "variant": variant})
    if not records:
        estimate = ""
        throughput = _read(results_dir / "throughput.json")
        breakout = (throughput or {}).get("envs", {}).get("breakout", {}).get("algos", {})
        if breakout:
            rates = ", ".join(
                f"{ALGO_LABELS[algo]} {1e6 / breakout[algo]['steps_per_s'] / 60:.0f} min"
                for algo in ("trpo_plus", "ppo")
                if algo in breakout
            )
            estimate = (
                f" At the rates of section 2 (rollouts of 8 x 128 steps), 1M steps would take about {rates}, plus evaluations."
            )
        return [
            *lines,
            "No run recorded yet." + estimate,
            "",
            "```bash",
            "python -m benchmarks.breakout --algo trpo_plus --budget 1e6 --seed 0 --threads 2   # add --resume to continue",
            "python -m benchmarks.breakout --algo ppo --budget 1e6 --seed 0 --threads 2",
            "# the full run, on a machine with a GPU",
            "python -m benchmarks.breakout --algo trpo_plus --budget 1e7 --seed 0 --device cuda",
            "```",
            "",
        ]
    lines += [
        "Evaluation: separate environments, stochastic actions (the zoo's rule for Atari), the game's score summed over "
        "its 5 lives (the evaluation environments are not reward-clipped). Training reward: mean of the last 100 "
        "training episodes as SB3's Monitor records them, before clipping. Critic EV: the explained variance of the "
        "returns by the value function (`train/explained_variance`, 1 is a perfect fit, 0 no better than a constant), "
        "mean over the last 100k steps; n/a where the run's logs were not kept. *Differs from the entry*: the run's "
        "hyperparameters against the YAML entry as it is in this commit (`none`: the run is of today's entry).",
        "",
        "| algorithm | seed | steps | final evaluation | best evaluation | train reward at the end | critic EV | "
        "wall time (s) | hyperparameters | differs from the entry | command |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for record in records:
        curve = record["curve"]
        train = [value for value in curve.get("train_ep_rew_mean", []) if value is not None]
        lines.append(
            f"| {record['algo_label']} | {record['seed']} | {record['num_timesteps_done']:,} | "
            f"{record['final']['mean']:.1f} +/- {record['final']['std']:.1f} | {max(curve['mean']):.1f} | "
            f"{_fmt(train[-1] if train else None)} | {_fmt(_late_explained_variance(record), 2)} | "
            f"{record['wall_s_this_session']:.0f} | "
            f"`{record['hyperparams_source']}` | {differences_from_entry(record)} | `{record['command']}` |"
        )
    lines.append("")
    lines += [
        f"Machine ({record['algo_label']}): {_machine_line(record.get('machine'), 'when the run ended')}.  "
        for record in records
    ]
    image = images_dir / "breakout_curves.png"
    plot_breakout_curves(records, image)
    lines += ["", f"![Breakout curves]({image.relative_to(docs_dir).as_posix()})", ""]
    for record in records:
        picture = record.get("diagnostics_picture")
        if "variant" in record:
            picture = f"breakout_variants/{record['variant']}/{picture}" if picture else None
        # (the picture's panels are TRPOPlus's diagnostics: only its reward panel would be drawn for PPO)
        if record["algo"] == "trpo_plus" and picture and (results_dir / picture).is_file():
            variant = f"_{record['variant']}" if "variant" in record else ""
            target = images_dir / f"breakout_{record['algo']}{variant}_seed{record['seed']}_diagnostics.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(results_dir / picture, target)
            lines += [f"![{record['algo_label']} diagnostics]({target.relative_to(docs_dir).as_posix()})", ""]
    return lines


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    parser.add_argument("--out", default=str(REPO_ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--images-dir", default=None, help="where the PNGs go (default: images/ next to --out)")
    args = parser.parse_args(argv)

    results_dir, out = Path(args.results_dir), Path(args.out)
    docs_dir = out.parent
    images_dir = Path(args.images_dir) if args.images_dir else docs_dir / "images"
    machine = machine_info()
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m benchmarks.report` from benchmarks/results/: do not edit by hand. -->",
        "",
        "TRPOPlus against sb3-contrib TRPO and PPO: the Fisher-vector product, throughput, learning on classic control "
        "and MinAtar, and Breakout. Each section gives the command that produced it and the machine it ran on. "
        "The machine is shared with other work: the load average recorded at each measurement tells how busy "
        "it was, and timings taken under load are slower than on an idle machine.",
        "",
        f"Report machine: {machine['cpu_model']}, {machine.get('cpu_affinity') or machine['cpu_count']} cores, "
        f"Python {machine['python']}, torch {machine['torch']}, stable-baselines3 {machine['stable_baselines3']}, "
        f"sb3-contrib {machine['sb3_contrib']}, rl-zoo3 {machine.get('rl_zoo3', 'n/a')}, "
        f"sb3-trpo-plus {machine.get('sb3_trpo_plus', 'n/a')}.",
        "",
        "## Commands",
        "",
        "```bash",
        "python -m benchmarks.fvp --batch 2048 --threads 2 --repeats 3 --out benchmarks/results/fvp.json",
        "python -m benchmarks.throughput --threads 2 --phase-timing --out benchmarks/results/throughput.json",
        "# the same with TRPOPlus's critic on the shared CNN (as sb3-contrib TRPO and PPO) instead of the entry's own CNN",
        "python -m benchmarks.throughput --envs breakout --threads 2 --phase-timing \\",
        "    --params 'policy_kwargs:dict(share_features_extractor=True)' \\",
        "    --out benchmarks/results/throughput_shared_critic.json",
        "# resumable: run the same command again to continue; 2 runs at a time, 1 torch thread each",
        "# (LunarLander-v3 needs pip install 'gymnasium[box2d]', MinAtar pip install minatar)",
        "python -m benchmarks.learning --algos trpo_plus trpo ppo --envs CartPole-v1 Acrobot-v1 MountainCar-v0 \\",
        "    LunarLander-v3 Pendulum-v1 MinAtar/Breakout-v1 --seeds 0 1 2 3 4 --jobs 2 --threads 1",
        "python -m benchmarks.breakout --algo trpo_plus --budget 1e6 --seed 0   # and --algo ppo; --resume continues",
        "# a variant of the entry: --params key:value ... --results-dir benchmarks/results/breakout_variants/NAME",
        "# MinAtar, five games (section 5), and the random policy's scores that normalize them",
        "python -m benchmarks.learning --algos trpo_plus ppo --envs MinAtar/Asterix-v1 MinAtar/Breakout-v1 \\",
        "    MinAtar/Freeway-v1 MinAtar/Seaquest-v1 MinAtar/SpaceInvaders-v1 --seeds 1 2 3 --jobs 2 --threads 1",
        "python -m benchmarks.minatar_random --episodes 100",
        "python -m benchmarks.report",
        "```",
        "",
    ]
    lines += fvp_section(results_dir)
    lines += throughput_section(results_dir)
    lines += learning_section(results_dir, images_dir, docs_dir)
    lines += breakout_section(results_dir, images_dir, docs_dir)
    lines += minatar_section(results_dir)
    text = "\n".join(lines).rstrip() + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"written to {out}")
    return text


if __name__ == "__main__":
    main()
