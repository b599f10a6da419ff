"""The builder's cost panel cache (app.services.cost_panel_cache), on both databases through the real app from a
remote address: a cached panel is the panel computed afresh, Alice's private quote is in her panel only whoever
warms the cache first, an edit or delete of her row (through the app, or a write the app never saw) changes her
next panel, and no panel is shared between two principals even when they see the same price rows."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlmodel import Session

from app.db import get_engine
from app.services import cost_panel_cache, plan_costs, planning
from app.services.catalog import PUBLIC, Actor
from app.services.cost_panel_cache import panel_cache
from app.web.pages._builder import BuilderState, state_to_scenario
from tests.auth_support import bearer, ensure_user, issue_token, unthrottled_client
from tests.price_support import private_quote

ALICE, BOB, CAROL, ADMIN = "alice@example.com", "bob@example.com", "carol@example.com", "admin@example.com"
HX = {"HX-Request": "true"}
ANONYMOUS: dict[str, str] = {}
STATE = (
    BuilderState()
)  # Llama-3 8B on 2 × 8 H100: the builder's defaults, every anonymous visitor's first page
COST_SECTION = re.compile(r'<section class="panel" aria-labelledby="cost-title">.*?</section>', re.S)


@dataclass
class World:
    client: TestClient
    alice: dict[str, str]
    bob: dict[str, str]
    carol: dict[str, str]
    admin: dict[str, str]
    row: dict[str, Any]  # Alice's private H100 quote, the cheapest option in the price book

    def others(self) -> dict[str, dict[str, str]]:
        """Everyone but Alice: users, an administrator (quoted like everyone else) and an anonymous caller."""
        return {"bob": self.bob, "carol": self.carol, "admin": self.admin, "anonymous": ANONYMOUS}


def _quote(**overrides: Any) -> dict[str, Any]:
    return private_quote(source="procurement quote Q-9 (confidential)") | overrides


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    panel_cache.clear()
    yield
    panel_cache.clear()


@pytest.fixture(name="w")
def world(db_url: str) -> World:
    client = unthrottled_client()
    alice = bearer(issue_token(ALICE, ["plans:write"], is_admin=False))
    created = client.post("/api/v1/prices", json=_quote(), headers=alice)
    assert created.status_code == 201, created.text
    panel_cache.clear()
    return World(
        client=client,
        alice=alice,
        bob=bearer(issue_token(BOB, ["plans:write"], is_admin=False)),
        carol=bearer(issue_token(CAROL, ["plans:write"], is_admin=False)),
        admin=bearer(issue_token(ADMIN, ["admin"], is_admin=True)),
        row=created.json(),
    )


def _panel(w: World, headers: dict[str, str], state: BuilderState = STATE) -> str:
    """The builder's cost panel as the page renders it (the chart's figure, the options table, the breakeven)."""
    r = w.client.get("/plans/new?" + state.query(), headers=headers | HX)
    assert r.status_code == 200, r.text
    match = COST_SECTION.search(r.text)
    assert match and 'id="chart-cost"' in match.group(0), r.text[:2000]
    return match.group(0)


def _uncached_panel(w: World, headers: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The panel computed afresh: no key, so the cache is neither read nor written."""
    with monkeypatch.context() as patched:
        patched.setattr(cost_panel_cache, "panel_key", lambda *_args: None)
        return _panel(w, headers)


def _shows_alices_row(w: World, panel: str) -> bool:
    return str(w.row["item"]) in panel or str(w.row["vendor"]) in panel


def _price(panel: str, item: str) -> str:
    """The USD per GPU-hour the panel's table gives the option of the row named `item` ('' when not listed)."""
    match = re.search(
        rf'<th scope="row">[^<]*{re.escape(item)}[^<]*(?:<span[^>]*>[^<]*</span>)?</th><td class="num">([\d.,]+)</td>',
        panel,
    )
    return match.group(1) if match else ""


def test_a_cached_panel_is_the_panel_computed_afresh(w: World, monkeypatch: pytest.MonkeyPatch) -> None:
    for headers in (w.alice, *w.others().values()):
        fresh = _uncached_panel(w, headers, monkeypatch)
        hits = panel_cache.hits
        first, again = _panel(w, headers), _panel(w, headers)
        assert panel_cache.hits > hits  # the second page was answered from the cache
        assert first == again == fresh


@pytest.mark.parametrize(
    "viewer",
    [Actor(), Actor(uuid.uuid4()), Actor(uuid.uuid4(), is_admin=True)],
    ids=["anonymous", "user", "administrator"],
)
def test_the_cached_payload_is_the_computed_one_for_every_scenario(db_url: str, viewer: Actor) -> None:
    states = (
        STATE,
        BuilderState(model="Llama-3-70B", nodes=64, tp=8, pp=4, global_batch=1024),
        BuilderState(gpu="A100-SXM-80GB", nodes=4),
        BuilderState(mode="planner", rank_by="cost"),
    )
    with Session(get_engine()) as session:
        for state in states:
            evaluation = planning.evaluate(session, state_to_scenario(state), scaling=False, viewer=viewer)
            resolved, summary = evaluation.objects["resolved"], evaluation.result["summary"]
            inputs = plan_costs.cost_inputs(resolved, summary)
            assert inputs is not None
            fresh = plan_costs.uncached_cost_payload(session, inputs, viewer)
            assert isinstance(fresh, dict) and fresh["rows"]
            # evaluate stored the panel (its assumptions moved out of it); two more calls are answered from it
            hits = panel_cache.hits
            assert plan_costs.cost_payload(session, resolved, summary, viewer) == fresh
            assert plan_costs.cost_payload(session, resolved, summary, viewer) == fresh
            assert panel_cache.hits == hits + 2


@pytest.mark.parametrize("alice_first", [True, False], ids=["alice-warms-first", "others-warm-first"])
def test_a_private_row_is_in_its_owners_panel_only_whoever_warms_the_cache(
    w: World, alice_first: bool
) -> None:
    public = _panel(w, ANONYMOUS)
    panel_cache.clear()
    order = [("alice", w.alice), *w.others().items()]
    if not alice_first:
        order.reverse()
    for _round in range(2):  # the second round is answered from the cache
        panels = {who: _panel(w, headers) for who, headers in order}
        assert _price(panels["alice"], w.row["item"]) == "0.50"
        for who in w.others():
            assert not _shows_alices_row(w, panels[who]), who
            assert panels[who] == public, who
    assert panel_cache.hits >= len(order)


def test_editing_or_deleting_a_row_changes_its_owners_next_panel(w: World) -> None:
    row_id = w.row["id"]
    assert _price(_panel(w, w.alice), w.row["item"]) == "0.50"
    edited = w.client.patch(
        f"/api/v1/prices/{row_id}",
        json={"usd_per_gpu_hour": 0.25, "price_usd": 0.25, "item": "renegotiated quote"},
        headers=w.alice,
    )
    assert edited.status_code == 200, edited.text
    after_edit = _panel(w, w.alice)
    assert _price(after_edit, "renegotiated quote") == "0.25" and str(w.row["item"]) not in after_edit
    assert w.client.delete(f"/api/v1/prices/{row_id}", headers=w.alice).status_code == 204
    after_delete = _panel(w, w.alice)
    assert "renegotiated quote" not in after_delete and "QuoteCloud" not in after_delete
    assert after_delete == _panel(w, ANONYMOUS)  # with no row of her own, Alice's panel is everyone's


def test_a_write_the_app_never_saw_changes_the_next_panel(w: World, db_url: str) -> None:
    """Another worker or process on the same database (here a separate engine, no ORM event in this one): the key
    holds the rows themselves, so an UPDATE that leaves updated_at alone still misses."""
    assert _price(_panel(w, w.alice), w.row["item"]) == "0.50"
    elsewhere = create_engine(db_url)
    try:
        with elsewhere.begin() as conn:
            conn.execute(
                text("UPDATE price_row SET usd_per_gpu_hour = 0.2, price_usd = 0.2 WHERE item = :item"),
                {"item": w.row["item"]},
            )
    finally:
        elsewhere.dispose()
    assert _price(_panel(w, w.alice), w.row["item"]) == "0.20"


def test_no_panel_is_shared_between_principals_who_see_the_same_rows(w: World) -> None:
    """Bob, Carol and an anonymous caller see the same price rows (the built-in ones), so their panels are equal;
    each is still computed and kept for its own principal. This fails if the key leaves out the viewer."""
    bob, carol = ensure_user(BOB), ensure_user(CAROL)
    with Session(get_engine()) as session:
        keys = {
            cost_panel_cache.panel_key(session, "H100-SXM", "inputs", viewer)
            for viewer in (PUBLIC, Actor(bob.id), Actor(carol.id), Actor(bob.id, is_admin=True))
        }
    assert len(keys) == 3  # an administrator is quoted as the user they are (catalog.quoted_for)
    panels = []
    for who, headers in (("bob", w.bob), ("carol", w.carol), ("anonymous", ANONYMOUS)):
        misses = panel_cache.misses
        panels.append(_panel(w, headers))
        assert panel_cache.misses == misses + 1, f"{who}'s panel came from another principal's entry"
    assert panels[0] == panels[1] == panels[2]
    assert len(panel_cache) == 3
