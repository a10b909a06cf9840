"""JSON Schema / OpenAPI helpers for the `api` contract differ (pure).

Local `$ref`s (`#/...`) are resolved inside the document that holds them;
`normal` and `branches` bring a schema into the shape the differ compares
(`allOf` merged, `nullable` and `null` branches turned into a nullability flag,
`anyOf`/`oneOf` flattened).
"""

from __future__ import annotations

import json
from typing import Any


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
