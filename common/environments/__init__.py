"""Environments: batched Atari, MinAtar and CartPole, their games, and recorded play (the lowest
layer)."""
