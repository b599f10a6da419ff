"""A hint beside a search whose headline layout idles in the pipeline bubble: the global batch is too small for the
GPUs, so no layout keeps them busy."""

from __future__ import annotations

from typing import Any

# the bubble share of a step above which the hint is given: a fifth of every step idle on every GPU
BUBBLE_HINT_SHARE = 0.2


def pipeline_fill_note(planned: Any, global_batch: int) -> str:
    """One sentence when `planned` (app.core.planner.PlannedLayout) spends at least BUBBLE_HINT_SHARE of its step in
    the pipeline bubble; "" otherwise."""
    if planned is None or planned.step_time_s <= 0:
        return ""
    share = planned.step_breakdown_s.get("pipeline_bubble", 0.0) / planned.step_time_s
    if share < BUBBLE_HINT_SHARE:
        return ""
    lay = planned.layout
    micro = planned.num_microbatches
    return (
        f"The recommended layout idles {share:.0%} of each step in the pipeline bubble: {global_batch:,} sequences "
        f"give each of its {lay.dp:,} data-parallel replicas {micro} micro-batch{'es' if micro != 1 else ''} for "
        f"{lay.pp} pipeline stages. A larger global batch, or fewer GPUs, would keep the GPUs busy."
    )
