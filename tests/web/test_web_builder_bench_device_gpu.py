"""The benchmark launch form: the GPU the node should match follows the chosen node's reported GPU, and a CPU
device has a "none" choice instead of a default H100."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.services.nodes import catalog_gpu_for_device

HTMX = {"HX-Request": "true"}


@pytest.mark.parametrize(
    ("reported", "catalog"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H200", "H200-SXM"),  # not H20, whose name runs on into a digit here
        ("NVIDIA A100-SXM4-80GB", "A100-80GB-SXM"),
        ("NVIDIA B200", "B200"),
        ("cpu (x86_64)", ""),
        ("NVIDIA GeForce GT 710", ""),
    ],
)
def test_reported_device_names_map_to_catalog_gpus(reported: str, catalog: str) -> None:
    assert catalog_gpu_for_device(reported) == catalog


def _add_node(client: Any, name: str, devices: list[dict[str, Any]]) -> None:
    created = client.post("/benchmarks/nodes", data={"name": name}, headers=HTMX)
    assert created.status_code == 201
    token = re.search(r"<code>(cpn_[^<]+)</code>", created.text)
    assert token
    reg = client.post(
        "/api/v1/agent/register",
        headers={"Authorization": f"Bearer {token.group(1)}"},
        json={"hostname": name, "info": {"devices": devices}},
    )
    assert reg.status_code == 200


def test_launch_form_offers_each_nodes_gpu_and_a_cpu_choice(client: Any) -> None:
    _add_node(client, "gpu-dev-h200", [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}])
    _add_node(client, "gpu-dev-cpu", [{"index": 0, "name": "cpu (x86_64)", "threads": 8}])
    page = client.get("/benchmarks").text
    h200 = re.search(r'<option value="gpu-dev-h200"[^>]*>[^<]*</option>', page)
    cpu = re.search(r'<option value="gpu-dev-cpu"[^>]*>[^<]*</option>', page)
    assert h200 and 'data-gpu="H200-SXM"' in h200.group(0) and "(H200-SXM)" in h200.group(0)
    assert cpu and 'data-cpu-only="1"' in cpu.group(0) and 'data-gpu=""' in cpu.group(0)
    gpu = re.search(r'<select id="l-gpu".*?</select>', page, re.S)
    assert gpu and '<option value="">none (a CPU device)</option>' in gpu.group(0)
    assert 'aria-describedby="l-gpu-hint"' in gpu.group(0) and 'id="l-gpu-hint"' in page
    assert '<label for="l-gpu">' in page
    assert "/static/js/benchmarks.js" in page  # the script that makes the field follow the node and device
    script = client.get("/static/js/benchmarks.js").text
    assert "data-gpu" in script and "l-device" in script
