"""In a real browser (Debian's chromium via Playwright): planner mode with no layout that fits offers the nearest
node counts and batches, a click sets the field and the planner then ranks layouts; "Rank by" cost reorders the
ranking in place; a light MoE recommendation's note links the heavier layout into the by-hand inputs. On the
benchmarks page the launch form's GPU follows the chosen node and device."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import LiveServer, start_live_server
from tests.e2e.browser_support import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser-rank-fix")
    live = start_live_server(f"sqlite:///{tmp / 'browser.db'}", tmp)
    yield live
    live.stop()


def signed_in_page(browser: Any, server: LiveServer) -> tuple[Any, Any, list[str]]:
    """A signed-in browser context, a page in it, and the page's script errors and console errors as they come."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    server.sign_in(context)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: (
            errors.append(msg.text) if msg.type == "error" and "favicon" not in str(msg.location) else None
        ),
    )
    return context, page, errors


def test_nearest_fix_sets_the_field_and_rank_by_cost_reorders(browser: Any, server: LiveServer) -> None:
    context, page, errors = signed_in_page(browser, server)
    page.goto(f"{server.url}/plans/new?mode=planner&model=Llama-3-70B&nodes=600&global_batch=256")
    fix = page.locator("#nearest-fix")
    fix.wait_for(timeout=30000)
    assert "divisibility" in fix.inner_text()
    link = fix.locator('a[data-sets="nodes"]').first
    target = link.get_attribute("data-value")
    assert target and int(target) < 600
    link.click()
    # the link set the field and the results updated in place, with no page load
    assert page.input_value("#f-nodes") == target
    page.wait_for_url(re.compile(rf"nodes={target}\b"), timeout=30000)
    page.locator("#rank-title").wait_for(timeout=30000)
    wait_until(page, "!document.querySelector('#nearest-fix') && !!document.querySelector('#rank-by-note')")
    assert "Ranked by time to train." in page.inner_text("#rank-by-note")

    assert page.locator('label[for="f-rank_by"]').inner_text().startswith("Planner ranks layouts by")
    page.select_option("#f-rank_by", "cost")
    page.wait_for_url(re.compile(r"rank_by=cost"), timeout=30000)
    wait_until(page, "(document.querySelector('#rank-by-note') || {}).textContent.includes('cost per run')")
    assert page.locator("caption", has_text="Best layouts by cost per run").count() == 1
    assert errors == []
    context.close()


def test_benchmark_form_gpu_follows_the_node_and_device(browser: Any, server: LiveServer) -> None:
    import httpx

    api = httpx.Client(base_url=server.url + "/api/v1", headers=server.headers, timeout=30)
    for name, device in (("h200-node", "NVIDIA H200"), ("cpu-node", "cpu (x86_64)")):
        token = api.post("/nodes", json={"name": name}).json()["token"]
        registered = api.post(
            "/agent/register",
            headers={"Authorization": f"Bearer {token}"},
            json={"hostname": name, "info": {"devices": [{"name": device}]}},
        )
        assert registered.status_code == 200
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    server.sign_in(context)
    page = context.new_page()
    page.goto(f"{server.url}/benchmarks")
    page.wait_for_load_state("load")
    assert page.input_value("#l-gpu") == "H100-SXM"
    page.select_option("#l-node", "h200-node")
    wait_until(page, "document.getElementById('l-gpu').value === 'H200-SXM'", 10)
    page.select_option("#l-device", "cpu")
    wait_until(page, "document.getElementById('l-gpu').value === ''", 10)
    page.select_option("#l-device", "cuda")
    wait_until(page, "document.getElementById('l-gpu').value === 'H200-SXM'", 10)
    page.select_option("#l-device", "auto")
    page.select_option("#l-node", "cpu-node")
    wait_until(page, "document.getElementById('l-gpu').value === ''", 10)
    page.select_option("#l-node", "")
    wait_until(page, "document.getElementById('l-gpu').value === 'H100-SXM'", 10)
    context.close()


def light_moe_search_note(page: Any, server: LiveServer, note_id: str) -> Any:
    """The planner's search for one B200 node training Qwen3-30B-A3B on the all-to-all dispatcher, whose
    recommendation has light MoE layer passes, and the note `note_id` above its ranking once it is shown."""
    page.goto(f"{server.url}/plans/new?mode=planner&model=Qwen3-30B-A3B&gpu=B200&nodes=1&global_batch=256")
    note = page.locator(f"#{note_id}")
    note.wait_for(timeout=60000)
    return note


def test_light_moe_note_links_the_heavier_layout(browser: Any, server: LiveServer) -> None:
    context, page, errors = signed_in_page(browser, server)
    note = light_moe_search_note(page, server, "light-moe-note")
    assert "median" in note.inner_text() and "heavier" in note.inner_text()
    link = note.locator("a", has_text="Use the heavier layout")
    href = link.get_attribute("href") or ""
    wanted = dict(re.findall(r"[?&](micro_batch|zero|recompute)=([^&]+)", href))
    assert set(wanted) == {"micro_batch", "zero", "recompute"}
    link.click()
    # the by-hand inputs now hold that layout
    page.wait_for_url(re.compile(r"mode=manual"), timeout=30000)
    page.locator("#f-micro_batch").wait_for(timeout=30000)
    assert page.input_value("#f-micro_batch") == wanted["micro_batch"]
    assert page.input_value("#f-zero") == wanted["zero"]
    assert page.input_value("#f-recompute") == wanted["recompute"]
    assert errors == []
    context.close()


def test_dispatcher_note_searches_again_on_hybridep(browser: Any, server: LiveServer) -> None:
    context, page, errors = signed_in_page(browser, server)
    # the same light recommendation: the note names HybridEP and links a search on it
    note = light_moe_search_note(page, server, "moe-dispatcher-note")
    assert "HybridEP" in note.inner_text() and "median" in note.inner_text()
    note.locator("a", has_text="Search with HybridEP").click()
    page.wait_for_url(re.compile(r"moe_dispatcher=hybridep"), timeout=30000)
    page.locator("#light-moe-note").wait_for(timeout=60000)  # the results of the search on HybridEP
    # the planner now searches on HybridEP: the dispatcher input holds it and the note has nothing left to say
    assert page.input_value("#f-moe_dispatcher") == "hybridep"
    assert page.locator("#moe-dispatcher-note").count() == 0
    assert errors == []
    context.close()
