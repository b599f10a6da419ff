"""Factories for the core's inputs: a catalog model, a cluster of catalog GPUs on a catalog fabric, a layout.

Plain functions, so that module-level constants and parametrize lists can use them too
(`from tests.core.conftest import make_cluster`); the fixtures hand the same functions to a test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app import catalog
from app.catalog.fabrics import find_fabric
from app.core.hardware import ClusterSpec, scaleup_domain_for
from app.core.layout import Layout
from app.core.model import ModelSpec


def make_model(name: str = "Llama-2-70B") -> ModelSpec:
    """A model of the built-in catalog, by name or alias."""
    return catalog.find_model(name)


def make_cluster(
    gpu: str = "H100-SXM",
    nodes: int = 8,
    fabric: str = "ib-ndr-8x400",
    *,
    gpus_per_node: int = 8,
    gpu_scaleup: bool = False,
) -> ClusterSpec:
    """`nodes` nodes of `gpus_per_node` catalog GPUs on a catalog fabric preset.

    gpu_scaleup: take the scale-up kind (NVSwitch, NVL72) and the domain size it gives from the GPU's catalog
    entry, as the scenario resolver does; otherwise ClusterSpec's defaults (NVSwitch within a node).
    """
    spec = catalog.find_gpu(gpu)
    scaleup: dict[str, Any] = {}
    if gpu_scaleup:
        scaleup = {
            "scaleup_kind": spec.scaleup_kind,
            "scaleup_domain_gpus": scaleup_domain_for(spec.scaleup_kind, nodes * gpus_per_node),
        }
    return ClusterSpec(
        gpu=spec, num_nodes=nodes, gpus_per_node=gpus_per_node, fabric=find_fabric(fabric), **scaleup
    )


def make_layout(**fields: Any) -> Layout:
    """A layout: Layout's own defaults (one GPU, ZeRO-1, no recompute) with `fields` replacing them."""
    return Layout(**fields)


@pytest.fixture
def model_factory() -> Callable[..., ModelSpec]:
    return make_model


@pytest.fixture
def cluster_factory() -> Callable[..., ClusterSpec]:
    return make_cluster


@pytest.fixture
def layout_factory() -> Callable[..., Layout]:
    return make_layout
