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
