"""Studies that informed the design (their conclusions: docs/research.md); not part of the benchmark suite."""
