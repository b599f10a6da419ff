"""Planner speed: layouts evaluated per second and full-search time for four reference searches, and the time of one
single-layout estimate.

    .venv/bin/python benchmarks/bench_planner.py [--repeat 5] [--json] [--baseline REV [--rounds 3]]

Cases: Llama-3.1-405B on 16,384 H100 (seq 8192, 2,048 sequences per batch), GPT-3 175B on 1,024
A100 (seq 2048, 1,536 sequences, Narayanan et al. 2021), Llama-2-70B on 64 H100 (seq 4096, 1,024 sequences = 4 M
tokens, Touvron et al. 2023), DeepSeek-V3 on 2,048 H800 in FP8 (seq 4096, 15,360 sequences: DeepSeek-AI 2024, arXiv
2412.19437, Sec. 3 and 4.2; about 1.18 M layouts enumerated), the single estimate of
examples/llama3-70b-64xh100.json (app.core.estimate.estimate, in process), and the service's whole answer to the
405B case (app.services.planner: search, validated-region recommendation, accuracy band, serialised result). Reference: Calculon's exhaustive search
runs about 135 configurations/s on a 2-core machine (its GPT-3 / 1,024-GPU space would take about 24 h). Each
search is run `--repeat` times in one process; the first run (cold caches) and the median are reported, in
wall-clock seconds and in CPU seconds of this process (less sensitive to other work on a shared machine).

`--baseline REV`: the same cases on the code of git revision REV (its `app` package, `git archive`), in worker
processes that alternate with workers on the working tree for `--rounds` rounds, so that both see the same machine
load; prints each case's median CPU time on both and the ratio (working tree / baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CALCULON_CONFIGS_PER_S = 135.0
TARGET_405B_S = 0.1  # docs/constants.md#planner-search-target
TARGET_DEEPSEEK_S = 0.5  # DeepSeek-V3 on 2,048 GPUs (about 1.19 M layouts enumerated) within 0.5 s

# (model, GPU, GPUs, fabric, sequence length, global batch in sequences, training dtype)
CASES = (
    ("Llama-3.1-405B", "H100-SXM", 16384, "ib-ndr-8x400", 8192, 2048, "bf16"),
    ("GPT-3-175B", "A100-80GB-SXM", 1024, "ib-hdr-8x200", 2048, 1536, "bf16"),
    ("Llama-2-70B", "H100-SXM", 64, "ib-ndr-8x400", 4096, 1024, "bf16"),
    ("DeepSeek-V3", "H800-SXM", 2048, "ib-ndr-8x400", 4096, 15360, "fp8"),
)
ESTIMATE_SCENARIO = ROOT / "examples" / "llama3-70b-64xh100.json"
ESTIMATE_CALLS = 200  # single estimates per repeat (one call is about a millisecond)


def run_case(
    model_name: str, gpu_name: str, gpus: int, fabric: str, seq: int, batch: int, dtype: str, repeat: int
) -> dict[str, Any]:
    """Time `repeat` full searches of one case."""
    from app import catalog
    from app.catalog.fabrics import find_fabric
    from app.core.hardware import ClusterSpec
    from app.core.layout import RunOptions
    from app.core.planner import SearchProblem, plan

    model = catalog.find_model(model_name)
    gpu = catalog.find_gpu(gpu_name)
    cluster = ClusterSpec(gpu=gpu, num_nodes=gpus // 8, gpus_per_node=8, fabric=find_fabric(fabric))
    run = RunOptions(dtype=dtype)  # type: ignore[arg-type]
    times, wall, cpu = [], [], []
    result = None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = plan(SearchProblem(model, cluster, seq, batch, run=run), tokens=15e12)
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


def run_estimate(repeat: int) -> dict[str, Any]:
    """Time the single-layout estimate of ESTIMATE_SCENARIO: `repeat` batches of ESTIMATE_CALLS calls, per call."""
    from app import catalog
    from app.catalog.fabrics import find_fabric
    from app.core.estimate import estimate
    from app.core.hardware import ClusterSpec
    from app.core.layout import Layout

    data = json.loads(ESTIMATE_SCENARIO.read_text())
    spec = data["cluster"]
    cluster = ClusterSpec(
        gpu=catalog.find_gpu(spec["gpu"]),
        num_nodes=spec["nodes"],
        gpus_per_node=spec["gpus_per_node"],
        fabric=find_fabric(spec["fabric"]),
    )
    model = catalog.find_model(data["model"])
    layout = Layout(**data["layout"])
    seq = int(data["training"]["seq_len"])
    wall, cpu = [], []
    est = estimate(model, cluster, layout, seq)  # warm the caches
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(ESTIMATE_CALLS):
            est = estimate(model, cluster, layout, seq)
        wall.append((time.perf_counter() - t0) / ESTIMATE_CALLS)
        cpu.append((time.process_time() - c0) / ESTIMATE_CALLS)
    return {
        "case": f"single estimate, {ESTIMATE_SCENARIO.name}",
        "median_wall_s": statistics.median(wall),
        "median_cpu_s": statistics.median(cpu),
        "step_time_s": est.step.total_s,
    }


SERVICE_SCENARIO = ROOT / "examples" / "llama31-405b-pp16-2048xh100.json"


def _public_viewer() -> Any:
    """The anonymous viewer of the price book (app.services.catalog.PUBLIC), None where the tree has none."""
    from app.services import catalog

    return getattr(catalog, "PUBLIC", None)


def run_service(repeat: int) -> dict[str, Any]:
    """Time the whole service answer to the first case, as the API and the builder give it: the search, the
    validated-region recommendation, the accuracy band and the serialised result (app.services.planner)."""
    from app.services.planner import plan_out, run_plan

    data = json.loads(SERVICE_SCENARIO.read_text())
    data.pop("layout", None)
    data["global_batch"] = 2048
    data["cluster"]["nodes"] = 2048
    # an anonymous caller's answer (the built-in price book); a baseline from before price rows had viewers
    # takes no viewer
    viewer = _public_viewer()
    kwargs: dict[str, Any] = {"viewer": viewer} if viewer is not None else {}
    run_plan(data, **kwargs)  # warm the caches
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        _, resolved, price_source, result = run_plan(data, **kwargs)
        plan_out(resolved, price_source, result)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {
        "case": "service answer, Llama-3.1-405B on 16384 × H100-SXM",
        "median_wall_s": statistics.median(wall),
        "median_cpu_s": statistics.median(cpu),
    }


def measure(repeat: int) -> list[dict[str, Any]]:
    """Every search case, then the single estimate, then the service's whole answer to the first case."""
    rows = [run_case(*case, repeat=repeat) for case in CASES]
    return [*rows, run_estimate(repeat), run_service(repeat)]


def print_table(rows: list[dict[str, Any]]) -> None:
    searches, single, service = rows[: len(CASES)], rows[len(CASES)], rows[len(CASES) + 1]
    print(
        f"{'case':<34} {'evaluated':>10} {'fit':>8} {'first s':>8} {'median s':>9} {'layouts/s':>11} "
        f"{'× Calculon':>11} {'CPU s':>7} {'/CPU s':>10}  best layout"
    )
    for r in searches:
        print(
            f"{r['case']:<34} {r['evaluated_layouts']:>10,} {r['feasible_layouts']:>8,} {r['first_search_s']:8.3f} "
            f"{r['median_search_s']:9.3f} {r['layouts_per_s']:11,.0f} {r['vs_calculon']:11,.0f} "
            f"{r['median_cpu_s']:7.3f} {r['layouts_per_cpu_s']:10,.0f}  {r['best']}"
        )
    print(
        f"\n{single['case']}: {single['median_wall_s'] * 1e3:.3f} ms ({single['median_cpu_s'] * 1e3:.3f} ms CPU)"
    )
    big, deepseek = searches[0], searches[3]
    for r, target in ((big, TARGET_405B_S), (deepseek, TARGET_DEEPSEEK_S)):
        verdict = "meets" if r["median_search_s"] <= target else "MISSES"
        print(
            f"{r['case']} full search ({r['enumerated_layouts']:,} layouts enumerated): "
            f"{r['median_search_s']:.3f} s ({verdict} the ≤ {target:g} s target)"
        )
    verdict = "meets" if service["median_wall_s"] <= TARGET_405B_S else "MISSES"
    print(
        f"{service['case']} (search, recommendation, band, serialised): {service['median_wall_s']:.3f} s "
        f"({verdict} the ≤ {TARGET_405B_S:g} s target)"
    )
    print(f"Calculon reference {CALCULON_CONFIGS_PER_S:g} configurations/s")


def baseline_tree(rev: str, into: Path) -> Path:
    """The `app` package of git revision `rev`, extracted under `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "app"], check=True, capture_output=True)
    tar_path = into / "app.tar"
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into


def worker(pythonpath: Path, repeat: int) -> list[dict[str, Any]]:
    """measure() in a fresh process that imports `app` from `pythonpath`."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", "--repeat", str(repeat)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


def compare(rev: str, rounds: int, repeat: int) -> list[dict[str, Any]]:
    """Each case's median CPU seconds on the working tree and on `rev`, workers alternating round by round."""
    samples: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = baseline_tree(rev, Path(tmp))
        for _ in range(rounds):
            for side, path in (("baseline", base), ("current", ROOT)):
                for r in worker(path, repeat):
                    samples.setdefault(r["case"], {"baseline": [], "current": []})[side].append(
                        r["median_cpu_s"]
                    )
    out = []
    for case, s in samples.items():
        b, c = statistics.median(s["baseline"]), statistics.median(s["current"])
        out.append({"case": case, "baseline_cpu_s": b, "current_cpu_s": c, "ratio": c / b})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--baseline", metavar="REV", help="git revision to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=3, help="alternating worker rounds with --baseline")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeat = max(1, args.repeat)
    if args.worker:
        print(json.dumps(measure(repeat)))
        return
    if args.baseline:
        ratios = compare(args.baseline, max(1, args.rounds), repeat)
        if args.json:
            print(json.dumps(ratios, indent=2))
            return
        print(f"{'case':<48} {args.baseline[:12]:>12} {'working tree':>13} {'ratio':>7}  (median CPU ms)")
        for r in ratios:
            base_ms, current_ms = r["baseline_cpu_s"] * 1e3, r["current_cpu_s"] * 1e3
            print(f"{r['case']:<48} {base_ms:12.3f} {current_ms:13.3f} {r['ratio']:7.3f}")
        return
    rows = measure(repeat)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print_table(rows)


if __name__ == "__main__":
    main()
