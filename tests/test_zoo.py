"""
rl-baselines3-zoo integration: the README's zoo commands run as subprocesses (tiny budgets, in ``tmp_path``),
the import hook, the Optuna sampler and the shipped YAML file.

Deselect with ``-m "not zoo"``.
"""

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

pytest.importorskip("rl_zoo3")
optuna = pytest.importorskip("optuna")

from sb3_trpo_plus import TRPOPlus  # noqa: E402
from sb3_trpo_plus.callbacks import AdaptiveTrustRegionCallback  # noqa: E402
from sb3_trpo_plus.torch_layers import MinAtarCNN, MinAtarCnnPolicy  # noqa: E402
from sb3_trpo_plus.zoo import (  # noqa: E402
    ALGO_NAME,
    HYPERPARAMS_PATH,
    _lin_schedules,
    convert_trpo_plus_params,
    register_minatar_envs,
    sample_trpo_plus_params,
)

pytestmark = pytest.mark.zoo

REPO_ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# The `rl_zoo3` console script installed beside this interpreter
RL_ZOO3_SCRIPT = str(Path(sys.executable).parent / "rl_zoo3")
# Keep subprocesses on one thread (CI machines are small) and independent of the caller's hook setting
TRAIN_FLAGS = ["--eval-freq", "-1", "--num-threads", "1", "--seed", "0", "-f", "logs"]
HYPERPARAMS = yaml.safe_load(HYPERPARAMS_PATH.read_text())


def run(command: list[str], cwd: Path, timeout: int = 300, **env: str) -> str:
    """Run ``command`` in ``cwd``; fail with its output if it exits with an error; return stdout + stderr."""
    full_env = {key: value for key, value in os.environ.items() if key != "SB3_TRPO_PLUS_NO_ZOO_HOOK"}
    full_env.update(env)
    result = subprocess.run(command, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(command)} failed ({result.returncode}):\n{output[-5000:]}"
    return output


def run_python(code: str, cwd: Path, **env: str) -> str:
    return run([PYTHON, "-c", code], cwd, timeout=120, **env).strip()


def saved_model(log_folder: Path, env_id: str, run_id: int = 1) -> Path:
    env_name = env_id.replace("/", "-")
    path = log_folder / ALGO_NAME / f"{env_name}_{run_id}" / f"{env_name}.zip"
    assert path.is_file(), f"no model at {path}: {sorted(str(p) for p in log_folder.rglob('*'))}"
    return path


# --- import hook ---------------------------------------------------------------------------------------------


def test_hook_is_installed_and_lazy(tmp_path):
    # Interpreter start only puts the finder in place: no rl_zoo3, torch or sb3_trpo_plus import
    out = run_python(
        "import sys; print(*[m in sys.modules for m in ('_sb3_trpo_plus_zoo_hook', 'rl_zoo3', 'torch', 'sb3_trpo_plus')])",
        tmp_path,
    )
    assert out.split() == ["True", "False", "False", "False"], (
        "sb3_trpo_plus_zoo.pth is not active in site-packages: reinstall the package (pip install -e . or pip install .)"
    )


def test_hook_registers_when_rl_zoo3_is_imported(tmp_path):
    # The names only: TRPOPlus, its sampler and converter are imported when first used, then take their entries' place
    out = run_python(
        "import sys\n"
        "from rl_zoo3 import ALGOS\n"
        "from rl_zoo3.hyperparams_opt import HYPERPARAMS_SAMPLER, HYPERPARAMS_CONVERTER\n"
        "from rl_zoo3.exp_manager import ExperimentManager\n"
        "import rl_zoo3.import_envs, rl_zoo3.utils\n"
        "print('sb3_trpo_plus' in sys.modules, 'trpo_plus' in ALGOS, ALGOS['trpo_plus'].__name__)\n"
        "from sb3_trpo_plus import TRPOPlus\n"
        "from sb3_trpo_plus.zoo import sample_trpo_plus_params, convert_trpo_plus_params\n"
        "HYPERPARAMS_SAMPLER['trpo_plus'].resolve(), HYPERPARAMS_CONVERTER['trpo_plus'].resolve()\n"
        "print(ALGOS['trpo_plus'] is TRPOPlus, HYPERPARAMS_SAMPLER['trpo_plus'] is sample_trpo_plus_params,\n"
        "      HYPERPARAMS_CONVERTER['trpo_plus'] is convert_trpo_plus_params,\n"
        "      type(rl_zoo3.utils.__loader__).__name__)",
        tmp_path,
    )
    assert out.split() == ["False", "True", "TRPOPlus", "True", "True", "True", "SourceFileLoader"]


def test_zoo_patches_rely_on_names_this_rl_zoo3_has():
    # Every patch finds the rl_zoo3 names (and parameters) it uses in the installed rl_zoo3
    import importlib

    from _sb3_trpo_plus_zoo_hook import PATCHES, check_patch

    assert {patch.module for patch in PATCHES} == {
        "rl_zoo3.utils",
        "rl_zoo3.hyperparams_opt",
        "rl_zoo3.import_envs",
        "rl_zoo3.exp_manager",
    }
    assert len({patch.name for patch in PATCHES}) == len(PATCHES)
    for patch in PATCHES:
        check_patch(patch, importlib.import_module(patch.module))
    # A trpo_plus study with --storage reaches create_shared_study through the global name ``optuna`` of rl_zoo3's
    # hyperparameters_optimization (and --max-total-trials is counted by rl_zoo3 as create_shared_study expects)
    import rl_zoo3.exp_manager as exp_manager

    assert exp_manager.optuna is optuna, "rl_zoo3.exp_manager no longer imports optuna as 'optuna'"
    source = inspect.getsource(exp_manager.ExperimentManager.hyperparameters_optimization)
    assert "optuna.create_study(" in source and "storage=storage" in source, "rl_zoo3 opens its study another way"
    assert "MaxTrialsCallback(" in source and "self.max_total_trials" in source, (
        "rl_zoo3 counts --max-total-trials another way"
    )


def test_zoo_patch_on_a_renamed_name_fails_loudly():
    # A name rl_zoo3 renamed, or a parameter it dropped, stops the patch with an error naming both
    import types

    from _sb3_trpo_plus_zoo_hook import ZooPatch, check_patch

    applied = []
    patch = ZooPatch("demo_patch", "fake_zoo", {"Manager.run": ("hyperparams",)}, applied.append)

    class Manager:
        def run(self, params):
            return params

    module = types.ModuleType("fake_zoo")
    with pytest.raises(RuntimeError, match=r"'demo_patch'.*fake_zoo\.Manager\.run no longer exists"):
        check_patch(patch, module)
    module.Manager = Manager
    with pytest.raises(RuntimeError, match=r"'demo_patch'.*fake_zoo\.Manager\.run has no parameter hyperparams"):
        check_patch(patch, module)
    assert applied == []


def test_zoo_patch_failure_is_a_warning_naming_the_patch(tmp_path):
    # Through the import hook: rl_zoo3 keeps working, with a warning that names the patch that could not be applied
    code = (
        "import warnings, importlib, rl_zoo3.utils\n"
        "import _sb3_trpo_plus_zoo_hook as hook\n"
        "del rl_zoo3.utils.ALGOS\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    hook._patch(rl_zoo3.utils)\n"
        "print(*[str(w.message) for w in caught], sep='|')"
    )
    out = run_python(code, tmp_path)
    assert "add_trpo_plus_to_algos" in out and "rl_zoo3.utils.ALGOS no longer exists" in out, out


def test_hook_can_be_turned_off(tmp_path):
    code = "from rl_zoo3 import ALGOS; print('trpo_plus' in ALGOS)"
    assert run_python(code, tmp_path, SB3_TRPO_PLUS_NO_ZOO_HOOK="1") == "False"
    # register() does the same work by hand
    code = "from sb3_trpo_plus.zoo import register; register(); " + code
    assert run_python(code, tmp_path, SB3_TRPO_PLUS_NO_ZOO_HOOK="1") == "True"


def test_other_algorithms_unchanged(tmp_path):
    # The ExperimentManager patch only acts for trpo_plus: ppo still reads rl_zoo3's own file
    code = (
        "import argparse\n"
        "from rl_zoo3.exp_manager import ExperimentManager\n"
        "class Mine(ExperimentManager): pass\n"
        "m = ExperimentManager(argparse.Namespace(), 'ppo', 'CartPole-v1', 'logs')\n"
        "t = ExperimentManager(argparse.Namespace(), 'trpo_plus', 'CartPole-v1', 'logs')\n"
        "c = ExperimentManager(argparse.Namespace(), 'trpo_plus', 'CartPole-v1', 'logs', config='my.yml')\n"
        "k = Mine(args=argparse.Namespace(), algo='trpo_plus', env_id='CartPole-v1', log_folder='logs')\n"
        "print(m.config); print(t.config); print(c.config); print(k.config)\n"
        "print(type(m) is ExperimentManager, isinstance(t, ExperimentManager), isinstance(k, Mine))"
    )
    ppo_config, trpo_plus_config, custom_config, subclass_config, types = run_python(code, tmp_path).splitlines()
    assert ppo_config.endswith(os.path.join("rl_zoo3", "hyperparams", "ppo.yml"))
    assert Path(trpo_plus_config) == HYPERPARAMS_PATH == Path(subclass_config)
    assert custom_config == "my.yml"
    assert types == "True True True"


# --- what a process that runs another algorithm sees --------------------------------------------------------------

# A PPO run through rl_zoo3.train (as ``python -m rl_zoo3.train``), then what it left: sb3_trpo_plus modules imported,
# MinAtar ids registered, ExperimentManager attributes not defined by rl_zoo3, the class of a PPO manager, the
# signature of ExperimentManager
PPO_RUN = f"""
import argparse, inspect, json, runpy, sys
sys.argv = ["rl_zoo3.train", "--algo", "ppo", "--env", "CartPole-v1", "-n", "256", *{TRAIN_FLAGS!r}]
runpy.run_module("rl_zoo3.train", run_name="__main__", alter_sys=True)
import gymnasium as gym
import rl_zoo3.enjoy, rl_zoo3.record_video, rl_zoo3.exp_manager as exp_manager
from rl_zoo3 import ALGOS
manager_class = exp_manager.ExperimentManager
not_rl_zoo3 = [
    name for name, value in vars(manager_class).items()
    if hasattr(getattr(value, "__func__", value), "__code__")
    and getattr(value, "__func__", value).__code__.co_filename != exp_manager.__file__
]
manager = manager_class(argparse.Namespace(), "ppo", "CartPole-v1", "logs")
print("FACTS", json.dumps({{
    "sb3_trpo_plus_modules": sorted(m for m in sys.modules if m.split(".")[0] == "sb3_trpo_plus"),
    "trpo_plus_in_algos": "trpo_plus" in ALGOS,
    "minatar_ids": sorted(env_id for env_id in gym.registry if env_id.startswith("MinAtar/")),
    "not_rl_zoo3": not_rl_zoo3,
    "ppo_manager_is_rl_zoo3s": type(manager) is manager_class,
    "signature": [str(inspect.signature(manager_class)), str(inspect.signature(manager_class.__init__))],
}}))
"""


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    """What a PPO run through rl_zoo3 left in its process."""
    import json

    out = run_python(PPO_RUN, tmp_path_factory.mktemp("ppo_run"))
    return json.loads(out.rsplit("FACTS ", 1)[1])


def test_other_algorithms_do_not_import_sb3_trpo_plus(ppo_run):
    # The name trpo_plus is registered (the zoo's --algo choices), the package is imported only when it is used
    assert ppo_run["trpo_plus_in_algos"]
    assert ppo_run["sb3_trpo_plus_modules"] == []


def test_other_algorithms_do_not_get_minatar_ids(ppo_run, tmp_path):
    pytest.importorskip("minatar")
    assert ppo_run["minatar_ids"] == []
    # A trpo_plus command line gets them before the zoo script checks --env; a trpo_plus experiment manager too
    check = "import gymnasium as gym; print('MinAtar/Breakout-v1' in gym.registry, end=' ')"
    for algo in (["--algo", ALGO_NAME], [f"--algo={ALGO_NAME}"], ["--alg", ALGO_NAME]):
        argv = ["rl_zoo3.train", *algo, "--env", "MinAtar/Breakout-v1"]
        assert run_python(f"import sys; sys.argv = {argv!r}; import rl_zoo3.train; {check}", tmp_path) == "True", algo
    code = (
        f"import argparse, rl_zoo3.exp_manager as em; {check}\n"
        "m = em.ExperimentManager(argparse.Namespace(), 'trpo_plus', 'MinAtar/Breakout-v1', 'logs')\n"
        f"{check}"
    )
    assert run_python(code, tmp_path).split() == ["False", "True"]


def test_experiment_manager_methods_are_rl_zoo3s(ppo_run):
    # No method of rl_zoo3's ExperimentManager is replaced; the one attribute added, __new__, gives every algorithm
    # but trpo_plus an ExperimentManager made as rl_zoo3 makes it (trpo_plus: test_other_algorithms_unchanged)
    assert set(ppo_run["not_rl_zoo3"]) <= {"__new__"}, ppo_run["not_rl_zoo3"]
    assert ppo_run["ppo_manager_is_rl_zoo3s"]
    # ... and the class's signature is still that of rl_zoo3's __init__ (inspect would otherwise read __new__'s)
    class_signature, init_signature = ppo_run["signature"]
    assert init_signature.replace("(self, ", "(", 1) == class_signature


def test_docs_list_every_patch():
    # docs/zoo.md's table of patches names each patch of the hook and each method a trpo_plus manager overrides
    from _sb3_trpo_plus_zoo_hook import PATCHES
    from sb3_trpo_plus.zoo import TRPOPlusExperimentManagerMixin

    section = (REPO_ROOT / "docs" / "zoo.md").read_text().split("## How `trpo_plus` gets into rl_zoo3", 1)[1]
    table = "\n".join(line for line in section.split("\n## ", 1)[0].splitlines() if line.strip().startswith("|"))
    named = set(re.findall(r"`([^`]+)`", table))
    overrides = [name for name, value in vars(TRPOPlusExperimentManagerMixin).items() if inspect.isfunction(value)]
    for name in [patch.name for patch in PATCHES] + overrides:
        assert name in named, f"docs/zoo.md's table of patches does not name {name}"


def test_shared_study_leaves_the_optuna_global_alone(tmp_path, monkeypatch):
    # A trpo_plus study with --storage is opened by create_shared_study while rl_zoo3.exp_manager's global ``optuna``
    # stays the optuna module (another thread, another algorithm's study, sees nothing else)
    import argparse

    import rl_zoo3.exp_manager as exp_manager

    from sb3_trpo_plus import tuning

    class Opened(Exception):
        pass

    opened = []

    def create_shared_study(**kwargs):
        opened.append((exp_manager.optuna is optuna, kwargs["max_total_trials"], real_create_shared_study(**kwargs)))
        raise Opened

    real_create_shared_study = tuning.create_shared_study
    monkeypatch.setattr(tuning, "create_shared_study", create_shared_study)

    def manager(algo):
        return exp_manager.ExperimentManager(
            argparse.Namespace(), algo, "CartPole-v1", str(tmp_path / "logs"), optimize_hyperparameters=True,
            storage=str(tmp_path / f"{algo}.log"), study_name=algo, max_total_trials=3, verbose=0,
        )  # fmt: skip

    with pytest.raises(Opened):
        manager(ALGO_NAME).hyperparameters_optimization()
    [(optuna_global_untouched, max_total_trials, study)] = opened
    assert optuna_global_untouched and max_total_trials == 3 and isinstance(study, tuning.SharedStudy)

    # Another algorithm's study is rl_zoo3's own
    def create_study(**kwargs):
        raise Opened

    monkeypatch.setattr(optuna, "create_study", create_study)
    with pytest.raises(Opened):
        manager("ppo").hyperparameters_optimization()
    assert len(opened) == 1


# --- the README's commands -------------------------------------------------------------------------------------


# (train command, enjoy command, extra environment variables)
ZOO_COMMANDS = {
    "python-m": (
        [PYTHON, "-m", "rl_zoo3.train", "--algo", ALGO_NAME],
        [PYTHON, "-m", "rl_zoo3.enjoy", "--algo", ALGO_NAME],
        {},
    ),
    "rl_zoo3-script": ([RL_ZOO3_SCRIPT, "train", "--algo", ALGO_NAME], [RL_ZOO3_SCRIPT, "enjoy", "--algo", ALGO_NAME], {}),
    # The fallback: --algo trpo_plus is its default, and it works with the hook turned off
    "fallback": (
        [PYTHON, "-m", "sb3_trpo_plus.zoo", "train"],
        [PYTHON, "-m", "sb3_trpo_plus.zoo", "enjoy"],
        {"SB3_TRPO_PLUS_NO_ZOO_HOOK": "1"},
    ),
}


@pytest.mark.parametrize("commands", ZOO_COMMANDS)
def test_train_and_enjoy(tmp_path, commands):
    train, enjoy, env = ZOO_COMMANDS[commands]
    out = run([*train, "--env", "CartPole-v1", "-n", "2048", *TRAIN_FLAGS], tmp_path, **env)
    assert f"Loading hyperparameters from: {HYPERPARAMS_PATH}" in out

    # The YAML values reached the model
    expected = HYPERPARAMS["CartPole-v1"]
    model = TRPOPlus.load(saved_model(tmp_path / "logs", "CartPole-v1"), device="cpu")
    assert model.n_envs == expected["n_envs"]
    for key in ("n_steps", "batch_size", "cg_damping", "gae_lambda", "gamma", "n_critic_updates"):
        assert getattr(model, key) == pytest.approx(expected[key]), key
    assert model.lr_schedule(1.0) == pytest.approx(expected["learning_rate"])
    assert model.num_timesteps == 2048
    saved_config = (tmp_path / "logs" / ALGO_NAME / "CartPole-v1_1" / "CartPole-v1" / "config.yml").read_text()
    assert dict(yaml.load(saved_config, Loader=yaml.UnsafeLoader))["cg_damping"] == expected["cg_damping"]

    out = run(
        [*enjoy, "--env", "CartPole-v1", "-f", "logs/", "--no-render", "-n", "300", "--num-threads", "1"], tmp_path, **env
    )
    assert "Mean reward" in out


def test_continue_training_keeps_adapted_values(tmp_path):
    # A config with every adaptable value and the adaptive trust-region callback
    config = dict(HYPERPARAMS["CartPole-v1"])
    config.update(
        n_steps=256,
        batch_size=256,
        target_kl=0.03,
        cg_damping=0.05,
        ent_coef=0.02,
        ent_coef_decay=0.9,
        min_ent_coef=0.001,
        callback=[{"sb3_trpo_plus.callbacks.AdaptiveTrustRegionCallback": {"ls_fail_threshold": 20}}],
    )
    conf_file = tmp_path / "conf.yml"
    conf_file.write_text(yaml.safe_dump({"CartPole-v1": config}))
    train = [PYTHON, "-m", "rl_zoo3.train", "--algo", ALGO_NAME, "--env", "CartPole-v1", "-conf", str(conf_file)]
    run([*train, "-n", "1024", *TRAIN_FLAGS], tmp_path)
    first = saved_model(tmp_path / "logs", "CartPole-v1", run_id=1)

    # Stand in for what AdaptiveTrustRegionCallback does after failed line searches
    model = TRPOPlus.load(first, device="cpu")
    assert (model.target_kl, model.cg_damping, model._n_updates) == (0.03, 0.05, 2)
    model.target_kl, model.cg_damping = 0.007, 0.11
    model.save(first)

    run([*train, "-n", "512", "-i", str(first), *TRAIN_FLAGS], tmp_path)
    continued = TRPOPlus.load(saved_model(tmp_path / "logs", "CartPole-v1", run_id=2), device="cpu")
    assert continued._n_updates == 3
    assert (continued.target_kl, continued.cg_damping) == (0.007, 0.11)
    assert (continued.initial_target_kl, continued.initial_cg_damping) == (0.03, 0.05)
    assert continued.ent_coef == 0.02
    assert continued.current_ent_coef == pytest.approx(0.02 * 0.9**2)  # the third update used 0.9 ** 2

    # A value given on the command line still wins
    run([*train, "-n", "512", "-i", str(first), "-params", "target_kl:0.02", *TRAIN_FLAGS], tmp_path)
    overridden = TRPOPlus.load(saved_model(tmp_path / "logs", "CartPole-v1", run_id=3), device="cpu")
    assert (overridden.target_kl, overridden.cg_damping) == (0.02, 0.11)


def test_linear_schedules(tmp_path):
    """``ent_coef: lin_0.05`` and ``target_kl: lin_0.02`` in a zoo YAML are linear schedules, as ``learning_rate:
    lin_...`` is; the last update, at progress remaining 0, finds the trust region closed and is skipped."""
    config = dict(
        HYPERPARAMS["CartPole-v1"], n_steps=256, batch_size=256, ent_coef="lin_0.05", ent_coef_decay=1.0, target_kl="lin_0.02"
    )
    conf_file = tmp_path / "conf.yml"
    conf_file.write_text(yaml.safe_dump({"CartPole-v1": config}))
    command = [PYTHON, "-m", "rl_zoo3.train", "--algo", ALGO_NAME, "--env", "CartPole-v1", "-conf", str(conf_file)]
    run([*command, "-n", "1024", *TRAIN_FLAGS], tmp_path)
    model = TRPOPlus.load(saved_model(tmp_path / "logs", "CartPole-v1"), device="cpu")
    assert model.ent_coef(1.0) == pytest.approx(0.05) and model.ent_coef(0.5) == pytest.approx(0.025)
    assert model.target_kl(1.0) == pytest.approx(0.02) and model.target_kl(0.25) == pytest.approx(0.005)
    # SB3 updates the progress before each update: the last one runs at progress remaining 0
    assert model._current_progress_remaining == 0.0
    assert model.last_update.failure_reason == "closed_trust_region" and model.last_update.target_kl == 0.0


@pytest.mark.parametrize("key", ["ent_coef", "target_kl"])
@pytest.mark.parametrize("value", ["auto", "lin_", "lin_-1", "exp_0.1"])
def test_bad_schedule_string(key, value):
    from sb3_trpo_plus.zoo import _lin_schedules

    with pytest.raises(ValueError, match=key):
        _lin_schedules({key: value})


def test_target_kl_schedule_must_start_above_zero():
    from sb3_trpo_plus.zoo import _lin_schedules

    with pytest.raises(ValueError, match="target_kl must be a number > 0"):
        _lin_schedules({"target_kl": "lin_0"})
    assert _lin_schedules({"ent_coef": "lin_0"})["ent_coef"](1.0) == 0.0


def test_optimize(tmp_path):
    command = [PYTHON, "-m", "rl_zoo3.train", "--algo", ALGO_NAME, "--env", "CartPole-v1", "-optimize"]
    command += ["--n-trials", "2", "-n", "1000", "--n-evaluations", "1", "--eval-episodes", "2"]
    command += ["--sampler", "random", "--pruner", "none", "--no-optim-plots", *TRAIN_FLAGS]
    run(command, tmp_path)
    reports = list((tmp_path / "logs" / ALGO_NAME).glob("report_CartPole-v1_2-trials-1000-random-none_*.csv"))
    assert len(reports) == 1
    header = reports[0].read_text().splitlines()[0].split(",")
    for name in ("ent_coef", "ent_coef_decay", "min_ent_coef_fraction", "target_kl", "cg_damping", "cg_max_steps",
                 "line_search_max_iter", "line_search_shrinking_factor", "n_critic_updates", "n_steps_pow",
                 "one_minus_gamma", "one_minus_gae_lambda", "net_arch"):  # fmt: skip
        assert f"params_{name}" in header, name


@pytest.mark.expensive
def test_minatar_breakout(tmp_path):
    pytest.importorskip("minatar")
    env_id = "MinAtar/Breakout-v1"
    # two rollouts of 8 x 128 steps: the entry's radius (lin_0.04) is 0.02 at the first update and 0 at the second,
    # which the schedule's end skips
    command = [PYTHON, "-m", "rl_zoo3.train", "--algo", ALGO_NAME, "--env", env_id, "-n", "2048", *TRAIN_FLAGS]
    run(command, tmp_path)
    model = TRPOPlus.load(saved_model(tmp_path / "logs", env_id), device="cpu")
    assert isinstance(model.policy, MinAtarCnnPolicy)
    assert isinstance(model.policy.features_extractor, MinAtarCNN)
    assert model.n_envs == HYPERPARAMS[env_id]["n_envs"]
    assert model.entropy_floor == HYPERPARAMS[env_id]["entropy_floor"]
    assert model.last_update is not None and model.last_update.n_updates == 2
    assert model.last_update.failure_reason == "closed_trust_region"


# --- sampler, YAML file, MinAtar network (in process) ----------------------------------------------------------


def test_sampler_builds_a_model():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(5):
        trial = study.ask()
        hyperparams = sample_trpo_plus_params(trial, n_actions=0, n_envs=1, additional_args={})
        assert 0 <= hyperparams["min_ent_coef"] <= hyperparams["ent_coef"]
        assert hyperparams["batch_size"] <= hyperparams["n_steps"]
        # --trial-id: the converter rebuilds the same arguments from the stored parameters
        converted = convert_trpo_plus_params(trial.params)
        assert {key: value for key, value in converted.items() if key != "batch_size"} == {
            key: value for key, value in hyperparams.items() if key != "batch_size"
        }
        model = TRPOPlus("MlpPolicy", "CartPole-v1", device="cpu", **hyperparams)
        assert model.target_kl == hyperparams["target_kl"]
        study.tell(trial, 0.0)


def test_packaged_yaml_is_the_top_level_one():
    # hyperparams/trpo_plus.yml (a symlink, or a copy on systems without symlinks) must match the packaged file
    assert (REPO_ROOT / "hyperparams" / "trpo_plus.yml").read_text() == HYPERPARAMS_PATH.read_text()


ZOO_KEYS = {"n_envs", "n_timesteps", "normalize", "env_wrapper", "frame_stack", "callback", "policy", "policy_kwargs"}


@pytest.mark.parametrize("entry", sorted(HYPERPARAMS))
def test_yaml_entries(entry):
    from rl_zoo3.exp_manager import ExperimentManager
    from rl_zoo3.utils import get_callback_list, get_class_by_name, get_wrapper_class

    hyperparams = dict(HYPERPARAMS[entry])
    algorithm_arguments = set(inspect.signature(TRPOPlus.__init__).parameters)
    unknown = set(hyperparams) - ZOO_KEYS - algorithm_arguments
    assert not unknown, f"{entry}: unknown keys {unknown}"
    assert {"n_timesteps", "policy"} <= set(hyperparams)
    # Dotted names resolve; callbacks accept their arguments
    if "." in hyperparams["policy"]:
        get_class_by_name(hyperparams["policy"])
    get_wrapper_class(hyperparams)
    for callback in get_callback_list(hyperparams):
        assert isinstance(callback, AdaptiveTrustRegionCallback)
    # Argument checks of TRPOPlus (without an environment), on the values the zoo passes: `lin_` schedules converted
    # as TRPOPlusExperimentManager converts them (a bad schedule string fails here)
    converted = ExperimentManager._preprocess_schedules(_lin_schedules(hyperparams))
    kwargs = {key: value for key, value in converted.items() if key in algorithm_arguments and key != "policy"}
    TRPOPlus("MlpPolicy", None, _init_setup_model=False, **kwargs)


def _status_table(docs: str) -> dict[str, tuple[str, str, str, str]]:
    """docs/zoo.md's table "Which entries are tuned": each entry it names -> (status, measured at, run, result)."""
    section = docs.split("## Which entries are tuned", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("entry", "---"):
            continue
        for entry in re.findall(r"`([^`]+)`", cells[0]):
            rows[entry] = (cells[1], cells[2], cells[3], cells[4])
    return rows


def test_yaml_status_comments():
    # Every block has a status comment, "# Tuned" or "# Untuned", that docs/zoo.md's table "Which entries are tuned"
    # agrees with: a Tuned block has its row there, marked Tuned, with the command of its recorded run and its
    # result; a block the table names has the status the table gives it. Every block with a budget of its own says
    # what budget it has been measured at (or that it has not been), and so does its row in the table
    rows = _status_table((REPO_ROOT / "docs" / "zoo.md").read_text())
    assert rows, "docs/zoo.md has no table of the tuned entries"
    statuses, measured = {}, {}
    status, comment = None, ""
    for line in HYPERPARAMS_PATH.read_text().splitlines():
        if line.startswith(("# Tuned", "# Untuned")):
            status = "Tuned" if line.startswith("# Tuned") else "Untuned"
        if line.startswith("#"):
            comment += line
        elif line and not line.startswith(" "):
            entry = line.split(":", 1)[0]  # the key, without a YAML anchor or alias after it
            assert status is not None, f"no status comment above {entry}"
            statuses[entry], measured[entry] = status, "Measured at:" in comment
            status, comment = None, ""
    for entry in yaml.safe_load(HYPERPARAMS_PATH.read_text()):
        # a block that is another's alias (`*minatar`) has the measured budget of the block it repeats
        aliased = re.search(rf"^{re.escape(entry)}: \*", HYPERPARAMS_PATH.read_text(), re.MULTILINE)
        assert measured[entry] or aliased, f"{entry}: no 'Measured at:' in its comment"
    for entry, status in statuses.items():
        if status == "Tuned":
            assert entry in rows, f"{entry} is marked Tuned but docs/zoo.md's table has no row for it"
        if entry in rows:
            documented, budget, run, result = rows[entry]
            assert budget, f"{entry}: docs/zoo.md does not say what budget it was measured at"
            assert documented.split()[0] == status, f"{entry}: {status} in the YAML, {documented} in docs/zoo.md"
            if status == "Tuned":
                assert re.search(r"`(python -m|bash) [^`]+`", run), f"{entry}: no command of its run in docs/zoo.md"
                assert re.search(r"\d", result), f"{entry}: no result in docs/zoo.md"
    for documented_row in set(rows.values()):
        named = [entry for entry, row in rows.items() if row == documented_row]
        assert set(named) & set(statuses), f"docs/zoo.md has a row for entries the YAML lacks: {named}"


def test_minatar_cnn():
    pytest.importorskip("minatar")
    register_minatar_envs()
    env = gym.make("MinAtar/Seaquest-v1")  # 10x10x10: as many channels as pixels per side
    model = TRPOPlus(MinAtarCnnPolicy, env, n_steps=64, batch_size=64, device="cpu")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (10, 10, 10) and obs.dtype == np.bool_
    action, _ = model.predict(obs)
    assert env.action_space.contains(action.item())
    model.learn(64)
    assert model.last_update is not None and model.last_update.line_search_success
    with pytest.raises(ValueError, match="3-dimensional"):
        MinAtarCNN(gym.spaces.Box(0, 1, (10, 10)))
