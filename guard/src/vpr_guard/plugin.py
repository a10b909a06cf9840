"""The `vllm.general_plugins` entry point: vLLM calls it once in every process it starts.

Under `enforce` a difference stops the process with one message (SystemExit: no
traceback, exit status 1; a program embedding vLLM can catch `Refused`); under `warn` the
message goes to standard error and vLLM starts; under `off` nothing is read.
"""

from __future__ import annotations

import os
import sys

from vpr_guard import POLICY_ENV

SECONDS_ENV = "VPR_GUARD_TIMING"  # set: the check's own time goes to stderr (benchmarks)


class Refused(SystemExit):
    """vLLM refused to start: the message is the exit status (printed, status 1)."""


def resolved_platform() -> tuple[str | None, str | None]:
    """(module.Class, None) of vLLM's current platform, or (None, the error)."""
    try:
        from vllm import platforms

        cls = type(platforms.current_platform)
    except Exception as exc:  # the plugin's platform failed to activate: a finding
        return None, f"{type(exc).__name__}: {exc}"
    return f"{cls.__module__}.{cls.__qualname__}", None


def check_at_startup() -> None:
    if os.environ.get(POLICY_ENV, "").strip().lower() == "off":
        return
    import time

    start = time.perf_counter()
    try:
        _check()
    finally:
        if os.environ.get(SECONDS_ENV):
            sys.stderr.write(f"vpr-guard: check took {time.perf_counter() - start:.6f} s\n")


def _check() -> None:
    from vpr_guard import check

    state = check.load_state()
    try:
        policy, source = check.resolve_policy(state)
    except check.BadPolicy as exc:  # never guess what was meant: refuse, naming it
        raise Refused(f"vpr-guard: vLLM will not start: {exc}; set it to enforce, warn or off")
    if policy == "off":
        return
    findings = check.compare(state)
    if not state.problems:
        findings += check.platform_finding(state, *resolved_platform())
    if not findings:
        return
    text = check.message(state, findings, policy, source)
    if policy == "enforce":
        raise Refused(text)
    sys.stderr.write(text + "\n")
