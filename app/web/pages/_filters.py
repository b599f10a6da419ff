"""Jinja filters for the planning pages: number formatting with units left to the template, labels, links."""

from __future__ import annotations

import math
import re
from typing import Any

from markupsafe import Markup, escape

from app.web.templating import templates

LABELS = {
    "weights": "Weights",
    "weights_bytes": "Weights",
    "gradients": "Gradients",
    "gradients_bytes": "Gradients",
    "grads": "Gradients",
    "optimizer": "Optimizer step",  # the step breakdown's optimizer update; memory's is optimizer_states
    "optimizer_bytes": "Optimizer states",
    "activations": "Activations",
    "activations_bytes": "Activations",
    "overhead": "Overheads",
    "overhead_bytes": "Overheads",
    "compute": "Compute",
    "fail_slow": "Fail-slows",  # the goodput breakdown's slowed steps (app.core.goodput.FAIL_SLOW_SLOWDOWN)
    "compute_s": "Compute",
    "bubble": "Pipeline bubble",
    "bubble_s": "Pipeline bubble",
    "optimizer_s": "Optimizer step",
    "recompute_s": "Recompute",
    "tp_comm_s": "TP communication",
    "cp_comm_s": "CP communication",
    "ep_comm_s": "EP all-to-all",
    "pp_comm_s": "PP send/recv",
    "dp_comm_s": "DP gradient sync",
}

_URL = re.compile(r"(https?://[^\s<>\"')]+)")


def fmt_input(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def num(value: Any, digits: int = 2) -> str:
    """Thousands separators, fixed decimals; '—' for missing or non-finite values."""
    if value is None or isinstance(value, bool):
        return "—" if value is None else str(value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(x):
        return "—"
    return f"{x:,.{digits}f}"


def num_auto(value: Any) -> str:
    """Readable number without a fixed precision: thousands separators, 6 significant digits below 1000."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    x = float(value)
    if not math.isfinite(x):
        return "—"
    ax = abs(x)
    if x == 0:
        return "0"
    if ax >= 1e15 or ax < 1e-3:
        return f"{x:.4g}"
    if ax >= 1000 or x.is_integer():
        return f"{x:,.0f}"
    return f"{x:.6g}"


def binary_size(value: Any) -> str:
    """A byte count in the binary unit that states it exactly, as the message size selects do ("64 KiB", "4 GiB")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        return num_auto(value)
    size = int(value)
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor:,} {unit}"
    return f"{size:,} B"


def num_signed(value: Any) -> str:
    """A change, signed: "+1,234", "−0.5" (a true minus sign), "0"; "—" for no number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    text = num_auto(abs(value))
    return "0" if value == 0 else ("+" if value > 0 else "−") + text


# words of a result key written as practitioners write them ("dp_comm" → "DP comm", "nccl_buffers" → "NCCL buffers")
ACRONYMS = {
    "tp": "TP",
    "dp": "DP",
    "cp": "CP",
    "ep": "EP",
    "pp": "PP",
    "etp": "ETP",
    "sp": "SP",
    "nccl": "NCCL",
    "cuda": "CUDA",
    "zero3": "ZeRO-3",
    "mtp": "MTP",
    "moe": "MoE",
    "hbm": "HBM",
    "gpu": "GPU",
    "cpu": "CPU",
    "kv": "KV",
    "fp8": "FP8",
    "fp4": "FP4",
}


def label(key: Any) -> str:
    """A result key as a label: its entry in LABELS, else its words with acronyms kept, the first capitalised."""
    text = str(key)
    if text in LABELS:
        return LABELS[text]
    for suffix in ("_bytes", "_s"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    words = " ".join(ACRONYMS.get(word, word) for word in text.split("_") if word)
    return words[:1].upper() + words[1:]


def label_in_text(key: Any) -> str:
    """label() for the middle of a sentence: its first letter lower-case unless it starts an acronym."""
    text = label(key)
    return text if text.split(" ")[0] in ACRONYMS.values() else text[:1].lower() + text[1:]


def field_anchor(field: Any) -> str:
    """Form input id suffix for a problem's field path (layout.tp → tp, cluster.nodes → nodes)."""
    name = str(field).split(".")[-1]
    return {
        "tokens": "tokens_b",
        "sequence_parallel": "sp",
        "fp8_param_gather": "fp8_params",
        "layout": "mode",
        "dp": "tp",
        "calibration_profile": "profile",
    }.get(name, name)


def field_label(field: Any) -> str:
    """The builder input's label for a problem's field path (layout.tp → Tensor parallel)."""
    from app.web.pages._builder import input_label

    return input_label(field_anchor(field))


def linkify(text: Any) -> Markup:
    escaped = str(escape(str(text or "")))
    return Markup(
        _URL.sub(lambda m: f'<a href="{m.group(1)}" rel="noopener noreferrer">{m.group(1)}</a>', escaped)
    )


def install() -> None:
    templates.env.filters.update(
        fmt_input=fmt_input,
        num=num,
        num_auto=num_auto,
        binary_size=binary_size,
        num_signed=num_signed,
        label=label,
        field_anchor=field_anchor,
        field_label=field_label,
        linkify=linkify,
    )


install()


def flat_items(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dict → sorted (dotted key, value) pairs for a two-column table."""
    out: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(flat_items(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        out.append((prefix, value))
    return out


templates.env.filters["flat_items"] = flat_items


def zip_self(values: Any) -> list[tuple[Any, Any]]:
    """[a, b] → [(a, a), (b, b)]: option lists whose value is also their text."""
    return [(v, v) for v in values]


templates.env.filters["zip_self"] = zip_self
