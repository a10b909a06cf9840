"""`vpr install`: one certified pairing from the manifest store into a Python environment,
each step a gate for the next and nothing from the store used before it is verified (the
steps: docs/manifest.md, "vpr install")."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.core import attest, bounded, progress
from vllm_plugin_release.core import guardstate as gs
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core import storeindex as trust
from vllm_plugin_release.core.bounded import MAX_DOCUMENT
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.manifestmodel import Manifest
from vllm_plugin_release.edges import guard as vpr_guard
from vllm_plugin_release.edges import interpreters, uv
from vllm_plugin_release.edges import store as st
from vllm_plugin_release.edges.trust import Trusted
from vllm_plugin_release.stages import verify

CERTIFIED = ("fleet", "pilot")


@dataclass(frozen=True)
class Request:
    """What was asked for: an id (prefix), or a core and a plugin."""

    pairing: str | None = None
    core: str | None = None
    plugin: str | None = None


class VerifiedPairing(NamedTuple):
    """A stored pairing's manifest, verified, with the bytes the store served (never re-read)."""

    manifest: Manifest
    sha256: str
    data: bytes
    envelope: bytes


@dataclass(frozen=True)
class Target:
    """Where and how to install; `key_path`: the key the guard's recovery line names."""

    env_dir: Path
    scratch: Path
    offline: bool = False
    allow_uncertified: bool = False
    guard_policy: str | None = None
    key_path: str | None = None


@dataclass
class Installed:
    pairing_id: str
    verdict: str | None
    python: str
    status: str  # "installed" | "unchanged"
    pins: int
    store: str
    keyid: str | None


def pick(
    index: si.StoreIndex, pairing: str | None, core: str | None, plugin: str | None
) -> si.IndexEntry:
    """The store entry for an id (or unique prefix of 8+ characters), else the best entry for
    core and plugin (newest core, best verdict, as `vpr manifest query` orders them)."""
    if pairing:
        if not 8 <= len(pairing) <= 64 or any(c not in "0123456789abcdef" for c in pairing):
            raise BadInput(f"{pairing[:80]!r}: a pairing id is 8 to 64 hexadecimal characters")
        hits = [e for pid, e in index.pairings.items() if pid.startswith(pairing)]
        if len(hits) != 1:
            raise BadInput(
                f"pairing {pairing}: {'no' if not hits else len(hits)} store entries match",
                hint="`vpr manifest query` lists the pairings and their ids",
            )
        return hits[0]
    if not (core and plugin):
        raise BadInput(
            "name the pairing: PAIRING_ID, or --core VERSION and --plugin NAME",
            hint="`vpr manifest query` lists the pairings in the store",
        )
    hits = si.query(index, core=core, plugin=plugin)
    if not hits:
        raise GateFailed(f"no pairing of core {core} with plugin {plugin} in the store")
    return hits[0]


def verified_pairing(trusted: Trusted, entry: si.IndexEntry, request: Request) -> VerifiedPairing:
    """The entry's pairing, verified and matched to the request and the ledger (steps 3, 4)."""
    pid = trust.check_pid(entry.pairing_id, trusted.store.where(si.INDEX_FILE))
    manifest_at, statement_at = f"{si.PAIRINGS}/{pid}.json", f"{si.PAIRINGS}/{pid}.intoto.jsonl"
    data = trusted.store.read_bytes(manifest_at, MAX_DOCUMENT)
    envelope = trusted.store.read_bytes(statement_at, MAX_DOCUMENT)
    where = (trusted.store.where(manifest_at), trusted.store.where(statement_at))
    manifest, _ = attest.verify_pairing(data, envelope, trusted.public_key, where)
    digest = hashlib.sha256(data).hexdigest()
    problems = trust.request_problems(
        manifest, entry, pid=pid, manifest_sha256=digest, core=request.core, plugin=request.plugin
    )
    if problems:
        raise GateFailed(
            f"{where[0]}: not the pairing asked for:\n  " + "\n  ".join(problems),
            hint="the store's files do not match its index; nothing was installed",
        )
    old = trust.superseded(trusted.ledger(), pid, digest)
    if old:
        raise GateFailed(
            f"{where[0]}: {old}",
            hint="the store must serve the pairing's newest manifest (its publisher "
            "re-publishes it); nothing was installed",
        )
    return VerifiedPairing(manifest, digest, data, envelope)


def check_stored_wheels(store: st.Store, manifest: Manifest) -> None:
    """A folder store's wheel copies have the signed sha256 (uv checks them again by hash;
    this names the file plainly). Over HTTP only uv's check applies."""
    if not isinstance(store, st.DirStore):
        return
    from vllm_plugin_release.core.cache import sha256_file

    for part in manifest.parts():
        wheel = part.wheel
        relative = trust.store_path(f"{si.WHEELS}/{wheel.filename}", f"{part.role}.wheel.filename")
        path = store.root / relative
        if path.is_file() and sha256_file(path) != wheel.sha256:
            raise GateFailed(
                f"{path}: sha256 {sha256_file(path)}, but the signed manifest certifies "
                f"{wheel.sha256}",
                hint="the store's copy was changed after publishing; nothing was installed",
            )


def requirements_text(manifest: Manifest, lock_text: str) -> str:
    """The lock, then the certified core, plugin and guard wheels pinned by sha256."""
    lines = [lock_text.rstrip("\n"), "# the certified wheels (vpr install)"]
    for part in manifest.parts():
        lines.append(f"{part.name}=={part.wheel.version} --hash=sha256:{part.wheel.sha256}")
    return "\n".join(lines) + "\n"


def install(trusted: Trusted, request: Request, target: Target) -> Installed:
    index = trusted.index()  # step 1: vouched for by the signed head, every entry checked
    entry = pick(index, request.pairing, request.core, request.plugin)
    pid = trust.check_pid(entry.pairing_id, trusted.store.where(si.INDEX_FILE))
    if not entry.has_lock:
        raise BadInput(
            f"pairing {pid[:16]}: its store entry carries no pairing lock (published before "
            "locks were stored)",
            hint="publish the pairing again (`vpr publish`) to store its lock",
        )
    pairing = verified_pairing(trusted, entry, request)
    manifest = pairing.manifest
    verdict = manifest.verdict
    if verdict not in CERTIFIED and not target.allow_uncertified:
        raise GateFailed(
            f"pairing {pid[:16]}: verdict {verdict or 'absent'}; only fleet and pilot "
            "pairings are installed",
            hint="pass --allow-uncertified to install it anyway",
        )
    store = trusted.store
    check_stored_wheels(store, manifest)
    lock_at = si.lock_path(pid)
    lock_text = si.check_lock(manifest, store.read_bytes(lock_at), store.where(lock_at))
    pins = len(verify.lock_pins(manifest, lock_text))
    env_dir = Path(os.path.abspath(target.env_dir))  # never read as an option by uv
    python = env_dir / "bin" / "python"
    keyid = attest.keyid(trusted.public_key)
    result = Installed(pid, verdict, str(python), "unchanged", pins, store.location, keyid)
    guard = Guard(pairing.sha256, recover(pid, store.location, target, env_dir))
    reinstall: list[str] = []
    problems: list[str] = []
    if python.exists():
        problems = verify.check_environment(manifest, python, None, lock_text)
        reinstall = to_reinstall(manifest, python, env_dir, guard, problems)
        if not problems and not reinstall and guard.current:
            write_policy(env_dir, target.guard_policy)
            return result
    if not python.exists() or problems or reinstall:
        _install(_Sync(manifest, env_dir, lock_text, pins, reinstall), store, target)
        problems = verify.check_environment(manifest, python, None, lock_text)
        if problems:
            raise GateFailed(
                f"{env_dir}: after the install the environment does not match pairing "
                f"{pid[:16]}:\n  " + "\n  ".join(problems)
            )
        result.status = "installed"
    if manifest.guard is not None:
        write_state(env_dir, python, pairing, lock_text, guard)
        result.status = "installed"
    write_policy(env_dir, target.guard_policy)
    return result


@dataclass(frozen=True)
class _Sync:
    """What an install makes the environment hold (`reinstall`: again from their wheels)."""

    manifest: Manifest
    env_dir: Path
    lock_text: str
    pins: int
    reinstall: list[str]


def _install(job: _Sync, store: st.Store, target: Target) -> None:
    """`uv pip sync` of the lock and the certified wheels (those in `reinstall` again)."""
    target.scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="install-", dir=target.scratch))  # mode 0700
    try:
        requirements = work / "requirements.txt"
        text = requirements_text(job.manifest, job.lock_text)
        # a new file only this user can read (mode 0600, whatever the umask)
        fd = os.open(requirements, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        _sync(job, requirements, [store.find_links()], offline=target.offline)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _sync(job: _Sync, requirements: Path, find_links: list[str], *, offline: bool) -> None:
    """Create the environment when missing, then make it hold exactly `requirements`."""
    env_dir = job.env_dir
    python = env_dir / "bin" / "python"
    if not python.exists():
        version = ".".join(str(job.manifest.core.python).split(".")[:2])
        # found where the build finds it (VPR_INTERPRETER, uv, pyenv, asdf/mise, /usr/bin);
        # never downloaded: an interpreter from the network is neither pinned nor verified
        found = interpreters.find(version, None, uv.uv_bin())
        progress.info(f"creating a Python {found.version} environment at {env_dir} ({found.path})")
        uv.create_venv(env_dir, found.path, offline=offline)
    with progress.status(f"installing {job.pins} pins with --require-hashes into {env_dir}"):
        uv.sync_locked(python, requirements, find_links, offline=offline, reinstall=job.reinstall)


# vpr-guard's part: what the guard says about an existing environment (what to install
# again), and the certified record left beside it once it matches (`core.guardstate`).

RECORD_KINDS = ("build", "files")  # the guard's findings that a reinstall repairs


@dataclass
class Guard:
    """The certified record this install would leave; `current`: the environment holds it."""

    manifest_sha256: str
    recover: str
    current: bool = False


def recover(pid: str, store: str, target: Target, env_dir: Path) -> str:
    """The `vpr install` line the guard prints (a folder store made absolute)."""
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
