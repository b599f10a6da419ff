"""The catalog as the database holds it: built-in rows (seeded from app/catalog) plus users' own rows.

Lookups accept the same aliases as the file catalog (app.catalog) and raise NotFoundError with close matches.
Users may add models (inline spec or Hugging Face config.json) and price rows, and edit or delete the price rows
and models they added; built-in rows are read-only (ReadOnlyError). A user's price rows are theirs alone: who sees
a price row is one rule, `price_visibility`.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from sqlalchemy import event, func, or_, true
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.orm import object_session
from sqlmodel import Session, SQLModel, col, select

import app.catalog as catalog
from app.core import price_age, price_terms
from app.core.errors import Problem, SpecError
from app.core.hardware import GPUSpec, InterconnectSpec
from app.core.hf_config import model_from_hf_config
from app.core.model import ModelSpec, size_problems
from app.errors import NotFoundError
from app.models.base import utcnow
from app.models.catalog import PRICE_COLUMNS, GPUEntry, InterconnectEntry, ModelEntry, PriceRow
from app.schemas.catalog import MAX_GPUS_PER_UNIT, MAX_PRICE_USD, MODEL_LIMITS
from app.schemas.fields import catalog_name_problem, control_char_problem
from app.services.seed import _json_ready
from app.settings import get_settings


class ReadOnlyError(PermissionError):
    """A built-in catalog row cannot be changed or deleted (copy it into a row of your own instead)."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"built-in {kind} {name!r} is read-only; add a row of your own instead")


class NotOwnerError(PermissionError):
    """A user's row may be changed only by the user who added it, or by an administrator."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(
            f"{kind} {name!r} belongs to another user; only they or an administrator may change it"
        )


@dataclass(frozen=True)
class Actor:
    """Who is reading or changing the catalog: their user id (None without an account) and whether they
    administer it."""

    user_id: uuid.UUID | None = None
    is_admin: bool = False


LOCAL_ADMIN = Actor(None, is_admin=True)  # the CLI and other code running on the server itself
PUBLIC = Actor()  # an anonymous caller, or a credential without a user account


def price_visibility(viewer: Actor) -> Any:
    """Which price rows `viewer` sees, as a WHERE clause on PriceRow: the built-in rows, the rows the viewer's
    user added, and for an administrator every row. A user's row is confidential procurement data: to anyone
    else it does not exist. A user's row without an owner (kept from before rows had owners) is an
    administrator's only. Every read of price rows goes through this clause."""
    if viewer.is_admin:
        return true()
    if viewer.user_id is None:
        return col(PriceRow.builtin)
    return or_(col(PriceRow.builtin), col(PriceRow.owner_id) == viewer.user_id)


def quoted_for(viewer: Actor) -> Actor:
    """Whose rows make `viewer`'s default quotes and headline price: the built-in rows and the viewer's own, for
    an administrator too (who sees every row, and may name any of them, but is quoted like everyone else), so
    one user's row never moves another user's figures."""
    return Actor(viewer.user_id)


def check_may_change(row: Any, kind: str, label: str, actor: Actor) -> None:
    """Built-in rows are read-only; a user's row may be changed by its owner or an administrator."""
    if row.builtin:
        raise ReadOnlyError(kind, label)
    if actor.is_admin or (row.owner_id is not None and row.owner_id == actor.user_id):
        return
    raise NotOwnerError(kind, label)


KIND_TABLES: dict[str, type[SQLModel]] = {
    "gpu": GPUEntry,
    "model": ModelEntry,
    "interconnect": InterconnectEntry,
}


# --- name-keyed kinds (GPUs, interconnects, models) ----------------------------------------------------------


def _find_row(session: Session, kind: str, name: str) -> Any:
    table = KIND_TABLES[kind]
    name_col = col(table.name)  # type: ignore[attr-defined]
    row = session.exec(select(table).where(name_col == name)).first()
    if row is not None:
        return row
    canonical = catalog.resolve_name(kind, name)
    if canonical is not None:
        row = session.exec(select(table).where(name_col == canonical)).first()
        if row is not None:
            return row
    key = catalog.normalise_name(name)
    names = list(session.exec(select(name_col)).all())
    for candidate in names:
        if catalog.normalise_name(candidate) == key:
            return session.exec(select(table).where(name_col == candidate)).first()
    candidates = {catalog.normalise_name(n): n for n in names}
    for entry in catalog.entries(kind).values():
        for alias in entry.aliases:
            candidates.setdefault(catalog.normalise_name(alias), entry.name)
    raise NotFoundError(kind, name, catalog.close_matches(name, candidates))


def get_gpu_entry(session: Session, name: str) -> GPUEntry:
    row: GPUEntry = _find_row(session, "gpu", name)
    return row


def get_model_entry(session: Session, name: str) -> ModelEntry:
    row: ModelEntry = _find_row(session, "model", name)
    return row


def get_interconnect_entry(session: Session, name: str) -> InterconnectEntry:
    row: InterconnectEntry = _find_row(session, "interconnect", name)
    return row


# --- lookups of specs: built-in entries without the database where that is exact ----------------------------
#
# A built-in row is seeded from the app/catalog files and is read-only, and names are unique. So when a name
# resolves in the file catalog to an entry whose database row is that same built-in spec, and no user's row
# could be found instead (none whose name matches the entry's name or any alias), the database lookup would
# return exactly the file's spec: `get_gpu`/`get_model`/`get_interconnect` return it without a query. Which
# built-in names are "clean" in that sense is read once per database (connection pool) and kind, and
# forgotten whenever this process writes a GPU, model or interconnect row (ORM flush or commit), so a row
# added, changed or deleted here is seen by the next lookup. Another process can only ever make a name less
# clean by deleting a user's row (that name then keeps going to the database, which stays correct), since
# users' rows may not take a built-in name or alias (`add_model`). Everything else goes to the database.

SPEC_CLASSES: dict[str, Any] = {"gpu": GPUSpec, "model": ModelSpec, "interconnect": InterconnectSpec}
_clean_lock = threading.Lock()
_clean_generation = 0
_clean_names: weakref.WeakKeyDictionary[Any, dict[str, frozenset[str]]] = weakref.WeakKeyDictionary()


def forget_clean_builtins() -> None:
    """Drop what was learnt about built-in rows (called on every catalog-table write in this process)."""
    global _clean_generation
    with _clean_lock:
        _clean_generation += 1
        _clean_names.clear()


def clean_builtin_names(session: Session, kind: str) -> frozenset[str]:
    """Built-in names of `kind` whose lookup the file catalog answers exactly (see above)."""
    pool = session.get_bind().engine.pool
    with _clean_lock:
        known = _clean_names.get(pool, {}).get(kind)
        generation = _clean_generation
    if known is not None:
        return known
    table = KIND_TABLES[kind]
    spec_cls = SPEC_CLASSES[kind]
    rows = session.exec(select(table.name, table.builtin, table.spec)).all()  # type: ignore[attr-defined]
    user_keys = {catalog.normalise_name(name) for name, builtin, _spec in rows if not builtin}
    stored = {name: spec for name, builtin, spec in rows if builtin}
    clean: set[str] = set()
    for name, entry in catalog.entries(kind).items():
        if name not in stored or any(
            catalog.normalise_name(label) in user_keys for label in (name, *entry.aliases)
        ):
            continue
        try:
            if spec_cls.from_dict(stored[name]) == entry.spec:
                clean.add(name)
        except (TypeError, ValueError, KeyError):
            continue
    result = frozenset(clean)
    with _clean_lock:
        if generation == _clean_generation:  # nothing was written while reading: remember it
            _clean_names.setdefault(pool, {})[kind] = result
    return result


def catalog_generation() -> int:
    """A number that changes whenever this process writes a GPU, model or interconnect row."""
    with _clean_lock:
        return _clean_generation


def is_clean_builtin(session: Session, kind: str, name: str) -> bool:
    """True when `name` resolves to a built-in entry that the file catalog answers exactly (no user's row)."""
    return _builtin_spec(session, kind, name) is not None


def _builtin_spec(session: Session, kind: str, name: str) -> Any | None:
    canonical = catalog.resolve_name(kind, name)
    if canonical is None or canonical not in clean_builtin_names(session, kind):
        return None
    return catalog.entries(kind)[canonical].spec


def _mark_catalog_write(_mapper: Any, _connection: Any, target: Any) -> None:
    forget_clean_builtins()
    session = object_session(target)
    if session is not None:
        session.info["clusterplan_catalog_written"] = True


def _after_commit(session: Any) -> None:
    # Forget again once the write is visible to other transactions (a lookup that read just before the
    # commit must not keep its answer).
    if session.info.pop("clusterplan_catalog_written", False):
        forget_clean_builtins()


for _table in KIND_TABLES.values():
    for _event_name in ("after_insert", "after_update", "after_delete"):
        event.listen(_table, _event_name, _mark_catalog_write)
event.listen(OrmSession, "after_commit", _after_commit)


def get_gpu(session: Session, name: str) -> GPUSpec:
    spec: GPUSpec | None = _builtin_spec(session, "gpu", name)
    return spec if spec is not None else GPUSpec.from_dict(get_gpu_entry(session, name).spec)


def get_model(session: Session, name: str) -> ModelSpec:
    spec: ModelSpec | None = _builtin_spec(session, "model", name)
    return spec if spec is not None else ModelSpec.from_dict(get_model_entry(session, name).spec)


def get_interconnect(session: Session, name: str) -> InterconnectSpec:
    spec: InterconnectSpec | None = _builtin_spec(session, "interconnect", name)
    if spec is not None:
        return spec
    return InterconnectSpec.from_dict(get_interconnect_entry(session, name).spec)


def list_gpus(session: Session) -> list[GPUEntry]:
    return list(session.exec(select(GPUEntry).order_by(col(GPUEntry.vendor), col(GPUEntry.name))).all())


def list_interconnects(session: Session) -> list[InterconnectEntry]:
    rows = session.exec(
        select(InterconnectEntry).order_by(col(InterconnectEntry.kind), col(InterconnectEntry.name))
    )
    return list(rows.all())


def list_models(session: Session, query: str | None = None, family: str | None = None) -> list[ModelEntry]:
    """Models, optionally filtered by a search text (name, family or any alias, case-insensitive)."""
    stmt = select(ModelEntry).order_by(col(ModelEntry.family), col(ModelEntry.name))
    if family:
        stmt = stmt.where(func.lower(ModelEntry.family) == family.lower())
    rows = list(session.exec(stmt).all())
    if query and query.strip():
        rows = [row for row in rows if model_matches(row, query)]
    return rows


def model_matches(row: ModelEntry, query: str) -> bool:
    key = catalog.normalise_name(query)
    if not key:
        return True
    labels = [row.name, row.family, *aliases_of("model", row.name)]
    return any(key in catalog.normalise_name(label) for label in labels)


def aliases_of(kind: str, name: str) -> tuple[str, ...]:
    entry = catalog.entries(kind).get(name)
    return entry.aliases if entry else ()


def catalog_extra(kind: str, name: str) -> Mapping[str, Any]:
    """File-catalog facts about a built-in entry (notes, published parameter counts, dates)."""
    entry = catalog.entries(kind).get(name)
    return entry.extra if entry else {}


def catalog_date(kind: str, name: str) -> str:
    entry = catalog.entries(kind).get(name)
    return entry.date if entry else ""


# --- user models ---------------------------------------------------------------------------------------------


def _name_taken(session: Session, name: str) -> bool:
    """A new model may not shadow an existing row or any built-in name or alias."""
    if catalog.resolve_name("model", name) is not None:
        return True
    key = catalog.normalise_name(name)
    return any(catalog.normalise_name(n) == key for n in session.exec(select(col(ModelEntry.name))).all())


def add_model(
    session: Session, spec: ModelSpec, source: str = "", owner_id: uuid.UUID | None = None
) -> ModelEntry:
    """Store a user's model (builtin=False). The name must be new (not a built-in name or alias)."""
    problems = validate_model_spec(spec)
    if _name_taken(session, spec.name):
        problems.append(Problem("name", f"a model named {spec.name!r} already exists; choose another name"))
    if problems:
        raise SpecError(problems)
    row = ModelEntry(
        name=spec.name,
        family=spec.family[:50],
        spec=_json_ready(spec.to_dict()),
        source=(source or spec.source or "added by a user")[:2000],
        builtin=False,
        owner_id=owner_id,
    )
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def add_model_from_hf(
    session: Session, config: Mapping[str, Any], name: str, owner_id: uuid.UUID | None = None
) -> ModelEntry:
    spec = model_from_hf_config(config, name)
    return add_model(session, spec, source=spec.source, owner_id=owner_id)


def delete_model(session: Session, name: str, actor: Actor = LOCAL_ADMIN) -> None:
    row = get_model_entry(session, name)
    check_may_change(row, "model", row.name, actor)
    session.delete(row)
    session.commit()


def _model_size_problems(spec: ModelSpec) -> list[Problem]:
    """Each size a positive integer within MODEL_LIMITS, and a name and family without control characters."""
    problems = size_problems(spec)
    for field_name, limit in MODEL_LIMITS.items():
        value = getattr(spec, field_name, None)
        if isinstance(value, int) and value > limit:
            problems.append(Problem(field_name, f"must be at most {limit:,}, got {value:,}"))
    if spec.moe is not None:
        for field_name in ("num_experts", "expert_ffn_hidden_size", "num_shared_experts"):
            value = getattr(spec.moe, field_name)
            limit = MODEL_LIMITS["ffn_hidden_size" if "ffn" in field_name else "num_experts"]
            if value > limit:
                problems.append(Problem(f"moe.{field_name}", f"must be at most {limit:,}, got {value:,}"))
    for field_name, problem in (
        ("name", catalog_name_problem(spec.name)),
        ("family", control_char_problem(spec.family)),
    ):
        if problem:
            problems.append(Problem(field_name, problem))
    return problems


def _moe_shape_problems(spec: ModelSpec) -> list[Problem]:
    """Positive expert sizes, top-k within the experts, no more leading dense layers than layers."""
    moe = spec.moe
    if moe is None:
        return []
    problems: list[Problem] = []
    if moe.num_experts < 1 or moe.expert_ffn_hidden_size < 1:
        problems.append(Problem("moe", "num_experts and expert_ffn_hidden_size must be positive"))
    elif not 1 <= moe.experts_per_token <= moe.num_experts:
        problems.append(
            Problem("moe.experts_per_token", f"must be between 1 and num_experts ({moe.num_experts})")
        )
    if moe.first_dense_layers > spec.num_layers:
        problems.append(Problem("moe.first_dense_layers", f"is more than num_layers ({spec.num_layers})"))
    return problems


def validate_model_spec(spec: ModelSpec) -> list[Problem]:
    """Shape checks on an inline model spec (positive sizes, heads dividing evenly, top-k within experts)."""
    problems = _model_size_problems(spec)
    if problems:
        return problems
    if spec.num_attention_heads % spec.num_kv_heads:
        problems.append(
            Problem(
                "num_kv_heads",
                f"{spec.num_kv_heads} does not divide num_attention_heads {spec.num_attention_heads}",
            )
        )
    if not spec.head_dim and spec.hidden_size % spec.num_attention_heads:
        problems.append(
            Problem(
                "num_attention_heads",
                f"{spec.num_attention_heads} does not divide hidden_size {spec.hidden_size}",
            )
        )
    return problems + _moe_shape_problems(spec)


# --- price book ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriceFilters:
    """What a price-book listing is narrowed to: a category, a vendor or pricing-model substring, a GPU (name or
    alias), built-in or users' rows."""

    category: str | None = None
    vendor: str | None = None
    gpu: str | None = None
    pricing_model: str | None = None
    builtin: bool | None = None


def is_stale(row: PriceRow, today: date | None = None, stale_days: int | None = None) -> bool:
    """A price older than its category's threshold (app.core.price_age: GPU cloud prices 6 months) is flagged
    so users re-check it before relying on it; a row of a category outside that table (added before the table
    existed) falls back to settings.price_stale_days."""
    if stale_days is None:
        try:
            stale_days = price_age.stale_after_days(row.category)
        except KeyError:
            stale_days = get_settings().price_stale_days
    return (today or date.today()) - row.price_date > timedelta(days=stale_days)


def list_price_rows(
    session: Session,
    filters: PriceFilters | None = None,
    *,
    viewer: Actor,
    offset: int = 0,
    limit: int | None = None,
    owner_id: uuid.UUID | None = None,
) -> tuple[list[PriceRow], int]:
    """Price rows `viewer` sees (price_visibility) matching the filters (case-insensitive; `gpu` accepts aliases)
    and, given, owned by `owner_id`, newest first, and the total."""
    f = filters or PriceFilters()
    category, vendor, gpu, pricing_model, builtin = f.category, f.vendor, f.gpu, f.pricing_model, f.builtin
    stmt = select(PriceRow).where(price_visibility(viewer))
    if category:
        stmt = stmt.where(func.lower(PriceRow.category) == category.strip().lower())
    if vendor:
        stmt = stmt.where(func.lower(PriceRow.vendor).contains(vendor.strip().lower()))
    if pricing_model:
        stmt = stmt.where(func.lower(PriceRow.pricing_model).contains(pricing_model.strip().lower()))
    if builtin is not None:
        stmt = stmt.where(PriceRow.builtin == builtin)
    if owner_id is not None:
        stmt = stmt.where(PriceRow.owner_id == owner_id)
    if gpu:
        canonical = catalog.resolve_name("gpu", gpu) or gpu.strip()
        stmt = stmt.where(
            or_(col(PriceRow.gpu_name) == canonical, func.lower(PriceRow.gpu_name) == gpu.strip().lower())
        )
    total = session.exec(select(func.count()).select_from(stmt.subquery())).one()
    stmt = stmt.order_by(col(PriceRow.category), col(PriceRow.price_date).desc(), col(PriceRow.item))
    stmt = stmt.offset(offset)
    if limit is not None:
        stmt = stmt.limit(limit)
    return list(session.exec(stmt).all()), int(total)


def price_categories(session: Session, *, viewer: Actor) -> list[str]:
    """The categories of the price rows `viewer` sees."""
    return sorted(session.exec(select(PriceRow.category).where(price_visibility(viewer)).distinct()).all())


def _price_id(price_id: uuid.UUID | str) -> uuid.UUID:
    if isinstance(price_id, uuid.UUID):
        return price_id
    try:
        return uuid.UUID(str(price_id))
    except ValueError:
        raise NotFoundError("price row", str(price_id)) from None


def get_price_row(session: Session, price_id: uuid.UUID | str, *, viewer: Actor) -> PriceRow:
    """The price row, if `viewer` sees it: another user's row is NotFoundError, exactly like a missing one."""
    stmt = select(PriceRow).where(col(PriceRow.id) == _price_id(price_id), price_visibility(viewer))
    row = session.exec(stmt).first()
    if row is None:
        raise NotFoundError("price row", str(price_id))
    return row


# editable price columns without NULL, read from the table itself: a null edit of one is refused, not written
PRICE_NOT_NULL = tuple(
    column.name
    for column in sa_inspect(PriceRow).columns
    if column.name in PRICE_COLUMNS and not column.nullable
)


def _price_value_problems(clean: Mapping[str, Any]) -> list[Problem]:
    """Nulls, blanks and numbers out of range among a user's price fields."""
    problems = [
        Problem(key, "must not be null") for key in PRICE_NOT_NULL if key in clean and clean[key] is None
    ]
    for key in ("category", "item", "source", "includes"):
        if clean.get(key) is not None and not str(clean[key]).strip():
            problems.append(Problem(key, "must not be empty"))
    if clean.get("price_usd") is not None and clean["price_usd"] < 0:
        problems.append(Problem("price_usd", "must be a number ≥ 0"))
    if clean.get("usd_per_gpu_hour") is not None and clean["usd_per_gpu_hour"] < 0:
        problems.append(Problem("usd_per_gpu_hour", "must be ≥ 0"))
    if clean.get("gpus_per_unit") is not None and not 1 <= clean["gpus_per_unit"] <= MAX_GPUS_PER_UNIT:
        problems.append(Problem("gpus_per_unit", f"must be between 1 and {MAX_GPUS_PER_UNIT:,}"))
    for key in ("price_usd", "usd_per_gpu_hour"):
        if clean.get(key) is not None and clean[key] > MAX_PRICE_USD:
            problems.append(Problem(key, f"must be at most {MAX_PRICE_USD:,.0f}"))
    return problems


def _resolve_price_gpu(clean: dict[str, Any]) -> Problem | None:
    """The GPU name as the catalog spells it (aliases accepted; blank → none), or the problem naming close ones."""
    if not clean.get("gpu_name"):
        if "gpu_name" in clean:
            clean["gpu_name"] = None
        return None
    canonical = catalog.resolve_name("gpu", clean["gpu_name"])
    if canonical is not None:
        clean["gpu_name"] = canonical
        return None
    suggestions = catalog.close_matches(
        clean["gpu_name"], {catalog.normalise_name(n): n for n in catalog.entries("gpu")}
    )
    hint = f"; did you mean: {', '.join(suggestions)}" if suggestions else ""
    return Problem("gpu_name", f"unknown GPU {clean['gpu_name']!r}{hint}")


def _clean_price_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Check a user's price fields; the GPU name is resolved to its catalog name (aliases accepted)."""
    clean = {k: v for k, v in values.items() if k in PRICE_COLUMNS}
    problems = _price_value_problems(clean)
    gpu_problem = _resolve_price_gpu(clean)
    if gpu_problem is not None:
        problems.append(gpu_problem)
    if isinstance(clean.get("price_date"), str):
        try:
            clean["price_date"] = date.fromisoformat(clean["price_date"])
        except ValueError:
            problems.append(Problem("price_date", "must be an ISO date (YYYY-MM-DD)"))
    if problems:
        raise SpecError(problems)
    for key in ("category", "item", "source", "includes", "vendor", "region", "pricing_model", "unit"):
        if isinstance(clean.get(key), str):
            clean[key] = clean[key].strip()
    return clean


def _row_problems(category: str, pricing_model: str, unit: str, price_date: date | None) -> list[Problem]:
    """A known category, a date no later than today, and for a cloud GPU price its billing term and unit
    (app.core.price_age, app.core.price_terms): never guessed."""
    problems = price_age.row_problems(category, price_date, date.today())
    if category != "cloud_gpu":
        return problems
    try:
        price_terms.parse_term(pricing_model)
    except ValueError as exc:
        problems.append(Problem("pricing_model", str(exc)))
    try:
        price_terms.parse_unit(unit)
    except ValueError as exc:
        problems.append(Problem("unit", str(exc)))
    return problems


def add_price_row(session: Session, values: Mapping[str, Any], owner_id: uuid.UUID | None = None) -> PriceRow:
    clean = _clean_price_values(values)
    missing = [
        k for k in ("category", "item", "price_usd", "price_date", "source", "includes") if k not in clean
    ]
    problems = [Problem(k, "missing (required)") for k in missing]
    if "category" in clean:
        problems += _row_problems(
            clean["category"], clean.get("pricing_model", ""), clean.get("unit", ""), clean.get("price_date")
        )
    if problems:
        raise SpecError(problems)
    row = PriceRow(builtin=False, seed_key=None, owner_id=owner_id, **clean)
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def update_price_row(
    session: Session, price_id: uuid.UUID | str, values: Mapping[str, Any], actor: Actor = LOCAL_ADMIN
) -> PriceRow:
    row = get_price_row(session, price_id, viewer=actor)
    check_may_change(row, "price row", row.item, actor)
    clean = _clean_price_values(values)
    problems = _row_problems(
        clean.get("category", row.category),
        clean.get("pricing_model", row.pricing_model),
        clean.get("unit", row.unit),
        clean.get("price_date", row.price_date),
    )
    if "category" not in clean:  # a row kept from before the category table: edits of other fields go on
        problems = [p for p in problems if p.field != "category"]
    if problems:
        raise SpecError(problems)
    for key, value in clean.items():
        setattr(row, key, value)
    row.updated_at = utcnow()
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def delete_price_row(session: Session, price_id: uuid.UUID | str, actor: Actor = LOCAL_ADMIN) -> None:
    """Delete a user's row: its owner or an administrator (another user's row is NotFoundError, a built-in one
    ReadOnlyError)."""
    row = get_price_row(session, price_id, viewer=actor)
    check_may_change(row, "price row", row.item, actor)
    session.delete(row)
    session.commit()


def gpu_names(session: Session) -> Iterable[str]:
    return session.exec(select(col(GPUEntry.name)).order_by(col(GPUEntry.name))).all()
