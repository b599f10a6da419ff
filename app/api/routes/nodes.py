"""/api/v1/nodes (admin: create with a one-time token, list online/offline, revoke) and /api/v1/agent
(the node agent's own endpoints, authenticated by its node token: register, heartbeat, claim, progress,
complete; 401 for a missing, unknown or revoked token, 409 when the agent no longer holds the job)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Response, status

from app.api.routes.benchmarks import public_of
from app.auth.deps import AdminDep
from app.auth.nodes import NodeDep
from app.deps import SessionDep
from app.models.base import as_utc
from app.models.benchmarks import Node
from app.schemas.benchmarks import BenchmarkPublic
from app.schemas.envelope import ListEnvelope
from app.schemas.nodes import (
    NODE_NAME_MAX,
    AgentConfig,
    AgentRegister,
    CompleteReport,
    HeartbeatReply,
    HeartbeatReport,
    NodeCheck,
    NodeCreate,
    NodeCreated,
    NodePublic,
    ProgressReply,
    ProgressReport,
)
from app.services import jobs as job_service
from app.services import nodes as node_service
from app.services.nodes import node_check

router = APIRouter()
# a node's name or its UUID (36 characters), as the benchmarks' target_node
NodeRef = Annotated[str, Path(max_length=NODE_NAME_MAX, description="node name or id")]


def node_public(node: Node) -> NodePublic:
    return NodePublic(
        id=node.id,
        name=node.name,
        token_prefix=node.token_prefix,
        hostname=node.hostname,
        info=node.info,
        online=node_service.is_online(node),
        revoked=node.revoked_at is not None,
        created_at=as_utc(node.created_at),  # type: ignore[arg-type]
        registered_at=as_utc(node.registered_at),
        last_heartbeat_at=as_utc(node.last_heartbeat_at),
    )


@router.post(
    "/nodes",
    tags=["nodes"],
    operation_id="create_node",
    status_code=status.HTTP_201_CREATED,
    response_model=NodeCreated,
    summary="Add a benchmark node; the response holds its token, shown only this once",
)
def create_node(body: NodeCreate, session: SessionDep, _admin: AdminDep, response: Response) -> NodeCreated:
    node, token = node_service.create_node(session, body.name)
    response.headers["Location"] = f"/api/v1/nodes/{node.id}"
    return NodeCreated(**node_public(node).model_dump(), token=token)


@router.get(
    "/nodes",
    tags=["nodes"],
    operation_id="list_nodes",
    response_model=ListEnvelope[NodePublic],
    summary="Benchmark nodes with online/offline state",
)
def list_nodes(session: SessionDep, _admin: AdminDep) -> ListEnvelope[NodePublic]:
    nodes = node_service.list_nodes(session)
    return ListEnvelope[NodePublic](data=[node_public(n) for n in nodes], count=len(nodes))


@router.get(
    "/nodes/{node_ref}",
    tags=["nodes"],
    operation_id="get_node",
    response_model=NodePublic,
    summary="One node by id or name",
)
def get_node(node_ref: NodeRef, session: SessionDep, _admin: AdminDep) -> NodePublic:
    return node_public(node_service.get_node(session, node_ref))


@router.get(
    "/nodes/{node_ref}/checks",
    tags=["nodes"],
    operation_id="list_node_checks",
    response_model=ListEnvelope[NodeCheck],
    summary="The node's acceptance checks (jobs of kind check), newest first, with their verdicts",
)
def list_node_checks(node_ref: NodeRef, session: SessionDep, _admin: AdminDep) -> ListEnvelope[NodeCheck]:
    node = node_service.get_node(session, node_ref)
    checks = [node_check(job) for job in job_service.check_history(session, node.id)]
    return ListEnvelope[NodeCheck](data=checks, count=len(checks))


@router.post(
    "/nodes/{node_ref}/revoke",
    tags=["nodes"],
    operation_id="revoke_node",
    response_model=NodePublic,
    summary="Revoke a node's token (its agent gets 401 from then on)",
)
def revoke_node(node_ref: NodeRef, session: SessionDep, _admin: AdminDep) -> NodePublic:
    return node_public(node_service.revoke_node(session, node_ref))


# ---- agent endpoints (node token) -------------------------------------------------------------------


def _config(node: Node) -> AgentConfig:
    return AgentConfig(
        node_id=node.id,
        name=node.name,
        heartbeat_interval_s=node_service.heartbeat_interval_s(),
        lease_s=job_service.lease_s(),
    )


@router.post(
    "/agent/register",
    tags=["agent"],
    operation_id="agent_register",
    response_model=AgentConfig,
    summary="An agent announces its node (host, GPUs, versions)",
)
def agent_register(body: AgentRegister, node: NodeDep, session: SessionDep) -> AgentConfig:
    node = node_service.register_node(session, node, body.hostname, body.info)
    return _config(node)


@router.post(
    "/agent/heartbeat",
    tags=["agent"],
    operation_id="agent_heartbeat",
    response_model=HeartbeatReply,
    summary="Keep the node online and the leases of the runs this agent holds alive",
)
def agent_heartbeat(
    node: NodeDep, session: SessionDep, body: HeartbeatReport | None = None
) -> HeartbeatReply:
    held = [(run.id, run.attempt) for run in (body.jobs if body else [])]
    cancel = job_service.renew_leases(session, node, held)
    return HeartbeatReply(
        cancel=cancel, heartbeat_interval_s=node_service.heartbeat_interval_s(), lease_s=job_service.lease_s()
    )


@router.post(
    "/agent/claim",
    tags=["agent"],
    operation_id="agent_claim",
    response_model=BenchmarkPublic,
    responses={204: {"description": "no job waiting"}},
    summary="Atomically claim the oldest queued job for this node, under a lease",
)
def agent_claim(node: NodeDep, session: SessionDep) -> Any:
    job = job_service.claim_job(session, node)
    if job is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    # the job as a reader sees it: earlier attempts' errors and logs name the hosts of the nodes that ran them,
    # which are for administrators (a node is an operator's machine, not one); the agent needs none of them
    return public_of(session, job, show_hosts=False)


@router.post(
    "/agent/jobs/{job_id}/progress",
    tags=["agent"],
    operation_id="agent_progress",
    response_model=ProgressReply,
    responses={409: {"description": "this agent no longer holds the job"}},
    summary="Stream progress events (renews the lease; tells the agent to stop when cancelled)",
)
def agent_progress(
    job_id: uuid.UUID, body: ProgressReport, node: NodeDep, session: SessionDep
) -> ProgressReply:
    try:
        job = job_service.record_progress(session, job_id, node, body.attempt, body.events)
    except job_service.ConflictError as exc:
        raise HTTPException(status_code=status.HTTP_409_CONFLICT, detail=str(exc)) from exc
    return ProgressReply(
        cancel=job.cancel_requested, progress=job.progress, lease_expires_at=as_utc(job.lease_expires_at)
    )


@router.post(
    "/agent/jobs/{job_id}/complete",
    tags=["agent"],
    operation_id="agent_complete",
    response_model=BenchmarkPublic,
    responses={409: {"description": "this agent no longer holds the job"}},
    summary="Upload the result document (or partial results) and finish the job",
)
def agent_complete(
    job_id: uuid.UUID, body: CompleteReport, node: NodeDep, session: SessionDep
) -> BenchmarkPublic:
    try:
        job = job_service.complete_job(
            session, job_id, node, body.attempt, body.status, body.result, body.error
        )
    except job_service.ConflictError as exc:
        raise HTTPException(status_code=status.HTTP_409_CONFLICT, detail=str(exc)) from exc
    # the job as a reader sees it: earlier attempts' errors and logs name the hosts of the nodes that ran them,
    # which are for administrators (a node is an operator's machine, not one); the agent needs none of them
    return public_of(session, job, show_hosts=False)
