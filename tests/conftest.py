"""Shared fixtures: real databases (SQLite file and PostgreSQL), the app, and a live server over HTTP."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.paths import ROOT

# No test depends on a wall-clock window: Hypothesis' default 200 ms deadline per example fails on a busy
# machine (DeadlineExceeded) without saying anything about the code, so every property test runs without one.
hypothesis_settings.register_profile("clusterplan", deadline=None)
hypothesis_settings.load_profile("clusterplan")
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _torch_importable() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `torch` (the benchmark runner's real work) skip where torch is not installed.

    torch is imported only when such a test was collected, so a run of other tests never pays for it."""
    needing = [item for item in items if item.get_closest_marker("torch") is not None]
    if needing and not _torch_importable():
        skip = pytest.mark.skip(reason="needs torch (the [bench] extra)")
        for item in needing:
            item.add_marker(skip)


def postgres_admin_url() -> str:
    return os.environ.get("CLUSTERPLAN_TEST_POSTGRES_URL", DEFAULT_PG_URL)


def _postgres_available() -> bool:
    try:
        engine = create_engine(postgres_admin_url())
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def postgres_server() -> str:
    if not _postgres_available():
        if os.environ.get("CLUSTERPLAN_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL not reachable at {postgres_admin_url()}")
        pytest.skip(f"PostgreSQL not reachable at {postgres_admin_url()}")
    return postgres_admin_url()


def create_postgres_database(admin_url: str) -> str:
    """Create a fresh, uniquely named database and return its URL."""
    name = f"cp_test_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(admin_url: str, url: str) -> None:
    name = make_url(url).database
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


def configure_app_database(url: str) -> None:
    """Point the app's settings and engine at `url` (clears the cached settings and engine)."""
    from app import db, settings

    os.environ["CLUSTERPLAN_DATABASE_URL"] = url
    os.environ.setdefault("CLUSTERPLAN_ENVIRONMENT", "test")
    settings.get_settings.cache_clear()
    db.get_engine.cache_clear()


@pytest.fixture(params=["sqlite", "postgres"])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database on each backend: the test runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    admin = request.getfixturevalue("postgres_server")
    url = create_postgres_database(admin)
    try:
        yield url
    finally:
        from app import db

        db.get_engine.cache_clear()
        drop_postgres_database(admin, url)


@pytest.fixture
def db_url(empty_db_url: str) -> str:
    """A migrated and seeded database on each backend, with the app configured to use it."""
    from app.startup import prepare_database

    configure_app_database(empty_db_url)
    prepare_database()
    return empty_db_url


@pytest.fixture(scope="session")
def sqlite_app_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One migrated and seeded SQLite database shared by the fast API tests of a session."""
    from app.startup import prepare_database

    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'app.db'}"
    configure_app_database(url)
    prepare_database()
    return url


FIXTURE_ADMIN = "fixture-admin@example.com"
LIVE_ADMIN = "live-admin@example.com"
LIVE_ADMIN_PASSWORD = "live server admin password"
ONE_TIME_LINK = re.compile(r"http://\S+/login/link\?token=cpl_[A-Za-z0-9_-]+")


@pytest.fixture(scope="session")
def admin_token(sqlite_app_url: str) -> str:
    """A never-expiring admin API token in the shared SQLite database (there is no anonymous admin)."""
    from tests.auth_support import issue_token

    configure_app_database(sqlite_app_url)
    return issue_token(FIXTURE_ADMIN, ["admin"], is_admin=True, days=None)


@pytest.fixture
def client(sqlite_app_url: str, admin_token: str) -> Iterator[object]:
    """The real app over TestClient, every request sent with an administrator's bearer token."""
    from fastapi.testclient import TestClient

    from app.main import create_app

    configure_app_database(sqlite_app_url)
    with TestClient(create_app(), headers={"Authorization": f"Bearer {admin_token}"}) as test_client:
        yield test_client


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def provision_admin(database_url: str, email: str = LIVE_ADMIN, password: str = LIVE_ADMIN_PASSWORD) -> str:
    """An administrator with a password in the database at `database_url`; returns a fresh admin API token.

    Uses its own engine, so the app's configured database (settings, cached engine) is left alone.
    """
    from sqlmodel import Session

    from app.auth.tokens import create_token
    from app.auth.users import create_user, find_user

    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            user = find_user(session, email) or create_user(session, email, password, is_admin=True)
            return create_token(session, user, "live server tests", ["admin"], None).plaintext
    finally:
        engine.dispose()


class LiveServer:
    """A running `clusterplan serve`, with an administrator (password and API token) made after it started."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log_path: Path, admin_token: str) -> None:
        self.url = url
        self.process = process
        self.log_path = log_path
        self.admin_email = LIVE_ADMIN
        self.admin_password = LIVE_ADMIN_PASSWORD
        self.admin_token = admin_token

    @property
    def headers(self) -> dict[str, str]:
        """Send these to act as the administrator (`httpx.get(url, headers=server.headers)`)."""
        return {"Authorization": f"Bearer {self.admin_token}"}

    def sign_in_link(self) -> str | None:
        """The one-time sign-in URL the server printed at start (None when it printed none)."""
        found = ONE_TIME_LINK.search(self.log_path.read_text(errors="replace"))
        return found.group(0) if found else None

    def sign_in(self, context: Any) -> None:
        """Sign a Playwright browser context in as the administrator (its cookie jar gets the session)."""
        response = context.request.post(
            f"{self.url}/api/v1/auth/login", data={"email": self.admin_email, "password": self.admin_password}
        )
        assert response.status == 200, response.text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def start_live_server(
    database_url: str, tmp_path: Path, extra_env: dict[str, str] | None = None
) -> LiveServer:
    """Run `clusterplan serve` in a real subprocess on a random port; wait for /healthz."""
    port = free_port()
    env = {
        **os.environ,
        "CLUSTERPLAN_DATABASE_URL": database_url,
        "CLUSTERPLAN_ENVIRONMENT": "test",
        "CLUSTERPLAN_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
        # a test server's browser tests all sign in from 127.0.0.1, more often than the per-address sign-in limit
        # (10 a minute) allows; that limit is tested on its own (tests/api/test_security_hooks.py)
        "CLUSTERPLAN_LOGIN_RATE_LIMIT_PER_MINUTE": "10000",
        **(extra_env or {}),
    }
    log_path = tmp_path / f"server-{port}.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return LiveServer(url, proc, log_path, provision_admin(database_url))
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"server did not start: {log_path.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("live")
    server = start_live_server(f"sqlite:///{tmp / 'live.db'}", tmp)
    yield server
    server.stop()
