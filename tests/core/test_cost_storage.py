"""Storage core: checkpoint sizes, write times per tier with p99, data-loading bandwidth."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core import storage
from app.core.errors import SpecError


def test_checkpoint_bytes_per_param_by_precision_and_optimizer() -> None:
    # mixed-precision AdamW: bf16 weights 2 + fp32 master 4 + two moments 8 = 14 B/param
    ck = storage.checkpoint_size(storage.CheckpointSpec(params=70e9))
    assert ck.bytes_per_param == 14
    assert ck.breakdown["weights"] == 140e9 and ck.breakdown["optimizer"] == 840e9
    assert sum(ck.breakdown.values()) == pytest.approx(ck.total_bytes)
    assert storage.checkpoint_size(storage.CheckpointSpec(params=1e9, precision="fp32")).bytes_per_param == 12
    assert (
        storage.checkpoint_size(storage.CheckpointSpec(params=1e9, include_optimizer=False)).bytes_per_param
        == 2
    )
    assert (
        storage.checkpoint_size(storage.CheckpointSpec(params=1e9, optimizer="sgd_momentum")).bytes_per_param
        == 10
    )


def test_safetensors_and_torch_save_hold_the_same_tensor_bytes_but_load_differently() -> None:
    a = storage.checkpoint_size(storage.CheckpointSpec(params=7e9, format="safetensors"))
    b = storage.checkpoint_size(storage.CheckpointSpec(params=7e9, format="torch_save"))
    assert a.total_bytes == pytest.approx(b.total_bytes, rel=1e-6)
    tier = storage.DEFAULT_TIERS["parallel_fs"]
    ra = storage.checkpoint_write(a.total_bytes, tier, 4, format="safetensors").read_s
    rb = storage.checkpoint_write(b.total_bytes, tier, 4, format="torch_save").read_s
    assert rb > 1.9 * ra  # unpickle + copy vs memory-map


def test_parallel_fs_write_is_capped_by_aggregate_bandwidth() -> None:
    tier = storage.DEFAULT_TIERS["parallel_fs"]
    w = storage.checkpoint_write(980e9, tier, 16, jitter_sigma=0.0)
    assert w.bandwidth_bytes_per_s == 100e9  # 16 nodes × 25 GB/s capped at the 100 GB/s floor
    assert w.write_s == pytest.approx(9.8 + 0.001)
    assert w.p99_write_s == pytest.approx(w.write_s)
    # the filesystem grows with the cluster: 3.4 GB/s per compute node (Llama 3's Tectonic, 7 TB/s for 2,048)
    assert tier.write_bw(2048) == pytest.approx(7.0e12)
    assert tier.write_bw(64) == pytest.approx(64 * 7.0e12 / 2048)
    given = tier.with_aggregate(100e9)
    assert given.write_bw(2048) == 100e9 and given.source.startswith("user input")
    nvme = storage.checkpoint_write(980e9, storage.DEFAULT_TIERS["local_nvme"], 32, jitter_sigma=0.0)
    assert nvme.bandwidth_bytes_per_s == 32 * 6e9  # node-local scales with nodes


def test_one_slow_disk_sets_the_p99() -> None:
    tier = storage.DEFAULT_TIERS["local_nvme"]
    fast = storage.checkpoint_write(100e9, tier, 16, jitter_sigma=0.0)
    slow = storage.checkpoint_write(100e9, tier, 16, jitter_sigma=0.0, slow_disk_fraction=0.25)
    transfer = 100e9 / (16 * 6e9)
    assert slow.p99_write_s == pytest.approx(4 * transfer + tier.request_latency_s)
    assert slow.p99_write_s > 3.5 * fast.p99_write_s
    assert sum(slow.breakdown.values()) == pytest.approx(slow.p99_write_s)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(min_value=1, max_value=2000), extra=st.integers(min_value=1, max_value=2000))
def test_p99_jitter_factor_grows_with_the_number_of_writers(n: int, extra: int) -> None:
    tier = storage.StorageTier("t", "local_nvme", 1e9, 1e9)
    a = storage.checkpoint_write(1e9 * n, tier, n, jitter_sigma=0.2)
    b = storage.checkpoint_write(1e9 * (n + extra), tier, n + extra, jitter_sigma=0.2)
    # same per-node shard (1 s nominal), more writers → slower slowest writer at p99
    assert b.p99_write_s >= a.p99_write_s - 1e-12
    assert a.p99_write_s >= a.write_s


def test_async_stall_is_only_the_device_to_host_snapshot() -> None:
    size = storage.checkpoint_size(storage.CheckpointSpec(params=70e9)).total_bytes
    st_ = storage.checkpoint_stall(size, storage.DEFAULT_TIERS["parallel_fs"], 32, 8)
    assert st_.async_stall_s == pytest.approx(size / 256 / 25e9)
    assert st_.sync_stall_s > 10 * st_.async_stall_s


def test_token_bytes_follow_the_vocabulary() -> None:
    assert storage.token_bytes(50257) == 2  # GPT-2 fits uint16
    assert storage.token_bytes(65536) == 2
    assert storage.token_bytes(128256) == 4  # Llama 3 needs uint32


def test_data_loading_warns_above_ten_percent_of_step_time() -> None:
    slow_tier = {"slow": storage.StorageTier("slow", "object_store", 10e6, 10e6, request_latency_s=0.1)}
    dl = storage.data_loading(4e6, 2.0, 128256, 1, slow_tier)
    assert dl.bytes_per_step == 16e6
    assert dl.required_bytes_per_s == pytest.approx(8e6)
    (row,) = dl.tiers
    assert row.load_s_per_step == pytest.approx(1.6 + 0.1)
    assert row.warn and dl.warnings
    ok = storage.data_loading(4e6, 2.0, 128256, 32)
    assert not ok.warnings


def test_bad_storage_input_names_the_fields() -> None:
    with pytest.raises(SpecError) as err:
        storage.data_loading(-1, 0, 0, 0)
    assert {p.field for p in err.value.problems} == {"tokens_per_step", "step_s", "vocab_size", "num_nodes"}
