"""Real tool outputs import with the figures their authors saw (fixtures and sources: tests/data/bench/SOURCES.md)."""

from __future__ import annotations

import pytest

from app.bench.importers import detect_format, import_file, import_text
from tests.paths import DATA_DIR

DATA = DATA_DIR / "bench"


def test_mamf_finder_v2_h100_log_keeps_every_row_and_the_summary_best() -> None:
    doc = import_file(DATA / "mamf_h100_bf16_gpu0.txt")
    shapes = {(r["m"], r["n"], r["k"]): r for r in doc["rows"]}
    # 125 progress rows of the excerpt plus the summary's best shape, whose row the excerpt dropped
    assert len(shapes) == 126
    first = shapes[(1024, 1024, 1024)]
    assert (first["mean_tflops"], first["median_tflops"], first["best_tflops"]) == (134.8, 134.9, 140.1)
    assert shapes[(4096, 3072, 13312)]["best_tflops"] == 785.5  # "max:    785.5 TFLOPS @ 4096x3072x13312"
    assert doc["summary"]["max_tflops"]["bf16"]["tflops"] == 785.5
    assert doc["config"]["source_benchmark_version"] == "2"
    assert doc["environment"]["torch"] == "2.5.1+cu121"
    assert doc["environment"]["devices"][0]["name"] == "NVIDIA H100 80GB HBM3"
    fp8 = import_file(DATA / "mamf_h100_fp8_gpu0.txt")
    assert {r["dtype"] for r in fp8["rows"]} == {"fp8"}


def test_a_terminal_copy_uses_its_summary_best_not_its_last_row() -> None:
    """The terminal keeps only the last progress row (25.8 TFLOP/s); the run's best is 36.9 TFLOP/s."""
    doc = import_file(DATA / "mamf_v2_terminal_copy_gfx1151.txt")
    assert doc["summary"]["max_tflops"]["bf16"] == {"tflops": 36.9, "m": 6144, "n": 3072, "k": 3072}
    last = next(r for r in doc["rows"] if (r["m"], r["n"], r["k"]) == (13312, 15360, 6144))
    assert last["best_tflops"] == 25.8
    assert any("36.9" in note for note in doc["notes"]) and any("3375" in note for note in doc["notes"])


def test_mamf_finder_v4_table_and_headlines() -> None:
    text = (DATA / "mamf_v4_grid_readme.txt").read_text()
    assert detect_format(text) == "mamf-finder"
    doc = import_text(text)
    (row,) = doc["rows"]
    assert (row["m"], row["n"], row["k"]) == (4096, 4096, 4096)
    assert (row["mean_tflops"], row["median_tflops"], row["best_tflops"]) == (779.5, 779.3, 784.2)
    assert (row["mamf_tflops"], row["msmf_tflops"]) == (781.0, 743.0)


def test_mamf_finder_v3_phase_tags_parse() -> None:
    """v3's auto search prints a phase tag after the bar (mamf-finder.py v3 measure(): f"{label:>7} ")."""
    line = (
        "    12 |    wave  690.1(mean)  691.0(median)  702.3(max) @ 1536x2816x8192        | best:  690.1(mean)"
        "  691.0(median)  702.3(max) TFLOPS"
    )
    doc = import_text("** Dtype: torch.bfloat16\n" + line)
    assert [(r["m"], r["best_tflops"]) for r in doc["rows"]] == [(1536, 702.3)]


def test_a3_mega_log_imports_sixteen_ranks_on_two_nodes() -> None:
    doc = import_file(DATA / "all_reduce_a3mega_2nodes.log")
    assert len(doc["rows"]) == 31
    row = doc["rows"][-1]
    assert (row["size_bytes"], row["time_us"], row["busbw_gbps"]) == (8589934592, 47535.0, 338.82)
    assert (row["ranks"], row["nodes"], row["ranks_per_node"]) == (16, 2, 8)


def test_a_log_without_its_device_list_is_not_read_as_two_ranks() -> None:
    """The same real log with the '# Using devices' block cut off: 16 ranks from busbw / algbw."""
    lines = (DATA / "all_reduce_a3mega_2nodes.log").read_text().splitlines()
    cut = "\n".join(line for line in lines if "Rank" not in line)
    doc = import_text(cut, nodes=2)
    assert {r["ranks"] for r in doc["rows"]} == {16}
    assert (doc["rows"][-1]["nodes"], doc["rows"][-1]["ranks_per_node"]) == (2, 8)
    assert "16 ranks" in doc["notes"][0]


@pytest.mark.parametrize("name", ["mamf_h100_bf16_gpu0.txt", "all_reduce_a3mega_2nodes.log"])
def test_every_real_fixture_has_a_source(name: str) -> None:
    assert f"`{name}`" in (DATA / "SOURCES.md").read_text()
