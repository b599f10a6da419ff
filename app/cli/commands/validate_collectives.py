"""`clusterplan validate collectives FILE.csv [--json] [--plots DIR]`: the network model against measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.output import to_json


class UserError(ValueError):
    """Bad command-line input; a ValueError so `clusterplan` prints it and exits 2 even under `python -m`."""


def register(root: typer.Typer) -> None:
    from app.cli.commands.validate import validate_app

    validate_app.command(
        "collectives",
        help="Predict busbw for every row of a collectives CSV (columns as validation/collectives.csv) from specs "
        "alone and report errors per row and in summary (all sizes; messages ≥ 64 MiB).",
    )(collectives)


def collectives(
    csv_file: Annotated[
        Path, typer.Argument(dir_okay=False, help="CSV with the columns of validation/collectives.csv")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document (rows + summary)")] = False,
    plots: Annotated[Path | None, typer.Option(help="write busbw-vs-size PNG plots into this folder")] = None,
) -> None:
    from app.validation.collectives import render_table, validate_file, write_plots

    if not csv_file.exists():
        raise UserError(f"file not found: {csv_file}")
    report = validate_file(csv_file)
    if plots is not None:
        write_plots(report, plots)
    if as_json:
        typer.echo(to_json(report.to_json(), indent=2))
    else:
        typer.echo(render_table(report))
