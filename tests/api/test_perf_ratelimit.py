"""Rate limits on the `limits` library: budgets per verified caller, made-up tokens share their address's budget."""

from __future__ import annotations

import secrets

import pytest
from limits.storage import MemoryStorage

from app.hooks.ratelimit import RateLimiter
from tests.auth_support import app_with, bearer, issue_token, remote_client
from tests.conftest import configure_app_database


def fake_token() -> str:
    return "cpt_" + secrets.token_urlsafe(32)


def test_limiter_allows_the_budget_then_says_how_long_to_wait() -> None:
    limiter = RateLimiter(5)
    assert [limiter.acquire("a") for _ in range(5)] == [0.0] * 5
    wait = limiter.acquire("a")
    assert 1.0 <= wait <= 60.0  # at most one window
    assert limiter.acquire("b") == 0.0  # keys are independent
    disabled = RateLimiter(0)
    assert not disabled.enabled and all(disabled.acquire("x") == 0.0 for _ in range(100))


class FrozenTime:
    """Stands in for the `time` module limits' memory storage and our limiter read, so the test sets the clock."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def test_the_limit_holds_across_a_window_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three hits a minute: the fourth within 60 s of the first is refused, wherever the minute edge falls
    (the sliding-window counter let it through when the first hit came 0.2 s before an edge)."""
    import limits.storage.memory

    import app.hooks.ratelimit as ratelimit

    clock = FrozenTime(1_800_000_059.8)  # 0.2 s before a whole minute
    monkeypatch.setattr(limits.storage.memory, "time", clock)
    monkeypatch.setattr(ratelimit, "time", clock)
    limiter = RateLimiter(3)
    waits = []
    for step in (0.0, 0.4, 0.6, 0.8):
        clock.now += step
        waits.append(limiter.acquire("a"))
    assert waits[:3] == [0.0] * 3
    assert 58.0 <= waits[3] <= 60.0  # until the first hit is a minute old
    clock.now += 60.0
    assert limiter.acquire("a") == 0.0


def test_limiters_sharing_a_store_keep_their_counts_apart() -> None:
    storage = MemoryStorage()
    api, login = RateLimiter(2, storage, "api"), RateLimiter(2, storage, "login")
    assert [api.acquire("ip:x") for _ in range(2)] == [0.0, 0.0]
    assert login.acquire("ip:x") == 0.0  # same key and amount, other namespace
    assert api.acquire("ip:x") > 0


def test_made_up_tokens_share_the_address_budget(sqlite_app_url: str) -> None:
    configure_app_database(sqlite_app_url)
    client = remote_client(app_with(rate_limit_per_minute=3), client=("203.0.113.61", 5000))
    statuses = [client.get("/api/v1/gpus", headers=bearer(fake_token())).status_code for _ in range(3)]
    assert statuses == [401, 401, 401]  # each one refused by the auth layer, each one counted
    assert client.get("/api/v1/gpus").status_code == 429  # ... on the address: no budget left for anyone
    limited = client.get("/api/v1/gpus", headers=bearer(fake_token()))
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


def test_a_verified_token_has_its_own_budget(sqlite_app_url: str) -> None:
    configure_app_database(sqlite_app_url)
    token = issue_token("limits-reader@example.com", ["plans:read"], is_admin=False)
    app = app_with(rate_limit_per_minute=3)
    client = remote_client(app, client=("203.0.113.62", 5000))
    assert [client.get("/api/v1/gpus").status_code for _ in range(4)] == [200, 200, 200, 429]
    # The address is spent, but the token is verified before counting: its owner's own budget.
    own = [client.get("/api/v1/auth/me", headers=bearer(token)).status_code for _ in range(4)]
    assert own == [200, 200, 200, 429]
    assert len(app.state.verified_tokens) == 1
    # Another address has its own budget.
    other = remote_client(app, client=("203.0.113.63", 5000))
    assert other.get("/api/v1/gpus").status_code == 200


def test_sign_in_posts_are_limited_per_address(sqlite_app_url: str) -> None:
    configure_app_database(sqlite_app_url)
    client = remote_client(app_with(login_rate_limit_per_minute=2), client=("203.0.113.64", 5000))
    wrong = {"email": "nobody@example.com", "password": "not the password"}
    statuses = [client.post("/api/v1/auth/login", json=wrong).status_code for _ in range(3)]
    assert statuses[:2] != [429, 429] and statuses[2] == 429
    limited = client.post("/login", data=wrong)  # the form shares the address's sign-in budget
    assert limited.status_code == 429 and "sign-in attempts" in limited.text
