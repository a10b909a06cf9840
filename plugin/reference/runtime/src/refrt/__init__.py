"""refrt: a STAND-IN vendor runtime for the vLLM reference platform plugin.

This is not an accelerator runtime. It plays the role `ttnn` plays for
Tenstorrent's plugin: the module whose successful import tells the plugin that
the vendor stack is installed. It reports "virtual" devices that exist only as
records in this module; nothing here touches hardware or runs kernels.

Environment:
    REFRT_NUM_DEVICES        number of virtual devices (default 1)
    REFRT_DEVICE_MEMORY_MIB  memory each virtual device reports (default 1024)
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

__all__ = [
    "STAND_IN",
    "RefrtError",
    "VirtualDevice",
    "device_count",
    "get_default_device",
    "open_device",
    "set_default_device",
]

__version__ = "0.1.0"

STAND_IN = True
"""Always True: this package is a labelled stand-in, not a vendor runtime."""

_DEFAULT_NUM_DEVICES = 1
_DEFAULT_MEMORY_MIB = 1024


class RefrtError(RuntimeError):
    """Raised for invalid device ids or bad REFRT_* settings."""


@dataclass(frozen=True)
class VirtualDevice:
    """One virtual device. Frozen: a record, not a handle to anything real."""

    device_id: int
    name: str
    total_memory: int  # bytes
    virtual: bool = True


def _int_env(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise RefrtError(f"{name}={raw!r} is not an integer") from exc
    if value < minimum:
        raise RefrtError(f"{name}={value} must be >= {minimum}")
    return value


def device_count() -> int:
    """Number of virtual devices this stand-in reports (1 unless REFRT_NUM_DEVICES)."""
    return _int_env("REFRT_NUM_DEVICES", _DEFAULT_NUM_DEVICES, 0)


def open_device(device_id: int = 0) -> VirtualDevice:
    """Return the record of virtual device `device_id`."""
    count = device_count()
    if not 0 <= device_id < count:
        raise RefrtError(f"no virtual device {device_id}: refrt reports {count} device(s)")
    memory_mib = _int_env("REFRT_DEVICE_MEMORY_MIB", _DEFAULT_MEMORY_MIB, 1)
    return VirtualDevice(
        device_id=device_id,
        name=f"refrt-virtual-{device_id}",
        total_memory=memory_mib * 1024 * 1024,
    )


_lock = threading.Lock()
_default: VirtualDevice | None = None


def set_default_device(device: VirtualDevice | int) -> VirtualDevice:
    """Make `device` (a record or an id) the process-wide default; returns the record."""
    global _default
    record = open_device(device) if isinstance(device, int) else device
    with _lock:
        _default = record
    return record


def get_default_device() -> VirtualDevice | None:
    """The device set by `set_default_device`, or None."""
    with _lock:
        return _default
