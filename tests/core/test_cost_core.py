"""Cost and goodput core: golden values from papers and the seed article, and properties of the models."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core import cost, goodput
from app.core.errors import SpecError

# --- checkpoint intervals ------------------------------------------------------------------------------


def test_young_interval_is_two_hours_for_five_minute_dumps_and_daily_failures() -> None:
    # Young 1974: sqrt(2 · 300 s · 86,400 s) = 7,200 s
    assert goodput.young_interval(300, 86400) == pytest.approx(7200.0)


def test_daly_higher_order_interval_golden_values() -> None:
    # Daly 2006: sqrt(2δM)[1 + sqrt(δ/2M)/3 + (δ/2M)/9] − δ
    assert goodput.daly_interval(300, 86400) == pytest.approx(7001.39, abs=0.01)
    assert goodput.daly_interval(600, 21600) == pytest.approx(4699.03, abs=0.01)
    assert goodput.daly_interval(7200, 3600) == 3600  # δ ≥ 2M → τ = M


@settings(max_examples=60, deadline=None)
@given(
    delta=st.floats(min_value=1.0, max_value=600.0),
    mtbf=st.floats(min_value=3600.0, max_value=30 * 86400.0),
)
def test_daly_interval_minimises_expected_wall_time(delta: float, mtbf: float) -> None:
    tau = goodput.daly_interval(delta, mtbf)
    best = goodput.expected_wall_time(1.0, tau, delta, 300.0, mtbf)
    for factor in (0.5, 0.8, 1.25, 2.0):
        assert best <= goodput.expected_wall_time(1.0, tau * factor, delta, 300.0, mtbf) + 1e-12
    # Daly's estimate is below Young's first-order one for δ ≪ M (the −δ term dominates the corrections)
    assert tau < goodput.young_interval(delta, mtbf)


# --- failures and goodput ------------------------------------------------------------------------------


def test_llama3_preset_reproduces_419_interruptions_in_54_days() -> None:
    preset = goodput.PRESETS["llama3-405b"]
    rate = goodput.interruption_rate_per_hour(preset.rates(), 16384, 8)
    assert rate["total"] * 54 * 24 == pytest.approx(419.0, rel=1e-9)
    assert rate["gpu"] + rate["node"] + rate["switch"] == pytest.approx(rate["total"])
    assert preset.job_mtbf_s / 3600 == pytest.approx(3.093, abs=0.001)
    # Llama 3 Table 5 causes sum to the total
    assert preset.gpu_interruptions + preset.switch_interruptions + preset.node_interruptions == 419


def test_fat_tree_switch_count() -> None:
    assert goodput.fat_tree_switches(4) == 1  # 32 ports: one 64-port leaf
    assert goodput.fat_tree_switches(128) == 32 + 16  # 1,024 ports: 32 leaves, 16 spines
    assert goodput.fat_tree_switches(2048) == 512 + 512 + 256  # k = 64 three-tier fat tree, 16,384 ports


@settings(max_examples=50, deadline=None)
@given(small=st.integers(min_value=8, max_value=4096), extra=st.integers(min_value=8, max_value=8192))
def test_more_gpus_never_raise_job_mtbf(small: int, extra: int) -> None:
    rates = goodput.PRESETS["llama3-405b"].rates()
    a = goodput.interruption_rate_per_hour(rates, small)["total"]
    b = goodput.interruption_rate_per_hour(rates, small + extra)["total"]
    assert b >= a


@settings(max_examples=80, deadline=None)
@given(
    mtbf=st.floats(min_value=600.0, max_value=1e7),
    delta=st.floats(min_value=0.0, max_value=900.0),
    restart=st.floats(min_value=0.0, max_value=3600.0),
    slow=st.floats(min_value=1.0, max_value=2.0),
)
def test_goodput_breakdown_sums_to_wall_time_and_stays_in_unit_interval(
    mtbf: float, delta: float, restart: float, slow: float
) -> None:
    try:
        r = goodput.goodput(
            goodput.GoodputInputs(
                mtbf_s=mtbf, checkpoint_stall_s=delta, restart_s=restart, mfu=0.4, fail_slow=slow
            )
        )
    except (
        SpecError
    ):  # refused only when the optimal interval still leaves under 1 % goodput, fail-slows included
        tau = goodput.daly_interval(delta, mtbf) if delta > 0 else mtbf / 100
        wall = goodput.expected_wall_time(1.0, tau, delta, restart, mtbf) + slow - 1.0
        assert wall > goodput.MAX_WALL_PER_USEFUL
        return
    assert 0.01 <= r.goodput <= 1
    assert sum(r.breakdown.values()) == pytest.approx(r.wall_per_useful, rel=1e-9)
    assert r.breakdown["lost_work"] >= -1e-9
    assert r.breakdown["fail_slow"] == pytest.approx(slow - 1.0)
    assert r.effective_mfu == pytest.approx(0.4 * r.goodput)


def test_the_progress_floor_counts_the_fail_slows() -> None:
    """Found by the property above: interruptions every 10 minutes with a 2,755 s restart leave 1.0 % goodput
    without fail-slows and 0.998 % with steps twice as slow, which is refused as every goodput under 1 % is."""
    inputs = goodput.GoodputInputs(mtbf_s=600.0, checkpoint_stall_s=0.0, restart_s=2755.0, mfu=0.4)
    assert goodput.goodput(inputs).goodput >= 0.01
    with pytest.raises(SpecError, match="goodput below 1%"):
        goodput.goodput(replace(inputs, fail_slow=2.0))


def test_fail_slows_add_their_stretch_to_the_failures_wall_time_and_spare_one_node() -> None:
    base = goodput.GoodputInputs(mtbf_s=3 * 3600.0, checkpoint_stall_s=30.0, restart_s=600.0)
    alone = goodput.goodput(base)
    slowed = goodput.goodput(replace(base, fail_slow=goodput.FAIL_SLOW_SLOWDOWN))
    # the failure terms and the interval are those of the job without fail-slows; each useful second takes 1.34 s
    assert slowed.interval_s == alone.interval_s
    assert slowed.wall_per_useful == pytest.approx(alone.wall_per_useful + 0.34)
    assert slowed.goodput == pytest.approx(1 / (1 / alone.goodput + 0.34))
    assert goodput.fail_slow_slowdown(1) == 1.0 and goodput.fail_slow_slowdown(2) == 1.34
    with pytest.raises(SpecError) as err:
        goodput.goodput(replace(base, fail_slow=0.5))
    assert err.value.problems[0].field == "fail_slow_slowdown"


def test_llama3_goodput_with_fast_async_checkpoints_is_near_the_reported_90_percent() -> None:
    # Meta reports > 90 % effective training time; with 30 s stalls and 5 min restarts the model agrees
    preset = goodput.PRESETS["llama3-405b"]
    r = goodput.goodput(goodput.GoodputInputs(mtbf_s=preset.job_mtbf_s, checkpoint_stall_s=30, restart_s=300))
    assert 0.88 < r.goodput < 0.93


def test_seed_checkpoint_idle_hours() -> None:
    # "500 checkpoints at 30-60 s synchronous = 5-8 hours idle"; async 3-5 s
    assert goodput.checkpoint_idle_hours(500, 30) == pytest.approx(4.17, abs=0.01)
    assert goodput.checkpoint_idle_hours(500, 60) == pytest.approx(8.33, abs=0.01)
    assert goodput.checkpoint_idle_hours(500, 5) == pytest.approx(0.69, abs=0.01)


# --- spot ----------------------------------------------------------------------------------------------


def test_seed_spot_inputs_give_about_half_not_22_percent() -> None:
    r = goodput.spot_savings(
        goodput.SpotInputs(
            on_demand_usd_per_hour=55.04,
            spot_discount=0.6,
            preemptions_per_day=2.4,
            lost_work_s=1.5 * 3600,
            restart_s=0,
        )
    )
    assert r.useful_fraction == pytest.approx(0.85)
    assert r.net_savings == pytest.approx(1 - 0.4 / 0.85)
    assert sum(r.breakdown_per_day.values()) == pytest.approx(24.0)


def test_spot_claim_inversion_round_trips() -> None:
    inv = goodput.invert_spot_claim(0.22, 0.6, 2.4, 1.5)
    assert inv.lost_hours_per_preemption == pytest.approx(4.872, abs=0.001)
    back = goodput.spot_savings(
        goodput.SpotInputs(
            on_demand_usd_per_hour=10,
            spot_discount=0.6,
            preemptions_per_day=2.4,
            lost_work_s=inv.lost_hours_per_preemption * 3600,
            restart_s=0,
        )
    )
    assert back.net_savings == pytest.approx(0.22)
    assert inv.spot_discount == pytest.approx(0.337, abs=0.001)


def test_spot_loses_half_an_interval_unless_it_checkpoints_on_the_notice() -> None:
    base = {
        "on_demand_usd_per_hour": 10,
        "spot_discount": 0.6,
        "preemptions_per_day": 2.4,
        "notice_s": 120,
        "checkpoint_stall_s": 60,
        "restart_s": 600,
        "checkpoint_interval_s": 3600,
    }
    periodic = goodput.spot_savings(goodput.SpotInputs(**base))  # type: ignore[arg-type]
    # by default only periodic checkpoints: 2.4 preemptions × 30 min lost = 1.2 h of work a day
    assert periodic.breakdown_per_day["lost_work"] == pytest.approx(1.2)
    assert {a.name: a.value for a in periodic.assumptions}["lost_work_s"] == 1800
    hooked = goodput.spot_savings(goodput.SpotInputs(**base, checkpoint_on_notice=True))  # type: ignore[arg-type]
    assert hooked.breakdown_per_day["lost_work"] == 0
    assert hooked.breakdown_per_day["restart"] == pytest.approx(0.4)
    short = goodput.spot_savings(
        goodput.SpotInputs(**base | {"notice_s": 30}, checkpoint_on_notice=True)  # type: ignore[arg-type]
    )
    assert short.breakdown_per_day["lost_work"] == pytest.approx(1.2)  # GCP's 30 s notice: too short to save


def test_a_job_that_makes_no_progress_is_refused() -> None:
    # one interruption every 36 s against a 10-minute checkpoint: goodput would be ~1e-80
    with pytest.raises(SpecError) as err:
        goodput.goodput(goodput.GoodputInputs(mtbf_s=36.0, checkpoint_stall_s=600.0, restart_s=600.0))
    assert err.value.problems[0].field == "mtbf_s" and "no progress" in err.value.problems[0].message
    slow = goodput.goodput(goodput.GoodputInputs(mtbf_s=3600.0, checkpoint_stall_s=600.0, restart_s=600.0))
    assert 0.01 < slow.goodput < 0.6


def test_a_run_longer_than_a_century_is_refused() -> None:
    # 70B parameters, 1e18 tokens, 1,024 H100 at 40 % MFU: 32,854 years
    inputs = cost.RunInputs(num_gpus=1024, total_flop=6 * 70e9 * 1e18, peak_flops_per_gpu=989e12, mfu=0.4)
    with pytest.raises(SpecError) as err:
        cost.run_cost(inputs, [cost.PriceQuote("od", 2.0)])
    assert err.value.problems[0].field == "total_flop" and "32,854 years" in err.value.problems[0].message


# --- cost per run --------------------------------------------------------------------------------------


def test_training_flop_golden_values() -> None:
    assert cost.training_flop(175e9, 300e9) == pytest.approx(
        3.14e23, rel=0.01
    )  # GPT-3, Brown et al. Table D.1
    # MoE counts active parameters: Mixtral 8x7B ≈ 12.9B active of 46.7B
    assert cost.training_flop(46.7e9, 1e12, active_params=12.9e9) == pytest.approx(6 * 12.9e9 * 1e12)


def test_run_cost_breakdown_and_commitment_vs_run_length() -> None:
    inputs = cost.RunInputs(num_gpus=1020, total_flop=8.4e23, peak_flops_per_gpu=989e12, mfu=0.4, goodput=0.9)
    quotes = [
        cost.PriceQuote("on-demand", 6.88),
        cost.PriceQuote("3-yr", 4.86, pricing_model="3-yr CUD", commitment_months=36),
    ]
    r = cost.run_cost(inputs, quotes)
    productive = 8.4e23 / (989e12 * 0.4) / 3600
    assert r.productive_gpu_hours == pytest.approx(productive)
    assert r.billed_gpu_hours == pytest.approx(productive / 0.9)
    for option in r.options:
        assert sum(option.breakdown.values()) == pytest.approx(option.total_usd)
    od, committed = r.options
    # 1,020 GPUs need 128 instances of 8: 4 idle GPUs paid
    assert od.breakdown["instance_rounding"] == pytest.approx(4 * r.wall_clock_hours * 6.88)
    # a 3-year commitment for a run of weeks is paid in full: far more expensive
    assert committed.commitment_exceeds_run
    assert committed.billed_hours == pytest.approx(36 * cost.HOURS_PER_MONTH)
    assert r.cheapest == "on-demand"


def test_run_cost_rejects_bad_input_with_every_field() -> None:
    with pytest.raises(SpecError) as err:
        cost.run_cost(cost.RunInputs(num_gpus=0, goodput=1.5), [])
    fields = {p.field for p in err.value.problems}
    assert {"num_gpus", "goodput", "total_flop", "mfu", "peak_flops_per_gpu"} <= fields


def test_commitment_months_from_pricing_model_text() -> None:
    assert cost.commitment_months_for("1-yr reserved") == 12
    assert cost.commitment_months_for("3-yr CUD") == 36
    assert cost.commitment_months_for("3-yr reserved (pre-cut)") == 36
    assert cost.commitment_months_for("on-demand") == 0
    assert cost.commitment_months_for("spot") == 0


# --- TCO and breakeven ---------------------------------------------------------------------------------


# HGX H100 8-GPU server, $288,142 (archive.ph/D6Dub, 2024-07-31); DGX H100 max power 10.2 kW (user guide)
H100_NODE = {"server_capex_usd_per_node": 288142.0, "node_power_kw": 10.2}


def test_onprem_without_a_server_price_or_power_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        cost.tco(cost.OnPremInputs(nodes=2), 0.9, [])
    fields = {p.field for p in err.value.problems}
    assert fields == {"server_capex_usd_per_node", "node_power_kw"}


def test_server_row_fills_only_what_the_user_left_out() -> None:
    # GB200 NVL72: $3.0M and 120 kW for 72 GPUs; a 4-GPU compute tray is priced and powered pro rata
    rack = cost.ServerQuote("GB200", "NVL72", 72, 3.0e6, "2024", "rack price", 120.0, "2024-03", "rack power")
    filled = cost.with_server(cost.OnPremInputs(nodes=18, gpus_per_node=4), rack)
    assert filled.server_capex_usd_per_node == pytest.approx(3.0e6 / 18)
    assert filled.node_power_kw == pytest.approx(120.0 / 18)
    r = cost.tco(filled, 0.9, [])
    assert r.capex["servers"] == pytest.approx(3.0e6)
    used = {a.name: a for a in r.assumptions}
    assert "rack price" in used["server_capex_usd_per_node"].source
    assert used["node_power_kw"].date == "2024-03"
    kept = cost.with_server(cost.OnPremInputs(nodes=18, gpus_per_node=4, node_power_kw=5.0), rack)
    assert kept.node_power_kw == 5.0 and kept.server_capex_usd_per_node == pytest.approx(3.0e6 / 18)
    mine = {a.name: a for a in cost.tco(kept, 0.9, []).assumptions}["node_power_kw"]
    assert mine.source == "user input"


def test_seed_breakeven_claim() -> None:
    # $250k fully loaded vs $40-50/h at 90 %: 9.5 / 8.5 / 7.6 months; 7-8 months needs ≥ $48/h
    assert cost.seed_breakeven(250000, 45, 0.9).months == pytest.approx(8.45, abs=0.01)
    assert cost.seed_breakeven(250000, 50, 0.9).months == pytest.approx(7.60, abs=0.01)
    assert cost.seed_breakeven(250000, 40, 0.9).months == pytest.approx(9.51, abs=0.01)


def test_tco_breakdowns_sum_and_breakeven_is_consistent() -> None:
    inputs = cost.OnPremInputs(nodes=16, **H100_NODE)
    r = cost.tco(inputs, 0.9, [cost.PriceQuote("cloud", 6.88), cost.PriceQuote("cheap", 0.5)])
    assert r.capex_total_usd == pytest.approx(sum(r.capex.values()))
    assert r.annual_total_usd == pytest.approx(sum(r.annual.values()))
    assert r.usd_per_gpu_hour == pytest.approx(r.annual_total_usd / (128 * cost.HOURS_PER_YEAR * 0.9))
    # network share 8.6 % of server + network capex for a 2-tier fabric
    assert r.capex["network"] / (r.capex["network"] + r.capex["servers"]) == pytest.approx(0.086)
    cloud, cheap = r.breakevens
    assert cloud.months is not None and cloud.utilisation is not None
    # at the breakeven utilisation on-prem $/GPU-h equals the cloud price
    assert cost.onprem_usd_per_gpu_hour(inputs, cloud.utilisation) == pytest.approx(6.88)
    # at the breakeven month cumulative costs are equal
    running = cost.monthly_running_cost(inputs, 0.9)
    assert r.capex_total_usd + running * cloud.months == pytest.approx(
        6.88 * 128 * cost.HOURS_PER_MONTH * 0.9 * cloud.months
    )
    assert cheap.months is None and cheap.utilisation is None  # $0.50/GPU-h: never worth buying
    curve = r.curves["usd_per_gpu_hour_vs_utilisation"]
    assert isinstance(curve, dict) and len(curve["x"]) == 20


def test_power_line_follows_tdp_draw_pue_and_price() -> None:
    inputs = cost.OnPremInputs(
        nodes=2,
        server_capex_usd_per_node=288142.0,
        node_power_kw=10.2,
        avg_draw_fraction=0.75,
        pue=1.5,
        usd_per_kwh=0.1,
    )
    annual = cost.annual_cost(inputs, 1.0)
    assert annual["power"] == pytest.approx(2 * 10.2 * 0.75 * 1.5 * cost.HOURS_PER_YEAR * 0.1)
    assert annual["colocation"] == pytest.approx(2 * 10.2 * 184.06 * 12)


def test_economic_depreciation_declines_at_epochs_rate_to_a_residual() -> None:
    inputs = cost.OnPremInputs(depreciation="economic", network_share=0.0, **H100_NODE)
    # value C·10^(−0.14 t): 20.9 % left after 5 years, so 79.1 % of capex is lost over the lifetime (it was
    # charged 32 %/yr of the original price, 161 % over 5 years, before)
    share = 10 ** (-0.14 * 5)
    assert cost.residual_fraction(inputs) == pytest.approx(share) == pytest.approx(0.1995, abs=1e-4)
    annual = cost.annual_cost(inputs, 0.5)
    assert annual["depreciation"] * 5 == pytest.approx(288142.0 * (1 - share))
    # the first year loses 1 − 10^(−0.14) = 27.6 % of capex: declining balance at 0.14·ln10 per year
    assert cost.asset_value(inputs, 1.0) == pytest.approx(288142.0 * 10**-0.14)
    assert cost.asset_value(inputs, 5.0) == pytest.approx(288142.0 * share)
    # financing on the declining value: r × its lifetime average (C − R)/(λL), λ = 0.14·ln10
    average = 288142.0 * (1 - share) / (0.14 * math.log(10) * 5)
    assert annual["cost_of_capital"] == pytest.approx(0.08 * average)


def test_straight_line_depreciation_runs_to_the_residual_value() -> None:
    inputs = cost.OnPremInputs(network_share=0.0, residual_fraction=0.3, cost_of_capital=0.0, **H100_NODE)
    annual = cost.annual_cost(inputs, 0.9)
    assert annual["depreciation"] == pytest.approx(288142.0 * 0.7 / 5)
    assert annual["cost_of_capital"] == pytest.approx(0.0, abs=1e-6)
    assert cost.asset_value(inputs, 2.5) == pytest.approx(288142.0 * 0.65)
    financed = cost.annual_cost(cost.OnPremInputs(**{**inputs.__dict__, "cost_of_capital": 0.08}), 0.9)
    crf = 0.08 * 1.08**5 / (1.08**5 - 1)
    # equivalent annual cost of buying at C and selling at 0.3·C after 5 years at 8 %
    eac = 288142.0 * crf - 0.3 * 288142.0 * (crf - 0.08)
    assert financed["depreciation"] + financed["cost_of_capital"] == pytest.approx(eac)
    r = cost.tco(inputs, 0.9, [])
    series = r.curves["cumulative_usd_vs_month"]["series"]  # type: ignore[index]
    net, gross = series["on-prem net of resale"], series["on-prem"]
    assert net[0] == pytest.approx(0.0, abs=1e-6) and gross[60] - net[60] == pytest.approx(0.3 * 288142.0)
    used = {a.name: a for a in r.assumptions}
    assert used["residual_fraction"].value == 0.3 and used["residual_fraction"].source == "user input"


def test_declining_balance_to_nothing_is_refused() -> None:
    inputs = cost.OnPremInputs(depreciation="economic", residual_fraction=0.0, **H100_NODE)
    with pytest.raises(SpecError) as err:
        cost.tco(inputs, 0.9, [])
    assert [p.field for p in err.value.problems] == ["residual_fraction"]


@settings(max_examples=60, deadline=None)
@given(u1=st.floats(min_value=0.05, max_value=0.95), du=st.floats(min_value=0.01, max_value=0.5))
def test_onprem_price_per_gpu_hour_falls_with_utilisation(u1: float, du: float) -> None:
    inputs = cost.OnPremInputs(nodes=4, **H100_NODE)
    u2 = min(1.0, u1 + du)
    assert cost.onprem_usd_per_gpu_hour(inputs, u2) <= cost.onprem_usd_per_gpu_hour(inputs, u1) + 1e-12


def test_tco_rejects_utilisation_outside_unit_interval() -> None:
    with pytest.raises(SpecError) as err:
        cost.tco(cost.OnPremInputs(**H100_NODE), 1.5, [])
    assert err.value.problems[0].field == "utilisation"


# --- Epoch AI ------------------------------------------------------------------------------------------


def test_epoch_gpt4_amortized_cost_matches_epoch_estimate() -> None:
    # Epoch AI model_costs.csv: GPT-4 amortized hardware + energy $40.70M, acquisition $778M
    r = cost.epoch_costs(
        cost.EpochInputs(
            chips=25000,
            training_hours=2280,
            server_price_per_chip_usd=24875,
            years_since_acquisition=1.7276,
            chip_tdp_w=400,
            server_to_chip_power=(6.5 / 8) / 0.4,
            pue=1.25,
            usd_per_kwh=0.0806,
            cloud_usd_per_chip_hour=1.378,
        )
    )
    assert r.amortized_hardware_energy_usd == pytest.approx(40.70e6, rel=0.02)
    assert sum(r.amortized_breakdown.values()) == pytest.approx(r.amortized_hardware_energy_usd)
    assert r.acquisition_usd == pytest.approx(778.07e6, rel=0.02)
    assert r.cloud_usd == pytest.approx(25000 * 2280 * 1.378)
    # energy is 2-6 % of the amortized cost for frontier runs (Cottier et al. 2024)
    assert 0.02 < r.amortized_breakdown["energy"] / r.amortized_hardware_energy_usd < 0.10


def test_async_interval_is_at_least_the_background_write() -> None:
    free = goodput.goodput(goodput.GoodputInputs(mtbf_s=3 * 3600, checkpoint_stall_s=0.02, restart_s=600))
    bound = goodput.goodput(
        goodput.GoodputInputs(mtbf_s=3 * 3600, checkpoint_stall_s=0.02, restart_s=600, min_interval_s=90.0)
    )
    assert free.interval_s < 90.0 and bound.interval_s == 90.0
    assert bound.goodput < free.goodput


def test_epoch_timeline_dates_acquisition_and_training_start_by_epochs_lags() -> None:
    from datetime import date

    # Llama 3.1-405B: H100 priced 2022-09-29 (catalog date 2022-03-22 + 90 days is earlier), 2,142 h of
    # training published 2024-07-23: start = publication − 89.25 days − 60 days
    dates = cost.EpochDates(
        price_date=date(2022, 9, 29), release_date=date(2022, 3, 22), publication_date=date(2024, 7, 23)
    )
    t = cost.epoch_timeline(dates, 2142.0)
    assert t.acquisition_date == date(2022, 9, 29) and t.training_start == date(2024, 2, 25)
    assert t.years_since_acquisition == pytest.approx((date(2024, 2, 25) - date(2022, 9, 29)).days / 365.25)
    # a price quoted before release + 90 days: acquired no sooner than that
    early = cost.epoch_timeline(
        cost.EpochDates(price_date=date(2022, 1, 1), release_date=date(2022, 3, 22)), 10.0
    )
    assert early.acquisition_date == date(2022, 6, 20)
    # training time from start and end; training cannot start before acquisition
    span = cost.EpochDates(
        acquisition_date=date(2024, 1, 10), training_start=date(2024, 1, 1), training_end=date(2024, 3, 1)
    )
    s = cost.epoch_timeline(span, None)
    assert s.training_hours == pytest.approx(60 * 24) and s.years_since_acquisition == 0.0
    assert cost.epoch_timeline(cost.EpochDates(), 100.0).years_since_acquisition is None
    with pytest.raises(SpecError) as err:
        cost.epoch_timeline(
            cost.EpochDates(training_start=date(2024, 3, 1), training_end=date(2024, 3, 1)), None
        )
    assert [p.field for p in err.value.problems] == ["training_end"]


def test_a_reservation_is_compared_at_full_billing_whatever_the_use() -> None:
    inputs = cost.OnPremInputs(nodes=16, **H100_NODE)
    hourly = cost.PriceQuote("on-demand", 3.0)
    reserved = cost.PriceQuote("3-yr", 3.0, pricing_model="3-yr CUD", commitment_months=36, term="reserved")
    r = cost.tco(inputs, 0.5, [hourly, reserved])
    od, res = r.breakevens
    running = cost.monthly_running_cost(inputs, 0.5)
    # the reservation is paid for every hour: 128 GPUs × 730.5 h, not the half of them that run jobs
    assert res.months == pytest.approx(r.capex_total_usd / (3.0 * 128 * cost.HOURS_PER_MONTH - running))
    assert res.committed and res.utilisation is None and not od.committed
    # at 50 % use, owning beats the reservation but not the same price paid by the hour
    assert res.onprem_cheaper_at_utilisation and not od.onprem_cheaper_at_utilisation
    assert od.utilisation is not None and od.utilisation > 0.5
    per_hour = r.curves["usd_per_gpu_hour_vs_utilisation"]["series"]  # type: ignore[index]
    assert per_hour["3-yr"][9] == pytest.approx(3.0 / 0.5) and per_hour["on-demand"][9] == 3.0
    monthly = r.curves["cumulative_usd_vs_month"]["series"]  # type: ignore[index]
    assert monthly["3-yr"][12] == pytest.approx(2 * monthly["on-demand"][12])
