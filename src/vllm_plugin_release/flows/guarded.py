"""`vpr install`'s part for vpr-guard: what the guard says about an existing environment
(which distributions to install again), and the certified record it leaves beside the
environment once it matches (`core.guardstate`): the verified manifest, its statement, the
lock and the snapshot the guard took of the verified environment.

A pairing whose manifest names no guard (published before it existed) is installed as
before, and nothing is written beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core import bounded, progress
from vllm_plugin_release.core import guardstate as gs
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.core.manifestmodel import Manifest
from vllm_plugin_release.edges import guard as vpr_guard

if TYPE_CHECKING:
    from vllm_plugin_release.flows.installing import Target, VerifiedPairing

RECORD_KINDS = ("build", "files")  # the guard's findings that a reinstall repairs


@dataclass
class Guard:
    """The certified record this install would leave (its manifest digest and recovery
    line), and whether the environment already holds exactly that one (`current`)."""

    manifest_sha256: str
    recover: str
    current: bool = False


def recover(pid: str, store: str, target: Target, env_dir: Path) -> str:
    """The `vpr install` line the guard prints: this store (a folder made absolute), key
    and environment."""
    import os

    where = store if "://" in store else os.path.abspath(store)
    return gs.recover_line(pid, where, target.key_path, str(env_dir))


def _recorded(env_dir: Path) -> dict[str, Any] | None:
    """certified.json beside the environment, when there is a readable one."""
    path = env_dir / gs.STATE_DIR / gs.CERTIFIED
    try:
        data = bounded.loads(bounded.read_file(path, bounded.MAX_INDEX, "vpr-guard record"))
    except (OSError, ValueError):  # missing, damaged, too large: written again
        return None
    return data if isinstance(data, dict) else None


def to_reinstall(
    manifest: Manifest, python: Path, env_dir: Path, guard: Guard, problems: list[str]
) -> list[str]:
    """The distributions `uv pip sync` must install again (it keeps a distribution whose
    version matches): the certified wheels whose files check-env found changed, and what
    the guard found to be another build or changed in place. Sets `guard.current`."""
    names = {
        part.name
        for part in manifest.parts()
        if any(f"{part.role} {part.name} " in p for p in problems)
    }
    if manifest.guard is None:
        guard.current = True  # nothing is recorded for a pairing without a guard
        return sorted(names)
    recorded = _recorded(env_dir)
    if (
        recorded is None
        or recorded.get("manifest_sha256") != guard.manifest_sha256
        or recorded.get("recover") != guard.recover
    ):
        return sorted(names)  # recorded again after the check; the guard's view is moot
    try:
        answer = vpr_guard.check(python, env_dir)
    except GateFailed as exc:  # the guard itself is gone or broken: the sync repairs it
        progress.warn(str(exc))
        return sorted(names)
    for finding in answer.findings:
        if finding.kind in RECORD_KINDS and finding.name:
            names.add(finding.name)
    guard.current = answer.ok
    if answer.findings:
        progress.info("vpr-guard found: " + "; ".join(f.text for f in answer.findings[:8]))
    return sorted(names)


def write_state(
    env_dir: Path, python: Path, pairing: VerifiedPairing, lock_text: str, guard: Guard
) -> None:
    """ENV/vpr-guard/: the verified manifest, its statement and lock, then certified.json
    (last: the guard compares the manifest's sha256 with it)."""
    manifest = pairing.manifest
    snapshot = vpr_guard.snapshot(python, gs.snapshot_roles(manifest))
    record = gs.certified_record(manifest, pairing.sha256, snapshot, guard.recover)
    folder = env_dir / gs.STATE_DIR
    folder.mkdir(exist_ok=True)
    atomic_write_bytes(folder / gs.MANIFEST, pairing.data)
    atomic_write_bytes(folder / gs.STATEMENT, pairing.envelope)
    atomic_write_bytes(folder / gs.LOCK, lock_text.encode())
    atomic_write_bytes(
        folder / gs.CERTIFIED, (json.dumps(record.to_json(), sort_keys=True) + "\n").encode()
    )


def write_policy(env_dir: Path, policy: str | None) -> None:
    """ENV/vpr-guard/policy when one is asked for (an operator's file is left alone)."""
    if policy is None:
        return
    path = env_dir / gs.STATE_DIR / gs.POLICY
    text = f"{policy}\n"
    if path.is_file() and path.read_text(encoding="utf-8", errors="replace") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode())
