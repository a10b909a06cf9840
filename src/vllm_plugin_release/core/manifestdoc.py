"""The pairing manifest as a document: its schema (shipped in the package), file names,
canonical bytes and pairing id."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import records
from vllm_plugin_release.core.bounded import packaged_json_object
from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:
    from vllm_plugin_release.core.manifestmodel import Manifest

SCHEMA_VERSION = 3
KIND = "vllm-plugin-release/manifest"
MANIFEST_FILE = records.MANIFEST
STATEMENT_FILE = records.STATEMENT
RUN_FILE = records.RUN


WHEEL_ROLES = ("core", "plugin", "guard")


def wheel_roles(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The parts of a pairing that are wheels it certifies: the core, the plugin, and the
    guard when the manifest names one (schema_version 3)."""
    return tuple(r for r in WHEEL_ROLES if isinstance(manifest.get(r), dict))


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return packaged_json_object("schemas/manifest.schema.json")


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=False) + "\n"


def check_schema_version(data: Any, where: str) -> None:
    """Refuse, in words, a document from a newer (or no) schema_version before validating it."""
    if not isinstance(data, dict):
        raise BadInput(f"{where}: not a manifest (expected a JSON object)")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BadInput(
            f"{where}: key 'schema_version' is missing or not an integer ({version!r})",
            hint="this is not a manifest written by `vpr manifest build`",
        )
    if version > SCHEMA_VERSION:
        raise BadInput(
            f"{where}: manifest schema_version {version} is newer than this vpr understands "
            f"(it reads schema_version {SCHEMA_VERSION})",
            hint="upgrade vllm-plugin-release (pip install -U vllm-plugin-release)",
        )
    if version < 1:
        raise BadInput(f"{where}: schema_version {version} is not a valid manifest version")


def validate(data: Any, where: str) -> None:
    """Validate a manifest against the shipped schema; BadInput naming each bad key."""
    from jsonschema import Draft202012Validator, FormatChecker

    check_schema_version(data, where)
    validator = Draft202012Validator(schema(), format_checker=FormatChecker())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = []
        for error in errors[:20]:
            key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
            lines.append(f"{where}: {key}: {error.message}")
        raise BadInput(
            "manifest does not match its schema:\n  " + "\n  ".join(lines),
            hint="`vpr manifest schema` prints the schema; rebuild with `vpr manifest build`",
        )


def read_document(path: Path, what: str) -> Any:
    """A JSON document given from outside (a manifest), bounded: a regular file of at most
    16 MiB, at most 64 levels deep (`core.bounded`); BadInput naming the file otherwise."""
    from vllm_plugin_release.core import bounded

    try:
        data = bounded.read_file(path, bounded.MAX_DOCUMENT, what)
    except FileNotFoundError:
        raise BadInput(f"{path}: {what} not found")
    return parse_document(data, path, what)


def parse_document(data: bytes, path: Path, what: str) -> Any:
    """The JSON in `data` (read bounded from `path`), at most 64 levels deep; BadInput
    naming the file, line and column when it is not JSON."""
    from vllm_plugin_release.core import bounded

    try:
        return bounded.loads(data)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}:{exc.colno}: malformed JSON in {what}: {exc.msg}")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: {what} is not UTF-8 ({exc.reason})")


def load(path: Path) -> Manifest:
    from vllm_plugin_release.core.manifestmodel import parse

    data = read_document(path, "manifest")
    validate(data, str(path))
    return parse(data, str(path))


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The canonical on-disk form: sorted keys, 2-space indent, trailing newline."""
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def file_bytes(manifest: Manifest) -> bytes:
    """manifest.json's bytes: the canonical form of the document as built (`raw`)."""
    return manifest_bytes(dict(manifest.raw))


def summary_line(manifest: Manifest) -> str:
    c, p = manifest.core, manifest.plugin
    verdict = manifest.verdict or "no conformance"
    commit = (p.commit or "no-commit")[:12]
    return f"{c.name} {c.version} + {p.name} {p.version} @ {commit}: {verdict}"


# Pairing id: the hash of what identifies a pairing (`key_of(PairingInputs.to_json())`)


@dataclass(frozen=True, slots=True)
class SourcePin:
    """What pins the core's source in a pairing id: a git commit, else the sdist's sha256
    (`kind` as the manifest's `core.source` says it; anything but git counts as sdist)."""

    kind: str | None
    commit: str | None
    sha256: str | None

    def to_json(self) -> dict[str, str | None]:
        if self.kind == "git":
            return {"kind": "git", "commit": self.commit}
        return {"kind": "sdist", "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class RuntimePins:
    """The spec's vendor runtime pins a pairing id holds (`[runtime]`'s name, package,
    version and commit; each None when the spec does not pin it)."""

    name: str | None
    package: str | None
    version: str | None
    commit: str | None

    def to_json(self) -> dict[str, str | None]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class PairingInputs:
    """What identifies a pairing: the core (name, version, target device, source pin), the
    plugin (name, commit), the runtime pins and the Python (major.minor). The manifest's
    `pairing_inputs` is `to_json()`; its `pairing_id` is `key_of` of it."""

    core_name: str
    core_version: str
    target_device: str
    source: SourcePin
    plugin_name: str
    plugin_commit: str | None
    runtime: RuntimePins | None
    python: str

    def to_json(self) -> dict[str, Any]:
        return {
            "core": {
                "name": self.core_name,
                "version": self.core_version,
                "target_device": self.target_device,
                "source": self.source.to_json(),
            },
            "plugin": {"name": self.plugin_name, "commit": self.plugin_commit},
            "runtime": None if self.runtime is None else self.runtime.to_json(),
            "python": self.python,
        }
