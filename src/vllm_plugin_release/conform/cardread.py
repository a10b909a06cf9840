"""scorecard.json read back for the conform layer: bounded, then checked key by key (a bad
key is exit 2 naming the file and the dotted key); the checks come back as `CheckResult`s."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.conform import STATUSES, CheckResult, Evidence
from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput

VERDICTS = ("fleet", "pilot", "lab")
# Evidence's keys and the kinds each may hold (`value` is any JSON).
_EVIDENCE: dict[str, tuple[type, ...]] = {
    "note": (str,),
    "file": (str,),
    "line": (int,),
    "source": (str,),
}


class Scorecard(NamedTuple):
    """A scorecard as read: what its readers use, typed; `raw` is the object as read."""

    verdict: str
    runner: str
    pairing: Mapping[str, Any]
    results: tuple[CheckResult, ...]  # in the file's order (by name)
    raw: Mapping[str, Any]


def read(dist: Path, hint: str | None = None) -> Scorecard:
    """dist/scorecard.json, bounded and checked; BadInput naming the file and the key."""
    path = dist / records.SCORECARD
    producer = hint or records.producer(records.SCORECARD)
    try:
        return records.read_with(
            dist, records.SCORECARD, lambda data: parse(data, str(path)), producer
        )
    except _Bad as bad:
        raise BadInput(f"{path}: {bad.args[0]}", hint=f"run `{producer}` again") from None


class _Bad(Exception):
    """A key of the card that is missing or of another kind (the reader adds the file)."""


def parse(data: Any, where: str) -> Scorecard:
    """The card `data` checked and typed; BadInput naming `where` and the key."""
    try:
        return _parse(data)
    except _Bad as bad:
        raise BadInput(f"{where}: {bad.args[0]}") from None


def _parse(data: Any) -> Scorecard:
    if not isinstance(data, dict):
        raise _Bad("not a JSON object")
    verdict = data.get("verdict")
    if verdict not in VERDICTS:
        raise _Bad(f"key 'verdict' must be one of {', '.join(VERDICTS)}, got {verdict!r}")
    runner = _kind(data, "runner", str, "")
    pairing = _kind(data, "pairing", dict, "")
    checks = _kind(data, "checks", dict, "")
    results = tuple(_result(str(name), entry) for name, entry in checks.items())
    return Scorecard(verdict, runner, pairing, results, data)


def _kind(node: dict[str, Any], key: str, kind: type, at: str) -> Any:
    value = node.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        what = {str: "text", dict: "an object", list: "a list"}[kind]
        raise _Bad(f"key '{at}{key}' is missing or not {what} ({_short(value)})")
    return value


def _result(name: str, entry: Any) -> CheckResult:
    at = f"checks.{name}"
    if not isinstance(entry, dict):
        raise _Bad(f"key '{at}' is not an object ({_short(entry)})")
    status = entry.get("status")
    if status not in STATUSES:
        raise _Bad(f"key '{at}.status' must be one of {', '.join(STATUSES)}, got {status!r}")
    summary = _kind(entry, "summary", str, f"{at}.") if "summary" in entry else ""
    evidence = entry.get("evidence", [])
    if not isinstance(evidence, list):
        raise _Bad(f"key '{at}.evidence' is not a list ({_short(evidence)})")
    found = [_evidence(e, f"{at}.evidence[{n}]") for n, e in enumerate(evidence)]
    threshold = _kind(entry, "threshold", dict, f"{at}.") if "threshold" in entry else {}
    details = _kind(entry, "details", dict, f"{at}.") if "details" in entry else {}
    return CheckResult(name, status, summary, found, threshold, details)


def _evidence(item: Any, at: str) -> Evidence:
    if not isinstance(item, dict):
        raise _Bad(f"key '{at}' is not an object ({_short(item)})")
    unknown = sorted(set(item) - set(_EVIDENCE) - {"value"})
    if unknown:
        raise _Bad(f"key '{at}' has keys evidence never has: {', '.join(unknown)}")
    if not isinstance(item.get("note"), str):
        raise _Bad(f"key '{at}.note' is missing or not text ({_short(item.get('note'))})")
    for key, kinds in _EVIDENCE.items():
        value = item.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise _Bad(f"key '{at}.{key}' is of the wrong kind ({_short(value)})")
    return Evidence(**item)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
