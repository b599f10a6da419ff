"""Seed the built-in catalog into the database (implemented with the catalog loaders)."""

from __future__ import annotations


def seed_catalog() -> None:
    """Insert or refresh built-in catalog rows. Filled in by the catalog module."""
    return None
