"""
The MuJoCo entries (``pip install sb3-trpo-plus[mujoco]``): ``python -m rl_zoo3.train --algo trpo_plus --env ENV``
trains on each of the five v5 tasks, one set of values serves them (the held-out tasks get it unchanged), and the
benchmark's baselines are the zoo's v4 entries. The training runs are skipped without MuJoCo.
"""

import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rl_zoo3")

from benchmarks._common import load_hyperparams, parse_params
from sb3_trpo_plus import TRPOPlus
from sb3_trpo_plus.zoo import HYPERPARAMS_PATH

pytestmark = pytest.mark.zoo

REPO_ROOT = Path(__file__).resolve().parent.parent

TASKS = ["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5", "Ant-v5", "Swimmer-v5"]
#: Where a task's entry departs from the shared one (Hopper-v5's): sb3-contrib TRPO's own zoo value for that task, kept
#: on a held-out task; HalfCheetah-v5 shares Hopper's trust region (benchmarks/results/mujoco/tuning/decision.md)
OWN_VALUES = {"Swimmer-v5": {"gamma": 0.9999}}
#: sb3-contrib TRPO's arguments that shape an update: TRPOPlus's entry must have the baseline's (the speed comparison
#: and "ent_coef 0 is sb3-contrib TRPO" assume the same rollout, critic and solver)
UPDATE_KEYS = ("n_envs", "n_steps", "batch_size", "n_critic_updates", "cg_max_steps", "cg_damping", "sub_sampling_factor")
#: Arguments checked on the model the zoo saved
ENTRY_KEYS = (
    "gamma",
    "gae_lambda",
    "target_kl",
    "cg_max_steps",
    "cg_damping",
    "batch_size",
    "ent_coef",
    "sub_sampling_factor",
)
ENTRIES = yaml.safe_load(HYPERPARAMS_PATH.read_text())


def test_one_entry_for_the_five_tasks():
    shared = ENTRIES["Hopper-v5"]
    for task in TASKS:
        assert ENTRIES[task] == {**shared, **OWN_VALUES.get(task, {})}, task


@pytest.mark.parametrize("task", TASKS)
def test_baselines_are_the_zoos_v4_entries(task):
    v4 = task.replace("-v5", "-v4")
    for algo in ("trpo", "ppo"):
        entry, source = load_hyperparams(algo, task)
        assert source == f"rl_zoo3/hyperparams/{algo}.yml:{v4} (for {task})"
        assert entry == load_hyperparams(algo, v4)[0]
    trpo_entry = load_hyperparams("trpo", task)[0]
    assert {key: ENTRIES[task].get(key) for key in UPDATE_KEYS} == {key: trpo_entry.get(key) for key in UPDATE_KEYS}
    assert ENTRIES[task]["n_timesteps"] == trpo_entry["n_timesteps"] == 1e6


@pytest.mark.parametrize("task", TASKS)
def test_zoo_trains_each_task(task, tmp_path):
    # The README's command on each task, its entry as it is but for a rollout of 2 x 64 steps and one critic epoch
    pytest.importorskip("mujoco")
    command = [sys.executable, "-m", "rl_zoo3.train", "--algo", "trpo_plus", "--env", task, "-n", "128"]
    command += ["--eval-freq", "-1", "--num-threads", "1", "--seed", "0", "-f", "logs"]
    command += ["-params", "n_steps:64", "n_critic_updates:1"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    model = TRPOPlus.load(tmp_path / "logs" / "trpo_plus" / f"{task}_1" / f"{task}.zip", device="cpu")
    assert model.num_timesteps == 128
    # the entry's values (TRPOPlus's defaults where it gives none) reached the model
    defaults = inspect.signature(TRPOPlus.__init__).parameters
    for key in ENTRY_KEYS:
        assert getattr(model, key) == ENTRIES[task].get(key, defaults[key].default), key
    assert (tmp_path / "logs" / "trpo_plus" / f"{task}_1" / task / "vecnormalize.pkl").is_file()  # normalize: true


def test_tuning_candidates(tmp_path):
    # Each candidate of benchmarks/results/mujoco/tuning_rule.md: its overrides parse (as benchmarks.learning's
    # --params) into TRPOPlus arguments or the entry's callback list; round 1 lists T0, T1, T2 on both tuning tasks
    # and T0b on HalfCheetah, seeds 100-102, and never a held-out task
    candidates = REPO_ROOT / "benchmarks" / "results" / "mujoco" / "tuning"
    arguments = set(inspect.signature(TRPOPlus.__init__).parameters)
    for name in ("T0", "T0b", "T1", "T2", "T3"):
        lines = (candidates / name / "params.txt").read_text().splitlines()
        params = parse_params([line for line in lines if line.strip() and not line.lstrip().startswith("#")])
        assert set(params) - {"callback"} <= arguments, name
        for callback in params.get("callback", []):
            (path, kwargs), *_ = callback.items()
            module, _, attribute = path.rpartition(".")
            getattr(importlib.import_module(module), attribute)(**kwargs)
    status = subprocess.run(
        ["bash", "benchmarks/mujoco_campaign.sh", "--tuning", "--status"],
        cwd=REPO_ROOT,
        env={**os.environ, "RESULTS": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    runs = sorted(tuple(line.split()[1:]) for line in status if line)
    expected = [
        ("trpo_plus", task, "seed", str(seed), name)
        for seed in (100, 101, 102)
        for name in ("T0", "T1", "T2")
        for task in ("Hopper-v5", "HalfCheetah-v5")
    ]
    expected += [("trpo_plus", "HalfCheetah-v5", "seed", str(seed), "T0b") for seed in (100, 101, 102)]
    assert runs == sorted(expected)


def test_random_policy_scores(tmp_path):
    """``benchmarks.mujoco_random`` writes each task's random-policy returns, the 0 of the tuning rule's normalization."""
    pytest.importorskip("mujoco")
    from benchmarks import mujoco_random

    result = mujoco_random.main(["--tasks", "Hopper-v5", "--episodes", "2", "--out", str(tmp_path / "random.json")])
    scores = json.loads((tmp_path / "random.json").read_text())["games"]["Hopper-v5"]
    assert len(scores["returns"]) == 2 and scores["mean"] == pytest.approx(sum(scores["returns"]) / 2)
    assert result["games"]["Hopper-v5"]["mean"] == scores["mean"]
