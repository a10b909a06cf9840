"""When the nightly runs again: every `interval` hours while it passes, `backoff` hours while
it fails (that needs a person, not more runs). Pure; the state is a signed store document."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from vllm_plugin_release.core import signed
from vllm_plugin_release.core.errors import GateFailed

INTERVAL_HOURS = 8
BACKOFF_HOURS = 24
CLOCK_SKEW = dt.timedelta(minutes=5)  # a time this far after now is still taken as now
# the payload types of the store's signed documents for a nightly (`core.signed`)
LKG_TYPE = "application/vnd.vllm-plugin-release.last-known-good+json"
SCHEDULE_TYPE = "application/vnd.vllm-plugin-release.nightly-schedule+json"


def _parse(text: Any) -> dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def _format(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class ScheduleState(NamedTuple):
    """The schedule's state after a run (the signed document's keys, `to_json()`)."""

    last_run: dt.datetime
    failures: int  # failed runs in a row (0: the last one passed)
    last_commit: str | None = None  # the core commit it ran on
    last_result: str | None = None  # pass | fail

    def to_json(self) -> dict[str, str | int | None]:
        return {
            "last_run": _format(self.last_run),
            "last_commit": self.last_commit,
            "last_result": self.last_result,
            "failures": self.failures,
        }

    def payload(self) -> bytes:
        """The signed document's payload (`core.signed`)."""
        return signed.payload_of(self.to_json())


class StateUnreadable(ValueError):
    """A schedule state whose last_run or failures is of another type."""


def parse_state(data: object) -> ScheduleState | None:
    """The state the store holds (None before the first run); StateUnreadable when not a state."""
    if not isinstance(data, Mapping) or data.get("last_run") is None:
        return None
    last, failures = _parse(data.get("last_run")), data.get("failures", 0)
    count = isinstance(failures, int) and not isinstance(failures, bool) and 0 <= failures < 10**6
    if last is None or not count:
        raise StateUnreadable("the schedule's state cannot be read (last_run, failures)")
    texts = [data.get(k) for k in ("last_commit", "last_result")]
    return ScheduleState(last, failures, *(v if isinstance(v, str) else None for v in texts))


def state_from(payload: bytes, where: str) -> ScheduleState | None:
    """A verified signed schedule's state; None before the first run and when it cannot be
    read (it never delays a run); GateFailed when the payload is not a JSON object."""
    try:
        return parse_state(signed.body(payload, where, ""))
    except StateUnreadable:
        return None


def due(
    state: ScheduleState | None,
    now: dt.datetime,
    *,
    interval: int = INTERVAL_HOURS,
    backoff: int = BACKOFF_HOURS,
) -> tuple[bool, str]:
    """Whether a run is due now, and why; a last run dated after now never delays one."""
    if state is None:
        return True, "no earlier run"
    last, failures = state.last_run, state.failures
    if last > now + CLOCK_SKEW:
        return True, f"the last run is dated {_format(last)}, after now; running"
    wait = dt.timedelta(hours=backoff if failures else interval)
    if now - last >= wait:
        return True, f"{failures} failure(s) in a row; next run was due after {wait}"
    return False, (
        f"backing off: {failures} failure(s) in a row, next run after {_format(last + wait)}"
        if failures
        else f"passed at {_format(last)}; next run after {_format(last + wait)}"
    )


def after_run(
    state: ScheduleState | None, now: dt.datetime, *, passed: bool, commit: str
) -> ScheduleState:
    """The state after a run on `commit`."""
    failures = 0 if passed or state is None else state.failures
    result = "pass" if passed else "fail"
    return ScheduleState(now.replace(microsecond=0), 0 if passed else failures + 1, commit, result)


POINTER_KEYS = ("pairing", "core_url", "core_commit", "plugin_commit", "time")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def pointer_problem(pointer: Any, name: str, now: dt.datetime) -> str | None:
    """Why a signed last-known-good pointer cannot be the pointer of pairing `name` now, or None."""
    if not isinstance(pointer, dict) or not all(
        isinstance(pointer.get(k), str) or (k == "plugin_commit" and pointer.get(k) is None)
        for k in POINTER_KEYS
    ):
        return f"not a last-known-good pointer ({', '.join(POINTER_KEYS)} as text)"
    if not _COMMIT.fullmatch(pointer["core_commit"]):
        return f"core_commit {pointer['core_commit'][:80]!r} is not a commit id"
    if pointer["pairing"] != name:
        return (
            f"the pointer of pairing {pointer['pairing'][:80]!r}, not of {name!r}: a pointer "
            "is bound to its pairing"
        )
    when = _parse(pointer["time"])
    if when is None:
        return f"time {pointer['time'][:40]!r} is not a UTC time"
    if when > now + CLOCK_SKEW:
        return f"dated {pointer['time']}, in the future"
    return None


class Pointer(NamedTuple):
    """A pairing's last-known-good pointer (a signed document of the store)."""

    pairing: str
    core_url: str
    core_commit: str
    plugin_commit: str | None
    time: str

    def to_json(self) -> dict[str, str | None]:
        """The document as written: `POINTER_KEYS`, in that order."""
        return dict(zip(POINTER_KEYS, self, strict=True))

    def payload(self) -> bytes:
        """The signed document's payload (`core.signed`)."""
        return signed.payload_of(self.to_json())


def parse_pointer(payload: bytes, name: str, now: dt.datetime, where: str, hint: str) -> Pointer:
    """A verified signed pointer of pairing `name` now; GateFailed naming `where` otherwise."""
    pointer = signed.body(payload, where, hint)
    problem = pointer_problem(pointer, name, now)
    if problem:
        raise GateFailed(f"{where}: {problem}", hint=hint)
    return Pointer(*(pointer[k] for k in POINTER_KEYS))
