"""What `vpr install` leaves beside a certified environment for vpr-guard (pure).

`ENV/vpr-guard/` holds the manifest as the store served it (its signature verified through
the store's signed head), its signed statement, the pairing's lock and `certified.json`:
the manifest's sha256 (vpr-guard checks it again at every start), the command that brings
the environment back, the roles of the distributions it names in its messages, and the
snapshot the guard took of the verified environment (`python -m vpr_guard snapshot`).
The names are vpr-guard's own (guard/src/vpr_guard/__init__.py); a unit test keeps them
equal.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

if TYPE_CHECKING:
    from vllm_plugin_release.core.manifestmodel import Manifest

STATE_DIR = "vpr-guard"
MANIFEST = "manifest.json"
STATEMENT = "manifest.intoto.jsonl"
LOCK = "manifest.lock.txt"  # beside manifest.json, where `vpr manifest check-env` looks
CERTIFIED = "certified.json"
POLICY = "policy"
POLICIES = ("enforce", "warn", "off")
CERTIFIED_KIND = "vpr-guard/certified"


def roles(manifest: Manifest, installed: dict[str, Any]) -> dict[str, str]:
    """role -> distribution name, for the guard's messages: core, plugin, guard, the vendor
    runtime (its locked wheel) and torch, where the environment holds them."""
    out = snapshot_roles(manifest)
    filename = manifest.runtime.wheel_filename
    if filename is not None and "-" in filename:
        out["runtime"] = filename.split("-", 1)[0]
    if "torch" in installed:
        out["torch"] = "torch"
    return {role: str(canonicalize_name(name)) for role, name in out.items()}


def recover_line(pid: str, store: str, key: str | None, env_dir: str) -> str:
    """The `vpr install` command that brings this environment back to its certified set."""
    parts = ["vpr", "install", pid[:16], "--store", store]
    if key:
        parts += ["--key", key]
    parts += ["--python-env", env_dir]
    return shlex.join(parts)


def certified_record(
    manifest: Manifest,
    manifest_sha256: str,
    snapshot: dict[str, Any],
    recover: str,
) -> dict[str, Any]:
    """certified.json: the manifest's digest, how to get back, roles and the snapshot."""
    dists = snapshot.get("dists") or {}
    return {
        "kind": CERTIFIED_KIND,
        "pairing_id": manifest.pairing_id,
        "manifest_sha256": manifest_sha256,
        "recover": recover,
        "roles": roles(manifest, dists),
        "dists": dists,
        "files": snapshot.get("files") or {},
    }


def snapshot_roles(manifest: Manifest) -> dict[str, str]:
    """The distributions whose files the snapshot lists one by one."""
    return {part.role: part.name for part in manifest.parts()}
