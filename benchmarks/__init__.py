"""Side-by-side benchmarks (`nox -s bench`): medians of several runs and ratios."""
