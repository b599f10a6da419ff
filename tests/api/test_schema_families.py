"""One home for the I/O schemas: every request and response body is defined in app/schemas, and each resource's
Create and Public bodies share their common fields through a base (the Base / Create / Update / Public families of
fastapi's full-stack template) instead of repeating them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest
from pydantic import BaseModel

import app
from app.main import create_app
from app.schemas import benchmarks, calibration, catalog, cost, nodes, plans, users

# packages that take requests or send responses: none of them may define a body of its own
EDGE_PACKAGES = ("app.api", "app.services", "app.web", "app.cli", "app.auth", "app.hooks")

# every resource the API creates (or updates) and reads: (request body, response body)
FAMILIES: list[tuple[type[BaseModel], type[BaseModel]]] = [
    (catalog.PriceCreate, catalog.PricePublic),
    (catalog.PriceCreate, cost.PriceBookRow),
    (catalog.ModelCreate, catalog.ModelPublic),
    (plans.PlanCreate, plans.PlanSummary),
    (plans.PlanCreate, plans.PlanPublic),
    (nodes.NodeCreate, nodes.NodePublic),
    (benchmarks.BenchmarkCreate, benchmarks.BenchmarkSummary),
    (benchmarks.BenchmarkCreate, benchmarks.BenchmarkPublic),
    (calibration.ProfileFit, calibration.ProfileSummary),
    (calibration.ProfileFit, calibration.ProfilePublic),
    (users.UserCreate, users.UserPublic),
    (users.TokenCreate, users.TokenPublic),
]

# fields one pair shares by name but not by meaning, each with the reason
NOT_SHARED = {
    # ModelCreate.name only names an imported hf_config (optional; an inline spec carries spec.name), and its spec
    # is the architecture to validate (ModelSpecIn), where ModelPublic.spec is the stored ModelSpec as a document
    ("ModelCreate", "ModelPublic"): {"name", "spec"},
    # the fit's fabric is optional (null: fit no scale-out curve); the profile's is what it was fitted for
    ("ProfileFit", "ProfileSummary"): {"fabric"},
    ("ProfileFit", "ProfilePublic"): {"fabric"},
}


def _modules(package: str) -> list[ModuleType]:
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
    return [importlib.import_module(name) for name in names]


def _models_defined_in(module: ModuleType) -> list[str]:
    found = []
    for name, obj in vars(module).items():
        if not (inspect.isclass(obj) and issubclass(obj, BaseModel)) or obj.__module__ != module.__name__:
            continue
        if obj.__pydantic_generic_metadata__["origin"] is not None:
            continue  # ListEnvelope[X]: a parametrisation of app.schemas.envelope.ListEnvelope, made where used
        found.append(f"{module.__name__}.{name}")
    return found


def _declared_in(model: type[BaseModel], field: str) -> type:
    """The class of `model`'s MRO whose body declares `field` (the first in the MRO: a redeclaration wins)."""
    return next(cls for cls in model.__mro__ if field in getattr(cls, "__annotations__", {}))


def _repeated(create: type[BaseModel], public: type[BaseModel]) -> set[str]:
    common = set(create.model_fields) & set(public.model_fields)
    return {f for f in common if _declared_in(create, f) is not _declared_in(public, f)}


@pytest.mark.parametrize("package", EDGE_PACKAGES)
def test_no_body_is_defined_outside_app_schemas(package: str) -> None:
    outside = [name for module in _modules(package) for name in _models_defined_in(module)]
    assert outside == [], f"request/response models defined outside app/schemas: {outside}"


def test_every_openapi_schema_comes_from_app_schemas() -> None:
    """Each component of the OpenAPI document is a model of app/schemas (or FastAPI's own error bodies)."""
    spec = create_app().openapi()
    homes = {}
    for module in _modules("app.schemas"):
        for qualified in _models_defined_in(module):
            homes[qualified.rsplit(".", 1)[1]] = module.__name__
    fastapi_own = {"HTTPValidationError", "ValidationError"}
    strays = []
    for component in spec["components"]["schemas"]:
        name = component.removesuffix("-Input").removesuffix("-Output")
        base = name.split("_")[0] if name.startswith("ListEnvelope_") else name
        if name in fastapi_own or name.startswith("Body_") or base in homes:
            continue
        strays.append(component)
    assert strays == []


@pytest.mark.parametrize(("create", "public"), FAMILIES, ids=lambda m: m.__name__)
def test_create_and_public_share_a_base(create: type[BaseModel], public: type[BaseModel]) -> None:
    allowed = NOT_SHARED.get((create.__name__, public.__name__), set())
    repeated = _repeated(create, public) - allowed
    assert repeated == set(), f"{create.__name__} and {public.__name__} each declare {sorted(repeated)}"
    if not allowed:  # the pairs without exceptions share at least one field through their base
        assert set(create.model_fields) & set(public.model_fields)


def test_the_check_flags_a_pair_that_repeats_its_fields() -> None:
    """The family check itself: two bodies that each declare `name` are flagged, a shared base is not."""

    class ThingCreate(BaseModel):
        name: str

    class ThingPublic(BaseModel):
        id: int
        name: str

    class ThingBase(BaseModel):
        name: str

    class SharedCreate(ThingBase):
        pass

    class SharedPublic(ThingBase):
        id: int

    assert _repeated(ThingCreate, ThingPublic) == {"name"}
    assert _repeated(SharedCreate, SharedPublic) == set()


def test_the_price_views_share_every_common_field() -> None:
    """The catalog's rows and the cost service's price book declare no field twice, price_date included."""
    assert _repeated(catalog.PricePublic, cost.PriceBookRow) == set()
    assert set(catalog.PricePublic.model_fields) > set(cost.PriceBookRow.model_fields)


_ITEM = (
    "id",
    "category",
    "item",
    "vendor",
    "region",
    "pricing_model",
    "unit",
    "price_usd",
    "usd_per_gpu_hour",
)
_PRICE_PUBLIC_ORDER = (*_ITEM, "gpu_name", "gpus_per_unit", "price_date", "source", "confidence", "includes")
_PRICE_PUBLIC_ORDER += ("notes", "builtin", "owner_id", "stale", "age_days")
_PRICE_BOOK_ORDER = (*_ITEM, "gpu_name", "price_date", "source", "confidence", "stale", "age_days")


@pytest.mark.parametrize(
    ("model", "leading"),
    [
        (catalog.PricePublic, list(_PRICE_PUBLIC_ORDER)),
        (cost.PriceBookRow, list(_PRICE_BOOK_ORDER)),
        (plans.PlanSummary, ["id", "name", "notes", "owner"]),
        (users.UserPublic, ["id", "email", "is_admin", "is_active"]),
        (users.TokenPublic, ["id", "name", "prefix", "scopes", "created_at"]),
        (nodes.NodePublic, ["id", "name", "token_prefix"]),
        (benchmarks.BenchmarkSummary, ["id", "kind", "status"]),
        (calibration.ProfileSummary, ["id", "name", "version"]),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_public_bodies_keep_their_field_order(model: type[BaseModel], leading: list[str]) -> None:
    """Sharing a base keeps each response's keys in the order clients have always received them."""
    assert list(model.model_fields)[: len(leading)] == leading


def test_benchmark_public_keeps_attempts_before_params() -> None:
    fields = list(benchmarks.BenchmarkPublic.model_fields)
    assert (
        fields.index("finished_at")
        < fields.index("attempts")
        < fields.index("params")
        < fields.index("log_tail")
    )


def test_each_dependency_alias_is_defined_once() -> None:
    """ReadDep, WriteDep, PagingDep … are each assigned in exactly one module of the app."""
    import re
    from pathlib import Path

    root = Path(app.__file__).parent
    pattern = re.compile(r"^(\w+Dep)\s*=", re.MULTILINE)
    homes: dict[str, list[str]] = {}
    for path in root.rglob("*.py"):
        for alias in pattern.findall(path.read_text(encoding="utf-8")):
            homes.setdefault(alias, []).append(str(path.relative_to(root)))
    assert {"ReadDep", "WriteDep", "PagingDep", "SessionDep"} <= set(homes)
    assert {alias: where for alias, where in homes.items() if len(where) > 1} == {}
