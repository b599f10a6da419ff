"""Cost of searching activation offloading in the planner: a full layout search without (baseline) and with
`Constraints(activation_offload=True)`, interleaved in the same process.

    .venv/bin/python benchmarks/bench_offload.py [--repeat 5]

Cases: Llama 3 70B in FP8 on 64 GB200 (NVLink-C2C host link, seq 8192, 256 sequences) and on 64 H100 (PCIe
Gen5). Offloading adds three copies of every pp = 1, no-recompute layout; the ratio printed is with ÷ without
median search time, and the best layout of each search is shown.
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
from app.core.planner import Constraints, plan

CASES = (("GB200", 4), ("H100-SXM", 8))


def search(gpu_name: str, per_node: int, offload: bool) -> tuple[float, dict, int]:
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
        model,
        cluster,
        8192,
        256,
        dtype="fp8",
        constraints=Constraints(activation_offload=offload),
        options=EstimateOptions(framework=NEMO),
    )
    elapsed = time.perf_counter() - t0
    assert result.best is not None
    return elapsed, result.best.to_dict(), result.evaluated_layouts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for gpu_name, per_node in CASES:
        search(gpu_name, per_node, False)  # warm-up: imports, catalog, first-call caches
        base, with_off = [], []
        for _ in range(args.repeat):  # interleaved, so drift on a shared machine hits both alike
            base_s, base_best, base_n = search(gpu_name, per_node, False)
            off_s, off_best, off_n = search(gpu_name, per_node, True)
            base.append(base_s)
            with_off.append(off_s)
        b, o = statistics.median(base), statistics.median(with_off)
        print(
            f"Llama-3-70B FP8 on 64 × {gpu_name}: {base_n} layouts {b:.3f} s, with offload {off_n} layouts "
            f"{o:.3f} s, ratio {o / b:.2f}"
        )
        for label, best in (("without", base_best), ("with", off_best)):
            print(f"  best {label:7s}: {best['label']}  step {best['step_time_s']:.3f} s")


if __name__ == "__main__":
    main()
