"""The lock stage (`vpr lock`): resolve and write, or check, every lock of a pairing.

The core's build lock (`[build] constraints`) and, when the spec has a plugin, the
plugin's own build lock when the spec asks for one (`[plugin] build_constraints`) and
the pairing environment's lock (`[env] constraints`). The verified core source tree and
the plugin checkout are handed in by the flow; nothing is fetched here.
"""

from __future__ import annotations

from pathlib import Path

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.lockfile import LockRequest, check_lock
from vllm_plugin_release.edges.uv import compile_lock
from vllm_plugin_release.spec.model import Spec
from vllm_plugin_release.stages.requests import (
    build_request,
    env_lock_request,
    plugin_build_request,
    runtime_plan,
    static_dependencies,
)


def pairing_locks(
    spec: Spec, tree: Path, plugin_root: Path | None, requires_dist: list[str] | None = None
) -> list[tuple[LockRequest, Path]]:
    """(request, lock file) for each lock of the pairing, build lock first.
    `requires_dist`: the built plugin wheel's, for a plugin with dynamic dependencies."""
    request, _ = build_request(spec, tree)
    locks = [(request, spec.resolve(spec.build.constraints))]
    if spec.plugin and plugin_root is not None:
        plugin_request = plugin_build_request(spec, plugin_root)
        if plugin_request is not None:
            locks.append((plugin_request, spec.resolve(spec.plugin["build_constraints"])))
        if requires_dist is None and static_dependencies(plugin_root) is None:
            progress.warn(
                f"lock: {spec.env_constraints} not written: the plugin's dependencies are "
                "dynamic and come from its built wheel; run `vpr build-plugin`, then `vpr lock`"
            )
            return locks
        plan = runtime_plan(spec, "cpu", None)
        env_request = env_lock_request(spec, tree, plugin_root, plan, requires_dist)
        locks.append((env_request, spec.resolve(spec.env_constraints)))
    return locks


def lock(
    spec: Spec,
    tree: Path,
    plugin_root: Path | None,
    *,
    check: bool = False,
    requires_dist: list[str] | None = None,
) -> None:
    """Write every lock (or, with `check`, verify each is current: BadInput if stale)."""
    for request, dest in pairing_locks(spec, tree, plugin_root, requires_dist):
        if check:
            check_lock(dest, request)
            progress.info(f"lock: {dest} is current")
            continue
        with progress.status(f"lock: resolving {request.name} for Python {request.python}"):
            compile_lock(request, dest, spec.build.find_links)
        progress.info(f"lock: wrote {dest}")
