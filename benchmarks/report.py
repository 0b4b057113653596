"""
Turn the results under ``benchmarks/results/`` into ``docs/benchmarks.md`` (tables) and ``docs/images/`` (plots).

Reads ``fvp.json`` (``benchmarks.fvp``), ``throughput*.json`` (``benchmarks.throughput``), ``learning/<algo>/<env>/
seed<k>.json`` (``benchmarks.learning``), ``atari/<game>/<algo>/seed<k>.json`` (``benchmarks.atari``), the tuning runs
of the ``atari`` entry and PPO's (``breakout_tuning/<candidate>/breakout/<algo>/seed<k>.json``, with their rules)
and ``minatar_random.json`` (``benchmarks.minatar_random``); whatever is missing is listed as not run. Per env of the
learning benchmark: the mean and the interquartile mean (IQM) of the final evaluation returns over seeds, with 95%
stratified-bootstrap confidence intervals from ``rliable`` (``rly.get_interval_estimates``); envs with fewer than
``MIN_SEEDS`` seeds of an algorithm are marked incomplete and not judged. Every figure in the page comes from these
files: never edit the page by hand, run this again.

The page's text is ``benchmarks/report_template.md``: named blocks with ``{fields}``. The functions below only read
the results and compute the fields (numbers, table rows, which block applies); the targets are rules (``Target``)
checked against the results. A new result (a seed, an env, a game, a throughput file) is picked up from the files.

Usage::

    python -m benchmarks.report                       # benchmarks/results -> docs/benchmarks.md, docs/images/
"""

import argparse
import functools
import json
import math
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from benchmarks._common import (
    ALGO_LABELS,
    REPO_ROOT,
    RESULTS_DIR,
    common_budget,
    env_dirname,
    load_hyperparams,
    machine_info,
)

TEMPLATE_PATH = Path(__file__).resolve().parent / "report_template.md"
MIN_SEEDS = 5
BOOTSTRAP_REPS = 20_000
#: Seed of the bootstrap: the same results give the same intervals on every regeneration
BOOTSTRAP_SEED = 0
#: The envs of the learning benchmark, in the page's order (the budget table; other envs with results follow)
LEARNING_ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "Pendulum-v1", "MinAtar/Breakout-v1"]
#: The MinAtar games (more are taken from the results); seeds of the comparison: seed 0 chose the values of the entry
#: before 2026-11-25 (docs/zoo.md), so it is left out for both entries (``--minatar-seeds`` to change)
MINATAR_GAMES = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
MINATAR_SEEDS = [1, 2, 3, 4, 5]
#: Issue 12's MinAtar goal: the aggregate IQM of TRPOPlus's normalized scores at least this, and no game below PPO's
#: interval
MINATAR_GOAL_IQM = 1.1
#: Where the runs of the MinAtar entry before the last tuning are kept (a subsection of their own when present), and
#: the seeds it was run on (its comparison with PPO stays on those, whatever ``--minatar-seeds`` says)
MINATAR_PREVIOUS_ENTRY = "minatar_previous_entry"
MINATAR_PREVIOUS_ENTRY_SEEDS = [1, 2, 3]
#: A cell of an algorithm without runs
NOT_RUN = "not run yet"
#: The MinAtar comparison: TRPOPlus against the second, which normalizes the scores (random = 0, it = 1)
MINATAR_ALGOS = ("trpo_plus", "ppo")
#: Breakout: the entries compared (TRPOPlus first), their budget and the seeds each needs before it is judged
BREAKOUT_ALGOS = ("trpo_plus", "ppo")
BREAKOUT_BUDGET = 1_000_000
BREAKOUT_MIN_SEEDS = 3
#: Evaluations a run's late score averages (the final one and those before it), for the check beside the verdict
BREAKOUT_LATE_EVALUATIONS = 3
#: Atari-5 (Aitchison, Sweetser and Hutter, ICML 2023): per game, its weight in the estimate of the 57-game median
#: human-normalized score (a regression on log10(1 + score in percent), no intercept, from the authors' code:
#: github.com/maitchison/PPO, tools/plot_util.py), and the random and human scores of the usual DQN table
ATARI5 = {
    "BattleZone": (0.3819751237831753, 2360.0, 37187.5),
    "DoubleDunk": (0.0679099488887574, -18.6, -16.4),
    "NameThisGame": (0.310804148620847, 2292.3, 8049.0),
    "Phoenix": (0.12412619402774641, 761.4, 7242.6),
    "Qbert": (0.08048518286466755, 163.9, 13455.0),
}
#: The Atari-5 comparison (benchmarks/results/atari/atari5_rule.md): TRPOPlus against the second, which normalizes
#: the scores (random = 0, its IQM = 1); the budget; the seeds each game needs before the verdict; the goal and the aim
ATARI_ALGOS = ("trpo_plus", "ppo")
ATARI_BUDGET = 1_000_000
ATARI_MIN_SEEDS = 3
ATARI_GOAL_IQM = 1.0
ATARI_AIM_IQM = 1.1
#: The Atari-5 diagnostics table: the steps at the end of a run it averages over, and per algorithm, where each column
#: comes from (a ``train/*`` value of the record's diagnostics and its sign; a column an algorithm lacks shows n/a)
ATARI_DIAGNOSTICS_WINDOW = 200_000
ATARI_DIAGNOSTICS = {
    "trpo_plus": {
        "entropy": ("train/entropy", 1),
        "explained_variance": ("train/explained_variance", 1),
        "kl": ("train/update_kl", 1),
        "accepted": ("train/line_search_success_rate", 1),
        "step_fraction": ("train/step_fraction_mean", 1),
    },
    "ppo": {
        "entropy": ("train/entropy_loss", -1),
        "explained_variance": ("train/explained_variance", 1),
        "kl": ("train/approx_kl", 1),
        "clip_fraction": ("train/clip_fraction", 1),
    },
}
#: ALE ends a game after 108,000 frames (30 minutes of play; ``max_num_frames_per_episode`` of the v4 games). The
#: evaluation's ``Monitor`` counts frames and misses the few ALE spends on a reset (107,987 seen): a game within
#: ``ATARI_CAP_MARGIN`` frames of the cap was cut by it, not ended by play
ATARI_FRAME_CAP = 108_000
ATARI_CAP_MARGIN = 100
#: Words of a game's verdict: TRPOPlus's IQM above PPO's interval, inside it, below it
PLACE = {1: "ahead", 0: "level", -1: "behind"}
COLORS = {"trpo_plus": "tab:blue", "trpo": "tab:orange", "ppo": "tab:green"}
VARIANT_COLORS = ("tab:purple", "tab:brown", "tab:olive", "tab:cyan", "tab:pink")
FVP_LABELS = {
    "double_backward": "double backward (sb3-contrib)",
    "double_backward_one_grad": "double backward, one `create_graph` gradient",
    "double_backward_channels_last": "double backward (sb3-contrib), channels_last",
    "analytic": "analytic, `actor_critic_jvp` (TRPOPlus)",
    "functional": "analytic, `functional_jvp`",
}
PHASE_LABELS = {
    "actor_params": "find actor parameters",
    "gradient": "forward + surrogate gradient",
    "fvp_setup": "FVP setup (linearization)",
    "cg": "conjugate gradient",
    "curvature": "step length",
    "line_search": "line search",
    "critic": "critic",
    "critic_kl_check": "critic's KL check (`critic_kl_fraction`)",
}
#: Words of the computed sentences
VERDICT = {True: "met", False: "missed"}
OVERLAP = {True: "overlap", False: "do not overlap"}
BELOW = {True: "**yes**", False: "no"}
NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


# --- the template --------------------------------------------------------------------------------------------------

_BLOCK = re.compile(r"^<!-- block: ([\w.-]+) -->$", re.MULTILINE)


@functools.cache
def template_blocks(path: Path = TEMPLATE_PATH) -> dict[str, str]:
    """``{name: text}`` of the template's blocks (from each marker to the next; surrounding blank lines dropped)."""
    parts = _BLOCK.split(path.read_text())
    return {name: body.strip("\n") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def fill(block: str, **fields: Any) -> str:
    """The template's ``block`` with its ``{fields}`` filled in."""
    blocks = template_blocks()
    if block not in blocks:
        raise KeyError(f"{TEMPLATE_PATH} has no block {block!r}")
    return blocks[block].format(**fields)


def fill_each(block: str, items: Iterable[dict[str, Any]], separator: str = "\n") -> str:
    """``block`` filled once per item, joined (table rows, list items)."""
    return separator.join(fill(block, **item) for item in items)


def paragraphs(*parts: str) -> str:
    """The non-empty parts as markdown paragraphs (a blank line between them)."""
    return "\n\n".join(part for part in parts if part)


def sentences(*parts: str) -> str:
    """The non-empty parts as one paragraph."""
    return " ".join(part for part in parts if part)


class Interval(NamedTuple):
    """A point estimate and its 95% interval; formatted as ``point [low, high]`` (``{iqm:.1f}``)."""

    point: float
    low: float
    high: float

    def __format__(self, spec: str) -> str:
        return f"{self.point:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def overlaps(self, other: "Interval") -> bool:
        return bool(self.low <= other.high and other.low <= self.high)

    def ratio_to(self, other: "Interval") -> float:
        """The ratio of the point estimates (NaN against 0)."""
        return self.point / other.point if other.point else float("nan")


@dataclass(frozen=True)
class Shown:
    """A number that may be missing: ``n/a`` then, and with a ``g`` format no decimals from 1,000 on."""

    value: float | None

    def __format__(self, spec: str) -> str:
        value = self.value
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "n/a"
        if spec.endswith("g") and abs(value) >= 1000:
            return f"{value:,.0f}"
        return format(value, spec)


# --- targets: rules checked against the results ---------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """
    One of the project's targets: ``what`` is met when ``met(value(data))``; ``evidence`` shows the measured value
    (``{value}`` and the data's fields). A ``value`` of ``None`` (not measured) leaves the target out.
    """

    what: str
    value: Callable[[dict[str, Any]], float | None]
    met: Callable[[float], bool]
    evidence: str


def check_targets(targets: Iterable[Target], data: dict[str, Any]) -> str:
    checks = []
    for target in targets:
        value = target.value(data)
        if value is not None:
            evidence = target.evidence.format(**data, value=value)
            checks.append(fill("target", what=target.what, verdict=VERDICT[bool(target.met(value))], evidence=evidence))
    return "; ".join(checks)


def _speed_ratio(env: dict[str, Any], algo: str) -> float | None:
    """TRPOPlus's steps per second over ``algo``'s (``rollout_only``: the ceiling), ``None`` if ``algo`` was not run."""
    rate = env["rollout_only"] if algo == "rollout_only" else env["algos"].get(algo)
    return env["algos"]["trpo_plus"]["steps_per_s"] / rate["steps_per_s"] if rate else None


def _ceiling_ratio(env: dict[str, Any]) -> float:
    """
    TRPOPlus's rate against the rollout-only ceiling, taken as the faster of the rollout-only pass and TRPOPlus's own
    rollouts inside its training run (``rollout_s / (rollout_s + train_s)``): on a shared machine the separate pass
    may run slower than the same rollouts inside training, and would then flatter the ratio.
    """
    plus = env["algos"]["trpo_plus"]
    return min(_speed_ratio(env, "rollout_only") or 1.0, plus["rollout_s"] / (plus["rollout_s"] + plus["train_s"]))


#: On the CNN case's full batch of ``fvp.json``
FVP_TARGETS = (
    Target(
        "at least 15x faster per product",
        lambda batch: batch["product_speedup"]["analytic"],
        lambda speedup: speedup >= 15,
        "{value:.1f}x per product, {cg_speedup[analytic]:.1f}x per CG solve with setup",
    ),
    Target(
        "relative error under 1e-4", lambda batch: batch["error"]["analytic"]["rel"], lambda error: error < 1e-4, "{value:.1e}"
    ),
)
FVP_TARGET_CASE, FVP_TARGET_BATCH = "nature_cnn", "full"
#: Per env of ``throughput*.json`` (its key): TRPOPlus's rate against the others'
THROUGHPUT_TARGETS = {
    "breakout": (
        Target(
            "at least 10x sb3-contrib TRPO", lambda env: _speed_ratio(env, "trpo"), lambda ratio: ratio >= 10, "{value:.1f}x"
        ),
        Target("at least as fast as PPO", lambda env: _speed_ratio(env, "ppo"), lambda ratio: ratio >= 1, "{value:.2f}x"),
        Target(
            "at least half of the rollout-only ceiling",
            _ceiling_ratio,
            lambda ratio: ratio >= 0.5,
            "{value:.2f}; ceiling: the faster of the rollout-only pass and TRPOPlus's own rollouts",
        ),
    )
}
#: Learning: TRPOPlus at or above each of these (IQM) on the envs whose id starts with the prefix
LEARNING_BASELINES = {"trpo": "", "ppo": "MinAtar/"}


# --- shared pieces -------------------------------------------------------------------------------------------------


def _read(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def machine_text(machine: dict[str, Any] | None, when: str = "at start") -> str:
    if not machine:
        return fill("machine.missing")
    load = machine.get("load_average")
    return fill(
        "machine",
        cpu_model=machine.get("cpu_model"),
        cores=machine.get("cpu_affinity") or machine.get("cpu_count"),
        torch=machine.get("torch"),
        threads=machine.get("torch_threads"),
        when=when,
        load=load[0] if load else "n/a",
        date=machine.get("date"),
    )


def provenance(command: str, machine: dict[str, Any] | None, load_after: Any) -> str:
    """The command and the machine of a measurement."""
    return fill("provenance", command=command, machine=machine_text(machine), load_after=load_after)


def _image_link(image: Path, docs_dir: Path) -> str:
    return image.relative_to(docs_dir).as_posix()


# --- Fisher-vector product -------------------------------------------------------------------------------------


def fvp_section(results_dir: Path) -> str:
    data = _read(results_dir / "fvp.json")
    if data is None:
        return fill("fvp.missing")
    load_after = data.get("machine_after", {}).get("load_average", ["n/a"])[0]
    parts = [fill("fvp", provenance=provenance(data["command"], data["machine"], load_after), **data["args"])]
    for case_name, case in data["cases"].items():
        parts.append(fill("fvp.case", **{**case, "name": case_name}))
        for batch_name, batch in case["batches"].items():
            parts.append(fill("fvp.batch", name=batch_name, batch_size=batch["batch_size"], rows=fvp_rows(batch)))
            # sb3-contrib's KL averaged over the action dimensions: its products are rescaled to compare
            scales = [scale for scale in batch.get("kl_scale", {}).values() if scale != 1]
            if scales:
                parts.append(fill("fvp.kl_scale", dimensions=max(scales)))
    target = data["cases"].get(FVP_TARGET_CASE, {}).get("batches", {}).get(FVP_TARGET_BATCH)
    if target:
        parts.append(fill("fvp.targets", batch_size=target["batch_size"], checks=check_targets(FVP_TARGETS, target)))
        if "double_backward_one_grad" in target["product_s"]:
            speedup = target["product_s"]["double_backward_one_grad"] / target["product_s"]["analytic"]
            parts.append(fill("fvp.one_grad", speedup=speedup))
        parts.append(fill("fvp.cnn_limits"))
    return paragraphs(*parts)


def fvp_rows(batch: dict[str, Any]) -> str:
    rows = []
    for method in batch["product_s"]:
        fields = {key: batch[key][method] for key in ("setup_s", "product_s", "product_speedup", "cg_s", "cg_speedup")}
        error = batch["error"].get(method)
        if error:
            rows.append(fill("fvp.row", label=FVP_LABELS.get(method, method), **fields, **error))
        else:
            rows.append(fill("fvp.row.reference", label=FVP_LABELS.get(method, method), **fields))
    return "\n".join(rows)


# --- throughput --------------------------------------------------------------------------------------------------


def throughput_section(results_dir: Path) -> str:
    """One block per env of each ``throughput*.json`` (e.g. a second file measured with another thread count)."""
    files = sorted(results_dir.glob("throughput*.json"))
    if not files:
        return fill("throughput.missing")
    envs = [(name, env) for path in files for name, env in json.loads(path.read_text())["envs"].items()]
    return paragraphs(fill("throughput"), *(throughput_env(name, env) for name, env in envs))


def rollout_of(env: dict[str, Any], result: dict[str, Any]) -> tuple[int, int]:
    """``(n_envs, n_steps)`` of one algorithm's timing (older results hold only the benchmark's, shared by all)."""
    return result.get("n_envs", env["n_envs"]), result.get("n_steps", env["n_steps"])


def rollout_settings(env: dict[str, Any]) -> str:
    """The header's rollout: one for all algorithms when the benchmark sets it, else each from its own zoo entry."""
    batches = {rollout_of(env, result) for result in env["algos"].values()}
    if len(batches) == 1:
        return f"{env['n_envs']} envs x {env['n_steps']} steps = {env['n_envs'] * env['n_steps']} steps per update"
    rollout_only = f"{env['n_envs']} envs x {env['n_steps']} steps"
    return f"each algorithm's `n_envs` and `n_steps` from its zoo entry; TRPOPlus's rollout-only pass {rollout_only}"


def throughput_row(env: dict[str, Any], algo: str, result: dict[str, Any]) -> str:
    """One algorithm's row of the throughput table, with its own update size and its ratio to the rollout-only rate."""
    n_envs, n_steps = rollout_of(env, result)
    return fill(
        "throughput.row",
        **{**result, "n_envs": n_envs, "n_steps": n_steps},
        label=ALGO_LABELS[algo],
        vs_rollout=result["steps_per_s"] / env["rollout_only"]["steps_per_s"],
        train_per_update=result["train_s"] / max(result["timed_updates"], 1),
    )


def throughput_env(env_name: str, env: dict[str, Any]) -> str:
    rollout = env["rollout_only"]
    rows = [throughput_row(env, algo, result) for algo, result in env["algos"].items()]
    by_round = env.get("ratios_by_round", [])
    ratios = (
        {
            "name": key.replace("_", " "),
            "value": value,
            "rounds": fill("throughput.ratio.rounds", values=", ".join(f"{r[key]:.2f}" for r in by_round)) if by_round else "",
        }
        for key, value in env["ratios"].items()
    )
    fields = {
        **env,
        "rollout_settings": rollout_settings(env),
        "provenance": provenance(env["command"], env["machine"], env["load_average_after"][0]),
        "rows": "\n".join(rows),
        "rollout_rate": rollout["steps_per_s"],
        "rollouts": rollout["rollouts"],
        "rollout_s": rollout["rollout_s"],
        "ratios": fill_each("throughput.ratio", ratios, ", "),
    }
    parts = [fill("throughput.env", **fields)]
    for algo in ALGO_LABELS:
        phases = env["algos"].get(algo, {}).get("phases")
        if phases:
            parts.append(phase_table(algo, phases))
            if f"throughput.phases.note.{algo}" in template_blocks():
                parts.append(fill(f"throughput.phases.note.{algo}"))
    if env_name in THROUGHPUT_TARGETS and "trpo_plus" in env["algos"]:
        sub = env["algos"]["trpo_plus"]["hyperparams"].get("cg_sub_sampling_factor", "1")
        checks = check_targets(THROUGHPUT_TARGETS[env_name], env)
        parts.append(fill(f"throughput.targets.{env_name}", cg_sub_sampling_factor=sub, checks=checks))
        parts.append(limits_text(env))
    return paragraphs(*parts)


def phase_table(algo: str, phases: dict[str, float]) -> str:
    """The time split of one update (``phases``: seconds per part, from ``benchmarks.throughput --phase-timing``)."""
    total = phases["total"]
    parts = {key: value for key, value in phases.items() if key in PHASE_LABELS and math.isfinite(value)}
    other = total - sum(parts.values())
    rows = ({"part": PHASE_LABELS[key], "seconds": value, "share": value / total} for key, value in parts.items())
    return fill(
        "throughput.phases",
        label=ALGO_LABELS[algo],
        fvp_calls=phases["fvp_calls"],
        fvp_ms=phases["fvp_mean"] * 1000,
        line_search=fill("throughput.phases.line_search", iters=phases["line_search_iters"])
        if "line_search_iters" in phases
        else "",
        rows=fill_each("throughput.phases.row", rows),
        other=other,
        other_share=other / total,
        total=total,
    )


def limits_text(env: dict[str, Any]) -> str:
    """Where the time goes, from the measured split: why the end-to-end ratios are what they are."""
    plus, trpo = env["algos"]["trpo_plus"], env["algos"].get("trpo")
    batch = env["n_envs"] * env["n_steps"]
    updates = max(plus["timed_updates"], 1)
    per_update = plus["train_s"] / updates
    # (the hyperparameters are stored as strings: the YAML's `dict(...)`, or in older files the repr of a dict)
    separate = re.search(r"share_features_extractor\W+False", plus["hyperparams"].get("policy_kwargs", "")) is not None
    critic_kind = "separate_critic" if separate else "shared_critic"
    text = [
        fill(
            "throughput.limits",
            batch=batch,
            rollout_per_update=plus["rollout_s"] / updates,
            rollout_work=fill(f"throughput.limits.rollout_work.{critic_kind}"),
            train_per_update=per_update,
            rollout_share=plus["rollout_s"] / (plus["rollout_s"] + plus["train_s"]),
            ceiling_per_update=batch / env["rollout_only"]["steps_per_s"],
        )
    ]
    if "phases" in plus:
        sub = int(plus["hyperparams"].get("cg_sub_sampling_factor", "1"))
        phases = plus["phases"]
        text.append(
            fill(
                "throughput.limits.phases",
                **phases,
                fvp_ms=phases["fvp_mean"] * 1000,
                fisher_frames=f"all {batch} frames" if sub == 1 else f"every {sub}th sample, {batch // sub} frames",
                batch=batch,
                critic_trains_cnn=fill(
                    "throughput.limits.critic_trains_cnn", critic_updates=plus["hyperparams"].get("n_critic_updates")
                )
                if float(plus["hyperparams"].get("critic_kl_fraction", "0")) > 0
                else "",
            )
        )
        if trpo and "phases" in trpo:
            trpo_per_update = trpo["train_s"] / max(trpo["timed_updates"], 1)
            critic_work = fill(
                f"throughput.limits.trpo.{critic_kind}",
                trpo_critic_updates=trpo["hyperparams"].get("n_critic_updates", "10"),
                critic_updates=plus["hyperparams"].get("n_critic_updates"),
            )
            text.append(
                fill(
                    "throughput.limits.trpo",
                    speedup=trpo_per_update / per_update,
                    trpo_per_update=trpo_per_update,
                    trpo_fvp_mean=trpo["phases"]["fvp_mean"],
                    trpo_fvp_calls=trpo["phases"]["fvp_calls"],
                    trpo_critic=trpo["phases"]["critic"],
                    critic=phases["critic"],
                    batch=batch,
                    critic_work=critic_work,
                )
            )
    return sentences(*text)


# --- learning ----------------------------------------------------------------------------------------------------


def load_learning(results_dir: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``{env_id: {algo: [record, ...]}}`` of the finished runs, sorted by seed."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted((results_dir / "learning").glob("*/*/seed*.json")):
        record = json.loads(path.read_text())
        runs[record["env_id"]][record["algo"]].append(record)
    for by_algo in runs.values():
        for records in by_algo.values():
            records.sort(key=lambda record: record["seed"])
    return runs


def interval_estimates(scores: dict[str, np.ndarray]) -> dict[str, dict[str, Interval]]:
    """
    Per algorithm: mean and IQM of the scores with 95% stratified-bootstrap intervals (rliable). ``scores[algo]``:
    one score per seed, or a ``(seeds, tasks)`` matrix aggregated over all its entries.
    """
    from rliable import metrics

    def aggregates(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_mean(x), metrics.aggregate_iqm(x)])

    # one row per run, one column per task (a single task: a column of seeds)
    score_dict = {algo: values.reshape(len(values), -1) for algo, values in scores.items()}
    points, intervals = seeded_interval_estimates(score_dict, aggregates)
    return {
        algo: {
            "mean": Interval(points[algo][0], intervals[algo][0, 0], intervals[algo][1, 0]),
            "iqm": Interval(points[algo][1], intervals[algo][0, 1], intervals[algo][1, 1]),
        }
        for algo in scores
    }


def seeded_interval_estimates(score_dict: dict[str, Any], function: Callable[..., Any]) -> tuple[dict, dict]:
    """``rly.get_interval_estimates`` with ``BOOTSTRAP_REPS`` resamples, the same on every call (``BOOTSTRAP_SEED``)."""
    from rliable import library as rly

    # rliable's StratifiedBootstrap draws its resamples from NumPy's global generator (np.random.choice), whatever
    # random_state says: seed that generator for the call, then give the caller back its state
    global_state = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # arch's notice about `random_state`, used by rliable
            return rly.get_interval_estimates(
                score_dict, function, reps=BOOTSTRAP_REPS, random_state=np.random.RandomState(BOOTSTRAP_SEED)
            )
    finally:
        np.random.set_state(global_state)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish_axes(ax: Any, title: str, legend_fontsize: int, ylabel: str | None = None) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("environment steps")
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=legend_fontsize)


def _save_figure(fig: Any, path: Path) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)


def plot_mean_curves(
    ax: Any, by_algo: dict[str, list[dict[str, Any]]], key: str = "mean", colors: dict[str, str] | None = None
) -> None:
    """
    One line per algorithm (or group of runs): the mean over seeds of the curve's ``key`` (the evaluation return by
    default), with a 95% bootstrap interval of the mean; the label is the algorithm's name, or the group's own.
    """
    rng = np.random.default_rng(0)
    for algo, records in by_algo.items():
        points = [[(t, v) for t, v in zip(r["curve"]["timesteps"], r["curve"].get(key, [])) if v is not None] for r in records]
        points = [p for p in points if p]
        if not points:
            continue
        grid = np.asarray([t for t, _ in points[0]], dtype=float)
        curves = np.array([np.interp(grid, *map(np.asarray, zip(*p))) for p in points])
        color = (colors or COLORS).get(algo)
        seeds_text = "1 seed" if len(points) == 1 else f"{len(points)} seeds"
        ax.plot(grid, curves.mean(axis=0), color=color, label=f"{ALGO_LABELS.get(algo, algo)} ({seeds_text})")
        if len(points) > 1:
            samples = curves[rng.integers(0, len(points), size=(2000, len(points)))].mean(axis=1)
            low, high = np.percentile(samples, [2.5, 97.5], axis=0)
            ax.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)


def plot_curves(env_id: str, by_algo: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """Mean evaluation return over seeds against steps, with a 95% bootstrap interval of the mean."""
    fig, ax = _pyplot().subplots(figsize=(6.4, 4.0))
    plot_mean_curves(ax, by_algo)
    _finish_axes(ax, f"{env_id}: evaluation return (mean over seeds, 95% bootstrap CI)", 8, ylabel="return")
    _save_figure(fig, path)


def budget_fields() -> dict[str, str]:
    """The budget table: the common budget of each env and each algorithm's own zoo budget (from the YAML files)."""
    rows = []
    for env_id in LEARNING_ENVS:
        own = [f"{int(float(load_hyperparams(algo, env_id)[0]['n_timesteps'])):,}" for algo in ALGO_LABELS]
        rows.append({"env_id": env_id, "common": common_budget(env_id), "own": " | ".join(own)})
    return {
        "own_budget_headers": fill_each(
            "learning.own_budget_header", ({"label": label} for label in ALGO_LABELS.values()), " | "
        ),
        "own_budget_aligns": " ---: |" * len(ALGO_LABELS),
        "budget_rows": fill_each("learning.budget_row", rows),
    }


def learning_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> str:
    runs = load_learning(results_dir)
    intro = fill(
        "learning", bootstrap_reps=BOOTSTRAP_REPS, bootstrap_seed=BOOTSTRAP_SEED, min_seeds=MIN_SEEDS, **budget_fields()
    )
    if not runs:
        return paragraphs(intro, fill("learning.no_runs"))
    parts, verdicts = [intro], []
    for env_id in [*LEARNING_ENVS, *sorted(set(runs) - set(LEARNING_ENVS))]:
        if env_id not in runs:
            continue
        by_algo = {algo: runs[env_id][algo] for algo in ALGO_LABELS if algo in runs[env_id]}
        estimates = interval_estimates({algo: np.array([r["final"]["mean"] for r in rs]) for algo, rs in by_algo.items()})
        image = images_dir / f"learning_{env_dirname(env_id)}.png"
        plot_curves(env_id, by_algo, image)
        rows = fill_each("learning.row", (learning_row(algo, records, estimates[algo]) for algo, records in by_algo.items()))
        parts.append(fill("learning.env", env_id=env_id, rows=rows, image=_image_link(image, docs_dir)))
        verdicts += learning_verdicts(env_id, by_algo, estimates)
    missing = [env for env in LEARNING_ENVS if env not in runs]
    if missing:
        verdicts.append(fill("learning.not_run", env_ids=", ".join(missing)))
    parts.append(fill("learning.targets", verdicts="\n".join(verdicts)))
    return paragraphs(*parts)


def learning_row(algo: str, records: list[dict[str, Any]], estimates: dict[str, Interval]) -> dict[str, Any]:
    n_seeds = len(records)
    if n_seeds >= MIN_SEEDS:
        status = fill("learning.status.complete")
    else:
        status = fill("learning.status.incomplete", n_seeds=n_seeds, min_seeds=MIN_SEEDS)
    # Secondary, not judged: the stochastic policy's training episodes (SB3's ep_rew_mean, last 100 episodes)
    train = [r["curve"]["train_ep_rew_mean"][-1] for r in records if r["curve"].get("train_ep_rew_mean")]
    train = [value for value in train if value is not None]
    return {
        "label": ALGO_LABELS[algo],
        "n_seeds": n_seeds,
        "budgets": ", ".join(f"{budget:,}" for budget in sorted({r["n_timesteps"] for r in records})),
        **estimates,
        "per_seed": fill_each("learning.seed", ({"seed": r["seed"], "score": r["final"]["mean"]} for r in records), ", "),
        "train_reward": Shown(float(np.mean(train)) if train else None),
        "status": status,
        "hyperparams_source": records[0]["hyperparams_source"],
    }


def learning_verdicts(
    env_id: str, by_algo: dict[str, list[dict[str, Any]]], estimates: dict[str, dict[str, Interval]]
) -> list[str]:
    """TRPOPlus against each baseline of ``LEARNING_BASELINES`` on ``env_id``: judged only with every seed."""
    complete = {algo for algo, records in by_algo.items() if len(records) >= MIN_SEEDS}
    verdicts = []
    for baseline, prefix in LEARNING_BASELINES.items():
        if not env_id.startswith(prefix):
            continue
        fields = {"env_id": env_id, "baseline": ALGO_LABELS[baseline]}
        missing = [algo for algo in ("trpo_plus", baseline) if algo not in by_algo]
        if missing:
            verdicts.append(fill("learning.verdict.not_run", missing=ALGO_LABELS[missing[0]], **fields))
        elif {"trpo_plus", baseline} <= complete:
            plus, base = estimates["trpo_plus"]["iqm"], estimates[baseline]["iqm"]
            verdicts.append(
                fill(
                    "learning.verdict",
                    verdict=VERDICT[bool(plus.point >= base.point)],
                    plus=plus.point,
                    base=base.point,
                    overlap=OVERLAP[plus.overlaps(base)],
                    **fields,
                )
            )
        else:
            verdicts.append(fill("learning.verdict.incomplete", **fields))
    return verdicts


# --- Breakout ----------------------------------------------------------------------------------------------------


def _run_order(path: Path) -> tuple[str, int, str]:
    """Runs of a folder by seed number (seed2 before seed10)."""
    match = re.fullmatch(r"seed(\d+)\.json", path.name)
    return str(path.parent), int(match.group(1)) if match else -1, path.name


def breakout_records(results_dir: Path) -> list[dict[str, Any]]:
    """
    Every recorded Breakout run, by algorithm and seed: ``atari/breakout/<algo>/seed<k>.json``, then the variants of
    an entry (``breakout_variants/NAME/breakout/<algo>/seed<k>.json``), marked with their name.
    """
    paths = sorted((results_dir / "atari" / "breakout").glob("*/seed*.json"), key=_run_order)
    records = [json.loads(path.read_text()) for path in paths]
    for path in sorted((results_dir / "breakout_variants").glob("*/breakout/*/seed*.json"), key=_run_order):
        record = json.loads(path.read_text())
        variant = path.parents[2].name
        records.append({**record, "algo_label": f"{record['algo_label']} [{variant}]", "variant": variant})
    return records


def _breakout_color(record: dict[str, Any], variants: list[str]) -> str | None:
    if "variant" in record:
        return VARIANT_COLORS[variants.index(record["variant"]) % len(VARIANT_COLORS)]
    return COLORS.get(record["algo"])


def plot_breakout_curves(records: list[dict[str, Any]], path: Path) -> None:
    """Evaluation return and training reward against steps: one line per entry (and per variant), mean over seeds."""
    variants = sorted({record["variant"] for record in records if "variant" in record})
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    colors = {}
    for record in records:
        groups[record["algo_label"]].append(record)
        colors[record["algo_label"]] = _breakout_color(record, variants)
    fig, axes = _pyplot().subplots(1, 2, figsize=(11, 3.8))
    for ax, key, title in zip(
        axes, ("mean", "train_ep_rew_mean"), ("evaluation return", "training reward (last 100 episodes)")
    ):
        plot_mean_curves(ax, groups, key, colors)
        _finish_axes(ax, title, 7)
    fig.suptitle("BreakoutNoFrameskip-v4, every recorded run: mean over seeds, 95% bootstrap CI", fontsize=10)
    _save_figure(fig, path)


def _late_explained_variance(record: dict[str, Any], window: int = 100_000) -> float | None:
    """Mean ``train/explained_variance`` over the last ``window`` steps of the run (None if not recorded)."""
    explained = record.get("explained_variance")
    if not explained or not explained["timesteps"]:
        return None
    last = explained["timesteps"][-1]
    values = [v for t, v in zip(explained["timesteps"], explained["value"]) if t > last - window]
    return float(np.mean(values))


def differences_from_entry(record: dict[str, Any]) -> str:
    """
    What the run's hyperparameters change from the algorithm's YAML entry as it is now (``n_timesteps`` aside): a
    run recorded before an entry changed, or with ``--params``, says so.
    """
    entry, _ = load_hyperparams(record["algo"], record["env_id"])
    used = record.get("hyperparams") or {}
    changed = [
        f"{key}: {json.dumps(used.get(key))} (entry: {json.dumps(entry.get(key))})"
        for key in sorted(set(entry) | set(used))
        if key != "n_timesteps" and used.get(key) != entry.get(key)
    ]
    return "; ".join(changed) if changed else "none"


def _wall_time(record: dict[str, Any]) -> str:
    """The run's wall time in seconds; a resumed run records only its last part's, said as such."""
    wall = f"{record['wall_s_this_session']:.0f}"
    resumed_from = record.get("resumed_from")
    return f"{wall} (from step {resumed_from:,})" if resumed_from else wall


def breakout_row(record: dict[str, Any]) -> dict[str, Any]:
    curve = record["curve"]
    train = [value for value in curve.get("train_ep_rew_mean", []) if value is not None]
    return {
        "label": record["algo_label"],
        "seed": record["seed"],
        "steps": record["num_timesteps_done"],
        "final_mean": record["final"]["mean"],
        "final_std": record["final"]["std"],
        "best": max(curve["mean"]),
        "train_reward": Shown(train[-1] if train else None),
        "critic_ev": Shown(_late_explained_variance(record)),
        "wall_s": _wall_time(record),
        "hyperparams_source": record["hyperparams_source"],
        "differences": differences_from_entry(record),
        "command": record["command"],
    }


def _late_score(record: dict[str, Any]) -> float:
    """A run's mean over its last ``BREAKOUT_LATE_EVALUATIONS`` evaluations (the final one included)."""
    return float(np.mean(record["curve"]["mean"][-BREAKOUT_LATE_EVALUATIONS:]))


def _breakout_late_check(by_algo: dict[str, list[dict[str, Any]]]) -> str:
    """
    The verdict's comparison on a less noisy score, which does not replace it: each run's mean over its last
    evaluations instead of its final one (an evaluation is a few episodes).
    """
    estimates = interval_estimates({algo: np.array([_late_score(r) for r in runs]) for algo, runs in by_algo.items()})
    plus, reference = (estimates[algo]["iqm"] for algo in BREAKOUT_ALGOS)
    episodes = sorted({r["evaluation"]["episodes"] for runs in by_algo.values() for r in runs if "evaluation" in r})
    return fill(
        "breakout.comparison.late",
        episodes=" or ".join(map(str, episodes)) or "a few",
        n_evaluations=BREAKOUT_LATE_EVALUATIONS,
        plus=plus,
        reference=reference,
        ratio=plus.ratio_to(reference),
        overlap=OVERLAP[plus.overlaps(reference)],
    )


def breakout_comparison(records: list[dict[str, Any]], images_dir: Path, docs_dir: Path) -> str:
    """
    TRPOPlus's ``atari`` entry against PPO's over seeds: the runs of each entry as it is in this commit, at the full
    budget (variants and runs of an older entry are left out); IQM and mean with 95% bootstrap intervals, the
    learning curves with bands, and the verdict once both have ``BREAKOUT_MIN_SEEDS`` seeds.
    """
    by_algo = {
        algo: [
            r
            for r in records
            if r["algo"] == algo
            and "variant" not in r
            and r["n_timesteps"] == BREAKOUT_BUDGET
            and differences_from_entry(r) == "none"
        ]
        for algo in BREAKOUT_ALGOS
    }
    by_algo = {algo: sorted(runs, key=lambda r: r["seed"]) for algo, runs in by_algo.items() if runs}
    if not by_algo:
        return fill("breakout.comparison.none", budget=BREAKOUT_BUDGET)
    # The same seeds for both entries: once they share one, a run whose seed the other entry has not finished waits
    # for its pair (left out of the estimates, listed after the verdict)
    paired = set.intersection(*({r["seed"] for r in by_algo.get(algo, [])} for algo in BREAKOUT_ALGOS))
    unpaired: list[dict[str, Any]] = []
    if paired:
        unpaired = [r for runs in by_algo.values() for r in runs if r["seed"] not in paired]
        by_algo = {algo: [r for r in runs if r["seed"] in paired] for algo, runs in by_algo.items()}
    estimates = interval_estimates({algo: np.array([r["final"]["mean"] for r in runs]) for algo, runs in by_algo.items()})
    image = images_dir / "breakout_entries_curves.png"
    plot_curves("BreakoutNoFrameskip-v4", by_algo, image)
    rows = (
        {
            "label": ALGO_LABELS[algo],
            "n_seeds": len(runs),
            "per_seed": fill_each("learning.seed", ({"seed": r["seed"], "score": r["final"]["mean"]} for r in runs), ", "),
            **estimates[algo],
        }
        for algo, runs in by_algo.items()
    )
    plus, reference = BREAKOUT_ALGOS
    if all(len(by_algo.get(algo, [])) >= BREAKOUT_MIN_SEEDS for algo in BREAKOUT_ALGOS):
        plus_iqm, reference_iqm = estimates[plus]["iqm"], estimates[reference]["iqm"]
        verdict = fill(
            "breakout.comparison.verdict",
            verdict=VERDICT[bool(plus_iqm.point >= reference_iqm.point)],
            plus=plus_iqm.point,
            reference=reference_iqm.point,
            ratio=plus_iqm.ratio_to(reference_iqm),
            overlap=OVERLAP[plus_iqm.overlaps(reference_iqm)],
        )
        verdict = paragraphs(verdict, _breakout_late_check(by_algo))
    else:
        verdict = fill("breakout.comparison.not_yet", n_seeds=len(paired), min_seeds=BREAKOUT_MIN_SEEDS)
    waiting = fill_each(
        "breakout.comparison.waiting_run",
        ({"label": ALGO_LABELS[r["algo"]], "seed": r["seed"], "score": r["final"]["mean"]} for r in unpaired),
        ", ",
    )
    return fill(
        "breakout.comparison",
        budget=BREAKOUT_BUDGET,
        bootstrap_reps=BOOTSTRAP_REPS,
        bootstrap_seed=BOOTSTRAP_SEED,
        rows=fill_each("breakout.comparison.row", rows),
        verdict=paragraphs(verdict, fill("breakout.comparison.waiting", runs=waiting) if unpaired else ""),
        image=_image_link(image, docs_dir),
    )


def breakout_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> str:
    records = breakout_records(results_dir)
    if not records:
        throughput = _read(results_dir / "throughput.json") or {}
        measured = throughput.get("envs", {}).get("breakout", {}).get("algos", {})
        rates = [
            {"label": ALGO_LABELS[algo], "minutes": 1e6 / measured[algo]["steps_per_s"] / 60}
            for algo in ("trpo_plus", "ppo")
            if algo in measured
        ]
        estimate = fill("breakout.missing.estimate", rates=fill_each("breakout.missing.rate", rates, ", ")) if rates else ""
        return fill("breakout.missing", status=sentences(fill("breakout.missing.no_run"), estimate))
    image = images_dir / "breakout_curves.png"
    plot_breakout_curves(records, image)
    machines = (
        {"label": f"{r['algo_label']} seed {r['seed']}", "machine": machine_text(r.get("machine"), "when the run ended")}
        for r in records
    )
    parts = [
        breakout_comparison(records, images_dir, docs_dir),
        fill(
            "breakout",
            rows=fill_each("breakout.row", map(breakout_row, records)),
            machines=fill_each("breakout.machine", machines),
            image=_image_link(image, docs_dir),
        ),
    ]
    return paragraphs(*parts)


# --- Breakout tuning: every candidate on the tuning seeds ----------------------------------------------------------

#: Where the tuning runs are (``benchmarks.breakout --results-dir benchmarks/results/breakout_tuning/NAME``), the
#: step of the curve that the decision rules read, and the folder of the entry's own runs on the tuning seeds
TUNING_DIR = "breakout_tuning"
TUNING_STEPS = 500_000
TUNING_REFERENCE = "D"


def tuning_runs(results_dir: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """The Breakout tuning runs by candidate (the folder's name; PPO's runs on the tuning seeds too) and seed."""
    runs: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for path in sorted((results_dir / TUNING_DIR).glob("*/breakout/*/seed*.json"), key=_run_order):
        record = json.loads(path.read_text())
        runs[path.parents[2].name][record["seed"]] = record
    return dict(runs)


def train_reward_at(record: dict[str, Any], steps: int = TUNING_STEPS) -> float | None:
    """The training reward (last 100 episodes) at the curve's point ``steps``, None if the run has no such point."""
    curve = record["curve"]
    points = dict(zip(curve["timesteps"], curve.get("train_ep_rew_mean", [])))
    return points.get(steps)


def tuning_rules(results_dir: Path, name: str) -> list[Path]:
    """The decision rules of a candidate: those in its folder and those elsewhere that give its runs' command."""
    tuning = results_dir / TUNING_DIR
    own = sorted((tuning / name).glob("decision_rule*.md"))
    command = re.compile(rf"--results-dir benchmarks/results/{TUNING_DIR}/{re.escape(name)}\b")
    others = [
        path for path in sorted(tuning.glob("*/decision_rule*.md")) if path not in own and command.search(path.read_text())
    ]
    return own + others


def _params_of(record: dict[str, Any]) -> str:
    """The ``--params`` of a run, as its ``hyperparams_source`` records them; without any, the entry it ran."""
    source, _, params = record["hyperparams_source"].partition(" with ")
    return params or source


def breakout_tuning_section(results_dir: Path) -> str:
    """Every Breakout tuning candidate: training reward at ``TUNING_STEPS`` per tuning seed, against the entry's."""
    runs = tuning_runs(results_dir)
    if not runs:
        return ""
    seeds = sorted({seed for by_seed in runs.values() for seed in by_seed})
    reference = {seed: train_reward_at(record) for seed, record in runs.get(TUNING_REFERENCE, {}).items()}
    rows = []
    for name, by_seed in sorted(runs.items(), key=lambda item: (item[0] != TUNING_REFERENCE, item[0])):
        rewards = {seed: train_reward_at(record) for seed, record in by_seed.items()}
        scored = [seed for seed, reward in rewards.items() if reward is not None]
        mean = float(np.mean([rewards[seed] for seed in scored])) if scored else None
        ratio = None
        if name != TUNING_REFERENCE and scored and all(reference.get(seed) is not None for seed in scored):
            ratio = mean / float(np.mean([reference[seed] for seed in scored]))
        rules = [f"`{path.parent.name}/{path.name}`" for path in tuning_rules(results_dir, name)]
        rows.append(
            {
                "name": name,
                "params": _params_of(next(iter(by_seed.values()))),
                "per_seed": " | ".join(f"{Shown(rewards.get(seed)):.2f}" if seed in by_seed else "" for seed in seeds),
                "mean": Shown(mean),
                "ratio": Shown(ratio),
                "rules": ", ".join(rules) or "none",
            }
        )
    return fill(
        "breakout.tuning",
        steps=TUNING_STEPS,
        reference=TUNING_REFERENCE,
        seed_columns=" | ".join(f"seed {seed}" for seed in seeds),
        seed_rule=" | ".join("---:" for _ in seeds),
        rows=fill_each("breakout.tuning.row", rows),
    )


# --- MinAtar: the games, normalized --------------------------------------------------------------------------------

_MINATAR_ID = re.compile(r"MinAtar/(\w+)-v1")


def minatar_games(env_ids: Iterable[str]) -> list[str]:
    """``MINATAR_GAMES`` and every other MinAtar game among ``env_ids``, sorted."""
    found = {match.group(1) for env_id in env_ids if (match := _MINATAR_ID.fullmatch(env_id))}
    return sorted({*MINATAR_GAMES, *found})


def _number_word(number: int) -> str:
    return NUMBER_WORDS[number] if number < len(NUMBER_WORDS) else str(number)


def minatar_section(
    results_dir: Path,
    images_dir: Path,
    docs_dir: Path,
    seeds: list[int] = MINATAR_SEEDS,
    plus_dir: Path | None = None,
    intro_block: str = "minatar",
) -> str:
    """
    Per game and aggregated over the games (those with every seed of both algorithms): TRPOPlus against PPO,
    normalized by random = 0 and PPO = 1.

    :param plus_dir: where TRPOPlus's runs are read from (``results_dir`` when ``None``; PPO's always come from
        ``results_dir``), e.g. the folder that keeps a previous entry's runs
    :param intro_block: the template block that opens the section
    """
    runs = load_learning(results_dir)
    if plus_dir is not None:
        plus_runs = load_learning(plus_dir)
        for env_id, by_algo in runs.items():
            by_algo[MINATAR_ALGOS[0]] = plus_runs.get(env_id, {}).get(MINATAR_ALGOS[0], [])
    random_scores = (_read(results_dir / "minatar_random.json") or {}).get("games", {})
    games = minatar_games([*random_scores, *runs])
    plus_algo, reference = MINATAR_ALGOS
    rows = []
    normalized: dict[str, list[list[float]]] = {algo: [] for algo in MINATAR_ALGOS}
    complete, below_games = [], []
    for game in games:
        env_id = f"MinAtar/{game}-v1"
        by_algo = {
            algo: {r["seed"]: r["final"]["mean"] for r in runs.get(env_id, {}).get(algo, []) if r["seed"] in seeds}
            for algo in MINATAR_ALGOS
        }
        counts = " / ".join(str(len(by_algo[algo])) for algo in MINATAR_ALGOS)
        random_score = random_scores.get(env_id, {}).get("mean")
        if not all(by_algo.values()) or random_score is None:
            shown = {
                algo: interval_estimates({algo: np.array(list(values.values()))})[algo]["iqm"] if values else None
                for algo, values in by_algo.items()
            }
            rows.append(
                fill(
                    "minatar.row.not_run",
                    game=game,
                    random=Shown(random_score),
                    counts=counts,
                    **{algo: NOT_RUN if value is None else f"{value:.1f}" for algo, value in shown.items()},
                )
            )
            continue
        scores = {algo: np.array(list(values.values())) for algo, values in by_algo.items()}
        estimates = interval_estimates(scores)
        scale = float(np.mean(scores[reference])) - random_score
        below = estimates[plus_algo]["iqm"].point < estimates[reference]["iqm"].low
        if below:
            below_games.append(game)
        rows.append(
            fill(
                "minatar.row",
                game=game,
                random=random_score,
                **{algo: estimates[algo]["iqm"] for algo in MINATAR_ALGOS},
                normalized=float(np.mean((scores[plus_algo] - random_score) / scale)),
                below=BELOW[bool(below)],
                counts=counts,
            )
        )
        if all(len(values) == len(seeds) for values in by_algo.values()):
            complete.append(game)
            for algo in MINATAR_ALGOS:
                normalized[algo].append([float(by_algo[algo][seed] - random_score) / scale for seed in seeds])
    count = _number_word(len(games))
    intro = fill(
        intro_block,
        count=count,
        seeds=", ".join(map(str, seeds)),
        seed_args=" ".join(map(str, seeds)),
        env_ids=" ".join(f"MinAtar/{game}-v1" for game in games),
        bootstrap_reps=BOOTSTRAP_REPS,
        bootstrap_seed=BOOTSTRAP_SEED,
        rows="\n".join(rows),
    )
    if len(complete) < 2:
        return paragraphs(intro, fill("minatar.aggregate.not_yet", complete=len(complete)))
    estimates = interval_estimates({algo: np.array(values).T for algo, values in normalized.items()})  # (seeds, games)
    if len(complete) == len(games):
        games_text = fill("minatar.aggregate.all", count=count)
    else:
        games_text = fill("minatar.aggregate.some", complete=len(complete), total=len(games), names=", ".join(complete))
    rows_aggregate = ({"label": ALGO_LABELS[algo], **estimates[algo]} for algo in MINATAR_ALGOS)
    profile = images_dir / f"{intro_block.replace('.', '_')}_profile.png"
    title = f"MinAtar: performance profile (all runs of {games_text}, seeds {', '.join(map(str, seeds))})"
    plot_performance_profile({algo: np.array(values).T for algo, values in normalized.items()}, profile, title, "PPO's mean")
    aggregate = fill(
        "minatar.aggregate",
        games=games_text,
        rows=fill_each("minatar.aggregate.row", rows_aggregate),
        image=_image_link(profile, docs_dir),
    )
    if len(complete) < len(games):
        return paragraphs(intro, aggregate)
    plus_iqm = estimates[plus_algo]["iqm"].point
    goal = fill(
        "minatar.goal",
        goal=MINATAR_GOAL_IQM,
        verdict=VERDICT[bool(plus_iqm >= MINATAR_GOAL_IQM) and not below_games],
        plus=plus_iqm,
        reference=estimates[reference]["iqm"].point,
        aggregate=VERDICT[bool(plus_iqm >= MINATAR_GOAL_IQM)],
        below=", ".join(below_games) or "none",
    )
    return paragraphs(intro, aggregate, goal)


def minatar_sections(results_dir: Path, images_dir: Path, docs_dir: Path, seeds: list[int] = MINATAR_SEEDS) -> list[str]:
    """Section 5 on ``seeds``, and 5.1 (the entry before, when its runs are kept) on the seeds it was run on."""
    sections = [minatar_section(results_dir, images_dir, docs_dir, seeds)]
    if (results_dir / MINATAR_PREVIOUS_ENTRY / "learning").is_dir():
        previous = results_dir / MINATAR_PREVIOUS_ENTRY
        sections.append(
            minatar_section(results_dir, images_dir, docs_dir, MINATAR_PREVIOUS_ENTRY_SEEDS, previous, "minatar.previous")
        )
    return sections


# --- Atari-5: the atari entry on five games it was not tuned on ------------------------------------------------------


def atari_runs(results_dir: Path, game: str) -> dict[str, dict[int, dict[str, Any]]]:
    """``{algo: {seed: record}}`` of ``benchmarks.atari``'s finished 1M-step runs on ``game``."""
    runs: dict[str, dict[int, dict[str, Any]]] = {algo: {} for algo in ATARI_ALGOS}
    for path in (results_dir / "atari" / game.lower()).glob("*/seed*.json"):
        record = json.loads(path.read_text())
        if record["algo"] in runs and record["n_timesteps"] == ATARI_BUDGET:
            runs[record["algo"]][record["seed"]] = record
    return runs


def human_normalized(game: str, score: float) -> float:
    """``(score - random) / (human - random)`` with the DQN table's scores (1 = human)."""
    _, random_score, human = ATARI5[game]
    return (score - random_score) / (human - random_score)


def atari5_median_estimate(human_normalized_scores: dict[str, float]) -> float:
    """
    The Atari-5 estimate of the 57-game median human-normalized score (as a fraction, 1 = human) from the five games':
    ``10 ** sum(w * log10(1 + max(0, 100 * h))) - 1`` in percent, the regression of Aitchison et al.
    """
    log_score = sum(ATARI5[game][0] * math.log10(1 + max(0.0, 100 * h)) for game, h in human_normalized_scores.items())
    return (10**log_score - 1) / 100


def _place(plus: Interval, reference: Interval) -> int:
    """1 when TRPOPlus's IQM is above the reference's interval, -1 below it, 0 inside."""
    return 1 if plus.point > reference.high else -1 if plus.point < reference.low else 0


def late_diagnostic(record: dict[str, Any], key: str, window: int = ATARI_DIAGNOSTICS_WINDOW) -> float | None:
    """The mean of ``key`` over the updates of the run's last ``window`` steps (None when the record has no value)."""
    diagnostics = record.get("diagnostics") or {}
    if key not in diagnostics:
        return None
    last = record["n_timesteps"] - window
    pairs = [
        (value, updates)
        for end, value, updates in zip(diagnostics["bin_end"], diagnostics[key], diagnostics["n_updates"])
        if end > last and value is not None and updates
    ]
    if not pairs:
        return None
    values, weights = zip(*pairs)
    return float(np.average(values, weights=weights))


def capped_share(record: dict[str, Any]) -> float:
    """The share of the run's final-evaluation games that ALE's frame cap ended (their lengths are in frames)."""
    lengths = record["curve"]["lengths"][-1]
    return float(np.mean([length >= ATARI_FRAME_CAP - ATARI_CAP_MARGIN for length in lengths]))


def atari_diagnostics_rows(runs: dict[str, dict[str, dict[int, dict[str, Any]]]]) -> str:
    """
    A row per game and algorithm with finished runs: each ``ATARI_DIAGNOSTICS`` column, and the share of the final
    evaluation's games cut at ALE's frame cap, averaged over its seeds.
    """
    columns = sorted({column for sources in ATARI_DIAGNOSTICS.values() for column in sources})
    rows = []
    for game, by_algo in runs.items():
        for algo, records in by_algo.items():
            if not records:
                continue
            values = {column: None for column in columns}
            for column, (key, sign) in ATARI_DIAGNOSTICS[algo].items():
                per_run = [late_diagnostic(record, key) for record in records.values()]
                per_run = [value for value in per_run if value is not None]
                values[column] = sign * float(np.mean(per_run)) if per_run else None
            rows.append(
                fill(
                    "atari5.diagnostics.row",
                    game=game,
                    label=ALGO_LABELS[algo],
                    seeds=len(records),
                    capped=float(np.mean([capped_share(record) for record in records.values()])),
                    **{column: Shown(value) for column, value in values.items()},
                )
            )
    return "\n".join(rows)


def plot_atari_curves(runs: dict[str, dict[str, dict[int, dict[str, Any]]]], path: Path) -> None:
    """A panel per game: one line per algorithm, the mean evaluation return over seeds with its 95% bootstrap band."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(11, 6.2))
    for ax, (game, by_algo) in zip(axes.flat, runs.items()):
        plot_mean_curves(ax, {algo: list(records.values()) for algo, records in by_algo.items()})
        _finish_axes(ax, game, 7, ylabel="return")
        if not ax.lines:
            ax.text(0.5, 0.5, "no finished run yet", ha="center", va="center", transform=ax.transAxes, fontsize=8)
    for ax in list(axes.flat)[len(runs) :]:
        ax.axis("off")
    fig.suptitle("Atari-5, 1M steps: evaluation return (mean over seeds, 95% bootstrap CI)", fontsize=10)
    _save_figure(fig, path)


def plot_performance_profile(normalized: dict[str, np.ndarray], path: Path, title: str, reference: str) -> None:
    """
    rliable's performance profile of the normalized scores: the fraction of runs above each score, with 95% bands.

    :param reference: what normalized score 1 is (``"PPO's IQM"``)
    """
    from rliable import library as rly
    from rliable import plot_utils

    # up to the 95th percentile of all runs (at least 2): one far-out run would squeeze the rest into the left edge
    high = float(np.percentile(np.concatenate([values.ravel() for values in normalized.values()]), 95))
    taus = np.linspace(0.0, max(2.0, float(np.ceil(high))), 81)
    global_state = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)
    try:
        profiles, bands = rly.create_performance_profile(normalized, taus, reps=2000)
    finally:
        np.random.set_state(global_state)
    fig, ax = _pyplot().subplots(figsize=(6.4, 4.0))
    labels = {algo: ALGO_LABELS[algo] for algo in normalized}
    plot_utils.plot_performance_profiles(
        {labels[a]: v for a, v in profiles.items()},
        taus,
        performance_profile_cis={labels[a]: v for a, v in bands.items()},
        colors={labels[a]: COLORS[a] for a in normalized},
        xlabel=f"normalized score τ (random = 0, {reference} = 1)",
        ylabel="fraction of runs with score > τ",
        ax=ax,
    )
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    _save_figure(fig, path)


def atari5_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> str:
    """Per game and aggregated over the Atari-5 games: the ``atari`` entries of TRPOPlus and PPO, 1M steps."""
    random_scores = (_read(results_dir / "atari" / "random.json") or {}).get("games", {})
    runs = {game: atari_runs(results_dir, game) for game in ATARI5}
    plus_algo, reference = ATARI_ALGOS
    rows, places, paired_counts, iqms = [], {}, {}, {}
    for game, by_algo in runs.items():
        paired = sorted(set.intersection(*(set(by_algo[algo]) for algo in ATARI_ALGOS)))
        paired_counts[game] = len(paired)
        counts = " / ".join(str(len(by_algo[algo])) for algo in ATARI_ALGOS)
        estimates = {
            algo: interval_estimates({algo: np.array([by_algo[algo][s]["final"]["mean"] for s in sorted(by_algo[algo])])})[
                algo
            ]
            for algo in ATARI_ALGOS
            if by_algo[algo]
        }
        late = {
            algo: float(metrics_iqm([by_algo[algo][s]["late"]["mean"] for s in by_algo[algo]]))
            for algo in ATARI_ALGOS
            if by_algo[algo]
        }
        iqms[game] = {algo: estimates[algo]["iqm"].point for algo in estimates}
        place = None
        if len(paired) >= ATARI_MIN_SEEDS:
            paired_estimates = interval_estimates(
                {algo: np.array([by_algo[algo][s]["final"]["mean"] for s in paired]) for algo in ATARI_ALGOS}
            )
            place = places[game] = _place(paired_estimates[plus_algo]["iqm"], paired_estimates[reference]["iqm"])
        rows.append(
            fill(
                "atari5.row",
                game=game,
                random=Shown(random_scores.get(game, {}).get("mean")),
                **{algo: f"{estimates[algo]['iqm']:.0f}" if algo in estimates else NOT_RUN for algo in ATARI_ALGOS},
                **{f"{algo}_late": Shown(late.get(algo)) for algo in ATARI_ALGOS},
                place=PLACE[place] if place is not None else f"not yet ({len(paired)} of {ATARI_MIN_SEEDS} seeds)",
                counts=counts,
            )
        )
    image = images_dir / "atari5_curves.png"
    plot_atari_curves(runs, image)
    parts = [
        fill(
            "atari5",
            rows="\n".join(rows),
            min_seeds=ATARI_MIN_SEEDS,
            bootstrap_reps=BOOTSTRAP_REPS,
            bootstrap_seed=BOOTSTRAP_SEED,
            image=_image_link(image, docs_dir),
        )
    ]
    human_rows = [
        fill(
            "atari5.human.row",
            label=ALGO_LABELS[algo],
            **{game: Shown(100 * human_normalized(game, iqms[game][algo]) if algo in iqms[game] else None) for game in ATARI5},
            estimate=Shown(
                100 * atari5_median_estimate({g: human_normalized(g, iqms[g][algo]) for g in ATARI5})
                if all(algo in iqms[g] for g in ATARI5)
                else None
            ),
        )
        for algo in ATARI_ALGOS
    ]
    parts.append(fill("atari5.human", rows="\n".join(human_rows)))
    parts.append(fill("atari5.diagnostics", window=ATARI_DIAGNOSTICS_WINDOW // 1000, rows=atari_diagnostics_rows(runs)))
    n_seeds = min(paired_counts.values())
    if n_seeds < ATARI_MIN_SEEDS or any(game not in random_scores for game in ATARI5):
        waiting = ", ".join(f"{game} {count} of {ATARI_MIN_SEEDS}" for game, count in paired_counts.items())
        parts.append(fill("atari5.aggregate.not_yet", min_seeds=ATARI_MIN_SEEDS, waiting=waiting))
        return paragraphs(*parts)
    # (seeds, games) matrices on the first n_seeds paired seeds of every game, normalized by random = 0, PPO's IQM = 1
    normalized: dict[str, np.ndarray] = {}
    for algo in ATARI_ALGOS:
        columns = []
        for game, by_algo in runs.items():
            seeds = sorted(set.intersection(*(set(by_algo[a]) for a in ATARI_ALGOS)))[:n_seeds]
            random_score = random_scores[game]["mean"]
            scale = iqms[game][reference] - random_score
            columns.append([(by_algo[algo][s]["final"]["mean"] - random_score) / scale for s in seeds])
        normalized[algo] = np.array(columns).T
    estimates = interval_estimates(normalized)
    from rliable import metrics

    points, intervals = seeded_interval_estimates(
        {"pair": (normalized[plus_algo], normalized[reference])}, metrics.probability_of_improvement
    )
    low, high = np.ravel(intervals["pair"])
    improvement = Interval(float(np.ravel(points["pair"])[0]), float(low), float(high))
    profile = images_dir / "atari5_profile.png"
    plot_performance_profile(normalized, profile, "Atari-5: performance profile (all runs of the five games)", "PPO's IQM")
    plus_iqm = estimates[plus_algo]["iqm"]
    behind = [game for game, place in places.items() if place < 0]
    parts.append(
        fill(
            "atari5.aggregate",
            n_seeds=n_seeds,
            rows=fill_each("minatar.aggregate.row", ({"label": ALGO_LABELS[a], **estimates[a]} for a in ATARI_ALGOS)),
            improvement=improvement,
            image=_image_link(profile, docs_dir),
            goal=ATARI_GOAL_IQM,
            aim=ATARI_AIM_IQM,
            plus=plus_iqm.point,
            goal_verdict=VERDICT[bool(plus_iqm.point >= ATARI_GOAL_IQM)],
            aim_verdict=VERDICT[bool(plus_iqm.point >= ATARI_AIM_IQM) and not behind],
            ahead=", ".join(g for g, p in places.items() if p > 0) or "none",
            level=", ".join(g for g, p in places.items() if p == 0) or "none",
            behind=", ".join(behind) or "none",
        )
    )
    return paragraphs(*parts)


def metrics_iqm(values: list[float]) -> float:
    """rliable's interquartile mean of ``values``."""
    from rliable import metrics

    return float(metrics.aggregate_iqm(np.asarray(values, dtype=float).reshape(-1, 1)))


# --- the page ----------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    parser.add_argument("--out", default=str(REPO_ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--images-dir", default=None, help="where the PNGs go (default: images/ next to --out)")
    parser.add_argument(
        "--minatar-seeds",
        type=int,
        nargs="+",
        default=MINATAR_SEEDS,
        help=f"seeds of the MinAtar comparison (section 5; default: {' '.join(map(str, MINATAR_SEEDS))})",
    )
    args = parser.parse_args(argv)

    results_dir, out = Path(args.results_dir), Path(args.out)
    docs_dir = out.parent
    images_dir = Path(args.images_dir) if args.images_dir else docs_dir / "images"
    machine = machine_info()
    sections = [
        fvp_section(results_dir),
        throughput_section(results_dir),
        learning_section(results_dir, images_dir, docs_dir),
        breakout_section(results_dir, images_dir, docs_dir),
        breakout_tuning_section(results_dir),
        *minatar_sections(results_dir, images_dir, docs_dir, args.minatar_seeds),
        atari5_section(results_dir, images_dir, docs_dir),
    ]
    page = fill(
        "page",
        **{"rl_zoo3": "n/a", "sb3_trpo_plus": "n/a", **machine},
        cores=machine.get("cpu_affinity") or machine["cpu_count"],
        sections=paragraphs(*sections),
    )
    text = page.rstrip() + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"written to {out}")
    return text


if __name__ == "__main__":
    main()
