"""The diagnostics picture (``python -m sb3_trpo_plus.plot``) on the logs of real short runs."""

import csv
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import tiny_cartpole
from stable_baselines3.common.logger import configure

from sb3_trpo_plus.callbacks import AdaptiveTrustRegionCallback
from sb3_trpo_plus.plot import NoLogsError, diagnostics_series, main, plot_diagnostics, read_run, resolve_run

pytest.importorskip("matplotlib")
# The short runs below fail on purpose: the line-search health warning is expected
pytestmark = pytest.mark.filterwarnings("ignore:TRPOPlus line search unhealthy:RuntimeWarning")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def train_short_run(log_format: str, folder: Path, tb_log_name: str = "plain") -> Path:
    """
    12 updates that mix failed and accepted line searches: a radius far too large with a single line-search
    iteration fails, the adaptive callback shrinks it until steps are accepted. Returns the run folder.
    """
    model = tiny_cartpole(
        target_kl=100.0,
        line_search_max_iter=1,
        stats_window_size=5,
        tensorboard_log=str(folder) if log_format == "tensorboard" else None,
    )
    if log_format == "csv":
        model.set_logger(configure(str(folder / "csv_run"), ["csv"]))
    callback = AdaptiveTrustRegionCallback(ls_fail_threshold=2, max_kl_decay=0.05, min_max_kl=0.005)
    model.learn(12 * 64, callback=callback, tb_log_name=tb_log_name)
    return folder / "csv_run" if log_format == "csv" else folder / f"{tb_log_name}_1"


def logged_success(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """``train/is_line_search_success`` read straight from the log files, independently of the plot module."""
    if (run_dir / "progress.csv").is_file():
        with open(run_dir / "progress.csv", newline="") as file:
            rows = [row for row in csv.DictReader(file) if row["train/is_line_search_success"] != ""]
        return (
            np.array([float(row["time/total_timesteps"]) for row in rows]),
            np.array([float(row["train/is_line_search_success"]) for row in rows]),
        )
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    events = accumulator.Scalars("train/is_line_search_success")
    return np.array([event.step for event in events], dtype=float), np.array([event.value for event in events])


@pytest.fixture(scope="module", params=["tensorboard", "csv"])
def run(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    return folder, train_short_run(request.param, folder)


def test_kl_series_is_nan_exactly_at_the_failed_updates(run):
    _, run_dir = run
    steps, success = logged_success(run_dir)
    assert 0 < int(success.sum()) < len(success), "the run should mix failed and accepted line searches"

    series = diagnostics_series(run_dir)
    kl = series["kl"]
    np.testing.assert_array_equal(kl.x, steps)
    np.testing.assert_array_equal(np.isnan(kl.y), success == 0.0)
    assert np.all(kl.y[success == 1.0] > 0.0)
    np.testing.assert_array_equal(series["failed_updates"].x, steps[success == 0.0])

    # The target KL is drawn as the curve of what each update used, and it moved
    target_kl = series["target_kl"]
    np.testing.assert_array_equal(target_kl.x, steps)
    assert target_kl.y[0] == 100.0 and target_kl.y.min() < 100.0
    assert len(series["trust_region_shrink"].x) >= 1
    for name in ("episode_reward", "success_rate", "step_fraction", "step_fraction_mean", "ent_coef", "cg_damping"):
        assert len(series[name].x) > 0, name


def test_png_is_written(run, tmp_path):
    folder, run_dir = run
    output = plot_diagnostics(run_dir, tmp_path / "pictures" / "diagnostics.png")
    assert output.read_bytes()[:8] == PNG_MAGIC
    # The command line, pointed at the folder above the run (a `tensorboard_log` folder)
    main([str(folder), "-o", str(tmp_path / "cli.png"), "--title", "test"])
    assert (tmp_path / "cli.png").read_bytes()[:8] == PNG_MAGIC


def test_as_a_module(tmp_path):
    # A hand-written SB3 CSV log: two updates, the second failed (KL logged as nan, as TRPOPlus does)
    (tmp_path / "progress.csv").write_text(
        "time/total_timesteps,rollout/ep_rew_mean,train/kl_divergence_loss,train/is_line_search_success,train/target_kl\n"
        "64,,,,\n"
        "128,20.0,0.004,1.0,0.01\n"
        "192,21.0,nan,0.0,0.01\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "sb3_trpo_plus.plot", str(tmp_path), "-o", str(tmp_path / "module.png")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "module.png").read_bytes()[:8] == PNG_MAGIC
    kl = diagnostics_series(tmp_path)["kl"]
    assert kl.x.tolist() == [128.0, 192.0] and kl.y[0] == 0.004 and math.isnan(kl.y[1])


def test_default_output_is_beside_the_logs(tmp_path, monkeypatch, capsys):
    # The picture goes into the folder of the logs it draws, never into the current folder
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    runs = tmp_path / "runs"
    run_dir = runs / "TRPOPlus_1"
    run_dir.mkdir(parents=True)
    (run_dir / "progress.csv").write_text(
        "time/total_timesteps,rollout/ep_rew_mean,train/kl_divergence_loss,train/is_line_search_success\n"
        "64,20.0,0.004,1.0\n"
        "128,21.0,nan,0.0\n"
    )
    # A folder of runs: the run drawn (the most recent) gets the picture
    main([str(runs)])
    assert (run_dir / "diagnostics.png").read_bytes()[:8] == PNG_MAGIC
    assert f"Wrote {run_dir / 'diagnostics.png'}" in capsys.readouterr().out
    (run_dir / "diagnostics.png").unlink()
    assert plot_diagnostics(run_dir) == run_dir / "diagnostics.png"
    assert (run_dir / "diagnostics.png").read_bytes()[:8] == PNG_MAGIC
    assert list(cwd.iterdir()) == []
    # --output still decides, relative to the current folder
    main([str(run_dir), "--output", "elsewhere/picture.png"])
    assert (cwd / "elsewhere" / "picture.png").read_bytes()[:8] == PNG_MAGIC


def test_most_recent_run_is_drawn(tmp_path):
    older = tmp_path / "runs" / "a_1"
    newer = tmp_path / "runs" / "b_1"
    for index, folder in enumerate((older, newer)):
        folder.mkdir(parents=True)
        (folder / "progress.csv").write_text(f"time/total_timesteps,train/cg_damping\n64,{index}\n")
        os.utime(folder / "progress.csv", (time.time() + index, time.time() + index))
    assert resolve_run(tmp_path / "runs") == newer
    assert read_run(newer)["train/cg_damping"].y.tolist() == [1.0]


def test_csv_needs_no_tensorboard(run, monkeypatch, tmp_path):
    _, run_dir = run
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_accumulator", None)
    if (run_dir / "progress.csv").is_file():
        assert "kl" in diagnostics_series(run_dir)
    else:
        with pytest.raises(ImportError, match=r"sb3-trpo-plus\[plots\]"):
            diagnostics_series(run_dir)


def test_missing_matplotlib(run, monkeypatch, tmp_path):
    _, run_dir = run
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"matplotlib: pip install 'sb3-trpo-plus\[plots\]'"):
        plot_diagnostics(run_dir, tmp_path / "x.png")


def test_core_does_not_import_matplotlib():
    code = "import sys, sb3_trpo_plus, sb3_trpo_plus.callbacks, sb3_trpo_plus.plot; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False"


def test_folder_without_logs(tmp_path, capsys):
    with pytest.raises(NoLogsError, match="No TensorBoard event files"):
        diagnostics_series(tmp_path)
    # An rl_zoo3 run folder trained without --tensorboard-log: the message says what to do
    (tmp_path / "0.monitor.csv").write_text('#{"t_start": 0, "env_id": "CartPole-v1"}\nr,l,t\n')
    with pytest.raises(NoLogsError, match="--tensorboard-log"):
        diagnostics_series(tmp_path)
    with pytest.raises(SystemExit) as error:
        main([str(tmp_path), "-o", str(tmp_path / "x.png")])
    assert error.value.code == 2
    assert "No TensorBoard event files" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(NoLogsError, match="not a folder"):
        diagnostics_series(tmp_path / "missing")


def test_logs_without_the_keys(tmp_path):
    (tmp_path / "progress.csv").write_text("time/total_timesteps,train/loss\n64,0.5\n")
    with pytest.raises(NoLogsError, match="TRPOPlus run"):
        diagnostics_series(tmp_path)


@pytest.mark.zoo
def test_zoo_run(tmp_path):
    pytest.importorskip("rl_zoo3")
    command = [
        sys.executable,
        "-m",
        "rl_zoo3.train",
        "--algo",
        "trpo_plus",
        "--env",
        "CartPole-v1",
        "-n",
        "512",
        "-tb",
        "tb",
        "-f",
        "logs",
        "--eval-freq",
        "-1",
        "--num-threads",
        "1",
        "--seed",
        "0",
        "-params",
        "n_envs:1",
        "n_steps:64",
        "batch_size:64",
        "n_critic_updates:1",
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    zoo_run = tmp_path / "logs" / "trpo_plus" / "CartPole-v1_1"
    # The zoo run folder leads to its TensorBoard run (also when called from another folder)
    assert resolve_run(zoo_run).resolve() == (tmp_path / "tb" / "CartPole-v1" / "TRPOPlus_1").resolve()
    series = diagnostics_series(zoo_run)
    steps, success = logged_success(tmp_path / "tb" / "CartPole-v1" / "TRPOPlus_1")
    np.testing.assert_array_equal(np.isnan(series["kl"].y), success == 0.0)
    assert len(steps) >= 6
    main([str(zoo_run), "-o", str(tmp_path / "zoo.png")])
    assert (tmp_path / "zoo.png").read_bytes()[:8] == PNG_MAGIC
    assert not math.isnan(series["target_kl"].y[0])
