"""The store head (`STORE/head.json`), pure: the signed sha256 and size of every file of one
state of the store, a version that only grows and an expiry (whole, current, not rolled back)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from vllm_plugin_release.core import bounded, signed
from vllm_plugin_release.core.errors import GateFailed

HEAD_FILE = "head.json"
PAYLOAD_TYPE = "application/vnd.vllm-plugin-release.store-head+json"
KIND = "vllm-plugin-release/store-head"
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


@dataclass(frozen=True, slots=True)
class FileRecord:
    """The head's record of one file: its sha256 and size; the ledger's also its entry
    count and the sha256 of its last line (`ledger_record`)."""

    sha256: str
    size: int
    count: int | None = None  # the ledger's only
    last: str | None = None

    def to_json(self) -> dict[str, str | int]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def same_file(self, other: FileRecord) -> bool:
        return (self.sha256, self.size) == (other.sha256, other.size)


def file_record(data: bytes) -> FileRecord:
    return FileRecord(hashlib.sha256(data).hexdigest(), len(data))


def ledger_record(data: bytes) -> FileRecord:
    lines = data.splitlines(keepends=True)
    last = hashlib.sha256(lines[-1]).hexdigest() if lines else GENESIS
    return FileRecord(hashlib.sha256(data).hexdigest(), len(data), len(lines), last)


@dataclass(frozen=True, slots=True)
class Body:
    version: int
    time: str
    expires: str
    files: dict[str, FileRecord]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "version": self.version,
            "time": self.time,
            "expires": self.expires,
            "files": {name: rec.to_json() for name, rec in self.files.items()},
        }

    def payload(self) -> bytes:
        return signed.payload_of(self.to_json())

    def as_head(self, keyid: str, digest: str) -> Head:
        """The head this body is once signed by `keyid` into bytes of sha256 `digest`."""
        return Head(self.version, self.time, self.expires, self.files, keyid, digest)


@dataclass(frozen=True, slots=True)
class Head(Body):
    keyid: str
    digest: str  # sha256 of head.json's bytes: two heads of one version must be one head


def body(files: dict[str, FileRecord], *, previous: int, now: dt.datetime, days: float) -> Body:
    """A new head's body: the next version (above `previous`, and never below the clock's
    seconds, so a head made again from nothing still outranks the heads before it)."""
    return Body(
        version=max(previous + 1, int(now.timestamp())),
        time=stamp(now),
        expires=stamp(now + dt.timedelta(days=days)),
        files=dict(sorted(files.items())),
    )


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
        count, last = record.get("count"), record.get("last")
        if not (count is None or count_ok(count)) or not (last is None or isinstance(last, str)):
            return f"files[{name!r}] has a count or a last entry that is not a count and a text"
    return None


def count_ok(value: Any) -> bool:
    """A JSON count: a non-negative int (true is not 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _record_ok(record: dict[str, Any]) -> bool:
    sha = record.get("sha256")
    return isinstance(sha, str) and len(sha) == 64 and count_ok(record.get("size"))


def parse(payload: bytes, *, keyid: str, digest: str, where: str) -> Head:
    """A head's verified payload, typed; GateFailed naming what is malformed."""
    data = signed.body(payload, where, HINT)
    problem = _problem(data)
    if problem:
        raise GateFailed(f"{where}: not a store head ({problem})", hint=HINT)
    files = {
        name: FileRecord(rec["sha256"], rec["size"], rec.get("count"), rec.get("last"))
        for name, rec in data["files"].items()
    }
    return Head(data["version"], data["time"], data["expires"], files, keyid, digest)


class Seen(NamedTuple):
    """The newest head a consumer has seen of a store (its own record, `.vpr/trust/`)."""

    version: int
    digest: str | None
    time: str | None


def seen_from(data: bytes) -> Seen | None:
    """A consumer's record of the newest head seen; None when damaged (nothing seen yet)."""
    try:
        seen = bounded.loads(data)
    except json.JSONDecodeError:
        return None
    version = seen.get("version") if isinstance(seen, dict) else None
    if not isinstance(version, int):
        return None
    digest, time = seen.get("digest"), seen.get("time")
    return Seen(
        version, None if digest is None else str(digest), None if time is None else str(time)
    )


def check_fresh(head: Head, now: dt.datetime, where: str) -> None:
    if now >= utc(head.expires):
        raise GateFailed(
            f"{where}: the store's signed head (version {head.version}, signed {head.time}) "
            f"expired at {head.expires}: the store is frozen, or served from an old copy",
            hint="its publisher signs a fresh head on each publish, ledger entry or nightly "
            "run, or with `vpr manifest sign-store`",
        )


def check_not_older(head: Head, seen: Seen | None, where: str) -> None:
    """Refuse a head older than one this consumer has seen for the store (rollback), or
    another head under a version seen (two different states signed as one)."""
    if seen is None:
        return
    version = seen.version
    if head.version < version:
        raise GateFailed(
            f"{where}: the store's signed head is version {head.version}, older than version "
            f"{version} seen here at {seen.time}: the store was rolled back to an "
            "older state",
            hint="a mirror or cache may serve an old copy; read the store from its origin",
        )
    if head.version == version and seen.digest not in (None, head.digest):
        raise GateFailed(
            f"{where}: the store's signed head version {head.version} is not the head of "
            "that version seen here before: two states were signed under one version",
            hint="the signing key may have leaked; ask the store's publisher",
        )


def check_file(head: Head, relative: str, data: bytes, where: str) -> FileRecord:
    """The head's record of `relative` when `data` is exactly the file it vouches for."""
    record = head.files[relative]
    got = file_record(data)
    if not got.same_file(record):
        raise GateFailed(
            f"{where}: not the file the store's signed head (version {head.version}) vouches "
            f"for: sha256 {got.sha256[:16]}, {got.size} bytes; signed "
            f"{record.sha256[:16]}, {record.size} bytes",
            hint=HINT,
        )
    return record


def check_ledger(head: Head, relative: str, count: int, last: str, where: str) -> None:
    """The parsed ledger has the count and last entry the head signs (truncation)."""
    record = head.files.get(relative)
    want = (record.count, record.last) if record else (0, GENESIS)  # none signed: empty
    if want != (count, last):
        raise GateFailed(
            f"{where}: {count} entries, but the store's signed head says {want[0]} (last "
            f"entry {str(want[1])[:16]}): the ledger was cut short or replaced",
            hint=HINT,
        )
