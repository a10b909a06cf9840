"""API compatibility (`api`): the served OpenAPI surface of a pairing against a client contract.

A contract is one JSON document:

    {"contract_version": 1,
     "core": {"name": "vllm", "version": "0.25.1"},
     "openapi": {...the OpenAPI document of vLLM's OpenAI-compatible app...},
     "models": {"ChatCompletionRequest": {...JSON Schema...}, ...},
     "captured_with": {...how it was produced (informative)...}}

`vpr api-contract` writes one from a pairing env (`inenv/openapi.py` builds the
app, no engine, no model); a plain OpenAPI document is accepted as a contract too
(with no models). `diff_contracts(old, new)` compares two of them and classifies
each difference from the client's side:

* request direction (what clients send): removing a field or parameter, a new
  required field or parameter, accepting fewer types or values, tighter
  constraints are breaking; vLLM's request models allow extra fields, so a removed
  request field is silently ignored, which is breaking too;
* response direction (what clients receive): removing an operation, a success
  status, a media type or a property, retyping a property, making it optional or
  nullable, removing an enum value are breaking; additions are information.

The diff is pure: `$ref`s are resolved inside each document, recursive schemas
are walked once per component pair (and direction), and a change inside a shared
component is reported once, at `Component.path`, with the first operation or
model that reaches it (`via`).
"""

from __future__ import annotations

import fnmatch
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vllm_plugin_release.conform.result import CheckResult, Evidence
from vllm_plugin_release.core.errors import BadInput

CONTRACT_VERSION = 1
DEFAULT_CONTRACT = "buildspec/contracts/vllm-0.25.1-openai.json"
DEFAULT_TASKS: tuple[str, ...] = ("generate",)
DEFAULT_TIMEOUT = 900.0
MAX_INFO_EVIDENCE = 300

Direction = Literal["request", "response"]

# kind -> what it means (docs, `vpr api-diff`); whether a change is breaking is
# decided per change (a tightened constraint breaks requests, not responses).
KINDS: dict[str, str] = {
    "removed-path": "a path clients call is gone",
    "removed-operation": "a method on a path is gone",
    "removed-success-status": "a 2xx response status is gone",
    "removed-media-type": "a media type of a success response is gone",
    "removed-request-media-type": "a request body media type is no longer accepted",
    "removed-response-property": "a response property is gone",
    "retyped-response-property": "a response value may now have a type clients do not expect",
    "response-property-optional": "a required response property became optional",
    "response-property-nullable": "a response property may now be null",
    "new-required-request-field": "a request field (or the body) is newly required",
    "new-required-parameter": "a parameter is newly required",
    "removed-request-field": "a request field is gone (extra fields are ignored: silent)",
    "removed-parameter": "a parameter is gone",
    "retyped-request-field": "a request value of a type clients send is no longer accepted",
    "removed-enum-value": "an enum value is gone",
    "tightened-constraint": "a constraint became stricter",
    "removed-model": "an exported request/response model is gone",
    # additive or neutral (information)
    "added-path": "a new path",
    "added-operation": "a new method on a path",
    "added-status": "a new response status",
    "removed-error-status": "a non-2xx response status is no longer declared",
    "added-media-type": "a new media type",
    "added-response-property": "a new response property",
    "added-request-field": "a new optional request field",
    "added-parameter": "a new optional parameter",
    "added-enum-value": "a new enum value",
    "added-model": "a new exported model",
    "loosened-constraint": "a constraint became looser",
    "widened-request-type": "a request value accepts more types",
    "narrowed-response-type": "a response value has fewer possible types",
    "response-property-required": "an optional response property became required",
    "response-property-not-nullable": "a response property is no longer nullable",
    "request-field-optional": "a required request field became optional",
    "changed-default": "a request field's default changed",
    "deprecated": "a field or operation is now deprecated",
}

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


@dataclass(frozen=True)
class Change:
    """One difference between two contracts, from the client's side."""

    kind: str
    location: str
    breaking: bool
    detail: str
    via: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "location": self.location,
            "breaking": self.breaking,
            "detail": self.detail,
        }
        if self.via:
            out["via"] = self.via
        return out

    def line(self) -> str:
        tag = "BREAKING" if self.breaking else "info"
        via = f" (via {self.via})" if self.via and self.via != self.location else ""
        return f"[{tag}] {self.kind} {self.location}{via}: {self.detail}"


# ---------------------------------------------------------------------------
# Contract documents


def _is_openapi(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("paths"), dict) and "openapi" in doc


def normalize_contract(doc: Any, where: str = "contract") -> dict[str, Any]:
    """A contract (or a bare OpenAPI document) as a contract; BadInput names what is wrong."""
    fix = "regenerate it with `vpr api-contract --spec FILE --out PATH`"
    if not isinstance(doc, dict):
        raise BadInput(f"{where}: a contract must be a JSON object", hint=fix)
    if "contract_version" not in doc:
        if _is_openapi(doc):
            info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
            return {
                "contract_version": CONTRACT_VERSION,
                "core": {"name": "vllm", "version": str(info.get("version", "unknown"))},
                "openapi": doc,
                "models": {},
            }
        raise BadInput(
            f"{where}: neither a contract (no 'contract_version') nor an OpenAPI document "
            "(needs 'openapi' and a 'paths' object)",
            hint=fix,
        )
    if doc.get("contract_version") != CONTRACT_VERSION:
        raise BadInput(
            f"{where}: contract_version = {doc.get('contract_version')!r}; this release reads "
            f"{CONTRACT_VERSION}",
            hint=fix,
        )
    core = doc.get("core")
    if not isinstance(core, dict) or not isinstance(core.get("version"), str):
        raise BadInput(
            f"{where}: key 'core' must be {{'name': 'vllm', 'version': '...'}}", hint=fix
        )
    if not _is_openapi(doc.get("openapi")):
        raise BadInput(
            f"{where}: key 'openapi' must be an OpenAPI document with 'openapi' and a "
            "'paths' object",
            hint=fix,
        )
    paths = doc["openapi"]["paths"]
    for path, item in paths.items():
        if not isinstance(item, dict):
            raise BadInput(f"{where}: openapi.paths[{path!r}] must be an object", hint=fix)
    models = doc.get("models", {})
    if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
        raise BadInput(
            f"{where}: key 'models' must map model names to JSON Schema objects", hint=fix
        )
    _check_refs(doc["openapi"], doc["openapi"], f"{where}: openapi")
    for name, schema in models.items():
        _check_refs(schema, schema, f"{where}: models.{name}")
    return {**doc, "models": models}


def _check_refs(node: Any, root: dict[str, Any], where: str, path: str = "") -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                _pointer(root, ref)
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
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(
            f"{path}: contract file not found",
            hint="set [conformance.api] contract to a file under buildspec/contracts/, or "
            "write one with `vpr api-contract --spec FILE --out PATH`",
        )
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read contract: {exc}")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{path}:{exc.lineno}:{exc.colno}: contract is not valid JSON: {exc.msg}",
            hint="a contract is a JSON document written by `vpr api-contract`, or an "
            "OpenAPI document in JSON",
        )
    return normalize_contract(doc, str(path))


def contract_from_capture(captured: dict[str, Any]) -> dict[str, Any]:
    """The contract document for an in-env capture (deterministic: no times, no paths)."""
    platform = captured.get("platform", {})
    plugins = captured.get("endpoint_plugins", {})
    return {
        "contract_version": CONTRACT_VERSION,
        "core": {"name": "vllm", "version": captured["vllm_version"]},
        "openapi": captured["openapi"],
        "models": captured["models"],
        "captured_with": {
            "tool": "vllm-plugin-release (vpr api-contract)",
            "tasks": list(captured.get("tasks", [])),
            "platform": platform.get("label", ""),
            "endpoint_plugins": sorted(plugins.get("attached", [])),
            "model_sources": captured.get("model_sources", {}),
        },
    }


def dump_contract(contract: dict[str, Any]) -> str:
    return json.dumps(contract, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------
# Schema helpers


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(root: Any, ref: str) -> Any:
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


def _ref_name(ref: str) -> str:
    return _unescape(ref.rstrip("/").rsplit("/", 1)[-1])


_SCALAR_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return _SCALAR_TYPES.get(type(value), "any")


def _as_dict(schema: Any) -> dict[str, Any]:
    if schema is True or schema is None:
        return {}
    if schema is False:
        return {"not": {}}
    return schema if isinstance(schema, dict) else {}


def _merge_allof(schema: dict[str, Any], root: Any) -> dict[str, Any]:
    parts = schema.get("allOf")
    if not isinstance(parts, list):
        return schema
    rest = {k: v for k, v in schema.items() if k != "allOf"}
    structural = {"type", "properties", "items", "anyOf", "oneOf", "enum", "const"}
    if len(parts) == 1 and not structural & set(rest):
        return {**rest, **_as_dict(parts[0])}
    merged: dict[str, Any] = dict(rest)
    for part in parts:
        part = _as_dict(part)
        while "$ref" in part:
            part = {
                **_as_dict(_pointer(root, part["$ref"])),
                **{k: v for k, v in part.items() if k != "$ref"},
            }
        part = _merge_allof(part, root)
        for key, value in part.items():
            if key == "properties":
                merged.setdefault("properties", {}).update(value)
            elif key == "required":
                merged["required"] = sorted({*merged.get("required", []), *value})
            else:
                merged.setdefault(key, value)
    return merged


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {str(x) for x in t}
    if "const" in schema:
        return {_value_type(schema["const"])}
    if isinstance(schema.get("enum"), list):
        return {_value_type(v) for v in schema["enum"]}
    if "properties" in schema or "additionalProperties" in schema:
        return {"object"}
    if "items" in schema or "prefixItems" in schema:
        return {"array"}
    return {"any"}


def _enum_values(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    return None


def _accepts(types: set[str], t: str) -> bool:
    return "any" in types or t in types or (t == "integer" and "number" in types)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


_UPPER = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
_LOWER = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")
_OTHER = ("pattern", "multipleOf", "format")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# ---------------------------------------------------------------------------
# The differ


@dataclass
class _Side:
    schema: Any
    root: Any


@dataclass
class _Differ:
    changes: list[Change] = field(default_factory=list)
    seen: set[tuple[Any, ...]] = field(default_factory=set)

    def add(self, kind: str, loc: str, breaking: bool, detail: str, via: str) -> None:
        self.changes.append(Change(kind, loc, breaking, detail, via))

    # -- schemas ---------------------------------------------------------

    def _normal(self, schema: Any, root: Any) -> dict[str, Any]:
        s = _merge_allof(_as_dict(schema), root)
        if s.get("nullable") is True and "anyOf" not in s:
            rest = {k: v for k, v in s.items() if k != "nullable"}
            s = {"anyOf": [rest, {"type": "null"}]}
        return s

    def _branches(self, schema: Any, root: Any, depth: int = 0) -> tuple[list[dict], bool]:
        """Flatten anyOf/oneOf (and a ref to a bare union) into branches + nullability."""
        s = self._normal(schema, root)
        union = s.get("anyOf") if isinstance(s.get("anyOf"), list) else s.get("oneOf")
        if isinstance(union, list) and depth < 8:
            out: list[dict] = []
            nullable = False
            for sub in union:
                sub_b, sub_null = self._branches(sub, root, depth + 1)
                out.extend(sub_b)
                nullable = nullable or sub_null
            return out, nullable
        if "$ref" in s and depth < 8:
            try:
                target = self._normal(_pointer(root, s["$ref"]), root)
            except KeyError:
                target = {}
            if isinstance(target.get("anyOf") or target.get("oneOf"), list) and not target.get(
                "properties"
            ):
                return self._branches(target, root, depth + 1)
            return [s], False
        types = _types(s)
        values = _enum_values(s)
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

    def schema(
        self, old: _Side, new: _Side, direction: Direction, loc: str, via: str, depth: int = 0
    ) -> None:
        if depth > 64:
            return
        ob, onull = self._branches(old.schema, old.root)
        nb, nnull = self._branches(new.schema, new.root)
        req = direction == "request"
        if onull and not nnull and ob:
            if req:
                self.add("retyped-request-field", loc, True, "no longer accepts null", via)
            else:
                self.add("response-property-not-nullable", loc, False, "no longer null", via)
        if nnull and not onull and nb:
            if req:
                self.add("widened-request-type", loc, False, "now also accepts null", via)
            else:
                self.add(
                    "response-property-nullable",
                    loc,
                    True,
                    "may now be null (was never null)",
                    via,
                )
        if not ob or not nb:
            return
        if len(ob) == 1 and len(nb) == 1:
            self._single(_Side(ob[0], old.root), _Side(nb[0], new.root), direction, loc, via, depth)
        else:
            self._union(ob, nb, old.root, new.root, direction, loc, via, depth)

    def _union(
        self,
        ob: list[dict],
        nb: list[dict],
        oroot: Any,
        nroot: Any,
        direction: Direction,
        loc: str,
        via: str,
        depth: int,
    ) -> None:
        req = direction == "request"

        def split(branches: list[dict]) -> tuple[dict[str, dict], list[dict], list[dict]]:
            refs: dict[str, dict] = {}
            enums: list[dict] = []
            typed: list[dict] = []
            for b in branches:
                if "$ref" in b:
                    refs[_ref_name(b["$ref"])] = b
                elif _enum_values(b) is not None:
                    enums.append(b)
                else:
                    typed.append(b)
            return refs, enums, typed

        orefs, oenums, otyped = split(ob)
        nrefs, nenums, ntyped = split(nb)

        # enum-like branches: one value set
        ovals = {_key(v): v for b in oenums for v in (_enum_values(b) or [])}
        nvals = {_key(v): v for b in nenums for v in (_enum_values(b) or [])}
        otyped_types = set().union(*(_types(b) for b in otyped)) if otyped else set()
        ntyped_types = set().union(*(_types(b) for b in ntyped)) if ntyped else set()
        if oenums and nenums:
            self._enum_diff(ovals, nvals, direction, loc, via)
        elif oenums:
            # the literals went; still fine if a plain type on the new side takes them
            if all(_accepts(ntyped_types, _value_type(v)) for v in ovals.values()):
                self.add(
                    "loosened-constraint",
                    loc,
                    False,
                    f"no longer restricted to {', '.join(sorted(ovals))}",
                    via,
                )
            else:
                self._enum_diff(ovals, {}, direction, loc, via)
        elif nenums and not all(_accepts(otyped_types, _value_type(v)) for v in nvals.values()):
            if req:
                self.add(
                    "widened-request-type",
                    loc,
                    False,
                    f"now also accepts {', '.join(sorted(nvals))}",
                    via,
                )
            else:
                self.add(
                    "retyped-response-property",
                    loc,
                    True,
                    f"may now be {', '.join(sorted(nvals))}",
                    via,
                )

        # referenced components: by name, then a lone rename
        for name in sorted(set(orefs) & set(nrefs)):
            self._single(
                _Side(orefs[name], oroot), _Side(nrefs[name], nroot), direction, loc, via, depth
            )
        lost_refs = sorted(set(orefs) - set(nrefs))
        new_refs = sorted(set(nrefs) - set(orefs))
        if len(lost_refs) == 1 and len(new_refs) == 1:
            self._single(
                _Side(orefs[lost_refs[0]], oroot),
                _Side(nrefs[new_refs[0]], nroot),
                direction,
                loc,
                via,
                depth,
            )
            lost_refs, new_refs = [], []
        for name in lost_refs:
            if req:
                self.add("retyped-request-field", loc, True, f"no longer accepts {name}", via)
            else:
                self.add("narrowed-response-type", loc, False, f"no longer {name}", via)
        for name in new_refs:
            if req:
                self.add("widened-request-type", loc, False, f"now also accepts {name}", via)
            else:
                self.add("retyped-response-property", loc, True, f"may now be {name}", via)

        # typed branches: by type set
        def by_type(branches: list[dict]) -> dict[str, dict]:
            return {",".join(sorted(_types(b))): b for b in branches}

        ot, nt = by_type(otyped), by_type(ntyped)
        for key in sorted(set(ot) & set(nt)):
            self._single(_Side(ot[key], oroot), _Side(nt[key], nroot), direction, loc, via, depth)
        for key in sorted(set(ot) - set(nt)):
            if req and not all(_accepts(ntyped_types, t) for t in key.split(",")):
                self.add("retyped-request-field", loc, True, f"no longer accepts {key}", via)
            elif not req:
                self.add("narrowed-response-type", loc, False, f"no longer {key}", via)
        for key in sorted(set(nt) - set(ot)):
            if not req and not all(_accepts(otyped_types, t) for t in key.split(",")):
                self.add("retyped-response-property", loc, True, f"may now be {key}", via)
            elif req:
                self.add("widened-request-type", loc, False, f"now also accepts {key}", via)

    def _enum_diff(
        self,
        ovals: dict[str, Any],
        nvals: dict[str, Any],
        direction: Direction,
        loc: str,
        via: str,
    ) -> None:
        removed = sorted(set(ovals) - set(nvals))
        added = sorted(set(nvals) - set(ovals))
        if removed:
            what = "no longer accepted" if direction == "request" else "no longer produced"
            self.add("removed-enum-value", loc, True, f"{', '.join(removed)} {what}", via)
        if added:
            self.add("added-enum-value", loc, False, f"{', '.join(added)} added", via)

    def _single(
        self, old: _Side, new: _Side, direction: Direction, loc: str, via: str, depth: int
    ) -> None:
        o = self._normal(old.schema, old.root)
        n = self._normal(new.schema, new.root)
        if "$ref" in o or "$ref" in n:
            oref, nref = o.get("$ref"), n.get("$ref")
            key = (direction, id(old.root), oref, id(new.root), nref)
            if oref and nref:
                if key in self.seen:
                    return
                self.seen.add(key)
                oname, nname = _ref_name(oref), _ref_name(nref)
                loc = oname if oname == nname else f"{oname}->{nname}"
                via = via or loc
            o2 = self._resolve(o, old.root)
            n2 = self._resolve(n, new.root)
            self.schema(_Side(o2, old.root), _Side(n2, new.root), direction, loc, via, depth + 1)
            return
        if isinstance(o.get("anyOf") or o.get("oneOf"), list) or isinstance(
            n.get("anyOf") or n.get("oneOf"), list
        ):
            self.schema(_Side(o, old.root), _Side(n, new.root), direction, loc, via, depth + 1)
            return
        req = direction == "request"
        ot, nt = _types(o), _types(n)
        if "any" in nt and "any" not in ot:
            if req:
                self.add("widened-request-type", loc, False, "now accepts any value", via)
            else:
                self.add(
                    "retyped-response-property",
                    loc,
                    True,
                    f"no longer declared (any value); was {', '.join(sorted(ot))}",
                    via,
                )
            return
        if "any" in ot and "any" not in nt:
            if req:
                self.add(
                    "retyped-request-field",
                    loc,
                    True,
                    f"was any value, now only {', '.join(sorted(nt))}",
                    via,
                )
            else:
                self.add(
                    "narrowed-response-type",
                    loc,
                    False,
                    f"now declared as {', '.join(sorted(nt))}",
                    via,
                )
            return
        if "any" in ot:  # both unconstrained
            return
        if req:
            lost = sorted(t for t in ot if not _accepts(nt, t))
            if lost:
                self.add(
                    "retyped-request-field",
                    loc,
                    True,
                    f"no longer accepts {', '.join(lost)} (now {', '.join(sorted(nt))})",
                    via,
                )
            gained = sorted(t for t in nt if not _accepts(ot, t))
            if gained:
                self.add(
                    "widened-request-type", loc, False, f"now also accepts {', '.join(gained)}", via
                )
        else:
            gained = sorted(t for t in nt if not _accepts(ot, t))
            if gained:
                self.add(
                    "retyped-response-property",
                    loc,
                    True,
                    f"may now be {', '.join(gained)} (was {', '.join(sorted(ot))})",
                    via,
                )
            lost = sorted(t for t in ot if not _accepts(nt, t))
            if lost:
                self.add("narrowed-response-type", loc, False, f"no longer {', '.join(lost)}", via)
        if not ot & nt and not any(_accepts(nt, t) for t in ot):
            return  # retyped: nothing further in common

        ov, nv = _enum_values(o), _enum_values(n)
        if ov is not None and nv is not None:
            self._enum_diff({_key(v): v for v in ov}, {_key(v): v for v in nv}, direction, loc, via)
        elif ov is None and nv is not None:
            self.add(
                "tightened-constraint",
                loc,
                req,
                f"now restricted to {', '.join(sorted(_key(v) for v in nv))}",
                via,
            )
        elif ov is not None and nv is None:
            self.add(
                "loosened-constraint",
                loc,
                False,
                f"no longer restricted to {', '.join(sorted(_key(v) for v in ov))}",
                via,
            )

        self._constraints(o, n, direction, loc, via)
        if n.get("deprecated") and not o.get("deprecated"):
            self.add("deprecated", loc, False, "now deprecated", via)
        if "object" in ot and "object" in nt:
            self._object(_Side(o, old.root), _Side(n, new.root), direction, loc, via, depth)
        if "array" in ot and "array" in nt and ("items" in o or "items" in n):
            self.schema(
                _Side(o.get("items", {}), old.root),
                _Side(n.get("items", {}), new.root),
                direction,
                f"{loc}[]",
                via,
                depth + 1,
            )

    def _resolve(self, s: dict[str, Any], root: Any) -> dict[str, Any]:
        seen = 0
        while "$ref" in s and seen < 32:
            siblings = {k: v for k, v in s.items() if k != "$ref"}
            s = {**self._normal(_pointer(root, s["$ref"]), root), **siblings}
            seen += 1
        return s

    def _constraints(
        self, o: dict[str, Any], n: dict[str, Any], direction: Direction, loc: str, via: str
    ) -> None:
        req = direction == "request"

        def report(tight: bool, text: str) -> None:
            if tight:
                self.add("tightened-constraint", loc, req, text, via)
            else:
                self.add("loosened-constraint", loc, False, text, via)

        for keys, stricter in ((_UPPER, lambda a, b: b < a), (_LOWER, lambda a, b: b > a)):
            for k in keys:
                a, b = o.get(k), n.get(k)
                if a == b:
                    continue
                na, nb = _number(a), _number(b)
                if a is None and b is not None:
                    report(True, f"{k} {b!r} added")
                elif a is not None and b is None:
                    report(False, f"{k} {a!r} removed")
                elif na is not None and nb is not None:
                    report(stricter(na, nb), f"{k} {a!r} -> {b!r}")
                else:
                    report(bool(b), f"{k} {a!r} -> {b!r}")
        for k in _OTHER:
            a, b = o.get(k), n.get(k)
            if a == b:
                continue
            if a is None:
                report(True, f"{k} {b!r} added")
            elif b is None:
                report(False, f"{k} {a!r} removed")
            else:
                report(True, f"{k} {a!r} -> {b!r}")
        if bool(n.get("uniqueItems")) != bool(o.get("uniqueItems")):
            report(bool(n.get("uniqueItems")), f"uniqueItems -> {bool(n.get('uniqueItems'))}")

    def _object(
        self, old: _Side, new: _Side, direction: Direction, loc: str, via: str, depth: int
    ) -> None:
        o, n = old.schema, new.schema
        req = direction == "request"
        oprops: dict[str, Any] = o.get("properties") or {}
        nprops: dict[str, Any] = n.get("properties") or {}
        oreq, nreq = set(o.get("required") or []), set(n.get("required") or [])
        extra_ok = n.get("additionalProperties", True) is not False
        for name in sorted(oprops):
            child = f"{loc}.{name}"
            if name not in nprops:
                if req:
                    detail = (
                        "field removed; extra fields are allowed, so requests that send it are "
                        "silently ignored"
                        if extra_ok
                        else "field removed; requests that send it are now rejected"
                    )
                    self.add("removed-request-field", child, True, detail, via)
                else:
                    self.add("removed-response-property", child, True, "property removed", via)
                continue
            if req:
                if name in nreq and name not in oreq:
                    self.add("new-required-request-field", child, True, "now required", via)
                elif name in oreq and name not in nreq:
                    self.add("request-field-optional", child, False, "no longer required", via)
                od, nd = _as_dict(oprops[name]), _as_dict(nprops[name])
                if ("default" in od or "default" in nd) and _key(od.get("default")) != _key(
                    nd.get("default")
                ):
                    self.add(
                        "changed-default",
                        child,
                        False,
                        f"default {_key(od.get('default'))} -> {_key(nd.get('default'))}",
                        via,
                    )
            else:
                if name in oreq and name not in nreq:
                    self.add(
                        "response-property-optional",
                        child,
                        True,
                        "no longer required (may be absent)",
                        via,
                    )
                elif name in nreq and name not in oreq:
                    self.add("response-property-required", child, False, "now required", via)
            self.schema(
                _Side(oprops[name], old.root),
                _Side(nprops[name], new.root),
                direction,
                child,
                via,
                depth + 1,
            )
        for name in sorted(set(nprops) - set(oprops)):
            child = f"{loc}.{name}"
            if req and name in nreq:
                self.add("new-required-request-field", child, True, "new required field", via)
            elif req:
                self.add("added-request-field", child, False, "new optional field", via)
            else:
                self.add("added-response-property", child, False, "new property", via)
        oap, nap = o.get("additionalProperties"), n.get("additionalProperties")
        if req and oap is not False and nap is False:
            self.add("tightened-constraint", loc, True, "extra fields are now rejected", via)
        elif oap is False and nap not in (False, None):
            self.add("loosened-constraint", loc, False, "extra fields now allowed", via)
        if isinstance(oap, dict) and isinstance(nap, dict):
            self.schema(
                _Side(oap, old.root), _Side(nap, new.root), direction, f"{loc}{{*}}", via, depth + 1
            )

    # -- OpenAPI ---------------------------------------------------------

    def openapi(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        opaths, npaths = old.get("paths", {}), new.get("paths", {})
        for path in sorted(opaths):
            if path not in npaths:
                ops = [m.upper() for m in METHODS if m in opaths[path]]
                self.add("removed-path", path, True, f"path removed ({', '.join(ops)})", path)
                continue
            oitem, nitem = opaths[path], npaths[path]
            for method in METHODS:
                if method not in oitem:
                    continue
                op = f"{method.upper()} {path}"
                if method not in nitem:
                    self.add("removed-operation", op, True, "operation removed", op)
                    continue
                self._operation(old, new, oitem, nitem, method, op)
            for method in METHODS:
                if method in nitem and method not in oitem:
                    op = f"{method.upper()} {path}"
                    self.add("added-operation", op, False, "new operation", op)
        for path in sorted(set(npaths) - set(opaths)):
            ops = [m.upper() for m in METHODS if m in npaths[path]]
            self.add("added-path", path, False, f"new path ({', '.join(ops)})", path)

    def _deref(self, node: Any, root: Any) -> dict[str, Any]:
        node = _as_dict(node)
        for _ in range(16):
            if "$ref" not in node:
                break
            node = _as_dict(_pointer(root, node["$ref"]))
        return node

    def _params(self, item: dict, op: dict, root: Any) -> dict[tuple[str, str], dict]:
        out: dict[tuple[str, str], dict] = {}
        for p in [*(item.get("parameters") or []), *(op.get("parameters") or [])]:
            p = self._deref(p, root)
            if "name" in p:
                out[(str(p.get("in", "query")), str(p["name"]))] = p
        return out

    def _operation(
        self, oroot: dict, nroot: dict, oitem: dict, nitem: dict, method: str, op: str
    ) -> None:
        o, n = self._deref(oitem[method], oroot), self._deref(nitem[method], nroot)
        if n.get("deprecated") and not o.get("deprecated"):
            self.add("deprecated", op, False, "operation now deprecated", op)
        # parameters
        opar, npar = self._params(oitem, o, oroot), self._params(nitem, n, nroot)
        for key in sorted(opar):
            where, name = key
            loc = f"{op} {where} parameter {name}"
            if key not in npar:
                self.add("removed-parameter", loc, True, "parameter removed", op)
                continue
            if npar[key].get("required") and not opar[key].get("required"):
                self.add("new-required-parameter", loc, True, "now required", op)
            self.schema(
                _Side(opar[key].get("schema", {}), oroot),
                _Side(npar[key].get("schema", {}), nroot),
                "request",
                loc,
                op,
            )
        for key in sorted(set(npar) - set(opar)):
            where, name = key
            loc = f"{op} {where} parameter {name}"
            if npar[key].get("required"):
                self.add("new-required-parameter", loc, True, "new required parameter", op)
            else:
                self.add("added-parameter", loc, False, "new optional parameter", op)
        # request body
        obody = self._deref(o.get("requestBody"), oroot) if "requestBody" in o else None
        nbody = self._deref(n.get("requestBody"), nroot) if "requestBody" in n else None
        loc = f"{op} request body"
        if obody is not None and nbody is None:
            self.add("removed-request-field", loc, True, "request body no longer read", op)
        elif nbody is not None and obody is None:
            if nbody.get("required"):
                self.add("new-required-request-field", loc, True, "request body now required", op)
            else:
                self.add("added-request-field", loc, False, "optional request body", op)
        elif obody is not None and nbody is not None:
            if nbody.get("required") and not obody.get("required"):
                self.add("new-required-request-field", loc, True, "request body now required", op)
            ocont, ncont = obody.get("content") or {}, nbody.get("content") or {}
            for media in sorted(ocont):
                if media not in ncont:
                    self.add(
                        "removed-request-media-type",
                        f"{loc} {media}",
                        True,
                        "media type no longer accepted",
                        op,
                    )
                    continue
                self.schema(
                    _Side(_as_dict(ocont[media]).get("schema", {}), oroot),
                    _Side(_as_dict(ncont[media]).get("schema", {}), nroot),
                    "request",
                    f"{loc} {media}",
                    op,
                )
            for media in sorted(set(ncont) - set(ocont)):
                self.add("added-media-type", f"{loc} {media}", False, "new media type", op)
        # responses
        oresp, nresp = o.get("responses") or {}, n.get("responses") or {}
        for status in sorted(oresp):
            loc = f"{op} {status}"
            success = str(status).startswith("2")
            if status not in nresp:
                if success:
                    self.add("removed-success-status", loc, True, "success status removed", op)
                else:
                    self.add("removed-error-status", loc, False, "status no longer declared", op)
                continue
            ocont = self._deref(oresp[status], oroot).get("content") or {}
            ncont = self._deref(nresp[status], nroot).get("content") or {}
            for media in sorted(ocont):
                if media not in ncont:
                    self.add(
                        "removed-media-type" if success else "removed-error-status",
                        f"{loc} {media}",
                        success,
                        "media type removed",
                        op,
                    )
                    continue
                self.schema(
                    _Side(_as_dict(ocont[media]).get("schema", {}), oroot),
                    _Side(_as_dict(ncont[media]).get("schema", {}), nroot),
                    "response",
                    f"{loc} {media}",
                    op,
                )
            for media in sorted(set(ncont) - set(ocont)):
                self.add("added-media-type", f"{loc} {media}", False, "new media type", op)
        for status in sorted(set(nresp) - set(oresp)):
            self.add("added-status", f"{op} {status}", False, "new response status", op)

    def models(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        for name in sorted(old):
            via = f"model {name}"
            if name not in new:
                self.add("removed-model", name, True, "model no longer exported", via)
                continue
            direction: Direction = "request" if name.endswith("Request") else "response"
            self.schema(
                _Side(old[name], old[name]), _Side(new[name], new[name]), direction, name, via
            )
        for name in sorted(set(new) - set(old)):
            self.add("added-model", name, False, "new model", f"model {name}")


def diff_schemas(old: Any, new: Any, direction: Direction, location: str = "$") -> list[Change]:
    """Differences between two JSON Schemas (each resolving its own `$ref`s)."""
    d = _Differ()
    d.schema(_Side(old, old), _Side(new, new), direction, location, location)
    return _finish(d.changes)


def diff_contracts(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every difference from contract `old` to `new` (normalized contracts or OpenAPI docs)."""
    old = normalize_contract(old, "old contract")
    new = normalize_contract(new, "new contract")
    d = _Differ()
    d.openapi(old["openapi"], new["openapi"])
    d.models(old.get("models", {}), new.get("models", {}))
    return _finish(d.changes)


def _finish(changes: list[Change]) -> list[Change]:
    unique: dict[tuple[str, str, bool, str], Change] = {}
    for c in changes:
        unique.setdefault((c.kind, c.location, c.breaking, c.detail), c)
    return sorted(unique.values(), key=lambda c: (not c.breaking, c.location, c.kind, c.detail))


# ---------------------------------------------------------------------------
# Spec keys and the allow list

API_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "API compatibility check (`api`): the pairing's OpenAPI surface against a "
    "stored client contract.",
    "additionalProperties": False,
    "properties": {
        "contract": {
            "type": "string",
            "description": "Client contract (JSON, written by `vpr api-contract`, or an OpenAPI "
            "document), relative to the repository root.",
            "default": DEFAULT_CONTRACT,
        },
        "tasks": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": 'vLLM supported tasks the app is built for, e.g. ["generate"].',
            "default": list(DEFAULT_TASKS),
        },
        "endpoint_plugins": {
            "type": "boolean",
            "description": "Attach the installed `vllm.endpoint_plugins` entry points.",
            "default": True,
        },
        "platform_class": {
            "type": "string",
            "description": "The plugin's Platform class (package.module:Class); default: the "
            "one its `vllm.platform_plugins` entry point activates, else vLLM's CpuPlatform "
            "as a labelled stand-in.",
        },
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Seconds the in-env capture may take.",
            "default": DEFAULT_TIMEOUT,
        },
        "allow": {
            "type": "array",
            "description": "Known breaking changes accepted, each with a reason.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["location", "reason"],
                "properties": {
                    "kind": {"type": "string", "description": "Change kind (any if omitted)."},
                    "location": {
                        "type": "string",
                        "description": "Change location; shell-style wildcards (*, ?) allowed.",
                    },
                    "reason": {"type": "string", "minLength": 1, "description": "Why."},
                },
            },
            "default": [],
        },
    },
}


@dataclass(frozen=True)
class Allow:
    location: str
    reason: str
    kind: str | None = None

    def matches(self, change: Change) -> bool:
        if self.kind and self.kind != change.kind:
            return False
        return fnmatch.fnmatchcase(change.location, self.location)


def api_config(spec: Any) -> dict[str, Any]:
    """`[conformance.api]` with defaults, checked (BadInput names the key)."""
    where = f"{spec.path}: [conformance.api]"
    raw = (spec.conformance or {}).get("api", {})
    if not isinstance(raw, dict):
        raise BadInput(f"{where} must be a table")
    known = set(API_SCHEMA["properties"])
    unknown = sorted(set(raw) - known)
    if unknown:
        raise BadInput(
            f"{where}: unknown key {unknown[0]!r}; expected one of: {', '.join(sorted(known))}"
        )
    contract = raw.get("contract", DEFAULT_CONTRACT)
    if not isinstance(contract, str) or not contract:
        raise BadInput(f"{where}: contract must be a file path, e.g. {DEFAULT_CONTRACT!r}")
    tasks = raw.get("tasks", list(DEFAULT_TASKS))
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
        raise BadInput(f'{where}: tasks must be a non-empty list of strings, e.g. ["generate"]')
    plugins = raw.get("endpoint_plugins", True)
    if not isinstance(plugins, bool):
        raise BadInput(f"{where}: endpoint_plugins must be true or false")
    platform_class = raw.get("platform_class")
    if platform_class is not None and not isinstance(platform_class, str):
        raise BadInput(f"{where}: platform_class must be a string (package.module:Class)")
    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise BadInput(f"{where}: timeout must be a positive number of seconds")
    allow_raw = raw.get("allow", [])
    if not isinstance(allow_raw, list):
        raise BadInput(f"{where}: allow must be an array of {{location, reason, kind}} tables")
    allow: list[Allow] = []
    for i, entry in enumerate(allow_raw):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("location"), str)
            or not isinstance(entry.get("reason"), str)
            or not entry.get("reason", "").strip()
            or not isinstance(entry.get("kind", ""), str)
            or set(entry) - {"location", "reason", "kind"}
        ):
            raise BadInput(
                f'{where}: allow[{i}] must be {{location = "...", reason = "..."}} with an '
                "optional kind; location may use * wildcards"
            )
        if entry.get("kind") and entry["kind"] not in KINDS:
            raise BadInput(
                f"{where}: allow[{i}].kind {entry['kind']!r} is not a change kind; one of: "
                + ", ".join(sorted(KINDS))
            )
        allow.append(Allow(entry["location"], entry["reason"], entry.get("kind") or None))
    return {
        "contract": contract,
        "tasks": tasks,
        "endpoint_plugins": plugins,
        "platform_class": platform_class,
        "timeout": float(timeout),
        "allow": allow,
    }


def split_allowed(
    changes: list[Change], allow: list[Allow]
) -> tuple[list[Change], list[tuple[Change, Allow]], list[Change]]:
    """(blocking breaking changes, accepted breaking changes with their entry, info)."""
    blocking: list[Change] = []
    accepted: list[tuple[Change, Allow]] = []
    info: list[Change] = []
    for c in changes:
        if not c.breaking:
            info.append(c)
            continue
        entry = next((a for a in allow if a.matches(c)), None)
        if entry is None:
            blocking.append(c)
        else:
            accepted.append((c, entry))
    return blocking, accepted, info


# ---------------------------------------------------------------------------
# Capture (in the pairing env) and the check


def capture(
    python: Path,
    tasks: list[str] | tuple[str, ...] = DEFAULT_TASKS,
    platform_class: str | None = None,
    *,
    endpoint_plugins: bool = True,
    env: dict[str, str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """Run `inenv/openapi.py` in the pairing env; its result (see that module)."""
    from vllm_plugin_release.edges.envrun import run_in_env

    request = {
        "tasks": list(tasks),
        "platform_class": platform_class,
        "discover_platform": True,
        "endpoint_plugins": endpoint_plugins,
    }
    started = time.perf_counter()
    result = run_in_env(python, "openapi", request, env=env, timeout=timeout)
    result.setdefault("timings", {})["total"] = round(time.perf_counter() - started, 3)
    return result


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _origins(
    contract: dict[str, Any], new: dict[str, Any], captured: dict[str, Any]
) -> dict[tuple[str, str, str], str] | None:
    """Which changes vLLM core makes on its own (the app built without endpoint plugins)."""
    core_doc = captured.get("core_openapi")
    if not isinstance(core_doc, dict):
        return None
    core = {**new, "openapi": core_doc}
    return {(c.kind, c.location, c.detail): "vLLM core" for c in diff_contracts(contract, core)}


def evaluate(
    contract: dict[str, Any],
    captured: dict[str, Any],
    *,
    contract_file: str,
    allow: list[Allow] | None = None,
) -> CheckResult:
    """The `api` verdict for a capture against a contract (pure).

    fail: a breaking change not accepted by `allow`; warn: breaking changes, all
    accepted; pass: none. Additive changes are listed as information either way.
    When endpoint plugins were attached, each change says whether vLLM core makes it
    on its own or it comes from the endpoint plugins.
    """
    new = contract_from_capture(captured)
    changes = diff_contracts(contract, new)
    blocking, accepted, info = split_allowed(changes, allow or [])
    origins = _origins(contract, new, captured)

    def origin(c: Change) -> str | None:
        if origins is None:
            return None
        return origins.get((c.kind, c.location, c.detail), "endpoint plugins")

    def entry(c: Change, reason: str = "") -> dict[str, Any]:
        out = c.to_json()
        if origins is not None:
            out["origin"] = origin(c)
        if reason:
            out["accepted"] = reason
        return out

    def note(c: Change, reason: str = "") -> Evidence:
        text = c.line()
        if origins is not None and origin(c) != "vLLM core":
            text += " [from endpoint plugins]"
        if reason:
            text += f" -- accepted: {reason}"
        return Evidence(note=text, file=contract_file, value=entry(c, reason), source="api")

    old_v, new_v = contract["core"]["version"], new["core"]["version"]
    platform = captured.get("platform", {})
    plugins = captured.get("endpoint_plugins", {})
    counts = captured.get("counts", {})
    evidence = [
        Evidence(
            note=f"current platform: {platform.get('label', '?')}",
            value=platform.get("used"),
            source="env",
        )
    ]
    evidence += [
        Evidence(note=n, source="env")
        for n in captured.get("notes", [])
        if not n.startswith("current platform:")
    ]
    if plugins.get("discovered"):
        text = (
            f"endpoint plugins: attached {plugins.get('attached') or 'none'} of "
            f"{plugins['discovered']} ({plugins.get('loader', 'not requested')})"
        )
    else:
        text = "endpoint plugins: none installed (entry-point group vllm.endpoint_plugins)"
    evidence.append(Evidence(note=text, value=plugins.get("attached"), source="plugin"))
    evidence.append(
        Evidence(
            note=f"vLLM {new_v} app for tasks {captured.get('tasks')}: "
            f"{counts.get('paths')} paths, {counts.get('schemas')} component schemas, "
            f"{len(new['models'])} models; built in "
            f"{captured.get('timings', {}).get('total', '?')} s (no engine, no model)",
            value=captured.get("timings"),
            source="env",
        )
    )
    evidence += [note(c) for c in blocking]
    evidence += [note(c, a.reason) for c, a in accepted]
    evidence += [note(c) for c in info[:MAX_INFO_EVIDENCE]]
    if len(info) > MAX_INFO_EVIDENCE:
        evidence.append(
            Evidence(
                note=f"{len(info) - MAX_INFO_EVIDENCE} more additive changes in details.changes",
                source="api",
            )
        )

    versus = f"vLLM {new_v} vs the {contract['core'].get('name', 'vllm')} {old_v} contract"
    if blocking:
        status = "fail"
        summary = f"{len(blocking)} breaking change(s) in {versus} ({contract_file})"
        if origins is not None:
            from_plugins = sum(origin(c) != "vLLM core" for c in blocking)
            summary += f", {from_plugins} from endpoint plugins"
        summary += f"; {len(info)} additive"
    elif accepted:
        status = "warn"
        summary = (
            f"no unaccepted breaking change in {versus}; {len(accepted)} accepted by "
            f"[conformance.api] allow, {len(info)} additive"
        )
    else:
        status = "pass"
        summary = f"no breaking change in {versus}; {len(info)} additive"
    if platform.get("used") == "stand-in":
        summary += " (platform: CpuPlatform stand-in)"
    return CheckResult(
        name="api",
        status=status,
        summary=summary,
        evidence=evidence,
        threshold={"breaking": 0, "contract": contract_file, "allowed": len(allow or [])},
        details={
            "contract": {"file": contract_file, "core": contract["core"]},
            "captured": {
                "vllm_version": new_v,
                "tasks": captured.get("tasks"),
                "counts": counts,
                "timings": captured.get("timings"),
                "platform": platform,
                "endpoint_plugins": plugins,
                "model_sources": captured.get("model_sources"),
            },
            "breaking": len(blocking),
            "accepted": len(accepted),
            "additive": len(info),
            "changes": [
                *(entry(c) for c in blocking),
                *(entry(c, a.reason) for c, a in accepted),
                *(entry(c) for c in info),
            ],
        },
    )


def check(spec: Any, python: Path, platform_class: str | None) -> CheckResult:
    """The `api` check: build the pairing's app in its env and diff it against the contract."""
    cfg = api_config(spec)
    contract_path = spec.resolve(cfg["contract"])
    contract = load_contract(contract_path)
    captured = capture(
        python,
        cfg["tasks"],
        platform_class or cfg["platform_class"],
        endpoint_plugins=cfg["endpoint_plugins"],
        timeout=cfg["timeout"],
    )
    return evaluate(
        contract,
        captured,
        contract_file=_rel(contract_path, spec.root),
        allow=cfg["allow"],
    )
