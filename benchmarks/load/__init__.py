"""Load tests: ClusterPlan's estimate and plan endpoints against a bare FastAPI endpoint, same server settings."""
