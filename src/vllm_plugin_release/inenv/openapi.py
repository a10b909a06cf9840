"""Inside the pairing environment: vLLM's OpenAI-compatible app (built with no engine and
no model), its OpenAPI document and model schemas, for the API contract."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
import traceback
import typing
from importlib.metadata import distributions, entry_points
from pathlib import Path
from typing import Any

ENDPOINT_GROUP = "vllm.endpoint_plugins"
PLATFORM_GROUP = "vllm.platform_plugins"
STAND_IN = "vllm.platforms.cpu.CpuPlatform"

# The client-facing request and response models whose JSON Schemas are exported.
# The completion endpoints declare their 200 responses as event streams without a
# schema, so these are the only machine-readable description of those bodies.
MODELS: tuple[str, ...] = (
    "ChatCompletionRequest",
    "ChatCompletionResponse",
    "ChatCompletionStreamResponse",
    "CompletionRequest",
    "CompletionResponse",
    "CompletionStreamResponse",
    "ModelList",
    "ErrorResponse",
)

# Where vLLM keeps them (newest layout first).
MODEL_MODULES: tuple[str, ...] = (
    "vllm.entrypoints.openai.chat_completion.protocol",
    "vllm.entrypoints.openai.completion.protocol",
    "vllm.entrypoints.openai.engine.protocol",
    "vllm.entrypoints.openai.protocol",
)


class BadRequest(Exception):
    """The request cannot be served as given (exit 2)."""


def _prepare_plugin_env(attach: bool) -> dict[str, Any]:
    """VLLM_PLUGINS with and without the endpoint plugins; the core-only one is set, as that
    app is built first (its document tells vLLM's changes from an endpoint plugin's)."""
    discovered = sorted({ep.name for ep in entry_points(group=ENDPOINT_GROUP)})
    info: dict[str, Any] = {"discovered": discovered, "attached": [], "requested": attach}
    current = os.environ.get("VLLM_PLUGINS")
    if current is None:
        eps = (ep for dist in distributions() for ep in dist.entry_points)
        base = sorted({ep.name for ep in eps if ep.group.startswith("vllm.")})
    else:
        base = list(filter(None, current.split(",")))
    core_only = [n for n in base if n not in discovered]
    if current is not None or discovered:
        os.environ["VLLM_PLUGINS"] = ",".join(core_only)
    info["_with_plugins"] = ",".join(sorted({*core_only, *discovered}))
    return info


def _supported_tasks() -> set[str]:
    try:
        from vllm.tasks import SupportedTask
    except ImportError:
        return set()

    def literals(tp: Any) -> set[str]:
        args = typing.get_args(tp)
        return set().union(*({a} if isinstance(a, str) else literals(a) for a in args))

    return literals(SupportedTask)


def _import_class(path: str) -> type:
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    if not module or not name:
        raise BadRequest(f"platform_class {path!r} is not a class path; use 'package.module:Class'")
    mod = importlib.import_module(module)
    try:
        return getattr(mod, name)
    except AttributeError:
        raise BadRequest(f"platform_class {path!r}: module {module!r} has no attribute {name!r}")


def _discover_platform() -> tuple[str | None, list[str]]:
    """Ask the installed out-of-tree platform plugins; the one that activates wins."""
    notes: list[str] = []
    active: list[tuple[str, str]] = []
    for ep in sorted(entry_points(group=PLATFORM_GROUP), key=lambda e: e.name):
        try:
            qualname = ep.load()()
        except Exception as exc:  # a plugin whose runtime is missing may raise
            notes.append(f"platform plugin {ep.name!r} did not activate: {exc!r}")
            continue
        if qualname:
            active.append((ep.name, qualname))
        else:
            notes.append(f"platform plugin {ep.name!r} did not activate (returned None)")
    if len(active) > 1:
        raise BadRequest(
            "more than one platform plugin activates: "
            + ", ".join(f"{n} -> {q}" for n, q in active)
            + "; pass platform_class explicitly"
        )
    return (active[0][1] if active else None), notes


def _set_platform(platform_class: str | None, discover: bool) -> dict[str, Any]:
    import vllm.platforms as platforms

    notes: list[str] = []
    source = "request"
    if platform_class is None and discover:
        platform_class, notes = _discover_platform()
        source = "entry point"
    info: dict[str, Any] = {"requested": platform_class, "notes": notes}
    platform = None
    if platform_class:
        top = platform_class.split(":")[0].split(".")[0]
        try:
            platform = _import_class(platform_class)()
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] == top:
                raise BadRequest(
                    f"platform_class {platform_class!r}: module {exc.name!r} is not installed "
                    "in this environment; check the plugin's Platform class path"
                )
            notes.append(f"{platform_class} did not import: {exc}")
        except BadRequest:
            raise
        except Exception as exc:  # the vendor runtime is absent or broken
            notes.append(f"{platform_class} did not load: {type(exc).__name__}: {exc}")
    if platform is not None:
        info.update(
            used="plugin",
            cls=f"{type(platform).__module__}.{type(platform).__qualname__}",
            source=source,
            label=f"plugin Platform {platform_class}",
        )
    else:
        from vllm.platforms.cpu import CpuPlatform

        platform = CpuPlatform()
        why = "no plugin Platform given" if not platform_class else "plugin Platform unavailable"
        info.update(
            used="stand-in",
            cls=STAND_IN,
            source="stand-in",
            label=f"stand-in {STAND_IN} ({why}; the HTTP routes do not depend on it)",
        )
    # PEP 562 has no module __setattr__: set both the cache and the attribute.
    platforms._current_platform = platform
    platforms.current_platform = platform
    return info


def _parse_server_args() -> Any:
    from vllm.entrypoints.openai.cli_args import make_arg_parser

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older layout
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]

    parser = make_arg_parser(FlexibleArgumentParser())
    return parser.parse_args([])


def _attach_ourselves(app: Any, tasks: tuple[str, ...], info: dict[str, Any]) -> None:
    """Attach endpoint plugins for a vLLM that has no loader for them."""
    for ep in sorted(entry_points(group=ENDPOINT_GROUP), key=lambda e: e.name):
        plugin = ep.load()()
        required = getattr(plugin, "required_tasks", None)
        if required is not None and not set(required) & set(tasks):
            info.setdefault("skipped", []).append(ep.name)
            continue
        plugin.attach_router(app)
        info["attached"].append(getattr(plugin, "name", ep.name))
    info["loader"] = "vpr (this vLLM has no endpoint plugin loader)"


def _export_models(names: list[str]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    models: dict[str, Any] = {}
    sources: dict[str, str] = {}
    missing: list[str] = []
    modules = []
    for path in MODEL_MODULES:
        with contextlib.suppress(ImportError):
            modules.append(importlib.import_module(path))
    for name in names:
        for mod in modules:
            cls = getattr(mod, name, None)
            if cls is not None and hasattr(cls, "model_json_schema"):
                # Request models are validated (what clients send); the rest serialized.
                mode = "validation" if name.endswith("Request") else "serialization"
                models[name] = cls.model_json_schema(mode=mode)
                sources[name] = f"{cls.__module__}.{cls.__qualname__} ({mode})"
                break
        else:
            missing.append(name)
    return models, sources, missing


def _read_request(request: dict[str, Any]) -> tuple[list[str], str | None, list[str]]:
    """The tasks, platform class and model names asked for; BadRequest when malformed."""
    tasks = request.get("tasks")
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
        raise BadRequest('tasks must be a non-empty list of task names, e.g. ["generate"]')
    platform_class = request.get("platform_class")
    if platform_class is not None and not isinstance(platform_class, str):
        raise BadRequest("platform_class must be a string or null")
    names = request.get("models", list(MODELS))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise BadRequest("models must be a list of model class names")
    return tasks, platform_class, names


def _check_tasks(tasks: list[str], vllm_version: str) -> None:
    known = _supported_tasks()
    unknown = [t for t in tasks if known and t not in known]
    if unknown:
        raise BadRequest(
            f"tasks: unknown task(s) {unknown}; vLLM {vllm_version} supports: "
            + ", ".join(sorted(known))
        )


def _build_app(args: Any, tasks: list[str], plugins: dict[str, Any]) -> tuple[Any, Any]:
    """The app, with endpoint plugins when asked for, and the core-only document (or None)."""
    import vllm.plugins as vllm_plugins
    from vllm.entrypoints.openai.api_server import build_app

    app = build_app(args, tuple(tasks))
    core_document = None
    with_plugins = plugins.pop("_with_plugins")
    if plugins["requested"] and plugins["discovered"]:
        core_document = app.openapi()
        if hasattr(vllm_plugins, "load_endpoint_plugins"):
            os.environ["VLLM_PLUGINS"] = with_plugins
            app = build_app(args, tuple(tasks))
            attached = getattr(app.state, "endpoint_plugins", [])
            plugins["attached"] = [getattr(p, "name", type(p).__name__) for p in attached]
            plugins["loader"] = "vllm (VLLM_PLUGINS allowlist set by vpr)"
        else:
            app = build_app(args, tuple(tasks))
            _attach_ourselves(app, tuple(tasks), plugins)
    return app, core_document


def _shown(filename: str) -> str:
    """A file as its path under the sys.path entry that holds it (no host paths)."""
    best = ""
    for entry in sys.path:
        root = os.path.join(os.path.abspath(entry or "."), "")
        if filename.startswith(root) and len(root) > len(best):
            best = root
    return filename[len(best) :] if best else os.path.basename(filename)


def _general_plugins_crash() -> dict[str, Any] | None:
    """Call vLLM's load_general_plugins() as `vllm serve` does; what it raised, if it did."""
    try:
        from vllm.plugins import load_general_plugins
    except ImportError:
        return None
    try:
        load_general_plugins()
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        shown = [f"{_shown(f.filename)}:{f.lineno} in {f.name}" for f in frames[-6:]]
        modules = {_shown(f.filename).rsplit(".", 1)[0].replace("/", ".") for f in frames}
        eps = sorted(
            f"{ep.name} = {ep.value}"
            for ep in entry_points(group="vllm.general_plugins")
            if any(m == ep.module or m.startswith(ep.module + ".") for m in modules)
        )
        return {"error": f"{type(exc).__name__}: {exc}", "frames": shown, "entry_points": eps}
    return None


def _timed(timings: dict[str, float], key: str, call: Any, *args: Any) -> Any:
    t = time.perf_counter()
    out = call(*args)
    timings[key] = time.perf_counter() - t
    return out


def run(request: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    tasks, platform_class, names = _read_request(request)
    plugins = _prepare_plugin_env(bool(request.get("endpoint_plugins", True)))

    import vllm

    _check_tasks(tasks, vllm.__version__)
    timings: dict[str, float] = {"import": time.perf_counter() - t0}

    platform = _set_platform(platform_class, bool(request.get("discover_platform", True)))
    notes = [f"current platform: {platform['label']}", *platform["notes"]]
    shown = {k: v for k, v in platform.items() if k != "notes"}
    crash = _general_plugins_crash()
    if crash is not None:
        return {
            "vllm_version": vllm.__version__,
            "platform": shown,
            "notes": notes,
            "general_plugins_crash": crash,
        }
    args = _timed(timings, "parse_args", _parse_server_args)
    app, core_document = _timed(timings, "build_app", _build_app, args, tasks, plugins)
    document = _timed(timings, "openapi", app.openapi)
    models, sources, missing = _timed(timings, "models", _export_models, names)
    if missing:
        notes.append(f"models not found in vLLM {vllm.__version__}: {', '.join(missing)}")
    return {
        "vllm_version": vllm.__version__,
        "tasks": tasks,
        "openapi": json.loads(json.dumps(document, default=str)),
        "core_openapi": (
            json.loads(json.dumps(core_document, default=str)) if core_document else None
        ),
        "models": models,
        "model_sources": sources,
        "missing_models": missing,
        "platform": shown,
        "endpoint_plugins": plugins,
        "notes": notes,
        "counts": {
            "paths": len(document.get("paths", {})),
            "schemas": len(document.get("components", {}).get("schemas", {})),
        },
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m vllm_plugin_release.inenv.openapi REQUEST OUT", file=sys.stderr)
        return 2
    out = Path(argv[2])
    try:
        request = json.loads(Path(argv[1]).read_text())
        if not isinstance(request, dict):
            raise BadRequest("request must be a JSON object")
        result = run(request)
    except BadRequest as exc:
        out.write_text(json.dumps({"error": str(exc)}))
        return 2
    out.write_text(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: slow after vLLM and torch
