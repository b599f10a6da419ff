"""Llama 3 405B's published pre-training layout (Llama 3 paper, arXiv 2407.21783, Sec. 3.3.2 and Table 4): TP8 PP16
CP1 DP128 on 16,384 H100-80GB at 8,192 tokens and 16M tokens per batch, trained "on sequences of 8K tokens without
activation checkpointing" with an interleaved schedule and one transformer layer fewer on the first and the last
stage. The estimator must fit it and land its speed inside its own accuracy band of the published 41 % MFU."""

from __future__ import annotations

import pytest

from app.catalog import accuracy_table
from app.core.accuracy import band_for
from app.core.framework import MEGATRON_CORE
from app.core.layout import stage_layer_counts
from app.core.memory import KeptActivations, layer_activation_bytes
from app.core.model import layer_shape
from app.core.units import GiB
from app.validation.training_runs import completion_candidates, estimate_row, load_rows
from app.validation.training_totals import check_row, replay_row
from app.validation.training_totals import load_rows as load_totals
from tests.paths import DATA_DIR

PUBLISHED_MFU = 0.41  # Table 4, 16,384 GPUs, TP8 CP1 PP16 DP128
SEQ = 8192


@pytest.fixture(scope="module")
def stated() -> object:
    rows = load_totals(DATA_DIR / "training_totals.csv")
    row = next(r for r in rows if r.get("model_name") == "Llama-3.1-405B")
    return estimate_row(replay_row(row, check_row(row), stated=True))


def test_the_stated_layout_fits_with_meta_s_stage_split(stated: object) -> None:
    est = stated.estimate  # type: ignore[attr-defined]
    layout = stated.layout  # type: ignore[attr-defined]
    assert (layout.tp, layout.pp, layout.cp, layout.dp) == (8, 16, 1, 128)
    assert layout.recompute == "none"  # "without activation checkpointing"
    # 126 layers: one fewer on each end stage, the embedding and the loss taking their slot (Sec. 3.3.2)
    counts = stage_layer_counts(stated.model.num_layers, layout)  # type: ignore[attr-defined]
    assert counts == (7,) + (8,) * 14 + (7,)
    assert layout.vp > 1  # the interleaved schedule
    assert est.memory.fits
    assert est.memory.peak_bytes < 80 * GiB * (1 - est.memory.safety_fraction)


def test_the_stated_layout_is_inside_the_accuracy_band_of_the_published_mfu(stated: object) -> None:
    est = stated.estimate  # type: ignore[attr-defined]
    band = band_for(accuracy_table(), stated.model, SEQ)  # type: ignore[attr-defined]
    assert band is not None and band.regime == "dense"
    # measured ÷ estimated step time = estimated ÷ measured MFU
    ratio = float(est.step.mfu) / PUBLISHED_MFU
    assert band.ratio_min <= ratio <= band.ratio_max


def test_the_peak_stage_holds_the_batch_s_micro_batches_of_its_eight_layers(stated: object) -> None:
    """Second stage, 8 layers, 16 micro-batches per step (2,048 / DP128 at mb=1): the interleaved warm-up
    2(p − 2) + (v − 1)p + 1 exceeds the step's m·v chunks, so every forward runs before the first backward
    (Megatron-core schedules.py: all warm-up when the micro-batches equal pp)."""
    est = stated.estimate  # type: ignore[attr-defined]
    stage = est.memory.stages[1]
    assert stage.inflight_microbatches == pytest.approx(16.0)
    per_layer = layer_activation_bytes(
        layer_shape(stated.model),  # type: ignore[attr-defined]
        SEQ,
        SEQ,
        KeptActivations(8, True, "none", True, fw=stated.framework),  # type: ignore[attr-defined]
    )
    assert stage.breakdown["activations"] == pytest.approx(16 * 8 * per_layer)
    # gradients and optimizer states sharded over the 128 data-parallel ranks (ZeRO-2, Sec. 3.3.2)
    assert stage.breakdown["gradients"] < 0.2 * GiB


def test_llama_405b_layer_keeps_korthikanti_terms_without_dropout(stated: object) -> None:
    """Korthikanti et al. 2022 Sec. 4 for a dropout-free SwiGLU GQA layer with flash attention, TP8 + SP, bytes per
    token: two norm inputs, QKV and FFN inputs (2h each, sequence-parallel) + Q, K, V, attention output, the SwiGLU
    input (2 × ffn) and the down projection input (ffn), 16-bit, split over t, + one fp32 log-sum-exp per head."""
    h, ffn, kv, heads, t = 16384, 53248, 1024, 128, 8
    expected = (2 * 4 * h + 2 * (2 * h + 2 * kv) + 2 * 3 * ffn + 4 * heads) / t
    got = layer_activation_bytes(
        layer_shape(stated.model),  # type: ignore[attr-defined]
        1,
        SEQ,
        KeptActivations(t, True, "none", True, fw=MEGATRON_CORE),
    )
    assert got == pytest.approx(expected)


def test_an_uneven_megatron_core_split_may_be_interleaved() -> None:
    """126 layers on 16 stages: (126 + 2) / 16 = 8 slots a stage, so the completion may interleave 1, 2, 4 or 8
    chunks (the embedding and the loss each fill a chunk's slot)."""
    rows = load_rows(DATA_DIR / "training_runs_heldout.csv")
    row = next(r for r in rows if r.get("model_name") == "Llama 3 405B" and r.get("dp") == "128")
    replayed = estimate_row(row, "tflops_per_gpu")
    _, vps = completion_candidates(replayed.model, replayed.layout, MEGATRON_CORE, False, True)
    assert vps == [1, 2, 4, 8]
