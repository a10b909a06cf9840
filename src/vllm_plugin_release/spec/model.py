"""Buildspec: one TOML file per pairing, validated once into a typed `Spec`.

Read and written with tomlkit so that comments and key order survive an edit.
Every error names the file, the line, the key and what is expected (exit 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from packaging.version import InvalidVersion, Version

from vllm_plugin_release.core.errors import BadInput

_format_checker = FormatChecker()


@_format_checker.checks("pep440", raises=InvalidVersion)
def _is_pep440(value: object) -> bool:
    if isinstance(value, str):
        Version(value)
    return True


_VALIDATORS: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    """One compiled validator per schema object (the registry hands in the same one)."""
    held = _VALIDATORS.get(id(schema))
    if held is None or held[0] is not schema:
        held = (schema, Draft202012Validator(schema, format_checker=_format_checker))
        _VALIDATORS[id(schema)] = held
    return held[1]


@dataclass(frozen=True)
class SdistSource:
    index: str
    filename: str
    sha256: str
    kind: str = "sdist"


@dataclass(frozen=True)
class GitSource:
    url: str
    tag: str
    commit: str
    kind: str = "git"


@dataclass(frozen=True)
class CoreSpec:
    name: str
    version: str
    target_device: str
    source_date_epoch: int
    source: SdistSource | GitSource


@dataclass(frozen=True)
class BuildSpec:
    python: str
    backend: str
    base_image: str | None
    dockerfile: str
    constraints: str
    torch: str
    find_links: tuple[str, ...]
    reproducibility_check: bool
    network_isolation: str


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    description: str
    core: CoreSpec
    build: BuildSpec
    # Optional tables, kept as plain validated data for the stages that read them.
    plugin: dict[str, Any] = field(default_factory=dict)
    runtime: dict[str, Any] = field(default_factory=dict)
    conformance: dict[str, Any] = field(default_factory=dict)
    publish: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def root(self) -> Path:
        """The project folder the spec's relative paths are resolved against."""
        return _project_root(self.path)

    @property
    def env_constraints(self) -> str:
        py = self.build.python.replace(".", "")
        return self.env.get("constraints", f"constraints/env-{self.name}-py{py}.txt")

    def options(self, key: str) -> dict[str, Any]:
        """`[conformance.KEY]` as validated when the spec was loaded (a copy; {} when absent).

        A check reads its options here and trusts them: the table's schema is part of the
        buildspec schema (the check registry), so a `Spec` from `load` never holds an
        invalid one. Only rules a schema cannot state are the check's to enforce.
        """
        return dict(self.conformance.get(key) or {})

    def resolve(self, relative: str) -> Path:
        p = Path(relative)
        return p if p.is_absolute() else self.root / p


def _project_root(spec_path: Path) -> Path:
    """The nearest parent holding `buildspec/` or `pyproject.toml`, else the spec's folder."""
    here = spec_path.resolve().parent
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").exists() or (candidate / "buildspec").is_dir():
            if candidate.name == "buildspec":
                continue
            return candidate
    return here


# ---------------------------------------------------------------------------
# Locating a key path in the TOML text (tomlkit keeps no line numbers).

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", text)
    return tuple(p.strip("\"'") for p in parts)


def locate(text: str, path: tuple[str, ...]) -> int | None:
    """1-based line of `path` (a key or table) in TOML `text`, or its nearest parent."""
    best: tuple[int, int] | None = None  # (matched depth, line)
    header: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m and not _KEY.match(line):
            header = _split_dotted(m.group(1))
            candidate = header
        else:
            k = _KEY.match(line)
            if not k:
                continue
            candidate = header + _split_dotted(k.group(1))
        depth = 0
        for a, b in zip(candidate, path):
            if a != b:
                break
            depth += 1
        prefix = depth == len(candidate) or depth == len(path)  # one is a prefix of the other
        if prefix and depth and (best is None or depth > best[0]):
            best = (depth, number)
    return best[1] if best else None


def _where(file: Path, text: str, path: tuple[str, ...]) -> str:
    line = locate(text, path)
    return f"{file}:{line}" if line else str(file)


def _table_name(path: tuple[str, ...]) -> str:
    return "[" + ".".join(path) + "]" if path else "top level"


def _describe(error: ValidationError, prefix: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str]:
    """(key path, message) for one schema error, in words a person can act on."""
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
        for sub in error.validator_value:
            if sub.get("properties", {}).get("kind", {}).get("const") == kind:
                sub_errors = sorted(
                    Draft202012Validator(sub, format_checker=_format_checker).iter_errors(
                        error.instance
                    ),
                    key=lambda e: list(e.absolute_path),
                )
                if sub_errors:
                    return _describe(sub_errors[0], path)
        kinds = [
            s.get("properties", {}).get("kind", {}).get("const") for s in error.validator_value
        ]
        return (*path, "kind"), f"'kind' must be one of {kinds}, got {kind!r}"
    key = path[-1] if path else "value"
    got = error.instance
    if error.validator == "format" and error.validator_value == "pep440":
        return path, f"{key} = {got!r} is not a PEP 440 version (e.g. 0.26.0)"
    if error.validator == "const":
        return path, f"{key} must be {error.validator_value!r}, got {got!r}"
    if error.validator == "enum":
        return path, f"{key} must be one of {error.validator_value}, got {got!r}"
    if error.validator == "type":
        return path, f"{key} must be of type {error.validator_value}, got {got!r}" + (
            f" ({desc})" if desc else ""
        )
    return path, f"{key} = {got!r}: {desc or error.message}"


def validate(data: dict[str, Any], file: Path, text: str, schema: dict[str, Any]) -> None:
    """Every error of `data` against `schema`, each naming file:line and key (BadInput)."""
    errors = sorted(
        _validator(schema).iter_errors(data), key=lambda e: list(map(str, e.absolute_path))
    )
    if not errors:
        return
    lines = []
    for error in errors:
        path, message = _describe(error)
        lines.append(f"{_where(file, text, path)}: {message}")
    raise BadInput(
        "invalid buildspec:\n  " + "\n  ".join(lines),
        hint="fix the keys named above; `vpr spec schema` prints every key, docs/buildspec.md "
        "explains them",
    )


def _plain(value: Any) -> Any:
    """tomlkit containers -> plain Python data."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def read_document(path: Path) -> tuple[tomlkit.TOMLDocument, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: spec file not found", hint="pass --spec buildspec/NAME.toml")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read spec file: {exc}")
    try:
        return tomlkit.parse(text), text
    except tomlkit.exceptions.ParseError as exc:
        raise BadInput(
            f"{path}:{exc.line}:{exc.col}: malformed TOML: {exc}",
            hint="fix the syntax at that line (quote strings, one key per line)",
        )


def load(path: str | Path, schema: dict[str, Any]) -> Spec:
    """Read, validate against `schema` (the full buildspec schema) and type a buildspec.

    Callers get the schema from the check registry: `conform.registry.load_spec(path)`.
    """
    file = Path(path)
    document, text = read_document(file)
    data = _plain(document)
    validate(data, file, text, schema)
    return from_data(data, file)


def from_data(data: dict[str, Any], file: Path) -> Spec:
    core = data["core"]
    src = core["source"]
    source: SdistSource | GitSource
    if src["kind"] == "sdist":
        source = SdistSource(
            index=src.get("index", "https://pypi.org/simple").rstrip("/"),
            filename=src.get("filename", f"{core['name']}-{core['version']}.tar.gz"),
            sha256=src["sha256"],
        )
    else:
        source = GitSource(url=src["url"], tag=src["tag"], commit=src["commit"])
    build = data["build"]
    python = build["python"]
    return Spec(
        path=file,
        name=data["name"],
        description=data.get("description", ""),
        core=CoreSpec(
            name=core["name"],
            version=core["version"],
            target_device=core["target_device"],
            source_date_epoch=core["source_date_epoch"],
            source=source,
        ),
        build=BuildSpec(
            python=python,
            backend=build["backend"],
            base_image=build.get("base_image"),
            dockerfile=build.get("dockerfile", "docker/build.Dockerfile"),
            constraints=build.get(
                "constraints", f"constraints/build-core-py{python.replace('.', '')}.txt"
            ),
            torch=build.get("torch", "2.13.0+cpu"),
            find_links=tuple(build.get("find_links", [])),
            reproducibility_check=build.get("reproducibility_check", True),
            network_isolation=build.get("network_isolation", "auto"),
        ),
        plugin=data.get("plugin", {}),
        runtime=data.get("runtime", {}),
        conformance=data.get("conformance", {}),
        publish=data.get("publish", {}),
        env=data.get("env", {}),
        raw=data,
    )


# ---------------------------------------------------------------------------
# Round-trip editing (comments and order preserved).


def _parse_value(raw: str) -> Any:
    """A CLI value as TOML (`1`, `true`, `"x"`, `[1, 2]`), else a plain string."""
    try:
        return tomlkit.parse(f"v = {raw}")["v"]
    except tomlkit.exceptions.ParseError:
        return raw


def set_value(
    path: str | Path,
    dotted_key: str,
    raw_value: str,
    schema: dict[str, Any],
    *,
    write: bool = True,
) -> str:
    """Set `a.b.c = value` in the spec, validate the result, and write it atomically.

    Returns the new text. Nothing is written when the result would not validate.
    """
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
    validate(_plain(tomlkit.parse(new_text)), file, new_text, schema)
    if write:
        atomic_write_text(file, new_text)
    return new_text
