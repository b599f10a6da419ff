"""benchmarks/screenshots.py --docs: the docs' and README's two screenshots, under the names they link to, from the
builder and compare pages in the light scheme, into docs/screenshots (the arguments only: no browser is started)."""

from __future__ import annotations

import importlib.util
import re
import sys
from types import ModuleType

from tests.paths import ROOT


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "benchmarks" / "screenshots.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_docs_writes_the_linked_screenshots_from_the_builder_and_compare_pages() -> None:
    script = _script()
    args = script.parse_args(["--docs"])
    assert args.out == ROOT / "docs" / "screenshots"
    assert args.page == ["builder-estimate", "compare"] and args.scheme == ["light"]
    names = {f"{stem}.png" for stem, _ in script.DOCS_SHOTS.values()}
    linked = set()
    for doc in (ROOT / "README.md", ROOT / "docs" / "ui.md"):
        linked |= set(re.findall(r"screenshots/([\w-]+\.png)", doc.read_text()))
    # every screenshot the docs link to is one the script writes, and each one it writes is in the repository
    assert linked == names
    assert all((ROOT / "docs" / "screenshots" / name).is_file() for name in names)


def test_without_docs_the_pages_go_to_the_output_folder_by_page_and_scheme() -> None:
    args = _script().parse_args([])
    assert args.out == ROOT / "out" / "screenshots" and args.page is None and args.scheme is None
