"""Bisection over an ordered list of core candidates (commits or versions), pure.

The first candidate is known good and the last known bad; `search` asks a probe about
the middle one until the first bad candidate is found (log2(n) probes). A candidate is
bad when one of the tests that regressed between the ends fails on it again, so a test
that was already broken, or broke and healed in between, does not steer the search.
Also here: the first lines of each failure in a JUnit file, the nearest versions to one
that is not on the index, and the report's Markdown.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_plugin_release.core.errors import BadInput


@dataclass(frozen=True)
class Probe:
    """The plugin's tests on one candidate core."""

    candidate: str
    failing: tuple[str, ...]
    errors: dict[str, list[str]] = field(default_factory=dict)  # test -> first lines

    def broken_by(self, watched: Sequence[str]) -> list[str]:
        """The watched tests that fail here."""
        return sorted(set(watched) & set(self.failing))


def search(
    candidates: Sequence[str], watched: Sequence[str], probe: Callable[[str], Probe]
) -> tuple[int, list[tuple[str, str]]]:
    """The index of the first bad candidate and the steps taken ((candidate, good|bad)).

    `candidates[0]` is good and `candidates[-1]` bad (the caller has checked both)."""
    lo, hi = 0, len(candidates) - 1
    steps: list[tuple[str, str]] = []
    while hi - lo > 1:
        mid = (lo + hi) // 2
        bad = bool(probe(candidates[mid]).broken_by(watched))
        steps.append((candidates[mid], "bad" if bad else "good"))
        if bad:
            hi = mid
        else:
            lo = mid
    return hi, steps


def first_error_lines(junit: Path, lines: int = 3) -> dict[str, list[str]]:
    """For each failed or erroring test case: the first `lines` lines of its message."""
    try:
        root = ET.parse(junit).getroot()
    except (ET.ParseError, OSError):
        return {}
    out: dict[str, list[str]] = {}
    for case in root.iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            continue
        classname = case.get("classname", "")
        test_id = f"{classname}::{case.get('name', '?')}" if classname else case.get("name", "?")
        text = (problem.get("message") or "") + "\n" + (problem.text or "")
        kept = [line.rstrip() for line in text.splitlines() if line.strip()]
        out[test_id] = kept[:lines]
    return out


def nearest_versions(wanted: str, available: Sequence[str], count: int = 3) -> list[str]:
    """The `count` available versions closest to `wanted` (by release order)."""
    try:
        target = Version(wanted)
    except InvalidVersion:
        return list(available[-count:])
    ordered = sorted(available, key=Version)
    below = [v for v in ordered if Version(v) < target]
    above = [v for v in ordered if Version(v) > target]
    picked: list[str] = []
    while len(picked) < count and (below or above):
        if below:
            picked.append(below.pop())
        if above and len(picked) < count:
            picked.append(above.pop(0))
    return sorted(picked, key=Version)


def versions_between(good: str, bad: str, available: Sequence[str], where: str) -> list[str]:
    """The available versions from `good` to `bad` (both included), oldest first.

    Exit 2 when an end is not available (naming the nearest ones) or the ends are in the
    wrong order."""
    for flag, value in (("--good", good), ("--bad", bad)):
        if value not in available:
            near = ", ".join(nearest_versions(value, available)) or "none"
            raise BadInput(
                f"{flag} {value}: no such version with an sdist on {where} (nearest: {near})",
                hint="pick published versions (`vpr upstream --spec FILE --range` lists them)",
            )
    if Version(good) >= Version(bad):
        raise BadInput(f"--good {good} is not older than --bad {bad}")
    return sorted(
        (v for v in available if Version(good) <= Version(v) <= Version(bad)), key=Version
    )


def render_markdown(report: dict[str, Any]) -> str:
    """The bisect report (`bisect.md`; the migration report quotes it)."""
    kind = "commit" if report["mode"] == "git" else "version"
    first = report["first_bad"]
    out = [
        f"### Bisection: {report['good']} (good) .. {report['bad']} (bad)",
        "",
        f"Searched {report['candidates']} {kind}s on {report['source']} with "
        f"{len(report['steps'])} probe(s) between the ends.",
        "",
        f"First bad {kind}: `{first['candidate']}`"
        + (f" {first['subject']}" if first.get("subject") else "")
        + (f" (last good: `{report['last_good']}`)" if report.get("last_good") else ""),
        "",
        f"{len(first['failing'])} regressed test(s) fail there:",
        "",
    ]
    for test in first["failing"]:
        out.append(f"- `{test}`")
        for line in first["errors"].get(test, []):
            out.append(f"    {line}")
    out += ["", "| step | " + kind + " | verdict |", "|---|---|---|"]
    for number, step in enumerate(report["steps"], start=1):
        out.append(f"| {number} | `{step['candidate']}` | {step['verdict']} |")
    return "\n".join(out) + "\n"
