"""Text renderings of result documents: nccl-tests style tables for collectives, mamf-finder style for GEMM."""

from __future__ import annotations

from typing import Any


def collective_header(row: dict[str, Any]) -> str:
    return (
        f"# {row['op']} · group {row.get('group', 'all')} · {row.get('ranks', '?')} ranks"
        f" ({row.get('nodes', 1)} node(s) × {row.get('ranks_per_node', row.get('ranks', '?'))})\n"
        f"# {'size':>12} {'count':>12} {'type':>9} {'time':>10} {'algbw':>8} {'busbw':>8} {'#wrong':>7}\n"
        f"# {'(B)':>12} {'(elements)':>12} {'':>9} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'':>7}"
    )


def collective_line(row: dict[str, Any]) -> str:
    return (
        f"  {row['size_bytes']:>12} {row.get('count', 0):>12} {row.get('dtype', ''):>9} {row['time_us']:>10.2f}"
        f" {row['algbw_gbps']:>8.3f} {row['busbw_gbps']:>8.3f} {row.get('wrong', 0):>7}"
    )


def gemm_header() -> str:
    return (
        f"# {'M':>6} {'N':>6} {'K':>6} {'dtype':>5} {'best':>9} {'median':>9} {'mean':>9} {'#wrong':>6}  label\n"
        f"# {'':>6} {'':>6} {'':>6} {'':>5} {'TFLOP/s':>9} {'TFLOP/s':>9} {'TFLOP/s':>9}"
    )


def gemm_line(row: dict[str, Any]) -> str:
    return (
        f"  {row['m']:>6} {row['n']:>6} {row['k']:>6} {row['dtype']:>5} {row['best_tflops']:>9.3f}"
        f" {row['median_tflops']:>9.3f} {row['mean_tflops']:>9.3f} {row.get('wrong', '-')!s:>6}"
        f"  {row.get('label', '')}"
    )


def attention_header() -> str:
    return (
        f"# {'kernel':>17} {'seq':>7} {'b':>3} {'heads':>5} {'d':>4} {'fwd':>9} {'bwd':>9} {'fwd':>9} {'bwd':>9}\n"
        f"# {'':>17} {'':>7} {'':>3} {'':>5} {'':>4} {'(us)':>9} {'(us)':>9} {'TFLOP/s':>9} {'TFLOP/s':>9}"
    )


def attention_line(row: dict[str, Any]) -> str:
    return (
        f"  {row['attention_kernel']:>17} {row['seq_len']:>7} {row['batch']:>3} {row['heads']:>5}"
        f" {row['head_dim']:>4} {row['forward_us_median']:>9.1f} {row['backward_us_median']:>9.1f}"
        f" {row['forward_tflops']:>9.3f} {row['backward_tflops']:>9.3f}"
    )


def render_document(doc: dict[str, Any]) -> str:
    lines = [
        f"# {doc.get('kind')} · source {doc.get('source')} · status {doc.get('status')}"
        f" · benchmark_version {doc.get('benchmark_version')}",
    ]
    env = doc.get("environment", {})
    if env:
        lines.append(
            f"# hosts {', '.join(env.get('hostnames', []) or ['?'])} · torch {env.get('torch')}"
            f" · cuda {env.get('cuda')} · nccl {env.get('nccl')}"
        )
    last_key: object = None
    for row in doc.get("rows", []):
        if "busbw_gbps" in row:
            key = (row.get("op"), row.get("group"), row.get("ranks"))
            if key != last_key:
                lines.append(collective_header(row))
                last_key = key
            lines.append(collective_line(row))
        elif "best_tflops" in row:
            if last_key != "gemm":
                lines.append(gemm_header())
                last_key = "gemm"
            lines.append(gemm_line(row))
        elif "attention_kernel" in row:
            if last_key != "attention":
                lines.append(attention_header())
                last_key = "attention"
            lines.append(attention_line(row))
    summary = doc.get("summary", {})
    for key, value in (summary.get("avg_busbw_gbps") or {}).items():
        lines.append(f"# Avg bus bandwidth {key}: {value:.3f} GB/s")
    if "wrong" in summary:
        lines.append(
            f"# Out of bounds values : {summary['wrong']} {'OK' if summary['wrong'] == 0 else 'FAILED'}"
        )
    for kernel, best in (summary.get("attention_max_tflops") or {}).items():
        lines.append(
            f"# attention {kernel}: forward {best['forward_tflops']:.3f}, backward {best['backward_tflops']:.3f}"
            f" TFLOP/s @ seq {best['seq_len']}"
        )
    for dtype, best in (summary.get("max_tflops") or {}).items():
        lines.append(
            f"# max {dtype}: {best['tflops']:.3f} TFLOP/s @ {best['m']}x{best['n']}x{best['k']} (MxNxK)"
        )
    return "\n".join(lines)
