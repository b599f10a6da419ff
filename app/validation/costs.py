"""Replay published cost, reliability and checkpoint figures against the cost/goodput models.

Case file: JSON lines, one case per line (blank lines and lines starting with # are skipped):

    {"case": "daly-2006-24h", "method": "daly_interval", "inputs": {"checkpoint_s": 300, "mtbf_s": 86400},
     "output": "interval_s", "expected": 7001.4, "tolerance_pct": 0.5, "source": "Daly 2006 ..."}

`method` names a function in METHODS, `inputs` are its keyword arguments, `output` picks one of its results
(default: the method's first output), `expected` is the published figure and `tolerance_pct` the allowed
|predicted − expected| / |expected| in percent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core import cost as core_cost
from app.core import goodput as core_goodput

Method = Callable[..., dict[str, float]]


def _young(checkpoint_s: float, mtbf_s: float) -> dict[str, float]:
    return {"interval_s": core_goodput.young_interval(checkpoint_s, mtbf_s)}


def _daly(checkpoint_s: float, mtbf_s: float) -> dict[str, float]:
    return {"interval_s": core_goodput.daly_interval(checkpoint_s, mtbf_s)}


def _interruptions(
    rates_from: str,
    num_gpus: int,
    duration_days: float,
    gpus_per_node: int = 8,
    per_gpu_all_causes: bool = False,
) -> dict[str, float]:
    """Interruptions of a job on num_gpus over duration_days with a preset's failure rates.

    per_gpu_all_causes: scale the preset's total interruptions per GPU-hour (no component split), the way
    a rate is carried from one cluster to another of a different node size or fabric."""
    preset = core_goodput.PRESETS[rates_from]
    hours = duration_days * 24.0
    if per_gpu_all_causes:
        per_gpu_hour = preset.interruptions / (preset.num_gpus * preset.duration_days * 24.0)
        rate = per_gpu_hour * num_gpus
    else:
        rate = core_goodput.interruption_rate_per_hour(preset.rates(), num_gpus, gpus_per_node)["total"]
    return {
        "interruptions": rate * hours,
        "job_mtbf_hours": 1.0 / rate,
        "interruptions_per_week": rate * 168.0,
    }


def _goodput(
    mtbf_s: float, checkpoint_stall_s: float, restart_s: float, method: str = "daly"
) -> dict[str, float]:
    r = core_goodput.goodput(
        core_goodput.GoodputInputs(
            mtbf_s=mtbf_s,
            checkpoint_stall_s=checkpoint_stall_s,
            restart_s=restart_s,
            method="young" if method == "young" else "daly",
        )
    )
    return {"goodput": r.goodput, "interval_s": r.interval_s}


def _epoch(**inputs: Any) -> dict[str, float]:
    """Through the service, so that dated cases (price, release and publication dates) take Epoch's lags."""
    from app.schemas.cost import EpochRequest
    from app.services.cost import epoch

    r = epoch(EpochRequest.model_validate(inputs))
    out = {
        "amortized_hardware_energy_usd": r.amortized_hardware_energy_usd,
        "acquisition_usd": r.acquisition_usd,
    }
    if r.cloud_usd is not None:
        out["cloud_usd"] = r.cloud_usd
    return out


def _run_cost(**inputs: Any) -> dict[str, float]:
    """Through the service (RunCostRequest), as `clusterplan cost run` bills a run: productive GPU-hours from
    6·N·D FLOP at the peak × MFU (or given GPU-hours), wall clock on num_gpus, and each option's bill."""
    from app.schemas.cost import RunCostRequest
    from app.services.catalog import PUBLIC
    from app.services.cost import run_cost

    if not inputs.get("options"):
        # a case about time only (a throughput identity) prices nothing
        inputs = inputs | {"options": [{"label": "unpriced", "usd_per_gpu_hour": 0.0}]}
    r = run_cost(None, RunCostRequest.model_validate(inputs), viewer=PUBLIC)
    out = {
        "productive_gpu_hours": r.productive_gpu_hours,
        "billed_gpu_hours": r.billed_gpu_hours,
        "wall_clock_days": r.wall_clock_hours / 24.0,
    }
    if r.total_flop is not None:
        out["flop"] = r.total_flop
    if r.options:
        out["total_usd"] = r.options[0].total_usd
    return out


def _fat_tree_bom(
    nodes: int, rails: int, switch_radix: int = 64, tiers: int | None = None, price_class: str = "ib-ndr"
) -> dict[str, float]:
    """Switch and link counts of the fat-tree bill of materials (app.core.topology), and its capex priced with the
    price class's rows of app/catalog/network_prices.csv (switches, transceivers at both ends of every optical
    link, cables), as `clusterplan cost tco` prices an on-prem network."""
    from app.catalog.network_prices import network_price_rows
    from app.core.topology import FatTreeDesign, UnitPrices, bill_of_materials

    rows = network_price_rows()[price_class]
    prices = UnitPrices(rows["switch"].unit_usd, rows["transceiver"].unit_usd, rows["cable"].unit_usd)
    bom = bill_of_materials(
        FatTreeDesign(nodes=nodes, rails=rails, switch_radix=switch_radix, tiers=tiers), prices
    )
    assert bom.cost is not None
    return {
        "switches": float(bom.switches),
        "links": float(sum(bom.cables.values())),
        "network_usd": bom.cost.total_usd,
        "tiers": float(len(bom.tiers)),
    }


def _training_flop(params: float, tokens: float, active_params: float | None = None) -> dict[str, float]:
    return {"flop": core_cost.training_flop(params, tokens, active_params)}


def _checkpoint_idle(num_checkpoints: int, stall_s: float) -> dict[str, float]:
    return {"idle_hours": core_goodput.checkpoint_idle_hours(num_checkpoints, stall_s)}


def _seed_breakeven(
    node_capex_usd: float,
    cloud_usd_per_node_hour: float,
    utilisation: float,
    monthly_running_usd: float = 0.0,
) -> dict[str, float]:
    r = core_cost.seed_breakeven(node_capex_usd, cloud_usd_per_node_hour, utilisation, monthly_running_usd)
    return {"months": r.months if r.months is not None else math.inf}


def _spot(**inputs: Any) -> dict[str, float]:
    lost_h = inputs.pop("lost_work_hours", None)
    r = core_goodput.spot_savings(
        core_goodput.SpotInputs(**inputs, lost_work_s=lost_h * 3600.0 if lost_h is not None else None)
    )
    return {"net_savings": r.net_savings, "useful_fraction": r.useful_fraction}


METHODS: dict[str, Method] = {
    "young_interval": _young,
    "daly_interval": _daly,
    "interruptions": _interruptions,
    "goodput": _goodput,
    "epoch_costs": _epoch,
    "training_flop": _training_flop,
    "run_cost": _run_cost,
    "checkpoint_idle": _checkpoint_idle,
    "seed_breakeven": _seed_breakeven,
    "spot_savings": _spot,
    "fat_tree_bom": _fat_tree_bom,
}


@dataclass(frozen=True)
class CostCase:
    case: str
    method: str
    inputs: dict[str, Any]
    output: str | None
    expected: float
    tolerance_pct: float
    source: str


@dataclass(frozen=True)
class CaseResult:
    case: str
    expected: float
    predicted: float
    error_pct: float
    tolerance_pct: float
    ok: bool
    method: str = ""
    output: str = ""
    source: str = ""

    def row(self) -> dict[str, object]:
        return {
            "case": self.case,
            "expected": self.expected,
            "predicted": self.predicted,
            "error_pct": self.error_pct,
            "tolerance_pct": self.tolerance_pct,
            "ok": self.ok,
        }


@dataclass(frozen=True)
class CostReport:
    results: list[CaseResult]

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.ok)

    def to_dict(self) -> dict[str, object]:
        n = len(self.results)
        return {
            "rows": [r.row() for r in self.results],
            "summary": {"n": n, "passed": self.passed, "failed": n - self.passed},
        }


REQUIRED = ("case", "method", "inputs", "expected", "tolerance_pct", "source")


def parse_cases(lines: Iterable[str], origin: str = "cases") -> list[CostCase]:
    """Parse JSON lines; every problem names the line and field (ValueError → exit 2 in the CLI)."""
    cases: list[CostCase] = []
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{origin} line {number}: not JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{origin} line {number}: expected a JSON object")
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise ValueError(f"{origin} line {number}: missing {', '.join(missing)}")
        if data["method"] not in METHODS:
            raise ValueError(
                f"{origin} line {number}: unknown method {data['method']!r}; known: {sorted(METHODS)}"
            )
        if not isinstance(data["inputs"], dict):
            raise ValueError(f"{origin} line {number}: inputs must be an object")
        try:
            expected = float(data["expected"])
            tolerance = float(data["tolerance_pct"])
        except (TypeError, ValueError):
            raise ValueError(f"{origin} line {number}: expected and tolerance_pct must be numbers") from None
        if tolerance < 0:
            raise ValueError(f"{origin} line {number}: tolerance_pct must be >= 0")
        cases.append(
            CostCase(
                case=str(data["case"]),
                method=data["method"],
                inputs=data["inputs"],
                output=data.get("output"),
                expected=expected,
                tolerance_pct=tolerance,
                source=str(data["source"]),
            )
        )
    return cases


def load_cases(path: Path) -> list[CostCase]:
    return parse_cases(path.read_text(encoding="utf-8").splitlines(), origin=path.name)


def evaluate(case: CostCase) -> CaseResult:
    try:
        outputs = METHODS[case.method](**dict(case.inputs))
    except TypeError as exc:
        raise ValueError(f"case {case.case}: bad inputs for {case.method}: {exc}") from None
    key = case.output or next(iter(outputs))
    if key not in outputs:
        raise ValueError(f"case {case.case}: {case.method} has no output {key!r}; outputs: {sorted(outputs)}")
    predicted = outputs[key]
    if case.expected == 0:
        error = 0.0 if predicted == 0 else math.inf
    else:
        error = (predicted - case.expected) / abs(case.expected) * 100.0
    return CaseResult(
        case=case.case,
        expected=case.expected,
        predicted=predicted,
        error_pct=error,
        tolerance_pct=case.tolerance_pct,
        ok=abs(error) <= case.tolerance_pct,
        method=case.method,
        output=key,
        source=case.source,
    )


def replay(cases: list[CostCase]) -> CostReport:
    return CostReport([evaluate(c) for c in cases])


def render_table(report: CostReport) -> str:
    lines = [f"{'case':<38} {'expected':>14} {'predicted':>14} {'error %':>9} {'tol %':>7}  ok"]
    for r in report.results:
        lines.append(
            f"{r.case:<38.38} {r.expected:>14.6g} {r.predicted:>14.6g} {r.error_pct:>9.2f} {r.tolerance_pct:>7.1f}  "
            f"{'yes' if r.ok else 'NO'}"
        )
    d = report.to_dict()["summary"]
    assert isinstance(d, dict)
    lines.append(f"{d['n']} cases: {d['passed']} passed, {d['failed']} failed")
    return "\n".join(lines)
