"""Price terms: how a cloud GPU price is billed, read from a price-book row's pricing model and unit.

A term is on-demand (pay as you go, billed by the hour), reserved for 1 or 3 years (the whole term is billed,
used or not), a capacity block (a prepaid reservation of fixed length, billed for the hours booked) or spot
(billed by the hour, preemptible). The unit says whether the price is per GPU-hour or per instance-hour; an
instance-hour price is divided by the GPUs in the instance. Text that fits none of these is refused, never
guessed: "PAYG / 1y / 3y" names the pay-as-you-go price first, so it is on-demand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

TermKind = Literal["on_demand", "reserved", "capacity_block", "spot"]
UnitBasis = Literal["gpu_hour", "instance_hour"]

TERM_LABELS: dict[str, str] = {
    "on_demand": "on-demand",
    "reserved": "reserved",
    "capacity_block": "capacity block",
    "spot": "spot",
}

_SPOT = re.compile(r"\b(spot|preemptible|interruptible)\b")
_CAPACITY_BLOCK = re.compile(r"capacity\s*blocks?")
_ON_DEMAND = re.compile(
    r"\b(on[-\s]?demand|payg|pay[-\s]as[-\s]you[-\s]go|marketplace|market (average|median)|hourly)\b"
)
_YEARS = re.compile(r"\b(\d+)\s*-?\s*(yr|yrs|year|years|y)\b")
_COMMITMENT = re.compile(r"\b(reserved|reservation|cud|committed|commitment|contract|savings plan)\b")
_GPU_HOUR = re.compile(r"^(gpu|chip|accelerator)[-\s]?(hour|hr|h)$")
_INSTANCE_HOUR = re.compile(r"^(instance|node|server|vm|machine)[-\s]?(hour|hr|h)$")


@dataclass(frozen=True)
class PriceTerm:
    kind: TermKind
    commitment_months: float = 0.0  # the billed minimum (reserved 1 yr → 12); 0 → billed by the hour

    @property
    def label(self) -> str:
        if self.kind == "reserved":
            return f"reserved {self.commitment_months / 12:g} yr"
        return TERM_LABELS[self.kind]


def parse_term(pricing_model: str) -> PriceTerm:
    """The billing term a pricing-model text names; ValueError when it names none, or several at once.

    The first of several "/"-separated terms is the one the price is quoted for ("PAYG / 1y / 3y": PAYG).
    A blank pricing model is on-demand, the default of an inline price option."""
    text = pricing_model.strip().lower()
    if not text:
        return PriceTerm("on_demand")
    first = text.split("/", 1)[0].strip()
    if _SPOT.search(first):
        return PriceTerm("spot")
    if _CAPACITY_BLOCK.search(first):
        return PriceTerm("capacity_block")
    years = _YEARS.search(first)
    if years and (_COMMITMENT.search(first) or first == years.group(0)):
        return PriceTerm("reserved", 12.0 * float(years.group(1)))
    if _COMMITMENT.search(first) and not years:
        raise ValueError(f"{pricing_model!r} names a commitment without its length: say 1-yr or 3-yr")
    if _ON_DEMAND.search(first):
        return PriceTerm("on_demand")
    raise ValueError(
        f"{pricing_model!r} is not a known price term: say on-demand, spot, capacity block, "
        "or 1-yr / 3-yr reserved"
    )


def parse_unit(unit: str) -> UnitBasis:
    """Per GPU-hour or per instance-hour (blank: per GPU-hour); ValueError for any other unit of a cloud GPU
    price."""
    text = unit.strip().lower()
    if not text:
        return "gpu_hour"
    if _GPU_HOUR.match(text):
        return "gpu_hour"
    if _INSTANCE_HOUR.match(text):
        return "instance_hour"
    raise ValueError(f"{unit!r} is not a GPU price unit: say GPU-hour or instance-hour")


def usd_per_gpu_hour(price_usd: float, unit: UnitBasis, gpus_per_instance: int | None) -> float:
    """A quote normalised to one GPU-hour: an instance-hour price is shared by the instance's GPUs."""
    if unit == "gpu_hour":
        return price_usd
    if not gpus_per_instance or gpus_per_instance < 1:
        raise ValueError("an instance-hour price needs the GPUs per instance (gpus_per_unit)")
    return price_usd / gpus_per_instance
