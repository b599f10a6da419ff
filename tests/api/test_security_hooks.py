"""Security headers, CSP without inline script, body size limit, rate limits, /metrics, JSON request logs."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.deps import route_requirement
from app.hooks.logging import LOGGER_NAME, JsonFormatter
from app.hooks.security import CONTENT_SECURITY_POLICY, HSTS
from tests.auth_support import (
    OTHER_REMOTE,
    PASSWORD,
    admin_headers,
    app_with,
    bearer,
    ensure_user,
    issue_token,
    login,
    loopback_client,
    remote_client,
)


@pytest.fixture
def app_db(sqlite_app_url: str) -> Iterator[str]:
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    yield sqlite_app_url


def _directives(policy: str) -> dict[str, str]:
    return {part.split()[0]: part.strip() for part in policy.split(";") if part.strip()}


def test_csp_directives() -> None:
    d = _directives(CONTENT_SECURITY_POLICY)
    assert d["default-src"] == "default-src 'self'"
    assert d["script-src"] == "script-src 'self'"  # no 'unsafe-inline', no 'unsafe-eval', no CDN
    assert d["img-src"] == "img-src 'self' data:"
    assert d["frame-ancestors"] == "frame-ancestors 'none'"
    assert "'unsafe-eval'" not in CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("path", ["/", "/api/v1/auth/me", "/static/css/app.css", "/no/such/page", "/login"])
def test_security_headers_everywhere(app_db: str, path: str) -> None:
    response = loopback_client().get(path)
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "strict-origin-when-cross-origin"
    assert response.headers["x-frame-options"] == "DENY"
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])


def test_hsts_when_the_site_is_https(app_db: str) -> None:
    assert HSTS == "max-age=31536000; includeSubDomains"
    for path in ("/healthz", "/", "/api/v1/gpus", "/static/css/app.css"):
        assert remote_client(app_with(https=True)).get(path).headers["strict-transport-security"] == HSTS
    # Without CLUSTERPLAN_HTTPS the server cannot know TLS is always there: no HSTS, whatever the scheme.
    assert "strict-transport-security" not in remote_client().get("/healthz").headers
    assert "strict-transport-security" not in loopback_client().get("/healthz").headers


def _static_page_paths() -> list[str]:
    app = app_with()
    paths = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if (
            isinstance(route, APIRoute)
            and "GET" in (context.methods or set())
            and "{" not in str(context.path)
            and not str(context.path).startswith("/api/")
            and str(context.path) != "/metrics"
        ):
            paths.append(str(context.path))
    return sorted(paths)


def _session_only_paths() -> set[str]:
    """Pages that answer a signed-in browser session only (require_browser_session): tokens get 403 there."""
    return {
        str(context.path)
        for context in iter_route_contexts(app_with().routes)
        if isinstance(context.original_route, APIRoute)
        and route_requirement(context.original_route.dependant).session
    }


def _page_client(path: str) -> TestClient:
    """An administrator's client for `path`: a signed-in browser session where the page takes nothing else."""
    if path not in _session_only_paths():
        return loopback_client(headers=admin_headers())
    client = loopback_client()
    ensure_user("support-admin@example.com", is_admin=True)
    login(client, "support-admin@example.com")
    return client


@pytest.mark.parametrize("path", _static_page_paths())
def test_pages_have_no_inline_script(app_db: str, path: str) -> None:
    """Every page works under `script-src 'self'`: only <script src="/static/…">, no on* handlers."""
    response = _page_client(path).get(path)
    # The one-time sign-in link without its token explains itself with a 400 page.
    assert response.status_code == (400 if path == "/login/link" else 200), (path, response.status_code)
    html = response.text
    for tag, body in re.findall(r"(<script\b[^>]*>)(.*?)</script>", html, flags=re.IGNORECASE | re.DOTALL):
        if re.search(r'\btype="application/(ld\+)?json"', tag):
            continue  # a data block: the browser never executes it, CSP allows it
        src = re.search(r'\bsrc="([^"]+)"', tag)
        assert src and src.group(1).startswith("/static/"), (path, tag)
        assert not body.strip(), (path, tag, body[:200])
    handlers = re.findall(r"<[^>]+\s(on[a-z]+)\s*=", html, flags=re.IGNORECASE)
    assert not handlers, (path, handlers)
    assert "javascript:" not in html.lower(), path
    assert "hx-on" not in html, path  # htmx's inline handlers would need 'unsafe-eval'


def test_docs_page_keeps_the_site_policy_and_loads_nothing_remote(app_db: str) -> None:
    client = loopback_client()
    response = client.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "http://" not in response.text and "https://" not in response.text
    for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', response.text):
        assert client.get(asset).status_code == 200, asset


def test_static_files_are_compressed_and_cached_by_version(app_db: str) -> None:
    client = loopback_client()
    vendored = client.get(
        "/static/vendor/plotly-cartesian-2.35.2.min.js", headers={"accept-encoding": "gzip"}
    )
    assert vendored.headers["content-encoding"] == "gzip"
    assert vendored.num_bytes_downloaded < 0.4 * len(vendored.content)  # 1.36 MB sent as about 0.45 MB
    assert vendored.headers["cache-control"] == "public, max-age=31536000, immutable"
    own = client.get("/static/css/app.css")
    assert own.headers["cache-control"] == "no-cache" and own.headers["etag"]
    assert (
        client.get("/static/css/app.css", headers={"if-none-match": own.headers["etag"]}).status_code == 304
    )
    page = client.get("/", headers={"accept-encoding": "gzip"})
    assert page.headers["content-encoding"] == "gzip" and "accept-encoding" in page.headers["vary"].lower()
    assert "content-encoding" not in client.get("/", headers={"accept-encoding": "identity"}).headers


def test_body_limit_from_content_length(app_db: str) -> None:
    client = loopback_client(app_with(max_request_bytes=1024))
    response = client.post(
        "/api/v1/auth/login", content=b"{" + b" " * 2000 + b"}", headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert "1024 bytes" in response.json()["detail"]
    assert response.headers["content-security-policy"]
    small = client.post("/api/v1/auth/login", json={"email": "a@b.example", "password": "x" * 12})
    assert small.status_code == 401


def test_body_limit_while_streaming(app_db: str) -> None:
    """A chunked body without Content-Length is cut off once it passes the limit."""
    client = loopback_client(app_with(max_request_bytes=1024))

    def chunks() -> Iterator[bytes]:
        yield b'{"email": "a@b.example", "password": "'
        for _ in range(40):
            yield b"x" * 100
        yield b'"}'

    response = client.post(
        "/api/v1/auth/login", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413


def test_api_rate_limit_per_caller(app_db: str) -> None:
    app = app_with(rate_limit_per_minute=5)
    first = remote_client(app)
    statuses = [first.get("/api/v1/auth/me").status_code for _ in range(6)]
    assert statuses == [200] * 5 + [429]
    limited = first.get("/api/v1/auth/me")
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["retry-after"]) <= 60  # within the one-minute window
    assert "retry" in limited.json()["detail"]
    # Another address has its own bucket; pages and static files are not API-limited.
    assert remote_client(app, client=OTHER_REMOTE).get("/api/v1/auth/me").status_code == 200
    assert first.get("/healthz").status_code == 200
    # Loopback callers are limited like anyone else (there is no anonymous local user any more).
    local = loopback_client(app)
    assert [local.get("/api/v1/auth/me").status_code for _ in range(6)] == [200] * 5 + [429]


def test_token_holders_have_their_own_bucket(app_db: str) -> None:
    app = app_with(rate_limit_per_minute=3)
    token = issue_token("bucket@example.com", ["plans:read"])
    client = remote_client(app)
    assert [client.get("/api/v1/auth/me").status_code for _ in range(4)] == [200, 200, 200, 429]
    # Same address, own credential: a separate per-caller bucket (the wider per-address one still has room).
    assert client.get("/api/v1/auth/me", headers=bearer(token)).status_code == 200


def test_login_rate_limit(app_db: str) -> None:
    ensure_user("brute@example.com")
    app = app_with(login_rate_limit_per_minute=3)
    client = remote_client(app)
    wrong = {"email": "brute@example.com", "password": "not the password"}
    assert [client.post("/api/v1/auth/login", json=wrong).status_code for _ in range(4)] == [
        401,
        401,
        401,
        429,
    ]
    response = client.post("/api/v1/auth/login", json={"email": "brute@example.com", "password": PASSWORD})
    assert response.status_code == 429 and int(response.headers["retry-after"]) >= 1
    # The form login shares the limit.
    assert client.post("/login", data={"email": "x@y.example", "password": "whatever!!"}).status_code == 429


def test_metrics_latency_histogram_and_job_counts(db_url: str) -> None:
    from app.db import get_engine
    from app.models.benchmarks import BenchmarkJob

    with Session(get_engine()) as session:
        for status in ["queued", "queued", "running", "failed"]:
            session.add(BenchmarkJob(kind="gemm", status=status))
        session.commit()
    client = loopback_client(headers=admin_headers())
    for _ in range(3):
        client.get("/api/v1/auth/me")
    client.get("/definitely/not/here")
    text = client.get("/metrics").text
    assert (
        'clusterplan_http_request_duration_seconds_count{method="GET",route="/api/v1/auth/me",status="200"} 3.0'
        in text
    )
    assert 'route="<unmatched>",status="404"' in text and "/definitely" not in text
    assert 'clusterplan_benchmark_jobs{status="queued"} 2.0' in text
    assert 'clusterplan_benchmark_jobs{status="running"} 1.0' in text
    assert 'clusterplan_benchmark_jobs{status="failed"} 1.0' in text
    assert 'clusterplan_benchmark_jobs{status="succeeded"} 0.0' in text
    # Read at scrape time: a new job shows up in the next scrape.
    with Session(get_engine()) as session:
        session.add(BenchmarkJob(kind="gemm", status="succeeded"))
        session.commit()
    assert 'clusterplan_benchmark_jobs{status="succeeded"} 1.0' in client.get("/metrics").text


def test_metrics_need_admin_from_afar(app_db: str) -> None:
    assert remote_client().get("/metrics").status_code == 401
    reader = issue_token("metrics-reader@example.com", ["plans:read"])
    assert remote_client().get("/metrics", headers=bearer(reader)).status_code == 403
    admin = issue_token("metrics-admin@example.com", ["admin"])
    response = remote_client().get("/metrics", headers=bearer(admin))
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")


@pytest.fixture
def request_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(handler)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


def test_structured_request_logs(app_db: str, request_log: io.StringIO) -> None:
    client = remote_client()
    response = client.get("/api/v1/auth/me", headers={"X-Request-ID": "trace-abc.123"})
    assert response.headers["x-request-id"] == "trace-abc.123"
    bad_id = client.get("/api/v1/tokens", headers={"X-Request-ID": "bad id with spaces"})
    assert bad_id.status_code == 401 and re.fullmatch(r"[0-9a-f]{32}", bad_id.headers["x-request-id"])
    lines = [json.loads(line) for line in request_log.getvalue().splitlines()]
    first, second = lines[-2], lines[-1]
    assert first["event"] == "request" and first["request_id"] == "trace-abc.123"
    assert first["method"] == "GET" and first["route"] == "/api/v1/auth/me" and first["status"] == 200
    assert first["client"] == "203.0.113.5" and first["principal"] == "anonymous"
    assert isinstance(first["duration_ms"], float) and first["duration_ms"] >= 0
    assert first["ts"].endswith("+00:00")
    assert second["status"] == 401 and second["request_id"] == bad_id.headers["x-request-id"]


def test_logs_never_contain_credentials(app_db: str, request_log: io.StringIO) -> None:
    token = issue_token("logged@example.com", ["plans:read"])
    remote_client().get(f"/api/v1/auth/me?x={1}", headers=bearer(token))
    remote_client().post("/api/v1/auth/login", json={"email": "logged@example.com", "password": PASSWORD})
    text = request_log.getvalue()
    assert token not in text and PASSWORD not in text
    assert '"principal": "token"' in text


def test_openapi_documents_authentication(app_db: str) -> None:
    spec = loopback_client().get("/api/v1/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["apiToken"] == {**schemes["apiToken"], "type": "http", "scheme": "bearer"}
    assert schemes["sessionCookie"]["in"] == "cookie" and schemes["sessionCookie"]["name"] == "cp_session"
    create_user = spec["paths"]["/api/v1/users"]["post"]
    assert create_user["security"] == [{"apiToken": []}, {"sessionCookie": []}]
    assert {"401", "403", "413", "429"} <= set(create_user["responses"])
    assert "Requires scope: admin." in create_user["description"]
    login = spec["paths"]["/api/v1/auth/login"]["post"]
    assert "security" not in login and "429" in login["responses"]
    operation_ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert len(operation_ids) == len(set(operation_ids))
