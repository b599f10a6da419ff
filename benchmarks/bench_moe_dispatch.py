"""Cost of the MoE dispatch settings in the planner: a full layout search with Megatron-core's plain all-to-all
(baseline) and with the node-deduplicating dispatcher plus the EP all-to-all overlap, in the same process.

    .venv/bin/python benchmarks/bench_moe_dispatch.py [--repeat 5]

Cases: DeepSeek-V3 on 1,024 H100 (seq 4096, 8,192 sequences) and Qwen3-30B-A3B on 64 H100 (seq 4096, 512
sequences). The extra work is two more memoised collective look-ups per distinct EP group and four overlap
terms per layout; the ratio printed is tuned ÷ plain median search time, and the best layout of each is shown.
"""

from __future__ import annotations

import argparse
import statistics
import time

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.estimate import EstimateOptions
from app.core.framework import MEGATRON_CORE
from app.core.hardware import ClusterSpec
from app.core.planner import SearchProblem, plan

CASES = (
    ("DeepSeek-V3", 1024, 4096, 8192),
    ("Qwen3-30B-A3B", 64, 4096, 512),
)
TUNED = MEGATRON_CORE.with_(
    name="megatron-core+deepep+a2a-overlap", moe_dispatcher="deepep", moe_a2a_overlap=True
)


def search(model_name: str, gpus: int, seq: int, batch: int, fw) -> tuple[float, dict]:
    model = catalog.find_model(model_name)
    cluster = ClusterSpec(
        gpu=catalog.find_gpu("H100-SXM"),
        num_nodes=gpus // 8,
        gpus_per_node=8,
        fabric=find_fabric("ib-ndr-8x400"),
    )
    t0 = time.perf_counter()
    result = plan(SearchProblem(model, cluster, seq, batch, options=EstimateOptions(framework=fw)))
    elapsed = time.perf_counter() - t0
    assert result.best is not None
    return elapsed, result.best.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name, gpus, seq, batch in CASES:
        search(name, gpus, seq, batch, MEGATRON_CORE)  # warm-up: imports, catalog, first-call caches
        base, tuned = [], []
        for _ in range(args.repeat):  # interleaved, so drift on a shared machine hits both alike
            base_s, base_best = search(name, gpus, seq, batch, MEGATRON_CORE)
            tuned_s, tuned_best = search(name, gpus, seq, batch, TUNED)
            base.append(base_s)
            tuned.append(tuned_s)
        b, t = statistics.median(base), statistics.median(tuned)
        print(f"{name} on {gpus} × H100: plain {b:.3f} s, deepep+overlap {t:.3f} s, ratio {t / b:.2f}")
        for label, best in (("plain", base_best), ("tuned", tuned_best)):
            print(
                f"  best {label:5s}: {best['label']}  step {best['step_time_s']:.3f} s  ep_comm "
                f"{best['step_breakdown_s']['ep_comm']:.3f} s"
            )


if __name__ == "__main__":
    main()
