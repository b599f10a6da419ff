"""Migration cal01 (calibration_profile.owner_id) on SQLite and PostgreSQL: existing profiles keep their rows with
no owner, the column is indexed and refers to user_account, and the downgrade removes it again."""

from __future__ import annotations

import uuid

from sqlalchemy import inspect, text

from app import migrate
from app.db import make_engine


def _columns(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return {c["name"] for c in inspect(engine).get_columns("calibration_profile")}
    finally:
        engine.dispose()


def test_profiles_from_before_owners_keep_no_owner(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url, "plan01")
    profile_id = uuid.uuid4()
    engine = make_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO calibration_profile (id, name, version, gpu_name, params, report, created_at) "
                    "VALUES (:id, 'old-lab', 1, 'H100', '{}', '{}', CURRENT_TIMESTAMP)"
                ),
                {"id": profile_id.hex if empty_db_url.startswith("sqlite") else str(profile_id)},
            )
        migrate.upgrade(empty_db_url)
        inspector = inspect(engine)
        assert "owner_id" in _columns(empty_db_url)
        assert any(i["column_names"] == ["owner_id"] for i in inspector.get_indexes("calibration_profile"))
        fks = inspector.get_foreign_keys("calibration_profile")
        assert any(
            fk["referred_table"] == "user_account" and fk["constrained_columns"] == ["owner_id"] for fk in fks
        )
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT name, owner_id FROM calibration_profile")).all()
        assert [tuple(r) for r in rows] == [("old-lab", None)]
    finally:
        engine.dispose()
    migrate.downgrade(empty_db_url, "plan01")
    assert "owner_id" not in _columns(empty_db_url)
