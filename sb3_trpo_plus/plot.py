"""
The diagnostics picture of a TRPOPlus run, drawn from its logs.

Usage::

    python -m sb3_trpo_plus.plot LOGDIR [-o OUTPUT.png]

``LOGDIR`` is a run folder holding TensorBoard event files (``tensorboard_log`` of the model) or an SB3 CSV log
(``progress.csv``), a folder above such run folders (the most recent run is drawn), or an rl_zoo3 run folder
(``logs/trpo_plus/ENV_ID_N``) of a run started with ``--tensorboard-log``. The picture is written beside the logs it
draws (``diagnostics.png`` in the run folder that holds them), or where ``-o`` says.

Finding and reading the logs is :mod:`sb3_trpo_plus.plot_data` (its names import from here too). This module says
what the picture draws: the series made from the logs (:func:`diagnostics_series`) and one table of panels
(:data:`PANELS`), which :func:`plot_diagnostics` walks.

This module only reads logs. Drawing needs ``matplotlib`` and reading TensorBoard event files needs
``tensorboard``: ``pip install sb3-trpo-plus[plots]``. CSV logs are read without ``tensorboard``.
"""

import argparse
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from sb3_trpo_plus.plot_data import (
    CSV_NAME,
    PLOTS_EXTRA,
    TB_EVENTS_PREFIX,
    NoLogsError,
    Series,
    find_runs,
    find_zoo_tensorboard_run,
    read_csv_log,
    read_run,
    read_tensorboard_log,
    resolve_run,
)

__all__ = [
    "CSV_NAME",
    "EVENT_SERIES",
    "LOGGED_SERIES",
    "PANELS",
    "PANEL_GRID",
    "PLOTS_EXTRA",
    "TB_EVENTS_PREFIX",
    "Layer",
    "NoLogsError",
    "Panel",
    "Series",
    "diagnostics_series",
    "find_runs",
    "find_zoo_tensorboard_run",
    "kl_series",
    "main",
    "plot_diagnostics",
    "read_csv_log",
    "read_run",
    "read_tensorboard_log",
    "resolve_run",
]

KL_KEY = "train/kl_divergence_loss"
SUCCESS_KEY = "train/is_line_search_success"
#: The name of the picture written into the run folder when no output path is given
DEFAULT_OUTPUT_NAME = "diagnostics.png"


# What the picture draws: the series

#: The series of :func:`diagnostics_series` that are a logged key as it was logged: name -> key
LOGGED_SERIES: dict[str, str] = {
    "episode_reward": "rollout/ep_rew_mean",
    "eval_reward": "eval/mean_reward",
    "target_kl": "train/target_kl",
    "success": SUCCESS_KEY,
    "success_rate": "train/line_search_success_rate",
    "step_fraction": "train/step_fraction",
    "step_fraction_mean": "train/step_fraction_mean",
    "ent_coef": "train/ent_coef",
    "cg_damping": "train/cg_damping",
}

#: The series of :func:`diagnostics_series` that are events: the timesteps at which a 0/1 key was 1 (``True``) or 0
#: (``False``), with y = 1. Name -> (key, value)
EVENT_SERIES: dict[str, tuple[str, bool]] = {
    "failed_updates": (SUCCESS_KEY, False),
    "line_search_warning": ("train/line_search_warning", True),
    "trust_region_shrink": ("trust_region/shrink", True),
    "trust_region_recover": ("trust_region/recover", True),
}


def _no_points() -> Series:
    return Series(np.empty(0), np.empty(0))


def _events(values: Series, value: bool) -> Series:
    """
    The timesteps at which a 0/1 key was ``value``.

    :param values: The logged series of the key
    :param value: The value to look for
    :return: Those timesteps, with y = 1
    """
    mask = values.y > 0.5 if value else values.y < 0.5
    return Series(values.x[mask], np.ones(int(mask.sum())))


def kl_series(scalars: dict[str, Series]) -> Series:
    """
    KL per update as drawn: one point per logged update (``train/is_line_search_success``), the logged
    ``train/kl_divergence_loss`` where the line search succeeded and NaN where it failed (no step was taken,
    so there is no KL to draw: the curve has a gap there, never a 0).

    :param scalars: The logged series of a run
    :return: The KL series
    """
    kl = scalars.get(KL_KEY)
    success = scalars.get(SUCCESS_KEY)
    if success is None:
        return kl if kl is not None else _no_points()
    kl_by_step = {} if kl is None else dict(zip(kl.x.tolist(), kl.y.tolist(), strict=True))
    y = np.array(
        [
            kl_by_step.get(step, math.nan) if ok > 0.5 else math.nan
            for step, ok in zip(success.x.tolist(), success.y, strict=True)
        ],
        dtype=float,
    )
    return Series(success.x.copy(), y)


def diagnostics_series(logdir: str | os.PathLike) -> dict[str, Series]:
    """
    The series that :func:`plot_diagnostics` draws, by name (x: timesteps):

    - ``episode_reward``: ``rollout/ep_rew_mean``; ``eval_reward``: ``eval/mean_reward``
    - ``kl``: see :func:`kl_series`; ``target_kl``: ``train/target_kl`` (radius each update used)
    - ``failed_updates``: timesteps of the updates whose line search failed
    - ``success``: ``train/is_line_search_success``; ``success_rate``: ``train/line_search_success_rate``
    - ``line_search_warning``: timesteps where ``train/line_search_warning`` fired
    - ``step_fraction``: ``train/step_fraction``; ``step_fraction_mean``: ``train/step_fraction_mean``
    - ``ent_coef``: ``train/ent_coef``; ``cg_damping``: ``train/cg_damping``
    - ``trust_region_shrink`` / ``trust_region_recover``: timesteps where the
      :class:`~sb3_trpo_plus.callbacks.AdaptiveTrustRegionCallback` changed the trust region

    (:data:`LOGGED_SERIES` and :data:`EVENT_SERIES` hold the keys.) A name is missing when its key was not logged.

    :param logdir: See :func:`~sb3_trpo_plus.plot_data.resolve_run`
    :return: The series
    """
    scalars = read_run(resolve_run(logdir))
    series = {name: scalars[key] for name, key in LOGGED_SERIES.items() if key in scalars}
    if KL_KEY in scalars or SUCCESS_KEY in scalars:
        series["kl"] = kl_series(scalars)
    for name, (key, value) in EVENT_SERIES.items():
        if key in scalars:
            series[name] = _events(scalars[key], value)
    if not series:
        raise NoLogsError(
            f"The logs in {logdir} have none of the keys this picture draws (rollout/ep_rew_mean, train/...): "
            "is it a TRPOPlus run?"
        )
    return series


# What the picture draws: the panels


class Layer(NamedTuple):
    """
    One thing a panel draws, from one series of :func:`diagnostics_series` (nothing when the series is missing).

    :param series: The name of the series
    :param label: Its legend label; ``{n}`` stands for the number of points
    :param style: Matplotlib keyword arguments (color, marker size, ...)
    :param kind: ``"curve"``: the points (``Axes.plot`` with ``fmt``); ``"bottom"``: markers at the bottom of the
        panel at the series' timesteps (none, and no legend entry, when there are none); ``"vlines"``: a vertical
        line at each of the series' timesteps
    :param fmt: Matplotlib format string of a curve
    :param points: The points of a curve to draw: ``"all"``, or only those of the ``"accepted"`` or of the
        ``"failed"`` updates (the timesteps of ``failed_updates``)
    :param at: Draw a curve's points at this height instead of at their values (events)
    """

    series: str
    label: str
    style: Mapping[str, Any]
    kind: Literal["curve", "bottom", "vlines"] = "curve"
    fmt: str = "-"
    points: Literal["all", "accepted", "failed"] = "all"
    at: float | None = None


class Panel(NamedTuple):
    """
    One panel of the picture.

    :param title: Its title
    :param curves: Its data, drawn first. When none of their series was logged, the panel says "not logged"
    :param not_logged: The keys that "not logged" names
    :param marks: Drawn next, when their series exist (whether or not a curve was logged): failures, warnings,
        changes of the trust region
    :param y_axis: ``"linear"``; ``"fraction"``: from 0 to 1, ticks at the quarters (rates, fractions of a step);
        ``"log"``: log scale when it hides nothing, that is when every finite value of the curves is positive
        (a KL at float precision can come out <= 0). NaN values (the KL of a failed update) are gaps in a curve
    """

    title: str
    curves: tuple[Layer, ...]
    not_logged: tuple[str, ...]
    marks: tuple[Layer, ...] = ()
    y_axis: Literal["linear", "fraction", "log"] = "linear"


_TRUST_REGION_LINE = dict(linestyle=":", linewidth=0.8, alpha=0.7)
_SHRUNK = Layer(
    "trust_region_shrink", "trust region shrunk after this update", dict(color="tab:red", **_TRUST_REGION_LINE), kind="vlines"
)
_RECOVERED = Layer(
    "trust_region_recover",
    "trust region moved back after this update",
    dict(color="tab:green", **_TRUST_REGION_LINE),
    kind="vlines",
)

#: The panels of the picture, row by row (:data:`PANEL_GRID` rows and columns)
PANELS: tuple[Panel, ...] = (
    Panel(
        "Episode reward",
        curves=(
            Layer("episode_reward", "rollout/ep_rew_mean", dict(color="tab:blue")),
            Layer("eval_reward", "eval/mean_reward", dict(color="tab:green", markersize=3), fmt="o-"),
        ),
        not_logged=("rollout/ep_rew_mean",),
    ),
    Panel(
        "KL per update (gap + red x: failed line search, no step)",
        curves=(
            Layer("kl", KL_KEY, dict(color="tab:blue", markersize=3, linewidth=0.8), fmt=".-"),
            Layer("target_kl", "train/target_kl", dict(color="black", drawstyle="steps-post", linewidth=1.2)),
        ),
        not_logged=(KL_KEY, "train/target_kl"),
        marks=(
            Layer("failed_updates", "failed update ({n})", dict(marker="x", color="tab:red", markersize=6), kind="bottom"),
            _SHRUNK,
            _RECOVERED,
        ),
        y_axis="log",
    ),
    Panel(
        "Line-search success rate",
        curves=(
            Layer("success_rate", "train/line_search_success_rate (rolling)", dict(color="tab:blue")),
            Layer("success", SUCCESS_KEY, dict(color="gray", markersize=2, alpha=0.5), fmt="."),
        ),
        not_logged=("train/line_search_success_rate",),
        marks=(
            Layer(
                "line_search_warning",
                "train/line_search_warning ({n})",
                dict(color="tab:orange", markersize=5),
                fmt="v",
                at=1.05,
            ),
        ),
        y_axis="fraction",
    ),
    Panel(
        "Accepted step / full natural-gradient step",
        curves=(
            # A failed update takes no step (fraction 0): drawn as a red x at 0 rather than as an accepted step
            Layer("step_fraction", "train/step_fraction", dict(color="tab:blue", markersize=3), fmt=".", points="accepted"),
            Layer("step_fraction", "failed update (no step)", dict(color="tab:red", markersize=6), fmt="x", points="failed"),
            Layer("step_fraction_mean", "train/step_fraction_mean (rolling)", dict(color="black", linewidth=1.2)),
        ),
        not_logged=("train/step_fraction",),
        y_axis="fraction",
    ),
    Panel(
        "Entropy coefficient",
        curves=(Layer("ent_coef", "train/ent_coef", dict(color="tab:purple")),),
        not_logged=("train/ent_coef",),
    ),
    Panel(
        "Conjugate-gradient damping",
        curves=(Layer("cg_damping", "train/cg_damping", dict(color="tab:brown", drawstyle="steps-post")),),
        not_logged=("train/cg_damping",),
        marks=(_SHRUNK, _RECOVERED),
    ),
)
#: Rows and columns of :data:`PANELS`
PANEL_GRID = (3, 2)
FIGURE_SIZE = (13, 10)


# Drawing


def _import_matplotlib() -> Any:
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(f"Drawing the diagnostics picture needs matplotlib: {PLOTS_EXTRA}") from error
    return Figure


def _mark(ax: Any, x: np.ndarray, y_axes: float, **kwargs: Any) -> None:
    """Markers at data x and a fixed height in axes coordinates (0 bottom, 1 top)."""
    if len(x) > 0:
        ax.plot(x, np.full(len(x), y_axes), linestyle="none", transform=ax.get_xaxis_transform(), clip_on=False, **kwargs)


def _legend_on_top(ax: Any) -> None:
    """Legend above the curves: the y range grows by half (in log scale too) to leave it room."""
    low, high = ax.get_ylim()
    if ax.get_yscale() == "log":
        high = high * (high / low) ** 0.5
    else:
        high = high + 0.5 * (high - low)
    ax.set_ylim(low, high)
    ax.legend(loc="upper center", ncol=2, fontsize="x-small", framealpha=0.9)


def _vlines(ax: Any, x: np.ndarray, **kwargs: Any) -> None:
    for i, value in enumerate(x):
        ax.axvline(value, **({**kwargs, "label": kwargs.get("label") if i == 0 else None}))


def _not_logged(ax: Any, *keys: str) -> None:
    ax.text(0.5, 0.5, "not logged\n(" + ", ".join(keys) + ")", ha="center", va="center", transform=ax.transAxes, color="gray")


def _draw_layer(ax: Any, layer: Layer, values: Series, failed_x: np.ndarray) -> None:
    """
    Draw one layer of a panel.

    :param ax: The panel's matplotlib axes
    :param layer: What to draw
    :param values: The layer's series
    :param failed_x: The timesteps of the failed updates (for ``layer.points``)
    """
    x, y = values
    if layer.points != "all":
        failed = np.isin(x, failed_x)
        keep = failed if layer.points == "failed" else ~failed
        x, y = x[keep], y[keep]
    label = layer.label.format(n=len(x))
    if layer.kind == "bottom":
        _mark(ax, x, 0.03, label=label, **layer.style)
    elif layer.kind == "vlines":
        _vlines(ax, x, label=label, **layer.style)
    else:
        ax.plot(x, y if layer.at is None else np.full(len(x), layer.at), layer.fmt, label=label, **layer.style)


def _draw_panel(ax: Any, panel: Panel, series: dict[str, Series]) -> None:
    """
    Draw one panel: its curves, its marks, its y axis and its legend, or "not logged".

    :param ax: The panel's matplotlib axes
    :param panel: What to draw
    :param series: The series of :func:`diagnostics_series`
    """
    ax.set_title(panel.title)
    failed_x = series.get("failed_updates", _no_points()).x
    curves = [layer for layer in panel.curves if layer.series in series]
    for layer in (*curves, *panel.marks):
        if layer.series in series:
            _draw_layer(ax, layer, series[layer.series], failed_x)
    if not curves:
        _not_logged(ax, *panel.not_logged)
        return
    if panel.y_axis == "fraction":
        ax.set_ylim(-0.05, 1.05)
        ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
    elif panel.y_axis == "log":
        values = np.concatenate([series[layer.series].y for layer in curves])
        finite = values[np.isfinite(values)]
        if len(finite) > 0 and np.all(finite > 0):
            ax.set_yscale("log")
    _legend_on_top(ax)


def plot_diagnostics(logdir: str | os.PathLike, output: str | os.PathLike | None = None, title: str | None = None) -> Path:
    """
    Draw the diagnostics picture of a run to a PNG file: episode reward; KL per update with the failed updates
    marked and the target KL; line-search success rate; step fraction; ``ent_coef``; ``cg_damping``
    (the panels of :data:`PANELS`).

    :param logdir: See :func:`~sb3_trpo_plus.plot_data.resolve_run`
    :param output: The PNG file to write (default: ``diagnostics.png`` in the run folder that holds the logs)
    :param title: Title of the picture (default: the run folder)
    :return: The path of the written file
    """
    figure_class = _import_matplotlib()
    run_dir = resolve_run(logdir)
    series = diagnostics_series(run_dir)

    figure = figure_class(figsize=FIGURE_SIZE, layout="constrained")
    axes = figure.subplots(*PANEL_GRID, sharex=True)
    figure.suptitle(title if title is not None else f"TRPOPlus diagnostics: {run_dir}")
    for ax, panel in zip(axes.flat, PANELS, strict=True):
        _draw_panel(ax, panel, series)
    for ax in axes[-1]:
        ax.set_xlabel("timesteps")
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)

    output = run_dir / DEFAULT_OUTPUT_NAME if output is None else Path(output)
    if output.parent != Path():
        output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=100)
    return output


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sb3_trpo_plus.plot",
        description="Draw the diagnostics picture of a TRPOPlus run from its TensorBoard events or SB3 CSV log.",
    )
    parser.add_argument(
        "logdir",
        help="run folder (TensorBoard events or progress.csv), folder of runs (the latest is drawn) or rl_zoo3 run folder",
    )
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help=f"PNG file to write (default: {DEFAULT_OUTPUT_NAME} in the run folder that holds the logs it draws)",
    )
    parser.add_argument("--title", default=None, help="title of the picture (default: the run folder)")
    args = parser.parse_args(argv)
    try:
        output = plot_diagnostics(args.logdir, args.output, title=args.title)
    except (NoLogsError, ImportError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(f"Wrote {output}")


if __name__ == "__main__":
    main()
