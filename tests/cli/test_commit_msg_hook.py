"""The commit-msg hook (.githooks/commit-msg) accepts good messages and rejects bad ones; `make hooks`
installs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

HOOK = ROOT / ".githooks" / "commit-msg"


def run_hook(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(HOOK), str(path)], capture_output=True, text=True, timeout=30, check=False
    )


GOOD = [
    "Add the commit-msg hook\n",
    "Fix the estimate cache key\n\nThe key now carries the formula version.\n",
    "Docs: the builder's first load, 0.49 MB\n",
    "Speed up the planner search\n",
    "Embed the catalog in the wheel\n",
    "x" * 72 + "\n",
    "Add a hook\n\n# Please enter the commit message for your changes.\n# On branch main\n",
    "Add a hook\n\n# ------------------------ >8 ------------------------\nAdded. diff below\n",
    'Revert "Added something."\n\nThis reverts commit 0123456789abcdef.\n',
    "Merge branch 'main' into feature\n",
    "fixup! Add the hook\n",
]

BAD = [
    ("Added the commit-msg hook\n", "imperative"),
    ("Fixed the estimate cache key\n", "imperative"),
    ("Updated docs\n", "imperative"),
    ("Docs: updated the planner page\n", "imperative"),
    ("Made the tests faster\n", "imperative"),
    ("Add the commit-msg hook.\n", "period"),
    ("x" * 73 + "\n", "73 characters"),
    ("Add the hook\nThe body starts at once.\n", "blank line"),
    ("\n# only a comment\n", "empty"),
]


@pytest.mark.parametrize("message", GOOD)
def test_good_messages_pass(tmp_path: Path, message: str) -> None:
    result = run_hook(tmp_path, message)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("message", "reason"), BAD)
def test_bad_messages_are_rejected_with_the_reason(tmp_path: Path, message: str, reason: str) -> None:
    result = run_hook(tmp_path, message)
    assert result.returncode == 1
    assert reason in result.stderr


def test_the_hook_is_executable() -> None:
    assert HOOK.stat().st_mode & 0o111
    assert HOOK.read_text().startswith("#!/usr/bin/env python3\n")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_make_hooks_installs_the_hooks_path(tmp_path: Path) -> None:
    """`make hooks` sets core.hooksPath, and git then runs the hook on a commit."""
    if shutil.which("make") is None:
        pytest.skip("needs make")
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / ".githooks", repo / ".githooks")
    shutil.copy(ROOT / "Makefile", repo / "Makefile")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(tmp_path), "PATH": _path()}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=30, check=False
        )

    assert git("init", "-q").returncode == 0
    made = subprocess.run(
        ["make", "-s", "hooks"], cwd=repo, env=env, capture_output=True, text=True, timeout=30
    )
    assert made.returncode == 0, made.stderr
    assert git("config", "core.hooksPath").stdout.strip() == ".githooks"
    rejected = git("commit", "-q", "--allow-empty", "-m", "Added a file.")
    assert rejected.returncode != 0 and "imperative" in rejected.stderr
    accepted = git("commit", "-q", "--allow-empty", "-m", "Add a file")
    assert accepted.returncode == 0, accepted.stderr


def _path() -> str:
    # The hook's "#!/usr/bin/env python3" must find a Python: put this interpreter's directory first.
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
