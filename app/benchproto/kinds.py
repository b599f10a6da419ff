"""Benchmark job kinds and how a job's parameters become a GEMM sweep (shared by the server and the runner)."""

from __future__ import annotations

from typing import Any

from app.benchproto.config import GemmConfig, GemmShape, parse_shape_ranges
from app.benchproto.shapes import square_sweep

JOB_KINDS = ("gemm", "collectives", "calibration", "check")
# "check" (node acceptance) measures what "calibration" does; the server judges it (app.calibration.acceptance)
GEMM_KINDS = ("gemm", "calibration", "check")
COLLECTIVE_KINDS = ("collectives", "calibration", "check")


def gemm_config_from_params(params: dict[str, Any]) -> GemmConfig:
    shapes: list[GemmShape]
    if params.get("model"):
        from app.benchproto.shapes import model_gemm_shapes
        from app.catalog import find_model

        shapes = model_gemm_shapes(
            find_model(str(params["model"])),
            tp=int(params.get("tp", 1)),
            micro_batch=int(params.get("micro_batch", 1)),
            seq_len=int(params.get("seq_len", 4096)),
        )
    elif params.get("shapes"):
        raw = params["shapes"]
        if isinstance(raw, str):
            shapes = [GemmShape(m, n, k) for m, n, k in parse_shape_ranges(raw)]
        else:
            shapes = [GemmShape(int(s["m"]), int(s["n"]), int(s["k"]), str(s.get("label", ""))) for s in raw]
    else:
        shapes = square_sweep(tuple(int(s) for s in params.get("sizes", (256, 512, 1024, 2048))))
    dtypes = params.get("dtypes") or [params.get("dtype", "bf16")]
    return GemmConfig(
        shapes=tuple(shapes),
        dtypes=tuple(dtypes),
        device=params.get("device", "auto"),
        iters=int(params.get("iters", 20)),
        warmup_iters=int(params.get("warmup_iters", 5)),
        flush_cache=bool(params.get("flush_cache", True)),
        warmup_s=None if params.get("warmup_s") is None else float(params["warmup_s"]),
    )
