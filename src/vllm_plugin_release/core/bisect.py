"""Bisection over ordered core candidates (pure): the first bad one, judged only by the tests
that regressed between the ends; JUnit failures, nearest versions and the report."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from vllm_plugin_release.core.buildrecord import checked, is_int, is_object, text_fields, text_list
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
    """The index of the first bad candidate and the steps taken ((candidate, good|bad));
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
    """The available versions from `good` to `bad` (both included), oldest first; exit 2 for an
    end not available (naming the nearest ones) or ends in the wrong order."""
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


class BisectStep(NamedTuple):
    """One probe between the ends: the candidate and its verdict (good | bad)."""

    candidate: str
    verdict: str


class FirstBad(NamedTuple):
    """The first bad candidate: its subject (git), the regressed tests failing there, errors."""

    candidate: str
    subject: str
    failing: tuple[str, ...]
    errors: Mapping[str, tuple[str, ...]]


class BisectReport(NamedTuple):
    """bisect.json (`to_json()`) and what bisect.md shows."""

    mode: str  # git | index
    source: str
    core: str
    good: str
    bad: str
    candidates: int
    watched: tuple[str, ...]
    steps: tuple[BisectStep, ...]
    last_good: str
    first_bad: FirstBad

    def to_json(self) -> dict[str, object]:
        first = self.first_bad
        return {
            **self._asdict(),
            "watched": list(self.watched),
            "steps": [step._asdict() for step in self.steps],
            "first_bad": {
                **first._asdict(),
                "failing": list(first.failing),
                "errors": {t: list(lines) for t, lines in first.errors.items()},
            },
        }


def parse_report(data: object) -> BisectReport:
    """A bisect report as `to_json` wrote it; RecordProblem naming the first key amiss."""
    top = text_fields(data, "report", ("mode", "source", "core", "good", "bad", "last_good"))
    first = text_fields(top.get("first_bad"), "first_bad", ("candidate", "subject"))
    candidates = checked(top.get("candidates"), "candidates", is_int, "a count")
    errors = checked(first.get("errors"), "first_bad.errors", is_object, "an object")
    steps = checked(top.get("steps"), "steps", lambda v: isinstance(v, list), "a list")
    parts = (text_fields(s, f"steps[{n}]", ("candidate", "verdict")) for n, s in enumerate(steps))
    return BisectReport(
        *(top[key] for key in ("mode", "source", "core", "good", "bad")),
        candidates,
        text_list(top.get("watched"), "watched"),
        tuple(BisectStep(step["candidate"], step["verdict"]) for step in parts),
        top["last_good"],
        FirstBad(
            first["candidate"],
            first["subject"],
            text_list(first.get("failing"), "first_bad.failing"),
            {str(t): text_list(v, f"first_bad.errors.{t}") for t, v in errors.items()},
        ),
    )


def render_markdown(report: BisectReport) -> str:
    """The bisect report (`bisect.md`; the migration report quotes it)."""
    kind = "commit" if report.mode == "git" else "version"
    first = report.first_bad
    out = [
        f"### Bisection: {report.good} (good) .. {report.bad} (bad)",
        "",
        f"Searched {report.candidates} {kind}s on {report.source} with "
        f"{len(report.steps)} probe(s) between the ends.",
        "",
        f"First bad {kind}: `{first.candidate}`"
        + (f" {first.subject}" if first.subject else "")
        + (f" (last good: `{report.last_good}`)" if report.last_good else ""),
        "",
        f"{len(first.failing)} regressed test(s) fail there:",
        "",
    ]
    for test in first.failing:
        out.append(f"- `{test}`")
        for line in first.errors.get(test, ()):
            out.append(f"    {line}")
    out += ["", "| step | " + kind + " | verdict |", "|---|---|---|"]
    for number, step in enumerate(report.steps, start=1):
        out.append(f"| {number} | `{step.candidate}` | {step.verdict} |")
    return "\n".join(out) + "\n"
