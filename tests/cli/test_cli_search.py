"""`clusterplan search` and its deprecated alias `clusterplan plan`: the same command and the same stdout; the
alias writes one warning line on stderr first."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.cli_support import clusterplan, invoke, run_main
from tests.paths import ROOT
from tests.plans_support import without_timing

EXAMPLE = str(ROOT / "examples" / "llama3-70b-64xh100.json")
WARNING = "warning: 'clusterplan plan' is deprecated; use 'clusterplan search'\n"


def test_search_and_plan_print_the_same_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["search", EXAMPLE, "--json"], capsys)
    assert code == 0 and err == "", err
    old_code, old_out, old_err = run_main(["plan", EXAMPLE, "--json"], capsys)
    assert old_code == 0, old_err
    assert old_err == WARNING
    search, plan = json.loads(out), json.loads(old_out)
    assert search["elapsed_s"] > 0 and search["top"]
    assert without_timing(search) == without_timing(plan)


def test_the_text_output_is_the_same_but_for_the_search_speed(capsys: pytest.CaptureFixture[str]) -> None:
    speed = re.compile(r"search \d+ ms \([\d,]+ layouts/s\)")
    _, out, _ = run_main(["search", EXAMPLE, "--top", "3"], capsys)
    _, old_out, old_err = run_main(["plan", EXAMPLE, "--top", "3"], capsys)
    assert speed.search(out) and speed.sub("", out) == speed.sub("", old_out)
    assert old_err == WARNING


def test_the_real_command_warns_on_stderr_only_once_and_first(tmp_path: Any) -> None:
    run = clusterplan("plan", "--model", "Llama-3-8B", "--gpu", "H100-SXM", tmp_path=tmp_path)
    assert run.returncode == 2  # bad input still exits 2; the warning comes before the error
    lines = run.stderr.splitlines()
    assert lines[0] == WARNING.strip() and "--seq-len" in lines[1]
    assert run.stderr.count("deprecated") == 1 and "DeprecationWarning" not in run.stderr
    assert run.stdout == ""
    search = clusterplan("search", "--model", "Llama-3-8B", "--gpu", "H100-SXM", tmp_path=tmp_path)
    assert search.returncode == 2 and "deprecated" not in search.stderr


def test_help_lists_search_and_marks_plan_deprecated() -> None:
    listing = invoke(["--help"], terminal_width=200)
    assert listing.exit_code == 0, listing.output
    marked = [line for line in listing.stdout.splitlines() if "deprecated" in line.lower()]
    assert len(marked) == 1 and re.search(r"\bplan\b", marked[0]), marked
    assert re.search(r"^\W*search\s", listing.stdout, re.MULTILINE)
    assert invoke(["plan", "--help"]).stderr == ""  # --help runs nothing: no warning


def test_search_takes_the_moe_dispatch_options(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["search", "--model", "Qwen3-30B-A3B", "--gpu", "H100-SXM", "--nodes", "4", "--seq-len", "4096"]
    base += ["--global-batch", "512", "--top", "3", "--json"]
    code, out, err = run_main([*base, "--moe-dispatcher", "deepep", "--moe-a2a-overlap"], capsys)
    assert code == 0, err
    tuned = json.loads(out)
    assert tuned["framework"] == "megatron-core+deepep+a2a-overlap"
    code, out, err = run_main(base, capsys)
    assert code == 0, err
    plain = json.loads(out)
    assert plain["framework"] == "megatron-core"
    # the deduplicated, overlapped all-to-all can only make the best layout faster
    assert tuned["top"][0]["step_time_s"] <= plain["top"][0]["step_time_s"]
    code, _, err = run_main([*base, "--moe-dispatcher", "nccl"], capsys)
    assert code == 2 and "moe_dispatcher" in err
