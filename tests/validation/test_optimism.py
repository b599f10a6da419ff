"""`clusterplan validate optimism`: the planner's best MFU against the best published MFU of a run kind."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from app.catalog import find_gpu
from app.cli.main import main
from app.validation.optimism import (
    DEFAULT_FILES,
    carried_mfu,
    default_paths,
    dtype_class,
    group_runs,
    model_key,
    no_stronger_gpu,
    published_run,
    read_runs,
    recommendation_text,
    render_table,
    report,
    speed_ratio,
)
from app.validation.training_runs import Row, estimate_row, evaluate_row, load_rows, row_model, rule_for_row
from tests.paths import DATA_DIR, ROOT

RUNS = DATA_DIR / "training_runs.csv"
# rows of training_runs.csv: Narayanan et al. 2021 Table 1 GPT-1.7B on 32 A100s (TFLOP/s, full recompute) and NeMo
# 24.07's LLAMA2-7B on 8 H100s in FP8
GPT_1_7B_A100 = 1
LLAMA2_7B_H100_FP8 = 80


def source_row(index: int) -> dict[str, str]:
    return dict(load_rows(RUNS)[index - 1].data)


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(RUNS, newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GPT-1.7B (its own group); LLAMA2-7B twice, once renamed and slower (one group of two); a memory row."""
    slower = {**source_row(LLAMA2_7B_H100_FP8), "model_name": "Llama 2 7B (renamed)", "measured_value": "600"}
    memory = {**source_row(LLAMA2_7B_H100_FP8), "measured_metric": "mem_gib_per_gpu", "measured_value": "60"}
    rows = [source_row(GPT_1_7B_A100), source_row(LLAMA2_7B_H100_FP8), slower, memory]
    return write_csv(tmp_path_factory.mktemp("optimism") / "runs.csv", rows)


def key_of(data: dict[str, str]) -> str:
    row = Row(1, data)
    return model_key(row_model(row, rule_for_row(row)))


def test_one_shape_is_one_model_whatever_its_name() -> None:
    """Two names of one shape group together; Megatron's vocabulary padding (50,257 → 51,200) and the head count
    do not split a model, a different vocabulary, depth or KV-head count does."""
    llama = source_row(LLAMA2_7B_H100_FP8)
    assert key_of({**llama, "model_name": "Llama 2 7B (renamed)"}) == key_of(llama)
    gpt = source_row(GPT_1_7B_A100)
    assert key_of({**gpt, "vocab": "50257"}) == key_of(gpt)  # 51200 in the row
    assert key_of({**gpt, "vocab": "128256"}) != key_of(gpt)
    assert key_of({**gpt, "layers": "25"}) != key_of(gpt)
    assert key_of({**gpt, "heads": "16", "kv_heads": "16"}) == key_of(gpt)  # 24 heads: same FLOPs
    assert key_of({**gpt, "kv_heads": "8"}) != key_of(gpt)  # GQA
    assert dtype_class("bf16") == dtype_class("fp16") == "16-bit"
    assert (dtype_class("fp8"), dtype_class("fp4")) == ("fp8", "fp4")


def test_speed_ratio_sign() -> None:
    """A rate predicted 10 % high means the run was slower than estimated; a time predicted 10 % high, faster."""
    assert speed_ratio("tflops_per_gpu", 100.0, 110.0) == pytest.approx(1 / 1.1)
    assert speed_ratio("tokens_per_s_per_gpu", 100.0, 110.0) == pytest.approx(1 / 1.1)
    assert speed_ratio("iter_time_s", 1.0, 1.1) == pytest.approx(1.1)
    with pytest.raises(ValueError):
        speed_ratio("mem_gib_per_gpu", 1.0, 1.0)


def test_measured_mfu_follows_the_replay_sign() -> None:
    """The replay's error is predicted / measured − 1 for a rate (predict_metric gives step.mfu × 100 for an
    mfu_pct row without a stated peak): an mfu_pct row's measured MFU comes back as its own value, a time half the
    estimate doubles the estimated MFU."""
    data = {
        **source_row(LLAMA2_7B_H100_FP8),
        "measured_metric": "mfu_pct",
        "measured_value": "30",
        "notes": "",
    }
    row = Row(1, data)
    result = evaluate_row(row)
    assert result.error_pct == pytest.approx((result.predicted / 30.0 - 1) * 100)
    run = published_run(row, "x.csv")
    assert run is not None
    assert run.measured_mfu_pct == pytest.approx(30.0)
    assert run.estimated_mfu_pct == pytest.approx(result.predicted)

    step_s = estimate_row(row, "iter_time_s").estimate.step.total_s
    timed = published_run(
        Row(2, {**data, "measured_metric": "iter_time_s", "measured_value": str(step_s / 2)}), "x"
    )
    assert timed is not None
    assert timed.measured_mfu_pct == pytest.approx(2 * timed.estimated_mfu_pct)


def test_groups_and_best_published(small_csv: Path) -> None:
    runs = read_runs([small_csv])
    assert [r.row.index for r in runs] == [1, 2, 3]  # the memory row has no MFU
    groups = group_runs(runs)
    assert sorted(len(g) for g in groups.values()) == [1, 2]
    llama = groups[runs[1].key]
    assert runs[1].key == runs[2].key != runs[0].key
    assert {r.row.index for r in llama} == {2, 3}
    assert llama[0].measured_mfu_pct > llama[1].measured_mfu_pct  # 776 TFLOP/s against 600
    assert llama[1].measured_mfu_pct == pytest.approx(llama[0].measured_mfu_pct * 600 / 776)


def test_flagged_group_names_its_mechanism(small_csv: Path) -> None:
    rep = report(read_runs([small_csv]))
    by_model = {name: g for g in rep.groups for name in g.model_names}
    gpt = by_model["GPT-1.7B"]
    # Narayanan's 137 TFLOP/s with full recompute, counted with the recompute pass: about 34 % model-FLOPs MFU;
    # the planner drops the recompute and ZeRO-shards instead
    assert 30.0 < gpt.published_mfu_pct < 37.0
    assert gpt.threshold_pct is not None and gpt.gap_ratio is not None
    assert (gpt.gap_ratio - 1) * 100 > gpt.threshold_pct
    assert gpt.flagged and gpt.mechanism is not None
    assert "recompute" in gpt.differs
    assert gpt.savings_s[0][0] == "recompute" and gpt.savings_s[0][1] > 0
    assert "biggest saving: recompute" in gpt.mechanism
    assert gpt.gap_ratio == pytest.approx(gpt.layout_ratio * gpt.estimate_ratio)
    llama = by_model["LLAMA2-7B"]
    assert llama.runs == 2 and llama.row == 2 and llama.model_names == ["LLAMA2-7B", "Llama 2 7B (renamed)"]
    assert not llama.flagged and llama.mechanism is None
    assert rep.summary()["flagged"] == 1


def test_cli_json_shape(small_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", "optimism", str(small_csv), "--json"])
    assert exit_info.value.code in (0, None)
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"groups", "summary"}
    assert {"n", "flagged", "median_gap_pts"} <= set(doc["summary"])
    assert doc["summary"]["n"] == 2 and doc["summary"]["flagged"] == 1
    flagged = [g for g in doc["groups"] if g["flagged"]]
    assert len(flagged) == 1 and flagged[0]["mechanism"].startswith("planner: ")
    assert all(g["file"] == "runs.csv" for g in doc["groups"])


@pytest.mark.parametrize(
    ("content", "message"), [(None, "file not found"), ("a,b\n1,2\n", "missing columns")]
)
def test_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = tmp_path / "input.csv"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", "optimism", str(path)])
    assert exit_info.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_default_files_are_the_repository_s() -> None:
    paths = default_paths()
    # every training-run file of the repository, so that a new one cannot be left out of the guard
    on_disk = sorted(p.name for p in (ROOT / "tests" / "data").glob("training_runs*.csv"))
    assert len(paths) == len(DEFAULT_FILES) == len(on_disk) == 13
    assert sorted(p.name for p in paths) == on_disk
    assert all(path.is_file() and path.parent == ROOT / "tests" / "data" for path in paths)


def test_a_flagged_gap_is_backed_by_a_published_peer_of_its_size(tmp_path: Path) -> None:
    """GPT-1.7B's flagged gap is unexplained alone; a run of a model within ×2 of its size on the same GPU that
    reached the planner's MFU backs it, named with its source."""
    alone = report(read_runs([write_csv(tmp_path / "alone.csv", [source_row(GPT_1_7B_A100)])]))
    assert alone.groups[0].flagged and alone.groups[0].evidence is None
    assert alone.summary()["unexplained"] == 1 and alone.summary()["backed"] == 0
    # the same family, 30 layers instead of 24 (about 2.1B parameters), measured at 190 TFLOP/s
    peer = {
        **source_row(GPT_1_7B_A100),
        "model_name": "GPT-2.1B peer",
        "layers": "30",
        "measured_value": "190",
    }
    far = {**peer, "model_name": "GPT-10B far", "layers": "150"}  # six times the size: not a peer
    both = report(read_runs([write_csv(tmp_path / "both.csv", [source_row(GPT_1_7B_A100), peer, far])]))
    gpt = next(g for g in both.groups if g.model_names == ["GPT-1.7B"])
    assert gpt.flagged and gpt.evidence is not None
    assert "GPT-2.1B peer" in gpt.evidence and "both:2" in gpt.evidence and "Narayanan" in gpt.evidence
    assert both.summary()["backed"] >= 1
    assert "evidence: " in render_table(both)


def test_a_peer_on_a_gpu_no_stronger_backs_a_gap_a_stronger_one_does_not(tmp_path: Path) -> None:
    """An MFU reached on an A100-40GB (the same peak, less HBM and bandwidth) backs the same MFU claimed on an
    A100-80GB, and says on which GPU; one reached on an H100 (another peak) does not back an A100 claim (the
    reverse direction, a stronger GPU of the same peak, is test_no_stronger_gpu_compares_every_catalogued_resource)."""
    peer = {
        **source_row(GPT_1_7B_A100),
        "model_name": "GPT-2.1B peer",
        "layers": "30",
        "measured_value": "190",
    }
    on_40 = {**peer, "gpu": "A100-40GB"}
    on_h100 = {**peer, "gpu": "H100-SXM", "measured_value": "600"}
    backed = report(read_runs([write_csv(tmp_path / "a.csv", [source_row(GPT_1_7B_A100), on_40])]))
    gpt = next(g for g in backed.groups if g.model_names == ["GPT-1.7B"])
    assert gpt.flagged and gpt.evidence is not None and "on A100-40GB-SXM" in gpt.evidence

    rep = report(read_runs([write_csv(tmp_path / "b.csv", [source_row(GPT_1_7B_A100), on_h100])]))
    flagged = next(g for g in rep.groups if g.model_names == ["GPT-1.7B"])
    assert flagged.flagged and flagged.evidence is None


def test_a_peer_on_a_stronger_gpu_of_the_same_peak_is_carried_by_the_estimate_of_its_own_layout(
    tmp_path: Path,
) -> None:
    """GPT-1.7B on A100-40GB, measured slow enough to be flagged; a peer measured on the A100-80GB (the same peak, more bandwidth) backs it only
    at its MFU carried to the 40 GB part: × the estimate of the peer's own layout there over that on its GPU, named
    "carried from" with both factors. A peer whose layout the 40 GB part cannot hold is not carried."""
    flagged = {**source_row(GPT_1_7B_A100), "gpu": "A100-40GB", "measured_value": "100"}
    # ZeRO-1 (the optimizer state sharded over the 32 ranks) lets its 30 layers fit in 40 GB
    peer = {
        **source_row(GPT_1_7B_A100),
        "model_name": "GPT-2.1B peer",
        "layers": "30",
        "zero_stage": "1",
        "measured_value": "190",
    }
    rep = report(read_runs([write_csv(tmp_path / "c.csv", [flagged, peer])]))
    gpt = next(g for g in rep.groups if g.model_names == ["GPT-1.7B"])
    assert gpt.flagged and gpt.evidence is not None and "carried from A100-80GB-SXM" in gpt.evidence

    runs = read_runs([tmp_path / "c.csv"])
    on_40 = next(r for r in runs if r.row.get("model_name") == "GPT-1.7B")
    on_80 = next(r for r in runs if r.row.get("model_name") == "GPT-2.1B peer")
    moved = estimate_row(Row(2, {**peer, "gpu": "A100-40GB"}), on_80.metric).estimate
    factor = float(moved.step.mfu) / float(on_80.replayed.estimate.step.mfu)
    assert 0.5 < factor < 1.0  # the 40 GB part's lower HBM bandwidth slows the same layout
    carried = carried_mfu(on_80, on_40)
    assert carried == pytest.approx(on_80.measured_mfu_pct * factor)
    assert f"{carried:.1f} % by GPT-2.1B peer" in gpt.evidence and f"× {factor:.2f}" in gpt.evidence

    # without the optimizer sharding (the row's ZeRO-0) the same layout fills 44 GiB: it does not fit the 40 GB part
    heavy = {**peer, "zero_stage": "0"}
    heavy_run = next(r for r in read_runs([write_csv(tmp_path / "d.csv", [heavy])]))
    assert carried_mfu(heavy_run, on_40) is None


def test_no_stronger_gpu_compares_every_catalogued_resource() -> None:
    a40, a80, h100, h96 = (
        find_gpu(n) for n in ("A100-40GB-SXM", "A100-80GB-SXM", "H100-SXM", "H100-SXM-96GB")
    )
    assert no_stronger_gpu(a40, a80, "16-bit") and not no_stronger_gpu(a80, a40, "16-bit")
    assert no_stronger_gpu(a80, a80, "fp8")  # the same GPU, whatever the catalog lists
    assert not no_stronger_gpu(h100, a80, "16-bit")  # another peak
    assert not no_stronger_gpu(h100, h96, "16-bit")  # 700 W against the 96 GB part's 500 W cap
    assert not no_stronger_gpu(a40, a80, "fp8")  # no FP8 peak on A100: nothing to compare


def test_a_group_reports_the_recommendation_inside_the_validated_region(tmp_path: Path) -> None:
    """Llama 3 405B on H100 (the Llama 3 paper's Table 4 runs): the planner's best puts context parallelism on
    2,048-token chunks, shorter than any published run, outside the validated region; the report also gives the
    recommendation (the headline), its MFU and whether it too beats the published run beyond the resolution."""
    with (DATA_DIR / "training_runs_heldout.csv").open(newline="") as f:
        lines = list(csv.reader(f))
    header, rows = lines[0], lines[1:]
    col = header.index
    chosen = [r for r in rows if r[col("model_name")] == "Llama 3 405B"]
    assert len(chosen) == 3
    path = tmp_path / "llama.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([header, *chosen])
    rep = report(read_runs([path]))
    (group,) = rep.groups
    assert any("context parallelism on 2,048-token chunks" in r for r in group.outside_region)
    assert group.recommended_layout is not None and " CP2 " in group.recommended_layout
    assert group.recommended_mfu_pct is not None and group.planner_mfu_pct is not None
    assert group.published_mfu_pct < group.recommended_mfu_pct < group.planner_mfu_pct
    summary = rep.summary()
    assert summary["recommended_flagged"] == int(group.recommended_flagged)
    assert summary["recommended_unexplained"] <= summary["recommended_flagged"]
    assert "recommended (the best is outside the validated region" in recommendation_text(group)


def _heldout_rows(tmp_path: Path, indices: tuple[int, ...]) -> Path:
    with (DATA_DIR / "training_runs_heldout.csv").open(newline="") as f:
        lines = list(csv.reader(f))
    path = tmp_path / "heldout_rows.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([lines[0], *(lines[i] for i in indices)])
    return path


def test_a_flagged_gap_that_is_the_estimates_own_error_is_told_apart(tmp_path: Path) -> None:
    """Megatron-Bridge's Qwen3-30B-A3B recipes (held-out rows 31 and 32, light MoE passes on the alltoall
    dispatcher): on H100 the planner's layout is within the resolution of the published one's estimate and the gap is
    that estimate's own error, inside the light-MoE band, so the group is a point error, not a layout claim; on B200
    the planner's layout gains more than the resolution, so the group stays unexplained."""
    rep = report(read_runs([_heldout_rows(tmp_path, (31, 32))]))
    by_gpu = {g.gpu: g for g in rep.groups}
    h100, b200 = by_gpu["H100-SXM"], by_gpu["B200"]
    for g in (h100, b200):
        assert g.flagged and g.evidence is None
        assert g.layout_ratio is not None and g.estimate_ratio is not None and g.threshold_pct is not None
    assert (h100.layout_ratio - 1) * 100 <= h100.threshold_pct
    assert h100.point_error is not None and "×1.70" in h100.point_error
    assert "under 20 ms of GPU work per layer pass" in h100.point_error
    assert (b200.layout_ratio - 1) * 100 > b200.threshold_pct and b200.point_error is None
    summary = rep.summary()
    assert (summary["point_error"], summary["unexplained"]) == (1, 1)
    assert "point error: the planner's layout gains ×" in render_table(rep)
