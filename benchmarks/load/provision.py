"""Accounts for the load tests, written straight into the server's database (its own engine, then disposed).

Three users with one API token each: an administrator (sets things up), a plan saver (plans:write) and a
planner (plans:read only: the caller the per-caller CPU cap is about). The password is random and never used.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlmodel import Session, create_engine

from app.auth.tokens import create_token
from app.auth.users import create_user
from app.db import normalise_url


@dataclass(frozen=True)
class LoadTokens:
    admin: str
    saver: str
    planner: str


def provision(database_url: str) -> LoadTokens:
    engine = create_engine(normalise_url(database_url))
    try:
        with Session(engine) as session:

            def token(email: str, scopes: list[str], is_admin: bool) -> str:
                user = create_user(session, email, secrets.token_urlsafe(24), is_admin=is_admin)
                return create_token(session, user, "load test", scopes, None).plaintext

            return LoadTokens(
                admin=token("load-admin@example.com", ["admin"], True),
                saver=token("load-saver@example.com", ["plans:write"], False),
                planner=token("load-planner@example.com", ["plans:read"], False),
            )
    finally:
        engine.dispose()
