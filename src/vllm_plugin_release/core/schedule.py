"""When the nightly runs again: every `interval` hours while it passes, backing off to
`backoff` hours while it fails (as a core-main build that keeps failing needs a person, not
three more runs a day). Pure; the state is a small JSON document kept in the store."""

from __future__ import annotations

import datetime as dt
from typing import Any

INTERVAL_HOURS = 8
BACKOFF_HOURS = 24


def _parse(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def _format(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def due(
    state: dict[str, Any] | None,
    now: dt.datetime,
    *,
    interval: int = INTERVAL_HOURS,
    backoff: int = BACKOFF_HOURS,
) -> tuple[bool, str]:
    """Whether a run is due now, and why (or why not)."""
    last = _parse((state or {}).get("last_run"))
    if last is None:
        return True, "no earlier run"
    failures = int((state or {}).get("failures", 0))
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
    failures = 0 if passed else int((state or {}).get("failures", 0)) + 1
    return {
        "last_run": _format(now),
        "last_commit": commit,
        "last_result": "pass" if passed else "fail",
        "failures": failures,
    }
