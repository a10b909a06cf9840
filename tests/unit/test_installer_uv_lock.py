"""`uv sync` in an installer reads the core pin from the project's uv.lock (Spyre's
image runs `uv sync --frozen`). The lock is hostile input: bounded, parsed with
tomllib, a broken one is a finding naming the file and line. The synthetic plugin is
tests/plugins/uv_sync_installer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import installer_spec
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.checks import pinning
from vllm_plugin_release.conform.lib import installs

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "uv_sync_installer"
TABLE = '\n[conformance.pinning]\nfiles = ["pyproject.toml"]\n'


def _check(tmp_path: Path, edit=None):  # type: ignore[no-untyped-def]
    spec_file, root = installer_spec(tmp_path, PLUGIN, "uv-sync-installer-plugin", TABLE)
    if edit is not None:
        edit(root)
    return pinning.check(load_spec(spec_file), root)


def test_the_core_pin_comes_from_the_lock(tmp_path: Path) -> None:
    result = _check(tmp_path)
    assert result.status == "pass", result.summary
    pin = result.details["core_pin"]
    assert (pin["version"], pin["file"], pin["line"], pin["via"]) == (
        "0.26.0",
        "uv.lock",
        21,
        "uv.lock",
    )
    assert result.details["target_device"]["effective"] is True  # the image's ENV
    assert result.details["from_source"]["how"].startswith("sdist")  # no wheel locked
    assert "uv.lock" in result.details["files_read"]
    # the project's ranges are installed as locked: not "unpinned"
    assert result.details["unpinned"] == []
    assert any("numpy>=2 is pinned by the project's uv.lock" in n for n in result.details["notes"])


def test_a_lock_with_another_core_fails(tmp_path: Path) -> None:
    def older(root: Path) -> None:
        lock = root / "uv.lock"
        lock.write_text(lock.read_text().replace('version = "0.26.0"', 'version = "0.25.1"'))

    result = _check(tmp_path, older)
    assert result.status == "fail"
    assert "installer pins vllm 0.25.1 (uv.lock:21)" in result.summary


def test_a_broken_lock_is_a_finding_naming_file_and_line(tmp_path: Path) -> None:
    def broken(root: Path) -> None:
        lock = root / "uv.lock"
        lock.write_text(lock.read_text().replace('name = "numpy"', 'name = "numpy'))

    result = _check(tmp_path, broken)
    assert result.status == "fail"  # no core pin can be read
    assert "uv.lock:6: not valid TOML" in " ".join(result.details["notes"])
    assert any(m.get("error", "").startswith("uv.lock:6:") for m in result.details["missing"])
    assert "not pinned exactly at pyproject.toml:9" in result.summary  # only the range left


def test_a_lock_without_packages_or_version_or_too_big(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "uv.lock"
    lock.write_text("version = 1\n")
    with pytest.raises(installs.LockError, match=r"uv.lock:1: no \[\[package\]\] list"):
        installs.read_lock(lock, "uv.lock")
    lock.write_text('[[package]]\nname = "vllm"\nsource = { registry = "x" }\n')
    with pytest.raises(installs.LockError, match=r"uv.lock:2: \[\[package\]\] vllm has no version"):
        installs.read_lock(lock, "uv.lock").core("vllm")
    monkeypatch.setattr(installs, "MAX_BYTES", 10)
    with pytest.raises(installs.LockError, match="larger than"):
        installs.read_lock(lock, "uv.lock")


def test_without_frozen_a_note_and_without_a_lock_a_missing_file(tmp_path: Path) -> None:
    def unfrozen(root: Path) -> None:
        docker = root / "docker" / "Dockerfile"
        docker.write_text(docker.read_text().replace(" --frozen", ""))

    result = _check(tmp_path / "a", unfrozen)
    assert any("without --frozen or --locked" in n for n in result.details["notes"])
    result = _check(tmp_path / "b", lambda root: (root / "uv.lock").unlink())
    assert result.status == "fail"
    assert {"file": "uv.lock", "referenced_by": "docker/Dockerfile:10", "role": "uv lock"} in (
        result.details["missing"]
    )


def test_sync_options() -> None:
    assert installs.is_uv_sync(["uv", "--quiet", "sync", "--frozen"])
    assert not installs.is_uv_sync(["uv", "pip", "sync", "r.txt"])
    assert installs.sync_project(["uv", "sync", "--project", "sub", "--locked"]) == (
        "sub",
        True,
    )
    assert installs.sync_project(["uv", "sync", "--directory=app"]) == ("app", False)
