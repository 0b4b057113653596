"""
Section 5 of the report (``benchmarks.report``): the MinAtar games, TRPOPlus against PPO normalized by random = 0
(``minatar_random.json``, from ``benchmarks.minatar_random``) and PPO = 1, per game and aggregated over the games, with
the goal of issue 12; and 5.1, the entry before the last tuning on the seeds it was run on, when its runs are kept.
"""

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from benchmarks._common import ALGO_LABELS
from benchmarks.report_common import NOT_RUN, VERDICT, Shown, fill, fill_each, image_link, paragraphs, read_json
from benchmarks.report_learning import load_learning
from benchmarks.report_stats import BOOTSTRAP_REPS, BOOTSTRAP_SEED, interval_estimates, plot_performance_profile

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
#: The MinAtar comparison: TRPOPlus against the second, which normalizes the scores (random = 0, it = 1)
MINATAR_ALGOS = ("trpo_plus", "ppo")
#: Words of the computed sentences: a game below PPO's interval, and a count of games
BELOW = {True: "**yes**", False: "no"}
NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


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
    random_scores = (read_json(results_dir / "minatar_random.json") or {}).get("games", {})
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
        image=image_link(profile, docs_dir),
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
