"""
Turn the results under ``benchmarks/results/`` into ``docs/benchmarks.md`` (tables) and ``docs/images/`` (plots).

Reads ``fvp.json`` (``benchmarks.fvp``), ``throughput*.json`` (``benchmarks.throughput``), ``learning/<algo>/<env>/
seed<k>.json`` (``benchmarks.learning``), ``atari/<game>/<algo>/seed<k>.json`` (``benchmarks.atari``), the tuning runs
of the ``atari`` entry and PPO's (``breakout_tuning/<candidate>/breakout/<algo>/seed<k>.json``, with their rules)
and ``minatar_random.json`` (``benchmarks.minatar_random``); whatever is missing is listed as not run. Per env of the
learning benchmark: the mean and the interquartile mean (IQM) of the final evaluation returns over seeds, with 95%
stratified-bootstrap confidence intervals from ``rliable`` (``rly.get_interval_estimates``); envs with fewer than
``report_learning.MIN_SEEDS`` seeds of an algorithm are marked incomplete and not judged. Every figure in the page
comes from these files: never edit the page by hand, run this again.

The page's text is ``benchmarks/report_template.md``: named blocks with ``{fields}``. The modules below only read
the results and compute the fields (numbers, table rows, which block applies); the targets are rules (``Target``)
checked against the results. A new result (a seed, an env, a game, a throughput file) is picked up from the files.
One module per section of the page, each read alone:

- ``report_speed``: 1. the Fisher-vector product and 2. throughput, with their targets;
- ``report_learning``: 3. learning on classic control and MinAtar/Breakout;
- ``report_breakout``: 4. Breakout, the ``atari`` entries over seeds, and the entry's tuning candidates;
- ``report_minatar``: 5. the MinAtar games normalized by PPO (and 5.1, the entry before);
- ``report_atari``: 6. Atari-5, and 6.1-6.3, its later measurements (``ATARI_MEASUREMENTS``);
- ``report_mujoco``: 7. MuJoCo, and the tuning of its entry;
- shared by them: ``report_common`` (the template, number formats, targets, provenance) and ``report_stats``
  (rliable's seeded intervals, the curves and the performance profile).

Usage::

    python -m benchmarks.report                       # benchmarks/results -> docs/benchmarks.md, docs/images/
"""

import argparse
from pathlib import Path

from benchmarks._common import REPO_ROOT, RESULTS_DIR, machine_info
from benchmarks.report_atari import ATARI_MEASUREMENTS, atari5_section, later_section
from benchmarks.report_breakout import breakout_section, breakout_tuning_section, train_reward_at
from benchmarks.report_common import fill, paragraphs
from benchmarks.report_learning import learning_section
from benchmarks.report_minatar import MINATAR_SEEDS, minatar_sections
from benchmarks.report_mujoco import mujoco_section
from benchmarks.report_speed import fvp_section, throughput_section

#: ``train_reward_at``: named as ``benchmarks.report.train_reward_at`` by the committed decision rules of the tuning runs
__all__ = ["main", "train_reward_at"]


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
        *(later_section(results_dir, images_dir, docs_dir, key) for key in ATARI_MEASUREMENTS),
        mujoco_section(results_dir, images_dir, docs_dir),
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
