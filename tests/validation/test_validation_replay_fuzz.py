"""The training-run replay on rows it has never seen: published rows with cells changed to what other sources
write (other GPU names, precision recipes, recompute wording, blank or zero sizes, odd measured values). Every row
is either evaluated to a finite prediction or listed as skipped with its reason; nothing escapes as an exception
and no row is dropped."""

from __future__ import annotations

import csv
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.validation.training_runs import Row, evaluate_row, replay
from tests.paths import DATA_DIR

DATA = DATA_DIR
BASE_ROWS = [
    dict(r)
    for f in sorted(DATA.glob("training_runs*.csv"))
    for r in csv.DictReader(f.open(newline="", encoding="utf-8"))
]

# what other publications write in these columns
VARIANTS: dict[str, list[str]] = {
    "gpu": [
        "H200 SXM 141GB",
        "B200",
        "MI300X",
        "A100-40GB",
        "TPU v5p",
        "L40S",
        "H800",
        "A800 80GB",
        "",
        "H100 PCIe",
    ],
    "dtype": ["nvfp4", "mxfp8", "FP8-CS", "FP8 (delayed scaling)", "BF16", "fp32", "", "int8", "mixed"],
    "recompute": ["Full", "selective (core_attn)", "yes", "no", "block", "", "FULL (uniform)", "partial"],
    "zero_stage": ["FSDP", "HSDP", "2", "3", "", "ZeRO-1", "none", "4"],
    "sequence_parallel": ["on", "yes", "true", "off", "", "Y"],
    "tp": ["0", "3", "16", "", "TP=8", "64"],
    "pp": ["0", "", "7", "128"],
    "cp": ["0", "", "3", "64"],
    "dp": ["0", "", "1000000"],
    "micro_batch": ["0", "", "1000", "3"],
    "global_batch": ["0", "", "7", "100000000"],
    "interleave_v": ["0", "", "100", "n/a"],
    "seq_len": ["0", "", "1", "10000000", "4k"],
    "num_gpus": ["0", "", "7", "100000"],
    "kv_heads": ["0", "", "3", "1"],
    "heads": ["0", "", "7"],
    "layers": ["0", "", "1", "1000"],
    "hidden": ["0", "", "100", "1000000"],
    "ffn_hidden": ["0", "", "5"],
    "vocab": ["0", "", "1"],
    "measured_value": ["0", "", "nan", "-5", "inf", "1e30"],
    "measured_metric": ["tflops_per_gpu", "mfu_pct", "oom", "iter_time_s", "mem_gib_per_gpu", "throughput"],
}


@st.composite
def mutated_rows(draw: st.DrawFn) -> dict[str, str]:
    row = dict(draw(st.sampled_from(BASE_ROWS)))
    for column in draw(st.lists(st.sampled_from(sorted(VARIANTS)), min_size=1, max_size=4, unique=True)):
        row[column] = draw(st.sampled_from(VARIANTS[column]))
    return row


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated_rows())
def test_every_row_is_evaluated_or_skipped_with_a_reason(data: dict[str, str]) -> None:
    result = evaluate_row(Row(1, data))
    if result.skipped is not None:
        assert result.skipped.strip(), data
        return
    assert result.predicted is not None and math.isfinite(result.predicted), (data, result)
    if result.metric != "oom":
        assert result.error_pct is not None and math.isfinite(result.error_pct), (data, result)


def test_a_file_of_changed_rows_reports_every_row() -> None:
    changed = [{**r, "tp": "0"} for r in BASE_ROWS[:5]] + BASE_ROWS[5:10]
    report = replay(Row(i + 1, r) for i, r in enumerate(changed))
    summary = report.summary()
    assert len(report.rows) == 10
    skipped = {s["row"] for s in summary["skipped"]}
    evaluated = {r.row for r in report.rows if r.skipped is None}
    assert skipped | evaluated == set(range(1, 11)) and not skipped & evaluated


def _layout_of(**cells: str):  # type: ignore[no-untyped-def]
    from app.validation.training_runs import estimate_row

    base = next(r for r in BASE_ROWS if r["model_name"] == "LLAMA3-70B" and "GB300" in r["gpu"])
    return estimate_row(Row(1, {**base, **cells}))


def test_cells_written_the_way_other_sources_write_them() -> None:
    # "TP=8"-style cells give their number; a sequence length in thousands of tokens counts 1,024 each
    assert Row(1, {"tp": "TP=8"}).int_or("tp", None) == 8
    assert Row(1, {"seq_len": "8K"}).int_or("seq_len", None) == 8192
    assert Row(1, {"seq_len": "4.5k"}).int_or("seq_len", None) == 4608
    assert Row(1, {"seq_len": "131072"}).int_or("seq_len", None) == 131072
    assert Row(1, {"interleave_v": "n/a"}).int_or("interleave_v", 1) == 1
    # sequence parallelism "on", FSDP without a stage number
    assert _layout_of(
        tp="2", pp="1", dp="32", interleave_v="1", sequence_parallel="on"
    ).layout.sequence_parallel
    assert not _layout_of(
        tp="2", pp="1", dp="32", interleave_v="1", sequence_parallel="off"
    ).layout.sequence_parallel
    fsdp = _layout_of(zero_stage="FSDP", interleave_v="1")
    assert fsdp.layout.zero == 3 and "zero=3 (FSDP)" in fsdp.defaults
    # a recompute cell the replay cannot read is replayed with the framework's default, and says so
    odd = _layout_of(recompute="activation checkpointing")
    assert any("not understood" in d for d in odd.defaults)


def test_nonsense_measurements_are_skipped_with_the_reason() -> None:
    base = next(r for r in BASE_ROWS if r["measured_metric"] == "tokens_per_s_per_gpu")
    for value in ("0", "-5", "inf"):
        result = evaluate_row(Row(1, {**base, "measured_value": value}))
        assert result.skipped and "positive finite" in result.skipped
    oom = next(r for r in BASE_ROWS if r["measured_metric"] == "oom")
    assert "must be 1" in (evaluate_row(Row(1, {**oom, "measured_value": "2"})).skipped or "")
