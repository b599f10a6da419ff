"""Schema: migrations are the only source; they run both ways on SQLite and PostgreSQL and match the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

import app.models  # noqa: F401
from app import migrate
from app.db import make_engine

EXPECTED_TABLES = {
    "gpu",
    "interconnect",
    "model_spec",
    "price_row",
    "plan",
    "plan_revision",
    "user_account",
    "api_token",
    "node",
    "benchmark_job",
    "job_event",
    "calibration_profile",
}


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url)
    assert _tables(empty_db_url) >= EXPECTED_TABLES
    migrate.downgrade(empty_db_url, "base")
    assert _tables(empty_db_url) == set()
    migrate.upgrade(empty_db_url)
    assert _tables(empty_db_url) >= EXPECTED_TABLES


def test_models_match_migrations(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, SQLModel.metadata)
    finally:
        engine.dispose()
    assert diff == [], f"models and migrations disagree; run `clusterplan db revision`: {diff}"
