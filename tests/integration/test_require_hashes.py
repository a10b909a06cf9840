"""Every locked install runs with hashes required: the argument lists of the pairing
environment, the build environment (`stages/recipes`), `vpr install`'s sync and the image's
uv download, each run for real (uv, pip) against a lock that lost one line's hash. uv and
pip check the hashes a lock has even without the flag; only the flag refuses a line that
has none, so these tests are what fails when an argument list drops it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.pairing import write_wheel
from vllm_plugin_release.core.cache import sha256_file
from vllm_plugin_release.core.errors import VprError
from vllm_plugin_release.edges import container
from vllm_plugin_release.edges.uv import find_link_args, sync_locked, uv_bin
from vllm_plugin_release.stages import pairing_env, recipes

PYTHON = "3.11"


@pytest.fixture
def deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two real wheels in a folder; nothing but that folder to install from."""
    folder = tmp_path / "deps"
    write_wheel(folder, "vpr-hashed", "1.0", {"vpr_hashed/__init__.py": "A = 1\n"})
    write_wheel(folder, "vpr-unhashed", "1.0", {"vpr_unhashed/__init__.py": "B = 1\n"})
    for name in ("PIP_FIND_LINKS", "VPR_FIND_LINKS", "UV_FIND_LINKS", "UV_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("UV_NO_INDEX", "1")  # uv: only --find-links
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip: likewise
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    return folder


def _lock(tmp_path: Path, deps: Path, *, all_hashed: bool) -> Path:
    """A lock of both wheels as `vpr lock` writes one; the edited one has lost the second
    line's hash (what --require-hashes exists to refuse)."""
    lines = []
    for name in ("vpr-hashed", "vpr-unhashed"):
        wheel = next(deps.glob(f"{name.replace('-', '_')}-*.whl"))
        hashed = all_hashed or name == "vpr-hashed"
        lines.append(
            f"{name}==1.0" + (f" \\\n    --hash=sha256:{sha256_file(wheel)}" if hashed else "")
        )
    lock = tmp_path / ("lock.txt" if all_hashed else "edited-lock.txt")
    lock.write_text("\n".join(lines) + "\n")
    return lock


def _holds(venv: Path, module: str) -> bool:
    python = venv / "bin" / "python"
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def _run(argv: list[str] | tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, env=dict(os.environ))


@pytest.mark.parametrize("all_hashed", [True, False], ids=["locked", "a-line-without-hash"])
def test_the_pairing_environment_requires_hashes(tmp_path: Path, deps: Path, all_hashed) -> None:
    venv = tmp_path / "env"
    steps = dict(
        pairing_env.install_steps(
            uv_bin(),
            PYTHON,
            venv,
            _lock(tmp_path, deps, all_hashed=all_hashed),
            find_link_args([str(deps)]),
            [],
        )
    )
    assert _run(steps["create pairing environment"]).returncode == 0
    done = _run(steps[pairing_env.LOCKED_STEP])
    if all_hashed:
        assert done.returncode == 0, done.stderr
        assert _holds(venv, "vpr_hashed") and _holds(venv, "vpr_unhashed")
    else:
        assert done.returncode != 0 and "hash" in done.stderr, done.stderr
        assert not _holds(venv, "vpr_unhashed")


@pytest.mark.parametrize("all_hashed", [True, False], ids=["locked", "a-line-without-hash"])
def test_the_build_environment_requires_hashes(tmp_path: Path, deps: Path, all_hashed) -> None:
    venv = tmp_path / "build-env"
    create, install, _ = recipes.venv_commands(
        uv=uv_bin(),
        python=PYTHON,
        venv=str(venv),
        lock=str(_lock(tmp_path, deps, all_hashed=all_hashed)),
        find_links=[str(deps)],
        env={},
    )
    assert _run(create.argv).returncode == 0
    done = _run(install.argv)
    if all_hashed:
        assert done.returncode == 0, done.stderr
        assert _holds(venv, "vpr_unhashed")
    else:
        assert done.returncode != 0 and "hash" in done.stderr, done.stderr
        assert not _holds(venv, "vpr_unhashed")


def test_vpr_install_sync_requires_hashes(tmp_path: Path, deps: Path) -> None:
    venv = tmp_path / "consumer"
    assert _run([uv_bin(), "venv", "--quiet", "--python", PYTHON, str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    with pytest.raises(VprError, match="hash"):
        sync_locked(python, _lock(tmp_path, deps, all_hashed=False), [str(deps)])
    assert not _holds(venv, "vpr_unhashed")
    sync_locked(python, _lock(tmp_path, deps, all_hashed=True), [str(deps)])
    assert _holds(venv, "vpr_hashed") and _holds(venv, "vpr_unhashed")


def test_the_images_uv_download_requires_hashes(tmp_path: Path, deps: Path, monkeypatch) -> None:
    """The image's uv wheel comes through pip download: pip turns hash checking on for a
    file with any hash, so the test's requirements file has none at all."""
    monkeypatch.setenv("PIP_FIND_LINKS", str(deps))
    wheel = next(deps.glob("vpr_hashed-*.whl"))
    good = tmp_path / "good.txt"
    good.write_text(f"vpr-hashed==1.0 --hash=sha256:{sha256_file(wheel)}\n")
    (tmp_path / "ok").mkdir()
    assert container.download_wheel(good, tmp_path / "ok").name == wheel.name
    bare = tmp_path / "bare.txt"
    bare.write_text("vpr-hashed==1.0\n")
    (tmp_path / "refused").mkdir()
    with pytest.raises(VprError, match="hash"):
        container.download_wheel(bare, tmp_path / "refused")
