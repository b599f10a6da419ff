"""benchmarks/screenshots.py: the screenshot script starts the real server, drives Debian's chromium and writes
a PNG per page and colour scheme (here one page, light, into a temporary folder)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e.conftest import CHROMIUM
from tests.paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "benchmarks" / "screenshots.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_screenshot_of_one_page_in_light_mode(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not installed at {CHROMIUM} (make system-deps)")
    out = tmp_path / "shots"
    args = ["--page", "builder-estimate", "--scheme", "light", "--timeout", "120", "--chromium", CHROMIUM]
    status = _script().main([str(out), *args])
    assert status == 0
    written = sorted(out.iterdir())
    assert [p.name for p in written] == ["builder-estimate-light.png"]
    data = written[0].read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
