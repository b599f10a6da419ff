"""Layers an FP8 or NVFP4 run keeps 16-bit (Layout.bf16_first_layers / bf16_last_layers, Megatron-core
--first-last-layers-bf16): where they sit in the pipeline, what they cost in time and memory, and the checks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.catalog import find_gpu, find_model
from app.catalog.fabrics import find_fabric
from app.core.errors import SpecError
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import NEMO
from app.core.hardware import ClusterSpec
from app.core.layout import Layout, stage_bf16_layer_counts, stage_layer_counts
from app.validation.training_runs import Row, estimate_row
from app.web.pages._builder import BuilderState, parse_state, state_to_scenario


@pytest.mark.parametrize(
    ("layers", "layout", "expected"),
    [
        # Megatron-Bridge's FP8 current-scaling default: the first and the last layer
        (80, Layout(pp=4, vp=5, bf16_first_layers=1, bf16_last_layers=1, dtype="fp8"), (1, 0, 0, 1)),
        # without interleaving the end layers fill the last stage, then spill to the one before it
        (80, Layout(pp=8, bf16_first_layers=2, bf16_last_layers=12, dtype="fp4"), (2, 0, 0, 0, 0, 0, 2, 10)),
        # interleaved: the last model chunks (virtual stages 31, 30, …) sit on stages 7, 6, …
        (
            80,
            Layout(pp=8, vp=4, bf16_first_layers=2, bf16_last_layers=10, dtype="fp4"),
            (2, 0, 0, 2, 2, 2, 2, 2),
        ),
        # an uneven split: the end stage holds its own count
        (
            126,
            Layout(pp=16, first_stage_layers=7, last_stage_layers=7, bf16_last_layers=9, dtype="fp4"),
            (0,) * 14 + (2, 7),
        ),
        (32, Layout(pp=1, bf16_first_layers=2, bf16_last_layers=3, dtype="fp4"), (5,)),
    ],
)
def test_the_16_bit_layers_sit_on_the_stages_that_hold_them(
    layers: int, layout: Layout, expected: tuple
) -> None:
    assert stage_bf16_layer_counts(layers, layout) == expected


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    pp=st.sampled_from([1, 2, 4, 8]),
    vp=st.sampled_from([1, 2, 5]),
    first=st.integers(0, 40),
    last=st.integers(0, 40),
)
def test_every_16_bit_layer_is_on_exactly_one_stage(pp: int, vp: int, first: int, last: int) -> None:
    layers = 80
    layout = Layout(
        pp=pp, vp=vp if pp > 1 else 1, bf16_first_layers=first, bf16_last_layers=last, dtype="fp4"
    )
    counts = stage_bf16_layer_counts(layers, layout)
    assert sum(counts) == first + last
    assert all(0 <= b <= n for b, n in zip(counts, stage_layer_counts(layers, layout), strict=True))


def _run(dtype: str = "fp4", first: int = 0, last: int = 0, gpu: str = "GB300") -> Any:
    model = find_model("Llama-3-70B")
    cluster = ClusterSpec(gpu=find_gpu(gpu), num_nodes=4, gpus_per_node=4, fabric=find_fabric("ib-ndr-8x400"))
    layout = Layout(
        tp=1, pp=4, vp=5, dp=4, micro_batch=1, global_batch=64, dtype=dtype, bf16_first_layers=first,
        bf16_last_layers=last,
    )  # fmt: skip
    return estimate(model, cluster, layout, 8192, options=EstimateOptions(framework=NEMO))


def test_16_bit_layers_cost_their_16_bit_time_on_their_stage_and_save_16_bit_inputs() -> None:
    plain, ends, bf16 = _run(), _run(first=2, last=10), _run(dtype="bf16")
    stage_time = [s.total for s in ends.step.stages]
    plain_time = [s.total for s in plain.step.stages]
    # stages 2 and 3 hold four 16-bit layers each (the last two model chunks), stage 1 two, stage 0 the first two
    assert all(e > p for e, p in zip(stage_time, plain_time, strict=True))
    assert stage_time[3] - plain_time[3] == pytest.approx(2 * (stage_time[0] - plain_time[0]), rel=0.05)
    assert plain.step.total_s < ends.step.total_s < bf16.step.total_s
    # the same FLOPs; the 16-bit layers keep 16-bit GEMM inputs for the backward
    assert ends.step.model_flops_per_step == pytest.approx(plain.step.model_flops_per_step)
    for s_ends, s_plain in zip(ends.memory.stages, plain.memory.stages, strict=True):
        assert s_ends.breakdown["activations"] > s_plain.breakdown["activations"]
        assert s_ends.breakdown["weights"] == s_plain.breakdown["weights"]
    assert any(
        a.name == "layers kept 16-bit" and a.value == 12 and "2|2|4|4" in a.source for a in ends.assumptions
    )


def test_16_bit_layers_need_a_quantized_run_and_fit_the_model() -> None:
    with pytest.raises(SpecError) as err:
        _run(dtype="bf16", first=1, last=1)
    fields = {p.field for p in err.value.problems}
    assert {"layout.bf16_first_layers", "layout.bf16_last_layers"} <= fields
    with pytest.raises(SpecError) as err:
        _run(first=50, last=40)
    assert any("more than the model's 80 layers" in p.message for p in err.value.problems)


def test_the_builder_and_the_replay_carry_the_16_bit_layers() -> None:
    state = BuilderState(gpu="GB300", nodes=4, gpus_per_node=4, tp=1, pp=4, vp=5, sp=False, dtype="fp4",
                         bf16_first_layers=2, bf16_last_layers=10)  # fmt: skip
    from urllib.parse import parse_qsl

    parsed = parse_state(dict(parse_qsl(state.query())))
    assert (parsed.bf16_first_layers, parsed.bf16_last_layers) == (2, 10)
    layout = state_to_scenario(parsed)["layout"]
    assert (layout["bf16_first_layers"], layout["bf16_last_layers"]) == (2, 10)
    # the replay reads Megatron-core's flags from a row's notes (an fp8 row of the held-out set)
    row = {
        "source": "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md", "model_name": "LLAMA3-70B",
        "params_B": "70", "layers": "80", "hidden": "8192", "heads": "64", "kv_heads": "8", "ffn_hidden": "28672",
        "vocab": "128256", "seq_len": "8192", "gpu": "GB200 (DGX-GB200)", "num_gpus": "64", "tp": "2", "pp": "4",
        "dp": "8", "cp": "1", "zero_stage": "1", "recompute": "", "sequence_parallel": "", "micro_batch": "1",
        "global_batch": "256", "interleave_v": "5", "dtype": "fp8", "measured_metric": "tokens_per_s_per_gpu",
        "measured_value": "3887", "notes": "first_last_layers_bf16=True, num_layers_at_start_in_bf16=1, "
        "num_layers_at_end_in_bf16=1",
    }  # fmt: skip
    modelled = estimate_row(Row(1, row))
    assert (modelled.layout.bf16_first_layers, modelled.layout.bf16_last_layers) == (1, 1)
    plain = estimate_row(Row(1, {**row, "notes": ""}))
    assert modelled.estimate.step.total_s > plain.estimate.step.total_s


def test_plan_and_sizes_endpoints_search_with_the_16_bit_layers(client: Any) -> None:
    body = {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "GB300", "nodes": 16, "gpus_per_node": 4, "fabric": "ib-ndr-8x400"},
        "training": {"seq_len": 8192, "tokens": 1e12},
        "global_batch": 256,
        "dtype": "fp4",
        "top": 3,
    }
    plain = client.post("/api/v1/plan", json=body)
    ends = client.post("/api/v1/plan", json={**body, "bf16_first_layers": 2, "bf16_last_layers": 10})
    assert plain.status_code == 200 and ends.status_code == 200, ends.text
    best = ends.json()["best"]
    assert (best["layout"]["bf16_first_layers"], best["layout"]["bf16_last_layers"]) == (2, 10)
    assert best["step_time_s"] > plain.json()["best"]["step_time_s"]
    # the ranked layout through the estimate endpoint gives the same step time
    scenario = {
        "model": "Llama-3-70B",
        "cluster": body["cluster"],
        "layout": {k: v for k, v in best["layout"].items() if v is not None and k != "stage_layers"},
        "training": body["training"],
    }
    est = client.post("/api/v1/estimate", json=scenario)
    assert est.status_code == 200, est.text
    assert est.json()["step"]["total_s"] == pytest.approx(best["step_time_s"], rel=1e-9)
    bad = client.post("/api/v1/plan", json={**body, "dtype": "bf16", "bf16_last_layers": 2})
    assert bad.status_code == 422 and any(d["loc"][-1] == "bf16_last_layers" for d in bad.json()["detail"])
    sizes = client.post(
        "/api/v1/plan/sizes",
        json={k: v for k, v in body.items() if k != "top"} | {"sizes": [32, 64], "bf16_last_layers": 10},
    )
    assert sizes.status_code == 200, sizes.text
