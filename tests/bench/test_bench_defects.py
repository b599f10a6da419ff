"""Smaller defects of the benchmark loop, each pinned: a 1-rank group reports busbw 0 for the collectives whose
nccl-tests factor is (n-1)/n, as nccl-tests prints it, and an imported 1-rank log keeps that 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bench.importers import import_text
from app.core.network import busbw_factor, reported_busbw_factor
from tests.paths import DATA_DIR

DATA = DATA_DIR / "bench"


@pytest.mark.parametrize(
    ("op", "factor"),
    [
        ("all_reduce", 0.0),
        ("all_gather", 0.0),
        ("reduce_scatter", 0.0),
        ("all_to_all", 0.0),
        ("broadcast", 1.0),
        ("reduce", 1.0),
        ("send_recv", 1.0),
    ],
)
def test_one_rank_group_reports_busbw_as_nccl_tests(op: str, factor: float) -> None:
    assert reported_busbw_factor(op, 1) == factor
    assert busbw_factor(op, 1) == 1.0  # the model's transfer term keeps 1 for a single rank
    assert reported_busbw_factor(op, 8) == busbw_factor(op, 8)


def test_one_rank_import_keeps_busbw_zero() -> None:
    text = (DATA / "all_reduce_perf.txt").read_text()
    lines = text.splitlines()
    one_rank = "\n".join(
        line for line in lines if not line.startswith("#  Rank") or line.startswith("#  Rank  0 ")
    )
    # a 1-GPU all_reduce: nccl-tests prints busbw 0 on every row
    one_rank = one_rank.replace("   26.21 ", "    0.00 ").replace("  201.33 ", "    0.00 ")
    one_rank = one_rank.replace("    0.06 ", "    0.00 ")
    doc = import_text(one_rank, name="all_reduce_perf.txt")
    assert {r["ranks"] for r in doc["rows"]} == {1}
    assert all(r["busbw_gbps"] == 0.0 for r in doc["rows"])
    assert any(r["algbw_gbps"] > 0 for r in doc["rows"])


def test_one_rank_runner_rows_show_busbw_zero(tmp_path: Path) -> None:
    """One gloo rank: all_reduce moves nothing over a bus (busbw 0), broadcast keeps busbw = algbw."""
    pytest.importorskip("torch")
    from app.bench.launch import run_torchrun
    from app.benchproto.config import CollectiveConfig

    cfg = CollectiveConfig(
        ops=("all_reduce", "broadcast"), min_bytes=4096, max_bytes=4096, iters=2, warmup_iters=1
    )
    code, doc = run_torchrun(cfg, 1, str(tmp_path / "out.json"))
    assert code == 0 and doc is not None
    rows = {r["op"]: r for r in doc["rows"]}
    assert rows["all_reduce"]["ranks"] == 1 and rows["all_reduce"]["busbw_gbps"] == 0.0
    assert rows["broadcast"]["busbw_gbps"] == rows["broadcast"]["algbw_gbps"] > 0


def test_gemm_timing_refills_c_before_every_timed_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """mamf-finder's re-randomisation: C is overwritten with random data before each timed call (after the
    untimed warm-up calls), so every product writes memory that changed."""
    pytest.importorskip("torch")
    from app.bench import gemm
    from app.benchproto.config import GemmShape

    calls: list[str] = []
    real_refill, real_init = gemm._Matmul.refill, gemm._Matmul.__init__

    def init(self: gemm._Matmul, *args: object) -> None:
        real_init(self, *args)  # type: ignore[arg-type]
        call = self.call
        self.call = lambda: (calls.append("call"), call())[1]

    def refill(self: gemm._Matmul) -> None:
        calls.append("refill")
        assert self.c is not None and self.c_rand is not None
        self.c.zero_()
        real_refill(self)
        assert bool((self.c == self.c_rand).all())

    monkeypatch.setattr(gemm._Matmul, "__init__", init)
    monkeypatch.setattr(gemm._Matmul, "refill", refill)
    times = gemm.time_matmul(GemmShape(64, 64, 64), "bf16", "cpu", iters=3, warmup_iters=2, flush=None)
    assert len(times) == 3
    assert calls == ["call", "call"] + ["refill", "call"] * 3
