"""`clusterplan validate …`: replay published measurements against the models.

Other modules attach their own subcommands to `validate_app` inside their `register`, e.g.
`from app.cli.commands.validate import validate_app; validate_app.command("collectives")(fn)`.
This module registers the group on the root CLI once and adds `training-runs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.output import to_json

validate_app = typer.Typer(
    help="Replay published measurements and report prediction errors.", no_args_is_help=True
)


def register(root: typer.Typer) -> None:
    root.add_typer(validate_app, name="validate")


@validate_app.command(
    "training-runs",
    help="Predict each row's measured metric of a training-runs CSV (columns as validation/training_runs.csv) "
    "and report errors per row and in summary.",
)
def training_runs(
    csv_file: Annotated[
        Path, typer.Argument(dir_okay=False, help="CSV with the columns of validation/training_runs.csv")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document (rows + summary)")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="also write a predicted-vs-measured PNG to this path")
    ] = None,
) -> None:
    from app.validation.repeats import render_repeats, repeat_groups
    from app.validation.training_runs import load_rows, render_table, replay, write_plot
    from app.validation.weak_scaling import render_series, weak_scaling_series

    if not csv_file.exists():
        raise FileNotFoundError(f"file not found: {csv_file}")
    rows = load_rows(csv_file)
    report = replay(rows)
    if plot is not None:
        write_plot(report, plot)
    if as_json:
        typer.echo(to_json(report.to_dict(), indent=2))
    else:
        # text only: the --json document keeps its documented shape
        typer.echo(
            render_table(report)
            + render_repeats(repeat_groups(rows))
            + render_series(weak_scaling_series(rows, report))
        )


@validate_app.command(
    "accuracy",
    help="Replay training-run CSVs and print, per kind of run, how far estimates were from the measured step "
    "times: the accuracy bands every estimate reports (app/catalog/accuracy.json).",
)
def accuracy(
    unseen: Annotated[
        list[Path],
        typer.Argument(dir_okay=False, help="CSVs of runs outside the development set (the bands' basis)"),
    ],
    development: Annotated[
        list[Path] | None,
        typer.Option(
            "--development",
            dir_okay=False,
            help="CSV of the development set (compared, pooled when too few unseen)",
        ),
    ] = None,
    comparisons: Annotated[
        list[Path] | None,
        typer.Option(
            "--comparisons",
            dir_okay=False,
            help="CSV outside the development set used only for the layout comparisons (ranking resolution), "
            "e.g. a layout sweep of one system",
        ),
    ] = None,
    whole_runs: Annotated[
        list[Path] | None,
        typer.Option(
            "--whole-runs",
            dir_okay=False,
            help="training-totals CSV of whole pre-training runs (GPU-hours), which widen the time-to-train range",
        ),
    ] = None,
    collectives: Annotated[
        list[Path] | None,
        typer.Option(
            "--collectives",
            dir_okay=False,
            help="collectives CSV of the development set (nccl-tests style rows; compared, pooled when too few "
            "held out)",
        ),
    ] = None,
    collectives_heldout: Annotated[
        list[Path] | None,
        typer.Option(
            "--collectives-heldout",
            dir_okay=False,
            help="held-out collectives CSV: the basis of the collective-time bands",
        ),
    ] = None,
    write: Annotated[
        bool,
        typer.Option("--write", help="write the table to app/catalog/accuracy.json for estimates to use"),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the table as JSON")] = False,
) -> None:
    from app.catalog import ACCURACY_FILE, accuracy_table
    from app.validation.accuracy import build_table, dumps, render

    files = [*(comparisons or []), *(whole_runs or []), *(collectives or []), *(collectives_heldout or [])]
    for path in [*unseen, *(development or []), *files]:
        if not path.exists():
            raise FileNotFoundError(f"file not found: {path}")
    table = build_table(
        development or [],
        unseen,
        comparisons or [],
        whole_runs or [],
        collectives or [],
        collectives_heldout or [],
    )
    if write:
        ACCURACY_FILE.write_text(dumps(table), encoding="utf-8")
        accuracy_table.cache_clear()
    typer.echo(dumps(table) if as_json else render(table))


@validate_app.command(
    "region",
    help="Replay training-run CSVs and print the validated region: which kinds of layout published runs "
    "cover (app/catalog/validated_region.json); the planner recommends the fastest layout inside it.",
)
def region(
    files: Annotated[
        list[Path],
        typer.Argument(dir_okay=False, help="CSVs with the columns of validation/training_runs.csv"),
    ],
    write: Annotated[
        bool,
        typer.Option("--write", help="write the region to app/catalog/validated_region.json for the planner"),
    ] = False,
) -> None:
    from app.catalog import REGION_FILE, validated_region
    from app.validation.region import build_region, dumps

    for path in files:
        if not path.exists():
            raise FileNotFoundError(f"file not found: {path}")
    built = build_region(files)
    if write:
        REGION_FILE.write_text(dumps(built), encoding="utf-8")
        validated_region.cache_clear()
    typer.echo(dumps(built), nl=False)


@validate_app.command(
    "seed-memory",
    help="The seed article's memory formula beside the estimator's breakdown, term by term (the docs' table).",
)
def seed_memory(
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
) -> None:
    from app.validation.seed_memory import claims, render_markdown

    results = claims()
    if as_json:
        typer.echo(to_json({"layouts": [c.to_dict() for c in results]}))
        return
    typer.echo(render_markdown(results))
