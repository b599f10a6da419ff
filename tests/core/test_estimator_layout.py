"""Layout consistency: every problem reported at once, with field paths."""

from __future__ import annotations

import pytest

from app.catalog import find_gpu, find_model
from app.core.errors import SpecError
from app.core.hardware import ClusterSpec
from app.core.layout import Layout, check_layout


def test_every_problem_is_listed_together() -> None:
    model = find_model("Llama-3-70B")  # 80 layers, 64 heads, 8 kv heads
    cluster = ClusterSpec(gpu=find_gpu("H100-SXM"), num_nodes=8, gpus_per_node=8)
    bad = Layout(tp=3, pp=3, dp=4, micro_batch=3, global_batch=100, ep=2, sequence_parallel=False)
    with pytest.raises(SpecError) as info:
        check_layout(model, cluster, bad, 8192)
    fields = [p.field for p in info.value.problems]
    messages = " | ".join(p.message for p in info.value.problems)
    assert "layout" in fields  # 3·3·4·1 = 36 ≠ 64
    assert "36" in messages and "64" in messages
    assert "heads (64) not divisible by tp (3)" in messages
    assert "layers (80) not divisible by pp·vp" in messages
    assert "global batch (100) not divisible by dp·micro_batch" in messages
    assert "has no experts" in messages
    assert len(info.value.problems) >= 5


def test_moe_and_context_parallel_checks() -> None:
    model = find_model("Mixtral-8x7B")  # 8 experts
    cluster = ClusterSpec(gpu=find_gpu("H100-SXM"), num_nodes=8, gpus_per_node=8)
    with pytest.raises(SpecError) as info:
        check_layout(model, cluster, Layout(tp=2, dp=16, cp=2, ep=3, global_batch=32), 4095)
    messages = " | ".join(p.message for p in info.value.problems)
    assert "experts (8) not divisible by ep (3)" in messages
    assert "not divisible by 2·cp" in messages


def test_a_consistent_layout_passes() -> None:
    model = find_model("Llama-3-70B")
    cluster = ClusterSpec(gpu=find_gpu("H100-SXM"), num_nodes=8, gpus_per_node=8)
    check_layout(model, cluster, Layout(tp=4, pp=4, vp=5, dp=2, cp=2, global_batch=128), 8192)


def test_interleaving_needs_a_multiple_of_pp_microbatches() -> None:
    model = find_model("Llama-3-70B")
    with pytest.raises(SpecError, match="multiple of pp"):
        check_layout(model, None, Layout(pp=4, vp=5, dp=1, global_batch=6), 8192)
