"""A planning session in a real browser (Debian's chromium via Playwright) against the real server:
build a plan, charts render without console errors, save, reload by URL, compare, export; dark mode
re-draws the charts; axe finds no serious or critical accessibility violations on any page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, start_live_server
from tests.e2e.browser_support import wait_until
from tests.paths import VENDOR_DIR
from tests.plans_support import small_scenario

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AXE = VENDOR_DIR / "axe-4.14.1.min.js"


# The module's server: every new page signs in as its administrator (there is no anonymous admin).
SIGNED_IN: dict[str, LiveServer] = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser-plans")
    live = start_live_server(f"sqlite:///{tmp / 'browser.db'}", tmp)
    SIGNED_IN["server"] = live
    yield live
    live.stop()


class Console:
    """Collects console errors and page errors (a missing favicon is the browser's business, not ours)."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def _console(self, msg: Any) -> None:
        if msg.type != "error":
            return
        url = (msg.location or {}).get("url", "")
        if url.endswith("/favicon.ico"):
            return
        self.errors.append(f"{msg.text} @ {url}")


def _new_page(browser: Any, **kwargs: Any) -> Any:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True, **kwargs)
    SIGNED_IN["server"].sign_in(context)
    return context.new_page()


def _wait_charts(page: Any, ids: tuple[str, ...]) -> None:
    for chart in ids:
        page.wait_for_selector(f"#{chart}[data-drawn] .main-svg", timeout=40000)


def test_plan_session_build_save_reload_compare_export(
    browser: Any, server: LiveServer, tmp_path: Path
) -> None:
    page = _new_page(browser)
    console = Console(page)
    page.goto(server.url + "/plans/new")
    _wait_charts(page, ("chart-memory", "chart-step", "chart-scaling", "chart-cost", "chart-goodput"))
    assert page.locator("#results").get_by_text("Fits", exact=False).first.is_visible()
    # the headline's memory, step time, wall-clock and compute time, GPU-hours and cost carry their accuracy bands,
    # and the note says what they rest on
    ranges = page.locator(".headline .range")
    assert ranges.count() == 6 and all("likely" in t for t in ranges.all_inner_texts())
    assert "USD" in page.locator("#cost-likely").inner_text()
    assert "published runs of this kind" in page.locator("#accuracy-note").inner_text()

    # change an input: results update in place and the address bar reproduces the view
    page.fill("#f-nodes", "4")
    page.wait_for_url(re.compile(r"nodes=4"), timeout=30000)
    wait_until(
        page,
        "document.querySelector('input[name=scenario]') !== null && "
        "JSON.parse(document.querySelector('input[name=scenario]').value).cluster.nodes === 4",
    )
    _wait_charts(page, ("chart-memory", "chart-step"))
    view_url = page.url
    assert "/plans/new?" in view_url
    step_ms = page.locator("#chart-step + script + .chart-table tfoot td").first.inner_text()

    # a direct load of the pushed URL renders the same view
    page.goto(view_url)
    _wait_charts(page, ("chart-step",))
    assert page.locator("#chart-step + script + .chart-table tfoot td").first.inner_text() == step_ms
    assert page.input_value("#f-nodes") == "4"

    # save
    page.fill("#save-name", "Browser plan")
    page.fill("#save-notes", "built in chromium")
    page.click("#save-button")
    page.wait_for_url(re.compile(r"/plans/[0-9a-f-]{36}$"), timeout=30000)
    plan_url = page.url
    _wait_charts(page, ("chart-memory", "chart-step"))
    assert page.locator("h1").inner_text() == "Browser plan"

    # reload by URL in a fresh context (a shared link)
    other = _new_page(browser)
    other.goto(plan_url)
    assert other.locator("h1").inner_text() == "Browser plan"
    assert "built in chromium" in other.content()
    other.context.close()

    # export CSV and JSON through the links on the page
    with page.expect_download() as info:
        page.click("text=Export CSV")
    csv_text = Path(info.value.path()).read_text()
    assert "provenance,formula_version," in csv_text and "provenance,price_book_date,20" in csv_text
    with page.expect_download() as info:
        page.click("text=Export JSON")
    assert '"calibration_profile"' in Path(info.value.path()).read_text()

    # a second plan through the API, then compare both from the saved-plans list
    plan_id = plan_url.rsplit("/", 1)[1]
    r = httpx.post(
        server.url + "/api/v1/plans",
        json={"name": "Browser plan TP4", "scenario": small_scenario(tp=4, dp=4)},
        headers=server.headers,
        timeout=30,
    )
    assert r.status_code == 201, r.text
    page.goto(server.url + "/plans")
    page.check(f"#cmp-{plan_id}")
    page.check(f"#cmp-{r.json()['id']}")
    page.click("#compare-button")
    page.wait_for_url(re.compile(r"/plans/compare\?"), timeout=30000)
    assert page.locator("tr.differs").count() > 3
    assert page.locator("tr.differs", has_text="Tensor parallel (tp)").get_by_text("≠ differs").is_visible()
    assert console.errors == []
    page.context.close()


def test_charts_follow_dark_mode(browser: Any, server: LiveServer) -> None:
    page = _new_page(browser, color_scheme="light")
    console = Console(page)
    page.goto(server.url + "/plans/new")
    _wait_charts(page, ("chart-step",))

    def tick_colour() -> str:
        return str(page.eval_on_selector("#chart-step .xtick text", "el => getComputedStyle(el).fill"))

    light = tick_colour()
    page.click("#theme-toggle")
    wait_until(
        page, f"getComputedStyle(document.querySelector('#chart-step .xtick text')).fill !== '{light}'"
    )
    assert page.evaluate("window.clusterplanTheme()") == "dark"
    assert tick_colour() != light
    assert console.errors == []
    page.context.close()


def test_keyboard_reaches_inputs_and_updates_results(browser: Any, server: LiveServer) -> None:
    page = _new_page(browser)
    page.goto(server.url + "/plans/new")
    _wait_charts(page, ("chart-step",))
    page.focus("#f-gpus_per_node")
    page.keyboard.press("Tab")  # the next input is the fabric select
    assert page.evaluate("document.activeElement.id") == "f-fabric"
    page.focus("#f-nodes")
    page.keyboard.press("Control+A")
    page.keyboard.type("8")
    page.wait_for_url(re.compile(r"nodes=8"), timeout=30000)
    page.context.close()


def test_optimizer_offload_field_updates_the_host_memory_line(browser: Any, server: LiveServer) -> None:
    page = _new_page(browser)
    page.goto(server.url + "/plans/new")
    _wait_charts(page, ("chart-step",))
    assert page.locator("#host-memory").count() == 0  # nothing offloaded by default
    page.focus("#f-optimizer_offload")
    page.keyboard.press("Control+A")
    page.keyboard.type("1")
    page.wait_for_url(re.compile(r"optimizer_offload=1"), timeout=30000)
    host = page.locator("#host-memory")
    host.wait_for(timeout=30000)
    assert "offloaded optimizer states" in host.inner_text()
    page.context.close()


def test_uneven_pipeline_split_from_the_error_to_the_stage_layers(browser: Any, server: LiveServer) -> None:
    # Llama 3.1 405B (126 layers) on 16 stages: the error names the split that fits; typing it in fixes the plan
    page = _new_page(browser)
    page.goto(
        server.url + "/plans/new?model=Llama-3.1-405B&nodes=32&tp=8&pp=16&recompute=full&global_batch=64"
    )
    problem = page.locator("text=an uneven split fits")
    problem.first.wait_for(timeout=30000)
    assert "first_stage_layers = last_stage_layers = 7" in problem.first.inner_text()
    for name in ("first_stage_layers", "last_stage_layers"):
        page.focus(f"#f-{name}")
        page.keyboard.press("Control+A")
        page.keyboard.type("7")
        page.wait_for_url(re.compile(rf"{name}=7"), timeout=30000)
    # the Assumptions panel (collapsed) lists the layers on every stage
    page.locator("td", has_text="7 + 8 × 14 + 7").first.wait_for(state="attached", timeout=30000)
    _wait_charts(page, ("chart-step",))
    page.context.close()


def test_upload_hf_config_json(browser: Any, server: LiveServer, tmp_path: Path) -> None:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 16,
        "vocab_size": 128256,
        "hidden_act": "silu",
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    page = _new_page(browser)
    console = Console(page)
    page.goto(server.url + "/plans/new")
    _wait_charts(page, ("chart-step",))
    page.click("text=Or use a Hugging Face config.json")
    page.set_input_files("#f-hf-file", str(path))
    wait_until(
        page,
        "document.querySelector('input[name=scenario]') !== null && "
        "JSON.parse(document.querySelector('input[name=scenario]').value).model.num_layers === 16",
    )
    assert "hf_config=" in page.url
    _wait_charts(page, ("chart-memory", "chart-step"))
    assert console.errors == []
    page.context.close()


def _pages(server: LiveServer) -> list[str]:
    r = httpx.post(
        server.url + "/api/v1/plans",
        json={"name": "axe plan", "scenario": small_scenario()},
        headers=server.headers,
        timeout=30,
    )
    r2 = httpx.post(
        server.url + "/api/v1/plans",
        json={"name": "axe plan 2", "scenario": small_scenario(tp=4, dp=4)},
        headers=server.headers,
        timeout=30,
    )
    pid, pid2 = r.json()["id"], r2.json()["id"]
    pages = [
        "/",
        "/plans/new",
        "/plans/new?tp=3",
        "/plans",
        f"/plans/{pid}",
        f"/plans/compare?ids={pid}&ids={pid2}",
    ]
    html = httpx.get(server.url + "/", headers=server.headers, timeout=30).text
    for href in re.findall(r'<nav aria-label="Main">(.*?)</nav>', html, re.S)[0].split('href="')[1:]:
        path = href.split('"', 1)[0]
        if path.startswith("/") and path not in pages:
            pages.append(path)
    return pages


def test_axe_no_serious_violations_on_any_page(browser: Any, server: LiveServer) -> None:
    failures: dict[str, list[str]] = {}
    for scheme in ("light", "dark"):  # the theme follows the system setting: both palettes are checked
        page = _new_page(browser, bypass_csp=True, color_scheme=scheme)  # axe is injected as an inline script
        for path in _pages(server):
            response = page.goto(server.url + path)
            assert response is not None
            if response.status == 404:
                continue  # a page another component has not built yet
            page.wait_for_load_state("load")
            if page.locator(".chart[data-figure]").count():
                page.wait_for_selector(".chart[data-drawn]", timeout=40000)
            page.add_script_tag(path=str(AXE))
            # label-content-name-mismatch (WCAG 2.5.3: a control's name contains its visible text) is enabled
            # explicitly: axe releases before 4.14 kept it off as experimental.
            result = page.evaluate(
                "() => axe.run(document, {resultTypes: ['violations'],"
                " rules: {'label-content-name-mismatch': {enabled: true}}}).then(r => r.violations"
                ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
                ".map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')))"
            )
            if result:
                failures[f"{path} ({scheme})"] = result
        page.context.close()
    assert failures == {}


def test_fp8_parameters_checkbox_from_the_error_to_the_assumption(browser: Any, server: LiveServer) -> None:
    # FP8 parameters on a BF16 run: the error points at the checkbox; switching to FP8 gives the plan and says so
    page = _new_page(browser)
    page.goto(server.url + "/plans/new?dtype=bf16")
    _wait_charts(page, ("chart-step",))
    page.check("#f-fp8_params")
    page.wait_for_url(re.compile(r"fp8_params=1"), timeout=30000)
    problem = page.locator("text=FP8 parameters need the fp8 compute dtype")
    problem.first.wait_for(timeout=30000)
    page.select_option("#f-dtype", "fp8")
    page.wait_for_url(re.compile(r"dtype=fp8"), timeout=30000)
    page.locator("td", has_text="FP8 parameters").first.wait_for(state="attached", timeout=30000)
    _wait_charts(page, ("chart-step",))
    assert page.is_checked("#f-fp8_params")
    page.context.close()


def test_invalid_inputs_show_at_their_fields_and_grey_the_last_valid_result(
    browser: Any, server: LiveServer
) -> None:
    page = _new_page(browser)
    console = Console(page)
    page.goto(server.url + "/plans/new")
    _wait_charts(page, ("chart-step",))
    step_before = page.locator(".headline").inner_text()

    # the browser refuses a negative node count: htmx sends nothing, so the page must say so itself
    page.fill("#f-nodes", "-4")
    wait_until(page, "document.getElementById('results').classList.contains('stale')")
    assert (
        page.locator("#stale-banner").inner_text().startswith("Inputs are invalid: last valid result shown.")
    )
    assert page.locator("#e-nodes").inner_text().startswith("Nodes: ")
    assert page.get_attribute("#f-nodes", "aria-invalid") == "true"
    assert page.locator(".headline").inner_text() == step_before  # the last valid result, greyed

    # valid again: fresh results, no error, no banner
    page.fill("#f-nodes", "2")
    wait_until(page, "!document.getElementById('results').classList.contains('stale')")
    wait_until(page, "document.getElementById('e-nodes') === null")
    assert page.get_attribute("#f-nodes", "aria-invalid") is None

    # the server refuses 3 pipeline stages on 16 GPUs: the message sits at the pipeline field, with its label
    page.fill("#f-pp", "3")
    wait_until(page, "document.getElementById('e-pp') !== null")
    assert (
        page.locator("#e-pp")
        .inner_text()
        .startswith("Pipeline stages: the cluster's 16 GPUs are not divisible")
    )
    assert page.locator("#e-tp").count() == 0
    page.wait_for_url(re.compile(r"pp=3"), timeout=30000)  # the address bar still reproduces what was typed
    assert "stale" in (page.get_attribute("#results", "class") or "")
    assert page.locator("#stale-banner li a").inner_text() == "Pipeline stages"
    assert page.locator(".headline").inner_text() == step_before

    # a reload of a refused value keeps what was typed beside its error, not the default
    page.goto(server.url + "/plans/new?nodes=-4")
    assert page.input_value("#f-nodes") == "-4"
    assert "Error:" in page.locator("#d-nodes").inner_text()
    assert console.errors == []
    page.context.close()


def test_planner_mode_takes_the_ignored_layout_inputs_out_of_the_tab_order(
    browser: Any, server: LiveServer
) -> None:
    page = _new_page(browser)
    console = Console(page)
    page.goto(server.url + "/plans/new")
    _wait_charts(page, ("chart-step",))
    inert = "(name) => document.getElementById('f-' + name).closest('.field').inert"
    assert page.evaluate(inert, "tp") is False
    page.check('input[name="mode"][value="planner"]')
    assert page.evaluate(inert, "tp") is True and page.evaluate(inert, "micro_batch") is True
    assert page.evaluate(inert, "microbatch_group") is True  # a generic knob, named by the server
    assert page.evaluate(inert, "dtype") is False  # precision still counts when the planner chooses
    page.check('input[name="mode"][value="manual"]')
    assert page.evaluate(inert, "tp") is False
    # let the two mode changes' requests land (each pushes its address) before following the skip link
    page.wait_for_url(re.compile(r"mode=manual"), timeout=30000)
    wait_until(page, "!document.getElementById('results').hasAttribute('aria-busy')")
    page.click("a.skip-results")
    wait_until(page, "window.location.hash === '#results'")
    assert console.errors == []
    page.context.close()
