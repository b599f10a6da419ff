"""How far a step-time estimate is from what published runs of the same kind measured.

Every estimate is a point; its trustworthiness depends on the kind of run. The estimator was developed on the
rows of the shared training-run set (time MAPE ≈ 5 %), but runs it was not developed on show larger errors, and
they differ by kind: dense models at ordinary context lengths, dense models at long context (attention- and
context-parallel-bound), and mixture-of-experts models (host overhead, grouped GEMMs and all-to-all make them
slower than their FLOPs suggest). `AccuracyBand` holds, per kind ("regime"), the spread of

    ratio = measured step time / estimated step time   (= estimated speed / measured speed)

over replayed published runs, and turns it into a range around a new estimate: "runs like this one took between
`ratio_low` and `ratio_high` times the estimate" (the 10th and 90th percentiles; the extremes are kept too).

The bands are computed by `app.validation.accuracy` from the replayed CSVs (training_runs_heldout.csv and
training_runs_final_check.csv: runs outside the development set; the development set's own figures are kept
beside them for comparison) and stored in app/catalog/accuracy.json, which a test keeps in step with the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from app.core.model import ModelSpec, param_counts

# Sequences longer than this are "long context": attention dominates the FLOPs (for a 7B model at 16K tokens
# the s² attention term is a third of them: 12·L·h·s against 6·N per token), and context parallelism is needed
LONG_CONTEXT_TOKENS = 16384
# percentiles of the measured/estimated ratio quoted as the band
BAND_PERCENTILES = (10.0, 90.0)
# fewer runs than this outside the development set: the band also takes the development set's runs
MIN_UNSEEN_RUNS = 5
# layout comparisons (pairs of published runs of one model, system and batch that differ in layout): fewer than this
# outside the development set and the ranking resolution also takes the development set's pairs
MIN_UNSEEN_PAIRS = 30
# the ranking resolution is this percentile of the comparisons' folded errors: "8 in 10 comparisons were off by
# less", the same 8 in 10 as the bands
RANKING_PERCENTILE = 80.0

# A MoE layer pass (forward and backward of one micro-batch through one layer) with less GPU work than this risks
# being host-bound in eager PyTorch: the CPU issues ~30 Transformer Engine module calls per pass (QKV, attention,
# projection, router, two grouped linears, permutes, forward and backward) at ~100 µs each on Grace and ~15-40 µs
# on x86 (TransformerEngine issue #2053, a TE Linear's CPU time), the router another 31-72 small kernels (Megatron-LM
# DeepSeek-V3 GB200 write-up), and a device-to-host sync for the tokens per expert stops it from running ahead:
# ~3-10 ms of host time per pass. Passes with less than about twice that of GPU work are the "light" MoE regime;
# its band is kept apart because published runs in it scatter far wider (docs/validation.md, "Accuracy bands").
MOE_LIGHT_LAYER_PASS_S = 0.020
# Light passes on HybridEP (Megatron-core's flex dispatcher for NVL72 racks) are kept apart from the other light
# passes: the published HybridEP runs are NVIDIA recipes (Megatron-Bridge 26.02 scripts/performance/configs, the
# MoE model zoo's GB200/GB300 rows), 7 of the 10 light ones stating CUDA graphs of the router and the dispatch
# preprocessing, mostly of the attention too (--cuda-graph-scope), which take that host work off the critical
# path; their unexplained time per pass is −2.3 to +3.3 ms, against +0.4 to +16.5 ms for Megatron-Bridge's recipes
# on the alltoall dispatcher (docs/validation.md, "Accuracy bands"). DeepEP runs are not among them: the MoE model
# zoo's and NeMo Automodel's DeepEP rows scatter as widely as alltoall's. The split is chosen on these runs.
FUSED_HOST_PATH_DISPATCHERS = ("hybridep",)

REGIMES: dict[str, str] = {
    "dense": f"dense transformer, sequence ≤ {LONG_CONTEXT_TOKENS:,} tokens",
    "dense-long-context": f"dense transformer, sequence > {LONG_CONTEXT_TOKENS:,} tokens",
    "moe": f"mixture-of-experts transformer with at least {MOE_LIGHT_LAYER_PASS_S * 1e3:g} ms of GPU work per layer pass",
    "moe-light": (
        f"mixture-of-experts transformer with under {MOE_LIGHT_LAYER_PASS_S * 1e3:g} ms of GPU work per layer pass, "
        "where host dispatch may not keep up"
    ),
    "moe-light-hybridep": (
        f"mixture-of-experts transformer with under {MOE_LIGHT_LAYER_PASS_S * 1e3:g} ms of GPU work per layer pass "
        "on the HybridEP dispatcher (NVIDIA's tuned recipes, most with the router and dispatch in CUDA graphs)"
    ),
    # attention dominates a long-context MoE step as it does a dense one (its expert FLOPs per token are the
    # active experts only), so its error follows the attention kernel, not the expert dispatch
    "moe-long-context": f"mixture-of-experts transformer, sequence > {LONG_CONTEXT_TOKENS:,} tokens",
}
# the regime whose layout comparisons a regime's ranking resolution uses (a comparison may straddle light/heavy)
RANKING_FAMILY: dict[str, str] = {"moe-light": "moe", "moe-light-hybridep": "moe", "moe-long-context": "moe"}
# step components that are GPU work of the layers (the rest: pipeline bubble, DP/ZeRO traffic, optimizer, offload)
LAYER_WORK_COMPONENTS = ("forward_compute", "backward_compute", "recompute", "tp_comm", "cp_comm", "ep_comm")


def layer_pass_seconds(breakdown: Mapping[str, Any], layers_per_stage: Any, microbatches: Any) -> Any:
    """GPU work of one layer pass (forward + backward + recompute of one micro-batch through one layer, with its
    exposed TP/CP/EP communication) from a step breakdown of the bottleneck stage. Scalars give a float; numpy
    columns (the planner's) give a column."""
    work = sum(np.asarray(breakdown.get(k, 0.0), dtype=float) for k in LAYER_WORK_COMPONENTS)
    passes = np.maximum(
        np.asarray(layers_per_stage, dtype=float) * np.asarray(microbatches, dtype=float), 1e-12
    )
    out = work / passes
    return float(out) if np.ndim(out) == 0 else out


def accuracy_regime(
    model: ModelSpec, seq_len: int, layer_pass_s: float | None = None, dispatcher: str = "alltoall"
) -> str:
    """The kind of run an estimate belongs to, for its accuracy band. A MoE estimate at long context is
    "moe-long-context"; otherwise one whose GPU work per layer pass is known and under MOE_LIGHT_LAYER_PASS_S is
    "moe-light", or "moe-light-hybridep" on that dispatcher (`dispatcher`: Framework.moe_dispatcher)."""
    if model.moe is not None:
        if seq_len > LONG_CONTEXT_TOKENS:
            return "moe-long-context"
        if layer_pass_s is None or layer_pass_s >= MOE_LIGHT_LAYER_PASS_S:
            return "moe"
        return "moe-light-hybridep" if dispatcher in FUSED_HOST_PATH_DISPATCHERS else "moe-light"
    return "dense-long-context" if seq_len > LONG_CONTEXT_TOKENS else "dense"


def estimate_layer_pass_seconds(est: Any) -> float:
    """layer_pass_seconds of an app.core.estimate.Estimate."""
    layout = est.layout
    return layer_pass_seconds(est.step.breakdown, est.model.num_layers / layout.pp, layout.num_microbatches)


def ratio_from_speed_error(speed_error_pct: float) -> float:
    """measured step time / estimated step time for a run whose estimated speed was off by speed_error_pct
    (estimated speed / measured speed − 1, in per cent)."""
    return 1.0 + speed_error_pct / 100.0


def ratio_stats(ratios: Iterable[float]) -> dict[str, Any]:
    """Spread of measured/estimated step-time ratios: count, MAPE of the speed, percentiles, extremes."""
    values = np.asarray([r for r in ratios if np.isfinite(r) and r > 0], dtype=float)
    if values.size == 0:
        return {"runs": 0}
    low, high = np.percentile(values, BAND_PERCENTILES)
    return {
        "runs": int(values.size),
        "mape_pct": round(float(np.mean(np.abs(values - 1.0))) * 100, 2),
        "ratio_low": round(float(low), 4),
        "ratio_median": round(float(np.median(values)), 4),
        "ratio_high": round(float(high), 4),
        "ratio_min": round(float(values.min()), 4),
        "ratio_max": round(float(values.max()), 4),
    }


def comparison_stats(errors: Iterable[float]) -> dict[str, Any]:
    """Spread of layout-comparison errors, each a folded ratio ≥ 1 (one run's measured/estimated step time over
    the other's, or its inverse): pairs, median, RANKING_PERCENTILE-th percentile (the resolution) and largest, in
    per cent."""
    values = np.asarray([e for e in errors if np.isfinite(e) and e >= 1.0], dtype=float)
    if values.size == 0:
        return {"pairs": 0}
    pct = (values - 1.0) * 100
    return {
        "pairs": int(values.size),
        "median_pct": round(float(np.median(pct)), 2),
        "resolution_pct": round(float(np.percentile(pct, RANKING_PERCENTILE)), 2),
        "max_pct": round(float(pct.max()), 2),
    }


@dataclass(frozen=True)
class RankingResolution:
    """How well the estimator orders two layouts of one run: of `pairs` published comparisons (two runs of one
    model on one system and batch, different layouts), 8 in 10 had the estimated step-time ratio within
    `resolution_pct` of the measured one. Layouts whose estimates are closer than that to the best cannot be told
    apart by the estimate: measure them."""

    pairs: int
    basis: str
    median_pct: float
    resolution_pct: float
    max_pct: float

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> RankingResolution:
        return cls(
            pairs=int(record["pairs"]),
            basis=str(record["basis"]),
            median_pct=float(record["median_pct"]),
            resolution_pct=float(record["resolution_pct"]),
            max_pct=float(record["max_pct"]),
        )

    def close_to(self, best: float, value: float) -> bool:
        """Whether `value` (a step time or cost, lower is better) is within the resolution of `best`."""
        return value <= best * (1.0 + self.resolution_pct / 100.0)

    def summary(self, close: int | None = None, listed: int | None = None) -> str:
        text = (
            f"Ranking resolution ±{self.resolution_pct:.0f} %: of {self.pairs:,} published comparisons of two layouts "
            f"of one run ({self.basis}), 8 in 10 had the estimated speed ratio within {self.resolution_pct:.0f} % of "
            f"the measured one (median {self.median_pct:.0f} %)."
        )
        if close is not None and close > 1:
            which = f"All {close} listed layouts are" if close == listed else f"The first {close} layouts are"
            text += f" {which} within it of the best: the estimate cannot tell them apart, so benchmark them."
        elif close == 1 and listed and listed > 1:
            text += " The best layout is ahead of the next by more than that."
        return text

    def comparison_note(self, what: str, fastest: float, slowest: float) -> str:
        """Whether two estimated speeds of layouts of one run (`what`: "Llama-3-70B on 64 × H100-SXM") are further
        apart than the estimator can resolve."""
        gap = (fastest / slowest - 1.0) * 100 if slowest > 0 else float("inf")
        head = (
            f"{what}: the fastest estimate is {gap:.1f} % ahead of the slowest; the ranking resolution for this kind "
            f"of run is ±{self.resolution_pct:.0f} % ({self.pairs:,} published layout comparisons, 8 in 10 within it)."
        )
        if gap <= self.resolution_pct:
            return (
                head
                + " Within it the estimate cannot tell these layouts apart: benchmark them before choosing."
            )
        return head + " The gap is wider than the estimator usually misses a layout comparison by."

    def applied(self, best: float, values: Sequence[float]) -> dict[str, Any]:
        """The resolution over one ranking: which of `values` (ranked, lower is better) are within it of `best`."""
        close = [self.close_to(best, v) for v in values]
        out = asdict(self)
        out["close_to_best"] = sum(close)
        out["summary"] = self.summary(sum(close), len(close))
        out["flags"] = close
        return out


def ranking_resolution(table: Mapping[str, Any], model: ModelSpec, seq_len: int) -> RankingResolution | None:
    """The ranking resolution of the estimate's kind of run, else of all kinds together, from a table in the
    app/catalog/accuracy.json format (None when it has no layout comparisons)."""
    return ranking_resolution_of(table, accuracy_regime(model, seq_len))


def ranking_resolution_of(table: Mapping[str, Any], regime: str | None) -> RankingResolution | None:
    """The ranking resolution of a named regime (light MoE → MoE), else of all kinds together."""
    ranking = table.get("ranking") or {}
    family = RANKING_FAMILY.get(regime or "", regime or "")
    record = (ranking.get("regimes") or {}).get(family) or ranking.get("all")
    if not record or not record.get("pairs"):
        return None
    return RankingResolution.from_record(record)


@dataclass(frozen=True)
class AccuracyBand:
    regime: str
    description: str
    basis: str  # which runs the band is computed from
    runs: int
    mape_pct: float
    ratio_low: float
    ratio_median: float
    ratio_high: float
    ratio_min: float
    ratio_max: float
    development_runs: int
    development_mape_pct: float | None

    @classmethod
    def from_record(cls, regime: str, record: Mapping[str, Any]) -> AccuracyBand:
        dev = record.get("development") or {}
        return cls(
            regime=regime,
            description=REGIMES.get(regime, regime),
            basis=str(record["basis"]),
            runs=int(record["runs"]),
            mape_pct=float(record["mape_pct"]),
            ratio_low=float(record["ratio_low"]),
            ratio_median=float(record["ratio_median"]),
            ratio_high=float(record["ratio_high"]),
            ratio_min=float(record["ratio_min"]),
            ratio_max=float(record["ratio_max"]),
            development_runs=int(dev.get("runs", 0)),
            development_mape_pct=dev.get("mape_pct"),
        )

    def applied(self, step_time_s: float, tokens_per_s: float) -> dict[str, Any]:
        """The band around one estimate: step-time and throughput ranges that runs of this kind fell in."""
        out = asdict(self)
        out["step_time_range_s"] = [step_time_s * self.ratio_low, step_time_s * self.ratio_high]
        out["tokens_per_s_range"] = [tokens_per_s / self.ratio_high, tokens_per_s / self.ratio_low]
        out["summary"] = self.summary()
        return out

    def summary(self) -> str:
        lo, hi = (self.ratio_low - 1) * 100, (self.ratio_high - 1) * 100
        return (
            f"Of {self.runs} published runs of this kind ({self.description}) {self.basis}, 8 in 10 measured a "
            f"step time between {lo:+.0f} % and {hi:+.0f} % of their estimate; {median_clause(self.ratio_median)}; "
            f"mean speed error {self.mape_pct:.0f} %."
        )


def median_clause(ratio_median: float) -> str:
    """Where the band's middle lies (measured ÷ estimated step time of the median run), in words: a regime whose
    runs mostly took longer than estimated says so beside its range, so a budget is not read off the edge."""
    pct = (ratio_median - 1) * 100
    if abs(pct) < 0.5:
        return "the median run took as long as estimated"
    return f"the median run took {abs(pct):.0f} % {'longer' if pct > 0 else 'less'} than estimated"


@dataclass(frozen=True)
class PlatformCaveat:
    """Published runs of one kind of model on one GPU generation that took consistently longer (or shorter) than
    estimated. Estimates of that kind quote those runs as their band (`band`: measured ÷ estimated step time, as
    every band) and say why, beside the same sizes on the generation before it (`reference_*`: 8 in 10 runs
    between low and high). Not a correction: the point estimate stays the model's."""

    band: AccuracyBand
    min_compute_capability: float
    reference_compute_capability: float  # the generation compared with: [this, min_compute_capability)
    reference_name: str
    min_params: float
    dense_only: bool
    reference_runs: int
    reference_low: float
    reference_high: float
    evidence: str

    def covers_model(self, params_total: float, moe: bool) -> bool:
        return params_total >= self.min_params and not (moe and self.dense_only)

    def applies(self, compute_capability: float, params_total: float, moe: bool) -> bool:
        return compute_capability >= self.min_compute_capability and self.covers_model(params_total, moe)

    def sentence(self) -> str:
        b = self.band
        return (
            f"The {b.runs} published runs of {b.description} ({self.evidence}) took a median "
            f"{b.ratio_median:.2f}× their estimated step time, where the {self.reference_runs} runs of these sizes "
            f"on {self.reference_name} took {self.reference_low:.2f}–{self.reference_high:.2f}×: the estimator "
            "misses something of this platform (docs/validation.md, 'Platform caveats'), so the range above is "
            "these runs' and the estimate is likely optimistic by about that much."
        )


# Dense models of 300B parameters and more on Blackwell (compute capability 10.x: B200, B300, GB200, GB300): every
# file of published runs that has them found them slower than estimated (MLPerf Training v5.0-v5.1 Llama 3.1 405B
# on GB200, GB300 and B200, +8 to +20 %; NVIDIA's dgxc-benchmarking Nemotron-4 340B and Llama 3.1 405B on GB200,
# 1.15-1.40x; Megatron-Bridge 25.11-26.08 Llama 3.1 405B on GB200, GB300 and B300, 0.94-1.17x), while the runs of these
# sizes on H100 and H200 sit around their estimates; smaller dense models on Blackwell scatter around theirs
# (Llama 3 70B 0.72-1.14x, Llama 3.1 8B 0.87-1.14x). The figures are app.validation.accuracy.platform_ratios over
# all the training-run validation files (tests/data/training_runs*.csv), which tests/validation/
# test_platform_caveats.py recomputes; the size threshold lies between the sizes measured (70B and 340B), where the
# evidence changes, not at a fitted value (docs/constants.md#platform-caveat-blackwell).
BLACKWELL_LARGE_DENSE = PlatformCaveat(
    band=AccuracyBand(
        regime="dense-blackwell-300b",
        description="dense models of 300B parameters and more on Blackwell GPUs",
        basis="on this GPU generation, in every validation file",
        runs=47,
        mape_pct=16.1,
        ratio_low=1.00,
        ratio_median=1.16,
        ratio_high=1.31,
        ratio_min=0.94,
        ratio_max=1.40,
        development_runs=0,
        development_mape_pct=None,
    ),
    min_compute_capability=10.0,
    reference_compute_capability=9.0,
    reference_name="H100 and H200",
    min_params=300e9,
    dense_only=True,
    reference_runs=39,
    reference_low=0.94,
    reference_high=1.11,
    evidence="MLPerf Training, NVIDIA's benchmark recipes and Megatron-Bridge on B200, GB200 and GB300",
)
PLATFORM_CAVEATS: tuple[PlatformCaveat, ...] = (BLACKWELL_LARGE_DENSE,)


def platform_caveat_of(band: AccuracyBand) -> PlatformCaveat | None:
    """The caveat whose runs `band` is (band_for returns a caveat's band in place of its regime's), or None."""
    return next((c for c in PLATFORM_CAVEATS if c.band.regime == band.regime), None)


def platform_caveats(compute_capability: float, model: ModelSpec) -> list[PlatformCaveat]:
    """The caveats that apply to an estimate of `model` on a GPU of `compute_capability`."""
    total, moe = float(param_counts(model).total), model.moe is not None
    return [c for c in PLATFORM_CAVEATS if c.applies(compute_capability, total, moe)]


@dataclass(frozen=True)
class TotalsBand:
    """The range a time to train or a GPU-hours figure is quoted with: the step-time band of its kind of run,
    widened by what whole published pre-training runs took against the planner's prediction (the `whole_runs`
    record of the table: reported ÷ predicted GPU-hours of the planner's best layout, with goodput where the
    reported figure includes failures and restarts; app.validation.training_totals). A whole run adds what a step
    estimate cannot see: the layout that was run, restarts, evaluation and checkpoint pauses, slow nodes. With
    fewer than MIN_UNSEEN_RUNS whole runs the step band stands alone."""

    ratio_low: float
    ratio_high: float
    whole_runs: int  # 0: the step band alone
    # the median reported ÷ predicted GPU-hours of those runs (1.0 without them): said, not applied
    whole_runs_median: float = 1.0

    def summary(self) -> str:
        lo, hi = (self.ratio_low - 1) * 100, (self.ratio_high - 1) * 100
        if not self.whole_runs:
            return f"Time to train and GPU-hours follow the step-time band ({lo:+.0f} % to {hi:+.0f} %)."
        typical = (self.whole_runs_median - 1) * 100
        more = "more" if typical >= 0 else "fewer"
        return (
            f"Time to train and GPU-hours: {lo:+.0f} % to {hi:+.0f} %, the step-time band widened by "
            f"{self.whole_runs} whole published pre-training runs, whose reported GPU-hours were 8 in 10 within "
            f"that range of the planner's prediction for them; the median run took {abs(typical):.0f} % {more} "
            "GPU-hours than predicted (docs/validation.md, 'Whole runs')."
        )


def totals_band(table: Mapping[str, Any], step_low: float, step_high: float) -> TotalsBand:
    """The time-to-train / GPU-hours range for an estimate whose step-time band is [step_low, step_high]
    (TotalsBand)."""
    whole = table.get("whole_runs") or {}
    runs = int(whole.get("runs", 0))
    if runs < MIN_UNSEEN_RUNS:
        return TotalsBand(step_low, step_high, 0)
    low = min(step_low, float(whole["ratio_low"]))
    high = max(step_high, float(whole["ratio_high"]))
    return TotalsBand(low, high, runs, float(whole.get("ratio_median", 1.0)))


MEMORY_DESCRIPTION = "peak memory per GPU"


def memory_band(table: Mapping[str, Any]) -> AccuracyBand | None:
    """The band of measured ÷ estimated peak memory per GPU (all kinds of run together: memory readings are few)."""
    record = table.get("memory")
    if not record or not record.get("runs"):
        return None
    return replace(AccuracyBand.from_record("memory", record), description=MEMORY_DESCRIPTION)


def applied_memory(band: AccuracyBand, peak_bytes: float, hbm_bytes: float) -> dict[str, Any]:
    """The memory band around one estimate's most loaded stage, and whether its upper end still fits in HBM."""
    lo, hi = (band.ratio_low - 1) * 100, (band.ratio_high - 1) * 100
    worst = peak_bytes * band.ratio_max
    return {
        "runs": band.runs,
        "basis": band.basis,
        "mape_pct": band.mape_pct,
        "ratio_low": band.ratio_low,
        "ratio_high": band.ratio_high,
        "ratio_max": band.ratio_max,
        "peak_range_bytes": [peak_bytes * band.ratio_low, peak_bytes * band.ratio_high],
        "fits_at_worst": bool(worst <= hbm_bytes),
        "summary": (
            f"Of {band.runs} published peak-memory readings ({band.basis}), 8 in 10 were between {lo:+.0f} % and "
            f"{hi:+.0f} % of their estimate (largest {(band.ratio_max - 1) * 100:+.0f} %)."
        ),
    }


def band_for(
    table: Mapping[str, Any],
    model: ModelSpec,
    seq_len: int,
    layer_pass_s: float | None = None,
    dispatcher: str = "alltoall",
    compute_capability: float = 0.0,
) -> AccuracyBand | None:
    """The band of the regime an estimate falls in, from a table in the app/catalog/accuracy.json format
    (`layer_pass_s`: GPU work per layer pass, which splits MoE estimates, unknown → "moe"; `dispatcher`: the MoE
    token dispatcher, Framework.moe_dispatcher); a dense estimate on a GPU of `compute_capability` that a platform
    caveat covers quotes the caveat's runs instead (PLATFORM_CAVEATS)."""
    regime = accuracy_regime(model, seq_len, layer_pass_s, dispatcher)
    if regime == "dense":
        covered = platform_caveats(compute_capability, model)
        if covered:
            return covered[0].band
    record = (table.get("regimes") or {}).get(regime)
    if not record or not record.get("runs"):
        return None
    return AccuracyBand.from_record(regime, record)


# Collective estimates (app.core.network.collective_time) are banded too, from the published nccl-tests style rows
# of tests/data/network (app.validation.collectives): by whether the collective stays inside one scale-up domain
# (NVLink, PCIe, xGMI) or crosses the scale-out network, and by size. 64 MiB is where the validation splits small
# from large messages: below it latency, protocol and channel choice decide the time, above it the links'
# bandwidth (docs/validation_collectives.md).
COLLECTIVE_LARGE_BYTES = 64 * 2**20
COLLECTIVE_REGIMES: dict[str, str] = {
    "scale-up-small": "collectives inside one scale-up domain, messages under 64 MiB",
    "scale-up-large": "collectives inside one scale-up domain, messages of 64 MiB and more",
    "scale-out-small": "collectives across scale-up domains, messages under 64 MiB",
    "scale-out-large": "collectives across scale-up domains, messages of 64 MiB and more",
}


def collective_regime(domains: int, message_bytes: float) -> str:
    """The band a collective over `domains` scale-up domains (CollectiveEstimate.nodes) of `message_bytes` falls in."""
    where = "scale-up" if domains <= 1 else "scale-out"
    return f"{where}-{'large' if message_bytes >= COLLECTIVE_LARGE_BYTES else 'small'}"


def collective_band(table: Mapping[str, Any], domains: int, message_bytes: float) -> AccuracyBand | None:
    """The band of measured ÷ estimated collective time for this kind of collective, from a table in the
    app/catalog/accuracy.json format (its `collectives` record; None when it has none)."""
    regime = collective_regime(domains, message_bytes)
    record = ((table.get("collectives") or {}).get("regimes") or {}).get(regime)
    if not record or not record.get("runs"):
        return None
    return replace(AccuracyBand.from_record(regime, record), description=COLLECTIVE_REGIMES[regime])


def applied_collective(band: AccuracyBand, time_s: float) -> dict[str, Any]:
    """The band around one collective estimate: the time range published measurements of its kind fell in."""
    lo, hi = (band.ratio_low - 1) * 100, (band.ratio_high - 1) * 100
    return {
        "regime": band.regime,
        "runs": band.runs,
        "basis": band.basis,
        "mape_pct": band.mape_pct,
        "ratio_low": band.ratio_low,
        "ratio_high": band.ratio_high,
        "time_range_s": [time_s * band.ratio_low, time_s * band.ratio_high],
        "summary": (
            f"Of {band.runs} published measurements of {band.description} ({band.basis}), 8 in 10 measured a "
            f"time between {lo:+.0f} % and {hi:+.0f} % of their estimate; mean error {band.mape_pct:.0f} %."
        ),
    }
