"""Resolve a Scenario (names, inline specs) into core objects: ModelSpec, ClusterSpec, Layout."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from app.catalog.fabrics import PRESET_SERVER_GPUS, fabric_on_node
from app.core.efficiency import NON_CLOCK_POWER_FRACTION, HardwareProfile, profile_use_warnings
from app.core.errors import ProblemCollector, SpecError
from app.core.estimate import EstimateOptions
from app.core.framework import FRAMEWORKS, Framework
from app.core.hardware import ClusterSpec, FabricSpec, GPUSpec, scaleup_domain_for
from app.core.layout import Layout, mtp_layers_in_pipeline_layout, stage_layers_from_pipeline_layout
from app.core.model import ModelSpec, size_problems
from app.errors import NotFoundError
from app.schemas.scenario import Scenario


@dataclass(frozen=True)
class ResolvedScenario:
    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    seq_len: int
    tokens: float
    framework: Framework
    profile: HardwareProfile | None = None
    power_limit_w: float | None = None  # cluster.power_limit_w: operating power limit per GPU
    warnings: tuple[
        str, ...
    ] = ()  # about the profile's use: measured on CPU, a dtype it lacks, another fabric
    fail_slow_slowdown: float | None = None  # cluster.fail_slow_slowdown: None → the goodput model's default

    def estimate_options(self) -> EstimateOptions:
        """The EstimateOptions this scenario asks for (framework conventions, power limit)."""
        return EstimateOptions(framework=self.framework, power_limit_w=self.power_limit_w)


def _lookup(kind: str, name: str, session: Session | None) -> Any:
    if session is not None:
        try:
            from app.services import catalog as db_catalog

            getter = {"gpu": db_catalog.get_gpu, "model": db_catalog.get_model}[kind]
            return getter(session, name)
        except ImportError:
            pass
    from app import catalog

    return {"gpu": catalog.find_gpu, "model": catalog.find_model}[kind](name)


def _inline(cls: Any, data: dict[str, Any], prefix: str, p: ProblemCollector) -> Any:
    known = {f.name for f in dataclasses.fields(cls)}
    for key in sorted(set(data) - known):
        p.add(f"{prefix}.{key}", "unknown field")
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in data
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    for key in missing:
        p.add(f"{prefix}.{key}", "field required")
    if set(data) - known or missing:
        return None
    try:
        return cls.from_dict(data) if hasattr(cls, "from_dict") else cls(**data)
    except SpecError as exc:  # a field the spec checks itself (ModelSpec.mtp_layers), named as in the request
        p.problems.extend(exc.problems)
        return None
    except (TypeError, ValueError) as exc:
        p.add(prefix, str(exc))
        return None


def _fabric(
    value: str | dict[str, Any] | None, p: ProblemCollector, gpus_per_node: int, gpu_name: str
) -> FabricSpec:
    """The cluster's scale-out fabric: a preset placed on a node of `gpus_per_node` GPUs, or the GPU's reference
    fabric when none is named (app.catalog.fabrics.fabric_on_node), or an inline FabricSpec as given."""
    if value is None or isinstance(value, str):
        try:
            return fabric_on_node(value, gpu_name, gpus_per_node)
        except NotFoundError as exc:
            p.add("cluster.fabric", str(exc))
            return FabricSpec()
    data = dict(value)
    if "oversubscription" in data:
        data["oversubscription"] = tuple(data["oversubscription"])
    spec = _inline(FabricSpec, data, "cluster.fabric", p)
    return spec or FabricSpec()


def _check_positive_model(model: ModelSpec, p: ProblemCollector) -> None:
    for problem in size_problems(model, "model."):
        p.add(problem.field, problem.message)
    if model.num_attention_heads >= 1 and model.num_kv_heads >= 1:
        p.check(
            model.num_attention_heads % model.num_kv_heads == 0,
            "model.num_kv_heads",
            "attention heads must be a multiple of kv heads",
        )


def _framework_settings(scenario: Scenario, model: ModelSpec, framework: Framework) -> Framework:
    """The framework preset with the scenario's own settings: MoE dispatch and overlap, the DDP bucket size and the
    attention kernel (SpecError naming the field where the model or the preset cannot take one)."""
    p = ProblemCollector()
    if scenario.moe_dispatcher != "alltoall" or scenario.moe_a2a_overlap:
        if model.moe is None:
            field = "moe_dispatcher" if scenario.moe_dispatcher != "alltoall" else "moe_a2a_overlap"
            p.add(
                field, f"{model.name} is a dense model: there are no expert all-to-alls to dispatch or hide"
            )
        p.raise_if_any()
        suffix = (f"+{scenario.moe_dispatcher}" if scenario.moe_dispatcher != "alltoall" else "") + (
            "+a2a-overlap" if scenario.moe_a2a_overlap else ""
        )
        framework = framework.with_(
            name=f"{framework.name}{suffix}",
            moe_dispatcher=scenario.moe_dispatcher,
            moe_a2a_overlap=scenario.moe_a2a_overlap,
        )

    if scenario.moe_fused_grouped_gemm:
        if model.moe is None:
            p.add("moe_fused_grouped_gemm", f"{model.name} is a dense model: it has no experts to group")
        elif not framework.expert_gemm_host_s:
            p.add(
                "moe_fused_grouped_gemm",
                f"{framework.name} already runs its experts as one grouped kernel; the fused grouped GEMM is "
                "Megatron-core's option (megatron-core, nemo)",
            )
        p.raise_if_any()
        framework = framework.with_fused_grouped_experts()

    if scenario.ddp_bucket_size is not None:
        if framework.dp_bucket_params is None:
            p.add(
                "ddp_bucket_size",
                f"{framework.name} reduces gradients per layer (FSDP) or without overlap: it has no Megatron-core "
                "DDP buckets to size",
            )
        p.raise_if_any()
        framework = framework.with_(
            name=f"{framework.name}+bucket{scenario.ddp_bucket_size / 1e6:g}M",
            dp_bucket_params=(float(scenario.ddp_bucket_size), 0.0),
        )

    if scenario.attention_backend != "auto" and scenario.attention_backend != framework.attention_backend:
        framework = framework.with_(
            name=f"{framework.name}+{scenario.attention_backend}",
            attention_backend=scenario.attention_backend,
        )
    return framework


def resolve_scenario(scenario: Scenario, session: Session | None = None) -> ResolvedScenario:
    """Look names up (DB catalog when a session is given, so users' rows count) and build core objects.

    Unknown names and inconsistent inputs raise SpecError listing every problem (field paths as in the JSON).
    The layout itself is checked by `app.core.layout.check_layout` inside `estimate`.
    """
    p = ProblemCollector()
    model: ModelSpec | None = None
    if isinstance(scenario.model, str):
        try:
            model = _lookup("model", scenario.model, session)
        except NotFoundError as exc:
            p.add("model", str(exc))
    else:
        model = _inline(ModelSpec, dict(scenario.model), "model", p)
        if model is not None:
            _check_positive_model(model, p)

    gpu: GPUSpec | None = None
    c = scenario.cluster
    if isinstance(c.gpu, str):
        try:
            gpu = _lookup("gpu", c.gpu, session)
        except NotFoundError as exc:
            p.add("cluster.gpu", str(exc))
    else:
        gpu = _inline(GPUSpec, dict(c.gpu), "cluster.gpu", p)
    fabric = _fabric(
        c.fabric,
        p,
        c.gpus_per_node or (gpu.default_gpus_per_node if gpu else PRESET_SERVER_GPUS),
        gpu.name if gpu else "",
    )
    profile = _profile(scenario.profile, session, p)
    framework = FRAMEWORKS.get(scenario.framework)
    if framework is None:
        p.add("framework", f"unknown framework {scenario.framework!r}; choose one of {sorted(FRAMEWORKS)}")
    if profile is not None and gpu is not None:
        _check_profile_gpu(profile, gpu, p)
    p.raise_if_any()
    assert model is not None and gpu is not None and framework is not None
    framework = _framework_settings(scenario, model, framework)

    if c.power_limit_w is not None and c.power_limit_w <= NON_CLOCK_POWER_FRACTION * gpu.full_power_w:
        p.add(
            "cluster.power_limit_w",
            f"{c.power_limit_w:g} W leaves no power for the SM clock of a {gpu.name} (design power "
            f"{gpu.full_power_w:g} W, of which {NON_CLOCK_POWER_FRACTION:.0%} does not follow the clock)",
        )
        p.raise_if_any()

    gpn = c.gpus_per_node or gpu.default_gpus_per_node
    # GB200 NVL72: 18 trays of 4 GPUs share one NVLink domain (NVIDIA GB200 NVL72 spec)
    cluster = ClusterSpec(
        gpu=gpu,
        num_nodes=c.nodes,
        gpus_per_node=gpn,
        scaleup_kind=gpu.scaleup_kind,
        scaleup_domain_gpus=scaleup_domain_for(gpu.scaleup_kind, c.nodes * gpn),
        fabric=fabric,
        name=f"{c.nodes} × {gpn} {gpu.name}",
    )
    lay = scenario.layout.model_dump()
    if lay.get("dp") is None:
        denom = lay["tp"] * lay["pp"] * lay["cp"]
        if cluster.num_gpus % denom:
            p.add(
                "layout.dp",
                f"cannot derive dp: {cluster.num_gpus} GPUs not divisible by tp·pp·cp = {denom}",
            )
            p.raise_if_any()
        lay["dp"] = cluster.num_gpus // denom
    text = lay.pop("pipeline_layout", None)
    placed = _apply_pipeline_layout(text, lay, model.num_layers, p) if text else None
    p.raise_if_any()
    model = model_with_mtp_layers(model, lay.pop("mtp_layers", None), placed, p)
    p.raise_if_any()
    layout = Layout.from_dict(lay)
    seq_len = scenario.training.seq_len
    tokens = scenario.training.tokens or 0.0
    warnings = check_profile_use(profile, gpu, layout.dtype, fabric.name) if profile is not None else []
    return ResolvedScenario(
        model,
        cluster,
        layout,
        seq_len,
        float(tokens),
        framework,
        profile,
        c.power_limit_w,
        tuple(warnings),
        c.fail_slow_slowdown,
    )


def check_profile_use(
    profile: HardwareProfile, gpu: GPUSpec, dtype: str, fabric: str = "", field: str = "profile"
) -> list[str]:
    """The one check of a calibration profile against what it is used for, wherever a profile meets a
    scenario (estimates, saved plans, the builder, the layout search): a profile measured on another GPU is a
    SpecError on `field`; what is only doubtful (measured on CPU, no GEMM fit for the run's dtype, a network
    fitted on another fabric) comes back as warnings to show beside the result."""
    p = ProblemCollector()
    _check_profile_gpu(profile, gpu, p, field)
    p.raise_if_any()
    return profile_use_warnings(profile, dtype, fabric)


def _check_profile_gpu(
    profile: HardwareProfile, gpu: GPUSpec, p: ProblemCollector, field: str = "profile"
) -> None:
    """A profile is a measurement of one GPU: using it for another is refused (on `field`)."""
    if not profile.gpu:
        return
    try:
        measured = _lookup("gpu", profile.gpu, None).name
    except (NotFoundError, LookupError, ValueError):
        measured = profile.gpu
    if measured != gpu.name:
        p.add(
            field,
            f"{profile.label} was measured on {measured}, this scenario's GPU is {gpu.name}: fit a profile on "
            f"{gpu.name} or leave the profile out",
        )


def model_with_mtp_layers(
    model: ModelSpec, given: int | None, placed: int | None, p: ProblemCollector
) -> ModelSpec:
    """The model with the multi-token-prediction modules a request states outside it: the one place the deprecated
    `layout.mtp_layers` (the plan and sizes requests' `mtp_layers`) and a pipeline layout's 'm' symbols (`placed`)
    reach ModelSpec.mtp_layers. The pipeline layout describes every stage, so its count stands (none when it places
    no 'm'); a `given` count beside it must match. Otherwise `given` (None = not sent) sets the model's count, and
    a model that trains a different non-zero count is a 422 on layout.mtp_layers."""
    if placed is not None:
        if given and given != placed:
            p.add("layout.pipeline_layout", f"places {placed} MTP layers ('m'), but mtp_layers is {given}")
        return model if placed == model.mtp_layers else dataclasses.replace(model, mtp_layers=placed)
    if given is None or given == model.mtp_layers:
        return model
    if model.mtp_layers:
        p.add(
            "layout.mtp_layers",
            f"{model.name} trains {model.mtp_layers} multi-token-prediction module(s) (model.mtp_layers), "
            f"layout.mtp_layers gives {given}: set the model's mtp_layers (layout.mtp_layers is deprecated)",
        )
        return model
    return dataclasses.replace(model, mtp_layers=given)


def _apply_pipeline_layout(
    text: str, lay: dict[str, Any], num_layers: int, p: ProblemCollector
) -> int | None:
    """Read a Megatron-core pipeline layout string into first/last stage layers (the middle stages even); the
    multi-token-prediction layers ('m') it places, None when it cannot be read."""
    field = "layout.pipeline_layout"
    if (
        lay.get("first_stage_layers") is not None
        or lay.get("last_stage_layers") is not None
        or lay.get("stage_layers")
    ):
        p.add(
            field,
            "give the pipeline layout or first_stage_layers / last_stage_layers / stage_layers, not both",
        )
        return None
    pp, vp = int(lay["pp"]), int(lay["vp"])
    try:
        counts = stage_layers_from_pipeline_layout(text, pp, vp)
        mtp = mtp_layers_in_pipeline_layout(text, pp)
    except ValueError as exc:
        p.add(field, str(exc))
        return None
    if sum(counts) != num_layers:
        p.add(field, f"holds {sum(counts)} transformer layers ('t'), the model has {num_layers}")
    if any(c < 1 for c in counts):
        p.add(field, f"stages hold {'/'.join(str(c) for c in counts)} layers: every stage needs at least one")
    if p.problems:
        return None
    if pp > 1 and (len(set(counts)) > 1 or num_layers % (pp * vp)):
        if len(set(counts[1:-1])) <= 1:
            lay["first_stage_layers"], lay["last_stage_layers"] = counts[0], counts[-1]
        else:
            lay["stage_layers"] = list(counts)
    return mtp


# calibration_profile.version is a 32-bit INTEGER column (PostgreSQL integer): no profile has a later version
MAX_PROFILE_VERSION = 2**31 - 1


def profile_version(text: str) -> int | None:
    """The version a profile reference names after the profile ("3" in "name v3" or "name@3"): None when `text`
    is not ASCII digits (str.isdigit also takes "²"); ValueError when it is a number outside 1 to
    MAX_PROFILE_VERSION (a larger one would overflow the database's integer)."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0")
    if not digits or len(digits) > len(str(MAX_PROFILE_VERSION)) or int(digits) > MAX_PROFILE_VERSION:
        shown = text if len(text) <= 20 else text[:20] + "…"
        raise ValueError(f"profile version must be from 1 to {MAX_PROFILE_VERSION}, got {shown}")
    return int(digits)


def split_profile_ref(ref: str) -> tuple[str, int | None]:
    """("name", 3) for "name v3"; (ref, None) for a name or an id alone, where the text after the last " v" is
    not ASCII digits (it belongs to the name). ValueError for a version out of range (profile_version)."""
    head, _, tail = ref.rpartition(" v")
    version = profile_version(tail) if head else None
    return (head, version) if version is not None else (ref, None)


def _version_after_at(tail: str) -> int | None:
    """The version of a "name@3" reference (None for a name alone); ValueError when it is not one."""
    if not tail:
        return None
    version = profile_version(tail)
    if version is None:
        raise ValueError(f"version after '@' must be a number, got {tail!r}")
    return version


def _profile(ref: str | None, session: Session | None, p: ProblemCollector) -> HardwareProfile | None:
    """Resolve 'name', 'name@version' or an id to the calibrated HardwareProfile stored in the database."""
    if not ref:
        return None
    if session is None:
        p.add("profile", "calibration profiles live in the database; run through the API or the web app")
        return None
    from app.services.calibration import get_hardware_profile

    name, _, tail = ref.partition("@")
    try:
        return get_hardware_profile(session, name, _version_after_at(tail))
    except (NotFoundError, LookupError, ValueError) as exc:
        p.add("profile", str(exc))
        return None
