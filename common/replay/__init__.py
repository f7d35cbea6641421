"""Replay and data: Reverb tables, writers, datasets, the parameter table, replay patterns and
actors' reports."""
