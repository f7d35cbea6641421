"""Experiments: the papers' builders, the command line, ablation studies and comparisons across
papers (the highest layer)."""
