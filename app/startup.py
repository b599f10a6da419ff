"""Bring the database to the current schema and seed the built-in catalog (idempotent)."""

from __future__ import annotations

from app import migrate


def prepare_database(revision: str = "heads") -> None:
    migrate.upgrade(revision=revision)
    if revision == "heads":
        from app.services import seed

        seed.seed_catalog()


def display_base_url(host: str, port: int) -> str:
    """The URL to open for a server bound to `host` (a wildcard address is reached on loopback)."""
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def sign_in_banner(base_url: str) -> str:
    """What `clusterplan serve` prints about signing in: a one-time link on a first run, else where to go."""
    from sqlmodel import Session

    from app.auth.bootstrap import LINK_LIFETIME, first_run_link
    from app.db import get_engine

    with Session(get_engine()) as session:
        link = first_run_link(session, base_url)
    if link is None:
        return (
            f"ClusterPlan: sign in at {base_url}/login\n"
            "  new accounts: clusterplan users create EMAIL [--admin]; "
            "lost password: clusterplan users set-password EMAIL"
        )
    minutes = int(LINK_LIFETIME.total_seconds() // 60)
    return (
        "ClusterPlan: no administrator can sign in with a password yet. Open this one-time link to sign in\n"
        f"and choose one (valid for {minutes} minutes, once; each start prints a new one):\n\n"
        f"    {link}\n\n"
        "  or create an administrator instead: clusterplan users create EMAIL --admin"
    )
