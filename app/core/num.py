"""Numbers that are either one layout's value or one value per layout (row-polymorphic formulas).

The training-step formulas are written once and evaluated two ways: on Python numbers for one layout (the
estimate, where numpy's per-call overhead on one-element arrays would dominate) and on numpy arrays with one row
per layout (the planner). A formula branches on a value only through `where`, never through `if`, so both ways
compute the same IEEE operations in the same order and agree to the bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from typing_extensions import TypeIs

Num = float | NDArray[np.float64]  # one layout's value, or one value per layout
Flag = bool | NDArray[np.bool_]  # one layout's condition, or one condition per layout
Count = int | NDArray[np.int64]  # one layout's count (of ranks, layers, micro-batches), or one per layout


def is_rows(value: object) -> TypeIs[NDArray[Any]]:  # Any: an array of any dtype
    """True when `value` is a numpy array (the row-wise evaluation)."""
    return isinstance(value, np.ndarray)


# the helpers below test each argument in turn: the one-layout path runs them thousands of times per estimate


@overload
def where(cond: float, if_true: int, if_false: int) -> int: ...
@overload
def where(cond: float, if_true: float, if_false: float) -> float: ...
@overload
def where(cond: Flag | Num, if_true: Num, if_false: Num) -> Num: ...
def where(cond: Flag | Num, if_true: Num, if_false: Num) -> Num:
    """`np.where` on rows; a plain choice on Python numbers (both branches are already evaluated). `cond` is a
    condition or a 0/1 number (a stage's first / last mark)."""
    if isinstance(cond, np.ndarray) or isinstance(if_true, np.ndarray) or isinstance(if_false, np.ndarray):
        return np.where(cond, if_true, if_false)
    return if_true if cond else if_false


@overload
def maximum(a: int, b: int) -> int: ...
@overload
def maximum(a: float, b: float) -> float: ...
@overload
def maximum(a: Num, b: Num) -> Num: ...
def maximum(a: Num, b: Num) -> Num:
    """Element-wise maximum on rows; `max` on Python numbers."""
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else max(a, b)


@overload
def minimum(a: int, b: int) -> int: ...
@overload
def minimum(a: float, b: float) -> float: ...
@overload
def minimum(a: Num, b: Num) -> Num: ...
def minimum(a: Num, b: Num) -> Num:
    """Element-wise minimum on rows; `min` on Python numbers."""
    return np.minimum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else min(a, b)


def any_true(cond: Flag | Num) -> bool:
    """Whether a condition holds for one row at least (a Python bool passes through)."""
    return bool(np.any(cond)) if is_rows(cond) else bool(cond)
