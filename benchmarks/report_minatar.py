"""
Section 5 of the report (``benchmarks.report``): the MinAtar games, TRPOPlus against PPO normalized by random = 0
(``minatar_random.json``, from ``benchmarks.minatar_random``) and PPO = 1, per game and aggregated over the games, with
the goal of issue 12; 5.1, the entry before the last tuning on the seeds it was run on, when its runs are kept; and
5.2, both entries at 5M steps (``minatar_5m/``, read as ``benchmarks/results/minatar_5m/rule.md`` says).
"""

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from benchmarks._common import ALGO_LABELS
from benchmarks.report_atari import (
    ATARI_DIAGNOSTICS,
    ATARI_MIN_ACCEPTANCE,
    Entry,
    collapse_reasons,
    late_acceptance,
    late_diagnostic,
    plot_entropy_panels,
)
from benchmarks.report_common import (
    NOT_RUN,
    VERDICT,
    Interval,
    Shown,
    fill,
    fill_each,
    image_link,
    paragraphs,
    read_json,
    sentences,
)
from benchmarks.report_learning import load_learning
from benchmarks.report_stats import (
    BOOTSTRAP_REPS,
    BOOTSTRAP_SEED,
    COLORS,
    interval_estimates,
    metrics_iqm,
    plot_performance_profile,
)

#: The MinAtar games (more are taken from the results); seeds of the comparison: seed 0 chose the values of the entry
#: before 2026-11-25 (docs/research.md), so it is left out for both entries (``--minatar-seeds`` to change)
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
#: Section 5.2, the entries at 5M steps (``benchmarks/results/minatar_5m/rule.md``): where its runs are kept, their
#: seeds and budget; the evaluation it compares the end with (2M, section 5's budget), the last three evaluations and
#: the three before the last 1M; the steps at the end its diagnostics average over; the aggregate's goal; and the
#: no-collapse test's share of PPO's entropy (the line-search acceptance's is ``ATARI_MIN_ACCEPTANCE``, as on Atari-5)
MINATAR_5M = "minatar_5m"
MINATAR_5M_SEEDS = [1, 2, 3]
MINATAR_5M_BUDGET = 5_000_000
MINATAR_5M_AT = 2_000_000
MINATAR_5M_LAST = (4_500_000, 4_750_000, 5_000_000)
MINATAR_5M_BEFORE = (3_500_000, 3_750_000, 4_000_000)
MINATAR_5M_WINDOW = 500_000
MINATAR_5M_GOAL_IQM = 1.2
MINATAR_5M_ENTROPY_SHARE = 0.25
#: 5.2's entries: the folder of their records, how the table and figures name and draw them, and the values its rule
#: freezes (a record with others is refused). The candidates come last so that adding one moves no figure of the
#: others (one bootstrap over the entries in order)
MINATAR_5M_ENTRIES = {
    "trpo_plus": (MINATAR_5M, Entry("trpo_plus", ALGO_LABELS["trpo_plus"], COLORS["trpo_plus"]), {}),
    "ppo": (MINATAR_5M, Entry("ppo", ALGO_LABELS["ppo"], COLORS["ppo"]), {}),
    "k5": (
        "minatar_5m_k5",
        Entry("trpo_plus", "TRPOPlus K5", "tab:purple"),
        {"target_kl": "lin_0.04", "learning_rate": "lin_5e-4", "callback": []},
    ),
    "k8": (
        "minatar_5m_k8",
        Entry("trpo_plus", "TRPOPlus K8", "tab:brown"),
        {
            "target_kl": "lin_0.04",
            "learning_rate": "lin_5e-4",
            "callback": [],
            "entropy_floor": 0.3,
            "critic_kl_fraction": 0.25,
            "cg_damping": 0.2,
        },
    ),
}


class Candidate(NamedTuple):
    """A candidate entry of 5.2, sealed: none of its figures is read until all its runs exist. Its name, its rule's
    file, and whether that rule's alive gate applies (``benchmarks.experiments.dead_network``'s record of each run,
    ``alive/MinAtar-GAME-v1/seedS.json`` beside its records, and a final evaluation above the random policy's)."""

    name: str
    rule: str
    alive: bool


MINATAR_5M_CANDIDATES = {
    "k5": Candidate("K5", "benchmarks/results/minatar_5m_k5/rule.md", alive=False),
    "k8": Candidate("K8", "benchmarks/results/minatar_5m_k8/rule.md", alive=True),
}
#: The alive gate: a run is dead when at least this share of its policy head's first hidden layer is saturated
MINATAR_5M_MAX_SATURATED = 0.5
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


# --- 5.2: both entries at 5M steps ----------------------------------------------------------------------------------


def evaluation_at(record: dict[str, Any], step: int) -> float | None:
    """
    The mean return of the run's periodic evaluation at ``step``: the first one from ``step`` on, within one
    evaluation interval (``None`` when the run has none there). The final evaluation, a few steps past the budget's
    periodic one, is the run's score, not one of these.
    """
    curve, freq = record["curve"], record["evaluation"]["freq"]
    return next((mean for t, mean in zip(curve["timesteps"], curve["mean"]) if step <= t < step + freq), None)


def mean_evaluation(record: dict[str, Any], steps: Iterable[int]) -> float | None:
    """The mean of the run's evaluations at ``steps`` (``None`` when one is missing)."""
    values = [evaluation_at(record, step) for step in steps]
    return None if None in values else float(np.mean(values))


def run_5m_facts(record: dict[str, Any], algo: str) -> dict[str, Any]:
    """What 5.2 reads of one run: its evaluation at 2M, the means of its last three and of the three before the last
    1M, and its entropy (PPO's with the sign turned) and line-search acceptance over the last steps (``None``: not
    in the record; ``late_acceptance``: the update a ``target_kl`` schedule closes at radius 0 is left out)."""
    key, sign = ATARI_DIAGNOSTICS[algo]["entropy"]
    entropy = late_diagnostic(record, key, MINATAR_5M_WINDOW)
    return {
        "final": record["final"]["mean"],
        "at_2m": evaluation_at(record, MINATAR_5M_AT),
        "last": mean_evaluation(record, MINATAR_5M_LAST),
        "before": mean_evaluation(record, MINATAR_5M_BEFORE),
        "entropy": None if entropy is None else sign * entropy,
        "accepted": late_acceptance(record, MINATAR_5M_WINDOW),
    }


def _measured(values: Iterable[float | None]) -> list[float]:
    return [value for value in values if value is not None]


def _count(facts: list[dict[str, Any]], test: Callable[[dict[str, Any]], bool | None]) -> str:
    """``k of n`` over the runs the test can be read on (``None``: a value it needs is not in the record)."""
    results = _measured(test(fact) for fact in facts)
    return f"{sum(results)} of {len(results)}" + (f" ({len(facts) - len(results)} n/a)" if len(results) < len(facts) else "")


def _keeps(fact: dict[str, Any]) -> bool | None:
    """The rule's test 2: the mean of the last three evaluations at least the run's evaluation at 2M."""
    return None if fact["at_2m"] is None or fact["last"] is None else fact["last"] >= fact["at_2m"]


def _rises(fact: dict[str, Any]) -> bool | None:
    return None if fact["before"] is None or fact["last"] is None else fact["last"] > fact["before"]


def policy_saturation(network: dict[str, Any] | None, game: str) -> float | None:
    """The share of units of the policy head's first hidden layer saturated in every state, from ``dead_network``'s
    record of a run's final model on ``game``; None without a record of that game."""
    try:
        return float(network["saturated"]["policy"][0]) if network["env_id"] == f"MinAtar/{game}-v1" else None
    except (TypeError, KeyError, IndexError, ValueError):
        return None


def dead_reasons(saturated: float | None, final: float, random_score: float | None) -> list[str]:
    """Why a run fails a candidate's alive gate (none when it passes): no ``dead_network`` record of its final model
    (``saturated`` None), its policy head's first hidden layer saturated in ``MINATAR_5M_MAX_SATURATED`` of its units
    or more, or its final evaluation not above the random policy's mean (or that mean unknown)."""
    dead = []
    if saturated is None:
        dead.append("no dead_network record")
    elif not saturated < MINATAR_5M_MAX_SATURATED:
        dead.append(f"policy's first layer {saturated:.0%} saturated")
    if random_score is None or not final > random_score:
        dead.append(f"final {final:.1f} not above random {Shown(random_score):.1f}")
    return dead


def _alive_records(results_dir: Path, key: str, game: str, seeds: Iterable[int]) -> dict[str, float | None]:
    """Per run ("game seed") of an alive-gated candidate, ``policy_saturation`` of its ``dead_network`` record (None
    without one); nothing for another entry."""
    if key not in MINATAR_5M_CANDIDATES or not MINATAR_5M_CANDIDATES[key].alive:
        return {}
    alive_dir = results_dir / MINATAR_5M_ENTRIES[key][0] / "alive" / f"MinAtar-{game}-v1"
    return {f"{game} {seed}": policy_saturation(read_json(alive_dir / f"seed{seed}.json"), game) for seed in seeds}


def _failures(
    fact: dict[str, Any], entropy_floor: float, saturation: dict[str, float | None], run: str, random_score: float | None
) -> list[str]:
    """Why a TRPOPlus run of 5.2 collapsed: the no-collapse test, and for an alive-gated candidate's run (one with an
    entry in ``saturation``) its rule's alive gate."""
    why = collapse_reasons(fact["accepted"], fact["entropy"], entropy_floor)
    return why + dead_reasons(saturation[run], fact["final"], random_score) if run in saturation else why


def _candidate_verdict(
    candidate: Candidate,
    iqm: Interval,
    entry_iqm: Interval,
    collapsed: list[str],
    saturation: dict[str, float | None],
    total: int,
) -> list[str]:
    """A complete candidate's paragraphs after the tests: its alive records (when its rule has the gate), and its rule's
    decision: adopted only when its aggregate IQM is strictly above the entry's and none of its runs collapsed."""
    words = {"name": candidate.name, "rule": candidate.rule}
    parts = []
    if candidate.alive:
        recorded = {run: share for run, share in saturation.items() if share is not None}
        shares = ", ".join(f"{run} {share:.0%}" for run, share in recorded.items()) or "none"
        parts.append(fill("minatar5m.candidate_alive", **words, shares=shares, recorded=len(recorded), total=total))
        if len(recorded) < total:
            return [*parts, fill("minatar5m.candidate_rule.waits", **words, recorded=len(recorded), total=total)]
    above, clean = bool(iqm.point > entry_iqm.point), not collapsed
    verdict = fill(
        "minatar5m.candidate_rule",
        **words,
        candidate=iqm.point,
        entry=entry_iqm.point,
        above=VERDICT[above],
        clean=VERDICT[clean],
    )
    inside = fill("minatar5m.candidate_rule.inside", **words) if iqm.place(entry_iqm) == 0 == entry_iqm.place(iqm) else ""
    decision = fill("minatar5m.candidate_rule.adopted" if above and clean else "minatar5m.candidate_rule.kept", **words)
    return [*parts, sentences(verdict, inside, decision)]


def minatar_5m_section(results_dir: Path, images_dir: Path, docs_dir: Path) -> str:
    """
    The MinAtar entries at 5M steps (``MINATAR_5M_ENTRIES``) on ``MINATAR_GAMES``, seeds ``MINATAR_5M_SEEDS``: per game
    and entry the IQM at 2M and at 5M, how many runs keep their 2M evaluation and still rise in the last 1M, entropy
    and line-search acceptance at the end and the no-collapse test; once every game has every seed of TRPOPlus and PPO,
    the aggregate normalized by random = 0 and PPO's IQM = 1, and the issue's tests; once a sealed entry has all its
    runs, its figures beside them and its rule's test against TRPOPlus.
    """
    runs = {key: load_learning(results_dir / folder) for key, (folder, *_) in MINATAR_5M_ENTRIES.items()}
    entries = {key: entry for key, (_, entry, _) in MINATAR_5M_ENTRIES.items()}
    random_scores = (read_json(results_dir / "minatar_random.json") or {}).get("games", {})
    plus_algo, reference = MINATAR_ALGOS
    picked = {  # per game, entry and seed, the record read (a sealed entry's are left out below until it is complete)
        game: {
            key: {
                record["seed"]: record
                for record in runs[key].get(f"MinAtar/{game}-v1", {}).get(entry.algo, [])
                if record["seed"] in MINATAR_5M_SEEDS and record["n_timesteps"] == MINATAR_5M_BUDGET
            }
            for key, entry in entries.items()
        }
        for game in MINATAR_GAMES
    }
    for key, (_, entry, frozen) in MINATAR_5M_ENTRIES.items():
        for game, by_entry in picked.items():
            for seed, record in by_entry[key].items():
                if wrong := {
                    name: record["hyperparams"].get(name)
                    for name, value in frozen.items()
                    if record["hyperparams"].get(name) != value
                }:
                    raise ValueError(f"{entry.label}, {game} seed {seed}: {wrong} in its record, where its rule has {frozen}")
    total = len(MINATAR_GAMES) * len(MINATAR_5M_SEEDS)
    counts = {game: {key: len(by_seed) for key, by_seed in by_entry.items()} for game, by_entry in picked.items()}
    finished = {key: sum(by_entry[key] for by_entry in counts.values()) for key in entries}
    sealed = [key for key in MINATAR_5M_CANDIDATES if finished[key] < total]
    for by_entry in picked.values():
        for key in sealed:
            by_entry[key] = {}
    rows, complete = [], []
    normalized = {key: [] for key in entries}
    dropped, collapsed = {key: [] for key in entries}, {key: [] for key in entries}
    saturation = {key: {} for key in entries}  # per alive-gated candidate, "game seed": its policy's first layer
    for game in MINATAR_GAMES:
        facts = {
            key: {seed: run_5m_facts(record, entries[key].algo) for seed, record in by_seed.items()}
            for key, by_seed in picked[game].items()
        }
        ppo_entropy = _measured(fact["entropy"] for fact in facts[reference].values())
        entropy_floor = MINATAR_5M_ENTROPY_SHARE * float(np.mean(ppo_entropy)) if ppo_entropy else float("nan")
        random_score = random_scores.get(f"MinAtar/{game}-v1", {}).get("mean")
        for key, by_seed in facts.items():
            label = entries[key].label
            if key in sealed:
                rows.append(fill("minatar5m.row.withheld", game=game, label=label, finished=counts[game][key]))
                continue
            if not by_seed:
                rows.append(fill("minatar5m.row.not_run", game=game, label=label))
                continue
            values = list(by_seed.values())
            at_2m, entropy, accepted = (_measured(fact[name] for fact in values) for name in ("at_2m", "entropy", "accepted"))
            failures = {}
            if entries[key].algo == plus_algo:
                saturation[key].update(_alive_records(results_dir, key, game, by_seed))
                failures = {
                    seed: why
                    for seed, fact in by_seed.items()
                    if (why := _failures(fact, entropy_floor, saturation[key], f"{game} {seed}", random_score))
                }
                collapsed[key] += [f"{game} seed {seed} ({', '.join(why)})" for seed, why in failures.items()]
                dropped[key] += [
                    f"{game} seed {seed} (2M: {Shown(fact['at_2m']):.1f}, last three: {Shown(fact['last']):.1f})"
                    for seed, fact in by_seed.items()
                    if not _keeps(fact)
                ]
            rows.append(
                fill(
                    "minatar5m.row",
                    game=game,
                    label=label,
                    seeds=", ".join(map(str, by_seed)),
                    at_2m=Shown(metrics_iqm(at_2m) if at_2m else None),
                    at_5m=interval_estimates({key: np.array([fact["final"] for fact in values])})[key]["iqm"],
                    kept=_count(values, _keeps),
                    rising=_count(values, _rises),
                    entropy=Shown(float(np.mean(entropy)) if entropy else None),
                    accepted=Shown(float(np.mean(accepted)) if accepted else None),
                    collapsed=(
                        "n/a"
                        if entries[key].algo != plus_algo
                        # the row waits for PPO's entropy on the game; the verdict below counts such a run as collapsed
                        else f"{len(failures)} of {len(values)}"
                        if ppo_entropy
                        else "not yet (no PPO run)"
                    ),
                )
            )
        if random_score is not None and all(set(MINATAR_5M_SEEDS) <= set(facts[key]) for key in MINATAR_ALGOS):
            complete.append(game)
            scale = metrics_iqm([facts[reference][seed]["final"] for seed in MINATAR_5M_SEEDS]) - random_score
            if scale <= 0:
                raise ValueError(f"MinAtar/{game}-v1: PPO's IQM at 5M is not above the random policy's {random_score}")
            for key, by_seed in facts.items():
                if set(MINATAR_5M_SEEDS) <= set(by_seed):
                    normalized[key].append([(by_seed[seed]["final"] - random_score) / scale for seed in MINATAR_5M_SEEDS])
    seeds = ", ".join(map(str, MINATAR_5M_SEEDS))
    intro = fill(
        "minatar5m",
        seeds=seeds,
        window=MINATAR_5M_WINDOW // 1000,
        min_acceptance=ATARI_MIN_ACCEPTANCE,
        entropy_share=MINATAR_5M_ENTROPY_SHARE,
        bootstrap_reps=BOOTSTRAP_REPS,
        bootstrap_seed=BOOTSTRAP_SEED,
    )
    if not any(runs.values()):
        return paragraphs(intro, fill("minatar5m.no_runs"))
    entropy_image = images_dir / "minatar5m_entropy.png"
    title = "MinAtar, 5M steps: policy entropy (mean per 250k steps) and TRPOPlus's line-search acceptance"
    plot_entropy_panels(picked, entropy_image, entries, title)
    parts = [intro, fill("minatar5m.table", rows="\n".join(rows), image=image_link(entropy_image, docs_dir))]
    parts += [fill("minatar5m.sealed", label=entries[key].label, finished=finished[key], total=total) for key in sealed]
    if len(complete) < len(MINATAR_GAMES):
        return paragraphs(*parts, fill("minatar5m.not_yet", complete=len(complete), total=len(MINATAR_GAMES)))
    shown = [key for key in entries if len(normalized[key]) == len(MINATAR_GAMES)]
    scores = {key: np.array(normalized[key]).T for key in shown}  # (seeds, games)
    estimates = interval_estimates(scores)
    profile = images_dir / "minatar5m_profile.png"
    title = f"MinAtar at 5M steps: performance profile (all runs of all {len(MINATAR_GAMES)} games, seeds {seeds})"
    plot_performance_profile(scores, profile, title, "PPO's IQM", entries={key: entries[key] for key in shown})
    parts.append(
        fill(
            "minatar.aggregate",
            games=fill("minatar.aggregate.all", count=_number_word(len(MINATAR_GAMES))),
            rows=fill_each("minatar.aggregate.row", ({"label": entries[key].label, **estimates[key]} for key in shown)),
            image=image_link(profile, docs_dir),
        )
    )
    for key in (key for key in shown if entries[key].algo == plus_algo):
        iqm = estimates[key]["iqm"]
        parts.append(
            fill(
                "minatar5m.tests",
                label=entries[key].label,
                goal=MINATAR_5M_GOAL_IQM,
                iqm=iqm,
                iqm_verdict=VERDICT[bool(iqm.point >= MINATAR_5M_GOAL_IQM)],
                kept_verdict=VERDICT[not dropped[key]],
                dropped="; ".join(dropped[key]) or "none",
                collapse_verdict=VERDICT[not collapsed[key]],
                collapsed="; ".join(collapsed[key]) or "none",
            )
        )
    parts += [
        sentence
        for key, candidate in MINATAR_5M_CANDIDATES.items()
        if key in shown
        for sentence in _candidate_verdict(
            candidate, estimates[key]["iqm"], estimates[plus_algo]["iqm"], collapsed[key], saturation[key], total
        )
    ]
    return paragraphs(*parts)


def minatar_sections(results_dir: Path, images_dir: Path, docs_dir: Path, seeds: list[int] = MINATAR_SEEDS) -> list[str]:
    """Section 5 on ``seeds``, 5.1 (the entry before, when its runs are kept) on the seeds it was run on, and 5.2 (both
    entries at 5M steps)."""
    sections = [minatar_section(results_dir, images_dir, docs_dir, seeds)]
    if (results_dir / MINATAR_PREVIOUS_ENTRY / "learning").is_dir():
        previous = results_dir / MINATAR_PREVIOUS_ENTRY
        sections.append(
            minatar_section(results_dir, images_dir, docs_dir, MINATAR_PREVIOUS_ENTRY_SEEDS, previous, "minatar.previous")
        )
    sections.append(minatar_5m_section(results_dir, images_dir, docs_dir))
    return sections
