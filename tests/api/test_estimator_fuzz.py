"""Semantic fuzzing of POST /api/v1/estimate: plausible scenarios drawn from the catalog (every model, every GPU,
every framework preset, each dtype, offloading, partial recompute, expert and context parallelism) must get either
a 200 whose numbers are physically possible or a 422 that names each field at fault; never a 5xx.

Schemathesis (test_fuzz_schemathesis.py) covers malformed input; this covers the space of valid-looking input, where
the model's own arithmetic can break (a wider run of this kind found fp16 on Gaudi 3 running at the BF16 rate, an
MFU of 134 %; test_estimator_properties.py pins that case on every catalog part). The strategy draws layouts that
mostly pass the consistency checks (about 4 in 5), so the invariants are exercised, and the rest must be clean 422s.
Bounded: a fixed number of derandomised examples.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.catalog import gpus, models
from app.catalog.fabrics import fabrics
from app.core.framework import FRAMEWORKS

MODELS = sorted(models())
GPUS = sorted(gpus())
FABRICS = sorted(fabrics())
FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(MODELS))
    spec = models()[name]
    heads, kv = spec.num_attention_heads, spec.num_kv_heads
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if heads % t == 0 and (kv % t == 0 or t % kv == 0)]))
    pp = draw(st.sampled_from([p for p in (1, 1, 2, 4) if spec.num_layers % p == 0]))
    vp = draw(st.sampled_from([v for v in (1, 2) if pp > 1 and spec.num_layers % (pp * v) == 0] or [1]))
    cp = draw(st.sampled_from([1, 1, 2]))
    dp = draw(st.sampled_from([1, 2, 4, 8]))
    n = tp * pp * cp * dp
    gpn = min(8, n)
    experts = spec.moe.num_experts if spec.moe is not None else 1
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (dp * cp) % e == 0 and experts % e == 0]))
    micro = draw(st.sampled_from([1, 2, 4]))
    recompute = draw(st.sampled_from(["none", "selective", "full"]))
    layout: dict[str, Any] = {
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "dp": dp,
        "ep": ep,
        "vp": vp,
        "zero": draw(st.integers(0, 3)),
        "sequence_parallel": tp > 1 and (ep > 1 or draw(st.booleans())),
        "recompute": recompute,
        "micro_batch": micro,
        # the interleaved schedule needs a multiple of pp micro-batches
        "global_batch": micro * dp * pp * draw(st.sampled_from([1, 4, 16])),
        "dtype": draw(st.sampled_from(["bf16", "fp16", "fp8", "fp4"])),
        "flash_attention": draw(st.booleans()),
    }
    if recompute == "full" and draw(st.booleans()):
        layout["recompute_layers"] = 1
    if pp == 1 and recompute == "none" and draw(st.integers(0, 3)) == 0:
        layout["offload_layers"] = 1
    if draw(st.integers(0, 4)) == 0:
        layout["optimizer_offload"] = draw(st.sampled_from([0.5, 1.0]))
    return {
        "model": name,
        "cluster": {
            "gpu": draw(st.sampled_from(GPUS)),
            "nodes": n // gpn,
            "gpus_per_node": gpn,
            "fabric": draw(st.sampled_from(FABRICS)),
        },
        "layout": layout,
        "training": {"seq_len": draw(st.sampled_from([512, 2048, 8192, 32768])), "tokens": 1e10},
        "framework": draw(st.sampled_from(sorted(FRAMEWORKS))),
    }


def _check_estimate(doc: dict[str, Any]) -> None:
    step = doc["step"]
    parts = step["breakdown_s"]
    assert all(math.isfinite(v) and v >= 0 for v in parts.values()), parts
    assert math.isclose(sum(parts.values()), step["total_s"], rel_tol=1e-9), parts
    assert step["total_s"] > 0 and step["tokens_per_s"] > 0
    # nothing runs faster than the dense peak of its compute dtype
    assert 0 < step["mfu"] <= 1.0, step["mfu"]
    # hardware FLOPs are the model's plus what recompute re-runs
    assert step["hardware_tflops_per_gpu"] >= step["model_tflops_per_gpu"] * (1 - 1e-9), step
    memory = doc["memory"]
    for stage in memory["stages"]:
        numbers = [v for v in stage.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        assert all(math.isfinite(v) and v >= 0 for v in numbers), stage


@FUZZ
@given(scenario=scenarios())
def test_plausible_scenarios_get_a_sound_estimate_or_a_422(client: Any, scenario: dict[str, Any]) -> None:
    response = client.post("/api/v1/estimate", json=scenario)
    assert response.status_code in (200, 422), (scenario, response.text[:500])
    body = response.json()
    if response.status_code == 422:
        assert body["detail"], scenario
        for problem in body["detail"]:
            assert problem["loc"] and problem["msg"], problem
        return
    _check_estimate(body)
