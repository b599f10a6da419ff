"""Benchmark runner: GEMM sweeps and collective sweeps (nccl-tests semantics) on one node or many.

torch is imported only inside the modules that run measurements (`gemm`, `collectives`, `environment`),
never at package import, so the CLI, the agent and the importers work without it. The web app never
imports this package's torch modules.
"""

from __future__ import annotations

# Bump whenever the measurement method changes (shapes, flush, timing, reductions), as mamf-finder does,
# so results from different methods are never compared silently.
BENCHMARK_VERSION = "1.1"  # 1.1: accelerator warm-up, C re-randomised per GEMM call, #wrong checks
SCHEMA_VERSION = 1
