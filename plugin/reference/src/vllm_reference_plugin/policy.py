"""The reference platform's configuration policy, as a pure function.

`ReferencePlatform.check_and_update_config` calls `apply_scheduler_policy`; a
replay harness can call it directly on a `SchedulerConfig`/`ModelConfig` pair
(or any objects with the same attributes) without a platform being active.
This module imports nothing from vLLM.
"""

from __future__ import annotations

from typing import Any

from vllm_reference_plugin import SCHEDULER_CLS

__all__ = ["SCHEDULER_CLS", "apply_scheduler_policy"]


def _qualname(value: Any) -> str:
    if value is None:
        return "None (vLLM default)"
    if isinstance(value, str):
        return value
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', value)}"


def apply_scheduler_policy(scheduler_config: Any, model_config: Any | None) -> list[str]:
    """Apply the reference scheduling policy in place; return what changed and why.

    The policy (see docs/SCHEDULING.md):

    - the scheduler is `ReferenceScheduler` (a step is prefill-only or decode-only);
    - chunked prefill is disabled: the reference device never resumes a prefill;
    - `long_prefill_token_threshold` is 0, because vLLM's scheduler caps a
      prefill at that threshold before it looks at `enable_chunked_prefill`;
    - concurrent partial prefills are off (they require chunked prefill);
    - with chunking off, the token budget (`max_num_batched_tokens`, and
      `max_num_scheduled_tokens` when set) is raised to `max_model_len` so the
      longest admissible prompt fits in one prefill step;
    - async scheduling is off: `ReferenceScheduler` is a synchronous scheduler
      (it subclasses `Scheduler`, not `AsyncScheduler`).

    Returns one human-readable sentence per change; an empty list means the
    configuration already satisfied the policy (the function is idempotent).
    """
    reasons: list[str] = []

    current_cls = getattr(scheduler_config, "scheduler_cls", None)
    if _qualname(current_cls) != SCHEDULER_CLS:
        scheduler_config.scheduler_cls = SCHEDULER_CLS
        reasons.append(
            f"scheduler_cls: {_qualname(current_cls)} -> {SCHEDULER_CLS} "
            "(every step is prefill-only or decode-only)"
        )

    if getattr(scheduler_config, "enable_chunked_prefill", False):
        scheduler_config.enable_chunked_prefill = False
        reasons.append(
            "enable_chunked_prefill: True -> False (the reference device cannot resume "
            "a prefill, so a prompt is always prefilled whole)"
        )

    threshold = getattr(scheduler_config, "long_prefill_token_threshold", 0) or 0
    if threshold != 0:
        scheduler_config.long_prefill_token_threshold = 0
        reasons.append(
            f"long_prefill_token_threshold: {threshold} -> 0 (vLLM caps a prefill at this "
            "threshold before it checks enable_chunked_prefill, which would split prompts)"
        )

    for name in ("max_num_partial_prefills", "max_long_partial_prefills"):
        value = getattr(scheduler_config, name, 1)
        if value is not None and value > 1:
            setattr(scheduler_config, name, 1)
            reasons.append(f"{name}: {value} -> 1 (concurrent partial prefills need chunking)")

    max_model_len = getattr(model_config, "max_model_len", None) if model_config else None
    if max_model_len is not None and not scheduler_config.enable_chunked_prefill:
        batched = scheduler_config.max_num_batched_tokens
        if batched < max_model_len:
            scheduler_config.max_num_batched_tokens = max_model_len
            reasons.append(
                f"max_num_batched_tokens: {batched} -> {max_model_len} (= max_model_len: "
                "with chunked prefill off a whole prompt must fit in one step's budget)"
            )
        scheduled = getattr(scheduler_config, "max_num_scheduled_tokens", None)
        if scheduled is not None and scheduled < max_model_len:
            scheduler_config.max_num_scheduled_tokens = max_model_len
            reasons.append(
                f"max_num_scheduled_tokens: {scheduled} -> {max_model_len} (= max_model_len, "
                "same reason as max_num_batched_tokens)"
            )

    if getattr(scheduler_config, "async_scheduling", False):
        scheduler_config.async_scheduling = False
        reasons.append(
            "async_scheduling: True -> False (ReferenceScheduler is synchronous; it keeps "
            "no output placeholders)"
        )

    return reasons
