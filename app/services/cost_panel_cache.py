"""The planning cost panel's cache: the panel (app.services.plan_costs.cost_payload, the builder's cost per run and
TCO against every cloud option) for the same inputs, viewer and price rows is computed once.

The panel is a pure function of its inputs (the GPU, the cluster's GPUs, nodes and node size, the GPU-hours and
goodput: plan_costs.CostInputs, all of what it reads of a scenario), the formulas and the built-in files (the
on-prem server rows and network unit prices, read once per process), today's date (a price is flagged stale by
its age) and the cloud price rows `viewer`'s default quotes rest on. The key holds every one of them: the
inputs, the app and formula versions, the database, the principal quoted for (catalog.quoted_for: the user's id,
None for an anonymous caller), today (prices._today, the price book's clock) and every column of every
visible cloud price row of the GPU (prices.default_cloud_row_values, one light query per call). A price row
created, edited or deleted, in this process or any other sharing the database, changes that last part, so the
next call misses; a user's private row is in their own key only, and no entry is shared between two principals
even when they see the same rows.

Entries are the panel pickled (bytes this process made itself, never read from outside it) in a bounded,
lock-guarded cachetools LRU; hits and misses are both unpickled from those bytes, so every caller gets its own
copy, equal to the panel computed afresh in every value and type, and none can change a stored entry (the planning
service moves the panel's assumptions out of it). Pickle, not JSON: for a panel of some 2,500 numbers it stores in a
twentieth of JSON's time and reads in a fifth. Only panels are stored, not the reasons there is none.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Hashable
from typing import Any

from sqlmodel import Session

import app as app_pkg
from app.services import prices
from app.services.catalog import Actor, quoted_for
from app.services.counting_lru import CountingLRU

# An entry is ~60 KB with the 22 H100 options of the built-in price book (the panel pickled, ~28 KB, and its key,
# which holds the price rows themselves): at most ~8 MB, about the estimate response cache's ~7 MB
# (docs/constants.md#cost-panel-cache). A key is one viewer's one cluster and run length, so a few builder users'
# recent scenarios fit; an evicted panel is only recomputed (~4 ms).
CACHE_SIZE = 128

CacheKey = tuple[Any, ...]


class PanelCache(CountingLRU[bytes]):
    """A thread-safe LRU of encoded panels, with its hit and miss counts."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        super().__init__(size)

    def get(self, key: CacheKey) -> bytes | None:
        return self._lookup(key)

    def put(self, key: CacheKey, content: bytes) -> None:
        self._store(key, content)


panel_cache = PanelCache()


def panel_key(session: Session, gpu: str, inputs: Hashable, viewer: Actor) -> CacheKey | None:
    """The key of the panel for `inputs` at `viewer`'s prices (see the module's docstring); None when the GPU is
    not a catalog GPU (the panel then says why there is none, uncached)."""
    try:
        rows = prices.default_cloud_row_values(session, gpu, viewer=viewer)
    except LookupError:
        return None
    return (
        app_pkg.__version__,
        app_pkg.FORMULA_VERSION,
        str(session.get_bind().engine.url),
        quoted_for(viewer),
        inputs,
        prices._today(),
        rows,
    )


def cached(
    session: Session,
    gpu: str,
    inputs: Hashable,
    viewer: Actor,
    compute: Callable[[], dict[str, Any] | str],
) -> dict[str, Any] | str:
    """The stored panel for the key, or `compute()`'s, stored when it is a panel (a str says why there is none)."""
    key = panel_key(session, gpu, inputs, viewer)
    if key is None:
        return compute()
    content = panel_cache.get(key)
    if content is None:
        panel = compute()
        if isinstance(panel, str):
            return panel
        content = pickle.dumps(panel, protocol=pickle.HIGHEST_PROTOCOL)
        panel_cache.put(key, content)
    stored: dict[str, Any] = pickle.loads(content)  # bytes pickled above, in this process
    return stored
