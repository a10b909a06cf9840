"""API contracts (`api`): vLLM's OpenAPI document and model schemas, captured in the pairing
env, read, checked and written as one JSON document; and the JSON Schema helpers they share."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from vllm_plugin_release.core import bounded, jobanswer
from vllm_plugin_release.core.errors import BadInput, field_shown

JOB = "openapi"


class CapturedPlatform(NamedTuple):
    """vLLM's current platform while the app was built: its label and which was used."""

    label: str | None
    used: str | None
    raw: dict[str, Any]


class EndpointPlugins(NamedTuple):
    """The `vllm.endpoint_plugins` installed (discovered), attached, and by which loader."""

    discovered: list[str] | None
    attached: list[str] | None
    loader: str | None
    raw: dict[str, Any]


class Counts(NamedTuple):
    """How many paths and component schemas the captured OpenAPI document holds."""

    paths: int | None
    schemas: int | None
    raw: dict[str, Any]


class PluginsCrash(NamedTuple):
    """vLLM's load_general_plugins() raised: the error, the last frames, the entry points."""

    error: str
    frames: list[str]
    entry_points: list[str]
    raw: dict[str, Any]


@dataclass(frozen=True)
class Capture:
    """inenv/openapi.py's answer. `openapi` is None only when `crash` says why."""

    vllm_version: str
    openapi: dict[str, Any] | None  # the app's OpenAPI document (open)
    models: dict[str, Any]  # model name -> its JSON Schema (open)
    core_openapi: dict[str, Any] | None  # the app without endpoint plugins (open)
    tasks: list[str] | None
    model_sources: dict[str, str] | None  # model name -> the class its schema came from
    platform: CapturedPlatform
    endpoint_plugins: EndpointPlugins
    notes: list[str]
    counts: Counts
    timings: dict[str, float]
    crash: PluginsCrash | None = None


class _Reader(NamedTuple):
    """Names what is wrong: an answer of the job, or a recorded contract's file."""

    where: str
    hint: str

    def bad(self, key: str, value: object, wanted: str) -> BadInput:
        return BadInput(
            f"{self.where}: {key!r} is {field_shown(value)}, expected {wanted}", hint=self.hint
        )

    def table(self, value: object, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.bad(key, value, "an object")
        return value

    def text(self, value: object, key: str, optional: bool = True) -> str | None:
        if (value is not None or not optional) and not isinstance(value, str):
            raise self.bad(key, value, "text")
        return value

    def texts(self, value: object, key: str) -> list[str] | None:
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            raise self.bad(key, value, "a list of text")
        return value

    def count(self, value: object, key: str) -> int | None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.bad(key, value, "a count")
        return value


ANSWER = _Reader(
    f"inenv {JOB}: the answer",
    f"the pairing environment's answer is malformed; {jobanswer.RERUN[JOB]}",
)


def parse_capture(answer: Any, reader: _Reader = ANSWER) -> Capture:
    """The capture from inenv/openapi.py's answer (or a recorded contract's, `reader`
    naming its file); BadInput naming the key that is not what that module writes."""
    data = reader.table(answer, "(the answer)")
    crash = _crash(data.get("general_plugins_crash"), reader)
    openapi, models = data.get("openapi"), data.get("models")
    if crash is None:
        if not isinstance(openapi, dict) or not isinstance(openapi.get("paths"), dict):
            raise reader.bad("openapi", openapi, "an OpenAPI document with a 'paths' object")
        models = reader.table(models, "models")
        for name, schema in models.items():
            reader.table(schema, f"models.{name}")
    core = data.get("core_openapi")
    sources = data.get("model_sources")
    if sources is not None:
        for name, source in reader.table(sources, "model_sources").items():
            reader.text(source, f"model_sources.{name}", optional=False)
    timings = reader.table(data.get("timings") or {}, "timings")
    text, texts, count = _Reader.text, _Reader.texts, _Reader.count
    return Capture(
        vllm_version=str(reader.text(data.get("vllm_version"), "vllm_version", optional=False)),
        openapi=openapi if crash is None else None,
        models=models if isinstance(models, dict) else {},
        core_openapi=core if isinstance(core, dict) else None,  # else: origins unknown
        tasks=reader.texts(data.get("tasks"), "tasks"),
        model_sources=sources,
        platform=CapturedPlatform(*_part(reader, data, "platform", label=text, used=text)),
        endpoint_plugins=EndpointPlugins(
            *_part(reader, data, "endpoint_plugins", discovered=texts, attached=texts, loader=text)
        ),
        notes=reader.texts(data.get("notes"), "notes") or [],
        counts=Counts(*_part(reader, data, "counts", paths=count, schemas=count)),
        timings=dict(timings),
        crash=crash,
    )


def _part(reader: _Reader, data: dict[str, Any], key: str, **fields: Any) -> list[Any]:
    """The object at `key` (absent: empty): each field as `fields` reads it, then the object."""
    raw = reader.table({} if data.get(key) is None else data[key], key)
    return [*(read(reader, raw.get(name), f"{key}.{name}") for name, read in fields.items()), raw]


def _crash(value: object, reader: _Reader) -> PluginsCrash | None:
    if not value:
        return None
    raw = reader.table(value, "general_plugins_crash")
    return PluginsCrash(
        str(reader.text(raw.get("error"), "general_plugins_crash.error", optional=False)),
        reader.texts(raw.get("frames"), "general_plugins_crash.frames") or [],
        reader.texts(raw.get("entry_points"), "general_plugins_crash.entry_points") or [],
        raw,
    )


def recorded_reader(file: str) -> _Reader:
    """Names a recorded contract's `captured_with` keys (`api.check_recorded`)."""
    return _Reader(f"{file}: captured_with", "write it again with `vpr api-contract`")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def pointer(root: Any, ref: str) -> Any:
    """The node a local `$ref` (`#/a/b`) points at in `root`; KeyError when it does not."""
    if not ref.startswith("#"):
        raise KeyError(ref)
    node = root
    for token in filter(None, ref[1:].split("/")):
        token = _unescape(token)
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise KeyError(ref)
    return node


def ref_name(ref: str) -> str:
    return _unescape(ref.rstrip("/").rsplit("/", 1)[-1])


_SCALAR_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return _SCALAR_TYPES.get(type(value), "any")


def as_dict(schema: Any) -> dict[str, Any]:
    if schema is True or schema is None:
        return {}
    if schema is False:
        return {"not": {}}
    return schema if isinstance(schema, dict) else {}


def merge_allof(schema: dict[str, Any], root: Any) -> dict[str, Any]:
    parts = schema.get("allOf")
    if not isinstance(parts, list):
        return schema
    rest = {k: v for k, v in schema.items() if k != "allOf"}
    structural = {"type", "properties", "items", "anyOf", "oneOf", "enum", "const"}
    if len(parts) == 1 and not structural & set(rest):
        return {**rest, **as_dict(parts[0])}
    merged: dict[str, Any] = dict(rest)
    for part in parts:
        part = as_dict(part)
        while "$ref" in part:
            part = {
                **as_dict(pointer(root, part["$ref"])),
                **{k: v for k, v in part.items() if k != "$ref"},
            }
        part = merge_allof(part, root)
        for key, value in part.items():
            if key == "properties":
                merged.setdefault("properties", {}).update(value)
            elif key == "required":
                merged["required"] = sorted({*merged.get("required", []), *value})
            else:
                merged.setdefault(key, value)
    return merged


def types_of(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {str(x) for x in t}
    if "const" in schema:
        return {value_type(schema["const"])}
    if isinstance(schema.get("enum"), list):
        return {value_type(v) for v in schema["enum"]}
    if "properties" in schema or "additionalProperties" in schema:
        return {"object"}
    if "items" in schema or "prefixItems" in schema:
        return {"array"}
    return {"any"}


def enum_values(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    return None


def accepts(types: set[str], t: str) -> bool:
    return "any" in types or t in types or (t == "integer" and "number" in types)


def canonical(value: Any) -> str:
    """A value as sorted JSON (enum values and defaults are compared and shown this way)."""
    return json.dumps(value, sort_keys=True)


UPPER_BOUNDS = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
LOWER_BOUNDS = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")
OTHER_CONSTRAINTS = ("pattern", "multipleOf", "format")


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# ---------------------------------------------------------------------------
# Normal forms the differ compares


def normal(schema: Any, root: Any) -> dict[str, Any]:
    s = merge_allof(as_dict(schema), root)
    if s.get("nullable") is True and "anyOf" not in s:
        rest = {k: v for k, v in s.items() if k != "nullable"}
        s = {"anyOf": [rest, {"type": "null"}]}
    return s


def branches(schema: Any, root: Any, depth: int = 0) -> tuple[list[dict], bool]:
    """Flatten anyOf/oneOf (and a ref to a bare union) into branches + nullability."""
    s = normal(schema, root)
    union = s.get("anyOf") if isinstance(s.get("anyOf"), list) else s.get("oneOf")
    if isinstance(union, list) and depth < 8:
        out: list[dict] = []
        nullable = False
        for sub in union:
            sub_b, sub_null = branches(sub, root, depth + 1)
            out.extend(sub_b)
            nullable = nullable or sub_null
        return out, nullable
    if "$ref" in s and depth < 8:
        try:
            target = normal(pointer(root, s["$ref"]), root)
        except KeyError:
            target = {}
        if isinstance(target.get("anyOf") or target.get("oneOf"), list) and not target.get(
            "properties"
        ):
            return branches(target, root, depth + 1)
        return [s], False
    return _null_split(s)


def _null_split(s: dict[str, Any]) -> tuple[list[dict], bool]:
    """A single branch without its null value or type (and whether it had one)."""
    types = types_of(s)
    values = enum_values(s)
    if values is not None and None in values:
        rest = [v for v in values if v is not None]
        if not rest:
            return [], True
        s = {**s, "enum": rest}
        s.pop("const", None)
        return [s], True
    if "null" in types:
        remaining = sorted(types - {"null"})
        if not remaining:
            return [], True
        s = {**s, "type": remaining[0] if len(remaining) == 1 else remaining}
        return [s], True
    return [s], False


def resolve(s: dict[str, Any], root: Any) -> dict[str, Any]:
    """Follow a schema's `$ref` chain (siblings of a `$ref` win over the target's keys)."""
    seen = 0
    while "$ref" in s and seen < 32:
        siblings = {k: v for k, v in s.items() if k != "$ref"}
        s = {**normal(pointer(root, s["$ref"]), root), **siblings}
        seen += 1
    return s


def deref(node: Any, root: Any) -> dict[str, Any]:
    """An OpenAPI object (operation, parameter, body, response) behind its `$ref`s."""
    node = as_dict(node)
    for _ in range(16):
        if "$ref" not in node:
            break
        node = as_dict(pointer(root, node["$ref"]))
    return node


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


def contract_from_capture(captured: Capture) -> dict[str, Any]:
    """The contract document for an in-env capture (deterministic: no times, no paths);
    BadInput when vLLM's load_general_plugins() raised there (no app was built to capture)."""
    if captured.crash is not None or captured.openapi is None:
        crash = captured.crash.error if captured.crash is not None else "no OpenAPI document"
        raise BadInput(
            f"vLLM {captured.vllm_version}: no API to capture in the pairing environment: "
            f"load_general_plugins() raises {crash}",
            hint="`vllm serve` fails the same way; fix the plugin's general plugin (run "
            "`vpr check api --spec FILE` for the finding)",
        )
    return {
        "contract_version": CONTRACT_VERSION,
        "core": {"name": "vllm", "version": captured.vllm_version},
        "openapi": captured.openapi,
        "models": captured.models,
        "captured_with": {  # how it was produced (informative)
            "tool": "vllm-plugin-release (vpr api-contract)",
            "tasks": list(captured.tasks or []),
            "platform": captured.platform.label or "",
            "endpoint_plugins": sorted(captured.endpoint_plugins.attached),
            "model_sources": dict(captured.model_sources or {}),
        },
    }


def dump_contract(contract: dict[str, Any]) -> str:
    return json.dumps(contract, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class CaptureRequest:
    """The request of inenv/openapi.py (`platform_class` None: discover it)."""

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
