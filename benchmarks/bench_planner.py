"""Planner speed: layouts evaluated per second and full-search time for three reference searches.

    .venv/bin/python benchmarks/bench_planner.py [--repeat 5] [--json]

Cases (issue 5): Llama-3.1-405B on 16,384 H100 (seq 8192, 2,048 sequences per batch), GPT-3 175B on 1,024 A100
(seq 2048, 1,536 sequences, Narayanan et al. 2021), Llama-2-70B on 64 H100 (seq 4096, 1,024 sequences = 4 M
tokens, Touvron et al. 2023). Reference: Calculon's exhaustive search runs about 135 configurations/s on a
2-core machine (its GPT-3 / 1,024-GPU space would take about 24 h). Each search is run `--repeat` times in one
process; the first run (cold caches) and the median are reported, in wall-clock seconds and in CPU seconds of
this process (less sensitive to other work on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.hardware import ClusterSpec
from app.core.planner import plan

CALCULON_CONFIGS_PER_S = 135.0
TARGET_405B_S = 1.0  # docs/constants.md#planner-search-target

CASES = (
    ("Llama-3.1-405B", "H100-SXM", 16384, "ib-ndr-8x400", 8192, 2048),
    ("GPT-3-175B", "A100-80GB-SXM", 1024, "ib-hdr-8x200", 2048, 1536),
    ("Llama-2-70B", "H100-SXM", 64, "ib-ndr-8x400", 4096, 1024),
)


def run_case(
    model_name: str, gpu_name: str, gpus: int, fabric: str, seq: int, batch: int, repeat: int
) -> dict:
    model = catalog.find_model(model_name)
    gpu = catalog.find_gpu(gpu_name)
    cluster = ClusterSpec(gpu=gpu, num_nodes=gpus // 8, gpus_per_node=8, fabric=find_fabric(fabric))
    times, wall, cpu = [], [], []
    result = None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = plan(model, cluster, seq, batch, tokens=15e12)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        times.append(result.elapsed_s)
    assert result is not None
    median = statistics.median(times)
    best = result.best
    return {
        "case": f"{model_name} on {gpus} × {gpu_name}",
        "enumerated_layouts": result.enumerated_layouts,
        "evaluated_layouts": result.evaluated_layouts,
        "feasible_layouts": result.feasible_layouts,
        "first_search_s": times[0],
        "median_search_s": median,
        "median_wall_s": statistics.median(wall),
        "median_cpu_s": statistics.median(cpu),
        "layouts_per_cpu_s": result.evaluated_layouts / statistics.median(cpu),
        "layouts_per_s": result.evaluated_layouts / median,
        "vs_calculon": result.evaluated_layouts / median / CALCULON_CONFIGS_PER_S,
        "collective_calls": result.collective_calls,
        "best": best.to_dict()["label"] if best else None,
        "best_step_s": best.step_time_s if best else None,
        "best_mfu": best.mfu if best else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [run_case(*case, repeat=max(1, args.repeat)) for case in CASES]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'case':<34} {'evaluated':>10} {'fit':>8} {'first s':>8} {'median s':>9} {'layouts/s':>11} "
        f"{'× Calculon':>11} {'CPU s':>7} {'/CPU s':>10}  best layout"
    )
    for r in rows:
        print(
            f"{r['case']:<34} {r['evaluated_layouts']:>10,} {r['feasible_layouts']:>8,} {r['first_search_s']:8.3f} "
            f"{r['median_search_s']:9.3f} {r['layouts_per_s']:11,.0f} {r['vs_calculon']:11,.0f} "
            f"{r['median_cpu_s']:7.3f} {r['layouts_per_cpu_s']:10,.0f}  {r['best']}"
        )
    big = rows[0]
    verdict = "meets" if big["median_search_s"] < TARGET_405B_S else "MISSES"
    print(
        f"\n405B / 16,384 GPUs full search: {big['median_search_s']:.3f} s ({verdict} the < {TARGET_405B_S:g} s target); "
        f"Calculon reference {CALCULON_CONFIGS_PER_S:g} configurations/s"
    )


if __name__ == "__main__":
    main()
