"""Cost, goodput and storage through the HTTP API and the service layer on both databases."""

from __future__ import annotations

import uuid
from datetime import date, timedelta
from typing import Any

import pytest
from sqlmodel import Session, select

from app.core.errors import SpecError
from app.models.catalog import PriceRow
from app.schemas import cost as s
from app.services import cost as svc
from app.services import prices
from app.services.catalog import LOCAL_ADMIN, PUBLIC, Actor


def _add_row(session: Session, **overrides: Any) -> PriceRow:
    fields: dict[str, Any] = {
        "category": "cloud_gpu",
        "item": "test 8x H100 instance",
        "vendor": "TestCloud",
        "region": "test-1",
        "pricing_model": "on-demand",
        "unit": "instance-hour",
        "price_usd": 80.0,
        "usd_per_gpu_hour": 10.0,
        "gpu_name": "H100-SXM",
        "gpus_per_unit": 8,
        "price_date": date.today() - timedelta(days=10),
        "source": "https://example.test/prices",
        "builtin": False,
    }
    row = PriceRow(**(fields | overrides))
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def test_price_rows_resolve_with_date_source_and_staleness(db_url: str) -> None:
    from app.db import get_engine

    with Session(get_engine()) as session:
        fresh = _add_row(session)
        old = _add_row(session, pricing_model="1-yr reserved", price_date=date(2023, 7, 1))
        req = s.RunCostRequest.model_validate(
            {
                "num_gpus": 16,
                "gpu_hours": 1000,
                "options": [{"price_row_id": str(fresh.id)}, {"price_row_id": str(old.id)}],
            }
        )
        result = svc.run_cost(session, req, viewer=LOCAL_ADMIN)
    a, b = result.options
    assert a.price_id == str(fresh.id) and a.price_source == "https://example.test/prices"
    assert not a.stale and b.stale
    assert a.total_usd == pytest.approx(10_000.0)
    # the 1-yr reserved row is billed for 12 months on 16 GPUs even though the run takes 62.5 h
    assert b.commitment_exceeds_run
    assert b.total_usd == pytest.approx(16 * 12 * 730.5 * 10.0)
    names = {x.name for x in result.assumptions}
    assert f"price:{a.label}" in names
    dated = [x for x in result.assumptions if x.name == f"price:{b.label}"]
    assert dated and dated[0].date == "2023-07-01"


def test_unknown_price_row_names_the_field(db_url: str) -> None:
    from app.db import get_engine

    missing = uuid.uuid4()
    with Session(get_engine()) as session:
        req = s.RunCostRequest.model_validate(
            {
                "num_gpus": 8,
                "gpu_hours": 10,
                "options": [{"usd_per_gpu_hour": 2.0}, {"price_row_id": str(missing)}],
            }
        )
        with pytest.raises(SpecError) as err:
            svc.run_cost(session, req, viewer=LOCAL_ADMIN)
    assert [p.field for p in err.value.problems] == ["options.1.price_row_id"]


def test_default_cloud_rows_for_a_gpu_feed_the_breakeven(db_url: str) -> None:
    from app.db import get_engine
    from tests.auth_support import ensure_user

    buyer = Actor(ensure_user("breakeven-quotes@example.test").id)
    with Session(get_engine()) as session:
        _add_row(session, item="only-row-for-this-test", usd_per_gpu_hour=7.0, owner_id=buyer.user_id)
        rows = prices.default_cloud_rows(session, "h100", ["on-demand"], viewer=buyer)
        assert any(r.item == "only-row-for-this-test" for r in rows)
        assert all(r.gpu_name == "H100-SXM" for r in rows)
        req = s.TcoRequest.model_validate(
            {"utilisation": 0.9, "gpu": "H100", "pricing_models": ["on-demand"]}
        )
        result = svc.breakeven(session, req, viewer=buyer)
        assert len(result.breakevens) == len(rows)
        seven = [b for b in result.breakevens if "only-row-for-this-test" in b.label]
        assert seven and seven[0].usd_per_gpu_hour == 7.0
        count = len(session.exec(select(PriceRow)).all())
        assert "only-row-for-this-test" not in {
            r.item for r in prices.default_cloud_rows(session, "h100", viewer=PUBLIC)
        }
    book = prices.price_book(Session(get_engine()), viewer=LOCAL_ADMIN)
    assert len(book) == count


def test_cost_run_from_flops_over_http(client: Any) -> None:
    body = {
        "num_gpus": 1024,
        "params": 70e9,
        "tokens": 2e12,
        "gpu": "H100",
        "mfu": 0.4,
        "goodput": 0.9,
        "options": [{"usd_per_gpu_hour": 6.88, "label": "p5 on-demand"}],
    }
    r = client.post("/api/v1/cost/run", json=body)
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["total_flop"] == pytest.approx(8.4e23)
    productive = 8.4e23 / (989.4e12 * 0.4) / 3600
    assert data["productive_gpu_hours"] == pytest.approx(productive, rel=0.01)
    (option,) = data["options"]
    assert option["total_usd"] == pytest.approx(productive / 0.9 * 6.88, rel=0.01)
    assert {"training_flop_formula", "peak_flops_per_gpu", "goodput"} <= {
        a["name"] for a in data["assumptions"]
    }


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/api/v1/cost/run",
            {"num_gpus": 8, "gpu_hours": -1, "options": [{"usd_per_gpu_hour": 1}]},
            "gpu_hours",
        ),
        ("/api/v1/cost/tco", {"utilisation": 1.2}, "utilisation"),
        (
            "/api/v1/cost/breakeven",
            {"utilisation": -0.1, "options": [{"usd_per_gpu_hour": 5}]},
            "utilisation",
        ),
        (
            "/api/v1/cost/run",
            {"num_gpus": 8, "gpu_hours": 1, "options": [{"price_row_id": str(uuid.uuid4())}]},
            "price_row_id",
        ),
        (
            "/api/v1/goodput",
            {"num_gpus": 64, "job_mtbf_hours": -3, "checkpoint_stall_s": 10},
            "job_mtbf_hours",
        ),
        ("/api/v1/cost/spot", {"on_demand_usd_per_hour": 10, "spot_discount": 1.5}, "spot_discount"),
        (
            "/api/v1/cost/run",
            {
                "num_gpus": 8,
                "params": 7e9,
                "tokens": 1e11,
                "gpu": "H100",
                "dtype": "fp4",
                "mfu": 0.4,
                "options": [{"usd_per_gpu_hour": 2}],
            },
            "dtype",
        ),
    ],
)
def test_bad_input_is_422_naming_the_field(client: Any, path: str, body: dict[str, Any], field: str) -> None:
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert any(d["loc"][-1] == field for d in r.json()["detail"])


def test_tco_curves_and_breakeven_over_http(client: Any) -> None:
    seed = {
        "onprem": {
            "server_capex_usd_per_node": 250000,
            "network_share": 0,
            "cost_of_capital": 0,
            "node_power_kw": 0,
            "colo_usd_per_kw_month": 0,
            "maintenance_fraction_per_year": 0,
            "usd_per_fte_year": 0,
        },
        "utilisation": 0.9,
        "options": [{"usd_per_gpu_hour": 45 / 8, "label": "$45/node-h"}],
    }
    r = client.post("/api/v1/cost/breakeven", json=seed)
    assert r.status_code == 200, r.text
    (b,) = r.json()["breakevens"]
    assert b["breakeven_months"] == pytest.approx(8.45, abs=0.01)
    t = client.post(
        "/api/v1/cost/tco",
        json={"onprem": {"nodes": 4}, "gpu": "H100", "options": [{"usd_per_gpu_hour": 6.88}]},
    )
    assert t.status_code == 200, t.text
    data = t.json()
    curve = data["curves"]["cumulative_usd_vs_month"]
    assert len(curve["x"]) == 61
    assert set(curve["series"]) == {"on-prem", "on-prem net of resale", "option 1 (on-demand)"}
    assert curve["series"]["on-prem"][0] == pytest.approx(data["capex_total_usd"])
    sources = {a["name"]: a for a in data["assumptions"]}
    assert sources["pue"]["value"] == 1.56 and "Uptime" in sources["pue"]["source"] and sources["pue"]["date"]
    assert sources["server_capex_usd_per_node"]["value"] == 288142.0
    assert "archive.ph/D6Dub" in sources["server_capex_usd_per_node"]["source"]


def _tco(client: Any, gpu: str | None, gpus_per_node: int = 8, **onprem: float) -> Any:
    body: dict[str, Any] = {
        "onprem": {"nodes": 16, "gpus_per_node": gpus_per_node, "network_share": 0} | onprem,
        "options": [{"usd_per_gpu_hour": 4.0}],
    }
    if gpu is not None:
        body["gpu"] = gpu
    return client.post("/api/v1/cost/tco", json=body)


def test_tco_prices_each_gpu_from_its_own_server_row(client: Any) -> None:
    # DGX A100 320GB $199,000 (NVIDIA, 2020-05-21), 6.5 kW; GB200 NVL72 rack ~$3.0M, 120 kW for 72 GPUs
    a100 = _tco(client, "A100-40GB-SXM").json()
    assert a100["capex"]["servers"] == pytest.approx(16 * 199_000)
    used = {a["name"]: a for a in a100["assumptions"]}
    assert used["node_power_kw"]["value"] == 6.5 and used["server_capex_usd_per_node"]["date"] == "2020-05-21"
    gb200 = _tco(client, "GB200", gpus_per_node=4).json()
    assert gb200["capex"]["servers"] == pytest.approx(16 * 4 * 3.0e6 / 72)
    used = {a["name"]: a for a in gb200["assumptions"]}
    assert used["node_power_kw"]["value"] == pytest.approx(4 * 120 / 72)
    assert "NVL72" in used["server_capex_usd_per_node"]["source"]
    h100 = _tco(client, "H100").json()
    per_gpu = {
        name: r["capex"]["servers"] / (16 * n)
        for name, r, n in (("a100", a100, 8), ("gb200", gb200, 4), ("h100", h100, 8))
    }
    assert per_gpu["a100"] < per_gpu["h100"] < per_gpu["gb200"]


def test_tco_without_a_server_row_is_refused_never_priced_as_h100(client: Any) -> None:
    no_row = _tco(client, "L40S")
    assert no_row.status_code == 422
    (problem,) = no_row.json()["detail"]
    assert problem["loc"][-1] == "gpu" and "no on-prem server row for L40S" in problem["msg"]
    no_gpu = _tco(client, None)
    assert no_gpu.status_code == 422 and "server_capex_usd_per_node" in no_gpu.json()["detail"][0]["msg"]
    given = _tco(client, "L40S", server_capex_usd_per_node=100_000, node_power_kw=4.0)
    assert given.status_code == 200, given.text
    assert given.json()["capex"]["servers"] == pytest.approx(1.6e6)


def test_tco_overrides_replace_the_row_and_defaults(client: Any) -> None:
    overrides = {
        "server_capex_usd_per_node": 250_000,
        "node_power_kw": 12.0,
        "pue": 1.2,
        "usd_per_kwh": 0.1,
        "colo_usd_per_kw_month": 150.0,
        "maintenance_fraction_per_year": 0.05,
        "gpus_per_fte": 500.0,
        "usd_per_fte_year": 200_000,
    }
    data = _tco(client, "H100", **overrides).json()
    used = {a["name"]: a for a in data["assumptions"]}
    for name, value in overrides.items():
        assert used[name]["value"] == value and used[name]["source"] == "user input", name
    annual = data["annual"]
    assert annual["power"] == pytest.approx(16 * 12.0 * 0.75 * 0.9 * 1.2 * 24 * 365.25 * 0.1)
    assert annual["staff"] == pytest.approx(128 / 500 * 200_000)


def test_goodput_presets_and_estimate_over_http(client: Any) -> None:
    presets = client.get("/api/v1/goodput/presets").json()
    names = {p["name"] for p in presets["data"]}
    assert {"llama3-405b", "opt-175b", "bloom-176b"} <= names
    llama = next(p for p in presets["data"] if p["name"] == "llama3-405b")
    assert llama["job_mtbf_hours"] == pytest.approx(3.093, abs=0.001)
    r = client.post(
        "/api/v1/goodput",
        json={
            "num_gpus": 16384,
            "preset": "llama3-405b",
            "checkpoint_stall_s": 30,
            "restart_s": 300,
            "mfu": 0.4,
            "fail_slow_slowdown": 1,  # failures alone: what Meta's effective training time counts
        },
    )
    assert r.status_code == 200, r.text
    g = r.json()
    assert g["interruptions_per_day"] == pytest.approx(419 / 54, rel=1e-6)
    assert 0.88 < g["goodput"] < 0.93
    assert g["effective_mfu"] == pytest.approx(0.4 * g["goodput"])
    assert g["fail_slow_slowdown"] == 1 and g["breakdown"]["fail_slow"] == 0
    sync = client.post(
        "/api/v1/goodput", json={"num_gpus": 256, "preset": "llama3-405b", "checkpoint": {"params": 70e9}}
    ).json()
    asyn = client.post(
        "/api/v1/goodput",
        json={
            "num_gpus": 256,
            "preset": "llama3-405b",
            "checkpoint": {"params": 70e9},
            "async_checkpoint": True,
        },
    ).json()
    assert asyn["checkpoint_stall_s"] < sync["checkpoint_stall_s"]
    assert asyn["goodput"] > sync["goodput"]
    bad = client.post("/api/v1/goodput", json={"num_gpus": 8, "preset": "llama-9"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "preset"


def test_storage_and_spot_over_http(client: Any) -> None:
    r = client.post(
        "/api/v1/storage",
        json={
            "checkpoint": {"params": 70e9},
            "num_nodes": 2,
            "tokens_per_step": 4e6,
            "step_s": 0.5,
            "vocab_size": 128256,
        },
    )
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["checkpoint_bytes"] == pytest.approx(980e9, rel=1e-6)
    assert {t["tier"] for t in data["checkpoint_tiers"]} == {"local_nvme", "parallel_fs", "object_store"}
    obj = next(t for t in data["data_tiers"] if t["tier"] == "object_store")
    assert obj["warn"] and any("object_store" in w for w in data["warnings"])
    spot = client.post(
        "/api/v1/cost/spot",
        json={
            "on_demand_usd_per_hour": 55.04,
            "lost_work_hours": 1.5,
            "restart_s": 0,
            "target_net_savings": 0.22,
        },
    ).json()
    assert spot["net_savings"] == pytest.approx(1 - 0.4 / 0.85)
    assert spot["inversion"]["lost_hours_per_preemption"] == pytest.approx(4.872, abs=0.001)


SCENARIO = {
    "model": "Llama-3-70B",
    "cluster": {"gpu": "H100-SXM", "nodes": 8, "gpus_per_node": 8, "fabric": "ib-ndr-8x400"},
    "layout": {
        "tp": 4,
        "pp": 2,
        "dp": 8,
        "micro_batch": 1,
        "global_batch": 512,
        "zero": 1,
        "sequence_parallel": True,
        "recompute": "selective",
    },
    "training": {"seq_len": 8192, "tokens": 1.5e12},
}


def test_cost_run_and_storage_from_an_estimator_scenario(client: Any) -> None:
    r = client.post("/api/v1/cost/run", json={"scenario": SCENARIO, "options": [{"usd_per_gpu_hour": 6.88}]})
    assert r.status_code == 200, r.text
    data = r.json()
    given = {a["name"]: a["value"] for a in data["assumptions"]}
    # GPU-hours = tokens / (tokens/s from the estimator's step time) × GPUs
    assert data["productive_gpu_hours"] == pytest.approx(1.5e12 / given["tokens_per_s"] * 64 / 3600)
    assert data["wall_clock_hours"] == pytest.approx(1.5e12 / given["tokens_per_s"] / 3600)
    assert 0 < given["mfu"] < 1
    st = client.post("/api/v1/storage", json={"scenario": SCENARIO})
    assert st.status_code == 200, st.text
    body = st.json()
    assert body["bytes_per_token"] == 4  # Llama 3's 128k vocabulary needs uint32
    assert body["checkpoint_bytes"] == pytest.approx(14 * 70.55e9, rel=0.01)
    assert body["tokens_per_s"] == pytest.approx(given["tokens_per_s"], rel=1e-6)
    bad = dict(SCENARIO, layout=dict(SCENARIO["layout"], tp=3))
    r = client.post("/api/v1/cost/run", json={"scenario": bad, "options": [{"usd_per_gpu_hour": 6.88}]})
    assert r.status_code == 422
    assert all(d["loc"][:2] == ["body", "scenario"] for d in r.json()["detail"])


def test_tco_takes_network_capex_from_the_network_bom(client: Any) -> None:
    body = {
        "onprem": {"nodes": 128},
        "gpu": "H100",
        "network_bom": {"fabric": "ib-ndr-8x400"},
        "options": [{"usd_per_gpu_hour": 6.88}],
    }
    r = client.post("/api/v1/cost/tco", json=body)
    assert r.status_code == 200, r.text
    data = r.json()
    (bom,) = [a for a in data["assumptions"] if a["name"] == "network_capex_usd"]
    assert data["capex"]["network"] == bom["value"] > 0
    assert "switches" in bom["source"]
    assert not any(a["name"] == "network_share_of_capex" for a in data["assumptions"])
    # the BOM for a 2-tier 128-node NDR fabric lands near the Cheah sheet's $33,984 per node
    assert 25_000 < data["capex"]["network"] / 128 < 45_000
    bad = client.post("/api/v1/cost/tco", json={**body, "network_bom": {"fabric": "no-such-fabric"}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][:3] == ["body", "network_bom", "fabric"]


def test_goodput_from_an_estimator_scenario(client: Any) -> None:
    r = client.post(
        "/api/v1/goodput", json={"scenario": SCENARIO, "preset": "llama3-405b", "tier": "parallel_fs"}
    )
    assert r.status_code == 200, r.text
    g = r.json()
    assert g["num_gpus"] == 64
    assert g["checkpoint_bytes"] == pytest.approx(14 * 70.55e9, rel=0.01)
    mfu = next(a["value"] for a in g["assumptions"] if a["name"] == "mfu")
    assert g["effective_mfu"] == pytest.approx(mfu * g["goodput"])
    # the run length comes from the scenario's tokens and step time, stretched by goodput
    assert g["run"]["useful_days"] == pytest.approx(g["run"]["wall_days"] * g["goodput"])
    assert g["run"]["interruptions"] == pytest.approx(g["run"]["wall_days"] * g["interruptions_per_day"])
    missing = client.post("/api/v1/goodput", json={"preset": "llama3-405b", "checkpoint_stall_s": 5})
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"][-1] == "num_gpus"


def test_limits_return_json_nulls_not_errors(client: Any) -> None:
    free = client.post(
        "/api/v1/goodput", json={"num_gpus": 8, "job_mtbf_hours": 100, "checkpoint_stall_s": 0}
    )
    assert free.status_code == 200, free.text
    assert free.json()["young_interval_s"] is None and free.json()["goodput"] > 0.99
    hopeless = client.post(
        "/api/v1/cost/spot",
        json={"on_demand_usd_per_hour": 10, "preemptions_per_day": 24, "lost_work_hours": 1, "restart_s": 0},
    )
    assert hopeless.status_code == 200, hopeless.text
    body = hopeless.json()
    assert (
        body["useful_fraction"] == 0
        and body["cost_per_useful_hour_spot"] is None
        and body["net_savings"] is None
    )


def test_no_progress_and_absurd_durations_are_422_naming_the_input(client: Any) -> None:
    hopeless = client.post(
        "/api/v1/goodput", json={"num_gpus": 16384, "job_mtbf_hours": 0.01, "checkpoint_stall_s": 600}
    )
    assert hopeless.status_code == 422
    (problem,) = hopeless.json()["detail"]
    assert problem["loc"][-1] == "job_mtbf_hours" and "no progress" in problem["msg"]
    century = client.post(
        "/api/v1/cost/run",
        json={
            "num_gpus": 1024,
            "params": 70e9,
            "tokens": 1e18,
            "mfu": 0.4,
            "gpu": "H100",
            "options": [{"usd_per_gpu_hour": 2}],
        },
    )
    assert century.status_code == 422 and century.json()["detail"][0]["loc"][-1] == "tokens"
    assert "years of wall time" in century.json()["detail"][0]["msg"]
    long_run = client.post(
        "/api/v1/goodput",
        json={"num_gpus": 8, "job_mtbf_hours": 100, "checkpoint_stall_s": 10, "run_days": 40_000},
    )
    assert long_run.status_code == 422 and long_run.json()["detail"][0]["loc"][-1] == "run_days"


def test_spot_loses_work_by_default_and_bills_the_fleet_kept_while_waiting(client: Any) -> None:
    base = {"on_demand_usd_per_hour": 10, "preemptions_per_day": 2.4, "restart_s": 0}
    periodic = client.post("/api/v1/cost/spot", json=base).json()
    assert periodic["lost_hours_per_preemption"] == pytest.approx(0.5)  # half the default 1-hour interval
    hooked = client.post("/api/v1/cost/spot", json=base | {"checkpoint_on_notice": True}).json()
    assert hooked["lost_hours_per_preemption"] == 0
    waiting = client.post(
        "/api/v1/cost/spot",
        json=base | {"reacquire_wait_s": 3600, "billed_while_waiting_fraction": 0.5},
    ).json()
    assert waiting["breakdown_per_day"]["waiting"] == pytest.approx(2.4 * 0.5)


def test_llama3_scale_goodput_uses_a_filesystem_that_scales_or_the_given_one(client: Any) -> None:
    body = {
        "num_gpus": 16384,
        "preset": "llama3-405b",
        "checkpoint": {"params": 405e9},
        "tier": "parallel_fs",
        "mfu": 0.4,
    }
    body["fail_slow_slowdown"] = 1  # failures alone, as Meta's effective training time counts them
    scaled = client.post("/api/v1/goodput", json=body).json()
    fixed = client.post("/api/v1/goodput", json=body | {"parallel_fs_gb_per_s": 100}).json()
    # Meta reports > 90 % effective training time; a 100 GB/s filesystem for 2,048 nodes gives 83 %
    assert scaled["goodput"] > 0.9 > fixed["goodput"] > 0.8
    assert scaled["sync_stall_s"] < fixed["sync_stall_s"]
    tiers = client.post(
        "/api/v1/storage",
        json={
            "checkpoint": {"params": 70e9},
            "num_nodes": 2048,
            "tokens_per_step": 4e6,
            "step_s": 10,
            "vocab_size": 128000,
            "parallel_fs_gb_per_s": 250,
        },
    ).json()["checkpoint_tiers"]
    (pfs,) = [t for t in tiers if t["tier"] == "parallel_fs"]
    assert pfs["bandwidth_bytes_per_s"] == pytest.approx(250e9)


def test_fail_slows_stretch_multi_node_jobs_by_the_published_average_unless_set(client: Any) -> None:
    from app.core.goodput import FAIL_SLOW_SLOWDOWN

    body = {"preset": "llama3-405b", "checkpoint_stall_s": 30, "restart_s": 600}
    one_node = client.post("/api/v1/goodput", json=body | {"num_gpus": 8}).json()
    two_nodes = client.post("/api/v1/goodput", json=body | {"num_gpus": 16}).json()
    off = client.post("/api/v1/goodput", json=body | {"num_gpus": 16, "fail_slow_slowdown": 1}).json()
    assert FAIL_SLOW_SLOWDOWN == 1.34  # Greyhound (USENIX ATC '25): large training jobs, 1.34x on average
    assert one_node["fail_slow_slowdown"] == 1 and one_node["breakdown"]["fail_slow"] == 0
    assert two_nodes["fail_slow_slowdown"] == 1.34
    assert two_nodes["breakdown"]["fail_slow"] == pytest.approx(0.34)
    # the stretch adds to the wall time per useful second; failures and checkpoints are the same as without it
    assert 1 / two_nodes["goodput"] == pytest.approx(1 / off["goodput"] + 0.34)
    assert sum(two_nodes["breakdown"].values()) == pytest.approx(1 / two_nodes["goodput"])
    notes = {a["name"]: a for a in two_nodes["assumptions"]}
    assert "Greyhound" in notes["fail_slow_slowdown"]["source"]
    bad = client.post("/api/v1/goodput", json=body | {"num_gpus": 16, "fail_slow_slowdown": 0.9})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "fail_slow_slowdown"


def test_epoch_takes_dates_and_says_when_it_has_none(client: Any) -> None:
    base = {"chips": 16384, "training_hours": 2142, "server_price_per_chip_usd": 44489.88, "pue": 1.1}
    undated = client.post("/api/v1/cost/epoch", json=base).json()
    notes = {a["name"]: a for a in undated["assumptions"]}
    assert (
        notes["years_since_acquisition"]["value"] == 0
        and "no value decay" in notes["years_since_acquisition"]["source"]
    )
    dated = client.post(
        "/api/v1/cost/epoch",
        json=base | {"gpu": "H100", "price_date": "2022-09-29", "publication_date": "2024-07-23"},
    ).json()
    notes = {a["name"]: a for a in dated["assumptions"]}
    assert (
        notes["acquisition_date"]["value"] == "2022-09-29"
        and notes["training_start"]["value"] == "2024-02-25"
    )
    # Epoch AI's $51.04M for Llama 3.1-405B: within 10 % dated, +44 % without the decay
    assert dated["amortized_hardware_energy_usd"] == pytest.approx(51.04e6, rel=0.10)
    assert undated["amortized_hardware_energy_usd"] > 1.4 * 51.04e6
    bad = client.post(
        "/api/v1/cost/epoch",
        json={k: v for k, v in base.items() if k != "training_hours"}
        | {"training_start": "2024-03-01", "training_end": "2024-02-01"},
    )
    assert bad.status_code == 422 and "training_end" in {d["loc"][-1] for d in bad.json()["detail"]}


def test_epoch_energy_follows_the_gpu_given(client: Any) -> None:
    # GPT-4's A100s: 400 W TDP and Epoch's DGX A100 ratio 6.5 kW / 8 / 0.4 kW = 2.03 (not the H100 defaults)
    body = {"chips": 25000, "training_hours": 2280, "server_price_per_chip_usd": 24875.0, "pue": 1.25}
    a100 = client.post(
        "/api/v1/cost/epoch", json=body | {"gpu": "A100-40GB-SXM", "usd_per_kwh": 0.0806}
    ).json()
    kw = 0.4 * (6.5 / 8) / 0.4 * 0.75 * 1.25
    assert a100["amortized_breakdown"]["energy"] == pytest.approx(kw * 25000 * 2280 * 0.0806)
    plain = client.post("/api/v1/cost/epoch", json=body | {"usd_per_kwh": 0.0806}).json()
    notes = {a["name"]: a for a in plain["assumptions"]}
    assert notes["chip"]["value"] == "H100-SXM" and "no gpu given" in notes["chip"]["source"]
