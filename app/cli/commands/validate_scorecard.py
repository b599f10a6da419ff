"""`clusterplan validate scorecard [--json] [--against FILE] [--write]`: every headline accuracy figure in one table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.output import to_json


def register(root: typer.Typer) -> None:
    from app.cli.commands.validate import validate_app

    validate_app.command(
        "scorecard",
        help="Replay every validation file (training runs, bands, whole runs, the optimism guard, collectives) "
        "and print each headline figure beside its data's role (development or held out), its target and, with "
        "--against, its change since a scorecard saved with --json.",
    )(scorecard)


def scorecard(
    as_json: Annotated[bool, typer.Option("--json", help="print {figures, summary} as JSON")] = False,
    against: Annotated[
        Path | None,
        typer.Option(
            "--against", dir_okay=False, help="a scorecard saved earlier with --json: add the change"
        ),
    ] = None,
    write: Annotated[
        bool,
        typer.Option(
            "--write", help="also write it to app/catalog/scorecard.json, which /catalog/accuracy shows"
        ),
    ] = False,
) -> None:
    from app.catalog import SCORECARD_FILE
    from app.validation.scorecard import build, dumps, read_previous, render, to_dict

    previous = read_previous(against) if against is not None else None
    figures = build()
    if write:
        SCORECARD_FILE.write_text(dumps(figures), encoding="utf-8")
    if as_json:
        typer.echo(to_json(to_dict(figures, previous), indent=2))
    else:
        typer.echo(render(figures, previous))
