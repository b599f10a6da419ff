"""Request and response bodies of the network endpoints: collectives, fabrics, scaling claims and bills of materials."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.network import (
    ALGORITHMS,
    COLLECTIVE_OPS,
    PROTOCOLS,
)
from app.schemas.fields import CatalogRef, JsonObject, SafeStr
from app.schemas.scenario import MAX_PARALLEL, ClusterIn, Scenario

# requests carry no NaN or Infinity (app.schemas.fields), unknown fields refused
NETWORK_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
NAME_MAX = 100  # op, algorithm and protocol names: the longest, 'reduce_scatter', has 14 characters
PROFILE_REF_MAX = 200  # a calibration profile's name, 'name@version' or id, as the planner's `profile`
MAX_GPUS_PER_NODE = 576  # as the scenario's cluster.gpus_per_node (an NVL576 rack as one node)
MAX_FABRICS = 32  # fabrics compared in one scaling request: the catalog has about a dozen presets
# oversubscription per switch tier: BomIn allows 3 tiers; a longer list gets the service's message
MAX_TIERS = 8


class SweepIn(BaseModel):
    """nccl-tests style sweep: -b min_bytes -e max_bytes -f factor."""

    model_config = NETWORK_CONFIG
    min_bytes: float = Field(ge=1, description="first size (bytes)")
    max_bytes: float = Field(ge=1, le=2**40, description="last size (bytes), inclusive")
    factor: float = Field(default=2.0, gt=1.0, le=1024, description="multiply the size by this each step")


class CollectiveIn(BaseModel):
    model_config = NETWORK_CONFIG
    op: SafeStr = Field(
        max_length=NAME_MAX,
        description=f"one of {', '.join(COLLECTIVE_OPS)} (nccl-tests names like allreduce accepted)",
    )
    message_bytes: float | None = Field(
        default=None, ge=0, description="message size in bytes, nccl-tests convention (total buffer)"
    )
    sweep: SweepIn | None = Field(default=None, description="a size sweep instead of one message_bytes")
    cluster: ClusterIn
    # a communicator spans at most every GPU: 2^20, as the scenario's parallel sizes
    ranks: int | None = Field(
        default=None, ge=1, le=MAX_PARALLEL, description="ranks in the communicator; default: every GPU"
    )
    ranks_per_node: int | None = Field(
        default=None,
        ge=1,
        le=MAX_GPUS_PER_NODE,
        description="ranks per node; default: min(ranks, GPUs per node)",
    )
    algorithm: SafeStr | None = Field(
        default=None, max_length=NAME_MAX, description=f"force one of {', '.join(ALGORITHMS)} (NCCL_ALGO)"
    )
    protocol: SafeStr | None = Field(
        default=None, max_length=NAME_MAX, description=f"force one of {', '.join(PROTOCOLS)} (NCCL_PROTO)"
    )
    nvls: bool | None = Field(default=None, description="override NVLS availability (default: the GPU's)")
    profile: SafeStr | None = Field(
        default=None,
        max_length=PROFILE_REF_MAX,
        description="calibration profile name/id whose α/β replace defaults",
    )
    params: JsonObject | None = Field(
        default=None, description="NetworkParams fields overriding the defaults (SI units)"
    )


class CandidateOut(BaseModel):
    algorithm: str
    protocol: str
    time_us: float


class CollectiveAccuracyOut(BaseModel):
    regime: str = Field(description="scale-up or scale-out, messages under 64 MiB (small) or from it (large)")
    runs: int = Field(description="published measurements of this kind the band is computed from")
    basis: str
    mape_pct: float = Field(
        description="mean |measured ÷ estimated time − 1| of those measurements, in per cent"
    )
    ratio_low: float = Field(description="10th percentile of measured ÷ estimated time")
    ratio_high: float = Field(description="90th percentile of measured ÷ estimated time")
    time_range_us: list[float] = Field(description="the estimate times ratio_low and ratio_high")
    summary: str


class CollectiveOut(BaseModel):
    op: str
    message_bytes: float
    ranks: int
    ranks_per_node: int
    nodes: int
    time_us: float
    algbw_gbps: float | None
    busbw_gbps: float | None
    algorithm: str
    protocol: str
    tier: str
    bottleneck: str
    breakdown_us: dict[str, float] = Field(description="launch + latency + transfer = time_us")
    candidates: list[CandidateOut]
    accuracy: CollectiveAccuracyOut | None = Field(
        default=None,
        description="how far published measurements of this kind of collective were from their estimates "
        "(app/catalog/accuracy.json); none with a calibrated profile or parameter overrides (the band measured the "
        "published defaults) or for a collective that needs no communication",
    )


class CollectiveResponse(BaseModel):
    cluster: str
    fabric: str
    params: str
    results: list[CollectiveOut]
    assumptions: list[str]


class FabricOut(BaseModel):
    name: str
    aliases: list[str]
    transport: str
    nics_per_node: int
    nic_gbps: float
    topology: str
    tiers: int = Field(description="fat-tree tiers; 0 = inferred from the node count and switch radix")
    oversubscription: list[float]
    switch_radix: int
    hop_latency_us: float
    base_latency_us: float
    sharp: bool
    congestion_derate: float
    routing: str = Field(
        description="adaptive (packets spread over all uplinks) or ecmp (static per-flow hash)"
    )
    qps_per_connection: int
    placement: str = Field(description="contiguous (a job packed leaf by leaf) or scattered")
    source: str
    notes: str


class FabricOverrides(BaseModel):
    """Stated assumptions applied on top of every fabric in a scaling request."""

    model_config = NETWORK_CONFIG
    congestion_derate: float | None = Field(default=None, gt=0, le=1)
    nics_per_node: int | None = Field(default=None, ge=1, le=64)
    base_latency_us: float | None = Field(default=None, gt=0, le=100_000)
    hop_latency_us: float | None = Field(default=None, ge=0, le=100_000)


class ClaimIn(BaseModel):
    """A claimed scaling efficiency to explain: which fabric value would make the model reproduce it."""

    model_config = NETWORK_CONFIG
    fabric: CatalogRef = Field(description="one of the request's fabrics (name as given)")
    gpus: int = Field(ge=1, le=MAX_PARALLEL)  # 2^20 GPUs, as the scenario's parallel sizes
    efficiency: float = Field(gt=0, le=1.5)
    relative_to: CatalogRef | None = Field(
        default=None,
        description="another fabric of the request: the claim is then a throughput ratio at the same GPU count "
        "(e.g. 18/43 for '18 days on InfiniBand vs 43 on RoCE') instead of a scaling efficiency",
    )


class ScalingIn(BaseModel):
    model_config = NETWORK_CONFIG
    scenario: Scenario
    # 2^20 GPUs at most, as the scenario's parallel sizes
    gpu_counts: list[Annotated[int, Field(le=MAX_PARALLEL)]] = Field(
        min_length=1, max_length=64, description="GPU counts to evaluate"
    )
    fabrics: list[CatalogRef | JsonObject] | None = Field(
        default=None,
        max_length=MAX_FABRICS,
        description="fabric presets or inline FabricSpec objects; default: the scenario's fabric",
    )
    mode: Literal["weak", "strong"] = "weak"
    baseline_gpus: int | None = Field(default=None, le=MAX_PARALLEL)  # as gpu_counts
    overrides: FabricOverrides | None = None
    claims: list[ClaimIn] = Field(default_factory=list, max_length=8)
    profile: SafeStr | None = Field(default=None, max_length=PROFILE_REF_MAX)


class RequiredOut(BaseModel):
    fabric: str
    relative_to: str | None = None
    knob: str
    target_gpus: int
    target_efficiency: float
    value: float | None
    unit: str
    predicted_at_default: float
    note: str


class ClaimVerdictOut(BaseModel):
    """A claim judged against the model (app.core.claims): reproduced, explained or unreproducible."""

    fabric: str
    relative_to: str | None = None
    gpus: int
    claimed: float
    modelled: float | None = Field(description="the model's figure for the claim, on its fabric as given")
    gap_pct: float | None = Field(description="claimed ÷ modelled − 1, per cent")
    tolerance_pct: float = Field(
        description="the median error of the estimator's published comparisons of two setups of one run: a claim "
        "within it of the model's figure is reproduced"
    )
    verdict: Literal["reproduced", "explained", "unreproducible"]
    reason: str


class ScalingResponse(BaseModel):
    model: str
    gpu: str
    mode: str
    baseline_gpus: int
    tokens: float | None
    series: list[dict[str, Any]]
    required: list[RequiredOut]
    verdicts: list[ClaimVerdictOut] = Field(default_factory=list)
    assumptions: list[str]


class PricesIn(BaseModel):
    model_config = NETWORK_CONFIG
    switch_usd: float | None = Field(default=None, ge=0)
    transceiver_usd: float | None = Field(default=None, ge=0)
    cable_usd: float | None = Field(default=None, ge=0)
    nic_usd: float | None = Field(default=None, ge=0)


class BomIn(BaseModel):
    model_config = NETWORK_CONFIG
    nodes: int = Field(ge=1, le=100_000)
    fabric: CatalogRef | None = Field(
        default=None, description="preset supplying rails, radix, tiers, oversubscription"
    )
    rails: int | None = Field(
        default=None, ge=1, le=64, description="NICs per node (default 8 or the preset's)"
    )
    gpus_per_node: int = Field(default=8, ge=1, le=576)
    switch_radix: int | None = Field(default=None, ge=4, le=1024)
    tiers: int | None = Field(default=None, ge=1, le=3)
    oversubscription: list[float] | None = Field(
        default=None, max_length=MAX_TIERS, description="per tier, leaf first; 1 = non-blocking"
    )
    rail_optimized: bool | None = None
    node_links_optical: bool = True
    prices: PricesIn | None = None
    price_rows: bool = Field(default=True, description="take unit prices from the price book where not given")
