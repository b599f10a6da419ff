"""The catalog in the database (SQLite and PostgreSQL): seeding, users' rows, lookups, the price book."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlmodel import Session, func, select

import app.catalog as catalog
from app.core.errors import SpecError
from app.core.model import ModelSpec
from app.db import get_engine
from app.errors import NotFoundError
from app.models.catalog import GPUEntry, InterconnectEntry, ModelEntry, PriceRow
from app.services import catalog as service
from app.services.seed import seed_catalog
from tests.paths import DATA_DIR


def _count(session: Session, table: type) -> int:
    return int(session.exec(select(func.count()).select_from(table)).one())


def _priced_rows() -> int:
    return sum(1 for r in catalog.price_rows() if r["price_usd"] is not None)


def test_seeding_fills_every_table_and_is_idempotent(db_url: str) -> None:
    with Session(get_engine()) as session:
        counts = {t: _count(session, t) for t in (GPUEntry, InterconnectEntry, ModelEntry, PriceRow)}
    assert counts[GPUEntry] == len(catalog.gpus())
    assert counts[InterconnectEntry] == len(catalog.interconnects())
    assert counts[ModelEntry] == len(catalog.models())
    assert counts[PriceRow] == _priced_rows()
    report = seed_catalog()  # the fixture already seeded once
    assert not report.changed
    with Session(get_engine()) as session:
        assert {t: _count(session, t) for t in counts} == counts


def test_user_rows_survive_reseeding_and_builtin_rows_are_repaired(db_url: str) -> None:
    with Session(get_engine()) as session:
        mine = service.add_price_row(
            session,
            {
                "category": "cloud_gpu",
                "item": "negotiated H100 rate",
                "price_usd": 1.85,
                "price_date": date.today(),
                "source": "quote Q-1",
                "includes": "GPU-hour incl. host and IB",
                "gpu_name": "H100",
            },
        )
        model = service.add_model(
            session, ModelSpec.from_dict(catalog.find_model("GPT-2").to_dict() | {"name": "my-gpt"})
        )
        # damage a built-in row and drop another
        h100 = session.exec(select(GPUEntry).where(GPUEntry.name == "H100-SXM")).one()
        h100.spec = {**h100.spec, "tdp_w": 1.0}
        session.add(h100)
        session.delete(session.exec(select(ModelEntry).where(ModelEntry.name == "Llama-2-7B")).one())
        session.commit()
        mine_id, model_id = mine.id, model.id
    report = seed_catalog()
    assert report.updated.get("gpu") == 1 and report.inserted.get("model_spec") == 1
    with Session(get_engine()) as session:
        row = session.get(PriceRow, mine_id)
        assert row is not None and row.price_usd == 1.85 and not row.builtin and row.gpu_name == "H100-SXM"
        assert session.get(ModelEntry, model_id) is not None
        assert service.get_gpu(session, "H100-SXM").tdp_w == 700
        assert service.get_model(session, "Llama-2-7B").num_layers == 32


def test_a_user_row_that_took_a_builtin_name_is_left_alone(db_url: str) -> None:
    with Session(get_engine()) as session:
        row = session.exec(select(InterconnectEntry).where(InterconnectEntry.name == "EFA-v3")).one()
        row.builtin = False
        row.spec = {**row.spec, "latency_s": 9e-6}
        session.add(row)
        session.commit()
    report = seed_catalog()
    assert report.skipped.get("interconnect") == 1
    with Session(get_engine()) as session:
        assert service.get_interconnect(session, "EFA v3").latency_s == 9e-6


def test_lookups_accept_aliases_and_suggest(db_url: str) -> None:
    with Session(get_engine()) as session:
        assert service.get_gpu(session, "A100-80 (SXM, Selene)").name == "A100-80GB-SXM"
        assert service.get_gpu(session, "h100 80gb").hbm_bytes == 80 * 2**30
        assert service.get_model(session, "LLAMA3-70B").num_kv_heads == 8
        assert service.get_interconnect(session, "IB NDR").kind == "scale_out"
        with pytest.raises(NotFoundError) as err:
            service.get_model(session, "Mixtral-8x8B")
        assert "Mixtral-8x7B" in err.value.suggestions


def test_user_models_from_inline_spec_and_hf_config(db_url: str) -> None:
    import json

    config = json.loads((DATA_DIR / "hf" / "Qwen3-8B.json").read_text())
    with Session(get_engine()) as session:
        row = service.add_model_from_hf(session, config, "team-qwen3-8b")
        assert not row.builtin and row.family == "qwen3"
        assert service.get_model(session, "TEAM qwen3 8b").head_dim == 128
        assert [m.name for m in service.list_models(session, "team-qwen")] == ["team-qwen3-8b"]
        with pytest.raises(SpecError) as err:  # a built-in alias cannot be taken
            service.add_model(session, ModelSpec.from_dict(row.spec | {"name": "Llama 3 8B"}))
        assert err.value.problems[0].field == "name"
        bad = ModelSpec.from_dict(row.spec | {"name": "bad", "num_kv_heads": 5})
        with pytest.raises(SpecError) as err:
            service.add_model(session, bad)
        assert err.value.problems[0].field == "num_kv_heads"
        with pytest.raises(service.ReadOnlyError):
            service.delete_model(session, "Qwen3-8B")
        service.delete_model(session, "team-qwen3-8b")
        with pytest.raises(NotFoundError):
            service.get_model(session, "team-qwen3-8b")


def test_price_filters_and_staleness(db_url: str) -> None:
    today = date.today()
    with Session(get_engine()) as session:
        rows, total = service.list_price_rows(
            session,
            service.PriceFilters(category="cloud_gpu", gpu="H100", pricing_model="spot"),
            viewer=service.LOCAL_ADMIN,
        )
        assert total == len(rows) >= 2
        assert all(r.gpu_name == "H100-SXM" and "spot" in r.pricing_model.lower() for r in rows)
        page, total_all = service.list_price_rows(session, viewer=service.LOCAL_ADMIN, offset=5, limit=10)
        assert len(page) == 10 and total_all == _priced_rows()
        aws, _ = service.list_price_rows(session, service.PriceFilters(vendor="aws"), viewer=service.PUBLIC)
        assert aws and all(r.vendor == "AWS" for r in aws)
        old = service.add_price_row(
            session,
            {
                "category": "power",
                "item": "old tariff",
                "price_usd": 0.1,
                "price_date": today - timedelta(days=400),
                "source": "bill",
                "includes": "energy only",
            },
        )
        assert service.is_stale(old, today, stale_days=180)
        assert not service.is_stale(old, today, stale_days=500)
        mine, n = service.list_price_rows(
            session, service.PriceFilters(builtin=False), viewer=service.LOCAL_ADMIN
        )
        assert n == 1 and mine[0].id == old.id


def test_price_row_edit_rules(db_url: str) -> None:
    with Session(get_engine()) as session:
        builtin = session.exec(select(PriceRow).where(PriceRow.builtin == True)).first()  # noqa: E712
        assert builtin is not None
        with pytest.raises(service.ReadOnlyError):
            service.update_price_row(session, builtin.id, {"price_usd": 0.0})
        with pytest.raises(service.ReadOnlyError):
            service.delete_price_row(session, builtin.id)
        row = service.add_price_row(
            session,
            {
                "category": "cloud_gpu",
                "item": "spot B200",
                "price_usd": 3.0,
                "price_date": date.today(),
                "source": "console",
                "includes": "GPU-hour",
            },
        )
        updated = service.update_price_row(session, row.id, {"price_usd": 2.5, "gpu_name": "b200-sxm"})
        assert updated.price_usd == 2.5 and updated.gpu_name == "B200" and updated.updated_at is not None
        with pytest.raises(SpecError) as err:
            service.update_price_row(session, row.id, {"gpu_name": "B2000", "price_usd": -1, "source": " "})
        assert {p.field for p in err.value.problems} == {"gpu_name", "price_usd", "source"}
        with pytest.raises(SpecError) as err:
            service.add_price_row(session, {"category": "x", "item": "y", "price_usd": 1.0})
        assert {p.field for p in err.value.problems} == {"price_date", "source", "includes", "category"}
        service.delete_price_row(session, row.id)
        with pytest.raises(NotFoundError):
            service.get_price_row(session, row.id, viewer=service.LOCAL_ADMIN)
        with pytest.raises(NotFoundError):
            service.get_price_row(session, "not-a-uuid", viewer=service.LOCAL_ADMIN)


def test_seeded_price_rows_keep_date_source_and_includes(db_url: str) -> None:
    with Session(get_engine()) as session:
        rows = session.exec(select(PriceRow).where(PriceRow.builtin == True)).all()  # noqa: E712
        assert rows and all(r.source and r.includes and r.seed_key for r in rows)
        partial = [r for r in rows if r.item.startswith("Wholesale colocation")]
        assert partial[0].price_date == date(2024, 7, 1)
        assert "[date as published: 2024-H2]" in partial[0].notes


def test_owner_rules_for_user_rows(db_url: str) -> None:
    import uuid

    from app.auth.users import create_user

    with Session(get_engine()) as session:
        owner = create_user(session, f"o-{uuid.uuid4().hex[:6]}@example.test", "correct horse battery staple")
        row = service.add_price_row(
            session,
            {
                "category": "power",
                "item": "site tariff",
                "price_usd": 0.09,
                "price_date": date.today(),
                "source": "utility bill",
                "includes": "energy and demand charges",
            },
            owner_id=owner.id,
        )
        stranger = service.Actor(uuid.uuid4(), is_admin=False)
        with pytest.raises(NotFoundError):  # another user's row does not exist for them
            service.update_price_row(session, row.id, {"price_usd": 0.01}, stranger)
        with pytest.raises(NotFoundError):
            service.delete_price_row(session, row.id, service.Actor(None, is_admin=False))
        updated = service.update_price_row(session, row.id, {"price_usd": 0.08}, service.Actor(owner.id))
        assert updated.price_usd == 0.08 and updated.owner_id == owner.id
        mine, n = service.list_price_rows(session, viewer=service.Actor(owner.id), owner_id=owner.id)
        assert n == 1 and mine[0].id == row.id
        service.delete_price_row(session, row.id, service.LOCAL_ADMIN)


def test_concurrent_seeding_settles_on_one_copy(empty_db_url: str) -> None:
    """Several servers starting at once on one database: every seeder finishes and no row is duplicated."""
    from concurrent.futures import ThreadPoolExecutor

    from app import migrate
    from app.db import make_engine

    migrate.upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            reports = list(pool.map(lambda _: seed_catalog(engine), range(3)))
        assert sum(r.inserted.get("gpu", 0) for r in reports) == len(catalog.gpus())
        with Session(engine) as session:
            assert _count(session, GPUEntry) == len(catalog.gpus())
            assert _count(session, PriceRow) == _priced_rows()
    finally:
        engine.dispose()
