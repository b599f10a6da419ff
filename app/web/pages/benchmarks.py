"""Benchmarks pages: nodes (online/offline, add with a one-time token, revoke; admins only, as
/api/v1/nodes), launch a job, follow it live (progress bar, ETA, log tail, partial results, busbw and GEMM
charts against the model, its attempts), cancel or retry it (its creator or an admin only), and the
calibrated profiles with their predicted-vs-measured reports.

Every page renders in full on a direct load; htmx requests get only the named block. Forms work without
JavaScript (POST, then 303). torch is never imported here.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth.deps import (
    AdminDep,
    Principal,
    ReadDep,
    RunDep,
    principal_user_id,
)
from app.benchproto.schema import attention_rows
from app.calibration.profile import DEFAULT_GPU, fit_attention
from app.catalog import find_gpu
from app.core.errors import Problem, SpecError
from app.deps import SessionDep
from app.errors import NotFoundError
from app.models.benchmarks import BenchmarkJob, CalibrationProfile, JobAttempt
from app.services import calibration as calibration_service
from app.services import jobs as job_service
from app.services import nodes as node_service
from app.web.pages import _panels
from app.web.templating import is_htmx, render, templates

router = APIRouter()
INDEX_BLOCKS = ("nodes", "launch", "jobs", "profiles")
# a profile's UUID or name (calibration_profile.name: max_length=200, as the API's /calibration/profiles/{ref})
ProfileRef = Annotated[str, Path(max_length=200)]
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")


def _csrf(request: Request) -> str:
    principal = getattr(request.state, "principal", None)
    return str(getattr(principal, "csrf_token", "") or "")


def _invalid(request: Request) -> int:
    """422 for a plain form post; 200 for htmx, which swaps only successful responses into the page."""
    return 200 if is_htmx(request) else 422


def _catalog_names() -> list[str]:
    from app.catalog import gpus

    return sorted(gpus())


def _fabric_choices(form: dict[str, str]) -> list[tuple[str, str]]:
    """The launch form's fabric select: each preset's name as the value and its label as the text, as the builder
    and the cost page show them; a posted name the catalog lacks stays selectable beside its error."""
    options = _panels.fabric_options()
    asked = form.get("fabric", "")
    if asked and asked not in {name for name, _ in options}:
        options.insert(0, (asked, asked))
    return options


def _cpu_only(node: Any) -> bool:
    """The node's agent reported devices and every one is a CPU (a node without a GPU)."""
    devices = (node.info or {}).get("devices") or []
    return bool(devices) and all(str(d.get("name", "")).startswith("cpu") for d in devices)


def _node_rows(session: Any) -> list[dict[str, Any]]:
    """Every node with its state, reported GPU and whether it is CPU-only (the admin's nodes block)."""
    return [
        {
            "node": n,
            "online": node_service.is_online(n),
            "gpu": node_service.node_gpu(n),
            "cpu_only": _cpu_only(n),
        }
        for n in node_service.list_nodes(session)
    ]


def _launch_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the launch form's node choice shows of each node a job may target: its name and reported GPU."""
    return [
        {"name": r["node"].name, "gpu": r["gpu"], "cpu_only": r["cpu_only"]}
        for r in rows
        if not r["node"].revoked_at
    ]


def _index_context(request: Request, session: Any, principal: Principal, **extra: Any) -> dict[str, Any]:
    """The benchmarks page. Nodes (hosts, devices, heartbeats, token prefixes) are shown to admins only, as
    the API's /api/v1/nodes; other callers who may launch jobs see just the names and GPUs they may target."""
    rows = _node_rows(session) if principal.has("benchmarks:run") else []
    jobs, job_count = job_service.list_jobs(session, None, 0, 50)
    profiles, _ = calibration_service.list_profiles(session, 0, 100)
    gpu_names = _catalog_names()
    is_admin = principal.has("admin")
    return {
        "title": "Benchmarks",
        "show_nodes": is_admin,
        "nodes": rows if is_admin else [],
        "targets": _launch_targets(rows),
        "jobs": jobs,
        "job_count": job_count,
        "any_running": any(j.status in ("queued", "running") for j in jobs),
        "profiles": profiles,
        "gpu_names": gpu_names,
        "fabrics": _fabric_choices(extra.get("form") or {}),
        "ops": OPS,
        "csrf_token": _csrf(request),
        "form": {},
        "errors": {},
        **extra,
    }


@router.get("/benchmarks", response_class=HTMLResponse)
def benchmarks_index(request: Request, session: SessionDep, principal: ReadDep) -> HTMLResponse:
    block = request.query_params.get("block") or "jobs"
    if block not in INDEX_BLOCKS:
        block = "jobs"
    return render(request, "benchmarks.html", _index_context(request, session, principal), block=block)


@router.post("/benchmarks/nodes", response_class=HTMLResponse)
def add_node(
    request: Request,
    session: SessionDep,
    admin: AdminDep,
    # 10x the node.name column: a name between the two gets the service's own message
    name: Annotated[str, Form(max_length=2000)] = "",
) -> HTMLResponse:
    try:
        node, token = node_service.create_node(session, name)
    except SpecError as exc:
        error = str(exc.problems[0].message)
        ctx = _index_context(request, session, admin, node_error=error, node_name=name)
        return render(request, "benchmarks.html", ctx, block="nodes", status_code=_invalid(request))
    ctx = _index_context(request, session, admin, new_token=token, new_node=node.name)
    return render(request, "benchmarks.html", ctx, block="nodes", status_code=201)


@router.post("/benchmarks/nodes/{node_id}/revoke")
def revoke_node(node_id: uuid.UUID, request: Request, session: SessionDep, admin: AdminDep) -> Response:
    node_service.revoke_node(session, node_id)
    if is_htmx(request):
        return render(request, "benchmarks.html", _index_context(request, session, admin), block="nodes")
    return RedirectResponse("/benchmarks", status_code=303)


def _launch_params(form: dict[str, str], ops: list[str]) -> tuple[str, dict[str, Any], str | None]:
    kind = form.get("kind") or "calibration"
    nproc = int(form.get("nproc") or 8)
    device = form.get("device") or "auto"
    sizes = [
        int(s) for s in (form.get("gemm_sizes") or "1024,2048,4096,8192").replace(" ", "").split(",") if s
    ]
    params: dict[str, Any] = {
        "nproc": nproc,
        "gpu": form.get("gpu") or None,
        "fabric": form.get("fabric") or None,
        "gemm": {
            "sizes": sizes,
            "dtypes": [form.get("dtype") or "bf16"],
            "device": device,
            "iters": int(form.get("gemm_iters") or 20),
            "warmup_iters": 5,
        },
        "collectives": {
            "ops": ops or ["all_reduce"],
            "min_bytes": form.get("min_bytes") or "1K",
            "max_bytes": form.get("max_bytes") or "256M",
            "step_factor": float(form.get("step_factor") or 2),
            "iters": int(form.get("iters") or 20),
            "warmup_iters": int(form.get("warmup_iters") or 5),
            "groups": form.get("groups") or "all",
            "device": device,
        },
    }
    if kind == "calibration" and form.get("profile_name"):
        params["profile_name"] = form["profile_name"]
        if form.get("override_acceptance"):
            params["override_acceptance"] = True
    kernels = [k for k in form.get("attention_kernels", "").split(",") if k]
    attention = None
    if kernels and kind in ("gemm", "calibration", "check"):
        try:
            seq_lens = [
                int(s) for s in (form.get("attention_seq_lens") or "").replace(" ", "").split(",") if s
            ]
        except ValueError:
            raise SpecError(
                [Problem("seq_lens", "sequence lengths: whole numbers separated by commas")]
            ) from None
        attention = {"kernels": kernels, "seq_lens": seq_lens, "device": device}
    if kind == "gemm":
        params = {**params["gemm"], "gpu": params["gpu"]}
    if attention is not None:
        params["attention"] = attention
    elif kind == "collectives":
        params = {**params["collectives"], "nproc": nproc, "gpu": params["gpu"], "fabric": params["fabric"]}
    return kind, params, form.get("target_node") or None


@router.post("/benchmarks/launch")
async def launch(request: Request, session: SessionDep, principal: RunDep) -> Response:
    raw = await request.form()
    form = {k: str(v) for k, v in raw.items() if k not in ("ops", "attention_kernels")}
    form["attention_kernels"] = ",".join(str(v) for v in raw.getlist("attention_kernels"))
    ops = [str(v) for v in raw.getlist("ops")]
    errors: dict[str, str] = {}
    refused = False
    try:
        kind, params, target = _launch_params(form, ops)
        node = node_service.get_node(session, target) if target else None
        job = job_service.create_job(
            session, kind, params, node, principal_user_id(principal), principal.has("admin")
        )
    except SpecError as exc:
        errors = {p.field.split(".")[-1]: p.message for p in exc.problems}
    except (ValueError, NotFoundError) as exc:
        errors = {"form": str(exc)}
    except calibration_service.ProfileForbiddenError as exc:
        errors, refused = {"profile_name": str(exc)}, True
    if errors:
        ctx = _index_context(request, session, principal, form=form, errors=errors)
        code = 403 if refused and not is_htmx(request) else _invalid(request)
        return render(request, "benchmarks.html", ctx, block="launch", status_code=code)
    url = f"/benchmarks/jobs/{job.id}"
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def _acceptance(job: BenchmarkJob) -> dict[str, Any] | None:
    """The node acceptance report of the job's rows (None before any row, or for an unknown GPU/fabric)."""
    if not (job.result or {}).get("rows") and not job.partial_rows:
        return None
    try:
        return calibration_service.job_acceptance(job)
    except (NotFoundError, SpecError, ValueError):
        return None


def _charts(job: BenchmarkJob) -> dict[str, Any]:
    doc = job.result or {"rows": job.partial_rows}
    rows = doc.get("rows") or job.partial_rows
    params = job.params or {}
    try:
        pred = calibration_service.default_predictions(
            {**doc, "rows": rows}, params.get("gpu"), params.get("fabric")
        )
    except (NotFoundError, SpecError, ValueError):
        pred = {"collectives": [], "gemm": [], "gpu": "", "fabric": ""}
    series: dict[str, dict[str, list[Any]]] = {}
    for r in pred["collectives"]:
        s = series.setdefault(
            f"{r['op']} · {r.get('group', 'all')} · {r.get('ranks')} ranks",
            {"x": [], "measured": [], "predicted": []},
        )
        s["x"].append(r["size_bytes"])
        s["measured"].append(r["busbw_gbps"])
        s["predicted"].append(r["predicted_busbw_gbps"])
    traces: list[dict[str, Any]] = []
    for name, s in series.items():
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{name} measured",
                "x": s["x"],
                "y": s["measured"],
            }
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "line": {"dash": "dot"},
                "name": f"{name} model ({pred['gpu']})",
                "x": s["x"],
                "y": s["predicted"],
            }
        )
    busbw_fig = {
        "data": traces,
        "layout": {
            "xaxis": {"type": "log", "title": {"text": "message size (bytes)"}},
            "yaxis": {"type": "log", "title": {"text": "bus bandwidth (GB/s)"}},
            "height": 360,
        },
    }
    labels = [f"{r['m']}×{r['n']}×{r['k']} {r['dtype']}" for r in pred["gemm"]]
    gemm_fig = {
        "data": [
            {"type": "bar", "name": "best", "x": labels, "y": [r["best_tflops"] for r in pred["gemm"]]},
            {"type": "bar", "name": "median", "x": labels, "y": [r["median_tflops"] for r in pred["gemm"]]},
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"model ({pred['gpu']})",
                "x": labels,
                "y": [r["predicted_tflops"] for r in pred["gemm"]],
            },
        ],
        "layout": {"barmode": "group", "yaxis": {"type": "log", "title": {"text": "TFLOP/s"}}, "height": 360},
    }
    attention: list[dict[str, Any]] = []
    measured_attention = attention_rows({"rows": rows})
    if measured_attention:
        try:
            gpu = find_gpu(params.get("gpu") or DEFAULT_GPU)
        except NotFoundError:
            gpu = find_gpu(DEFAULT_GPU)
        attention = fit_attention(measured_attention, gpu)[1]
    return {"pred": pred, "busbw_fig": busbw_fig, "gemm_fig": gemm_fig, "attention_rows": attention}


@router.get("/benchmarks/jobs/{job_id}", response_class=HTMLResponse)
def job_page(job_id: uuid.UUID, request: Request, session: SessionDep, principal: ReadDep) -> HTMLResponse:
    job_service.requeue_expired(session)
    try:
        job = job_service.get_job(session, job_id)
    except NotFoundError:
        return render(
            request, "benchmarks_job.html", {"title": "Job not found", "job": None}, status_code=404
        )
    node = None
    if job.claimed_by:
        try:
            node = node_service.get_node(session, job.claimed_by)
        except NotFoundError:
            node = None
    attempts = job_service.attempts_of(session, job.id)
    text = job_service.text_for(session, job, principal.has("admin"), attempts)  # host names are for admins
    ctx = {
        "title": f"Benchmark {job.kind}",
        "job": job,
        "log_tail": text(job.log_tail),
        "job_error": text(job.error),
        "node": node,
        "show_host": principal.has("admin"),  # the node's name is for every reader, its host for admins
        # the result's environment as this reader may see it (host names for admins only)
        "environment": (job_service.result_for(job.result, principal.has("admin")) or {}).get("environment"),
        "final": job.status in job_service.TERMINAL,
        "may_manage": principal.has("benchmarks:run")
        and job_service.may_manage(job, principal_user_id(principal), principal.has("admin")),
        "retryable": job.status in job_service.RETRYABLE,
        "attempts": _attempt_rows(session, job, attempts, text),
        "csrf_token": _csrf(request),
        "acceptance": _acceptance(job),
        **_charts(job),
    }
    return render(request, "benchmarks_job.html", ctx, block="live")


def _attempt_rows(
    session: Any, job: BenchmarkJob, attempts: list[JobAttempt], text: Callable[[Any], Any]
) -> list[dict[str, Any]]:
    names = {n.id: n.name for n in node_service.list_nodes(session)}
    rows = []
    for record in attempts:
        current = record.attempt == job.attempt and record.finished_at is None
        rows.append(
            {
                "attempt": record.attempt,
                "status": record.status,
                "node": names.get(record.node_id, "—") if record.node_id else "—",
                "rows": len(job.partial_rows if current else record.partial_rows),
                "error": text(record.error),
                "started_at": record.started_at,
                "finished_at": record.finished_at,
            }
        )
    return rows


def _manage(action: Any, job_id: uuid.UUID, request: Request, session: Any, principal: Principal) -> Response:
    """Cancel or retry as `principal`; someone else's job is a 403, a finished/unfit state just re-renders."""
    try:
        with contextlib.suppress(job_service.ConflictError):  # the page shows the job's actual state
            action(session, job_id, principal_user_id(principal), principal.has("admin"))
    except job_service.ForbiddenError as exc:
        return Response(str(exc), status_code=403, media_type="text/plain")
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Trigger": "refresh"})
    return RedirectResponse(f"/benchmarks/jobs/{job_id}", status_code=303)


@router.post("/benchmarks/jobs/{job_id}/cancel")
def cancel(job_id: uuid.UUID, request: Request, session: SessionDep, principal: RunDep) -> Response:
    return _manage(job_service.cancel_job, job_id, request, session, principal)


@router.post("/benchmarks/jobs/{job_id}/retry")
def retry(job_id: uuid.UUID, request: Request, session: SessionDep, principal: RunDep) -> Response:
    return _manage(job_service.retry_job, job_id, request, session, principal)


def _profile_figs(profile: CalibrationProfile) -> dict[str, Any]:
    report = profile.report or {}
    coll = (report.get("collectives") or {}).get("rows", [])
    traces: list[dict[str, Any]] = []
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in coll:
        groups.setdefault(f"{r['op']} · {r['group']} · {r['ranks']}", []).append(r)
    for name, rows in groups.items():
        x = [r["size_bytes"] for r in rows]
        traces += [
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{name} measured",
                "x": x,
                "y": [r["measured_busbw_gbps"] for r in rows],
            },
            {
                "type": "scatter",
                "mode": "lines",
                "line": {"dash": "dot"},
                "name": f"{name} before",
                "x": x,
                "y": [r["before_busbw_gbps"] for r in rows],
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{name} after",
                "x": x,
                "y": [r["after_busbw_gbps"] for r in rows],
            },
        ]
    busbw_fig = {
        "data": traces,
        "layout": {
            "xaxis": {"type": "log", "title": {"text": "message size (bytes)"}},
            "yaxis": {"type": "log", "title": {"text": "bus bandwidth (GB/s)"}},
            "height": 380,
        },
    }
    gemm = (report.get("gemm") or {}).get("rows", [])
    labels = [f"{r['m']}×{r['n']}×{r['k']} {r['dtype']}" for r in gemm]
    gemm_fig = {
        "data": [
            {
                "type": "bar",
                "name": "measured (best)",
                "x": labels,
                "y": [r["measured_tflops"] for r in gemm],
            },
            {
                "type": "scatter",
                "mode": "markers",
                "name": "before",
                "x": labels,
                "y": [r["before_tflops"] for r in gemm],
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "after",
                "x": labels,
                "y": [r["after_tflops"] for r in gemm],
            },
        ],
        "layout": {"yaxis": {"type": "log", "title": {"text": "TFLOP/s"}}, "height": 380},
    }
    return {"busbw_fig": busbw_fig, "gemm_fig": gemm_fig, "coll_rows": coll, "gemm_rows": gemm}


@router.get("/benchmarks/nodes/{node_id}", response_class=HTMLResponse)
def node_page(node_id: uuid.UUID, request: Request, session: SessionDep, _admin: AdminDep) -> HTMLResponse:
    """One node: its state and the history of its acceptance checks, newest first (admins only, as the API's
    /api/v1/nodes/{ref}: a node's host, devices and checks are not for every reader)."""
    try:
        node = node_service.get_node(session, node_id)
    except NotFoundError:
        return render(
            request, "benchmarks_node.html", {"title": "Node not found", "node": None}, status_code=404
        )
    from app.services.nodes import node_check

    checks = [node_check(job) for job in job_service.check_history(session, node.id)]
    ctx = {
        "title": f"Node {node.name}",
        "node": node,
        "online": node_service.is_online(node),
        "checks": checks,
    }
    return render(request, "benchmarks_node.html", ctx)


@router.get("/benchmarks/profiles/{ref}", response_class=HTMLResponse)
def profile_page(ref: ProfileRef, request: Request, session: SessionDep, _p: ReadDep) -> HTMLResponse:
    try:
        profile = calibration_service.get_profile(session, ref)
    except NotFoundError as exc:
        return render(
            request,
            "benchmarks_profile.html",
            {"title": "Profile not found", "profile": None, "error": str(exc)},
            status_code=404,
        )
    return render(
        request,
        "benchmarks_profile.html",
        {"title": f"Profile {profile.name} v{profile.version}", "profile": profile, **_profile_figs(profile)},
    )


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 10_000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def _size(value: Any) -> str:
    from app.benchproto.sizes import format_size

    return format_size(int(value)) if isinstance(value, int | float) else "—"


def _when(value: Any) -> str:
    from app.models.base import as_utc

    return as_utc(value).strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"  # type: ignore[union-attr]


templates.env.filters["bench_num"] = _num
templates.env.filters["bench_size"] = _size
templates.env.filters["bench_when"] = _when
