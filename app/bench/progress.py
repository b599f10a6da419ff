"""JSON-lines progress events and interrupt handling.

Every event is one line `{"event": ..., "t": <unix s>, ...}`: start (total steps), row (a finished
measurement with done/total/progress/eta_s), log, done (status). The agent forwards them to the server;
the CLI can print them with --events.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TextIO

EVENT_PREFIX = '{"event"'


class ProgressSink:
    def __init__(self, stream: TextIO | None = None, total: int = 0) -> None:
        self.stream = stream
        self.total = total
        self.done = 0
        self.started = time.monotonic()

    def emit(self, event: str, **payload: Any) -> dict[str, Any]:
        record = {"event": event, "t": round(time.time(), 3), **payload}
        if self.stream is not None:
            self.stream.write(json.dumps(record, separators=(",", ":")) + "\n")
            self.stream.flush()
        return record

    def start(self, total: int, **payload: Any) -> None:
        self.total = total
        self.done = 0  # a start begins a new count (a job's parts each start their own)
        self.started = time.monotonic()
        self.emit("start", total=total, **payload)

    def row(self, row: dict[str, Any], steps: int = 1) -> None:
        self.done += steps
        progress = self.done / self.total if self.total else 1.0
        elapsed = time.monotonic() - self.started
        eta = elapsed / progress - elapsed if progress > 0 else None
        self.emit(
            "row",
            row=row,
            done=self.done,
            total=self.total,
            progress=round(min(progress, 1.0), 4),
            eta_s=None if eta is None else round(eta, 2),
        )

    def log(self, message: str) -> None:
        self.emit("log", message=message)

    def finish(self, status: str, **payload: Any) -> None:
        self.emit("done", status=status, **payload)


def parse_event(line: str) -> dict[str, Any] | None:
    """The event on a line of mixed output, or None for anything else (torchrun logs, warnings)."""
    line = line.strip()
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def stderr_sink() -> ProgressSink:
    return ProgressSink(sys.stderr)


def on_interrupt(callback: Callable[[int], None]) -> None:
    """On SIGINT/SIGTERM run `callback(signum)` (write partial results), then exit 128 + signum."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_DFL)
        try:
            callback(signum)
        finally:
            sys.stdout.flush()
            raise SystemExit(128 + signum)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
