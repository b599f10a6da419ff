"""Plan saves beside planner searches, and liveness under a search flood, against a real `clusterplan serve`.

    python -m benchmarks.load.contention                          # SQLite, 20 s per phase
    python -m benchmarks.load.contention --backend postgres       # a fresh PostgreSQL database, dropped after
    python -m benchmarks.load.contention --duration 10 --out contention.json

Three phases, each `locust --headless` for --duration seconds after ramp-up (loopback only):
1. `saves`: 10 closed-loop clients saving revisions of one plan with a plans:write token (the baseline);
2. `saves+planners`: the same 10 savers beside 10 planner clients running `POST /api/v1/layout-search` with one
   read-only token (a refused search, 429 from the per-caller cap, is waited out for its Retry-After);
3. `healthz+30 searches`: 30 planner clients with that token and one /healthz probe every 50 ms.
Printed: save throughput and p99 in phases 1 and 2 and their ratios, and the probe's p99 in phase 3,
against the targets (save p99 <= 1.5 s beside planners; healthz p99 < 100 ms).

The server keeps all its middleware and defaults except the API rate limit, switched off
(CLUSTERPLAN_RATE_LIMIT_PER_MINUTE=0): 10 savers on one token send far more than 600 requests a minute,
and the point is the database and the CPU, not the limiter's refusals. The per-caller CPU cap stays on.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from benchmarks.load.provision import provision
from benchmarks.load.run import LOCUSTFILE, ROOT, free_port, start, stop

POSTGRES_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
# The targets (docs/constants.md#contention-targets; see docs/performance.md, "Saves beside planner searches").
SAVE_P99_TARGET_MS = 1500
HEALTHZ_P99_TARGET_MS = 100
PHASES = [
    ("saves", ["PlanSaveUser"], 10),
    ("saves+planners", ["PlanSaveUser", "PlanSearchUser"], 20),  # equal weights: 10 of each
    ("healthz+30 searches", ["PlanSearchUser", "HealthUser"], 31),  # HealthUser.fixed_count = 1
]


def create_postgres_database(admin_url: str) -> str:
    name = f"cp_load_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(admin_url: str, url: str) -> None:
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    engine.dispose()


def run_phase(
    classes: list[str], users: int, host: str, duration_s: int, prefix: Path, env: dict[str, str]
) -> Any:
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
        "-u", str(users), "-r", str(users), "-t", f"{duration_s}s", "--reset-stats",
        "--host", host, "--csv", str(prefix), "--only-summary", "--loglevel", "WARNING", *classes,
    ]  # fmt: skip
    subprocess.run(command, cwd=ROOT, env=env, check=False, capture_output=True, timeout=duration_s + 120)
    with Path(f"{prefix}_stats.csv").open() as handle:
        return {row["Name"]: summarise(row) for row in csv.DictReader(handle) if row["Name"] != "Aggregated"}


def summarise(row: dict[str, str]) -> dict[str, Any]:
    def number(key: str) -> float | None:  # locust writes N/A when nothing completed
        try:
            return round(float(row[key]), 1)
        except ValueError:
            return None

    return {
        "requests": int(row["Request Count"]),
        "failures": int(row["Failure Count"]),
        "throughput_rps": number("Requests/s"),
        "p50_ms": number("50%"),
        "p99_ms": number("99%"),
        "max_ms": number("Max Response Time"),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def verdicts(results: dict[str, Any]) -> dict[str, Any]:
    base = results["saves"].get("save", {})
    mixed = results["saves+planners"].get("save", {})
    health = results["healthz+30 searches"].get("healthz", {})
    return {
        "save_throughput_ratio": ratio(mixed.get("throughput_rps"), base.get("throughput_rps")),
        "save_p99_ratio": ratio(mixed.get("p99_ms"), base.get("p99_ms")),
        "save_p99_with_planners_ms": mixed.get("p99_ms"),
        "save_p99_target_ms": SAVE_P99_TARGET_MS,
        "save_p99_met": (mixed.get("p99_ms") or float("inf")) <= SAVE_P99_TARGET_MS,
        "healthz_p99_ms": health.get("p99_ms"),
        "healthz_p99_target_ms": HEALTHZ_P99_TARGET_MS,
        "healthz_p99_met": (health.get("p99_ms") or float("inf")) < HEALTHZ_P99_TARGET_MS,
    }


def serve_env(database_url: str, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "CLUSTERPLAN_DATABASE_URL": database_url,
        "CLUSTERPLAN_ENVIRONMENT": "production",
        "CLUSTERPLAN_SECRET_KEY": secrets.token_urlsafe(48),
        "CLUSTERPLAN_LOG_LEVEL": "warning",
        "CLUSTERPLAN_HOST": "127.0.0.1",
        "CLUSTERPLAN_PORT": str(port),
        "CLUSTERPLAN_RATE_LIMIT_PER_MINUTE": "0",
    }


def measure(database_url: str, duration_s: int, tmp: Path) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = serve_env(database_url, port)
    command = [sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)]
    server = start(command, env, tmp / "serve.log", f"{url}/healthz")
    try:
        tokens = provision(database_url)
        scenario = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
        created = httpx.post(
            f"{url}/api/v1/plans",
            json={"name": "contention", "scenario": scenario},
            headers={"Authorization": f"Bearer {tokens.saver}"},
            timeout=30,
        )
        created.raise_for_status()
        env.update(
            LOAD_PLAN_ID=created.json()["id"],
            LOAD_SAVER_TOKEN=tokens.saver,
            LOAD_PLANNER_TOKEN=tokens.planner,
        )
        results: dict[str, Any] = {}
        for name, classes, users in PHASES:
            results[name] = run_phase(classes, users, url, duration_s, tmp / name.replace("+", "_"), env)
            print(f"{name:22s} {json.dumps(results[name])}", flush=True)
    finally:
        stop(server)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--postgres-admin-url", default=POSTGRES_ADMIN_URL, help="where to create the database"
    )
    parser.add_argument("--duration", type=int, default=20, help="seconds per phase, after ramp-up")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="clusterplan-contention-"))
    if args.backend == "postgres":
        database_url = create_postgres_database(args.postgres_admin_url)
    else:
        database_url = f"sqlite:///{tmp / 'contention.db'}"
    try:
        results = measure(database_url, args.duration, tmp)
    finally:
        if args.backend == "postgres":
            drop_postgres_database(args.postgres_admin_url, database_url)
    summary = {
        "settings": {
            "backend": args.backend,
            "duration_s": args.duration,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "results": results,
        "verdicts": verdicts(results),
    }
    print(json.dumps(summary["verdicts"], indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
