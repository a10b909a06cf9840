"""Manifest: building from stage records, determinism, schema, missing records."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import PLUGIN_COMMIT, SDIST_SHA, make_pairing
from vllm_plugin_release.buildspec.model import RuntimeSpec
from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.stages import manifest as mf


def test_build_manifest_records_everything(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "ref"
    pins = make_pairing(dist, docker=True)
    m = mf.build_manifest(pins, mf.read_records(dist), pipeline_version="9.9.9")
    assert m["schema_version"] == doc.SCHEMA_VERSION
    assert m["source_date"] == "2025-10-09T08:53:20Z" and "created" not in m
    assert m["core"]["source"] == {
        "kind": "sdist",
        "url": "https://files.example/vllm-0.26.0.tar.gz",
        "index": "https://pypi.org/simple",
        "filename": "vllm-0.26.0.tar.gz",
        "sha256": SDIST_SHA,
    }
    assert m["core"]["wheel"]["filename"] == "vllm-0.26.0+empty-py3-none-any.whl"
    assert m["core"]["platform_tag"] == "any"
    assert m["core"]["build_env"]["lock_sha256"] == "1" * 64
    assert m["plugin"]["commit"] == PLUGIN_COMMIT
    assert m["plugin"]["entry_points"] == {
        "vllm.platform_plugins": {"vpr_test": "vpr_test_plugin:register"}
    }
    assert m["runtime"]["status"] == "absent"
    assert m["runtime"]["note"] == "absent on this runner (cpu)"
    assert m["runtime"]["pinned_version"] == "0.60.0"
    assert m["container"] == {
        "base_image": "python@sha256:" + "d" * 64,
        "base_digest": "sha256:" + "d" * 64,
        "image_id": "sha256:" + "e" * 64,
    }
    lock = tmp_path / "constraints" / "env-py311.txt"
    assert m["environment"]["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert m["conformance"]["verdict"] == "pilot"
    assert m["conformance"]["deferred"] == [{"check": "hardware", "reason": "needs a TT device"}]
    assert m["conformance"]["checks"]["cadence"]["evidence"] == [{"note": "n", "line": 3}]
    assert m["pipeline"] == {"name": "vllm-plugin-release", "version": "9.9.9"}
    doc.validate(m, "test")


def test_manifest_is_deterministic_and_pairing_id_tracks_inputs(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "ref", tmp_path / "b" / "ref"
    pins = make_pairing(a)
    make_pairing(b)
    ma = doc.manifest_bytes(mf.build_manifest(pins, mf.read_records(a)))
    mb = doc.manifest_bytes(mf.build_manifest(pins, mf.read_records(b)))
    assert ma == mb
    assert b"host" not in ma
    c = tmp_path / "c" / "ref"
    other = make_pairing(c, plugin_commit="f" * 40)
    mc = mf.build_manifest(other, mf.read_records(c))
    assert mc["pairing_id"] != json.loads(ma)["pairing_id"]


def test_optional_records_absent(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist, verdict=None, env=False)
    m = mf.build_manifest(pins, mf.read_records(dist))
    assert m["conformance"] == {
        "status": "absent",
        "verdict": None,
        "runner": None,
        "checks": {},
        "deferred": [],
    }
    assert m["environment"]["status"] == "absent"
    assert m["runtime"]["status"] == "absent"
    assert "no env.json" in m["runtime"]["note"]


def test_a_spec_without_a_runtime_records_none_required(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = dataclasses.replace(make_pairing(dist, env=False), runtime=None)
    m = mf.build_manifest(pins, mf.read_records(dist))
    assert m["runtime"] == {
        "name": None,
        "status": "not-required",
        "version": None,
        "commit": None,
        "pinned_version": None,
        "pinned_commit": None,
        "note": "the spec names no vendor runtime",
    }


def test_runtime_present_on_hardware(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    rt = {"name": "tt-metal", "status": "present", "version": "0.60.0", "commit": "9" * 40}
    pins = make_pairing(dist, runtime=rt, verdict="fleet")
    m = mf.build_manifest(pins, mf.read_records(dist))
    assert m["runtime"]["status"] == "present"
    assert m["runtime"]["commit"] == "9" * 40
    assert m["conformance"]["verdict"] == "fleet"


def test_missing_required_record_names_the_producer(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    make_pairing(dist)
    (dist / "build-plugin.json").unlink()
    with pytest.raises(BadInput) as exc:
        mf.read_records(dist, "buildspec/ref.toml")
    assert "build-plugin.json" in str(exc.value)
    assert "vpr build-plugin --spec buildspec/ref.toml" in str(exc.value)
    assert exc.value.exit_code == 2


def test_wheel_changed_after_build_is_a_gate_failure(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    wheel = next(dist.glob("vllm-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"x")
    with pytest.raises(GateFailed, match="sha256"):
        mf.build_manifest(pins, mf.read_records(dist))


def test_contradictory_verdict_refused(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist, verdict="pilot")
    card = json.loads((dist / "scorecard.json").read_text())
    card["verdict"] = "fleet"  # but the hardware check is deferred
    (dist / "scorecard.json").write_text(json.dumps(card))
    with pytest.raises(GateFailed, match="hardware"):
        mf.build_manifest(pins, mf.read_records(dist))


def test_newer_schema_version_is_a_clear_message(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    m = mf.build_manifest(pins, mf.read_records(dist))
    m["schema_version"] = doc.SCHEMA_VERSION + 1
    m["something_new"] = {"x": 1}
    with pytest.raises(BadInput, match="newer than this vpr understands"):
        doc.validate(m, "m.json")


def test_schema_errors_name_the_key(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    m = mf.build_manifest(pins, mf.read_records(dist))
    m["core"]["wheel"]["sha256"] = "nothex"
    with pytest.raises(BadInput, match=r"core\.wheel\.sha256"):
        doc.validate(m, "m.json")


def test_wheel_file_facts_are_read_once_per_wheel_bytes(tmp_path: Path) -> None:
    """`wheel_memo`: the facts of a wheel's files (every member read and checked against
    its RECORD) are noted by the wheel's sha256; the next manifest of the same bytes takes
    them from the note. A malformed note is ignored, and a wheel with other bytes is
    checked again: a member that does not match its RECORD still fails the gate."""
    import zipfile

    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    memo = tmp_path / "memo"
    first = mf.build_manifest(pins, mf.read_records(dist), wheel_memo=memo)
    plain = mf.build_manifest(pins, mf.read_records(dist))
    assert first == plain  # the same document with or without the memo
    core = first["core"]["wheel"]
    note = memo / f"{core['sha256']}.json"
    assert json.loads(note.read_text()) == {
        "files_sha256": core["files_sha256"],
        "files": core["files"],
    }
    # the note is what the next run reads (seen by what it says)
    note.write_text(json.dumps({"files_sha256": "a" * 64, "files": 7}))
    again = mf.build_manifest(pins, mf.read_records(dist), wheel_memo=memo)
    assert again["core"]["wheel"]["files"] == 7
    for bad in ("{", json.dumps({"files_sha256": "../x", "files": 7}), '{"files": true}'):
        note.write_text(bad)
        redone = mf.build_manifest(pins, mf.read_records(dist), wheel_memo=memo)
        assert redone == plain, bad

    # other bytes: a wheel whose member no longer matches its RECORD, records updated
    wheel = dist / core["filename"]
    with zipfile.ZipFile(wheel) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    name = next(n for n in members if n.endswith(".py"))
    members[name] += b"\n# changed\n"
    with zipfile.ZipFile(wheel, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    record = json.loads((dist / "build-core.json").read_text())
    record["wheel"]["sha256"] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (dist / "build-core.json").write_text(json.dumps(record))
    with pytest.raises(GateFailed, match="does not match the wheel's RECORD"):
        mf.build_manifest(pins, mf.read_records(dist), wheel_memo=memo)


def test_guard_and_platform_sections(tmp_path: Path) -> None:
    """schema 3: the guard's wheel is signed beside the core and the plugin; the platform is
    the one vLLM resolved in the pairing environment itself, never the stand-in overlay's
    (a test double); without build-guard.json or env.json both are null."""
    dist = tmp_path / "dist" / "ref"
    pins = make_pairing(dist, guard=True, platform="vllm.platforms.interface.UnspecifiedPlatform")
    env = json.loads((dist / "env.json").read_text())
    overlay = "platform activation (vllm.platforms.current_platform) [stand-in runtime]"
    env["checks"].append({"name": overlay, "status": "pass", "value": "ref.ReferencePlatform"})
    (dist / "env.json").write_text(json.dumps(env))
    m = mf.build_manifest(pins, mf.read_records(dist), pipeline_version="9.9.9")
    assert m["platform"] == {
        "resolved": "vllm.platforms.interface.UnspecifiedPlatform",
        "runner": "cpu",
    }
    assert m["guard"]["name"] == "vpr-guard" and m["guard"]["reproducible"] is True
    assert m["guard"]["wheel"]["filename"] == "vpr_guard-1.0.0-py3-none-any.whl"
    assert doc.wheel_roles(m) == ("core", "plugin", "guard")
    (dist / "build-guard.json").unlink()
    (dist / "env.json").unlink()
    bare = mf.build_manifest(pins, mf.read_records(dist), pipeline_version="9.9.9")
    assert bare["guard"] is None and bare["platform"] is None
    assert doc.wheel_roles(bare) == ("core", "plugin")


def test_the_scorecards_pairing_id_is_the_manifests(tmp_path: Path) -> None:
    """pairing_id_of reads the typed build records (no wheel) and gives build_manifest's id;
    a record without a key it needs is BadInput naming the file and the key."""
    from types import SimpleNamespace

    from vllm_plugin_release.core import records
    from vllm_plugin_release.core.buildrecord import RecordProblem, parse

    dist = tmp_path / "ref"
    rt = {"name": "tt-metal", "package": "ttnn", "version": "0.60.0", "commit": "9" * 40}
    for runtime in (None, rt):
        pins = make_pairing(dist, runtime=runtime)
        table = pins.runtime.raw if pins.runtime else None
        typed = RuntimeSpec(table["name"], raw=table) if table else None
        spec: Any = SimpleNamespace(runtime=typed)
        core = records.build_record(dist, records.BUILD_CORE)
        plugin = records.build_record(dist, records.BUILD_PLUGIN)
        m = mf.build_manifest(pins, mf.read_records(dist))
        assert mf.pairing_id_of(spec, core, plugin) == m["pairing_id"]
    data = json.loads((dist / records.BUILD_CORE).read_text())
    del data["core"]["target_device"]  # hostile: a record cut short
    with pytest.raises(BadInput, match=r"build-core.json: missing key 'core.target_device'"):
        mf.pairing_id_of(spec, parse(data, records.BUILD_CORE), plugin)
    data = json.loads((dist / records.BUILD_CORE).read_text())
    data["core"]["source"]["sha256"] = ["not", "text"]  # hostile: a pin of another kind
    with pytest.raises(RecordProblem, match=r"'core.source' is a dict, expected an object"):
        parse(data, records.BUILD_CORE)
    data["core"]["source"] = "sdist"
    with pytest.raises(RecordProblem, match=r"'core.source' is 'sdist'"):
        parse(data, records.BUILD_CORE)
