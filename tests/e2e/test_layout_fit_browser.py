"""At a laptop's width (1280 × 800) every table of the plan builder and of /network fits its box, in a real browser
(Debian's chromium via Playwright) against the real server: the builder's table of cloud price options, beside its
chart, was 409 px wide in a 350 px box (its right columns cut off), and /network's bus bandwidth table, a column per
fabric preset, was 1,157 px wide in 888 px. Each table's box (its scroll wrapper, else its parent) scrolls no
further than it is wide, the table ends inside it, and the page is no wider than the window."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import LiveServer, start_live_server
from tests.e2e.browser_support import wait_until
from tests.e2e.test_walk_fixes_browser import LAPTOP, SETTLED

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# each table of the page (the fabric presets' <details> opened) with its box's scroll and client widths, the right
# edges of both, and the page's scroll width against the window's
MEASURE = """() => {
  document.querySelectorAll("main details").forEach(d => { d.open = true; });
  const tables = Array.from(document.querySelectorAll("main table")).map(t => {
    const box = t.closest(".chart-table, .table-scroll") || t.parentElement;
    return {caption: (t.caption ? t.caption.textContent : t.id).slice(0, 60), scroll: box.scrollWidth,
            client: box.clientWidth, right: t.getBoundingClientRect().right,
            boxRight: box.getBoundingClientRect().right};
  });
  return {tables, page: document.documentElement.scrollWidth, window: window.innerWidth}; }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser-fit")
    live = start_live_server(f"sqlite:///{tmp / 'fit.db'}", tmp)
    yield live
    live.stop()


def _measure(browser: Any, server: LiveServer, path: str) -> dict[str, Any]:
    context = browser.new_context(viewport=LAPTOP)
    server.sign_in(context)
    page = context.new_page()
    page.goto(server.url + path)
    wait_until(page, SETTLED, timeout_s=90)
    page.evaluate(MEASURE)  # opens the <details>; measured again once their tables are laid out
    page.wait_for_timeout(100)
    found = page.evaluate(MEASURE)
    context.close()
    return dict(found)


@pytest.mark.parametrize(
    ("path", "caption"),
    [
        ("/plans/new", "Cost per run on"),
        ("/network", "Bus bandwidth (GB/s)"),
        # the widest sweep (ten message sizes) with the longest preset name marked "(chosen)"
        ("/network?min_size=8+KiB&fabric=roce-ecmp-scattered-8x400", "Bus bandwidth (GB/s)"),
    ],
)
def test_every_table_fits_its_box_at_1280(browser: Any, server: LiveServer, path: str, caption: str) -> None:
    found = _measure(browser, server, path)
    tables = found["tables"]
    assert any(t["caption"].startswith(caption) for t in tables), [t["caption"] for t in tables]
    for t in tables:
        assert t["scroll"] <= t["client"] + 1, f"{path}: scrolls, {t}"
        assert t["right"] <= t["boxRight"] + 1, f"{path}: runs past its box, {t}"
    assert found["page"] <= found["window"], f"{path}: the page is wider than the window, {found}"
