"""A profile carries its GPU, dtypes, fabric and device kind, and is checked where an estimate uses it: another
GPU is refused (422 on 'profile'), a dtype without a GEMM fit, another fabric or a CPU measurement is warned
about in the API response and the CLI text."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlmodel import Session

from app.calibration.profile import hardware_profile
from app.core.efficiency import profile_use_warnings, training_curves
from app.db import get_engine
from app.models.benchmarks import CalibrationProfile
from tests.paths import EXAMPLES_DIR

EXAMPLE = EXAMPLES_DIR / "llama3-70b-64xh100.json"


def _fit(dtype: str, tflops: float) -> dict[str, Any]:
    return {"max_flops": tflops * 1e12, "half_intensity": 60.0, "dtype": dtype, "source": "test"}


def _params(dtypes: dict[str, float], cpu: bool = False, fabric: str = "") -> dict[str, Any]:
    params: dict[str, Any] = {
        "gemm": {d: _fit(d, t) for d, t in dtypes.items()},
        "gemm_primary_dtype": next(iter(dtypes)),
    }
    if cpu:
        params["environment"] = {"devices": [{"name": "cpu"}]}
    if fabric:
        params["fabric"] = fabric
    return params


def _store(name: str, gpu: str, params: dict[str, Any]) -> None:
    with Session(get_engine()) as session:
        session.add(CalibrationProfile(name=name, version=1, gpu_name=gpu, params=params, report={}))
        session.commit()


def test_profile_record_carries_gpu_dtypes_and_cpu_mark() -> None:
    hp = hardware_profile(_params({"fp8": 900.0, "bf16": 600.0}, cpu=True, fabric="ib-ndr"), "lab", 2, "H100")
    assert hp.gpu == "H100" and hp.dtypes == ("bf16", "fp8") and hp.fabric == "ib-ndr"
    assert hp.measured_on == "cpu"
    assert hp.gemm is not None and hp.gemm.dtype == "fp8"  # the primary
    warnings = profile_use_warnings(hp, "bf16", "ib-ndr")
    assert len(warnings) == 1 and "measured on CPU" in warnings[0]
    assert len(profile_use_warnings(hp, "bf16", "roce")) == 1  # no network fit: the fabric does not matter
    with_net = replace(hp, network=object())
    assert any("fitted its network on ib-ndr" in w for w in profile_use_warnings(with_net, "bf16", "roce"))


def test_every_fitted_dtype_is_used_not_only_the_primary() -> None:
    from app.catalog import find_gpu

    gpu = find_gpu("H100")
    hp = hardware_profile(_params({"fp8": 900.0, "bf16": 300.0}), "lab", 1, "H100")
    linear, _ = training_curves(gpu, "bf16", hp)
    assert abs(linear.max_flops / 300e12 - 0.9) < 0.1  # the bf16 fit (sustained), not the catalog's
    linear8, attn8 = training_curves(gpu, "fp8", hp)
    assert linear8.max_flops > 2 * attn8.max_flops  # fp8 fit for the linear layers, bf16 fit for attention


def test_fp8_only_profile_for_bf16_run_warns() -> None:
    hp = hardware_profile(_params({"fp8": 900.0}), "fp8-only", 1, "H100")
    (warning,) = profile_use_warnings(hp, "bf16")
    assert "no bf16 GEMM fit" in warning and "catalog default" in warning
    assert profile_use_warnings(hp, "fp8") == [warning]  # attention still uses the catalog's 16-bit curve
    both = hardware_profile(_params({"bf16": 600.0, "fp8": 900.0}), "both", 1, "H100")
    assert profile_use_warnings(both, "fp8") == [] and profile_use_warnings(both, "fp16") == []
    assert "no fp4" in profile_use_warnings(both, "fp4")[0]


def test_api_refuses_another_gpu_and_warns_about_dtype(db_url: str) -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.auth_support import bearer, issue_token

    scenario = json.loads(EXAMPLE.read_text())  # 64 × H100, bf16
    reader = bearer(issue_token("bench-reader@example.com", ["plans:read"], is_admin=False))
    with TestClient(create_app(), headers=reader) as client:  # naming a profile needs plans:read
        _store("a100-lab", "A100", _params({"bf16": 250.0}))
        _store("h100-fp8", "H100", _params({"fp8": 1200.0}))
        _store("h100-bf16", "H100", _params({"bf16": 600.0}))
        refused = client.post("/api/v1/estimate", json={**scenario, "profile": "a100-lab"})
        assert refused.status_code == 422, refused.text
        (err,) = [e for e in refused.json()["detail"] if e["loc"][-1] == "profile"]
        assert "A100" in err["msg"] and "H100" in err["msg"]

        warned = client.post("/api/v1/estimate", json={**scenario, "profile": "h100-fp8"})
        assert warned.status_code == 200, warned.text
        assert any("no bf16 GEMM fit" in w for w in warned.json()["warnings"])

        clean = client.post("/api/v1/estimate", json={**scenario, "profile": "h100-bf16"})
        assert clean.status_code == 200 and clean.json()["warnings"] == []
        plain = client.post("/api/v1/estimate", json=scenario)
        assert plain.json()["warnings"] == []


def test_cli_text_prints_one_line_per_warning() -> None:
    from app.cli.commands.estimate import render_text
    from app.services.estimate import parse_scenario, run, to_out

    resolved, est = run(parse_scenario(json.loads(EXAMPLE.read_text())))
    out = to_out(resolved, est).model_copy(update={"warnings": ["profile x v1 has no bf16 GEMM fit"]})
    lines = [line for line in render_text(out).splitlines() if line.startswith("warning: ")]
    assert lines == ["warning: profile x v1 has no bf16 GEMM fit"]


def test_builder_refuses_another_gpu_and_notes_a_missing_dtype(client: Any) -> None:
    """The builder evaluates through the plans' service: another GPU's profile is a problem on the profile
    field (as the estimate API's 422), a profile without the run's dtype is a note beside the results."""
    import html
    import re

    from app.web.pages._builder import BuilderState

    _store("a100-fp8", "A100", _params({"fp8": 500.0}))
    r = client.get(
        "/plans/new?" + BuilderState(profile="a100-fp8 v1").query(), headers={"HX-Request": "true"}
    )
    assert 'data-field="profile"' in r.text, r.text[:2000]
    assert "measured on A100-80GB-SXM, this scenario's GPU is H100-SXM" in html.unescape(r.text)
    _store("h100-fp8-only", "H100", _params({"fp8": 900.0}))
    r = client.get(
        "/plans/new?" + BuilderState(profile="h100-fp8-only v1").query(), headers={"HX-Request": "true"}
    )
    note = re.search(r'<p class="problems" id="profile-warning" role="alert">([^<]+)</p>', r.text)
    assert note, r.text[:2000]
    assert "no bf16 GEMM fit" in note.group(1)


def test_cli_estimate_with_a_profile_prints_its_warning(db_url: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from app.cli.main import build_cli

    _store("cli-fp8", "H100", _params({"fp8": 1200.0}))
    _store("cli-a100", "A100", _params({"bf16": 250.0}))
    runner, cli = CliRunner(), build_cli()
    scenario = json.loads(EXAMPLE.read_text())
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**scenario, "profile": "cli-fp8"}))
    res = runner.invoke(cli, ["estimate", str(path)])
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.output.splitlines() if x.startswith("warning: ")]
    assert "profile cli-fp8 v1 has no bf16 GEMM fit" in line
    path.write_text(json.dumps({**scenario, "profile": "cli-a100"}))
    refused = runner.invoke(cli, ["estimate", str(path)])
    assert refused.exit_code != 0  # the CLI's entry point prints a SpecError's problems and exits 2
    assert "measured on A100-80GB-SXM" in str(getattr(refused.exception, "problems", ""))


def test_profile_listing_marks_cpu_runs_and_their_dtypes(client: Any) -> None:
    _store("cpu-lab", "H100-SXM", _params({"bf16": 0.3, "fp8": 0.2}, cpu=True, fabric="ib-ndr-8x400"))
    shown = client.get("/api/v1/calibration/profiles/cpu-lab")
    assert shown.status_code == 200, shown.text
    body = shown.json()
    assert body["measured_on"] == "cpu" and body["gemm_dtypes"] == ["bf16", "fp8"]
    assert body["fabric"] == "ib-ndr-8x400"
