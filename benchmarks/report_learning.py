"""
Section 3 of the report (``benchmarks.report``): learning on classic control and MinAtar
(``learning/<algo>/<env>/seed<k>.json``, from ``benchmarks.learning``). Per env: the mean and the IQM of the final
evaluation returns over seeds with 95% stratified-bootstrap intervals, the curves, and TRPOPlus against each baseline
once every algorithm has ``MIN_SEEDS`` seeds.
"""

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import ALGO_LABELS, common_budget, env_dirname, load_hyperparams
from benchmarks.report_common import OVERLAP, VERDICT, Interval, Shown, fill, fill_each, image_link, paragraphs
from benchmarks.report_stats import BOOTSTRAP_REPS, BOOTSTRAP_SEED, interval_estimates, plot_curves

MIN_SEEDS = 5
#: The envs of the learning benchmark, in the page's order (the budget table; other envs with results follow)
LEARNING_ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "Pendulum-v1", "MinAtar/Breakout-v1"]
#: Learning: TRPOPlus at or above each of these (IQM) on the envs whose id starts with the prefix
LEARNING_BASELINES = {"trpo": "", "ppo": "MinAtar/"}


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


def budget_fields() -> dict[str, str]:
    """The budget table: the common budget of each env and each algorithm's own zoo budget (from the YAML files)."""
    rows = []
    for env_id in LEARNING_ENVS:
        own = [f"{int(float(load_hyperparams(algo, env_id)[0]['n_timesteps'])):,}" for algo in ALGO_LABELS]
        rows.append({"env_id": env_id, "common": common_budget(env_id), "own": " | ".join(own)})
    return {
        "own_budget_headers": fill_each(
            "learning.own_budget_header", ({"label": label} for label in ALGO_LABELS.values()), " | "
        ),
        "own_budget_aligns": " ---: |" * len(ALGO_LABELS),
        "budget_rows": fill_each("learning.budget_row", rows),
    }


def learning_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> str:
    runs = load_learning(results_dir)
    intro = fill(
        "learning", bootstrap_reps=BOOTSTRAP_REPS, bootstrap_seed=BOOTSTRAP_SEED, min_seeds=MIN_SEEDS, **budget_fields()
    )
    if not runs:
        return paragraphs(intro, fill("learning.no_runs"))
    parts, verdicts = [intro], []
    for env_id in [*LEARNING_ENVS, *sorted(set(runs) - set(LEARNING_ENVS))]:
        if env_id not in runs:
            continue
        by_algo = {algo: runs[env_id][algo] for algo in ALGO_LABELS if algo in runs[env_id]}
        estimates = interval_estimates({algo: np.array([r["final"]["mean"] for r in rs]) for algo, rs in by_algo.items()})
        image = images_dir / f"learning_{env_dirname(env_id)}.png"
        plot_curves(env_id, by_algo, image)
        rows = fill_each("learning.row", (learning_row(algo, records, estimates[algo]) for algo, records in by_algo.items()))
        parts.append(fill("learning.env", env_id=env_id, rows=rows, image=image_link(image, docs_dir)))
        verdicts += learning_verdicts(env_id, by_algo, estimates)
    missing = [env for env in LEARNING_ENVS if env not in runs]
    if missing:
        verdicts.append(fill("learning.not_run", env_ids=", ".join(missing)))
    parts.append(fill("learning.targets", verdicts="\n".join(verdicts)))
    return paragraphs(*parts)


def learning_row(algo: str, records: list[dict[str, Any]], estimates: dict[str, Interval]) -> dict[str, Any]:
    n_seeds = len(records)
    if n_seeds >= MIN_SEEDS:
        status = fill("learning.status.complete")
    else:
        status = fill("learning.status.incomplete", n_seeds=n_seeds, min_seeds=MIN_SEEDS)
    # Secondary, not judged: the stochastic policy's training episodes (SB3's ep_rew_mean, last 100 episodes)
    train = [r["curve"]["train_ep_rew_mean"][-1] for r in records if r["curve"].get("train_ep_rew_mean")]
    train = [value for value in train if value is not None]
    return {
        "label": ALGO_LABELS[algo],
        "n_seeds": n_seeds,
        "budgets": ", ".join(f"{budget:,}" for budget in sorted({r["n_timesteps"] for r in records})),
        **estimates,
        "per_seed": fill_each("learning.seed", ({"seed": r["seed"], "score": r["final"]["mean"]} for r in records), ", "),
        "train_reward": Shown(float(np.mean(train)) if train else None),
        "status": status,
        "hyperparams_source": records[0]["hyperparams_source"],
    }


def learning_verdicts(
    env_id: str, by_algo: dict[str, list[dict[str, Any]]], estimates: dict[str, dict[str, Interval]]
) -> list[str]:
    """TRPOPlus against each baseline of ``LEARNING_BASELINES`` on ``env_id``: judged only with every seed."""
    complete = {algo for algo, records in by_algo.items() if len(records) >= MIN_SEEDS}
    verdicts = []
    for baseline, prefix in LEARNING_BASELINES.items():
        if not env_id.startswith(prefix):
            continue
        fields = {"env_id": env_id, "baseline": ALGO_LABELS[baseline]}
        missing = [algo for algo in ("trpo_plus", baseline) if algo not in by_algo]
        if missing:
            verdicts.append(fill("learning.verdict.not_run", missing=ALGO_LABELS[missing[0]], **fields))
        elif {"trpo_plus", baseline} <= complete:
            plus, base = estimates["trpo_plus"]["iqm"], estimates[baseline]["iqm"]
            verdicts.append(
                fill(
                    "learning.verdict",
                    verdict=VERDICT[bool(plus.point >= base.point)],
                    plus=plus.point,
                    base=base.point,
                    overlap=OVERLAP[plus.overlaps(base)],
                    **fields,
                )
            )
        else:
            verdicts.append(fill("learning.verdict.incomplete", **fields))
    return verdicts
