"""The planner, its vectorised evaluation and the size sweep read one screen at a time, and the pieces split out of
`step.layer_comm` and `memory.stage_terms` keep the properties their callers rely on."""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.framework import MEGATRON_CORE
from app.core.hardware import ClusterSpec
from app.core.layout import Layout, LayoutColumns
from app.core.memory import MemoryRun, layer_activations, stage_terms
from app.core.planner import Constraints, enumerate_layouts
from app.core.step import LayerCommInputs, layer_comm
from tests.paths import ROOT

# A function longer than this does not fit on one screen (docs/architecture.md, "Readable functions"); `plan` and
# `evaluate` are the longest, most of them signature, docstring and result.
MAX_LINES = 80
SPLIT_MODULES = ("app/core/planner.py", "app/core/planner_eval.py", "app/core/sizing.py")
# the steps split out of step.layer_comm and memory.stage_terms
SPLIT_STEPS = {
    "app/core/step.py": {"layer_comm", "_tp_exposed", "_cp_ring", "_ep_exposed", "_deduplicated_a2a"},
    "app/core/memory.py": {
        "stage_terms",
        "_stage_params",
        "_stage_states",
        "_stage_saved_per_layer",
        "_held_activations",
        "_end_stage_activations",
        "_comm_buffers",
    },
}


def _functions(path: str) -> list[ast.FunctionDef]:
    tree = ast.parse((ROOT / path).read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def _too_long_or_undocumented(nodes: list[ast.FunctionDef]) -> list[str]:
    """Functions over MAX_LINES, and functions over 15 lines without a docstring (serialisers exempt)."""
    bad = []
    for node in nodes:
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_LINES:
            bad.append(f"{node.name}: {length} lines")
        if length > 15 and node.name != "to_dict" and ast.get_docstring(node) is None:
            bad.append(f"{node.name}: no docstring")
    return bad


@pytest.mark.parametrize("path", SPLIT_MODULES)
def test_every_function_of_the_planner_modules_fits_on_a_screen(path: str) -> None:
    assert _too_long_or_undocumented(_functions(path)) == []


@pytest.mark.parametrize("path", sorted(SPLIT_STEPS))
def test_the_split_steps_exist_fit_on_a_screen_and_are_documented(path: str) -> None:
    nodes = [n for n in _functions(path) if n.name in SPLIT_STEPS[path]]
    assert {n.name for n in nodes} == SPLIT_STEPS[path]
    assert _too_long_or_undocumented(nodes) == []
    assert all(ast.get_docstring(n) for n in nodes)


def _cluster(gpus: int) -> ClusterSpec:
    gpu = catalog.find_gpu("H100-SXM")
    return ClusterSpec(gpu=gpu, num_nodes=gpus // 8, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400"))


def _comm_inputs(layout: Layout, gpus: int, moe_again: float = 0.0) -> LayerCommInputs:
    """LayerCommInputs of one layout of Mixtral-8x7B, with stand-in layer times and collectives (seconds growing
    with the message and the ranks, none for one rank) so that every term is non-zero where its dimension is > 1."""
    model = catalog.find_model("Mixtral-8x7B")

    def coll(op: str, size: Any, ranks: Any, per_node: Any, group: str) -> Any:
        # nothing for one rank, as app.core.step._coll
        busy = 1e-12 * np.asarray(size, dtype=float) * np.log2(np.maximum(2, ranks)) + 1e-6
        return np.where(np.asarray(ranks) > 1, busy, 0.0)

    def times(attr: str) -> float:
        return {"column_bwd": 2e-4, "attention_fwd": 3e-4, "forward": 1e-3, "backward": 2e-3}.get(attr, 5e-4)

    cols = LayoutColumns.of(layout)
    tokens = layout.micro_batch * 4096 / layout.cp
    fw = replace(MEGATRON_CORE, tp_async_backward=True)
    return LayerCommInputs(model, cols, tokens, times, times, moe_again, _cluster(gpus), fw, coll)


def test_layer_comm_is_linear_in_the_recomputed_share() -> None:
    """layer_step_times prices the ends (share 0 and 1) and interpolates per stage: that is exact only if every
    term is affine in the share."""
    layout = Layout(tp=2, pp=1, dp=4, cp=2, ep=8, sequence_parallel=True, global_batch=64)
    low, mid, high = layer_comm(_comm_inputs(layout, 16, moe_again=1.0), (0.0, 0.5, 1.0))
    for a, m, b in zip(low, mid, high, strict=True):
        assert float(a) > 0 and float(b) > float(a)
        assert float(m) == pytest.approx((float(a) + float(b)) / 2, rel=1e-12)


def test_layer_comm_prices_only_the_dimensions_a_layout_splits() -> None:
    (tp_only,) = layer_comm(
        _comm_inputs(Layout(tp=8, dp=1, sequence_parallel=True, global_batch=8), 8), (0.0,)
    )
    assert float(tp_only[0]) > 0 and tp_only[1] == 0.0 and tp_only[2] == 0.0
    (none,) = layer_comm(_comm_inputs(Layout(tp=1, dp=8, global_batch=8), 8), (0.0,))
    assert none == (0.0, 0.0, 0.0)


def test_stage_terms_rows_equal_the_single_layout_stage() -> None:
    """stage_terms over the enumerated rows of a search gives, row by row, the bytes it gives for that row's Layout
    alone (the two paths share the split steps)."""
    model = catalog.find_model("Mixtral-8x7B")
    space = enumerate_layouts(model, _cluster(64), 4096, 256, Constraints(optimizer_offload=True))
    rows = space.rows.take(np.arange(0, len(space.rows), max(1, len(space.rows) // 40)))
    m = np.maximum(1, 256 // (rows.dp * rows.micro_batch))
    cols = LayoutColumns(
        tp=rows.tp,
        pp=rows.pp,
        vp=rows.vp,
        dp=rows.dp,
        cp=rows.cp,
        ep=rows.ep,
        etp=np.where(rows.etp > 0, rows.etp, rows.tp),
        folded=(rows.etp > 0).astype(np.int64),
        zero=rows.zero,
        sp=rows.sp,
        recompute=rows.recompute,
        micro_batch=rows.micro_batch,
        num_microbatches=m,
        recompute_layers=rows.recompute_layers,
        offload_layers=rows.offload_layers,
        optimizer_offload=rows.optimizer_offload,
        expert_dp=np.maximum(
            1, rows.tp * rows.dp * rows.cp // (np.where(rows.etp > 0, rows.etp, rows.tp) * rows.ep)
        ),
    )
    run = MemoryRun(model, 4096, MEGATRON_CORE, True, ("core_attn",), ())
    layers = model.num_layers / rows.pp
    last = rows.pp - 1
    many = stage_terms(
        run, cols, layer_activations(run, cols), last, (rows.pp == 1).astype(np.int64), 1, layers
    )
    for i in range(len(rows)):
        one = LayoutColumns(**{k: v if np.isscalar(v) else v[i] for k, v in cols.__dict__.items()})
        single = stage_terms(
            run, one, layer_activations(run, one), int(last[i]), int(rows.pp[i] == 1), 1, float(layers[i])
        )
        assert float(np.asarray(many.total_bytes)[i]) == pytest.approx(float(single.total_bytes), rel=1e-12)
        assert float(np.asarray(many.host_bytes)[i]) == pytest.approx(float(single.host_bytes), rel=1e-12)
