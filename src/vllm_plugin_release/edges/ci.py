"""What a CI system reads back from a step: GitHub Actions' `$GITHUB_OUTPUT` file, the job
summary (`$GITHUB_STEP_SUMMARY`) and `::error::` annotations on the run page."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput


def output_text(value: object) -> str:
    """A workflow output's text: a string as it is, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def github_output(values: Mapping[str, str]) -> None:
    """Append key=value lines to the file GitHub Actions names in $GITHUB_OUTPUT (each
    value one line of text: `output_text` makes one of a list or an object)."""
    target = os.environ.get("GITHUB_OUTPUT")
    if not target:
        raise BadInput(
            "--github-output: $GITHUB_OUTPUT is not set", hint="only use it inside GitHub Actions"
        )
    with open(target, "a", encoding="utf-8") as out:
        for key, text in values.items():
            if "\n" in text:
                raise BadInput(f"--github-output: value of {key} spans lines")
            out.write(f"{key}={text}\n")


def in_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _escape(text: str, *, prop: bool = False) -> str:
    """A workflow command's data (or property value) escaped as the runner unescapes it."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def error_line(title: str, message: str) -> str:
    """`::error title=T::M`: an annotation on the run page."""
    return f"::error title={_escape(title, prop=True)}::{_escape(message)}"


class FailedCheck(NamedTuple):
    """A scorecard's failed check: its name and one-line summary ("failed" without one)."""

    name: str
    summary: str


def parse_failing(card: Any) -> tuple[FailedCheck, ...]:
    """The failed checks of a scorecard's JSON, by name; none when it has no `checks`
    object (a check that is not an object, or not failed, is left out)."""
    checks = card.get("checks") if isinstance(card, dict) else None
    if not isinstance(checks, dict):
        return ()
    return tuple(
        FailedCheck(str(name), str(result.get("summary") or "failed"))
        for name, result in sorted(checks.items())
        if isinstance(result, dict) and result.get("status") == "fail"
    )


def job_summary(markdown: str) -> bool:
    """In GitHub Actions: `markdown` appended to the job summary ($GITHUB_STEP_SUMMARY)."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not in_github_actions() or not target:
        return False
    with open(target, "a", encoding="utf-8") as out:
        out.write(markdown.rstrip("\n") + "\n\n")
    return True


def report_scorecard(dist: Path) -> bool:
    """In GitHub Actions: the scorecard (dist/NAME/scorecard.md) in the job summary
    ($GITHUB_STEP_SUMMARY) and an `::error::` per failing check. False elsewhere, or when
    there is no scorecard yet (a run that stopped before conform)."""
    if not in_github_actions():
        return False
    from vllm_plugin_release.core import progress

    card_md, card_json = dist / records.SCORECARD_MD, dist / records.SCORECARD
    try:
        markdown = card_md.read_text(encoding="utf-8")
    except (OSError, ValueError):
        markdown, failed = "", None
    else:  # bounded; None when not a JSON object
        failed = records.read_object(card_json, parse_failing)
    for name, summary in failed or ():
        progress.workflow_command(error_line(f"vpr check {name}", summary))
    if markdown:
        job_summary(markdown)
    return bool(markdown)
