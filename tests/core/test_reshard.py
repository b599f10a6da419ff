"""ZeRO-3 re-sharding (Layout.reshard_after): the collectives per micro-batch or per step, the unsharded weights and
gradients held, the framework's default under a pipeline schedule, and one implementation in estimate and planner."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.core.errors import SpecError
from app.core.estimate import EstimateOptions, estimate
from app.core.framework import MEGATRON_CORE, TORCHTITAN
from app.core.layout import RESHARD_MODES, LayoutColumns, RunOptions, framework_reshard, layout_label
from app.core.planner import Constraints, enumerate_layouts, layout_at
from app.core.planner_eval import evaluate
from app.core.step import data_parallel_times
from tests.core.conftest import make_cluster, make_layout, make_model

GiB = 1024**3


def _counting_collective(calls: list[str]):
    """A collective that takes one second per call and records the operation."""

    def call(op: str, size, ranks, per_node, group: str) -> float:
        if size:
            calls.append(op)
        return 1.0 if size else 0.0

    return call


LAYERS = 80  # one FSDP unit per layer: every pass issues one collective per layer


@pytest.mark.parametrize(
    ("reshard", "expected"),
    [
        # 2 all-gathers + 1 reduce-scatter per layer in each of 4 micro-batches
        ("forward", 4 * 3.0 * LAYERS),
        # the backward reuses the forward's gathered weights: 1 + 1 per layer and micro-batch
        ("backward", 4 * 2.0 * LAYERS),
        # gathered once and reduced once per layer for the whole step
        ("step", 2.0 * LAYERS),
    ],
)
def test_collectives_per_step_follow_the_reshard_mode(reshard: str, expected: float) -> None:
    layout = make_layout(dp=8, zero=3, micro_batch=1, global_batch=32, reshard_after=reshard)
    cols = LayoutColumns.of(layout)
    assert cols.num_microbatches == 4
    calls: list[str] = []
    cluster = make_cluster(nodes=1)
    # no compute to hide behind: every collective second is exposed
    _, zero3, _ = data_parallel_times(
        cols, (1e9, 0.0), (0.0, 0.0, 0.0), LAYERS, cluster, MEGATRON_CORE, _counting_collective(calls)
    )
    assert zero3 == pytest.approx(expected)
    # one call per kind of collective; the counts multiply them
    assert sorted(set(calls)) == ["all_gather", "reduce_scatter"]


def _estimate(reshard: str, fw=TORCHTITAN):
    model = make_model("Llama-3-8B")
    cluster = make_cluster(nodes=2)
    layout = make_layout(
        dp=16, zero=3, recompute="full", micro_batch=1, global_batch=64, reshard_after=reshard
    )
    return estimate(model, cluster, layout, 4096, options=EstimateOptions(framework=fw))


def test_kept_weights_and_gradients_are_counted_once_per_stage() -> None:
    forward, backward, step = (_estimate(m) for m in RESHARD_MODES)
    params = forward.memory.stages[0].params
    f, b, s = (e.memory.stages[0].breakdown for e in (forward, backward, step))
    # FSDP2 keeps no 16-bit shard: the gathered bf16 weights (2 B) are what "backward" and "step" add
    assert f["weights"] == 0.0
    assert b["weights"] == pytest.approx(params * TORCHTITAN.weight_bytes)
    assert s["weights"] == pytest.approx(params * TORCHTITAN.weight_bytes)
    # "step" also keeps the unsharded gradients at the fp32 reduce precision (4 B)
    assert b["gradients"] == pytest.approx(f["gradients"])
    assert s["gradients"] - f["gradients"] == pytest.approx(params * TORCHTITAN.grad_reduce_bytes)
    # Llama-3-8B: 8.0 B parameters, so about 15 GiB of weights and 30 GiB of gradients more
    assert 14.0 < s["weights"] / GiB < 16.0
    assert 29.0 < (s["gradients"] - f["gradients"]) / GiB < 31.0
    # and the step is faster by the collectives it no longer repeats
    assert step.step.breakdown["zero3_comm"] < backward.step.breakdown["zero3_comm"]
    assert backward.step.breakdown["zero3_comm"] < forward.step.breakdown["zero3_comm"]


def test_only_zero3_reshards() -> None:
    with pytest.raises(SpecError) as err:
        estimate(
            make_model("Llama-3-8B"),
            make_cluster(nodes=1),
            make_layout(dp=8, zero=1, global_batch=8, reshard_after="step"),
            4096,
        )
    assert "layout.reshard_after" in str(err.value)


def test_label_and_assumption_name_a_kept_mode() -> None:
    est = _estimate("backward")
    assert "reshard=backward" in layout_label(est.layout)
    assert "reshard=" not in layout_label(replace(est.layout, reshard_after="forward"))
    names = {a.name: a.value for a in est.assumptions}
    assert names["ZeRO-3 parameters re-sharded after"] == "backward"


def test_pipeline_schedules_keep_parameters_where_the_framework_does() -> None:
    # torch.distributed.pipelining over FSDP2 modules (torchtitan): kept for the step when pp > 1
    assert RESHARD_MODES[framework_reshard(TORCHTITAN.pipeline_reshard, 4, 3)] == "step"
    assert RESHARD_MODES[framework_reshard(TORCHTITAN.pipeline_reshard, 1, 3)] == "forward"
    assert RESHARD_MODES[framework_reshard(TORCHTITAN.pipeline_reshard, 4, 1)] == "forward"
    assert RESHARD_MODES[framework_reshard(MEGATRON_CORE.pipeline_reshard, 4, 3)] == "forward"
    cols = framework_reshard(TORCHTITAN.pipeline_reshard, np.array([1, 2, 4]), np.array([3, 3, 1]))
    assert cols.tolist() == [0, 2, 0]


def test_planner_rows_and_the_estimate_agree_on_pipelined_zero3() -> None:
    model = make_model("Llama-3-8B")
    cluster = make_cluster(nodes=2)
    space = enumerate_layouts(model, cluster, 4096, 64, Constraints(), True, True)
    pick = np.nonzero((space.rows.pp > 1) & (space.rows.zero == 3))[0][:12]
    assert len(pick) >= 4
    rows = space.rows.take(pick)
    opts = EstimateOptions(framework=TORCHTITAN)
    ev = evaluate(model, cluster, rows, 4096, 64, RunOptions(), options=opts)
    for j in range(len(rows)):
        layout = layout_at(rows, j, 64, RunOptions(), TORCHTITAN.pipeline_reshard)
        assert layout.reshard_after == "step"
        est = estimate(model, cluster, layout, 4096, options=opts)
        assert float(ev.peak_bytes[j]) == est.memory.peak_bytes
        assert float(ev.step["zero3_comm"][j]) == est.step.breakdown["zero3_comm"]
