"""A first use of the planning pages: a refused save reopens the builder with the user's inputs, a plan's cluster
opens on the Cost and Network pages, fabric presets are named in words, and the network page refuses a smallest
message larger than the largest."""

from __future__ import annotations

import html
import json
import re
import uuid
from typing import Any

import pytest

from app.catalog.fabrics import presets
from app.web.pages._builder import BuilderState

HX = {"HX-Request": "true"}
# a cluster away from every page's defaults, on which the builder's layout does fit
CLUSTER = BuilderState(gpu="H200-SXM", nodes=4, gpus_per_node=4, fabric="roce-ecmp-scattered-8x400")


def _hidden(page: str, name: str) -> str | None:
    match = re.search(rf'<input type="hidden" name="{name}" form="save-form" value="([^"]*)"', page)
    return html.unescape(match.group(1)) if match else None


def _input_value(page: str, name: str) -> str:
    match = re.search(rf'<input id="f-{name}"[^>]*value="([^"]*)"', page)
    assert match, f"no input {name}"
    return html.unescape(match.group(1))


def _selected(page: str, name: str) -> str:
    select = re.search(rf'<select id="f-{name}"[^>]*>(.*?)</select>', page, re.S)
    assert select, f"no select {name}"
    match = re.search(r'<option value="([^"]*)" selected>', select.group(1))
    assert match, f"nothing selected in {name}"
    return match.group(1)


def _options(page: str, name: str) -> dict[str, str]:
    select = re.search(rf'<select id="f-{name}"[^>]*>(.*?)</select>', page, re.S)
    assert select, f"no select {name}"
    return dict(re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select.group(1)))


def _problems(page: str, block_id: str = "") -> dict[str, list[str]]:
    """Each listed problem's link text and message, by the field it points at."""
    start = page.index(f'id="{block_id}"') if block_id else 0
    block = re.search(r'<div class="problems" role="alert">(.*?)</div>', page[start:], re.S)
    assert block, page[:1500]
    found: dict[str, list[str]] = {}
    for field, label, message in re.findall(r'<a href="#f-(\w+)">([^<]*)</a>: ([^<]*)</li>', block.group(1)):
        found.setdefault(field, []).extend([html.unescape(label), html.unescape(message)])
    return found


def _links(page: str) -> dict[str, str]:
    block = re.search(r'<p class="tool-links" id="cluster-links">(.*?)</p>', page, re.S)
    assert block, "no links to the Cost and Network pages"
    return {
        text: html.unescape(href)
        for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', block.group(1))
    }


def _plan_names(client: Any, q: str) -> list[str]:
    return [p["name"] for p in client.get("/api/v1/plans", params={"q": q}).json()["data"]]


# ---------------------------------------------------------------------------------------------- refused save


def test_a_refused_save_reopens_the_builder_with_the_inputs_and_their_problems(client: Any) -> None:
    state = BuilderState(nodes=3, tp=3)  # 24 GPUs divide by 3, the model's 32 heads do not
    page = client.get("/plans/new?" + state.query())
    assert _hidden(page.text, "scenario") is None  # nothing savable: what "Save plan" posts is no scenario
    inputs = _hidden(page.text, "inputs")
    assert inputs is not None
    name = f"refused {uuid.uuid4().hex[:8]}"
    r = client.post("/plans", data={"name": name, "notes": "my notes", "inputs": inputs})
    assert r.status_code == 422
    assert 'id="plan-form"' in r.text and 'id="save-problems"' in r.text and "Plan not saved" in r.text
    assert _input_value(r.text, "tp") == "3" and _input_value(r.text, "nodes") == "3"
    listed = _problems(r.text, "results")
    assert list(listed) == ["tp"] and listed["tp"][0] == "Tensor parallel"
    assert "attention heads (32) not divisible by tp (3)" in listed["tp"]
    assert f'id="save-name" name="name" required maxlength="200" value="{name}"' in r.text
    assert ">my notes</textarea>" in r.text
    assert _plan_names(client, name) == []


def test_a_refused_save_keeps_the_text_of_a_refused_input(client: Any) -> None:
    page = client.get("/plans/new?nodes=lots&model=llama-3-8b")
    inputs = _hidden(page.text, "inputs")
    assert inputs is not None and "nodes=lots" in inputs
    r = client.post("/plans", data={"name": "lots of nodes", "inputs": inputs})
    assert r.status_code == 422 and _input_value(r.text, "nodes") == "lots"
    assert _problems(r.text, "results")["nodes"][0] == "Nodes"


def test_a_refused_revision_reopens_the_plan_in_the_builder_and_saves_nothing(client: Any) -> None:
    saved = client.get("/plans/new?" + BuilderState().query())
    scenario = _hidden(saved.text, "scenario")
    assert scenario is not None
    r = client.post("/plans", data={"name": "to revise", "scenario": scenario}, follow_redirects=False)
    assert r.status_code == 303
    plan_id = r.headers["location"].rsplit("/", 1)[1]
    assert _plan_names(client, "to revise")  # the search finds a saved plan by its name
    inputs = BuilderState(nodes=3, tp=3).query(plan=plan_id)
    r = client.post(f"/plans/{plan_id}/revise", data={"name": "to revise", "notes": "v2", "inputs": inputs})
    assert r.status_code == 422 and "Edit plan: to revise" in r.text
    assert f'action="/plans/{plan_id}/revise"' in r.text and _input_value(r.text, "tp") == "3"
    assert client.get(f"/api/v1/plans/{plan_id}").json()["latest_revision"] == 1


# ---------------------------------------------------------------------------------------------- cluster links


def _assert_the_pages_open_on(client: Any, links: dict[str, str], state: BuilderState) -> None:
    cost = client.get(links["Cost and TCO for this cluster"])
    network = client.get(links["Network scaling for this cluster"])
    assert cost.status_code == network.status_code == 200
    for page in (cost.text, network.text):
        assert _selected(page, "gpu") == state.gpu
        assert _input_value(page, "nodes") == str(state.nodes)
        assert _input_value(page, "gpus_per_node") == str(state.gpus_per_node)
    for page in (cost.text, network.text):  # the fabric comes along too
        assert _selected(page, "fabric") == state.fabric
    chosen = re.search(r'<strong id="network-chosen">([^<]+)</strong>', network.text)
    assert chosen and chosen.group(1) == state.fabric  # /network singles the plan's fabric out
    figure = json.loads(network.text.split('id="chart-busbw-data">', 1)[1].split("</script>", 1)[0])
    assert figure["data"][0]["name"] == f"{state.fabric} (chosen)"


def test_the_builder_links_its_cluster_to_the_cost_and_network_pages(client: Any) -> None:
    results = client.get("/plans/new?" + CLUSTER.query(), headers=HX)
    links = _links(results.text)
    accuracy = re.search(
        r'<p class="tool-links" id="accuracy-link">.*?<a href="([^"]+)">', results.text, re.S
    )
    assert accuracy and accuracy.group(1) == "/catalog/accuracy"
    assert links["Cost and TCO for this cluster"].startswith("/cost?")
    assert links["Network scaling for this cluster"].startswith("/network?")
    for link in links.values():
        assert f"fabric={CLUSTER.fabric}" in link
    _assert_the_pages_open_on(client, links, CLUSTER)
    # the default fabric too (not only one away from every page's defaults)
    default = BuilderState(gpu="A100-80GB-SXM", nodes=2)
    _assert_the_pages_open_on(
        client, _links(client.get("/plans/new?" + default.query(), headers=HX).text), default
    )


def test_a_saved_plan_links_its_cluster_to_the_cost_and_network_pages(client: Any) -> None:
    scenario = _hidden(client.get("/plans/new?" + CLUSTER.query()).text, "scenario")
    assert scenario is not None
    r = client.post("/plans", data={"name": "linked cluster", "scenario": scenario}, follow_redirects=False)
    assert r.status_code == 303
    _assert_the_pages_open_on(client, _links(client.get(r.headers["location"]).text), CLUSTER)


# ---------------------------------------------------------------------------------------------- fabric labels


@pytest.mark.parametrize("url", ["/plans/new", "/cost", "/network"])
def test_fabric_options_show_the_presets_label_with_the_name_as_value(client: Any, url: str) -> None:
    options = _options(client.get(url).text, "fabric")
    assert options["roce-ecmp-scattered-8x400"] == "RoCE 8 × 400G, static ECMP, scattered placement"
    assert options["opa-4x100"].startswith("Omni-Path 4 × 100G")
    assert all(options[name] == preset.label != name for name, preset in presets().items())


def test_every_fabric_preset_has_a_label_of_its_own() -> None:
    labels = [p.label for p in presets().values()]
    assert len(set(labels)) == len(labels)


# ---------------------------------------------------------------------------------------------- message sizes


def test_a_smallest_message_above_the_largest_is_refused_by_label(client: Any) -> None:
    url = "/network?min_size=4+GiB&max_size=8+KiB"
    r = client.get(url)
    assert r.status_code == 422
    listed = _problems(r.text)
    assert set(listed) == {"min_size", "max_size"}
    assert (
        listed["min_size"][0] == "Smallest message" and "“Largest message” (8 KiB)" in listed["min_size"][1]
    )
    assert (
        listed["max_size"][0] == "Largest message" and "“Smallest message” (4 GiB)" in listed["max_size"][1]
    )
    assert _selected(r.text, "min_size") == "4 GiB" and _selected(r.text, "max_size") == "8 KiB"
    assert 'id="chart-busbw"' not in r.text  # no swapped sweep drawn
    partial = client.get(url, headers=HX)
    assert partial.status_code == 200 and set(_problems(partial.text)) == {"min_size", "max_size"}
    # a refused size is named on its own, not compared with the default it fell back to
    assert set(_problems(client.get("/network?min_size=huge&max_size=8+KiB").text)) == {"min_size"}
    assert client.get("/network?min_size=1+MiB&max_size=1+MiB").status_code == 200
