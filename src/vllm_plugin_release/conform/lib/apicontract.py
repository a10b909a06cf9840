"""API contracts (`api`): capture one in the pairing env, read, check and write contract files.

A contract is one JSON document:

    {"contract_version": 1,
     "core": {"name": "vllm", "version": "0.25.1"},
     "openapi": {...the OpenAPI document of vLLM's OpenAI-compatible app...},
     "models": {"ChatCompletionRequest": {...JSON Schema...}, ...},
     "captured_with": {...how it was produced (informative)...}}

`capture` runs `inenv/openapi.py` in a pairing env (it builds the app, no engine,
no model; its answer is read into a `Capture`, `apicapture.py`); `contract_from_capture`
turns it into a `Contract`, whose `to_json` is the document. A plain OpenAPI document is
accepted as a contract too (with no models).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from vllm_plugin_release.conform.lib.apicapture import JOB, Capture, parse_capture
from vllm_plugin_release.conform.lib.apischema import pointer
from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import BadInput

CONTRACT_VERSION = 1
DEFAULT_TASKS: tuple[str, ...] = ("generate",)
DEFAULT_TIMEOUT = 900.0

_FIX = "regenerate it with `vpr api-contract --spec FILE --out PATH`"


def _is_openapi(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("paths"), dict) and "openapi" in doc


def _from_openapi(doc: dict[str, Any]) -> dict[str, Any]:
    """A bare OpenAPI document as a contract (no models)."""
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    return {
        "contract_version": CONTRACT_VERSION,
        "core": {"name": "vllm", "version": str(info.get("version", "unknown"))},
        "openapi": doc,
        "models": {},
    }


def normalize_contract(doc: Any, where: str = "contract") -> dict[str, Any]:
    """A contract (or a bare OpenAPI document) as a contract; BadInput names what is wrong."""
    if not isinstance(doc, dict):
        raise BadInput(f"{where}: a contract must be a JSON object", hint=_FIX)
    if "contract_version" not in doc:
        if _is_openapi(doc):
            return _from_openapi(doc)
        raise BadInput(
            f"{where}: neither a contract (no 'contract_version') nor an OpenAPI document "
            "(needs 'openapi' and a 'paths' object)",
            hint=_FIX,
        )
    _check_shape(doc, where)
    models = doc.get("models", {})
    _check_refs(doc["openapi"], doc["openapi"], f"{where}: openapi")
    for name, schema in models.items():
        _check_refs(schema, schema, f"{where}: models.{name}")
    return {**doc, "models": models}


def _check_shape(doc: dict[str, Any], where: str) -> None:
    """The keys of a versioned contract (BadInput names the first one that is wrong)."""
    if doc.get("contract_version") != CONTRACT_VERSION:
        raise BadInput(
            f"{where}: contract_version = {doc.get('contract_version')!r}; this release reads "
            f"{CONTRACT_VERSION}",
            hint=_FIX,
        )
    core = doc.get("core")
    if not isinstance(core, dict) or not isinstance(core.get("version"), str):
        raise BadInput(
            f"{where}: key 'core' must be {{'name': 'vllm', 'version': '...'}}", hint=_FIX
        )
    if not _is_openapi(doc.get("openapi")):
        raise BadInput(
            f"{where}: key 'openapi' must be an OpenAPI document with 'openapi' and a "
            "'paths' object",
            hint=_FIX,
        )
    paths = doc["openapi"]["paths"]
    for path, item in paths.items():
        if not isinstance(item, dict):
            raise BadInput(f"{where}: openapi.paths[{path!r}] must be an object", hint=_FIX)
    models = doc.get("models", {})
    if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
        raise BadInput(
            f"{where}: key 'models' must map model names to JSON Schema objects", hint=_FIX
        )


def _check_refs(node: Any, root: dict[str, Any], where: str, path: str = "") -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                pointer(root, ref)
            except KeyError:
                raise BadInput(
                    f"{where}{path}: $ref {ref!r} does not resolve inside the document",
                    hint="only local references (#/...) are supported; fix or regenerate "
                    "the contract",
                )
        for key, value in node.items():
            _check_refs(value, root, where, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_refs(value, root, where, f"{path}[{i}]")


def load_contract(path: Path) -> dict[str, Any]:
    """Read and check a contract file (BadInput, exit 2, when it is not one)."""
    text = bounded.read_text(
        Path(path),
        bounded.MAX_DOCUMENT,
        "contract file",
        missing_hint="set [conformance.api] contract to a file under buildspec/contracts/, or "
        "write one with `vpr api-contract --spec FILE --out PATH`",
    )
    try:
        doc = bounded.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{path}:{exc.lineno}:{exc.colno}: contract is not valid JSON: {exc.msg}",
            hint="a contract is a JSON document written by `vpr api-contract`, or an "
            "OpenAPI document in JSON",
        )
    return normalize_contract(doc, str(path))


class CapturedWith(NamedTuple):
    """How a contract was produced (informative): the capture's tasks, platform label,
    attached endpoint plugins and where each model's schema came from."""

    tasks: list[str]
    platform: str
    endpoint_plugins: list[str]
    model_sources: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": "vllm-plugin-release (vpr api-contract)",
            "tasks": list(self.tasks),
            "platform": self.platform,
            "endpoint_plugins": list(self.endpoint_plugins),
            "model_sources": dict(self.model_sources),
        }


@dataclass(frozen=True)
class Contract:
    """A contract made from a capture: vLLM's version, its OpenAPI document and model
    schemas (open documents), and how it was captured. `to_json` is the document."""

    version: str
    openapi: dict[str, Any]
    models: dict[str, Any]
    captured_with: CapturedWith

    def to_json(self) -> dict[str, Any]:
        return {
            "contract_version": CONTRACT_VERSION,
            "core": {"name": "vllm", "version": self.version},
            "openapi": self.openapi,
            "models": self.models,
            "captured_with": self.captured_with.to_json(),
        }


def contract_from_capture(captured: Capture) -> Contract:
    """The contract for an in-env capture (deterministic: no times, no paths); BadInput
    when vLLM's load_general_plugins() raised there (no app was built to capture)."""
    if captured.crash is not None or captured.openapi is None:
        crash = captured.crash.error if captured.crash is not None else "no OpenAPI document"
        raise BadInput(
            f"vLLM {captured.vllm_version}: no API to capture in the pairing environment: "
            f"load_general_plugins() raises {crash}",
            hint="`vllm serve` fails the same way; fix the plugin's general plugin (run "
            "`vpr check api --spec FILE` for the finding)",
        )
    return Contract(
        captured.vllm_version,
        captured.openapi,
        captured.models,
        CapturedWith(
            list(captured.tasks or []),
            captured.platform.label or "",
            sorted(captured.endpoint_plugins.attached),
            dict(captured.model_sources or {}),
        ),
    )


def dump_contract(contract: dict[str, Any]) -> str:
    return json.dumps(contract, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class CaptureRequest:
    """The request of inenv/openapi.py: the app's tasks, the plugin's Platform class (None:
    discover it), whether to attach the installed endpoint plugins."""

    tasks: tuple[str, ...]
    platform_class: str | None
    endpoint_plugins: bool = True

    module: ClassVar[str] = JOB

    def to_json(self) -> dict[str, Any]:
        return {
            "tasks": list(self.tasks),
            "platform_class": self.platform_class,
            "discover_platform": True,
            "endpoint_plugins": self.endpoint_plugins,
        }

    def parse_answer(self, answer: Any) -> Capture:
        return parse_capture(answer)


def capture(
    python: Path,
    tasks: list[str] | tuple[str, ...] = DEFAULT_TASKS,
    platform_class: str | None = None,
    *,
    endpoint_plugins: bool = True,
    env: dict[str, str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> Capture:
    """Run `inenv/openapi.py` in the pairing env; its answer, read (see that module)."""
    from vllm_plugin_release.edges.envrun import run_in_env

    request = CaptureRequest(tuple(tasks), platform_class, endpoint_plugins)
    started = time.perf_counter()
    captured = run_in_env(python, request, env=env, timeout=timeout)
    captured.timings["total"] = round(time.perf_counter() - started, 3)
    return captured
