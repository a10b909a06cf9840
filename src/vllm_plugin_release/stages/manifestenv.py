"""env.json as the manifest stage reads it (`EnvIntake`): the runner, the pairing lock, the
vendor runtime the environment observed and the platform class vLLM resolved there; only
what the manifest's `environment`, `runtime` and `platform` sections are made of.

`parse_env_intake` takes the object `core/records.read_with` read (bounded, a JSON object
with a `runner`) and checks each key it keeps: BadInput naming env.json, the dotted key and
the command that writes it (`stages/manifestkeys`). A value the manifest copies is checked
as the manifest's schema would check it; one it never copies is not read. It is its own
record, not `core/envrecord.EnvRecord`: that one refuses an env.json without `python` and
the rest, which the manifest has always accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_plugin_release.core.records import ENV
from vllm_plugin_release.stages.manifestkeys import as_object, iterated, kind_problem, text_or_none

PLATFORM_CHECK = "platform activation (vllm.platforms.current_platform)"  # inenv/envcheck.py

# The keys of a locked wheel (the manifest schema's `locked_file`): required, then optional.
WHEEL_REQUIRED = ("filename", "sha256", "size")
WHEEL_OPTIONAL = ("version", "local", "source")


@dataclass(frozen=True)
class LockedWheel:
    """The vendor runtime's wheel as env.json names it (`runtime.wheel`, the schema's
    `locked_file`), copied into the manifest's `runtime.wheel` as written: `keys` are the
    keys env.json gives, in its order (an optional key only when given, null included)."""

    filename: str
    sha256: str
    size: int
    version: str | None
    local: str | None
    source: str | None
    keys: tuple[str, ...]

    def to_json(self) -> dict[str, str | int | None]:
        return {key: getattr(self, key) for key in self.keys}


@dataclass(frozen=True)
class ObservedRuntime:
    """The vendor runtime the environment observed (env.json's `runtime`, not empty).
    `name`: None when env.json gives none (the spec's name is used); `status` as written
    (None when it is not text: only `present` counts as found); `reason`: why it is absent,
    as the manifest's note shows it (the text of a value that is not text), None when none.
    `version`, `commit` and `wheel` are read only when it is present (None otherwise; a
    `commit` that is empty is None, the spec's pin is used; a `wheel` that is no object is
    None, left out of the manifest as ever)."""

    name: str | None
    status: str | None
    reason: str | None
    version: str | None
    commit: str | None
    wheel: LockedWheel | None

    @property
    def present(self) -> bool:
        return self.status == "present"


@dataclass(frozen=True)
class EnvIntake:
    """env.json as the manifest reads it. `runtime`: None when env.json names none (no key,
    or an empty value); `platform`: the value of its platform activation check (the first
    check of that name; None when it has none, or it is not text or empty)."""

    runner: str
    lock_file: str | None
    lock_sha256: str | None
    runtime: ObservedRuntime | None
    platform: str | None


def _truthy_text(value: Any, dotted: str) -> str | None:
    """`value` as text; None when it is empty (the manifest then takes the spec's)."""
    if not value:
        return None
    if not isinstance(value, str):
        raise kind_problem(ENV, dotted, "text")
    return value


def _wheel(value: Any) -> LockedWheel | None:
    """`runtime.wheel` as a locked wheel; None when it is no object (left out as ever)."""
    if not isinstance(value, dict):
        return None
    at = "runtime.wheel"
    for key in value:
        if key not in (*WHEEL_REQUIRED, *WHEEL_OPTIONAL):
            raise kind_problem(ENV, f"{at}.{key}", "absent (a locked wheel has no such key)")
    for key in ("filename", "sha256"):
        if not isinstance(value.get(key), str):
            raise kind_problem(ENV, f"{at}.{key}", "text")
    size = value.get("size")
    if type(size) is not int:
        raise kind_problem(ENV, f"{at}.size", "an integer")
    optional = [text_or_none(value.get(k), f"{at}.{k}", ENV) for k in WHEEL_OPTIONAL]
    return LockedWheel(value["filename"], value["sha256"], size, *optional, keys=tuple(value))


def _runtime(data: dict[str, Any]) -> ObservedRuntime | None:
    observed = as_object(data.get("runtime"), "runtime", ENV)
    if not observed:
        return None
    status = observed.get("status")
    present = status == "present"
    why = observed.get("reason")
    return ObservedRuntime(
        name=_truthy_text(observed.get("name"), "runtime.name"),
        status=status if isinstance(status, str) else None,
        reason=f"{why}" if why else None,
        version=text_or_none(observed.get("version"), "runtime.version", ENV) if present else None,
        commit=_truthy_text(observed.get("commit"), "runtime.commit") if present else None,
        wheel=_wheel(observed.get("wheel")) if present else None,
    )


def _platform(data: dict[str, Any]) -> str | None:
    for check in iterated(data.get("checks"), "checks", ENV):
        if isinstance(check, dict) and check.get("name") == PLATFORM_CHECK:
            value = check.get("value")
            return value if isinstance(value, str) and value else None
    return None


def parse_env_intake(data: Any) -> EnvIntake:
    """env.json's object (read by `records.read_with`: a JSON object with a `runner`) as
    the manifest reads it; BadInput naming env.json, the dotted key and `vpr env`."""
    runner = data.get("runner") if isinstance(data, dict) else None
    if not isinstance(runner, str):
        raise kind_problem(ENV, "runner", "text")
    return EnvIntake(
        runner=runner,
        runtime=_runtime(data),
        platform=_platform(data),
        lock_file=text_or_none(data.get("lock_file"), "lock_file", ENV),
        lock_sha256=text_or_none(data.get("lock_sha256"), "lock_sha256", ENV),
    )
