"""The plugin's test files that need the vendor runtime before any test runs (pure).

A test module that imports the runtime at import time (a module-level `import ttnn`,
`from vendor_sdk import torch`, also inside a module-level `try`/`if`) cannot be
collected where the runtime is absent. Found by reading the files (AST), so a spec need
not hand-list them in `ignore`; they go to the hardware runner, named in the record.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

# How the absence of a runtime reads in a failure besides `No module named '<module>'`:
# declared per spec (`absence_signatures`). And how needing the network reads when the
# tests run offline (HF_HUB_OFFLINE=1 and friends): those tests are classified, not failed.
NETWORK_SIGNATURES = (
    "HF_HUB_OFFLINE",
    "OfflineModeIsEnabled",
    "LocalEntryNotFoundError",
    "We couldn't connect to 'https://huggingface.co'",
    "Cannot find an appropriate cached snapshot",
    "outgoing traffic has been disabled",
)
# The environment the plugin's tests run in: no hub, no telemetry, nothing to hang on.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


def _names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at import time: the body and module-level try/if blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.Try):
            yield from _module_level(node.body)
        elif isinstance(node, ast.If):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)


def imports_at_import_time(path: Path, runtime: str) -> bool:
    """`path` imports `runtime` (or a module inside it) when it is imported."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return False
    for node in _module_level(tree.body):
        for name in _names(node):
            if name == runtime or name.startswith(runtime + "."):
                return True
    return False


def _test_files(root: Path, paths: list[str]) -> Iterator[Path]:
    for rel in paths:
        base = root / rel
        files = [base] if base.is_file() else sorted(base.rglob("*.py")) if base.is_dir() else []
        for f in files:
            name = f.name
            if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
                yield f


def runtime_importers(root: Path, paths: list[str], ignore: list[str], runtime: str) -> list[str]:
    """Test files under `paths` (relative to `root`, not under an `ignore` entry) that
    import the runtime at import time, as relative POSIX paths."""
    covered = [PurePosixPath(i) for i in ignore]
    out: list[str] = []
    for f in _test_files(root, paths):
        rel = PurePosixPath(f.relative_to(root).as_posix())
        if any(rel == c or c in rel.parents for c in covered):
            continue
        if imports_at_import_time(f, runtime):
            # a conftest.py is loaded for its whole folder: the folder needs the runtime
            out.append(str(rel.parent) if f.name == "conftest.py" else str(rel))
    return sorted(set(out))
