"""Entry points vLLM calls (see pyproject.toml).

- `vllm.platform_plugins` -> `platform_plugin()`: the platform class path when
  the vendor runtime (`refrt`) imports, else None, so that installing the
  plugin without its runtime leaves vLLM's platform choice untouched.
- `vllm.general_plugins` -> `register()`: runs in every vLLM process (API
  server, engine core, workers), possibly more than once, so it is idempotent.
"""

from __future__ import annotations

import importlib

from vllm_reference_plugin import PLATFORM_CLS, RUNTIME_MODULE, get_logger

logger = get_logger(__name__)

MODEL_ALIASES: dict[str, str] = {
    # The reference platform's name for a Llama-architecture checkpoint. It
    # is served by vLLM's own implementation; registering it lazily (a
    # "module:Class" string) imports nothing until a model asks for it.
    "ReferenceLlamaForCausalLM": "vllm.model_executor.models.llama:LlamaForCausalLM",
}


def platform_plugin() -> str | None:
    """Return the ReferencePlatform class path if `refrt` imports, else None."""
    try:
        importlib.import_module(RUNTIME_MODULE)
    except Exception as exc:  # a broken runtime install is as absent as a missing one
        logger.debug("reference platform unavailable: cannot import %s (%s)", RUNTIME_MODULE, exc)
        return None
    logger.debug("reference platform available: %s imports", RUNTIME_MODULE)
    return PLATFORM_CLS


def register() -> None:
    """Register the plugin's model architecture aliases (idempotent, no imports of models)."""
    from vllm import ModelRegistry

    supported = ModelRegistry.get_supported_archs()
    for arch, target in MODEL_ALIASES.items():
        if arch not in supported:
            ModelRegistry.register_model(arch, target)
            logger.debug("registered model architecture %s -> %s", arch, target)
