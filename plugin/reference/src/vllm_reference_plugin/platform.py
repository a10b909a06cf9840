"""`ReferencePlatform`: the vLLM platform of the reference plugin.

vLLM imports this module only after `entrypoints.platform_plugin()` has seen
the runtime import. Device methods still import the runtime lazily (through
`vllm_reference_plugin.device`) so the class itself can be inspected, and its
configuration hook exercised, on a machine without the runtime.

`vllm.config` is imported only for type checking: it resolves the current
platform while it is imported, and resolving the platform imports this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from vllm.platforms.interface import Platform, PlatformEnum

from vllm_reference_plugin import get_logger
from vllm_reference_plugin.policy import apply_scheduler_policy

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.inputs.engine import EngineInput
    from vllm.pooling_params import PoolingParams
    from vllm.sampling_params import SamplingParams

logger = get_logger(__name__)


class ReferenceConfigError(ValueError):
    """A vLLM configuration the reference platform cannot run."""


class ReferencePlatform(Platform):
    """Out-of-tree platform whose devices come from the `refrt` stand-in runtime."""

    _enum = PlatformEnum.OOT
    device_name: str = "reference"
    device_type: str = "reference"
    # Not a torch device type: tensors stay on the host (see uses_host_device_handling).
    dispatch_key: str = "CPU"
    device_control_env_var: str = "REFRT_VISIBLE_DEVICES"
    dist_backend: str = "gloo"
    # No inductor for a device torch does not know about.
    simple_compile_backend: str = "eager"

    def uses_host_device_handling(self) -> bool:
        # torch has no "reference" device type; DeviceConfig(device="auto")
        # must leave `device` unset rather than call torch.device("reference").
        return True

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        from vllm_reference_plugin import device

        return device.device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        from vllm_reference_plugin import device

        return device.device_total_memory(device_id)

    @classmethod
    def set_device(cls, device: Any) -> None:
        if device is None:
            return
        from vllm_reference_plugin import device as refdevice

        index = device.index if isinstance(device, torch.device) else int(device)
        refdevice.set_device(index or 0)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        # Virtual devices keep no RNG state; the host generator is seeded by vLLM.
        return None

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def import_kernels(cls) -> None:
        # The empty-target vLLM build ships no vllm._C; there is nothing to load.
        return None

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return False

    @classmethod
    def check_and_update_config(cls, vllm_config: VllmConfig) -> None:
        """Reject what the platform cannot run, then apply the scheduling policy."""
        problems: list[str] = []
        if vllm_config.speculative_config is not None:
            problems.append("speculative decoding is not supported (drop --speculative-config)")
        if vllm_config.kv_transfer_config is not None:
            problems.append(
                "KV connectors are not supported: ReferenceScheduler may schedule a step "
                "twice (prefill attempt, then decode fallback) and connector metadata "
                "cannot be merged (drop --kv-transfer-config)"
            )
        if vllm_config.ec_transfer_config is not None:
            problems.append(
                "encoder-cache connectors are not supported (drop --ec-transfer-config)"
            )
        parallel = vllm_config.parallel_config
        if parallel.tensor_parallel_size != 1 or parallel.pipeline_parallel_size != 1:
            problems.append(
                "tensor/pipeline parallelism is not supported: one engine drives one device "
                "(use --tensor-parallel-size 1 --pipeline-parallel-size 1)"
            )
        if problems:
            raise ReferenceConfigError("reference platform: " + "; ".join(problems))

        for reason in apply_scheduler_policy(
            vllm_config.scheduler_config, vllm_config.model_config
        ):
            logger.info("reference platform: %s", reason)

    @classmethod
    def validate_request(
        cls, processed_inputs: EngineInput, params: SamplingParams | PoolingParams
    ) -> None:
        """Refuse, per request, what the reference device cannot compute."""
        if getattr(params, "prompt_logprobs", None) is not None:
            raise ReferenceConfigError(
                "reference platform: prompt_logprobs are not supported (the device returns "
                "no logits for prompt tokens); drop prompt_logprobs from the request"
            )

    @staticmethod
    def needs_host_sampler(sampling_params: SamplingParams) -> bool:
        """Whether a request leaves the reference device's sampler for vLLM's host sampler.

        The device samples greedily or with temperature, top-k and top-p, and nothing
        else: log probabilities, penalties, structured output and token masks need the
        logits on the host.
        """
        p = sampling_params
        return bool(
            p.logprobs is not None
            or p.presence_penalty != 0.0
            or p.frequency_penalty != 0.0
            or p.repetition_penalty != 1.0
            or p.structured_outputs is not None
            or p.logit_bias
            or p.allowed_token_ids
            or p.bad_words
        )
