"""Helpers for tests that replay a training-run validation file."""

from __future__ import annotations

from collections.abc import Callable

from app.validation.training_runs import Report, Row, RowResult


def one_replayed(
    rows: list[Row], report: Report, match: Callable[[Row, RowResult], bool], label: object
) -> tuple[float, float]:
    """(measured, predicted) of the one replayed row that `match` picks; `label` names it in the failure."""
    hits = [(r.measured, r.predicted) for row, r in zip(rows, report.rows, strict=True) if match(row, r)]
    assert len(hits) == 1, label
    measured, predicted = hits[0]
    assert predicted is not None
    return measured, predicted
