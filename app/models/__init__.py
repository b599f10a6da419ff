"""SQLModel tables. Importing this package registers every table on SQLModel.metadata (Alembic reads it)."""

from app.models.auth import ApiToken, LoginThrottle, UserAccount
from app.models.benchmarks import BenchmarkJob, CalibrationProfile, JobAttempt, JobEvent, Node
from app.models.catalog import GPUEntry, InterconnectEntry, ModelEntry, PriceRow
from app.models.plans import Plan, PlanInvite, PlanRevision, PlanShare

__all__ = [
    "ApiToken",
    "BenchmarkJob",
    "CalibrationProfile",
    "GPUEntry",
    "InterconnectEntry",
    "JobAttempt",
    "JobEvent",
    "LoginThrottle",
    "ModelEntry",
    "Node",
    "Plan",
    "PlanInvite",
    "PlanRevision",
    "PlanShare",
    "PriceRow",
    "UserAccount",
]
