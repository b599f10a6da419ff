"""Catalog pages through the real app: tables with units, sources, stale marking, htmx partials, price forms."""

from __future__ import annotations

import re
import uuid
from datetime import date, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer
from tests.paths import DATA_DIR

HX = {"HX-Request": "true"}


@pytest.mark.parametrize(
    ("path", "texts"),
    [
        (
            "/catalog/gpus",
            ["BF16 peak (TFLOP/s)", "Memory (GiB)", "Scale-up bandwidth (GB/s per direction)", "TDP (W)"],
        ),
        (
            "/catalog/models",
            ["Hidden size", "KV heads", "Published parameters (billions)", "Mixture of experts"],
        ),
        ("/catalog/interconnects", ["Bandwidth (GB/s per direction)", "Latency (µs)", "Scale-out"]),
        ("/catalog/prices", ["Price (USD)", "USD per GPU-hour", "Includes", "Date", "Source"]),
    ],
)
def test_pages_render_with_units_and_sources(client: Any, path: str, texts: list[str]) -> None:
    r = client.get(path)
    assert r.status_code == 200 and "HX-Request" in r.headers["vary"].split(", ")
    for text in texts:
        assert text in r.text, text
    assert '<details class="source">' in r.text
    assert "<html" in r.text
    # no inline script: every <script> loads a file
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", r.text))


def test_gpu_rows_show_datasheet_numbers(client: Any) -> None:
    html = client.get("/catalog/gpus").text
    row = re.search(r'<a href="/catalog/gpus/H100-SXM">H100-SXM</a>.*?</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(0))
    # BF16, FP8, FP4 peaks (Hopper has no FP4 tensor cores), measured BF16 matmul, HBM, bandwidth, scale-up
    assert cells[:7] == ["989", "1,979", "—", "794.5", "80", "3,350", "450"]
    b200 = re.search(r'<a href="/catalog/gpus/B200">B200</a>.*?</tr>', html, re.S)
    assert b200 is not None
    assert re.findall(r'<td class="num">([^<]*)</td>', b200.group(0))[:3] == ["2,250", "4,500", "9,000"]


def test_detail_pages_and_missing_names(client: Any) -> None:
    gpu = client.get("/catalog/gpus/h200")
    assert gpu.status_code == 200 and "H200-SXM" in gpu.text and "Prices for this GPU" in gpu.text
    model = client.get("/catalog/models/Mixtral 8x22B")
    assert model.status_code == 200 and "8 routed experts, top-2" in model.text
    missing = client.get("/catalog/models/Mixtral-8x8B")
    assert missing.status_code == 404
    assert '<a href="/catalog/models/Mixtral-8x7B">Mixtral-8x7B</a>' in missing.text


@pytest.mark.parametrize(("name", "per_node"), [("H100-SXM", 8), ("GB200", 4)])
def test_gpu_page_opens_the_builder_on_that_gpu(client: Any, name: str, per_node: int) -> None:
    page = client.get(f"/catalog/gpus/{name}").text
    link = re.search(r'<a id="plan-with-gpu" href="([^"]+)">', page)
    assert link is not None
    builder = client.get(link.group(1).replace("&amp;", "&"))
    assert builder.status_code == 200
    assert f'<option value="{name}" selected>' in builder.text
    per_node_input = re.search(r'<input[^>]*id="f-gpus_per_node"[^>]*>', builder.text)
    assert per_node_input is not None and f'value="{per_node}"' in per_node_input.group(0)


def test_model_search_full_page_and_partial(client: Any) -> None:
    full = client.get("/catalog/models", params={"q": "deepseek"})
    assert full.status_code == 200 and "<html" in full.text
    partial = client.get("/catalog/models", params={"q": "deepseek"}, headers=HX)
    assert partial.status_code == 200 and "<html" not in partial.text
    assert partial.text.lstrip().startswith('<div id="model-table"')
    names = set(re.findall(r'<a href="/catalog/models/[^"]+">([^<]+)</a>', partial.text))
    assert names == {"DeepSeek-V3", "DeepSeek-V2-Lite"}
    none = client.get("/catalog/models", params={"q": "zzzz"}, headers=HX)
    assert "No model matches" in none.text


def test_stale_prices_are_marked_in_words(client: Any) -> None:
    html = client.get("/catalog/prices", params={"category": "onprem_server"}).text
    # each category has its own threshold: a year for server prices, six months for GPU rental prices
    assert '<span class="stale" title="older than 365 days">Stale</span>' in html
    cloud = client.get("/catalog/prices", params={"category": "cloud_gpu"}).text
    assert '<span class="stale" title="older than 183 days">Stale</span>' in cloud
    assert "GPU cloud prices 183 days" in cloud
    partial = client.get(
        "/catalog/prices", params={"category": "power"}, headers=HX | {"HX-Target": "price-table"}
    )
    assert partial.text.lstrip().startswith('<div id="price-table"')
    assert all(c == "power" for c in re.findall(r"</th>\s*<td>([a-z_]+)</td>", partial.text))


def _form(**overrides: str) -> dict[str, str]:
    return {
        "item": f"web-row-{uuid.uuid4().hex[:6]}",
        "category": "cloud_gpu",
        "vendor": "ExampleCloud",
        "pricing_model": "on-demand",
        "price_usd": "2.75",
        "unit": "GPU-hour",
        "usd_per_gpu_hour": "2.75",
        "gpu_name": "H100",
        "gpus_per_unit": "1",
        "price_date": date.today().isoformat(),
        "source": "quote W-1",
        "includes": "GPU-hour with host share",
        "confidence": "quote",
        "notes": "",
    } | overrides


def _row_id(client: Any, item: str) -> str:
    rows = client.get("/api/v1/prices", params={"builtin": False, "limit": 1000}).json()["data"]
    return next(r["id"] for r in rows if r["item"] == item)


def test_add_edit_delete_a_price_row_with_plain_forms(client: Any) -> None:
    form = _form()
    r = client.post("/catalog/prices", data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/catalog/prices?")
    row_id = _row_id(client, form["item"])
    page = client.get("/catalog/prices", params={"mine": "1"}).text
    assert form["item"] in page and f"/catalog/prices/{row_id}/edit" in page
    edit = client.get(f"/catalog/prices/{row_id}/edit")
    assert edit.status_code == 200 and "Save changes" in edit.text and 'value="2.75"' in edit.text
    r = client.post(
        f"/catalog/prices/{row_id}", data=_form(item=form["item"], price_usd="2.5"), follow_redirects=False
    )
    assert r.status_code == 303
    assert client.get(f"/api/v1/prices/{row_id}").json()["price_usd"] == 2.5
    r = client.post(f"/catalog/prices/{row_id}/delete", follow_redirects=False)
    assert r.status_code == 303
    assert client.get(f"/api/v1/prices/{row_id}").status_code == 404


def test_htmx_forms_return_the_price_book_block(client: Any) -> None:
    form = _form(price_date=(date.today() - timedelta(days=365)).isoformat())
    r = client.post("/catalog/prices", data=form, headers=HX)
    assert r.status_code == 200 and "<html" not in r.text
    assert r.text.lstrip().startswith('<div id="price-book">')
    assert f"Added “{form['item']}”." in r.text
    row_id = _row_id(client, form["item"])
    r = client.post(f"/catalog/prices/{row_id}/delete", headers=HX)
    assert r.status_code == 200 and f"Deleted “{form['item']}”." in r.text


def test_form_errors_are_shown_per_field(client: Any) -> None:
    r = client.post("/catalog/prices", data=_form(price_usd="lots", source=""), follow_redirects=False)
    assert r.status_code == 422
    errors = dict(re.findall(r'<p class="field-error" id="pf-([a-z_]+)-error">([^<]+)</p>', r.text))
    assert set(errors) == {"price_usd", "source"}
    assert 'aria-invalid="true"' in r.text and 'value="lots"' in r.text  # the user's input is kept
    hx = client.post("/catalog/prices", data=_form(gpu_name="H1000"), headers=HX)
    assert hx.status_code == 200 and 'id="pf-gpu_name-error"' in hx.text


def test_builtin_rows_cannot_be_edited_from_the_page(client: Any) -> None:
    builtin = client.get("/api/v1/prices", params={"builtin": True, "limit": 1}).json()["data"][0]
    assert client.get(f"/catalog/prices/{builtin['id']}/edit").status_code == 403
    r = client.post(f"/catalog/prices/{builtin['id']}/delete", follow_redirects=False)
    assert r.status_code == 403 and "read-only" in r.text
    assert client.get(f"/api/v1/prices/{builtin['id']}").status_code == 200


def test_import_a_model_from_a_pasted_config(client: Any) -> None:

    config = (DATA_DIR / "hf" / "Qwen2.5-7B.json").read_text()
    name = f"pasted-{uuid.uuid4().hex[:6]}"
    r = client.post("/catalog/models", data={"name": name, "hf_config": config}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/catalog/models/{name}"
    page = client.get(f"/catalog/models/{name}")
    # the importer shows the parameter count: Qwen2.5-7B's 7,615,616,512 (its model card: 7.61B; q, k, v
    # biases, no output-projection bias)
    assert page.status_code == 200 and "7,615,616,512" in page.text
    listed = client.get("/catalog/models", params={"q": name}, headers=HX)
    assert "7.616" in listed.text and client.get(f"/api/v1/models/{name}").json()["params"] == 7_615_616_512
    assert client.delete(f"/api/v1/models/{name}").status_code == 204
    bad = client.post(
        "/catalog/models", data={"name": "x", "hf_config": '{"model_type": "llama"}'}, headers=HX
    )
    assert bad.status_code == 200 and "num_hidden_layers" in bad.text and "<html" not in bad.text


def test_pages_over_the_real_server(live_server: LiveServer) -> None:
    for path in ("/catalog/gpus", "/catalog/models", "/catalog/interconnects", "/catalog/prices"):
        r = httpx.get(live_server.url + path, timeout=30)
        assert r.status_code == 200 and "content-security-policy" in r.headers
    api = httpx.get(live_server.url + "/api/v1/gpus/GB200", timeout=30).json()
    assert api["scaleup_kind"] == "nvl72"
