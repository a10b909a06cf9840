"""`inenv` modules run inside the pairing environment, where this package's dependencies
are not installed: they may import only the standard library, vLLM, torch and other
`inenv` modules (the plugin is loaded by name at run time, never imported)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import vllm_plugin_release.inenv

INENV = Path(vllm_plugin_release.inenv.__file__).resolve().parent
PACKAGE = "vllm_plugin_release.inenv"
THIRD_PARTY = frozenset({"vllm", "torch"})
MODULES = frozenset(path.stem for path in INENV.glob("*.py") if path.stem != "__init__")


STAGED = "vpr_inenv_"  # an inenv module staged beside the script (envrun.COMPANIONS)


def _allowed(name: str) -> bool:
    """An absolute import of `name` is allowed in an inenv module."""
    top = name.partition(".")[0]
    if top in sys.stdlib_module_names or top in THIRD_PARTY:
        return True
    if top.startswith(STAGED) and top.removeprefix(STAGED) in MODULES:
        return True
    package, _, module = name.rpartition(".")
    return package == PACKAGE and module in MODULES


def foreign_imports(source: str) -> list[str]:
    """The imports in `source` an inenv module may not make, as "line: module"."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: {a.name}" for a in node.names if not _allowed(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level:
            # Relative: only a sibling module (`from .replay import x`, `from . import replay`).
            names = [node.module] if node.module else [a.name for a in node.names]
            if node.level > 1 or any(n not in MODULES for n in names):
                dots = "." * node.level
                found += [f"{node.lineno}: {dots}{n}" for n in names if n is not None]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:  # from vllm_plugin_release.inenv import replay
                names = [f"{PACKAGE}.{a.name}" for a in node.names]
            else:
                names = [node.module]
            found += [f"{node.lineno}: {n}" for n in names if not _allowed(n)]
    return found


def test_inenv_modules_are_found() -> None:
    assert {"envcheck", "openapi", "replay"} <= MODULES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_inenv_module_imports_only_stdlib_vllm_torch_and_inenv(module: str) -> None:
    source = (INENV / f"{module}.py").read_text(encoding="utf-8")
    assert foreign_imports(source) == [], f"inenv/{module}.py imports what the env lacks"


def test_allowed_imports_pass() -> None:
    source = (
        "from __future__ import annotations\n"
        "import json, os.path\n"
        "from importlib.metadata import entry_points\n"
        "import torch\n"
        "from vllm.config import VllmConfig\n"
        "from . import replay\n"
        "from .envcheck import run\n"
        "import vllm_plugin_release.inenv.openapi\n"
        "from vllm_plugin_release.inenv import replay as r\n"
        "from vpr_inenv_workload import serve\n"
        "def lazy():\n"
        "    import vllm.v1.request\n"
    )
    assert foreign_imports(source) == []


@pytest.mark.parametrize(
    ("source", "reported"),
    [
        ("import rich\n", "1: rich"),
        ("from rich.console import Console\n", "1: rich.console"),
        (
            "from vllm_plugin_release.core.cache import atomic_write_text\n",
            "1: vllm_plugin_release.core.cache",
        ),
        ("import vllm_plugin_release.core.cache\n", "1: vllm_plugin_release.core.cache"),
        ("from vllm_plugin_release.core import cache\n", "1: vllm_plugin_release.core"),
        ("from ..core import cache\n", "1: ..core"),
        ("from . import no_such_inenv_module\n", "1: .no_such_inenv_module"),
        ("import numpy\n", "1: numpy"),
        ("import vpr_inenv_no_such_module\n", "1: vpr_inenv_no_such_module"),
        ("import json\n\ndef lazy():\n    import rich\n", "4: rich"),
    ],
)
def test_foreign_imports_are_rejected(source: str, reported: str) -> None:
    found = foreign_imports(source)
    assert len(found) == 1 and found[0].startswith(reported), found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_staged_import_is_staged_with_the_script(module: str) -> None:
    """`import vpr_inenv_X` finds X only when envrun stages X beside the script."""
    from vllm_plugin_release.edges.envrun import COMPANIONS

    tree = ast.parse((INENV / f"{module}.py").read_text(encoding="utf-8"))
    staged = {
        name.removeprefix(STAGED)
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import)
            else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        )
        if name.startswith(STAGED)
    }  # fmt: skip
    assert staged <= set(COMPANIONS.get(module, ())), f"inenv/{module}.py: stage {staged}"
