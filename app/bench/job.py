"""Run one benchmark job (what the node agent launches): gemm, collectives, calibration (both) or check (both,
judged by the server as a node acceptance check); a GEMM, calibration or check job with `"attention"` in its params also times the fused attention kernels (app.bench.attention).

    python -m app.bench.job --kind calibration --params '{...}' --out result.json

Progress goes to stdout as JSON lines; the result document is rewritten to --out as rows arrive, so a
cancelled or killed run still leaves its partial results. Collectives run under torchrun. A run with any
wrong element (GEMM or collective) ends with status "failed", an "error" event with the reason, and exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.bench.progress import ProgressSink, on_interrupt
from app.benchproto.config import CollectiveConfig
from app.benchproto.kinds import COLLECTIVE_KINDS, GEMM_KINDS, JOB_KINDS, gemm_config_from_params
from app.benchproto.schema import finish, new_document, write_document

DEFAULT_CALIBRATION_OPS = ("all_reduce", "all_gather", "reduce_scatter")


def collective_config_from_params(params: dict[str, Any]) -> CollectiveConfig:
    data = dict(params)
    data.setdefault("ops", list(DEFAULT_CALIBRATION_OPS))
    data.setdefault("iters", params.get("coll_iters", 10))
    data.setdefault("warmup_iters", params.get("coll_warmup_iters", 2))
    data.setdefault("min_bytes", "1K")
    data.setdefault("max_bytes", "1M")
    data.setdefault("step_factor", 4)
    return CollectiveConfig.from_dict(data)


def _job_parts(kind: str, params: dict[str, Any]) -> tuple[list[str], Any, Any, Any]:
    """The parts a job of `kind` runs and their configs (None for a part it does not run): GEMM, an attention sweep
    riding along with a GEMM or calibration job when params ask for it ("attention": true, or the sweep's own
    parameters: app.benchproto.config.AttentionConfig), collectives."""
    parts = []
    if kind in GEMM_KINDS:
        parts.append("gemm")
    if kind in COLLECTIVE_KINDS and int(params.get("nproc", 2)) >= 1:
        parts.append("collectives")
    attention = params.get("attention")
    attn_cfg = None
    if attention and kind in GEMM_KINDS:
        from app.benchproto.config import AttentionConfig

        parts.append("attention")
        attn_cfg = AttentionConfig.from_params(attention if isinstance(attention, dict) else {})
    gemm_cfg = gemm_config_from_params(params.get("gemm", params)) if "gemm" in parts else None
    coll_cfg = (
        collective_config_from_params(params.get("collectives", params)) if "collectives" in parts else None
    )
    return parts, gemm_cfg, attn_cfg, coll_cfg


def _stop(doc: dict[str, Any], out_path: str, sink: ProgressSink) -> None:
    """Keep what was measured: the document as it stands, marked interrupted."""
    finish(doc, "interrupted")
    write_document(doc, out_path)
    sink.finish("interrupted", rows=len(doc["rows"]))


def _run_collectives_part(
    doc: dict[str, Any],
    coll_cfg: Any,
    nproc: int,
    part_sink: _ForwardingSink,
    sink: ProgressSink,
    out_path: str,
) -> None:
    """The collective sweep under torchrun, its part and environment merged into the job document; a sweep stopped
    by SIGINT/SIGTERM exits 130 with what was measured, one that failed otherwise raises (wrong results are a
    finished sweep whose rows say so)."""
    from app.bench.environment import cuda_device_count
    from app.bench.launch import run_torchrun
    from app.benchproto.config import validate_collectives

    validate_collectives(coll_cfg, nproc, cuda_device_count())
    with tempfile.TemporaryDirectory() as tmp:
        code, coll_doc = run_torchrun(
            coll_cfg,
            nproc,
            str(Path(tmp) / "collectives.json"),
            on_event=part_sink.forward,
            user_argv=sys.argv,
            on_output=lambda line: sink.log(line[-500:]) if "Error" in line or "error" in line else None,
        )
    if code == 130:  # stopped by SIGINT/SIGTERM: keep what was measured
        _stop(doc, out_path, sink)
        raise SystemExit(130)
    wrong_results = code == 1 and coll_doc is not None and coll_doc.get("status") == "failed"
    if coll_doc is None or (code != 0 and not wrong_results):
        if coll_doc is not None:
            doc.setdefault("parts", {})["collectives"] = {
                "config": coll_doc["config"],
                "status": coll_doc["status"],
            }
        raise RuntimeError(f"collective sweep exited with status {code}")
    doc.setdefault("parts", {})["collectives"] = {
        "config": coll_doc["config"],
        "summary": coll_doc["summary"],
        "environment": coll_doc["environment"],
    }
    if not doc["environment"]:
        doc["environment"] = coll_doc["environment"]
    else:
        doc["environment"]["hostnames"] = coll_doc["environment"].get(
            "hostnames", doc["environment"].get("hostnames")
        )


def run_job(kind: str, params: dict[str, Any], out_path: str, sink: ProgressSink) -> dict[str, Any]:
    """The combined document: kind, rows of every part (GEMM rows and collective rows), parts' environments."""
    if kind not in JOB_KINDS:
        raise ValueError(f"unknown job kind {kind!r}")
    doc = new_document(kind, params, argv=sys.argv)
    on_interrupt(lambda _signum: _stop(doc, out_path, sink))
    parts, gemm_cfg, attn_cfg, coll_cfg = _job_parts(kind, params)
    sink.start(len(parts), kind=kind, parts=parts)
    part_sink = _ForwardingSink(sink, doc, out_path)
    if gemm_cfg is not None:
        from app.bench.gemm import run_gemm

        gemm_doc = run_gemm(gemm_cfg, part_sink, None, argv=sys.argv)
        doc["environment"] = gemm_doc["environment"]
        doc.setdefault("parts", {})["gemm"] = {"config": gemm_doc["config"], "summary": gemm_doc["summary"]}
    if attn_cfg is not None:
        from app.bench.attention import run_attention

        attn_doc = run_attention(attn_cfg, part_sink, None, argv=sys.argv)
        doc["environment"] = doc["environment"] or attn_doc["environment"]
        doc.setdefault("parts", {})["attention"] = {
            "config": attn_doc["config"],
            "summary": attn_doc["summary"],
        }
    if coll_cfg is not None:
        _run_collectives_part(doc, coll_cfg, int(params.get("nproc", 2)), part_sink, sink, out_path)
    finish(doc, "complete")  # "failed", with the reason in doc["error"], when any element was wrong
    write_document(doc, out_path)
    sink.finish(doc["status"], summary=doc["summary"], error=doc.get("error", ""))
    return doc


class _ForwardingSink(ProgressSink):
    """Collects rows of a part into the job document and forwards them (with job-wide progress)."""

    def __init__(self, parent: ProgressSink, doc: dict[str, Any], out_path: str) -> None:
        super().__init__(None)
        self.parent, self.doc, self.out_path = parent, doc, out_path
        self.part_index = -1

    def start(self, total: int, **payload: Any) -> None:
        super().start(total, **payload)
        self.part_index += 1
        self.parent.log(f"part {payload.get('kind', '?')}: {total} measurements")

    def row(self, row: dict[str, Any], steps: int = 1) -> None:
        super().row(row, steps)
        self._record(row)

    def forward(self, event: dict[str, Any]) -> None:
        if event.get("event") == "start":
            self.start(int(event.get("total", 0)), kind="collectives")
        elif event.get("event") == "row":
            self.done = int(event.get("done", self.done + 1))
            self._record(event.get("row", {}))
        elif event.get("event") == "log":
            self.parent.log(str(event.get("message", "")))

    def _record(self, row: dict[str, Any]) -> None:
        if "skipped_size_bytes" not in row:
            self.doc["rows"].append(row)
            write_document(self.doc, self.out_path)
        # Job-wide progress: finished parts plus the finished fraction of the current part.
        parts = max(1, self.parent.total)
        fraction = self.done / self.total if self.total else 1.0
        overall = min(1.0, (self.part_index + fraction) / parts)
        elapsed = time.monotonic() - self.parent.started
        eta = elapsed / overall - elapsed if overall > 0 else None
        self.parent.emit(
            "row",
            row=row,
            done=self.done,
            total=self.total,
            part=self.part_index,
            progress=round(overall, 4),
            eta_s=None if eta is None else round(eta, 2),
        )

    def finish(self, status: str, **payload: Any) -> None:
        pass

    def log(self, message: str) -> None:
        self.parent.log(message)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one benchmark job")
    parser.add_argument("--kind", required=True, choices=JOB_KINDS)
    parser.add_argument("--params", default="{}")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    sink = ProgressSink(sys.stdout)
    try:
        doc = run_job(args.kind, json.loads(args.params), args.out, sink)
    except Exception as exc:  # the agent reports any failure of the run to the server
        sink.emit("error", message=f"{type(exc).__name__}: {exc}")
        return 1
    if doc["status"] == "failed":  # wrong results: the job fails with the reason, its rows kept
        sink.emit("error", message=str(doc.get("error", "")))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
