"""Behaviour control: the bandit meta-controllers and the per-game behaviour selection actors
run."""
