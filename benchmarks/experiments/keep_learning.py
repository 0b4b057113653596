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
"""

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS_DIR

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


def late_window(record: dict[str, Any], key: str) -> tuple[float, int]:
    """The sum of ``key`` over the updates of the last ``WINDOW`` steps (bin means times their updates), and the count."""
    diagnostics = record["diagnostics"]
    start = record["n_timesteps"] - WINDOW
    total, count = 0.0, 0
    for end, value, updates in zip(diagnostics["bin_end"], diagnostics[key], diagnostics["n_updates"]):
        if end > start and updates and value is not None and np.isfinite(value):
            total, count = total + value * updates, count + updates
    return total, count


def screen(record: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """The three tests of the rule for one candidate run against the entry's run on the same seed."""
    late, reference_late = record["late"]["mean"], reference["late"]["mean"]
    rising_end = float(np.mean([*(evaluation_at(record, s) for s in LATE_STEPS), record["final"]["mean"]]))
    rising_start = float(np.mean([evaluation_at(record, s) for s in MIDDLE_STEPS]))
    accepted, searches = late_window(record, "train/is_line_search_success")
    if (record.get("last_update") or {}).get("failure_reason") == "closed_trust_region":
        searches -= 1  # the schedule's last update, logged as not accepted, ran no line search
    entropy, updates = late_window(record, "train/entropy")
    acceptance, mean_entropy = accepted / searches, entropy / updates
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


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", nargs="+", default=["K1"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    parser.add_argument("--screen-dir", default=str(SCREEN_DIR))
    args = parser.parse_args(argv)
    text = table(args.candidates, args.seeds, Path(args.screen_dir))
    print(text)
    return text


if __name__ == "__main__":
    main()
