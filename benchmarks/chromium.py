"""The browser the UI benchmarks, the screenshot script and the browser tests drive: Debian's chromium through
Playwright (Playwright never downloads one), headless, with nothing that reaches the network on its own."""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("CLUSTERPLAN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
