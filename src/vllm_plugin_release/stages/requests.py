"""What each lock holds, decided from the spec and the verified sources (pure).

Shared by the lock stage (which writes the locks), the stages that check a lock
before using it (build-core, build-plugin, env) and the flows that re-lock (bump,
baseline): one definition of the core's build requirements and of the pairing
environment's requirements, and of what a runner does about the vendor runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from vllm_plugin_release.core.compat import tomllib
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.lockfile import LockRequest, core_build_request
from vllm_plugin_release.spec.model import Spec


def build_request(spec: Spec, tree: Path) -> tuple[LockRequest, str]:
    """The core build lock's request, and the torch requirement the core itself declares."""
    return core_build_request(tree, spec.build.python, spec.build.torch, spec.core.version)


@dataclass(frozen=True)
class RuntimePlan:
    """What the runner does about the vendor runtime, decided before anything installs."""

    name: str
    module: str | None
    status: str  # "install" | "absent" | "runtime-env" | "none"
    reason: str
    requirement: str | None = None


def read_requirements_file(path: Path) -> list[str]:
    """Requirement lines of a requirements file (comments and blank lines dropped)."""
    out: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise BadInput(f"{path}:{number}: option lines ({line.split()[0]}) are not supported")
        try:
            Requirement(line)
        except InvalidRequirement as exc:
            raise BadInput(f"{path}:{number}: not a requirement: {line!r} ({exc})")
        out.append(line)
    return out


def plugin_dependencies(root: Path) -> list[str]:
    """[project].dependencies of the plugin source (static metadata)."""
    path = root / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{path}: cannot read ({exc})")
    project = data.get("project", {})
    if "dependencies" in project.get("dynamic", []):
        raise BadInput(f"{path}: dynamic dependencies are not supported; declare them statically")
    return list(project.get("dependencies", []))


def runtime_plan(spec: Spec, runner: str, runtime_env: Path | None) -> RuntimePlan:
    rt = spec.runtime
    if not rt:
        return RuntimePlan("none", None, "none", "the spec names no vendor runtime")
    name, module = rt["name"], rt.get("module")
    if runtime_env is not None:
        return RuntimePlan(name, module, "runtime-env", f"from the environment at {runtime_env}")
    pythons = rt.get("python")
    if rt.get("package") and rt.get("version"):
        requirement = f"{rt['package']}=={rt['version']}"
        if pythons and spec.build.python not in pythons:
            reason = (
                f"{rt['package']} ships wheels for CPython {', '.join(pythons)} only; "
                f"this pairing is built for {spec.build.python}"
            )
            return RuntimePlan(name, module, "absent", reason, requirement)
        return RuntimePlan(name, module, "install", f"{requirement} from the index", requirement)
    if pythons and spec.build.python not in pythons:
        reason = (
            f"{rt.get('package', module)} ships wheels for CPython {', '.join(pythons)} only; "
            f"this pairing is built for {spec.build.python}"
        )
    else:
        reason = "the spec pins no runtime package; give --runtime-env on the hardware runner"
    return RuntimePlan(name, module, "absent", reason)


def env_lock_request(
    spec: Spec, core_tree: Path, plugin_root: Path, plan: RuntimePlan
) -> LockRequest:
    common = core_tree / "requirements" / "common.txt"
    if not common.exists():
        raise BadInput(f"{common}: not in the verified core source", hint="check [core] version")
    requirements = [
        *read_requirements_file(common),
        f"torch=={spec.build.torch}",
        *plugin_dependencies(plugin_root),
        *spec.env.get("requirements", ["pytest"]),
    ]
    if plan.status == "install" and plan.requirement:
        requirements.append(plan.requirement)
    return LockRequest(
        name=f"env-{spec.name}",
        requirements=tuple(requirements),
        overrides=tuple(spec.env.get("overrides", [])),
        python=spec.build.python,
        title=f"Pairing environment {spec.name}: vLLM {spec.core.version} requirements/common.txt"
        f" + {spec.plugin.get('name', 'plugin')} + torch=={spec.build.torch}",
        notes=(
            "Inputs: requirements/common.txt from the verified sdist, the plugin's "
            "dependencies, [env] requirements; [env] overrides win.",
        ),
    )
