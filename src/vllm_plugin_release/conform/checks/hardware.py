"""The `hardware` check: what only the hardware runner can show (the device probe, the `-tp 2`
probe, the live load test), judged and added to the scorecard (`collect`)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from vllm_plugin_release.conform import CheckDef, CheckResult, Evidence
from vllm_plugin_release.conform.lib.hardwaresettings import HARDWARE_SCHEMA
from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput, OutsideFailure

if TYPE_CHECKING:
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.core.cardrecord import Scorecard
    from vllm_plugin_release.edges.device import Probe, ProbeJson
    from vllm_plugin_release.replay.loadtest import LoadSummary, LoadSummaryJson


TABLES: dict[str, dict[str, Any]] = {"hardware": HARDWARE_SCHEMA}


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
        out: TpJson = {"argv": list(self.argv), "log": self.log} if self.argv is not None else {}
        out |= {"status": self.status, "detail": self.detail}
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        return out


@dataclass(frozen=True, slots=True)
class LiveOutcome:
    """The live load test's outcome: pass or fail, its summary when it ran, the files it left."""

    status: str
    detail: str
    summary: LoadSummary | None = None
    log_tail: str | None = None  # the server's log, when it never answered
    file: str | None = None  # the load test's record
    log: str | None = None  # the server's log

    def to_json(self) -> LiveJson:
        """hardware.json's `live`: the fields that are set, in their order."""
        out: Any = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["summary"] = self.summary.to_json() if self.summary is not None else None
        return {k: v for k, v in out.items() if v is not None}  # type: ignore[return-value]


def mesh_text(found: Probe) -> str:
    """`, VARIABLE=value` of the probed mesh, for progress lines (empty without one)."""
    variable = found.mesh.variable
    return f", {variable}={found.mesh.value}" if variable else ""


def probe_evidence(found: Probe) -> Evidence:
    rt = found.runtime
    mesh = found.mesh
    return Evidence(
        note=f"runtime {rt.module} {rt.version or ''} imported from "
        f"{rt.file}; devices {', '.join(found.devices.found)}"
        + (f"; {mesh.variable}={mesh.value}" if mesh.variable else ""),
        source="hardware-probe",
    )


def tp_evidence(tp: TpOutcome | None, statuses: list[str]) -> Evidence:
    """The `-tp 2` probe's evidence; its status added to `statuses` unless not applicable."""
    if tp is not None and tp.status == "not-applicable":
        return Evidence(note=f"-tp 2 probe: {tp.detail}", source="spec")
    if tp is None:
        statuses.append("deferred")
        return Evidence(note="-tp 2 probe: not run", source="probe")
    statuses.append("pass" if tp.status == "rejected" else "fail")
    return Evidence(note=f"-tp 2 probe: {tp.status}: {tp.detail}", source="probe")


def live_evidence(live: LiveOutcome | None, statuses: list[str]) -> Evidence:
    if live is None:
        statuses.append("deferred")
        return Evidence(note="live load test: not run", source="loadtest")
    statuses.append(live.status)
    return Evidence(f"live load test: {live.status}: {live.detail}", live.file, source="loadtest")


PROBE_RECORD = records.HARDWARE_PROBE
RECORD = records.HARDWARE
NAME = "hardware"
# A clear rejection of `-tp 2`: an error line that names what was rejected (a line that
# only echoes the arguments, e.g. "non-default args: {'tensor_parallel_size': 2}", is not);
# the spec's mesh variable counts as a subject too (`rejection_subject`).
REJECTION_SUBJECT = r"tensor[-_ ]parallel|\B-tp\b|pipeline[-_ ]parallel"
REJECTION_WORDS = re.compile(
    r"error|reject|not supported|unsupported|invalid|must|cannot|can't|instead", re.IGNORECASE
)


def classify_rejection(
    returncode: int | None, came_up: bool, output: str, mesh_variable: str | None = None
) -> TpOutcome:
    """The `-tp 2` probe's outcome from what was observed (pure); an error line that names
    tensor/pipeline parallelism or the spec's mesh variable is a rejection's subject."""
    subject = re.compile(
        REJECTION_SUBJECT + (rf"|\b{re.escape(mesh_variable)}\b" if mesh_variable else ""),
        re.IGNORECASE,
    )
    if came_up:
        return TpOutcome("accepted", "the server came up with -tp 2 (not rejected)")
    if returncode is None:
        return TpOutcome("no-answer", "neither failed nor came up before the timeout")
    if returncode == 0:
        return TpOutcome("accepted", "vllm serve -tp 2 exited 0")
    lines = [
        line.strip()
        for line in output.splitlines()
        if subject.search(line) and REJECTION_WORDS.search(line) and "non-default args" not in line
    ]
    if lines:
        return TpOutcome("rejected", f"exit {returncode}: {lines[-1][:300]}", returncode)
    return TpOutcome(
        "unclear",
        f"exit {returncode}, but no error mentions tensor parallelism"
        + (f" or {mesh_variable}" if mesh_variable else ""),
        returncode,
    )


def missing_error(found: Probe) -> OutsideFailure:
    """Exit 3 on a machine that is not a working hardware runner, naming what is missing."""
    return OutsideFailure(
        "hardware runner: not on a working hardware runner; missing:\n  - "
        + "\n  - ".join(found.missing),
        hint="run on the self-hosted hardware runner (runtime installed, device attached, "
        "the spec's mesh variable set); nothing was reported as passed",
    )


def without_runtime(found: Probe, spec: Spec) -> Probe:
    """`found` less what it says about the runtime module (for a runtime the pairing lock
    installs: it is probed again in that environment)."""
    module = str(spec.runtime_module or "")
    rest = tuple(m for m in found.missing if not (module and f"'{module}'" in m))
    return dataclasses.replace(found, missing=rest)


def live_result(summary: LoadSummary, startup: float) -> LiveOutcome:
    """The live load test's outcome: pass only when every planned request completed."""
    s = summary
    complete = s.requests.completed == s.requests.planned
    return LiveOutcome(
        "pass" if complete else "fail",
        f"{s.requests.completed}/{s.requests.planned} requests "
        f"completed, TTFT p50 {s.ttft_s.p50} s, ITL p99 {s.itl_s.p99} s, "
        f"startup {startup} s",
        s,
    )


def hardware_check(
    found: Probe | None, tp: TpOutcome | None, live: LiveOutcome | None
) -> CheckResult:
    """The `hardware` check: pass only when everything was observed working."""
    if found is None or not found.ok:
        reason = "; ".join(found.missing) if found else "the hardware probe did not run"
        return CheckResult(
            NAME,
            "deferred",
            f"hardware part not run: {reason}",
            [Evidence(note=m, source="hardware-probe") for m in (found.missing if found else [])],
        )
    statuses: list[str] = []
    evidence = [probe_evidence(found), tp_evidence(tp, statuses), live_evidence(live, statuses)]
    status = "fail" if "fail" in statuses else ("deferred" if "deferred" in statuses else "pass")
    summary = {
        "pass": "runtime and device observed; -tp 2 rejected with a clear error; live load "
        "test completed",
        "fail": "observed on the hardware runner and failed: "
        + "; ".join(e.note for e in evidence[1:] if "pass:" not in e.note),
        "deferred": "hardware part incomplete: "
        + "; ".join(e.note for e in evidence[1:] if "not run" in e.note),
    }[status]
    return CheckResult(
        NAME,
        status,  # type: ignore[arg-type]
        summary,
        evidence,
        threshold={"tp_probe": "rejected", "live": "all requests complete"},
        details=dict(hardware_record(found, tp, live)),
    )


def hardware_record(found: Probe, tp: TpOutcome | None, live: LiveOutcome | None) -> HardwareJson:
    """hardware.json, and the check's details: the probe, the -tp 2 probe, the live test."""
    return {
        "probe": found.to_json(),
        "tp_probe": tp.to_json() if tp is not None else None,
        "live": live.to_json() if live is not None else None,
    }


def collect(dist: Path, check: CheckResult) -> Scorecard:
    """Add (or replace) the hardware check in dist/scorecard.*; the card written, typed."""
    from vllm_plugin_release.conform.scorecard import scorecard, utc_day, write_card
    from vllm_plugin_release.core import cardrecord

    path = dist / records.SCORECARD
    card = cardrecord.read(dist, "vpr conform --site hardware")  # bounded, checked
    if card.runner != "hardware":
        raise BadInput(
            f"{path}: written by the {card.runner!r} runner",
            hint="run `vpr conform --site hardware` first",
        )
    results = [r for r in card.results if r.name != NAME]
    facts = {**card.facts.to_json(), "certified_on": utc_day()}
    new = scorecard(
        [*results, check], runner="hardware", pairing=card.pairing.to_json(), facts=facts
    )
    write_card(dist, new)
    return cardrecord.parse(new, str(path))


CHECK = CheckDef(
    "hardware",
    "the live part on the hardware runner: the parallelism probe and a mixed-load "
    "test against `vllm serve`",
    None,
    TABLES,
    ("env",),
    needs=("env", "runtime", "device"),
    runner="hardware",
)
