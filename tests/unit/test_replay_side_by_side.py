"""The two schedulers' replays run side by side, one in-env run each, merged in order.

The in-env run is a test double here (it needs vLLM: the real replays are
tests/integration/test_replay_in_env.py); what is checked is the split, the
concurrency and the merge."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.edges import envrun
from vllm_plugin_release.replay import runner


def _request(labels: list[str]) -> dict[str, Any]:
    return {
        "model": {"max_model_len": 64},
        "schedulers": [{"label": label, "cls": f"m:{label}"} for label in labels],
    }


def test_each_scheduler_is_its_own_run_and_they_overlap(monkeypatch) -> None:
    monkeypatch.setattr(runner, "_cores", lambda: 2)
    both_started = threading.Barrier(2, timeout=10)
    calls: list[list[str]] = []

    def in_env(python, module, request, *, timeout=None, **_: Any) -> dict[str, Any]:  # double
        labels = [s["label"] for s in request["schedulers"]]
        calls.append(labels)
        both_started.wait()  # a run that waited for the other to end would break this
        return {
            "vllm_version": "0.26.0",
            "import_s": 1.0 if labels == ["upstream"] else 2.0,
            "results": {label: {"steps": label} for label in labels},
        }

    monkeypatch.setattr(envrun, "run_in_env", in_env)
    merged = runner.side_by_side(Path("python"), _request(["plugin", "upstream"]), 60)
    assert sorted(calls) == [["plugin"], ["upstream"]]
    assert list(merged["results"]) == ["plugin", "upstream"]  # the request's order
    assert merged["results"]["upstream"] == {"steps": "upstream"}
    assert merged["vllm_version"] == "0.26.0" and merged["import_s"] == 2.0


def test_one_core_keeps_one_run_for_all(monkeypatch) -> None:
    monkeypatch.setattr(runner, "_cores", lambda: 1)
    calls: list[list[str]] = []

    def in_env(python, module, request, *, timeout=None, **_: Any) -> dict[str, Any]:  # double
        calls.append([s["label"] for s in request["schedulers"]])
        return {"results": {s["label"]: {} for s in request["schedulers"]}}

    monkeypatch.setattr(envrun, "run_in_env", in_env)
    runner.side_by_side(Path("python"), _request(["plugin", "upstream"]), 60)
    assert calls == [["plugin", "upstream"]]


def test_a_failing_run_fails_the_replay(monkeypatch) -> None:
    from vllm_plugin_release.core.errors import BadInput

    monkeypatch.setattr(runner, "_cores", lambda: 2)

    def in_env(python, module, request, *, timeout=None, **_: Any) -> dict[str, Any]:  # double
        if request["schedulers"][0]["label"] == "plugin":
            raise BadInput("m:plugin does not import")
        return {"results": {"upstream": {}}}

    monkeypatch.setattr(envrun, "run_in_env", in_env)
    with pytest.raises(BadInput, match="does not import"):
        runner.side_by_side(Path("python"), _request(["plugin", "upstream"]), 60)
