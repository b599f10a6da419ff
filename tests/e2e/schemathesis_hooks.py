"""Schemathesis hooks for tests/e2e/test_fuzz_schemathesis.py: some generated cases carry a NUL byte.

Schemathesis rarely puts U+0000 into a path or query parameter, yet on PostgreSQL a NUL reaching a query was a
500 on 21 routes. So in the fuzzing phase a case's path parameters, query parameters or JSON body may come with
one string value ending in NUL: the server must answer it (a 422), not fail.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import strategies as st

NUL = "\x00"


def with_nul(values: Any) -> st.SearchStrategy[Any]:
    """`values` as generated, or with one of its string values ending in NUL."""
    if not isinstance(values, dict):
        return st.just(values)
    keys = sorted(k for k, v in values.items() if isinstance(v, str))
    if not keys:
        return st.just(values)
    poisoned = st.sampled_from(keys).map(lambda key: {**values, key: f"{values[key]}{NUL}x"})
    return st.one_of(st.just(values), poisoned)


@schemathesis.hook
def flatmap_path_parameters(_context: Any, path_parameters: Any) -> st.SearchStrategy[Any]:
    return with_nul(path_parameters)


@schemathesis.hook
def flatmap_query(_context: Any, query: Any) -> st.SearchStrategy[Any]:
    return with_nul(query)


@schemathesis.hook
def flatmap_body(_context: Any, body: Any) -> st.SearchStrategy[Any]:
    return with_nul(body)
