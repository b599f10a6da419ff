"""Every scenario knob is declared once (app.core.knobs): the OpenAPI schema, the builder's rendered inputs, the
command line's options and the saved-plan labels show the registry's range or choices, help, label and unit, and no
other file writes a knob's help text, range or choice list again."""

from __future__ import annotations

import ast
import html
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import ValidationError

from app.core.knobs import KNOBS, MAX_PARALLEL, Knob, knob
from app.services.plan_fields import FIELD_INFO
from app.web.pages._builder import (
    BUILDER_CHOICES,
    BUILDER_KNOBS,
    PLANNER_CHOOSES,
    PLANNER_KEEPS,
    BuilderState,
    parse_state,
    scenario_to_state,
    state_to_scenario,
)

ROOT = Path(__file__).resolve().parents[2]
SECTION_MODELS = {
    "cluster": "ClusterIn",
    "layout": "LayoutIn",
    "training": "TrainingIn",
    "scenario": "Scenario",
}
NUMBERS = tuple(k for k in KNOBS if k.kind in ("int", "float"))
CHOICES = tuple(k for k in KNOBS if k.kind in ("choice", "list"))
SWITCHES = tuple(k for k in KNOBS if k.kind == "bool")
COUNTS = tuple(k for k in KNOBS if k.kind == "counts")
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


@pytest.mark.parametrize("k", NUMBERS, ids=lambda k: k.path)
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


@pytest.mark.parametrize("k", CHOICES + SWITCHES, ids=lambda k: k.path)
def test_the_openapi_schema_shows_the_choices(openapi: dict[str, Any], k: Knob) -> None:
    """A choice knob is an enum of the registry's choices, a list knob an array of them, a switch a boolean."""
    prop = openapi["components"]["schemas"][SECTION_MODELS[k.section]]["properties"][k.name]
    assert prop["description"] == k.help
    if k.kind == "choice":
        assert (prop["type"], prop["enum"]) == ("string", list(k.choices))
    elif k.kind == "list":
        assert (prop["type"], prop["items"]["enum"], prop["maxItems"]) == (
            "array",
            list(k.choices),
            k.max_items,
        )
    else:
        assert prop["type"] == "boolean"


@pytest.mark.parametrize("k", COUNTS, ids=lambda k: k.path)
def test_the_openapi_schema_shows_the_counts(openapi: dict[str, Any], k: Knob) -> None:
    """A counts knob is an array of whole numbers, each in the registry's range, at most max_items long."""
    prop = openapi["components"]["schemas"][SECTION_MODELS[k.section]]["properties"][k.name]
    assert prop["description"] == k.help
    items = prop["items"]
    assert (prop["type"], prop["maxItems"]) == ("array", k.max_items)
    assert (items["type"], items.get("minimum"), items.get("maximum")) == ("integer", k.ge, k.le)


def _minimal_scenario() -> dict[str, Any]:
    """The smallest scenario document the schema takes, for one field to be varied in it."""
    return {
        "model": "llama-3-8b",
        "cluster": {"gpu": "H100-SXM", "nodes": 1},
        "layout": {"global_batch": 8},
        "training": {"seq_len": 4096},
    }


@pytest.mark.parametrize("k", COUNTS, ids=lambda k: k.path)
def test_a_refused_count_names_the_field(k: Knob) -> None:
    from app.schemas.scenario import Scenario

    doc = _minimal_scenario()
    for refused in ([int(k.ge or 0) - 1], [int(k.le or 0) + 1], [int(k.ge or 0)] * ((k.max_items or 0) + 1)):
        doc[k.section][k.name] = refused
        with pytest.raises(ValidationError) as info:
            Scenario.model_validate(doc)
        (error,) = info.value.errors()
        assert ".".join(str(part) for part in error["loc"] if not isinstance(part, int)) == k.path
    doc[k.section][k.name] = [int(k.ge or 0), int(k.le or 0)]
    Scenario.model_validate(doc)  # the ends of the range are taken


@pytest.mark.parametrize("k", CHOICES, ids=lambda k: k.path)
def test_a_refused_choice_names_the_field_and_its_values(k: Knob) -> None:
    from app.schemas.scenario import Scenario

    doc = _minimal_scenario()
    where = doc if k.section == "scenario" else doc[k.section]
    where[k.name] = ["not-a-choice"] if k.kind == "list" else "not-a-choice"
    with pytest.raises(ValidationError) as info:
        Scenario.model_validate(doc)
    (error,) = info.value.errors()
    assert ".".join(str(part) for part in error["loc"] if part != 0) == k.path
    assert all(f"'{choice}'" in error["msg"] for choice in k.choices), error["msg"]
    where[k.name] = list(k.choices) if k.kind == "list" else k.choices[-1]
    Scenario.model_validate(doc)  # every choice is taken


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


def test_planner_mode_knows_every_layout_input(client: Any) -> None:
    """Each input of the builder's layout grid is one a search reads (PLANNER_KEEPS) or one the planner chooses,
    which the page takes out of use in planner mode: the form names the latter (data-planner-chooses), so a new
    layout knob cannot stay editable while the planner ignores it."""
    page = client.get("/plans/new").text
    named = re.search(r'<form id="plan-form"[^>]*data-planner-chooses="([^"]*)"', page, re.S)
    assert named and tuple(named.group(1).split()) == PLANNER_CHOOSES
    grid = page[page.index('<div class="layout-grid">') : page.index('<p class="derived">Data parallel')]
    inputs = set(re.findall(r'<(?:input|select) id="f-(\w+)"', grid))
    assert inputs <= set(PLANNER_CHOOSES) | PLANNER_KEEPS, inputs - set(PLANNER_CHOOSES) - PLANNER_KEEPS
    # every chosen input is in the grid (the global batch, which a search keeps, sits under the training goal)
    assert set(PLANNER_CHOOSES) <= inputs
    assert not set(PLANNER_CHOOSES) & PLANNER_KEEPS
    assert "microbatch_group" in PLANNER_CHOOSES  # the planner runs Megatron-core's default group


def test_the_builder_renders_the_registry_choices(client: Any) -> None:
    page = client.get("/plans/new").text
    for name, k in BUILDER_CHOICES.items():
        label = re.search(rf'<label for="f-{name}">(.*?)</label>', page, re.S)
        assert label and html.unescape(label.group(1)).startswith(k.label), name
        if k.kind in ("choice", "int"):  # an int knob with labels (the ZeRO stage) is a select over its range
            select = re.search(rf'<select id="f-{name}" .*?</select>', page, re.S)
            assert select, name
            options = re.findall(r'<option value="([^"]*)"[^>]*>(.*?)</option>', select.group(0))
            assert [(v, html.unescape(t)) for v, t in options] == list(k.options), name
        elif k.kind in ("list", "counts"):
            hint = re.search(rf'<span id="d-{name}" class="hint">(.*?)</span>', page, re.S)
            assert hint and html.unescape(hint.group(1)) == k.builder_hint, name
        else:
            assert re.search(rf'<input id="f-{name}" name="{name}" type="checkbox"', page), name


def test_the_builder_takes_what_the_registry_takes() -> None:
    for name, k in BUILDER_CHOICES.items():
        if k.kind == "choice":
            assert getattr(parse_state({name: k.choices[-1]}), name) == k.choices[-1]
            assert parse_state({name: "not-a-choice"}).errors[name] == k.choice_error(), name
        elif k.kind == "list":
            assert getattr(parse_state({name: ",".join(k.choices)}), name) == ",".join(k.choices)
            assert parse_state({name: "not-a-choice"}).errors[name].endswith(", ".join(k.choices)), name
        elif k.kind == "counts":
            top = int(k.le or 0)
            assert getattr(parse_state({name: f"1, 2 {top}"}), name) == f"1,2,{top}", name
            for refused in (
                "0",
                str(top + 1),
                "1,x",
                "²",
                "9" * 5000,
                ",".join(["1"] * ((k.max_items or 0) + 1)),
            ):
                assert parse_state({name: refused}).errors[name] == k.range_text(), (name, refused[:20])
        elif k.kind == "int":
            last = k.options[-1][0]
            assert getattr(parse_state({name: last}), name) == int(last), name
            assert parse_state({name: str(int(last) + 1)}).errors[name] == k.range_text(), name


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
    flagged = [k for k in NUMBERS if k.cli_flag]
    assert {k.cli_flag for k in flagged} >= {"--nodes", "--seq-len", "--global-batch", "--mtp-layers"}
    for k in flagged:
        param = params[k.cli_flag]
        assert (param.min, param.max, param.help) == (k.ge, k.le, k.help), k.cli_flag
    for k in CHOICES + SWITCHES:
        if k.cli_flag:
            param = params[k.cli_flag]
            assert param.help == k.help, k.cli_flag
            assert k.kind == "bool" or param.metavar == f"[{k.choices_text}]", k.cli_flag
    assert {k.cli_flag for k in CHOICES + SWITCHES} >= {
        "--dtype",
        "--optimizer-moments",
        "--attention-backend",
    }


@pytest.mark.parametrize("k", [k for k in CHOICES if k.cli_flag], ids=lambda k: k.path)
def test_the_command_line_refuses_what_the_registry_refuses(k: Knob) -> None:
    from typer.testing import CliRunner

    from app.cli.main import build_cli

    result = CliRunner().invoke(build_cli(), ["search", "--model", "llama-3-8b", k.cli_flag or "", "bogus"])
    assert result.exit_code == 2
    assert f"{k.path}: {k.choice_error()}" in " ".join(result.output.split()).replace("│ ", "")


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


def _choice_lists(path: str) -> list[tuple[str, set[str]]]:
    """(knob, values) for every place in the file at `path` that writes two or more of a choice knob's values, or
    three or more of a list knob's items: a Python tuple, list or Literal[...], a line of the template with them
    quoted (select options) or, for a list knob's items, named in its text; a Python string's "a | b" values."""
    text = (ROOT / path).read_text(encoding="utf-8")
    groups: list[set[str]] = []
    if path.endswith(".py"):
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                groups.append(
                    {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # a help text's "a | b | c"
                groups.append(set(re.findall(r"[\w-]+(?= \| )|(?<= \| )[\w-]+", node.value)))
    else:
        for line in text.splitlines():
            groups.append(set(re.findall(r'"([^"]+)"', line)))
            groups.append(set(re.findall(r"[\w-]+", line)) | {"_text"})
    found = []
    for k in CHOICES:
        for group in groups:
            least = 3 if k.kind == "list" else 2
            if "_text" in group and k.kind != "list":
                continue
            if len(group & set(k.choices)) >= min(least, len(k.choices)):
                found.append((k.path, group & set(k.choices)))
    return found


@pytest.mark.parametrize("path", WIRING)
def test_no_choice_list_is_written_twice(path: str) -> None:
    assert _choice_lists(path) == []


def test_a_written_choice_list_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above finds the choice lists these files once wrote."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "a.py").write_text(
        'recompute: Literal["none", "selective", "full"] = "none"\nHELP = "Adam moments: fp32 | bf16"\n',
        encoding="utf-8",
    )
    (tmp_path / "b.html").write_text(
        '{{ select_field(state, "dtype", "Compute precision", [("bf16", "BF16"), ("fp16", "FP16")]) }}\n'
        '{{ text_field(state, "offload_modules", hint="comma-separated: attn_norm, core_attn, attn_proj") }}\n',
        encoding="utf-8",
    )
    assert {path for path, _ in _choice_lists("a.py")} == {
        "layout.recompute",
        "layout.optimizer_moments_dtype",
    }
    assert {path for path, _ in _choice_lists("b.html")} == {"layout.dtype", "layout.offload_modules"}


def test_the_scenario_schema_writes_no_knob_range() -> None:
    """Each registered field of the scenario models is `knob_field(...)`: no range or description beside it."""
    tree = ast.parse((ROOT / "app/schemas/scenario.py").read_text(encoding="utf-8"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    classes["LayoutIn"] = classes["_LayoutFields"]
    aliases = {  # module-level names, the runtime branch's last (after `if TYPE_CHECKING:`)
        node.targets[0].id: ast.unparse(node.value)
        for node in ast.walk(tree)
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
        if k.kind in ("choice", "list"):  # its type a Literal of the registry's choices
            typed = aliases.get(annotation, annotation)
            if typed.startswith("Annotated["):
                typed = aliases.get(typed.removeprefix("Annotated[").split(",")[0], "")
            assert typed == f"knob_type('{k.path}')", k.path


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
