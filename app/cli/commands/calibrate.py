"""`clusterplan calibrate fit|list|show`: calibrated hardware profiles from benchmark results.

`fit` reads a result document (from `clusterplan bench … --out`, or `bench import` of nccl-tests /
mamf-finder output, or any of those files directly) or, with `--job ID`, a benchmark job that succeeded with
rows from one attempt on one node (anything else is refused, exit 2), fits the GEMM curve and the network α/β parameters,
stores a new version of the named profile and prints the predicted-vs-measured report (before and after
calibration); `--plot FILE.png` draws the same comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.errors import UserError
from app.cli.output import to_json

calibrate = typer.Typer(help="Fit and inspect calibrated hardware profiles.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(calibrate, name="calibrate")


def _session() -> Any:
    from sqlmodel import Session

    from app.db import get_engine
    from app.startup import prepare_database

    prepare_database()
    return Session(get_engine())


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f} %"


def render_report(name: str, version: int, report: dict[str, Any]) -> str:
    lines = [f"# profile {name} v{version} · GPU {report.get('gpu')} · fabric {report.get('fabric')}"]
    lines += [f"# note: {n}" for n in report.get("notes", [])]
    gemm = report.get("gemm")
    if gemm:
        lines.append(
            f"# GEMM: mean error factor {gemm['error_before_pct'] or 0:.1f} % before → {gemm['error_after_pct']:.1f} % after"
        )
        lines.append(
            f"  {'M×N×K':>20} {'dtype':>5} {'measured':>10} {'before':>10} {'after':>10} {'err before':>11} {'err after':>10}"
        )
        for r in gemm["rows"]:
            before = "—" if r["before_tflops"] is None else f"{r['before_tflops']:.3f}"
            lines.append(
                f"  {r['m']}×{r['n']}×{r['k']:<8} {r['dtype']:>5} {r['measured_tflops']:>10.3f} {before:>10}"
                f" {r['after_tflops']:>10.3f} {_pct(r['before_err_pct']):>11} {_pct(r['after_err_pct']):>10}"
            )
    coll = report.get("collectives")
    if coll:
        lines.append(
            f"# collectives: mean error factor {coll['error_before_pct']:.1f} % before → {coll['error_after_pct']:.1f} % after"
            f" (α/β per regime {coll['error_alpha_beta_pct']:.1f} %)"
        )
        lines.append(
            f"  {'op·group·ranks':>24} {'size':>10} {'meas µs':>10} {'before µs':>10} {'after µs':>10} {'err before':>11} {'err after':>10}"
        )
        for r in coll["rows"]:
            lines.append(
                f"  {r['op'] + '·' + str(r['group']) + '·' + str(r['ranks']):>24} {r['size_bytes']:>10} {r['measured_time_us']:>10.2f}"
                f" {r['before_time_us']:>10.2f} {r['after_time_us']:>10.2f} {_pct(r['before_err_pct']):>11} {_pct(r['after_err_pct']):>10}"
            )
    attention = report.get("attention")
    if attention:
        lines.append(
            "# fused attention (causal; TFLOP/s; published = the micro-benchmark the estimator uses otherwise)"
        )
        lines.append(
            f"  {'kernel':>17} {'seq':>7} {'meas fwd':>9} {'meas bwd':>9} {'publ fwd':>9} {'publ bwd':>9}"
        )
        for r in attention["rows"]:
            pub_f = "—" if r["published_forward_tflops"] is None else f"{r['published_forward_tflops']:.1f}"
            pub_b = "—" if r["published_backward_tflops"] is None else f"{r['published_backward_tflops']:.1f}"
            lines.append(
                f"  {r['kernel']:>17} {r['seq_len']:>7} {r['measured_forward_tflops']:>9.3f}"
                f" {r['measured_backward_tflops']:>9.3f} {pub_f:>9} {pub_b:>9}"
            )
        for kernel, m in attention["kernels"].items():
            lines.append(
                f"# calibrated {kernel}: {m['forward_share_of_peak']:.3f} / {m['backward_share_of_peak']:.3f} of dense"
                f" peak (forward / backward) at {m['seq_len']} tokens"
            )
    return "\n".join(lines)


def plot_report(report: dict[str, Any], path: Path) -> None:
    """Measured vs predicted before/after: busbw against size, GEMM TFLOP/s against shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [k for k in ("collectives", "gemm") if report.get(k)]
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.5), squeeze=False)
    for ax, kind in zip(axes[0], panels, strict=True):
        rows = report[kind]["rows"]
        if kind == "collectives":
            keys = sorted({(r["op"], r["group"], r["ranks"]) for r in rows})
            for key in keys:
                sel = [r for r in rows if (r["op"], r["group"], r["ranks"]) == key]
                x = [r["size_bytes"] for r in sel]
                label = f"{key[0]} {key[1]} ×{key[2]}"
                ax.plot(x, [r["measured_busbw_gbps"] for r in sel], "o", label=f"{label} measured")
                ax.plot(x, [r["before_busbw_gbps"] for r in sel], ":", label=f"{label} before")
                ax.plot(x, [r["after_busbw_gbps"] for r in sel], "-", label=f"{label} after")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("bus bandwidth (GB/s)")
        else:
            labels = [f"{r['m']}×{r['n']}×{r['k']}" for r in rows]
            xs = range(len(rows))
            ax.bar(xs, [r["measured_tflops"] for r in rows], label="measured (best)")
            ax.plot(xs, [r["before_tflops"] or float("nan") for r in rows], "s", label="before")
            ax.plot(xs, [r["after_tflops"] for r in rows], "-o", label="after")
            ax.set_xticks(list(xs), labels, rotation=60, ha="right", fontsize=7)
            ax.set_yscale("log")
            ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{kind}: predicted vs measured")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=1 + len(rows) // 40)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


@calibrate.command(
    "fit", help="Fit a new version of a named profile from a result file and print its report."
)
def fit(
    result: Annotated[
        Path | None, typer.Argument(exists=True, dir_okay=False, help="result document or tool output")
    ] = None,
    *,
    job: Annotated[
        str | None, typer.Option("--job", help="fit a finished benchmark job's result instead of a file")
    ] = None,
    name: Annotated[str, typer.Option(help="profile name (a new version is added each time)")],
    gpu: Annotated[
        str | None, typer.Option(help="catalog GPU measured (for the 'before' prediction)")
    ] = None,
    fabric: Annotated[str | None, typer.Option(help="fabric preset between nodes, e.g. ib-ndr-8x400")] = None,
    op: Annotated[str | None, typer.Option(help="collective, for nccl-tests files that do not say")] = None,
    plot: Annotated[Path | None, typer.Option(help="also draw the report to this PNG")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the profile as JSON")] = False,
    override_acceptance: Annotated[
        bool, typer.Option(help="fit even if the measurements fail the node acceptance check for --gpu")
    ] = False,
    force: Annotated[
        bool, typer.Option(help="save the fit even if it does not improve the model on held-back points")
    ] = False,
) -> None:
    with _session() as session:
        profile = _fit(session, result, job, name, gpu, fabric, op, override_acceptance, force)
        data: dict[str, Any] = {
            "id": str(profile.id),
            "name": profile.name,
            "version": profile.version,
            "gpu": profile.gpu_name,
            "params": profile.params,
            "report": profile.report,
        }
    if plot is not None:
        plot_report(data["report"], plot)
    typer.echo(
        to_json(data, indent=1) if as_json else render_report(data["name"], data["version"], data["report"])
    )


def _fit(
    session: Any,
    result: Path | None,
    job: str | None,
    name: str,
    gpu: str | None,
    fabric: str | None,
    op: str | None,
    override_acceptance: bool = False,
    force: bool = False,
) -> Any:
    """A new profile version from RESULT or from --job (one of the two): the job must have succeeded, with
    rows from one attempt on one node (app.services.calibration.check_fittable)."""
    from app.bench.importers import import_file
    from app.services import calibration as calibration_service
    from app.services.jobs import get_job

    if (result is None) == (job is None):
        raise UserError("give either a RESULT file or --job JOB_ID")
    if job is not None:
        return calibration_service.fit_profile_from_job(
            session, get_job(session, job), name, gpu, fabric, override_acceptance, force
        )
    assert result is not None
    doc = import_file(result, op=op)
    return calibration_service.fit_profile(
        session, doc, name, gpu, fabric, override_acceptance=override_acceptance, force=force
    )


@calibrate.command("list", help="List calibrated profiles (every version).")
def list_() -> None:
    from app.services.calibration import list_profiles

    with _session() as session:
        profiles, _ = list_profiles(session, 0, 1000)
        if not profiles:
            typer.echo("no calibrated profiles yet (clusterplan calibrate fit RESULT --name NAME)")
        for p in profiles:
            g = (p.report.get("gemm") or {}).get("error_after_pct")
            c = (p.report.get("collectives") or {}).get("error_after_pct")
            typer.echo(
                f"{p.name:<24} v{p.version:<3} {p.gpu_name:<16} gemm err {g if g is None else round(g, 1)} %"
                f" · collectives err {c if c is None else round(c, 1)} %"
            )


@calibrate.command(
    "show", help="Print a profile's predicted-vs-measured report (latest version unless --version)."
)
def show(
    name: Annotated[str, typer.Argument(help="profile name or id")],
    version: Annotated[int | None, typer.Option(min=1)] = None,
    plot: Annotated[Path | None, typer.Option(help="also draw the report to this PNG")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    from app.services.calibration import get_profile

    with _session() as session:
        p = get_profile(session, name, version)
        data: dict[str, Any] = {
            "id": str(p.id),
            "name": p.name,
            "version": p.version,
            "gpu": p.gpu_name,
            "params": p.params,
            "report": p.report,
        }
    if plot is not None:
        plot_report(data["report"], plot)
    typer.echo(
        to_json(data, indent=1) if as_json else render_report(data["name"], data["version"], data["report"])
    )
