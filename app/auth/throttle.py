"""Sign-in throttling per account *and* client address, with exponential backoff and no hard lock-out.

After `FREE_FAILURES` wrong passwords for one e-mail from one address, each further attempt must wait
`BASE_DELAY_S`, doubling per failure, capped at `MAX_DELAY_S`; a successful sign-in clears the record. This is
the OWASP Authentication Cheat Sheet's advice ("Account lockout": an exponential delay instead of a lock-out
that lets anyone deny a chosen user service). Keyed per account and address, so users behind one proxy do
not share a budget and nobody elsewhere can lock a chosen account: its owner, from their own address, is
never slowed by someone else's failures. State lives in the `login_throttle` table, so every worker sees it.

The clock is injected (`now`), so tests move time instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from app.models.auth import LoginThrottle
from app.models.base import as_utc, utcnow

Clock = Callable[[], datetime]

# OWASP Authentication Cheat Sheet: a few free attempts (typos happen), then a delay that doubles per failure,
# capped so that a real user is never kept out for long.
FREE_FAILURES = 3
BASE_DELAY_S = 1.0
MAX_DELAY_S = 15 * 60.0
MAX_KEY_CHARS = 400  # the login_throttle.key column (migration sec01)


def backoff_seconds(failures: int) -> float:
    """The wait after `failures` consecutive failures: 0, 0, 0, then 1, 2, 4 … seconds, at most 15 minutes."""
    if failures <= FREE_FAILURES:
        return 0.0
    doublings = min(failures - FREE_FAILURES - 1, 30)  # 2**30 s is far beyond the cap: no float overflow
    return min(MAX_DELAY_S, BASE_DELAY_S * 2.0**doublings)


def throttle_key(email: str, address: str) -> str:
    """'<email>|<address>' (e-mail lower-cased and trimmed, whether or not such an account exists)."""
    return f"{email.strip().lower()[:320]}|{address[:64]}"[:MAX_KEY_CHARS]


class LoginThrottler:
    """Reads and updates `login_throttle` rows; one per app (app.state.login_throttle)."""

    def __init__(self, now: Clock = utcnow) -> None:
        self.now = now

    def retry_after(self, session: Session, key: str) -> float:
        """Seconds until `key` may try again (0.0: now)."""
        row = session.get(LoginThrottle, key)
        blocked_until = as_utc(row.blocked_until) if row is not None else None
        if blocked_until is None:
            return 0.0
        return max(0.0, (blocked_until - self.now()).total_seconds())

    def record_failure(self, session: Session, key: str) -> float:
        """Count a wrong password for `key`; returns the wait it now has before the next attempt."""
        for _ in range(2):  # a concurrent first failure may insert the row between our read and our insert
            try:
                return self._record(session, key)
            except IntegrityError:
                session.rollback()
        return self._record(session, key)

    def _record(self, session: Session, key: str) -> float:
        now = self.now()
        row = session.get(LoginThrottle, key, with_for_update=True) or LoginThrottle(key=key)
        row.failures += 1
        row.last_failure_at = now
        wait = backoff_seconds(row.failures)
        row.blocked_until = now + timedelta(seconds=wait) if wait > 0 else None
        session.add(row)
        session.commit()
        return wait

    def clear(self, session: Session, key: str) -> None:
        row = session.get(LoginThrottle, key)
        if row is not None:
            session.delete(row)
            session.commit()
