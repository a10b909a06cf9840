"""Inside the pairing environment: does the installed pairing hold together (core version,
the plugin's packages and entry points, the vendor runtime present or absent)?"""

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


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _imports(name: str, module: str) -> dict[str, Any]:
    """The check `name`: `module` imports."""
    try:
        importlib.import_module(module)
    except Exception as exc:
        return _check(name, "fail", _said(exc))
    return _check(name, "pass", "imported")


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
        return _check("import vllm", "fail", _said(exc))


def _plugin_modules(
    files: list[Path], packages: list[str], runtime: str
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """Every plugin module imported (those needing an absent runtime listed), and the checks."""
    present = bool(runtime) and runtime_importable(runtime)
    modules: list[dict[str, str]] = []
    for path in files:
        module = _module_name(path, next(p for p in packages if p in path.parts))
        needs = bool(runtime) and _imports_runtime(path, runtime)
        entry = {"module": module, **({"imports_runtime": "yes"} if needs else {})}
        if needs and not present:
            modules.append(
                {**entry, "status": "skipped", "reason": f"imports {runtime}, absent here"}
            )
            continue
        try:
            importlib.import_module(module)
            modules.append({**entry, "status": "imported"})
        except BaseException as exc:  # SystemExit too: a module must never end the process
            reason = _without_env(_said(exc).strip())[:500]
            modules.append({**entry, "status": "failed", "reason": reason})
    failed = [m for m in modules if m["status"] == "failed"]
    skipped = [m for m in modules if m["status"] == "skipped"]
    detail = f"{len(modules) - len(failed) - len(skipped)} of {len(modules)} modules import"
    if failed:
        detail += "; failed: " + "; ".join(f"{m['module']} ({m['reason']})" for m in failed)
    if skipped:
        detail += f"; {len(skipped)} need {runtime}, absent here"
    checks = [
        _check(
            "plugin modules import",
            "fail" if failed else "pass",
            detail,
            **({"finding": "plugin"} if failed else {}),
        )
    ]
    if runtime:
        importers = [m for m in modules if m.get("imports_runtime")]
        bad = [m for m in importers if m["status"] == "failed"]
        checks.append(
            _check(
                "runtime modules",
                "fail" if bad else ("pass" if present else "skipped"),
                f"{len(importers)} modules import {runtime}"
                + ("" if present else " (skipped: runtime absent)"),
                **({"finding": "plugin"} if bad else {}),
            )
        )
    return modules, checks


def _without_env(text: str) -> str:
    """`text` with this environment's folder as `<env>/`: the same wherever it was made."""
    return text.replace(sys.prefix.rstrip("/") + "/", "<env>/")


def _platform_activation(packages: list[str], runtime: str, expect: str) -> dict[str, Any]:
    """The platform vLLM resolves through its own plugin discovery must be the plugin's when
    the runtime is present: a silent fallback to another platform is a failure."""
    name = "platform activation (vllm.platforms.current_platform)"
    try:
        from vllm import platforms

        resolved = type(platforms.current_platform)
        value = f"{resolved.__module__}.{resolved.__qualname__}"
    except BaseException as exc:  # the plugin's platform activated where it cannot run
        if expect != "present":  # said by `import vllm` and platform_plugin() already
            detail = f"not resolved with the runtime absent: {exc!r}"
            return _check(name, "skipped", _without_env(detail))
        return _check(
            name,
            "fail",
            _without_env(
                f"resolving vLLM's platform raised {exc!r}; {_why_not_activated(runtime)}"
            ),
            finding="plugin",
        )
    ours = any(value == p or value.startswith(p + ".") for p in packages)
    if expect != "present":
        return _check(
            name,
            "skipped",
            f"resolved {value}; the runtime {runtime or '(none)'} is absent here, so the "
            "plugin's platform is not expected to activate",
            value=value,
        )
    if ours:
        return _check(name, "pass", f"resolved {value}, the plugin's platform", value=value)
    return _check(
        name,
        "fail",
        f"resolved {value}, not a platform of the plugin ({', '.join(packages)}): a silent "
        f"fallback; {_why_not_activated(runtime)}",
        value=value,
        finding="plugin",
    )


def _why_not_activated(runtime: str) -> str:
    """What the platform_plugin() entry points and the runtime's import say here."""
    said = []
    for ep in importlib.metadata.entry_points(group="vllm.platform_plugins"):
        try:
            said.append(f"{ep.name}: platform_plugin() returned {ep.load()()!r}")
        except BaseException as exc:
            said.append(f"{ep.name}: platform_plugin() raised {_said(exc)}")
    if runtime:
        try:
            importlib.import_module(runtime)
            said.append(f"{runtime} imports")
        except BaseException as exc:
            said.append(f"import {runtime}: {_said(exc)}")
    return "; ".join(said) or "no vllm.platform_plugins entry point is installed"


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
            checks.append(_check(label, "fail", _said(exc)))
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

    files = [f for p in packages for f in _package_files(p)]
    checks = [_byte_compile(files)]
    checks.append(_import_vllm(request))
    checks.append(_platform_activation(packages, runtime, expect))
    checks += [_imports(f"import {p}", p) for p in packages]
    modules, module_checks = _plugin_modules(files, packages, runtime)
    checks += module_checks
    groups = request.get("entry_points", {})
    for group, entries in sorted(groups.items()):
        if group.startswith("vllm."):
            checks += _entry_point_checks(group, entries, expect)
    runtime_modules = [m for m in modules if m.pop("imports_runtime", None)]
    return {"checks": checks, "runtime_modules": runtime_modules, "plugin_modules": modules}


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
        result, code = run(request), 0
    except Exception:
        result, code = {"error": traceback.format_exc(limit=8)}, 3
    Path(argv[2]).write_text(json.dumps(result))
    return code


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: slow after vLLM and torch
