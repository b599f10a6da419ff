"""The framework a published run names in its notes applies to the planner's search of that run as well as to the
replay of its stated layout (app.validation.training_runs.framework_from_row_text)."""

from __future__ import annotations

import csv
from pathlib import Path

from app.validation.training_runs import REFERENCE_FABRIC, Row, framework_from_row_text, rule_for_row
from app.validation.training_totals import COLUMNS, load_rows, replay
from tests.paths import DATA_DIR

TOTALS = DATA_DIR / "training_totals.csv"


def _dsv3() -> dict[str, str]:
    with open(TOTALS, newline="", encoding="utf-8") as fh:
        return next(r for r in csv.DictReader(fh) if r["model_name"] == "DeepSeek-V3")


def test_deepseek_v3_notes_name_dualpipe_and_node_limited_routing() -> None:
    # DeepSeek-V3 technical report (arXiv 2412.19437) Sec. 3.2.1 (DualPipe) and Sec. 3.2.2 (node-limited routing)
    row = Row(1, _dsv3())
    fw = framework_from_row_text(row, rule_for_row(row).framework)
    assert fw.moe_a2a_overlap and fw.moe_dispatch_dedup


def test_notes_without_the_mechanisms_leave_the_framework_alone() -> None:
    data = _dsv3()
    data["notes"] = "PP16, EP64 over 8 nodes, ZeRO-1 DP, FP8 mixed precision"
    row = Row(1, data)
    base = rule_for_row(row).framework
    assert framework_from_row_text(row, base) == base


def _write(path: Path, row: dict[str, str]) -> Path:
    header = [*COLUMNS, "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerow({k: row.get(k, "") for k in header})
    return path


def test_the_planner_search_reads_the_notes(tmp_path: Path) -> None:
    """The same run searched with and without the notes that name DualPipe and node-limited routing: with them the
    expert-parallel all-to-all hides and crosses the network once per node, so the best layout is faster."""
    named = _dsv3()
    silent = {**named, "notes": "PP16, EP64 over 8 nodes, ZeRO-1 DP, FP8 mixed precision"}
    with_notes = replay(load_rows(_write(tmp_path / "a.csv", named))).rows[0]
    without = replay(load_rows(_write(tmp_path / "b.csv", silent))).rows[0]
    assert with_notes.best_gpu_hours is not None and without.best_gpu_hours is not None
    assert with_notes.best_gpu_hours < 0.8 * without.best_gpu_hours


def test_hand_fused_kernels_run_as_the_fused_preset() -> None:
    # jzhang38/TinyLlama README, "Training Details": fused layernorm, SwiGLU, cross-entropy and rotary kernels
    with open(TOTALS, newline="", encoding="utf-8") as fh:
        tiny = next(r for r in csv.DictReader(fh) if r["model_name"].startswith("TinyLlama"))
    row = Row(1, tiny)
    rule = rule_for_row(row)
    fused = framework_from_row_text(row, rule.framework)
    assert fused.fused_elementwise and not rule.framework.fused_elementwise
    eager = framework_from_row_text(
        Row(1, {**tiny, "notes": "FSDP (lit-gpt) with flash attention 2"}), rule.framework
    )
    assert eager == rule.framework


def test_a_model_named_nemotron_does_not_name_the_nemo_framework() -> None:
    """Source rules and framework keywords match a name only where it ends: "Nemotron-4 15B" names no framework
    (Megatron-core's defaults), "NVIDIA/NeMo" and "NeMo 24.07" name NeMo."""
    base = {"gpu": "H100-SXM", "notes": ""}
    nemotron = rule_for_row(Row(1, {**base, "source": "Parmar et al. 2024, Nemotron-4 15B Technical Report"}))
    assert nemotron.framework.name == "megatron-core"
    for source in ("NVIDIA/NeMo docs/source/performance", "a NeMo 24.07 container"):
        assert rule_for_row(Row(1, {**base, "source": source})).framework.name == "nemo", source


def test_aws_p4d_named_in_a_row_is_its_fabric() -> None:
    """BloombergGPT (arXiv 2303.17564 Sec. 3.3: 64 p4d.24xlarge) and the Falcon model cards ("P4d instances") ran
    on 400 Gb/s of EFA per node, not a DGX A100's 8 × HDR 200."""
    for notes in ("trained on 64 p4d.24xlarge instances", "384 A100 40GB GPUs in P4d instances"):
        rule = rule_for_row(Row(1, {"source": "a paper", "gpu": "A100-40GB", "notes": notes}))
        assert rule.fabric == "efa-v1-4x100", notes
    plain = rule_for_row(Row(1, {"source": "a paper", "gpu": "A100-40GB", "notes": "p4e is not a thing"}))
    assert plain.fabric == REFERENCE_FABRIC  # the A100's own: 8 × HDR 200


def test_roce_and_efa_are_read_as_words() -> None:
    """ "defaults" holds "efa" and "moe_preprocess" holds "roce": neither names a fabric; "RoCE v2" and "EFAv2" do."""
    base = {"source": "a paper", "gpu": "H100-SXM"}
    for notes in ("Megatron-core's defaults", "CUDA graphs of moe_router moe_preprocess"):
        assert rule_for_row(Row(1, {**base, "notes": notes})).fabric == REFERENCE_FABRIC, notes
    assert rule_for_row(Row(1, {**base, "notes": "8 x 400G RoCE v2"})).fabric == "roce-8x400"
    assert rule_for_row(Row(1, {**base, "notes": "AWS EFAv2"})).fabric == "efa-v3-16x200"
