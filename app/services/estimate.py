"""Estimate service: scenario in, EstimateOut (or its dict) out. Shared by the API route and the CLI.

Response cache. The estimate is a pure function of the validated scenario and the formulas, so the encoded
response (`compute_encoded`) is kept in a bounded, lock-guarded cachetools LRU (`CACHE_SIZE` entries) keyed
by the scenario's canonical JSON (sorted keys, every default filled in), the formula version and the
database. A response is stored only when nothing in it can change without a restart: the scenario names no
calibration profile (profiles are users' rows) and its model and GPU are inline specs or built-in catalog
entries that no user's row can replace (`app.services.catalog.is_clean_builtin`). The key therefore carries
no principal: nothing cached depends on who asks. Entries also carry the catalog generation, which moves on
every GPU/model/interconnect write in this process, and are ignored once it has moved. Hits and misses are
encoded the same way (pydantic's JSON encoding of EstimateOut, as FastAPI itself does), so they are
byte-identical. The API route (app/api/routes/estimate.py) answers hits on the event loop and computes misses
in the thread pool.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from sqlmodel import Session

import app as app_pkg
from app.catalog import accuracy_table
from app.core.accuracy import (
    AccuracyBand,
    applied_memory,
    band_for,
    estimate_layer_pass_seconds,
    memory_band,
    platform_caveat_of,
    totals_band,
)
from app.core.cost import on_wall_clock
from app.core.errors import Problem, SpecError
from app.core.estimate import Estimate, estimate
from app.core.layout import stage_layer_counts
from app.core.units import DAY, HOUR
from app.db import get_engine, get_read_engine
from app.schemas.estimate import AccuracyOut, EstimateOut, MemoryAccuracyOut
from app.schemas.scenario import Scenario
from app.services import catalog as catalog_svc
from app.services.counting_lru import CountingLRU
from app.services.plan_costs import plan_goodput
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
    compute_s = (resolved.tokens / tps) if resolved.tokens and tps > 0 else None
    wall = wall_clock_payload(resolved, est, compute_s)
    times = (compute_s, wall.get("wall_clock_time_to_train_s"))
    return EstimateOut(
        model=d["model"],
        mtp_layers=d["mtp_layers"],
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
        time_to_train_s=compute_s,
        **wall,
        accuracy=AccuracyOut.model_validate(band)
        if (band := accuracy_payload(est, resolved.framework.moe_dispatcher, times))
        else None,
        memory_accuracy=MemoryAccuracyOut.model_validate(mem)
        if (mem := memory_accuracy_payload(est))
        else None,
        assumptions=d["assumptions"],
        warnings=list(resolved.warnings),
    )


def wall_clock_payload(resolved: ResolvedScenario, est: Estimate, compute_s: float | None) -> dict[str, Any]:
    """Goodput for this cluster and model (the planning session's goodput model) and the time to train and
    GPU-hours it makes on the wall clock; empty without a time to train or when goodput cannot be evaluated."""
    if compute_s is None:
        return {}
    cluster = resolved.cluster
    try:
        res = plan_goodput(
            cluster.num_gpus,
            cluster.gpus_per_node,
            est.params_total,
            est.step.mfu,
            compute_s / DAY,
            resolved.fail_slow_slowdown,
        )
    except (SpecError, ValidationError, ValueError):
        return {}
    if not res.goodput > 0:
        return {}
    wall_s = on_wall_clock(compute_s, res.goodput)
    return {
        "goodput": res.goodput,
        "fail_slow_slowdown": res.fail_slow_slowdown,
        "wall_clock_time_to_train_s": wall_s,
        "wall_clock_gpu_hours": cluster.num_gpus * wall_s / HOUR,
    }


def time_to_train_payload(
    band: AccuracyBand, compute_s: float | None = None, wall_clock_s: float | None = None
) -> dict[str, Any]:
    """The time-to-train range a step band gives (app.core.accuracy.totals_band): its ratios, what they rest on
    and, where there is a time to train, that time at both ends: in seconds of compute and, where the goodput is
    known, on the wall clock (the basis the whole published runs' reported hours were compared on where they
    included failures)."""
    totals = totals_band(accuracy_table(), band.ratio_low, band.ratio_high)

    def ends(seconds: float | None) -> list[float] | None:
        return [seconds * totals.ratio_low, seconds * totals.ratio_high] if seconds else None

    return {
        "time_to_train_ratio_low": totals.ratio_low,
        "time_to_train_ratio_high": totals.ratio_high,
        "time_to_train_summary": totals.summary(),
        "time_to_train_range_s": ends(compute_s),
        "wall_clock_range_s": ends(wall_clock_s),
    }


def accuracy_payload(
    est: Estimate, dispatcher: str = "alltoall", times: tuple[float | None, float | None] = (None, None)
) -> dict[str, Any] | None:
    """The accuracy band of the estimate's kind of run, applied to its step time and throughput, with the
    time-to-train range it gives (`dispatcher`: the scenario's MoE token dispatcher, Framework.moe_dispatcher;
    `times`: the time to train in seconds of compute and on the wall clock, where there are)."""
    layer_pass = estimate_layer_pass_seconds(est)
    band = band_for(
        accuracy_table(), est.model, est.seq_len, layer_pass, dispatcher, est.cluster.gpu.compute_capability
    )
    if band is None:
        return None
    out = band.applied(est.step.total_s, est.step.tokens_per_s)
    out["layer_pass_s"] = layer_pass
    out.update(time_to_train_payload(band, *times))
    if band.regime == "moe-light":
        out["advice"] = (
            f"{layer_pass * 1e3:.1f} ms of GPU work per MoE layer pass: eager host dispatch may set the pace. "
            "Larger micro-batches, fewer local experts per GPU, fused router/permute kernels or CUDA graphs "
            "(Megatron-core --cuda-graph-scope) give the GPU more work per launch. On Megatron-core, NVIDIA's tuned "
            "recipes run the HybridEP dispatcher (moe_dispatcher: hybridep; published light passes on it took a "
            f"median {_median('moe-light-hybridep'):.2f}× their estimate, {_median('moe-light'):.2f}× on the "
            "others) and, with full-iteration CUDA graphs, the fused grouped expert GEMM (moe_fused_grouped_gemm)."
        )
    elif band.regime == "moe-light-hybridep":
        out["advice"] = (
            f"{layer_pass * 1e3:.1f} ms of GPU work per MoE layer pass on HybridEP: the published runs behind this "
            "band are NVIDIA's tuned recipes, most of them with the router and the dispatch preprocessing in CUDA "
            "graphs (Megatron-core --cuda-graph-scope moe_router moe_preprocess); 8 in 10 light passes on the "
            f"other dispatchers took up to {_light_high():.1f}× their estimate, with CUDA graphs or without."
        )
    if caveat := platform_caveat_text(band):
        out["platform_caveat"] = caveat
    return out


def platform_caveat_text(band: AccuracyBand) -> str | None:
    """Why an estimate quotes a platform caveat's runs as its band (app.core.accuracy.PLATFORM_CAVEATS): how
    published runs of its kind on its GPU generation fared; None for every other band."""
    caveat = platform_caveat_of(band)
    return caveat.sentence() if caveat else None


def _median(regime: str) -> float:
    """The median measured ÷ estimated step time of a regime's published runs (app/catalog/accuracy.json)."""
    return float(accuracy_table()["regimes"][regime]["ratio_median"])


def _light_high() -> float:
    """The high end of the moe-light band (runs on the other dispatchers), for the HybridEP advice."""
    return float(accuracy_table()["regimes"]["moe-light"]["ratio_high"])


def memory_accuracy_payload(est: Estimate) -> dict[str, Any] | None:
    """The peak-memory band applied to the most loaded stage, with whether its worst case still fits."""
    band = memory_band(accuracy_table())
    if band is None:
        return None
    return applied_memory(band, est.memory.most_loaded.total_bytes, est.memory.hbm_bytes)


def estimate_scenario(data: Any, session: Session | None = None) -> EstimateOut:
    resolved, est = run(parse_scenario(data) if not isinstance(data, Scenario) else data, session)
    return to_out(resolved, est)


CACHE_SIZE = 1024  # responses are ~7 KB: at most ~7 MB (docs/constants.md#estimate-response-cache)

CacheKey = tuple[Any, ...]


class ResponseCache(CountingLRU[tuple[int, bytes]]):
    """A thread-safe LRU of encoded responses, each stored with the catalog generation it was computed at."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        super().__init__(size)

    def get(self, key: CacheKey, generation: int) -> bytes | None:
        item = self._lookup(key, lambda stored: stored[0] == generation)
        return None if item is None else item[1]

    def put(self, key: CacheKey, generation: int, content: bytes) -> None:
        self._store(key, (generation, content))


response_cache = ResponseCache()


def canonical_json(body: Scenario) -> str:
    """The validated scenario as JSON with every default filled in and a fixed key order.

    Pydantic dumps model fields in declaration order, so only free-form objects (inline model, GPU or fabric
    specs) can arrive in another key order: those scenarios go through a sorted-keys dump instead.
    """
    inline = not isinstance(body.model, str) or not isinstance(body.cluster.gpu, str)
    if inline or isinstance(body.cluster.fabric, dict):
        return json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return body.model_dump_json()


def cache_key(body: Scenario) -> CacheKey:
    return (app_pkg.FORMULA_VERSION, get_engine().url, canonical_json(body))


def cacheable(body: Scenario, session: Session) -> bool:
    """No calibration profile, and model and GPU are inline or clean built-in catalog entries."""
    if body.profile:
        return False
    names = [("model", body.model), ("gpu", body.cluster.gpu)]
    return all(
        catalog_svc.is_clean_builtin(session, kind, name) for kind, name in names if isinstance(name, str)
    )


def encode(out: EstimateOut) -> bytes:
    return out.model_dump_json(by_alias=True).encode()


def cached_response(key: CacheKey) -> bytes | None:
    """The stored response for `key`, unless the catalog has been written since it was computed."""
    return response_cache.get(key, catalog_svc.catalog_generation())


def compute_encoded(body: Scenario) -> tuple[bytes, bool, int]:
    """Resolve and estimate (sync; the route runs it in the thread pool): the encoded response, whether it
    may be cached, and the catalog generation read before anything was resolved.

    The session is the read-only engine view (it writes nothing; on SQLite it never takes the write lock)
    and is opened and closed in this thread, so a cache hit needs no session at all.
    """
    generation = catalog_svc.catalog_generation()
    with Session(get_read_engine()) as session:
        may_cache = cacheable(body, session)
        resolved, est = run(body, session)
    return encode(to_out(resolved, est)), may_cache, generation


def store_response(key: CacheKey, content: bytes, may_cache: bool, generation: int) -> None:
    """Keep a computed response, if it may be cached and no catalog write happened while it was computed."""
    if may_cache and generation == catalog_svc.catalog_generation():
        response_cache.put(key, generation, content)
