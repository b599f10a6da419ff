"""The principal matrix: EVERY route of the app (the OpenAPI document's and the HTML pages') answered for each
kind of caller, from a non-loopback address.

Callers: anonymous, an expired token, a revoked token, a read-only token (plans:read), another user (not an
admin, every non-admin scope), the owner of the objects (same scopes), and an administrator. The owner
creates one plan, one benchmark job, one API token, one model and one price row; their ids go into the
path parameters. Expectations:
- an expired or revoked token is a 401 on every route, public ones included;
- anonymous is a 401 on anything that needs a credential (public routes are listed in the route walk's
  PUBLIC_ROUTES); a node-token route refuses every user credential;
- a credential lacking the route's scope is a 403 (the read-only token on writes); a route that needs a browser
  session (changing the password) is a 403 for every token;
- another user on the owner's private plan is a 404 (its existence is not revealed); on the owner's token
  a 404; on the owner's price row a 404 too, reading it included, for anonymous callers as well (a user's price
  rows are theirs); on the owner's model a 403 (models are public, so there is nothing to hide);
  they may read the owner's job (every job is visible to plans:read) but cancelling or retrying it is a 403;
- the owner and the administrator succeed (2xx/3xx; 409/422 only where no valid body is prepared).
The scopes a route needs are read from its dependency tree, as in tests/api/test_auth_route_walk.py.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlmodel import Session, select

import app.catalog as catalog
from app.auth.tokens import expand_scopes, hash_token, revoke_token
from app.db import get_engine
from app.models.auth import ApiToken
from app.models.base import utcnow
from tests.api.test_auth_route_walk import OPERATIONS, UNSAFE, requirement_of
from tests.auth_support import bearer, issue_token, unthrottled_client
from tests.plans_support import small_scenario

PRINCIPALS = ("anonymous", "expired", "revoked", "reader", "other", "owner", "admin")
NON_ADMIN = ["plans:write", "benchmarks:run"]  # every scope a non-admin user may hold (app.auth.tokens)
SCOPES_OF: dict[str, frozenset[str]] = {
    "reader": expand_scopes(["plans:read"]),
    "other": expand_scopes(NON_ADMIN),
    "owner": expand_scopes(NON_ADMIN),
    "admin": expand_scopes(["admin"]),
}
EMAILS = {p: f"matrix-{p}@example.com" for p in ("reader", "other", "owner", "admin", "stale")}
PLACEHOLDER = "zz-no-such-thing"


# --------------------------------------------------------------------------------------- what is expected


@dataclass(frozen=True)
class Expect:
    label: str
    accepts: Callable[[int], bool]


def _exactly(*codes: int) -> Expect:
    return Expect(" or ".join(map(str, codes)), lambda s: s in codes)


UNAUTHENTICATED = _exactly(401)
FORBIDDEN = _exactly(403)
HIDDEN = _exactly(404)
REFUSED = _exactly(401, 403)
SUCCESS = Expect("2xx/3xx", lambda s: 200 <= s < 400)
# the route got past authentication and authorisation (a body we did not prepare may still be a 422)
AUTHORISED = Expect("authorised (< 500, not 401/403/404)", lambda s: s < 500 and s not in (401, 403, 404))
AUTHORISED_OR_MISSING = Expect("authorised or 404", lambda s: s < 500 and s not in (401, 403))
PUBLIC = Expect("public (< 500, not 401)", lambda s: s < 500 and s != 401)

# path parameter → the owner's object it names (others get a value that names nothing)
OBJECT_PARAMS = {"plan_id": "plan", "job_id": "job", "token_id": "token", "price_id": "price"}
# routes whose object parameter stays a placeholder: the event stream of a real job would stay open, and
# agent routes take node tokens only
PLACEHOLDER_ROUTES = {r"/api/v1/benchmarks/\{job_id\}/events", r"/api/v1/agent/.*"}


def object_kind(method: str, path: str) -> str | None:
    """Which of the owner's objects the route acts on (None: none, or a placeholder id)."""
    if any(re.fullmatch(p, path) for p in PLACEHOLDER_ROUTES):
        return None
    if path == "/api/v1/models/{name}" and method == "DELETE":
        return "model"
    if path in ("/api/v1/plans/compare", "/plans/compare"):
        return "plan"
    for param, kind in OBJECT_PARAMS.items():
        if "{" + param + "}" in path:
            return kind
    return None


def other_user_on(kind: str, method: str, path: str) -> Expect:
    """What a different, non-admin user gets on the owner's object."""
    if kind == "plan":
        return HIDDEN
    if kind == "token":
        return HIDDEN
    if kind == "job":
        return FORBIDDEN if path.endswith(("/cancel", "/retry")) else SUCCESS
    if kind == "price":
        return HIDDEN  # a user's price row exists for them and administrators only
    return FORBIDDEN  # model: a public row, only its owner or an admin may change it


# Where the app deliberately differs from the general rule, with the reason.
LIVENESS = "liveness probes send no credential and must not depend on the token table (app/hooks/security.py)"
EXCEPTIONS: dict[tuple[str, str, str], tuple[Expect, str]] = {
    ("GET", "/healthz", "expired"): (SUCCESS, LIVENESS),
    ("GET", "/healthz", "revoked"): (SUCCESS, LIVENESS),
    ("GET", "/tokens", "anonymous"): (
        Expect("401 or a redirect to sign in", lambda s: s == 401 or 300 <= s < 400),
        "the tokens page checks its caller itself: a visitor without a session is sent to sign in",
    ),
    ("POST", "/tokens/{token_id}/revoke", "admin"): (
        HIDDEN,
        "the tokens page lists and revokes only the signed-in user's own tokens; admins revoke others' "
        "through DELETE /api/v1/tokens/{id}",
    ),
}


def expected(method: str, path: str, route: APIRoute, principal: str) -> Expect:
    if (method, path, principal) in EXCEPTIONS:
        return EXCEPTIONS[(method, path, principal)][0]
    if principal in ("expired", "revoked"):
        return UNAUTHENTICATED
    requirement = requirement_of(route)
    if not requirement.anything:
        hidden = object_kind(method, path) == "price" and principal in ("anonymous", "reader", "other")
        return HIDDEN if hidden else PUBLIC
    if principal == "anonymous":
        return UNAUTHENTICATED
    if requirement.node:
        return REFUSED
    if requirement.session:
        return FORBIDDEN  # every caller here sends an API token
    if not requirement.scopes <= SCOPES_OF[principal]:
        return FORBIDDEN
    kind = object_kind(method, path)
    if kind is None:
        return AUTHORISED_OR_MISSING if "{" in path else AUTHORISED
    if principal in ("reader", "other"):
        return other_user_on(kind, method, path)
    return SUCCESS if (method, path) in BODIES or method not in UNSAFE else AUTHORISED


# --------------------------------------------------------------------------------------- the world


@dataclass
class World:
    client: TestClient
    headers: dict[str, dict[str, str]]
    objects: dict[str, str] = field(default_factory=dict)
    second_plan: str = ""

    def as_(self, principal: str) -> dict[str, str]:
        return {"Accept": "application/json", **self.headers.get(principal, {})}

    def new_object(self, kind: str) -> str:
        """A fresh object of the owner's (for the cases that change or delete one)."""
        c, owner = self.client, self.as_("owner")
        if kind == "plan":
            r = c.post(
                "/api/v1/plans", json={"name": "matrix plan", "scenario": small_scenario()}, headers=owner
            )
            key = "id"
        elif kind == "job":
            r = c.post("/api/v1/benchmarks", json={"kind": "gemm"}, headers=owner)
            key = "id"
        elif kind == "token":
            r = c.post(
                "/api/v1/tokens", json={"name": "matrix object", "scopes": ["plans:read"]}, headers=owner
            )
            key = "id"
        elif kind == "model":
            name = f"matrix-{uuid.uuid4().hex[:8]}"
            spec = catalog.find_model("Llama-3-8B").to_dict() | {
                "name": name,
                "source": "",
                "family": "custom",
            }
            r = c.post("/api/v1/models", json=spec, headers=owner)
            key = "name"
        else:
            r = c.post("/api/v1/prices", json=_price_body(), headers=owner)
            key = "id"
        assert r.status_code in (201, 202), (kind, r.status_code, r.text[:300])
        return str(r.json()[key])


def _price_body() -> dict[str, Any]:
    return {
        "category": "cloud_gpu",
        "item": f"matrix-{uuid.uuid4().hex[:6]}",
        "vendor": "ExampleCloud",
        "pricing_model": "on-demand",
        "unit": "GPU-hour",
        "price_usd": 2.0,
        "usd_per_gpu_hour": 2.0,
        "gpu_name": "h100",
        "gpus_per_unit": 1,
        "price_date": (utcnow().date() - timedelta(days=3)).isoformat(),
        "source": "matrix quote",
        "includes": "GPU-hour with host share",
    }


def _dead_tokens() -> dict[str, str]:
    """An expired and a revoked token of an existing, active user (a day past: no clock window)."""
    expired = issue_token(EMAILS["stale"], ["plans:write"], is_admin=False)
    revoked = issue_token(EMAILS["stale"], ["plans:write"], is_admin=False)
    with Session(get_engine()) as session:
        row = session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(expired))).one()
        row.expires_at = utcnow() - timedelta(days=1)
        session.add(row)
        session.commit()
        revoke_token(
            session, session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(revoked))).one()
        )
    return {"expired": expired, "revoked": revoked}


@pytest.fixture(scope="module")
def world(sqlite_app_url: str) -> World:
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    tokens = {
        "reader": issue_token(EMAILS["reader"], ["plans:read"], is_admin=False),
        "other": issue_token(EMAILS["other"], NON_ADMIN, is_admin=False),
        "owner": issue_token(EMAILS["owner"], NON_ADMIN, is_admin=False),
        "admin": issue_token(EMAILS["admin"], ["admin"], is_admin=True),
        **_dead_tokens(),
    }
    w = World(
        client=unthrottled_client(),
        headers={p: bearer(t) for p, t in tokens.items()},
    )
    for kind in ("plan", "job", "token", "model", "price"):
        w.objects[kind] = w.new_object(kind)
    w.second_plan = w.new_object("plan")
    return w


# --------------------------------------------------------------------------------------- requests


def _plan_form() -> dict[str, str]:
    return {"name": "matrix form plan", "scenario": json.dumps(small_scenario())}


# (method, path) → ("json" | "form", body): valid requests, so an answer is about who asks, not what
BODIES: dict[tuple[str, str], tuple[str, Callable[[], Any]]] = {
    ("POST", "/api/v1/plans"): ("json", lambda: {"name": "matrix", "scenario": small_scenario()}),
    ("PUT", "/api/v1/plans/{plan_id}"): ("json", lambda: {"notes": "matrix"}),
    ("POST", "/api/v1/plans/{plan_id}/revisions"): ("json", lambda: {"notes": "matrix"}),
    ("PUT", "/api/v1/plans/{plan_id}/sharing"): ("json", lambda: {"visibility": "private", "users": []}),
    ("POST", "/api/v1/plans/{plan_id}/duplicate"): ("json", lambda: {}),
    ("DELETE", "/api/v1/plans/{plan_id}"): ("json", lambda: None),
    ("POST", "/plans"): ("form", _plan_form),
    ("POST", "/plans/{plan_id}/revise"): ("form", _plan_form),
    ("POST", "/plans/{plan_id}/sharing"): ("form", lambda: {"visibility": "private"}),
    ("POST", "/plans/{plan_id}/duplicate"): ("form", lambda: {}),
    ("POST", "/plans/{plan_id}/delete"): ("form", lambda: {}),
    ("POST", "/api/v1/benchmarks"): ("json", lambda: {"kind": "gemm"}),
    ("POST", "/api/v1/benchmarks/{job_id}/cancel"): ("json", lambda: None),
    ("POST", "/benchmarks/jobs/{job_id}/cancel"): ("form", lambda: {}),
    ("POST", "/api/v1/tokens"): ("json", lambda: {"name": "matrix", "scopes": ["plans:read"]}),
    ("DELETE", "/api/v1/tokens/{token_id}"): ("json", lambda: None),
    ("POST", "/tokens/{token_id}/revoke"): ("form", lambda: {}),
    ("POST", "/api/v1/prices"): ("json", _price_body),
    ("PATCH", "/api/v1/prices/{price_id}"): ("json", lambda: {"source": "matrix edit"}),
    ("DELETE", "/api/v1/prices/{price_id}"): ("json", lambda: None),
    ("POST", "/catalog/prices/{price_id}/delete"): ("form", lambda: {}),
    ("DELETE", "/api/v1/models/{name}"): ("json", lambda: None),
}


def _url(world: World, method: str, path: str, route: APIRoute, principal: str) -> str:
    kind = object_kind(method, path)
    fresh = method in UNSAFE and principal in ("owner", "admin")  # a change must not spoil later cases
    ident = (world.new_object(kind) if fresh else world.objects[kind]) if kind else None
    if path in ("/api/v1/plans/compare", "/plans/compare"):
        return f"{path}?ids={ident}&ids={world.second_plan}"
    types = {p.name: p.field_info.annotation for p in route.dependant.path_params}

    def fill(match: re.Match[str]) -> str:
        name = match.group(1).split(":")[0]
        if ident is not None and (OBJECT_PARAMS.get(name) == kind or (name == "name" and kind == "model")):
            return ident
        annotation = types.get(name)
        if annotation is int:
            return "1"
        if annotation is uuid.UUID or name.endswith("_id"):
            return str(uuid.uuid4())
        return PLACEHOLDER

    return re.sub(r"\{([^}]+)\}", fill, path)


def _send(world: World, method: str, path: str, url: str, principal: str) -> Any:
    headers = world.as_(principal)
    kind, make = BODIES.get((method, path), ("json", lambda: {} if method in UNSAFE - {"DELETE"} else None))
    body = make()
    if kind == "form":
        return world.client.request(method, url, data=body, headers=headers, follow_redirects=False)
    if body is None:
        return world.client.request(method, url, headers=headers, follow_redirects=False)
    return world.client.request(method, url, json=body, headers=headers, follow_redirects=False)


CASES = [(m, p, r, who) for m, p, r in OPERATIONS for who in PRINCIPALS]


@pytest.mark.parametrize(
    ("method", "path", "route", "principal"), CASES, ids=[f"{m} {p} as {who}" for m, p, _, who in CASES]
)
def test_principal_matrix(world: World, method: str, path: str, route: APIRoute, principal: str) -> None:
    want = expected(method, path, route, principal)
    url = _url(world, method, path, route, principal)
    got = _send(world, method, path, url, principal)
    assert want.accepts(got.status_code), (
        f"{method} {url} as {principal}: {got.status_code}, expected {want.label}: {got.text[:300]}"
    )


# --------------------------------------------------------------------------------------- the matrix itself


def test_the_matrix_covers_the_openapi_document(world: World) -> None:
    """Every operation of the OpenAPI document is a row of the matrix (and so is every HTML route)."""
    document = world.client.app.openapi()  # type: ignore[attr-defined]
    listed = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops if m != "parameters"}
    walked = {(m, p) for m, p, _ in OPERATIONS}
    assert listed - {("HEAD", p) for _, p in listed} <= walked
    html_writes = {(m, p) for m, p, _ in OPERATIONS if m in UNSAFE and not p.startswith("/api/")}
    assert {("POST", "/plans/{plan_id}/sharing"), ("POST", "/plans/{plan_id}/delete")} <= html_writes


def test_the_owner_objects_are_private_to_the_owner(world: World) -> None:
    """The objects the matrix substitutes really are the owner's, so a 404 for others means hidden."""
    c = world.client
    plan = c.get(f"/api/v1/plans/{world.objects['plan']}", headers=world.as_("owner")).json()
    assert plan["owner"] == EMAILS["owner"] and plan["visibility"] == "private"
    token = c.get(f"/api/v1/tokens/{world.objects['token']}", headers=world.as_("owner"))
    assert token.status_code == 200
    assert c.get(f"/api/v1/models/{world.objects['model']}").json()["builtin"] is False


def test_every_exception_names_a_route() -> None:
    walked = {(m, p) for m, p, _ in OPERATIONS}
    for (method, path, _who), (_expect, reason) in EXCEPTIONS.items():
        assert (method, path) in walked and reason
