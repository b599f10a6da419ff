"""Authorisation dependencies used by every route.

`require_scope(scope)` is the one way a route states what it needs. Scopes: plans:read, plans:write,
benchmarks:run, admin. Reads of public catalog data need no scope.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request

SCOPES = ("plans:read", "plans:write", "benchmarks:run", "admin")


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user (cookie or token), a node agent, or the anonymous loopback user."""

    kind: str  # "user" | "token" | "node" | "anonymous"
    user_id: Any = None
    node_id: Any = None
    scopes: frozenset[str] = frozenset()


def require_scope(scope: str) -> Callable[..., Principal]:
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope}")

    def dependency(request: Request) -> Principal:
        principal = getattr(request.state, "principal", None)
        return principal or Principal(kind="anonymous", scopes=frozenset(SCOPES))

    dependency.__name__ = f"require_{scope.replace(':', '_')}"
    return dependency
