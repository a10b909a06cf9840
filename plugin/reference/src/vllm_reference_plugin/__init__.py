"""vllm-reference-plugin: a small, real out-of-tree vLLM platform plugin.

It is the embedded default and test fixture of vllm-plugin-release. Its vendor
runtime is `refrt` (distribution vllm-reference-runtime), a clearly labelled
stand-in for a real accelerator runtime such as Tenstorrent's `ttnn`.

Importing this package does not import vLLM or the runtime.
"""

from __future__ import annotations

import logging

__version__ = "0.1.0"

RUNTIME_MODULE = "refrt"
"""The vendor runtime module; the platform activates only when it imports."""

PLATFORM_CLS = "vllm_reference_plugin.platform.ReferencePlatform"
"""Qualified name handed to vLLM (vLLM resolves it with `rsplit('.', 1)`)."""

SCHEDULER_CLS = "vllm_reference_plugin.scheduler.ReferenceScheduler"
"""Qualified name written to `SchedulerConfig.scheduler_cls` by the policy."""

RUNTIME_MODULES = ("vllm_reference_plugin.device",)
"""Plugin modules that import the vendor runtime at module level."""


def get_logger(module: str) -> logging.Logger:
    """Logger for a plugin module, placed under vLLM's `vllm` logger.

    vLLM configures handlers, format and level (VLLM_LOGGING_LEVEL) for the
    `vllm` logger only, so plugin messages join vLLM's own log stream.
    """
    return logging.getLogger(f"vllm.reference_plugin.{module.rsplit('.', 1)[-1]}")
