"""What `vpr install` leaves beside a certified environment for vpr-guard (pure); the names
are vpr-guard's own (guard/src/vpr_guard/__init__.py), a unit test keeps them equal."""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from packaging.utils import canonicalize_name

from vllm_plugin_release.core.buildrecord import (
    RecordProblem,
    checked,
    field_shown,
    is_int,
    is_object,
)

if TYPE_CHECKING:
    from vllm_plugin_release.core.manifestmodel import Manifest

STATE_DIR = "vpr-guard"
MANIFEST = "manifest.json"
STATEMENT = "manifest.intoto.jsonl"
LOCK = "manifest.lock.txt"  # beside manifest.json, where `vpr manifest check-env` looks
CERTIFIED = "certified.json"
POLICY = "policy"
CERTIFIED_KIND = "vpr-guard/certified"


class DistStamp(NamedTuple):
    """One distribution of the snapshot: its version and its RECORD's sha256 (None: none)."""

    version: str
    record: str | None


class Snapshot(NamedTuple):
    """`python -m vpr_guard snapshot`'s answer: every distribution and, for the roles asked
    for, each file's (size, mtime_ns) by path ((-1, -1): missing)."""

    dists: Mapping[str, DistStamp]
    files: Mapping[str, Mapping[str, tuple[int, int]]]


class Finding(NamedTuple):
    """One thing `python -m vpr_guard check` found (`name` "" for the platform or the state)."""

    kind: str
    name: str
    text: str


class GuardCheck(NamedTuple):
    """The guard's own comparison of an environment with its certified record."""

    ok: bool
    findings: tuple[Finding, ...]


class Certified(NamedTuple):
    """certified.json (`certified_record`): written with `to_json()`."""

    pairing_id: str
    manifest_sha256: str
    recover: str
    roles: Mapping[str, str]
    snapshot: Snapshot

    def to_json(self) -> dict[str, object]:
        """certified.json's object (vpr-guard reads these keys)."""
        return {
            "kind": CERTIFIED_KIND,
            "pairing_id": self.pairing_id,
            "manifest_sha256": self.manifest_sha256,
            "recover": self.recover,
            "roles": dict(self.roles),
            "dists": {
                name: {"version": d.version, "record": d.record}
                for name, d in self.snapshot.dists.items()
            },
            "files": {
                name: {path: list(stat) for path, stat in stats.items()}
                for name, stats in self.snapshot.files.items()
            },
        }


def _top(data: Any, key: str, kind: type, expected: str) -> Any:
    """`data[key]` when `data` is an object and that is a `kind`; else RecordProblem naming it."""
    value = data.get(key) if isinstance(data, Mapping) else data
    ok = isinstance(data, Mapping) and isinstance(value, kind)
    return checked(value, key, lambda _: ok, expected)


def parse_snapshot(data: Any) -> Snapshot:
    """The guard's snapshot answer; RecordProblem naming the first key amiss."""
    dists = {}
    for name, dist in _top(data, "dists", Mapping, "an object").items():
        version = dist.get("version") if isinstance(dist, Mapping) else None
        record = dist.get("record") if isinstance(dist, Mapping) else None
        if not isinstance(version, str) or not (record is None or isinstance(record, str)):
            raise RecordProblem(f"'dists.{name}' is {field_shown(dist)}, expected version, record")
        dists[name] = DistStamp(version, record)
    files_in = checked(data.get("files") or {}, "files", is_object, "an object")
    files = {}
    for name, stats in files_in.items():
        if not isinstance(stats, Mapping) or not all(
            isinstance(st, list) and len(st) == 2 and all(is_int(n) for n in st)
            for st in stats.values()
        ):
            raise RecordProblem(f"'files.{name}' is {field_shown(stats)}, expected file stats")
        files[name] = {path: (st[0], st[1]) for path, st in stats.items()}
    return Snapshot(dists, files)


def parse_check(data: Any) -> GuardCheck:
    """The guard's `check --json` answer; RecordProblem naming the first key amiss."""
    items = _top(data, "findings", list, "a list")
    ok = checked(data.get("ok"), "ok", lambda v: isinstance(v, bool), "true or false")
    found = []
    for i, item in enumerate(items):
        values = [item.get(k) if isinstance(item, Mapping) else None for k in Finding._fields]
        if not all(isinstance(v, str) for v in values):
            raise RecordProblem(
                f"'findings[{i}]' is {field_shown(item)}, expected kind, name, text"
            )
        found.append(Finding(*values))
    return GuardCheck(ok, tuple(found))


def roles(manifest: Manifest, installed: Collection[str]) -> dict[str, str]:
    """role -> distribution name (core, plugin, guard, runtime, torch) where the env holds it."""
    out = snapshot_roles(manifest)
    filename = manifest.runtime.wheel_filename
    if filename is not None and "-" in filename:
        out["runtime"] = filename.split("-", 1)[0]
    if "torch" in installed:
        out["torch"] = "torch"
    return {role: str(canonicalize_name(name)) for role, name in out.items()}


def recover_line(pid: str, store: str, key: str | None, env_dir: str) -> str:
    """The `vpr install` command that brings this environment back to its certified set."""
    parts = ["vpr", "install", pid[:16], "--store", store]
    if key:
        parts += ["--key", key]
    parts += ["--python-env", env_dir]
    return shlex.join(parts)


def certified_record(
    manifest: Manifest, manifest_sha256: str, snapshot: Snapshot, recover: str
) -> Certified:
    """certified.json: the manifest's digest, how to get back, roles and the snapshot."""
    found = roles(manifest, snapshot.dists)
    return Certified(manifest.pairing_id, manifest_sha256, recover, found, snapshot)


def snapshot_roles(manifest: Manifest) -> dict[str, str]:
    """The distributions whose files the snapshot lists one by one."""
    return {part.role: part.name for part in manifest.parts()}
