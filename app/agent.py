"""The node agent: `clusterplan agent --server URL --token cpn_…` on a GPU node.

It registers the node (host name, GPUs, driver, torch / CUDA / NCCL versions), heartbeats, claims queued
jobs under a lease, runs each one in a child process (`python -m app.bench.job`, which launches torchrun
for collectives), streams the child's JSON-lines progress to the server and uploads the result document.
Cancellation from the server (seen in a progress or heartbeat reply) sends SIGTERM to the child's process
group; the child writes its partial results, which are uploaded with status "cancelled". A 401 (unknown
or revoked token) makes the agent back off exponentially; a 409 means the lease was lost (the job went
back to the queue), so the agent stops that run and uploads nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.bench.progress import parse_event
from app.benchproto.schema import read_document

log = logging.getLogger("clusterplan.agent")
EXIT_AUTH = 3
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
PROGRESS_FLUSH_S = 0.5


class AuthRejected(Exception):
    """The server answered 401: the token is wrong or revoked."""


class LeaseLost(Exception):
    """The server answered 409: this agent no longer holds the job."""


@dataclass
class RunningJob:
    id: str
    attempt: int
    kind: str
    proc: subprocess.Popen[str]
    out_path: Path
    cancel: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    rows: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


class Agent:
    def __init__(
        self,
        server: str,
        token: str,
        poll_interval_s: float = 2.0,
        max_auth_failures: int = 0,
        exit_when_idle: bool = False,
        max_jobs: int = 0,
        work_dir: str | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self.client = httpx.Client(
            base_url=self.server + "/api/v1",
            headers={"Authorization": f"Bearer {token}", "User-Agent": "clusterplan-agent"},
            timeout=30.0,
        )
        self.poll_interval_s = poll_interval_s
        self.max_auth_failures = max_auth_failures
        self.exit_when_idle = exit_when_idle
        self.max_jobs = max_jobs
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="clusterplan-agent-"))
        self.heartbeat_interval_s = 10.0
        self.stop = threading.Event()
        self.current: RunningJob | None = None
        self.auth_failures = 0
        self.backoff_s = BACKOFF_START_S

    # ---- HTTP ----------------------------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        response = self.client.post(path, json=body or {})
        if response.status_code == 401:
            raise AuthRejected(
                response.json().get("detail", "unauthorised") if response.content else "unauthorised"
            )
        if response.status_code == 409:
            raise LeaseLost(response.json().get("detail", "conflict"))
        response.raise_for_status()
        return response

    def _backoff(self, reason: str) -> None:
        log.warning("%s; backing off %.1f s", reason, self.backoff_s)
        print(f"agent: {reason}; backing off {self.backoff_s:.1f} s", file=sys.stderr, flush=True)
        self.stop.wait(self.backoff_s)
        self.backoff_s = min(BACKOFF_MAX_S, self.backoff_s * 2)

    def _auth_failed(self, exc: AuthRejected) -> bool:
        """Count a 401 and back off; True when the agent should give up."""
        self.auth_failures += 1
        if self.max_auth_failures and self.auth_failures >= self.max_auth_failures:
            print(
                f"agent: 401 from server ({exc}); giving up after {self.auth_failures} attempt(s)",
                file=sys.stderr,
                flush=True,
            )
            return True
        self._backoff(f"401 from server ({exc})")
        return False

    # ---- lifecycle -----------------------------------------------------------------------------------

    def register(self) -> bool:
        from app.bench.environment import collect_environment

        info = collect_environment()
        while not self.stop.is_set():
            try:
                reply = self._post("/agent/register", {"hostname": socket.gethostname(), "info": info}).json()
            except AuthRejected as exc:
                if self._auth_failed(exc):
                    return False
                continue
            except httpx.HTTPError as exc:
                self._backoff(f"server unreachable ({exc.__class__.__name__})")
                continue
            self.heartbeat_interval_s = float(reply.get("heartbeat_interval_s", 10.0))
            self.backoff_s = BACKOFF_START_S
            self.auth_failures = 0
            print(
                f"agent: registered as node {reply.get('name')} ({reply.get('node_id')})",
                file=sys.stderr,
                flush=True,
            )
            return True
        return False

    def heartbeat_body(self) -> dict[str, Any]:
        """The runs this process holds: the server renews only their leases, never a predecessor's."""
        job = self.current
        return {"jobs": [] if job is None else [{"id": job.id, "attempt": job.attempt}]}

    def _heartbeat_loop(self) -> None:
        while not self.stop.wait(self.heartbeat_interval_s):
            try:
                reply = self._post("/agent/heartbeat", self.heartbeat_body()).json()
            except AuthRejected:
                print("agent: token rejected during heartbeat; stopping", file=sys.stderr, flush=True)
                self.stop.set()
                job = self.current
                if job is not None:
                    job.lost.set()
                    _terminate(job.proc)
                return
            except httpx.HTTPError:
                continue
            job = self.current
            if job is not None and job.id in {str(j) for j in reply.get("cancel", [])}:
                job.cancel.set()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
        if not self.register():
            return EXIT_AUTH if self.auth_failures else 1
        threading.Thread(target=self._heartbeat_loop, daemon=True, name="heartbeat").start()
        done = 0
        try:
            while not self.stop.is_set():
                try:
                    response = self._post("/agent/claim")
                except AuthRejected as exc:
                    if self._auth_failed(exc):
                        return EXIT_AUTH
                    continue
                except httpx.HTTPError as exc:
                    self._backoff(f"claim failed ({exc.__class__.__name__})")
                    continue
                self.backoff_s = BACKOFF_START_S
                if response.status_code == 204:
                    if self.exit_when_idle:
                        return 0
                    self.stop.wait(self.poll_interval_s)
                    continue
                self.run_job(response.json())
                done += 1
                if self.max_jobs and done >= self.max_jobs:
                    return 0
        except KeyboardInterrupt:
            pass
        finally:
            self.stop.set()
            job = self.current
            if job is not None:
                _terminate(job.proc)
        return 0

    # ---- one job -------------------------------------------------------------------------------------

    def run_job(self, job: dict[str, Any]) -> None:
        job_id, attempt, kind = str(job["id"]), int(job["attempt"]), str(job["kind"])
        out_path = self.work_dir / f"{job_id}-{attempt}.json"
        stderr_path = self.work_dir / f"{job_id}-{attempt}.stderr"
        print(f"agent: running {kind} job {job_id} (attempt {attempt})", file=sys.stderr, flush=True)
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "app.bench.job",
                    "--kind",
                    kind,
                    "--params",
                    json.dumps(job.get("params") or {}),
                    "--out",
                    str(out_path),
                ],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        running = RunningJob(job_id, attempt, kind, proc, out_path)
        self.current = running
        try:
            self._pump(running)
        finally:
            self.current = None
        if running.lost.is_set():
            print(f"agent: lost the lease on job {job_id}; dropped it", file=sys.stderr, flush=True)
            return
        code = proc.wait()
        doc = read_document(out_path) if out_path.exists() else None
        if doc is None and running.rows:
            doc = {"rows": running.rows, "status": "partial"}
        if running.cancel.is_set():
            status_, error = "cancelled", "cancelled on request"
            if doc is not None:
                doc["status"] = "interrupted" if doc.get("status") == "running" else doc.get("status")
        elif code == 0 and doc is not None and doc.get("status") == "complete":
            status_, error = "succeeded", ""
        else:
            status_ = "failed"
            error = running.error or _tail(stderr_path) or f"benchmark exited with status {code}"
        try:
            self._post(
                f"/agent/jobs/{job_id}/complete",
                {"attempt": attempt, "status": status_, "result": doc, "error": error},
            )
        except LeaseLost:
            print(f"agent: job {job_id} was taken back before completion", file=sys.stderr, flush=True)
        except AuthRejected:
            self.stop.set()
        print(f"agent: job {job_id} {status_}", file=sys.stderr, flush=True)

    def _pump(self, job: RunningJob) -> None:
        """Read the child's events, post them in batches; act on cancel / lost lease replies."""
        pending: list[dict[str, Any]] = []
        lock = threading.Lock()
        finished = threading.Event()

        def reader() -> None:
            assert job.proc.stdout is not None
            for line in job.proc.stdout:
                event = parse_event(line)
                if event is None:
                    continue
                if event.get("event") == "row" and isinstance(event.get("row"), dict):
                    job.rows.append(event["row"])
                if event.get("event") == "error":
                    job.error = str(event.get("message", ""))
                with lock:
                    pending.append(event)
            finished.set()

        threading.Thread(target=reader, daemon=True, name="job-output").start()
        while True:
            done = finished.wait(PROGRESS_FLUSH_S)
            with lock:
                batch, pending[:] = list(pending), []
            if batch or not done:
                try:
                    reply = self._post(
                        f"/agent/jobs/{job.id}/progress", {"attempt": job.attempt, "events": batch}
                    ).json()
                    if reply.get("cancel") and not job.cancel.is_set():
                        job.cancel.set()
                except LeaseLost:
                    job.lost.set()
                except AuthRejected:
                    job.lost.set()
                    self.stop.set()
                except httpx.HTTPError:
                    with lock:
                        pending[:0] = batch  # retry with the next flush
            if (job.cancel.is_set() or job.lost.is_set()) and job.proc.poll() is None:
                _terminate(job.proc)
            if done:
                job.proc.wait()
                return


def _die_with_parent() -> None:
    """Linux: the job gets SIGTERM if the agent dies (prctl PR_SET_PDEATHSIG), so no run outlives its agent."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _terminate(proc: subprocess.Popen[str], grace_s: float = 20.0) -> None:
    """SIGTERM the job's process group (the child writes partial results), SIGKILL after a grace period."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return

    def _reap() -> None:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    threading.Thread(target=_reap, daemon=True).start()


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:].strip()
    except OSError:
        return ""
