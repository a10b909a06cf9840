"""The scheduler check: does the replay agree with what the plugin's docs say?

The plugin's documentation says whether its scheduler puts prefill and decode work
in one batch. The replay observes it. The check fails when they disagree: the docs
say no mixed batches and the replay saw one, or the docs say batches mix and the
replay (under a load where upstream vLLM mixes) saw none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.conform.result import CheckResult, Evidence

CHECK_NAME = "scheduler"

# A sentence that denies mixing prefill and decode in one batch/step.
_NEGATIVE = re.compile(
    r"(\b(no|not|never|cannot|can't|doesn't|does not|don't|do not|without)\b[^.\n]{0,60}"
    r"\bmix(ed|es|ing)?\b[^.\n]{0,40}\b(prefill|decode|batch|batches|step)"
    r"|\bmix(ed|es|ing)?\b[^.\n]{0,40}\b(prefill|decode)[^.\n]{0,40}\b(not supported|never))",
    re.IGNORECASE,
)
# A sentence that says prefill and decode share a batch/step.
_POSITIVE = re.compile(
    r"(\bmix(es|ed|ing)?\b[^.\n]{0,30}\bprefill\b[^.\n]{0,20}\bdecode\b"
    r"|\bprefill\b[^.\n]{0,20}\bdecode\b[^.\n]{0,40}\b(same|one|single)\s+(batch|step)\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DocsClaim:
    """What the docs say: `mixes` is True when they say prefill and decode share a batch."""

    mixes: bool
    file: str | None = None
    line: int | None = None
    text: str = ""


def find_docs_claim(paths: Iterable[Path]) -> DocsClaim | None:
    """The first statement about mixed prefill/decode batches in `paths` (docs, docstrings).

    A denial anywhere wins over an affirmation: docs that say "upstream mixes them,
    we do not" deny mixing for the plugin.
    """
    positive: DocsClaim | None = None
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if not text:
                continue
            if _NEGATIVE.search(text):
                return DocsClaim(False, str(path), number, text[:200])
            if positive is None and _POSITIVE.search(text) and "upstream" not in text.lower():
                positive = DocsClaim(True, str(path), number, text[:200])
    return positive


def scheduler_check(report: dict[str, Any], claim: DocsClaim | None) -> CheckResult:
    """Compare the replay's observation (report["plugin"]) with the docs' claim."""
    plugin = report.get("plugin", {})
    upstream = report.get("upstream", {})
    threshold = {"docs_vs_replay": "must agree on whether prefill and decode share a step"}
    details = {
        "plugin_scheduler": plugin.get("scheduler"),
        "mixed_steps": plugin.get("mixed_steps"),
        "steps": plugin.get("steps"),
        "upstream_mixed_steps": upstream.get("mixed_steps"),
        "docs_claim_mixes": None if claim is None else claim.mixes,
    }
    evidence: list[Evidence] = []
    if claim is not None:
        evidence.append(
            Evidence(
                note=f"docs say: {claim.text}", file=claim.file, line=claim.line, source="plugin"
            )
        )
    if plugin.get("crashed"):
        return CheckResult(
            CHECK_NAME,
            "fail",
            f"the plugin's scheduler {plugin.get('scheduler')} failed during the replay: "
            f"{plugin['crashed']}",
            evidence,
            threshold,
            details,
        )
    mixed = int(plugin.get("mixed_steps") or 0)
    steps = int(plugin.get("steps") or 0)
    first = plugin.get("first_mixed_step")
    evidence.append(
        Evidence(
            note=f"replay: {mixed} of {steps} plugin steps mixed prefill and decode"
            + (f" (first at step {first})" if first is not None else ""),
            value=mixed,
            source="replay",
        )
    )
    if plugin.get("stopped"):
        return CheckResult(
            CHECK_NAME,
            "fail",
            f"the replay of {plugin.get('scheduler')} did not finish: {plugin['stopped']}",
            evidence,
            threshold,
            details,
        )
    if claim is None:
        return CheckResult(
            CHECK_NAME,
            "warn",
            f"the plugin's docs say nothing found about mixed prefill/decode batches; the "
            f"replay observed {mixed} mixed steps",
            evidence,
            threshold,
            details,
        )
    if not claim.mixes and mixed:
        return CheckResult(
            CHECK_NAME,
            "fail",
            f"the docs say prefill and decode never share a batch, but the replay observed "
            f"{mixed} mixed steps (first at step {first})",
            evidence,
            threshold,
            details,
        )
    if claim.mixes and not mixed:
        upstream_mixed = upstream.get("mixed_steps") or 0
        return CheckResult(
            CHECK_NAME,
            "fail",
            "the docs say prefill and decode share batches, but the replay observed no mixed "
            f"step (upstream vLLM mixed {upstream_mixed} on the same mix)",
            evidence,
            threshold,
            details,
        )
    verb = "mixes" if mixed else "never mixes"
    return CheckResult(
        CHECK_NAME,
        "pass",
        f"the replay agrees with the docs: the plugin's scheduler {verb} prefill and decode "
        f"({mixed} of {steps} steps mixed)",
        evidence,
        threshold,
        details,
    )


def check_from_files(replay_json: Path, docs: Iterable[Path]) -> CheckResult:
    """The scheduler check from dist/NAME/replay.json and the plugin's docs files."""
    import json

    try:
        report = json.loads(replay_json.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return CheckResult(
            CHECK_NAME,
            "fail",
            f"no replay result at {replay_json}: run `vpr replay --spec FILE` first",
        )
    except (OSError, ValueError) as exc:
        return CheckResult(CHECK_NAME, "fail", f"{replay_json}: unreadable replay result ({exc})")
    return scheduler_check(report, find_docs_claim(docs))
