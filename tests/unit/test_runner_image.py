"""The container runner's pieces that need no engine: the image archive (its ID follows
from its layers), the pin comparison, the Python a Debian suite ships, the interpreter
check of the local runner, and which runner an environment's python runs on."""

from __future__ import annotations

import hashlib
import json
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support import REPO
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.errors import BadInput, OutsideFailure, PythonUnavailable
from vllm_plugin_release.core.image import file_layer, tree_layer, write_archive
from vllm_plugin_release.edges import interpreters
from vllm_plugin_release.edges.container import (
    MARKER,
    _network_mode,
    mount_roots,
    runner_of,
    split_pinned,
)
from vllm_plugin_release.edges.runner import HOST_NETWORK, LocalRunner
from vllm_plugin_release.stages.container_build import check_python, compare_pin

EPOCH = 1784975730


def _archive(tmp: Path, payload: bytes, name: str) -> tuple[str, bytes]:
    tmp.mkdir(exist_ok=True)
    rootfs = file_layer(
        tmp / f"{name}-root.tar", {"etc/os-release": (b"ID=test\n", 0o644)}, epoch=EPOCH
    )
    tool = file_layer(tmp / f"{name}-uv.tar", {"usr/local/bin/uv": (payload, 0o755)}, epoch=EPOCH)
    out = tmp / f"{name}.tar"
    image_id = write_archive(
        out, [rootfs, tool], repo_tag="localhost/t:1", epoch=EPOCH, labels={"a": "b"}
    )
    return image_id, out.read_bytes()


def test_image_id_follows_from_the_layers_only(tmp_path: Path) -> None:
    first, first_bytes = _archive(tmp_path / "one", b"#!/bin/sh\n", "x")
    again, again_bytes = _archive(tmp_path / "two", b"#!/bin/sh\n", "y")
    assert first == again and first_bytes == again_bytes  # other folders, other file names
    changed, _ = _archive(tmp_path / "three", b"#!/bin/sh\nexit 1\n", "x")
    assert changed != first  # one byte of one layer: another image


def test_archive_is_what_docker_load_reads(tmp_path: Path) -> None:
    image_id, _ = _archive(tmp_path, b"uv", "x")
    with tarfile.open(tmp_path / "x.tar") as tf:
        manifest = json.loads(tf.extractfile("manifest.json").read())  # type: ignore[union-attr]
        config_bytes = tf.extractfile(f"{image_id}.json").read()  # type: ignore[union-attr]
        layers = [tf.extractfile(name).read() for name in manifest[0]["Layers"]]  # type: ignore[union-attr]
        times = {m.mtime for m in tf.getmembers()}
    assert hashlib.sha256(config_bytes).hexdigest() == image_id
    config = json.loads(config_bytes)
    assert config["created"] == "2026-07-25T10:35:30Z" and times == {EPOCH}
    assert config["rootfs"]["diff_ids"] == [
        f"sha256:{hashlib.sha256(layer).hexdigest()}" for layer in layers
    ]
    assert manifest[0]["RepoTags"] == ["localhost/t:1"]


def test_pin_comparison_names_both_digests(tmp_path: Path) -> None:
    spec = load_spec(REPO / "buildspec" / "reference.toml")
    pinned = spec.build.base_image or ""
    name, digest = pinned.split("@sha256:")
    assert compare_pin(spec, pinned) is None
    other = "f" * 64
    message = compare_pin(spec, f"{name}@sha256:{other}")
    assert message and f"sha256:{digest}" in message and f"sha256:{other}" in message
    assert compare_pin(spec, f"localhost/elsewhere:1@sha256:{other}") is None


def test_unpinned_image_refused() -> None:
    assert split_pinned("localhost/a:1@sha256:" + "0" * 64) == ("localhost/a:1", "0" * 64)
    with pytest.raises(BadInput, match="not pinned by digest"):
        split_pinned("python:3.11-slim")


def test_a_python_debian_lacks_is_this_machines_copied_in(tmp_path: Path) -> None:
    """bookworm ships 3.11 only: for another Python the image carries the interpreter this
    machine has, its installation as a layer whose bytes follow from its files alone."""
    check_python("3.11", "bookworm")
    with pytest.raises(OutsideFailure, match="unknown Debian suite 'sid'"):
        check_python("3.10", "sid")
    found = interpreters.find(f"{sys.version_info.major}.{sys.version_info.minor}", None, None)
    members = interpreters.install_members(found)
    exe = f"bin/python{found.minor}"
    assert exe in members
    assert not any(m.startswith(f"lib/python{found.minor}/test/") for m in members)
    assert not any("/site-packages/" in m for m in members)
    assert not any(m.startswith("bin/pip") for m in members)
    prefix = Path(found.prefix)
    some = [m for m in members if m.endswith(("os.py", "json/__init__.py"))] + [exe]
    link = {f"usr/local/bin/python{found.minor}": prefix / exe}
    a = tree_layer(tmp_path / "a.tar", prefix, some, at=str(prefix), epoch=EPOCH, links=link)
    b = tree_layer(
        tmp_path / "b.tar", prefix, list(reversed(some)), at=str(prefix), epoch=EPOCH, links=link
    )
    assert a.read_bytes() == b.read_bytes()  # the order given does not matter
    with tarfile.open(a) as tf:
        names = tf.getnames()
        assert names == sorted(names)
        assert {m.mtime for m in tf.getmembers()} == {EPOCH}
        assert tf.getmember(f"usr/local/bin/python{found.minor}").linkname == str(prefix / exe)
        assert f"{str(prefix).strip('/')}/{exe}" in names


def test_local_runner_names_a_missing_interpreter() -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    LocalRunner("off").interpreter(here)
    with pytest.raises(PythonUnavailable) as err:  # exit 3; conform runs the env-free part
        LocalRunner("off").interpreter("3.99")
    assert err.value.exit_code == 3
    assert "no CPython 3.99 interpreter on this machine" in err.value.message
    # a way to get one that works where only the package registries are reachable
    assert "pyenv install 3.99" in (err.value.hint or "")
    assert "uv python install" not in (err.value.hint or "")  # it downloads from GitHub


def test_mount_roots_keep_outer_folders(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    roots = mount_roots([tmp_path / "a" / "b", tmp_path / "a", tmp_path / "c", tmp_path / "gone"])
    assert roots == [str(tmp_path / "a"), str(tmp_path / "c")]


def test_an_environment_runs_where_it_was_made(tmp_path: Path) -> None:
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    assert isinstance(runner_of(python), LocalRunner)
    (tmp_path / "env" / MARKER).write_text("{not json")
    with pytest.raises(BadInput, match="unreadable runner marker"):
        runner_of(python)


def test_runner_backend_option_replaces_the_spec_backend_everywhere() -> None:
    spec = load_spec(REPO / "buildspec" / "reference.toml")
    assert spec.with_backend(None) is spec
    docker = spec.with_backend("docker")
    assert docker.build.backend == "docker" and docker.raw["build"]["backend"] == "docker"
    assert spec.build.backend == "local" and spec.raw["build"]["backend"] == "local"
    assert docker.build.base_image == spec.build.base_image


def test_only_this_machines_dead_runs_are_stale() -> None:
    import os
    import subprocess

    from vllm_plugin_release.edges.container import owner_label, stale_owner

    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: its pid no longer exists
    assert stale_owner(owner_label(dead.pid))
    assert not stale_owner(owner_label(os.getpid()))
    assert not stale_owner(f"another-machine:{dead.pid}")


def test_network_modes_of_the_container_runner() -> None:
    """Build steps get no network, the install proof the host's (the loopback index), a
    step that asks for the network the engine's default."""
    assert _network_mode(False) == "none"
    assert _network_mode(HOST_NETWORK) == "host"
    assert _network_mode(True) is None


def test_build_image_closes_its_engine_client_when_it_fails(tmp_path: Path, monkeypatch) -> None:
    """The engine client `build_image` opens is closed whatever happens after (it was left
    open). The engine is a stand-in (a recording object): what is under test is the close."""
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.stages import container_build

    closed: list[bool] = []

    class StandInClient:  # test double: no container engine is needed to test the close
        def close(self) -> None:
            closed.append(True)

    def no_layer(*args: object) -> None:
        raise OutsideFailure("mmdebstrap: no network (raised by the test)")

    monkeypatch.setattr(container_build.container, "connect", StandInClient)
    monkeypatch.setattr(container_build, "python_layer", no_layer)
    spec = load_spec(REPO / "buildspec" / "reference.toml")
    with pytest.raises(OutsideFailure, match="raised by the test"):
        container_build.build_image(spec, Cache(tmp_path / ".vpr"))
    assert closed == [True]


def test_the_built_image_prints_the_keys_it_always_had() -> None:
    from vllm_plugin_release.stages.container_build import BuiltImage

    made = BuiltImage("vpr-py:3.12@sha256:" + "a" * 64, "b" * 64, "c" * 64, "uv.whl", "Debian's")
    assert list(made.to_json().items()) == [
        ("image", made.image),
        ("rootfs_sha256", "b" * 64),
        ("uv_layer_sha256", "c" * 64),
        ("uv_wheel", "uv.whl"),
        ("python", "Debian's"),
    ]
