"""Scaling panel of a planning session: efficiency and time to train vs GPU count, fabrics compared."""

from __future__ import annotations

from typing import Any

from app.core.errors import SpecError

SCALING_FABRICS = ("ib-ndr-8x400", "roce-8x400", "ethernet-tcp-100")
SCALING_STEPS = (-2, -1, 0, 1, 2, 3)  # powers of two around the chosen node count
MAX_SCALING_NODES = 1_000_000


SCALING_MODES = ("strong", "weak")
# Two fabrics whose times to train differ by less than this are called equal, with what the model leaves out.
SAME_FABRIC_PCT = 1.0
NOT_MODELLED = (
    "the model charges each fabric's line rate, latency, switch tiers and, on static ECMP fabrics, flow "
    "collisions; it does not model congestion control under incast (PFC pauses, ECN marking), switch buffers "
    "or NIC firmware, where fabrics of equal line rate can still differ"
)


def scaling_sweep(resolved: Any, options: Any, profile: Any, mode: str = "strong") -> dict[str, Any] | None:
    """Throughput, scaling efficiency and time to train vs GPU count on the chosen fabric and two others, from
    the network model's scaling curve (app.core.scaling; the model-parallel shape kept). Strong scaling keeps
    the user's global batch, so more GPUs train the same run; weak scaling grows the batch with them."""
    from app.catalog.fabrics import find_fabric
    from app.core.estimate import estimate
    from app.core.scaling import ScalingRun, scaling_curve

    cluster, layout = resolved.cluster, resolved.layout
    names = [cluster.fabric.name or SCALING_FABRICS[0]]
    names += [f for f in SCALING_FABRICS if f not in names][: 3 - len(names)]
    fabrics = {}
    for name in names:
        try:
            fabrics[name] = cluster.fabric if name == cluster.fabric.name else find_fabric(name)
        except LookupError:
            continue
    mp = layout.tp * layout.pp * layout.cp
    counts = sorted(
        {
            cluster.num_nodes * 2**k * cluster.gpus_per_node
            for k in SCALING_STEPS
            if 1 <= cluster.num_nodes * 2**k <= MAX_SCALING_NODES
        }
    )
    counts = [n for n in counts if n % mp == 0]
    if not counts:
        return None

    calibrated = profile

    def estimator(model: Any, c: Any, lay: Any, seq_len: int, profile: Any = None) -> Any:
        return estimate(model, c, lay, seq_len, profile or calibrated, options=options)

    try:
        run = ScalingRun(
            resolved.model,
            cluster,
            layout,
            resolved.seq_len,
            mode="weak" if mode == "weak" else "strong",
            estimator=estimator,
        )
        curve = scaling_curve(run, counts, fabrics, tokens=resolved.tokens or None)
    except SpecError:
        return None
    points: list[dict[str, Any]] = []
    skipped = 0
    for series in curve.series:
        for p in series.points:
            if p.error is not None:
                skipped += 1
                continue
            points.append(
                {
                    "fabric": series.fabric_name,
                    "gpus": p.num_gpus,
                    "nodes": p.nodes,
                    "global_batch": p.global_batch,
                    "tokens_per_s": p.tokens_per_s,
                    "efficiency": p.scaling_efficiency,
                    "network_efficiency": p.network_efficiency,
                    "days": p.time_to_train_days,
                    "fits": p.fits_memory,
                }
            )
    if not points:
        return None
    note = "; ".join(curve.assumptions) + "."
    close = _close_fabrics(points)
    if close:
        note += f" {close} come out within {SAME_FABRIC_PCT:g} % of each other: {NOT_MODELLED}."
    if skipped:
        note += f" {skipped} size/fabric points could not be estimated and are left out."
    if any(not p["fits"] for p in points):
        note += " Some points do not fit in memory (shown anyway)."
    return {"fabrics": [s.fabric_name for s in curve.series], "points": points, "note": note, "mode": mode}


def _close_fabrics(points: list[dict[str, Any]]) -> str:
    """'a and b' when two fabrics' times to train are within SAME_FABRIC_PCT at every size both reach."""
    by_fabric: dict[str, dict[int, float]] = {}
    for p in points:
        if p.get("days"):
            by_fabric.setdefault(p["fabric"], {})[p["gpus"]] = float(p["days"])
    names = list(by_fabric)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = set(by_fabric[a]) & set(by_fabric[b])
            if shared and all(
                abs(by_fabric[a][n] - by_fabric[b][n]) <= SAME_FABRIC_PCT / 100 * by_fabric[a][n]
                for n in shared
            ):
                pairs.append(f"{a} and {b}")
    return "; ".join(pairs)
