"""SQLModel tables. Importing this package registers every table on SQLModel.metadata (Alembic reads it)."""

from app.models.auth import ApiToken, UserAccount
from app.models.benchmarks import BenchmarkJob, CalibrationProfile, JobEvent, Node
from app.models.catalog import GPUEntry, InterconnectEntry, ModelEntry, PriceRow
from app.models.plans import Plan, PlanRevision

__all__ = [
    "ApiToken",
    "BenchmarkJob",
    "CalibrationProfile",
    "GPUEntry",
    "InterconnectEntry",
    "JobEvent",
    "ModelEntry",
    "Node",
    "Plan",
    "PlanRevision",
    "PriceRow",
    "UserAccount",
]
