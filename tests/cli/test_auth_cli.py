"""`clusterplan users …` and `clusterplan tokens …` end to end in a subprocess, on a fresh SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT


@pytest.fixture
def cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {
        **os.environ,
        "CLUSTERPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "CLUSTERPLAN_ENVIRONMENT": "test",
    }

    from tests.conftest import configure_app_database

    configure_app_database(env["CLUSTERPLAN_DATABASE_URL"])

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app.cli.main", *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )

    return run


@pytest.mark.slow
def test_users_and_tokens_from_the_shell(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    made = cli(
        "users", "create", "Ops@Example.com", "--admin", "--password-stdin", stdin="a very good password\n"
    )
    assert made.returncode == 0, made.stderr
    assert "created administrator ops@example.com" in made.stdout
    listed = cli("users", "list")
    assert "ops@example.com  admin" in listed.stdout and "1 user(s)" in listed.stdout

    issued = cli(
        "tokens",
        "create",
        "--user",
        "ops@example.com",
        "--name",
        "prometheus",
        "--scope",
        "admin",
        "--expires-days",
        "30",
    )
    assert issued.returncode == 0, issued.stderr
    secret = issued.stdout.strip()
    assert (
        secret.startswith("cpt_") and len(secret) == 47
    )  # the only thing on stdout: pipe it into a secret store
    assert "not shown again" in issued.stderr

    tokens = cli("tokens", "list", "--user", "ops@example.com")
    assert secret[:12] in tokens.stdout and "prometheus" in tokens.stdout and "active" in tokens.stdout
    assert secret not in tokens.stdout

    # The token works against the real app and database.
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import configure_app_database

    configure_app_database(f"sqlite:///{tmp_path / 'cli.db'}")
    client = TestClient(create_app(), client=("203.0.113.5", 5000), base_url="https://testserver")
    me = client.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {secret}"}).json()
    assert me["email"] == "ops@example.com" and "admin" in me["scopes"]

    revoked = cli("tokens", "revoke", secret[:12])
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    assert "revoked" in cli("tokens", "list", "--user", "ops@example.com").stdout
    assert client.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 401


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (("users", "create", "x@example.com", "--password-stdin"), "short\n", "at least 10"),
        (("users", "create", "not-an-email", "--password-stdin"), "a very good password\n", "e-mail"),
        (
            ("tokens", "create", "--user", "nobody@example.com", "--name", "n", "--scope", "plans:read"),
            "",
            "no user",
        ),
        (("tokens", "revoke", "cpt_nothing"), "", "no token"),
    ],
)
def test_bad_input_is_one_message_exit_2(cli, args, stdin, message) -> None:  # type: ignore[no-untyped-def]
    result = cli(*args, stdin=stdin)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_scope_checks_on_the_shell(cli) -> None:  # type: ignore[no-untyped-def]
    assert (
        cli(
            "users", "create", "dev@example.com", "--password-stdin", stdin="a very good password\n"
        ).returncode
        == 0
    )
    dup = cli("users", "create", "dev@example.com", "--password-stdin", stdin="a very good password\n")
    assert dup.returncode == 2 and "already exists" in dup.stderr
    unknown = cli("tokens", "create", "--user", "dev@example.com", "--name", "n", "--scope", "root")
    assert unknown.returncode == 2 and "unknown scope" in unknown.stderr
    admin = cli("tokens", "create", "--user", "dev@example.com", "--name", "n", "--scope", "admin")
    assert (
        admin.returncode == 2 and "not an administrator" in admin.stderr and "Traceback" not in admin.stderr
    )


@pytest.mark.slow
def test_lockout_recovery_and_deactivation(cli) -> None:  # type: ignore[no-untyped-def]
    assert (
        cli(
            "users", "create", "root@example.com", "--admin", "--password-stdin", stdin="first password 1\n"
        ).returncode
        == 0
    )
    changed = cli(
        "users", "set-password", "ROOT@example.com", "--password-stdin", stdin="second password 2\n"
    )
    assert changed.returncode == 0 and "password changed for root@example.com" in changed.stdout
    demoted = cli("users", "set-admin", "root@example.com", "--no-admin")
    assert demoted.returncode == 0 and "no longer an administrator" in demoted.stdout
    assert "root@example.com  admin" not in cli("users", "list").stdout
    promoted = cli("users", "set-admin", "root@example.com")
    assert promoted.returncode == 0 and "root@example.com  admin" in cli("users", "list").stdout
    assert cli("users", "set-admin", "ghost@example.com").returncode == 2
    assert cli("users", "deactivate", "root@example.com").returncode == 0
    assert "inactive" in cli("users", "list").stdout
    assert cli("users", "activate", "root@example.com").returncode == 0
    assert "inactive" not in cli("users", "list").stdout
    missing = cli("users", "deactivate", "ghost@example.com")
    assert missing.returncode == 2 and "no user" in missing.stderr

    from sqlmodel import Session

    from app.auth.users import authenticate
    from app.db import get_engine

    with Session(get_engine()) as session:
        user = authenticate(session, "root@example.com", "second password 2")
        assert user is not None and authenticate(session, "root@example.com", "first password 1") is None
        # A new password and a deactivation each revoked the account's sessions.
        assert user.session_version == 2


def test_set_email_moves_an_account_under_the_api_s_rules(cli) -> None:  # type: ignore[no-untyped-def]
    for email in ("first@example.com", "second@example.com"):
        made = cli("users", "create", email, "--password-stdin", stdin="a very good password\n")
        assert made.returncode == 0, made.stderr
    moved = cli("users", "set-email", "FIRST@example.com", "Renamed@Example.com")
    assert moved.returncode == 0 and "now signs in as renamed@example.com" in moved.stdout
    taken = cli("users", "set-email", "renamed@example.com", "second@example.com")
    assert taken.returncode == 2 and "already exists" in taken.stderr and "Traceback" not in taken.stderr
    bad = cli("users", "set-email", "renamed@example.com", "not-an-email")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "renamed@example.com" in cli("users", "list").stdout
