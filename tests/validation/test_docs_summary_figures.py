"""The summary table of docs/validation.md quotes what the training-run replays give now.

Its figures fell behind the replay once (the NVFP4 row kept the figures of the day its constant was chosen while
later changes moved them), so each headline figure is replayed here; regenerate them with the commands in that
table after any change to the estimator."""

from __future__ import annotations

import re

import pytest

from app.validation.training_runs import load_rows, replay
from tests.paths import DATA_DIR, ROOT

DOC = ROOT / "docs" / "validation.md"

# (file, the text before the figure in the summary table); the figure follows as "N.N %"
QUOTED = (
    ("training_runs.csv", r"\| \*\*MAPE "),
    (
        "training_runs_vtrain_multi.csv",
        r"`clusterplan validate training-runs tests/data/training_runs_vtrain_multi\.csv` \| \*\*MAPE ",
    ),
    ("training_runs_bigscience_chronicles.csv", r"time \*\*MAPE "),
    ("training_runs_heldout.csv", r"held-out \*\*MAPE "),
    ("training_runs_final_check.csv", r"final check \(all MoE\) \*\*"),
    ("training_runs_nvfp4.csv", r"26\.02: \*\*MAPE "),
    ("training_runs_megatron_bridge_2602_01.csv", r"26\.02\.01, nothing chosen on it: \*\*MAPE "),
    ("training_runs_megatron_bridge_2604_2608.csv", r"26\.04–26\.08: \*\*MAPE "),
    ("training_runs_torchtitan_202412.csv", r"torchtitan Dec 2024, besides 3 development runs: \*\*MAPE "),
    ("training_runs_dgxc_weak_scaling.csv", r"training_runs_dgxc_weak_scaling\.csv` \| \*\*MAPE "),
    ("training_runs_mlperf.csv", r"training_runs_mlperf\.csv` \| \*\*MAPE "),
    ("training_runs_nemo_long_context_2504.csv", r"training_runs_nemo_long_context_2504\.csv` \| \*\*MAPE "),
    (
        "training_runs_torchtitan_202506_async_tp.csv",
        r"training_runs_torchtitan_202506_async_tp\.csv` \| \*\*MAPE ",
    ),
)


def _quoted(prefix: str) -> tuple[float, int]:
    """The figure the summary table quotes after `prefix`, and its number of decimals."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(prefix + r"([\d.]+) %", text)
    assert match, f"docs/validation.md lost the figure after {prefix!r}"
    figure = match.group(1)
    return float(figure), len(figure.split(".")[1]) if "." in figure else 0


@pytest.mark.parametrize(("name", "prefix"), QUOTED, ids=[name for name, _ in QUOTED])
def test_summary_quotes_the_replay(name: str, prefix: str) -> None:
    quoted, decimals = _quoted(prefix)
    mape = replay(load_rows(DATA_DIR / name)).summary()["time"]["mape_pct"]
    assert round(mape, decimals) == pytest.approx(quoted), (
        f"{name}: docs say {quoted} %, the replay {mape:.3f} %"
    )


def test_summary_quotes_the_nvfp4_runs_of_the_second_container() -> None:
    quoted, decimals = _quoted(r"its NVFP4 runs ")
    rows = load_rows(DATA_DIR / "training_runs_megatron_bridge_2602_01.csv")
    dtypes = {row.index: row.get("dtype").lower() for row in rows}
    errors = [
        abs(r.error_pct) for r in replay(rows).rows if r.error_pct is not None and "fp4" in dtypes[r.row]
    ]
    assert errors, "the 26.02.01 file lost its NVFP4 runs"
    assert round(sum(errors) / len(errors), decimals) == pytest.approx(quoted)
