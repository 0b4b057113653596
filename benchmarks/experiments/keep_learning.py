"""
The screen of ``benchmarks/results/keep_learning/screen_rule.md`` (issue 54): each candidate's 1M-step Breakout run
against the ``atari`` entry's on the same tuning seed, on the rule's three tests, printed as a table.

1. score kept: the candidate's mean over its last 3 evaluations (the final one included) >= the entry's;
2. still rising: its mean of the 800k, 900k and final evaluations > its mean of the 400k, 500k and 600k ones;
3. no collapse over the last 200k steps: line-search acceptance (``train/is_line_search_success`` over the updates
   that ran a line search: an update closed by a ``target_kl`` schedule ran none and is left out) >= 0.9, and mean
   policy entropy (``train/entropy``) >= 0.35 nats.

Records: ``benchmarks/results/keep_learning/<NAME>/atari/breakout/trpo_plus/seed<S>.json`` (``benchmarks.atari
--results-dir benchmarks/results/keep_learning/<NAME>``)::

    python -m benchmarks.experiments.keep_learning --candidates K1 --seeds 100

``--v2`` adds the verdict of ``screen_rule_v2.md`` for each candidate over the seeds given: the mean of its runs' final
evaluations at least ``PPO_LOW`` (the low end of PPO's Breakout interval), still rising on the mean, no collapse in any
run; the entry's mean beside it::

    python -m benchmarks.experiments.keep_learning --candidates K3 --seeds 100 101 102 --v2

``--minatar`` reads the runs of ``minatar_rule.md`` instead: the MinAtar entry and PPO at 5M steps on a tuning seed
(``keep_learning/minatar/learning/ALGO/MinAtar-GAME-v1/seed<S>.json``), per game whether TRPOPlus's run flattens (its
mean at 4.5M-5M not above its evaluation at 2M, or not above its mean at 2.5M-3M) or collapses (over its last 500k
steps, line-search acceptance under 0.9 or mean entropy under 0.25x PPO's), then per game the diagnostics per bin::

    python -m benchmarks.experiments.keep_learning --minatar --seeds 100

``--minatar-candidate NAME`` reads a candidate's runs under its rule, ``minatar_k4_rule.md`` to ``minatar_k8_rule.md``
(``keep_learning/minatar_<name>/learning/trpo_plus/...``, on the ``--games`` given) against the entry's and PPO's of
``minatar/`` on the same game and seed: keeps learning (its mean at 4.5M-5M above its evaluation at 2M and its mean at
2.5M-3M), score (that mean at least the entry's), no collapse (over its last 500k steps, acceptance >= 0.9 without the
schedule's closing update, entropy >= 0.25x PPO's); per run, then per game on the mean over the seeds. ``--k4`` is K4
on Breakout::

    python -m benchmarks.experiments.keep_learning --minatar-candidate K5 --seeds 100
    python -m benchmarks.experiments.keep_learning --k4 --seeds 100

``--normalized-bar`` adds stage 2's fourth test of ``minatar_k6_rule.md``: over the games, the mean of the candidate's
normalized score (random = 0 from ``minatar_random.json``, PPO's mean at 4.5M-5M over the seeds = 1) at least the bar::

    python -m benchmarks.experiments.keep_learning --minatar-candidate K6 --games Breakout Seaquest SpaceInvaders \\
        --seeds 100 101 --normalized-bar 1.2
"""

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS_DIR
from benchmarks.report_atari import ATARI_DIAGNOSTICS, late_acceptance, late_diagnostic

SCREEN_DIR = RESULTS_DIR / "keep_learning"
REFERENCE = "entry"
LATE_STEPS = (800_000, 900_000)
MIDDLE_STEPS = (400_000, 500_000, 600_000)
WINDOW = 200_000
MIN_ACCEPTANCE = 0.9
MIN_ENTROPY = 0.35


def load(name: str, seed: int, screen_dir: Path = SCREEN_DIR) -> dict[str, Any] | None:
    path = screen_dir / name / "atari" / "breakout" / "trpo_plus" / f"seed{seed}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def evaluation_at(record: dict[str, Any], steps: int) -> float:
    curve = record["curve"]
    return float(curve["mean"][curve["timesteps"].index(steps)])


def mean_at(record: dict[str, Any], steps: tuple[int, ...]) -> float:
    """The mean of the record's evaluations at ``steps``."""
    return float(np.mean([evaluation_at(record, s) for s in steps]))


def late_acceptance_entropy(record: dict[str, Any], window: int) -> tuple[float, float]:
    """Line-search acceptance (``late_acceptance``: an update closed by a ``target_kl`` schedule is left out) and mean
    entropy over the updates of the run's last ``window`` steps."""
    acceptance, entropy = late_acceptance(record, window), late_diagnostic(record, "train/entropy", window)
    if acceptance is None or entropy is None:
        raise ValueError(f"{record.get('env_id')} seed {record.get('seed')}: no diagnostics over its last {window} steps")
    return acceptance, entropy


def screen(record: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """The three tests of the rule for one candidate run against the entry's run on the same seed."""
    late, reference_late = record["late"]["mean"], reference["late"]["mean"]
    rising_end = float(np.mean([*(evaluation_at(record, s) for s in LATE_STEPS), record["final"]["mean"]]))
    rising_start = float(np.mean([evaluation_at(record, s) for s in MIDDLE_STEPS]))
    acceptance, mean_entropy = late_acceptance_entropy(record, WINDOW)
    return {
        "late": late,
        "reference_late": reference_late,
        "score_kept": late >= reference_late,
        "rising_start": rising_start,
        "rising_end": rising_end,
        "rising": rising_end > rising_start,
        "acceptance": acceptance,
        "entropy": mean_entropy,
        "no_collapse": acceptance >= MIN_ACCEPTANCE and mean_entropy >= MIN_ENTROPY,
    }


def table(candidates: list[str], seeds: list[int], screen_dir: Path = SCREEN_DIR) -> str:
    mark = {True: "pass", False: "fail"}
    lines = [
        "| run | seed | last 3 evaluations (entry) | 400-600k -> 800k-final | accepted, last 200k | entropy, last 200k | "
        "score kept | rising | no collapse |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for seed in seeds:
        reference = load(REFERENCE, seed, screen_dir)
        for name in [REFERENCE, *candidates]:
            record = load(name, seed, screen_dir)
            if record is None or reference is None:
                lines.append(f"| {name} | {seed} | not finished | | | | | | |")
                continue
            r = screen(record, reference)
            lines.append(
                f"| {name} | {seed} | {r['late']:.1f} ({r['reference_late']:.1f}) | {r['rising_start']:.1f} -> "
                f"{r['rising_end']:.1f} | {r['acceptance']:.2f} | {r['entropy']:.2f} | "
                + ("reference" if name == REFERENCE else mark[r["score_kept"]])
                + " | "
                + " | ".join(mark[r[k]] for k in ("rising", "no_collapse"))
                + " |"
            )
    return "\n".join(lines)


#: screen v2's test 1: the low end of the 95% interval of PPO's IQM on Breakout (seeds 0-4, 1M steps; docs/benchmarks.md)
PPO_LOW = 14.3


def screen_v2(name: str, seeds: list[int], screen_dir: Path = SCREEN_DIR) -> str:
    """The three tests of ``screen_rule_v2.md`` on a candidate's runs over ``seeds`` (all of them finished)."""
    records = [load(name, seed, screen_dir) for seed in seeds]
    entry = [load(REFERENCE, seed, screen_dir) for seed in seeds]
    if None in records:
        return f"{name}: not every seed of {seeds} has finished"
    final = float(np.mean([r["final"]["mean"] for r in records]))
    tests = [screen(r, reference or r) for r, reference in zip(records, entry)]
    start, end = np.mean([t["rising_start"] for t in tests]), np.mean([t["rising_end"] for t in tests])
    verdicts = {
        "not behind PPO": final >= PPO_LOW,
        "still rising": end > start,
        "no collapse": all(t["no_collapse"] for t in tests),
    }
    entry_final = "n/a" if None in entry else f"{np.mean([r['final']['mean'] for r in entry]):.1f}"
    return (
        f"{name}, seeds {', '.join(map(str, seeds))}: mean final evaluation {final:.1f} (PPO's low end {PPO_LOW}; the "
        f"entry's {entry_final}); rising {start:.1f} -> {end:.1f}; "
        + "; ".join(f"{test}: {'pass' if ok else 'fail'}" for test, ok in verdicts.items())
        + f"; {'passes' if all(verdicts.values()) else 'fails'} v2"
    )


MINATAR_DIR = SCREEN_DIR / "minatar"
MINATAR_GAMES = ("SpaceInvaders", "Breakout", "Asterix", "Freeway", "Seaquest")
MINATAR_AT_2M = 2_000_000
MINATAR_MIDDLE_STEPS = (2_500_000, 2_750_000, 3_000_000)
MINATAR_LATE_STEPS = (4_500_000, 4_750_000, 5_000_000)
MINATAR_WINDOW = 500_000
MIN_ENTROPY_SHARE = 0.25


def minatar_late(record: dict[str, Any], column: str) -> float | None:
    """The algorithm's ``column`` of ``ATARI_DIAGNOSTICS`` (entropy, accepted, ...) over the last 500k steps."""
    key, sign = ATARI_DIAGNOSTICS[record["algo"]][column]
    value = late_diagnostic(record, key, MINATAR_WINDOW)
    return None if value is None else sign * value


def minatar_record(minatar_dir: Path, algo: str, game: str, seed: int) -> dict[str, Any] | None:
    path = minatar_dir / "learning" / algo / f"MinAtar-{game}-v1" / f"seed{seed}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def minatar_table(seed: int, minatar_dir: Path = MINATAR_DIR) -> str:
    """Per game, TRPOPlus's 5M run on ``seed`` read by the two tests of ``minatar_rule.md``, beside PPO's."""
    mark = {True: "yes", False: "no", None: "n/a"}

    def shown(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    lines = [
        "| game | TRPOPlus at 2M | at 2.5-3M | at 4.5-5M | flattens | accepted, last 500k | entropy, last 500k "
        "(PPO's) | collapses | PPO at 4.5-5M |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    for game in MINATAR_GAMES:
        record, ppo = (minatar_record(minatar_dir, algo, game, seed) for algo in ("trpo_plus", "ppo"))
        if record is None:
            lines.append(f"| {game} | not finished | | | | | | | |")
            continue
        at_2m, middle = evaluation_at(record, MINATAR_AT_2M), mean_at(record, MINATAR_MIDDLE_STEPS)
        late = mean_at(record, MINATAR_LATE_STEPS)
        accepted, entropy = minatar_late(record, "accepted"), minatar_late(record, "entropy")
        ppo_entropy = minatar_late(ppo, "entropy") if ppo else None
        collapses = None
        if accepted is not None and accepted < MIN_ACCEPTANCE:
            collapses = True
        elif accepted is not None and entropy is not None and ppo_entropy is not None:
            collapses = entropy < MIN_ENTROPY_SHARE * ppo_entropy
        ppo_late = f"{mean_at(ppo, MINATAR_LATE_STEPS):.1f}" if ppo else "not finished"
        lines.append(
            f"| {game} | {at_2m:.1f} | {middle:.1f} | {late:.1f} | {mark[late <= at_2m or late <= middle]} | "
            f"{shown(accepted)} | {shown(entropy)} ({shown(ppo_entropy)}) | {mark[collapses]} | {ppo_late} |"
        )
    return "\n".join(lines)


def minatar_screen(
    name: str,
    games: list[str],
    seeds: list[int],
    candidate_dir: Path,
    minatar_dir: Path = MINATAR_DIR,
    normalized_bar: float | None = None,
    random_scores: dict[str, float] | None = None,
) -> str:
    """The three tests of ``minatar_k4_rule.md`` to ``minatar_k8_rule.md``: a candidate's 5M runs against the entry's
    and PPO's on the same game and seed, per run, then per game (once every seed has all three runs) on the mean over
    the seeds, and the verdict once every game has one. With ``normalized_bar`` (stage 2 of ``minatar_k6_rule.md`` to
    ``minatar_k8_rule.md``), a fourth test over the games: the mean of the candidate's normalized scores, (its mean at
    4.5-5M over the seeds - random) / (PPO's - random), at least the bar; ``random_scores`` by env id,
    ``minatar_random.json``'s if not given."""

    mark = {True: "pass", False: "fail"}
    lines = [
        f"| game | seed | {name} at 2M | at 2.5-3M | at 4.5-5M (the entry's; PPO's) | accepted, last 500k "
        "| entropy, last 500k (0.25x PPO's) | keeps learning | score | no collapse |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    verdicts: list[str] = []
    passed: list[bool] = []
    normalized_inputs: list[tuple[str, float, float]] = []  # per game with a verdict: its means at 4.5-5M, PPO's
    for game in games:
        rows = []
        for seed in seeds:
            candidate, entry, ppo = (
                minatar_record(root, algo, game, seed)
                for root, algo in ((candidate_dir, "trpo_plus"), (minatar_dir, "trpo_plus"), (minatar_dir, "ppo"))
            )
            if candidate is None or entry is None or ppo is None:
                lines.append(f"| {game} | {seed} | not finished ({name}, the entry and PPO are needed) | | | | | | | |")
                continue
            at_2m, middle, late = (
                evaluation_at(candidate, MINATAR_AT_2M),
                mean_at(candidate, MINATAR_MIDDLE_STEPS),
                mean_at(candidate, MINATAR_LATE_STEPS),
            )
            entry_late, ppo_late = mean_at(entry, MINATAR_LATE_STEPS), mean_at(ppo, MINATAR_LATE_STEPS)
            acceptance, entropy = late_acceptance_entropy(candidate, MINATAR_WINDOW)
            ppo_entropy = minatar_late(ppo, "entropy")
            entropy_floor = MIN_ENTROPY_SHARE * (np.nan if ppo_entropy is None else ppo_entropy)  # none: no pass
            no_collapse = bool(acceptance >= MIN_ACCEPTANCE and entropy >= entropy_floor)
            scores = {"at_2m": at_2m, "middle": middle, "late": late, "entry_late": entry_late, "ppo_late": ppo_late}
            rows.append({**scores, "no_collapse": no_collapse})
            lines.append(
                f"| {game} | {seed} | {at_2m:.1f} | {middle:.1f} | {late:.1f} ({entry_late:.1f}; {ppo_late:.1f}) | "
                f"{acceptance:.2f} | {entropy:.2f} ({entropy_floor:.2f}) | {mark[late > at_2m and late > middle]} | "
                f"{mark[late >= entry_late]} | {mark[no_collapse]} |"
            )
        if len(rows) < len(seeds):
            continue
        mean = {key: float(np.mean([row[key] for row in rows])) for key in rows[0] if key != "no_collapse"}
        tests = {
            "keeps learning": mean["late"] > mean["at_2m"] and mean["late"] > mean["middle"],
            "score": mean["late"] >= mean["entry_late"],
            "no collapse": all(row["no_collapse"] for row in rows),
        }
        passed.append(all(tests.values()))
        normalized_inputs.append((game, mean["late"], mean["ppo_late"]))
        verdicts.append(
            f"{name} on {game}, seeds {', '.join(map(str, seeds))}: at 2M {mean['at_2m']:.1f}, at 2.5-3M "
            f"{mean['middle']:.1f}, at 4.5-5M {mean['late']:.1f} (the entry's {mean['entry_late']:.1f}, PPO's "
            f"{mean['ppo_late']:.1f}); "
            + "; ".join(f"{test}: {mark[ok]}" for test, ok in tests.items())
            + f"; {'passes' if passed[-1] else 'fails'}"
        )
    if len(passed) == len(games) and normalized_bar is not None:
        if random_scores is None:
            random_file = json.loads((RESULTS_DIR / "minatar_random.json").read_text())
            random_scores = {env_id: run["mean"] for env_id, run in random_file["games"].items()}
        normalized = []
        for game, late, ppo_late in normalized_inputs:
            random_score = random_scores[f"MinAtar/{game}-v1"]
            if not ppo_late > random_score:
                raise ValueError(f"MinAtar/{game}-v1: PPO's mean at 4.5-5M ({ppo_late}) is not above random's")
            normalized.append((late - random_score) / (ppo_late - random_score))
        passed.append(float(np.mean(normalized)) >= normalized_bar)
        verdicts.append(
            f"{name}, normalized (random = 0, PPO = 1): "
            + ", ".join(f"{game} {value:.2f}" for (game, _, _), value in zip(normalized_inputs, normalized))
            + f"; mean {np.mean(normalized):.2f} (at least {normalized_bar}: {mark[passed[-1]]})"
        )
    if len(passed) == len(games) + (normalized_bar is not None):
        verdicts.append(f"{name}: {'passes' if all(passed) else 'fails'} on {', '.join(games)}")
    return "\n".join(lines + ([""] if verdicts else []) + verdicts)


#: The per-bin table's columns: each algorithm's ``ATARI_DIAGNOSTICS``, and TRPOPlus's trust region as it moves
MINATAR_BIN_COLUMNS = {
    **ATARI_DIAGNOSTICS,
    "trpo_plus": ATARI_DIAGNOSTICS["trpo_plus"] | {"target_kl": ("train/target_kl", 1)},
}


def minatar_bins(game: str, seed: int, minatar_dir: Path = MINATAR_DIR) -> str:
    """Item 3 of ``minatar_rule.md``: per diagnostics bin, each algorithm's evaluation at the bin's end and its values."""
    header, columns, runs = ["steps"], [], {}
    for algo, sources in MINATAR_BIN_COLUMNS.items():
        path = minatar_dir / "learning" / algo / f"MinAtar-{game}-v1" / f"seed{seed}.json"
        if not path.is_file():
            continue
        runs[algo] = json.loads(path.read_text())
        header += [f"{algo} evaluation", *(f"{algo} {label}" for label in sources)]
        columns += [(algo, None, 1), *((algo, key, sign) for key, sign in sources.values())]
    if not runs:
        return f"{game}: no finished run"
    ends = next(iter(runs.values()))["diagnostics"]["bin_end"]
    lines = [f"{game}, seed {seed}", "| " + " | ".join(header) + " |", "|" + " ---: |" * len(header)]
    for i, end in enumerate(ends):
        cells = [f"{end:,}"]
        for algo, key, sign in columns:
            record = runs[algo]
            if key is None:
                curve = record["curve"]
                cells.append(f"{curve['mean'][curve['timesteps'].index(end)]:.1f}" if end in curve["timesteps"] else "")
                continue
            values = record["diagnostics"].get(key)
            value = values[i] if values and i < len(values) else None
            cells.append("" if value is None else f"{sign * value:.3g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", nargs="+", default=["K1"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    parser.add_argument("--screen-dir", default=str(SCREEN_DIR))
    parser.add_argument("--minatar", action="store_true", help="read the MinAtar runs of minatar_rule.md")
    parser.add_argument("--v2", action="store_true", help="add the verdict of screen_rule_v2.md per candidate")
    parser.add_argument("--k4", action="store_true", help="read K4's MinAtar Breakout runs (minatar_k4_rule.md)")
    parser.add_argument("--minatar-candidate", help="read this candidate's MinAtar runs (K5 to K8: minatar_k5_rule.md ...)")
    parser.add_argument("--games", nargs="+", default=["Breakout", "SpaceInvaders"], help="with --minatar-candidate")
    parser.add_argument(
        "--normalized-bar",
        type=float,
        help="with --minatar-candidate: the fourth test (minatar_k6_rule.md, stage 2), the mean normalized score's bar",
    )
    args = parser.parse_args(argv)
    if args.normalized_bar is not None and not args.minatar_candidate:
        parser.error("--normalized-bar is a test of --minatar-candidate's screen: give the candidate")
    screen_dir = Path(args.screen_dir)
    if args.k4 or args.minatar_candidate:
        name, games = ("K4", ["Breakout"]) if args.k4 else (args.minatar_candidate, args.games)
        candidate_dir = screen_dir / f"minatar_{name.lower()}"
        text = minatar_screen(name, games, args.seeds, candidate_dir, screen_dir / "minatar", args.normalized_bar)
    elif args.minatar:
        minatar_dir = Path(args.screen_dir) / "minatar"
        parts = [minatar_table(seed, minatar_dir) for seed in args.seeds]
        parts += [minatar_bins(game, seed, minatar_dir) for seed in args.seeds for game in MINATAR_GAMES]
        text = "\n\n".join(parts)
    else:
        text = table(args.candidates, args.seeds, Path(args.screen_dir))
        if args.v2:
            text += "\n\n" + "\n".join(screen_v2(name, args.seeds, Path(args.screen_dir)) for name in args.candidates)
    print(text)
    return text


if __name__ == "__main__":
    main()
