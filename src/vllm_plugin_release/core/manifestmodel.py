"""The pairing manifest as a typed, frozen value: what a reader in any layer may use of it.

`core/manifestdoc` owns the manifest as a document (its schema, canonical bytes, pairing
id); this module owns it as a value. Every reader (the store, `vpr manifest verify`,
`vpr install`, the site) validates the JSON against the schema and then calls `parse`,
which checks once, here, each key a consumer reads (missing or of another type: BadInput
naming the file and the key, exit 2), so no layer indexes `manifest["core"]["wheel"]` of
a hand-edited or truncated file. `raw` is the object exactly as read or written, kept
only for its canonical bytes, its digest and signing: never read fields from it.

Frozen dataclasses with slots rather than NamedTuples (the build records' choice, made to
keep `dataclasses` off the warm build-core path): a manifest is read on the store, install
and site paths, which import `dataclasses` already, and a dataclass is not a tuple (no
indexing, no unpacking by position), so a missed `manifest["core"]` fails at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllm_plugin_release.core.errors import BadInput

SHA256 = re.compile(r"[0-9a-f]{64}")
WHEEL_FILENAME = re.compile(r"[A-Za-z0-9._+-]+\.whl")
ROLES = ("core", "plugin", "guard")  # the wheels a pairing certifies, in this order


@dataclass(frozen=True, slots=True)
class Wheel:
    """A wheel the manifest certifies: its file name (no folder), sha256 and the Version
    in its METADATA (what an installer reports)."""

    filename: str
    sha256: str
    version: str


@dataclass(frozen=True, slots=True)
class Part:
    """One certified wheel's part: the core, the plugin or the guard."""

    role: str  # core | plugin | guard
    name: str  # the distribution's name
    version: str
    wheel: Wheel
    commit: str | None  # the source commit: the core's git source, the plugin's; else None
    python: str | None  # the core's build Python (e.g. 3.11.7); None for the other parts


@dataclass(frozen=True, slots=True)
class Runtime:
    """The vendor runtime as seen on the conformance runner."""

    name: str | None
    status: str  # present | absent | not-required
    wheel_filename: str | None  # the locked runtime wheel's file name, when the lock says


@dataclass(frozen=True, slots=True)
class Environment:
    """The pairing environment: the runner it was made on and its lock (file, sha256)."""

    status: str  # present | absent
    runner: str | None
    lock_file: str | None
    lock_sha256: str | None


@dataclass(frozen=True, slots=True)
class Check:
    """One conformance check's result as the manifest records it."""

    status: str  # pass | warn | fail | deferred
    summary: str


@dataclass(frozen=True, slots=True)
class Conformance:
    status: str  # present | absent
    verdict: str | None  # fleet | pilot | lab | None (no conformance)
    runner: str | None
    checks: Mapping[str, Check]  # in the manifest's order


@dataclass(frozen=True, slots=True)
class Approval:
    """The approval of breaking core API changes the plugin uses (schema_version 3)."""

    source: str  # the core version approved from (the manifest's `from`)
    to: str
    by: str
    why: str
    changes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Manifest:
    """One pairing manifest, read and checked (`parse`)."""

    schema_version: int
    name: str  # the buildspec's name
    pairing_id: str
    source_date: str | None  # the vLLM source date (`source_date`; `created` before v2)
    source_date_epoch: int
    pipeline_version: str  # vllm-plugin-release's version that wrote it
    core: Part
    plugin: Part
    guard: Part | None  # vpr-guard (schema_version 3; None when none was built)
    runtime: Runtime
    environment: Environment
    conformance: Conformance
    platform: str | None  # the platform class vLLM resolved on the verdict's runner
    api_approval: Approval | None
    raw: Mapping[str, Any]  # the object as read or written: only to serialise or sign it

    @property
    def verdict(self) -> str | None:
        return self.conformance.verdict

    def parts(self) -> tuple[Part, ...]:
        """The wheels the pairing certifies: core, plugin, and the guard when it names one."""
        return (
            (self.core, self.plugin) if self.guard is None else (self.core, self.plugin, self.guard)
        )

    def roles(self) -> tuple[str, ...]:
        return tuple(p.role for p in self.parts())


# ---------------------------------------------------------------------------
# The parser


class _Reader:
    """Reads typed values from the manifest object; BadInput naming `where` and the key."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise BadInput(f"{where}: not a manifest (expected a JSON object)")
        self.data, self.where = data, where

    def fail(self, key: str, value: Any, expected: str) -> BadInput:
        return BadInput(
            f"{self.where}: key '{key}' is {_shown(value)}, expected {expected}",
            hint="a manifest is written by `vpr manifest build`; rebuild it",
        )

    def node(self, key: str) -> Any:
        node: Any = self.data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        return node

    def obj(self, key: str, *, optional: bool = False) -> Mapping[str, Any] | None:
        value = self.node(key)
        if optional and value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.fail(key, value, "an object")
        return value

    def text(self, key: str, *, optional: bool = False) -> str | None:
        value = self.node(key)
        if optional and value is None:
            return None
        if not isinstance(value, str) or not (optional or value):
            raise self.fail(key, value, "text" if optional else "non-empty text")
        return value

    def required(self, key: str) -> str:
        value = self.text(key)
        assert value is not None
        return value

    def sha256(self, key: str, *, optional: bool = False) -> str | None:
        value = self.text(key, optional=optional)
        if value is not None and not SHA256.fullmatch(value):
            raise self.fail(key, value, "a sha256 (64 hexadecimal digits)")
        return value

    def integer(self, key: str) -> int:
        value = self.node(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.fail(key, value, "a non-negative integer")
        return value


def _shown(value: Any) -> str:
    if value is None:
        return "missing (or null)"
    if isinstance(value, str | int | float | bool):
        return repr(value)[:80]
    return f"a {type(value).__name__}"


def _wheel(r: _Reader, role: str) -> Wheel:
    r.obj(f"{role}.wheel")
    filename = r.required(f"{role}.wheel.filename")
    if not WHEEL_FILENAME.fullmatch(filename):
        raise r.fail(f"{role}.wheel.filename", filename, "a wheel's file name (no folder)")
    sha256 = r.sha256(f"{role}.wheel.sha256")
    assert sha256 is not None
    return Wheel(filename, sha256, r.required(f"{role}.wheel.version"))


def _part(r: _Reader, role: str) -> Part:
    r.obj(role)
    commit = None
    if role == "core":
        source = r.obj("core.source")
        assert source is not None
        commit = (
            r.text("core.source.commit", optional=True) if source.get("kind") == "git" else None
        )
    elif role == "plugin":
        commit = r.text("plugin.commit", optional=True)
    return Part(
        role=role,
        name=r.required(f"{role}.name"),
        version=r.required(f"{role}.version"),
        wheel=_wheel(r, role),
        commit=commit,
        python=r.required("core.python") if role == "core" else None,
    )


def _runtime(r: _Reader) -> Runtime:
    r.obj("runtime")
    wheel = r.obj("runtime.wheel", optional=True)
    return Runtime(
        name=r.text("runtime.name", optional=True),
        status=r.required("runtime.status"),
        wheel_filename=r.text("runtime.wheel.filename", optional=True) if wheel else None,
    )


def _environment(r: _Reader) -> Environment:
    r.obj("environment")
    return Environment(
        status=r.required("environment.status"),
        runner=r.text("environment.runner", optional=True),
        lock_file=r.text("environment.lock_file", optional=True),
        lock_sha256=r.sha256("environment.lock_sha256", optional=True),
    )


def _conformance(r: _Reader) -> Conformance:
    r.obj("conformance")
    checks = r.obj("conformance.checks")
    assert checks is not None
    typed = {}
    for name, check in checks.items():
        key = f"conformance.checks.{name}"
        status, summary = (
            (check.get("status"), check.get("summary"))
            if isinstance(check, Mapping)
            else (None, None)
        )
        if not isinstance(status, str) or not status:
            raise r.fail(f"{key}.status", status, "non-empty text")
        if not isinstance(summary, str):
            raise r.fail(f"{key}.summary", summary, "text")
        typed[name] = Check(status, summary)
    return Conformance(
        status=r.required("conformance.status"),
        verdict=r.text("conformance.verdict", optional=True),
        runner=r.text("conformance.runner", optional=True),
        checks=typed,
    )


def _approval(r: _Reader) -> Approval | None:
    if r.obj("api_approval", optional=True) is None:
        return None
    changes = r.node("api_approval.changes")
    if not isinstance(changes, list) or not all(isinstance(c, str) for c in changes):
        raise r.fail("api_approval.changes", changes, "a list of text")
    return Approval(
        source=r.required("api_approval.from"),
        to=r.required("api_approval.to"),
        by=r.required("api_approval.by"),
        why=r.required("api_approval.why"),
        changes=tuple(changes),
    )


def parse(data: Any, where: str) -> Manifest:
    """The manifest `data` (a JSON object, already valid against the schema where a reader
    validates) as a `Manifest`; BadInput naming `where` and the first key a consumer reads
    that is missing or of another type."""
    r = _Reader(data, where)
    has_platform = r.obj("platform", optional=True) is not None
    return Manifest(
        schema_version=r.integer("schema_version"),
        name=r.required("name"),
        pairing_id=r.sha256("pairing_id") or "",
        source_date=r.text("source_date", optional=True) or r.text("created", optional=True),
        source_date_epoch=r.integer("source_date_epoch"),
        pipeline_version=r.required("pipeline.version"),
        core=_part(r, "core"),
        plugin=_part(r, "plugin"),
        guard=_part(r, "guard") if r.obj("guard", optional=True) is not None else None,
        runtime=_runtime(r),
        environment=_environment(r),
        conformance=_conformance(r),
        platform=r.text("platform.resolved", optional=True) if has_platform else None,
        api_approval=_approval(r),
        raw=r.data,
    )
