"""`clusterplan agent --server URL --token cpn_…`: run the benchmark node agent."""

from __future__ import annotations

from typing import Annotated

import typer


def register(root: typer.Typer) -> None:
    root.command("agent", help="Run the node agent: register, heartbeat, claim and run benchmark jobs.")(
        agent
    )


def agent(
    server: Annotated[str, typer.Option(help="ClusterPlan server URL, e.g. http://planner:8000")],
    token: Annotated[
        str, typer.Option(envvar="CLUSTERPLAN_NODE_TOKEN", help="the node token (cpn_…) from the admin")
    ],
    poll_interval: Annotated[float, typer.Option(min=0.1, help="seconds between claims when idle")] = 2.0,
    max_auth_failures: Annotated[
        int, typer.Option(min=0, help="give up after this many 401s (0 = never)")
    ] = 0,
    exit_when_idle: Annotated[bool, typer.Option(help="exit when no job is waiting")] = False,
    max_jobs: Annotated[int, typer.Option(min=0, help="exit after this many jobs (0 = run forever)")] = 0,
    work_dir: Annotated[str | None, typer.Option(help="where result files are kept")] = None,
) -> None:
    from app.agent import Agent

    if not token.startswith("cpn_"):
        from app.cli.main import UserError

        raise UserError(
            "a node token starts with cpn_ (create one with POST /api/v1/nodes or the Benchmarks page)"
        )
    code = Agent(server, token, poll_interval, max_auth_failures, exit_when_idle, max_jobs, work_dir).run()
    raise typer.Exit(code)
