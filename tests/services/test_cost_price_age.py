"""Staleness by category (GPU cloud prices 6 months), and what the price book refuses: dates after today,
unknown categories, non-positive durations."""

from __future__ import annotations

import csv
import re
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from app import catalog
from app.core import price_age
from app.models.catalog import PriceRow
from app.schemas import cost as s
from app.services import cost as svc
from app.services import prices
from app.services.catalog import LOCAL_ADMIN

TODAY = date(2026, 12, 4)


def test_each_category_has_its_own_threshold() -> None:
    assert price_age.stale_after_days("cloud_gpu") == 183  # six months
    assert price_age.stale_after_days("onprem_server") == 365
    assert not price_age.is_stale(TODAY - timedelta(days=150), TODAY, "cloud_gpu")
    assert price_age.is_stale(TODAY - timedelta(days=200), TODAY, "cloud_gpu")
    assert not price_age.is_stale(TODAY - timedelta(days=200), TODAY, "onprem_server")
    assert all(why for _, why in price_age.STALE_AFTER_MONTHS.values())
    with pytest.raises(KeyError):
        price_age.stale_after_days("cloud_gpus")


def test_every_built_in_category_is_known() -> None:
    categories = {r["category"] for r in catalog.price_rows()}
    assert categories <= set(price_age.STALE_AFTER_MONTHS)


def test_future_dates_and_unknown_categories_are_problems() -> None:
    problems = price_age.row_problems("cloud_gpus", TODAY + timedelta(days=1), TODAY)
    assert [p.field for p in problems] == ["category", "price_date"]
    assert "known: cloud_discount, cloud_gpu" in problems[0].message
    assert price_age.row_problems("cloud_gpu", TODAY, TODAY) == []


def _write(tmp_path: Path, **changes: str) -> Path:
    with catalog.PRICES_FILE.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    assert header is not None
    path = tmp_path / "prices.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows([rows[0], rows[0] | changes])
    return path


def test_the_price_file_refuses_a_future_date_and_an_unknown_category(tmp_path: Path) -> None:
    future = (date.today() + timedelta(days=30)).isoformat()
    with pytest.raises(ValueError, match=r"prices.csv line 3, .*price_date: .* is after today"):
        catalog.read_price_rows(_write(tmp_path, date=future))
    with pytest.raises(ValueError, match=r"prices.csv line 3, .*unknown category 'cloud-gpu'"):
        catalog.read_price_rows(_write(tmp_path, category="cloud-gpu"))


def test_the_api_refuses_a_future_dated_or_uncategorised_row(client: Any) -> None:
    body = {
        "category": "cloud_gpu",
        "item": "future quote",
        "pricing_model": "on-demand",
        "unit": "GPU-hour",
        "price_usd": 2.0,
        "price_date": (date.today() + timedelta(days=400)).isoformat(),
        "source": "quote",
        "includes": "GPU-hour",
    }
    r = client.post("/api/v1/prices", json=body)
    assert r.status_code == 422 and [d["loc"][-1] for d in r.json()["detail"]] == ["price_date"]
    r = client.post("/api/v1/prices", json=body | {"price_date": date.today().isoformat(), "category": "gpu"})
    assert r.status_code == 422 and [d["loc"][-1] for d in r.json()["detail"]] == ["category"]
    ok = client.post("/api/v1/prices", json=body | {"price_date": date.today().isoformat()})
    assert ok.status_code == 201, ok.text
    moved = client.patch(
        f"/api/v1/prices/{ok.json()['id']}",
        json={"price_date": (date.today() + timedelta(days=2)).isoformat()},
    )
    assert moved.status_code == 422 and moved.json()["detail"][0]["loc"][-1] == "price_date"


def test_a_cloud_quote_is_stale_after_six_months(db_url: str) -> None:
    from app.db import get_engine

    with Session(get_engine()) as session:
        rows = []
        for age in (150, 200):
            row = PriceRow(
                category="cloud_gpu",
                item=f"age test {age}",
                vendor="AgeCloud",
                pricing_model="on-demand",
                unit="GPU-hour",
                price_usd=3.0,
                usd_per_gpu_hour=3.0,
                gpu_name="H100-SXM",
                gpus_per_unit=1,
                price_date=date.today() - timedelta(days=age),
                source="https://example.test/age",
                builtin=False,
            )
            session.add(row)
            rows.append(row)
        session.commit()
        options = [{"price_row_id": str(r.id)} for r in rows]
        req = s.RunCostRequest.model_validate({"num_gpus": 8, "gpu_hours": 10, "options": options})
        fresh, old = svc.run_cost(session, req, viewer=LOCAL_ADMIN).options
        book = {p.item: p.stale for p in prices.price_book(session, category="cloud_gpu", viewer=LOCAL_ADMIN)}
    assert not fresh.stale and old.stale
    assert book["age test 150"] is False and book["age test 200"] is True


def test_the_stale_filter_applies_and_states_each_categorys_threshold(
    client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli_support import run_main

    rows = {}
    for age in (150, 200):  # a cloud quote half a year old is stale, though under a year
        body = {
            "category": "cloud_gpu",
            "item": f"filter test {age} {uuid.uuid4().hex[:8]}",
            "pricing_model": "on-demand",
            "unit": "GPU-hour",
            "price_usd": 2.0,
            "price_date": (date.today() - timedelta(days=age)).isoformat(),
            "source": "quote",
            "includes": "GPU-hour",
        }
        created = client.post("/api/v1/prices", json=body)
        assert created.status_code == 201, created.text
        rows[age] = body["item"]
    r = client.get("/api/v1/cost/prices", params={"stale_only": True, "category": "cloud_gpu"})
    assert r.status_code == 200, r.text
    listed = {row["item"] for row in r.json()["data"]}
    assert rows[200] in listed and rows[150] not in listed
    # the API and the command line say that rule, every category's threshold named
    operation = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/cost/prices"]["get"]
    (stale_only,) = [p for p in operation["parameters"] if p["name"] == "stale_only"]
    code, out, _ = run_main(["cost", "prices", "--help"], capsys)
    assert code == 0
    for text in (stale_only["description"], " ".join(out.replace("│", " ").split())):
        assert "a year" not in text and price_age.stale_rule() in text
    rule = price_age.stale_rule()
    assert "6 months (183 days) for cloud_gpu;" in rule
    for category, (months, _) in price_age.STALE_AFTER_MONTHS.items():
        assert re.search(rf"{months:g} months \(\d+ days\) for [a-z_, ]*\b{category}\b", rule), category


def test_the_cost_page_of_the_docs_states_the_thresholds_of_the_code() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "cost.md").read_text()
    table = text.split("| category | stale after | why |")[1].split("\n\n")[0]
    documented = {}
    for line in table.splitlines()[2:]:
        categories, after, _ = (cell.strip() for cell in line.strip("|").split("|"))
        for category in categories.split(", "):
            documented[category] = float(after.split(" months")[0])
    assert documented == {c: months for c, (months, _) in price_age.STALE_AFTER_MONTHS.items()}


def test_zero_gpu_hours_is_refused(client: Any) -> None:
    r = client.post(
        "/api/v1/cost/run", json={"num_gpus": 8, "gpu_hours": 0, "options": [{"usd_per_gpu_hour": 2}]}
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "gpu_hours"


def test_dated_defaults_are_marked_stale_like_prices(client: Any) -> None:
    body = {"onprem": {"nodes": 2}, "gpu": "H100", "options": [{"usd_per_gpu_hour": 3.0}]}
    used = {a["name"]: a for a in client.post("/api/v1/cost/tco", json=body).json()["assumptions"]}
    # CTWatch 2006 staff ratio and maintenance share: decades past the staff and facility thresholds
    assert used["gpus_per_fte"]["stale"] and used["maintenance_fraction_per_year"]["stale"]
    assert used["residual_fraction"]["date"] == "2025"
    page = client.get("/cost?nodes=2")
    assert '<th scope="row">gpus_per_fte <span class="badge badge-warn">stale</span></th>' in page.text


def test_a_default_goes_stale_at_its_categorys_threshold() -> None:
    from app.core.storage import Assumption

    items = [
        Assumption("residual_fraction", 0.2, "", "curve", "2025"),
        Assumption("pue", 1.5, "", "x", "2024"),
    ]
    fresh, pue = svc.cost_assumptions(items, today=TODAY)
    assert not fresh.stale and pue.stale  # depreciation figures: 3 years; facility figures: 1 year
    later, _ = svc.cost_assumptions(items, today=date(2028, 6, 1))
    assert later.stale
