"""ReferencePlatform against vLLM 0.26.0's Platform interface."""

from __future__ import annotations

import importlib.util

import pytest
from vllm.platforms.interface import Platform, PlatformEnum

from vllm_reference_plugin import SCHEDULER_CLS
from vllm_reference_plugin.platform import ReferenceConfigError, ReferencePlatform
from vllm_reference_plugin.scheduler import ReferenceScheduler

HAS_RUNTIME = importlib.util.find_spec("refrt") is not None


def test_is_an_out_of_tree_vllm_platform():
    assert issubclass(ReferencePlatform, Platform)
    platform = ReferencePlatform()
    assert platform._enum is PlatformEnum.OOT
    assert platform.is_out_of_tree()
    assert not platform.is_cuda_alike() and not platform.is_cpu()
    # torch has no "reference" device: DeviceConfig must not build torch.device from it
    assert platform.uses_host_device_handling()


def test_scheduler_class_resolves_through_vllm(make_vllm_config):
    config = make_vllm_config(max_num_batched_tokens=64, enable_chunked_prefill=True)
    # Applied already when ReferencePlatform is the current platform; idempotent anyway.
    ReferencePlatform.check_and_update_config(config)

    sched = config.scheduler_config
    assert sched.scheduler_cls == SCHEDULER_CLS
    assert sched.get_scheduler_cls() is ReferenceScheduler
    assert sched.enable_chunked_prefill is False
    assert sched.long_prefill_token_threshold == 0
    assert sched.max_num_batched_tokens == config.model_config.max_model_len


@pytest.mark.parametrize(
    ("attribute", "value", "message"),
    [
        ("tensor_parallel_size", 2, "tensor/pipeline parallelism"),
        ("pipeline_parallel_size", 2, "tensor/pipeline parallelism"),
    ],
)
def test_rejects_what_it_cannot_run(make_vllm_config, attribute, value, message):
    config = make_vllm_config()
    setattr(config.parallel_config, attribute, value)
    with pytest.raises(ReferenceConfigError, match=message):
        ReferencePlatform.check_and_update_config(config)


def test_rejects_kv_connectors(make_vllm_config):
    from vllm.config import KVTransferConfig

    config = make_vllm_config()
    config.kv_transfer_config = KVTransferConfig(kv_connector="ExampleConnector", kv_role="kv_both")
    with pytest.raises(ReferenceConfigError, match="KV connectors"):
        ReferencePlatform.check_and_update_config(config)


@pytest.mark.skipif(not HAS_RUNTIME, reason="refrt not installed: platform inactive")
def test_is_the_current_platform_when_the_runtime_is_installed(make_vllm_config):
    from vllm.config import DeviceConfig
    from vllm.platforms import current_platform

    assert isinstance(current_platform, ReferencePlatform)
    auto = DeviceConfig(device="auto")
    assert auto.device_type == "reference" and auto.device is None
    # building a VllmConfig ran the platform hook
    assert make_vllm_config().scheduler_config.scheduler_cls == SCHEDULER_CLS


@pytest.mark.skipif(HAS_RUNTIME, reason="refrt installed: platform active")
def test_is_not_the_current_platform_without_the_runtime():
    from vllm.platforms import current_platform

    assert not isinstance(current_platform, ReferencePlatform)


def test_refuses_prompt_logprobs_per_request():
    from vllm.inputs.engine import tokens_input
    from vllm.sampling_params import SamplingParams

    inputs = tokens_input([1, 2, 3])
    ReferencePlatform.validate_request(inputs, SamplingParams(max_tokens=4))
    with pytest.raises(ReferenceConfigError, match="prompt_logprobs"):
        ReferencePlatform.validate_request(inputs, SamplingParams(max_tokens=4, prompt_logprobs=1))


@pytest.mark.parametrize(
    ("params", "host"),
    [
        ({}, False),
        ({"temperature": 0.8, "top_p": 0.9, "top_k": 40, "seed": 3}, False),
        ({"logprobs": 0}, True),
        ({"logprobs": 5}, True),
        ({"presence_penalty": 0.5}, True),
        ({"repetition_penalty": 1.1}, True),
        ({"logit_bias": {5: -100.0}}, True),
    ],
)
def test_the_host_sampler_takes_what_the_device_cannot_sample(params, host):
    from vllm.sampling_params import SamplingParams

    assert ReferencePlatform.needs_host_sampler(SamplingParams(**params)) is host


def test_structured_output_goes_to_the_host_sampler():
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    params = SamplingParams(structured_outputs=StructuredOutputsParams(regex="[a-z]+"))
    assert ReferencePlatform.needs_host_sampler(params) is True
