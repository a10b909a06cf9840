"""core/buildrecord + records.build_record: the build records and RunnerFacts (where a stage's
commands ran; its JSON is the object records always held) as typed, frozen values.

A good record reads into its fields (and its raw object, unchanged); a record missing a
key, holding one of another type, or larger than records.MAX_RECORD is bad input (exit 2)
naming the file and the key (or the limit) and the command that writes it. The writer
writes the same bytes as ever and refuses a record no reader would accept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.core import buildrecord, records
from vllm_plugin_release.core.buildrecord import BuildRecord, RunnerFacts, WheelRef
from vllm_plugin_release.core.cache import sha256_file, write_json
from vllm_plugin_release.core.errors import BadInput, GateFailed, RecordProblem
from vllm_plugin_release.edges.runner import LocalRunner
from vllm_plugin_release.flows import releasecache
from vllm_plugin_release.stages import manifest as mf
from vllm_plugin_release.stages import publish

SHA = "ab" * 32


def _plugin() -> dict[str, Any]:
    return {
        "stage": "build-plugin",
        "plugin": {
            "name": "vllm-reference-plugin",
            "version": "0.1.0",
            "commit": "f" * 40,
            "requires_dist": ["numpy>=1"],
        },
        "wheel": {"filename": "vllm_reference_plugin-0.1.0-py3-none-any.whl", "sha256": SHA},
        "backend": {"kind": "local"},
        "entry_points": {"vllm.platform_plugins": {"reference": "vllm_reference_plugin:register"}},
    }


def _core() -> dict[str, Any]:
    return {
        "core": {"name": "vllm", "version": "0.26.0", "target_device": "empty"},
        "wheel": {
            "filename": "vllm-0.26.0+empty-cp311-cp311-linux_x86_64.whl",
            "sha256": SHA,
            "platform_tag": "cp311-cp311-linux_x86_64",
            "size": 12,
        },
        "python": "3.11.9",
    }


def _write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_good_plugin_record_reads_typed_and_frozen(tmp_path: Path) -> None:
    _write(tmp_path, records.BUILD_PLUGIN, _plugin())
    rec = records.build_record(tmp_path, records.BUILD_PLUGIN)
    assert rec.wheel == WheelRef("vllm_reference_plugin-0.1.0-py3-none-any.whl", SHA)
    assert (rec.name, rec.version, rec.commit) == ("vllm-reference-plugin", "0.1.0", "f" * 40)
    assert rec.requires_dist == ("numpy>=1",) and rec.requires_list() == ["numpy>=1"]
    assert rec.backend == RunnerFacts("local")
    assert rec.entry_points == {
        "vllm.platform_plugins": {"reference": "vllm_reference_plugin:register"}
    }
    with pytest.raises(AttributeError):  # frozen
        rec.wheel = WheelRef("x.whl", SHA)  # type: ignore[misc]
    with pytest.raises(AttributeError):  # frozen
        rec.wheel.sha256 = "0" * 64  # type: ignore[misc]


def test_good_core_record_keeps_its_wheel_object_whole(tmp_path: Path) -> None:
    _write(tmp_path, records.BUILD_CORE, _core())
    rec = records.build_record(tmp_path, records.BUILD_CORE)
    assert (rec.name, rec.version, rec.commit, rec.requires_dist) == ("vllm", "0.26.0", None, None)
    # env.json repeats the wheel object as written (platform_tag, size)
    entry = rec.wheel_entry
    assert entry.to_json() == _core()["wheel"]
    assert (entry.ref, entry.platform_tag, entry.size) == (
        rec.wheel,
        "cp311-cp311-linux_x86_64",
        12,
    )
    plugin = records.parse_build(tmp_path / records.BUILD_PLUGIN, records.BUILD_PLUGIN, _plugin())
    assert plugin.wheel_entry.to_json() == _plugin()["wheel"]


def _without(data: dict[str, Any], dotted: str) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    *parents, last = dotted.split(".")
    node = data
    for key in parents:
        node = node[key]
    del node[last]
    return data


def _with(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    *parents, last = dotted.split(".")
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return data


MISSING = [
    (records.BUILD_PLUGIN, "wheel.sha256"),
    (records.BUILD_PLUGIN, "wheel.filename"),
    (records.BUILD_PLUGIN, "wheel"),
    (records.BUILD_PLUGIN, "plugin"),
    (records.BUILD_CORE, "core"),
]


@pytest.mark.parametrize(("name", "dotted"), MISSING)
def test_missing_key_is_named_with_the_file(tmp_path: Path, name: str, dotted: str) -> None:
    good = _plugin() if name == records.BUILD_PLUGIN else _core()
    path = _write(tmp_path, name, _without(good, dotted))
    with pytest.raises(BadInput) as info:
        records.build_record(tmp_path, name, "vpr build-x --spec s.toml")
    assert str(path) in info.value.message
    assert repr(dotted) in info.value.message or f"'{dotted}." in info.value.message
    assert "vpr build-x --spec s.toml" in (info.value.hint or "")
    assert info.value.exit_code == 2


WRONG = [
    ("wheel.filename", 7, "wheel.filename"),
    ("wheel.filename", "../../etc/passwd.whl", "wheel.filename"),
    ("wheel.filename", "plugin.tar.gz", "wheel.filename"),
    ("wheel.sha256", "abc", "wheel.sha256"),
    ("wheel.sha256", "AB" * 32, "wheel.sha256"),
    ("wheel", "plugin.whl", "wheel"),
    ("plugin", [], "plugin"),
    ("plugin.name", 3, "plugin.name"),
    ("plugin.commit", {"sha": "f"}, "plugin.commit"),
    ("plugin.requires_dist", "numpy", "plugin.requires_dist"),
    ("plugin.requires_dist", [1], "plugin.requires_dist"),
    ("backend", "local", "backend"),
    ("backend", {"kind": "local", "where": "here"}, "backend"),
    ("backend", {"image_id": "sha256:x"}, "backend"),
    ("wheel.size", "12", "wheel.size"),
    ("wheel.platform_tag", 3, "wheel.platform_tag"),
    ("wheel.url", "https://elsewhere/x.whl", "wheel.url"),
    ("entry_points", ["vllm.platform_plugins"], "entry_points"),
    ("entry_points", {"vllm.platform_plugins": {"reference": 1}}, "entry_points"),
]


@pytest.mark.parametrize(("dotted", "value", "named"), WRONG)
def test_wrong_type_is_named_with_the_file(
    tmp_path: Path, dotted: str, value: Any, named: str
) -> None:
    path = _write(tmp_path, records.BUILD_PLUGIN, _with(_plugin(), dotted, value))
    with pytest.raises(BadInput) as info:
        records.build_record(tmp_path, records.BUILD_PLUGIN)
    assert str(path) in info.value.message
    assert repr(named) in info.value.message or f"'{named}." in info.value.message
    assert "vpr build-plugin" in (info.value.hint or "")
    assert info.value.exit_code == 2


CORE_WRONG = [
    ("reproducible", "yes", "reproducible"),
    ("isolated", 1, "isolated"),
    ("core.source_date_epoch", "1760000000", "core.source_date_epoch"),
    ("build_env", "locked", "build_env"),
    ("build_env", {"torch": 2}, "build_env.torch"),
    ("build_env", {"torch_file": {"filename": "t.whl", "sha256": SHA}}, "build_env.torch_file"),
    (
        "build_env",
        {"torch_file": {"filename": "t.whl", "sha256": SHA, "size": 1, "x": 1}},
        "build_env",
    ),
    ("interpreter", {"path": "/p", "version": "3.11", "sha256": SHA, "x": 1}, "interpreter.x"),
    ("interpreter", {"path": "/p", "version": "3.11", "sha256": SHA, "found_by": 1}, "interpreter"),
]


@pytest.mark.parametrize(("dotted", "value", "named"), CORE_WRONG)
def test_wrong_type_in_build_core_is_named_with_the_file(
    tmp_path: Path, dotted: str, value: Any, named: str
) -> None:
    """What the manifest copies of build-core.json is checked when the record is read."""
    path = _write(tmp_path, records.BUILD_CORE, _with(_core(), dotted, value))
    with pytest.raises(BadInput) as info:
        records.build_record(tmp_path, records.BUILD_CORE)
    assert str(path) in info.value.message and f"'{named}" in info.value.message
    assert info.value.exit_code == 2


def test_what_the_manifest_copies_of_build_core_reads_typed(tmp_path: Path) -> None:
    torch = {"filename": "torch-2.1-cp311-none-any.whl", "sha256": SHA, "size": 3, "local": None}
    made = {"implementation": "CPython", "version": "3.11.9", "path": "/p", "sha256": SHA}
    data = {
        **_core(),
        "reproducible": True,
        "isolated": False,
        "interpreter": made,
        "build_env": {"lock_file": "c.txt", "torch": "2.1", "torch_file": torch},
    }
    data["core"]["source_date_epoch"] = 17
    _write(tmp_path, records.BUILD_CORE, data)
    record = records.build_record(tmp_path, records.BUILD_CORE)
    assert (record.reproducible, record.isolated, record.source_date_epoch) == (True, False, 17)
    assert record.interpreter is not None and record.interpreter.to_json() == made
    assert record.build_env is not None and record.build_env.torch == "2.1"
    assert record.build_env.torch_file is not None
    assert record.build_env.torch_file.to_json() == torch  # null kept, absent left out


def test_record_over_the_cap_is_refused_naming_file_and_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    padded = {**_plugin(), "pad": "x" * 4096}
    path = _write(tmp_path, records.BUILD_PLUGIN, padded)
    assert records.build_record(tmp_path, records.BUILD_PLUGIN).name == "vllm-reference-plugin"
    monkeypatch.setattr(records, "MAX_RECORD", 1024)
    for read in (records.build_record, records.read):
        with pytest.raises(BadInput) as info:
            read(tmp_path, records.BUILD_PLUGIN)
        assert str(path) in info.value.message and "1024 bytes" in info.value.message
        assert "vpr build-plugin" in (info.value.hint or "")
        assert info.value.exit_code == 2
    # the release graph's probes read bounded too: an oversized record is "none"
    assert releasecache._json(path) is None
    # and so does the manifest stage
    _write(tmp_path, records.BUILD_CORE, _core())
    with pytest.raises(BadInput, match="1024 bytes"):
        mf.read_records(tmp_path)


def test_real_cap_refuses_a_huge_record_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / records.ENV
    with path.open("wb") as fh:  # sparse: 64 MiB + 1 of nothing on disk
        fh.truncate(records.MAX_RECORD + 1)
    with pytest.raises(BadInput) as info:
        records.read(tmp_path, records.ENV)
    assert str(path) in info.value.message and "64 MiB" in info.value.message


def test_a_folder_where_the_record_should_be_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / records.BUILD_CORE).mkdir()
    with pytest.raises(BadInput, match="folder"):
        records.build_record(tmp_path, records.BUILD_CORE)


def test_the_stages_check_gives_the_record_every_reader_gets(tmp_path: Path) -> None:
    data = _core()
    rec = records.parse_build(tmp_path / records.BUILD_CORE, records.BUILD_CORE, data)
    write_json(tmp_path / records.BUILD_CORE, data)  # as the build stages write it
    assert isinstance(rec, BuildRecord) and rec == records.build_record(tmp_path, "build-core.json")


def test_writer_refuses_a_record_no_reader_accepts(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"'wheel\.sha256'"):
        bad = _with(_core(), "wheel.sha256", "x")
        records.parse_build(tmp_path / records.BUILD_CORE, records.BUILD_CORE, bad)
    assert not (tmp_path / records.BUILD_CORE).exists()


def test_verified_wheel_checks_the_typed_sha256(tmp_path: Path) -> None:
    wheel = tmp_path / "vllm_reference_plugin-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel")
    good = _with(_plugin(), "wheel.sha256", sha256_file(wheel))
    _write(tmp_path, records.BUILD_PLUGIN, good)
    rec = records.build_record(tmp_path, records.BUILD_PLUGIN)
    assert records.verified_wheel(tmp_path, rec, "vpr build-plugin") == wheel
    wheel.write_bytes(b"wheel changed")
    with pytest.raises(GateFailed, match="sha256"):
        records.verified_wheel(tmp_path, rec, "vpr build-plugin")


# -- RunnerFacts ----------------------------------------------------------------------

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
    assert buildrecord.parse_runner(data).to_json() == data


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
        buildrecord.parse_runner(data)


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
    assert json.dumps(
        buildrecord.parse_recorded_runner(data).to_json(), sort_keys=True
    ) == json.dumps(data, sort_keys=True)


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
        buildrecord.parse_recorded_runner(data)
