"""
The report's statistics and figures (``benchmarks.report``): rliable's interval estimates with a seeded stratified
bootstrap (the same results give the same intervals on every regeneration), the mean curves over seeds with their
bands, and rliable's performance profile.
"""

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import ALGO_LABELS
from benchmarks.report_common import Interval

#: Resamples of the stratified bootstrap behind every interval
BOOTSTRAP_REPS = 20_000
#: Seed of the bootstrap: the same results give the same intervals on every regeneration
BOOTSTRAP_SEED = 0
#: The color of each algorithm in every figure
COLORS = {"trpo_plus": "tab:blue", "trpo": "tab:orange", "ppo": "tab:green"}


def interval_estimates(scores: dict[str, np.ndarray]) -> dict[str, dict[str, Interval]]:
    """
    Per algorithm: mean and IQM of the scores with 95% stratified-bootstrap intervals (rliable). ``scores[algo]``:
    one score per seed, or a ``(seeds, tasks)`` matrix aggregated over all its entries.
    """
    from rliable import metrics

    def aggregates(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_mean(x), trimmed_mean(x)])

    # one row per run, one column per task (a single task: a column of seeds)
    score_dict = {algo: values.reshape(len(values), -1) for algo, values in scores.items()}
    points, intervals = seeded_interval_estimates(score_dict, aggregates)
    return {
        algo: {
            "mean": Interval(points[algo][0], intervals[algo][0, 0], intervals[algo][1, 0]),
            "iqm": Interval(points[algo][1], intervals[algo][0, 1], intervals[algo][1, 1]),
        }
        for algo in scores
    }


def trimmed_mean(scores: np.ndarray, axis: int | None = None) -> Any:
    """
    ``scipy.stats.trim_mean(scores, 0.25, axis)``, rliable's IQM (``aggregate_iqm``) with ``axis=None``, computed as
    SciPy computes it (the same partition; NaN in a slice gives NaN) without its argument-handling wrapper, which takes
    about 90% of a bootstrap's time when called on every resample. Equal to SciPy's to the bit on what the report passes
    (C-ordered float matrices without NaN); along ``axis=0`` of other layouts, or beside a NaN column, SciPy sums in
    another order and the two may differ in the last bit.
    """
    a = np.asarray(scores)
    if axis is None:
        a, axis = a.ravel(), 0
    n = a.shape[axis]
    if n == 0:
        return np.nan
    low = int(0.25 * n)
    middle = np.take(np.partition(a, (low, n - low - 1), axis), np.arange(low, n - low), axis)
    return np.where(np.isnan(a).any(axis), np.nan, middle.mean(axis))[()]


def probability_of_improvement(scores_x: np.ndarray, scores_y: np.ndarray) -> float:
    """
    rliable's ``probability_of_improvement`` of two ``(runs, tasks)`` matrices, P(X > Y) averaged over tasks, with the
    Mann-Whitney U counted pair by pair (X above Y, ties counted half) rather than by ``scipy.stats.mannwhitneyu``,
    whose wrapper takes most of a bootstrap's time. U is a multiple of 0.5, exact in floating point, so the result is
    rliable's to the bit; a task with a NaN score gives NaN, as rliable's does.
    """
    per_task = []
    for x, y in zip(scores_x.T, scores_y.T, strict=True):
        if np.isnan(x).any() or np.isnan(y).any():
            per_task.append(np.nan)
        elif np.array_equal(x, y):
            per_task.append(0.5)
        else:
            above, tied = (x[:, None] > y[None, :]).sum(), (x[:, None] == y[None, :]).sum()
            per_task.append((above + 0.5 * tied) / (len(x) * len(y)))
    return float(np.mean(per_task))


def seeded_interval_estimates(score_dict: dict[str, Any], function: Callable[..., Any]) -> tuple[dict, dict]:
    """``rly.get_interval_estimates`` with ``BOOTSTRAP_REPS`` resamples, the same on every call (``BOOTSTRAP_SEED``)."""
    from rliable import library as rly

    # rliable's StratifiedBootstrap draws its resamples from NumPy's global generator (np.random.choice), whatever
    # random_state says: seed that generator for the call, then give the caller back its state
    global_state = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # arch's notice about `random_state`, used by rliable
            return rly.get_interval_estimates(
                score_dict, function, reps=BOOTSTRAP_REPS, random_state=np.random.RandomState(BOOTSTRAP_SEED)
            )
    finally:
        np.random.set_state(global_state)


def metrics_iqm(values: list[float]) -> float:
    """rliable's interquartile mean of ``values``."""
    from rliable import metrics

    return float(metrics.aggregate_iqm(np.asarray(values, dtype=float).reshape(-1, 1)))


# --- figures --------------------------------------------------------------------------------------------------------


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def finish_axes(ax: Any, title: str, legend_fontsize: int, ylabel: str | None = None) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("environment steps")
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=legend_fontsize)


def save_figure(fig: Any, path: Path) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)


def plot_mean_curves(
    ax: Any, by_algo: dict[str, list[dict[str, Any]]], key: str = "mean", colors: dict[str, str] | None = None
) -> None:
    """
    One line per algorithm (or group of runs): the mean over seeds of the curve's ``key`` (the evaluation return by
    default), with a 95% bootstrap interval of the mean; the label is the algorithm's name, or the group's own.
    """
    rng = np.random.default_rng(0)
    for algo, records in by_algo.items():
        points = [[(t, v) for t, v in zip(r["curve"]["timesteps"], r["curve"].get(key, [])) if v is not None] for r in records]
        points = [p for p in points if p]
        if not points:
            continue
        grid = np.asarray([t for t, _ in points[0]], dtype=float)
        curves = np.array([np.interp(grid, *map(np.asarray, zip(*p))) for p in points])
        color = (colors or COLORS).get(algo)
        seeds_text = "1 seed" if len(points) == 1 else f"{len(points)} seeds"
        ax.plot(grid, curves.mean(axis=0), color=color, label=f"{ALGO_LABELS.get(algo, algo)} ({seeds_text})")
        if len(points) > 1:
            samples = curves[rng.integers(0, len(points), size=(2000, len(points)))].mean(axis=1)
            low, high = np.percentile(samples, [2.5, 97.5], axis=0)
            ax.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)


def legend_in_spare_panel(axes: Any, used: int) -> None:
    """
    One legend for a grid of panels, in the first panel left spare (a panel's own legend would hide its curves); the
    spare panels are blanked. Without a spare panel each panel keeps its own legend.
    """
    panels = list(axes.flat)
    if used >= len(panels):
        return
    legend = {}
    for ax in panels[:used]:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
        if ax.get_legend():
            ax.get_legend().remove()
    for ax in panels[used:]:
        ax.axis("off")
    panels[used].legend(legend.values(), legend.keys(), loc="center", fontsize=8, frameon=False)


def plot_curve_panels(
    panels: dict[str, dict[str, list[dict[str, Any]]]], path: Path, title: str, colors: dict[str, str] | None = None
) -> None:
    """A 2x3 grid, a panel per title: one line per algorithm, its mean curve over seeds with a 95% bootstrap band."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(11, 6.2))
    for ax, (panel, by_algo) in zip(axes.flat, panels.items()):
        plot_mean_curves(ax, by_algo, colors=colors)
        finish_axes(ax, panel, 7, ylabel="return")
        if not ax.lines:
            ax.text(0.5, 0.5, "no finished run yet", ha="center", va="center", transform=ax.transAxes, fontsize=8)
    legend_in_spare_panel(axes, len(panels))
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path)


def plot_curves(env_id: str, by_algo: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """Mean evaluation return over seeds against steps, with a 95% bootstrap interval of the mean."""
    fig, ax = pyplot().subplots(figsize=(6.4, 4.0))
    plot_mean_curves(ax, by_algo)
    finish_axes(ax, f"{env_id}: evaluation return (mean over seeds, 95% bootstrap CI)", 8, ylabel="return")
    save_figure(fig, path)


def plot_performance_profile(
    normalized: dict[str, np.ndarray],
    path: Path,
    title: str,
    reference: str,
    tau_max: float | None = None,
    entries: dict[str, Any] | None = None,
) -> None:
    """
    rliable's performance profile of the normalized scores: the fraction of runs above each score, with 95% bands.

    :param reference: what normalized score 1 is (``"PPO's IQM"``)
    :param tau_max: the right end of the axis; by default the 95th percentile of all runs rounded up, at least 2 (one
        far-out run would squeeze the rest into the left edge)
    :param entries: per key of ``normalized``, what names and colors its curve (``label`` and ``color``); by default
        the key is an algorithm, drawn as everywhere else
    """
    from rliable import library as rly
    from rliable import plot_utils

    if tau_max is None:
        high = float(np.percentile(np.concatenate([values.ravel() for values in normalized.values()]), 95))
        tau_max = max(2.0, float(np.ceil(high)))
    taus = np.linspace(0.0, tau_max, 81)
    global_state = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)
    try:
        profiles, bands = rly.create_performance_profile(normalized, taus, reps=2000)
    finally:
        np.random.set_state(global_state)
    fig, ax = pyplot().subplots(figsize=(6.4, 4.0))
    if entries is None:
        labels, colors = ALGO_LABELS, COLORS
    else:
        labels, colors = ({key: getattr(entry, name) for key, entry in entries.items()} for name in ("label", "color"))
    plot_utils.plot_performance_profiles(
        {labels[a]: v for a, v in profiles.items()},
        taus,
        performance_profile_cis={labels[a]: v for a, v in bands.items()},
        colors={labels[a]: colors[a] for a in normalized},
        xlabel=f"normalized score τ (random = 0, {reference} = 1)",
        ylabel="fraction of runs with score > τ",
        ax=ax,
    )
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    save_figure(fig, path)
