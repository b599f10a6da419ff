"""Replays of published measurements against the estimator (training runs)."""
