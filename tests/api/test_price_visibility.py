"""A user's price rows are theirs: on both databases, through the real app from a remote address, Alice's private
quote is invisible to Bob and to anonymous callers on every route and page that reads the price book (a 404 like a
missing row where it is named), moves Alice's default quotes and headline only, and is every row's to an
administrator. A saved plan is costed with its owner's prices, whoever saves the revision, and a copy with its new
owner's."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import uuid
from dataclasses import dataclass
from datetime import date
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.db import get_engine
from app.models.catalog import PriceRow
from app.services.catalog import PUBLIC
from app.services.planner import price_for
from app.web.pages._builder import BuilderState
from tests.auth_support import bearer, ensure_user, issue_token, unthrottled_client
from tests.plans_support import SMALL_SEARCH, small_scenario
from tests.price_support import private_quote

ALICE, BOB, ADMIN = "alice@example.com", "bob@example.com", "admin@example.com"
HX = {"HX-Request": "true"}
ANONYMOUS: dict[str, str] = {}


@dataclass
class World:
    client: TestClient
    alice: dict[str, str]  # plans:write
    bob: dict[str, str]  # plans:write
    admin: dict[str, str]
    alice_bench: dict[str, str]  # Alice's token with benchmarks:run only
    row: dict[str, Any]  # Alice's private cloud quote for H100, as the API created it

    @property
    def item(self) -> str:
        return str(self.row["item"])


@pytest.fixture(name="w")
def world(db_url: str) -> World:
    client = unthrottled_client()
    alice = bearer(issue_token(ALICE, ["plans:write"], is_admin=False))
    created = client.post("/api/v1/prices", json=private_quote(), headers=alice)
    assert created.status_code == 201, created.text
    return World(
        client=client,
        alice=alice,
        bob=bearer(issue_token(BOB, ["plans:write"], is_admin=False)),
        admin=bearer(issue_token(ADMIN, ["admin"], is_admin=True)),
        alice_bench=bearer(issue_token(ALICE, ["benchmarks:run"], is_admin=False)),
        row=created.json(),
    )


def _listed(w: World, headers: dict[str, str], path: str = "/api/v1/prices", **params: Any) -> set[str]:
    r = w.client.get(path, params={"limit": 1000, **params}, headers=headers)
    assert r.status_code == 200, r.text
    return {row["item"] for row in r.json()["data"]}


def _exported(w: World, headers: dict[str, str], **params: Any) -> set[str]:
    r = w.client.get("/api/v1/prices/export.csv", params=params, headers=headers)
    assert r.status_code == 200, r.text
    return {row["item"] for row in csv.DictReader(io.StringIO(r.text))}


def test_a_private_row_is_listed_fetched_and_exported_for_its_owner_and_administrators_only(w: World) -> None:
    row_id, item = w.row["id"], w.item
    for headers in (w.alice, w.admin):
        assert item in _listed(w, headers) and item in _listed(w, headers, builtin=False, gpu="H100")
        assert item in _exported(w, headers) and item in _exported(w, headers, gpu="H100")
        assert item in _listed(w, headers, "/api/v1/cost/prices", category="cloud_gpu")
        assert w.client.get(f"/api/v1/prices/{row_id}", headers=headers).json()["item"] == item
    for headers in (w.bob, ANONYMOUS, w.alice_bench):
        assert item not in _listed(w, headers) and _listed(w, headers, builtin=False) == set()
        assert item not in _exported(w, headers) and item not in _exported(w, headers, builtin=False)
        assert item not in _listed(w, headers, "/api/v1/cost/prices")
        hidden = w.client.get(f"/api/v1/prices/{row_id}", headers=headers)
        missing = w.client.get(f"/api/v1/prices/{uuid.uuid4()}", headers=headers)
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["kind"] == missing.json()["kind"] == "price row"
    # the built-in rows are everyone's
    builtin = _listed(w, ANONYMOUS, builtin=True)
    assert builtin and builtin == _listed(w, w.bob, builtin=True) == _listed(w, w.alice, builtin=True)


def test_another_users_row_cannot_be_changed_and_does_not_exist_for_them(w: World) -> None:
    row_id = w.row["id"]
    assert w.client.patch(f"/api/v1/prices/{row_id}", json={"price_usd": 9}, headers=w.bob).status_code == 404
    assert w.client.delete(f"/api/v1/prices/{row_id}", headers=w.bob).status_code == 404
    assert w.client.get(f"/catalog/prices/{row_id}/edit", headers=w.bob).status_code == 404
    assert w.client.post(f"/catalog/prices/{row_id}", data=_form(), headers=w.bob).status_code == 404
    assert w.client.post(f"/catalog/prices/{row_id}/delete", headers=w.bob).status_code == 404
    assert w.client.get(f"/api/v1/prices/{row_id}", headers=w.alice).json()["price_usd"] == 0.5
    # a built-in row is seen by everyone and changed by no one but copied: a 403, not a 404
    builtin_id = w.client.get("/api/v1/prices", params={"builtin": True, "limit": 1}).json()["data"][0]["id"]
    assert (
        w.client.patch(f"/api/v1/prices/{builtin_id}", json={"price_usd": 9}, headers=w.bob).status_code
        == 403
    )
    assert w.client.get(f"/catalog/prices/{row_id}/edit", headers=w.alice).status_code == 200
    assert w.client.delete(f"/api/v1/prices/{row_id}", headers=w.admin).status_code == 204


def _form() -> dict[str, str]:
    return {k: str(v) for k, v in private_quote(price_usd=9, usd_per_gpu_hour=9).items()}


def test_the_price_pages_show_a_private_row_to_its_owner_and_administrators_only(w: World) -> None:
    item = w.item
    for path in ("/catalog/prices", "/catalog/prices?gpu=H100&category=cloud_gpu", "/catalog/gpus/H100-SXM"):
        for headers in (w.alice, w.admin):
            assert item in w.client.get(path, headers=headers).text, (path, headers)
        for headers in (w.bob, ANONYMOUS, w.alice_bench):
            page = w.client.get(path, headers=headers)
            assert page.status_code == 200 and item not in page.text, (path, headers)
    # "mine" lists nothing of anyone else's, and nothing at all without an account
    assert item not in w.client.get("/catalog/prices?mine=1", headers=w.bob).text
    assert item not in w.client.get("/catalog/prices?mine=1").text
    assert item in w.client.get("/catalog/prices?mine=1", headers=w.alice).text


def _run(w: World, headers: dict[str, str], **body: Any) -> Any:
    return w.client.post("/api/v1/cost/run", json={"num_gpus": 8, "gpu_hours": 100, **body}, headers=headers)


def test_default_quotes_are_the_builtin_rows_and_the_callers_own(w: World) -> None:
    def labels(headers: dict[str, str]) -> list[str]:
        r = _run(w, headers, gpu="H100")
        assert r.status_code == 200, r.text
        return [o["label"] for o in r.json()["options"]]

    mine = [label for label in labels(w.alice) if w.item in label]
    assert len(mine) == 1
    for headers in (w.bob, ANONYMOUS, w.alice_bench, w.admin):  # an administrator is quoted like anyone
        assert not any(w.item in label for label in labels(headers))
    assert len(labels(w.alice)) == len(labels(w.bob)) + 1
    tco = {"utilisation": 0.9, "gpu": "H100", "onprem": {"nodes": 2}}
    for route in ("/api/v1/cost/tco", "/api/v1/cost/breakeven"):
        seen = {
            who: w.client.post(route, json=tco, headers=h).text for who, h in (("a", w.alice), ("b", w.bob))
        }
        assert w.item in seen["a"] and w.item not in seen["b"], route
    # the /cost page's breakevens, cheapest first: Alice's $0.50 quote leads hers only
    page = "/cost?gpu=H100-SXM&nodes=2"
    assert w.item in w.client.get(page, headers=w.alice).text
    assert w.item not in w.client.get(page, headers=w.bob).text
    assert w.item not in w.client.get(page).text


def test_naming_another_users_row_is_the_unknown_row_422(w: World) -> None:
    theirs = _run(w, w.bob, options=[{"usd_per_gpu_hour": 2.0}, {"price_row_id": w.row["id"]}])
    missing = _run(w, w.bob, options=[{"usd_per_gpu_hour": 2.0}, {"price_row_id": str(uuid.uuid4())}])
    for r in (theirs, missing, _run(w, ANONYMOUS, options=[{"price_row_id": w.row["id"]}])):
        assert r.status_code == 422, r.text
        (problem,) = r.json()["detail"]
        assert problem["loc"][-1] == "price_row_id" and problem["msg"].startswith("unknown price row")
    assert theirs.json()["detail"][0]["loc"] == missing.json()["detail"][0]["loc"]
    tco = {"utilisation": 0.9, "onprem": {"nodes": 2}, "options": [{"price_row_id": w.row["id"]}]}
    r = w.client.post("/api/v1/cost/tco", json=tco, headers=w.bob)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "price_row_id"
    for headers in (w.alice, w.admin):  # the owner and an administrator may name it
        named = _run(w, headers, options=[{"price_row_id": w.row["id"]}])
        assert named.status_code == 200 and w.item in named.json()["options"][0]["label"]


def _add_expensive_rows(count: int, usd_per_gpu_hour: float = 1000.0, label: str = "dear quote") -> None:
    """`count` fresh on-demand H100 quotes of Alice's at $1,000/GPU-hour (or `usd_per_gpu_hour`): enough to move
    her median."""
    owner = ensure_user(ALICE).id
    with Session(get_engine()) as session:
        for i in range(count):
            values = private_quote(
                item=f"{label} {i}", usd_per_gpu_hour=usd_per_gpu_hour, price_date=date.today()
            )
            session.add(PriceRow(**values, builtin=False, owner_id=owner))
        session.commit()


def test_a_users_rows_move_their_own_headline_only(w: World) -> None:
    before, statement = price_for("H100-SXM", viewer=PUBLIC)
    assert before is not None
    _add_expensive_rows(int(statement.split("median of ")[1].split(" ")[0]) + 2)

    def headline(headers: dict[str, str]) -> float:
        r = _run(w, headers, gpu="H100")
        assert r.status_code == 200, r.text
        return float(r.json()["headline"]["usd_per_gpu_hour"])

    def searched(headers: dict[str, str]) -> float:
        r = w.client.post("/api/v1/layout-search", json=SMALL_SEARCH | {"rank_by": "cost"}, headers=headers)
        assert r.status_code == 200, r.text
        return float(r.json()["usd_per_gpu_hour"])

    assert headline(w.alice) == searched(w.alice) == 1000.0
    for headers in (w.bob, w.admin):
        assert headline(headers) == searched(headers) == before
    assert headline(ANONYMOUS) == headline(w.alice_bench) == before
    sizes = {"sizes": [16, 32], **{k: v for k, v in SMALL_SEARCH.items() if k != "top"}}
    swept = {
        who: w.client.post("/api/v1/layout-search/sizes", json=sizes, headers=h).json()["usd_per_gpu_hour"]
        for who, h in (("alice", w.alice), ("bob", w.bob))
    }
    assert swept == {"alice": 1000.0, "bob": before}
    assert "dear quote" in _builder_basis(w, w.alice)  # the builder's cost per run, at the headline it names
    assert "dear quote" not in _builder_basis(w, w.bob) and _builder_basis(w, w.bob) == _builder_basis(
        w, ANONYMOUS
    )


def _builder_basis(w: World, headers: dict[str, str]) -> str:
    page = w.client.get("/plans/new?" + BuilderState().query(), headers=headers).text
    match = re.search(r'<span class="basis" id="cost-basis">at (.*?)</span>', page, re.S)
    assert match, "no headline price under the cost per run"
    return match.group(1)


def _cost_options(plan: dict[str, Any]) -> list[str]:
    return [row["option"] for row in plan["current"]["result"]["cost_panel"]["rows"]]


def test_a_plan_is_costed_with_its_owners_prices_whoever_saves_it(w: World) -> None:
    admins_own = w.client.post(
        "/api/v1/prices", json=private_quote(item="admin's own quote"), headers=w.admin
    )
    assert admins_own.status_code == 201
    created = w.client.post(
        "/api/v1/plans", json={"name": "alice's run", "scenario": small_scenario()}, headers=w.alice
    )
    assert created.status_code == 201, created.text
    plan = created.json()
    assert any(w.item in label for label in _cost_options(plan))
    shared = w.client.put(
        f"/api/v1/plans/{plan['id']}/sharing", json={"visibility": "users", "users": [BOB]}, headers=w.alice
    )
    assert shared.status_code == 200, shared.text
    # an administrator's revision is costed with Alice's prices: hers in, the administrator's out
    revised = w.client.post(
        f"/api/v1/plans/{plan['id']}/revisions",
        json={"scenario": small_scenario(micro_batch=2)},
        headers=w.admin,
    )
    assert revised.status_code == 201, revised.text
    options = _cost_options(revised.json())
    assert any(w.item in label for label in options)
    assert not any("admin's own quote" in label for label in options)
    assert revised.json()["current"]["price_book_date"] == plan["current"]["price_book_date"]
    # Bob reads the stored figures Alice shared, unchanged by his own prices
    bobs = w.client.post(
        "/api/v1/prices", json=private_quote(item="bob's own quote", usd_per_gpu_hour=0.1), headers=w.bob
    )
    assert bobs.status_code == 201
    read = w.client.get(f"/api/v1/plans/{plan['id']}", headers=w.bob).json()
    assert read["summary"] == revised.json()["summary"] and _cost_options(read) == options
    # Bob's own plan of the same scenario is costed with his prices, not Alice's
    his = w.client.post("/api/v1/plans", json={"name": "bob's", "scenario": small_scenario()}, headers=w.bob)
    assert his.status_code == 201
    assert not any(w.item in label for label in _cost_options(his.json()))
    assert any("bob's own quote" in label for label in _cost_options(his.json()))


def test_the_builder_costs_a_revision_with_the_owners_prices(w: World) -> None:
    created = w.client.post(
        "/api/v1/plans", json={"name": "alice's", "scenario": small_scenario()}, headers=w.alice
    ).json()
    editing = "/plans/new?" + BuilderState().query() + f"&plan={created['id']}"
    assert w.item in w.client.get(editing, headers=w.admin).text  # the administrator edits Alice's plan
    assert w.item not in w.client.get("/plans/new?" + BuilderState().query(), headers=w.admin).text


def _traces_of(w: World, text: str) -> list[str]:
    """What of Alice's private row `text` names: its label, vendor, source, id or its price in words."""
    marks = (w.item, w.row["vendor"], w.row["source"], w.row["id"], "$0.50")
    return [mark for mark in marks if mark in text]


def _saved_in_builder(w: World, headers: dict[str, str], scenario: dict[str, Any]) -> str:
    """The id of a plan saved through the builder's form, with the planner's choices beside its scenario."""
    form = {
        "name": "alice's planned run",
        "notes": "priced for the board",
        "scenario": json.dumps(scenario),
        "calibration_profile": "",
        "builder": json.dumps({"mode": "planner", "rank_by": "cost", "deadline_days": 60.0}),
    }
    saved = w.client.post("/plans", data=form, headers=headers, follow_redirects=False)
    assert saved.status_code == 303, saved.text
    return str(saved.headers["location"].rsplit("/", 1)[1])


def _plan_texts(w: World, plan_id: str, headers: dict[str, str]) -> str:
    """Everything a reader gets of a plan: the API's JSON, both exports and the page."""
    paths = ("/api/v1/plans/{}", "/api/v1/plans/{}/export.json", "/api/v1/plans/{}/export.csv", "/plans/{}")
    pages = [w.client.get(path.format(plan_id), headers=headers) for path in paths]
    assert all(page.status_code == 200 for page in pages), [page.status_code for page in pages]
    return "\n".join(page.text for page in pages)


def test_a_copy_of_a_shared_plan_is_priced_with_its_new_owners_rows(w: World) -> None:
    """Bob's copy of the plan Alice shared with him is evaluated again at his prices, as a save of his own would
    be: nothing of Alice's private row (label, vendor, source, price) comes with it, through the API or the page's
    form; Alice's own copy keeps her row."""
    bobs = w.client.post(
        "/api/v1/prices",
        json=private_quote(
            item="bob's own quote", vendor="BobCloud", source="Bob's quote", usd_per_gpu_hour=0.1
        ),
        headers=w.bob,
    )
    assert bobs.status_code == 201, bobs.text
    pid = _saved_in_builder(w, w.alice, small_scenario())
    source = w.client.get(f"/api/v1/plans/{pid}", headers=w.alice).json()
    assert any(w.item in label for label in _cost_options(source))
    share = {"visibility": "users", "users": [BOB]}
    assert w.client.put(f"/api/v1/plans/{pid}/sharing", json=share, headers=w.alice).status_code == 200
    his = w.client.post(
        "/api/v1/plans", json={"name": "bob's", "scenario": source["current"]["scenario"]}, headers=w.bob
    ).json()

    by_api = w.client.post(f"/api/v1/plans/{pid}/duplicate", headers=w.bob)
    assert by_api.status_code == 201, by_api.text
    by_page = w.client.post(f"/plans/{pid}/duplicate", headers=w.bob, follow_redirects=False)
    assert by_page.status_code == 303, by_page.text
    page_copy_id = by_page.headers["location"].rsplit("/", 1)[1]
    for copy_id in (by_api.json()["id"], page_copy_id):
        copy = w.client.get(f"/api/v1/plans/{copy_id}", headers=w.bob).json()
        assert (
            copy["owner"] == BOB
            and copy["visibility"] == "private"
            and copy["name"] == "Copy of alice's planned run"
        )
        assert _traces_of(w, _plan_texts(w, copy_id, w.bob)) == []
        current, source_current = copy["current"], source["current"]
        assert current["result"]["cost_panel"]["rows"] == his["current"]["result"]["cost_panel"]["rows"]
        assert any("bob's own quote" in label for label in _cost_options(copy))
        assert current["result"]["summary"] == his["current"]["result"]["summary"]
        assert current["price_book_date"] == his["current"]["price_book_date"]
        # the inputs, the builder's choices, the notes and the calibration are the source's
        for key in ("scenario", "builder_choices", "notes", "calibration_profile"):
            assert current[key] == source_current[key], key
        assert current["builder_choices"]["rank_by"] == "cost"

    # Alice's copy of her own plan is priced with her rows, as the plan is
    own = w.client.post(f"/api/v1/plans/{pid}/duplicate", json={"name": "mine again"}, headers=w.alice)
    assert own.status_code == 201, own.text
    assert _cost_options(own.json()) == _cost_options(source)
    assert own.json()["current"]["result"]["summary"] == source["current"]["result"]["summary"]
    assert own.json()["current"]["price_book_date"] == source["current"]["price_book_date"]


def test_a_reader_of_a_shared_plan_gets_no_handle_on_its_owners_rows(w: World) -> None:
    """Bob reads the figures Alice shared, priced by her, but no id of her row: the plan's JSON, exports, page and
    the compare page name none and offer him no revision; the scenario he exports and saves is priced with his
    rows; naming her row's id is the unknown-row 422, as for an id that does not exist."""
    pid = _saved_in_builder(w, w.alice, small_scenario())
    share = {"visibility": "users", "users": [BOB]}
    assert w.client.put(f"/api/v1/plans/{pid}/sharing", json=share, headers=w.alice).status_code == 200
    read = _plan_texts(w, pid, w.bob)
    assert w.item in read and w.row["id"] not in read  # her figures, none of her ids
    page = w.client.get(f"/plans/{pid}", headers=w.bob).text
    assert "Edit in builder (new revision)" not in page and f"plan={pid}" not in page
    # he may open its inputs in the builder, as a plan of his own (no plan= to revise)
    opened = re.search(r'<a class="button-link" id="open-in-builder" href="/plans/new\?([^"]+)"', page)
    assert opened and "model=" in opened.group(1)
    built = w.client.get(f"/plans/new?{opened.group(1).replace('&amp;', '&')}", headers=w.bob | HX)
    assert built.status_code == 200 and w.row["id"] not in built.text
    his = w.client.post("/api/v1/plans", json={"name": "his", "scenario": small_scenario()}, headers=w.bob)
    compared = w.client.get(f"/plans/compare?ids={pid}&ids={his.json()['id']}", headers=w.bob)
    assert compared.status_code == 200 and w.row["id"] not in compared.text

    exported = w.client.get(f"/api/v1/plans/{pid}/export.json", headers=w.bob).json()
    again = w.client.post(
        "/api/v1/plans", json={"name": "from her export", "scenario": exported["scenario"]}, headers=w.bob
    )
    assert again.status_code == 201, again.text
    assert _traces_of(w, again.text) == []
    named = _run(w, w.bob, options=[{"price_row_id": w.row["id"]}])
    missing = _run(w, w.bob, options=[{"price_row_id": str(uuid.uuid4())}])
    for r in (named, missing):
        assert r.status_code == 422, r.text
        (problem,) = r.json()["detail"]
        assert problem["loc"][-1] == "price_row_id" and problem["msg"].startswith("unknown price row")


def _sizing_price(w: World, url: str, headers: dict[str, str]) -> str:
    """The $/GPU-hour the builder's deferred sizing panel at `url` costs every size at, as the page writes it."""
    r = w.client.get(url, headers=headers | HX)
    assert r.status_code == 200, r.text
    match = re.search(r"at ([\d.,]+) USD per GPU-hour \((.*?)\)</caption>", r.text, re.S)
    assert match, "no price under the size table"
    return match.group(1)


def test_the_builders_sizing_panel_prices_a_revision_as_its_results(w: World) -> None:
    public, statement = price_for("H100-SXM", viewer=PUBLIC)
    assert public is not None and public != 0.5
    _add_expensive_rows(int(statement.split("median of ")[1].split(" ")[0]) + 2, 0.5, "cheap quote")
    plan = w.client.post(
        "/api/v1/plans", json={"name": "alice's", "scenario": small_scenario()}, headers=w.alice
    ).json()
    state = BuilderState(deadline_days=60.0).query()
    # the administrator revises Alice's plan: the results and the sizing panel they load both at her $0.50
    page = w.client.get(f"/plans/new?{state}&plan={plan['id']}", headers=w.admin | HX).text
    basis = re.search(r'<span class="basis" id="cost-basis">at \$([\d.,]+)/GPU-hour', page)
    assert basis and float(basis.group(1)) == 0.5, page[:2000]
    panel = re.search(r'hx-get="(/plans/new/sizes\?[^"]*)"', page)
    assert panel and f"plan={plan['id']}" in panel.group(1)
    sizes_url = html.unescape(panel.group(1))
    assert float(_sizing_price(w, sizes_url, w.admin)) == 0.5
    # a new plan, and Bob naming Alice's plan (which he may not read, then may read but not change): each at
    # their own prices, none of Alice's
    assert float(_sizing_price(w, f"/plans/new/sizes?{state}", w.admin)) == public
    for shared in (False, True):
        if shared:
            share = {"visibility": "users", "users": [BOB]}
            assert w.client.put(f"/api/v1/plans/{plan['id']}/sharing", json=share, headers=w.alice).is_success
            assert w.client.get(f"/api/v1/plans/{plan['id']}", headers=w.bob).status_code == 200
        assert float(_sizing_price(w, sizes_url, w.bob)) == public
        assert float(_sizing_price(w, sizes_url, ANONYMOUS)) == public
    assert float(_sizing_price(w, f"/plans/new/sizes?{state}", w.alice)) == 0.5


def test_a_users_network_rows_price_their_own_bom_only(w: World) -> None:
    switch = {
        "category": "onprem_network",
        "item": "64-port 400G switch (Alice's negotiated price)",
        "unit": "switch",
        "price_usd": 20_000,
        "price_date": date.today().isoformat(),
        "source": "quote N-1",
        "includes": "switch only",
    }
    assert w.client.post("/api/v1/prices", json=switch, headers=w.alice).status_code == 201
    body = {"nodes": 128, "fabric": "ib-ndr-8x400"}

    def switch_usd(headers: dict[str, str]) -> float:
        r = w.client.post("/api/v1/network/bom", json=body, headers=headers)
        assert r.status_code == 200, r.text
        return float(r.json()["cost"]["prices"]["switch_usd"])

    assert switch_usd(w.alice) == 20_000
    assert switch_usd(w.bob) == switch_usd(ANONYMOUS) == switch_usd(w.admin) == 36_000
