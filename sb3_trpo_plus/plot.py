"""
The diagnostics picture of a TRPOPlus run, drawn from its logs.

Usage::

    python -m sb3_trpo_plus.plot LOGDIR [-o diagnostics.png]

``LOGDIR`` is a run folder holding TensorBoard event files (``tensorboard_log`` of the model) or an SB3 CSV log
(``progress.csv``), a folder above such run folders (the most recent run is drawn), or an rl_zoo3 run folder
(``logs/trpo_plus/ENV_ID_N``) of a run started with ``--tensorboard-log``.

This module only reads logs. Drawing needs ``matplotlib`` and reading TensorBoard event files needs
``tensorboard``: ``pip install sb3-trpo-plus[plots]``. CSV logs are read without ``tensorboard``.
"""

import argparse
import csv
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import yaml

PLOTS_EXTRA = "pip install 'sb3-trpo-plus[plots]'"
TB_EVENTS_PREFIX = "events.out.tfevents."
CSV_NAME = "progress.csv"


class Series(NamedTuple):
    """Values of one logged key: ``x`` the timesteps at which they were logged, ``y`` the values."""

    x: np.ndarray
    y: np.ndarray


class NoLogsError(FileNotFoundError):
    """Raised when a folder holds no run logs that can be drawn."""


# Reading logs


def _is_run_dir(path: Path) -> bool:
    return (path / CSV_NAME).is_file() or any(name.startswith(TB_EVENTS_PREFIX) for name in os.listdir(path))


def _run_mtime(run_dir: Path) -> float:
    files = [run_dir / name for name in os.listdir(run_dir) if name == CSV_NAME or name.startswith(TB_EVENTS_PREFIX)]
    return max(file.stat().st_mtime for file in files)


def find_runs(logdir: str | os.PathLike) -> list[Path]:
    """
    Folders under ``logdir`` (``logdir`` included) that hold TensorBoard event files or a ``progress.csv``.

    :param logdir: Folder to search
    :return: The run folders, the most recently written last
    """
    root = Path(logdir)
    if not root.is_dir():
        raise NoLogsError(f"{root} is not a folder")
    runs = [Path(folder) for folder, _, _ in os.walk(root) if _is_run_dir(Path(folder))]
    return sorted(runs, key=_run_mtime)


class _ZooArgsLoader(yaml.SafeLoader):
    """Safe YAML loader for the ``args.yml`` that rl_zoo3 writes (an ``OrderedDict`` dump)."""


def _construct_ordered_dict(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
    pairs = loader.construct_sequence(node.value[0], deep=True)  # type: ignore[index]
    return {key: value for key, value in pairs}


def _construct_ignored(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> None:
    return None


_ZooArgsLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", _construct_ordered_dict)
_ZooArgsLoader.add_multi_constructor("tag:yaml.org,2002:python/", _construct_ignored)


def _events_start_time(run_dir: Path) -> float:
    # Event file names are ``events.out.tfevents.<unix time>.<host>...``
    times = []
    for name in os.listdir(run_dir):
        if name.startswith(TB_EVENTS_PREFIX):
            try:
                times.append(float(name[len(TB_EVENTS_PREFIX) :].split(".")[0]))
            except ValueError:
                times.append((run_dir / name).stat().st_mtime)
    return min(times) if times else math.inf


def find_zoo_tensorboard_run(zoo_run_dir: str | os.PathLike) -> Path | None:
    """
    The TensorBoard run of an rl_zoo3 run folder (``LOG_FOLDER/ALGO/ENV_ID_N``).

    The zoo writes its TensorBoard events to ``TENSORBOARD_LOG/ENV_ID/ALGO_K`` (``--tensorboard-log``), with a ``K``
    that need not be ``N``: the run whose events start first after the zoo saved ``args.yml`` is taken.

    :param zoo_run_dir: The zoo run folder
    :return: The TensorBoard run folder, or None if the zoo run has none
    """
    zoo_run_dir = Path(zoo_run_dir).resolve()
    args_files = sorted(zoo_run_dir.glob("*/args.yml"))
    if not args_files:
        return None
    with open(args_files[0]) as file:
        # A SafeLoader subclass: it builds no arbitrary Python objects
        args = yaml.load(file, Loader=_ZooArgsLoader)
    if not isinstance(args, dict) or not args.get("tensorboard_log") or not args.get("env"):
        return None
    tensorboard_log = Path(args["tensorboard_log"])
    if not tensorboard_log.is_absolute():
        # Both folders are relative to the folder the zoo ran in: LOG_FOLDER/ALGO/ENV_ID_N -> that folder
        candidates = [tensorboard_log]
        log_folder = Path(str(args.get("log_folder", "logs")))
        if (
            not log_folder.is_absolute()
            and ".." not in log_folder.parts
            and len(zoo_run_dir.parents) > 1 + len(log_folder.parts)
        ):
            candidates.insert(0, zoo_run_dir.parents[1 + len(log_folder.parts)] / tensorboard_log)
        tensorboard_log = next((path for path in candidates if path.is_dir()), candidates[0])
    env_dir = tensorboard_log / str(args["env"])
    if not env_dir.is_dir():
        return None
    runs = [path for path in env_dir.iterdir() if path.is_dir() and _is_run_dir(path)]
    started = args_files[0].stat().st_mtime - 5.0
    after = [run for run in runs if _events_start_time(run) >= started]
    if not after:
        return None
    return min(after, key=_events_start_time)


def resolve_run(logdir: str | os.PathLike) -> Path:
    """
    The run folder to draw for ``logdir``: ``logdir`` itself when it holds logs, the TensorBoard run of an rl_zoo3
    run folder, or else the most recently written run folder below ``logdir``.

    :param logdir: A run folder, a folder of run folders, or an rl_zoo3 run folder
    :return: The run folder
    """
    logdir = Path(logdir)
    if not logdir.is_dir():
        raise NoLogsError(f"{logdir} is not a folder")
    if _is_run_dir(logdir):
        return logdir
    zoo_run = find_zoo_tensorboard_run(logdir)
    if zoo_run is not None:
        return zoo_run
    runs = find_runs(logdir)
    if not runs:
        hint = ""
        if any(logdir.glob("*.monitor.csv")):
            hint = (
                " It looks like an rl_zoo3 run without training logs: train with `--tensorboard-log DIR`"
                " (or give the model `tensorboard_log`) and point this command at that run."
            )
        raise NoLogsError(
            f"No TensorBoard event files ({TB_EVENTS_PREFIX}*) or SB3 CSV log ({CSV_NAME}) found in {logdir}.{hint}"
        )
    if len(runs) > 1:
        print(f"{len(runs)} runs found under {logdir}, drawing the most recent one: {runs[-1]}", file=sys.stderr)
    return runs[-1]


def _parse_csv_value(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    if text in ("True", "False"):
        return float(text == "True")
    try:
        return float(text)
    except ValueError:
        return None


def read_csv_log(path: str | os.PathLike) -> dict[str, Series]:
    """
    Read an SB3 CSV log (``progress.csv``). A key counts only at the rows where it was logged;
    a logged ``nan`` stays NaN. The x values are ``time/total_timesteps``.

    :param path: The ``progress.csv`` file
    :return: The logged series, by key
    """
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    steps = [_parse_csv_value(row.get("time/total_timesteps")) for row in rows]
    columns: dict[str, tuple[list[float], list[float]]] = {}
    for index, row in enumerate(rows):
        step = steps[index]
        x = float(index) if step is None else step
        for key, text in row.items():
            value = _parse_csv_value(text)
            if key is None or value is None:
                continue
            xs, ys = columns.setdefault(key, ([], []))
            xs.append(x)
            ys.append(value)
    return {key: Series(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)) for key, (xs, ys) in columns.items()}


def read_tensorboard_log(run_dir: str | os.PathLike) -> dict[str, Series]:
    """
    Read the scalars of the TensorBoard event files in ``run_dir`` (all of them, merged by step).

    :param run_dir: The run folder
    :return: The logged series, by key
    """
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as error:
        raise ImportError(
            f"Reading TensorBoard event files needs tensorboard: {PLOTS_EXTRA} (SB3 CSV logs are read without it)"
        ) from error
    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    scalars = {}
    for key in accumulator.Tags()["scalars"]:
        # One value per step: a later write of the same step replaces an earlier one
        by_step = {event.step: event.value for event in accumulator.Scalars(key)}
        steps = sorted(by_step)
        scalars[key] = Series(np.asarray(steps, dtype=float), np.asarray([by_step[s] for s in steps], dtype=float))
    return scalars


def read_run(run_dir: str | os.PathLike) -> dict[str, Series]:
    """
    Read the logged scalars of one run folder, from its ``progress.csv`` if it has one, else from its
    TensorBoard event files.

    :param run_dir: The run folder
    :return: The logged series, by key
    """
    run_dir = Path(run_dir)
    if (run_dir / CSV_NAME).is_file():
        return read_csv_log(run_dir / CSV_NAME)
    return read_tensorboard_log(run_dir)


# What the picture draws


def _events(scalars: dict[str, Series], key: str) -> Series:
    """Timesteps at which a 0/1 key was 1 (a ``Series`` with y = 1)."""
    if key not in scalars:
        return Series(np.empty(0), np.empty(0))
    x, y = scalars[key]
    mask = y > 0.5
    return Series(x[mask], np.ones(int(mask.sum())))


def kl_series(scalars: dict[str, Series]) -> Series:
    """
    KL per update as drawn: one point per logged update (``train/is_line_search_success``), the logged
    ``train/kl_divergence_loss`` where the line search succeeded and NaN where it failed (no step was taken,
    so there is no KL to draw: the curve has a gap there, never a 0).

    :param scalars: The logged series of a run
    :return: The KL series
    """
    kl = scalars.get("train/kl_divergence_loss")
    success = scalars.get("train/is_line_search_success")
    if success is None:
        return kl if kl is not None else Series(np.empty(0), np.empty(0))
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

    A name is missing when its key was not logged.

    :param logdir: See :func:`resolve_run`
    :return: The series
    """
    scalars = read_run(resolve_run(logdir))
    series: dict[str, Series] = {}
    for name, key in (
        ("episode_reward", "rollout/ep_rew_mean"),
        ("eval_reward", "eval/mean_reward"),
        ("target_kl", "train/target_kl"),
        ("success", "train/is_line_search_success"),
        ("success_rate", "train/line_search_success_rate"),
        ("step_fraction", "train/step_fraction"),
        ("step_fraction_mean", "train/step_fraction_mean"),
        ("ent_coef", "train/ent_coef"),
        ("cg_damping", "train/cg_damping"),
    ):
        if key in scalars:
            series[name] = scalars[key]
    if "train/kl_divergence_loss" in scalars or "train/is_line_search_success" in scalars:
        series["kl"] = kl_series(scalars)
    if "train/is_line_search_success" in scalars:
        x, y = scalars["train/is_line_search_success"]
        series["failed_updates"] = Series(x[y < 0.5], np.ones(int((y < 0.5).sum())))
    for name, key in (
        ("line_search_warning", "train/line_search_warning"),
        ("trust_region_shrink", "trust_region/shrink"),
        ("trust_region_recover", "trust_region/recover"),
    ):
        if key in scalars:
            series[name] = _events(scalars, key)
    if not series:
        raise NoLogsError(
            f"The logs in {logdir} have none of the keys this picture draws (rollout/ep_rew_mean, train/...): "
            "is it a TRPOPlus run?"
        )
    return series


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


def plot_diagnostics(
    logdir: str | os.PathLike, output: str | os.PathLike = "diagnostics.png", title: str | None = None
) -> Path:
    """
    Draw the diagnostics picture of a run to a PNG file: episode reward; KL per update with the failed updates
    marked and the target KL; line-search success rate; step fraction; ``ent_coef``; ``cg_damping``.

    :param logdir: See :func:`resolve_run`
    :param output: The PNG file to write
    :param title: Title of the picture (default: the run folder)
    :return: The path of the written file
    """
    figure_class = _import_matplotlib()
    run_dir = resolve_run(logdir)
    series = diagnostics_series(run_dir)
    failed = series.get("failed_updates", Series(np.empty(0), np.empty(0)))
    shrinks = series.get("trust_region_shrink", Series(np.empty(0), np.empty(0)))
    recoveries = series.get("trust_region_recover", Series(np.empty(0), np.empty(0)))

    figure = figure_class(figsize=(13, 10), layout="constrained")
    axes = figure.subplots(3, 2, sharex=True)
    figure.suptitle(title if title is not None else f"TRPOPlus diagnostics: {run_dir}")

    # Episode reward
    ax = axes[0, 0]
    ax.set_title("Episode reward")
    if "episode_reward" in series:
        ax.plot(*series["episode_reward"], color="tab:blue", label="rollout/ep_rew_mean")
    if "eval_reward" in series:
        ax.plot(*series["eval_reward"], "o-", color="tab:green", markersize=3, label="eval/mean_reward")
    if "episode_reward" in series or "eval_reward" in series:
        _legend_on_top(ax)
    else:
        _not_logged(ax, "rollout/ep_rew_mean")

    # KL per update, failures and target KL
    ax = axes[0, 1]
    ax.set_title("KL per update (gap + red x: failed line search, no step)")
    if "kl" in series:
        ax.plot(*series["kl"], ".-", color="tab:blue", markersize=3, linewidth=0.8, label="train/kl_divergence_loss")
    if "target_kl" in series:
        ax.plot(*series["target_kl"], color="black", drawstyle="steps-post", linewidth=1.2, label="train/target_kl")
    _mark(ax, failed.x, 0.03, marker="x", color="tab:red", markersize=6, label=f"failed update ({len(failed.x)})")
    _vlines(
        ax, shrinks.x, color="tab:red", linestyle=":", linewidth=0.8, alpha=0.7, label="trust region shrunk after this update"
    )
    _vlines(
        ax,
        recoveries.x,
        color="tab:green",
        linestyle=":",
        linewidth=0.8,
        alpha=0.7,
        label="trust region moved back after this update",
    )
    values = np.concatenate([series[name].y for name in ("kl", "target_kl") if name in series] or [np.empty(0)])
    finite = values[np.isfinite(values)]
    if len(finite) > 0 and np.all(finite > 0):
        # Log scale only when it hides nothing (a KL at float precision can come out <= 0)
        ax.set_yscale("log")
    if "kl" in series or "target_kl" in series:
        _legend_on_top(ax)
    else:
        _not_logged(ax, "train/kl_divergence_loss", "train/target_kl")

    # Line-search success rate
    ax = axes[1, 0]
    ax.set_title("Line-search success rate")
    if "success_rate" in series:
        ax.plot(*series["success_rate"], color="tab:blue", label="train/line_search_success_rate (rolling)")
    if "success" in series:
        ax.plot(*series["success"], ".", color="gray", markersize=2, alpha=0.5, label="train/is_line_search_success")
    if "line_search_warning" in series:
        warnings = series["line_search_warning"]
        ax.plot(
            warnings.x,
            np.full(len(warnings.x), 1.05),
            "v",
            color="tab:orange",
            markersize=5,
            label=f"train/line_search_warning ({len(warnings.x)})",
        )
    if "success_rate" in series or "success" in series:
        ax.set_ylim(-0.05, 1.05)
        ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
        _legend_on_top(ax)
    else:
        _not_logged(ax, "train/line_search_success_rate")

    # Step fraction
    ax = axes[1, 1]
    ax.set_title("Accepted step / full natural-gradient step")
    if "step_fraction" in series:
        # A failed update takes no step (fraction 0): drawn as a red x at 0 rather than as an accepted step
        x, y = series["step_fraction"]
        accepted = ~np.isin(x, failed.x)
        ax.plot(x[accepted], y[accepted], ".", color="tab:blue", markersize=3, label="train/step_fraction")
        ax.plot(x[~accepted], y[~accepted], "x", color="tab:red", markersize=6, label="failed update (no step)")
    if "step_fraction_mean" in series:
        ax.plot(*series["step_fraction_mean"], color="black", linewidth=1.2, label="train/step_fraction_mean (rolling)")
    if "step_fraction" in series or "step_fraction_mean" in series:
        ax.set_ylim(-0.05, 1.05)
        ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
        _legend_on_top(ax)
    else:
        _not_logged(ax, "train/step_fraction")

    # Entropy coefficient
    ax = axes[2, 0]
    ax.set_title("Entropy coefficient")
    if "ent_coef" in series:
        ax.plot(*series["ent_coef"], color="tab:purple", label="train/ent_coef")
        _legend_on_top(ax)
    else:
        _not_logged(ax, "train/ent_coef")

    # Conjugate-gradient damping
    ax = axes[2, 1]
    ax.set_title("Conjugate-gradient damping")
    if "cg_damping" in series:
        ax.plot(*series["cg_damping"], color="tab:brown", drawstyle="steps-post", label="train/cg_damping")
        _vlines(
            ax,
            shrinks.x,
            color="tab:red",
            linestyle=":",
            linewidth=0.8,
            alpha=0.7,
            label="trust region shrunk after this update",
        )
        _vlines(
            ax,
            recoveries.x,
            color="tab:green",
            linestyle=":",
            linewidth=0.8,
            alpha=0.7,
            label="trust region moved back after this update",
        )
        _legend_on_top(ax)
    else:
        _not_logged(ax, "train/cg_damping")

    for ax in axes[-1]:
        ax.set_xlabel("timesteps")
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)

    output = Path(output)
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
    parser.add_argument("-o", "--output", default="diagnostics.png", help="PNG file to write (default: diagnostics.png)")
    parser.add_argument("--title", default=None, help="title of the picture (default: the run folder)")
    args = parser.parse_args(argv)
    try:
        output = plot_diagnostics(args.logdir, args.output, title=args.title)
    except (NoLogsError, ImportError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(f"Wrote {output}")


if __name__ == "__main__":
    main()
