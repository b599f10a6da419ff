"""Scaling efficiency across fabrics (through the real estimator) and network capex from the database price book."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest
from sqlmodel import Session

from app.catalog import find_gpu, find_model
from app.catalog.fabrics import find_fabric
from app.core.errors import SpecError
from app.core.hardware import ClusterSpec
from app.core.layout import Layout
from app.core.scaling import ScalingRun, required_assumption, scaling_curve

MODEL = find_model("Llama-2-70B")
CLUSTER = ClusterSpec(find_gpu("H100-SXM"), 4, 8, fabric=find_fabric("ib-ndr-8x400"))
LAYOUT = Layout(
    tp=8, pp=4, dp=1, micro_batch=1, global_batch=16, zero=1, sequence_parallel=True, recompute="selective"
)
FABRICS = {
    "ib": find_fabric("ib-ndr-8x400"),
    "roce": find_fabric("roce-8x400"),
    "tcp": find_fabric("ethernet-tcp-100"),
}


def test_faster_fabric_never_scales_worse_and_baseline_is_one() -> None:
    res = scaling_curve(ScalingRun(MODEL, CLUSTER, LAYOUT, 4096), [32, 64, 128, 256], FABRICS, tokens=1e12)
    by = {s.fabric_name: s for s in res.series}
    for s in res.series:
        first = s.points[0]
        assert first.efficiency_vs_baseline == pytest.approx(1.0)
        # against the ideal (the baseline on a perfect network) the baseline's own penalty shows
        assert first.scaling_efficiency == pytest.approx(
            first.tokens_per_s_per_gpu / res.ideal_tokens_per_s_per_gpu
        )
        assert first.scaling_efficiency < 1.0
        effs = [p.scaling_efficiency for p in s.points]
        assert effs == sorted(effs, reverse=True)  # weak scaling with a growing DP ring only loses
        for p in s.points:
            assert p.network_efficiency <= 1.0
            assert p.time_to_train_s == pytest.approx(1e12 / p.tokens_per_s)
    for n in (64, 128, 256):
        ib, tcp = by["ib"].at(n), by["tcp"].at(n)
        assert ib is not None and tcp is not None
        assert ib.scaling_efficiency > tcp.scaling_efficiency
        assert ib.exposed_comm_s["dp_comm"] < tcp.exposed_comm_s["dp_comm"]
    # InfiniBand: the seed article's "98 % up to 128 GPUs" is within a few points of the model
    assert by["ib"].at(128).scaling_efficiency == pytest.approx(0.98, abs=0.04)  # type: ignore[union-attr]


def test_strong_scaling_keeps_the_global_batch() -> None:
    lay = replace(LAYOUT, global_batch=64)
    res = scaling_curve(
        ScalingRun(MODEL, CLUSTER, lay, 4096, mode="strong"), [32, 64, 128], {"ib": FABRICS["ib"]}
    )
    assert [p.global_batch for p in res.series[0].points] == [64, 64, 64]
    assert res.series[0].points[-1].step_time_s < res.series[0].points[0].step_time_s


def test_bad_gpu_counts_list_every_problem() -> None:
    with pytest.raises(SpecError) as err:
        scaling_curve(ScalingRun(MODEL, CLUSTER, LAYOUT, 4096, mode="sideways"), [33, 40], FABRICS, tokens=-1)  # type: ignore[arg-type]
    fields = [p.field for p in err.value.problems]
    assert fields.count("gpu_counts") >= 2 and "tokens" in fields and "mode" in fields


def test_required_derate_reproduces_the_target() -> None:
    req = required_assumption(
        "congestion_derate", 0.82, ScalingRun(MODEL, CLUSTER, LAYOUT, 4096), 32, 64, FABRICS["roce"]
    )
    assert req.value is not None and 0.05 < req.value < 0.6
    derated = replace(FABRICS["roce"], congestion_derate=req.value)
    res = scaling_curve(ScalingRun(MODEL, CLUSTER, LAYOUT, 4096), [32, 64], {"r": derated})
    assert res.series[0].points[1].scaling_efficiency == pytest.approx(0.82, abs=0.005)
    latency = required_assumption(
        "base_latency_s", 0.82, ScalingRun(MODEL, CLUSTER, LAYOUT, 4096), 32, 64, FABRICS["roce"]
    )
    # latency alone costs 18 % only at an absurd value: the gradients move in buckets of 40M+ parameters (tens of
    # collectives a step), so it would take milliseconds per hop where fabrics have microseconds
    assert latency.value is None or latency.value > 1e-3


def test_bom_prices_come_from_the_database_price_book(db_url: str) -> None:
    from app.db import get_engine
    from app.schemas.network import BomIn
    from app.services.catalog import PUBLIC, Actor, add_price_row
    from app.services.network import run_bom
    from tests.auth_support import ensure_user

    buyer = Actor(ensure_user("bom-quotes@example.test").id)
    with Session(get_engine()) as session:
        bom = run_bom(BomIn(nodes=128, fabric="ib-ndr-8x400"), session, viewer=buyer)
        assert bom.cost is not None and bom.cost.prices.switch_usd == 36_000
        add_price_row(
            session,
            {
                "category": "onprem_network",
                "item": "64-port 400G switch (negotiated)",
                "unit": "switch",
                "price_usd": 20_000,
                "price_date": date.today(),  # newer than every built-in row (future dates are refused)
                "source": "test quote",
                "includes": "switch only",
            },
            owner_id=buyer.user_id,
        )
        rows_switch = run_bom(BomIn(nodes=128, fabric="ib-ndr-8x400"), session, viewer=buyer).cost
        assert rows_switch is not None
        # the newest matching row of the price book wins, the user's own rows included
        assert rows_switch.prices.switch_usd == 20_000
        assert "negotiated" in rows_switch.prices.source["switch_usd"]
        others = run_bom(BomIn(nodes=128, fabric="ib-ndr-8x400"), session, viewer=PUBLIC).cost
        assert others is not None and others.prices.switch_usd == 36_000  # nobody else's BOM moves
        explicit = run_bom(BomIn(nodes=128, prices={"switch_usd": 1.0}), session, viewer=buyer).cost  # type: ignore[arg-type]
        assert explicit is not None and explicit.breakdown_usd["switches"] == 48.0
