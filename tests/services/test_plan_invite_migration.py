"""Migration inv01 (plan_invite) on SQLite and PostgreSQL: the table refers to plan with a cascade, is unique per
plan and e-mail, and the downgrade removes it again."""

from __future__ import annotations

from sqlalchemy import inspect

from app import migrate
from app.db import make_engine


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_invitations_table_up_and_down(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url, "cal01")
    assert "plan_invite" not in _tables(empty_db_url)
    migrate.upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        inspector = inspect(engine)
        fks = inspector.get_foreign_keys("plan_invite")
        assert any(
            fk["referred_table"] == "plan"
            and fk["constrained_columns"] == ["plan_id"]
            and (fk.get("options") or {}).get("ondelete") == "CASCADE"
            for fk in fks
        ), fks
        uniques = inspector.get_unique_constraints("plan_invite")
        assert any(sorted(u["column_names"]) == ["email", "plan_id"] for u in uniques), uniques
        assert {tuple(i["column_names"]) for i in inspector.get_indexes("plan_invite")} >= {
            ("email",),
            ("plan_id",),
        }
    finally:
        engine.dispose()
    migrate.downgrade(empty_db_url, "cal01")
    assert "plan_invite" not in _tables(empty_db_url)
