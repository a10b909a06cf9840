"""The plugin's test files that need the vendor runtime at import time, directly or through the
plugin's own modules (followed transitively, by AST): they go to the hardware runner."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from vllm_plugin_release.conform.lib.plugintree import Unread, read_regular, within
from vllm_plugin_release.core.cache import walk

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


MAX_MODULES = 400  # plugin modules read per scan
MAX_BYTES = 1_000_000  # a larger file is not read
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _parse(path: Path, root: Path) -> ast.Module | None:
    """The AST of a plugin file; None outside `root`, unreadable, too large or too deep."""
    inside = within(root, path)
    try:
        raw = read_regular(inside, MAX_BYTES) if inside is not None else b""
        if inside is None or len(raw) > MAX_BYTES:
            return None
        return ast.parse(raw.decode("utf-8", errors="replace"))
    except (Unread, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _is_runtime(name: str, runtime: str) -> bool:
    return name == runtime or name.startswith(runtime + ".")


def imports_at_import_time(path: Path, runtime: str, root: Path | None = None) -> bool:
    """`path` (of the plugin at `root`, default: its folder) imports `runtime` when imported."""
    tree = _parse(path, root if root is not None else path.parent)
    return tree is not None and any(
        _is_runtime(name, runtime) for node in _module_level(tree.body) for name in _names(node)
    )


def _catches_import_errors(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if caught is None or any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names):
            return True
    return False


def _unguarded(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at import time and whose ImportError is not caught there
    (`if TYPE_CHECKING:` never runs)."""
    for node in body:
        yield node
        if isinstance(node, ast.Try) and not _catches_import_errors(node):
            yield from _unguarded(node.body)
        elif isinstance(node, ast.If):
            test = node.test
            checking = isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            checking |= isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            if not checking:
                yield from _unguarded(node.body)
            yield from _unguarded(node.orelse)


class _Follower:
    """Which files of the plugin an import statement loads, and whether a file reaches
    the runtime through its unguarded imports (memoised; a cycle reaches nothing new)."""

    def __init__(self, root: Path, runtime: str) -> None:
        self.base = root.resolve()
        self.roots = [r for r in (root / "src", root) if r.is_dir()]
        self.runtime = runtime
        self.seen: dict[Path, bool] = {}

    def _walk(self, base: Path, parts: list[str]) -> list[Path]:
        """The files importing `parts` under `base` runs (each __init__, then the module)."""
        files: list[Path] = []
        here = base
        for i, part in enumerate(parts):
            here = here / part
            init = here / "__init__.py"
            if i == len(parts) - 1 and here.with_suffix(".py").is_file():
                files.append(here.with_suffix(".py"))
            elif init.is_file():
                files.append(init)
            elif i == 0:
                return []
            else:
                break
        return [f for f in files if f.resolve().is_relative_to(self.base)]

    def _absolute(self, dotted: str, near: Path) -> list[Path]:
        for base in [*self.roots, near]:
            if found := self._walk(base, dotted.split(".")):
                return found
        return []

    def files_of(self, node: ast.stmt, path: Path) -> list[Path]:
        if isinstance(node, ast.Import):
            return [f for a in node.names for f in self._absolute(a.name, path.parent)]
        if not isinstance(node, ast.ImportFrom):
            return []
        module = (node.module or "").split(".") if node.module else []
        subs = [a.name for a in node.names if a.name != "*"]
        if node.level == 0:
            found = self._absolute(".".join(module), path.parent)
            return found + [
                f for s in subs for f in self._absolute(f"{node.module}.{s}", path.parent)
            ]
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        found = self._walk(base, module) if module else []
        return found + [f for s in subs for f in self._walk(base, [*module, s])[-1:]]

    def reaches(self, path: Path, depth: int = 0) -> bool:
        key = path.resolve()
        if key in self.seen:
            return self.seen[key]
        self.seen[key] = False  # while being read: a cycle adds nothing
        if len(self.seen) > MAX_MODULES or depth > 32 or (tree := _parse(path, self.base)) is None:
            return False
        for node in _unguarded(tree.body):
            if any(_is_runtime(n, self.runtime) for n in _names(node)) or any(
                self.reaches(f, depth + 1) for f in self.files_of(node, path) if f.resolve() != key
            ):
                self.seen[key] = True
                return True
        return False


def _test_files(root: Path, paths: list[str]) -> Iterator[Path]:
    for rel in paths:
        base = root / rel
        files = [base] if base.is_file() else _python_files(base) if base.is_dir() else []
        for f in files:
            name = f.name
            if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
                yield f


def _python_files(base: Path) -> list[Path]:
    """`sorted(base.rglob("*.py"))` in one walk without recursion (rglob's recursion fails on
    a deep tree); links to folders are not entered."""
    found = [
        Path(entry.path)
        for rel, entry in walk(base, errors="skip")
        if rel.endswith(".py") and not entry.is_dir()
    ]
    return sorted(found)


def runtime_importers(root: Path, paths: list[str], ignore: list[str], runtime: str) -> list[str]:
    """Test files under `paths`, not under `ignore`, that import the runtime at import time."""
    covered = [PurePosixPath(i) for i in ignore]
    follower = _Follower(root, runtime)
    out: list[str] = []
    for f in _test_files(root, paths):
        rel = PurePosixPath(f.relative_to(root).as_posix())
        if any(rel == c or c in rel.parents for c in covered):
            continue
        # the runtime imported by the file itself (guarded or not), or through plugin modules
        if imports_at_import_time(f, runtime, follower.base) or follower.reaches(f):
            # a conftest.py is loaded for its whole folder: the folder needs the runtime
            out.append(str(rel.parent) if f.name == "conftest.py" else str(rel))
    return sorted(set(out))


def _required_options(tree: ast.Module) -> list[str]:
    """The command-line options a conftest's `pytest_addoption` declares `required=True`."""
    found: list[str] = []
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name == "pytest_addoption"):
            continue
        for call in ast.walk(node):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            if call.func.attr != "addoption":
                continue
            required = any(
                k.arg == "required" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in call.keywords
            )
            names = [a.value for a in call.args if isinstance(a, ast.Constant)]
            if required:
                found += [n for n in names if isinstance(n, str) and n.startswith("--")]
    return found


def option_folders(root: Path, paths: list[str]) -> dict[str, list[str]]:
    """Folders (relative POSIX paths) whose conftest.py requires command-line options: their
    tests need what those options name (a live server), which the cpu runner never passes."""
    out: dict[str, list[str]] = {}
    for f in _test_files(root, paths):
        if f.name != "conftest.py" or (tree := _parse(f, root)) is None:
            continue
        options = _required_options(tree)
        if options:
            out[f.parent.relative_to(root).as_posix()] = options
    return out
