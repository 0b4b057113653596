"""
Pieces shared by the benchmark scripts: where results go, the machine they ran on, the hyperparameters of each
algorithm (the zoo's YAML files, read with the zoo's own rules) and models built by rl_zoo3's ``ExperimentManager``.
"""

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
#: Entries the zoo's trpo.yml / ppo.yml do not have (MinAtar; MuJoCo v5, named after the zoo's v4 entries), used only
#: where the zoo file has no entry for the env
EXTRA_HYPERPARAMS_PATH = Path(__file__).resolve().parent / "hyperparams.yml"
#: The algorithms compared, as rl_zoo3 names them, and how the reports name them
ALGO_LABELS = {"trpo_plus": "TRPOPlus", "trpo": "TRPO (sb3-contrib)", "ppo": "PPO"}
MINATAR_BUDGET = 2_000_000


def machine_info() -> dict[str, Any]:
    """CPU model, cores, load, library versions: stored with every measurement (the machine is shared)."""
    import gymnasium
    import sb3_contrib
    import stable_baselines3
    import torch as th

    cpu_model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": [round(load, 2) for load in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "torch_threads": th.get_num_threads(),
        "python": platform.python_version(),
        "torch": th.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "sb3_contrib": sb3_contrib.__version__,
        "gymnasium": gymnasium.__version__,
        "cuda": th.cuda.get_device_name(0) if th.cuda.is_available() else None,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    try:
        import rl_zoo3

        info["rl_zoo3"] = rl_zoo3.__version__
    except ImportError:
        pass
    try:
        from sb3_trpo_plus import __version__

        info["sb3_trpo_plus"] = __version__
    except ImportError:
        pass
    return info


def command_line() -> str:
    """The command that started this process, as typed (``python -m benchmarks.x ...``)."""
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return " ".join(["python", *argv[1:]])


def git_commit() -> str | None:
    """The commit the run is made at (``BENCHMARK_COMMIT`` where the copy has no git history, e.g. a lent machine)."""
    if os.environ.get("BENCHMARK_COMMIT"):
        return os.environ["BENCHMARK_COMMIT"]
    completed = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    return (completed.stdout.strip() or None) if completed.returncode == 0 else None


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON atomically (a reader never sees half a file; a killed run leaves no broken file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(to_jsonable(data), indent=1, allow_nan=True) + "\n")
    os.replace(tmp, path)


def to_jsonable(value: Any) -> Any:
    """Numpy scalars and arrays, tuples and paths as plain JSON values; anything else as its ``str``."""
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def env_dirname(env_id: str) -> str:
    """Folder name of an env id (``MinAtar/Breakout-v1`` -> ``MinAtar-Breakout-v1``), as rl_zoo3 names it."""
    return env_id.replace("/", "-")


def set_threads(n_threads: int) -> None:
    import torch as th

    th.set_num_threads(n_threads)


# --- hyperparameters -------------------------------------------------------------------------------------------


def hyperparams_path(algo: str) -> Path:
    """The YAML file of ``algo``: the package's ``trpo_plus.yml``, or the zoo's ``trpo.yml`` / ``ppo.yml``."""
    if algo == "trpo_plus":
        from sb3_trpo_plus.zoo import HYPERPARAMS_PATH

        return HYPERPARAMS_PATH
    import rl_zoo3

    return Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml"


def _is_atari(env_id: str) -> bool:
    import gymnasium as gym

    register_envs()
    return "AtariEnv" in str(gym.envs.registry[env_id].entry_point)


def parse_params(items: list[str]) -> dict[str, Any]:
    """``key:value`` pairs (values read as YAML), like rl_zoo3's ``-params``."""
    params = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not sep:
            raise ValueError(f"--params takes key:value pairs, got {item!r}")
        params[key] = yaml.safe_load(value)
    return params


def load_hyperparams(algo: str, env_id: str) -> tuple[dict[str, Any], str]:
    """
    The YAML entry of ``env_id`` for ``algo``, chosen with rl_zoo3's rules (the env's own entry, else ``atari``
    for Atari games, else ``default``), except that an entry of ``benchmarks/hyperparams.yml`` (environments the
    zoo's files do not list) comes before ``atari`` / ``default``. An entry there that is a string names the zoo's
    entry to take (``Hopper-v5: Hopper-v4``: the zoo's MuJoCo entries are for the v4 tasks).

    :return: the entry (a fresh copy) and where it came from, e.g. ``rl_zoo3/hyperparams/ppo.yml:atari``, or
        ``rl_zoo3/hyperparams/ppo.yml:Hopper-v4 (for Hopper-v5)``
    """
    path = hyperparams_path(algo)
    entries = yaml.safe_load(path.read_text())
    label = f"{path.parent.parent.name}/{path.parent.name}/{path.name}"
    extras = yaml.safe_load(EXTRA_HYPERPARAMS_PATH.read_text()).get(algo, {})
    if env_id in entries:
        return copy.deepcopy(entries[env_id]), f"{label}:{env_id}"
    if isinstance(extras.get(env_id), str):
        return copy.deepcopy(entries[extras[env_id]]), f"{label}:{extras[env_id]} (for {env_id})"
    if env_id in extras:
        return copy.deepcopy(extras[env_id]), f"benchmarks/hyperparams.yml:{algo}:{env_id}"
    if _is_atari(env_id) and "atari" in entries:
        return copy.deepcopy(entries["atari"]), f"{label}:atari"
    return copy.deepcopy(entries["default"]), f"{label}:default"


def common_budget(env_id: str) -> int:
    """
    The budget every algorithm gets on ``env_id`` in the learning benchmark: sb3-contrib TRPO's zoo budget
    (``n_timesteps`` of ``trpo.yml``), 2M steps for MinAtar.
    """
    if env_id.startswith("MinAtar/"):
        return MINATAR_BUDGET
    hyperparams, _ = load_hyperparams("trpo", env_id)
    return int(float(hyperparams["n_timesteps"]))


def register_envs() -> None:
    """Atari (ale-py) and MinAtar ids in the Gymnasium registry, and ``trpo_plus`` in rl_zoo3."""
    import gymnasium as gym

    try:
        import ale_py

        gym.register_envs(ale_py)
    except ImportError:
        pass
    from sb3_trpo_plus.zoo import register, register_minatar_envs

    register_minatar_envs()
    register()


# --- models built from the YAML entries, by rl_zoo3 -------------------------------------------------------------


def make_experiment(
    algo: str,
    env_id: str,
    hyperparams: dict[str, Any],
    *,
    seed: int,
    log_folder: str | os.PathLike,
    n_timesteps: int,
    device: str = "auto",
    tensorboard_log: str = "",
    args: argparse.Namespace | None = None,
    vec_env_type: str = "dummy",
) -> Any:
    """
    An rl_zoo3 ``ExperimentManager`` that takes ``hyperparams`` (one YAML entry) as its configuration.

    Everything else is the zoo's: schedules (``lin_``), ``normalize``, ``env_wrapper``, ``frame_stack``,
    ``policy_kwargs``, ``callback`` entries, the vectorized environment and the model. The zoo's own evaluation
    and checkpoint callbacks are off (the benchmarks add theirs). ``setup_experiment()`` returns ``(model, saved)``.
    """
    register_envs()
    from rl_zoo3.exp_manager import ExperimentManager

    class BenchmarkExperiment(ExperimentManager):
        def read_hyperparameters(self) -> tuple[dict[str, Any], dict[str, Any]]:
            entry = copy.deepcopy(hyperparams)
            return entry, OrderedDict(sorted(copy.deepcopy(hyperparams).items()))

    return BenchmarkExperiment(
        args or argparse.Namespace(),
        algo,
        env_id,
        str(log_folder),
        tensorboard_log=tensorboard_log,
        n_timesteps=n_timesteps,
        eval_freq=-1,
        save_freq=-1,
        seed=seed,
        verbose=0,
        device=device,
        vec_env_type=vec_env_type,
    )


def zoo_env_and_model(
    algo: str,
    env_id: str,
    hyperparams: dict[str, Any],
    *,
    model_class: type | None = None,
    load_path: str | os.PathLike | None = None,
    **settings: Any,
) -> tuple[Any, Any, Any]:
    """
    The environment, the model and the experiment of one YAML entry, built as ``python -m rl_zoo3.train`` builds
    them (``ExperimentManager.setup_experiment()``): the same hyperparameter processing, wrappers, ``normalize``,
    ``frame_stack`` and ``callback`` entries (in ``experiment.callbacks``, to pass to ``learn``).

    :param model_class: the class to instantiate instead of the zoo's (e.g. a subclass that times its phases)
    :param load_path: a saved model to load (with the environment) instead of creating one
    :param settings: the experiment's settings, the keyword arguments of :func:`make_experiment` (``seed``,
        ``log_folder``, ``n_timesteps``, ``device``, ...)
    :return: ``(env, model, experiment)``; ``experiment.callbacks`` holds the entry's callbacks
    """
    from rl_zoo3.utils import ALGOS

    experiment = make_experiment(algo, env_id, hyperparams, **settings)
    seed, device = experiment.seed, experiment.device
    unprocessed, saved_hyperparams = experiment.read_hyperparameters()
    processed, experiment.env_wrapper, experiment.callbacks, experiment.vec_env_wrapper = experiment._preprocess_hyperparams(
        unprocessed
    )
    experiment.saved_hyperparams = saved_hyperparams
    experiment.create_log_folder()
    env = experiment.create_envs(experiment.n_envs, no_log=False)
    model_class = model_class or ALGOS[algo]
    if load_path is not None:
        model = model_class.load(load_path, env=env, device=device)
    else:
        model = model_class(
            env=env, tensorboard_log=experiment.tensorboard_log, seed=seed, verbose=0, device=device, **processed
        )
    return env, model, experiment


def random_policy_scores(
    games: dict[str, str], random_returns: Any, episodes: int, seed: int, out: str | os.PathLike
) -> dict[str, Any]:
    """
    The uniformly random policy's returns on each game (``{key: env_id}``), by ``random_returns(env_id, episodes,
    seed)``: their mean, std and values under ``games[key]``, written to ``out`` after each game.
    """
    result: dict[str, Any] = {"episodes": episodes, "seed": seed, "command": command_line(), "machine": machine_info()}
    result["games"] = {}
    for key, env_id in games.items():
        returns = random_returns(env_id, episodes, seed)
        result["games"][key] = {"mean": float(np.mean(returns)), "std": float(np.std(returns)), "returns": returns}
        print(f"{key}: random policy {np.mean(returns):.2f} +/- {np.std(returns):.2f} over {episodes} episodes")
        write_json(out, result)
    return result
