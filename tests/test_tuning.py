"""
Tuning at scale (``sb3_trpo_plus.tuning``, ``docs/tuning.md``): one Optuna study shared by several
``python -m rl_zoo3.train --algo trpo_plus -optimize`` workers, on a real PostgreSQL server started in a temporary
directory, and on a JournalStorage file; a worker killed with SIGKILL in the middle of a trial; the pruner; the
export of a trial as a zoo YAML entry.

The PostgreSQL tests skip, saying why, where no server binary (``initdb``, ``pg_ctl``) or no ``psycopg2`` exists.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rl_zoo3")
optuna = pytest.importorskip("optuna")

from optuna.trial import TrialState  # noqa: E402

from sb3_trpo_plus import TRPOPlus, tuning  # noqa: E402
from sb3_trpo_plus.zoo import ALGO_NAME, HYPERPARAMS_PATH, convert_trpo_plus_params  # noqa: E402

pytestmark = pytest.mark.zoo

PYTHON = sys.executable
ENV_ID = "CartPole-v1"
#: Heartbeat of the workers: every second; a trial without one for 4 s has lost its worker
HEARTBEAT_ENV = {tuning.HEARTBEAT_INTERVAL_VARIABLE: "1", tuning.GRACE_PERIOD_VARIABLE: "4"}
#: Tiny trials: one environment, 256 steps (one rollout of the sampled n_steps), two evaluations of 3 episodes
TRIAL_FLAGS = ["-n", "256", "-params", "n_envs:1", "--n-evaluations", "2", "--eval-episodes", "3", "--sampler", "random"]
TRIAL_FLAGS += ["--no-optim-plots", "--eval-freq", "-1", "--num-threads", "1"]
#: What Optuna logs when a trial ends
TRIAL_END = re.compile(r"Trial (\d+) (?:finished|pruned)")
#: Attributes of a trained model that the trial's parameters set, and training leaves alone
FIXED_ATTRIBUTES = ("n_steps", "gamma", "gae_lambda", "cg_max_steps", "line_search_max_iter", "n_critic_updates")


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "SB3_TRPO_PLUS_NO_ZOO_HOOK"}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def start_worker(cwd: Path, index: int, storage: str, study_name: str, *flags: str) -> subprocess.Popen:
    """``python -m rl_zoo3.train --algo trpo_plus -optimize`` on the shared study; output in ``worker_<index>.log``."""
    command = [PYTHON, "-m", "rl_zoo3.train", "--algo", ALGO_NAME, "--env", ENV_ID, "-optimize"]
    command += ["--storage", storage, "--study-name", study_name, *TRIAL_FLAGS, *flags]
    # Each worker its own sampler seed (rl_zoo3 seeds the sampler with --seed) and log folder
    command += ["--seed", str(index), "-f", f"logs_{index}"]
    log = (cwd / f"worker_{index}.log").open("w")
    return subprocess.Popen(command, cwd=cwd, env=subprocess_env(**HEARTBEAT_ENV), stdout=log, stderr=subprocess.STDOUT)


def wait_for(workers: list[subprocess.Popen], cwd: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    for index, worker in enumerate(workers):
        try:
            worker.wait(max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            for other in workers:
                other.kill()
            pytest.fail(f"workers still running after {timeout} s:\n{(cwd / f'worker_{index}.log').read_text()[-3000:]}")
        log = (cwd / f"worker_{index}.log").read_text()
        assert worker.returncode == 0, f"worker {index} failed ({worker.returncode}):\n{log[-5000:]}"


def trials_ended_in_logs(cwd: Path, n_workers: int) -> Counter:
    """How many times each trial number ended in the workers' logs: a trial run twice would count 2."""
    return Counter(
        int(number) for index in range(n_workers) for number in TRIAL_END.findall((cwd / f"worker_{index}.log").read_text())
    )


def train(cwd: Path, *flags: str) -> TRPOPlus:
    """Train with the zoo (tiny budget) and load the saved model."""
    command = [PYTHON, "-m", "rl_zoo3.train", "--algo", ALGO_NAME, "--env", ENV_ID, "-n", "64", "-params", "n_envs:1"]
    command += ["--eval-freq", "-1", "--num-threads", "1", "--seed", "0", "-f", "trained", *flags]
    result = subprocess.run(command, cwd=cwd, env=subprocess_env(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    return TRPOPlus.load(cwd / "trained" / ALGO_NAME / f"{ENV_ID}_1" / f"{ENV_ID}.zip", device="cpu")


def assert_trained_with(model: TRPOPlus, params: dict) -> None:
    expected = convert_trpo_plus_params(params)
    for name in FIXED_ATTRIBUTES:
        assert getattr(model, name) == pytest.approx(expected[name]), name


# --- a PostgreSQL server in a temporary directory --------------------------------------------------------------


def postgres_bin_dir() -> Path | None:
    """The folder of ``pg_ctl``: on PATH, else the newest ``/usr/lib/postgresql/<version>/bin`` (Debian, Ubuntu)."""
    on_path = shutil.which("pg_ctl")
    if on_path is not None:
        return Path(on_path).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda path: int(path.parts[-3]), reverse=True)
    return versions[0].parent if versions else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server on 127.0.0.1 for this module, data in a temporary folder, trust authentication."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        pytest.skip("no PostgreSQL server binary (initdb, pg_ctl on PATH or in /usr/lib/postgresql/*/bin): install PostgreSQL")
    pytest.importorskip("psycopg2", reason="no PostgreSQL driver: pip install psycopg2-binary (in the tests extra)")
    run_as: list[str] = []
    if os.geteuid() == 0:
        # The server refuses to run as root: run it as the postgres user
        runuser = shutil.which("runuser")
        if runuser is None or shutil.which("id") is None or subprocess.run(["id", "postgres"], capture_output=True).returncode:
            pytest.skip("running as root, and no 'postgres' user (or no runuser) to run the PostgreSQL server as")
        run_as = [runuser, "-u", "postgres", "--"]
    directory = Path(tempfile.mkdtemp(prefix="sb3_trpo_plus_postgres_"))
    if run_as:
        shutil.chown(directory, user="postgres")
    data = directory / "data"
    subprocess.run(
        [*run_as, bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync"],
        check=True,
        capture_output=True,
    )
    port = 0
    for _ in range(3):  # another process may take the free port between free_port() and the server's start
        port = free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={directory} -c fsync=off"
        start = [
            *run_as,
            bin_dir / "pg_ctl",
            "-D",
            data,
            "-l",
            directory / "server.log",
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        ]
        if subprocess.run(start, capture_output=True).returncode == 0:
            break
    else:
        log = (directory / "server.log").read_text() if (directory / "server.log").exists() else ""
        shutil.rmtree(directory, ignore_errors=True)
        pytest.fail(f"the PostgreSQL server did not start:\n{log[-3000:]}")
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*run_as, bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)


def create_database(server_url: str, name: str) -> str:
    import psycopg2

    port = int(server_url.rsplit(":", 1)[1])
    connection = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    connection.close()
    return f"{server_url}/{name}"


def test_postgresql_study_shared_by_workers_survives_a_killed_worker(tmp_path, postgres_url):
    storage, study_name, max_total, n_workers = create_database(postgres_url, "shared"), "cartpole", 6, 3
    # The study first, so that the test can watch it from the start
    optuna.create_study(storage=storage, study_name=study_name, direction="maximize")
    host = socket.gethostname()
    flags = ["--max-total-trials", str(max_total), "--n-trials", "100", "--pruner", "median", "--n-startup-trials", "2"]
    workers = [start_worker(tmp_path, index, storage, study_name, *flags) for index in range(n_workers)]
    victim = workers[0]
    study = optuna.load_study(study_name=study_name, storage=storage)

    # Kill worker 0 with SIGKILL in the middle of a trial: it is RUNNING and has sampled its parameters
    deadline, killed = time.monotonic() + 180, None
    while killed is None and time.monotonic() < deadline and victim.poll() is None:
        for trial in study.get_trials(states=(TrialState.RUNNING,)):
            if trial.user_attrs.get(tuning.WORKER_ATTR) == f"{host}:{victim.pid}" and "activation_fn" in trial.params:
                victim.send_signal(signal.SIGKILL)
                killed = trial
                break
        time.sleep(0.1)
    assert killed is not None, f"worker 0 never ran a trial:\n{(tmp_path / 'worker_0.log').read_text()[-3000:]}"
    victim.wait(30)
    wait_for(workers[1:], tmp_path)
    # Worker 0's log is read too: the trials it finished before it died
    (tmp_path / "worker_0.log").touch()

    trials = study.get_trials()
    states = Counter(trial.state for trial in trials)
    # Nothing left RUNNING or waiting, and the total is respected: max_total trials finished (complete or pruned)
    assert states[TrialState.RUNNING] == states[TrialState.WAITING] == 0, states
    finished = [trial for trial in trials if trial.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == max_total, states
    # The killed worker's trial was marked FAIL, and retried once with its parameters by a worker still alive
    assert study.trials[killed.number].state == TrialState.FAIL
    retries = [trial for trial in trials if trial.system_attrs.get("failed_trial") == killed.number]
    assert len(retries) == 1, retries
    assert retries[0].state in (TrialState.COMPLETE, TrialState.PRUNED)
    assert retries[0].params == killed.params
    assert retries[0].user_attrs[tuning.WORKER_ATTR] in {f"{host}:{worker.pid}" for worker in workers[1:]}
    # The only other failures would be trials refused because the study was full (none ran)
    assert all(
        trial.user_attrs.get(tuning.OVER_BUDGET_ATTR)
        for trial in trials
        if trial.state == TrialState.FAIL and trial.number != killed.number
    )
    # No trial ran twice: each finished trial ended once, in one worker's log; the workers shared the study
    assert trials_ended_in_logs(tmp_path, n_workers) == Counter(trial.number for trial in finished)
    assert len({trial.user_attrs[tuning.WORKER_ATTR] for trial in finished}) >= 2
    # The pruner worked with TRPOPlus's evaluation: every finished trial reported its evaluations
    assert all(trial.intermediate_values for trial in finished)

    # Train from a trial of the study with the zoo's --trial-id (the retried trial: rl_zoo3 ignores --trial-id 0)
    model = train(tmp_path, "--storage", storage, "--study-name", study_name, "--trial-id", str(retries[0].number))
    assert_trained_with(model, retries[0].params)


# --- JournalStorage: one machine -----------------------------------------------------------------------------


def test_journal_study_shared_by_workers_and_best_trial_exported(tmp_path):
    storage, study_name, max_total, n_workers = str(tmp_path / "study.log"), "cartpole", 4, 2
    flags = ["--max-total-trials", str(max_total), "--pruner", "none"]
    workers = [start_worker(tmp_path, index, storage, study_name, *flags) for index in range(n_workers)]
    wait_for(workers, tmp_path)

    study = tuning.load_study(storage, study_name)
    trials = study.get_trials()
    assert Counter(trial.state for trial in trials) == {TrialState.COMPLETE: max_total}
    assert trials_ended_in_logs(tmp_path, n_workers) == Counter(range(max_total))
    pids = {f"{socket.gethostname()}:{worker.pid}" for worker in workers}
    assert {trial.user_attrs[tuning.WORKER_ATTR] for trial in trials} <= pids

    # Export the best trial as a YAML entry (as rl_zoo3 writes them), then train from it with -conf
    best_yml = tmp_path / "best.yml"
    tuning.main(["export", "--storage", storage, "--study-name", study_name, "--env", ENV_ID, "-o", str(best_yml)])
    text = best_yml.read_text()
    assert text.startswith(f"# Optuna study 'cartpole', trial {study.best_trial.number} (COMPLETE")
    entry = yaml.safe_load(text)[ENV_ID]
    assert entry["n_timesteps"] == yaml.safe_load(HYPERPARAMS_PATH.read_text())[ENV_ID]["n_timesteps"]
    assert entry["policy_kwargs"].startswith("dict(net_arch=dict(pi=[")
    model = train(tmp_path, "-conf", str(best_yml))
    assert_trained_with(model, study.best_trial.params)
    activation = convert_trpo_plus_params(study.best_trial.params)["policy_kwargs"]["activation_fn"]
    assert model.policy_kwargs["activation_fn"] is activation

    summary = tuning.summary(study)
    assert summary["states"] == {"COMPLETE": max_total} and summary["best"]["number"] == study.best_trial.number


def test_pruner_prunes_trpo_plus_trial(tmp_path):
    # A study whose one finished trial scored the most CartPole gives (500) at every evaluation: the median pruner
    # must stop a fresh TRPOPlus trial at its first evaluation of three
    storage, study_name = str(tmp_path / "study.log"), "pruned"
    journal = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage))
    study = optuna.create_study(storage=journal, study_name=study_name, direction="maximize")
    study.add_trial(optuna.create_trial(value=500.0, intermediate_values={1: 500.0, 2: 500.0, 3: 500.0}))
    flags = ["--n-trials", "1", "--pruner", "median", "--n-startup-trials", "1", "--n-evaluations", "3", "-n", "768"]
    worker = start_worker(tmp_path, 0, storage, study_name, *flags)
    wait_for([worker], tmp_path)
    trial = tuning.load_study(storage, study_name).trials[1]
    assert trial.state == TrialState.PRUNED
    assert list(trial.intermediate_values) == [1]


# --- the mechanism, in process (SQLite RDB storage) -------------------------------------------------------------

#: A worker that starts one trial and never ends it (the test kills it)
STUCK_WORKER = """
import sqlite3, sys, time
import optuna
from sb3_trpo_plus.tuning import Heartbeat, rdb_storage
study = optuna.load_study(study_name="s", storage=rdb_storage(sys.argv[1], Heartbeat(1, 4, 1)))
database = sqlite3.connect(sys.argv[1].removeprefix("sqlite:///"))
def objective(trial):
    trial.suggest_float("x", 0.0, 1.0)
    # Killed only once its first heartbeat is in the database (Optuna never finds a trial without one stale)
    query = "SELECT 1 FROM trial_heartbeats WHERE trial_id = ?"
    while database.execute(query, (trial._trial_id,)).fetchone() is None:
        time.sleep(0.05)
    print(trial.number, flush=True)
    time.sleep(600)
study.optimize(objective, n_trials=1)
"""


def test_trial_of_killed_worker_failed_and_retried_before_the_last_worker_leaves(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(storage=url, study_name="s", direction="maximize")
    stuck = subprocess.Popen([PYTHON, "-c", STUCK_WORKER, url], stdout=subprocess.PIPE, text=True, env=subprocess_env())
    assert stuck.stdout is not None
    killed_number = int(stuck.stdout.readline())
    stuck.kill()
    stuck.wait()

    # A worker that opens the study now sees the trial RUNNING with a fresh heartbeat, and runs its own trials until
    # the total (3, counting the RUNNING one as rl_zoo3 does) is reached; before it leaves, the trial has gone stale:
    # it is failed, and its retry is run
    for name, value in HEARTBEAT_ENV.items():
        monkeypatch.setenv(name, value)
    study = tuning.create_shared_study(
        storage=url, study_name="s", load_if_exists=True, direction="maximize", max_total_trials=3
    )
    assert isinstance(study, tuning.SharedStudy) and study.heartbeat == tuning.Heartbeat(1, 4, 1)
    counted = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.PRUNED)
    study.optimize(lambda trial: trial.suggest_float("x", 0.0, 1.0), callbacks=[optuna.study.MaxTrialsCallback(3, counted)])

    trials = study.get_trials()
    assert [trial.state for trial in trials] == [TrialState.FAIL] + [TrialState.COMPLETE] * 3
    retry = trials[-1]
    assert retry.system_attrs["failed_trial"] == killed_number == 0
    assert retry.params == trials[0].params
    assert retry.user_attrs[tuning.WORKER_ATTR] == tuning.WORKER


def test_max_total_trials_is_exact(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = tuning.create_shared_study(storage=url, study_name="s", direction="maximize", max_total_trials=2)
    for value in (1.0, 2.0):
        study.add_trial(optuna.create_trial(value=value))
    ran = []
    # The study is full: the next trial is refused before the objective runs, and the worker stops
    study.optimize(lambda trial: ran.append(trial.number) or 0.0, n_trials=5)
    assert ran == []
    states = [(trial.state, trial.user_attrs.get(tuning.OVER_BUDGET_ATTR)) for trial in study.get_trials()]
    assert states == [(TrialState.COMPLETE, None)] * 2 + [(TrialState.FAIL, True)]


def test_heartbeat_settings_from_environment(monkeypatch):
    for name in (tuning.HEARTBEAT_INTERVAL_VARIABLE, tuning.GRACE_PERIOD_VARIABLE, tuning.MAX_RETRY_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    assert tuning.Heartbeat.from_environment() == tuning.Heartbeat(60, 120, 1)
    monkeypatch.setenv(tuning.HEARTBEAT_INTERVAL_VARIABLE, "10")
    monkeypatch.setenv(tuning.MAX_RETRY_VARIABLE, "3")
    assert tuning.Heartbeat.from_environment() == tuning.Heartbeat(10, 20, 3)
    monkeypatch.setenv(tuning.GRACE_PERIOD_VARIABLE, "5")
    with pytest.raises(ValueError, match=tuning.GRACE_PERIOD_VARIABLE):
        tuning.Heartbeat.from_environment()
    monkeypatch.setenv(tuning.HEARTBEAT_INTERVAL_VARIABLE, "ten")
    with pytest.raises(ValueError, match=tuning.HEARTBEAT_INTERVAL_VARIABLE):
        tuning.Heartbeat.from_environment()
    monkeypatch.setenv(tuning.HEARTBEAT_INTERVAL_VARIABLE, "0")
    assert tuning.Heartbeat.from_environment() is None


def test_rdb_storage_has_heartbeat_and_retry(tmp_path):
    storage = tuning.rdb_storage(f"sqlite:///{tmp_path / 'study.db'}", tuning.Heartbeat(7, 30, 2))
    assert storage.get_heartbeat_interval() == 7 and storage.grace_period == 30
    callback = storage.get_heartbeat_stale_trial_callback()
    assert isinstance(callback, optuna.storages.RetryHeartbeatStaleTrialCallback) and callback._max_retry == 2


# --- what the zoo patch relies on in rl_zoo3 ---------------------------------------------------------------------
