"""`clusterplan bench gemm|attention|collectives|import|slurm-script`: run and import GEMM, attention and
collective benchmarks.

torch is imported only when a measurement runs (gemm), or inside the torchrun workers (collectives).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from app.bench.progress import ProgressSink
from app.bench.report import (
    attention_header,
    attention_line,
    collective_header,
    collective_line,
    gemm_header,
    gemm_line,
    render_document,
)
from app.benchproto.config import (
    CollectiveConfig,
    GemmConfig,
    GemmShape,
    parse_shape_ranges,
    validate_collectives,
)
from app.benchproto.schema import write_document
from app.benchproto.sizes import parse_size
from app.cli.main import UserError
from app.cli.output import to_json

bench = typer.Typer(
    help="Measure GEMM and collective performance; import nccl-tests / mamf-finder output.",
    no_args_is_help=True,
)


def register(root: typer.Typer) -> None:
    root.add_typer(bench, name="bench")


TORCH_MISSING = (
    "torch is not installed: pip install 'clusterplan[bench]' "
    "(CPU build: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


def _require_torch() -> None:
    """Measurements need torch (the optional [bench] extra): say how to install it instead of crashing."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserError(TORCH_MISSING) from None


def _split(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _emit(doc: dict[str, Any], as_json: bool, out: Path | None) -> None:
    if out is not None:
        write_document(doc, out)
    if as_json:
        typer.echo(to_json(doc, indent=1))


@bench.command(
    "gemm", help="Maximum-achievable-matmul sweep (warm-up, cache flush, best/median/mean TFLOP/s)."
)
def gemm(
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    dtype: Annotated[
        list[str],
        typer.Option(
            help="fp32, tf32, bf16, fp16, fp8 (repeat or comma-separate), or all the device supports"
        ),
    ] = ["bf16"],  # noqa: B006
    shapes: Annotated[
        str | None, typer.Option(help='"M N K; …", a size per square shape, or start:stop:step per dimension')
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="catalog model: sweep its exact per-layer GEMM shapes")
    ] = None,
    tp: Annotated[int, typer.Option(min=1, help="tensor-parallel degree for --model shapes")] = 1,
    micro_batch: Annotated[int, typer.Option(min=1, help="micro-batch for --model shapes")] = 1,
    seq_len: Annotated[int, typer.Option(min=1, help="sequence length for --model shapes")] = 4096,
    iters: Annotated[int, typer.Option(min=1)] = 50,
    warmup_iters: Annotated[int, typer.Option(min=0)] = 10,
    flush: Annotated[bool, typer.Option(help="flush the cache before each timed matmul")] = True,
    warmup_seconds: Annotated[
        float | None,
        typer.Option(
            min=0, help="run the first shape this long before the sweep (default: 30 on a GPU, 0 on CPU)"
        ),
    ] = None,
    all_devices: Annotated[bool, typer.Option(help="sweep every local GPU in turn")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON result document")] = False,
    out: Annotated[
        Path | None, typer.Option(help="also write the document here (partial on interrupt)")
    ] = None,
    events: Annotated[bool, typer.Option(help="JSON-lines progress events on stderr")] = False,
) -> None:
    _require_torch()
    if model:
        from app.benchproto.shapes import model_gemm_shapes
        from app.catalog import find_model

        shape_list = model_gemm_shapes(find_model(model), tp=tp, micro_batch=micro_batch, seq_len=seq_len)
    elif shapes:
        shape_list = [GemmShape(m, n, k) for m, n, k in parse_shape_ranges(shapes)]
    else:
        from app.benchproto.shapes import square_sweep

        shape_list = square_sweep(
            (256, 512, 1024, 2048) if device == "cpu" else (1024, 2048, 4096, 8192, 16384)
        )
    config = GemmConfig(
        shapes=tuple(shape_list),
        dtypes=tuple(_split(dtype)),
        device=device,
        iters=iters,
        warmup_iters=warmup_iters,
        flush_cache=flush,
        warmup_s=warmup_seconds,
    )

    from app.bench.gemm import run_gemm
    from app.bench.progress import on_interrupt
    from app.benchproto.schema import finish

    sink = _TableSink(events, gemm_header, gemm_line, quiet=as_json)
    partial: dict[str, Any] = {"rows": []}

    def _interrupted(_signum: int) -> None:
        doc = sink.doc or {"rows": partial["rows"]}
        finish(doc, "interrupted")
        _emit(doc, as_json, out)

    on_interrupt(_interrupted)
    doc = run_gemm(
        config, sink, str(out) if out else None, argv=["clusterplan", *sys.argv[1:]], all_devices=all_devices
    )
    sink.doc = doc
    if as_json:
        typer.echo(to_json(doc, indent=1))
    else:
        for dt, best in doc["summary"].get("max_tflops", {}).items():
            typer.echo(
                f"# max {dt}: {best['tflops']:.3f} TFLOP/s @ {best['m']}x{best['n']}x{best['k']} (MxNxK)"
            )
        typer.echo(f"# benchmark_version {doc['benchmark_version']}")
    _fail_on_wrong_results(doc)


# nccl-tests exits EXIT_FAILURE (1) when any element is wrong (src/common.cu); bad input keeps exit 2.
EXIT_WRONG_RESULTS = 1
EXIT_CHECK_FAILED = 1  # a failed acceptance check, likewise (bad input keeps exit 2)


def _fail_on_wrong_results(doc: dict[str, Any]) -> None:
    """A run with any wrong element fails: its reason on stderr, exit 1 (the document is already written)."""
    if doc.get("status") == "failed" and doc.get("error"):
        typer.echo(f"error: {doc['error']}", err=True)
        raise typer.Exit(EXIT_WRONG_RESULTS)


@bench.command(
    "attention",
    help="Fused-attention sweep: forward and backward TFLOP/s of causal SDPA per kernel and sequence length.",
)
def attention(
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    kernel: Annotated[
        list[str],
        typer.Option(
            help="flash-attention-2, cudnn, math or auto (PyTorch's choice); repeat or comma-separate"
        ),
    ] = ["auto"],  # noqa: B006
    seq: Annotated[str, typer.Option(help="sequence lengths, comma-separated, e.g. 1024,4096,16384")] = "",
    batch: Annotated[int, typer.Option(min=1)] = 1,
    heads: Annotated[int, typer.Option(min=1)] = 16,
    head_dim: Annotated[int, typer.Option(min=1)] = 128,
    dtype: Annotated[str, typer.Option(help="bf16 | fp16 | fp32")] = "bf16",
    iters: Annotated[int, typer.Option(min=1)] = 10,
    warmup_iters: Annotated[int, typer.Option(min=0)] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON result document")] = False,
    out: Annotated[
        Path | None, typer.Option(help="also write the document here (partial on interrupt)")
    ] = None,
    events: Annotated[bool, typer.Option(help="JSON-lines progress events on stderr")] = False,
) -> None:
    _require_torch()
    from app.bench.attention import AttentionConfig, run_attention

    try:
        seq_lens = tuple(int(s) for s in seq.split(",") if s.strip()) if seq else ()
    except ValueError:
        raise UserError(f"--seq: give whole numbers separated by commas, got {seq!r}") from None
    if not seq_lens:
        seq_lens = (256, 512, 1024) if device == "cpu" else (1024, 4096, 16384, 32768)
    config = AttentionConfig(
        seq_lens=seq_lens,
        kernels=tuple(_split(kernel)),
        batch=batch,
        heads=heads,
        head_dim=head_dim,
        dtype=dtype,
        device=device,
        iters=iters,
        warmup_iters=warmup_iters,
    )
    sink = _TableSink(events, attention_header, attention_line, quiet=as_json)
    doc = run_attention(config, sink, str(out) if out else None, argv=["clusterplan", *sys.argv[1:]])
    if as_json:
        typer.echo(to_json(doc, indent=1))
    else:
        for name, best in doc["summary"].get("attention_max_tflops", {}).items():
            typer.echo(
                f"# {name}: forward {best['forward_tflops']:.3f}, backward {best['backward_tflops']:.3f} TFLOP/s"
                f" @ seq {best['seq_len']}"
            )
        typer.echo(f"# benchmark_version {doc['benchmark_version']}")


class _TableSink(ProgressSink):
    """Prints table lines as rows arrive (unless --json), JSON-lines events to stderr with --events."""

    def __init__(self, events: bool, header: Any, line: Any, quiet: bool) -> None:
        super().__init__(sys.stderr if events else None)
        self.header, self.line, self.quiet = header, line, quiet
        self.printed_header: Any = None
        self.doc: dict[str, Any] | None = None

    def row(self, row: dict[str, Any], steps: int = 1) -> None:
        super().row(row, steps)
        if self.quiet or "skipped_size_bytes" in row:
            return
        key = (row.get("op"), row.get("group"), row.get("ranks")) if "op" in row else "table"
        if key != self.printed_header:
            typer.echo(self.header(row) if "op" in row else self.header())
            self.printed_header = key
        typer.echo(self.line(row))


@bench.command("collectives", help="nccl-tests style sweep under torchrun (NCCL on CUDA, gloo on CPU).")
def collectives(
    op: Annotated[
        list[str],
        typer.Option(help="all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv, or all"),
    ] = ["all_reduce"],  # noqa: B006
    nproc: Annotated[int, typer.Option(help="ranks per node (torchrun --nproc-per-node)")] = 2,
    minbytes: Annotated[str, typer.Option("--minbytes", "-b", help="smallest size, e.g. 1K")] = "1K",
    maxbytes: Annotated[str, typer.Option("--maxbytes", "-e", help="largest size, e.g. 16M")] = "16M",
    stepfactor: Annotated[float, typer.Option("--stepfactor", "-f")] = 2.0,
    stepbytes: Annotated[
        str, typer.Option("--stepbytes", "-i", help="fixed increment instead of a factor")
    ] = "0",
    iters: Annotated[int, typer.Option("--iters", "-n")] = 20,
    warmup_iters: Annotated[int, typer.Option("--warmup-iters", "-w")] = 5,
    dtype: Annotated[str, typer.Option(help="float32, float16, bfloat16, float64, int32")] = "float32",
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    backend: Annotated[str, typer.Option(help="auto | gloo | nccl")] = "auto",
    groups: Annotated[
        str, typer.Option(help="all | intra | inter | each (intra, inter and all separately)")
    ] = "all",
    ranks_per_node: Annotated[
        int, typer.Option(help="override ranks per node (0 = torchrun's local world size)")
    ] = 0,
    check: Annotated[bool, typer.Option(help="verify results (#wrong)")] = True,
    average: Annotated[str, typer.Option(help="reduce per-rank times: avg | min | max | rank0")] = "avg",
    nnodes: Annotated[int, typer.Option(help="nodes (multi-node: run this on every node)")] = 1,
    rdzv_endpoint: Annotated[str, typer.Option(help="host:port of node 0's c10d store (multi-node)")] = "",
    rdzv_id: Annotated[str, typer.Option(help="rendezvous id shared by all nodes")] = "clusterplan",
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON result document")] = False,
    out: Annotated[
        Path | None, typer.Option(help="also write the document here (partial on interrupt)")
    ] = None,
    events: Annotated[bool, typer.Option(help="JSON-lines progress events on stderr")] = False,
) -> None:
    _require_torch()
    from app.bench.environment import cuda_device_count
    from app.bench.launch import Rendezvous, run_torchrun

    config = CollectiveConfig(
        ops=tuple(_split(op)),
        min_bytes=parse_size(minbytes),
        max_bytes=parse_size(maxbytes),
        step_factor=stepfactor,
        step_bytes=parse_size(stepbytes),
        iters=iters,
        warmup_iters=warmup_iters,
        dtype=dtype,
        backend=backend,
        device=device,
        groups=groups,
        ranks_per_node=ranks_per_node,
        check=check,
        average=average,
    )
    validate_collectives(config, nproc, cuda_device_count() if (device != "cpu" and backend != "gloo") else 0)
    if nnodes > 1 and not rdzv_endpoint:
        raise UserError("multi-node runs need --rdzv-endpoint HOST:PORT (node 0's address)")
    sink = _TableSink(events, collective_header, collective_line, quiet=as_json)

    def on_event(event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "row":
            sink.row(event.get("row", {}))
        elif kind == "log":
            typer.echo(f"# {event.get('message')}", err=True)

    stderr_tail: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = str(out) if out else os.path.join(tmp, "collectives.json")
        code, doc = run_torchrun(
            config,
            nproc,
            path,
            on_event=on_event,
            rendezvous=Rendezvous(nnodes=nnodes, endpoint=rdzv_endpoint, run_id=rdzv_id),
            user_argv=["clusterplan", *sys.argv[1:]],
            on_output=lambda line: stderr_tail.append(line) if len(stderr_tail) < 400 else None,
        )
    if doc is None and code == 0 and nnodes > 1:
        # only global rank 0 (on node 0) writes the document; this node's ranks finished cleanly
        typer.echo("# this node's ranks finished; node 0 (global rank 0) prints and writes the results")
        return
    if doc is None:
        detail = "\n".join(line for line in stderr_tail if line.strip())[-3000:]
        raise UserError(f"the benchmark did not produce results (torchrun exit {code}):\n{detail}")
    if as_json:
        typer.echo(to_json(doc, indent=1))
    else:
        summary = doc.get("summary", {})
        for key, value in (summary.get("avg_busbw_gbps") or {}).items():
            typer.echo(f"# Avg bus bandwidth {key}: {value:.3f} GB/s")
        if "wrong" in summary:
            typer.echo(
                f"# Out of bounds values : {summary['wrong']} {'OK' if summary['wrong'] == 0 else 'FAILED'}"
            )
        typer.echo(f"# status {doc.get('status')} · benchmark_version {doc.get('benchmark_version')}")
    _fail_on_wrong_results(doc)
    if code != 0:
        raise typer.Exit(130 if doc.get("status") == "interrupted" else code)


@bench.command(
    "import", help="Read nccl-tests output (text or -J JSON) or mamf-finder output into the result schema."
)
def import_(
    path: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="the tool's output file")],
    op: Annotated[
        str | None, typer.Option(help="collective, when the file does not say (e.g. all_reduce)")
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="nccl-tests | nccl-tests-json | mamf-finder (default: detect)"),
    ] = None,
    ranks: Annotated[
        int | None, typer.Option(min=1, help="ranks, for an nccl-tests log without its device list")
    ] = None,
    nodes: Annotated[
        int | None, typer.Option(min=1, help="nodes, for an nccl-tests log without its device list")
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(help="catalog GPU the node has: warn when the result fails its acceptance check"),
    ] = None,
    fabric: Annotated[str, typer.Option(help="fabric between nodes, with --gpu")] = "ib-ndr-8x400",
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON result document")] = False,
    out: Annotated[Path | None, typer.Option(help="write the document here")] = None,
) -> None:
    from app.bench.importers import import_file

    doc = import_file(path, op=op, fmt=fmt, ranks=ranks, nodes=nodes)
    for note in doc.get("notes", []):
        typer.echo(f"note: {note}", err=True)
    if gpu:
        _warn_on_acceptance(doc, gpu, fabric)
    if out is not None:
        write_document(doc, out)
    typer.echo(to_json(doc, indent=1) if as_json else render_document(doc))


@bench.command(
    "check",
    help="Node acceptance: a result's GEMM rate, busbw and latency against what the catalog and the model "
    "expect for a GPU and fabric (pass / warn / fail; exit 1 on fail).",
)
def check(
    path: Annotated[
        Path,
        typer.Argument(exists=True, dir_okay=False, help="result document, nccl-tests or mamf-finder output"),
    ],
    gpu: Annotated[str, typer.Option(help="catalog GPU the node has")] = "H100-SXM",
    fabric: Annotated[str, typer.Option(help="fabric between nodes, e.g. ib-ndr-8x400")] = "ib-ndr-8x400",
    op: Annotated[str | None, typer.Option(help="collective, for nccl-tests files that do not say")] = None,
    ranks: Annotated[
        int | None, typer.Option(min=1, help="ranks, for an nccl-tests log without devices")
    ] = None,
    nodes: Annotated[
        int | None, typer.Option(min=1, help="nodes, for an nccl-tests log without devices")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    from app.bench.importers import import_file
    from app.calibration.acceptance import FAIL, acceptance_report
    from app.catalog import find_gpu
    from app.catalog.fabrics import find_fabric

    doc = import_file(path, op=op, ranks=ranks, nodes=nodes)
    report = acceptance_report(doc, find_gpu(gpu), find_fabric(fabric))
    report["notes"] = [*doc.get("notes", []), *report["notes"]]
    typer.echo(to_json(report, indent=1) if as_json else render_acceptance(report))
    if report["verdict"] == FAIL:
        raise typer.Exit(EXIT_CHECK_FAILED)


def _warn_on_acceptance(doc: dict[str, Any], gpu: str, fabric: str) -> None:
    """One stderr line per check that is not a pass (the import itself goes on)."""
    from app.calibration.acceptance import PASS, acceptance_report
    from app.catalog import find_gpu
    from app.catalog.fabrics import find_fabric

    report = acceptance_report(doc, find_gpu(gpu), find_fabric(fabric))
    for c in report["checks"]:
        if c["verdict"] != PASS:
            typer.echo(
                f"warning: acceptance {c['verdict']} against {report['gpu']}: {c['name']} measured "
                f"{c['measured']:.4g} {c['unit']}, expected {c['expected']:.4g} ({c['ratio']:.1%}; {c['pass_range']})",
                err=True,
            )


def render_acceptance(report: dict[str, Any]) -> str:
    lines = [f"# acceptance against {report['gpu']} / {report['fabric']}: {report['verdict'].upper()}"]
    lines.append(f"# {'check':<36} {'measured':>11} {'expected':>11} {'ratio':>7}  verdict  pass range")
    for c in report["checks"]:
        lines.append(
            f"  {c['name']:<36} {c['measured']:>11.4g} {c['expected']:>11.4g} {c['ratio']:>7.1%}"
            f"  {c['verdict']:<7}  {c['pass_range']} ({c['unit']}; fail below {c['fail_below']})"
        )
    lines += [f"# note: {n}" for n in report["notes"]]
    sources = sorted({c["source"] for c in report["checks"]})
    lines += [f"# source: {s}" for s in sources]
    return "\n".join(lines)


@bench.command(
    "slurm-script",
    help="Print an sbatch script that runs the collective sweep on N nodes with srun + torchrun.",
)
def slurm_script_cmd(
    nodes: Annotated[int, typer.Option(min=1)] = 2,
    gpus_per_node: Annotated[int, typer.Option(min=1)] = 8,
    op: Annotated[list[str], typer.Option()] = ["all_reduce"],  # noqa: B006
    minbytes: Annotated[str, typer.Option("--minbytes", "-b")] = "8",
    maxbytes: Annotated[str, typer.Option("--maxbytes", "-e")] = "8G",
    stepfactor: Annotated[float, typer.Option("--stepfactor", "-f")] = 2.0,
    iters: Annotated[int, typer.Option("--iters", "-n")] = 20,
    warmup_iters: Annotated[int, typer.Option("--warmup-iters", "-w")] = 5,
    groups: Annotated[str, typer.Option(help="all | intra | inter | each")] = "each",
    partition: Annotated[str, typer.Option()] = "",
    account: Annotated[str, typer.Option()] = "",
    time_limit: Annotated[str, typer.Option("--time")] = "00:30:00",
    cpus_per_task: Annotated[
        int, typer.Option(min=0, help="CPUs for each node's task, which runs all its ranks (0: 2 per GPU)")
    ] = 0,
    activate: Annotated[
        str | None,
        typer.Option(help="environment activation script to source on the nodes (default: this virtualenv)"),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="write the script here instead of printing it")] = None,
) -> None:
    from app.bench.launch import SlurmJob, slurm_script

    config = CollectiveConfig(
        ops=tuple(_split(op)),
        min_bytes=parse_size(minbytes),
        max_bytes=parse_size(maxbytes),
        step_factor=stepfactor,
        iters=iters,
        warmup_iters=warmup_iters,
        groups=groups,
        backend="nccl",
        device="cuda",
    )
    validate_collectives(config, gpus_per_node, gpus_per_node)
    job = SlurmJob(
        nodes,
        gpus_per_node,
        partition=partition,
        account=account,
        time_limit=time_limit,
        cpus_per_task=cpus_per_task,
        activate=activate,
    )
    script = slurm_script(config, job)
    if out is not None:
        out.write_text(script)
        typer.echo(f"wrote {out}")
    else:
        typer.echo(script)
