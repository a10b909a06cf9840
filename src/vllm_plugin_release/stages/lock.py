"""The lock stage (`vpr lock`): resolve and write, or check, every lock of a pairing."""

from __future__ import annotations

from pathlib import Path

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.lockfile import LockRequest, check_lock
from vllm_plugin_release.edges.uv import compile_lock, runtime_has_no_wheel
from vllm_plugin_release.stages.requests import (
    BUILD_REQUIRES_NOTE,
    DEPENDENCIES_NOTE,
    build_request,
    env_lock_request,
    plan_from_lock,
    plugin_build_request,
    recorded_inputs,
    runtime_plan,
    static_dependencies,
    without_runtime,
)


def pairing_locks(
    spec: Spec,
    tree: Path,
    plugin_root: Path | None,
    requires_dist: list[str] | None = None,
    *,
    from_locks: bool = False,
    check: bool = False,
) -> list[tuple[LockRequest, Path]]:
    """(request, lock file) for each lock of the pairing, build lock first. `requires_dist`: the
    built plugin wheel's; `from_locks`: the plugin's inputs as the locks recorded them."""
    request, _ = build_request(spec, tree)
    locks = [(request, spec.resolve(spec.build.constraints))]
    if not spec.plugin or (plugin_root is None and not from_locks):
        return locks
    if spec.plugin.build_constraints:
        dest = spec.resolve(spec.plugin.build_constraints)
        recorded = _recorded(dest, BUILD_REQUIRES_NOTE) if from_locks else None
        plugin_request = plugin_build_request(spec, plugin_root, recorded)
        if plugin_request is not None:
            locks.append((plugin_request, dest))
    dest = spec.resolve(spec.env_constraints)
    plan = runtime_plan(spec, "cpu", None)
    if from_locks or check:  # as the lock was made: with the runtime, or without and why
        plan = plan_from_lock(plan, _text(dest))
    elif plan.status == "install" and plan.requirement:
        missing = runtime_has_no_wheel(plan.requirement, spec.build.python, spec.build.platform)
        if missing:
            progress.warn(f"lock: the runtime is absent from {dest.name} because {missing}")
            plan = without_runtime(plan, missing)
    if from_locks:
        recorded = _recorded(dest, DEPENDENCIES_NOTE)
        locks.append((env_lock_request(spec, tree, None, plan, recorded=recorded), dest))
        return locks
    assert plugin_root is not None
    if requires_dist is None and static_dependencies(plugin_root) is None:
        progress.warn(
            f"lock: {spec.env_constraints} not written: the plugin's dependencies are "
            "dynamic and come from its built wheel; run `vpr build-plugin`, then `vpr lock`"
        )
        return locks
    locks.append((env_lock_request(spec, tree, plugin_root, plan, requires_dist), dest))
    return locks


def _text(lock: Path) -> str:
    try:
        return lock.read_text(encoding="utf-8")
    except OSError:
        return ""  # no lock yet: checking it says so


def _recorded(lock: Path, label: str) -> list[str]:
    """The plugin inputs `lock` recorded under `label`: BadInput when missing or none."""
    try:
        text = lock.read_text(encoding="utf-8")
    except OSError:
        raise BadInput(
            f"{lock}: lock file not found", hint="run `vpr lock --spec FILE` to write it"
        )
    found = recorded_inputs(text, label)
    if found is None:
        raise BadInput(
            f"{lock}: the plugin source cannot be reached here and the lock records no "
            f"'{label}' line to check it with",
            hint="run `vpr lock --spec FILE --plugin-source CLONE` once (it records them) and "
            "commit the lock",
        )
    return found


# The spec and its two verified sources, then one keyword per `vpr lock` flag: a bundle
# would only be unpacked here again.
def lock(
    spec: Spec,
    tree: Path,
    plugin_root: Path | None,
    *,
    check: bool = False,
    upgrade: bool = False,
    requires_dist: list[str] | None = None,
    from_locks: bool = False,
) -> None:
    """Write every lock missing or not current (`check`: BadInput if stale; `upgrade`: resolve
    again); a current lock is left byte for byte."""
    for request, dest in pairing_locks(
        spec, tree, plugin_root, requires_dist, from_locks=from_locks
    ):
        if check:
            check_lock(dest, request)
            recorded = from_locks and request.name != "build-core"  # the core's needs no plugin
            how = " (the plugin's inputs as recorded in it)" if recorded else ""
            progress.info(f"lock: {dest} is current{how}")
            continue
        why = None if upgrade else _not_current(dest, request)
        if why == "":
            progress.info(f"lock: {dest} is current; left as it is (--upgrade resolves it again)")
            continue
        with progress.status(f"lock: resolving {request.name} for Python {request.python}"):
            compile_lock(request, dest, spec.build.find_links)
        progress.info(f"lock: wrote {dest}" + (f" ({why})" if why else " (--upgrade)"))


def _not_current(dest: Path, request: LockRequest) -> str:
    """Why the lock at `dest` must be written (missing, stale, edited...); "" when current."""
    try:
        check_lock(dest, request)
    except BadInput as exc:
        return exc.message.split(": ", 1)[-1]
    return ""
