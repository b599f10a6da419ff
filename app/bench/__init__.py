"""Benchmark runner: GEMM sweeps and collective sweeps (nccl-tests semantics) on one node or many.

torch is imported only inside the modules that run measurements (`gemm`, `collectives`, `environment`),
never at package import, so the CLI, the agent and the importers work without it. The web app never imports
this package: the result document, the run configurations and the job kinds it shares with the runner live in
the torch-free protocol package app.benchproto.
"""

from __future__ import annotations

from app.benchproto import BENCHMARK_VERSION, SCHEMA_VERSION

__all__ = ["BENCHMARK_VERSION", "SCHEMA_VERSION"]
