"""The build records (build-core.json, build-plugin.json, build-guard.json) as typed,
frozen values: what a reader in any layer may use of them.

A build stage writes its record as the JSON object it always has (`records.write_build`:
the bytes do not change); every reader gets a `BuildRecord` (`records.build_record`), its
fields checked once here, so no layer indexes `record["wheel"]["filename"]` of a
hand-edited or truncated file. `raw` is the object as written, kept only to serialise it
unchanged (a manifest's or env record's copy, a cache key): never read fields from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

# The section naming what was built, by record: build-core.json's `core`, ...
SECTIONS = {"build-core.json": "core", "build-plugin.json": "plugin", "build-guard.json": "guard"}
SHA256 = re.compile(r"[0-9a-f]{64}")


class RecordProblem(ValueError):
    """Why a mapping is not a build record: the dotted key and what is wrong with it."""


class WheelRef(NamedTuple):
    """The wheel a build record names: its file name in the record's folder and sha256."""

    filename: str
    sha256: str


class BuildRecord(NamedTuple):
    """One build record, read and checked (`parse`)."""

    record: str  # the record's file name (build-core.json, ...)
    wheel: WheelRef
    name: str | None  # what was built: the section's `name` (vllm, the plugin, vpr-guard)
    version: str | None  # its `version`
    commit: str | None  # the plugin's source commit (build-plugin.json); else None
    requires_dist: tuple[str, ...] | None  # the plugin wheel's Requires-Dist, when recorded
    backend: Mapping[str, Any] | None  # where it was built (the runner's description)
    entry_points: Mapping[str, Mapping[str, str]]  # group -> name -> object reference ({})
    python: str | None  # the interpreter version it was built with (`python`), when recorded
    target_device: str | None  # build-core.json's `core.target_device`; else None
    source: Mapping[str, str | None] | None  # build-core.json's `core.source` pins; else None
    raw: Mapping[str, Any]  # the object as written: only to serialise unchanged

    def wheel_entry(self) -> dict[str, Any]:
        """The record's `wheel` object as written (filename, sha256, and what else the stage
        recorded), a copy: for a record that repeats it (env.json)."""
        return dict(self.raw["wheel"])

    def requires_list(self) -> list[str] | None:
        """`requires_dist` as a list (None when not recorded; [] when the wheel has none)."""
        return None if self.requires_dist is None else list(self.requires_dist)


def _text(data: Mapping[str, Any], dotted: str, *, required: bool) -> str | None:
    node: Any = data
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    if not required and (node is None or isinstance(node, str)):
        return node
    if not isinstance(node, str) or not node:
        expected = "non-empty text" if required else "text"
        raise RecordProblem(f"{dotted!r} is {field_shown(node)}, expected {expected}")
    return node


def field_shown(value: Any) -> str:
    """A record's value as a message shows it (the typed records' readers share it)."""
    if value is None:
        return "missing"
    if isinstance(value, str | int | float | bool):
        return repr(value)[:80]
    return f"a {type(value).__name__}"


def _wheel(data: Mapping[str, Any]) -> WheelRef:
    wheel = data.get("wheel")
    if not isinstance(wheel, Mapping):
        raise RecordProblem(f"'wheel' is {field_shown(wheel)}, expected an object")
    filename = _text(data, "wheel.filename", required=True)
    sha256 = _text(data, "wheel.sha256", required=True)
    assert filename is not None and sha256 is not None
    if "/" in filename or "\\" in filename or not filename.endswith(".whl"):
        raise RecordProblem(f"'wheel.filename' is {filename!r}, expected a wheel's file name")
    if not SHA256.fullmatch(sha256):
        raise RecordProblem(f"'wheel.sha256' is {field_shown(sha256)}, expected 64 hex digits")
    return WheelRef(filename, sha256)


def _requires(section: Mapping[str, Any]) -> tuple[str, ...] | None:
    value = section.get("requires_dist")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        raise RecordProblem(
            f"'plugin.requires_dist' is {field_shown(value)}, expected a list of text"
        )
    return tuple(value)


def _entry_points(data: Mapping[str, Any]) -> Mapping[str, Mapping[str, str]]:
    value = data.get("entry_points")
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(group, Mapping) and all(isinstance(v, str) for v in group.values())
        for group in value.values()
    ):
        raise RecordProblem(f"'entry_points' is {field_shown(value)}, expected groups of text")
    return value


def _source(section: Mapping[str, Any]) -> Mapping[str, str | None] | None:
    value = section.get("source")
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(v, str) or v is None for v in value.values()
    ):
        raise RecordProblem(f"'core.source' is {field_shown(value)}, expected an object of text")
    return value


def parse(data: Mapping[str, Any], record: str) -> BuildRecord:
    """The build record `record` (a file name in SECTIONS) from its JSON object;
    RecordProblem naming the first key missing or of another type."""
    part = SECTIONS[record]
    section = data.get(part)
    if not isinstance(section, Mapping) or not section:
        raise RecordProblem(f"{part!r} is {field_shown(section)}, expected an object")
    backend = data.get("backend")
    if backend is not None and not isinstance(backend, Mapping):
        raise RecordProblem(f"'backend' is {field_shown(backend)}, expected an object")
    plugin, core = part == "plugin", part == "core"
    return BuildRecord(
        record=record,
        wheel=_wheel(data),
        name=_text(data, f"{part}.name", required=False),
        version=_text(data, f"{part}.version", required=False),
        commit=_text(data, "plugin.commit", required=False) if plugin else None,
        requires_dist=_requires(section) if plugin else None,
        backend=backend,
        entry_points=_entry_points(data),
        python=_text(data, "python", required=False),
        target_device=_text(data, "core.target_device", required=False) if core else None,
        source=_source(section) if core else None,
        raw=data,
    )
