"""The configuration policy as a pure function, on real vLLM config objects."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from vllm.config import ModelConfig, SchedulerConfig

from vllm_reference_plugin import SCHEDULER_CLS
from vllm_reference_plugin.policy import apply_scheduler_policy

MAX_MODEL_LEN = 512


@pytest.fixture(scope="module")
def model_config(model_dir) -> ModelConfig:
    return ModelConfig(
        model=str(model_dir),
        skip_tokenizer_init=True,
        dtype="float32",
        max_model_len=MAX_MODEL_LEN,
    )


def upstream_scheduler_config(**overrides) -> SchedulerConfig:
    values = dict(
        max_num_seqs=8,
        max_num_batched_tokens=128,
        max_model_len=MAX_MODEL_LEN,
        enable_chunked_prefill=True,
        is_encoder_decoder=False,
    )
    values.update(overrides)
    return SchedulerConfig(**values)


def test_policy_rewrites_an_upstream_config(model_config):
    config = upstream_scheduler_config(async_scheduling=True)
    reasons = apply_scheduler_policy(config, model_config)

    assert config.scheduler_cls == SCHEDULER_CLS
    assert config.enable_chunked_prefill is False
    assert config.long_prefill_token_threshold == 0
    assert config.max_num_batched_tokens == MAX_MODEL_LEN
    assert config.async_scheduling is False
    changed = {reason.split(":", 1)[0] for reason in reasons}
    assert changed == {
        "scheduler_cls",
        "enable_chunked_prefill",
        "max_num_batched_tokens",
        "async_scheduling",
    }
    # what vLLM itself requires of a config with chunked prefill off now holds
    config.verify_max_model_len(MAX_MODEL_LEN)


def test_policy_is_idempotent(model_config):
    config = upstream_scheduler_config()
    assert apply_scheduler_policy(config, model_config)
    assert apply_scheduler_policy(config, model_config) == []


def test_long_prefill_threshold_is_zeroed(model_config):
    # max_num_partial_prefills > 1 makes vLLM derive a nonzero threshold
    config = upstream_scheduler_config(max_num_partial_prefills=2, max_long_partial_prefills=2)
    assert config.long_prefill_token_threshold > 0
    reasons = apply_scheduler_policy(config, model_config)

    assert config.long_prefill_token_threshold == 0
    assert config.max_num_partial_prefills == 1 and config.max_long_partial_prefills == 1
    assert any(r.startswith("long_prefill_token_threshold:") for r in reasons)
    config.verify_max_model_len(MAX_MODEL_LEN)


def test_scheduled_token_cap_is_raised_too(model_config):
    config = upstream_scheduler_config(max_num_scheduled_tokens=100)
    apply_scheduler_policy(config, model_config)
    assert config.max_num_scheduled_tokens == MAX_MODEL_LEN


def test_budget_already_large_enough_is_kept(model_config):
    config = upstream_scheduler_config(max_num_batched_tokens=2048)
    reasons = apply_scheduler_policy(config, model_config)
    assert config.max_num_batched_tokens == 2048
    assert not any(r.startswith("max_num_batched_tokens") for r in reasons)


def test_without_a_model_config_the_budget_is_left_alone():
    config = upstream_scheduler_config()
    apply_scheduler_policy(config, None)
    assert config.enable_chunked_prefill is False
    assert config.max_num_batched_tokens == 128


def test_policy_needs_no_vllm_objects():
    """The replay harness may hand in plain records with the same attributes."""
    scheduler = SimpleNamespace(
        scheduler_cls=None,
        enable_chunked_prefill=True,
        long_prefill_token_threshold=16,
        max_num_partial_prefills=1,
        max_long_partial_prefills=1,
        max_num_batched_tokens=64,
        max_num_scheduled_tokens=None,
        async_scheduling=False,
    )
    reasons = apply_scheduler_policy(scheduler, SimpleNamespace(max_model_len=256))
    assert scheduler.max_num_batched_tokens == 256
    assert scheduler.long_prefill_token_threshold == 0
    assert len(reasons) == 4
    assert all(isinstance(r, str) and "->" in r for r in reasons)
