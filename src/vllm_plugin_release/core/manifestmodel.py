"""The pairing manifest as a typed, frozen value, each key a consumer reads checked once by
`parse`; `raw` only for its bytes, digest and signing. The document: `core/manifestdoc`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from vllm_plugin_release.core.errors import BadInput

SHA256 = re.compile(r"[0-9a-f]{64}")
WHEEL_FILENAME = re.compile(r"[A-Za-z0-9._+-]+\.whl")


@dataclass(frozen=True, slots=True)
class Wheel:
    """A wheel the manifest certifies; `version`: its METADATA's (what an installer reports)."""

    filename: str
    sha256: str
    version: str
    files_sha256: str  # over its RECORD entries an installer puts in place unchanged
    files: int  # how many RECORD entries files_sha256 covers


@dataclass(frozen=True, slots=True)
class Part:
    """One certified wheel's part: the core, the plugin or the guard."""

    role: str  # core | plugin | guard
    name: str  # the distribution's name
    version: str
    wheel: Wheel
    commit: str | None  # the source commit: the core's git source, the plugin's; else None
    python: str | None  # the core's build Python (e.g. 3.11.7); None for the other parts
    entry_points: Mapping[str, Mapping[str, str]]  # group -> name -> object ({}: the core)


@dataclass(frozen=True, slots=True)
class Source:
    """Where the core's source came from: an sdist or git."""

    kind: str  # sdist | git
    url: str
    filename: str | None  # sdist
    sha256: str | None  # sdist
    tag: str | None  # git
    commit: str | None  # git


@dataclass(frozen=True, slots=True)
class Lock:
    """A lock file the manifest names and its sha256 (either may be None)."""

    file: str | None
    sha256: str | None


@dataclass(frozen=True, slots=True)
class Container:
    """The build container (the docker backend)."""

    base_image: str | None
    base_digest: str | None
    image_id: str | None


@dataclass(frozen=True, slots=True)
class Runtime:
    """The vendor runtime as seen on the conformance runner."""

    name: str | None
    status: str  # present | absent | not-required
    version: str | None  # seen on the runner
    commit: str | None
    pinned_version: str | None  # what the spec pins
    pinned_commit: str | None
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
    status: str  # pass | warn | fail | deferred
    summary: str
    evidence: tuple[str, ...]  # the notes of its evidence, in order


@dataclass(frozen=True, slots=True)
class Deferred:
    """A check not run here (never counted as a pass), and why."""

    check: str
    reason: str


@dataclass(frozen=True, slots=True)
class Conformance:
    status: str  # present | absent
    verdict: str | None  # fleet | pilot | lab | None (no conformance)
    runner: str | None
    checks: Mapping[str, Check]  # in the manifest's order
    deferred: tuple[Deferred, ...]


@dataclass(frozen=True, slots=True)
class Approval:
    """The approval of breaking core API changes the plugin uses (schema_version 3)."""

    source: str  # the core version approved from (the manifest's `from`)
    to: str
    by: str
    why: str
    changes: tuple[str, ...]

    def as_json(self) -> dict[str, str | list[str]]:
        out = asdict(self)
        return {"from": out.pop("source"), **out, "changes": list(self.changes)}


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
    core_source: Source
    build_lock: Lock  # core.build_env: the build environment's lock
    plugin: Part
    plugin_repository: str
    guard: Part | None  # vpr-guard (schema_version 3; None when none was built)
    runtime: Runtime
    container: Container | None
    environment: Environment
    conformance: Conformance
    platform: str | None  # the platform class vLLM resolved on the verdict's runner
    api_approval: Approval | None
    raw: Mapping[str, Any]  # the object as read or written: only to serialise or sign it

    @property
    def verdict(self) -> str | None:
        return self.conformance.verdict

    def parts(self) -> tuple[Part, ...]:
        return (
            (self.core, self.plugin) if self.guard is None else (self.core, self.plugin, self.guard)
        )

    def roles(self) -> tuple[str, ...]:
        return tuple(p.role for p in self.parts())


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
    files_sha256 = r.sha256(f"{role}.wheel.files_sha256")
    assert sha256 is not None and files_sha256 is not None
    return Wheel(
        filename,
        sha256,
        r.required(f"{role}.wheel.version"),
        files_sha256,
        r.integer(f"{role}.wheel.files"),
    )


def _entry_points(r: _Reader, role: str) -> Mapping[str, Mapping[str, str]]:
    key = f"{role}.entry_points"
    value = r.node(key)
    if value is None and role == "core":
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(group, Mapping) and all(isinstance(v, str) for v in group.values())
        for group in value.values()
    ):
        raise r.fail(key, value, "groups of name = object reference")
    return value


def _source(r: _Reader) -> Source:
    kind = r.required("core.source.kind")
    if kind not in ("sdist", "git"):
        raise r.fail("core.source.kind", kind, "sdist or git")
    sdist = kind == "sdist"
    return Source(
        kind=kind,
        url=r.required("core.source.url"),
        filename=r.required("core.source.filename") if sdist else None,
        sha256=r.sha256("core.source.sha256") if sdist else None,
        tag=None if sdist else r.text("core.source.tag", optional=True),
        commit=None if sdist else r.required("core.source.commit"),
    )


def _container(r: _Reader) -> Container | None:
    if r.obj("container", optional=True) is None:
        return None
    keys = ("base_image", "base_digest", "image_id")
    return Container(*(r.text(f"container.{key}", optional=True) for key in keys))


def _part(r: _Reader, role: str) -> Part:
    r.obj(role)
    commit = None
    if role == "core":
        commit = _source(r).commit
    elif role == "plugin":
        commit = r.text("plugin.commit", optional=True)
    return Part(
        role=role,
        name=r.required(f"{role}.name"),
        version=r.required(f"{role}.version"),
        wheel=_wheel(r, role),
        commit=commit,
        python=r.required("core.python") if role == "core" else None,
        entry_points=_entry_points(r, role),
    )


def _runtime(r: _Reader) -> Runtime:
    r.obj("runtime")
    wheel = r.obj("runtime.wheel", optional=True)
    keys = ("name", "status", "version", "commit", "pinned_version", "pinned_commit")
    found = [r.text(f"runtime.{k}", optional=k != "status") for k in keys]
    return Runtime(*found, r.text("runtime.wheel.filename", optional=True) if wheel else None)


def _environment(r: _Reader) -> Environment:
    r.obj("environment")
    return Environment(
        status=r.required("environment.status"),
        runner=r.text("environment.runner", optional=True),
        lock_file=r.text("environment.lock_file", optional=True),
        lock_sha256=r.sha256("environment.lock_sha256", optional=True),
    )


def _check(r: _Reader, name: str, check: Any) -> Check:
    key = f"conformance.checks.{name}"
    if not isinstance(check, Mapping):
        raise r.fail(key, check, "an object")
    status, summary = check.get("status"), check.get("summary")
    if not isinstance(status, str) or not status:
        raise r.fail(f"{key}.status", status, "non-empty text")
    if not isinstance(summary, str):
        raise r.fail(f"{key}.summary", summary, "text")
    evidence = check.get("evidence", [])
    if not isinstance(evidence, list) or not all(
        isinstance(item, Mapping) and isinstance(item.get("note"), str) for item in evidence
    ):
        raise r.fail(f"{key}.evidence", evidence, "a list of objects with a note")
    return Check(status, summary, tuple(item["note"] for item in evidence))


def _deferred(r: _Reader) -> tuple[Deferred, ...]:
    items = r.node("conformance.deferred")
    if not isinstance(items, list) or not all(
        isinstance(d, Mapping)
        and isinstance(d.get("check"), str)
        and isinstance(d.get("reason"), str)
        for d in items
    ):
        raise r.fail("conformance.deferred", items, "a list of objects with check and reason")
    return tuple(Deferred(d["check"], d["reason"]) for d in items)


def _conformance(r: _Reader) -> Conformance:
    r.obj("conformance")
    checks = r.obj("conformance.checks")
    assert checks is not None
    return Conformance(
        status=r.required("conformance.status"),
        verdict=r.text("conformance.verdict", optional=True),
        runner=r.text("conformance.runner", optional=True),
        checks={name: _check(r, name, check) for name, check in checks.items()},
        deferred=_deferred(r),
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
    """`data` as a `Manifest`; BadInput naming `where` and the first bad key a consumer reads."""
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
        core_source=_source(r),
        build_lock=Lock(
            r.text("core.build_env.lock_file", optional=True),
            r.sha256("core.build_env.lock_sha256", optional=True),
        ),
        plugin=_part(r, "plugin"),
        plugin_repository=r.required("plugin.repository"),
        guard=_part(r, "guard") if r.obj("guard", optional=True) is not None else None,
        runtime=_runtime(r),
        container=_container(r),
        environment=_environment(r),
        conformance=_conformance(r),
        platform=r.text("platform.resolved", optional=True) if has_platform else None,
        api_approval=_approval(r),
        raw=r.data,
    )
