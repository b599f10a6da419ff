"""Host names in what a benchmark job reports: which names a result carries, and the same text with them hidden.

A node's host is for administrators (a node's name is for every reader): results carry it in their environment
(`hostname`, `hostnames`, each device's `host`), and free text carries it too — the agent forwards the error lines
of torchrun and NCCL, which begin with the host (NCCL's `host:pid:tid [rank] NCCL WARN …`, torch elastic's
`host : node-7` failure summary). `redact_hosts` replaces every known name, and those two line forms whatever the
name, with `HOST_MASK`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

HOST_MASK = "<host>"
# NCCL's debug prefix (src/include/debug.h: "%s:%d:%d [%d]" hostname, pid, tid, cudaDev) at the start of a line
_NCCL_PREFIX = re.compile(r"(?m)^[\w.-]+(?=:\d+:\d+ \[\d+\])")
# torch.distributed.elastic's failure summary ("host      : node-7.cluster"), and "hostname: …" lines
_HOST_FIELD = re.compile(r"(?mi)^(\s*(?:host|hostname)\s*[:=]\s*)\S+")
_MIN_SHORT_NAME = 3  # a host's first label stands for it only when it is at least this long


def environment_host_names(env: dict[str, Any]) -> set[str]:
    """Every host name a result's `environment` names: `hostname`, `hostnames` and each device's `host`."""
    names = {str(h) for h in env.get("hostnames") or [] if h}
    if env.get("hostname"):
        names.add(str(env["hostname"]))
    devices = env.get("devices")
    if isinstance(devices, list):
        names |= {str(d["host"]) for d in devices if isinstance(d, dict) and d.get("host")}
    return names


def environment_without_hosts(env: dict[str, Any]) -> dict[str, Any]:
    """A result's `environment` without the names of the hosts it ran on, with their count as `hosts`: what a
    reader who is not an administrator may see."""
    out = {k: v for k, v in env.items() if k not in ("hostname", "hostnames")}
    devices = env.get("devices")
    if isinstance(devices, list):
        out["devices"] = [
            {k: v for k, v in d.items() if k != "host"} if isinstance(d, dict) else d for d in devices
        ]
    out["hosts"] = len(environment_host_names(env))
    return out


def _name_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for the names and their first labels ("node-7" for "node-7.cluster"), longest first, matched
    only as whole names (not inside a longer word or name)."""
    every = {n.strip() for n in names if n and n.strip()}
    every |= {n.split(".", 1)[0] for n in every if "." in n and len(n.split(".", 1)[0]) >= _MIN_SHORT_NAME}
    if not every:
        return None
    alternatives = "|".join(re.escape(n) for n in sorted(every, key=len, reverse=True))
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])")


def redact_hosts(value: Any, names: Iterable[str]) -> Any:
    """`value` (text, or JSON made of dicts, lists and text) with every host name in `names`, and the host of
    every NCCL or torch elastic line, replaced by HOST_MASK."""
    pattern = _name_pattern(names)

    def text(s: str) -> str:
        if pattern is not None:
            s = pattern.sub(HOST_MASK, s)
        s = _NCCL_PREFIX.sub(HOST_MASK, s)
        return _HOST_FIELD.sub(lambda m: m.group(1) + HOST_MASK, s)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)
