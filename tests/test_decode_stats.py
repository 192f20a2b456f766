"""The memory-bandwidth floor: bytes read per decoding step counted against the model's own
tensors, MBU's arithmetic, and the per-machine caches (in the test's own folder)."""

import json

import pytest
import torch

from light_llm import decode_stats
from light_llm.cache import cache_root
from light_llm.decode_stats import (
    DecodeStats,
    decode_threads,
    kv_bytes_per_token,
    memory_bandwidth,
    thread_candidates,
    weight_bytes_per_token,
)
from light_llm.models.gpt import GPT
from light_llm.models.quantize import quantize_gpt
from light_llm.reference.model import parameter_shapes
from light_llm.reference.quantize import quantized_names
from tests.conftest import tiny_config


def count(shape) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


@pytest.mark.parametrize("tied", [True, False])
def test_weight_bytes_are_every_matrix_once_less_the_tables_read_by_row(tied):
    config = tiny_config(tie_embeddings=tied)
    shapes = parameter_shapes(config)
    read = {name: shape for name, shape in shapes.items() if name != "transformer.wpe.weight"}
    if not tied:
        read.pop("transformer.wte.weight")  # one row per token
    float_bytes = 4 * sum(count(shape) for shape in read.values())
    assert weight_bytes_per_token(GPT(config)) == float_bytes
    int8 = set(quantized_names(config))
    int8_bytes = sum(
        count(shape) + 4 * shape[0] if name in int8 else 4 * count(shape)
        for name, shape in read.items()
    )
    assert weight_bytes_per_token(quantize_gpt(GPT(config))) == int8_bytes


def test_a_value_table_is_read_by_row_and_the_multi_token_head_not_at_all():
    """Value embeddings' E_v gives one row per token, like the token table; the multi-token
    head W_mtp only trains: a decoding step reads neither whole."""
    config = tiny_config(value_embeddings=True, mtp_weight=0.5, smear=True, embedding_skip=True)
    shapes = parameter_shapes(config)
    unread = ("transformer.wpe.weight", "transformer.wve.weight", "mtp_proj.weight")
    read = {name: shape for name, shape in shapes.items() if name not in unread}
    assert weight_bytes_per_token(GPT(config)) == 4 * sum(count(s) for s in read.values())


def test_kv_bytes_are_keys_and_values_of_every_layer():
    config = tiny_config()
    model = GPT(config)
    assert kv_bytes_per_token(model, 10) == 2 * config.n_layer * 10 * config.n_embd * 4
    assert kv_bytes_per_token(model.to(torch.bfloat16), 10, batch_size=3) == (
        3 * 2 * config.n_layer * 10 * config.n_embd * 2
    )


def test_mbu_is_bytes_per_step_times_steps_per_second_over_the_bandwidth():
    stats = DecodeStats(
        prompt_tokens=4,
        batch_size=2,
        step_times=[0.5, 0.6, 0.7, 0.8, 0.9],
        weight_bytes=3_000_000,
        kv_bytes=1_000_000,
        bandwidth=100e6,
        threads=1,
        threads_how="given",
    )
    assert stats.time_to_first_token == 0.5
    assert stats.tokens_per_s == pytest.approx(2 * 4 / 0.4)  # 4 steps of 2 rows in 0.4 s
    assert stats.mbu == pytest.approx(4e6 * 10 / 100e6)
    assert "MBU 40%" in stats.lines()[-1]


def test_bandwidth_is_measured_once_and_cached_in_the_cache_folder(monkeypatch):
    calls = []
    real = decode_stats.measure_bandwidth
    monkeypatch.setattr(decode_stats, "measure_bandwidth", lambda: calls.append(1) or real())
    first = memory_bandwidth()
    assert first > 0 and calls == [1]
    assert memory_bandwidth() == first and calls == [1]
    stored = json.loads((cache_root() / decode_stats.BANDWIDTH_FILE).read_text())
    assert list(stored.values())[0]["bytes_per_s"] == first
    (cache_root() / decode_stats.BANDWIDTH_FILE).write_text("{damaged")
    assert memory_bandwidth() > 0 and calls == [1, 1]  # a damaged cache is measured again


def test_decode_threads_are_measured_once_per_machine_and_shape():
    threads = torch.get_num_threads()
    try:
        model = GPT(tiny_config()).eval()
        picked, how = decode_threads(model)
        assert picked in thread_candidates() and how == "measured now"
        assert torch.get_num_threads() == picked
        assert decode_threads(model) == (picked, "measured before")
        _, how = decode_threads(quantize_gpt(model))  # another model: measured for itself
        assert how == "measured now"
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("overrides", [{"block_size": 1}, {"attention": "linear"}])
def test_decode_threads_time_models_of_any_context_and_attention(overrides):
    threads = torch.get_num_threads()
    try:
        picked, how = decode_threads(GPT(tiny_config(**overrides)).eval())
        assert picked in thread_candidates() and how == "measured now"
    finally:
        torch.set_num_threads(threads)
