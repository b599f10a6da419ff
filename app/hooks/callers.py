"""Who a request counts against, for the rate limits and the in-flight cap: a verified caller or an address.

A request is keyed by its caller only once the caller is known to be real:
- a signed-in browser (the `cp_session` cookie is signed with the secret key, so it cannot be made up):
  `user:<id>`;
- an API token, once verified with the auth layer's own lookup (app.auth.deps.principal_from_authorization,
  run in the thread pool the first time a token is seen; `VerifiedTokens` remembers the token's hash → owner):
  `user:<id>` of its owner, so one user's tokens and browser share one budget;
- a node agent's token verified the same way: `node:<id>`;
- anything else — no credential, a made-up, expired or revoked token: `ip:<client address>`. Rotating
  invented tokens therefore buys no budget of its own.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from app.auth import sessions
from app.auth.clientaddr import client_address
from app.auth.deps import AuthenticationRequired, principal_from_authorization

# Verified tokens remembered per process. Each entry is ~200 bytes, so the bound is ~2 MB; a token pushed
# out is simply keyed by address again until its next verified request.
MAX_VERIFIED_TOKENS = 10_000


def token_digest(authorization: str) -> str:
    return hashlib.sha256(authorization.encode()).hexdigest()


class VerifiedTokens:
    """A bounded, thread-safe LRU: SHA-256 of an Authorization header → the key of the principal it proved."""

    def __init__(self, size: int = MAX_VERIFIED_TOKENS) -> None:
        self.size = size
        self._keys: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> str | None:
        with self._lock:
            key = self._keys.get(digest)
            if key is not None:
                self._keys.move_to_end(digest)
            return key

    def put(self, digest: str, key: str) -> None:
        with self._lock:
            self._keys[digest] = key
            self._keys.move_to_end(digest)
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)

    def __len__(self) -> int:
        return len(self._keys)


def address_of(conn: HTTPConnection, settings: Any) -> str:
    """The client's address: the peer, or behind a trusted proxy the address it names (app/auth/clientaddr.py)."""
    return client_address(conn, settings) or "-"


def address_key(conn: HTTPConnection, settings: Any) -> str:
    return f"ip:{address_of(conn, settings)}"


def principal_key(principal: Any) -> str | None:
    """`user:<id>` for a user's cookie or token, `node:<id>` for a node agent, else None."""
    if getattr(principal, "user_id", None) is not None:
        return f"user:{principal.user_id}"
    if getattr(principal, "node_id", None) is not None:
        return f"node:{principal.node_id}"
    return None


def verify(authorization: str) -> str | None:
    """The principal key an Authorization header proves, or None when it proves nothing (sync: queries)."""
    try:
        return principal_key(principal_from_authorization(authorization))
    except AuthenticationRequired:
        return None


async def caller_key(conn: HTTPConnection, settings: Any, verified: VerifiedTokens) -> str:
    authorization = conn.headers.get("authorization", "")
    if authorization:
        digest = token_digest(authorization)
        key = verified.get(digest)
        if key is None:
            key = await run_in_threadpool(verify, authorization)
            if key is not None:
                verified.put(digest, key)
        return key or address_key(conn, settings)
    session = sessions.read_session(conn, settings.secret_key)
    if session is not None:
        return f"user:{session.user_id}"
    return address_key(conn, settings)
