"""Node tokens: how a benchmark agent proves which node it is.

A token is shown once when an admin creates the node ("cpn_" + 256 random bits, recognisable in logs
and by secret scanners); only its SHA-256 is stored, so a database leak does not leak tokens. Agent
routes take `Authorization: Bearer cpn_…`; a missing, unknown or revoked token gets 401.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlmodel import Session, select

from app.deps import SessionDep
from app.models.benchmarks import Node

NODE_TOKEN_PREFIX = "cpn_"
DISPLAY_PREFIX_CHARS = 12  # "cpn_" + 8 characters: enough to tell tokens apart in a list


def new_node_token() -> str:
    return NODE_TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_node_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_display_prefix(token: str) -> str:
    return token[:DISPLAY_PREFIX_CHARS]


def _unauthorised(detail: str) -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail=detail,
        headers={"WWW-Authenticate": 'Bearer realm="clusterplan-agent"'},
    )


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("X-Node-Token") or None


def authenticate_node_token(session: Session, token: str) -> uuid.UUID | None:
    """The id of the node a token belongs to, or None when it is unknown or revoked."""
    node = session.exec(select(Node).where(Node.token_hash == hash_node_token(token))).first()
    return node.id if node is not None and node.revoked_at is None else None


def current_node(request: Request, session: SessionDep) -> Node:
    token = bearer_token(request)
    if not token or not token.startswith(NODE_TOKEN_PREFIX):
        raise _unauthorised("a node token (Authorization: Bearer cpn_…) is required")
    node = session.exec(select(Node).where(Node.token_hash == hash_node_token(token))).first()
    if node is None:
        raise _unauthorised("unknown node token")
    if node.revoked_at is not None:
        raise _unauthorised("node token revoked")
    return node


NodeDep = Annotated[Node, Depends(current_node)]
