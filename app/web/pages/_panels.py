"""Turn an evaluated scenario (the JSON a plan revision stores) into what the results panels show:
Plotly figures (drawn by static/js/charts.js) and the tables beside them, in display units."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from sqlmodel import Session, col, select

from app.core.errors import Problem, SpecError
from app.core.units import GiB
from app.errors import NotFoundError
from app.models.benchmarks import CalibrationProfile
from app.models.catalog import GPUEntry, ModelEntry
from app.services import planning
from app.services.catalog import Actor
from app.web.pages import _filters
from app.web.pages._builder import (
    BuilderState,
    choices_from,
    layout_query,
    planner_constraints,
    saved_choices,
    scenario_to_state,
    sizes_request,
    state_to_scenario,
)

MS = 1e3
ZERO_MS = 0.005  # below this a step part shows as 0.00 ms in the table

# Agreed fabric preset names (app/catalog/fabrics.yaml); used when the loader is not importable.
FALLBACK_FABRICS = (
    "ib-ndr-8x400",
    "roce-8x400",
    "ethernet-tcp-100",
    "efa-v2-32x100",
    "ib-hdr-8x200",
    "ib-xdr-8x800",
)


@dataclass
class View:
    problems: list[Problem] = field(default_factory=list)
    notice: str = ""
    scenario_json: str = ""
    # builder: its choices beyond the scenario, saved with the plan (_builder.SAVED_CHOICES)
    choices_json: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)  # the model as read (planning.model_card)
    accuracy: dict[str, str] = field(default_factory=dict)  # what the accuracy bands rest on, in words
    memory: dict[str, Any] | None = None
    step: dict[str, Any] | None = None
    ranking: dict[str, Any] | None = None
    scaling: dict[str, Any] | None = None
    profile_label: str = ""
    scaling_query: str = ""  # builder: the scaling panel loads on its own from /plans/new/scaling?…
    sizing_query: str = (
        ""  # builder with a deadline or budget: the sizing panel loads from /plans/new/sizes?…
    )
    cost: dict[str, Any] | None = None
    goodput: dict[str, Any] | None = None
    assumptions: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    # a by-hand layout that does not fit: the planner's best layout that does (a ranking row with `use_query`), or
    # the reason there is none
    # the query of the deferred "What fits" search (/plans/new/alternative) when the layout does not fit
    fit_alternative_query: str = ""
    profile_warning: str = ""  # about the chosen profile: acceptance, its GPU, CPU, a dtype it lacks
    # planner mode, no layout fits: why (divisibility or memory) and the nearest node counts and global batches
    # that fit, each with the builder query that sets it
    no_fit: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------------- choices


@dataclass
class Choices:
    models: list[dict[str, str]]
    gpus: list[tuple[str, str]]
    fabrics: list[tuple[str, str]]
    profiles: list[tuple[str, str]] = field(default_factory=list)


def fabric_names() -> list[str]:
    return [name for name, _ in fabric_options()]


def fabric_options() -> list[tuple[str, str]]:
    """The fabric presets as select options, by name: the name as the value, the preset's label as the text
    (e.g. "RoCE 8 × 400G, static ECMP, scattered placement")."""
    try:
        from app.catalog.fabrics import presets
    except ImportError:
        return [(name, name) for name in FALLBACK_FABRICS]
    return [(name, preset.label) for name, preset in sorted(presets().items())]


PROFILES_NEED_SIGN_IN = (
    "sign in to use calibration profiles: they are users' measurements (signed out, the published defaults "
    "apply)"
)


def profile_refusal(state: BuilderState, may_use_profiles: bool) -> str:
    """Why the builder may not use the calibration profile `state` names ('' when it may, or names none):
    a caller without plans:read (anonymous) neither lists nor uses profiles, as the API's
    GET /api/v1/calibration/profiles."""
    return PROFILES_NEED_SIGN_IN if state.profile and not may_use_profiles else ""


def profile_choices(session: Session, state: BuilderState | None) -> list[tuple[str, str]]:
    """The builder's calibration profile choices: the published defaults, every version of every profile, and
    the state's own value if no longer listed."""
    profiles = [("", planning.DEFAULT_PROFILE)]
    for row in session.exec(
        select(CalibrationProfile).order_by(
            col(CalibrationProfile.name), col(CalibrationProfile.version).desc()
        )
    ).all():
        label = planning.profile_label(row.name, row.version)
        profiles.append((label, f"{label} ({profile_caveat(row)})" if row.gpu_name else label))
    if state is not None and state.profile and state.profile not in {p for p, _ in profiles}:
        profiles.append((state.profile, state.profile))
    return profiles


def choices(session: Session, state: BuilderState | None = None, may_use_profiles: bool = False) -> Choices:
    """The builder's select options. Calibration profiles are listed only when `may_use_profiles` (a caller
    with plans:read); otherwise the published defaults are the only choice."""
    models = [
        {"name": m.name, "label": f"{m.name} ({m.family})" if m.family else m.name}
        for m in session.exec(select(ModelEntry).order_by(col(ModelEntry.name))).all()
    ]
    gpus = [(g.name, g.name) for g in session.exec(select(GPUEntry).order_by(col(GPUEntry.name))).all()]
    fabrics = fabric_options()
    if state is not None:  # keep the current value selectable even if the catalog does not list it
        if state.gpu not in {g for g, _ in gpus}:
            gpus.insert(0, (state.gpu, state.gpu))
        if state.fabric not in {f for f, _ in fabrics}:
            fabrics.insert(0, (state.fabric, state.fabric))
    profiles = profile_choices(session, state) if may_use_profiles else [("", planning.DEFAULT_PROFILE)]
    return Choices(models=models, gpus=gpus, fabrics=fabrics, profiles=profiles)


# ---------------------------------------------------------------------------------------------- views


def profile_caveat(row: Any) -> str:
    """What a calibration profile was measured as: its GPU, and its acceptance verdict when not a pass (a profile
    fitted from a node that missed what its GPU should do, e.g. a CPU run, says so wherever it is offered)."""
    acceptance = (row.report or {}).get("acceptance") or {}
    verdict = acceptance.get("verdict")
    if verdict in ("warn", "fail"):
        override = ", fitted on an override" if acceptance.get("overridden") else ""
        return f"{row.gpu_name}; acceptance {verdict}{override}: the node measured below what a {row.gpu_name} does"
    return str(row.gpu_name)


def profile_warning(session: Session, ref: str, gpu: str = "", dtype: str = "bf16") -> str:
    """A note for the results about the chosen profile: its node missed the acceptance check, it was measured on
    another GPU or on CPU, or it has no GEMM fit for the run's dtype."""
    if not ref:
        return ""
    from app.calibration.profile import hardware_profile
    from app.catalog import find_gpu
    from app.core.efficiency import profile_use_warnings
    from app.services.calibration import get_profile
    from app.services.scenario import split_profile_ref

    try:
        row = get_profile(session, *split_profile_ref(ref))
    except (NotFoundError, ValueError):  # an unknown profile or version: the builder reports it on the field
        return ""
    notes: list[str] = []
    caveat = profile_caveat(row)
    if caveat != row.gpu_name:
        notes.append(
            f"Calibration profile {ref} ({caveat}); estimates with it describe that node, not a healthy "
            f"{row.gpu_name}."
        )
    if gpu and row.gpu_name:
        try:
            measured, chosen = find_gpu(row.gpu_name).name, find_gpu(gpu).name
        except (NotFoundError, LookupError, ValueError):
            measured, chosen = row.gpu_name, gpu
        if measured != chosen:
            notes.append(f"Calibration profile {ref} was measured on {measured}, not the chosen {chosen}.")
    hp = hardware_profile(row.params, row.name, row.version, row.gpu_name)
    notes += [w[0].upper() + w[1:] + "." for w in profile_use_warnings(hp, dtype)]
    return " ".join(notes)


def build_view(
    session: Session, state: BuilderState, may_use_profiles: bool = False, *, viewer: Actor
) -> View:
    """Evaluate the builder's state at `viewer`'s prices; problems are reported per field, never as an error page.
    A calibration profile is used only when `may_use_profiles` (else a problem on `profile`, see
    profile_refusal)."""
    refusal = profile_refusal(state, may_use_profiles)
    if refusal:
        return View(problems=[Problem("profile", refusal)], reasons=_default_reasons())
    try:
        scenario = state_to_scenario(state)
        search = planning.PlannerSearch(planner_constraints(state), state.rank_by)
        evaluation = planning.evaluate(
            session,
            scenario,
            search=search if state.mode == "planner" else None,
            scaling=False,
            profile_ref=state.profile,
            viewer=viewer,
        )
    except SpecError as exc:
        view = View(problems=list(exc.problems), reasons=_default_reasons())
        if state.mode == "planner" and any(p.field == "layout" for p in exc.problems):
            view.no_fit = no_fit_view(session, state, viewer)
        return view
    except NotFoundError as exc:
        return View(problems=[Problem(_kind_field(exc.kind), str(exc))], reasons=_default_reasons())
    view = view_from_result(
        evaluation.result,
        {
            "app_version": evaluation.app_version,
            "formula_version": evaluation.formula_version,
            "price_book_date": evaluation.price_book_date,
            "calibration_profile": evaluation.calibration_profile,
        },
    )
    if view.ranking:
        view.ranking = {
            **view.ranking,
            **{
                key: [
                    {**row, "use_query": layout_query(state, row["layout_fields"])}
                    for row in view.ranking[key]
                ]
                for key in ("rows", "pareto")
                if key in view.ranking
            },
        }
        if alt := view.ranking.get("light_moe"):  # the heavier MoE layout the note names, as a by-hand link
            view.ranking["light_moe"] = {**alt, "use_query": layout_query(state, alt["heavy"]["layout"])}
        # the same search on the dispatcher the dispatcher note names
        if hint := view.ranking.get("moe_dispatcher_hint"):
            suggested = hint["suggested"]["dispatcher"]
            view.ranking["moe_dispatcher_hint"] = {**hint, "use_query": state.query(moe_dispatcher=suggested)}
    view.profile_label = evaluation.calibration_profile
    view.profile_warning = profile_warning(session, state.profile, state.gpu, state.dtype)
    if state.deadline_days or state.budget_usd:
        view.sizing_query = state.query()
    if state.mode != "planner" and view.summary.get("fits") is False:
        # a planner search (a quarter second at 4,000 GPUs): fetched after the results, as the scaling panel is
        view.fit_alternative_query = state.query()
    if evaluation.result.get("status") == "ok":
        concrete = scenario_to_state(evaluation.scenario)
        concrete.hf_config = state.hf_config
        concrete.profile = state.profile
        concrete.scaling_mode = state.scaling_mode  # the panel follows the builder's strong / weak choice
        view.scaling_query = concrete.query()
        view.scenario_json = json.dumps(evaluation.scenario, separators=(",", ":"))
        view.choices_json = json.dumps(saved_choices(state), separators=(",", ":"))
    return view


def no_fit_view(session: Session, state: BuilderState, viewer: Actor) -> dict[str, Any] | None:
    """Planner mode with no layout that fits: the reason, and the nearest node counts and global batches at which
    one does (links that set the field); None when the search itself fails."""
    from app.services.plan_fixes import nearest_fits

    try:
        scenario = state_to_scenario(state)
        found = nearest_fits(
            session,
            sizes_request(state, scenario),
            state.nodes,
            state.gpus_per_node,
            state.global_batch,
            viewer=viewer,
        )
    except (SpecError, NotFoundError):
        return None
    for key, name in (
        ("nodes_below", "nodes"),
        ("nodes_above", "nodes"),
        ("batch_below", "global_batch"),
        ("batch_above", "global_batch"),
    ):
        value = found[key]
        found[f"{key}_query"] = state.query(**{name: value}) if value else ""
    return found


def alternative_view(
    session: Session, state: BuilderState, may_use_profiles: bool = False
) -> dict[str, Any] | str:
    """For a builder layout that does not fit: the planner's fastest layout that does (with the builder query
    that uses it), or why none was found (a calibration profile only when `may_use_profiles`)."""
    refusal = profile_refusal(state, may_use_profiles)
    if refusal:
        return refusal
    try:
        scenario = state_to_scenario(state)
        found = planning.fitting_alternative(session, scenario, state.profile, planner_constraints(state))
    except (SpecError, NotFoundError) as exc:
        return str(exc)
    if isinstance(found, str):
        return found
    return {**found, "use_query": layout_query(state, found["layout_fields"])}


def sizing_view(
    session: Session, state: BuilderState, may_use_profiles: bool = False, *, viewer: Actor
) -> dict[str, Any]:
    """The smallest cluster that meets the builder's deadline and budget: every size the planner searched, with
    its best layout, days, GPU-hours and cost at `viewer`'s headline price, and the answer or why there is none
    (a calibration profile only when `may_use_profiles`)."""
    from app.services import planner as planner_service

    goal = {"deadline_days": state.deadline_days or None, "budget_usd": state.budget_usd or None}
    refusal = profile_refusal(state, may_use_profiles)
    if refusal:
        return {**goal, "problem": refusal}
    try:
        scenario = state_to_scenario(replace(state, mode="planner"))
        swept = planner_service.sizes(sizes_request(state, scenario), session, viewer=viewer)
    except (SpecError, NotFoundError) as exc:
        return {**goal, "problem": str(exc)}
    rows = [_size_row(state, point, goal) for point in swept.points]
    answer = next((row for row in rows if row["meets"]), None)
    feasible = [row for row in rows if row["feasible"]]
    return {
        **goal,
        "rows": rows,
        "answer": answer,
        "price": swept.usd_per_gpu_hour,
        "price_source": swept.price_source,
        "fastest": min(feasible, key=lambda r: r["days"]) if feasible else None,
        "cheapest": min(
            (r for r in feasible if r["cost_usd"] is not None), key=lambda r: r["cost_usd"], default=None
        ),
    }


def _size_row(state: BuilderState, point: dict[str, Any], goal: dict[str, Any]) -> dict[str, Any]:
    gpus = int(point["num_gpus"])
    days = point.get("time_to_train_days")
    # a deadline is a date: it is met on the wall clock (compute days over the goodput) where that is known
    wall_days = point.get("wall_clock_days")
    finish = wall_days if wall_days is not None else days
    cost = point.get("cost_usd")
    deadline, budget = goal["deadline_days"], goal["budget_usd"]
    on_time = deadline is None or (finish is not None and finish <= deadline)
    affordable = budget is None or (cost is not None and cost <= budget)
    nodes, rest = divmod(gpus, state.gpus_per_node)
    best = point.get("best") or {}
    return {
        "gpus": gpus,
        "nodes": nodes if not rest else None,
        "feasible": bool(point["feasible"]),
        "layout": str(best.get("label") or ""),
        "days": days,
        "days_high": point.get("time_to_train_likely_high_days"),
        "wall_days": wall_days,
        "goodput": point.get("goodput"),
        "gpu_hours": point.get("gpu_hours"),
        "wall_gpu_hours": point.get("wall_clock_gpu_hours"),
        "cost_usd": cost,
        "on_time": on_time,
        "affordable": affordable,
        "meets": bool(point["feasible"]) and on_time and affordable and not rest,
        "reason": point.get("reason") or "",
        "use_query": state.query(nodes=nodes, mode="planner") if nodes and not rest else "",
    }


def scaling_view(session: Session, state: BuilderState, may_use_profiles: bool = False) -> View:
    """Only the scaling panel of a concrete (by-hand) builder state (a calibration profile only when
    `may_use_profiles`)."""
    refusal = profile_refusal(state, may_use_profiles)
    if refusal:
        return View(reasons={"scaling": refusal[0].upper() + refusal[1:] + "."})
    view = View(reasons={"scaling": "Fix the inputs to see the scaling curve."})
    try:
        view.scaling = scaling_panel(
            planning.scaling_for(session, state_to_scenario(state), state.profile, state.scaling_mode)
        )
    except (SpecError, NotFoundError):
        return view
    if view.scaling is None:
        view.reasons["scaling"] = "No GPU count around this cluster size could be estimated."
    return view


def view_from_saved(rev: Any, may_change: bool = True) -> View:
    """A saved revision's panels; a saved page has no planner mode, so it says where the ranking is made: in the
    builder, from "Edit in builder" for whoever may change the plan, from "Open in builder" for a reader."""
    view = view_from_result(
        rev.result,
        {
            "app_version": rev.app_version,
            "formula_version": rev.formula_version,
            "price_book_date": rev.price_book_date,
            "calibration_profile": rev.calibration_profile,
        },
    )
    choices = choices_from(getattr(rev, "builder_choices", None))
    if choices.get("mode") == "planner" and not view.ranking:
        view.reasons["ranking"] = (
            f"Saved from the planner, ranked by {RANKED_BY[choices.get('rank_by', 'time')]}: this revision keeps "
            f"the layout it put first. “{'Edit' if may_change else 'Open'} in builder” ranks every layout again."
        )
    elif view.reasons.get("ranking") == planning.RANKING_HINT:
        view.reasons["ranking"] = planning.SAVED_RANKING_HINT
    return view


RANKED_BY = {"time": "time to train", "cost": "cost per run"}


def saved_choices_summary(raw: Any) -> list[str]:
    """The builder choices a revision was saved with, in words, for its page (empty when none were saved)."""
    choices = choices_from(raw)
    if not choices:
        return []
    words: list[str] = []
    if choices.get("mode") == "planner":
        words.append(f"the planner chose the layout, ranked by {choices.get('rank_by', 'time')}")
    else:
        words.append("layout set by hand")
    if choices.get("deadline_days"):
        words.append(f"finish within {_filters.num_auto(choices['deadline_days'])} days")
    if choices.get("budget_usd"):
        words.append(f"budget {choices['budget_usd']:,.0f} USD per run")
    if choices.get("scaling_mode") == "weak":
        words.append("weak scaling panel")
    for flag, text in (
        ("plan_offload", "planner may offload activations"),
        ("plan_optimizer_offload", "planner may offload optimizer states"),
        ("plan_avoid_light_moe", "planner avoids light MoE layer passes"),
    ):
        if choices.get(flag):
            words.append(text)
    return words


def _kind_field(kind: str) -> str:
    return {"gpu": "gpu", "model": "model", "fabric": "fabric", "interconnect": "fabric"}.get(kind, kind)


def _default_reasons() -> dict[str, str]:
    return {
        "ranking": "Fix the inputs above to see results.",
        "scaling": "Fix the inputs above to see results.",
        "cost": "Fix the inputs above to see results.",
        "goodput": "Fix the inputs above to see results.",
    }


def view_from_result(result: dict[str, Any], provenance: dict[str, str]) -> View:
    view = View(provenance=provenance, reasons=dict(result.get("unavailable") or {}))
    if result.get("status") != "ok":
        view.notice = str(result.get("message") or "No estimate for these inputs.")
        view.reasons = {k: view.notice for k in ("ranking", "scaling", "cost", "goodput")}
        return view
    view.summary = dict(result.get("summary") or {})
    view.model = dict(result.get("model") or {})
    view.accuracy = {k: str(v) for k, v in (result.get("accuracy") or {}).items()}
    view.memory = memory_panel(result.get("memory"))
    view.step = step_panel(result.get("step"))
    view.ranking = result.get("ranking")
    view.scaling = scaling_panel(result.get("scaling"))
    view.cost = cost_panel(result.get("cost_panel"))
    view.goodput = goodput_panel(result.get("goodput"))
    view.assumptions = [a for a in result.get("assumptions") or [] if isinstance(a, dict)]
    view.reasons.setdefault("ranking", planning.RANKING_HINT)
    view.reasons.setdefault("scaling", "No scaling sweep was computed for this plan.")
    view.reasons.setdefault("cost", "The cost model is not available in this build.")
    view.reasons.setdefault("goodput", "The goodput model is not available in this build.")
    return view


def _axis(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "automargin": True, **extra}


def memory_panel(memory: dict[str, Any] | None) -> dict[str, Any] | None:
    if not memory or not memory.get("stages"):
        return None
    hbm = float(memory["hbm_bytes"])
    usable = float(memory.get("usable_bytes") or hbm)
    stages = memory["stages"]
    most = memory.get("most_loaded")
    components: list[str] = []
    for stage in stages:
        for name in stage["components"]:
            if name not in components:
                components.append(name)
    names = [f"Stage {s['stage']}" for s in stages]
    rows: list[dict[str, Any]] = []
    for s in stages:
        gib = {c: float(s["components"].get(c, 0.0)) / GiB for c in components}
        total = float(s["total_bytes"])
        rows.append(
            {
                "stage": names[len(rows)],
                "gib": gib,
                "total_gib": total / GiB,
                "fits": total <= usable,
                "most_loaded": s["stage"] == most,
            }
        )
    traces = [
        {
            "type": "bar",
            "name": _filters.label(c),
            "x": names,
            "y": [round(r["gib"][c], 3) for r in rows],
            "hovertemplate": "%{x}: %{y:.2f} GiB<extra>" + _filters.label(c) + "</extra>",
        }
        for c in components
    ]
    annotations = [
        {
            "x": r["stage"],
            "y": r["total_gib"],
            "text": "✓ fits" if r["fits"] else "✗ over HBM",
            "showarrow": False,
            "yanchor": "bottom",
        }
        for r in rows
    ]
    annotations.append(
        {
            "xref": "paper",
            "x": 1,
            "y": hbm / GiB,
            "text": f"HBM {hbm / GiB:.0f} GiB",
            "showarrow": False,
            "xanchor": "right",
            "yanchor": "bottom",
        }
    )
    figure = {
        "data": traces,
        "layout": {
            "barmode": "stack",
            "xaxis": _axis("Pipeline stage"),
            "yaxis": _axis("Memory per GPU (GiB)", rangemode="tozero"),
            "shapes": [
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": usable / GiB,
                    "y1": usable / GiB,
                    "line": {"dash": "dot", "width": 1},
                    "name": "usable after safety margin",
                },
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": hbm / GiB,
                    "y1": hbm / GiB,
                    "line": {"dash": "dash", "width": 2},
                    "name": "HBM capacity",
                },
            ],
            "annotations": annotations,
            "legend": {"traceorder": "normal"},
        },
    }
    worst = max(rows, key=lambda r: r["total_gib"])
    largest = sorted(worst["gib"].items(), key=lambda kv: -kv[1])[:3]
    overflow = {
        "stage": worst["stage"],
        "total_gib": worst["total_gib"],
        "over_gib": worst["total_gib"] - usable / GiB,
        "largest": [{"name": _filters.label(name), "gib": gib} for name, gib in largest],
    }
    summary = (
        f"most-loaded stage uses {worst['total_gib']:.1f} GiB of {hbm / GiB:.0f} GiB "
        f"({'fits' if worst['fits'] else 'does not fit'} within the usable {usable / GiB:.0f} GiB)"
    )
    return {
        "figure": figure,
        "rows": rows,
        "components": components,
        "hbm_gib": hbm / GiB,
        "usable_gib": usable / GiB,
        "summary": summary,
        "overflow": overflow,  # the most loaded stage and its largest parts (the headline's "why" when over)
        # activation and optimizer offloading: what the host keeps per GPU, against the reference system's DRAM
        "host_gib": float(memory.get("host_bytes") or 0.0) / GiB,
        "host_what": host_contents(memory),
        "host_capacity_gib": float(memory.get("host_capacity_bytes") or 0.0) / GiB,
        "host_fits": bool(memory.get("host_fits", True)),
    }


def host_contents(memory: dict[str, Any]) -> str:
    """What the stage holding the most host memory offloads: 'activations', 'optimizer states' or both."""
    stages = memory.get("stages") or []
    if not stages:
        return "activations"
    top = max(stages, key=lambda st: float(st.get("host_bytes") or 0.0))
    optimizer = float(top.get("host_optimizer_bytes") or 0.0)
    activations = float(top.get("host_bytes") or 0.0) - optimizer
    parts = [
        name for name, held in (("activations", activations), ("optimizer states", optimizer)) if held > 0
    ]
    return " and ".join(parts) or "activations"


def step_panel(step: dict[str, Any] | None) -> dict[str, Any] | None:
    if not step or not step.get("breakdown_s"):
        return None
    total = float(step["total_s"])
    every = [
        {"name": k, "ms": float(v) * MS, "pct": (100.0 * float(v) / total) if total else 0.0}
        for k, v in step["breakdown_s"].items()
    ]
    # parts that round to 0.00 ms are named once under the table instead of filling it with zeros
    rows = [r for r in every if r["ms"] >= ZERO_MS]
    zero = [_filters.label_in_text(r["name"]) for r in every if r["ms"] < ZERO_MS]
    figure = {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "y": [_filters.label(r["name"]) for r in rows],
                "x": [round(r["ms"], 3) for r in rows],
                "text": [f"{r['ms']:.1f} ms" for r in rows],
                "textposition": "auto",
                "hovertemplate": "%{y}: %{x:.2f} ms<extra></extra>",
                "name": "time per step",
            }
        ],
        "layout": {
            "xaxis": _axis("Time per step (ms)", rangemode="tozero"),
            "yaxis": _axis("", autorange="reversed"),
            "showlegend": False,
        },
    }
    return {
        "figure": figure,
        "rows": rows,
        "total_ms": total * MS,
        "summary": f"total {total * MS:.1f} ms per step",
        "zero": zero,
        "notes": [str(n) for n in step.get("notes") or []],
    }


_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def _log_axis(title: str, traces: list[dict[str, Any]], coordinate: str) -> dict[str, Any]:
    """A log axis for the traces' `coordinate` values, never labelled at every digit ("9 8 7 6 5…", Plotly's
    own choice on a wide chart spanning one to three decades): at the decades alone when the values span two
    or more of them, else at 1, 2 and 5 of each decade; under one decade Plotly's own ticks, labelled in full.
    Unlabelled minor ticks mark the digits between labels."""
    values = [float(v) for t in traces for v in t[coordinate] if v and float(v) > 0]
    span = math.log10(max(values) / min(values)) if values else 0.0
    axis = _axis(title, type="log", minor={"ticks": "outside", "ticklen": 3, "showgrid": False})
    if span >= LOG_DECADES_ONLY:
        axis["dtick"] = 1
    elif span >= 1:
        axis["dtick"] = "D2"
    return axis


# a log axis spanning this many decades or more is labelled at the decades only (_log_axis)
LOG_DECADES_ONLY = 2


def scaling_panel(scaling: dict[str, Any] | None) -> dict[str, Any] | None:
    """Throughput (tokens/s) and time to train per fabric, in absolute terms on one chart, with the scaling
    efficiency against one ideal (app.core.scaling) in the table."""
    if not scaling or not scaling.get("points"):
        return None
    fabrics: list[str] = list(scaling["fabrics"])
    by_gpus: dict[int, dict[str, Any]] = {}
    for p in scaling["points"]:
        row = by_gpus.setdefault(int(p["gpus"]), {"gpus": int(p["gpus"]), "eff": {}, "days": {}, "tps": {}})
        row["eff"][p["fabric"]] = None if p.get("efficiency") is None else 100.0 * float(p["efficiency"])
        row["days"][p["fabric"]] = p.get("days")
        row["tps"][p["fabric"]] = p.get("tokens_per_s")
    rows = [by_gpus[k] for k in sorted(by_gpus)]
    traces = []
    for i, f in enumerate(fabrics):
        symbol, line = _SYMBOLS[i % len(_SYMBOLS)], {"dash": _DASHES[i % len(_DASHES)]}
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{f} throughput",
                "x": [r["gpus"] for r in rows if r["tps"].get(f)],
                "y": [round(float(r["tps"][f]), 1) for r in rows if r["tps"].get(f)],
                "marker": {"symbol": symbol, "size": 8},
                "line": line,
                "hovertemplate": "%{x} GPUs: %{y:,.0f} tokens/s<extra>" + f + "</extra>",
            }
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{f} time to train",
                "x": [r["gpus"] for r in rows if r["days"].get(f) is not None],
                "y": [round(float(r["days"][f]), 3) for r in rows if r["days"].get(f) is not None],
                "xaxis": "x2",
                "yaxis": "y2",
                "marker": {"symbol": symbol + "-open", "size": 8},
                "line": line,
                "hovertemplate": "%{x} GPUs: %{y:.1f} days<extra>" + f + "</extra>",
            }
        )
    figure = {
        "data": traces,
        "layout": {
            "grid": {"rows": 1, "columns": 2, "pattern": "independent"},
            "xaxis": _log_axis("GPUs", traces[0::2], "x"),
            "yaxis": _log_axis("Throughput (tokens/s)", traces[0::2], "y"),
            "xaxis2": _log_axis("GPUs", traces[1::2], "x"),
            "yaxis2": _log_axis("Time to train (days)", traces[1::2], "y"),
            "legend": {"orientation": "h", "y": -0.22, "yanchor": "top"},
        },
    }
    mode = str(scaling.get("mode") or "strong")
    return {
        "figure": figure,
        "rows": rows,
        "fabrics": fabrics,
        "mode": mode,
        "note": scaling.get("note", ""),
        "summary": f"{len(rows)} cluster sizes on {len(fabrics)} fabrics, {mode} scaling",
    }


def goodput_panel(goodput: dict[str, Any] | None) -> dict[str, Any] | None:
    if not goodput or not goodput.get("breakdown"):
        return None
    lost = {k: float(v) * 60.0 for k, v in goodput["breakdown"].items() if k != "useful"}
    figure = {
        "data": [
            {
                "type": "bar",
                "x": [_filters.label(k) for k in lost],
                "y": [round(v, 3) for v in lost.values()],
                "text": [f"{v:.2f} min" for v in lost.values()],
                "textposition": "auto",
                "hovertemplate": "%{x}: %{y:.2f} min per useful hour<extra></extra>",
                "name": "minutes lost per useful hour",
            }
        ],
        "layout": {
            "xaxis": _axis("Cause"),
            "yaxis": _axis("Minutes lost per useful hour (min)", rangemode="tozero"),
            "showlegend": False,
        },
    }
    return {"figure": figure, "rows": goodput.get("rows", []), "summary": goodput.get("summary", "")}


MAX_COST_OPTIONS = 8


def cost_panel(cost: dict[str, Any] | None) -> dict[str, Any] | None:
    """The cheapest options in the table, and only those (plus on-prem) in the chart."""
    if not cost or not cost.get("rows"):
        return None
    rows = sorted(cost["rows"], key=lambda r: float(r["cost_per_run_usd"]))
    shown = rows[:MAX_COST_OPTIONS]
    keep = {r["option"] for r in shown[:5]} | {"on-prem"}
    figure = dict(cost["figure"])
    data = [t for t in figure.get("data", []) if t.get("type") != "scatter" or t.get("name") in keep]
    figure = {**figure, "data": data}
    return {
        **cost,
        "rows": shown,
        "figure": figure,
        "more": len(rows) > len(shown),
        "total_options": len(rows),
        "pooled": sum(1 for r in rows if r.get("in_headline")),
        "pooled_shown": sum(1 for r in shown if r.get("in_headline")),
    }
