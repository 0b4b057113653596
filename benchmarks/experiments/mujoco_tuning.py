"""
The decision of ``benchmarks/results/mujoco/tuning_rule.md`` (issue 55, rules 5 and 6), from the scores of rules 1-4
as the report computes them (``report_mujoco.tuning_scores``: a run's score is the mean of its evaluations at 900k,
950k and 1M steps), printed for ``tuning/decision.md``, with the verdicts that a run's last three evaluations (950k,
1M and the one after training, at 1,001,472 steps) would give beside them, as a check:

- a feature (T1: the entropy bonus and its decay; T2: the adaptive trust region) passes at an aggregate >= 1.05 with
  ``n`` >= 1.0 on each tuning task; T2 only if its callback acted (``train/target_kl`` below its first value in some
  diagnostics bin of some run), else it is T0;
- T0b (Hopper's trust region on HalfCheetah) passes at ``n`` >= 0.95.

::

    python -m benchmarks.experiments.mujoco_tuning
"""

import argparse
import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS_DIR
from benchmarks.report_learning import load_learning
from benchmarks.report_mujoco import tuning_scores
from sb3_trpo_plus import TRPOPlus

TUNING_DIR = RESULTS_DIR / "mujoco" / "tuning"
RANDOM = RESULTS_DIR / "mujoco" / "random.json"
MIN_AGGREGATE, MIN_TASK, MIN_SHARED = 1.05, 1.0, 0.95
VERDICTS = ("T1 passes", "T2 acted", "T2 passes", "T0b passes")


def last_three_mean(record: dict[str, Any]) -> float:
    """The mean of the run's last three evaluations (the check beside rule 1)."""
    return float(np.mean(record["curve"]["mean"][-3:]))


def acted(tuning_dir: Path, candidate: str = "T2") -> bool:
    """
    Whether the candidate's callback moved ``train/target_kl`` below the run's initial value (its entry's, else
    TRPOPlus's default) in any diagnostics bin of any run. A record without diagnostics is an error: nothing can be
    said of its callback.
    """
    default = inspect.signature(TRPOPlus).parameters["target_kl"].default
    for by_algo in load_learning(tuning_dir / candidate).values():
        for record in by_algo.get("trpo_plus", []):
            if "train/target_kl" not in (record.get("diagnostics") or {}):
                raise ValueError(f"{candidate} {record['env_id']} seed {record['seed']}: no train/target_kl diagnostics")
            initial = float(record.get("hyperparams", {}).get("target_kl", default))
            if any(v is not None and v < initial for v in record["diagnostics"]["train/target_kl"]):
                return True
    return False


def decide(tuning_dir: Path = TUNING_DIR, random_path: Path = RANDOM, **run_score: Any) -> dict[str, Any]:
    """The candidates' scores (rules 1-4) and the verdicts of rules 5 and 6 (None until every run is in)."""
    scores = tuning_scores(tuning_dir, json.loads(random_path.read_text())["games"], **run_score)

    def passes(candidate: str) -> bool | None:
        result = scores.get(candidate)
        if result is None or None in result["n"].values():
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
        "| candidate | task | scores (seed: mean of its evaluations at 900k, 950k and 1M steps) | n | aggregate |",
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
    check = decide(Path(args.tuning_dir), Path(args.random), run_score=last_three_mean)
    text += "\nwith the last three evaluations instead: " + "; ".join(f"{key}: {check[key]}" for key in VERDICTS)
    text += "\n" + "; ".join(f"{c} {check['scores'][c]['aggregate']:.3f}" for c in check["scores"])
    print(text)
    return text


if __name__ == "__main__":
    main()
