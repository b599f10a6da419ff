"""Plan ownership and sharing on both databases, through the real app from a remote address: private by
default, shared read-only with everyone or with named users, revoked, owner-only writes, the admin override,
filtered lists and the HTML pages."""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.db import get_engine
from app.models.plans import Plan, PlanInvite, PlanRevision, PlanShare
from app.schemas.plans import PlanCreate
from app.services import plans as plan_service
from app.services.csv_safe import safe_cell, safe_row
from app.services.plan_access import NoAccountError, PlanActor, may_change, may_read, readable_clause
from tests.auth_support import PASSWORD, bearer, ensure_user, issue_token, login, unthrottled_client
from tests.plans_support import small_scenario

OWNER, OTHER, THIRD, ADMIN = (
    "owner@example.com",
    "other@example.com",
    "third@example.com",
    "admin@example.com",
)


@dataclass
class People:
    client: TestClient
    owner: dict[str, str]
    other: dict[str, str]
    third_reader: dict[str, str]  # plans:read only
    admin: dict[str, str]


@pytest.fixture
def people(db_url: str) -> People:
    client = unthrottled_client()
    return People(
        client=client,
        owner=bearer(issue_token(OWNER, ["plans:write"], is_admin=False)),
        other=bearer(issue_token(OTHER, ["plans:write"], is_admin=False)),
        third_reader=bearer(issue_token(THIRD, ["plans:read"], is_admin=False)),
        admin=bearer(issue_token(ADMIN, ["admin"], is_admin=True)),
    )


def _create(p: People, name: str = "owned plan", who: dict[str, str] | None = None) -> dict[str, Any]:
    r = p.client.post(
        "/api/v1/plans", json={"name": name, "scenario": small_scenario()}, headers=who or p.owner
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


def _share(p: People, pid: str, visibility: str, users: list[str] | None = None, who: Any = None) -> Any:
    return p.client.put(
        f"/api/v1/plans/{pid}/sharing",
        json={"visibility": visibility, "users": users or []},
        headers=who or p.owner,
    )


def _reads(p: People, pid: str, who: dict[str, str]) -> dict[str, int]:
    c = p.client
    return {
        "get": c.get(f"/api/v1/plans/{pid}", headers=who).status_code,
        "revisions": c.get(f"/api/v1/plans/{pid}/revisions", headers=who).status_code,
        "revision": c.get(f"/api/v1/plans/{pid}/revisions/1", headers=who).status_code,
        "csv": c.get(f"/api/v1/plans/{pid}/export.csv", headers=who).status_code,
        "json": c.get(f"/api/v1/plans/{pid}/export.json", headers=who).status_code,
        "page": c.get(f"/plans/{pid}", headers=who).status_code,
    }


def _listed(p: People, who: dict[str, str], owner: str = "all") -> set[str]:
    r = p.client.get(f"/api/v1/plans?owner={owner}", headers=who)
    assert r.status_code == 200, r.text
    return {row["id"] for row in r.json()["data"]}


def test_a_plan_is_private_to_its_owner_by_default(people: People) -> None:
    p = people
    plan = _create(p)
    pid = plan["id"]
    assert plan["owner"] == OWNER and plan["visibility"] == "private"
    assert plan["shared_with"] == [] and plan["may_change"] is True
    assert set(_reads(p, pid, p.owner).values()) == {200}

    # another user: every read and every write is a 404, as for a plan that does not exist
    assert set(_reads(p, pid, p.other).values()) == {404}
    c = p.client
    mine = _create(p, "other's own", who=p.other)
    assert c.get(f"/api/v1/plans/compare?ids={mine['id']}&ids={pid}", headers=p.other).status_code == 404
    assert c.post(f"/api/v1/plans/{pid}/duplicate", headers=p.other).status_code == 404
    assert c.put(f"/api/v1/plans/{pid}", json={"name": "x"}, headers=p.other).status_code == 404
    assert c.post(f"/api/v1/plans/{pid}/revisions", json={"name": "x"}, headers=p.other).status_code == 404
    assert _share(p, pid, "everyone", who=p.other).status_code == 404
    assert c.delete(f"/api/v1/plans/{pid}", headers=p.other).status_code == 404
    missing = c.get(f"/api/v1/plans/{uuid.uuid4()}", headers=p.other)
    hidden = c.get(f"/api/v1/plans/{pid}", headers=p.other)
    assert hidden.json().keys() == missing.json().keys()  # the same shape as a plan that does not exist

    assert pid not in _listed(p, p.other) and mine["id"] in _listed(p, p.other)
    assert pid in _listed(p, p.owner, "mine") and mine["id"] not in _listed(p, p.owner)
    assert c.get(f"/api/v1/plans/{pid}", headers=p.owner).json()["latest_revision"] == 1  # nothing changed


def test_shared_with_everyone_is_read_only_then_revoked(people: People) -> None:
    p, c = people, people.client
    pid = _create(p, "for everyone")["id"]
    r = _share(p, pid, "everyone")
    assert r.status_code == 200, r.text
    assert r.json() == {"plan_id": pid, "owner": OWNER, "visibility": "everyone", "shared_with": []}

    for reader in (p.other, p.third_reader):
        assert set(_reads(p, pid, reader).values()) == {200}
    seen = c.get(f"/api/v1/plans/{pid}", headers=p.other).json()
    assert seen["may_change"] is False and seen["shared_with"] is None and seen["owner"] == OWNER

    # reading is not changing: 403 with the reason, and the plan is unchanged
    for response in (
        c.put(f"/api/v1/plans/{pid}", json={"name": "taken"}, headers=p.other),
        c.post(f"/api/v1/plans/{pid}/revisions", json={"notes": "x"}, headers=p.other),
        c.delete(f"/api/v1/plans/{pid}", headers=p.other),
        _share(p, pid, "private", who=p.other),
        c.get(f"/api/v1/plans/{pid}/sharing", headers=p.other),
    ):
        assert response.status_code == 403, response.text
        assert "read-only" in response.json()["detail"] and "owner" in response.json()["detail"]
    assert c.put(f"/api/v1/plans/{pid}", json={"name": "x"}, headers=p.third_reader).status_code == 403
    assert c.get(f"/api/v1/plans/{pid}", headers=p.owner).json()["name"] == "for everyone"

    # a reader may take a copy of their own, private to them
    copy = c.post(f"/api/v1/plans/{pid}/duplicate", headers=p.other)
    assert copy.status_code == 201, copy.text
    assert copy.json()["owner"] == OTHER and copy.json()["visibility"] == "private"
    assert copy.json()["name"] == "Copy of for everyone" and copy.json()["may_change"] is True
    assert c.get(f"/api/v1/plans/{copy.json()['id']}", headers=p.owner).status_code == 404

    assert pid in _listed(p, p.other, "shared") and pid not in _listed(p, p.other, "mine")
    assert copy.json()["id"] in _listed(p, p.other, "mine")
    assert pid in _listed(p, p.third_reader)

    assert _share(p, pid, "private").status_code == 200
    assert set(_reads(p, pid, p.other).values()) == {404}
    assert pid not in _listed(p, p.other)


def test_a_copy_whose_inputs_no_longer_evaluate_is_a_422_naming_the_field(people: People) -> None:
    """A duplicate is a new save by the reader, evaluated at their prices: a plan whose stored inputs no longer
    evaluate (here its model has left the catalog) is refused on the field, through the API and the page's form,
    and no copy is saved, rather than one carrying the owner's stored figures."""
    p, c = people, people.client
    pid = _create(p, "old catalog")["id"]
    assert _share(p, pid, "everyone").status_code == 200
    with Session(get_engine()) as session:
        revision = session.exec(select(PlanRevision).where(PlanRevision.plan_id == uuid.UUID(pid))).one()
        revision.scenario = {**revision.scenario, "model": "retired-model-7b"}
        session.add(revision)
        session.commit()
    mine = _listed(p, p.other, "mine")
    r = c.post(f"/api/v1/plans/{pid}/duplicate", headers=p.other)
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["loc"] == ["body", "scenario", "model"]
    assert (
        problem["msg"].startswith("the copied plan's inputs no longer evaluate")
        and "retired-model-7b" in problem["msg"]
    )
    page = c.post(f"/plans/{pid}/duplicate", headers=p.other, follow_redirects=False)
    assert page.status_code == 422 and "scenario.model" in page.text and "retired-model-7b" in page.text
    assert _listed(p, p.other, "mine") == mine
    assert c.get(f"/api/v1/plans/{pid}", headers=p.owner).json()["latest_revision"] == 1


def test_shared_with_named_users(people: People) -> None:
    p, c = people, people.client
    pid = _create(p, "for two")["id"]
    r = _share(p, pid, "users", [" Other@Example.com ", OTHER, OWNER])
    assert r.status_code == 200, r.text
    assert r.json()["visibility"] == "users" and r.json()["shared_with"] == [
        OTHER
    ]  # owner and repeats dropped
    assert c.get(f"/api/v1/plans/{pid}", headers=p.owner).json()["shared_with"] == [OTHER]
    assert set(_reads(p, pid, p.other).values()) == {200}
    assert set(_reads(p, pid, p.third_reader).values()) == {404}
    assert pid in _listed(p, p.other, "shared") and pid not in _listed(p, p.third_reader)

    # a second share replaces the first
    assert _share(p, pid, "users", [THIRD]).json()["shared_with"] == [THIRD]
    assert set(_reads(p, pid, p.other).values()) == {404}
    assert set(_reads(p, pid, p.third_reader).values()) == {200}


def test_an_email_without_an_account_gets_the_same_answer_and_reads_once_it_has_one(people: People) -> None:
    p, c = people, people.client
    pid = _create(p, "for a newcomer")["id"]
    newcomer = f"new-{uuid.uuid4().hex[:8]}@example.com"
    # an address with an account and one without are answered alike: sharing tells nobody who has an account
    known = _share(p, pid, "users", [THIRD])
    unknown = _share(p, pid, "users", [f" {newcomer.upper()} ", newcomer])
    assert known.status_code == unknown.status_code == 200, unknown.text
    assert set(known.json()) == set(unknown.json())
    assert unknown.json()["shared_with"] == [newcomer]
    assert c.get(f"/api/v1/plans/{pid}/sharing", headers=p.owner).json()["shared_with"] == [newcomer]
    assert set(_reads(p, pid, p.third_reader).values()) == {404}  # the replaced share is gone

    # the account is created later (here by an administrator): it reads the plan, and nobody else gained
    created = c.post("/api/v1/users", json={"email": newcomer, "password": PASSWORD}, headers=p.admin)
    assert created.status_code == 201, created.text
    reader = bearer(issue_token(newcomer, ["plans:read"], is_admin=False))
    assert set(_reads(p, pid, reader).values()) == {200}
    assert pid in _listed(p, reader, "shared")
    with Session(get_engine()) as session:
        assert session.exec(select(PlanInvite).where(PlanInvite.plan_id == uuid.UUID(pid))).all() == []
        shares = session.exec(select(PlanShare).where(PlanShare.plan_id == uuid.UUID(pid))).all()
        assert len(shares) == 1
    assert c.get(f"/api/v1/plans/{pid}/sharing", headers=p.owner).json()["shared_with"] == [newcomer]


def test_invitations_are_replaced_and_deleted_with_the_plan(people: People) -> None:
    p, c = people, people.client
    pid = _create(p, "invites")["id"]
    later = f"later-{uuid.uuid4().hex[:8]}@example.com"
    assert _share(p, pid, "users", [OTHER, later]).json()["shared_with"] == sorted([OTHER, later])
    # going private drops the invitation too: an account made afterwards reads nothing
    assert _share(p, pid, "private").json()["shared_with"] == []
    reader = bearer(issue_token(later, ["plans:read"], is_admin=False))
    assert set(_reads(p, pid, reader).values()) == {404}

    gone = f"gone-{uuid.uuid4().hex[:8]}@example.com"
    assert _share(p, pid, "users", [gone]).status_code == 200
    assert c.delete(f"/api/v1/plans/{pid}", headers=p.owner).status_code == 204
    with Session(get_engine()) as session:
        assert session.exec(select(PlanInvite).where(PlanInvite.email == gone)).all() == []


@pytest.mark.parametrize(
    ("body", "loc", "words"),
    [
        (
            {"visibility": "users", "users": [THIRD, "x@@example.com"]},
            ["body", "users", "1"],
            "not a valid e-mail",
        ),
        ({"visibility": "users", "users": ["not-an-address"]}, ["body", "users", "0"], "not a valid e-mail"),
        ({"visibility": "everyone", "users": [OTHER]}, ["body", "users"], "only with visibility 'users'"),
        ({"visibility": "friends"}, ["body", "visibility"], "private"),
        ({"visibility": "users", "users": [OTHER], "extra": 1}, ["body", "extra"], "Extra inputs"),
    ],
)
def test_bad_sharing_is_a_422_naming_the_field(
    people: People, body: dict[str, Any], loc: list[str], words: str
) -> None:
    p = people
    pid = _create(p, "bad sharing")["id"]
    r = p.client.put(f"/api/v1/plans/{pid}/sharing", json=body, headers=p.owner)
    assert r.status_code == 422, r.text
    problems = r.json()["detail"]
    assert any(d["loc"] == loc and words in d["msg"] for d in problems), problems
    assert p.client.get(f"/api/v1/plans/{pid}/sharing", headers=p.owner).json()["visibility"] == "private"


def test_admin_may_change_any_plan_and_legacy_plans_are_admin_only(people: People) -> None:
    p, c = people, people.client
    pid = _create(p, "owner's")["id"]
    seen = c.get(f"/api/v1/plans/{pid}", headers=p.admin).json()
    assert seen["may_change"] is True and seen["shared_with"] == []
    assert pid in _listed(p, p.admin) and pid not in _listed(p, p.admin, "mine")
    r = c.put(f"/api/v1/plans/{pid}", json={"name": "renamed by admin"}, headers=p.admin)
    assert r.status_code == 200 and r.json()["owner"] == OWNER  # ownership stays with the owner
    assert _share(p, pid, "users", [OTHER], who=p.admin).status_code == 200
    assert c.get(f"/api/v1/plans/{pid}", headers=p.other).status_code == 200
    assert c.delete(f"/api/v1/plans/{pid}", headers=p.admin).status_code == 204
    assert c.get(f"/api/v1/plans/{pid}", headers=p.owner).status_code == 404

    with Session(get_engine()) as session:  # saved before plans had owners (owner_id NULL)
        legacy = plan_service.create_plan(
            session,
            PlanCreate.model_validate({"name": "legacy", "scenario": small_scenario()}),
            plan_service.SERVER_ACTOR,
        )
    lid = str(legacy.id)
    assert set(_reads(p, lid, p.owner).values()) == {404}
    got = c.get(f"/api/v1/plans/{lid}", headers=p.admin)
    assert got.status_code == 200 and got.json()["owner"] is None
    assert lid in _listed(p, p.admin) and lid not in _listed(p, p.owner)


def test_a_credential_without_an_account_cannot_own_plans(db_url: str) -> None:
    body = PlanCreate.model_validate({"name": "node's", "scenario": small_scenario()})
    with Session(get_engine()) as session:
        before = len(session.exec(select(Plan)).all())
        with pytest.raises(NoAccountError):
            plan_service.create_plan(session, body, PlanActor(user_id=None, is_admin=False))
        assert len(session.exec(select(Plan)).all()) == before


def test_the_list_filter_matches_the_read_rule(people: People) -> None:
    """The SQL filter of lists (readable_clause) selects exactly the plans may_read allows, for every
    combination of owner and visibility on the real database."""
    p = people
    owner_id = ensure_user(OWNER).id
    other_id = ensure_user(OTHER).id
    third_id = ensure_user(THIRD).id
    ids = {}
    for visibility, users in (("private", []), ("everyone", []), ("users", [OTHER]), ("users", [THIRD])):
        pid = _create(p, f"{visibility} {users}")["id"]
        assert _share(p, pid, visibility, users).status_code == 200
        ids[pid] = (visibility, users)
    actors = [
        PlanActor(owner_id),
        PlanActor(other_id),
        PlanActor(third_id),
        PlanActor(uuid.uuid4()),
        PlanActor(None),
        PlanActor(other_id, is_admin=True),
    ]
    with Session(get_engine()) as session:
        plans = {str(pl.id): pl for pl in session.exec(select(Plan)).all() if str(pl.id) in ids}
        for actor in actors:
            selected = {str(i) for i in session.exec(select(Plan.id).where(readable_clause(actor))).all()}
            expected = set()
            for pid, plan in plans.items():
                named = actor.user_id is not None and (
                    (actor.user_id == other_id and ids[pid][1] == [OTHER])
                    or (actor.user_id == third_id and ids[pid][1] == [THIRD])
                )
                if may_read(plan, actor, named):
                    expected.add(pid)
            assert selected & set(ids) == expected, actor
            assert all(
                may_change(pl, actor) == (actor.is_admin or actor.user_id == owner_id)
                for pl in plans.values()
            )


# ---------------------------------------------------------------------------------------------- HTML


def test_html_pages_show_owner_and_sharing_and_enforce_the_rules(people: People) -> None:
    p, c = people, people.client
    pid = _create(p, "page plan")["id"]
    hidden = c.get(f"/plans/{pid}", headers=p.other)
    assert hidden.status_code == 404 and "page plan" not in hidden.text

    # the owner, signed in with a browser cookie, shares it with everyone through the form
    browser = unthrottled_client()
    csrf = login(browser, OWNER)
    page = browser.get(f"/plans/{pid}")
    assert page.status_code == 200 and f"Owner: {OWNER}" in page.text
    assert f'action="/plans/{pid}/sharing"' in page.text and f'action="/plans/{pid}/delete"' in page.text
    assert "Private: only the owner" in page.text
    no_csrf = browser.post(f"/plans/{pid}/sharing", data={"visibility": "everyone"}, follow_redirects=False)
    assert no_csrf.status_code == 403
    r = browser.post(
        f"/plans/{pid}/sharing",
        data={"visibility": "everyone", "csrf_token": csrf},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == f"/plans/{pid}"
    assert "Shared read-only with everyone" in browser.get(f"/plans/{pid}").text

    # another user sees a read-only page: no edit, delete or sharing controls
    seen = c.get(f"/plans/{pid}", headers=p.other)
    assert seen.status_code == 200 and f"Owner: {OWNER}" in seen.text
    assert f'action="/plans/{pid}/delete"' not in seen.text
    assert f'action="/plans/{pid}/sharing"' not in seen.text
    assert "Edit in builder" not in seen.text and 'id="read-only-note"' in seen.text
    assert "Duplicate as my own copy" in seen.text
    reader = c.get(f"/plans/{pid}", headers=p.third_reader)
    assert reader.status_code == 200 and f'action="/plans/{pid}/duplicate"' not in reader.text
    # the builder does not offer to save a revision of a plan the caller may not change
    builder = c.get(f"/plans/new?plan={pid}", headers=p.other)
    assert f'action="/plans/{pid}/revise"' not in builder.text

    # the state-changing routes refuse like the API
    scenario = json.dumps(small_scenario())
    for url, data in (
        (f"/plans/{pid}/delete", {}),
        (f"/plans/{pid}/sharing", {"visibility": "private"}),
        (f"/plans/{pid}/revise", {"name": "taken", "scenario": scenario}),
    ):
        r = c.post(url, data=data, headers=p.other, follow_redirects=False)
        assert r.status_code == 403, (url, r.status_code)
        assert "read-only" in r.text
    copy = c.post(f"/plans/{pid}/duplicate", headers=p.other, follow_redirects=False)
    assert copy.status_code == 303
    copy_id = copy.headers["location"].rsplit("/", 1)[1]
    assert c.get(f"/api/v1/plans/{copy_id}", headers=p.other).json()["owner"] == OTHER

    # named users through the form; a malformed e-mail is a 422 naming the field
    r = browser.post(
        f"/plans/{pid}/sharing",
        data={"visibility": "users", "users": f"{THIRD}\nnobody@@example.com", "csrf_token": csrf},
    )
    assert r.status_code == 422 and "users.1" in r.text and "nobody@@example.com" in r.text
    r = browser.post(
        f"/plans/{pid}/sharing",
        data={"visibility": "users", "users": THIRD, "csrf_token": csrf},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert f"Shared read-only with named users: {THIRD}" in browser.get(f"/plans/{pid}").text
    assert c.get(f"/plans/{pid}", headers=p.other).status_code == 404
    assert c.post(f"/plans/{pid}/delete", headers=p.other).status_code == 404

    listing = c.get("/plans?owner=shared", headers=p.third_reader)
    assert "page plan" in listing.text and OWNER in listing.text
    mine = c.get("/plans?owner=mine", headers=p.third_reader)
    assert "page plan" not in mine.text
    assert c.get("/plans?owner=everybody", headers=p.third_reader).status_code == 422

    r = browser.post(f"/plans/{pid}/delete", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    assert c.get(f"/api/v1/plans/{pid}", headers=p.owner).status_code == 404


# ---------------------------------------------------------------------------------------------- CSV


def test_plan_csv_escapes_formula_cells(people: People) -> None:
    p = people
    pid = _create(p, '=HYPERLINK("https://example.com","x")')["id"]
    p.client.put(f"/api/v1/plans/{pid}", json={"notes": "@SUM(A1:A9)"}, headers=p.owner)
    body = p.client.get(f"/api/v1/plans/{pid}/export.csv", headers=p.owner).text
    rows = {(r["section"], r["key"]): r["value"] for r in csv.DictReader(io.StringIO(body))}
    assert rows[("plan", "name")] == '\'=HYPERLINK("https://example.com","x")'
    assert rows[("plan", "notes")] == "'@SUM(A1:A9)"
    for value in rows.values():  # numbers stay numbers; no text cell starts a formula
        assert _is_number(value) or not re.match(r"[=+\-@\t\r]", value), value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_safe_cell_rules() -> None:
    assert [safe_cell(v) for v in ("=1+1", "+1", "-1", "@x", "\tx", "\rx")] == [
        "'=1+1",
        "'+1",
        "'-1",
        "'@x",
        "'\tx",
        "'\rx",
    ]
    assert safe_row(["plain", -1.5, 3, None, "a=b", ""]) == ["plain", -1.5, 3, None, "a=b", ""]


def test_an_invitation_cannot_be_taken_by_moving_an_account_to_its_address(people: People) -> None:
    """Only an administrator may move an account to another e-mail (nothing proves the holder owns it), and nobody
    to an address with pending invitations: otherwise any user could take the plans shared with it."""
    from app.auth.users import change_email, find_user

    p, c = people, people.client
    pid = _create(p, "budget for carol")["id"]
    carol = f"carol-{uuid.uuid4().hex[:8]}@example.com"
    assert _share(p, pid, "users", [carol]).status_code == 200
    mallory = f"mallory-{uuid.uuid4().hex[:8]}@example.com"
    ensure_user(mallory)
    browser = unthrottled_client()
    csrf = login(browser, mallory)
    form = {"current_password": PASSWORD, "new_password": PASSWORD, "confirm_password": PASSWORD}
    moved = browser.post("/account/password", data={**form, "email": carol, "csrf_token": csrf})
    assert moved.status_code == 422 and "only an administrator" in moved.text
    page = browser.get("/account/password")
    assert 'readonly aria-describedby="account-email-note"' in page.text
    # the owner saves the sharing again (the form is pre-filled with the invitation): still nobody reads it
    assert _share(p, pid, "users", [carol, THIRD]).status_code == 200
    mallory_reader = bearer(issue_token(mallory, ["plans:read"], is_admin=False))
    assert set(_reads(p, pid, mallory_reader).values()) == {404}
    # a password change that keeps the address is still the user's own
    kept = browser.post(
        "/account/password", data={**form, "email": mallory, "csrf_token": csrf}, follow_redirects=False
    )
    assert kept.status_code == 303, kept.text
    with Session(get_engine()) as session:
        account = find_user(session, mallory)
        assert account is not None
        with pytest.raises(ValueError, match="shared with it by invitation"):
            change_email(session, account, carol, by_admin=True)  # not even an administrator
        assert change_email(session, account, f"Free-{mallory}", by_admin=True).email == f"free-{mallory}"
    assert (
        c.post("/api/v1/users", json={"email": carol, "password": PASSWORD}, headers=p.admin).status_code
        == 201
    )


def test_an_administrator_moves_an_account_to_another_e_mail(people: People) -> None:
    """The way a user's address changes now that the user cannot: PATCH /api/v1/users/{id} and `clusterplan users
    set-email`, under the same rules (not to a taken or an invited address)."""
    p, c = people, people.client
    old = f"mover-{uuid.uuid4().hex[:8]}@example.com"
    created = c.post("/api/v1/users", json={"email": old, "password": PASSWORD}, headers=p.admin)
    assert created.status_code == 201, created.text
    uid = created.json()["id"]
    pid = _create(p, "invited plan")["id"]
    invited = f"invited-{uuid.uuid4().hex[:8]}@example.com"
    assert _share(p, pid, "users", [invited]).status_code == 200
    refused = c.patch(f"/api/v1/users/{uid}", json={"email": invited}, headers=p.admin)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "email"]
    assert c.patch(f"/api/v1/users/{uid}", json={"email": OWNER}, headers=p.admin).status_code == 409
    assert c.patch(f"/api/v1/users/{uid}", json={"email": "x@y.z"}, headers=p.owner).status_code == 403
    new = f"moved-{uuid.uuid4().hex[:8]}@example.com"
    moved = c.patch(f"/api/v1/users/{uid}", json={"email": new.upper()}, headers=p.admin)
    assert moved.status_code == 200 and moved.json()["email"] == new
    browser = unthrottled_client()
    login(browser, new)  # signs in at the new address
