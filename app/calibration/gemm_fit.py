"""Fit the GEMM throughput curve achievable(I) = F · I / (I + h) (app/core/efficiency.py) to measured rows.

For a given h the F minimising the relative squared error Σ((F·g_i − y_i)/y_i)², g_i = I_i/(I_i + h), is
F = Σ(g_i/y_i) / Σ(g_i²/y_i²); h is searched on a logarithmic grid (0 and 10⁻²…10⁵). Relative residuals
make small and large shapes count alike.
Measured throughput is each shape's best TFLOP/s (`measured_tflops`): mamf-finder's headline figure, and the
kind of figure the catalog's measured matmul rates are, so a fitted curve and the default curve it replaces
describe the same thing (the estimator derates either by the same sustained-load fraction,
app.core.efficiency.training_curves). Rows without a best fall back to their median.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core.efficiency import GemmEfficiency


@dataclass(frozen=True)
class GemmFit:
    efficiency: GemmEfficiency
    points: int
    error_pct: float  # mean error factor over the fitted rows: exp(mean |ln(predicted / measured)|) − 1, in %


def measured_tflops(row: dict[str, Any]) -> float:
    """The figure a fit and its report use: best TFLOP/s, else the median."""
    return float(row.get("best_tflops") or 0.0) or float(row.get("median_tflops") or 0.0)


def gemm_rows(doc: dict[str, Any], dtype: str | None = None) -> list[dict[str, Any]]:
    rows = [r for r in doc.get("rows", []) if "median_tflops" in r and measured_tflops(r) > 0]
    return [r for r in rows if dtype is None or r.get("dtype") == dtype]


def intensity(m: float, n: float, k: float) -> float:
    return 1.0 / (1.0 / m + 1.0 / n + 1.0 / k)


def fit_gemm(rows: list[dict[str, Any]], dtype: str, source: str = "") -> GemmFit:
    if not rows:
        raise ValueError(f"no GEMM rows for dtype {dtype}")
    i = np.array([intensity(r["m"], r["n"], r["k"]) for r in rows])
    y = np.array([measured_tflops(r) * 1e12 for r in rows])
    # For a fixed h the best F (least relative squared error) is closed-form; search h on a log grid.
    best: tuple[float, float, float] | None = None
    for half in np.concatenate([[0.0], np.logspace(-2, 5, 281)]):
        g = i / (i + half)
        max_flops = float(np.sum(g / y) / np.sum(g * g / (y * y)))
        err = float(np.sum(np.square((max_flops * g - y) / y)))
        if best is None or err < best[0]:
            best = (err, max_flops, float(half))
    assert best is not None
    _, max_flops, half = best
    eff = GemmEfficiency(
        max_flops=max_flops, half_intensity=half, dtype=dtype, source=source or "calibration fit"
    )
    pred = np.array([float(eff.flops_per_s(r["m"], r["n"], r["k"])) for r in rows])
    error = float((np.exp(np.mean(np.abs(np.log(pred / y)))) - 1.0) * 100)
    return GemmFit(eff, len(rows), error)


def fit_all_dtypes(doc: dict[str, Any], source: str = "") -> dict[str, GemmFit]:
    dtypes = sorted({r["dtype"] for r in gemm_rows(doc)})
    return {d: fit_gemm(gemm_rows(doc, d), d, source) for d in dtypes}
