"""Every shell command in README.md and docs/*.md is run or checked.

The fenced ```sh / ```bash / ```console / ```shell blocks are read; a line (continuations joined) may hold
several commands (`;`, `&&`, `|`). Then:

- `make TARGET`: TARGET must be a target of the Makefile (it is not run: those targets install things).
- a concrete `clusterplan …` command is run in-process (typer's CliRunner) against a temporary, migrated and
  seeded SQLite database, from a scratch directory that sees the repository's `examples/` and `tests/` and
  the few input files the docs name (`DOC_FILES`); it must exit 0, or the status in `EXPECTED_EXIT`.
- a synopsis line (alternatives `a|b`, optional `[--json]`, `...`, placeholders such as FILE or `<id>`):
  each alternative's `--help` must exit 0, and every `--option` it names must be an option of that command.
- `SKIPPED` lists, with the reason, the concrete commands that need a server, a GPU, torchrun, PostgreSQL or
  a file produced on one.

A fenced block without a language that holds a `clusterplan` command fails the test: it would escape it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from app.cli.main import build_cli
from tests.conftest import configure_app_database
from tests.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"sh", "bash", "console", "shell"}
SEPARATORS = {";", "&&", "||", "|"}

# (file, command as written, joined continuations and without comments) → why it is not run here.
SKIPPED: dict[tuple[str, str], str] = {
    # A server: these start uvicorn and never return.
    ("README.md", "clusterplan serve [--host H --port P --workers N]"): "starts a server",
    ("docs/operations.md", "clusterplan serve --workers 4"): "starts a server",
    ("docs/operations.md", "clusterplan serve"): "starts a server",
    # PostgreSQL: the restore check points at a restored PostgreSQL database.
    (
        "docs/operations.md",
        "CLUSTERPLAN_DATABASE_URL=postgresql://…/clusterplan_restored clusterplan db upgrade",
    ): "needs the restored PostgreSQL database (the same command runs on SQLite above)",
    # Usage lines run without their optional parts: the defaults are GPU-sized or start torchrun.
    (
        "README.md",
        "clusterplan bench gemm [--device cpu|cuda] [--dtype bf16] [--json]",
    ): "bf16 GEMMs up to 8192³ on the default device (minutes on a CPU)",
    (
        "README.md",
        "clusterplan bench attention [--device cpu|cuda] [--kernel cudnn,flash-attention-2] [--seq 4096,32768] [--json]",
    ): "long-sequence attention on the default device (a GPU)",
    # Examples that name a token and a user of the reader's own.
    ("docs/operations.md", "clusterplan tokens revoke cpt_AbCd1234"): "an example token prefix",
    (
        "docs/operations.md",
        "clusterplan users deactivate leaver@example.com",
    ): "an example user not created above",
    # A GPU.
    (
        "docs/benchmarks.md",
        'clusterplan bench gemm --device cuda --dtype bf16,fp8 --shapes "1024:16384:1024 4096 4096"',
    ): "needs a CUDA GPU",
    (
        "docs/benchmarks.md",
        "clusterplan bench gemm --model llama-3-8b --tp 4 --micro-batch 1 --seq-len 8192",
    ): "needs a CUDA GPU (the default device)",
    (
        "docs/benchmarks.md",
        "clusterplan bench attention --device cuda --kernel cudnn,flash-attention-2 --seq 1024,4096,16384,32768",
    ): "needs a CUDA GPU",
    (
        "docs/benchmarks.md",
        "clusterplan bench gemm --model llama-3-70b --tp 8 --dtype bf16 --out gemm.json",
    ): "needs a CUDA GPU (the default device)",
    (
        "docs/benchmarks.md",
        "clusterplan bench check gemm.json --gpu H100-SXM --fabric ib-ndr-8x400",
    ): "reads the GPU measurement of the line above",
    # torchrun with 8 ranks (NCCL on GPUs), across nodes.
    (
        "docs/benchmarks.md",
        "clusterplan bench collectives --op all_reduce --nproc 8 --minbytes 8 --maxbytes 8G --stepfactor 2 --iters 20 --warmup-iters 5",
    ): "starts 8 torchrun ranks (NCCL, GPUs)",
    (
        "docs/benchmarks.md",
        "clusterplan bench collectives --op all --nproc 8 --groups each --json --out run.json",
    ): "starts 8 torchrun ranks (NCCL, GPUs)",
    (
        "docs/benchmarks.md",
        "clusterplan bench collectives --op all_reduce --nproc 8 --nnodes 4 --rdzv-endpoint node0:29500 --rdzv-id run1",
    ): "torchrun across 4 nodes",
}

# Input files the docs name, provided from the repository's fixtures (name in the doc → file).
DOC_FILES = {
    "all_reduce_perf.log": "tests/data/bench/all_reduce_perf.txt",
    "out.json": "tests/data/bench/all_gather_perf.json",
    "mamf-finder.out": "tests/data/bench/mamf.txt",
    "mamf.out": "tests/data/bench/mamf.txt",
}

# Standard input for commands that prompt (users create/set-password ask for the password twice).
PASSWORD = "correct horse battery staple"
STDIN = {
    "clusterplan users create you@example.com --admin": f"{PASSWORD}\n{PASSWORD}\n",
    "clusterplan users create admin@example.com --admin": f"{PASSWORD}\n{PASSWORD}\n",
    "clusterplan users set-password you@example.com": f"{PASSWORD} 2\n{PASSWORD} 2\n",
}
ENV = {"PASSWORD": PASSWORD}

# Exit statuses the docs state for a command (0 otherwise).
EXPECTED_EXIT: dict[str, int] = {}

# A documented command that runs against the database a command of the same block made: the token prefix
# in the docs is an example, the test revokes the token it created.
TOKEN_PREFIX_EXAMPLE = "cpt_AbCd1234"


@dataclass(frozen=True)
class DocCommand:
    path: str  # relative to the repository
    line: int
    text: str  # joined, comments dropped
    argv: tuple[str, ...]  # after `clusterplan` (or after `make`)
    program: str  # "clusterplan" or "make"
    stdin: str | None = None  # from `echo … |`
    stdout_to: str | None = None  # `> FILE`

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def fenced_blocks(path: Path) -> Iterator[tuple[str, int, list[tuple[int, str]]]]:
    """(language, first line number, [(line number, text)]) for each fenced code block."""
    language: str | None = None
    start = 0
    body: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if language is None and stripped.startswith("```"):
            language, start, body = stripped[3:].strip().lower(), number, []
        elif language is not None and stripped == "```":
            yield language, start, body
            language = None
        elif language is not None:
            body.append((number, line))


def logical_lines(language: str, body: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Lines with backslash continuations joined; in console blocks only `$ ` lines (the rest is output)."""
    pending: list[str] = []
    first = 0
    for number, raw in body:
        line = raw.strip()
        if not pending:
            if language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            first = number
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        yield first, " ".join(part for part in pending if part)
        pending = []


def split_commands(tokens: list[str]) -> list[list[str]]:
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS:
            commands.append([token])
        else:
            commands[-1].append(token)
    return [c for c in commands if c and c != [";"]]


def doc_commands() -> list[DocCommand]:
    found: list[DocCommand] = []
    for path in DOCS:
        rel = str(path.relative_to(ROOT))
        for language, _start, body in fenced_blocks(path):
            if language not in SHELL_LANGUAGES:
                continue
            for number, line in logical_lines(language, body):
                line = re.sub(r";(\s)", r" ;\1", line)  # "[--json]; catalog …": ";" as its own word
                try:
                    tokens = shlex.split(line, comments=True)
                except ValueError:
                    tokens = line.split()
                previous: list[str] = []
                for command in split_commands(tokens):
                    separator = command[0] if command[0] in SEPARATORS else None
                    words = command[1:] if separator else command
                    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                        words = words[1:]  # VAR=value prefixes
                    if not words or words[0] not in ("clusterplan", "make"):
                        previous = words
                        continue
                    stdin = None
                    if separator == "|" and previous[:1] == ["echo"]:
                        stdin = " ".join(os.path.expandvars(w) for w in previous[1:]).replace(
                            "$PASSWORD", PASSWORD
                        )
                        stdin += "\n"
                    stdout_to = None
                    if ">" in words:
                        at = words.index(">")
                        stdout_to, words = words[at + 1], words[:at]
                    text = shlex.join(words) if words[0] == "make" else _text(line, words[0])
                    found.append(DocCommand(rel, number, text, tuple(words[1:]), words[0], stdin, stdout_to))
                    previous = words
    return found


def _text(line: str, program: str) -> str:
    """The command as written from its program on (for the skip table): comments and redirections dropped."""
    text = re.sub(r"\s+#\s.*$", "", line).strip()
    text = re.sub(r"\s+>\s+\S+\s*$", "", text)
    if ";" in text:
        text = next(part.strip() for part in text.split(";") if program in part)
    return " ".join(text.split())


PLACEHOLDER = re.compile(r"^(?:[A-Z]{2,}(?:\.[a-z]+)?|[A-Z])$")


def is_synopsis(command: DocCommand) -> bool:
    """Alternatives, optional parts, an ellipsis or a placeholder: a usage line, not a runnable command."""
    for word in command.argv:
        if word in ("...", "…") or "…" in word or word.startswith("[") or word.endswith("]"):
            return True
        if word.startswith("<") and word.endswith(">"):
            return True
        if "|" in word or PLACEHOLDER.match(word):
            return True
    return False


def without_optional_parts(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """A synopsis whose only usage marks are optional `[…]` parts, with them left out: a runnable command.
    None when it has alternatives, placeholders or an ellipsis outside them."""
    kept: list[str] = []
    depth = 0
    for word in argv:
        if word.startswith("["):
            depth += 1
        if depth == 0:
            kept.append(word)
        if word.endswith("]"):
            depth -= 1
    probe = DocCommand("", 0, "", tuple(kept), "clusterplan")
    return None if is_synopsis(probe) else tuple(kept)


# Flags that would write into the repository (app/catalog/*.json); the command runs without them.
WRITES_THE_REPOSITORY = {"--write"}

COMMANDS = doc_commands()
CLUSTERPLAN = [c for c in COMMANDS if c.program == "clusterplan"]
SYNOPSES = [c for c in CLUSTERPLAN if is_synopsis(c)]
# Each runnable command with the arguments it runs with.
RUNNABLE = [
    (c, argv)
    for c in CLUSTERPLAN
    if (argv := c.argv if not is_synopsis(c) else without_optional_parts(c.argv)) is not None
]


def test_the_docs_have_commands_in_every_kind() -> None:
    assert len(RUNNABLE) >= 50 and len(SYNOPSES) >= 10
    assert any(c.program == "make" for c in COMMANDS)


def test_no_clusterplan_command_hides_in_an_untagged_block() -> None:
    hidden = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in DOCS
        for language, _start, body in fenced_blocks(path)
        if language == ""
        for number, line in body
        if re.match(r"\s*(\$ )?clusterplan ", line)
    ]
    assert not hidden, f"tag these blocks ```sh so their commands are tested: {hidden}"


def test_the_skip_table_names_only_documented_commands() -> None:
    documented = {(c.path, c.text) for c, _argv in RUNNABLE}
    assert not set(SKIPPED) - documented, sorted(set(SKIPPED) - documented)


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z0-9_.-]+):", text, re.MULTILINE))


def test_every_documented_make_target_exists() -> None:
    targets = makefile_targets()
    missing = []
    for command in (c for c in COMMANDS if c.program == "make"):
        named = [w for w in command.argv if not w.startswith("-") and "=" not in w]
        missing += [f"{command.id}: make {t}" for t in named if t not in targets]
    assert not missing, missing


def click_root() -> Any:
    """The click command tree (typer's own click: groups are told apart by their `commands`)."""
    command = typer.main.get_command(build_cli())
    assert is_group(command)
    return command


def is_group(command: Any) -> bool:
    return isinstance(getattr(command, "commands", None), dict)


def resolve(root: Any, words: list[str]) -> list[tuple[list[str], Any]]:
    """Each command path a synopsis names: ([sub, command], click command), one per alternative."""
    paths: list[tuple[list[str], Any]] = [([], root)]
    for word in words:
        if word.startswith("-") or word.startswith("["):
            break
        groups = [(p, c) for p, c in paths if is_group(c)]
        if not groups:
            break
        expanded = []
        for prefix, group in groups:
            for name in word.split("|"):
                sub = group.commands.get(name)
                if sub is None:
                    if len(expanded) == 0 and prefix:
                        return paths  # an argument, not a sub-command
                    raise AssertionError(f"no command {' '.join([*prefix, name])}")
                expanded.append(([*prefix, name], sub))
        paths = expanded
    return paths


def options_named(words: tuple[str, ...]) -> set[str]:
    names = set()
    for word in words:
        for part in re.split(r"[\[\]|;]", word):
            if part.startswith("--"):
                names.add(part.split("=")[0])
    return names


@pytest.mark.parametrize("command", SYNOPSES, ids=lambda c: c.id)
def test_synopsis_names_real_commands_and_options(command: DocCommand) -> None:
    root = click_root()
    words = list(command.argv)
    # "clusterplan catalog list …; catalog import-hf …" shows a second command without the program name.
    paths = resolve(root, words)
    runner = CliRunner()
    for path, cmd in paths:
        result = runner.invoke(build_cli(), [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        if len(paths) == 1:
            known = {opt for param in cmd.params for opt in (*param.opts, *param.secondary_opts)}
            unknown = options_named(command.argv) - known - {"--help"}
            assert not unknown, f"{command.id}: {' '.join(path)} has no {sorted(unknown)}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch directory with a migrated SQLite database, the repository's inputs and the docs' files."""
    from app.startup import prepare_database

    work = tmp_path_factory.mktemp("docs-commands")
    for name in ("examples", "tests"):
        (work / name).symlink_to(ROOT / name, target_is_directory=True)
    (work / "docs" / "img").mkdir(parents=True)  # plots land here, not in the repository's docs/img
    (work / "data").mkdir()
    for name, source in DOC_FILES.items():
        shutil.copy(ROOT / source, work / name)
    saved = {k: os.environ.get(k) for k in ("CLUSTERPLAN_DATABASE_URL", *ENV)}
    configure_app_database(f"sqlite:///{work / 'data' / 'clusterplan.db'}")
    os.environ.update(ENV)
    prepare_database()
    cwd = Path.cwd()
    os.chdir(work)
    try:
        yield work
    finally:
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if saved["CLUSTERPLAN_DATABASE_URL"]:
            configure_app_database(saved["CLUSTERPLAN_DATABASE_URL"])


def run_documented(command: DocCommand, argv: tuple[str, ...], state: dict[str, str]) -> tuple[int, str]:
    argv = tuple(state.get(word, word) for word in argv if word not in WRITES_THE_REPOSITORY)
    stdin = command.stdin or STDIN.get(command.text)
    result = CliRunner().invoke(build_cli(), list(argv), input=stdin, catch_exceptions=True)
    if command.stdout_to:
        Path(command.stdout_to).write_text(result.stdout, encoding="utf-8")
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        output += f"\n{type(result.exception).__name__}: {result.exception}"
    return result.exit_code, output


@pytest.mark.slow
def test_every_concrete_command_runs(workdir: Path) -> None:
    """All of them in one test, in document order (a block's commands build on each other: users, tokens)."""
    state: dict[str, str] = {}
    failures: list[str] = []
    timings: list[tuple[float, str]] = []
    for command, argv in RUNNABLE:
        reason = SKIPPED.get((command.path, command.text))
        if reason:
            continue
        start = time.perf_counter()
        code, output = run_documented(command, argv, state)
        timings.append((time.perf_counter() - start, command.id))
        if command.argv[:2] == ("tokens", "create") and code == 0:
            prefix = re.search(r"cpt_[A-Za-z0-9]{8}", output)
            if prefix:
                state[TOKEN_PREFIX_EXAMPLE] = prefix.group(0)
        expected = EXPECTED_EXIT.get(command.text, 0)
        if code != expected:
            ran = shlex.join(argv)
            failures.append(
                f"{command.id}: exit {code} (expected {expected}): clusterplan {ran}\n{output[-800:]}"
            )
    slowest = ", ".join(f"{where} {s:.1f} s" for s, where in sorted(timings, reverse=True)[:3])
    assert not failures, "\n\n".join(failures) + f"\n(slowest: {slowest})"
