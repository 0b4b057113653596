"""
Learning benchmark: TRPOPlus, sb3-contrib TRPO and PPO with their zoo hyperparameters, several seeds per env,
evaluated on a separate environment during training.

Hyperparameters: ``hyperparams/trpo_plus.yml`` for TRPOPlus, rl_zoo3's own ``trpo.yml`` and ``ppo.yml`` for the
others (``benchmarks/hyperparams.yml`` for MinAtar, which the zoo does not list), read with the zoo's rules and
turned into an environment and a model by rl_zoo3's ``ExperimentManager`` (schedules, ``normalize``, wrappers,
``policy_kwargs``, YAML callbacks), exactly as ``python -m rl_zoo3.train`` would.

Budget: by default every algorithm gets the same number of steps on an env (``--budget-source common``): the
``n_timesteps`` of sb3-contrib TRPO's zoo entry (2M steps for MinAtar); ``--budget-source own`` gives each
algorithm its own YAML budget. ``--budget-scale`` multiplies either.

Evaluation: every ``--eval-freq`` steps (default: 1/20 of the budget) and at the end, ``--eval-episodes`` episodes
on ``--n-eval-envs`` separate environments (seeded apart from the training ones; ``VecNormalize`` statistics
copied from training, reward normalization off), deterministic actions except on Atari (the zoo's rule).

Results: one JSON per ``(algo, env, seed)`` in ``benchmarks/results/learning/<algo>/<env>/seed<k>.json`` with the
evaluation curve (and with ``--diagnostics-every`` the ``train/*`` values the algorithm logged, binned), written when
the run finishes. A finished key is skipped, so an interrupted sweep is resumed by running the same command again;
runs longer than ``--checkpoint-freq`` steps also save checkpoints (model and ``VecNormalize`` statistics, in
``benchmarks/results/tmp/``) and continue from the latest one. With several keys, the runs are started as ``--jobs``
subprocesses with ``--threads`` torch threads each.

LunarLander-v3 needs ``pip install "gymnasium[box2d]"``, MinAtar ``pip install minatar``, the MuJoCo tasks
(``Hopper-v5``, ...; ``benchmarks/mujoco_campaign.sh``) ``pip install sb3-trpo-plus[mujoco]``.

Usage::

    # the sweep (resumable; run it again to continue)
    python -m benchmarks.learning --algos trpo_plus trpo ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 \\
        --seeds 0 1 2 3 4 --jobs 2 --threads 1
    # one run
    python -m benchmarks.learning --algos trpo_plus --envs CartPole-v1 --seeds 0
    # a tuning variant: the entry with overrides, on tuning seeds, in a results folder of its own
    python -m benchmarks.learning --algos trpo_plus --envs MinAtar/SpaceInvaders-v1 --seeds 100 101 \
        --params target_kl:0.02 --results-dir benchmarks/results/minatar_tuning/target_kl_0.02
"""

import argparse
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from benchmarks._common import (
    ALGO_LABELS,
    RESULTS_DIR,
    command_line,
    common_budget,
    env_dirname,
    git_commit,
    load_hyperparams,
    machine_info,
    parse_params,
    set_threads,
    to_jsonable,
    write_json,
    zoo_env_and_model,
)

DEFAULT_ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "Pendulum-v1", "MinAtar/Breakout-v1"]
#: Evaluation environments are seeded with ``seed + EVAL_SEED_OFFSET`` (never the training envs' seeds)
EVAL_SEED_OFFSET = 10_000
CHECKPOINT_PREFIX = "rl_model"


def result_path(results_dir: Path, algo: str, env_id: str, seed: int) -> Path:
    return results_dir / "learning" / algo / env_dirname(env_id) / f"seed{seed}.json"


def work_dir(results_dir: Path, algo: str, env_id: str, seed: int) -> Path:
    """Logs, checkpoints and the partial curve of a run (under ``results/tmp/``, not committed)."""
    return results_dir / "tmp" / "learning" / algo / env_dirname(env_id) / f"seed{seed}"


def run_budget(algo: str, env_id: str, source: str, scale: float, n_timesteps: int | None) -> int:
    if n_timesteps is not None:
        return n_timesteps
    if source == "common":
        budget = common_budget(env_id)
    else:
        hyperparams, _ = load_hyperparams(algo, env_id)
        budget = int(float(hyperparams["n_timesteps"]))
    return max(1, round(budget * scale))


# --- evaluation and checkpoints --------------------------------------------------------------------------------


def _curve_callback_class() -> type:
    from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import sync_envs_normalization

    @dataclass(eq=False)
    class CurveCallback(BaseCallback):
        """
        Evaluate every ``eval_freq`` steps (and at step 0) on ``eval_env``; write the curve to ``curve_path`` after
        each evaluation, so that a resumed run keeps the points up to its checkpoint.
        """

        eval_env: Any
        eval_freq: int
        n_episodes: int
        deterministic: bool
        curve: dict[str, list]
        curve_path: Path

        def __post_init__(self) -> None:
            super().__init__()

        def evaluate(self) -> None:
            start = time.perf_counter()
            sync_envs_normalization(self.training_env, self.eval_env)
            returns, lengths = evaluate_policy(
                self.model,
                self.eval_env,
                n_eval_episodes=self.n_episodes,
                deterministic=self.deterministic,
                return_episode_rewards=True,
            )
            episodes = list(self.model.ep_info_buffer)
            self.curve["timesteps"].append(int(self.model.num_timesteps))
            self.curve["mean"].append(float(np.mean(returns)))
            self.curve["std"].append(float(np.std(returns)))
            self.curve["returns"].append([float(r) for r in returns])
            self.curve["lengths"].append([int(n) for n in lengths])
            self.curve["train_ep_rew_mean"].append(float(np.mean([e["r"] for e in episodes])) if episodes else None)
            self.curve["eval_s"] = self.curve.get("eval_s", 0.0) + time.perf_counter() - start
            write_json(self.curve_path, self.curve)

        def due(self) -> bool:
            if self.eval_freq <= 0:
                return False
            last = self.curve["timesteps"][-1] if self.curve["timesteps"] else -1
            return self.num_timesteps // self.eval_freq > last // self.eval_freq if last >= 0 else True

        def _on_training_start(self) -> None:
            if self.due():
                self.evaluate()

        def _on_step(self) -> bool:
            if self.due():
                self.evaluate()
            return True

    class ResumableCheckpoint(CheckpointCallback):
        """
        SB3's checkpoints (model and ``VecNormalize`` statistics), keeping only the latest one. Each file is written
        under a temporary name and renamed, the statistics before the model: a run killed while saving leaves the
        previous checkpoint whole, never a truncated one that ``--resume`` would take.
        """

        def _on_step(self) -> bool:
            if self.n_calls % self.save_freq == 0:
                directory = Path(self.save_path)
                directory.mkdir(parents=True, exist_ok=True)
                previous = sorted(directory.glob(f"{self.name_prefix}*"))
                current = []
                vec_normalize = self.model.get_vec_normalize_env()
                if self.save_vecnormalize and vec_normalize is not None:
                    current.append(self._save_whole(self._checkpoint_path("vecnormalize_", "pkl"), vec_normalize.save))
                current.append(self._save_whole(self._checkpoint_path(extension="zip"), self.model.save))
                for path in previous:
                    if path not in current:
                        path.unlink(missing_ok=True)
            return True

        @staticmethod
        def _save_whole(path: str, save: Callable[[str], None]) -> Path:
            partial = Path(path + ".partial")
            save(str(partial))
            partial.replace(path)
            return Path(path)

    return CurveCallback, ResumableCheckpoint


def latest_checkpoint(checkpoint_dir: Path) -> tuple[Path, Path | None, int] | None:
    """The newest ``rl_model_<steps>_steps.zip`` in ``checkpoint_dir``, its ``VecNormalize`` file and its step."""
    found = []
    for path in checkpoint_dir.glob(f"{CHECKPOINT_PREFIX}_*_steps.zip"):
        match = re.fullmatch(rf"{CHECKPOINT_PREFIX}_(\d+)_steps\.zip", path.name)
        if match:
            found.append((int(match.group(1)), path))
    if not found:
        return None
    steps, path = max(found)
    vec_normalize = checkpoint_dir / f"{CHECKPOINT_PREFIX}_vecnormalize_{steps}_steps.pkl"
    return path, vec_normalize if vec_normalize.is_file() else None, steps


def train_run(
    algo: str,
    env_id: str,
    seed: int,
    n_timesteps: int,
    run_dir: Path,
    *,
    hyperparams: dict[str, Any] | None = None,
    device: str = "cpu",
    eval_freq: int = 0,
    eval_episodes: int = 10,
    n_eval_envs: int = 5,
    checkpoint_freq: int = 0,
    tensorboard: bool = False,
    log_args: argparse.Namespace | None = None,
    final_episodes: int | None = None,
    diagnostics_every: int = 0,
    vec_env_type: str = "dummy",
) -> dict[str, Any]:
    """
    Train ``algo`` on ``env_id`` for ``n_timesteps`` (continuing from the latest checkpoint in ``run_dir`` if
    any), evaluating every ``eval_freq`` steps and at the end; return the run's record (curve, final evaluation).

    :param final_episodes: episodes of the evaluation at the end of training (default: ``eval_episodes``); when it
        differs, the final evaluation is always run and replaces a periodic one made at the same step
    :param vec_env_type: ``dummy`` (the environments in this process) or ``subproc`` (one process each)
    :param diagnostics_every: when positive, the record's ``diagnostics`` holds every ``train/*`` value the
        algorithm logged, averaged over bins of this many steps (:class:`DiagnosticsCallback`)
    """
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import unwrap_vec_normalize

    if hyperparams is None:
        hyperparams, hyperparams_source = load_hyperparams(algo, env_id)
    else:
        hyperparams_source = "given"
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_dir = run_dir / "checkpoints"
    curve_path = run_dir / "curve.json"
    set_random_seed(seed)
    # ExperimentManager.setup_experiment(), with the model loaded from a checkpoint when there is one
    checkpoint = latest_checkpoint(checkpoint_dir)
    env, model, exp = zoo_env_and_model(
        algo,
        env_id,
        hyperparams,
        seed=seed,
        log_folder=run_dir / "zoo",
        n_timesteps=n_timesteps,
        device=device,
        tensorboard_log=str(run_dir / "tensorboard") if tensorboard else "",
        args=log_args,
        load_path=checkpoint[0] if checkpoint is not None else None,
        vec_env_type=vec_env_type,
    )
    saved_hyperparams = exp.saved_hyperparams
    resumed_from = None
    curve: dict[str, Any] = {key: [] for key in ("timesteps", "mean", "std", "returns", "lengths", "train_ep_rew_mean")}
    if checkpoint is not None:
        model_path, vec_normalize_path, _ = checkpoint
        vec_normalize = unwrap_vec_normalize(env)
        if vec_normalize is not None and vec_normalize_path is not None:
            with open(vec_normalize_path, "rb") as file:
                saved = pickle.load(file)
            # The running statistics (an unpickled VecNormalize has no venv: read its __dict__ only)
            for key in ("obs_rms", "ret_rms"):
                if key in vars(saved):
                    setattr(vec_normalize, key, vars(saved)[key])
        resumed_from = int(model.num_timesteps)
        if curve_path.is_file():
            previous = json.loads(curve_path.read_text())
            keep = [i for i, t in enumerate(previous["timesteps"]) if t <= resumed_from]
            for key in curve:
                curve[key] = [previous[key][i] for i in keep]
            curve["eval_s"] = previous.get("eval_s", 0.0)
        print(f"resuming {algo} {env_id} seed {seed} from {model_path.name} ({resumed_from} steps)", flush=True)
    exp._save_config(saved_hyperparams)
    segments_path = run_dir / "segments.json"
    segments = start_segment(segments_path, resumed_from, model.device)

    eval_env = exp.create_envs(n_eval_envs, eval_env=True)
    eval_env.seed(seed + EVAL_SEED_OFFSET)
    CurveCallback, ResumableCheckpoint = _curve_callback_class()
    curve_callback = CurveCallback(eval_env, eval_freq, eval_episodes, exp.deterministic_eval, curve, curve_path)
    callbacks = [*exp.callbacks, curve_callback]
    diagnostics_path = run_dir / "diagnostics.json"
    if diagnostics_every > 0:
        rows = json.loads(diagnostics_path.read_text()) if diagnostics_path.is_file() and resumed_from else []
        diagnostics_callback = DiagnosticsCallback(
            diagnostics_path, [r for r in rows if r["timesteps"] <= (resumed_from or 0)]
        )
        callbacks.append(diagnostics_callback)
    if checkpoint_freq > 0:
        save_freq = max(checkpoint_freq // exp.n_envs, 1)
        callbacks.append(
            ResumableCheckpoint(save_freq, str(checkpoint_dir), name_prefix=CHECKPOINT_PREFIX, save_vecnormalize=True)
        )
    start = time.perf_counter()
    remaining = n_timesteps - int(model.num_timesteps)
    if remaining > 0:
        model.learn(remaining, callback=callbacks, reset_num_timesteps=resumed_from is None, tb_log_name=algo)
    else:  # a run stopped during its final evaluation: only that evaluation is left
        curve_callback.init_callback(model)
    wall = time.perf_counter() - start
    # Final evaluation at the end of training (unless the last periodic one was there, with as many episodes)
    if final_episodes is not None and final_episodes != eval_episodes:
        if curve["timesteps"] and curve["timesteps"][-1] == model.num_timesteps:
            for key in ("timesteps", "mean", "std", "returns", "lengths", "train_ep_rew_mean"):
                curve[key].pop()
        curve_callback.n_episodes = final_episodes
        curve_callback.evaluate()
    elif not curve["timesteps"] or curve["timesteps"][-1] != model.num_timesteps:
        curve_callback.evaluate()
    segments[-1]["steps"][1] = int(model.num_timesteps)
    write_json(segments_path, segments)
    model.save(run_dir / "final_model.zip")
    if exp.normalize:
        vec_normalize = model.get_vec_normalize_env()
        if vec_normalize is not None:
            vec_normalize.save(str(run_dir / "final_vecnormalize.pkl"))
    env.close()
    eval_env.close()
    record = {
        "algo": algo,
        "algo_label": ALGO_LABELS.get(algo, algo),
        "env_id": env_id,
        "seed": seed,
        "n_timesteps": n_timesteps,
        "num_timesteps_done": int(model.num_timesteps),
        "hyperparams_source": hyperparams_source,
        "hyperparams": to_jsonable(dict(saved_hyperparams)),
        "evaluation": {
            "freq": eval_freq,
            "episodes": eval_episodes,
            "n_envs": n_eval_envs,
            "seed": seed + EVAL_SEED_OFFSET,
            "deterministic": bool(exp.deterministic_eval),
            "final_episodes": final_episodes if final_episodes is not None else eval_episodes,
        },
        "curve": curve,
        "final": {
            "timesteps": curve["timesteps"][-1],
            "mean": curve["mean"][-1],
            "std": curve["std"][-1],
            "returns": curve["returns"][-1],
        },
        "resumed_from": resumed_from,
        "segments": segments,
        "wall_s_this_session": wall,
        "eval_s": curve.get("eval_s", 0.0),
        "run_dir": str(run_dir),
        "device": device,
    }
    if algo == "trpo_plus" and getattr(model, "last_update", None) is not None:
        record["last_update"] = to_jsonable(vars(model.last_update))
    if diagnostics_every > 0:
        diagnostics_callback.save()
        record["diagnostics"] = bin_diagnostics(diagnostics_callback.rows, diagnostics_every)
    return record


def start_segment(path: Path, resumed_from: int | None, device: Any) -> list[dict[str, Any]]:
    """
    The parts of a run that separate commands made, each ``{"steps": [start, end], "where", "commit"}``, kept in
    ``path`` across resumes: the part starting now is appended (its end is set when it finishes) and the one before
    ends where this one resumes (steps after its last checkpoint were lost).
    """
    start = resumed_from or 0
    previous = json.loads(path.read_text()) if resumed_from and path.is_file() else []
    segments = [segment for segment in previous if segment["steps"][0] < start]
    if segments:
        segments[-1]["steps"][1] = start
    machine = machine_info()
    gpu = f" ({machine['cuda']})" if device.type == "cuda" else ""
    where = f"{machine['cpu_model']}, {machine['cpu_count']} cores, {device.type}{gpu}"
    segments.append({"steps": [start, None], "where": where, "commit": git_commit()})
    write_json(path, segments)
    return segments


# --- diagnostics -----------------------------------------------------------------------------------------------


class DiagnosticsCallback(BaseCallback):
    """
    Keeps every ``train/*`` value the algorithm logged after each update (read from the logger when the next
    rollout starts, and at the end of training), one row per update, saved to ``path`` every 10 updates so that a
    resumed run keeps the rows up to its checkpoint.
    """

    def __init__(self, path: Path, rows: list[dict[str, Any]]) -> None:
        super().__init__()
        self.path, self.rows, self._seen = path, rows, None

    def _read(self) -> None:
        values = {
            key: float(value)
            for key, value in self.logger.name_to_value.items()
            if key.startswith("train/") and isinstance(value, (int, float, np.floating, np.integer))
        }
        n_updates = values.get("train/n_updates", getattr(self.model, "_n_updates", None))
        if values and n_updates != self._seen:
            self._seen = n_updates
            self.rows.append({"timesteps": int(self.num_timesteps), **values})
            if len(self.rows) % 10 == 0:
                self.save()

    def save(self) -> None:
        write_json(self.path, self.rows)

    def _on_rollout_start(self) -> None:
        self._read()

    def _on_training_end(self) -> None:
        self._read()

    def _on_step(self) -> bool:
        return True


def bin_diagnostics(rows: list[dict[str, Any]], every: int) -> dict[str, Any]:
    """
    Per-update rows averaged over bins of ``every`` steps: ``{"bin_end": [...], "n_updates": [...], key: [...]}``,
    a bin's value the mean of its finite values (``None`` when it has none), plus ``key + ":non_finite"``, the
    share of NaN values (a failed line search logs its KL as NaN), for keys that had any.
    """
    keys = sorted({key for row in rows for key in row if key != "timesteps"})
    bins: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        bins.setdefault(-(-row["timesteps"] // every) * every, []).append(row)
    out: dict[str, Any] = {"every": every, "bin_end": sorted(bins), "n_updates": [len(bins[b]) for b in sorted(bins)]}
    for key in keys:
        means, non_finite = [], []
        for end in sorted(bins):
            values = np.array([row[key] for row in bins[end] if key in row], dtype=float)
            finite = values[np.isfinite(values)]
            means.append(float(finite.mean()) if finite.size else None)
            non_finite.append(float(1 - finite.size / values.size) if values.size else 0.0)
        out[key] = means
        if any(non_finite):
            out[key + ":non_finite"] = non_finite
    return out


# --- the sweep -------------------------------------------------------------------------------------------------


def is_finished(path: Path, n_timesteps: int) -> bool:
    """A result exists for this key; one with another budget is kept (and reported as such), not overwritten."""
    if not path.is_file():
        return False
    try:
        done = json.loads(path.read_text())
    except json.JSONDecodeError:
        return False
    if done.get("n_timesteps") != n_timesteps:
        print(f"note: {path} holds a run of {done.get('n_timesteps')} steps, not {n_timesteps}: kept (--force to redo)")
    return True


def run_one(args: argparse.Namespace, algo: str, env_id: str, seed: int) -> None:
    results_dir = Path(args.results_dir)
    n_timesteps = run_budget(algo, env_id, args.budget_source, args.budget_scale, args.n_timesteps)
    out = result_path(results_dir, algo, env_id, seed)
    if not args.force and is_finished(out, n_timesteps):
        print(f"done already: {out}")
        return
    set_threads(args.threads)
    eval_freq = args.eval_freq if args.eval_freq is not None else max(n_timesteps // 20, 1)
    run_dir = work_dir(results_dir, algo, env_id, seed)
    if args.force and run_dir.exists():
        shutil.rmtree(run_dir)
    record = recorded_run(
        args,
        algo,
        env_id,
        seed,
        n_timesteps,
        run_dir,
        eval_freq=eval_freq,
        checkpoint_freq=args.checkpoint_freq if n_timesteps > args.checkpoint_freq > 0 else 0,
        diagnostics_every=args.diagnostics_every,
    )
    record.update(
        budget_source="given" if args.n_timesteps is not None else args.budget_source, budget_scale=args.budget_scale
    )
    write_json(out, record)
    # The run is complete: its checkpoints are no longer needed (the final model stays in the work folder)
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    print(f"{algo} {env_id} seed {seed}: final {record['final']['mean']:.1f} +/- {record['final']['std']:.1f} -> {out}")


def recorded_run(
    args: argparse.Namespace, algo: str, env_id: str, seed: int, n_timesteps: int, run_dir: Path, **options: Any
) -> dict[str, Any]:
    """
    :func:`train_run` with the YAML entry and the command line's ``--params`` overrides on top, its evaluation and
    device options from the command line, and the record stamped with when, how and where it ran.

    :param options: further keyword arguments of :func:`train_run` (``eval_freq``, ``checkpoint_freq``, ...)
    """
    hyperparams, source = load_hyperparams(algo, env_id)
    hyperparams.update(parse_params(args.params))
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    record = train_run(
        algo,
        env_id,
        seed,
        n_timesteps,
        run_dir,
        hyperparams=hyperparams,
        device=args.device,
        eval_episodes=args.eval_episodes,
        n_eval_envs=args.n_eval_envs,
        log_args=args,
        **options,
    )
    record.update(
        hyperparams_source=source + (f" with {' '.join(args.params)}" if args.params else ""),
        started=started,
        finished=time.strftime("%Y-%m-%d %H:%M:%S"),
        command=command_line(),
        # the commit of the command that finished the run and wrote this record; the commit of each part of the run
        # (a resumed run has several): ``segments``
        finished_at_commit=git_commit(),
        machine=machine_info(),
    )
    return record


def child_command(args: argparse.Namespace, algo: str, env_id: str, seed: int) -> list[str]:
    command = [sys.executable, "-m", "benchmarks.learning", "--algos", algo, "--envs", env_id, "--seeds", str(seed)]
    command += ["--jobs", "1", "--threads", str(args.threads), "--device", args.device]
    command += ["--budget-source", args.budget_source, "--budget-scale", str(args.budget_scale)]
    command += ["--eval-episodes", str(args.eval_episodes), "--n-eval-envs", str(args.n_eval_envs)]
    command += ["--checkpoint-freq", str(args.checkpoint_freq), "--results-dir", str(args.results_dir)]
    if args.n_timesteps is not None:
        command += ["--n-timesteps", str(args.n_timesteps)]
    if args.eval_freq is not None:
        command += ["--eval-freq", str(args.eval_freq)]
    if args.diagnostics_every:
        command += ["--diagnostics-every", str(args.diagnostics_every)]
    if args.params:
        command += ["--params", *args.params]
    if args.force:
        command.append("--force")
    return command


def sweep(args: argparse.Namespace, keys: list[tuple[str, str, int]]) -> int:
    """Run the keys not done yet as subprocesses, ``--jobs`` at a time; return the number of failed runs."""
    results_dir = Path(args.results_dir)
    todo = []
    for algo, env_id, seed in keys:
        n_timesteps = run_budget(algo, env_id, args.budget_source, args.budget_scale, args.n_timesteps)
        if args.force or not is_finished(result_path(results_dir, algo, env_id, seed), n_timesteps):
            todo.append((algo, env_id, seed))
    print(f"{len(keys) - len(todo)} of {len(keys)} runs done already; {len(todo)} to run, {args.jobs} at a time", flush=True)
    if args.dry_run:
        for key in todo:
            print("would run:", " ".join(child_command(args, *key)))
        return 0
    running: list[tuple[subprocess.Popen, tuple[str, str, int], Any, float]] = []
    failures = 0
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    while todo or running:
        while todo and len(running) < args.jobs:
            key = todo.pop(0)
            log_path = work_dir(results_dir, *key) / "train.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "a")
            process = subprocess.Popen(child_command(args, *key), stdout=log, stderr=subprocess.STDOUT, env=env)
            print(f"[{time.strftime('%H:%M:%S')}] start {key} (pid {process.pid}, log {log_path})", flush=True)
            running.append((process, key, log, time.time()))
        time.sleep(1.0)
        for item in list(running):
            process, key, log, started = item
            if process.poll() is None:
                continue
            running.remove(item)
            log.close()
            status = "done" if process.returncode == 0 else f"FAILED ({process.returncode})"
            failures += process.returncode != 0
            print(f"[{time.strftime('%H:%M:%S')}] {status} {key} in {time.time() - started:.0f} s", flush=True)
    return failures


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=list(ALGO_LABELS), choices=list(ALGO_LABELS))
    parser.add_argument("--envs", nargs="+", default=DEFAULT_ENVS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--budget-source",
        choices=["common", "own"],
        default="common",
        help="common: sb3-contrib TRPO's zoo budget for every algorithm; own: each algorithm's YAML",
    )
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply the budget (e.g. 0.1 for a quick look)")
    parser.add_argument("--n-timesteps", type=int, default=None, help="budget of every run (overrides the above)")
    parser.add_argument("--eval-freq", type=int, default=None, help="steps between evaluations (default: budget / 20)")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--n-eval-envs", type=int, default=5)
    parser.add_argument(
        "--diagnostics-every",
        type=int,
        default=0,
        help="keep every train/* value the algorithm logs (KL, line search, entropy, ...) in the record, averaged over "
        "bins of this many steps (0: none)",
    )
    parser.add_argument("--checkpoint-freq", type=int, default=250_000, help="steps between checkpoints of long runs")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (subprocesses) when there are several")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--params",
        nargs="+",
        default=[],
        help="overrides of the YAML entry, key:value (e.g. target_kl:0.02), for a tuning variant: one algorithm only, "
        "and a --results-dir of its own",
    )
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    parser.add_argument("--force", action="store_true", help="redo finished runs")
    parser.add_argument("--dry-run", action="store_true", help="list the runs to do and stop")
    args = parser.parse_args(argv)
    if args.params:
        if len(args.algos) != 1:
            parser.error(f"--params overrides one algorithm's entry: give one in --algos, not {args.algos}")
        if Path(args.results_dir).resolve() == RESULTS_DIR.resolve():
            parser.error("--params runs a variant: give it a --results-dir of its own (the reported results stay apart)")
        try:
            parse_params(args.params)  # a malformed pair is an error now, not in every run
        except ValueError as error:
            parser.error(str(error))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # Env by env, seed by seed, the algorithms side by side: an interrupted sweep leaves whole comparisons
    keys = [(algo, env_id, seed) for env_id in args.envs for seed in args.seeds for algo in args.algos]
    if len(keys) == 1 and args.jobs == 1 and not args.dry_run:
        run_one(args, *keys[0])
        return
    failures = sweep(args, keys)
    if failures:
        raise SystemExit(f"{failures} run(s) failed: see their train.log under {Path(args.results_dir) / 'tmp'}")


if __name__ == "__main__":
    main()
