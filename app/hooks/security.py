"""Security headers on every response, a request body size limit (413), credentials checked on every route
(a bad token is a 401 even where none is needed), the sign-in throttle, and the sign-in redirect for pages.

HSTS (`Strict-Transport-Security: max-age=31536000; includeSubDomains`, one year as the HSTS preload list
asks) is sent when `CLUSTERPLAN_HTTPS=true`: only the operator knows the site is always served over TLS.

An `Authorization` header is resolved before routing, for every path but /healthz (liveness probes send
none, and must not depend on the token table) and /static (files anyone may fetch): a bad, expired or
revoked token, or a header that is not `Bearer cpt_…`/`Bearer cpn_…`, gets 401 at once.

Content-Security-Policy: no inline script anywhere (`script-src 'self'`), no framing (`frame-ancestors
'none'`), images from us or data: URLs (Plotly's "download as PNG"). `style-src` also allows
'unsafe-inline' because Plotly 2.x writes style attributes and a <style> element of its own at run time
(modebar, hover labels); without it charts lose their modebar and tooltips style. Inline *style* cannot run
code, so the policy still blocks script injection. The Swagger UI page (/docs) is served from vendored
files and started from a script file, so it keeps the same policy.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth.deps import AuthenticationRequired, principal_from_authorization, route_requirement
from app.auth.throttle import LoginThrottler
from app.schemas.errors import HTTPError

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)
# One year and subdomains: the values the HSTS preload list (hstspreload.org) requires.
HSTS = "max-age=31536000; includeSubDomains"
# Paths served without looking at credentials (see the module docstring).
CREDENTIAL_EXEMPT_PATHS = frozenset({"/healthz"})
CREDENTIAL_EXEMPT_PREFIXES = ("/static/",)

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "strict-origin-when-cross-origin"),
    ("x-frame-options", "DENY"),
    ("cross-origin-opener-policy", "same-origin"),
    ("permissions-policy", "camera=(), microphone=(), geolocation=(), payment=()"),
)


class SecurityHeadersMiddleware:
    """Adds the CSP and friends to every HTTP response (pages, API, static files, errors)."""

    def __init__(self, app: ASGIApp, hsts: bool = False) -> None:
        self.app = app
        self.hsts = hsts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hsts = self.hsts

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("content-security-policy", CONTENT_SECURITY_POLICY)
                for name, value in SECURITY_HEADERS:
                    headers.setdefault(name, value)
                if hsts:
                    headers.setdefault("strict-transport-security", HSTS)
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodySizeLimitMiddleware:
    """413 when a request body is larger than `max_bytes`: at once from Content-Length, or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.max_bytes <= 0:
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared < 0 or declared > self.max_bytes:
                    await self._reject(scope, receive, send, declared)
                    return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Raised while the route reads its body: FastAPI lets HTTPException through unchanged.
                    raise HTTPException(status_code=413, detail=self._detail())
            return message

        await self.app(scope, limited_receive, send)

    def _detail(self) -> str:
        return f"request body larger than {self.max_bytes} bytes"

    async def _reject(self, scope: Scope, receive: Receive, send: Send, declared: int) -> None:
        status = 413 if declared > self.max_bytes else 400
        detail = self._detail() if status == 413 else "invalid Content-Length"
        response = JSONResponse({"detail": detail}, status_code=status, headers={"Connection": "close"})
        await response(scope, receive, send)


class CredentialCheckMiddleware:
    """401 for a bad Authorization header on any route; a good one is resolved once and kept for the route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _credential_exempt(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        authorization = Headers(scope=scope).get("authorization")
        if authorization is not None:
            try:
                principal = await run_in_threadpool(principal_from_authorization, authorization)
            except AuthenticationRequired as exc:
                response = JSONResponse({"detail": exc.detail}, status_code=401, headers=exc.headers)
                await response(scope, receive, send)
                return
            # request.state is this dict: app.auth.deps.resolve_principal finds the principal there.
            scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def _credential_exempt(path: str) -> bool:
    return path in CREDENTIAL_EXEMPT_PATHS or path.startswith(CREDENTIAL_EXEMPT_PREFIXES)


def _wants_html_page(request: Request) -> bool:
    path = request.url.path
    if path.startswith("/api/") or path == "/metrics":
        return False
    return "text/html" in request.headers.get("accept", "") or request.headers.get("HX-Request") == "true"


async def authentication_required_handler(request: Request, exc: Exception) -> Response:
    """API: 401 JSON with WWW-Authenticate. Browser page: to /login and back (htmx: via HX-Redirect)."""
    assert isinstance(exc, AuthenticationRequired)
    if _wants_html_page(request):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        login_url = f"/login?next={quote(target, safe='/')}"
        if request.headers.get("HX-Request") == "true":
            return Response(status_code=401, headers={"HX-Redirect": login_url})
        return RedirectResponse(login_url, status_code=303)
    return JSONResponse({"detail": exc.detail}, status_code=401, headers=exc.headers)


ERROR_SCHEMA = HTTPError.model_json_schema()
SECURITY_SCHEMES = {
    "apiToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "Personal API token `cpt_…` (create one at /tokens or with `clusterplan tokens create`).",
    },
    "sessionCookie": {
        "type": "apiKey",
        "in": "cookie",
        "name": "cp_session",
        "description": "Browser session from POST /api/v1/auth/login; unsafe methods also need X-CSRF-Token.",
    },
    "nodeToken": {"type": "http", "scheme": "bearer", "description": "Node agent token `cpn_…`."},
}


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HTTPError"}}},
    }


def document_security(app: FastAPI, schema: dict[str, Any]) -> dict[str, Any]:
    """Add security schemes, per-operation security and the 401/403/413/429 answers to the OpenAPI schema."""
    from fastapi.routing import APIRoute, iter_route_contexts

    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {}).update(SECURITY_SCHEMES)
    components.setdefault("schemas", {}).setdefault("HTTPError", ERROR_SCHEMA)
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute) or not context.include_in_schema:
            continue
        requirement = route_requirement(route.dependant)
        for method in context.methods or ():
            operation = schema.get("paths", {}).get(str(context.path), {}).get(method.lower())
            if operation is None:
                continue
            responses = operation.setdefault("responses", {})
            if str(context.path).startswith("/api/"):
                responses.setdefault("429", _error("Rate limit exceeded; see the Retry-After header"))
            if "requestBody" in operation:
                responses.setdefault("400", _error("Request body is not valid JSON or form data"))
                responses.setdefault("413", _error("Request body too large"))
            if requirement.node:
                operation["security"] = [{"nodeToken": []}]
                responses.setdefault("401", _error("Missing, unknown or revoked node token"))
            elif requirement.session:
                operation["security"] = [{"sessionCookie": []}]
                responses.setdefault("401", _error("Not signed in"))
                responses.setdefault(
                    "403", _error("An API token (a browser session is needed), or a cross-site request")
                )
            elif requirement.anything:
                operation["security"] = [{"apiToken": []}, {"sessionCookie": []}]
                if requirement.scopes:
                    scopes = ", ".join(sorted(requirement.scopes))
                    operation["description"] = (
                        operation.get("description") or ""
                    ) + f"\n\nRequires scope: {scopes}."
                responses.setdefault("401", _error("Not signed in, or a bad/expired/revoked token"))
                responses.setdefault("403", _error("Credential lacks the scope, or a cross-site request"))
    return schema


def install(app: FastAPI) -> None:
    settings: Any = app.state.settings
    # Outermost: every response gets the headers, including 413/429/500 written by other middleware.
    app.add_middleware(SecurityHeadersMiddleware, hsts=settings.https)
    # Appended after the rate limit (app.hooks.ratelimit): a flood of made-up tokens is limited first.
    app.user_middleware.append(Middleware(CredentialCheckMiddleware))
    # Innermost (appended): sits right in front of the routes.
    app.user_middleware.append(Middleware(BodySizeLimitMiddleware, max_bytes=settings.max_request_bytes))
    # Sign-in backoff per account and address (app.auth.throttle); tests replace it with a fake clock.
    app.state.login_throttle = LoginThrottler()
    app.add_exception_handler(AuthenticationRequired, authentication_required_handler)

    build_schema = app.openapi

    def openapi_with_security() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        return document_security(app, build_schema())

    app.openapi = openapi_with_security  # type: ignore[method-assign]
