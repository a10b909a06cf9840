"""An in-environment job's answer read key by key as hostile input: a key amiss is a JobFailed
naming the job, the dotted key and what to run again."""

from __future__ import annotations

from vllm_plugin_release.core.errors import JobFailed, field_shown

# What to run again, per inenv module, when its answer is malformed.
RERUN = {
    "envcheck": "run `vpr env --spec FILE` again",
    "openapi": "run the capture again (`vpr api-contract --spec FILE --out PATH`)",
    "replay": "run `vpr replay --spec FILE` again",
    "workload": "run `vpr check workload --spec FILE` again",
}


def problem(job: str, key: str, value: object, wanted: str) -> JobFailed:
    """The error for answer key `key` of inenv `job` holding `value`, not `wanted`."""
    return malformed(job, f"{key!r} is {field_shown(value)}, expected {wanted}")


def malformed(job: str, why: str) -> JobFailed:
    """The error for an answer of inenv `job` that is not one: `why` names the key."""
    return JobFailed(
        f"inenv {job}: the answer's {why}",
        hint=f"the pairing environment's answer is malformed (the plugin's code runs there); "
        f"{RERUN.get(job, 'run it again')}",
    )


def text(value: object, job: str, key: str) -> str:
    if not isinstance(value, str):
        raise problem(job, key, value, "text")
    return value


def optional_text(value: object, job: str, key: str) -> str | None:
    return None if value is None else text(value, job, key)


def count(value: object, job: str, key: str) -> int:
    """An integer >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise problem(job, key, value, "a count (integer >= 0)")
    return value


def optional_number(value: object, job: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise problem(job, key, value, "a number")
    return value


def texts(value: object, job: str, key: str) -> list[str]:
    """A list of text."""
    if not isinstance(value, list):
        raise problem(job, key, value, "a list of text")
    return [text(item, job, f"{key}[{i}]") for i, item in enumerate(value)]
