"""Collective sweep with nccl-tests semantics, run by every rank under torchrun.

    python -m torch.distributed.run --standalone --nproc-per-node N -m app.bench.collectives --config '{...}'

For every op, group and size: `warmup_iters` untimed calls, then `iters` timed calls (CUDA events on
GPU, the monotonic clock on CPU); time = elapsed / iters per rank, reduced across ranks on rank 0
(average by default, like nccl-tests `-a 1`); algbw = size / time, busbw = algbw × busbw_factor(op, n)
(nccl-tests doc/PERFORMANCE.md). A separate call with rank-dependent data checks correctness and counts
wrong elements (nccl-tests `-c 1`). all_gather, reduce_scatter, all_to_all and send_recv use separate
send and receive buffers (out of place); torch.distributed's all_reduce and broadcast are in place.

Groups: "all" = every rank; "intra" = the ranks of each node (measured concurrently, as in training);
"inter" = one rank per node with the same local index (a NIC rail); "each" = all three separately.
Only rank 0 prints: JSON-lines progress on stdout and the result document to --out (rewritten after
every row, and on SIGINT/SIGTERM with status "interrupted").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from app.bench.environment import collect_environment, cuda_device_count
from app.bench.progress import ProgressSink, on_interrupt
from app.bench.tolerance import reduction_tolerance
from app.benchproto.config import CollectiveConfig, expand_ops, resolve_backend, validate_collectives
from app.benchproto.schema import RowGroup, collective_row, finish, new_document, write_document
from app.benchproto.sizes import aligned_count, size_sweep
from app.core.network import reported_busbw_factor

TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int32": torch.int32,
}
SPLIT_OPS = ("all_gather", "reduce_scatter", "all_to_all")
# torch ≥ 2.10 renamed the tensor forms (*_into_tensor / *_tensor are deprecated aliases).
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


@dataclass
class Group:
    mode: str  # all | intra | inter
    handle: Any  # the process group this rank belongs to (None = world)
    ranks: list[int]  # world ranks of this rank's group
    nodes: int
    ranks_per_node: int

    @property
    def size(self) -> int:
        return len(self.ranks)

    def rank_of(self, world_rank: int) -> int:
        return self.ranks.index(world_rank)


def build_groups(mode: str, world: int, rank: int, ranks_per_node: int) -> list[Group]:
    """Every rank creates every subgroup in the same order (torch.distributed.new_group's rule)."""
    nodes = world // ranks_per_node
    modes = ["intra", "inter", "all"] if mode == "each" else [mode]
    groups: list[Group] = []
    for m in modes:
        if m == "all":
            groups.append(Group("all", None, list(range(world)), nodes, ranks_per_node))
        elif m == "intra":
            mine = None
            for node in range(nodes):
                members = list(range(node * ranks_per_node, (node + 1) * ranks_per_node))
                handle = dist.new_group(members) if nodes > 1 else None
                if rank in members:
                    mine = Group("intra", handle, members, 1, ranks_per_node)
            assert mine is not None
            groups.append(mine)
        elif m == "inter" and nodes > 1:
            mine = None
            for local in range(ranks_per_node):
                members = [node * ranks_per_node + local for node in range(nodes)]
                handle = dist.new_group(members) if ranks_per_node > 1 else None
                if rank in members:
                    mine = Group("inter", handle, members, nodes, 1)
            assert mine is not None
            groups.append(mine)
    return groups


class Collective:
    """Buffers and the call for one op at one size on one group, plus its correctness check."""

    def __init__(
        self, op: str, size_bytes: int, dtype: torch.dtype, device: str, group: Group, rank: int
    ) -> None:
        self.op, self.group, self.device, self.dtype = op, group, device, dtype
        n = group.size
        self.n = n
        self.me = group.rank_of(rank)
        elem = torch.tensor([], dtype=dtype).element_size()
        divisor = n if op in SPLIT_OPS else 1
        self.count = aligned_count(size_bytes, elem, divisor)
        self.size_bytes = self.count * elem
        chunk = self.count // divisor
        zeros = torch.zeros
        if op == "all_reduce" or op == "broadcast":
            self.send = zeros(self.count, dtype=dtype, device=device)
            self.recv = self.send
        elif op == "all_gather":
            self.send = zeros(chunk, dtype=dtype, device=device)
            self.recv = zeros(self.count, dtype=dtype, device=device)
        elif op == "reduce_scatter":
            self.send = zeros(self.count, dtype=dtype, device=device)
            self.recv = zeros(chunk, dtype=dtype, device=device)
        elif op in ("all_to_all", "send_recv"):
            self.send = zeros(self.count, dtype=dtype, device=device)
            self.recv = zeros(self.count, dtype=dtype, device=device)
        else:
            raise ValueError(f"unknown collective {op!r}")
        self.chunk = chunk
        self.peer_next = group.ranks[(self.me + 1) % n]
        self.peer_prev = group.ranks[(self.me - 1) % n]
        self.root = group.ranks[0]

    @property
    def in_place(self) -> bool:
        return self.op in ("all_reduce", "broadcast")

    def run(self) -> None:
        g = self.group.handle
        op = self.op
        if op == "all_reduce":
            dist.all_reduce(self.recv, group=g)
        elif op == "broadcast":
            dist.broadcast(self.recv, src=self.root, group=g)
        elif op == "all_gather":
            _ALL_GATHER(self.recv, self.send, group=g)
        elif op == "reduce_scatter":
            _REDUCE_SCATTER(self.recv, self.send, group=g)
        elif op == "all_to_all":
            dist.all_to_all_single(self.recv, self.send, group=g)
        elif op == "send_recv":
            if self.n == 1:
                self.recv.copy_(self.send)
                return
            reqs = dist.batch_isend_irecv(
                [
                    dist.P2POp(dist.isend, self.send, self.peer_next, group=g),
                    dist.P2POp(dist.irecv, self.recv, self.peer_prev, group=g),
                ]
            )
            for req in reqs:
                req.wait()

    def check(self) -> int:
        """Run once with rank-dependent integer data; return the number of this rank's elements farther from
        the exact answer than the dtype's tolerance (app.bench.tolerance: 0 while every partial sum is exact)."""
        expected, tolerance = self._load_check_data()
        self.run()
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        within = (self.recv.double() - expected).abs() <= tolerance  # NaN is never within
        wrong = int((~within).sum().item())
        self.send.zero_()
        self.recv.zero_()
        return wrong

    def _as_sent(self, values: torch.Tensor) -> torch.Tensor:
        """Exact float64 integers rounded once to the run's dtype, as a sender holds them."""
        return values.to(self.dtype)

    def _load_check_data(self) -> tuple[torch.Tensor, float]:
        """Fill the buffers with this op's check data; return (expected result in float64, tolerance)."""
        n, me, op, chunk = self.n, self.me, self.op, self.chunk

        def full(size: int, value: float) -> torch.Tensor:
            return torch.full((size,), value, dtype=torch.float64, device=self.device)

        # the rank each chunk belongs to, as float64
        rank_ids = torch.arange(n, dtype=torch.float64, device=self.device).repeat_interleave(chunk)
        dtype_name = next(k for k, v in TORCH_DTYPES.items() if v == self.dtype)
        if op == "all_reduce":
            self.recv.copy_(self._as_sent(full(self.count, me + 1.0)))
            total = n * (n + 1) / 2
            return full(self.count, total), reduction_tolerance(dtype_name, n, total, total)
        if op == "reduce_scatter":
            self.send.copy_(self._as_sent((rank_ids + 1) * (me + 1)))
            mine = (me + 1) * n * (n + 1) / 2
            largest = n * n * (n + 1) / 2
            return full(chunk, mine), reduction_tolerance(dtype_name, n, largest, mine)
        if op == "broadcast":
            self.recv.copy_(self._as_sent(full(self.count, 7.0 if me == 0 else 0.0)))
            expected = full(self.count, 7.0)
        elif op == "all_gather":
            self.send.copy_(self._as_sent(full(chunk, me + 1.0)))
            expected = rank_ids + 1
        elif op == "all_to_all":  # the chunk from rank s to rank d holds s·n + d + 1 (never 0)
            self.send.copy_(self._as_sent(rank_ids + me * n + 1))
            expected = rank_ids * n + me + 1
        else:  # send_recv
            self.send.copy_(self._as_sent(full(self.count, me + 1.0)))
            expected = full(self.count, float((me - 1) % n + 1))
        # copies move values unchanged: the expected value is the sender's, rounded the same way
        return self._as_sent(expected).double(), 0.0


def time_collective(coll: Collective, iters: int, warmup_iters: int) -> float:
    """Seconds per call on this rank (nccl-tests times a batch of iterations and divides)."""
    for _ in range(warmup_iters):
        coll.run()
    on_cuda = coll.device.startswith("cuda")
    if on_cuda:
        torch.cuda.synchronize()
    dist.barrier(group=coll.group.handle)
    if on_cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            coll.run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        coll.run()
    return (time.perf_counter() - t0) / iters


def reduce_times(values: list[float], mode: str) -> float:
    if mode == "min":
        return min(values)
    if mode == "max":
        return max(values)
    if mode == "rank0":
        return values[0]
    return sum(values) / len(values)


def _init_process_group(config: CollectiveConfig, local_rank: int) -> tuple[str, str]:
    """Join the process group on the config's backend; (backend, device), the device this rank's GPU on CUDA."""
    backend, device = resolve_backend(config, cuda_device_count())
    if device == "cuda":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
        # Binding the communicator to this rank's GPU lets NCCL set up eagerly and barriers use it.
        dist.init_process_group(backend, device_id=torch.device(device))
    else:
        dist.init_process_group(backend)
    return backend, device


def _measure(coll: Collective, config: CollectiveConfig, device: str, world: int) -> tuple[list[float], int]:
    """Every rank's time for one collective and the wrong elements over all ranks (checked when the config asks)."""
    wrong = coll.check() if config.check else 0
    elapsed = time_collective(coll, config.iters, config.warmup_iters)
    stats = torch.tensor([elapsed, float(wrong)], dtype=torch.float64, device=device)
    gathered = [torch.zeros_like(stats) for _ in range(world)]
    dist.all_gather(gathered, stats)
    return [float(t[0]) for t in gathered], int(sum(float(t[1]) for t in gathered))


def _row_of(
    coll: Collective, group: Group, config: CollectiveConfig, times: list[float], wrong: int
) -> dict[str, Any]:
    """The reported row of rank 0's group; concurrent groups' times are reduced alike."""
    row = collective_row(
        coll.op,
        (coll.size_bytes, coll.count, config.dtype),
        RowGroup(group.size, group.mode, group.nodes, group.ranks_per_node),
        reduce_times(times, config.average),
        reported_busbw_factor(coll.op, group.size),
        wrong,
        spread=(min(times), max(times)),
    )
    row["in_place"] = coll.in_place
    return row


def _ignore(_row: dict[str, Any]) -> None:
    """What a rank other than 0 does with a row: nothing (rank 0 reports)."""


def _sweep(
    config: CollectiveConfig,
    plan: tuple[Sequence[str], Sequence[Group], Sequence[int]],
    where: tuple[str, int],
    skipped: Callable[[dict[str, Any]], None],
) -> Iterator[tuple[Collective, Group]]:
    """Each collective of the sweep (`plan`: ops, groups, sizes), op by op and group by group, on `where` (device,
    global rank); a size that rounds to one already measured in that group is reported to `skipped` instead."""
    (ops, groups, sizes), (device, rank) = plan, where
    for op in ops:
        for group in groups:
            seen: set[int] = set()
            for size in sizes:
                coll = Collective(op, size, TORCH_DTYPES[config.dtype], device, group, rank)
                if coll.size_bytes in seen:
                    skipped({"skipped_size_bytes": size, "reason": "same size after rounding"})
                    continue
                seen.add(coll.size_bytes)
                yield coll, group


def run_worker(config: CollectiveConfig, out_path: str | None, argv: list[str]) -> int:
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    backend, device = _init_process_group(config, int(os.environ.get("LOCAL_RANK", "0")))
    ranks_per_node = config.ranks_per_node or local_world
    if world % ranks_per_node:
        raise ValueError(f"ranks_per_node {ranks_per_node} does not divide the world size {world}")
    hostnames: list[Any] = [None] * world
    dist.all_gather_object(hostnames, socket.gethostname())
    is_root = rank == 0
    sink = ProgressSink(sys.stdout if is_root else None)
    env = collect_environment() if is_root else {}
    if is_root:
        env.update(
            hostnames=sorted(set(hostnames)), world_size=world, ranks_per_node=ranks_per_node, backend=backend
        )
    doc = new_document("collectives", {**config.to_dict(), "backend": backend, "device": device}, argv, env)

    def _write(status: str) -> None:
        finish(doc, status)
        if out_path:
            write_document(doc, out_path)

    def _write_partial(_signum: int) -> None:
        _write("interrupted")
        sink.finish("interrupted", rows=len(doc["rows"]))

    if is_root:
        on_interrupt(_write_partial)
    groups = build_groups(config.groups, world, rank, ranks_per_node)
    if is_root and config.groups in ("inter", "each") and world // ranks_per_node < 2:
        sink.log("one node only: the inter-node group is skipped")
    sizes = size_sweep(config.min_bytes, config.max_bytes, config.step_factor, config.step_bytes)
    ops = expand_ops(config.ops)
    sink.start(len(ops) * len(groups) * len(sizes), kind="collectives", world_size=world, backend=backend)
    wrong_elements = 0  # over every rank and row: any wrong element fails the run (exit 1, as nccl-tests)
    skipped = sink.row if is_root else _ignore
    for coll, group in _sweep(config, (ops, groups, sizes), (device, rank), skipped):
        times, wrong = _measure(coll, config, device, world)
        wrong_elements += wrong
        if is_root:
            row = _row_of(coll, group, config, times, wrong)
            doc["rows"].append(row)
            sink.row(row)
            if out_path:
                write_document(doc, out_path)
        del coll
    dist.barrier()
    if is_root:
        _write("complete")
        sink.finish(doc["status"], summary=doc["summary"], error=doc.get("error", ""))
    dist.destroy_process_group()
    # nccl-tests exits EXIT_FAILURE when any element is wrong (src/common.cu: `if (errors[0] || …)`)
    return 1 if wrong_elements else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="collective sweep worker (run under torchrun)")
    parser.add_argument("--config", required=True, help="CollectiveConfig as JSON")
    parser.add_argument("--out", default=None, help="result document path (rank 0 writes it)")
    parser.add_argument("--argv", default=None, help="the user's command line, as JSON, for the report")
    args = parser.parse_args(argv)
    config = CollectiveConfig.from_dict(json.loads(args.config))
    world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    validate_collectives(config, world, cuda_device_count())
    user_argv = json.loads(args.argv) if args.argv else sys.argv
    return run_worker(config, args.out, user_argv)


if __name__ == "__main__":
    sys.exit(main())
