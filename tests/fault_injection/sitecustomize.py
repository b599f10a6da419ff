"""Fault injection for the correctness-gate tests: corrupt results the way failing hardware would.

Put this folder first on PYTHONPATH and set CLUSTERPLAN_TEST_CORRUPT_FACTOR (e.g. 1.005 = 0.5 %): every Python
process started with that environment (the CLI, the agent's job, each torchrun rank) then multiplies the first
CLUSTERPLAN_TEST_CORRUPT_ELEMENTS (default 10) elements of rank 0's collective outputs (all_reduce, broadcast,
all_gather, reduce_scatter, all_to_all) by that factor, and moves the first elements of every GEMM product
by (factor − 1) × max(|x|, 1). Python imports `sitecustomize` at start-up (docs.python.org/3/library/site.html); the
patch is applied when the benchmark modules are first imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any

FACTOR = float(os.environ.get("CLUSTERPLAN_TEST_CORRUPT_FACTOR", "1") or 1)
ELEMENTS = int(os.environ.get("CLUSTERPLAN_TEST_CORRUPT_ELEMENTS", "10"))


def _patch_collectives(dist: Any) -> None:
    """Wrap the collectives the runner times (torchrun starts the worker as __main__, so the patch goes on
    torch.distributed, which the worker calls through the module)."""

    def corrupting(original: Any, out_index: int) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if dist.get_rank() == 0:
                args[out_index][:ELEMENTS] *= FACTOR
            return result

        return call

    for name in ("all_reduce", "broadcast", "all_gather_single", "all_gather_into_tensor"):
        if hasattr(dist, name):
            setattr(dist, name, corrupting(getattr(dist, name), 0))
    for name in ("reduce_scatter_single", "reduce_scatter_tensor", "all_to_all_single"):
        if hasattr(dist, name):
            setattr(dist, name, corrupting(getattr(dist, name), 0))


def _patch_gemm(module: Any) -> None:
    original = module.multiply

    def multiply(a: Any, b: Any, dtype: str, out: Any = None) -> Any:
        c = original(a, b, dtype, out)
        head = c.view(-1)[:ELEMENTS]
        head += (FACTOR - 1) * head.abs().clamp(min=1)  # a product may be 0: move it by at least the factor
        return c

    module.multiply = multiply


PATCHES = {"torch.distributed": _patch_collectives, "app.bench.gemm": _patch_gemm}


class _PatchAfterLoad(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module  # type: ignore[attr-defined]

        def exec_module(module: Any) -> None:
            original_exec(module)
            PATCHES[name](module)

        loader.exec_module = exec_module  # type: ignore[attr-defined]
        return spec


if FACTOR != 1:
    sys.meta_path.insert(0, _PatchAfterLoad())
