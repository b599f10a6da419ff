"""The first page request of a process waits for nothing the app could do before it: creating the app compiles every
template and reads the catalog files (with libyaml's parser, as safe_load reads them), so the builder's first GET
compiles no template and reads no catalog file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import app.catalog
import app.catalog.fabrics
from app.web import warm_up
from app.web.templating import templates

CATALOG_DIR = Path(app.catalog.__file__).parent


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the templates Jinja compiles from now on (its cache emptied first)."""
    compiled: list[str] = []
    original = templates.env.compile

    def counting(source: Any, name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        compiled.append(str(name))
        return original(source, name, *args, **kwargs)

    templates.env.cache.clear()  # type: ignore[union-attr]
    monkeypatch.setattr(templates.env, "compile", counting)
    yield compiled


def _refuse_catalog_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> Any:
        raise AssertionError("a catalog file was read while answering a request")

    monkeypatch.setattr(app.catalog, "load_yaml", refuse)
    monkeypatch.setattr(app.catalog.fabrics, "load_yaml", refuse)


def test_warm_up_compiles_every_template_so_the_first_page_compiles_none(
    client: Any, compiles: list[str]
) -> None:
    warm_up()
    assert sorted(compiles) == sorted(templates.env.list_templates(extensions=["html"]))
    compiles.clear()
    for url in ("/plans/new", "/network?nodes=2", "/cost?nodes=2", "/benchmarks"):
        assert client.get(url).status_code == 200, url
    assert compiles == []


def test_warm_up_reads_the_catalog_so_the_first_page_reads_no_file(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for loader in (
        app.catalog.gpu_entries,
        app.catalog.model_entries,
        app.catalog.interconnect_entries,
        app.catalog.fabrics._presets,
    ):
        loader.cache_clear()
    warm_up()
    _refuse_catalog_reads(monkeypatch)
    page = client.get("/plans/new?model=llama-3-70b&gpu=H100-SXM&nodes=8&fabric=roce-8x400")
    assert page.status_code == 200 and 'id="results"' in page.text
    assert client.get("/network?nodes=2&fabric=ndr").status_code == 200


@pytest.mark.parametrize("name", sorted(p.name for p in CATALOG_DIR.glob("*.yaml")))
def test_load_yaml_reads_a_catalog_file_as_safe_load_does(name: str) -> None:
    text = (CATALOG_DIR / name).read_text(encoding="utf-8")
    assert app.catalog.load_yaml(text) == yaml.safe_load(text)


def test_load_yaml_is_a_safe_loader() -> None:
    with pytest.raises(yaml.constructor.ConstructorError):
        app.catalog.load_yaml("!!python/object/apply:os.system ['true']")
    assert app.catalog.load_yaml("- {a: 1, b: [x, 2.5]}") == [{"a": 1, "b": ["x", 2.5]}]
