"""The one way tests call the `clusterplan` CLI: in process through Typer's CliRunner or through `main`, or as
a real subprocess (exit codes, pipes, stdin, a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT


def invoke(args: list[str], **kwargs: Any) -> Any:
    """The CLI's command tree in process through Typer's CliRunner: a click Result (exit_code, output)."""
    from typer.testing import CliRunner

    from app.cli.main import build_cli

    return CliRunner().invoke(build_cli(), args, **kwargs)


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The entry point the console script calls, in process: exit code, stdout, stderr."""
    from app.cli.main import main

    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    out, err = capsys.readouterr()
    return code, out, err


def clusterplan(
    *args: str,
    tmp_path: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`python -m app.cli.main ARGS` in a subprocess from the repository root.

    tmp_path: a fresh SQLite database file there; env: variables over this process's environment.
    """
    full_env = {**os.environ, **(env or {})}
    if tmp_path is not None:
        full_env["CLUSTERPLAN_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        cwd=ROOT,
        env=full_env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
