"""Calibrated hardware profiles: fit from a finished job (or an imported document), list, get, load.

Profiles are named and versioned: fitting again under the same name adds version n+1, never overwrites.
A job is fitted only when it succeeded and its rows come from one attempt on one node (`check_fittable`):
rows of a failed run are partial, and rows of two machines would fit a profile of neither. Measurements that
fail the node acceptance check against the declared GPU and fabric (app.calibration.acceptance) are fitted
only on an explicit override, and every profile's report keeps its acceptance report.
`get_hardware_profile(session, name)` returns the core's HardwareProfile for the estimator and planner.

Ownership: a profile name belongs to the owner of its first version (`owner_id`, copied onto every later
version). A new name is owned by whoever fits it; a non-admin may add a version only to a name they own (a
name whose versions have no owner, fitted before profiles had owners or by the CLI, is versioned only by
admins), and may fit only from a job they created. Refusals are `ProfileForbiddenError` (HTTP 403). The CLI
is the operator on the local database and fits as `OPERATOR`, an administrator without an account.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from app.calibration.acceptance import acceptance_report, failed_checks
from app.calibration.held_back import improves
from app.calibration.profile import DEFAULT_GPU, build_profile, hardware_profile
from app.core.efficiency import HardwareProfile
from app.core.errors import Problem, SpecError
from app.errors import NotFoundError
from app.models.benchmarks import BenchmarkJob, CalibrationProfile, JobAttempt


def _gpu(name: str | None) -> Any:
    from app.catalog import find_gpu

    return find_gpu(name or DEFAULT_GPU)


def _fabric(name: str | None, gpu: Any) -> Any:
    """The named preset, or the GPU's reference fabric (app.catalog.fabrics.reference_fabric)."""
    from dataclasses import replace

    from app.catalog.fabrics import find_fabric, reference_fabric

    if not name:
        return reference_fabric(gpu.name)
    spec = find_fabric(name)
    return spec if spec.name else replace(spec, name=name)


@dataclass(frozen=True)
class Fitter:
    """Who fits a profile: their user id (None: no account) and whether they are an administrator."""

    user_id: uuid.UUID | None = None
    is_admin: bool = False


OPERATOR = Fitter(user_id=None, is_admin=True)  # the CLI on the local database: an admin without an account


@dataclass(frozen=True)
class FitRequest:
    """What to fit: the profile name, the declared GPU and fabric, the gates to pass and the source job."""

    name: str
    gpu: str | None = None
    fabric: str | None = None
    override_acceptance: bool = False
    force: bool = False
    source_job_id: uuid.UUID | None = None


class ProfileForbiddenError(PermissionError):
    """The caller may not add a version to this profile name, or fit from this job; HTTP 403."""


def first_version(session: Session, name: str) -> CalibrationProfile | None:
    """The oldest version of profile `name` (its owner owns the name), or None for a new name."""
    query = select(CalibrationProfile).where(CalibrationProfile.name == name)
    return session.exec(query.order_by(col(CalibrationProfile.version))).first()


def check_may_version(session: Session, name: str, fitter: Fitter) -> uuid.UUID | None:
    """Refuse (ProfileForbiddenError) a fit under a name `fitter` may not add a version to; return the owner
    the new version gets (the name's owner, or the fitter for a new name)."""
    first = first_version(session, name.strip())
    owner = fitter.user_id if first is None else first.owner_id
    if fitter.is_admin:
        return owner
    if fitter.user_id is None:
        raise ProfileForbiddenError(
            "this credential does not belong to a user account, so it cannot own profiles"
        )
    if first is None or owner == fitter.user_id:
        return owner
    if owner is None:
        raise ProfileForbiddenError(
            f"calibration profile {first.name!r} has no owner (fitted before profiles had owners, or by the "
            "CLI): only an admin may add a version to it; choose another name"
        )
    raise ProfileForbiddenError(
        f"calibration profile {first.name!r} belongs to another user: only its owner or an admin may add a "
        "version to it; choose another name"
    )


def check_may_fit_job(job: BenchmarkJob, fitter: Fitter) -> None:
    """Refuse (ProfileForbiddenError) a fit from a job that `fitter` neither created nor administers."""
    if fitter.is_admin or (fitter.user_id is not None and job.created_by == fitter.user_id):
        return
    raise ProfileForbiddenError(
        f"job {job.id} belongs to another user: only its creator or an admin may fit a profile from it"
    )


def next_version(session: Session, name: str) -> int:
    current = session.exec(
        select(func.max(CalibrationProfile.version)).where(CalibrationProfile.name == name)
    ).one()
    return int(current or 0) + 1


def check_acceptance(
    doc: dict[str, Any], gpu_spec: Any, fabric_spec: Any, override: bool = False
) -> dict[str, Any]:
    """The node acceptance report of `doc` against the declared GPU and fabric; a failing one is refused
    (SpecError on `override_acceptance`) unless `override` says to fit it anyway."""
    report = acceptance_report(doc, gpu_spec, fabric_spec)
    if report["verdict"] == "fail" and not override:
        raise SpecError(
            [
                Problem(
                    "override_acceptance",
                    f"these measurements fail the acceptance check for {gpu_spec.name}"
                    f" ({'; '.join(failed_checks(report))}): a profile named after that GPU would describe "
                    "a broken or different machine; fit anyway with override_acceptance (CLI: "
                    "--override-acceptance)",
                )
            ]
        )
    return report


def check_generalises(report: dict[str, Any], force: bool = False) -> None:
    """Refuse (SpecError on `force`) a fit whose error on held-back points is not below the defaults'."""
    worse = [
        f"{part}: {held['error_before_pct']:.1f} % with the defaults, {held['error_after_pct']:.1f} % fitted"
        for part in ("gemm", "collectives")
        if (held := (report.get(part) or {}).get("held_back")) and not improves(held)
    ]
    if worse and not force:
        raise SpecError(
            [
                Problem(
                    "force",
                    "the fit does not improve the model on the points held back from it ("
                    + "; ".join(worse)
                    + "): it would not generalise; save it anyway with force (CLI: --force)",
                )
            ]
        )
    if worse:
        report.setdefault("notes", []).append(
            "saved with force although it does not improve on held-back points"
        )


def fit_profile(
    session: Session,
    doc: dict[str, Any],
    name: str,
    gpu: str | None = None,
    fabric: str | None = None,
    override_acceptance: bool = False,
    force: bool = False,
    fitter: Fitter = OPERATOR,
) -> CalibrationProfile:
    """Fit `doc` (a result document) as the next version of profile `name`, on behalf of `fitter`."""
    return fit_document(session, doc, FitRequest(name, gpu, fabric, override_acceptance, force), fitter)


def fit_document(
    session: Session, doc: dict[str, Any], request: FitRequest, fitter: Fitter = OPERATOR
) -> CalibrationProfile:
    """Store the fit of `doc` as the next version of `request.name`, owned by the name's owner (a new name:
    `fitter`). Refused: a name `fitter` may not version (ProfileForbiddenError), a fit that fails the
    acceptance or held-back gates without its override (SpecError)."""
    name = request.name.strip()
    if not name:
        raise SpecError([Problem("name", "must not be empty")])
    owner_id = check_may_version(session, name, fitter)
    gpu_spec = _gpu(request.gpu)
    fabric_spec = _fabric(request.fabric, gpu_spec)
    version = next_version(session, name)
    job_id = request.source_job_id
    source = f"calibration {name} v{version}" + (f" from job {job_id}" if job_id else "")
    try:
        params, report = build_profile(doc, gpu_spec, fabric_spec, source=source)
    except ValueError as exc:
        raise SpecError([Problem("job", str(exc))]) from exc
    check_generalises(report, request.force)
    acceptance = check_acceptance(doc, gpu_spec, fabric_spec, request.override_acceptance)
    report["acceptance"] = {**acceptance, "overridden": acceptance["verdict"] == "fail"}
    if acceptance["verdict"] != "pass":
        report.setdefault("notes", []).append(
            f"acceptance {acceptance['verdict']} against {gpu_spec.name}"
            + (" (fitted on an explicit override)" if acceptance["verdict"] == "fail" else "")
        )
    profile = CalibrationProfile(
        name=name,
        version=version,
        gpu_name=gpu_spec.name,
        params=params,
        report=report,
        source_job_id=job_id,
        owner_id=owner_id,
    )
    session.add(profile)
    session.commit()
    session.refresh(profile)
    return profile


def _refuse(message: str) -> SpecError:
    return SpecError([Problem("job_id", message)])


def check_fittable(session: Session, job: BenchmarkJob) -> None:
    """Refuse (SpecError on job_id) a job that did not succeed or whose rows span attempts or nodes."""
    if job.status != "succeeded":
        raise _refuse(f"job {job.id} is {job.status}: only a succeeded job can be fitted")
    attempts = list(session.exec(select(JobAttempt).where(JobAttempt.job_id == job.id)).all())
    final = next((a for a in attempts if a.attempt == job.attempt), None)
    if final is None:
        if job.attempt > 1:  # written before attempts were kept apart: its rows may mix attempts
            raise _refuse(f"job {job.id} ran {job.attempt} attempts and its rows cannot be traced to one")
        return
    if final.status != "succeeded" or final.node_id != job.claimed_by:
        raise _refuse(
            f"job {job.id}: its rows do not come from one attempt on one node "
            f"(attempt {final.attempt} is {final.status} on another node than the result)"
        )
    if not (job.result or {}).get("rows") and not final.partial_rows:
        raise _refuse(f"job {job.id} succeeded without result rows to fit")


def job_document(job: BenchmarkJob) -> dict[str, Any]:
    """The job's result document, or its partial rows when it has none."""
    doc = job.result or {"rows": job.partial_rows}
    return doc if doc.get("rows") else {**doc, "rows": job.partial_rows}


def fit_profile_from_job(
    session: Session,
    job: BenchmarkJob,
    name: str,
    gpu: str | None = None,
    fabric: str | None = None,
    override_acceptance: bool = False,
    force: bool = False,
    fitter: Fitter = OPERATOR,
) -> CalibrationProfile:
    """Fit a finished job's rows as the next version of `name` on behalf of `fitter`, who must have created
    the job or be an admin (ProfileForbiddenError); the job's declared GPU, fabric and gates fill what is
    not given."""
    check_may_fit_job(job, fitter)
    check_fittable(session, job)
    request = FitRequest(
        name,
        gpu or job.params.get("gpu"),
        fabric or job.params.get("fabric"),
        override_acceptance or bool(job.params.get("override_acceptance")),
        force or bool(job.params.get("force")),
        job.id,
    )
    return fit_document(session, job_document(job), request, fitter)


def job_acceptance(job: BenchmarkJob, gpu: str | None = None, fabric: str | None = None) -> dict[str, Any]:
    """The acceptance report of a job's rows against its declared (or the given) GPU and fabric."""
    declared_gpu, declared_fabric = job.params.get("gpu"), job.params.get("fabric")
    gpu_spec = _gpu(gpu or (str(declared_gpu) if declared_gpu else None))
    fabric_spec = _fabric(fabric or (str(declared_fabric) if declared_fabric else None), gpu_spec)
    return acceptance_report(job_document(job), gpu_spec, fabric_spec)


def list_profiles(
    session: Session, offset: int = 0, limit: int = 100
) -> tuple[list[CalibrationProfile], int]:
    total = int(session.exec(select(func.count()).select_from(CalibrationProfile)).one())
    rows = session.exec(
        select(CalibrationProfile)
        .order_by(col(CalibrationProfile.name), col(CalibrationProfile.version).desc())
        .offset(offset)
        .limit(limit)
    ).all()
    return list(rows), total


def get_profile(session: Session, ref: str, version: int | None = None) -> CalibrationProfile:
    """By id, or by name (latest version unless `version` is given)."""
    try:
        found = session.get(CalibrationProfile, uuid.UUID(ref))
        if found is not None:
            return found
    except ValueError:
        pass
    query = select(CalibrationProfile).where(CalibrationProfile.name == ref)
    if version is not None:
        query = query.where(CalibrationProfile.version == version)
    profile = session.exec(query.order_by(col(CalibrationProfile.version).desc())).first()
    if profile is None:
        import difflib

        names = sorted(set(session.exec(select(CalibrationProfile.name)).all()))
        label = ref if version is None else f"{ref} v{version}"
        raise NotFoundError("calibration profile", label, difflib.get_close_matches(ref, names, n=3))
    return profile


def get_hardware_profile(session: Session, ref: str, version: int | None = None) -> HardwareProfile:
    profile = get_profile(session, ref, version)
    return hardware_profile(profile.params, profile.name, profile.version, profile.gpu_name)


def default_predictions(
    doc: dict[str, Any], gpu: str | None = None, fabric: str | None = None
) -> dict[str, Any]:
    """What the uncalibrated model predicts for each measured row (catalog defaults for `gpu` / `fabric`)."""
    from app.calibration.collective_fit import collective_rows, predict_time_s
    from app.calibration.gemm_fit import gemm_rows
    from app.calibration.profile import cluster_for, default_gemm_curve
    from app.core.network import busbw_factor, default_network_params

    gpu_spec = _gpu(gpu)
    fabric_spec = _fabric(fabric, gpu_spec)
    out: dict[str, Any] = {"gpu": gpu_spec.name, "fabric": fabric_spec.name, "collectives": [], "gemm": []}
    c_rows = collective_rows(doc)
    if c_rows:
        cluster = cluster_for(doc, gpu_spec, fabric_spec)
        params = default_network_params()
        for r in c_rows:
            t = predict_time_s(r, cluster, params)
            factor = busbw_factor(r["op"], int(r.get("ranks") or 2))
            out["collectives"].append(
                {**r, "predicted_busbw_gbps": r["size_bytes"] / t * factor / 1e9 if t > 0 else None}
            )
    for r in gemm_rows(doc):
        eff = default_gemm_curve(gpu_spec, r["dtype"])  # burst clocks, as a benchmark measures
        predicted = float(eff.flops_per_s(r["m"], r["n"], r["k"])) / 1e12 if eff else None
        out["gemm"].append({**r, "predicted_tflops": predicted})
    return out
