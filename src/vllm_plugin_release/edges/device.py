"""The hardware runner's probe: is the vendor runtime importable (and not a stand-in), is a
device node visible, is the spec's mesh variable (Tenstorrent: MESH_DEVICE) set? Only what
was observed is reported as present."""

from __future__ import annotations

import glob
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomllib

from vllm_plugin_release.core.errors import BadInput

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


@dataclass
class Probe:
    runtime: dict[str, Any]
    devices: dict[str, Any]
    mesh: dict[str, Any]
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "runtime": self.runtime,
            "devices": self.devices,
            "mesh_device": self.mesh,
            "missing": self.missing,
        }


def _stand_in_name(spec: Spec) -> str | None:
    stand_in = spec.runtime.get("stand_in")
    if not stand_in:
        return None
    try:
        data = tomllib.loads((spec.resolve(stand_in) / "pyproject.toml").read_text())
        return str(data["project"]["name"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


def import_runtime(python: Path, module: str, timeout: float = 300) -> dict[str, Any]:
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
        return {"python": str(python), "status": "absent", "error": "python not found"}
    except subprocess.TimeoutExpired:
        return {"python": str(python), "status": "absent", "error": f"import took > {timeout} s"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr or done.stdout).strip()[-300:]
        return {"python": str(python), "status": "absent", "error": f"probe failed: {tail}"}


def probe(
    spec: Spec,
    python: Path,
    device_glob: str | None,
    mesh_device: str | None,
    environ: dict[str, str] | None = None,
    mesh_variable: str | None = None,
) -> Probe:
    """Observe the runtime, the device and the mesh variable; list what is missing.

    `device_glob`, `mesh_variable` and `mesh_device` come from the spec's
    `[conformance.hardware]`; without a mesh variable there is no mesh to check."""
    environ = dict(os.environ if environ is None else environ)
    module = spec.runtime.get("module")
    if not spec.runtime or not module:
        raise BadInput(
            f"{spec.path}: [runtime] module is not set; the hardware part needs the vendor "
            "runtime's import name (e.g. ttnn)"
        )
    missing: list[str] = []
    runtime = {"name": spec.runtime.get("name"), "module": module, **import_runtime(python, module)}
    stand_in = _stand_in_name(spec)
    if runtime["status"] == "present" and stand_in and stand_in in runtime.get("distributions", {}):
        runtime["status"] = "stand-in"
        missing.append(
            f"runtime {module!r} in {python} is the stand-in {stand_in} (a test double), "
            "not the vendor runtime"
        )
    elif runtime["status"] != "present":
        missing.append(
            f"runtime module {module!r} is not importable in {python} "
            f"({runtime.get('error', 'absent')})"
        )
    if device_glob:
        nodes = sorted(glob.glob(device_glob))
        devices = {"glob": device_glob, "found": nodes}
        if not nodes:
            missing.append(f"no device visible: nothing matches {device_glob}")
    else:
        devices = {"glob": None, "found": []}
        missing.append(
            "no device check configured: set [conformance.hardware] device_glob "
            f"(the device nodes of runtime {module!r})"
        )
    mesh: dict[str, Any] = {
        "variable": mesh_variable,
        "expected": mesh_device,
        "value": environ.get(mesh_variable) if mesh_variable else None,
    }
    if mesh_variable:
        if not mesh["value"]:
            want = f" (expected {mesh_device})" if mesh_device else ""
            missing.append(f"{mesh_variable} is not set{want}")
        elif mesh_device and mesh["value"].upper() != mesh_device.upper():
            missing.append(
                f"{mesh_variable}={mesh['value']} but the spec's mesh is {mesh_device} "
                f"([conformance.hardware] of {spec.path})"
            )
    return Probe(runtime=runtime, devices=devices, mesh=mesh, missing=missing)


def runtime_env_from_environ() -> Path | None:
    """$VPR_RUNTIME_ENV: the vendor runtime's Python environment on the runner."""
    value = os.environ.get("VPR_RUNTIME_ENV")
    return Path(value) if value else None
