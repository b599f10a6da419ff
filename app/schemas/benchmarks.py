"""Request and response bodies of benchmark jobs and their node acceptance reports."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.schemas.fields import JsonObject, SafeStr

NODE_REF_MAX = 200  # a node's name (node.name: max_length=200) or its UUID


class JobKey(BaseModel):
    """The id of a benchmark job (the first field of every view of one)."""

    id: uuid.UUID


JobKind = Literal["gemm", "collectives", "calibration", "check"]  # app.benchproto.kinds.JOB_KINDS


class BenchmarkBase(BaseModel):
    """What a job measures, as submitted (BenchmarkCreate) and as listed (BenchmarkSummary, BenchmarkPublic)."""

    kind: JobKind = Field(description="what to measure; check = a node acceptance check (needs params.gpu)")


class BenchmarkParams(BaseModel):
    """A job's runner parameters, as submitted and as shown with the job."""

    params: JsonObject = Field(
        default_factory=dict,
        description="runner parameters: sizes/dtypes/iters (GEMM); ops, min_bytes, max_bytes, step_factor, "
        "iters, warmup_iters, nproc, groups (collectives); profile_name, gpu, fabric (calibration); attention: "
        "true or {seq_lens, kernels, batch, heads, head_dim} to also time the fused attention kernels (GEMM, "
        "calibration)",
        examples=[{"ops": ["all_reduce"], "min_bytes": "1K", "max_bytes": "16M", "nproc": 8}],
    )


class BenchmarkCreate(BenchmarkParams, BenchmarkBase):
    target_node: SafeStr | None = Field(
        default=None, max_length=NODE_REF_MAX, description="node name or id; empty = any node"
    )


# JobKey comes last among the bases so that `id` leads the serialised job (pydantic orders fields from the last
# base to the first)
class BenchmarkSummary(BenchmarkBase, JobKey):
    status: str
    progress: float
    eta_s: float | None
    attempt: int
    target_node_id: uuid.UUID | None
    claimed_by: uuid.UUID | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class AttemptSummary(BaseModel):
    attempt: int
    status: str = Field(description="running | succeeded | failed | cancelled | lost (lease expired)")
    node_id: uuid.UUID | None
    rows: int = Field(description="result rows this attempt produced")
    error: str
    started_at: datetime
    finished_at: datetime | None


class BenchmarkAttempts(BenchmarkSummary):
    """A job's summary and every claim of it."""

    attempts: list[AttemptSummary] = Field(
        default_factory=list, description="every claim of the job, oldest first, each with its own rows"
    )


# the bases' order gives the serialised field order: the summary, the attempts, then the params
class BenchmarkPublic(BenchmarkParams, BenchmarkAttempts):
    log_tail: str
    partial_rows: list[dict[str, Any]]
    result: dict[str, Any] | None
    error: str
    lease_expires_at: datetime | None


class AcceptanceCheck(BaseModel):
    name: str
    unit: str
    measured: float
    expected: float
    ratio: float = Field(description="measured / expected (latency: expected / measured); 1 = as expected")
    verdict: Literal["pass", "warn", "fail"]
    pass_range: str
    fail_below: str
    source: str
    points: int


class AcceptanceReport(BaseModel):
    verdict: Literal["pass", "warn", "fail"] = Field(description="the worst verdict over every check")
    gpu: str
    fabric: str
    checks: list[AcceptanceCheck]
    notes: list[str]
