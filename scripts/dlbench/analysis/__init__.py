"""Statistics of the comparisons and the planner of adaptive repeats, in plain Python and NumPy."""
