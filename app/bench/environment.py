"""What a result was measured on: host, devices, driver, torch / CUDA / NCCL versions, relevant env vars."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from typing import Any

ENV_KEYS_PREFIXES = (
    "NCCL_",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "TORCH_NCCL_",
    "GLOO_",
    "SLURM_JOB_ID",
)


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""


def cuda_device_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def fp8_supported() -> bool:
    try:
        import torch
    except ImportError:
        return False
    if not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability(0) >= (8, 9) and hasattr(torch, "float8_e4m3fn")


def collect_environment() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "hostnames": [socket.gethostname()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_KEYS_PREFIXES)},
        "torch": None,
        "cuda": None,
        "nccl": None,
        "driver": "",
        "devices": [],
    }
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return info
    info["torch"] = torch.__version__
    info["cuda"] = torch.version.cuda
    info["gloo"] = bool(dist.is_available() and dist.is_gloo_available())
    if torch.cuda.is_available():
        try:
            version = torch.cuda.nccl.version()
            info["nccl"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
        except (AttributeError, RuntimeError):
            info["nccl"] = None
        info["driver"] = _driver_version()
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            info["devices"].append(
                {
                    "index": index,
                    "name": props.name,
                    "memory_bytes": int(props.total_memory),
                    "compute_capability": f"{props.major}.{props.minor}",
                    "multiprocessors": props.multi_processor_count,
                }
            )
    else:
        info["devices"].append(
            {"index": 0, "name": f"cpu ({info['cpu']})", "threads": torch.get_num_threads()}
        )
    return info
