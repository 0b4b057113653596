"""
Section 4 of the report (``benchmarks.report``): Breakout. TRPOPlus's ``atari`` entry against PPO's over the same
seeds (``atari/breakout/<algo>/seed<k>.json``, from ``benchmarks.atari``), every recorded run with its differences from
the entry, and every tuning candidate of the entry on the tuning seeds (``breakout_tuning/``, with their decision
rules).
"""

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import ALGO_LABELS, load_hyperparams
from benchmarks.report_atari import ATARI_MEASUREMENTS, is_sealed
from benchmarks.report_common import (
    OVERLAP,
    VERDICT,
    Shown,
    fill,
    fill_each,
    image_link,
    machine_text,
    paragraphs,
    read_json,
    sentences,
)
from benchmarks.report_stats import (
    BOOTSTRAP_REPS,
    BOOTSTRAP_SEED,
    COLORS,
    finish_axes,
    interval_estimates,
    plot_curves,
    plot_mean_curves,
    pyplot,
    save_figure,
)

#: Breakout: the entries compared (TRPOPlus first), their budget and the seeds each needs before it is judged
BREAKOUT_ALGOS = ("trpo_plus", "ppo")
BREAKOUT_BUDGET = 1_000_000
BREAKOUT_MIN_SEEDS = 3
#: Evaluations a run's late score averages (the final one and those before it), for the check beside the verdict
BREAKOUT_LATE_EVALUATIONS = 3
#: The colors of the variants of an entry (``breakout_variants/NAME``), in turn
VARIANT_COLORS = ("tab:purple", "tab:brown", "tab:olive", "tab:cyan", "tab:pink")


# --- Breakout ----------------------------------------------------------------------------------------------------


def _run_order(path: Path) -> tuple[str, int, str]:
    """Runs of a folder by seed number (seed2 before seed10)."""
    match = re.fullmatch(r"seed(\d+)\.json", path.name)
    return str(path.parent), int(match.group(1)) if match else -1, path.name


def breakout_records(results_dir: Path) -> list[dict[str, Any]]:
    """
    Every recorded Breakout run, by algorithm and seed: ``atari/breakout/<algo>/seed<k>.json``, then the variants of
    an entry (``breakout_variants/NAME/breakout/<algo>/seed<k>.json``), marked with their name, then each later Atari-5
    measurement's (``<folder>/atari/breakout/<algo>/seed<k>.json``), marked with its ``breakout_mark``; none of a sealed
    measurement's until its rule reads its runs (``is_sealed``).
    """
    paths = sorted((results_dir / "atari" / "breakout").glob("*/seed*.json"), key=_run_order)
    records = [json.loads(path.read_text()) for path in paths]
    variants = [
        (path, path.parents[2].name)
        for path in sorted((results_dir / "breakout_variants").glob("*/breakout/*/seed*.json"), key=_run_order)
    ]
    later = [
        (path, measurement.breakout_mark)
        for measurement in ATARI_MEASUREMENTS.values()
        if not is_sealed(results_dir, measurement)
        for path in sorted((results_dir / measurement.folder / "atari" / "breakout").glob("*/seed*.json"), key=_run_order)
    ]
    for path, variant in [*variants, *later]:
        record = json.loads(path.read_text())
        records.append({**record, "algo_label": f"{record['algo_label']} [{variant}]", "variant": variant})
    return records


def _breakout_color(record: dict[str, Any], variants: list[str]) -> str | None:
    if "variant" in record:
        return VARIANT_COLORS[variants.index(record["variant"]) % len(VARIANT_COLORS)]
    return COLORS.get(record["algo"])


def plot_breakout_curves(records: list[dict[str, Any]], path: Path) -> None:
    """Evaluation return and training reward against steps: one line per entry (and per variant), mean over seeds."""
    variants = sorted({record["variant"] for record in records if "variant" in record})
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    colors = {}
    for record in records:
        groups[record["algo_label"]].append(record)
        colors[record["algo_label"]] = _breakout_color(record, variants)
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 3.8))
    for ax, key, title in zip(
        axes, ("mean", "train_ep_rew_mean"), ("evaluation return", "training reward (last 100 episodes)")
    ):
        plot_mean_curves(ax, groups, key, colors)
        finish_axes(ax, title, 7)
    fig.suptitle("BreakoutNoFrameskip-v4, every recorded run: mean over seeds, 95% bootstrap CI", fontsize=10)
    save_figure(fig, path)


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
    # ``callback: []`` (``--params "callback:[]"`` takes the entry's callback away) is a run without a callback
    used = {key: value for key, value in (record.get("hyperparams") or {}).items() if (key, value) != ("callback", [])}
    changed = [
        f"{key}: {json.dumps(used.get(key))} (entry: {json.dumps(entry.get(key))})"
        for key in sorted(set(entry) | set(used))
        if key != "n_timesteps" and used.get(key) != entry.get(key)
    ]
    return "; ".join(changed) if changed else "none"


def _wall_time(record: dict[str, Any]) -> str:
    """The run's wall time in seconds; a resumed run records only its last part's, said as such."""
    wall = f"{record['wall_s_this_session']:.0f}"
    resumed_from = record.get("resumed_from")
    return f"{wall} (from step {resumed_from:,})" if resumed_from else wall


def breakout_row(record: dict[str, Any]) -> dict[str, Any]:
    curve = record["curve"]
    train = [value for value in curve.get("train_ep_rew_mean", []) if value is not None]
    return {
        "label": record["algo_label"],
        "seed": record["seed"],
        "steps": record["num_timesteps_done"],
        "final_mean": record["final"]["mean"],
        "final_std": record["final"]["std"],
        "best": max(curve["mean"]),
        "train_reward": Shown(train[-1] if train else None),
        "critic_ev": Shown(_late_explained_variance(record)),
        "wall_s": _wall_time(record),
        "hyperparams_source": record["hyperparams_source"],
        "differences": differences_from_entry(record),
        "command": record["command"],
    }


def _late_score(record: dict[str, Any]) -> float:
    """A run's mean over its last ``BREAKOUT_LATE_EVALUATIONS`` evaluations (the final one included)."""
    return float(np.mean(record["curve"]["mean"][-BREAKOUT_LATE_EVALUATIONS:]))


def _breakout_late_check(by_algo: dict[str, list[dict[str, Any]]]) -> str:
    """
    The verdict's comparison on a less noisy score, which does not replace it: each run's mean over its last
    evaluations instead of its final one (an evaluation is a few episodes).
    """
    estimates = interval_estimates({algo: np.array([_late_score(r) for r in runs]) for algo, runs in by_algo.items()})
    plus, reference = (estimates[algo]["iqm"] for algo in BREAKOUT_ALGOS)
    episodes = sorted({r["evaluation"]["episodes"] for runs in by_algo.values() for r in runs if "evaluation" in r})
    return fill(
        "breakout.comparison.late",
        episodes=" or ".join(map(str, episodes)) or "a few",
        n_evaluations=BREAKOUT_LATE_EVALUATIONS,
        plus=plus,
        reference=reference,
        ratio=plus.ratio_to(reference),
        overlap=OVERLAP[plus.overlaps(reference)],
    )


def is_todays_entry(record: dict[str, Any]) -> bool:
    """A run of its algorithm's ``atari`` entry as it is in this commit: no variant's (a later Atari-5 measurement's
    Breakout runs count, once its values are the entry's), the entry's values, the full budget."""
    later = {measurement.breakout_mark for measurement in ATARI_MEASUREMENTS.values()}
    return (
        record.get("variant") in (None, *later)
        and record["n_timesteps"] == BREAKOUT_BUDGET
        and differences_from_entry(record) == "none"
    )


def is_first_entry(record: dict[str, Any]) -> bool:
    """A run of the first measurement's entries (``atari/breakout/``, no variant) at the full budget."""
    return "variant" not in record and record["n_timesteps"] == BREAKOUT_BUDGET


def is_floor_candidate(record: dict[str, Any]) -> bool:
    """A TRPOPlus run of the fourth Atari-5 measurement's candidate (the entry with ``entropy_floor: 0.3``, which did
    not ship), or a PPO run of the first measurement, at the full budget."""
    if record["algo"] == "trpo_plus":
        return record.get("variant") == ATARI_MEASUREMENTS["schedule_floor"].breakout_mark
    return is_first_entry(record)


#: Section 4's comparisons: which runs each holds, its template block, its figure
BREAKOUT_COMPARISONS = {
    "today": (is_todays_entry, "breakout.comparison", "breakout_entries_curves.png"),
    "first": (is_first_entry, "breakout.comparison.first", "breakout_first_entry_curves.png"),
    "floor": (is_floor_candidate, "breakout.comparison.floor", "breakout_floor_curves.png"),
}


def breakout_comparison(records: list[dict[str, Any]], images_dir: Path, docs_dir: Path, which: str = "today") -> str:
    """
    TRPOPlus's ``atari`` entry against PPO's over seeds (``which``: the runs of each entry as it is in this commit,
    or of the first measurement's entries), at the full budget; IQM and mean with 95% bootstrap intervals, the
    learning curves with bands, and the verdict once both have ``BREAKOUT_MIN_SEEDS`` seeds.
    """
    selected, block, image_name = BREAKOUT_COMPARISONS[which]
    by_algo = {algo: [r for r in records if r["algo"] == algo and selected(r)] for algo in BREAKOUT_ALGOS}
    by_algo = {algo: sorted(runs, key=lambda r: r["seed"]) for algo, runs in by_algo.items() if runs}
    if not by_algo:
        return fill("breakout.comparison.none", budget=BREAKOUT_BUDGET) if which == "today" else ""
    # The same seeds for both entries: once they share one, a run whose seed the other entry has not finished waits
    # for its pair (left out of the estimates, listed after the verdict)
    paired = set.intersection(*({r["seed"] for r in by_algo.get(algo, [])} for algo in BREAKOUT_ALGOS))
    unpaired: list[dict[str, Any]] = []
    if paired:
        unpaired = [r for runs in by_algo.values() for r in runs if r["seed"] not in paired]
        by_algo = {algo: [r for r in runs if r["seed"] in paired] for algo, runs in by_algo.items()}
    estimates = interval_estimates({algo: np.array([r["final"]["mean"] for r in runs]) for algo, runs in by_algo.items()})
    image = images_dir / image_name
    plot_curves("BreakoutNoFrameskip-v4", by_algo, image)
    rows = (
        {
            "label": ALGO_LABELS[algo],
            "n_seeds": len(runs),
            "per_seed": fill_each("learning.seed", ({"seed": r["seed"], "score": r["final"]["mean"]} for r in runs), ", "),
            **estimates[algo],
        }
        for algo, runs in by_algo.items()
    )
    plus, reference = BREAKOUT_ALGOS
    if all(len(by_algo.get(algo, [])) >= BREAKOUT_MIN_SEEDS for algo in BREAKOUT_ALGOS):
        plus_iqm, reference_iqm = estimates[plus]["iqm"], estimates[reference]["iqm"]
        verdict = fill(
            "breakout.comparison.verdict",
            verdict=VERDICT[bool(plus_iqm.point >= reference_iqm.point)],
            plus=plus_iqm.point,
            reference=reference_iqm.point,
            ratio=plus_iqm.ratio_to(reference_iqm),
            overlap=OVERLAP[plus_iqm.overlaps(reference_iqm)],
        )
        verdict = paragraphs(verdict, _breakout_late_check(by_algo))
    else:
        verdict = fill("breakout.comparison.not_yet", n_seeds=len(paired), min_seeds=BREAKOUT_MIN_SEEDS)
    waiting = fill_each(
        "breakout.comparison.waiting_run",
        ({"label": ALGO_LABELS[r["algo"]], "seed": r["seed"], "score": r["final"]["mean"]} for r in unpaired),
        ", ",
    )
    return fill(
        block,
        budget=BREAKOUT_BUDGET,
        bootstrap_reps=BOOTSTRAP_REPS,
        bootstrap_seed=BOOTSTRAP_SEED,
        rows=fill_each("breakout.comparison.row", rows),
        verdict=paragraphs(verdict, fill("breakout.comparison.waiting", runs=waiting) if unpaired else ""),
        image=image_link(image, docs_dir),
    )


def breakout_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> str:
    records = breakout_records(results_dir)
    if not records:
        throughput = read_json(results_dir / "throughput.json") or {}
        measured = throughput.get("envs", {}).get("breakout", {}).get("algos", {})
        rates = [
            {"label": ALGO_LABELS[algo], "minutes": 1e6 / measured[algo]["steps_per_s"] / 60}
            for algo in ("trpo_plus", "ppo")
            if algo in measured
        ]
        estimate = fill("breakout.missing.estimate", rates=fill_each("breakout.missing.rate", rates, ", ")) if rates else ""
        return fill("breakout.missing", status=sentences(fill("breakout.missing.no_run"), estimate))
    image = images_dir / "breakout_curves.png"
    plot_breakout_curves(records, image)
    machines = (
        {"label": f"{r['algo_label']} seed {r['seed']}", "machine": machine_text(r.get("machine"), "when the run ended")}
        for r in records
    )
    # the first measurement's TRPOPlus runs, once the entry has changed, in a comparison of their own
    first_changed = any(r["algo"] == "trpo_plus" and is_first_entry(r) and not is_todays_entry(r) for r in records)
    # the fourth measurement's candidate, once it has runs (the rule reports its Breakout runs here, in no test)
    floor_runs = any(r["algo"] == "trpo_plus" and is_floor_candidate(r) and not is_todays_entry(r) for r in records)
    parts = [
        breakout_comparison(records, images_dir, docs_dir),
        breakout_comparison(records, images_dir, docs_dir, "first") if first_changed else "",
        breakout_comparison(records, images_dir, docs_dir, "floor") if floor_runs else "",
        fill(
            "breakout",
            rows=fill_each("breakout.row", map(breakout_row, records)),
            machines=fill_each("breakout.machine", machines),
            image=image_link(image, docs_dir),
        ),
    ]
    return paragraphs(*parts)


# --- Breakout tuning: every candidate on the tuning seeds ----------------------------------------------------------

#: Where the tuning runs are (``benchmarks.breakout --results-dir benchmarks/results/breakout_tuning/NAME``), the
#: step of the curve that the decision rules read, and the folder of the entry's own runs on the tuning seeds
TUNING_DIR = "breakout_tuning"
TUNING_STEPS = 500_000
TUNING_REFERENCE = "D"


def tuning_runs(results_dir: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """The Breakout tuning runs by candidate (the folder's name; PPO's runs on the tuning seeds too) and seed."""
    runs: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for path in sorted((results_dir / TUNING_DIR).glob("*/breakout/*/seed*.json"), key=_run_order):
        record = json.loads(path.read_text())
        runs[path.parents[2].name][record["seed"]] = record
    return dict(runs)


def train_reward_at(record: dict[str, Any], steps: int = TUNING_STEPS) -> float | None:
    """The training reward (last 100 episodes) at the curve's point ``steps``, None if the run has no such point."""
    curve = record["curve"]
    points = dict(zip(curve["timesteps"], curve.get("train_ep_rew_mean", [])))
    return points.get(steps)


def tuning_rules(results_dir: Path, name: str) -> list[Path]:
    """The decision rules of a candidate: those in its folder and those elsewhere that give its runs' command."""
    tuning = results_dir / TUNING_DIR
    own = sorted((tuning / name).glob("decision_rule*.md"))
    command = re.compile(rf"--results-dir benchmarks/results/{TUNING_DIR}/{re.escape(name)}\b")
    others = [
        path for path in sorted(tuning.glob("*/decision_rule*.md")) if path not in own and command.search(path.read_text())
    ]
    return own + others


def _params_of(record: dict[str, Any]) -> str:
    """The ``--params`` of a run, as its ``hyperparams_source`` records them; without any, the entry it ran."""
    source, _, params = record["hyperparams_source"].partition(" with ")
    return params or source


def breakout_tuning_section(results_dir: Path) -> str:
    """Every Breakout tuning candidate: training reward at ``TUNING_STEPS`` per tuning seed, against the entry's."""
    runs = tuning_runs(results_dir)
    if not runs:
        return ""
    seeds = sorted({seed for by_seed in runs.values() for seed in by_seed})
    reference = {seed: train_reward_at(record) for seed, record in runs.get(TUNING_REFERENCE, {}).items()}
    rows = []
    for name, by_seed in sorted(runs.items(), key=lambda item: (item[0] != TUNING_REFERENCE, item[0])):
        rewards = {seed: train_reward_at(record) for seed, record in by_seed.items()}
        scored = [seed for seed, reward in rewards.items() if reward is not None]
        mean = float(np.mean([rewards[seed] for seed in scored])) if scored else None
        ratio = None
        if name != TUNING_REFERENCE and scored and all(reference.get(seed) is not None for seed in scored):
            ratio = mean / float(np.mean([reference[seed] for seed in scored]))
        rules = [f"`{path.parent.name}/{path.name}`" for path in tuning_rules(results_dir, name)]
        rows.append(
            {
                "name": name,
                "params": _params_of(next(iter(by_seed.values()))),
                "per_seed": " | ".join(f"{Shown(rewards.get(seed)):.2f}" if seed in by_seed else "" for seed in seeds),
                "mean": Shown(mean),
                "ratio": Shown(ratio),
                "rules": ", ".join(rules) or "none",
            }
        )
    return fill(
        "breakout.tuning",
        steps=TUNING_STEPS,
        reference=TUNING_REFERENCE,
        seed_columns=" | ".join(f"seed {seed}" for seed in seeds),
        seed_rule=" | ".join("---:" for _ in seeds),
        rows=fill_each("breakout.tuning.row", rows),
    )
