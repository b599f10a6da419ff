"""Shared scenarios and page helpers for the plans and browser tests (no tests here)."""

from __future__ import annotations

import html
import re
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


def saved_field(page: str, name: str) -> str:
    """The value the builder's results hand to the save form (`<input type="hidden" … form="save-form">`)."""
    match = re.search(rf'<input type="hidden" name="{name}" form="save-form" value="([^"]*)"', page)
    assert match, f"no {name} to save in the results"
    return html.unescape(match.group(1))


def save_form(page: str, name: str) -> dict[str, str]:
    """The form the builder's "Save plan" posts to /plans for the results in `page`."""
    return {
        "name": name,
        "notes": "",
        "scenario": saved_field(page, "scenario"),
        "calibration_profile": saved_field(page, "calibration_profile"),
        "builder": saved_field(page, "builder"),
    }


# A layout-search request small enough to answer in well under a second: Llama-3 8B on 2 × 8 H100
SMALL_SEARCH: dict[str, Any] = {
    "model": "Llama-3-8B",
    "cluster": {"gpu": "H100-SXM", "nodes": 2},
    "training": {"seq_len": 4096, "tokens": 1e11},
    "global_batch": 128,
    "top": 3,
}
# the wall-clock measurements of a search (also in each size's point): they differ between two runs of one request
TIMING = {"elapsed_s", "layouts_per_s"}


def without_timing(doc: Any) -> Any:
    """A search or sizing document without its wall-clock measurements, for comparing two runs."""
    if isinstance(doc, dict):
        return {key: without_timing(value) for key, value in doc.items() if key not in TIMING}
    if isinstance(doc, list):
        return [without_timing(value) for value in doc]
    return doc
