"""The benchmark protocol: what the server and the runner share, with no torch and nothing that measures.

The result document (`schema`), the run configurations and their checks (`config`, `sizes`, `shapes`) and the
job kinds with their parameters (`kinds`). The web app, the API and the services import only this package;
the runner (app.bench) imports it too.
"""

from __future__ import annotations

# Bump whenever the measurement method changes (shapes, flush, timing, reductions), as mamf-finder does,
# so results from different methods are never compared silently.
BENCHMARK_VERSION = "1.1"  # 1.1: accelerator warm-up, C re-randomised per GEMM call, #wrong checks
SCHEMA_VERSION = 1
