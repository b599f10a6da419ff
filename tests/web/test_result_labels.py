"""Result keys read as practitioners write them: parallelism and library acronyms stay upper-case ("DP comm", "NCCL
buffers", "CUDA context", "ZeRO-3 comm") in the builder's tables, charts and the "Not shown" list, where the first
letter of a label is lower-cased in a sentence unless it starts an acronym."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.web.pages._builder import BuilderState
from app.web.pages._filters import label, label_in_text


@pytest.mark.parametrize(
    ("key", "text", "in_text"),
    [
        ("dp_comm", "DP comm", "DP comm"),
        ("nccl_buffers", "NCCL buffers", "NCCL buffers"),
        ("cuda_context", "CUDA context", "CUDA context"),
        ("zero3_comm", "ZeRO-3 comm", "ZeRO-3 comm"),
        ("forward_compute", "Forward compute", "forward compute"),
        ("tp_comm_s", "TP communication", "TP communication"),
        ("weights_bytes", "Weights", "weights"),
        # the step breakdown's optimizer update, not the optimizer states memory holds (optimizer_states)
        ("optimizer", "Optimizer step", "optimizer step"),
        ("optimizer_states", "Optimizer states", "optimizer states"),
    ],
)
def test_labels_keep_acronyms(key: str, text: str, in_text: str) -> None:
    assert label(key) == text
    assert label_in_text(key) == in_text


def test_the_builder_page_writes_acronyms_as_such(client: TestClient) -> None:
    page = client.get(f"/plans/new?{BuilderState().query()}").text
    assert "NCCL buffers" in page and "CUDA context" in page and "DP comm" in page
    for wrong in ("Nccl buffers", "Cuda context", "Dp comm", "tp comm", "zero3 comm"):
        assert wrong not in page, wrong
