"""The SQLite backup and restore commands of docs/operations.md, run as written on a live WAL database.

tests/cli/test_docs_commands.py runs every documented `clusterplan` command; these are the shell and Python
lines beside them (the online backup, and the restore's file copies), run by bash from a scratch directory that
holds `data/clusterplan.db` with a commit still in its `-wal` file."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

DOC = ROOT / "docs" / "operations.md"


def _block_after(heading: str, marker: str) -> list[str]:
    """The shell lines (continuations joined, comments dropped) of the first ```sh block after `heading` that
    contains `marker`."""
    text = DOC.read_text(encoding="utf-8").split(heading, 1)[1]
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        if marker in block:
            joined = block.replace("\\\n", " ")
            return [line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]
    raise AssertionError(f"docs/operations.md: no sh block with {marker!r} after {heading!r}")


def _live_database(work: Path) -> sqlite3.Connection:
    """data/clusterplan.db in WAL mode with a row committed but not checkpointed (a server that keeps running)."""
    (work / "data").mkdir()
    (work / "backups").mkdir()
    db = sqlite3.connect(work / "data" / "clusterplan.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("CREATE TABLE plan (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO plan (name) VALUES ('kept by the backup')")
    db.commit()
    return db  # kept open: the server still runs


def _run(lines: list[str], work: Path) -> None:
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").symlink_to(sys.executable)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work)}
    for line in lines:
        done = subprocess.run(
            ["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{line}\n{done.stderr}"


def _rows(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [r[0] for r in db.execute("SELECT name FROM plan")]
    finally:
        db.close()


@pytest.mark.parametrize("tool", ["sqlite3", "python"])
def test_the_online_backup_keeps_a_commit_still_in_the_wal(tmp_path: Path, tool: str) -> None:
    lines = [
        line
        for line in _block_after("### SQLite", ".backup")
        if line.startswith(tool)  # the two alternatives: the sqlite3 tool, or Python's sqlite3 module
    ]
    assert len(lines) == 1, lines
    if tool == "sqlite3" and shutil.which("sqlite3") is None:
        pytest.skip("the sqlite3 tool is not installed here (the Python line is the documented alternative)")
    server = _live_database(tmp_path)
    _run(lines, tmp_path)
    server.close()
    (backup,) = (tmp_path / "backups").glob("clusterplan-*.db")
    assert _rows(backup) == ["kept by the backup"]


def test_the_restore_brings_back_the_backup(tmp_path: Path) -> None:
    _live_database(tmp_path).close()  # restore: the server is stopped
    backup = tmp_path / "backups" / "clusterplan-2026-11-29.db"
    source = sqlite3.connect(tmp_path / "data" / "clusterplan.db")
    target = sqlite3.connect(backup)
    source.backup(target)
    target.close()
    source.execute("INSERT INTO plan (name) VALUES ('written after the backup')")
    source.commit()
    source.close()
    restore = [line for line in _block_after("Restore:", "cp backups/") if not line.startswith("clusterplan")]
    assert restore[0].startswith("rm -f data/clusterplan.db-wal") and restore[1].startswith("cp backups/")
    _run(restore, tmp_path)
    assert _rows(tmp_path / "data" / "clusterplan.db") == ["kept by the backup"]
