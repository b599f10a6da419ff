"""`clusterplan validate optimism [FILES...] [--json]`: the planner's best MFU against the best published one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.output import to_json


def register(root: typer.Typer) -> None:
    from app.cli.commands.validate import validate_app

    validate_app.command(
        "optimism",
        help="Group the published runs of training-run CSVs by model, GPU and dtype class; compare each group's "
        "best measured MFU with the planner's best layout for that run, and flag the planner's best where it "
        "beats the published one by more than the ranking resolution, with the mechanism.",
    )(optimism)


def optimism(
    csv_files: Annotated[
        list[Path] | None,
        typer.Argument(
            dir_okay=False,
            help="CSVs with the columns of tests/data/training_runs.csv (default: every training-run file, "
            "tests/data/training_runs*.csv)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print {groups, summary} as JSON")] = False,
) -> None:
    from app.validation.optimism import default_paths, read_runs, render_table, report

    paths = list(csv_files) if csv_files else default_paths()
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"file not found: {path}")
    rep = report(read_runs(paths))
    if as_json:
        typer.echo(to_json(rep.to_dict(), indent=2))
    else:
        typer.echo(render_table(rep))
