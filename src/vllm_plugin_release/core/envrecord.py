"""The pairing environment's record (env.json) as a typed, frozen value: its one reader
(`records.env_record`), whose fields every layer above uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.core.buildrecord import (
    SHA256,
    LockedFile,
    MadeWith,
    RunnerFacts,
    WheelRef,
    checked,
    parse_backend,
    parse_locked,
    parse_made_with,
    text_fields,
    text_list,
    text_or_none,
)
from vllm_plugin_release.core.errors import RecordProblem, field_shown

# Where a pairing environment is for: this machine's cpu runner, or the hardware runner.
SITES = ("cpu", "hardware")
PLATFORM_CHECK = "platform activation (vllm.platforms.current_platform)"  # inenv/envcheck.py


class EnvCheck(NamedTuple):
    """One of env.json's `checks`: status pass, fail, skipped or deferred; `finding` for a
    failure that is the plugin's or the spec's own; `value`, what it found, when it says."""

    name: str
    status: str
    detail: str
    finding: str | None = None
    value: object = None
    says_value: bool = False  # whether it gives `value` (null included)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status, "detail": self.detail}
        if self.finding is not None:
            out["finding"] = self.finding
        if self.says_value:
            out["value"] = self.value
        return out


class ModuleImport(NamedTuple):
    """A module the environment tried to import: imported, failed or skipped, and why."""

    module: str
    status: str
    reason: str | None

    def to_json(self) -> dict[str, str]:
        return {key: value for key, value in self._asdict().items() if value is not None}


class StandIn(NamedTuple):
    """The stand-in runtime checked in an overlay environment (`runtime.stand_in`)."""

    path: str | None
    wheel_sha256: str | None
    status: str | None
    python: str | None

    def to_json(self) -> dict[str, str]:
        return {key: value for key, value in self._asdict().items() if value is not None}


class EnvRuntime(NamedTuple):
    """The vendor runtime as the environment found it (env.json's `runtime`; `status`: present,
    absent or none; `left_out`: requirements left to the vendor image, and why). All None: no
    runtime named."""

    name: str | None = None
    module: str | None = None
    status: str | None = None
    reason: str | None = None
    stand_in: StandIn | None = None
    version: str | None = None
    commit: str | None = None
    requirement: str | None = None
    wheel: LockedFile | None = None
    left_out: tuple[tuple[str, ...], str | None] | None = None

    def to_json(self) -> dict[str, Any]:
        """A named runtime states its name, module, reason and status, the rest when given."""
        if not self.named:
            return {}
        out: dict[str, Any] = {k: getattr(self, k) for k in ("name", "module", "reason", "status")}
        for key in ("version", "commit", "requirement"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.wheel is not None:
            out["wheel"] = self.wheel.to_json()
        if self.stand_in is not None:
            out["stand_in"] = self.stand_in.to_json()
        if self.left_out is not None:
            out["left_out"] = {"requirements": list(self.left_out[0]), "reason": self.left_out[1]}
        return out

    @property
    def named(self) -> bool:
        return any(value is not None for value in self)

    @property
    def stand_in_python(self) -> Path | None:
        python = self.stand_in.python if self.stand_in is not None else None
        return Path(python) if python else None


class EnvRecord(NamedTuple):
    """dist/NAME/env.json, read and checked (`parse`)."""

    python: Path  # the environment's python: absolute
    runner: str  # the site it was made for: one of SITES
    platform_class: str | None  # the plugin's Platform class, when its runtime imported
    lock_file: str | None  # the pairing lock, as the spec names it
    lock_sha256: str | None
    core_wheel: WheelRef | None  # the wheels installed (their build records' `wheel`)
    plugin_wheel: WheelRef | None
    runtime: EnvRuntime  # the vendor runtime: name, module, status, reason, ... (all None)
    checks: Sequence[EnvCheck]  # the environment's checks
    runtime_modules: Sequence[ModuleImport]  # the plugin's modules that import the runtime
    plugin_modules: Sequence[ModuleImport]  # every module of the plugin
    backend: RunnerFacts | None  # where the environment runs (the runner's description)
    interpreter: MadeWith | None  # what its venv was made from (None: a --runtime-env's)

    @property
    def runtime_present(self) -> bool:
        return self.runtime.status == "present"

    @property
    def stand_in_python(self) -> Path | None:
        return self.runtime.stand_in_python

    @property
    def platform(self) -> str | None:
        """The platform class vLLM resolved (the first platform activation check's value,
        whatever its status); None when none or not text."""
        for check in self.checks:
            if check.name == PLATFORM_CHECK:
                value = check.value
                return value if isinstance(value, str) and value else None
        return None


def _text(data: Mapping[str, Any], key: str) -> str | None:
    return checked(data.get(key), key, text_or_none, "text")


def _python(data: Mapping[str, Any]) -> Path:
    value = checked(
        data.get("python"), "python", lambda v: isinstance(v, str) and v, "the environment's python"
    )
    checked(value, "python", lambda v: "\0" not in v and v.startswith("/"), "an absolute path")
    return Path(value)


def _wheel(data: Mapping[str, Any], key: str) -> WheelRef | None:
    value = _object(data, key)
    if value is None:
        return None
    filename, sha256 = value.get("filename"), value.get("sha256")
    if not isinstance(filename, str) or not filename.endswith(".whl") or "/" in filename:
        raise RecordProblem(f"'{key}.filename' is {field_shown(filename)}, expected a wheel's name")
    if not isinstance(sha256, str) or not SHA256.fullmatch(sha256):
        raise RecordProblem(f"'{key}.sha256' is {field_shown(sha256)}, expected 64 hex digits")
    return WheelRef(filename, sha256)


def _objects(data: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    value = data.get(key)
    ok = value is None or (isinstance(value, list) and all(isinstance(v, Mapping) for v in value))
    return checked(value, key, lambda _: ok, "a list of objects") or []


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    return checked(data.get(key), key, lambda v: v is None or isinstance(v, Mapping), "an object")


def _checks(data: Mapping[str, Any]) -> list[EnvCheck]:
    out = []
    for i, check in enumerate(_objects(data, "checks")):
        text_fields(check, f"checks[{i}]", ("name", "status"), ("detail", "finding"))
        detail, finding, value = check.get("detail"), check.get("finding"), check.get("value")
        name, status = check["name"], check["status"]
        out.append(EnvCheck(name, status, detail or "", finding, value, "value" in check))
    return out


def _modules(data: Mapping[str, Any], key: str) -> list[ModuleImport]:
    out = []
    for i, module in enumerate(_objects(data, key)):
        text_fields(module, f"{key}[{i}]", ("module", "status"), ("reason",))
        out.append(ModuleImport(module["module"], module["status"], module.get("reason")))
    return out


class EnvChecks(NamedTuple):
    """The environment's checks and module imports, as inenv/envcheck.py answers them."""

    checks: list[EnvCheck]
    runtime_modules: list[ModuleImport]
    plugin_modules: list[ModuleImport]


def parse_checks(data: Mapping[str, Any]) -> EnvChecks:
    """`checks`, `runtime_modules` and `plugin_modules` of `data` (absent: none);
    RecordProblem naming the first key missing or of another type."""
    return EnvChecks(
        _checks(data), _modules(data, "runtime_modules"), _modules(data, "plugin_modules")
    )


def _runtime(data: Mapping[str, Any]) -> EnvRuntime:
    runtime = _object(data, "runtime") or {}
    keys = ("name", "module", "status", "reason", "version", "commit", "requirement")
    text_fields(runtime, "runtime", (), keys)
    stand_in = _object(runtime, "stand_in")
    if stand_in is not None:
        text_fields(stand_in, "runtime.stand_in", (), StandIn._fields)
    left = _object(runtime, "left_out")
    left_out = None
    if left is not None:
        text_fields(left, "runtime.left_out", (), ("reason",))
        needs = text_list(left.get("requirements"), "runtime.left_out.requirements", "texts")
        left_out = (needs, left.get("reason"))
    return EnvRuntime(
        *(runtime.get(key) for key in ("name", "module", "status", "reason")),
        None if stand_in is None else StandIn(*(stand_in.get(k) for k in StandIn._fields)),
        *(runtime.get(key) for key in ("version", "commit", "requirement")),
        parse_locked(runtime.get("wheel"), "runtime.wheel"),
        left_out,
    )


def parse(data: Mapping[str, Any]) -> EnvRecord:
    """The env record from its JSON object; RecordProblem naming the first key missing or
    of another type (`python` and `runner` are required, the rest typed when present)."""
    checks = _checks(data)
    return EnvRecord(
        python=_python(data),
        runner=checked(
            data.get("runner"), "runner", SITES.__contains__, f"one of {', '.join(SITES)}"
        ),
        platform_class=_text(data, "platform_class"),
        lock_file=_text(data, "lock_file"),
        lock_sha256=_text(data, "lock_sha256"),
        core_wheel=_wheel(data, "core_wheel"),
        plugin_wheel=_wheel(data, "plugin_wheel"),
        runtime=_runtime(data),
        checks=checks,
        runtime_modules=_modules(data, "runtime_modules"),
        plugin_modules=_modules(data, "plugin_modules"),
        backend=parse_backend(data),
        interpreter=parse_made_with(data),
    )


class EnvFound(NamedTuple):
    """The part of env.json the environment's checks make, kept beside the environment
    (`.vpr-env.json`) for a later run to reuse."""

    runtime: EnvRuntime
    checks: Sequence[EnvCheck]
    runtime_modules: Sequence[ModuleImport]
    plugin_modules: Sequence[ModuleImport]
    interpreter: MadeWith | None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runtime": self.runtime.to_json(),
            "checks": [c.to_json() for c in self.checks],
            "runtime_modules": [m.to_json() for m in self.runtime_modules],
            "plugin_modules": [m.to_json() for m in self.plugin_modules],
        }
        if self.interpreter is not None:
            out["interpreter"] = self.interpreter.to_json()
        return out


def parse_found(data: Mapping[str, Any]) -> EnvFound:
    """The checks' findings from their JSON object; RecordProblem naming the first key
    missing or of another type (`checks` is required)."""
    checked(data.get("checks"), "checks", lambda v: isinstance(v, list), "a list")
    return EnvFound(
        _runtime(data),
        _checks(data),
        _modules(data, "runtime_modules"),
        _modules(data, "plugin_modules"),
        parse_made_with(data),
    )
