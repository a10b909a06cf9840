"""What the typed records' readers share: the error naming a record's bad key, and how a
message shows the value found there (`buildrecord`, `envrecord`, `runnerfacts`, ...)."""

from __future__ import annotations


class RecordProblem(ValueError):
    """Why a mapping is not a build record: the dotted key and what is wrong with it."""


def field_shown(value: object) -> str:
    """A record's value as a message shows it (the typed records' readers share it)."""
    if value is None:
        return "missing"
    if isinstance(value, str | int | float | bool):
        return repr(value)[:80]
    return f"a {type(value).__name__}"
