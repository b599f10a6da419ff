"""Price terms: each cloud price row's billing term and unit are parsed, refused when unreadable, and shown in
the cost of a run (hourly, or a committed term with the unused commitment)."""

from __future__ import annotations

import csv
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from app import catalog
from app.core import cost
from app.core.errors import SpecError
from app.core.price_terms import parse_term, parse_unit, usd_per_gpu_hour
from app.models.catalog import PriceRow
from app.schemas import cost as s
from app.services import cost as svc
from app.services import prices
from app.services.catalog import PUBLIC, Actor
from tests.auth_support import ensure_user


@pytest.mark.parametrize(
    ("text", "kind", "months"),
    [
        ("on-demand", "on_demand", 0),
        ("pay-as-you-go", "on_demand", 0),
        ("PAYG / 1y / 3y", "on_demand", 0),  # the price quoted is the first term's: pay as you go
        ("1-yr reserved (pre-cut)", "reserved", 12),
        ("3-yr CUD", "reserved", 36),
        ("1-yr contract", "reserved", 12),
        ("1y", "reserved", 12),
        ("EC2 Capacity Block", "capacity_block", 0),
        ("spot", "spot", 0),
        ("marketplace median", "on_demand", 0),
        ("", "on_demand", 0),
    ],
)
def test_pricing_model_text_parses_to_a_term(text: str, kind: str, months: float) -> None:
    term = parse_term(text)
    assert (term.kind, term.commitment_months) == (kind, months)


@pytest.mark.parametrize("text", ["negotiated deal", "reserved", "committed use", "/ 1y", "purchase"])
def test_unreadable_terms_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_term(text)


def test_units_normalise_to_a_gpu_hour() -> None:
    assert parse_unit("GPU-hour") == "gpu_hour" and parse_unit("instance-hour") == "instance_hour"
    assert usd_per_gpu_hour(55.04, "instance_hour", 8) == pytest.approx(6.88)
    assert usd_per_gpu_hour(2.99, "gpu_hour", 8) == 2.99
    with pytest.raises(ValueError):
        parse_unit("month")
    with pytest.raises(ValueError):
        usd_per_gpu_hour(55.04, "instance_hour", None)


def test_every_cloud_row_of_the_price_book_has_a_term_and_unit() -> None:
    rows = [r for r in catalog.price_rows() if r["category"] == "cloud_gpu"]
    assert rows
    for row in rows:
        parse_term(row["pricing_model"])
        parse_unit(row["unit"])


def test_a_price_file_row_with_an_unreadable_term_is_refused_with_its_line(tmp_path: Path) -> None:
    with catalog.PRICES_FILE.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    assert header is not None
    bad = tmp_path / "prices.csv"
    with bad.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows[:3])
        writer.writerow(rows[0] | {"pricing_model": "special deal", "item": "odd row"})
    with pytest.raises(ValueError, match=r"prices.csv line 5, odd row \(AWS\): 'special deal'"):
        catalog.read_price_rows(bad)


def test_azure_payg_rows_bill_by_the_hour(db_url: str) -> None:
    from app.db import get_engine

    with Session(get_engine()) as session:
        req = s.RunCostRequest.model_validate({"num_gpus": 8, "gpu_hours": 10_000, "gpu": "A100-40GB-SXM"})
        result = svc.run_cost(session, req, viewer=PUBLIC)
    azure = [o for o in result.options if "Azure" in o.label]
    assert azure
    for option in azure:
        # 10,000 GPU-hours at $3.40: $34,000, no 12-month commitment
        assert option.term == "on_demand" and option.commitment_months == 0
        assert option.total_usd == pytest.approx(10_000 * option.usd_per_gpu_hour)
        assert option.billing == "hourly"
    reserved = [o for o in result.options if o.term == "reserved"]
    assert reserved and all("unused after the run" in o.billing for o in reserved)
    unused = reserved[0].breakdown["unused_commitment"]
    assert f"${unused:,.0f}" in reserved[0].billing


def _row(session: Session, **overrides: Any) -> PriceRow:
    fields: dict[str, Any] = {
        "category": "cloud_gpu",
        "item": "test 8x H100 instance, instance-hour only",
        "vendor": "InstanceCloud",
        "pricing_model": "on-demand",
        "unit": "instance-hour",
        "price_usd": 40.0,
        "usd_per_gpu_hour": None,
        "gpu_name": "H100-SXM",
        "gpus_per_unit": 8,
        "price_date": date.today() - timedelta(days=5),
        "source": "https://example.test/instance",
        "builtin": False,
    }
    row = PriceRow(**(fields | overrides))
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def test_an_instance_hour_quote_is_normalised_not_left_out(db_url: str) -> None:
    from app.db import get_engine

    buyer = Actor(ensure_user("instance-quotes@example.test").id)
    with Session(get_engine()) as session:
        row = _row(session, owner_id=buyer.user_id)
        rows = prices.default_cloud_rows(session, "H100", viewer=buyer)
        assert row.id in {r.id for r in rows}
        req = s.RunCostRequest.model_validate({"num_gpus": 8, "gpu_hours": 100, "gpu": "H100"})
        (mine,) = [o for o in svc.run_cost(session, req, viewer=buyer).options if o.price_id == str(row.id)]
    assert mine.usd_per_gpu_hour == pytest.approx(5.0) and mine.total_usd == pytest.approx(500.0)


def test_a_user_row_with_an_unreadable_term_is_refused(client: Any) -> None:
    body = {
        "category": "cloud_gpu",
        "item": "odd quote",
        "pricing_model": "special deal",
        "unit": "per month",
        "price_usd": 2.0,
        "price_date": date.today().isoformat(),
        "source": "quote",
        "includes": "GPU-hour",
    }
    r = client.post("/api/v1/prices", json=body)
    assert r.status_code == 422
    fields = {d["loc"][-1] for d in r.json()["detail"]}
    assert fields == {"pricing_model", "unit"}
    ok = client.post("/api/v1/prices", json=body | {"pricing_model": "3-yr reserved", "unit": "GPU-hour"})
    assert ok.status_code == 201, ok.text
    patched = client.patch(f"/api/v1/prices/{ok.json()['id']}", json={"pricing_model": "whatever"})
    assert patched.status_code == 422 and patched.json()["detail"][0]["loc"][-1] == "pricing_model"


def test_an_inline_option_with_an_unreadable_term_is_a_problem_named() -> None:
    req = s.RunCostRequest.model_validate(
        {"num_gpus": 8, "gpu_hours": 10, "options": [{"usd_per_gpu_hour": 2, "pricing_model": "odd"}]}
    )
    with pytest.raises(SpecError) as err:
        svc.run_cost(None, req, viewer=PUBLIC)
    assert [p.field for p in err.value.problems] == ["options.0.pricing_model"]


def test_billing_words_follow_the_term() -> None:
    inputs = cost.RunInputs(num_gpus=8, gpu_hours=800)  # 100 hours of wall time
    quotes = [
        cost.PriceQuote("od", 4.0),
        cost.PriceQuote("spot", 2.0, pricing_model="spot", term="spot"),
        cost.PriceQuote("1y", 3.0, pricing_model="1-yr reserved", commitment_months=12, term="reserved"),
    ]
    od, spot, reserved = cost.run_cost(inputs, quotes).options
    assert od.billing == "hourly" and spot.billing == "hourly, preemptible"
    unused = 8 * (cost.HOURS_PER_YEAR - 100) * 3.0
    assert reserved.breakdown["unused_commitment"] == pytest.approx(unused)
    assert (
        reserved.billing == f"12-month commitment billed in full: ${unused:,.0f} of it unused after the run"
    )
