"""`clusterplan serve` and `clusterplan db …`."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from app.settings import get_settings


def register(root: typer.Typer) -> None:
    root.command("serve", help="Apply migrations, seed the catalog, then serve the app with uvicorn.")(serve)
    db = typer.Typer(help="Database schema management (Alembic).", no_args_is_help=True)
    db.command("upgrade", help="Apply all migrations (creates the database if needed).")(db_upgrade)
    db.command(
        "downgrade", help="Revert migrations down to REVISION ('base' drops every table); asks first."
    )(db_downgrade)
    db.command("current", help="Show the revision(s) the database is at.")(db_current)
    root.add_typer(db, name="db")


def serve(
    host: Annotated[
        str | None, typer.Option(help="interface to bind (default from settings: 127.0.0.1)")
    ] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="TCP port (default 8000)")] = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help="uvicorn worker processes")] = 1,
    reload: Annotated[bool, typer.Option(help="reload on code changes (development)")] = False,
) -> None:
    import uvicorn

    from app.startup import display_base_url, prepare_database, sign_in_banner

    # Pass the chosen address to the app (and its workers) through the environment.
    if host:
        os.environ["CLUSTERPLAN_HOST"] = host
    if port:
        os.environ["CLUSTERPLAN_PORT"] = str(port)
    get_settings.cache_clear()
    settings = get_settings()
    prepare_database()
    # Printed before the workers start; the link's token is in the database, so every worker accepts it.
    typer.echo(sign_in_banner(display_base_url(settings.host, settings.port)))
    uvicorn.run(
        "app.asgi:app",
        host=settings.host,
        port=settings.port,
        workers=workers,
        reload=reload,
        log_level=settings.log_level,
        # Forwarded headers are read by the app itself, from CLUSTERPLAN_TRUSTED_PROXIES only.
        proxy_headers=False,
    )


def db_upgrade(
    revision: Annotated[str, typer.Argument(help="target revision")] = "heads",
) -> None:
    from app.startup import prepare_database

    prepare_database(revision)
    typer.echo(f"database at {revision}: {get_settings().resolved_database_url.split('@')[-1]}")


def db_downgrade(
    revision: Annotated[str, typer.Argument(help="target revision id, or 'base' to drop every table")],
    yes: Annotated[bool, typer.Option("--yes", help="do not ask for confirmation (scripts)")] = False,
) -> None:
    from app import migrate

    where = get_settings().resolved_database_url.split("@")[-1]
    question = f"downgrade {where} to {revision}? Tables and columns of the reverted migrations are lost"
    if not yes and not typer.confirm(question, default=False):
        typer.echo("not confirmed: the database is unchanged", err=True)
        raise typer.Exit(1)
    migrate.downgrade(revision=revision)
    typer.echo(f"database downgraded to {revision}")


def db_current() -> None:
    from alembic import command

    from app import migrate

    command.current(migrate.alembic_config())
