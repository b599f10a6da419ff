"""Shared scenarios for the plans and browser tests (no tests here)."""

from __future__ import annotations

from typing import Any


def small_scenario(**layout: Any) -> dict[str, Any]:
    """Llama-3 8B on 2 × 8 H100 over NDR InfiniBand: small enough to estimate in milliseconds."""
    base_layout: dict[str, Any] = {
        "tp": 2,
        "pp": 1,
        "dp": 8,
        "micro_batch": 1,
        "global_batch": 256,
        "zero": 1,
        "recompute": "selective",
        "sequence_parallel": True,
        "dtype": "bf16",
    }
    base_layout.update(layout)
    return {
        "model": "llama-3-8b",
        "cluster": {"gpu": "H100-SXM", "nodes": 2, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
        "layout": base_layout,
        "training": {"seq_len": 4096, "tokens": 1.0e12},
    }
