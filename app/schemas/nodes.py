"""Bodies of the node routes shared by the API and the pages."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class NodeCheck(BaseModel):
    job_id: uuid.UUID
    status: str
    created_at: datetime
    finished_at: datetime | None
    verdict: Literal["pass", "warn", "fail"] | None = Field(description="None until the check has results")
    gpu: str | None
    fabric: str | None
    failed: list[str] = Field(description="each failed check: measured against expected")
