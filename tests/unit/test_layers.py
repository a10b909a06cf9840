"""The layer contracts hold, and `lint-imports` fails on an import that climbs a layer."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

PACKAGE = REPO / "src" / "vllm_plugin_release"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(
    not LINT_IMPORTS.exists(), reason="import-linter is not installed (pip install -e .[test])"
)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def copy_tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(
        PACKAGE, root / "src" / "vllm_plugin_release", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_package_keeps_its_layers() -> None:
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # a lower layer importing a higher one
        ("core/errors.py", "from vllm_plugin_release.cli import main", "layers"),
        # a stage importing another stage
        ("stages/build_plugin.py", "from vllm_plugin_release.stages import build_core", "stage"),
        # inenv importing something of ours
        ("inenv/envcheck.py", "from vllm_plugin_release.core import errors", "inenv"),
        # argparse outside cli
        ("flows/release.py", "import argparse", "argparse"),
        # a process started outside edges
        ("conform/suite.py", "import subprocess", "side effects"),
    ],
)
def test_a_climbing_import_fails_lint(tmp_path: Path, module: str, line: str, broken: str) -> None:
    root = copy_tree(tmp_path)
    target = root / "src" / "vllm_plugin_release" / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    done = lint_imports(root)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout and broken in done.stdout


SIDE_EFFECT_CALLS = {("os", "environ"), ("os", "getenv"), ("urllib", "request")}


def side_effects(path: Path) -> list[str]:
    """`os.environ`, `os.getenv` and `urllib.request` uses in one module (by AST)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id, node.attr) in SIDE_EFFECT_CALLS
        ):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value.id}.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "urllib.request":
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: from urllib.request")
    return found


def test_environment_and_network_are_read_only_at_the_edges() -> None:
    """The process environment and urllib's network calls: in edges/ (and cli/, which turns
    arguments and their environment defaults into values); inenv/ runs elsewhere."""
    offenders = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in ("edges", "cli", "inenv")
        for hit in side_effects(path)
    ]
    assert offenders == []


def test_the_side_effect_scan_sees_a_violation(tmp_path: Path) -> None:
    sample = tmp_path / "pkg" / "core" / "x.py"
    sample.parent.mkdir(parents=True)
    sample.write_text("import os\nvalue = os.environ.get('X')\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "pkg"
    try:
        assert side_effects(sample) == ["core/x.py:2: os.environ"]
    finally:
        PACKAGE = saved
