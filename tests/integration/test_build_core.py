"""build-core end to end: the real vLLM 0.26.0 sdist, and a tiny core that is not reproducible."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, Index, make_sdist, vpr
from vllm_plugin_release.core.lockfile import BODY_LINE, body_sha256
from vllm_plugin_release.edges.runner import can_unshare_network


def test_real_vllm_wheel_is_reproducible(core_build: dict) -> None:
    wheel = Path(core_build["_wheel_path"])
    assert wheel.name.startswith("vllm-0.26.0+empty-")
    assert core_build["reproducible"] is True
    assert core_build["builds_compared"] == 2
    assert core_build["wheel"]["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert core_build["isolated"] is can_unshare_network()
    assert core_build["build_env"]["core_declared_torch"] == "torch==2.11.0"
    assert core_build["build_env"]["torch"] == "2.13.0+cpu"
    assert core_build["env"]["VLLM_TARGET_DEVICE"] == "empty"
    assert core_build["core"]["source"]["sha256"].startswith("23e9fa19")
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read("vllm-0.26.0+empty.dist-info/METADATA").decode()
        assert "Version: 0.26.0+empty" in metadata
        # every member carries the source date epoch, not the build time
        assert {info.date_time[:3] for info in zf.infolist()} == {(2026, 7, 25)}


def test_warm_rebuild_reuses_the_result(core_build: dict, cache_root: Path, tmp_path: Path) -> None:
    done = vpr(
        "build-core",
        "--spec",
        str(REFERENCE_SPEC),
        "--dist",
        str(tmp_path),
        "--cache-dir",
        str(cache_root),
    )
    assert "cached result reused" in done.stderr
    record = json.loads((tmp_path / "reference" / "build-core.json").read_text())
    assert record["wheel"]["sha256"] == core_build["wheel"]["sha256"]
    # the record is deterministic: same bytes as the cold build's
    assert {k: v for k, v in core_build.items() if not k.startswith("_")} == record


# -- a tiny core served from a loopback index -------------------------------------------

SETUP_TEMPLATE = """
import os, time
from setuptools import setup
version = "0.0.1"
if os.environ.get("VLLM_TARGET_DEVICE") == "empty":
    version += "+empty"
os.makedirs("vllm", exist_ok=True)
with open("vllm/__init__.py", "w") as f:
    f.write({stamp})
setup(name="vllm", version=version, packages=["vllm"])
"""
PYPROJECT = """[build-system]
requires = ["setuptools>=77.0.3,<81", "wheel"]
build-backend = "setuptools.build_meta"
"""


def tiny_spec(tmp_path: Path, index: Index, *, stamp: str) -> Path:
    data = make_sdist(
        {
            "PKG-INFO": b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n",
            "pyproject.toml": PYPROJECT.encode(),
            "setup.py": SETUP_TEMPLATE.format(stamp=stamp).encode(),
        }
    )
    index.files["vllm-0.0.1.tar.gz"] = data
    project = tmp_path / "project"
    (project / "buildspec").mkdir(parents=True)
    text = REFERENCE_SPEC.read_text().split("\n[plugin]")[0]  # core and build only
    text = text.replace('version = "0.26.0"', 'version = "0.0.1"')
    text = text.replace('index = "https://pypi.org/simple"', f'index = "{index.url}"')
    text = text.replace('filename = "vllm-0.26.0.tar.gz"', 'filename = "vllm-0.0.1.tar.gz"')
    text = text.replace(
        "23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502",
        hashlib.sha256(data).hexdigest(),
    )
    spec = project / "buildspec" / "tiny.toml"
    spec.write_text(text.replace('name = "reference"', 'name = "tiny"'))
    return spec


@pytest.fixture
def index():
    idx = Index()
    yield idx
    idx.close()


def test_nonreproducible_core_fails_gate_and_writes_nothing(
    tmp_path: Path, index: Index, cache_root: Path
) -> None:
    spec = tiny_spec(tmp_path, index, stamp='f"STAMP = {time.time_ns()}\\n"')
    cache = tmp_path / ".vpr"
    vpr("lock", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
    dist = tmp_path / "dist"
    done = vpr(
        "build-core",
        "--spec",
        str(spec),
        "--dist",
        str(dist),
        "--cache-dir",
        str(cache),
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "not reproducible" in done.stderr
    assert "vllm/__init__.py: content differs" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(dist.rglob("*.whl"))
    assert not (dist / "tiny" / "build-core.json").exists()


def test_reproducible_tiny_core_passes(tmp_path: Path, index: Index) -> None:
    """Also: `vpr release` makes the build environment while its lock stage fetches the
    source (`prepare_build_env` needs only the lock); build-core then finds it made."""
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.stages.build_core import prepare_build_env

    spec = tiny_spec(tmp_path, index, stamp='"STAMP = 1\\n"')
    cache = tmp_path / ".vpr"
    vpr("lock", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
    assert prepare_build_env(load_spec(spec), Cache(cache)) is True
    assert len(Cache(cache).complete_envs("build-core")) == 1
    dist = tmp_path / "dist"
    done = vpr(
        "build-core",
        "--spec",
        str(spec),
        "--dist",
        str(dist),
        "--cache-dir",
        str(cache),
        cwd=tmp_path,
    )
    assert "creating build environment" not in done.stderr
    record = json.loads((dist / "tiny" / "build-core.json").read_text())
    assert record["reproducible"] is True
    assert record["wheel"]["filename"] == "vllm-0.0.1+empty-py3-none-any.whl"


def test_preparing_the_build_env_leaves_what_it_cannot_do_to_the_stage(tmp_path: Path) -> None:
    """No lock for the spec's Python yet: nothing is made and nothing is said (build-core
    meets it again and names it)."""
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.stages.build_core import prepare_build_env

    project = tmp_path / "project"
    (project / "buildspec").mkdir(parents=True)
    spec = project / "buildspec" / "gone.toml"
    spec.write_text(REFERENCE_SPEC.read_text().split("\n[plugin]")[0])  # no constraints/ here
    cache = Cache(tmp_path / ".vpr")
    assert prepare_build_env(load_spec(spec), cache) is False
    assert cache.complete_envs("build-core") == []


def test_stale_lock_is_bad_input(tmp_path: Path, index: Index) -> None:
    spec = tiny_spec(tmp_path, index, stamp='"STAMP = 1\\n"')
    cache = tmp_path / ".vpr"
    vpr("lock", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
    text = spec.read_text().replace('torch = "2.13.0+cpu"', 'torch = "2.13.0"')
    spec.write_text(text)
    done = vpr(
        "build-core", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path, check=False
    )
    assert done.returncode == 2
    assert "lock is stale" in done.stderr


def test_hand_edited_lock_fails_hash_check(tmp_path: Path, index: Index) -> None:
    spec = tiny_spec(tmp_path, index, stamp='"STAMP = 1\\n"')
    cache = tmp_path / ".vpr"
    vpr("lock", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path)
    lock = tmp_path / "project" / "constraints" / "build-core-py311.txt"
    text = lock.read_text()
    start = text.index("wheel==")
    first_hash = text.index("--hash=sha256:", start) + len("--hash=sha256:")
    lines = text[start:].split("\n")
    n_hashes = sum(1 for line in lines[1:] if "--hash=" in line)
    # replace every hash of `wheel` so no file can match
    tampered = text[:start] + "\n".join(
        [lines[0]]
        + [
            line[: line.index("sha256:") + 7] + "0" * 64 + (" \\" if line.endswith("\\") else "")
            if "--hash=" in line
            else line
            for line in lines[1 : 1 + n_hashes]
        ]
        + lines[1 + n_hashes :]
    )
    assert first_hash and tampered != text
    # The body digest is stamped again (it is no signature), so the hash check at install
    # time is what must catch it; an unstamped edit is exit 2 (tests/faults/test_cache.py).
    m = BODY_LINE.search(tampered)
    assert m is not None
    body = tampered[m.end() :]
    tampered = tampered[: m.start()] + f"# body-sha256: {body_sha256(body)}\n" + body
    lock.write_text(tampered)
    done = vpr(
        "build-core", "--spec", str(spec), "--cache-dir", str(cache), cwd=tmp_path, check=False
    )
    assert done.returncode == 1, done.stderr
    assert "hash" in done.stderr.lower()
    assert "wheel" in done.stderr
