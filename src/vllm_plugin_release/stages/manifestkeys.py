"""The manifest's reading of its stage records' keys: each key read by its dotted name,
BadInput naming the record, the key and the command that writes it (its producer)."""

from __future__ import annotations

from typing import Any

from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.records import producer as record_producer


def get_key(record: dict[str, Any], dotted: str, file: str, *, required: bool = True) -> Any:
    node: Any = record
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            if not required:
                return None
            raise problem(file, f"missing key {dotted!r}")
        node = node[part]
    return node


def problem(file: str, what: str) -> BadInput:
    """BadInput naming record `file` and `what` is wrong with it, and its producer."""
    producer = record_producer(file, "SPEC")
    return BadInput(
        f"{file}: {what}",
        hint=f"the record is incomplete or from another version; re-run `{producer}`",
    )


def kind_problem(file: str, dotted: str, expected: str) -> BadInput:
    return problem(file, f"{dotted!r} must be {expected}")


def as_object(value: Any, dotted: str, file: str) -> dict[str, Any]:
    """`value` (`file`'s `dotted` key) as an object: {} when empty; else BadInput."""
    if not value:
        return {}
    if not isinstance(value, dict):
        raise kind_problem(file, dotted, "an object")
    return value


def iterated(value: Any, dotted: str, file: str) -> list[Any] | str | dict[str, Any]:
    """`value` (`file`'s `dotted` key) to iterate: [] when empty; a number: BadInput."""
    if not value:
        return []
    if not isinstance(value, list | str | dict):
        raise kind_problem(file, dotted, "a list")
    return value


def text_or_none(value: Any, dotted: str, file: str) -> str | None:
    """`value` (`file`'s `dotted` key) as text or None; BadInput when it is neither."""
    if value is not None and not isinstance(value, str):
        raise kind_problem(file, dotted, "text or null")
    return value
