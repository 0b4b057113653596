"""
Finding and reading the logs of a run, for :mod:`sb3_trpo_plus.plot`.

A run folder holds TensorBoard event files (``tensorboard_log`` of the model) or an SB3 CSV log (``progress.csv``).
:func:`resolve_run` finds the one to draw (a run folder, the most recent one below a folder, or the TensorBoard run
of an rl_zoo3 run folder), :func:`read_run` reads its logged scalars as :class:`Series` by key.

Reading TensorBoard event files needs ``tensorboard`` (``pip install sb3-trpo-plus[plots]``); CSV logs are read
without it. Nothing here imports ``matplotlib``.
"""

import csv
import math
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import yaml

#: What to install to draw pictures and read TensorBoard event files
PLOTS_EXTRA = "pip install 'sb3-trpo-plus[plots]'"
#: How the names of TensorBoard event files start
TB_EVENTS_PREFIX = "events.out.tfevents."
#: The name of SB3's CSV log
CSV_NAME = "progress.csv"


class Series(NamedTuple):
    """Values of one logged key: ``x`` the timesteps at which they were logged, ``y`` the values."""

    x: np.ndarray
    y: np.ndarray


class NoLogsError(FileNotFoundError):
    """Raised when a folder holds no run logs that can be drawn."""


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
