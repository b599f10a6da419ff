"""`validate collectives` scores the rows behind each catalog fabric preset apart (issue: a large-message error on
one fabric must not hide a regression on another)."""

from __future__ import annotations

from app.validation.collectives import parse_row, preset_family, validate_file
from tests.paths import DATA_DIR

DATA = DATA_DIR / "network" / "collectives.csv"


def _fabric(fabric: str, system: str = "2 nodes", gpus_per_node: str = "8") -> str:
    case = parse_row(
        1,
        {
            "system": system,
            "gpu": "H100-SXM",
            "gpus_per_node": gpus_per_node,
            "nodes": "2",
            "fabric": fabric,
            "collective": "all_reduce",
            "message_size_bytes": "1073741824",
            "busbw_GBps": "300",
        },
    )
    assert not isinstance(case, str), case
    return preset_family(case.cluster.fabric)


def test_a_row_joins_the_presets_with_its_nic_set() -> None:
    assert _fabric("8x400G RoCEv2 per node") == (
        "roce 8×400G: roce-8x400, roce-ecmp-8x400, roce-ecmp-scattered-8x400, roce-meta-8x400"
    )
    assert _fabric("AWS EFA v2, 32x100 Gbps per node").startswith("efa 32×100G: efa-v2-32x100")
    assert _fabric("8x100G RoCE per node") == "no preset"


def test_report_scores_each_preset_group_by_size() -> None:
    report = validate_file(DATA)
    groups = report.by_preset()
    multi_node = [r for r in report.results if r.case.placement.nodes > 1]
    assert sum(len(rows) for rows in groups.values()) == len(multi_node)
    summary = report.to_json()["summary"]["by_preset"]
    efa_v2 = next(key for key in summary if key.startswith("efa 32×100G"))
    assert summary[efa_v2]["all"]["n"] == summary[efa_v2]["large"]["n"] + summary[efa_v2]["small"]["n"]
    assert summary[efa_v2]["small"]["n"] >= 1
