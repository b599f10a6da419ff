"""Estimate service: scenario in, EstimateOut (or its dict) out. Shared by the API route and the CLI."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from sqlmodel import Session

from app.catalog import accuracy_table
from app.core.accuracy import applied_memory, band_for, estimate_layer_pass_seconds, memory_band
from app.core.errors import Problem, SpecError
from app.core.estimate import Estimate, estimate
from app.core.layout import stage_layer_counts
from app.schemas.estimate import AccuracyOut, EstimateOut, MemoryAccuracyOut
from app.schemas.scenario import Scenario
from app.services.scenario import ResolvedScenario, resolve_scenario


def parse_scenario(data: Any) -> Scenario:
    """Validate a scenario document; pydantic errors become one SpecError with every field path."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        problems = [
            Problem(
                ".".join(str(x) for x in err.get("loc", ())) or "scenario", str(err.get("msg", "invalid"))
            )
            for err in exc.errors()
        ]
        raise SpecError(problems) from None


def run(scenario: Scenario, session: Session | None = None) -> tuple[ResolvedScenario, Estimate]:
    resolved = resolve_scenario(scenario, session)
    est = estimate(
        resolved.model,
        resolved.cluster,
        resolved.layout,
        resolved.seq_len,
        resolved.profile,
        options=resolved.estimate_options(),
    )
    return resolved, est


def to_out(resolved: ResolvedScenario, est: Estimate) -> EstimateOut:
    d = est.to_dict()
    tps = est.step.tokens_per_s
    return EstimateOut(
        model=d["model"],
        gpu=d["gpu"],
        num_gpus=d["num_gpus"],
        fabric=resolved.cluster.fabric.name or "custom",
        framework=resolved.framework.name,
        layout=d["layout"],
        stage_layers=list(stage_layer_counts(est.model.num_layers, est.layout)),
        seq_len=d["seq_len"],
        params=d["params"],
        flops_per_token=d["flops_per_token"],
        memory=d["memory"],
        step=d["step"],
        time_to_train_s=(resolved.tokens / tps) if resolved.tokens and tps > 0 else None,
        accuracy=AccuracyOut.model_validate(band) if (band := accuracy_payload(est)) else None,
        memory_accuracy=MemoryAccuracyOut.model_validate(mem)
        if (mem := memory_accuracy_payload(est))
        else None,
        assumptions=d["assumptions"],
        warnings=list(resolved.warnings),
    )


def accuracy_payload(est: Estimate) -> dict[str, Any] | None:
    """The accuracy band of the estimate's kind of run, applied to its step time and throughput."""
    layer_pass = estimate_layer_pass_seconds(est)
    band = band_for(accuracy_table(), est.model, est.seq_len, layer_pass)
    if band is None:
        return None
    out = band.applied(est.step.total_s, est.step.tokens_per_s)
    out["layer_pass_s"] = layer_pass
    if band.regime == "moe-light":
        out["advice"] = (
            f"{layer_pass * 1e3:.1f} ms of GPU work per MoE layer pass: eager host dispatch may set the pace. "
            "Larger micro-batches, fewer local experts per GPU, fused router/permute kernels or CUDA graphs "
            "(Megatron-core --cuda-graph-scope) give the GPU more work per launch."
        )
    return out


def memory_accuracy_payload(est: Estimate) -> dict[str, Any] | None:
    """The peak-memory band applied to the most loaded stage, with whether its worst case still fits."""
    band = memory_band(accuracy_table())
    if band is None:
        return None
    return applied_memory(band, est.memory.most_loaded.total_bytes, est.memory.hbm_bytes)


def estimate_scenario(data: Any, session: Session | None = None) -> EstimateOut:
    resolved, est = run(parse_scenario(data) if not isinstance(data, Scenario) else data, session)
    return to_out(resolved, est)
