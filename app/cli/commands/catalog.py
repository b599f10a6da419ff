"""`clusterplan catalog …`: list and show the catalog (GPUs, models, interconnects, prices), import a HF config."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.output import to_json


class Kind(StrEnum):
    gpus = "gpus"
    models = "models"
    interconnects = "interconnects"
    prices = "prices"


SHOW_KINDS = {"gpu": "gpus", "gpus": "gpus", "model": "models", "models": "models"}
SHOW_KINDS |= {"interconnect": "interconnects", "interconnects": "interconnects"}


def register(root: typer.Typer) -> None:
    app = typer.Typer(
        help="Browse the catalog: GPUs, models, interconnects and the price book.", no_args_is_help=True
    )
    app.command("list", help="List one kind of catalog entry (gpus, models, interconnects, prices).")(
        list_cmd
    )
    app.command("show", help="Show one GPU, model or interconnect by name or alias.")(show_cmd)
    app.command(
        "import-hf", help="Turn a Hugging Face config.json into a model spec (and optionally save it)."
    )(import_hf_cmd)
    root.add_typer(app, name="catalog")


def _session() -> Any:
    """A session on the migrated, seeded database (creates the default SQLite file on first use)."""
    from sqlmodel import Session

    from app.db import get_engine
    from app.startup import prepare_database

    prepare_database()
    return Session(get_engine())


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def _echo_json(data: Any) -> None:
    typer.echo(to_json(data, indent=2, default=str))


def list_cmd(
    kind: Annotated[Kind, typer.Argument(help="what to list")],
    as_json: Annotated[
        bool, typer.Option("--json", help="print JSON (the API's shapes) instead of a table")
    ] = False,
    query: Annotated[
        str | None, typer.Option("--search", "-q", help="models: filter by name, family or alias")
    ] = None,
    category: Annotated[str | None, typer.Option(help="prices: category, e.g. cloud_gpu")] = None,
    vendor: Annotated[str | None, typer.Option(help="prices: vendor substring")] = None,
    gpu: Annotated[str | None, typer.Option(help="prices: GPU name or alias")] = None,
    pricing_model: Annotated[
        str | None, typer.Option(help="prices: pricing model substring, e.g. spot")
    ] = None,
) -> None:
    from app.services import catalog as service
    from app.services import catalog_public as views

    listers: dict[Kind, Callable[[Any], tuple[list[Any], str]]] = {
        Kind.gpus: lambda s: ([views.gpu_public(r) for r in service.list_gpus(s)], "gpus"),
        Kind.models: lambda s: ([views.model_public(r) for r in service.list_models(s, query)], "models"),
        Kind.interconnects: lambda s: (
            [views.interconnect_public(r) for r in service.list_interconnects(s)],
            "interconnects",
        ),
        Kind.prices: lambda s: (
            [
                views.price_public(r)
                for r in service.list_price_rows(  # the operator sees every row (LOCAL_ADMIN)
                    s, service.PriceFilters(category, vendor, gpu, pricing_model), viewer=service.LOCAL_ADMIN
                )[0]
            ],
            "prices",
        ),
    }
    with _session() as session:
        items, _ = listers[kind](session)
    if as_json:
        _echo_json({"data": [i.model_dump(mode="json") for i in items], "count": len(items)})
        return
    typer.echo(_render_list(kind, items))
    typer.echo(f"\n{len(items)} {kind.value}")


def _render_list(kind: Kind, items: Sequence[Any]) -> str:
    if kind is Kind.gpus:
        return _table(
            [
                "name",
                "vendor",
                "BF16 TFLOP/s",
                "FP8 TFLOP/s",
                "FP4 TFLOP/s",
                "HBM GiB",
                "HBM GB/s",
                "scale-up GB/s",
                "TDP W",
            ],
            [
                [
                    g.name,
                    g.vendor,
                    g.peak_tflops.get("bf16"),
                    g.peak_tflops.get("fp8"),
                    g.peak_tflops.get("fp4"),
                    g.hbm_gib,
                    g.hbm_bandwidth_gb_per_s,
                    g.scaleup_bandwidth_gb_per_s,
                    g.tdp_w,
                ]
                for g in items
            ],
        )
    if kind is Kind.models:
        return _table(
            [
                "name",
                "family",
                "layers",
                "hidden",
                "heads",
                "kv heads",
                "FFN",
                "vocab",
                "activation",
                "MoE",
                "params (B)",
            ],
            [
                [
                    m.name,
                    m.family,
                    m.spec["num_layers"],
                    m.spec["hidden_size"],
                    m.spec["num_attention_heads"],
                    m.spec["num_kv_heads"],
                    m.spec["ffn_hidden_size"],
                    m.spec["vocab_size"],
                    m.spec["activation"],
                    f"{m.spec['moe']['num_experts']}e top-{m.spec['moe']['experts_per_token']}"
                    if m.spec["moe"]
                    else "",
                    m.published_params / 1e9 if m.published_params else None,
                ]
                for m in items
            ],
        )
    if kind is Kind.interconnects:
        return _table(
            ["name", "kind", "technology", "GB/s per direction", "latency µs", "domain"],
            [
                [i.name, i.kind, i.technology, i.bandwidth_gb_per_s, i.latency_us, i.domain_size]
                for i in items
            ],
        )
    return _table(
        ["category", "item", "vendor", "pricing", "unit", "USD", "USD/GPU-h", "date", "stale", "confidence"],
        [
            [
                p.category,
                p.item[:48],
                p.vendor[:24],
                p.pricing_model[:24],
                p.unit,
                p.price_usd,
                p.usd_per_gpu_hour,
                p.price_date,
                "STALE" if p.stale else "",
                p.confidence,
            ]
            for p in items
        ],
    )


def show_cmd(
    kind: Annotated[str, typer.Argument(help="gpu, model or interconnect")],
    name: Annotated[str, typer.Argument(help="name or alias (case-insensitive)")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    from app.services import catalog as service
    from app.services import catalog_public as views

    plural = SHOW_KINDS.get(kind.strip().lower())
    if plural is None:
        raise ValueError(f"unknown kind {kind!r}; expected gpu, model or interconnect")
    with _session() as session:
        if plural == "gpus":
            item: Any = views.gpu_public(service.get_gpu_entry(session, name))
        elif plural == "models":
            item = views.model_public(service.get_model_entry(session, name))
        else:
            item = views.interconnect_public(service.get_interconnect_entry(session, name))
    data = item.model_dump(mode="json")
    if as_json:
        _echo_json(data)
        return
    spec = data.pop("spec")
    for key, value in data.items():
        typer.echo(f"{key:>28}: {_cell(value) if not isinstance(value, dict | list) else to_json(value)}")
    typer.echo(f"{'spec (SI units)':>28}: {to_json(spec)}")


def import_hf_cmd(
    config_path: Annotated[Path, typer.Argument(dir_okay=False, help="path to a Hugging Face config.json")],
    name: Annotated[
        str | None, typer.Option("--name", help="model name (default: the file's _name_or_path)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the ModelSpec as JSON")] = False,
    save: Annotated[
        bool, typer.Option("--save", help="store the model in the database as your own row")
    ] = False,
) -> None:
    from app.core.hf_config import model_from_hf_config

    if not config_path.is_file():
        raise ValueError(f"{config_path}: no such file")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{config_path}: not valid JSON ({exc})") from None
    if not name and isinstance(config, dict) and not config.get("_name_or_path"):
        # "…/Llama-3.1-8B/config.json" → "Llama-3.1-8B"; "Llama-3.1-8B.json" → "Llama-3.1-8B"
        name = config_path.resolve().parent.name if config_path.stem == "config" else config_path.stem
    spec = model_from_hf_config(config, name or "")
    if save:
        from app.services import catalog as service

        with _session() as session:
            service.add_model(session, spec, source=f"{spec.source} imported from {config_path.name}")
    if as_json:
        _echo_json(spec.to_dict())
    else:
        for key, value in spec.to_dict().items():
            typer.echo(f"{key:>22}: {value}")
    if save:
        typer.echo(f"saved model {spec.name!r} ({date.today().isoformat()})", err=True)
