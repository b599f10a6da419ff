"""What a planning meeting tripped over, walking the product (HTML over the real app): a saved layout that does not
fit in GPU memory has no time to train and no cost in the plan list or on the compare page (its own page says "none:
it cannot run"); the plan list's days are the wall-clock days its cost is priced on; list inputs read as lists; the
API docs list every operation once; destructive forms ask first."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from tests.plans_support import small_scenario

CANNOT_RUN = "none: does not fit"  # app.web.pages._compare.CANNOT_RUN
# Llama-3 8B with one GPU per replica, no recompute and 16 sequences per micro-batch: about 400 GiB per GPU
NO_FIT = {"tp": 1, "dp": 16, "micro_batch": 16, "recompute": "none", "sequence_parallel": False}


def _save(client: Any, name: str, **layout: Any) -> tuple[str, dict[str, Any]]:
    r = client.post("/api/v1/plans", json={"name": name, "scenario": small_scenario(**layout)})
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["summary"]


def _cells(page: str, start: str) -> list[str]:
    """The cells of the table row that starts with `start` (a row header's text)."""
    row = re.search(rf"{re.escape(start)}</(?:a></)?th>(.*?)</tr>", page, re.S)
    assert row, f"no row {start!r}"
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]


def test_the_plan_list_gives_no_time_or_cost_to_a_layout_that_cannot_run(client: Any) -> None:
    _, fits = _save(client, "walk-list fits")
    _, stuck = _save(client, "walk-list stuck", **NO_FIT)
    # the service keeps the numbers of a layout that does not fit
    assert fits["fits"] and not stuck["fits"] and stuck["cost_per_run_usd"] > 0
    page = client.get("/plans?q=walk-list").text
    assert "Time to train (days, wall clock)" in page
    # columns after the name: owner, sharing, revision, GPUs, fabric, memory, days, cost, MFU, updated
    runs = _cells(page, "walk-list fits")
    assert runs[6] == f"{fits['wall_clock_days']:,.1f}" != f"{fits['time_to_train_days']:,.1f}"
    assert runs[7] == f"{fits['cost_per_run_usd']:,.0f}"
    cannot = _cells(page, "walk-list stuck")
    assert "Does not fit" in cannot[5] and cannot[6] == cannot[7] == "—"
    assert cannot[8] == f"{stuck['mfu'] * 100:,.1f}"  # as the builder's headline: MFU, not a time or a cost
    assert f"{stuck['cost_per_run_usd']:,.0f}" not in page


def test_compare_leaves_out_the_time_and_cost_of_a_layout_that_cannot_run(client: Any) -> None:
    ids = [_save(client, "walk-cmp fits")[0], _save(client, "walk-cmp stuck", **NO_FIT)[0]]
    for extra in ([], [("only_differences", "true")]):
        page = client.get("/plans/compare?" + urlencode([("ids", i) for i in ids] + extra)).text
        note = re.search(r'id="cannot-run"[^>]*>(.*?)</p>', page, re.S)
        assert note and "“walk-cmp stuck” (r1)" in note.group(1) and "walk-cmp fits" not in note.group(1)
        for label in (
            "Time to train, wall clock (failures, checkpoints, restarts, fail-slows)",
            "GPU-hours, compute (no failures)",
            "Cost per run (wall-clock GPU-hours at the headline price)",
            "Likely time to train, high (accuracy band)",
        ):
            _unit, first, second, delta, percent, _differs = _cells(page, f'<th scope="row">{label}')
            assert first[0].isdigit() and second == CANNOT_RUN and delta == percent == "—", label
        likely = re.findall(r'<tr[^>]*><th scope="row">Likely[^<]*</th>.*?</tr>', page, re.S)
        assert len(likely) >= 4 and sum(CANNOT_RUN in r for r in likely) == len(likely) - 4  # 4: step, memory
        step = _cells(page, '<th scope="row">Step time')
        assert step[1][0].isdigit() and step[2][0].isdigit()  # what the layout would reach if it fitted
    both_fit = [ids[0], _save(client, "walk-cmp other", tp=4, dp=4)[0]]
    page = client.get("/plans/compare?" + urlencode([("ids", i) for i in both_fit])).text
    assert 'id="cannot-run"' not in page and CANNOT_RUN not in page


def test_compare_shows_list_inputs_as_lists(client: Any) -> None:
    ids = [
        _save(client, "walk-lists one", recompute_modules=["core_attn", "mlp"])[0],
        _save(client, "walk-lists two")[0],
    ]
    page = client.get("/plans/compare?" + urlencode([("ids", i) for i in ids])).text
    assert "[]" not in page and "[&#39;" not in page and "['" not in page
    modules = _cells(page, '<th scope="row">Recompute modules')
    assert modules[1] == "core_attn, mlp" and modules[2] == "—"


def test_the_api_docs_list_every_operation_under_one_tag(client: Any) -> None:
    schema = client.get("/api/v1/openapi.json").json()
    tags = {
        f"{method.upper()} {path}": op.get("tags", [])
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if isinstance(op, dict) and "operationId" in op
    }
    assert {k: v for k, v in tags.items() if len(v) != 1} == {}
    assert tags["GET /api/v1/tokens"] == ["tokens"] and tags["POST /api/v1/auth/login"] == ["auth"]


def test_deleting_a_plan_and_revoking_a_token_ask_first(client: Any) -> None:
    plan_id, _ = _save(client, "walk-delete")
    page = client.get(f"/plans/{plan_id}").text
    form = re.search(rf'<form method="post" action="/plans/{plan_id}/delete"[^>]*>', page)
    asks = 'data-confirm="Delete “walk-delete” and its revision? This cannot be undone."'
    assert form and asks in form.group(0)
    assert '<script src="/static/js/confirm.js" defer></script>' in page
    assert client.get("/static/js/confirm.js").status_code == 200
