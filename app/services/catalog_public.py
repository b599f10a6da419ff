"""Catalog rows as the API, the pages and the CLI show them (app.schemas.catalog bodies)."""

from __future__ import annotations

import uuid
from datetime import date

from app.auth.deps import Principal
from app.core.attention import published_kernels
from app.core.hardware import GPUSpec, InterconnectSpec
from app.core.model import ModelSpec, param_counts
from app.core.units import GB, TFLOP, US, GiB
from app.models.catalog import GPUEntry, InterconnectEntry, ModelEntry, PriceRow
from app.schemas.catalog import (
    AttentionKernelPublic,
    GPUPublic,
    InterconnectPublic,
    ModelPublic,
    PricePublic,
)
from app.services import catalog as catalog_service


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


def actor_of(principal: Principal) -> catalog_service.Actor:
    user_id = principal.user_id if isinstance(principal.user_id, uuid.UUID) else None
    return catalog_service.Actor(user_id=user_id, is_admin=principal.has("admin"))


def price_viewer(principal: Principal) -> catalog_service.Actor:
    """Whose price rows the caller sees and is quoted from (catalog_service.price_visibility): their user's own
    rows with a credential that may read that user's plans (plans:read), every row as an administrator; an
    anonymous caller, a node, or a token without plans:read sees the built-in rows only."""
    actor = actor_of(principal)
    if not principal.has("plans:read"):
        actor = catalog_service.Actor(is_admin=actor.is_admin)
    return actor
