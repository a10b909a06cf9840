"""RunnerFacts: where a stage's commands ran, typed; its JSON is the object records always held."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_plugin_release.core import runnerfacts
from vllm_plugin_release.core.buildrecord import RecordProblem
from vllm_plugin_release.core.runnerfacts import RunnerFacts
from vllm_plugin_release.edges.runner import LocalRunner
from vllm_plugin_release.stages import publish

IMAGE = {
    "kind": "docker",
    "base_image": "python@sha256:" + "a" * 64,
    "image_id": "sha256:" + "b" * 64,
}


def test_the_local_runner_describes_itself_as_it_always_did() -> None:
    facts = LocalRunner("off").describe()
    assert facts == RunnerFacts("local")
    assert json.dumps(facts.to_json()) == '{"kind": "local"}'


def test_an_image_runner_keeps_its_keys_and_their_order() -> None:
    facts = RunnerFacts(IMAGE["kind"], IMAGE["base_image"], IMAGE["image_id"])
    assert list(facts.to_json().items()) == list(IMAGE.items())


@pytest.mark.parametrize("data", [{"kind": "local"}, IMAGE])
def test_parse_round_trips(data: dict[str, str]) -> None:
    assert runnerfacts.parse(data).to_json() == data


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ("local", "the runner is 'local'"),
        ({}, "'kind' is missing"),
        ({"kind": 3}, "'kind' is 3"),
        ({"kind": "docker", "base_image": "x"}, "'image_id' is missing"),
        ({**IMAGE, "image_id": ["sha256:x"]}, "'image_id' is a list"),
        ({"kind": "local", "python": "3.11"}, "unknown key 'python'"),
    ],
)
def test_parse_refuses_what_is_not_a_runner(data: object, named: str) -> None:
    with pytest.raises(RecordProblem, match=named):
        runnerfacts.parse(data)


def test_a_half_image_is_not_a_runner() -> None:
    with pytest.raises(ValueError, match="go together"):
        RunnerFacts("docker", base_image="python@sha256:" + "a" * 64)


def _noted(tmp_path: Path, ran_in: object) -> RunnerFacts | None:
    wheel = tmp_path / "p-1-py3-none-any.whl"
    wheel.write_bytes(b"wheel")
    from vllm_plugin_release.core.cache import sha256_file

    wheels = [("p", wheel, sha256_file(wheel))]
    runner = LocalRunner("off")
    publish._note_proof(tmp_path, wheels, runner)
    marker = publish._proof_marker(tmp_path, wheels, runner)
    if ran_in is not None:
        noted = json.loads(marker.read_text())
        marker.write_text(json.dumps({**noted, "ran_in": ran_in}))
    return publish._already_proven(tmp_path, wheels, runner)


def test_an_earlier_proof_is_read_back_typed(tmp_path: Path) -> None:
    assert _noted(tmp_path, None) == RunnerFacts("local")


@pytest.mark.parametrize("ran_in", ["local", {"kind": ""}, {"kind": "local", "image_id": 1}])
def test_a_proof_note_that_does_not_say_where_means_the_proof_runs(
    tmp_path: Path, ran_in: object
) -> None:
    assert _noted(tmp_path, ran_in) is None


@pytest.mark.parametrize(
    "data",
    [{"kind": "local"}, IMAGE, {"kind": "local", "python": "3.11"}, {**IMAGE, "python": "3"}],
)
def test_a_records_backend_reads_back_as_written(data: dict[str, str]) -> None:
    """build-*.json's and env.json's `backend`; a record may carry the runner's `python`."""
    assert json.dumps(runnerfacts.parse_recorded(data).to_json(), sort_keys=True) == json.dumps(
        data, sort_keys=True
    )


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"kind": "local", "python": 3.11}, "'python' is 3.11"),
        ({"python": "3.11"}, "'kind' is missing"),
        ({"kind": "local", "python": "3", "where": "x"}, "unknown key 'where'"),
    ],
)
def test_a_records_backend_is_checked_too(data: object, named: str) -> None:
    with pytest.raises(RecordProblem, match=named):
        runnerfacts.parse_recorded(data)
