"""Runs inside the pairing environment: does the installed pairing hold together?

Standard library, vLLM and the plugin only (see envrun.py). Request keys:
  core_version, packages (plugin top-level packages), entry_points {group: {name: value}},
  runtime_module (e.g. "ttnn", "refrt"), expect_runtime ("absent" | "present").
Result: {"checks": [{"name", "status": pass|fail|skipped, "detail"}], "runtime_modules": [...]}
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import json
import os
import py_compile
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any


def _check(name: str, status: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "status": status, "detail": detail, **extra}


def _package_files(package: str) -> list[Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return [Path(spec.origin)] if spec and spec.origin else []
    files: list[Path] = []
    for location in spec.submodule_search_locations:
        files += sorted(Path(location).rglob("*.py"))
    return files


def _module_name(path: Path, package: str) -> str:
    parts = list(path.with_suffix("").parts)
    at = len(parts) - 1 - parts[::-1].index(package)
    names = parts[at:]
    if names[-1] == "__init__":
        names = names[:-1]
    return ".".join(names)


def _names_runtime(name: str, runtime: str) -> bool:
    """`name` is the runtime module or inside it (`vendor_sdk.torch`, `vendor_sdk.torch.ops`)."""
    return name == runtime or name.startswith(runtime + ".")


def _imports_runtime(path: Path, runtime: str) -> bool:
    """The module imports the runtime (a dotted runtime too) on its own level (absolute)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return False
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        if any(_names_runtime(name, runtime) for name in names):
            return True
    return False


def runtime_importable(runtime: str) -> bool:
    """`find_spec` without its exceptions: a dotted name whose parent is missing raises."""
    try:
        return importlib.util.find_spec(runtime) is not None
    except (ImportError, ValueError):
        return False


def _byte_compile(files: list[Path]) -> dict[str, Any]:
    """Every plugin module byte-compiles."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(files):
            try:
                py_compile.compile(str(path), cfile=os.path.join(tmp, f"{i}.pyc"), doraise=True)
            except py_compile.PyCompileError as exc:
                failures.append(f"{path.name}: {exc.msg.strip().splitlines()[-1]}")
    return _check(
        "byte-compile",
        "fail" if failures or not files else "pass",
        f"{len(files)} modules compiled" if not failures else "; ".join(failures),
    )


def _import_vllm(request: dict[str, Any]) -> dict[str, Any]:
    """vLLM imports and is the pinned core (`core_version`)."""
    try:
        import vllm

        version = getattr(vllm, "__version__", "?")
        ok = version.split("+")[0] == request["core_version"]
        return _check("import vllm", "pass" if ok else "fail", f"vllm {version}")
    except Exception as exc:
        return _check("import vllm", "fail", f"{type(exc).__name__}: {exc}")


def _import_packages(packages: list[str]) -> list[dict[str, Any]]:
    checks = []
    for package in packages:
        try:
            importlib.import_module(package)
            checks.append(_check(f"import {package}", "pass", "imported"))
        except Exception as exc:
            checks.append(_check(f"import {package}", "fail", f"{type(exc).__name__}: {exc}"))
    return checks


def _runtime_modules(
    files: list[Path], packages: list[str], runtime: str
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Modules that import the vendor runtime: imported when it is present, else listed."""
    runtime_modules: list[dict[str, str]] = []
    runtime_present = runtime_importable(runtime)
    for path in files:
        if not _imports_runtime(path, runtime):
            continue
        module = _module_name(path, next(p for p in packages if p in path.parts))
        if runtime_present:
            try:
                importlib.import_module(module)
                runtime_modules.append({"module": module, "status": "imported"})
            except Exception as exc:
                runtime_modules.append({"module": module, "status": "failed", "reason": f"{exc}"})
        else:
            runtime_modules.append(
                {
                    "module": module,
                    "status": "skipped",
                    "reason": f"imports {runtime}, which is absent on this runner",
                }
            )
    failed = [m for m in runtime_modules if m["status"] == "failed"]
    check = _check(
        "runtime modules",
        "fail" if failed else ("pass" if runtime_present else "skipped"),
        f"{len(runtime_modules)} modules import {runtime}"
        + ("" if runtime_present else " (skipped: runtime absent)"),
    )
    return runtime_modules, check


def _entry_point_checks(group: str, entries: dict[str, str], expect: str) -> list[dict[str, Any]]:
    """The group's entry points resolve; the platform plugin answers as the runtime dictates."""
    checks: list[dict[str, Any]] = []
    for name, value in sorted(entries.items()):
        label = f"entry point {group}:{name}"
        try:
            found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
            if not found:
                checks.append(_check(label, "fail", "not registered in the environment"))
                continue
            target = found[0].load()
            checks.append(_check(label, "pass", f"{value} resolves"))
        except Exception as exc:
            checks.append(_check(label, "fail", f"{type(exc).__name__}: {exc}"))
            continue
        if group == "vllm.platform_plugins":
            checks.append(_platform_plugin_check(target, expect))
    return checks


def _platform_plugin_check(target: Any, expect: str) -> dict[str, Any]:
    """Call the platform plugin: None with the runtime absent, a Platform class path else."""
    try:
        answer = target()
    except Exception as exc:
        return _check(f"platform_plugin() [{expect}]", "fail", f"raised {exc!r}")
    if expect == "absent":
        ok = answer is None
        detail = f"returned {answer!r} with the runtime absent" + ("" if ok else " (expected None)")
    else:
        ok, detail = _check_platform(answer)
    return _check(
        f"platform_plugin() runtime {expect}",
        "pass" if ok else "fail",
        detail,
        value=answer if isinstance(answer, str) else None,
    )


def run(request: dict[str, Any]) -> dict[str, Any]:
    packages: list[str] = request["packages"]
    runtime = request.get("runtime_module") or ""
    expect = request.get("expect_runtime", "absent")

    # 1. every plugin module byte-compiles
    files = [f for p in packages for f in _package_files(p)]
    checks = [_byte_compile(files)]
    # 2. vLLM imports and is the pinned core
    checks.append(_import_vllm(request))
    # 3. the plugin imports; modules that need the runtime are listed, not imported blindly
    checks += _import_packages(packages)
    runtime_modules: list[dict[str, str]] = []
    if runtime:
        runtime_modules, runtime_check = _runtime_modules(files, packages, runtime)
        checks.append(runtime_check)
    # 4. entry points resolve; the platform plugin answers as the runtime dictates
    groups = request.get("entry_points", {})
    for group, entries in sorted(groups.items()):
        if group.startswith("vllm."):
            checks += _entry_point_checks(group, entries, expect)
    return {"checks": checks, "runtime_modules": runtime_modules}


def _check_platform(answer: object) -> tuple[bool, str]:
    if not isinstance(answer, str) or "." not in answer:
        return False, f"returned {answer!r} with the runtime present (expected a class path)"
    module, _, cls = answer.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), cls)
        from vllm.platforms.interface import Platform

        if not (isinstance(obj, type) and issubclass(obj, Platform)):
            return False, f"{answer} is not a subclass of vllm.platforms.interface.Platform"
    except Exception as exc:
        return False, f"{answer} does not import: {exc}"
    return True, f"returned {answer}, a vllm Platform subclass"


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    try:
        result = run(request)
    except Exception:
        result = {"error": traceback.format_exc(limit=8)}
        Path(argv[2]).write_text(json.dumps(result))
        return 3
    Path(argv[2]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
