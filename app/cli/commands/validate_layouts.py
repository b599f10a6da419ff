"""`clusterplan validate layouts FILE.csv [--json] [--all-sources]`: publishers' tuned layouts vs our ranking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.output import to_json


def register(root: typer.Typer) -> None:
    from app.cli.commands.validate import validate_app

    validate_app.command(
        "layouts",
        help="For each tuned configuration (Narayanan Table 1, Megatron-LM README, NeMo tables) of a training-runs "
        "CSV: is the publisher's layout in our top 5, and is our best predicted at least as fast?",
    )(layouts)


def layouts(
    csv_file: Annotated[
        Path, typer.Argument(dir_okay=False, help="CSV with the columns of validation/training_runs.csv")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print {cases, summary} as JSON")] = False,
    all_sources: Annotated[
        bool, typer.Option("--all-sources", help="every row with a layout, not only the tuned tables")
    ] = False,
    any_framework: Annotated[
        bool,
        typer.Option(
            "--any-framework", help="search every layout, not only what the publisher's framework ran"
        ),
    ] = False,
) -> None:
    from app.validation.layouts import load, render_table, replay_layouts

    if not csv_file.exists():
        raise FileNotFoundError(f"file not found: {csv_file}")
    report = replay_layouts(load(csv_file), all_sources, framework_limits=not any_framework)
    if as_json:
        typer.echo(to_json(report.to_dict(), indent=2))
    else:
        typer.echo(render_table(report))
