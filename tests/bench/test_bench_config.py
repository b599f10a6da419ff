"""Pure parts of the benchmark runner: sizes, sweeps, validation, model GEMM shapes, importers, reports."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.bench.importers import import_file, import_text
from app.bench.launch import Rendezvous, SlurmJob, slurm_script, torchrun_argv
from app.benchproto.config import (
    CollectiveConfig,
    GemmConfig,
    GemmShape,
    parse_shape_ranges,
    validate_collectives,
    validate_gemm,
)
from app.benchproto.schema import RowGroup, collective_row, gemm_row
from app.benchproto.shapes import model_gemm_shapes
from app.benchproto.sizes import aligned_count, parse_size, size_sweep
from app.core.errors import SpecError
from app.core.model import ModelSpec
from tests.paths import DATA_DIR

DATA = DATA_DIR / "bench"


def test_sizes_follow_nccl_tests_binary_suffixes() -> None:
    assert parse_size("1K") == 1024
    assert parse_size("16M") == 16 * 2**20
    assert parse_size("8G") == 8 * 2**30
    assert parse_size("512") == 512
    assert parse_size("1.5K") == 1536
    with pytest.raises(ValueError, match="cannot read size"):
        parse_size("12Q")


def test_sweep_by_factor_and_by_step() -> None:
    assert size_sweep(1024, 16 * 1024, 2) == [1024, 2048, 4096, 8192, 16384]
    assert size_sweep(1000, 1300, step_bytes=100) == [1000, 1100, 1200, 1300]
    with pytest.raises(SpecError) as err:
        size_sweep(2048, 1024, 2)
    assert [p.field for p in err.value.problems] == ["maxbytes"]


@given(st.integers(1, 2**20), st.integers(0, 2**24), st.sampled_from([2.0, 3.0, 4.0]))
def test_sweep_is_increasing_and_within_bounds(lo: int, extra: int, factor: float) -> None:
    sizes = size_sweep(lo, lo + extra, factor)
    assert sizes[0] == lo
    assert all(a < b for a, b in itertools.pairwise(sizes))
    assert sizes[-1] <= lo + extra < sizes[-1] * factor + 1


@given(st.integers(1, 2**26), st.sampled_from([1, 2, 4, 8]), st.integers(1, 64))
def test_aligned_count_splits_evenly(size: int, elem: int, ranks: int) -> None:
    count = aligned_count(size, elem, ranks)
    assert count % ranks == 0 and count >= ranks


def test_bad_collective_input_reports_every_problem() -> None:
    cfg = CollectiveConfig(ops=("all_reduce", "allreduce_foo"), min_bytes=2**20, max_bytes=1024, iters=0)
    with pytest.raises(SpecError) as err:
        validate_collectives(cfg, nproc=2, cuda_devices=0)
    fields = {p.field for p in err.value.problems}
    assert fields == {"op", "maxbytes", "iters"}
    assert "allreduce_foo" in str(err.value)


def test_nccl_without_gpus_and_more_ranks_than_devices() -> None:
    with pytest.raises(SpecError, match="no CUDA GPU is visible"):
        validate_collectives(CollectiveConfig(backend="nccl"), nproc=2, cuda_devices=0)
    with pytest.raises(SpecError, match="8 ranks requested but only 4 CUDA device"):
        validate_collectives(CollectiveConfig(device="cuda"), nproc=8, cuda_devices=4)
    with pytest.raises(SpecError, match="NCCL needs CUDA tensors"):
        validate_collectives(CollectiveConfig(backend="nccl", device="cpu"), nproc=2, cuda_devices=8)
    validate_collectives(CollectiveConfig(), nproc=8, cuda_devices=0)  # gloo on CPU: any rank count


def test_gemm_validation() -> None:
    with pytest.raises(SpecError) as err:
        validate_gemm(GemmConfig(shapes=(GemmShape(0, 4, 4),), dtypes=("bf16", "int4"), device="cuda"), 0)
    assert {p.field for p in err.value.problems} == {"shapes.0", "dtype", "device"}
    with pytest.raises(SpecError, match="FP8 tensor cores"):
        validate_gemm(GemmConfig(shapes=(GemmShape(16, 16, 16),), dtypes=("fp8",)), 1, fp8_supported=False)
    with pytest.raises(SpecError, match="multiples of 16"):
        validate_gemm(
            GemmConfig(shapes=(GemmShape(4096, 4096, 4100),), dtypes=("fp8",)), 1, fp8_supported=True
        )


def test_shape_ranges_like_mamf_finder() -> None:
    assert parse_shape_ranges("1024") == [(1024, 1024, 1024)]
    assert parse_shape_ranges("256:512:256 4096 4096; 8 16 32") == [
        (256, 4096, 4096),
        (512, 4096, 4096),
        (8, 16, 32),
    ]


def test_llama2_7b_gemm_shapes_at_tp2() -> None:
    """Llama-2-7B (h=4096, 32 heads, FFN 11008 SwiGLU, vocab 32000), tp=2, 1×4096 tokens (Megatron TP splits)."""
    model = ModelSpec("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, "swiglu")
    fwd = {s.label: (s.m, s.n, s.k) for s in model_gemm_shapes(model, tp=2, seq_len=4096, backward=False)}
    assert fwd == {
        "qkv": (4096, 3 * 4096 // 2, 4096),
        "attn_out": (4096, 4096, 2048),
        "ffn_up": (4096, 11008, 4096),  # gate and up: 2 × 11008 / 2
        "ffn_down": (4096, 4096, 5504),
        "logits": (4096, 16000, 4096),
    }
    all_shapes = model_gemm_shapes(model, tp=2, seq_len=4096)
    assert len(all_shapes) == 15
    # FLOPs of one layer's linear GEMMs (fwd+bwd) = 3 × 2 × tokens × per-rank params of the layer's matrices
    layer = [s for s in all_shapes if not s.label.startswith("logits")]
    params_per_rank = (3 * 4096 * 4096 + 4096 * 4096 + 3 * 4096 * 11008) / 2
    assert sum(s.flops for s in layer) == pytest.approx(6 * 4096 * params_per_rank)


def test_gqa_moe_shapes() -> None:
    from app.core.model import MoESpec

    model = ModelSpec(
        "moe",
        2,
        1024,
        16,
        4,
        2048,
        1000,
        "swiglu",
        moe=MoESpec(num_experts=8, experts_per_token=2, expert_ffn_hidden_size=512),
    )
    fwd = {s.label: (s.m, s.n, s.k) for s in model_gemm_shapes(model, tp=1, seq_len=512, backward=False)}
    assert fwd["qkv"] == (512, 1024 + 2 * 4 * 64, 1024)
    assert fwd["expert_up"] == (128, 1024, 1024)  # 512 tokens × top-2 / 8 experts
    assert "ffn_up" not in fwd
    with pytest.raises(SpecError, match="must divide the number of attention heads"):
        model_gemm_shapes(model, tp=3)


def test_result_rows_use_nccl_tests_arithmetic() -> None:
    row = collective_row("all_reduce", (2**30, 2**28, "float32"), RowGroup(8), 0.010, 2 * 7 / 8, 0)
    assert row["algbw_gbps"] == pytest.approx(107.374, rel=1e-4)
    assert row["busbw_gbps"] == pytest.approx(107.374 * 1.75, rel=1e-4)
    assert row["time_us"] == pytest.approx(10000)
    g = gemm_row(4096, 4096, 4096, "bf16", "cuda:0", [0.2e-3, 0.25e-3, 0.3e-3])
    assert g["best_tflops"] == pytest.approx(2 * 4096**3 / 0.2e-3 / 1e12)
    assert g["median_tflops"] == pytest.approx(2 * 4096**3 / 0.25e-3 / 1e12)
    assert g["mean_tflops"] == pytest.approx(2 * 4096**3 / 0.25e-3 / 1e12)


def test_import_nccl_tests_text() -> None:
    doc = import_file(DATA / "all_reduce_perf.txt")
    assert doc["source"] == "nccl-tests" and doc["kind"] == "collectives"
    assert [r["size_bytes"] for r in doc["rows"]] == [8, 1024, 1048576, 134217728]
    last = doc["rows"][-1]
    assert (last["op"], last["ranks"], last["nodes"], last["ranks_per_node"]) == ("all_reduce", 4, 2, 2)
    assert (last["time_us"], last["algbw_gbps"], last["busbw_gbps"], last["wrong"]) == (
        1000.0,
        134.22,
        201.33,
        0,
    )
    assert doc["environment"]["hostnames"] == ["node-a", "node-b"]
    assert doc["summary"]["wrong"] == 0


def test_import_nccl_tests_json() -> None:
    doc = import_file(DATA / "all_gather_perf.json")
    assert doc["environment"]["nccl"] == "2.27.3"
    assert [r["busbw_gbps"] for r in doc["rows"]] == [22.94, 36.70, 52.43]
    assert all(r["op"] == "all_gather" and r["ranks"] == 8 for r in doc["rows"])
    assert doc["rows"][-1]["checked"] is False
    assert doc["summary"]["avg_busbw_gbps"]["all_gather/all"] == pytest.approx((22.94 + 36.70 + 52.43) / 3)


def test_import_mamf_finder() -> None:
    doc = import_file(DATA / "mamf.txt")
    assert doc["source"] == "mamf-finder" and doc["kind"] == "gemm"
    assert [(r["m"], r["n"], r["k"]) for r in doc["rows"]] == [
        (1024, 4096, 4096),
        (4096, 4096, 4096),
        (8192, 4096, 4096),
    ]
    assert doc["summary"]["max_tflops"]["bf16"]["tflops"] == 720.5
    assert doc["environment"]["torch"] == "2.5.1+cu124"
    assert doc["config"]["source_benchmark_version"] == "2"


def test_import_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="cannot tell the format"):
        import_text("hello world")
    text = (DATA / "all_reduce_perf.txt").read_text().replace("all_reduce_perf", "mystery")
    with pytest.raises(ValueError, match="pass --op"):
        import_text(text)
    assert import_text(text, op="allreduce")["rows"][0]["op"] == "all_reduce"


def test_torchrun_and_slurm_commands() -> None:
    cfg = CollectiveConfig(ops=("all_gather",))
    single = torchrun_argv(cfg, 4, "/tmp/x.json", python="python")
    assert single[:6] == ["python", "-m", "torch.distributed.run", "--standalone", "--nnodes", "1"]
    assert single[single.index("--nproc-per-node") + 1] == "4"
    multi = torchrun_argv(
        cfg, 8, None, Rendezvous(nnodes=4, endpoint="10.0.0.1:29500", run_id="j7"), python="python"
    )
    assert multi[3:11] == [
        "--nnodes",
        "4",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "10.0.0.1:29500",
        "--rdzv-id",
        "j7",
    ]
    script = slurm_script(cfg, SlurmJob(nodes=16, gpus_per_node=8))
    assert "#SBATCH --nodes=16" in script and "#SBATCH --ntasks-per-node=1" in script
    assert "srun" in script and '--rdzv-endpoint "$head_node:29500"' in script
    assert '"ops":["all_gather"]' in script
    # the one task per node runs 8 ranks: it asks for their CPUs, and srun is told to pass them on
    assert (
        "#SBATCH --cpus-per-task=16" in script
        and 'export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"' in script
    )
    assert "source /opt/env/bin/activate" in slurm_script(
        cfg, SlurmJob(2, 4, activate="/opt/env/bin/activate")
    )
    assert "#SBATCH --cpus-per-task=48" in slurm_script(cfg, SlurmJob(2, 4, cpus_per_task=48))
    assert "source " not in slurm_script(cfg, SlurmJob(2, 4, activate=""))


def test_nccl_tests_op_names_are_accepted() -> None:
    from app.benchproto.config import CollectiveConfig, validate_collectives

    config = CollectiveConfig(ops=("alltoall", "sendrecv", "allreduce"))
    assert config.ops == ("all_to_all", "send_recv", "all_reduce")
    assert CollectiveConfig.from_dict({"ops": "alltoall,sendrecv"}).ops == ("all_to_all", "send_recv")
    validate_collectives(config, 2, 0)  # no error


def test_job_progress_never_goes_backwards_across_parts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """GEMM, then attention, then a forwarded collective sweep: the job-wide progress only grows."""
    import io
    import json

    from app.bench.job import _ForwardingSink
    from app.bench.progress import ProgressSink

    stream = io.StringIO()
    parent = ProgressSink(stream)
    parent.start(3)
    sink = _ForwardingSink(parent, {"rows": []}, str(tmp_path / "doc.json"))
    sink.start(4, kind="gemm")
    for i in range(4):
        sink.row({"m": i})
    sink.start(2, kind="attention")
    for i in range(2):
        sink.row({"attention_kernel": "math", "seq_len": i})
    sink.forward({"event": "start", "total": 3})
    for done in (1, 2, 3):
        sink.forward({"event": "row", "done": done, "row": {"op": "all_reduce"}})
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    progress = [e["progress"] for e in events if e["event"] == "row"]
    assert progress == sorted(progress) and progress[-1] == 1.0 and len(progress) == 9
    assert progress[3] == round(1 / 3, 4) and progress[5] == round(2 / 3, 4)


def test_agent_token_comes_from_a_file_or_the_environment(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from app.cli.main import main

    monkeypatch.delenv("CLUSTERPLAN_NODE_TOKEN", raising=False)

    def agent(*args: str) -> tuple[int, str]:
        try:
            main(["agent", "--server", "http://127.0.0.1:9", *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    bad = tmp_path / "token"
    bad.write_text("not-a-token\n")
    assert agent("--token-file", str(bad)) == (
        2,
        "error: a node token starts with cpn_ (create one with POST /api/v1/nodes or the Benchmarks page)\n",
    )
    code, err = agent("--token-file", str(tmp_path / "missing"))
    assert code == 2 and "cannot read the token file" in err and "No such file" in err
    code, err = agent()
    assert code == 2 and "no node token" in err
    code, err = agent("--token-file", str(bad), "--token", "cpn_x")
    assert code == 2 and "give the node token once" in err
