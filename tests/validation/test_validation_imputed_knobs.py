"""Unstated knobs of a published row (micro-batch, interleaving) completed with the planner's best valid layout."""

from __future__ import annotations

import pytest

from app.core.framework import DEEPSPEED, MEGATRON_2021, MEGATRON_2022, MEGATRON_CORE
from app.core.layout import check_layout
from app.validation.training_runs import (
    IMPUTED,
    Row,
    RowEstimate,
    completion_candidates,
    estimate_row,
    load_rows,
)
from tests.paths import DATA_DIR

DEVELOPMENT = DATA_DIR / "training_runs.csv"


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return load_rows(DEVELOPMENT)


def row_named(rows: list[Row], source: str, model: str, num_gpus: str, tp: str = "8") -> Row:
    (row,) = [
        r
        for r in rows
        if source in r.get("source")
        and r.get("model_name") == model
        and r.get("num_gpus") == num_gpus
        and r.get("tp") == tp
    ]
    return row


def stated(row: Row, **cells: str) -> Row:
    return Row(row.index, {**row.data, **cells})


def fastest_fitting(candidates: list[RowEstimate]) -> RowEstimate:
    fitting = [c for c in candidates if c.estimate.memory.fits]
    assert fitting
    return max(fitting, key=lambda c: float(c.estimate.step.tokens_per_s))


def runnable(modelled: RowEstimate) -> None:
    """The chosen layout passes the estimator's own consistency rules and fits in HBM."""
    check_layout(modelled.model, modelled.cluster, modelled.layout, modelled.estimate.seq_len)
    assert modelled.estimate.memory.fits


def test_blank_micro_batch_takes_the_fastest_fitting_completion(rows: list[Row]) -> None:
    # Megatron-LM's README table: GPT-32B on 384 H100, TP8 DP48, global batch 192, micro-batch not stated
    row = row_named(rows, "Megatron-LM README", "GPT-32B", "384")
    assert row.get("micro_batch") == ""
    modelled = estimate_row(row)
    runnable(modelled)
    # the same row with each micro-batch dividing its 4 sequences per data-parallel rank written in
    brute = fastest_fitting([estimate_row(stated(row, micro_batch=str(mb))) for mb in (1, 2, 4)])
    assert modelled.layout.micro_batch == brute.layout.micro_batch
    assert modelled.estimate.step.tokens_per_s == pytest.approx(float(brute.estimate.step.tokens_per_s))
    assert f"micro_batch={modelled.layout.micro_batch} ({IMPUTED})" in modelled.defaults
    assert "micro_batch=1" not in modelled.defaults
    # with pp = 1 there is nothing to interleave: vp is not imputed
    assert modelled.layout.vp == 1 and not any(
        d.startswith("vp=") and IMPUTED in d for d in modelled.defaults
    )


def test_stated_micro_batch_is_kept(rows: list[Row]) -> None:
    row = stated(row_named(rows, "Megatron-LM README", "GPT-32B", "384"), micro_batch="1")
    modelled = estimate_row(row)
    assert modelled.layout.micro_batch == 1
    assert not any(IMPUTED in d or d.startswith("micro_batch") for d in modelled.defaults)


def test_blank_interleaving_of_megatron_lm_2021_is_no_interleaving(rows: list[Row]) -> None:
    # PTD-P's GPT-3 175B on 1,536 A100: TP8 PP12 DP16, micro-batch 1 stated, interleaving not stated. Megatron-LM of
    # 2021 interleaved only with --num-layers-per-virtual-pipeline-stage, so the row ran plain 1F1B
    row = row_named(rows, "Narayanan et al. 2021 Table 2", "GPT-3 175B (174.6B)", "1536")
    assert row.get("interleave_v") == "" and row.get("micro_batch") == "1"
    modelled = estimate_row(row)
    assert modelled.framework.name.startswith(MEGATRON_2021.name)
    assert modelled.layout.vp == 1 and "vp=1" in modelled.defaults
    assert not any(d.startswith("vp=") and IMPUTED in d for d in modelled.defaults)


def test_blank_interleaving_takes_a_valid_schedule(rows: list[Row]) -> None:
    # the same layout from a source without a rule (Megatron-core on the A100's reference fabric), whose blank
    # interleaving may have been any valid one
    narayanan = row_named(rows, "Narayanan et al. 2021 Table 2", "GPT-3 175B (174.6B)", "1536")
    row = stated(narayanan, source="a Megatron-core run of GPT-3 175B on 1,536 A100")
    modelled = estimate_row(row)
    assert modelled.framework.name == MEGATRON_CORE.name
    runnable(modelled)
    layout = modelled.layout
    assert layout.micro_batch == 1  # stated
    assert (modelled.model.num_layers // layout.pp) % layout.vp == 0
    assert (layout.global_batch // (layout.dp * layout.micro_batch)) % layout.pp == 0  # interleaved schedule
    assert f"vp={layout.vp} ({IMPUTED})" in modelled.defaults
    candidates = []
    for vp in (1, 2, 4, 8):  # each vp ≤ 8 that divides the 8 layers of a stage
        candidates.append(estimate_row(stated(row, interleave_v=str(vp))))
    assert layout.vp == fastest_fitting(candidates).layout.vp


def test_sc21_artifact_values_stay_stated(rows: list[Row]) -> None:
    # Narayanan's Table 1 leaves micro-batch and interleaving blank; the SC21 artifact gives them
    row = rows[0]
    assert "Table 1" in row.get("source") and row.get("micro_batch") == ""
    modelled = estimate_row(row)
    assert any(d.startswith("micro_batch=") and "SC21 artifact" in d for d in modelled.defaults)
    assert not any(IMPUTED in d for d in modelled.defaults)


def test_candidates_follow_the_framework_and_the_stated_sizes(rows: list[Row]) -> None:
    row = row_named(rows, "Narayanan et al. 2021 Table 2", "GPT-3 175B (174.6B)", "1536")
    modelled = estimate_row(stated(row, interleave_v="1"))
    model, layout = modelled.model, modelled.layout
    mbs, vps = completion_candidates(model, layout, MEGATRON_CORE, True, True)
    assert mbs == [1, 2, 4, 8, 16]  # powers of two ≤ 16 dividing 1536 / 16 = 96 sequences per rank
    assert vps == [1, 2, 4, 8]  # ≤ 8 and dividing 96 / 12 = 8 layers per stage
    # DeepSpeed's pipeline engine has no interleaved schedule; a stated knob is not enumerated
    assert completion_candidates(model, layout, DEEPSPEED, True, True)[1] == [1]
    assert completion_candidates(model, layout, MEGATRON_CORE, False, False) == ([1], [1])
    # Megatron-LM of 2021-22 interleaved only with --num-layers-per-virtual-pipeline-stage: a blank vp ran 1F1B,
    # while the micro-batch is still completed
    for period in (MEGATRON_2021, MEGATRON_2022):
        assert completion_candidates(model, layout, period, True, True) == (mbs, [1])


def test_stated_whole_run_layout_is_completed_the_same_way() -> None:
    """validate training-totals replays a stated layout through the same completion: Llama 3.1 405B's TP8 PP16 on
    16,384 H100 splits its 126 layers as 7 | 8 … 8 | 7 (the embedding and the loss take a layer's slot each), so the
    completion may interleave it; the fastest completion that fits is mb=1, vp=8 (Llama 3 paper Sec. 3.3.2: an
    interleaved schedule, 8K sequences without activation checkpointing)."""
    from app.validation.training_totals import check_row, replay_row
    from app.validation.training_totals import load_rows as load_totals

    (row,) = [
        r
        for r in load_totals(DEVELOPMENT.with_name("training_totals.csv"))
        if r.get("model_name") == "Llama-3.1-405B"
    ]
    modelled = estimate_row(replay_row(row, check_row(row), stated=True))
    assert modelled.layout.micro_batch == 1 and modelled.layout.vp == 8
    assert f"micro_batch=1 ({IMPUTED})" in modelled.defaults
    assert f"vp=8 ({IMPUTED})" in modelled.defaults
    assert "no completion fits: the one with the smallest peak" not in modelled.defaults
    assert modelled.estimate.memory.fits
