"""The web cost page prices an A100 and a GB200 cluster from their own on-prem server rows, as the API does."""

from __future__ import annotations

from typing import Any

import pytest

HX = {"HX-Request": "true"}


@pytest.mark.parametrize(
    ("gpu", "gpus_per_node", "row", "servers_usd"),
    [
        # DGX A100 640GB ~$300,000 (Graphcore blog 2021-06, via Epoch AI's hardware prices), 8 GPUs per node
        ("A100-80GB-SXM", 8, "A100-80GB-SXM: DGX A100 640GB", 16 * 300_000),
        # DGX GB200 NVL72 rack ~$3.0M for 72 GPUs, here in 4-GPU trays
        ("GB200", 4, "GB200: DGX GB200 NVL72", 16 * 4 * 3.0e6 / 72),
    ],
)
def test_the_cost_page_uses_the_gpus_own_server_row(
    client: Any, gpu: str, gpus_per_node: int, row: str, servers_usd: float
) -> None:
    page = client.get(f"/cost?gpu={gpu}&nodes=16&gpus_per_node={gpus_per_node}", headers=HX)
    assert page.status_code == 200
    assert f'id="server-basis">{row}' in page.text
    api = client.post(
        "/api/v1/cost/tco",
        json={
            "onprem": {"nodes": 16, "gpus_per_node": gpus_per_node},
            "utilisation": 0.7,
            "gpu": gpu,
            "months": 48,
        },
    ).json()
    assert api["capex"]["servers"] == pytest.approx(servers_usd)
    assert f"{api['capex_total_usd']:,.0f} USD" in page.text
    h100 = client.post(
        "/api/v1/cost/tco",
        json={"onprem": {"nodes": 16, "gpus_per_node": 8}, "utilisation": 0.7, "gpu": "H100", "months": 48},
    ).json()
    assert api["capex"]["servers"] / gpus_per_node != pytest.approx(h100["capex"]["servers"] / 8)
