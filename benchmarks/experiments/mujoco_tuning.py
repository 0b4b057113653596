"""
The decision of ``benchmarks/results/mujoco/tuning_rule.md`` (issue 55, rules 5 and 6), from the scores of rules 1-4
as the report computes them (``report_mujoco.tuning_scores``: a run's score is the mean of its last three
evaluations: at 950k and 1M steps and the one after training, at 1,001,472), printed for ``tuning/decision.md``,
with the verdicts that the evaluations at the steps the rule names (900k, 950k and 1M) give beside them:

- a feature (T1: the entropy bonus and its decay; T2: the adaptive trust region) passes at an aggregate >= 1.05 with
  ``n`` >= 1.0 on each tuning task; T2 only if its callback acted (``train/target_kl`` below its first value in some
  diagnostics bin of some run), else it is T0;
- T0b (Hopper's trust region on HalfCheetah) passes at ``n`` >= 0.95.

::

    python -m benchmarks.experiments.mujoco_tuning
"""

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS_DIR
from benchmarks.report_learning import load_learning
from benchmarks.report_mujoco import tuning_scores

TUNING_DIR = RESULTS_DIR / "mujoco" / "tuning"
RANDOM = RESULTS_DIR / "mujoco" / "random.json"
MIN_AGGREGATE, MIN_TASK, MIN_SHARED = 1.05, 1.0, 0.95
NAMED_STEPS = (900_000, 950_000, 1_000_000)
VERDICTS = ("T1 passes", "T2 acted", "T2 passes", "T0b passes")


def named_steps_mean(record: dict[str, Any]) -> float:
    """The mean of the run's evaluations at 900k, 950k and 1M steps (the steps that rule 1 names)."""
    curve = record["curve"]
    return float(np.mean([curve["mean"][curve["timesteps"].index(steps)] for steps in NAMED_STEPS]))


def acted(tuning_dir: Path, candidate: str = "T2") -> bool:
    """Whether the candidate's callback moved ``train/target_kl`` below its first value in any run's diagnostics."""
    for by_algo in load_learning(tuning_dir / candidate).values():
        for record in by_algo.get("trpo_plus", []):
            values = [v for v in record["diagnostics"]["train/target_kl"] if v is not None]
            if values and min(values) < values[0]:
                return True
    return False


def decide(tuning_dir: Path = TUNING_DIR, random_path: Path = RANDOM, **run_score: Any) -> dict[str, Any]:
    """The candidates' scores (rules 1-4) and the verdicts of rules 5 and 6 (None until every run is in)."""
    scores = tuning_scores(tuning_dir, json.loads(random_path.read_text())["games"], **run_score)

    def passes(candidate: str) -> bool | None:
        result = scores.get(candidate)
        if result is None or result["aggregate"] is None:
            return None
        return result["aggregate"] >= MIN_AGGREGATE and all(n >= MIN_TASK for n in result["n"].values())

    t0b = scores.get("T0b", {}).get("n", {}).get("HalfCheetah-v5")
    t2, t2_acted = passes("T2"), acted(tuning_dir)
    return {
        "scores": scores,
        "T1 passes": passes("T1"),
        "T2 acted": t2_acted,
        "T2 passes": None if t2 is None else t2 and t2_acted,
        "T0b passes": None if t0b is None else t0b >= MIN_SHARED,
    }


def table(result: dict[str, Any]) -> str:
    def shown(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    lines = [
        "| candidate | task | scores (seed: mean of the last 3 evaluations) | n | aggregate |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for candidate, scores in result["scores"].items():
        ran = [task for task, by_seed in scores["scores"].items() if by_seed]
        for i, task in enumerate(ran):
            by_seed = ", ".join(f"{seed}: {score:.0f}" for seed, score in sorted(scores["scores"][task].items()))
            aggregate = shown(scores["aggregate"]) if i == 0 else ""
            lines.append(f"| {candidate} | {task} | {by_seed} | {shown(scores['n'][task])} | {aggregate} |")
    lines.append("")
    lines.append("; ".join(f"{key}: {result[key]}" for key in VERDICTS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tuning-dir", default=str(TUNING_DIR))
    parser.add_argument("--random", default=str(RANDOM))
    args = parser.parse_args(argv)
    text = table(decide(Path(args.tuning_dir), Path(args.random)))
    named = decide(Path(args.tuning_dir), Path(args.random), run_score=named_steps_mean)
    text += "\nat 900k, 950k and 1M steps: " + "; ".join(f"{key}: {named[key]}" for key in VERDICTS)
    print(text)
    return text


if __name__ == "__main__":
    main()
