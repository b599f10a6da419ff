"""A fabric preset describes an 8-GPU server's NICs; on a node of another size it keeps its NICs per GPU. The step
model, the scaling sweeps, the bill of materials and the training-run replay place it the same way
(app.catalog.fabrics.fabric_for_node), so a 4-GPU GB200 compute tray has one 400 Gb/s NIC per GPU everywhere."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.catalog.fabrics import (
    PRESET_SERVER_GPUS,
    REFERENCE_FABRIC_BY_GPU,
    fabric_for_node,
    find_fabric,
    reference_fabric,
    reference_fabric_name,
)
from app.catalog.network_prices import price_class
from app.core.errors import ProblemCollector
from app.schemas.scenario import Scenario
from app.services.network import resolve_fabric
from app.services.scenario import resolve_scenario
from app.validation.training_runs import row_fabric, rule_for


def _scenario(cluster: dict[str, object]) -> Scenario:
    return Scenario.model_validate(
        {
            "model": "Llama-3-8B",
            "cluster": cluster,
            "layout": {"tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 64},
            "training": {"seq_len": 4096},
        }
    )


@pytest.mark.parametrize(
    ("preset", "gpus", "nics"),
    [
        ("ib-ndr-8x400", 8, 8),  # DGX H100: one NIC per GPU
        ("ib-ndr-8x400", 4, 4),  # GB200 NVL72 compute tray: one ConnectX-7 per GPU
        ("ib-ndr-8x400", 72, 72),  # an NVL72 rack taken as one node
        ("efa-v2-32x100", 8, 32),  # p5: four 100 Gb/s adapters per GPU
        ("efa-v1-4x100", 4, 2),  # p4d's 400 Gb/s per 8 GPUs, per GPU kept
        ("ethernet-tcp-100", 4, 1),  # never fewer than one NIC per node
    ],
)
def test_a_preset_keeps_its_nics_per_gpu_on_any_node(preset: str, gpus: int, nics: int) -> None:
    spec = fabric_for_node(find_fabric(preset), gpus)
    assert spec.nics_per_node == nics
    # nothing but the NIC count changes
    assert spec.nic_bandwidth_bytes_per_s == find_fabric(preset).nic_bandwidth_bytes_per_s
    assert fabric_for_node(find_fabric(preset), PRESET_SERVER_GPUS) == find_fabric(preset)


def test_gb200_scenarios_get_one_nic_per_gpu_by_default_and_by_preset() -> None:
    default = resolve_scenario(_scenario({"gpu": "GB200", "nodes": 2})).cluster
    assert default.gpus_per_node == 4
    assert default.fabric.nics_per_node == 4
    assert default.fabric.name == "default: InfiniBand 4 × 400G, adaptive routing (ib-ndr-8x400)"
    named = resolve_scenario(_scenario({"gpu": "GB200", "nodes": 2, "fabric": "ib-ndr-8x400"})).cluster
    assert named.fabric.nics_per_node == 4
    # an 8-GPU server: the DGX H100 compute fabric as the preset has it, under the default's name; the network
    # service's default is the same fabric, so the builder and the network pages time one cluster alike
    h100 = resolve_scenario(_scenario({"gpu": "H100-SXM", "nodes": 1})).cluster
    assert h100.fabric == replace(
        find_fabric("ib-ndr-8x400"), name="default: InfiniBand 8 × 400G, adaptive routing (ib-ndr-8x400)"
    )
    p = ProblemCollector()
    assert resolve_fabric(None, p, gpus_per_node=8, gpu_name="H100-SXM") == h100.fabric


def test_an_inline_fabric_is_taken_as_written() -> None:
    inline = {
        "transport": "infiniband",
        "nics_per_node": 8,
        "nic_bandwidth_bytes_per_s": 50e9,
        "name": "mine",
    }
    cluster = resolve_scenario(_scenario({"gpu": "GB200", "nodes": 2, "fabric": inline})).cluster
    assert cluster.fabric.nics_per_node == 8
    p = ProblemCollector()
    stated = resolve_fabric({"preset": "ib-ndr-8x400", "nics_per_node": 2}, p, gpus_per_node=4)
    placed = resolve_fabric({"preset": "ib-ndr-8x400", "name": "ndr"}, p, gpus_per_node=4)
    p.raise_if_any()
    assert (stated.nics_per_node, placed.nics_per_node) == (2, 4)


def test_the_network_service_and_the_replay_place_presets_as_the_scenario_does() -> None:
    p = ProblemCollector()
    assert resolve_fabric(None, p, gpus_per_node=4).nics_per_node == 4
    assert resolve_fabric("roce-8x400", p, gpus_per_node=4).nics_per_node == 4
    p.raise_if_any()
    # a source rule names a preset; the replay puts it on the row's nodes
    rule = rule_for("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md")
    assert row_fabric(rule, "GB200", 4).nics_per_node == 4
    assert row_fabric(rule, "B200", 8).nics_per_node == 8
    # a rule that names no fabric takes the row GPU's reference fabric, as a plan that names none does
    assert (
        row_fabric(rule, "GB300", 4)
        == resolve_scenario(_scenario({"gpu": "GB300", "nodes": 2})).cluster.fabric
    )


@pytest.mark.parametrize(("gpu", "nics", "gbps"), [("GB300", 4, 800), ("B300", 8, 800), ("B200", 8, 400)])
def test_the_default_fabric_runs_at_the_gpus_reference_nic_rate(gpu: str, nics: int, gbps: int) -> None:
    # NVIDIA DGX B300 datasheet: 8 × ConnectX-8 at 800 Gb/s; GB300 NVL72: one ConnectX-8 SuperNIC per GPU
    fabric = resolve_scenario(_scenario({"gpu": gpu, "nodes": 2})).cluster.fabric
    assert (fabric.nics_per_node, fabric.nic_bandwidth_bytes_per_s * 8 / 1e9) == (nics, pytest.approx(gbps))
    p = ProblemCollector()
    service = resolve_fabric(None, p, gpus_per_node=nics, gpu_name=gpu)
    assert (service.nics_per_node, service.nic_bandwidth_bytes_per_s) == (
        nics,
        fabric.nic_bandwidth_bytes_per_s,
    )
    # a named preset keeps its own rate: the default is what changes, not the catalog's fabrics
    named = resolve_scenario(_scenario({"gpu": gpu, "nodes": 2, "fabric": "ib-ndr-8x400"})).cluster.fabric
    assert named.nic_bandwidth_bytes_per_s * 8 / 1e9 == pytest.approx(400)


@pytest.mark.parametrize(
    ("gpu", "preset", "gbps"),
    [
        ("A100-80GB-SXM", "ib-hdr-8x200", 200),
        ("H100-SXM", "ib-ndr-8x400", 400),
        ("MI300X", "roce-8x400", 400),
    ],
)
def test_one_reference_fabric_per_gpu_for_the_step_model_the_cost_and_the_calibration(
    gpu: str, preset: str, gbps: int
) -> None:
    # DGX A100: 8 × HDR 200 (the step model ran A100 plans on NDR 400 while the TCO priced HDR 200)
    assert reference_fabric_name(gpu) == preset
    step = resolve_scenario(_scenario({"gpu": gpu, "nodes": 2})).cluster.fabric
    assert step.nic_bandwidth_bytes_per_s * 8 / 1e9 == pytest.approx(gbps)
    assert step.name.endswith(f"({preset})")
    assert reference_fabric(gpu) == step  # 8-GPU servers: placed as the preset describes them


def test_the_default_fabric_assumes_no_in_network_reduction() -> None:
    # ib-xdr-8x800 has SHARPv4 switches; NCCL reduces in the network only with CollNet or NVLS+SHARP set up
    assert find_fabric("ib-xdr-8x800").sharp
    assert reference_fabric_name("GB300") == "ib-xdr-8x800"
    assert not reference_fabric("GB300").sharp
    assert reference_fabric_name("a GPU the table lacks") == "ib-ndr-8x400"


def test_every_reference_fabric_is_a_preset_with_a_price_class() -> None:
    for preset in set(REFERENCE_FABRIC_BY_GPU.values()):
        assert price_class(find_fabric(preset))


def test_the_collective_command_times_the_gpus_reference_fabric_and_says_its_channels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.cli_support import run_main

    argv = ["network", "collective", "all_reduce", "--gpu", "A100-80GB-SXM", "-s", "256K"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    assert "fabric default: InfiniBand 8 × 200G" in out and "(ib-hdr-8x200)" in out
    # NCCL's 24 collective channels on an A100 node; 256 KiB of ring/LL on 8 ranks fills 8 of them
    assert "ring/LL on 8 of the communicator's 24 channels" in out
    code, out, _ = run_main(
        ["network", "collective", "all_reduce", "--fabric", "roce-8x400", "-s", "1G"], capsys
    )
    assert code == 0 and "fabric roce-8x400" in out
