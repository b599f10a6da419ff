"""Where the non-Python resources live: migrations/, templates/, static/.

In a source checkout (and an editable install) they sit beside the `app` package; an image that installs
the package as a wheel copies them elsewhere and names the folder in CLUSTERPLAN_RESOURCE_DIR.
"""

from __future__ import annotations

import os
from pathlib import Path


def resource_dir() -> Path:
    configured = os.environ.get("CLUSTERPLAN_RESOURCE_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parent.parent


MIGRATIONS_DIR = resource_dir() / "migrations"
TEMPLATES_DIR = resource_dir() / "templates"
STATIC_DIR = resource_dir() / "static"
