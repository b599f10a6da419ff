"""Catalog lookups answer built-in names from the file catalog without a query, exactly as the database would;
a user's row that holds a built-in name, and unknown names, still go to the database (both backends)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlmodel import Session, select

import app.catalog as catalog
from app.core.hardware import GPUSpec, InterconnectSpec
from app.core.model import ModelSpec
from app.db import get_engine, get_read_engine
from app.models.catalog import GPUEntry, InterconnectEntry, ModelEntry
from app.services import catalog as svc


def _count_queries(engine: Any) -> list[str]:
    seen: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def _record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    return seen


def test_every_builtin_resolves_to_its_database_row_without_a_query(db_url: str) -> None:
    kinds = [
        ("gpu", GPUEntry, GPUSpec, svc.get_gpu),
        ("model", ModelEntry, ModelSpec, svc.get_model),
        ("interconnect", InterconnectEntry, InterconnectSpec, svc.get_interconnect),
    ]
    queries = _count_queries(get_engine())
    with Session(get_read_engine()) as session:
        for kind, _table, _cls, _getter in kinds:
            assert svc.clean_builtin_names(session, kind) == frozenset(catalog.entries(kind))
        queries.clear()
        for kind, _table, _cls, getter in kinds:
            for name, entry in catalog.entries(kind).items():
                for label in (name, name.upper(), *entry.aliases):
                    assert getter(session, label) is entry.spec
        assert queries == []
    with Session(get_engine()) as session:  # the database's own answer is the same spec
        for kind, table, cls, _getter in kinds:
            for row in session.exec(select(table)).all():
                assert cls.from_dict(row.spec) == catalog.entries(kind)[row.name].spec


def test_user_row_holding_a_builtin_name_wins_and_is_seen_at_once(db_url: str) -> None:
    """A user's row that took a name before the catalog gained it keeps it (seed.py); the lookup must follow."""
    name = "Llama-3-8B"
    builtin = catalog.find_model(name)
    with Session(get_read_engine()) as session:
        assert svc.get_model(session, name) is builtin  # learnt: clean
    with Session(get_engine()) as session:
        row = session.exec(select(ModelEntry).where(ModelEntry.name == name)).one()
        session.delete(row)
        session.flush()
        mine = builtin.to_dict() | {"num_layers": builtin.num_layers + 2}
        session.add(ModelEntry(name=name, family=builtin.family, spec=mine, source="a user", builtin=False))
        session.commit()
    with Session(get_read_engine()) as session:
        assert name not in svc.clean_builtin_names(session, "model")
        got = svc.get_model(session, name)
        assert got.num_layers == builtin.num_layers + 2
        assert (
            svc.get_model(session, "llama3-8b").num_layers == builtin.num_layers + 2
        )  # through an alias too
        assert svc.get_model(session, "Llama-3-70B") is catalog.find_model("Llama-3-70B")  # others stay clean


def test_unknown_names_fall_through_to_users_rows(db_url: str) -> None:
    base = catalog.find_model("Llama-3-8B")
    with Session(get_engine()) as session:
        svc.add_model(
            session, ModelSpec.from_dict(base.to_dict() | {"name": "team-model-9", "num_layers": 7})
        )
    with Session(get_read_engine()) as session:
        assert svc.get_model(session, "team-model-9").num_layers == 7
        assert svc.get_model(session, "TEAM model 9").num_layers == 7
