"""Files vpr reads back (its own records, cache notes, a child's result) are outside input
once written: each is read bounded and checked, never whole and then indexed blindly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_plugin_release.conform.checks import plugin_tests
from vllm_plugin_release.core import cache, records
from vllm_plugin_release.core.errors import BadInput, JobFailed
from vllm_plugin_release.edges import envrun


def _baseline(tmp_path: Path, **changes: object) -> Path:
    baseline = {
        "runner": "cpu",
        "core_version": "0.25.1",
        "paths": ["tests"],
        "counts": {"passed": 3, "failed": 0},
        "outcomes": {"tests/test_a.py::test_a": "passed"},
    }
    baseline.update(changes)
    (tmp_path / plugin_tests.RECORD).write_text(json.dumps({"baseline": baseline}))
    return tmp_path


def test_a_recorded_baseline_reads_back(tmp_path: Path) -> None:
    run, version = plugin_tests._recorded_baseline(_baseline(tmp_path), "cpu")
    assert run is not None and run.counts == {"passed": 3, "failed": 0} and version == "0.25.1"
    assert plugin_tests._recorded_baseline(tmp_path, "hardware") == (None, None)


@pytest.mark.parametrize(
    ("key", "value"),
    [("paths", "tests"), ("counts", {"passed": "3"}), ("outcomes", None), ("counts", [])],
)
def test_a_bad_recorded_baseline_is_bad_input_naming_the_key(
    tmp_path: Path, key: str, value: object
) -> None:
    with pytest.raises(BadInput, match=rf"plugin-tests\.json: key 'baseline\.{key}'"):
        plugin_tests._recorded_baseline(_baseline(tmp_path, **{key: value}), "cpu")


def test_an_oversized_recorded_baseline_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _baseline(tmp_path)
    monkeypatch.setattr(records, "MAX_RECORD", 10)
    with pytest.raises(BadInput, match="larger than"):
        plugin_tests._recorded_baseline(tmp_path, "cpu")


def test_an_in_environment_result_is_read_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's answer comes from beside the plugin's code: one that is not a readable
    JSON object, or larger than a record may be, is the job's failure (JobFailed)."""
    out = tmp_path / "out.json"
    job = envrun._Job("probe", tmp_path / "probe.py", tmp_path / "req.json", out, {})
    assert envrun._read_result(job, "") is None  # none written
    out.write_text(json.dumps({"ok": True}))
    assert envrun._read_result(job, "") == {"ok": True}
    out.write_text("[1, 2]")
    with pytest.raises(JobFailed, match="inenv probe: its answer is not a JSON object"):
        envrun._read_result(job, "")
    out.write_text('{"ok": tr')
    with pytest.raises(JobFailed, match="unreadable"):  # was a JSONDecodeError
        envrun._read_result(job, "")
    out.write_text(json.dumps({"ok": "x" * 100}))
    monkeypatch.setattr(records, "MAX_RECORD", 50)
    with pytest.raises(JobFailed, match="larger than"):
        envrun._read_result(job, "the job's last words")


def test_an_oversized_verified_marker_means_hash_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "blob"
    data.write_bytes(b"payload")
    digest = cache.sha256_file(data)
    assert cache.verified_file(data, digest)  # writes the marker
    marker = tmp_path / "blob.verified.json"
    assert marker.exists()
    calls: list[Path] = []
    real = cache.sha256_file
    monkeypatch.setattr(cache, "sha256_file", lambda p: calls.append(p) or real(p))
    assert cache.verified_file(data, digest) and calls == []  # the marker vouched
    marker.write_text(marker.read_text() + " " * (70 * 1024))  # the same stamp, padded
    assert cache.verified_file(data, digest) and calls == [data]  # too large: hashed again


def test_an_unusable_cached_environment_record_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from vllm_plugin_release.stages import pairing_env

    built: list[int] = []

    def build(make: object) -> dict[str, object]:  # the environment's making, counted
        built.append(1)
        (tmp_path / "env").mkdir(exist_ok=True)
        check = {"name": "import vllm", "status": "pass", "detail": ""}
        return {"runtime": {}, "checks": [check], "runtime_modules": [], "plugin_modules": []}

    monkeypatch.setattr(pairing_env, "_build", build)
    make = SimpleNamespace(
        work=tmp_path / "env", cache=cache.Cache(tmp_path / "cache"), interpreter=None
    )
    first = pairing_env._made(make)  # type: ignore[arg-type]
    assert built == [1] and pairing_env._made(make) == first  # type: ignore[arg-type]
    assert built == [1]  # the kept record reused
    (tmp_path / "env" / ".vpr-env.json").write_text('{"python": "/x/b')  # cut short
    assert pairing_env._made(make) == first and built == [1, 1]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kept",
    [
        {},  # no checks: env.json was then made of it and `checks` indexed (a KeyError)
        {"checks": "none"},
        {"checks": [{"name": "import vllm"}]},  # a check without its status
        {"checks": [], "runtime": "absent"},  # `runtime.status` read of a string
        {"checks": [], "runtime_modules": [1]},
    ],
)
def test_kept_environment_findings_that_are_not_are_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: dict[str, object]
) -> None:
    """A hand-edited `.vpr-env.json` was reused as it was (the env record then made of it
    crashed); now it is checked as the env record's findings, and made again."""
    from types import SimpleNamespace

    from vllm_plugin_release.stages import pairing_env

    built: list[int] = []
    found = {"checks": [{"name": "import vllm", "status": "pass", "detail": ""}]}

    def build(make: object) -> dict[str, object]:
        built.append(1)
        (tmp_path / "env").mkdir(exist_ok=True)
        return found

    monkeypatch.setattr(pairing_env, "_build", build)
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / ".vpr-env.json").write_text(json.dumps(kept))
    make = SimpleNamespace(
        work=tmp_path / "env", cache=cache.Cache(tmp_path / "cache"), interpreter=None
    )
    assert pairing_env._made(make) == found and built == [1]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "module",
    [
        "vllm_plugin_release.core.bounded",
        "vllm_plugin_release.conform.lib.installs",
        "vllm_plugin_release.edges.device",
    ],
)
def test_toml_readers_load_where_the_standard_library_has_no_tomllib(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 3.10 there is no tomllib: the package's TOML readers take tomli (a declared
    dependency there) through core.bounded. Simulated here by hiding tomllib and handing
    the same parser over under tomli's name, then loading each reader afresh."""
    import importlib
    import sys

    import tomllib

    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    monkeypatch.setitem(sys.modules, "tomllib", None)  # `import tomllib` fails
    monkeypatch.setitem(sys.modules, "tomli", tomllib)
    for name in [m for m in sys.modules if m.startswith("vllm_plugin_release")]:
        monkeypatch.delitem(sys.modules, name)
    loaded = importlib.import_module(module)
    reader = importlib.import_module("vllm_plugin_release.core.bounded").tomllib
    assert reader is tomllib and loaded is not None
