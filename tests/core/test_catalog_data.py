"""The built-in catalog files: units, sources, aliases, and agreement with the published figures they cite."""

from __future__ import annotations

import csv
import math
from datetime import date
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import app.catalog as catalog
from app.core.model import param_counts
from app.core.units import GB, TFLOP, US, GiB
from app.errors import NotFoundError

CATALOG_DIR = Path(catalog.__file__).parent

# The `gpu` column of the published measurements the validation reports replay (training runs and nccl-tests
# collectives); every one must resolve to a catalog GPU. ("unspecified" rows name no GPU.)
VALIDATION_GPU_NAMES = {
    "A100 (memory size not stated in repo)": "A100-80GB-SXM",
    "A100-80 (SXM)": "A100-80GB-SXM",
    "A100-80 (SXM, Selene)": "A100-80GB-SXM",
    "H100 (96GB HBM2e, 500W power cap)": "H100-SXM-96GB",
    "H100-SXM": "H100-SXM",
    "H100-SXM (DGX-H100)": "H100-SXM",
    "A100": "A100-80GB-SXM",
    "A100-SXM": "A100-80GB-SXM",
    "A100-SXM-40GB": "A100-40GB-SXM",
    "A100-SXM-80GB": "A100-80GB-SXM",
    "B200-SXM": "B200",
    "GB200": "GB200",
    "H20": "H20",
    "H200-SXM": "H200-SXM",
    "H800": "H800-SXM",
    "MI300X": "MI300X",
    "V100": "V100-SXM2-32GB",
}

# (model_name column, layers, hidden, heads, kv heads, ffn, vocab) of the published training runs that name a
# real model or a paper's configuration. Shape experiments ("BLOOM-like", alternative head counts) are not
# catalog models.
VALIDATION_MODELS = [
    ("GPT-1.7B", 24, 2304, 24, 24, 9216, 51200),
    ("GPT-3.6B", 30, 3072, 32, 32, 12288, 51200),
    ("GPT-7.5B", 36, 4096, 32, 32, 16384, 51200),
    ("GPT-18.4B", 40, 6144, 48, 48, 24576, 51200),
    ("GPT-39.1B", 48, 8192, 64, 64, 32768, 51200),
    ("GPT-76.1B", 60, 10240, 80, 80, 40960, 51200),
    ("GPT-145.6B", 80, 12288, 96, 96, 49152, 51200),
    ("GPT-310.1B", 96, 16384, 128, 128, 65536, 51200),
    ("GPT-529.6B", 105, 20480, 128, 128, 81920, 51200),
    ("GPT-1008.0B", 128, 25600, 160, 160, 102400, 51200),
    ("GPT-3 175B (174.6B)", 96, 12288, 96, 96, 49152, 51200),
    ("GPT 530B (529.6B)", 105, 20480, 128, 128, 81920, 51200),
    ("GPT 22B", 48, 6144, 64, 64, 24576, 51200),
    ("GPT 175B", 96, 12288, 96, 96, 49152, 51200),
    ("GPT 530B", 105, 20480, 128, 128, 81920, 51200),
    ("GPT 1T", 128, 25600, 160, 160, 102400, 51200),
    ("GPT 22B (one transformer layer)", 48, 6144, 64, 64, 24576, 51200),
    ("GPT-7.1B", 30, 4096, 32, 32, 16384, 131072),
    ("GPT-16B", 32, 6144, 48, 48, 24576, 131072),
    ("GPT-32B", 48, 7168, 56, 56, 28672, 131072),
    ("GPT-70B", 84, 8192, 64, 64, 32768, 131072),
    ("GPT-119B", 92, 10240, 80, 80, 40960, 131072),
    ("GPT-177B", 96, 12288, 96, 96, 49152, 131072),
    ("GPT-314B", 96, 16384, 128, 128, 65536, 131072),
    ("GPT-462B", 112, 18432, 144, 144, 73728, 131072),
    ("BLOOM-176B shape (heads=112)", 70, 14336, 112, 112, 57344, 250880),
    ("GPT3-5B", 24, 4096, 32, 32, 16384, 50257),
    ("GPT3-20B", 44, 6144, 48, 48, 24576, 50257),
    ("GPT3-175B", 96, 12288, 96, 96, 49152, 50257),
    ("LLAMA2-7B", 32, 4096, 32, 32, 11008, 32000),
    ("LLAMA2-13B", 40, 5120, 40, 40, 13824, 32000),
    ("LLAMA2-70B", 80, 8192, 64, 8, 28672, 32000),
    ("Nemotron-340B", 96, 18432, 96, 8, 73728, 256000),
    ("LLAMA3-8B", 32, 4096, 32, 8, 14336, 128256),
    ("LLAMA3-70B", 80, 8192, 64, 8, 28672, 128256),
    ("Llama 3.1 8B", 32, 4096, 32, 8, 14336, 128256),
    # vTrain's GPT rows use GPT-2's 50,257-token vocabulary with the Megatron paper shapes
    ("GPT 3.6B", 30, 3072, 32, 32, 12288, None),
    ("GPT 18.4B", 40, 6144, 48, 48, 24576, None),
    ("GPT 39.1B", 48, 8192, 64, 64, 32768, None),
]
# The Megatron-LM README's 1.7B configuration (hidden 2048, vocab 131072) shares its name with Narayanan et al.'s
# GPT-1.7B (hidden 2304), which the plain name resolves to; the README shape is its own entry.
MEGATRON_README_1_7B = ("Megatron-LM-GPT-1.7B", 24, 2048, 16, 16, 8192, 131072)


def test_catalog_sizes_cover_the_required_entries() -> None:
    gpus, models, links = catalog.gpus(), catalog.models(), catalog.interconnects()
    for name in ("A100-40GB-SXM", "A100-80GB-SXM", "H100-SXM", "H100-PCIe", "H200-SXM", "B200", "GB200"):
        assert name in gpus
    for name in ("MI300X", "MI325X", "L40S", "Gaudi3"):
        assert name in gpus
    assert len(models) >= 20
    assert sum(1 for m in models.values() if m.moe is not None) >= 6
    for name in (
        "NVLink3-NVSwitch",
        "NVLink4-NVSwitch",
        "NVLink5-NVSwitch",
        "NVL72",
        "PCIe4-x16",
        "PCIe5-x16",
    ):
        assert links[name].kind == "scale_up"
    for name in ("InfiniBand-HDR", "InfiniBand-NDR", "InfiniBand-XDR", "RoCEv2-200G", "RoCEv2-400G"):
        assert links[name].kind == "scale_out"
    assert {"xGMI-MI300X", "Ethernet-TCP-100G", "EFA-v2", "EFA-v3"} <= set(links)


def test_gpu_units_are_si_with_datasheet_values() -> None:
    h100 = catalog.find_gpu("H100 SXM")
    assert h100.peak_flops["bf16"] == pytest.approx(989 * TFLOP)
    assert h100.peak("fp8") == pytest.approx(1979e12)
    assert h100.hbm_bytes == 80 * GiB
    assert h100.hbm_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.scaleup_bandwidth_bytes_per_s == pytest.approx(450 * GB)
    assert h100.measured_matmul_flops["bf16"] == pytest.approx(794.5e12)
    assert h100.nvls and h100.scaleup_kind == "nvswitch" and h100.tdp_w == 700
    a100 = catalog.find_gpu("A100-80GB-SXM")
    assert not a100.nvls and a100.peak("bf16") == pytest.approx(312e12)
    assert a100.peak("fp8") == a100.peak("bf16")  # no FP8 on Ampere: falls back to BF16
    gb200 = catalog.find_gpu("GB200")
    assert gb200.scaleup_kind == "nvl72" and gb200.default_gpus_per_node == 4
    assert catalog.find_gpu("MI300X").scaleup_kind == "xgmi"
    assert catalog.find_gpu("L40S").scaleup_kind == "pcie"
    # measured matmul never exceeds the dense peak
    for gpu in catalog.gpus().values():
        for dtype, flops in gpu.measured_matmul_flops.items():
            assert 0 < flops <= gpu.peak(dtype), (gpu.name, dtype)


def test_interconnect_units() -> None:
    ndr = catalog.find_interconnect("IB NDR")
    assert ndr.bandwidth_bytes_per_s == pytest.approx(400e9 / 8)
    assert ndr.latency_s == pytest.approx(2.0 * US)
    assert ndr.supports_sharp
    nvl72 = catalog.find_interconnect("nvl72")
    assert nvl72.domain_size == 72 and nvl72.supports_nvls
    assert catalog.find_interconnect("NVLink3").bandwidth_bytes_per_s == pytest.approx(300e9)
    assert catalog.find_interconnect("EFA v2").bandwidth_bytes_per_s == pytest.approx(100e9 / 8)


@pytest.mark.parametrize("kind", ["gpu", "model", "interconnect"])
def test_every_entry_names_its_source_and_date(kind: str) -> None:
    for entry in catalog.entries(kind).values():
        assert len(entry.source) > 20, entry.name
        assert entry.date[:4].isdigit() and 2017 <= int(entry.date[:4]) <= date.today().year, entry.name


@pytest.mark.parametrize(("name", "canonical"), sorted(VALIDATION_GPU_NAMES.items()))
def test_validation_gpu_names_resolve(name: str, canonical: str) -> None:
    assert catalog.find_gpu(name).name == canonical


@pytest.mark.parametrize("row", VALIDATION_MODELS, ids=[r[0] for r in VALIDATION_MODELS])
def test_validation_models_resolve_with_their_exact_shape(row: tuple) -> None:
    name, layers, hidden, heads, kv, ffn, vocab = row
    model = catalog.find_model(name)
    assert (model.num_layers, model.hidden_size, model.num_attention_heads) == (layers, hidden, heads)
    assert (model.num_kv_heads, model.ffn_hidden_size) == (kv, ffn)
    if vocab is not None:
        assert model.vocab_size == vocab


def test_megatron_readme_1_7b_has_its_own_entry() -> None:
    name, layers, hidden, heads, kv, ffn, vocab = MEGATRON_README_1_7B
    model = catalog.find_model(name)
    assert (model.num_layers, model.hidden_size, model.num_attention_heads, model.ffn_hidden_size) == (
        layers,
        hidden,
        heads,
        ffn,
    )
    assert model.vocab_size == vocab and model.num_kv_heads == kv
    assert catalog.find_model("GPT-1.7B").hidden_size == 2304


def _published_decimals() -> dict[str, tuple[float, int, float | None]]:
    """name → (published billions, decimals as written, published active billions)."""
    out = {}
    for record in yaml.safe_load((CATALOG_DIR / "models.yaml").read_text()):
        value = record["published_params_b"]
        text = repr(value)
        decimals = len(text.split(".")[1]) if "." in text else 0
        out[record["name"]] = (float(value), decimals, record.get("published_active_params_b"))
    return out


@pytest.mark.parametrize("name", sorted(_published_decimals()))
def test_model_shapes_give_the_published_parameter_count(name: str) -> None:
    """Within 1 %, or within the rounding of the published figure when it is coarser ("2.7B" is 2.65-2.75B)."""
    published, decimals, active = _published_decimals()[name]
    counts = param_counts(catalog.find_model(name))
    tolerance = max(0.01, 0.5 * 10**-decimals / published * 1.02)
    if name.startswith(("Megatron-LM-GPT", "GPT-3-")):
        # sizes that are labels: the Megatron-LM README's "GPT-32B" has 31.5B parameters, GPT-3 "Medium"
        # (Brown et al. Table 2.1, "350M") has 356M
        tolerance = max(tolerance, 0.03)
    assert counts.total / 1e9 == pytest.approx(published, rel=tolerance)
    # DeepSeek-V2-Lite's "2.4B activated" follows a counting convention for embeddings that the
    # paper does not spell out; its total (15.7B) is checked above.
    if name.startswith("GPT-OSS"):
        # the gpt-oss model card counts active parameters without the input embedding (vocab × hidden)
        assert (counts.active - counts.embedding) / 1e9 == pytest.approx(active, rel=0.02)
    elif active is not None and name != "DeepSeek-V2-Lite":
        assert counts.active / 1e9 == pytest.approx(active, rel=0.02)


def test_moe_and_mla_fields_of_deepseek_v3() -> None:
    ds = catalog.find_model("deepseek v3")
    assert ds.moe is not None and ds.mla is not None
    assert (ds.moe.num_experts, ds.moe.experts_per_token, ds.moe.expert_ffn_hidden_size) == (256, 8, 2048)
    assert (ds.moe.num_shared_experts, ds.moe.first_dense_layers) == (1, 3)
    assert (ds.mla.q_lora_rank, ds.mla.kv_lora_rank, ds.mla.qk_rope_head_dim) == (1536, 512, 64)
    assert ds.attention_kind == "mla" and ds.activation == "swiglu" and not ds.tied_embeddings


def test_declared_activations_and_embeddings() -> None:
    assert catalog.find_model("GPT-3 175B").activation == "gelu"
    assert catalog.find_model("GPT-3 175B").tied_embeddings
    assert catalog.find_model("GPT 22B").hidden_dropout == 0.1  # Korthikanti et al. count dropout masks
    assert catalog.find_model("Llama-3-8B").hidden_dropout == 0.0
    assert catalog.find_model("Llama-3.1-70B").activation == "swiglu"
    assert catalog.find_model("Llama-3.1-70B").attention_kind == "gqa"
    assert catalog.find_model("Nemotron-4-340B").activation == "squared_relu"
    assert catalog.find_model("Qwen2.5-7B").attention_bias
    assert catalog.find_model("BLOOM-176B").position_embedding == "alibi"


def test_unknown_names_raise_with_close_matches() -> None:
    with pytest.raises(NotFoundError) as err:
        catalog.find_gpu("H100-SMX")
    assert err.value.kind == "gpu" and "H100-SXM" in err.value.suggestions
    with pytest.raises(NotFoundError) as err:
        catalog.find_model("lama-3-70b")
    assert "Llama-3-70B" in err.value.suggestions
    assert "did you mean" in str(err.value)
    with pytest.raises(NotFoundError) as err:
        catalog.find_interconnect("zzzz")
    assert err.value.suggestions == []


def test_aliases_are_unique_per_kind() -> None:
    for kind in ("gpu", "model", "interconnect"):
        index = catalog.build_alias_index(catalog.entries(kind).values())
        assert len(index) >= len(catalog.entries(kind))


def test_an_alias_naming_two_entries_is_refused() -> None:
    a = catalog.CatalogEntry("gpu", "A", None, ("shared-name",))
    b = catalog.CatalogEntry("gpu", "B", None, ("Shared Name",))
    with pytest.raises(ValueError, match="names both"):
        catalog.build_alias_index([a, b])


@given(st.sampled_from(sorted(VALIDATION_GPU_NAMES)), st.sampled_from(["lower", "upper", "spaces", "dashes"]))
def test_lookup_ignores_case_and_punctuation(name: str, style: str) -> None:
    variant = {
        "lower": name.lower(),
        "upper": name.upper(),
        "spaces": name.replace("-", " "),
        "dashes": name.replace(" ", "-"),
    }[style]
    assert catalog.find_gpu(variant).name == VALIDATION_GPU_NAMES[name]


# --- price book ----------------------------------------------------------------------------------------------

ORIGINAL_COLUMNS = [
    "category",
    "item",
    "vendor_or_source_entity",
    "region",
    "pricing_model",
    "unit",
    "price_usd",
    "usd_per_gpu_hour",
    "date",
    "source",
    "confidence",
    "notes",
]


def test_price_file_keeps_the_original_columns_and_adds_three() -> None:
    with (CATALOG_DIR / "prices.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == [*ORIGINAL_COLUMNS, "gpu_name", "gpus_per_unit", "includes"]
        rows = list(reader)
    assert len(rows) >= 80
    assert all(row["source"] and row["date"] and row["includes"] for row in rows)


def test_price_rows_are_typed_and_keyed() -> None:
    rows = catalog.price_rows()
    keys = [r["seed_key"] for r in rows]
    assert len(set(keys)) == len(keys)
    p5 = [r for r in rows if r["item"].startswith("p5.48xlarge") and r["pricing_model"] == "on-demand"]
    assert {r["price_usd"] for r in p5} == {98.32, 55.04}
    assert all(r["gpu_name"] == "H100-SXM" and r["gpus_per_unit"] == 8 for r in p5)
    for row in rows:
        if row["gpu_name"]:
            assert row["gpu_name"] in catalog.gpus()
        # a per-GPU-hour figure times the GPUs in the unit gives back the unit price (within rounding)
        if row["unit"] == "instance-hour" and row["usd_per_gpu_hour"] and row["gpus_per_unit"]:
            assert row["usd_per_gpu_hour"] * row["gpus_per_unit"] == pytest.approx(row["price_usd"], rel=0.01)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-17", date(2025, 3, 17)),
        ("2023-07", date(2023, 7, 1)),
        ("2024-12 (valid to 2025-01-01)", date(2024, 12, 1)),
        ("2024-H2", date(2024, 7, 1)),
        ("2025 (undated)", date(2025, 1, 1)),
        ("~2024", date(2024, 1, 1)),
        ("2022-2025", date(2025, 1, 1)),
    ],
)
def test_price_dates_parse_to_the_start_of_the_period(text: str, expected: date) -> None:
    assert catalog.parse_price_date(text) == expected


def test_a_price_date_without_a_year_is_refused() -> None:
    with pytest.raises(ValueError, match="no year"):
        catalog.parse_price_date("recently")


def test_lookups_are_cached_and_pure() -> None:
    assert catalog.gpus() == catalog.gpus()
    assert catalog.gpu_entries() is catalog.gpu_entries()
    first = catalog.price_rows()
    first[0]["price_usd"] = -1.0
    assert catalog.price_rows()[0]["price_usd"] != -1.0
    assert not math.isnan(sum(r["price_usd"] or 0 for r in catalog.price_rows()))
