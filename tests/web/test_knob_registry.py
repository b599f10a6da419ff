"""Every scenario knob is declared once (app.core.knobs): the OpenAPI schema, the builder's rendered inputs, the
command line's options and the saved-plan labels show the registry's range, help, label and unit, and no other
file writes a knob's help text or range again."""

from __future__ import annotations

import ast
import html
import re
from pathlib import Path
from typing import Any

import pytest
import typer

from app.core.knobs import KNOBS, MAX_PARALLEL, Knob, knob
from app.services.plan_fields import FIELD_INFO
from app.web.pages._builder import (
    BUILDER_KNOBS,
    BuilderState,
    parse_state,
    scenario_to_state,
    state_to_scenario,
)

ROOT = Path(__file__).resolve().parents[2]
SECTION_MODELS = {"cluster": "ClusterIn", "layout": "LayoutIn", "training": "TrainingIn"}
# the files that once wrote the knobs' help and ranges themselves
WIRING = (
    "app/schemas/scenario.py",
    "app/schemas/search.py",
    "app/cli/commands/search.py",
    "app/web/pages/_builder.py",
    "templates/plan_new.html",
    "app/services/plan_fields.py",
)


def _int_branch(prop: dict[str, Any]) -> dict[str, Any]:
    """The number branch of an optional field's anyOf (the field itself otherwise)."""
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") in ("integer", "number"):
            return dict(branch)
    raise AssertionError(f"no number branch in {prop}")


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    from app.main import create_app

    return create_app().openapi()


@pytest.mark.parametrize("k", KNOBS, ids=lambda k: k.path)
def test_the_openapi_schema_shows_the_registry(openapi: dict[str, Any], k: Knob) -> None:
    prop = openapi["components"]["schemas"][SECTION_MODELS[k.section]]["properties"][k.name]
    number = _int_branch(prop)
    assert prop["description"] == k.help
    assert (number.get("minimum"), number.get("exclusiveMinimum"), number.get("maximum")) == (
        k.ge,
        k.gt,
        k.le,
    )
    assert number["type"] == {"int": "integer", "float": "number"}[k.kind]
    assert ("anyOf" in prop) == k.optional  # None (unset) is allowed exactly where the registry says so


def test_the_builder_renders_the_registry(client: Any) -> None:
    page = client.get("/plans/new").text
    for name, k in BUILDER_KNOBS.items():
        tag = re.search(rf'<input id="f-{name}" [^>]*>', page, re.S)
        assert tag, name
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', tag.group(0)))
        assert float(attrs["min"]) == k.builder_min, name
        assert float(attrs["max"]) == k.le, name
        assert float(attrs["step"]) == (k.step or 1), name
        label = re.search(rf'<label for="f-{name}">(.*?)</label>', page, re.S)
        assert label and html.unescape(label.group(1)).startswith(f'{k.label} <span class="unit">({k.unit})')
        hint = re.search(rf'<span id="d-{name}" class="hint">(.*?)</span>', page, re.S)
        assert hint and html.unescape(hint.group(1)) == k.builder_hint, name


def test_the_builder_refuses_what_the_registry_refuses() -> None:
    top = knob("layout.tp").le
    assert parse_state({"tp": str(top)}).tp == top
    refused = parse_state({"tp": str(MAX_PARALLEL + 1)})
    assert refused.errors["tp"] == "a whole number from 1 to 1,048,576" == knob("layout.tp").range_text()
    assert parse_state({"etp": "0"}).errors == {}  # 0 stands for unset where the field may be unset
    assert "nodes" in parse_state({"nodes": "0"}).errors


def test_the_command_line_shows_the_registry() -> None:
    from app.cli.main import build_cli

    command: Any = typer.main.get_command(build_cli())
    params = {opt: p for p in command.commands["search"].params for opt in getattr(p, "opts", ())}
    flagged = [k for k in KNOBS if k.cli_flag]
    assert {k.cli_flag for k in flagged} >= {"--nodes", "--seq-len", "--global-batch", "--mtp-layers"}
    for k in flagged:
        param = params[k.cli_flag]
        assert (param.min, param.max, param.help) == (k.ge, k.le, k.help), k.cli_flag


def test_the_saved_plan_labels_come_from_the_registry() -> None:
    for k in KNOBS:
        assert FIELD_INFO[k.path] == (k.compare_label, k.unit)
    assert FIELD_INFO["layout.tp"] == ("Tensor parallel (tp)", "GPUs")


@pytest.mark.parametrize("path", WIRING)
def test_no_knob_help_is_written_twice(path: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    flat = re.sub(r'"\s*\n\s*"', "", text)  # Python's implicit string concatenation, joined
    for k in KNOBS:
        # the help text, or its first 40 characters, written in a file that takes it from the registry
        assert k.help[:40] not in flat, f"{path} writes the help of {k.path}"


def test_the_scenario_schema_writes_no_knob_range() -> None:
    """Each registered field of the scenario models is `knob_field(...)`: no range or description beside it."""
    tree = ast.parse((ROOT / "app/schemas/scenario.py").read_text(encoding="utf-8"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    classes["LayoutIn"] = classes["_LayoutFields"]
    aliases = {
        node.targets[0].id: ast.unparse(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    for k in KNOBS:
        fields = {
            st.target.id: st
            for st in classes[SECTION_MODELS[k.section]].body
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
        }
        if k.generic:
            assert k.name not in fields  # made from the record alone
            continue
        st = fields[k.name]
        written = ast.unparse(st.value) if st.value is not None else ""
        annotation = ast.unparse(st.annotation)
        declared = written if "knob_field" in written else aliases.get(annotation, "")
        assert declared.startswith(("knob_field(", "Annotated[")) and f"'{k.path}'" in declared, k.path


def test_a_generic_knob_travels_through_the_builder() -> None:
    state = parse_state({"tp": "2", "pp": "4", "vp": "2", "nodes": "4", "microbatch_group": "8"})
    assert state.microbatch_group == 8 and "microbatch_group=8" in state.query()
    scenario = state_to_scenario(state)
    assert scenario["layout"]["microbatch_group"] == 8
    assert scenario_to_state(scenario).microbatch_group == 8
    assert "microbatch_group" not in state_to_scenario(BuilderState())["layout"]  # 0 = unset: not sent
    assert "microbatch_group" not in BuilderState().query()
    assert (
        parse_state({"microbatch_group": "-1"}).errors["microbatch_group"]
        == "a whole number from 0 to 16,777,216"
    )
