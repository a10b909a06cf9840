"""Reading, validating and editing a buildspec file; every error names the file, line and
key and what is expected (exit 2). tomllib reads where there is one, tomlkit on 3.10 and
for edits (it keeps comments and order)."""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from packaging.version import InvalidVersion, Version

from vllm_plugin_release.buildspec.model import Spec, from_data, locate
from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.bounded import packaged_json_object
from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:
    import tomlkit

_format_checker = FormatChecker()


@_format_checker.checks("pep440", raises=InvalidVersion)
def _is_pep440(value: object) -> bool:
    if isinstance(value, str):
        Version(value)
    return True


# Control characters (C0, DEL, C1) and line/paragraph separators: never in a URL or path.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Free-text keys, where a newline is harmless; every other string is a name, URL or path.
_FREE_TEXT = frozenset({"description", "why"})


@_format_checker.checks("uri", raises=ValueError)
def _is_uri(value: object) -> bool:
    """http(s)://host[/path] or file:///path; nothing that a shell or git could misread."""
    if not isinstance(value, str):
        return True
    if _CONTROL.search(value) or any(c.isspace() for c in value):
        raise ValueError("contains whitespace or control characters")
    parts = urlsplit(value)
    if parts.scheme in ("http", "https") and parts.hostname:
        return True
    if parts.scheme == "file" and parts.path.startswith("/") and parts.netloc in ("", "localhost"):
        return True
    raise ValueError("expected http(s)://HOST/... or file:///PATH")


_VALIDATORS: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    """One compiled validator per schema object (the registry hands in the same one)."""
    held = _VALIDATORS.get(id(schema))
    if held is None or held[0] is not schema:
        held = (schema, Draft202012Validator(schema, format_checker=_format_checker))
        _VALIDATORS[id(schema)] = held
    return held[1]


def _where(file: Path, text: str, path: tuple[str, ...]) -> str:
    line = locate(text, path)
    return f"{file}:{line}" if line else str(file)


def _table_name(path: tuple[str, ...]) -> str:
    return "[" + ".".join(path) + "]" if path else "top level"


_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
_FORMATS = {
    "pep440": "a PEP 440 version (e.g. 0.26.0)",
    "uri": "a URL: expected http(s)://HOST/PATH or file:///PATH",
}


def schema_errors(validator: Draft202012Validator, data: object) -> list[ValidationError]:
    """Every error of `data` against the validator's schema, by key path, each `narrow`ed."""
    errors = validator.iter_errors(data)
    return [narrow(e) for e in sorted(errors, key=lambda e: list(map(str, e.absolute_path)))]


def narrow(error: ValidationError) -> ValidationError:
    """An `anyOf` error (a table, or an array of such tables) as the error of the form the
    value has: its first error there, so the message names the key inside."""
    while error.validator == "anyOf" and error.context:
        fits = [e for e in error.context if not (e.validator == "type" and not e.relative_path)]
        if not fits:
            break
        error = min(fits, key=lambda e: list(map(str, e.absolute_path)))
    return error


def _describe(error: ValidationError, prefix: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str]:
    """(key path, message) for one schema error, in words a person can act on."""
    error = narrow(error)
    path = prefix + tuple(str(p) for p in error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        key = extra[0] if extra else "?"
        return (*path, key), (
            f"unknown key {key!r} in {_table_name(path)}; expected one of: {', '.join(allowed)}"
        )
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        key = missing[0] if missing else "?"
        desc = schema.get("properties", {}).get(key, {}).get("description", "")
        return path, f"missing key {key!r} in {_table_name(path)}" + (f": {desc}" if desc else "")
    desc = schema.get("description", "")
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        kind = error.instance.get("kind")
        kinds = [
            s.get("properties", {}).get("kind", {}).get("const") for s in error.validator_value
        ]
        for sub, sub_kind in zip(error.validator_value, kinds):
            if sub_kind == kind:
                sub_errors = sorted(
                    Draft202012Validator(sub, format_checker=_format_checker).iter_errors(
                        error.instance
                    ),
                    key=lambda e: list(e.absolute_path),
                )
                if sub_errors:
                    return _describe(sub_errors[0], path)
        return (*path, "kind"), f"'kind' must be one of {kinds}, got {kind!r}"
    key = path[-1] if path else "value"
    got = error.instance
    if "propertyNames" in error.absolute_schema_path:  # a key of a free-form table
        why = "is refused (the pipeline owns it)" if error.validator == "not" else "is invalid"
        return (*path, str(got)), f"{_table_name(path)}: key {got!r} {why}: expected {desc}"
    if error.validator == "format" and error.validator_value in _FORMATS:
        return path, f"{key} = {got!r} is not {_FORMATS[error.validator_value]}"
    if error.validator == "const":
        return path, f"{key} must be {error.validator_value!r}, got {got!r}"
    bound = _BOUNDS.get(str(error.validator))
    if bound:
        return path, f"{key} = {got!r}: must be {bound} {error.validator_value}" + (
            f" ({desc})" if desc else ""
        )
    if error.validator == "enum":
        return path, f"{key} must be one of {error.validator_value}, got {got!r}"
    if error.validator == "type":
        return path, f"{key} must be of type {error.validator_value}, got {got!r}" + (
            f" ({desc})" if desc else ""
        )
    return path, f"{key} = {got!r}: {desc or error.message}"


def _value_problems(value: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
    """Values no schema keyword refuses: nan/inf, control characters, a leading `-`."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _value_problems(v, (*path, str(k)))]
    if isinstance(value, list):
        # A list item is located by its key (locate() knows keys, not indexes).
        return [p for v in value for p in _value_problems(v, path)]
    key = path[-1] if path else "value"
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, f"{key} = {value!r}: must be a finite number")]
    if not isinstance(value, str) or key in _FREE_TEXT:
        return []
    if _CONTROL.search(value):
        return [(path, f"{key} = {value!r}: control characters and newlines are not allowed")]
    if key in ("url", "index", "store") and value.startswith("-"):
        return [(path, f"{key} = {value!r}: a URL or path must not start with '-'")]
    return []


# A `[conformance.request_mix] features` table, its shape checked by the schema
# (`replay/mix.FEATURES_SCHEMA`): per key one variant table (share and options, text
# or numbers) or an array of them.
FeatureOption = str | int | float
VariantTable = Mapping[str, FeatureOption]
FeaturesTable = Mapping[str, VariantTable | Sequence[VariantTable]]


class MixPlan(TypedDict, total=False):
    """A `plans.NAME` table of a request mix: what it is, its features over the base's."""

    description: str
    features: FeaturesTable


def share_problems(
    features: FeaturesTable | None, plans: Mapping[str, MixPlan] | None
) -> list[tuple[tuple[str, ...], str]]:
    """(key path in the request mix, message) for each key whose exclusive variants' shares
    add up past 1, in the mix's features and each plan's (their shapes valid)."""
    tables = [(("features",), features)]
    tables += [
        (("plans", n, "features"), p.get("features")) for n, p in sorted((plans or {}).items())
    ]
    found = []
    for at, table in tables:
        for key, value in (table or {}).items():
            if not isinstance(value, list):
                continue
            shares = [float(v.get("share", 0)) for v in value if isinstance(v, Mapping)]
            if sum(shares) > 1 + 1e-9:
                listed = " + ".join(f"{s:g}" for s in shares)
                found.append(
                    (
                        (*at, key),
                        f"the variants of {key!r} are exclusive (a request gets at most one), "
                        f"but their shares add up to {sum(shares):g} ({listed}); lower them to "
                        "at most 1 in all",
                    )
                )
    return found


def _cross_key_problems(
    data: dict[str, Any], file: Path, text: str
) -> list[tuple[tuple[str, ...], str]]:
    """Rules between keys that a schema cannot state (checked once the shapes are valid)."""
    build_python = data.get("build", {}).get("python")
    mix = (data.get("conformance") or {}).get("request_mix") or {}
    problems = [
        (("conformance", "request_mix", *k), m)
        for k, m in share_problems(mix.get("features"), mix.get("plans"))
    ]
    torch = data.get("build", {}).get("torch")
    if isinstance(torch, dict) and build_python not in torch:
        problems.append(
            (
                ("build", "torch"),
                f"[build] torch names no version for [build] python = {build_python!r} "
                f'(it has {", ".join(sorted(torch))}); add `"{build_python}" = VERSION`',
            )
        )
    approval = data.get("core", {}).get("api_approval")
    version = data.get("core", {}).get("version")
    if isinstance(approval, dict) and approval.get("to") != version:
        problems.append(
            (
                ("core", "api_approval", "to"),
                f"[core.api_approval] approves the move to {approval.get('to')!r}, but [core] "
                f"version is {version!r}: an approval belongs to the bump that wrote it; run "
                "`vpr bump` to move the core (it asks for an approval where one is needed)",
            )
        )
    loadable = (data.get("runtime") or {}).get("python")
    if loadable and build_python not in loadable:
        # A pairing is certified for a Python the vendor runtime loads, or not at all.
        problems.append(
            (
                ("build", "python"),
                f"[build] python = {build_python!r} is not a Python the vendor runtime loads: "
                f"[runtime] python = {loadable!r} ({_where(file, text, ('runtime', 'python'))}); "
                f"set [build] python to one of {', '.join(loadable)} (and its base_image, "
                "constraints), then `vpr lock --spec FILE`",
            )
        )
    return problems


def validate(data: dict[str, Any], file: Path, text: str, schema: dict[str, Any]) -> None:
    """Every error of `data` against `schema`, each naming file:line and key (BadInput)."""
    found = [_describe(error) for error in schema_errors(_validator(schema), data)]
    found += _value_problems(data, ())
    if not found:
        found = _cross_key_problems(data, file, text)
    if not found:
        return
    lines = [f"{_where(file, text, path)}: {message}" for path, message in found]
    raise BadInput(
        "invalid buildspec:\n  " + "\n  ".join(lines),
        hint="fix the keys named above; `vpr spec schema` prints every key, docs/buildspec.md "
        "explains them",
    )


def _plain(value: Any) -> Any:
    """tomlkit containers -> plain Python data."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def _existing_specs(missing: Path) -> str:
    """The hint for a missing spec: the specs next to it (or in ./buildspec/), by name."""
    for folder in (missing.parent, Path("buildspec")):
        try:
            found = sorted(str(p) for p in folder.glob("*.toml") if p.is_file())
        except OSError:
            continue
        if found:
            close = difflib.get_close_matches(str(missing), found, n=1, cutoff=0.8)
            meant = f"did you mean {close[0]}? " if close else ""
            return f"{meant}existing specs: " + ", ".join(found) + "; pass one with --spec"
    return "no spec files found in buildspec/; pass --spec PATH/NAME.toml"


def _read_text(path: Path) -> str:
    """The spec's text: a regular file of at most `bounded.MAX_SPEC` bytes (a device, a fifo
    or a pipe that never ends is bad input naming the file, never a hang)."""
    try:
        data = bounded.read_file(path, bounded.MAX_SPEC, "spec file")
    except FileNotFoundError:
        raise BadInput(f"{path}: spec file not found", hint=_existing_specs(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: cannot read spec file: not UTF-8 ({exc.reason})")


def read_data(path: Path) -> tuple[dict[str, Any], str]:
    """The spec's data as plain Python, and its text. tomllib where there is one; a file it
    refuses is read again by tomlkit, which has the last word (its error names the line)."""
    text = _read_text(path)
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return _shallow(path, _plain(_parse(path, text))), text
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        data = _plain(_parse(path, text))  # BadInput naming the line, where it can
    except (RecursionError, MemoryError, ValueError) as exc:  # the parser itself gave up
        raise _unparsable(path, exc)
    return _shallow(path, data), text


def _unparsable(path: Path, exc: BaseException) -> BadInput:
    """A parser failure that is no syntax error (recursion or memory) as bad input."""
    why = "nested too deeply" if isinstance(exc, RecursionError) else type(exc).__name__
    return BadInput(
        f"{path}: malformed TOML: the parser gave up ({why})",
        hint=f"a buildspec nests a few tables deep; at most {bounded.MAX_DEPTH} levels are read",
    )


def _shallow(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`data` when it nests at most `bounded.MAX_DEPTH` levels (the validation and the key
    locator recurse through it); else BadInput naming the file."""
    if bounded.deeper_than(data, bounded.MAX_DEPTH):
        raise BadInput(
            f"{path}: malformed buildspec: nested deeper than {bounded.MAX_DEPTH} levels",
            hint="a buildspec nests a few tables deep; remove the nesting",
        )
    return data


def read_document(path: Path) -> tuple[tomlkit.TOMLDocument, str]:
    """The spec as a tomlkit document (to edit it, comments kept), and its text."""
    text = _read_text(path)
    return _parse(path, text), text


def _parse(path: Path, text: str) -> tomlkit.TOMLDocument:
    import tomlkit
    import tomlkit.exceptions

    try:
        document = tomlkit.parse(text)
        _plain(document)  # some errors (a key defined twice in a table) surface only here
        return document
    except tomlkit.exceptions.ParseError as exc:
        raise BadInput(
            f"{path}:{exc.line}:{exc.col}: malformed TOML: {exc}",
            hint="fix the syntax at that line (quote strings, one key per line)",
        )
    except (tomlkit.exceptions.TOMLKitError, ValueError) as exc:
        raise BadInput(
            f"{_duplicate_line(path, text, exc)}: malformed TOML: {exc}",
            hint="define each key and table once",
        )
    except (RecursionError, MemoryError) as exc:
        raise _unparsable(path, exc)


def _duplicate_line(path: Path, text: str, exc: Exception) -> str:
    """`file:line` of the second definition of the key named in a tomlkit error, else `file`."""
    m = re.search(r'Key "([^"]+)" already exists', str(exc))
    if not m:
        return str(path)
    name = m.group(1)
    key = re.compile(rf"""^\s*["']?{re.escape(name)}["']?\s*=""")
    header = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]")
    table, seen = "", set()
    for number, line in enumerate(text.splitlines(), start=1):
        h = header.match(line)
        if h:
            table = h.group(1)
            if table.split(".")[-1].strip("\"' ") == name and (None, table) in seen:
                return f"{path}:{number}"
            seen.add((None, table))
        elif key.match(line):
            if (table, name) in seen:
                return f"{path}:{number}"
            seen.add((table, name))
    return str(path)


# The full buildspec schema as the package ships it (a unit test keeps it equal to what
# `vpr spec schema` prints), so reading a spec needs none of the check modules.
PACKAGED_SCHEMA = "schemas/buildspec.schema.json"


@functools.cache
def packaged_schema() -> dict[str, Any]:
    """The buildspec JSON Schema shipped in the package (the same object on every call)."""
    return packaged_json_object(PACKAGED_SCHEMA)


def load_spec(path: str | Path) -> Spec:
    """Read, validate (against the full schema) and type a buildspec."""
    file = Path(path)
    data, text = read_data(file)
    validate(data, file, text, packaged_schema())
    return from_data(data, file)


def _parse_value(raw: str) -> Any:
    """A CLI value as TOML (`1`, `true`, `"x"`, `[1, 2]`), else a plain string."""
    import tomlkit
    import tomlkit.exceptions

    try:
        return tomlkit.parse(f"v = {raw}")["v"]
    except tomlkit.exceptions.ParseError:
        return raw
    except (RecursionError, MemoryError):
        raise BadInput(
            f"the value {raw[:40]!r}...: the TOML parser gave up (nested too deeply)",
            hint=f"a buildspec nests a few tables deep; at most {bounded.MAX_DEPTH} levels",
        )


def set_value(
    path: str | Path,
    dotted_key: str,
    raw_value: str,
    *,
    write: bool = True,
) -> str:
    """Set `a.b.c = value`, validate and write atomically; nothing written if invalid."""
    import tomlkit

    from vllm_plugin_release.core.cache import atomic_write_text

    file = Path(path)
    document, _ = read_document(file)
    keys = dotted_key.split(".")
    node: Any = document
    for key in keys[:-1]:
        if key not in node:
            node[key] = tomlkit.table()
        node = node[key]
        if not hasattr(node, "__setitem__"):
            raise BadInput(f"{file}: {dotted_key}: {key!r} is not a table")
    node[keys[-1]] = _parse_value(raw_value)
    new_text = tomlkit.dumps(document)
    validate(_shallow(file, _plain(_parse(file, new_text))), file, new_text, packaged_schema())
    if write:
        atomic_write_text(file, new_text)
    return new_text
