"""Message sizes with nccl-tests semantics: `1K`, `16M`, `1G` (binary multiples), sweeps by factor or step."""

from __future__ import annotations

import re

from app.core.errors import ProblemCollector

_SUFFIX = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """Bytes for `text` ("1K" = 1024, as nccl-tests' parsesize does); raises ValueError on junk."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must be ≥ 0, got {text}")
        return text
    match = _SIZE_RE.match(str(text))
    if not match:
        raise ValueError(f"cannot read size {text!r}; use bytes or a suffix K, M, G (e.g. 1K, 16M)")
    number, suffix = match.groups()
    return int(float(number) * _SUFFIX[suffix.upper()])


def format_size(size_bytes: int) -> str:
    for suffix, factor in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if size_bytes >= factor and size_bytes % factor == 0:
            return f"{size_bytes // factor}{suffix}"
    return str(size_bytes)


def size_sweep(min_bytes: int, max_bytes: int, step_factor: float = 2.0, step_bytes: int = 0) -> list[int]:
    """Sizes from min to max inclusive: multiply by step_factor, or add step_bytes when given (nccl-tests -f/-i)."""
    problems = ProblemCollector()
    problems.check(min_bytes > 0, "minbytes", "must be > 0")
    problems.check(max_bytes >= min_bytes, "maxbytes", f"must be ≥ minbytes ({min_bytes})")
    problems.check(step_bytes > 0 or step_factor > 1, "stepfactor", "must be > 1 (or give stepbytes > 0)")
    problems.check(step_bytes >= 0, "stepbytes", "must be ≥ 0")
    problems.raise_if_any()
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        nxt = size + step_bytes if step_bytes else int(size * step_factor)
        size = max(nxt, size + 1)
        if len(sizes) > 10_000:
            break
    return sizes


def aligned_count(size_bytes: int, element_bytes: int, divisor: int) -> int:
    """Element count for a buffer of size_bytes rounded down so it splits evenly across `divisor` ranks."""
    count = size_bytes // element_bytes
    return max(divisor, count - count % divisor)
