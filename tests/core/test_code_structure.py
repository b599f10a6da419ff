"""The complexity exceptions in app/ are exactly the ones docs/architecture.md lists ("Known exceptions")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.paths import ROOT

RULES = ("C901", "PLR0912", "PLR0913", "PLR0915")
ROW = re.compile(r"^\| `(?P<name>[\w.]+)` \| \d+ \| (?P<rules>[A-Z0-9, ]+) \|$")


def _exceptions_in_code(root: Path = ROOT, package: str = "app") -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((root / package).rglob("*.py")):
        lines = path.read_text().splitlines()
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            noqa = re.search(r"noqa: ([A-Z0-9, ]+)", lines[node.lineno - 1])
            codes = {c.strip() for c in noqa.group(1).split(",")} & set(RULES) if noqa else set()
            if codes:
                found[f"{module}.{node.name}"] = codes
    return found


def _exceptions_in_docs() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("### Known exceptions", 1)[1]
    listed: dict[str, set[str]] = {}
    for line in section.splitlines():
        m = ROW.match(line.strip())
        if m:
            listed[m["name"]] = {c.strip() for c in m["rules"].split(",")}
    return listed


def test_every_complexity_exception_is_listed_and_every_listed_one_exists() -> None:
    assert _exceptions_in_code() == _exceptions_in_docs()


def test_the_scan_finds_an_exception(tmp_path: Path) -> None:
    # the check above passes when both sides are empty, so the scan itself is tried on a module that has one
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "def long(a, b, c, d, e, f, g, h, i):  # noqa: PLR0913\n    return a\n\n\ndef short():\n    return 1\n"
    )
    assert _exceptions_in_code(tmp_path, "pkg") == {"pkg.mod.long": {"PLR0913"}}


def test_the_rules_are_switched_on() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    select = re.search(r"^select = \[(.*)\]$", text, re.M)
    assert select is not None
    assert all(f'"{rule}"' in select.group(1) for rule in RULES)
