"""ClusterPlan: cluster capacity and cost planning for LLM training."""

__version__ = "0.1.0"
# Bumped whenever a formula in app/core changes its results; exported with every plan.
FORMULA_VERSION = "2026.11.1"
