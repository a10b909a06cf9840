"""A small synthetic core ("vllm") with a real git history and a known breaking commit, and
a small plugin whose tests catch the break: the material of the bisection tests.

The core builds through the real build-core stage (setuptools; its version carries the
`+empty` local part when VLLM_TARGET_DEVICE=empty, as vLLM's does). Commit `BREAKING` (the
fifth of eight) renames `vllm.api_level()`; the plugin's tests call it.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from tests.support import git

COMMITS = 8
BREAKING = 5  # 1-based: commit 5 renames the function the plugin calls

SETUP = """import os
from setuptools import setup

device = os.environ.get("VLLM_TARGET_DEVICE", "cuda")
setup(name="vllm", version="{version}+" + device, packages=["vllm"])
"""
PYPROJECT = """[build-system]
requires = ["setuptools>=68", "torch==2.11.0"]
build-backend = "setuptools.build_meta"
"""


def core_files(number: int, version: str) -> dict[str, str]:
    """The core's files at commit `number` (1-based), labelled `version`."""
    if number < BREAKING:
        api = "def api_level():\n    return 1\n"
    else:  # the break: renamed, as upstream renames do
        api = "def api_version():\n    return 1\n"
    return {
        "pyproject.toml": PYPROJECT,
        "setup.py": SETUP.format(version=version),
        "requirements/common.txt": "# nothing beyond torch\n",
        "vllm/__init__.py": api + f"CHANGE = {number}\n__version__ = {version!r}\n",
    }


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def core_repo(root: Path) -> list[str]:
    """The synthetic core's repository at `root`; its commits, oldest first. Tag v0.1.0 is
    commit 1 (good), v0.2.0 commit 8 (bad)."""
    root.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=root)
    commits = []
    for n in range(1, COMMITS + 1):
        write(root, core_files(n, "0.1.0" if n == 1 else "0.2.0"))
        git("add", "-A", cwd=root)
        date = f"2026-01-{n:02d}T00:00:00+00:00"
        git("commit", "-q", "-m", f"change {n}", cwd=root, date=date)
        commits.append(git("rev-parse", "HEAD", cwd=root))
    git("tag", "v0.1.0", commits[0], cwd=root)
    git("tag", "v0.2.0", commits[-1], cwd=root)
    return commits


def core_sdist(number: int, version: str, requires_python: str | None = None) -> bytes:
    """An sdist of the core at commit `number`, as version `version`; with
    `requires_python`, a PKG-INFO that declares it."""
    files = core_files(number, version)
    if requires_python:
        files["PKG-INFO"] = (
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
            f"Requires-Python: {requires_python}\n"
        )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size = len(data)
            info.mtime = 1767225600 + number * 86400
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


PLUGIN = {
    "pyproject.toml": """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "demo-plugin"
version = "1.0.0"
dependencies = []

[project.entry-points."vllm.platform_plugins"]
demo = "demo_plugin:register"

[tool.setuptools]
packages = ["demo_plugin"]
""",
    "demo_plugin/__init__.py": "def register():\n    return None\n",
    # a module no core has the API for (as vllm-tt-plugin's launcher on vLLM 0.25.1 and
    # 0.26.0): a finding of the environment check, never a stop of a probe
    "demo_plugin/stale.py": "from vllm import NoSuchLauncher  # noqa: F401\n",
    "tests/test_core_api.py": """import vllm


def test_api_level():
    assert vllm.api_level() == 1


def test_imports():
    assert vllm.CHANGE >= 1
""",
}


def git_source(core: Path, tag: str, commit: str) -> str:
    return f'kind = "git"\nurl = "{core}"\ntag = "{tag}"\ncommit = "{commit}"'


def sdist_source(index: str, version: str, sha256: str) -> str:
    return f'kind = "sdist"\nindex = "{index}"\nsha256 = "{sha256}"'


def project(root: Path, source: str, version: str) -> Path:
    """A project folder (a git repository) with the plugin under plugin/demo and a spec
    pairing it with the synthetic core `version` from `source` (a [core.source] body);
    returns the spec."""
    write(root / "plugin" / "demo", PLUGIN)
    (root / "pyproject.toml").write_text("[project]\nname = 'bisect-test'\n")
    spec = root / "buildspec" / "demo.toml"
    spec.parent.mkdir(parents=True)
    spec.write_text(
        f"""spec_version = 1
name = "demo"

[core]
name = "vllm"
version = "{version}"
target_device = "empty"
source_date_epoch = 1767225600

[core.source]
{source}

[build]
python = "3.11"
backend = "local"
reproducibility_check = false

[plugin]
name = "demo-plugin"

[plugin.source]
kind = "path"
path = "plugin/demo"

[conformance.plugin_tests]
cpu = ["tests"]
"""
    )
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "project", cwd=root, date="2026-01-01T00:00:00+00:00")
    return spec
