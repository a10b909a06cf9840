"""The files vpr reads back and picks keys from (a pid file, the replay report's plots, a
proof marker, a run file, ...) come typed from their owner's parser: a hand-edited or
garbled one is what its reader treats as none, or bad input naming the file and the key,
never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.pairing import make_pairing
from vllm_plugin_release.conform import suite
from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.index import LocalIndex

REPLAY = {
    "ratios": {"itl_p50_s": 1.0, "itl_p99_s": 1.1, "output_tokens_per_s": 0.9},
    "plugin": {"mixed_step_share": 0.0},
    "upstream": {"mixed_step_share": 0.1},
}


@pytest.mark.parametrize("pid", [1e400, "-Infinity", "12", None, True, [1], {"pid": 1}, -3, 0])
def test_a_garbled_pid_file_is_no_server_to_stop(tmp_path: Path, pid: object) -> None:
    """`{"pid": 1e400}` (a float too large for int()) was an OverflowError out of the
    index's start; every pid that is not a positive whole number is none to stop."""
    index = LocalIndex(tmp_path / "root")
    index.pid_file.write_text(json.dumps({"pid": pid}).replace('"-Infinity"', "-Infinity"))
    index._stop_recorded()
    assert not index.pid_file.exists()


def _card_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: object) -> object:
    dist = tmp_path / "dist" / "ref"
    dist.mkdir(parents=True)
    make_pairing(dist, env=False)
    (dist / records.REPLAY).write_text(json.dumps(report))
    monkeypatch.setattr(suite.replay_config, "configured", lambda spec: True)
    ctx = SimpleNamespace(
        dist=dist,
        spec=SimpleNamespace(path="spec.toml", runtime=None),
        build=lambda name: records.build_record(dist, name),
    )
    return suite.card_facts(ctx, "2026-12-03")  # type: ignore[arg-type]


def test_the_replay_plots_go_into_the_card_as_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = _card_facts(tmp_path, monkeypatch, {**REPLAY, "plots": ["replay-steps.png"]})
    assert facts["replay"]["plots"] == ["replay-steps.png"]  # type: ignore[index]


@pytest.mark.parametrize("plots", [5, {"a": 1}, "steps.png", [1]])
def test_replay_plots_of_another_kind_are_bad_input_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plots: object
) -> None:
    """`"plots": 5` was a TypeError out of `vpr conform` (list(5)); a text or an object
    went into the scorecard as its letters or keys."""
    with pytest.raises(BadInput, match=r"replay\.json: plots is not a list") as info:
        _card_facts(tmp_path, monkeypatch, {**REPLAY, "plots": plots})
    assert info.value.exit_code == 2 and "vpr replay" in (info.value.hint or "")


HOSTILE = ["[]", '"x"', "{}", '{"wheels": [1], "ran_in": 1}', '{"kind": 5, "checks": 7}', "{"]


@pytest.mark.parametrize("body", HOSTILE)
def test_hostile_notes_are_none_for_a_look_that_must_never_fail(tmp_path: Path, body: str) -> None:
    """The readers that treat an unusable note as none still do, whatever it holds."""
    from vllm_plugin_release.edges import ci, container, fetch
    from vllm_plugin_release.flows import bisect, releasecache
    from vllm_plugin_release.stages import manifest, publish

    note = tmp_path / "note.json"
    note.write_text(body)
    for parse in (
        publish.parse_proof_note,
        manifest.parse_files_facts,
        fetch.parse_sdist_url,
        releasecache.parse_wheel_named,
        lambda data: container.parse_probe(data, "3.11"),
    ):
        assert records.read_object(note, parse) is None
    assert records.read_object(note, ci.parse_failing) in (None, ())
    (tmp_path / bisect.REPORT_JSON).write_text(body)
    assert bisect.read_report(tmp_path) is None
    (tmp_path / records.RUN).write_text(body)  # run.json: its sections, kept as written
    kept = records.run_file(tmp_path).raw
    assert kept == ({} if not body.startswith("{") or body == "{" else json.loads(body))


@pytest.mark.parametrize(
    "kept",
    [
        None,
        "[]",
        '{"implementation": "CPython", "version": "3.12.1"}',
        '{"implementation": "CPython", "version": 3.11, "executable": "/p", "sha256": "x"}',
    ],
)
def test_an_images_kept_python_answer_is_used_only_when_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: str | None
) -> None:
    """The image's kept probe answer is typed (`ImageProbe`): one that is not a CPython
    3.11 with its fields is asked again, and the container's answer kept as it said it."""
    pytest.importorskip("docker")
    from tests.support import REPO
    from vllm_plugin_release.edges import container

    answer = {
        "implementation": "CPython",
        "version": "3.11.9",
        "executable": "/usr/bin/python3.11",
        "sha256": "c" * 64,
        "other": [1],
    }
    monkeypatch.setattr(container.ContainerRunner, "image_id", property(lambda _: "sha256:ab"))
    pinned = "docker.io/library/python:3.11-slim@sha256:" + "a" * 64
    runner = container.ContainerRunner(
        pinned, REPO / "docker" / "build.Dockerfile", [tmp_path], probes=tmp_path
    )
    asked: list[object] = []

    def call(argv: object, network: bool = True) -> object:
        asked.append(argv)
        return SimpleNamespace(returncode=0, stdout="noise\n" + json.dumps(answer) + "\n")

    monkeypatch.setattr(runner, "call", call)
    path = tmp_path / "ab-py3.11.json"
    if kept is not None:
        path.write_text(kept)
    found = runner.interpreter("3.11")
    assert (found.path, found.version, found.sha256) == ("/usr/bin/python3.11", "3.11.9", "c" * 64)
    assert len(asked) == 1 and json.loads(path.read_text()) == answer
    again = container.ContainerRunner(
        pinned, REPO / "docker" / "build.Dockerfile", [tmp_path], probes=tmp_path
    )
    monkeypatch.setattr(again, "call", call)
    assert again.interpreter("3.11") == found and len(asked) == 1  # the kept answer


def _with_checks(card: dict[str, Any], **check: object) -> dict[str, Any]:
    return {**card, "checks": {**card["checks"], "cadence": {**card["checks"]["cadence"], **check}}}


WORKLOAD = {"features": [], "paths": {}, "models": {}}
GARBLED = {
    "env runtime a text": (records.ENV, lambda d: {**d, "runtime": "tt"}, "'runtime'"),
    "env checks a number": (records.ENV, lambda d: {**d, "checks": 5}, "'checks'"),
    "evidence an object": (
        records.SCORECARD,
        lambda d: _with_checks(d, evidence={"note": "n"}),
        "'checks.cadence.evidence'",
    ),
    "deferred a number": (records.SCORECARD, lambda d: {**d, "deferred": 5}, "'deferred'"),
    "a plan without verdict": (
        records.SCORECARD,
        lambda d: {**d, "workload": WORKLOAD, "plans": {"p": {"why": []}}},
        "'plans.p.verdict'",
    ),
    "a feature a text": (
        records.SCORECARD,
        lambda d: {**d, "workload": {**WORKLOAD, "features": ["feature"]}},
        "'workload.features'",
    ),
    "workload models a list": (
        records.SCORECARD,
        lambda d: {**d, "workload": {**WORKLOAD, "models": [1]}},
        "'workload.models'",
    ),
    "workload details null": (
        records.SCORECARD,
        lambda d: {
            **d,
            "workload": WORKLOAD,
            "checks": {**d["checks"], "workload": {"status": "pass", "details": None}},
        },
        "'checks.workload.details'",
    ),
}


@pytest.mark.parametrize("case", list(GARBLED.values()), ids=list(GARBLED))
def test_a_garbled_env_or_scorecard_is_bad_input_for_the_manifest(
    tmp_path: Path, case: tuple[str, Callable[[dict[str, Any]], object], str]
) -> None:
    """Each of these was a traceback out of `vpr manifest build` (AttributeError,
    TypeError, KeyError); it is bad input naming the record and the key."""
    from vllm_plugin_release.stages import manifest as mf

    name, change, key = case
    dist = tmp_path / "dist" / "ref"
    dist.mkdir(parents=True)
    pins = make_pairing(dist)
    path = dist / name
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    with pytest.raises(BadInput) as info:
        mf.build_manifest(pins, mf.read_records(dist))
    assert name in info.value.message and key in info.value.message
    assert info.value.exit_code == 2 and "run `vpr" in (info.value.hint or "")
