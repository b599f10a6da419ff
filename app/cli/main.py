"""Entry point of the `clusterplan` command. Sub-commands live in app/cli/commands/, one module each.

Errors a user can cause (bad input, unknown names, a file that is missing, unreadable or a directory, an
output pipe closed early as in `clusterplan … | head`) print one line (or one list of problems) on stderr
and exit with status 2; they never show a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
from typer.core import TyperGroup

from app.cli.errors import UserError
from app.core.errors import SpecError
from app.discovery import iter_modules
from app.errors import NotFoundError

EXIT_USER_ERROR = 2  # the status click itself uses for usage errors


class OutputClosed(Exception):
    """stdout was closed by its reader; raised instead of BrokenPipeError, which typer swallows (exit 1)."""


class ClusterplanGroup(TyperGroup):
    def invoke(self, ctx: Any) -> Any:  # typer's vendored click.Context
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise OutputClosed() from exc


def build_cli() -> typer.Typer:
    root = typer.Typer(
        name="clusterplan",
        help="Cluster capacity and cost planning for LLM training.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        cls=ClusterplanGroup,
    )
    for module in iter_modules("app.cli.commands"):
        register = getattr(module, "register", None)
        if register is not None:
            register(root)
    return root


def os_error_message(exc: OSError) -> str:
    """'PATH: reason' for an OS error about a file (e.g. 'examples: Is a directory'), else its own text."""
    reason = exc.strerror or str(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason


def _quit_on_closed_output() -> None:
    """Say why on stderr, and point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    typer.echo("error: output closed before everything was written (broken pipe)", err=True)
    sys.exit(EXIT_USER_ERROR)


def main(argv: list[str] | None = None) -> None:
    cli = build_cli()
    try:
        cli(args=argv, prog_name="clusterplan", standalone_mode=True)
    except SpecError as exc:
        typer.echo("error: invalid input:", err=True)
        for problem in exc.problems:
            typer.echo(f"  - {problem.field}: {problem.message}", err=True)
        sys.exit(EXIT_USER_ERROR)
    except OutputClosed:
        _quit_on_closed_output()
    except OSError as exc:  # missing file, a directory given for a file, permission denied, disk full …
        typer.echo(f"error: {os_error_message(exc)}", err=True)
        sys.exit(EXIT_USER_ERROR)
    except (NotFoundError, UserError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USER_ERROR)
    except RecursionError:  # a JSON or YAML input nested past the parser's depth (about 1,000 levels)
        typer.echo("error: invalid input: the file is nested too deeply to read", err=True)
        sys.exit(EXIT_USER_ERROR)


__all__ = ["UserError", "build_cli", "main"]

if __name__ == "__main__":
    main()
