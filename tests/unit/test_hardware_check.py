"""The `hardware` check passes only when the runtime, the device, the -tp 2 probe and the
live load test were all observed working; each way short of that is its own status."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_plugin_release.conform.checks.hardware.check import hardware_check
from vllm_plugin_release.edges.device import Probe

FOUND = Probe(
    runtime={"module": "ttnn", "version": "0.81.1", "file": "/env/ttnn/__init__.py"},
    devices={"found": ["/dev/tenstorrent/0"]},
    mesh={"variable": "MESH_DEVICE", "value": "N300"},
)
REJECTED = {"status": "rejected", "detail": "tensor parallelism is not supported"}
LIVE = {"status": "pass", "detail": "64 of 64 requests completed", "file": "live.json"}


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
            Probe(runtime={}, devices={"found": []}, mesh={}, missing=["no /dev/tenstorrent/*"]),
            REJECTED,
            LIVE,
            "deferred",
            "no /dev/tenstorrent/*",
        ),
        (FOUND, None, LIVE, "deferred", "-tp 2 probe: not run"),
        (FOUND, REJECTED, None, "deferred", "live load test: not run"),
        (FOUND, {"status": "served", "detail": "started"}, LIVE, "fail", "-tp 2 probe: served"),
        (FOUND, REJECTED, {"status": "fail", "detail": "3 timed out"}, "fail", "3 timed out"),
    ],
)
def test_each_way_short_of_working_is_not_a_pass(
    found: Probe | None, tp: Any, live: Any, status: str, words: str
) -> None:
    result = hardware_check(found, tp, live)
    assert result.status == status and words in result.summary


def test_a_tp_probe_the_spec_makes_not_applicable_needs_no_run() -> None:
    tp = {"status": "not-applicable", "detail": "parallelism = 'none'"}
    result = hardware_check(FOUND, tp, LIVE)
    assert result.status == "pass"
    assert result.evidence[1].source == "spec"
