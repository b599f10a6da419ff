"""The fabric select of the web cost page: the catalog's presets, priced through the same TCO service as the API,
the priced fabric named on the result, and an unknown fabric refused beside its field."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.web.pages._panels import fabric_names

HX = {"HX-Request": "true"}


def _api_network(client: Any, **body: Any) -> dict[str, Any]:
    req = {"onprem": {"nodes": 128, "gpus_per_node": 8}, "utilisation": 0.7, "months": 48} | body
    reply = client.post("/api/v1/cost/tco", json=req)
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["network"])


def _priced(html: str) -> str:
    hit = re.search(r'<dd id="network-fabric">(.*?)</dd>', html, re.S)
    assert hit, "the result names no priced fabric"
    return hit.group(1)


def test_the_select_lists_the_catalog_fabrics_with_the_reference_fabric_by_default(client: Any) -> None:
    page = client.get("/cost")
    assert page.status_code == 200
    select = re.search(r'<select id="f-fabric" name="fabric"[^>]*>(.*?)</select>', page.text, re.S)
    assert select, "no fabric select on the cost page"
    values = re.findall(r'<option value="([^"]*)"', select.group(1))
    assert values == ["", *fabric_names()]  # blank first: the GPU's reference fabric, as before
    assert '<option value="" selected>' in select.group(1)
    assert {"ib-ndr-8x400", "ib-hdr-8x200", "ib-xdr-8x800", "roce-8x400"} <= set(values)
    assert "<strong>ib-ndr-8x400</strong> (the GPU's reference fabric)" in _priced(page.text)


def test_choosing_a_fabric_changes_the_network_line_and_names_it(client: Any) -> None:
    default = client.get("/cost?nodes=128", headers=HX)
    roce = client.get("/cost?nodes=128&fabric=roce-8x400", headers=HX)
    assert default.status_code == roce.status_code == 200
    ib_api = _api_network(client, gpu="H100-SXM")
    roce_api = _api_network(client, gpu="H100-SXM", fabric="roce-8x400")
    assert roce_api["per_gpu_usd"] < ib_api["per_gpu_usd"]  # the prices differ, so the line must
    for page, api, fabric in ((default, ib_api, "ib-ndr-8x400"), (roce, roce_api, "roce-8x400")):
        assert api["fabric"] == fabric and api["method"] == "bom"
        line = f"{api['per_gpu_usd']:,.0f} USD per GPU ({100 * api['share_of_capex']:,.1f} % of server"
        assert line in page.text
        assert f"<strong>{fabric}</strong>" in _priced(page.text)
    assert "price class roce-400g" in _priced(roce.text) and "(the GPU" not in _priced(roce.text)
    assert f"{ib_api['per_gpu_usd']:,.0f} USD per GPU" not in roce.text
    selected = re.search(r'<option value="roce-8x400" selected>', client.get("/cost?fabric=roce-8x400").text)
    assert selected, "the chosen fabric is not kept selected"


def test_a_fabric_without_price_rows_is_flagged_on_the_page(client: Any) -> None:
    page = client.get("/cost?nodes=128&fabric=ib-xdr-8x800", headers=HX)
    api = _api_network(client, gpu="H100-SXM", fabric="ib-xdr-8x800")
    assert api["method"] == "share" and api["no_price_row"] == "ib-xdr"
    priced = _priced(page.text)
    assert "<strong>ib-xdr-8x800</strong>" in priced
    assert 'id="no-price-row"' in priced and "no price row for ib-xdr switch, transceiver, cable" in priced
    assert f"{api['per_gpu_usd']:,.0f} USD per GPU" in page.text
    ndr = client.get("/cost?nodes=128&fabric=ib-ndr-8x400", headers=HX)
    assert 'id="no-price-row"' not in ndr.text
    # the A100's reference fabric, HDR, has switch and NIC rows but no transceiver or cable row
    a100 = _priced(client.get("/cost?gpu=A100-80GB-SXM&nodes=128", headers=HX).text)
    assert "<strong>ib-hdr-8x200</strong> (the GPU's reference fabric)" in a100
    assert "no price row for ib-hdr transceiver, cable" in a100


@pytest.mark.parametrize("bad", ["no-such-fabric", "ib-ndr-8x4000"])
def test_an_unknown_fabric_is_a_422_naming_the_field(client: Any, bad: str) -> None:
    plain = client.get(f"/cost?nodes=128&fabric={bad}")
    assert plain.status_code == 422
    field = re.search(r'<div class="field has-error">\s*<label for="f-fabric">.*?</div>', plain.text, re.S)
    assert field, "the fabric field is not marked as in error"
    assert 'aria-invalid="true"' in field.group(0)
    assert f"Error: unknown fabric &#39;{bad}&#39;" in field.group(0)  # beside the field
    assert f'<option value="{bad}" selected>' in field.group(0)  # what was asked stays shown
    assert 'role="alert"' in plain.text and 'href="#f-fabric">Fabric</a>' in plain.text
    block = client.get(f"/cost?nodes=128&fabric={bad}", headers=HX)
    assert block.status_code == 200  # htmx swaps only 2xx: the refusal replaces the results
    assert 'href="#f-fabric">Fabric</a>' in block.text and "unknown fabric" in block.text
    api = client.post("/api/v1/cost/tco", json={"onprem": {"nodes": 128}, "gpu": "H100-SXM", "fabric": bad})
    assert api.status_code == 422 and api.json()["detail"][0]["loc"][-1] == "fabric"


def test_other_refused_fields_are_422_too(client: Any) -> None:
    assert client.get("/cost?utilisation=150").status_code == 422
    assert client.get("/cost?utilisation=50").status_code == 200
