"""
Tuning of the MinAtar entry of ``hyperparams/trpo_plus.yml`` (one set of values for the five games), on seeds that
are never reported (100 and 101) and half the reported budget (1M steps). The rule below was committed before any
of these runs started; the reported seeds (1-3, 2M steps) are run again only with the values it picks.

The configurations: the entry as it is (``entry``) and each variant, the entry with the overrides of ``ROUNDS``
(``python -m benchmarks.learning --params``). Every ``(configuration, seed, game)`` is one run, its result in
``benchmarks/results/minatar_tuning/<configuration>/learning/trpo_plus/<game>/seed<k>.json``; the entry's runs are
shared by the rounds. Each round's variants were committed before its runs started: round 1's (``target_kl_0.02``,
``ent_coef_0.02``) with the rule; round 2's (the critic training the shared features: overrides of the same entry,
judged by the same rule against it) while round 1's seed-101 runs were still going, its seed-100 scores known;
round 3's (the critic's part of the trust region added to the entry's, not taken from it) while round 2's last
seed-101 runs were still going (see ``ROUNDS``).

The rule (``decide``):

1. Score of a run: its final evaluation (``final.mean``, as in the report). Normalized per game as in the report:
   ``(score - random) / (PPO - random)``, with ``random`` from ``minatar_random.json`` and ``PPO`` the mean of the
   reported PPO runs (seeds 1-3, 2M steps): PPO is not tuned, it only sets each game's scale.
2. Aggregate of a configuration: the mean over the five games of the mean over the two seeds.
3. In each round, the variant with the highest aggregate replaces the entry if (a) its aggregate is at least the
   entry's + 0.05, (b) its mean SpaceInvaders score is above the entry's (the game where the entry is below PPO),
   and (c) on no game is its normalized mean more than 0.25 below the entry's. Otherwise the entry stays as it is.
4. Nothing is decided before every run of every configuration of the round has finished.
5. (Added with round 3, before any round was decided.) Every round is judged against the same entry; where more
   than one round picks a variant, the one with the highest aggregate replaces the entry.
6. (Added on 2026-11-25 at 08:05 UTC, after round 2 was decided and before rounds 1 and 3 finished.) Rounds 1 and 3
   were stopped when round 2 picked a variant, so that the two cores went to the reported seeds of the new entry
   (``STOPPED``): rule 5 applies to the rounds that were not stopped. Had they finished, a round-3 variant with a
   higher aggregate could have replaced round 2's; no run of round 1 or 3 was looked at to stop them other than those
   listed by ``--all`` (round 3: one run finished, Asterix seed 100).

Usage::

    # the runs of a round, two at a time (resumable: a finished run is skipped); logs under each results folder's tmp/
    python -m benchmarks.experiments.minatar_tuning --round 2 --commands | xargs -P 2 -I{} sh -c {}
    # the round's table and decision
    python -m benchmarks.experiments.minatar_tuning --round 2
    # every round's, and the decision over the rounds
    python -m benchmarks.experiments.minatar_tuning --all
"""

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import REPO_ROOT, RESULTS_DIR

TUNING_DIR = RESULTS_DIR / "minatar_tuning"
GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
SEEDS = (100, 101)
N_TIMESTEPS = 1_000_000
#: The seeds the report shows: PPO's runs on them set each game's scale, TRPOPlus's are never read here
REFERENCE_SEEDS = (1, 2, 3)
#: The configurations of each round: the entry, then the variants (overrides of the entry, ``key:value``)
ROUNDS: dict[int, dict[str, list[str]]] = {
    1: {
        "entry": [],
        # larger steps: the entry learns SpaceInvaders more slowly than PPO throughout
        "target_kl_0.02": ["target_kl:0.02"],
        # less entropy bonus early (same decay and floor): the entry's entropy is still 0.55 on SpaceInvaders at 2M
        "ent_coef_0.02": ["ent_coef:0.02"],
    },
    2: {
        "entry": [],
        # the critic trains the shared CNN too (as PPO's value loss does), within half the trust region; the policy's
        # step gets the other half
        "critic_kl_0.5": ["critic_kl_fraction:0.5"],
        # the same, with the policy's step as large as the entry's (0.01 of KL each for the critic and the step)
        "critic_kl_0.5_target_kl_0.02": ["critic_kl_fraction:0.5", "target_kl:0.02"],
    },
    3: {
        "entry": [],
        # the critic's part of round 2's critic_kl_0.5 (0.005 of KL) on top of the entry's own policy step (0.01):
        # registered with round 2's seed-100 scores and its seed-101 scores on Asterix, Breakout and Freeway known,
        # where critic_kl_0.5 was ahead on SpaceInvaders and Seaquest and behind on Breakout (a smaller policy step
        # than the entry's), and critic_kl_0.5_target_kl_0.02 (a policy step of 0.01, the critic's 0.01) behind on
        # Asterix
        "critic_kl_0.33_target_kl_0.015": ["critic_kl_fraction:0.33", "target_kl:0.015"],
    },
}
#: Rounds stopped before they finished (rule 6): round -> why
STOPPED: dict[int, str] = {
    1: "stopped with 6 runs missing once round 2 had picked a variant (rule 6)",
    3: "stopped with 9 runs missing once round 2 had picked a variant (rule 6)",
}
#: Round 1's configurations (the first round)
VARIANTS = ROUNDS[1]
MIN_GAIN = 0.05
MAX_GAME_DROP = 0.25
DECIDING_GAME = "SpaceInvaders"


def env_id(game: str) -> str:
    return f"MinAtar/{game}-v1"


def commands(python: str = sys.executable, round_: int = 1) -> list[str]:
    """One ``benchmarks.learning`` command per run of the round (run from the repository's root), seed first, so
    that an interrupted sweep has every configuration on the first seed before any on the second."""
    lines = []
    for seed in SEEDS:
        for name, params in ROUNDS[round_].items():
            for game in GAMES:
                argv = [python, "-m", "benchmarks.learning", "--algos", "trpo_plus", "--envs", env_id(game)]
                argv += ["--seeds", str(seed), "--n-timesteps", str(N_TIMESTEPS), "--threads", "1"]
                argv += ["--checkpoint-freq", "250000", "--results-dir", str(TUNING_DIR.relative_to(REPO_ROOT) / name)]
                if params:
                    argv += ["--params", *params]
                lines.append("OMP_NUM_THREADS=1 " + shlex.join(argv))
    return lines


def _final(path: Path) -> float | None:
    if not path.exists():
        return None
    return float(json.loads(path.read_text())["final"]["mean"])


def _result(results_dir: Path, algo: str, game: str, seed: int) -> Path:
    return results_dir / "learning" / algo / f"MinAtar-{game}-v1" / f"seed{seed}.json"


def scales(results_dir: Path = RESULTS_DIR) -> dict[str, tuple[float, float]]:
    """Per game: (random score, PPO's mean over the reported seeds)."""
    random_scores = json.loads((results_dir / "minatar_random.json").read_text())["games"]
    out = {}
    for game in GAMES:
        ppo = [_final(_result(results_dir, "ppo", game, seed)) for seed in REFERENCE_SEEDS]
        if None in ppo:
            raise SystemExit(f"PPO's reference runs on {game} (seeds {REFERENCE_SEEDS}) are missing")
        out[game] = (float(random_scores[env_id(game)]["mean"]), float(np.mean(ppo)))
    return out


def decide(
    scores: dict[str, dict[str, list[float]]], game_scales: dict[str, tuple[float, float]]
) -> tuple[str, dict[str, Any]]:
    """
    The configuration the rule picks. ``scores[configuration][game]``: the final scores of its seeds; every
    configuration has every game. Returns the name and, per configuration, the normalized means and aggregate.
    """
    summary: dict[str, Any] = {}
    for name, by_game in scores.items():
        normalized = {
            game: float(np.mean([(s - low) / (high - low) for s in by_game[game]]))
            for game, (low, high) in game_scales.items()
        }
        summary[name] = {"normalized": normalized, "aggregate": float(np.mean(list(normalized.values())))}
    entry = summary["entry"]
    variants = [name for name in scores if name != "entry"]
    if not variants:
        return "entry", summary
    best = max(variants, key=lambda name: summary[name]["aggregate"])
    candidate = summary[best]
    checks = {
        "gain": candidate["aggregate"] >= entry["aggregate"] + MIN_GAIN,
        "deciding_game": np.mean(scores[best][DECIDING_GAME]) > np.mean(scores["entry"][DECIDING_GAME]),
        "no_game_drop": all(
            candidate["normalized"][game] >= entry["normalized"][game] - MAX_GAME_DROP for game in game_scales
        ),
    }
    summary[best]["checks"] = {key: bool(value) for key, value in checks.items()}
    return (best if all(checks.values()) else "entry"), summary


def collect(tuning_dir: Path = TUNING_DIR, round_: int = 1) -> tuple[dict[str, dict[str, list[float]]], list[str]]:
    """The finished scores of every configuration of the round, and the runs still missing."""
    scores: dict[str, dict[str, list[float]]] = {}
    missing = []
    for name in ROUNDS[round_]:
        scores[name] = {}
        for game in GAMES:
            found = [_final(_result(tuning_dir / name, "trpo_plus", game, seed)) for seed in SEEDS]
            scores[name][game] = [score for score in found if score is not None]
            missing += [f"{name} {game} seed {seed}" for seed, score in zip(SEEDS, found) if score is None]
    return scores, missing


def combine(decisions: dict[int, tuple[str, dict[str, Any]]]) -> str:
    """
    Rule 5: of the variants the rounds picked, the one with the highest aggregate (``"entry"`` if no round picked
    one). ``decisions[round]``: that round's ``decide`` result; every round must be decided.
    """
    picked = {choice: summary[choice]["aggregate"] for choice, summary in decisions.values() if choice != "entry"}
    return max(picked, key=lambda name: picked[name]) if picked else "entry"


def round_text(
    round_: int, scores: dict[str, dict[str, list[float]]], missing: list[str]
) -> tuple[str, tuple[str, dict[str, Any]] | None]:
    """A round's table of scores and decision, as text, and its ``decide`` result (``None`` while runs are missing)."""
    lines = ["| configuration | " + " | ".join(GAMES) + " |", "| --- |" + " ---: |" * len(GAMES)]
    for name, by_game in scores.items():
        cells = [", ".join(f"{score:.1f}" for score in by_game[game]) or "-" for game in GAMES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if missing:
        lines.append(f"\nRound {round_} not decided: {len(missing)} run(s) missing ({'; '.join(missing)})")
        return "\n".join(lines), None
    decision = choice, summary = decide(scores, scales())
    lines.append("\nNormalized (random = 0, PPO seeds 1-3 at 2M = 1), mean of the seeds:")
    for name, values in summary.items():
        per_game = ", ".join(f"{game} {value:.2f}" for game, value in values["normalized"].items())
        checks = f"; checks {values['checks']}" if "checks" in values else ""
        lines.append(f"- {name}: aggregate {values['aggregate']:.3f} ({per_game}){checks}")
    lines.append(f"\nRound {round_} decision: {choice}")
    return "\n".join(lines), decision


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--round", type=int, default=1, choices=sorted(ROUNDS), help="the round (default: 1)")
    parser.add_argument("--commands", action="store_true", help="print the runs' commands, one per line")
    parser.add_argument("--all", action="store_true", help="every round, and the decision over them (rule 5)")
    args = parser.parse_args(argv)
    if args.commands:
        text = "\n".join(commands(round_=args.round))
        print(text)
        return text
    rounds = sorted(ROUNDS) if args.all else [args.round]
    texts, decisions = [], {}
    for round_ in rounds:
        text, decision = round_text(round_, *collect(round_=round_))
        texts.append(text)
        if decision is not None and round_ not in STOPPED:
            decisions[round_] = decision
    if args.all:
        texts += [f"Round {round_} {why}" for round_, why in STOPPED.items()]
        undecided = [str(round_) for round_ in rounds if round_ not in decisions and round_ not in STOPPED]
        if undecided:
            texts.append(f"Not decided over the rounds (rule 5): round(s) {', '.join(undecided)} still have runs missing")
        else:
            texts.append(f"Decision over the rounds (rule 5): {combine(decisions)}")
    text = "\n\n".join(texts)
    print(text)
    return text


if __name__ == "__main__":
    main()
