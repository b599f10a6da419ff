"""`clusterplan validate training-totals FILE [--json]`: published whole-run GPU-hours vs the planner's headline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.output import to_json
from app.core.goodput import FAIL_SLOW_DEFAULT_TEXT


def register(root: typer.Typer) -> None:
    from app.cli.commands.validate import validate_app

    validate_app.command(
        "training-totals",
        help="For each complete pre-training run of a training-totals CSV (tests/data/training_totals.csv): the "
        "planner's best layout and the stated one turned into GPU-hours with goodput, against the published total.",
    )(training_totals)


def training_totals(
    csv_file: Annotated[
        Path, typer.Argument(dir_okay=False, help="CSV with the columns of tests/data/training_totals.csv")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print {rows, summary} as JSON")] = False,
    fail_slow: Annotated[
        float | None,
        typer.Option(
            "--fail-slow",
            min=1.0,
            max=10.0,
            help=f"the goodput model's fail-slow slowdown for the wall-clock hours (default: {FAIL_SLOW_DEFAULT_TEXT}; "
            "1 counts failures, checkpoints and restarts alone), to see how the figures depend on it",
        ),
    ] = None,
) -> None:
    from app.validation.training_totals import load_rows, render_table, replay

    if not csv_file.exists():
        raise FileNotFoundError(f"file not found: {csv_file}")
    report = replay(load_rows(csv_file), fail_slow)
    if as_json:
        typer.echo(to_json(report.to_dict(), indent=2))
    else:
        typer.echo(render_table(report))
