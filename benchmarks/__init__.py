"""
Benchmarks of TRPOPlus against sb3-contrib TRPO and PPO (not part of the installed package).

Run each one from the repository root as a module, e.g. ``python -m benchmarks.fvp``; ``python -m benchmarks.report``
turns the results under ``benchmarks/results/`` into ``docs/benchmarks.md``.
"""
