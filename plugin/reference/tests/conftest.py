"""Shared fixtures for the reference plugin's CPU tests.

Everything here builds real vLLM objects (ModelConfig from a local config.json,
VllmConfig, KVCacheConfig, Request, ModelRunnerOutput) the way vLLM's own
scheduler tests do. No hub access: the model is a config.json in a temp folder
and the tokenizer is never initialised.

Hardware-only tests live under tests/hw/ (marker `hw`); they need the vendor
runtime and are skipped without it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

BLOCK_SIZE = 16

TINY_LLAMA_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
}


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local model folder holding only a tiny Llama config.json."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
    return folder


@pytest.fixture(scope="session")
def make_vllm_config(model_dir: Path) -> Callable[..., Any]:
    """Build a real VllmConfig for the tiny model (device forced to CPU).

    The empty-target vLLM has no platform of its own; when refrt is installed
    the current platform is ReferencePlatform, which applies its policy while
    the VllmConfig is built. Either way the returned config is what vLLM made.
    """
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig

    def build(
        *,
        max_model_len: int = 512,
        max_num_seqs: int = 8,
        max_num_batched_tokens: int = 512,
        enable_chunked_prefill: bool = False,
        long_prefill_token_threshold: int = 0,
        async_scheduling: bool = False,
    ) -> VllmConfig:
        model_config = ModelConfig(
            model=str(model_dir),
            skip_tokenizer_init=True,
            dtype="float32",
            max_model_len=max_model_len,
            seed=0,
        )
        scheduler_config = SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
            enable_chunked_prefill=enable_chunked_prefill,
            long_prefill_token_threshold=long_prefill_token_threshold,
            async_scheduling=async_scheduling,
            is_encoder_decoder=False,
            # deterministic admission/preemption, as in vLLM's scheduler tests
            watermark=0.0,
        )
        return VllmConfig(
            model_config=model_config,
            scheduler_config=scheduler_config,
            cache_config=CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=False),
            device_config=DeviceConfig(device="cpu"),
        )

    return build


@pytest.fixture(scope="session")
def make_scheduler() -> Callable[..., Any]:
    """Instantiate a scheduler class on a VllmConfig with `num_blocks` KV blocks."""
    import torch
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    def build(scheduler_cls: type, vllm_config: Any, num_blocks: int = 1000) -> Any:
        spec = FullAttentionSpec(
            block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32
        )
        kv_cache_config = KVCacheConfig(
            num_blocks=num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)],
        )
        vllm_config.cache_config.num_gpu_blocks = num_blocks
        register_all_kvcache_specs(vllm_config)
        return scheduler_cls(
            vllm_config=vllm_config,
            kv_cache_config=kv_cache_config,
            structured_output_manager=StructuredOutputManager(vllm_config),
            block_size=BLOCK_SIZE,
            log_stats=True,
        )

    return build


@pytest.fixture(scope="session")
def make_request() -> Callable[..., Any]:
    """A real generation Request with `prompt_len` tokens and `max_tokens` to produce."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    def build(request_id: str, prompt_len: int, max_tokens: int) -> Request:
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
        params.update_from_generation_config({}, TINY_LLAMA_CONFIG["eos_token_id"])
        return Request(
            request_id=request_id,
            prompt_token_ids=[10 + sum(map(ord, request_id)) % 500] * prompt_len,
            sampling_params=params,
            pooling_params=None,
        )

    return build


@dataclass
class Step:
    """What one `schedule()` call produced, classified per request."""

    index: int
    prefill: dict[str, int] = field(default_factory=dict)  # req id -> tokens scheduled
    decode: dict[str, int] = field(default_factory=dict)
    finished_req_ids: set[str] = field(default_factory=set)

    @property
    def kind(self) -> str:
        if self.prefill and self.decode:
            return "mixed"
        if self.prefill:
            return "prefill"
        if self.decode:
            return "decode"
        return "empty"


class Driver:
    """Drives a scheduler like the engine core does: schedule, "run", update.

    A scheduled request counts as *prefill* work when it was not RUNNING before
    the step (new or resumed after preemption) or was a partial prefill; it is
    *decode* work when it was RUNNING with its prompt fully computed. The model
    "samples" one token for every request whose scheduled tokens reach the end
    of its known tokens, and nothing for a partial prefill chunk.
    """

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.steps: list[Step] = []
        self.outputs: dict[str, list[int]] = {}

    def add(self, requests: Iterable[Any]) -> None:
        for request in requests:
            self.scheduler.add_request(request)

    def step(self) -> Step:
        from vllm.v1.outputs import ModelRunnerOutput
        from vllm.v1.request import RequestStatus

        sched = self.scheduler
        before = {rid: (req.status, req.is_prefill_chunk) for rid, req in sched.requests.items()}
        output = sched.schedule()
        step = Step(index=len(self.steps), finished_req_ids=set(output.finished_req_ids))
        req_ids: list[str] = []
        sampled: list[list[int]] = []
        for rid, n in output.num_scheduled_tokens.items():
            status, was_chunk = before[rid]
            if status == RequestStatus.RUNNING and not was_chunk:
                step.decode[rid] = n
            else:
                step.prefill[rid] = n
            req_ids.append(rid)
            request = sched.requests[rid]
            # a token is sampled once the scheduled tokens reach the end of the sequence
            done = request.num_computed_tokens >= request.num_tokens
            token = 100 + len(self.outputs.setdefault(rid, []))
            sampled.append([token] if done else [])
        if req_ids:
            runner_output = ModelRunnerOutput(
                req_ids=req_ids,
                req_id_to_index={rid: i for i, rid in enumerate(req_ids)},
                sampled_token_ids=sampled,
                logprobs=None,
                prompt_logprobs_dict={},
                pooler_output=[],
            )
            sched.update_from_output(output, runner_output)
            for rid, tokens in zip(req_ids, sampled, strict=True):
                self.outputs[rid].extend(tokens)
        self.steps.append(step)
        return step

    def run(self, arrivals: dict[int, list[Any]], max_steps: int = 500) -> list[Step]:
        """Add `arrivals[i]` before step i; run until all requests are done."""
        for i in range(max_steps):
            self.add(arrivals.get(i, []))
            if i > max(arrivals, default=0) and not self.scheduler.has_requests():
                return self.steps
            self.step()
        raise AssertionError(f"scheduler did not drain in {max_steps} steps")

    @property
    def kinds(self) -> list[str]:
        return [s.kind for s in self.steps]


@pytest.fixture
def driver() -> type[Driver]:
    return Driver
