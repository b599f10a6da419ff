"""Field types every request schema shares: safe text, catalog names, finite numbers and free-form JSON.

What the boundary refuses, and why:
- control characters (Unicode category Cc: U+0000-U+001F, U+007F-U+009F) in one-line text. PostgreSQL cannot
  store U+0000 in text or jsonb at all, a name carrying a newline cannot go into a Location header, and none of
  them has a use in a name, label or identifier. Free text (notes, descriptions) may hold tab, newline and
  carriage return.
- NaN and ±Infinity anywhere: JSON has no such numbers (RFC 8259 §6), so a stored value could never be read back
  as JSON, and PostgreSQL's jsonb refuses them.
- integers outside signed 64 bits inside free-form JSON: the widest integer either database stores (SQLite
  INTEGER, PostgreSQL BIGINT).

Each check returns a message naming the reason (the caller names the field), or None when the value is fine.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

FREE_TEXT_CONTROLS = frozenset("\t\n\r")  # what a multi-line text box sends besides printable text
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # SQLite INTEGER and PostgreSQL BIGINT
# User-given catalog names: letters, digits, spaces and the punctuation of real part and model names
# ("A100-80GB", "Llama-3.1-8B", "DeepSeek-V3 (MTP)", "gpt-oss:120b", "Qwen2.5_7B+lora", "A, B"). No '/' (a name is a
# URL path segment: '/api/v1/models/a/b' can never reach the model), no '%', '?' or '#' (URL syntax), no quotes.
_NAME_CHAR = r"[A-Za-z0-9._+():, -]"
CATALOG_NAME_PATTERN = r"^[A-Za-z0-9._+():,-]([A-Za-z0-9._+():, -]*[A-Za-z0-9._+():,-])?$"  # no outer spaces
CATALOG_NAME_MAX = 100  # the name columns (app.models.catalog: max_length=100)
_CATALOG_NAME = re.compile(CATALOG_NAME_PATTERN)


def control_char_problem(text: str, allowed: frozenset[str] = frozenset()) -> str | None:
    """'contains control character U+0000 at position 3' for the first Cc character not in `allowed`."""
    for position, char in enumerate(text):
        if char not in allowed and unicodedata.category(char) == "Cc":
            return f"contains control character U+{ord(char):04X} at position {position}"
    return None


def catalog_name_problem(name: str) -> str | None:
    """Why `name` cannot be a user's catalog name (models, price labels), or None."""
    if not name.strip():
        return "must not be blank"
    if len(name) > CATALOG_NAME_MAX:
        return f"must be at most {CATALOG_NAME_MAX} characters"
    bad = next((c for c in name if not re.fullmatch(_NAME_CHAR, c)), None)
    if bad is not None:
        return (
            f"contains {bad!r} (U+{ord(bad):04X}); use letters, digits, spaces and . _ - + ( ) : , "
            "(no '/': the name is part of the model's URL)"
        )
    if not _CATALOG_NAME.match(name):
        return "must not start or end with a space"
    return None


# Deepest nesting a free-form JSON value may have. Real documents (Hugging Face configs, benchmark results, node
# inventories, scenarios) nest under ten levels; Pydantic's serializer stops at 255 and Python's parser at about
# 1,000 (RecursionError), so anything deeper is refused here as a 422 on the field before it is stored.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"


def json_value_problems(
    value: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """(location, reason) for every NaN/Infinity, out-of-range integer and NUL inside a JSON-like value, and for
    nesting deeper than MAX_JSON_DEPTH (reported once, at the first level past it).

    Only NUL is refused in strings here: free-form documents (benchmark results, node inventories) may carry tool
    output with other control characters, which both databases store.
    """
    if len(path) > MAX_JSON_DEPTH and isinstance(value, (dict, list, tuple)):
        yield path[:MAX_JSON_DEPTH], TOO_DEEP
        return
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path, f"must be a finite number, got {value}"
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            yield path, "integer out of range: must fit in 64 bits"
    elif isinstance(value, str):
        if "\x00" in value:
            yield path, f"contains control character U+0000 at position {value.index(chr(0))}"
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                yield (*path, key), "key contains control character U+0000"
            yield from json_value_problems(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from json_value_problems(item, (*path, index))


def parse_json_text(text: str) -> Any:
    """json.loads for text a user pasted or posted: ValueError with the reason for malformed text and for nesting
    deeper than MAX_JSON_DEPTH (including past the parser's own recursion limit)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    if any(reason == TOO_DEEP for _, reason in json_value_problems(value)):
        raise ValueError(TOO_DEEP)
    return value


def _location(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


def _check_json(value: Any) -> Any:
    for path, reason in json_value_problems(value):
        raise ValueError(f"{_location(path)}: {reason}" if path else reason)
    return value


def _check_safe(value: str) -> str:
    problem = control_char_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _check_free_text(value: str) -> str:
    problem = control_char_problem(value, FREE_TEXT_CONTROLS)
    if problem:
        raise ValueError(problem)
    return value


def _check_catalog_name(value: str) -> str:
    problem = catalog_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


# one-line text: labels, identifiers, names, filters
SafeStr = Annotated[str, AfterValidator(_check_safe)]
# a catalog row named in a request (GPU, model, fabric preset, profile): one-line text no longer than the name
# columns, as no longer name can be found (app.models.catalog: max_length=100)
CatalogRef = Annotated[str, Field(max_length=CATALOG_NAME_MAX), AfterValidator(_check_safe)]
# multi-line text: notes, descriptions (tab, newline and carriage return allowed)
FreeText = Annotated[str, AfterValidator(_check_free_text)]
# a name a user gives a catalog row (it becomes a URL path segment)
CatalogName = Annotated[
    str,
    # the pattern is documented (OpenAPI) and checked by _check_catalog_name, which says which character is wrong
    Field(min_length=1, max_length=CATALOG_NAME_MAX, json_schema_extra={"pattern": CATALOG_NAME_PATTERN}),
    AfterValidator(_check_catalog_name),
]
# free-form JSON objects (inline specs, runner parameters, scenario documents)
JsonObject = Annotated[dict[str, Any], AfterValidator(_check_json)]


class RequestModel(BaseModel):
    """Base of request bodies: unknown fields refused, and no NaN or Infinity in any float field."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
