"""Device access through the runtime (hardware-only; see conftest.py)."""

from __future__ import annotations

import pytest


def test_runtime_reports_a_device():
    from vllm_reference_plugin import device

    assert device.device_count() >= 1
    assert device.device_total_memory(0) > 0
    assert device.physical_device_id(0) == 0


def test_stand_in_runtime_is_labelled():
    import refrt

    from vllm_reference_plugin import device

    if getattr(refrt, "STAND_IN", False):
        assert device.device_name(0).endswith("(stand-in)")


def test_platform_device_methods_use_the_runtime():
    import refrt
    import torch

    from vllm_reference_plugin.platform import ReferencePlatform

    assert ReferencePlatform.get_device_name(0) == refrt.open_device(0).name + (
        " (stand-in)" if refrt.STAND_IN else ""
    )
    assert ReferencePlatform.get_device_total_memory(0) == refrt.open_device(0).total_memory
    ReferencePlatform.set_device(torch.device("cpu", 0))
    assert refrt.get_default_device() == refrt.open_device(0)


def test_unknown_device_is_an_error():
    from vllm_reference_plugin import device

    with pytest.raises(RuntimeError, match="no virtual device"):
        device.device_total_memory(device.device_count())
