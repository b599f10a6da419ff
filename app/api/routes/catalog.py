"""/api/v1 catalog: GPUs, interconnects, model architectures and the price book.

Reads are public. Adding models and price rows, and editing or deleting one's own, needs plans:write. Specs are
returned in SI base units (`spec`) next to the display units the pages use (TFLOP/s, GiB, GB/s, µs).
"""

from __future__ import annotations

import csv
import io
import uuid
from datetime import date
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Response, status
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.deps import SessionDep
from app.api.envelope import ListEnvelope, Paging, paging
from app.auth.deps import Principal, require_scope
from app.core.attention import published_kernels
from app.core.errors import Problem, SpecError
from app.core.hardware import GPUSpec, InterconnectSpec
from app.core.model import MLASpec, ModelSpec, MoESpec, param_counts
from app.core.units import GB, TFLOP, US, GiB
from app.models.catalog import GPUEntry, InterconnectEntry, ModelEntry, PriceRow
from app.schemas.fields import CatalogName, FreeText, JsonObject, SafeStr
from app.services import catalog as catalog_service
from app.services.csv_safe import safe_record

router = APIRouter()

LIMITS = catalog_service.MODEL_LIMITS
MAX_GPUS_PER_UNIT = catalog_service.MAX_GPUS_PER_UNIT
MAX_PRICE_USD = catalog_service.MAX_PRICE_USD

WriteDep = Annotated[Principal, Depends(require_scope("plans:write"))]
PagingDep = Annotated[Paging, Depends(paging)]
NamePath = Annotated[str, Path(min_length=1, max_length=200, description="name or alias (case-insensitive)")]
# request bodies: unknown fields refused, no NaN or Infinity in a float field
REQUEST_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


# --- response models -----------------------------------------------------------------------------------------


class AttentionKernelPublic(BaseModel):
    kernel: str = Field(description="flash-attention-2 | cudnn")
    forward_tflops: float = Field(
        description="micro-benchmark forward TFLOP/s, long sequence, causal, head dim 128"
    )
    backward_tflops: float = Field(description="micro-benchmark backward TFLOP/s (2.5x the forward FLOPs)")
    training_share: float = Field(description="share of the micro-benchmark speed training reaches")
    used_by: list[str] = Field(description="attention backends that run this kernel on this GPU")
    source: str


class GPUPublic(BaseModel):
    name: str
    vendor: str
    form_factor: str
    builtin: bool
    aliases: list[str]
    peak_tflops: dict[str, float] = Field(description="dense peak TFLOP/s per dtype (10^12 FLOP/s)")
    measured_matmul_tflops: dict[str, float] = Field(description="best measured GEMM TFLOP/s per dtype")
    hbm_gib: float
    hbm_bandwidth_gb_per_s: float
    scaleup_bandwidth_gb_per_s: float = Field(description="per GPU, per direction")
    tdp_w: float
    scaleup_kind: str
    default_gpus_per_node: int
    nvls: bool
    notes: str = ""
    source: str
    date: str
    compute_capability: float = Field(
        default=0.0, description="CUDA compute capability; 0 = not an NVIDIA part"
    )
    attention_kernels: list[AttentionKernelPublic] = Field(
        default_factory=list,
        description="published fused-attention micro-benchmarks of this architecture (app.core.attention)",
    )
    spec: dict[str, Any] = Field(description="GPUSpec in SI base units")


class InterconnectPublic(BaseModel):
    name: str
    kind: str
    technology: str
    generation: str
    builtin: bool
    aliases: list[str]
    bandwidth_gb_per_s: float = Field(description="per GPU (scale-up) or per NIC (scale-out), per direction")
    latency_us: float
    domain_size: int
    supports_nvls: bool
    supports_sharp: bool
    source: str
    date: str
    spec: dict[str, Any] = Field(description="InterconnectSpec in SI base units")


class ModelPublic(BaseModel):
    name: str
    family: str
    builtin: bool
    aliases: list[str]
    attention: str
    is_moe: bool
    params: int = Field(description="parameters counted from the shape (app.core.model.param_counts)")
    active_params: int = Field(
        description="parameters touched per token (MoE: the routed top-k experts only)"
    )
    published_params: float | None = None
    published_active_params: float | None = None
    source: str
    date: str
    spec: dict[str, Any] = Field(description="ModelSpec fields")


class PricePublic(BaseModel):
    id: uuid.UUID
    category: str
    item: str
    vendor: str
    region: str
    pricing_model: str
    unit: str
    price_usd: float
    usd_per_gpu_hour: float | None
    gpu_name: str | None
    gpus_per_unit: int | None
    price_date: date
    source: str
    confidence: str
    includes: str
    notes: str
    builtin: bool
    owner_id: uuid.UUID | None = Field(None, description="the user who added the row (user rows only)")
    stale: bool = Field(
        description="older than its category's threshold (app.core.price_age; GPU cloud prices 6 months)"
    )
    age_days: int


# --- request models ------------------------------------------------------------------------------------------


class MoEIn(BaseModel):
    model_config = REQUEST_CONFIG
    num_experts: int = Field(ge=1, le=LIMITS["num_experts"])
    experts_per_token: int = Field(ge=1, le=LIMITS["num_experts"])
    expert_ffn_hidden_size: int = Field(ge=1, le=LIMITS["ffn_hidden_size"])
    num_shared_experts: int = Field(0, ge=0, le=LIMITS["num_experts"])
    shared_expert_ffn_hidden_size: int = Field(0, ge=0, le=LIMITS["ffn_hidden_size"])
    first_dense_layers: int = Field(0, ge=0, le=LIMITS["num_layers"])
    moe_layer_frequency: int = Field(1, ge=1, le=LIMITS["num_layers"])


class MLAIn(BaseModel):
    model_config = REQUEST_CONFIG
    q_lora_rank: int = Field(0, ge=0, le=LIMITS["hidden_size"])
    kv_lora_rank: int = Field(ge=1, le=LIMITS["hidden_size"])
    qk_nope_head_dim: int = Field(ge=1, le=LIMITS["head_dim"])
    qk_rope_head_dim: int = Field(ge=1, le=LIMITS["head_dim"])
    v_head_dim: int = Field(ge=1, le=LIMITS["head_dim"])


class ModelSpecIn(BaseModel):
    """A model architecture given inline (the fields of app.core.model.ModelSpec)."""

    model_config = REQUEST_CONFIG
    name: CatalogName
    num_layers: int = Field(ge=1, le=LIMITS["num_layers"])
    hidden_size: int = Field(ge=1, le=LIMITS["hidden_size"])
    num_attention_heads: int = Field(ge=1, le=LIMITS["num_attention_heads"])
    num_kv_heads: int | None = Field(
        None, ge=1, le=LIMITS["num_kv_heads"], description="defaults to num_attention_heads (MHA)"
    )
    ffn_hidden_size: int = Field(ge=1, le=LIMITS["ffn_hidden_size"])
    vocab_size: int = Field(ge=1, le=LIMITS["vocab_size"])
    activation: Literal["swiglu", "geglu", "gelu", "relu", "squared_relu"]
    tied_embeddings: bool = False
    head_dim: int = Field(0, ge=0, le=LIMITS["head_dim"])
    max_seq_len: int = Field(4096, ge=1, le=LIMITS["max_seq_len"])
    position_embedding: Literal["rope", "learned", "alibi", "none"] = "rope"
    norm: Literal["layernorm", "rmsnorm"] = "rmsnorm"
    attention_bias: bool = False
    attention_out_bias: bool = Field(
        True,
        description="with attention_bias: the output projection has a bias too (GPT-2 style; Qwen2: false)",
    )
    mlp_bias: bool = False
    moe: MoEIn | None = None
    mla: MLAIn | None = None
    sliding_window: int = Field(
        0, ge=0, le=LIMITS["max_seq_len"], description="sliding-window attention span in tokens (0 = none)"
    )
    global_attention_every: int = Field(
        0,
        ge=0,
        le=LIMITS["num_layers"],
        description="every k-th layer keeps full attention (0 = all windowed)",
    )
    hidden_dropout: float = Field(0.0, ge=0, lt=1)
    attention_dropout: float = Field(0.0, ge=0, lt=1)
    family: SafeStr = Field("", max_length=50)
    source: FreeText = Field("", max_length=2000)

    def to_spec(self) -> ModelSpec:
        data = self.model_dump()
        data["num_kv_heads"] = self.num_kv_heads or self.num_attention_heads
        data["moe"] = MoESpec(**data["moe"]) if data["moe"] else None
        data["mla"] = MLASpec(**data["mla"]) if data["mla"] else None
        return ModelSpec(**data)


class ModelCreate(BaseModel):
    """Either an inline spec (`spec`, or its fields at the top level) or a Hugging Face `hf_config`."""

    model_config = ConfigDict(allow_inf_nan=False)
    name: CatalogName | None = Field(None, description="name for an imported hf_config")
    hf_config: JsonObject | None = Field(None, description="a Hugging Face config.json, parsed")
    spec: ModelSpecIn | None = None

    @model_validator(mode="before")
    @classmethod
    def _inline_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and "spec" not in data and "hf_config" not in data and "num_layers" in data:
            return {"spec": data}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> ModelCreate:
        if (self.hf_config is None) == (self.spec is None):
            raise ValueError("give exactly one of `spec` (inline architecture) or `hf_config`")
        return self


class PriceCreate(BaseModel):
    model_config = REQUEST_CONFIG
    category: SafeStr = Field(min_length=1, max_length=50, examples=["cloud_gpu"])
    item: SafeStr = Field(min_length=1, max_length=200)
    vendor: SafeStr = Field("", max_length=100)
    region: SafeStr = Field("", max_length=100)
    pricing_model: SafeStr = Field("", max_length=100, examples=["on-demand"])
    unit: SafeStr = Field("", max_length=50, examples=["GPU-hour"])
    price_usd: float = Field(ge=0, le=MAX_PRICE_USD)
    usd_per_gpu_hour: float | None = Field(None, ge=0, le=MAX_PRICE_USD)
    gpu_name: SafeStr | None = Field(None, max_length=100, description="catalog GPU name or alias")
    gpus_per_unit: int | None = Field(None, ge=1, le=MAX_GPUS_PER_UNIT)
    price_date: date
    source: FreeText = Field(min_length=1, max_length=2000)
    confidence: SafeStr = Field("user", max_length=50)
    includes: FreeText = Field(min_length=1, max_length=500, description="what the price covers")
    notes: FreeText = Field("", max_length=2000)


class PriceUpdate(BaseModel):
    """A partial edit: omitted fields keep their value. Null clears the three columns that may be empty
    (usd_per_gpu_hour, gpu_name, gpus_per_unit); the others have no null (send "" to empty a text), so null there
    is a 422."""

    model_config = REQUEST_CONFIG
    # None = not sent (model_dump(exclude_unset=True)); a null sent for these fields is refused
    category: SafeStr = Field(None, min_length=1, max_length=50)  # type: ignore[assignment]
    item: SafeStr = Field(None, min_length=1, max_length=200)  # type: ignore[assignment]
    vendor: SafeStr = Field(None, max_length=100)  # type: ignore[assignment]
    region: SafeStr = Field(None, max_length=100)  # type: ignore[assignment]
    pricing_model: SafeStr = Field(None, max_length=100)  # type: ignore[assignment]
    unit: SafeStr = Field(None, max_length=50)  # type: ignore[assignment]
    price_usd: float = Field(None, ge=0, le=MAX_PRICE_USD)  # type: ignore[assignment]
    usd_per_gpu_hour: float | None = Field(None, ge=0, le=MAX_PRICE_USD)
    gpu_name: SafeStr | None = Field(None, max_length=100)
    gpus_per_unit: int | None = Field(None, ge=1, le=MAX_GPUS_PER_UNIT)
    price_date: date = Field(None)  # type: ignore[assignment]
    source: FreeText = Field(None, min_length=1, max_length=2000)  # type: ignore[assignment]
    confidence: SafeStr = Field(None, max_length=50)  # type: ignore[assignment]
    includes: FreeText = Field(None, min_length=1, max_length=500)  # type: ignore[assignment]
    notes: FreeText = Field(None, max_length=2000)  # type: ignore[assignment]


# --- conversions (SI → display units) ------------------------------------------------------------------------


def gpu_public(row: GPUEntry) -> GPUPublic:
    spec = GPUSpec.from_dict(row.spec)
    extra = catalog_service.catalog_extra("gpu", row.name)
    return GPUPublic(
        name=row.name,
        vendor=spec.vendor,
        form_factor=spec.form_factor,
        builtin=row.builtin,
        aliases=list(spec.aliases),
        peak_tflops={k: v / TFLOP for k, v in spec.peak_flops.items()},
        measured_matmul_tflops={k: v / TFLOP for k, v in spec.measured_matmul_flops.items()},
        hbm_gib=spec.hbm_bytes / GiB,
        hbm_bandwidth_gb_per_s=spec.hbm_bandwidth_bytes_per_s / GB,
        scaleup_bandwidth_gb_per_s=spec.scaleup_bandwidth_bytes_per_s / GB,
        tdp_w=spec.tdp_w,
        scaleup_kind=spec.scaleup_kind,
        default_gpus_per_node=spec.default_gpus_per_node,
        nvls=spec.nvls,
        notes=str(extra.get("notes", "")).strip(),
        source=row.source,
        date=row.source_date,
        compute_capability=spec.compute_capability,
        attention_kernels=[AttentionKernelPublic.model_validate(k) for k in published_kernels(spec)],
        spec=row.spec,
    )


def interconnect_public(row: InterconnectEntry) -> InterconnectPublic:
    spec = InterconnectSpec.from_dict(row.spec)
    return InterconnectPublic(
        name=row.name,
        kind=spec.kind,
        technology=spec.technology,
        generation=spec.generation,
        builtin=row.builtin,
        aliases=list(catalog_service.aliases_of("interconnect", row.name)),
        bandwidth_gb_per_s=spec.bandwidth_bytes_per_s / GB,
        latency_us=spec.latency_s / US,
        domain_size=spec.domain_size,
        supports_nvls=spec.supports_nvls,
        supports_sharp=spec.supports_sharp,
        source=row.source,
        date=row.source_date,
        spec=row.spec,
    )


def model_public(row: ModelEntry) -> ModelPublic:
    spec = ModelSpec.from_dict(row.spec)
    extra = catalog_service.catalog_extra("model", row.name) if row.builtin else {}
    counts = param_counts(spec)
    return ModelPublic(
        name=row.name,
        params=counts.total,
        active_params=counts.active,
        family=row.family,
        builtin=row.builtin,
        aliases=list(catalog_service.aliases_of("model", row.name)) if row.builtin else [],
        attention=spec.attention_kind,
        is_moe=spec.is_moe,
        published_params=extra.get("published_params"),
        published_active_params=extra.get("published_active_params"),
        source=row.source,
        date=catalog_service.catalog_date("model", row.name)
        if row.builtin
        else row.created_at.date().isoformat(),
        spec=row.spec,
    )


def price_public(row: PriceRow, today: date | None = None) -> PricePublic:
    today = today or date.today()
    return PricePublic(
        **row.model_dump(include=set(PricePublic.model_fields) - {"stale", "age_days"}),
        stale=catalog_service.is_stale(row, today),
        age_days=(today - row.price_date).days,
    )


def _forbidden(exc: PermissionError) -> HTTPException:
    return HTTPException(status_code=status.HTTP_403_FORBIDDEN, detail=str(exc))


def actor_of(principal: Principal) -> catalog_service.Actor:
    user_id = principal.user_id if isinstance(principal.user_id, uuid.UUID) else None
    return catalog_service.Actor(user_id=user_id, is_admin=principal.has("admin"))


# --- GPUs ----------------------------------------------------------------------------------------------------


@router.get(
    "/gpus",
    tags=["gpus"],
    operation_id="list_gpus",
    response_model=ListEnvelope[GPUPublic],
    summary="List accelerators",
)
def list_gpus(session: SessionDep, page: PagingDep) -> ListEnvelope[GPUPublic]:
    rows = catalog_service.list_gpus(session)
    data = [gpu_public(r) for r in rows[page.offset : page.offset + page.limit]]
    return ListEnvelope(data=data, count=len(rows))


@router.get(
    "/gpus/{name}", tags=["gpus"], operation_id="get_gpu", response_model=GPUPublic, summary="One accelerator"
)
def get_gpu(name: NamePath, session: SessionDep) -> GPUPublic:
    return gpu_public(catalog_service.get_gpu_entry(session, name))


# --- interconnects -------------------------------------------------------------------------------------------


@router.get(
    "/interconnects",
    tags=["interconnects"],
    operation_id="list_interconnects",
    response_model=ListEnvelope[InterconnectPublic],
    summary="List link and NIC technologies",
)
def list_interconnects(
    session: SessionDep,
    page: PagingDep,
    kind: Annotated[
        Literal["scale_up", "scale_out"] | None, Query(description="scale_up or scale_out")
    ] = None,
) -> ListEnvelope[InterconnectPublic]:
    rows = [r for r in catalog_service.list_interconnects(session) if kind is None or r.kind == kind]
    data = [interconnect_public(r) for r in rows[page.offset : page.offset + page.limit]]
    return ListEnvelope(data=data, count=len(rows))


@router.get(
    "/interconnects/{name}",
    tags=["interconnects"],
    operation_id="get_interconnect",
    response_model=InterconnectPublic,
    summary="One link or NIC technology",
)
def get_interconnect(name: NamePath, session: SessionDep) -> InterconnectPublic:
    return interconnect_public(catalog_service.get_interconnect_entry(session, name))


# --- models --------------------------------------------------------------------------------------------------


@router.get(
    "/models",
    tags=["models"],
    operation_id="list_models",
    response_model=ListEnvelope[ModelPublic],
    summary="List model architectures",
)
def list_models(
    session: SessionDep,
    page: PagingDep,
    q: Annotated[str | None, Query(max_length=100, description="search name, family or alias")] = None,
    family: Annotated[str | None, Query(max_length=50)] = None,
) -> ListEnvelope[ModelPublic]:
    rows = catalog_service.list_models(session, q, family)
    data = [model_public(r) for r in rows[page.offset : page.offset + page.limit]]
    return ListEnvelope(data=data, count=len(rows))


@router.get(
    "/models/{name}",
    tags=["models"],
    operation_id="get_model",
    response_model=ModelPublic,
    summary="One model",
)
def get_model(name: NamePath, session: SessionDep) -> ModelPublic:
    return model_public(catalog_service.get_model_entry(session, name))


@router.post(
    "/models",
    tags=["models"],
    operation_id="create_model",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelPublic,
    summary="Add a model from an inline spec or a Hugging Face config.json",
)
def create_model(
    body: ModelCreate, session: SessionDep, principal: WriteDep, response: Response
) -> ModelPublic:
    owner = actor_of(principal).user_id
    if body.hf_config is not None:
        try:
            row = catalog_service.add_model_from_hf(session, body.hf_config, body.name or "", owner_id=owner)
        except SpecError as exc:  # point each problem at the config key inside the request body
            raise SpecError(
                [p if p.field == "name" else Problem(f"hf_config.{p.field}", p.message) for p in exc.problems]
            ) from None
    else:
        assert body.spec is not None
        row = catalog_service.add_model(session, body.spec.to_spec(), owner_id=owner)
    response.headers["Location"] = f"/api/v1/models/{quote(row.name, safe='')}"
    return model_public(row)


@router.delete(
    "/models/{name}",
    tags=["models"],
    operation_id="delete_model",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a model you added (built-in models are read-only)",
)
def delete_model(name: NamePath, session: SessionDep, principal: WriteDep) -> Response:
    try:
        catalog_service.delete_model(session, name, actor_of(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# --- price book ----------------------------------------------------------------------------------------------


@router.get(
    "/prices",
    tags=["prices"],
    operation_id="list_prices",
    response_model=ListEnvelope[PricePublic],
    summary="List price rows (dated, sourced, with what each price includes)",
)
def list_prices(
    session: SessionDep,
    page: PagingDep,
    category: Annotated[str | None, Query(max_length=50, examples=["cloud_gpu"])] = None,
    vendor: Annotated[str | None, Query(max_length=100, description="substring, case-insensitive")] = None,
    gpu: Annotated[str | None, Query(max_length=100, description="GPU name or alias")] = None,
    pricing_model: Annotated[str | None, Query(max_length=100, description="substring, e.g. spot")] = None,
    builtin: Annotated[
        bool | None, Query(description="only built-in (true) or only user rows (false)")
    ] = None,
) -> ListEnvelope[PricePublic]:
    rows, total = catalog_service.list_price_rows(
        session, category, vendor, gpu, pricing_model, builtin, offset=page.offset, limit=page.limit
    )
    today = date.today()
    return ListEnvelope(data=[price_public(r, today) for r in rows], count=total)


PRICE_CSV_COLUMNS = (
    "id",
    "category",
    "item",
    "vendor",
    "region",
    "pricing_model",
    "unit",
    "price_usd",
    "usd_per_gpu_hour",
    "gpu_name",
    "gpus_per_unit",
    "price_date",
    "age_days",
    "stale",
    "confidence",
    "includes",
    "source",
    "notes",
    "builtin",
)


@router.get(
    "/prices/export.csv",
    tags=["prices"],
    operation_id="export_prices_csv",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/csv": {}}, "description": "the filtered price book as CSV"}},
    summary="The price book as CSV (same filters as list_prices, no paging)",
)
def export_prices_csv(
    session: SessionDep,
    category: Annotated[str | None, Query(max_length=50)] = None,
    vendor: Annotated[str | None, Query(max_length=100)] = None,
    gpu: Annotated[str | None, Query(max_length=100)] = None,
    pricing_model: Annotated[str | None, Query(max_length=100)] = None,
    builtin: Annotated[bool | None, Query()] = None,
) -> Response:
    rows, _ = catalog_service.list_price_rows(session, category, vendor, gpu, pricing_model, builtin)
    today = date.today()
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=PRICE_CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(safe_record(price_public(row, today).model_dump(mode="json")))
    return Response(
        buffer.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="clusterplan-prices-{today.isoformat()}.csv"'},
    )


@router.get(
    "/prices/{price_id}",
    tags=["prices"],
    operation_id="get_price",
    response_model=PricePublic,
    summary="One price row",
)
def get_price(price_id: uuid.UUID, session: SessionDep) -> PricePublic:
    return price_public(catalog_service.get_price_row(session, price_id))


@router.post(
    "/prices",
    tags=["prices"],
    operation_id="create_price",
    status_code=status.HTTP_201_CREATED,
    response_model=PricePublic,
    summary="Add a price row of your own",
)
def create_price(
    body: PriceCreate, session: SessionDep, principal: WriteDep, response: Response
) -> PricePublic:
    row = catalog_service.add_price_row(session, body.model_dump(), owner_id=actor_of(principal).user_id)
    response.headers["Location"] = f"/api/v1/prices/{row.id}"
    return price_public(row)


@router.patch(
    "/prices/{price_id}",
    tags=["prices"],
    operation_id="update_price",
    response_model=PricePublic,
    summary="Edit a price row you added (built-in rows are read-only)",
)
def update_price(
    price_id: uuid.UUID, body: PriceUpdate, session: SessionDep, principal: WriteDep
) -> PricePublic:
    try:
        row = catalog_service.update_price_row(
            session, price_id, body.model_dump(exclude_unset=True), actor_of(principal)
        )
    except PermissionError as exc:
        raise _forbidden(exc) from None
    return price_public(row)


@router.delete(
    "/prices/{price_id}",
    tags=["prices"],
    operation_id="delete_price",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a price row you added (built-in rows are read-only)",
)
def delete_price(price_id: uuid.UUID, session: SessionDep, principal: WriteDep) -> Response:
    try:
        catalog_service.delete_price_row(session, price_id, actor_of(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None
    return Response(status_code=status.HTTP_204_NO_CONTENT)
