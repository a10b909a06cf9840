"""What each lock holds, decided from the spec and the verified sources (pure): the core's
build requirements, the pairing environment's, and what a runner does about the runtime."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core.bounded import tomllib
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.lockfile import LockRequest, read_build_requires, torch_requirement

# The plugin's inputs a lock records, so `vpr lock --check` works without the plugin source.
DEPENDENCIES_NOTE = "plugin-dependencies:"
BUILD_REQUIRES_NOTE = "plugin-build-requires:"


def recorded_line(label: str, items: list[str]) -> str:
    return f"{label} {json.dumps(items)}"


def _header_note(lock_text: str, label: str) -> str | None:
    """What a lock's header notes under `label`, or None."""
    for line in lock_text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(f"# {label} "):
            return line[len(label) + 3 :]
    return None


def recorded_inputs(lock_text: str, label: str) -> list[str] | None:
    """The plugin inputs a lock's header recorded under `label`, or None (none recorded)."""
    try:
        found = json.loads(_header_note(lock_text, label) or "null")
    except ValueError:
        return None
    ok = isinstance(found, list) and all(isinstance(i, str) for i in found)
    return found if ok else None


def build_request(spec: Spec, tree: Path) -> tuple[LockRequest, str]:
    """The core build lock's request (torch replaced by the spec's), and the torch requirement
    the core itself declares."""
    python, torch, version = spec.build.python, spec.build.torch, spec.core.version
    declared_torch = ""
    lines: list[str] = []
    for raw in read_build_requires(tree):
        try:
            req = Requirement(raw)
        except InvalidRequirement as exc:
            raise BadInput(f"{tree / 'pyproject.toml'}: bad build requirement {raw!r}: {exc}")
        if req.name == "torch":
            declared_torch = str(req)
        else:
            lines.append(str(req))
    lines += [torch_requirement(torch), "build"]  # build: the frontend run inside the env
    kind = "a CPU build" if torch.endswith("+cpu") else "the index's build for this Python"
    note = (
        f"vLLM {version} declares {declared_torch!r} in [build-system]; this build uses "
        f"torch=={torch} ({kind} the machine can install). The empty target compiles "
        "no kernels, so torch is only imported by setup.py."
    )
    title = f"Build requirements for vLLM {version} (VLLM_TARGET_DEVICE=empty), Python {python}"
    request = LockRequest(
        "build-core",
        tuple(sorted(lines)),
        python,
        platform=spec.build.platform,
        title=title,
        notes=(note,),
    )
    return request, declared_torch


@dataclass(frozen=True)
class RuntimePlan:
    """What the runner does about the vendor runtime, decided before anything installs."""

    name: str
    module: str | None
    status: str  # "install" | "absent" | "runtime-env" | "none"
    reason: str
    requirement: str | None = None
    no_wheel: bool = False  # pinned, but no wheel of it installs on the lock's platform


# A pairing lock made where the pinned runtime has no wheel for its Python and platform
# says so in its header: the environment is made without it, and says why.
ABSENT_NOTE = "runtime-absent:"


def without_runtime(plan: RuntimePlan, reason: str) -> RuntimePlan:
    """The plan for a pinned runtime no wheel of which installs here (`reason` says why)."""
    return RuntimePlan(plan.name, plan.module, "absent", reason, plan.requirement, no_wheel=True)


def plan_from_lock(plan: RuntimePlan, lock_text: str) -> RuntimePlan:
    """`plan`, or the runtime as absent when the pairing lock recorded no wheel of it installs."""
    reason = _header_note(lock_text, ABSENT_NOTE) if plan.status == "install" else None
    return plan if reason is None else without_runtime(plan, reason)


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


def plugin_build_requires(spec: Spec, root: Path) -> list[str]:
    """The plugin's build requirements: its [build-system].requires (PEP 517's default for
    a setup.py-only source) plus [plugin] build_requirements, each a valid requirement."""
    path = root / "pyproject.toml"
    data = _pyproject(path)
    if not path.is_file() and not (root / "setup.py").is_file():
        raise BadInput(
            f"{root}: neither pyproject.toml nor setup.py", hint="set [plugin] subdirectory"
        )
    requires = list(data.get("build-system", {}).get("requires", ["setuptools>=40.8.0", "wheel"]))
    for raw in [*requires, *_build_requirements(spec)]:
        try:
            Requirement(raw)
        except InvalidRequirement as exc:
            raise BadInput(f"{path}: bad build requirement {raw!r} ({exc})")
    return [*requires, *_build_requirements(spec)]


def _pyproject(path: Path) -> dict:
    """The pyproject.toml at `path` ({} when there is none); BadInput when it cannot be read."""
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{path}: cannot read ({exc})")


def _build_requirements(spec: Spec) -> tuple[str, ...]:
    """`[plugin] build_requirements` (none without a plugin)."""
    return spec.plugin.build_requirements if spec.plugin is not None else ()


def vendor_image_packages(spec: Spec) -> frozenset[str]:
    """Canonical names of what the vendor image provides, never resolved on a cpu runner:
    `[runtime] provides`, and `[runtime] package` unless the index installs it."""
    rt = spec.runtime
    if rt is None:
        return frozenset()
    names = list(rt.provides)
    if rt.package and runtime_plan(spec, "cpu", None).status != "install":
        names.append(rt.package)
    return frozenset(canonicalize_name(n) for n in names)


def without_vendor_image(spec: Spec, lines: list[str]) -> tuple[list[str], list[str]]:
    """(kept, left out): requirements on what the vendor image provides are left out."""
    vendor = vendor_image_packages(spec)
    kept: list[str] = []
    left: list[str] = []
    for line in lines:
        (left if canonicalize_name(Requirement(line).name) in vendor else kept).append(line)
    return kept, left


@dataclass(frozen=True)
class PluginBuildPlan:
    """What the plugin's build environment holds, from what it declares."""

    declared: tuple[str, ...]  # [build-system].requires + [plugin] build_requirements
    requirements: tuple[str, ...]  # what the build environment gets
    left_out: tuple[str, ...]  # provided by the vendor image
    torch: dict[str, str] | None  # {"declared", "used"} when the plugin declares torch

    def record(self) -> dict[str, object]:
        """The build-plugin.json keys for what differs from the declared requirements."""
        out: dict[str, object] = {}
        if self.left_out:
            out["left_out"] = {
                "requirements": list(self.left_out),
                "reason": "provided by the vendor image: deferred to the hardware runner",
            }
        if self.torch:
            out["torch"] = dict(self.torch)
        return out


def plugin_build_plan(
    spec: Spec, root: Path | None, recorded: list[str] | None = None
) -> PluginBuildPlan:
    """The plugin's build requirements as its build env gets them: without the vendor image's,
    torch as `[build] torch`. `recorded`: its [build-system].requires from the lock."""
    if recorded is not None:
        declared = [*recorded, *_build_requirements(spec)]
    elif root is None:
        raise BadInput("the plugin's build requirements need its source", hint="--plugin-source")
    else:
        declared = plugin_build_requires(spec, root)
    kept, left = without_vendor_image(spec, declared)
    torch: dict[str, str] | None = None
    requirements: list[str] = []
    for line in kept:
        if canonicalize_name(Requirement(line).name) == "torch":
            torch = {"declared": line, "used": torch_requirement(spec.build.torch)}
            continue
        requirements.append(line)
    if torch:
        requirements.append(torch["used"])
    return PluginBuildPlan(tuple(declared), tuple(requirements), tuple(left), torch)


def plugin_build_request(
    spec: Spec, root: Path | None, recorded: list[str] | None = None
) -> LockRequest | None:
    """The plugin's own build lock ([plugin] build_constraints), or None: built in the core's.
    `recorded`: the plugin's [build-system].requires as the lock recorded them."""
    if spec.plugin is None or not spec.plugin.build_constraints:
        return None
    name = spec.plugin.name
    plan = plugin_build_plan(spec, root, recorded)
    own = plan.declared[: len(plan.declared) - len(_build_requirements(spec))]
    notes = [
        "Inputs: the plugin's [build-system].requires and [plugin] build_requirements.",
        recorded_line(BUILD_REQUIRES_NOTE, list(own)),
    ]
    if plan.left_out:
        notes.append(
            "Left out, provided by the vendor image ([runtime]): " + ", ".join(plan.left_out)
        )
    if plan.torch:
        notes.append(
            f"The plugin declares {plan.torch['declared']!r}; this build uses "
            f"{plan.torch['used']} ([build] torch)."
        )
    return LockRequest(
        name=f"build-plugin-{spec.name}",
        requirements=tuple(sorted({*plan.requirements, "build"})),
        python=spec.build.python,
        platform=spec.build.platform,
        title=f"Build requirements for {name} (its own build lock), Python {spec.build.python}",
        notes=tuple(notes),
    )


def static_dependencies(root: Path) -> list[str] | None:
    """[project].dependencies when pyproject.toml declares them statically, else None."""
    project = _pyproject(root / "pyproject.toml").get("project", {})
    if not project or "dependencies" in project.get("dynamic", []):
        return None
    return list(project.get("dependencies", []))


def plugin_dependencies(root: Path, requires_dist: list[str] | None = None) -> list[str]:
    """The plugin's dependencies: [project].dependencies when declared statically, else
    (dynamic, or a setup.py plugin) the built wheel's Requires-Dist (`requires_dist`, from
    build-plugin.json) without the extras-only entries."""
    static = static_dependencies(root)
    if static is not None:
        return static
    if requires_dist is None:
        pyproject = root / "pyproject.toml"
        has_project = pyproject.is_file() and "[project]" in pyproject.read_text(encoding="utf-8")
        how = "dynamic in pyproject.toml" if has_project else "in setup.py"
        raise BadInput(
            f"{root}: the plugin's dependencies are {how}; they are read from the built "
            "wheel's Requires-Dist (build-plugin.json)",
            hint="run `vpr build-plugin --spec FILE` before `vpr lock` / `vpr env`",
        )
    out = []
    for line in requires_dist:
        req = Requirement(line)
        if req.marker is not None and "extra" in str(req.marker):
            continue
        out.append(line)
    return out


def runtime_plan(spec: Spec, runner: str, runtime_env: Path | None) -> RuntimePlan:
    rt = spec.runtime
    if rt is None:
        return RuntimePlan("none", None, "none", "the spec names no vendor runtime")
    name, module, pythons = rt.name, rt.module, rt.python
    if runtime_env is not None:
        return RuntimePlan(name, module, "runtime-env", f"from the environment at {runtime_env}")
    requirement = f"{rt.package}=={rt.version}" if rt.package and rt.version else None
    if pythons and spec.build.python not in pythons:
        reason = (
            f"{rt.package if rt.package is not None else module} ships wheels for CPython "
            f"{', '.join(pythons)} only; this pairing is built for {spec.build.python}"
        )
        return RuntimePlan(name, module, "absent", reason, requirement)
    if requirement:
        return RuntimePlan(name, module, "install", f"{requirement} from the index", requirement)
    reason = "the spec pins no runtime package; give --runtime-env on the hardware runner"
    return RuntimePlan(name, module, "absent", reason)


def _without_core(spec: Spec, deps: list[str]) -> list[str]:
    """The plugin's dependencies without the core (our built wheel: its requirements come from
    requirements/common.txt); BadInput for a declared range that excludes the spec's core."""
    out = []
    for line in deps:
        req = Requirement(line)
        if canonicalize_name(req.name) != canonicalize_name(spec.core.name):
            out.append(line)
        elif req.specifier and not req.specifier.contains(spec.core.version, prereleases=True):
            raise BadInput(
                f"the plugin declares {line!r}, which excludes {spec.core.name} "
                f"{spec.core.version} ([core] version of {spec.path})",
                hint="pair the plugin with a core version it declares",
            )
    return out


def env_lock_request(
    spec: Spec,
    core_tree: Path,
    plugin_root: Path | None,
    plan: RuntimePlan,
    requires_dist: list[str] | None = None,
    *,
    recorded: list[str] | None = None,
) -> LockRequest:
    """The pairing lock's request. `recorded`: the plugin's dependencies as the lock recorded
    them (`vpr lock --check` where the plugin source cannot be reached)."""
    common = core_tree / "requirements" / "common.txt"
    if not common.exists():
        raise BadInput(f"{common}: not in the verified core source", hint="check [core] version")
    if recorded is not None:
        declared = list(recorded)
    elif plugin_root is None:
        raise BadInput("the plugin's dependencies need its source", hint="--plugin-source")
    else:
        declared = plugin_dependencies(plugin_root, requires_dist)
    deps, left = without_vendor_image(spec, _without_core(spec, declared))
    requirements = [
        *read_requirements_file(common),
        torch_requirement(spec.build.torch),
        *deps,
        *spec.env.requirements,
    ]
    runtime = plan.status == "install" and plan.requirement
    package = spec.runtime.package if spec.runtime else None
    if runtime:
        requirements.append(plan.requirement)
    vendor = (
        ("Left out, provided by the vendor image ([runtime]): " + ", ".join(left),) if left else ()
    )
    if plan.no_wheel:
        vendor = (*vendor, f"{ABSENT_NOTE} {plan.reason}")
    return LockRequest(
        name=f"env-{spec.name}",
        requirements=tuple(requirements),
        overrides=spec.env.overrides,
        caps=spec.env.caps,
        files=("torch", *([canonicalize_name(package)] if runtime and package else [])),
        python=spec.build.python,
        platform=spec.build.platform,
        title=f"Pairing environment {spec.name}: vLLM {spec.core.version} requirements/common.txt"
        f" + {spec.plugin.name if spec.plugin else 'plugin'} + torch=={spec.build.torch}",
        notes=(
            "Inputs: requirements/common.txt from the verified sdist, the plugin's "
            "dependencies, [env] requirements; [env] overrides win.",
            recorded_line(DEPENDENCIES_NOTE, declared),
            *vendor,
        ),
    )


def env_left_out(
    spec: Spec, plugin_root: Path, requires_dist: list[str] | None = None
) -> list[str]:
    """The plugin's dependencies the pairing lock leaves out: the vendor image's."""
    return without_vendor_image(spec, plugin_dependencies(plugin_root, requires_dist))[1]
