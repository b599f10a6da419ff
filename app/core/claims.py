"""A verdict on a claimed scaling figure: reproduced by the model, explained by a named mechanism, or unreproducible.

A claim is a scaling efficiency at a GPU count on one fabric, or a throughput ratio against another fabric (the
scaling endpoint's `claims`). The model's own figure for it and the fabric values that would reproduce it
(app.core.scaling.required_assumption) come in; the verdict says which of three it is:

* **reproduced**: the claim is within the median error of the estimator's published comparisons of two setups of
  one run (half of them fall within it; app/catalog/accuracy.json, "ranking") of the model's figure: a scaling
  efficiency, or a throughput ratio of two fabrics, is such a comparison;
* **explained**: the claim is lower than the model's figure, and a fabric value inside what published
  measurements show reproduces it: a congestion derate no deeper than the largest published routing loss, the
  end-to-end latency of a catalog fabric, or a smaller whole number of NICs per node (a configuration the claim's
  cluster would then have had);
* **unreproducible**: neither; the verdict names what the claim would need and the published figure it exceeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.core.scaling import RequiredAssumption

Verdict = Literal["reproduced", "explained", "unreproducible"]

# The largest published loss of line rate to flow collisions: Meta's E-ECMP hashing with QP scaling gave "up to
# 40 %" better AllReduce than 5-tuple ECMP on its RoCE AI zones (Gangidi et al., "RDMA over Ethernet for
# Distributed AI Training at Meta Scale", SIGCOMM 2024, Sec. 5), so ECMP kept at least 1 / 1.4 of the line rate
# that collisions take; a derate deeper than this has no published measurement behind it (docs/network.md).
LARGEST_PUBLISHED_ROUTING_GAIN = 1.4
SMALLEST_PUBLISHED_DERATE = 1.0 / LARGEST_PUBLISHED_ROUTING_GAIN


@dataclass(frozen=True)
class ClaimVerdict:
    verdict: Verdict
    claimed: float
    modelled: float | None  # the model's figure for the claim on its fabric as given
    gap_pct: float | None  # claimed ÷ modelled − 1, per cent
    tolerance_pct: float  # the median comparison error the claim was judged against
    reason: str


def judge_claim(
    claimed: float,
    modelled: float | None,
    required: Sequence[RequiredAssumption],
    tolerance_pct: float,
    *,
    nics_per_node: int,
    largest_catalog_latency_s: float,
) -> ClaimVerdict:
    """The verdict on one claim (module docstring); `required` holds the claim's solved fabric values."""
    if modelled is None or modelled <= 0:
        return ClaimVerdict(
            "unreproducible", claimed, None, None, tolerance_pct, "the model has no figure here"
        )
    gap = (claimed / modelled - 1.0) * 100.0
    verdict = _judged(claimed, modelled, gap, tolerance_pct)
    if verdict is not None:
        return verdict
    if claimed > modelled:
        reason = (
            f"the claim is {gap:+.1f} % from the model's {modelled:.1%}, beyond ±{tolerance_pct:.1f} %, "
            "and higher: explaining it would take a faster fabric than the one given, which is not searched for"
        )
        return ClaimVerdict("unreproducible", claimed, modelled, gap, tolerance_pct, reason)
    found = [
        _within_published(r, claimed, tolerance_pct, nics_per_node, largest_catalog_latency_s)
        for r in required
    ]
    explained = [text for ok, text in found if ok]
    needs = "; ".join(text for _, text in found) or "no fabric value was solved for"
    if explained:
        reason = f"the model gives {modelled:.1%} ({gap:+.1f} %) on the fabric as given; it reproduces the claim with {explained[0]}"
        return ClaimVerdict("explained", claimed, modelled, gap, tolerance_pct, reason)
    reason = f"the model gives {modelled:.1%} ({gap:+.1f} %); the claim would need {needs}"
    return ClaimVerdict("unreproducible", claimed, modelled, gap, tolerance_pct, reason)


def _judged(claimed: float, modelled: float, gap: float, tolerance_pct: float) -> ClaimVerdict | None:
    if abs(gap) <= tolerance_pct:
        reason = (
            f"the claim is {gap:+.1f} % from the model's {modelled:.1%}: within ±{tolerance_pct:.1f} %, the median "
            "error of the estimator's published comparisons of two setups of one run"
        )
        return ClaimVerdict("reproduced", claimed, modelled, gap, tolerance_pct, reason)
    return None


def _within_published(
    r: RequiredAssumption, claimed: float, tolerance_pct: float, nics_per_node: int, largest_latency_s: float
) -> tuple[bool, str]:
    """(whether the solved value lies inside what published measurements show, the value in words)."""
    if r.knob == "nics_per_node":
        return _fewer_nics(r, claimed, tolerance_pct, nics_per_node)
    if r.value is None:
        return False, f"{r.knob}: not reachable ({r.note or 'no value in the searched range'})"
    if r.knob == "congestion_derate":
        ok = r.value >= SMALLEST_PUBLISHED_DERATE
        return ok, (
            f"a congestion derate of {r.value:.2f} (published routing losses reach {SMALLEST_PUBLISHED_DERATE:.2f}: "
            f"Meta's E-ECMP gain of up to {LARGEST_PUBLISHED_ROUTING_GAIN - 1:.0%})"
        )
    if r.knob == "base_latency_s":
        ok = r.value <= largest_latency_s
        return ok, (
            f"an end-to-end latency of {r.value * 1e6:,.0f} µs per network step (catalog fabrics: at most "
            f"{largest_latency_s * 1e6:,.0f} µs)"
        )
    return False, f"{r.knob} = {r.value:g}"


def _fewer_nics(
    r: RequiredAssumption, claimed: float, tolerance_pct: float, nics_per_node: int
) -> tuple[bool, str]:
    """A smaller whole NIC count explains a claim when the model's efficiency with it is as close to the claim as a
    reproduction must be (the same tolerance)."""
    if r.nearest is None or r.nearest_efficiency is None or r.nearest_efficiency <= 0:
        return False, f"nics_per_node: not reachable ({r.note or 'no NIC count was tried'})"
    count, efficiency = round(r.nearest), r.nearest_efficiency
    gap = (claimed / efficiency - 1.0) * 100.0
    words = f"{count} NIC{'' if count == 1 else 's'} per node instead of {nics_per_node} ({efficiency:.1%}"
    if count >= nics_per_node:
        return False, words + ": no fewer NICs come nearer)"
    return abs(gap) <= tolerance_pct, words + f", the claim {gap:+.1f} % from it)"
