"""`clusterplan agent --server URL --token-file FILE`: run the benchmark node agent.

The token also comes from CLUSTERPLAN_NODE_TOKEN or --token; a command-line argument shows in `ps` to every
user of the node, so the file or the environment is the safer way to pass it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(root: typer.Typer) -> None:
    root.command("agent", help="Run the node agent: register, heartbeat, claim and run benchmark jobs.")(
        agent
    )


def agent(
    server: Annotated[str, typer.Option(help="ClusterPlan server URL, e.g. http://planner:8000")],
    token: Annotated[
        str | None,
        typer.Option(
            envvar="CLUSTERPLAN_NODE_TOKEN",
            help="the node token (cpn_…) from the admin; prefer --token-file or the environment variable, "
            "since a command-line argument is visible to every user of the machine (ps)",
        ),
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(help="read the node token from this file (e.g. mode 0600)")
    ] = None,
    poll_interval: Annotated[float, typer.Option(min=0.1, help="seconds between claims when idle")] = 2.0,
    max_auth_failures: Annotated[
        int, typer.Option(min=0, help="give up after this many 401s (0 = never)")
    ] = 0,
    exit_when_idle: Annotated[bool, typer.Option(help="exit when no job is waiting")] = False,
    max_jobs: Annotated[int, typer.Option(min=0, help="exit after this many jobs (0 = run forever)")] = 0,
    work_dir: Annotated[str | None, typer.Option(help="where result files are kept")] = None,
) -> None:
    from app.agent import Agent

    token = _node_token(token, token_file)
    code = Agent(server, token, poll_interval, max_auth_failures, exit_when_idle, max_jobs, work_dir).run()
    raise typer.Exit(code)


def _node_token(token: str | None, token_file: Path | None) -> str:
    """The token from --token-file, else --token / CLUSTERPLAN_NODE_TOKEN; exactly one source."""
    from app.cli.main import UserError

    if token_file is not None and token:
        raise UserError("give the node token once: --token-file, or --token / CLUSTERPLAN_NODE_TOKEN")
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise UserError(f"cannot read the token file {token_file}: {exc.strerror}") from None
    if not token:
        raise UserError("no node token: give --token-file FILE or set CLUSTERPLAN_NODE_TOKEN")
    if not token.startswith("cpn_"):
        raise UserError(
            "a node token starts with cpn_ (create one with POST /api/v1/nodes or the Benchmarks page)"
        )
    return token
