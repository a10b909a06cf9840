"""The `hardware` check passes only when the runtime, the device, the -tp 2 probe and the
live load test were all observed working; each way short of that is its own status."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from vllm_plugin_release.conform.checks.hardware import (
    LiveOutcome,
    TpOutcome,
    hardware_check,
    live_result,
    missing_error,
    without_runtime,
)
from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.edges.device import DevicesFound, MeshFound, Probe, RuntimeFound
from vllm_plugin_release.replay.loadtest import LoadSummary, RequestCounts, Stats

FOUND = Probe(
    runtime=RuntimeFound(
        None, "ttnn", "/env/bin/python", "present", None, "/env/ttnn/__init__.py", "0.81.1", {}
    ),
    devices=DevicesFound("/dev/tenstorrent/*", ("/dev/tenstorrent/0",)),
    mesh=MeshFound("MESH_DEVICE", None, "N300"),
)
REJECTED = TpOutcome("rejected", "tensor parallelism is not supported")
LIVE = LiveOutcome("pass", "64 of 64 requests completed", file="live.json")


def short_of(*missing: str) -> Probe:
    """A probe that found nothing and says what is missing."""
    return Probe(
        RuntimeFound(None, "ttnn", "/env/bin/python", "absent", "No module named 'ttnn'"),
        DevicesFound(None, ()),
        MeshFound(None, None, None),
        missing,
    )


def test_everything_observed_working_passes_with_its_evidence() -> None:
    result = hardware_check(FOUND, REJECTED, LIVE)
    assert result.status == "pass"
    notes = [e.note for e in result.evidence]
    assert "ttnn 0.81.1" in notes[0] and "MESH_DEVICE=N300" in notes[0]
    assert notes[1] == "-tp 2 probe: rejected: tensor parallelism is not supported"
    assert notes[2].startswith("live load test: pass") and result.evidence[2].file == "live.json"


@pytest.mark.parametrize(
    ("found", "tp", "live", "status", "words"),
    [
        (None, REJECTED, LIVE, "deferred", "the hardware probe did not run"),
        (
            short_of("no /dev/tenstorrent/*"),
            REJECTED,
            LIVE,
            "deferred",
            "no /dev/tenstorrent/*",
        ),
        (FOUND, None, LIVE, "deferred", "-tp 2 probe: not run"),
        (FOUND, REJECTED, None, "deferred", "live load test: not run"),
        (FOUND, TpOutcome("served", "started"), LIVE, "fail", "-tp 2 probe: served"),
        (FOUND, REJECTED, LiveOutcome("fail", "3 timed out"), "fail", "3 timed out"),
    ],
)
def test_each_way_short_of_working_is_not_a_pass(
    found: Probe | None, tp: Any, live: Any, status: str, words: str
) -> None:
    result = hardware_check(found, tp, live)
    assert result.status == status and words in result.summary


def test_a_tp_probe_the_spec_makes_not_applicable_needs_no_run() -> None:
    tp = TpOutcome("not-applicable", "parallelism = 'none'")
    result = hardware_check(FOUND, tp, LIVE)
    assert result.status == "pass"
    assert result.evidence[1].source == "spec"


def _summary(completed: int, planned: int) -> LoadSummary:
    return LoadSummary(
        RequestCounts(planned, planned, completed, planned - completed, 0),
        Stats(0.5, 0.9, 0.6, 1.0),
        Stats(0.02, 0.05, 0.03, 0.08),
        1000,
        50.0,
    )


def test_the_live_load_test_passes_only_when_every_planned_request_completed() -> None:
    whole = live_result(_summary(64, 64), 12.5)
    assert whole.status == "pass"
    assert whole.detail == (
        "64/64 requests completed, TTFT p50 0.5 s, ITL p99 0.05 s, startup 12.5 s"
    )
    assert live_result(_summary(63, 64), 12.5).status == "fail"


def test_a_machine_short_of_the_hardware_is_an_outside_failure_naming_each_piece() -> None:
    short = short_of("no /dev/tenstorrent/*", "MESH_DEVICE is not set")
    error = missing_error(short)
    assert isinstance(error, OutsideFailure)
    assert "  - no /dev/tenstorrent/*\n  - MESH_DEVICE is not set" in error.message


def test_a_runtime_the_lock_installs_is_left_to_the_probe_in_the_env() -> None:
    spec = SimpleNamespace(runtime_module="ttnn")
    found = short_of("module 'ttnn' is not importable", "no /dev/tenstorrent/*")
    assert without_runtime(found, spec).missing == ("no /dev/tenstorrent/*",)  # type: ignore[arg-type]
    spec_without = SimpleNamespace(runtime_module=None)
    assert without_runtime(found, spec_without).missing == found.missing  # type: ignore[arg-type]


def test_the_outcomes_write_the_json_they_always_did() -> None:
    """hardware.json's tp_probe and live keep their bytes: keys and order as before."""
    started = TpOutcome("rejected", "exit 1: no -tp", 1, ("serve", "m", "-tp", "2"), "/d/tp.log")
    assert list(started.to_json().items()) == [
        ("argv", ["serve", "m", "-tp", "2"]),
        ("log", "/d/tp.log"),
        ("status", "rejected"),
        ("detail", "exit 1: no -tp"),
        ("exit_code", 1),
    ]
    assert TpOutcome("not-applicable", "not run").to_json() == {
        "status": "not-applicable",
        "detail": "not run",
    }
    ran = LiveOutcome("pass", "ok", _summary(2, 2), file="/d/l.json", log="/d/s.log")
    assert list(ran.to_json()) == ["status", "detail", "summary", "file", "log"]
    assert json.dumps(ran.to_json()["summary"]) == json.dumps(
        {
            "requests": {
                "planned": 2,
                "sent": 2,
                "completed": 2,
                "errors": 0,
                "fewer_tokens_than_requested": 0,
            },
            "ttft_s": {"p50": 0.5, "p99": 0.9, "mean": 0.6, "max": 1.0},
            "itl_s": {"p50": 0.02, "p99": 0.05, "mean": 0.03, "max": 0.08},
            "output_tokens": 1000,
            "output_tokens_per_s": 50.0,
        }
    )
    never = LiveOutcome("fail", "no /health", log_tail="boom", log="/d/s.log")
    assert list(never.to_json().items()) == [
        ("status", "fail"),
        ("detail", "no /health"),
        ("log_tail", "boom"),
        ("log", "/d/s.log"),
    ]
