"""The real `clusterplan` CLI on bad paths, closed pipes, a missing torch, non-finite numbers and the
destructive `db downgrade`: one line on stderr and exit 2 (never a traceback), strict JSON, and a prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from tests.cli_support import clusterplan, run_main
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "llama3-70b-64xh100.json"


READERS = [
    ["estimate", "{}"],
    ["network", "scaling", "{}"],
    ["plan", "{}"],
    ["cost", "run", "--scenario", "{}"],
    ["catalog", "import-hf", "{}"],
    ["validate", "training-runs", "{}"],
    ["validate", "accuracy", "{}"],
    ["validate", "collectives", "{}"],
    ["validate", "costs", "{}"],
    ["validate", "layouts", "{}"],
    ["calibrate", "fit", "{}", "--name", "x"],
    ["bench", "import", "{}"],
]


@pytest.mark.parametrize("template", READERS, ids=lambda t: " ".join(a for a in t if a != "{}"))
def test_a_directory_given_for_a_file_is_refused_with_exit_2(
    template: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main([str(tmp_path) if a == "{}" else a for a in template], capsys)
    assert code == 2, err
    assert "directory" in err.lower() and "Traceback" not in err


def test_os_errors_are_one_line_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked.json"
    locked.write_text(EXAMPLE.read_text())
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as a user who reads any file (root)")
        code, _, err = run_main(["estimate", str(locked)], capsys)
    finally:
        locked.chmod(0o600)
    assert code == 2 and err.strip() == f"error: {locked}: Permission denied"


def test_an_os_error_from_the_command_itself_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory where the output file should go: the OSError is raised inside the command."""
    target = tmp_path / "out"
    target.mkdir()
    code, _, err = run_main(["bench", "slurm-script", "--nodes", "2", "--out", str(target)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and "directory" in err.lower()


def test_a_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["estimate", str(tmp_path / "absent.json")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "absent.json" in err


def test_a_closed_output_pipe_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`clusterplan catalog list gpus | head -1`: the reader goes away before the table is written."""
    # its own database: the environment may still name one an earlier test has dropped
    env = {**os.environ, "CLUSTERPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'pipe.db'}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "catalog", "list", "gpus"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # nothing reads: the first write after this fails with EPIPE
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 2
    assert err.strip() == "error: output closed before everything was written (broken pipe)"


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "gemm", "--device", "cpu"],
        ["bench", "attention", "--device", "cpu"],
        ["bench", "collectives", "--nproc", "2"],
    ],
    ids=lambda a: a[1],
)
def test_bench_without_torch_says_how_to_install_it(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails as if it were not installed
    code, _, err = run_main(args, capsys)
    assert code == 2
    assert err.strip() == (
        "error: torch is not installed: pip install 'clusterplan[bench]' "
        "(CPU build: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
    )


def _infinite_tokens(tmp_path: Path) -> Path:
    scenario = json.loads(EXAMPLE.read_text())
    scenario["training"]["tokens"] = float("inf")
    path = tmp_path / "unbounded.json"
    path.write_text(json.dumps(scenario))  # Python writes the token Infinity, which its parser reads back
    assert "Infinity" in path.read_text()
    return path


def _strict(text: str) -> object:
    def refuse(token: str) -> object:
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_infinite_tokens_are_refused_and_json_output_is_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _infinite_tokens(tmp_path)
    for extra in ([], ["--json"]):
        code, out, err = run_main(["estimate", str(path), *extra], capsys)
        assert code == 2 and out == "" and "training.tokens" in err and "inf days" not in err
    code, out, err = run_main(["estimate", str(EXAMPLE), "--json"], capsys)
    assert code == 0, err
    assert isinstance(_strict(out), dict)


def test_to_json_maps_every_non_finite_number_to_null() -> None:
    from app.cli.output import days_text, to_json

    assert _strict(to_json({"a": [float("nan"), float("-inf"), 1.5], "b": (float("inf"),)})) == {
        "a": [None, None, 1.5],
        "b": [None],
    }
    assert [days_text(x) for x in (float("inf"), float("nan"), None, 2.5)] == [
        "unbounded",
        "n/a",
        "n/a",
        "2.50 days",
    ]


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.slow
def test_db_downgrade_needs_a_revision_and_a_confirmation(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'down.db'}"
    env = {"CLUSTERPLAN_DATABASE_URL": url, "CLUSTERPLAN_ENVIRONMENT": "test"}
    assert clusterplan("db", "upgrade", env=env).returncode == 0
    before = _tables(url)
    assert "benchmark_job" in before

    bare = clusterplan("db", "downgrade", env=env)
    assert bare.returncode == 2 and "missing argument" in bare.stderr.lower()
    declined = clusterplan("db", "downgrade", "base", env=env, stdin="n\n")
    assert declined.returncode == 1 and "unchanged" in declined.stderr
    assert _tables(url) == before
    no_answer = clusterplan(
        "db", "downgrade", "base", env=env, stdin=""
    )  # a script without --yes: nothing happens
    assert no_answer.returncode != 0 and _tables(url) == before

    done = clusterplan("db", "downgrade", "base", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert "benchmark_job" not in _tables(url)
