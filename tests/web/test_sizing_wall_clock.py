"""The builder's deadline sizing answers on the wall clock: each size's days of compute and its wall-clock days
with the goodput of that many GPUs (failures, checkpoints, restarts, fail-slows), and a deadline is met on the wall clock."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from app.web.pages._builder import BuilderState
from tests.web.test_plans_pages import _scenario_input

HX = {"HX-Request": "true"}
STATE = BuilderState(model="Llama-3-70B", nodes=2, tokens_b=15_000.0, global_batch=2048, deadline_days=60.0)
ROW = re.compile(
    r'<th scope="row" class="num">([\d,]+)</th><td class="num">[\d—]+</td>\s*<td>[^<]+</td>'
    r'<td class="num">([\d,.]+)</td><td class="num">([\d,.]+)</td>'
)
ANSWER = re.compile(
    r'id="sizing-answer"><strong>Smallest cluster that meets it:</strong> \d+ nodes \(([\d,]+) GPUs\)'
)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _sized(client: Any, state: BuilderState) -> tuple[str, dict[int, tuple[float, float]]]:
    r = client.get("/plans/new/sizes?" + state.query(), headers=HX)
    assert r.status_code == 200, r.text[:500]
    rows = {int(_number(g)): (_number(d), _number(w)) for g, d, w in ROW.findall(r.text)}
    return r.text, rows


def test_every_size_has_wall_clock_days_and_the_answer_states_its_goodput(client: Any) -> None:
    text, rows = _sized(client, STATE)
    assert '<th scope="col" class="num">Wall-clock days</th>' in text
    assert len(rows) >= 3
    # goodput is below 1 on every size: the wall clock is longer than the compute, and more so on more GPUs
    assert all(wall > days for days, wall in rows.values())
    losses = [wall / days for _, (days, wall) in sorted(rows.items())]
    assert losses[-1] > losses[0]
    answer = ANSWER.search(text)
    assert answer, text[:2000]
    gpus = int(_number(answer.group(1)))
    goodput = re.search(
        r"days</span> on the wall clock at ([\d.]+) % goodput \(([\d,.]+) days of compute", text
    )
    assert goodput, text[:2000]
    days, wall = rows[gpus]
    assert _number(goodput.group(2)) == days
    assert (
        abs(days / (float(goodput.group(1)) / 100) - wall) <= 0.1 + 0.002 * wall
    )  # rounding of the shown figures
    assert wall <= 60.0


def test_a_deadline_between_compute_and_wall_clock_days_is_not_met(client: Any) -> None:
    text, rows = _sized(client, STATE)
    answer = ANSWER.search(text)
    assert answer
    gpus = int(_number(answer.group(1)))
    days, wall = rows[gpus]
    # met on the compute, missed on the wall clock: the next larger size is the answer, this one is too slow
    deadline = round((days + wall) / 2, 1)
    assert days < deadline < wall
    text, _ = _sized(client, replace(STATE, deadline_days=deadline))
    later = ANSWER.search(text)
    assert later, text[:2000]
    assert int(_number(later.group(1))) > gpus
    row = re.search(rf'<th scope="row" class="num">{gpus:,}</th>.*?</tr>', text, re.S)
    assert row and "no: too slow" in row.group(0)


def test_the_builder_s_fail_slow_input_reaches_the_sweep_and_the_saved_scenario(client: Any) -> None:
    from app.web.pages._builder import parse_state, scenario_to_state

    # unset: 1.34 across nodes (the goodput model's default); 1: failures, checkpoints and restarts alone
    _, default = _sized(client, STATE)
    _, failures_only = _sized(client, replace(STATE, fail_slow=1.0))
    assert default.keys() == failures_only.keys()
    for gpus, (days, wall) in default.items():
        assert failures_only[gpus][0] == days  # compute days do not move
        if gpus > 8:
            assert wall > failures_only[gpus][1] * 1.25
    state = parse_state({"fail_slow": "1.1"})
    assert state.fail_slow == 1.1 and "fail_slow=1.1" in state.query()
    assert "fail_slow" not in BuilderState().query()  # left out of the address when unset
    assert parse_state({"fail_slow": "0.5"}).errors["fail_slow"].startswith("a slowdown from 1")
    page = client.get("/plans/new?" + replace(STATE, fail_slow=1.2).query())
    assert page.status_code == 200 and 'name="fail_slow"' in page.text and 'value="1.2"' in page.text
    back = scenario_to_state({"cluster": {"gpu": "H100-SXM", "nodes": 4, "fail_slow_slowdown": 1.5}})
    assert back.fail_slow == 1.5


def test_the_goodput_panel_names_the_fail_slows_and_the_scenario_keeps_the_input(client: Any) -> None:
    default = client.get("/plans/new?" + replace(STATE, nodes=4).query(), headers=HX).text
    assert "Goodput: checkpoints, failures and fail-slows" in default
    row = re.search(r"Steps slowed by fail-slows \(Greyhound\)</th><td class=\"num\">([\d.]+)</td>", default)
    assert row and row.group(1) == "1.34", default[:2000]
    chart = default.split('id="chart-goodput-data">', 1)[1].split("</script>", 1)[0]
    assert "Fail-slows" in chart
    off = client.get("/plans/new?" + replace(STATE, nodes=4, fail_slow=1.0).query(), headers=HX).text
    row = re.search(r"Steps slowed by fail-slows \(Greyhound\)</th><td class=\"num\">([\d.]+)</td>", off)
    assert row and row.group(1) == "1.00"
    # the scenario a save stores keeps the input; left unset, it stays out of the scenario
    assert _scenario_input(off)["cluster"]["fail_slow_slowdown"] == 1.0
    assert "fail_slow_slowdown" not in _scenario_input(default)["cluster"]
