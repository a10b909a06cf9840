"""The install proof's installer against a real pypiserver on loopback: uv by default,
pip when no uv binary is found; both refuse a wheel whose bytes do not match the hash."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pairing import write_wheel
from vllm_plugin_release.core.cache import sha256_file
from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.edges import publisher
from vllm_plugin_release.edges.index import IndexTarget, LocalIndex


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexTarget, Path]]:
    root = tmp_path_factory.mktemp("proof") / "index"
    root.mkdir()
    wheel = write_wheel(root, "demo-proof", "1.0", {"demo_proof/__init__.py": "X = 1\n"})
    with LocalIndex(root) as target:
        yield target, wheel


def _venv(tmp_path: Path) -> Path:
    return publisher.make_venv(tmp_path / "venv")


def _requirements(tmp_path: Path, sha: str) -> Path:
    req = tmp_path / "requirements.txt"
    req.write_text(f"demo-proof==1.0 --hash=sha256:{sha}\n")
    return req


def _installed(python: Path) -> bool:
    done = subprocess.run([python, "-c", "import demo_proof"], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_the_installer_installs_the_hashed_wheel_and_refuses_other_bytes(
    served: tuple[IndexTarget, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    installer: str,
) -> None:
    target, wheel = served
    if installer == "pip":

        def no_uv() -> str:
            raise OutsideFailure("uv not found")

        monkeypatch.setattr(publisher, "uv_bin", no_uv)
    calls: list[list[str]] = []
    real_run = subprocess.run

    def recording_run(cmd, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append([str(c) for c in cmd])
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(publisher.subprocess, "run", recording_run)

    good = tmp_path / "good"
    python = _venv(good)
    done = publisher.install_with_hashes(
        python, target.simple_url, _requirements(good, sha256_file(wheel))
    )
    assert done.returncode == 0, done.stderr
    assert _installed(python)
    (used,) = [c for c in calls if "--require-hashes" in c]
    if installer == "uv":
        assert Path(used[0]).name == "uv" and used[1:3] == ["pip", "install"]
    else:
        assert used[:3] == [sys.executable, "-m", "pip"]
    assert "--require-hashes" in used and "--no-deps" in used

    # Known-bad: the requirement's hash is not the served wheel's.
    bad = tmp_path / "bad"
    python = _venv(bad)
    done = publisher.install_with_hashes(python, target.simple_url, _requirements(bad, "0" * 64))
    assert done.returncode != 0
    assert "hash" in (done.stdout + done.stderr).lower()
    assert not _installed(python)
