"""Network API and CLI end to end: /api/v1/network/* on the real app and database, `clusterplan network …`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.cli.commands.network import SEED_SCENARIO
from tests.paths import ROOT


def test_collective_golden_and_sweep(client: Any) -> None:
    r = client.post(
        "/api/v1/network/collective",
        json={"op": "allreduce", "message_bytes": 16 * 2**30, "cluster": {"gpu": "H100", "nodes": 1}},
    )
    assert r.status_code == 200, r.text
    res = r.json()["results"][0]
    assert res["algorithm"] == "nvls"
    assert res["busbw_gbps"] == pytest.approx(480, rel=0.05)
    assert sum(res["breakdown_us"].values()) == pytest.approx(res["time_us"])
    sweep = client.post(
        "/api/v1/network/collective",
        json={
            "op": "all_gather",
            "sweep": {"min_bytes": 1024, "max_bytes": 2**30, "factor": 4},
            "cluster": {"gpu": "A100-80GB", "nodes": 4, "fabric": "ib-hdr-8x200"},
            "ranks": 16,
            "ranks_per_node": 4,
        },
    )
    assert sweep.status_code == 200
    results = sweep.json()["results"]
    assert len(results) == 11
    times = [x["time_us"] for x in results]
    assert times == sorted(times)
    assert results[0]["nodes"] == 4


def test_collective_errors_have_field_detail(client: Any) -> None:
    r = client.post(
        "/api/v1/network/collective",
        json={
            "op": "gossip",
            "message_bytes": 1,
            "algorithm": "magic",
            "cluster": {"gpu": "H100", "nodes": 1},
        },
    )
    assert r.status_code == 422
    locs = {tuple(d["loc"]) for d in r.json()["detail"]}
    assert ("body", "op") in locs and ("body", "algorithm") in locs
    unknown = client.post(
        "/api/v1/network/collective",
        json={
            "op": "all_reduce",
            "message_bytes": 1,
            "cluster": {"gpu": "H100", "nodes": 1, "fabric": "ib-nd"},
        },
    )
    assert unknown.status_code == 422
    assert "ib-ndr" in unknown.text
    too_many = client.post(
        "/api/v1/network/collective",
        json={"op": "all_reduce", "message_bytes": 1, "ranks": 64, "cluster": {"gpu": "H100", "nodes": 2}},
    )
    assert too_many.status_code == 422


def test_fabrics_listing(client: Any) -> None:
    r = client.get("/api/v1/network/fabrics")
    assert r.status_code == 200
    body = r.json()
    names = {f["name"] for f in body["data"]}
    assert {
        "ib-ndr-8x400",
        "roce-8x400",
        "ethernet-tcp-100",
        "efa-v2-32x100",
        "ib-hdr-8x200",
        "ib-xdr-8x800",
    } <= names
    assert body["count"] == len(body["data"])
    assert all(f["source"] for f in body["data"])
    roce = client.get("/api/v1/network/fabrics", params={"transport": "roce"}).json()
    assert roce["count"] >= 1 and all(f["transport"] == "roce" for f in roce["data"])


def test_bom_from_price_book_and_explicit_prices(client: Any) -> None:
    r = client.post("/api/v1/network/bom", json={"nodes": 128, "fabric": "ib-ndr-8x400"})
    assert r.status_code == 200, r.text
    bom = r.json()
    assert bom["switches"] == 48
    assert bom["cost"]["prices"]["switch_usd"] == 36_000
    assert "price book" in bom["cost"]["prices"]["source"]["switch_usd"]
    explicit = client.post(
        "/api/v1/network/bom",
        json={
            "nodes": 128,
            "rails": 8,
            "prices": {"switch_usd": 50_000, "transceiver_usd": 1000, "cable_usd": 100},
        },
    ).json()
    assert explicit["cost"]["breakdown_usd"] == {
        "switches": 48 * 50_000,
        "transceivers": 4096 * 1000,
        "cables": 2048 * 100,
        "nics": 0.0,
    }
    bad = client.post("/api/v1/network/bom", json={"nodes": 300, "rails": 8, "tiers": 2})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["body", "tiers"]
    assert "3 tiers are needed" in bad.json()["detail"][0]["msg"]


def test_scaling_fabrics_side_by_side_and_claims(client: Any) -> None:
    body = {
        "scenario": SEED_SCENARIO,
        "gpu_counts": [32, 64, 128],
        "fabrics": ["ib-ndr-8x400", "ethernet-tcp-100"],
        "claims": [{"fabric": "ib-ndr-8x400", "gpus": 128, "efficiency": 0.9}],
    }
    r = client.post("/api/v1/network/scaling", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    ib, tcp = out["series"]
    assert ib["points"][0]["efficiency_vs_baseline"] == pytest.approx(1.0)
    assert ib["points"][0]["scaling_efficiency"] < 1.0  # the ideal is a perfect network, not this fabric
    # the same efficiency for every fabric at the baseline would hide a penalty present there: TCP shows it
    assert tcp["points"][0]["scaling_efficiency"] < ib["points"][0]["scaling_efficiency"]
    for p_ib, p_tcp in zip(ib["points"], tcp["points"], strict=True):
        assert p_tcp["step_time_s"] >= p_ib["step_time_s"]
        assert p_ib["time_to_train_days"] == pytest.approx(2e12 / p_ib["tokens_per_s"] / 86400)
    assert tcp["points"][-1]["scaling_efficiency"] < ib["points"][-1]["scaling_efficiency"]
    derate = next(x for x in out["required"] if x["knob"] == "congestion_derate")
    assert 0 < derate["value"] < 1
    bad = client.post("/api/v1/network/scaling", json={**body, "gpu_counts": [33], "fabrics": ["nope"]})
    assert bad.status_code == 422
    locs = {tuple(d["loc"]) for d in bad.json()["detail"]}
    assert ("body", "gpu_counts") in locs and ("body", "fabrics", "0") in locs


class CliResult:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    """The real `clusterplan` entry point (app.cli.main.main), in process to keep the suite fast."""
    from app.cli.main import main

    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return CliResult(code, out.out, out.err)


def test_cli_commands(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_cli(capsys, "network", "collective", "all_reduce", "--nodes", "4", "--size", "16G", "--json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)["results"][0]
    assert res["busbw_gbps"] == pytest.approx(370, rel=0.05)
    bom = run_cli(capsys, "network", "bom", "128", "--fabric", "ib-ndr-8x400")
    assert bom.returncode == 0 and "leaf" in bom.stdout and "48" in bom.stdout
    fabrics = run_cli(capsys, "network", "fabrics")
    assert "roce-8x400" in fabrics.stdout
    bad = run_cli(capsys, "network", "collective", "all_reduce", "--size", "12 parsecs")
    assert bad.returncode == 2 and "bad size" in bad.stderr and "Traceback" not in bad.stderr
    unknown = run_cli(capsys, "network", "collective", "all_reduce", "--fabric", "myrinet")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr


def test_cli_seed_claims_reports_required_derate(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_cli(capsys, "network", "seed-claims", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    ib = next(s for s in data["series"] if s["fabric_name"] == "ib-ndr-8x400")
    at128 = next(p for p in ib["points"] if p["num_gpus"] == 128)
    assert at128["scaling_efficiency"] > 0.9
    derates = [
        r
        for r in data["required"]
        if r["knob"] == "congestion_derate"
        and r["relative_to"] is None
        and r["fabric"] == "roce-ecmp-scattered"
    ]
    assert len(derates) == 2 and all(0.05 < r["value"] < 0.5 for r in derates)
    # 18 vs 43 days needs a far harsher derate than the claimed efficiencies do
    days = next(r for r in data["required"] if r["knob"] == "congestion_derate" and r["relative_to"])
    assert days["target_efficiency"] == pytest.approx(18 / 43, abs=1e-3)
    assert days["value"] < min(r["value"] for r in derates)
    # a NIC count is an answer only when it reproduces the claim; otherwise the bracketing counts are given
    for r in (r for r in data["required"] if r["knob"] == "nics_per_node"):
        assert r["value"] is not None or "no whole NIC count" in r["note"]
    text = run_cli(capsys, "network", "seed-claims").stdout
    assert "nics_per_node = 1 NICs" not in text
    # static ECMP on the article's fat-tree costs efficiency by mechanism; tuned RoCE matches InfiniBand
    series = {s["fabric_name"]: {p["num_gpus"]: p for p in s["points"]} for s in data["series"]}
    assert series["roce-ecmp-scattered"][128]["scaling_efficiency"] < at128["scaling_efficiency"] - 0.03
    assert series["roce-8x400"][128]["scaling_efficiency"] == pytest.approx(
        at128["scaling_efficiency"], abs=0.002
    )


def test_cli_seed_claims_judges_each_claim(capsys: pytest.CaptureFixture[str]) -> None:
    """Each of the article's claims is reproduced, explained by a named mechanism, or unreproducible with the
    figures it would need (docs/network.md, "The seed article's claims")."""
    data = json.loads(run_cli(capsys, "network", "seed-claims", "--json").stdout)
    verdicts = {(v["fabric"], v["gpus"], v["relative_to"]): v for v in data["verdicts"]}
    assert len(verdicts) == 4
    ib = verdicts[("ib-ndr-8x400", 128, None)]
    assert ib["verdict"] == "reproduced" and abs(ib["gap_pct"]) <= ib["tolerance_pct"]
    # RoCE 82 % at 64 and 71 % at 128 GPUs: no published routing loss is deep enough; two NICs per node give
    # both within the tolerance a reproduction has (83.1 % and 75.9 %)
    for gpus in (64, 128):
        roce = verdicts[("roce-ecmp-scattered", gpus, None)]
        assert roce["verdict"] == "explained" and "2 NICs per node instead of 8" in roce["reason"]
        assert "published routing losses reach 0.71" not in roce["reason"]
    days = verdicts[("roce-ecmp-scattered", 128, "ib-ndr-8x400")]
    assert days["verdict"] == "unreproducible" and "the claims disagree with each other" in days["reason"]
    text = run_cli(capsys, "network", "seed-claims").stdout
    assert "claim 71% at 128 GPUs on roce-ecmp-scattered: EXPLAINED" in text


def test_scaling_claims_get_verdicts_through_the_api(client: Any) -> None:
    """Any scenario's claims are judged, not only the article's: an optimistic claim cannot be reproduced by a
    fabric assumption, one the model meets is reproduced."""
    body = {
        "scenario": {
            "model": "Llama-2-7B",
            "cluster": {"gpu": "H100-SXM", "nodes": 1, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
            "layout": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 64, "zero": 1},
            "training": {"seq_len": 4096},
        },
        "gpu_counts": [8, 64],
        "claims": [{"fabric": "ib-ndr-8x400", "gpus": 64, "efficiency": 1.2}],
    }
    r = client.post("/api/v1/network/scaling", json=body)
    assert r.status_code == 200, r.text
    (verdict,) = r.json()["verdicts"]
    assert verdict["verdict"] == "unreproducible" and "higher" in verdict["reason"]
    modelled = verdict["modelled"]
    body["claims"] = [{"fabric": "ib-ndr-8x400", "gpus": 64, "efficiency": round(modelled, 4)}]
    (same,) = client.post("/api/v1/network/scaling", json=body).json()["verdicts"]
    assert same["verdict"] == "reproduced" and abs(same["gap_pct"]) < 0.1
    # at the baseline count too: efficiency is against a perfect network, so the baseline has one of its own
    body["claims"] = [{"fabric": "ib-ndr-8x400", "gpus": 8, "efficiency": 0.5}]
    (baseline,) = client.post("/api/v1/network/scaling", json=body).json()["verdicts"]
    assert baseline["gpus"] == 8 and baseline["modelled"] > 0.5 and baseline["verdict"] != "reproduced"


def test_tier_counts_are_inferred_or_refused(client: Any) -> None:
    one = client.post("/api/v1/network/bom", json={"nodes": 1, "rails": 8}).json()
    assert one["design"]["tiers"] == 1 and one["switches"] == 1
    big = client.post("/api/v1/network/bom", json={"nodes": 4096, "fabric": "ib-ndr-8x400"}).json()
    assert big["design"]["tiers"] == 3
    bad = client.post("/api/v1/network/bom", json={"nodes": 4096, "rails": 8, "tiers": 1})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "tiers"]
    inline = {"preset": "ib-ndr-8x400", "tiers": 1}
    r = client.post(
        "/api/v1/network/collective",
        json={
            "op": "all_reduce",
            "message_bytes": 2**30,
            "cluster": {"gpu": "H100-SXM", "nodes": 64, "fabric": inline},
        },
    )
    assert r.status_code == 422
    assert ["body", "cluster", "fabric", "tiers"] in [d["loc"] for d in r.json()["detail"]]
    bad_routing = {"preset": "roce-ecmp-8x400", "routing": "random", "qps_per_connection": 0}
    r = client.post(
        "/api/v1/network/scaling",
        json={"scenario": SEED_SCENARIO, "gpu_counts": [32, 64], "fabrics": [bad_routing]},
    )
    assert r.status_code == 422
    locs = [d["loc"] for d in r.json()["detail"]]
    assert ["body", "fabrics", "0", "routing"] in locs and [
        "body",
        "fabrics",
        "0",
        "qps_per_connection",
    ] in locs


def test_cli_refuses_too_few_tiers(capsys: pytest.CaptureFixture[str]) -> None:
    cli = run_cli(capsys, "network", "bom", "4096", "--tiers", "1")
    assert cli.returncode == 2 and "3 tiers are needed" in cli.stderr and "Traceback" not in cli.stderr
    inferred = run_cli(capsys, "network", "bom", "4096")
    assert inferred.returncode == 0 and "3-tier" in inferred.stdout


def test_through_the_real_server(live_server: Any) -> None:
    import httpx

    r = httpx.post(
        f"{live_server.url}/api/v1/network/collective",
        json={
            "op": "all_to_all",
            "message_bytes": 16 * 2**30,
            "cluster": {"gpu": "H100-SXM", "nodes": 4, "fabric": "ib-ndr-8x400"},
        },
        timeout=30,
    )
    assert r.status_code == 200, r.text
    res = r.json()["results"][0]
    # GTC25 S72583: 4 × DGX H100 all-to-all busbw 48 GB/s
    assert res["busbw_gbps"] == pytest.approx(48, rel=0.08)
    spec = httpx.get(f"{live_server.url}/api/v1/openapi.json", timeout=30).json()
    ops = {
        op["operationId"] for path in spec["paths"].values() for op in path.values() if "operationId" in op
    }
    assert {"network_collective", "network_scaling", "network_bom", "network_fabrics_list"} <= ops


def _doc_table(heading: str, first_cell: str) -> list[list[str]]:
    """The rows of the first markdown table under `heading` in docs/network.md whose header starts so."""
    text = (ROOT / "docs" / "network.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_cell} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_docs_seed_claims_table_matches_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_cli(capsys, "network", "seed-claims", "--json")
    assert out.returncode == 0, out.stderr
    series = {
        s["fabric_name"]: {p["num_gpus"]: p["scaling_efficiency"] for p in s["points"]}
        for s in json.loads(out.stdout)["series"]
    }
    order = ["ib-ndr-8x400", "roce-8x400", "roce-ecmp-32-nodes", "roce-ecmp-scattered"]
    rows = _doc_table("## The seed article's claims", "GPUs")
    assert len(rows) == 4
    for row in rows:
        gpus = int(row[0])
        for fabric, cell in zip(order, row[1:5], strict=True):
            assert cell == f"{series[fabric][gpus] * 100:.1f} %", (fabric, gpus)


def test_every_collective_estimate_says_how_far_off_its_kind_was(client: Any) -> None:
    """Each result carries the band of its kind (scale-up or scale-out, under or from 64 MiB) from the held-out
    published measurements (app/catalog/accuracy.json), the range bracketing the estimate; parameter overrides
    leave it out, since the band measured the published defaults."""
    from app.catalog import accuracy_table
    from app.core.accuracy import collective_band

    body = {
        "op": "all_reduce",
        "sweep": {"min_bytes": 2**20, "max_bytes": 2**30, "factor": 1024},
        "cluster": {"gpu": "H100-SXM", "nodes": 4, "fabric": "ib-ndr-8x400"},
    }
    results = client.post("/api/v1/network/collective", json=body).json()["results"]
    assert [r["accuracy"]["regime"] for r in results] == ["scale-out-small", "scale-out-large"]
    for r in results:
        band = collective_band(accuracy_table(), r["nodes"], r["message_bytes"])
        assert band is not None
        low, high = r["accuracy"]["time_range_us"]
        assert low == pytest.approx(r["time_us"] * band.ratio_low)
        assert high == pytest.approx(r["time_us"] * band.ratio_high)
        assert low <= r["time_us"] * max(1.0, band.ratio_low) and high >= r["time_us"] * min(
            1.0, band.ratio_high
        )
        assert f"{band.runs} published measurements" in r["accuracy"]["summary"]
    one_node = client.post(
        "/api/v1/network/collective",
        json={"op": "all_reduce", "message_bytes": 4 * 2**20, "cluster": {"gpu": "B200", "nodes": 1}},
    ).json()["results"][0]
    assert one_node["accuracy"]["regime"] == "scale-up-small"
    overridden = client.post(
        "/api/v1/network/collective", json={**body, "params": {"launch_overhead_s": 20e-6}}
    ).json()["results"]
    assert all(r["accuracy"] is None for r in overridden)


def test_cli_collective_prints_the_likely_range(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_cli(capsys, "network", "collective", "all_reduce", "--nodes", "2", "--size", "1MiB")
    assert out.returncode == 0, out.stderr
    assert "likely (us)" in out.stdout
    assert "likely: Of " in out.stdout and "across scale-up domains, messages under 64 MiB" in out.stdout
