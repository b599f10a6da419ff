"""Planning pages over HTTP: full page vs htmx block, the address bar reproduces the view, field-level
problems, save / revise / duplicate / delete by form, compare with differences marked."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from app.core.hf_config import model_from_hf_config
from app.services.planning import model_card
from app.web.pages._builder import BuilderState, parse_state, scenario_to_state, state_to_scenario
from tests.plans_support import small_scenario

HX = {"HX-Request": "true"}


def _scenario_input(html: str) -> dict[str, Any]:
    match = re.search(r'<input type="hidden" name="scenario" form="save-form" value="([^"]*)"', html)
    assert match, "no savable scenario in the results"
    return dict(json.loads(match.group(1).replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&")))


def test_builder_full_page_and_htmx_block(client: Any) -> None:
    query = BuilderState(nodes=4).query()
    full = client.get(f"/plans/new?{query}")
    assert full.status_code == 200 and "HX-Request" in full.headers["vary"].split(", ")
    assert "<html" in full.text and 'id="plan-form"' in full.text and 'id="results"' in full.text
    assert 'value="4"' in full.text  # the form shows the state from the address bar
    block = client.get(f"/plans/new?{query}", headers=HX)
    assert block.status_code == 200 and "<html" not in block.text and 'id="plan-form"' not in block.text
    assert block.text.lstrip().startswith('<section id="results"')
    # the same numbers in both, and the scenario that a save would store matches the inputs
    assert _scenario_input(block.text) == _scenario_input(full.text)
    saved = _scenario_input(block.text)
    assert saved["cluster"]["nodes"] == 4 and saved["layout"]["dp"] == 16
    # every chart has a data block and a table beside it, and units are shown
    for chart in ("chart-memory", "chart-step", "chart-cost", "chart-goodput"):
        assert f'id="{chart}"' in block.text and f'id="{chart}-data"' in block.text
        figure = block.text.split(f'id="{chart}-data">', 1)[1].split("</script>", 1)[0]
        assert json.loads(figure)["data"], chart
    assert block.text.count("<table") >= 4
    for unit in ("GiB", "ms", "tokens/s", "days", "USD"):
        assert unit in block.text
    # the cost table says how each option bills: by the hour, or a commitment and what of it goes unused
    cost_table = block.text.split('id="chart-cost-data"', 1)[1].split("</table>", 1)[0]
    assert '<th scope="col">Billing</th>' in cost_table and "<td>hourly" in cost_table
    # the scaling panel follows in its own request (it estimates 18 cluster sizes × fabrics)
    lazy = re.search(r'hx-get="(/plans/new/scaling\?[^"]+)" hx-trigger="load"', block.text)
    assert lazy
    scaling = client.get(lazy.group(1).replace("&amp;", "&"), headers=HX)
    assert scaling.status_code == 200 and "<html" not in scaling.text
    figure = json.loads(scaling.text.split('id="chart-scaling-data">', 1)[1].split("</script>", 1)[0])
    throughput = {t["name"]: t for t in figure["data"] if t["name"].endswith("throughput")}
    assert set(throughput) == {
        "ib-ndr-8x400 throughput",
        "roce-8x400 throughput",
        "ethernet-tcp-100 throughput",
    }
    # absolute terms: at the largest size TCP Ethernet trains fewer tokens/s than InfiniBand
    ib, tcp = throughput["ib-ndr-8x400 throughput"], throughput["ethernet-tcp-100 throughput"]
    assert ib["x"][-1] == tcp["x"][-1] and tcp["y"][-1] < ib["y"][-1]
    # strong scaling by default: the user's global batch at every size, efficiency against one stated ideal
    assert "Strong scaling: throughput (tokens/s), efficiency (% of the ideal" in scaling.text
    assert "strong scaling" in scaling.text
    # InfiniBand and tuned RoCE (adaptive routing) come out equal here: the panel says what the model leaves out
    assert "ib-ndr-8x400 and roce-8x400 come out within 1 % of each other" in scaling.text
    assert "congestion control under incast" in scaling.text
    weak = client.get(lazy.group(1).replace("&amp;", "&") + "&scaling_mode=weak", headers=HX)
    assert "Weak scaling: throughput" in weak.text
    page = client.get(lazy.group(1).replace("&amp;", "&"))
    assert "<html" in page.text and 'id="chart-scaling"' in page.text


def test_step_table_lists_only_parts_that_take_time(client: Any) -> None:
    r = client.get("/plans/new?" + BuilderState().query(), headers=HX)
    table = r.text.split('id="chart-step-data"', 1)[1].split("</table>", 1)[0]
    assert '<td class="num">0.00</td>' not in table
    note = re.search(
        r'<details class="muted" id="step-zero">\s*<summary>Not shown, 0 ms in this layout: ([^<]+)\.</summary>',
        r.text,
    )
    assert note and "pipeline bubble" in note.group(1)  # one stage: no bubble
    # behind the toggle, each hidden part is a row of its own at 0 ms
    hidden = r.text.split('id="step-zero"', 1)[1].split("</details>", 1)[0]
    assert hidden.count('<td class="num">0.00</td>') == len(note.group(1).split(", "))


def test_builder_reports_problems_per_field(client: Any) -> None:
    r = client.get("/plans/new?" + BuilderState(tp=3).query(), headers=HX)
    assert r.status_code == 200
    assert 'role="alert"' in r.text and 'href="#f-tp"' in r.text
    assert 'name="scenario"' not in r.text  # nothing savable while inputs are inconsistent
    r = client.get("/plans/new?nodes=lots&model=llama-3-8b")
    assert r.status_code == 200 and 'aria-invalid="true"' in r.text and "Error: a whole number" in r.text
    r = client.get("/plans/new?" + BuilderState(model="llama-3-8c").query(), headers=HX)
    assert 'href="#f-model"' in r.text and "Llama" in r.text  # close matches offered


def test_builder_state_round_trip() -> None:
    state = parse_state(
        {"nodes": "3", "gpus_per_node": "8", "tp": "4", "pp": "2", "sp": "0", "tokens_b": "15000"}
    )
    assert state.errors == {} and state.dp == 3 and state.sp is False
    scenario = state_to_scenario(state)
    assert scenario["training"]["tokens"] == 15e12 and scenario["layout"]["dp"] == 3
    back = scenario_to_state(scenario)
    assert state_to_scenario(back) == scenario
    assert parse_state(dict(pair.split("=") for pair in back.query().split("&"))).as_dict() == back.as_dict()


def test_tp_one_runs_without_sequence_parallelism(client: Any) -> None:
    # the checkbox is on by default; at TP 1 the estimate runs without it, as Megatron-LM turns it off
    state = parse_state({"tp": "1", "sp": "1", "nodes": "2", "global_batch": "256"})
    assert state.errors == {} and state.sp is True
    assert state_to_scenario(state)["layout"]["sequence_parallel"] is False
    assert state_to_scenario(parse_state({"tp": "2", "sp": "1"}))["layout"]["sequence_parallel"] is True
    r = client.get("/plans/new?" + state.query(), headers=HX)
    assert r.status_code == 200
    assert "needs tp &gt; 1" not in r.text and "needs tp > 1" not in r.text
    assert "TP1 " in r.text and "SP" not in re.findall(r"TP1 [^<]*", r.text)[0]


def test_pasted_hf_config_is_used(client: Any) -> None:
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
    r = client.get("/plans/new?" + BuilderState(hf_config=json.dumps(config)).query(), headers=HX)
    saved = _scenario_input(r.text)
    assert saved["model"]["num_layers"] == 16 and saved["model"]["hidden_size"] == 2048
    # the page says which model it read: this is Llama 3.2 1B's shape, 1,235,814,400 parameters on its model card
    card = re.search(r'<p class="model-read" id="model-read">.*?</p>', r.text, re.S)
    assert card and "1.24 B</span> parameters" in card.group(0)
    assert "16 layers, hidden size 2,048, 32 attention heads, 8 KV heads, vocabulary 128,256" in card.group(0)
    assert model_card(model_from_hf_config(config, name="llama"))["total_params"] == 1_235_814_400
    r = client.get("/plans/new?" + BuilderState(hf_config="{not json").query(), headers=HX)
    assert 'href="#f-hf_config"' in r.text and "not valid JSON" in r.text


def test_save_revise_duplicate_delete_by_form(client: Any) -> None:
    scenario = small_scenario()
    r = client.post(
        "/plans",
        data={"name": "form plan", "notes": "by form", "scenario": json.dumps(scenario)},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    url = r.headers["location"]
    plan_id = url.rsplit("/", 1)[1]
    page = client.get(url)
    assert page.status_code == 200 and "form plan" in page.text and "Revision 1" in page.text
    assert f"/api/v1/plans/{plan_id}/export.csv" in page.text and "price book" in page.text
    # a saved page has no planner mode: it says where layouts are ranked instead of asking for a missing control
    assert "Saved with a fixed layout, so no layout ranking was computed." in page.text
    assert "Choose “Let the planner choose”" not in page.text
    # "edit in builder" reproduces the saved inputs, then saving makes revision 2
    edit = re.search(r'href="/plans/new\?([^"]+)"', page.text)
    assert edit
    builder = client.get("/plans/new?" + edit.group(1).replace("&amp;", "&"))
    assert f'action="/plans/{plan_id}/revise"' in builder.text
    assert (
        _scenario_input(builder.text)["layout"]
        == client.get(f"/api/v1/plans/{plan_id}").json()["current"]["scenario"]["layout"]
    )
    changed = small_scenario(tp=4, dp=4)
    r = client.post(
        f"/plans/{plan_id}/revise",
        data={"name": "form plan", "notes": "tp4", "scenario": json.dumps(changed)},
        follow_redirects=False,
    )
    assert r.status_code == 303
    detail = client.get(f"/plans/{plan_id}")
    assert "Revision 2" in detail.text and "tp4" in detail.text
    old = client.get(f"/plans/{plan_id}?revision=1", headers=HX)
    assert old.status_code == 200 and "<html" not in old.text and "by form" in old.text

    r = client.post(f"/plans/{plan_id}/duplicate", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] != url
    assert "Copy of form plan" in client.get(r.headers["location"]).text
    r = client.post(f"/plans/{plan_id}/delete", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/plans"
    assert client.get(url).status_code == 404

    bad = client.post("/plans", data={"name": "x", "scenario": "{}"})
    assert bad.status_code == 422 and "scenario" in bad.text


def test_list_and_compare_pages(client: Any) -> None:
    ids = []
    for name, layout in (("cmp one", {}), ("cmp two", {"tp": 4, "dp": 4})):
        r = client.post("/api/v1/plans", json={"name": name, "scenario": small_scenario(**layout)})
        ids.append(r.json()["id"])
    listing = client.get("/plans?q=cmp")
    assert "cmp one" in listing.text and "cmp two" in listing.text and 'name="ids"' in listing.text
    summary = client.get(f"/api/v1/plans/{ids[0]}").json()["summary"]
    row = re.search(r"cmp one</a></th>.*?</tr>", listing.text, re.S)
    assert row and f"<td>{summary['fabric']}</td>" in row.group(0)
    assert f"{summary['cost_per_run_usd']:,.0f}" in row.group(0)
    assert '<th scope="col">Fabric</th>' in listing.text and "Cost per run (USD)" in listing.text
    block = client.get("/plans?q=cmp+two", headers=HX)
    assert "cmp two" in block.text and "cmp one" not in block.text and "<html" not in block.text

    r = client.get("/plans/compare?" + urlencode([("ids", i) for i in ids]))
    assert r.status_code == 200
    assert "≠ differs" in r.text and 'class="differs"' in r.text
    tp_row = re.search(r"<th scope=\"row\">Tensor parallel \(tp\)</th>.*?</tr>", r.text, re.S)
    assert tp_row and "≠ differs" in tp_row.group(0)
    # Δ and % against the first plan: tp 2 → 4 is +2, +100 %
    assert '<td class="num delta">+2</td><td class="num delta">+100 %</td>' in tp_row.group(0)
    assert "Δ cmp two" in r.text and "results that move by 0.5 % or less are marked same" in r.text
    # two layouts of one run: whether their gap is within the estimator's ranking resolution
    assert 'id="ranking-note"' in r.text and "ranking resolution for this kind of run" in r.text
    only = client.get(
        "/plans/compare?" + urlencode([("ids", i) for i in ids] + [("only_differences", "true")])
    )
    assert '<th scope="row">Model</th>' not in only.text and "Tensor parallel (tp)" in only.text
    one = client.get("/plans/compare?" + urlencode([("ids", ids[0])]))
    assert one.status_code == 200 and "Pick a second plan to compare with cmp one" in one.text


def test_planner_mode_ranks_layouts_and_hands_one_back(client: Any) -> None:
    state = BuilderState(mode="planner", model="Llama-3-70B", nodes=8, global_batch=512)
    r = client.get("/plans/new?" + state.query(), headers=HX)
    assert r.status_code == 200 and "layouts enumerated" in r.text
    assert "Rejected layouts" in r.text and "does not fit in usable HBM" in r.text
    saved = _scenario_input(r.text)
    assert saved["layout"]["tp"] * saved["layout"]["pp"] * saved["layout"]["cp"] * saved["layout"]["dp"] == 64
    # the Pareto front beside the ranking: fastest first, each with its headroom and a link that uses it
    pareto = re.search(r'<table id="pareto-table">.*?</table>', r.text, re.S)
    assert pareto and "Pareto front: the" in pareto.group(0) and "Use this layout" in pareto.group(0)
    # the layout used above is the recommended one: the fastest inside the validated region (rank 1 when the
    # fastest is inside it)
    recommended = re.search(r"Recommended: .*? \(rank (\d+),", r.text)
    rank = recommended.group(1) if recommended else "1"
    use = re.search(rf'href="/plans/new\?([^"]+)">Use layout {rank}<', r.text)
    assert use
    manual = client.get("/plans/new?" + use.group(1).replace("&amp;", "&"), headers=HX)
    assert "mode=manual" in use.group(1)
    assert _scenario_input(manual.text)["layout"] == {**saved["layout"]}

    big = BuilderState(mode="planner", model="Llama-3.1-405B", nodes=1)
    r = client.get("/plans/new?" + big.query(), headers=HX)
    assert 'href="#f-mode"' in r.text and "No layout of this model fits" in r.text
    assert "does not fit in usable HBM" in r.text


def test_builder_offload_field_round_trips_and_reports_megatron_rules(client: Any) -> None:
    state = parse_state({"nodes": "2", "tp": "8", "pp": "1", "recompute": "none", "offload_layers": "16"})
    assert state.errors == {} and state.offload_layers == 16
    scenario = state_to_scenario(state)
    assert scenario["layout"]["offload_layers"] == 16
    back = scenario_to_state(scenario)
    assert back.offload_layers == 16 and "offload_layers=16" in back.query()
    assert "offload_layers" not in BuilderState().query()  # 0 stays out of the address bar
    r = client.get("/plans/new?" + state.query(), headers=HX)
    assert r.status_code == 200 and _scenario_input(r.text)["layout"]["offload_layers"] == 16
    # Megatron-core allows offloading only with one pipeline stage: the problem points at the field
    r = client.get(
        "/plans/new?" + BuilderState(nodes=2, tp=8, pp=2, recompute="none", offload_layers=8).query(),
        headers=HX,
    )
    assert 'role="alert"' in r.text and 'href="#f-offload_layers"' in r.text and "pp = 1" in r.text
    r = client.get("/plans/new?offload_layers=-3")
    assert 'aria-invalid="true"' in r.text


def test_builder_offload_modules_field(client: Any) -> None:
    state = parse_state(
        {
            "model": "qwen3-30b-a3b",
            "nodes": "2",
            "tp": "1",
            "ep": "8",
            "sp": "0",
            "offload_modules": "expert_fc1, moe_act",
        }
    )
    assert state.errors == {} and state.offload_modules == "expert_fc1,moe_act"
    scenario = state_to_scenario(state)
    assert scenario["layout"]["offload_modules"] == ["expert_fc1", "moe_act"]
    assert scenario_to_state(scenario).offload_modules == "expert_fc1,moe_act"
    assert "offload_modules" not in BuilderState().query()
    r = client.get("/plans/new?" + state.query(), headers=HX)
    assert r.status_code == 200 and _scenario_input(r.text)["layout"]["offload_modules"] == [
        "expert_fc1",
        "moe_act",
    ]
    bad = parse_state({"offload_modules": "qkv_everything"})
    assert "offload_modules" in bad.errors


def test_planner_mode_may_offload_activations_when_asked(client: Any) -> None:
    # Llama 3 70B on 64 GB200 (NVLink-C2C to host memory): offloading 3/4 of the layers lets a no-recompute
    # layout fit, and the planner ranks it first only when the checkbox allows offloading
    base = {
        "mode": "planner",
        "model": "Llama-3-70B",
        "gpu": "GB200",
        "nodes": 16,
        "gpus_per_node": 4,
        "seq_len": 8192,
        "global_batch": 256,
    }
    off = BuilderState(**base)
    assert "plan_offload" not in off.query()
    r = client.get("/plans/new?" + off.query(), headers=HX)
    assert r.status_code == 200 and "layouts enumerated" in r.text
    assert _scenario_input(r.text)["layout"].get("offload_layers", 0) == 0

    on = parse_state({**{k: str(v) for k, v in base.items()}, "plan_offload": "1"})
    assert on.plan_offload and "plan_offload=1" in on.query()
    r = client.get("/plans/new?" + on.query(), headers=HX)
    assert r.status_code == 200
    layout = _scenario_input(r.text)["layout"]
    assert layout["offload_layers"] == 60 and layout["pp"] == 1 and layout["recompute"] == "none"
    # the memory panel says what the host keeps per GPU against GB200's 240 GiB (one Grace per two GPUs)
    host = re.search(r'<p id="host-memory">(.*?)</p>', r.text, re.S)
    assert host and "of 240 GiB in the reference system" in host.group(1) and "Fits" in host.group(1)
    # the Pareto front beside the ranking: fastest first, each with its headroom and a link that uses it
    pareto = re.search(r'<table id="pareto-table">.*?</table>', r.text, re.S)
    assert pareto and "Pareto front: the" in pareto.group(0) and "Use this layout" in pareto.group(0)
    use = re.search(r'href="/plans/new\?([^"]+)">Use layout 1<', r.text)
    assert use and "offload_layers=60" in use.group(1) and "plan_offload=1" in use.group(1)
    # the hidden 0 before the checkbox turns it off again
    assert not parse_state({"plan_offload": "0"}).plan_offload
    page = client.get("/plans/new?" + on.query())
    assert 'id="f-plan_offload"' in page.text and "checked" in page.text.split('id="f-plan_offload"')[1][:200]


def test_builder_optimizer_offload_field_and_planner_checkbox(client: Any) -> None:
    # by hand: the share round-trips through the address bar, bad values name the field
    state = BuilderState(nodes=2, tp=8, pp=2, zero=1, recompute="full", optimizer_offload=0.5)
    assert "optimizer_offload=0.5" in state.query()
    assert parse_state({"optimizer_offload": "0.5"}).optimizer_offload == 0.5
    for bad in ("1.5", "-0.1", "nan", "half"):
        assert "optimizer_offload" in parse_state({"optimizer_offload": bad}).errors
    r = client.get("/plans/new?" + state.query(), headers=HX)
    assert r.status_code == 200
    host = re.search(r'<p id="host-memory">(.*?)</p>', r.text, re.S)
    assert host and "offloaded optimizer states" in host.group(1) and "of 256 GiB" in host.group(1)
    assert _scenario_input(r.text)["layout"]["optimizer_offload"] == 0.5
    r = client.get(
        "/plans/new?" + BuilderState(nodes=2, tp=8, zero=3, optimizer_offload=1).query(), headers=HX
    )
    assert r.status_code == 200 and "ZeRO-3" in r.text
    # planner mode: Llama 3 70B on 16 H100 fits only with the optimizer on the host
    base = {
        "mode": "planner",
        "model": "Llama-3-70B",
        "gpu": "H100-SXM",
        "nodes": 2,
        "gpus_per_node": 8,
        "seq_len": 8192,
        "global_batch": 64,
    }
    off = BuilderState(**base)
    assert "plan_optimizer_offload" not in off.query()
    r = client.get("/plans/new?" + off.query(), headers=HX)
    assert r.status_code == 200 and "Use layout 1" not in r.text  # nothing fits
    on = parse_state({**{k: str(v) for k, v in base.items()}, "plan_optimizer_offload": "1"})
    assert on.plan_optimizer_offload and "plan_optimizer_offload=1" in on.query()
    r = client.get("/plans/new?" + on.query(), headers=HX)
    assert r.status_code == 200
    assert _scenario_input(r.text)["layout"]["optimizer_offload"] > 0
    # the Pareto front beside the ranking: fastest first, each with its headroom and a link that uses it
    pareto = re.search(r'<table id="pareto-table">.*?</table>', r.text, re.S)
    assert pareto and "Pareto front: the" in pareto.group(0) and "Use this layout" in pareto.group(0)
    use = re.search(r'href="/plans/new\?([^"]+)">Use layout 1<', r.text)
    assert use and "optimizer_offload=" in use.group(1) and "plan_optimizer_offload=1" in use.group(1)
    page = client.get("/plans/new?" + on.query())
    box = page.text.split('id="f-plan_optimizer_offload"')[1][:200]
    assert "checked" in box


def test_builder_attention_kernel_field(client: Any) -> None:
    # the kernel round-trips through the address bar and the saved scenario; auto stays out of both
    base = {
        "model": "llama-3-8b",
        "gpu": "B200",
        "nodes": 1,
        "tp": 1,
        "cp": 8,
        "sp": False,
        "seq_len": 131072,
        "global_batch": 8,
    }
    auto = BuilderState(**base, recompute="full")
    assert "attention_backend" not in auto.query()
    assert "attention_backend" not in state_to_scenario(auto)
    fa2 = BuilderState(**base, recompute="full", attention_backend="flash-attention-2")
    assert "attention_backend=flash-attention-2" in fa2.query()
    assert (
        parse_state(dict(p.split("=") for p in fa2.query().split("&"))).attention_backend
        == "flash-attention-2"
    )
    assert scenario_to_state(state_to_scenario(fa2)).attention_backend == "flash-attention-2"
    assert "attention_backend" in parse_state({"attention_backend": "xformers"}).errors
    pages = {}
    for state in (auto, fa2):
        r = client.get("/plans/new?" + state.query(), headers=HX)
        assert r.status_code == 200, r.text
        pages[state.attention_backend] = r.text
    assert "transformer-engine runs cudnn" in pages["auto"]
    assert "flash-attention-2 runs flash-attention-2" in pages["flash-attention-2"]
    assert _scenario_input(pages["flash-attention-2"])["attention_backend"] == "flash-attention-2"
    page = client.get("/plans/new?" + fa2.query())
    select = page.text.split('id="f-attention_backend"')[1][:600]
    assert 'value="flash-attention-2" selected' in select


def test_builder_plans_nvfp4_on_blackwell_and_refuses_it_on_hopper(client: Any) -> None:
    query = BuilderState(gpu="GB300", nodes=2, gpus_per_node=4, tp=1, sp=False, dtype="fp4").query()
    block = client.get(f"/plans/new?{query}", headers=HX)
    assert block.status_code == 200
    saved = _scenario_input(block.text)
    assert saved["layout"]["dtype"] == "fp4"
    # the assumed FP4 GEMM rate is stated under the step-time breakdown
    assert "NVFP4 GEMM rate assumed" in block.text
    hopper = client.get("/plans/new?" + BuilderState(tp=1, sp=False, dtype="fp4").query(), headers=HX)
    assert hopper.status_code in (200, 422)
    assert "no FP4 tensor cores" in hopper.text


def test_builder_planner_mode_keeps_the_16_bit_layers(client: Any) -> None:
    common = dict(
        gpu="GB300", nodes=16, gpus_per_node=4, mode="planner", global_batch=256, seq_len=8192, dtype="fp4"
    )
    plain = client.get("/plans/new?" + BuilderState(**common).query(), headers=HX)  # type: ignore[arg-type]
    ends = client.get(
        "/plans/new?" + BuilderState(**common, bf16_first_layers=2, bf16_last_layers=10).query(),  # type: ignore[arg-type]
        headers=HX,
    )
    assert plain.status_code == ends.status_code == 200
    chosen = _scenario_input(ends.text)["layout"]
    assert (chosen["bf16_first_layers"], chosen["bf16_last_layers"]) == (2, 10)

    def step_s(html: str) -> float:
        match = re.search(r"<dt>Step time</dt><dd class=\"num\">([0-9.]+) s", html)
        assert match, "no step time"
        return float(match.group(1))

    assert step_s(ends.text) > step_s(plain.text)


def test_a_layout_that_does_not_fit_says_why_and_what_fits(client: Any) -> None:
    # Llama 3 70B on 8 nodes with tp 1, no sharding and no recompute: far over 80 GB per GPU
    state = BuilderState(
        model="Llama-3-70B", nodes=8, tp=1, pp=1, zero=0, sp=False, recompute="none", global_batch=512
    )
    r = client.get("/plans/new?" + state.query(), headers=HX)
    assert r.status_code == 200
    headline = re.search(r'<dl class="headline">.*?</dl>', r.text, re.S)
    assert headline and "Does not fit" in headline.group(0)
    assert " days<" not in headline.group(0) and "USD" not in headline.group(
        0
    )  # no days or dollars to run on
    assert "this layout does not fit, so it cannot run" in headline.group(0)
    why = re.search(r'<div class="does-not-fit".*?</div>', r.text, re.S)
    assert why and "Why it does not fit:" in why.group(0) and "GiB over the usable" in why.group(0)
    # the planner's search for what fits comes after the results, as the scaling panel does
    lazy = re.search(
        r'id="fit-alternative" hx-get="(/plans/new/alternative\?[^"]+)" hx-trigger="load"', r.text
    )
    assert lazy, why.group(0)
    found = client.get(lazy.group(1).replace("&amp;", "&"), headers=HX)
    assert found.status_code == 200 and "<html" not in found.text
    use = re.search(
        r'id="fit-alternative"><strong>What fits:</strong> (.*?), .*?href="/plans/new\?([^"]+)">Use',
        found.text,
        re.S,
    )
    assert use, found.text
    # the planner's recommendation: inside the validated region (no context parallelism on 2K-token chunks)
    assert "the planner's recommendation" in found.text and "CP2" not in use.group(1)
    page = client.get(lazy.group(1).replace("&amp;", "&"))  # a direct load is a page of its own
    assert "<html" in page.text and "What fits:" in page.text and "Back to the plan builder" in page.text
    fitted = client.get("/plans/new?" + use.group(2).replace("&amp;", "&"), headers=HX)
    assert 'id="does-not-fit"' not in fitted.text and "✓" in fitted.text  # the suggested layout fits


def test_deadline_and_budget_find_the_smallest_cluster(client: Any) -> None:
    state = BuilderState(
        model="Llama-3-70B", nodes=2, tokens_b=15_000.0, global_batch=2048, deadline_days=60.0
    )
    r = client.get("/plans/new?" + state.query(), headers=HX)
    assert 'hx-get="/plans/new/sizes?' in r.text and "deadline_days=60" in r.text
    sized = client.get("/plans/new/sizes?" + state.query(), headers=HX)
    assert sized.status_code == 200 and "<html" not in sized.text
    answer = re.search(
        r'id="sizing-answer"><strong>Smallest cluster that meets it:</strong> (\d+) nodes \(([\d,]+) GPUs\)',
        sized.text,
    )
    assert answer, sized.text[:2000]
    gpus = int(answer.group(2).replace(",", ""))
    assert int(answer.group(1)) * 8 == gpus
    # the chosen size meets the deadline, and the next smaller size searched does not
    rows = re.findall(
        r'<th scope="row" class="num">([\d,]+)</th>.*?<td class="num">([\d,.]+)</td><td class="num">[\d,]+</td>',
        sized.text,
        re.S,
    )
    days = {int(g.replace(",", "")): float(d.replace(",", "")) for g, d in rows}
    assert days[gpus] <= 60.0 and days[gpus // 2] > 60.0
    use = re.search(r'href="/plans/new\?([^"]+)">Use this size', sized.text)
    assert use and f"nodes={gpus // 8}" in use.group(1) and "mode=planner" in use.group(1)
    # an impossible budget says so and names the cheapest size
    broke = client.get("/plans/new/sizes?" + replace(state, budget_usd=1.0).query(), headers=HX)
    assert "No size searched meets them." in broke.text and "The cheapest," in broke.text
    # refused goals are errors at their fields
    bad = client.get("/plans/new?" + state.query().replace("deadline_days=60", "deadline_days=-3"))
    assert 'id="d-deadline_days"' in bad.text and 'value="-3"' in bad.text


def test_a_profile_that_failed_its_acceptance_check_is_flagged(client: Any) -> None:
    from sqlmodel import Session

    from app.db import get_engine
    from app.models.benchmarks import CalibrationProfile

    params = {
        "gemm": {"bf16": {"max_flops": 2e12, "half_intensity": 60.0, "dtype": "bf16", "source": "a CPU run"}},
        "gemm_primary_dtype": "bf16",
    }
    report = {"acceptance": {"verdict": "fail", "overridden": True}}
    with Session(get_engine()) as session:
        session.add(
            CalibrationProfile(name="cpu-run", version=1, gpu_name="H100-SXM", params=params, report=report)
        )
        session.commit()
    page = client.get("/plans/new")
    option = re.search(r'<option value="cpu-run v1"[^>]*>([^<]+)</option>', page.text)
    assert option and "acceptance fail, fitted on an override" in option.group(1)
    r = client.get("/plans/new?" + BuilderState(profile="cpu-run v1").query(), headers=HX)
    warning = re.search(r'<p class="problems" id="profile-warning" role="alert">([^<]+)</p>', r.text)
    assert warning and "not a healthy H100-SXM" in warning.group(1)
    assert 'id="profile-warning"' not in client.get("/plans/new?" + BuilderState().query(), headers=HX).text


def test_signed_out_builder_neither_lists_nor_uses_calibration_profiles(client: Any) -> None:
    """The builder lists profiles only for callers with plans:read; a signed-out visitor naming one in the address
    gets a problem on the profile field (and on the scaling and sizing panels), never the profile's results."""
    from sqlmodel import Session

    from app.db import get_engine
    from app.models.benchmarks import CalibrationProfile
    from tests.auth_support import bearer, issue_token, remote_client

    report = {"acceptance": {"verdict": "warn", "overridden": False}}
    with Session(get_engine()) as session:
        session.add(
            CalibrationProfile(name="hidden-lab", version=1, gpu_name="H100-SXM", params={}, report=report)
        )
        session.commit()
    anonymous = remote_client()
    page = anonymous.get("/plans/new")
    assert page.status_code == 200 and "hidden-lab" not in page.text
    assert (
        re.findall(r'<select[^>]*name="profile"[^>]*>(.*?)</select>', page.text, re.S)[0].count("<option")
        == 1
    )

    state = BuilderState(profile="hidden-lab v1", deadline_days=60)
    named = anonymous.get("/plans/new?" + state.query(), headers=HX)
    assert named.status_code == 200 and "sign in to use calibration profiles" in named.text
    assert "acceptance warn" not in named.text and 'id="chart-memory"' not in named.text
    scaling = anonymous.get("/plans/new/scaling?" + state.query(), headers=HX)
    assert "Sign in to use calibration profiles" in scaling.text and "chart-scaling-data" not in scaling.text
    sizes = anonymous.get("/plans/new/sizes?" + state.query(), headers=HX)
    assert "sign in to use calibration profiles" in sizes.text
    alternative = anonymous.get("/plans/new/alternative?" + state.query(), headers=HX)
    assert (
        "sign in to use calibration profiles" in alternative.text
        and "Use this layout" not in alternative.text
    )

    reader = remote_client()
    reader.headers.update(bearer(issue_token("builder-reader@example.com", ["plans:read"], is_admin=False)))
    assert '<option value="hidden-lab v1"' in reader.get("/plans/new").text
    assert (
        "sign in to use calibration profiles"
        not in reader.get("/plans/new?" + state.query(), headers=HX).text
    )
