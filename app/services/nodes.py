"""Benchmark nodes: create (token shown once), list with online/offline, revoke, register, heartbeat."""

from __future__ import annotations

import os
import re
import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, select

from app.auth.nodes import hash_node_token, new_node_token, token_display_prefix
from app.core.errors import Problem, SpecError
from app.errors import NotFoundError
from app.models.base import as_utc, utcnow
from app.models.benchmarks import Node
from app.schemas.nodes import NodeCheck


def heartbeat_interval_s() -> float:
    """How often agents heartbeat; a node is online while its last heartbeat is under 3 intervals old."""
    return float(os.environ.get("CLUSTERPLAN_AGENT_HEARTBEAT_S", "10"))


def online_window_s() -> float:
    """CLUSTERPLAN_NODE_ONLINE_S if set (tests pin it), else 3 heartbeat intervals (two missed beats)."""
    pinned = os.environ.get("CLUSTERPLAN_NODE_ONLINE_S")
    return float(pinned) if pinned else 3 * heartbeat_interval_s()


def is_online(node: Node, now: datetime | None = None) -> bool:
    last = as_utc(node.last_heartbeat_at)
    if node.revoked_at is not None or last is None:
        return False
    return ((now or utcnow()) - last) <= timedelta(seconds=online_window_s())


def create_node(session: Session, name: str) -> tuple[Node, str]:
    """A new node and its token (the only time the token exists in clear)."""
    name = name.strip()
    if not name:
        raise SpecError([Problem("name", "must not be empty")])
    if session.exec(select(Node).where(Node.name == name)).first() is not None:
        raise SpecError([Problem("name", f"a node named {name!r} already exists")])
    token = new_node_token()
    node = Node(name=name, token_prefix=token_display_prefix(token), token_hash=hash_node_token(token))
    session.add(node)
    session.commit()
    session.refresh(node)
    return node, token


def list_nodes(session: Session, include_revoked: bool = True) -> list[Node]:
    query = select(Node).order_by(col(Node.created_at))
    if not include_revoked:
        query = query.where(col(Node.revoked_at).is_(None))
    return list(session.exec(query).all())


def get_node(session: Session, ref: str | uuid.UUID) -> Node:
    node = None
    try:
        node = session.get(Node, uuid.UUID(str(ref)))
    except ValueError:
        node = session.exec(select(Node).where(Node.name == str(ref))).first()
    if node is None:
        names = [n.name for n in list_nodes(session)]
        import difflib

        raise NotFoundError("node", str(ref), difflib.get_close_matches(str(ref), names, n=3))
    return node


def revoke_node(session: Session, ref: str | uuid.UUID) -> Node:
    node = get_node(session, ref)
    if node.revoked_at is None:
        node.revoked_at = utcnow()
        session.add(node)
        session.commit()
        session.refresh(node)
    return node


def register_node(session: Session, node: Node, hostname: str, info: dict[str, Any]) -> Node:
    now = utcnow()
    node.hostname = hostname[:255]
    node.info = info
    node.registered_at = now
    node.last_heartbeat_at = now
    session.add(node)
    session.commit()
    session.refresh(node)
    return node


def touch_node(session: Session, node: Node) -> None:
    node.last_heartbeat_at = utcnow()
    session.add(node)


def node_gpu_count(node: Node) -> int | None:
    devices = (node.info or {}).get("devices") or []
    gpus = [d for d in devices if not str(d.get("name", "")).startswith("cpu")]
    return len(gpus) if node.registered_at is not None else None


def catalog_gpu_for_device(device_name: str) -> str:
    """The catalog GPU a device the agent reported is ("NVIDIA H100 80GB HBM3" → "H100-SXM"): the longest
    catalog name or alias inside the reported name; "" for a CPU or a GPU the catalog does not know."""
    from app.catalog import build_alias_index, entries, normalise_name

    reported = normalise_name(device_name)
    if not reported or reported.startswith("cpu"):
        return ""
    index = build_alias_index(entries("gpu").values())
    # a name inside the reported one, not running on into a digit ("H20" is not inside "H200")
    inside = [key for key in index if len(key) >= 3 and re.search(re.escape(key) + r"(?![0-9])", reported)]
    return index[max(inside, key=len)] if inside else ""


def node_gpu(node: Node) -> str:
    """The catalog GPU of a node's first reported GPU device; "" when it reported none (a CPU-only node, or one
    not registered yet) or a GPU the catalog does not know."""
    devices = (node.info or {}).get("devices") or []
    for device in devices:
        name = str(device.get("name", ""))
        if not name.startswith("cpu"):
            return catalog_gpu_for_device(name)
    return ""


def node_check(job: Any) -> NodeCheck:
    from app.calibration.acceptance import failed_checks

    report = (job.result or {}).get("acceptance")
    return NodeCheck(
        job_id=job.id,
        status=job.status,
        created_at=as_utc(job.created_at),  # type: ignore[arg-type]
        finished_at=as_utc(job.finished_at),
        verdict=report["verdict"] if report else None,
        gpu=report["gpu"] if report else job.params.get("gpu"),
        fabric=report["fabric"] if report else job.params.get("fabric"),
        failed=failed_checks(report) if report else [],
    )
