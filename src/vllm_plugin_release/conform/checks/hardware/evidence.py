"""The `hardware` check's evidence: what the probe, the `-tp 2` probe and the live load test
showed, one line each (and the mesh as the progress lines name it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm_plugin_release.conform.result import Evidence

if TYPE_CHECKING:
    from vllm_plugin_release.conform.checks.hardware.outcomes import LiveOutcome, TpOutcome
    from vllm_plugin_release.edges.device import Probe


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
    """The `-tp 2` probe's evidence; its status added to `statuses` (none when the spec
    makes it not applicable)."""
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
    return Evidence(
        note=f"live load test: {live.status}: {live.detail}",
        file=live.file,
        source="loadtest",
    )
