"""Helpers the browser tests share."""

from __future__ import annotations

import time
from typing import Any


def wait_until(page: Any, expression: str, timeout_s: float = 30.0) -> None:
    """Poll a JavaScript expression from Python (the CSP forbids the eval that wait_for_function uses)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if page.evaluate(expression):
                return
        except Exception:  # the page may be navigating or swapping; try again
            pass
        page.wait_for_timeout(100)
    raise AssertionError(f"timed out waiting for {expression}")
