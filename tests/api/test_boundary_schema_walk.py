"""Every value a request carries has a bound: a walk over the app's OpenAPI document.

The walk visits every request body schema (following $ref, allOf/anyOf/oneOf, arrays, nested objects and
additionalProperties) and every query and path parameter, of the JSON API and of the HTML pages (which are left
out of the published document, so the walk builds a second one that includes them). It asserts that
- every integer has a maximum: an unbounded integer reaches the database as a value neither SQLite INTEGER nor
  PostgreSQL BIGINT can hold, or drives a loop or an allocation of that size;
- every string has a maxLength, a pattern, an enum/const or a format (uuid, date, date-time);
- every array has a maxItems.
Each failure reads "METHOD path: json-pointer: what is missing".

OpenAPI cannot say whether a number may be NaN or Infinity, so a second walk goes over the validators themselves
(pydantic-core schemas of every request body and parameter): every float must refuse them.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.utils import get_flat_params
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from app.core.errors import SpecError
from app.discovery import iter_modules
from app.main import create_app
from app.schemas import network as net_schema
from app.services import network
from tests.auth_support import bearer, issue_token

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# fixed-shape strings, or file uploads (whose size the request limit caps)
BOUNDED_FORMATS = frozenset({"uuid", "date", "date-time", "time", "binary"})


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    seen: set[str] = set()
    while "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/") and ref not in seen, ref
        seen.add(ref)
        target: Any = document
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        schema = target
    return schema


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def problems(
    document: dict[str, Any], schema: dict[str, Any], pointer: str, visiting: frozenset[str] = frozenset()
) -> Iterator[str]:
    """'pointer: what is missing' for every unbounded integer, string and array under `schema`."""
    ref = schema.get("$ref")
    if ref is not None:
        if ref in visiting:  # a recursive schema: its body is checked where it was first entered
            return
        visiting = visiting | {ref}
    schema = _resolve(document, schema)
    for key in ("allOf", "anyOf", "oneOf"):
        for index, part in enumerate(schema.get(key, [])):
            yield from problems(document, part, f"{pointer}/{key}/{index}", visiting)
    if "not" in schema:
        yield from problems(document, schema["not"], f"{pointer}/not", visiting)
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind} if kind else set()
    if "integer" in kinds and not _integer_bounded(schema):
        yield f"{pointer}: integer without maximum"
    if "string" in kinds and not _string_bounded(schema):
        yield f"{pointer}: string without maxLength, pattern, enum or format"
    if "array" in kinds:
        if "maxItems" not in schema:
            yield f"{pointer}: array without maxItems"
        items = schema.get("items")
        if isinstance(items, dict):
            yield from problems(document, items, f"{pointer}/items", visiting)
        for index, item in enumerate(schema.get("prefixItems", [])):
            yield from problems(document, item, f"{pointer}/prefixItems/{index}", visiting)
    for name, sub in schema.get("properties", {}).items():
        yield from problems(document, sub, f"{pointer}/properties/{_escape(name)}", visiting)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        yield from problems(document, extra, f"{pointer}/additionalProperties", visiting)


def _integer_bounded(schema: dict[str, Any]) -> bool:
    return any(key in schema for key in ("maximum", "exclusiveMaximum", "enum", "const"))


def _string_bounded(schema: dict[str, Any]) -> bool:
    if any(key in schema for key in ("maxLength", "pattern", "enum", "const")):
        return True
    return schema.get("format") in BOUNDED_FORMATS


def operation_problems(document: dict[str, Any]) -> Iterator[str]:
    for template, item in document["paths"].items():
        shared = item.get("parameters", [])
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            where = f"{method.upper()} {template}"
            for parameter in [*shared, *operation.get("parameters", [])]:
                parameter = _resolve(document, parameter)
                if parameter.get("in") not in ("query", "path"):
                    continue
                pointer = f"/parameters/{parameter['in']}/{_escape(parameter['name'])}"
                for found in problems(document, parameter.get("schema", {}), pointer):
                    yield f"{where}: {found}"
            body = _resolve(document, operation.get("requestBody", {}))
            for media, content in body.get("content", {}).items():
                pointer = f"/requestBody/content/{_escape(media)}/schema"
                for found in problems(document, content.get("schema", {}), pointer):
                    yield f"{where}: {found}"


def pages_document() -> dict[str, Any]:
    """The OpenAPI document of the HTML pages, which the app leaves out of its own (app.web.build_web_router)."""
    pages = FastAPI()
    for module in iter_modules("app.web.pages"):
        router = getattr(module, "router", None)
        if router is not None:
            pages.include_router(router)
    return pages.openapi()


# parts of a core schema that hold no validator: the model class, JSON-schema hooks, defaults, serializers
NOT_VALIDATORS = frozenset({"cls", "metadata", "config", "default", "serialization", "ref", "schema_ref"})


def nan_floats(schema: Any, config: dict[str, Any], where: tuple[str, ...] = ()) -> Iterator[str]:
    """'Model.field' for every float validator under `schema` that lets NaN and Infinity through.

    A float takes allow_inf_nan from its own schema, else from the config of the model it belongs to (pydantic's
    default: allowed).
    """
    if isinstance(schema, list):
        for item in schema:
            yield from nan_floats(item, config, where)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") in ("model", "dataclass"):
        config = schema.get("config", {})
        where = (*where, schema["cls"].__name__)
    if schema.get("type") == "float" and schema.get("allow_inf_nan", config.get("allow_inf_nan", True)):
        yield ".".join(where) or "(the value)"
    for key, value in schema.items():
        if key == "fields" and isinstance(value, dict):
            for name, field in value.items():
                yield from nan_floats(field, config, (*where, name))
        elif key not in NOT_VALIDATORS:
            yield from nan_floats(value, config, where)


def request_fields(app: FastAPI) -> Iterator[tuple[str, Any]]:
    """('METHOD path', field) for the body and every parameter (path, query, header, cookie) of every route."""
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute):
            continue
        where = f"{','.join(sorted(route.methods))} {route.path}"
        body = [route.body_field] if route.body_field is not None else []
        for field in [*get_flat_params(route.dependant), *body]:
            yield where, field


def validator_of(field: Any) -> Any:
    info = field.field_info
    return TypeAdapter(Annotated[info.annotation, info]).core_schema


def test_every_float_a_request_carries_is_finite() -> None:
    """A float field lets "NaN" and "Infinity" through unless it or its model says allow_inf_nan=False."""
    app = create_app()
    pages = FastAPI()
    for module in iter_modules("app.web.pages"):
        router = getattr(module, "router", None)
        if router is not None:
            pages.include_router(router)
    found = [
        f"{where}: {field.name}: {place}: allows NaN and Infinity"
        for application in (app, pages)
        for where, field in request_fields(application)
        for place in nan_floats(validator_of(field), {})
    ]
    assert not found, "\n".join(sorted(set(found)))


def test_nan_walk_finds_an_open_float() -> None:
    from pydantic import BaseModel, ConfigDict

    class Closed(BaseModel):
        model_config = ConfigDict(allow_inf_nan=False)
        x: float

    class Open(BaseModel):
        inner: Closed
        y: list[float]

    assert list(nan_floats(TypeAdapter(Open).core_schema, {})) == ["Open.y"]
    assert list(nan_floats(TypeAdapter(Closed).core_schema, {})) == []


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app()


def test_published_document_bounds_every_value(app: FastAPI) -> None:
    found = list(operation_problems(app.openapi()))
    assert not found, "\n".join(found)


def test_html_pages_bound_every_value() -> None:
    document = pages_document()
    assert len(document["paths"]) > 10, "the pages did not reach the walk"
    found = list(operation_problems(document))
    assert not found, "\n".join(found)


def test_walk_finds_what_is_missing() -> None:
    """The walk itself reports each kind of gap, through $ref, anyOf, arrays and additionalProperties."""
    document = {
        "paths": {
            "/x/{n}": {
                "post": {
                    "parameters": [{"in": "path", "name": "n", "schema": {"type": "integer"}}],
                    "requestBody": {
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/B"}}}
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "B": {
                    "type": "object",
                    "properties": {
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "maybe": {"anyOf": [{"type": "integer", "maximum": 3}, {"type": "integer"}]},
                        "map": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
                        "deep": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "self": {"$ref": "#/components/schemas/B"},
                        "day": {"type": "string", "format": "date"},
                    },
                }
            }
        },
    }
    body = "/requestBody/content/application~1json/schema"
    assert sorted(operation_problems(document)) == sorted(
        [
            "POST /x/{n}: /parameters/path/n: integer without maximum",
            f"POST /x/{{n}}: {body}/properties/tags: array without maxItems",
            f"POST /x/{{n}}: {body}/properties/tags/items: string without maxLength, pattern, enum or format",
            f"POST /x/{{n}}: {body}/properties/maybe/anyOf/1: integer without maximum",
            f"POST /x/{{n}}: {body}/properties/deep/additionalProperties: integer without maximum",
        ]
    )


CLUSTER = {"gpu": "H100-SXM", "nodes": 1}
JOB = uuid.UUID("00000000-0000-4000-8000-000000000001")  # no such job or plan: bounds come before lookups


@pytest.mark.parametrize(
    ("method", "url", "body", "loc"),
    [
        (
            "PUT",
            f"/api/v1/plans/{JOB}/sharing",
            {"visibility": "users", "users": ["a" * 321]},
            ["body", "users", 0],
        ),
        (
            "POST",
            "/api/v1/network/bom",
            {"nodes": 4, "oversubscription": [1.0] * 9},
            ["body", "oversubscription"],
        ),
        (
            "POST",
            "/api/v1/plan",
            {
                "model": "Llama-3-8B",
                "cluster": CLUSTER,
                "training": {"seq_len": 4096},
                "global_batch": 64,
                "constraints": {"tp": [2**21]},
            },
            ["body", "constraints", "tp", 0],
        ),
        (
            "POST",
            "/api/v1/plan/sizes",
            {"model": "x" * 101, "cluster": CLUSTER, "training": {"seq_len": 1}},
            None,
        ),
        ("GET", f"/api/v1/benchmarks/{JOB}/events?after={2**31}", None, ["query", "after"]),
        ("GET", f"/api/v1/plans/{JOB}/revisions/{2**31}", None, ["path", "revision"]),
        ("GET", f"/api/v1/plans/compare?ids={JOB}&ids={JOB}&revs={2**31}", None, ["query", "revs", 0]),
        ("GET", f"/api/v1/nodes/{'n' * 201}", None, ["path", "node_ref"]),
        ("GET", f"/plans?offset={2**53 + 1}", None, ["query", "offset"]),
    ],
)
def test_values_past_a_bound_are_a_422_naming_them(
    db_url: str, method: str, url: str, body: Any, loc: list[str | int] | None
) -> None:
    client = TestClient(create_app(), headers=bearer(issue_token("walk-admin@example.com", ["admin"])))
    response = client.request(method, url, json=body)
    assert response.status_code == 422, response.text
    locations = [error["loc"] for error in response.json()["detail"]]
    if loc is None:  # the model is a union of a name and an inline object: both branches are named
        assert any(where[:2] == ["body", "model"] for where in locations), locations
    else:
        assert loc in locations, locations


def test_network_schemas_refuse_nan_from_a_file() -> None:
    """The CLI validates JSON files with these schemas, and Python's json reads NaN and Infinity."""
    with pytest.raises(SpecError) as caught:
        network.parse(
            net_schema.CollectiveIn, {"op": "all_reduce", "message_bytes": math.nan, "cluster": CLUSTER}
        )
    assert [problem.field for problem in caught.value.problems] == ["message_bytes"]
    with pytest.raises(SpecError) as caught:
        network.parse(net_schema.BomIn, {"nodes": 4, "prices": {"switch_usd": math.inf}})
    assert [problem.field for problem in caught.value.problems] == ["prices.switch_usd"]
