"""When the nightly runs again: every `interval` hours while it passes, backing off to
`backoff` hours while it fails (as a core-main build that keeps failing needs a person, not
three more runs a day). Pure; the state is a small JSON document kept in the store."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

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


def _failures(state: dict[str, Any]) -> int | None:
    value = state.get("failures", 0)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**6:
        return value
    return None


def due(
    state: dict[str, Any] | None,
    now: dt.datetime,
    *,
    interval: int = INTERVAL_HOURS,
    backoff: int = BACKOFF_HOURS,
) -> tuple[bool, str]:
    """Whether a run is due now, and why (or why not). A state that cannot be read (a
    value of another type, a last run dated after now) never delays a run."""
    if not isinstance(state, dict) or state.get("last_run") is None:
        return True, "no earlier run"
    last, failures = _parse(state.get("last_run")), _failures(state)
    if last is None or failures is None:
        return True, "the schedule's state cannot be read (last_run, failures); running"
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
    state: dict[str, Any] | None, now: dt.datetime, *, passed: bool, commit: str
) -> dict[str, Any]:
    """The state after a run on `commit`."""
    failures = 0 if passed else (_failures(state or {}) or 0) + 1
    return {
        "last_run": _format(now),
        "last_commit": commit,
        "last_result": "pass" if passed else "fail",
        "failures": failures,
    }


POINTER_KEYS = ("pairing", "core_url", "core_commit", "plugin_commit", "time")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def pointer_problem(pointer: Any, name: str, now: dt.datetime) -> str | None:
    """Why a signed last-known-good pointer cannot be the pointer of pairing `name` now
    (another pairing's, no time, a time to come, a key missing or not text, a core commit
    that is not a commit id), else None."""
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
