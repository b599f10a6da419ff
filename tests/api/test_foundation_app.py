"""Foundation: settings, app shell, health, OpenAPI, vendored assets, CLI behaviour."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.settings import DEFAULT_SECRET_KEY, Settings
from tests.cli_support import clusterplan
from tests.paths import ROOT


def test_default_database_is_sqlite_file_in_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTERPLAN_DATABASE_URL", raising=False)
    settings = Settings(_env_file=None, data_dir=Path("somewhere"))
    assert settings.resolved_database_url == "sqlite:///somewhere/clusterplan.db"


def test_default_secret_refused_in_production() -> None:
    with pytest.raises(ValidationError, match="SECRET_KEY"):
        Settings(_env_file=None, environment="production", secret_key=DEFAULT_SECRET_KEY)
    assert Settings(_env_file=None, environment="production", secret_key="x" * 40).secret_key == "x" * 40


def test_env_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERPLAN_PORT", "8123")
    monkeypatch.setenv("CLUSTERPLAN_HOST", "0.0.0.0")
    settings = Settings(_env_file=None)
    assert (settings.host, settings.port) == ("0.0.0.0", 8123)


def test_healthz_checks_database(client) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["database"] == "ok"


def test_openapi_and_docs(client) -> None:  # type: ignore[no-untyped-def]
    spec = client.get("/api/v1/openapi.json").json()
    assert spec["info"]["title"] == "ClusterPlan"
    assert any(path.startswith("/api/v1/") for path in spec["paths"])
    assert client.get("/docs").status_code == 200


def test_home_page_uses_vendored_assets(client) -> None:  # type: ignore[no-untyped-def]
    html = client.get("/").text
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', html)
    assert "/static/vendor/htmx-2.0.4.min.js" in scripts
    assert all(src.startswith("/static/") for src in scripts), scripts
    assert client.get("/static/vendor/htmx-2.0.4.min.js").status_code == 200


def test_vendored_versions_are_pinned() -> None:
    htmx = (ROOT / "static/vendor/htmx-2.0.4.min.js").read_text()
    assert 'version:"2.0.4"' in htmx.replace(" ", "")
    plotly = (ROOT / "static/vendor/plotly-cartesian-2.35.2.min.js").read_text(errors="ignore")[:2000]
    assert "2.35.2" in plotly


@pytest.mark.slow
def test_cli_help_for_every_command() -> None:
    top = clusterplan("--help")
    assert top.returncode == 0
    commands = re.findall(r"^│ (\S+)\s", top.stdout, flags=re.MULTILINE)
    assert {"serve", "db"} <= set(commands)
    for command in commands:
        result = clusterplan(command, "--help")
        assert result.returncode == 0, (command, result.stderr)
        assert "Traceback" not in result.stderr


def test_cli_bad_arguments_print_message_not_traceback() -> None:
    result = clusterplan("serve", "--port", "not-a-number")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--port" in result.stderr
    result = clusterplan("no-such-command")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_db_upgrade_command(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "CLUSTERPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}"}
    result = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "db", "upgrade"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cli.db").exists()


def test_live_server_serves_over_http(live_server) -> None:  # type: ignore[no-untyped-def]
    import httpx

    response = httpx.get(f"{live_server.url}/healthz")
    assert response.status_code == 200
    assert httpx.get(f"{live_server.url}/").status_code == 200


@pytest.mark.slow
def test_serve_prints_a_one_time_link_then_where_to_sign_in(tmp_path: Path) -> None:
    """First start on an empty database: a sign-in link; once an admin has a password: where to sign in."""
    import httpx

    from tests.conftest import start_live_server

    url = f"sqlite:///{tmp_path / 'first-run.db'}"
    first = start_live_server(url, tmp_path)
    try:
        link = first.sign_in_link()
        assert link is not None and link.startswith(f"{first.url}/login/link?token=cpl_")
        with httpx.Client(timeout=30, follow_redirects=True) as browser:
            opened = browser.get(link)
            assert opened.url.path == "/account/password" and "Choose a password" in opened.text
            assert browser.get(f"{first.url}/api/v1/auth/me").json()["email"] == "admin@localhost"
    finally:
        first.stop()
    # start_live_server gave the database an administrator with a password: no link on the next start.
    second = start_live_server(url, tmp_path)
    try:
        log = second.log_path.read_text()
        assert second.sign_in_link() is None
        assert f"sign in at {second.url}/login" in log and "clusterplan users create" in log
    finally:
        second.stop()
