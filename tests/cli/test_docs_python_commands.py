"""Every benchmark command the docs give (`python -m benchmarks…`, `python benchmarks/….py`) names a script of the
repository, and every option it passes is one that script accepts (its `--help`). They are not run here: each
starts servers or runs for minutes (docs/performance.md gives their figures). tests/cli/test_docs_commands.py
runs the `clusterplan` and `make` commands."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from functools import cache

import pytest

from tests.cli.test_docs_commands import (
    DOCS,
    SEPARATORS,
    SHELL_LANGUAGES,
    fenced_blocks,
    logical_lines,
    split_commands,
)
from tests.paths import ROOT


def python_commands() -> list[tuple[str, list[str]]]:
    """(where, [target, args…]) for each documented `python -m MODULE …` or `python FILE.py …` command."""
    found = []
    for path in DOCS:
        for language, _start, body in fenced_blocks(path):
            if language not in SHELL_LANGUAGES:
                continue
            for number, line in logical_lines(language, body):
                for command in split_commands(shlex.split(line, comments=True)):
                    words = command[1:] if command[0] in SEPARATORS else command
                    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                        words = words[1:]  # VAR=value prefixes
                    if len(words) < 2 or not re.search(r"python3?$", words[0]) or words[1] == "-c":
                        continue  # not python, or an inline program (`python -c`)
                    target = words[1:3] if words[1] == "-m" else words[1:2]
                    found.append((f"{path.relative_to(ROOT)}:{number}", [*target, *words[len(target) + 1 :]]))
    return found


COMMANDS = python_commands()


@cache
def help_text(*target: str) -> str:
    result = subprocess.run(
        [sys.executable, *target, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{' '.join(target)} --help: {result.stderr[-500:]}"
    return result.stdout


def test_the_docs_give_benchmark_commands() -> None:
    assert len({tuple(c[:2]) if c[0] == "-m" else (c[0],) for _, c in COMMANDS}) >= 4


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_python_command_names_a_script_and_its_options(where: str, command: list[str]) -> None:
    target = command[:2] if command[0] == "-m" else command[:1]
    if target[0] == "-m":
        module_file = ROOT / (target[1].replace(".", "/") + ".py")
        assert module_file.is_file(), f"{where}: no module {target[1]}"
    else:
        assert (ROOT / target[0]).is_file(), f"{where}: no file {target[0]}"
    options = {word.split("=", 1)[0] for word in command[len(target) :] if word.startswith("--")}
    accepted = set(re.findall(r"--[a-z][a-z0-9-]*", help_text(*target)))
    assert options <= accepted, f"{where}: {sorted(options - accepted)} not among {sorted(accepted)}"
