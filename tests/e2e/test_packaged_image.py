"""The container image's layout, run without Docker: what the Dockerfile builds is what these tests run.

CI has no Docker engine, so the image itself is never built here. These tests read the Dockerfile and repeat
its two stages with the same inputs: the build stage's COPY sources become a wheel (in a scratch folder, so the
checkout gains no build/ or egg-info), the runtime stage's COPYs become a resource folder, and the installed
wheel (not the checkout) serves the app from it. A data file left out of the wheel, a template folder the image
does not copy, or a code path that reads the source tree would fail here as it would in the image.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.resources import MIGRATIONS_DIR, STATIC_DIR, TEMPLATES_DIR
from tests.conftest import free_port
from tests.paths import EXAMPLES_DIR, ROOT

DOCKERFILE = ROOT / "Dockerfile"
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Stage:
    name: str
    copies: list[tuple[list[str], str]]  # (sources, destination) of each COPY from the build context
    env: dict[str, str]
    workdir: str
    lines: list[str]


def _logical_lines(text: str) -> list[str]:
    """Dockerfile instructions, one per line: comments dropped, backslash continuations joined."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out


def _env_pairs(arguments: str) -> dict[str, str]:
    return {k: v.strip('"') for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', arguments)}


def parse_stages(text: str) -> dict[str, Stage]:
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for line in _logical_lines(text):
        op, _, arguments = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            name = arguments.split(" AS ")[-1].strip() if " AS " in arguments else arguments
            current = Stage(name, [], {}, "/", [])
            stages[name] = current
            continue
        if current is None:
            continue
        current.lines.append(line)
        if op == "COPY" and "--from=" not in arguments:
            parts = [p for p in arguments.split() if not p.startswith("--")]
            current.copies.append((parts[:-1], parts[-1]))
        elif op == "ENV":
            current.env.update(_env_pairs(arguments))
        elif op == "WORKDIR":
            current = Stage(current.name, current.copies, current.env, arguments.strip(), current.lines)
            stages[current.name] = current
    return stages


@pytest.fixture(scope="module")
def stages() -> dict[str, Stage]:
    return parse_stages(DOCKERFILE.read_text())


def test_runtime_stage_copies_every_resource_folder(stages: dict[str, Stage]) -> None:
    runtime = stages["runtime"]
    resource_dir = runtime.env["CLUSTERPLAN_RESOURCE_DIR"]
    assert resource_dir == runtime.workdir, "the resource folder must be where the COPYs land"
    copied = {dest.rstrip("/").removeprefix("./"): sources for sources, dest in runtime.copies}
    for folder in (MIGRATIONS_DIR, TEMPLATES_DIR, STATIC_DIR):
        assert copied.get(folder.name) == [folder.name], f"the image does not copy {folder.name}/"


def test_image_command_and_healthcheck_exist(stages: dict[str, Stage]) -> None:
    runtime = stages["runtime"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    cmd = next(line for line in runtime.lines if line.upper().startswith("CMD "))
    found = re.search(r'\["(\w+)", "serve"\]', cmd)
    assert found and found.group(1) in scripts, f"the image's command is not `<script> serve`: {cmd}"
    health = next(line for line in runtime.lines if line.upper().startswith("HEALTHCHECK "))
    assert "/healthz" in health and "CLUSTERPLAN_PORT" in health and "CLUSTERPLAN_PORT" in runtime.env


def _build_wheel(stage: Stage, scratch: Path) -> Path:
    """The build stage: its COPY sources into a scratch context, `pip wheel` there (offline, no isolation)."""
    context = scratch / "context"
    context.mkdir()
    for sources, _dest in stage.copies:
        for source in sources:
            src = ROOT / source
            target = context / source
            if src.is_dir():
                shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, target)
    wheels = scratch / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*command, "--wheel-dir", str(wheels), str(context)], check=True, capture_output=True)
    (wheel,) = wheels.glob("clusterplan-*.whl")
    return wheel


def _install(wheel: Path, scratch: Path) -> Path:
    target = scratch / "site"
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target)]
    subprocess.run([*command, str(wheel)], check=True, capture_output=True)
    return target


def _packaged_env(site: Path, resources: Path, data: Path, port: int) -> dict[str, str]:
    """Python without site processing (`-S`): the checkout's editable install is not on the path, the wheel is
    first and the dependencies come from this interpreter's site-packages."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]]),
        "CLUSTERPLAN_RESOURCE_DIR": str(resources),
        "CLUSTERPLAN_DATA_DIR": str(data),
        "CLUSTERPLAN_DATABASE_URL": f"sqlite:///{data / 'image.db'}",
        "CLUSTERPLAN_ENVIRONMENT": "test",
        "CLUSTERPLAN_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }


@dataclass(frozen=True)
class Packaged:
    url: str
    site: Path
    env: dict[str, str]
    cwd: Path


@pytest.fixture(scope="module")
def packaged(stages: dict[str, Stage], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Packaged]:
    scratch = tmp_path_factory.mktemp("image")
    site = _install(_build_wheel(stages["build"], scratch), scratch)
    resources = scratch / "srv"
    resources.mkdir()
    for sources, dest in stages["runtime"].copies:
        for source in sources:
            shutil.copytree(ROOT / source, resources / dest.removeprefix("./"))
    (scratch / "data").mkdir()
    port = free_port()
    env = _packaged_env(site, resources, scratch / "data", port)
    log = (scratch / "server.log").open("wb")
    command = [sys.executable, "-S", "-m", "app.cli.main", "serve", "--port", str(port)]
    proc = subprocess.Popen(command, cwd=resources, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, scratch / "server.log")
        yield Packaged(url, site, env, resources)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the packaged server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"the packaged server did not start: {log.read_text(errors='replace')[-2000:]}")


def test_the_app_runs_from_the_wheel_not_the_checkout(packaged: Packaged) -> None:
    probe = "import app, app.resources as r; print(app.__file__); print(r.TEMPLATES_DIR)"
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        cwd=packaged.cwd,
        env=packaged.env,
        capture_output=True,
        text=True,
    )
    module_file, templates = out.stdout.split()
    assert Path(module_file).is_relative_to(packaged.site)
    assert Path(templates) == packaged.cwd / "templates"


def test_packaged_server_serves_pages_assets_and_catalog(packaged: Packaged) -> None:
    page = httpx.get(f"{packaged.url}/", timeout=30, follow_redirects=True)
    assert page.status_code == 200 and "<html" in page.text.lower()
    css = re.search(r'href="(/static/[^"]+\.css[^"]*)"', page.text)
    assert css, "the page links no stylesheet"
    assert httpx.get(f"{packaged.url}{css.group(1)}", timeout=10).status_code == 200
    gpus = httpx.get(f"{packaged.url}/api/v1/gpus", timeout=10)
    assert gpus.status_code == 200 and any(g["name"] == "H100-SXM" for g in gpus.json()["data"])
    prices = httpx.get(f"{packaged.url}/api/v1/prices", timeout=10)
    assert prices.status_code == 200 and prices.json()["data"], "the seeded price book is empty"


def test_packaged_server_estimates_from_its_own_catalog(packaged: Packaged) -> None:
    body = json.loads((EXAMPLES_DIR / "llama3-70b-64xh100.json").read_text())
    response = httpx.post(f"{packaged.url}/api/v1/estimate", json=body, timeout=60)
    assert response.status_code == 200, response.text
    served = response.json()
    checkout = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "estimate",
            str(EXAMPLES_DIR / "llama3-70b-64xh100.json"),
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(checkout.stdout)
    assert served["num_gpus"] == 64
    assert served["step"]["total_s"] == pytest.approx(expected["step"]["total_s"], rel=1e-9)
    assert served["memory"] == expected["memory"]
