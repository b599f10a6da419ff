"""`clusterplan validate costs FILE [--json]`: replay published cost and reliability figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.output import to_json


def register(root: typer.Typer) -> None:
    from app.cli.commands.validate import validate_app

    validate_app.command(
        "costs",
        help="Replay a JSON-lines case file (method, inputs, expected, tolerance_pct, source) against the cost, "
        "goodput and checkpoint models; format in docs/cost.md.",
    )(costs)


def costs(
    case_file: Annotated[
        Path, typer.Argument(dir_okay=False, help="JSON lines, e.g. tests/data/cost_cases.jsonl")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print {rows, summary} as JSON")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="exit 1 when any case is outside tolerance")
    ] = False,
) -> None:
    from app.validation.costs import load_cases, render_table, replay

    if not case_file.exists():
        raise FileNotFoundError(f"file not found: {case_file}")
    report = replay(load_cases(case_file))
    if as_json:
        typer.echo(to_json(report.to_dict(), indent=2))
    else:
        typer.echo(render_table(report))
    if strict and report.passed < len(report.results):
        raise typer.Exit(1)
