"""`[conformance.replay]` settings vLLM refuses to start with are refused here first, each
naming its key (and a table vLLM accepts resolves, defaults filled in)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.replay.config import resolve

GOOD = {"policy": "reference", "max_model_len": 4096, "max_num_seqs": 32}


def test_a_table_vllm_accepts_resolves_with_its_defaults(tmp_path: Path) -> None:
    config = resolve(dict(GOOD), tmp_path)
    assert config.max_model_len == 4096
    assert config.settings["max_num_batched_tokens"] == 2048
    assert config.settings["num_gpu_blocks"] == 32 * 256 + 1


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"max_num_batched_tokens": 16}, "max_num_batched_tokens", "below max_num_seqs 32"),
        (
            {"enable_chunked_prefill": False},
            "max_num_batched_tokens",
            "with enable_chunked_prefill = false",
        ),
        ({"num_gpu_blocks": 10}, "num_gpu_blocks", "cannot hold one max_model_len"),
    ],
)
def test_settings_vllm_refuses_are_bad_input_naming_the_key(
    tmp_path: Path, change: dict[str, object], key: str, words: str
) -> None:
    with pytest.raises(BadInput) as err:
        resolve({**GOOD, **change}, tmp_path)
    assert key in err.value.message and words in err.value.message


def test_the_spec_replay_table_is_read_by_its_owner(tmp_path: Path) -> None:
    """`[conformance.replay]` is read by replay/config.py only: whether there is one, and
    the model it declares (4096 and llama without one), typed."""
    from dataclasses import replace

    from tests.support import REPO
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.replay import config

    spec = load_spec(REPO / "buildspec" / "reference.toml")
    assert config.configured(spec)
    assert config.declared_model(spec) == config.DeclaredModel(4096, "llama")
    tables = {**spec.raw["conformance"], "replay": {"max_model_len": 2048, "model_type": "qwen2"}}
    custom = replace(spec, raw={**spec.raw, "conformance": tables})
    assert config.declared_model(custom) == (2048, "qwen2")
    bare = replace(spec, raw={k: v for k, v in spec.raw.items() if k != "conformance"})
    assert not config.configured(bare)
    assert config.declared_model(bare) == (4096, "llama")
    with pytest.raises(BadInput, match=r"no \[conformance\.replay\] table"):
        config.from_spec(bare)
