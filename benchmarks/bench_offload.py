"""Cost of searching offloading in the planner: a full layout search without (baseline), with
`Constraints(activation_offload=True)` and with `Constraints(optimizer_offload=True)`, interleaved in the same
process.

    .venv/bin/python benchmarks/bench_offload.py [--repeat 5]

Cases: Llama 3 70B in FP8 on 64 GB200 (NVLink-C2C host link, seq 8192, 256 sequences) and on 64 H100 (PCIe
Gen5). Activation offloading adds three copies of every pp = 1, no-recompute layout, optimizer offloading two of
every ZeRO 0-2 layout; the ratios printed are each search ÷ the baseline's median time, and the best layout of
each search is shown.
"""

from __future__ import annotations

import argparse
import statistics
import time

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.estimate import EstimateOptions
from app.core.framework import NEMO
from app.core.hardware import ClusterSpec, scaleup_domain_for
from app.core.layout import RunOptions
from app.core.planner import Constraints, SearchProblem, plan

CASES = (("GB200", 4), ("H100-SXM", 8))


KINDS = ("none", "activation_offload", "optimizer_offload")


def search(gpu_name: str, per_node: int, kind: str) -> tuple[float, dict, int]:
    model = catalog.find_model("Llama-3-70B")
    gpu = catalog.find_gpu(gpu_name)
    cluster = ClusterSpec(
        gpu=gpu,
        num_nodes=64 // per_node,
        gpus_per_node=per_node,
        scaleup_kind=gpu.scaleup_kind,
        scaleup_domain_gpus=scaleup_domain_for(gpu.scaleup_kind, 64),
        fabric=find_fabric("ib-ndr-8x400"),
    )
    t0 = time.perf_counter()
    result = plan(
        SearchProblem(
            model, cluster, 8192, 256, run=RunOptions(dtype="fp8"), options=EstimateOptions(framework=NEMO)
        ),
        constraints=Constraints(**({kind: True} if kind != "none" else {})),
    )
    elapsed = time.perf_counter() - t0
    assert result.best is not None
    return elapsed, result.best.to_dict(), result.evaluated_layouts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for gpu_name, per_node in CASES:
        search(gpu_name, per_node, "none")  # warm-up: imports, catalog, first-call caches
        times: dict[str, list[float]] = {k: [] for k in KINDS}
        best: dict[str, dict] = {}
        count: dict[str, int] = {}
        for _ in range(args.repeat):  # interleaved, so drift on a shared machine hits all alike
            for kind in KINDS:
                elapsed, best[kind], count[kind] = search(gpu_name, per_node, kind)
                times[kind].append(elapsed)
        base = statistics.median(times["none"])
        print(f"Llama-3-70B FP8 on 64 × {gpu_name}:")
        for kind in KINDS:
            med = statistics.median(times[kind])
            print(
                f"  {kind:18s} {count[kind]:6d} layouts {med:.3f} s  ratio {med / base:.2f}  "
                f"best {best[kind]['label']}  step {best[kind]['step_time_s']:.3f} s"
            )


if __name__ == "__main__":
    main()
