"""The one JSON result document every run writes (and every importer produces).

    {schema_version, benchmark_version, kind, source, status, argv, started_at, finished_at,
     environment: {hostnames, torch, cuda, nccl, driver, devices, ...}, config, rows, summary}

Collective rows carry at least size_bytes, time_us, algbw_gbps, busbw_gbps, wrong (nccl-tests columns,
GB/s = 1e9 bytes/s); GEMM rows carry m, n, k, dtype and best/median/mean TFLOP/s (1e12 FLOP/s); attention rows
carry attention_kernel, seq_len, batch, heads, head_dim and forward/backward TFLOP/s (app.bench.attention).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.benchproto import BENCHMARK_VERSION, SCHEMA_VERSION

KINDS = ("gemm", "collectives", "calibration", "check", "attention")
STATUSES = ("running", "complete", "partial", "interrupted", "failed")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_document(
    kind: str,
    config: dict[str, Any],
    argv: list[str] | None = None,
    environment: dict[str, Any] | None = None,
    source: str = "clusterplan",
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark_version": BENCHMARK_VERSION,
        "kind": kind,
        "source": source,
        "status": "running",
        "argv": list(sys.argv if argv is None else argv),
        "started_at": now_iso(),
        "finished_at": None,
        "environment": environment or {},
        "config": config,
        "rows": [],
        "summary": {},
    }


@dataclass(frozen=True)
class RowGroup:
    """The group a collective row ran on: its ranks, its mode ("all", "intra", "inter"), the nodes it spans and
    its ranks per node."""

    ranks: int
    mode: str = "all"
    nodes: int = 1
    ranks_per_node: int = 1


def collective_row(
    op: str,
    message: tuple[int, int, str],
    group: RowGroup,
    time_s: float,
    busbw_factor: float,
    wrong: int,
    spread: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One nccl-tests line for a `message` of (bytes, elements, dtype): algbw = size / time, busbw = algbw × factor
    (nccl-tests doc/PERFORMANCE.md); `spread` the fastest and slowest rank's time (both `time_s` when not given)."""
    size_bytes, count, dtype = message
    time_min_s, time_max_s = spread if spread is not None else (time_s, time_s)
    algbw = size_bytes / time_s / 1e9 if time_s > 0 else 0.0
    return {
        "op": op,
        "group": group.mode,
        "ranks": group.ranks,
        "nodes": group.nodes,
        "ranks_per_node": group.ranks_per_node,
        "size_bytes": int(size_bytes),
        "count": int(count),
        "dtype": dtype,
        "in_place": False,
        "time_us": time_s * 1e6,
        "time_us_min": time_min_s * 1e6,
        "time_us_max": time_max_s * 1e6,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * busbw_factor,
        "wrong": int(wrong),
    }


def gemm_row(
    m: int,
    n: int,
    k: int,
    dtype: str,
    device: str,
    times_s: list[float],
    label: str = "",
    wrong: int | None = None,
) -> dict[str, Any]:
    """Best / median / mean over per-iteration times (mamf-finder reports the same three)."""
    flops = 2.0 * m * n * k
    best, median, mean = min(times_s), statistics.median(times_s), statistics.fmean(times_s)
    return {
        "m": m,
        "n": n,
        "k": k,
        "label": label,
        "dtype": dtype,
        "device": device,
        "flops": flops,
        "iters": len(times_s),
        "time_us_best": best * 1e6,
        "time_us_median": median * 1e6,
        "time_us_mean": mean * 1e6,
        "best_tflops": flops / best / 1e12,
        "median_tflops": flops / median / 1e12,
        "mean_tflops": flops / mean / 1e12,
        **({} if wrong is None else {"wrong": int(wrong)}),
    }


# backward of a fused attention kernel: 5 matmuls against the forward's 2 (Dao 2023, Sec. 3.1)
ATTENTION_BACKWARD_FLOP_RATIO = 2.5


def causal_forward_flops(batch: int, heads: int, seq_len: int, head_dim: int) -> float:
    """Q·Kᵀ and P·V over the causal half of the score matrix: 2 matmuls × 2 FLOP × b·h·s²·d / 2."""
    return 4.0 * batch * heads * seq_len * seq_len * head_dim / 2.0


def attention_row(
    kernel: str, seq_len: int, config: Any, device: str, fwd_s: list[float], bwd_s: list[float]
) -> dict[str, Any]:
    """One kernel and sequence length: median forward/backward times and their TFLOP/s (causal FLOPs). `config`
    is an app.benchproto.config.AttentionConfig."""
    flops = causal_forward_flops(config.batch, config.heads, seq_len, config.head_dim)
    f, b = statistics.median(fwd_s), statistics.median(bwd_s)
    return {
        "attention_kernel": kernel,
        "seq_len": seq_len,
        "batch": config.batch,
        "heads": config.heads,
        "head_dim": config.head_dim,
        "causal": True,
        "dtype": config.dtype,
        "device": device,
        "iters": len(fwd_s),
        "forward_flops": flops,
        "forward_us_median": f * 1e6,
        "backward_us_median": b * 1e6,
        "forward_tflops": flops / f / 1e12 if f > 0 else 0.0,
        "backward_tflops": ATTENTION_BACKWARD_FLOP_RATIO * flops / b / 1e12 if b > 0 else 0.0,
    }


def attention_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The attention rows of a result document (any kind)."""
    return [r for r in doc.get("rows", []) if "attention_kernel" in r and r.get("forward_tflops", 0) > 0]


def summarise(doc: dict[str, Any]) -> dict[str, Any]:
    """Headline numbers: max TFLOP/s per dtype (GEMM); average busbw and #wrong per op and group."""
    rows = doc.get("rows", [])
    summary: dict[str, Any] = {"rows": len(rows)}
    gemm_rows = [r for r in rows if "best_tflops" in r]
    if gemm_rows:
        best: dict[str, Any] = {}
        for row in gemm_rows:
            cur = best.get(row["dtype"])
            if cur is None or row["best_tflops"] > cur["tflops"]:
                best[row["dtype"]] = {
                    "tflops": row["best_tflops"],
                    "m": row["m"],
                    "n": row["n"],
                    "k": row["k"],
                }
        summary["max_tflops"] = best
    attn_rows = [r for r in rows if "attention_kernel" in r]
    if attn_rows:
        attn: dict[str, Any] = {}
        for row in attn_rows:
            cur = attn.get(row["attention_kernel"])
            if cur is None or row["seq_len"] >= cur["seq_len"]:
                attn[row["attention_kernel"]] = {
                    "forward_tflops": row["forward_tflops"],
                    "backward_tflops": row["backward_tflops"],
                    "seq_len": row["seq_len"],
                }
        summary["attention_max_tflops"] = attn
    coll_rows = [r for r in rows if "busbw_gbps" in r]
    if coll_rows:
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in coll_rows:
            groups.setdefault(f"{row.get('op', '?')}/{row.get('group', 'all')}", []).append(row)
        summary["avg_busbw_gbps"] = {
            key: statistics.fmean(r["busbw_gbps"] for r in group) for key, group in groups.items()
        }
    checked = [r for r in rows if "wrong" in r]
    if checked:
        summary["wrong"] = sum(int(r.get("wrong") or 0) for r in checked)
        summary["wrong_rows"] = sum(1 for r in checked if int(r.get("wrong") or 0) > 0)
    return summary


def wrong_result_error(summary: dict[str, Any]) -> str:
    """The reason a run with wrong elements failed ("" when every checked element was right)."""
    wrong = int(summary.get("wrong") or 0)
    if not wrong:
        return ""
    return (
        f"{wrong} wrong element(s) in {summary.get('wrong_rows', '?')} row(s): the hardware or software "
        "computed wrong results, so these measurements are not to be trusted (rows kept for diagnosis)"
    )


def finish(doc: dict[str, Any], status: str = "complete") -> dict[str, Any]:
    """Close the document; a run that completed with any wrong element is "failed" (nccl-tests exits
    non-zero on any out-of-bounds value), with the reason in `error`."""
    doc["finished_at"] = now_iso()
    doc["summary"] = summarise(doc)
    error = wrong_result_error(doc["summary"])
    if error:
        doc["error"] = error
        status = "failed" if status == "complete" else status
    doc["status"] = status
    return doc


def write_document(doc: dict[str, Any], path: str | Path) -> None:
    """Atomic write (temp file + rename): a reader, or a run killed mid-write, never sees half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, target)


def read_document(path: str | Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or "rows" not in data:
        raise ValueError(f"{path} is not a benchmark result document")
    return data
