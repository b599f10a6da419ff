"""Layer-micro-batches held on the end stages of an interleaved pipeline whose split counts the embedding and the loss
as a layer each (Megatron-core --account-for-embedding/loss-in-pipeline-split; the Llama 3 paper's split, arXiv
2407.21783 Sec. 3.3.2): the first stage's first chunk and the last stage's last chunk are one layer short, and the
warm-up (megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches) runs the chunks in turn, g
micro-batches each."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.memory import inflight_layer_microbatches


def held(chunk_layers: list[int], warmup: int, g: int, m: int) -> int:
    """Layers held after `warmup` forwards (+ the steady state's one) in Megatron-core's grouped chunk order."""
    order = [
        c for start in range(0, m, g) for c in range(len(chunk_layers)) for _ in range(min(g, m - start))
    ]
    return sum(chunk_layers[c] for c in order[: warmup + 1])


@pytest.mark.parametrize(
    ("layers", "pp", "vp", "m", "stage", "chunk_layers"),
    [
        # Llama 3 405B: 126 layers on 16 stages, 8 slots a stage, one layer a chunk
        (7, 16, 8, 32, 0, [0, 1, 1, 1, 1, 1, 1, 1]),
        (7, 16, 8, 32, 15, [1, 1, 1, 1, 1, 1, 1, 0]),
        (7, 16, 8, 16, 15, [1, 1, 1, 1, 1, 1, 1, 0]),
        # 126 layers on 8 stages (16 slots), four chunks of four slots
        (15, 8, 4, 64, 0, [3, 4, 4, 4]),
        (15, 8, 4, 64, 7, [4, 4, 4, 3]),
    ],
)
def test_the_short_chunk_is_counted_not_averaged(
    layers: int, pp: int, vp: int, m: int, stage: int, chunk_layers: list[int]
) -> None:
    warmup = min(2 * (pp - stage - 1) + (vp - 1) * pp, m * vp - 1)
    expected = held(chunk_layers, warmup, pp, m)
    assert inflight_layer_microbatches(float(layers), pp, vp, m, stage) == pytest.approx(expected)


def test_the_last_stage_was_underestimated_by_the_average() -> None:
    """Llama 3 405B's last stage, PP16 VP8, 32 micro-batches: (v − 1)·p + 1 = 113 chunks held, all but the one short
    chunk whole, 112 layers; the average over the stage's chunks (7/8 a chunk) gave 98.9."""
    assert inflight_layer_microbatches(7.0, 16, 8, 32, 15) == pytest.approx(112.0)
    assert 113 * 7 / 8 < 100


def test_rows_and_scalars_agree() -> None:
    layers = np.array([7.0, 8.0, 7.0, 15.0])
    stage = np.array([0, 1, 15, 7])
    pp = np.array([16, 16, 16, 8])
    rows = inflight_layer_microbatches(layers, pp, 8, 32, stage)
    one = [inflight_layer_microbatches(float(layers[i]), int(pp[i]), 8, 32, int(stage[i])) for i in range(4)]
    assert rows == pytest.approx(one)


def test_divisible_stages_keep_the_average() -> None:
    # 8 layers a stage over 8 chunks: nothing short, the plain warm-up count
    assert inflight_layer_microbatches(8.0, 16, 8, 32, 1) == pytest.approx(2 * 14 + 7 * 16 + 1)
    assert inflight_layer_microbatches(16.0, 8, 4, 64, 0) == pytest.approx((2 * 7 + 3 * 8 + 1) * 4)
