"""
Section 6 of the report (``benchmarks.report``): Atari-5, the ``atari`` entries of TRPOPlus and PPO on five games the
entry was not tuned on (``atari/<game>/<algo>/seed<k>.json``, from ``benchmarks.atari``; the random policy's scores
from ``benchmarks.atari_random``): per game, the human-normalized scores and the Atari-5 estimate of the 57-game
median, the diagnostics at the end of the runs, and the aggregate over the games normalized by PPO
(``benchmarks/results/atari/atari5_rule.md``); and the later measurements of a changed entry (``ATARI_MEASUREMENTS``:
6.1 the entropy floor, ``atari_v2/``; 6.2 the radius schedule, ``atari_v3/``; 6.3 the radius schedule with the
entropy floor, ``atari_v4/``), each under its own rule (``<folder>/atari5_rule_v<k>.md``) and beside the first entry and
PPO's runs.
"""

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

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
from benchmarks.report_stats import (
    BOOTSTRAP_REPS,
    BOOTSTRAP_SEED,
    COLORS,
    finish_axes,
    interval_estimates,
    legend_in_spare_panel,
    metrics_iqm,
    plot_curve_panels,
    plot_performance_profile,
    probability_of_improvement,
    pyplot,
    save_figure,
    seeded_interval_estimates,
    trimmed_mean,
)

#: Atari-5 (Aitchison, Sweetser and Hutter, ICML 2023): per game, its weight in the estimate of the 57-game median
#: human-normalized score (a regression on log10(1 + score in percent), no intercept, from the authors' code:
#: github.com/maitchison/PPO, tools/plot_util.py), and the random and human scores of the usual DQN table
ATARI5 = {
    "BattleZone": (0.3819751237831753, 2360.0, 37187.5),
    "DoubleDunk": (0.0679099488887574, -18.6, -16.4),
    "NameThisGame": (0.310804148620847, 2292.3, 8049.0),
    "Phoenix": (0.12412619402774641, 761.4, 7242.6),
    "Qbert": (0.08048518286466755, 163.9, 13455.0),
}
#: The Atari-5 comparison (benchmarks/results/atari/atari5_rule.md): TRPOPlus against the second, which normalizes
#: the scores (random = 0, its IQM = 1); the budget; the seeds each game needs before the verdict; the goal and the aim
ATARI_ALGOS = ("trpo_plus", "ppo")
ATARI_BUDGET = 1_000_000
ATARI_MIN_SEEDS = 3
ATARI_GOAL_IQM = 1.0
ATARI_AIM_IQM = 1.1
#: The targets of the ``atari`` entry (on the first ``ATARI_MIN_SEEDS`` or more seeds of both): no game behind PPO's
#: interval; the human-normalized IQM over all runs at least ``ATARI_TARGET_RATIO`` x PPO's (the aim: the median of
#: the per-game means too); no collapse in any run over its last ``ATARI_DIAGNOSTICS_WINDOW`` steps, i.e. line-search
#: acceptance at least ``ATARI_MIN_ACCEPTANCE`` and mean entropy at least ``ATARI_MIN_ENTROPY_SHARE`` x PPO's on the game
ATARI_TARGET_RATIO = 1.2
ATARI_MIN_ACCEPTANCE = 0.9
ATARI_MIN_ENTROPY_SHARE = 0.25
#: TRPOPlus's line-search acceptance: the mean of ``train/is_line_search_success`` over the updates that ran a search
ATARI_ACCEPTANCE_KEY = "train/is_line_search_success"
#: The Atari-5 diagnostics table: the steps at the end of a run it averages over, and per algorithm, where each column
#: comes from (a ``train/*`` value of the record's diagnostics and its sign; a column an algorithm lacks shows n/a)
ATARI_DIAGNOSTICS_WINDOW = 200_000
ATARI_DIAGNOSTICS = {
    "trpo_plus": {
        "entropy": ("train/entropy", 1),
        "explained_variance": ("train/explained_variance", 1),
        "kl": ("train/update_kl", 1),
        "accepted": (ATARI_ACCEPTANCE_KEY, 1),
        "step_fraction": ("train/step_fraction_mean", 1),
    },
    "ppo": {
        "entropy": ("train/entropy_loss", -1),
        "explained_variance": ("train/explained_variance", 1),
        "kl": ("train/approx_kl", 1),
        "clip_fraction": ("train/clip_fraction", 1),
    },
}
#: ALE ends a game after 108,000 frames (30 minutes of play; ``max_num_frames_per_episode`` of the v4 games). The
#: evaluation's ``Monitor`` counts frames and misses the few ALE spends on a reset (107,987 seen): a game within
#: ``ATARI_CAP_MARGIN`` frames of the cap was cut by it, not ended by play
ATARI_FRAME_CAP = 108_000
ATARI_CAP_MARGIN = 100


# --- Atari-5: the atari entry on five games it was not tuned on ------------------------------------------------------


def atari_runs(results_dir: Path, game: str) -> dict[str, dict[int, dict[str, Any]]]:
    """``{algo: {seed: record}}`` of ``benchmarks.atari``'s finished 1M-step runs on ``game``."""
    runs: dict[str, dict[int, dict[str, Any]]] = {algo: {} for algo in ATARI_ALGOS}
    for path in (results_dir / "atari" / game.lower()).glob("*/seed*.json"):
        record = json.loads(path.read_text())
        if record["algo"] in runs and record["n_timesteps"] == ATARI_BUDGET:
            runs[record["algo"]][record["seed"]] = record
    return runs


def human_normalized(game: str, score: float) -> float:
    """``(score - random) / (human - random)`` with the DQN table's scores (1 = human)."""
    _, random_score, human = ATARI5[game]
    return (score - random_score) / (human - random_score)


def atari5_median_estimate(human_normalized_scores: dict[str, float]) -> float:
    """
    The Atari-5 estimate of the 57-game median human-normalized score (as a fraction, 1 = human) from the five games':
    ``10 ** sum(w * log10(1 + max(0, 100 * h))) - 1`` in percent, the regression of Aitchison et al.
    """
    log_score = sum(ATARI5[game][0] * math.log10(1 + max(0.0, 100 * h)) for game, h in human_normalized_scores.items())
    return (10**log_score - 1) / 100


def late_pairs(record: dict[str, Any], key: str, window: int = ATARI_DIAGNOSTICS_WINDOW) -> list[tuple[float, int]]:
    """``(mean of key, updates)`` of each diagnostics bin in the run's last ``window`` steps that has a finite value."""
    diagnostics = record.get("diagnostics") or {}
    if key not in diagnostics:
        return []
    last = record["n_timesteps"] - window
    return [
        (float(value), updates)
        for end, value, updates in zip(diagnostics["bin_end"], diagnostics[key], diagnostics["n_updates"])
        if end > last and updates and value is not None and math.isfinite(value)
    ]


def late_diagnostic(record: dict[str, Any], key: str, window: int = ATARI_DIAGNOSTICS_WINDOW) -> float | None:
    """The mean of ``key`` over the updates of the run's last ``window`` steps (None when the record has no value)."""
    pairs = late_pairs(record, key, window)
    if not pairs:
        return None
    values, weights = zip(*pairs)
    return float(np.average(values, weights=weights))


def late_acceptance(record: dict[str, Any], window: int = ATARI_DIAGNOSTICS_WINDOW) -> float | None:
    """
    Line-search acceptance over the run's last ``window`` steps (None when the record has none). An update that a
    ``target_kl`` schedule closed (radius 0 at the run's end, logged as not accepted) ran no line search: left out.
    """
    pairs = late_pairs(record, ATARI_ACCEPTANCE_KEY, window)
    closed = (record.get("last_update") or {}).get("failure_reason") == "closed_trust_region"
    searches = sum(updates for _, updates in pairs) - closed
    return sum(value * updates for value, updates in pairs) / searches if searches > 0 else None


def capped_share(record: dict[str, Any]) -> float:
    """The share of the run's final-evaluation games that ALE's frame cap ended (their lengths are in frames)."""
    lengths = record["curve"]["lengths"][-1]
    return float(np.mean([length >= ATARI_FRAME_CAP - ATARI_CAP_MARGIN for length in lengths]))


def atari_diagnostics_rows(runs: dict[str, dict[str, dict[int, dict[str, Any]]]], labels: dict[str, str]) -> str:
    """
    A row per game and algorithm with finished runs: each ``ATARI_DIAGNOSTICS`` column, and the share of the final
    evaluation's games cut at ALE's frame cap, averaged over its seeds.
    """
    columns = sorted({column for sources in ATARI_DIAGNOSTICS.values() for column in sources})
    rows = []
    for game, by_algo in runs.items():
        for algo, records in by_algo.items():
            if not records:
                continue
            values = {column: None for column in columns}
            for column, (key, sign) in ATARI_DIAGNOSTICS[algo].items():
                per_run = [late_diagnostic(record, key) for record in records.values()]
                per_run = [value for value in per_run if value is not None]
                values[column] = sign * float(np.mean(per_run)) if per_run else None
            rows.append(
                fill(
                    "atari5.diagnostics.row",
                    game=labels[game],
                    label=ALGO_LABELS[algo],
                    seeds=len(records),
                    capped=float(np.mean([capped_share(record) for record in records.values()])),
                    **{column: Shown(value) for column, value in values.items()},
                )
            )
    return "\n".join(rows)


def score_text(score: "Interval | float") -> str:
    """A game's score (or its interval) with one decimal below 100 in size (DoubleDunk's -1.7), none above."""
    point = score.point if isinstance(score, Interval) else score
    return f"{score:{'.1f' if abs(point) < 100 else '.0f'}}"


def stalled(record: dict[str, Any]) -> bool:
    """A run that stalls its game: every game of its final evaluation ran to ALE's frame cap."""
    return capped_share(record) == 1.0


def game_label(game: str, by_algo: dict[str, dict[int, dict[str, Any]]], names: dict[str, str] = ALGO_LABELS) -> str:
    """The game's name, with the runs that stalled it, per algorithm, in every table where the game appears."""
    marks = [
        f"{names[algo]} {count} of {len(records)}"
        for algo, records in by_algo.items()
        if (count := sum(stalled(record) for record in records.values()))
    ]
    return f"{game} (stalled: {', '.join(marks)})" if marks else game


def binned_diagnostic(records: list[dict[str, Any]], key: str, sign: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """
    The bins' ends and ``sign * key`` per run and bin (``(runs, bins)``, NaN where a run has no value), over the runs
    whose diagnostics have ``key``, on the bins of the first of them.
    """
    with_key = [record["diagnostics"] for record in records if key in (record.get("diagnostics") or {})]
    if not with_key:
        return np.array([]), np.empty((0, 0))
    ends = np.asarray(with_key[0]["bin_end"], dtype=float)
    rows = []
    for diagnostics in with_key:
        values = dict(zip(diagnostics["bin_end"], diagnostics[key]))
        rows.append([sign * values[end] if values.get(end) is not None else np.nan for end in ends])
    return ends, np.array(rows, dtype=float)


class Entry(NamedTuple):
    """How the figures draw a set of runs: the algorithm its records are of, its name and its color."""

    algo: str
    label: str
    color: str


#: Section 6's entries: each algorithm's ``atari`` entry
ATARI_ENTRIES = {algo: Entry(algo, ALGO_LABELS[algo], COLORS[algo]) for algo in ATARI_ALGOS}


def mean_of_runs(values: np.ndarray) -> np.ndarray:
    """Per bin, the mean over the runs that logged it (the rows of ``values``); NaN where none did."""
    logged = np.isfinite(values)
    counts = logged.sum(axis=0)
    return np.where(counts > 0, np.where(logged, values, 0.0).sum(axis=0) / np.maximum(counts, 1), np.nan)


def plot_entropy_panels(
    runs: dict[str, dict[str, dict[int, dict[str, Any]]]], path: Path, entries: dict[str, Entry], title: str
) -> None:
    """
    A panel per game: each entry's policy entropy against steps (every run thin, the mean over runs thick), and each
    TRPOPlus entry's line-search acceptance (the share of its updates whose step was accepted, mean over runs, dashed)
    on the right.
    """
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(11, 6.2))
    for ax, (game, by_entry) in zip(axes.flat, runs.items()):
        right = ax.twinx()
        for key, records in by_entry.items():
            entry = entries[key]
            ends, values = binned_diagnostic(list(records.values()), *ATARI_DIAGNOSTICS[entry.algo]["entropy"])
            if not len(values):
                continue
            for run in values:
                ax.plot(ends, run, color=entry.color, alpha=0.35, linewidth=0.8)
            ax.plot(ends, mean_of_runs(values), color=entry.color, label=f"{entry.label} entropy")
            ends, accepted = binned_diagnostic(list(records.values()), ATARI_ACCEPTANCE_KEY)
            if len(accepted):
                right.plot(ends, mean_of_runs(accepted), color=entry.color, linestyle="--", linewidth=1)
                # the legend is the left axis's: an empty line of the same style names the right one's
                ax.plot([], [], color=entry.color, linestyle="--", linewidth=1, label=f"{entry.label} accepted")
        right.set_ylim(0, 1.05)
        right.set_ylabel("line search accepted", fontsize=8)
        ax.set_ylim(bottom=0)
        finish_axes(ax, game, 7, ylabel="entropy (nats)")
    legend_in_spare_panel(axes, len(runs))  # 5 games, 6 panels
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path)


def paired_scores(runs: dict[str, dict[str, dict[int, dict[str, Any]]]], algo: str, n_seeds: int) -> np.ndarray:
    """``(n_seeds, games)``: the final scores of ``algo`` on the first ``n_seeds`` seeds both algorithms finished."""
    columns = []
    for by_algo in runs.values():
        seeds = sorted(set.intersection(*(set(by_algo[a]) for a in ATARI_ALGOS)))[:n_seeds]
        columns.append([by_algo[algo][s]["final"]["mean"] for s in seeds])
    return np.array(columns, dtype=float).T


def human_aggregates(scores: np.ndarray) -> np.ndarray:
    """
    Of a ``(runs, games)`` matrix of human-normalized scores (the games in ``ATARI5``'s order): the IQM over all runs,
    the median of the per-game means, and the Atari-5 estimate from the per-game IQMs.
    """
    from rliable import metrics

    per_game = trimmed_mean(scores, axis=0)
    estimate = atari5_median_estimate(dict(zip(ATARI5, per_game)))
    return np.array([trimmed_mean(scores), metrics.aggregate_median(scores), estimate])


def to_human(raw: np.ndarray) -> np.ndarray:
    """A ``(runs, games)`` matrix of scores (the games in ``ATARI5``'s order), human-normalized."""
    return np.array([[human_normalized(g, v) for g, v in zip(ATARI5, row)] for row in raw])


def human_headline(raw: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Interval]]]:
    """
    Of ``(seeds, games)`` final scores per algorithm (the games in ``ATARI5``'s order): the human-normalized scores,
    and their IQM over runs, median of per-game means and Atari-5 estimate, in percent with 95% intervals (one
    bootstrap over the algorithms in order, so a pair computed alone reproduces the same numbers).
    """
    human = {algo: to_human(scores) for algo, scores in raw.items()}
    points, intervals = seeded_interval_estimates(human, human_aggregates)
    headline = {
        algo: {
            name: Interval(100 * points[algo][i], 100 * intervals[algo][0, i], 100 * intervals[algo][1, i])
            for i, name in enumerate(("iqm", "median", "estimate"))
        }
        for algo in raw
    }
    return human, headline


def ppo_scale(random_scores: dict[str, Any], ppo_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """
    Per game (``ATARI5``'s order): the offset and scale that map the random policy to 0 and PPO's IQM to 1, the IQM
    of ``ppo_scores`` (``(seeds, games)``: the runs an aggregate on this scale reads, so that PPO's is 1 there).
    """
    offset = np.array([random_scores[g]["mean"] for g in ATARI5])
    return offset, trimmed_mean(ppo_scores, axis=0) - offset


def collapse_reasons(accepted: float | None, entropy: float | None, floor: float) -> list[str]:
    """Why a TRPOPlus run fails the no-collapse test (none when it passes): its line-search acceptance below
    ``ATARI_MIN_ACCEPTANCE``, its mean entropy below ``floor`` (NaN when PPO's is unknown), or either missing."""
    low = []
    if accepted is None or not accepted >= ATARI_MIN_ACCEPTANCE:
        low.append(f"accepted {Shown(accepted):.2f}")
    if entropy is None or not entropy >= floor:
        low.append(f"entropy {Shown(entropy):.2g} nats against {floor:.2f}")
    return low


def collapsed_runs(runs: dict[str, dict[str, dict[int, dict[str, Any]]]], seeds: int) -> tuple[list[str], int]:
    """
    The TRPOPlus runs (of the first ``seeds`` paired seeds of each game) that collapsed over the last
    ``ATARI_DIAGNOSTICS_WINDOW`` steps: line-search acceptance below ``ATARI_MIN_ACCEPTANCE``, or mean entropy below
    ``ATARI_MIN_ENTROPY_SHARE`` x PPO's mean over its runs on the game; and the number of runs checked.
    """
    plus_algo, reference = ATARI_ALGOS
    failures, checked = [], 0
    for game, by_algo in runs.items():
        key, sign = ATARI_DIAGNOSTICS[reference]["entropy"]
        reference_entropy = [late_diagnostic(record, key) for record in by_algo[reference].values()]
        floor = ATARI_MIN_ENTROPY_SHARE * sign * float(np.mean([e for e in reference_entropy if e is not None] or [np.nan]))
        for seed in sorted(set.intersection(*(set(by_algo[a]) for a in ATARI_ALGOS)))[:seeds]:
            record, checked = by_algo[plus_algo][seed], checked + 1
            accepted = late_acceptance(record)
            entropy = late_diagnostic(record, ATARI_DIAGNOSTICS[plus_algo]["entropy"][0])
            low = collapse_reasons(accepted, entropy, floor)
            if low:
                failures.append(f"{game} seed {seed} ({', '.join(low)})")
    return failures, checked


def done_test_fields(
    places: dict[str, int], plus: dict[str, Interval], ppo: dict[str, Interval], failures: list[str], checked: int
) -> dict[str, Any]:
    """The issue's done tests of a TRPOPlus entry against PPO, as template fields: no game behind, the human-normalized
    IQM and median ratios, and the collapse count (``collapsed_runs``)."""
    behind = [game for game, place in places.items() if place < 0]
    ratio = {name: plus[name].point / ppo[name].point for name in ("iqm", "median")}
    return {
        "behind": ", ".join(behind) or "none",
        "behind_verdict": VERDICT[not behind],
        "target_ratio": ATARI_TARGET_RATIO,
        "iqm_ratio": ratio["iqm"],
        "iqm_verdict": VERDICT[bool(ratio["iqm"] >= ATARI_TARGET_RATIO)],
        "median_ratio": ratio["median"],
        "median_verdict": VERDICT[bool(ratio["median"] >= ATARI_TARGET_RATIO)],
        "min_acceptance": ATARI_MIN_ACCEPTANCE,
        "entropy_share": ATARI_MIN_ENTROPY_SHARE,
        "window": ATARI_DIAGNOSTICS_WINDOW // 1000,
        "collapsed": f"{len(failures)} of {checked} runs" + (f": {'; '.join(failures)}" if failures else ""),
        "collapse_verdict": VERDICT[not failures],
    }


def atari5_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> str:
    """Per game and aggregated over the Atari-5 games: the ``atari`` entries of TRPOPlus and PPO, 1M steps."""
    random_scores = (read_json(results_dir / "atari" / "random.json") or {}).get("games", {})
    runs = {game: atari_runs(results_dir, game) for game in ATARI5}
    labels = {game: game_label(game, by_algo) for game, by_algo in runs.items()}
    plus_algo, reference = ATARI_ALGOS
    rows, places, paired_counts, iqms = [], {}, {}, {}
    for game, by_algo in runs.items():
        paired = sorted(set.intersection(*(set(by_algo[algo]) for algo in ATARI_ALGOS)))
        paired_counts[game] = len(paired)
        counts = " / ".join(str(len(by_algo[algo])) for algo in ATARI_ALGOS)
        estimates = {
            algo: interval_estimates({algo: np.array([by_algo[algo][s]["final"]["mean"] for s in sorted(by_algo[algo])])})[
                algo
            ]
            for algo in ATARI_ALGOS
            if by_algo[algo]
        }
        late = {
            algo: float(metrics_iqm([by_algo[algo][s]["late"]["mean"] for s in by_algo[algo]]))
            for algo in ATARI_ALGOS
            if by_algo[algo]
        }
        iqms[game] = {algo: estimates[algo]["iqm"].point for algo in estimates}
        place = None
        if len(paired) >= ATARI_MIN_SEEDS:
            paired_estimates = interval_estimates(
                {algo: np.array([by_algo[algo][s]["final"]["mean"] for s in paired]) for algo in ATARI_ALGOS}
            )
            place = places[game] = paired_estimates[plus_algo]["iqm"].place(paired_estimates[reference]["iqm"])
        rows.append(
            fill(
                "atari5.row",
                game=labels[game],
                random=Shown(random_scores.get(game, {}).get("mean")),
                **{algo: score_text(estimates[algo]["iqm"]) if algo in estimates else NOT_RUN for algo in ATARI_ALGOS},
                **{f"{algo}_late": score_text(late[algo]) if algo in late else NOT_RUN for algo in ATARI_ALGOS},
                place=PLACE[place] if place is not None else f"not yet ({len(paired)} of {ATARI_MIN_SEEDS} seeds)",
                counts=counts,
            )
        )
    image = images_dir / "atari5_curves.png"
    plot_curve_panels(
        {game: {algo: list(records.values()) for algo, records in by_algo.items()} for game, by_algo in runs.items()},
        image,
        "Atari-5, 1M steps: evaluation return (mean over seeds, 95% bootstrap CI)",
    )
    parts = [
        fill(
            "atari5",
            rows="\n".join(rows),
            min_seeds=ATARI_MIN_SEEDS,
            bootstrap_reps=BOOTSTRAP_REPS,
            bootstrap_seed=BOOTSTRAP_SEED,
            image=image_link(image, docs_dir),
        )
    ]
    human_rows = [
        fill(
            "atari5.human.row",
            label=ALGO_LABELS[algo],
            **{game: Shown(100 * human_normalized(game, iqms[game][algo]) if algo in iqms[game] else None) for game in ATARI5},
            estimate=Shown(
                100 * atari5_median_estimate({g: human_normalized(g, iqms[g][algo]) for g in ATARI5})
                if all(algo in iqms[g] for g in ATARI5)
                else None
            ),
        )
        for algo in ATARI_ALGOS
    ]
    # the per-game details follow the aggregate
    details = [fill("atari5.human", rows="\n".join(human_rows), **{f"game{i}": labels[g] for i, g in enumerate(ATARI5)})]
    entropy_image = images_dir / "atari5_entropy.png"
    plot_entropy_panels(
        runs,
        entropy_image,
        ATARI_ENTRIES,
        "Atari-5, 1M steps: policy entropy (mean per 50k steps) and TRPOPlus's line-search acceptance",
    )
    details.append(
        fill(
            "atari5.diagnostics",
            window=ATARI_DIAGNOSTICS_WINDOW // 1000,
            rows=atari_diagnostics_rows(runs, labels),
            image=image_link(entropy_image, docs_dir),
        )
    )
    n_seeds = min(paired_counts.values())
    if n_seeds < ATARI_MIN_SEEDS or any(game not in random_scores for game in ATARI5):
        waiting = ", ".join(f"{game} {count} of {ATARI_MIN_SEEDS}" for game, count in paired_counts.items())
        parts.append(fill("atari5.aggregate.not_yet", min_seeds=ATARI_MIN_SEEDS, waiting=waiting))
        return paragraphs(*parts, *details)
    raw = {algo: paired_scores(runs, algo, n_seeds) for algo in ATARI_ALGOS}
    human, headline = human_headline(raw)
    profile = images_dir / "atari5_profile.png"
    tau_max = max(0.5, float(np.ceil(10 * np.percentile(np.concatenate([v.ravel() for v in human.values()]), 95)) / 10))
    plot_performance_profile(human, profile, "Atari-5: performance profile (all runs of the five games)", "human", tau_max)
    # beside it: random = 0 (the measured random policy) and PPO's IQM on the game, over the same runs, = 1
    offset, scale = ppo_scale(random_scores, raw[reference])
    by_ppo = interval_estimates({algo: (raw[algo] - offset) / scale for algo in ATARI_ALGOS})
    plus_iqms = trimmed_mean((raw[plus_algo] - offset) / scale, axis=0)

    points, intervals = seeded_interval_estimates({"pair": (raw[plus_algo], raw[reference])}, probability_of_improvement)
    low, high = np.ravel(intervals["pair"])
    improvement = Interval(float(np.ravel(points["pair"])[0]), float(low), float(high))
    parts.append(
        fill(
            "atari5.aggregate",
            n_seeds=n_seeds,
            n_runs=n_seeds * len(ATARI5),
            rows=fill_each("atari5.aggregate.row", ({"label": ALGO_LABELS[a], **headline[a]} for a in ATARI_ALGOS)),
            ppo_rows=fill_each("minatar.aggregate.row", ({"label": ALGO_LABELS[a], **by_ppo[a]} for a in ATARI_ALGOS)),
            gains=", ".join(f"{g} +{score_text(scale[i])} ({plus_iqms[i]:.1f}x)" for i, g in enumerate(ATARI5)),
            improvement=improvement,
            image=image_link(profile, docs_dir),
        )
    )
    plus_by_ppo = by_ppo[plus_algo]["iqm"].point
    parts.append(
        fill(
            "atari5.targets",
            n_seeds=n_seeds,
            **done_test_fields(places, headline[plus_algo], headline[reference], *collapsed_runs(runs, n_seeds)),
            goal=ATARI_GOAL_IQM,
            aim=ATARI_AIM_IQM,
            plus=plus_by_ppo,
            goal_verdict=VERDICT[bool(plus_by_ppo >= ATARI_GOAL_IQM)],
            aim_verdict=VERDICT[bool(plus_by_ppo >= ATARI_AIM_IQM) and all(p >= 0 for p in places.values())],
            ahead=", ".join(g for g, p in places.items() if p > 0) or "none",
            level=", ".join(g for g, p in places.items() if p == 0) or "none",
        )
    )
    return paragraphs(*parts, *details)


# --- Atari-5, later measurements: the atari entry changed, read beside the first ---------------------------------------


class Measurement(NamedTuple):
    """
    A later Atari-5 measurement of a changed ``atari`` entry: the folder of its records (``<folder>/atari/<game>/
    trpo_plus/``), its template block (heading, what changed, command; also its figures' stem), how the figures draw its
    runs, how sentences name it (``the entry with {name}``), how section 4 marks its Breakout runs, the earlier
    measurements its per-game table and figures show beside it, whether its rule reads none of its Atari-5 runs until
    every game has ``ATARI_MIN_SEEDS`` of them (``sealed``: until then the page gives their number, nothing else), the
    entry its rule's shipping test weighs it against (``baseline``: ``"first"`` or the key of an earlier one), and the
    seeds that test reads (``ship_seeds``: the first so many; ``None``: all the seeds it shares with its baseline and PPO).
    """

    folder: str
    block: str
    entry: Entry
    name: str
    breakout_mark: str
    beside: tuple[str, ...] = ()
    sealed: bool = False
    baseline: str = "first"
    ship_seeds: int | None = None


#: A sealed measurement's cells (scores, collapsed runs) in its per-game table until its rule reads its runs
WITHHELD = "withheld"

#: The later measurements, in the page's order, each under its rule (``<folder>/atari5_rule_v<k>.md``)
ATARI_MEASUREMENTS = {
    "floor": Measurement(
        "atari_v2",
        "atari5_v2",
        Entry("trpo_plus", "TRPOPlus + entropy floor 0.3", "tab:purple"),
        "the floor",
        "entropy floor 0.3, second measurement",
    ),
    "schedule": Measurement(
        "atari_v3",
        "atari5_v3",
        Entry("trpo_plus", "TRPOPlus + radius schedule", "tab:red"),
        "the radius schedule",
        "radius schedule, third measurement",
        beside=("floor",),
        sealed=True,
    ),
    "schedule_floor": Measurement(
        "atari_v4",
        "atari5_v4",
        Entry("trpo_plus", "TRPOPlus + radius schedule + floor 0.3", "tab:brown"),
        "the floor on the radius schedule",
        "radius schedule + entropy floor 0.3, fourth measurement",
        beside=("floor", "schedule"),
        sealed=True,
        baseline="schedule",
        ship_seeds=3,  # its rule: seeds 0-2
    ),
}


def is_sealed(results_dir: Path, measurement: Measurement) -> bool:
    """Whether the measurement's rule still reads none of its runs: it is sealed and some Atari-5 game lacks one of
    seeds 0 to ``ATARI_MIN_SEEDS - 1``."""
    rule_seeds = set(range(ATARI_MIN_SEEDS))
    folder = results_dir / measurement.folder
    return measurement.sealed and not all(rule_seeds <= set(atari_runs(folder, g)["trpo_plus"]) for g in ATARI5)


def later_runs(results_dir: Path, measurement: Measurement) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """Per game, ``{entry: {seed: record}}`` in the tables' order: the first entry's, each earlier measurement's shown
    beside (by its key), this one's (``"later"``) and PPO's; PPO's and the first entry's from ``atari/``."""
    runs = {}
    for game in ATARI5:
        first = atari_runs(results_dir, game)
        runs[game] = {
            "first": first["trpo_plus"],
            **{key: atari_runs(results_dir / ATARI_MEASUREMENTS[key].folder, game)["trpo_plus"] for key in measurement.beside},
            "later": atari_runs(results_dir / measurement.folder, game)["trpo_plus"],
            "ppo": first["ppo"],
        }
    return runs


def against_ppo(by_entry: dict[str, dict[int, dict[str, Any]]], entry: str, seeds: list[int]) -> dict[str, Any]:
    """``entry``'s records on ``seeds`` as the first measurement's TRPOPlus, against all of PPO's on the game."""
    return {"trpo_plus": {s: by_entry[entry][s] for s in seeds}, "ppo": by_entry["ppo"]}


def later_section(results_dir: Path, images_dir: Path, docs_dir: Path, key: str) -> str:
    """
    A later measurement (``ATARI_MEASUREMENTS[key]``) beside the first (and the earlier ones it names). Per game: each
    entry's IQM, and each TRPOPlus entry's runs that collapsed, on the seeds all the entries have. Over the games: the
    first entry, the one the changed entry is weighed against (its ``baseline``, when not the first) and the changed
    entry against PPO as section 6 computes it (on the seeds each shares with PPO), the issue's done tests for the
    changed entry, and its rule's shipping test (on the seeds it, its baseline and PPO all have).
    A sealed measurement shows only how many of its runs exist until every game has seeds 0 to ``ATARI_MIN_SEEDS - 1``.
    """
    measurement = ATARI_MEASUREMENTS[key]
    name = measurement.name
    random_scores = (read_json(results_dir / "atari" / "random.json") or {}).get("games", {})
    runs = later_runs(results_dir, measurement)
    finished = {game: len(by_entry["later"]) for game, by_entry in runs.items()}
    sealed = is_sealed(results_dir, measurement)
    if sealed:  # nothing of its runs is read (scores, curves, diagnostics, collapses) until every game has its seeds
        for by_entry in runs.values():
            by_entry["later"] = {}
    missing = {"later": WITHHELD if sealed else NOT_RUN}
    baseline = measurement.baseline
    entries = tuple(dict.fromkeys(("first", baseline, "later")))  # in the aggregate: the first, the baseline, this one
    drawn = {
        "first": Entry("trpo_plus", "TRPOPlus, first entry", COLORS["trpo_plus"]),
        **{key: ATARI_MEASUREMENTS[key].entry for key in measurement.beside},
        "later": measurement.entry,
        "ppo": ATARI_ENTRIES["ppo"],
    }
    plus = [e for e in drawn if e != "ppo"]
    names = {entry: drawn[entry].label for entry in drawn}
    sentence = {"first": "first", **{e: f"with {ATARI_MEASUREMENTS[e].name}" for e in measurement.beside}}
    sentence["later"] = f"with {name}"
    with_ppo = {e: {g: sorted(set(runs[g][e]) & set(runs[g]["ppo"])) for g in ATARI5} for e in plus}
    shared = {g: sorted(set(with_ppo[baseline][g]) & set(with_ppo["later"][g])) for g in ATARI5}
    in_table = {g: sorted(set.intersection(*(set(with_ppo[e][g]) for e in plus))) for g in ATARI5}
    labels = {game: game_label(game, by_entry, names) for game, by_entry in runs.items()}
    rows, places = [], {}
    for game, by_entry in runs.items():
        iqm = {
            entry: interval_estimates({entry: np.array([r["final"]["mean"] for r in records.values()])})[entry]["iqm"]
            for entry, records in by_entry.items()
            if records
        }
        paired_seeds, place, collapsed = with_ppo["later"][game], None, missing["later"]
        if len(paired_seeds) >= ATARI_MIN_SEEDS:
            scores = {e: np.array([by_entry[e][s]["final"]["mean"] for s in paired_seeds]) for e in ("later", "ppo")}
            paired = interval_estimates(scores)
            place = places[game] = paired["later"]["iqm"].place(paired["ppo"]["iqm"])
        if seeds := in_table[game]:
            counts = [len(collapsed_runs({game: against_ppo(by_entry, e, seeds)}, len(seeds))[0]) for e in plus]
            collapsed = f"{' / '.join(map(str, counts))} of {len(seeds)}"
        rows.append(
            fill(
                "atari5_later.row",
                game=labels[game],
                scores=" | ".join(score_text(iqm[e]) if e in iqm else missing.get(e, NOT_RUN) for e in drawn),
                place=PLACE[place]
                if place is not None
                else f"not yet ({finished[game] if sealed else len(paired_seeds)} of {ATARI_MIN_SEEDS} seeds)",
                collapsed=collapsed,
                counts=" / ".join(str(finished[game] if e == "later" else len(r)) for e, r in by_entry.items()),
            )
        )
    curves = images_dir / f"{measurement.block}_curves.png"
    entropy = images_dir / f"{measurement.block}_entropy.png"
    plot_curve_panels(
        {game: {names[e]: list(records.values()) for e, records in by_entry.items()} for game, by_entry in runs.items()},
        curves,
        "Atari-5, 1M steps, each TRPOPlus entry: evaluation return (mean over seeds, 95% bootstrap CI)",
        colors={entry.label: entry.color for entry in drawn.values()},
    )
    plot_entropy_panels(
        runs,
        entropy,
        drawn,
        "Atari-5, 1M steps: policy entropy (mean per 50k steps) and line-search acceptance of each TRPOPlus entry",
    )
    parts = [
        fill(measurement.block),
        fill(
            "atari5_later",
            name=name,
            columns=" | ".join(names.values()),
            align=" | ".join("---:" for _ in drawn),
            collapsed_of=" / ".join(sentence[e] for e in plus),
            seeds_of=" / ".join([*(sentence[e] for e in plus), "PPO"]),
            rows="\n".join(rows),
            min_seeds=ATARI_MIN_SEEDS,
            curves=image_link(curves, docs_dir),
            entropy=image_link(entropy, docs_dir),
        ),
    ]
    if sealed:
        parts.append(
            fill("atari5_later.sealed", finished=sum(finished.values()), total=ATARI_MIN_SEEDS * len(ATARI5), name=name)
        )
        return paragraphs(*parts)
    n_seeds = {e: min(len(seeds) for seeds in with_ppo[e].values()) for e in entries}
    n_shared = min(len(seeds) for seeds in shared.values())
    if measurement.ship_seeds is not None:
        n_shared = min(n_shared, measurement.ship_seeds)
    if min(n_seeds["later"], n_shared) < ATARI_MIN_SEEDS or any(game not in random_scores for game in ATARI5):
        waiting = ", ".join(f"{game} {len(seeds)} of {ATARI_MIN_SEEDS}" for game, seeds in shared.items())
        return paragraphs(*parts, fill("atari5_later.not_yet", min_seeds=ATARI_MIN_SEEDS, waiting=waiting))
    # each TRPOPlus entry against PPO as section 6 computes it, on section 6's scale (PPO's IQM over the PPO runs of
    # the first entry's aggregate)
    headline, by_ppo, raw = {}, {}, {}
    for entry in entries:
        pair = {g: against_ppo(runs[g], entry, with_ppo[entry][g]) for g in ATARI5}
        raw[entry] = {algo: paired_scores(pair, algo, n_seeds[entry]) for algo in ATARI_ALGOS}
    offset, scale = ppo_scale(random_scores, raw["first"]["ppo"])
    for entry in entries:
        _, pair_headline = human_headline(raw[entry])
        pair_by_ppo = interval_estimates({algo: (raw[entry][algo] - offset) / scale for algo in ATARI_ALGOS})
        headline[entry], by_ppo[entry] = pair_headline["trpo_plus"], pair_by_ppo["trpo_plus"]
        if entry == "later":
            headline["ppo"], by_ppo["ppo"] = pair_headline["ppo"], pair_by_ppo["ppo"]
    from rliable import metrics

    points, intervals = seeded_interval_estimates(
        {"pair": (raw["later"]["trpo_plus"], raw["later"]["ppo"])}, probability_of_improvement
    )
    low, high = np.ravel(intervals["pair"])
    on_scale = {e: [metrics_iqm(column) for column in ((raw[e]["trpo_plus"] - offset) / scale).T] for e in entries}
    # the done tests: the changed entry against PPO
    later_pair = {g: against_ppo(runs[g], "later", with_ppo["later"][g]) for g in ATARI5}
    done_tests = done_test_fields(places, headline["later"], headline["ppo"], *collapsed_runs(later_pair, n_seeds["later"]))
    # the shipping test: the changed entry and its baseline on the seeds both have with PPO
    ship_pairs = {e: {g: against_ppo(runs[g], e, shared[g]) for g in ATARI5} for e in (baseline, "later")}
    ship_iqm = {
        e: 100 * float(metrics.aggregate_iqm(to_human(paired_scores(pairs, "trpo_plus", n_shared))))
        for e, pairs in ship_pairs.items()
    }
    ship_collapsed = {e: len(collapsed_runs(pairs, n_shared)[0]) for e, pairs in ship_pairs.items()}
    fewer = ship_collapsed["later"] < ship_collapsed[baseline]
    not_lower = ship_iqm["later"] >= ship_iqm[baseline]
    entry_name = {e: "the first entry" if e == "first" else f"the entry {sentence[e]}" for e in entries}
    parts.append(
        fill(
            "atari5_later.aggregate",
            name=name,
            Name=name[0].upper() + name[1:],
            seed_counts="; ".join(
                f"{n_seeds[e]} for {entry_name[e]}" + (", so its row is section 6's" if e == "first" else "") for e in entries
            ),
            rows=fill_each("atari5.aggregate.row", ({"label": names[e], **headline[e]} for e in (*entries, "ppo"))),
            ppo_rows=fill_each("minatar.aggregate.row", ({"label": names[e], **by_ppo[e]} for e in (*entries, "ppo"))),
            scale_of=" / ".join(entry_name[e] for e in entries),
            gains=", ".join(
                f"{g} +{score_text(scale[i])} ({' / '.join(f'{on_scale[e][i]:.1f}x' for e in entries)})"
                for i, g in enumerate(ATARI5)
            ),
            improvement=Interval(float(np.ravel(points["pair"])[0]), float(low), float(high)),
            **done_tests,
            n_shared=n_shared,
            baseline=entry_name[baseline],
            baseline_collapsed=ship_collapsed[baseline],
            later_collapsed=ship_collapsed["later"],
            fewer_verdict=VERDICT[fewer],
            baseline_iqm=ship_iqm[baseline],
            later_iqm=ship_iqm["later"],
            iqm_kept_verdict=VERDICT[not_lower],
            ships="ships: it becomes the `atari` entry" if fewer and not_lower else "does not ship: the `atari` entry stays",
        )
    )
    return paragraphs(*parts)
