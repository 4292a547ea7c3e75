"""Benchmarks of thena_nb, side by side with peer frameworks: `python -m benchmarks`."""
