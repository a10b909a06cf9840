"""The typed manifest (core/manifestmodel): parsed from a manifest the stage builds, each
key a consumer reads checked (exit 2 naming the file and the key), frozen."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import PLUGIN_COMMIT, SDIST_SHA, make_pairing
from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.core import manifestmodel as mm
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.stages import manifest as mf


@pytest.fixture
def built(tmp_path: Path) -> dict[str, Any]:
    dist = tmp_path / "dist" / "ref"
    pins = make_pairing(dist, docker=True)
    return mf.build_manifest(pins, mf.read_records(dist), pipeline_version="9.9.9")


def test_parse_a_built_manifest(built: dict[str, Any]) -> None:
    doc.validate(built, "test")
    m = mm.parse(built, "dist/ref/manifest.json")
    assert m.name == built["name"] and m.pairing_id == built["pairing_id"]
    assert m.schema_version == doc.SCHEMA_VERSION
    assert m.source_date == "2025-10-09T08:53:20Z"
    assert m.pipeline_version == "9.9.9"
    core_wheel = built["core"]["wheel"]
    assert m.core.wheel == mm.Wheel(
        "vllm-0.26.0+empty-py3-none-any.whl",
        core_wheel["sha256"],
        core_wheel["version"],
        core_wheel["files_sha256"],
        core_wheel["files"],
    )
    assert m.core_source == mm.Source(
        "sdist",
        "https://files.example/vllm-0.26.0.tar.gz",
        "vllm-0.26.0.tar.gz",
        SDIST_SHA,
        None,
        None,
    )
    assert m.build_lock.sha256 == "1" * 64 == built["core"]["build_env"]["lock_sha256"]
    assert m.container is not None and m.container.image_id == "sha256:" + "e" * 64
    assert m.plugin.entry_points == {
        "vllm.platform_plugins": {"vpr_test": "vpr_test_plugin:register"}
    }
    assert m.plugin_repository == built["plugin"]["repository"]
    assert m.conformance.checks["cadence"].evidence == ("n",)
    assert m.conformance.deferred == (mm.Deferred("hardware", "needs a TT device"),)
    assert m.core.python == built["core"]["python"] and m.core.commit is None  # sdist source
    assert m.plugin.commit == PLUGIN_COMMIT and m.plugin.python is None
    assert m.roles() == doc.wheel_roles(built)
    assert m.verdict == "pilot" == m.conformance.verdict
    assert m.environment.lock_sha256 == built["environment"]["lock_sha256"]
    assert m.runtime.status == "absent"
    assert set(m.conformance.checks) == set(built["conformance"]["checks"])
    assert m.raw is built  # the object itself: its bytes are the manifest's
    assert doc.manifest_bytes(m.raw) == doc.manifest_bytes(built)


def test_older_manifest_created_not_source_date(built: dict[str, Any]) -> None:
    old = copy.deepcopy(built)
    old["created"] = old.pop("source_date")
    old.pop("guard", None)
    m = mm.parse(old, "old.json")
    assert m.source_date == "2025-10-09T08:53:20Z" and m.guard is None
    assert m.roles() == ("core", "plugin")


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    node = data
    for key in path:
        node = node[key]
    if value is _DROP:
        del node[last]
    else:
        node[last] = value


_DROP = object()


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("core", _DROP, "'core' is missing"),
        ("plugin", "vllm_tt", "'plugin' is 'vllm_tt', expected an object"),
        ("plugin.wheel", _DROP, "'plugin.wheel' is missing"),
        ("core.wheel.sha256", "ab" * 31, "'core.wheel.sha256' is 'abab"),
        ("core.wheel.sha256", "G" * 64, "expected a sha256"),
        ("core.wheel.filename", "../../etc/x.whl", "'core.wheel.filename' is '../../etc/x.whl'"),
        ("plugin.wheel.filename", "sub/p-1-py3-none-any.whl", "expected a wheel's file name"),
        ("plugin.wheel.filename", 7, "'plugin.wheel.filename' is 7"),
        ("core.version", ["0.26.0"], "'core.version' is a list"),
        ("core.python", _DROP, "'core.python' is missing"),
        ("pairing_id", "x", "'pairing_id' is 'x'"),
        ("conformance.verdict", 3, "'conformance.verdict' is 3"),
        ("conformance.checks.cadence", "pass", "'conformance.checks.cadence' is 'pass'"),
        ("conformance.checks.cadence.status", None, "'conformance.checks.cadence.status'"),
        ("conformance.deferred", [{"check": 1}], "'conformance.deferred' is a list"),
        ("environment.lock_sha256", "nope", "'environment.lock_sha256' is 'nope'"),
        ("source_date_epoch", True, "'source_date_epoch' is True"),
        ("core.source.kind", "svn", "'core.source.kind' is 'svn', expected sdist or git"),
        ("core.wheel.files", -1, "'core.wheel.files' is -1"),
        ("plugin.entry_points", {"g": {"n": 1}}, "'plugin.entry_points' is a dict"),
        ("conformance.checks.cadence.evidence", [{}], "'conformance.checks.cadence.evidence'"),
        ("plugin.wheel.sha256", None, "'plugin.wheel.sha256' is missing"),
    ],
)
def test_hostile_values_exit_2_naming_the_key(
    built: dict[str, Any], key: str, value: Any, said: str
) -> None:
    bad = copy.deepcopy(built)
    _set(bad, key, value)
    with pytest.raises(BadInput) as caught:
        mm.parse(bad, "store/pairings/x.json")
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith("store/pairings/x.json: key ")
    assert said in str(caught.value)


def test_not_an_object() -> None:
    with pytest.raises(BadInput, match=r"x\.json: not a manifest"):
        mm.parse(["a"], "x.json")


def test_frozen(built: dict[str, Any]) -> None:
    m = mm.parse(built, "m.json")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.core.wheel.sha256 = "0" * 64  # type: ignore[misc]
    with pytest.raises(TypeError):
        m["core"]  # type: ignore[index]  # not a mapping: a missed raw index fails at once
