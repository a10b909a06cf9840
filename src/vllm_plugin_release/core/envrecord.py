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
    parse_backend,
    parse_locked,
    parse_made_with,
)
from vllm_plugin_release.core.errors import RecordProblem, field_shown

# Where a pairing environment is for: this machine's cpu runner, or the hardware runner.
SITES = ("cpu", "hardware")
PLATFORM_CHECK = "platform activation (vllm.platforms.current_platform)"  # inenv/envcheck.py


class EnvCheck(NamedTuple):
    """One of the environment's checks (env.json's `checks`): its name, status (pass, fail,
    skipped, deferred), detail and, for a failure that is the plugin's or the spec's own,
    `finding`; `value`, what it found (the platform class it resolved, ...), when it says."""

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
    """One module the environment tried to import (env.json's `runtime_modules` and
    `plugin_modules`): imported, failed or skipped, and why."""

    module: str
    status: str
    reason: str | None

    def to_json(self) -> dict[str, str]:
        out = {"module": self.module, "status": self.status}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


class StandIn(NamedTuple):
    """The stand-in runtime checked in an overlay environment (`runtime.stand_in`): where
    its source is, its wheel's sha256, what was checked and the overlay's python."""

    path: str | None
    wheel_sha256: str | None
    status: str | None
    python: str | None

    def to_json(self) -> dict[str, str]:
        return {key: value for key, value in self._asdict().items() if value is not None}


class EnvRuntime(NamedTuple):
    """The vendor runtime as the environment found it (env.json's `runtime`): its name and
    module, `status` (present, absent, none), why, the stand-in checked in an overlay,
    what the lock installed (version, commit, requirement, wheel) and the requirements
    left to the vendor image (`left_out`: them and why). All None: no runtime named."""

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
        """The object as written: a named runtime always states its name, module, reason
        and status (null when none), the rest when given."""
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
        """Whether env.json names a runtime at all (its `runtime` holds anything)."""
        return any(value is not None for value in self)

    @property
    def stand_in_python(self) -> Path | None:
        """`stand_in.python`: the overlay's python, when a stand-in was checked."""
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
        """The stand-in overlay's python (`runtime.stand_in.python`), when one was checked."""
        return self.runtime.stand_in_python

    @property
    def platform(self) -> str | None:
        """The platform class vLLM resolved in the environment (its first platform
        activation check's value, whatever its status); None when none or not text."""
        for check in self.checks:
            if check.name == PLATFORM_CHECK:
                value = check.value
                return value if isinstance(value, str) and value else None
        return None


def _text(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise RecordProblem(f"{key!r} is {field_shown(value)}, expected text")
    return value


def _python(data: Mapping[str, Any]) -> Path:
    value = data.get("python")
    if not isinstance(value, str) or not value:
        raise RecordProblem(f"'python' is {field_shown(value)}, expected the environment's python")
    if "\0" in value or not value.startswith("/"):
        raise RecordProblem(f"'python' is {field_shown(value)}, expected an absolute path")
    return Path(value)


def _runner(data: Mapping[str, Any]) -> str:
    value = data.get("runner")
    if value not in SITES:
        raise RecordProblem(f"'runner' is {field_shown(value)}, expected one of {', '.join(SITES)}")
    return str(value)


def _wheel(data: Mapping[str, Any], key: str) -> WheelRef | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise RecordProblem(f"{key!r} is {field_shown(value)}, expected an object")
    filename, sha256 = value.get("filename"), value.get("sha256")
    if not isinstance(filename, str) or not filename.endswith(".whl") or "/" in filename:
        raise RecordProblem(f"'{key}.filename' is {field_shown(filename)}, expected a wheel's name")
    if not isinstance(sha256, str) or not SHA256.fullmatch(sha256):
        raise RecordProblem(f"'{key}.sha256' is {field_shown(sha256)}, expected 64 hex digits")
    return WheelRef(filename, sha256)


def _objects(data: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise RecordProblem(f"{key!r} is {field_shown(value)}, expected a list of objects")
    return value


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise RecordProblem(f"{key!r} is {field_shown(value)}, expected an object")
    return value


def _texts(item: Mapping[str, Any], where: str, required: tuple[str, ...], *optional: str) -> None:
    for key in required + optional:
        value = item.get(key)
        if (value is not None or key in required) and not isinstance(value, str):
            raise RecordProblem(f"'{where}.{key}' is {field_shown(value)}, expected text")


def _checks(data: Mapping[str, Any]) -> list[EnvCheck]:
    out = []
    for i, check in enumerate(_objects(data, "checks")):
        _texts(check, f"checks[{i}]", ("name", "status"), "detail", "finding")
        detail, finding, value = check.get("detail"), check.get("finding"), check.get("value")
        name, status = check["name"], check["status"]
        out.append(EnvCheck(name, status, detail or "", finding, value, "value" in check))
    return out


def _modules(data: Mapping[str, Any], key: str) -> list[ModuleImport]:
    out = []
    for i, module in enumerate(_objects(data, key)):
        _texts(module, f"{key}[{i}]", ("module", "status"), "reason")
        out.append(ModuleImport(module["module"], module["status"], module.get("reason")))
    return out


class EnvChecks(NamedTuple):
    """The environment's checks and module imports, as inenv/envcheck.py answers them (and
    env.json keeps them)."""

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
    texts = ("name", "module", "status", "reason", "version", "commit", "requirement")
    _texts(runtime, "runtime", (), *texts)
    stand_in = _object(runtime, "stand_in")
    if stand_in is not None:
        _texts(stand_in, "runtime.stand_in", (), *StandIn._fields)
    left = _object(runtime, "left_out")
    left_out = None
    if left is not None:
        _texts(left, "runtime.left_out", (), "reason")
        needs = left.get("requirements")
        if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
            shown = field_shown(needs)
            raise RecordProblem(f"'runtime.left_out.requirements' is {shown}, expected texts")
        left_out = (tuple(needs), left.get("reason"))
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
        runner=_runner(data),
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
    """What the environment's checks found: the part of env.json they make (`runtime`,
    `checks`, `runtime_modules`, `plugin_modules`, the `interpreter` it was made from),
    kept beside the environment by the env stage (`.vpr-env.json`) for a later run to
    reuse; read and checked (`parse_found`), written back by `to_json`."""

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
    if not isinstance(data.get("checks"), list):
        raise RecordProblem(f"'checks' is {field_shown(data.get('checks'))}, expected a list")
    return EnvFound(
        _runtime(data),
        _checks(data),
        _modules(data, "runtime_modules"),
        _modules(data, "plugin_modules"),
        parse_made_with(data),
    )
