"""Property tests: monotonicity of memory in TP/PP/ZeRO/recompute, breakdowns summing to totals, and the
numpy path of the memory formulas agreeing with the scalar path (what the vectorised planner relies on)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.catalog import find_gpu
from app.core.estimate import estimate
from app.core.framework import MEGATRON_CORE
from app.core.hardware import ClusterSpec
from app.core.layout import Layout
from app.core.memory import (
    KeptActivations,
    embedding_params_per_gpu,
    inflight_layer_microbatches,
    layer_activation_bytes,
    stage_memory,
    state_bytes,
    transformer_params_per_gpu,
)
from app.core.model import ModelSpec, layer_shape

H100 = find_gpu("H100-SXM")
PROFILE = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    heads = draw(st.sampled_from([8, 16, 32, 64]))
    head_dim = draw(st.sampled_from([64, 128]))
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8, heads) if heads % h == 0]))
    gated = draw(st.booleans())
    hidden = heads * head_dim
    return ModelSpec(
        name="m",
        num_layers=draw(st.sampled_from([8, 16, 24, 32, 48])),
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv,
        ffn_hidden_size=hidden * draw(st.sampled_from([2, 3, 4])),
        vocab_size=draw(st.sampled_from([32000, 50257, 128256])),
        activation="swiglu" if gated else "gelu",
        tied_embeddings=draw(st.booleans()),
        hidden_dropout=draw(st.sampled_from([0.0, 0.1])),
    )


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, limit + 1) if n % d == 0]


def _weights_max(model: ModelSpec, layout: Layout, seq: int) -> float:
    return max(stage_memory(model, layout, seq, i).breakdown["weights"] for i in range(layout.pp))


@PROFILE
@given(models(), st.data())
def test_more_tp_or_pp_never_raises_per_gpu_weight_memory(model: ModelSpec, data: st.DataObject) -> None:
    tps = [t for t in _divisors(model.num_attention_heads, 8) if model.ffn_hidden_size % t == 0]
    pps = _divisors(model.num_layers, 8)
    tp_a, tp_b = sorted(data.draw(st.lists(st.sampled_from(tps), min_size=2, max_size=2)))
    pp_a, pp_b = sorted(data.draw(st.lists(st.sampled_from(pps), min_size=2, max_size=2)))
    base = Layout(tp=tp_a, pp=pp_a, global_batch=8)
    assert _weights_max(model, base.with_(tp=tp_b), 2048) <= _weights_max(model, base, 2048) * (1 + 1e-12)
    assert _weights_max(model, base.with_(pp=pp_b), 2048) <= _weights_max(model, base, 2048) * (1 + 1e-12)


@PROFILE
@given(models(), st.sampled_from([1, 2, 4, 8, 64]), st.sampled_from(["none", "selective", "full"]))
def test_zero_stages_never_raise_memory(model: ModelSpec, dp: int, recompute: str) -> None:
    totals = [
        stage_memory(model, Layout(dp=dp, zero=z, global_batch=dp, recompute=recompute), 2048, 0).total_bytes  # type: ignore[arg-type]
        for z in (0, 1, 2, 3)
    ]
    states = [
        sum(state_bytes(1e9, dp, z, MEGATRON_CORE).values())  # type: ignore[index]
        for z in (0, 1, 2, 3)
    ]
    assert states[3] <= states[2] <= states[1] <= states[0]
    if dp > 1:
        # ZeRO-3 keeps two gathered layers (comm buffers), so compare model states, and 0 ≥ 1 ≥ 2 in total
        assert totals[2] <= totals[1] <= totals[0]


@PROFILE
@given(models(), st.sampled_from([1, 2, 4, 8]), st.booleans(), st.booleans(), st.sampled_from([1, 2, 4]))
def test_full_le_selective_le_none_activations(
    model: ModelSpec, tp: int, sp: bool, flash: bool, mb: int
) -> None:
    shape = layer_shape(model)
    tokens = 2048 * mb
    acts = [
        layer_activation_bytes(shape, tokens, 2048, KeptActivations(tp, sp, r, flash))
        for r in ("full", "selective", "none")
    ]
    assert acts[0] <= acts[1] <= acts[2]
    stages = [
        stage_memory(
            model, Layout(recompute=r, micro_batch=mb, global_batch=mb, flash_attention=flash), 2048, 0
        )  # type: ignore[arg-type]
        for r in ("full", "selective", "none")
    ]
    assert (
        stages[0].breakdown["activations"]
        <= stages[1].breakdown["activations"]
        <= stages[2].breakdown["activations"]
    )


@PROFILE
@given(
    models(),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from(["none", "selective", "full"]),
)
def test_every_breakdown_sums_to_its_total(model: ModelSpec, tp: int, pp: int, recompute: str) -> None:
    if model.num_attention_heads % tp or model.num_layers % pp or model.ffn_hidden_size % tp:
        return
    if model.num_kv_heads % tp and tp % model.num_kv_heads:
        return
    dp = 16 // (tp * pp)
    cluster = ClusterSpec(gpu=H100, num_nodes=2, gpus_per_node=8)
    layout = Layout(tp=tp, pp=pp, dp=dp, micro_batch=1, global_batch=dp * 4, recompute=recompute)  # type: ignore[arg-type]
    est = estimate(model, cluster, layout, 2048)
    assert sum(est.step.breakdown.values()) == pytest.approx(est.step.total_s, rel=1e-12)
    assert all(v >= 0 for v in est.step.breakdown.values())
    for stage in est.memory.stages:
        assert sum(stage.breakdown.values()) == pytest.approx(stage.total_bytes, rel=1e-12)
    assert est.memory.margin_bytes == pytest.approx(
        est.memory.usable_bytes - est.memory.most_loaded.total_bytes
    )
    assert est.memory.fits == (est.memory.margin_bytes >= 0)
    d = est.to_dict()
    assert d["step"]["total_s"] == pytest.approx(est.step.total_s)


def test_memory_formulas_accept_numpy_arrays_and_match_scalars() -> None:
    from app.catalog import find_model

    model = find_model("Llama-3-70B")
    shape = layer_shape(model)
    tp = np.array([1, 2, 4, 8])
    pp = np.array([1, 2, 4, 8])
    vp = np.array([1, 1, 2, 5])
    sp = np.array([False, True, True, True])
    acts = layer_activation_bytes(shape, 8192.0, 8192, KeptActivations(tp, sp, "selective", True))
    dense, expert = transformer_params_per_gpu(shape, 80 / pp, 0.0, tp, np.ones(4))
    emb = embedding_params_per_gpu(model, tp, pp, np.array([1, 1, 1, 1]), np.array([1, 0, 0, 0]))
    inflight = inflight_layer_microbatches(80 / pp, pp, vp, np.array([8, 8, 16, 40]), np.zeros(4))
    states = state_bytes(dense, np.array([8, 8, 4, 2]), np.array([0, 1, 2, 3]), MEGATRON_CORE)
    for i in range(4):
        assert acts[i] == pytest.approx(
            layer_activation_bytes(
                shape, 8192.0, 8192, KeptActivations(int(tp[i]), bool(sp[i]), "selective", True)
            )
        )
        d_i, _ = transformer_params_per_gpu(shape, 80 / int(pp[i]), 0.0, int(tp[i]), 1)
        assert dense[i] == pytest.approx(d_i)
        assert emb[i] == pytest.approx(
            embedding_params_per_gpu(model, int(tp[i]), int(pp[i]), 1, int(i == 0))
        )
        assert inflight[i] == pytest.approx(
            inflight_layer_microbatches(80 / int(pp[i]), int(pp[i]), int(vp[i]), [8, 8, 16, 40][i], 0)
        )
        scalar = state_bytes(d_i, [8, 8, 4, 2][i], [0, 1, 2, 3][i], MEGATRON_CORE)
        for key in scalar:
            assert states[key][i] == pytest.approx(scalar[key])
    assert expert.shape == (4,) or float(np.max(expert)) == 0.0


def test_layer_times_accept_numpy_arrays_and_match_scalars() -> None:
    from app.catalog import find_model
    from app.core.efficiency import GemmEfficiency
    from app.core.step import LayerRates, LayerSplit, layer_times

    shape = layer_shape(find_model("Mixtral-8x7B"))
    curve = GemmEfficiency.for_gpu(H100)
    tp = np.array([1, 2, 4, 8])
    ep = np.array([1, 2, 4, 8])
    tokens = np.array([4096.0, 8192.0, 4096.0, 16384.0])
    sp = np.array([False, True, True, False])
    hbm = H100.hbm_bandwidth_bytes_per_s
    rates = LayerRates(curve, curve, hbm)
    vec = layer_times(shape, LayerSplit(tokens, 4096, tp, sp, 1, ep, True), True, rates)
    for i in range(4):
        split = LayerSplit(float(tokens[i]), 4096, int(tp[i]), bool(sp[i]), 1, int(ep[i]), True)
        one = layer_times(shape, split, True, rates)
        assert vec.forward[i] == pytest.approx(one.forward)
        assert vec.backward[i] == pytest.approx(one.backward)
        assert vec.recompute_full[i] == pytest.approx(one.recompute_full)
    assert np.all(vec.backward > vec.forward)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8", "fp4"])
def test_mfu_never_exceeds_one_on_any_catalog_part(dtype: str) -> None:
    """Achieved FLOP/s stay under the dense peak of the run's compute dtype on every catalog part: a part whose
    FP16 matrix peak is below its BF16 one (Gaudi 3) must not run fp16 at the BF16 rate."""
    from app.catalog import gpus
    from app.core.errors import SpecError

    model = ModelSpec(
        name="m",
        num_layers=8,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        ffn_hidden_size=28672,
        vocab_size=128256,
        activation="swiglu",
    )
    checked = 0
    for gpu in gpus().values():
        cluster = ClusterSpec(gpu=gpu, num_nodes=1, gpus_per_node=8)
        layout = Layout(tp=8, dp=1, micro_batch=8, global_batch=64, dtype=dtype)  # type: ignore[arg-type]
        try:
            est = estimate(model, cluster, layout, 4096)
        except SpecError:
            continue  # no tensor cores for this dtype (checked in test_estimator_layout)
        checked += 1
        assert 0 < est.step.mfu <= 1.0, (gpu.name, dtype, est.step.mfu)
        assert est.step.hardware_tflops_per_gpu * 1e12 <= gpu.peak(dtype), (gpu.name, dtype)
    assert checked >= (4 if dtype == "fp4" else 10)


@PROFILE
@given(
    models(),
    st.sampled_from([1, 2, 8, 64]),
    st.sampled_from([1, 2, 3]),
    st.sampled_from(["none", "selective", "full"]),
    st.booleans(),
    st.booleans(),
)
def test_fp8_parameters_and_bf16_moments_never_raise_memory(
    model: ModelSpec, dp: int, zero: int, recompute: str, fp8_params: bool, bf16_moments: bool
) -> None:
    # the precision options only shrink state: FP8 working weights (1 B), bf16 Adam moments and, beside bf16
    # weights, 2-byte master remainders; every stage's peak is at most the plain run's, and its breakdown sums
    from app.core.estimate import framework_for

    plain = Layout(dp=dp, zero=zero, global_batch=dp, recompute=recompute, dtype="fp8")  # type: ignore[arg-type]
    shrunk = plain.with_(
        fp8_param_gather=fp8_params, optimizer_moments_dtype="bf16" if bf16_moments else "fp32"
    )
    fw_plain, fw_shrunk = framework_for(MEGATRON_CORE, plain), framework_for(MEGATRON_CORE, shrunk)
    for stage in range(plain.pp):
        a = stage_memory(model, plain, 2048, stage, fw_plain)
        b = stage_memory(model, shrunk, 2048, stage, fw_shrunk)
        assert b.total_bytes <= a.total_bytes * (1 + 1e-12)
        assert sum(b.breakdown.values()) == pytest.approx(b.total_bytes)
        assert b.breakdown["activations"] == pytest.approx(a.breakdown["activations"])
