"""
A variant of the MinAtar Breakout entry of ``hyperparams/trpo_plus.yml``: one TRPOPlus run (seed 0, evaluation every
100k steps, 10 episodes) with some of the entry's values replaced, to compare settings before a learning sweep.

This is how the MinAtar entry's current values were chosen (``benchmarks/results/minatar_variants/``)::

    # A: the entry before the change, 2M steps: benchmarks/results/minatar_variants/A_original_seed0_2M.json
    python -m benchmarks.experiments.minatar_variants B 1e6 \\
        '{"cg_sub_sampling_factor": 4, "target_kl": 0.02, "ent_coef": 0.05, "min_ent_coef": 0.01}'
    python -m benchmarks.experiments.minatar_variants C 1e6 \\
        '{"cg_sub_sampling_factor": 4, "target_kl": 0.01, "ent_coef": 0.05, "min_ent_coef": 0.01}'

(variant A's values: ``target_kl: 0.02, ent_coef: 0.01, min_ent_coef: 0.001``, no ``cg_sub_sampling_factor``).
"""

import json
import sys
from pathlib import Path

from benchmarks._common import RESULTS_DIR, set_threads, write_json
from benchmarks.learning import train_run

ENV_ID = "MinAtar/Breakout-v1"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        raise SystemExit(__doc__)
    name, budget, overrides = argv[0], int(float(argv[1])), json.loads(argv[2])
    from benchmarks._common import load_hyperparams

    set_threads(1)
    entry, _ = load_hyperparams("trpo_plus", ENV_ID)
    # The entry as it is now, with the variant's values on top
    hyperparams = {**entry, **overrides}
    run_dir = RESULTS_DIR / "tmp" / "minatar_variants" / name
    record = train_run(
        "trpo_plus",
        ENV_ID,
        0,
        budget,
        Path(run_dir),
        hyperparams=hyperparams,
        eval_freq=100_000,
        eval_episodes=10,
        n_eval_envs=5,
    )
    record["overrides"] = overrides
    write_json(RESULTS_DIR / "minatar_variants" / f"{name}.json", record)
    print(name, overrides, "eval", record["curve"]["mean"], "train", record["curve"]["train_ep_rew_mean"])
    print(record.get("last_update"))


if __name__ == "__main__":
    main()
