"""GPU nodes (agents), benchmark jobs with their progress events, and calibrated hardware profiles."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON as JSON_NULLABLE
from sqlalchemy import Column, Integer, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.models.base import created_at_field, json_field, timestamp_field, uuid_pk


class Node(SQLModel, table=True):
    __tablename__ = "node"
    id: uuid.UUID = uuid_pk()
    name: str = Field(max_length=200, unique=True)
    token_prefix: str = Field(max_length=32, index=True)
    token_hash: str = Field(max_length=128, unique=True)
    hostname: str = Field(default="", max_length=255)
    info: dict[str, Any] = json_field()  # GPUs, driver, torch / CUDA / NCCL versions
    created_at: datetime = created_at_field()
    registered_at: datetime | None = timestamp_field()
    last_heartbeat_at: datetime | None = timestamp_field()
    revoked_at: datetime | None = timestamp_field()


class BenchmarkJob(SQLModel, table=True):
    __tablename__ = "benchmark_job"
    id: uuid.UUID = uuid_pk()
    kind: str = Field(max_length=50)  # gemm | collectives | calibration
    params: dict[str, Any] = json_field()
    status: str = Field(
        default="queued", max_length=20, index=True
    )  # queued|running|succeeded|failed|cancelled
    target_node_id: uuid.UUID | None = Field(default=None, foreign_key="node.id")
    claimed_by: uuid.UUID | None = Field(default=None, foreign_key="node.id")
    lease_expires_at: datetime | None = timestamp_field(index=True)
    attempt: int = 0
    progress: float = 0.0
    eta_s: float | None = None
    log_tail: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    partial_rows: list[Any] = json_field(list)
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON_NULLABLE, nullable=True))
    error: str = Field(default="", max_length=5000)
    cancel_requested: bool = False
    created_by: uuid.UUID | None = Field(default=None, foreign_key="user_account.id")
    created_at: datetime = created_at_field()
    started_at: datetime | None = timestamp_field()
    finished_at: datetime | None = timestamp_field()


class JobEvent(SQLModel, table=True):
    """Progress events of a job, in order (the SSE stream replays them)."""

    __tablename__ = "job_event"
    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    job_id: uuid.UUID = Field(foreign_key="benchmark_job.id", index=True, ondelete="CASCADE")
    attempt: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    created_at: datetime = created_at_field()
    payload: dict[str, Any] = json_field()


class JobAttempt(SQLModel, table=True):
    """One attempt of a job on one node: its partial rows, log and outcome, kept apart from other attempts.

    A retry starts a new attempt with empty rows and log; the job's own `partial_rows`/`log_tail` always
    belong to its current `attempt`.
    """

    __tablename__ = "job_attempt"
    __table_args__ = (UniqueConstraint("job_id", "attempt", name="uq_job_attempt"),)
    id: uuid.UUID = uuid_pk()
    job_id: uuid.UUID = Field(foreign_key="benchmark_job.id", index=True, ondelete="CASCADE")
    attempt: int
    node_id: uuid.UUID | None = Field(default=None, foreign_key="node.id")
    status: str = Field(default="running", max_length=20)  # running|succeeded|failed|cancelled|lost
    partial_rows: list[Any] = json_field(list)
    log_tail: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    error: str = Field(default="", max_length=5000)
    started_at: datetime = created_at_field()
    finished_at: datetime | None = timestamp_field()


class CalibrationProfile(SQLModel, table=True):
    """A calibrated hardware profile: one version of a named profile (app.services.calibration)."""

    __tablename__ = "calibration_profile"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_calibration_profile"),)
    id: uuid.UUID = uuid_pk()
    name: str = Field(max_length=200, index=True)
    version: int = 1
    gpu_name: str = Field(default="", max_length=100)
    params: dict[str, Any] = json_field()
    report: dict[str, Any] = json_field()
    source_job_id: uuid.UUID | None = Field(default=None, foreign_key="benchmark_job.id")
    # the user the profile name belongs to (the owner of its first version, copied onto every later one); None
    # for names fitted before profiles had owners or by the CLI: only admins add versions to those
    owner_id: uuid.UUID | None = Field(
        default=None, foreign_key="user_account.id", index=True, ondelete="SET NULL"
    )
    created_at: datetime = created_at_field()
