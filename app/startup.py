"""Bring the database to the current schema and seed the built-in catalog (idempotent)."""

from __future__ import annotations

from app import migrate


def prepare_database(revision: str = "heads") -> None:
    migrate.upgrade(revision=revision)
    if revision == "heads":
        from app.services import seed

        seed.seed_catalog()
