"""The hint beside a search whose headline layout idles in the pipeline bubble (too small a global batch)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from app.services.catalog import PUBLIC
from app.services.pipeline_hint import BUBBLE_HINT_SHARE, pipeline_fill_note
from app.services.planner import search


def _planned(bubble_s: float, step_s: float = 10.0) -> SimpleNamespace:
    return SimpleNamespace(
        step_time_s=step_s,
        step_breakdown_s={"forward_compute": step_s - bubble_s, "pipeline_bubble": bubble_s},
        layout=SimpleNamespace(dp=32, pp=16),
        num_microbatches=8,
    )


def test_the_note_appears_from_a_fifth_of_the_step_idle() -> None:
    assert BUBBLE_HINT_SHARE == 0.2
    assert pipeline_fill_note(_planned(1.99), 256) == ""
    note = pipeline_fill_note(_planned(5.6), 256)
    assert note.startswith("The recommended layout idles 56% of each step in the pipeline bubble")
    assert (
        "256 sequences give each of its 32 data-parallel replicas 8 micro-batches for 16 pipeline stages"
        in note
    )
    assert pipeline_fill_note(None, 256) == ""


def _request(global_batch: int, seq_len: int) -> dict[str, Any]:
    return {
        "model": "Llama-3-70B",
        "cluster": {"gpu": "H100-SXM", "nodes": 512},
        "training": {"seq_len": seq_len, "tokens": 15e12},
        "global_batch": global_batch,
        "top": 3,
    }


def test_a_search_with_too_small_a_batch_says_so() -> None:
    # 256 sequences on 4,096 H100: no layout keeps the GPUs busy, and the answer says why
    small = search(_request(256, 4096), viewer=PUBLIC)
    assert any("idles" in w and "pipeline bubble" in w for w in small.warnings)
    # Meta's 2,048 sequences of 8,192 tokens on the same GPUs: no such note
    assert not any("pipeline bubble" in w for w in search(_request(2048, 8192), viewer=PUBLIC).warnings)


def test_the_cli_prints_the_warning() -> None:
    from tests.cli_support import invoke

    args = ["search", "--model", "Llama-3-70B", "--gpu", "H100-SXM", "--nodes", "512", "--seq-len", "4096"]
    result = invoke([*args, "--global-batch", "256"])
    assert result.exit_code == 0, result.output
    assert "warning: The recommended layout idles" in result.output
