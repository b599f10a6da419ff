"""A bounded, thread-safe LRU with hit and miss counts: the store behind the estimate response cache
(app.services.estimate.ResponseCache) and the planning cost panel's cache (app.services.cost_panel_cache.PanelCache).
cachetools caches are not thread-safe (a read reorders the LRU), so every access holds one lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

V = TypeVar("V")


class CountingLRU(Generic[V]):
    """At most `size` values, least recently used dropped first; `hits` and `misses` count the lookups (the tests
    and benchmarks read them). Subclasses name their own get and put on `_lookup` and `_store`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: LRUCache[Hashable, V] = LRUCache(maxsize=size)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _lookup(self, key: Hashable, accept: Callable[[V], bool] | None = None) -> V | None:
        """The value stored under `key`, counted as a hit; None, counted as a miss, when there is none or `accept`
        refuses it (e.g. computed under a catalog generation that has moved on)."""
        with self._lock:
            value = self._items.get(key)
            if value is None or (accept is not None and not accept(value)):
                self.misses += 1
                return None
            self.hits += 1
            return value

    def _store(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._items[key] = value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
