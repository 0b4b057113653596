"""
Section 7 of the report (``benchmarks.report``): MuJoCo, TRPOPlus, sb3-contrib TRPO and PPO with their own entries on
five v5 locomotion tasks (``mujoco/learning/<algo>/<task>/seed<k>.json``, from ``benchmarks/mujoco_campaign.sh``), and
the tuning runs of TRPOPlus's entry (``mujoco/tuning/<candidate>/learning/...``, ``mujoco/tuning_rule.md``).
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import ALGO_LABELS
from benchmarks.report_common import (
    NOT_RUN,
    PLACE,
    VERDICT,
    Interval,
    Shown,
    fill,
    fill_each,
    image_link,
    paragraphs,
    read_json,
)
from benchmarks.report_learning import load_learning
from benchmarks.report_speed import throughput_blocks
from benchmarks.report_stats import (
    BOOTSTRAP_REPS,
    BOOTSTRAP_SEED,
    interval_estimates,
    plot_curve_panels,
    plot_performance_profile,
)

#: The tasks, in the page's order, and whether each was held out of the tuning (tuning_rule.md)
MUJOCO_TASKS = {
    "Hopper-v5": False,
    "HalfCheetah-v5": False,
    "Walker2d-v5": True,
    "Ant-v5": True,
    "Swimmer-v5": True,
}
#: TRPOPlus against both baselines: seeds each algorithm needs on a task before the verdict, and the aggregate target
#: (the mean over tasks of TRPOPlus's IQM over the better baseline's IQM)
MUJOCO_ALGOS = ("trpo_plus", "trpo", "ppo")
MUJOCO_MIN_SEEDS = 5
MUJOCO_TARGET_RATIO = 1.05
#: Steps/s of each algorithm on Hopper, in one run (``benchmarks.throughput --envs hopper``), with its target
MUJOCO_THROUGHPUT = "throughput_hopper.json"
#: The tuning rule's candidates, its seeds, and the steps of the evaluations a run's score averages (rule 1)
TUNING_CANDIDATES = ("T0", "T1", "T2", "T0b", "T3")
TUNING_SEEDS = (100, 101, 102)
TUNING_SCORE_STEPS = (900_000, 950_000, 1_000_000)


def tuning_run_score(record: dict[str, Any]) -> float:
    """Rule 1: the mean of the run's evaluations at 900k, 950k and 1M steps."""
    curve = record["curve"]
    return float(np.mean([curve["mean"][curve["timesteps"].index(steps)] for steps in TUNING_SCORE_STEPS]))


def task_label(task: str) -> str:
    return f"{task} (held out)" if MUJOCO_TASKS[task] else task


def mujoco_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> str:
    """Per task and over the five tasks: TRPOPlus against sb3-contrib TRPO and PPO, 1M steps."""
    random_scores = (read_json(results_dir / "mujoco" / "random.json") or {}).get("games", {})
    loaded = load_learning(results_dir / "mujoco")
    runs = {task: {algo: loaded.get(task, {}).get(algo, []) for algo in MUJOCO_ALGOS} for task in MUJOCO_TASKS}
    rows, iqms, places, complete = [], {}, {}, True
    for task, by_algo in runs.items():
        estimates = {
            algo: interval_estimates({algo: np.array([r["final"]["mean"] for r in records])})[algo]["iqm"]
            for algo, records in by_algo.items()
            if records
        }
        iqms[task] = estimates
        judged = all(len(by_algo[algo]) >= MUJOCO_MIN_SEEDS for algo in MUJOCO_ALGOS)
        complete &= judged
        if judged:
            places[task] = {base: estimates["trpo_plus"].place(estimates[base]) for base in MUJOCO_ALGOS[1:]}
        rows.append(
            fill(
                "mujoco.row",
                task=task_label(task),
                random=Shown(random_scores.get(task, {}).get("mean")),
                **{algo: f"{estimates[algo]:.0f}" if algo in estimates else NOT_RUN for algo in MUJOCO_ALGOS},
                **{
                    f"against_{base}": PLACE[places[task][base]] if judged else f"not yet (< {MUJOCO_MIN_SEEDS} seeds)"
                    for base in MUJOCO_ALGOS[1:]
                },
                counts=" / ".join(str(len(by_algo[algo])) for algo in MUJOCO_ALGOS),
            )
        )
    image = images_dir / "mujoco_curves.png"
    plot_curve_panels(
        {task_label(task): by_algo for task, by_algo in runs.items()},
        image,
        "MuJoCo, 1M steps: deterministic evaluation return (mean over seeds, 95% bootstrap CI)",
    )
    walls = [
        record["wall_s_this_session"] / 60
        for by_algo in runs.values()
        for records in by_algo.values()
        for record in records
        if "wall_s_this_session" in record
    ]
    parts = [
        fill(
            "mujoco",
            rows="\n".join(rows),
            run_minutes=f"{min(walls):.0f}-{max(walls):.0f}" if walls else "n/a",
            min_seeds=MUJOCO_MIN_SEEDS,
            bootstrap_reps=BOOTSTRAP_REPS,
            bootstrap_seed=BOOTSTRAP_SEED,
            image=image_link(image, docs_dir),
        )
    ]
    if not complete or any(task not in random_scores for task in MUJOCO_TASKS):
        waiting = ", ".join(
            f"{task} {' / '.join(str(len(by_algo[a])) for a in MUJOCO_ALGOS)}" for task, by_algo in runs.items()
        )
        parts.append(fill("mujoco.aggregate.not_yet", min_seeds=MUJOCO_MIN_SEEDS, waiting=waiting))
    else:
        parts.append(aggregate_text(runs, iqms, places, random_scores, images_dir, docs_dir))
    speed = throughput_blocks(results_dir / "mujoco", MUJOCO_THROUGHPUT)
    parts.append(paragraphs(fill("mujoco.speed"), *speed) if speed else fill("mujoco.speed.missing"))
    parts.append(tuning_text(results_dir / "mujoco" / "tuning", random_scores))
    return paragraphs(*parts)


def aggregate_text(
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    iqms: dict[str, dict[str, Interval]],
    places: dict[str, dict[str, int]],
    random_scores: dict[str, Any],
    images_dir: Path,
    docs_dir: Path,
) -> str:
    """
    The aggregate over the tasks (the first ``MUJOCO_MIN_SEEDS`` seeds of each algorithm on each task), normalized per
    task by random = 0 and the better baseline's IQM = 1, with its performance profile, and the targets.
    """
    best = {task: max(iqms[task][base].point for base in MUJOCO_ALGOS[1:]) for task in MUJOCO_TASKS}
    normalized = {}
    for algo in MUJOCO_ALGOS:
        columns = []
        for task in MUJOCO_TASKS:
            random_score = random_scores[task]["mean"]
            scores = [r["final"]["mean"] for r in runs[task][algo][:MUJOCO_MIN_SEEDS]]
            columns.append([(score - random_score) / (best[task] - random_score) for score in scores])
        normalized[algo] = np.array(columns).T
    estimates = interval_estimates(normalized)
    profile = images_dir / "mujoco_profile.png"
    plot_performance_profile(
        normalized, profile, "MuJoCo: performance profile (all runs of the five tasks)", "better baseline"
    )
    ratio = float(np.mean([iqms[task]["trpo_plus"].point / best[task] for task in MUJOCO_TASKS]))
    behind = [f"{task} ({ALGO_LABELS[b]})" for task, place in places.items() for b, where in place.items() if where < 0]
    return fill(
        "mujoco.aggregate",
        n_seeds=MUJOCO_MIN_SEEDS,
        rows=fill_each("minatar.aggregate.row", ({"label": ALGO_LABELS[a], **estimates[a]} for a in MUJOCO_ALGOS)),
        image=image_link(profile, docs_dir),
        behind=", ".join(behind) or "none",
        behind_verdict=VERDICT[not behind],
        target_ratio=MUJOCO_TARGET_RATIO,
        ratio=ratio,
        ratio_verdict=VERDICT[bool(ratio >= MUJOCO_TARGET_RATIO)],
    )


def tuning_scores(
    tuning_dir: Path, random_scores: dict[str, Any], run_score: Callable[[dict[str, Any]], float] = tuning_run_score
) -> dict[str, dict[str, Any]]:
    """
    Rules 1-4 of the tuning rule, per candidate that has a run: ``scores[task]`` (each seed's ``run_score``, by
    default rule 1's), ``n[task]`` (rule 3, random = 0 and T0 = 1, once both have their
    three seeds, else None) and ``aggregate`` (rule 4, over the tasks the candidate runs on; T0b: HalfCheetah only).
    """
    tasks = [task for task, held_out in MUJOCO_TASKS.items() if not held_out]
    scores: dict[str, dict[str, dict[int, float]]] = {}
    for candidate in TUNING_CANDIDATES:
        loaded = load_learning(tuning_dir / candidate)
        scores[candidate] = {
            task: {r["seed"]: run_score(r) for r in loaded.get(task, {}).get("trpo_plus", [])} for task in tasks
        }

    def mean(candidate: str, task: str) -> float | None:
        by_seed = scores[candidate][task]
        return float(np.mean([by_seed[s] for s in TUNING_SEEDS])) if all(s in by_seed for s in TUNING_SEEDS) else None

    result = {}
    for candidate in TUNING_CANDIDATES:
        if not any(scores[candidate].values()):
            continue
        normalized: dict[str, float | None] = {}
        for task in tasks:
            score, reference = mean(candidate, task), mean("T0", task)
            random_score = random_scores.get(task, {}).get("mean")
            normalized[task] = None
            if score is not None and reference is not None and random_score is not None:
                normalized[task] = (score - random_score) / (reference - random_score)
        ran = [normalized[task] for task in tasks if scores[candidate][task]]
        aggregate = float(np.mean(ran)) if None not in ran else None
        result[candidate] = {"scores": scores[candidate], "n": normalized, "aggregate": aggregate}
    return result


def tuning_text(tuning_dir: Path, random_scores: dict[str, Any]) -> str:
    """
    The tuning rule's table: per candidate and tuning task, each seed's score (rule 1: its evaluations at 900k, 950k
    and 1M steps),
    and once the three seeds are in, the normalized score of rule 3 (random = 0, T0 = 1) and the aggregate of rule 4.
    """
    tasks = [task for task, held_out in MUJOCO_TASKS.items() if not held_out]
    rows = []
    for candidate, result in tuning_scores(tuning_dir, random_scores).items():
        cells = {}
        for i, task in enumerate(tasks):
            by_seed = result["scores"][task]
            cells[f"task{i}"] = ", ".join(f"{s}: {by_seed[s]:.0f}" for s in TUNING_SEEDS if s in by_seed) or NOT_RUN
            cells[f"n{i}"] = Shown(result["n"][task])
        rows.append(fill("mujoco.tuning.row", candidate=candidate, aggregate=Shown(result["aggregate"]), **cells))
    return fill(
        "mujoco.tuning",
        task0=tasks[0],
        task1=tasks[1],
        seeds=", ".join(map(str, TUNING_SEEDS)),
        rows="\n".join(rows) or fill("mujoco.tuning.none"),
    )
