"""Bodies of the node routes shared by the API and the pages."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.schemas.fields import JsonObject, SafeStr


class NodeCheck(BaseModel):
    job_id: uuid.UUID
    status: str
    created_at: datetime
    finished_at: datetime | None
    verdict: Literal["pass", "warn", "fail"] | None = Field(description="None until the check has results")
    gpu: str | None
    fabric: str | None
    failed: list[str] = Field(description="each failed check: measured against expected")


NODE_NAME_MAX = 200  # the node.name column (app.models.benchmarks)


MAX_ATTEMPT = 2**31 - 1  # benchmark_job.attempt is a 32-bit INTEGER column (PostgreSQL integer)


class NodeKey(BaseModel):
    """The id of a node (the first field of every view of one)."""

    id: uuid.UUID


class NodeBase(BaseModel):
    """A node's name, as an administrator creates it (NodeCreate) and as listed (NodePublic)."""

    name: SafeStr = Field(
        min_length=1, max_length=NODE_NAME_MAX, description="a unique name, e.g. the host name"
    )


class NodeCreate(NodeBase):
    pass


# NodeKey comes last among the bases so that `id` leads the serialised node (pydantic orders fields from the last
# base to the first)
class NodePublic(NodeBase, NodeKey):
    token_prefix: str
    hostname: str
    info: dict[str, Any]
    online: bool
    revoked: bool
    created_at: datetime
    registered_at: datetime | None
    last_heartbeat_at: datetime | None


class NodeCreated(NodePublic):
    token: str = Field(description="shown once: give it to the agent (`clusterplan agent --token …`)")


class AgentRegister(BaseModel):
    hostname: SafeStr = Field(max_length=255)
    info: JsonObject = Field(default_factory=dict, description="GPUs, driver, torch / CUDA / NCCL versions")


class AgentConfig(BaseModel):
    node_id: uuid.UUID
    name: str
    heartbeat_interval_s: float
    lease_s: float


class HeldRun(BaseModel):
    id: uuid.UUID
    attempt: int = Field(ge=1, le=MAX_ATTEMPT, description="the attempt number its claim returned")


class HeartbeatReport(BaseModel):
    jobs: list[HeldRun] = Field(
        default_factory=list,
        max_length=100,
        description="the runs this agent process holds; only their leases are renewed (a restarted agent "
        "holds none, so a run its predecessor left behind is requeued when its lease lapses)",
    )


class HeartbeatReply(BaseModel):
    cancel: list[uuid.UUID] = Field(description="running jobs of this node the server wants stopped")
    heartbeat_interval_s: float
    lease_s: float


class ProgressReport(BaseModel):
    attempt: int = Field(
        ge=1, le=MAX_ATTEMPT, description="the attempt number the claim returned (fencing token)"
    )
    events: list[JsonObject] = Field(default_factory=list, max_length=1000)


class ProgressReply(BaseModel):
    cancel: bool
    progress: float
    lease_expires_at: datetime | None


class CompleteReport(BaseModel):
    attempt: int = Field(ge=1, le=MAX_ATTEMPT)
    status: Literal["succeeded", "failed", "cancelled"]
    result: JsonObject | None = None
    error: str = Field(default="", max_length=5000)
