"""Run-wide options in one record: RunOptions through plan() and size_sweep(), the shared planner request base,
and the bytes per parameter of each precision recipe (app.core.framework.PARAM_BYTES)."""

from __future__ import annotations

import inspect

import pytest

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.errors import SpecError
from app.core.framework import (
    MEGATRON_BF16,
    MEGATRON_CORE,
    NEMO,
    PARAM_BYTES,
    Framework,
    param_bytes,
)
from app.core.hardware import ClusterSpec
from app.core.layout import RunOptions
from app.core.memory import bytes_per_param
from app.core.planner import Constraints, SearchProblem, plan
from app.core.sizing import size_sweep
from app.schemas import search as schemas
from app.services import planner as planner_service
from app.services.catalog import PUBLIC

OLD_KEYWORDS = (
    "dtype",
    "flash_attention",
    "bf16_layers",
    "fp8_param_gather",
    "optimizer_moments_dtype",
    "mtp_layers",
    "recompute_modules",
    "offload_modules",
)
# a small search: a few seconds of CPU at most
SMALL = Constraints(max_vp=2, max_micro_batch=2, max_cp=2, partial_recompute=False)


def _cluster(nodes: int = 2) -> ClusterSpec:
    return ClusterSpec(
        gpu=catalog.find_gpu("H100-SXM"), num_nodes=nodes, gpus_per_node=8, fabric=find_fabric("ib-ndr-8x400")
    )


@pytest.mark.parametrize("fn", [plan, size_sweep])
def test_plan_and_size_sweep_take_one_problem_record(fn: object) -> None:
    params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    # the run, its options and profile come in the problem record, never as keywords beside it
    assert next(iter(params)) == "problem" and not {"run", "options", "profile", "model", "cluster"} & set(
        params
    )
    assert not set(OLD_KEYWORDS) & set(params)
    fields = inspect.signature(SearchProblem).parameters
    assert "run" in fields and fields["run"].default is None


def test_every_searched_layout_carries_the_run_options() -> None:
    run = RunOptions(dtype="fp8", fp8_param_gather=True, optimizer_moments_dtype="bf16")
    res = plan(
        SearchProblem(catalog.find_model("Llama-3-8B"), _cluster(), 4096, 64, run=run),
        constraints=SMALL,
        top=5,
    )
    assert res.best is not None and res.top
    for planned in res.top:
        lay = planned.layout
        assert (lay.dtype, lay.fp8_param_gather, lay.optimizer_moments_dtype) == ("fp8", True, "bf16")
        assert lay.zero >= 1  # FP8 parameters and bf16 moments need the distributed optimizer
    assert (
        res.rejections["bf16_moments_need_distributed_optimizer"] + res.rejections["fp8_params_need_sharding"]
        > 0
    )


def test_the_default_run_is_the_default_record() -> None:
    model, cluster = catalog.find_model("Llama-3-8B"), _cluster(1)
    a = plan(SearchProblem(model, cluster, 4096, 64), constraints=SMALL, top=3).to_dict()
    b = plan(SearchProblem(model, cluster, 4096, 64, run=RunOptions()), constraints=SMALL, top=3).to_dict()
    for d in (a, b):
        d.pop("elapsed_s")
        d.pop("layouts_per_s")
    assert a == b


def test_run_options_are_checked_as_a_record() -> None:
    with pytest.raises(SpecError) as err:
        plan(
            SearchProblem(
                catalog.find_model("Llama-3-8B"),
                _cluster(1),
                4096,
                64,
                run=RunOptions(dtype="bf16", fp8_param_gather=True, recompute_modules=("moe",)),
            )
        )
    assert {p.field for p in err.value.problems} >= {"fp8_param_gather", "recompute_modules"}


def test_size_sweep_hands_the_record_to_every_size() -> None:
    sweep = size_sweep(
        SearchProblem(
            catalog.find_model("Llama-3-8B"),
            _cluster(1),
            4096,
            64,
            run=RunOptions(dtype="fp8", optimizer_moments_dtype="bf16"),
        ),
        1e11,
        sizes=[8, 16],
        constraints=SMALL,
    )
    bests = [p.best for p in sweep.points if p.best is not None]
    assert bests and all(
        b.layout.dtype == "fp8" and b.layout.optimizer_moments_dtype == "bf16" for b in bests
    )


# --- the planner's requests ---------------------------------------------------------------------------------------


def test_plan_and_sizes_requests_share_one_base() -> None:
    base = set(schemas.SearchRequestBase.model_fields)
    assert len(base) >= 19
    assert issubclass(schemas.PlanRequest, schemas.SearchRequestBase)
    assert issubclass(schemas.SizesRequest, schemas.SearchRequestBase)
    assert set(schemas.PlanRequest.model_fields) - base == {"gpu_counts", "rank_by", "top"}
    assert set(schemas.SizesRequest.model_fields) - base == {"sizes", "deadline_days"}
    # the service re-exports the same classes (the API routes name them there)
    assert planner_service.PlanRequest is schemas.PlanRequest
    assert planner_service.SizesRequest is schemas.SizesRequest
    assert planner_service.ConstraintsIn is schemas.ConstraintsIn


def test_the_request_builds_the_run_record() -> None:
    req = schemas.PlanRequest.model_validate(
        {
            "model": "Llama-3-8B",
            "cluster": {"gpu": "H100-SXM", "nodes": 1, "fabric": "ib-ndr-8x400"},
            "training": {"seq_len": 4096},
            "global_batch": 64,
            "dtype": "fp8",
            "bf16_first_layers": 1,
            "bf16_last_layers": 2,
            "fp8_param_gather": True,
            "optimizer_moments_dtype": "bf16",
            "mtp_layers": 1,
            "flash_attention": False,
        }
    )
    assert req.run_options() == RunOptions(
        dtype="fp8",
        flash_attention=False,
        bf16_layers=(1, 2),
        fp8_param_gather=True,
        optimizer_moments_dtype="bf16",
    )
    assert req.mtp_layers == 1  # deprecated: app.services.scenario applies it to the model
    assert (
        schemas.SizesRequest.model_validate(
            {
                "model": "Llama-3-8B",
                "cluster": {"gpu": "H100-SXM", "nodes": 1},
                "training": {"seq_len": 4096},
                "global_batch": 64,
            }
        ).run_options()
        == RunOptions()
    )


def test_the_plan_service_searches_with_the_request_options() -> None:
    body = {
        "model": "Llama-3-8B",
        "cluster": {"gpu": "H100-SXM", "nodes": 1, "fabric": "ib-ndr-8x400"},
        "training": {"seq_len": 4096, "tokens": 1e11},
        "global_batch": 64,
        "dtype": "fp8",
        "optimizer_moments_dtype": "bf16",
        "constraints": {"max_vp": 2, "max_micro_batch": 2, "max_cp": 2, "partial_recompute": False},
        "usd_per_gpu_hour": 2.0,
        "top": 3,
    }
    out = planner_service.search(body, viewer=PUBLIC)
    assert out.best is not None
    assert out.best["layout"]["dtype"] == "fp8" and out.best["layout"]["optimizer_moments_dtype"] == "bf16"
    assert out.mtp_layers == 0


def test_the_deprecated_mtp_layers_of_a_plan_request_goes_onto_the_model() -> None:
    body = {
        "model": "Llama-3-8B",
        "cluster": {"gpu": "H100-SXM", "nodes": 1, "fabric": "ib-ndr-8x400"},
        "training": {"seq_len": 4096},
        "global_batch": 64,
        "mtp_layers": 1,
        "constraints": {"max_vp": 2, "max_micro_batch": 2, "max_cp": 2, "partial_recompute": False},
        "usd_per_gpu_hour": 2.0,
        "top": 3,
    }
    _req, resolved, _price, result = planner_service.run_plan(body, viewer=PUBLIC)
    assert resolved.model.mtp_layers == 1 and result.best is not None
    assert "mtp_layers" not in result.best.layout.to_dict()
    # the catalog's DeepSeek-V3 trains one module: another count beside it is refused on the deprecated field
    with pytest.raises(SpecError) as err:
        planner_service.run_plan({**body, "model": "DeepSeek-V3", "mtp_layers": 2}, viewer=PUBLIC)
    assert [p.field for p in err.value.problems] == ["layout.mtp_layers"]


# --- bytes per parameter ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weights", "total", "unsharded", "sharded"),
    [("fp16", 20.0, 4.0, 16.0), ("bf16", 18.0, 6.0, 12.0)],
)
def test_megatron_rows_match_the_distributed_optimizer_table(
    weights: str, total: float, unsharded: float, sharded: float
) -> None:
    """Megatron-LM docs/source/api-guide/dist_optimizer.md: 20 = 4 + 16/d (fp16 grads), 18 = 6 + 12/d (fp32)."""
    row = PARAM_BYTES[(weights, "fp32")]
    assert row.total() == total
    for d in (2, 8, 64):
        assert row.total(d) == pytest.approx(unsharded + sharded / d)


def test_framework_defaults_and_fp16_come_from_the_table() -> None:
    fw = Framework(name="plain")
    assert (fw.weight_bytes, fw.grad_bytes, fw.master_bytes, fw.optimizer_bytes) == (
        MEGATRON_BF16.param,
        MEGATRON_BF16.grad,
        MEGATRON_BF16.main_param,
        MEGATRON_BF16.optimizer,
    )
    assert fw.adam_step_bytes_per_param == MEGATRON_BF16.adam_step
    fp16 = MEGATRON_CORE.for_dtype("fp16")
    row = PARAM_BYTES[("fp16", "fp32")]
    assert (fp16.grad_bytes, fp16.master_bytes, fp16.optimizer_bytes) == (
        row.grad,
        row.main_param,
        row.optimizer,
    )
    assert bytes_per_param(1, 8, fp16) == pytest.approx(row.total(8))


@pytest.mark.parametrize(
    ("dtype", "fp8_params", "moments", "master", "optimizer", "weight", "step"),
    [
        ("bf16", False, "bf16", 2.0, 4.0, 2.0, 28.0),  # precision-aware optimizer, main-weight remainders
        ("fp4", False, "bf16", 2.0, 4.0, 2.0, 28.0),  # NVFP4 compute keeps bf16 weights
        ("fp16", False, "bf16", 4.0, 8.0, 2.0, 30.0),  # fp16 weights: no remainders, fp32 main gradient kept
        ("fp8", True, "fp32", 4.0, 8.0, 1.0, 38.0),  # FP8 parameters
        ("fp8", True, "bf16", 4.0, 4.0, 1.0, 30.0),  # both
    ],
)
def test_precision_options_read_their_row(
    dtype: str, fp8_params: bool, moments: str, master: float, optimizer: float, weight: float, step: float
) -> None:
    fw = MEGATRON_CORE.for_dtype(dtype).with_precision(dtype, fp8_params, moments)
    assert param_bytes(dtype, fp8_params, moments).main_param == master
    assert (fw.master_bytes, fw.optimizer_bytes, fw.weight_bytes, fw.adam_step_bytes_per_param) == (
        master,
        optimizer,
        weight,
        step,
    )
    assert fw.param_gather_bytes == (1.0 if fp8_params else MEGATRON_CORE.param_gather_bytes)


def test_a_framework_keeps_its_gradient_buffer_under_the_precision_options() -> None:
    # NeMo holds bf16 gradients (its own convention); the recipe sets the optimizer's side only
    fw = NEMO.for_dtype("bf16").with_precision("bf16", False, "bf16")
    assert fw.grad_bytes == NEMO.grad_bytes == 2.0
    assert (fw.master_bytes, fw.optimizer_bytes) == (2.0, 4.0)
    # without an option the framework's conventions stand unchanged
    assert NEMO.with_precision("bf16", False, "fp32") is NEMO
