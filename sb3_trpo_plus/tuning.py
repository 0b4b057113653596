"""
Tuning TRPOPlus at scale: one Optuna study shared by many ``rl_zoo3 -optimize`` workers, on one or several machines.

rl_zoo3 opens ``--storage`` itself. For ``--algo trpo_plus`` the zoo patch (:mod:`sb3_trpo_plus.zoo`) makes it open the
study with :func:`create_shared_study`, which adds what a study shared by workers needs:

- An RDB storage URL (``postgresql://...``, ``mysql://...``, ``sqlite:///...``) gets Optuna's heartbeat. Each running
  trial records a heartbeat every ``SB3_TRPO_PLUS_HEARTBEAT_INTERVAL`` seconds (default 60). A trial whose worker died
  (SIGKILL, lost machine) is marked FAIL by another worker once its last heartbeat is older than
  ``SB3_TRPO_PLUS_GRACE_PERIOD`` seconds (default: twice the interval), and enqueued again with the same parameters,
  at most ``SB3_TRPO_PLUS_MAX_RETRY`` times (default 1). A FAIL does not count towards ``--max-total-trials``, so the
  budget of the lost trial is given back to its retry. ``SB3_TRPO_PLUS_HEARTBEAT_INTERVAL=0`` turns this off.
- A worker checks for such trials when it opens the study and before each trial (Optuna), and, before it leaves, waits
  (at most the grace period plus one interval) for the trials still running elsewhere: it fails the stale ones and
  runs their retries, so no trial stays RUNNING because the workers still alive had finished their own.
- ``--max-total-trials M`` is exact: a trial starts only when fewer than ``M`` trials that came before it are not
  FAIL; otherwise it ends as FAIL with ``user_attrs["over_budget"]`` and its worker stops. (rl_zoo3 alone checks the
  total after each trial, so two workers ending a trial at the same moment could both start one more.)
- Each trial records the worker that ran it: ``user_attrs["worker"] = "<host>:<pid>"``.

A JournalStorage (``--storage study.log``, a file: one machine) gets the last two; it has no heartbeat.

``python -m sb3_trpo_plus.tuning summary`` prints a study's state; ``python -m sb3_trpo_plus.tuning export`` writes a
trial's hyperparameters (the best by default) as a zoo YAML entry. See ``docs/tuning.md``.
"""

import argparse
import os
import socket
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage, RDBStorage, RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from sb3_trpo_plus.hyperparameters import HYPERPARAMS_PATH, convert_trpo_plus_params

HEARTBEAT_INTERVAL_VARIABLE = "SB3_TRPO_PLUS_HEARTBEAT_INTERVAL"
GRACE_PERIOD_VARIABLE = "SB3_TRPO_PLUS_GRACE_PERIOD"
MAX_RETRY_VARIABLE = "SB3_TRPO_PLUS_MAX_RETRY"
DEFAULT_HEARTBEAT_INTERVAL = 60
DEFAULT_MAX_RETRY = 1
#: ``user_attrs`` key: the worker that ran the trial, ``"<host>:<pid>"``
WORKER_ATTR = "worker"
#: ``user_attrs`` key set on a trial refused because the study already had ``--max-total-trials`` trials
OVER_BUDGET_ATTR = "over_budget"
WORKER = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Heartbeat:
    """
    Heartbeat settings of an RDB storage.

    :param interval: seconds between two heartbeats of a running trial
    :param grace_period: a running trial whose last heartbeat is older than this (seconds) has lost its worker
    :param max_retry: how many times a trial that lost its worker is enqueued again
    """

    interval: int
    grace_period: int
    max_retry: int

    @classmethod
    def from_environment(cls) -> "Heartbeat | None":
        """The settings given by the ``SB3_TRPO_PLUS_*`` variables; ``None`` when the interval is 0."""
        interval = _environment_int(HEARTBEAT_INTERVAL_VARIABLE, DEFAULT_HEARTBEAT_INTERVAL)
        if interval == 0:
            return None
        grace_period = _environment_int(GRACE_PERIOD_VARIABLE, 2 * interval)
        if grace_period <= interval:
            raise ValueError(
                f"{GRACE_PERIOD_VARIABLE} ({grace_period}) must be greater than the heartbeat interval ({interval})"
            )
        return cls(interval, grace_period, _environment_int(MAX_RETRY_VARIABLE, DEFAULT_MAX_RETRY))


def _environment_int(name: str, default: int) -> int:
    text = os.environ.get(name, "")
    if text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {text!r}")
    return value


def rdb_storage(url: str, heartbeat: Heartbeat | None) -> RDBStorage:
    """
    Optuna's RDB storage for ``url``, with the heartbeat and the retry of trials that lost their worker.

    :param url: SQLAlchemy URL, e.g. ``postgresql://user@host:5432/optuna``
    :param heartbeat: heartbeat settings, or ``None`` for none
    :return: the storage
    """
    # A worker keeps its connection for a whole trial: check it before use (server restarts, idle timeouts)
    engine_kwargs = {"pool_pre_ping": True}
    if heartbeat is None:
        return RDBStorage(url, engine_kwargs=engine_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        return RDBStorage(
            url,
            engine_kwargs=engine_kwargs,
            heartbeat_interval=heartbeat.interval,
            grace_period=heartbeat.grace_period,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=heartbeat.max_retry),
        )


class BudgetExhausted(Exception):
    """Raised at the start of a trial that would go beyond ``--max-total-trials``."""


class SharedStudy(optuna.Study):
    """
    An Optuna study run by several workers at once (see the module docstring); ``optimize`` is Optuna's, plus the
    exact trial budget, the worker tag, and the wait for trials that lost their worker.

    :param study_name: name of the study in ``storage``
    :param storage: the storage
    :param sampler: the sampler
    :param pruner: the pruner
    :param max_total_trials: the most trials (not FAIL) the study may have; ``None``: no limit
    :param heartbeat: the storage's heartbeat settings, ``None`` if it has none
    """

    def __init__(
        self,
        study_name: str,
        storage: str | BaseStorage,
        sampler: optuna.samplers.BaseSampler | None = None,
        pruner: optuna.pruners.BasePruner | None = None,
        max_total_trials: int | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> None:
        super().__init__(study_name, storage, sampler, pruner)
        self.max_total_trials = max_total_trials
        self.heartbeat = heartbeat

    def optimize(
        self,
        func: Callable[[optuna.Trial], float | Sequence[float]],
        n_trials: int | None = None,
        timeout: float | None = None,
        n_jobs: int = 1,
        catch: Iterable[type[Exception]] | type[Exception] = (),
        callbacks: Iterable[Callable[[optuna.Study, FrozenTrial], None]] | None = None,
        gc_after_trial: bool = False,
        show_progress_bar: bool = False,
    ) -> None:
        """Optuna's ``optimize``, then (with a heartbeat) the wait for trials running elsewhere; see the module docstring."""
        catch = (*(catch if isinstance(catch, Iterable) else (catch,)), BudgetExhausted)
        callbacks = list(callbacks or [])

        def objective(trial: optuna.Trial) -> float | Sequence[float]:
            return self._run_trial(func, trial)

        super().optimize(objective, n_trials, timeout, n_jobs, catch, callbacks, gc_after_trial, show_progress_bar)
        if self.heartbeat is not None:
            self._finish_trials_of_lost_workers(objective, catch, callbacks)

    def _run_trial(
        self, func: Callable[[optuna.Trial], float | Sequence[float]], trial: optuna.Trial
    ) -> float | Sequence[float]:
        trial.set_user_attr(WORKER_ATTR, WORKER)
        if self.max_total_trials is not None:
            # Trial numbers follow creation: only the trials created before this one, and not failed, use the budget
            earlier = self.get_trials(
                deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
            )
            if sum(other.number < trial.number for other in earlier) >= self.max_total_trials:
                trial.set_user_attr(OVER_BUDGET_ATTR, True)
                self.stop()
                raise BudgetExhausted(f"the study already has {self.max_total_trials} trials (--max-total-trials)")
        return func(trial)

    def _finish_trials_of_lost_workers(
        self,
        objective: Callable[[optuna.Trial], float | Sequence[float]],
        catch: tuple[type[Exception], ...],
        callbacks: list[Callable[[optuna.Study, FrozenTrial], None]],
    ) -> None:
        """
        Wait for the trials that other workers are running now, until each has ended or may have lost its worker
        (grace period, plus one interval): fail those whose heartbeat stopped, and run the retries enqueued for them.
        """
        assert self.heartbeat is not None
        deadline = time.monotonic() + self.heartbeat.grace_period + self.heartbeat.interval
        pending = {trial.number for trial in self.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
        while True:
            # The deadline is read before the last check, so that check comes after it: a trial whose worker died
            # before this wait began is stale by then (the storage's clock may count whole seconds only)
            expired = time.monotonic() > deadline
            fail_trials_of_lost_workers(self)
            if self.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
                # A retry, or a trial enqueued by hand: run it (the budget check refuses it if the study is full)
                super().optimize(objective, n_trials=1, catch=catch, callbacks=callbacks, gc_after_trial=True)
                continue
            pending &= {trial.number for trial in self.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
            if not pending or expired:
                return
            time.sleep(self.heartbeat.interval)


def fail_trials_of_lost_workers(study: optuna.Study) -> None:
    """Optuna's ``fail_stale_trials``: FAIL for the running trials whose heartbeat is too old, then their retry."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        fail_stale_trials(study)


def create_shared_study(
    *, storage: str | BaseStorage | None, max_total_trials: int | None = None, **create_study_kwargs: Any
) -> optuna.Study:
    """
    ``optuna.create_study`` for workers sharing a study (what rl_zoo3 calls for ``--algo trpo_plus``).

    :param storage: an RDB URL (it gets the heartbeat of :meth:`Heartbeat.from_environment`), a storage object
        (a JournalStorage: used as it is), or ``None`` (in memory: Optuna's own study)
    :param max_total_trials: ``--max-total-trials``
    :param create_study_kwargs: the other arguments of ``optuna.create_study``
    :return: a :class:`SharedStudy` (a plain ``optuna.Study`` in memory)
    """
    if storage is None:
        return optuna.create_study(storage=None, **create_study_kwargs)
    heartbeat = None
    if isinstance(storage, str):
        heartbeat = Heartbeat.from_environment()
        storage = rdb_storage(storage, heartbeat)
    study = optuna.create_study(storage=storage, **create_study_kwargs)
    shared = SharedStudy(study.study_name, storage, study.sampler, study.pruner, max_total_trials, heartbeat)
    if heartbeat is not None:
        # A worker that starts after every other one died finds their trials RUNNING: fail them now, before rl_zoo3
        # counts them against --max-total-trials
        fail_trials_of_lost_workers(shared)
    return shared


# --- watching a study, exporting a trial ---------------------------------------------------------------------


def load_study(storage: str, study_name: str) -> optuna.Study:
    """Load a study the way rl_zoo3 names storages: a path ending in ``.log`` is a JournalStorage file, else a URL."""
    if storage.endswith(".log"):
        from optuna.storages.journal import JournalFileBackend

        journal = optuna.storages.JournalStorage(JournalFileBackend(storage))
        return optuna.load_study(study_name=study_name, storage=journal)
    return optuna.load_study(study_name=study_name, storage=storage)


def summary(study: optuna.Study) -> dict[str, Any]:
    """
    A study's state: trials per state, the retries of trials that lost their worker, the workers, the best trial.

    :param study: the study
    :return: a dictionary that YAML prints readably
    """
    trials = study.get_trials(deepcopy=False)
    retries = {
        trial.number: {"retry_of": trial.system_attrs["failed_trial"], "state": trial.state.name}
        for trial in trials
        if "failed_trial" in trial.system_attrs
    }
    result: dict[str, Any] = {
        "study": study.study_name,
        "trials": len(trials),
        "states": dict(sorted(Counter(trial.state.name for trial in trials).items())),
        "retries": retries,
        "workers": dict(sorted(Counter(str(trial.user_attrs.get(WORKER_ATTR)) for trial in trials).items())),
    }
    finished = [trial for trial in trials if trial.datetime_start is not None and trial.datetime_complete is not None]
    if finished:
        start = min(trial.datetime_start for trial in finished if trial.datetime_start is not None)
        end = max(trial.datetime_complete for trial in finished if trial.datetime_complete is not None)
        result["wall_time_s"] = round((end - start).total_seconds(), 1)
    if any(trial.state == TrialState.COMPLETE for trial in trials):
        best = study.best_trial
        result["best"] = {"number": best.number, "value": best.value, "params": best.params}
    return result


def _zoo_string(value: Any) -> str:
    """A ``policy_kwargs`` value as rl_zoo3 writes it in YAML: ``dict(net_arch=dict(pi=[64]), activation_fn=nn.Tanh)``."""
    if isinstance(value, dict):
        return "dict(" + ", ".join(f"{key}={_zoo_string(item)}" for key, item in value.items()) + ")"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_zoo_string(item) for item in value) + "]"
    if isinstance(value, type):
        return f"nn.{value.__name__}" if value.__module__.startswith("torch.nn") else f"{value.__module__}.{value.__name__}"
    return repr(value)


def export_trial(study: optuna.Study, env_id: str, base_entry: dict[str, Any], trial_number: int | None = None) -> str:
    """
    A trial's hyperparameters as a zoo YAML entry: ``base_entry`` (the env's entry of the file the study ran with)
    updated with the trial's converted parameters, as rl_zoo3 does for a trial (``policy_kwargs`` replaced).
    Train from it with ``python -m rl_zoo3.train --algo trpo_plus --env <env_id> -conf <file>``.

    :param study: the study
    :param env_id: the entry's key
    :param base_entry: the hyperparameters the study started from
    :param trial_number: the trial; ``None``: the best trial
    :return: the YAML text, with a comment naming the study and the trial
    """
    if trial_number is None:
        trial = study.best_trial
    else:
        found = [trial for trial in study.get_trials(deepcopy=False) if trial.number == trial_number]
        if not found or not found[0].params:
            raise ValueError(f"study {study.study_name!r} has no trial {trial_number} with parameters")
        trial = found[0]
    entry = {**base_entry, **convert_trpo_plus_params(trial.params)}
    entry["policy_kwargs"] = _zoo_string(entry["policy_kwargs"])
    header = f"# Optuna study {study.study_name!r}, trial {trial.number} ({trial.state.name}, value {trial.value})\n"
    return header + yaml.safe_dump({env_id: entry}, sort_keys=True)


def _base_entry(config: Path, env_id: str) -> dict[str, Any]:
    """The env's entry in a zoo YAML file, found as rl_zoo3 finds it (the env id, ``atari``, then ``default``)."""
    entries = yaml.safe_load(config.read_text())
    if env_id in entries:
        return dict(entries[env_id])
    if "atari" in entries and ("NoFrameskip" in env_id or env_id.startswith("ALE/")):
        return dict(entries["atari"])
    if "default" in entries:
        return dict(entries["default"])
    raise ValueError(f"no entry for {env_id} in {config}")


def main(argv: list[str] | None = None) -> None:
    """``python -m sb3_trpo_plus.tuning {summary,export} --storage ... --study-name ...``"""
    parser = argparse.ArgumentParser(prog="python -m sb3_trpo_plus.tuning", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("summary", "print the study's state"), ("export", "print a trial as a zoo YAML entry")):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--storage", required=True, help="as given to rl_zoo3: an RDB URL or a .log journal file")
        command.add_argument("--study-name", required=True)
        if name == "export":
            command.add_argument("--env", required=True, help="the entry's env id")
            command.add_argument("--trial-id", type=int, default=None, help="trial number (default: the best trial)")
            command.add_argument("-conf", "--conf-file", type=Path, default=HYPERPARAMS_PATH, help="the study's YAML file")
            command.add_argument("-o", "--output", type=Path, default=None, help="write to this file (default: stdout)")
    args = parser.parse_args(argv)
    study = load_study(args.storage, args.study_name)
    if args.command == "summary":
        text = yaml.safe_dump(summary(study), sort_keys=False)
    else:
        text = export_trial(study, args.env, _base_entry(args.conf_file, args.env), args.trial_id)
    if getattr(args, "output", None) is not None:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
