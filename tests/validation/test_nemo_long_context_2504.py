"""NeMo 25.04's long-sequence table (tests/data/training_runs_nemo_long_context_2504.csv): how the replay reads it
and what docs/validation.md says about it (*Long context on 2025 software*)."""

from __future__ import annotations

import re

import pytest

from app.validation.training_runs import Report, Row, estimate_row, load_rows, replay
from tests.paths import DATA_DIR, ROOT

FILE = DATA_DIR / "training_runs_nemo_long_context_2504.csv"
DOC = ROOT / "docs" / "validation.md"


@pytest.fixture(scope="module")
def replayed() -> tuple[list[Row], Report]:
    rows = load_rows(FILE)
    return rows, replay(rows)


def test_the_layouts_multiply_out_to_the_gpu_counts() -> None:
    """The table's first revision: GPUs = TP x CP x DP, 4M tokens per batch at every length."""
    for row in load_rows(FILE):
        tp, cp, dp, pp = (row.int_or(c, 0) for c in ("tp", "cp", "dp", "pp"))
        assert tp * cp * dp * pp == row.int_or("num_gpus", 0)
        assert row.int_or("seq_len", 0) * row.int_or("global_batch", 0) == 4 * 1024 * 1024


def test_the_rows_replay_on_b200_under_nemo_with_full_attention_flops() -> None:
    """NeMo 25.04's flops_formulas.llama3 counts attention as 12·s/h per layer: the full s² matrix, the estimator's
    own model-FLOPs convention, so no source convention is named for it."""
    for row in load_rows(FILE):
        modelled = estimate_row(row, row.get("measured_metric"))
        assert modelled.cluster.gpu.name == "B200"
        assert modelled.framework.name.startswith("nemo")
        assert modelled.estimate.model.num_kv_heads == 8


def test_every_run_is_estimated_too_slow_and_more_so_at_longer_sequences(
    replayed: tuple[list[Row], Report],
) -> None:
    rows, report = replayed
    errors = [r.error_pct for r in report.rows]
    assert all(e is not None and e < 0 for e in errors)
    by_length = [e for _, e in sorted(zip((row.int_or("seq_len", 0) for row in rows), errors, strict=True))]
    assert by_length[-1] < by_length[2] < by_length[0]


def test_the_docs_quote_the_replay(replayed: tuple[list[Row], Report]) -> None:
    _rows, report = replayed
    errors = sorted(r.error_pct for r in report.rows if r.error_pct is not None)
    text = DOC.read_text(encoding="utf-8")
    match = re.search(
        r"−([\d.]+) % at 8K, −(\d+) to −(\d+) % at\s+16K–64K, −(\d+) to −(\d+) % at 128K–1M", text
    )
    assert match, "docs/validation.md lost the per-length errors of the NeMo 25.04 file"
    assert float(match.group(1)) == pytest.approx(round(-errors[-1], 1))
    assert int(match.group(5)) == round(-errors[0])
