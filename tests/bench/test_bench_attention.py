"""The fused-attention sweep (real torch SDPA on CPU), its calibration into a profile, and the estimate that uses it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.benchproto.config import AttentionConfig, validate_attention
from app.benchproto.schema import ATTENTION_BACKWARD_FLOP_RATIO, attention_rows, causal_forward_flops
from app.calibration.profile import build_profile, hardware_profile
from app.catalog import find_gpu
from app.catalog.fabrics import find_fabric
from app.core.attention import ATTENTION_KERNELS, CUDNN, FLASH_ATTENTION_2
from app.core.errors import SpecError
from app.core.framework import MEGATRON_CORE, TORCHTITAN
from app.core.step import attention_kernel
from tests.paths import ROOT

SMALL = {"heads": 2, "head_dim": 32, "iters": 2, "warmup_iters": 1, "device": "cpu"}


def test_causal_flops_by_hand() -> None:
    # b·h·s²·d = 1·2·4²·8 = 256; two matmuls of 2 FLOP over the causal half: 4·256/2
    assert causal_forward_flops(1, 2, 4, 8) == 512.0
    assert ATTENTION_BACKWARD_FLOP_RATIO == 2.5


@pytest.mark.torch
def test_sweep_times_each_kernel_on_cpu() -> None:
    pytest.importorskip("torch")
    from app.bench.attention import run_attention

    config = AttentionConfig(seq_lens=(64, 128), kernels=("flash-attention-2", "math"), **SMALL)
    doc = run_attention(config)
    assert doc["kind"] == "attention" and doc["status"] == "complete"
    rows = attention_rows(doc)
    assert [(r["attention_kernel"], r["seq_len"]) for r in rows] == [
        ("flash-attention-2", 64),
        ("flash-attention-2", 128),
        ("math", 64),
        ("math", 128),
    ]
    for r in rows:
        assert r["forward_flops"] == causal_forward_flops(1, 2, r["seq_len"], 32)
        assert r["forward_tflops"] == pytest.approx(r["forward_flops"] / r["forward_us_median"] / 1e6)
        assert r["backward_tflops"] == pytest.approx(2.5 * r["forward_flops"] / r["backward_us_median"] / 1e6)
        assert r["device"] == "cpu" and r["iters"] == 2
    assert doc["summary"]["attention_max_tflops"]["math"]["seq_len"] == 128


def test_bad_sweeps_name_every_field() -> None:
    bad = AttentionConfig(seq_lens=(), kernels=("xformers", "cudnn"), heads=0, device="cpu")
    with pytest.raises(SpecError) as info:
        validate_attention(bad, cuda_devices=0)
    fields = {p.field for p in info.value.problems}
    assert {"seq_lens", "kernel", "heads"} <= fields
    assert any("cudnn attention runs on NVIDIA GPUs only" in p.message for p in info.value.problems)
    validate_attention(
        AttentionConfig(kernels=("cudnn",), device="auto"), cuda_devices=8
    )  # fine on a GPU node
    assert AttentionConfig.from_params({"seq_lens": "1024,4096", "kernels": ["cudnn"]}).seq_lens == (
        1024,
        4096,
    )


def _doc(rows: list[tuple[str, int, float, float]]) -> dict[str, Any]:
    return {
        "rows": [
            {
                "attention_kernel": k,
                "seq_len": s,
                "batch": 1,
                "heads": 16,
                "head_dim": 128,
                "forward_tflops": f,
                "backward_tflops": b,
            }
            for k, s, f, b in rows
        ],
        "environment": {},
    }


def test_calibration_takes_each_kernels_longest_sequence() -> None:
    h100 = find_gpu("H100-SXM")
    doc = _doc(
        [
            ("cudnn", 4096, 400.0, 300.0),
            ("cudnn", 32768, 500.0, 450.0),
            ("flash-attention-2", 32768, 300.0, 250.0),
            ("auto", 32768, 480.0, 400.0),
        ]
    )
    params, report = build_profile(doc, h100, find_fabric("ib-ndr-8x400"))
    cudnn = params["attention"]["cudnn"]
    assert cudnn["seq_len"] == 32768
    assert cudnn["forward_share_of_peak"] == pytest.approx(500 / 989)
    assert cudnn["backward_share_of_peak"] == pytest.approx(450 / 989)
    assert set(params["attention"]) == {"cudnn", "flash-attention-2"}  # "auto" is not a named kernel
    assert any("auto" in note and "not calibrated" in note for note in report["notes"])
    published = ATTENTION_KERNELS[(9.0, CUDNN)]
    row = report["attention"]["rows"][1]
    assert row["published_forward_tflops"] == pytest.approx(published.forward * 989)
    assert row["measured_forward_tflops"] == 500.0
    # an attention-only result is enough to calibrate from
    assert "gemm" not in params and "network" not in params


def test_a_calibrated_kernel_replaces_the_published_one_in_the_estimate() -> None:
    h100 = find_gpu("H100-SXM")
    published = ATTENTION_KERNELS[(9.0, CUDNN)]
    half = _doc([("cudnn", 32768, 0.5 * published.forward * 989, 0.5 * published.backward * 989)])
    params, _ = build_profile(half, h100, find_fabric("ib-ndr-8x400"))
    profile = hardware_profile(params, "lab", 3)
    assert profile.attention["cudnn"] == pytest.approx((0.5 * published.forward, 0.5 * published.backward))
    default, calibrated = (
        attention_kernel(MEGATRON_CORE, h100),
        attention_kernel(MEGATRON_CORE, h100, profile),
    )
    assert calibrated.forward_share == pytest.approx(0.5 * default.forward_share)
    assert calibrated.backward_share == pytest.approx(0.5 * default.backward_share)
    assert "calibration profile lab v3" in calibrated.basis
    # a framework running the other kernel keeps its published speed
    assert attention_kernel(TORCHTITAN, h100, profile) == attention_kernel(TORCHTITAN, h100)
    assert attention_kernel(TORCHTITAN, h100).kernel == FLASH_ATTENTION_2

    from app.catalog import find_model
    from app.core.estimate import estimate
    from app.core.hardware import ClusterSpec
    from app.core.layout import Layout

    model = find_model("Llama-3.1-8B")
    cluster = ClusterSpec(gpu=h100, num_nodes=1, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400"))
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, recompute="full")
    base = estimate(model, cluster, layout, 32768, profile=None)
    slow = estimate(model, cluster, layout, 32768, profile=profile)
    assert slow.step.total_s > 1.3 * base.step.total_s  # attention dominates a 32K-token step
    notes = {a.name: a for a in slow.assumptions}
    assert "calibration profile lab v3" in str(notes["flash attention throughput (forward)"].source)


@pytest.mark.torch
def test_a_gemm_job_also_times_attention_when_asked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    from app.bench.job import run_job
    from app.bench.progress import ProgressSink

    params = {
        "sizes": [64],
        "device": "cpu",
        "iters": 1,
        "warmup_iters": 0,
        "attention": {"seq_lens": [64], "kernels": ["math"], **SMALL},
    }
    doc = run_job("gemm", params, str(tmp_path / "out.json"), ProgressSink(None))
    assert doc["status"] == "complete" and set(doc["parts"]) == {"gemm", "attention"}
    assert len(attention_rows(doc)) == 1
    written = json.loads((tmp_path / "out.json").read_text())
    assert len(attention_rows(written)) == 1


def test_job_parameters_are_checked_on_the_server() -> None:
    from app.services.jobs import validate_params

    with pytest.raises(SpecError) as info:
        validate_params("calibration", {"attention": {"kernels": ["xformers"]}, "nproc": 2})
    assert any(p.field == "params.attention.kernel" for p in info.value.problems)
    validate_params("gemm", {"attention": True})


@pytest.mark.torch
def test_cli_runs_and_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from tests.cli_support import run_main

    args = ["bench", "attention", "--device", "cpu", "--seq", "64", "--heads", "2", "--head-dim", "32"]
    code, out, err = run_main(
        [*args, "--iters", "1", "--warmup-iters", "0", "--kernel", "math", "--json"], capsys
    )
    assert code == 0, err
    doc = json.loads(out)
    assert attention_rows(doc)[0]["attention_kernel"] == "math"
    code, _, err = run_main([*args, "--kernel", "cudnn"], capsys)
    assert code == 2 and "cudnn attention runs on NVIDIA GPUs only" in err
    code, _, err = run_main([*args[:4], "--seq", "lots"], capsys)
    assert code == 2 and "--seq" in err


def test_attention_job_to_profile_to_estimate_over_http(client) -> None:  # type: ignore[no-untyped-def]
    token = client.post("/api/v1/nodes", json={"name": "attention-node"}).json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    job = client.post(
        "/api/v1/benchmarks",
        json={"kind": "gemm", "params": {"attention": {"kernels": ["cudnn"], "seq_lens": [32768]}}},
    ).json()
    claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    while claimed["id"] != job["id"]:  # jobs other tests left queued in the shared database
        client.post(
            f"/api/v1/agent/jobs/{claimed['id']}/complete",
            headers=auth,
            json={"attempt": claimed["attempt"], "status": "failed", "error": "left over by another test"},
        )
        claimed = client.post("/api/v1/agent/claim", headers=auth).json()
    published = ATTENTION_KERNELS[(9.0, CUDNN)]
    result = _doc([("cudnn", 32768, 0.5 * published.forward * 989, 0.5 * published.backward * 989)])
    done = client.post(
        f"/api/v1/agent/jobs/{claimed['id']}/complete",
        headers=auth,
        json={
            "attempt": claimed["attempt"],
            "status": "succeeded",
            "result": {"status": "complete", **result},
        },
    )
    assert done.status_code == 200, done.text
    job_page = client.get(f"/benchmarks/jobs/{job['id']}").text
    assert (
        "Fused attention (causal SDPA)" in job_page
        and "32768" in job_page
        and "No results yet" not in job_page
    )
    fit = client.post(
        "/api/v1/calibration/profiles", json={"job_id": job["id"], "name": "attn-lab", "gpu": "H100-SXM"}
    )
    assert fit.status_code == 201, fit.text
    page = client.get(f"/benchmarks/profiles/{fit.json()['id']}").text
    assert "Fused attention" in page and "Calibrated: cudnn" in page

    body = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
    plain = client.post("/api/v1/estimate", json=body).json()
    calibrated = client.post("/api/v1/estimate", json={**body, "profile": "attn-lab"}).json()
    assert calibrated["step"]["total_s"] > plain["step"]["total_s"]
    sources = {a["name"]: a["source"] for a in calibrated["assumptions"]}
    assert "calibration profile attn-lab" in sources["flash attention throughput (forward)"]


def test_launch_form_adds_an_attention_sweep(client) -> None:  # type: ignore[no-untyped-def]
    from tests.web.test_bench_web import HTMX

    bad = client.post(
        "/benchmarks/launch",
        data={"kind": "gemm", "attention_kernels": "cudnn", "attention_seq_lens": "4096,lots"},
        headers=HTMX,
    )
    assert bad.status_code == 200 and 'role="alert"' in bad.text and "sequence lengths" in bad.text
    launched = client.post(
        "/benchmarks/launch",
        data={
            "kind": "gemm",
            "gemm_sizes": "256",
            "attention_kernels": ["cudnn", "flash-attention-2"],
            "attention_seq_lens": "4096, 32768",
        },
        follow_redirects=False,
    )
    assert launched.status_code == 303
    job_id = launched.headers["location"].rsplit("/", 1)[-1]
    job = client.get(f"/api/v1/benchmarks/{job_id}").json()
    assert job["params"]["attention"]["kernels"] == ["cudnn", "flash-attention-2"]
    assert job["params"]["attention"]["seq_lens"] == [4096, 32768]
    client.post(f"/benchmarks/jobs/{job_id}/cancel")  # leave nothing queued for other tests' nodes


def test_a_profile_with_both_curves_does_not_count_the_machine_twice() -> None:
    """Attention measured on the machine whose GEMMs the profile also measured: its rate is what was measured
    (at the training share and the sustained derating), whatever the GEMM curve says."""
    from app.core.attention import TRAINING_SHARES
    from app.core.efficiency import SUSTAINED_FRACTION, GemmEfficiency, training_curves
    from tests.bench.test_bench_calibration import _gemm_doc

    h100 = find_gpu("H100-SXM")
    slow_gemm = GemmEfficiency(max_flops=400e12, half_intensity=60.0, dtype="bf16")
    doc = _gemm_doc(slow_gemm)
    doc["rows"] += _doc([("cudnn", 32768, 450.0, 380.0)])["rows"]
    params, _ = build_profile(doc, h100, find_fabric("ib-ndr-8x400"))
    profile = hardware_profile(params, "both", 1)
    assert profile.gemm is not None and profile.gemm.max_flops == pytest.approx(400e12, rel=0.05)
    _, attn_curve = training_curves(h100, "bf16", profile)
    kernel = attention_kernel(MEGATRON_CORE, h100, profile)
    share = TRAINING_SHARES[CUDNN] * SUSTAINED_FRACTION
    assert kernel.forward_share * attn_curve.max_flops == pytest.approx(450e12 * share, rel=1e-6)
    assert kernel.backward_share * attn_curve.max_flops == pytest.approx(380e12 * share, rel=1e-6)
