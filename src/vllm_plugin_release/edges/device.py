"""The hardware runner's probe: is the vendor runtime importable (and not a stand-in), is a
device node visible, is the spec's mesh variable (Tenstorrent: MESH_DEVICE) set? Only what
was observed is reported as present."""

from __future__ import annotations

import glob
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypedDict

from vllm_plugin_release.core.bounded import tomllib
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import settings

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec

_IMPORT_PROBE = """
import importlib, json, sys
name = sys.argv[1]
out = {"python": sys.executable}
try:
    module = importlib.import_module(name)
except BaseException as exc:
    out["status"] = "absent"
    out["error"] = f"{type(exc).__name__}: {exc}"[:500]
else:
    out["status"] = "present"
    out["file"] = getattr(module, "__file__", None)
    out["version"] = str(getattr(module, "__version__", "") or "") or None
    try:
        from importlib.metadata import packages_distributions, version
        dists = packages_distributions().get(name.split(".")[0], [])
        out["distributions"] = {d: version(d) for d in dists}
    except Exception as exc:
        out["distributions"] = {}
print(json.dumps(out))
"""


class _RuntimeJson(TypedDict):
    name: str | None
    module: str
    python: str
    status: str


class RuntimeJson(_RuntimeJson, total=False):
    error: str
    file: str | None
    version: str | None
    distributions: dict[str, str]


class DevicesJson(TypedDict):
    glob: str | None
    found: list[str]


class MeshJson(TypedDict):
    variable: str | None
    expected: str | None
    value: str | None


class ProbeJson(TypedDict):
    """hardware-probe.json (`Probe.to_json`)."""

    ok: bool
    runtime: RuntimeJson
    devices: DevicesJson
    mesh_device: MeshJson
    missing: list[str]


@dataclass(frozen=True, slots=True)
class RuntimeFound:
    """What importing the vendor runtime showed (`runtime_found`); `distributions` is None when
    the module did not import."""

    name: str | None  # the spec's [runtime] name
    module: str
    python: str
    status: str  # present, absent or stand-in
    error: str | None = None  # why it is absent
    file: str | None = None
    version: str | None = None
    distributions: Mapping[str, str] | None = None  # distribution -> version

    def to_json(self) -> RuntimeJson:
        out: RuntimeJson = {
            "name": self.name,
            "module": self.module,
            "python": self.python,
            "status": self.status,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.distributions is not None:
            out["file"] = self.file
            out["version"] = self.version
            out["distributions"] = dict(self.distributions)
        return out


class DevicesFound(NamedTuple):
    """The device nodes the spec's `device_glob` matched (glob None: no check configured)."""

    glob: str | None
    found: tuple[str, ...]

    def to_json(self) -> DevicesJson:
        return {"glob": self.glob, "found": list(self.found)}


class MeshFound(NamedTuple):
    """The spec's mesh variable, the mesh it expects, and the value in the environment."""

    variable: str | None
    expected: str | None
    value: str | None

    def to_json(self) -> MeshJson:
        return {"variable": self.variable, "expected": self.expected, "value": self.value}


@dataclass(frozen=True, slots=True)
class Probe:
    runtime: RuntimeFound
    devices: DevicesFound
    mesh: MeshFound
    missing: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing

    def to_json(self) -> ProbeJson:
        return {
            "ok": self.ok,
            "runtime": self.runtime.to_json(),
            "devices": self.devices.to_json(),
            "mesh_device": self.mesh.to_json(),
            "missing": list(self.missing),
        }


def _stand_in_name(spec: Spec) -> str | None:
    stand_in = spec.runtime.stand_in if spec.runtime else None
    if not stand_in:
        return None
    try:
        data = tomllib.loads((spec.resolve(stand_in) / "pyproject.toml").read_text())
        return str(data["project"]["name"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


def _answer_problem(answer: object) -> str | None:
    """What is wrong with the import subprocess's answer (None: the shape it always has)."""
    if not isinstance(answer, dict):
        return f"not a JSON object but {type(answer).__name__}"
    want = {"present": ("file", "version", "distributions"), "absent": ("error",)}
    status = answer.get("status")
    if status not in want or not isinstance(answer.get("python"), str):
        return f"'status' {status!r} / 'python' {answer.get('python')!r} unexpected"
    if list(answer) != ["python", "status", *want[status]]:
        return f"keys {', '.join(map(str, answer))}; expected python, status, " + ", ".join(
            want[status]
        )
    if status == "absent":
        return None if isinstance(answer["error"], str) else "'error' is not text"
    if any(answer[k] is not None and not isinstance(answer[k], str) for k in ("file", "version")):
        return "'file' or 'version' is neither text nor null"
    dists = answer["distributions"]
    if not isinstance(dists, dict) or not all(isinstance(v, str) for v in dists.values()):
        return "'distributions' is not an object of versions"
    return None


def runtime_found(answer: object, name: str | None, module: str, python: Path) -> RuntimeFound:
    """The import subprocess's answer as a record, checked once; one of another shape says
    the runtime is absent, and why."""
    problem = _answer_problem(answer)
    if problem is not None or not isinstance(answer, dict):
        return RuntimeFound(name, module, str(python), "absent", f"probe answered: {problem}")
    if answer["status"] == "absent":
        return RuntimeFound(name, module, answer["python"], "absent", answer["error"])
    found = answer["file"], answer["version"], dict(answer["distributions"])
    return RuntimeFound(name, module, answer["python"], "present", None, *found)


def import_runtime(
    python: Path, module: str, name: str | None = None, timeout: float = 300
) -> RuntimeFound:
    """Import `module` in `python` (a subprocess) and say what happened."""
    try:
        done = subprocess.run(
            [str(python), "-c", _IMPORT_PROBE, module],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return RuntimeFound(name, module, str(python), "absent", "python not found")
    except subprocess.TimeoutExpired:
        return RuntimeFound(name, module, str(python), "absent", f"import took > {timeout} s")
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr or done.stdout).strip()[-300:]
        return RuntimeFound(name, module, str(python), "absent", f"probe failed: {tail}")
    return runtime_found(answer, name, module, python)


def probe(
    spec: Spec,
    python: Path,
    device_glob: str | None,
    mesh_device: str | None,
    environ: dict[str, str] | None = None,
    mesh_variable: str | None = None,
) -> Probe:
    """Observe the runtime, the device and the mesh variable (from `[conformance.hardware]`); list
    what is missing."""
    environ = dict(os.environ if environ is None else environ)
    module = spec.runtime_module
    if spec.runtime is None or not module:
        raise BadInput(
            f"{spec.path}: [runtime] module is not set; the hardware part needs the vendor "
            "runtime's import name (e.g. ttnn)"
        )
    missing: list[str] = []
    runtime = import_runtime(python, module, spec.runtime.name)
    stand_in = _stand_in_name(spec)
    if runtime.status == "present" and stand_in and stand_in in (runtime.distributions or {}):
        runtime = replace(runtime, status="stand-in")
        missing.append(
            f"runtime {module!r} in {python} is the stand-in {stand_in} (a test double), "
            "not the vendor runtime"
        )
    elif runtime.status != "present":
        missing.append(
            f"runtime module {module!r} is not importable in {python} ({runtime.error or 'absent'})"
        )
    if device_glob:
        nodes = sorted(glob.glob(device_glob))
        devices = DevicesFound(device_glob, tuple(nodes))
        if not nodes:
            missing.append(f"no device visible: nothing matches {device_glob}")
    else:
        devices = DevicesFound(None, ())
        missing.append(
            "no device check configured: set [conformance.hardware] device_glob "
            f"(the device nodes of runtime {module!r})"
        )
    mesh = MeshFound(
        mesh_variable, mesh_device, environ.get(mesh_variable) if mesh_variable else None
    )
    if mesh_variable:
        if not mesh.value:
            want = f" (expected {mesh_device})" if mesh_device else ""
            missing.append(f"{mesh_variable} is not set{want}")
        elif mesh_device and mesh.value.upper() != mesh_device.upper():
            missing.append(
                f"{mesh_variable}={mesh.value} but the spec's mesh is {mesh_device} "
                f"([conformance.hardware] of {spec.path})"
            )
    return Probe(runtime=runtime, devices=devices, mesh=mesh, missing=tuple(missing))


def runtime_env_from_environ() -> Path | None:
    """$VPR_RUNTIME_ENV: the vendor runtime's Python environment on the runner."""
    value = settings.text("VPR_RUNTIME_ENV")
    return Path(value) if value else None
