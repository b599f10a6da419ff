"""`clusterplan catalog …`: tables, JSON, HF import, and clean errors (one message, exit 2, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from tests.conftest import ROOT, configure_app_database
from tests.paths import DATA_DIR

HF_DIR = DATA_DIR / "hf"


@pytest.fixture
def cli_db(sqlite_app_url: str) -> str:
    configure_app_database(sqlite_app_url)
    return sqlite_app_url


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_list_gpus_table_has_units(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "list", "gpus")
    assert code == 0
    header = out.splitlines()[0]
    assert "BF16 TFLOP/s" in header and "HBM GiB" in header and "scale-up GB/s" in header
    h100 = next(line for line in out.splitlines() if line.startswith("H100-SXM "))
    assert "989" in h100 and "700" in h100


@pytest.mark.parametrize("kind", ["gpus", "models", "interconnects", "prices"])
def test_list_json_is_the_api_envelope(cli_db: str, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    code, out, _ = run(capsys, "catalog", "list", kind, "--json")
    assert code == 0
    body = json.loads(out)
    assert set(body) == {"data", "count"} and body["count"] == len(body["data"]) > 10


def test_list_prices_filters(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "catalog", "list", "prices", "--json", "--gpu", "h100", "--pricing-model", "spot"
    )
    rows = json.loads(out)["data"]
    assert code == 0 and rows
    assert all(r["gpu_name"] == "H100-SXM" and "spot" in r["pricing_model"] for r in rows)
    code, out, _ = run(capsys, "catalog", "list", "models", "--search", "qwen3")
    assert code == 0 and "Qwen3-235B-A22B" in out and "Llama" not in out


def test_show_resolves_aliases(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "show", "model", "LLAMA2-70B", "--json")
    assert code == 0
    model = json.loads(out)
    assert model["name"] == "Llama-2-70B" and model["spec"]["num_kv_heads"] == 8
    code, out, _ = run(capsys, "catalog", "show", "interconnect", "ib ndr")
    assert code == 0 and "InfiniBand-NDR" in out and "spec (SI units)" in out


def test_import_hf_prints_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "import-hf", str(HF_DIR / "Qwen3-30B-A3B.json"), "--json")
    assert code == 0
    spec = json.loads(out)
    assert spec["name"] == "Qwen3-30B-A3B" and spec["moe"]["num_experts"] == 128 and spec["head_dim"] == 128
    code, out, _ = run(capsys, "catalog", "import-hf", str(HF_DIR / "gpt2.json"), "--name", "my-gpt2")
    assert code == 0 and "my-gpt2" in out and "gelu" in out


def test_import_hf_save_stores_a_user_model(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    code, _, err = run(
        capsys, "catalog", "import-hf", str(HF_DIR / "Mistral-7B-v0.1.json"), "--name", name, "--save"
    )
    assert code == 0 and f"saved model {name!r}" in err
    code, out, _ = run(capsys, "catalog", "show", "model", name, "--json")
    assert code == 0 and json.loads(out)["builtin"] is False
    # saving the same name twice is a clean error
    code, _, err = run(
        capsys, "catalog", "import-hf", str(HF_DIR / "Mistral-7B-v0.1.json"), "--name", name, "--save"
    )
    assert code == 2 and "already exists" in err
    from sqlmodel import Session

    from app.db import get_engine
    from app.services import catalog as service

    with Session(get_engine()) as session:
        service.delete_model(session, name)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("catalog", "show", "gpu", "H100-SMX"), "did you mean: H100-SXM"),
        (("catalog", "show", "cluster", "x"), "expected gpu, model or interconnect"),
        (("catalog", "import-hf", "no-such-config.json"), "no such file"),
    ],
)
def test_bad_input_is_one_clean_message(
    cli_db: str, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err and "Traceback" not in err


def test_malformed_config_lists_every_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config: dict[str, Any] = json.loads((HF_DIR / "Llama-3.1-8B.json").read_text())
    del config["vocab_size"]
    config["num_key_value_heads"] = 5
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, _, err = run(capsys, "catalog", "import-hf", str(path))
    assert code == 2
    assert "vocab_size: missing" in err and "num_key_value_heads: 5 does not divide" in err
    path.write_text("{not json")
    code, _, err = run(capsys, "catalog", "import-hf", str(path))
    assert code == 2 and "not valid JSON" in err


def test_the_installed_command_exits_2_without_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "CLUSTERPLAN_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}"}
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "catalog", "list", "routers"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "routers" in proc.stderr
