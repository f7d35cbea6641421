"""Launchers: a run's processes on one machine, across hosts and on Ray, and their network."""
