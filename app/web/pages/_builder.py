"""The plan builder's form state: query parameters ⇄ a typed state ⇄ the shared scenario dict.

The builder form submits with GET, so the address bar always holds the whole view; a saved scenario
turns back into the same query parameters, so "edit" and "reload by URL" both land on the same page.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any
from urllib.parse import urlencode

from app.core.errors import Problem, SpecError
from app.core.knobs import Knob, generic_knobs, knob
from app.schemas.fields import parse_json_text

TOKENS_UNIT = 1e9  # the form takes training tokens in billions

# the ZeRO stages the builder's select offers: the registry's labelled range (app.core.knobs, "zero")
ZERO_CHOICES = tuple(int(value) for value, _ in knob("layout.zero").options)
MODE_CHOICES = ("manual", "planner")
RANK_CHOICES = (
    "time",
    "cost",
)  # planner mode: rank layouts by time to train or cost per run (PlanRequest.rank_by)
SCALING_CHOICES = ("strong", "weak")  # app.services.plan_scaling.SCALING_MODES
# planner-mode checkboxes (sent as name=1, absent from the query when off)
PLANNER_FLAGS = ("plan_offload", "plan_optimizer_offload", "plan_avoid_light_moe")
# the sizing goals: upper bound and what the value is (a deadline of 100 years is no deadline)
SIZING_LIMITS = {"deadline_days": (36_500.0, "days"), "budget_usd": (1e12, "US dollars")}

# checkboxes sent the same way in both modes
OPTIONAL_FLAGS = (*PLANNER_FLAGS, "fp8_params", "moe_a2a_overlap", "moe_fused_grouped_gemm")

# The builder's choices that the scenario does not hold (it stores only the layout the planner chose): saved with
# each plan revision (PlanRevision.builder_choices), so opening a saved plan in the builder restores them.
SAVED_CHOICES = (
    "mode",
    "rank_by",
    "scaling_mode",
    "deadline_days",
    "budget_usd",
    *PLANNER_FLAGS,
)


@dataclass
class BuilderState:
    model: str = "llama-3-8b"
    hf_config: str = ""
    gpu: str = "H100-SXM"
    nodes: int = 2
    gpus_per_node: int = 8
    fabric: str = "ib-ndr-8x400"
    # cluster.fail_slow_slowdown: the average slowdown from fail-slows in the goodput (0 = the model's default)
    fail_slow: float = 0.0
    tokens_b: float = 1000.0
    scaling_mode: str = "strong"  # the scaling panel keeps the global batch (strong) or grows it (weak)
    deadline_days: float = 0.0  # "finish within N days": the size panel finds the smallest cluster (0 = none)
    budget_usd: float = 0.0  # "at most $X per run" (0 = none)
    seq_len: int = 4096
    global_batch: int = 256
    mode: str = "manual"
    rank_by: str = "time"  # planner mode: what the ranking and the headline layout follow
    tp: int = 2
    pp: int = 1
    vp: int = 1
    first_stage_layers: int = 0  # layers on the first pipeline stage; 0 = an even split
    last_stage_layers: int = 0  # layers on the last pipeline stage; 0 = an even split
    stage_layers: str = ""  # comma-separated layers of every stage, first to last; empty = derived
    cp: int = 1
    ep: int = 1
    etp: int = 0  # expert tensor parallel under MoE parallel folding; 0 = unset (= tp)
    zero: int = 1
    reshard_after: str = (
        "forward"  # ZeRO-3: re-shard after forward, backward or the step (Layout.reshard_after)
    )
    sp: bool = True
    recompute: str = "selective"
    recompute_modules: str = (
        ""  # comma-separated Megatron-core modules for selective recompute; empty = core_attn
    )
    micro_batch: int = 1
    offload_layers: int = 0  # layers whose activations go to host memory (pp = 1, no recompute); 0 = none
    offload_modules: str = ""  # comma-separated modules for fine-grained activation offloading; empty = none
    optimizer_offload: float = 0.0  # share of the optimizer states kept and updated on the host; 0 = none
    dtype: str = "bf16"
    bf16_first_layers: int = 0  # fp8 / fp4: layers at the start kept 16-bit; 0 = none
    bf16_last_layers: int = 0  # fp8 / fp4: layers at the end kept 16-bit; 0 = none
    fp8_params: bool = False  # fp8: working weights kept and gathered as FP8 (layout fp8_param_gather)
    optimizer_moments_dtype: str = "fp32"  # Adam moments; bf16 = Megatron-core's precision-aware optimizer
    # multi-token-prediction modules on the last stage (Megatron-core --mtp-num-layers); 0 = the model's own. Sent as
    # the scenario's layout.mtp_layers, which app.services.scenario applies to the model
    mtp_layers: int = 0
    # planner mode: also rank layouts that offload 1/4, 1/2 or 3/4 of the layers' activations to host memory
    plan_offload: bool = False
    # planner mode: also rank layouts that keep half or all of the optimizer states on the host
    plan_optimizer_offload: bool = False
    # planner mode, MoE: leave out layouts whose layer passes are light enough to be host-bound
    plan_avoid_light_moe: bool = False
    profile: str = ""  # calibration profile ("name v3"); empty → published defaults
    attention_backend: str = (
        "auto"  # fused attention kernel; auto = the framework's (scenario attention_backend)
    )
    moe_dispatcher: str = "alltoall"  # MoE token dispatcher (scenario moe_dispatcher); MoE models only
    moe_a2a_overlap: bool = (
        False  # hide the EP all-to-alls behind the other micro-batch (scenario moe_a2a_overlap)
    )
    # the experts as one fused grouped GEMM (scenario moe_fused_grouped_gemm); MoE models on megatron-core or nemo
    moe_fused_grouped_gemm: bool = False
    # the DDP bucket size in parameters (scenario ddp_bucket_size); 0 = Megatron-core's default
    ddp_bucket_size: int = 0
    # the generic layout knobs' values (app.core.knobs, generic=True), 0 = unset; read as state.<name>
    knob_values: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)  # the text of inputs that were refused (parse_state)

    def __getattr__(self, name: str) -> Any:
        """A generic knob's value by its name (0 = unset), as the template and the query read the others."""
        if name in GENERIC_NAMES:
            return self.__dict__.get("knob_values", {}).get(name, 0)
        raise AttributeError(name)

    @property
    def num_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def dp(self) -> int:
        denom = self.tp * self.pp * self.cp
        return self.num_gpus // denom if denom > 0 and self.num_gpus % denom == 0 else 0

    def query(self, **overrides: Any) -> str:
        """The query string that reproduces this state (checkbox off is sent as sp=0); inputs left empty or at
        their default stay out of the address."""
        skip = ("errors", "raw", "knob_values")
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        data.update({name: getattr(self, name) for name in GENERIC_NAMES})
        data.update(overrides)
        data["sp"] = "1" if data["sp"] else "0"
        for flag in OPTIONAL_FLAGS:
            data[flag] = "1" if data[flag] else ""
        for name in (*GENERIC_NAMES, *OPTIONAL_FLAGS, *_OMITTED_WHEN_EMPTY):  # 0 = unset
            if not data[name]:
                data.pop(name)
        for name, default in _OMITTED_AT_DEFAULT.items():
            if data[name] == default:
                data.pop(name)
        return urlencode({k: _fmt(v) for k, v in data.items()})

    def typed_query(self) -> str:
        """The query of the inputs as typed: each refused input's own text (`raw`), not the default it fell back
        to (the save form sends it, so a refused save reopens the builder as the user left it)."""
        return self.query(**self.raw)

    def modules_list(self) -> list[str]:
        return [m for m in self.recompute_modules.split(",") if m]

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("errors")
        out.pop("raw")
        out.update(out.pop("knob_values"))
        return out


# inputs left out of a builder address when empty or zero ...
_OMITTED_WHEN_EMPTY = (
    "hf_config",
    "profile",
    "recompute_modules",
    "offload_layers",
    "first_stage_layers",
    "last_stage_layers",
    "stage_layers",
    "bf16_first_layers",
    "bf16_last_layers",
    "mtp_layers",
    "ddp_bucket_size",
    "offload_modules",
    "deadline_days",
    "budget_usd",
    "optimizer_offload",
    "fail_slow",
)
# ... and those left out at their default (BuilderState's own)
_OMITTED_AT_DEFAULT = {
    f.name: f.default
    for f in fields(BuilderState)
    if f.name
    in (
        "rank_by",
        "scaling_mode",
        "attention_backend",
        "moe_dispatcher",
        "optimizer_moments_dtype",
        "reshard_after",
    )
}


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# the builder's whole-number inputs and the registry's knob each one sets (app.core.knobs): its range, label, unit
# and hint come from there
BUILDER_KNOBS: dict[str, Knob] = {
    name: knob(path)
    for name, path in (
        ("nodes", "cluster.nodes"),
        ("gpus_per_node", "cluster.gpus_per_node"),
        ("seq_len", "training.seq_len"),
        ("global_batch", "layout.global_batch"),
        ("tp", "layout.tp"),
        ("pp", "layout.pp"),
        ("vp", "layout.vp"),
        ("cp", "layout.cp"),
        ("ep", "layout.ep"),
        ("etp", "layout.etp"),
        ("micro_batch", "layout.micro_batch"),
        ("offload_layers", "layout.offload_layers"),
        ("optimizer_offload", "layout.optimizer_offload"),
        ("first_stage_layers", "layout.first_stage_layers"),
        ("last_stage_layers", "layout.last_stage_layers"),
        ("bf16_first_layers", "layout.bf16_first_layers"),
        ("bf16_last_layers", "layout.bf16_last_layers"),
        ("mtp_layers", "layout.mtp_layers"),
        ("ddp_bucket_size", "ddp_bucket_size"),
    )
} | {k.name: k for k in generic_knobs("layout")}
# the builder's selects, comma-separated lists and checkboxes, and the registry's knob each one sets: its label,
# options (value and text), hint and the values it takes (the ZeRO stage: a select over the int knob's labelled range)
BUILDER_CHOICES: dict[str, Knob] = {
    name: knob(path)
    for name, path in (
        ("zero", "layout.zero"),
        ("recompute", "layout.recompute"),
        ("recompute_modules", "layout.recompute_modules"),
        ("offload_modules", "layout.offload_modules"),
        ("stage_layers", "layout.stage_layers"),
        ("reshard_after", "layout.reshard_after"),
        ("dtype", "layout.dtype"),
        ("optimizer_moments_dtype", "layout.optimizer_moments_dtype"),
        ("attention_backend", "attention_backend"),
        ("moe_dispatcher", "moe_dispatcher"),
        ("moe_a2a_overlap", "moe_a2a_overlap"),
        ("moe_fused_grouped_gemm", "moe_fused_grouped_gemm"),
        ("sp", "layout.sequence_parallel"),
        ("fp8_params", "layout.fp8_param_gather"),
    )
}
# the layout inputs a search still reads when the planner chooses: the run-wide options every searched layout shares
# (app.core.layout.RunOptions.of: precision, its 16-bit layers, FP8 parameters, the Adam moments), the global batch
# and the model's MTP modules
PLANNER_KEEPS = frozenset(
    {
        "global_batch",
        "mtp_layers",
        "dtype",
        "bf16_first_layers",
        "bf16_last_layers",
        "optimizer_moments_dtype",
        "fp8_params",
        "ddp_bucket_size",
    }
)
# ... and the ones it chooses itself or leaves at their default, which the page takes out of use in planner mode
# (static/js/plan.js reads them from the form's data-planner-chooses): every other layout input
PLANNER_CHOOSES = tuple(
    n
    for n, k in (BUILDER_KNOBS | BUILDER_CHOICES).items()
    if k.section == "layout" and n not in PLANNER_KEEPS
)
# the labels of the builder's inputs that are not the registry's knobs (its form shows these)
BUILDER_LABELS = {
    "model": "Model",
    "hf_config": "Paste config.json",
    "gpu": "GPU type",
    "fabric": "Fabric",
    "fail_slow": "Fail-slow slowdown",
    "tokens_b": "Training tokens",
    "deadline_days": "Finish within",
    "budget_usd": "Budget per run",
    "scaling_mode": "Scaling panel",
    "mode": "Who chooses the layout",
    "rank_by": "Planner ranks layouts by",
    "profile": "Calibration profile",
}


def input_label(name: str) -> str:
    """The label of the builder's input `name` (a knob's from the registry), or the name itself if it has none."""
    known = BUILDER_KNOBS.get(name) or BUILDER_CHOICES.get(name)
    return known.label if known else BUILDER_LABELS.get(name, name)


# the builder's own choices beside the registry's (its mode, the ranking, the scaling panel)
_MODE_CHOICES = {"mode": MODE_CHOICES, "rank_by": RANK_CHOICES, "scaling_mode": SCALING_CHOICES}
GENERIC_NAMES = tuple(k.name for k in generic_knobs("layout"))
_INT_LIMITS = {
    name: (k.builder_min, math.inf if k.le is None else k.le)
    for name, k in BUILDER_KNOBS.items()
    if k.kind == "int"
}


def parse_state(params: Mapping[str, str]) -> BuilderState:
    """Lenient parse: a bad value keeps the default and records a message for that input."""
    state = BuilderState()
    errors: dict[str, str] = {}
    _parse_texts(params, state, errors)
    _parse_ints(params, state, errors)
    _parse_numbers(params, state, errors)
    if "zero" in params:
        _parse_zero(params["zero"], state, errors)
    _parse_choices(params, state, errors)
    if "sp" in params:  # the form sends a hidden sp=0 before the checkbox, so the last value wins
        state.sp = params["sp"] in ("1", "on", "true", "yes")
    for flag in OPTIONAL_FLAGS:
        if flag in params:
            setattr(state, flag, params[flag] in ("1", "on", "true", "yes"))
    state.errors = errors
    # what was typed into a refused input, so a reloaded page shows it beside its error, not the default
    state.raw = {name: str(params[name])[:200] for name in errors if name in params}
    return state


def _parse_zero(raw: str, state: BuilderState, errors: dict[str, str]) -> None:
    try:
        zero = int(raw)
    except ValueError:
        zero = -1
    if zero in ZERO_CHOICES:
        state.zero = zero
    else:
        errors["zero"] = knob("layout.zero").range_text()


def _parse_texts(params: Mapping[str, str], state: BuilderState, errors: dict[str, str]) -> None:
    """The catalog names (required when sent), the pasted HF config and the calibration profile."""
    for name in ("model", "gpu", "fabric"):
        if name in params:
            value = params[name].strip()
            if value:
                setattr(state, name, value[:200])
            else:
                errors[name] = "required"
    if "hf_config" in params:
        state.hf_config = params["hf_config"][:200_000]
    if "profile" in params:
        state.profile = params["profile"].strip()[:200]


def _parse_ints(params: Mapping[str, str], state: BuilderState, errors: dict[str, str]) -> None:
    """The whole-number inputs within their registry ranges."""
    for name, (lo, hi) in _INT_LIMITS.items():
        if name not in params:
            continue
        raw = params[name].strip()
        number: int | None
        try:
            number = int(float(raw)) if raw else None
        except (ValueError, OverflowError):
            number = None
        if number is None or not lo <= number <= hi or ("." in raw and float(raw) != number):
            errors[name] = BUILDER_KNOBS[name].range_text()
        elif name in GENERIC_NAMES:
            state.knob_values[name] = number
        else:
            setattr(state, name, number)


def _parse_numbers(params: Mapping[str, str], state: BuilderState, errors: dict[str, str]) -> None:
    """The real-valued inputs: the optimizer's offloaded share, the sizing goals and the training tokens."""
    if "optimizer_offload" in params:
        raw = params["optimizer_offload"].strip()
        try:
            share = float(raw) if raw else 0.0
            offload = BUILDER_KNOBS["optimizer_offload"]
            if not offload.builder_min <= share <= (offload.le or 0):
                raise ValueError
            state.optimizer_offload = share
        except ValueError:
            errors["optimizer_offload"] = "a share from 0 to 1 of the optimizer states"
    for name, (limit, what) in SIZING_LIMITS.items():
        if params.get(name, "").strip():
            try:
                goal = float(params[name])
                if not 0 <= goal <= limit:
                    raise ValueError
                setattr(state, name, goal)
            except ValueError:
                errors[name] = f"{what} from 0 (none) to {limit:,.0f}"
    if params.get("fail_slow", "").strip():
        try:
            slow = float(params["fail_slow"])
            if not (slow == 0 or 1 <= slow <= 10):
                raise ValueError
            state.fail_slow = slow
        except ValueError:
            errors["fail_slow"] = "a slowdown from 1 (none) to 10, or 0 for the default"
    if "tokens_b" in params:
        try:
            tokens = float(params["tokens_b"])
            if not 0 < tokens <= 1e9:
                raise ValueError
            state.tokens_b = tokens
        except ValueError:
            errors["tokens_b"] = "a positive number of billions of tokens"


def _parse_choices(params: Mapping[str, str], state: BuilderState, errors: dict[str, str]) -> None:
    """The selects (the registry's choice knobs and the builder's own) and the comma-separated module lists."""
    selects = {n: k.choices for n, k in BUILDER_CHOICES.items() if k.kind == "choice"} | _MODE_CHOICES
    for name, choices in selects.items():
        if name in params:
            if params[name] in choices:
                setattr(state, name, params[name])
            else:
                errors[name] = f"one of {', '.join(choices)}"
    for name, k in BUILDER_CHOICES.items():
        if k.kind == "list" and name in params:
            names = [n for n in re.split(r"[\s,]+", params[name].strip().lower()) if n]
            unknown = [n for n in names if n not in k.choices]
            if unknown:
                errors[name] = f"unknown {', '.join(unknown[:3])}; use {', '.join(k.choices)}"
            else:
                setattr(state, name, ",".join(dict.fromkeys(names)))
        elif k.kind == "counts" and name in params:
            given = [n for n in re.split(r"[\s,|]+", params[name].strip()) if n]
            lo, hi = int(k.ge or 0), int(k.le or 0)
            if len(given) <= (k.max_items or 0) and all(
                n.isascii() and n.isdigit() and len(n) <= len(str(hi)) and lo <= int(n) <= hi for n in given
            ):
                setattr(state, name, ",".join(str(int(n)) for n in given))
            else:
                errors[name] = k.range_text()


def state_to_scenario(state: BuilderState) -> dict[str, Any]:
    """The shared Scenario dict for this state (raises SpecError naming the form's fields)."""
    problems = [Problem(name, msg) for name, msg in state.errors.items()]
    model: Any = state.model
    if state.hf_config.strip():
        model = _model_from_pasted_config(state.hf_config, problems)
    kernel = _scenario_options(state)
    if state.mode == "planner":
        if problems:
            raise SpecError(problems)
        return {
            "model": model,
            "cluster": _cluster(state),
            # placeholder layout: the planner replaces it with the best one it finds for this global batch
            "layout": {
                "global_batch": state.global_batch,
                "dtype": state.dtype,
                "bf16_first_layers": state.bf16_first_layers,
                "bf16_last_layers": state.bf16_last_layers,
                **({"fp8_param_gather": True} if state.fp8_params else {}),
                **_moments(state),
                **_mtp(state),
            },
            "training": {"seq_len": state.seq_len, "tokens": state.tokens_b * TOKENS_UNIT},
            **kernel,
        }
    if state.dp == 0:
        problems.append(_undivided_gpus(state))
    if problems:
        raise SpecError(problems)
    return {
        "model": model,
        "cluster": _cluster(state),
        "layout": {
            "tp": state.tp,
            "pp": state.pp,
            "vp": state.vp,
            "dp": state.dp,
            "cp": state.cp,
            "ep": state.ep,
            "etp": state.etp or None,
            "zero": state.zero,
            **_reshard(state),
            # off at tp = 1, as Megatron-LM turns it off ("Disabling sequence parallelism because tensor model
            # parallel size is 1", megatron/training/arguments.py validate_args): the checkbox keeps its state
            "sequence_parallel": state.sp and state.tp > 1,
            "recompute": state.recompute,
            "recompute_modules": state.modules_list() if state.recompute == "selective" else [],
            "micro_batch": state.micro_batch,
            "global_batch": state.global_batch,
            "dtype": state.dtype,
            "offload_layers": state.offload_layers,
            "offload_modules": [m for m in state.offload_modules.split(",") if m],
            "optimizer_offload": state.optimizer_offload,
            "first_stage_layers": state.first_stage_layers or None,
            "last_stage_layers": state.last_stage_layers or None,
            "stage_layers": [int(n) for n in state.stage_layers.split(",") if n],
            "bf16_first_layers": state.bf16_first_layers,
            "bf16_last_layers": state.bf16_last_layers,
            **({"fp8_param_gather": True} if state.fp8_params else {}),
            **_moments(state),
            **_mtp(state),
            **{name: value for name, value in state.knob_values.items() if value},
        },
        "training": {"seq_len": state.seq_len, "tokens": state.tokens_b * TOKENS_UNIT},
        **kernel,
    }


_MODEL_SPEC_KEYS = frozenset(
    {
        "name",
        "num_layers",
        "hidden_size",
        "num_attention_heads",
        "ffn_hidden_size",
        "vocab_size",
        "activation",
    }
)


def _moments(state: BuilderState) -> dict[str, Any]:
    """The Adam-moment dtype of the scenario's layout, only when it is not the fp32 default."""
    moments = state.optimizer_moments_dtype
    return {} if moments == "fp32" else {"optimizer_moments_dtype": moments}


def _reshard(state: BuilderState) -> dict[str, Any]:
    """ZeRO-3's re-sharding of the scenario's layout, only under ZeRO-3 and when it is not the default."""
    keep = state.zero == 3 and state.reshard_after != "forward"
    return {"reshard_after": state.reshard_after} if keep else {}


def _mtp(state: BuilderState) -> dict[str, Any]:
    """The multi-token-prediction modules of the scenario's layout, only when there are any."""
    return {"mtp_layers": state.mtp_layers} if state.mtp_layers else {}


def _scenario_options(state: BuilderState) -> dict[str, Any]:
    """The scenario's own fields the builder sets when they differ from their defaults: the attention kernel, the
    DDP bucket size and, for a MoE model, the token dispatcher and the EP all-to-all overlap (a dense model refuses
    them by name)."""
    out: dict[str, Any] = {}
    if state.attention_backend != "auto":
        out["attention_backend"] = state.attention_backend
    if state.moe_dispatcher != "alltoall":
        out["moe_dispatcher"] = state.moe_dispatcher
    if state.moe_a2a_overlap:
        out["moe_a2a_overlap"] = True
    if state.moe_fused_grouped_gemm:
        out["moe_fused_grouped_gemm"] = True
    if state.ddp_bucket_size:
        out["ddp_bucket_size"] = state.ddp_bucket_size
    return out


def _cluster(state: BuilderState) -> dict[str, Any]:
    return {
        "gpu": state.gpu,
        "nodes": state.nodes,
        "gpus_per_node": state.gpus_per_node,
        "fabric": state.fabric,
        **({"fail_slow_slowdown": state.fail_slow} if state.fail_slow else {}),
    }


def sizes_request(state: BuilderState, scenario: dict[str, Any]) -> dict[str, Any]:
    """The size sweep's request (app.services.planner.SizesRequest) for this builder state: its model, GPU, fabric,
    batch, tokens and precision, every cluster size searched by the planner."""
    layout = scenario["layout"]
    request: dict[str, Any] = {
        "model": scenario["model"],
        "cluster": scenario["cluster"],  # its node count is not used: the sweep sets the size
        "training": scenario["training"],
        "global_batch": layout["global_batch"],
        "deadline_days": state.deadline_days or None,
        "constraints": planner_constraints(state) or {},
        "attention_backend": state.attention_backend,
        "moe_dispatcher": state.moe_dispatcher,
        "moe_a2a_overlap": state.moe_a2a_overlap,
        "moe_fused_grouped_gemm": state.moe_fused_grouped_gemm,
        "ddp_bucket_size": state.ddp_bucket_size or None,
        "profile": state.profile or None,
    }
    for name in (
        "dtype",
        "bf16_first_layers",
        "bf16_last_layers",
        "fp8_param_gather",
        "optimizer_moments_dtype",
    ):
        if name in layout:
            request[name] = layout[name]
    if layout.get("mtp_layers"):
        request["mtp_layers"] = layout["mtp_layers"]
    return request


def planner_constraints(state: BuilderState) -> dict[str, Any] | None:
    """The planner constraints the builder's planner mode sets (None: the planner's defaults)."""
    constraints = {
        name: True
        for name, on in (
            ("activation_offload", state.plan_offload),
            ("optimizer_offload", state.plan_optimizer_offload),
            ("avoid_light_moe_passes", state.plan_avoid_light_moe),
        )
        if on
    }
    return constraints or None


def _undivided_gpus(state: BuilderState) -> Problem:
    """The GPU count is not a multiple of tp·pp·cp: the problem goes to the factor that does not divide it on its
    own (else pipeline stages, then context, then tensor parallel, whichever is above 1), naming the values that
    would, given the other two."""
    factors = {"tp": state.tp, "pp": state.pp, "cp": state.cp}
    alone = [name for name in ("pp", "cp", "tp") if state.num_gpus % max(1, factors[name])]
    above_one = [name for name in ("pp", "cp", "tp") if factors[name] > 1]
    name = (alone or above_one or ["tp"])[0]
    others = math.prod(max(1, v) for k, v in factors.items() if k != name)
    room = state.num_gpus // others if state.num_gpus % others == 0 else 0
    valid = [d for d in range(1, room + 1) if room % d == 0]
    hint = (
        f"; with the other two as they are, {name} may be {', '.join(map(str, valid[:12]))}"
        if valid
        else f"; the other two ({others} GPUs together) do not divide it either"
    )
    return Problem(
        name,
        f"the cluster's {state.num_gpus} GPUs are not divisible by tp·pp·cp = "
        f"{state.tp}·{state.pp}·{state.cp}{hint}",
    )


def layout_query(state: BuilderState, layout: dict[str, Any]) -> str:
    """Builder URL query that puts a planner-chosen layout into the by-hand inputs."""
    return state.query(
        mode="manual",
        tp=layout["tp"],
        pp=layout["pp"],
        vp=layout["vp"],
        cp=layout["cp"],
        ep=layout["ep"],
        etp=layout.get("etp") or 0,
        zero=layout["zero"],
        reshard_after=str(layout.get("reshard_after") or "forward"),
        sp=bool(layout["sequence_parallel"]),
        recompute=layout["recompute"],
        recompute_modules=",".join(layout.get("recompute_modules") or ()),
        micro_batch=layout["micro_batch"],
        offload_layers=layout.get("offload_layers") or 0,
        offload_modules=",".join(layout.get("offload_modules") or ()),
        optimizer_offload=float(layout.get("optimizer_offload") or 0.0),
        first_stage_layers=layout.get("first_stage_layers") or 0,
        last_stage_layers=layout.get("last_stage_layers") or 0,
        stage_layers=",".join(str(n) for n in layout.get("stage_layers") or ()),
        dtype=layout["dtype"],
        bf16_first_layers=layout.get("bf16_first_layers") or 0,
        bf16_last_layers=layout.get("bf16_last_layers") or 0,
        fp8_params=bool(layout.get("fp8_param_gather")),
        optimizer_moments_dtype=str(layout.get("optimizer_moments_dtype") or "fp32"),
        mtp_layers=int(layout.get("mtp_layers") or 0),
        **{name: int(layout.get(name) or 0) for name in GENERIC_NAMES},
    )


def _model_from_pasted_config(text: str, problems: list[Problem]) -> Any:
    try:
        config = parse_json_text(text)
    except ValueError as exc:
        problems.append(Problem("hf_config", str(exc)))
        return None
    if not isinstance(config, dict):
        problems.append(Problem("hf_config", "expected a JSON object (a Hugging Face config.json)"))
        return None
    if config.keys() >= _MODEL_SPEC_KEYS:
        return config  # already a ClusterPlan model spec (what "edit" of a pasted model puts back here)
    try:
        from app.core.hf_config import model_from_hf_config
    except ImportError:
        problems.append(Problem("hf_config", "config.json import is not available in this build"))
        return None
    name = str(config.get("_name_or_path") or config.get("model_type") or "pasted config")[:100]
    try:
        return model_from_hf_config(config, name=name).to_dict()
    except SpecError as exc:
        problems.extend(Problem("hf_config", f"{p.field}: {p.message}") for p in exc.problems)
    except (ValueError, TypeError, KeyError) as exc:
        problems.append(Problem("hf_config", str(exc)))
    return None


def saved_choices(state: BuilderState) -> dict[str, Any]:
    """The builder choices a save stores beside the scenario (SAVED_CHOICES)."""
    return {name: getattr(state, name) for name in SAVED_CHOICES}


def choices_from(raw: Any) -> dict[str, Any]:
    """The saved choices in `raw` (a posted or stored mapping), checked as the builder's inputs are: unknown keys
    and refused values are left out, so a damaged record reopens with the builder's defaults for those."""
    if not isinstance(raw, Mapping):
        return {}
    params: dict[str, str] = {}
    for name in SAVED_CHOICES:
        value = raw.get(name)
        if isinstance(value, bool):
            params[name] = "1" if value else "0"
        elif isinstance(value, str | int | float):
            params[name] = str(value)[:200]
    state = parse_state(params)
    return {name: getattr(state, name) for name in params if name not in state.errors}


def scenario_to_state(scenario: Mapping[str, Any], choices: Any = None) -> BuilderState:
    """Back from a saved scenario, and the builder choices saved with it, to the builder form (for "edit" and
    "open in builder")."""
    state = BuilderState()
    for name, value in choices_from(choices).items():
        setattr(state, name, value)
    model = scenario.get("model")
    if isinstance(model, str):
        state.model = model
    elif isinstance(model, dict):
        state.model = str(model.get("name", state.model))
        state.hf_config = json.dumps(model, indent=1)
    cluster = scenario.get("cluster") or {}
    state.gpu = str(cluster.get("gpu", state.gpu)) if not isinstance(cluster.get("gpu"), dict) else state.gpu
    state.nodes = int(cluster.get("nodes", state.nodes))
    state.gpus_per_node = int(cluster.get("gpus_per_node", state.gpus_per_node))
    fabric = cluster.get("fabric", state.fabric)
    state.fabric = fabric if isinstance(fabric, str) else str((fabric or {}).get("name", state.fabric))
    state.fail_slow = float(cluster.get("fail_slow_slowdown") or 0.0)
    layout = scenario.get("layout") or {}
    for name in (
        "tp",
        "pp",
        "vp",
        "cp",
        "ep",
        "etp",
        "zero",
        "micro_batch",
        "global_batch",
        "offload_layers",
        "first_stage_layers",
        "last_stage_layers",
        "bf16_first_layers",
        "bf16_last_layers",
        "mtp_layers",
    ):
        if layout.get(name) is not None:
            setattr(state, name, int(layout[name]))
    state.knob_values = {name: int(layout[name]) for name in GENERIC_NAMES if layout.get(name)}
    state.sp = bool(layout.get("sequence_parallel", state.sp))
    state.recompute = str(layout.get("recompute", state.recompute))
    state.recompute_modules = ",".join(str(m) for m in layout.get("recompute_modules") or ())
    state.offload_modules = ",".join(str(m) for m in layout.get("offload_modules") or ())
    state.stage_layers = ",".join(str(int(n)) for n in layout.get("stage_layers") or ())
    state.optimizer_offload = float(layout.get("optimizer_offload") or 0.0)
    state.dtype = str(layout.get("dtype", state.dtype))
    state.fp8_params = bool(layout.get("fp8_param_gather", False))
    state.optimizer_moments_dtype = str(layout.get("optimizer_moments_dtype") or "fp32")
    if layout.get("reshard_after") in BUILDER_CHOICES["reshard_after"].choices:
        state.reshard_after = str(layout["reshard_after"])
    training = scenario.get("training") or {}
    if training.get("seq_len") is not None:
        state.seq_len = int(training["seq_len"])
    if training.get("tokens") is not None:
        state.tokens_b = float(training["tokens"]) / TOKENS_UNIT
    if scenario.get("attention_backend") in BUILDER_CHOICES["attention_backend"].choices:
        state.attention_backend = str(scenario["attention_backend"])
    if scenario.get("moe_dispatcher") in BUILDER_CHOICES["moe_dispatcher"].choices:
        state.moe_dispatcher = str(scenario["moe_dispatcher"])
    state.moe_a2a_overlap = bool(scenario.get("moe_a2a_overlap", False))
    state.moe_fused_grouped_gemm = bool(scenario.get("moe_fused_grouped_gemm", False))
    state.ddp_bucket_size = int(scenario.get("ddp_bucket_size") or 0)
    return state
