"""Request and response models of the cost, goodput and storage endpoints (shared by API and CLI).

Field constraints give 422 with the field named for out-of-range input (negative hours, utilisation outside
0-1 …). Defaults not shown here come from app.core (each with source and date, echoed in `assumptions`).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.goodput import FAIL_SLOW_DEFAULT_TEXT
from app.schemas.catalog import PriceAge, PriceDated, PriceItem, PriceKey
from app.schemas.estimate import AssumptionOut
from app.schemas.fields import JsonObject, SafeStr
from app.schemas.scenario import DtypeChoice

# price options one request compares: a price book holds tens of rows per GPU; 1,000 bounds one request's work
MAX_PRICE_OPTIONS = 1000
PricingModelFilter = Annotated[SafeStr, Field(max_length=100)]  # as PriceOptionIn.pricing_model


# The goodput and storage requests' whole-system parallel-filesystem bandwidth. At least 1 MB/s: below that a
# checkpoint write takes longer than any run (and a denormal bandwidth made the write time infinite).
ParallelFsGbPerS = Annotated[
    float | None,
    Field(
        ge=1e-3,
        le=1e6,
        description="whole-system parallel-filesystem bandwidth, GB/s; default: the larger of 100 GB/s and "
        "3.4 GB/s per compute node (Llama 3's Tectonic)",
    ),
]
StorageNodes = Annotated[
    int | None,
    Field(
        ge=1,
        le=100_000,
        description="parallel-filesystem storage nodes (servers or appliances); with "
        "parallel_fs_gb_per_s_per_storage_node, instead of parallel_fs_gb_per_s",
    ),
]
GbPerSPerStorageNode = Annotated[
    float | None,
    Field(
        gt=0, le=1e4, description="bandwidth of one storage node, GB/s (from its datasheet or a measurement)"
    ),
]


class StrictModel(BaseModel):
    """Base of the request bodies here: unknown fields refused, no NaN or Infinity in a float field."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class CostAssumptionOut(AssumptionOut):
    """An estimate's assumption (app.schemas.estimate.AssumptionOut) with the date of the default it took."""

    value: float | str
    date: str
    stale: bool = Field(
        default=False, description="a dated default older than its category's threshold (app.core.price_age)"
    )


class PriceOptionIn(StrictModel):
    """A cloud pricing option: a price-book row by id, or an inline price."""

    price_row_id: uuid.UUID | None = Field(None, description="id of a price_row (price book)")
    label: SafeStr | None = Field(None, max_length=200)
    usd_per_gpu_hour: float | None = Field(None, ge=0, le=1e6, description="inline price, USD per GPU-hour")
    pricing_model: SafeStr = Field("on-demand", max_length=100)
    commitment_months: float | None = Field(
        None, ge=0, le=120, description="minimum billed term; None → from model"
    )
    gpus_per_instance: int | None = Field(None, ge=1, le=1024)

    @model_validator(mode="after")
    def _one_source(self) -> PriceOptionIn:
        if self.price_row_id is None and self.usd_per_gpu_hour is None:
            raise ValueError("give price_row_id or usd_per_gpu_hour")
        return self


class PriceOptionOut(BaseModel):
    label: str
    price_id: str
    pricing_model: str
    term: Literal["on_demand", "reserved", "capacity_block", "spot"] = "on_demand"
    commitment_months: float = 0.0
    billing: str = Field(
        default="", description="hourly, or the committed term and how much of it the run leaves unused"
    )
    usd_per_gpu_hour: float
    price_date: str
    price_source: str
    stale: bool
    in_headline: bool = Field(
        default=False,
        description="one of the quotes the headline price is the median of (app.core.cost.headline_pool): the "
        "non-stale on-demand ones, or every on-demand one when all are stale",
    )
    total_usd: float
    breakdown: dict[str, float]
    billed_gpu_hours: float
    billed_hours: float
    commitment_exceeds_run: bool


class RunCostRequest(StrictModel):
    num_gpus: int | None = Field(None, ge=1, le=1_000_000, description="GPUs of the run (else from scenario)")
    scenario: JsonObject | None = Field(
        None,
        description="an estimator scenario (model, cluster, layout, training.tokens): GPU-hours from its step time",
    )
    gpu_hours: float | None = Field(
        None, gt=0, le=1e13, description="productive GPU-hours; or give params/tokens/mfu"
    )
    params: float | None = Field(None, ge=1, le=1e16, description="total parameters")
    active_params: float | None = Field(None, ge=1, le=1e16, description="MoE: parameters active per token")
    tokens: float | None = Field(None, gt=0, le=1e18)
    gpu: SafeStr | None = Field(
        None, max_length=100, description="catalog GPU: gives the peak FLOP/s and default price rows"
    )
    dtype: DtypeChoice = "bf16"  # the scenario's compute dtype (app.core.knobs)
    peak_tflops: float | None = Field(
        None, gt=0, le=1e6, description="dense peak TFLOP/s per GPU (overrides gpu)"
    )
    mfu: float | None = Field(None, gt=0, le=1)
    goodput: float = Field(1.0, gt=0, le=1)
    options: list[PriceOptionIn] = Field(
        default_factory=list, max_length=MAX_PRICE_OPTIONS, description="empty → price-book rows for the gpu"
    )
    pricing_models: list[PricingModelFilter] | None = Field(
        None, max_length=100, description="filter default rows by pricing model text"
    )


class RunCostResponse(BaseModel):
    productive_gpu_hours: float
    billed_gpu_hours: float
    wall_clock_hours: float
    total_flop: float | None
    options: list[PriceOptionOut]
    cheapest: str | None
    headline: dict[str, Any] | None = Field(
        default=None,
        description="the headline price of these options: the median of the non-stale on-demand quotes, with "
        "the quote's label and date and the cheapest and dearest beside it (app.core.cost.HeadlinePrice)",
    )
    assumptions: list[CostAssumptionOut]


class OnPremIn(StrictModel):
    nodes: int = Field(1, ge=1, le=100_000)
    gpus_per_node: int = Field(8, ge=1, le=72)
    server_capex_usd_per_node: float | None = Field(None, ge=0, le=1e9)
    network_capex_usd: float | None = Field(None, ge=0, le=1e12, description="from a network BOM")
    network_share: float | None = Field(None, ge=0, lt=1, description="share of server+network capex")
    fabric_tiers: int = Field(2, ge=1, le=3)
    storage_capex_usd: float | None = Field(None, ge=0, le=1e12)
    depreciation: Literal["straight_line", "economic"] = "straight_line"
    lifetime_years: float | None = Field(None, ge=0.5, le=20)
    economic_ooms_per_year: float | None = Field(None, ge=0, le=1)
    residual_fraction: float | None = Field(
        None,
        ge=0,
        le=1,
        description="resale value at end of life, share of capex; default: 10^(-0.14·lifetime)",
    )
    cost_of_capital: float | None = Field(None, ge=0, le=1)
    node_power_kw: float | None = Field(None, ge=0, le=1000)
    avg_draw_fraction: float | None = Field(None, ge=0, le=1)
    idle_draw_fraction: float | None = Field(None, ge=0, le=1)
    pue: float | None = Field(None, ge=1, le=5)
    usd_per_kwh: float | None = Field(None, ge=0, le=10)
    colo_usd_per_kw_month: float | None = Field(None, ge=0, le=1e5)
    maintenance_fraction_per_year: float | None = Field(None, ge=0, le=1)
    gpus_per_fte: float | None = Field(None, ge=1, le=1e6)
    usd_per_fte_year: float | None = Field(None, ge=0, le=1e8)
    software_usd_per_gpu_year: float | None = Field(None, ge=0, le=1e7)


class TcoRequest(StrictModel):
    onprem: OnPremIn = Field(default_factory=lambda: OnPremIn.model_validate({}))
    network_bom: JsonObject | None = Field(
        None,
        description="network bill of materials inputs (as POST /network/bom, e.g. {'fabric': 'ib-ndr-8x400'}); "
        "its cost becomes the network capex; nodes default to onprem.nodes",
    )
    fabric: SafeStr | None = Field(
        None,
        max_length=100,
        description="scale-out fabric preset priced by the network bill of materials (e.g. 'ib-ndr-8x400', "
        "'roce-8x400'); default: the GPU's reference fabric (app/catalog/network_prices.py)",
    )
    utilisation: float = Field(0.9, gt=0, le=1, description="share of hours the cluster runs jobs")
    gpu: SafeStr | None = Field(None, max_length=100, description="catalog GPU for default cloud price rows")
    options: list[PriceOptionIn] = Field(default_factory=list, max_length=MAX_PRICE_OPTIONS)
    pricing_models: list[PricingModelFilter] | None = Field(None, max_length=100)
    months: int | None = Field(None, ge=1, le=240, description="horizon of the cumulative-cost curve")


class BreakevenOut(BaseModel):
    label: str
    usd_per_gpu_hour: float
    breakeven_months: float | None
    breakeven_utilisation: float | None
    onprem_cheaper_at_utilisation: bool
    committed: bool = Field(
        default=False,
        description="a reservation paid for every hour: compared at full billing, no breakeven utilisation",
    )


class NetworkLineOut(BaseModel):
    """The on-prem network capex line and where it comes from."""

    method: Literal["bom", "share", "given"] = Field(
        description="bom: fat-tree bill of materials at dated unit prices; share: share of capex by fabric "
        "tiers (no price row for the fabric, or a share given); given: network_capex_usd from the request"
    )
    fabric: str = ""
    price_class: str = ""
    total_usd: float
    per_gpu_usd: float
    share_of_capex: float = Field(description="network / (servers + network) capex")
    tiers: int | None = None
    tiers_inferred: bool = False
    switches: int | None = None
    transceivers: int | None = None
    cables: int | None = None
    breakdown_usd: dict[str, float] = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict)
    no_price_row: str = Field(
        default="",
        description="the fabric's price class when app/catalog/network_prices.csv lacks a row it needs (e.g. "
        "'ib-hdr'): its network capex is the share by fabric tiers, not a priced bill of materials; '' otherwise",
    )
    missing_price_items: list[str] = Field(
        default_factory=list,
        description="the bill-of-materials items (switch, transceiver, cable) that class has no price row for",
    )
    note: str = ""


class TcoResponse(BaseModel):
    utilisation: float
    capex: dict[str, float]
    capex_total_usd: float
    annual: dict[str, float]
    annual_total_usd: float
    usd_per_gpu_hour: float
    breakevens: list[BreakevenOut]
    curves: dict[str, Any]
    assumptions: list[CostAssumptionOut]
    cloud_options: list[PriceOptionOut] = Field(default_factory=list)
    network: NetworkLineOut | None = None


class BreakevenResponse(BaseModel):
    utilisation: float
    capex_total_usd: float
    monthly_running_usd: float
    usd_per_gpu_hour: float
    breakevens: list[BreakevenOut]
    curves: dict[str, Any]
    assumptions: list[CostAssumptionOut]
    network: NetworkLineOut | None = None


class EpochRequest(StrictModel):
    chips: int = Field(ge=1, le=100_000_000)
    training_hours: float | None = Field(None, gt=0, le=1e6, description="else training_end − training_start")
    server_price_per_chip_usd: float = Field(gt=0, le=1e8)
    years_since_acquisition: float | None = Field(
        None, ge=0, le=50, description="value decay from acquisition to training start; else from the dates"
    )
    gpu: SafeStr | None = Field(None, max_length=100, description="catalog GPU: its release date")
    price_date: datetime.date | None = Field(None, description="when the server price was quoted")
    hardware_release_date: datetime.date | None = Field(None, description="overrides the GPU's catalog date")
    acquisition_date: datetime.date | None = Field(
        None, description="else the later of price_date and release + 90 days (Epoch AI)"
    )
    training_start: datetime.date | None = None
    training_end: datetime.date | None = None
    publication_date: datetime.date | None = Field(
        None, description="training start = publication − training time − 60 days (Epoch AI) when not given"
    )
    ooms_per_year: float = Field(0.14, ge=0, le=1)
    interconnect_fraction: float = Field(0.19, ge=0, lt=1)
    chip_tdp_w: float | None = Field(
        None, gt=0, le=1e5, description="else the gpu's TDP; H100's 700 W without one"
    )
    server_to_chip_power: float | None = Field(
        None, gt=0, le=100, description="else Epoch AI's ratio for the gpu (H100's without one)"
    )
    avg_draw_fraction: float = Field(0.75, ge=0, le=1)
    pue: float = Field(1.25, ge=1, le=5)
    usd_per_kwh: float = Field(0.0771, ge=0, le=10)
    cloud_usd_per_chip_hour: float | None = Field(None, ge=0, le=1e6)


class EpochResponse(BaseModel):
    amortized_hardware_energy_usd: float
    amortized_breakdown: dict[str, float]
    cloud_usd: float | None
    acquisition_usd: float
    chip_hours: float
    assumptions: list[CostAssumptionOut]


class SpotRequest(StrictModel):
    on_demand_usd_per_hour: float = Field(gt=0, le=1e7)
    spot_discount: float = Field(0.6, ge=0, lt=1)
    preemptions_per_day: float = Field(2.4, ge=0, le=1000)
    lost_work_hours: float | None = Field(
        None, ge=0, le=24 * 365, description="per preemption; None → half an interval"
    )
    checkpoint_interval_s: float = Field(3600.0, gt=0, le=1e8)
    notice_s: float = Field(120.0, ge=0, le=1e6)
    checkpoint_stall_s: float = Field(60.0, ge=0, le=1e6)
    restart_s: float = Field(1200.0, ge=0, le=1e7)
    reacquire_wait_s: float = Field(0.0, ge=0, le=1e8)
    billed_while_waiting_fraction: float = Field(
        0.0, ge=0, le=1, description="share of the fleet kept, and billed, while waiting for spot capacity"
    )
    checkpoint_on_notice: bool = Field(
        False,
        description="the job writes a checkpoint on the preemption notice (else it loses half an interval)",
    )
    target_net_savings: float | None = Field(None, gt=-1, lt=1, description="solve which input gives this")


class SpotInversionOut(BaseModel):
    target_net_savings: float
    # null where no value of that input, changed alone, reaches the target (the reason in `unreachable`)
    lost_hours_per_preemption: float | None
    preemptions_per_day: float | None
    spot_discount: float | None
    unreachable: list[str] = []


class SpotResponse(BaseModel):
    spot_usd_per_hour: float
    useful_fraction: float
    cost_per_useful_hour_spot: float | None  # None: no useful work left
    cost_per_useful_hour_on_demand: float
    net_savings: float | None
    lost_hours_per_preemption: float
    wall_slowdown: float | None
    breakdown_per_day: dict[str, float]
    inversion: SpotInversionOut | None = None
    assumptions: list[CostAssumptionOut]


class CheckpointIn(StrictModel):
    params: float = Field(ge=1, le=1e16, description="total parameters (MoE: all experts)")
    precision: Literal["bf16", "fp16", "fp8", "fp4", "fp32"] = "bf16"
    optimizer: Literal["adamw", "adam", "sgd_momentum", "adafactor", "none"] = "adamw"
    include_optimizer: bool = True
    format: Literal["safetensors", "torch_save"] = "safetensors"


class GoodputRequest(StrictModel):
    num_gpus: int | None = Field(None, ge=1, le=1_000_000, description="GPUs of the job (else from scenario)")
    scenario: JsonObject | None = Field(
        None, description="an estimator scenario: gives GPUs, checkpoint params, MFU and the run length"
    )
    gpus_per_node: int = Field(8, ge=1, le=72)
    preset: SafeStr | None = Field(
        None, max_length=200, description="failure rates from a published run (GET /goodput/presets)"
    )
    mtbf_gpu_hours: float | None = Field(
        None, ge=1e-3, le=1e12, description="per-GPU mean time between failures"
    )
    mtbf_node_hours: float | None = Field(None, ge=1e-3, le=1e12)
    mtbf_switch_hours: float | None = Field(None, ge=1e-3, le=1e12)
    num_switches: int | None = Field(None, ge=0, le=10_000_000)
    job_mtbf_hours: float | None = Field(None, ge=1e-3, le=1e9, description="overrides the component rates")
    checkpoint: CheckpointIn | None = None
    tier: Literal["local_nvme", "parallel_fs", "object_store"] = "parallel_fs"
    parallel_fs_gb_per_s: ParallelFsGbPerS = None
    parallel_fs_storage_nodes: StorageNodes = None
    parallel_fs_gb_per_s_per_storage_node: GbPerSPerStorageNode = None
    async_checkpoint: bool = False
    checkpoint_stall_s: float | None = Field(None, ge=0, le=1e6, description="overrides the computed stall")
    restart_s: float | None = Field(None, ge=0, le=1e7, description="overrides the computed restart time")
    interval_s: float | None = Field(None, ge=1.0, le=1e9)
    method: Literal["young", "daly"] = "daly"
    mfu: float | None = Field(None, gt=0, le=1)
    run_days: float | None = Field(
        None,
        gt=0,
        le=36_525,
        description="to report checkpoints and idle hours of the run (at most 100 years)",
    )
    fail_slow_slowdown: float | None = Field(
        None,
        ge=1,
        le=10,
        description="how many times slower the training steps run on average from fail-slows (slow GPUs, "
        f"congested links); unset: {FAIL_SLOW_DEFAULT_TEXT}; 1 switches it off",
    )

    @model_validator(mode="after")
    def _rates(self) -> GoodputRequest:
        if self.preset is None and self.job_mtbf_hours is None and self.mtbf_gpu_hours is None:
            raise ValueError("give preset, job_mtbf_hours or mtbf_gpu_hours")
        return self


class GoodputResponse(BaseModel):
    num_gpus: int
    job_mtbf_hours: float
    interruptions_per_day: float
    interruption_rate_per_hour: dict[str, float]
    checkpoint_bytes: float | None
    checkpoint_stall_s: float
    sync_stall_s: float | None
    async_stall_s: float | None
    restart_s: float
    restart_breakdown: dict[str, float]
    interval_s: float
    young_interval_s: float | None  # None when checkpoints cost nothing
    daly_interval_s: float | None
    goodput: float
    effective_mfu: float | None
    fail_slow_slowdown: float
    breakdown: dict[str, float]
    run: dict[str, float] | None
    assumptions: list[CostAssumptionOut]


class PresetOut(BaseModel):
    name: str
    num_gpus: int
    gpus_per_node: int
    duration_days: float
    interruptions: float
    job_mtbf_hours: float
    mtbf_gpu_hours: float | None
    mtbf_node_hours: float | None
    mtbf_switch_hours: float | None
    source: str
    date: str
    notes: str


class StorageRequest(StrictModel):
    scenario: JsonObject | None = Field(
        None,
        description="an estimator scenario: gives checkpoint params, nodes, tokens per step, step time, vocab",
    )
    checkpoint: CheckpointIn | None = None
    num_nodes: int | None = Field(None, ge=1, le=100_000)
    gpus_per_node: int = Field(8, ge=1, le=72)
    tokens_per_step: float | None = Field(None, gt=0, le=1e13, description="global batch in tokens")
    step_s: float | None = Field(None, ge=1e-6, le=1e7, description="step time (from the estimator)")
    vocab_size: int | None = Field(None, ge=1, le=100_000_000)
    slow_disk_fraction: float = Field(0.5, gt=0, le=1, description="one slow disk at this share of bandwidth")
    jitter_sigma: float = Field(0.1, ge=0, le=2)
    parallel_fs_gb_per_s: ParallelFsGbPerS = None
    parallel_fs_storage_nodes: StorageNodes = None
    parallel_fs_gb_per_s_per_storage_node: GbPerSPerStorageNode = None


class TierCheckpointOut(BaseModel):
    tier: str
    bandwidth_bytes_per_s: float
    write_s: float
    p99_write_s: float
    read_s: float
    sync_stall_s: float
    async_stall_s: float
    breakdown: dict[str, float]
    source: str
    date: str


class TierLoadOut(BaseModel):
    tier: str
    available_bytes_per_s: float
    load_s_per_step: float
    fraction_of_step: float | None  # None when the step time is unknown or the share is unbounded
    warn: bool


class StorageResponse(BaseModel):
    checkpoint_bytes: float
    checkpoint_breakdown: dict[str, float]
    bytes_per_param: float
    checkpoint_tiers: list[TierCheckpointOut]
    tokens_per_s: float
    bytes_per_token: int
    required_bytes_per_s: float
    data_tiers: list[TierLoadOut]
    warnings: list[str]
    assumptions: list[CostAssumptionOut]


# fields from the last base to the first (see app.schemas.catalog.PriceBase): id, what, how much, when, how old
class PriceBookRow(PriceAge, PriceDated, PriceItem, PriceKey):
    """A row of the price book the cost endpoints price from (GET /api/v1/cost/prices)."""
