"""The install proof's installer (uv, on the runner) against a real pypiserver on
loopback: it installs the hashed wheel and refuses one whose bytes do not match."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pairing import write_wheel
from vllm_plugin_release.core.cache import sha256_file
from vllm_plugin_release.edges import publisher
from vllm_plugin_release.edges.index import IndexTarget, LocalIndex
from vllm_plugin_release.edges.runner import LocalRunner


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexTarget, Path]]:
    root = tmp_path_factory.mktemp("proof") / "index"
    root.mkdir()
    wheel = write_wheel(root, "demo-proof", "1.0", {"demo_proof/__init__.py": "X = 1\n"})
    with LocalIndex(root) as target:
        yield target, wheel


def _venv(tmp_path: Path, runner: LocalRunner) -> Path:
    return publisher.make_venv(tmp_path / "venv", runner, "{}.{}".format(*sys.version_info[:2]))


def _requirements(tmp_path: Path, sha: str) -> Path:
    req = tmp_path / "requirements.txt"
    req.write_text(f"demo-proof==1.0 --hash=sha256:{sha}\n")
    return req


def _installed(python: Path) -> bool:
    done = subprocess.run([python, "-c", "import demo_proof"], capture_output=True, check=False)
    return done.returncode == 0


def test_the_installer_installs_the_hashed_wheel_and_refuses_other_bytes(
    served: tuple[IndexTarget, Path], tmp_path: Path
) -> None:
    target, wheel = served
    runner = LocalRunner("off")

    good = tmp_path / "good"
    python = _venv(good, runner)
    done = publisher.install_with_hashes(
        python, target.simple_url, _requirements(good, sha256_file(wheel)), runner
    )
    assert done.returncode == 0, done.stderr
    assert _installed(python)
    used = [str(a) for a in done.args]
    assert Path(used[0]).name == "uv" and used[1:3] == ["pip", "install"]
    assert "--require-hashes" in used and "--no-deps" in used

    # Known-bad: the requirement's hash is not the served wheel's.
    bad = tmp_path / "bad"
    python = _venv(bad, runner)
    done = publisher.install_with_hashes(
        python, target.simple_url, _requirements(bad, "0" * 64), runner
    )
    assert done.returncode != 0
    assert "hash" in (done.stdout + done.stderr).lower()
    assert not _installed(python)
