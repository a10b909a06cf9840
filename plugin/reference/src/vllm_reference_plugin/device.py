"""Device access through the vendor runtime. NEEDS THE RUNTIME: imports `refrt`.

This is the only plugin module that imports the runtime at module level (see
`vllm_reference_plugin.RUNTIME_MODULES`); the platform class imports it
lazily, inside the methods that talk to a device. `refrt` is a stand-in
runtime whose devices are virtual.
"""

from __future__ import annotations

import refrt

__all__ = [
    "device_count",
    "device_name",
    "device_total_memory",
    "physical_device_id",
    "set_device",
]


def device_count() -> int:
    """Number of devices the runtime reports."""
    return refrt.device_count()


def device_name(device_id: int = 0) -> str:
    """Human-readable device name, marked when the runtime is a stand-in."""
    name = refrt.open_device(device_id).name
    return f"{name} (stand-in)" if getattr(refrt, "STAND_IN", False) else name


def device_total_memory(device_id: int = 0) -> int:
    """Device memory in bytes."""
    return refrt.open_device(device_id).total_memory


def physical_device_id(device_id: int) -> int:
    """Validate a logical device id against the runtime and return it."""
    return refrt.open_device(device_id).device_id


def set_device(device_id: int) -> None:
    """Make `device_id` the runtime's default device for this process."""
    current = refrt.get_default_device()
    if current is None or current.device_id != device_id:
        refrt.set_default_device(device_id)
