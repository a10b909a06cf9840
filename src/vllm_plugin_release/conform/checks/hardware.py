"""The `hardware` check: the hardware runner's part of conformance (`nox -s conform-hardware`).

The check is made of what only the hardware can show (`flows.hardware` runs it, in the
hardware pairing environment): a probe that the vendor runtime and a device are there
(and, for a plugin that takes its mesh from a variable, that the variable is set), a probe
that `vllm serve ... -tp 2` is rejected with a clear error (only with parallelism =
"mesh": such a plugin never takes GPU rank flags), and the live mixed-load test against a
`vllm serve` started with the spec's model and settings. `flows.hardware` starts the
processes and servers; what they showed is judged here (`classify_rejection`, `live_result`,
what the probe found missing, `hardware_check`). `collect` adds the check to the
scorecard written by `vpr conform --site hardware` and recomputes the verdict: `fleet`
needs that check passed. Nothing is reported as passed unless it was observed.

Its settings, `[conformance.hardware]`, are `conform/lib/hardwaresettings.py` (the
`hardware_docs` and `workload` checks read them too).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.conform.checks.hardware.evidence import (
    live_evidence,
    probe_evidence,
    tp_evidence,
)
from vllm_plugin_release.conform.checks.hardware.outcomes import (
    HardwareJson,
    LiveOutcome,
    TpOutcome,
)
from vllm_plugin_release.conform.result import CheckResult, Evidence
from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput, OutsideFailure

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.conform.cardread import Scorecard
    from vllm_plugin_release.edges.device import Probe
    from vllm_plugin_release.replay.loadtest import LoadSummary

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


# ---------------------------------------------------------------------------
# The check


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
    """The live load test's outcome from its summary: pass only when every planned request
    completed."""
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
    """Add (or replace) the hardware check in dist/scorecard.*; recompute the verdict; the
    card written, typed."""
    from vllm_plugin_release.conform import cardread
    from vllm_plugin_release.conform.scorecard import FACT_KEYS, scorecard, utc_day
    from vllm_plugin_release.conform.scorecard_render import write_card

    path = dist / records.SCORECARD
    card = cardread.read(dist, "vpr conform --site hardware")  # bounded, checked
    if card.runner != "hardware":
        raise BadInput(
            f"{path}: written by the {card.runner!r} runner",
            hint="run `vpr conform --site hardware` first",
        )
    results = [r for r in card.results if r.name != NAME]
    facts = {k: card.raw.get(k) for k in FACT_KEYS}
    facts["certified_on"] = utc_day()
    new = scorecard([*results, check], runner="hardware", pairing=dict(card.pairing), facts=facts)
    write_card(dist, new)
    return cardread.parse(new, str(path))
