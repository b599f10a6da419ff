"""Fabric selects name presets in words: /network takes the cluster's fabric from its query (the builder's and a
saved plan's links fill it), draws it first and refuses an unknown one beside the select; the Benchmarks launch
form shows labels with the names as values; the cost charts' hovers name each option in full."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest

from app.catalog.fabrics import presets

HX = {"HX-Request": "true"}


def _select(page: str, select_id: str) -> str:
    match = re.search(rf'<select id="{select_id}"[^>]*>(.*?)</select>', page, re.S)
    assert match, f"no select {select_id}"
    return match.group(1)


def _options(page: str, select_id: str) -> dict[str, str]:
    return {
        value: html.unescape(text)
        for value, text in re.findall(
            r'<option value="([^"]*)"[^>]*>([^<]*)</option>', _select(page, select_id)
        )
    }


def _selected(page: str, select_id: str) -> list[str]:
    return re.findall(r'<option value="([^"]*)" selected>', _select(page, select_id))


def _figure(page: str, chart: str) -> dict[str, Any]:
    return dict(json.loads(page.split(f'id="{chart}-data">', 1)[1].split("</script>", 1)[0]))


def _problems(page: str) -> dict[str, str]:
    block = re.search(r'<div class="problems" role="alert">(.*?)</div>', page, re.S)
    assert block, "no problem list"
    return {
        field: html.unescape(f"{label}: {message}")
        for field, label, message in re.findall(
            r'<a href="#f-(\w+)">([^<]*)</a>: ([^<]*)</li>', block.group(1)
        )
    }


# ---------------------------------------------------------------------------------------------- /network


def test_the_network_select_lists_every_preset_in_words_and_none_by_default(client: Any) -> None:
    page = client.get("/network")
    assert page.status_code == 200
    options = _options(page.text, "f-fabric")
    assert list(options) == ["", *sorted(presets())]
    assert all(options[name] == preset.label != name for name, preset in presets().items())
    assert _selected(page.text, "f-fabric") == [""]  # no preset singled out: every one drawn alike
    traces = _figure(page.text, "chart-busbw")["data"]
    assert [t["name"] for t in traces] == list(presets())  # the catalog's order, none marked
    assert {t["line"]["width"] for t in traces} == {2}
    assert "(chosen)" not in page.text and 'id="network-chosen"' not in page.text


@pytest.mark.parametrize("asked", ["roce-ecmp-8x400", "roce-ecmp", "ROCE ECMP"])
def test_the_fabric_in_the_query_is_selected_drawn_first_and_marked(client: Any, asked: str) -> None:
    page = client.get("/network", params={"nodes": 4, "fabric": asked})
    assert page.status_code == 200
    assert _selected(page.text, "f-fabric") == ["roce-ecmp-8x400"]  # an alias selects its preset
    traces = _figure(page.text, "chart-busbw")["data"]
    first, *others = traces
    assert first["name"] == "roce-ecmp-8x400 (chosen)" and first["line"]["width"] == 4
    assert [t["name"] for t in others] == [n for n in presets() if n != "roce-ecmp-8x400"]
    assert {t["line"]["width"] for t in others} == {2}
    api = client.post(
        "/api/v1/network/collective",
        json={
            "op": "all_reduce",
            "sweep": {"min_bytes": 64 * 2**10, "max_bytes": 4 * 2**30, "factor": 4},
            "cluster": {"gpu": "H100-SXM", "nodes": 4, "gpus_per_node": 8, "fabric": "roce-ecmp-8x400"},
        },
    ).json()
    assert first["y"] == pytest.approx([r["busbw_gbps"] for r in api["results"]])  # the same numbers
    chosen = re.search(r'<strong id="network-chosen">([^<]+)</strong> \(([^)]+)\)', page.text)
    assert chosen and chosen.groups() == ("roce-ecmp-8x400", "RoCE 8 × 400G, static ECMP")
    busbw = page.text.split('id="chart-busbw-data"', 1)[1].split("</table>", 1)[0]  # a row per fabric
    assert '<tbody><tr><th scope="row">roce-ecmp-8x400 (chosen)</th>' in busbw  # its row first
    assert '<th scope="row">roce-ecmp-8x400 (chosen)</th>' in page.text  # the largest message's table


@pytest.mark.parametrize("bad", ["no-such-fabric", "ib-ndr-8x4000"])
def test_an_unknown_fabric_is_refused_beside_the_select_never_a_500(client: Any, bad: str) -> None:
    plain = client.get("/network", params={"nodes": 4, "fabric": bad})
    assert plain.status_code == 422
    field = re.search(r'<div class="field has-error">\s*<label for="f-fabric">.*?</div>', plain.text, re.S)
    assert field, "the fabric field is not marked as in error"
    assert 'aria-invalid="true"' in field.group(0)
    assert f"Error: unknown fabric &#39;{bad}&#39;" in field.group(0)
    assert _selected(plain.text, "f-fabric") == [bad]  # what was asked stays shown
    assert _problems(plain.text)["fabric"].startswith(f"Fabric: unknown fabric '{bad}'")
    assert 'id="chart-busbw"' not in plain.text  # nothing charted for a refused input
    if bad == "ib-ndr-8x4000":  # the closest preset names come with the refusal
        assert "did you mean: ib-ndr-8x400" in _problems(plain.text)["fabric"]
    block = client.get("/network", params={"fabric": bad}, headers=HX)
    assert block.status_code == 200  # htmx swaps only 2xx: the refusal replaces the results
    assert block.text.lstrip().startswith('<section id="network-results"')
    assert "fabric" in _problems(block.text)


# ---------------------------------------------------------------------------------------------- benchmarks


def test_the_launch_form_shows_fabric_labels_with_the_names_as_values(client: Any) -> None:
    page = client.get("/benchmarks")
    assert page.status_code == 200
    options = _options(page.text, "l-fabric")
    assert list(options) == sorted(presets())
    assert all(options[name] == preset.label != name for name, preset in presets().items())
    assert options["ib-ndr-8x400"] == "InfiniBand 8 × 400G, adaptive routing"
    assert _selected(page.text, "l-fabric") == ["ib-ndr-8x400"]  # the default, as before


def test_a_refused_launch_keeps_the_chosen_fabric_selected(client: Any) -> None:
    form = {"kind": "collectives", "ops": "all_reduce", "min_bytes": "1M", "max_bytes": "1K"}
    refused = client.post("/benchmarks/launch", data=form | {"fabric": "roce-8x400"}, headers=HX)
    assert refused.status_code == 200 and 'role="alert"' in refused.text
    assert _selected(refused.text, "l-fabric") == ["roce-8x400"]
    odd = client.post("/benchmarks/launch", data=form | {"fabric": "lab-fabric"}, headers=HX)
    assert _selected(odd.text, "l-fabric") == ["lab-fabric"]  # a name the catalog lacks stays as sent


def test_a_launched_job_records_the_fabric_name(client: Any) -> None:
    launched = client.post(
        "/benchmarks/launch",
        data={
            "kind": "collectives",
            "ops": "all_reduce",
            "nproc": "2",
            "device": "cpu",
            "fabric": "roce-ecmp-scattered-8x400",
        },
        follow_redirects=False,
    )
    assert launched.status_code == 303
    job_id = launched.headers["location"].rsplit("/", 1)[1]
    params = client.get(f"/api/v1/benchmarks/{job_id}").json()["params"]
    assert params["fabric"] == "roce-ecmp-scattered-8x400"
    client.post(f"/benchmarks/jobs/{job_id}/cancel")


# ---------------------------------------------------------------------------------------------- cost legends


def test_the_cost_charts_hovers_name_each_option_in_full(client: Any) -> None:
    """On a narrow chart the legend's text is broken into lines (static/js/charts.js, tested in a browser at 390 px
    by tests/e2e/test_phone_width_browser.py); each line's hover keeps the whole label."""
    page = client.get("/cost", params={"nodes": 4})
    assert page.status_code == 200
    for chart, hover in (("chart-tco", "month %{x}: "), ("chart-util", "%{x:.0f} % utilisation: ")):
        traces = _figure(page.text, chart)["data"]
        assert len(traces) >= 3 and any(len(t["name"]) > 40 for t in traces)
        for trace in traces:
            assert "<br>" not in trace["name"]
            assert trace["hovertemplate"].startswith(hover)
            assert trace["hovertemplate"].endswith(f"<extra>{trace['name']}</extra>")
