"""What the hardware check's two live probes showed: the `-tp 2` probe (`TpOutcome`) and
the live load test (`LiveOutcome`), and the JSON they write into hardware.json. Apart from
`check.py` so that the evidence renderer and the check both import them, not each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from vllm_plugin_release.edges.device import ProbeJson
    from vllm_plugin_release.replay.loadtest import LoadSummary, LoadSummaryJson


class TpJson(TypedDict, total=False):
    argv: list[str]
    log: str | None
    status: str
    detail: str
    exit_code: int


class LiveJson(TypedDict, total=False):
    status: str
    detail: str
    summary: LoadSummaryJson
    log_tail: str
    file: str
    log: str


class HardwareJson(TypedDict):
    """hardware.json, and the check's details."""

    probe: ProbeJson
    tp_probe: TpJson | None
    live: LiveJson | None


@dataclass(frozen=True, slots=True)
class TpOutcome:
    """The `-tp 2` probe's outcome: status rejected (a pass), accepted, unclear, no-answer or
    not-applicable; the serve command and its log when it was started."""

    status: str
    detail: str
    exit_code: int | None = None
    argv: tuple[str, ...] | None = None  # `vllm serve ...` less the executable
    log: str | None = None

    def to_json(self) -> TpJson:
        """hardware.json's `tp_probe` (the key order it always had)."""
        out: TpJson = {}
        if self.argv is not None:
            out["argv"] = list(self.argv)
            out["log"] = self.log
        out["status"] = self.status
        out["detail"] = self.detail
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        return out


@dataclass(frozen=True, slots=True)
class LiveOutcome:
    """The live load test's outcome: pass or fail, the load test's summary when it ran
    (`loadtest.summarize`: counts and latency statistics), and the files it left."""

    status: str
    detail: str
    summary: LoadSummary | None = None
    log_tail: str | None = None  # the server's log, when it never answered
    file: str | None = None  # the load test's record
    log: str | None = None  # the server's log

    def to_json(self) -> LiveJson:
        """hardware.json's `live` (the key order it always had)."""
        out: LiveJson = {"status": self.status, "detail": self.detail}
        if self.summary is not None:
            out["summary"] = self.summary.to_json()
        if self.log_tail is not None:
            out["log_tail"] = self.log_tail
        if self.file is not None:
            out["file"] = self.file
        if self.log is not None:
            out["log"] = self.log
        return out
