"""The one rule of who sees a price row (app.services.catalog.price_visibility) on both databases: built-in rows
to everyone, a user's row to that user and administrators, a user's row without an owner to administrators only;
every reader of the price book agrees with it, and default quotes leave an administrator's view out."""

from __future__ import annotations

import uuid
from datetime import date, timedelta
from typing import Any

from sqlmodel import Session, col, select

from app.auth.deps import Principal
from app.db import get_engine
from app.models.catalog import PriceRow
from app.services import catalog as service
from app.services import prices
from app.services.catalog_public import price_viewer
from app.services.planning import price_book_date
from tests.auth_support import ensure_user


def _row(session: Session, item: str, owner: uuid.UUID | None, days_old: int = 3) -> PriceRow:
    row = PriceRow(
        category="cloud_gpu",
        item=item,
        vendor="RuleCloud",
        pricing_model="on-demand",
        unit="GPU-hour",
        price_usd=1.5,
        usd_per_gpu_hour=1.5,
        gpu_name="H100-SXM",
        gpus_per_unit=1,
        price_date=date.today() - timedelta(days=days_old),
        source="quote",
        builtin=False,
        owner_id=owner,
    )
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def _items(rows: list[Any]) -> set[str]:
    return {r.item for r in rows if r.vendor == "RuleCloud"}


def test_who_sees_which_row(db_url: str) -> None:
    alice, bob = ensure_user("rule-alice@example.test").id, ensure_user("rule-bob@example.test").id
    admin_with_account = service.Actor(
        ensure_user("rule-admin@example.test", is_admin=True).id, is_admin=True
    )
    expected = {
        service.PUBLIC: set(),
        service.Actor(alice): {"alice's"},
        service.Actor(bob): {"bob's"},
        service.LOCAL_ADMIN: {"alice's", "bob's", "orphan"},
        admin_with_account: {"alice's", "bob's", "orphan"},
    }
    with Session(get_engine()) as session:
        rows = {
            "alice's": _row(session, "alice's", alice, days_old=0),
            "bob's": _row(session, "bob's", bob),
            "orphan": _row(session, "orphan", None),  # a user's row from before rows had owners
        }
        builtin = set(session.exec(select(PriceRow.id).where(col(PriceRow.builtin))).all())
        for viewer, wanted in expected.items():
            listed, total = service.list_price_rows(session, viewer=viewer)
            assert _items(listed) == wanted and total == len(builtin) + len(wanted)
            assert {r.id for r in listed} >= builtin
            assert _items(prices.price_book(session, viewer=viewer)) == wanted
            for name, row in rows.items():
                if name in wanted:
                    assert service.get_price_row(session, row.id, viewer=viewer).item == name
                else:
                    try:
                        service.get_price_row(session, row.id, viewer=viewer)
                    except LookupError:
                        continue
                    raise AssertionError(f"{viewer} sees {name}")
        # default quotes: the built-in rows and the viewer's own, for an administrator too
        assert _items(prices.default_cloud_rows(session, "H100", viewer=service.Actor(alice))) == {"alice's"}
        assert _items(prices.default_cloud_rows(session, "H100", viewer=admin_with_account)) == set()
        assert _items(prices.default_cloud_rows(session, "H100", viewer=service.LOCAL_ADMIN)) == set()
        # the price-book date of a plan is the newest row it may rest on
        newest_builtin = max(session.exec(select(PriceRow.price_date).where(col(PriceRow.builtin))).all())
        assert price_book_date(session, service.Actor(alice)) == date.today().isoformat()
        assert (
            price_book_date(session, service.Actor(bob))
            == max(newest_builtin, rows["bob's"].price_date).isoformat()
        )
        assert price_book_date(session, service.PUBLIC) == newest_builtin.isoformat()


def test_categories_follow_the_rule(db_url: str) -> None:
    alice = ensure_user("rule-categories@example.test").id
    with Session(get_engine()) as session:
        row = _row(session, "alice's storage", alice)
        row.category = "storage_private_test"
        session.add(row)
        session.commit()
        assert "storage_private_test" in service.price_categories(session, viewer=service.Actor(alice))
        assert "storage_private_test" not in service.price_categories(session, viewer=service.PUBLIC)


def test_a_callers_view_needs_plans_read_for_their_own_rows() -> None:
    user = uuid.uuid4()
    reader = Principal(kind="token", user_id=user, scopes=frozenset({"plans:read"}), via="token")
    bench = Principal(kind="token", user_id=user, scopes=frozenset({"benchmarks:run"}), via="token")
    admin = Principal(kind="user", user_id=user, scopes=frozenset({"admin", "plans:read"}), via="cookie")
    node = Principal(kind="node", node_id=uuid.uuid4(), via="node-token")
    assert price_viewer(reader) == service.Actor(user)
    assert price_viewer(bench) == service.PUBLIC
    assert price_viewer(node) == service.PUBLIC
    assert price_viewer(admin) == service.Actor(user, is_admin=True)
    assert service.quoted_for(price_viewer(admin)) == service.Actor(user)
