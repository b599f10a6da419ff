"""The plan comparison's changes against the first plan, and the threshold under which results are the same."""

from __future__ import annotations

import pytest

from app.services.plans import SAME_WITHIN_PCT, _changes, _result_differs


def test_changes_are_against_the_first_plan() -> None:
    deltas, percents = _changes([200.0, 201.0, 150, "x"])
    assert deltas == [None, 1.0, -50.0, None]
    assert percents == [None, pytest.approx(0.5), pytest.approx(-25.0), None]
    assert _changes([0, 3]) == ([None, 3.0], [None, None])  # no percentage of a change from zero
    assert _changes([None, 3]) == ([None, None], [None, None])
    assert _changes([True, False]) == ([None, None], [None, None])  # booleans are not numbers


@pytest.mark.parametrize(
    ("values", "differs"),
    [
        ([100.0, 100.006], False),  # the 0.006 % change a planning meeting saw marked "differs"
        ([100.0, 100.5], False),  # at the threshold: the same
        ([100.0, 100.51], True),
        ([100.0, 99.0], True),
        ([100.0, 100.2, 101.0], True),  # any plan beyond it
        ([0.0, 0.001], True),  # from zero: no percentage, so any change differs
        (["H100", "H200"], True),
        ([3.0, 3.0], False),
    ],
)
def test_results_within_the_threshold_are_the_same(values: list[object], differs: bool) -> None:
    assert SAME_WITHIN_PCT == 0.5
    _, percents = _changes(values)
    assert _result_differs(values, percents, SAME_WITHIN_PCT) is differs
