"""Entry point of the `clusterplan` command. Sub-commands live in app/cli/commands/, one module each.

Errors a user can cause (bad input, unknown names) print one clear message and exit with status 2;
they never show a traceback.
"""

from __future__ import annotations

import sys

import typer

from app.cli.errors import UserError
from app.core.errors import SpecError
from app.discovery import iter_modules
from app.errors import NotFoundError


def build_cli() -> typer.Typer:
    root = typer.Typer(
        name="clusterplan",
        help="Cluster capacity and cost planning for LLM training.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    for module in iter_modules("app.cli.commands"):
        register = getattr(module, "register", None)
        if register is not None:
            register(root)
    return root


def main(argv: list[str] | None = None) -> None:
    cli = build_cli()
    try:
        cli(args=argv, prog_name="clusterplan", standalone_mode=True)
    except SpecError as exc:
        typer.echo("error: invalid input:", err=True)
        for problem in exc.problems:
            typer.echo(f"  - {problem.field}: {problem.message}", err=True)
        sys.exit(2)
    except (NotFoundError, UserError, FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


__all__ = ["UserError", "build_cli", "main"]

if __name__ == "__main__":
    main()
