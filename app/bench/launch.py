"""Launch through existing engines: torchrun (single node or c10d rendezvous) and SLURM batch scripts.

The runner never reimplements process management: single node is
`python -m torch.distributed.run --standalone --nproc-per-node N`, multi-node adds
`--nnodes M --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID` on every node, and SLURM runs that
same command once per node with `srun` (torchrun docs: pytorch.org/docs/stable/elastic/run.html).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench.progress import parse_event
from app.benchproto.config import CollectiveConfig
from app.benchproto.schema import read_document, write_document
from app.core.errors import ProblemCollector

WORKER_MODULE = "app.bench.collectives"


@dataclass(frozen=True)
class Rendezvous:
    nnodes: int = 1
    endpoint: str = ""  # host:port of the c10d store (node 0); empty → --standalone
    run_id: str = "clusterplan"


def torchrun_argv(
    config: CollectiveConfig,
    nproc_per_node: int,
    out_path: str | None,
    rendezvous: Rendezvous | None = None,
    python: str | None = None,
    user_argv: list[str] | None = None,
) -> list[str]:
    rdzv = rendezvous or Rendezvous()
    argv = [python or sys.executable, "-m", "torch.distributed.run"]
    if rdzv.nnodes <= 1 and not rdzv.endpoint:
        argv += ["--standalone", "--nnodes", "1"]
    else:
        argv += [
            "--nnodes",
            str(rdzv.nnodes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            rdzv.endpoint,
            "--rdzv-id",
            rdzv.run_id,
        ]
    argv += ["--nproc-per-node", str(nproc_per_node), "-m", WORKER_MODULE]
    argv += ["--config", json.dumps(config.to_dict(), separators=(",", ":"))]
    if out_path:
        argv += ["--out", out_path]
    if user_argv is not None:
        argv += ["--argv", json.dumps(user_argv)]
    return argv


@dataclass(frozen=True)
class SlurmJob:
    """The sbatch job a collective sweep runs as: its size and the scheduler's options.

    The one task per node runs every rank of that node, so it asks for CPUs for all of them (`cpus_per_task`,
    0 = 2 per GPU: each rank's own thread and NCCL's proxy thread, which progresses its network operations).
    `activate` is the script that sets up the Python environment with clusterplan and torch on the nodes (None:
    the virtual environment the script is generated from, if any; "": none)."""

    nodes: int
    gpus_per_node: int
    out_path: str = "results/collectives-${SLURM_JOB_ID}.json"
    job_name: str = "clusterplan-collectives"
    time_limit: str = "00:30:00"
    partition: str = ""
    account: str = ""
    port: int = 29500
    python: str = "python"
    cpus_per_task: int = 0
    activate: str | None = None


def slurm_script(config: CollectiveConfig, job: SlurmJob) -> str:
    """An sbatch script: one torchrun per node (srun --ntasks-per-node=1), c10d rendezvous on the first host.
    Slurm ≥ 22.05's srun does not inherit sbatch's --cpus-per-task, so the script passes it on through
    SRUN_CPUS_PER_TASK (slurm.schedmd.com/srun.html, --cpus-per-task)."""
    nodes, gpus_per_node, out_path, job_name = job.nodes, job.gpus_per_node, job.out_path, job.job_name
    cpus_per_task, port, python = job.cpus_per_task, job.port, job.python
    p = ProblemCollector()
    p.check(nodes >= 1, "nodes", "must be ≥ 1")
    p.check(gpus_per_node >= 1, "gpus_per_node", "must be ≥ 1")
    p.check(cpus_per_task >= 0, "cpus_per_task", "must be ≥ 0 (0: 2 per GPU)")
    p.check(1 <= port <= 65535, "port", "must be a TCP port")
    p.raise_if_any()
    cfg = json.dumps(config.to_dict(), separators=(",", ":"))
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gpus_per_node}",
        f"#SBATCH --cpus-per-task={cpus_per_task or 2 * gpus_per_node}",
        "#SBATCH --exclusive",
        f"#SBATCH --time={job.time_limit}",
        f"#SBATCH --output={job_name}-%j.out",
    ]
    if job.partition:
        lines.append(f"#SBATCH --partition={job.partition}")
    if job.account:
        lines.append(f"#SBATCH --account={job.account}")
    lines += [
        "",
        "set -euo pipefail",
        *_activation_lines(job.activate),
        'export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"  # srun (Slurm ≥ 22.05) does not inherit it',
        "export OMP_NUM_THREADS=1",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f'mkdir -p "$(dirname "{out_path}")"',
        "",
        "# One torchrun per node; they meet at the c10d store on the first node.",
        "srun --kill-on-bad-exit=1 \\",
        f"  {python} -m torch.distributed.run \\",
        '    --nnodes "$SLURM_NNODES" \\',
        f"    --nproc-per-node {gpus_per_node} \\",
        "    --rdzv-backend c10d \\",
        f'    --rdzv-endpoint "$head_node:{port}" \\',
        '    --rdzv-id "$SLURM_JOB_ID" \\',
        f"    -m {WORKER_MODULE} \\",
        f"    --config {shlex.quote(cfg)} \\",
        f'    --out "{out_path}"',
        "",
    ]
    return "\n".join(lines)


def _activation_lines(activate: str | None) -> list[str]:
    """`source` the environment's activation script on every node (the generating venv by default)."""
    if activate is None and sys.prefix != sys.base_prefix:
        activate = str(Path(sys.prefix) / "bin" / "activate")
    if not activate:
        return ["# no virtual environment: `python` on the nodes must import clusterplan and torch"]
    return [f"source {shlex.quote(activate)}  # the environment with clusterplan and torch"]


def run_torchrun(
    config: CollectiveConfig,
    nproc_per_node: int,
    out_path: str,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    rendezvous: Rendezvous | None = None,
    user_argv: list[str] | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_output: Callable[[str], None] | None = None,
) -> tuple[int, dict[str, Any] | None]:
    """Run the sweep under torchrun, forwarding rank 0's events; return (exit code, result document).

    On SIGINT/SIGTERM (or should_stop()), torchrun's process group gets SIGTERM; rank 0 then writes its
    partial document with status "interrupted", which is returned.
    """
    argv = torchrun_argv(config, nproc_per_node, out_path, rendezvous, user_argv=user_argv)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    stopped = False

    def _stop(*_args: Any) -> None:
        nonlocal stopped
        if not stopped and proc.poll() is None:
            stopped = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    in_main = _is_main_thread()
    if in_main:
        for s in previous:
            signal.signal(s, _stop)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = parse_event(line)
            if event is None:
                if on_output is not None:
                    on_output(line.rstrip("\n"))
                continue
            if on_event is not None:
                on_event(event)
            if should_stop is not None and should_stop():
                _stop()
        code = proc.wait()
    finally:
        if in_main:
            for s, handler in previous.items():
                signal.signal(s, handler)
    doc = read_document(out_path) if Path(out_path).exists() else None
    if stopped and doc is not None and doc.get("status") == "running":
        # Rank 0 can be killed inside a blocking collective before its own handler runs; the launcher owns
        # the document then and records the interruption, keeping every row already written.
        doc["status"] = "interrupted"
        write_document(doc, out_path)
    return (130 if stopped else code), doc


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
