"""Bounded load test against loopback: throughput and p99 of the estimate and plan endpoints vs a bare endpoint.

    python -m benchmarks.load.run                      # 100 clients, 20 s per endpoint, 1 uvicorn worker
    python -m benchmarks.load.run --users 100 --duration 30 --workers 2 --out results.json

Both servers run the same uvicorn command line (host, workers, log level, no access log); ClusterPlan keeps
all its middleware (security headers, request logs, metrics, rate limits) and a fresh, migrated and seeded
SQLite database (or --database-url), with two limits switched off: the API rate limit
(CLUSTERPLAN_RATE_LIMIT_PER_MINUTE=0) and the per-caller cap on computations in flight
(CLUSTERPLAN_CPU_REQUESTS_PER_CALLER=0), since all N clients are one caller (an administrator's token made
in the database before the run) and the point is the server's throughput, not its refusals. Each endpoint is driven in turn by `locust --headless` with N
closed-loop clients (no think time); statistics are reset once all clients are running. The bare endpoint
is measured first and last, and the mean of the two is the baseline.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.load.provision import provision

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = Path(__file__).with_name("locustfile.py")
TARGETS = [
    ("bare", "BareUser"),
    ("estimate", "EstimateUser"),
    ("estimate_varied", "EstimateVariedUser"),
    ("plan_get", "PlanGetUser"),
    ("plan_list", "PlanListUser"),
    ("plan_revise", "PlanReviseUser"),
    ("bare_again", "BareUser"),
]
REQUIRED_RATIO = 0.70


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def uvicorn_command(app_path: str, port: int, workers: int) -> list[str]:
    return [
        sys.executable, "-m", "uvicorn", app_path,
        "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
        "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip


def start(command: list[str], env: dict[str, str], log: Path, health_url: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{command} exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(health_url, timeout=1).status_code < 500:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{command} did not start: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_locust(
    user_class: str, host: str, users: int, duration_s: int, prefix: Path, env: dict[str, str]
) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
        "-u", str(users), "-r", str(users), "-t", f"{duration_s}s", "--reset-stats",
        "--host", host, "--csv", str(prefix), "--only-summary", "--loglevel", "WARNING", user_class,
    ]  # fmt: skip
    subprocess.run(command, cwd=ROOT, env=env, check=False, capture_output=True, timeout=duration_s + 120)
    with Path(f"{prefix}_stats.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    total = next(r for r in rows if r["Name"] == "Aggregated")

    def number(key: str) -> float | None:  # locust writes N/A when nothing completed
        try:
            return round(float(total[key]), 1)
        except ValueError:
            return None

    return {
        "requests": int(total["Request Count"]),
        "failures": int(total["Failure Count"]),
        "throughput_rps": number("Requests/s"),
        "p50_ms": number("50%"),
        "p99_ms": number("99%"),
        "max_ms": number("Max Response Time"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=100, help="concurrent closed-loop clients")
    parser.add_argument("--duration", type=int, default=20, help="seconds per endpoint, after ramp-up")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers, same for both servers")
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file")
    parser.add_argument("--only", default="", help="comma-separated subset of targets")
    parser.add_argument("--app", default="app.asgi:app", help="ClusterPlan's ASGI app (import path)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="clusterplan-load-"))
    database_url = args.database_url or f"sqlite:///{tmp / 'load.db'}"
    env = {
        **os.environ,
        "CLUSTERPLAN_DATABASE_URL": database_url,
        "CLUSTERPLAN_ENVIRONMENT": "production",
        "CLUSTERPLAN_SECRET_KEY": secrets.token_urlsafe(48),
        "CLUSTERPLAN_LOG_LEVEL": "warning",
        "CLUSTERPLAN_RATE_LIMIT_PER_MINUTE": "0",
        "CLUSTERPLAN_CPU_REQUESTS_PER_CALLER": "0",
    }
    subprocess.run([sys.executable, "-m", "app.cli.main", "db", "upgrade"], cwd=ROOT, env=env, check=True,
                   capture_output=True)  # fmt: skip
    app_port, bare_port = free_port(), free_port()
    app_url, bare_url = f"http://127.0.0.1:{app_port}", f"http://127.0.0.1:{bare_port}"
    servers = [
        start(uvicorn_command(args.app, app_port, args.workers), env, tmp / "app.log", f"{app_url}/healthz"),
        start(uvicorn_command("benchmarks.load.bare_app:app", bare_port, args.workers), env, tmp / "bare.log",
              f"{bare_url}/bare"),
    ]  # fmt: skip
    try:
        env["LOAD_TOKEN"] = provision(database_url).admin
        admin = {"Authorization": f"Bearer {env['LOAD_TOKEN']}"}
        scenario = json.loads((ROOT / "examples" / "llama3-70b-64xh100.json").read_text())
        created = httpx.post(
            f"{app_url}/api/v1/plans",
            json={"name": "load test", "scenario": scenario},
            headers=admin,
            timeout=30,
        )
        created.raise_for_status()
        env["LOAD_PLAN_ID"] = created.json()["id"]
        wanted = set(args.only.split(",")) if args.only else None
        results: dict[str, Any] = {}
        for target, user_class in TARGETS:
            if wanted and target not in wanted and not (target == "bare_again" and "bare" in wanted):
                continue
            host = bare_url if user_class == "BareUser" else app_url
            results[target] = run_locust(user_class, host, args.users, args.duration, tmp / target, env)
            print(f"{target:12s} {json.dumps(results[target])}", flush=True)
        revisions = httpx.get(
            f"{app_url}/api/v1/plans/{env['LOAD_PLAN_ID']}", headers=admin, timeout=30
        ).json()
    finally:
        for proc in servers:
            stop(proc)

    bare_runs = [results[k]["throughput_rps"] or 0.0 for k in ("bare", "bare_again") if k in results]
    summary: dict[str, Any] = {
        "settings": {
            "users": args.users,
            "duration_s": args.duration,
            "uvicorn_workers": args.workers,
            "database": database_url.split(":", 1)[0],
            "app": args.app,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "machine": platform.machine(),
        },
        "results": results,
        "latest_revision": revisions.get("latest_revision"),
    }
    if bare_runs and "estimate" in results:
        baseline = sum(bare_runs) / len(bare_runs)
        summary["estimate_vs_bare"] = round((results["estimate"]["throughput_rps"] or 0.0) / baseline, 3)
        summary["required_ratio"] = REQUIRED_RATIO
        if "estimate_varied" in results:
            varied = results["estimate_varied"]["throughput_rps"] or 0.0
            summary["estimate_varied_vs_bare"] = round(varied / baseline, 3)
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
