"""Find routers and CLI sub-apps in a package: each module contributes its own, no central list to edit."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from types import ModuleType


def iter_modules(package_name: str) -> Iterator[ModuleType]:
    """Import every non-private module of a package, in name order (stable OpenAPI and --help)."""
    package = importlib.import_module(package_name)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        yield importlib.import_module(f"{package_name}.{info.name}")
