"""The benchmark: runner, metrics, results, plots, gate. Knows nothing of any one engine."""
