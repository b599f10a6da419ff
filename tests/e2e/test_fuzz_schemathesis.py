"""Fuzz the live OpenAPI schema with schemathesis, on SQLite and on PostgreSQL: zero 5xx, zero schema violations.

A real `clusterplan serve` on a fresh, migrated and seeded database of each backend. The fuzzer sends an
administrator's bearer token (created in that database before the server starts), so every write operation is
reachable; node-agent routes answer 401 without a node token, which is not a failure.

What is generated: the examples in the schema, the coverage phase (boundary values of every constraint, nulls,
wrong types, missing and unexpected fields) and random cases of both kinds (`--mode all`: valid and invalid
input), strings with NUL bytes included (`--generation-allow-x00 true`, and tests/e2e/schemathesis_hooks.py ends
one string of some path, query and body values with NUL). Bounded: a fixed seed, FUZZ_EXAMPLES
cases per operation and phase, no shrinking; about two minutes per database on two cores. On failure the message
carries schemathesis' summary with a curl command reproducing each failing request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.auth_support import issue_token
from tests.conftest import start_live_server

pytestmark = pytest.mark.slow

FUZZ_EXAMPLES = int(os.environ.get("CLUSTERPLAN_FUZZ_EXAMPLES", "5"))
FUZZ_SEED = int(os.environ.get("CLUSTERPLAN_FUZZ_SEED", "1"))
CHECKS = "not_a_server_error,response_schema_conformance"
FUZZ_ADMIN = "fuzz-admin@example.com"
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")  # NUL bytes in path, query and body values
TIMEOUT_S = 600  # a hung run fails the test instead of the CI job
# The fuzzer is one caller sending thousands of requests a minute: with the server's rate limits most of them
# would be answered 429 and never reach a route.
UNLIMITED = {
    "CLUSTERPLAN_RATE_LIMIT_PER_MINUTE": "100000000",
    "CLUSTERPLAN_LOGIN_RATE_LIMIT_PER_MINUTE": "100000000",
}


def schemathesis_command(url: str, token: str, report: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{url}/api/v1/openapi.json",
        "--checks",
        CHECKS,
        "--header",
        f"Authorization: Bearer {token}",
        "--mode",
        "all",
        "--generation-allow-x00",
        "true",
        "--max-examples",
        str(FUZZ_EXAMPLES),
        "--seed",
        str(FUZZ_SEED),
        "--no-shrink",
        "--workers",
        "1",
        "--phases",
        "examples,coverage,fuzzing",
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
        "--no-color",
        "--output-sanitize",
        "false",  # print the exact failing requests (fields named *token* would be masked)
        "--report",
        "json",
        "--report-json-path",
        str(report),
    ]


def test_schemathesis_finds_no_server_errors_or_schema_violations(db_url: str, tmp_path: Path) -> None:
    token = issue_token(FUZZ_ADMIN, ["admin"], is_admin=True)
    server = start_live_server(db_url, tmp_path, UNLIMITED)
    report = tmp_path / "schemathesis.json"
    try:
        result = subprocess.run(
            schemathesis_command(server.url, token, report),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)},
        )
    finally:
        server.stop()
    output = result.stdout + result.stderr
    summary = output[output.find("FAILURES") :] if "FAILURES" in output else output[-6000:]
    assert "API Operations:" in output, output[-3000:]
    operations = int(output.split("Tested:")[1].split()[0]) if "Tested:" in output else 0
    assert operations >= 20, output[-3000:]  # the whole API was loaded and exercised
    assert result.returncode == 0, summary[:20000]
    assert report.exists() and json.loads(report.read_text())
