"""The pairing manifest as a document: its schema, file names, canonical bytes, pairing id.

Shared by the stage that builds it, the signing and verification code, the
manifest store and the consumer commands. The JSON Schema ships in the package
(`schemas/manifest.schema.json`).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.packaged import packaged_json_object

if TYPE_CHECKING:
    from vllm_plugin_release.core.manifestmodel import Manifest

SCHEMA_VERSION = 3  # 2: source_date (was created), deferred items with run_with; 3: guard,
# platform, api_approval, conformance.workload
KIND = "vllm-plugin-release/manifest"
MANIFEST_FILE = records.MANIFEST
STATEMENT_FILE = records.STATEMENT
RUN_FILE = records.RUN


WHEEL_ROLES = ("core", "plugin", "guard")


def wheel_roles(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The parts of a pairing that are wheels it certifies: the core, the plugin, and the
    guard when the manifest names one (schema_version 3)."""
    return tuple(r for r in WHEEL_ROLES if isinstance(manifest.get(r), dict))


# ---------------------------------------------------------------------------
# Schema


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The manifest JSON Schema shipped in the package."""
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
    """Read (bounded), validate and parse a manifest file."""
    from vllm_plugin_release.core.manifestmodel import parse

    data = read_document(path, "manifest")
    validate(data, str(path))
    return parse(data, str(path))


# ---------------------------------------------------------------------------
# Bytes, digest, one-line summary


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The canonical on-disk form: sorted keys, 2-space indent, trailing newline."""
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def manifest_digest(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(manifest_bytes(manifest)).hexdigest()


def summary_line(manifest: Manifest) -> str:
    c, p = manifest.core, manifest.plugin
    verdict = manifest.verdict or "no conformance"
    commit = (p.commit or "no-commit")[:12]
    return f"{c.name} {c.version} + {p.name} {p.version} @ {commit}: {verdict}"


# ---------------------------------------------------------------------------
# Pairing id: the hash of what identifies a pairing (`key_of(pairing_inputs(...))`)


def _source_pin(source: dict[str, Any]) -> dict[str, Any]:
    if source.get("kind") == "git":
        return {"kind": "git", "commit": source.get("commit")}
    return {"kind": "sdist", "sha256": source.get("sha256")}


def pairing_inputs(
    manifest_core: dict[str, Any],
    plugin: dict[str, Any],
    runtime_pins: dict[str, Any] | None,
    python: str,
) -> dict[str, Any]:
    runtime = None
    if runtime_pins:
        runtime = {k: runtime_pins.get(k) for k in ("name", "package", "version", "commit")}
    return {
        "core": {
            "name": manifest_core["name"],
            "version": manifest_core["version"],
            "target_device": manifest_core["target_device"],
            "source": _source_pin(manifest_core["source"]),
        },
        "plugin": {"name": plugin["name"], "commit": plugin["commit"]},
        "runtime": runtime,
        "python": python,
    }
