"""Light MoE layer passes beside heavier ones: what published runs of each kind suggest the step would take.

The step model prices the GPU work of a MoE layer pass but not what sets the pace when that work is small:
published runs with under MOE_LIGHT_LAYER_PASS_S of GPU work per layer pass took longer than estimated, heavier
ones about their estimate (app/catalog/accuracy.json, docs/validation.md "Accuracy bands"). Where the layout the planner
recommends is light, the search, the API and the builder put the best heavier layout inside the validated region
beside it, each with its estimate scaled by the median of the published runs of its kind. That is the bands' own
statistic, said beside the estimate; the ranking and the estimate stay the model's (the planner's
`avoid_light_moe_passes` ranks without the light layouts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from app.catalog import accuracy_table
from app.core.accuracy import (
    FUSED_HOST_PATH_DISPATCHERS,
    MOE_LIGHT_LAYER_PASS_S,
    AccuracyBand,
    band_for,
    estimate_layer_pass_seconds,
    layer_pass_seconds,
)
from app.core.errors import SpecError
from app.core.estimate import estimate
from app.core.knobs import knob
from app.core.model import ModelSpec
from app.core.planner import PlannedLayout, PlanResult
from app.core.planner_eval import LayoutArrays
from app.core.units import DAY
from app.services.scenario import ResolvedScenario


def planned_layer_pass(model: ModelSpec, planned: dict[str, Any] | None) -> float | None:
    """GPU work per layer pass (app.core.accuracy.layer_pass_seconds) of a ranked layout's dict; None without one."""
    if not planned:
        return None
    layers_per_stage = model.num_layers / planned["layout"]["pp"]
    return layer_pass_seconds(planned["step_breakdown_s"], layers_per_stage, planned["num_microbatches"])


def _band(resolved: ResolvedScenario, planned: dict[str, Any]) -> AccuracyBand | None:
    return band_for(
        accuracy_table(),
        resolved.model,
        resolved.seq_len,
        planned_layer_pass(resolved.model, planned),
        resolved.framework.moe_dispatcher,
        resolved.cluster.gpu.compute_capability,
    )


def _side(planned: dict[str, Any], band: AccuracyBand, layer_pass_s: float) -> dict[str, Any]:
    """One layout of the comparison: its estimate and that estimate × the median run of its kind (the time to
    train of compute too, where the search had a token budget)."""
    compute_s = planned.get("time_to_train_s")
    return {
        "label": planned["label"],
        "layout": planned["layout"],
        "rank": planned["rank"],
        "step_time_s": planned["step_time_s"],
        "layer_pass_ms": layer_pass_s * 1e3,
        "regime": band.regime,
        "ratio_median": band.ratio_median,
        "typical_step_time_s": planned["step_time_s"] * band.ratio_median,
        "typical_time_to_train_s": compute_s * band.ratio_median if compute_s else None,
    }


def light_moe_alternative(
    resolved: ResolvedScenario,
    result: PlanResult,
    headline: PlannedLayout | None,
    accept: Callable[[LayoutArrays], np.ndarray],
) -> dict[str, Any] | None:
    """Where `headline` (the layout the plan recommends) has light MoE layer passes and a heavier layout that
    `accept` takes (the validated region's test, app.services.region.accept_for) fits: both layouts with their
    estimates scaled by the median published run of their kind, and a sentence. None for a dense model, a heavy
    headline layout, or no heavier layout."""
    if headline is None or resolved.model.moe is None:
        return None
    light = headline.to_dict()
    light_pass = planned_layer_pass(resolved.model, light)
    if light_pass is None or light_pass >= MOE_LIGHT_LAYER_PASS_S:
        return None
    heavy_layout = result.best_heavy_moe(resolved.model, accept)
    if heavy_layout is None:
        return None
    heavy = heavy_layout.to_dict()
    light_band, heavy_band = _band(resolved, light), _band(resolved, heavy)
    # at long context every MoE layout shares one band, so the two medians would say nothing
    if light_band is None or heavy_band is None or not light_band.regime.startswith("moe-light"):
        return None
    out: dict[str, Any] = {
        "light": _side(light, light_band, light_pass),
        "heavy": _side(heavy, heavy_band, planned_layer_pass(resolved.model, heavy) or 0.0),
    }
    out["heavy_expected_faster"] = out["heavy"]["typical_step_time_s"] < out["light"]["typical_step_time_s"]
    out["summary"] = _sentence(out)
    return out


def _sentence(alt: dict[str, Any]) -> str:
    light, heavy = alt["light"], alt["heavy"]
    verdict = (
        "On that evidence the heavier layout is the faster choice: benchmark both, or search with the planner's "
        "option to avoid light MoE layer passes."
        if alt["heavy_expected_faster"]
        else "On that evidence the light layout stays ahead."
    )
    kind = f"under {MOE_LIGHT_LAYER_PASS_S * 1e3:.0f} ms a pass{_on_dispatcher(light['regime'])}"
    days = ""
    if light["typical_time_to_train_s"] and heavy["typical_time_to_train_s"]:
        days = (
            f" For the token budget that is about {light['typical_time_to_train_s'] / DAY:.1f} against "
            f"{heavy['typical_time_to_train_s'] / DAY:.1f} days of compute."
        )
    return (
        f"{light['label']} carries {light['layer_pass_ms']:.1f} ms of GPU work per MoE layer pass; published runs "
        f"of that kind ({kind}) took a median {light['ratio_median']:.2f}× their estimate, about "
        f"{light['typical_step_time_s']:.3g} s a step here. The best layout with heavier passes inside the "
        f"validated region, {heavy['label']} (rank {heavy['rank']}, {heavy['layer_pass_ms']:.1f} ms a pass, "
        f"{heavy['step_time_s']:.3g} s estimated), is of a kind whose runs took a median "
        f"{heavy['ratio_median']:.2f}×: about {heavy['typical_step_time_s']:.3g} s.{days} {verdict}"
    )


def _on_dispatcher(regime: str) -> str:
    """The dispatcher a light band is kept apart for (app.core.accuracy.FUSED_HOST_PATH_DISPATCHERS), in words."""
    return " on HybridEP" if regime == "moe-light-hybridep" else ""


# The frameworks whose MoE layers can take Megatron-core's flex dispatcher with the HybridEP backend
# (--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep): Megatron-core itself and NeMo's
# Megatron-Bridge recipes, which set it (scripts/performance configs); the FSDP2 and DeepSpeed presets have none.
FLEX_DISPATCHER_FRAMEWORKS = ("megatron-core", "nemo")


def dispatcher_alternative(
    resolved: ResolvedScenario, headline: PlannedLayout | None
) -> dict[str, Any] | None:
    """Where `headline` (the layout the plan recommends) has light MoE layer passes on a dispatcher outside
    FUSED_HOST_PATH_DISPATCHERS, in a framework that offers HybridEP: the same layout estimated on HybridEP, and
    both estimates scaled by the median published run of their kind (the `moe-light` and `moe-light-hybridep`
    bands), with a sentence. None otherwise (dense, heavy or long-context passes, ep = 1, HybridEP already)."""
    fw = resolved.framework
    if headline is None or resolved.model.moe is None or headline.layout.ep <= 1:
        return None
    if (
        fw.moe_dispatcher in FUSED_HOST_PATH_DISPATCHERS
        or fw.name.split("+")[0] not in FLEX_DISPATCHER_FRAMEWORKS
    ):
        return None
    planned = headline.to_dict()
    layer_pass = planned_layer_pass(resolved.model, planned)
    band = _band(resolved, planned)
    if band is None or band.regime != "moe-light" or layer_pass is None:
        return None
    suggested = FUSED_HOST_PATH_DISPATCHERS[0]
    on_suggested = fw.with_(name=f"{fw.name}+{suggested}", moe_dispatcher=suggested)
    options = replace(resolved.estimate_options(), framework=on_suggested)
    try:
        est = estimate(
            resolved.model,
            resolved.cluster,
            headline.layout,
            resolved.seq_len,
            resolved.profile,
            options=options,
        )
    except SpecError:
        return None
    other_pass = estimate_layer_pass_seconds(est)
    other_band = band_for(
        accuracy_table(),
        resolved.model,
        resolved.seq_len,
        other_pass,
        suggested,
        resolved.cluster.gpu.compute_capability,
    )
    if other_band is None or other_band.regime != "moe-light-hybridep":
        return None
    out: dict[str, Any] = {
        "label": planned["label"],
        "current": _dispatcher_side(fw.moe_dispatcher, planned["step_time_s"], layer_pass, band),
        "suggested": _dispatcher_side(suggested, est.step.total_s, other_pass, other_band),
    }
    out["summary"] = _dispatcher_sentence(out)
    return out


def _dispatcher_side(
    dispatcher: str, step_time_s: float, layer_pass_s: float, band: AccuracyBand
) -> dict[str, Any]:
    """One dispatcher of the note: the layout's estimate on it and that estimate × its band's median run."""
    return {
        "dispatcher": dispatcher,
        "step_time_s": step_time_s,
        "layer_pass_ms": layer_pass_s * 1e3,
        "regime": band.regime,
        "runs": band.runs,
        "ratio_median": band.ratio_median,
        "typical_step_time_s": step_time_s * band.ratio_median,
    }


def _dispatcher_sentence(alt: dict[str, Any]) -> str:
    cur, sug = alt["current"], alt["suggested"]
    return (
        f"The {cur['runs']} published runs with light MoE passes on dispatchers other than HybridEP took a median "
        f"{cur['ratio_median']:.2f}× their estimate, about {cur['typical_step_time_s']:.3g} s a step for "
        f"{alt['label']} on {_dispatcher_label(cur['dispatcher'])}; the {sug['runs']} on HybridEP (NVIDIA's tuned "
        "recipes, most with the router and the dispatch in CUDA graphs) took a median "
        f"{sug['ratio_median']:.2f}×. The same layout on "
        f"HybridEP is estimated at {sug['step_time_s']:.3g} s, about {sug['typical_step_time_s']:.3g} s at that "
        "median. Budget on the first figure until a benchmark of your own shows the second; search with the "
        "HybridEP dispatcher (moe_dispatcher: hybridep) to plan with it."
    )


def _dispatcher_label(dispatcher: str) -> str:
    """The dispatcher as the builder's select names it (app.core.knobs: "all-to-all (NCCL)", "DeepEP")."""
    k = knob("moe_dispatcher")
    return dict(zip(k.choices, k.choice_labels, strict=True)).get(dispatcher, dispatcher)
