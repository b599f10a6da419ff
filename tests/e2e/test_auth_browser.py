"""Sign-in, the first-run link and token pages in a real chromium against a real `clusterplan serve`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import start_live_server
from tests.paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_sign_in_create_and_revoke_a_token(tmp_path: Path, browser: Any) -> None:
    from playwright.sync_api import expect

    url = f"sqlite:///{tmp_path / 'browser.db'}"
    env = {**os.environ, "CLUSTERPLAN_DATABASE_URL": url, "CLUSTERPLAN_ENVIRONMENT": "test"}
    subprocess.run([sys.executable, "-m", "app.cli.main", "db", "upgrade"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [sys.executable, "-m", "app.cli.main", "users", "create", "ada@example.com", "--password-stdin"],
        input="a very good password\n",
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
    )
    server = start_live_server(url, tmp_path)
    try:
        page = browser.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))

        page.goto(f"{server.url}/tokens")
        assert page.url == f"{server.url}/login?next=/tokens"
        page.get_by_label("E-mail").fill("ada@example.com")
        page.get_by_label("Password").fill("wrong password")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_have_text("Wrong e-mail or password.")
        assert problems == [
            "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
        ]
        problems.clear()

        page.get_by_label("Password").fill("a very good password")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{server.url}/tokens")
        expect(page.get_by_text("Signed in as")).to_contain_text("ada@example.com")
        cookies = {c["name"]: c for c in page.context.cookies()}
        assert cookies["cp_session"]["httpOnly"] and cookies["cp_session"]["sameSite"] == "Lax"

        page.get_by_label("Name").fill("laptop script")
        page.get_by_role("button", name="Create token").click()
        secret = page.locator("#new-token").inner_text()
        assert secret.startswith("cpt_")
        me = page.request.get(f"{server.url}/api/v1/auth/me", headers={"Authorization": f"Bearer {secret}"})
        assert me.json()["email"] == "ada@example.com" and me.json()["scopes"] == ["plans:read"]

        asked: list[str] = []  # revoking asks first (static/js/confirm.js); Cancel keeps the token
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        page.get_by_role("button", name="Revoke token laptop script").click()
        assert asked and "laptop script" in asked[0]
        expect(page.locator("tbody tr").first).to_contain_text("active")
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Revoke token laptop script").click()
        page.wait_for_url(f"{server.url}/tokens")
        expect(page.locator("tbody tr").first).to_contain_text("revoked")
        gone = page.request.get(f"{server.url}/api/v1/auth/me", headers={"Authorization": f"Bearer {secret}"})
        assert gone.status == 401

        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(f"{server.url}/login")
        assert "cp_session" not in {c["name"] for c in page.context.cookies()}
        assert problems == []
        page.context.close()
    finally:
        server.stop()


def test_newcomer_opens_the_printed_link_and_sets_a_password(tmp_path: Path, browser: Any) -> None:
    """`make run` on an empty database: the link in the log signs in, then a password is chosen."""
    from playwright.sync_api import expect

    server = start_live_server(f"sqlite:///{tmp_path / 'first.db'}", tmp_path)
    try:
        link = server.sign_in_link()
        assert link is not None and link.startswith(server.url + "/login/link?token=cpl_"), link
        page = browser.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(link)
        page.wait_for_url(f"{server.url}/account/password")
        expect(page.get_by_role("heading", name="Choose a password")).to_be_visible()
        page.get_by_label("E-mail").fill("first@example.com")
        page.get_by_label("New password", exact=True).fill("the first admin password")
        page.get_by_label("New password again").fill("the first admin password")
        page.get_by_role("button", name="Save password").click()
        expect(page.locator("#password-done")).to_contain_text("first@example.com")
        me = page.request.get(f"{server.url}/api/v1/auth/me").json()
        assert me["email"] == "first@example.com" and "admin" in me["scopes"]
        # The link was used up: another browser gets the explanation, not a session.
        other = browser.new_page()
        other.goto(link)
        expect(other.get_by_role("alert")).to_contain_text("not valid")
        # The new password signs in like any other account.
        other.goto(f"{server.url}/login")
        other.get_by_label("E-mail").fill("first@example.com")
        other.get_by_label("Password").fill("the first admin password")
        other.get_by_role("button", name="Sign in").click()
        other.wait_for_url(f"{server.url}/")
        assert problems == []
        page.context.close()
    finally:
        server.stop()
