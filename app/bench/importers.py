"""Import the field's existing tools into the one result schema.

- nccl-tests text output (github.com/NVIDIA/nccl-tests, `all_reduce_perf -b 8 -e 8G -f 2`): the
  out-of-place columns size/count/type/redop/root/time/algbw/busbw/#wrong (older versions have no root
  column; the header line names the columns, so both parse).
- nccl-tests `-J file.json` (src/util.cu, JSON_FILE_VERSION 2): results[].out_of_place{time, alg_bw, bus_bw, nwrong}.
- mamf-finder (ml-engineering compute/accelerator/benchmarks/mamf-finder.py) log, benchmark versions 2-4:
  per-shape "mean / median / max TFLOPS @ MxNxK" lines (\\r-separated when written to a terminal), v4's
  "#  MxNxK  mean median max best" table, the summary ("max: … TFLOPS @ …", v4's "MAMF …" / "MSMF …"),
  "** Dtype:", "benchmark version:" and "torch=" header lines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from app.benchproto.schema import finish, new_document
from app.core.network import COLLECTIVE_OPS, normalise_op, reported_busbw_factor

NCCL_TEST_OPS = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "all_to_all": "all_to_all",
    "broadcast": "broadcast",
    "sendrecv": "send_recv",
    "send_recv": "send_recv",
    "reduce": "reduce",
}
TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "float": 4,
    "int32": 4,
    "uint32": 4,
    "double": 8,
    "int64": 8,
    "uint64": 8,
    "float8e4m3": 1,
    "float8e5m2": 1,
}
_RANK_RE = re.compile(
    r"#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.*)"
)
_PROGRAM_RE = re.compile(r"(?:Collective test starting:|^#\s*)\s*(\w+?)_perf")


def op_from_name(text: str) -> str | None:
    """'…/all_reduce_perf' or 'all_reduce_perf.log' → 'all_reduce'."""
    match = re.search(
        r"(all_reduce|all_gather|reduce_scatter|alltoall|all_to_all|broadcast|sendrecv|send_recv|reduce)(?:_perf)?",
        text,
    )
    return NCCL_TEST_OPS.get(match.group(1)) if match else None


def detect_format(text: str) -> str:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        data = json.loads(stripped)
        if "results" in data and "config" in data:
            return "nccl-tests-json"
        if "rows" in data and "schema_version" in data:
            return "clusterplan"
        raise ValueError("JSON input is neither nccl-tests -J output nor a ClusterPlan result document")
    if is_mamf_finder(text):
        return "mamf-finder"
    if re.search(r"#\s+size\s+count", text) or "busbw" in text:
        return "nccl-tests"
    raise ValueError(
        "cannot tell the format: expected nccl-tests output, nccl-tests -J JSON or mamf-finder output"
    )


def import_text(
    text: str,
    op: str | None = None,
    name: str = "",
    fmt: str | None = None,
    ranks: int | None = None,
    nodes: int | None = None,
) -> dict[str, Any]:
    """Parse any supported tool output into a result document (raises ValueError with the reason)."""
    fmt = fmt or detect_format(text)
    if fmt == "nccl-tests":
        return import_nccl_tests_text(text, op=op, name=name, ranks_hint=ranks, nodes_hint=nodes)
    if fmt == "nccl-tests-json":
        return import_nccl_tests_json(json.loads(text), op=op, name=name)
    if fmt == "mamf-finder":
        return import_mamf_finder(text)
    if fmt == "clusterplan":
        return json.loads(text)
    raise ValueError(f"unknown format {fmt!r}")


def import_file(
    path: str | Path,
    op: str | None = None,
    fmt: str | None = None,
    ranks: int | None = None,
    nodes: int | None = None,
) -> dict[str, Any]:
    p = Path(path)
    return import_text(p.read_text(errors="replace"), op=op, name=p.name, fmt=fmt, ranks=ranks, nodes=nodes)


def _resolve_op(op: str | None, *hints: str) -> str:
    if op:
        resolved = NCCL_TEST_OPS.get(op) or normalise_op(op)
        if resolved not in COLLECTIVE_OPS and resolved != "reduce":
            raise ValueError(f"unknown collective {op!r}; choose from {', '.join(COLLECTIVE_OPS)}")
        return resolved
    for hint in hints:
        found = op_from_name(hint) if hint else None
        if found:
            return found
    raise ValueError("cannot tell which collective this is; pass --op (e.g. all_reduce)")


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _row(
    op: str,
    size: int,
    count: int,
    dtype: str,
    ranks: int,
    measured: tuple[float, float, float],
    wrong: int | None,
) -> dict[str, Any]:
    """One imported nccl-tests line; `measured` is its (time µs, algbw GB/s, busbw GB/s), `wrong` None when the
    run did not check the results."""
    time_us, algbw, busbw = measured
    return {
        "op": op,
        "group": "all",
        "ranks": ranks,
        "size_bytes": size,
        "count": count,
        "dtype": dtype,
        "in_place": False,
        "time_us": time_us,
        "algbw_gbps": algbw,
        "busbw_gbps": busbw,
        "wrong": int(wrong or 0),
        "checked": wrong is not None,
    }


# Launchers that prefix every output line: Open MPI `mpirun --tag-output` ("[1,0]<stdout>:"), Slurm
# `srun --label` ("0: "); nccl-tests prints its table from rank 0 only, so the prefix is simply dropped.
_OUTPUT_TAG = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+:\s)")


def strip_output_tags(text: str) -> str:
    return "\n".join(_OUTPUT_TAG.sub("", line, count=1) for line in text.splitlines())


def ranks_from_bandwidths(op: str, rows: list[dict[str, Any]]) -> int | None:
    """The rank count that nccl-tests' own busbw / algbw ratio implies (doc/PERFORMANCE.md: 2(n−1)/n for
    all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all), from the row with the largest
    algbw (the most printed digits); None for ops whose factor is 1 or when no row has bandwidth."""
    if op not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        return None
    best = max(rows, key=lambda r: r["algbw_gbps"] or 0.0)
    if not best["algbw_gbps"] or not best["busbw_gbps"]:
        return None
    ratio = best["busbw_gbps"] / best["algbw_gbps"] / (2.0 if op == "all_reduce" else 1.0)
    return max(1, round(1.0 / (1.0 - ratio))) if ratio < 1.0 else None


def import_nccl_tests_text(
    text: str,
    op: str | None = None,
    name: str = "",
    ranks_hint: int | None = None,
    nodes_hint: int | None = None,
) -> dict[str, Any]:
    """nccl-tests text output (also as tagged by mpirun --tag-output or srun --label). Without its device
    list, the rank count comes from `ranks_hint` or the busbw / algbw ratio, and the node count from
    `nodes_hint` (else one node, said in the document's notes)."""
    text = strip_output_tags(text)
    program = ""
    ranks: list[tuple[int, str, int, str]] = []
    columns: list[str] | None = None
    rows: list[dict[str, Any]] = []
    header_cfg: dict[str, Any] = {}
    for raw in text.splitlines():
        line = raw.rstrip()
        m = re.search(r"Collective test starting:\s*(\S+)", line)
        if m:
            program = m.group(1)
        m = _RANK_RE.match(line.strip())
        if m:
            ranks.append((int(m.group(1)), m.group(2), int(m.group(3)), m.group(4).strip()))
            continue
        m = re.match(
            r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+).*?warmup iters:\s*(\d+)\s+iters:\s*(\d+)",
            line,
        )
        if m:
            header_cfg = {
                "nthreads": int(m.group(1)),
                "ngpus": int(m.group(2)),
                "min_bytes": int(m.group(3)),
                "max_bytes": int(m.group(4)),
                "warmup_iters": int(m.group(5)),
                "iters": int(m.group(6)),
            }
        if line.startswith("#") and re.search(r"\bsize\b", line) and re.search(r"\bcount\b", line):
            columns = line.lstrip("#").split()
            continue
        if columns is None or line.startswith("#") or not line.strip():
            continue
        parts = line.split()
        if not parts or not parts[0].isdigit():
            continue
        # Fixed columns before the timings: size count type [redop] [root]
        fixed = columns[: columns.index("time")] if "time" in columns else columns[:5]
        if len(parts) < len(fixed) + 4:
            continue
        values = dict(zip(fixed, parts, strict=False))
        t, algbw, busbw, wrong = parts[len(fixed) : len(fixed) + 4]
        time_us, alg, bus = _float(t), _float(algbw), _float(busbw)
        if time_us is None or alg is None or bus is None:
            continue
        size = int(values["size"])
        rows.append(
            _row(
                "",
                size,
                int(values.get("count", 0)),
                values.get("type", ""),
                0,
                (time_us, alg, bus),
                None if wrong == "N/A" else int(float(wrong)),
            )
        )
    if columns is None or not rows:
        raise ValueError(
            "no nccl-tests result lines found (expected a '# size count type …' header and rows)"
        )
    # The test's binary as its command line names it ("…/build/all_reduce_perf -b 8 …") where the log has no
    # "Collective test starting" line (nccl-tests before 2.13).
    invoked = re.search(r"\b\w+_perf\b", text)
    resolved = _resolve_op(op, program, name, invoked.group(0) if invoked else "")
    notes: list[str] = []
    nranks = len(ranks) or ranks_hint or ranks_from_bandwidths(resolved, rows) or 0
    if not ranks and not nranks:
        raise ValueError(
            "the log has no device list and its bandwidths do not tell the number of ranks; pass --ranks"
        )
    if not ranks:
        notes.append(
            f"no device list: {nranks} ranks ({'given' if ranks_hint else 'from busbw / algbw'}), "
            + (f"{nodes_hint} node(s) given" if nodes_hint else "assumed on one node (pass --nodes)")
        )
    for row in rows:
        row["op"] = resolved
        row["ranks"] = nranks
    hosts = sorted({r[1] for r in ranks})
    env = {
        "hostnames": hosts,
        "devices": [{"rank": r[0], "host": r[1], "index": r[2], "name": r[3]} for r in ranks],
    }
    doc = new_document(
        "collectives",
        {"ops": [resolved], **header_cfg},
        argv=[program or name],
        environment=env,
        source="nccl-tests",
    )
    doc["rows"] = rows
    if notes:
        doc["notes"] = notes
    _fill_placement(doc, len(hosts) or nodes_hint or 1, nranks)
    _fill_missing_busbw(doc)
    return finish(doc, "complete")


def import_nccl_tests_json(data: dict[str, Any], op: str | None = None, name: str = "") -> dict[str, Any]:
    args = [str(a) for a in data.get("args", [])]
    config = data.get("config", {}) or {}
    devices = config.get("devices", []) or []
    resolved = _resolve_op(
        op, args[0] if args else "", name, *(r.get("experiment_name", "") for r in data.get("results", []))
    )
    rows = []
    for result in data.get("results", []):
        oop = result.get("out_of_place") or result.get("in_place")
        if not oop:
            continue
        wrong = oop.get("nwrong")
        rows.append(
            _row(
                resolved,
                int(result["size"]),
                int(result.get("count", 0)),
                str(result.get("type", "")),
                len(devices),
                (
                    float(oop.get("time", oop.get("cpu_time", 0.0))),
                    float(oop["alg_bw"]),
                    float(oop["bus_bw"]),
                ),
                None if wrong is None else int(float(wrong)),
            )
        )
    if not rows:
        raise ValueError("the nccl-tests JSON has no results")
    nccl = data.get("nccl_version")
    env = {
        "hostnames": sorted({str(d.get("hostname", "")) for d in devices}),
        "devices": [
            {
                "rank": d.get("rank"),
                "host": d.get("hostname"),
                "index": d.get("device"),
                "name": d.get("device_info"),
            }
            for d in devices
        ],
        "nccl": f"{nccl // 10000}.{nccl // 100 % 100}.{nccl % 100}"
        if isinstance(nccl, int) and nccl > 10000
        else nccl,
    }
    cfg = {
        "ops": [resolved],
        "min_bytes": config.get("minimum_bytes"),
        "max_bytes": config.get("maximum_bytes"),
        "iters": config.get("iterations"),
        "warmup_iters": config.get("warmup_iters"),
    }
    doc = new_document("collectives", cfg, argv=args, environment=env, source="nccl-tests")
    doc["started_at"] = data.get("start_time")
    doc["rows"] = rows
    _fill_placement(doc, len({str(d.get("hostname", "")) for d in devices} - {""}), len(devices))
    finish(doc, "complete")
    doc["finished_at"] = data.get("end_time") or doc["finished_at"]
    return doc


def _fill_placement(doc: dict[str, Any], nodes: int, ranks: int) -> None:
    """Nodes (from the device list, where every rank names its host) and ranks per node."""
    nodes = max(1, nodes)
    for row in doc["rows"]:
        row["nodes"] = nodes
        row["ranks_per_node"] = ranks // nodes if ranks and ranks % nodes == 0 else ranks


def _fill_missing_busbw(doc: dict[str, Any]) -> None:
    for row in doc["rows"]:
        if not row.get("busbw_gbps") and row.get("algbw_gbps") and row.get("ranks"):
            row["busbw_gbps"] = row["algbw_gbps"] * reported_busbw_factor(row["op"], row["ranks"])


# mamf-finder's per-shape progress rows. v2 and v3 (benchmark_version 2-3):
#   "  2916 |   25.6(mean)   25.6(median)   25.8(max) @ 13312x15360x6144     | best: …" (v3's auto search puts a
#   phase tag such as "wave" after the bar); v4: a column table under "#  MxNxK  mean median max best [W MHz]":
#   "     4  4096x4096x4096      779.5  779.3  784.2  779.5   590  1980".
_MAMF_ROW = re.compile(
    r"(\d+)\s*\|\s*(?:[A-Za-z-]+\s+)?([\d.]+)\(mean\)\s+([\d.]+)\(median\)\s+([\d.]+)\(max\)\s*@\s*(\d+)x(\d+)x(\d+)"
)
_MAMF_V4_ROW = re.compile(r"^\s*\d+\s+(\d+)x(\d+)x(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+(?:\s|$)")
# The run's summary (finish()): v2-v3 "max:    36.9 TFLOPS @ 6144x3072x3072 (MxNxK)", v3-v4
# "MAMF (max achievable,  boost burst): 781 TFLOPS @ 4096x4096x4096 (MxNxK)" and the MSMF line.
_MAMF_SUMMARY = re.compile(
    r"^\s*(mean|median|max|MAMF|MSMF)\b[^:\n]*:\s*([\d.]+)\s*TFLOPS\s*@\s*(\d+)x(\d+)x(\d+)", re.MULTILINE
)
_MAMF_TRIED = re.compile(r"Tried\s+(\d+)\s+shapes")
_MAMF_DTYPES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "float8_e4m3fn": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2": "fp8",
}


def is_mamf_finder(text: str) -> bool:
    return bool(
        ("(mean)" in text and "(median)" in text)
        or re.search(r"#\s+MxNxK\s+mean\s+median\s+max\s+best", text)
        or _MAMF_SUMMARY.search(text)
    )


def _mamf_row(
    shape: tuple[int, int, int], dtype: str, mean: float, median: float, best: float
) -> dict[str, Any]:
    mm, nn, kk = shape
    flops = 2.0 * mm * nn * kk
    return {
        "m": mm,
        "n": nn,
        "k": kk,
        "label": "",
        "dtype": dtype,
        "device": "cuda",
        "flops": flops,
        "iters": 0,
        "time_us_best": flops / (best * 1e12) * 1e6 if best else 0.0,
        "time_us_median": flops / (median * 1e12) * 1e6 if median else 0.0,
        "time_us_mean": flops / (mean * 1e12) * 1e6 if mean else 0.0,
        "best_tflops": best,
        "median_tflops": median,
        "mean_tflops": mean,
    }


def _mamf_rows(text: str, dtype: str) -> dict[tuple[int, int, int], dict[str, Any]]:
    """Per shape its (mean, median, max) row, first occurrence; lines split at \\r too (terminal output)."""
    rows: dict[tuple[int, int, int], dict[str, Any]] = {}
    for chunk in re.split(r"[\r\n]", text):
        m = _MAMF_ROW.search(chunk)
        if m:
            mean, median, best = (float(m.group(i)) for i in (2, 3, 4))
            shape = (int(m.group(5)), int(m.group(6)), int(m.group(7)))
        else:
            v4 = _MAMF_V4_ROW.match(chunk)
            if not v4:
                continue
            shape = (int(v4.group(1)), int(v4.group(2)), int(v4.group(3)))
            mean, median, best = (float(v4.group(i)) for i in (4, 5, 6))
        rows.setdefault(shape, _mamf_row(shape, dtype, mean, median, best))
    return rows


def _apply_mamf_summary(text: str, rows: dict[tuple[int, int, int], dict[str, Any]], dtype: str) -> list[str]:
    """Fold the run's summary into the rows: the best (max, or v4's MAMF) of a shape whose row the log lacks
    becomes a row of its own — a terminal copy keeps only the last progress row, and mamf-finder's headline is
    that best — and v4's MAMF/MSMF headlines are kept on their shape's row. Returns notes."""
    notes: list[str] = []
    for m in _MAMF_SUMMARY.finditer(text):
        kind, value = m.group(1), float(m.group(2))
        shape = (int(m.group(3)), int(m.group(4)), int(m.group(5)))
        if kind in ("max", "MAMF") and shape not in rows:
            row = _mamf_row(shape, dtype, 0.0, 0.0, value)
            row["label"] = "summary best"
            rows[shape] = row
            notes.append(
                f"the log has no row for {shape[0]}x{shape[1]}x{shape[2]}; its summary's best {value:g} TFLOP/s "
                "is kept as a row (best only)"
            )
        if kind in ("MAMF", "MSMF") and shape in rows:
            rows[shape][f"{kind.lower()}_tflops"] = value
    tried = _MAMF_TRIED.search(text)
    if tried and int(tried.group(1)) > len(rows):
        notes.append(
            f"{len(rows)} of the {tried.group(1)} shapes tried have rows in this log (a terminal copy keeps "
            "only the last progress row, an excerpt some)"
        )
    return notes


def import_mamf_finder(text: str) -> dict[str, Any]:
    dtype_match = re.search(r"\*\* Dtype:\s*(?:torch\.)?(\w+)", text)
    dtype = _MAMF_DTYPES.get(dtype_match.group(1), dtype_match.group(1)) if dtype_match else "bf16"
    version = re.search(r"benchmark version:\s*(\S+)", text)
    torch_v = re.search(r"^(?:-\s*)?torch=(\S+)", text, re.MULTILINE)
    by_shape = _mamf_rows(text, dtype)
    notes = _apply_mamf_summary(text, by_shape, dtype)
    if not by_shape:
        raise ValueError(
            "no mamf-finder result lines found (expected '… (mean) … (median) … (max) @ MxNxK' rows, "
            "a v4 'MxNxK mean median max best' table or the run's summary)"
        )
    env: dict[str, Any] = {"torch": torch_v.group(1) if torch_v else None, "hostnames": [], "devices": []}
    device = re.search(r"Properties\(name='([^']+)'", text)
    if device:
        env["devices"] = [{"rank": 0, "index": 0, "name": device.group(1)}]
    doc = new_document(
        "gemm",
        {"dtypes": [dtype], "source_benchmark_version": version.group(1) if version else None},
        argv=["mamf-finder.py"],
        environment=env,
        source="mamf-finder",
    )
    doc["rows"] = list(by_shape.values())
    if notes:
        doc["notes"] = notes
    return finish(doc, "complete")
