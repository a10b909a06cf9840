"""The store head (`STORE/head.json`) as data: what a store's writers sign so that its
consumers can tell the store they read is whole, current and the newest they have seen
(pure; the files are `edges.storehead`'s and `edges.trust`'s).

One signed line (`core.signed`, payload type below) whose body is:

  kind, version      `vllm-plugin-release/store-head`; a number that only grows
  time, expires      when it was signed, and when consumers stop trusting it (UTC)
  files              for each file it vouches for (index.json, summary.json, the ledger,
                     lkg/NAME.json, nightly/NAME.json): sha256 and size; the ledger also
                     its entry count and the sha256 of its last line (summary.json vouches
                     in turn for the files under summary/, by sha256: `core.storesummary`)

It plays TUF's timestamp and snapshot roles for one key: `files` binds every mutable
file to one state of the store (a file from another state, cut short or grown, is refused:
mix-and-match, endless data), `expires` bounds how long one state can be served (freeze),
and a consumer remembers the newest version it has seen (rollback).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

from vllm_plugin_release.core.errors import GateFailed

HEAD_FILE = "head.json"
PAYLOAD_TYPE = "application/vnd.vllm-plugin-release.store-head+json"
KIND = "vllm-plugin-release/store-head"
DEFAULT_DAYS = 30.0
MAX_HEAD = 1 << 20
GENESIS = "0" * 64
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
HINT = (
    "the store was changed by something other than its writers, or is served from an old "
    "copy; its publisher re-signs a reviewed store with `vpr manifest sign-store`"
)


def utc(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, TIME_FORMAT).replace(tzinfo=dt.timezone.utc)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime(TIME_FORMAT)


def file_record(data: bytes) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def ledger_record(data: bytes) -> dict[str, Any]:
    """The ledger's record: its digest and size, its entry count and last line's sha256."""
    lines = data.splitlines(keepends=True)
    last = hashlib.sha256(lines[-1]).hexdigest() if lines else GENESIS
    return {**file_record(data), "count": len(lines), "last": last}


@dataclass(frozen=True)
class Head:
    version: int
    time: str
    expires: str
    files: dict[str, dict[str, Any]]
    keyid: str
    digest: str  # sha256 of head.json's bytes: two heads of one version must be one head


def body(
    files: dict[str, dict[str, Any]], *, previous: int, now: dt.datetime, days: float
) -> dict[str, Any]:
    """A new head's body: the next version (above `previous`, and never below the clock's
    seconds, so a head made again from nothing still outranks the heads before it)."""
    return {
        "kind": KIND,
        "version": max(previous + 1, int(now.timestamp())),
        "time": stamp(now),
        "expires": stamp(now + dt.timedelta(days=days)),
        "files": dict(sorted(files.items())),
    }


def _problem(data: dict[str, Any]) -> str | None:
    if data.get("kind") != KIND:
        return f"kind is {data.get('kind')!r}, not {KIND!r}"
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return "version is not a positive integer"
    for key in ("time", "expires"):
        try:
            utc(data.get(key))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return f"{key} is not a UTC time ({TIME_FORMAT})"
    files = data.get("files")
    if not isinstance(files, dict):
        return "files is not an object"
    for name, record in files.items():
        if not isinstance(record, dict) or not _record_ok(record):
            return f"files[{name!r}] is not a sha256 and a size"
    return None


def _record_ok(record: dict[str, Any]) -> bool:
    sha, size = record.get("sha256"), record.get("size")
    return (
        isinstance(sha, str)
        and len(sha) == 64
        and isinstance(size, int)
        and not isinstance(size, bool)
        and size >= 0
    )


def parse(data: dict[str, Any], *, keyid: str, digest: str, where: str) -> Head:
    """The verified body of a head as a Head; GateFailed naming what is malformed."""
    problem = _problem(data)
    if problem:
        raise GateFailed(f"{where}: not a store head ({problem})", hint=HINT)
    return Head(
        version=data["version"],
        time=data["time"],
        expires=data["expires"],
        files=data["files"],
        keyid=keyid,
        digest=digest,
    )


def check_fresh(head: Head, now: dt.datetime, where: str) -> None:
    """Refuse a head past its expiry (a store frozen in one state)."""
    if now >= utc(head.expires):
        raise GateFailed(
            f"{where}: the store's signed head (version {head.version}, signed {head.time}) "
            f"expired at {head.expires}: the store is frozen, or served from an old copy",
            hint="its publisher signs a fresh head on each publish, ledger entry or nightly "
            "run, or with `vpr manifest sign-store`",
        )


def check_not_older(head: Head, seen: dict[str, Any] | None, where: str) -> None:
    """Refuse a head older than one this consumer has seen for the store (rollback), or
    another head under a version seen (two different states signed as one)."""
    if not seen:
        return
    version = seen.get("version")
    if not isinstance(version, int):
        return
    if head.version < version:
        raise GateFailed(
            f"{where}: the store's signed head is version {head.version}, older than version "
            f"{version} seen here at {seen.get('time')}: the store was rolled back to an "
            "older state",
            hint="a mirror or cache may serve an old copy; read the store from its origin",
        )
    if head.version == version and seen.get("digest") not in (None, head.digest):
        raise GateFailed(
            f"{where}: the store's signed head version {head.version} is not the head of "
            "that version seen here before: two states were signed under one version",
            hint="the signing key may have leaked; ask the store's publisher",
        )


def check_file(head: Head, relative: str, data: bytes, where: str) -> dict[str, Any]:
    """The head's record of `relative` when `data` is exactly the file it vouches for."""
    record = head.files[relative]
    got = file_record(data)
    if got["sha256"] != record["sha256"] or got["size"] != record["size"]:
        raise GateFailed(
            f"{where}: not the file the store's signed head (version {head.version}) vouches "
            f"for: sha256 {got['sha256'][:16]}, {got['size']} bytes; signed "
            f"{record['sha256'][:16]}, {record['size']} bytes",
            hint=HINT,
        )
    return record


def check_ledger(head: Head, relative: str, count: int, last: str, where: str) -> None:
    """The parsed ledger has the count and last entry the head signs (truncation)."""
    record = head.files.get(relative) or {"count": 0, "last": GENESIS}  # none signed: empty
    want = (record.get("count"), record.get("last"))
    if want != (count, last):
        raise GateFailed(
            f"{where}: {count} entries, but the store's signed head says {want[0]} (last "
            f"entry {str(want[1])[:16]}): the ledger was cut short or replaced",
            hint=HINT,
        )
