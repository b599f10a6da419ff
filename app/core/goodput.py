"""Goodput: failures, checkpoint intervals, restarts, lost work, spot preemption.

Failure model: independent components with constant (exponential) failure rates; a job on N GPUs is
interrupted when any GPU, node or switch it uses fails, so rates add (series system).
Checkpoint interval: Young (1974) first order, Daly (2006) higher order. Expected wall time with
checkpoints, restarts and rework: Daly (2006) §3 for exponential failures. All times in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from app.core.errors import Problem, ProblemCollector, SpecError
from app.core.storage import Assumption

HOUR = 3600.0
DAY = 86400.0

IntervalMethod = Literal["young", "daly"]


# --- failure rates -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailureRates:
    """Failure rates per component-hour (failures / (component · hour))."""

    per_gpu_per_hour: float
    per_node_per_hour: float
    per_switch_per_hour: float = 0.0
    source: str = ""


def fat_tree_switches(num_nodes: int, nics_per_node: int = 8, radix: int = 64) -> int:
    """Switches of a non-blocking fat tree connecting num_nodes × nics_per_node ports.

    One leaf switch serves radix/2 hosts; two tiers serve radix²/2 hosts with radix/2 spines per radix leaves;
    beyond that a third tier (k³/4 hosts, Al-Fares et al., SIGCOMM 2008 §3) with aggregation = leaves and
    core = leaves/2.
    """
    ports = max(1, num_nodes * nics_per_node)
    half = radix // 2
    leaves = math.ceil(ports / half)
    if leaves == 1:
        return 1
    if ports <= radix * half:
        return leaves + math.ceil(leaves / 2)
    return leaves + leaves + math.ceil(leaves / 2)


def interruption_rate_per_hour(
    rates: FailureRates, num_gpus: int, gpus_per_node: int = 8, num_switches: int | None = None
) -> dict[str, float]:
    """Job interruption rate (per hour) split by component class; the total is the sum (series system)."""
    nodes = math.ceil(num_gpus / gpus_per_node)
    switches = fat_tree_switches(nodes) if num_switches is None else num_switches
    parts = {
        "gpu": num_gpus * rates.per_gpu_per_hour,
        "node": nodes * rates.per_node_per_hour,
        "switch": switches * rates.per_switch_per_hour,
    }
    parts["total"] = parts["gpu"] + parts["node"] + parts["switch"]
    return parts


@dataclass(frozen=True)
class FailurePreset:
    """Interruptions observed on a published training run, turned into per-component rates."""

    name: str
    num_gpus: int
    gpus_per_node: int
    duration_days: float
    interruptions: float
    gpu_interruptions: float
    switch_interruptions: float
    source: str
    date: str
    notes: str = ""
    checkpoint_stall_s: float = 60.0
    restart_s: float = 600.0

    @property
    def node_interruptions(self) -> float:
        return self.interruptions - self.gpu_interruptions - self.switch_interruptions

    @property
    def job_mtbf_s(self) -> float:
        return self.duration_days * DAY / self.interruptions

    def rates(self) -> FailureRates:
        hours = self.duration_days * 24.0
        nodes = math.ceil(self.num_gpus / self.gpus_per_node)
        switches = fat_tree_switches(nodes)
        return FailureRates(
            per_gpu_per_hour=self.gpu_interruptions / (self.num_gpus * hours),
            per_node_per_hour=self.node_interruptions / (nodes * hours),
            per_switch_per_hour=self.switch_interruptions / (switches * hours)
            if self.switch_interruptions
            else 0.0,
            source=f"{self.name}: {self.source}",
        )


# Llama 3 (Dubey et al. 2024, arXiv 2407.21783, §3.3.4 and Table 5): 419 unexpected interruptions in a
# 54-day snapshot of pre-training on 16,384 H100. By root cause: faulty GPU 148, GPU HBM3 72, GPU SRAM 19,
# GPU system processor 17, silent data corruption 6, GPU thermal interface/sensor 6 (GPU: 268);
# network switch/cable 35; the other 116 (software bug 54, host maintenance 32, NIC 7, NCCL watchdog 7,
# SSD 3, PSU 3, chassis 2, IO board 2, dependency 2, CPU 2, system memory 2) are counted per node.
# Meta reports > 90 % effective training time for this run.
PRESETS: dict[str, FailurePreset] = {
    "llama3-405b": FailurePreset(
        name="llama3-405b",
        num_gpus=16384,
        gpus_per_node=8,
        duration_days=54.0,
        interruptions=419.0,
        gpu_interruptions=268.0,
        switch_interruptions=35.0,
        source="Llama 3 Herd of Models (arXiv 2407.21783) §3.3.4, Table 5: 419 unexpected interruptions, 54 days, "
        "16,384 H100",
        date="2024-07",
        notes="switch rate uses a derived 3-tier fat-tree switch count (radix 64)",
        checkpoint_stall_s=30.0,
        restart_s=600.0,
    ),
    # OPT-175B (Zhang et al. 2022, arXiv 2205.01068 §2.5): 992 80GB A100; "at least 35 manual restarts and
    # the cycling of over 100 hosts over the course of 2 months". Manual restarts only (a lower bound):
    # automatic restarts are not counted. Causes not broken down: all assigned to nodes.
    "opt-175b": FailurePreset(
        name="opt-175b",
        num_gpus=992,
        gpus_per_node=8,
        duration_days=60.0,
        interruptions=35.0,
        gpu_interruptions=0.0,
        switch_interruptions=0.0,
        source="OPT (arXiv 2205.01068) §2.5: at least 35 manual restarts in about 2 months on 992 A100",
        date="2022-05",
        notes="lower bound: manual restarts only",
        checkpoint_stall_s=300.0,
        restart_s=1800.0,
    ),
    # BLOOM (BigScience 2022, arXiv 2211.05100 §3.5 and the training chronicles): 384 A100 80GB (48 nodes)
    # for ~3.5 months; "on average 1-2 GPU failures each week" → 1.5/week, all attributed to GPUs.
    "bloom-176b": FailurePreset(
        name="bloom-176b",
        num_gpus=384,
        gpus_per_node=8,
        duration_days=7.0,
        interruptions=1.5,
        gpu_interruptions=1.5,
        switch_interruptions=0.0,
        source="BLOOM (arXiv 2211.05100) §3.5: on average 1-2 GPU failures each week on 384 A100",
        date="2022-11",
        notes="midpoint of 1-2 per week",
        checkpoint_stall_s=60.0,
        restart_s=1800.0,
    ),
}


# --- checkpoint interval -------------------------------------------------------------------------------


# Below 1 % goodput (100 s of wall time per useful second) a job is not making progress worth modelling: the
# request is refused (422) rather than answered with a run a hundred times longer than its work.
MAX_WALL_PER_USEFUL = 100.0


def young_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9):
    τ = sqrt(2 δ M)."""
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps",
    FGCS 22(3) §4 (higher-order estimate): τ = sqrt(2δM)·[1 + ⅓·sqrt(δ/2M) + ⅑·(δ/2M)] − δ for δ < 2M, else τ = M."""
    if checkpoint_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = checkpoint_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * checkpoint_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - checkpoint_s


def expected_wall_time(
    solve_s: float, interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float
) -> float:
    """Daly (2006) §3, expected wall time with exponential failures: T_w = M·e^(R/M)·(e^((τ+δ)/M) − 1)·T_s/τ."""
    m = mtbf_s
    exponent = max(restart_s / m, (interval_s + checkpoint_s) / m)
    if exponent > 700.0:  # e^700 ≈ 1e304: the job essentially never finishes a segment
        return math.inf
    return m * math.exp(restart_s / m) * math.expm1((interval_s + checkpoint_s) / m) * solve_s / interval_s


# --- fail-slow -----------------------------------------------------------------------------------------

# Wu et al., "Greyhound: Hunting Fail-Slows in Hybrid-Parallel Training at Scale", USENIX ATC '25 (preprint
# "FALCON", arXiv 2410.12588), abstract: on a shared production cluster of over 10,000 GPUs, fail-slows
# (transient stragglers from slow computation or communication: contention, device degradation, network
# congestion), lasting from under a minute to nearly ten hours, "delay large training jobs by 1.34x on
# average". A fail-slow does not stop the job, so no failure rate or restart sees it: the steps run slower,
# the whole synchronous job waiting for its slowest GPU or link. The study's jobs are hybrid-parallel jobs
# across many servers and the average is theirs; how it grows between one server and thousands is not
# published, so every job that spans more than one node is charged the average and a job within one node
# (no cross-node link to congest, no fleet to wait on) nothing. docs/constants.md#fail-slow-slowdown
FAIL_SLOW_SLOWDOWN = 1.34
FAIL_SLOW_SOURCE = (
    "Greyhound (Wu et al., USENIX ATC '25; arXiv 2410.12588): fail-slows delay large training jobs by 1.34x on "
    "average on a shared production cluster of over 10,000 GPUs"
)
# the default in words, for the inputs that take another value
FAIL_SLOW_DEFAULT_TEXT = f"{FAIL_SLOW_SLOWDOWN:g} across nodes (Greyhound, USENIX ATC '25), 1 within one node"


def fail_slow_slowdown(num_nodes: int) -> float:
    """The expected slowdown of a job's training steps from fail-slows: FAIL_SLOW_SLOWDOWN across nodes, none
    within one node."""
    return FAIL_SLOW_SLOWDOWN if num_nodes > 1 else 1.0


# --- goodput -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoodputInputs:
    mtbf_s: float  # job mean time between interruptions
    checkpoint_stall_s: float  # training pause per checkpoint (sync write, or async snapshot)
    restart_s: float  # detect + reschedule + reload checkpoint + warm-up
    interval_s: float | None = None  # None → optimal by `method`
    method: IntervalMethod = "daly"
    mfu: float | None = None  # to report effective MFU
    # async checkpointing: the next snapshot cannot start before the previous background write has
    # finished, so the interval is at least the background write time
    min_interval_s: float = 0.0
    # training steps run this many times slower than planned on average (fail_slow_slowdown); 1: none
    fail_slow: float = 1.0


@dataclass(frozen=True)
class GoodputResult:
    interval_s: float
    young_interval_s: float
    daly_interval_s: float
    goodput: float  # useful time / wall time
    effective_mfu: float | None
    # per useful second: useful / checkpoint / restart / lost_work / fail_slow; sums to wall
    breakdown: dict[str, float]
    wall_per_useful: float
    interruptions_per_day: float
    assumptions: list[Assumption] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "interval_s": self.interval_s,
            "young_interval_s": self.young_interval_s,
            "daly_interval_s": self.daly_interval_s,
            "goodput": self.goodput,
            "effective_mfu": self.effective_mfu,
            "breakdown": self.breakdown,
            "wall_per_useful": self.wall_per_useful,
            "interruptions_per_day": self.interruptions_per_day,
            "assumptions": [a.as_dict() for a in self.assumptions],
        }


def goodput(inputs: GoodputInputs) -> GoodputResult:
    """Fraction of wall-clock time that advances training, with the optimal (or given) checkpoint interval.

    Breakdown (seconds of wall time per second of useful work), from Daly's W = e^(R/M)·W0 with
    W0 = M(e^((τ+δ)/M) − 1)/τ the wall time without restarts: checkpoint = δ/τ; lost_work = W0 − 1 − δ/τ
    (rework of interrupted segments, ≥ 0 since eˣ − 1 ≥ x); restart = W − W0 = W0(e^(R/M) − 1). Fail-slows
    stretch each useful second to `fail_slow` seconds: fail_slow = s − 1, added to W (the rework they also
    slow, a second-order share, is left out).
    """
    pc = ProblemCollector()
    pc.check(inputs.mtbf_s > 0, "mtbf_s", "must be positive")
    pc.check(inputs.checkpoint_stall_s >= 0, "checkpoint_stall_s", "must be >= 0")
    pc.check(inputs.restart_s >= 0, "restart_s", "must be >= 0")
    pc.check(inputs.interval_s is None or inputs.interval_s > 0, "interval_s", "must be positive")
    pc.check(inputs.mfu is None or 0 < inputs.mfu <= 1, "mfu", "must be in (0, 1]")
    pc.check(1.0 <= inputs.fail_slow <= 10.0, "fail_slow_slowdown", "must be in [1, 10]")
    pc.raise_if_any()
    m, d, r = inputs.mtbf_s, inputs.checkpoint_stall_s, inputs.restart_s
    young = young_interval(d, m) if d > 0 else math.inf
    daly = daly_interval(d, m) if d > 0 else math.inf
    tau = inputs.interval_s if inputs.interval_s is not None else daly if inputs.method == "daly" else young
    if not math.isfinite(tau):
        tau = m / 100.0  # free checkpoints: checkpoint very often; rework → 0
    if inputs.interval_s is None:
        tau = max(tau, inputs.min_interval_s)
    ckpt = d / tau
    slow = inputs.fail_slow - 1.0
    # the floor applies to the whole wall time per useful second, fail-slows included
    if not expected_wall_time(1.0, tau, d, r, m) + slow <= MAX_WALL_PER_USEFUL:
        raise SpecError(
            [
                Problem(
                    "mtbf_s",
                    "interruptions are so frequent relative to checkpoint and restart time that the job "
                    f"makes no progress (goodput below {1 / MAX_WALL_PER_USEFUL:.0%})",
                )
            ]
        )
    # e^x − 1 ≥ x guarantees W0 ≥ 1 + δ/τ and W ≥ W0; the max() only absorbs floating-point rounding
    w0 = max(expected_wall_time(1.0, tau, d, 0.0, m), 1.0 + ckpt)
    w = max(expected_wall_time(1.0, tau, d, r, m), w0)
    restart = w - w0
    lost = max(0.0, w0 - 1.0 - ckpt)
    w += slow
    g = 1.0 / w
    return GoodputResult(
        interval_s=tau,
        young_interval_s=young,
        daly_interval_s=daly,
        goodput=g,
        effective_mfu=inputs.mfu * g if inputs.mfu is not None else None,
        breakdown={
            "useful": 1.0,
            "checkpoint": ckpt,
            "restart": restart,
            "lost_work": lost,
            "fail_slow": slow,
        },
        wall_per_useful=w,
        interruptions_per_day=DAY / m,
        assumptions=[
            Assumption(
                "failure_model", "exponential", "", "Daly 2006 §3 expected wall time; Young 1974", "2006"
            ),
            Assumption(
                "interval_method",
                inputs.method if inputs.interval_s is None else "given",
                "",
                "Young 1974 first order / Daly 2006 higher order",
                "",
            ),
            Assumption(
                "min_interval_s",
                inputs.min_interval_s,
                "s",
                "background write of the previous checkpoint",
                "",
            ),
            Assumption("fail_slow_slowdown", inputs.fail_slow, "x", _fail_slow_source(inputs.fail_slow), ""),
        ],
    )


def _fail_slow_source(slowdown: float) -> str:
    if slowdown == FAIL_SLOW_SLOWDOWN:
        return FAIL_SLOW_SOURCE
    return "none: one node, or switched off" if slowdown == 1.0 else "user input"


def restart_time(
    checkpoint_read_s: float,
    detect_s: float = 120.0,
    reschedule_s: float = 300.0,
    warmup_s: float = 120.0,
) -> dict[str, float]:
    """Restart time = detect the hang/failure + reschedule (replace node, re-rendezvous) + load + warm-up.

    Defaults: NCCL watchdog / health check detection ~2 min, rescheduling onto a spare ~5 min, warm-up
    (compile, first steps) ~2 min: engineering estimates consistent with Llama 3's automated recovery
    (arXiv 2407.21783 §3.3.4: most interruptions handled automatically) — assumptions, replace with measured.
    """
    parts = {
        "detect": detect_s,
        "reschedule": reschedule_s,
        "load_checkpoint": checkpoint_read_s,
        "warmup": warmup_s,
    }
    parts["total"] = sum(parts.values())
    return parts


def checkpoint_idle_hours(num_checkpoints: int, stall_s: float) -> float:
    """Idle GPU time of a run from checkpoint stalls alone."""
    return num_checkpoints * stall_s / HOUR


# --- spot instances ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpotInputs:
    on_demand_usd_per_hour: float
    spot_discount: float  # fraction off on-demand (0.6 = 60 % cheaper)
    preemptions_per_day: float  # job-level
    lost_work_s: float | None = None  # per preemption; None → half the checkpoint interval (+ nothing saved)
    checkpoint_interval_s: float = 3600.0
    notice_s: float = 120.0  # AWS 2-minute interruption notice
    checkpoint_stall_s: float = 60.0  # with checkpoint_on_notice, a notice this long saves the work
    # the job writes an emergency checkpoint when the preemption notice arrives (a hook the training script must
    # have; off by default: periodic checkpoints only, so a preemption loses half an interval on average)
    checkpoint_on_notice: bool = False
    restart_s: float = 1200.0  # re-provision + reload + warm-up, paid while idle
    reacquire_wait_s: float = 0.0  # waiting for spot capacity to come back (not billed, but wall time)
    billed_while_waiting_fraction: float = 0.0  # share of the fleet kept (and billed) while waiting


@dataclass(frozen=True)
class SpotResult:
    spot_usd_per_hour: float
    useful_fraction: float  # useful work per billed hour
    cost_per_useful_hour_spot: float
    cost_per_useful_hour_on_demand: float
    net_savings: float  # 1 − spot / on-demand, per useful hour
    lost_hours_per_preemption: float
    wall_slowdown: float  # wall time / useful time on spot
    breakdown_per_day: dict[str, float]  # billed hours per day: useful / lost_work / restart / waiting
    assumptions: list[Assumption]

    def to_dict(self) -> dict[str, object]:
        return {
            "spot_usd_per_hour": self.spot_usd_per_hour,
            "useful_fraction": self.useful_fraction,
            "cost_per_useful_hour_spot": self.cost_per_useful_hour_spot,
            "cost_per_useful_hour_on_demand": self.cost_per_useful_hour_on_demand,
            "net_savings": self.net_savings,
            "lost_hours_per_preemption": self.lost_hours_per_preemption,
            "wall_slowdown": self.wall_slowdown,
            "breakdown_per_day": self.breakdown_per_day,
            "assumptions": [a.as_dict() for a in self.assumptions],
        }


def spot_savings(inputs: SpotInputs) -> SpotResult:
    """Net savings of spot vs on-demand per hour of useful work.

    Per preemption the job loses the work since the last checkpoint (half an interval on average; zero only
    when it checkpoints on the notice and the notice is long enough to write one) plus the restart, both billed; waiting for capacity is
    billed only for the share of the fleet held. Useful fraction f = 1 − (billed non-useful hours per day)/24;
    spot costs price_spot / f per useful hour against price_on_demand on-demand.
    """
    pc = ProblemCollector()
    pc.check(inputs.on_demand_usd_per_hour > 0, "on_demand_usd_per_hour", "must be positive")
    pc.check(0 <= inputs.spot_discount < 1, "spot_discount", "must be in [0, 1)")
    pc.check(inputs.preemptions_per_day >= 0, "preemptions_per_day", "must be >= 0")
    pc.check(inputs.lost_work_s is None or inputs.lost_work_s >= 0, "lost_work_s", "must be >= 0")
    pc.check(inputs.restart_s >= 0, "restart_s", "must be >= 0")
    pc.check(
        0 <= inputs.billed_while_waiting_fraction <= 1, "billed_while_waiting_fraction", "must be in [0, 1]"
    )
    pc.raise_if_any()
    if inputs.lost_work_s is not None:
        lost = inputs.lost_work_s
    elif inputs.checkpoint_on_notice and inputs.notice_s >= inputs.checkpoint_stall_s:
        lost = 0.0  # emergency checkpoint within the notice
    else:
        lost = inputs.checkpoint_interval_s / 2.0
    n = inputs.preemptions_per_day
    lost_h = n * lost / HOUR
    restart_h = n * inputs.restart_s / HOUR
    waiting_h = n * inputs.reacquire_wait_s / HOUR * inputs.billed_while_waiting_fraction
    billed_day = 24.0
    non_useful = lost_h + restart_h + waiting_h
    useful_h = max(0.0, billed_day - non_useful)
    f = useful_h / billed_day
    spot_price = inputs.on_demand_usd_per_hour * (1.0 - inputs.spot_discount)
    per_useful_spot = spot_price / f if f > 0 else math.inf
    unbilled_wait_h = n * inputs.reacquire_wait_s / HOUR * (1.0 - inputs.billed_while_waiting_fraction)
    slowdown = (billed_day + unbilled_wait_h) / useful_h if useful_h > 0 else math.inf
    return SpotResult(
        spot_usd_per_hour=spot_price,
        useful_fraction=f,
        cost_per_useful_hour_spot=per_useful_spot,
        cost_per_useful_hour_on_demand=inputs.on_demand_usd_per_hour,
        net_savings=1.0 - per_useful_spot / inputs.on_demand_usd_per_hour,
        lost_hours_per_preemption=(lost + inputs.restart_s) / HOUR,
        wall_slowdown=slowdown,
        breakdown_per_day={
            "useful": useful_h,
            "lost_work": lost_h,
            "restart": restart_h,
            "waiting": waiting_h,
        },
        assumptions=[
            Assumption(
                "notice_s",
                inputs.notice_s,
                "s",
                "AWS spot: 2-minute interruption notice (docs.aws.amazon.com/AWSEC2/latest/UserGuide/"
                "spot-instance-termination-notices.html); GCP spot: 30 s",
                "2025",
            ),
            Assumption("restart_s", inputs.restart_s, "s", "assumption: re-provision + reload + warm-up", ""),
            Assumption(
                "lost_work_s",
                lost,
                "s",
                "given"
                if inputs.lost_work_s is not None
                else "checkpoint written within the notice"
                if lost == 0.0
                else "half the checkpoint interval: the work since the last periodic checkpoint, on average",
                "",
            ),
        ],
    )


@dataclass(frozen=True)
class SpotClaimInversion:
    """Which single input, changed alone, makes the model give a target net saving."""

    target_net_savings: float
    # None where no value reaches the target, with the reason in `unreachable`
    lost_hours_per_preemption: float | None  # with the given discount and preemption rate
    preemptions_per_day: float | None  # with the given discount and lost hours
    spot_discount: float | None  # with the given preemption rate and lost hours
    unreachable: tuple[str, ...] = ()


def invert_spot_claim(
    target_net_savings: float,
    spot_discount: float,
    preemptions_per_day: float,
    lost_hours_per_preemption: float,
) -> SpotClaimInversion:
    """Solve 1 − (1 − d)/(1 − n·h/24) = s for each of h, n and d in turn (the others held)."""
    ratio = 1.0 - target_net_savings  # spot cost per useful hour / on-demand
    f_needed = (1.0 - spot_discount) / ratio  # useful fraction needed at discount d
    lost_day = (1.0 - f_needed) * 24.0
    h = lost_day / preemptions_per_day if preemptions_per_day > 0 else math.inf
    n = lost_day / lost_hours_per_preemption if lost_hours_per_preemption > 0 else math.inf
    f_given = 1.0 - preemptions_per_day * lost_hours_per_preemption / 24.0
    d = 1.0 - ratio * f_given
    notes: list[str] = []
    h_out: float | None = h
    n_out: float | None = n
    d_out: float | None = d
    if lost_day < 0:  # even with no preemptions the discount gives less than the target
        h_out = n_out = None
        notes.append(
            f"a {spot_discount:.0%} discount saves at most {spot_discount:.0%} with no preemptions at all: no "
            "preemption rate or lost work reaches the target"
        )
    if not 0.0 <= d < 1.0:
        d_out = None
        notes.append(
            "the preemptions leave no useful time to discount"
            if f_given <= 0
            else f"it would take a discount of {d:.0%}, outside 0-100 %"
        )
    return SpotClaimInversion(target_net_savings, h_out, n_out, d_out, tuple(notes))
