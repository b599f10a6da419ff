"""Walk EVERY route of the app and check the authentication it requires.

For each route and method, the scopes it needs are read from its dependency tree (`require_scope`,
`require_user`, node-token dependencies from app.auth.nodes). Then, from a non-loopback address:
- anonymous → 401 (or 403) for every route that needs anything;
- a token lacking the scope → 403;
- a token with exactly the scope → neither 401 nor 403;
- a route that needs a browser session (`require_browser_session`: changing the password) → 403 for a token of
  every scope, administrators' included.
A route that needs nothing must be listed in PUBLIC_ROUTES below, with the reason; every unsafe method
(POST/PUT/PATCH/DELETE) that is not listed there must require a credential. New routes are picked up
automatically, so a route added without `require_scope` fails this test until someone decides.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from app.auth.tokens import SCOPES, expand_scopes
from tests.auth_support import app_with, bearer, issue_token, unthrottled_client

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}

# (method, path regex) → why it is public. Reads of catalog data and pure calculations may stay public.
PUBLIC_ROUTES: dict[tuple[str, str], str] = {
    ("GET", r"/healthz"): "liveness probe",
    ("GET", r"/favicon\.ico"): "site icon",
    ("GET", r"/docs"): "API documentation page (the OpenAPI document it reads is public too)",
    ("GET", r"/redoc"): "API reference page (ReDoc; the OpenAPI document it reads is public too)",
    ("GET", r"/"): "home page",
    ("GET", r"/login"): "sign-in form",
    ("GET", r"/login/link"): "one-time sign-in link: the single-use token in the link is the credential",
    ("POST", r"/login"): "sign-in (rate limited, Origin-checked)",
    ("POST", r"/logout"): "sign-out only clears the caller's own cookies",
    ("GET", r"/tokens"): "checks itself: redirects remote visitors to /login",
    ("POST", r"/api/v1/auth/login"): "sign-in (rate limited, Origin-checked)",
    ("POST", r"/api/v1/auth/logout"): "sign-out only clears the caller's own cookies",
    ("GET", r"/api/v1/auth/me"): "says who the caller is, including nobody",
    ("GET", r"/api/v1/(gpus|models|interconnects|fabrics|prices)(/[^/]+)?"): "public catalog data",
    ("GET", r"/catalog(/.*)?"): "public catalog pages",
    (
        "GET",
        r"/plans/new(/[a-z-]+)?",
    ): "the plan builder form and its live results (saving needs plans:write)",
    ("GET", r"/(network|cost)(/[a-z-]+)?"): "calculator pages and their live results (pure calculations)",
    ("GET", r"/api/v1/cost/prices"): "public price-book rows (catalog data)",
    ("GET", r"/api/v1/goodput/presets"): "public reference presets",
    ("GET", r"/api/v1/accuracy/scorecard"): "public validation figures (as the catalog's accuracy page)",
    ("GET", r"/api/v1/network/fabrics"): "public fabric presets (catalog data)",
}
# Pure calculations: POST only because the inputs are a JSON document; they read the catalog and write
# nothing, so they stay public like catalog reads (the API rate limit bounds their cost).
CALCULATIONS = (
    r"/api/v1/estimate",
    r"/api/v1/cost/(run|tco|breakeven|epoch|spot)",
    r"/api/v1/goodput",
    r"/api/v1/storage",
    r"/api/v1/network/(collective|scaling|bom)",
)
PUBLIC_ROUTES.update({("POST", pattern): "pure calculation, writes nothing" for pattern in CALCULATIONS})


@dataclass(frozen=True)
class Requirement:
    scopes: frozenset[str]
    user: bool
    node: bool
    session: bool = False

    @property
    def anything(self) -> bool:
        return bool(self.scopes) or self.user or self.node


def _calls(dependant) -> Iterator[object]:  # type: ignore[no-untyped-def]
    for sub in dependant.dependencies:
        yield sub.call
        yield from _calls(sub)


def requirement_of(route: APIRoute) -> Requirement:
    scopes: set[str] = set()
    user = node = session = False
    for call in _calls(route.dependant):
        scope = getattr(call, "required_scope", None)
        if scope:
            scopes.add(scope)
        user = user or bool(getattr(call, "requires_user", False))
        session = session or bool(getattr(call, "requires_session", False))
        node = node or getattr(call, "__module__", "") == "app.auth.nodes"
    return Requirement(frozenset(scopes), user, node, session)


def public_reason(method: str, path: str) -> str | None:
    for (m, pattern), reason in PUBLIC_ROUTES.items():
        if m == method and re.fullmatch(pattern, path):
            return reason
    return None


def concrete_path(route: APIRoute, path: str) -> str:
    """Fill path parameters with values of the right type (ids that exist nowhere)."""
    types = {p.name: p.field_info.annotation for p in route.dependant.path_params}

    def fill(match: re.Match[str]) -> str:
        name = match.group(1).split(":")[0]
        kind = types.get(name)
        if kind is int:
            return "1"
        if kind is float:
            return "1.0"
        if kind is uuid.UUID or name.endswith("_id") or name == "id":
            return str(uuid.uuid4())
        return "zz-no-such-thing"

    return re.sub(r"\{([^}]+)\}", fill, path)


def all_operations() -> list[tuple[str, str, APIRoute]]:
    app = app_with()
    operations = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute):
            continue  # openapi.json, /docs and /static are plain Starlette routes: public by nature
        for method in sorted(context.methods or []):
            if method == "HEAD":
                continue
            operations.append((method, str(context.path), route))
    return operations


OPERATIONS = all_operations()


def test_walk_found_the_api() -> None:
    paths = {path for _, path, _ in OPERATIONS}
    assert {"/api/v1/tokens", "/api/v1/users", "/api/v1/auth/login", "/metrics"} <= paths
    assert len(OPERATIONS) >= 15


def test_every_route_declares_its_authentication() -> None:
    problems = []
    for method, path, route in OPERATIONS:
        requirement = requirement_of(route)
        reason = public_reason(method, path)
        if requirement.anything and reason:
            problems.append(f"{method} {path}: listed as public ({reason}) but requires {requirement}")
        if not requirement.anything and not reason:
            problems.append(
                f"{method} {path}: no require_scope/require_user dependency and not in PUBLIC_ROUTES"
                + (" (an unsafe method!)" if method in UNSAFE else "")
            )
    assert not problems, "\n".join(problems)


def _scopes_without(scope: str) -> list[str]:
    """The largest token scope set that does not grant `scope`."""
    return [s for s in SCOPES if scope not in expand_scopes([s])]


@pytest.fixture(scope="module")
def tokens(sqlite_app_url: str) -> dict[str, str]:
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    made = {scope: issue_token("walker@example.com", [scope]) for scope in SCOPES}
    for scope in SCOPES:
        without = _scopes_without(scope)
        if without:
            made["not " + scope] = issue_token("walker@example.com", without)
    return made


@pytest.fixture(scope="module")
def walker(tokens: dict[str, str]):  # type: ignore[no-untyped-def]
    """One remote client for the whole walk (rate limits off: the walk makes hundreds of calls)."""
    return unthrottled_client()


def _call(client, method: str, url: str, headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    headers = {"Accept": "application/json", **(headers or {})}
    if method in UNSAFE and method != "DELETE":
        return client.request(method, url, json={}, headers=headers, follow_redirects=False)
    return client.request(method, url, headers=headers, follow_redirects=False)


@pytest.mark.parametrize(("method", "path", "route"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_route_enforces_its_requirement(
    tokens: dict[str, str], walker, sqlite_app_url: str, method: str, path: str, route: APIRoute
) -> None:
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    requirement = requirement_of(route)
    if not requirement.anything:
        assert public_reason(method, path), f"{method} {path} needs no credential and is not listed as public"
        return
    client = walker
    url = concrete_path(route, path)

    anonymous = _call(client, method, url)
    assert anonymous.status_code in (401, 403), (method, path, anonymous.status_code, anonymous.text[:200])

    if requirement.node:
        user_token = _call(client, method, url, bearer(tokens["admin"]))
        assert user_token.status_code in (401, 403), f"{method} {path} accepted a user token for a node route"
        return

    if requirement.session:
        for scope in SCOPES:
            token = _call(client, method, url, bearer(tokens[scope]))
            assert token.status_code == 403, (
                f"{method} {path} accepted a {scope} token for a browser-session route"
            )
        return

    for scope in requirement.scopes:
        wrong_key = "not " + scope
        if wrong_key in tokens:
            wrong = _call(client, method, url, bearer(tokens[wrong_key]))
            assert wrong.status_code == 403, (method, path, wrong_key, wrong.status_code, wrong.text[:200])

    right_scopes = sorted(requirement.scopes) or ["plans:read"]
    right_token = (
        tokens[right_scopes[0]] if len(right_scopes) == 1 else issue_token("walker@example.com", right_scopes)
    )
    right = _call(client, method, url, bearer(right_token))
    assert right.status_code not in (401, 403), (method, path, right.status_code, right.text[:300])
