"""The shape every conformance check returns (pure data)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["pass", "warn", "fail", "deferred"]
STATUSES: tuple[str, ...] = ("pass", "warn", "fail", "deferred")


@dataclass(frozen=True)
class Evidence:
    """One observation behind a verdict: where it was seen and what was seen."""

    note: str
    file: str | None = None
    line: int | None = None
    value: Any = None
    source: str | None = None  # e.g. "sdist", "plugin", "index", "replay"

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    threshold: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "summary": self.summary,
            "evidence": [e.to_json() for e in self.evidence],
            "threshold": self.threshold,
            "details": self.details,
        }


def from_findings(
    name: str,
    findings: tuple[list[str], list[str]],
    tail: str,
    *,
    evidence: list[Evidence],
    threshold: dict[str, Any],
    details: dict[str, Any],
) -> CheckResult:
    """fail if any failure, else warn if any warning, else pass (`findings`: the failures
    and the warnings); `tail` states the facts."""
    fails, warns = findings
    if fails:
        status: Status = "fail"
        summary = "; ".join(fails) + f" [{tail}]"
    elif warns:
        status, summary = "warn", "; ".join(warns) + f" [{tail}]"
    else:
        status, summary = "pass", tail
    details["failures"] = fails
    details["warnings"] = warns
    return CheckResult(name, status, summary, evidence, threshold, details)
