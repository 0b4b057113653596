"""
The benchmark scripts (``benchmarks/``) run end to end on tiny budgets, in a temporary folder: this checks that they
still work, not what they measure. Marker ``benchmarks`` (deselect with ``-m "not benchmarks"``).
"""

import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch as th

pytest.importorskip("rl_zoo3")

from benchmarks import (
    atari,
    fvp,
    learning,
    report,
    report_atari,
    report_breakout,
    report_common,
    report_minatar,
    report_mujoco,
    report_speed,
    report_stats,
    throughput,
)
from benchmarks._common import load_hyperparams
from benchmarks.experiments import direction_quality, layer_change, minatar_tuning, rollout_batch

pytestmark = pytest.mark.benchmarks

ALGOS = ["trpo_plus", "trpo", "ppo"]


def test_fvp(tmp_path):
    out = tmp_path / "fvp.json"
    args = ["--batch", "8", "--threads", "1", "--repeats", "1", "--vectors", "1", "--cg-steps", "2"]
    result = fvp.main([*args, "--cg-sub-sampling-factor", "2", "--out", str(out)])
    assert json.loads(out.read_text())["cases"].keys() == {"nature_cnn", "mlp_gaussian", "mlp_categorical"}
    assert set(result["cases"]["nature_cnn"]["batches"]) == {"full", "every_2th"}
    for case in result["cases"].values():
        for batch in case["batches"].values():
            assert batch["error"].keys() >= {"analytic", "functional"}
            # the same matrix whichever way it is computed (float32 round-off only)
            assert all(error["rel"] < 1e-4 for error in batch["error"].values())
            assert all(t > 0 for t in batch["product_s"].values())


def test_throughput(tmp_path):
    out = tmp_path / "throughput.json"
    argv = ["--envs", "cartpole", "breakout", "--cartpole-updates", "1", "--updates", "1", "--warmup-updates", "0"]
    argv += ["--breakout-n-steps", "4", "--breakout-n-envs", "2", "--phase-timing", "--threads", "1", "--out", str(out)]
    # TRPOPlus's Breakout hyperparameters can be overridden (here: the CNN shared by actor and critic)
    result = throughput.main([*argv, "--params", "policy_kwargs:dict(share_features_extractor=True)"])
    breakout_plus = result["envs"]["breakout"]["algos"]["trpo_plus"]
    assert breakout_plus["hyperparams"]["policy_kwargs"] == "dict(share_features_extractor=True)"
    assert breakout_plus["hyperparams_source"].endswith("with policy_kwargs:dict(share_features_extractor=True)")
    assert "with" not in result["envs"]["cartpole"]["algos"]["trpo_plus"]["hyperparams_source"]
    for env in result["envs"].values():
        assert env["algos"].keys() == set(ALGOS)
        assert env["rollout_only"]["steps_per_s"] > 0
        assert {"trpo_plus/trpo", "trpo_plus/ppo", "trpo_plus/rollout_only"} <= env["ratios"].keys()
        phases = env["algos"]["trpo_plus"]["phases"]
        # At most the CG products (it may stop early) and the step-length product; the parts add up to at most the whole
        assert 2 <= phases["fvp_calls"] <= 17
        parts = ["actor_params", "gradient", "fvp_setup", "cg", "curvature", "line_search", "critic"]
        assert sum(phases[part] for part in parts) <= phases["total"] + 1e-6
        # the line-search candidates tried, on average (1 .. line_search_max_iter)
        assert 1 <= phases["line_search_iters"] <= 15
    assert json.loads(out.read_text())["envs"]["breakout"]["algos"]["ppo"]["n_steps"] == 4
    # without critic_kl_fraction (CartPole's entry) there is no KL check of the critic: the part is left out, not
    # reported as NaN; with it (the atari entry) it is timed
    assert "critic_kl_check" not in result["envs"]["cartpole"]["algos"]["trpo_plus"]["phases"]
    assert breakout_plus["phases"]["critic_kl_check"] >= 0


def test_throughput_phase_timing_critic_kl_fraction(tmp_path):
    # With critic_kl_fraction > 0 the critic runs first and its KL checks assign the extractor's parameters: the line
    # search still starts after the CG, and every part is a span of this update, in order
    argv = ["--envs", "breakout", "--algos", "trpo_plus", "--updates", "2", "--warmup-updates", "0"]
    argv += ["--breakout-n-steps", "8", "--breakout-n-envs", "2", "--phase-timing", "--threads", "1"]
    argv += ["--params", "policy_kwargs:dict(share_features_extractor=True)", "critic_kl_fraction:0.5"]
    result = throughput.main([*argv, "--out", str(tmp_path / "throughput.json")])
    # the run stops after the updates it times, long before its budget: the atari entry's radius schedule is near
    # its start in each (at the end of a budget of 2 updates, the second would be closed at radius 0)
    measured = result["envs"]["breakout"]["algos"]["trpo_plus"]
    assert measured["timed_updates"] == 2 and measured["phases"]["line_search_iters"] >= 1
    phases = measured["phases"]
    parts = ["actor_params", "gradient", "fvp_setup", "cg", "curvature", "line_search", "critic", "critic_kl_check"]
    assert all(phases[part] >= 0 for part in parts), phases
    assert sum(phases[part] for part in parts) <= phases["total"] + 1e-6


def test_throughput_rounds(tmp_path):
    # Several rounds, in turn: every measurement kept per round, rates and ratios from the sums
    argv = ["--envs", "cartpole", "--algos", "trpo_plus", "ppo", "--cartpole-updates", "1", "--warmup-updates", "0"]
    result = throughput.main([*argv, "--rounds", "2", "--out", str(tmp_path / "throughput.json")])
    cartpole = result["envs"]["cartpole"]
    plus, ppo = cartpole["algos"]["trpo_plus"], cartpole["algos"]["ppo"]
    assert cartpole["rounds"] == 2 and plus["timed_updates"] == 2 and len(plus["train_s_per_update"]) == 2
    assert len(plus["steps_per_s_by_round"]) == 2 and len(cartpole["rollout_only"]["steps_per_s_by_round"]) == 2
    assert plus["steps_per_s"] == pytest.approx(plus["steps"] / (plus["rollout_s"] + plus["train_s"]))
    assert cartpole["ratios"]["trpo_plus/ppo"] == pytest.approx(plus["steps_per_s"] / ppo["steps_per_s"])
    by_round = [ratios["trpo_plus/ppo"] for ratios in cartpole["ratios_by_round"]]
    assert by_round == pytest.approx([a / b for a, b in zip(plus["steps_per_s_by_round"], ppo["steps_per_s_by_round"])])


@pytest.fixture(scope="module")
def learning_results(tmp_path_factory) -> Path:
    """One tiny run of each algorithm on CartPole-v1 (in-process, one key per call)."""
    results = tmp_path_factory.mktemp("results")
    for algo in ALGOS:
        learning.main(
            [
                *("--algos", algo, "--envs", "CartPole-v1", "--seeds", "0", "--n-timesteps", "1024", "--eval-freq", "512"),
                *("--eval-episodes", "2", "--n-eval-envs", "2", "--results-dir", str(results)),
            ]
        )
    return results


def test_learning_runs_and_skips_finished(learning_results, capsys):
    for algo in ALGOS:
        record = json.loads((learning_results / "learning" / algo / "CartPole-v1" / "seed0.json").read_text())
        assert record["curve"]["timesteps"][0] == 0 and record["curve"]["timesteps"][-1] == 1024
        assert len(record["final"]["returns"]) == 2
        assert record["hyperparams_source"].endswith(":CartPole-v1")
    # The sweep finds every key done: nothing is started
    sweep = ["--algos", *ALGOS, "--envs", "CartPole-v1", "--seeds", "0", "--n-timesteps", "1024", "--jobs", "2"]
    learning.main([*sweep, "--results-dir", str(learning_results)])
    assert "3 of 3 runs done already; 0 to run" in capsys.readouterr().out


def test_learning_params(tmp_path, capsys):
    # A tuning variant: the entry with overrides, recorded as such, in its own results folder
    argv = ["--algos", "trpo_plus", "--envs", "CartPole-v1", "--seeds", "0", "--n-timesteps", "256"]
    argv += ["--eval-episodes", "1", "--n-eval-envs", "1", "--results-dir", str(tmp_path)]
    learning.main([*argv, "--params", "n_steps:64", "target_kl:0.02"])
    record = json.loads((tmp_path / "learning" / "trpo_plus" / "CartPole-v1" / "seed0.json").read_text())
    assert record["hyperparams"]["n_steps"] == 64 and record["hyperparams"]["target_kl"] == 0.02
    assert record["hyperparams_source"].endswith(":CartPole-v1 with n_steps:64 target_kl:0.02")
    # the sweep's subprocesses get the overrides too
    args = learning.parse_args([*argv, "--params", "n_steps:64"])
    assert learning.child_command(args, "trpo_plus", "CartPole-v1", 0)[-2:] == ["--params", "n_steps:64"]
    # refused at once, naming the parameter: several algorithms, the reported results folder, a malformed pair
    for bad, message in [
        (["--algos", "trpo_plus", "ppo", "--params", "n_steps:64", "--results-dir", str(tmp_path)], "one in --algos"),
        (["--algos", "trpo_plus", "--params", "n_steps:64"], "--results-dir of its own"),
        (["--algos", "trpo_plus", "--params", "n_steps", "--results-dir", str(tmp_path)], "key:value pairs"),
    ]:
        with pytest.raises(SystemExit):
            learning.parse_args(["--envs", "CartPole-v1", *bad])
        assert message in capsys.readouterr().err


def test_minatar_tuning_decision():
    # Scale: random 0, PPO 10 on every game, so a score of 10 is 1.0 normalized
    scales = {game: (0.0, 10.0) for game in minatar_tuning.GAMES}
    entry = {game: [10.0, 10.0] for game in minatar_tuning.GAMES}

    def variant(**changes):
        return {**entry, **{game: [score, score] for game, score in changes.items()}}

    # A gain of 0.08 (4 / 10 / 5 games), led by SpaceInvaders: taken
    choice, summary = minatar_tuning.decide({"entry": entry, "v": variant(SpaceInvaders=14.0)}, scales)
    assert choice == "v" and summary["v"]["aggregate"] == pytest.approx(1.08)
    # The same gain elsewhere, SpaceInvaders unchanged: the entry stays
    choice, summary = minatar_tuning.decide({"entry": entry, "v": variant(Asterix=14.0)}, scales)
    assert choice == "entry" and summary["v"]["checks"]["deciding_game"] is False
    # A gain of 0.04 only: the entry stays
    assert minatar_tuning.decide({"entry": entry, "v": variant(SpaceInvaders=12.0)}, scales)[0] == "entry"
    # A large gain paid for by one game 0.3 lower: the entry stays
    choice, summary = minatar_tuning.decide({"entry": entry, "v": variant(SpaceInvaders=20.0, Freeway=7.0)}, scales)
    assert choice == "entry" and summary["v"]["checks"] == {"gain": True, "deciding_game": True, "no_game_drop": False}
    # Of two variants that pass, the higher aggregate
    both = {"entry": entry, "a": variant(SpaceInvaders=14.0), "b": variant(SpaceInvaders=16.0)}
    assert minatar_tuning.decide(both, scales)[0] == "b"
    # Every configuration on every game, seed by seed: the first seed of all before the second
    lines = minatar_tuning.commands("python")
    assert len(lines) == len(minatar_tuning.SEEDS) * len(minatar_tuning.VARIANTS) * len(minatar_tuning.GAMES)
    half = len(lines) // 2
    assert all("--seeds 100 " in line for line in lines[:half]) and all("--seeds 101 " in line for line in lines[half:])
    assert sum("--params target_kl:0.02" in line for line in lines) == 2 * len(minatar_tuning.GAMES)
    # Round 2: its own variants, and the entry's runs (the same commands, so shared with round 1)
    second = minatar_tuning.commands("python", round_=2)
    assert not any("target_kl:0.02" in line and "critic_kl_fraction" not in line for line in second)
    assert {line for line in second if "--params" not in line} == {line for line in lines if "--params" not in line}
    assert sum("--params critic_kl_fraction:0.5" in line for line in second) == 4 * len(minatar_tuning.GAMES)
    # Rule 5: of the variants picked by the rounds, the highest aggregate; the entry when no round picked one
    picked_a = minatar_tuning.decide({"entry": entry, "a": variant(SpaceInvaders=14.0)}, scales)
    picked_b = minatar_tuning.decide({"entry": entry, "b": variant(SpaceInvaders=16.0)}, scales)
    kept = minatar_tuning.decide({"entry": entry, "c": variant(Asterix=30.0)}, scales)
    assert kept[0] == "entry" and kept[1]["c"]["aggregate"] > picked_b[1]["b"]["aggregate"]
    assert minatar_tuning.combine({1: picked_a, 2: picked_b, 3: kept}) == "b"
    assert minatar_tuning.combine({1: kept}) == "entry"
    # Round 3: one variant with two overrides, and again the entry's runs
    third = minatar_tuning.commands("python", round_=3)
    assert {line for line in third if "--params" not in line} == {line for line in lines if "--params" not in line}
    assert sum("--params critic_kl_fraction:0.33 target_kl:0.015" in line for line in third) == 2 * len(minatar_tuning.GAMES)


def test_learning_resumes_from_checkpoint(tmp_path):
    # Acrobot-v1 uses VecNormalize: its statistics are checkpointed and restored too
    hyperparams = {**load_hyperparams("trpo_plus", "Acrobot-v1")[0], "n_steps": 128}  # 256 steps per update
    kwargs = {"hyperparams": hyperparams, "eval_freq": 256, "eval_episodes": 1, "n_eval_envs": 1, "checkpoint_freq": 256}
    first = learning.train_run("trpo_plus", "Acrobot-v1", 0, 512, tmp_path, **kwargs)
    assert first["resumed_from"] is None
    assert sorted(path.name for path in (tmp_path / "checkpoints").iterdir()) == [
        "rl_model_512_steps.zip",
        "rl_model_vecnormalize_512_steps.pkl",
    ]
    second = learning.train_run("trpo_plus", "Acrobot-v1", 0, 1024, tmp_path, **kwargs)
    assert second["resumed_from"] == 512
    assert second["num_timesteps_done"] == 1024
    assert second["curve"]["timesteps"] == [0, 256, 512, 768, 1024]
    # a run stopped after its last step (during the final evaluation) resumes to run that evaluation alone
    third = learning.train_run("trpo_plus", "Acrobot-v1", 0, 1024, tmp_path, **kwargs, final_episodes=2)
    assert third["resumed_from"] == 1024 and third["num_timesteps_done"] == 1024
    assert third["curve"]["timesteps"] == [0, 256, 512, 768, 1024] and len(third["curve"]["returns"][-1]) == 2


def test_checkpoint_killed_while_saving_leaves_the_previous_one(tmp_path):
    _, ResumableCheckpoint = learning._curve_callback_class()

    class Saver:
        def __init__(self, fail: bool) -> None:
            self.fail = fail

        def save(self, path: str) -> None:
            Path(path).write_bytes(b"partly written")
            if self.fail:
                raise KeyboardInterrupt  # the process killed in the middle of writing

    class Model(Saver):
        def get_vec_normalize_env(self) -> Saver:
            return Saver(self.fail)

    callback = ResumableCheckpoint(1, str(tmp_path), name_prefix=learning.CHECKPOINT_PREFIX, save_vecnormalize=True)
    for steps, fail in [(100, False), (200, False), (300, True)]:
        callback.model, callback.num_timesteps, callback.n_calls = Model(fail), steps, 1
        if fail:
            with pytest.raises(KeyboardInterrupt):
                callback._on_step()
        else:
            callback._on_step()
    model_path, vec_normalize_path, steps = learning.latest_checkpoint(tmp_path)
    assert steps == 200 and model_path.name == "rl_model_200_steps.zip"
    assert vec_normalize_path.name == "rl_model_vecnormalize_200_steps.pkl"
    assert not (tmp_path / "rl_model_100_steps.zip").exists()  # only the latest whole checkpoint is kept


def test_atari_checkpoint_resume_and_diagnostics(tmp_path, monkeypatch):
    argv = ["--env", "Breakout", "--algo", "trpo_plus", "--seed", "0", "--params", "n_steps:8", "n_envs:2"]
    argv += ["--checkpoint-freq", "16", "--eval-freq", "32", "--eval-episodes", "1", "--final-episodes", "2"]
    argv += ["--n-eval-envs", "1", "--results-dir", str(tmp_path)]
    monkeypatch.setenv("BENCHMARK_COMMIT", "first")
    atari.main([*argv, "--budget", "32"])
    with pytest.raises(SystemExit, match="--resume"):
        atari.main([*argv, "--budget", "64"])
    monkeypatch.setenv("BENCHMARK_COMMIT", "second")
    record = atari.main([*argv, "--budget", "64", "--resume"])
    assert record["resumed_from"] == 32 and record["num_timesteps_done"] == 64
    # each part of the run names the commit it ran at
    assert [(s["steps"], s["commit"]) for s in record["segments"]] == [([0, 32], "first"), ([32, 64], "second")]
    # and the record's own field says it is the last command's, not the run's
    assert record["finished_at_commit"] == "second" and "commit" not in record
    assert record["segments"][0]["where"].endswith("cores, cpu")
    assert (tmp_path / "atari" / "breakout" / "trpo_plus" / "seed0.json").is_file()
    assert record["hyperparams"]["target_kl"] == "lin_0.08"  # the entry's values, as its YAML writes them
    # the final evaluation has its own episode count and replaces the periodic one made at the same step
    curve = record["curve"]
    assert curve["timesteps"] == [0, 32, 64] and len(curve["returns"][-1]) == 2 and len(curve["returns"][0]) == 1
    assert record["evaluation"]["final_episodes"] == 2
    assert record["late"]["mean"] == pytest.approx(np.mean(curve["mean"]))
    # the diagnostics: one row per update (4 updates of 16 steps), from both sessions, binned by 50k steps
    diagnostics = record["diagnostics"]
    assert diagnostics["bin_end"] == [50_000] and diagnostics["n_updates"] == [4]
    rows = json.loads((tmp_path / "tmp" / "atari" / "breakout" / "trpo_plus" / "seed0" / "diagnostics.json").read_text())
    assert [row["timesteps"] for row in rows] == [16, 32, 48, 64]
    for key in ("train/explained_variance", "train/is_line_search_success", "train/entropy", "train/step_fraction"):
        assert diagnostics[key][0] == pytest.approx(np.nanmean([row[key] for row in rows]))


def test_bin_diagnostics_counts_failed_line_searches():
    rows = [{"timesteps": t, "train/kl": kl} for t, kl in [(10, 0.01), (20, math.nan), (30, 0.03), (60, math.nan)]]
    binned = learning.bin_diagnostics(rows, every=50)
    assert binned["bin_end"] == [50, 100] and binned["n_updates"] == [3, 1]
    assert binned["train/kl"] == [pytest.approx(0.02), None]
    assert binned["train/kl:non_finite"] == [pytest.approx(1 / 3), 1.0]


def test_report(learning_results, tmp_path):
    pytest.importorskip("rliable")
    out = tmp_path / "docs" / "benchmarks.md"
    text = report.main(["--results-dir", str(learning_results), "--out", str(out)])
    assert out.read_text() == text
    assert "### CartPole-v1" in text and "**incomplete** (1 < 5 seeds)" in text
    assert "Not run yet: `python -m benchmarks.fvp" in text
    assert (tmp_path / "docs" / "images" / "learning_CartPole-v1.png").is_file()


def test_report_intervals_are_seeded():
    """The same scores give the same bootstrap intervals (rliable draws from NumPy's global generator)."""
    pytest.importorskip("rliable")
    import numpy as np

    scores = {"trpo_plus": np.array([3.0, 7.5, 1.0, 9.0, 4.2, 6.1, 2.2]), "ppo": np.array([5.0, 2.5, 8.0, 6.5, 3.3])}
    np.random.seed(123)
    first = report_stats.interval_estimates(scores)
    after_first = np.random.rand()
    np.random.seed(456)  # another global state before the second call
    assert first == report_stats.interval_estimates(scores)
    # the caller's generator is left as it was
    np.random.seed(123)
    assert np.random.rand() == after_first


def test_trimmed_mean_is_scipys_and_rliables_iqm_to_the_bit():
    """The bootstrap's IQM gives what rliable's ``aggregate_iqm`` (``scipy.stats.trim_mean(x, 0.25, axis=None)``) and
    ``trim_mean(x, 0.25, axis=0)`` give on C-ordered matrices, bit for bit."""
    pytest.importorskip("rliable")
    import numpy as np
    from rliable import metrics
    from scipy import stats

    # exact small cases (SciPy's own examples): the middle half's mean
    assert report_stats.trimmed_mean(np.array([4.0, 1.0, 3.0, 2.0])) == 2.5
    x2 = np.array([[1.0, 2, 3, 5], [10, 20, 30, 50]])
    np.testing.assert_array_equal(report_stats.trimmed_mean(x2.T, axis=0), [2.5, 25.0])
    rng = np.random.default_rng(0)
    for shape in [(1, 1), (3, 1), (5, 1), (7,), (3, 5), (5, 5), (10, 3), (20, 5), (30, 3), (50, 1)]:
        for values in (rng.normal(size=shape) * 1e3, rng.integers(0, 4, size=shape).astype(float)):  # ties too
            assert report_stats.trimmed_mean(values) == metrics.aggregate_iqm(values)
            if values.ndim == 2:
                np.testing.assert_array_equal(report_stats.trimmed_mean(values, axis=0), stats.trim_mean(values, 0.25, axis=0))
    # NaN propagates, per slice
    with_nan = np.array([[1.0, 2.0], [np.nan, 3.0], [4.0, 5.0]])
    assert np.isnan(report_stats.trimmed_mean(with_nan))
    per_column = report_stats.trimmed_mean(with_nan, axis=0)
    assert np.isnan(per_column[0]) and per_column[1] == stats.trim_mean(with_nan[:, 1], 0.25)


def test_probability_of_improvement_is_rliables_to_the_bit():
    """P(X > Y) averaged over tasks, counted pair by pair, gives what rliable's (SciPy's Mann-Whitney U) gives."""
    pytest.importorskip("rliable")
    import numpy as np
    from rliable import metrics

    # an exact case: task 0, X above Y in 3 of 4 pairs; task 1, one tie of 4 pairs and nothing above: (0.75 + 0.125) / 2
    x, y = np.array([[2.0, 1.0], [4.0, 0.0]]), np.array([[3.0, 1.0], [1.0, 5.0]])
    assert report_stats.probability_of_improvement(x, y) == 0.4375 == metrics.probability_of_improvement(x, y)
    assert report_stats.probability_of_improvement(x, x) == 0.5  # the same runs: neither is better
    rng = np.random.default_rng(1)
    for runs_x, runs_y, tasks in [(3, 3, 5), (5, 3, 1), (10, 10, 3), (2, 7, 4)]:
        for draw in (rng.normal, lambda size: rng.integers(0, 3, size=size).astype(float)):  # ties too
            x, y = draw(size=(runs_x, tasks)), draw(size=(runs_y, tasks))
            assert report_stats.probability_of_improvement(x, y) == metrics.probability_of_improvement(x, y)
    # a NaN score (a failed run) is not hidden: NaN, as rliable gives
    with_nan = np.array([[1.0], [np.nan], [3.0]])
    assert np.isnan(report_stats.probability_of_improvement(with_nan, np.array([[2.0], [0.0]])))
    assert np.isnan(metrics.probability_of_improvement(with_nan, np.array([[2.0], [0.0]])))
    assert np.isnan(report_stats.probability_of_improvement(with_nan, with_nan))
    with pytest.raises(ValueError):  # not the same tasks
        report_stats.probability_of_improvement(np.ones((3, 2)), np.ones((3, 1)))


def test_rollout_ceiling_ratio():
    """The ceiling is the faster of the rollout-only pass and TRPOPlus's own rollouts inside its training run."""
    env = {"algos": {"trpo_plus": {"steps_per_s": 100.0, "rollout_s": 40.0, "train_s": 60.0}}}
    env["rollout_only"] = {"steps_per_s": 150.0}  # slower than the own rollouts (250 steps/s): the own rollouts count
    assert report_speed._ceiling_ratio(env) == pytest.approx(0.4)
    env["rollout_only"] = {"steps_per_s": 400.0}  # faster: the rollout-only pass counts
    assert report_speed._ceiling_ratio(env) == pytest.approx(0.25)


def test_breakout_record_differences_from_entry():
    entry, _ = load_hyperparams("trpo_plus", "BreakoutNoFrameskip-v4")
    record = {"algo": "trpo_plus", "env_id": "BreakoutNoFrameskip-v4", "hyperparams": {**entry, "n_timesteps": 1e6}}
    assert report_breakout.differences_from_entry(record) == "none"
    record["hyperparams"] = {**entry, "n_timesteps": 1e6, "callback": []}  # no callback, as the entry
    assert report_breakout.differences_from_entry(record) == "none"
    record["hyperparams"] = {**entry, "callback": ["sb3_trpo_plus.callbacks.AdaptiveTrustRegionCallback"]}
    assert report_breakout.differences_from_entry(record).startswith("callback: ")
    record["hyperparams"] = {**entry, "n_steps": entry["n_steps"] * 2, "extra_key": 1}
    assert report_breakout.differences_from_entry(record) == (
        f"extra_key: 1 (entry: null); n_steps: {entry['n_steps'] * 2} (entry: {entry['n_steps']})"
    )


def test_minatar_aggregate(tmp_path, monkeypatch):
    # Normalized by random = 0 and PPO = 1: PPO's mean is 1 by construction, a TRPOPlus twice as far above random is 2,
    # and a game where TRPOPlus falls below PPO's interval is flagged
    from benchmarks.report_minatar import MINATAR_GAMES, MINATAR_SEEDS, minatar_section

    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 1000)

    random_scores = {f"MinAtar/{game}-v1": {"mean": 1.0} for game in MINATAR_GAMES}
    (tmp_path / "minatar_random.json").write_text(json.dumps({"games": random_scores}))
    for game in MINATAR_GAMES:
        env_id = f"MinAtar/{game}-v1"
        for seed in [0, *MINATAR_SEEDS]:  # seed 0 chose the entry: left out
            ppo = 10.0 + seed
            plus = 1.0 + 2.0 * (ppo - 1.0) if game != "Freeway" else 0.0
            for algo, score in (("ppo", ppo), ("trpo_plus", plus if seed else 1000.0)):
                path = tmp_path / "learning" / algo / env_id.replace("/", "-") / f"seed{seed}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"env_id": env_id, "algo": algo, "seed": seed, "final": {"mean": score}}))
    text = minatar_section(tmp_path, tmp_path / "images", tmp_path)
    # the aggregate's performance profile, linked from the page
    assert (tmp_path / "images" / "minatar_profile.png").is_file() and "](images/minatar_profile.png)" in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert "**yes**" in rows["Freeway"] and "**yes**" not in rows["Breakout"]
    assert "| 2.00 |" in rows["Breakout"]  # TRPOPlus's normalized mean on a game
    ppo_row, plus_row = rows["PPO"], rows["TRPOPlus"]
    assert ppo_row.split(" | ")[2].startswith("1.00 ")  # PPO's mean normalized score
    # four games at 2.0 and Freeway at (0 - 1) / (PPO - 1) < 0: the mean of the 15 runs
    freeway = [(0.0 - 1.0) / (np.mean([10.0 + s for s in MINATAR_SEEDS]) - 1.0)] * len(MINATAR_SEEDS)
    expected_mean = np.mean(
        [2.0 * (10.0 + s - 1.0) / (np.mean([10.0 + t for t in MINATAR_SEEDS]) - 1.0) for s in MINATAR_SEEDS] * 4 + freeway
    )
    assert plus_row.split(" | ")[2].startswith(f"{expected_mean:.2f} ")
    # Issue 12's goal: the aggregate IQM is met, but a game below PPO's interval misses it, and the game is named
    assert "no game below PPO's interval): **missed**" in text
    assert "at least 1.1: met; games below PPO's interval: Freeway)" in text


def test_minatar_previous_entry(tmp_path, monkeypatch):
    # A previous entry's TRPOPlus runs, kept in a folder of their own, are compared with the PPO runs of the results
    # folder; the TRPOPlus runs of the results folder (the entry now) are not mixed in. A game without TRPOPlus runs
    # still shows PPO's IQM
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    seeds = report_minatar.MINATAR_SEEDS
    random_scores = {f"MinAtar/{game}-v1": {"mean": 0.0} for game in report_minatar.MINATAR_GAMES}
    (tmp_path / "minatar_random.json").write_text(json.dumps({"games": random_scores}))
    previous = tmp_path / report_minatar.MINATAR_PREVIOUS_ENTRY

    def write(folder, algo, game, score):
        for seed in seeds:
            env_id = f"MinAtar/{game}-v1"
            path = folder / "learning" / algo / env_id.replace("/", "-") / f"seed{seed}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"env_id": env_id, "algo": algo, "seed": seed, "final": {"mean": score}}))

    for game in report_minatar.MINATAR_GAMES:
        write(tmp_path, "ppo", game, 10.0)
        write(previous, "trpo_plus", game, 30.0)
    write(tmp_path, "trpo_plus", "Asterix", 50.0)  # the entry now: one game so far

    def rows(text):
        return {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}

    now = rows(report_minatar.minatar_section(tmp_path, tmp_path / "images", tmp_path))
    assert "| 50.0 " in now["Asterix"] and "| 5.00 |" in now["Asterix"]
    assert now["Breakout"].split(" | ")[2:4] == [report_common.NOT_RUN, "10.0 [10.0, 10.0]"]
    before_text = report_minatar.minatar_section(
        tmp_path, tmp_path / "images", tmp_path, plus_dir=previous, intro_block="minatar.previous"
    )
    before = rows(before_text)
    assert "5.1 The MinAtar entry before" in before_text
    assert all("| 30.0 " in before[game] and "| 3.00 |" in before[game] for game in report_minatar.MINATAR_GAMES)
    assert before["TRPOPlus"].split(" | ")[1].startswith("3.00 ")  # the aggregate IQM, from the previous runs only
    # The goal is judged once every game has its runs: met by the previous entry, not yet for the entry now
    assert "no game below PPO's interval): **met**" in before_text and "games below PPO's interval: none)" in before_text
    assert "Goal (" not in report_minatar.minatar_section(tmp_path, tmp_path / "images", tmp_path)


def test_minatar_previous_entry_keeps_its_seeds(tmp_path, monkeypatch):
    # Section 5 moves to more seeds (its new runs); the entry before was run on its own seeds only and is compared
    # with PPO on those, not marked incomplete for the seeds it never had
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    previous_seeds = report_minatar.MINATAR_PREVIOUS_ENTRY_SEEDS
    now_seeds = [*previous_seeds, max(previous_seeds) + 1, max(previous_seeds) + 2]
    random_scores = {f"MinAtar/{game}-v1": {"mean": 0.0} for game in report_minatar.MINATAR_GAMES}
    (tmp_path / "minatar_random.json").write_text(json.dumps({"games": random_scores}))
    runs = [(tmp_path, "ppo", now_seeds), (tmp_path, "trpo_plus", now_seeds)]
    runs.append((tmp_path / report_minatar.MINATAR_PREVIOUS_ENTRY, "trpo_plus", previous_seeds))
    for folder, algo, seeds in runs:
        for game in report_minatar.MINATAR_GAMES:
            for seed in seeds:
                env_id = f"MinAtar/{game}-v1"
                path = folder / "learning" / algo / env_id.replace("/", "-") / f"seed{seed}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                record = {"env_id": env_id, "algo": algo, "seed": seed, "final": {"mean": 10.0 + seed}}
                path.write_text(json.dumps(record))
    now, before, _ = report_minatar.minatar_sections(tmp_path, tmp_path / "images", tmp_path, now_seeds)
    n_now, n_before = len(now_seeds), len(previous_seeds)
    assert f"| {n_now} / {n_now} |" in now and "Goal (" in now
    assert f"| {n_before} / {n_before} |" in before and "Goal (" in before
    assert f"its runs (seeds {', '.join(map(str, previous_seeds))})" in before


def test_minatar_5m_section(tmp_path, monkeypatch):
    # Section 5.2 as benchmarks/results/minatar_5m/rule.md reads it. Random 2 and PPO's finals 12, 22, 62 (IQM 32) on
    # every game: TRPOPlus's 32, 62 and 182 are 1, 2 and 6 normalized (IQM over the 15 runs 2.67, mean 3). A run keeps
    # its 2M evaluation when the mean of its periodic 4.5M-5M evaluations does (not its final one, nor the extra
    # evaluation past 5M); it rises when that mean is above the one at 3.5M-4M. The end-of-run diagnostics are the
    # bins past 4.5M: a low entropy or acceptance there is a collapse, the same before it is not
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    plotted = {}  # per game, the seeds of each algorithm that the entropy picture drew
    plot_entropy = report_minatar.plot_entropy_panels

    def record_entropy(by_game, *args, **kwargs):
        plotted.update({game: {algo: sorted(runs) for algo, runs in by_algo.items()} for game, by_algo in by_game.items()})
        return plot_entropy(by_game, *args, **kwargs)

    monkeypatch.setattr(report_minatar, "plot_entropy_panels", record_entropy)
    games = report_minatar.MINATAR_GAMES
    (tmp_path / "minatar_random.json").write_text(json.dumps({"games": {f"MinAtar/{g}-v1": {"mean": 2.0} for g in games}}))
    steps = list(range(0, 5_000_001, 250_000))

    def write(algo, env_id, seed, final, evaluations, entropy=None, accepted=None, n_timesteps=5_000_000, **extra):
        folder = extra.pop("folder", "minatar_5m")
        path = tmp_path / folder / "learning" / algo / env_id.replace("/", "-") / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "env_id": env_id,
            "algo": algo,
            "seed": seed,
            "n_timesteps": n_timesteps,
            "final": {"mean": final},
            "evaluation": {"freq": 250_000},
            # the periodic evaluations at each multiple, and the final one just past the budget, as the harness's
            "curve": {"timesteps": [*steps, 5_000_192], "mean": [evaluations.get(t, 10.0) for t in steps] + [final]},
            **extra,
        }
        if entropy is not None:
            key, sign = ("train/entropy", 1) if algo == "trpo_plus" else ("train/entropy_loss", -1)
            record["diagnostics"] = {"bin_end": steps[1:], "n_updates": [10] * 20, key: [sign * e for e in entropy]}
            if accepted is not None:
                record["diagnostics"]["train/is_line_search_success"] = accepted
        path.write_text(json.dumps(record))

    def plus_evaluations(at_2m=38.0, before=(33.0, 34.0, 35.0)):
        late = {4_250_000: 20.0, 4_500_000: 36.0, 4_750_000: 39.0, 5_000_000: 45.0}  # the last three: 40
        return {2_000_000: at_2m, **dict(zip((3_500_000, 3_750_000, 4_000_000), before)), **late}

    # a TRPOPlus run on a game PPO has not run yet: no collapse verdict without PPO's entropy
    write("trpo_plus", "MinAtar/Asterix-v1", 1, 32.0, plus_evaluations(), [0.5] * 20, [1.0] * 20)
    text = report_minatar.minatar_5m_section(tmp_path, tmp_path / "images", tmp_path)
    assert "| Asterix | TRPOPlus | 1 |" in text and "| 1.00 | not yet (no PPO run) |" in text
    for game in games:
        env_id = f"MinAtar/{game}-v1"
        for seed, ppo, plus in ((1, 12.0, 32.0), (2, 22.0, 62.0), (3, 62.0, 182.0)):
            ppo_entropy = None if (game, seed) == ("Freeway", 3) else [1.0] * 20
            write("ppo", env_id, seed, ppo, {}, ppo_entropy)
            entropy, accepted = [0.5] * 20, [1.0] * 20
            if (game, seed) == ("Breakout", 3):
                entropy[17:] = [5.0, 0.1, 0.3]  # 4.5M (before the window), 4.75M, 5M: 0.2 at the end
            if (game, seed) == ("Seaquest", 1):
                accepted[18:] = [0.85, 0.85]
            if (game, seed) == ("Freeway", 2):
                evaluations = plus_evaluations(at_2m=50.0)
            elif (game, seed) == ("Asterix", 1):
                evaluations = plus_evaluations(before=(41.0, 42.0, 43.0))
            else:
                evaluations = plus_evaluations()
            if (game, seed) != ("Seaquest", 3):
                write("trpo_plus", env_id, seed, plus, evaluations, entropy, accepted)
    write("trpo_plus", "MinAtar/Seaquest-v1", 3, 182.0, plus_evaluations(), [0.5] * 20, [1.0] * 20, 2_000_000)
    write("ppo", "MinAtar/Pong-v1", 1, 5.0, {})  # not one of the rule's games
    text = report_minatar.minatar_5m_section(tmp_path, tmp_path / "images", tmp_path)
    assert "| Seaquest | TRPOPlus | 1, 2 |" in text and "not yet (4 of 5 games" in text and "Pong" not in text
    # the entropy picture draws the runs the table reads: not Seaquest's 2M run, nor a game outside the rule
    assert plotted["Seaquest"] == {"trpo_plus": [1, 2], "ppo": [1, 2, 3], "k5": [], "k8": []} and set(plotted) == set(games)
    assert "](images/minatar5m_entropy.png)" in text and (tmp_path / "images" / "minatar5m_entropy.png").is_file()
    write("trpo_plus", "MinAtar/Seaquest-v1", 3, 182.0, plus_evaluations(), [0.5] * 20, [1.0] * 20)
    text = report_minatar.minatar_5m_section(tmp_path, tmp_path / "images", tmp_path)
    rows = {tuple(line.split(" | ")[:2]): line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
    # game, algorithm, seeds, IQM at 2M, IQM at 5M, kept 2M, rising, entropy, accepted, collapsed
    breakout = rows["| Breakout", "TRPOPlus"]
    assert breakout[2:4] + breakout[5:] == ["1, 2, 3", "38.0", "3 of 3", "3 of 3", "0.40", "1.00", "1 of 3 |"]
    assert breakout[4].startswith("92.0 [")
    assert rows["| Asterix", "TRPOPlus"][5:7] == ["3 of 3", "2 of 3"]
    assert rows["| Freeway", "TRPOPlus"][3] == "42.0" and rows["| Freeway", "TRPOPlus"][5] == "2 of 3"
    assert rows["| Seaquest", "TRPOPlus"][8:] == ["0.95", "1 of 3 |"]
    ppo = rows["| Freeway", "PPO"]
    assert ppo[3] == "10.0" and ppo[4].startswith("32.0 [") and ppo[5:] == ["3 of 3", "0 of 3", "1.00", "n/a", "n/a |"]
    aggregate = {cells[0]: cells[1:] for key, cells in rows.items() if key[0] in ("| TRPOPlus", "| PPO")}
    assert [cell.split(" [")[0] for cell in aggregate["| TRPOPlus"] + aggregate["| PPO"]] == ["2.67", "3.00", "0.89", "1.00"]
    assert (tmp_path / "images" / "minatar5m_profile.png").is_file()
    assert "aggregate IQM of TRPOPlus >= 1.2: **met** (2.67 [" in text
    assert text.endswith(
        "every TRPOPlus run keeps its 2M evaluation: **missed** (runs that do not: Freeway seed 2 (2M: 50.0, last "
        "three: 40.0)); no TRPOPlus run collapses: **missed** (runs that do: Breakout seed 3 (entropy 0.2 nats against "
        "0.25); Seaquest seed 1 (accepted 0.85))."
    )


#: The values in the records of section 5.2's folders: the entry's own, and what each candidate's rule freezes
#: (``benchmarks/results/minatar_5m_k5/rule.md``, ``minatar_5m_k8/rule.md``)
MINATAR_5M_HYPERPARAMS = {
    "minatar_5m": {"target_kl": 0.02, "learning_rate": 3e-4, "callback": ["AdaptiveTrustRegionCallback"]},
    "minatar_5m_k5": {"target_kl": "lin_0.04", "learning_rate": "lin_5e-4", "callback": []},
    "minatar_5m_k8": {
        "target_kl": "lin_0.04",
        "learning_rate": "lin_5e-4",
        "callback": [],
        "entropy_floor": 0.3,
        "critic_kl_fraction": 0.25,
        "cg_damping": 0.2,
    },
}


def write_minatar_5m_run(root, folder, algo, game, seed, final, accepted=1.0, closed=False, entropy=0.5, **hyperparams):
    """A finished 5M record of section 5.2 under ``root/folder``: evaluations of 10 until its ``final``; a constant
    ``entropy``; for TRPOPlus, acceptance 0.85 and ``accepted`` in its last two 250k bins, 10 updates each
    (``closed``: its last update was closed at radius 0 by a ``target_kl`` schedule); the values its folder's rule
    freezes, with ``hyperparams`` over them."""
    steps = list(range(0, 5_000_001, 250_000))
    path = root / folder / "learning" / algo / f"MinAtar-{game}-v1" / f"seed{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    key, sign = ("train/entropy", 1) if algo == "trpo_plus" else ("train/entropy_loss", -1)
    diagnostics = {"bin_end": steps[1:], "n_updates": [10] * 20, key: [sign * entropy] * 20}
    if algo == "trpo_plus":
        diagnostics["train/is_line_search_success"] = [1.0] * 18 + [0.85, accepted]
    record = {
        "env_id": f"MinAtar/{game}-v1",
        "algo": algo,
        "seed": seed,
        "n_timesteps": 5_000_000,
        "final": {"mean": final},
        "evaluation": {"freq": 250_000},
        "curve": {"timesteps": [*steps, 5_000_192], "mean": [10.0] * len(steps) + [final]},
        "diagnostics": diagnostics,
        "last_update": {"failure_reason": "closed_trust_region" if closed else None},
        "hyperparams": {**MINATAR_5M_HYPERPARAMS[folder], **hyperparams},
    }
    path.write_text(json.dumps(record))


def test_minatar_5m_section_k5(tmp_path, monkeypatch):
    # K5 in section 5.2, as benchmarks/results/minatar_5m_k5/rule.md reads it: nothing of its runs shown until all 15
    # exist; then its rows and aggregate beside the entry's, whose figures do not move, and the rule's verdict: adopted
    # only when its aggregate IQM is strictly above the entry's and none of its runs collapses, the update its schedule
    # closes at radius 0 left out of the acceptance. Random 2, PPO 12, 22, 62 (IQM 32) and the entry 32, 62, 182 (IQM
    # of the normalized runs 2.67) on every game
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    drawn = []  # the labels of each performance profile drawn (the first one drawn, the others only recorded)
    draw_profile = report_minatar.plot_performance_profile

    def record_profile(scores, *args, entries, **kwargs):
        drawn.append([entry.label for entry in entries.values()])
        if len(drawn) == 1:
            draw_profile(scores, *args, entries=entries, **kwargs)

    monkeypatch.setattr(report_minatar, "plot_performance_profile", record_profile)
    plotted = []  # the seeds of K5's runs in each entropy picture
    monkeypatch.setattr(report_minatar, "plot_entropy_panels", lambda runs, *args: plotted.append(runs["Breakout"]["k5"]))
    games = report_minatar.MINATAR_GAMES
    (tmp_path / "minatar_random.json").write_text(json.dumps({"games": {f"MinAtar/{g}-v1": {"mean": 2.0} for g in games}}))

    def write(folder, algo, game, seed, final, accepted=1.0, closed=False, entropy=0.5, target_kl="lin_0.04"):
        hyperparams = {"target_kl": target_kl} if folder == "minatar_5m_k5" else {}
        write_minatar_5m_run(tmp_path, folder, algo, game, seed, final, accepted, closed, entropy, **hyperparams)

    def section():
        text = report_minatar.minatar_5m_section(tmp_path, tmp_path / "images", tmp_path)
        rows = {tuple(line.split(" | ")[:2]): line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
        # the aggregate's rows: label, IQM and mean (point estimates)
        labels = ("| TRPOPlus", "| PPO", "| TRPOPlus K5")
        aggregate = {
            key[0][2:]: [cell.split(" [")[0] for cell in cells[1:]] for key, cells in rows.items() if key[0] in labels
        }
        return text, rows, aggregate

    for game in games:
        for seed, ppo, plus in ((1, 12.0, 32.0), (2, 22.0, 62.0), (3, 62.0, 182.0)):
            write("minatar_5m", "ppo", game, seed, ppo, entropy=1.0)  # the floor: 0.25 nats
            write("minatar_5m", "trpo_plus", game, seed, plus, accepted=0.95)
            if (game, seed) != ("Seaquest", 3):  # the last 10 updates: 9 accepted, 1 closed at radius 0
                write("minatar_5m_k5", "trpo_plus", game, seed, plus, accepted=0.9, closed=True)
    text, rows, aggregate = section()
    assert rows["| Seaquest", "TRPOPlus K5"][2] == "withheld (2 of 3 runs finished)"
    assert rows["| Breakout", "TRPOPlus K5"][2] == "withheld (3 of 3 runs finished)"
    assert "TRPOPlus K5: 14 of 15 runs finished; its figures are withheld until all 15 exist." in text
    assert "\n| TRPOPlus K5 |" not in text and "K5's rule" not in text and "no TRPOPlus K5 run" not in text
    assert plotted[-1] == {}
    before = {label: rows[key] for key in rows for label in ("| TRPOPlus", "| PPO") if key[0] == label}
    assert aggregate == {"TRPOPlus": ["2.67", "3.00"], "PPO": ["0.89", "1.00"]}
    assert drawn == [["TRPOPlus", "PPO"]]

    # all 15, with the entry's scores: level with it, not above, so the entry stays
    write("minatar_5m_k5", "trpo_plus", "Seaquest", 3, 182.0, accepted=0.9, closed=True)
    text, rows, aggregate = section()
    k5 = rows["| Breakout", "TRPOPlus K5"]
    assert k5[2:4] + k5[5:] == ["1, 2, 3", "10.0", "3 of 3", "0 of 3", "0.50", "0.92", "0 of 3 |"]
    assert rows["| Breakout", "TRPOPlus"][8:] == ["0.90", "0 of 3 |"]  # the entry's closes nothing: 18 of 20
    assert aggregate == {"TRPOPlus": ["2.67", "3.00"], "PPO": ["0.89", "1.00"], "TRPOPlus K5": ["2.67", "3.00"]}
    # the entry's and PPO's aggregate rows, intervals included, as before K5 was shown; K5's runs drawn
    assert {label: rows[key] for key in rows for label in ("| TRPOPlus", "| PPO") if key[0] == label} == before
    assert sorted(plotted[-1]) == [1, 2, 3]
    assert drawn[-1] == ["TRPOPlus", "PPO", "TRPOPlus K5"] and (tmp_path / "images" / "minatar5m_profile.png").is_file()
    assert "aggregate IQM of TRPOPlus K5 >= 1.2: **met** (2.67 [" in text and "no TRPOPlus K5 run collapses: **met**" in text
    assert text.endswith(
        "K5's rule (`benchmarks/results/minatar_5m_k5/rule.md`): its aggregate IQM above TRPOPlus's (2.6667 against "
        "2.6667): **missed**; no K5 run collapses: **met**. The margin lies inside both intervals: on these runs K5 is "
        "not distinguishable from the entry. The MinAtar entry stays as it is, and K5 is a row of `docs/research.md`."
    )
    # above the entry (normalized 2, 4 and 6: IQM 4) and no run collapsed: adopted
    for game in games:
        for seed, final in ((1, 62.0), (2, 122.0), (3, 182.0)):
            write("minatar_5m_k5", "trpo_plus", game, seed, final, accepted=0.9, closed=True)
    text, rows, aggregate = section()
    assert text.endswith("(4.0000 against 2.6667): **met**; no K5 run collapses: **met**. K5 becomes the MinAtar entry.")
    # one run whose last update was refused by its line search, not closed by the schedule: 17.5 of 20, collapsed
    write("minatar_5m_k5", "trpo_plus", "Asterix", 2, 122.0, accepted=0.9)
    text, rows, aggregate = section()
    assert rows["| Asterix", "TRPOPlus K5"][8:] == ["0.91", "1 of 3 |"]
    assert "no TRPOPlus K5 run collapses: **missed** (runs that do: Asterix seed 2 (accepted 0.88))" in text
    assert text.endswith(
        "**met**; no K5 run collapses: **missed**. The MinAtar entry stays as it is, and K5 is a row of `docs/research.md`."
    )
    # an entropy below 0.25x PPO's (1.0), though above 0.25x the entry's (0.5): collapsed too
    write("minatar_5m_k5", "trpo_plus", "Asterix", 2, 122.0, accepted=0.9, closed=True, entropy=0.2)
    text, rows, aggregate = section()
    assert "(runs that do: Asterix seed 2 (entropy 0.2 nats against 0.25))" in text
    # a record run with other values than the rule freezes is refused
    write("minatar_5m_k5", "trpo_plus", "Asterix", 2, 122.0, accepted=0.9, closed=True, target_kl="lin_0.08")
    with pytest.raises(ValueError, match=r"TRPOPlus K5, Asterix seed 2: \{'target_kl': 'lin_0.08'\}"):
        section()


def test_minatar_5m_section_k8_alive_gate(tmp_path, monkeypatch):
    # K8 in section 5.2, as benchmarks/results/minatar_5m_k8/rule.md reads it: sealed as K5, and once all 15 runs exist
    # its rule's alive gate besides acceptance and entropy: a run also collapses when dead_network's record of its final
    # model is missing, or finds its policy's first hidden layer saturated in half its units or more, or when its score
    # is not above the random policy's. Random 2, PPO 12, 22, 62 and the entry 32, 62, 182 on every game
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    monkeypatch.setattr(report_minatar, "plot_entropy_panels", lambda *args: None)
    monkeypatch.setattr(report_minatar, "plot_performance_profile", lambda *args, **kwargs: None)
    games = report_minatar.MINATAR_GAMES
    (tmp_path / "minatar_random.json").write_text(json.dumps({"games": {f"MinAtar/{g}-v1": {"mean": 2.0} for g in games}}))

    def alive(game, seed, policy_first=0.1):
        path = tmp_path / "minatar_5m_k8" / "alive" / f"MinAtar-{game}-v1" / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        network = {"env_id": f"MinAtar/{game}-v1", "saturated": {"policy": [policy_first, 0.0], "value": [0.0, 0.0]}}
        path.write_text(json.dumps(network))
        return path

    def section():
        text = report_minatar.minatar_5m_section(tmp_path, tmp_path / "images", tmp_path)
        rows = {tuple(line.split(" | ")[:2]): line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
        return text, rows

    for game in games:
        for seed, ppo, plus, k8 in ((1, 12.0, 32.0, 62.0), (2, 22.0, 62.0, 122.0), (3, 62.0, 182.0, 182.0)):
            write_minatar_5m_run(tmp_path, "minatar_5m", "ppo", game, seed, ppo, entropy=1.0)
            write_minatar_5m_run(tmp_path, "minatar_5m", "trpo_plus", game, seed, plus, accepted=0.95)
            if (game, seed) != ("Seaquest", 3):
                write_minatar_5m_run(tmp_path, "minatar_5m_k8", "trpo_plus", game, seed, k8, accepted=0.9, closed=True)
                alive(game, seed)
    text, rows = section()
    assert rows["| Seaquest", "TRPOPlus K8"][2] == "withheld (2 of 3 runs finished)"
    assert "TRPOPlus K8: 14 of 15 runs finished; its figures are withheld until all 15 exist." in text
    assert "K8's rule" not in text and "no TRPOPlus K8 run" not in text and "K8's final models" not in text
    entry = [cells for key, cells in rows.items() if key[0] == "| TRPOPlus"]
    # all 15, alive, above the entry (normalized 2, 4, 6: IQM 4 against 2.67): adopted
    write_minatar_5m_run(tmp_path, "minatar_5m_k8", "trpo_plus", "Seaquest", 3, 182.0, accepted=0.9, closed=True)
    alive("Seaquest", 3)
    text, rows = section()
    assert rows["| Seaquest", "TRPOPlus K8"][-1] == "0 of 3 |"
    assert [cells for key, cells in rows.items() if key[0] == "| TRPOPlus"] == entry  # the entry's aggregate unmoved
    assert "15 of 15 recorded" in text and "seed: Asterix 1 10%, Asterix 2 10%, Asterix 3 10%, Breakout 1 10%" in text
    assert text.endswith(
        "K8's rule (`benchmarks/results/minatar_5m_k8/rule.md`): its aggregate IQM above TRPOPlus's (4.0000 against "
        "2.6667): **met**; no K8 run collapses: **met**. K8 becomes the MinAtar entry."
    )
    # half the policy's first layer saturated: dead, though acceptance and entropy pass (as K6's and K7's Seaquest)
    alive("Seaquest", 2, policy_first=0.5)
    text, rows = section()
    assert rows["| Seaquest", "TRPOPlus K8"][-1] == "1 of 3 |"
    assert (
        "no TRPOPlus K8 run collapses: **missed** (runs that do: Seaquest seed 2 (policy's first layer 50% saturated))" in text
    )
    assert text.endswith(
        "no K8 run collapses: **missed**. The MinAtar entry stays as it is, and K8 is a row of `docs/research.md`."
    )
    alive("Seaquest", 2, policy_first=0.49)
    assert section()[1]["| Seaquest", "TRPOPlus K8"][-1] == "0 of 3 |"
    # no record of the final model (or one of another game): not known to be alive, and the rule's decision waits
    alive("Freeway", 1).unlink()
    text = section()[0]
    assert "(runs that do: Freeway seed 1 (no dead_network record))" in text
    assert text.endswith(
        "K8's rule (`benchmarks/results/minatar_5m_k8/rule.md`): not decided until every run's final "
        "model has its `dead_network` record (14 of 15)."
    )
    alive("Freeway", 1).write_text(alive("Asterix", 1).read_text())
    assert "(runs that do: Freeway seed 1 (no dead_network record))" in section()[0]
    alive("Freeway", 1)
    # a score at the random policy's: dead
    write_minatar_5m_run(tmp_path, "minatar_5m_k8", "trpo_plus", "Asterix", 3, 2.0, accepted=0.9, closed=True)
    assert "(runs that do: Asterix seed 3 (final 2.0 not above random 2.0))" in section()[0]
    # the entry's runs face no alive gate (none of them has a dead_network record)
    assert section()[1]["| Asterix", "TRPOPlus"][-1] == "0 of 3 |"
    # a record run with other values than the rule freezes is refused
    write_minatar_5m_run(tmp_path, "minatar_5m_k8", "trpo_plus", "Asterix", 3, 122.0, cg_damping=0.1)
    with pytest.raises(ValueError, match=r"TRPOPlus K8, Asterix seed 3: \{'cg_damping': 0.1\}"):
        section()


def test_breakout_comparison(tmp_path, monkeypatch):
    # Only runs of today's entries at the full budget, on the seeds both have, count; the verdict waits for 3 seeds
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 500)
    entries = {algo: load_hyperparams(algo, "BreakoutNoFrameskip-v4")[0] for algo in report_breakout.BREAKOUT_ALGOS}

    def run(algo, seed, score, **changes):
        # the periodic evaluations, then the final one: the last 3 average to score - 2
        budget = report_breakout.BREAKOUT_BUDGET
        curve = {"timesteps": [0, budget - 200_000, budget - 100_000, budget, budget + 448]}
        curve["mean"] = [0.0, 100.0, score - 6.0, score, score]
        hyperparams = {**entries[algo], **changes}
        return {
            "algo": algo,
            "env_id": "BreakoutNoFrameskip-v4",
            "seed": seed,
            "n_timesteps": report_breakout.BREAKOUT_BUDGET,
            "hyperparams": hyperparams,
            "final": {"mean": score},
            "curve": curve,
            "evaluation": {"episodes": 5},
        }

    records = [run("ppo", seed, 10.0 + seed) for seed in range(3)] + [run("trpo_plus", 0, 20.0), run("trpo_plus", 1, 21.0)]
    records += [{**run("trpo_plus", 2, 99.0), "variant": "other"}, run("trpo_plus", 3, 98.0, cg_max_steps=99)]
    text = report_breakout.breakout_comparison(records, tmp_path, tmp_path)
    assert "Not judged yet: 2 seed(s) with a run of both entries, 3 needed" in text
    assert "98.0" not in text and "99.0" not in text
    # PPO's seed 2 waits for TRPOPlus's: out of PPO's row, named after the verdict
    assert "| PPO | 2 | 0: 10.0, 1: 11.0 | 10.5 [" in text and "(not in the table above): PPO seed 2 (12.0)." in text
    assert (tmp_path / "breakout_entries_curves.png").is_file()
    # a fourth PPO seed without its TRPOPlus pair is left out of the judged estimates
    text = report_breakout.breakout_comparison([*records, run("trpo_plus", 2, 22.0), run("ppo", 3, 80.0)], tmp_path, tmp_path)
    assert "| TRPOPlus | 3 | 0: 20.0, 1: 21.0, 2: 22.0 | 21.0 [" in text
    assert "Goal TRPOPlus IQM >= PPO IQM: **met** (TRPOPlus 21.0, PPO 11.0: 1.91x; the intervals do not overlap)" in text
    assert "(not in the table above): PPO seed 3 (80.0)." in text
    # beside the verdict, the same comparison on each run's mean over its last 3 evaluations (score - 2 here)
    assert "(an evaluation is 5 episodes, `--eval-episodes`): each run's mean over its last 3 evaluations" in text
    assert "IQM over the same seeds: TRPOPlus 19.0 [18.0, 20.0], PPO 9.0 [8.0, 10.0]: 2.11x; the intervals do not" in text
    worse = [run("trpo_plus", seed, 5.0) for seed in range(3)] + records[:3]
    assert "**missed**" in report_breakout.breakout_comparison(worse, tmp_path, tmp_path)


def test_breakout_comparison_of_the_entry_now_and_the_first(tmp_path, monkeypatch):
    # Once the entry changed: today's comparison holds the later measurement's runs that are of the entry now, and the
    # first measurement's runs (of the entry before) get a table of their own
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 500)
    entries = {algo: load_hyperparams(algo, "BreakoutNoFrameskip-v4")[0] for algo in report_breakout.BREAKOUT_ALGOS}
    schedule = report_atari.ATARI_MEASUREMENTS["schedule"].breakout_mark

    def run(algo, seed, score, variant=None, **changes):
        budget = report_breakout.BREAKOUT_BUDGET
        record = {
            "algo": algo,
            "env_id": "BreakoutNoFrameskip-v4",
            "seed": seed,
            "n_timesteps": budget,
            "hyperparams": {**entries[algo], **changes},
            "final": {"mean": score},
            "curve": {"timesteps": [0, budget], "mean": [0.0, score]},
            "evaluation": {"episodes": 5},
        }
        return {**record, "variant": variant} if variant else record

    ppo = [run("ppo", seed, 10.0 + seed) for seed in range(3)]
    first = [run("trpo_plus", seed, 30.0 + seed, target_kl=0.08) for seed in range(3)]
    now = [run("trpo_plus", seed, 50.0 + seed, schedule, callback=[]) for seed in range(3)]
    floor = [run("trpo_plus", seed, 70.0 + seed, "entropy floor 0.3", entropy_floor=0.3) for seed in range(3)]
    schedule_floor = report_atari.ATARI_MEASUREMENTS["schedule_floor"].breakout_mark
    both = [run("trpo_plus", seed, 90.0 + seed, schedule_floor, callback=[], entropy_floor=0.3) for seed in range(2)]
    records = ppo + first + now + floor + both
    today = report_breakout.breakout_comparison(records, tmp_path, tmp_path)
    assert "| TRPOPlus | 3 | 0: 50.0, 1: 51.0, 2: 52.0 |" in today and "30.0" not in today and "70.0" not in today
    earlier = report_breakout.breakout_comparison(records, tmp_path, tmp_path, "first")
    assert earlier.startswith("### The first `atari` entry")
    assert "| TRPOPlus | 3 | 0: 30.0, 1: 31.0, 2: 32.0 |" in earlier and "| PPO | 3 | 0: 10.0, 1: 11.0, 2: 12.0 |" in earlier
    assert (tmp_path / "breakout_first_entry_curves.png").is_file()
    # the fourth measurement's candidate (the entry with the floor, not shipped): its own table, its runs against PPO's
    # of the same seeds, and in neither of the others
    candidate = report_breakout.breakout_comparison(records, tmp_path, tmp_path, "floor")
    assert candidate.startswith("### The entry with an entropy floor (fourth measurement)")
    assert "| TRPOPlus | 2 | 0: 90.0, 1: 91.0 |" in candidate and "| PPO | 2 | 0: 10.0, 1: 11.0 |" in candidate
    assert "Not judged yet: 2 seed(s)" in candidate and "(not in the table above): PPO seed 2 (12.0)." in candidate
    assert "50.0" not in candidate and "70.0" not in candidate and "90.0" not in today + earlier
    assert (tmp_path / "breakout_floor_curves.png").is_file()


def test_breakout_records_mark_variants_and_the_later_measurements(tmp_path):
    # the entry's runs as they are; a variant's and each later Atari-5 measurement's marked, so that the comparison
    # of today's entries leaves them out; a sealed measurement's (the third with all its Atari-5 runs, the fourth with
    # none) not at all until its rule reads its runs
    folders = (
        ("atari", 1.0),
        ("breakout_variants/wide/", 2.0),
        ("atari_v2/atari", 3.0),
        ("atari_v3/atari", 4.0),
        ("atari_v4/atari", 5.0),
    )
    for folder, score in folders:
        path = tmp_path / folder / "breakout" / "trpo_plus" / "seed0.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"algo_label": "TRPOPlus", "final": {"mean": score}}))
    for game in report_atari.ATARI5:
        for seed in range(report_atari.ATARI_MIN_SEEDS):
            write_atari_run(tmp_path / "atari_v3", game, "trpo_plus", seed, 0.0)
    records = report_breakout.breakout_records(tmp_path)
    floor, schedule = (report_atari.ATARI_MEASUREMENTS[key].breakout_mark for key in ("floor", "schedule"))
    assert [(r["algo_label"], r.get("variant"), r["final"]["mean"]) for r in records] == [
        ("TRPOPlus", None, 1.0),
        ("TRPOPlus [wide]", "wide", 2.0),
        (f"TRPOPlus [{floor}]", floor, 3.0),
        (f"TRPOPlus [{schedule}]", schedule, 4.0),
    ]


def test_breakout_tuning_section(tmp_path):
    # Each candidate's training reward at 500k per seed, and its mean against the entry's over the same seeds; a run
    # without a point at 500k is n/a; the rules are those of the folder and those that give the candidate's command
    tuning = tmp_path / report_breakout.TUNING_DIR

    def run(name, seed, reward, params="", algo="trpo_plus"):
        path = tuning / name / "breakout" / algo / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        curve = {"timesteps": [0, 300_000, report_breakout.TUNING_STEPS], "train_ep_rew_mean": [None, 1.0, reward]}
        if reward is None:
            curve = {"timesteps": [0, 300_000], "train_ep_rew_mean": [None, 1.0]}
        source = f"{algo}.yml:atari" + (f" with {params}" if params else "")
        path.write_text(json.dumps({"seed": seed, "curve": curve, "hyperparams_source": source}))

    for seed, reward in zip((100, 101, 102), (4.0, 6.0, 20.0)):
        run(report_breakout.TUNING_REFERENCE, seed, reward, "n_steps:256")
    run("X", 100, 6.0, "target_kl:0.1")
    run("X", 101, 9.0, "target_kl:0.1")
    run("Y", 100, 3.0, "n_steps:64")
    run("Y", 103, 3.0, "n_steps:64")  # the entry has no run of seed 103: no ratio
    run("Z", 101, None)
    run("PPO", 100, 12.0, algo="ppo")
    (tuning / "X" / "decision_rule.md").write_text("rule of X and Y")
    (tuning / "X" / "rule_of_z.md").write_text("not a decision rule file")
    (tuning / "Y" / "decision_rule_2.md").write_text("--results-dir benchmarks/results/breakout_tuning/Z --resume")
    text = report_breakout.breakout_tuning_section(tmp_path)
    assert "| candidate | `--params` | seed 100 | seed 101 | seed 102 | seed 103 | mean | x D |" in text
    assert "| D | `n_steps:256` | 4.00 | 6.00 | 20.00 |  | 10.00 | n/a |" in text
    rule_x = "`X/decision_rule.md`"
    assert f"| X | `target_kl:0.1` | 6.00 | 9.00 |  |  | 7.50 | 1.50 | {rule_x} |" in text
    assert "| Y | `n_steps:64` | 3.00 |  |  | 3.00 | 3.00 | n/a | `Y/decision_rule_2.md` |" in text
    assert "| PPO | `ppo.yml:atari` | 12.00 |  |  |  | 12.00 | 3.00 |" in text
    assert "| Z | `trpo_plus.yml:atari` |  | n/a |  |  | n/a | n/a | `Y/decision_rule_2.md` |" in text
    assert report_breakout.breakout_tuning_section(tmp_path / "none") == ""


def test_rollout_batch():
    # Both timed paths give the same frames (in another order) and leave the buffer as they found it, so every repeat
    # times the same work
    import torch as th

    buffer = rollout_batch.filled_buffer(n_envs=2, n_steps=3, seed=0)
    observations = buffer.observations.copy()
    shuffled, whole = rollout_batch.shuffled_path(buffer), rollout_batch.whole_path(buffer)
    assert not buffer.generator_ready and np.array_equal(buffer.observations, observations)
    key = lambda frames: sorted(frames.reshape(len(frames), -1).tolist())  # noqa: E731
    assert key(shuffled) == key(whole) and th.equal(whole[1], th.as_tensor(observations[1, 0]) / 255.0)
    # the update's scaling (division in place) is bit-identical to ``/ 255.0``, in channels_last, and is a copy
    in_place = rollout_batch.in_place_path(buffer)
    assert th.equal(in_place, whole) and in_place.is_contiguous(memory_format=th.channels_last)
    no_copy = rollout_batch.no_copy_path(buffer)
    assert th.equal(no_copy, whole) and no_copy.is_contiguous(memory_format=th.channels_last)
    assert np.array_equal(buffer.observations, observations)
    times = rollout_batch.main(["--n-envs", "2", "--n-steps", "3", "--repeats", "2", "--threads", "1"])
    assert {name: len(values) for name, values in times.items()} == {
        "get + channels_last": 2,
        "whole_rollout": 2,
        "whole_rollout, in place": 2,
        "whole_rollout, no copy": 2,
    }


def test_direction_quality(tmp_path):
    """Every method's step is scaled to the asked KL on the training rollout (bisection), and measured held out."""
    from sb3_trpo_plus import TRPOPlus

    checkpoint = tmp_path / "model.zip"
    TRPOPlus("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, seed=0).save(checkpoint)
    out = tmp_path / "direction_quality.json"
    # (steps right after gradient: every method gets the model's own sub-sampling settings)
    methods = ["gradient", "steps:2", "natural:64:5:0.1", "adam:1:256:1e-3"]
    argv = ["--checkpoint", str(checkpoint), "--env", "CartPole-v1", "--held-out", "2", "--kls", "0.01", "0.02"]
    direction_quality.main([*argv, "--methods", *methods, "--out", str(out)])
    results = json.loads(out.read_text())["results"]
    assert list(results) == methods
    for method, result in results.items():
        for row in result["rows"]:
            assert row["kl_train"] == pytest.approx(row["kl_target"], rel=0.02), method
            assert math.isfinite(row["gain_held_out"]) and row["kl_held_out"] > 0, method
        # a direction that ascends the objective gains on the rollout it was computed on
        assert result["rows"][0]["gain_train"] > 0, method


def test_layer_change():
    # weight tensors only (biases and scalars left out), relative to the first checkpoint's norm
    before = {"conv.weight": th.ones(2, 2), "conv.bias": th.ones(2), "log_std": th.zeros(())}
    after = {"conv.weight": th.tensor([[1.0, 1.0], [1.0, 3.0]]), "conv.bias": th.zeros(2), "log_std": th.ones(())}
    assert layer_change.relative_changes(before, after) == {"conv.weight": pytest.approx(1.0)}
    # means per step range, non-finite values (a failed line search's KL) left out, empty ranges None
    steps, values = np.array([0.0, 5.0, 10.0, 15.0]), np.array([1.0, 3.0, np.nan, 4.0])
    assert layer_change.binned_means(steps, values, [0, 10, 20, 30]) == [2.0, 4.0, None]


def test_atari5_median_estimate():
    # every game at 0 gives 0; at human level (100%) every log10(1 + 100) weighs in: 101 ** sum(w) - 1
    assert report_atari.atari5_median_estimate({game: 0.0 for game in report_atari.ATARI5}) == 0.0
    weights = sum(w for w, _, _ in report_atari.ATARI5.values())
    expected = (101**weights - 1) / 100
    assert report_atari.atari5_median_estimate({game: 1.0 for game in report_atari.ATARI5}) == pytest.approx(expected)
    # below random counts as 0 (the regression's clip)
    assert report_atari.atari5_median_estimate({game: -0.5 for game in report_atari.ATARI5}) == 0.0
    assert report_atari.human_normalized("Qbert", 163.9) == 0.0 and report_atari.human_normalized("Qbert", 13455.0) == 1.0


def test_atari5_section(tmp_path, monkeypatch):
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    random_scores = {game: 10.0 * (i + 1) for i, game in enumerate(report_atari.ATARI5)}
    (tmp_path / "atari").mkdir()
    (tmp_path / "atari" / "random.json").write_text(json.dumps({"games": {g: {"mean": v} for g, v in random_scores.items()}}))

    def write(game, algo, seed, score):
        path = tmp_path / "atari" / game.lower() / algo / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        # the final evaluation's games: one of BattleZone TRPOPlus's four reached ALE's cap (107,987 frames counted),
        # and all of DoubleDunk TRPOPlus's (a stalled game)
        capped = game == "BattleZone" and algo == "trpo_plus"
        stalled = game == "DoubleDunk" and algo == "trpo_plus"
        final_lengths = [107_987] * 4 if stalled else [107_987 if capped else 3000, 2500, 2600, 2700]
        curve = {
            "timesteps": [0, 500_000, 1_000_000],
            "mean": [0.0, score / 2, score],
            "lengths": [[900], [1500], final_lengths],
        }
        record = {"algo": algo, "seed": seed, "n_timesteps": report_atari.ATARI_BUDGET, "curve": curve}
        record.update(final={"mean": score}, late={"mean": score - 1})
        # the diagnostics table averages the last 200k steps' bins, weighted by their updates: (1 * 10 + 2 * 30) / 40
        entropy_key, sign = report_atari.ATARI_DIAGNOSTICS[algo]["entropy"]
        entropy = [sign * value for value in (9.0, 1.0, 2.0)]
        record["diagnostics"] = {"bin_end": [500_000, 900_000, 1_000_000], "n_updates": [10, 10, 30], entropy_key: entropy}
        if algo == "trpo_plus":
            # the line search of Phoenix seed 1 accepts half the updates of its last 200k steps: a collapse
            late_accepted = 0.5 if (game, seed) == ("Phoenix", 1) else 1.0
            record["diagnostics"][report_atari.ATARI_ACCEPTANCE_KEY] = [1.0, late_accepted, late_accepted]
        path.write_text(json.dumps(record))

    # PPO scores random + 100 on every seed (normalized 1); TRPOPlus random + 200 (normalized 2), but behind on Qbert
    for game, random_score in random_scores.items():
        for seed in range(3):
            write(game, "ppo", seed, random_score + 100)
            write(game, "trpo_plus", seed, random_score + (50 if game == "Qbert" else 200))
    text = report_atari.atari5_section(tmp_path, tmp_path / "images", tmp_path)
    assert "| BattleZone | 10.0 | 210 [210, 210] | 110 [110, 110] | 209 / 109 | ahead | 3 / 3 |" in text
    assert "| Qbert | 50.0 | 100 [100, 100] | 150 [150, 150] | 99.0 / 149 | behind | 3 / 3 |" in text
    # a stalled game is marked in each table: per game, human-normalized, diagnostics (two rows)
    assert text.count("DoubleDunk (stalled: TRPOPlus 3 of 3)") == 4
    assert "| DoubleDunk (stalled: TRPOPlus 3 of 3) | 20.0 | 220 [220, 220] |" in text
    # the human-normalized headline: per game every seed scores the same, so the IQM over the 15 runs is the mean of
    # the middle 9 (the 3 lowest and 3 highest cut), the median of per-game means the middle game's
    for algo, label in (("trpo_plus", "TRPOPlus"), ("ppo", "PPO")):
        scores = {g: r + (100 if algo == "ppo" else 50 if g == "Qbert" else 200) for g, r in random_scores.items()}
        human = sorted(100 * report_atari.human_normalized(g, v) for g, v in scores.items())
        runs = sorted(h for h in human for _ in range(3))
        estimate = 100 * report_atari.atari5_median_estimate(
            {g: report_atari.human_normalized(g, v) for g, v in scores.items()}
        )
        iqm, median = np.mean(runs[3:12]), human[2]
        assert (
            f"| {label} | {iqm:.1f} [{iqm:.1f}, {iqm:.1f}] | {median:.1f} [{median:.1f}, {median:.1f}] | {estimate:.1f} ["
            in text
        )
    # beside it, the PPO-normalized aggregate: 12 runs at 2.0 and 3 at 0.5 -> IQM over the middle half is 2.0
    assert "| TRPOPlus | 2.00 [" in text and "| PPO | 1.00 [1.00, 1.00] |" in text
    assert "BattleZone +100 (2.0x)" in text and "Qbert +100 (0.5x)" in text
    assert "P(TRPOPlus > PPO), averaged over the games (rliable): 0.80" in text
    # the targets: Qbert behind; the collapse names the run and what fell short
    assert (
        "| TRPOPlus's IQM at or above the low end of PPO's 95% interval on every game | behind: Qbert | **missed** |" in text
    )
    assert "runs below: 1 of 15 runs: Phoenix seed 1 (accepted 0.50) | **missed** |" in text
    assert "goal (IQM >= 1.0): **met** (TRPOPlus 2.00); aim (>= 1.1, no game behind): **missed**" in text
    assert "Ahead: BattleZone, DoubleDunk, NameThisGame, Phoenix; level: none; behind: Qbert." in text
    assert "| BattleZone | TRPOPlus | 3 | 1.75 | n/a | n/a | 1.00 | n/a | n/a | 0.25 |" in text
    assert "| Phoenix | TRPOPlus | 3 | 1.75 | n/a | n/a | 0.83 | n/a | n/a | 0.00 |" in text
    assert "| BattleZone | PPO | 3 | 1.75 | n/a | n/a | n/a | n/a | n/a | 0.00 |" in text
    for image in ("atari5_profile.png", "atari5_curves.png", "atari5_entropy.png"):
        assert (tmp_path / "images" / image).is_file()
    # PPO's seeds 3 and 4 on BattleZone (TRPOPlus has no pair for them) move its per-game IQM, not the aggregates'
    # runs, nor the scale that maps PPO's IQM over those runs to 1
    for seed in (3, 4):
        write("BattleZone", "ppo", seed, random_scores["BattleZone"] + 500)
    text = report_atari.atari5_section(tmp_path, tmp_path / "images", tmp_path)
    assert "| BattleZone | 10.0 | 210 [210, 210] | 243 [110, 510] | 209 / 242 | ahead | 3 / 5 |" in text
    assert "| PPO | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] |" in text and "BattleZone +100 (2.0x)" in text
    for seed in (3, 4):
        (tmp_path / "atari" / "battlezone" / "ppo" / f"seed{seed}.json").unlink()
    # with a game short of seeds, no aggregate
    (tmp_path / "atari" / "qbert" / "ppo" / "seed2.json").unlink()
    text = report_atari.atari5_section(tmp_path, tmp_path / "images", tmp_path)
    assert "Aggregate and verdict: not yet" in text and "Qbert 2 of 3." in text
    assert "| Qbert | 50.0 | 100 [100, 100] | 150 [150, 150] | 99.0 / 149 | not yet (2 of 3 seeds) | 3 / 2 |" in text


def test_mujoco_section(tmp_path, monkeypatch):
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    tasks = list(report_mujoco.MUJOCO_TASKS)
    mujoco = tmp_path / "mujoco"
    mujoco.mkdir()
    (mujoco / "random.json").write_text(json.dumps({"games": {task: {"mean": 0.0} for task in tasks}}))

    def write(root, algo, task, seed, curve, steps=(0, 1, 2, 3)):
        path = root / "learning" / algo / task / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"algo": algo, "env_id": task, "seed": seed, "curve": {"timesteps": list(steps), "mean": curve}}
        path.write_text(json.dumps({**record, "final": {"mean": curve[-1]}, "wall_s_this_session": 300.0 * (seed + 1)}))

    # four seeds of each: not judged yet
    for task in tasks:
        for seed in range(4):
            for algo, score in (("trpo_plus", 110.0), ("trpo", 100.0), ("ppo", 50.0)):
                write(mujoco, algo, task, seed, [0.0, 0.0, 0.0, score])
    text = report_mujoco.mujoco_section(tmp_path, tmp_path / "images", tmp_path)
    assert "| Walker2d-v5 (held out) | 0.0 | 110 [110, 110] | 100 [100, 100] | 50 [50, 50] | not yet (< 5 seeds) |" in text
    assert "Aggregate and targets: not yet" in text and "Hopper-v5 4 / 4 / 4" in text
    assert "a run took 5-20 minutes on one core" in text  # the records' wall times, seeds 0-3
    # the fifth seed: TRPOPlus above both everywhere but Ant, where PPO scores 200 (below that interval)
    for task in tasks:
        for algo, score in (("trpo_plus", 110.0), ("trpo", 100.0), ("ppo", 200.0 if task == "Ant-v5" else 50.0)):
            write(mujoco, algo, task, 4, [0.0, 0.0, 0.0, score])
            if task == "Ant-v5" and algo == "ppo":
                for seed in range(4):
                    write(mujoco, algo, task, seed, [0.0, 0.0, 0.0, score])
    text = report_mujoco.mujoco_section(tmp_path, tmp_path / "images", tmp_path)
    assert "| Hopper-v5 | 0.0 | 110 [110, 110] | 100 [100, 100] | 50 [50, 50] | ahead | ahead | 5 / 5 / 5 |" in text
    assert (
        "| Ant-v5 (held out) | 0.0 | 110 [110, 110] | 100 [100, 100] | 200 [200, 200] | ahead | behind | 5 / 5 / 5 |" in text
    )
    # normalized by the better baseline: 1.1 on four tasks, 0.55 on Ant; the target's ratio is their mean, 0.99
    assert "behind: Ant-v5 (PPO) | **missed** |" in text
    assert ">= 1.05 | 0.99 | **missed** |" in text
    assert "| TRPOPlus | 1.10 [1.10, 1.10] |" in text
    assert (tmp_path / "images" / "mujoco_profile.png").is_file() and (tmp_path / "images" / "mujoco_curves.png").is_file()
    # the tuning table: per seed the mean of the evaluations at 900k, 950k and 1M steps (not the one after training);
    # n against T0 once its 3 seeds are in
    tuning, steps = mujoco / "tuning", (900_000, 950_000, 1_000_000, 1_001_472)
    for seed in report_mujoco.TUNING_SEEDS:
        for task in ("Hopper-v5", "HalfCheetah-v5"):
            write(tuning / "T0", "trpo_plus", task, seed, [90.0, 100.0, 110.0, 999.0], steps)
            write(tuning / "T1", "trpo_plus", task, seed, [180.0, 200.0, 220.0, 999.0], steps)
        if seed != 102:
            write(tuning / "T0b", "trpo_plus", "HalfCheetah-v5", seed, [0.0, 0.0, 30.0, 999.0], steps)
    text = report_mujoco.mujoco_section(tmp_path, tmp_path / "images", tmp_path)
    assert "| T0 | 100: 100, 101: 100, 102: 100 | 1.00 | 100: 100, 101: 100, 102: 100 | 1.00 | 1.00 |" in text
    assert "| T1 | 100: 200, 101: 200, 102: 200 | 2.00 | 100: 200, 101: 200, 102: 200 | 2.00 | 2.00 |" in text
    assert "| T0b | not run yet | n/a | 100: 10, 101: 10 | n/a | n/a |" in text
    # speed on Hopper: not run yet, then the committed record with TRPOPlus exactly as fast as TRPO (met), then slower
    assert "### Speed on Hopper-v5\n\nNot run yet: `python -m benchmarks.throughput --envs hopper" in text
    committed = Path(__file__).parents[1] / "benchmarks" / "results" / "mujoco" / report_mujoco.MUJOCO_THROUGHPUT
    record = json.loads(committed.read_text())
    hopper = record["envs"]["hopper"]
    plus_rate = hopper["algos"]["trpo_plus"]["steps_per_s"]
    for trpo_rate, verdict in ((plus_rate, "**met** (1.00x)"), (2 * plus_rate, "**missed** (0.50x)")):
        hopper["algos"]["trpo"]["steps_per_s"] = trpo_rate
        (mujoco / report_mujoco.MUJOCO_THROUGHPUT).write_text(json.dumps(record))
        text = report_mujoco.mujoco_section(tmp_path, tmp_path / "images", tmp_path)
        assert f"**Target** (Hopper): at least as fast as sb3-contrib TRPO: {verdict}." in text
        assert "| TRPO (sb3-contrib) |" in text and "Where the time goes" not in text  # the CNN reading is Breakout's
    # a throughput file of another name in mujoco/ is not this section's
    (mujoco / report_mujoco.MUJOCO_THROUGHPUT).rename(mujoco / "throughput_other.json")
    assert "Not run yet: `python -m benchmarks.throughput" in report_mujoco.mujoco_section(
        tmp_path, tmp_path / "images", tmp_path
    )


def test_keep_learning_screen(tmp_path):
    from benchmarks.experiments import keep_learning

    steps = [0, *range(100_000, 1_000_001, 100_000), 1_001_472]

    def write(name, means, accepted, entropy, closed=False):
        path = tmp_path / name / "atari" / "breakout" / "trpo_plus" / "seed100.json"
        path.parent.mkdir(parents=True)
        # bins of 50k: the last 200k are the bins ending after 800k (four of 25 updates, and the last update alone)
        ends = [*range(50_000, 1_000_001, 50_000), 1_050_000]
        diagnostics = {"bin_end": ends, "n_updates": [25] * 20 + [1]}
        diagnostics["train/is_line_search_success"] = [1.0] * 16 + [accepted] * 4 + [0.0 if closed else accepted]
        diagnostics["train/entropy"] = [1.0] * 16 + [entropy] * 5
        record = {"n_timesteps": 1_000_000, "curve": {"timesteps": steps, "mean": means}, "diagnostics": diagnostics}
        record.update(final={"mean": means[-1]}, late={"mean": float(np.mean(means[-3:]))})
        record["last_update"] = {"failure_reason": "closed_trust_region" if closed else None}
        path.write_text(json.dumps(record))

    # the entry flattens (400-600k: 10, 800k-final: 10), K1 keeps rising; K1's last update was closed by its schedule:
    # logged as not accepted, it is left out, so 100 of its 100 line searches were accepted
    write("entry", [0, 2, 4, 8, 10, 10, 10, 10, 10, 10, 10, 10], accepted=0.8, entropy=0.2)
    write("K1", [0, 2, 4, 8, 10, 10, 10, 12, 14, 16, 18, 18], accepted=1.0, entropy=0.5, closed=True)
    rows = keep_learning.table(["K1"], [100], tmp_path).splitlines()
    assert rows[2] == "| entry | 100 | 10.0 (10.0) | 10.0 -> 10.0 | 0.80 | 0.20 | reference | fail | fail |"
    assert rows[3] == "| K1 | 100 | 17.3 (10.0) | 10.0 -> 16.0 | 1.00 | 0.50 | pass | pass | pass |"
    assert keep_learning.table(["K2"], [100], tmp_path).splitlines()[3].startswith("| K2 | 100 | not finished |")
    # screen v2 on K1's one run: its final 18 is above PPO's low end 14.3, it rises, and it holds: it passes; the entry
    # fails (its entropy 0.2 is under 0.35)
    assert keep_learning.screen_v2("K1", [100], tmp_path).endswith(
        "not behind PPO: pass; still rising: pass; no collapse: pass; passes v2"
    )
    assert "mean final evaluation 18.0 (PPO's low end 14.3; the entry's 10.0)" in keep_learning.screen_v2(
        "K1", [100], tmp_path
    )
    assert keep_learning.screen_v2("entry", [100], tmp_path).endswith("no collapse: fail; fails v2")
    assert keep_learning.screen_v2("K1", [100, 101], tmp_path) == "K1: not every seed of [100, 101] has finished"


def test_mujoco_tuning_decision(tmp_path):
    from benchmarks.experiments import mujoco_tuning

    (tmp_path / "random.json").write_text(
        json.dumps({"games": {"Hopper-v5": {"mean": 0.0}, "HalfCheetah-v5": {"mean": -100.0}}})
    )

    def write(candidate, task, seed, last, target_kl=(0.01, 0.01)):
        path = tmp_path / candidate / "learning" / "trpo_plus" / task / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        curve = {"timesteps": [900_000, 950_000, 1_000_000, 1_001_472], "mean": last}
        record = {"algo": "trpo_plus", "env_id": task, "seed": seed, "curve": curve}
        record["diagnostics"] = {"train/target_kl": list(target_kl)}
        path.write_text(json.dumps(record))

    for seed in (100, 101, 102):
        write("T0", "Hopper-v5", seed, [100.0] * 4)
        write("T0", "HalfCheetah-v5", seed, [100.0] * 4)
        # T1: 1.2 on Hopper, 1.0 on HalfCheetah (random -100): aggregate 1.1, passes
        write("T1", "Hopper-v5", seed, [120.0] * 4)
        write("T1", "HalfCheetah-v5", seed, [100.0] * 4)
        # T2 scores as T1 but its callback never moved target_kl: it is T0
        write("T2", "Hopper-v5", seed, [120.0] * 4)
        write("T2", "HalfCheetah-v5", seed, [100.0] * 4)
        # T0b: (80 + 100) / 200 = 0.9 on HalfCheetah, under 0.95
        write("T0b", "HalfCheetah-v5", seed, [80.0] * 4)
    result = mujoco_tuning.decide(tmp_path, tmp_path / "random.json")
    assert (result["T1 passes"], result["T2 acted"], result["T2 passes"], result["T0b passes"]) == (True, False, False, False)
    assert result["scores"]["T1"]["aggregate"] == pytest.approx(1.1)
    assert result["scores"]["T0b"]["n"]["HalfCheetah-v5"] == pytest.approx(0.9)
    # one bin under the first value: the callback acted, and T2 passes as T1 does
    write("T2", "Hopper-v5", 101, [120.0] * 4, target_kl=(0.01, 0.008))
    result = mujoco_tuning.decide(tmp_path, tmp_path / "random.json")
    assert (result["T2 acted"], result["T2 passes"]) == (True, True)
    # a missing run leaves the verdicts open
    (tmp_path / "T1" / "learning" / "trpo_plus" / "Hopper-v5" / "seed102.json").unlink()
    assert mujoco_tuning.decide(tmp_path, tmp_path / "random.json")["T1 passes"] is None

    # rule 1's steps (900k, 950k, 1M), and beside them the last three evaluations (950k, 1M, after training)
    for seed in (100, 101, 102):
        write("T1", "Hopper-v5", seed, [100.0, 100.0, 130.0, 130.0])
    assert mujoco_tuning.decide(tmp_path, tmp_path / "random.json")["scores"]["T1"]["n"]["Hopper-v5"] == pytest.approx(1.1)
    check = mujoco_tuning.decide(tmp_path, tmp_path / "random.json", run_score=mujoco_tuning.last_three_mean)
    assert check["scores"]["T1"]["n"]["Hopper-v5"] == pytest.approx(1.2)
    # a callback that moved target_kl in its first bin and stayed there acted too (against the entry's initial value)
    write("T2", "Hopper-v5", 101, [120.0] * 4, target_kl=(0.008, 0.008))
    assert mujoco_tuning.acted(tmp_path)
    # a candidate with no run at all on one task is not decided (nor an error)
    for seed in (100, 101, 102):
        (tmp_path / "T1" / "learning" / "trpo_plus" / "HalfCheetah-v5" / f"seed{seed}.json").unlink()
    assert mujoco_tuning.decide(tmp_path, tmp_path / "random.json")["T1 passes"] is None


def test_keep_learning_minatar(tmp_path):
    from benchmarks.experiments import keep_learning

    steps = [*range(0, 5_000_001, 250_000), 5_000_192]

    def write(algo, game, means, entropy, accepted=1.0):
        path = tmp_path / "learning" / algo / f"MinAtar-{game}-v1" / "seed100.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        # bins of 250k: the last 500k are the last two (the bin before them, at 1.0, is outside the window)
        diagnostics = {"bin_end": list(range(250_000, 5_000_001, 250_000)), "n_updates": [10] * 20}
        if algo == "ppo":
            diagnostics["train/entropy_loss"] = [-entropy] * 20
        else:
            diagnostics["train/entropy"] = [1.0] * 18 + [entropy + 0.1, entropy - 0.1]  # a 250k window would see one
            diagnostics["train/is_line_search_success"] = [1.0] * 18 + [accepted] * 2
            diagnostics["train/target_kl"] = [0.02] * 20
        record = {"algo": algo, "n_timesteps": 5_000_000, "curve": {"timesteps": steps, "mean": means}}
        path.write_text(json.dumps({**record, "diagnostics": diagnostics}))

    # 8 at 2M, 11 at 2.5-3M, 19 at 4.5-5M (the evaluation after training, 100, is not one of them)
    rising = [*(float(i) for i in range(len(steps) - 1)), 100.0]
    flat = [*rising[:9], *[8.0] * 12, 100.0]  # at 2M's 8 from there on
    # above 2M's 8 but below its own 2.5-3M mean: it flattened after rising
    peaked = [*rising[:9], 20.0, 20.0, 20.0, 20.0, *[10.0] * 8, 100.0]
    write("trpo_plus", "SpaceInvaders", rising, entropy=0.5)
    write("ppo", "SpaceInvaders", rising, entropy=1.0)
    write("trpo_plus", "Breakout", flat, entropy=0.2)  # under 0.25 x PPO's 1.0
    write("ppo", "Breakout", rising, entropy=1.0)
    write("trpo_plus", "Asterix", rising, entropy=0.5, accepted=0.5)  # no PPO run yet: the line search decides
    write("trpo_plus", "Freeway", peaked, entropy=0.5)  # no PPO run, line search fine: undecided
    rows = keep_learning.minatar_table(100, tmp_path).splitlines()
    assert rows[2] == "| SpaceInvaders | 8.0 | 11.0 | 19.0 | no | 1.00 | 0.50 (1.00) | no | 19.0 |"
    assert rows[3] == "| Breakout | 8.0 | 8.0 | 8.0 | yes | 1.00 | 0.20 (1.00) | yes | 19.0 |"
    assert rows[4] == "| Asterix | 8.0 | 11.0 | 19.0 | no | 0.50 | 0.50 (n/a) | yes | not finished |"
    assert rows[5] == "| Freeway | 8.0 | 20.0 | 10.0 | yes | 1.00 | 0.50 (n/a) | n/a | not finished |"
    assert rows[6].startswith("| Seaquest | not finished |")
    # per bin: each algorithm's evaluation at the bin's end and its values (PPO's entropy from its entropy loss)
    bins = keep_learning.minatar_bins("Breakout", 100, tmp_path).splitlines()
    header = [cell.strip() for cell in bins[1].strip("|").split("|")]
    last = dict(zip(header, (cell.strip() for cell in bins[-1].strip("|").split("|"))))
    assert header[:3] == ["steps", "trpo_plus evaluation", "trpo_plus entropy"]
    assert header.index("ppo evaluation") > header.index("trpo_plus target_kl")
    assert {"trpo_plus accepted", "ppo entropy", "ppo explained_variance", "ppo clip_fraction"} <= set(header)
    assert last["steps"] == "5,000,000" and last["trpo_plus evaluation"] == "8.0" and last["trpo_plus entropy"] == "0.1"
    assert last["trpo_plus accepted"] == "1" and last["ppo evaluation"] == "20.0" and last["ppo entropy"] == "1"
    assert last["trpo_plus target_kl"] == "0.02"
    assert last["ppo explained_variance"] == ""  # a value the record lacks is an empty cell
    assert keep_learning.minatar_bins("Seaquest", 100, tmp_path) == "Seaquest: no finished run"


def test_keep_learning_minatar_screen(tmp_path):
    """The three tests of minatar_k4_rule.md and minatar_k5_rule.md: against the entry's and PPO's runs on the same game
    and seed, per run, then per game on the mean over the seeds; the schedule's closing update (radius 0, no line
    search) is not a rejected step."""
    from benchmarks.experiments import keep_learning

    steps = [*range(0, 5_000_001, 250_000), 5_000_192]
    k5_dir, minatar_dir = tmp_path / "minatar_k5", tmp_path / "minatar"

    def write(root, algo, seed, means, game="Breakout", entropy=0.5, closed=False):
        path = root / "learning" / algo / f"MinAtar-{game}-v1" / f"seed{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        # 20 bins of 250k and the closing update's own bin; the last 500k are the last three
        diagnostics = {"bin_end": list(range(250_000, 5_250_001, 250_000)), "n_updates": [10] * 20 + [1]}
        if algo == "ppo":
            diagnostics["train/entropy_loss"] = [-entropy] * 21
        else:
            diagnostics["train/entropy"] = [entropy] * 21
            # 18 of the last 20 line searches accepted (0.9); the closing update logs 0
            diagnostics["train/is_line_search_success"] = [1.0] * 18 + [0.9, 0.9, 0.0]
        record = {"algo": algo, "n_timesteps": 5_000_000, "curve": {"timesteps": steps, "mean": means}}
        if closed:
            record["last_update"] = {"accepted": False, "failure_reason": "closed_trust_region"}
        path.write_text(json.dumps({**record, "diagnostics": diagnostics}))

    def screen(seeds, games=("Breakout",)):
        return keep_learning.minatar_screen("K5", list(games), seeds, k5_dir, minatar_dir)

    rising = [*(float(i) for i in range(len(steps) - 1)), 100.0]  # 8 at 2M, 11 at 2.5-3M, 19 at 4.5-5M
    flat = [*rising[:9], *[8.0] * 12, 100.0]
    high = [*rising[:-1], 100.0]
    high[-4:-1] = [30.0] * 3  # PPO: 30 at 4.5-5M
    for game in ("Breakout", "SpaceInvaders"):
        write(minatar_dir, "trpo_plus", 100, flat, game)
        write(minatar_dir, "ppo", 100, high, game, entropy=1.0)
    assert screen([100]).splitlines()[2].startswith("| Breakout | 100 | not finished")
    write(k5_dir, "trpo_plus", 100, rising, closed=True)
    rows = screen([100]).splitlines()
    assert rows[2] == "| Breakout | 100 | 8.0 | 11.0 | 19.0 (8.0; 30.0) | 0.90 | 0.50 (0.25) | pass | pass | pass |"
    assert rows[-2].endswith("keeps learning: pass; score: pass; no collapse: pass; passes")
    assert rows[-1] == "K5: passes on Breakout"
    # a game still running: no verdict over the games yet
    assert screen([100], ["Breakout", "SpaceInvaders"]).splitlines()[-1].startswith("K5 on Breakout, seeds 100:")
    # without the closing update's mark, its 0 counts as a rejected step: 18 of 21, under 0.9
    write(k5_dir, "trpo_plus", 100, rising)
    assert "| 0.86 |" in screen([100])
    # a flat run below the entry, with a low entropy, fails every test, and with it the screen
    write(k5_dir, "trpo_plus", 100, [*rising[:9], *[6.0] * 12, 100.0], entropy=0.2, closed=True)
    rows = screen([100]).splitlines()
    assert rows[2].endswith("| fail | fail | fail |") and rows[-1] == "K5: fails on Breakout"
    # one game passing and one failing fails the screen; the mean over seeds waits for every seed
    write(k5_dir, "trpo_plus", 100, rising, "SpaceInvaders", closed=True)
    assert screen([100], ["Breakout", "SpaceInvaders"]).splitlines()[-1] == "K5: fails on Breakout, SpaceInvaders"
    assert "K5 on" not in screen([100, 101])
    # seeds 100 and 101: tests 1 and 2 on the mean (one run below the entry is made up by the other)
    write(k5_dir, "trpo_plus", 100, rising, closed=True)
    write(minatar_dir, "trpo_plus", 101, flat)
    write(minatar_dir, "ppo", 101, high, entropy=1.0)
    write(k5_dir, "trpo_plus", 101, [*rising[:9], *[9.0] * 12, 100.0], closed=True)  # 9 at 4.5-5M
    rows = screen([100, 101]).splitlines()
    assert rows[3].endswith("| fail | pass | pass |")
    assert rows[-2].startswith("K5 on Breakout, seeds 100, 101: at 2M 8.0, at 2.5-3M 10.0, at 4.5-5M 14.0")
    assert rows[-1] == "K5: passes on Breakout"
    # the fourth test of minatar_k6_rule.md, per game (its mean over the seeds - random) / (PPO's - random), then the
    # mean over the games. Breakout: (14 - 2) / (30 - 2) = 0.43. SpaceInvaders, PPO 40 and 20 on the two seeds: its mean
    # 30, so (27 - 0) / (30 - 0) = 0.90 (a mean of per-seed ratios would give (27/40 + 27/20) / 2 = 1.01); mean 0.66
    random_scores = {"MinAtar/Breakout-v1": 2.0, "MinAtar/SpaceInvaders-v1": 0.0}
    both = ["Breakout", "SpaceInvaders"]
    for seed, ppo_score in ((100, 40.0), (101, 20.0)):
        write(minatar_dir, "ppo", seed, [*high[:-4], *[ppo_score] * 3, 100.0], "SpaceInvaders", entropy=1.0)
        write(minatar_dir, "trpo_plus", seed, flat, "SpaceInvaders")
    write(k5_dir, "trpo_plus", 100, [*rising[:-4], *[27.0] * 3, 100.0], "SpaceInvaders", closed=True)
    # a game not finished: neither the fourth test nor the verdict
    rows = keep_learning.minatar_screen("K6", both, [100, 101], k5_dir, minatar_dir, 1.2, random_scores)
    assert "normalized" not in rows and not rows.splitlines()[-1].startswith("K6:")
    write(k5_dir, "trpo_plus", 101, [*rising[:-4], *[27.0] * 3, 100.0], "SpaceInvaders", closed=True)
    for bar, verdict, outcome in ((1.2, "fail", "fails"), (0.6, "pass", "passes")):
        rows = keep_learning.minatar_screen("K6", both, [100, 101], k5_dir, minatar_dir, bar, random_scores)
        rows = rows.splitlines()
        normalized = "K6, normalized (random = 0, PPO = 1): Breakout 0.43, SpaceInvaders 0.90; mean 0.66"
        assert rows[-2] == f"{normalized} (at least {bar}: {verdict})"
        assert rows[-1] == f"K6: {outcome} on Breakout, SpaceInvaders"
    # without the bar, the three tests decide alone; through main, the bar reaches the screen (minatar_random.json's
    # random scores); without a candidate it is refused
    assert screen([100, 101], both).splitlines()[-1] == "K5: passes on Breakout, SpaceInvaders"
    shutil.copytree(k5_dir, tmp_path / "minatar_k6")
    argv = ["--minatar-candidate", "K6", "--games", *both, "--seeds", "100", "101", "--screen-dir", str(tmp_path)]
    assert "mean 0.6" in keep_learning.main([*argv, "--normalized-bar", "1.2"]).splitlines()[-2]
    with pytest.raises(SystemExit):
        keep_learning.main(["--minatar", "--normalized-bar", "1.2", "--screen-dir", str(tmp_path)])
    # --k4 reads K4's folder on Breakout
    write(tmp_path / "minatar_k4", "trpo_plus", 100, rising, closed=True)
    assert "| Breakout | 100 | 8.0 |" in keep_learning.main(["--k4", "--seeds", "100", "--screen-dir", str(tmp_path)])


def test_dead_network_finds_a_network_that_answers_every_state_alike(tmp_path):
    """benchmarks.experiments.dead_network: a fresh network's heads vary over states; with the first layer of both
    heads pushed far out (tanh(10) in every state), every unit of that layer is saturated, and the probabilities and
    the value no longer vary."""
    pytest.importorskip("minatar")
    from benchmarks.experiments import dead_network
    from sb3_trpo_plus import TRPOPlus
    from sb3_trpo_plus.torch_layers import MinAtarCnnPolicy

    dead_network.random_states("MinAtar/Breakout-v1", 1)  # (registers the MinAtar ids)
    model = TRPOPlus(MinAtarCnnPolicy, "MinAtar/Breakout-v1", n_steps=64, batch_size=64, seed=0)
    model.save(tmp_path / "alive.zip")
    alive = dead_network.dead_network(str(tmp_path / "alive.zip"), "MinAtar/Breakout-v1", n_states=200).splitlines()
    assert alive[1].startswith("feature units never active: ") and alive[1] != "feature units never active: 100% of 128"
    assert alive[2] == "policy hidden layers, units saturated in every state: 0%, 0%"
    assert alive[3] == "value hidden layers, units saturated in every state: 0%, 0%"
    assert not alive[-1].endswith("std over states 0.000000")
    with th.no_grad():
        for net in (model.policy.mlp_extractor.policy_net, model.policy.mlp_extractor.value_net):
            net[0].weight.zero_()
            net[0].bias.fill_(10.0)
    model.save(tmp_path / "dead.zip")
    dead = dead_network.dead_network(str(tmp_path / "dead.zip"), "MinAtar/Breakout-v1", n_states=200).splitlines()
    assert dead[2].startswith("policy hidden layers, units saturated in every state: 100%")
    assert dead[3].startswith("value hidden layers, units saturated in every state: 100%")
    assert dead[-2] == "action probabilities, std over states: [0. 0. 0.]"
    assert dead[-1].endswith("std over states 0.000000")
    # the facts as a run's alive record (section 5.2's alive gate reads the policy's first layer)
    dead_network.main(
        [str(tmp_path / "dead.zip"), "MinAtar/Breakout-v1", "--states", "200", "--json", str(tmp_path / "a.json")]
    )
    facts = json.loads((tmp_path / "a.json").read_text())
    assert facts["saturated"]["policy"][0] == facts["saturated"]["value"][0] == 1.0 and facts["value_std"] == 0.0


def write_atari_run(root, game, algo, seed, score, accepted=1.0, entropy=1.0, closed=False):
    """A finished 1M-step ``benchmarks.atari`` record under ``root/atari``, with its entropy and acceptance at the end
    (``closed``: its last update was closed by a ``target_kl`` schedule, and counted as not accepted)."""
    path = root / "atari" / game.lower() / algo / f"seed{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    curve = {"timesteps": [0, 1_000_000], "mean": [0.0, score], "lengths": [[900], [2500, 2600]]}
    entropy_key, sign = report_atari.ATARI_DIAGNOSTICS[algo]["entropy"]
    diagnostics = {"bin_end": [500_000, 1_000_000], "n_updates": [10, 10], entropy_key: [sign * 2.0, sign * entropy]}
    if algo == "trpo_plus":
        diagnostics[report_atari.ATARI_ACCEPTANCE_KEY] = [1.0, accepted]
    record = {"algo": algo, "seed": seed, "n_timesteps": report_atari.ATARI_BUDGET, "curve": curve}
    record.update(final={"mean": score}, late={"mean": score}, diagnostics=diagnostics)
    if closed:
        record["last_update"] = {"failure_reason": "closed_trust_region"}
    path.write_text(json.dumps(record))


def test_late_acceptance_leaves_out_the_update_a_schedule_closed(tmp_path):
    # 10 updates in the last 200k steps, 8 accepted: 0.8; when the last of them was closed by the radius schedule (no
    # line search ran), 8 of 9: 0.89, still a collapse; 8.5 of 10 becomes 8.5 of 9, 0.94, not one
    for seed, (accepted, closed) in enumerate(((0.8, False), (0.8, True), (0.85, True))):
        write_atari_run(tmp_path, "Qbert", "trpo_plus", seed, 0.0, accepted=accepted, closed=closed)
    records = report_atari.atari_runs(tmp_path, "Qbert")["trpo_plus"]
    assert [round(report_atari.late_acceptance(records[s]), 3) for s in range(3)] == [0.8, 0.889, 0.944]
    for seed in range(3):
        write_atari_run(tmp_path, "Qbert", "ppo", seed, 0.0)
    failures, checked = report_atari.collapsed_runs({"Qbert": report_atari.atari_runs(tmp_path, "Qbert")}, 3)
    assert checked == 3 and [f.split(" (")[0] for f in failures] == ["Qbert seed 0", "Qbert seed 1"]
    # a bin without a finite value counts neither its value nor its updates; none at all is no acceptance, a collapse
    record = records[1]
    record["diagnostics"]["n_updates"] = [10, 10, 10]
    record["diagnostics"]["bin_end"] = [800_000, 900_000, 1_000_000]
    for missing in (None, float("nan")):
        record["diagnostics"][report_atari.ATARI_ACCEPTANCE_KEY] = [missing, 1.0, 0.8]
        assert round(report_atari.late_acceptance(record), 3) == round(18 / 19, 3)
    record["diagnostics"][report_atari.ATARI_ACCEPTANCE_KEY] = [None, float("nan"), None]
    assert report_atari.late_acceptance(record) is None
    assert report_atari.collapse_reasons(None, 1.0, 0.5) == ["accepted n/a"]
    assert report_atari.collapse_reasons(float("nan"), 1.0, 0.5) == ["accepted n/a"]


def test_entropy_panels_average_the_runs_that_logged_a_bin():
    # a bin no run logged stays a gap (NaN), without numpy's "Mean of empty slice" warning; the others average only
    # the runs that logged them
    values = np.array([[1.0, np.nan, np.nan], [3.0, 2.0, np.nan]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        means = report_atari.mean_of_runs(values)
    np.testing.assert_array_equal(means, [2.0, 2.0, np.nan])


def test_atari5_third_measurement(tmp_path, monkeypatch):
    # the radius schedule's runs under atari_v3/, read beside the first entry's and the floor's: its heading and
    # command, its own figures, every entry's IQM per game, and the aggregate once every game has 3 seeds; its rule
    # reads nothing of its runs before all 15 exist, so until then the page gives their number and no score or curve
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    drawn, plotted = {}, {}  # per game, the runs each figure drew: curves by label, entropy by entry
    plot_curves, plot_entropy = report_atari.plot_curve_panels, report_atari.plot_entropy_panels

    def record_curves(by_game, *args, **kwargs):
        drawn.update(
            {game: {label: len(records) for label, records in by_label.items()} for game, by_label in by_game.items()}
        )
        return plot_curves(by_game, *args, **kwargs)

    def record_entropy(by_game, *args, **kwargs):
        plotted.update(
            {game: {entry: len(records) for entry, records in by_entry.items()} for game, by_entry in by_game.items()}
        )
        return plot_entropy(by_game, *args, **kwargs)

    monkeypatch.setattr(report_atari, "plot_curve_panels", record_curves)
    monkeypatch.setattr(report_atari, "plot_entropy_panels", record_entropy)
    random_scores = {game: 10.0 * (i + 1) for i, game in enumerate(report_atari.ATARI5)}
    (tmp_path / "atari").mkdir()
    (tmp_path / "atari" / "random.json").write_text(json.dumps({"games": {g: {"mean": v} for g, v in random_scores.items()}}))
    third = tmp_path / report_atari.ATARI_MEASUREMENTS["schedule"].folder
    for game, random_score in random_scores.items():
        for seed in range(3):
            write_atari_run(tmp_path, game, "ppo", seed, random_score + 100 + seed)
            collapsed = (game, seed) == ("Phoenix", 1)
            write_atari_run(tmp_path, game, "trpo_plus", seed, random_score + 200 + seed, 0.5 if collapsed else 1.0)
            write_atari_run(tmp_path / "atari_v2", game, "trpo_plus", seed, random_score + 50 + seed)
        # the closing update counted as not accepted: 9 of 10, 1.0 once it is left out
        write_atari_run(third, game, "trpo_plus", 0, random_score + 300, accepted=0.9, closed=True)
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "schedule")
    command = (
        "`python -m benchmarks.atari --env GAME --algo trpo_plus --seed S --budget 1e6 --threads 1 --checkpoint-freq "
        "50000 --resume --results-dir benchmarks/results/atari_v3 --params \"target_kl:'lin_0.08'\" "
        '"learning_rate:\'lin_2.5e-4\'" "callback:[]"`'
    )
    assert "### 6.2 Third measurement" in text and "from a checkout of commit 696ec4a" in text and command in text
    assert (
        "| game | TRPOPlus, first entry | TRPOPlus + entropy floor 0.3 | TRPOPlus + radius schedule | PPO | with the radius "
        "schedule against PPO | collapsed (first / with the floor / with the radius schedule) | seeds (first / with the "
        "floor / with the radius schedule / PPO) |\n| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"
    ) in text
    phoenix = "| Phoenix | 241 [240, 242] | 91.0 [90.0, 92.0] |"
    sealed_row = f"{phoenix} withheld | 141 [140, 142] | not yet (1 of 3 seeds) | withheld | 3 / 3 / 1 / 3 |"
    assert sealed_row in text and not any(str(int(r + 300)) in text for r in random_scores.values())
    assert "Withheld: 5 of the 15 Atari-5 runs of the entry with the radius schedule have finished." in text
    assert drawn["Phoenix"]["TRPOPlus + radius schedule"] == 0 and drawn["Phoenix"]["PPO"] == 3
    assert plotted["Phoenix"]["later"] == 0 and plotted["Phoenix"]["ppo"] == 3
    for image in ("atari5_v3_curves.png", "atari5_v3_entropy.png"):
        assert f"(images/{image})" in text and (tmp_path / "images" / image).is_file()
    # 14 of 15: still withheld
    for game, random_score in random_scores.items():
        for seed in (1, 2):
            if (game, seed) != ("Qbert", 2):
                write_atari_run(third, game, "trpo_plus", seed, random_score + 300 + seed, accepted=0.9, closed=True)
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "schedule")
    assert "Withheld: 14 of the 15" in text and "| 3 / 3 / 3 / 3 |" in text and "341" not in text
    assert drawn["Phoenix"]["TRPOPlus + radius schedule"] == 0 and plotted["Phoenix"]["later"] == 0
    # every seed: ahead everywhere, no run collapsed (the closing update left out), above the first entry: it ships
    write_atari_run(third, "Qbert", "trpo_plus", 2, random_scores["Qbert"] + 302, accepted=0.9, closed=True)
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "schedule")
    assert "Withheld" not in text and drawn["Phoenix"]["TRPOPlus + radius schedule"] == plotted["Phoenix"]["later"] == 3
    assert f"{phoenix} 341 [340, 342] | 141 [140, 142] | ahead | 1 / 0 / 0 of 3 |" in text
    assert "| TRPOPlus + entropy floor 0.3 |" not in text.split("Over the five games")[1]
    assert "runs below: 0 of 15 runs | **met** |" in text and "behind: none | **met** |" in text
    assert "fewer collapsed runs than the first entry (0 against 1): **met**" in text
    assert "The radius schedule ships: it becomes the `atari` entry." in text


def test_atari5_fourth_measurement_is_weighed_against_the_entry_now(tmp_path, monkeypatch):
    # the floor on the radius schedule (atari_v4/) ships against the radius schedule, the `atari` entry now, not against
    # the first entry: the first entry never collapses and scores low, the schedule collapses once (Phoenix seed 1) and
    # scores high, so an entry between them passes against the first entry and must fail against the schedule
    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    random_scores = {game: 10.0 * (i + 1) for i, game in enumerate(report_atari.ATARI5)}
    (tmp_path / "atari").mkdir()
    (tmp_path / "atari" / "random.json").write_text(json.dumps({"games": {g: {"mean": v} for g, v in random_scores.items()}}))
    fourth = report_atari.ATARI_MEASUREMENTS["schedule_floor"]
    assert fourth.baseline == "schedule" and fourth.beside == ("floor", "schedule")

    def write_fourth(gain, last=("Qbert", 2)):
        for game, random_score in random_scores.items():
            for seed in range(3):
                if (game, seed) != last:
                    write_atari_run(tmp_path / fourth.folder, game, "trpo_plus", seed, random_score + gain + seed)

    for game, random_score in random_scores.items():
        for seed in range(3):
            write_atari_run(tmp_path, game, "ppo", seed, random_score + 100 + seed)
            write_atari_run(tmp_path, game, "trpo_plus", seed, random_score + 150 + seed)
            write_atari_run(tmp_path / "atari_v2", game, "trpo_plus", seed, random_score + 50 + seed)
            collapsed = (game, seed) == ("Phoenix", 1)
            write_atari_run(
                tmp_path / "atari_v3", game, "trpo_plus", seed, random_score + 300 + seed, 0.5 if collapsed else 1.0
            )
    write_fourth(200)
    # its Breakout runs, which its rule runs after the fifteen Atari-5 runs, are not read either while it is sealed
    breakout = tmp_path / fourth.folder / "atari" / "breakout" / "trpo_plus" / "seed0.json"
    breakout.parent.mkdir(parents=True)
    breakout.write_text(json.dumps({"algo": "trpo_plus", "algo_label": "TRPOPlus", "seed": 0}))
    assert report_atari.is_sealed(tmp_path, fourth) and not report_atari.is_sealed(
        tmp_path, report_atari.ATARI_MEASUREMENTS["schedule"]
    )
    assert not [r for r in report_breakout.breakout_records(tmp_path) if r.get("variant") == fourth.breakout_mark]
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "schedule_floor")
    assert "### 6.3 Fourth measurement" in text and "--results-dir benchmarks/results/atari_v4" in text
    assert "Withheld: 14 of the 15 Atari-5 runs of the entry with the floor on the radius schedule" in text
    assert "| TRPOPlus + radius schedule + floor 0.3 | PPO |" in text and "211" not in text
    assert "| 3 / 3 / 3 / 2 / 3 |" in text  # seeds: first / floor / schedule / this one / PPO

    # all 15, no collapse, scoring between the first entry and the schedule: fewer collapses, a lower IQM
    write_fourth(200, last=None)
    assert [r["seed"] for r in report_breakout.breakout_records(tmp_path) if r.get("variant") == fourth.breakout_mark] == [0]
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "schedule_floor")
    phoenix = "| Phoenix | 191 [190, 192] | 91.0 [90.0, 92.0] | 341 [340, 342] | 241 [240, 242] | 141 [140, 142] | ahead |"
    assert f"{phoenix} 0 / 0 / 1 / 0 of 3 | 3 / 3 / 3 / 3 / 3 |" in text
    # seed 3 of PPO, the schedule and this entry on every game, this entry's collapsed on Qbert: the done tests read
    # it, the shipping test reads seeds 0-2 only, as its rule says
    for game, random_score in random_scores.items():
        write_atari_run(tmp_path, game, "ppo", 3, random_score + 103)
        write_atari_run(tmp_path / "atari_v3", game, "trpo_plus", 3, random_score + 303)
        write_atari_run(tmp_path / fourth.folder, game, "trpo_plus", 3, random_score + 203, 0.5 if game == "Qbert" else 1.0)
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "schedule_floor")
    assert "runs below: 1 of 20 runs: Qbert seed 3" in text
    aggregate = text.split("Over the five games")[1]
    assert "| TRPOPlus, first entry |" in aggregate and "| TRPOPlus + radius schedule |" in aggregate
    assert "| TRPOPlus + entropy floor 0.3 |" not in aggregate
    assert "fewer collapsed runs than the entry with the radius schedule (0 against 1): **met**" in text
    assert "at least the entry with the radius schedule's (" in text
    assert "**missed**. The floor on the radius schedule does not ship: the `atari` entry stays." in text

    # above the schedule everywhere: it ships
    write_fourth(400, last=None)
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "schedule_floor")
    assert "The floor on the radius schedule ships: it becomes the `atari` entry." in text


def test_atari5_later_section(tmp_path, monkeypatch):
    from scipy import stats

    monkeypatch.setattr(report_stats, "BOOTSTRAP_REPS", 200)
    random_scores = {game: 10.0 * (i + 1) for i, game in enumerate(report_atari.ATARI5)}
    (tmp_path / "atari").mkdir()
    (tmp_path / "atari" / "random.json").write_text(json.dumps({"games": {g: {"mean": v} for g, v in random_scores.items()}}))
    second = tmp_path / report_atari.ATARI_MEASUREMENTS["floor"].folder

    def floor_gain(game):
        return 50 if game == "Qbert" else 300

    # every score varies with the seed (so the bootstrap's draws matter): PPO random + 100, the first entry random +
    # 200 with Phoenix seed 1 collapsed (accepted 0.5), the floor random + 300 except on Qbert (random + 50: behind)
    for game, random_score in random_scores.items():
        for seed in range(3):
            write_atari_run(tmp_path, game, "ppo", seed, random_score + 100 + seed)
            collapsed = (game, seed) == ("Phoenix", 1)
            write_atari_run(tmp_path, game, "trpo_plus", seed, random_score + 200 + seed, 0.5 if collapsed else 1.0)
            if (game, seed) != ("Qbert", 2):
                write_atari_run(second, game, "trpo_plus", seed, random_score + floor_gain(game) + seed)
    # PPO's seed 3 on BattleZone (none of the TRPOPlus entries has it): its entropy 5 nats raises PPO's mean entropy
    # on the game to 2, so the no-collapse test asks 0.5 nats there
    write_atari_run(tmp_path, "BattleZone", "ppo", 3, random_scores["BattleZone"] + 103, entropy=5.0)
    # a game short of seeds of the floor: no aggregate yet
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "floor")
    assert (
        "| Qbert | 251 [250, 252] | 100 [100, 101] | 151 [150, 152] | not yet (2 of 3 seeds) | 0 / 0 of 2 | 3 / 2 / 3 |"
        in text
    )
    assert "| Phoenix | 241 [240, 242] | 341 [340, 342] | 141 [140, 142] | ahead | 1 / 0 of 3 | 3 / 3 / 3 |" in text
    assert "Aggregate, done tests and which entry ships: not yet" in text and "Qbert 2 of 3." in text

    # all seeds, and the floor's BattleZone seed 0 at 0.4 nats: under PPO's mean over all its runs (0.5), not over the
    # seeds the floor shares with it (0.25); the floor collapses as often as the first entry, so it does not ship
    write_atari_run(second, "Qbert", "trpo_plus", 2, random_scores["Qbert"] + 52)
    write_atari_run(second, "BattleZone", "trpo_plus", 0, random_scores["BattleZone"] + 300, entropy=0.4)
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "floor")
    # the first entry's headline row is section 6's, on the same records and seeds
    first = report_atari.atari5_section(tmp_path, tmp_path / "images", tmp_path)
    first_row = next(line for line in first.splitlines() if line.startswith("| TRPOPlus | ") and line.count("[") == 3)
    assert first_row.replace("| TRPOPlus |", "| TRPOPlus, first entry |") in text
    # on section 6's scale: PPO's IQM over the runs of that aggregate (seeds 0-2: 101 over random), not over its seed 3
    assert "BattleZone +101 (2.0x / " in text

    def human_iqm(gain):
        human = [100 * report_atari.human_normalized(g, r + gain(g) + s) for g, r in random_scores.items() for s in range(3)]
        return stats.trim_mean(human, 0.25)

    floor_iqm, ppo_iqm = human_iqm(floor_gain), human_iqm(lambda g: 100)
    assert f"| TRPOPlus + entropy floor 0.3 | {floor_iqm:.1f} [" in text and f"| PPO | {ppo_iqm:.1f} [" in text
    assert f"| at least 1.2x PPO's | {floor_iqm / ppo_iqm:.2f}x |" in text
    assert "| its IQM at or above the low end of PPO's 95% interval on every game | behind: Qbert | **missed** |" in text
    assert "runs below: 1 of 15 runs: BattleZone seed 0 (entropy 0.4 nats against 0.50) | **missed** |" in text
    assert "fewer collapsed runs than the first entry (1 against 1): **missed**" in text
    assert f"({floor_iqm:.2f}% against {human_iqm(lambda g: 200):.2f}%): **met**" in text
    assert "The floor does not ship: the `atari` entry stays." in text
    for image in ("atari5_v2_curves.png", "atari5_v2_entropy.png"):
        assert f"(images/{image})" in text and (tmp_path / "images" / image).is_file()

    # without that collapse, the floor ships
    write_atari_run(second, "BattleZone", "trpo_plus", 0, random_scores["BattleZone"] + 300)
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "floor")
    assert "runs below: 0 of 15 runs | **met** |" in text
    assert "fewer collapsed runs than the first entry (0 against 1): **met**" in text
    assert "The floor ships: it becomes the `atari` entry." in text

    # scoring below the first entry, it does not ship, whatever its collapses
    for game, random_score in random_scores.items():
        for seed in range(3):
            write_atari_run(second, game, "trpo_plus", seed, random_score + 150 + seed)
    text = report_atari.later_section(tmp_path, tmp_path / "images", tmp_path, "floor")
    assert "fewer collapsed runs than the first entry (0 against 1): **met**" in text
    assert "**missed**. The floor does not ship: the `atari` entry stays." in text
