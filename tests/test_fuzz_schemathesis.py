"""Fuzz the live OpenAPI schema with schemathesis: zero 5xx responses, zero responses that break the schema.

A real `clusterplan serve` on a fresh SQLite file; the caller is the loopback first-run user, so every write
operation is reachable (node-agent routes answer 401 without a node token, which is not a failure).
Bounded: a fixed seed and FUZZ_EXAMPLES cases per operation and phase; no shrinking. On failure the
message carries schemathesis' summary with a curl command reproducing each failing request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import start_live_server

pytestmark = pytest.mark.slow

FUZZ_EXAMPLES = int(os.environ.get("CLUSTERPLAN_FUZZ_EXAMPLES", "5"))
FUZZ_SEED = int(os.environ.get("CLUSTERPLAN_FUZZ_SEED", "1"))
CHECKS = "not_a_server_error,response_schema_conformance"


def test_schemathesis_finds_no_server_errors_or_schema_violations(tmp_path: Path) -> None:
    server = start_live_server(f"sqlite:///{tmp_path / 'fuzz.db'}", tmp_path)
    report = tmp_path / "schemathesis.json"
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "schemathesis.cli",
                "run",
                f"{server.url}/api/v1/openapi.json",
                "--checks",
                CHECKS,
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
            ],
            capture_output=True,
            text=True,
            timeout=900,
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
